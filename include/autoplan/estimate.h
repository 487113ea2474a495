/*
 * estimate.h - the cost model: per-GPU memory per pipeline stage and the time of one training
 * step for a (model, cluster, plan), every term traceable to a cited formula
 * (costmodel/estimate.c, activations.c for the per-layer activations). Plain value structs; no
 * allocation.
 */
#ifndef AP_ESTIMATE_H
#define AP_ESTIMATE_H

#include "autoplan/plan.h"

#define AP_MAX_STAGES 256

/* Calibration: at most 8 physical parameters per GPU type (README "Calibration"). */
/* The memory a plan leaves free on each GPU to count as fitting, unless told otherwise: a
 * planning margin (allocator growth, NCCL's extra channels, the kernels' workspaces), not part
 * of the predicted peak. */
#define AP_DEFAULT_HEADROOM_BYTES (2.0 * AP_GIB)

typedef struct ap_calib {
    double gemm_eff_max;     /* achievable fraction of dense peak on large GEMMs */
    double gemm_half_flops;  /* GEMM size (FLOPs) at which efficiency is half of max */
    double attn_eff;         /* flash-attention efficiency relative to peak */
    double link_eff;         /* achievable fraction of peer-link bandwidth for collectives */
    double net_eff;          /* achievable fraction of network bandwidth */
    double coll_latency_s;   /* per-collective-step latency */
    double step_overhead_s;  /* fixed per-step host overhead (optimizer launch, logging) */
    double mem_bound_eff;    /* achievable fraction of HBM bandwidth for elementwise ops */
} ap_calib;

struct ap_profile;
struct ap_kernels;

/* Options beyond the plan. */
typedef struct ap_estimate_opts {
    double headroom_bytes;   /* fits = device peak + headroom <= capacity; default
                                AP_DEFAULT_HEADROOM_BYTES */
    int allocator_expandable;/* model PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True */
    int nccl_eager;          /* the run's NCCL is older than 2.22 and connects every
                                communicator's ring and tree at its creation
                                (ap_mem_device_overhead_bytes); 0, the default: 2.22 or later,
                                which connects what a collective uses when it first runs */
    const ap_calib *calib;   /* NULL = built-in calibration for the cluster's GPU */
    double gemm_eff_scale;   /* multiply GEMM efficiency (robustness checks); default 1 */
    double net_bw_scale;     /* multiply network bandwidth; default 1 */
    /* kernel figures (kernels.h): a measured profile whose rows replace the GPU's published
     * ones series by series (NULL: published only). Borrowed for the call. Building the tables
     * from a profile costs microseconds per row: callers that estimate many plans build them
     * once with ap_kernels_build and pass them as `kernels` (which then wins over `profile`). */
    const struct ap_profile *profile;
    const struct ap_kernels *kernels;
    /* optional memo of layer prices across calls (see ap_estimate_cache_new); NULL: none */
    struct ap_estimate_cache *cache;
    /* 1: the plan passed ap_plan_check exactly as given (dp, grad_accum and etp set), so the
     * estimate does not check it again (the search checks every plan it estimates); 0, the
     * default: the estimate fills dp and grad_accum where unset and checks the plan */
    int plan_checked;
    /* non-NULL: only the ranks r with ranks_only[r] set (pp flags) are priced, and nothing of
     * the step: their stages[r] and stage_fwd_s/stage_bwd_s[r], with capacity_bytes and
     * headroom_bytes; everything else in the estimate is unset. Each rank is priced from its
     * own layers, so a rank's figures are those of the whole estimate (the stage tables'
     * per-rank costs, stagecost.h). NULL, the default: the whole estimate */
    const unsigned char *ranks_only;
    /* ap_hetero_estimate only: its ap_hetero_opts.step_cutoff_s (0, the default: none) */
    double sim_cutoff_s;
    /* ap_hetero_estimate only: its ap_hetero_opts.stop_unfit (0, the default: every
       simulation runs to its end) */
    int sim_stop_unfit;
    /* ap_hetero_estimate only: its ap_hetero_opts.stop_over (0, the default: none) */
    double sim_stop_over;
    /* ap_hetero_estimate only: its ap_hetero_opts.stop_early (0, the default) */
    int sim_stop_early;
    /* 1: fill ap_time.part_fwd_s / part_bwd_s (profile check); 0, the default: left zero */
    int compute_parts;
} ap_estimate_opts;

void ap_estimate_opts_init(ap_estimate_opts *o);

/* What each estimate with options o on `gpu` would look up itself, looked up once into o, for
 * callers that make many: the built-in calibration into *cal (unless o->calib is set) and the
 * kernel tables (unless o->kernels is set): the published ones, or built from o->profile into
 * *built, which the caller frees (NULL when none was built; when the build fails o->kernels
 * stays NULL and each estimate reports why). The answers are the same. */
void ap_estimate_opts_resolve(ap_estimate_opts *o, const ap_gpu *gpu, ap_calib *cal,
                              struct ap_kernels **built);

/* A memo of the layer prices of recent estimates (one dense and one MoE layer per plan shape:
 * tp, cp, ep, etp, micro-batch, sequence, sp, TP overlap, dtype, attention), the costly part of
 * a call, for callers that estimate many plans of one model on one cluster (the search). The
 * answers are the same with or without it. One per thread: every call through it writes it.
 * It is keyed by the model, cluster and kernel tables by address: discard it when any of them
 * changes in place. Freed with ap_estimate_cache_free; NULL on allocation failure. */
typedef struct ap_estimate_cache ap_estimate_cache;
ap_estimate_cache *ap_estimate_cache_new(void);
void ap_estimate_cache_free(ap_estimate_cache *c);

typedef struct ap_stage_mem {
    int stage;               /* pipeline rank 0..pp-1 */
    int layers;              /* transformer layers on this rank (all its chunks) */
    double params_bytes;     /* working weights resident on the GPU */
    double grads_bytes;
    double optimizer_bytes;  /* master weights + optimizer states on the GPU */
    double activations_bytes;/* peak activations incl. in-flight micro-batches, logits */
    double layer_activations_bytes; /* of that, the transformer layers' in-flight activations
                                       (no embedding, head, logits or recompute working set) */
    double other_bytes;      /* temporaries: gathered ZeRO-3 params, comm buffers, fp8 copies */
    double allocated_bytes;  /* sum of the above at the peak */
    double reserved_bytes;   /* allocator segments (rounding + fragmentation) */
    double device_bytes;     /* reserved + CUDA context + NCCL/cuBLAS workspaces */
    double host_bytes;       /* CPU memory used by offload for this GPU */
    int inflight;            /* micro-batches whose activations are live at the peak */
} ap_stage_mem;

enum { AP_PART_GEMM = 0, AP_PART_ATTN, AP_PART_OTHER };

typedef struct ap_time {
    double step_s;
    double compute_s;        /* forward + backward compute on the critical path */
    double recompute_s;
    double tp_comm_s, cp_comm_s, ep_comm_s, pp_comm_s, dp_comm_s; /* exposed */
    double bubble_s;
    double offload_s;
    double optimizer_s;
    double x_floor_s;        /* the least optimizer_s + offload_s of any stage split of the
                                plan's layers (its parameters spread evenly over the ranks) */
    double par_floor_s;      /* offloaded parameters: the least per-micro-batch transfer of the
                                rank holding the most (the mean rank's); every split's step is
                                at least its pipeline with the slowest rank at least this
                                long (resplit.c); 0 without parameter offload */
    double overhead_s;       /* fixed per-step overhead (calibrated), part of step_s */
    /* totals before overlap, for reports: tp_comm_s / dp_comm_s are what stays exposed */
    double dp_comm_total_s;
    double tp_comm_total_s;
    /* the data-parallel gradient reduction and parameter all-gather of the stage with the most
     * parameters, before overlap (dp_comm_total_s less ZeRO-3 traffic), one bucket of each
     * (one call; per micro-batch where the trainer reduces every micro-batch), the bucket count
     * and those parameters in units of the trainer's bucket size (0: one bucket per layer):
     * what a lower bound over stage splits needs (planner/resplit.c rest_bound) */
    double dp_red_s, dp_ag_s, dp_red_one_s, dp_ag_one_s, dp_buckets, dp_bucket_fill;
    /* the first pipeline rank's forward and backward compute per micro-batch (the backward
     * without recomputation) by kind of kernel, AP_PART_*: GEMMs (the output layer's too), the
     * attention core, and the rest (memory-bound kernels, the loss, launches the host cannot
     * issue faster); for comparing with a trace (profile check); set only when
     * ap_estimate_opts.compute_parts asks (0 otherwise) */
    double part_fwd_s[3], part_bwd_s[3];
    double stage_fwd_s[AP_MAX_STAGES]; /* per micro-batch per pipeline rank, all its chunks;
                                          entries past the plan's pp are not set */
    double stage_bwd_s[AP_MAX_STAGES];
} ap_time;

typedef struct ap_throughput {
    double tokens_per_s;
    double model_flops_per_step;   /* model FLOPs (README "Throughput definitions") */
    double hw_flops_per_step;      /* + recompute forward */
    double model_tflops_per_gpu;
    double hw_tflops_per_gpu;
    double mfu;                    /* vs dense bf16/fp16 peak */
    double hfu;
} ap_throughput;

typedef struct ap_estimate {
    ap_plan plan;                  /* the plan as evaluated (grad_accum, dp filled in) */
    ap_time time;
    ap_throughput tp;
    int nstages;
    ap_stage_mem stages[AP_MAX_STAGES];
    int worst_stage;               /* stage with the highest device bytes */
    double capacity_bytes;
    double headroom_bytes;
    double peak_bytes;             /* device peak of the worst stage */
    double allocated_peak_bytes;
    double reserved_peak_bytes;
    double device_peak_bytes;
    double smi_peak_bytes;         /* what nvidia-smi shows on the fullest GPU: the device bytes
                                      with the freed blocks the caching allocator keeps, at most
                                      the GPU's memory (ap_mem_smi_bytes); fits does not read it */
    double device_overhead_bytes;  /* each rank's bytes outside the allocator
                                      (ap_mem_device_overhead_bytes) */
    double nccl_bytes;             /* of which NCCL's buffers (ap_mem_nccl_bytes) */
    double host_bytes_per_node;    /* offloaded states on one node */
    double host_capacity_bytes;
    int fits;                      /* device + headroom <= capacity and host fits */
    int host_fits;
    int partial;                   /* its simulation stopped early: 1 once the plan could not
                                      fit (ap_estimate_opts.sim_stop_unfit), 2 once its
                                      overshoot passed sim_stop_over: fits 0, the memory and
                                      time figures are the run's so far; 3 before its steps,
                                      its step past sim_cutoff_s: fits 0, no verdict */
} ap_estimate;

/* Evaluate plan p. Returns AP_ERR_INFEASIBLE (err names the rule) when the trainer cannot run
 * it; a plan that runs but does not fit is AP_OK with fits = 0. `opts` may be NULL. p may be
 * &out->plan: the plan is then read in place instead of copied (4 KB: the search's way). */
ap_status ap_estimate_plan(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                           const ap_estimate_opts *opts, ap_estimate *out, ap_err *err);

/* Copy *src into *dst: every field, but of the per-stage arrays (stages, stage_fwd_s,
 * stage_bwd_s) only the first src->nstages entries; the rest of dst is left as it was, as
 * ap_estimate_plan leaves entries past the plan's pp unset. About 33 KB is the whole struct,
 * a few hundred bytes per stage are what a plan uses: rankings copy estimates with this. */
void ap_estimate_copy(ap_estimate *dst, const ap_estimate *src);

/* One NCCL collective (op: an ap_coll_op of kernels.h) moving `bytes` (nccl-tests size) over
 * n ranks, k of them per NVLink domain, priced as the estimate prices its own: the group's bus
 * bandwidth from the kernel tables and the calibration, NCCL's algorithm choice, plus the host
 * cost of a call. For simulators that place their own collectives (sim/hetero). */
double ap_estimate_coll_s(const ap_cluster *c, const ap_calib *cal, const struct ap_kernels *k,
                          int op, double bytes, int n, int k_per_domain);

/* Built-in calibration for a GPU (by catalog name; generic defaults otherwise). */
void ap_calib_default(const ap_gpu *gpu, ap_calib *out);

/* Korthikanti et al. 2022 Table 2 activation bytes per layer (GPT: GELU 4h MLP, MHA,
 * LayerNorm, dropout, no flash attention), exposed for tests:
 *   none: sbh(34 + 5as/h); tp: sbh(10 + 24/t + 5as/(ht)); tp+sp: sbh/t (34 + 5as/h);
 *   tp+selective: sbh(10 + 24/t); tp+sp+selective: 34 sbh/t; full: 2sbh. */
double ap_mem_korthikanti_layer_bytes(double s, double b, double h, double a, double t, int sp,
                                      ap_recompute rc);

/* Activation bytes of one layer of model m for one micro-batch, derived term by term for the
 * architecture (see costmodel/activations.c). `layer` selects dense vs MoE. */
double ap_mem_layer_activation_bytes(const ap_model *m, const ap_plan *p, int64_t layer,
                                     ap_recompute rc);

/* Token copies of one micro-batch of `tokens` tokens on the rank (s b / cp) that the rank's
 * experts process (costmodel/layer_cost.c): the etp group's share of the routed copies. */
double ap_cost_moe_routed(const ap_model *m, const ap_plan *p, double tokens);

/* HBM bytes the token permutations of one MoE layer move in its forward for `tokens` tokens of
 * one micro-batch on the rank (s b / cp), 16-bit (costmodel/layer_cost.c; the backward moves as
 * much again). */
double ap_cost_moe_permute_bytes(const ap_model *m, const ap_plan *p, double tokens);

/* 1 when plan p's selective recompute of `layer` is per-op checkpointing (the trainer's
 * selective_op_sac, for a dense non-MLA block with a flash kernel), 0 when it is Megatron's
 * core-attention recompute. */
int ap_mem_op_sac(const ap_model *m, const ap_plan *p, int64_t layer);

/* Model states in bytes per GPU for n_params parameters under plan p's trainer/ZeRO/dp
 * (weights, grads, master+optimizer), before offload. */
void ap_mem_model_states(const ap_plan *p, double n_params, int shard_dp, double *weights,
                         double *grads, double *optim);

/* Device memory outside the allocator for plan p, bytes: CUDA context, cuBLAS workspaces and
 * NCCL buffers per communicator the plan's trainer uses (costmodel/estimate.c cites each
 * term); nccl_eager: NCCL before 2.22 (ap_estimate_opts.nccl_eager). The one fixed overhead
 * both the estimate and the simulator add to their reserved bytes. */
double ap_mem_device_overhead_bytes(const ap_plan *p, int nccl_eager);

/* The NCCL communicators a rank of plan p uses, their rank counts into sizes[] (at most
 * AP_MAX_COMMS); returns how many. */
#define AP_MAX_COMMS 12
int ap_mem_nccl_comms(const ap_plan *p, int sizes[AP_MAX_COMMS]);
/* Their buffers, bytes (the NCCL part of ap_mem_device_overhead_bytes). */
double ap_mem_nccl_bytes(const ap_plan *p, int nccl_eager);

/* Parse an NCCL version "MAJOR.MINOR[.PATCH]" (e.g. 2.10.3): *eager = 1 before 2.22, whose
 * communicators connect at creation. AP_ERR_INPUT naming `what` when it is not one. */
ap_status ap_nccl_version_parse(const char *s, const char *what, int *eager, ap_err *err);

/* What nvidia-smi shows for a rank with the memory *sm, overhead the bytes outside the
 * allocator (ap_mem_device_overhead_bytes): the allocator's high-water mark, which keeps the
 * blocks freed during the step cached (costmodel/estimate.c cites the fraction), plus the
 * overhead; never below sm->device_bytes. Uncapped (the estimate caps it at the GPU's memory).
 * expandable: PyTorch's expandable_segments allocator. */
double ap_mem_smi_bytes(const ap_stage_mem *sm, double overhead, int expandable);

/* Compute that runs beside a collective runs slower: the collective's kernels hold SMs and
 * HBM bandwidth for as long as it lasts. Lee et al. 2025, "Characterizing Compute-Communication
 * Overlap in GPU-Accelerated Distributed Deep Learning: Performance and Power Implications"
 * (arXiv 2507.03114, abstract): overlapped with communication, the computation of GPT and
 * Llama training on A100, H100, MI250 and MI210 ran 18.9% slower on average (40% at most)
 * than alone. Over the s seconds a hidden collective lasts the compute beside it does
 * s / 1.189 seconds of its work; the rest, s x AP_OVERLAP_COST of it, lands on the critical
 * path after it. Every collective the cost model hides behind compute pays it (TP, CP, ZeRO-3
 * gathers and reductions, interleaved pipeline sends, the data-parallel reduction and parameter
 * gather), in its exposed part: exposed + AP_OVERLAP_COST x hidden. */
#define AP_OVERLAP_SLOWDOWN 0.189
#define AP_OVERLAP_COST (AP_OVERLAP_SLOWDOWN / (1.0 + AP_OVERLAP_SLOWDOWN))

/* Cost-model version (part of cache keys). */
const char *ap_costmodel_version(void);

#endif
