/*
 * planfields.c - the field table of ap_plan (plan.h, fields.h): every member of a plan once,
 * with its plan.json path (docs/plan-json.md, in the document's order), the flag that pins it
 * and the values it accepts. plan.json reading and writing (output/planio.c), the flags
 * (cli/args.c, --fix, --strategies) and the plan-cache key (planner/request.c) walk these rows.
 *
 * Ranges are the ones a user may give anywhere: degrees up to 4096 (dp, derived, up to 2^20
 * GPUs), micro-batch up to 2^20, global batch and accumulation up to 2^32 sequences, sequences
 * up to 2^24 tokens. dtype accepts the compute precisions (bf16, fp16, fp8) and fp32, the
 * runtime trainer's only precision; ap_plan_check refuses fp32 for the GPU trainers (an fp32
 * plan would be emitted as a 16-bit one).
 */
#include "autoplan/plan.h"

#include <stddef.h>

_Static_assert(sizeof(ap_trainer_id) == sizeof(int), "enum members are read as int");
_Static_assert(sizeof(ap_recompute) == sizeof(int), "enum members are read as int");
_Static_assert(sizeof(ap_dtype) == sizeof(int), "enum members are read as int");
_Static_assert(sizeof(ap_attn_impl) == sizeof(int), "enum members are read as int");
_Static_assert(sizeof(ap_fp8_recipe) == sizeof(int), "enum members are read as int");

static const char *trainer_name(int v) {
    return v >= 0 && v < AP_TRAINER_COUNT ? ap_trainer_name((ap_trainer_id)v) : NULL;
}
static const char *recompute_name(int v) {
    return v >= 0 && v < AP_RECOMPUTE_COUNT ? ap_recompute_name((ap_recompute)v) : NULL;
}
static const char *attn_impl_name(int v) {
    return v >= 0 && v < AP_ATTN_COUNT ? ap_attn_impl_name((ap_attn_impl)v) : NULL;
}
static const char *fp8_recipe_name(int v) {
    return v >= 0 && v < AP_FP8_RECIPE_COUNT ? ap_fp8_recipe_name((ap_fp8_recipe)v) : NULL;
}
static const char *compute_dtype_name(int v) {
    /* the order of the --dtype help: bf16, fp16, fp8; fp32 is the runtime trainer's (autoplan
       run's CPU ranks), refused for every other trainer by ap_plan_check */
    return v == AP_DTYPE_BF16 || v == AP_DTYPE_FP16 || v == AP_DTYPE_FP8 || v == AP_DTYPE_FP32
               ? ap_dtype_name((ap_dtype)v)
               : NULL;
}

#define DEG 4096.0
#define BIG 4294967296.0 /* 2^32 */
#define F(nm, js, fl, k, lo, hi) {#nm, js, fl, k, offsetof(ap_plan, nm), lo, hi, NULL, 0, 0, 0}
#define E(nm, js, fl, fn, nv, flags) {#nm, js, fl, AP_FT_ENUM, offsetof(ap_plan, nm), 0, 0, fn, nv, 0, flags}
#define CH(nm, js, fl, lo) {#nm, js, fl, AP_FT_CHUNKS, offsetof(ap_plan, nm), lo, 100000, NULL, \
                            AP_MAX_CHUNKS, offsetof(ap_plan, nchunks), 0}

static const ap_field plan_fields[] = {
    E(trainer, "trainer", "trainer", trainer_name, AP_TRAINER_COUNT, AP_FIELD_ROOT),
    F(tp, "tp", "tp", AP_FT_INT, 1, DEG),
    F(pp, "pp", "pp", AP_FT_INT, 1, DEG),
    F(dp, "dp", NULL, AP_FT_INT, 1, 1048576),
    F(cp, "cp", "cp", AP_FT_INT, 1, DEG),
    F(ep, "ep", "ep", AP_FT_INT, 1, DEG),
    F(etp, "etp", "etp", AP_FT_INT, 1, DEG),
    F(vp, "vp", "vp", AP_FT_INT, 1, DEG),
    F(mbs, "mbs", "mbs", AP_FT_I64, 1, 1048576),
    F(gbs, "gbs", "gbs", AP_FT_I64, 1, BIG),
    F(grad_accum, "grad_accum", NULL, AP_FT_I64, 1, BIG),
    F(seq, "seq", "seq", AP_FT_I64, 1, 16777216),
    F(zero, "zero", "zero", AP_FT_INT, 0, 3),
    E(recompute, "recompute.granularity", "recompute", recompute_name, 3, 0),
    F(recompute_layers, "recompute.layers", "recompute-layers", AP_FT_INT, 0, 100000),
    CH(stage_recompute, "recompute.per_stage", "stage-recompute", -1),
    F(sp, "sp", "sp", AP_FT_BOOL, 0, 1),
    F(overlap_grad, "overlap.grad", "overlap", AP_FT_BOOL, 0, 1),
    F(overlap_param, "overlap.param", NULL, AP_FT_BOOL, 0, 1),
    F(overlap_tp, "overlap.tp", NULL, AP_FT_BOOL, 0, 1),
    F(offload_optimizer, "offload.optimizer", "offload-optimizer", AP_FT_REAL, 0, 1),
    F(offload_params, "offload.params", "offload-params", AP_FT_REAL, 0, 1),
    E(dtype, "dtype", "dtype", compute_dtype_name, AP_DTYPE_COUNT, 0),
    {"flash_attn", "flash_attn", "no-flash-attn", AP_FT_BOOL, offsetof(ap_plan, flash_attn), 0, 1,
     NULL, 0, 0, AP_FIELD_NEGATED},
    /* optional: plan.json files written before the kernel tables have none and read as
     * "auto", the trainer's default kernel (docs/plan-json.md) */
    E(attn_impl, "attn_impl", "attn-impl", attn_impl_name, AP_ATTN_COUNT, AP_FIELD_OPTIONAL),
    /* optional: plan.json files written before it have none and keep 16-bit weights */
    {"fp8_params", "fp8_params", "fp8-params", AP_FT_BOOL, offsetof(ap_plan, fp8_params), 0, 1,
     NULL, 0, 0, AP_FIELD_OPTIONAL},
    /* optional: plan.json files written before it have none and run the trainer's default */
    E(fp8_recipe, "fp8_recipe", "fp8-recipe", fp8_recipe_name, AP_FP8_RECIPE_COUNT,
      AP_FIELD_OPTIONAL),
    F(nchunks, NULL, NULL, AP_FT_INT, 0, AP_MAX_CHUNKS),
    CH(stage_layers, "stage_layers", "stage-layers", 0),
    /* set by the validation rows of published runs (costmodel/validation.c), not by users:
     * keyed, not stored in plan.json */
    F(grad_reduce_bytes, NULL, NULL, AP_FT_REAL, 0, 16),
    F(gather_bytes, NULL, NULL, AP_FT_REAL, 0, 16),
    F(optim_state_bytes, NULL, NULL, AP_FT_REAL, 0, 16),
    F(master_state_bytes, NULL, NULL, AP_FT_REAL, 0, 16),
    F(te_attention, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(loss_bytes_per_logit, NULL, NULL, AP_FT_REAL, 0, 16),
    /* optional: plan.json files written before it have none and run the ring */
    {"cp_a2a", "cp_a2a", "cp-a2a", AP_FT_BOOL, offsetof(ap_plan, cp_a2a), 0, 1, NULL, 0, 0,
     AP_FIELD_OPTIONAL},
    /* the heterogeneous placement (issue 18): plan.json's optional "hetero" object is written
     * and read by output/planio.c in the trainers' own option names; the rows key it */
    F(hetero.placement, NULL, NULL, AP_FT_INT, 0, 2),
    F(hetero.shard_param_frac, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.offload_optim_frac, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.offload_param_frac, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.warmup_non_model_data_ratio, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.steady_cuda_cap_ratio, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.gpu_margin_mem_ratio, NULL, NULL, AP_FT_REAL, 0, 1),
    F(hetero.pin_memory, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(hetero.enable_async_reduce, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(hetero.max_prefetch, NULL, NULL, AP_FT_INT, 0, 1024),
    F(hetero.search_range_m, NULL, NULL, AP_FT_REAL, 0, 1e9),
    F(hetero.min_chunk_size_m, NULL, NULL, AP_FT_REAL, 0, 1e9),
    F(hetero.hidden_dim, NULL, NULL, AP_FT_I64, 0, 1e9),
    F(hetero.ds_optimizer, NULL, NULL, AP_FT_INT, 0, 2),
    F(hetero.ds_params, NULL, NULL, AP_FT_INT, 0, 2),
    F(hetero.ds_optimizer_pin, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(hetero.ds_param_pin, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(hetero.ds_param_buffer_count, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_param_buffer_size, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_max_in_cpu, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_optimizer_buffer_count, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_sub_group_size, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_reduce_bucket_size, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_prefetch_bucket_size, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_param_persistence_threshold, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_max_live_parameters, NULL, NULL, AP_FT_I64, 0, 1e13),
    F(hetero.ds_max_reuse_distance, NULL, NULL, AP_FT_I64, 0, 1e13),
    /* optional: plan.json files written before it have none and shard over all ranks; the
     * last row a request's plan_given mask can mark (request.h) */
    {"zero_group", "zero_group", "zero-group", AP_FT_INT, offsetof(ap_plan, zero_group), 0,
     1 << 20, NULL, 0, 0, AP_FIELD_OPTIONAL},
    /* set by the validation rows (costmodel/validation.c), never given by a request: past the
     * 64 rows a request's plan_given mask can mark (request.h) */
    F(dp_bucket_params, NULL, NULL, AP_FT_REAL, 0, 1e13),
    F(no_tp_bwd_overlap, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(no_p2p_overlap, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(fsdp1, NULL, NULL, AP_FT_BOOL, 0, 1),
    F(elementwise, NULL, NULL, AP_FT_INT, 0, 3),
};
_Static_assert(sizeof(ap_gemini_placement) == sizeof(int) && sizeof(ap_offload_device) == sizeof(int),
               "enum members are read as int");

const ap_field *ap_plan_fields(int *n) {
    *n = (int)(sizeof plan_fields / sizeof plan_fields[0]);
    return plan_fields;
}
