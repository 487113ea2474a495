/*
 * model.c - what a transformer is made of: validation of an ap_model, exact parameter counts
 * per layer and in total, forward FLOPs per token and the model fingerprint. The readers that
 * fill an ap_model live in hf.c (Hugging Face config.json and autoplan's native JSON).
 *
 * Structure: one function, layer_parts(), knows the architecture rules (attention incl. GQA/MQA
 * and DeepSeek MLA, gelu/relu or gated MLP, MoE router/experts/shared experts, norms, biases) and
 * returns a layer's parameter counts split into matmul weights and everything else. All public
 * counters sum its results, so parameter counts, active counts and FLOPs cannot disagree.
 *
 * Counting rules follow the Hugging Face modeling_*.py of each architecture (parameter names in
 * comments); the totals are checked exactly against published checkpoints in tests/test_model.c.
 * It does not count buffers that are not trained parameters (rotary inv_freq, causal masks) nor
 * DeepSeek-V3's multi-token-prediction module (num_nextn_predict_layers; not part of the 671B).
 *
 * At the end: the enum names and the one table of ap_model's fields, which writes and reads the
 * complete JSON shape of a model (plan.json's "model"; the native reader in hf.c uses the names).
 */
#include "autoplan/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void ap_model_init(ap_model *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "model");
    snprintf(m->model_type, sizeof m->model_type, "native");
    m->act = AP_ACT_GELU;
    m->norm = AP_NORM_LAYERNORM;
    m->pos = AP_POS_ROTARY;
    m->norms_per_layer = 2;
    m->final_norm = 1;
    m->moe.layer_freq = 1;
    m->rotary_pct = 1.0;
}

/* ---- architecture rules ---------------------------------------------------------------------- */

/* Parameters of one norm: LayerNorm has weight and bias (2h), RMSNorm only a weight (h), and
 * so has Cohere's LayerNorm without bias (modeling_cohere.py CohereLayerNorm). */
static int64_t norm_size(const ap_model *m, int64_t width) {
    return m->norm == AP_NORM_LAYERNORM && !m->norm_no_bias ? 2 * width : width;
}

/* One MLP of intermediate size f: gelu/relu has fc1 h->f and fc2 f->h (GPT-2 c_fc/c_proj, OPT
 * fc1/fc2); a gated MLP (SwiGLU, Shazeer 2020; Gemma's GeGLU) has gate and up h->f and down f->h
 * (Llama gate_proj/up_proj/down_proj). Biases when m->bias: one per output feature. */
static void mlp_size(const ap_model *m, int64_t f, int64_t *weights, int64_t *biases) {
    int64_t h = m->hidden;
    int bias = m->bias || m->mlp_bias; /* gpt-j fc_in/fc_out, gpt-oss gate_up_proj/down_proj */
    if (m->act == AP_ACT_SWIGLU) {
        *weights = 3 * h * f;
        *biases = bias ? 2 * f + h : 0;
    } else {
        *weights = 2 * h * f;
        *biases = bias ? f + h : 0;
    }
}

typedef struct {
    ap_layer_info info;
    int64_t attn_matmul;   /* weights of the attention GEMMs */
    int64_t mlp_matmul;    /* weights of the dense MLP GEMMs */
    int64_t expert_matmul; /* weights of one routed expert */
    int64_t shared_matmul; /* weights of the shared experts (+ shared gate) */
    int64_t router_matmul; /* router weights (without the correction bias) */
} layer_parts;

static void layer_parts_of(const ap_model *m, int64_t i, layer_parts *lp) {
    memset(lp, 0, sizeof *lp);
    ap_layer_info *li = &lp->info;
    int64_t h = m->hidden, a = m->heads;
    int64_t attn_other = 0;

    if (m->mla.kv_lora_rank > 0) {
        /* DeepSeek-V2/V3 multi-head latent attention (DeepSeek-AI 2024, arXiv:2405.04434 Sec.
         * 2.1; modeling_deepseek_v3.py DeepseekV3Attention): q_a_proj h->q_lora, q_a_layernorm,
         * q_b_proj q_lora->a*(nope+rope) (or q_proj h->a*(nope+rope) without q_lora);
         * kv_a_proj_with_mqa h->(kv_lora+rope), kv_a_layernorm, kv_b_proj kv_lora->a*(nope+v);
         * o_proj a*v->h. attention_bias adds biases to q_a_proj, kv_a_proj and o_proj. */
        const ap_mla *x = &m->mla;
        int64_t qk = x->qk_nope_head_dim + x->qk_rope_head_dim;
        int64_t w = 0;
        if (x->q_lora_rank > 0) {
            w += h * x->q_lora_rank + x->q_lora_rank * a * qk;
            attn_other += x->q_lora_rank; /* q_a_layernorm (RMSNorm) */
            if (m->bias) attn_other += x->q_lora_rank;
        } else {
            w += h * a * qk;
        }
        w += h * (x->kv_lora_rank + x->qk_rope_head_dim);
        w += x->kv_lora_rank * a * (x->qk_nope_head_dim + x->v_head_dim);
        w += a * x->v_head_dim * h;
        attn_other += x->kv_lora_rank; /* kv_a_layernorm */
        if (m->bias) attn_other += x->kv_lora_rank + x->qk_rope_head_dim + h;
        lp->attn_matmul = w;
        li->qkv_out = a * qk + a * (x->qk_nope_head_dim + x->v_head_dim);
        li->attn_out_in = a * x->v_head_dim;
        li->qk_head_dim = qk;
        li->v_head_dim = x->v_head_dim;
    } else {
        /* q h->a*d, k and v h->kv*d (GQA, Ainslie et al. 2023; MQA kv=1, Shazeer 2019), o a*d->h
         * (Vaswani et al. 2017). Biases on all four with m->bias (GPT-2, OPT, BLOOM), on q,k,v
         * only with m->qkv_bias (Qwen2). */
        int64_t d = m->head_dim, qkv = (a + 2 * m->kv_heads) * d;
        lp->attn_matmul = h * qkv + a * d * h;
        if (m->bias || m->attn_bias) attn_other += qkv + h;
        else if (m->qkv_bias) attn_other += qkv;
        /* q/k norms: Qwen3 / Gemma3 q_norm and k_norm of head_dim (modeling_qwen3.py), OLMo2
         * q_norm a*d and k_norm kv*d (modeling_olmo2.py), Cohere q_norm/k_norm of (heads,
         * head_dim) weights (modeling_cohere.py); Llama4's L2 norm has no weight */
        if (m->qk_norm == AP_QKNORM_HEAD) attn_other += 2 * norm_size(m, d);
        else if (m->qk_norm == AP_QKNORM_FULL) attn_other += norm_size(m, (a + m->kv_heads) * d);
        li->qkv_out = qkv;
        li->attn_out_in = a * d;
        li->qk_head_dim = d;
        li->v_head_dim = d;
    }
    /* gpt-oss: one learned sink logit per head (modeling_gpt_oss.py GptOssAttention.sinks) */
    if (m->attn_sinks) attn_other += a;
    li->attn_params = lp->attn_matmul + attn_other;
    li->attn_window = ap_model_layer_is_local(m, i) ? m->window : 0;
    li->norm_params = m->norms_per_layer * norm_size(m, h);

    li->is_moe = ap_model_layer_is_moe(m, i);
    int64_t b;
    if (li->is_moe) {
        const ap_moe *e = &m->moe;
        /* Router: gate h->E without bias (Mixtral block_sparse_moe.gate, Qwen2-MoE mlp.gate,
         * DeepSeek-V3 mlp.gate.weight) + DeepSeek-V3's e_score_correction_bias (E). */
        lp->router_matmul = h * e->experts;
        li->router_params = lp->router_matmul + (e->router_bias ? e->experts : 0) +
                            (m->router_linear_bias ? e->experts : 0); /* gpt-oss router.bias */
        mlp_size(m, e->ffn_hidden, &lp->expert_matmul, &b);
        li->expert_params = lp->expert_matmul + b;
        if (e->shared_experts > 0 && e->shared_ffn_hidden > 0) {
            /* Shared experts are one MLP of the summed width (DeepSeek-V3 mlp.shared_experts with
             * n_shared*moe_intermediate; Qwen2-MoE shared_expert) + Qwen2-MoE's sigmoid gate h->1
             * (shared_expert_gate). */
            mlp_size(m, e->shared_ffn_hidden, &lp->shared_matmul, &b);
            if (e->shared_expert_gate) lp->shared_matmul += h;
            li->shared_params = lp->shared_matmul + b;
        }
        li->mlp_ffn = e->ffn_hidden;
        li->total_params = li->attn_params + li->norm_params + li->router_params +
                           e->experts * li->expert_params + li->shared_params;
        li->active_params = li->attn_params + li->norm_params + li->router_params +
                            e->top_k * li->expert_params + li->shared_params;
    } else {
        mlp_size(m, m->ffn_hidden, &lp->mlp_matmul, &b);
        li->mlp_params = lp->mlp_matmul + b;
        li->mlp_ffn = m->ffn_hidden;
        li->total_params = li->attn_params + li->norm_params + li->mlp_params;
        li->active_params = li->total_params;
    }
}

int ap_model_layer_is_local(const ap_model *m, int64_t i) {
    /* Gemma2 (even layers local, period 2), Gemma3 (5 local : 1 global, period 6), gpt-oss
     * (alternating, period 2), Llama4 (3 chunked : 1 global NoPE, period 4): layer i is global
     * when (i + 1) % period == 0; period 0 = every layer local (Mistral v0.1, Starcoder2). */
    if (m->window <= 0 || i < 0 || i >= m->layers) return 0;
    if (m->window_period <= 0) return 1;
    return (i + 1) % m->window_period != 0;
}

int64_t ap_model_local_layers(const ap_model *m) {
    if (m->window <= 0) return 0;
    if (m->window_period <= 0) return m->layers;
    return m->layers - m->layers / m->window_period;
}

void ap_model_layer(const ap_model *m, int64_t i, ap_layer_info *out) {
    layer_parts lp;
    layer_parts_of(m, i, &lp);
    *out = lp.info;
}

/* Number of MoE layers: those of [0, L). */
static int64_t moe_layer_count(const ap_model *m) { return ap_model_moe_layers_in(m, 0, m->layers); }

int ap_model_single_kind(const ap_model *m) {
    int64_t k = moe_layer_count(m);
    return k == 0 || k == m->layers;
}

int ap_model_dense_prefix(const ap_model *m) {
    int64_t moe = moe_layer_count(m), dense = m->layers - moe;
    if (moe == 0 || dense == 0) return -1;
    /* the dense layers come first exactly when [0, dense) holds no MoE layer */
    return ap_model_moe_layers_in(m, 0, dense) == 0 ? (int)dense : -1;
}

/* A representative dense and MoE layer: every dense layer has the same counts, and so has every
 * MoE layer, so totals are count * per-layer (no loop over 10^4 layers per call). */
static void layer_kinds(const ap_model *m, layer_parts *dense, layer_parts *moe, int64_t *n_dense,
                        int64_t *n_moe) {
    *n_moe = moe_layer_count(m);
    *n_dense = m->layers - *n_moe;
    ap_model tmp = *m;
    tmp.moe.experts = 0;
    layer_parts_of(&tmp, 0, dense);
    memset(moe, 0, sizeof *moe);
    if (*n_moe > 0) {
        tmp = *m;
        tmp.moe.first_dense_layers = 0;
        tmp.moe.layer_freq = 1;
        layer_parts_of(&tmp, 0, moe);
    }
}

int64_t ap_model_embedding_params(const ap_model *m) {
    /* token embedding V*h (+ learned positions, GPT-2 wpe / OPT embed_positions with its offset of
     * 2 rows) (+ BLOOM word_embeddings_layernorm) */
    return m->vocab * m->hidden + m->learned_pos * m->hidden +
           (m->embed_norm ? norm_size(m, m->hidden) : 0);
}

int64_t ap_model_head_params(const ap_model *m) {
    /* + the LM head's bias (Phi-3.5-MoE lm_head_bias, GPT-J lm_head) */
    return (m->final_norm ? norm_size(m, m->hidden) : 0) +
           (m->tied_embeddings ? 0 : m->vocab * m->hidden) + (m->lm_head_bias ? m->vocab : 0);
}

int64_t ap_model_nonembed_params(const ap_model *m) {
    layer_parts d, e;
    int64_t nd, ne;
    layer_kinds(m, &d, &e, &nd, &ne);
    return nd * d.info.total_params + ne * e.info.total_params +
           (m->final_norm ? norm_size(m, m->hidden) : 0);
}

double ap_model_critical_batch_tokens(const ap_model *m) {
    if (m->moe.experts > 0) return 0; /* the fits are for dense transformers */
    double n = (double)ap_model_nonembed_params(m);
    if (!(n > 0)) return 0;
    /* Kaplan et al. 2020, "Scaling Laws for Neural Language Models": Eq. 1.1 L(N) =
     * (N_c / N)^alpha_N, N_c = 8.8e13 non-embedding parameters, alpha_N = 0.076 (nats per token,
     * converged); Eq. 1.4 B_crit(L) = B_* / L^(1 / alpha_B), B_* = 2e8 tokens, alpha_B = 0.21 */
    double loss = pow(8.8e13 / n, 0.076);
    return 2e8 / pow(loss, 1.0 / 0.21);
}

int64_t ap_model_total_params(const ap_model *m) {
    layer_parts d, e;
    int64_t nd, ne;
    layer_kinds(m, &d, &e, &nd, &ne);
    return ap_model_embedding_params(m) + nd * d.info.total_params + ne * e.info.total_params +
           ap_model_head_params(m);
}

int64_t ap_model_active_params(const ap_model *m) {
    layer_parts d, e;
    int64_t nd, ne;
    layer_kinds(m, &d, &e, &nd, &ne);
    return ap_model_embedding_params(m) + nd * d.info.active_params + ne * e.info.active_params +
           ap_model_head_params(m);
}

double ap_model_fwd_flops_per_token(const ap_model *m, int64_t s) {
    /* 2 FLOPs per multiply-add of every weight a token meets (Kaplan et al. 2020, Sec. 2.1; the
     * 2*N of Narayanan et al. 2021, Sec. 5.1: forward 24*l*h^2 per token for a GPT layer), the
     * LM head 2*V*h (counted even when tied: the GEMM runs), and per layer attention scores QK^T
     * and the weighted sum PV: 2*s*a*d_qk + 2*s*a*d_v (= 4*s*h for d = h/a, Narayanan's
     * "4*b*s^2*h" per sequence). Causal masking is not halved here. Embedding lookups, norms,
     * biases and activations are not counted (Narayanan's convention). */
    if (s <= 0) s = m->seq_len;
    layer_parts d, e;
    int64_t nd, ne;
    layer_kinds(m, &d, &e, &nd, &ne);
    double sd = (double)s, a = (double)m->heads;
    double per_dense = 2.0 * (double)(d.attn_matmul + d.mlp_matmul);
    double per_moe = 0;
    if (ne > 0)
        per_moe = 2.0 * (double)(e.attn_matmul + e.router_matmul + e.shared_matmul +
                                 m->moe.top_k * e.expert_matmul);
    /* Attention scores: a local layer's query meets at most `window` keys (sliding window,
     * Beltagy et al. 2020; Llama4 chunks), a global layer's all s (not halved for causality,
     * as above). MLA and plain layers have the same head dims in every layer. */
    double nlocal = (double)ap_model_local_layers(m);
    double span_local = m->window > 0 && m->window < s ? (double)m->window : sd;
    double attn = 2.0 * a * (double)(d.info.qk_head_dim + d.info.v_head_dim) *
                  ((double)m->layers - nlocal) * sd + 2.0 * a *
                  (double)(d.info.qk_head_dim + d.info.v_head_dim) * nlocal * span_local;
    return (double)nd * per_dense + (double)ne * per_moe + attn +
           2.0 * (double)m->vocab * (double)m->hidden;
}

/* ---- fingerprint ----------------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, int64_t v) { return ap_hash64(&v, sizeof v, h); }

uint64_t ap_model_fingerprint(const ap_model *m) {
    /* Fields hashed one by one (never the struct: padding bytes are indeterminate). The name,
     * model_type and max_positions do not change the cost and are left out. A version tag first
     * so that adding a field later changes every fingerprint deliberately. */
    uint64_t h = ap_hash64("ap_model/2", 10, 0);
    const int64_t v[] = {
        m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn_hidden, m->vocab,
        m->seq_len, m->learned_pos, (int64_t)m->act, (int64_t)m->norm, (int64_t)m->pos,
        m->tied_embeddings, m->bias, m->qkv_bias, m->norms_per_layer, m->parallel_attn,
        m->embed_norm, m->final_norm, m->dropout,
        m->moe.experts, m->moe.top_k, m->moe.ffn_hidden, m->moe.shared_experts,
        m->moe.shared_ffn_hidden, m->moe.first_dense_layers, m->moe.layer_freq,
        m->moe.shared_expert_gate, m->moe.router_bias,
        m->mla.q_lora_rank, m->mla.kv_lora_rank, m->mla.qk_nope_head_dim,
        m->mla.qk_rope_head_dim, m->mla.v_head_dim,
        (int64_t)m->gate_act, m->attn_bias, m->mlp_bias, m->lm_head_bias, m->norm_no_bias,
        (int64_t)m->qk_norm, (int64_t)m->norm_order, m->window, m->window_period,
        m->window_chunked, m->nope_global, m->attn_sinks, (int64_t)m->router_act,
        m->router_linear_bias,
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = mix(h, v[i]);
    /* capacity factor by value, in millionths (a double's bits differ for -0.0 and 0.0) */
    h = mix(h, (int64_t)llround(m->moe.capacity_factor * 1e6));
    h = mix(h, (int64_t)llround(m->attn_softcap * 1e6));
    h = mix(h, (int64_t)llround(m->final_softcap * 1e6));
    return h;
}

/* ---- validation ------------------------------------------------------------------------------ */

static ap_status range(const char *where, const char *field, int64_t v, int64_t lo, int64_t hi,
                       ap_err *err) {
    if (v < lo || v > hi)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = %lld is out of range [%lld, %lld]",
                          where, field, (long long)v, (long long)lo, (long long)hi);
    return AP_OK;
}

#define RANGE(field, v, lo, hi)                                              \
    do {                                                                     \
        ap_status st_ = range(where, field, (v), (lo), (hi), err);           \
        if (st_ != AP_OK) return st_;                                        \
    } while (0)

/* Upper bound of the total parameter count in double arithmetic, so that absurd combinations
 * of individually legal sizes are refused before any int64 product could overflow. */
static double param_bound(const ap_model *m) {
    double h = (double)m->hidden, a = (double)m->heads, L = (double)m->layers;
    double d = (double)m->head_dim, kv = (double)m->kv_heads;
    /* + q/k norms (at most 2 (a + kv) d), sinks (a) */
    double attn = h * (a + 2 * kv) * d + a * d * h + 4 * h + 3 * (a + 2 * kv) * d + a;
    if (m->mla.kv_lora_rank > 0) {
        double qk = (double)m->mla.qk_nope_head_dim + (double)m->mla.qk_rope_head_dim;
        double q = (double)m->mla.q_lora_rank, c = (double)m->mla.kv_lora_rank;
        attn = (h + a * qk + 2) * (q > 0 ? q : h) +
               (h + 1) * (c + (double)m->mla.qk_rope_head_dim) +
               c * a * ((double)m->mla.qk_nope_head_dim + (double)m->mla.v_head_dim) +
               a * (double)m->mla.v_head_dim * h + 2 * c + h + a * qk;
    }
    double f = (double)m->ffn_hidden;
    double mlp = 3 * h * f + 2 * f + h;
    double moe = 0;
    if (m->moe.experts > 0) {
        double fe = (double)m->moe.ffn_hidden, fs = (double)m->moe.shared_ffn_hidden;
        moe = (double)m->moe.experts * (3 * h * fe + 2 * fe + h + h + 1) + 3 * h * fs + 2 * fs +
              2 * h;
    }
    double layer = attn + 8 * h + (mlp > moe ? mlp : moe);
    double emb = ((double)m->vocab * 2 + (double)m->learned_pos + 4) * h + (double)m->vocab;
    return L * layer + emb;
}

ap_status ap_model_validate(const ap_model *m, const char *where, ap_err *err) {
    if (!where) where = m->name;
    RANGE("layers", m->layers, 1, AP_MODEL_MAX_LAYERS);
    RANGE("hidden", m->hidden, 1, AP_MODEL_MAX_HIDDEN);
    RANGE("heads", m->heads, 1, AP_MODEL_MAX_HEADS);
    RANGE("kv_heads", m->kv_heads, 1, m->heads);
    if (m->heads % m->kv_heads != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'kv_heads' = %lld does not divide "
                          "'heads' = %lld", where, (long long)m->kv_heads, (long long)m->heads);
    RANGE("head_dim", m->head_dim, 1, AP_MODEL_MAX_HEAD_DIM);
    RANGE("vocab", m->vocab, 1, AP_MODEL_MAX_VOCAB);
    RANGE("seq_len", m->seq_len, 1, AP_MODEL_MAX_SEQ);
    RANGE("max_positions", m->max_positions, 0, AP_MODEL_MAX_POSITIONS);
    RANGE("learned_pos", m->learned_pos, 0, AP_MODEL_MAX_POSITIONS);
    RANGE("activation", (int64_t)m->act, AP_ACT_GELU, AP_ACT_RELU2);
    RANGE("norm", (int64_t)m->norm, AP_NORM_LAYERNORM, AP_NORM_RMSNORM);
    RANGE("position", (int64_t)m->pos, AP_POS_ROTARY, AP_POS_ALIBI);
    RANGE("norms_per_layer", m->norms_per_layer, 0, 8);
    RANGE("tied_embeddings", m->tied_embeddings, 0, 1);
    RANGE("bias", m->bias, 0, 1);
    RANGE("qkv_bias", m->qkv_bias, 0, 1);
    RANGE("parallel_attn", m->parallel_attn, 0, 1);
    RANGE("embed_norm", m->embed_norm, 0, 1);
    RANGE("final_norm", m->final_norm, 0, 1);
    RANGE("dropout", m->dropout, 0, 1);
    RANGE("gate_act", (int64_t)m->gate_act, AP_GATE_SILU, AP_GATE_SWIGLU_OAI);
    RANGE("attn_bias", m->attn_bias, 0, 1);
    RANGE("mlp_bias", m->mlp_bias, 0, 1);
    RANGE("lm_head_bias", m->lm_head_bias, 0, 1);
    RANGE("norm_no_bias", m->norm_no_bias, 0, 1);
    RANGE("norm_1p", m->norm_1p, 0, 1);
    RANGE("qk_norm", (int64_t)m->qk_norm, AP_QKNORM_NONE, AP_QKNORM_L2);
    RANGE("norm_order", (int64_t)m->norm_order, AP_NORM_PRE, AP_NORM_SANDWICH);
    RANGE("window", m->window, 0, AP_MODEL_MAX_POSITIONS);
    RANGE("window_period", m->window_period, 0, m->layers);
    RANGE("window_chunked", m->window_chunked, 0, 1);
    RANGE("nope_global", m->nope_global, 0, 1);
    RANGE("attn_sinks", m->attn_sinks, 0, 1);
    RANGE("router_act", (int64_t)m->router_act, AP_ROUTER_SOFTMAX, AP_ROUTER_SIGMOID);
    RANGE("router_linear_bias", m->router_linear_bias, 0, 1);
    if (!isfinite(m->attn_softcap) || m->attn_softcap < 0 || !isfinite(m->final_softcap) ||
        m->final_softcap < 0 || !isfinite(m->rope_theta) || m->rope_theta < 0 ||
        !isfinite(m->rotary_pct) || m->rotary_pct < 0 || m->rotary_pct > 1 ||
        !isfinite(m->rope_factor) || m->rope_factor < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: soft-capping, rope_theta, rope factor and rotary "
                          "fraction must be finite and not negative (rotary fraction at most 1)",
                          where);
    if (m->pos == AP_POS_LEARNED && m->learned_pos < m->seq_len)
        return ap_err_set(err, AP_ERR_INPUT, "%s: sequence length %lld exceeds the %lld learned "
                          "positions", where, (long long)m->seq_len, (long long)m->learned_pos);

    const ap_moe *e = &m->moe;
    RANGE("moe.experts", e->experts, 0, AP_MODEL_MAX_EXPERTS);
    if (e->experts > 0) {
        RANGE("moe.top_k", e->top_k, 1, e->experts);
        RANGE("moe.ffn_hidden", e->ffn_hidden, 1, AP_MODEL_MAX_FFN);
        RANGE("moe.shared_experts", e->shared_experts, 0, AP_MODEL_MAX_EXPERTS);
        RANGE("moe.shared_ffn_hidden", e->shared_ffn_hidden, e->shared_experts > 0 ? 1 : 0,
              AP_MODEL_MAX_FFN * 64);
        RANGE("moe.first_dense_layers", e->first_dense_layers, 0, m->layers);
        RANGE("moe.layer_freq", e->layer_freq, 1, m->layers);
        RANGE("moe.shared_expert_gate", e->shared_expert_gate, 0, 1);
        RANGE("moe.router_bias", e->router_bias, 0, 1);
        if (!isfinite(e->capacity_factor) || e->capacity_factor < 0 || e->capacity_factor > 1000)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'moe.capacity_factor' = %g is out of "
                              "range [0, 1000]", where, e->capacity_factor);
    }
    /* the dense MLP width matters only when some layer is dense */
    int64_t n_dense = m->layers - moe_layer_count(m);
    RANGE("ffn_hidden", m->ffn_hidden, n_dense > 0 ? 1 : 0, AP_MODEL_MAX_FFN);

    const ap_mla *x = &m->mla;
    RANGE("mla.kv_lora_rank", x->kv_lora_rank, 0, AP_MODEL_MAX_HIDDEN);
    if (x->kv_lora_rank > 0) {
        RANGE("mla.q_lora_rank", x->q_lora_rank, 0, AP_MODEL_MAX_HIDDEN);
        RANGE("mla.qk_nope_head_dim", x->qk_nope_head_dim, 0, AP_MODEL_MAX_HEAD_DIM);
        RANGE("mla.qk_rope_head_dim", x->qk_rope_head_dim, 0, AP_MODEL_MAX_HEAD_DIM);
        RANGE("mla.v_head_dim", x->v_head_dim, 1, AP_MODEL_MAX_HEAD_DIM);
        if (x->qk_nope_head_dim + x->qk_rope_head_dim < 1)
            return ap_err_set(err, AP_ERR_INPUT, "%s: MLA query/key head dim (qk_nope_head_dim + "
                              "qk_rope_head_dim) must be positive", where);
    }

    double bound = param_bound(m);
    if (!(bound <= AP_MODEL_MAX_PARAMS))
        return ap_err_set(err, AP_ERR_INPUT, "%s: sizes give about %.3g parameters, more than the "
                          "%.0e this tool accepts", where, bound, AP_MODEL_MAX_PARAMS);
    return AP_OK;
}

/* ---- names ------------------------------------------------------------------------------ */

/* in enum order */
static const char *const act_names[] = {"gelu", "swiglu", "relu", "relu2"};
static const char *const norm_names[] = {"layernorm", "rmsnorm"};
static const char *const pos_names[] = {"rotary", "learned", "alibi"};
const char ap_activation_names[] = "gelu, swiglu, relu, relu2";
const char ap_norm_names[] = "layernorm, rmsnorm";
const char ap_posemb_names[] = "rotary, learned, alibi";

#define NNAMES(tab) ((int)(sizeof tab / sizeof tab[0]))
#define NAMEOF(tab, v) ((unsigned)(v) < (unsigned)NNAMES(tab) ? tab[v] : tab[0])

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

const char *ap_activation_name(ap_activation a) { return NAMEOF(act_names, a); }
const char *ap_norm_name(ap_norm n) { return NAMEOF(norm_names, n); }
const char *ap_posemb_name(ap_posemb p) { return NAMEOF(pos_names, p); }
int ap_activation_lookup(const char *s) { return lookup(s, act_names, NNAMES(act_names)); }
int ap_norm_lookup(const char *s) { return lookup(s, norm_names, NNAMES(norm_names)); }
int ap_posemb_lookup(const char *s) { return lookup(s, pos_names, NNAMES(pos_names)); }

/* the enums added for today's families (model.h), in enum order */
static const char *const gate_names[] = {"silu", "gelu", "swiglu_oai"};
static const char *const qk_names[] = {"none", "head", "full", "l2"};
static const char *const order_names[] = {"pre", "post", "sandwich"};
static const char *const router_names[] = {"softmax", "sigmoid"};

/* ---- the complete JSON shape ------------------------------------------------------------- */

/* F_FLAG: a boolean added after plan.json version 1's first files, written only where true and
 * optional on reading (false where absent), so those files still read */
typedef enum { F_STR, F_I64, F_INT, F_BOOL, F_REAL, F_ENUM, F_FLAG } fkind;
typedef struct {
    const char *group;         /* "" (the model object), "moe", "mla", "arch" */
    const char *key;
    fkind kind;
    size_t off;
    double lo, hi;             /* numbers: the accepted range; strings: hi = the buffer size */
    const char *const *names;  /* F_ENUM: the spellings in enum order */
    int nnames;
} mfield;

#define M(f) offsetof(ap_model, f)
#define BIG 1099511627776.0 /* 2^40: beyond any model; ap_model_validate has the real limits */
#define I64(g, k, f, lo) {g, k, F_I64, M(f), lo, BIG, NULL, 0}
#define BOOL(g, k, f) {g, k, F_BOOL, M(f), 0, 1, NULL, 0}
#define FLAG(g, k, f) {g, k, F_FLAG, M(f), 0, 1, NULL, 0}
#define REAL(g, k, f, hi) {g, k, F_REAL, M(f), 0, hi, NULL, 0}
#define ENUM(g, k, f, t) {g, k, F_ENUM, M(f), 0, 0, t, (int)(sizeof t / sizeof t[0])}
#define STR(g, k, f) {g, k, F_STR, M(f), 0, sizeof ((ap_model *)0)->f, NULL, 0}

/* plan.json's order (docs/plan-json.md) */
static const mfield model_fields[] = {
    STR("", "name", name), STR("", "model_type", model_type),
    I64("", "layers", layers, 1), I64("", "hidden", hidden, 1), I64("", "heads", heads, 1),
    I64("", "kv_heads", kv_heads, 1), I64("", "head_dim", head_dim, 1),
    I64("", "ffn_hidden", ffn_hidden, 0), I64("", "vocab", vocab, 1),
    I64("", "seq_len", seq_len, 1), I64("", "max_positions", max_positions, 0),
    I64("", "learned_pos", learned_pos, 0),
    ENUM("", "activation", act, act_names), ENUM("", "norm", norm, norm_names),
    ENUM("", "position", pos, pos_names),
    BOOL("", "tied_embeddings", tied_embeddings), BOOL("", "bias", bias),
    BOOL("", "qkv_bias", qkv_bias), {"", "norms_per_layer", F_INT, M(norms_per_layer), 0, 16, NULL, 0},
    BOOL("", "parallel_attn", parallel_attn), BOOL("", "embed_norm", embed_norm),
    BOOL("", "final_norm", final_norm), BOOL("", "dropout", dropout),

    I64("moe", "experts", moe.experts, 0), I64("moe", "top_k", moe.top_k, 0),
    I64("moe", "ffn_hidden", moe.ffn_hidden, 0), I64("moe", "shared_experts", moe.shared_experts, 0),
    I64("moe", "shared_ffn_hidden", moe.shared_ffn_hidden, 0),
    I64("moe", "first_dense_layers", moe.first_dense_layers, 0),
    I64("moe", "layer_freq", moe.layer_freq, 0),
    BOOL("moe", "shared_expert_gate", moe.shared_expert_gate),
    BOOL("moe", "router_bias", moe.router_bias), REAL("moe", "capacity_factor", moe.capacity_factor, 1e6),

    I64("mla", "q_lora_rank", mla.q_lora_rank, 0), I64("mla", "kv_lora_rank", mla.kv_lora_rank, 0),
    I64("mla", "qk_nope_head_dim", mla.qk_nope_head_dim, 0),
    I64("mla", "qk_rope_head_dim", mla.qk_rope_head_dim, 0),
    I64("mla", "v_head_dim", mla.v_head_dim, 0),

    /* the architecture fields added for today's families (model.h, after mla) */
    ENUM("arch", "gate_act", gate_act, gate_names), BOOL("arch", "attn_bias", attn_bias),
    BOOL("arch", "mlp_bias", mlp_bias), BOOL("arch", "lm_head_bias", lm_head_bias),
    BOOL("arch", "norm_no_bias", norm_no_bias), ENUM("arch", "qk_norm", qk_norm, qk_names),
    ENUM("arch", "norm_order", norm_order, order_names), I64("arch", "window", window, 0),
    I64("arch", "window_period", window_period, 0), BOOL("arch", "window_chunked", window_chunked),
    BOOL("arch", "nope_global", nope_global), BOOL("arch", "attn_sinks", attn_sinks),
    REAL("arch", "attn_softcap", attn_softcap, 1e9), REAL("arch", "final_softcap", final_softcap, 1e9),
    REAL("arch", "rope_theta", rope_theta, 1e12), REAL("arch", "rotary_pct", rotary_pct, 1),
    STR("arch", "rope_scaling", rope_scaling), REAL("arch", "rope_factor", rope_factor, 1e6),
    I64("arch", "rope_orig_positions", rope_orig_positions, 0),
    ENUM("arch", "router_act", router_act, router_names),
    BOOL("arch", "router_linear_bias", router_linear_bias),
    BOOL("arch", "text_of_multimodal", text_of_multimodal), FLAG("arch", "norm_1p", norm_1p),
};
#define NFIELDS ((int)(sizeof model_fields / sizeof model_fields[0]))

static ap_status put_field(ap_json *o, const mfield *f, const ap_model *m) {
    const char *p = (const char *)m + f->off;
    switch (f->kind) {
    case F_STR: return ap_json_add_string(o, f->key, p);
    case F_I64: return ap_json_add_number(o, f->key, (double)*(const int64_t *)p);
    case F_INT: return ap_json_add_number(o, f->key, *(const int *)p);
    case F_BOOL: return ap_json_add_bool(o, f->key, *(const int *)p);
    case F_FLAG: return *(const int *)p ? ap_json_add_bool(o, f->key, 1) : AP_OK;
    case F_REAL: return ap_json_add_number(o, f->key, *(const double *)p);
    case F_ENUM: { /* the model's enums are int-sized */
        int v = *(const int *)p;
        return ap_json_add_string(o, f->key, f->names[v >= 0 && v < f->nnames ? v : 0]);
    }
    }
    return AP_ERR_INTERNAL;
}

ap_status ap_model_to_json(const ap_model *m, ap_json *obj) {
    ap_status st = obj ? AP_OK : AP_ERR_NOMEM;
    ap_json *o = obj;
    for (int i = 0; st == AP_OK && i < NFIELDS; i++) {
        const mfield *f = &model_fields[i];
        if (f->group[0] && (i == 0 || strcmp(f->group, model_fields[i - 1].group) != 0)) {
            o = ap_json_new_object(); /* a nested object starts */
            st = ap_json_add(obj, f->group, o);
        }
        if (!f->group[0]) o = obj;
        if (st == AP_OK) st = put_field(o, f, m);
    }
    return st;
}

static ap_status get_enum(const ap_json *o, const mfield *f, const char *where, int *out,
                          ap_err *err) {
    char buf[64], list[256] = "";
    ap_status st = ap_json_get_str(o, f->key, buf, sizeof buf, NULL, where, err);
    if (st != AP_OK) return st;
    int v = lookup(buf, f->names, f->nnames);
    if (v >= 0) {
        *out = v;
        return AP_OK;
    }
    for (int j = 0; j < f->nnames; j++) {
        strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, f->names[j], sizeof list - strlen(list) - 1);
    }
    return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = \"%s\" is not one of %s", where,
                      f->key, buf, list);
}

static ap_status get_field(const ap_json *o, const mfield *f, const char *where, ap_model *m,
                           ap_err *err) {
    char *p = (char *)m + f->off;
    int64_t v = 0;
    int e = 0, present = 0;
    ap_status st = AP_OK;
    switch (f->kind) {
    case F_STR: return ap_json_get_str(o, f->key, p, (size_t)f->hi, NULL, where, err);
    case F_I64:
        return ap_json_get_int(o, f->key, (int64_t)f->lo, (int64_t)f->hi, (int64_t *)p, NULL,
                               where, err);
    case F_INT:
        st = ap_json_get_int(o, f->key, (int64_t)f->lo, (int64_t)f->hi, &v, NULL, where, err);
        if (st == AP_OK) *(int *)p = (int)v;
        return st;
    case F_BOOL: return ap_json_get_bool(o, f->key, (int *)p, NULL, where, err);
    case F_FLAG: return ap_json_get_bool(o, f->key, (int *)p, &present, where, err);
    case F_REAL: return ap_json_get_real(o, f->key, f->lo, f->hi, (double *)p, NULL, where, err);
    case F_ENUM:
        st = get_enum(o, f, where, &e, err);
        if (st == AP_OK) *(int *)p = e; /* the model's enums are int-sized */
        return st;
    }
    return AP_ERR_INTERNAL;
}

ap_status ap_model_from_json(const ap_json *obj, const char *where, ap_model *m, ap_err *err) {
    ap_model_init(m);
    ap_status st = AP_OK;
    char w2[600];
    for (int i = 0; st == AP_OK && i < NFIELDS; i++) {
        const mfield *f = &model_fields[i];
        const ap_json *o = obj;
        const char *w = where;
        if (f->group[0]) {
            o = ap_json_get(obj, f->group);
            if (!o)
                return ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where, f->group);
            if (!ap_json_is_object(o))
                return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an object, got %s",
                                  where, f->group, ap_json_type_name(o));
            snprintf(w2, sizeof w2, "%s.%s", where, f->group);
            w = w2;
        }
        st = get_field(o, f, w, m, err);
    }
    if (st == AP_OK) st = ap_model_validate(m, where, err);
    return st;
}
