/*
 * request.h - what a user asks, as values, and what it resolves to (planner/request.c).
 *
 * An ap_request holds the inputs of `estimate`, `simulate`, `partition`, `plan` and `compare`
 * as plain values, each optional one with a `given` marker: the model path, the cluster (a
 * file or a GPU type and count, with overrides), the plan pinned by the user, the batch and the
 * search options. The command line (cli/args.c) turns flags into one; library callers fill one
 * directly. ap_request_resolve loads the model and cluster and applies every default (sequence
 * length, global batch from tokens per step, degrees, offload pins, dtype for the GPU), refusing
 * contradictions with one line that names the flag.
 *
 * The plan pins are an ap_plan plus one `given` bit per row of its field table (plan.h), so the
 * plan flags, plan.json and the plan-cache key list each member once. The search inputs that
 * are not plan members have their own table (ap_search_fields), which with the plan table and
 * the model and cluster fingerprints makes the cache key (ap_search_key_text).
 *
 * It lives in planner/ because what it resolves to includes the search options (search.h) and
 * the stage solver (partition.h).
 */
#ifndef AP_REQUEST_H
#define AP_REQUEST_H

#include "autoplan/estimate.h"
#include "autoplan/fields.h"
#include "autoplan/partition.h"
#include "autoplan/search.h"
#include "autoplan/strbuf.h"

typedef struct { int given; int64_t v; } ap_opt_int;
typedef struct { int given; double v; } ap_opt_real;

typedef struct ap_request {
    const char *model;          /* MODEL: config.json, a model directory or an autoplan model
                                   file (borrowed; required) */
    /* the cluster: a file (--cluster), or a catalog GPU (--gpu, default a100-sxm4-80g) and a
     * count (--gpus); the values below override either */
    const char *cluster_file;   /* borrowed, NULL = none */
    const char *gpu;            /* borrowed, NULL = not given */
    ap_opt_int gpus;            /* --gpus (of a sweep: the count resolved) */
    ap_opt_int gpus_per_node, nvlink_domain;
    ap_opt_real network_bw, link_bw, pcie_bw; /* bytes per second */
    ap_opt_real cpu_mem;        /* bytes per node */
    ap_opt_real nvme, nvme_bw, nvme_read_bw, nvme_write_bw; /* NVMe per node: bytes, bytes/s */
    int allow_cross_node_tp;
    /* the plan: bit i of plan_given says row i of ap_plan_fields was given in `plan` */
    ap_plan plan;
    uint64_t plan_given;
    /* heterogeneous placement (hetero.h): Colossal-AI GeminiPlugin, DeepSpeed offload device */
    ap_opt_int gemini;          /* ap_gemini_placement */
    ap_opt_real shard_param_frac;
    ap_opt_int offload_device;  /* ap_offload_device */
    /* --fix pins (plan search only), as the plan above */
    ap_plan fix;
    uint64_t fix_given;
    /* batch and estimate options */
    ap_opt_real tokens_per_step;/* global batch in tokens when --gbs is not given */
    ap_opt_real headroom;       /* bytes kept free per GPU */
    int expandable_segments;    /* PyTorch's allocator with expandable_segments:True
                                   (ap_estimate_opts.allocator_expandable) */
    const char *nccl_version;   /* --nccl-version as given (NULL: 2.22 or later;
                                   ap_estimate_opts.nccl_eager) */
    /* search options */
    ap_opt_int top;             /* plans kept, 1..1000 (default 10) */
    ap_opt_real tie_margin;     /* ap_search_opts.tie_margin, 0..1 (default
                                   AP_VALIDATED_TIME_ERROR) */
    int no_prune, no_sp, no_overlap; /* no_sp/no_overlap: estimate turns sp (tp > 1) and
                                        overlap on unless these are set or the plan gives them */
    int no_partition;           /* --solver off */
    ap_opt_int solver;          /* ap_solver for the stage re-split (default AUTO) */
    ap_opt_int threads;         /* search worker threads, 1..1024 (default one per core; the
                                   answer does not depend on it, so the cache key leaves it out) */
} ap_request;

/* Nothing given (model NULL, solver AUTO). */
void ap_request_init(ap_request *rq);

/* Mark row `row` of ap_plan_fields given in rq->plan (or rq->fix) after setting its value. */
void ap_request_give(uint64_t *given, int row);
/* 1 when the plan row named `name` (its C name) is given in `given`. */
int ap_request_given(uint64_t given, const char *name);
/* 1 when row `row` of ap_plan_fields is marked in `given` (rows past 63 never are) */
int ap_request_row_given(uint64_t given, int row);

typedef enum {
    AP_REQUEST_ESTIMATE = 0, /* one plan: degrees not given are 1, dp derived, gbs defaults to
                                mbs * dp (estimate, simulate, partition) */
    AP_REQUEST_SEARCH        /* the pins of a search: degrees not given are free, the global
                                batch defaults to 4M tokens (plan, compare) */
} ap_request_mode;

typedef struct ap_resolved {
    ap_model model;
    ap_cluster cluster;
    ap_plan plan;             /* ESTIMATE: the plan with every default; SEARCH: the pins as
                                 given (0 = free), seq and dtype resolved */
    ap_estimate_opts est;
    ap_search_opts search;    /* SEARCH: what ap_search takes */
    int partition;            /* SEARCH: re-split the stages of the top plans */
    ap_solver solver;
    int allow_cross_node_tp;
    char note[256];           /* a default worth telling the user, or "" ("global batch 1024
                                 sequences x 4096 tokens = 4.19M tokens (default ...)") */
} ap_resolved;

/* Pinned degrees (--tp --pp --cp, --fix tp= pp= cp= dp=) that cannot divide `gpus` make every
 * plan illegal: AP_ERR_INPUT naming the pin ("--tp 3 does not divide --gpus 8: ..."). A search
 * resolves it for its count; a sweep checks every count. */
ap_status ap_request_check_pins(const ap_request *rq, int gpus, ap_err *err);

/* The cluster the request describes (no model needed): AP_ERR_INPUT naming the flag or file. */
ap_status ap_request_cluster(const ap_request *rq, ap_cluster *out, ap_err *err);

/* Load the model and cluster and resolve every default for `mode`. On failure err names the
 * flag ("--recompute-layers: 99 is more than the model's 32 layers"); *out is unspecified. */
ap_status ap_request_resolve(const ap_request *rq, ap_request_mode mode, ap_resolved *out,
                             ap_err *err);

/* The request `autoplan estimate` needs to reproduce plan p on base's model and cluster (the
 * cluster inputs and headroom of base, every plan member of p that estimate takes: no_sp /
 * no_overlap where p lacks what estimate turns on by default, the stage split and per-chunk
 * recompute counts of a re-split plan). A Gemini placement or DeepSpeed offload device comes
 * from the default both the search and estimate apply (ap_plan_hetero_default). */
void ap_request_for_plan(const ap_request *base, const ap_plan *p, ap_request *out);

/* The request as `autoplan estimate` arguments (without the command name), each word quoted
 * for the shell when it needs it: "MODEL --gpus 8 --tp 2 ...". */
void ap_request_format(const ap_request *rq, ap_strbuf *out);

/* The search inputs besides the plan pins and the model and cluster: rows over ap_resolved
 * (search.gbs, search.top_k, ..., est.headroom_bytes, partition, solver). */
const ap_field *ap_search_fields(int *n);

/* The canonical text of everything a search of r on cluster c depends on (versions, model and
 * cluster fingerprints, every plan row of r->search.fixed, every ap_search_fields row, the
 * calibration, profiles_fp, a measured profile in r->search.est by content): its hash is the
 * plan-cache key. Prebuilt kernel tables (est.kernels) are keyed through the profile they were
 * built from, which the caller passes beside them. */
void ap_search_key_text(const ap_resolved *r, const ap_cluster *c, uint64_t profiles_fp,
                        ap_strbuf *out);

#endif
