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
 * and older to order TP/CP communication before compute; reference README).
 *
 * Not done here: data preparation, tokenizer choice (DATA_ARGS are placeholders), optimizer
 * hyper-parameters beyond the defaults listed in TRAIN_ARGS.
 */
#include <stdio.h>
#include <string.h>

#include "emit_int.h"

int emit_megatron_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    int ok = 1;
    /* LOCAL RULE (model feature, not a trainer-table field): Megatron-LM has no ALiBi
       (--position-embedding-type accepts learned_absolute, rope, mrope, yarn, none). */
    if (x->m->pos == AP_POS_ALIBI) {
        emit_why(why, "megatron: Megatron-LM has no ALiBi position embedding");
        ok = 0;
    }
    /* expert parallelism with tp needing sp, and the parameter-gather overlap needing the
       distributed optimizer and gradient-reduce overlap, are trainer-table rules
       (ep_with_tp_needs_sp, overlap_param_zero_mask, overlap_param_needs_grad) */
    (void)q;
    (void)fix;
    return ok;
}

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
    sb_printf(b, "    --position-embedding-type %s\n",
              m->pos == AP_POS_LEARNED ? "learned_absolute" : "rope");
    if (m->act == AP_ACT_SWIGLU) sb_printf(b, "    --swiglu\n");
    sb_printf(b, "    --normalization %s\n", m->norm == AP_NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
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
    if (p->ep > 1) sb_printf(b, "    --expert-model-parallel-size %d\n", p->ep);
    if (p->etp > 1) sb_printf(b, "    --expert-tensor-parallel-size %d\n", p->etp);
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
    if (p->overlap_grad) sb_printf(b, "    --overlap-grad-reduce\n");
    if (p->overlap_param) sb_printf(b, "    --overlap-param-gather\n");
    if (p->overlap_tp) sb_printf(b, "    --tp-comm-overlap\n");
    if (p->dtype == AP_DTYPE_FP16) sb_printf(b, "    --fp16\n");
    else sb_printf(b, "    --bf16\n");
    if (p->dtype == AP_DTYPE_FP8) sb_printf(b, "    --fp8-format hybrid\n");
    sb_printf(b, "    --attention-backend %s\n", p->flash_attn ? "flash" : "unfused");
    if (p->offload_optimizer > 0)
        sb_printf(b, "    --optimizer-cpu-offload\n    --optimizer-offload-fraction %g\n"
                     "    --use-precision-aware-optimizer\n    --overlap-cpu-optimizer-d2h-h2d\n",
                  p->offload_optimizer);
}

ap_status emit_megatron_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    const ap_cluster *c = x->c;
    int per_node = c->gpus < c->gpus_per_node ? c->gpus : c->gpus_per_node;
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
    if (p->tp > 1 || p->cp > 1)
        sb_printf(&b, "# tp or cp > 1: keep TP/CP communication ordered ahead of compute\n"
                      "export CUDA_DEVICE_MAX_CONNECTIONS=1\n\n");
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
