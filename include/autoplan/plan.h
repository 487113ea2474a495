/*
 * plan.h - a parallel training plan (degrees, batch, ZeRO, recompute, offload, stage split) and
 * the trainer capability table that says which plans each trainer can run and how it stores
 * model states.
 *
 * ap_plan is a plain value (no pointers). The trainer table (costmodel/trainer.c) is the one
 * place that knows trainer rules: search, estimate and every config generator ask it.
 */
#ifndef AP_PLAN_H
#define AP_PLAN_H

#include "autoplan/common.h"
#include "autoplan/fields.h"
#include "autoplan/hw.h"
#include "autoplan/model.h"

#define AP_MAX_CHUNKS 512 /* pp * vp model chunks */

/* Bytes per logit element a fused cross-entropy keeps at its peak (ap_plan.loss_bytes_per_logit).
 * flash-attn's CrossEntropyLoss (flash_attn/losses/cross_entropy.py; llm-foundry's default
 * loss_fn "fused_crossentropy", ComposerMPTCausalLM) saves the 16-bit logits, not an fp32 copy,
 * plus one fp32 log-sum-exp per row, and its backward writes a new 16-bit gradient: 2 + 2 bytes.
 * With inplace_backward the gradient overwrites the logits: 2 bytes (apex's xentropy
 * CrossEntropyLossApex as flash-attention's GPT configs run it, training/configs/experiment/
 * {owt,pile}/base.yaml train.loss_fn; flash-attn's own kernel offers the same flag). */
#define AP_LOSS_FUSED_BYTES 4.0
#define AP_LOSS_FUSED_INPLACE_BYTES 2.0

typedef enum {
    AP_TRAINER_MEGATRON = 0,
    AP_TRAINER_DEEPSPEED,
    AP_TRAINER_FSDP,
    AP_TRAINER_TORCHTITAN,
    AP_TRAINER_COLOSSALAI,
    AP_TRAINER_RUNTIME,   /* autoplan's own executor (runtime/, `autoplan run`) on the cpu device;
                             never offered where users pick a trainer for GPUs */
    AP_TRAINER_COUNT
} ap_trainer_id;

typedef enum { AP_RECOMPUTE_NONE = 0, AP_RECOMPUTE_SELECTIVE, AP_RECOMPUTE_FULL } ap_recompute;
#define AP_RECOMPUTE_COUNT 3

/* The one spelling of each granularity, used by every flag, file and report: "none",
 * "selective", "full" (static strings; "none" for an out-of-range value). */
const char *ap_recompute_name(ap_recompute r);
/* The granularity named s. AP_ERR_INPUT "<what>: 's' is not one of none, selective, full"
 * otherwise (s NULL included). */
ap_status ap_recompute_parse(const char *s, const char *what, ap_recompute *out, ap_err *err);

/* Attention kernel of the plan (the identifiers of docs/profiles.md): AUTO = the trainer's
 * default for the GPU, dtype and model (ap_attn_default); UNFUSED = scores materialised
 * (Megatron's fused softmax between two batched GEMMs, or eager PyTorch). */
typedef enum {
    AP_ATTN_AUTO = 0,
    AP_ATTN_UNFUSED,
    AP_ATTN_FA1,            /* FlashAttention (Dao et al. 2022), CUDA */
    AP_ATTN_TRITON,         /* FlashAttention in Triton */
    AP_ATTN_FA2,            /* FlashAttention-2 (Dao 2023) */
    AP_ATTN_FA3,            /* FlashAttention-3 (Shah et al. 2024), Hopper */
    AP_ATTN_CUDNN,          /* cuDNN fused attention (Transformer Engine) */
    AP_ATTN_SDPA_EFFICIENT, /* PyTorch memory-efficient SDPA (xFormers kernel) */
    AP_ATTN_FLEX,           /* PyTorch FlexAttention */
    AP_ATTN_COUNT
} ap_attn_impl;

/* "fa2", "unfused", ... (the profile vocabulary's `impl` identifiers; "auto"). */
const char *ap_attn_impl_name(ap_attn_impl impl);
/* Parse an identifier of ap_attn_impl_name; AP_ERR_INPUT naming `what` and the choices. */
ap_status ap_attn_impl_parse(const char *s, const char *what, ap_attn_impl *out, ap_err *err);

/* FP8 scaling recipe of a dtype-fp8 plan. DELAYED: Transformer Engine's DelayedScaling
 * (Megatron-LM's default --fp8-recipe): each cast uses the scale of the amax history and
 * records the tensor's amax in the same kernel; the histories are all-reduced where the trainer
 * does so (ap_trainer_caps.fp8_amax_reduce). TENSORWISE: per-tensor current scaling (TE
 * Float8CurrentScaling, Megatron-LM --fp8-recipe tensorwise; torchao Float8 "tensorwise";
 * Colossal-AI use_fp8): the amax of the tensor itself is taken by a pass of its own before the
 * cast (transformer_engine/pytorch/csrc/quantizer.cpp Float8CurrentScalingQuantizer::
 * quantize_impl: nvte_compute_amax, then nvte_quantize), unless the trainer compiles it into
 * the producing kernel (ap_trainer_caps.fp8_amax_fused). MXFP8: block scaling (OCP
 * Microscaling Formats v1.0: blocks of 32 elements sharing an E8M0 scale; Transformer Engine's
 * MXFP8BlockScaling, Megatron-LM --fp8-recipe mxfp8), Blackwell only (compute capability 10.0,
 * whose tensor cores take the block scales): no amax, each cast writes the two layouts the
 * GEMMs read with one scale byte per 32 elements of each. AUTO: the trainer's default. */
typedef enum { AP_FP8_AUTO = 0, AP_FP8_DELAYED, AP_FP8_TENSORWISE, AP_FP8_MXFP8 } ap_fp8_recipe;
#define AP_FP8_RECIPE_COUNT 4
/* "auto", "delayed", "tensorwise", "mxfp8" (static strings; "auto" for an out-of-range value). */
const char *ap_fp8_recipe_name(ap_fp8_recipe r);

/* Heterogeneous memory (issue 18; sim/gemini.c, sim/zero_infinity.c, docs/heterogeneous.md):
 * Colossal-AI GeminiPlugin placement and DeepSpeed offload_optimizer / offload_param devices.
 * All zero (ap_plan_init) = not used: the plan's offload fractions alone describe offload. Set
 * the defaults of the trainers with ap_plan_hetero_init (sim/hetero.c) before changing a field. */
typedef enum { AP_GEMINI_OFF = 0, AP_GEMINI_STATIC, AP_GEMINI_AUTO } ap_gemini_placement;
typedef enum { AP_OFFLOAD_DEV_NONE = 0, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NVME } ap_offload_device;

typedef struct ap_plan_hetero {
    /* Colossal-AI GeminiPlugin (colossalai/booster/plugin/gemini_plugin.py, v0.5.1) */
    ap_gemini_placement placement;
    double shard_param_frac;          /* static: default 1.0 */
    double offload_optim_frac;        /* static: default 0.0 */
    double offload_param_frac;        /* static: default 0.0; ignored by Colossal-AI unless the
                                         other two are 1.0 (refused here) */
    double warmup_non_model_data_ratio; /* auto: default 0.8 */
    double steady_cuda_cap_ratio;     /* auto: default 0.9 */
    double gpu_margin_mem_ratio;      /* auto: default 0.0 (GeminiOptimizer) */
    int pin_memory;                   /* default 1: enable_async_reduce forces it */
    int enable_async_reduce;          /* default 1 */
    int max_prefetch;                 /* chunks prefetched ahead, default 0 */
    double search_range_m;            /* chunk-size search range, x 2^20 elements, default 32 */
    double min_chunk_size_m;          /* default 32 (x 2^20 elements) */
    int64_t hidden_dim;               /* search interval; 0 = Colossal-AI's default 1024 */
    /* DeepSpeed zero_optimization.offload_optimizer / offload_param (runtime/zero/
       offload_config.py, v0.19) and the stage-3 knobs that move bytes (runtime/zero/config.py) */
    ap_offload_device ds_optimizer;   /* none | cpu | nvme */
    ap_offload_device ds_params;      /* none | cpu | nvme (ZeRO-3 only) */
    int ds_optimizer_pin, ds_param_pin;  /* default 1 */
    int64_t ds_param_buffer_count;    /* default 5 */
    int64_t ds_param_buffer_size;     /* elements, default 1e8 */
    int64_t ds_max_in_cpu;            /* elements, default 1e9 */
    int64_t ds_optimizer_buffer_count;/* default 4 */
    int64_t ds_sub_group_size;        /* elements, default 1e9 */
    int64_t ds_reduce_bucket_size;    /* elements, default 5e8 */
    int64_t ds_prefetch_bucket_size;  /* elements, default 5e7 */
    int64_t ds_param_persistence_threshold; /* elements, default 1e5 */
    int64_t ds_max_live_parameters;   /* elements, default 1e9 */
    int64_t ds_max_reuse_distance;    /* elements, default 1e9 */
} ap_plan_hetero;

typedef struct ap_plan {
    ap_trainer_id trainer;
    int tp, pp, dp, cp, ep, etp, vp; /* etp: expert tensor parallel (1 = none) */
    int64_t mbs;                     /* micro-batch size b (sequences) */
    int64_t gbs;                     /* global batch (sequences) */
    int64_t grad_accum;              /* micro-batches per step per dp rank: gbs / (mbs * dp) */
    int64_t seq;                     /* sequence length s */
    int zero;                        /* 0-3; Megatron: 1 = distributed optimizer */
    ap_recompute recompute;
    int recompute_layers;            /* full recompute: layers per chunk recomputed (0 = all) */
    int sp;                          /* sequence parallel (with tp) */
    int overlap_grad;                /* overlap gradient reduction with backward */
    int overlap_param;               /* overlap parameter all-gather with forward */
    int overlap_tp;                  /* overlap TP all-gather/reduce-scatter with the GEMMs
                                        (Megatron --tp-comm-overlap, torchtitan async TP) */
    double offload_optimizer;        /* fraction of optimizer states + master weights on host */
    double offload_params;           /* fraction of parameters on host */
    ap_dtype dtype;                  /* compute dtype: bf16, fp16 or fp8 */
    int flash_attn;
    int nchunks;                     /* pp * vp when stage_layers is set, else 0 = uniform */
    int stage_layers[AP_MAX_CHUNKS]; /* layers per model chunk, in pipeline order */
    int stage_recompute[AP_MAX_CHUNKS]; /* per-chunk full-recompute layer count (-1 = plan's) */
    ap_attn_impl attn_impl;          /* attention kernel; AUTO = the trainer's default (with
                                        flash_attn = 0: UNFUSED whatever this says) */
    double grad_reduce_bytes;        /* bytes per gradient element in the data-parallel
                                        reduction (FSDP MixedPrecision reduce_dtype, Megatron
                                        --grad-reduce-in-bf16); 0 = the trainer's default */
    int zero_group;                  /* ZeRO within groups of this many data-parallel ranks,
                                        replicated across the groups (--zero-group): ZeRO-1/2
                                        all-reduce the gradients over all dp x cp ranks, each
                                        rank updates 1/zero_group of the states and the group
                                        gathers the parameters (Megatron-LM's partial
                                        distributed optimizer, InternLM's zero1 = 8); ZeRO-3 /
                                        FSDP shards the parameters within the group, gathers
                                        them there and reduce-scatters there, then all-reduces
                                        its shard across the groups (HSDP, DeepSpeed MiCS);
                                        0 = all dp x cp ranks */
    double dp_bucket_params;         /* parameters per gradient-reduction bucket where the run
                                        configured its own (validation rows' "dp_bucket":
                                        InternLM's reduce_bucket_size); 0 = the trainer's */
    double gather_bytes;             /* bytes per parameter of the ZeRO-3 / FSDP all-gather
                                        (MixedPrecision param_dtype); 0 = the trainer's */
    double optim_state_bytes;        /* bytes of each of the master copy and Adam's two
                                        moments where the trainer keeps a master copy (Apex
                                        DistributedFusedAdam's dtype, validation rows'
                                        "optim_dtype"); 0 = the trainer's (fp32) */
    int te_attention;                /* attention (and its context-parallel ring) runs in
                                        Transformer Engine's module, whatever the trainer's
                                        own attention path (validation rows' "te_attention":
                                        NeMo AutoModel's TE kernels under FSDP2) */
    ap_fp8_recipe fp8_recipe;        /* with dtype fp8: how the tensors are scaled (--fp8-recipe,
                                        plan.json "fp8_recipe", validation rows' "fp8_recipe");
                                        AP_FP8_AUTO = the trainer's default */
    double master_state_bytes;       /* bytes per parameter of the master copy where the
                                        trainer keeps one, overriding optim_state_bytes for it:
                                        2 for Apex DistributedFusedAdam's store_param_remainders
                                        (validation rows' "param_remainders"); 0 = as above */
    double loss_bytes_per_logit;     /* bytes per logit element the cross-entropy keeps at its
                                        peak: 0 = the trainer's (PyTorch's upcast loss);
                                        AP_LOSS_FUSED_BYTES / AP_LOSS_FUSED_INPLACE_BYTES for
                                        the fused kernels (validation rows' "loss") */
    int no_p2p_overlap;              /* pipeline P2P sends never overlap compute, even where
                                        the trainer can (Megatron-LM before its
                                        --overlap-p2p-communication, 2021-22 runs) */
    int no_tp_bwd_overlap;           /* the backward's TP collectives never overlap the weight-
                                        gradient GEMMs, even where the trainer does (Megatron-LM
                                        before its asynchronous all-reduce, 2021-09; validation
                                        rows' "tp_bwd_overlap": false) */
    int fsdp1;                       /* the run's FSDP is PyTorch's first (FlatParameter) one,
                                        which gathers into the flat parameter and reduce-scatters
                                        its flat gradient: none of FSDP2's copies (validation
                                        rows' "fsdp_version": 1; trainer fsdp2_copies) */
    int elementwise;                 /* how the block's norms, rotary embedding and SwiGLU ran:
                                        AP_ELEMENTWISE_TRAINER (0, as the trainer table says),
                                        _EAGER (eager composites: a torchtitan run without
                                        torch.compile) or _FUSED (validation rows' "compile") */
    int fp8_params;                  /* with dtype fp8: the compute weights are FP8 tensors
                                        (--fp8-params, plan.json "fp8_params": Megatron-LM's
                                        --fp8-param-gather, NeMo's fp8_params): 1 byte per
                                        parameter with no 16-bit copy beside it, gathered by
                                        the distributed optimizer (or Megatron-FSDP) in FP8;
                                        the trainer's fp8_params_zero_mask says where */
    int cp_a2a;                      /* with cp > 1: context parallelism by all-to-all
                                        (DeepSpeed-Ulysses' scheme; Megatron-LM --cp-comm-type
                                        a2a, --cp-a2a, plan.json "cp_a2a") instead of the ring:
                                        Q, K and V go from sequence shards to head shards, each
                                        rank runs attention over the whole sequence for
                                        heads / (tp cp) of the heads, and the output returns;
                                        the trainer's cp_a2a says where */
    ap_plan_hetero hetero;           /* added for issue 18: Gemini placement and DeepSpeed
                                        offload devices (zeroed = not used) */
} ap_plan;

/* _EAGER_FUSED_NORM: eager but for the RMSNorm, one fused kernel keeping its input (torchtitan's
 * norm_type "fused_rmsnorm" of 2024, torchtitan/models/norms.py TritonFusedRMSNorm; validation
 * rows' "fused_norm") */
enum { AP_ELEMENTWISE_TRAINER = 0, AP_ELEMENTWISE_EAGER = 1, AP_ELEMENTWISE_FUSED = 2,
       AP_ELEMENTWISE_EAGER_FUSED_NORM = 3 };

/* Defaults: megatron, all degrees 1, mbs 1, bf16, flash attention, no recompute. */
void ap_plan_init(ap_plan *p);

/* Layers of chunk c (0..pp*vp-1): stage_layers when set, else the uniform split (the
 * remainder, if any, goes to the middle chunks). */
int ap_plan_chunk_layers(const ap_plan *p, int64_t L, int c);
/* The uniform split of L layers into n chunks: base layers each, one more for the rem middle
 * chunks [start, start + rem) (the first chunk holds the embedding, the last the head). Its
 * sizes are worked out once (ap_uniform_split_of) and read without divisions, which matters
 * where every rank of every plan is priced (estimate.c). */
typedef struct {
    int base, rem, start;
} ap_uniform_split;

static inline ap_uniform_split ap_uniform_split_of(int64_t L, int n) {
    ap_uniform_split u = {(int)(L / n), (int)(L % n), 0};
    u.start = (n - u.rem) / 2;
    return u;
}
static inline int ap_uniform_chunk_layers(ap_uniform_split u, int c) {
    return u.base + (c >= u.start && c < u.start + u.rem);
}
/* c chunks of base layers, plus one for each of the longer middle chunks before c */
static inline int ap_uniform_chunk_first(ap_uniform_split u, int c) {
    return c * u.base + (c <= u.start ? 0 : c - u.start < u.rem ? c - u.start : u.rem);
}
/* First layer index of chunk c. */
int ap_plan_chunk_first_layer(const ap_plan *p, int64_t L, int c);

/* Short human label: "tp2 pp4 dp8 [cpC] [epE] [vpV] [sp|no-sp] [no-ov] [off-optF%] [off-parF%]
 * mbsB zZ [sel|full[K]] [uneven]". sp and overlap appear where they differ from the defaults of
 * the search and of `estimate` (sp with tp > 1 and overlap wherever the trainer has them; "sp"
 * is always shown), so `estimate` with the label's flags reproduces the plan's estimate (uneven
 * stages need --stage-layers). buf returned. */
char *ap_plan_label(const ap_plan *p, char *buf, size_t n);

/* The field table of ap_plan (costmodel/planfields.c, fields.h): every member once, with its
 * plan.json path, its flag and its accepted values; *n rows. plan.json I/O, the plan flags and
 * the plan-cache key walk it. */
const ap_field *ap_plan_fields(int *n);

/* ---- trainer capabilities --------------------------------------------------------------- */

typedef enum { AP_COLL_ALLREDUCE = 0, AP_COLL_REDUCE_SCATTER } ap_collective;

typedef struct ap_trainer_caps {
    const char *name;            /* "megatron" */
    const char *display;         /* "Megatron-LM" */
    const char *cite;            /* where the rules come from */
    /* legal degrees and features */
    int tp, pp, vp, cp, ep, sp;
    int sp_with_tp_always;       /* torchtitan: TP implies sequence parallel */
    unsigned zero_mask;          /* bit z set = ZeRO stage z allowed */
    unsigned zero_mask_with_pp;  /* allowed stages when pp > 1 */
    unsigned recompute_mask;     /* bit AP_RECOMPUTE_* allowed */
    int recompute_partial;       /* recompute only K layers per chunk (Megatron num-layers) */
    int per_stage_recompute;     /* different recompute count per stage (Colossal-AI) */
    int uneven_stages;           /* arbitrary stage_layers */
    int uneven_first_last_only;  /* only first/last stage may differ (Megatron flags) */
    int uneven_stages_no_vp;     /* uneven splits only without interleaving (Colossal-AI) */
    int vp_needs_m_multiple_of_pp; /* interleaving needs microbatches % pp == 0 */
    int fp16, fp8;
    int offload_optimizer;       /* CPU offload of optimizer states possible */
    int offload_fraction;        /* fractions below 1 possible */
    unsigned offload_optimizer_zero_mask; /* ZeRO stages that allow optimizer offload */
    int offload_params;          /* parameter offload possible */
    unsigned offload_params_zero_mask;
    int offload_params_fraction;
    unsigned offload_fraction_zero_mask; /* ZeRO stages that take optimizer fractions below 1
                                            (DeepSpeed: ZeRO-3; Megatron: distributed opt.) */
    int offload_together;        /* CPU offload moves parameters and optimizer states together
                                    (FSDP CPUOffload, torchtitan enable_cpu_offload) */
    unsigned overlap_param_zero_mask; /* ZeRO stages with an overlapped parameter gather */
    int overlap_param_needs_grad;/* Megatron: --overlap-param-gather needs --overlap-grad-reduce */
    int ep_with_tp_needs_sp;     /* Megatron: expert parallelism with tp > 1 needs sp */
    unsigned ep_zero_mask;       /* ZeRO stages that combine with expert parallelism
                                    (Colossal-AI: GeminiPlugin has none) */
    int recompute_partial_needs_pp; /* Colossal-AI: per-stage counts only with pp > 1 */
    int recompute_partial_divides_chunk; /* torchtitan: K of every chunk as every (n/K)-th of
                                          * uniform chunks of n layers; K divides n */
    /* bytes per parameter in 16-bit training (fp8 adds a weight copy, see cost model) */
    double weight_bytes;         /* working weights (2: bf16) */
    double grad_bytes;           /* gradient accumulation buffer */
    double master_bytes;         /* fp32 master weights (0 when weights are already fp32) */
    double optim_bytes;          /* Adam m + v (+ optimizer-side fp32 gradient copy) */
    double zero3_state_bytes;    /* total bytes/param, all sharded, under ZeRO-3 when the
                                    trainer's accounting differs from the sum (0 = the sum) */
    double gathered_weight_bytes;/* bytes/param of the 16-bit copy ZeRO-3/FSDP gathers per layer */
    int zero2_keeps_gathered;    /* FSDP SHARD_GRAD_OP: gathered params live from fwd to bwd */
    int fsdp2_copies;            /* FSDP2 copies each all-gather's output into the unsharded
                                    parameters and the gradients into each reduce-scatter's
                                    input, on the compute stream (estimate.c stage_zero3) */
    unsigned grad_reduce_per_mb_zero_mask; /* ZeRO stages whose gradients are reduced every
                                              micro-batch (DeepSpeed ZeRO-2/3, FSDP); others
                                              reduce once per step after the last backward */
    int dp_shard_required_with_tp; /* torchtitan: tp > 1 needs a sharded data-parallel side */
    ap_collective grad_collective_sharded; /* collective when gradients are sharded */
    int overlap_grad;            /* gradient reduction can overlap backward */
    int overlap_param;           /* parameter all-gather can overlap forward */
    int overlap_tp;              /* TP communication can overlap the GEMMs (needs sp) */
    int overlap_tp_multicast;    /* ... only on GPUs with CUDA multicast (ap_gpu.multicast) */
    int loss_fp32;               /* logits upcast to fp32 for the loss */
    double loss_bytes_per_logit; /* peak bytes per logit element (s*b*V/t) at the loss:
                                    Megatron's vocab-parallel cross entropy works in place on the
                                    fp32 copy (2 bf16 + 4 fp32 = 6); torch F.cross_entropy on
                                    logits.float() keeps fp32 log-probs and builds the nll and
                                    log_softmax gradients (12) */
    int tied_embedding_dup;      /* tied embeddings duplicated on first and last stage */
    /* added with issue 19 (what the trainers' own validation refuses) */
    unsigned moe_zero_mask;      /* ZeRO stages allowed for a model with experts, any ep
                                    (DeepSpeed: native MoE refuses ZeRO-3) */
    int dp_shard_required_with_cp; /* torchtitan: cp > 1 shards parameters (FSDP over the cp
                                      mesh), so ZeRO 0/1 cannot be expressed */
    int ddp_only_1d;             /* torchtitan: replicated data parallelism (ZeRO 0, DDP) only
                                    when it is the only parallelism (parallelize.py: "DDP has
                                    not supported > 1D parallelism") */
    int ep_from_dp_shard;        /* torchtitan: the expert-parallel ranks come out of the FSDP
                                    shard x cp x tp ranks (parallel_dims.py: efsdp = dp_shard *
                                    cp * tp / (etp * ep)), so ep x etp must divide them */
    unsigned fp8_params_zero_mask; /* ZeRO stages at which the trainer keeps the weights in
                                      FP8 (ap_plan.fp8_params); 0: it does not */
    unsigned zero_group_mask;    /* ZeRO stages the trainer shards within groups of the
                                    data-parallel ranks and replicates across them
                                    (ap_plan.zero_group); 0: it does not */
    int gated_clamp_unfused;     /* gpt-oss's clamped gated activation clamps both halves and
                                    concatenates them in separate kernels before its fused
                                    kernel (layer_cost.c) */
    int fp8_saves_fp8_inputs;    /* fp8 GEMMs keep their inputs for the weight gradient as the
                                    1-byte FP8 casts (Transformer Engine), not the 16-bit
                                    tensors (activations.c) */
    int grads_in_reduce_dtype;   /* its gradient buffer holds the data-parallel reduction's
                                    dtype (a plan's grad_reduce_bytes, where given) */
    int cp_with_mla;             /* context parallelism available for MLA models (torchtitan's
                                    DeepSeek-V3 flavours use flex attention, which its cp refuses) */
    int cp_a2a;                  /* context parallelism by all-to-all as well as the ring (plan.h
                                    cp_a2a: Megatron-Core's cp_comm_type "a2a") */
    int cp_a2a_only;             /* its context parallelism is by all-to-all only, whatever the
                                    plan's cp_a2a says (DeepSpeed-Ulysses; ap_plan_cp_a2a) */
    int cp_alone;                /* context parallelism only without tensor, pipeline and expert
                                    parallelism (Megatron-DeepSpeed's) */
    int offload_params_needs_full_optimizer; /* Colossal-AI Gemini: offload_param_frac acts only
                                    with offload_optim_frac (and shard_param_frac) 1.0 */
    int ep_no_overlap;           /* Colossal-AI MoE plugin: no communication overlap with ep > 1 */
    int pp_no_qk_norm_or_sinks;  /* no pipelining for models with per-head q/k norms or
                                    attention sinks (torchtitan's qwen3 and gpt_oss families
                                    have no pipelining function) */
    /* kernels and collectives as the trainer runs them (costmodel/trainer.c cites each) */
    ap_attn_impl attn_ampere;    /* default attention kernel on Ampere / Ada (sm80-89, AMD) */
    ap_attn_impl attn_hopper;    /* on Hopper and newer */
    ap_attn_impl attn_alibi;     /* when the model uses ALiBi */
    ap_attn_impl attn_softcap;   /* when attention logits are soft-capped */
    double launches_per_layer;   /* kernels one transformer layer's forward launches (eager
                                    host path; backward counted as twice as many) */
    int eager_elementwise;       /* the model's RMSNorm, rotary embedding and SwiGLU run as the
                                    eager PyTorch composites of Hugging Face's modeling code,
                                    not as fused kernels (layer_cost.c counts their bytes) */
    double grad_reduce_bytes;    /* bytes per gradient element in the data-parallel reduction */
    double dp_bucket_params;     /* parameters per gradient reduction call (0: one per layer,
                                    the FSDP unit) */
    double dp_bucket_per_rank;   /* the bucket grows with the ranks it reduces over: at least
                                    this many parameters per data-parallel (x context-parallel)
                                    rank (0: a fixed size) */
    double zero3_gather_params;  /* parameters per ZeRO-3 all-gather (0: one per layer) */
    double zero_ipg_bucket;      /* elements of the contiguous-gradient bucket a ZeRO optimizer
                                    allocates in the gradient dtype (DeepSpeed's IPG buffer of
                                    reduce_bucket_size); 0 = none */
    int zero3_reduce_per_unit;   /* ZeRO-3 gradients reduce-scattered per FSDP unit (a layer)
                                    rather than in dp_bucket_params buckets (Megatron-FSDP) */
    int reduce_once_with_pp;     /* sharded gradients reduced (and ZeRO-3 parameters gathered)
                                    once per step under pipeline parallelism, not per
                                    micro-batch (torch.distributed.pipelining) */
    int param_gather_next_fwd;   /* the distributed optimizer's parameter all-gather overlaps
                                    the next step's forward (Megatron --overlap-param-gather) */
    int p2p_overlap;             /* the interleaved schedule overlaps P2P sends with compute */
    int tp_bwd_async;            /* the backward's TP collectives of column-parallel layers run
                                    beside their GEMMs (Megatron-LM's asynchronous all-reduce,
                                    with sequence parallelism its reduce-scatter and the input's
                                    re-gather) */
    double bf16_optimizer_bytes; /* extra bytes/param of a bf16 optimizer that keeps an
                                    unsharded gradient copy (DeepSpeed BF16_Optimizer under
                                    pipeline parallelism); 0 = none; it also reduces gradients
                                    at that width (its fp32 accumulation buffer) */
    unsigned grad_accum_pass_zero_mask; /* ZeRO stages (bit z) at which every micro-batch's
                                    weight gradient after the first is added into the stored
                                    one by a separate pass (PyTorch's AccumulateGrad: the
                                    gradients live in param.grad until the step), not fused into
                                    the weight-gradient GEMM */
    int cp_eager_merge;          /* context parallelism's ring merges each step's partial
                                    attention output and accumulates the gradients in fp32 by
                                    eager PyTorch ops (torch.distributed context_parallel), not
                                    inside the attention kernels */
    unsigned grad_copy_zero_mask; /* ZeRO stages (bit z) at which every backward copies each
                                    weight gradient into a contiguous reduction bucket
                                    (DeepSpeed's contiguous_gradients) */
    int partition_first_last;    /* the trainer can run splits that differ on the first and
                                    last stages only, although the search does not propose
                                    them (DeepSpeed's PipelineModule partition methods) */
    int p2p_split_tp;            /* pipeline sends split across the tp ranks (Megatron's
                                    scatter/gather, or sequence-parallel activations); 0: every
                                    tp rank sends the whole activation (DeepSpeed's engine) */
    int fp8_amax_reduce;         /* FP8 runs Transformer Engine's delayed scaling with its amaxes
                                    all-reduced over the tp x dp x cp ranks, blocking, at every
                                    fp8_autocast region's end (one region per model chunk,
                                    forward and backward): estimate.c fp8_amax_time */
    unsigned fp8_recipes;        /* FP8 recipes (bit r of ap_fp8_recipe) the trainer runs */
    ap_fp8_recipe fp8_recipe_default; /* the one it runs when the plan says AUTO */
    int fp8_amax_fused;          /* a tensorwise scale's amax is computed inside the kernel that
                                    produces the tensor (torch.compile), not by a pass of its own */
    int selective_op_sac;        /* "selective" is per-op activation checkpointing that keeps
                                    every other matmul output of a block and the attention
                                    output (torchtitan selective_ac_option "op"), not
                                    Megatron's core-attention recompute (activations.c) */
} ap_trainer_caps;

/* The attention kernel plan p runs on GPU g for model m: p->attn_impl unless AUTO; UNFUSED
 * without flash attention; else the trainer's default for ALiBi / soft-capping / the GPU
 * generation (sm70/75 have no FlashAttention-2: memory-efficient SDPA where the trainer is
 * PyTorch-native, unfused otherwise). */
ap_attn_impl ap_attn_default(const ap_plan *p, const ap_model *m, const ap_gpu *g);

/* The torchtitan v0.2.2 model family (--model.name) that has model m's architecture:
 * "deepseek_v3" (multi-latent attention), "gpt_oss" (attention sinks), "llama4" (chunked
 * attention), "qwen3" (per-head q/k norms), else "llama3". */
const char *ap_torchtitan_family(const ap_model *m);

/* The table (costmodel/trainer.c), read through ap_trainer_get on every pricing path, so
 * inline: an id outside the table reads as Megatron-LM's row. */
extern const ap_trainer_caps ap_trainer_table[AP_TRAINER_COUNT];
static inline const ap_trainer_caps *ap_trainer_get(ap_trainer_id id) {
    return (int)id >= 0 && id < AP_TRAINER_COUNT ? &ap_trainer_table[id]
                                                  : &ap_trainer_table[AP_TRAINER_MEGATRON];
}
/* Whether plan p's norms, rotary embedding and gated activation run as eager PyTorch
 * composites (inline: read for every layer price and activation count): the plan's own
 * "elementwise", or its trainer's eager_elementwise where it says AP_ELEMENTWISE_TRAINER. */
static inline int ap_plan_eager_elementwise(const ap_plan *p) {
    if (p->elementwise == AP_ELEMENTWISE_TRAINER)
        return ap_trainer_get(p->trainer)->eager_elementwise;
    return p->elementwise == AP_ELEMENTWISE_EAGER ||
           p->elementwise == AP_ELEMENTWISE_EAGER_FUSED_NORM;
}
/* Whether its RMSNorms are eager composites too. */
static inline int ap_plan_eager_norm(const ap_plan *p) {
    return ap_plan_eager_elementwise(p) && p->elementwise != AP_ELEMENTWISE_EAGER_FUSED_NORM;
}
/* Whether sequence parallelism can split p's sequences: each context-parallel rank's tokens
 * divide by tp (Megatron-LM's scatter_to_sequence_parallel_region asserts it; torchtitan's
 * sequence-sharded norms likewise). The search and the request's default turn sp off where
 * not; a pinned --sp is refused. */
static inline int ap_plan_sp_divides(const ap_plan *p) {
    return p->tp <= 1 || (p->seq / (p->cp > 0 ? p->cp : 1)) % p->tp == 0;
}

/* The FP8 recipe plan p runs: its own, or its trainer's default where it says AUTO (inline: the
 * layer prices read it for every fp8 GEMM). */
static inline ap_fp8_recipe ap_plan_fp8_recipe(const ap_plan *p) {
    return p->fp8_recipe != AP_FP8_AUTO ? p->fp8_recipe
                                        : ap_trainer_get(p->trainer)->fp8_recipe_default;
}
/* Whether plan p's compute weights are FP8 tensors (fp8_params with dtype fp8), and the bytes
 * per parameter of its stored and of its gathered weights: 1 then, else the table's. */
int ap_plan_fp8_weights(const ap_plan *p);
double ap_plan_weight_bytes(const ap_plan *p);
double ap_plan_gathered_weight_bytes(const ap_plan *p);
int ap_plan_bf16_optimizer(const ap_plan *p); /* DeepSpeed's BF16_Optimizer (bf16, ZeRO 0) */

/* Bytes per parameter of plan p's gradients as its trainer stores them: the table's
 * grad_bytes, or the plan's reduction dtype where the trainer's buffer holds that dtype, plus
 * BF16_Optimizer's fp32 buffer where the plan runs it. */
double ap_plan_grad_bytes(const ap_plan *p);
/* Bytes per parameter of plan p's master copy and of its optimizer states (Adam's moments):
 * the table's, or the plan's optimizer state dtype where the trainer keeps a master copy;
 * under BF16_Optimizer less the fp32 gradient its buffer holds. Whether they shard over data
 * parallelism (ZeRO >= 1, or BF16_Optimizer's own partitioning). */
double ap_plan_master_bytes(const ap_plan *p);
double ap_plan_optim_bytes(const ap_plan *p);
int ap_plan_optim_sharded(const ap_plan *p);
/* Bytes of the gradient buckets plan p's trainer holds at a rank's peak beside the model states
 * (DeepSpeed ZeRO's contiguous-gradient buffers; 0 for the others). */
double ap_plan_grad_bucket_bytes(const ap_plan *p);
ap_status ap_trainer_parse(const char *name, ap_trainer_id *out, ap_err *err);
const char *ap_trainer_name(ap_trainer_id id);
/* Can trainer t overlap data-parallel communication (gradient reduction, parameter gathering)
 * in a plan with expert-parallel degree ep? Not where its MoE path turns overlap off
 * (ep_no_overlap). The search's and estimate's default, and the label's "no-ov" baseline. */
int ap_trainer_dp_overlap(const ap_trainer_caps *t, int ep);

/* Whether trainer t overlaps TP communication with the GEMMs on GPU g (overlap_tp, and the
 * GPU's multicast where the trainer's overlap needs it). */
int ap_trainer_overlap_tp(const ap_trainer_caps *t, const ap_gpu *g);

/* The ZeRO stages trainer t shards within groups (zero_group_mask) in words, into buf:
 * "stage 1", "stages 2 and 3"; "" when none. Returns buf. */
const char *ap_trainer_zero_group_stages(const ap_trainer_caps *t, char *buf, size_t n);

/* The data-parallel ranks that shard plan p's dense states: its zero_group where that is a
 * group of fewer than all dp x cp ranks, else all of them (>= 1). */
int ap_plan_zero_shard(const ap_plan *p);

/* The part of ap_plan_check that reads zero_group (at least 2 ranks, a stage the trainer
 * groups, a divisor of dp x cp holding whole cp groups, no offload simulation); call it on a
 * plan with zero_group != 0. */
ap_status ap_plan_check_zero_group(const ap_plan *p, ap_err *err);

/* The part of ap_plan_check that reads the layout (stage_layers, the uniform split's
 * divisibility, per-chunk recompute counts): for a plan whose other fields passed
 * ap_plan_check, this alone says whether it passes with another layout (stagecost.c). */
ap_status ap_plan_check_layout(const ap_plan *p, const ap_model *m, ap_err *err);

/* Whether plan p runs its context parallelism by all-to-all: cp > 1 and the plan says so
 * (cp_a2a) or its trainer has no other (cp_a2a_only). */
int ap_plan_cp_a2a(const ap_plan *p);

/* Whether model m's heads allow all-to-all context parallelism over cp ranks beside tp ones:
 * no multi-latent attention, and each tp rank's query and key/value heads (heads / tp, kv
 * heads / tp or one replicated) divisible by cp, as Transformer Engine's a2a path asserts. The
 * one rule ap_plan_check, the search's space and the emitters' repair share. */
int ap_plan_cp_a2a_heads(const ap_model *m, int tp, int cp);

/* Can trainer p->trainer run plan p on model m and cluster c? On refusal, err names the rule
 * ("deepspeed: ZeRO-2/3 cannot be combined with pipeline parallelism"). Also checks the
 * structural constraints: tp*pp*cp*dp == gpus, heads % tp, kv heads, layers % pp (or uneven
 * support), vp rules, seq % (2*cp), experts % ep, gbs % (mbs*dp), tp within the NVLink domain
 * unless allow_cross_node_tp. */
ap_status ap_plan_check(const ap_plan *p, const ap_model *m, const ap_cluster *c,
                        int allow_cross_node_tp, ap_err *err);
/* ap_plan_check's verdict in three factors, for the search's groups (whose members differ in
 * recompute, recompute_layers, mbs and grad_accum only): ap_plan_check(p) == AP_OK exactly when
 * the checks reading none of those pass, ap_plan_rc_ok(p) (those reading the recompute fields)
 * and ap_plan_mb_ok(p) (those reading the micro-batch fields). 1 = those checks pass. */
int ap_plan_rc_ok(const ap_plan *p, const ap_model *m);
int ap_plan_mb_ok(const ap_plan *p);

#endif
