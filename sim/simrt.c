/*
 * simrt.c - the simulator's description of autoplan's own runtime (trainer "runtime",
 * runtime/, docs/runtime.md): one training iteration of one pipeline rank, tensor by tensor, in
 * the order the executor allocates and frees them, derived from the model shapes and the plan
 * alone (sim.h). The generic trainer layout (sim.c, simlayer.c) describes 16-bit trainers
 * (Megatron's saved set, FlashAttention, PyTorch's allocator); the runtime keeps fp32 tensors,
 * materialised attention probabilities, norm statistics, token ids and communication buffers of
 * its own, so it has its own layer description here rather than fudge factors there.
 *
 * What it reproduces (each with the executor file that does it):
 *   model states   per unit (layer, embedding, head) 4-byte weights, gradients and AdamW m, v;
 *                  flat unit buffers padded to a multiple of dp under ZeRO >= 1; ZeRO-1 shards m,
 *                  v; ZeRO-2/3 allocate the full gradient at a unit's first backward and keep
 *                  only the reduced shard from its last; ZeRO-3 keeps a parameter shard and
 *                  gathers a temporary full copy around every pass; the offloaded fraction of m,
 *                  v lives in the host pool (runtime/zero.c)
 *   comm buffers   a fixed collective workspace when any group has two ranks; the pipeline send
 *                  pool holding one step's transfers (runtime/run.c)
 *   layers         the forward (saving, without saving under full recomputation, or rebuilt
 *                  before the backward) and the backward of a pre-norm block with Megatron's
 *                  tensor and sequence parallelism (runtime/model.c)
 *   schedule       ap_sim_schedule's 1F1B / interleaved order, stage transfers, the deferred
 *                  reduction of a tied embedding split over two stages (runtime/run.c, zero.c)
 * Categories: temporaries and communication buffers are both "other" here; the kinds
 * AP_SIM_T_COMM_WS and AP_SIM_T_SEND_POOL tell the buffers apart (runtime/predict.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define T ap_simg_tensor
#define F ap_simg_free
#define PAR AP_SIM_CAT_PARAMS
#define GRD AP_SIM_CAT_GRADS
#define OPT AP_SIM_CAT_OPTIMIZER

/* The runtime's fixed sizes (runtime/rt_int.h): collective workspace 2 x 32768 elements, and
 * 1024 bytes reserved per buffered pipeline message. */
#define RT_WS_ELEMS (2 * 32768)
#define RT_SLOT_OVERHEAD 1024
#define E 4 /* fp32 */

typedef struct rtu {        /* a unit owning parameters */
    int kind;               /* 0 layer, 1 embedding, 2 head */
    int32_t layer;
    int chunk;
    int64_t n, npad, shard, off;
    int32_t g, gshard, gathered;
    int refs, bwd_done;
} rtu;

typedef struct rtsv {       /* saved tensors of one layer for one micro-batch */
    int32_t x, st1, y1, qkv, P, ctx, x2, st2, y2, u, act;
} rtsv;

typedef struct rtg {
    gen *g;
    const ap_model *m;
    const ap_plan *p;
    int t, sp, tied, rms, swiglu, bias, qkv_bias, learned, z, D;
    int64_t n, ns, h, d, s, b, aL, kL, fL, uL, VL, qkvL, nstat;
    int nloc, nunits, u_embed, u_head, tie_group;
    rtu *u;
    rtsv *sv;               /* [mb][loc] */
    int32_t *ends;          /* [mb][6]: tokens, targets, nstat, yf, logits, head input */
} rtg;

enum { EN_TOK = 0, EN_TGT, EN_NST, EN_YF, EN_LOG, EN_HIN, EN_N };

/* ---- sizes ------------------------------------------------------------------------------------ */

/* Parameters of one unit on a tp rank, laid out as runtime/model.c does. */
static int64_t unit_params(const rtg *r, int kind) {
    int64_t h = r->h;
    int ln = !r->rms;
    if (kind == 0)
        return r->qkvL * h + (r->qkv_bias ? r->qkvL : 0) + h * r->aL * r->d + r->uL * h +
               (r->bias ? r->uL : 0) + h * r->fL + h * (ln ? 2 : 1) * 2 + (r->bias ? 2 * h : 0);
    if (kind == 1) return r->VL * h + (r->learned ? r->m->learned_pos * h : 0);
    int64_t lm = !r->tied || r->p->pp > 1 ? r->VL * h : 0;
    return lm + h * (ln ? 2 : 1);
}

static void dims(rtg *r, gen *g) {
    const ap_model *m = g->m;
    const ap_plan *p = g->p;
    r->g = g;
    r->m = m;
    r->p = p;
    r->t = p->tp > 0 ? p->tp : 1;
    r->sp = p->sp && r->t > 1;
    r->tied = m->tied_embeddings;
    r->rms = m->norm == AP_NORM_RMSNORM;
    r->swiglu = m->act == AP_ACT_SWIGLU;
    r->bias = m->bias;
    r->qkv_bias = m->bias || m->qkv_bias;
    r->learned = m->pos == AP_POS_LEARNED;
    r->z = p->zero;
    r->D = p->dp > 0 ? p->dp : 1;
    r->s = p->seq;
    r->b = p->mbs;
    r->n = r->s * r->b;
    r->ns = r->sp ? r->n / r->t : r->n;
    r->h = m->hidden;
    r->d = m->head_dim;
    r->aL = m->heads / r->t;
    r->kL = m->kv_heads / r->t;
    r->fL = m->ffn_hidden / r->t;
    r->uL = r->swiglu ? 2 * r->fL : r->fL;
    r->VL = m->vocab / r->t;
    r->qkvL = (r->aL + 2 * r->kL) * r->d;
    r->nstat = r->rms ? 1 : 2;
    r->tie_group = r->tied && p->pp > 1 && (g->stage == 0 || g->stage == p->pp - 1);
}

/* Units in the executor's order: local layers chunk by chunk, the embedding, the head. */
static int make_units(rtg *r) {
    gen *g = r->g;
    r->nloc = g->nloc;
    r->nunits = g->nloc + 2;
    r->u = ap_calloc((size_t)r->nunits, sizeof *r->u);
    if (!r->u) return -1;
    for (int k = 0; k < g->vp; k++)
        for (int i = 0; i < g->ck_n[k]; i++) {
            rtu *u = &r->u[g->ck_base[k] + i];
            u->kind = 0;
            u->layer = g->ck_first[k] + i;
            u->chunk = k;
        }
    r->u_embed = g->stage == 0 ? r->nloc : -1;
    r->u_head = g->stage == g->pp - 1 ? r->nloc + 1 : -1;
    r->u[r->nloc].kind = 1;
    r->u[r->nloc].layer = AP_SIM_LAYER_EMBED;
    r->u[r->nloc + 1].kind = 2;
    r->u[r->nloc + 1].layer = (int32_t)g->L;
    r->u[r->nloc + 1].chunk = g->vp - 1;
    for (int i = 0; i < r->nunits; i++) {
        rtu *u = &r->u[i];
        if ((i == r->nloc && r->u_embed < 0) || (i == r->nloc + 1 && r->u_head < 0)) continue;
        u->n = unit_params(r, u->kind);
        u->npad = r->z >= 1 ? cdiv(u->n, r->D) * r->D : u->n;
        u->shard = r->z >= 1 ? u->npad / r->D : u->n;
        u->off = (int64_t)llround(r->p->offload_optimizer * (double)u->shard);
        if (u->off > u->shard) u->off = u->shard;
        u->g = u->gshard = u->gathered = -1;
    }
    return 0;
}

/* ---- model states ------------------------------------------------------------------------- */

static void setup(rtg *r) {
    gen *g = r->g;
    const ap_plan *p = r->p;
    ap_simg_op(g, AP_SIM_OP_SETUP, -1, AP_SIM_LAYER_NONE, -1);
    if (r->t > 1 || r->D > 1 || r->tie_group)
        T(g, AP_SIM_T_COMM_WS, OTH, AP_SIM_LAYER_NONE, -1, RT_WS_ELEMS * E, 0);
    if (p->pp > 1) {
        int64_t sends = 0;
        for (int k = 0; k < g->vp; k++) {
            int c = k * g->pp + g->stage;
            if (c < g->pp * g->vp - 1) sends += g->mbs_n;
            if (c > 0) sends += g->mbs_n;
        }
        T(g, AP_SIM_T_SEND_POOL, OTH, AP_SIM_LAYER_NONE, -1,
          sends * (r->ns * r->h * E + RT_SLOT_OVERHEAD), 0);
    }
    for (int i = 0; i < r->nunits; i++) {
        rtu *u = &r->u[i];
        if (u->n == 0) continue;
        T(g, AP_SIM_T_WEIGHT, PAR, u->layer, -1, (r->z < 3 ? u->npad : u->shard) * E, 0);
        if (r->z <= 1) u->g = T(g, AP_SIM_T_GRAD, GRD, u->layer, -1, u->npad * E, 0);
        int64_t dev = u->shard - u->off;
        if (dev > 0) {
            T(g, AP_SIM_T_OPTIM, OPT, u->layer, -1, dev * E, 0);
            T(g, AP_SIM_T_OPTIM, OPT, u->layer, -1, dev * E, 0);
        }
    }
}

static void pre(rtg *r, rtu *u, int32_t mb) {
    if (r->z < 3) return;
    if (u->gathered >= 0) {
        u->refs++;
        return;
    }
    ap_simg_op(r->g, AP_SIM_OP_GATHER, u->chunk, u->layer, mb);
    u->gathered = T(r->g, AP_SIM_T_WEIGHT_GATHERED, OTH, u->layer, mb, u->npad * E, 0);
    u->refs = 1;
}

static void post(rtg *r, rtu *u) {
    if (r->z < 3 || u->gathered < 0) return;
    if (--u->refs > 0) return;
    F(r->g, u->gathered);
    u->gathered = -1;
}

static void grad_begin(rtg *r, rtu *u) {
    if (u->g < 0) u->g = T(r->g, AP_SIM_T_GRAD, GRD, u->layer, -1, u->npad * E, 0);
}

static int deferred(const rtg *r, const rtu *u) { return r->tie_group && u->kind != 0; }

static void reduce_dp(rtg *r, rtu *u) {
    if (r->z < 2) return;
    u->gshard = T(r->g, AP_SIM_T_GRAD_SHARD, GRD, u->layer, -1, u->shard * E, 0);
    F(r->g, u->g);
    u->g = -1;
}

static void grad_end(rtg *r, rtu *u, int32_t mb) {
    u->bwd_done++;
    if (u->bwd_done != r->g->mbs_n || deferred(r, u)) return;
    ap_simg_op(r->g, AP_SIM_OP_GRAD_REDUCE, u->chunk, u->layer, mb);
    reduce_dp(r, u);
}

/* ---- a transformer layer (runtime/model.c) -------------------------------------------------------- */

#define SVP(mb, loc) (&r->sv[(int64_t)(mb) * (r->nloc > 0 ? r->nloc : 1) + (loc)])

static int32_t layer_fwd(rtg *r, int loc, int32_t mb, int mode) {
    gen *g = r->g;
    int32_t L = r->u[loc].layer;
    int64_t n = r->n, ns = r->ns, h = r->h;
    int discard = mode == MODE_DISCARD;
    int per_head = discard || (r->p->recompute == AP_RECOMPUTE_SELECTIVE && mode == MODE_SAVE);
    int32_t st1 = T(g, AP_SIM_T_NORM_STATS, ACT, L, mb, ns * r->nstat * E, 0);
    int32_t y1 = T(g, AP_SIM_T_LN1_OUT, ACT, L, mb, ns * h * E, 0);
    int32_t y1g = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 0) : -1;
    int32_t qkv = T(g, AP_SIM_T_QKV, ACT, L, mb, n * r->qkvL * E, 0);
    F(g, y1g);
    if (discard) {
        F(g, st1);
        F(g, y1);
    }
    int32_t P = per_head ? T(g, AP_SIM_T_SCORES, OTH, L, mb, r->s * r->s * E, 0)
                         : T(g, AP_SIM_T_SOFTMAX, ACT, L, mb, r->b * r->aL * r->s * r->s * E, 0);
    int32_t ctx = T(g, AP_SIM_T_ATTN_CTX, ACT, L, mb, n * r->aL * r->d * E, 0);
    if (per_head) {
        F(g, P);
        P = -1;
    }
    if (discard) F(g, qkv);
    int32_t o = T(g, AP_SIM_T_PROJ_OUT, OTH, L, mb, n * h * E, 0);
    if (discard) F(g, ctx);
    int32_t x2 = T(g, AP_SIM_T_LN2_IN, ACT, L, mb, ns * h * E, 0);
    F(g, o);
    int32_t st2 = T(g, AP_SIM_T_NORM_STATS, ACT, L, mb, ns * r->nstat * E, 0);
    int32_t y2 = T(g, AP_SIM_T_LN2_OUT, ACT, L, mb, ns * h * E, 0);
    int32_t y2g = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 0) : -1;
    int32_t u = T(g, AP_SIM_T_FC1_OUT, ACT, L, mb, n * r->uL * E, 0);
    F(g, y2g);
    if (discard) {
        F(g, st2);
        F(g, y2);
    }
    int32_t act = T(g, AP_SIM_T_ACT_OUT, ACT, L, mb, n * r->fL * E, 0);
    if (discard) F(g, u);
    int32_t dn = T(g, AP_SIM_T_FC2_OUT, OTH, L, mb, n * h * E, 0);
    if (discard) F(g, act);
    int32_t out = mode == MODE_RECOMPUTE
                      ? T(g, AP_SIM_T_LAYER_OUT, ACT, L, mb, ns * h * E, 0)
                      : T(g, AP_SIM_T_INPUT, ACT, L + 1, mb, ns * h * E, 0);
    F(g, dn);
    if (discard) {
        F(g, x2);
        return out;
    }
    rtsv *sv = SVP(mb, loc);
    sv->st1 = st1;
    sv->y1 = y1;
    sv->qkv = qkv;
    sv->P = P;
    sv->ctx = ctx;
    sv->x2 = x2;
    sv->st2 = st2;
    sv->y2 = y2;
    sv->u = u;
    sv->act = act;
    return out;
}

/* The row-parallel reduction of dy (reduce-scatter with sp), the norm's input gradient, then the
 * frees of dy, the norm's saved output, statistics and input, and the residual gradient gx. */
static int32_t norm_bwd_residual(rtg *r, int32_t L, int32_t mb, int kind_dy, int kind_dx,
                                 int32_t dy, int32_t y, int32_t st, int32_t x, int32_t gx) {
    gen *g = r->g;
    if (r->sp) {
        int32_t red = T(g, kind_dy, OTH, L, mb, r->ns * r->h * E, 1);
        F(g, dy);
        dy = red;
    }
    int32_t dx = T(g, kind_dx, OTH, L, mb, r->ns * r->h * E, 1);
    F(g, dy);
    F(g, y);
    F(g, st);
    F(g, x);
    F(g, gx);
    return dx;
}

static int32_t layer_bwd(rtg *r, int loc, int32_t mb, int32_t gx) {
    gen *g = r->g;
    int32_t L = r->u[loc].layer;
    int64_t n = r->n, h = r->h;
    rtsv *sv = SVP(mb, loc);
    /* MLP */
    int32_t gdn = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 1) : -1;
    int32_t dact = T(g, AP_SIM_T_ACT_OUT, OTH, L, mb, n * r->fL * E, 1);
    F(g, gdn);
    F(g, sv->act);
    int32_t du = T(g, AP_SIM_T_FC1_OUT, OTH, L, mb, n * r->uL * E, 1);
    F(g, dact);
    F(g, sv->u);
    int32_t y2g = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 0) : -1;
    int32_t dy2 = T(g, AP_SIM_T_LN2_OUT, OTH, L, mb, n * h * E, 1);
    F(g, y2g);
    F(g, du);
    gx = norm_bwd_residual(r, L, mb, AP_SIM_T_LN2_OUT, AP_SIM_T_LN2_IN, dy2, sv->y2, sv->st2,
                           sv->x2, gx);
    /* attention */
    int32_t go = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 1) : -1;
    int32_t dctx = T(g, AP_SIM_T_ATTN_CTX, OTH, L, mb, n * r->aL * r->d * E, 1);
    F(g, go);
    F(g, sv->ctx);
    int32_t dqkv = T(g, AP_SIM_T_QKV, OTH, L, mb, n * r->qkvL * E, 1);
    int32_t P = sv->P >= 0 ? sv->P : T(g, AP_SIM_T_SCORES, OTH, L, mb, r->s * r->s * E, 0);
    int32_t dP = T(g, AP_SIM_T_SOFTMAX, OTH, L, mb, r->s * r->s * E, 1);
    F(g, dP);
    F(g, P);
    F(g, dctx);
    int32_t y1g = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 0) : -1;
    int32_t dy1 = T(g, AP_SIM_T_LN1_OUT, OTH, L, mb, n * h * E, 1);
    F(g, y1g);
    F(g, dqkv);
    F(g, sv->qkv);
    int32_t dx = norm_bwd_residual(r, L, mb, AP_SIM_T_LN1_OUT, AP_SIM_T_INPUT, dy1, sv->y1,
                                   sv->st1, sv->x, gx);
    memset(sv, 0xff, sizeof *sv);
    return dx;
}

/* ---- embedding and head ------------------------------------------------------------------------ */

static int32_t embed_fwd(rtg *r, int32_t mb, int32_t first_layer) {
    gen *g = r->g;
    int32_t *en = &r->ends[(int64_t)mb * EN_N];
    en[EN_TOK] = T(g, AP_SIM_T_TOKENS, ACT, AP_SIM_LAYER_EMBED, mb, r->n * 4, 0);
    if (!r->sp) return T(g, AP_SIM_T_INPUT, ACT, first_layer, mb, r->ns * r->h * E, 0);
    int32_t e = T(g, AP_SIM_T_EMBED_OUT, OTH, AP_SIM_LAYER_EMBED, mb, r->n * r->h * E, 0);
    int32_t x0 = T(g, AP_SIM_T_INPUT, ACT, first_layer, mb, r->ns * r->h * E, 0);
    F(g, e);
    return x0;
}

static void embed_bwd(rtg *r, int32_t mb, int32_t gx) {
    gen *g = r->g;
    int32_t *en = &r->ends[(int64_t)mb * EN_N];
    int32_t gg = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, AP_SIM_LAYER_EMBED, mb, r->n * r->h * E, 1)
                       : -1;
    F(g, gg);
    F(g, gx);
    F(g, en[EN_TOK]);
    en[EN_TOK] = -1;
}

static void head_fwd(rtg *r, int32_t mb, int32_t x) {
    gen *g = r->g;
    int32_t L = (int32_t)g->L, *en = &r->ends[(int64_t)mb * EN_N];
    int64_t n = r->n;
    en[EN_NST] = T(g, AP_SIM_T_NORM_STATS, ACT, L, mb, r->ns * r->nstat * E, 0);
    en[EN_YF] = T(g, AP_SIM_T_FINAL_NORM_OUT, ACT, L, mb, r->ns * r->h * E, 0);
    int32_t yfg = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * r->h * E, 0) : -1;
    en[EN_LOG] = T(g, AP_SIM_T_LOGITS, ACT, L, mb, n * r->VL * E, 0);
    F(g, yfg);
    en[EN_TGT] = T(g, AP_SIM_T_TARGETS, ACT, L, mb, n * 4, 0);
    /* vocab-parallel cross-entropy: row max, sum of exponentials, target logit */
    int32_t mx = T(g, AP_SIM_T_LOSS_TEMP, OTH, L, mb, n * E, 0);
    int32_t sm = T(g, AP_SIM_T_LOSS_TEMP, OTH, L, mb, n * E, 0);
    int32_t tl = T(g, AP_SIM_T_LOSS_TEMP, OTH, L, mb, n * E, 0);
    F(g, tl);
    F(g, sm);
    F(g, mx);
    en[EN_HIN] = x;
}

static int32_t head_bwd(rtg *r, int32_t mb) {
    gen *g = r->g;
    int32_t L = (int32_t)g->L, *en = &r->ends[(int64_t)mb * EN_N];
    int64_t n = r->n, ns = r->ns, h = r->h;
    int32_t yfg = r->sp ? T(g, AP_SIM_T_SP_GATHER, OTH, L, mb, n * h * E, 0) : -1;
    int32_t dyf = T(g, AP_SIM_T_FINAL_NORM_OUT, OTH, L, mb, n * h * E, 1);
    F(g, yfg);
    F(g, en[EN_LOG]);
    F(g, en[EN_TGT]);
    if (r->sp) {
        int32_t red = T(g, AP_SIM_T_FINAL_NORM_OUT, OTH, L, mb, ns * h * E, 1);
        F(g, dyf);
        dyf = red;
    }
    int32_t dx = T(g, AP_SIM_T_INPUT, OTH, L, mb, ns * h * E, 1);
    F(g, dyf);
    F(g, en[EN_YF]);
    F(g, en[EN_NST]);
    F(g, en[EN_HIN]);
    for (int k = 0; k < EN_N; k++)
        if (k != EN_TOK) en[k] = -1;
    return dx;
}

/* ---- chunks (runtime/run.c) ----------------------------------------------------------------------- */

static int recomputes(const gen *g, int k, int i) {
    if (g->p->recompute != AP_RECOMPUTE_FULL) return 0;
    int K = g->ck_rc[k];
    return K <= 0 || i < K;
}

static void chunk_fwd(rtg *r, int k, int32_t mb) {
    gen *g = r->g;
    int c = k * g->pp + g->stage, nch = g->pp * g->vp;
    int32_t x;
    if (c == 0) {
        rtu *ue = &r->u[r->u_embed];
        pre(r, ue, mb);
        ap_simg_op(g, AP_SIM_OP_EMBED_FWD, k, AP_SIM_LAYER_EMBED, mb);
        x = embed_fwd(r, mb, g->ck_first[k]);
        post(r, ue);
    } else {
        ap_simg_op(g, AP_SIM_OP_RECV_FWD, k, g->ck_first[k], mb);
        x = T(g, AP_SIM_T_INPUT, ACT, g->ck_first[k], mb, r->ns * r->h * E, 0);
    }
    for (int i = 0; i < g->ck_n[k]; i++) {
        int loc = g->ck_base[k] + i;
        rtu *u = &r->u[loc];
        pre(r, u, mb);
        ap_simg_op(g, AP_SIM_OP_FWD, k, u->layer, mb);
        SVP(mb, loc)->x = x;
        x = layer_fwd(r, loc, mb, recomputes(g, k, i) ? MODE_DISCARD : MODE_SAVE);
        post(r, u);
    }
    if (c == nch - 1) {
        rtu *uh = &r->u[r->u_head];
        rtu *tie = r->tied && g->pp == 1 ? &r->u[r->u_embed] : NULL;
        pre(r, uh, mb);
        if (tie) pre(r, tie, mb);
        ap_simg_op(g, AP_SIM_OP_HEAD_FWD, k, (int32_t)g->L, mb);
        head_fwd(r, mb, x);
        if (tie) post(r, tie);
        post(r, uh);
    } else {
        ap_simg_op(g, AP_SIM_OP_SEND_FWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        F(g, x);
    }
}

static void chunk_bwd(rtg *r, int k, int32_t mb) {
    gen *g = r->g;
    int c = k * g->pp + g->stage, nch = g->pp * g->vp;
    int32_t gx;
    if (c == nch - 1) {
        rtu *uh = &r->u[r->u_head];
        rtu *tie = r->tied && g->pp == 1 ? &r->u[r->u_embed] : NULL;
        pre(r, uh, mb);
        if (tie) pre(r, tie, mb);
        ap_simg_op(g, AP_SIM_OP_HEAD_BWD, k, (int32_t)g->L, mb);
        grad_begin(r, uh);
        if (tie) grad_begin(r, tie);
        gx = head_bwd(r, mb);
        grad_end(r, uh, mb);
        if (tie) post(r, tie);
        post(r, uh);
    } else {
        ap_simg_op(g, AP_SIM_OP_RECV_BWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        gx = T(g, AP_SIM_T_STAGE_OUT, OTH, g->ck_first[k] + g->ck_n[k], mb, r->ns * r->h * E, 1);
    }
    for (int i = g->ck_n[k] - 1; i >= 0; i--) {
        int loc = g->ck_base[k] + i;
        rtu *u = &r->u[loc];
        pre(r, u, mb);
        if (recomputes(g, k, i)) {
            ap_simg_op(g, AP_SIM_OP_RECOMPUTE, k, u->layer, mb);
            F(g, layer_fwd(r, loc, mb, MODE_RECOMPUTE));
        }
        ap_simg_op(g, AP_SIM_OP_BWD, k, u->layer, mb);
        grad_begin(r, u);
        gx = layer_bwd(r, loc, mb, gx);
        grad_end(r, u, mb);
        post(r, u);
    }
    if (c == 0) {
        rtu *ue = &r->u[r->u_embed];
        pre(r, ue, mb);
        ap_simg_op(g, AP_SIM_OP_EMBED_BWD, k, AP_SIM_LAYER_EMBED, mb);
        grad_begin(r, ue);
        embed_bwd(r, mb, gx);
        grad_end(r, ue, mb);
        post(r, ue);
    } else {
        ap_simg_op(g, AP_SIM_OP_SEND_BWD, k, g->ck_first[k], mb);
        F(g, gx);
    }
}

/* After the passes: the deferred tied units, AdamW (offload copies are host memory), the
 * parameter all-gather, then the gradient shards go (runtime/zero.c). */
static void finish(rtg *r) {
    gen *g = r->g;
    for (int i = 0; i < r->nunits; i++) {
        rtu *u = &r->u[i];
        if (u->n == 0 || !deferred(r, u)) continue;
        ap_simg_op(g, AP_SIM_OP_GRAD_REDUCE, u->chunk, u->layer, -1);
        reduce_dp(r, u);
    }
    for (int i = 0; i < r->nunits; i++) {
        rtu *u = &r->u[i];
        if (u->n == 0) continue;
        if (u->off > 0) ap_simg_op(g, AP_SIM_OP_OFFLOAD, u->chunk, u->layer, -1);
        if (u->shard > u->off) ap_simg_op(g, AP_SIM_OP_OPTIMIZER, u->chunk, u->layer, -1);
    }
    if ((r->z == 1 || r->z == 2) && r->D > 1)
        for (int i = 0; i < r->nunits; i++)
            if (r->u[i].n > 0) ap_simg_op(g, AP_SIM_OP_GATHER, r->u[i].chunk, r->u[i].layer, -1);
    for (int i = 0; i < r->nunits; i++) {
        rtu *u = &r->u[i];
        if (u->n == 0 || r->z <= 1) continue;
        F(g, u->gshard);
        u->gshard = -1;
        F(g, u->g);
        u->g = -1;
    }
}

void ap_simrt_generate(gen *g) {
    rtg r;
    memset(&r, 0, sizeof r);
    dims(&r, g);
    int64_t nsv = g->mbs_n * (g->nloc > 0 ? g->nloc : 1);
    r.sv = ap_malloc((size_t)nsv * sizeof *r.sv);
    r.ends = ap_malloc((size_t)g->mbs_n * EN_N * sizeof *r.ends);
    ap_sim_pass *it = ap_malloc((size_t)(2 * g->mbs_n * g->vp) * sizeof *it);
    if (!r.sv || !r.ends || !it || make_units(&r) != 0) {
        g->nomem = 1;
    } else {
        memset(r.sv, 0xff, (size_t)nsv * sizeof *r.sv);
        memset(r.ends, 0xff, (size_t)g->mbs_n * EN_N * sizeof *r.ends);
        setup(&r);
        int n = ap_sim_schedule(g->pp, g->vp, g->mbs_n, g->stage, it);
        for (int i = 0; i < n && !g->nomem; i++) {
            if (it[i].fwd) chunk_fwd(&r, it[i].chunk, it[i].mb);
            else chunk_bwd(&r, it[i].chunk, it[i].mb);
        }
        if (!g->nomem) finish(&r);
    }
    ap_free(it);
    ap_free(r.sv);
    ap_free(r.ends);
    ap_free(r.u);
}

int64_t ap_sim_runtime_host_bytes(const ap_model *m, const ap_plan *p, int stage) {
    /* the same units as the generator; only their offloaded shares matter */
    gen g;
    ap_simg_place(&g, m, p, stage);
    rtg r;
    memset(&r, 0, sizeof r);
    dims(&r, &g);
    if (make_units(&r) != 0) return -1;
    /* m and v of every unit's offloaded share, plus the gradient and parameter copies of the
       unit being updated (one unit at a time) */
    int64_t persistent = 0, copies = 0;
    for (int i = 0; i < r.nunits; i++) {
        persistent += 2 * r.u[i].off * E;
        if (2 * r.u[i].off * E > copies) copies = 2 * r.u[i].off * E;
    }
    ap_free(r.u);
    return persistent + copies;
}
