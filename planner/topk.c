/*
 * topk.c - the search's ranking (search_int.h): the K best estimates by step time, or with a
 * tie margin the K best of each complication near the K-th step time, ordered at the end so
 * that among ties the simpler plan comes first (search.h "Ties").
 */
#include "search_int.h"

#include <math.h>
#include <string.h>

int ap_estimate_complication(const ap_estimate *e, int64_t cp_short_seq) {
    const ap_plan *p = &e->plan;
    const ap_plan_hetero *h = &p->hetero;
    int tight = ap_estimate_confidence(e) != AP_CONF_FITS;
    int off = p->offload_optimizer > 0 || p->offload_params > 0 ||
              h->placement == AP_GEMINI_AUTO ||
              (h->placement == AP_GEMINI_STATIC &&
               (h->offload_optim_frac > 0 || h->offload_param_frac > 0)) ||
              h->ds_optimizer != AP_OFFLOAD_DEV_NONE || h->ds_params != AP_OFFLOAD_DEV_NONE;
    int cp = p->cp > 1 && p->seq < cp_short_seq;
    int z = p->zero < 0 ? 0 : p->zero > 3 ? 3 : p->zero;
    return tight * 16 + off * 8 + cp * 4 + z;
}

int64_t ap_cp_short_seq(const ap_model *m) { return 6 * m->hidden; }

const char *ap_tie_rule_text(void) {
    return "fits before tight, no offload before offload, no cp below 6 x hidden tokens, "
           "then the lower ZeRO stage";
}

double topk_bound(const topk *t) {
    if (t->n < t->k) return INFINITY;
    double s = topk_at(t, t->k - 1)->time.step_s;
    if (!(s >= 0)) return INFINITY;
    return t->margin > 0 ? s * (1 + t->margin) : s;
}

/* Room for one more entry: 0, or -1 out of memory (a ranking by step time grows up to k). The
 * pool holds pointers: growing it moves pointers, never the estimates (tens of kilobytes each,
 * of which a copy writes only the parts its stages use), so no page of an estimate is touched
 * before an entry is written to it. cap counts the entries allocated. */
static int grow(topk *t) {
    if (t->n < t->cap) return 0;
    int cap = t->cap ? 2 * t->cap : 8;
    if (t->margin <= 0 && cap > t->k) cap = t->k;
    ap_estimate **np = ap_realloc(t->pool, (size_t)cap * sizeof *np);
    if (np) t->pool = np;
    int *ns = np ? ap_realloc(t->slot, (size_t)cap * sizeof *ns) : NULL;
    if (ns) t->slot = ns;
    int *nc = ns ? ap_realloc(t->cls, (size_t)cap * sizeof *nc) : NULL;
    if (nc) t->cls = nc;
    int64_t *ni = nc ? ap_realloc(t->id, (size_t)cap * sizeof *ni) : NULL;
    if (ni) t->id = ni;
    char *npv = ni ? ap_realloc(t->prov, (size_t)cap * sizeof *npv) : NULL;
    if (npv) t->prov = npv;
    if (!npv) return -1;
    for (; t->cap < cap; t->cap++) {
        if (!(t->pool[t->cap] = ap_malloc(sizeof **t->pool))) return t->n < t->cap ? 0 : -1;
        t->slot[t->cap] = t->cap; /* the new pool entry is free */
    }
    return 0;
}

/* Insert e at rank pos (n < cap): the free slot slot[n] takes it. */
static void insert(topk *t, int pos, const ap_estimate *e, int64_t id, int cls) {
    int s = t->slot[t->n];
    memmove(&t->slot[pos + 1], &t->slot[pos], (size_t)(t->n - pos) * sizeof *t->slot);
    memmove(&t->cls[pos + 1], &t->cls[pos], (size_t)(t->n - pos) * sizeof *t->cls);
    memmove(&t->id[pos + 1], &t->id[pos], (size_t)(t->n - pos) * sizeof *t->id);
    memmove(&t->prov[pos + 1], &t->prov[pos], (size_t)(t->n - pos) * sizeof *t->prov);
    t->slot[pos] = s;
    t->cls[pos] = cls;
    t->id[pos] = id;
    t->prov[pos] = (char)(t->ids_provisional && id >= 0);
    ap_estimate_copy(t->pool[s], e);
    t->n++;
}

void topk_remove(topk *t, int i) {
    int s = t->slot[i];
    memmove(&t->slot[i], &t->slot[i + 1], (size_t)(t->n - i - 1) * sizeof *t->slot);
    memmove(&t->cls[i], &t->cls[i + 1], (size_t)(t->n - i - 1) * sizeof *t->cls);
    memmove(&t->id[i], &t->id[i + 1], (size_t)(t->n - i - 1) * sizeof *t->id);
    memmove(&t->prov[i], &t->prov[i + 1], (size_t)(t->n - i - 1) * sizeof *t->prov);
    t->n--;
    t->slot[t->n] = s; /* free again */
}

void topk_replace(topk *t, int i, const ap_estimate *e) {
    ap_estimate_copy(topk_at(t, i), e);
    t->cls[i] = ap_estimate_complication(e, t->cp_short_seq);
    t->prov[i] = 0;
}

void topk_swap(topk *t, int i, int j) {
    int s = t->slot[i], c = t->cls[i];
    int64_t x = t->id[i];
    char v = t->prov[i];
    t->slot[i] = t->slot[j];
    t->cls[i] = t->cls[j];
    t->id[i] = t->id[j];
    t->prov[i] = t->prov[j];
    t->slot[j] = s;
    t->cls[j] = c;
    t->id[j] = x;
    t->prov[j] = v;
}

/* The rank an estimate takes: after every entry it does not beat. */
static int rank_of(const topk *t, const ap_estimate *e, int from) {
    int pos = from;
    while (pos > 0 && ap_estimate_better(e, topk_at(t, pos - 1))) pos--;
    return pos;
}

/* Ties: e enters unless its complication already has k entries it does not beat, or it is
 * slower than the bound; then that complication's (k+1)-th entry and every entry past the
 * new bound leave.
 *
 * Provisional entries: a re-split candidate's uniform estimate stands for a plan whose best
 * split is not known yet, and that split may fit where the uniform one is tight, or the other
 * way (its memory changes with the split), so its complication may still change. Such an entry
 * neither counts among its complication's k nor leaves for it: a plan displaced by it could
 * otherwise be missing once the candidate's split moves to another complication (with k = 1,
 * deepseek-v3 on 256 H100s under Colossal-AI ranked a tight 19.456 s plan first because the
 * 20.389 s plan that fits had left for a candidate whose split turned tight). The bound still
 * counts it: a plan's best split is never slower than its uniform one. */
static int offer_tied(topk *t, const ap_estimate *e, int64_t id) {
    if (e->time.step_s > topk_bound(t)) return 0;
    int cls = ap_estimate_complication(e, t->cp_short_seq), same = 0, last = -1;
    int prov = t->ids_provisional && id >= 0;
    for (int i = 0; i < t->n && !prov; i++)
        if (t->cls[i] == cls && !t->prov[i]) {
            same++;
            last = i;
        }
    if (same >= t->k && !ap_estimate_better(e, topk_at(t, last))) return 0;
    if (grow(t) < 0) return -1;
    int pos = rank_of(t, e, t->n);
    insert(t, pos, e, id, cls);
    if (same >= t->k) topk_remove(t, last >= pos ? last + 1 : last);
    double b = topk_bound(t);
    while (t->n > t->k && topk_at(t, t->n - 1)->time.step_s > b) topk_remove(t, t->n - 1);
    return 1;
}

int topk_offer(topk *t, const ap_estimate *e, int64_t id) {
    if (t->margin > 0) return offer_tied(t, e, id);
    if (t->n == t->k && !ap_estimate_better(e, topk_at(t, t->k - 1))) return 0;
    if (t->n == t->k) topk_remove(t, t->k - 1); /* e takes its place */
    else if (grow(t) < 0) return -1;
    insert(t, rank_of(t, e, t->n), e, id, 0);
    return 1;
}

void topk_rank_ties(topk *t) {
    if (t->margin <= 0) return;
    /* selection: ranks [0, i) are placed, [i, n) stay in step-time order, so the fastest left
     * is rank i and the plans within the margin of it a prefix of what is left */
    for (int i = 0; i < t->n && i < t->k; i++) {
        double w = topk_at(t, i)->time.step_s * (1 + t->margin);
        int best = i;
        for (int j = i + 1; j < t->n && topk_at(t, j)->time.step_s <= w; j++)
            if (t->cls[j] < t->cls[best]) best = j;
        for (int j = best; j > i; j--) topk_swap(t, j, j - 1); /* the rest keeps its order */
    }
    while (t->n > t->k) topk_remove(t, t->n - 1);
}

ap_estimate *topk_take(const topk *t, int *nout) {
    int n = t->n < t->k ? t->n : t->k;
    *nout = 0;
    if (n == 0) return NULL;
    ap_estimate *e = ap_calloc((size_t)n, sizeof *e);
    if (!e) {
        *nout = -1;
        return NULL;
    }
    for (int i = 0; i < n; i++) ap_estimate_copy(&e[i], topk_at(t, i));
    *nout = n;
    return e;
}

void topk_free(topk *t) {
    for (int i = 0; t->pool && i < t->cap; i++) ap_free(t->pool[i]);
    ap_free(t->pool);
    ap_free(t->slot);
    ap_free(t->cls);
    ap_free(t->id);
    ap_free(t->prov);
    t->prov = NULL;
    t->pool = NULL;
    t->slot = t->cls = NULL;
    t->id = NULL;
    t->n = t->cap = 0;
}
