/*
 * emit_megatron.c - megatron.sh: the full `torchrun pretrain_gpt.py` command of Megatron-LM
 * (core 0.19, flags from shared/reference/trainers/megatron_flags.txt) for the plan.
 *
 * One script serves three launches: `bash megatron.sh` on a single node (torchrun
 * --standalone), the same on every node of a multi-node job with NODE_RANK and MASTER_ADDR set
 * (c10d rendezvous), and `sbatch megatron.sh` (the #SBATCH lines; srun starts one torchrun per
 * node with the first host as the rendezvous endpoint).
 *
 * The plan goes into PLAN_ARGS, one flag per line: model shape, parallel degrees, batch,
 * recompute, distributed optimizer, overlap, precision, offload and the stage split (uniform,
 * --decoder-first/last-pipeline-num-layers, or --pipeline-model-parallel-layout for any other
 * split, and the layout also for uneven virtual stages). Interleaving uses
 * --num-layers-per-virtual-pipeline-stage (there is no --virtual-pipeline-model-parallel-size).
 * CUDA_DEVICE_MAX_CONNECTIONS=1 is exported when tp or cp > 1 (Megatron-LM needs it on Hopper
 * and older to order TP/CP communication before compute; reference README), except under
 * Megatron-FSDP (ZeRO-3), which asserts that it is not 1.
 *
 * Not done here: data preparation, tokenizer choice (DATA_ARGS are placeholders), optimizer
 * hyper-parameters beyond the defaults listed in TRAIN_ARGS.
 */
#include <stdio.h>
#include <string.h>

#include "emit_int.h"

/* Architecture fields of the model that Megatron-LM core 0.19 cannot express (megatron_flags.txt
 * has no flag for them): each is a reason to refuse the target rather than launch another
 * model. Shared with the Megatron-DeepSpeed flavour, which has fewer flags (mds = 1). */
int emit_megatron_model_why(const ap_model *m, int mds, sb *why) {
    int ok = 1;
    const char *t = mds ? "deepspeed: Megatron-DeepSpeed" : "megatron: Megatron-LM";
#define NO(cond, ...)                  \
    do {                               \
        if (cond) {                    \
            emit_why(why, __VA_ARGS__); \
            ok = 0;                    \
        }                              \
    } while (0)
    NO(m->pos == AP_POS_ALIBI, "%s has no ALiBi position embedding", t);
    NO(m->act == AP_ACT_SWIGLU && m->gate_act == AP_GATE_GELU,
       "%s has no GeGLU MLP (--swiglu is SiLU-gated; --quick-geglu is another activation)", t);
    NO(m->act == AP_ACT_RELU, "%s has no ReLU MLP (--squared-relu is another activation)", t);
    NO(m->attn_softcap > 0 || m->final_softcap > 0, "%s has no logit soft-capping", t);
    NO(m->norm_order != AP_NORM_PRE, "%s places norms before each sublayer only (the model has "
       "%s-norms)", t, m->norm_order == AP_NORM_POST ? "post" : "pre- and post");
    NO(m->qk_norm == AP_QKNORM_FULL, "%s's --qk-layernorm normalises per head, the model over "
       "all heads' features", t);
    NO(m->attn_bias || m->mlp_bias, "%s puts biases on all linear layers or none (the model has "
       "them on the %s only)", t, m->attn_bias ? "attention" : "MLP");
    NO(m->lm_head_bias, "%s has no output-layer bias", t);
    NO(m->norm == AP_NORM_LAYERNORM && m->norm_no_bias, "%s's LayerNorm always has a bias", t);
    NO(m->parallel_attn, "%s has no parallel attention/MLP block", t);
    NO(m->embed_norm, "%s has no embedding LayerNorm", t);
    NO(!m->final_norm, "%s always has a final norm", t);
    NO(m->window_chunked, "%s has no chunked attention (attention_chunk_size)", t);
    NO(m->router_linear_bias, "%s's router has no bias", t);
    NO(m->pos == AP_POS_ROTARY && m->rope_scaling[0] && strcmp(m->rope_scaling, "llama3") &&
           strcmp(m->rope_scaling, "linear") && strcmp(m->rope_scaling, "yarn"),
       "%s has no '%s' rope scaling", t, m->rope_scaling);
    NO(m->learned_pos > 0 && m->learned_pos != m->max_positions,
       "%s's learned position table has max-position-embeddings rows, the model %lld", t,
       (long long)m->learned_pos);
    if (mds) {
        /* Megatron-DeepSpeed (megatron_deepspeed_flags.txt): one --ffn-hidden-size for dense and
         * expert MLPs, experts every --expert-interval layers, no shared experts, no MLA, no
         * q/k norm, windows, sinks, rope scaling or qkv-only biases */
        NO(m->moe.experts > 0 && m->moe.ffn_hidden != m->ffn_hidden &&
               m->layers - m->moe.first_dense_layers < m->layers,
           "%s has one --ffn-hidden-size for dense layers (%lld) and experts (%lld)", t,
           (long long)m->ffn_hidden, (long long)m->moe.ffn_hidden);
        NO(m->moe.shared_experts > 0, "%s has no shared experts", t);
        NO(m->moe.experts > 0 && m->router_act != AP_ROUTER_SOFTMAX, "%s routes with softmax", t);
        NO(m->moe.router_bias, "%s has no router expert bias", t);
        NO(m->mla.kv_lora_rank > 0, "%s has no multi-latent attention", t);
        NO(m->qk_norm != AP_QKNORM_NONE, "%s has no q/k norm", t);
        NO(m->window > 0, "%s has no sliding-window attention", t);
        NO(m->attn_sinks, "%s has no attention sinks", t);
        NO(m->qkv_bias && !m->bias, "%s has no q/k/v-only bias", t);
        NO(m->rope_scaling[0], "%s has no rope scaling", t);
        NO(m->gate_act == AP_GATE_SWIGLU_OAI, "%s has no clamped SwiGLU", t);
        NO(m->nope_global, "%s has no NoPE layers", t);
    }
#undef NO
    return ok;
}

int emit_megatron_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    /* expert parallelism with tp needing sp, and the parameter-gather overlap needing the
       distributed optimizer and gradient-reduce overlap, are trainer-table rules
       (ep_with_tp_needs_sp, overlap_param_zero_mask, overlap_param_needs_grad) */
    (void)q;
    (void)fix;
    return emit_megatron_model_why(x->m, 0, why);
}

/* FlashAttention (2 and 3) needs compute capability 8.0 or newer; the catalog's pre-Ampere
 * NVIDIA GPUs (V100, Turing) are the ones without bf16 tensor cores. */
int emit_gpu_has_flash(const ap_gpu *g) { return g->peak_flops[AP_DTYPE_BF16] > 0; }

/* A "(list expression)" for --moe-layer-freq: runs of dense (0) and MoE (1) layers. */
static void moe_layer_pattern(sb *b, const ap_model *m) {
    sb_printf(b, "\"(");
    int64_t i = 0;
    int first = 1;
    while (i < m->layers) {
        int v = ap_model_layer_is_moe(m, i);
        int64_t j = i;
        while (j < m->layers && ap_model_layer_is_moe(m, j) == v) j++;
        sb_printf(b, "%s[%d]*%lld", first ? "" : "+", v, (long long)(j - i));
        first = 0;
        i = j;
    }
    sb_printf(b, ")\"");
}

/* The stage split flags: nothing for a uniform split, first/last counts when only the end
 * stages differ, else the layout ("Ettt|ttt|ttL": E embedding, t layer, L loss, | chunk). */
static void stage_flags(sb *b, const emit_ctx *x) {
    const ap_plan *p = x->p;
    int n = p->pp * p->vp;
    if (p->pp == 1) return;
    if (emit_uniform_split(x)) {
        if (p->vp > 1)
            sb_printf(b, "    --num-layers-per-virtual-pipeline-stage %lld\n",
                      (long long)(x->m->layers / n));
        return;
    }
    if (p->vp == 1) {
        int mid_ok = 1, mid = p->pp > 2 ? emit_chunk_layers(x, 1) : 0;
        for (int c = 1; c < p->pp - 1; c++)
            if (emit_chunk_layers(x, c) != mid) mid_ok = 0;
        if (mid_ok) {
            int f = emit_chunk_layers(x, 0), l = emit_chunk_layers(x, p->pp - 1);
            if (p->pp > 2 && f == mid)
                sb_printf(b, "    --decoder-last-pipeline-num-layers %d\n", l);
            else if (p->pp > 2 && l == mid)
                sb_printf(b, "    --decoder-first-pipeline-num-layers %d\n", f);
            else
                sb_printf(b, "    --decoder-first-pipeline-num-layers %d\n"
                             "    --decoder-last-pipeline-num-layers %d\n", f, l);
            return;
        }
    }
    sb_printf(b, "    --pipeline-model-parallel-layout \"");
    for (int c = 0; c < n; c++) {
        if (c) sb_printf(b, "|");
        if (c == 0) sb_printf(b, "E");
        for (int k = emit_chunk_layers(x, c); k > 0; k--) sb_printf(b, "t");
        if (c == n - 1) sb_printf(b, "L");
    }
    sb_printf(b, "\"\n");
}

static void model_flags(sb *b, const ap_model *m, const ap_plan *p) {
    sb_printf(b, "    --num-layers %lld\n", (long long)m->layers);
    sb_printf(b, "    --hidden-size %lld\n", (long long)m->hidden);
    sb_printf(b, "    --ffn-hidden-size %lld\n", (long long)m->ffn_hidden);
    sb_printf(b, "    --num-attention-heads %lld\n", (long long)m->heads);
    if (m->kv_heads != m->heads)
        sb_printf(b, "    --group-query-attention\n    --num-query-groups %lld\n",
                  (long long)m->kv_heads);
    if (m->mla.kv_lora_rank <= 0 && m->head_dim * m->heads != m->hidden)
        sb_printf(b, "    --kv-channels %lld\n", (long long)m->head_dim);
    sb_printf(b, "    --seq-length %lld\n", (long long)p->seq);
    sb_printf(b, "    --max-position-embeddings %lld\n",
              (long long)(m->max_positions > p->seq ? m->max_positions : p->seq));
    int yarn = m->pos == AP_POS_ROTARY && !strcmp(m->rope_scaling, "yarn");
    sb_printf(b, "    --position-embedding-type %s\n",
              m->pos == AP_POS_LEARNED ? "learned_absolute"
              : yarn && m->mla.kv_lora_rank <= 0 ? "yarn" : "rope");
    if (m->pos == AP_POS_ROTARY) {
        /* rope_theta, partial_rotary_factor and rope_scaling of the config (issue 19: Llama-3.1
         * and Qwen2.5 lost their base and scaling) */
        if (m->rope_theta > 0) sb_printf(b, "    --rotary-base %.17g\n", m->rope_theta);
        if (m->rotary_pct < 1) sb_printf(b, "    --rotary-percent %.17g\n", m->rotary_pct);
        if (!strcmp(m->rope_scaling, "llama3"))
            sb_printf(b, "    --use-rope-scaling\n    --rope-scaling-factor %.17g\n",
                      m->rope_factor);
        else if (!strcmp(m->rope_scaling, "linear") && m->rope_factor > 0)
            sb_printf(b, "    --rotary-seq-len-interpolation-factor %.17g\n", m->rope_factor);
        else if (yarn) {
            if (m->mla.kv_lora_rank > 0) sb_printf(b, "    --rope-type yarn\n");
            sb_printf(b, "    --rotary-scaling-factor %.17g\n", m->rope_factor);
            if (m->rope_orig_positions > 0)
                sb_printf(b, "    --yarn-original-max-position-embeddings %lld\n",
                          (long long)m->rope_orig_positions);
        }
        /* Llama4: global layers without rope every window_period-th layer */
        if (m->nope_global && m->window_period > 0)
            sb_printf(b, "    --no-rope-freq %lld\n", (long long)m->window_period);
    }
    if (m->window > 0 && !m->window_chunked) {
        /* sliding window (left, right) on the local layers; every window_attn_skip_freq-th layer
         * (1-based) attends to the whole sequence, as (i + 1) % period == 0 here */
        sb_printf(b, "    --window-size \"(%lld,0)\"\n", (long long)m->window);
        if (m->window_period > 0)
            sb_printf(b, "    --window-attn-skip-freq %lld\n", (long long)m->window_period);
    }
    if (m->qk_norm == AP_QKNORM_HEAD || m->mla.kv_lora_rank > 0)
        sb_printf(b, "    --qk-layernorm\n"); /* per head; MLA: q_a / kv_a norms */
    if (m->qk_norm == AP_QKNORM_L2) sb_printf(b, "    --qk-l2-norm\n");
    if (m->attn_sinks) sb_printf(b, "    --softmax-type learnable\n");
    if (m->act == AP_ACT_SWIGLU && m->gate_act == AP_GATE_SWIGLU_OAI)
        /* gpt-oss: x * sigmoid(1.702 x) * (y + 1), both clamped at swiglu_limit 7.0
         * (modeling_gpt_oss.py GptOssExperts) */
        sb_printf(b, "    --quick-geglu\n    --glu-linear-offset 1.0\n"
                     "    --activation-func-clamp-value 7.0\n");
    else if (m->act == AP_ACT_SWIGLU) sb_printf(b, "    --swiglu\n");
    else if (m->act == AP_ACT_RELU2) sb_printf(b, "    --squared-relu\n");
    sb_printf(b, "    --normalization %s\n", m->norm == AP_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    if (m->norm_1p) sb_printf(b, "    --apply-layernorm-1p\n");
    if (!m->tied_embeddings) sb_printf(b, "    --untie-embeddings-and-output-weights\n");
    if (!m->bias) sb_printf(b, "    --disable-bias-linear\n");
    if (m->qkv_bias && !m->bias) sb_printf(b, "    --add-qkv-bias\n");
    if (!m->dropout) sb_printf(b, "    --attention-dropout 0.0\n    --hidden-dropout 0.0\n");
    if (m->mla.kv_lora_rank > 0) {
        sb_printf(b, "    --multi-latent-attention\n");
        if (m->mla.q_lora_rank > 0)
            sb_printf(b, "    --q-lora-rank %lld\n", (long long)m->mla.q_lora_rank);
        sb_printf(b, "    --kv-lora-rank %lld\n", (long long)m->mla.kv_lora_rank);
        sb_printf(b, "    --qk-head-dim %lld\n", (long long)m->mla.qk_nope_head_dim);
        sb_printf(b, "    --qk-pos-emb-head-dim %lld\n", (long long)m->mla.qk_rope_head_dim);
        sb_printf(b, "    --v-head-dim %lld\n", (long long)m->mla.v_head_dim);
    }
    if (m->moe.experts > 0) {
        sb_printf(b, "    --num-experts %lld\n", (long long)m->moe.experts);
        sb_printf(b, "    --moe-router-topk %lld\n", (long long)m->moe.top_k);
        sb_printf(b, "    --moe-ffn-hidden-size %lld\n", (long long)m->moe.ffn_hidden);
        if (m->moe.shared_experts > 0)
            sb_printf(b, "    --moe-shared-expert-intermediate-size %lld\n",
                      (long long)m->moe.shared_ffn_hidden);
        if (m->moe.first_dense_layers > 0 || m->moe.layer_freq > 1) {
            sb_printf(b, "    --moe-layer-freq ");
            moe_layer_pattern(b, m);
            sb_printf(b, "\n");
        }
        if (m->moe.shared_expert_gate) sb_printf(b, "    --moe-shared-expert-gate\n");
        /* Megatron's TransformerConfig accepts the expert bias only with a sigmoid (or
         * sqrtsoftplus) score function: emit the model's own */
        if (m->router_act == AP_ROUTER_SIGMOID)
            sb_printf(b, "    --moe-router-score-function sigmoid\n");
        if (m->moe.router_bias) sb_printf(b, "    --moe-router-enable-expert-bias\n");
        if (m->moe.capacity_factor > 0)
            sb_printf(b, "    --moe-expert-capacity-factor %g\n", m->moe.capacity_factor);
        sb_printf(b, "    --moe-grouped-gemm\n    --moe-token-dispatcher-type alltoall\n");
    }
}

static void plan_flags(sb *b, const emit_ctx *x) {
    const ap_plan *p = x->p;
    sb_printf(b, "    --tensor-model-parallel-size %d\n", p->tp);
    sb_printf(b, "    --pipeline-model-parallel-size %d\n", p->pp);
    if (p->cp > 1) sb_printf(b, "    --context-parallel-size %d\n", p->cp);
    if (p->cp > 1 && p->cp_a2a) sb_printf(b, "    --cp-comm-type a2a\n");
    if (p->ep > 1) sb_printf(b, "    --expert-model-parallel-size %d\n", p->ep);
    /* always for MoE models: left out, Megatron sets it to tp (issue 19, Mixtral at tp 2) */
    if (x->m->moe.experts > 0)
        sb_printf(b, "    --expert-tensor-parallel-size %d\n", p->etp > 1 ? p->etp : 1);
    if (p->sp) sb_printf(b, "    --sequence-parallel\n");
    stage_flags(b, x);
    sb_printf(b, "    --micro-batch-size %lld\n", (long long)p->mbs);
    sb_printf(b, "    --global-batch-size %lld\n", (long long)p->gbs);
    if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
        /* Korthikanti et al. 2022 selective recomputation = the attention core */
        sb_printf(b, "    --recompute-granularity selective\n    --recompute-modules core_attn\n");
    } else if (p->recompute == AP_RECOMPUTE_FULL) {
        sb_printf(b, "    --recompute-granularity full\n");
        if (p->recompute_layers > 0)
            sb_printf(b, "    --recompute-method block\n    --recompute-num-layers %d\n",
                      p->recompute_layers);
        else
            sb_printf(b, "    --recompute-method uniform\n    --recompute-num-layers 1\n");
    }
    if (p->zero == 1) sb_printf(b, "    --use-distributed-optimizer\n");
    /* ZeRO-1 within groups: that many replicas of the distributed optimizer, each sharded over
       dp x cp / replicas ranks (core/parallel_state.py intra_partial_data_parallel_size) */
    if (p->zero == 1 && ap_plan_zero_shard(p) < p->dp * p->cp)
        sb_printf(b, "    --num-distributed-optimizer-instances %d\n",
                  p->dp * p->cp / ap_plan_zero_shard(p));
    if (p->zero == 3) /* Megatron-FSDP (arguments.py validate_args: fsdp_dtensor checkpoints) */
        sb_printf(b, "    --use-megatron-fsdp\n    --data-parallel-sharding-strategy "
                     "optim_grads_params\n    --use-distributed-optimizer\n"
                     "    --no-gradient-accumulation-fusion\n    --ckpt-format fsdp_dtensor\n");
    if (p->overlap_grad) sb_printf(b, "    --overlap-grad-reduce\n");
    if (p->overlap_param) sb_printf(b, "    --overlap-param-gather\n");
    if (p->overlap_tp) sb_printf(b, "    --tp-comm-overlap\n");
    if (p->dtype == AP_DTYPE_FP16) sb_printf(b, "    --fp16\n");
    else sb_printf(b, "    --bf16\n");
    /* the recipe explicitly (core/transformer/transformer_config.py fp8_recipe, default
       delayed): the one the plan was priced with */
    if (p->dtype == AP_DTYPE_FP8)
        sb_printf(b, "    --fp8-format hybrid\n    --fp8-recipe %s\n",
                  ap_fp8_recipe_name(ap_plan_fp8_recipe(p)));
    if (p->fp8_params) sb_printf(b, "    --fp8-param-gather\n");
    sb_printf(b, "    --attention-backend %s\n",
              p->flash_attn && emit_gpu_has_flash(&x->c->gpu) ? "flash" : "unfused");
    if (p->offload_optimizer > 0)
        sb_printf(b, "    --optimizer-cpu-offload\n    --optimizer-offload-fraction %g\n"
                     "    --use-precision-aware-optimizer\n    --overlap-cpu-optimizer-d2h-h2d\n",
                  p->offload_optimizer);
}

ap_status emit_megatron_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    const ap_cluster *c = x->c;
    int per_node = ap_cluster_gpus_per_host(c);
    int nodes = (c->gpus + per_node - 1) / per_node;
    sb b = {0};
    sb_printf(&b, "#!/usr/bin/env bash\n");
    emit_header(&b, x, "# ", "Megatron-LM (core 0.19) launch script for this autoplan plan.");
    if (nodes == 1)
        sb_printf(&b, "#\n# Run: bash megatron.sh   (or under SLURM: sbatch megatron.sh)\n");
    else
        sb_printf(&b,
                  "#\n"
                  "# Run on each of the %d nodes: NODE_RANK=<0..%d> MASTER_ADDR=<node 0> bash "
                  "megatron.sh\n"
                  "# or under SLURM: sbatch megatron.sh   (the #SBATCH lines below)\n",
                  nodes, nodes - 1);
    sb_printf(&b, "# Set MEGATRON_LM to a Megatron-LM checkout and DATA_ARGS to your data and "
                  "tokenizer.\n");
    sb_printf(&b, "#SBATCH --job-name=autoplan\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=1\n"
                  "#SBATCH --gpus-per-node=%d\n#SBATCH --exclusive\n",
              nodes, per_node);
    sb_printf(&b, "set -euo pipefail\n\n");
    sb_printf(&b, "MEGATRON_LM=${MEGATRON_LM:-$PWD/Megatron-LM}\n");
    sb_printf(&b, "NNODES=%d\nGPUS_PER_NODE=%d\nMASTER_PORT=${MASTER_PORT:-29500}\n\n", nodes,
              per_node);
    if ((p->tp > 1 || p->cp > 1) && p->zero != 3)
        sb_printf(&b, "# tp or cp > 1: keep TP/CP communication ordered ahead of compute\n"
                      "export CUDA_DEVICE_MAX_CONNECTIONS=1\n\n");
    else if (p->zero == 3)
        sb_printf(&b, "# Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1 (arguments.py)\n"
                      "unset CUDA_DEVICE_MAX_CONNECTIONS\n\n");
    sb_printf(&b, "# world size %d = tp %d x pp %d x cp %d x dp %d\n", c->gpus, p->tp, p->pp,
              p->cp, p->dp);
    sb_printf(&b, "PLAN_ARGS=(\n");
    model_flags(&b, x->m, p);
    plan_flags(&b, x);
    sb_printf(&b, ")\n\n");
    sb_printf(&b,
              "# placeholders: mock data and a null tokenizer with the model's vocabulary\n"
              "DATA_ARGS=(\n"
              "    --mock-data\n"
              "    --tokenizer-type NullTokenizer\n"
              "    --vocab-size %lld\n"
              ")\n\n",
              (long long)x->m->vocab);
    sb_printf(&b,
              "TRAIN_ARGS=(\n"
              "    --train-iters ${TRAIN_ITERS:-1000}\n"
              "    --lr 3.0e-4\n"
              "    --min-lr 3.0e-5\n"
              "    --lr-decay-style cosine\n"
              "    --lr-warmup-iters 100\n"
              "    --weight-decay 0.1\n"
              "    --adam-beta2 0.95\n"
              "    --clip-grad 1.0\n"
              "    --init-method-std 0.02\n"
              "    --log-interval 1\n"
              "    --eval-iters 0\n"
              ")\n\n");
    sb_printf(&b,
              "if [ -n \"${SLURM_JOB_ID:-}\" ]; then\n"
              "    MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
              "    srun --ntasks-per-node=1 torchrun --nnodes \"$SLURM_NNODES\" "
              "--nproc-per-node \"$GPUS_PER_NODE\" \\\n"
              "        --rdzv-id \"$SLURM_JOB_ID\" --rdzv-backend c10d "
              "--rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" \\\n"
              "        \"$MEGATRON_LM/pretrain_gpt.py\" \"${PLAN_ARGS[@]}\" \"${DATA_ARGS[@]}\" "
              "\"${TRAIN_ARGS[@]}\"\n"
              "elif [ \"$NNODES\" -gt 1 ]; then\n"
              "    torchrun --nnodes \"$NNODES\" --node-rank \"${NODE_RANK:?set NODE_RANK}\" "
              "--nproc-per-node \"$GPUS_PER_NODE\" \\\n"
              "        --rdzv-id \"${RDZV_ID:-autoplan}\" --rdzv-backend c10d "
              "--rdzv-endpoint \"${MASTER_ADDR:?set MASTER_ADDR}:$MASTER_PORT\" \\\n"
              "        \"$MEGATRON_LM/pretrain_gpt.py\" \"${PLAN_ARGS[@]}\" \"${DATA_ARGS[@]}\" "
              "\"${TRAIN_ARGS[@]}\"\n"
              "else\n"
              "    torchrun --standalone --nproc-per-node \"$GPUS_PER_NODE\" \\\n"
              "        \"$MEGATRON_LM/pretrain_gpt.py\" \"${PLAN_ARGS[@]}\" \"${DATA_ARGS[@]}\" "
              "\"${TRAIN_ARGS[@]}\"\n"
              "fi\n");
    return emit_take(out, "megatron.sh", &b, err);
}
