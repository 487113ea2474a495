/*
 * model.c - the GPT-style decoder the runtime trains (rt_int.h): its parameters (the canonical
 * list of named global tensors, and each rank's tp slice of them laid out in units), their
 * deterministic initialisation, the synthetic data, and the forward and backward passes of the
 * embedding, a transformer layer and the head, with Megatron-LM's tensor parallelism.
 *
 * Architecture (both formula families of the cost model): token embedding (+ learned
 * positions); L pre-norm blocks x + Attn(Norm(x)), then + MLP(Norm(.)), with RMSNorm or
 * LayerNorm, rotary positions, grouped-query attention (causal, scores materialised) and a
 * SwiGLU or GELU MLP, biases optional; final norm, LM head (tied to the embedding or not),
 * cross-entropy over the next token. No dropout: training is deterministic.
 *
 * Tensor parallelism (Shoeybi et al. 2019, Sec. 3; Megatron-LM core tensor_parallel/layers.py):
 * the QKV and the gate/up (fc) projections are column-parallel (each rank holds heads and FFN
 * columns), the attention output and the down projection row-parallel, their partial outputs
 * all-reduced; the embedding and LM head are vocab-parallel with the vocab-parallel cross-entropy.
 * With sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) the norms and residuals work on
 * a row block per rank: all-gather before the column-parallel GEMMs (again in backward instead
 * of saving the gathered input), reduce-scatter after the row-parallel ones.
 *
 * Memory: every tensor comes from the tracking allocator with its category and is freed at its
 * last use; the order of allocations and frees below is the runtime's activation layout, which
 * the simulator reproduces from the plan (sim/simrt.c) and tests compare event by event.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rt_int.h"

#define ACT AP_RT_CAT_ACTIVATIONS
#define TMP AP_RT_CAT_TEMPS

/* ---- canonical tensors -------------------------------------------------------------------------- */

typedef struct canon_t {
    const char *name;
    int64_t rows, cols;
    rt_init init;
    double std;
} canon_t;

/* Weight init: normal(0, 0.02) (Radford et al. 2019 GPT-2; Megatron init_method_std 0.02), the
 * projections into the residual stream (wo, w2) scaled by 1/sqrt(2 L) (GPT-2, Sec. 2.3;
 * Megatron scaled_init_method_normal); norm weights one, biases zero. */
#define INIT_STD 0.02

static int qkv_bias(const ap_model *m) { return m->bias || m->qkv_bias; }

/* The tensors of one layer in canonical order (names without the "layers.N." prefix). */
static int layer_canon(const ap_model *m, canon_t *t) {
    int n = 0;
    int64_t h = m->hidden, qd = m->heads * m->head_dim, kd = m->kv_heads * m->head_dim;
    int64_t f = m->ffn_hidden;
    double out_std = INIT_STD / sqrt(2.0 * (double)m->layers);
    int ln = m->norm == AP_NORM_LAYERNORM;
    t[n++] = (canon_t){"wq", qd, h, RT_INIT_NORMAL, INIT_STD};
    t[n++] = (canon_t){"wk", kd, h, RT_INIT_NORMAL, INIT_STD};
    t[n++] = (canon_t){"wv", kd, h, RT_INIT_NORMAL, INIT_STD};
    if (qkv_bias(m)) {
        t[n++] = (canon_t){"bq", qd, 1, RT_INIT_ZEROS, 0};
        t[n++] = (canon_t){"bk", kd, 1, RT_INIT_ZEROS, 0};
        t[n++] = (canon_t){"bv", kd, 1, RT_INIT_ZEROS, 0};
    }
    t[n++] = (canon_t){"wo", h, qd, RT_INIT_NORMAL, out_std};
    if (m->bias) t[n++] = (canon_t){"bo", h, 1, RT_INIT_ZEROS, 0};
    t[n++] = (canon_t){"ln1_w", h, 1, RT_INIT_ONES, 0};
    if (ln) t[n++] = (canon_t){"ln1_b", h, 1, RT_INIT_ZEROS, 0};
    if (m->act == AP_ACT_SWIGLU) {
        t[n++] = (canon_t){"w_gate", f, h, RT_INIT_NORMAL, INIT_STD};
        t[n++] = (canon_t){"w_up", f, h, RT_INIT_NORMAL, INIT_STD};
        if (m->bias) {
            t[n++] = (canon_t){"b_gate", f, 1, RT_INIT_ZEROS, 0};
            t[n++] = (canon_t){"b_up", f, 1, RT_INIT_ZEROS, 0};
        }
    } else {
        t[n++] = (canon_t){"w_fc", f, h, RT_INIT_NORMAL, INIT_STD};
        if (m->bias) t[n++] = (canon_t){"b_fc", f, 1, RT_INIT_ZEROS, 0};
    }
    t[n++] = (canon_t){"w2", h, f, RT_INIT_NORMAL, out_std};
    if (m->bias) t[n++] = (canon_t){"b2", h, 1, RT_INIT_ZEROS, 0};
    t[n++] = (canon_t){"ln2_w", h, 1, RT_INIT_ONES, 0};
    if (ln) t[n++] = (canon_t){"ln2_b", h, 1, RT_INIT_ZEROS, 0};
    return n;
}

static int embed_canon(const ap_model *m, canon_t *t) {
    int n = 0;
    t[n++] = (canon_t){"wte", m->vocab, m->hidden, RT_INIT_NORMAL, INIT_STD};
    if (m->pos == AP_POS_LEARNED)
        t[n++] = (canon_t){"wpe", m->learned_pos, m->hidden, RT_INIT_NORMAL, INIT_STD};
    return n;
}

static int head_canon(const ap_model *m, canon_t *t) {
    int n = 0;
    t[n++] = (canon_t){"lnf_w", m->hidden, 1, RT_INIT_ONES, 0};
    if (m->norm == AP_NORM_LAYERNORM) t[n++] = (canon_t){"lnf_b", m->hidden, 1, RT_INIT_ZEROS, 0};
    if (!m->tied_embeddings)
        t[n++] = (canon_t){"lm_head", m->vocab, m->hidden, RT_INIT_NORMAL, INIT_STD};
    return n;
}

int ap_rt_tensor_count(const ap_model *m) {
    canon_t t[RT_MAX_TENSORS];
    return embed_canon(m, t) + (int)m->layers * layer_canon(m, t) + head_canon(m, t);
}

/* Canonical tensor i: its description and full name. */
static void canon_at(const ap_model *m, int i, canon_t *out, char *name, size_t nn) {
    canon_t t[RT_MAX_TENSORS];
    int ne = embed_canon(m, t);
    if (i < ne) {
        *out = t[i];
        snprintf(name, nn, "%s", t[i].name);
        return;
    }
    i -= ne;
    int nl = layer_canon(m, t);
    if (i < nl * (int)m->layers) {
        *out = t[i % nl];
        snprintf(name, nn, "layers.%d.%s", i / nl, t[i % nl].name);
        return;
    }
    i -= nl * (int)m->layers;
    head_canon(m, t);
    *out = t[i];
    snprintf(name, nn, "%s", t[i].name);
}

void ap_rt_tensor_at(const ap_model *m, int i, ap_rt_tensor_info *out) {
    canon_t t;
    memset(out, 0, sizeof *out);
    canon_at(m, i, &t, out->name, sizeof out->name);
    out->rows = t.rows;
    out->cols = t.cols;
    int64_t off = 0;
    for (int j = 0; j < i; j++) {
        canon_t u;
        char nm[64];
        canon_at(m, j, &u, nm, sizeof nm);
        off += u.rows * u.cols;
    }
    out->offset = off;
}

int64_t ap_rt_param_count(const ap_model *m) {
    int64_t total = 0;
    int n = ap_rt_tensor_count(m);
    for (int i = 0; i < n; i++) {
        canon_t t;
        char nm[64];
        canon_at(m, i, &t, nm, sizeof nm);
        total += t.rows * t.cols;
    }
    return total;
}

/* Index of the canonical tensor `name` of a unit (layer < 0: embedding or head list). */
static int canon_index(const ap_model *m, rt_unit_kind kind, int64_t layer, const char *name) {
    canon_t t[RT_MAX_TENSORS];
    int ne = embed_canon(m, t), nl = layer_canon(m, t);
    int base, n;
    if (kind == RT_UNIT_EMBED) {
        base = 0;
        n = embed_canon(m, t);
    } else if (kind == RT_UNIT_LAYER) {
        base = ne + (int)layer * nl;
        n = layer_canon(m, t);
    } else {
        base = ne + (int)m->layers * nl;
        n = head_canon(m, t);
        if (!strcmp(name, "wte")) return 0; /* the tied head's copy of the embedding */
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return base + i;
    return -1;
}

/* ---- one rank's units ------------------------------------------------------------------------- */

static void add_block(rt_ctx *c, rt_unit *u, int slot, const char *name, int64_t rows,
                      int64_t cols, rt_split split) {
    rt_tdesc *d = &u->t[u->nt++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->canon = canon_index(&c->m, u->kind, u->layer, name);
    canon_t ct;
    char nm[64];
    canon_at(&c->m, d->canon, &ct, nm, sizeof nm);
    d->grows = ct.rows;
    d->gcols = ct.cols;
    d->init = ct.init;
    d->std = ct.std;
    d->rows = rows;
    d->cols = cols;
    d->split = split;
    /* a rank's slice: rows (column-parallel, vocab-parallel) or columns (row-parallel) */
    if (split == RT_SPLIT_ROWS) d->row0 = (int64_t)c->tp_rank * rows;
    if (split == RT_SPLIT_COLS) d->col0 = (int64_t)c->tp_rank * cols;
    d->off = u->n;
    if (slot >= 0 && u->o[slot] < 0) u->o[slot] = u->n;
    u->n += rows * cols;
}

static void layout_layer(rt_ctx *c, rt_unit *u) {
    int64_t h = c->h, d = c->d;
    int ln = !c->rms;
    add_block(c, u, S_WQKV, "wq", c->aL * d, h, RT_SPLIT_ROWS);
    add_block(c, u, S_WQKV, "wk", c->kL * d, h, RT_SPLIT_ROWS);
    add_block(c, u, S_WQKV, "wv", c->kL * d, h, RT_SPLIT_ROWS);
    if (c->qkv_bias) {
        add_block(c, u, S_BQKV, "bq", c->aL * d, 1, RT_SPLIT_ROWS);
        add_block(c, u, S_BQKV, "bk", c->kL * d, 1, RT_SPLIT_ROWS);
        add_block(c, u, S_BQKV, "bv", c->kL * d, 1, RT_SPLIT_ROWS);
    }
    add_block(c, u, S_WO, "wo", h, c->aL * d, RT_SPLIT_COLS);
    if (c->swiglu) {
        add_block(c, u, S_W1, "w_gate", c->fL, h, RT_SPLIT_ROWS);
        add_block(c, u, S_W1, "w_up", c->fL, h, RT_SPLIT_ROWS);
        if (c->bias) {
            add_block(c, u, S_B1, "b_gate", c->fL, 1, RT_SPLIT_ROWS);
            add_block(c, u, S_B1, "b_up", c->fL, 1, RT_SPLIT_ROWS);
        }
    } else {
        add_block(c, u, S_W1, "w_fc", c->fL, h, RT_SPLIT_ROWS);
        if (c->bias) add_block(c, u, S_B1, "b_fc", c->fL, 1, RT_SPLIT_ROWS);
    }
    add_block(c, u, S_W2, "w2", h, c->fL, RT_SPLIT_COLS);
    int64_t rep0 = u->n;
    add_block(c, u, S_LN1W, "ln1_w", h, 1, RT_SPLIT_NONE);
    if (ln) add_block(c, u, S_LN1B, "ln1_b", h, 1, RT_SPLIT_NONE);
    if (c->bias) add_block(c, u, S_BO, "bo", h, 1, RT_SPLIT_NONE);
    add_block(c, u, S_LN2W, "ln2_w", h, 1, RT_SPLIT_NONE);
    if (ln) add_block(c, u, S_LN2B, "ln2_b", h, 1, RT_SPLIT_NONE);
    if (c->bias) add_block(c, u, S_B2, "b2", h, 1, RT_SPLIT_NONE);
    u->n_rep = u->n - rep0;
}

ap_status rt_model_layout(rt_ctx *c) {
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        for (int k = 0; k < RT_NSLOTS; k++) u->o[k] = -1;
        u->nt = 0;
        u->n = u->n_rep = 0;
        if (u->kind == RT_UNIT_LAYER) {
            layout_layer(c, u);
        } else if (u->kind == RT_UNIT_EMBED) {
            add_block(c, u, S_WTE, "wte", c->VL, c->h, RT_SPLIT_ROWS);
            int64_t rep0 = u->n;
            if (c->learned_pos)
                add_block(c, u, S_WPE, "wpe", c->m.learned_pos, c->h, RT_SPLIT_NONE);
            u->n_rep = u->n - rep0;
        } else {
            /* untied: its own LM head; tied on another stage: a copy of the embedding kept equal
               by summing the two gradients (Megatron's embedding group); tied on one stage: the
               embedding unit's matrix itself (u->tie) */
            if (!c->tied) add_block(c, u, S_LMH, "lm_head", c->VL, c->h, RT_SPLIT_ROWS);
            else if (c->pp > 1) add_block(c, u, S_LMH, "wte", c->VL, c->h, RT_SPLIT_ROWS);
            int64_t rep0 = u->n;
            add_block(c, u, S_LNFW, "lnf_w", c->h, 1, RT_SPLIT_NONE);
            if (!c->rms) add_block(c, u, S_LNFB, "lnf_b", c->h, 1, RT_SPLIT_NONE);
            u->n_rep = u->n - rep0;
        }
        for (int k = 0; k < u->nt; k++)
            if (u->t[k].canon < 0)
                return rt_fail(c, AP_ERR_INTERNAL, "tensor %s has no canonical name", u->t[k].name);
    }
    return AP_OK;
}

/* ---- initialisation ------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) { /* splitmix64 finaliser (Steele et al. 2014) */
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double uniform01(uint64_t x) { /* (0, 1], 53 bits */
    return ((double)(mix64(x) >> 11) + 1.0) / 9007199254740992.0;
}

/* Element `idx` of canonical tensor `canon`: a standard normal by Box-Muller from two uniforms
 * hashed from (seed, tensor, element), so any rank computes any element alone. */
static double init_value(uint64_t seed, int canon, int64_t idx) {
    uint64_t key = mix64(seed ^ mix64((uint64_t)canon + 1));
    double u1 = uniform01(key ^ (uint64_t)(2 * idx));
    double u2 = uniform01(key ^ (uint64_t)(2 * idx + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void rt_model_init_unit(rt_ctx *c, rt_unit *u, rt_real *dst, int64_t lo, int64_t hi) {
    /* fill flat elements [lo, hi) of the unit into dst[0 .. hi-lo) (host memory) */
    for (int k = 0; k < u->nt; k++) {
        const rt_tdesc *d = &u->t[k];
        int64_t a = d->off > lo ? d->off : lo;
        int64_t b = d->off + d->rows * d->cols < hi ? d->off + d->rows * d->cols : hi;
        for (int64_t e = a; e < b; e++) {
            int64_t li = e - d->off, r = li / d->cols, col = li % d->cols;
            int64_t gi = (d->row0 + r) * d->gcols + d->col0 + col;
            double v = d->init == RT_INIT_ONES    ? 1.0
                       : d->init == RT_INIT_ZEROS ? 0.0
                                                  : d->std * init_value(c->job->seed, d->canon, gi);
            dst[e - lo] = (rt_real)v;
        }
    }
}

/* ---- synthetic data -------------------------------------------------------------------------- */

/* A learnable token stream: each next token follows a fixed affine map of the previous one
 * (x' = (5 x + 3) mod V) three times in four, else is drawn uniformly; the first is uniform.
 * Seeded by (seed, step, sample): identical whatever the data-parallel split. */
int32_t rt_data_token(const rt_ctx *c, int64_t step, int64_t sample, int64_t t) {
    uint64_t key = mix64(c->job->seed ^ 0x5eedULL) ^ mix64((uint64_t)step * 1000003ULL + 17) ^
                   mix64((uint64_t)sample + 0x1234567ULL);
    int64_t V = c->V;
    int64_t x = (int64_t)(mix64(key) % (uint64_t)V);
    for (int64_t i = 1; i <= t; i++) {
        uint64_t r = mix64(key ^ (uint64_t)(i * 0x9e3779b9ULL));
        if (r % 4 != 0) x = (5 * x + 3) % V;
        else x = (int64_t)((r >> 8) % (uint64_t)V);
    }
    return (int32_t)x;
}

/* tokens (inputs 0..s-1, or targets 1..s) of micro-batch mb on this rank, uploaded into dst */
static void fill_tokens(rt_ctx *c, int mb, int targets, int32_t *dst) {
    int32_t stage[4096];
    int64_t n = c->n, s = c->s;
    int64_t first = (int64_t)c->dp_rank * c->m_mb * c->b + (int64_t)mb * c->b;
    for (int64_t r0 = 0; r0 < n; r0 += 4096) {
        int64_t len = n - r0 < 4096 ? n - r0 : 4096;
        for (int64_t r = r0; r < r0 + len; r++) {
            int64_t sample = first + r / s, pos = r % s;
            stage[r - r0] = rt_data_token(c, c->step_index, sample, pos + (targets ? 1 : 0));
        }
        c->k->upload(dst + r0, stage, len * (int64_t)sizeof(int32_t));
    }
}

/* ---- helpers ------------------------------------------------------------------------------------ */

#define A(cat, kind, layer, elems) rt_alloc(c, (cat), AP_SIM_T_##kind, (layer), mb, (elems))
#define FREE(p)                                                                                    \
    do {                                                                                           \
        rt_free(c, (p));                                                                           \
        (p) = NULL;                                                                                \
    } while (0)
#define CHECK_ALLOC(p)                                                                             \
    do {                                                                                           \
        if (!(p)) return NULL;                                                                     \
    } while (0)
#define CHECK_OK(call)                                                                             \
    do {                                                                                           \
        if ((call) != AP_OK) return NULL;                                                          \
    } while (0)

/* A [n, h] tensor gathered from the row blocks ([ns, h]) of the tp ranks (sequence parallel). */
static rt_real *gather_rows(rt_ctx *c, const rt_real *blk, int kind, int layer, int mb) {
    rt_real *g = rt_alloc(c, TMP, kind, layer, mb, c->n * c->h);
    if (!g) return NULL;
    c->k->copy(g + (int64_t)c->tp_rank * c->ns * c->h, blk, c->ns * c->h * RT_ELEM);
    if (rt_c_allgather(c, c->tpg, g, c->ns * c->h) != AP_OK) return NULL;
    return g;
}

/* Reduce a row-parallel partial [n, h]: with sequence parallelism reduce-scatter into a new
 * [ns, h] tensor `into` (allocated here under cat/kind), else all-reduce in place and return
 * the partial itself. */
static rt_real *reduce_rows(rt_ctx *c, rt_real *partial, int cat, int kind, int layer, int mb) {
    if (c->sp) {
        rt_real *out = rt_alloc(c, cat, kind, layer, mb, c->ns * c->h);
        if (!out) return NULL;
        if (rt_c_reduce_scatter(c, c->tpg, partial, out, c->ns * c->h) != AP_OK) return NULL;
        return out;
    }
    if (c->t > 1 && rt_c_allreduce(c, c->tpg, partial, c->n * c->h, RT_OP_SUM) != AP_OK)
        return NULL;
    return partial;
}

static rt_attn_shape attn_shape(const rt_ctx *c) {
    rt_attn_shape sh = {c->b, c->s, c->aL, c->kL, c->d, c->qkvL,
                        (rt_real)(1.0 / sqrt((double)c->d))};
    return sh;
}

static const rt_real *W(const rt_unit *u, int slot) {
    return u->o[slot] >= 0 ? u->w + u->o[slot] : NULL;
}
static rt_real *G(const rt_unit *u, int slot) {
    return u->o[slot] >= 0 ? u->g + u->o[slot] : NULL;
}

/* ---- a transformer layer: forward -------------------------------------------------------------- */

/* The attention half of a layer's forward: norm1, the QKV projection with rotary, core
 * attention, the output projection's reduction and the residual. Returns x2 (NULL on failure);
 * the tensors kept for backward go to t. */
static rt_real *attn_block_fwd(rt_ctx *c, rt_unit *u, int mb, int mode, int per_head,
                               rt_real *x, rt_saved *t) {
    const rt_kernels *k = c->k;
    int layer = u->layer;
    int64_t n = c->n, ns = c->ns, h = c->h, d = c->d;
    int discard = mode == RT_MODE_DISCARD;
    rt_attn_shape sh = attn_shape(c);
    /* attention: y1 = norm1(x); qkv = y1 Wqkv^T (+b), rotary on q and k */
    rt_real *st1 = A(ACT, NORM_STATS, layer, ns * c->nstat);
    CHECK_ALLOC(st1);
    rt_real *y1 = A(ACT, LN1_OUT, layer, ns * h);
    CHECK_ALLOC(y1);
    k->norm_fwd(c->rms, ns, h, x, W(u, S_LN1W), W(u, S_LN1B), y1, st1);
    rt_real *y1g = NULL;
    if (c->sp) {
        y1g = gather_rows(c, y1, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(y1g);
    }
    rt_real *qkv = A(ACT, QKV, layer, n * c->qkvL);
    CHECK_ALLOC(qkv);
    k->gemm_nt(n, c->qkvL, h, y1g ? y1g : y1, h, W(u, S_WQKV), h, 0, qkv, c->qkvL);
    if (c->qkv_bias) k->add_bias(n, c->qkvL, qkv, W(u, S_BQKV));
    if (c->m.pos == AP_POS_ROTARY) {
        k->rope(qkv, n, c->qkvL, c->aL, d, c->s, 0);
        k->rope(qkv + c->aL * d, n, c->qkvL, c->kL, d, c->s, 0);
    }
    FREE(y1g);
    if (discard) {
        FREE(st1);
        FREE(y1);
    }
    /* core attention */
    rt_real *P = per_head ? A(TMP, SCORES, layer, c->s * c->s)
                          : A(ACT, SOFTMAX, layer, c->b * c->aL * c->s * c->s);
    CHECK_ALLOC(P);
    rt_real *ctx = A(ACT, ATTN_CTX, layer, n * c->aL * d);
    CHECK_ALLOC(ctx);
    k->attn_fwd(&sh, qkv, P, per_head, ctx);
    if (per_head) FREE(P);
    if (discard) FREE(qkv);
    /* output projection (row-parallel), reduction, residual: x2 = x + o (+bo) */
    rt_real *o = A(TMP, PROJ_OUT, layer, n * h);
    CHECK_ALLOC(o);
    k->gemm_nt(n, h, c->aL * d, ctx, c->aL * d, W(u, S_WO), c->aL * d, 0, o, h);
    if (discard) FREE(ctx);
    rt_real *x2;
    if (c->sp) {
        x2 = reduce_rows(c, o, ACT, AP_SIM_T_LN2_IN, layer, mb);
        CHECK_ALLOC(x2);
        k->add(ns, h, x2, x2, x, W(u, S_BO));
    } else {
        CHECK_ALLOC(reduce_rows(c, o, ACT, AP_SIM_T_LN2_IN, layer, mb));
        x2 = A(ACT, LN2_IN, layer, ns * h);
        CHECK_ALLOC(x2);
        k->add(ns, h, x2, x, o, W(u, S_BO));
    }
    FREE(o);
    t->st1 = st1;
    t->y1 = y1;
    t->qkv = qkv;
    t->P = per_head ? NULL : P;
    t->ctx = ctx;
    return x2;
}

/* The MLP half: norm2, the up projection and activation, the down projection's reduction and
 * the residual. Returns the layer's output (NULL on failure); kept tensors go to t. */
static rt_real *mlp_block_fwd(rt_ctx *c, rt_unit *u, int mb, int mode, rt_real *x2,
                              rt_saved *t) {
    const rt_kernels *k = c->k;
    int layer = u->layer;
    int64_t n = c->n, ns = c->ns, h = c->h;
    int discard = mode == RT_MODE_DISCARD;
    /* MLP: y2 = norm2(x2); u = y2 W1^T (+b); act = gelu(u) | silu(gate) * up */
    rt_real *st2 = A(ACT, NORM_STATS, layer, ns * c->nstat);
    CHECK_ALLOC(st2);
    rt_real *y2 = A(ACT, LN2_OUT, layer, ns * h);
    CHECK_ALLOC(y2);
    k->norm_fwd(c->rms, ns, h, x2, W(u, S_LN2W), W(u, S_LN2B), y2, st2);
    rt_real *y2g = NULL;
    if (c->sp) {
        y2g = gather_rows(c, y2, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(y2g);
    }
    int64_t uL = c->swiglu ? 2 * c->fL : c->fL;
    rt_real *uu = A(ACT, FC1_OUT, layer, n * uL);
    CHECK_ALLOC(uu);
    k->gemm_nt(n, uL, h, y2g ? y2g : y2, h, W(u, S_W1), h, 0, uu, uL);
    if (c->bias) k->add_bias(n, uL, uu, W(u, S_B1));
    FREE(y2g);
    if (discard) {
        FREE(st2);
        FREE(y2);
    }
    rt_real *act = A(ACT, ACT_OUT, layer, n * c->fL);
    CHECK_ALLOC(act);
    if (c->swiglu) k->swiglu_fwd(n, c->fL, uu, act);
    else k->gelu_fwd(n * c->fL, uu, act);
    if (discard) FREE(uu);
    /* down projection (row-parallel), reduction, residual: out = x2 + dn (+b2) */
    rt_real *dn = A(TMP, FC2_OUT, layer, n * h);
    CHECK_ALLOC(dn);
    k->gemm_nt(n, h, c->fL, act, c->fL, W(u, S_W2), c->fL, 0, dn, h);
    if (discard) FREE(act);
    int out_kind = mode == RT_MODE_RECOMPUTE ? AP_SIM_T_LAYER_OUT : AP_SIM_T_INPUT;
    int out_layer = mode == RT_MODE_RECOMPUTE ? layer : layer + 1;
    rt_real *out;
    if (c->sp) {
        out = reduce_rows(c, dn, ACT, out_kind, out_layer, mb);
        CHECK_ALLOC(out);
        k->add(ns, h, out, out, x2, W(u, S_B2));
    } else {
        CHECK_ALLOC(reduce_rows(c, dn, ACT, out_kind, out_layer, mb));
        out = rt_alloc(c, ACT, out_kind, out_layer, mb, ns * h);
        CHECK_ALLOC(out);
        k->add(ns, h, out, x2, dn, W(u, S_B2));
    }
    FREE(dn);
    if (discard) FREE(x2);

    t->st2 = st2;
    t->y2 = y2;
    t->u = uu;
    t->act = act;
    return out;
}

rt_real *rt_layer_fwd(rt_ctx *c, int loc, int mb, int mode, rt_real *x) {
    rt_unit *u = &c->units[loc];
    int discard = mode == RT_MODE_DISCARD;
    /* selective recomputation (Korthikanti 2022, Sec. 5): the attention probabilities are not
       kept; a fully recomputed layer's forward keeps nothing but its input */
    int per_head = discard || (c->p.recompute == AP_RECOMPUTE_SELECTIVE && mode == RT_MODE_SAVE);
    rt_saved t;
    memset(&t, 0, sizeof t);
    rt_real *x2 = attn_block_fwd(c, u, mb, mode, per_head, x, &t);
    CHECK_ALLOC(x2);
    rt_real *out = mlp_block_fwd(c, u, mb, mode, x2, &t);
    CHECK_ALLOC(out);
    if (!discard) {
        rt_saved *sv = &c->sv[(int64_t)mb * c->nloc + loc];
        sv->st1 = t.st1;
        sv->y1 = t.y1;
        sv->qkv = t.qkv;
        sv->P = t.P;
        sv->ctx = t.ctx;
        sv->x2 = x2;
        sv->st2 = t.st2;
        sv->y2 = t.y2;
        sv->u = t.u;
        sv->act = t.act;
    }
    return out;
}

/* ---- a transformer layer: backward ------------------------------------------------------------ */

/* A norm's backward with its residual: reduce the partial input gradient dy of the following
 * column-parallel GEMM (reduce-scatter with sp), dx = norm backward + gx, then free dy, the
 * norm's saved output, statistics and input, and gx. */
static rt_real *norm_bwd_residual(rt_ctx *c, rt_unit *u, int mb, int kind_dy, int kind_dx,
                                  int slot_w, int slot_b, rt_real *dy, rt_real **y, rt_real **st,
                                  rt_real **x, rt_real *gx) {
    int layer = u->layer;
    int64_t ns = c->ns, h = c->h;
    rt_real *dyr = reduce_rows(c, dy, TMP, kind_dy, layer, mb);
    CHECK_ALLOC(dyr);
    if (dyr != dy) FREE(dy);
    rt_real *dx = rt_alloc(c, TMP, kind_dx, layer, mb, ns * h);
    CHECK_ALLOC(dx);
    c->k->norm_bwd(c->rms, ns, h, dyr, *x, W(u, slot_w), *st, dx, G(u, slot_w), G(u, slot_b));
    c->k->add(ns, h, dx, dx, gx, NULL);
    FREE(dyr);
    FREE(*y);
    FREE(*st);
    FREE(*x);
    FREE(gx);
    return dx;
}

rt_real *rt_layer_bwd(rt_ctx *c, int loc, int mb, rt_real *g) {
    const rt_kernels *k = c->k;
    rt_unit *u = &c->units[loc];
    int layer = u->layer;
    int64_t n = c->n, ns = c->ns, h = c->h, d = c->d;
    rt_saved *sv = &c->sv[(int64_t)mb * c->nloc + loc];
    rt_attn_shape sh = attn_shape(c);
    int64_t uL = c->swiglu ? 2 * c->fL : c->fL;
    rt_real *gx = g;

    /* MLP: down projection (the row-parallel reduction's backward is the identity, or an
       all-gather of the row blocks with sp) */
    if (c->bias) k->colsum(ns, h, gx, h, G(u, S_B2));
    rt_real *gdn = gx;
    if (c->sp) {
        gdn = gather_rows(c, gx, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(gdn);
    }
    rt_real *dact = A(TMP, ACT_OUT, layer, n * c->fL);
    CHECK_ALLOC(dact);
    k->gemm_nn(n, c->fL, h, gdn, h, W(u, S_W2), c->fL, 0, dact, c->fL);
    k->gemm_tn(h, c->fL, n, gdn, h, sv->act, c->fL, 1, G(u, S_W2), c->fL);
    if (c->sp) FREE(gdn);
    FREE(sv->act);
    rt_real *du = A(TMP, FC1_OUT, layer, n * uL);
    CHECK_ALLOC(du);
    if (c->swiglu) k->swiglu_bwd(n, c->fL, dact, sv->u, du);
    else k->gelu_bwd(n * c->fL, dact, sv->u, du);
    FREE(dact);
    FREE(sv->u);
    if (c->bias) k->colsum(n, uL, du, uL, G(u, S_B1));
    /* up projection: dW1 += du^T y2 (y2 gathered again with sp), dy2 = du W1 */
    rt_real *y2g = NULL;
    if (c->sp) {
        y2g = gather_rows(c, sv->y2, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(y2g);
    }
    k->gemm_tn(uL, h, n, du, uL, y2g ? y2g : sv->y2, h, 1, G(u, S_W1), h);
    rt_real *dy2 = A(TMP, LN2_OUT, layer, n * h);
    CHECK_ALLOC(dy2);
    k->gemm_nn(n, h, uL, du, uL, W(u, S_W1), h, 0, dy2, h);
    FREE(y2g);
    FREE(du);
    /* second norm, residual */
    gx = norm_bwd_residual(c, u, mb, AP_SIM_T_LN2_OUT, AP_SIM_T_LN2_IN, S_LN2W, S_LN2B, dy2,
                           &sv->y2, &sv->st2, &sv->x2, gx);
    CHECK_ALLOC(gx);

    /* attention: output projection */
    if (c->bias) k->colsum(ns, h, gx, h, G(u, S_BO));
    rt_real *go = gx;
    if (c->sp) {
        go = gather_rows(c, gx, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(go);
    }
    rt_real *dctx = A(TMP, ATTN_CTX, layer, n * c->aL * d);
    CHECK_ALLOC(dctx);
    k->gemm_nn(n, c->aL * d, h, go, h, W(u, S_WO), c->aL * d, 0, dctx, c->aL * d);
    k->gemm_tn(h, c->aL * d, n, go, h, sv->ctx, c->aL * d, 1, G(u, S_WO), c->aL * d);
    if (c->sp) FREE(go);
    FREE(sv->ctx);
    /* core attention */
    rt_real *dqkv = A(TMP, QKV, layer, n * c->qkvL);
    CHECK_ALLOC(dqkv);
    int per_head = sv->P == NULL;
    rt_real *P = per_head ? A(TMP, SCORES, layer, c->s * c->s) : sv->P;
    CHECK_ALLOC(P);
    rt_real *dP = A(TMP, SOFTMAX, layer, c->s * c->s);
    CHECK_ALLOC(dP);
    k->attn_bwd(&sh, sv->qkv, P, per_head, dctx, dP, dqkv);
    FREE(dP);
    FREE(P);
    sv->P = NULL;
    FREE(dctx);
    if (c->m.pos == AP_POS_ROTARY) {
        k->rope(dqkv, n, c->qkvL, c->aL, d, c->s, 1);
        k->rope(dqkv + c->aL * d, n, c->qkvL, c->kL, d, c->s, 1);
    }
    if (c->qkv_bias) k->colsum(n, c->qkvL, dqkv, c->qkvL, G(u, S_BQKV));
    /* QKV projection: dWqkv += dqkv^T y1, dy1 = dqkv Wqkv */
    rt_real *y1g = NULL;
    if (c->sp) {
        y1g = gather_rows(c, sv->y1, AP_SIM_T_SP_GATHER, layer, mb);
        CHECK_ALLOC(y1g);
    }
    k->gemm_tn(c->qkvL, h, n, dqkv, c->qkvL, y1g ? y1g : sv->y1, h, 1, G(u, S_WQKV), h);
    rt_real *dy1 = A(TMP, LN1_OUT, layer, n * h);
    CHECK_ALLOC(dy1);
    k->gemm_nn(n, h, c->qkvL, dqkv, c->qkvL, W(u, S_WQKV), h, 0, dy1, h);
    FREE(y1g);
    FREE(dqkv);
    FREE(sv->qkv);
    /* first norm, residual */
    return norm_bwd_residual(c, u, mb, AP_SIM_T_LN1_OUT, AP_SIM_T_INPUT, S_LN1W, S_LN1B, dy1,
                             &sv->y1, &sv->st1, &sv->x, gx);
}

/* ---- embedding ------------------------------------------------------------------------------- */

rt_real *rt_embed_fwd(rt_ctx *c, int mb) {
    const rt_kernels *k = c->k;
    rt_unit *u = &c->units[c->u_embed];
    int64_t n = c->n, ns = c->ns, h = c->h;
    int layer = c->ck_first[0];
    int32_t *tok = rt_alloc_bytes(c, ACT, AP_SIM_T_TOKENS, AP_SIM_LAYER_EMBED, mb,
                                  n * (int64_t)sizeof(int32_t));
    CHECK_ALLOC(tok);
    fill_tokens(c, mb, 0, tok);
    c->ends[(int64_t)mb * RT_NEND + RT_END_TOKENS] = tok;
    int64_t v0 = (int64_t)c->tp_rank * c->VL;
    rt_real *x0;
    if (c->sp) {
        /* each rank looks up its vocabulary slice; reduce-scatter sums and splits the rows */
        rt_real *e = A(TMP, EMBED_OUT, AP_SIM_LAYER_EMBED, n * h);
        CHECK_ALLOC(e);
        k->embed_fwd(n, h, tok, W(u, S_WTE), v0, c->VL, e);
        x0 = reduce_rows(c, e, ACT, AP_SIM_T_INPUT, layer, mb);
        CHECK_ALLOC(x0);
        FREE(e);
    } else {
        x0 = A(ACT, INPUT, layer, ns * h);
        CHECK_ALLOC(x0);
        k->embed_fwd(n, h, tok, W(u, S_WTE), v0, c->VL, x0);
        CHECK_ALLOC(reduce_rows(c, x0, ACT, AP_SIM_T_INPUT, layer, mb));
    }
    if (c->learned_pos)
        k->pos_fwd(ns, h, x0, W(u, S_WPE), c->sp ? (int64_t)c->tp_rank * ns : 0, c->s);
    return x0;
}

ap_status rt_embed_bwd(rt_ctx *c, int mb, rt_real *g) {
    const rt_kernels *k = c->k;
    rt_unit *u = &c->units[c->u_embed];
    int64_t n = c->n, ns = c->ns, h = c->h;
    void **tokp = &c->ends[(int64_t)mb * RT_NEND + RT_END_TOKENS];
    if (c->learned_pos)
        k->pos_bwd(ns, h, g, G(u, S_WPE), c->sp ? (int64_t)c->tp_rank * ns : 0, c->s);
    rt_real *gg = g;
    if (c->sp) {
        gg = gather_rows(c, g, AP_SIM_T_SP_GATHER, AP_SIM_LAYER_EMBED, mb);
        if (!gg) return c->st;
    }
    k->embed_bwd(n, h, (const int32_t *)*tokp, gg, (int64_t)c->tp_rank * c->VL, c->VL,
                 G(u, S_WTE));
    if (gg != g) FREE(gg);
    FREE(g);
    rt_free(c, *tokp);
    *tokp = NULL;
    return AP_OK;
}

/* ---- head: final norm, LM head, cross-entropy ----------------------------------------------------- */

/* the LM head's matrix and gradient: its own, or the embedding's when tied on one stage */
static const rt_real *lm_w(const rt_unit *hu) {
    return hu->tie ? W(hu->tie, S_WTE) : W(hu, S_LMH);
}
static rt_real *lm_g(const rt_unit *hu) { return hu->tie ? G(hu->tie, S_WTE) : G(hu, S_LMH); }

#define END(mb, i) c->ends[(int64_t)(mb) * RT_NEND + (i)]

ap_status rt_head_fwd(rt_ctx *c, int mb, rt_real *x) {
    const rt_kernels *k = c->k;
    rt_unit *u = &c->units[c->u_head];
    int64_t n = c->n, ns = c->ns, h = c->h, VL = c->VL;
    int L = (int)c->L;
    rt_real *st = rt_alloc(c, ACT, AP_SIM_T_NORM_STATS, L, mb, ns * c->nstat);
    rt_real *yf = st ? rt_alloc(c, ACT, AP_SIM_T_FINAL_NORM_OUT, L, mb, ns * h) : NULL;
    if (!yf) return c->st;
    k->norm_fwd(c->rms, ns, h, x, W(u, S_LNFW), W(u, S_LNFB), yf, st);
    rt_real *yfg = NULL;
    if (c->sp && !(yfg = gather_rows(c, yf, AP_SIM_T_SP_GATHER, L, mb))) return c->st;
    rt_real *logits = rt_alloc(c, ACT, AP_SIM_T_LOGITS, L, mb, n * VL);
    if (!logits) return c->st;
    k->gemm_nt(n, VL, h, yfg ? yfg : yf, h, lm_w(u), h, 0, logits, VL);
    if (yfg) rt_free(c, yfg);
    int32_t *tgt = rt_alloc_bytes(c, ACT, AP_SIM_T_TARGETS, L, mb, n * (int64_t)sizeof(int32_t));
    if (!tgt) return c->st;
    fill_tokens(c, mb, 1, tgt);
    /* vocab-parallel cross-entropy: global max, sum of exponentials and the target's logit,
       each reduced over the tp ranks (Megatron VocabParallelCrossEntropy) */
    int64_t v0 = (int64_t)c->tp_rank * VL;
    rt_real *mx = rt_alloc(c, TMP, AP_SIM_T_LOSS_TEMP, L, mb, n);
    rt_real *sm = mx ? rt_alloc(c, TMP, AP_SIM_T_LOSS_TEMP, L, mb, n) : NULL;
    rt_real *tl = sm ? rt_alloc(c, TMP, AP_SIM_T_LOSS_TEMP, L, mb, n) : NULL;
    if (!tl) return c->st;
    k->ce_max(n, VL, logits, mx);
    if (c->t > 1 && rt_c_allreduce(c, c->tpg, mx, n, RT_OP_MAX) != AP_OK) return c->st;
    k->ce_sumexp(n, VL, logits, mx, sm);
    if (c->t > 1 && rt_c_allreduce(c, c->tpg, sm, n, RT_OP_SUM) != AP_OK) return c->st;
    k->ce_target(n, VL, logits, tgt, v0, tl);
    if (c->t > 1 && rt_c_allreduce(c, c->tpg, tl, n, RT_OP_SUM) != AP_OK) return c->st;
    double loss = k->ce_finish(n, VL, logits, mx, sm, tl);
    if (c->tp_rank == 0) c->loss_sum += loss;
    rt_free(c, tl);
    rt_free(c, sm);
    rt_free(c, mx);
    END(mb, RT_END_NSTAT) = st;
    END(mb, RT_END_YF) = yf;
    END(mb, RT_END_LOGITS) = logits;
    END(mb, RT_END_TARGETS) = tgt;
    END(mb, RT_END_HIN) = x;
    return AP_OK;
}

rt_real *rt_head_bwd(rt_ctx *c, int mb) {
    const rt_kernels *k = c->k;
    rt_unit *u = &c->units[c->u_head];
    int64_t n = c->n, ns = c->ns, h = c->h, VL = c->VL;
    int L = (int)c->L;
    rt_real *logits = END(mb, RT_END_LOGITS), *yf = END(mb, RT_END_YF);
    /* d loss / d logits = (p - onehot) / tokens of the global batch: the step's loss is the
       mean over gbs * s tokens, so data-parallel gradients are summed, not averaged */
    rt_real scale = (rt_real)(1.0 / ((double)c->p.gbs * (double)c->s));
    k->ce_bwd(n, VL, logits, END(mb, RT_END_TARGETS), (int64_t)c->tp_rank * VL, scale);
    rt_real *yfg = NULL;
    if (c->sp) {
        yfg = gather_rows(c, yf, AP_SIM_T_SP_GATHER, L, mb);
        CHECK_ALLOC(yfg);
    }
    k->gemm_tn(VL, h, n, logits, VL, yfg ? yfg : yf, h, 1, lm_g(u), h);
    rt_real *dyf = A(TMP, FINAL_NORM_OUT, L, n * h);
    CHECK_ALLOC(dyf);
    k->gemm_nn(n, h, VL, logits, VL, lm_w(u), h, 0, dyf, h);
    FREE(yfg);
    rt_free(c, logits);
    rt_free(c, END(mb, RT_END_TARGETS));
    END(mb, RT_END_LOGITS) = END(mb, RT_END_TARGETS) = NULL;
    rt_real *dyr = reduce_rows(c, dyf, TMP, AP_SIM_T_FINAL_NORM_OUT, L, mb);
    CHECK_ALLOC(dyr);
    if (dyr != dyf) FREE(dyf);
    rt_real *dx = A(TMP, INPUT, L, ns * h);
    CHECK_ALLOC(dx);
    rt_real *x = END(mb, RT_END_HIN);
    k->norm_bwd(c->rms, ns, h, dyr, x, W(u, S_LNFW), END(mb, RT_END_NSTAT), dx, G(u, S_LNFW),
                G(u, S_LNFB));
    FREE(dyr);
    rt_free(c, yf);
    rt_free(c, END(mb, RT_END_NSTAT));
    rt_free(c, x);
    END(mb, RT_END_YF) = END(mb, RT_END_NSTAT) = END(mb, RT_END_HIN) = NULL;
    return dx;
}
