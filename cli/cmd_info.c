/*
 * cmd_info.c - `autoplan info MODEL [--seq S] [--json]`: what a model is made of. Parameter
 * counts (total, embedding, head, per dense and per MoE layer, routed vs active experts), FLOPs
 * per token (forward, and training = 3x forward), weight bytes per dtype, KV-cache bytes per
 * token and an activation-memory estimate per token and layer.
 *
 * Every number comes from the model module (model.h); this file only derives the per-dtype and
 * per-token sizes and prints them, as text or as one JSON object. It does not look at any
 * cluster or plan (that is `estimate`).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "autoplan/json.h"
#include "autoplan/model.h"

typedef struct {
    int64_t seq;                 /* s used for FLOPs and activations */
    int64_t total, embedding, head, nonembed, active;
    int64_t n_dense, n_moe;      /* layers of each kind */
    ap_layer_info dense, moe;    /* a representative layer of each kind */
    int64_t routed_params;       /* all routed experts of all MoE layers */
    double fwd_flops, train_flops;
    double kv_bytes_per_token;   /* bf16 */
    double act_bytes_per_token;  /* per layer, GPT formula */
} info;

static void compute(const ap_model *m, int64_t s, info *in) {
    memset(in, 0, sizeof *in);
    in->seq = s;
    in->total = ap_model_total_params(m);
    in->embedding = ap_model_embedding_params(m);
    in->head = ap_model_head_params(m);
    in->nonembed = ap_model_nonembed_params(m);
    in->active = ap_model_active_params(m);
    int have_dense = 0, have_moe = 0;
    for (int64_t i = 0; i < m->layers; i++) {
        if (ap_model_layer_is_moe(m, i)) {
            if (!have_moe) ap_model_layer(m, i, &in->moe);
            have_moe = 1;
            in->n_moe++;
        } else {
            if (!have_dense) ap_model_layer(m, i, &in->dense);
            have_dense = 1;
            in->n_dense++;
        }
    }
    in->routed_params = in->n_moe * m->moe.experts * in->moe.expert_params;
    in->fwd_flops = ap_model_fwd_flops_per_token(m, s);
    /* training = forward + backward, backward = 2x forward (gradients w.r.t. inputs and weights;
     * Narayanan et al. 2021, Sec. 5.1), without activation recomputation */
    in->train_flops = 3.0 * in->fwd_flops;
    /* KV cache, 2 bytes per value: k and v of kv_heads * head_dim per layer; MLA caches the
     * compressed latent kv_lora_rank + the shared rope key (DeepSeek-V2, arXiv:2405.04434,
     * Table 1: (d_c + d_h^R) * l elements per token) */
    double per_layer = m->mla.kv_lora_rank > 0
                           ? (double)(m->mla.kv_lora_rank + m->mla.qk_rope_head_dim)
                           : 2.0 * (double)m->kv_heads * (double)m->head_dim;
    in->kv_bytes_per_token = 2.0 * per_layer * (double)m->layers;
    /* Korthikanti et al. 2022 (arXiv:2205.05198) Eq. 1: a GPT layer stores s*b*h*(34 + 5*a*s/h)
     * bytes of activations with 16-bit values and no recomputation or parallelism; per token:
     * 34*h + 5*a*s bytes. */
    in->act_bytes_per_token = 34.0 * (double)m->hidden + 5.0 * (double)m->heads * (double)s;
}

static const char *act_name(ap_activation a) {
    return a == AP_ACT_SWIGLU ? "gated (SwiGLU/GeGLU)" : a == AP_ACT_RELU ? "relu"
           : a == AP_ACT_RELU2 ? "squared relu" : "gelu";
}

/* "6.74 B", "124.4 M" */
static const char *human_count(double v, char *buf, size_t n) {
    if (v >= 1e12) snprintf(buf, n, "%.3g T", v / 1e12);
    else if (v >= 1e9) snprintf(buf, n, "%.3g B", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.4g M", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%.4g k", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
    return buf;
}

static void print_text(const ap_model *m, const char *path, const info *in) {
    char b1[32], b2[32], b3[32];
    printf("%s  (%s, from %s)\n", ap_cli_safe(m->name), ap_cli_safe(m->model_type),
           ap_cli_safe(path));
    printf("  layers %lld, hidden %lld, heads %lld (kv heads %lld, head dim %lld), ffn %lld %s, "
           "vocab %lld\n", (long long)m->layers, (long long)m->hidden, (long long)m->heads,
           (long long)m->kv_heads, (long long)m->head_dim, (long long)m->ffn_hidden,
           act_name(m->act), (long long)m->vocab);
    printf("  %s, %s positions, %s LM head, %s\n",
           ap_norm_name(m->norm), ap_posemb_name(m->pos),
           m->tied_embeddings ? "tied" : "untied",
           m->bias ? "biases" : m->qkv_bias ? "q/k/v biases" : "no biases");
    if (m->mla.kv_lora_rank > 0)
        printf("  MLA: q_lora %lld, kv_lora %lld, qk head dim %lld + %lld (rope), v head dim %lld\n",
               (long long)m->mla.q_lora_rank, (long long)m->mla.kv_lora_rank,
               (long long)m->mla.qk_nope_head_dim, (long long)m->mla.qk_rope_head_dim,
               (long long)m->mla.v_head_dim);
    if (m->moe.experts > 0)
        printf("  MoE: %lld routed experts (top %lld) of ffn %lld, %lld shared, %lld dense + %lld "
               "MoE layers\n", (long long)m->moe.experts, (long long)m->moe.top_k,
               (long long)m->moe.ffn_hidden, (long long)m->moe.shared_experts,
               (long long)in->n_dense, (long long)in->n_moe);
    printf("  sequence %lld (model default %lld, max positions %lld)\n", (long long)in->seq,
           (long long)m->seq_len, (long long)m->max_positions);

    printf("\nparameters\n");
    printf("  %-34s %16lld  (%s)\n", "total", (long long)in->total,
           human_count((double)in->total, b1, sizeof b1));
    printf("  %-34s %16lld\n", "embedding (tokens + positions)", (long long)in->embedding);
    printf("  %-34s %16lld\n", "head (final norm + LM head)", (long long)in->head);
    printf("  %-34s %16lld\n", "non-embedding (layers + final norm)", (long long)in->nonembed);
    if (in->n_dense > 0)
        printf("  %-34s %16lld  x %lld layers\n", "per dense layer",
               (long long)in->dense.total_params, (long long)in->n_dense);
    if (in->n_moe > 0) {
        printf("  %-34s %16lld  x %lld layers\n", "per MoE layer (all experts)",
               (long long)in->moe.total_params, (long long)in->n_moe);
        printf("  %-34s %16lld\n", "  one routed expert", (long long)in->moe.expert_params);
        printf("  %-34s %16lld\n", "  router", (long long)in->moe.router_params);
        printf("  %-34s %16lld\n", "  shared experts", (long long)in->moe.shared_params);
        printf("  %-34s %16lld\n", "routed experts, all layers", (long long)in->routed_params);
        printf("  %-34s %16lld  (%s)\n", "active per token", (long long)in->active,
               human_count((double)in->active, b1, sizeof b1));
    }

    printf("\ncompute per token at sequence %lld\n", (long long)in->seq);
    printf("  %-34s %16.4g  FLOP\n", "forward", in->fwd_flops);
    printf("  %-34s %16.4g  FLOP  (3x forward: backward = 2x forward, no recompute)\n",
           "training (forward + backward)", in->train_flops);

    printf("\nmemory\n");
    printf("  %-34s %s / %s / %s\n", "weights fp32 / bf16 / fp8",
           ap_fmt_bytes(4.0 * (double)in->total, b1, sizeof b1),
           ap_fmt_bytes(2.0 * (double)in->total, b2, sizeof b2),
           ap_fmt_bytes(1.0 * (double)in->total, b3, sizeof b3));
    printf("  %-34s %.0f B  (%s)\n", "KV cache per token (bf16)", in->kv_bytes_per_token,
           m->mla.kv_lora_rank > 0 ? "MLA latent + rope key, all layers" : "k and v, all layers");
    printf("  %-34s %.0f B  (GPT-formula estimate 34h + 5as, Korthikanti et al. 2022 Eq. 1, "
           "bf16, no recompute)\n", "activations per token per layer", in->act_bytes_per_token);
}

/* Builds the JSON; returns NULL when out of memory. */
static ap_json *to_json(const ap_model *m, const char *path, const info *in) {
    ap_json *o = ap_json_new_object();
    ap_json *arch = ap_json_new_object(), *p = ap_json_new_object(), *fl = ap_json_new_object(),
            *mem = ap_json_new_object();
    int bad = !o || !arch || !p || !fl || !mem;
    if (bad) {
        ap_json_free(o);
        ap_json_free(arch);
        ap_json_free(p);
        ap_json_free(fl);
        ap_json_free(mem);
        return NULL;
    }
    char fp[24];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)ap_model_fingerprint(m));
    ap_status st = AP_OK;
#define ADD(x) do { if (st == AP_OK) st = (x); } while (0)
    ADD(ap_json_add_string(o, "name", m->name));
    ADD(ap_json_add_string(o, "model_type", m->model_type));
    ADD(ap_json_add_string(o, "path", path));
    ADD(ap_json_add_string(o, "fingerprint", fp));
    ADD(ap_json_add_number(arch, "layers", (double)m->layers));
    ADD(ap_json_add_number(arch, "hidden", (double)m->hidden));
    ADD(ap_json_add_number(arch, "heads", (double)m->heads));
    ADD(ap_json_add_number(arch, "kv_heads", (double)m->kv_heads));
    ADD(ap_json_add_number(arch, "head_dim", (double)m->head_dim));
    ADD(ap_json_add_number(arch, "ffn_hidden", (double)m->ffn_hidden));
    ADD(ap_json_add_number(arch, "vocab", (double)m->vocab));
    ADD(ap_json_add_number(arch, "seq_len", (double)m->seq_len));
    ADD(ap_json_add_number(arch, "max_positions", (double)m->max_positions));
    ADD(ap_json_add_number(arch, "moe_experts", (double)m->moe.experts));
    ADD(ap_json_add_number(arch, "moe_top_k", (double)m->moe.top_k));
    ADD(ap_json_add_number(arch, "dense_layers", (double)in->n_dense));
    ADD(ap_json_add_number(arch, "moe_layers", (double)in->n_moe));
    ADD(ap_json_add(o, "architecture", arch));

    ADD(ap_json_add_number(p, "total", (double)in->total));
    ADD(ap_json_add_number(p, "embedding", (double)in->embedding));
    ADD(ap_json_add_number(p, "head", (double)in->head));
    ADD(ap_json_add_number(p, "nonembedding", (double)in->nonembed));
    ADD(ap_json_add_number(p, "active", (double)in->active));
    ADD(ap_json_add_number(p, "dense_layer", in->n_dense ? (double)in->dense.total_params : 0));
    ADD(ap_json_add_number(p, "moe_layer", in->n_moe ? (double)in->moe.total_params : 0));
    ADD(ap_json_add_number(p, "moe_layer_active", in->n_moe ? (double)in->moe.active_params : 0));
    ADD(ap_json_add_number(p, "expert", in->n_moe ? (double)in->moe.expert_params : 0));
    ADD(ap_json_add_number(p, "router", in->n_moe ? (double)in->moe.router_params : 0));
    ADD(ap_json_add_number(p, "shared_experts", in->n_moe ? (double)in->moe.shared_params : 0));
    ADD(ap_json_add_number(p, "routed_experts_total", (double)in->routed_params));
    ADD(ap_json_add(o, "params", p));

    ADD(ap_json_add_number(fl, "seq", (double)in->seq));
    ADD(ap_json_add_number(fl, "forward", in->fwd_flops));
    ADD(ap_json_add_number(fl, "training", in->train_flops));
    ADD(ap_json_add_string(fl, "training_note", "3x forward (backward = 2x forward), no recompute"));
    ADD(ap_json_add(o, "flops_per_token", fl));

    ADD(ap_json_add_number(mem, "weights_fp32", 4.0 * (double)in->total));
    ADD(ap_json_add_number(mem, "weights_bf16", 2.0 * (double)in->total));
    ADD(ap_json_add_number(mem, "weights_fp8", 1.0 * (double)in->total));
    ADD(ap_json_add_number(mem, "kv_cache_per_token_bf16", in->kv_bytes_per_token));
    ADD(ap_json_add_number(mem, "activations_per_token_per_layer", in->act_bytes_per_token));
    ADD(ap_json_add_string(mem, "activations_note", "GPT-formula estimate 34h + 5as bytes "
                           "(Korthikanti et al. 2022 Eq. 1), 16-bit, no recompute"));
    ADD(ap_json_add(o, "bytes", mem));
#undef ADD
    if (st != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

int ap_cmd_info(int argc, char **argv) {
    ap_flags fl;
    memset(&fl, 0, sizeof fl);
    ap_flags_add(&fl, "seq", AP_FLAG_VALUE, "TOKENS",
                 "sequence length in tokens for FLOPs and activations (default: the model's)");
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print one JSON object instead of text");
    ap_err err = {{0}};
    int help = 0;
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan info MODEL [--seq TOKENS] [--json]",
                            "Parameter counts (total, embedding, head, per layer, routed vs "
                            "active experts), FLOPs per token\n(forward; training = 3x forward), "
                            "weight bytes per dtype (fp32/bf16/fp8), KV-cache bytes per token\n"
                            "(bf16) and activation bytes per token and layer (GPT formula of "
                            "Korthikanti et al. 2022, no recompute).\nMODEL is a Hugging Face "
                            "config.json, a directory containing one, or an autoplan model file\n"
                            "(docs/models.md).");
        return 0;
    }
    if (fl.npos < 1) {
        ap_err_set(&err, AP_ERR_INPUT, "info: missing MODEL (a config.json, model directory or "
                   "autoplan model file; see autoplan info --help)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    const char *path = fl.pos[0];
    ap_model m;
    st = ap_model_load(path, &m, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    int64_t s = m.seq_len;
    st = ap_flag_int(&fl, "seq", 1, AP_MODEL_MAX_SEQ, &s, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (!ap_model_positions_hold(&m, s)) {
        ap_err_set(&err, AP_ERR_INPUT, "--seq: %lld tokens exceed the %lld learned positions of "
                   "%s", (long long)s, (long long)m.learned_pos, path);
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    info in;
    compute(&m, s, &in);
    if (ap_flags_isset(&fl, "json")) {
        ap_json *j = to_json(&m, path, &in);
        char *text = j ? ap_json_print(j, 1) : NULL;
        ap_json_free(j);
        if (!text) {
            ap_err_set(&err, AP_ERR_NOMEM, "info: out of memory");
            return ap_cli_fail(AP_ERR_NOMEM, &err);
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_text(&m, path, &in);
    }
    return 0;
}
