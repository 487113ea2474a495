/*
 * hf.c - the model readers: Hugging Face config.json (a file or a model directory) and autoplan's
 * native model JSON (docs/models.md), both into an ap_model (model.h).
 *
 * Structure: ap_model_load finds the file, ap_model_parse parses it and dispatches on its kind
 * (HF files have "model_type", native files "layers"); HF types go through a table of readers,
 * one per architecture family. Every field is read with the validating ap_json_get_* helpers, so
 * a wrong type, a missing field or an absurd size is refused with one line naming the file, the
 * field and the reason. Cross-field rules (heads dividing hidden, kv heads dividing heads, top_k
 * within experts) are checked here with the file's own field names; ap_model_validate then checks
 * the result once more with autoplan's names.
 *
 * Defaults for absent HF fields are the defaults of the transformers configuration classes
 * (configuration_<type>.py), so a config.json means what it means to transformers. Variants that
 * do not fit the counting model (e.g. OPT-350m's embedding projection, LLaMA with attention bias
 * but no MLP bias) are refused by name rather than miscounted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autoplan/json.h"
#include "autoplan/model.h"
#include "autoplan/text.h"

#define TRY(x)                          \
    do {                                \
        ap_status st_ = (x);            \
        if (st_ != AP_OK) return st_;   \
    } while (0)

/* Default training sequence for HF models: min(max_position_embeddings, 4096). 4096 is the
 * Llama-2 pretraining context (Touvron et al. 2023, Table 1), a common fine-tuning length. */
#define HF_DEFAULT_SEQ 4096

typedef struct {
    const ap_json *j;
    const char *where;
    ap_err *err;
} rd;

/* Optional integer with a default. */
static ap_status opt_int(rd *r, const char *key, int64_t lo, int64_t hi, int64_t def,
                         int64_t *out) {
    int present = 0;
    *out = def;
    return ap_json_get_int(r->j, key, lo, hi, out, &present, r->where, r->err);
}

static ap_status req_int(rd *r, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    return ap_json_get_int(r->j, key, lo, hi, out, NULL, r->where, r->err);
}

/* Required integer under one of two names (BLOOM's n_embed/hidden_size, falcon's n_head). */
static ap_status req_int2(rd *r, const char *key, const char *alt, int64_t lo, int64_t hi,
                          int64_t *out) {
    int present = 0;
    TRY(ap_json_get_int(r->j, key, lo, hi, out, &present, r->where, r->err));
    if (present) return AP_OK;
    TRY(ap_json_get_int(r->j, alt, lo, hi, out, &present, r->where, r->err));
    if (present) return AP_OK;
    return ap_err_set(r->err, AP_ERR_INPUT, "%s: missing field '%s' (or '%s')", r->where, key, alt);
}

static ap_status opt_bool(rd *r, const char *key, int def, int *out) {
    int present = 0;
    *out = def;
    return ap_json_get_bool(r->j, key, out, &present, r->where, r->err);
}

/* Any dropout probability > 0 among `keys` (defaults `def` each) means dropout layers run. */
static ap_status dropout_of(rd *r, const char *const *keys, double def, int *out) {
    *out = 0;
    for (; *keys; keys++) {
        double p = def;
        int present = 0;
        TRY(ap_json_get_real(r->j, *keys, 0.0, 1.0, &p, &present, r->where, r->err));
        if (p > 0) *out = 1;
    }
    return AP_OK;
}

/* A string field that, when present, must be a string (hidden_act, activation_function). */
static ap_status opt_str(rd *r, const char *key, const char *def, char *buf, size_t n) {
    int present = 0;
    snprintf(buf, n, "%s", def);
    return ap_json_get_str(r->j, key, buf, n, &present, r->where, r->err);
}

/* kv heads from field kv_key of r (default def), dividing the heads (field heads_key) */
static ap_status kv_heads_of(rd *r, const char *kv_key, const char *heads_key, int64_t def,
                             ap_model *m) {
    TRY(opt_int(r, kv_key, 1, AP_MODEL_MAX_HEADS, def, &m->kv_heads));
    if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = %lld does not divide '%s' = "
                          "%lld", r->where, kv_key, (long long)m->kv_heads, heads_key,
                          (long long)m->heads);
    return AP_OK;
}

/* hidden, heads, kv heads and head_dim; `hd_key` NULL when the architecture has no head_dim
 * field, `kv_key` NULL when it has no kv heads field (kv = heads), `hd_default` used when the
 * head_dim field is absent (Gemma2: 256), 0 = hidden / heads. */
static ap_status dims(rd *r, const char *hidden_key, const char *heads_key, const char *kv_key,
                      const char *hd_key, int64_t hd_default, ap_model *m) {
    int present = 0;
    m->head_dim = 0;
    if (hd_key)
        TRY(ap_json_get_int(r->j, hd_key, 1, AP_MODEL_MAX_HEAD_DIM, &m->head_dim, &present,
                            r->where, r->err));
    if (!present && hd_default > 0) m->head_dim = hd_default;
    if (m->head_dim == 0) {
        if (m->hidden % m->heads != 0)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = %lld does not divide '%s' = "
                              "%lld%s", r->where, heads_key, (long long)m->heads, hidden_key,
                              (long long)m->hidden, hd_key ? " and no 'head_dim' is given" : "");
        m->head_dim = m->hidden / m->heads;
    }
    m->kv_heads = m->heads;
    return kv_key ? kv_heads_of(r, kv_key, heads_key, m->heads, m) : AP_OK;
}

/* Hidden size, layers and heads under the family's own names (head_dim = hidden / heads, kv =
 * heads): the start of the GPT-2, GPT-J and MosaicML readers. */
static ap_status mha_dims(rd *r, const char *hk, const char *lk, const char *ak, ap_model *m) {
    TRY(req_int(r, hk, 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, lk, 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, ak, 1, AP_MODEL_MAX_HEADS, &m->heads));
    return dims(r, hk, ak, NULL, NULL, 0, m);
}

/* max_position_embeddings (default `def`, 0 = none) -> max_positions and seq_len. */
static ap_status positions(rd *r, const char *key, int64_t def, ap_model *m) {
    m->max_positions = def;
    if (key) TRY(opt_int(r, key, 1, AP_MODEL_MAX_POSITIONS, def, &m->max_positions));
    int64_t s = m->max_positions > 0 ? m->max_positions : 2048;
    m->seq_len = s < HF_DEFAULT_SEQ ? s : HF_DEFAULT_SEQ;
    return AP_OK;
}

/* gelu-family names, relu and squared relu for the non-gated MLPs */
static ap_status plain_act(rd *r, const char *key, const char *def, ap_model *m) {
    char act[32];
    TRY(opt_str(r, key, def, act, sizeof act));
    char cb[48];
    if (!strcmp(act, "relu")) m->act = AP_ACT_RELU;
    else if (!strcmp(act, "relu2")) m->act = AP_ACT_RELU2; /* transformers ACT2FN: relu(x)^2 */
    else if (!strncmp(act, "gelu", 4)) m->act = AP_ACT_GELU;
    else
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not supported (gelu*, "
                          "relu, relu2)", r->where, key, ap_text_line(cb, sizeof cb, act, 40));
    return AP_OK;
}

/* ---- rotary and attention-pattern fields shared by the rotary families -------------------- */

/* rope_scaling's rope_type (or the legacy type; rope_type wins, as in transformers) into buf,
 * "" when neither is given. Only the rope types of transformers' modeling_rope_utils.py pass,
 * plus the legacy names older configs carry: Phi-3's "su" (now longrope) and Qwen2-VL's "mrope"
 * (read as default). A misspelt type would otherwise reach the trainer configs as a scaling
 * nobody implements. */
static ap_status rope_type_of(rd *r, const ap_json *rs, const char *w, char *buf, size_t n) {
    int given = 0, present = 0;
    buf[0] = '\0';
    TRY(ap_json_get_str(rs, "type", buf, n, &given, w, r->err));
    TRY(ap_json_get_str(rs, "rope_type", buf, n, &present, w, r->err));
    if (!given && !present) return AP_OK;
    static const char *const types[] = {"default", "linear", "dynamic", "yarn", "longrope",
                                        "llama3", "su", "mrope", NULL};
    for (const char *const *t = types; *t; t++)
        if (!strcmp(buf, *t)) return AP_OK;
    char cb[48];
    return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not supported (default, "
                      "linear, dynamic, yarn, longrope, llama3, su, mrope)", w,
                      present ? "rope_type" : "type", ap_text_line(cb, sizeof cb, buf, 40));
}

/* rope_theta (default `theta_def`), partial_rotary_factor and rope_scaling (Llama 3.x "llama3",
 * DeepSeek "yarn", Phi-3 "longrope", ...): no parameter count changes, but the trainer configs
 * must carry them (emit_megatron.c --rotary-base, --rope-scaling-factor). rope_scaling must be
 * null or an object whose rope_type/type is a known rope type and factor a positive number. */
static ap_status read_rope(rd *r, double theta_def, ap_model *m) {
    int present = 0;
    m->rope_theta = theta_def;
    TRY(ap_json_get_real(r->j, "rope_theta", 1e-6, 1e12, &m->rope_theta, &present, r->where,
                         r->err));
    m->rotary_pct = 1.0;
    TRY(ap_json_get_real(r->j, "partial_rotary_factor", 1e-6, 1.0, &m->rotary_pct, &present,
                         r->where, r->err));
    ap_json *rs = ap_json_get(r->j, "rope_scaling");
    if (!rs || ap_json_is_null(rs)) return AP_OK;
    if (!ap_json_is_object(rs))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'rope_scaling' must be an object or "
                          "null, got %s", r->where, ap_json_type_name(rs));
    char w[256], buf[64];
    snprintf(w, sizeof w, "%s: rope_scaling", r->where);
    TRY(rope_type_of(r, rs, w, buf, sizeof buf));
    snprintf(m->rope_scaling, sizeof m->rope_scaling, "%.15s", buf[0] ? buf : "linear");
    double f = 0;
    TRY(ap_json_get_real(rs, "factor", 1e-6, 1e6, &f, &present, w, r->err));
    m->rope_factor = f;
    TRY(ap_json_get_int(rs, "original_max_position_embeddings", 1, AP_MODEL_MAX_POSITIONS,
                        &m->rope_orig_positions, &present, w, r->err));
    return AP_OK;
}

/* Keep the pre-existing name for the families that only validate rope_scaling. */
static ap_status check_rope_scaling(rd *r) {
    ap_model tmp;
    ap_model_init(&tmp);
    return read_rope(r, 0, &tmp);
}

/* The layer pattern of local attention. `layer_types` (transformers >= 4.53: "sliding_attention"
 * / "full_attention" / "chunked_attention" per layer), when present, must be periodic with the
 * global layer last in each period (or all local / all global); it overrides `period_def`.
 * `window` 0 = no local layers. A window at least max_positions is no window at all (Phi-3.5's
 * 262144 with 131072 positions). */
static ap_status read_layer_types(rd *r, int64_t window, int64_t period_def, ap_model *m) {
    m->window = window;
    m->window_period = period_def;
    ap_json *lt = ap_json_get(r->j, "layer_types");
    if (lt && !ap_json_is_null(lt)) {
        if (!ap_json_is_array(lt) || ap_json_size(lt) != (int)m->layers)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'layer_types' must be an array of "
                              "%lld strings (one per layer)", r->where, (long long)m->layers);
        int64_t first_global = -1, nglobal = 0;
        for (int i = 0; i < (int)m->layers; i++) {
            const char *t = ap_json_string(ap_json_at(lt, i));
            if (!t || (strcmp(t, "sliding_attention") && strcmp(t, "full_attention") &&
                       strcmp(t, "chunked_attention")))
                return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'layer_types'[%d] must be "
                                  "\"sliding_attention\", \"chunked_attention\" or "
                                  "\"full_attention\"", r->where, i);
            if (!strcmp(t, "full_attention")) {
                if (first_global < 0) first_global = i;
                nglobal++;
            }
        }
        if (nglobal == m->layers || window <= 0) {
            m->window = 0;
            m->window_period = 0;
        } else {
            m->window_period = nglobal == 0 ? 0 : first_global + 1;
            for (int i = 0; i < (int)m->layers; i++) {
                const char *t = ap_json_string(ap_json_at(lt, i));
                int global = !strcmp(t, "full_attention");
                if (global != (!ap_model_layer_is_local(m, i)))
                    return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'layer_types': only a "
                                      "periodic pattern with the full-attention layer last in "
                                      "each period is supported (layer %d breaks period %lld)",
                                      r->where, i, (long long)m->window_period);
            }
        }
    }
    if (m->window > 0 && m->max_positions > 0 && m->window >= m->max_positions) {
        m->window = 0;
        m->window_period = 0;
    }
    return AP_OK;
}

/* ---- Llama family: llama, mistral, mixtral, qwen2/2-moe/3/3-moe, gemma/2/3, phi3, phimoe, olmo2,
 * internlm2, cohere, starcoder2, stablelm, minicpm, deepseek (MoE 16B), llama4, gpt_oss ------- */

typedef enum {
    LL_LLAMA, LL_MISTRAL, LL_MIXTRAL, LL_QWEN2, LL_QWEN2_MOE, LL_GEMMA2, LL_QWEN3, LL_QWEN3_MOE,
    LL_PHI3, LL_PHIMOE, LL_GEMMA, LL_GEMMA3, LL_OLMO2, LL_INTERNLM2, LL_COHERE, LL_STARCODER2,
    LL_STABLELM, LL_MINICPM, LL_DEEPSEEK, LL_LLAMA4, LL_GPT_OSS, LL_NEMOTRON
} ll_kind;

/* What differs between the members of the family: the transformers configuration class's
 * defaults (configuration_<type>.py) and the modeling file's fixed choices. */
typedef struct {
    int64_t maxpos;      /* max_position_embeddings default */
    int64_t head_dim;    /* head_dim default when the field is absent (0 = hidden / heads) */
    const char *act;     /* hidden_act default */
    int gated;           /* gate/up/down MLP (else fc1/fc2) */
    int tied;            /* tie_word_embeddings default */
    double theta;        /* rope_theta default */
} ll_traits;

static ll_traits traits_of(ll_kind k) {
    ll_traits t = {2048, 0, "silu", 1, 0, 10000.0};
    switch (k) {
    case LL_MISTRAL: case LL_MIXTRAL: t.maxpos = 4096 * 32; t.theta = k == LL_MIXTRAL ? 1e6 : 1e4;
        break;
    case LL_QWEN2: case LL_QWEN2_MOE: t.maxpos = 32768; break;
    case LL_QWEN3: case LL_QWEN3_MOE: t.maxpos = 32768; t.head_dim = 128; break;
    case LL_GEMMA: t.maxpos = 8192; t.head_dim = 256; t.act = "gelu_pytorch_tanh"; t.tied = 1;
        break;
    case LL_GEMMA2: t.maxpos = 8192; t.head_dim = 256; t.act = "gelu_pytorch_tanh"; t.tied = 1;
        break;
    case LL_GEMMA3: t.maxpos = 131072; t.head_dim = 256; t.act = "gelu_pytorch_tanh"; t.tied = 1;
        t.theta = 1e6; break;
    case LL_PHI3: t.maxpos = 4096; break;
    case LL_PHIMOE: t.maxpos = 4096 * 32; t.theta = 1e6; break;
    case LL_COHERE: t.maxpos = 8192; t.tied = 1; break;
    case LL_STARCODER2: t.maxpos = 4096; t.act = "gelu_pytorch_tanh"; t.gated = 0; t.tied = 1;
        break;
    case LL_STABLELM: t.maxpos = 4096; break;
    case LL_MINICPM: t.tied = 1; break;
    case LL_LLAMA4: t.maxpos = 4096 * 32; t.head_dim = 128; t.theta = 500000.0; break;
    case LL_GPT_OSS: t.maxpos = 131072; t.head_dim = 64; t.theta = 150000.0; break;
    case LL_NEMOTRON: t.maxpos = 4096; t.act = "relu2"; t.gated = 0; break;
    default: break;
    }
    return t;
}

/* No experts (`experts_given`: the field says 0; else its default is 0) is a dense model only
 * when `topk_key` asks for none either (absent, null or 0). With top-k > 0 the file means a MoE
 * whose expert count is missing or wrong: transformers would build a router over zero experts,
 * and reading it as dense would silently count a different model. */
static ap_status no_experts_no_topk(rd *r, const char *experts_key, int experts_given,
                                    const char *topk_key) {
    int64_t k = 0;
    TRY(opt_int(r, topk_key, 0, AP_MODEL_MAX_EXPERTS, 0, &k));
    if (k > 0)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' %s but '%s' = %lld (a dense "
                          "model routes to no experts: give the experts or drop '%s')", r->where,
                          experts_key, experts_given ? "= 0" : "is absent (0 experts)", topk_key,
                          (long long)k, topk_key);
    return AP_OK;
}

/* Mixtral / PhiMoE / MiniCPM-MoE / gpt-oss: num_local_experts (MiniCPM: num_experts) experts of
 * intermediate_size, num_experts_per_tok active, every layer MoE (modeling_mixtral.py
 * MixtralBlockSparseTop2MLP, modeling_phimoe.py, MiniCPM-MoE modeling_minicpm.py). */
static ap_status moe_every_layer(rd *r, const char *experts_key, int64_t experts_def,
                                 int64_t topk_def, ap_model *m) {
    int given = 0;
    m->moe.experts = experts_def;
    TRY(ap_json_get_int(r->j, experts_key, 0, AP_MODEL_MAX_EXPERTS, &m->moe.experts, &given,
                        r->where, r->err));
    if (m->moe.experts == 0)
        return no_experts_no_topk(r, experts_key, given, "num_experts_per_tok");
    TRY(opt_int(r, "num_experts_per_tok", 1, m->moe.experts, topk_def, &m->moe.top_k));
    m->moe.ffn_hidden = m->ffn_hidden;
    return AP_OK;
}

/* A leading run [0, 1, ..., n-1] of dense layers (Qwen2-MoE / Qwen3-MoE mlp_only_layers). */
static ap_status mlp_only_layers(rd *r, int64_t step, ap_moe *e, int64_t layers) {
    ap_json *only = ap_json_get(r->j, "mlp_only_layers");
    if (!only || ap_json_is_null(only)) return AP_OK;
    if (!ap_json_is_array(only))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'mlp_only_layers' must be an array "
                          "of layer indices, got %s", r->where, ap_json_type_name(only));
    int n = ap_json_size(only);
    for (int i = 0; i < n; i++) {
        ap_json *v = ap_json_at(only, i);
        if (!ap_json_is_number(v) || ap_json_number(v) != (double)i)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'mlp_only_layers': only a "
                              "leading run [0, 1, ..., n-1] of dense layers is supported "
                              "(element %d)", r->where, i);
    }
    if (n > 0 && step != 1)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'mlp_only_layers' together with "
                          "'decoder_sparse_step' = %lld is not supported", r->where,
                          (long long)step);
    if (n > layers)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'mlp_only_layers' lists %d layers, "
                          "the model has %lld", r->where, n, (long long)layers);
    if (n > 0) e->first_dense_layers = n;
    return AP_OK;
}

static ap_status moe_qwen(rd *r, ap_model *m, int qwen3) {
    /* Qwen2MoeConfig defaults: num_experts 60, num_experts_per_tok 4, moe_intermediate_size 1408,
     * shared_expert_intermediate_size 5632; Qwen3MoeConfig: 128, 8, 768 and no shared expert.
     * Both: decoder_sparse_step 1, mlp_only_layers []. A layer is MoE when it is not in
     * mlp_only_layers and (i + 1) % decoder_sparse_step == 0 (modeling_qwen2_moe.py /
     * modeling_qwen3_moe.py DecoderLayer). Qwen2-MoE's shared expert has a sigmoid gate h->1. */
    ap_moe *e = &m->moe;
    TRY(opt_int(r, "num_experts", 0, AP_MODEL_MAX_EXPERTS, qwen3 ? 128 : 60, &e->experts));
    if (e->experts == 0) return AP_OK;
    TRY(opt_int(r, "num_experts_per_tok", 1, e->experts, qwen3 ? 8 : 4, &e->top_k));
    TRY(opt_int(r, "moe_intermediate_size", 1, AP_MODEL_MAX_FFN, qwen3 ? 768 : 1408,
                &e->ffn_hidden));
    if (!qwen3) {
        TRY(opt_int(r, "shared_expert_intermediate_size", 0, AP_MODEL_MAX_FFN, 5632,
                    &e->shared_ffn_hidden));
        e->shared_experts = e->shared_ffn_hidden > 0 ? 1 : 0;
        e->shared_expert_gate = e->shared_experts;
    }
    int64_t step = 1;
    TRY(opt_int(r, "decoder_sparse_step", 1, m->layers, 1, &step));
    e->first_dense_layers = step - 1;
    e->layer_freq = step;
    return mlp_only_layers(r, step, e, m->layers);
}

/* DeepSeek MoE (deepseek, deepseek_v2, deepseek_v3): n_routed_experts of moe_intermediate_size,
 * n_shared_experts of the same width, first_k_dense_replace dense layers, then every
 * moe_layer_freq-th layer (i % freq == 0). Absent fields mean what DeepSeek's own
 * configuration_deepseek.py says (no n_routed_experts = dense). The router scores with
 * scoring_func (V3 sigmoid, V2 / MoE-16B softmax) and, for topk_method "noaux_tc" (V3), adds
 * e_score_correction_bias (E). */
static ap_status moe_deepseek(rd *r, ap_model *m, int v3) {
    ap_moe *e = &m->moe;
    int given = 0;
    TRY(ap_json_get_int(r->j, "n_routed_experts", 0, AP_MODEL_MAX_EXPERTS, &e->experts, &given,
                        r->where, r->err));
    /* null: a dense model, unless the routing says otherwise (modeling_deepseek.py builds a
       MoE layer whenever n_routed_experts is not None) */
    if (e->experts == 0)
        return no_experts_no_topk(r, "n_routed_experts", given, "num_experts_per_tok");
    TRY(req_int(r, "num_experts_per_tok", 1, e->experts, &e->top_k));
    TRY(req_int(r, "moe_intermediate_size", 1, AP_MODEL_MAX_FFN, &e->ffn_hidden));
    TRY(opt_int(r, "n_shared_experts", 0, 1024, 0, &e->shared_experts));
    e->shared_ffn_hidden = e->shared_experts * e->ffn_hidden;
    int64_t fd = 0, freq = 1;
    TRY(opt_int(r, "first_k_dense_replace", 0, m->layers, 0, &fd));
    TRY(opt_int(r, "moe_layer_freq", 1, m->layers, 1, &freq));
    /* i >= fd and i % freq == 0  <=>  i >= ceil(fd/freq)*freq and (i - that) % freq == 0 */
    e->first_dense_layers = (fd + freq - 1) / freq * freq;
    if (e->first_dense_layers > m->layers) e->first_dense_layers = m->layers;
    e->layer_freq = freq;
    char sf[32], tm[32], cb[48];
    TRY(opt_str(r, "scoring_func", v3 ? "sigmoid" : "softmax", sf, sizeof sf));
    TRY(opt_str(r, "topk_method", v3 ? "noaux_tc" : "greedy", tm, sizeof tm));
    if (!strcmp(sf, "sigmoid")) m->router_act = AP_ROUTER_SIGMOID;
    else if (!strcmp(sf, "softmax")) m->router_act = AP_ROUTER_SOFTMAX;
    else
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'scoring_func' = '%s' is not supported "
                          "(softmax, sigmoid)", r->where, ap_text_line(cb, sizeof cb, sf, 40));
    e->router_bias = !strcmp(tm, "noaux_tc");
    return AP_OK;
}

/* Llama4: num_local_experts routed experts of intermediate_size plus one shared expert of the
 * same width in MoE layers, dense layers of intermediate_size_mlp; the MoE layers are
 * `moe_layers` or every interleave_moe_layer_step-th layer ending each step
 * (configuration_llama4.py: range(step - 1, L, step)); sigmoid router, top-1. */
static ap_status moe_llama4(rd *r, ap_model *m) {
    ap_moe *e = &m->moe;
    int64_t expert_ffn = m->ffn_hidden;
    TRY(opt_int(r, "intermediate_size_mlp", 1, AP_MODEL_MAX_FFN, 16384, &m->ffn_hidden));
    TRY(opt_int(r, "num_local_experts", 0, AP_MODEL_MAX_EXPERTS, 16, &e->experts));
    if (e->experts == 0)
        return no_experts_no_topk(r, "num_local_experts", 1, "num_experts_per_tok");
    TRY(opt_int(r, "num_experts_per_tok", 1, e->experts, 1, &e->top_k));
    e->ffn_hidden = expert_ffn;
    e->shared_experts = 1;
    e->shared_ffn_hidden = expert_ffn;
    m->router_act = AP_ROUTER_SIGMOID;
    int64_t step = 1;
    TRY(opt_int(r, "interleave_moe_layer_step", 1, m->layers, 1, &step));
    e->first_dense_layers = step - 1;
    e->layer_freq = step;
    ap_json *ml = ap_json_get(r->j, "moe_layers");
    if (ml && !ap_json_is_null(ml)) {
        if (!ap_json_is_array(ml))
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'moe_layers' must be an array of "
                              "layer indices", r->where);
        int n = ap_json_size(ml);
        int64_t first = n > 0 ? (int64_t)ap_json_number(ap_json_at(ml, 0)) : m->layers;
        int64_t freq = n > 1 ? (int64_t)ap_json_number(ap_json_at(ml, 1)) - first : 1;
        if (n == 0 || first < 0 || freq < 1) {
            e->experts = 0; /* no MoE layer */
            return n == 0 ? AP_OK : ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'moe_layers' "
                                               "must list increasing layer indices", r->where);
        }
        e->first_dense_layers = first;
        e->layer_freq = freq;
        for (int i = 0; i < n; i++) {
            ap_json *v = ap_json_at(ml, i);
            if (!ap_json_is_number(v) || ap_json_number(v) != (double)(first + i * freq) ||
                first + i * freq >= m->layers)
                return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'moe_layers': only evenly "
                                  "spaced MoE layers up to the last layer are supported (element "
                                  "%d)", r->where, i);
        }
        if (first + n * freq < m->layers)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'moe_layers' stops before the last "
                              "layers: not supported", r->where);
    }
    return AP_OK;
}

/* Llama4's chunked attention: layers with rope attend within attention_chunk_size chunks, the
 * NoPE layers (no_rope_layers[i] == 0, default every no_rope_layer_interval-th) see the whole
 * sequence. */
static ap_status attn_llama4(rd *r, ap_model *m) {
    int64_t chunk = 8192, interval = 4;
    TRY(opt_int(r, "attention_chunk_size", 1, AP_MODEL_MAX_POSITIONS, 8192, &chunk));
    TRY(opt_int(r, "no_rope_layer_interval", 1, m->layers, 4, &interval));
    m->window = chunk;
    m->window_period = interval;
    m->window_chunked = 1;
    m->nope_global = 1;
    ap_json *nr = ap_json_get(r->j, "no_rope_layers");
    if (nr && !ap_json_is_null(nr) && ap_json_size(nr) > 0) {
        if (!ap_json_is_array(nr) || ap_json_size(nr) != (int)m->layers)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'no_rope_layers' must list one 0/1 "
                              "per layer", r->where);
        for (int i = 0; i < (int)m->layers; i++) {
            ap_json *v = ap_json_at(nr, i);
            int rope = ap_json_is_number(v) ? ap_json_number(v) != 0 : ap_json_bool(v);
            if (rope != ap_model_layer_is_local(m, i))
                return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'no_rope_layers': only every "
                                  "%lld-th layer without rope is supported (layer %d)", r->where,
                                  (long long)interval, i);
        }
    }
    int qkn = 1;
    TRY(opt_bool(r, "use_qk_norm", 1, &qkn));
    m->qk_norm = qkn ? AP_QKNORM_L2 : AP_QKNORM_NONE;
    return AP_OK;
}

/* Sliding-window attention of the Mistral / Qwen / Gemma / gpt-oss configurations. */
static ap_status attn_window(rd *r, ll_kind kind, ap_model *m) {
    int64_t w = 0, period = 0;
    int present = 0;
    switch (kind) {
    case LL_MISTRAL: case LL_MIXTRAL: case LL_PHI3: case LL_PHIMOE: case LL_STARCODER2:
        /* every layer (MistralConfig sliding_window 4096, null = none; Starcoder2 4096) */
        TRY(opt_int(r, "sliding_window", 1, AP_MODEL_MAX_POSITIONS,
                    kind == LL_STARCODER2 ? 4096 : kind == LL_MISTRAL ? 4096 : 0, &w));
        break;
    case LL_QWEN2: case LL_QWEN2_MOE: case LL_QWEN3: case LL_QWEN3_MOE: {
        int use = 0;
        TRY(opt_bool(r, "use_sliding_window", 0, &use));
        if (use) {
            int64_t mwl = 0;
            TRY(opt_int(r, "sliding_window", 1, AP_MODEL_MAX_POSITIONS, 4096, &w));
            TRY(opt_int(r, "max_window_layers", 0, AP_MODEL_MAX_LAYERS, 28, &mwl));
            /* layers i >= max_window_layers slide (configuration_qwen2.py layer_types) */
            if (mwl >= m->layers) w = 0;
            else if (mwl > 0)
                return ap_err_set(r->err, AP_ERR_INPUT, "%s: 'use_sliding_window' with "
                                  "'max_window_layers' = %lld below the %lld layers is not "
                                  "supported (only all or no layers sliding)", r->where,
                                  (long long)mwl, (long long)m->layers);
        }
        break;
    }
    case LL_GEMMA2:
        /* Gemma2Config: sliding_window 4096 on even layers (period 2) */
        TRY(opt_int(r, "sliding_window", 1, AP_MODEL_MAX_POSITIONS, 4096, &w));
        period = 2;
        break;
    case LL_GEMMA3:
        /* Gemma3TextConfig: sliding_window 4096, sliding_window_pattern 6 (5 local : 1 global) */
        TRY(opt_int(r, "sliding_window", 1, AP_MODEL_MAX_POSITIONS, 4096, &w));
        TRY(ap_json_get_int(r->j, "sliding_window_pattern", 1, AP_MODEL_MAX_LAYERS, &period,
                            &present, r->where, r->err));
        if (!present) period = 6;
        break;
    case LL_GPT_OSS:
        /* GptOssConfig: sliding_window 128 on alternating layers, starting with a local one */
        TRY(opt_int(r, "sliding_window", 1, AP_MODEL_MAX_POSITIONS, 128, &w));
        period = 2;
        break;
    case LL_COHERE: case LL_OLMO2: case LL_LLAMA: case LL_GEMMA: case LL_INTERNLM2:
    case LL_STABLELM: case LL_MINICPM: case LL_DEEPSEEK: case LL_NEMOTRON:
        break;
    case LL_LLAMA4:
        return attn_llama4(r, m);
    }
    return read_layer_types(r, w, period, m);
}

/* A gated MLP's activation from its name: SiLU (SwiGLU) or GELU (GeGLU). */
static ap_status gated_act(rd *r, const char *field, const char *act, ap_model *m) {
    char cb[48];
    m->act = AP_ACT_SWIGLU;
    if (!strcmp(act, "silu") || !strcmp(act, "swish")) m->gate_act = AP_GATE_SILU;
    else if (!strncmp(act, "gelu", 4)) m->gate_act = AP_GATE_GELU;
    else
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not supported for a "
                          "gated MLP (silu, gelu*)", r->where, field,
                          ap_text_line(cb, sizeof cb, act, 40));
    return AP_OK;
}

/* The shape, vocabulary, positions, rotary base, MLP activation, tying, dropout and attention
 * window of a Llama-family config. */
static ap_status ll_core(rd *r, ap_model *m, ll_kind kind) {
    ll_traits t = traits_of(kind);
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             t.head_dim, m));
    /* MoE-only configurations may leave the dense width out (Qwen3-MoE keeps it) */
    TRY(req_int(r, "intermediate_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    /* Gemma3TextConfig vocab_size 262208: the text_config of gemma-3-4b/12b/27b leaves it out */
    if (kind == LL_GEMMA3) TRY(opt_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, 262208, &m->vocab));
    else TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "max_position_embeddings", t.maxpos, m));
    TRY(read_rope(r, t.theta, m));
    /* NemotronConfig partial_rotary_factor 0.5 (read_rope's default is the whole head) */
    if (kind == LL_NEMOTRON && !ap_json_is_number(ap_json_get(r->j, "partial_rotary_factor")))
        m->rotary_pct = 0.5;
    char act[32];
    /* Gemma (v1) names it hidden_activation in newer configs; hidden_act in the first ones */
    TRY(opt_str(r, "hidden_act", t.act, act, sizeof act));
    if (kind == LL_GEMMA || kind == LL_GEMMA2 || kind == LL_GEMMA3) {
        char act2[32];
        TRY(opt_str(r, "hidden_activation", act, act2, sizeof act2));
        snprintf(act, sizeof act, "%s", act2);
    }
    if (t.gated) {
        /* gate_proj, up_proj, down_proj whatever hidden_act is: SwiGLU for silu, GeGLU for
         * Gemma's gelu_pytorch_tanh (Shazeer 2020) */
        TRY(gated_act(r, "hidden_act", act, m));
        if (kind == LL_GPT_OSS) m->gate_act = AP_GATE_SWIGLU_OAI;
    } else {
        TRY(plain_act(r, "hidden_act", t.act, m));
    }
    m->norm = AP_NORM_RMSNORM;
    m->pos = AP_POS_ROTARY;
    TRY(opt_bool(r, "tie_word_embeddings", t.tied, &m->tied_embeddings));
    static const char *const drop[] = {"attention_dropout", NULL};
    TRY(dropout_of(r, drop, 0.0, &m->dropout));
    TRY(attn_window(r, kind, m));
    return AP_OK;
}

/* Which linear layers carry biases, per family (each family's modeling_*.py). */
static ap_status ll_biases(rd *r, ap_model *m, ll_kind kind) {
    int attn_bias = 0, mlp_bias = 0;
    switch (kind) {
    case LL_LLAMA: case LL_NEMOTRON:
        TRY(opt_bool(r, "attention_bias", 0, &attn_bias));
        TRY(opt_bool(r, "mlp_bias", 0, &mlp_bias));
        break;
    case LL_INTERNLM2: /* InternLM2Config bias = True: wqkv and wo only */
        TRY(opt_bool(r, "bias", 1, &attn_bias));
        break;
    case LL_STARCODER2: /* use_bias: every linear layer */
        TRY(opt_bool(r, "use_bias", 1, &attn_bias));
        mlp_bias = attn_bias;
        break;
    case LL_GPT_OSS: /* q,k,v,o biases (attention_bias True), expert biases always */
        TRY(opt_bool(r, "attention_bias", 1, &attn_bias));
        mlp_bias = 1;
        break;
    case LL_GEMMA: case LL_GEMMA2: case LL_GEMMA3: case LL_QWEN3: case LL_QWEN3_MOE:
    case LL_OLMO2: case LL_COHERE: case LL_PHI3: case LL_PHIMOE: case LL_MINICPM:
    case LL_DEEPSEEK: case LL_LLAMA4:
        TRY(opt_bool(r, "attention_bias", 0, &attn_bias));
        break;
    default: break;
    }
    m->bias = attn_bias && mlp_bias;
    m->attn_bias = attn_bias && !mlp_bias;
    m->mlp_bias = mlp_bias && !attn_bias;
    /* Qwen2 / Qwen2-MoE: q, k, v projections have biases, o_proj none (modeling_qwen2.py);
     * StableLM use_qkv_bias (default False) */
    if (kind == LL_QWEN2 || kind == LL_QWEN2_MOE) m->qkv_bias = 1;
    if (kind == LL_STABLELM) TRY(opt_bool(r, "use_qkv_bias", 0, &m->qkv_bias));
    return AP_OK;
}

/* The norms of a layer (count, kind, order, q/k norms) and the other per-family extras:
 * logit soft-capping, LM-head bias, attention sinks. */
static ap_status ll_norms(rd *r, ap_model *m, ll_kind kind) {
    m->norms_per_layer = 2;
    switch (kind) {
    case LL_GEMMA2: case LL_GEMMA3:
        /* input, post-attention, pre- and post-feedforward RMSNorms (modeling_gemma2.py) */
        m->norms_per_layer = 4;
        m->norm_order = AP_NORM_SANDWICH;
        m->gate_act = AP_GATE_GELU;
        break;
    case LL_OLMO2: /* post_attention_layernorm, post_feedforward_layernorm inside the residual */
        m->norm_order = AP_NORM_POST;
        m->qk_norm = AP_QKNORM_FULL;
        break;
    case LL_PHIMOE: case LL_STARCODER2: case LL_STABLELM:
        m->norm = AP_NORM_LAYERNORM; /* nn.LayerNorm with bias */
        break;
    case LL_COHERE: { /* one CohereLayerNorm (no bias) feeding attention and MLP in parallel */
        m->norm = AP_NORM_LAYERNORM;
        m->norm_no_bias = 1;
        m->norms_per_layer = 1;
        m->parallel_attn = 1;
        int qkn = 0;
        TRY(opt_bool(r, "use_qk_norm", 0, &qkn));
        m->qk_norm = qkn ? AP_QKNORM_FULL : AP_QKNORM_NONE;
        break;
    }
    case LL_QWEN3: case LL_QWEN3_MOE: m->qk_norm = AP_QKNORM_HEAD; break;
    case LL_NEMOTRON: /* NemotronLayerNorm1P: a LayerNorm with bias whose weight is gamma - 1 */
        m->norm = AP_NORM_LAYERNORM;
        m->norm_1p = 1;
        break;
    default: break;
    }
    if (kind == LL_GEMMA3) m->qk_norm = AP_QKNORM_HEAD;
    if (kind == LL_STABLELM) {
        int qkl = 0, par = 0;
        TRY(opt_bool(r, "qk_layernorm", 0, &qkl));
        TRY(opt_bool(r, "use_parallel_residual", 0, &par));
        /* StableLmLayerNormPerHead: a bias-free LayerNorm of head_dim per head = (a + kv) d */
        if (qkl) m->qk_norm = AP_QKNORM_FULL;
        if (par) {
            m->parallel_attn = 1;
            m->norms_per_layer = 1;
        }
    }
    if (kind == LL_GEMMA2) {
        /* Gemma2Config: attn_logit_softcapping 50, final_logit_softcapping 30 (null = none) */
        m->attn_softcap = 50.0;
        m->final_softcap = 30.0;
    }
    if (kind == LL_GEMMA2 || kind == LL_GEMMA3) {
        int present = 0;
        ap_json *v = ap_json_get(r->j, "attn_logit_softcapping");
        if (v && ap_json_is_null(v)) m->attn_softcap = 0;
        v = ap_json_get(r->j, "final_logit_softcapping");
        if (v && ap_json_is_null(v)) m->final_softcap = 0;
        TRY(ap_json_get_real(r->j, "attn_logit_softcapping", 0, 1e9, &m->attn_softcap, &present,
                             r->where, r->err));
        TRY(ap_json_get_real(r->j, "final_logit_softcapping", 0, 1e9, &m->final_softcap,
                             &present, r->where, r->err));
    }
    if (kind == LL_PHIMOE) TRY(opt_bool(r, "lm_head_bias", 0, &m->lm_head_bias));
    if (kind == LL_GPT_OSS) {
        m->attn_sinks = 1;
        m->router_linear_bias = 1;
    }
    return AP_OK;
}

/* gpt-oss config.json files carry the top-k twice, num_experts_per_tok and experts_per_token.
 * Either alone is the top-k; when both are given they must agree, since which one a training
 * framework reads is its own choice and a silent pick would count a different model. */
static ap_status moe_gpt_oss(rd *r, ap_model *m) {
    TRY(moe_every_layer(r, "num_local_experts", 128, 4, m));
    if (m->moe.experts == 0)
        return no_experts_no_topk(r, "num_local_experts", 1, "experts_per_token");
    int64_t k = m->moe.top_k;
    int present = 0;
    TRY(ap_json_get_int(r->j, "experts_per_token", 1, m->moe.experts, &m->moe.top_k, &present,
                        r->where, r->err));
    ap_json *nk = ap_json_get(r->j, "num_experts_per_tok");
    if (present && nk && !ap_json_is_null(nk) && m->moe.top_k != k)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'experts_per_token' = %lld differs "
                          "from 'num_experts_per_tok' = %lld (both give the experts per token)",
                          r->where, (long long)m->moe.top_k, (long long)k);
    return AP_OK;
}

/* The mixture-of-experts block, per family. */
static ap_status ll_experts(rd *r, ap_model *m, ll_kind kind) {
    switch (kind) {
    case LL_MIXTRAL: TRY(moe_every_layer(r, "num_local_experts", 8, 2, m)); break;
    case LL_PHIMOE: TRY(moe_every_layer(r, "num_local_experts", 16, 2, m)); break;
    case LL_MINICPM: TRY(moe_every_layer(r, "num_experts", 0, 2, m)); break;
    case LL_GPT_OSS: TRY(moe_gpt_oss(r, m)); break;
    case LL_QWEN2_MOE: TRY(moe_qwen(r, m, 0)); break;
    case LL_QWEN3_MOE: TRY(moe_qwen(r, m, 1)); break;
    case LL_DEEPSEEK: TRY(moe_deepseek(r, m, 0)); break;
    case LL_LLAMA4: TRY(moe_llama4(r, m)); break;
    default: break;
    }
    return AP_OK;
}

static ap_status read_llama_family(rd *r, ap_model *m, ll_kind kind) {
    TRY(ll_core(r, m, kind));
    TRY(ll_biases(r, m, kind));
    TRY(ll_norms(r, m, kind));
    TRY(ll_experts(r, m, kind));
    return AP_OK;
}

static ap_status rd_llama(rd *r, ap_model *m) { return read_llama_family(r, m, LL_LLAMA); }
static ap_status rd_mistral(rd *r, ap_model *m) { return read_llama_family(r, m, LL_MISTRAL); }
static ap_status rd_mixtral(rd *r, ap_model *m) { return read_llama_family(r, m, LL_MIXTRAL); }
static ap_status rd_qwen2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN2); }
static ap_status rd_qwen2_moe(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN2_MOE); }
static ap_status rd_gemma2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_GEMMA2); }
static ap_status rd_qwen3(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN3); }
static ap_status rd_qwen3_moe(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN3_MOE); }
static ap_status rd_phi3(rd *r, ap_model *m) { return read_llama_family(r, m, LL_PHI3); }
static ap_status rd_phimoe(rd *r, ap_model *m) { return read_llama_family(r, m, LL_PHIMOE); }
static ap_status rd_gemma(rd *r, ap_model *m) { return read_llama_family(r, m, LL_GEMMA); }
static ap_status rd_gemma3(rd *r, ap_model *m) { return read_llama_family(r, m, LL_GEMMA3); }
static ap_status rd_olmo2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_OLMO2); }
static ap_status rd_internlm2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_INTERNLM2); }
static ap_status rd_cohere(rd *r, ap_model *m) { return read_llama_family(r, m, LL_COHERE); }
static ap_status rd_starcoder2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_STARCODER2); }
static ap_status rd_stablelm(rd *r, ap_model *m) { return read_llama_family(r, m, LL_STABLELM); }
static ap_status rd_minicpm(rd *r, ap_model *m) { return read_llama_family(r, m, LL_MINICPM); }
static ap_status rd_deepseek(rd *r, ap_model *m) { return read_llama_family(r, m, LL_DEEPSEEK); }
static ap_status rd_llama4(rd *r, ap_model *m) { return read_llama_family(r, m, LL_LLAMA4); }
static ap_status rd_gpt_oss(rd *r, ap_model *m) { return read_llama_family(r, m, LL_GPT_OSS); }
/* Nemotron-4 / Minitron (modeling_nemotron.py): up_proj, squared ReLU, down_proj (no gate);
 * LayerNorm1P; partial rotary; untied */
static ap_status rd_nemotron(rd *r, ap_model *m) { return read_llama_family(r, m, LL_NEMOTRON); }

/* ---- gpt2 ------------------------------------------------------------------------------------ */

static ap_status rd_gpt2(rd *r, ap_model *m) {
    /* modeling_gpt2.py: wte V*h, wpe n_positions*h, per block ln_1, c_attn h->3h, c_proj h->h,
     * ln_2, c_fc h->n_inner, c_proj n_inner->h, all with biases; ln_f; lm_head tied to wte. */
    TRY(mha_dims(r, "n_embd", "n_layer", "n_head", m));
    TRY(opt_int(r, "n_inner", 1, AP_MODEL_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "n_positions", 1024, m));
    m->learned_pos = m->max_positions;
    m->pos = AP_POS_LEARNED;
    TRY(plain_act(r, "activation_function", "gelu_new", m));
    m->norm = AP_NORM_LAYERNORM;
    m->bias = 1;
    TRY(opt_bool(r, "tie_word_embeddings", 1, &m->tied_embeddings));
    static const char *const drop[] = {"resid_pdrop", "embd_pdrop", "attn_pdrop", NULL};
    return dropout_of(r, drop, 0.1, &m->dropout);
}

/* ---- opt ------------------------------------------------------------------------------------- */

static ap_status rd_opt(rd *r, ap_model *m) {
    /* modeling_opt.py: embed_tokens V*word_embed_proj_dim, embed_positions (max_pos + 2)*h
     * (OPTLearnedPositionalEmbedding keeps an offset of 2), per layer q,k,v,out_proj, fc1, fc2
     * with biases (enable_bias), self_attn_layer_norm and final_layer_norm; a final_layer_norm
     * when do_layer_norm_before; lm_head tied. */
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", NULL, NULL, 0, m));
    TRY(req_int(r, "ffn_dim", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "max_position_embeddings", 2048, m));
    m->learned_pos = m->max_positions + 2;
    m->pos = AP_POS_LEARNED;
    int64_t proj = m->hidden;
    TRY(opt_int(r, "word_embed_proj_dim", 1, AP_MODEL_MAX_HIDDEN, m->hidden, &proj));
    if (proj != m->hidden)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'word_embed_proj_dim' = %lld differs "
                          "from 'hidden_size' = %lld (OPT-350m style projection): not supported",
                          r->where, (long long)proj, (long long)m->hidden);
    int before = 1, remove_final = 0, affine = 1;
    TRY(opt_bool(r, "do_layer_norm_before", 1, &before));
    TRY(opt_bool(r, "_remove_final_layer_norm", 0, &remove_final));
    TRY(opt_bool(r, "layer_norm_elementwise_affine", 1, &affine));
    if (!affine)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'layer_norm_elementwise_affine' = false "
                          "is not supported", r->where);
    m->final_norm = before && !remove_final;
    TRY(opt_bool(r, "enable_bias", 1, &m->bias));
    TRY(plain_act(r, "activation_function", "relu", m));
    m->norm = AP_NORM_LAYERNORM;
    TRY(opt_bool(r, "tie_word_embeddings", 1, &m->tied_embeddings));
    static const char *const drop[] = {"dropout", "attention_dropout", NULL};
    return dropout_of(r, drop, 0.1, &m->dropout);
}

/* hidden_size, num_hidden_layers, num_attention_heads (head_dim = hidden / heads, kv = heads),
 * intermediate_size, vocab_size: the core of the MHA configurations (gpt_neox, baichuan). */
static ap_status mha_sizes(rd *r, ap_model *m) {
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", NULL, NULL, 0, m));
    TRY(req_int(r, "intermediate_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    return AP_OK;
}

/* ---- gpt_neox -------------------------------------------------------------------------------- */

static ap_status rd_gpt_neox(rd *r, ap_model *m) {
    /* modeling_gpt_neox.py: embed_in V*h, per layer input_layernorm, post_attention_layernorm,
     * query_key_value h->3h, dense h->h, dense_h_to_4h, dense_4h_to_h, all with biases;
     * final_layer_norm; embed_out V*h (untied by default). */
    TRY(mha_sizes(r, m));
    TRY(positions(r, "max_position_embeddings", 2048, m));
    TRY(check_rope_scaling(r));
    int ab = 1;
    TRY(opt_bool(r, "attention_bias", 1, &ab));
    if (!ab)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'attention_bias' = false is not "
                          "supported for gpt_neox", r->where);
    m->bias = 1;
    TRY(plain_act(r, "hidden_act", "gelu", m));
    m->norm = AP_NORM_LAYERNORM;
    m->pos = AP_POS_ROTARY;
    TRY(opt_bool(r, "use_parallel_residual", 1, &m->parallel_attn));
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    static const char *const drop[] = {"hidden_dropout", "attention_dropout", NULL};
    return dropout_of(r, drop, 0.0, &m->dropout);
}

/* ---- bloom ----------------------------------------------------------------------------------- */

static ap_status rd_bloom(rd *r, ap_model *m) {
    /* modeling_bloom.py: word_embeddings V*h, word_embeddings_layernorm, per block
     * input_layernorm, query_key_value h->3h, dense, post_attention_layernorm, dense_h_to_4h,
     * dense_4h_to_h (biases everywhere), ln_f; lm_head tied; ALiBi, no position table.
     * BloomConfig accepts n_embed for hidden_size and n_layer / n_head. */
    TRY(req_int2(r, "hidden_size", "n_embed", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int2(r, "n_layer", "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int2(r, "n_head", "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    const char *hk = ap_json_is_number(ap_json_get(r->j, "hidden_size")) ? "hidden_size"
                                                                          : "n_embed";
    const char *ak = ap_json_is_number(ap_json_get(r->j, "n_head")) ? "n_head"
                                                                     : "num_attention_heads";
    TRY(dims(r, hk, ak, NULL, NULL, 0, m));
    if (m->hidden > AP_MODEL_MAX_FFN / 4)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = %lld is out of range [1, %d]",
                          r->where, hk, (long long)m->hidden, AP_MODEL_MAX_FFN / 4);
    m->ffn_hidden = 4 * m->hidden;
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    /* no max_position_embeddings (ALiBi); BLOOM was trained on 2048-token sequences (BigScience
     * 2022, arXiv:2211.05100 Sec. 3.5) */
    TRY(positions(r, NULL, 0, m));
    m->pos = AP_POS_ALIBI;
    m->norm = AP_NORM_LAYERNORM;
    m->act = AP_ACT_GELU;
    m->bias = 1;
    m->embed_norm = 1;
    TRY(opt_bool(r, "tie_word_embeddings", 1, &m->tied_embeddings));
    static const char *const drop[] = {"hidden_dropout", "attention_dropout", NULL};
    return dropout_of(r, drop, 0.0, &m->dropout);
}

/* ---- falcon ---------------------------------------------------------------------------------- */

static ap_status rd_falcon(rd *r, ap_model *m) {
    /* modeling_falcon.py FalconAttention: query_key_value h->(a + 2*kv)*d with kv = num_kv_heads
     * for new_decoder_architecture (Falcon-40B/180B), 1 for multi_query (Falcon-7B), else a;
     * dense a*d->h; MLP h->ffn_hidden_size->h (default 4h); biases when `bias`. Norms: ln_attn +
     * ln_mlp when num_ln_in_parallel_attn == 2 (default for the new architecture), else
     * input_layernorm, plus post_attention_layernorm without parallel_attn. ln_f; tied lm_head. */
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int2(r, "num_hidden_layers", "n_layer", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int2(r, "num_attention_heads", "n_head", 1, AP_MODEL_MAX_HEADS, &m->heads));
    const char *ak = ap_json_is_number(ap_json_get(r->j, "num_attention_heads"))
                         ? "num_attention_heads" : "n_head";
    int newarch = 0, mq = 1, par = 1, alibi = 0;
    TRY(opt_bool(r, "new_decoder_architecture", 0, &newarch));
    TRY(opt_bool(r, "multi_query", 1, &mq));
    TRY(opt_bool(r, "parallel_attn", 1, &par));
    TRY(opt_bool(r, "alibi", 0, &alibi));
    TRY(opt_bool(r, "bias", 0, &m->bias));
    TRY(dims(r, "hidden_size", ak, newarch ? "num_kv_heads" : NULL, NULL, 0, m));
    if (!newarch && mq) m->kv_heads = 1;
    if (m->hidden > AP_MODEL_MAX_FFN / 4)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'hidden_size' = %lld is out of range "
                          "[1, %d]", r->where, (long long)m->hidden, AP_MODEL_MAX_FFN / 4);
    TRY(opt_int(r, "ffn_hidden_size", 1, AP_MODEL_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "max_position_embeddings", 2048, m));
    TRY(check_rope_scaling(r));
    int64_t nln = newarch ? 2 : 1;
    TRY(opt_int(r, "num_ln_in_parallel_attn", 1, 2, nln, &nln));
    m->norms_per_layer = (int)nln + (par ? 0 : 1);
    m->parallel_attn = par;
    m->pos = alibi ? AP_POS_ALIBI : AP_POS_ROTARY;
    m->norm = AP_NORM_LAYERNORM;
    TRY(plain_act(r, "activation", "gelu", m));
    TRY(opt_bool(r, "tie_word_embeddings", 1, &m->tied_embeddings));
    static const char *const drop[] = {"hidden_dropout", "attention_dropout", NULL};
    return dropout_of(r, drop, 0.0, &m->dropout);
}

/* ---- deepseek_v2, deepseek_v3 ---------------------------------------------------------------- */

static ap_status read_deepseek_mla(rd *r, ap_model *m, int v3) {
    /* DeepSeek-V2 (arXiv:2405.04434) and V3 (arXiv:2412.19437; modeling_deepseek_v3.py): MLA
     * attention, first_k_dense_replace dense layers with intermediate_size, then DeepSeek MoE
     * layers (moe_deepseek). The num_nextn_predict_layers MTP module is not part of the model
     * counted here (the 671B of the V3 paper excludes it). */
    const char *type = v3 ? "deepseek_v3" : "deepseek_v2";
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(req_int(r, "intermediate_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    ap_mla *x = &m->mla;
    TRY(req_int(r, "kv_lora_rank", 1, AP_MODEL_MAX_HIDDEN, &x->kv_lora_rank));
    TRY(opt_int(r, "q_lora_rank", 0, AP_MODEL_MAX_HIDDEN, 0, &x->q_lora_rank));
    TRY(req_int(r, "qk_nope_head_dim", 0, AP_MODEL_MAX_HEAD_DIM, &x->qk_nope_head_dim));
    TRY(req_int(r, "qk_rope_head_dim", 0, AP_MODEL_MAX_HEAD_DIM, &x->qk_rope_head_dim));
    TRY(req_int(r, "v_head_dim", 1, AP_MODEL_MAX_HEAD_DIM, &x->v_head_dim));
    if (x->qk_nope_head_dim + x->qk_rope_head_dim < 1)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: fields 'qk_nope_head_dim' + 'qk_rope_head_dim'"
                          " must be positive", r->where);
    m->kv_heads = m->heads; /* MLA: every head has its own (decompressed) k and v */
    m->head_dim = x->qk_nope_head_dim + x->qk_rope_head_dim;
    int64_t kvh = 0;
    TRY(opt_int(r, "num_key_value_heads", 1, AP_MODEL_MAX_HEADS, m->heads, &kvh));
    TRY(positions(r, "max_position_embeddings", v3 ? 4096 : 2048, m));
    TRY(read_rope(r, 10000.0, m));
    int ab = 0;
    TRY(opt_bool(r, "attention_bias", 0, &ab));
    if (ab)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'attention_bias' = true is not "
                          "supported for %s", r->where, type);
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    m->act = AP_ACT_SWIGLU;
    m->norm = AP_NORM_RMSNORM;
    m->pos = AP_POS_ROTARY;
    static const char *const drop[] = {"attention_dropout", NULL};
    TRY(dropout_of(r, drop, 0.0, &m->dropout));
    return moe_deepseek(r, m, v3);
}

static ap_status rd_deepseek_v2(rd *r, ap_model *m) { return read_deepseek_mla(r, m, 0); }
static ap_status rd_deepseek_v3(rd *r, ap_model *m) { return read_deepseek_mla(r, m, 1); }

/* ---- chatglm (ChatGLM2/3, GLM-4) ------------------------------------------------------------- */

static ap_status rd_chatglm(rd *r, ap_model *m) {
    /* THUDM modeling_chatglm.py: embedding.word_embeddings padded_vocab_size*h; per layer
     * input_layernorm, self_attention.query_key_value h->(a + 2*g)*kv_channels (g =
     * multi_query_group_num when multi_query_attention) with biases when add_qkv_bias, dense
     * a*kv_channels->h (bias when add_bias_linear), post_attention_layernorm, mlp.dense_h_to_4h
     * h->2*ffn_hidden_size (SwiGLU halves) and dense_4h_to_h; final_layernorm when
     * post_layer_norm; output_layer untied. RMSNorm when rmsnorm. seq_length is the context. */
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", NULL, "kv_channels", 0, m));
    int mqa = 0;
    TRY(opt_bool(r, "multi_query_attention", 0, &mqa));
    if (mqa) {
        TRY(opt_int(r, "multi_query_group_num", 1, m->heads, 1, &m->kv_heads));
        if (m->heads % m->kv_heads != 0)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'multi_query_group_num' = %lld "
                              "does not divide 'num_attention_heads' = %lld", r->where,
                              (long long)m->kv_heads, (long long)m->heads);
    }
    TRY(req_int(r, "ffn_hidden_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    int present = 0;
    TRY(ap_json_get_int(r->j, "padded_vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab, &present,
                        r->where, r->err));
    if (!present) TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "seq_length", 2048, m));
    /* RotaryEmbedding(rotary_dim // 2, rope_ratio): base 10000 * rope_ratio on half the dims */
    double ratio = 1.0;
    TRY(ap_json_get_real(r->j, "rope_ratio", 1e-6, 1e9, &ratio, &present, r->where, r->err));
    m->rope_theta = 10000.0 * ratio;
    m->rotary_pct = 0.5;
    int rms = 1, post = 1, bias_lin = 0, residual_post = 0;
    TRY(opt_bool(r, "rmsnorm", 1, &rms));
    TRY(opt_bool(r, "post_layer_norm", 1, &post));
    TRY(opt_bool(r, "add_qkv_bias", 0, &m->qkv_bias));
    TRY(opt_bool(r, "add_bias_linear", 0, &bias_lin));
    TRY(opt_bool(r, "apply_residual_connection_post_layernorm", 0, &residual_post));
    if (bias_lin)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'add_bias_linear' = true is not "
                          "supported for chatglm (no published checkpoint uses it)", r->where);
    if (residual_post)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'apply_residual_connection_post_"
                          "layernorm' = true is not supported for chatglm", r->where);
    m->norm = rms ? AP_NORM_RMSNORM : AP_NORM_LAYERNORM;
    m->final_norm = post;
    m->act = AP_ACT_SWIGLU;
    m->pos = AP_POS_ROTARY;
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    static const char *const drop[] = {"hidden_dropout", "attention_dropout", NULL};
    return dropout_of(r, drop, 0.0, &m->dropout);
}

/* ---- baichuan (Baichuan2 7B rotary, 13B ALiBi) ----------------------------------------------- */

static ap_status rd_baichuan(rd *r, ap_model *m) {
    /* baichuan-inc modeling_baichuan.py: embed_tokens, per layer W_pack h->3h (no bias), o_proj,
     * gate/up/down (SiLU), two RMSNorms; norm; lm_head (NormHead, V*h, untied). The 7B file uses
     * rotary embeddings and has max_position_embeddings; the 13B file uses ALiBi and its
     * config.json has only model_max_length, which is how the two are told apart. */
    TRY(mha_sizes(r, m));
    int present = 0;
    int64_t mp = 0;
    TRY(ap_json_get_int(r->j, "max_position_embeddings", 1, AP_MODEL_MAX_POSITIONS, &mp, &present,
                        r->where, r->err));
    if (present) {
        TRY(positions(r, "max_position_embeddings", 4096, m));
        m->pos = AP_POS_ROTARY;
        m->rope_theta = 10000.0;
    } else {
        TRY(positions(r, "model_max_length", 4096, m));
        m->pos = AP_POS_ALIBI;
    }
    m->act = AP_ACT_SWIGLU;
    m->norm = AP_NORM_RMSNORM;
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    return AP_OK;
}

/* ---- gptj ------------------------------------------------------------------------------------ */

static ap_status rd_gptj(rd *r, ap_model *m) {
    /* modeling_gptj.py: wte V*h; per block ln_1 (one LayerNorm feeding attention and MLP in
     * parallel), q/k/v/out_proj without bias, fc_in h->n_inner and fc_out with biases; ln_f;
     * lm_head V*h with bias, untied. Rotary on rotary_dim of each head. */
    TRY(mha_dims(r, "n_embd", "n_layer", "n_head", m));
    if (m->hidden > AP_MODEL_MAX_FFN / 4)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'n_embd' = %lld is out of range [1, %d]",
                          r->where, (long long)m->hidden, AP_MODEL_MAX_FFN / 4);
    TRY(opt_int(r, "n_inner", 1, AP_MODEL_MAX_FFN, 4 * m->hidden, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "n_positions", 2048, m));
    int64_t rd_dim = 64;
    int present = 0;
    TRY(ap_json_get_int(r->j, "rotary_dim", 1, m->head_dim, &rd_dim, &present, r->where, r->err));
    m->rotary_pct = (double)rd_dim / (double)m->head_dim;
    m->rope_theta = 10000.0;
    m->pos = AP_POS_ROTARY;
    TRY(plain_act(r, "activation_function", "gelu_new", m));
    m->norm = AP_NORM_LAYERNORM;
    m->mlp_bias = 1;
    m->lm_head_bias = 1;
    m->parallel_attn = 1;
    m->norms_per_layer = 1;
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    static const char *const drop[] = {"resid_pdrop", "embd_pdrop", "attn_pdrop", NULL};
    return dropout_of(r, drop, 0.0, &m->dropout);
}

/* ---- nested configuration objects (mpt, dbrx) -------------------------------------------- */

/* The object under `key` as a reader of its own (where "FILE: key"), into *sub; *present 0 when
 * the field is absent or null (the class's defaults then apply). */
static ap_status sub_rd(rd *r, const char *key, char *w, size_t n, rd *sub, int *present) {
    const ap_json *o = ap_json_get(r->j, key);
    *present = o && !ap_json_is_null(o);
    snprintf(w, n, "%s: %s", r->where, key);
    sub->j = *present ? o : NULL;
    sub->where = w;
    sub->err = r->err;
    if (*present && !ap_json_is_object(o))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' must be an object, got %s",
                          r->where, key, ap_json_type_name(o));
    return AP_OK;
}

/* The activation of an ffn_act_fn object ({"name": ...}), default `def`, into buf. */
static ap_status act_fn_name(rd *ffn, const char *def, char *buf, size_t n) {
    snprintf(buf, n, "%s", def);
    if (!ffn->j) return AP_OK;
    char w[320];
    rd a;
    int present = 0;
    TRY(sub_rd(ffn, "ffn_act_fn", w, sizeof w, &a, &present));
    if (!present) return AP_OK;
    return opt_str(&a, "name", def, buf, n);
}

/* ---- mpt ------------------------------------------------------------------------------------- */

/* The sizes MosaicML's configurations share (MPT, DBRX): d_model, n_layers, n_heads,
 * vocab_size and max_seq_len (default 2048, MPTConfig's and DbrxConfig's). */
static ap_status mosaic_sizes(rd *r, ap_model *m) {
    TRY(mha_dims(r, "d_model", "n_layers", "n_heads", m));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(positions(r, "max_seq_len", 2048, m));
    return AP_OK;
}

/* MPT's attention: attn_type (multihead, multiquery or grouped-query with kv_n_heads), ALiBi,
 * rotary or a learned table, q/k norms, a sliding window, soft-capping. */
static ap_status mpt_attention(rd *a, ap_model *m, int *learned) {
    char type[40], cb[48];
    TRY(opt_str(a, "attn_type", "multihead_attention", type, sizeof type));
    m->kv_heads = m->heads;
    if (!strcmp(type, "multiquery_attention")) {
        m->kv_heads = 1;
    } else if (!strcmp(type, "grouped_query_attention")) {
        TRY(kv_heads_of(a, "kv_n_heads", "n_heads", 1, m));
    } else if (strcmp(type, "multihead_attention")) {
        return ap_err_set(a->err, AP_ERR_INPUT, "%s: field 'attn_type' = '%s' is not supported "
                          "(multihead_attention, multiquery_attention, grouped_query_attention)",
                          a->where, ap_text_line(cb, sizeof cb, type, 40));
    }
    /* transformers' MptAttentionConfig: alibi True; llm-foundry: ALiBi or rope turns the
     * learned table off (configuration_mpt.py _validate_config) */
    int alibi = 1, rope = 0, qk_ln = 0, qk_gn = 0;
    TRY(opt_bool(a, "alibi", 1, &alibi));
    TRY(opt_bool(a, "rope", 0, &rope));
    if (alibi && rope)
        return ap_err_set(a->err, AP_ERR_INPUT, "%s: fields 'alibi' and 'rope' are both true (MPT "
                          "takes one position scheme)", a->where);
    if (alibi || rope) *learned = 0;
    m->pos = alibi ? AP_POS_ALIBI : rope ? AP_POS_ROTARY : AP_POS_LEARNED;
    if (rope) {
        m->rope_theta = 10000.0;
        int present = 0;
        TRY(ap_json_get_real(a->j, "rope_theta", 1e-6, 1e12, &m->rope_theta, &present, a->where,
                             a->err));
    }
    TRY(opt_bool(a, "qk_ln", 0, &qk_ln));
    TRY(opt_bool(a, "qk_gn", 0, &qk_gn));
    m->qk_norm = qk_ln ? AP_QKNORM_FULL : qk_gn ? AP_QKNORM_HEAD : AP_QKNORM_NONE;
    int64_t win = -1;
    TRY(opt_int(a, "sliding_window_size", -1, AP_MODEL_MAX_POSITIONS, -1, &win));
    m->window = win > 0 ? win : 0;
    int present = 0;
    const ap_json *cap = ap_json_get(a->j, "attn_logit_softcapping");
    if (cap && !ap_json_is_null(cap))
        TRY(ap_json_get_real(a->j, "attn_logit_softcapping", 0, 1e9, &m->attn_softcap, &present,
                             a->where, a->err));
    static const char *const drop[] = {"attn_pdrop", NULL};
    int d = 0;
    TRY(dropout_of(a, drop, 0.0, &d));
    m->dropout |= d;
    return AP_OK;
}

/* MPT's MLP: ffn_type mptmlp / te_ln_mlp (up, activation, down) or mptglu (gated), of
 * ffn_hidden_size or d_model x expansion_ratio; the MegaBlocks MoE types are refused. */
static ap_status mpt_ffn(rd *r, ap_model *m) {
    char w[300], type[24], act[32], cb[48];
    rd f;
    int present = 0;
    TRY(sub_rd(r, "ffn_config", w, sizeof w, &f, &present));
    snprintf(type, sizeof type, "mptmlp");
    if (present) TRY(opt_str(&f, "ffn_type", "mptmlp", type, sizeof type));
    int glu = !strcmp(type, "mptglu");
    if (!glu && strcmp(type, "mptmlp") && strcmp(type, "te_ln_mlp"))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'ffn_type' = '%s' is not supported "
                          "(mptmlp, mptglu, te_ln_mlp; the MegaBlocks MoE types are not)", w,
                          ap_text_line(cb, sizeof cb, type, 20));
    double ratio = 4;
    TRY(ap_json_get_real(r->j, "expansion_ratio", 1e-6, 1e6, &ratio, &present, r->where, r->err));
    int sized = 0;
    if (f.j) TRY(ap_json_get_int(f.j, "ffn_hidden_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden,
                                 &sized, w, r->err));
    if (!sized) {
        /* llm-foundry resolve_ffn_hidden_size: d_model x expansion_ratio, a whole number */
        double fh = (double)m->hidden * ratio;
        if (fh != floor(fh) || fh < 1 || fh > AP_MODEL_MAX_FFN)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'expansion_ratio' = %g times "
                              "'d_model' = %lld is not a whole MLP width in [1, %d]", r->where,
                              ratio, (long long)m->hidden, AP_MODEL_MAX_FFN);
        m->ffn_hidden = (int64_t)fh;
    }
    /* llm-foundry's default activation: GELU (approximate 'none') */
    TRY(act_fn_name(&f, "gelu", act, sizeof act));
    if (glu) return gated_act(&f, "ffn_act_fn.name", act, m);
    if (strcmp(act, "relu") && strncmp(act, "gelu", 4))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'ffn_act_fn.name' = '%s' is not "
                          "supported (gelu*, relu)", w, ap_text_line(cb, sizeof cb, act, 40));
    m->act = !strcmp(act, "relu") ? AP_ACT_RELU : AP_ACT_GELU;
    return AP_OK;
}

static ap_status rd_mpt(rd *r, ap_model *m) {
    /* MosaicML MPT (llm-foundry modeling_mpt.py, transformers modeling_mpt.py): wte V*d_model
     * (wpe max_seq_len*d_model with a learned table), per block norm_1, attn Wqkv
     * d->(a + 2kv)hd, out_proj, norm_2, ffn up/down (or mptglu's gate too); norm_f; the LM head
     * tied to wte. no_bias (default True in transformers' MptConfig) takes the bias off every
     * linear layer and LayerNorm. */
    TRY(mosaic_sizes(r, m));
    const ap_json *bo = ap_json_get(r->j, "block_overrides");
    if (bo && !ap_json_is_null(bo) && !(ap_json_is_object(bo) && ap_json_size(bo) == 0))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'block_overrides' (per-layer "
                          "attention) is not supported: autoplan models repeat one layer shape",
                          r->where);
    static const char *const drop[] = {"resid_pdrop", "emb_pdrop", NULL};
    TRY(dropout_of(r, drop, 0.0, &m->dropout));
    char w[300];
    rd a;
    int present = 0, learned = 1;
    TRY(opt_bool(r, "learned_pos_emb", 1, &learned));
    TRY(sub_rd(r, "attn_config", w, sizeof w, &a, &present));
    if (present) {
        TRY(mpt_attention(&a, m, &learned));
    } else {
        m->pos = AP_POS_ALIBI; /* MptAttentionConfig() */
        learned = 0;
    }
    if (m->pos == AP_POS_LEARNED && !learned)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: neither ALiBi, rope nor 'learned_pos_emb': "
                          "the model has no position information", r->where);
    m->learned_pos = m->pos == AP_POS_LEARNED ? m->max_positions : 0;
    TRY(mpt_ffn(r, m));
    int no_bias = 1;
    TRY(opt_bool(r, "no_bias", 1, &no_bias));
    m->bias = !no_bias;
    char norm[40], cb[48];
    TRY(opt_str(r, "norm_type", "low_precision_layernorm", norm, sizeof norm));
    size_t nl = strlen(norm);
    if (nl >= 9 && !strcmp(norm + nl - 9, "layernorm")) m->norm = AP_NORM_LAYERNORM;
    else if (nl >= 7 && !strcmp(norm + nl - 7, "rmsnorm")) m->norm = AP_NORM_RMSNORM;
    else
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'norm_type' = '%s' is not supported "
                          "(layernorm, low_precision_layernorm, rmsnorm, low_precision_rmsnorm)",
                          r->where, ap_text_line(cb, sizeof cb, norm, 40));
    m->norm_no_bias = no_bias && m->norm == AP_NORM_LAYERNORM;
    return opt_bool(r, "tie_word_embeddings", 1, &m->tied_embeddings);
}

/* ---- dbrx ------------------------------------------------------------------------------------ */

static ap_status rd_dbrx(rd *r, ap_model *m) {
    /* Databricks DBRX (transformers modeling_dbrx.py, DbrxConfig defaults): wte V*d_model; per
     * block norm_1 and norm_2 (LayerNorm without bias), Wqkv d->(a + 2 kv_n_heads)hd and
     * out_proj without bias, a router d->E and E GLU experts (w1, v1, w2) of ffn_hidden_size on
     * every layer, moe_top_k of them per token; norm_f; lm_head V*d, untied. Rotary. */
    TRY(mosaic_sizes(r, m));
    char wa[300], wf[300], act[32];
    rd a, f;
    int present = 0;
    TRY(sub_rd(r, "attn_config", wa, sizeof wa, &a, &present));
    m->kv_heads = 1; /* DbrxAttentionConfig kv_n_heads 1 */
    m->rope_theta = 10000.0;
    if (present) {
        TRY(kv_heads_of(&a, "kv_n_heads", "n_heads", 1, m));
        TRY(ap_json_get_real(a.j, "rope_theta", 1e-6, 1e12, &m->rope_theta, &present, wa,
                             r->err));
        static const char *const adrop[] = {"attn_pdrop", NULL};
        TRY(dropout_of(&a, adrop, 0.0, &m->dropout));
    }
    /* DbrxFFNConfig: ffn_hidden_size 3584, moe_num_experts 4, moe_top_k 1, SiLU */
    TRY(sub_rd(r, "ffn_config", wf, sizeof wf, &f, &present));
    m->ffn_hidden = 3584;
    m->moe.experts = 4;
    m->moe.top_k = 1;
    if (present) {
        TRY(opt_int(&f, "ffn_hidden_size", 1, AP_MODEL_MAX_FFN, 3584, &m->ffn_hidden));
        TRY(opt_int(&f, "moe_num_experts", 1, AP_MODEL_MAX_EXPERTS, 4, &m->moe.experts));
        TRY(opt_int(&f, "moe_top_k", 1, m->moe.experts, 1, &m->moe.top_k));
    }
    m->moe.ffn_hidden = m->ffn_hidden;
    TRY(act_fn_name(&f, "silu", act, sizeof act));
    TRY(gated_act(&f, "ffn_act_fn.name", act, m));
    m->pos = AP_POS_ROTARY;
    m->norm = AP_NORM_LAYERNORM;
    m->norm_no_bias = 1;
    int d = 0;
    static const char *const drop[] = {"resid_pdrop", "emb_pdrop", NULL};
    TRY(dropout_of(r, drop, 0.0, &d));
    m->dropout |= d;
    return opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings);
}

/* ---- families read but refused with the nearest supported form ------------------------------ */

static ap_status rd_nemotron_nas(rd *r, ap_model *m) {
    (void)m;
    /* DeciLM / Llama-Nemotron NAS (Nemotron-51B, Super-49B, Ultra-253B): block_configs give every
     * layer its own attention (GQA group, no-op or a single linear) and FFN width (ffn_mult).
     * autoplan's model has one dense and one MoE layer shape, so such a model cannot be counted
     * exactly; the refusal names the nearest form that can. */
    return ap_err_set(r->err, AP_ERR_INPUT, "%s: model_type 'nemotron-nas' (per-layer "
                      "block_configs) is not supported: autoplan models repeat one layer shape; "
                      "nearest supported form: model_type 'llama' with the parent model's sizes "
                      "(Llama-3.1-70B for Nemotron-51B and Super-49B, Llama-3.1-405B for "
                      "Ultra-253B), or a native model (docs/models.md) whose 'ffn_hidden' is the "
                      "mean of the block_configs widths", r->where);
}

/* ---- dispatch -------------------------------------------------------------------------------- */

typedef struct {
    const char *type;
    ap_status (*read)(rd *r, ap_model *m);
} hf_reader;

static const hf_reader readers[] = {
    {"llama", rd_llama},           {"mistral", rd_mistral},         {"mixtral", rd_mixtral},
    {"qwen2", rd_qwen2},           {"qwen2_moe", rd_qwen2_moe},     {"qwen3", rd_qwen3},
    {"qwen3_moe", rd_qwen3_moe},   {"gpt2", rd_gpt2},               {"opt", rd_opt},
    {"gpt_neox", rd_gpt_neox},     {"bloom", rd_bloom},             {"falcon", rd_falcon},
    {"gemma", rd_gemma},           {"gemma2", rd_gemma2},           {"gemma3_text", rd_gemma3},
    {"phi3", rd_phi3},             {"phimoe", rd_phimoe},           {"olmo2", rd_olmo2},
    {"llama4_text", rd_llama4},    {"gpt_oss", rd_gpt_oss},         {"deepseek", rd_deepseek},
    {"deepseek_v2", rd_deepseek_v2}, {"deepseek_v3", rd_deepseek_v3}, {"cohere", rd_cohere},
    {"starcoder2", rd_starcoder2}, {"internlm2", rd_internlm2},     {"chatglm", rd_chatglm},
    {"stablelm", rd_stablelm},     {"baichuan", rd_baichuan},       {"gptj", rd_gptj},
    {"minicpm", rd_minicpm},       {"nemotron-nas", rd_nemotron_nas},
    {"mpt", rd_mpt},               {"dbrx", rd_dbrx},               {"nemotron", rd_nemotron},
};

/* Multimodal configurations whose language model is a text_config of a supported type; the
 * text_config's own model_type wins, else the one named here (Gemma3Config -> gemma3_text,
 * Llama4Config -> llama4_text). */
static const struct {
    const char *outer, *text;
} multimodal[] = {
    {"gemma3", "gemma3_text"}, {"llama4", "llama4_text"}, {"llava", "llama"},
    {"llava_next", "llama"},   {"mistral3", "mistral"},   {"qwen2_5_vl", "qwen2"},
    {"qwen2_vl", "qwen2"},     {"paligemma", "gemma"},
};

/* The name shown in reports: the file's base name without ".json", or for ".../X/config.json"
 * the directory name X. */
static void name_from_where(const char *where, char *buf, size_t n) {
    const char *base = strrchr(where, '/');
    base = base ? base + 1 : where;
    size_t len = strlen(base);
    if (!strcmp(base, "config.json") && base > where + 1) {
        const char *end = base - 1, *start = end;
        while (start > where && start[-1] != '/') start--;
        if (end > start) {
            snprintf(buf, n, "%.*s", (int)(end - start), start);
            return;
        }
    }
    if (len > 5 && !strcmp(base + len - 5, ".json")) len -= 5;
    snprintf(buf, n, "%.*s", (int)len, base);
}

static const hf_reader *find_reader(const char *type) {
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
        if (!strcmp(readers[i].type, type)) return &readers[i];
    return NULL;
}

static ap_status unsupported(const char *where, const char *field, const char *type,
                             ap_err *err) {
    char list[700] = "";
    size_t off = 0;
    for (size_t i = 0; i < sizeof readers / sizeof readers[0] && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                readers[i].type);
    char cb[48];
    return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not supported (supported: %s; "
                      "multimodal configs through the text_config of one of these)", where,
                      field, ap_text_line(cb, sizeof cb, type, 40), list);
}

/* The language model of a multimodal config: its text_config, with the outer
 * tie_word_embeddings when the text_config has none (Llama4Config keeps it outside). *out is a
 * copy the caller frees with ap_json_free, *hr its reader, type its model_type. */
static ap_status text_config_of(const ap_json *j, const char *outer, const char *where,
                                const hf_reader **hr, char *type, size_t type_n, ap_json **out,
                                ap_err *err) {
    *out = NULL;
    ap_json *tc = ap_json_get(j, "text_config");
    if (!ap_json_is_object(tc))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'text_config' must be an object, got %s",
                          where, ap_json_type_name(tc));
    const char *inner = ap_json_string(ap_json_get(tc, "model_type"));
    for (size_t i = 0; !inner && i < sizeof multimodal / sizeof multimodal[0]; i++)
        if (!strcmp(multimodal[i].outer, outer)) inner = multimodal[i].text;
    char cb[48];
    if (!inner)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'text_config' has no 'model_type' and "
                          "'%s' names no known language model", where,
                          ap_text_line(cb, sizeof cb, outer, 40));
    char w[300];
    snprintf(w, sizeof w, "%s: text_config", where);
    if (!(*hr = find_reader(inner))) return unsupported(w, "model_type", inner, err);
    snprintf(type, type_n, "%s", inner);
    ap_json *copy = ap_json_duplicate(tc);
    ap_json *tie = ap_json_get(j, "tie_word_embeddings");
    if (copy && tie && ap_json_is_bool(tie) && !ap_json_get(copy, "tie_word_embeddings") &&
        ap_json_add_bool(copy, "tie_word_embeddings", ap_json_bool(tie)) != AP_OK) {
        ap_json_free(copy);
        copy = NULL;
    }
    if (!copy) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", where);
    *out = copy;
    return AP_OK;
}

static ap_status parse_hf(const ap_json *j, const char *where, ap_model *m, ap_err *err) {
    char type[32];
    TRY(ap_json_get_str(j, "model_type", type, sizeof type, NULL, where, err));
    const hf_reader *hr = find_reader(type);
    ap_json *text = NULL;
    char w[300];
    if (!hr && ap_json_get(j, "text_config")) {
        char inner[32];
        TRY(text_config_of(j, type, where, &hr, inner, sizeof inner, &text, err));
        snprintf(w, sizeof w, "%s: text_config", where);
        m->text_of_multimodal = 1;
        snprintf(type, sizeof type, "%s", inner);
    } else if (!hr) {
        return unsupported(where, "model_type", type, err);
    }
    snprintf(m->model_type, sizeof m->model_type, "%s", type);
    rd r = {text ? text : j, text ? w : where, err};
    ap_status st = hr->read(&r, m);
    ap_json_free(text);
    if (st != AP_OK) return st;
    const char *nm = ap_json_string(ap_json_get(j, "_name_or_path"));
    if (nm && *nm) {
        const char *slash = strrchr(nm, '/');
        snprintf(m->name, sizeof m->name, "%s", slash && slash[1] ? slash + 1 : nm);
    } else {
        name_from_where(where, m->name, sizeof m->name);
    }
    ap_text_cut_utf8(m->name); /* a long name cut by bytes ends on a whole character */
    return AP_OK;
}

/* ---- native ---------------------------------------------------------------------------------- */

static ap_status known_keys(const ap_json *obj, const char *const *keys, const char *where,
                            const char *prefix, ap_err *err) {
    for (ap_json *it = ap_json_first(obj); it; it = ap_json_next(it)) {
        const char *k = ap_json_key(it);
        int ok = 0;
        for (const char *const *p = keys; *p && !ok; p++) ok = k && !strcmp(k, *p);
        char cb[48];
        if (!ok)
            return ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%s%s' (see docs/models.md)",
                              where, prefix, ap_text_line(cb, sizeof cb, k, 40));
    }
    return AP_OK;
}

/* The parameter counts a source states beside the shape (shared/reference/published-public.json
 * carries them: params_b in billions, largest_layer_params_m in millions), numbers or null:
 * figures to read, not inputs. The count the shape gives is the one used; a stated total more
 * than 10% away from it is said (a shape transcribed wrongly, or a count of something else). */
static ap_status stated_params(const ap_json *j, const char *where, const ap_model *m,
                               ap_err *err) {
    double pb = 0, lm = 0;
    int has_pb = 0, has_lm = 0;
    if (ap_json_is_null(ap_json_get(j, "params_b")) == 0)
        TRY(ap_json_get_real(j, "params_b", 0.0, 1e6, &pb, &has_pb, where, err));
    if (ap_json_is_null(ap_json_get(j, "largest_layer_params_m")) == 0)
        TRY(ap_json_get_real(j, "largest_layer_params_m", 0.0, 1e9, &lm, &has_lm, where, err));
    if (has_pb && pb > 0) {
        double own = (double)ap_model_total_params(m) / 1e9;
        if (own > 0 && fabs(own - pb) > 0.10 * pb)
            ap_log(AP_LOG_WARN, "%s: field 'params_b' states %.4gB parameters; the shape gives "
                   "%.4gB (the shape's count is used)", where, pb, own);
    }
    return AP_OK;
}

static ap_status parse_native(const ap_json *j, const char *where, ap_model *m, ap_err *err) {
    static const char *const keys[] = {
        "name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab",
        "seq_len", "activation", "norm", "position", "learned_positions", "tied_embeddings",
        "bias", "dropout", "moe", "embed_norm", "window", "window_period", "window_chunked",
        "attn_softcap", "params_b", "largest_layer_params_m", NULL};
    TRY(known_keys(j, keys, where, "", err));
    rd rr = {j, where, err}, *r = &rr;
    int present = 0;
    TRY(ap_json_get_str(j, "name", m->name, sizeof m->name, &present, where, err));
    if (!present) name_from_where(where, m->name, sizeof m->name);
    snprintf(m->model_type, sizeof m->model_type, "native");
    TRY(req_int(r, "layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "hidden", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden", "heads", "kv_heads", "head_dim", 0, m));
    TRY(req_int(r, "vocab", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    TRY(opt_int(r, "seq_len", 1, AP_MODEL_MAX_SEQ, 2048, &m->seq_len));

    char act[16], norm[16], pos[16], cb[48];
    TRY(opt_str(r, "activation", ap_activation_name(AP_ACT_GELU), act, sizeof act));
    int e = ap_activation_lookup(act);
    if (e < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'activation' = '%s' is not one of %s",
                          where, ap_text_line(cb, sizeof cb, act, 40), ap_activation_names);
    m->act = (ap_activation)e;
    int gpt = m->act != AP_ACT_SWIGLU; /* GPT-style defaults for gelu/relu, Llama-style else */
    TRY(opt_str(r, "norm", ap_norm_name(gpt ? AP_NORM_LAYERNORM : AP_NORM_RMSNORM), norm,
                sizeof norm));
    if ((e = ap_norm_lookup(norm)) < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'norm' = '%s' is not one of %s", where,
                          ap_text_line(cb, sizeof cb, norm, 40), ap_norm_names);
    m->norm = (ap_norm)e;
    TRY(opt_str(r, "position", ap_posemb_name(gpt ? AP_POS_LEARNED : AP_POS_ROTARY), pos,
                sizeof pos));
    if ((e = ap_posemb_lookup(pos)) < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'position' = '%s' is not one of %s",
                          where, ap_text_line(cb, sizeof cb, pos, 40), ap_posemb_names);
    m->pos = (ap_posemb)e;
    m->learned_pos = 0;
    if (m->pos == AP_POS_LEARNED) {
        TRY(opt_int(r, "learned_positions", 1, AP_MODEL_MAX_POSITIONS, m->seq_len,
                    &m->learned_pos));
        if (m->learned_pos < m->seq_len)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'learned_positions' = %lld is smaller "
                              "than 'seq_len' = %lld", where, (long long)m->learned_pos,
                              (long long)m->seq_len);
    } else if (ap_json_get(j, "learned_positions")) {
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'learned_positions' needs 'position' = "
                          "'learned'", where);
    }
    m->max_positions = m->pos == AP_POS_LEARNED ? m->learned_pos : 0;

    /* ffn default: 4h for gelu/relu (Vaswani et al. 2017; GPT-3), for SwiGLU 2/3 * 4h rounded up
     * to a multiple of 256 (Llama reference code: multiple_of = 256). */
    int64_t fdef = gpt ? 4 * m->hidden : ((8 * m->hidden / 3 + 255) / 256) * 256;
    if (fdef > AP_MODEL_MAX_FFN) fdef = AP_MODEL_MAX_FFN;
    TRY(opt_int(r, "ffn_hidden", 1, AP_MODEL_MAX_FFN, fdef, &m->ffn_hidden));
    TRY(opt_bool(r, "tied_embeddings", gpt, &m->tied_embeddings));
    TRY(opt_bool(r, "bias", gpt, &m->bias));
    TRY(opt_bool(r, "dropout", gpt, &m->dropout));
    m->norms_per_layer = 2;
    m->final_norm = 1;
    /* optional attention variants, with the names and meaning of the HF readers' fields
     * (include/autoplan/model.h) */
    TRY(opt_bool(r, "embed_norm", 0, &m->embed_norm));
    TRY(opt_int(r, "window", 0, AP_MODEL_MAX_POSITIONS, 0, &m->window));
    TRY(opt_int(r, "window_period", 0, m->layers, 0, &m->window_period));
    TRY(opt_bool(r, "window_chunked", 0, &m->window_chunked));
    TRY(ap_json_get_real(j, "attn_softcap", 0.0, 1e9, &m->attn_softcap, &present, where, err));

    ap_json *moe = ap_json_get(j, "moe");
    if (moe && !ap_json_is_null(moe)) {
        char w[256];
        snprintf(w, sizeof w, "%s: moe", where);
        if (!ap_json_is_object(moe))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'moe' must be an object, got %s",
                              where, ap_json_type_name(moe));
        static const char *const mkeys[] = {"experts", "top_k", "ffn_hidden", "shared_experts",
                                            "first_dense_layers", "layer_freq", NULL};
        TRY(known_keys(moe, mkeys, where, "moe.", err));
        rd mr = {moe, w, err};
        ap_moe *e = &m->moe;
        TRY(req_int(&mr, "experts", 1, AP_MODEL_MAX_EXPERTS, &e->experts));
        TRY(req_int(&mr, "top_k", 1, e->experts, &e->top_k));
        TRY(opt_int(&mr, "ffn_hidden", 1, AP_MODEL_MAX_FFN, m->ffn_hidden, &e->ffn_hidden));
        TRY(opt_int(&mr, "shared_experts", 0, 1024, 0, &e->shared_experts));
        e->shared_ffn_hidden = e->shared_experts * e->ffn_hidden;
        TRY(opt_int(&mr, "first_dense_layers", 0, m->layers, 0, &e->first_dense_layers));
        TRY(opt_int(&mr, "layer_freq", 1, m->layers, 1, &e->layer_freq));
    }
    return stated_params(j, where, m, err);
}

/* ---- entry points ---------------------------------------------------------------------------- */

ap_status ap_model_parse(const char *text, size_t len, const char *where, ap_model *out,
                         ap_err *err) {
    if (!where) where = "model";
    ap_model m;
    ap_model_init(&m);
    ap_json *j = NULL;
    ap_status st = ap_json_decode(text, len, where, &j, err);
    if (st != AP_OK) return st;
    if (!ap_json_is_object(j)) {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: a model file must be a JSON object, got %s", where,
                        ap_json_type_name(j));
    } else if (ap_json_get(j, "model_type")) {
        st = parse_hf(j, where, &m, err);
    } else if (ap_json_get(j, "layers")) {
        st = parse_native(j, where, &m, err);
    } else {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: neither field 'model_type' (a Hugging Face "
                        "config.json) nor field 'layers' (an autoplan model) is present", where);
    }
    ap_json_free(j);
    if (st == AP_OK) st = ap_model_validate(&m, where, err);
    if (st == AP_OK) *out = m;
    return st;
}

ap_status ap_model_load(const char *path, ap_model *out, ap_err *err) {
    if (!path || !*path) return ap_err_set(err, AP_ERR_INPUT, "no model file given");
    struct stat sb;
    char *file = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path) + sizeof "/config.json";
        file = ap_malloc(n);
        if (!file) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
        snprintf(file, n, "%s%sconfig.json", path, path[strlen(path) - 1] == '/' ? "" : "/");
        if (stat(file, &sb) != 0) {
            ap_free(file);
            return ap_err_set(err, AP_ERR_INPUT, "%s: directory has no config.json", path);
        }
    }
    const char *f = file ? file : path;
    char *text = NULL;
    size_t len = 0;
    ap_status st = ap_read_file(f, (size_t)16 << 20, &text, &len, err);
    if (st == AP_OK) st = ap_model_parse(text, len, f, out, err);
    ap_free(text);
    ap_free(file);
    return st;
}
