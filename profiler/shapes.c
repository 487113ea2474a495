/*
 * shapes.c - which GEMMs to measure (include/autoplan/profiler.h): a generic grid, and the
 * exact shapes a model's linear layers produce at a tensor-parallel degree, micro-batch and
 * sequence length, in forward, input-gradient (dgrad) and weight-gradient (wgrad) form.
 *
 * Convention: C[m x n] = A[m x k] B[k x n], as the kernel-profile gemm row (docs/profiles.md).
 * A linear layer y = x W^T with x [T x in] and W [out x in] is, per Megatron-LM's tensor
 * parallelism (Shoeybi et al. 2019, Sec. 3): column-parallel (q/k/v, MLP up/gate, LM head)
 * splits `out` by t, row-parallel (attention output, MLP down) splits `in` by t. Its three
 * GEMMs are forward m = T, n = out, k = in; dgrad dx = dy W: m = T, n = in, k = out; wgrad
 * dW = dy^T x: m = out, n = in, k = T. These are the shapes costmodel/estimate.c prices (its
 * forward GEMM of a layer is gemm(T, out, in), backward twice that).
 *
 * What it does not do: run anything (gpubench_gemm.c does), or know expert parallelism (an
 * expert's GEMM is at its average token count with all experts on the rank).
 */
#include "autoplan/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ap_gemm_shape *v;
    size_t n, cap;
} shape_list;

static ap_status push(shape_list *l, int64_t m, int64_t n, int64_t k, const char *what,
                      ap_err *err) {
    if (m < 1 || n < 1 || k < 1) return AP_OK; /* a layer that splits to nothing */
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].m == m && l->v[i].n == n && l->v[i].k == k) return AP_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ap_gemm_shape *nv = ap_realloc(l->v, cap * sizeof *nv);
        if (!nv) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu GEMM shapes", cap);
        l->v = nv;
        l->cap = cap;
    }
    ap_gemm_shape *s = &l->v[l->n++];
    s->m = m;
    s->n = n;
    s->k = k;
    snprintf(s->what, sizeof s->what, "%s", what);
    return AP_OK;
}

ap_status ap_gemm_grid(ap_gemm_shape **out, size_t *n, ap_err *err) {
    shape_list l = {0};
    ap_status st = AP_OK;
    for (int64_t m = 512; m <= 16384 && st == AP_OK; m *= 2)
        for (int64_t nn = 512; nn <= 16384 && st == AP_OK; nn *= 2)
            for (int64_t k = 512; k <= 16384 && st == AP_OK; k *= 2)
                st = push(&l, m, nn, k, "grid", err);
    if (st != AP_OK) {
        ap_free(l.v);
        return st;
    }
    *out = l.v;
    *n = l.n;
    return AP_OK;
}

/* A linear layer's three GEMMs at its per-rank size (in, out already divided by t). */
static ap_status linear(shape_list *l, const char *name, int tp, int64_t T, int64_t in,
                        int64_t out, ap_err *err) {
    char what[48];
    snprintf(what, sizeof what, "%s fwd tp%d", name, tp);
    ap_status st = push(l, T, out, in, what, err);
    snprintf(what, sizeof what, "%s dgrad tp%d", name, tp);
    if (st == AP_OK) st = push(l, T, in, out, what, err);
    snprintf(what, sizeof what, "%s wgrad tp%d", name, tp);
    if (st == AP_OK) st = push(l, out, in, T, what, err);
    return st;
}

/* The linear layers of layer `idx`, as costmodel/estimate.c's price_layer lists them. */
static ap_status layer_linears(const ap_model *m, int64_t idx, int tp, int64_t T, shape_list *l,
                               ap_err *err) {
    ap_layer_info li;
    ap_model_layer(m, idx, &li);
    const int64_t h = m->hidden, t = tp;
    const int64_t a_loc = m->heads / t;
    ap_status st = AP_OK;
    if (m->mla.kv_lora_rank > 0) { /* DeepSeek-V2/V3 multi-head latent attention */
        const ap_mla *ml = &m->mla;
        int64_t qk = ml->qk_nope_head_dim + ml->qk_rope_head_dim;
        if (ml->q_lora_rank > 0) {
            st = linear(l, "q_a", tp, T, h, ml->q_lora_rank, err);
            if (st == AP_OK) st = linear(l, "q_b", tp, T, ml->q_lora_rank, a_loc * qk, err);
        } else {
            st = linear(l, "q", tp, T, h, a_loc * qk, err);
        }
        if (st == AP_OK)
            st = linear(l, "kv_a", tp, T, h, ml->kv_lora_rank + ml->qk_rope_head_dim, err);
        if (st == AP_OK)
            st = linear(l, "kv_b", tp, T, ml->kv_lora_rank,
                        a_loc * (ml->qk_nope_head_dim + ml->v_head_dim), err);
        if (st == AP_OK) st = linear(l, "o", tp, T, a_loc * ml->v_head_dim, h, err);
    } else {
        /* KV heads are split by t when there are at least t of them, else replicated */
        int64_t kvf = m->kv_heads >= t ? m->kv_heads / t : 1;
        st = linear(l, "qkv", tp, T, h, (a_loc + 2 * kvf) * m->head_dim, err);
        if (st == AP_OK) st = linear(l, "o", tp, T, a_loc * m->head_dim, h, err);
    }
    int swiglu = m->act == AP_ACT_SWIGLU;
    if (st == AP_OK && li.is_moe) {
        const ap_moe *mo = &m->moe;
        int64_t f = mo->ffn_hidden;
        /* average tokens per expert; a capacity factor pads every expert to it */
        double cf = mo->capacity_factor > 0 ? mo->capacity_factor : 1.0;
        int64_t per_expert = (int64_t)((double)T * (double)mo->top_k * cf /
                                       (double)(mo->experts > 0 ? mo->experts : 1));
        st = linear(l, "router", tp, T, h, mo->experts, err);
        if (st == AP_OK) st = linear(l, "expert_up", tp, per_expert, h, swiglu ? 2 * f : f, err);
        if (st == AP_OK) st = linear(l, "expert_down", tp, per_expert, f, h, err);
        if (st == AP_OK && mo->shared_experts > 0 && mo->shared_ffn_hidden > 0) {
            int64_t fs = mo->shared_ffn_hidden / t;
            st = linear(l, "shared_up", tp, T, h, swiglu ? 2 * fs : fs, err);
            if (st == AP_OK) st = linear(l, "shared_down", tp, T, fs, h, err);
        }
    } else if (st == AP_OK) {
        int64_t f = m->ffn_hidden / t;
        st = linear(l, "mlp_up", tp, T, h, swiglu ? 2 * f : f, err);
        if (st == AP_OK) st = linear(l, "mlp_down", tp, T, f, h, err);
    }
    return st;
}

ap_status ap_gemm_model_shapes(const ap_model *m, int tp, int64_t mbs, int64_t seq,
                               ap_gemm_shape **out, size_t *n, ap_err *err) {
    if (tp < 1 || mbs < 1 || seq < 1)
        return ap_err_set(err, AP_ERR_INPUT, "model shapes: tp, mbs and seq must be >= 1");
    if (m->heads % tp)
        return ap_err_set(err, AP_ERR_INPUT, "--tp %d: must divide the model's %lld attention "
                          "heads", tp, (long long)m->heads);
    shape_list l = {*out, *n, *n};
    const int64_t T = mbs * seq;
    ap_status st = AP_OK;
    /* one dense and one MoE layer cover every layer kind */
    int64_t dense = -1, moe = -1;
    for (int64_t i = 0; i < m->layers && (dense < 0 || moe < 0); i++) {
        if (ap_model_layer_is_moe(m, i)) { if (moe < 0) moe = i; }
        else if (dense < 0) dense = i;
    }
    if (dense >= 0) st = layer_linears(m, dense, tp, T, &l, err);
    if (st == AP_OK && moe >= 0) st = layer_linears(m, moe, tp, T, &l, err);
    /* the LM head, vocab-parallel (Megatron splits the output embedding by t) */
    if (st == AP_OK) st = linear(&l, "lm_head", tp, T, m->hidden, m->vocab / tp, err);
    *out = l.v;
    *n = l.n;
    return st;
}
