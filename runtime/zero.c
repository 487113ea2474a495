/*
 * zero.c - model states under the plan's ZeRO stage (Rajbhandari et al. 2020, "ZeRO", Sec. 5):
 * where each unit's parameters, gradients and AdamW states live, the ZeRO-3 gathers around every
 * pass, the gradient reduction once per step, the optimizer step with optional offload of the
 * optimizer states to the host pool, and the parameter all-gather after it.
 *
 *   ZeRO-0  full parameters, gradients and states on every data-parallel rank; gradients
 *           all-reduced.
 *   ZeRO-1  AdamW states sharded: gradients reduce-scattered in place, each rank updates its
 *           shard of the parameters, the shards are all-gathered.
 *   ZeRO-2  as 1, and the full gradient buffer is freed after its reduce-scatter; only the owned
 *           shard lives from then to the update.
 *   ZeRO-3  parameters sharded too: before a unit's forward and again before its backward its
 *           parameters are all-gathered into a temporary full copy, freed after the pass.
 * Flat unit buffers are padded to a multiple of dp so every shard has the same size (DeepSpeed
 * pads its flat partitions the same way). Gradients accumulate locally over the step's
 * micro-batches and are reduced once, after the last micro-batch's backward of each unit (the
 * reduction is a sum in rank order, comm_mpi.c, so every stage computes bitwise the same
 * gradients); AdamW is element-wise, so the update is bitwise the same whatever the sharding or
 * offload.
 *
 * Offload (ZeRO-Offload, Ren et al. 2021): the first `off` elements of each shard keep m and v in
 * the host pool; at the step their gradients and parameters are copied to host buffers, updated
 * there and the parameters copied back, every copy counted (d2h, h2d bytes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"

#define PAR AP_RT_CAT_PARAMS
#define GRD AP_RT_CAT_GRADS
#define OPT AP_RT_CAT_OPTIMIZER

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A unit of a tied embedding split over the first and last stage: reduced at the step's end. */
static int deferred(const rt_ctx *c, const rt_unit *u) {
    return c->tieg && (u->kind == RT_UNIT_EMBED || u->kind == RT_UNIT_HEAD);
}

/* Initialise unit elements [lo, hi) into dst (backend memory) through a host staging buffer. */
static ap_status init_range(rt_ctx *c, rt_unit *u, rt_real *dst, int64_t lo, int64_t hi) {
    int64_t chunk = 1 << 16;
    rt_real *stage = malloc((size_t)chunk * sizeof *stage);
    if (!stage) return rt_fail(c, AP_ERR_NOMEM, "out of memory initialising parameters");
    for (int64_t a = lo; a < hi; a += chunk) {
        int64_t b = a + chunk < hi ? a + chunk : hi;
        rt_model_init_unit(c, u, stage, a, b);
        c->k->upload(dst + (a - lo), stage, (b - a) * RT_ELEM);
    }
    free(stage);
    return AP_OK;
}

ap_status rt_zero_setup(rt_ctx *c) {
    int z = c->p.zero, D = c->dp;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue; /* a unit that is not on this rank */
        u->npad = z >= 1 ? cdiv(u->n, D) * D : u->n;
        u->shard = z >= 1 ? u->npad / D : u->n;
        u->off = (int64_t)llround(c->p.offload_optimizer * (double)u->shard);
        if (u->off > u->shard) u->off = u->shard;
        int layer = u->layer;
        if (z < 3) {
            u->w = rt_alloc(c, PAR, AP_SIM_T_WEIGHT, layer, -1, u->npad);
            if (!u->w || init_range(c, u, u->w, 0, u->n) != AP_OK) return c->st;
        } else {
            u->wshard = rt_alloc(c, PAR, AP_SIM_T_WEIGHT, layer, -1, u->shard);
            int64_t lo = (int64_t)c->dp_rank * u->shard, hi = lo + u->shard;
            if (hi > u->n) hi = u->n;
            if (!u->wshard || (lo < hi && init_range(c, u, u->wshard, lo, hi) != AP_OK))
                return c->st;
        }
        if (z <= 1 && !(u->g = rt_alloc(c, GRD, AP_SIM_T_GRAD, layer, -1, u->npad))) return c->st;
        int64_t dev = u->shard - u->off;
        if (dev > 0) {
            u->m = rt_alloc(c, OPT, AP_SIM_T_OPTIM, layer, -1, dev);
            u->v = u->m ? rt_alloc(c, OPT, AP_SIM_T_OPTIM, layer, -1, dev) : NULL;
            if (!u->v) return c->st;
        }
        if (u->off > 0) {
            u->mh = rt_alloc(c, RT_HOST_CAT, AP_SIM_T_OPTIM, layer, -1, u->off);
            u->vh = u->mh ? rt_alloc(c, RT_HOST_CAT, AP_SIM_T_OPTIM, layer, -1, u->off) : NULL;
            if (!u->vh) return c->st;
        }
    }
    return AP_OK;
}

/* ---- ZeRO-3 gathers ------------------------------------------------------------------------- */

ap_status rt_zero_pre(rt_ctx *c, rt_unit *u, int mb) {
    if (c->p.zero < 3) return AP_OK;
    if (u->w) {
        u->gather_refs++;
        return AP_OK;
    }
    rt_mem_op(&c->mem, AP_SIM_OP_GATHER, u->chunk, u->layer, mb, c->world->wtime());
    u->w = rt_alloc(c, AP_RT_CAT_TEMPS, AP_SIM_T_WEIGHT_GATHERED, u->layer, mb, u->npad);
    if (!u->w) return c->st;
    c->k->copy(u->w + (int64_t)c->dp_rank * u->shard, u->wshard, u->shard * RT_ELEM);
    u->gather_refs = 1;
    return rt_c_allgather(c, c->dpg, u->w, u->shard);
}

void rt_zero_post(rt_ctx *c, rt_unit *u) {
    if (c->p.zero < 3 || !u->w) return;
    if (--u->gather_refs > 0) return;
    rt_free(c, u->w);
    u->w = NULL;
    u->gather_refs = 0;
}

/* ---- gradients ---------------------------------------------------------------------------- */

ap_status rt_zero_grad_begin(rt_ctx *c, rt_unit *u, int mb) {
    (void)mb;
    if (u->g) return AP_OK;
    u->g = rt_alloc(c, GRD, AP_SIM_T_GRAD, u->layer, -1, u->npad);
    return u->g ? AP_OK : c->st;
}

/* The data-parallel part of a unit's reduction. */
static ap_status reduce_dp(rt_ctx *c, rt_unit *u) {
    int z = c->p.zero;
    if (z == 0) return c->dp > 1 ? rt_c_allreduce(c, c->dpg, u->g, u->n, RT_OP_SUM) : AP_OK;
    if (z == 1)
        return rt_c_reduce_scatter(c, c->dpg, u->g, u->g + (int64_t)c->dp_rank * u->shard,
                                   u->shard);
    u->gshard = rt_alloc(c, GRD, AP_SIM_T_GRAD_SHARD, u->layer, -1, u->shard);
    if (!u->gshard) return c->st;
    ap_status st = rt_c_reduce_scatter(c, c->dpg, u->g, u->gshard, u->shard);
    rt_free(c, u->g);
    u->g = NULL;
    return st;
}

/* Sequence parallelism leaves the replicated parameters' gradients partial over the tp ranks
 * (each saw its row block): sum them (Megatron allreduce of "sequence_parallel" grads). */
static ap_status reduce_sp(rt_ctx *c, rt_unit *u) {
    if (!c->sp || u->n_rep == 0) return AP_OK;
    return rt_c_allreduce(c, c->tpg, u->g + (u->n - u->n_rep), u->n_rep, RT_OP_SUM);
}

ap_status rt_zero_grad_end(rt_ctx *c, rt_unit *u, int mb) {
    u->bwd_done++;
    if (u->bwd_done != c->m_mb || deferred(c, u)) return AP_OK;
    rt_mem_op(&c->mem, AP_SIM_OP_GRAD_REDUCE, u->chunk, u->layer, mb, c->world->wtime());
    ap_status st = reduce_sp(c, u);
    return st == AP_OK ? reduce_dp(c, u) : st;
}

ap_status rt_zero_finish_grads(rt_ctx *c) {
    if (!c->tieg) return AP_OK;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0 || !deferred(c, u)) continue;
        rt_mem_op(&c->mem, AP_SIM_OP_GRAD_REDUCE, u->chunk, u->layer, -1, c->world->wtime());
        ap_status st = reduce_sp(c, u);
        /* the two copies of the tied matrix get the sum of both gradients, first stage first
           (Megatron's embedding group all-reduce) */
        int64_t off = u->kind == RT_UNIT_EMBED ? u->o[S_WTE] : u->o[S_LMH];
        if (st == AP_OK)
            st = rt_c_allreduce(c, c->tieg, u->g + off, c->VL * c->h, RT_OP_SUM);
        if (st == AP_OK) st = reduce_dp(c, u);
        if (st != AP_OK) return st;
    }
    return AP_OK;
}

/* ---- the update --------------------------------------------------------------------------- */

ap_status rt_zero_update(rt_ctx *c) {
    const rt_kernels *k = c->k;
    int z = c->p.zero;
    c->step_t++;
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue;
        int64_t r0 = (int64_t)c->dp_rank * u->shard;
        rt_real *p = z == 3 ? u->wshard : z >= 1 ? u->w + r0 : u->w;
        rt_real *g = z >= 2 ? u->gshard : z == 1 ? u->g + r0 : u->g;
        int64_t nel = u->shard, off = u->off;
        if (off > 0) {
            rt_mem_op(&c->mem, AP_SIM_OP_OFFLOAD, u->chunk, u->layer, -1, c->world->wtime());
            rt_real *gh = rt_alloc(c, RT_HOST_CAT, AP_SIM_T_OPTIM_TEMP, u->layer, -1, off);
            rt_real *ph = gh ? rt_alloc(c, RT_HOST_CAT, AP_SIM_T_OPTIM_TEMP, u->layer, -1, off)
                             : NULL;
            if (!ph) return c->st;
            k->download(gh, g, off * RT_ELEM);
            k->download(ph, p, off * RT_ELEM);
            c->d2h_bytes += 2 * off * RT_ELEM;
            rt_adamw_host(off, ph, gh, u->mh, u->vh, &c->job->optim, c->step_t);
            k->upload(p, ph, off * RT_ELEM);
            c->h2d_bytes += off * RT_ELEM;
            rt_free(c, ph);
            rt_free(c, gh);
        }
        if (nel > off) {
            rt_mem_op(&c->mem, AP_SIM_OP_OPTIMIZER, u->chunk, u->layer, -1, c->world->wtime());
            k->adamw(nel - off, p + off, g + off, u->m, u->v, &c->job->optim, c->step_t);
        }
    }
    if ((z == 1 || z == 2) && c->dp > 1) {
        for (int i = 0; i < c->nunits; i++) {
            rt_unit *u = &c->units[i];
            if (u->n == 0) continue;
            rt_mem_op(&c->mem, AP_SIM_OP_GATHER, u->chunk, u->layer, -1, c->world->wtime());
            ap_status st = rt_c_allgather(c, c->dpg, u->w, u->shard);
            if (st != AP_OK) return st;
        }
    }
    return AP_OK;
}

void rt_zero_reset(rt_ctx *c) {
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n == 0) continue;
        u->bwd_done = 0;
        if (c->p.zero <= 1) {
            c->k->zero(u->g, u->npad * RT_ELEM);
        } else {
            rt_free(c, u->gshard);
            u->gshard = NULL;
            rt_free(c, u->g); /* only when a step stopped before its reduction */
            u->g = NULL;
        }
    }
}

/* ---- full copies for the canonical gather --------------------------------------------------- */

ap_status rt_zero_full(rt_ctx *c, rt_unit *u, int which, double *out) {
    const rt_kernels *k = c->k;
    int z = c->p.zero;
    int64_t r0 = (int64_t)c->dp_rank * u->shard;
    /* the source: a full buffer, or a shard to all-gather into a scratch copy */
    const rt_real *full = NULL, *shard = NULL;
    if (which == 0) {
        if (z < 3) full = u->w;
        else shard = u->wshard;
    } else {
        if (z == 0) full = u->g;
        else if (z == 1) shard = u->g + r0;
        else shard = u->gshard;
    }
    rt_real *tmp = NULL;
    if (!full) {
        if (!shard) return rt_fail(c, AP_ERR_INTERNAL, "no reduced gradients to gather");
        tmp = k->alloc(u->npad * RT_ELEM);
        if (!tmp) return rt_fail(c, AP_ERR_NOMEM, "out of memory gathering a unit");
        k->copy(tmp + r0, shard, u->shard * RT_ELEM);
        ap_status st = rt_c_allgather(c, c->dpg, tmp, u->shard);
        if (st != AP_OK) {
            k->release(tmp);
            return st;
        }
        full = tmp;
    }
    rt_real *host = malloc((size_t)(u->n > 0 ? u->n : 1) * sizeof *host);
    if (!host) {
        if (tmp) k->release(tmp);
        return rt_fail(c, AP_ERR_NOMEM, "out of memory gathering a unit");
    }
    k->download(host, full, u->n * RT_ELEM);
    for (int64_t i = 0; i < u->n; i++) out[i] = host[i];
    free(host);
    if (tmp) k->release(tmp);
    return AP_OK;
}
