/*
 * run.c - the driver of one rank (runtime.h, ap_rt_session): builds the rank's share of the job
 * (its place in the tp x dp x pp grid, the communicators, its model chunks and units, the
 * communication buffers and model states), then runs training steps: the pipeline schedule
 * (sim/schedule.c, the simulator's) of forward and backward passes of its chunks, receiving and
 * sending activations and gradients at chunk boundaries, the ZeRO gathers and gradient
 * reductions (zero.c), the optimizer, and the step's loss; it times the phases and finally
 * gathers every rank's measurements on rank 0.
 *
 * Rank grid: world rank = (stage * dp + dp_rank) * tp + tp_rank (tp innermost, then dp, then pp:
 * Megatron-LM's order), so tensor-parallel ranks are neighbours on a host.
 *
 * Pipeline transfers: a send is buffered (the activation is copied into the send pool and freed
 * at once, as Megatron frees a sent output) and a receive blocks until its message is there, so
 * any schedule whose dependencies are acyclic (1F1B, interleaved) runs without deadlock. The pool
 * holds every transfer of one step; it is drained at the step's end.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "rt_int.h"

struct ap_rt_session {
    rt_ctx c;
    ap_rt_job job;
    ap_err err;
    ap_sim_pass *sched;
    int nsched;
    int grads_dirty;          /* loss_grad left gradients in place */
    ap_rt_host_figures host;
    /* measurements */
    double *loss;             /* per step (rank 0) */
    int steps_done;
    ap_rt_phase_times sum;    /* over measured steps */
    int measured;
};

rt_ctx *rt_session_ctx(ap_rt_session *s) { return &s->c; }

/* ---- errors, allocation, timed communication ---------------------------------------------- */

ap_status rt_fail(rt_ctx *c, ap_status st, const char *fmt, ...) {
    if (c->st != AP_OK) return c->st; /* keep the first */
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ap_err_set(c->err, st, "rank %d: %s", c->rank, msg);
    c->st = st;
    return st;
}

static const char *kind_name(int kind) { return ap_sim_kind_name(kind); }

void *rt_alloc_bytes(rt_ctx *c, int cat, int kind, int layer, int mb, int64_t bytes) {
    if (c->st != AP_OK) return NULL;
    void *p = rt_mem_alloc(&c->mem, cat, kind, layer, mb, bytes);
    if (!p && bytes > 0) {
        char b[32];
        rt_fail(c, AP_ERR_NOMEM, "out of memory allocating %s (%s, %s, layer %d, micro-batch %d)",
                ap_fmt_bytes((double)bytes, b, sizeof b), kind_name(kind),
                cat == RT_HOST_CAT ? "host pool" : ap_rt_category_name(cat), layer, mb);
    }
    return p;
}

rt_real *rt_alloc(rt_ctx *c, int cat, int kind, int layer, int mb, int64_t elems) {
    return rt_alloc_bytes(c, cat, kind, layer, mb, elems * RT_ELEM);
}

void rt_free(rt_ctx *c, void *p) {
    if (p && rt_mem_free(&c->mem, p) != 0)
        rt_fail(c, AP_ERR_INTERNAL, "free of a buffer the tracker does not hold");
}

static ap_status comm_done(rt_ctx *c, ap_status st, ap_err *e, double t0) {
    c->t_comm += c->world->wtime() - t0;
    if (st != AP_OK) return rt_fail(c, st, "%s", e->msg);
    return AP_OK;
}

ap_status rt_c_allreduce(rt_ctx *c, rt_group *g, rt_real *buf, int64_t n, rt_redop op) {
    if (c->st != AP_OK) return c->st;
    if (!g || g->size == 1) return AP_OK;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    c->k->sync();
    return comm_done(c, g->ops->allreduce(g, buf, n, op, c->ws, c->ws_elems, &e), &e, t0);
}

ap_status rt_c_reduce_scatter(rt_ctx *c, rt_group *g, const rt_real *in, rt_real *out,
                              int64_t chunk) {
    if (c->st != AP_OK) return c->st;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    c->k->sync();
    return comm_done(c, g->ops->reduce_scatter(g, in, out, chunk, RT_OP_SUM, c->ws, c->ws_elems,
                                               &e),
                     &e, t0);
}

ap_status rt_c_allgather(rt_ctx *c, rt_group *g, rt_real *buf, int64_t chunk) {
    if (c->st != AP_OK) return c->st;
    if (g->size == 1) return AP_OK;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    c->k->sync();
    return comm_done(c, g->ops->allgather(g, buf, chunk, &e), &e, t0);
}

/* Pipeline transfers go through MPI on host memory: a device backend stages them through a host
 * copy (not counted: it lives for the call only). */
ap_status rt_c_send(rt_ctx *c, rt_group *g, int dst, int tag, const void *buf, int64_t bytes) {
    if (c->st != AP_OK) return c->st;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    c->k->sync();
    if (c->k->host_memory) return comm_done(c, g->ops->send(g, dst, tag, buf, bytes, &e), &e, t0);
    void *host = malloc((size_t)bytes);
    if (!host) return rt_fail(c, AP_ERR_NOMEM, "out of memory staging a send");
    c->k->download(host, buf, bytes);
    ap_status st = g->ops->send(g, dst, tag, host, bytes, &e);
    free(host);
    return comm_done(c, st, &e, t0);
}

ap_status rt_c_recv(rt_ctx *c, rt_group *g, int src, int tag, void *buf, int64_t bytes) {
    if (c->st != AP_OK) return c->st;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    if (c->k->host_memory) return comm_done(c, g->ops->recv(g, src, tag, buf, bytes, &e), &e, t0);
    void *host = malloc((size_t)bytes);
    if (!host) return rt_fail(c, AP_ERR_NOMEM, "out of memory staging a receive");
    ap_status st = g->ops->recv(g, src, tag, host, bytes, &e);
    if (st == AP_OK) c->k->upload(buf, host, bytes);
    free(host);
    return comm_done(c, st, &e, t0);
}

/* ---- phases ----------------------------------------------------------------------------------- */

typedef struct phase {
    double t0, comm0;
} phase;

static phase phase_begin(rt_ctx *c) { return (phase){c->world->wtime(), c->t_comm}; }

static void phase_end(rt_ctx *c, phase ph, double *acc) {
    c->k->sync();
    *acc += (c->world->wtime() - ph.t0) - (c->t_comm - ph.comm0);
}

/* ---- building a rank ---------------------------------------------------------------------------- */

/* the message tag of a pipeline transfer into chunk `dst_chunk` of micro-batch mb */
static int p2p_tag(const rt_ctx *c, int fwd, int dst_chunk, int mb) {
    return ((mb * c->nchunks) + dst_chunk) * 2 + (fwd ? 0 : 1);
}

/* The GPU of this rank among the ranks of its host (Open MPI, MPICH, Slurm), else its rank. */
static int local_rank(const rt_ctx *c) {
    const char *v[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (getenv(v[i])) return atoi(getenv(v[i]));
    return c->rank;
}

int ap_rt_cuda_available(ap_err *err) {
#ifdef AP_RT_HAVE_CUDA
    return rt_kernels_cuda(0, err) != NULL;
#else
    ap_err_set(err, AP_ERR_CUDA, "this build has no CUDA backend (CUDA toolkit, cuBLAS and NCCL "
               "not found at configure time)");
    return 0;
#endif
}

static ap_status select_backend(rt_ctx *c) {
    if (strcmp(c->job->backend, "cuda") != 0) {
        c->k = rt_kernels_cpu();
        return AP_OK;
    }
#ifdef AP_RT_HAVE_CUDA
    ap_err e = {{0}};
    c->k = rt_kernels_cuda(local_rank(c), &e);
    if (!c->k) return rt_fail(c, AP_ERR_CUDA, "%s", e.msg);
    return AP_OK;
#else
    (void)local_rank;
    return rt_fail(c, AP_ERR_CUDA, "this build has no CUDA backend (CUDA toolkit, cuBLAS and NCCL "
                   "not found at configure time)");
#endif
}

/* A device backend's collectives run through NCCL over the same ranks. */
static ap_status device_groups(rt_ctx *c) {
    if (c->k->host_memory) return AP_OK;
#ifdef AP_RT_HAVE_CUDA
    rt_group **gs[] = {&c->tpg, &c->dpg, &c->tieg};
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        if (!*gs[i] || (*gs[i])->size == 1) continue;
        ap_err e = {{0}};
        rt_group *n = NULL;
        if (rt_nccl_group(*gs[i], &n, &e) != AP_OK) return rt_fail(c, AP_ERR_CUDA, "%s", e.msg);
        *gs[i] = n;
    }
#endif
    return AP_OK;
}

static ap_status make_groups(rt_ctx *c) {
    ap_rt_comm *w = c->world;
    ap_err e = {{0}};
    int t = c->t, D = c->dp;
    ap_status st;
    c->wg = w->world;
    if ((st = w->split(w, c->stage * D + c->dp_rank, c->tp_rank, &c->tpg, &e)) != AP_OK ||
        (st = w->split(w, c->stage * t + c->tp_rank, c->dp_rank, &c->dpg, &e)) != AP_OK ||
        (st = w->split(w, c->dp_rank * t + c->tp_rank, c->stage, &c->ppg, &e)) != AP_OK)
        return rt_fail(c, st, "%s", e.msg);
    /* Megatron's embedding group: the first and the last stage of one pipeline share the tied
       matrix's gradient */
    int tie = c->tied && c->pp > 1 && (c->stage == 0 || c->stage == c->pp - 1);
    if ((st = w->split(w, tie ? c->dp_rank * t + c->tp_rank : -1, c->stage, &c->tieg, &e)) !=
        AP_OK)
        return rt_fail(c, st, "%s", e.msg);
    return AP_OK;
}

static void derive_dims(rt_ctx *c) {
    const ap_model *m = &c->m;
    const ap_plan *p = &c->p;
    c->t = p->tp;
    c->pp = p->pp;
    c->dp = p->dp;
    c->vp = p->vp > 0 ? p->vp : 1;
    c->nchunks = c->pp * c->vp;
    c->L = m->layers;
    c->h = m->hidden;
    c->a = m->heads;
    c->kv = m->kv_heads;
    c->d = m->head_dim;
    c->f = m->ffn_hidden;
    c->V = m->vocab;
    c->s = p->seq;
    c->b = p->mbs;
    c->n = c->s * c->b;
    c->sp = p->sp && c->t > 1;
    c->ns = c->sp ? c->n / c->t : c->n;
    c->aL = c->a / c->t;
    c->kL = c->kv / c->t;
    c->fL = c->f / c->t;
    c->VL = c->V / c->t;
    c->qkvL = (c->aL + 2 * c->kL) * c->d;
    c->m_mb = p->grad_accum;
    c->rms = m->norm == AP_NORM_RMSNORM;
    c->swiglu = m->act == AP_ACT_SWIGLU;
    c->bias = m->bias;
    c->qkv_bias = m->bias || m->qkv_bias;
    c->learned_pos = m->pos == AP_POS_LEARNED;
    c->tied = m->tied_embeddings;
    c->nstat = c->rms ? 1 : 2;
}

static ap_status make_units(rt_ctx *c) {
    const ap_plan *p = &c->p;
    c->nloc = 0;
    for (int k = 0; k < c->vp; k++) {
        int cidx = k * c->pp + c->stage;
        c->ck_first[k] = ap_plan_chunk_first_layer(p, c->L, cidx);
        c->ck_n[k] = ap_plan_chunk_layers(p, c->L, cidx);
        c->ck_base[k] = c->nloc;
        c->nloc += c->ck_n[k];
        /* layers per chunk recomputed in full: the plan's count, or the chunk's own
           (stage_recompute, as the simulator reads it) */
        int K = p->recompute_layers;
        if (p->nchunks == c->nchunks && p->stage_recompute[cidx] > 0) K = p->stage_recompute[cidx];
        c->ck_rc[k] = K;
    }
    c->nunits = c->nloc + 2;
    c->units = calloc((size_t)c->nunits, sizeof *c->units);
    if (!c->units) return rt_fail(c, AP_ERR_NOMEM, "out of memory");
    for (int k = 0; k < c->vp; k++)
        for (int i = 0; i < c->ck_n[k]; i++) {
            rt_unit *u = &c->units[c->ck_base[k] + i];
            u->kind = RT_UNIT_LAYER;
            u->layer = c->ck_first[k] + i;
            u->chunk = k;
        }
    rt_unit *ue = &c->units[c->nloc], *uh = &c->units[c->nloc + 1];
    ue->kind = RT_UNIT_EMBED;
    ue->layer = AP_SIM_LAYER_EMBED;
    ue->chunk = 0;
    uh->kind = RT_UNIT_HEAD;
    uh->layer = (int)c->L;
    uh->chunk = c->vp - 1;
    /* layout everything, then drop the ends that are not on this rank */
    ap_status st = rt_model_layout(c);
    if (st != AP_OK) return st;
    c->u_embed = c->stage == 0 ? c->nloc : -1;
    c->u_head = c->stage == c->pp - 1 ? c->nloc + 1 : -1;
    if (c->u_embed < 0) ue->n = 0;
    if (c->u_head < 0) uh->n = 0;
    if (c->tied && c->pp == 1) uh->tie = ue;
    return AP_OK;
}

/* Communication buffers: the collective workspace (when any group has more than one rank) and
 * the pipeline send pool (every transfer of one step). */
static ap_status make_comm_buffers(rt_ctx *c) {
    if (c->t > 1 || c->dp > 1 || c->tieg) {
        c->ws_elems = 2 * RT_COMM_SEG_ELEMS;
        c->ws = rt_alloc(c, AP_RT_CAT_COMM, AP_SIM_T_COMM_WS, AP_SIM_LAYER_NONE, -1, c->ws_elems);
        if (!c->ws) return c->st;
    }
    if (c->pp > 1) {
        int64_t sends = 0;
        for (int k = 0; k < c->vp; k++) {
            int cidx = k * c->pp + c->stage;
            if (cidx < c->nchunks - 1) sends += c->m_mb;
            if (cidx > 0) sends += c->m_mb;
        }
        c->pool_bytes = sends * (c->ns * c->h * RT_ELEM + RT_POOL_SLOT_OVERHEAD_BYTES);
        /* MPI copies buffered sends into it: host memory whatever the backend */
        c->pool = rt_mem_alloc_host(&c->mem, AP_RT_CAT_COMM, AP_SIM_T_SEND_POOL,
                                    AP_SIM_LAYER_NONE, -1, c->pool_bytes);
        if (!c->pool)
            return rt_fail(c, AP_ERR_NOMEM, "out of memory allocating the %lld-byte send pool",
                           (long long)c->pool_bytes);
        ap_err e = {{0}};
        ap_status st = c->world->attach_pool(c->world, c->pool, c->pool_bytes, &e);
        if (st != AP_OK) return rt_fail(c, st, "%s", e.msg);
    }
    return AP_OK;
}

ap_status ap_rt_session_new(const ap_rt_job *job, ap_rt_comm *world, ap_rt_session **out,
                            ap_err *err) {
    *out = NULL;
    ap_status st = ap_rt_check(&job->model, &job->plan, err);
    if (st != AP_OK) return st;
    int need = job->plan.tp * job->plan.pp * job->plan.dp;
    if (ap_rt_comm_size(world) != need)
        return ap_err_set(err, AP_ERR_INPUT, "the plan needs tp*pp*dp = %d ranks, the world has %d",
                          need, ap_rt_comm_size(world));
    ap_rt_session *s = calloc(1, sizeof *s);
    if (!s) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    s->job = *job;
    rt_ctx *c = &s->c;
    c->job = &s->job;
    c->m = job->model;
    c->p = job->plan;
    c->err = &s->err;
    c->world = world;
    c->rank = ap_rt_comm_rank(world);
    if (select_backend(c) != AP_OK) {
        st = ap_err_set(err, c->st, "%s", s->err.msg);
        free(s);
        return st;
    }
    rt_mem_init(&c->mem, c->k);
    c->mem.record = job->record_events;
    c->mem.timeline = job->trace;
    c->mem.clock = world->wtime;
    c->rank = ap_rt_comm_rank(world);
    derive_dims(c);
    c->tp_rank = c->rank % c->t;
    c->dp_rank = (c->rank / c->t) % c->dp;
    c->stage = c->rank / (c->t * c->dp);
    if (job->fail_alloc > 0 && job->fail_rank == c->rank) c->mem.fail_at = job->fail_alloc;

    c->mem.setup = 1;
    st = make_groups(c);
    if (st == AP_OK) st = device_groups(c);
    if (st == AP_OK) st = make_units(c);
    if (st == AP_OK) {
        c->sv = calloc((size_t)c->m_mb * (size_t)(c->nloc > 0 ? c->nloc : 1), sizeof *c->sv);
        c->ends = calloc((size_t)c->m_mb * RT_NEND, sizeof *c->ends);
        s->sched = malloc((size_t)(2 * c->m_mb * c->vp) * sizeof *s->sched);
        s->loss = calloc((size_t)(job->steps > 0 ? job->steps : 1), sizeof *s->loss);
        if (!c->sv || !c->ends || !s->sched || !s->loss)
            st = rt_fail(c, AP_ERR_NOMEM, "out of memory");
    }
    if (st == AP_OK) st = make_comm_buffers(c);
    if (st == AP_OK) st = rt_zero_setup(c);
    c->mem.setup = 0;
    c->mem.nev_setup = c->mem.nev;
    if (st == AP_OK && c->mem.oom) st = rt_fail(c, AP_ERR_NOMEM, "out of memory (event log)");
    if (st != AP_OK) {
        ap_err_set(err, st, "%s", s->err.msg);
        ap_rt_session_free(s);
        return st;
    }
    s->nsched = ap_sim_schedule(c->pp, c->vp, c->m_mb, c->stage, s->sched);
    *out = s;
    return AP_OK;
}

void ap_rt_session_free(ap_rt_session *s) {
    if (!s) return;
    rt_ctx *c = &s->c;
    if (c->pool && c->world) {
        ap_err e;
        c->world->attach_pool(c->world, NULL, 0, &e);
    }
    rt_mem_release(&c->mem);
    if (c->tpg) c->tpg->ops->free(c->tpg);
    if (c->dpg) c->dpg->ops->free(c->dpg);
    if (c->ppg) c->ppg->ops->free(c->ppg);
    if (c->tieg) c->tieg->ops->free(c->tieg);
    free(c->units);
    free(c->sv);
    free(c->ends);
    free(s->sched);
    free(s->loss);
    free(s);
}

/* ---- the schedule's passes -------------------------------------------------------------------- */

static int recomputes(const rt_ctx *c, int k, int i) { /* layer i of local chunk k */
    if (c->p.recompute != AP_RECOMPUTE_FULL) return 0;
    int K = c->ck_rc[k];
    return K <= 0 || i < K;
}

static ap_status chunk_fwd(rt_ctx *c, int k, int mb, phase *ph) {
    int cidx = k * c->pp + c->stage;
    rt_real *x;
    if (cidx == 0) {
        rt_unit *ue = &c->units[c->u_embed];
        if (rt_zero_pre(c, ue, mb) != AP_OK) return c->st;
        rt_mem_op(&c->mem, AP_SIM_OP_EMBED_FWD, k, AP_SIM_LAYER_EMBED, mb, c->world->wtime());
        x = rt_embed_fwd(c, mb);
        rt_zero_post(c, ue);
    } else {
        rt_mem_op(&c->mem, AP_SIM_OP_RECV_FWD, k, c->ck_first[k], mb, c->world->wtime());
        x = rt_alloc(c, AP_RT_CAT_ACTIVATIONS, AP_SIM_T_INPUT, c->ck_first[k], mb, c->ns * c->h);
        if (x) rt_c_recv(c, c->ppg, (cidx - 1) % c->pp, p2p_tag(c, 1, cidx, mb), x,
                         c->ns * c->h * RT_ELEM);
    }
    if (c->st != AP_OK) return c->st;
    for (int i = 0; i < c->ck_n[k]; i++) {
        int loc = c->ck_base[k] + i;
        rt_unit *u = &c->units[loc];
        if (rt_zero_pre(c, u, mb) != AP_OK) return c->st;
        rt_mem_op(&c->mem, AP_SIM_OP_FWD, k, u->layer, mb, c->world->wtime());
        c->sv[(int64_t)mb * c->nloc + loc].x = x;
        x = rt_layer_fwd(c, loc, mb, recomputes(c, k, i) ? RT_MODE_DISCARD : RT_MODE_SAVE, x);
        rt_zero_post(c, u);
        if (!x) return c->st != AP_OK ? c->st : rt_fail(c, AP_ERR_INTERNAL, "layer forward failed");
    }
    if (cidx == c->nchunks - 1) {
        rt_unit *uh = &c->units[c->u_head];
        if (rt_zero_pre(c, uh, mb) != AP_OK || (uh->tie && rt_zero_pre(c, uh->tie, mb) != AP_OK))
            return c->st;
        rt_mem_op(&c->mem, AP_SIM_OP_HEAD_FWD, k, (int)c->L, mb, c->world->wtime());
        ap_status st = rt_head_fwd(c, mb, x);
        if (uh->tie) rt_zero_post(c, uh->tie);
        rt_zero_post(c, uh);
        if (st != AP_OK) return st;
    } else {
        phase_end(c, *ph, &c->t_fwd);
        rt_mem_op(&c->mem, AP_SIM_OP_SEND_FWD, k, c->ck_first[k] + c->ck_n[k] - 1, mb,
                  c->world->wtime());
        rt_c_send(c, c->ppg, (cidx + 1) % c->pp, p2p_tag(c, 1, cidx + 1, mb), x,
                  c->ns * c->h * RT_ELEM);
        rt_free(c, x);
        *ph = phase_begin(c);
    }
    return c->st;
}

static ap_status chunk_bwd(rt_ctx *c, int k, int mb) {
    int cidx = k * c->pp + c->stage;
    rt_real *g;
    if (cidx == c->nchunks - 1) {
        rt_unit *uh = &c->units[c->u_head];
        if (rt_zero_pre(c, uh, mb) != AP_OK || (uh->tie && rt_zero_pre(c, uh->tie, mb) != AP_OK))
            return c->st;
        rt_mem_op(&c->mem, AP_SIM_OP_HEAD_BWD, k, (int)c->L, mb, c->world->wtime());
        if (rt_zero_grad_begin(c, uh, mb) != AP_OK ||
            (uh->tie && rt_zero_grad_begin(c, uh->tie, mb) != AP_OK))
            return c->st;
        g = rt_head_bwd(c, mb);
        if (!g) return c->st;
        if (rt_zero_grad_end(c, uh, mb) != AP_OK) return c->st;
        if (uh->tie) rt_zero_post(c, uh->tie);
        rt_zero_post(c, uh);
    } else {
        rt_mem_op(&c->mem, AP_SIM_OP_RECV_BWD, k, c->ck_first[k] + c->ck_n[k] - 1, mb,
                  c->world->wtime());
        g = rt_alloc(c, AP_RT_CAT_TEMPS, AP_SIM_T_STAGE_OUT, c->ck_first[k] + c->ck_n[k], mb,
                     c->ns * c->h);
        if (g) rt_c_recv(c, c->ppg, (cidx + 1) % c->pp, p2p_tag(c, 0, cidx, mb), g,
                         c->ns * c->h * RT_ELEM);
    }
    if (c->st != AP_OK) return c->st;
    for (int i = c->ck_n[k] - 1; i >= 0; i--) {
        int loc = c->ck_base[k] + i;
        rt_unit *u = &c->units[loc];
        if (rt_zero_pre(c, u, mb) != AP_OK) return c->st;
        if (recomputes(c, k, i)) {
            rt_mem_op(&c->mem, AP_SIM_OP_RECOMPUTE, k, u->layer, mb, c->world->wtime());
            rt_real *out = rt_layer_fwd(c, loc, mb, RT_MODE_RECOMPUTE,
                                        c->sv[(int64_t)mb * c->nloc + loc].x);
            if (!out) return c->st;
            rt_free(c, out);
        }
        rt_mem_op(&c->mem, AP_SIM_OP_BWD, k, u->layer, mb, c->world->wtime());
        if (rt_zero_grad_begin(c, u, mb) != AP_OK) return c->st;
        g = rt_layer_bwd(c, loc, mb, g);
        if (!g) return c->st;
        if (rt_zero_grad_end(c, u, mb) != AP_OK) return c->st;
        rt_zero_post(c, u);
    }
    if (cidx == 0) {
        rt_unit *ue = &c->units[c->u_embed];
        if (rt_zero_pre(c, ue, mb) != AP_OK) return c->st;
        rt_mem_op(&c->mem, AP_SIM_OP_EMBED_BWD, k, AP_SIM_LAYER_EMBED, mb, c->world->wtime());
        if (rt_zero_grad_begin(c, ue, mb) != AP_OK || rt_embed_bwd(c, mb, g) != AP_OK ||
            rt_zero_grad_end(c, ue, mb) != AP_OK)
            return c->st;
        rt_zero_post(c, ue);
    } else {
        rt_mem_op(&c->mem, AP_SIM_OP_SEND_BWD, k, c->ck_first[k], mb, c->world->wtime());
        rt_c_send(c, c->ppg, (cidx - 1) % c->pp, p2p_tag(c, 0, cidx - 1, mb), g,
                  c->ns * c->h * RT_ELEM);
        rt_free(c, g);
    }
    return c->st;
}

/* Forward and backward of every micro-batch in schedule order, then the deferred reductions. */
static ap_status run_passes(ap_rt_session *s) {
    rt_ctx *c = &s->c;
    for (int i = 0; i < s->nsched && c->st == AP_OK; i++) {
        const char *kerr = c->k->last_error ? c->k->last_error() : NULL;
        if (kerr) return rt_fail(c, AP_ERR_CUDA, "%s", kerr);
        const ap_sim_pass *it = &s->sched[i];
        phase ph = phase_begin(c);
        if (it->fwd) {
            chunk_fwd(c, it->chunk, it->mb, &ph);
            phase_end(c, ph, &c->t_fwd);
        } else {
            chunk_bwd(c, it->chunk, it->mb);
            phase_end(c, ph, &c->t_bwd);
        }
    }
    if (c->st == AP_OK) rt_zero_finish_grads(c);
    return c->st;
}

/* The step's loss on world rank 0: every rank's local cross-entropy sum (non-zero on the last
 * stage's first tp rank of each dp group), summed in rank order, over the global batch's tokens. */
static ap_status reduce_loss(ap_rt_session *s, double *loss) {
    rt_ctx *c = &s->c;
    char *all = NULL;
    int64_t *lens = calloc((size_t)c->wg->size, sizeof *lens);
    if (!lens) return rt_fail(c, AP_ERR_NOMEM, "out of memory");
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    ap_status st = c->wg->ops->gatherv(c->wg, &c->loss_sum, sizeof c->loss_sum, &all, lens, &e);
    c->t_comm += c->world->wtime() - t0;
    if (st != AP_OK) {
        free(lens);
        return rt_fail(c, st, "%s", e.msg);
    }
    double sum = 0;
    if (c->rank == 0) {
        for (int r = 0; r < c->wg->size; r++) {
            double v;
            memcpy(&v, all + (size_t)r * sizeof v, sizeof v);
            sum += v;
        }
        sum /= (double)c->p.gbs * (double)c->s;
    }
    free(all);
    free(lens);
    if (loss) *loss = sum;
    return AP_OK;
}

static void step_begin(ap_rt_session *s, int step) {
    rt_ctx *c = &s->c;
    c->step_index = step;
    c->loss_sum = 0;
    c->d2h_bytes = c->h2d_bytes = 0;
    c->t_fwd = c->t_bwd = c->t_comm = c->t_opt = 0;
    rt_mem_step_begin(&c->mem, c->world->wtime());
    if (s->grads_dirty) {
        rt_zero_reset(c);
        s->grads_dirty = 0;
    }
}

/* Wait until the step's buffered sends have left, so the pool starts the next step empty. */
static ap_status drain_pool(rt_ctx *c) {
    if (!c->pool) return AP_OK;
    ap_err e = {{0}};
    double t0 = c->world->wtime();
    ap_status st = c->world->attach_pool(c->world, NULL, 0, &e);
    if (st == AP_OK) st = c->world->attach_pool(c->world, c->pool, c->pool_bytes, &e);
    c->t_comm += c->world->wtime() - t0;
    return st == AP_OK ? AP_OK : rt_fail(c, st, "%s", e.msg);
}

ap_status ap_rt_session_step(ap_rt_session *s, int step, double *loss, ap_err *err) {
    rt_ctx *c = &s->c;
    double t0 = c->world->wtime();
    step_begin(s, step);
    run_passes(s);
    if (c->st == AP_OK) {
        phase ph = phase_begin(c);
        rt_zero_update(c);
        rt_zero_reset(c);
        phase_end(c, ph, &c->t_opt);
    }
    if (c->st == AP_OK) drain_pool(c);
    double l = 0;
    if (c->st == AP_OK) reduce_loss(s, &l);
    rt_mem_step_end(&c->mem, c->world->wtime());
    if (c->st != AP_OK) return ap_err_set(err, c->st, "%s", s->err.msg);
    if (c->mem.oom) return ap_err_set(err, AP_ERR_NOMEM, "rank %d: out of memory", c->rank);
    if (loss) *loss = l;
    double step_s = c->world->wtime() - t0;
    /* the first step pays for first touches of every buffer: measure the rest when there are */
    if (step > 0 || s->job.steps == 1) {
        s->sum.forward_s += c->t_fwd;
        s->sum.backward_s += c->t_bwd;
        s->sum.comm_s += c->t_comm;
        s->sum.optimizer_s += c->t_opt;
        s->sum.step_s += step_s;
        s->measured++;
    }
    return AP_OK;
}

ap_status ap_rt_session_loss_grad(ap_rt_session *s, int step, double *loss, ap_err *err) {
    rt_ctx *c = &s->c;
    step_begin(s, step);
    run_passes(s);
    if (c->st == AP_OK) drain_pool(c);
    double l = 0;
    if (c->st == AP_OK) reduce_loss(s, &l);
    s->grads_dirty = 1;
    rt_mem_step_end(&c->mem, c->world->wtime());
    if (c->st != AP_OK) return ap_err_set(err, c->st, "%s", s->err.msg);
    if (loss) *loss = l;
    return AP_OK;
}

/* ---- reports --------------------------------------------------------------------------------- */

static void fill_rank_report(ap_rt_session *s, ap_rt_rank_report *r) {
    rt_ctx *c = &s->c;
    memset(r, 0, sizeof *r);
    r->rank = c->rank;
    r->stage = c->stage;
    r->tp_rank = c->tp_rank;
    r->dp_rank = c->dp_rank;
    r->peak_bytes = c->mem.peak;
    memcpy(r->peak_cat_bytes, c->mem.peak_cat, sizeof r->peak_cat_bytes);
    memcpy(r->cat_peak_bytes, c->mem.cat_peak, sizeof r->cat_peak_bytes);
    r->host_peak_bytes = c->mem.cat_peak[RT_HOST_CAT];
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) r->rss_peak_bytes = (int64_t)ru.ru_maxrss * 1024;
    r->d2h_bytes = c->d2h_bytes;
    r->h2d_bytes = c->h2d_bytes;
    if (s->measured > 0) {
        double n = s->measured;
        r->time.forward_s = s->sum.forward_s / n;
        r->time.backward_s = s->sum.backward_s / n;
        r->time.comm_s = s->sum.comm_s / n;
        r->time.optimizer_s = s->sum.optimizer_s / n;
        r->time.step_s = s->sum.step_s / n;
    }
    r->nops = c->mem.nops;
    r->ops = c->mem.ops;     /* borrowed: copied by the JSON */
    r->nevents = c->mem.nev;
    r->events = c->mem.ev;
}

/* Gather every rank's report on world rank 0 (as JSON text). */
static ap_status gather_report(ap_rt_session *s, ap_rt_report *out) {
    rt_ctx *c = &s->c;
    memset(out, 0, sizeof *out);
    ap_rt_report mine;
    memset(&mine, 0, sizeof mine);
    ap_rt_rank_report rr;
    fill_rank_report(s, &rr);
    mine.nranks = 1;
    mine.ranks = &rr;
    ap_json *j = ap_rt_report_to_json(&mine);
    char *text = j ? ap_json_print(j, 0) : NULL;
    ap_json_free(j);
    if (!text) return rt_fail(c, AP_ERR_NOMEM, "out of memory writing the report");
    int W = c->wg->size;
    int64_t *lens = calloc((size_t)W, sizeof *lens);
    char *all = NULL;
    ap_err e = {{0}};
    ap_status st = lens ? c->wg->ops->gatherv(c->wg, text, (int64_t)strlen(text), &all, lens, &e)
                        : ap_err_set(&e, AP_ERR_NOMEM, "out of memory");
    free(text);
    if (st != AP_OK) {
        free(lens);
        return rt_fail(c, st, "%s", e.msg);
    }
    if (c->rank == 0) {
        out->nranks = W;
        out->ranks = calloc((size_t)W, sizeof *out->ranks);
        out->loss = calloc((size_t)(s->job.steps > 0 ? s->job.steps : 1), sizeof *out->loss);
        if (!out->ranks || !out->loss) st = rt_fail(c, AP_ERR_NOMEM, "out of memory");
        int64_t off = 0;
        for (int r = 0; r < W && st == AP_OK; r++) {
            ap_json *rj = ap_json_parse(all + off, (size_t)lens[r], "rank report", &e);
            ap_rt_report one;
            memset(&one, 0, sizeof one);
            st = rj ? ap_rt_report_from_json(rj, "rank report", &one, &e) : AP_ERR_INTERNAL;
            ap_json_free(rj);
            if (st == AP_OK && one.nranks == 1) {
                out->ranks[r] = one.ranks[0];
                memset(&one.ranks[0], 0, sizeof one.ranks[0]); /* moved */
            } else if (st == AP_OK) {
                st = AP_ERR_INTERNAL;
            }
            ap_rt_report_free(&one);
            off += lens[r];
            if (st != AP_OK) rt_fail(c, st, "rank %d report: %s", r, e.msg);
        }
        out->steps = s->job.steps;
        if (out->loss) memcpy(out->loss, s->loss, (size_t)s->job.steps * sizeof *out->loss);
        snprintf(out->backend, sizeof out->backend, "%s", c->k->name);
        out->hostfig = s->host;
    }
    free(all);
    free(lens);
    return c->st;
}

ap_status ap_rt_session_train(ap_rt_session *s, ap_rt_report *out, ap_err *err) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < s->job.steps; i++) {
        double l = 0;
        ap_status st = ap_rt_session_step(s, i, &l, err);
        if (st != AP_OK) return st;
        s->loss[i] = l;
        s->steps_done++;
    }
    ap_status st = gather_report(s, out);
    if (st != AP_OK) {
        ap_rt_report_free(out);
        return ap_err_set(err, st, "%s", s->err.msg);
    }
    return AP_OK;
}

ap_status ap_rt_session_bench(ap_rt_session *s, ap_err *err) {
    ap_status st = rt_bench(&s->c, &s->host);
    if (st != AP_OK) return ap_err_set(err, st, "%s", s->err.msg);
    return AP_OK;
}

/* ---- canonical parameters ---------------------------------------------------------------------- */

/* This rank's contribution to the canonical vector: per tensor block (canon, row0, col0, rows,
 * cols) and its values, as doubles. Only dp rank 0 contributes (the dp ranks hold the same). */
static ap_status pack_units(rt_ctx *c, int which, double **buf, int64_t *len) {
    int64_t cap = 0;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue;
        cap += u->n + 5 * u->nt;
    }
    *buf = malloc((size_t)(cap > 0 ? cap : 1) * sizeof **buf);
    if (!*buf) return rt_fail(c, AP_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue;
        double *full = malloc((size_t)u->n * sizeof *full);
        if (!full) return rt_fail(c, AP_ERR_NOMEM, "out of memory");
        /* collective over the dp group: every dp rank takes part */
        ap_status st = rt_zero_full(c, u, which, full);
        if (st != AP_OK) {
            free(full);
            return st;
        }
        if (c->dp_rank == 0) {
            for (int t = 0; t < u->nt; t++) {
                const rt_tdesc *d = &u->t[t];
                /* the tied head's copy equals the embedding's matrix: sent once, by stage 0 */
                if (u->kind == RT_UNIT_HEAD && !strcmp(d->name, "wte")) continue;
                (*buf)[k++] = d->canon;
                (*buf)[k++] = (double)d->row0;
                (*buf)[k++] = (double)d->col0;
                (*buf)[k++] = (double)d->rows;
                (*buf)[k++] = (double)d->cols;
                memcpy(*buf + k, full + d->off, (size_t)(d->rows * d->cols) * sizeof **buf);
                k += d->rows * d->cols;
            }
        }
        free(full);
    }
    *len = k;
    return AP_OK;
}

ap_status ap_rt_session_gather(ap_rt_session *s, int which, double *out, ap_err *err) {
    rt_ctx *c = &s->c;
    double *mine = NULL;
    int64_t len = 0;
    if (pack_units(c, which, &mine, &len) != AP_OK) {
        free(mine);
        return ap_err_set(err, c->st, "%s", s->err.msg);
    }
    int W = c->wg->size;
    int64_t *lens = calloc((size_t)W, sizeof *lens);
    char *all = NULL;
    ap_err e = {{0}};
    ap_status st = lens ? c->wg->ops->gatherv(c->wg, mine, len * (int64_t)sizeof(double), &all,
                                              lens, &e)
                        : ap_err_set(&e, AP_ERR_NOMEM, "out of memory");
    free(mine);
    if (st == AP_OK && c->rank == 0) {
        /* offsets of the canonical tensors */
        int nt = ap_rt_tensor_count(&c->m);
        int64_t *coff = malloc((size_t)nt * sizeof *coff), *ccols = malloc((size_t)nt * sizeof *ccols);
        if (!coff || !ccols) {
            st = ap_err_set(&e, AP_ERR_NOMEM, "out of memory");
        } else {
            int64_t off = 0;
            for (int i = 0; i < nt; i++) {
                ap_rt_tensor_info ti;
                ap_rt_tensor_at(&c->m, i, &ti);
                coff[i] = off;
                ccols[i] = ti.cols;
                off += ti.rows * ti.cols;
            }
            const double *p = (const double *)all;
            int64_t total = 0;
            for (int r = 0; r < W; r++) total += lens[r] / (int64_t)sizeof(double);
            for (int64_t q = 0; q + 5 <= total;) {
                int canon = (int)p[q];
                int64_t row0 = (int64_t)p[q + 1], col0 = (int64_t)p[q + 2];
                int64_t rows = (int64_t)p[q + 3], cols = (int64_t)p[q + 4];
                q += 5;
                for (int64_t i = 0; i < rows; i++)
                    memcpy(out + coff[canon] + (row0 + i) * ccols[canon] + col0, p + q + i * cols,
                           (size_t)cols * sizeof *out);
                q += rows * cols;
            }
        }
        free(coff);
        free(ccols);
    }
    free(all);
    free(lens);
    if (st != AP_OK) return ap_err_set(err, st, "rank %d: %s", c->rank, e.msg);
    return AP_OK;
}

ap_status ap_rt_session_set_param(ap_rt_session *s, int64_t index, double value, ap_err *err) {
    rt_ctx *c = &s->c;
    if (c->wg->size != 1)
        return ap_err_set(err, AP_ERR_INPUT, "set_param: single-rank sessions only");
    int nt = ap_rt_tensor_count(&c->m);
    int64_t off = 0;
    int canon = -1;
    int64_t row = 0, col = 0;
    for (int i = 0; i < nt; i++) {
        ap_rt_tensor_info ti;
        ap_rt_tensor_at(&c->m, i, &ti);
        if (index < off + ti.rows * ti.cols) {
            canon = i;
            row = (index - off) / ti.cols;
            col = (index - off) % ti.cols;
            break;
        }
        off += ti.rows * ti.cols;
    }
    if (canon < 0) return ap_err_set(err, AP_ERR_INPUT, "set_param: index %lld out of range",
                                     (long long)index);
    rt_real v = (rt_real)value;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue;
        for (int t = 0; t < u->nt; t++) {
            const rt_tdesc *d = &u->t[t];
            if (d->canon != canon) continue;
            int64_t e = d->off + row * d->cols + col;
            rt_real *dst = c->p.zero == 3 ? u->wshard : u->w;
            c->k->upload(dst + e, &v, RT_ELEM);
        }
    }
    return AP_OK;
}

ap_status ap_rt_session_save(ap_rt_session *s, const char *path, ap_err *err) {
    rt_ctx *c = &s->c;
    int64_t n = ap_rt_param_count(&c->m);
    double *all = c->rank == 0 ? malloc((size_t)n * sizeof *all) : NULL;
    if (c->rank == 0 && !all) return ap_err_set(err, AP_ERR_NOMEM, "out of memory saving");
    ap_status st = ap_rt_session_gather(s, 0, all, err);
    if (st != AP_OK || c->rank != 0) {
        free(all);
        return st;
    }
    /* header line, then float32 little endian */
    ap_json *h = ap_json_new_object(), *arr = ap_json_new_array();
    int ok = h && arr && ap_json_add_string(h, "format", "autoplan-params/1") == AP_OK &&
             ap_json_add_string(h, "dtype", "f32") == AP_OK;
    int nt = ap_rt_tensor_count(&c->m);
    for (int i = 0; ok && i < nt; i++) {
        ap_rt_tensor_info ti;
        ap_rt_tensor_at(&c->m, i, &ti);
        ap_json *o = ap_json_new_object();
        ok = o && ap_json_add_string(o, "name", ti.name) == AP_OK &&
             ap_json_add_number(o, "rows", (double)ti.rows) == AP_OK &&
             ap_json_add_number(o, "cols", (double)ti.cols) == AP_OK &&
             ap_json_add_number(o, "offset", (double)ti.offset) == AP_OK &&
             ap_json_push(arr, o) == AP_OK;
        if (!ok) ap_json_free(o);
    }
    if (ok) ok = ap_json_add(h, "tensors", arr) == AP_OK;
    else ap_json_free(arr);
    char *text = ok ? ap_json_print(h, 0) : NULL;
    ap_json_free(h);
    size_t tl = text ? strlen(text) : 0;
    unsigned char *blob = text ? malloc(tl + 1 + (size_t)n * 4) : NULL;
    if (!blob) {
        free(text);
        free(all);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory saving");
    }
    memcpy(blob, text, tl);
    blob[tl] = '\n';
    for (int64_t i = 0; i < n; i++) {
        float f = (float)all[i];
        uint32_t u;
        memcpy(&u, &f, 4);
        unsigned char *q = blob + tl + 1 + i * 4;
        q[0] = (unsigned char)(u & 0xff);
        q[1] = (unsigned char)((u >> 8) & 0xff);
        q[2] = (unsigned char)((u >> 16) & 0xff);
        q[3] = (unsigned char)(u >> 24);
    }
    st = ap_write_file_atomic(path, blob, tl + 1 + (size_t)n * 4, err);
    free(blob);
    free(text);
    free(all);
    return st;
}
