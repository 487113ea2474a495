/*
 * emit_torchtitan.c - torchtitan.toml for torchtitan v0.2.2, the last release that reads TOML
 * job files (keys from shared/reference/trainers/torchtitan_keys.txt; v0.2.2 rejects unknown
 * keys).
 *
 * Mapping: ZeRO 0 = replicated data parallelism (data_parallel_replicate_degree = dp); ZeRO 2/3
 * = FSDP2 sharding (data_parallel_shard_degree = dp) with fsdp_reshard_after_forward "never"
 * (ZeRO-2: gathered parameters stay until backward) or "always" (ZeRO-3). Pipeline: 1F1B, or
 * Interleaved1F1B with vp stages per rank; a uniform split is
 * pipeline_parallel_layers_per_stage, any other split module_fqns_per_model_part (torchtitan's
 * module names tok_embeddings, layers.N, norm, output). Batch: without pp, local_batch_size is
 * the micro-batch and torchtitan accumulates global / (local x dp) of them; with pp,
 * local_batch_size = micro x accumulation, cut into pipeline_parallel_microbatch_size pieces.
 * Full recompute of K of a chunk's n layers is selective_ac_option "n/K" (every (n/K)-th layer).
 *
 * Not done here: [model] name/flavor, optimizer and dataset (given on the command line, see the
 * header).
 */
#include <stdio.h>
#include <string.h>

#include "emit_int.h"
#include "autoplan/text.h"

int emit_torchtitan_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    int ok = 1;
    /* enable_cpu_offload moving parameters and optimizer states together is the trainer-table
       rule offload_together */
    /* LOCAL RULE: recomputing K layers per chunk is "every (n/K)-th layer", so K must divide
       the (uniform) chunk size n. */
    if (q->recompute == AP_RECOMPUTE_FULL && q->recompute_layers > 0) {
        int n = q->pp * q->vp;
        int uniform = x->m->layers % n == 0 && (q->nchunks == 0 || q->nchunks == n);
        int per = (int)(x->m->layers / n);
        for (int c = 0; uniform && q->nchunks && c < n; c++)
            if (q->stage_layers[c] != per) uniform = 0;
        if (!uniform || per % q->recompute_layers != 0) {
            emit_why(why, "torchtitan: recomputing %d layers per chunk needs uniform chunks whose "
                     "size it divides", q->recompute_layers);
            ok = 0;
            if (fix) {
                /* the nearest larger divisor recomputes at least as many layers */
                int k = q->recompute_layers;
                while (uniform && k < per && per % k) k++;
                q->recompute_layers = uniform && k < per ? k : 0;
            }
        }
    }
    return ok;
}

static void fqn_parts(sb *b, const emit_ctx *x) {
    int n = x->p->pp * x->p->vp, layer = 0;
    sb_printf(b, "module_fqns_per_model_part = [\n");
    for (int c = 0; c < n; c++) {
        int k = emit_chunk_layers(x, c), first = 1;
        sb_printf(b, "    [");
        if (c == 0) { sb_printf(b, "\"tok_embeddings\""); first = 0; }
        for (int i = 0; i < k; i++, layer++) {
            sb_printf(b, "%s\"layers.%d\"", first ? "" : ", ", layer);
            first = 0;
        }
        if (c == n - 1) sb_printf(b, "%s\"norm\", \"output\"", first ? "" : ", ");
        sb_printf(b, "],\n");
    }
    sb_printf(b, "]\n");
}

ap_status emit_torchtitan_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    char label[160];
    ap_plan_label(p, label, sizeof label);
    sb b = {0};
    emit_header(&b, x, "# ", "torchtitan job file for this autoplan plan.");
    sb_printf(&b,
              "# Format: torchtitan v0.2.2, the last release that reads TOML job files (later "
              "releases\n"
              "# use Python configs); v0.2.2 rejects unknown keys.\n"
              "# Run: torchrun --nproc_per_node %d -m torchtitan.train --job.config_file "
              "torchtitan.toml \\\n"
              "#        --model.name %s --model.flavor <matching ",
              ap_cluster_gpus_per_host(x->c),
              ap_torchtitan_family(x->m));
    ap_text_escape(&b, AP_TEXT_LINE, x->m->name); /* user text in a comment line */
    sb_printf(&b, ">\n");
    if (p->overlap_grad == 0 || p->overlap_param == 0)
        sb_printf(&b, "# Note: FSDP2 always overlaps gradient reduction and parameter gathering; "
                      "the plan's overlap flags are not expressible here.\n");
    sb_printf(&b, "\n[job]\ndescription = \"autoplan %s: %s\"\n", AP_VERSION, label);
    if (p->dtype == AP_DTYPE_FP8) {
        sb_printf(&b, "\n[model]\nconverters = [\"quantize.linear.float8\"]\n");
        sb_printf(&b, "\n[quantize.linear.float8]\nenable_fsdp_float8_all_gather = %s\n"
                      "precompute_float8_dynamic_scale_for_fsdp = %s\nfilter_fqns = [\"output\"]\n",
                  p->zero >= 2 ? "true" : "false", p->zero >= 2 ? "true" : "false");
    }
    int64_t local = p->pp > 1 ? p->mbs * p->grad_accum : p->mbs;
    /* torch.compile fuses the block's norms, rotary embedding and SwiGLU, as the cost model
       prices them (trainer.c); async TP also needs it (v0.2.2 parallelize: "Async TP requires
       'model' in --compile.components and --compile.enable") */
    sb_printf(&b, "\n[compile]\nenable = true\ncomponents = [\"model\"]\n");
    sb_printf(&b, "\n[training]\n");
    sb_printf(&b, "local_batch_size = %lld\n", (long long)local);
    sb_printf(&b, "global_batch_size = %lld\n", (long long)p->gbs);
    sb_printf(&b, "seq_len = %lld\n", (long long)p->seq);
    sb_printf(&b, "max_norm = 1.0\n");
    sb_printf(&b, "mixed_precision_param = \"bfloat16\"\n");
    sb_printf(&b, "mixed_precision_reduce = \"float32\"\n");
    sb_printf(&b, "enable_cpu_offload = %s\n", p->offload_optimizer > 0 ? "true" : "false");

    sb_printf(&b, "\n[parallelism]\n");
    /* HSDP: the group of zero_group ranks is the FSDP mesh (shard x cp), replicated across */
    int replicate = p->zero == 0 ? p->dp : p->dp * p->cp / ap_plan_zero_shard(p);
    sb_printf(&b, "data_parallel_replicate_degree = %d\n", replicate);
    sb_printf(&b, "data_parallel_shard_degree = %d\n", p->zero == 0 ? 1 : p->dp / replicate);
    if (p->zero >= 2)
        sb_printf(&b, "fsdp_reshard_after_forward = \"%s\"\n", p->zero == 3 ? "always" : "never");
    sb_printf(&b, "tensor_parallel_degree = %d\n", p->tp);
    if (p->tp > 1) sb_printf(&b, "enable_async_tensor_parallel = %s\n", p->overlap_tp ? "true" : "false");
    sb_printf(&b, "pipeline_parallel_degree = %d\n", p->pp);
    if (p->pp > 1) {
        sb_printf(&b, "pipeline_parallel_schedule = \"%s\"\n",
                  p->vp > 1 ? "Interleaved1F1B" : "1F1B");
        sb_printf(&b, "pipeline_parallel_microbatch_size = %lld\n", (long long)p->mbs);
        /* torchtitan counts the embedding and the output head as one layer each unless told
           otherwise (pipeline_parallel.py: ceil((layers + first_less + last_less) / per)
           stages, defaults 1 and 1): 80 layers at 5 per stage would be 17 stages */
        if (emit_uniform_split(x))
            sb_printf(&b, "pipeline_parallel_layers_per_stage = %lld\n"
                      "pipeline_parallel_first_stage_less_layers = 0\n"
                      "pipeline_parallel_last_stage_less_layers = 0\n",
                      (long long)(x->m->layers / (p->pp * p->vp)));
        else
            fqn_parts(&b, x);
    }
    sb_printf(&b, "context_parallel_degree = %d\n", p->cp);
    sb_printf(&b, "expert_parallel_degree = %d\n", p->ep);
    sb_printf(&b, "expert_tensor_parallel_degree = %d\n", p->etp);

    sb_printf(&b, "\n[activation_checkpoint]\n");
    if (p->recompute == AP_RECOMPUTE_NONE) {
        sb_printf(&b, "mode = \"none\"\n");
    } else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
        sb_printf(&b, "mode = \"selective\"\nselective_ac_option = \"op\"\n");
    } else if (p->recompute_layers > 0) {
        int per = (int)(x->m->layers / (p->pp * p->vp));
        sb_printf(&b, "mode = \"selective\"\nselective_ac_option = \"%d\"\n",
                  per / p->recompute_layers);
    } else {
        sb_printf(&b, "mode = \"full\"\n");
    }
    return emit_take(out, "torchtitan.toml", &b, err);
}
