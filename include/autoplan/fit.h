/*
 * fit.h - the largest model a GPU (or a few) and its host can train (planner/fit.c): for each
 * strategy, a bisection over the family's ladder of sizes (family.h) with the strategy's own
 * verdict (the cost model for the plain ones, the heterogeneous-memory simulation for offload,
 * ZeRO-Infinity and Gemini, the full search for "best").
 *
 * The bisection finds a rung that fits whose next rung does not; memory grows along the ladder
 * for the built-in families (tests/test_hetero.c checks the boundary against a scan). The
 * binding resource is what the next size runs out of: GPU memory, host memory, NVMe, or the
 * caller's throughput floor.
 */
#ifndef AP_FIT_H
#define AP_FIT_H

#include "autoplan/family.h"
#include "autoplan/hetero.h"

typedef enum {
    AP_FIT_DDP = 0,          /* data parallel, no sharding (DeepSpeed ZeRO-0) */
    AP_FIT_ZERO2,            /* DeepSpeed ZeRO-2 */
    AP_FIT_ZERO3,            /* DeepSpeed ZeRO-3 */
    AP_FIT_ZERO_OFFLOAD,     /* DeepSpeed ZeRO-2 + offload_optimizer cpu (Ren et al. 2021) */
    AP_FIT_ZERO_INF_CPU,     /* DeepSpeed ZeRO-3 + offload_param and offload_optimizer cpu */
    AP_FIT_ZERO_INF_NVME,    /* ... on nvme (needs the cluster's NVMe) */
    AP_FIT_GEMINI_STATIC,    /* Colossal-AI Gemini static, every fraction 1.0 */
    AP_FIT_GEMINI_AUTO,      /* Colossal-AI Gemini auto */
    AP_FIT_BEST,             /* the best plan autoplan's search finds over all trainers */
    AP_FIT_NSTRATEGIES
} ap_fit_strategy;

/* "ddp", "zero-2", "zero-3", "zero-offload", "zero-infinity-cpu", "zero-infinity-nvme",
 * "gemini-static", "gemini-auto", "best". */
const char *ap_fit_strategy_name(int s);
ap_status ap_fit_strategy_parse(const char *name, int *out, ap_err *err);

typedef struct ap_fit_opts {
    ap_cluster cluster;      /* GPU type, count, host memory, PCIe, NVMe */
    const ap_family *family; /* borrowed for the call */
    int64_t seq;             /* tokens per sequence; 0 = the family's */
    int64_t mbs;             /* micro-batch (sequences); default 1 */
    double tokens_per_step;  /* global batch in tokens; 0 = one micro-batch per GPU */
    ap_recompute recompute;  /* default full */
    int recompute_set;       /* 1: the caller gave it, and "best" searches only it (as it does
                                the sequence and dtype); 0: "best" picks its own */
    int dtype_set;           /* 0: bf16 where the GPU has it, else fp16 */
    ap_dtype dtype;
    double headroom_bytes;   /* default 2 GiB; Gemini auto sizes itself (10% margin) */
    int allocator_expandable;/* PyTorch's expandable_segments allocator (estimate.h) */
    int nccl_eager;          /* NCCL before 2.22 (ap_estimate_opts.nccl_eager) */
    double min_tokens_per_s; /* throughput floor, 0 = none */
    unsigned strategies;     /* bit (1 << ap_fit_strategy); 0 = all */
    /* kernel figures, as ap_estimate_opts (NULL, NULL: the GPU's published tables); borrowed */
    const struct ap_profile *profile;
    const struct ap_kernels *kernels;
    /* worker threads over the strategies (each bisects its own ladder); 0 = one per online
     * core (default). The answer does not depend on it */
    int threads;
    /* operator templates the simulations of the evaluations share (hetero.h ap_hetero_store;
     * the probes of one size and its neighbours simulate the same shapes); borrowed. NULL,
     * the default: ap_fit makes one for the call, ap_fit_eval's simulations build their own */
    struct ap_hetero_store *templates;
} ap_fit_opts;

void ap_fit_opts_init(ap_fit_opts *o);

/* One strategy on one model: whether it trains, what binds, how fast. */
typedef struct ap_fit_verdict {
    int fits;                /* memory fits and the throughput floor holds */
    ap_binding binding;      /* when not: the resource */
    char detail[256];        /* one line: "GPU 25.1 GiB of 24.0 GiB at backward of fc1..." */
    int not_offered;         /* the trainer cannot run the plan (e.g. DeepSpeed and selective
                                recomputation): no resource binds; binding none, detail says */
    double step_s, tokens_per_s;
    double gpu_peak_bytes, host_bytes_per_node, nvme_bytes_per_node;
    ap_plan plan;            /* the plan evaluated (best: the search's choice) */
} ap_fit_verdict;

ap_status ap_fit_eval(const ap_fit_opts *o, int strategy, const ap_model *m, ap_fit_verdict *v,
                      ap_err *err);

typedef struct ap_fit_entry {
    int strategy;
    char name[32];
    int available;           /* 0: cannot run here (e.g. NVMe strategy without NVMe) */
    char why_unavailable[128];
    int found;               /* some size trains */
    int rung, nrungs;
    int64_t largest_params;
    char model[128];         /* the largest model that trains */
    int have_next;           /* the ladder continues */
    int64_t next_params;
    char next_model[128];
    ap_fit_verdict at;       /* verdict at the largest size */
    ap_fit_verdict next;     /* at the next size (why it stops) */
    ap_binding binding;      /* what binds: next.binding (none when the ladder ends) */
    int evaluations;
} ap_fit_entry;

typedef struct ap_fit_result {
    int n;
    ap_fit_entry e[AP_FIT_NSTRATEGIES];
    int nrungs;
    int64_t smallest_params, largest_rung_params;
    /* the batch every evaluation runs (the smallest size's sequence): gbs sequences of seq
       tokens, tokens_per_step asked rounded to a whole micro-batch per GPU */
    int64_t seq, gbs;
} ap_fit_result;

/* Run every requested strategy. AP_ERR_INPUT for bad options (err names the field), and when
 * no strategy asked can run the requested recomputation at all (every one not_offered). */
ap_status ap_fit(const ap_fit_opts *o, ap_fit_result *r, ap_err *err);

#endif
