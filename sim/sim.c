/*
 * sim.c - the memory-planning simulator (sim.h, docs/simulator.md).
 *
 * For each pipeline rank it writes the operations of one steady-state training iteration in the
 * plan's schedule and the allocations and frees each causes, then replays them through an
 * allocator model (alloc.c). Structure:
 *   1. sizes   - bytes of every tensor of a layer from the model shapes (ap_model_layer) and the
 *                plan's splits (tp, sp, cp, ep/etp); model-state bytes from the trainer's bytes
 *                per parameter (ap_trainer_get). Nothing is taken from the analytical estimate.
 *   2. events  - schedule (Megatron 1F1B / interleaved, Narayanan et al. 2021), per micro-batch
 *                forward and backward of each layer tensor by tensor, full or selective
 *                recompute, ZeRO-3/FSDP gathers and releases, gradient reduction at the
 *                trainer's cadence, offload transfers, optimizer step, zero_grad.
 *   3. replay  - each allocation and free goes through the allocator model as it is written
 *                (one pass, no second walk over the events): allocated and reserved curves,
 *                per-operation category snapshots, the peak and the live set there, the first
 *                operation over the memory budget.
 *
 * The tensors of one transformer layer (Korthikanti et al. 2022, tensor by tensor) are in
 * simlayer.c; names, descriptions and the JSON report in simreport.c.
 *
 * A streamed rank (ap_sim_opts.stream) runs the generator twice, the first time only to count
 * its events and find its allocated peak, and keeps no per-event array: stream_event and
 * stream_op_done build its summaries and hand out its operations during the replay.
 *
 * It does not model: cross-stream reuse, NCCL's internal buffers beyond a fixed overhead,
 * prefetching deeper than one ZeRO-3 layer, vocabulary padding, the norms' fp32 mean/rstd
 * (4 bytes per row, < 0.1% of a layer).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"
#include "autoplan/threads.h"

#define T ap_simg_tensor
#define F ap_simg_free


/* ---- options and device overhead -------------------------------------------------------- */

void ap_sim_opts_init(ap_sim_opts *o) {
    memset(o, 0, sizeof *o);
    o->allocator = AP_ALLOC_CACHING;
    o->headroom_bytes = AP_DEFAULT_HEADROOM_BYTES;
    o->device_overhead_bytes = -1;
    o->record_curves = 1;
    o->threads = 1;
}

/* ---- events and their replay ----------------------------------------------------------- */

/* Grow a per-op or per-event array in step with its capacity. */
static int grow(void **p, size_t elem, int oldcap, int newcap) {
    if (!*p && oldcap > 0) return 0; /* not recorded */
    void *n = ap_realloc(*p, (size_t)newcap * elem);
    if (!n) return -1;
    *p = n;
    return 0;
}

/* ---- arrays of released ranks ------------------------------------------------------------
 * Where ranks release their per-event arrays as they finish (keep_worst, release_events), the
 * next ranks take them instead of fresh memory: pages written once already cost no page fault
 * (compare gpt3-175b --gpus 64 replays 16 stages of 1,920 micro-batches: 49,000 page faults
 * and 0.13 s of system time with fresh arrays for every stage, 35,000 and 0.07-0.10 s with
 * these, 0.29-0.30 s -> 0.27 s wall on 2 threads). A rank reads only what it wrote itself, as
 * with fresh memory (the arrays are never read before they are written). */
enum { SP_TS, SP_BLK, SP_EV, SP_AC, SP_RC, SP_OPKEV, SP_OPKCAT, SP_OPECAT, SP_KINDS };
#define SPARE_MAX 4 /* arrays kept per kind (two threads hold at most three ranks' at once: the
                         two in flight and the worst so far); one given past them is freed */

typedef struct sim_spares {
    pthread_mutex_t mu;
    void *p[SP_KINDS][SPARE_MAX];
    int cap[SP_KINDS][SPARE_MAX]; /* elements */
    int n[SP_KINDS];
} sim_spares;

/* An array of kind k for at least `need` elements of `elem` bytes: a spare one (*cap its
 * capacity) or a new one (*cap = need; cap may be NULL); NULL out of memory. */
static void *spare_take(ap_sim *s, int k, int need, size_t elem, int *cap) {
    sim_spares *sp = s ? s->spares : NULL;
    if (sp) {
        void *got = NULL;
        pthread_mutex_lock(&sp->mu);
        for (int i = sp->n[k] - 1; i >= 0 && !got; i--)
            if (sp->cap[k][i] >= need) {
                got = sp->p[k][i];
                if (cap) *cap = sp->cap[k][i];
                sp->p[k][i] = sp->p[k][sp->n[k] - 1];
                sp->cap[k][i] = sp->cap[k][sp->n[k] - 1];
                sp->n[k]--;
            }
        pthread_mutex_unlock(&sp->mu);
        if (got) return got;
    }
    if (cap) *cap = need;
    return ap_malloc((size_t)need * elem);
}

/* Array p of kind k (capacity cap) to the spares, or freed when none are kept or they are
 * full. */
static void spare_give(ap_sim *s, int k, void *p, int cap) {
    sim_spares *sp = s ? s->spares : NULL;
    if (!p) return;
    if (sp) {
        pthread_mutex_lock(&sp->mu);
        int kept = sp->n[k] < SPARE_MAX;
        if (kept) {
            sp->p[k][sp->n[k]] = p;
            sp->cap[k][sp->n[k]++] = cap;
        }
        pthread_mutex_unlock(&sp->mu);
        if (kept) return;
    }
    ap_free(p);
}

/* The spares of a run: kept where finished ranks release their events; freed after. */
static void spares_open(ap_sim *s) {
    if (s->o.stream || !(s->o.keep_worst || s->o.release_events)) return;
    sim_spares *sp = ap_calloc(1, sizeof *sp);
    if (!sp) return; /* fresh arrays for every rank */
    if (pthread_mutex_init(&sp->mu, NULL) != 0) {
        ap_free(sp);
        return;
    }
    s->spares = sp;
}

static void spares_close(ap_sim *s) {
    sim_spares *sp = s->spares;
    if (!sp) return;
    for (int k = 0; k < SP_KINDS; k++)
        for (int i = 0; i < sp->n[k]; i++) ap_free(sp->p[k][i]);
    pthread_mutex_destroy(&sp->mu);
    ap_free(sp);
    s->spares = NULL;
}

/* What a streamed replay keeps of its rank as it goes (ap_sim_opts.stream): the counting
 * pass's figures, the summary curve being built, the open operation's peak, the operations the
 * summary names and the live sets at the peak and at the first event over the budget. */
typedef struct stream_rank {
    const ap_sim *s;
    ap_sim_rank *r;         /* the summaries go here */
    int64_t nev;            /* the rank's events (counting pass) */
    int peak_target;        /* its allocated peak's event (counting pass) */
    int peak_op;            /* the operation of that event, once it is reached */
    /* the summary curve: point k the maximum over events [k n / pts, (k + 1) n / pts) */
    int pts, k;
    int64_t k_end, amax, rmax;
    /* the open operation's allocated peak: event, live bytes per category, curves there */
    int32_t op_ev;
    int64_t op_cat[AP_SIM_NCAT], op_a, op_r;
    ap_sim_op ops[2];       /* the peak's operation and the first one over the budget */
    ap_sim_tensor *kept;    /* live at the peak, largest first */
    int32_t *order;         /* 0 .. nkept - 1 (live_at_peak) */
    int nkept;
    ap_status st;           /* op_done's verdict */
    ap_err *err;
} stream_rank;

/* The operation being written: its slot (a streamed rank keeps one). */
static ap_sim_op *cur_op(gen *g) { return &g->ops[g->stream ? 0 : g->nops - 1]; }

static void stream_op_done(gen *g, int o, ap_sim_op *op);

/* Close the current operation: its end, its end-of-op category snapshot, the persistent
 * baseline after SETUP, and in a streamed replay its state to op_done. */
static void op_close(gen *g) {
    int o = g->nops - 1;
    ap_sim_op *op = cur_op(g);
    op->ev_end = g->nev;
    if (g->record) memcpy(&g->ope_cat[(int64_t)o * AP_SIM_NCAT], g->cat, sizeof g->cat);
    if (op->type == AP_SIM_OP_SETUP) g->baseline = g->live;
    if (g->sr) stream_op_done(g, o, op);
}

/* Close the current operation and open a new one. */
static void op_begin(gen *g, int type, int chunk, int32_t layer, int32_t mb) {
    if (g->nomem) return;
    if (g->nops == g->capops && !g->stream) {
        if (g->capops > INT32_MAX / 2) {
            g->nomem = 1;
            return;
        }
        int nc = g->capops ? g->capops * 2 : 1024;
        ap_sim_op *n = ap_realloc(g->ops, (size_t)nc * sizeof *n);
        if (!n || (g->record && (grow((void **)&g->opk_ev, sizeof *g->opk_ev, g->capops, nc) ||
                                 grow((void **)&g->opk_cat, AP_SIM_NCAT * sizeof *g->opk_cat,
                                      g->capops, nc) ||
                                 grow((void **)&g->ope_cat, AP_SIM_NCAT * sizeof *g->ope_cat,
                                      g->capops, nc)))) {
            if (n) g->ops = n;
            g->nomem = 1;
            return;
        }
        g->ops = n;
        g->capops = nc;
    }
    if (g->nops > 0) op_close(g);
    if (g->nops == INT32_MAX) {
        g->nomem = 1;
        return;
    }
    int o = g->nops++;
    ap_sim_op *op = cur_op(g);
    op->type = (int16_t)type;
    op->chunk = (int16_t)chunk;
    op->layer = layer;
    op->mb = mb;
    op->ev_begin = op->ev_end = g->nev;
    if (g->record) {
        g->opk_ev[o] = -1;
        g->opk_live = INT64_MIN;
    }
    if (g->sr) g->sr->op_ev = -1;
}

void ap_simg_op(gen *g, int type, int chunk, int32_t layer, int32_t mb) {
    op_begin(g, type, chunk, layer, mb);
}

static void stream_event(gen *g, int i, int o, int64_t reserved);

/* The per-event arrays are full: double them; -1 (nomem set) where they cannot grow. The rare
 * path, kept out of event(). */
static int event_grow(gen *g) {
    if (g->capev > INT32_MAX / 2) { /* int32 event indices */
        g->nomem = 1;
        return -1;
    }
    int nc = g->capev ? g->capev * 2 : 4096;
    if (g->record && (grow((void **)&g->ev, sizeof *g->ev, g->capev, nc) ||
                      grow((void **)&g->acurve, sizeof *g->acurve, g->capev, nc) ||
                      grow((void **)&g->rcurve, sizeof *g->rcurve, g->capev, nc))) {
        g->nomem = 1;
        return -1;
    }
    g->capev = nc;
    return 0;
}

/* Account one allocation or free of tensor id that the allocator has just seen; returns the
 * reserved bytes after it, -1 where the arrays could not grow (nomem set). A streamed rank's
 * summaries follow in the caller (stream_event): with them here, GCC compiled this into a
 * function saving more registers per call (642 M instead of 558 M instructions of event() in
 * compare gpt3-175b's replay, callgrind). */
static inline int64_t event(gen *g, int32_t id, int is_free) {
    /* a streamed rank's capev is INT32_MAX: it stores no event */
    if (g->nev == g->capev && event_grow(g)) return -1;
    int i = g->nev++;
    int o = g->nops - 1;
    int64_t reserved = g->al ? ap_alloc_reserved_bytes(g->al) : 0;
    if (g->live > g->apeak) {
        g->apeak = g->live;
        g->peak_ev = i;
        g->peak_op = o;
    }
    if (reserved > g->rpeak) {
        g->rpeak = reserved;
        g->alloc_at_rpeak = g->live;
    }
    /* over the budget grows with the reserved bytes: a figure no larger than one already
       tested cannot be the first over it */
    if (reserved > g->over_res && g->over_ev < 0) {
        g->over_res = reserved;
        if (g->budget > 0 && (double)reserved + g->overhead > g->budget) {
            g->over_ev = i;
            g->over_op = o;
        }
    }
    if (g->record) {
        g->ev[i].tensor = id;
        g->ev[i].op = o;
        g->ev[i].is_free = is_free;
        g->acurve[i] = g->live;
        g->rcurve[i] = reserved;
        if (g->live > g->opk_live) {
            g->opk_ev[o] = i;
            g->opk_live = g->live;
            memcpy(&g->opk_cat[(int64_t)o * AP_SIM_NCAT], g->cat, sizeof g->cat);
        }
    }
    return reserved;
}

/* The slot of a new tensor: in a streamed rank one a freed tensor left, else the next one
 * (growing the arrays); -1 out of memory. */
static int32_t tensor_slot(gen *g) {
    if (g->nfl > 0) return g->fl[--g->nfl];
    if (g->nts == g->capts) {
        if (g->capts > INT32_MAX / 2) return -1;
        int nc = g->capts ? g->capts * 2 : 4096;
        ap_sim_tensor *n = ap_realloc(g->ts, (size_t)nc * sizeof *n);
        if (n) g->ts = n;
        int32_t *nb = n ? ap_realloc(g->blk, (size_t)nc * sizeof *nb) : NULL;
        if (nb) g->blk = nb;
        if (!n || !nb) return -1;
        if (g->stream) {
            int32_t *a[3] = {g->fl, g->serial, g->keep};
            for (int k = 0; k < 3; k++) {
                int32_t *q = ap_realloc(a[k], (size_t)nc * sizeof *q);
                if (!q) return -1;
                a[k] = q;
                if (k == 0) g->fl = q;
                else if (k == 1) g->serial = q;
                else g->keep = q;
            }
        }
        g->capts = nc;
    }
    return g->nts++;
}

/* Allocate a tensor; returns its id, or -1 for an empty tensor (nothing to allocate). */
int32_t ap_simg_tensor(gen *g, int kind, int cat, int32_t layer, int32_t mb, int64_t bytes,
                       int is_grad) {
    if (bytes <= 0 || g->nomem) return -1;
    int32_t id = tensor_slot(g);
    if (id < 0 || (g->stream && g->ncreated == INT32_MAX)) {
        g->nomem = 1;
        return -1;
    }
    ap_sim_tensor *t = &g->ts[id];
    t->bytes = bytes;
    t->layer = layer;
    t->mb = mb;
    t->kind = (int16_t)kind;
    t->cat = (int8_t)cat;
    t->is_grad = (int8_t)is_grad;
    t->persistent = cur_op(g)->type == AP_SIM_OP_SETUP;
    t->pad[0] = t->pad[1] = t->pad[2] = 0;
    t->alloc_ev = g->nev;
    t->free_ev = -1;
    if (g->stream) {
        g->serial[id] = g->ncreated++;
        g->keep[id] = -1;
    }
    if (!g->al) {
        t->addr = 0; /* a streamed rank's counting pass: no allocator */
    } else if (ap_alloc_malloc(g->al, bytes, &g->blk[id], &t->addr, NULL) != AP_OK) {
        g->nomem = 1;
        return -1;
    }
    g->live += bytes;
    g->cat[cat] += bytes;
    int64_t reserved = event(g, id, 0);
    if (g->sr && reserved >= 0) stream_event(g, g->nev - 1, g->nops - 1, reserved);
    return id;
}

void ap_simg_free(gen *g, int32_t id) {
    if (id < 0 || g->nomem) return;
    ap_sim_tensor *t = &g->ts[id];
    ap_status st = t->free_ev >= 0 ? AP_ERR_INPUT
                   : g->al        ? ap_alloc_release(g->al, g->blk[id])
                                  : AP_OK;
    if (st != AP_OK) {
        /* the allocator model's bookkeeping may need memory to take a block back */
        if (st == AP_ERR_NOMEM) g->nomem = 1;
        else g->bad_free = 1;
        return;
    }
    t->free_ev = g->nev;
    g->live -= t->bytes;
    g->cat[t->cat] -= t->bytes;
    int64_t reserved = event(g, id, 1);
    if (g->sr && reserved >= 0) stream_event(g, g->nev - 1, g->nops - 1, reserved);
    if (g->stream) {
        /* a tensor kept from the peak learns when it was freed; the slot is free again */
        if (g->keep[id] >= 0 && g->sr) g->sr->kept[g->keep[id]].free_ev = t->free_ev;
        g->keep[id] = -1;
        g->fl[g->nfl++] = id;
    }
}

/* ---- model states ------------------------------------------------------------------------ */

static int64_t bytes_of(double per_param, double params) {
    double v = per_param * params;
    return v > 0 ? (int64_t)llround(v) : 0;
}

/* parameters of unit u after ZeRO sharding of kind `shard` */
static double shard_params(const gen *g, const unit *u, int shard) {
    if (!shard) return (double)(u->p_dense + u->p_expert);
    return (double)u->p_dense / g->D_dense + (double)u->p_expert / g->D_expert;
}

static void setup_states(gen *g) {
    const ap_trainer_caps *c = g->caps;
    const ap_plan *p = g->p;
    int z = p->zero;
    double off_o = p->offload_optimizer, off_p = p->offload_params;
    op_begin(g, AP_SIM_OP_SETUP, -1, AP_SIM_LAYER_NONE, -1);
    for (int i = 0; i < g->nunits; i++) {
        unit *u = &g->units[i];
        int w_shard = z >= 3 || (z == 2 && c->zero2_keeps_gathered);
        double wb = ap_plan_weight_bytes(p) * (1 - off_p);
        u->t_weight = T(g, AP_SIM_T_WEIGHT, AP_SIM_CAT_PARAMS, u->layer, -1,
                        bytes_of(wb, shard_params(g, u, w_shard)), 0);
        if (p->dtype == AP_DTYPE_FP8 && !ap_plan_fp8_weights(p))
            /* Transformer Engine keeps an fp8 copy of every GEMM weight (1 byte/param) */
            T(g, AP_SIM_T_WEIGHT_FP8, AP_SIM_CAT_PARAMS, u->layer, -1, u->p_linear, 0);
        /* the per-parameter bytes and sharding of ap_mem_model_states (trainer.c helpers,
           DeepSpeed's BF16_Optimizer included) */
        int osh = ap_plan_optim_sharded(p);
        if (!g->lazy_grads)
            u->t_grad = T(g, AP_SIM_T_GRAD, AP_SIM_CAT_GRADS, u->layer, -1,
                          bytes_of(ap_plan_grad_bytes(p), shard_params(g, u, z >= 2)), 0);
        T(g, AP_SIM_T_MASTER, AP_SIM_CAT_OPTIMIZER, u->layer, -1,
          bytes_of(ap_plan_master_bytes(p) * (1 - off_o), shard_params(g, u, osh)), 0);
        T(g, AP_SIM_T_OPTIM, AP_SIM_CAT_OPTIMIZER, u->layer, -1,
          bytes_of(ap_plan_optim_bytes(p) * (1 - off_o), shard_params(g, u, osh)), 0);
    }
    /* ZeRO-3's contiguous-gradient bucket is allocated with the optimizer
       (ap_plan_grad_bucket_bytes) */
    if (z >= 3 && g->ipg_b > 0)
        T(g, AP_SIM_T_GRAD_BUCKET, OTH, AP_SIM_LAYER_NONE, -1, g->ipg_b, 0);
}

/* Bytes of the 16-bit copy gathered (ZeRO-3/FSDP) or fetched from host (parameter offload). */
static int64_t gathered_bytes(const gen *g, const unit *u) {
    double full = (double)(u->p_dense + u->p_expert);
    if (g->gather_mode) return bytes_of(ap_plan_gathered_weight_bytes(g->p), full);
    if (g->fetch_frac_mode)
        return bytes_of(ap_plan_weight_bytes(g->p) * g->p->offload_params, full);
    return 0;
}

static void unit_pre(gen *g, unit *u, int chunk, int32_t mb, int fwd) {
    if (!g->gather_mode && !g->fetch_frac_mode) return;
    if (u->t_gathered >= 0) {
        if (fwd) u->gather_refs++;
        return;
    }
    op_begin(g, AP_SIM_OP_GATHER, chunk, u->layer, mb);
    u->t_gathered = T(g, AP_SIM_T_WEIGHT_GATHERED, OTH, u->layer, mb, gathered_bytes(g, u), 0);
    u->gather_refs = 1;
}

/* After forward (fwd=1) or backward of micro-batch mb: ZeRO-3 reshards after each pass; FSDP
 * SHARD_GRAD_OP (zero2_keeps_gathered) keeps the copy until no micro-batch needs it. */
static void unit_post(gen *g, unit *u, int fwd) {
    if (u->t_gathered < 0) return;
    if (g->gather_keep) {
        if (fwd) return; /* the forward's reference is dropped by the same micro-batch's bwd */
        if (--u->gather_refs > 0) return;
    }
    F(g, u->t_gathered);
    u->t_gathered = -1;
    u->gather_refs = 0;
}

/* Gradient handling at the backward of unit u for micro-batch mb (inside its BWD op). */
static int32_t grads_begin(gen *g, unit *u, int32_t mb) {
    const ap_trainer_caps *c = g->caps;
    if (g->lazy_grads && u->t_grad < 0)
        /* torch .grad is created by the first backward and kept until zero_grad */
        u->t_grad = T(g, AP_SIM_T_GRAD, AP_SIM_CAT_GRADS, u->layer, -1,
                      bytes_of(ap_plan_grad_bytes(g->p), shard_params(g, u, g->grads_sharded)), 0);
    if (!g->grads_sharded) return -1;
    double full = (double)(u->p_dense + u->p_expert);
    if (g->reduce_per_mb)
        /* the unsharded gradient of this block, in the compute dtype, before reduce-scatter */
        return T(g, AP_SIM_T_GRAD_UNSHARDED, OTH, u->layer, mb,
                 bytes_of(c->gathered_weight_bytes, full), 0);
    if (u->t_accum < 0)
        u->t_accum = T(g, AP_SIM_T_GRAD_ACCUM, OTH, u->layer, -1,
                       bytes_of(ap_plan_grad_bytes(g->p), full), 0);
    return -1;
}

static void grads_end(gen *g, unit *u, int chunk, int32_t mb, int32_t unsharded) {
    const ap_trainer_caps *c = g->caps;
    u->bwd_done++;
    int last = u->bwd_done == g->mbs_n;
    double full = (double)(u->p_dense + u->p_expert);
    if (g->grads_sharded && g->reduce_per_mb) {
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
        int32_t rs = -1;
        if (c->grad_bytes > c->gathered_weight_bytes) /* reduce in fp32 (FSDP reduce_dtype) */
            rs = T(g, AP_SIM_T_GRAD_REDUCE, OTH, u->layer, mb, bytes_of(c->grad_bytes, full), 0);
        F(g, unsharded);
        F(g, rs);
    } else if (g->grads_sharded) {
        if (last) {
            op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
            F(g, u->t_accum);
            u->t_accum = -1;
        }
    } else if (last && g->p->overlap_grad) {
        /* all-reduce / reduce-scatter in place in the gradient buffer, bucket by bucket as the
           last micro-batch's backward goes (Megatron DDP overlap_grad_reduce) */
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
    }
}

/* ---- chunks: embedding, layers, head ------------------------------------------------------ */

#define END_EMASK 0
#define END_FNORM 1
#define END_LOSS 2
#define END_HIN 3
#define END_ENORM 4
#define END_N 5 /* ends kept per micro-batch row */

static int chunk_recomputes(const gen *g, int k, int i) { /* layer i of chunk k */
    if (g->p->recompute != AP_RECOMPUTE_FULL) return 0;
    int K = g->ck_rc[k];
    return K <= 0 || i < K;
}

static void chunk_fwd(gen *g, int k, int32_t mb) {
    const ap_model *m = g->m;
    const ap_plan *p = g->p;
    int c = k * g->pp + g->stage, nchunks = g->pp * g->vp;
    int32_t *ends = &g->ends[(int64_t)g->row * END_N];
    int32_t x;
    int64_t xb = g->xb;
    if (c == 0) {
        unit *ue = &g->units[g->u_embed];
        unit_pre(g, ue, k, mb, 1);
        op_begin(g, AP_SIM_OP_EMBED_FWD, k, AP_SIM_LAYER_EMBED, mb);
        x = T(g, AP_SIM_T_INPUT, ACT, g->ck_first[k], mb, xb, 0);
        ends[END_EMASK] = m->dropout ? T(g, AP_SIM_T_EMBED_MASK, ACT, AP_SIM_LAYER_EMBED, mb,
                                         g->hmask_b, 0)
                                     : -1;
        /* a norm after the embedding (BLOOM) keeps its input, the embedding's output, until
           the micro-batch's backward reaches it: outside every checkpointed layer */
        ends[END_ENORM] = m->embed_norm ? T(g, AP_SIM_T_EMBED_NORM_IN, ACT, AP_SIM_LAYER_EMBED,
                                            mb, xb, 0)
                                        : -1;
        unit_post(g, ue, 1);
    } else {
        op_begin(g, AP_SIM_OP_RECV_FWD, k, g->ck_first[k], mb);
        x = T(g, AP_SIM_T_INPUT, ACT, g->ck_first[k], mb, xb, 0);
    }
    for (int i = 0; i < g->ck_n[k]; i++) {
        int32_t layer = g->ck_first[k] + i;
        int loc = g->ck_base[k] + i;
        unit *u = &g->units[loc];
        unit_pre(g, u, k, mb, 1);
        if (g->prefetch && i + 1 < g->ck_n[k]) unit_pre(g, &g->units[loc + 1], k, mb, 1);
        op_begin(g, AP_SIM_OP_FWD, k, layer, mb);
        int rc = chunk_recomputes(g, k, i);
        x = ap_simg_layer_fwd(g, loc, layer, mb, rc ? MODE_DISCARD : MODE_SAVE,
                      p->recompute == AP_RECOMPUTE_SELECTIVE, x);
        unit_post(g, u, 1);
    }
    if (c == nchunks - 1) {
        unit *uh = &g->units[g->u_head];
        unit_pre(g, uh, k, mb, 1);
        op_begin(g, AP_SIM_OP_HEAD_FWD, k, (int32_t)g->L, mb);
        ends[END_HIN] = x;
        int32_t fn = T(g, AP_SIM_T_FINAL_NORM_OUT, ACT, (int32_t)g->L, mb, g->sz[0].ln, 0);
        int32_t gth = T(g, AP_SIM_T_SP_GATHER, OTH, (int32_t)g->L, mb, g->sz[0].gather, 0);
        int32_t lg = T(g, AP_SIM_T_LOGITS, ACT, (int32_t)g->L, mb, g->logits_b, 0);
        F(g, gth);
        int32_t keep = lg;
        if (g->caps->loss_fp32) {
            /* logits.float() for the loss */
            int32_t lf = T(g, AP_SIM_T_LOGITS_FP32, ACT, (int32_t)g->L, mb, g->logits_b * 2, 0);
            F(g, lg);
            keep = lf;
            if (g->torch_loss) {
                /* torch F.cross_entropy: log_softmax saves its fp32 output */
                int32_t lp = T(g, AP_SIM_T_LOG_PROBS, ACT, (int32_t)g->L, mb, g->logits_b * 2, 0);
                F(g, lf);
                keep = lp;
            }
            /* Megatron's vocab-parallel cross entropy works in place on the fp32 logits and
               keeps them (megatron/core/tensor_parallel/cross_entropy.py) */
        }
        ends[END_FNORM] = fn;
        ends[END_LOSS] = keep;
        unit_post(g, uh, 1);
    } else {
        op_begin(g, AP_SIM_OP_SEND_FWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        /* the stage output is sent and freed (Megatron deallocate_output_tensor) */
        if (x >= 0) g->ts[x].kind = AP_SIM_T_STAGE_OUT;
        F(g, x);
    }
}

static void chunk_bwd(gen *g, int k, int32_t mb) {
    const ap_plan *p = g->p;
    int c = k * g->pp + g->stage, nchunks = g->pp * g->vp;
    int32_t *ends = &g->ends[(int64_t)g->row * END_N];
    int32_t gx;
    int64_t xb = g->xb;
    int32_t Lh = (int32_t)g->L;
    if (c == nchunks - 1) {
        unit *uh = &g->units[g->u_head];
        unit_pre(g, uh, k, mb, 0);
        op_begin(g, AP_SIM_OP_HEAD_BWD, k, Lh, mb);
        /* ZeRO-1/2 without a pipeline: the contiguous-gradient bucket(s) from the first
           backward to the optimizer step (ap_plan_grad_bucket_bytes) */
        if (g->ipg_b > 0 && p->zero < 3 && g->t_ipg < 0)
            g->t_ipg = T(g, AP_SIM_T_GRAD_BUCKET, OTH, Lh, mb, g->ipg_b, 0);
        int32_t un = grads_begin(g, uh, mb);
        int32_t lossbuf = ends[END_LOSS];
        if (g->torch_loss) {
            if (g->caps->loss_fp32) {
                /* nll backward, log_softmax backward (fp32), then the cast to the compute dtype */
                int32_t g1 = T(g, AP_SIM_T_LOG_PROBS, OTH, Lh, mb, g->logits_b * 2, 1);
                int32_t g2 = T(g, AP_SIM_T_LOGITS_FP32, OTH, Lh, mb, g->logits_b * 2, 1);
                F(g, g1);
                F(g, lossbuf);
                lossbuf = g2;
            }
        }
        /* Megatron: the gradient is written in place into the saved fp32 softmax */
        int32_t gl = T(g, AP_SIM_T_LOGITS, OTH, Lh, mb, g->logits_b, 1);
        F(g, lossbuf);
        int32_t gfn = T(g, AP_SIM_T_FINAL_NORM_OUT, OTH, Lh, mb,
                        g->sz[0].gather ? g->sz[0].gather : g->sz[0].ln, 1);
        F(g, gl);
        F(g, ends[END_FNORM]);
        gx = T(g, AP_SIM_T_INPUT, OTH, Lh, mb, xb, 1);
        F(g, gfn);
        F(g, ends[END_HIN]);
        ends[END_FNORM] = ends[END_LOSS] = ends[END_HIN] = -1;
        grads_end(g, uh, k, mb, un);
        unit_post(g, uh, 0);
    } else {
        op_begin(g, AP_SIM_OP_RECV_BWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        gx = T(g, AP_SIM_T_STAGE_OUT, OTH, g->ck_first[k] + g->ck_n[k], mb, xb, 1);
    }
    for (int i = g->ck_n[k] - 1; i >= 0; i--) {
        int32_t layer = g->ck_first[k] + i;
        int loc = g->ck_base[k] + i;
        unit *u = &g->units[loc];
        unit_pre(g, u, k, mb, 0);
        if (g->prefetch && i > 0) unit_pre(g, &g->units[loc - 1], k, mb, 0);
        if (chunk_recomputes(g, k, i)) {
            op_begin(g, AP_SIM_OP_RECOMPUTE, k, layer, mb);
            int32_t x = SV(g, mb, loc, AP_SIM_T_INPUT);
            int32_t out = ap_simg_layer_fwd(g, loc, layer, mb, MODE_RECOMPUTE, 0, x);
            F(g, out);
        }
        op_begin(g, AP_SIM_OP_BWD, k, layer, mb);
        int32_t un = grads_begin(g, u, mb);
        gx = ap_simg_layer_bwd(g, loc, layer, mb, p->recompute == AP_RECOMPUTE_SELECTIVE &&
                                               !chunk_recomputes(g, k, i), gx);
        grads_end(g, u, k, mb, un);
        unit_post(g, u, 0);
    }
    if (c == 0) {
        unit *ue = &g->units[g->u_embed];
        unit_pre(g, ue, k, mb, 0);
        op_begin(g, AP_SIM_OP_EMBED_BWD, k, AP_SIM_LAYER_EMBED, mb);
        int32_t un = grads_begin(g, ue, mb);
        F(g, ends[END_EMASK]);
        F(g, ends[END_ENORM]);
        ends[END_EMASK] = ends[END_ENORM] = -1;
        F(g, gx);
        grads_end(g, ue, k, mb, un);
        unit_post(g, ue, 0);
    } else {
        op_begin(g, AP_SIM_OP_SEND_BWD, k, g->ck_first[k], mb);
        F(g, gx);
    }
}

/* The rank's passes (ap_sim_schedule) and the rows of saved and ends they need: a micro-batch
 * holds row mb % rows from its first forward to its last backward, and rows is the widest span
 * from the oldest micro-batch not finished to the newest started, so no two micro-batches in
 * flight share a row (1F1B: the warm-up depth; one row without pipelining). The pass that
 * starts a micro-batch is marked in opens: its rows are cleared there. Memory then grows with
 * the micro-batches in flight, not with those of the step. */
static ap_status schedule_rows(gen *g, ap_err *err) {
    int64_t npass = 2 * g->mbs_n * g->vp;
    g->it = ap_malloc((size_t)npass * sizeof *g->it);
    g->opens = ap_malloc((size_t)npass);
    int32_t *left = ap_malloc((size_t)g->mbs_n * sizeof *left); /* chunks not yet backward */
    if (!g->it || !g->opens || !left) {
        ap_free(left);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    for (int64_t m = 0; m < g->mbs_n; m++) left[m] = -1; /* not started */
    g->nit = ap_sim_schedule(g->pp, g->vp, g->mbs_n, g->stage, g->it);
    int64_t lo = 0, hi = -1, rows = 1;
    for (int i = 0; i < g->nit; i++) {
        int64_t mb = g->it[i].mb;
        g->opens[i] = 0;
        if (mb < 0 || mb >= g->mbs_n) continue;
        if (left[mb] < 0) {
            left[mb] = g->vp;
            g->opens[i] = 1;
            if (mb > hi) hi = mb;
            if (hi - lo + 1 > rows) rows = hi - lo + 1;
        }
        if (!g->it[i].fwd && --left[mb] == 0)
            while (lo <= hi && left[lo] == 0) lo++;
    }
    ap_free(left);
    g->mb_rows = (int)rows;
    return AP_OK;
}

/* Megatron's schedules in the order ap_sim_schedule gives (sim/schedule.c); each micro-batch's
 * rows of saved and ends start empty. */
static void schedule(gen *g) {
    const size_t row = (size_t)g->nloc * AP_SIM_NKINDS;
    for (int i = 0; i < g->nit && !g->nomem; i++) {
        const ap_sim_pass *it = &g->it[i];
        g->row = it->mb % g->mb_rows;
        if (g->opens[i]) {
            memset(&g->saved[(size_t)g->row * row], 0xff, row * sizeof *g->saved);
            memset(&g->ends[(size_t)g->row * END_N], 0xff, END_N * sizeof *g->ends);
        }
        if (it->fwd) chunk_fwd(g, it->chunk, it->mb);
        else chunk_bwd(g, it->chunk, it->mb);
    }
}

static void finish_step(gen *g) {
    const ap_plan *p = g->p;
    const ap_trainer_caps *c = g->caps;
    if (!g->grads_sharded && !p->overlap_grad) {
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, -1, AP_SIM_LAYER_NONE, -1);
    }
    if (p->offload_optimizer > 0 || p->offload_params > 0) {
        /* ZeRO-Offload: gradients to host, CPU Adam, updated 16-bit parameters copied back into
           their device buffers (Ren et al. 2021); host staging buffers are pinned host memory */
        op_begin(g, AP_SIM_OP_OFFLOAD, -1, AP_SIM_LAYER_NONE, -1);
    }
    op_begin(g, AP_SIM_OP_OPTIMIZER, -1, AP_SIM_LAYER_NONE, -1);
    if (g->t_ipg >= 0) { /* released by the step (stage_1_and_2.py _release_ipg_buffers) */
        F(g, g->t_ipg);
        g->t_ipg = -1;
    }
    if (g->foreach_adam) {
        /* torch.optim.AdamW foreach (the default): _multi_tensor_adam computes
           torch._foreach_sqrt(exp_avg_sqs) over all local states at once, one fp32 temporary
           of the parameter shard's size (torch/optim/adam.py) */
        double params = 0;
        for (int i = 0; i < g->nunits; i++) params += shard_params(g, &g->units[i], p->zero >= 1);
        int32_t t = T(g, AP_SIM_T_OPTIM_TEMP, OTH, AP_SIM_LAYER_NONE, -1,
                      bytes_of(4.0 * (1 - p->offload_optimizer), params), 0);
        F(g, t);
    }
    (void)c;
    if (g->lazy_grads) {
        op_begin(g, AP_SIM_OP_ZERO_GRAD, -1, AP_SIM_LAYER_NONE, -1);
        for (int i = 0; i < g->nunits; i++) {
            F(g, g->units[i].t_grad);
            g->units[i].t_grad = -1;
        }
    }
}

/* ---- the peak's live set ------------------------------------------------------------------ */

typedef struct live_ent {
    int64_t bytes;
    int32_t id;   /* the tensor's creation number (its id, or its serial in a streamed rank) */
    int32_t slot; /* where it is (ts) */
} live_ent;

static int cmp_live(const void *a, const void *b) {
    const live_ent *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* What a set of live tensors adds up to: bytes per category, the micro-batches whose saved
 * activations it holds (seen: one flag per micro-batch), the live logits (logits, fp32 logits,
 * log-probs). */
typedef struct live_sum {
    int64_t cat[AP_SIM_NCAT];
    int inflight;
    int64_t logits;
    int64_t mbs;
    uint8_t *seen;
} live_sum;

static ap_status live_sum_init(live_sum *ls, int64_t mbs, ap_err *err) {
    memset(ls, 0, sizeof *ls);
    ls->mbs = mbs;
    ls->seen = ap_calloc((size_t)mbs, 1);
    return ls->seen ? AP_OK : ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
}

static void live_add(live_sum *ls, const ap_sim_tensor *t) {
    ls->cat[t->cat] += t->bytes;
    if (t->kind == AP_SIM_T_LOGITS || t->kind == AP_SIM_T_LOGITS_FP32 ||
        t->kind == AP_SIM_T_LOG_PROBS)
        ls->logits += t->bytes;
    if (t->cat == AP_SIM_CAT_ACTIVATIONS && !t->is_grad && t->mb >= 0 && t->mb < ls->mbs &&
        !ls->seen[t->mb]) {
        ls->seen[t->mb] = 1;
        ls->inflight++;
    }
}

/* 1 when tensor t is live just after event ev (allocated at or before it, freed after). */
static int live_at(const ap_sim_tensor *t, int ev) {
    return t->alloc_ev <= ev && (t->free_ev < 0 || t->free_ev > ev);
}

static void over_of(ap_sim_rank *r, const live_sum *ls) {
    memcpy(r->over_cat_bytes, ls->cat, sizeof r->over_cat_bytes);
    r->over_inflight = ls->inflight;
    r->over_logits_bytes = ls->logits;
}

/* What is live at the first event over the budget: bytes per category, micro-batches with
 * saved activations, logits. */
static ap_status over_set(const ap_sim *s, rank_store *rs, ap_err *err) {
    ap_sim_rank *r = &rs->r;
    int ev = r->over_event;
    memset(r->over_cat_bytes, 0, sizeof r->over_cat_bytes);
    r->over_inflight = 0;
    r->over_logits_bytes = 0;
    if (ev < 0) return AP_OK;
    live_sum ls;
    if (live_sum_init(&ls, s->p.grad_accum > 0 ? s->p.grad_accum : 1, err) != AP_OK)
        return AP_ERR_NOMEM;
    for (int i = 0; i < r->ntensors; i++)
        if (live_at(&rs->ts[i], ev)) live_add(&ls, &rs->ts[i]);
    over_of(r, &ls);
    ap_free(ls.seen);
    return AP_OK;
}

/* The summary curves: point k the maximum over its run of events (sim.h). */
static void summary_curve(rank_store *rs) {
    ap_sim_rank *r = &rs->r;
    int n = r->nevents, pts = n < AP_SIM_CURVE_POINTS ? n : AP_SIM_CURVE_POINTS;
    r->curve_points = rs->acurve ? pts : 0;
    for (int k = 0; k < r->curve_points; k++) {
        int b = (int)((int64_t)k * n / pts), e = (int)((int64_t)(k + 1) * n / pts);
        int64_t amax = 0, rmax = 0;
        for (int i = b; i < e; i++) {
            if (rs->acurve[i] > amax) amax = rs->acurve[i];
            if (rs->rcurve[i] > rmax) rmax = rs->rcurve[i];
        }
        r->curve_allocated[k] = amax;
        r->curve_reserved[k] = rmax;
    }
}

void ap_simg_free_events(ap_sim *s, rank_store *rs) {
    spare_give(s, SP_EV, rs->ev, rs->capev);
    spare_give(s, SP_AC, rs->acurve, rs->capev);
    spare_give(s, SP_RC, rs->rcurve, rs->capev);
    spare_give(s, SP_OPKEV, rs->opk_ev, rs->capops);
    spare_give(s, SP_OPKCAT, rs->opk_cat, rs->capops);
    spare_give(s, SP_OPECAT, rs->ope_cat, rs->capops);
    rs->ev = NULL;
    rs->acurve = rs->rcurve = NULL;
    rs->opk_ev = NULL;
    rs->opk_cat = rs->ope_cat = NULL;
}

/* release_events: free the per-event arrays of a finished rank and keep the tensors live at
 * its peak only, in live_at_peak's order. */
static ap_status release_rank(ap_sim *s, rank_store *rs, ap_err *err) {
    ap_sim_rank *r = &rs->r;
    int n = r->nlive_at_peak;
    ap_sim_tensor *kept = ap_malloc((size_t)(n > 0 ? n : 1) * sizeof *kept);
    if (!kept) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    for (int i = 0; i < n; i++) {
        kept[i] = rs->ts[rs->live[i]];
        rs->live[i] = i;
    }
    int32_t *lv = ap_realloc(rs->live, (size_t)(n > 0 ? n : 1) * sizeof *lv);
    if (lv) rs->live = lv; /* else the larger array stays */
    r->live_at_peak = rs->live;
    spare_give(s, SP_TS, rs->ts, rs->capts);
    rs->ts = kept;
    r->tensors = kept;
    r->ntensors = n;
    ap_simg_free_events(s, rs); /* to the next ranks (spare_take), or freed */
    r->events = NULL;
    r->allocated_curve = r->reserved_curve = NULL;
    r->op_peak_event = NULL;
    r->op_peak_cat = r->op_end_cat = NULL;
    return AP_OK;
}

/* The live entries le[0..n) largest first (then in creation order) into rank r's live set:
 * rs->live[i] = le[i].id, bytes per category and micro-batches in flight from ls. */
static void peak_of(ap_sim_rank *r, const live_sum *ls, live_ent *le, int n) {
    qsort(le, (size_t)n, sizeof *le, cmp_live);
    memcpy(r->peak_cat_bytes, ls->cat, sizeof r->peak_cat_bytes);
    r->inflight_at_peak = ls->inflight;
    r->nlive_at_peak = n;
}

/* Tensors live at the allocated peak (allocated at or before it, freed after), largest
 * first, with their categories and the micro-batches whose activations they hold. */
static ap_status live_set(const ap_sim *s, rank_store *rs, ap_err *err) {
    ap_sim_rank *r = &rs->r;
    int peak_ev = r->peak_event, nlive = 0;
    rs->live = ap_malloc((size_t)(r->ntensors > 0 ? r->ntensors : 1) * sizeof *rs->live);
    live_ent *le = ap_malloc((size_t)(r->ntensors > 0 ? r->ntensors : 1) * sizeof *le);
    live_sum ls;
    if (live_sum_init(&ls, s->p.grad_accum > 0 ? s->p.grad_accum : 1, err) != AP_OK ||
        !rs->live || !le) {
        ap_free(ls.seen);
        ap_free(le);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    for (int i = 0; i < r->ntensors && peak_ev >= 0; i++)
        if (live_at(&rs->ts[i], peak_ev)) {
            live_add(&ls, &rs->ts[i]);
            le[nlive++] = (live_ent){rs->ts[i].bytes, i, i};
        }
    ap_free(ls.seen);
    peak_of(r, &ls, le, nlive);
    for (int i = 0; i < nlive; i++) rs->live[i] = le[i].id;
    ap_free(le);
    r->live_at_peak = rs->live;
    return AP_OK;
}

/* ---- a streamed rank: summaries as the replay goes ------------------------------------------ */

/* The tensors live now in a streamed rank (the slots not freed) through ls; with le, their
 * sizes, creation numbers and slots. Returns how many. */
static int live_now(const gen *g, live_sum *ls, live_ent *le) {
    int n = 0;
    for (int i = 0; i < g->nts; i++) {
        const ap_sim_tensor *t = &g->ts[i];
        if (t->free_ev >= 0) continue;
        live_add(ls, t);
        if (le) le[n] = (live_ent){t->bytes, g->serial[i], i};
        n++;
    }
    return n;
}

/* At the allocated peak: the live set, largest first, copied out (keep ties each slot to its
 * copy, so the copy learns when its tensor is freed), its bytes per category and the
 * micro-batches in flight. */
static void stream_peak(gen *g) {
    stream_rank *sr = g->sr;
    live_sum ls;
    live_ent *le = ap_malloc((size_t)(g->nts > 0 ? g->nts : 1) * sizeof *le);
    if (live_sum_init(&ls, g->mbs_n, NULL) != AP_OK || !le) {
        ap_free(ls.seen);
        ap_free(le);
        g->nomem = 1;
        return;
    }
    int n = live_now(g, &ls, le);
    ap_free(ls.seen);
    peak_of(sr->r, &ls, le, n);
    sr->kept = ap_malloc((size_t)(n > 0 ? n : 1) * sizeof *sr->kept);
    sr->order = ap_malloc((size_t)(n > 0 ? n : 1) * sizeof *sr->order);
    if (!sr->kept || !sr->order) {
        ap_free(le);
        g->nomem = 1;
        return;
    }
    for (int j = 0; j < n; j++) {
        sr->kept[j] = g->ts[le[j].slot];
        g->keep[le[j].slot] = j;
        sr->order[j] = j;
    }
    sr->nkept = n;
    ap_free(le);
}

/* At the first event over the budget: what is live there. */
static void stream_over(gen *g) {
    live_sum ls;
    if (live_sum_init(&ls, g->mbs_n, NULL) != AP_OK) {
        g->nomem = 1;
        return;
    }
    live_now(g, &ls, NULL);
    over_of(g->sr->r, &ls);
    ap_free(ls.seen);
}

/* Point k of the summary curve is done: its maxima out, the next point's run begins. */
static void curve_point(stream_rank *sr) {
    sr->r->curve_allocated[sr->k] = sr->amax;
    sr->r->curve_reserved[sr->k] = sr->rmax;
    sr->amax = sr->rmax = 0;
    sr->k++;
    sr->k_end = (int64_t)(sr->k + 1) * sr->nev / sr->pts;
}

/* Event i of operation o in a streamed replay (live and reserved bytes after it). */
static void stream_event(gen *g, int i, int o, int64_t reserved) {
    stream_rank *sr = g->sr;
    if (sr->k < sr->pts) {
        while (i >= sr->k_end && sr->k < sr->pts - 1) curve_point(sr);
        if (g->live > sr->amax) sr->amax = g->live;
        if (reserved > sr->rmax) sr->rmax = reserved;
    }
    if (sr->op_ev < 0 || g->live > sr->op_a) {
        sr->op_ev = i;
        sr->op_a = g->live;
        sr->op_r = reserved;
        memcpy(sr->op_cat, g->cat, sizeof g->cat);
    }
    if (i == sr->peak_target) {
        sr->peak_op = o;
        stream_peak(g);
    }
    if (i == g->over_ev) stream_over(g);
}

/* Operation o closes in a streamed replay: kept when the summary names it, and its state to
 * op_done (a failure there stops the replay: sr->st). */
static void stream_op_done(gen *g, int o, ap_sim_op *op) {
    stream_rank *sr = g->sr;
    if (o == sr->peak_op) sr->ops[0] = *op;
    if (o == g->over_op) sr->ops[1] = *op;
    const ap_sim_opts *so = &sr->s->o;
    if (!so->op_done || sr->st != AP_OK) return;
    ap_sim_op_state st;
    memset(&st, 0, sizeof st);
    st.peak_event = sr->op_ev;
    if (sr->op_ev >= 0) {
        memcpy(st.peak_cat, sr->op_cat, sizeof st.peak_cat);
        st.peak_allocated = sr->op_a;
        st.peak_reserved = sr->op_r;
    }
    memcpy(st.end_cat, g->cat, sizeof st.end_cat);
    st.end_allocated = g->live;
    st.end_reserved = g->al ? ap_alloc_reserved_bytes(g->al) : 0;
    sr->st = so->op_done(so->rank_ctx, sr->s, g->stage, op, &st, sr->err);
    if (sr->st != AP_OK) g->nomem = 1; /* stops the generator; reported as sr->st */
}

/* ---- one rank --------------------------------------------------------------------------- */

void ap_simg_place(gen *g, const ap_model *m, const ap_plan *p, int stage) {
    memset(g, 0, sizeof *g);
    g->m = m;
    g->p = p;
    g->caps = ap_trainer_get(p->trainer);
    g->stage = stage;
    g->pp = p->pp;
    g->vp = p->vp > 0 ? p->vp : 1;
    g->L = m->layers;
    g->mbs_n = p->grad_accum > 0 ? p->grad_accum : 1;
    for (int k = 0; k < g->vp; k++) {
        int c = k * g->pp + stage;
        g->ck_first[k] = ap_plan_chunk_first_layer(p, g->L, c);
        g->ck_n[k] = ap_plan_chunk_layers(p, g->L, c);
        g->ck_base[k] = g->nloc;
        g->nloc += g->ck_n[k];
        int K = p->recompute_layers;
        if (p->nchunks == g->pp * g->vp && p->stage_recompute[c] >= 0 &&
            p->stage_recompute[c] != 0)
            K = p->stage_recompute[c];
        g->ck_rc[k] = K;
    }
}

/* The rank's share of the plan: its chunks and layers (with each chunk's recompute count),
 * the sharding factors of dense and expert states, and the trainer's memory behaviours. */
static void gen_layout(gen *g, const ap_sim *s, int stage) {
    const ap_model *m = &s->m;
    const ap_plan *p = &s->p;
    ap_simg_place(g, m, p, stage);
    g->nunits = g->nloc + 2;
    g->u_embed = g->nloc;
    g->u_head = g->nloc + 1;
    int t = p->tp > 0 ? p->tp : 1;
    double dd = (double)p->dp * (p->cp > 0 ? p->cp : 1);
    /* dense states shard over dp x cp, or within groups of zero_group ranks */
    g->D_dense = ap_plan_zero_shard(p);
    /* experts are sharded over the expert-data-parallel group: tp*cp*dp / (ep*etp) ranks
       (Megatron MoE "parallel folding") */
    double de = (double)t * dd / ((p->ep > 0 ? p->ep : 1) * (p->etp > 0 ? p->etp : 1));
    g->D_expert = de >= 1 ? de : 1;
    g->lazy_grads = p->trainer == AP_TRAINER_FSDP || p->trainer == AP_TRAINER_TORCHTITAN;
    /* Megatron-LM computes the loss with its fused vocab-parallel cross entropy, in place on
       the fp32 logits; the other trainers run torch/Hugging Face models whose loss is
       F.cross_entropy(logits.float()) = log_softmax + nll_loss, each with its own output */
    g->torch_loss = p->trainer != AP_TRAINER_MEGATRON;
    g->foreach_adam = p->trainer == AP_TRAINER_FSDP;
    /* DeepSpeed ZeRO's contiguous-gradient bucket(s) (trainer.c ap_plan_grad_bucket_bytes):
       with the optimizer under ZeRO-3, from the first backward under ZeRO-1/2 */
    g->ipg_b = bytes_of(1.0, ap_plan_grad_bucket_bytes(p));
    g->t_ipg = -1;
    /* 16-bit working copies: ZeRO-3 gathers per layer and reshards after each pass; FSDP
       SHARD_GRAD_OP keeps the gathered copy from forward to backward; trainers whose
       parameters are fp32 (master_bytes 0) without sharding cast a 16-bit copy per layer that
       lives from its first forward to its last backward (FSDP MixedPrecision) */
    g->gather_keep = (p->zero == 2 && g->caps->zero2_keeps_gathered) ||
                     (p->zero < 2 && g->caps->master_bytes == 0);
    g->gather_mode = p->zero == 3 || g->gather_keep;
    /* with parameter overlap the next layer's all-gather is issued before this layer computes,
       so two gathered layers are live (FSDP forward/backward prefetch, DeepSpeed
       stage3_prefetch_bucket_size) */
    g->prefetch = p->zero == 3 && !g->gather_keep && p->overlap_param;
    g->fetch_frac_mode = !g->gather_mode && p->offload_params > 0;
    g->grads_sharded = p->zero >= 2;
    g->reduce_per_mb = (g->caps->grad_reduce_per_mb_zero_mask >> p->zero) & 1u;
}

/* Per-layer tensor sizes (computed once per layer kind), the model-state units of the rank's
 * layers and of the embedding / head, and the replay's bookkeeping arrays. */
static ap_status gen_sizes(gen *g, const ap_sim *s, int stage, ap_err *err) {
    const ap_model *m = &s->m;
    const ap_plan *p = &s->p;
    int t = p->tp > 0 ? p->tp : 1;
    if (schedule_rows(g, err) != AP_OK) return AP_ERR_NOMEM;
    g->sz = ap_calloc((size_t)(g->nloc > 0 ? g->nloc : 1), sizeof *g->sz);
    g->units = ap_calloc((size_t)g->nunits, sizeof *g->units);
    size_t nsaved = (size_t)g->mb_rows * (size_t)(g->nloc > 0 ? g->nloc : 1) * AP_SIM_NKINDS;
    g->saved = ap_malloc(nsaved * sizeof *g->saved);
    g->ends = ap_malloc((size_t)g->mb_rows * END_N * sizeof *g->ends);
    if (!g->sz || !g->units || !g->saved || !g->ends)
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    memset(g->saved, 0xff, nsaved * sizeof *g->saved);
    memset(g->ends, 0xff, (size_t)g->mb_rows * END_N * sizeof *g->ends);
    /* layers of a kind share sizes: compute the dense and MoE shapes once */
    lsz dense_sz, moe_sz;
    int have_dense = 0, have_moe = 0;
    for (int k = 0; k < g->vp; k++)
        for (int i = 0; i < g->ck_n[k]; i++) {
            int64_t layer = g->ck_first[k] + i;
            int moe = ap_model_layer_is_moe(m, layer);
            if (moe && !have_moe) {
                ap_simg_layer_sizes(g, layer, &moe_sz);
                have_moe = 1;
            } else if (!moe && !have_dense) {
                ap_simg_layer_sizes(g, layer, &dense_sz);
                have_dense = 1;
            }
            int loc = g->ck_base[k] + i;
            g->sz[loc] = moe ? moe_sz : dense_sz;
            unit *u = &g->units[loc];
            u->layer = (int32_t)layer;
            u->p_dense = g->sz[loc].p_dense;
            u->p_expert = g->sz[loc].p_expert;
            u->p_linear = g->sz[loc].p_linear;
        }
    if (g->nloc == 0) ap_simg_layer_sizes(g, 0, &g->sz[0]);
    int64_t V = m->vocab, h = m->hidden;
    g->xb = g->sz[0].x;
    g->hmask_b = m->dropout ? g->sz[0].x / 2 : 0;
    /* logits: [s/cp * b, V/t] in the compute dtype (vocab-parallel head, Megatron) */
    g->logits_b = cdiv(p->seq, p->cp > 0 ? p->cp : 1) * p->mbs * cdiv(V, t) * 2;
    unit *ue = &g->units[g->u_embed], *uh = &g->units[g->u_head];
    ue->layer = AP_SIM_LAYER_EMBED;
    uh->layer = (int32_t)g->L;
    if (stage == 0) {
        int64_t emb = ap_model_embedding_params(m);
        ue->p_dense = emb - V * h + cdiv(V, t) * h;
        ue->p_linear = 0;
    }
    if (stage == p->pp - 1) {
        int64_t head = ap_model_head_params(m);
        if (!m->tied_embeddings) head = head - V * h + cdiv(V, t) * h;
        else if (p->pp > 1) head += cdiv(V, t) * h; /* tied copy on the last stage (Megatron) */
        uh->p_dense = head;
        uh->p_linear = (!m->tied_embeddings || p->pp > 1) ? cdiv(V, t) * h : 0;
    }
    for (int i = 0; i < g->nunits; i++) {
        unit *u = &g->units[i];
        u->t_weight = u->t_grad = u->t_gathered = u->t_accum = -1;
    }
    return AP_OK;
}

/* The event, tensor and operation arrays, sized from the schedule once, and the allocator
 * model (out of memory sets g->nomem). `stream`: 0 a recorded rank; 1 a streamed rank's
 * counting pass (no allocator, no budget: only the events and the allocated peak count); 2 its
 * replay. A streamed rank keeps no events and one operation, and reuses tensor slots. */
static void gen_buffers(gen *g, ap_sim *s, int stream) {
    g->stream = stream;
    g->apeak = -1;
    g->over_res = -1;
    g->peak_ev = g->peak_op = g->over_ev = g->over_op = -1;
    g->overhead = s->overhead_bytes;
    if (stream) {
        g->capev = INT32_MAX;
        g->capts = 4096;
        g->capops = 1;
        g->ts = ap_malloc((size_t)g->capts * sizeof *g->ts);
        g->blk = ap_malloc((size_t)g->capts * sizeof *g->blk);
        g->fl = ap_malloc((size_t)g->capts * sizeof *g->fl);
        g->serial = ap_malloc((size_t)g->capts * sizeof *g->serial);
        g->keep = ap_malloc((size_t)g->capts * sizeof *g->keep);
        g->ops = ap_malloc(sizeof *g->ops);
        if (!g->ts || !g->blk || !g->fl || !g->serial || !g->keep || !g->ops) g->nomem = 1;
        if (stream == 1) return;
    } else {
        /* size the arrays from the schedule once (about 70 events per layer and micro-batch)
           instead of growing them by doubling; pages never written cost no memory */
        int64_t est = ((int64_t)g->nloc + 2) * g->mbs_n * 72 + 4096;
        g->capev = (int)est;
        g->capts = (int)(est / 2);
        /* operations per micro-batch: per layer its forward and backward, a recomputation, a
           gather per pass and a reduction; per chunk the receive or embedding and the send or
           head of each pass (chunk_fwd, chunk_bwd) */
        int64_t per_layer = 2 + (s->p.recompute == AP_RECOMPUTE_FULL) +
                            2 * (g->gather_mode || g->fetch_frac_mode) + g->reduce_per_mb;
        g->capops = (int)(((int64_t)g->nloc * per_layer + 4LL * g->vp + 8) * g->mbs_n + 256);
        g->record = s->o.record_curves;
        /* the arrays that grow together take one capacity: the least of what they got */
        int c[2], e[3];
        g->ts = spare_take(s, SP_TS, g->capts, sizeof *g->ts, &c[0]);
        g->blk = spare_take(s, SP_BLK, g->capts, sizeof *g->blk, &c[1]);
        g->capts = c[0] < c[1] ? c[0] : c[1];
        g->ops = ap_malloc((size_t)g->capops * sizeof *g->ops); /* the rank keeps it */
        if (!g->ts || !g->blk || !g->ops) g->nomem = 1;
        if (g->record) {
            g->ev = spare_take(s, SP_EV, g->capev, sizeof *g->ev, &e[0]);
            g->acurve = spare_take(s, SP_AC, g->capev, sizeof *g->acurve, &e[1]);
            g->rcurve = spare_take(s, SP_RC, g->capev, sizeof *g->rcurve, &e[2]);
            /* the per-op arrays grow with ops, at capops (at most what each got) */
            g->opk_ev = spare_take(s, SP_OPKEV, g->capops, sizeof *g->opk_ev, NULL);
            g->opk_cat = spare_take(s, SP_OPKCAT, g->capops, AP_SIM_NCAT * sizeof *g->opk_cat,
                                    NULL);
            g->ope_cat = spare_take(s, SP_OPECAT, g->capops, AP_SIM_NCAT * sizeof *g->ope_cat,
                                    NULL);
            if (!g->ev || !g->acurve || !g->rcurve || !g->opk_ev || !g->opk_cat || !g->ope_cat)
                g->nomem = 1;
            g->capev = e[0] < e[1] ? e[0] : e[1];
            if (e[2] < g->capev) g->capev = e[2];
        }
    }
    ap_alloc_opts ao;
    ap_alloc_opts_init(&ao);
    ao.mode = s->o.allocator;
    ao.expandable_segments = s->o.expandable_segments;
    if (s->capacity_bytes > 0) {
        /* the allocator may reserve what the device has beyond the fixed overhead */
        double lim = s->capacity_bytes - s->overhead_bytes;
        ao.limit_bytes = lim > 0 ? (int64_t)lim : 1;
    }
    if (!s->o.no_allocator) {
        g->al = ap_alloc_new(&ao);
        if (!g->al) g->nomem = 1;
    }
    g->budget = s->budget_bytes;
}

/* Free what the generator still owns (NULL-safe; what a result took is NULL here). */
static void gen_free(gen *g) {
    ap_free(g->sz);
    ap_free(g->units);
    ap_free(g->saved);
    ap_free(g->ends);
    ap_free(g->it);
    ap_free(g->opens);
    ap_free(g->blk);
    ap_free(g->fl);
    ap_free(g->serial);
    ap_free(g->keep);
    ap_alloc_free(g->al);
    g->sz = NULL;
    g->units = NULL;
    g->saved = g->ends = NULL;
    g->it = NULL;
    g->opens = NULL;
    g->blk = g->fl = g->serial = g->keep = NULL;
    g->al = NULL;
}

/* The generator's verdict: out of memory or a free of a tensor not allocated. */
static ap_status gen_status(const gen *g, int stage, ap_err *err) {
    if (g->nomem)
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory (stage %d)", stage);
    if (g->bad_free)
        return ap_err_set(err, AP_ERR_INTERNAL,
                          "simulator: stage %d frees a tensor that is not allocated", stage);
    return AP_OK;
}

/* The summary both kinds of rank share: sizes, peaks, the first event over the budget. */
static void rank_summary(const gen *g, const ap_sim *s, int stage, ap_sim_rank *r) {
    r->stage = stage;
    r->layers = g->nloc;
    r->nops = g->nops;
    r->nevents = g->nev;
    r->baseline_bytes = g->baseline;
    r->end_bytes = g->live;
    r->allocated_peak_bytes = g->apeak < 0 ? 0 : g->apeak;
    r->reserved_peak_bytes = g->rpeak;
    r->device_peak_bytes = g->rpeak + (int64_t)s->overhead_bytes;
    r->peak_event = g->peak_ev;
    r->over_event = g->over_ev;
    r->fragmentation = g->rpeak > 0 ? 1.0 - (double)g->alloc_at_rpeak / (double)g->rpeak : 0;
}

/* Hand the arrays to the rank, free the rest, and fill its public summary. */
static ap_status rank_result(gen *g, ap_sim *s, int stage, rank_store *rs, ap_err *err) {
    rs->ops = g->ops;
    rs->ts = g->ts;
    rs->ev = g->ev;
    rs->acurve = g->acurve;
    rs->rcurve = g->rcurve;
    rs->opk_ev = g->opk_ev;
    rs->opk_cat = g->opk_cat;
    rs->ope_cat = g->ope_cat;
    rs->capts = g->capts;
    rs->capev = g->capev;
    rs->capops = g->capops;
    ap_sim_rank *r = &rs->r;
    if (g->al) ap_alloc_get_stats(g->al, &r->alloc);
    spare_give(s, SP_BLK, g->blk, g->capts);
    g->blk = NULL;
    gen_free(g);
    ap_status st = gen_status(g, stage, err);
    if (st != AP_OK) return st;
    rank_summary(g, s, stage, r);
    r->ntensors = g->nts;
    r->ops = g->ops;
    r->tensors = g->ts;
    r->events = g->ev;
    r->allocated_curve = g->acurve;
    r->reserved_curve = g->rcurve;
    r->op_peak_event = g->opk_ev;
    r->op_peak_cat = g->opk_cat;
    r->op_end_cat = g->ope_cat;
    r->peak_op = g->peak_op;
    r->over_op = g->over_op;
    summary_curve(rs);
    st = live_set(s, rs, err);
    if (st == AP_OK) st = over_set(s, rs, err);
    return st;
}

/* The replay: persistent states, the pipeline schedule, the optimizer step (or the runtime
 * trainer's own iteration); then the last operation closes. */
static void generate(gen *g, const ap_sim *s) {
    if (!g->nomem) {
        if (s->p.trainer == AP_TRAINER_RUNTIME) {
            ap_simrt_generate(g); /* the runtime's own layout (simrt.c) */
        } else {
            setup_states(g);
            schedule(g);
            finish_step(g);
        }
    }
    if (g->nops > 0 && !g->nomem) op_close(g);
}

/* A generator for pipeline rank `stage`, ready to generate: its layout, sizes, schedule rows
 * and arrays (gen_buffers' `stream`). On an error what it allocated is freed. */
static ap_status gen_open(gen *g, ap_sim *s, int stage, int stream, ap_err *err) {
    memset(g, 0, sizeof *g);
    gen_layout(g, s, stage);
    ap_status st = gen_sizes(g, s, stage, err);
    if (st != AP_OK) {
        gen_free(g);
        return st;
    }
    gen_buffers(g, s, stream);
    return AP_OK;
}

static ap_status sim_rank(ap_sim *s, int stage, rank_store *rs, ap_err *err) {
    gen g;
    ap_status st = gen_open(&g, s, stage, 0, err);
    if (st != AP_OK) return st;
    generate(&g, s);
    return rank_result(&g, s, stage, rs, err);
}

/* A streamed rank (ap_sim_opts.stream): a counting pass for its events and its allocated peak,
 * then the replay, which builds the summaries as it goes (stream_event, stream_op_done). */
static ap_status sim_rank_stream(ap_sim *s, int stage, rank_store *rs, ap_err *err) {
    gen g;
    ap_status st = gen_open(&g, s, stage, 1, err);
    if (st != AP_OK) return st;
    generate(&g, s);
    st = gen_status(&g, stage, err);
    ap_free(g.ts);
    ap_free(g.ops);
    gen_free(&g);
    if (st != AP_OK) return st;
    ap_sim_rank *r = &rs->r;
    stream_rank sr;
    memset(&sr, 0, sizeof sr);
    sr.s = s;
    sr.r = r;
    sr.nev = g.nev;
    sr.peak_target = g.peak_ev;
    sr.peak_op = -1;
    sr.pts = !s->o.record_curves ? 0 : g.nev < AP_SIM_CURVE_POINTS ? (int)g.nev
                                                                   : AP_SIM_CURVE_POINTS;
    sr.k_end = sr.pts > 0 ? sr.nev / sr.pts : 0;
    sr.op_ev = -1;
    sr.err = err;
    if ((st = gen_open(&g, s, stage, 2, err)) != AP_OK) return st;
    g.sr = &sr;
    generate(&g, s);
    if (g.al) ap_alloc_get_stats(g.al, &r->alloc);
    ap_free(g.ts);
    gen_free(&g);
    /* what the rank keeps: the operations its summary names and the tensors live at its peak */
    rs->ops = g.ops;
    rs->ts = sr.kept;
    rs->live = sr.order;
    st = sr.st != AP_OK ? sr.st : gen_status(&g, stage, err);
    if (st == AP_OK && g.nev != sr.nev)
        st = ap_err_set(err, AP_ERR_INTERNAL, "simulator: stage %d replays %lld events, counted "
                        "%lld", stage, (long long)g.nev, (long long)sr.nev);
    if (st != AP_OK) return st;
    if (!rs->ts) rs->ts = ap_malloc(sizeof *rs->ts);
    if (!rs->live) rs->live = ap_malloc(sizeof *rs->live);
    /* rs->ops owns the one-slot array until it grows (a failed realloc leaves it there) */
    ap_sim_op *ops = ap_realloc(rs->ops, 2 * sizeof *ops);
    if (ops) rs->ops = ops;
    if (!rs->ts || !rs->live || !ops)
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory (stage %d)", stage);
    ops[0] = sr.ops[0];
    ops[1] = sr.ops[1];
    rank_summary(&g, s, stage, r);
    r->ops = ops;
    r->peak_op = g.peak_op >= 0 ? 0 : -1;
    r->over_op = g.over_op >= 0 ? 1 : -1;
    r->tensors = rs->ts;
    r->ntensors = sr.nkept;
    r->live_at_peak = rs->live;
    r->curve_points = sr.pts;
    while (sr.k < sr.pts) curve_point(&sr);
    return AP_OK;
}

/* ---- the ranks, one after another or side by side --------------------------------------- */

/* Ranks replayed by the workers of run_ranks: each takes the next rank; with keep_worst the
 * worst rank so far (under mu) keeps its events. A rank's status and error are its own. */
typedef struct rank_pool {
    ap_sim *s;
    atomic_int next;
    pthread_mutex_t mu;
    int worst;       /* keep_worst: the rank holding its events, -1 before the first */
    ap_status *st;   /* per rank */
    ap_err *err;     /* per rank */
} rank_pool;

/* keep_worst: rank i is done; the one of it and the worst so far that is not the worse frees
 * its events. Which ranks end released does not depend on the order ranks finish in. */
static ap_status keep_worst(rank_pool *pl, int i, ap_err *err) {
    pthread_mutex_lock(&pl->mu);
    int loser = -1;
    if (pl->worst < 0) {
        pl->worst = i;
    } else if (ap_simg_rank_worse(pl->s, i, pl->worst)) {
        loser = pl->worst;
        pl->worst = i;
    } else {
        loser = i;
    }
    pthread_mutex_unlock(&pl->mu);
    /* the loser is no one's to touch any more */
    return loser >= 0 ? release_rank(pl->s, &pl->s->ranks[loser], err) : AP_OK;
}

/* Replay rank i, hand it to rank_done, then free what the options say it does not keep. */
static ap_status one_rank(rank_pool *pl, int i, ap_err *err) {
    ap_sim *s = pl->s;
    ap_status st = s->o.stream ? sim_rank_stream(s, i, &s->ranks[i], err)
                               : sim_rank(s, i, &s->ranks[i], err);
    if (st == AP_OK && s->o.rank_done) st = s->o.rank_done(s->o.rank_ctx, s, i, err);
    if (st != AP_OK || s->o.stream) return st;
    if (s->o.release_events) return release_rank(s, &s->ranks[i], err);
    return s->o.keep_worst ? keep_worst(pl, i, err) : AP_OK;
}

static void *rank_worker(void *arg) {
    rank_pool *pl = arg;
    for (;;) {
        int i = atomic_fetch_add(&pl->next, 1);
        if (i >= pl->s->nranks) return NULL;
        pl->st[i] = one_rank(pl, i, &pl->err[i]);
    }
}

/* Every rank of s; the first failing rank (in rank order) names the error. One after another
 * where the callbacks must see the ranks in order or one thread is asked for; the first
 * failure then stops the rest. */
static ap_status run_ranks(ap_sim *s, ap_err *err) {
    int n = s->nranks;
    int nt = s->o.threads > 0 ? s->o.threads : ap_online_cores();
    if (nt > n) nt = n;
    if (s->o.rank_done || s->o.op_done) nt = 1;
    rank_pool pl;
    memset(&pl, 0, sizeof pl);
    pl.s = s;
    pl.worst = -1;
    atomic_init(&pl.next, 0);
    if (nt <= 1) {
        pthread_mutex_init(&pl.mu, NULL);
        ap_status st = AP_OK;
        for (int i = 0; i < n && st == AP_OK; i++) st = one_rank(&pl, i, err);
        pthread_mutex_destroy(&pl.mu);
        return st;
    }
    pl.st = ap_calloc((size_t)n, sizeof *pl.st);
    pl.err = ap_calloc((size_t)n, sizeof *pl.err);
    if (!pl.st || !pl.err) {
        ap_free(pl.st);
        ap_free(pl.err);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    pthread_mutex_init(&pl.mu, NULL);
    /* nt - 1 helpers (threads.h) and the calling thread pull ranks from one counter; a helper
       that cannot be had leaves its ranks to the others */
    ap_tasks team;
    ap_tasks_start_same(&team, nt - 1, rank_worker, &pl);
    rank_worker(&pl);
    ap_tasks_wait(&team);
    pthread_mutex_destroy(&pl.mu);
    ap_status st = AP_OK;
    for (int i = 0; i < n && st == AP_OK; i++)
        if ((st = pl.st[i]) != AP_OK) *err = pl.err[i];
    ap_free(pl.st);
    ap_free(pl.err);
    return st;
}

ap_status ap_sim_run(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                     const ap_sim_opts *opts, ap_sim **out, ap_err *err) {
    *out = NULL;
    if (p->pp < 1 || p->tp < 1 || p->dp < 1 || p->mbs < 1 || p->seq < 1)
        return ap_err_set(err, AP_ERR_INPUT,
                          "simulator: plan degrees, micro-batch and sequence must be >= 1");
    if (m->layers < 1 || m->hidden < 1)
        return ap_err_set(err, AP_ERR_INPUT, "simulator: model has no layers");
    const ap_trainer_caps *caps = ap_trainer_get(p->trainer);
    if (!caps) return ap_err_set(err, AP_ERR_INPUT, "simulator: unknown trainer");
    int vp = p->vp > 0 ? p->vp : 1;
    if (p->pp * vp > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INPUT, "simulator: pp x vp = %d exceeds %d chunks",
                          p->pp * vp, AP_MAX_CHUNKS);
    int64_t mb = p->grad_accum > 0 ? p->grad_accum : 1;
    if (vp > 1 && mb % p->pp != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE,
                          "simulator: the interleaved schedule needs the micro-batches per step "
                          "(%lld) to be a multiple of pp (%d)",
                          (long long)mb, p->pp);
    /* events per rank ~ 70 per (layer, micro-batch); all ranks are held at once unless
     * release_events, about 27 bytes per event with the curves (20000 micro-batches of tiny-gpt:
     * 8.6M events, 236 MB RSS), so the total is bounded, not the rank's. A streamed run holds
     * none, but its time and its trace (about 40 bytes per event) grow with them */
    double per_rank = ((double)m->layers / p->pp + 2.0) * (double)mb * 72.0 + 4096.0;
    double total = per_rank * p->pp;
    if (total > AP_SIM_MAX_EVENTS)
        return ap_err_set(err, AP_ERR_INPUT,
                          "simulator: %lld layers x %lld micro-batches per step on %d pipeline "
                          "ranks is about %.3g events, too large to simulate (the limit is %.3g "
                          "events, about 1 GB); use a smaller --gbs or a larger --mbs",
                          (long long)m->layers,
                          (long long)mb, p->pp, total, AP_SIM_MAX_EVENTS);
    for (int ch = 0; ch < p->pp * vp; ch++)
        if (ap_plan_chunk_layers(p, m->layers, ch) < 0)
            return ap_err_set(err, AP_ERR_INPUT, "simulator: chunk %d has a negative layer count",
                              ch);
    ap_sim *s = ap_calloc(1, sizeof *s);
    if (!s) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    s->m = *m;
    s->p = *p;
    s->p.vp = vp;
    s->p.grad_accum = mb;
    if (opts)
        s->o = *opts;
    else
        ap_sim_opts_init(&s->o);
    s->capacity_bytes = s->o.capacity_bytes > 0 ? s->o.capacity_bytes
                        : c                     ? c->gpu.mem_bytes
                                                : 0;
    s->overhead_bytes = s->o.device_overhead_bytes >= 0 ? s->o.device_overhead_bytes
                                                        : ap_mem_device_overhead_bytes(p, 0);
    s->budget_bytes = s->capacity_bytes > 0 ? s->capacity_bytes - s->o.headroom_bytes : 0;
    if (s->capacity_bytes > 0 && s->budget_bytes <= 0) s->budget_bytes = 1;
    s->ranks = ap_calloc((size_t)p->pp, sizeof *s->ranks);
    if (!s->ranks) {
        ap_free(s);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    s->nranks = p->pp;
    spares_open(s);
    ap_status st = run_ranks(s, err);
    spares_close(s);
    if (st != AP_OK) {
        ap_sim_free(s);
        return st;
    }
    *out = s;
    return AP_OK;
}
