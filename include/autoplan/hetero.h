/*
 * hetero.h - training with heterogeneous memory (GPU + host DRAM + NVMe), simulated operator by
 * operator: Colossal-AI's Gemini (chunk manager, chunk-size search, static and auto placement,
 * its hooks and optimizer) and DeepSpeed's ZeRO-Offload (stages 1-2) and ZeRO-Infinity (stage 3
 * with parameters and optimizer states on CPU or NVMe). Files: sim/hetero.c (parameters,
 * operators, options, the run and its report), sim/chunk.c (Gemini chunks), sim/nonmodel.c
 * (non-model data per operator from the event simulator), sim/gemini.c, sim/zero_infinity.c,
 * sim/hetero_time.c (transfer, CPU Adam and timeline); docs/heterogeneous.md explains every rule
 * and the file and function of the trainer it reproduces.
 *
 * What moves is reproduced from the trainers' code (chunk by chunk, parameter by parameter);
 * activations and temporaries ("non-model data") come from the event simulator (sim.h), which
 * the trainers cannot move; compute time per operator is the cost model's (estimate.h) split by
 * FLOPs. One rank per data-parallel group is simulated (the ranks are symmetric); pipeline
 * parallelism is not (GeminiPlugin refuses it, ZeRO-2/3 too).
 *
 * Ownership: ap_hetero_run returns an ap_hetero the caller frees with ap_hetero_free; the
 * arrays it hands out (operators, movements) borrow into it and live until then.
 * Units: bytes, seconds, elements where a name says so.
 */
#ifndef AP_HETERO_H
#define AP_HETERO_H

#include "autoplan/estimate.h"
#include "autoplan/json.h"
#include "autoplan/sim.h"

/* ---- plan options (ap_plan.hetero, plan.h) ------------------------------------------------ */

/* The trainers' defaults: GeminiPlugin.__init__ and DeepSpeed's offload/zero configs. */
void ap_plan_hetero_init(ap_plan_hetero *h);
/* Fractions in [0, 1], ratios in (0, 1], counts and sizes positive; Colossal-AI's rule that
 * offload_param_frac is ignored unless shard_param_frac = offload_optim_frac = 1.0 is refused
 * (naming the fields); DeepSpeed's offload_param only with ZeRO-3; a parameter buffer smaller
 * than max_in_cpu's unit; NVMe devices need a cluster with NVMe (capacity and bandwidth).
 * `where` names the flag set or file in the one-line message. c may be NULL (no NVMe check). */
ap_status ap_plan_hetero_validate(const ap_plan *p, const ap_cluster *c, const char *where,
                                  ap_err *err);
/* The placement the search gives a plan of its own offload level (planner/search.c, without
 * its extra NVMe / Gemini auto variants), and `estimate` a plan given by flags, so the two
 * agree: Colossal-AI ZeRO-3 without pp is GeminiPlugin static with the plan's fractions;
 * DeepSpeed without pp and cp keeps its offloaded states in CPU memory. Other plans are left
 * alone. Returns 0 when the plan has no such placement (a parameter fraction without all
 * optimizer states offloaded, which GeminiPlugin ignores). */
int ap_plan_hetero_default(ap_plan *p);
const char *ap_gemini_placement_name(ap_gemini_placement p); /* "off" "static" "auto" */
const char *ap_offload_device_name(ap_offload_device d);     /* "none" "cpu" "nvme" */
ap_status ap_offload_device_parse(const char *s, const char *what, ap_offload_device *out,
                                  ap_err *err);
ap_status ap_gemini_placement_parse(const char *s, const char *what, ap_gemini_placement *out,
                                    ap_err *err);

/* ---- parameters in the order the model registers them ------------------------------------- */

/* Modules that own parameters, as the Hugging Face implementations name them. */
typedef enum {
    AP_HMOD_EMBED = 0, AP_HMOD_POS, AP_HMOD_LN1, AP_HMOD_Q, AP_HMOD_K, AP_HMOD_V, AP_HMOD_QKV,
    AP_HMOD_O, AP_HMOD_LN2, AP_HMOD_GATE, AP_HMOD_UP, AP_HMOD_DOWN, AP_HMOD_FC1, AP_HMOD_FC2,
    AP_HMOD_FINAL_NORM, AP_HMOD_HEAD, AP_HMOD_COUNT
} ap_hmod;
const char *ap_hmod_name(int mod); /* "q_proj", "fc1", ... */

typedef struct ap_hparam {
    int64_t numel;   /* elements on this rank (after the tensor-parallel split) */
    int32_t layer;   /* transformer layer, -1 for embedding/head modules */
    int8_t module;   /* ap_hmod */
    int8_t is_bias;  /* bias or norm shift vector */
} ap_hparam;

/* The model's parameters in model.parameters() order (Hugging Face module registration:
 * LlamaForCausalLM, GPT2LMHeadModel, OPTForCausalLM; other dense types follow the Llama order)
 * with the tensor-parallel split t applied (Colossal-AI shardformer / Megatron: column-parallel
 * q,k,v,gate,up,fc1 and the vocabulary, row-parallel o,down,fc2; norms replicated). Tied
 * embeddings appear once. The sum over ranks of numel equals ap_model_total_params (tested).
 * MoE and MLA models are refused (AP_ERR_INFEASIBLE). Caller frees *out. */
ap_status ap_hetero_params(const ap_model *m, int t, ap_hparam **out, int *n, ap_err *err);

/* ---- Gemini chunks (sim/chunk.c) ---------------------------------------------------------- */

typedef struct ap_chunk_config {
    int64_t chunk_elems;     /* chosen chunk size (elements) */
    int64_t waste_elems;     /* unused elements of the search's layout (its minimum) */
    int64_t total_elems;     /* parameters in the group */
    int keep_gathered;       /* the group is below min_chunk_size: one chunk, never sharded */
    int64_t search_start;    /* first size scanned */
    int64_t search_end;      /* last size scanned */
    int nfiltered;           /* parameters above mean + 3 std left out of the search */
} ap_chunk_config;

/* colossalai/zero/gemini/chunk/search_utils.py search_chunk_configuration: small groups kept
 * gathered; parameters above mean + 3 std (np.std) filtered out; sizes from
 * ceil(max(largest, min_chunk)/interval)*interval in steps of `interval` up to `search_range`
 * more; the least unused tail (_get_unused_byte) wins, the first on ties; then rounded up to a
 * multiple of the zero group size. sizes[0..n) are elements in registration order. */
ap_status ap_gemini_chunk_search(const int64_t *sizes, int n, int zero_size,
                                 double search_range_m, int64_t interval,
                                 double min_chunk_size_m, ap_chunk_config *out, ap_err *err);
/* _get_unused_byte: unused elements of packing `sizes` in order into chunks of chunk_elems
 * (the search's measure, exposed for the exhaustive-scan test). */
int64_t ap_gemini_unused_elems(const int64_t *sizes, int n, int64_t chunk_elems);
/* ChunkManager.register_tensor: the chunk of each parameter (chunk_of[i]) and each chunk's size
 * in elements (a parameter larger than the chunk size gets its own chunk of its size rounded up
 * to the zero group). chunk_elems must hold n entries. Returns the number of chunks. */
int ap_gemini_chunk_layout(const int64_t *sizes, int n, const ap_chunk_config *cfg, int zero_size,
                           int32_t *chunk_of, int64_t *chunk_elems);

/* ---- non-model data per operator (sim/nonmodel.c) ----------------------------------------- */

/* A period of the event simulator's replay between two operators that use parameters: the
 * trainers' hooks fire at its start (Gemini's pre_op and its memory sampling,
 * gemini_hook.py / memstats_collector.py; DeepSpeed's fetch_sub_module). */
typedef enum {
    AP_PERIOD_EMBED = 0, AP_PERIOD_LN1, AP_PERIOD_QKV, AP_PERIOD_PROJ, AP_PERIOD_LN2,
    AP_PERIOD_FC1, AP_PERIOD_FC2, AP_PERIOD_FINAL_NORM, AP_PERIOD_HEAD, AP_PERIOD_COUNT
} ap_period_kind;
enum { AP_PHASE_FWD = 0, AP_PHASE_RECOMPUTE, AP_PHASE_BWD };

typedef struct ap_sim_period {
    int8_t kind;             /* ap_period_kind */
    int8_t phase;            /* AP_PHASE_* */
    int32_t layer;           /* transformer layer, -1 embedding, L head */
    int32_t mb;              /* micro-batch */
    int32_t ev_begin, ev_end;/* the simulator's events [ev_begin, ev_end) */
    int64_t start_bytes;     /* non-model bytes live at its start */
    int64_t peak_bytes;      /* highest non-model bytes during it */
} ap_sim_period;

/* Periods of rank `rank` of a simulation run with record_curves, in execution order. Non-model
 * bytes are the live activations and temporaries (categories activations and other) of the
 * replay; model states (params, grads, optimizer) are left out whatever the plan. Events before
 * the first period (setup) and after the last (reduction, optimizer) belong to no period.
 * Caller frees *out. AP_ERR_INPUT when the run kept no events. */
ap_status ap_sim_periods(const ap_sim *s, int rank, ap_sim_period **out, int *n, ap_err *err);

/* ---- the run ---------------------------------------------------------------------------- */

typedef enum {
    AP_HETERO_GEMINI = 0,     /* plan.trainer colossalai, plan.hetero.placement static|auto */
    AP_HETERO_ZERO_OFFLOAD,   /* deepspeed ZeRO-1/2 with offload_optimizer */
    AP_HETERO_ZERO_INFINITY   /* deepspeed ZeRO-3 with offload_optimizer and/or offload_param */
} ap_hetero_kind;

typedef enum {
    AP_BIND_NONE = 0,         /* fits */
    AP_BIND_GPU,              /* GPU memory (model data + non-model data + overhead) */
    AP_BIND_HOST,             /* host memory of the node (pinned and pageable) */
    AP_BIND_NVME,             /* NVMe capacity of the node */
    AP_BIND_THROUGHPUT        /* a throughput floor set by the caller (fit) */
} ap_binding;
const char *ap_binding_name(ap_binding b); /* "none" "gpu" "host" "nvme" "throughput" */

/* Which plans the simulator takes: colossalai + placement static|auto (zero 3), deepspeed +
 * ds_optimizer/ds_params not none (zero 1-3), pp = 1, dense models. */
int ap_hetero_applies(const ap_plan *p);

/* DeepSpeed asserts that offload_param.buffer_size holds every parameter partition swapped
 * from NVMe (partitioned_param_swapper.py get_buffer: "More elements than buffer size"); a large
 * vocabulary on few GPUs passes the default 1e8. Raise p->hetero.ds_param_buffer_size to the
 * largest partition (ceil(numel / dp) of the largest parameter) when the plan puts ZeRO-3
 * parameters on NVMe, as a user must; otherwise leave it. */
ap_status ap_hetero_size_param_buffers(const ap_model *m, ap_plan *p, ap_err *err);

/* Caller-owned memo of the last chunk-size searches (the search's scan dominates a run:
 * Colossal-AI scans search_range / interval sizes over every parameter). The scan does not
 * depend on the zero group, which only rounds its answer up: an entry holds the answer for a
 * zero group of 1 and is reused when the parameter sizes and the search options are the same,
 * whatever the zero group (the plans of one tp x pp share their sizes and differ in dp). Zero
 * it before first use. */
#define AP_HETERO_CACHE_N 4
/* It also keeps the last AP_HETERO_TEMPLATES operator templates (the event simulation of the
 * plan with every state resident, which all placements and offload fractions of one shape
 * share), each with the model, cluster, plan shape, calibration and kernel tables it was built
 * for: a run on another shape builds its own. ap_hetero_cache_free releases them. */
#define AP_HETERO_TEMPLATES 32
struct ap_hetero_template;
/* Templates several caches share, on several threads (a search's workers, fit's strategies
 * and probes: the same shapes of the same model come back in each), under the store's lock:
 * a template one of them builds, the others copy. A cache whose `shared` is set keeps its
 * templates and its chunk-size searches there instead of in its own slots. ap_hetero_store_new returns NULL when memory
 * is short (the caches then keep their own); ap_hetero_store_free releases it (NULL:
 * nothing) once no cache uses it. */
typedef struct ap_hetero_store ap_hetero_store;
ap_hetero_store *ap_hetero_store_new(void);
void ap_hetero_store_free(ap_hetero_store *s);
/* One remembered chunk-size search: the hash of its inputs and its answer for a zero group
 * of 1. */
typedef struct ap_chunk_memo {
    uint64_t key;
    int valid;
    ap_chunk_config cfg;
} ap_chunk_memo;
typedef struct ap_hetero_cache {
    ap_chunk_memo e[AP_HETERO_CACHE_N];
    int next;                /* the entry replaced next */
    struct ap_hetero_template *tpl[AP_HETERO_TEMPLATES]; /* owned */
    int tpl_next;
    ap_hetero_store *shared; /* borrowed; NULL: the templates above */
} ap_hetero_cache;
/* Release the templates a cache holds and zero it (NULL: nothing). */
void ap_hetero_cache_free(ap_hetero_cache *c);

typedef struct ap_hetero_opts {
    double headroom_bytes;    /* fits = device peak + headroom <= capacity; default 2 GiB.
                                 Gemini auto ignores it: it sizes its model data from the
                                 device's capacity with its own 10% margin */
    const ap_calib *calib;    /* NULL = built-in calibration of the cluster's GPU */
    int steps;                /* optimizer steps simulated, the last one reported; default 3 */
    double step_cutoff_s;     /* > 0: a plan whose step cannot come under it (its compute
                                 alone, every micro-batch's forward and backward, plus the fixed
                                 per-step overhead, is above it) is not simulated: the summary
                                 says stopped 3 and fits 0, with no verdict. 0, the default:
                                 every plan is simulated */
    int record;               /* keep per-operator records and movements; default 1 */
    /* 1: only whether the plan fits is wanted: the run stops as soon as it cannot (its host
       memory per node past 90% of the node's, its NVMe past the drives', the reported step's
       GPU peak with the headroom past the GPU's capacity, or, ZeRO-Offload and -Infinity, the
       model data resident on the GPU with the overhead and headroom past it: every point of
       the reported step holds at least that). The summary then says
       stopped 1, fits 0 and the binding resource; its other figures are the run's so far.
       0, the default: the run goes to its end */
    int stop_unfit;
    /* > 0: the run also stops as soon as the plan's overshoot is certain to pass this: the
       search's measure of how near a plan comes to fitting (the larger of its GPU peak with
       the headroom past the capacity and its host share past 90% of the node's memory, each
       a fraction of that capacity), which the search's closest plan has least. A search
       whose closest so far is this near does not need it. The summary then says stopped 2
       and fits 0; its other figures are the run's so far. 0, the default: no such stop */
    double stop_over;
    /* 1: the caller reads nothing of a stopped run but that it stopped (and its kind): where
       stop_unfit or stop_over will stop the run for certain, it may stop before the point the
       simulation would stop at (Gemini: its host and GPU memory once the Adam states exist,
       known from the layout; Gemini and DeepSpeed: each operator's GPU share, known from the
       operators), so its figures say less. 0, the default: a
       stopped run's figures are those up to that point */
    int stop_early;
    ap_hetero_cache *cache;   /* optional (NULL): reuse the chunk search across runs */
    /* kernel figures, as ap_estimate_opts: a measured profile over the published tables, or
       prebuilt tables (which win); both NULL: the GPU's published tables. Borrowed. */
    const struct ap_profile *profile;
    const struct ap_kernels *kernels;
    int nccl_eager;           /* NCCL before 2.22 (ap_estimate_opts.nccl_eager); default 0 */
} ap_hetero_opts;
void ap_hetero_opts_init(ap_hetero_opts *o);

/* Transfer kinds in the movement log. */
typedef enum {
    AP_MOVE_H2D = 0,          /* host -> GPU (chunk shard, parameter partition, gradient) */
    AP_MOVE_H2D_FP32,         /* Gemini: fp32 master shard moved up after a CPU Adam step
                                 (Chunk.__paired_shard_move) */
    AP_MOVE_D2H,              /* GPU -> host (eviction, gradient) */
    AP_MOVE_NVME_READ, AP_MOVE_NVME_WRITE,
    AP_MOVE_GATHER,           /* all-gather in the ZeRO group (bytes received) */
    AP_MOVE_REDUCE,           /* reduce-scatter / all-reduce (bytes sent) */
    AP_MOVE_COUNT
} ap_move_kind;
const char *ap_move_kind_name(int k);

typedef struct ap_hetero_move {
    int32_t op;               /* operator record index (-1: optimizer step) */
    int32_t chunk;            /* Gemini chunk or DeepSpeed parameter index, -1 for a group */
    int8_t kind;              /* ap_move_kind */
    int8_t what;              /* 0 fp16 parameters, 1 gradients, 2 fp32 master, 3 optimizer */
    int64_t bytes;
} ap_hetero_move;

/* One operator of the reported step (record = 1). */
typedef struct ap_hetero_oprec {
    int8_t module;            /* ap_hmod; -1 for the optimizer step */
    int8_t phase;             /* AP_PHASE_*; 3 = optimizer */
    int32_t layer;
    int64_t mb;               /* micro-batch (past 2^31 in a step of 2^32) */
    int64_t gpu_model_bytes;  /* chunks / parameters / gradients / optimizer on the GPU */
    int64_t gpu_nonmodel_bytes; /* non-model peak of its period (+ transient weight gradients) */
    int64_t gpu_bytes;        /* model + non-model + device overhead */
    int64_t planned_bytes;    /* the trainer's own account after its fetch: model data plus
                                 the non-model data it reserved (Gemini auto: the warm-up's
                                 measurement for this operator) */
    int64_t host_bytes;       /* this rank's host memory */
    int64_t h2d_bytes, d2h_bytes, nvme_read_bytes, nvme_write_bytes;
    double start_s, end_s;    /* on the compute stream, from the start of the step */
} ap_hetero_oprec;

typedef struct ap_hetero_summary {
    ap_hetero_kind kind;
    char name[32];            /* "gemini-auto", "zero-offload", "zero-infinity-nvme", ... */
    int zero_size;            /* ranks sharding the model states */
    int64_t micro_batches;    /* per step per rank */
    /* Gemini chunks */
    ap_chunk_config chunks;
    int nchunks;              /* fp16 chunks (as many fp32) */
    double offload_optim_frac_effective; /* static: chunk memory whose optimizer is on the CPU,
                                            after Colossal-AI's per-parameter sum */
    /* traffic of one step, one rank */
    double h2d_bytes, d2h_bytes, nvme_read_bytes, nvme_write_bytes, gather_bytes, reduce_bytes;
    double h2d_s, d2h_s, nvme_s;          /* busy time of each link */
    double transfer_exposed_s;            /* transfers on the critical path */
    double compute_s;                     /* forward + backward + recompute (+ TP comm) */
    double collective_exposed_s;          /* ZeRO gathers / reduce-scatters on the path */
    double cpu_adam_s, gpu_adam_s, nvme_optimizer_s;
    double overhead_s;
    double step_s, tokens_per_s, mfu;
    /* memory */
    double gpu_model_peak_bytes;          /* highest model data on the GPU */
    double gpu_peak_bytes;                /* highest model + non-model + overhead */
    double gpu_nonmodel_at_peak_bytes;
    double gpu_capacity_bytes, headroom_bytes;
    double host_peak_bytes;               /* per rank, pinned included */
    double host_pinned_bytes;             /* of which page-locked */
    double host_bytes_per_node, host_capacity_bytes;
    double nvme_bytes_per_node, nvme_capacity_bytes;
    int fits;
    ap_binding binding;
    int first_over_op;                    /* operator record where the GPU first overflows */
    double over_bytes;                    /* by how much (device + headroom - capacity) */
    char over_op[96];                     /* "forward of fc1, layer 23" */
    char failure[256];                    /* the trainer's own failure, e.g. Gemini's "Adjust
                                             layout failed! No enough CUDA memory!" */
    int stopped;                          /* the run stopped early: 1 stop_unfit (cannot
                                             fit), 2 stop_over (overshoot past it), 3 before
                                             its steps, past step_cutoff_s (no verdict) */
} ap_hetero_summary;

typedef struct ap_hetero ap_hetero;

/* Simulate plan p (ap_hetero_applies) of model m on cluster c for opts->steps optimizer steps
 * and report the last. AP_ERR_INFEASIBLE (err names the rule) for plans the trainer cannot run
 * this way; a plan that runs out of memory is AP_OK with fits = 0 and the binding resource. */
ap_status ap_hetero_run(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                        const ap_hetero_opts *opts, ap_hetero **out, ap_err *err);
void ap_hetero_free(ap_hetero *h);
const ap_hetero_summary *ap_hetero_summary_of(const ap_hetero *h);
const ap_hetero_oprec *ap_hetero_ops(const ap_hetero *h, int *n);
const ap_hetero_move *ap_hetero_moves(const ap_hetero *h, int *n);
/* "backward of fc1, layer 23, micro-batch 0" */
char *ap_hetero_op_describe(const ap_hetero_oprec *r, char *buf, size_t n);

/* The run as an estimate (estimate.h), so the search, `estimate` and the reports treat Gemini
 * and DeepSpeed offload plans like any other: the cost model's estimate of the same plan without
 * offload gives the shape (stages, compute, TP communication); the simulation replaces memory
 * (stage 0: model data at the peak as params, non-model data as activations, the device peak,
 * host per node, the verdict) and time (offload_s = exposed transfers, optimizer_s = CPU/GPU Adam
 * and NVMe swapping, dp_comm_s = exposed ZeRO collectives; compute absorbs the rest so the parts
 * sum to step_s). `cache` may be NULL. */
ap_status ap_hetero_estimate(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, ap_hetero_cache *cache,
                             ap_estimate *out, ap_err *err);

/* JSON: the summary (traffic, times, memory, verdict) and, with curves, GPU and host memory per
 * operator and the PCIe traffic (at most max_points points, each the maximum over its run).
 * Caller frees. NULL on allocation failure. */
ap_json *ap_hetero_to_json(const ap_hetero *h, int max_points);
/* Chrome trace: counters for GPU model / non-model / host memory, a slice per operator and per
 * transfer. Caller frees. */
ap_json *ap_hetero_trace_json(const ap_hetero *h);

#endif
