/*
 * emit_colossalai.c - colossalai_booster.py: the Colossal-AI (v0.5.1) plugin construction for a
 * plan, a snippet to paste into a training script (argument names from
 * shared/reference/trainers/colossalai_plugin_args.txt).
 *
 * Plugin choice:
 *   ZeRO-3                          GeminiPlugin, placement "static" with the plan's offload
 *                                   fractions (shard_param_frac 1.0). "auto" placement decides
 *                                   at run time what autoplan predicted, so it is not emitted.
 *   ZeRO-1/2, no tp/pp/ep/sp        LowLevelZeroPlugin
 *   otherwise                       HybridParallelPlugin (MoeHybridParallelPlugin with ep > 1):
 *                                   zero_stage <= 2, <= 1 with pp (trainer table)
 * Recompute: with pp, PipelineGradientCheckpointConfig(num_ckpt_layers_per_stage=[...]) per
 * stage; without pp, model.gradient_checkpointing_enable() (all layers).
 * Colossal-AI has no global-batch argument: the constants above the plugin give the data loader
 * batch and the accumulation.
 */
#include <stdio.h>
#include <string.h>

#include "emit_int.h"

int emit_colossalai_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    int ok = 1;
    /* offload fractions only on GeminiPlugin and no expert parallelism there are trainer-table
       rules (offload_fraction_zero_mask, ep_zero_mask) */
    /* LOCAL RULE: StaticPlacementPolicy.__init__ (colossalai/zero/gemini/placement_policy.py)
       zeroes offload_param_frac unless shard_param_frac = offload_optim_frac = 1.0; the
       optimizer half is the trainer table's offload_params_needs_full_optimizer, the sharding
       half a Gemini placement's own fraction */
    /* a repair of the plan's offload fractions (fix_caps) moves the static placement's copy */
    if (q->hetero.placement == AP_GEMINI_STATIC &&
        (q->hetero.offload_optim_frac != q->offload_optimizer ||
         q->hetero.offload_param_frac != q->offload_params)) {
        emit_why(why, "colossalai: the static placement's fractions (%g, %g) differ from the "
                      "plan's offload fractions (%g, %g)", q->hetero.offload_optim_frac,
                 q->hetero.offload_param_frac, q->offload_optimizer, q->offload_params);
        ok = 0;
        if (fix) {
            q->hetero.offload_optim_frac = q->offload_optimizer;
            q->hetero.offload_param_frac = q->offload_params;
        }
    }
    if (q->zero == 3 && q->hetero.placement == AP_GEMINI_STATIC &&
        q->hetero.offload_param_frac > 0 && q->hetero.shard_param_frac != 1.0) {
        emit_why(why, "colossalai: GeminiPlugin ignores offload_param_frac %g unless "
                      "shard_param_frac = 1.0 (got %g)",
                 q->hetero.offload_param_frac, q->hetero.shard_param_frac);
        ok = 0;
        if (fix) q->hetero.shard_param_frac = 1.0;
    }
    /* LOCAL RULE: without pipeline parallelism the recompute switch is the HF model's
       gradient_checkpointing_enable(): all layers or none, no per-layer counts. */
    if (q->pp == 1 && q->recompute == AP_RECOMPUTE_FULL &&
        (q->recompute_layers > 0 || emit_has_per_stage_recompute(q))) {
        emit_why(why, "colossalai: without pp, recompute is all layers or none");
        ok = 0;
        if (fix) {
            q->recompute_layers = 0;
            for (int c = 0; c < AP_MAX_CHUNKS; c++) q->stage_recompute[c] = -1;
        }
    }
    /* an uneven split only without interleaving (PipelineStageManager takes pp entries) is
       the trainer-table rule uneven_stages_no_vp */
    /* the MoE plugin's ZeRO-1 and no overlap, and Gemini's parameter offload needing all
       optimizer states offloaded, are trainer-table rules (ep_zero_mask, ep_no_overlap,
       offload_params_needs_full_optimizer) */
    (void)x;
    return ok;
}

static void int_list(sb *b, const emit_ctx *x, int ckpt) {
    int n = x->p->pp * x->p->vp;
    sb_printf(b, "[");
    for (int c = 0; c < n; c++) {
        int v = emit_chunk_layers(x, c);
        if (ckpt) {
            int k = emit_chunk_recompute(x, c);
            v = k > 0 && k < v ? k : v;
        }
        sb_printf(b, "%s%d", c ? ", " : "", v);
    }
    sb_printf(b, "]");
}

/* GeminiPlugin arguments: the placement the simulation ran, its chunk search, overlap. */
static void gemini_args(sb *b, const emit_ctx *x, const char *prec) {
    const ap_plan *p = x->p;
    /* the placement the simulation ran (plan.hetero); a ZeRO-3 plan without one is static
       with the plan's offload fractions */
    const ap_plan_hetero *h = &p->hetero;
    int aut = h->placement == AP_GEMINI_AUTO;
    sb_printf(b, "    precision=\"%s\",\n", prec);
    sb_printf(b, "    placement_policy=\"%s\",\n", aut ? "auto" : "static");
    if (aut) {
        sb_printf(b, "    warmup_non_model_data_ratio=%g,\n", h->warmup_non_model_data_ratio);
        sb_printf(b, "    steady_cuda_cap_ratio=%g,\n", h->steady_cuda_cap_ratio);
        if (h->gpu_margin_mem_ratio > 0)
            sb_printf(b, "    gpu_margin_mem_ratio=%g,\n", h->gpu_margin_mem_ratio);
    } else {
        if (h->placement == AP_GEMINI_STATIC)
            sb_printf(b, "    shard_param_frac=%g,\n", h->shard_param_frac);
        else
            sb_printf(b, "    shard_param_frac=1.0,\n");
        /* a static placement's fractions equal the plan's (ap_plan_hetero_validate) */
        sb_printf(b, "    offload_optim_frac=%g,\n", p->offload_optimizer);
        sb_printf(b, "    offload_param_frac=%g,\n", p->offload_params);
    }
    if (h->placement != AP_GEMINI_OFF) {
        /* the chunk search the simulation reproduced (chunk/search_utils.py) */
        sb_printf(b, "    search_range_m=%g,\n", h->search_range_m);
        sb_printf(b, "    min_chunk_size_m=%g,\n", h->min_chunk_size_m);
        if (h->hidden_dim > 0) sb_printf(b, "    hidden_dim=%lld,\n", (long long)h->hidden_dim);
    }
    /* enable_async_reduce (on below) sets pin_memory=True anyway (gemini_plugin.py) */
    sb_printf(b, "    pin_memory=%s,\n",
             h->placement != AP_GEMINI_OFF ? (h->pin_memory ? "True" : "False")
             : p->offload_optimizer > 0 || p->offload_params > 0 ? "True" : "False");
    sb_printf(b, "    tp_size=%d,\n", p->tp);
    sb_printf(b, "    enable_sequence_parallelism=%s,\n", p->sp ? "True" : "False");
    sb_printf(b, "    enable_flash_attention=%s,\n", p->flash_attn ? "True" : "False");
    sb_printf(b, "    enable_gradient_accumulation=%s,\n", p->grad_accum > 1 ? "True" : "False");
    sb_printf(b, "    enable_async_reduce=%s,\n",
             h->placement != AP_GEMINI_OFF ? (h->enable_async_reduce ? "True" : "False")
             : p->overlap_grad ? "True" : "False");
    sb_printf(b, "    max_prefetch=%d,\n",
             h->placement != AP_GEMINI_OFF ? h->max_prefetch : p->overlap_param ? 1 : 0);
    sb_printf(b, "    max_norm=1.0,\n");
}

/* LowLevelZeroPlugin arguments (ZeRO 1-2 without model parallelism). */
static void low_level_zero_args(sb *b, const ap_plan *p, const char *prec) {
    sb_printf(b, "    stage=%d,\n", p->zero);
    sb_printf(b, "    precision=\"%s\",\n", prec);
    sb_printf(b, "    overlap_communication=%s,\n", p->overlap_grad ? "True" : "False");
    sb_printf(b, "    overlap_allgather=%s,\n", p->overlap_param ? "True" : "False");
    sb_printf(b, "    cpu_offload=%s,\n", p->offload_optimizer > 0 ? "True" : "False");
    sb_printf(b, "    max_norm=1.0,\n");
}

/* HybridParallelPlugin / MoeHybridParallelPlugin arguments: degrees, pipeline schedule and
 * split, recomputed layers, ZeRO overlap. */
static void hybrid_args(sb *b, const emit_ctx *x, const char *prec, int ckpt_cfg) {
    const ap_plan *p = x->p;
    sb_printf(b, "    tp_size=%d,\n", p->tp);
    sb_printf(b, "    pp_size=%d,\n", p->pp);
    if (p->ep > 1) sb_printf(b, "    ep_size=%d,\n", p->ep);
    sb_printf(b, "    zero_stage=%d,\n", p->zero);
    sb_printf(b, "    precision=\"%s\",\n", prec);
    sb_printf(b, "    enable_flash_attention=%s,\n", p->flash_attn ? "True" : "False");
    sb_printf(b, "    enable_sequence_parallelism=%s,\n", p->sp ? "True" : "False");
    if (p->sp) sb_printf(b, "    sequence_parallelism_mode=\"split_gather\",\n");
    if (p->pp > 1) {
        sb_printf(b, "    microbatch_size=%lld,\n", (long long)p->mbs);
        sb_printf(b, "    pp_style=\"%s\",\n", p->vp > 1 ? "interleaved" : "1f1b");
        sb_printf(b, "    num_model_chunks=%d,\n", p->vp);
        if (!emit_uniform_split(x)) {
            sb_printf(b, "    num_layers_per_stage=");
            int_list(b, x, 0);
            sb_printf(b, ",\n");
        }
        if (ckpt_cfg) {
            sb_printf(b, "    gradient_checkpoint_config=PipelineGradientCheckpointConfig(\n"
                         "        num_ckpt_layers_per_stage=");
            int_list(b, x, 1);
            sb_printf(b, ",\n    ),\n");
        }
    }
    if (p->zero >= 1) {
        sb_printf(b, "    overlap_communication=%s,\n", p->overlap_grad ? "True" : "False");
        sb_printf(b, "    overlap_allgather=%s,\n", p->overlap_param ? "True" : "False");
        sb_printf(b, "    cpu_offload=%s,\n", p->offload_optimizer > 0 ? "True" : "False");
    }
    sb_printf(b, "    max_norm=1.0,\n");
}

ap_status emit_colossalai_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    const char *prec = p->dtype == AP_DTYPE_FP16 ? "fp16" : "bf16";
    const char *plugin;
    if (p->zero == 3) plugin = "GeminiPlugin";
    else if (p->zero >= 1 && p->tp == 1 && p->pp == 1 && p->ep == 1 && !p->sp)
        plugin = "LowLevelZeroPlugin";
    else if (p->ep > 1) plugin = "MoeHybridParallelPlugin";
    else plugin = "HybridParallelPlugin";
    int ckpt_cfg = p->pp > 1 && p->recompute == AP_RECOMPUTE_FULL;
    int64_t loader_batch = p->pp > 1 ? p->mbs * p->grad_accum : p->mbs;

    sb b = {0};
    emit_header(&b, x, "# ", "Colossal-AI (v0.5.1) booster plugin for this autoplan plan.");
    sb_printf(&b, "# Paste into the training script; build the model, optimizer and data loader "
                  "as usual.\n");
    if (p->recompute == AP_RECOMPUTE_FULL)
        /* the shardformer policies recompute only when the HF model has gradient
           checkpointing enabled, also with a PipelineGradientCheckpointConfig (any pp) */
        sb_printf(&b, "# Recompute: call model.gradient_checkpointing_enable() before "
                      "booster.boost()%s.\n", p->pp > 1 ? " (the pipeline config below only "
                      "says how many layers per stage)" : "");
    if (p->pp == 1 && p->grad_accum > 1)
        sb_printf(&b, "# Accumulate GRAD_ACCUM_STEPS micro-batches per optimizer step; skip the "
                      "gradient sync\n# with booster.no_sync() on all but the last.\n");
    if (p->pp > 1)
        sb_printf(&b, "# With pipeline parallelism each data loader batch of "
                      "DATALOADER_BATCH_SIZE is cut into GRAD_ACCUM_STEPS micro-batches.\n");
    sb_printf(&b, "from colossalai.booster import Booster\n");
    sb_printf(&b, "from colossalai.booster.plugin import %s\n", plugin);
    if (ckpt_cfg) sb_printf(&b, "from colossalai.shardformer import PipelineGradientCheckpointConfig\n");
    sb_printf(&b, "\n");
    sb_printf(&b, "SEQ_LEN = %lld\n", (long long)p->seq);
    sb_printf(&b, "MICRO_BATCH_SIZE = %lld  # sequences per GPU per micro-batch\n",
              (long long)p->mbs);
    sb_printf(&b, "GRAD_ACCUM_STEPS = %lld\n", (long long)p->grad_accum);
    sb_printf(&b, "DATA_PARALLEL_SIZE = %d  # = %d GPUs / (tp %d x pp %d)\n", p->dp, x->c->gpus,
              p->tp, p->pp);
    sb_printf(&b, "GLOBAL_BATCH_SIZE = %lld  # = MICRO_BATCH_SIZE x GRAD_ACCUM_STEPS x "
                  "DATA_PARALLEL_SIZE\n", (long long)p->gbs);
    sb_printf(&b, "DATALOADER_BATCH_SIZE = %lld  # per data-parallel rank per loader step\n\n",
              (long long)loader_batch);
    sb_printf(&b, "plugin = %s(\n", plugin);
    if (p->zero == 3) {
        gemini_args(&b, x, prec);
    } else if (!strcmp(plugin, "LowLevelZeroPlugin")) {
        low_level_zero_args(&b, p, prec);
    } else {
        hybrid_args(&b, x, prec, ckpt_cfg);
    }
    /* FP8 linear layers (colossalai/quantization/fp8.py linear_fp8, per-tensor scales from
       each input's own amax) beside the 16-bit precision; every plugin takes it (v0.5.1) */
    if (p->dtype == AP_DTYPE_FP8) sb_printf(&b, "    use_fp8=True,\n");
    sb_printf(&b, ")\nbooster = Booster(plugin=plugin)\n");
    return emit_take(out, "colossalai_booster.py", &b, err);
}
