/*
 * stagecost.c - per-stage costs for the partitioner, read off the cost model (stagecost.h).
 *
 * ap_stage_cost_eval builds a plan in which rank r holds exactly the asked-for range: the uniform
 * split when the range is rank r's share of it, else explicit stage_layers with the layers
 * before it all on rank 0 and those after it all on the last rank (the
 * cost model prices every rank from its own layers only, so where the others go does not change
 * rank r) and calls ap_estimate_plan. It does not re-derive any formula: memory and time are
 * estimate.c's. The table memoises by (rank, dense layers, MoE layers) so a partition search
 * over all ranges costs at most pp x (dense + 1) x (MoE + 1) estimates, pp x (L + 1) for a dense
 * model. A table's estimates run through its plan's estimate prepared once (estimate_int.h
 * ap_est_prep): the same figures, the plan-wide part not redone per range.
 */
#include "autoplan/stagecost.h"
#include "estimate_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Every stage time and memory figure of e finite (of the ranks asked for). */
static ap_status stage_finite(const ap_estimate_opts *opts, const ap_estimate *e, ap_err *err) {
    const unsigned char *only = opts ? opts->ranks_only : NULL;
    for (int r = 0; r < e->nstages; r++)
        if ((!only || only[r]) &&
            (!isfinite(e->time.stage_fwd_s[r]) || !isfinite(e->time.stage_bwd_s[r]) ||
             !isfinite(e->stages[r].device_bytes) || !isfinite(e->stages[r].host_bytes)))
            return ap_err_set(err, AP_ERR_INTERNAL, "cost model: stage %d of a %d-stage plan has "
                              "a non-finite time or memory", r, e->nstages);
    if (!only && !isfinite(e->time.step_s))
        return ap_err_set(err, AP_ERR_INTERNAL, "cost model: non-finite step time");
    return AP_OK;
}

ap_status ap_stage_estimate(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                            const ap_estimate_opts *opts, ap_estimate *e, ap_err *err) {
    ap_status st = ap_estimate_plan(m, c, p, opts, e, err);
    return st == AP_OK ? stage_finite(opts, e, err) : st;
}

/* ap_stage_estimate of e->plan, through the prepared estimate when there is one (e->plan then
 * differs from its plan in the layout only, and opts asks for some ranks). */
static ap_status estimate_in(const ap_model *m, const ap_cluster *c, const ap_est_prep *prep,
                             const ap_estimate_opts *opts, ap_estimate *e, ap_err *err) {
    if (!prep) return ap_stage_estimate(m, c, &e->plan, opts, e, err);
    ap_status st = ap_est_prep_ranks(prep, opts, e, err);
    return st == AP_OK ? stage_finite(opts, e, err) : st;
}

int ap_stage_chunk_layers(int n, int v, int k) {
    if (v < 1) return n;
    return n / v + (k < n % v ? 1 : 0);
}

/* The cost of rank r read off an estimate: its times, memory and the verdict estimate.c gives
 * a plan, applied to this rank alone: device peak plus headroom within capacity; host: the
 * node's GPUs each hold this much, within 90% of the node's CPU memory (estimate.c host_fits). */
static void rank_cost(const ap_cluster *c, const ap_estimate *e, int r, ap_stage_cost *out) {
    const ap_stage_mem *sm = &e->stages[r];
    out->fwd_s = e->time.stage_fwd_s[r];
    out->bwd_s = e->time.stage_bwd_s[r];
    out->device_bytes = sm->device_bytes;
    out->host_bytes = sm->host_bytes;
    /* the verdict estimate.c gives a plan, applied to this rank alone: device peak plus
     * headroom within capacity; host: the node's GPUs each hold this much, within 90% of the
     * node's CPU memory (estimate.c host_fits) */
    int gpn = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
    double host_node = sm->host_bytes * gpn;
    int host_ok = host_node <= 0 || host_node <= 0.9 * c->cpu_mem_bytes;
    out->host_ok = host_ok;
    out->fits = sm->device_bytes + e->headroom_bytes <= e->capacity_bytes && host_ok;
}

/* *q = *p where q's chunk arrays past p's pp x vp chunks already hold p's (a table's plan
 * copy, primed in full once): the scalars and the chunks a layout uses. The plan is 4.4 kB,
 * nearly all of it the two AP_MAX_CHUNKS arrays, and a table copies it for each estimate. */
static void plan_copy_used(ap_plan *q, const ap_plan *p) {
    size_t n = (size_t)p->pp * (size_t)(p->vp > 1 ? p->vp : 1);
    if (n > AP_MAX_CHUNKS) n = AP_MAX_CHUNKS;
    memcpy(q, p, offsetof(ap_plan, stage_layers));
    memcpy(q->stage_layers, p->stage_layers, n * sizeof *q->stage_layers);
    memcpy(q->stage_recompute, p->stage_recompute, n * sizeof *q->stage_recompute);
    const size_t tail = offsetof(ap_plan, stage_recompute) + sizeof q->stage_recompute;
    memcpy((char *)q + tail, (const char *)p + tail, sizeof *q - tail);
}

/* ap_stage_cost_eval with the plan copy and the estimate in q and e (the callers' scratch);
 * primed: plan_copy_used suffices for q. */
static ap_status cost_eval_in(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                              const ap_estimate_opts *opts, int r, int first, int n,
                              int rc_layers, int primed, const ap_est_prep *prep, ap_plan *q,
                              ap_estimate *e, ap_stage_cost *out, ap_err *err) {
    const int L = (int)m->layers;
    const int v = p->vp > 1 ? p->vp : 1;
    if (v > 1 && !ap_model_single_kind(m))
        return ap_err_set(err, AP_ERR_INPUT, "interleaved stage costs need layers of one kind "
                          "(this model mixes dense and MoE layers)");
    if (v > 1 && rc_layers > 0)
        return ap_err_set(err, AP_ERR_INPUT, "per-stage recompute counts need vp 1");
    if ((int64_t)p->pp * v > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INPUT, "pp*vp = %d exceeds %d chunks", p->pp * v,
                          AP_MAX_CHUNKS);
    if (p->pp < 1 || p->pp > AP_MAX_STAGES || r < 0 || r >= p->pp || first < 0 || n < 0 ||
        first + n > L)
        return ap_err_set(err, AP_ERR_INPUT, "stage %d of %d with layers [%d, %d) of %d: out of "
                          "range", r, p->pp, first, first + n, L);
    if ((r == 0 && first != 0) || (r == p->pp - 1 && first + n != L))
        return ap_err_set(err, AP_ERR_INPUT, "stage %d of %d cannot hold layers [%d, %d) of %d",
                          r, p->pp, first, first + n, L);
    if (primed) plan_copy_used(q, p);
    else *q = *p;
    q->nchunks = 0;
    if (v > 1) {
        /* rank r's chunks r, r + p, ... hold n layers evenly; the other L - n layers sit on one
         * chunk of another rank (the cost model prices rank r from its own chunks only) */
        int uniform = L % (p->pp * v) == 0 && n == L / p->pp;
        if (!uniform) {
            q->nchunks = p->pp * v;
            for (int i = 0; i < q->nchunks; i++) q->stage_layers[i] = 0;
            for (int k = 0; k < v; k++)
                q->stage_layers[r + k * p->pp] = ap_stage_chunk_layers(n, v, k);
            q->stage_layers[r == 0 ? 1 : 0] += L - n;
        }
    } else if (ap_plan_chunk_first_layer(q, L, r) != first || ap_plan_chunk_layers(q, L, r) != n) {
        /* not rank r's share of the uniform split (the only split some trainers accept) */
        q->nchunks = p->pp;
        for (int i = 0; i < p->pp; i++) q->stage_layers[i] = 0;
        q->stage_layers[r] = n;
        if (r > 0) q->stage_layers[0] += first;
        if (r < p->pp - 1) q->stage_layers[p->pp - 1] += L - first - n;
    }
    if (rc_layers > 0) {
        /* per-stage counts are read only from an explicit layout (nchunks = pp) */
        if (!q->nchunks) {
            q->nchunks = p->pp;
            for (int i = 0; i < p->pp; i++) q->stage_layers[i] = ap_plan_chunk_layers(p, L, i);
        }
        q->stage_recompute[r] = rc_layers;
    }
    /* prepared: q is e->plan (the table's scratch) */
    ap_status st = prep ? estimate_in(m, c, prep, opts, e, err)
                        : ap_stage_estimate(m, c, q, opts, e, err);
    if (st == AP_OK) rank_cost(c, e, r, out);
    return st;
}

ap_status ap_stage_cost_eval(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, int r, int first, int n, int rc_layers,
                             ap_stage_cost *out, ap_err *err) {
    /* the plan copy is large (AP_MAX_CHUNKS arrays): keep it off small stacks */
    ap_plan *q = ap_malloc(sizeof *q);
    ap_estimate *e = ap_malloc(sizeof *e);
    ap_status st = q && e ? cost_eval_in(m, c, p, opts, r, first, n, rc_layers, 0, NULL, q, e,
                                         out, err)
                          : ap_err_set(err, AP_ERR_NOMEM, "out of memory evaluating a stage");
    ap_free(q);
    ap_free(e);
    return st;
}

/* ---- the memo ------------------------------------------------------------------------------ */

struct ap_stage_table {
    const ap_model *m;     /* borrowed */
    const ap_cluster *c;
    ap_plan p;
    ap_estimate_opts opts; /* with the GPU's calibration and kernel tables, looked up once */
    ap_estimate_cache *own_cache; /* the layer-price memo when the caller gave none */
    ap_estimate_opts ropts;/* the same pricing the ranks in `only` alone (ranks_only) */
    unsigned char only[AP_MAX_STAGES];
    ap_calib cal;
    struct ap_kernels *built; /* the kernel tables built from opts.profile; NULL: none */
    int has_opts;
    int pp, nd_max, nm_max;
    int *moe_prefix;       /* moe_prefix[i] = MoE layers among [0, i), i = 0..L */
    size_t cells;          /* pp x (nd_max + 1) x (nm_max + 1) */
    ap_stage_cost **cost;  /* [rc + 1][r][nd][nm], rc = -1 (the plan's), 1..L; allocated on use */
    unsigned char **done;
    long evals;
    int single_kind;       /* every layer of one kind (batch fills apply) */
    int dense_prefix;      /* the dense layers all come first, then MoE ones only (DeepSeek's
                              first_k_dense_replace): their number, and batch fills apply to
                              the ranges that start past them; -1 otherwise */
    ap_estimate *e;        /* scratch for the estimates; its plan is theirs (table_scratch) */
    ap_est_prep *prep;     /* the plan's estimate prepared (estimate_int.h); NULL: each estimate
                              does it all (the plan as given is refused) */
};

ap_status ap_stage_table_new(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, ap_stage_table **out, ap_err *err) {
    *out = NULL;
    if (p->pp < 1 || p->pp > AP_MAX_STAGES)
        return ap_err_set(err, AP_ERR_INPUT, "pp %d outside 1..%d", p->pp, AP_MAX_STAGES);
    if (m->layers < 1 || m->layers > AP_MODEL_MAX_LAYERS)
        return ap_err_set(err, AP_ERR_INPUT, "model has %lld layers", (long long)m->layers);
    ap_stage_table *t = ap_malloc(sizeof *t);
    if (!t) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the stage table");
    /* cleared but for the plan (4.4 kB), which is copied in: a table is made for each
     * partition solve's variant */
    const size_t past_p = offsetof(ap_stage_table, p) + sizeof t->p;
    memset(t, 0, offsetof(ap_stage_table, p));
    memset((char *)t + past_p, 0, sizeof *t - past_p);
    t->m = m;
    t->c = c;
    t->p = *p;
    if (opts) t->opts = *opts;
    else ap_estimate_opts_init(&t->opts);
    t->has_opts = 1;
    /* every entry prices the same layer shape: a memo of it (NULL: none), the caller's or the
     * table's own */
    if (!t->opts.cache) t->opts.cache = t->own_cache = ap_estimate_cache_new();
    /* the GPU's calibration and kernel tables, which each entry's estimate would look up */
    ap_estimate_opts_resolve(&t->opts, &c->gpu, &t->cal, &t->built);
    t->ropts = t->opts;
    t->ropts.ranks_only = t->only;
    t->pp = p->pp;
    int L = (int)m->layers;
    t->moe_prefix = ap_malloc(sizeof(int) * (size_t)(L + 1));
    t->cost = ap_calloc((size_t)L + 1, sizeof *t->cost);
    t->done = ap_calloc((size_t)L + 1, sizeof *t->done);
    if (!t->moe_prefix || !t->cost || !t->done) {
        ap_stage_table_free(t);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the stage table");
    }
    t->moe_prefix[0] = 0;
    for (int i = 0; i < L; i++)
        t->moe_prefix[i + 1] =
            t->moe_prefix[i] + (m->moe.experts > 0 && ap_model_layer_is_moe(m, i));
    t->nm_max = t->moe_prefix[L];
    t->nd_max = L - t->nm_max;
    t->single_kind = t->nm_max == 0 || t->nd_max == 0;
    t->dense_prefix = ap_model_dense_prefix(m);
    t->cells = (size_t)t->pp * (size_t)(t->nd_max + 1) * (size_t)(t->nm_max + 1);
    *out = t;
    return AP_OK;
}

void ap_stage_table_free(ap_stage_table *t) {
    if (!t) return;
    int L = (int)t->m->layers;
    for (int i = 0; i <= L && t->cost; i++) ap_free(t->cost[i]);
    for (int i = 0; i <= L && t->done; i++) ap_free(t->done[i]);
    ap_free(t->cost);
    ap_free(t->done);
    ap_free(t->moe_prefix);
    ap_free(t->e);
    ap_est_prep_free(t->prep);
    ap_free(t->built);
    ap_estimate_cache_free(t->own_cache);
    ap_free(t);
}

/* The table's estimate for its estimates, with their plan, allocated on first use. */
static ap_status table_scratch(ap_stage_table *t, ap_err *err) {
    if (t->e) return AP_OK;
    /* the plan's estimate prepared once: each range then costs its ranks' pricing only. The
     * table's plan becomes the normalised one (what each estimate made of it before); a plan
     * the estimate refuses as given keeps the whole estimate per range */
    ap_err perr;
    ap_status pst = ap_est_prep_new(t->m, t->c, &t->p, &t->opts, &t->prep, &perr);
    if (pst == AP_ERR_NOMEM) {
        *err = perr;
        return pst;
    }
    if (t->prep) t->p = *ap_est_prep_plan(t->prep);
    if (!(t->e = ap_malloc(sizeof *t->e)))
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the stage table");
    /* the estimates' plan is the estimate's own (ap_estimate_plan then copies nothing), primed
     * with the table's plan in full: later copies take the chunks a layout uses */
    t->e->plan = t->p;
    return AP_OK;
}

/* The memo slot of a range of n layers recomputing rc_layers: the cost model recomputes
 * min(count, n) layers of the stage (estimate.c n_rc_full); slot 0 is the plan's own. */
static int slot_of(int n, int rc_layers, int *rc) {
    *rc = rc_layers > 0 ? (rc_layers < n ? rc_layers : n) : -1;
    return *rc > 0 ? *rc : 0;
}

/* The cell of rank r holding nd dense and nm MoE layers within a slot. */
static size_t cell_at(const ap_stage_table *t, int r, int nd, int nm) {
    return ((size_t)r * (size_t)(t->nd_max + 1) + (size_t)nd) * (size_t)(t->nm_max + 1) +
           (size_t)nm;
}

/* Slot `slot`'s arrays, allocated on first use. */
static ap_status slot_alloc(ap_stage_table *t, int slot, ap_err *err) {
    if (t->cost[slot]) return AP_OK;
    t->cost[slot] = ap_malloc(t->cells * sizeof **t->cost);
    t->done[slot] = ap_calloc(t->cells, 1);
    if (t->cost[slot] && t->done[slot]) return AP_OK;
    ap_free(t->cost[slot]);
    ap_free(t->done[slot]);
    t->cost[slot] = NULL;
    t->done[slot] = NULL;
    return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the stage table");
}

ap_status ap_stage_table_get(ap_stage_table *t, int r, int first, int n, int rc_layers,
                              const ap_stage_cost **out, ap_err *err) {
    *out = NULL;
    int L = (int)t->m->layers;
    if (r < 0 || r >= t->pp || first < 0 || n < 0 || first + n > L)
        return ap_err_set(err, AP_ERR_INPUT, "stage %d with layers [%d, %d): out of range", r,
                          first, first + n);
    int rc, slot = slot_of(n, rc_layers, &rc);
    ap_status ast = slot_alloc(t, slot, err);
    if (ast != AP_OK) return ast;
    int nm = t->moe_prefix[first + n] - t->moe_prefix[first];
    size_t k = cell_at(t, r, n - nm, nm);
    if (!t->done[slot][k]) {
        ap_status sst = table_scratch(t, err);
        if (sst != AP_OK) return sst;
        t->only[r] = 1; /* the estimate prices rank r alone */
        ap_status st = cost_eval_in(t->m, t->c, &t->p, &t->ropts, r, first, n, rc, 1, t->prep,
                                    &t->e->plan, t->e, &t->cost[slot][k], err);
        t->only[r] = 0;
        if (st != AP_OK) return st;
        t->done[slot][k] = 1;
        t->evals++;
    }
    *out = &t->cost[slot][k];
    return AP_OK;
}

const ap_stage_cost *ap_stage_table_peek(const ap_stage_table *t, int r, int first, int n,
                                         int rc_layers) {
    int L = (int)t->m->layers;
    if (r < 0 || r >= t->pp || first < 0 || n < 0 || first + n > L) return NULL;
    int rc, slot = slot_of(n, rc_layers, &rc);
    if (!t->cost[slot]) return NULL;
    int nm = t->moe_prefix[first + n] - t->moe_prefix[first];
    size_t k = cell_at(t, r, n - nm, nm);
    return t->done[slot][k] ? &t->cost[slot][k] : NULL;
}

long ap_stage_table_evals(const ap_stage_table *t) { return t ? t->evals : 0; }

/* the memo slot and cell of rank r holding n layers as a batch fill places them (of the model's
 * one kind, or with a dense prefix: rank 0 from layer 0, the others past the prefix), allocating
 * the slot */
static ap_status cell_of(ap_stage_table *t, int r, int n, int rc, int *slot, size_t *k,
                         ap_err *err) {
    *slot = rc > 0 ? rc : 0;
    ap_status st = slot_alloc(t, *slot, err);
    if (st != AP_OK) return st;
    int nd = t->nm_max == 0 ? n : r == 0 ? (n < t->nd_max ? n : t->nd_max) : 0;
    *k = cell_at(t, r, nd, n - nd);
    return AP_OK;
}

ap_status ap_stage_table_fill_n(ap_stage_table *t, const int *ranks, int k, int n, int rc_layers,
                                ap_err *err) {
    const int L = (int)t->m->layers, pp = t->pp, v = t->p.vp > 1 ? t->p.vp : 1;
    /* with a dense prefix of D layers (mixed kinds: vp 1 only), rank 0 holds [0, n) when it
     * is in the batch (n >= D: no later range reaches the prefix), else the prefix and the
     * remainder (it is the filler) */
    const int D = t->single_kind ? 0 : t->dense_prefix;
    if ((!t->single_kind && (D < 0 || v > 1)) || n < 1 || pp < 2 ||
        (int64_t)pp * v > AP_MAX_CHUNKS)
        return AP_OK;
    if (v > 1 && rc_layers > 0) return AP_OK; /* per-stage counts need vp 1 */
    const int rc = rc_layers > 0 ? (rc_layers < n ? rc_layers : n) : -1;
    ap_status sst = table_scratch(t, err);
    if (sst != AP_OK) return sst;
    int todo[AP_MAX_STAGES], nt = 0;
    for (int i = 0; i < k; i++) {
        int slot;
        size_t cell;
        ap_status st = cell_of(t, ranks[i], n, rc, &slot, &cell, err);
        if (st != AP_OK) return st;
        if (!t->done[slot][cell] && !(ranks[i] == 0 && n < D)) todo[nt++] = ranks[i];
    }
    /* as many ranks as fit side by side hold n layers each, one more rank (the filler) the
     * rest, the others none: each rank is priced from its own layers (stagecost.h), so one
     * estimate prices them all */
    while (nt > 0) {
        /* ranks that can hold n layers at once (past the prefix unless rank 0 leads) */
        int per = (todo[0] == 0 ? L : L - D) / n;
        int batch = nt < per ? nt : per;
        int rem = L - batch * n;
        int filler = -1;
        if (rem > 0) {
            for (int r = 0, j = 0; r < pp && filler < 0; r++) {
                while (j < batch && todo[j] < r) j++;
                if (j >= batch || todo[j] != r) filler = r;
            }
            if (filler < 0) { /* every rank is in the batch: the last one fills */
                batch--;
                filler = todo[batch];
                rem = L - batch * n;
            }
        }
        if (batch <= 0) break;
        ap_plan *q = &t->e->plan;
        plan_copy_used(q, &t->p);
        q->nchunks = pp * v;
        for (int i = 0; i < pp * v; i++) q->stage_layers[i] = 0;
        /* rank r's chunks r, r + pp, ... share its layers evenly (ap_stage_chunk_layers) */
        for (int j = 0; j < batch; j++) {
            for (int c = 0; c < v; c++)
                q->stage_layers[todo[j] + c * pp] = ap_stage_chunk_layers(n, v, c);
            if (rc > 0) q->stage_recompute[todo[j]] = rc;
        }
        if (filler >= 0)
            for (int c = 0; c < v; c++)
                q->stage_layers[filler + c * pp] = ap_stage_chunk_layers(rem, v, c);
        for (int j = 0; j < batch; j++) t->only[todo[j]] = 1; /* the batch's ranks alone */
        ap_status st = estimate_in(t->m, t->c, t->prep, &t->ropts, t->e, err);
        for (int j = 0; j < batch; j++) t->only[todo[j]] = 0;
        if (st != AP_OK) return AP_OK; /* a layout the trainer refuses: priced one by one */
        t->evals++;
        for (int j = 0; j < batch; j++) {
            int slot;
            size_t cell;
            if ((st = cell_of(t, todo[j], n, rc, &slot, &cell, err)) != AP_OK) return st;
            rank_cost(t->c, t->e, todo[j], &t->cost[slot][cell]);
            t->done[slot][cell] = 1;
        }
        memmove(todo, todo + batch, (size_t)(nt - batch) * sizeof *todo);
        nt -= batch;
    }
    return AP_OK;
}
