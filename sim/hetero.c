/*
 * hetero.c - heterogeneous-memory training runs (hetero.h): the trainers' option defaults and
 * their validation, the model's parameters in registration order, the operator template of one
 * micro-batch, and ap_hetero_run, which assembles them and hands over to the trainer's
 * simulator (gemini.c, zero_infinity.c).
 *
 * The operator template: one operator per module call that touches parameters, in execution
 * order (forward, the recomputed forward before each layer's backward, backward). Its
 * non-model data is the event simulator's (sim/nonmodel.c, periods between such calls), its
 * compute time the cost model's per-micro-batch forward and backward time split by FLOPs.
 * Splitting an event-simulator period into several modules (q, k, v; gate, up) gives each the
 * period's peak: the outputs of q, k and v are one tensor there.
 *
 * Not here: what moves (the trainers' files), the report (hetero_report.c).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hetero_int.h"

/* ---- options ------------------------------------------------------------------------------ */

void ap_plan_hetero_init(ap_plan_hetero *h) {
    memset(h, 0, sizeof *h);
    /* GeminiPlugin.__init__ (colossalai/booster/plugin/gemini_plugin.py) */
    h->placement = AP_GEMINI_OFF;
    h->shard_param_frac = 1.0;
    h->offload_optim_frac = 0.0;
    h->offload_param_frac = 0.0;
    h->warmup_non_model_data_ratio = 0.8;
    h->steady_cuda_cap_ratio = 0.9;
    h->gpu_margin_mem_ratio = 0.0;
    h->enable_async_reduce = 1;
    h->pin_memory = 1; /* "enable_async_reduce sets pin_memory=True" (same constructor) */
    h->max_prefetch = 0;
    h->search_range_m = 32;
    h->min_chunk_size_m = 32;
    h->hidden_dim = 0;
    /* DeepSpeedZeroOffloadParamConfig / DeepSpeedZeroOffloadOptimizerConfig
       (deepspeed/runtime/zero/offload_config.py) and DeepSpeedZeroConfig (zero/config.py) */
    h->ds_optimizer = AP_OFFLOAD_DEV_NONE;
    h->ds_params = AP_OFFLOAD_DEV_NONE;
    h->ds_optimizer_pin = 1;
    h->ds_param_pin = 1;
    h->ds_param_buffer_count = 5;
    h->ds_param_buffer_size = 100000000;
    h->ds_max_in_cpu = 1000000000;
    h->ds_optimizer_buffer_count = 4;
    h->ds_sub_group_size = 1000000000;
    h->ds_reduce_bucket_size = 500000000;
    h->ds_prefetch_bucket_size = 50000000;
    h->ds_param_persistence_threshold = 100000;
    h->ds_max_live_parameters = 1000000000;
    h->ds_max_reuse_distance = 1000000000;
}

const char *ap_gemini_placement_name(ap_gemini_placement p) {
    return p == AP_GEMINI_STATIC ? "static" : p == AP_GEMINI_AUTO ? "auto" : "off";
}

const char *ap_offload_device_name(ap_offload_device d) {
    return d == AP_OFFLOAD_DEV_CPU ? "cpu" : d == AP_OFFLOAD_DEV_NVME ? "nvme" : "none";
}

ap_status ap_offload_device_parse(const char *s, const char *what, ap_offload_device *out,
                                  ap_err *err) {
    if (s && !strcasecmp(s, "none")) return (*out = AP_OFFLOAD_DEV_NONE), AP_OK;
    if (s && !strcasecmp(s, "cpu")) return (*out = AP_OFFLOAD_DEV_CPU), AP_OK;
    if (s && !strcasecmp(s, "nvme")) return (*out = AP_OFFLOAD_DEV_NVME), AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not an offload device (none, cpu or nvme)",
                      what, s ? s : "");
}

ap_status ap_gemini_placement_parse(const char *s, const char *what, ap_gemini_placement *out,
                                    ap_err *err) {
    if (s && !strcasecmp(s, "static")) return (*out = AP_GEMINI_STATIC), AP_OK;
    if (s && !strcasecmp(s, "auto")) return (*out = AP_GEMINI_AUTO), AP_OK;
    if (s && !strcasecmp(s, "off")) return (*out = AP_GEMINI_OFF), AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a Gemini placement (static or auto)",
                      what, s ? s : "");
}

static int frac_ok(double v) { return isfinite(v) && v >= 0 && v <= 1; }

ap_status ap_plan_hetero_validate(const ap_plan *p, const ap_cluster *c, const char *where,
                                  ap_err *err) {
    const ap_plan_hetero *h = &p->hetero;
    if (!where) where = "plan";
    if (h->placement != AP_GEMINI_OFF) {
        static const struct { const char *name; size_t off; } fr[] = {
            {"shard_param_frac", offsetof(ap_plan_hetero, shard_param_frac)},
            {"offload_optim_frac", offsetof(ap_plan_hetero, offload_optim_frac)},
            {"offload_param_frac", offsetof(ap_plan_hetero, offload_param_frac)},
            {"warmup_non_model_data_ratio", offsetof(ap_plan_hetero, warmup_non_model_data_ratio)},
            {"steady_cuda_cap_ratio", offsetof(ap_plan_hetero, steady_cuda_cap_ratio)},
            {"gpu_margin_mem_ratio", offsetof(ap_plan_hetero, gpu_margin_mem_ratio)}};
        for (size_t i = 0; i < sizeof fr / sizeof fr[0]; i++) {
            double v = *(const double *)((const char *)h + fr[i].off);
            if (!frac_ok(v))
                return ap_err_set(err, AP_ERR_INPUT, "%s: %s must be a fraction in [0, 1], got %g",
                                  where, fr[i].name, v);
        }
        if (p->trainer != AP_TRAINER_COLOSSALAI)
            return ap_err_set(err, AP_ERR_INPUT, "%s: Gemini placement is Colossal-AI's "
                              "(GeminiPlugin); the trainer is %s", where,
                              ap_trainer_name(p->trainer));
        /* a static placement's two offload fractions are the plan's offload fractions (the
           same GeminiPlugin arguments; the trainer table and the memory model read the plan's) */
        if (h->placement == AP_GEMINI_STATIC && (h->offload_optim_frac != p->offload_optimizer ||
                                                 h->offload_param_frac != p->offload_params))
            return ap_err_set(err, AP_ERR_INPUT, "%s: the static placement's offload_optim_frac "
                              "%g and offload_param_frac %g differ from the plan's offload "
                              "optimizer %g and params %g; they are the same GeminiPlugin "
                              "arguments", where, h->offload_optim_frac, h->offload_param_frac,
                              p->offload_optimizer, p->offload_params);
        if (h->placement == AP_GEMINI_STATIC && h->offload_param_frac > 0 &&
            (h->shard_param_frac != 1.0 || h->offload_optim_frac != 1.0))
            /* placement_policy.py StaticPlacementPolicy.__init__ warns and sets it to 0 */
            return ap_err_set(err, AP_ERR_INPUT, "%s: offload_param_frac %g is ignored by "
                              "Colossal-AI unless shard_param_frac = offload_optim_frac = 1.0 "
                              "(got %g and %g); set both to 1.0 or offload_param_frac to 0",
                              where, h->offload_param_frac, h->shard_param_frac,
                              h->offload_optim_frac);
        if (h->steady_cuda_cap_ratio <= 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s: steady_cuda_cap_ratio must be above 0",
                              where);
        if (h->max_prefetch < 0 || h->max_prefetch > 1024)
            return ap_err_set(err, AP_ERR_INPUT, "%s: max_prefetch must be in [0, 1024], got %d",
                              where, h->max_prefetch);
        if (!(h->search_range_m >= 0 && h->search_range_m <= 65536) ||
            !(h->min_chunk_size_m >= 0 && h->min_chunk_size_m <= 65536))
            return ap_err_set(err, AP_ERR_INPUT, "%s: search_range_m and min_chunk_size_m must be "
                              "in [0, 65536] (units of 2^20 elements)", where);
        if (h->hidden_dim < 0 || h->hidden_dim > 1000000000)
            return ap_err_set(err, AP_ERR_INPUT, "%s: hidden_dim must be in [0, 1e9]", where);
    }
    if (h->ds_optimizer != AP_OFFLOAD_DEV_NONE || h->ds_params != AP_OFFLOAD_DEV_NONE) {
        if (p->trainer != AP_TRAINER_DEEPSPEED)
            return ap_err_set(err, AP_ERR_INPUT, "%s: offload_optimizer/offload_param devices are "
                              "DeepSpeed's; the trainer is %s", where, ap_trainer_name(p->trainer));
        if (h->ds_params != AP_OFFLOAD_DEV_NONE && p->zero != 3)
            /* offload_config.py: "Valid only with stage 3" */
            return ap_err_set(err, AP_ERR_INPUT, "%s: offload_param needs ZeRO stage 3 (got %d)",
                              where, p->zero);
        if (h->ds_optimizer != AP_OFFLOAD_DEV_NONE && p->zero < 1)
            return ap_err_set(err, AP_ERR_INPUT, "%s: offload_optimizer needs ZeRO stage 1-3",
                              where);
        if (h->ds_optimizer == AP_OFFLOAD_DEV_NVME && p->zero != 3)
            /* stage_1_and_2.py handles only cpu_offload; NVMe swapping is stage3.py's */
            return ap_err_set(err, AP_ERR_INPUT, "%s: offload_optimizer device nvme needs ZeRO "
                              "stage 3 (ZeRO-Infinity); stages 1-2 offload to cpu only", where);
        static const struct { const char *name; size_t off; int64_t lo; } iv[] = {
            {"buffer_count (offload_param)", offsetof(ap_plan_hetero, ds_param_buffer_count), 1},
            {"buffer_size (offload_param)", offsetof(ap_plan_hetero, ds_param_buffer_size), 1},
            {"max_in_cpu", offsetof(ap_plan_hetero, ds_max_in_cpu), 0},
            {"buffer_count (offload_optimizer)", offsetof(ap_plan_hetero, ds_optimizer_buffer_count), 1},
            {"sub_group_size", offsetof(ap_plan_hetero, ds_sub_group_size), 1},
            {"reduce_bucket_size", offsetof(ap_plan_hetero, ds_reduce_bucket_size), 1},
            {"stage3_prefetch_bucket_size", offsetof(ap_plan_hetero, ds_prefetch_bucket_size), 0},
            {"stage3_param_persistence_threshold",
             offsetof(ap_plan_hetero, ds_param_persistence_threshold), 0},
            {"stage3_max_live_parameters", offsetof(ap_plan_hetero, ds_max_live_parameters), 0},
            {"stage3_max_reuse_distance", offsetof(ap_plan_hetero, ds_max_reuse_distance), 0}};
        for (size_t i = 0; i < sizeof iv / sizeof iv[0]; i++) {
            int64_t v = *(const int64_t *)((const char *)h + iv[i].off);
            if (v < iv[i].lo || v > (int64_t)1e13)
                return ap_err_set(err, AP_ERR_INPUT, "%s: %s must be in [%lld, 1e13], got %lld",
                                  where, iv[i].name, (long long)iv[i].lo, (long long)v);
        }
        if (c && (h->ds_optimizer == AP_OFFLOAD_DEV_NVME || h->ds_params == AP_OFFLOAD_DEV_NVME) &&
            !(c->nvme_bytes > 0))
            return ap_err_set(err, AP_ERR_INPUT, "%s: NVMe offload needs the cluster's NVMe: "
                              "--nvme SIZE with --nvme-bw BW (or 'nvme' and 'nvme_bw' in the "
                              "cluster file)", where);
    }
    return AP_OK;
}

int ap_plan_hetero_default(ap_plan *p) {
    if (p->trainer == AP_TRAINER_COLOSSALAI && p->zero == 3 && p->pp == 1) {
        ap_plan_hetero_init(&p->hetero);
        /* offload_param_frac is ignored unless the other two fractions are 1.0 (GeminiPlugin) */
        if (p->offload_params > 0 && p->offload_optimizer < 1.0) return 0;
        p->hetero.placement = AP_GEMINI_STATIC;
        p->hetero.offload_optim_frac = p->offload_optimizer;
        p->hetero.offload_param_frac = p->offload_params;
        return 1;
    }
    if (p->trainer == AP_TRAINER_DEEPSPEED && p->pp == 1 && p->cp == 1 &&
        (p->offload_optimizer > 0 || p->offload_params > 0)) {
        ap_plan_hetero_init(&p->hetero);
        if (p->offload_optimizer > 0) p->hetero.ds_optimizer = AP_OFFLOAD_DEV_CPU;
        if (p->offload_params > 0) p->hetero.ds_params = AP_OFFLOAD_DEV_CPU;
        return 1;
    }
    return 1;
}

int ap_hetero_applies(const ap_plan *p) {
    if (p->trainer == AP_TRAINER_COLOSSALAI && p->hetero.placement != AP_GEMINI_OFF) return 1;
    if (p->trainer == AP_TRAINER_DEEPSPEED &&
        (p->hetero.ds_optimizer != AP_OFFLOAD_DEV_NONE ||
         p->hetero.ds_params != AP_OFFLOAD_DEV_NONE))
        return 1;
    return 0;
}

ap_status ap_hetero_size_param_buffers(const ap_model *m, ap_plan *p, ap_err *err) {
    if (p->trainer != AP_TRAINER_DEEPSPEED || p->zero != 3 ||
        p->hetero.ds_params != AP_OFFLOAD_DEV_NVME)
        return AP_OK;
    ap_hparam *v = NULL;
    int n = 0;
    ap_status st = ap_hetero_params(m, p->tp > 0 ? p->tp : 1, &v, &n, err);
    if (st != AP_OK) return st;
    int64_t largest = 0;
    for (int i = 0; i < n; i++)
        if (v[i].numel > largest) largest = v[i].numel;
    ap_free(v);
    int64_t Z = p->dp > 0 ? p->dp : 1;
    int64_t part = (largest + Z - 1) / Z; /* stage 3 partitions: ceil(numel / world) */
    if (part > p->hetero.ds_param_buffer_size) p->hetero.ds_param_buffer_size = part;
    return AP_OK;
}

void ap_hetero_opts_init(ap_hetero_opts *o) {
    memset(o, 0, sizeof *o);
    o->headroom_bytes = AP_DEFAULT_HEADROOM_BYTES;
    o->steps = 3;
    o->record = 1;
}

/* ---- parameters ----------------------------------------------------------------------------- */

static const char *const hmod_names[AP_HMOD_COUNT] = {
    "embed_tokens", "embed_positions", "input_layernorm", "q_proj", "k_proj", "v_proj",
    "qkv_proj", "o_proj", "post_attention_layernorm", "gate_proj", "up_proj", "down_proj",
    "fc1", "fc2", "final_norm", "lm_head"};

const char *ap_hmod_name(int mod) {
    return mod >= 0 && mod < AP_HMOD_COUNT ? hmod_names[mod] : "optimizer";
}

/* Registration orders of the Hugging Face implementations (modeling_*.py __init__): */
typedef enum {
    ARCH_LLAMA = 0, /* LlamaDecoderLayer: self_attn (q,k,v,o), mlp, input_layernorm,
                       post_attention_layernorm; model: embed_tokens, layers, norm; lm_head */
    ARCH_GPT2,      /* GPT2Block: ln_1, attn (c_attn, c_proj), ln_2, mlp (c_fc, c_proj); GPT2Model:
                       wte, wpe, h, ln_f; lm_head tied */
    ARCH_OPT,       /* OPTDecoderLayer: self_attn (k,v,q,out), self_attn_layer_norm, fc1, fc2,
                       final_layer_norm; OPTDecoder: embed_tokens, embed_positions,
                       final_layer_norm, layers; lm_head tied */
    ARCH_FUSED      /* fused query_key_value (GPT-NeoX, BLOOM, Falcon): GPT-2's order */
} arch_kind;

static arch_kind arch_of(const ap_model *m) {
    if (!strcmp(m->model_type, "gpt2")) return ARCH_GPT2;
    if (!strcmp(m->model_type, "opt")) return ARCH_OPT;
    if (!strcmp(m->model_type, "gpt_neox") || !strcmp(m->model_type, "bloom") ||
        !strcmp(m->model_type, "falcon"))
        return ARCH_FUSED;
    return ARCH_LLAMA;
}

static int64_t cdiv64(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

typedef struct plist {
    ap_hparam *v;
    int n, cap;
    int nomem;
} plist;

static void padd(plist *l, int64_t numel, int32_t layer, int module, int is_bias) {
    if (numel <= 0 || l->nomem) return;
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 256;
        ap_hparam *q = ap_realloc(l->v, (size_t)nc * sizeof *q);
        if (!q) {
            l->nomem = 1;
            return;
        }
        l->v = q;
        l->cap = nc;
    }
    l->v[l->n++] = (ap_hparam){numel, layer, (int8_t)module, (int8_t)is_bias};
}

/* A norm of width h: weight (+ bias for LayerNorm). */
static void pnorm(plist *l, int64_t per_norm, int64_t h, int32_t layer, int module) {
    if (per_norm <= 0) return;
    padd(l, h, layer, module, 0);
    if (per_norm > h) padd(l, per_norm - h, layer, module, 1);
}

/* A linear layer: weight out x in, then its bias of out when it has one. */
static void plin(plist *l, int64_t out, int64_t in, int32_t layer, int module, int has_bias) {
    padd(l, out * in, layer, module, 0);
    if (has_bias) padd(l, out, layer, module, 1);
}

/* One layer's parameters, in its registration order. */
static void layer_params(const ap_model *m, arch_kind ak, int64_t t, int32_t i, plist *l,
                         int64_t *sum_t1) {
    ap_layer_info li;
    ap_model_layer(m, i, &li);
    int64_t h = m->hidden, a = m->heads, kv = m->kv_heads, d = m->head_dim;
    int64_t f = li.mlp_ffn;
    int qb = m->bias || m->qkv_bias, ob = m->bias;
    int64_t per_norm = m->norms_per_layer > 0 ? li.norm_params / m->norms_per_layer : 0;
    /* column-parallel outputs split by t (replicated KV heads when t > kv: one head each) */
    int64_t qo = cdiv64(a * d, t), ko = cdiv64(kv, t) * d;
    int swi = m->act == AP_ACT_SWIGLU;
    int64_t ft = cdiv64(f, t);
    int ln2 = m->norms_per_layer >= 2;
    int64_t norms_extra = m->norms_per_layer > 2 ? (m->norms_per_layer - 2) * per_norm : 0;
    /* separate q, k, v projections (OPT registers k, v, q), then the output projection */
    const int64_t po[3] = {qo, ko, ko};
    const int mods[3] = {AP_HMOD_Q, AP_HMOD_K, AP_HMOD_V};
    const int kvq[3] = {1, 2, 0}, qkv[3] = {0, 1, 2};
    const int *ord = ak == ARCH_OPT ? kvq : qkv;
    switch (ak) {
    case ARCH_LLAMA:
    case ARCH_OPT:
        for (int k = 0; k < 3; k++) plin(l, po[ord[k]], h, i, mods[ord[k]], qb);
        plin(l, h, qo, i, AP_HMOD_O, ob);
        if (ak == ARCH_OPT) pnorm(l, per_norm, h, i, AP_HMOD_LN1);
        break;
    case ARCH_GPT2:
    case ARCH_FUSED:
        pnorm(l, per_norm, h, i, AP_HMOD_LN1);
        plin(l, 2 * ko + qo, h, i, AP_HMOD_QKV, qb);
        plin(l, h, qo, i, AP_HMOD_O, ob);
        if (ln2) pnorm(l, per_norm + norms_extra, h, i, AP_HMOD_LN2);
        break;
    }
    /* the MLP: gate, up, down (SwiGLU) or fc1, fc2 */
    if (swi) {
        plin(l, ft, h, i, AP_HMOD_GATE, ob);
        plin(l, ft, h, i, AP_HMOD_UP, ob);
        plin(l, h, ft, i, AP_HMOD_DOWN, ob);
    } else {
        plin(l, ft, h, i, AP_HMOD_FC1, ob);
        plin(l, h, ft, i, AP_HMOD_FC2, ob);
    }
    /* the norms after the MLP: Llama's two, OPT's final_layer_norm */
    if (ak == ARCH_LLAMA) pnorm(l, per_norm, h, i, AP_HMOD_LN1);
    if (ak != ARCH_GPT2 && ak != ARCH_FUSED && ln2)
        pnorm(l, per_norm + norms_extra, h, i, AP_HMOD_LN2);
    /* the same layer at t = 1, to check the layout against the model's own count */
    int64_t s1 = (a * d + 2 * kv * d) * h + (qb ? a * d + 2 * kv * d : 0) + a * d * h + (ob ? h : 0) +
                 (swi ? 3 * f * h + (ob ? 2 * f + h : 0) : 2 * f * h + (ob ? f + h : 0)) +
                 m->norms_per_layer * per_norm;
    *sum_t1 += s1 - li.total_params;
}

ap_status ap_hetero_params(const ap_model *m, int t, ap_hparam **out, int *n, ap_err *err) {
    *out = NULL;
    *n = 0;
    if (t < 1) return ap_err_set(err, AP_ERR_INPUT, "hetero: tensor-parallel degree must be >= 1");
    if (m->moe.experts > 0 || m->mla.kv_lora_rank > 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: the heterogeneous-memory simulation covers "
                          "dense models (no MoE experts or latent attention)", m->name);
    if (m->layers > 100000)
        return ap_err_set(err, AP_ERR_INPUT, "%s: %lld layers are too many to list parameter by "
                          "parameter", m->name, (long long)m->layers);
    arch_kind ak = arch_of(m);
    int64_t h = m->hidden, V = m->vocab;
    plist l = {0};
    int64_t mismatch = 0;
    int64_t emb_norm = ap_model_embedding_params(m) - V * h - m->learned_pos * h;
    int64_t final_norm = ap_model_head_params(m) - (m->tied_embeddings ? 0 : V * h);
    /* embeddings (vocabulary-parallel), learned positions, BLOOM's embedding norm */
    padd(&l, cdiv64(V, t) * h, -1, AP_HMOD_EMBED, 0);
    padd(&l, m->learned_pos * h, -1, AP_HMOD_POS, 0);
    if (emb_norm > 0) pnorm(&l, emb_norm, h, -1, AP_HMOD_EMBED);
    if (ak == ARCH_OPT) pnorm(&l, final_norm, h, -1, AP_HMOD_FINAL_NORM);
    for (int64_t i = 0; i < m->layers; i++) layer_params(m, ak, t, (int32_t)i, &l, &mismatch);
    if (ak != ARCH_OPT) pnorm(&l, final_norm, h, -1, AP_HMOD_FINAL_NORM);
    if (!m->tied_embeddings) padd(&l, cdiv64(V, t) * h, -1, AP_HMOD_HEAD, 0);
    if (l.nomem) {
        ap_free(l.v);
        return ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory listing parameters");
    }
    if (mismatch != 0) {
        ap_free(l.v);
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: the parameter layout of model_type '%s' "
                          "differs from the model's count by %lld per model; the "
                          "heterogeneous-memory simulation does not know it",
                          m->name, m->model_type, (long long)mismatch);
    }
    *out = l.v;
    *n = l.n;
    return AP_OK;
}

/* ---- the operator template -------------------------------------------------------------- */

/* Modules of an event-simulator period, in forward order (ak: arch_of(m), named once per
 * template by the caller, not per period). */
static int period_modules(const ap_model *m, arch_kind ak, int kind, int mods[4]) {
    int swi = m->act == AP_ACT_SWIGLU;
    switch (kind) {
    case AP_PERIOD_EMBED:
        mods[0] = AP_HMOD_EMBED;
        if (m->learned_pos > 0) return mods[1] = AP_HMOD_POS, 2;
        return 1;
    case AP_PERIOD_LN1: return mods[0] = AP_HMOD_LN1, 1;
    case AP_PERIOD_QKV:
        if (ak == ARCH_GPT2 || ak == ARCH_FUSED) return mods[0] = AP_HMOD_QKV, 1;
        mods[0] = AP_HMOD_Q, mods[1] = AP_HMOD_K, mods[2] = AP_HMOD_V;
        return 3;
    case AP_PERIOD_PROJ: return mods[0] = AP_HMOD_O, 1;
    case AP_PERIOD_LN2: return m->norms_per_layer >= 2 ? (mods[0] = AP_HMOD_LN2, 1) : 0;
    case AP_PERIOD_FC1:
        if (swi) return mods[0] = AP_HMOD_GATE, mods[1] = AP_HMOD_UP, 2;
        return mods[0] = AP_HMOD_FC1, 1;
    case AP_PERIOD_FC2: return mods[0] = swi ? AP_HMOD_DOWN : AP_HMOD_FC2, 1;
    case AP_PERIOD_FINAL_NORM: return m->final_norm ? (mods[0] = AP_HMOD_FINAL_NORM, 1) : 0;
    case AP_PERIOD_HEAD: return mods[0] = AP_HMOD_HEAD, 1;
    }
    return 0;
}

/* Parameters of (layer, module): the tied head uses the token embedding. */
static int module_params(const hctx *x, const int32_t *first_of_layer, int32_t layer, int module,
                         int32_t *out) {
    int n = 0;
    int32_t lo = 0, hi = x->nparams;
    if (layer >= 0) {
        lo = first_of_layer[layer];
        hi = first_of_layer[layer + 1];
    }
    int want = module;
    if (module == AP_HMOD_HEAD && x->m->tied_embeddings) want = AP_HMOD_EMBED;
    for (int32_t i = lo; i < hi && n < HOP_MAXP; i++) {
        const ap_hparam *pr = &x->params[i];
        if (pr->layer != layer || pr->module != want) continue;
        if (module == AP_HMOD_HEAD && x->m->tied_embeddings && pr->is_bias) continue;
        out[n++] = i;
    }
    return n;
}

static void ops_flops(hctx *x);

static ap_status build_ops(hctx *x, const ap_sim_period *per, int nper, ap_err *err) {
    const ap_model *m = x->m;
    int64_t L = m->layers;
    int32_t *first = ap_malloc((size_t)(L + 2) * sizeof *first);
    /* at most four modules per period; each one used is written whole below (memset), so the
       rest stays unwritten: zeroing all of it was 3% of fit's instructions */
    hop *ops = ap_malloc(((size_t)nper * 4 + 4) * sizeof *ops);
    x->ops = ops; /* the run's own (x->tpl NULL) */
    if (!first || !ops) {
        ap_free(first);
        return ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
    }
    /* first parameter index of each layer (layers are contiguous in every order above) */
    for (int64_t i = 0; i <= L + 1; i++) first[i] = x->nparams;
    for (int32_t i = x->nparams - 1; i >= 0; i--)
        if (x->params[i].layer >= 0) first[x->params[i].layer] = i;
    for (int64_t i = L - 1; i >= 0; i--)
        if (first[i] > first[i + 1]) first[i] = first[i + 1];
    /* FLOPs of one micro-batch on this rank: 2 per weight element per token (x2 backward),
       attention scores and values 2*b*a/t*s*s*(d_qk + d_v) in the query-key-value period
       (Narayanan et al. 2021 Eq. 3 convention, README "Throughput definitions") */
    const ap_plan *p = x->p;
    double tokens = (double)p->mbs * (double)p->seq;
    double attn = 2.0 * (double)p->mbs * ((double)m->heads / p->tp) * (double)p->seq *
                  (double)p->seq * 2.0 * (double)m->head_dim;
    const arch_kind ak = arch_of(m);
    int n = 0;
    for (int k = 0; k < nper; k++) {
        const ap_sim_period *q = &per[k];
        int mods[4];
        int nm = period_modules(m, ak, q->kind, mods);
        int32_t layer = q->kind == AP_PERIOD_EMBED || q->kind == AP_PERIOD_FINAL_NORM ||
                                q->kind == AP_PERIOD_HEAD
                            ? -1
                            : q->layer;
        if (nm == 0) {
            /* no parameters here (a shared norm): its data belongs to the running operator */
            if (n > 0 && q->peak_bytes > ops[n - 1].nmd_peak) ops[n - 1].nmd_peak = q->peak_bytes;
            continue;
        }
        for (int j = 0; j < nm; j++) {
            int mod = mods[q->phase == AP_PHASE_BWD ? nm - 1 - j : j];
            hop *o = &ops[n];
            memset(o, 0, sizeof *o);
            o->module = (int8_t)mod;
            o->phase = q->phase;
            o->layer = layer;
            o->nparams = (int8_t)module_params(x, first, layer, mod, o->params);
            o->nmd_start = q->start_bytes;
            o->nmd_peak = q->peak_bytes;
            double w = 0;
            for (int i = 0; i < o->nparams; i++)
                if (!x->params[o->params[i]].is_bias && mod != AP_HMOD_EMBED && mod != AP_HMOD_POS &&
                    mod != AP_HMOD_LN1 && mod != AP_HMOD_LN2 && mod != AP_HMOD_FINAL_NORM)
                    w += 2.0 * tokens * (double)x->params[o->params[i]].numel;
            if (q->kind == AP_PERIOD_QKV && j == nm - 1) w += attn;
            o->flops = q->phase == AP_PHASE_BWD ? 2.0 * w : w;
            if (q->phase == AP_PHASE_BWD)
                for (int i = 0; i < o->nparams; i++)
                    o->wgrad_bytes += (int64_t)(x->elt * (double)x->params[o->params[i]].numel);
            if (o->nparams > 0) n++;
        }
    }
    x->nops = n;
    /* gradient hooks: after the last backward use of each parameter (AccumulateGrad fires once
       the whole gradient is summed: the tied embedding after the embedding's backward) */
    int32_t *last = ap_malloc((size_t)(x->nparams > 0 ? x->nparams : 1) * sizeof *last);
    if (!last) {
        ap_free(first);
        return ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
    }
    for (int i = 0; i < x->nparams; i++) last[i] = -1;
    for (int k = 0; k < n; k++)
        if (x->ops[k].phase == AP_PHASE_BWD)
            for (int i = 0; i < x->ops[k].nparams; i++) last[x->ops[k].params[i]] = k;
    for (int i = 0; i < x->nparams; i++)
        if (last[i] >= 0) {
            hop *o = &ops[last[i]];
            if (o->nhooks < HOP_MAXP) o->hooks[o->nhooks++] = i;
        }
    /* a tied head's weight gradient waits in autograd from the head's backward to the
       embedding's: non-model data in between */
    if (m->tied_embeddings) {
        int k0 = -1, k1 = -1;
        for (int k = 0; k < n; k++)
            if (x->ops[k].phase == AP_PHASE_BWD) {
                if (x->ops[k].module == AP_HMOD_HEAD && k0 < 0) k0 = k;
                if (x->ops[k].module == AP_HMOD_EMBED) k1 = k;
            }
        if (k0 >= 0 && k1 > k0) {
            int64_t g = (int64_t)(x->elt * (double)cdiv64(m->vocab, p->tp) * (double)m->hidden);
            for (int k = k0 + 1; k <= k1; k++) {
                ops[k].nmd_start += g;
                ops[k].nmd_peak += g;
            }
        }
    }
    ap_free(last);
    ap_free(first);
    ops_flops(x);
    return AP_OK;
}

/* The operators' FLOPs summed per phase (the forward; the backward with recomputation), by
 * which each run splits its own forward and backward (hx_op_compute_s). */
static void ops_flops(hctx *x) {
    const int n = x->nops;
    double ff = 0, fb = 0;
    for (int k = 0; k < n; k++) {
        if (x->ops[k].phase == AP_PHASE_FWD) ff += x->ops[k].flops;
        else fb += x->ops[k].flops;
    }
    x->ops_fwd_flops = ff;
    x->ops_bwd_flops = fb;
}

int hx_past_cutoff(const hctx *x, double extra_s) {
    const double cut = x->o->step_cutoff_s;
    /* the operators' shares of fwd_s and bwd_s may sum a rounding off them */
    return cut > 0 && (x->mb * (x->fwd_s + x->bwd_s) + extra_s) * (1 - 1e-9) +
                              x->step_overhead_s > cut;
}

/* A template as template_of leaves it in the context, with what it was built from. */
struct ap_hetero_template {
    ap_model m;
    ap_cluster c;
    ap_plan q;
    ap_calib cal;
    const ap_kernels *k;
    hop *ops;
    int nops;
    double fwd_flops, bwd_flops; /* ops_flops' sums */
    int refs;                 /* runs reading ops (template_take; under the store's lock) */
    int evicted;              /* out of its cache or store: the last run to let go frees it */
};

static void template_free(struct ap_hetero_template *t) {
    if (!t) return;
    if (t->refs > 0) {
        t->evicted = 1;
        return;
    }
    ap_free(t->ops);
    ap_free(t);
}

/* The run lets go of its template's operators (the last run of an evicted template frees it). */
static void template_release(hctx *x) {
    struct ap_hetero_template *t = x->tpl;
    if (!t) return;
    if (x->tpl_mu) pthread_mutex_lock(x->tpl_mu);
    t->refs--;
    if (t->evicted) template_free(t);
    if (x->tpl_mu) pthread_mutex_unlock(x->tpl_mu);
    x->tpl = NULL;
    x->ops = NULL;
}

void ap_hetero_cache_free(ap_hetero_cache *c) {
    if (!c) return;
    for (int i = 0; i < AP_HETERO_TEMPLATES; i++) template_free(c->tpl[i]);
    memset(c, 0, sizeof *c);
}

/* Chunk-size searches a store keeps (each a few hundred bytes) */
#define STORE_CHUNKS 32

struct ap_hetero_store {
    pthread_mutex_t mu;
    struct ap_hetero_template *tpl[AP_HETERO_TEMPLATES];
    int next;
    ap_chunk_memo e[STORE_CHUNKS];
    int enext;
};

/* The chunk memo x's runs use: its cache's own slots, or its store's under *mu (NULL: none
 * held); *n slots, *next the one replaced next. NULL without a cache. */
static ap_chunk_memo *chunk_memo(const hctx *x, int *n, int **next, pthread_mutex_t **mu) {
    ap_hetero_cache *cache = x->o->cache;
    if (!cache) return NULL;
    ap_hetero_store *sh = cache->shared;
    *n = sh ? STORE_CHUNKS : AP_HETERO_CACHE_N;
    *next = sh ? &sh->enext : &cache->next;
    *mu = sh ? &sh->mu : NULL;
    return sh ? sh->e : cache->e;
}

int hx_chunks_find(const hctx *x, uint64_t key, ap_chunk_config *out) {
    int n, *next, hit = 0;
    pthread_mutex_t *mu;
    const ap_chunk_memo *e = chunk_memo(x, &n, &next, &mu);
    if (!e) return 0;
    if (mu) pthread_mutex_lock(mu);
    for (int i = 0; i < n && !hit; i++)
        if (e[i].valid && e[i].key == key) *out = e[i].cfg, hit = 1;
    if (mu) pthread_mutex_unlock(mu);
    return hit;
}

void hx_chunks_keep(const hctx *x, uint64_t key, const ap_chunk_config *cfg) {
    int n, *next;
    pthread_mutex_t *mu;
    ap_chunk_memo *e = chunk_memo(x, &n, &next, &mu);
    if (!e) return;
    if (mu) pthread_mutex_lock(mu);
    int i = *next;
    *next = (i + 1) % n;
    e[i] = (ap_chunk_memo){key, 1, *cfg};
    if (mu) pthread_mutex_unlock(mu);
}

ap_hetero_store *ap_hetero_store_new(void) {
    ap_hetero_store *s = ap_calloc(1, sizeof *s);
    if (s && pthread_mutex_init(&s->mu, NULL) != 0) {
        ap_free(s);
        return NULL;
    }
    return s;
}

void ap_hetero_store_free(ap_hetero_store *s) {
    if (!s) return;
    for (int i = 0; i < AP_HETERO_TEMPLATES; i++) template_free(s->tpl[i]);
    pthread_mutex_destroy(&s->mu);
    ap_free(s);
}

/* The template for shape q among tpl's, or NULL. Tables built for this run alone (from a
 * profile) are never matched: their address may be another run's later. */
static struct ap_hetero_template *template_find(const hctx *x,
                                                struct ap_hetero_template *const *tpl,
                                                const ap_plan *q) {
    if (x->k_built) return NULL;
    for (int i = 0; i < AP_HETERO_TEMPLATES; i++) {
        struct ap_hetero_template *t = tpl[i];
        if (t && t->k == x->k && !memcmp(&t->q, q, sizeof *q) &&
            !memcmp(&t->m, x->m, sizeof t->m) && !memcmp(&t->c, x->c, sizeof t->c) &&
            !memcmp(&t->cal, &x->cal, sizeof t->cal))
            return t;
    }
    return NULL;
}

/* The cache's template for shape q into the context: 1 when there is one, 0 when not. The
 * run reads the template's operators in place (they are never written once kept), holding a
 * reference taken under the store's lock: another thread may evict the template meanwhile,
 * and the last run to let go of it frees it (template_release); copying them cost fit a tenth
 * of its time (a few MB per run at a thousand layers). */
static int template_take(hctx *x, const ap_plan *q) {
    ap_hetero_cache *cache = x->o->cache;
    if (!cache) return 0;
    ap_hetero_store *sh = cache->shared;
    if (sh) pthread_mutex_lock(&sh->mu);
    struct ap_hetero_template *t = template_find(x, sh ? sh->tpl : cache->tpl, q);
    if (t) {
        t->refs++;
        x->tpl = t;
        x->tpl_mu = sh ? &sh->mu : NULL;
        x->ops = t->ops;
        x->nops = t->nops;
        x->ops_fwd_flops = t->fwd_flops;
        x->ops_bwd_flops = t->bwd_flops;
    }
    if (sh) pthread_mutex_unlock(&sh->mu);
    return t != NULL;
}

/* Keep the context's template for shape q in the cache or its store (nothing when memory is
 * short, or when another thread has stored the same meanwhile: the next run builds it
 * again, or finds that one). */
static void template_keep(hctx *x, const ap_plan *q) {
    ap_hetero_cache *cache = x->o->cache;
    if (!cache || x->k_built) return;
    struct ap_hetero_template *t = ap_calloc(1, sizeof *t);
    hop *ops = ap_malloc(((size_t)x->nops + 1) * sizeof *ops);
    if (!t || !ops) {
        ap_free(t);
        ap_free(ops);
        return;
    }
    t->m = *x->m;
    t->c = *x->c;
    t->q = *q;
    t->cal = x->cal;
    t->k = x->k;
    memcpy(ops, x->ops, (size_t)x->nops * sizeof *ops);
    t->ops = ops;
    t->nops = x->nops;
    t->fwd_flops = x->ops_fwd_flops;
    t->bwd_flops = x->ops_bwd_flops;
    ap_hetero_store *sh = cache->shared;
    struct ap_hetero_template **tpl = sh ? sh->tpl : cache->tpl;
    int *next = sh ? &sh->next : &cache->tpl_next;
    if (sh) pthread_mutex_lock(&sh->mu);
    if (sh && template_find(x, tpl, q)) {
        template_free(t);
    } else {
        int slot = *next;
        *next = (slot + 1) % AP_HETERO_TEMPLATES;
        template_free(tpl[slot]);
        tpl[slot] = t;
    }
    if (sh) pthread_mutex_unlock(&sh->mu);
}

/* The template's shape of the context's plan: the same plan with every model state resident
 * (ZeRO 0, no offload), one micro-batch per step. */
static void template_shape(const hctx *x, ap_plan *q) {
    memcpy(q, x->p, sizeof *q); /* padding too: the cache compares shapes byte for byte */
    memset(&q->hetero, 0, sizeof q->hetero);
    q->zero = 0;
    q->zero_group = 0;
    q->offload_optimizer = q->offload_params = 0;
    q->overlap_param = 0; /* no ZeRO-0 trainer gathers parameters */
    q->grad_accum = 1;
    q->gbs = q->mbs * q->dp;
}

/* The shape the operators are simulated on: the template's with a data-parallel degree of 2
 * where it is larger, for models without MoE layers: a ZeRO-0 rank's non-model data per
 * operator does not depend on it (its gradient buckets and communicators are sized by the
 * parameters; tests/test_sim.c test_periods_dp), while the compute it changes through the
 * hidden reduction is each run's own (hx_op_compute_s). Plans differing in dp then share one event
 * simulation. */
static void operator_shape(const hctx *x, ap_plan *q) {
    template_shape(x, q);
    if (x->m->moe.experts == 0 && q->dp > 2) {
        q->dp = 2;
        q->gbs = q->mbs * 2;
    }
}

/* Compute time from the cost model on the template's shape (the hetero trainers handle the
 * model states), and the operators from the cache's copy when their shape was simulated
 * before. Otherwise the operators are left to hx_ops (x->ops_pending): the event simulation
 * that makes them is most of a run's cost, and a run that stops before its steps (its layout
 * cannot fit) needs none. */
static ap_status template_of(hctx *x, ap_err *err) {
    ap_plan q;
    template_shape(x, &q);
    ap_estimate_opts eo;
    ap_estimate_opts_init(&eo);
    eo.calib = x->o->calib;
    eo.kernels = x->k;
    ap_estimate e;
    ap_status st = ap_estimate_plan(x->m, x->c, &q, &eo, &e, err);
    if (st != AP_OK) return st;
    x->fwd_s = e.time.stage_fwd_s[0];
    x->bwd_s = e.time.stage_bwd_s[0];
    x->step_overhead_s = e.time.overhead_s;
    x->model_flops_step = e.tp.model_flops_per_step / (double)q.gbs * (double)x->p->gbs;
    /* a run past the cutoff needs no operators */
    if (hx_past_cutoff(x, 0)) {
        x->cut = 1;
        return AP_OK;
    }
    operator_shape(x, &q);
    if (!template_take(x, &q)) x->ops_pending = 1;
    return AP_OK;
}

ap_status hx_ops(hctx *x, ap_err *err) {
    if (!x->ops_pending) return AP_OK;
    ap_plan q;
    operator_shape(x, &q);
    ap_sim_opts so;
    ap_sim_opts_init(&so);
    so.record_curves = 1;
    so.capacity_bytes = 0;
    so.no_allocator = 1; /* the periods read live bytes */
    ap_sim *s = NULL;
    ap_status st = ap_sim_run(x->m, NULL, &q, &so, &s, err);
    if (st != AP_OK) return st;
    ap_sim_period *per = NULL;
    int nper = 0;
    st = ap_sim_periods(s, 0, &per, &nper, err);
    ap_sim_free(s);
    if (st != AP_OK) return st;
    st = build_ops(x, per, nper, err);
    ap_free(per);
    if (st == AP_OK) template_keep(x, &q);
    x->ops_pending = 0;
    return st;
}

ap_status ap_hetero_run(const ap_model *m, const ap_cluster *c, const ap_plan *pin,
                        const ap_hetero_opts *opts, ap_hetero **out, ap_err *err) {
    *out = NULL;
    ap_hetero_opts dflt;
    if (!opts) {
        ap_hetero_opts_init(&dflt);
        opts = &dflt;
    }
    if (opts->steps < 1 || opts->steps > 100)
        return ap_err_set(err, AP_ERR_INPUT, "hetero: steps must be in [1, 100]");
    if (!ap_hetero_applies(pin))
        return ap_err_set(err, AP_ERR_INPUT, "hetero: the plan uses no Gemini placement and no "
                          "DeepSpeed offload device");
    ap_plan pl = *pin;
    if (pl.dp < 1 && pl.tp > 0 && pl.pp > 0 && pl.cp > 0) pl.dp = c->gpus / (pl.tp * pl.pp * pl.cp);
    if (pl.mbs > 0 && pl.dp > 0 && pl.gbs % (pl.mbs * pl.dp) == 0)
        pl.grad_accum = pl.gbs / (pl.mbs * pl.dp);
    if (pl.pp != 1 || pl.cp != 1 || pl.vp != 1)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no pipeline or context parallelism with "
                          "%s (pp, cp and vp must be 1)", ap_trainer_get(pl.trainer)->display,
                          pl.trainer == AP_TRAINER_COLOSSALAI ? "GeminiPlugin"
                                                              : "ZeRO offload");
    ap_status st = ap_plan_check(&pl, m, c, 1, err);
    if (st != AP_OK) return st;
    if ((st = ap_plan_hetero_validate(&pl, c, "plan", err)) != AP_OK) return st;
    if (pl.trainer == AP_TRAINER_COLOSSALAI && pl.zero != 3)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "GeminiPlugin is ZeRO-3 (zero must be 3, got %d)",
                          pl.zero);
    hctx *x = ap_calloc(1, sizeof *x);
    if (!x) return ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
    x->m = m;
    x->c = c;
    x->o = opts;
    ap_plan *pp = ap_malloc(sizeof *pp);
    if (!pp) {
        ap_free(x);
        return ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
    }
    *pp = pl;
    x->p = pp;
    if (opts->calib) x->cal = *opts->calib;
    else ap_calib_default(&c->gpu, &x->cal);
    /* the kernel tables, resolved as ap_estimate_plan resolves them */
    x->k = opts->kernels;
    if (!x->k && !opts->profile) x->k = ap_kernels_published(&c->gpu);
    if (!x->k) {
        x->k_built = ap_malloc(sizeof *x->k_built);
        st = x->k_built ? ap_kernels_build(&c->gpu, opts->profile, x->k_built, err)
                        : ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
        if (st != AP_OK) {
            ap_hetero_free((ap_hetero *)x);
            return st;
        }
        x->k = x->k_built;
    }
    x->keep_recs = opts->record != 0;
    x->Z = pl.dp;
    x->mb = pl.grad_accum > 0 ? pl.grad_accum : 1;
    x->elt = pl.dtype == AP_DTYPE_FP32 ? 4.0 : 2.0;
    x->capacity_bytes = c->gpu.mem_bytes;
    x->gpus_per_node = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
    x->sum.first_over_op = -1;
    x->sum.zero_size = x->Z;
    x->sum.micro_batches = x->mb;
    x->sum.gpu_capacity_bytes = x->capacity_bytes;
    /* Gemini auto sizes its model data from the device's capacity and keeps its own 10%
       steady-state margin (steady_cuda_cap_ratio): the physical capacity is its limit */
    x->sum.headroom_bytes = pl.hetero.placement == AP_GEMINI_AUTO ? 0 : opts->headroom_bytes;
    x->sum.host_capacity_bytes = c->cpu_mem_bytes;
    x->sum.nvme_capacity_bytes = c->nvme_bytes;
    st = ap_hetero_params(m, pl.tp, &x->params, &x->nparams, err);
    if (st == AP_OK) st = template_of(x, err);
    /* CUDA context, cuBLAS workspaces and NCCL buffers as the run's NCCL allocates them */
    if (st == AP_OK) x->overhead_bytes = ap_mem_device_overhead_bytes(x->p, opts->nccl_eager);
    if (st == AP_OK && (x->cut || hx_past_cutoff(x, 0))) x->cut = 1; /* no step is simulated */
    else if (st == AP_OK)
        st = pl.trainer == AP_TRAINER_COLOSSALAI ? ap_gemini_sim(x, err) : ap_zero_offload_sim(x, err);
    if (st == AP_OK && x->nomem) st = ap_err_set(err, AP_ERR_NOMEM, "hetero: out of memory");
    if (st != AP_OK) {
        ap_hetero_free((ap_hetero *)x);
        return st;
    }
    /* the verdict */
    ap_hetero_summary *s = &x->sum;
    s->tokens_per_s = s->step_s > 0 ? (double)pl.gbs * (double)pl.seq / s->step_s : 0;
    double ref = c->gpu.peak_flops[AP_DTYPE_BF16] > 0 ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                                      : c->gpu.peak_flops[AP_DTYPE_FP16];
    s->mfu = s->step_s > 0 && ref > 0 ? x->model_flops_step / s->step_s / c->gpus / ref : 0;
    s->host_bytes_per_node = s->host_peak_bytes * x->gpus_per_node;
    int gpu_ok = s->failure[0] == '\0' &&
                 s->gpu_peak_bytes + s->headroom_bytes <= s->gpu_capacity_bytes;
    /* the host keeps 10% for the OS and the data loader (the estimate's host_fits rule) */
    int host_ok = s->host_bytes_per_node <= 0.9 * s->host_capacity_bytes;
    int nvme_ok = s->nvme_bytes_per_node <= 0 || s->nvme_bytes_per_node <= s->nvme_capacity_bytes;
    s->fits = gpu_ok && host_ok && nvme_ok;
    s->binding = !gpu_ok ? AP_BIND_GPU : !host_ok ? AP_BIND_HOST : !nvme_ok ? AP_BIND_NVME
                                                                           : AP_BIND_NONE;
    if (x->unfit) { /* stop_unfit, stop_over: what it stopped on binds; the rest is partial */
        s->stopped = x->stop_kind;
        s->fits = 0;
        s->binding = (ap_binding)x->unfit;
    } else if (x->cut) { /* step_cutoff_s: no verdict */
        s->stopped = 3;
        s->fits = 0;
        s->binding = AP_BIND_NONE;
    }
    *out = (ap_hetero *)x;
    return AP_OK;
}

void ap_hetero_free(ap_hetero *h) {
    hctx *x = (hctx *)h;
    if (!x) return;
    ap_free(x->params);
    if (x->tpl) template_release(x);
    else ap_free((void *)x->ops);
    ap_free(x->recs);
    ap_free(x->moves);
    ap_free(x->k_built);
    ap_free((void *)x->p);
    ap_free(x);
}

/* ---- the run as an estimate ------------------------------------------------------------- */

ap_status ap_hetero_estimate(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, ap_hetero_cache *cache,
                             ap_estimate *out, ap_err *err) {
    ap_estimate_opts dflt;
    if (!opts) {
        ap_estimate_opts_init(&dflt);
        opts = &dflt;
    }
    /* the shape: the same plan with every state resident */
    ap_plan q = *p;
    memset(&q.hetero, 0, sizeof q.hetero);
    q.offload_optimizer = q.offload_params = 0;
    ap_status st = ap_estimate_plan(m, c, &q, opts, out, err);
    if (st != AP_OK) return st;
    ap_hetero_opts ho;
    ap_hetero_opts_init(&ho);
    ho.headroom_bytes = opts->headroom_bytes;
    ho.calib = opts->calib;
    ho.profile = opts->profile;
    ho.kernels = opts->kernels;
    ho.nccl_eager = opts->nccl_eager;
    ho.record = 0;
    ho.cache = cache;
    ho.step_cutoff_s = opts->sim_cutoff_s;
    ho.stop_unfit = opts->sim_stop_unfit;
    ho.stop_over = opts->sim_stop_over;
    ho.stop_early = opts->sim_stop_early;
    ap_hetero *h = NULL;
    if ((st = ap_hetero_run(m, c, p, &ho, &h, err)) != AP_OK) return st;
    const ap_hetero_summary *s = ap_hetero_summary_of(h);
    const hctx *x = (const hctx *)h;
    ap_estimate *e = out;
    ap_attn_impl attn = e->plan.attn_impl; /* the kernel the estimate resolved (auto -> its) */
    e->plan = *x->p;
    e->plan.attn_impl = attn;
    /* memory: one stage (no pipeline), the simulation's peak */
    ap_stage_mem *sm = &e->stages[0];
    double model = s->gpu_peak_bytes - s->gpu_nonmodel_at_peak_bytes - x->overhead_bytes;
    sm->params_bytes = model > 0 ? model : 0;
    sm->grads_bytes = sm->optimizer_bytes = 0;
    sm->activations_bytes = s->gpu_nonmodel_at_peak_bytes;
    sm->other_bytes = 0;
    sm->allocated_bytes = sm->params_bytes + sm->activations_bytes;
    sm->reserved_bytes = sm->allocated_bytes;
    sm->device_bytes = s->gpu_peak_bytes;
    sm->host_bytes = s->host_peak_bytes;
    e->allocated_peak_bytes = e->reserved_peak_bytes = sm->allocated_bytes;
    e->device_peak_bytes = e->peak_bytes = s->gpu_peak_bytes;
    /* Gemini allocates its chunks once and reuses them: the reading is the peak */
    e->smi_peak_bytes = s->gpu_peak_bytes;
    e->headroom_bytes = s->headroom_bytes;
    e->host_bytes_per_node = s->host_bytes_per_node;
    e->host_capacity_bytes = s->host_capacity_bytes;
    e->host_fits = s->host_bytes_per_node <= 0.9 * s->host_capacity_bytes;
    e->fits = s->fits;
    e->partial = s->stopped;
    /* time: the simulation's step with the cost model's parts of the compute */
    ap_time *t = &e->time;
    t->dp_comm_s = s->collective_exposed_s;
    t->dp_comm_total_s = s->collective_exposed_s;
    t->offload_s = s->transfer_exposed_s;
    t->optimizer_s = s->cpu_adam_s + s->gpu_adam_s + s->nvme_optimizer_s;
    t->overhead_s = s->overhead_s;
    t->bubble_s = t->pp_comm_s = 0;
    t->step_s = s->step_s;
    double sum = t->compute_s + t->recompute_s + t->tp_comm_s + t->cp_comm_s + t->ep_comm_s +
                 t->dp_comm_s + t->offload_s + t->optimizer_s + t->overhead_s;
    t->compute_s += t->step_s - sum;
    ap_throughput *th = &e->tp;
    double scale = th->tokens_per_s > 0 && s->tokens_per_s > 0 ? s->tokens_per_s / th->tokens_per_s
                                                                : 0;
    th->tokens_per_s = s->tokens_per_s;
    th->model_tflops_per_gpu *= scale;
    th->hw_tflops_per_gpu *= scale;
    th->mfu *= scale;
    th->hfu *= scale;
    ap_hetero_free(h);
    return AP_OK;
}
