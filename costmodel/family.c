/*
 * family.c - model families and their ladders of sizes (family.h) for `autoplan fit`.
 *
 * The built-in shape tables are the published ones, cited per family; the architecture of each
 * is its Hugging Face implementation's (the same fields costmodel/hf.c reads from its configs).
 * A ladder rung is one of the family's widths at a layer count: the anchors in order, the
 * smaller anchor deepened a layer at a time between two of them (layer count is the knob every
 * family turns between its published widths), shallower below the first, deeper past the last.
 * Not here: whether a rung fits (planner/fit.c).
 */
#include "autoplan/family.h"
#include "autoplan/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the built-in families ---------------------------------------------------------------- */

typedef struct builtin {
    const char *name;
    const char *cite;
    void (*base)(ap_model *m);
    int n;
    ap_family_shape shapes[AP_FAMILY_MAX_SHAPES];
} builtin;

static void base_gpt2(ap_model *m, int64_t positions) {
    /* GPT-2 architecture (modeling_gpt2.py): GELU MLP 4h, LayerNorm, biases, learned positions,
       tied LM head, dropout 0.1; vocabulary 50257 (Radford et al. 2019) */
    snprintf(m->model_type, sizeof m->model_type, "gpt2");
    m->act = AP_ACT_GELU;
    m->norm = AP_NORM_LAYERNORM;
    m->pos = AP_POS_LEARNED;
    m->bias = 1;
    m->tied_embeddings = 1;
    m->dropout = 1;
    m->vocab = 50257;
    m->seq_len = positions;
    m->max_positions = positions;
    m->learned_pos = positions;
}

/* GPT-3 "uses the same model and architecture as GPT-2" with a 2048-token context (Brown et al.
 * 2020, Sec. 2.1). */
static void base_gpt3(ap_model *m) { base_gpt2(m, 2048); }
/* Colossal-AI's GPT-2 examples: GPT2Config(n_positions = max_seq_len = 1024, vocab 50257). */
static void base_gpt2_1024(ap_model *m) { base_gpt2(m, 1024); }

static void base_llama(ap_model *m, int64_t vocab, int64_t seq) {
    /* modeling_llama.py: SwiGLU (gate, up, down), RMSNorm, rotary, no biases, untied head */
    snprintf(m->model_type, sizeof m->model_type, "llama");
    m->act = AP_ACT_SWIGLU;
    m->norm = AP_NORM_RMSNORM;
    m->pos = AP_POS_ROTARY;
    m->vocab = vocab;
    m->seq_len = seq;
    m->max_positions = seq;
}
static void base_llama2(ap_model *m) { base_llama(m, 32000, 4096); }
static void base_llama3(ap_model *m) { base_llama(m, 128256, 8192); }

static const builtin builtins[] = {
    {"gpt",
     "Brown et al. 2020, 'Language Models are Few-Shot Learners', Table 2.1 (n_layers, d_model, "
     "n_heads; d_ff = 4 d_model); the 13B row prints d_model 5140, read as 5120 = 40 heads x "
     "d_head 128",
     base_gpt3, 8,
     {{"GPT-3 Small", 12, 768, 12, 12, 3072},
      {"GPT-3 Medium", 24, 1024, 16, 16, 4096},
      {"GPT-3 Large", 24, 1536, 16, 16, 6144},
      {"GPT-3 XL", 24, 2048, 24, 24, 8192},
      {"GPT-3 2.7B", 32, 2560, 32, 32, 10240},
      {"GPT-3 6.7B", 32, 4096, 32, 32, 16384},
      {"GPT-3 13B", 40, 5120, 40, 40, 20480},
      {"GPT-3 175B", 96, 12288, 96, 96, 49152}}},
    {"llama",
     "Touvron et al. 2023, 'Llama 2', Table 1 (7B, 13B, 70B; GQA on 70B) with the released "
     "configs' intermediate sizes (11008, 13824, 28672) and 8 KV heads on 70B",
     base_llama2, 3,
     {{"Llama-2 7B", 32, 4096, 32, 32, 11008},
      {"Llama-2 13B", 40, 5120, 40, 40, 13824},
      {"Llama-2 70B", 80, 8192, 64, 8, 28672}}},
    {"llama3",
     "Dubey et al. 2024, 'The Llama 3 Herd of Models', Table 3 (layers, model dimension, FFN "
     "dimension, attention heads, key/value heads; vocabulary 128K = 128256)",
     base_llama3, 3,
     {{"Llama-3 8B", 32, 4096, 32, 8, 14336},
      {"Llama-3 70B", 80, 8192, 64, 8, 28672},
      {"Llama-3 405B", 126, 16384, 128, 8, 53248}}},
    {"gpt2-colossalai",
     "hpcaitech/ColossalAI examples/language/gpt/gemini/commons/model_zoo.py (gpt2_medium, "
     "gpt2_xl, gpt2_10b, gpt2_14b, gpt2_20b ... gpt2_40b; GPT2Config, seq 1024): the models of "
     "Colossal-AI's single-GPU chart",
     base_gpt2_1024, 8,
     {{"gpt2_medium", 24, 1024, 16, 16, 4096},
      {"gpt2_xl", 48, 1600, 32, 32, 6400},
      {"gpt2_10b", 50, 4096, 16, 16, 16384},
      {"gpt2_14b", 70, 4096, 16, 16, 16384},
      {"gpt2_20b", 25, 8192, 16, 16, 32768},
      {"gpt2_24b", 30, 8192, 16, 16, 32768},
      {"gpt2_30b", 37, 8192, 16, 16, 32768},
      {"gpt2_40b", 50, 8192, 16, 16, 32768}}},
};
#define NBUILTIN ((int)(sizeof builtins / sizeof builtins[0]))

const char *ap_family_builtin_names(void) { return "gpt, llama, llama3, gpt2-colossalai"; }

/* ---- models and ladders -------------------------------------------------------------------- */

static void apply_shape(const ap_family *f, const ap_family_shape *s, int64_t layers,
                        ap_model *m) {
    *m = f->base;
    m->layers = layers;
    m->hidden = s->hidden;
    m->heads = s->heads;
    m->kv_heads = s->kv_heads > 0 ? s->kv_heads : s->heads;
    m->head_dim = s->heads > 0 ? s->hidden / s->heads : 0;
    m->ffn_hidden = s->ffn_hidden > 0 ? s->ffn_hidden : 4 * s->hidden;
}

ap_status ap_family_model(const ap_family *f, const ap_family_rung *r, ap_model *out,
                          ap_err *err) {
    if (r->shape < 0 || r->shape >= f->nshapes || r->layers < 1)
        return ap_err_set(err, AP_ERR_INPUT, "family %s: no such rung", f->name);
    const ap_family_shape *s = &f->shapes[r->shape];
    apply_shape(f, s, r->layers, out);
    int64_t d = r->layers - s->layers;
    if (d == 0) snprintf(out->name, sizeof out->name, "%s", s->name);
    else snprintf(out->name, sizeof out->name, "%s %+lldL", s->name, (long long)d);
    return ap_model_validate(out, f->name, err);
}

static int64_t params_at(const ap_family *f, int shape, int64_t layers) {
    ap_model m;
    apply_shape(f, &f->shapes[shape], layers, &m);
    return ap_model_total_params(&m);
}

ap_status ap_family_ladder(const ap_family *f, ap_family_rung **out, int *n, ap_err *err) {
    *out = NULL;
    *n = 0;
    if (f->nshapes < 1) return ap_err_set(err, AP_ERR_INPUT, "family %s: no shapes", f->name);
    int cap = 1024, k = 0;
    ap_family_rung *v = ap_malloc((size_t)cap * sizeof *v);
    if (!v) return ap_err_set(err, AP_ERR_NOMEM, "family: out of memory");
#define PUSH(sh, L)                                                                                \
    do {                                                                                           \
        if (k == cap) {                                                                            \
            cap *= 2;                                                                              \
            ap_family_rung *q = ap_realloc(v, (size_t)cap * sizeof *q);                               \
            if (!q) {                                                                              \
                ap_free(v);                                                                           \
                return ap_err_set(err, AP_ERR_NOMEM, "family: out of memory");                     \
            }                                                                                      \
            v = q;                                                                                 \
        }                                                                                          \
        v[k].shape = (sh);                                                                         \
        v[k].layers = (L);                                                                         \
        v[k].params = params_at(f, (sh), (L));                                                     \
        k++;                                                                                       \
    } while (0)
    /* below the first anchor: its width, fewer layers */
    for (int64_t L = 1; L < f->shapes[0].layers; L++) PUSH(0, L);
    for (int s = 0; s < f->nshapes; s++) {
        int last = s == f->nshapes - 1;
        int64_t stop = last ? 8 * f->shapes[s].layers : 0;
        int64_t next = last ? 0 : params_at(f, s + 1, f->shapes[s + 1].layers);
        for (int64_t L = f->shapes[s].layers; L <= AP_MODEL_MAX_LAYERS; L++) {
            if (last ? L > stop : params_at(f, s, L) >= next) break;
            PUSH(s, L);
        }
    }
#undef PUSH
    *out = v;
    *n = k;
    return AP_OK;
}

/* ---- lookup and files ----------------------------------------------------------------------- */

/* Sort anchors by parameters (insertion sort; a file may list them in any order). */
static void sort_shapes(ap_family *f) {
    for (int i = 1; i < f->nshapes; i++) {
        ap_family_shape s = f->shapes[i];
        ap_model m;
        apply_shape(f, &s, s.layers, &m);
        int64_t ps = ap_model_total_params(&m);
        int j = i - 1;
        while (j >= 0) {
            apply_shape(f, &f->shapes[j], f->shapes[j].layers, &m);
            if (ap_model_total_params(&m) <= ps) break;
            f->shapes[j + 1] = f->shapes[j];
            j--;
        }
        f->shapes[j + 1] = s;
    }
}

static ap_status read_file(const char *path, ap_family *f, ap_err *err) {
    ap_json *root = ap_json_parse_file(path, err);
    if (!root) return AP_ERR_INPUT;
    ap_status st = AP_OK;
    char *text = NULL;
    if (!ap_json_is_object(root)) {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: a family file must be a JSON object", path);
        goto done;
    }
    for (ap_json *it = ap_json_first(root); it; it = ap_json_next(it)) {
        const char *k = ap_json_key(it);
        if (k && k[0] != '_' && strcmp(k, "name") && strcmp(k, "model") && strcmp(k, "shapes") &&
            strcmp(k, "cite")) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%.64s' (name, cite, model, "
                            "shapes)", path, k);
            goto done;
        }
    }
    if ((st = ap_json_get_str(root, "name", f->name, sizeof f->name, NULL, path, err)) != AP_OK)
        goto done;
    int present = 0;
    if ((st = ap_json_get_str(root, "cite", f->cite, sizeof f->cite, &present, path, err)) != AP_OK)
        goto done;
    if (!present) snprintf(f->cite, sizeof f->cite, "%s", path);
    ap_json *jm = ap_json_get(root, "model");
    if (!jm || !ap_json_is_object(jm)) {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'model': must be a model object (native "
                        "fields or a Hugging Face config)", path);
        goto done;
    }
    text = ap_json_print(jm, 0);
    if (!text) {
        st = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    char where[300];
    snprintf(where, sizeof where, "%s: field 'model'", path);
    if ((st = ap_model_parse(text, strlen(text), where, &f->base, err)) != AP_OK) goto done;
    ap_json *js = ap_json_get(root, "shapes");
    if (!js || !ap_json_is_array(js) || ap_json_size(js) < 1 ||
        ap_json_size(js) > AP_FAMILY_MAX_SHAPES) {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'shapes': must be a list of 1 to %d shapes",
                        path, AP_FAMILY_MAX_SHAPES);
        goto done;
    }
    f->nshapes = ap_json_size(js);
    for (int i = 0; i < f->nshapes; i++) {
        ap_json *e = ap_json_at(js, i);
        ap_family_shape *s = &f->shapes[i];
        memset(s, 0, sizeof *s);
        char w[320];
        snprintf(w, sizeof w, "%s: shapes[%d]", path, i);
        if (!ap_json_is_object(e)) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: must be an object", w);
            goto done;
        }
        /* a misspelt key would leave its field at the default: refused, as at the top level */
        static const char *const shape_fields[] = {"name", "layers", "hidden", "heads",
                                                   "kv_heads", "ffn_hidden"};
        for (ap_json *m = ap_json_first(e); m; m = ap_json_next(m)) {
            const char *k = ap_json_key(m);
            int ok;
            if (!k || k[0] == '_') continue; /* "_note": comments */
            const char *best = ap_closest_word(k, shape_fields, 6, &ok);
            if (!ok) {
                st = ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%.64s' (did you mean "
                                "'%s'?)", w, k, best);
                goto done;
            }
        }
        snprintf(s->name, sizeof s->name, "%.20s-%d", f->name, i);
        if ((st = ap_json_get_str(e, "name", s->name, sizeof s->name, &present, w, err)) != AP_OK ||
            (st = ap_json_get_int(e, "layers", 1, AP_MODEL_MAX_LAYERS, &s->layers, NULL, w, err)) !=
                AP_OK ||
            (st = ap_json_get_int(e, "hidden", 1, AP_MODEL_MAX_HIDDEN, &s->hidden, NULL, w, err)) !=
                AP_OK ||
            (st = ap_json_get_int(e, "heads", 1, AP_MODEL_MAX_HEADS, &s->heads, NULL, w, err)) !=
                AP_OK ||
            (st = ap_json_get_int(e, "kv_heads", 1, AP_MODEL_MAX_HEADS, &s->kv_heads, &present, w,
                                  err)) != AP_OK ||
            (st = ap_json_get_int(e, "ffn_hidden", 1, AP_MODEL_MAX_FFN, &s->ffn_hidden, NULL, w,
                                  err)) != AP_OK)
            goto done;
        /* the head dim is hidden / heads (apply_shape): a remainder would count another model */
        if (s->hidden % s->heads != 0) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'heads' = %lld does not divide "
                            "'hidden' = %lld", w, (long long)s->heads, (long long)s->hidden);
            goto done;
        }
        ap_model m;
        apply_shape(f, s, s->layers, &m);
        if ((st = ap_model_validate(&m, w, err)) != AP_OK) goto done;
    }
    sort_shapes(f);
done:
    ap_free(text);
    ap_json_free(root);
    return st;
}

ap_status ap_family_get(const char *name, ap_family *out, ap_err *err) {
    memset(out, 0, sizeof *out);
    if (!name || !*name) return ap_err_set(err, AP_ERR_INPUT, "--family: no family given");
    for (int i = 0; i < NBUILTIN; i++) {
        const builtin *b = &builtins[i];
        if (strcmp(name, b->name)) continue;
        snprintf(out->name, sizeof out->name, "%s", b->name);
        snprintf(out->cite, sizeof out->cite, "%s", b->cite);
        ap_model_init(&out->base);
        b->base(&out->base);
        out->nshapes = b->n;
        memcpy(out->shapes, b->shapes, sizeof b->shapes);
        sort_shapes(out);
        return AP_OK;
    }
    if (!strchr(name, '/') && !strstr(name, ".json"))
        return ap_err_set(err, AP_ERR_INPUT, "--family: unknown family '%s' (built-in: %s; or a "
                          "JSON file)", name, ap_family_builtin_names());
    return read_file(name, out, err);
}
