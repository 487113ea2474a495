/*
 * activations.c - bytes of activations one transformer layer keeps for its backward pass, for
 * one micro-batch, derived term by term for the actual architecture.
 *
 * Base: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
 * Models" (arXiv 2205.05198), Sec. 4 and Table 2, for a GPT layer (GELU 4h MLP, MHA, LayerNorm,
 * dropout, 16-bit activations, 1-byte dropout masks):
 *   attention 11sbh + 5as^2b, MLP 19sbh, two LayerNorm inputs 4sbh  ->  sbh(34 + 5as/h).
 * Each term below carries its own tensor-parallel split: a tensor inside the tp region is
 * divided by t; a tensor outside it (norm inputs, dropout masks, linear inputs) only by t with
 * sequence parallelism. Generalisations, each a separate term:
 *   - GQA/MQA: K and V have kv_heads*d features; with tp > kv_heads each rank holds one KV head.
 *   - head_dim != h/a: Q and attention output have a*d features.
 *   - SwiGLU (Megatron's fused bias_swiglu): saves its 2f input and the f-wide fc2 input, 6sbf
 *     bytes instead of GELU's 4sbf (gelu input + fc2 input).
 *   - no dropout (Llama-style): drop the two 1-byte masks and the attention-dropout output and
 *     mask, so the score terms are 2as^2b (softmax output only).
 *   - RMSNorm saves the same input as LayerNorm; per-row statistics (O(sb)) are neglected, as
 *     Korthikanti does.
 *   - FlashAttention (Dao et al. 2022): no s^2 tensor; it keeps the fp32 log-sum-exp, 4sab
 *     bytes (Q, K, V and the output are saved anyway).
 *   - parallel attention/MLP (GPT-NeoX, Falcon): the second norm reads the same input; with a
 *     single norm the MLP input is the attention input.
 *   - Gemma2's post-norms save the attention and MLP outputs (2 x 2sbh).
 *   - MLA (DeepSeek-V2/V3): the compressed q and kv latents, their norm outputs (replicated
 *     across tp), and per-head Q, K (nope + rope dims) and V.
 *   - MoE: router input and fp32 router logits + probabilities (8sbE bytes); every routed token
 *     copy (top_k x capacity factor) keeps its dispatched input, the expert's activation input
 *     and fc2 input, and its expert output for the combine; shared experts as a dense SwiGLU.
 *   - context parallelism: every term uses the local sequence s/cp; the score matrix is
 *     (s/cp) x s per rank.
 *   - fp8 under Transformer Engine (trainer cap fp8_saves_fp8_inputs): a tensor kept only as a
 *     GEMM's input (QKV, MLP and fc2 inputs, routed expert inputs) is kept as its 1-byte FP8
 *     cast; the attention output is kept twice, 16-bit by the fused kernel and FP8 as the
 *     output projection's input. Norm inputs and the activation's input stay 16-bit.
 *   - eager composites (ap_plan_eager_elementwise: Hugging Face modeling code under DeepSpeed,
 *     FSDP and Colossal-AI, Megatron-DeepSpeed's Llama path, torchtitan without torch.compile):
 *     the tensors autograd keeps beyond the fused kernels' (eager_layer_bytes).
 * Recompute: selective = Megatron's core-attention recompute (drops the score terms, and the
 * flash log-sum-exp); full = only the layer input, 2sbh (/t with sp). A trainer whose
 * "selective" is per-op checkpointing (torchtitan's "op" policy, sac_layer_bytes) keeps the
 * block input, the outputs of the 1st, 3rd, 5th... matmul of the block, the attention output
 * with its log-sum-exp and the reduce-scatter outputs, and recomputes everything else.
 */
#include "autoplan/estimate.h"

double ap_mem_korthikanti_layer_bytes(double s, double b, double h, double a, double t, int sp,
                                      ap_recompute rc) {
    double sbh = s * b * h;
    double score = 5.0 * a * s / h; /* 5as/h */
    switch (rc) {
    case AP_RECOMPUTE_FULL:
        return sp ? 2.0 * sbh / t : 2.0 * sbh;
    case AP_RECOMPUTE_SELECTIVE:
        return sp ? 34.0 * sbh / t : sbh * (10.0 + 24.0 / t);
    case AP_RECOMPUTE_NONE:
    default:
        return sp ? sbh / t * (34.0 + score) : sbh * (10.0 + 24.0 / t + score / t);
    }
}

/* Per-rank features of K (or V): kv heads split across tp, or one replicated head when tp
 * exceeds the kv heads. */
static double kv_features(const ap_model *m, int tp, int64_t head_dim) {
    int64_t kvh = m->kv_heads;
    if (kvh >= tp) return (double)(kvh / tp) * (double)head_dim;
    return (double)head_dim; /* tp % kv_heads == 0: one KV head per rank, replicated */
}

/* Per-op selective checkpointing of a dense block (torchtitan parallelize_llama.py: the policy
 * saves the outputs of mm, SDPA and reduce_scatter ops except every second mm, its mm count
 * starting afresh in each block). The block's matmuls in call order: wq, wk, wv, wo, then w1,
 * w3, w2 (SwiGLU: w2(silu(w1(x)) * w3(x))) or fc1, fc2; the odd ones are kept, 16-bit, per
 * rank (column-parallel outputs split by t, the row-parallel outputs whole before their
 * reduction). */
static double sac_layer_bytes(const ap_model *m, const ap_plan *p) {
    const double t = p->tp, s = (double)p->seq / p->cp, b = (double)p->mbs;
    const double T = s * b, h = (double)m->hidden, d = (double)m->head_dim;
    const double a_loc = (double)m->heads / t, f = (double)m->ffn_hidden / t;
    const double out_t = p->sp ? t : 1.0;
    double mm[7];
    int n = 0;
    mm[n++] = a_loc * d;                        /* wq */
    mm[n++] = kv_features(m, p->tp, m->head_dim); /* wk */
    mm[n++] = kv_features(m, p->tp, m->head_dim); /* wv */
    mm[n++] = h;                                /* wo */
    mm[n++] = f;                                /* w1 / fc1 */
    if (m->act == AP_ACT_SWIGLU) mm[n++] = f;   /* w3 */
    mm[n++] = h;                                /* w2 / fc2 */
    double bytes = 2.0 * T * h / out_t;         /* the block input */
    for (int i = 0; i < n; i += 2) bytes += 2.0 * T * mm[i];
    bytes += 2.0 * T * a_loc * d + 4.0 * T * a_loc; /* SDPA output and log-sum-exp */
    if (p->tp > 1 && p->sp) bytes += 2.0 * 2.0 * T * h / t; /* the two reduce-scatters */
    return bytes;
}

int ap_mem_op_sac(const ap_model *m, const ap_plan *p, int64_t layer) {
    ap_layer_info li;
    ap_model_layer(m, layer, &li);
    return ap_trainer_get(p->trainer)->selective_op_sac && p->flash_attn && !li.is_moe &&
           m->mla.kv_lora_rank == 0 && !m->parallel_attn;
}

/* What eager composites keep for their backward beyond the fused kernels counted below, per
 * layer, worked from the autograd saves of each op (PyTorch tools/autograd/derivatives.yaml:
 * pow keeps its input, a product keeps each operand the other's gradient needs, silu its
 * input, a dtype cast nothing):
 * - Hugging Face LlamaRMSNorm.forward (models/llama/modeling_llama.py, copied by the other
 *   decoders; Megatron-DeepSpeed's megatron/model/rmsnorm.py and aten's composite rms_norm
 *   alike): x.to(fp32), pow(2), mean, rsqrt, the product, .to(bf16), weight *. It keeps the
 *   fp32 upcast (pow's and the product's input, 4 bytes per element) and the 16-bit
 *   normalised tensor (the weight product's input, 2) where a fused norm keeps its 16-bit
 *   input (2): 4 bytes more per element of each RMSNorm, outside the tp region. Its output,
 *   the next GEMM's input, is counted below either way; LayerNorm (F.layer_norm, one kernel)
 *   keeps only its input.
 * - act_fn(gate) * up (LlamaMLP; GeGLU alike): silu keeps its input, the gate output; the
 *   product keeps the activation's output and the up output; the down projection keeps the
 *   product. Megatron's fused bias_swiglu keeps the 2f input alone, so one f-wide 16-bit
 *   tensor more per token, of every dense, shared and routed expert MLP. gpt-oss's clamped
 *   GLU (models/gpt_oss/modeling_gpt_oss.py GptOssExperts: clamp, gate * sigmoid(alpha gate),
 *   (up + 1) * glu) keeps four more: the clamped gate, the sigmoid, up + 1 and the glu.
 * - rotary: q * cos + rotate_half(q) * sin keeps only cos and sin (no gradient), so nothing.
 * Per-head q/k norms (Qwen3, OLMo-2) are left out. */
static double eager_layer_bytes(const ap_model *m, const ap_plan *p, const ap_layer_info *li,
                                double sbh_out, double tokens_tp, double routed) {
    double bytes = 0;
    if (m->norm == AP_NORM_RMSNORM && ap_plan_eager_norm(p))
        bytes += 4.0 * (double)m->norms_per_layer * sbh_out;
    if (m->act != AP_ACT_SWIGLU) return bytes;
    const double per_f = 2.0 * (m->gate_act == AP_GATE_SWIGLU_OAI ? 4.0 : 1.0);
    if (!li->is_moe) return bytes + per_f * tokens_tp * (double)m->ffn_hidden;
    const ap_moe *mo = &m->moe;
    bytes += per_f * routed * (double)mo->ffn_hidden / p->etp;
    if (mo->shared_experts > 0 && mo->shared_ffn_hidden > 0)
        bytes += per_f * tokens_tp * (double)mo->shared_ffn_hidden;
    return bytes;
}

double ap_mem_layer_activation_bytes(const ap_model *m, const ap_plan *p, int64_t layer,
                                     ap_recompute rc) {
    const double t = p->tp;
    const double b = (double)p->mbs;
    const double s = (double)p->seq / p->cp;  /* local sequence under context parallelism */
    const double s_full = (double)p->seq;
    const double h = (double)m->hidden;
    const double a_loc = (double)m->heads / t; /* query heads per rank */
    const double out_t = p->sp ? t : 1.0;      /* split of tensors outside the tp region */
    const int drop = m->dropout;

    double sbh_out = s * b * h / out_t; /* a 16-bit sbh tensor outside the tp region: x 2 bytes */

    if (rc == AP_RECOMPUTE_FULL) return 2.0 * sbh_out;
    if (rc == AP_RECOMPUTE_SELECTIVE && ap_mem_op_sac(m, p, layer)) return sac_layer_bytes(m, p);

    ap_layer_info li;
    ap_model_layer(m, layer, &li);
    double bytes = 0;
    /* bytes per element of a tensor kept only as a GEMM's input: 1 where the trainer's fp8
     * GEMMs save their FP8 cast (fp8_saves_fp8_inputs) */
    const int f8 = p->dtype == AP_DTYPE_FP8 && ap_trainer_get(p->trainer)->fp8_saves_fp8_inputs;
    const double gin = f8 ? 1.0 : 2.0;

    /* ---- attention block ---- */
    bytes += 2.0 * sbh_out; /* input of the first norm */
    if (m->mla.kv_lora_rank > 0) {
        const ap_mla *ml = &m->mla;
        double qk = (double)(ml->qk_nope_head_dim + ml->qk_rope_head_dim);
        double lat = 0;
        bytes += 2.0 * sbh_out; /* norm output: input of both down projections */
        if (ml->q_lora_rank > 0) lat += 2.0 * (double)ml->q_lora_rank; /* q latent + its norm out */
        lat += (double)(ml->kv_lora_rank + ml->qk_rope_head_dim);       /* kv down-proj output */
        lat += (double)ml->kv_lora_rank;                                /* kv latent norm output */
        bytes += 2.0 * s * b * lat / out_t;
        bytes += 2.0 * s * b * a_loc * qk * 2.0;                      /* Q and K per head */
        bytes += 2.0 * s * b * a_loc * (double)ml->v_head_dim;        /* V */
        bytes += 2.0 * s * b * a_loc * (double)ml->v_head_dim;        /* attention output */
    } else {
        double d = (double)m->head_dim;
        bytes += gin * sbh_out;                               /* QKV input (norm output) */
        bytes += 2.0 * s * b * a_loc * d;                     /* Q */
        bytes += 2.0 * 2.0 * s * b * kv_features(m, p->tp, m->head_dim); /* K, V */
        /* output projection input: in fp8 its FP8 cast, beside the 16-bit attention output
         * the fused kernel keeps for its own backward */
        bytes += (f8 ? (p->flash_attn ? 3.0 : 1.0) : 2.0) * s * b * a_loc * d;
    }
    if (rc == AP_RECOMPUTE_NONE) {
        if (p->flash_attn) {
            bytes += 4.0 * s * b * a_loc; /* fp32 log-sum-exp */
        } else {
            /* softmax output 2as^2b; with dropout also its mask as^2b and output 2as^2b */
            double sc = a_loc * s * s_full * b;
            bytes += drop ? 5.0 * sc : 2.0 * sc;
        }
    }
    if (drop) bytes += sbh_out; /* dropout mask after the output projection, 1 byte */
    if (m->norms_per_layer >= 4) bytes += 2.0 * 2.0 * sbh_out; /* gemma2 post-norm inputs */

    /* ---- MLP block ---- */
    int shares_norm_input = m->parallel_attn;
    if (!shares_norm_input) bytes += 2.0 * sbh_out;                 /* input of the second norm */
    if (!(m->parallel_attn && m->norms_per_layer == 1)) bytes += gin * sbh_out; /* MLP input */
    if (drop) bytes += sbh_out;                                      /* MLP dropout mask */

    /* bytes per token per ffn unit: the activation's 16-bit input (2f wide for SwiGLU) and the
     * fc2 input (FP8 in fp8 GEMMs that save their casts) */
    double act_per_f = ((m->act == AP_ACT_SWIGLU) ? 4.0 : 2.0) + gin;
    double routed = li.is_moe ? ap_cost_moe_routed(m, p, s * b) : 0; /* token copies here */
    if (ap_plan_eager_elementwise(p))
        bytes += eager_layer_bytes(m, p, &li, sbh_out, s * b / t, routed);
    if (li.is_moe) {
        const ap_moe *mo = &m->moe;
        double E = (double)mo->experts;
        double tokens = s * b / out_t; /* tokens this rank routes */
        bytes += 8.0 * tokens * E;                         /* fp32 router logits + probabilities */
        bytes += 4.0 * tokens * (double)mo->top_k;         /* fp32 routing weights */
        bytes += routed * (gin * h                          /* dispatched expert input */
                           + act_per_f * (double)mo->ffn_hidden / p->etp /* act + fc2 input */
                           + 2.0 * h);                      /* expert output kept for combine */
        if (mo->shared_experts > 0 && mo->shared_ffn_hidden > 0)
            bytes += act_per_f * s * b * (double)mo->shared_ffn_hidden / t;
    } else {
        bytes += act_per_f * s * b * (double)m->ffn_hidden / t;
    }
    return bytes;
}
