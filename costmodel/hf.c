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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autoplan/json.h"
#include "autoplan/model.h"

#define TRY(x)                          \
    do {                                \
        ap_status st_ = (x);            \
        if (st_ != AP_OK) return st_;   \
    } while (0)

/* Default training sequence for HF models: min(max_position_embeddings, 4096). 4096 is the
 * Llama-2 pretraining context (Touvron et al. 2023, Table 1), a common fine-tuning length. */
#define HF_DEFAULT_SEQ 4096

/* A user string made safe for a one-line message: at most 40 characters, control characters
 * and quotes replaced by '?'. Returns buf. */
static const char *clean(const char *s, char *buf, size_t n) {
    size_t i = 0;
    for (; s && s[i] && i + 1 < n && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = (c < 0x20 || c == 0x7f || c == '\'') ? '?' : (char)c;
    }
    buf[i] = '\0';
    if (s && s[i] && i + 4 < n) snprintf(buf + i, n - i, "...");
    return buf;
}

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

/* rope_scaling (Llama 3.x "llama3", DeepSeek "yarn", ...) changes no parameter count but must be
 * well formed: null or an object whose rope_type/type is a string and factor a positive number. */
static ap_status check_rope_scaling(rd *r) {
    ap_json *rs = ap_json_get(r->j, "rope_scaling");
    if (!rs || ap_json_is_null(rs)) return AP_OK;
    if (!ap_json_is_object(rs))
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'rope_scaling' must be an object or "
                          "null, got %s", r->where, ap_json_type_name(rs));
    char w[256], buf[64];
    snprintf(w, sizeof w, "%s: rope_scaling", r->where);
    int present = 0;
    TRY(ap_json_get_str(rs, "rope_type", buf, sizeof buf, &present, w, r->err));
    TRY(ap_json_get_str(rs, "type", buf, sizeof buf, &present, w, r->err));
    double f = 1;
    TRY(ap_json_get_real(rs, "factor", 1e-6, 1e6, &f, &present, w, r->err));
    int64_t orig = 0;
    TRY(ap_json_get_int(rs, "original_max_position_embeddings", 1, AP_MODEL_MAX_POSITIONS, &orig,
                        &present, w, r->err));
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
    if (kv_key) {
        TRY(opt_int(r, kv_key, 1, AP_MODEL_MAX_HEADS, m->heads, &m->kv_heads));
        if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = %lld does not divide '%s' = "
                              "%lld", r->where, kv_key, (long long)m->kv_heads, heads_key,
                              (long long)m->heads);
    }
    return AP_OK;
}

/* max_position_embeddings (default `def`, 0 = none) -> max_positions and seq_len. */
static ap_status positions(rd *r, const char *key, int64_t def, ap_model *m) {
    m->max_positions = def;
    if (key) TRY(opt_int(r, key, 1, AP_MODEL_MAX_POSITIONS, def, &m->max_positions));
    int64_t s = m->max_positions > 0 ? m->max_positions : 2048;
    m->seq_len = s < HF_DEFAULT_SEQ ? s : HF_DEFAULT_SEQ;
    return AP_OK;
}

/* ---- Llama family: llama, mistral, mixtral, qwen2, qwen2_moe, gemma2 -------------------------- */

typedef enum { LL_LLAMA, LL_MISTRAL, LL_MIXTRAL, LL_QWEN2, LL_QWEN2_MOE, LL_GEMMA2 } ll_kind;

static ap_status moe_mixtral(rd *r, ap_model *m) {
    /* MixtralConfig: num_local_experts 8, num_experts_per_tok 2; experts use intermediate_size
     * (modeling_mixtral.py MixtralBlockSparseTop2MLP), every layer is MoE. */
    TRY(opt_int(r, "num_local_experts", 1, AP_MODEL_MAX_EXPERTS, 8, &m->moe.experts));
    TRY(opt_int(r, "num_experts_per_tok", 1, m->moe.experts, 2, &m->moe.top_k));
    m->moe.ffn_hidden = m->ffn_hidden;
    return AP_OK;
}

static ap_status moe_qwen2(rd *r, ap_model *m) {
    /* Qwen2MoeConfig defaults: num_experts 60, num_experts_per_tok 4, moe_intermediate_size 1408,
     * shared_expert_intermediate_size 5632, decoder_sparse_step 1, mlp_only_layers []. A layer is
     * MoE when it is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
     * (modeling_qwen2_moe.py Qwen2MoeDecoderLayer). */
    ap_moe *e = &m->moe;
    TRY(opt_int(r, "num_experts", 0, AP_MODEL_MAX_EXPERTS, 60, &e->experts));
    if (e->experts == 0) return AP_OK;
    TRY(opt_int(r, "num_experts_per_tok", 1, e->experts, 4, &e->top_k));
    TRY(opt_int(r, "moe_intermediate_size", 1, AP_MODEL_MAX_FFN, 1408, &e->ffn_hidden));
    TRY(opt_int(r, "shared_expert_intermediate_size", 0, AP_MODEL_MAX_FFN, 5632,
                &e->shared_ffn_hidden));
    e->shared_experts = e->shared_ffn_hidden > 0 ? 1 : 0;
    e->shared_expert_gate = e->shared_experts;
    int64_t step = 1;
    TRY(opt_int(r, "decoder_sparse_step", 1, m->layers, 1, &step));
    e->first_dense_layers = step - 1;
    e->layer_freq = step;
    ap_json *only = ap_json_get(r->j, "mlp_only_layers");
    if (only && !ap_json_is_null(only)) {
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
        if (n > m->layers)
            return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'mlp_only_layers' lists %d layers, "
                              "the model has %lld", r->where, n, (long long)m->layers);
        if (n > 0) e->first_dense_layers = n;
    }
    return AP_OK;
}

static ap_status read_llama_family(rd *r, ap_model *m, ll_kind kind) {
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
             kind == LL_GEMMA2 ? 256 : 0, m));
    TRY(req_int(r, "intermediate_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
    /* transformers defaults: LlamaConfig 2048, MistralConfig/MixtralConfig 4096*32,
     * Qwen2Config/Qwen2MoeConfig 32768, Gemma2Config 8192 */
    int64_t maxpos = kind == LL_LLAMA ? 2048
                   : kind == LL_MISTRAL || kind == LL_MIXTRAL ? 4096 * 32
                   : kind == LL_GEMMA2 ? 8192 : 32768;
    TRY(positions(r, "max_position_embeddings", maxpos, m));
    TRY(check_rope_scaling(r));
    char act[32];
    TRY(opt_str(r, "hidden_act", kind == LL_GEMMA2 ? "gelu_pytorch_tanh" : "silu", act,
                sizeof act));
    /* every MLP of this family is gated (gate_proj, up_proj, down_proj) whatever hidden_act is:
     * SwiGLU for silu, GeGLU for Gemma's gelu_pytorch_tanh */
    m->act = AP_ACT_SWIGLU;
    m->norm = AP_NORM_RMSNORM;
    m->pos = AP_POS_ROTARY;
    TRY(opt_bool(r, "tie_word_embeddings", kind == LL_GEMMA2, &m->tied_embeddings));
    static const char *const drop[] = {"attention_dropout", NULL};
    TRY(dropout_of(r, drop, 0.0, &m->dropout));

    int attn_bias = 0, mlp_bias = 0;
    if (kind == LL_LLAMA || kind == LL_GEMMA2)
        TRY(opt_bool(r, "attention_bias", 0, &attn_bias));
    if (kind == LL_LLAMA) TRY(opt_bool(r, "mlp_bias", 0, &mlp_bias));
    if (attn_bias != mlp_bias)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'attention_bias' = %s with 'mlp_bias' = "
                          "%s is not supported (both or neither)", r->where,
                          attn_bias ? "true" : "false", mlp_bias ? "true" : "false");
    m->bias = attn_bias;
    if (kind == LL_GEMMA2 && attn_bias)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'attention_bias' = true is not "
                          "supported for gemma2", r->where);
    /* Qwen2 / Qwen2-MoE: q, k, v projections have biases, o_proj none (modeling_qwen2.py) */
    if (kind == LL_QWEN2 || kind == LL_QWEN2_MOE) m->qkv_bias = 1;
    /* Gemma2: input, post-attention, pre- and post-feedforward RMSNorms (modeling_gemma2.py) */
    m->norms_per_layer = kind == LL_GEMMA2 ? 4 : 2;
    if (kind == LL_MIXTRAL) TRY(moe_mixtral(r, m));
    if (kind == LL_QWEN2_MOE) TRY(moe_qwen2(r, m));
    return AP_OK;
}

static ap_status rd_llama(rd *r, ap_model *m) { return read_llama_family(r, m, LL_LLAMA); }
static ap_status rd_mistral(rd *r, ap_model *m) { return read_llama_family(r, m, LL_MISTRAL); }
static ap_status rd_mixtral(rd *r, ap_model *m) { return read_llama_family(r, m, LL_MIXTRAL); }
static ap_status rd_qwen2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN2); }
static ap_status rd_qwen2_moe(rd *r, ap_model *m) { return read_llama_family(r, m, LL_QWEN2_MOE); }
static ap_status rd_gemma2(rd *r, ap_model *m) { return read_llama_family(r, m, LL_GEMMA2); }

/* gelu-family names and relu for the non-gated GPT-style MLPs */
static ap_status plain_act(rd *r, const char *key, const char *def, ap_model *m) {
    char act[32];
    TRY(opt_str(r, key, def, act, sizeof act));
    char cb[48];
    if (!strcmp(act, "relu")) m->act = AP_ACT_RELU;
    else if (!strncmp(act, "gelu", 4)) m->act = AP_ACT_GELU;
    else
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not supported (gelu*, "
                          "relu)", r->where, key, clean(act, cb, sizeof cb));
    return AP_OK;
}

/* ---- gpt2 ------------------------------------------------------------------------------------ */

static ap_status rd_gpt2(rd *r, ap_model *m) {
    /* modeling_gpt2.py: wte V*h, wpe n_positions*h, per block ln_1, c_attn h->3h, c_proj h->h,
     * ln_2, c_fc h->n_inner, c_proj n_inner->h, all with biases; ln_f; lm_head tied to wte. */
    TRY(req_int(r, "n_embd", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "n_layer", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "n_head", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "n_embd", "n_head", NULL, NULL, 0, m));
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

/* ---- gpt_neox -------------------------------------------------------------------------------- */

static ap_status rd_gpt_neox(rd *r, ap_model *m) {
    /* modeling_gpt_neox.py: embed_in V*h, per layer input_layernorm, post_attention_layernorm,
     * query_key_value h->3h, dense h->h, dense_h_to_4h, dense_4h_to_h, all with biases;
     * final_layer_norm; embed_out V*h (untied by default). */
    TRY(req_int(r, "hidden_size", 1, AP_MODEL_MAX_HIDDEN, &m->hidden));
    TRY(req_int(r, "num_hidden_layers", 1, AP_MODEL_MAX_LAYERS, &m->layers));
    TRY(req_int(r, "num_attention_heads", 1, AP_MODEL_MAX_HEADS, &m->heads));
    TRY(dims(r, "hidden_size", "num_attention_heads", NULL, NULL, 0, m));
    TRY(req_int(r, "intermediate_size", 1, AP_MODEL_MAX_FFN, &m->ffn_hidden));
    TRY(req_int(r, "vocab_size", 1, AP_MODEL_MAX_VOCAB, &m->vocab));
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

/* ---- deepseek_v3 ----------------------------------------------------------------------------- */

static ap_status rd_deepseek_v3(rd *r, ap_model *m) {
    /* DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437; modeling_deepseek_v3.py): MLA attention,
     * first_k_dense_replace dense layers with intermediate_size, then MoE layers (every
     * moe_layer_freq-th: i % freq == 0) with n_routed_experts of moe_intermediate_size, top
     * num_experts_per_tok, n_shared_experts shared experts of moe_intermediate_size each, and a
     * sigmoid router with e_score_correction_bias. The num_nextn_predict_layers MTP module is not
     * part of the model counted here (the 671B of the paper excludes it). Absent MoE fields mean
     * what they mean in DeepSeek's own configuration_deepseek.py (the code its config.json names
     * in auto_map): no n_routed_experts = a dense model, no n_shared_experts = none,
     * first_k_dense_replace 0, moe_layer_freq 1. */
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
    TRY(positions(r, "max_position_embeddings", 4096, m));
    TRY(check_rope_scaling(r));
    int ab = 0;
    TRY(opt_bool(r, "attention_bias", 0, &ab));
    if (ab)
        return ap_err_set(r->err, AP_ERR_INPUT, "%s: field 'attention_bias' = true is not "
                          "supported for deepseek_v3", r->where);
    TRY(opt_bool(r, "tie_word_embeddings", 0, &m->tied_embeddings));
    m->act = AP_ACT_SWIGLU;
    m->norm = AP_NORM_RMSNORM;
    m->pos = AP_POS_ROTARY;
    static const char *const drop[] = {"attention_dropout", NULL};
    TRY(dropout_of(r, drop, 0.0, &m->dropout));

    ap_moe *e = &m->moe;
    TRY(opt_int(r, "n_routed_experts", 0, AP_MODEL_MAX_EXPERTS, 0, &e->experts));
    if (e->experts == 0) return AP_OK; /* null: a dense model */
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
    e->router_bias = 1;
    return AP_OK;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

typedef struct {
    const char *type;
    ap_status (*read)(rd *r, ap_model *m);
} hf_reader;

static const hf_reader readers[] = {
    {"llama", rd_llama},     {"mistral", rd_mistral},   {"mixtral", rd_mixtral},
    {"qwen2", rd_qwen2},     {"qwen2_moe", rd_qwen2_moe}, {"gpt2", rd_gpt2},
    {"opt", rd_opt},         {"gpt_neox", rd_gpt_neox}, {"bloom", rd_bloom},
    {"falcon", rd_falcon},   {"gemma2", rd_gemma2},     {"deepseek_v3", rd_deepseek_v3},
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

static ap_status parse_hf(const ap_json *j, const char *where, ap_model *m, ap_err *err) {
    char type[32];
    TRY(ap_json_get_str(j, "model_type", type, sizeof type, NULL, where, err));
    const hf_reader *hr = NULL;
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
        if (!strcmp(readers[i].type, type)) hr = &readers[i];
    if (!hr) {
        char list[256] = "";
        size_t off = 0;
        for (size_t i = 0; i < sizeof readers / sizeof readers[0] && off < sizeof list; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                    readers[i].type);
        char cb[48];
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'model_type' = '%s' is not supported "
                          "(supported: %s)", where, clean(type, cb, sizeof cb), list);
    }
    snprintf(m->model_type, sizeof m->model_type, "%s", type);
    rd r = {j, where, err};
    TRY(hr->read(&r, m));
    const char *nm = ap_json_string(ap_json_get(j, "_name_or_path"));
    if (nm && *nm) {
        const char *slash = strrchr(nm, '/');
        snprintf(m->name, sizeof m->name, "%s", slash && slash[1] ? slash + 1 : nm);
    } else {
        name_from_where(where, m->name, sizeof m->name);
    }
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
                              where, prefix, clean(k, cb, sizeof cb));
    }
    return AP_OK;
}

static ap_status parse_native(const ap_json *j, const char *where, ap_model *m, ap_err *err) {
    static const char *const keys[] = {
        "name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab",
        "seq_len", "activation", "norm", "position", "learned_positions", "tied_embeddings",
        "bias", "dropout", "moe", NULL};
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
    TRY(opt_str(r, "activation", "gelu", act, sizeof act));
    if (!strcmp(act, "gelu")) m->act = AP_ACT_GELU;
    else if (!strcmp(act, "swiglu")) m->act = AP_ACT_SWIGLU;
    else if (!strcmp(act, "relu")) m->act = AP_ACT_RELU;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'activation' = '%s' is not one of gelu, "
                          "swiglu, relu", where, clean(act, cb, sizeof cb));
    int gpt = m->act != AP_ACT_SWIGLU; /* GPT-style defaults for gelu/relu, Llama-style else */
    TRY(opt_str(r, "norm", gpt ? "layernorm" : "rmsnorm", norm, sizeof norm));
    if (!strcmp(norm, "layernorm")) m->norm = AP_NORM_LAYERNORM;
    else if (!strcmp(norm, "rmsnorm")) m->norm = AP_NORM_RMSNORM;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'norm' = '%s' is not one of layernorm, "
                          "rmsnorm", where, clean(norm, cb, sizeof cb));
    TRY(opt_str(r, "position", gpt ? "learned" : "rotary", pos, sizeof pos));
    if (!strcmp(pos, "learned")) m->pos = AP_POS_LEARNED;
    else if (!strcmp(pos, "rotary")) m->pos = AP_POS_ROTARY;
    else if (!strcmp(pos, "alibi")) m->pos = AP_POS_ALIBI;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'position' = '%s' is not one of learned, "
                          "rotary, alibi", where, clean(pos, cb, sizeof cb));
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
    return AP_OK;
}

/* ---- entry points ---------------------------------------------------------------------------- */

ap_status ap_model_parse(const char *text, size_t len, const char *where, ap_model *out,
                         ap_err *err) {
    if (!where) where = "model";
    ap_model m;
    ap_model_init(&m);
    ap_json *j = ap_json_parse(text, len, where, err);
    if (!j) return AP_ERR_INPUT;
    ap_status st;
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
        file = malloc(n);
        if (!file) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
        snprintf(file, n, "%s%sconfig.json", path, path[strlen(path) - 1] == '/' ? "" : "/");
        if (stat(file, &sb) != 0) {
            free(file);
            return ap_err_set(err, AP_ERR_INPUT, "%s: directory has no config.json", path);
        }
    }
    const char *f = file ? file : path;
    char *text = NULL;
    size_t len = 0;
    ap_status st = ap_read_file(f, (size_t)16 << 20, &text, &len, err);
    if (st == AP_OK) st = ap_model_parse(text, len, f, out, err);
    free(text);
    free(file);
    return st;
}
