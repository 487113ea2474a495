/*
 * trainer.c - the trainer capability table: the one place that knows what each trainer can run
 * and how it stores model states. Search, estimate, simulator and config generators all read
 * it; nothing else hard-codes a trainer rule.
 *
 * Sources (shared/reference/trainers/README.md, copied facts, snapshot 2026-08):
 *  Megatron-LM core 0.19: distributed optimizer shards fp32 master weights and Adam states
 *    (6 + 12/d bytes/param; without it 18 = 2 bf16 weight + 4 fp32 main grad + 4 master + 8
 *    Adam), --recompute-granularity/method/num-layers, --decoder-first/last-pipeline-num-layers
 *    and --pipeline-model-parallel-layout for uneven stages, --optimizer-cpu-offload with
 *    --optimizer-offload-fraction (needs the distributed optimizer), --tp-comm-overlap
 *    (Transformer Engine userbuffers, with sequence parallelism; TE's initialize_ub refuses a
 *    device without CUDA multicast unless UB_SKIPMC=1, whose CUDA-IPC fallback its
 *    examples/pytorch/comm_gemm_overlap/README.md calls less performant and needs on devices
 *    below compute capability 9.0: autoplan plans the overlap on multicast GPUs only and does
 *    not price the fallback), interleaving with
 *    --num-layers-per-virtual-pipeline-stage (microbatches a multiple of pp). ZeRO-3 is
 *    Megatron-FSDP (--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params,
 *    with the distributed optimizer, --no-gradient-accumulation-fusion and --ckpt-format
 *    fsdp_dtensor, arguments.py validate_args): bf16 weights, fp32 main gradients, master
 *    weights and Adam states all sharded over data parallelism (18/d bytes/param), each
 *    transformer layer an FSDP unit gathered in forward and backward and reduce-scattered per
 *    micro-batch. Its documented compatibility is TP, CP and EP, not PP (NVIDIA/Megatron-LM issue
 *    1455; PR 6081: "FSDP and PP are mutually exclusive in Megatron's standard path");
 *    autoplan keeps it to dense models without pipeline parallelism.
 *  DeepSpeed v0.19: ZeRO 0-3 (2 + 2 + 16 bytes/param, see the entry), pipeline
 *    parallelism only with ZeRO 0/1, DeepSpeed-Ulysses sequence parallelism (all-to-all context
 *    parallelism, without tensor or pipeline parallelism), offload_param only with stage 3, partial optimizer offload
 *    (ratio) only with stage 3; ZeRO-2/3 reduce gradients during every backward.
 *  PyTorch FSDP/FSDP2 (Accelerate, HF Trainer): fp32 sharded parameters are the master copy
 *    (4 + 4 grad + 8 Adam = 16 bytes/param), bf16 copies gathered per wrapped layer;
 *    FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2, NO_SHARD = DDP; CPUOffload moves all params.
 *  torchtitan v0.2.2: FSDP2 + TP (always with sequence parallel) + PP (FSDP with PP is fine) +
 *    CP + EP; no ZeRO-1; with tp > 1 the data-parallel side must be sharded; no fp16;
 *    activation_checkpoint.mode none|selective|full, selective_ac_option op or every N layers;
 *    parallelism.enable_async_tensor_parallel (async TP, with sequence parallelism);
 *    pipeline_parallel_layers_per_stage.
 *  Colossal-AI v0.5.1: HybridParallelPlugin zero_stage 0-2 (<= 1 with pp), num_model_chunks,
 *    num_layers_per_stage, per-stage checkpoint counts (PipelineGradientCheckpointConfig), no
 *    selective recompute; GeminiPlugin = ZeRO-3 with offload_optim_frac / offload_param_frac;
 *    mixed-precision states as in the ZeRO paper (Rajbhandari et al. 2020, Sec. 3.1: 2 + 2 +
 *    K=12 bytes/param).
 *  runtime (runtime/, docs/runtime.md): autoplan's executor on CPU ranks, fp32 throughout:
 *    4-byte weights and gradients, AdamW m and v (8), no master copy; ZeRO 0-3 with any pp,
 *    optimizer offload fractions at every stage, no parameter offload, no overlap; paired with
 *    the catalog's "cpu" device only (plan.c).
 */
#include "autoplan/plan.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define Z(n) (1u << (n))
#define RC(n) (1u << (n))
#define FR(r) (1u << (r))

const ap_trainer_caps ap_trainer_table[AP_TRAINER_COUNT] = {
    [AP_TRAINER_MEGATRON] = {
        .name = "megatron", .display = "Megatron-LM",
        .cite = "NVIDIA/Megatron-LM core 0.19 arguments.py (shared/reference/trainers)",
        .tp = 1, .pp = 1, .vp = 1, .cp = 1, .ep = 1, .sp = 1, .sp_with_tp_always = 0,
        .zero_mask = Z(0) | Z(1) | Z(3), .zero_mask_with_pp = Z(0) | Z(1),
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_SELECTIVE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 1, .per_stage_recompute = 0,
        .uneven_stages = 1, .uneven_first_last_only = 0, /* layout flag allows any split */
        .vp_needs_m_multiple_of_pp = 1,
        .fp16 = 1, .fp8 = 1,
        .offload_optimizer = 1, .offload_fraction = 1, .offload_optimizer_zero_mask = Z(1),
        .offload_params = 0, .offload_params_zero_mask = 0, .offload_params_fraction = 0,
        .offload_fraction_zero_mask = Z(1), .offload_together = 0,
        .overlap_param_zero_mask = Z(1) | Z(3), .overlap_param_needs_grad = 1,
        .ep_with_tp_needs_sp = 1,
        .ep_zero_mask = Z(0) | Z(1), .recompute_partial_needs_pp = 0,
        .weight_bytes = 2, .grad_bytes = 4, .master_bytes = 4, .optim_bytes = 8,
        .gathered_weight_bytes = 2, .zero2_keeps_gathered = 0,
        /* Megatron-FSDP reduce-scatters each unit's gradient every micro-batch into the
           sharded main gradient (the header above; estimate.c stage_zero3 prices it so) */
        .grad_reduce_per_mb_zero_mask = Z(3),
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 1, .overlap_tp_multicast = 1,
        .overlap_grad = 1, .overlap_param = 1, .loss_fp32 = 1, .tied_embedding_dup = 1,
        .loss_bytes_per_logit = 6,
        /* Megatron-core: Transformer Engine picks flash-attn 2 on sm80 and its cuDNN fused
         * attention on Hopper (--attention-backend auto); no ALiBi or soft-capping in core (the
         * scores are materialised); TE LayerNormLinear/LayerNormMLP fuse norm and GEMM, ~12
         * kernels per layer forward; main gradients in fp32 (--grad-reduce-in-bf16 off);
         * DDP buckets of max(40M, 1M x dp) parameters (distributed/distributed_data_parallel_
         * config.py); --overlap-param-gather overlaps the all-gather with the next forward;
         * interleaving overlaps P2P (--no-overlap-p2p-communication to disable) */
        .attn_ampere = AP_ATTN_FA2, .attn_hopper = AP_ATTN_CUDNN,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        .launches_per_layer = 12, .grad_reduce_bytes = 4, .dp_bucket_params = 40e6,
        .dp_bucket_per_rank = 1e6,
        .zero3_gather_params = 0, .zero3_reduce_per_unit = 1, .reduce_once_with_pp = 1,
        .param_gather_next_fwd = 1,
        .p2p_overlap = 1, .bf16_optimizer_bytes = 0, .p2p_split_tp = 1,
        /* the column-parallel layers' backward collectives beside their GEMMs
           (LinearWithGradAccumulationAndAsyncCommunication; --no-async-tensor-model-parallel-
           allreduce to disable; the default since 2021-09, commit 3f65246) */
        .tp_bwd_async = 1,
        .dp_shard_required_with_tp = 0,
        .moe_zero_mask = Z(0) | Z(1), .dp_shard_required_with_cp = 0, .cp_with_mla = 1,
        /* --cp-comm-type a2a (core/transformer/transformer_config.py cp_comm_type, p2p by
         * default): Transformer Engine's AttnFuncWithCPAndQKVOA2A all-to-alls Q, K and V from
         * sequence to head shards before the kernel and the output back after it (their
         * gradients likewise in backward), DeepSpeed-Ulysses' scheme (Jacobs et al. 2023,
         * arXiv 2309.14509 Sec. 3); it needs the rank's query and key heads divisible by cp */
        .cp_a2a = 1,
        /* --fp8-param-gather: Transformer Engine's fp8_model_init keeps the weights as FP8
         * tensors and the distributed optimizer (or Megatron-FSDP) gathers them in FP8; the
         * arguments refuse it without one of those (arguments.py validate_args) */
        .fp8_params_zero_mask = Z(1) | Z(3),
        /* --num-distributed-optimizer-instances N: the distributed optimizer shards within
         * each of N groups of the dp x cp ranks and is replicated across them ("partial
         * DistOpt", core/distributed/distributed_data_parallel_config.py) */
        .zero_group_mask = Z(1),
        /* Megatron-Core DistributedDataParallel allocates its main-gradient buffer in fp32
         * with grad_reduce_in_fp32 (Megatron-LM's bf16 default) and in the parameters' dtype
         * without it (--grad-reduce-in-bf16; NeMo's grad_sync_dtype bf16) */
        .grads_in_reduce_dtype = 1,
        /* --fp8-recipe defaults to delayed (core/transformer/transformer_config.py), whose
         * TransformerBlock runs each chunk's layers in one te.fp8_autocast with fp8_group
         * parallel_state.get_amax_reduction_group(with_context_parallel=True): the tensor x
         * data x context parallel ranks (core/fp8_utils.py get_fp8_context,
         * core/transformer/transformer_block.py); Transformer Engine all-reduces the region's
         * amaxes over that group with async_op=False when the region exits, and its backward
         * amaxes in the region's first module's backward (transformer_engine/pytorch/fp8.py
         * fp8_autocast_exit -> reduce_and_update_fp8_tensors, v1.6-v1.11; the same per region
         * in v0.8's global_amax_reduction) */
        .fp8_amax_reduce = 1,
        /* --fp8-recipe delayed (the default), tensorwise (Float8CurrentScaling) or mxfp8
         * (MXFP8BlockScaling; megatron/training/arguments.py choices tensorwise, delayed,
         * mxfp8, blockwise), Transformer Engine kernels run eagerly (core/fp8_utils.py
         * get_fp8_recipe) */
        .fp8_recipes = FR(AP_FP8_DELAYED) | FR(AP_FP8_TENSORWISE) | FR(AP_FP8_MXFP8),
        .fp8_recipe_default = AP_FP8_DELAYED, .fp8_amax_fused = 0,
        /* Transformer Engine's fp8 Linear / LayerNormLinear save the FP8 cast of their input
         * (or its transpose) for the weight gradient, not the 16-bit input
         * (transformer_engine/pytorch/module/linear.py, layernorm_linear.py forward:
         * ctx.save_for_backward of the fp8 inputmat / ln_out) */
        .fp8_saves_fp8_inputs = 1,
        /* core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl (the experts' path,
         * moe/experts.py): with activation_func_clamp_value it clamps x_glu and x_linear and
         * torch.cat's them back before the jit-fused quick-GeGLU */
        .gated_clamp_unfused = 1,
    },
    [AP_TRAINER_DEEPSPEED] = {
        .name = "deepspeed", .display = "DeepSpeed",
        .cite = "deepspeedai/DeepSpeed v0.19 runtime/zero/config.py (shared/reference/trainers)",
        .tp = 1, .pp = 1, .vp = 0, .cp = 1, .ep = 1, .sp = 1, .sp_with_tp_always = 0,
        .zero_mask = Z(0) | Z(1) | Z(2) | Z(3), .zero_mask_with_pp = Z(0) | Z(1),
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 0, .per_stage_recompute = 0,
        .uneven_stages = 0, .uneven_first_last_only = 0,
        .vp_needs_m_multiple_of_pp = 0,
        .fp16 = 1, .fp8 = 0,
        .offload_optimizer = 1, .offload_fraction = 1,
        .offload_optimizer_zero_mask = Z(1) | Z(2) | Z(3),
        .offload_params = 1, .offload_params_zero_mask = Z(3), .offload_params_fraction = 0,
        /* DeepSpeed's optimizer side keeps fp32 master weights, Adam m and v, and an fp32
         * copy of its gradient partition: 16 bytes/param sharded; its estimator in
         * runtime/zero/stage_1_and_2.py gives 2P + 18P/N for ZeRO-2 and 18P/N (+ 4 x largest
         * layer) for ZeRO-3 (the older docs' 4P + 16P/N is not what the code computes) */
        .offload_fraction_zero_mask = Z(3), .offload_together = 0,
        .overlap_param_zero_mask = Z(1) | Z(2) | Z(3), .overlap_param_needs_grad = 0,
        .ep_with_tp_needs_sp = 0, .ep_zero_mask = Z(0) | Z(1) | Z(2) | Z(3),
        .recompute_partial_needs_pp = 0,
        .weight_bytes = 2, .grad_bytes = 2, .master_bytes = 4, .optim_bytes = 12,
        .zero3_state_bytes = 18,
        .gathered_weight_bytes = 2, .zero2_keeps_gathered = 0,
        .grad_reduce_per_mb_zero_mask = Z(2) | Z(3),
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 0,
        .overlap_grad = 1, .overlap_param = 1, .loss_fp32 = 1, .tied_embedding_dup = 1,
        .loss_bytes_per_logit = 12,
        /* Megatron-DeepSpeed: --use-flash-attn-v2, ALiBi through its fused softmax (unfused),
         * apex fused kernels (~16 per layer); 16-bit gradient reduction in buckets of
         * reduce_bucket_size 5e8 elements, ZeRO-3 gathers of stage3_prefetch_bucket_size 5e7
         * (runtime/zero/config.py defaults); the pipeline engine sends blocking; bf16 at ZeRO
         * stage 0 runs BF16_Optimizer (runtime/bf16_optimizer.py): a full-size fp32 gradient
         * buffer (fp32_groups_gradients_flat) beside the bf16 gradients, master weights and Adam
         * partitioned over data parallelism, the fp32 buffer all-reduced
         * (get_grads_for_reduction); PipelineEngine partitions the activations it sends
         * across the model-parallel ranks (runtime/pipe/engine.py is_pipe_partitioned) */
        .attn_ampere = AP_ATTN_FA2, .attn_hopper = AP_ATTN_FA2,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        /* its Llama path runs the same eager composites as Hugging Face's code
         * (megatron/model/rmsnorm.py RMSNorm: x.float(), pow, mean, rsqrt, type_as, weight;
         * rotary_pos_embedding.py apply_rotary_pos_emb: t * cos + _rotate_half(t) * sin;
         * transformer.py swiglu: F.silu(x[0]) * x[1]); GPT-style blocks use apex's fused
         * LayerNorm and bias-GeLU, which eager_elementwise leaves alone */
        .launches_per_layer = 16, .eager_elementwise = 1,
        .grad_reduce_bytes = 2, .dp_bucket_params = 5e8, .zero_ipg_bucket = 5e8,
        .zero3_gather_params = 5e7, .reduce_once_with_pp = 1, .param_gather_next_fwd = 0,
        .p2p_overlap = 0, .bf16_optimizer_bytes = 4, .p2p_split_tp = 1,
        /* tp_bwd_async 0: Megatron-DeepSpeed's column-parallel layers all-reduce their input
         * gradients synchronously (bigscience-workshop/Megatron-DeepSpeed megatron/mpu/
         * layers.py: copy_to_tensor_model_parallel_region, no asynchronous all-reduce) */
        /* ZeRO stages 0 and 1 reduce at the accumulation boundary only (runtime/engine.py
         * allreduce_gradients), so between boundaries each backward's weight gradient is
         * accumulated into param.grad by autograd's AccumulateGrad, an in-place add
         * (torch/csrc/autograd/functions/accumulate_grad.h); BF16_Optimizer clears the bf16
         * gradients every backward and pays its own fp32 pass instead (estimate.c) */
        .grad_accum_pass_zero_mask = Z(0) | Z(1),
        /* ZeRO-2 and ZeRO-3 reduce every backward from the contiguous bucket each gradient is
         * copied into (zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads,
         * zero/stage3.py __add_grad_to_ipg_bucket: new_grad_tensor.copy_(...)) */
        .grad_copy_zero_mask = Z(2) | Z(3),
        /* PipelineModule partition_method 'type:transformer|embedding' (BLOOM: the embeddings
         * count as layers) or 'parameters' (DeepSpeed's own default) give the first and last
         * stages fewer transformer layers; autoplan does not propose such splits for DeepSpeed
         * (the search keeps Megatron-DeepSpeed's 'type:transformer', uniform) but prices them */
        .partition_first_last = 1,
        /* MiCS (zero_optimization.mics_shard_size, runtime/zero/mics.py): ZeRO-3 shards the
         * parameters within groups of that many ranks and replicates them across the groups;
         * the engine builds MiCS_Optimizer at stage 3 only (runtime/engine.py
         * _configure_zero_optimizer) */
        .zero_group_mask = Z(3),
        .dp_shard_required_with_tp = 0,
        /* deepspeed/runtime/engine.py: "Native DeepSpeed MoE is not supported with ZeRO
         * Stage 3" (assertion when the model has MoE layers, whatever ep is) */
        .moe_zero_mask = Z(0) | Z(1) | Z(2), .dp_shard_required_with_cp = 0, .cp_with_mla = 0,
        /* DeepSpeed-Ulysses (Megatron-DeepSpeed --ds-sequence-parallel-size): DistributedAttention
         * (deepspeed/sequence/layer.py) all-to-alls Q, K and V and the output over the sequence-
         * parallel group, the only context parallelism it has; megatron/core/parallel_state.py
         * initialize_model_parallel asserts "DeepSpeed's sequence parallel does not work with
         * tensor parallel or pipeline parallel" (expert parallelism with it: not modelled); ZeRO
         * and the gradient reduction span the sequence x data ranks (its sequence data parallel
         * group), as autoplan's dp x cp */
        .cp_a2a = 1, .cp_a2a_only = 1, .cp_alone = 1,
    },
    [AP_TRAINER_FSDP] = {
        .name = "fsdp", .display = "PyTorch FSDP",
        .cite = "PyTorch FSDP/FSDP2 via Accelerate 1.15 (shared/reference/trainers)",
        .tp = 0, .pp = 0, .vp = 0, .cp = 0, .ep = 0, .sp = 0, .sp_with_tp_always = 0,
        .zero_mask = Z(0) | Z(2) | Z(3), .zero_mask_with_pp = 0,
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 0, .per_stage_recompute = 0,
        .uneven_stages = 0, .uneven_first_last_only = 0,
        .vp_needs_m_multiple_of_pp = 0,
        .fp16 = 1, .fp8 = 1, /* Accelerate mixed_precision="fp8": Transformer Engine or torchao */
        /* Accelerate's fp8_backend TE (DelayedScaling, its default where Transformer Engine is
         * installed: utils/dataclasses.py TERecipeKwargs) or AO (torchao Float8Linear,
         * tensorwise dynamic scaling, eager unless the script compiles); TE's DelayedScaling
         * reduces the amaxes of its one te.fp8_autocast region around the model's forward over
         * the default process group (reduce_amax, transformer_engine/pytorch/quantization.py
         * reduce_and_update_fp8_tensors) */
        .fp8_recipes = FR(AP_FP8_DELAYED) | FR(AP_FP8_TENSORWISE),
        .fp8_recipe_default = AP_FP8_DELAYED, .fp8_amax_fused = 0, .fp8_amax_reduce = 1,
        .offload_optimizer = 1, .offload_fraction = 0, .offload_optimizer_zero_mask = Z(3),
        .offload_params = 1, .offload_params_zero_mask = Z(3), .offload_params_fraction = 0,
        .offload_fraction_zero_mask = 0, .offload_together = 1,
        .overlap_param_zero_mask = Z(2) | Z(3), .overlap_param_needs_grad = 0,
        .ep_with_tp_needs_sp = 0, .ep_zero_mask = 0, .recompute_partial_needs_pp = 0,
        .weight_bytes = 4, .grad_bytes = 4, .master_bytes = 0, .optim_bytes = 8,
        .gathered_weight_bytes = 2, .zero2_keeps_gathered = 1,
        .grad_reduce_per_mb_zero_mask = Z(2) | Z(3),
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 0,
        .overlap_grad = 1, .overlap_param = 1, .loss_fp32 = 1, .tied_embedding_dup = 0,
        .loss_bytes_per_logit = 12,
        /* Hugging Face models under Accelerate FSDP: attn_implementation "sdpa" (PyTorch's
         * flash backend = FlashAttention-2 kernels), eager attention for ALiBi (BLOOM) and
         * soft-capping (Gemma-2); the eager decoder layer launches ~33 kernels forward (norms
         * as 6 kernels each, q/k/v/o, rotary, SDPA, gate/up/down, SiLU, residuals); FSDP
         * MixedPrecision reduces in bf16; one reduce-scatter and all-gather per FSDP unit
         * (transformer block) */
        .attn_ampere = AP_ATTN_FA2, .attn_hopper = AP_ATTN_FA2,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        .launches_per_layer = 33, .grad_reduce_bytes = 2, .dp_bucket_params = 0,
        .eager_elementwise = 1,
        /* Accelerate's fsdp_version 2 (what emit_accelerate.c writes): fully_shard's copies
         * into and out of its collectives, as under torchtitan; a validation row of a
         * FlatParameter FSDP run says "fsdp_version": 1 */
        .fsdp2_copies = 1,
        .zero3_gather_params = 0, .reduce_once_with_pp = 0, .param_gather_next_fwd = 0,
        .p2p_overlap = 0, .bf16_optimizer_bytes = 0, .p2p_split_tp = 1,
        .dp_shard_required_with_tp = 0,
        .moe_zero_mask = Z(0) | Z(2) | Z(3), .dp_shard_required_with_cp = 0, .cp_with_mla = 0,
        /* hybrid sharding (HSDP): Accelerate's parallelism_config dp_replicate_size x
         * dp_shard_size gives FSDP2 a 2-D mesh, sharded within dp_shard_size ranks and
         * replicated across the others, with either reshard_after_forward */
        .zero_group_mask = Z(2) | Z(3),
    },
    [AP_TRAINER_TORCHTITAN] = {
        .name = "torchtitan", .display = "torchtitan",
        .cite = "pytorch/torchtitan v0.2.2 config/job_config.py (shared/reference/trainers)",
        .tp = 1, .pp = 1, .vp = 1, .cp = 1, .ep = 1, .sp = 1, .sp_with_tp_always = 1,
        .zero_mask = Z(0) | Z(2) | Z(3), .zero_mask_with_pp = Z(0) | Z(2) | Z(3),
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_SELECTIVE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 1, .per_stage_recompute = 0,
        .uneven_stages = 1, .uneven_first_last_only = 0,
        .vp_needs_m_multiple_of_pp = 0,
        .fp16 = 0, .fp8 = 1,
        /* [quantize.linear.float8]: torchao Float8Linear with tensorwise dynamic scaling (the
         * recipe when recipe_name is unset); torchao has had no delayed scaling since 0.10
         * (pytorch/ao #1753); under torch.compile (the emitted config's) the amax reduction
         * fuses into the kernel that produces the tensor */
        .fp8_recipes = FR(AP_FP8_TENSORWISE), .fp8_recipe_default = AP_FP8_TENSORWISE,
        .fp8_amax_fused = 1,
        .offload_optimizer = 1, .offload_fraction = 0, .offload_optimizer_zero_mask = Z(3),
        .offload_params = 1, .offload_params_zero_mask = Z(3), .offload_params_fraction = 0,
        .offload_fraction_zero_mask = 0, .offload_together = 1,
        .overlap_param_zero_mask = Z(2) | Z(3), .overlap_param_needs_grad = 0,
        .ep_with_tp_needs_sp = 0, .ep_zero_mask = Z(0) | Z(2) | Z(3),
        /* activation_checkpoint.selective_ac_option = N checkpoints every N-th block of a
           model part (torchtitan v0.2.2 parallelize_llama.py, layer SAC): K recomputed layers
           per chunk exist only as n/K with uniform chunks of n layers */
        .recompute_partial_needs_pp = 0, .recompute_partial_divides_chunk = 1,
        .weight_bytes = 4, .grad_bytes = 4, .master_bytes = 0, .optim_bytes = 8,
        .gathered_weight_bytes = 2, .zero2_keeps_gathered = 1,
        .grad_reduce_per_mb_zero_mask = Z(2) | Z(3),
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 1,
        .overlap_grad = 1, .overlap_param = 1, .loss_fp32 = 1, .tied_embedding_dup = 1,
        .loss_bytes_per_logit = 12,
        /* FSDP2's fully_shard (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):
         * foreach_all_gather_copy_out splits every all-gather's flat output into the unsharded
         * parameters (split_with_sizes_copy) and foreach_reduce_scatter_copy_in copies the
         * unsharded gradients, cast to the reduce dtype, into the reduce-scatter's flat input,
         * both on the compute stream */
        .fsdp2_copies = 1,
        /* torchtitan: SDPA flash backend (FlashAttention-2 kernels), eager Llama block ~27
         * kernels forward; training.mixed_precision_reduce = float32 (config/job_config.py);
         * FSDP2 per transformer block; with pipeline parallelism torch.distributed.pipelining
         * reduces gradients once per step and keeps parameters unsharded across micro-batches
         * (reshard_after_forward off under PP); interleaved schedules overlap P2P */
        .attn_ampere = AP_ATTN_FA2, .attn_hopper = AP_ATTN_FA2,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        .launches_per_layer = 27, .grad_reduce_bytes = 4, .dp_bucket_params = 0,
        .zero3_gather_params = 0, .reduce_once_with_pp = 1, .param_gather_next_fwd = 0,
        .p2p_overlap = 1, .bf16_optimizer_bytes = 0, .p2p_split_tp = 1,
        .dp_shard_required_with_tp = 1,
        /* activation_checkpoint.mode "selective" with selective_ac_option "op", the default of
         * its Llama configs (train_configs/llama3_8b.toml): torch.utils.checkpoint selective
         * checkpointing that saves mm, SDPA and reduce_scatter outputs except every second mm
         * of a block (parallelize_llama.py _save_list / _custom_policy) */
        .selective_op_sac = 1,
        /* torchtitan v0.2.2 parallel_dims: cp > 1 folds the cp ranks into the FSDP mesh
         * (dp_shard_cp), so parameters are sharded; the DeepSeek-V3 flavours use flex
         * attention, which its context parallelism refuses */
        .moe_zero_mask = Z(0) | Z(2) | Z(3), .dp_shard_required_with_cp = 1, .cp_with_mla = 0,
        /* its context parallelism is PyTorch's (torch/distributed/tensor/experimental/
         * _attention.py): _templated_ring_attention merges every ring step's block output into
         * an fp32 running output by eager ops (_SDPAMerger, convert_to_f32 on) and the backward
         * accumulates dq, dk, dv in fp32 and rotates dk, dv in fp32 (layer_cost.c) */
        .cp_eager_merge = 1,
        /* parallel_dims.py (v0.2.2): efsdp = dp_shard * cp * tp // (etp * ep), a mesh dimension;
         * ZeRO-0 (dp_shard 1) with ep 16 gave "The product of mesh_sizes=(16, 16, 0, 16, 1) is
         * 0" (tools/trainer_validate.py, DeepSeek-V3 on 256 GPUs) */
        .ep_from_dp_shard = 1,
        .ddp_only_1d = 1,
        /* parallelism.data_parallel_replicate_degree x data_parallel_shard_degree: HSDP, FSDP2
         * over the shard (x cp) ranks, replicated across the others (parallel_dims.py) */
        .zero_group_mask = Z(2) | Z(3),
        /* models/qwen3/__init__.py and models/gpt_oss/__init__.py (v0.2.2) register
         * pipelining_fn=None, which train.py calls for pp > 1: "'NoneType' object is not
         * callable" (tools/trainer_validate.py, tt-qwen3-8b) */
        .pp_no_qk_norm_or_sinks = 1,
    },
    [AP_TRAINER_COLOSSALAI] = {
        .name = "colossalai", .display = "Colossal-AI",
        .cite = "hpcaitech/ColossalAI v0.5.1 booster/plugin/*.py (shared/reference/trainers)",
        .tp = 1, .pp = 1, .vp = 1, .cp = 0, .ep = 1, .sp = 1, .sp_with_tp_always = 0,
        .zero_mask = Z(0) | Z(1) | Z(2) | Z(3), .zero_mask_with_pp = Z(0) | Z(1),
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 1, .per_stage_recompute = 1,
        .uneven_stages = 1, .uneven_first_last_only = 0,
        /* PipelineStageManager asserts len(num_layers_per_stage) == pp size
         * (colossalai/pipeline/stage_manager.py, v0.5.1): interleaved chunks stay uniform */
        .uneven_stages_no_vp = 1,
        .vp_needs_m_multiple_of_pp = 1,
        .fp16 = 1, .fp8 = 1,
        /* use_fp8: colossalai/quantization/fp8.py linear_fp8 casts each input with a scale from
         * its own amax (cast_to_fp8: per-tensor scaling computed from inp), eagerly */
        .fp8_recipes = FR(AP_FP8_TENSORWISE), .fp8_recipe_default = AP_FP8_TENSORWISE,
        .fp8_amax_fused = 0,
        .offload_optimizer = 1, .offload_fraction = 1,
        .offload_optimizer_zero_mask = Z(1) | Z(2) | Z(3),
        .offload_params = 1, .offload_params_zero_mask = Z(3), .offload_params_fraction = 1,
        .offload_fraction_zero_mask = Z(3), .offload_together = 0,
        .overlap_param_zero_mask = Z(1) | Z(2) | Z(3), .overlap_param_needs_grad = 0,
        /* MoeHybridParallelPlugin (ep > 1) forces zero_stage 1 */
        .ep_with_tp_needs_sp = 0, .ep_zero_mask = Z(1), .recompute_partial_needs_pp = 1,
        .weight_bytes = 2, .grad_bytes = 2, .master_bytes = 4, .optim_bytes = 8,
        .gathered_weight_bytes = 2, .zero2_keeps_gathered = 0,
        .grad_reduce_per_mb_zero_mask = Z(2) | Z(3),
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 0,
        .overlap_grad = 1, .overlap_param = 1, .loss_fp32 = 1, .tied_embedding_dup = 1,
        .loss_bytes_per_logit = 12,
        /* Colossal-AI shardformer: enable_flash_attention = flash-attn 2; the rest of the block
         * is the Hugging Face modeling code (enable_fused_normalization and enable_jit_fused
         * default False, and the emitted plugin leaves them so: the fused norm needs apex),
         * eager as under FSDP (~33 kernels per layer forward, RMSNorm, rotary and SwiGLU as
         * composites); 16-bit reduction in buckets of reduce_bucket_size_in_m = 12M elements
         * (HybridParallelPlugin default); Gemini gathers per chunk (~ per layer) */
        .attn_ampere = AP_ATTN_FA2, .attn_hopper = AP_ATTN_FA2,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        .launches_per_layer = 33, .eager_elementwise = 1,
        .grad_reduce_bytes = 2, .dp_bucket_params = 12e6,
        .zero3_gather_params = 0, .reduce_once_with_pp = 1, .param_gather_next_fwd = 0,
        .p2p_overlap = 0, .bf16_optimizer_bytes = 0, .p2p_split_tp = 1,
        .dp_shard_required_with_tp = 0,
        .moe_zero_mask = Z(0) | Z(1) | Z(2) | Z(3), .dp_shard_required_with_cp = 0,
        .cp_with_mla = 0,
        /* gemini_plugin.py: offload_param_frac is ignored unless shard_param_frac and
         * offload_optim_frac are 1.0; moe_hybrid_parallel_plugin.py sets
         * overlap_communication False */
        .offload_params_needs_full_optimizer = 1, .ep_no_overlap = 1,
    },
    [AP_TRAINER_RUNTIME] = {
        .name = "runtime", .display = "autoplan runtime",
        .cite = "runtime/ of this repository (docs/runtime.md)",
        .tp = 1, .pp = 1, .vp = 1, .cp = 0, .ep = 0, .sp = 1, .sp_with_tp_always = 0,
        .zero_mask = Z(0) | Z(1) | Z(2) | Z(3), .zero_mask_with_pp = Z(0) | Z(1) | Z(2) | Z(3),
        .recompute_mask = RC(AP_RECOMPUTE_NONE) | RC(AP_RECOMPUTE_SELECTIVE) | RC(AP_RECOMPUTE_FULL),
        .recompute_partial = 1, .per_stage_recompute = 1,
        .uneven_stages = 1, .uneven_first_last_only = 0,
        .vp_needs_m_multiple_of_pp = 1,
        .fp16 = 0, .fp8 = 0,
        .offload_optimizer = 1, .offload_fraction = 1,
        .offload_optimizer_zero_mask = Z(0) | Z(1) | Z(2) | Z(3),
        .offload_params = 0, .offload_params_zero_mask = 0, .offload_params_fraction = 0,
        .offload_fraction_zero_mask = Z(0) | Z(1) | Z(2) | Z(3), .offload_together = 0,
        .overlap_param_zero_mask = 0, .overlap_param_needs_grad = 0,
        .ep_with_tp_needs_sp = 0, .ep_zero_mask = 0, .recompute_partial_needs_pp = 0,
        .weight_bytes = 4, .grad_bytes = 4, .master_bytes = 0, .optim_bytes = 8,
        .gathered_weight_bytes = 4, .zero2_keeps_gathered = 0,
        .grad_reduce_per_mb_zero_mask = 0,
        .grad_collective_sharded = AP_COLL_REDUCE_SCATTER,
        .overlap_tp = 0,
        .overlap_grad = 0, .overlap_param = 0, .loss_fp32 = 1, .tied_embedding_dup = 1,
        .loss_bytes_per_logit = 4,
        .dp_shard_required_with_tp = 0,
        /* scores materialised (runtime/kernels_cpu.c); kernels are C calls, no launch cost; fp32
         * reductions once per step per unit (a layer), ZeRO-3 gathers per unit; every tp rank
         * sends its whole activation between stages (its row block with sp) */
        .attn_ampere = AP_ATTN_UNFUSED, .attn_hopper = AP_ATTN_UNFUSED,
        .attn_alibi = AP_ATTN_UNFUSED, .attn_softcap = AP_ATTN_UNFUSED,
        .launches_per_layer = 0, .grad_reduce_bytes = 4, .dp_bucket_params = 0,
        .zero3_gather_params = 0, .reduce_once_with_pp = 1, .param_gather_next_fwd = 0,
        .p2p_overlap = 0, .bf16_optimizer_bytes = 0, .p2p_split_tp = 0,
    },
};

int ap_plan_fp8_weights(const ap_plan *p) {
    return p->fp8_params && p->dtype == AP_DTYPE_FP8;
}

double ap_plan_weight_bytes(const ap_plan *p) {
    return ap_plan_fp8_weights(p) ? 1.0 : ap_trainer_get(p->trainer)->weight_bytes;
}

double ap_plan_gathered_weight_bytes(const ap_plan *p) {
    return ap_plan_fp8_weights(p) ? 1.0 : ap_trainer_get(p->trainer)->gathered_weight_bytes;
}

/* DeepSpeed bf16 without ZeRO runs BF16_Optimizer: runtime/engine.py _do_optimizer_sanity_check
 * returns BFLOAT16 for a bf16 model whose gradient accumulation dtype is fp32, the default
 * without ZeRO (get_data_types) */
int ap_plan_bf16_optimizer(const ap_plan *p) {
    return p->zero == 0 && p->dtype == AP_DTYPE_BF16 &&
           ap_trainer_get(p->trainer)->bf16_optimizer_bytes > 0;
}

/* BF16_Optimizer (runtime/bf16_optimizer.py) keeps a full-size fp32 gradient accumulation
 * buffer beside the bf16 gradients; the optimizer side's fp32 gradient copy (part of the
 * table's optim_bytes) is a view of it. The bytes per parameter it moves from the optimizer
 * side to the gradients: 0 unless the plan runs it. */
static double bf16_buffer_bytes(const ap_plan *p) {
    return ap_plan_bf16_optimizer(p) ? ap_trainer_get(p->trainer)->bf16_optimizer_bytes : 0;
}

double ap_plan_grad_bytes(const ap_plan *p) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    return (t->grads_in_reduce_dtype && p->grad_reduce_bytes > 0 ? p->grad_reduce_bytes
                                                                 : t->grad_bytes) +
           bf16_buffer_bytes(p);
}

double ap_plan_master_bytes(const ap_plan *p) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    if (t->master_bytes > 0 && p->master_state_bytes > 0) return p->master_state_bytes;
    return t->master_bytes > 0 && p->optim_state_bytes > 0 ? p->optim_state_bytes
                                                            : t->master_bytes;
}

double ap_plan_optim_bytes(const ap_plan *p) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    return (t->master_bytes > 0 && p->optim_state_bytes > 0 ? 2.0 * p->optim_state_bytes
                                                             : t->optim_bytes) -
           bf16_buffer_bytes(p);
}

int ap_plan_optim_sharded(const ap_plan *p) {
    /* ZeRO-1 and up; BF16_Optimizer partitions its master copy and moments like ZeRO-1 */
    return p->zero >= 1 || ap_plan_bf16_optimizer(p);
}

/* DeepSpeed ZeRO's contiguous-gradient (IPG) buffers at a rank's peak: reduce_bucket_size
 * elements in the gradient dtype (runtime/zero/config.py: contiguous_gradients true,
 * reduce_bucket_size 5e8; the configs autoplan writes set both, and sim/zero_infinity.c counts
 * it too). Stage 3 allocates one at start-up (zero/stage3.py, "# IPG"); stages 1 and 2 one at
 * each backward, a second with overlap_comm (zero/stage_1_and_2.py backward), while that
 * micro-batch's activations are live. Under the pipeline engine stage 1 allocates one in
 * reduce_gradients after the last backward, when the activations are released: not at the
 * peak. */
double ap_plan_grad_bucket_bytes(const ap_plan *p) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    if (t->zero_ipg_bucket <= 0 || p->zero < 1) return 0;
    double bucket = t->zero_ipg_bucket * t->grad_bytes;
    if (p->zero >= 3) return bucket;
    return p->pp == 1 ? (p->overlap_grad ? 2.0 : 1.0) * bucket : 0;
}


const char *ap_trainer_name(ap_trainer_id id) { return ap_trainer_get(id)->name; }

int ap_trainer_overlap_tp(const ap_trainer_caps *t, const ap_gpu *g) {
    return t->overlap_tp && (!t->overlap_tp_multicast || (g && g->multicast));
}

const char *ap_trainer_zero_group_stages(const ap_trainer_caps *t, char *buf, size_t n) {
    int z[4], k = 0;
    for (int s = 0; s <= 3; s++)
        if (t->zero_group_mask & (1u << s)) z[k++] = s;
    size_t at = 0;
    if (n > 0) buf[0] = '\0';
    for (int i = 0; i < k && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%d", i == 0 ? (k > 1 ? "stages " : "stage ")
                                                  : i == k - 1 ? " and " : ", ", z[i]);
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

int ap_trainer_dp_overlap(const ap_trainer_caps *t, int ep) {
    return (t->overlap_grad || t->overlap_param) && !(t->ep_no_overlap && ep > 1);
}

ap_status ap_trainer_parse(const char *name, ap_trainer_id *out, ap_err *err) {
    for (int i = 0; i < AP_TRAINER_COUNT; i++)
        if (name && !strcasecmp(name, ap_trainer_table[i].name)) {
            *out = (ap_trainer_id)i;
            return AP_OK;
        }
    if (name && (!strcasecmp(name, "colossal-ai") || !strcasecmp(name, "colossal")))
        return (*out = AP_TRAINER_COLOSSALAI), AP_OK;
    if (name && (!strcasecmp(name, "megatron-lm") || !strcasecmp(name, "mcore")))
        return (*out = AP_TRAINER_MEGATRON), AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "unknown trainer '%s' (one of megatron, deepspeed, fsdp, "
                      "torchtitan, colossalai)", name ? name : "");
}

const char *ap_torchtitan_family(const ap_model *m) {
    if (m->mla.kv_lora_rank > 0) return "deepseek_v3";
    if (m->attn_sinks) return "gpt_oss";
    if (m->window_chunked || m->nope_global) return "llama4";
    if (m->qk_norm == AP_QKNORM_HEAD) return "qwen3";
    return "llama3";
}

ap_attn_impl ap_attn_default(const ap_plan *p, const ap_model *m, const ap_gpu *g) {
    if (!p->flash_attn) return AP_ATTN_UNFUSED;
    if (p->attn_impl != AP_ATTN_AUTO) return p->attn_impl;
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    if (m && m->pos == AP_POS_ALIBI) return t->attn_alibi;
    if (m && m->attn_softcap > 0) return t->attn_softcap;
    /* FlashAttention-2 needs sm80+ (Dao 2023, README: Ampere, Ada, Hopper); Volta and Turing
     * run PyTorch's memory-efficient kernel (xFormers, sm50+) or materialise the scores */
    int sm = g ? g->sm : 0; /* compute capability x 10; 0: not NVIDIA (Ampere's defaults) */
    if (sm > 0 && sm < 80)
        return p->trainer == AP_TRAINER_MEGATRON || p->trainer == AP_TRAINER_DEEPSPEED
                   ? AP_ATTN_UNFUSED : AP_ATTN_SDPA_EFFICIENT;
    return sm >= 90 ? t->attn_hopper : t->attn_ampere;
}
