/*
 * emit_deepspeed.c - DeepSpeed configs for a plan, in the two flavours DeepSpeed checks batch
 * sizes differently for (keys from shared/reference/trainers/deepspeed_keys.txt, v0.19):
 *
 *  ds_config.json     Megatron-DeepSpeed (deepspeedai/Megatron-DeepSpeed pretrain_gpt.py): the
 *                     script builds a topology from its mpu, so DeepSpeed's data-parallel size
 *                     is dp and train_batch_size = micro x accumulation x dp is emitted.
 *  ds_config_hf.json  Hugging Face Trainer / Accelerate, with AutoTP for tp > 1: there is no
 *                     topology object, DeepSpeed multiplies over all ranks, so only the
 *                     micro-batch and the accumulation are emitted (no train_batch_size).
 *  deepspeed_launch.sh  the header (JSON has no comments) and the launch lines of both.
 *
 * Explicit values where recent DeepSpeed versions changed defaults: gradient_clipping and the
 * offload blocks' pin_memory. activation_checkpointing only acts when the script calls
 * DeepSpeed's checkpointing (Megatron-DeepSpeed --deepspeed-activation-checkpointing); for HF
 * models the launch header says to call model.gradient_checkpointing_enable().
 *
 * Not done here: optimizer and scheduler blocks (the training script owns them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/json.h"
#include "emit_int.h"

/* Bucket sizes (elements): DeepSpeed's documented defaults, 5e8 for ZeRO-1/2 reduce and
 * all-gather buckets and 5e7 for the ZeRO-3 prefetch bucket (deepspeed/runtime/zero/config.py).
 */
#define DS_BUCKET 500000000
#define DS_PREFETCH_BUCKET 50000000
#define DS_PERSISTENCE_THRESHOLD 100000
#define DS_MAX_LIVE 1000000000
/* where ZeRO-Infinity swaps: a placeholder the launch script's comment asks to change */
#define DS_NVME_PATH "/local_nvme"

int ds_hf_expressible(const ap_plan *p, char *why, size_t n) {
    /* LOCAL RULE (flavour, not in the trainer table): the HF Trainer / Accelerate path has no
       pipeline, context, expert or Megatron sequence parallelism; AutoTP training combines
       with ZeRO 0-2 only (DeepSpeed AutoTP training tutorial). */
    if (p->pp > 1) return snprintf(why, n, "the HF/AutoTP flavour has no pipeline parallelism"), 0;
    if (p->cp > 1) return snprintf(why, n, "the HF/AutoTP flavour has no context parallelism"), 0;
    if (p->ep > 1) return snprintf(why, n, "the HF/AutoTP flavour has no expert parallelism"), 0;
    if (p->sp) return snprintf(why, n, "the HF/AutoTP flavour has no sequence parallelism"), 0;
    if (p->tp > 1 && p->zero > 2)
        return snprintf(why, n, "AutoTP (tp > 1) combines with ZeRO 0-2 only"), 0;
    return 1;
}

/* Can the Megatron-DeepSpeed flavour (ds_config.json + pretrain_gpt.py) express the model?
 * Appends the reasons to why when it cannot. */
static int mds_expressible(const ap_model *m, sb *why) {
    int ok = emit_megatron_model_why(m, 1, why);
    /* LOCAL RULE (model feature): DeepSpeed-MoE places experts every --expert-interval layers;
       leading dense layers are not expressible. */
    if (m->moe.experts > 0 && m->moe.first_dense_layers > 0) {
        emit_why(why, "deepspeed: Megatron-DeepSpeed MoE cannot keep the first %lld layers dense",
                 (long long)m->moe.first_dense_layers);
        ok = 0;
    }
    return ok;
}

int emit_deepspeed_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    (void)fix;
    /* The target is written when either flavour can run the plan: Megatron-DeepSpeed builds the
       model from flags (mds_expressible), the HF flavour loads the model's own code. */
    sb mw = {0};
    int mds = mds_expressible(x->m, &mw);
    char hw[200];
    int hf = ds_hf_expressible(q, hw, sizeof hw);
    if (!mds && !hf) {
        /* the first Megatron-DeepSpeed reason and how many more (the message stays one line) */
        const char *all = mw.buf ? mw.buf : "out of memory";
        const char *semi = strstr(all, "; ");
        int more = 0;
        for (const char *q2 = all; (q2 = strstr(q2, "; ")) != NULL; q2 += 2) more++;
        emit_why(why, "%.*s%s; HF flavour: %s", semi ? (int)(semi - all) : (int)strlen(all), all,
                 more ? " (and more, see docs/models.md)" : "", hw);
    }
    sb_free(&mw);
    return mds || hf;
}

static void jnum(ap_json *o, const char *k, double v, int *bad) {
    if (ap_json_add_number(o, k, v) != AP_OK) *bad = 1;
}
static void jbool(ap_json *o, const char *k, int v, int *bad) {
    if (ap_json_add_bool(o, k, v) != AP_OK) *bad = 1;
}
static void jstr(ap_json *o, const char *k, const char *v, int *bad) {
    if (ap_json_add_string(o, k, v) != AP_OK) *bad = 1;
}
static ap_json *jobj(ap_json *o, const char *k, int *bad) {
    ap_json *c = ap_json_new_object();
    if (ap_json_add(o, k, c) != AP_OK) {
        *bad = 1;
        return NULL;
    }
    return c;
}

ap_status ds_render_config(const emit_ctx *x, int hf, sb *b) {
    const ap_plan *p = x->p;
    int bad = 0;
    ap_json *root = ap_json_new_object();
    if (!root) return AP_ERR_NOMEM;
    /* DeepSpeed checks train_batch_size == micro x accumulation x its dp world size
       (deepspeed/runtime/config.py _batch_assertion) */
    if (!hf) jnum(root, "train_batch_size", (double)p->gbs, &bad);
    jnum(root, "train_micro_batch_size_per_gpu", (double)p->mbs, &bad);
    jnum(root, "gradient_accumulation_steps", (double)p->grad_accum, &bad);
    jnum(root, "gradient_clipping", 1.0, &bad);
    jnum(root, "steps_per_print", 10, &bad);
    jbool(root, "wall_clock_breakdown", 0, &bad);
    if (p->dtype == AP_DTYPE_FP16) {
        ap_json *f = jobj(root, "fp16", &bad);
        if (f) {
            jbool(f, "enabled", 1, &bad);
            jnum(f, "loss_scale", 0, &bad); /* 0 = dynamic loss scaling */
            jnum(f, "initial_scale_power", 16, &bad);
            jnum(f, "loss_scale_window", 1000, &bad);
            jnum(f, "hysteresis", 2, &bad);
            jnum(f, "min_loss_scale", 1, &bad);
        }
    } else {
        ap_json *f = jobj(root, "bf16", &bad);
        if (f) jbool(f, "enabled", 1, &bad);
    }
    ap_json *z = jobj(root, "zero_optimization", &bad);
    /* offload devices, buffers and pinning as the simulation ran them (plan.hetero,
       deepspeed/runtime/zero/offload_config.py and zero/config.py); without them, cpu and
       pinned (the analytical offload) with DeepSpeed's defaults */
    const ap_plan_hetero *h = &p->hetero;
    int het = h->ds_optimizer != AP_OFFLOAD_DEV_NONE || h->ds_params != AP_OFFLOAD_DEV_NONE;
    if (z) {
        jnum(z, "stage", p->zero, &bad);
        if (p->zero >= 1) {
            jbool(z, "overlap_comm", p->overlap_grad, &bad);
            jbool(z, "contiguous_gradients", 1, &bad);
            jbool(z, "reduce_scatter", 1, &bad);
            jnum(z, "reduce_bucket_size", het ? (double)h->ds_reduce_bucket_size : DS_BUCKET, &bad);
        }
        if (het) jnum(z, "sub_group_size", (double)h->ds_sub_group_size, &bad);
        if (p->zero == 1 || p->zero == 2) {
            jbool(z, "allgather_partitions", 1, &bad);
            jnum(z, "allgather_bucket_size", DS_BUCKET, &bad);
        }
        /* ZeRO-3 within groups: MiCS shards over mics_shard_size ranks (runtime/zero/mics.py) */
        if (p->zero == 3 && ap_plan_zero_shard(p) < p->dp * p->cp)
            jnum(z, "mics_shard_size", ap_plan_zero_shard(p), &bad);
        if (p->zero == 3) {
            /* a zero prefetch bucket turns parameter prefetching (overlap) off */
            jnum(z, "stage3_prefetch_bucket_size",
                 !p->overlap_param ? 0 : het ? (double)h->ds_prefetch_bucket_size
                                             : DS_PREFETCH_BUCKET, &bad);
            jnum(z, "stage3_param_persistence_threshold",
                 het ? (double)h->ds_param_persistence_threshold : DS_PERSISTENCE_THRESHOLD, &bad);
            jnum(z, "stage3_max_live_parameters",
                 het ? (double)h->ds_max_live_parameters : DS_MAX_LIVE, &bad);
            jnum(z, "stage3_max_reuse_distance",
                 het ? (double)h->ds_max_reuse_distance : DS_MAX_LIVE, &bad);
            jbool(z, "stage3_gather_16bit_weights_on_model_save", 1, &bad);
        }
        if (p->offload_optimizer > 0) {
            ap_json *o = jobj(z, "offload_optimizer", &bad);
            if (o) {
                int nvme = het && h->ds_optimizer == AP_OFFLOAD_DEV_NVME;
                jstr(o, "device", nvme ? "nvme" : "cpu", &bad);
                if (nvme) {
                    jstr(o, "nvme_path", DS_NVME_PATH, &bad);
                    jnum(o, "buffer_count", (double)h->ds_optimizer_buffer_count, &bad);
                }
                jbool(o, "pin_memory", het ? h->ds_optimizer_pin : 1, &bad);
                if (p->offload_optimizer < 1) jnum(o, "ratio", p->offload_optimizer, &bad);
            }
        }
        if (p->offload_params > 0) {
            ap_json *o = jobj(z, "offload_param", &bad);
            if (o) {
                int nvme = het && h->ds_params == AP_OFFLOAD_DEV_NVME;
                jstr(o, "device", nvme ? "nvme" : "cpu", &bad);
                if (nvme) {
                    jstr(o, "nvme_path", DS_NVME_PATH, &bad);
                    jnum(o, "buffer_count", (double)h->ds_param_buffer_count, &bad);
                    jnum(o, "buffer_size", (double)h->ds_param_buffer_size, &bad);
                    jnum(o, "max_in_cpu", (double)h->ds_max_in_cpu, &bad);
                }
                jbool(o, "pin_memory", het ? h->ds_param_pin : 1, &bad);
            }
        }
    }
    if (hf && p->tp > 1) {
        ap_json *t = jobj(root, "tensor_parallel", &bad);
        if (t) jnum(t, "autotp_size", p->tp, &bad);
    }
    if (!hf && p->recompute == AP_RECOMPUTE_FULL) {
        ap_json *a = jobj(root, "activation_checkpointing", &bad);
        if (a) {
            jbool(a, "partition_activations", p->tp > 1, &bad);
            jbool(a, "contiguous_memory_optimization", 0, &bad);
            jbool(a, "cpu_checkpointing", 0, &bad);
            jbool(a, "synchronize_checkpoint_boundary", 0, &bad);
            jbool(a, "profile", 0, &bad);
        }
    }
    char *text = bad ? NULL : ap_json_print(root, 1);
    ap_json_free(root);
    if (!text) return AP_ERR_NOMEM;
    sb_printf(b, "%s\n", text);
    ap_free(text);
    return b->failed ? AP_ERR_NOMEM : AP_OK;
}

/* Megatron-DeepSpeed pretrain_gpt.py flags (deepspeedai/Megatron-DeepSpeed
 * megatron/arguments.py; list in tests/data/trainers/megatron_deepspeed_flags.txt). */
static void mds_args(sb *b, const emit_ctx *x) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    sb_printf(b, "MDS_ARGS=(\n");
    sb_printf(b, "    --num-layers %lld\n", (long long)m->layers);
    sb_printf(b, "    --hidden-size %lld\n", (long long)m->hidden);
    /* one width for dense and expert MLPs: the experts' when every layer is MoE (the
       expressibility check refuses models that need both) */
    int all_moe = m->moe.experts > 0 && m->moe.first_dense_layers == 0 && m->moe.layer_freq <= 1;
    sb_printf(b, "    --ffn-hidden-size %lld\n",
              (long long)(all_moe ? m->moe.ffn_hidden : m->ffn_hidden));
    sb_printf(b, "    --num-attention-heads %lld\n", (long long)m->heads);
    if (m->kv_heads != m->heads)
        sb_printf(b, "    --num-key-value-heads %lld\n", (long long)m->kv_heads);
    if (m->head_dim * m->heads != m->hidden)
        sb_printf(b, "    --kv-channels %lld\n", (long long)m->head_dim);
    sb_printf(b, "    --seq-length %lld\n", (long long)p->seq);
    sb_printf(b, "    --max-position-embeddings %lld\n",
              (long long)(m->max_positions > p->seq ? m->max_positions : p->seq));
    if (m->pos == AP_POS_ROTARY) {
        sb_printf(b, "    --use-rotary-position-embeddings\n    --no-position-embedding\n");
        if (m->rope_theta > 0)
            sb_printf(b, "    --rotary-position-embeddings-theta %.17g\n", m->rope_theta);
        if (m->rotary_pct < 1) sb_printf(b, "    --rotary-percent %.17g\n", m->rotary_pct);
    }
    if (m->act == AP_ACT_SWIGLU) sb_printf(b, "    --swiglu\n");
    if (m->act == AP_ACT_RELU2) sb_printf(b, "    --squared-relu\n");
    sb_printf(b, "    --normalization %s\n", m->norm == AP_NORM_RMSNORM ? "rmsnorm" : "layernorm");
    if (m->norm_1p) sb_printf(b, "    --apply-layernorm-1p\n");
    if (!m->tied_embeddings) sb_printf(b, "    --untie-embeddings-and-output-weights\n");
    if (!m->bias) sb_printf(b, "    --disable-bias-linear\n");
    if (!m->dropout) sb_printf(b, "    --attention-dropout 0.0\n    --hidden-dropout 0.0\n");
    if (m->moe.experts > 0) {
        sb_printf(b, "    --num-experts %lld\n    --topk %lld\n    --expert-interval %lld\n",
                  (long long)m->moe.experts, (long long)m->moe.top_k,
                  (long long)(m->moe.layer_freq > 0 ? m->moe.layer_freq : 1));
        sb_printf(b, "    --moe-expert-parallel-size %d\n", p->ep);
    }
    sb_printf(b, "    --tensor-model-parallel-size %d\n", p->tp);
    sb_printf(b, "    --pipeline-model-parallel-size %d\n", p->pp);
    if (p->pp == 1) sb_printf(b, "    --no-pipeline-parallel\n");
    /* DeepSpeed-Ulysses (trainer.c): the sequence-parallel degree, tp and pp 1 */
    if (p->cp > 1) sb_printf(b, "    --ds-sequence-parallel-size %d\n", p->cp);
    if (p->sp) sb_printf(b, "    --sequence-parallel\n");
    sb_printf(b, "    --micro-batch-size %lld\n", (long long)p->mbs);
    sb_printf(b, "    --global-batch-size %lld\n", (long long)p->gbs);
    sb_printf(b, "    --%s\n", p->dtype == AP_DTYPE_FP16 ? "fp16" : "bf16");
    if (p->flash_attn && emit_gpu_has_flash(&x->c->gpu)) sb_printf(b, "    --use-flash-attn-v2\n");
    if (p->recompute == AP_RECOMPUTE_FULL)
        sb_printf(b, "    --recompute-granularity full\n    --recompute-method uniform\n"
                     "    --recompute-num-layers 1\n    --deepspeed-activation-checkpointing\n");
    sb_printf(b, "    --zero-stage %d\n", p->zero);
    sb_printf(b, "    --deepspeed\n    --deepspeed_config \"$HERE/ds_config.json\"\n");
    sb_printf(b, ")\n");
}

ap_status emit_deepspeed_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    const ap_cluster *c = x->c;
    int per_node = ap_cluster_gpus_per_host(c);
    int nodes = (c->gpus + per_node - 1) / per_node;
    char why[200];
    int hf = ds_hf_expressible(p, why, sizeof why);
    sb mw = {0};
    int mds = mds_expressible(x->m, &mw);
    char mwhy[400];
    snprintf(mwhy, sizeof mwhy, "%s", mw.buf ? mw.buf : "");
    sb_free(&mw);

    ap_status st = AP_OK;
    if (mds) {
        sb cfg = {0};
        if (ds_render_config(x, 0, &cfg) != AP_OK) {
            sb_free(&cfg);
            return ap_err_set(err, AP_ERR_NOMEM, "ds_config.json: out of memory");
        }
        st = emit_take(out, "ds_config.json", &cfg, err);
        if (st != AP_OK) return st;
    } else {
        snprintf(out->note, sizeof out->note, "ds_config.json not written: %.200s", mwhy);
    }
    if (hf) {
        sb h = {0};
        if (ds_render_config(x, 1, &h) != AP_OK) {
            sb_free(&h);
            return ap_err_set(err, AP_ERR_NOMEM, "ds_config_hf.json: out of memory");
        }
        st = emit_take(out, "ds_config_hf.json", &h, err);
        if (st != AP_OK) return st;
    } else {
        snprintf(out->note, sizeof out->note, "ds_config_hf.json not written: %s", why);
    }

    sb b = {0};
    sb_printf(&b, "#!/usr/bin/env bash\n");
    emit_header(&b, x, "# ", "DeepSpeed (v0.19) launch for this autoplan plan.");
    if (mds)
        sb_printf(&b,
                  "#\n"
                  "# ds_config.json: Megatron-DeepSpeed flavour. Its topology makes DeepSpeed's\n"
                  "#   data-parallel size dp = %d, so train_batch_size %lld = micro %lld x "
                  "accumulation %lld x dp %d.\n",
                  p->dp, (long long)p->gbs, (long long)p->mbs, (long long)p->grad_accum, p->dp);
    else
        sb_printf(&b, "#\n# ds_config.json: not written: %s.\n", mwhy);
    if (hf) {
        sb_printf(&b,
                  "# ds_config_hf.json: HF Trainer / Accelerate flavour%s.\n"
                  "#   Without a topology DeepSpeed multiplies over all %d ranks, so\n"
                  "#   train_batch_size is left out; set the Trainer's\n"
                  "#   per_device_train_batch_size %lld and gradient_accumulation_steps %lld.\n",
                  p->tp > 1 ? " with AutoTP (tensor_parallel.autotp_size)" : "", c->gpus,
                  (long long)p->mbs, (long long)p->grad_accum);
        if (p->recompute == AP_RECOMPUTE_FULL)
            sb_printf(&b, "#   Recompute: call model.gradient_checkpointing_enable() in the "
                          "script; DeepSpeed's\n"
                          "#   activation_checkpointing block only acts through its own "
                          "checkpointing API.\n");
    } else {
        sb_printf(&b, "# ds_config_hf.json: not written: %s.\n", why);
    }
    sb_printf(&b, "#\n# usage: bash deepspeed_launch.sh [%s]   (multi-node: pass a "
                  "hostfile in HOSTFILE)\n", mds && hf ? "megatron|hf" : mds ? "megatron" : "hf");
    sb_printf(&b, "set -euo pipefail\n\nHERE=$(cd \"$(dirname \"$0\")\" && pwd)\n");
    sb_printf(&b, "MEGATRON_DEEPSPEED=${MEGATRON_DEEPSPEED:-$PWD/Megatron-DeepSpeed}\n");
    sb_printf(&b, "NNODES=%d\nGPUS_PER_NODE=%d\n", nodes, per_node);
    sb_printf(&b, "LAUNCH=(deepspeed --num_nodes \"$NNODES\" --num_gpus \"$GPUS_PER_NODE\")\n");
    sb_printf(&b, "if [ -n \"${HOSTFILE:-}\" ]; then LAUNCH+=(--hostfile \"$HOSTFILE\"); fi\n\n");
    if (p->tp > 1 || p->cp > 1)
        sb_printf(&b, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n\n");
    if (mds) mds_args(&b, x);
    sb_printf(&b,
              "DATA_ARGS=(\n"
              "    --data-path \"${DATA_PATH:-/path/to/dataset_text_document}\"\n"
              "    --tokenizer-type NullTokenizer\n"
              "    --vocab-size %lld\n"
              "    --train-iters ${TRAIN_ITERS:-1000}\n"
              "    --lr 3.0e-4\n"
              "    --min-lr 3.0e-5\n"
              "    --lr-decay-style cosine\n"
              "    --weight-decay 0.1\n"
              "    --clip-grad 1.0\n"
              "    --log-interval 1\n"
              ")\n\n",
              (long long)x->m->vocab);
    sb_printf(&b, "case \"${1:-%s}\" in\n", mds ? "megatron" : "hf");
    if (mds)
        sb_printf(&b, "megatron)\n    \"${LAUNCH[@]}\" \"$MEGATRON_DEEPSPEED/pretrain_gpt.py\" "
                      "\"${MDS_ARGS[@]}\" \"${DATA_ARGS[@]}\" ;;\n");
    if (hf)
        sb_printf(&b, "hf)\n    \"${LAUNCH[@]}\" \"${TRAIN_SCRIPT:-train.py}\" --deepspeed "
                      "\"$HERE/ds_config_hf.json\" ;;\n");
    sb_printf(&b, "*)\n    echo \"usage: $0 [%s]\" >&2; exit 2 ;;\nesac\n",
              mds && hf ? "megatron|hf" : mds ? "megatron" : "hf");
    return emit_take(out, "deepspeed_launch.sh", &b, err);
}
