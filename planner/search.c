/*
 * search.c - exhaustive plan enumeration with safe pruning (see search.h for the space and the
 * pruning rules). The space is walked point by point (space.c: degrees, ZeRO and offload, which
 * fix the model states of a group); inside a group the recompute level and micro-batch vary.
 * Only the top K fitting estimates are kept, so memory stays O(K).
 *
 * Structure: eval() estimates one plan and keeps it; search_group() applies the two pruning
 * rules to one group; ap_search() drives the walk. A cost-model error on a plan the trainer's
 * rules accept stops the search and is returned with the plan named (a plan the heterogeneous
 * simulation finds it cannot run, AP_ERR_INFEASIBLE, is only not evaluated).
 */
#include "autoplan/search.h"
#include "autoplan/hetero.h"

#include <stdlib.h>
#include <string.h>

void ap_search_opts_init(ap_search_opts *o) {
    memset(o, 0, sizeof *o);
    ap_plan_init(&o->fixed);
    o->fixed.tp = o->fixed.pp = o->fixed.dp = o->fixed.cp = o->fixed.ep = o->fixed.vp = 0;
    o->fixed.etp = 1;
    o->fixed.mbs = 0;
    o->fixed.zero = -1;
    o->top_k = 10;
    o->prune = 1;
    o->max_mbs = 64;
    ap_estimate_opts_init(&o->est);
}

void ap_search_result_free(ap_search_result *r) {
    ap_free(r->top);
    r->top = NULL;
    r->ntop = 0;
}

ap_confidence ap_estimate_confidence(const ap_estimate *e) {
    if (!e->fits) return AP_CONF_OOM;
    if (e->device_peak_bytes * (1.0 + AP_VALIDATED_MEMORY_ERROR) + e->headroom_bytes >
        e->capacity_bytes)
        return AP_CONF_TIGHT;
    return AP_CONF_FITS;
}

const char *ap_confidence_name(ap_confidence c) {
    return c == AP_CONF_FITS ? "fits" : c == AP_CONF_TIGHT ? "tight" : "oom";
}

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    ap_search_result *r;
    ap_estimate scratch;
    double best_overshoot;
    ap_hetero_cache chunk_cache; /* Gemini's chunk search, shared by a group's plans */
} search_state;

/* The cost model, or for Gemini placements and DeepSpeed offload devices the operator-by-
 * operator simulation (hetero.h). */
static ap_status estimate(search_state *s, const ap_plan *p, ap_estimate *e, ap_err *err) {
    if (ap_hetero_applies(p))
        return ap_hetero_estimate(s->m, s->c, p, &s->o->est, &s->chunk_cache, e, err);
    return ap_estimate_plan(s->m, s->c, p, &s->o->est, e, err);
}

int ap_estimate_better(const ap_estimate *a, const ap_estimate *b) {
    if (a->time.step_s != b->time.step_s) return a->time.step_s < b->time.step_s;
    return a->device_peak_bytes < b->device_peak_bytes;
}

static void keep(search_state *s, const ap_estimate *e) {
    ap_search_result *r = s->r;
    int k = s->o->top_k;
    if (r->ntop == k && !ap_estimate_better(e, &r->top[k - 1])) return;
    int pos = r->ntop < k ? r->ntop : k - 1;
    while (pos > 0 && ap_estimate_better(e, &r->top[pos - 1])) pos--;
    int last = r->ntop < k ? r->ntop : k - 1;
    memmove(&r->top[pos + 1], &r->top[pos], (size_t)(last - pos) * sizeof *r->top);
    r->top[pos] = *e;
    if (r->ntop < k) r->ntop++;
}

static void consider_closest(search_state *s, const ap_estimate *e) {
    double over = (e->device_peak_bytes + e->headroom_bytes - e->capacity_bytes) /
                  e->capacity_bytes;
    if (!e->host_fits && e->host_capacity_bytes > 0) {
        double h = (e->host_bytes_per_node - 0.9 * e->host_capacity_bytes) / e->host_capacity_bytes;
        if (h > over) over = h;
    }
    if (!s->r->have_closest || over < s->best_overshoot ||
        (over == s->best_overshoot && ap_estimate_better(e, &s->r->closest))) {
        s->r->closest = *e;
        s->r->have_closest = 1;
        s->best_overshoot = over;
    }
}

/* Evaluate one legal-or-not plan: *verdict 1 = fits, 0 = legal but does not fit, -1 = illegal
 * (or past max_evals). A cost-model failure on a legal plan is an error. */
static ap_status eval(search_state *s, const ap_plan *p, int *verdict, ap_err *err) {
    ap_search_result *r = s->r;
    *verdict = -1;
    r->enumerated++;
    if (ap_plan_check(p, s->m, s->c, s->o->allow_cross_node_tp, NULL) != AP_OK) return AP_OK;
    r->legal++;
    if (s->o->max_evals > 0 && r->evaluated >= s->o->max_evals) {
        r->capped = 1;
        return AP_OK;
    }
    ap_status st = estimate(s, p, &s->scratch, err);
    if (st == AP_ERR_INFEASIBLE) return AP_OK; /* the simulator's verdict: it cannot run */
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "estimating %s", ap_plan_label(p, lbl, sizeof lbl));
        return st;
    }
    r->evaluated++;
    if (s->o->visit) s->o->visit(s->o->visit_ctx, &s->scratch);
    if (s->scratch.fits) {
        r->fit++;
        keep(s, &s->scratch);
        *verdict = 1;
        return AP_OK;
    }
    consider_closest(s, &s->scratch);
    *verdict = 0;
    return AP_OK;
}

/* Count members [rc, mb_from..) x levels as enumerated and, when legal, pruned (not estimated). */
static void count_pruned(search_state *s, const ap_plan_group *g, ap_plan *p, int rc0, int rc1,
                         int mb_from) {
    ap_search_result *r = s->r;
    for (int il = rc0; il < rc1; il++)
        for (int im = mb_from; im < g->nmbs; im++) {
            ap_plan_group_member(g, il, im, p);
            r->enumerated++;
            if (ap_plan_check(p, s->m, s->c, s->o->allow_cross_node_tp, NULL) == AP_OK) {
                r->legal++;
                r->pruned++;
            }
        }
}

/* Group bound (search.h): the least-memory member (the smallest micro-batch, the most
 * recomputation) does not fit, so no member does. It is estimated outside the counters; when
 * it is legal and does not fit it is still a candidate for the closest plan. */
static ap_status group_cannot_fit(search_state *s, const ap_plan_group *g, ap_plan *q,
                                  int *cannot, ap_err *err) {
    *cannot = 0;
    ap_plan_group_member(g, g->most_rc, 0, q);
    if (ap_plan_check(q, s->m, s->c, s->o->allow_cross_node_tp, NULL) != AP_OK) return AP_OK;
    ap_status st = estimate(s, q, &s->scratch, err);
    if (st == AP_ERR_INFEASIBLE) return AP_OK; /* the simulator's verdict: it cannot run */
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "estimating %s", ap_plan_label(q, lbl, sizeof lbl));
        return st;
    }
    if (s->scratch.fits) return AP_OK;
    consider_closest(s, &s->scratch);
    *cannot = 1;
    return AP_OK;
}

/* One group: skipped whole when its least-memory member does not fit; within a recompute level
 * the micro-batch loop stops at the first size that does not fit (larger ones only use more
 * memory). Pruned members are counted, not estimated. p is scratch for the member plans. */
static ap_status search_group(search_state *s, const ap_plan_group *g, ap_plan *p, ap_err *err) {
    const int prune = s->o->prune;
    ap_status st;
    *p = g->base;
    if (prune) {
        int cannot;
        if ((st = group_cannot_fit(s, g, p, &cannot, err)) != AP_OK) return st;
        if (cannot) {
            count_pruned(s, g, p, 0, g->nrc, 0);
            return AP_OK;
        }
    }
    for (int il = 0; il < g->nrc; il++)
        for (int im = 0; im < g->nmbs; im++) {
            ap_plan_group_member(g, il, im, p);
            int v;
            if ((st = eval(s, p, &v, err)) != AP_OK) return st;
            if (v == 0 && prune) {
                count_pruned(s, g, p, il, il + 1, im + 1);
                break;
            }
        }
    return AP_OK;
}

ap_status ap_search(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                    ap_search_result *r, ap_err *err) {
    double t0 = ap_now_s();
    memset(r, 0, sizeof *r);
    if (o->top_k < 1 || o->top_k > 10000)
        return ap_err_set(err, AP_ERR_INPUT, "--top must be in [1, 10000]");
    if (o->gbs < 1) return ap_err_set(err, AP_ERR_INPUT, "the global batch must be >= 1");
    r->top = ap_calloc((size_t)o->top_k, sizeof *r->top);
    search_state *s = ap_malloc(sizeof *s);
    ap_space *sp = ap_malloc(sizeof *sp);
    ap_plan_group *g = ap_malloc(sizeof *g);
    ap_plan *p = ap_malloc(sizeof *p);
    ap_status st = AP_OK;
    if (!r->top || !s || !sp || !g || !p) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the search");
        goto done;
    }
    s->m = m;
    s->c = c;
    s->o = o;
    s->r = r;
    s->best_overshoot = 0;
    memset(&s->chunk_cache, 0, sizeof s->chunk_cache);
    ap_space_init(sp, m, c, o);
    ap_space_point pt;
    while (st == AP_OK && ap_space_next(sp, &pt)) {
        ap_space_group(sp, &pt, g);
        st = search_group(s, g, p, err);
    }
done:
    if (st != AP_OK) ap_search_result_free(r);
    ap_free(s);
    ap_free(sp);
    ap_free(g);
    ap_free(p);
    r->search_s = ap_now_s() - t0;
    return st;
}
