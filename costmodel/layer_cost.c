/*
 * layer_cost.c - one transformer layer priced on one rank for one micro-batch: its parameters
 * on the GPU (split by tp, KV heads replicated past their count), its activations under each
 * recompute level (activations.c), and its forward/backward time split into GEMMs (the kernel
 * tables' efficiency for each shape), the attention core (flash kernels by implementation,
 * length and head dim, or materialised scores), memory-bound kernels at HBM bandwidth, and its
 * TP (with overlap), CP ring and EP all-to-all communication (collectives.c).
 *
 * What it does not do: count layers per stage, schedule micro-batches or reduce gradients
 * (estimate.c). The estimate prices one layer of each kind once per plan.
 */
#include "estimate_int.h"

#include <math.h>
#include <string.h>

/* Time of a GEMM (M x K) * (K x N) in dtype dt: the kernel table's efficiency for its size
 * and wave quantisation (kernels.c: published large-GEMM ceiling x F / (F + gemm_half_flops),
 * or a measured curve) times the calibrated sustained fraction gemm_eff_max. */
double gemm_at(const ctx *x, ap_dtype dt, double M, double N, double K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    /* gemm_half_flops stands for a fixed per-GEMM time at the 16-bit rate: a faster dtype
     * (fp8: twice the peak) needs proportionally more FLOPs to hide it */
    double peak = x->c->gpu.peak_flops[dt], p16 = x->c->gpu.peak_flops[x->dt16];
    double half = x->cal.gemm_half_flops * (p16 > 0 && peak > 0 ? peak / p16 : 1.0);
    double eff = x->cal.gemm_eff_max * x->gemm_scale * ap_kernels_gemm_eff(x->k, dt, M, N, K, half);
    return eff > 0 && peak > 0 ? 2.0 * M * N * K / (peak * eff) : 0;
}

/* A GEMM of a transformer layer in the plan's dtype. In fp8 the 16-bit input is quantised
 * first: read 2 bytes, write 1 byte per element of the M x K input, a memory-bound pass before
 * every fp8 GEMM (Micikevicius et al. 2022, "FP8 formats for deep learning"; TE casts
 * activations per GEMM with per-tensor scales). Delayed scaling takes the amax inside that
 * cast; current (tensorwise) scaling needs the tensor's amax before it, one more read of the
 * 16-bit input (plan.h ap_fp8_recipe), unless the trainer's compiled kernels fuse the reduction
 * into the producer (fp8_amax_fused). */
static double gemm_s(const ctx *x, double M, double N, double K) {
    double t = gemm_at(x, x->p->dtype, M, N, K);
    if (x->p->dtype == AP_DTYPE_FP8 && t > 0) {
        ap_fp8_recipe r = ap_plan_fp8_recipe(x->p);
        int amax_pass = r == AP_FP8_TENSORWISE && !x->tr->fp8_amax_fused;
        /* MXFP8: no amax, one E8M0 scale byte per 32 elements of each of the two layouts */
        double bytes = amax_pass ? 5.0 : r == AP_FP8_MXFP8 ? 3.0 + 2.0 / 32.0 : 3.0;
        t += bytes * M * K / x->hbm;
    }
    return t;
}

/* The shapes one layer's kernels see on this rank (Korthikanti et al. 2022 notation). */
typedef struct {
    ap_layer_info li;
    int64_t idx;   /* the layer's index in the model */
    double t;      /* tensor-parallel degree */
    double h;      /* hidden size */
    double sl;     /* local sequence s / cp */
    double T;      /* tokens through each GEMM on this rank: b * s / cp */
    double a_loc;  /* query heads on this rank */
    double out_t;  /* split of the tensors outside the tp region: t with sp, else 1 */
    double kvf;    /* kv heads on this rank (replicated when tp > kv heads) */
    int a2a;       /* context parallelism by all-to-all (plan.h cp_a2a) */
} layer_shape;

static void layer_shape_of(const ctx *x, int64_t idx, layer_shape *ls) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    ap_model_layer(m, idx, &ls->li);
    ls->idx = idx;
    ls->t = p->tp;
    ls->h = (double)m->hidden;
    ls->sl = (double)p->seq / p->cp;
    ls->T = (double)p->mbs * ls->sl;
    ls->a_loc = (double)m->heads / ls->t;
    ls->out_t = p->sp ? ls->t : 1.0;
    ls->kvf = m->kv_heads >= p->tp ? (double)(m->kv_heads / p->tp) : 1.0;
    ls->a2a = ap_plan_cp_a2a(p);
}

/* Parameters of the layer on one GPU: matrices split by tp, KV replicated when tp > kv heads
 * (Megatron replicates the kv heads across the extra tp ranks); activations per recompute
 * level from activations.c. */
static void layer_params(const ctx *x, int64_t idx, const layer_shape *ls, layer_cost *lc) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    const ap_layer_info *li = &ls->li;
    double kv_params = 0;
    if (m->mla.kv_lora_rank == 0) {
        kv_params = 2.0 * ls->h * (double)(m->kv_heads * m->head_dim);
        if (m->bias || m->qkv_bias) kv_params += 2.0 * (double)(m->kv_heads * m->head_dim);
    }
    double kv_split = m->kv_heads >= p->tp ? ls->t : (double)m->kv_heads;
    lc->params_rank = ((double)li->attn_params - kv_params) / ls->t + kv_params / kv_split +
                      (double)li->mlp_params / ls->t + (double)li->norm_params +
                      (double)li->router_params + (double)li->shared_params / ls->t;
    if (li->is_moe)
        lc->expert_rank = (double)li->expert_params * (double)(m->moe.experts / p->ep) / p->etp;
    for (int r = 0; r < 3; r++)
        lc->act[r] = ap_mem_layer_activation_bytes(m, p, idx, (ap_recompute)r);
}

/* The layer's forward GEMM time by the TP collective each GEMM consumes or produces (with sp,
 * Korthikanti 2022 Sec. 4.2.2): the attention's all-gather feeds its input projections and its
 * output projection feeds a reduce-scatter; the MLP's likewise (layer_comm). */
typedef struct {
    double attn_in, attn_out, mlp_in, mlp_out;
} gemm_parts;

/* GEMM time of the attention projections, forward: MLA's low-rank projections (DeepSeek-V2,
 * Liu et al. 2024, Sec. 2.1) or fused q,k,v and the output projection. */
static double attention_gemms_s(const ctx *x, const layer_shape *ls, gemm_parts *gp) {
    const ap_model *m = x->m;
    const double T = ls->T, h = ls->h, a_loc = ls->a_loc;
    double g = 0;
    if (m->mla.kv_lora_rank > 0) {
        const ap_mla *ml = &m->mla;
        double qk = (double)(ml->qk_nope_head_dim + ml->qk_rope_head_dim);
        if (ml->q_lora_rank > 0) {
            g += gemm_s(x, T, (double)ml->q_lora_rank, h);
            g += gemm_s(x, T, a_loc * qk, (double)ml->q_lora_rank);
        } else {
            g += gemm_s(x, T, a_loc * qk, h);
        }
        g += gemm_s(x, T, (double)(ml->kv_lora_rank + ml->qk_rope_head_dim), h);
        g += gemm_s(x, T, a_loc * (double)(ml->qk_nope_head_dim + ml->v_head_dim),
                    (double)ml->kv_lora_rank);
        gp->attn_in = g;
        gp->attn_out = gemm_s(x, T, h, a_loc * (double)ml->v_head_dim);
        g += gp->attn_out;
    } else {
        double qkv_n = a_loc * (double)m->head_dim + 2.0 * ls->kvf * (double)m->head_dim;
        gp->attn_in = gemm_s(x, T, qkv_n, h);
        gp->attn_out = gemm_s(x, T, h, a_loc * (double)m->head_dim);
        g += gp->attn_in;
        g += gp->attn_out;
    }
    return g;
}

/* GEMM time of the MLP, forward, added to g (the layer's GEMM time so far, kept in one running
 * sum): the dense MLP, or the router, the local experts at their share of the routed tokens and
 * the shared experts. *ffn_elem_bytes gets the activation function's memory traffic (SwiGLU
 * reads 2f and writes f, 2 bytes each: 6f per token; GELU reads and writes f: 4f). */
static double mlp_gemms_s(const ctx *x, const layer_shape *ls, double g, double *ffn_elem_bytes,
                          gemm_parts *gp) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    const double T = ls->T, h = ls->h, t = ls->t;
    /* gpt-oss's clamps and the concatenation ahead of the fused kernel, where the trainer runs
     * them apart (gated_clamp_unfused): each reads and writes the 2f-wide input, 16f more */
    const double act_bytes = m->act != AP_ACT_SWIGLU ? 4.0
                             : m->gate_act == AP_GATE_SWIGLU_OAI && x->tr->gated_clamp_unfused
                                 ? 22.0
                                 : 6.0;
    if (ls->li.is_moe) {
        const ap_moe *mo = &m->moe;
        double local_experts = (double)(mo->experts / p->ep);
        double routed = ap_cost_moe_routed(m, p, T); /* copies this rank's experts process */
        double per_expert = routed / local_experts;
        double f = (double)mo->ffn_hidden / p->etp;
        double up = m->act == AP_ACT_SWIGLU ? 2.0 * f : f;
        double router = gemm_s(x, T, (double)mo->experts, h);
        double e_up = gemm_s(x, per_expert, up, h), e_down = gemm_s(x, per_expert, h, f);
        g += router;
        g += local_experts * (e_up + e_down);
        gp->mlp_in = router + local_experts * e_up;
        gp->mlp_out = local_experts * e_down;
        *ffn_elem_bytes += routed * act_bytes * f;
        if (mo->shared_experts > 0 && mo->shared_ffn_hidden > 0) {
            double fs = (double)mo->shared_ffn_hidden / t;
            double ups = m->act == AP_ACT_SWIGLU ? 2.0 * fs : fs;
            double s_up = gemm_s(x, T, ups, h), s_down = gemm_s(x, T, h, fs);
            g += s_up + s_down;
            gp->mlp_in += s_up;
            gp->mlp_out += s_down;
            *ffn_elem_bytes += T * act_bytes * fs;
        }
    } else {
        double f = (double)m->ffn_hidden / t;
        double up = m->act == AP_ACT_SWIGLU ? 2.0 * f : f;
        gp->mlp_in = gemm_s(x, T, up, h);
        gp->mlp_out = gemm_s(x, T, h, f);
        g += gp->mlp_in + gp->mlp_out;
        *ffn_elem_bytes += T * act_bytes * f;
    }
    return g;
}

/* Bytes per layer forward that eager PyTorch composites move beyond the fused kernels counted
 * above (Hugging Face transformers models/llama/modeling_llama.py, as the other decoders copy
 * it), counted op by op at 2 bytes per 16-bit and 4 per fp32 element:
 * - LlamaRMSNorm.forward: to(fp32) reads 2 writes 4, pow 4 + 4, mean reads 4, the rsqrt
 *   product 4 + 4, to(bf16) 4 + 2, the weight product 2 + 2: 36 bytes per element where a
 *   fused norm reads 2 and writes 2 (4), so 32 more per element of each norm (two per layer,
 *   four with sandwich norms); outside the tp region;
 * - apply_rotary_pos_emb on q and k: rotate_half (the negated half 2, cat 4), q * cos 6,
 *   rotate_half(q) * sin 6, the sum 6: 24 bytes per element, none counted above; its backward
 *   moves as much, not twice (the sum passes its gradient on uncopied; dy * cos 6, dy * sin 6,
 *   rotate_half's 6, the two paths summed 6), so *rope_bwd gets it apart from the 2x of the
 *   rest (the norm's autograd backward, ~76 bytes per element against a fused norm's ~8, and
 *   SwiGLU's, 18f against 10f, are twice their forward's extra);
 * - LlamaMLP act_fn(gate) * up: silu reads and writes f (4f), the product reads 2f and writes
 *   f (6f): 10f where the fused SwiGLU above counts 6f (4/6 more of ffn_elem, the routed and
 *   shared experts' included); gpt-oss's experts (models/gpt_oss/modeling_gpt_oss.py
 *   GptOssExperts) clamp gate and up (4f each), scale the gate by alpha (4f), take its sigmoid
 *   (4f), multiply (6f), add 1 to up (4f) and multiply (6f): 32f, 26/6 more.
 * Latent attention's partial rotary (MLA) is left out. */
static void eager_extra_bytes(const ctx *x, const layer_shape *ls, double ffn_elem,
                              double *out_elem, double *in_elem, double *rope_bwd) {
    const ap_model *m = x->m;
    const double T = ls->T, h = ls->h;
    if (m->norm == AP_NORM_RMSNORM && ap_plan_eager_norm(x->p)) {
        double norms = m->norm_order == AP_NORM_SANDWICH ? 4.0 : 2.0;
        *out_elem += T * h * norms * 32.0 / ls->out_t;
    }
    const int gate_oai = m->gate_act == AP_GATE_SWIGLU_OAI;
    if (m->pos == AP_POS_ROTARY && m->mla.kv_lora_rank == 0) {
        double rope = T * (ls->a_loc + ls->kvf) * (double)m->head_dim * 24.0;
        *in_elem += rope;
        *rope_bwd = -rope; /* the backward's 2x of the forward, less one */
    }
    if (m->act == AP_ACT_SWIGLU) *in_elem += ffn_elem * (gate_oai ? 26.0 : 4.0) / 6.0;
}

/* Attended query-key pairs per sequence and head of a causal decoder (FlashAttention-2 paper's
 * count, Dao 2023 Sec. 4.1): s^2/2, or s W - W^2/2 with a sliding window of W < s keys, or
 * (s / W) W^2 / 2 = s W / 2 when attention stays inside chunks of W tokens (Llama 4). */
static double causal_pairs(double s, double W, int chunked) {
    if (!(W > 0 && W < s)) return 0.5 * s * s;
    return chunked ? 0.5 * s * W : s * W - 0.5 * W * W;
}

/* A fused (flash) attention kernel over this rank's queries with keys limited to a window of
 * W (0: none; chunked: chunks of W), forward and backward seconds. Context parallelism runs the
 * ring as cp steps of (s/cp) x (s/cp) blocks (Megatron/TE ring attention, load-balanced): one
 * causal block on the diagonal and full blocks for the rest, each at the kernel table's
 * efficiency for that block length and head dim; by all-to-all (cp_a2a) one causal kernel
 * over the whole sequence for heads / cp of the rank's heads (the same pairs per rank);
 * a window shorter than the block runs like a sequence of its width.
 * Efficiencies are the FlashAttention papers' microbenchmarks (kernels.c) times the calibrated
 * sustained fraction (the same as the GEMMs') and the wave quantisation of b x heads x
 * ceil(block / 128) query tiles over the SMs. */
static void flash_s(const ctx *x, const layer_shape *ls, double W, int chunked, double *fwd_s,
                    double *bwd_s) {
    const ap_plan *p = x->p;
    const double s = (double)p->seq, cp = (double)p->cp, L = ls->a2a ? s : ls->sl;
    const double dqk = (double)ls->li.qk_head_dim, dv = (double)ls->li.v_head_dim;
    const double per_pair = 2.0 * (double)p->mbs * ls->a_loc * (dqk + dv);
    const double heads = ls->a2a ? ls->a_loc / cp : ls->a_loc; /* the kernel's heads */
    const double rate = x->peak16 * x->cal.gemm_eff_max * x->gemm_scale *
                        ap_kernels_wave(x->sms, (double)p->mbs * heads * 128.0, L);
    double pairs = causal_pairs(s, W, chunked) / cp;
    double cf, cb, ff, fb; /* causal and full efficiencies, forward and backward */
    if (W > 0 && W < L) {
        ap_kernels_attn_eff(x->k, x->attn, 1, dqk, W, &cf, &cb);
        *fwd_s = cf > 0 ? per_pair * pairs / (rate * cf) : 0;
        *bwd_s = cb > 0 ? 2.5 * per_pair * pairs / (rate * cb) : 0;
        return;
    }
    ap_kernels_attn_eff(x->k, x->attn, 1, dqk, L, &cf, &cb);
    ap_kernels_attn_eff(x->k, x->attn, 0, dqk, L, &ff, &fb);
    double diag = fmin(pairs, 0.5 * L * L), rest = pairs - diag;
    /* a causal kernel longer than the tables' longest length Lc: its masked tiles are those
     * of the diagonal blocks of Lc (FlashAttention-2, Dao 2023 Sec. 3.1.1: only the blocks
     * on the diagonal need the mask, the ones above it are skipped), the rest run as the
     * full kernel, so the causal figure of Lc holds for Lc / L of the diagonal's pairs */
    double Lc = ap_kernels_attn_longest(x->k, x->attn, 1);
    if (Lc > 0 && L > Lc) {
        double masked = diag * Lc / L;
        rest += diag - masked;
        diag = masked;
    }
    *fwd_s = cf > 0 && ff > 0 ? per_pair * (diag / cf + rest / ff) / rate : 0;
    *bwd_s = cb > 0 && fb > 0 ? 2.5 * per_pair * (diag / cb + rest / fb) / rate : 0;
}

/* The attention core of one micro-batch on this rank: QK^T and PV (2 b a s_q s_k (d_qk + d_v)
 * FLOPs over every pair). Unfused (the scores materialised: Megatron's fused softmax between
 * batched GEMMs, or eager PyTorch) computes every pair, masked or not, at the calibrated
 * attn_eff, backward twice the forward; a flash kernel skips the masked half (flash_s), and a
 * model with local layers (sliding or chunked windows: Mistral, Gemma 2/3, gpt-oss, Llama 4)
 * averages its local and global layers. */
static void attention_core_s(const ctx *x, const layer_shape *ls, double *fwd_s, double *bwd_s) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    if (x->attn == AP_ATTN_UNFUSED) {
        double dqk = (double)ls->li.qk_head_dim, dv = (double)ls->li.v_head_dim;
        double f = 2.0 * (double)p->mbs * ls->a_loc * ls->sl * (double)p->seq * (dqk + dv);
        *fwd_s = f / (x->peak16 * x->cal.attn_eff * x->gemm_scale);
        *bwd_s = 2.0 * *fwd_s;
        return;
    }
    double ff, fb;
    flash_s(x, ls, 0, 0, &ff, &fb);
    *fwd_s = ff;
    *bwd_s = fb;
    double W = (double)m->window;
    if (W > 0 && W < (double)p->seq) {
        double wf, wb, share = (double)ap_model_local_layers(m) / (double)m->layers;
        flash_s(x, ls, W, m->window_chunked, &wf, &wb);
        *fwd_s = share * wf + (1.0 - share) * ff;
        *bwd_s = share * wb + (1.0 - share) * fb;
    }
    if (p->cp > 1 && x->tr->cp_eager_merge && !p->te_attention) {
        /* PyTorch's ring attention (trainer.c cp_eager_merge), per ring step after the first,
         * bytes per element of the rank's queries and outputs (q) and of its keys and values
         * (kv): forward, the block output cast to fp32 (read 2, write 4) and merged as
         * out - sigmoid(lse_b - lse) * (out - out_b) in three fp32 ops (32), the K and V
         * packed for the next rank (read 2, write 2); backward, dq += dq_b in fp32 (read 4 + 2,
         * write 4), dk and dv likewise (10) and packed in fp32 for the next rank (8), K and V
         * packed (4); at the end the output and the gradients cast back (read 4, write 2) */
        double steps = (double)p->cp - 1.0;
        double q = (double)p->mbs * ls->sl * ls->a_loc * (double)ls->li.v_head_dim;
        double kv = 2.0 * (double)p->mbs * ls->sl * ls->kvf * (double)m->head_dim;
        *fwd_s += (steps * (38.0 * q + 4.0 * kv) + 6.0 * q) / x->hbm;
        *bwd_s += (steps * (10.0 * q + 22.0 * kv) + 6.0 * (q + kv)) / x->hbm;
    }
}

/* Token copies this rank's experts process in one micro-batch of `tokens` tokens (s b / cp),
 * balanced: each rank routes its own tokens (its sequence-parallel shard, tokens / tp), the
 * all-to-all spreads them over the ep ranks and the expert-tensor-parallel group gathers its
 * etp ranks' (Megatron-Core MoEAlltoAllTokenDispatcher: all-to-all in the ep group, then
 * all-gather in the etp group); without sequence parallelism the tp ranks hold the same
 * tokens. top_k copies each, times the capacity factor. */
double ap_cost_moe_routed(const ap_model *m, const ap_plan *p, double tokens) {
    const ap_moe *mo = &m->moe;
    const double out_t = p->sp ? (double)p->tp : 1.0;
    double cf = mo->capacity_factor > 0 ? mo->capacity_factor : 1.0;
    double gathered = out_t > 1 ? tokens / out_t * (double)p->etp : tokens;
    return gathered * (double)mo->top_k * cf;
}

/* Bytes the token permutations of an MoE layer move, forward (Megatron-Core
 * MoEAlltoAllTokenDispatcher, transformer/moe/token_dispatcher.py; torchtitan's dispatch and its
 * permute indices do the same passes): "permutation 1" gathers the rank's routed token copies
 * in expert order (reads its Tr tokens, writes their Tr k copies), "permutation 2" sorts the
 * copies the all-to-all delivered by local expert and "unpermutation 2" restores their order
 * (each reads and writes the R copies this rank's experts process; only with more than one
 * local expert), and "unpermutation 1" weighs the returned copies by their router
 * probabilities and sums them into the Tr tokens. 16-bit elements of width h; the backward
 * moves as much again per pass (layer_compute doubles the forward's). */
double ap_cost_moe_permute_bytes(const ap_model *m, const ap_plan *p, double tokens) {
    const ap_moe *mo = &m->moe;
    const double out_t = p->sp ? (double)p->tp : 1.0;
    double cf = mo->capacity_factor > 0 ? mo->capacity_factor : 1.0;
    double tr = tokens / out_t;                        /* tokens this rank routes */
    double copies = tr * (double)mo->top_k * cf;       /* their copies */
    double routed = ap_cost_moe_routed(m, p, tokens);  /* copies its experts process */
    double bytes = 2.0 * (tr + copies) + 2.0 * (copies + tr);
    if (p->ep > 0 && mo->experts / p->ep > 1) bytes += 2.0 * 2.0 * routed + 2.0 * 2.0 * routed;
    return bytes * (double)m->hidden;
}

/* The rank's query, key, value and output tensors of one micro-batch, bytes (16-bit): what
 * all-to-all context parallelism moves and reorders. */
static void a2a_tensors(const ctx *x, const layer_shape *ls, double b[4]) {
    const double tok = (double)x->p->mbs * ls->sl * 2.0;
    const double dqk = (double)ls->li.qk_head_dim, dv = (double)ls->li.v_head_dim;
    b[0] = tok * ls->a_loc * dqk;
    b[1] = tok * ls->kvf * dqk;
    b[2] = tok * ls->kvf * dv;
    b[3] = tok * ls->a_loc * dv;
}

/* Forward and backward compute of one micro-batch through the layer: GEMMs, the attention core
 * (attention_core_s) and the memory-bound kernels at HBM bandwidth. *gp gets the forward GEMM
 * time by the TP collective it overlaps (layer_comm). */
static void layer_compute(const ctx *x, const layer_shape *ls, layer_cost *lc, gemm_parts *gp) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    const double T = ls->T, h = ls->h;
    double ffn_elem = 0; /* activation-function bytes */
    double g = mlp_gemms_s(x, ls, attention_gemms_s(x, ls, gp), &ffn_elem, gp);

    double dqk = (double)ls->li.qk_head_dim, dv = (double)ls->li.v_head_dim;
    double attn_full = 2.0 * (double)p->mbs * ls->a_loc * ls->sl * (double)p->seq * (dqk + dv);
    double attn_f, attn_b;
    attention_core_s(x, ls, &attn_f, &attn_b);
    int unfused = x->attn == AP_ATTN_UNFUSED;

    /* elementwise bytes per token: two norms (read 2h, write 2h each) and two residual adds
     * (read 4h, write 2h each), with dropout fused into them (Megatron's bias-dropout-add: +1h
     * mask each); outside the tp region, so split only with sp */
    double out_elem = T * h * (8.0 + 12.0 + (m->dropout ? 2.0 : 0.0)) / ls->out_t;
    double in_elem = ffn_elem;
    int eager = ap_plan_eager_elementwise(p);
    double bwd_adjust = 0; /* bytes the backward moves beyond twice the forward's */
    if (eager) eager_extra_bytes(x, ls, ffn_elem, &out_elem, &in_elem, &bwd_adjust);
    if (ls->li.is_moe) in_elem += ap_cost_moe_permute_bytes(m, p, T);
    double scores = (double)p->mbs * ls->a_loc * ls->sl * (double)p->seq;
    if (unfused) /* scale, mask, softmax (+ dropout) on the s x s scores */
        in_elem += scores * (m->dropout ? 9.0 : 4.0);
    double elem_s = (out_elem + in_elem) / x->hbm;
    double a2a_copy_s = 0;
    if (ls->a2a) {
        /* each all-to-all'd tensor copied into the layout the collective sends and out of the
         * one it receives (a movedim and contiguous on each side, the causal chunk reorder
         * folded into one of them: Transformer Engine flash_attn_a2a_communicate): read and
         * write twice, forward and backward alike (pytorch/pytorch#178066 measured three such
         * permutes at 38% of their three all-to-alls' time on H100, 43% on A100) */
        double b[4];
        a2a_tensors(x, ls, b);
        a2a_copy_s = 4.0 * (b[0] + b[1] + b[2] + b[3]) / x->hbm;
    }
    double attn_elem_s = unfused ? scores * (m->dropout ? 9.0 : 4.0) / x->hbm : 0;

    lc->fwd_compute_s = g + attn_f + elem_s + a2a_copy_s;
    /* backward: two GEMMs per forward GEMM; the attention core's own backward; elementwise
     * about twice the traffic */
    lc->bwd_compute_s = 2.0 * g + attn_b + 2.0 * elem_s + bwd_adjust / x->hbm + a2a_copy_s;
    lc->attn_fwd_s = attn_f + attn_elem_s;
    lc->attn_core_s = attn_f;
    lc->gemm_s = g;
    lc->attn_bwd_s = attn_b;
    lc->attn_flops = attn_full;
    if (ap_mem_op_sac(m, p, ls->idx)) {
        /* per-op checkpointing recomputes the even matmuls of the block (wk, wo and w3, or
         * wk, wo and fc2: activations.c) and every memory-bound kernel, not the attention */
        double d = (double)m->head_dim, f = (double)m->ffn_hidden / ls->t;
        double kv = ls->kvf * d, ao = ls->a_loc * d;
        double last = m->act == AP_ACT_SWIGLU ? f : h; /* w3 (out f, in h) or fc2 (out h, in f) */
        double last_k = m->act == AP_ACT_SWIGLU ? h : f;
        lc->sac_rec_s = gemm_s(x, T, kv, h) + gemm_s(x, T, h, ao) + gemm_s(x, T, last, last_k) +
                        elem_s - attn_elem_s;
        lc->sac_rec_flops = 2.0 * T * (kv * h + h * ao + last * last_k);
        /* wk takes the gathered attention input; w3 (SwiGLU) the gathered MLP input, fc2 not */
        lc->sac_rec_g[0] = gemm_s(x, T, kv, h);
        lc->sac_rec_g[1] = m->act == AP_ACT_SWIGLU ? gemm_s(x, T, last, last_k) : 0;
    }
}

/* The backward's exposed TP communication of one micro-batch through the layer, c4 the forward's
 * before overlap (four half-all-reduces: all-gathers or reduce-scatters) and fwd its exposed
 * part. Where the trainer runs the column-parallel layers' backward collectives beside their
 * GEMMs (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): without sequence
 * parallelism the input-gradient all-reduces of the QKV and fc1 layers overlap those layers'
 * weight-gradient GEMMs; with it each of those layers re-gathers its input beside its data-
 * gradient GEMM and reduce-scatters the data gradient beside its weight-gradient GEMM (traffic
 * the forward does not have), while the gradients entering the output projection and fc2 are
 * all-gathered before their GEMMs can start. Each hidden collective exposes what its GEMM (as
 * long as the forward's) cannot cover. Otherwise, and under Transformer Engine's chunked
 * overlap, the backward exposes what the forward does. */
static double tp_backward_s(const ctx *x, double c4, double fwd, const gemm_parts *gp,
                            double *total) {
    const ap_plan *p = x->p;
    *total = c4;
    if (p->tp < 2 || p->overlap_tp || !x->tr->tp_bwd_async || p->no_tp_bwd_overlap) return fwd;
    const double c = c4 / 4.0, g[2] = {gp->attn_in, gp->mlp_in};
    if (p->sp) *total = 6.0 * c; /* two all-gathers, two reduce-scatters, two re-gathers */
    double exposed = p->sp ? 2.0 * c : 0;
    for (int i = 0; i < 2; i++)
        exposed += p->sp ? 2.0 * fmax(0.0, c - g[i]) : fmax(0.0, 2.0 * c - g[i]);
    return exposed;
}

/* All-to-all context parallelism (plan.h cp_a2a), forward: one all-to-all each for Q, K and V
 * (sequence shards to head shards) and one for the output (back), none overlapped: the kernel
 * needs all of its inputs and the next GEMM all of its output (Transformer Engine
 * AttnFuncWithCPAndQKVOA2A; Jacobs et al. 2023, DeepSpeed-Ulysses, Sec. 3.1: 4 all-to-alls of
 * N h / P per layer forward). The backward moves the same four (dO in; dQ, dK, dV out). */
static double a2a_cp_s(const ctx *x, const layer_shape *ls) {
    double b[4];
    a2a_tensors(x, ls, b);
    int k_cp = in_domain(x, x->p->cp, x->p->tp);
    double t = 0;
    for (int i = 0; i < 4; i++) t += alltoall_s(x, b[i], x->p->cp, k_cp);
    return t;
}

/* Communication of one micro-batch through the layer, forward: TP (with its overlap), the CP
 * ring or all-to-alls and the EP all-to-alls. */
static void layer_comm(const ctx *x, const layer_shape *ls, const gemm_parts *gp,
                       layer_cost *lc) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    const double T = ls->T, h = ls->h;
    int k_tp = in_domain(x, p->tp, 1);
    double act_bytes = T * h * 2.0;
    /* Megatron TP: two all-reduces per layer forward (attention and MLP outputs); with sp an
     * all-gather + reduce-scatter pair moves the same bytes (Korthikanti 2022 Sec. 4.2.2) */
    lc->tp_total_s = 2.0 * allreduce_s(x, act_bytes, p->tp, k_tp);
    lc->tp_s = lc->tp_total_s;
    if (p->overlap_tp && p->tp > 1) {
        /* Transformer Engine's userbuffer overlap (Megatron --tp-comm-overlap) and torch's
         * async TP split each all-gather / reduce-scatter into tp chunks pipelined against the
         * GEMM that consumes or produces it (Wang et al. 2022, "Overlap communication with
         * dependent computation via decomposition"; TE's ub overlaps: qkv and fc1 all-gathers,
         * proj and fc2 reduce-scatters). A collective of C seconds split into n = tp chunks
         * against a GEMM of G: the first chunk never hides, then each step takes the longer of
         * a chunk of each, so C/n + (n - 1) max(C, G)/n + G/n in all, of which
         * max(C/n, C - (n - 1) G/n) is exposed; summed over the layer's four collectives,
         * each moving a quarter of the bytes */
        const double n = (double)p->tp, c = lc->tp_total_s / 4.0;
        const double g[4] = {gp->attn_in, gp->attn_out, gp->mlp_in, gp->mlp_out};
        double exposed = 0;
        for (int i = 0; i < 4; i++) exposed += fmax(c / n, c - (n - 1.0) * g[i] / n);
        lc->tp_s = exposed;
    }
    lc->tp_bwd_s = tp_backward_s(x, lc->tp_total_s, lc->tp_s, gp, &lc->tp_bwd_total_s);
    /* what the hidden parts cost the GEMMs beside them (overlap_cost_s) */
    lc->tp_bwd_s += overlap_cost_s(lc->tp_bwd_total_s - lc->tp_bwd_s);
    lc->tp_s += overlap_cost_s(lc->tp_total_s - lc->tp_s);
    if (lc->sac_rec_s > 0 && p->sp && p->tp > 1) { /* per-op checkpointing (layer_compute) */
        /* per-op checkpointing saves reduce-scatter outputs but not all-gather ones
         * (torchtitan's _save_list: mm, SDPA, reduce_scatter_tensor, max), so recompute runs
         * the layer's two sequence-parallel all-gathers again: each half of an all-reduce,
         * overlapped under async TP only with a recomputed matmul it feeds (above) */
        const double n = (double)p->tp, c = lc->tp_total_s / 4.0;
        lc->sac_rec_tp_s = 0;
        for (int i = 0; i < 2; i++) {
            double e = p->overlap_tp && lc->sac_rec_g[i] > 0
                           ? fmax(c / n, c - (n - 1.0) * lc->sac_rec_g[i] / n)
                           : c;
            lc->sac_rec_tp_s += e + overlap_cost_s(c - e);
        }
    }
    if (ls->a2a) {
        lc->cp_s = a2a_cp_s(x, ls);
        lc->cp_bwd_s = lc->cp_s;
    } else if (p->cp > 1) {
        /* ring attention: cp-1 exchanges of the local K and V, overlapped with the attention
         * of the previous chunk (Megatron/TE context parallelism), each hidden part slowing
         * the attention beside it (overlap_cost_s) */
        double dqk = (double)ls->li.qk_head_dim, dv = (double)ls->li.v_head_dim;
        double kvf = m->mla.kv_lora_rank > 0 ? ls->a_loc * (dqk + dv)
                                              : 2.0 * ls->kvf * (double)m->head_dim;
        double chunk = (double)p->mbs * ls->sl * kvf * 2.0;
        int k_cp = in_domain(x, p->cp, p->tp);
        double step = coll_s(x, AP_COLL_SENDRECV_OP, chunk, p->cp, k_cp);
        double per_step_attn = lc->attn_core_s / p->cp;
        lc->cp_s = (p->cp - 1) * (fmax(0.0, step - per_step_attn) +
                                  overlap_cost_s(fmin(step, per_step_attn)));
        lc->cp_bwd_s = 2.0 * lc->cp_s; /* K and V again, and their gradients */
    }
    if (ls->li.is_moe && p->ep > 1) {
        /* dispatch and combine all-to-alls of every routed token copy */
        double cf = m->moe.capacity_factor > 0 ? m->moe.capacity_factor : 1.0;
        double bytes = (T / ls->out_t) * (double)m->moe.top_k * cf * h * 2.0;
        int k_ep = in_domain(x, p->ep, p->etp);
        lc->ep_s = 2.0 * alltoall_s(x, bytes, p->ep, k_ep);
    }
}

void price_layer(const ctx *x, int64_t idx, layer_cost *lc) {
    memset(lc, 0, sizeof *lc);
    layer_shape ls;
    layer_shape_of(x, idx, &ls);
    layer_params(x, idx, &ls, lc);
    gemm_parts gp;
    layer_compute(x, &ls, lc, &gp);
    layer_comm(x, &ls, &gp, lc);
    /* model FLOPs (forward, one micro-batch on this rank): 2 x active matmul params x tokens
     * + attention (not halved for causal: Megatron's convention, Narayanan 2021 Eq. 3) */
    double active_matmul = (double)(ls.li.active_params - ls.li.norm_params);
    lc->model_flops = 2.0 * active_matmul / ls.t * ls.T;
}
