/*
 * topk.c - the search's ranking (search_int.h): the K best estimates by step time, or with a
 * tie margin the K best of each complication near the K-th step time, ordered at the end so
 * that among ties the simpler plan comes first (search.h "Ties").
 */
#include "search_int.h"

#include <math.h>
#include <string.h>

/* The complication's bits: tight 16, offload 8, cp at a short sequence 4, the ZeRO stage 0-3. */
enum { CX_TIGHT = 16, CX_OFF = 8 };

int plan_complication(const ap_plan *p, int64_t cp_short_seq) {
    const ap_plan_hetero *h = &p->hetero;
    int off = p->offload_optimizer > 0 || p->offload_params > 0 ||
              h->placement == AP_GEMINI_AUTO ||
              (h->placement == AP_GEMINI_STATIC &&
               (h->offload_optim_frac > 0 || h->offload_param_frac > 0)) ||
              h->ds_optimizer != AP_OFFLOAD_DEV_NONE || h->ds_params != AP_OFFLOAD_DEV_NONE;
    int cp = p->cp > 1 && p->seq < cp_short_seq;
    int z = p->zero < 0 ? 0 : p->zero > 3 ? 3 : p->zero;
    return off * CX_OFF + cp * 4 + z;
}

int ap_estimate_complication(const ap_estimate *e, int64_t cp_short_seq) {
    int tight = ap_estimate_confidence(e) != AP_CONF_FITS;
    return tight * CX_TIGHT + plan_complication(&e->plan, cp_short_seq);
}

double complication_cut(const double *full, int c, int offload_free) {
    const int base = c & ~(CX_TIGHT | (offload_free ? CX_OFF : 0));
    double cut = 0;
    for (int tight = 0; tight < 2; tight++)
        for (int off = 0; off < (offload_free ? 2 : 1); off++) {
            double f = full[base | (tight ? CX_TIGHT : 0) | (off ? CX_OFF : 0)];
            if (!(f < INFINITY)) return INFINITY; /* room (or no number): no cut */
            if (f > cut) cut = f;
        }
    return cut;
}

int64_t ap_cp_short_seq(const ap_model *m) { return 6 * m->hidden; }

const char *ap_tie_rule_text(void) {
    return "fits before tight, no offload before offload, no cp below 6 x hidden tokens, "
           "then the lower ZeRO stage";
}

plan_key plan_key_of(const ap_plan *p) {
    plan_key k = {{p->tp, p->pp, p->dp, p->cp, p->ep, p->vp, p->zero, (int64_t)p->recompute,
                   p->recompute_layers, p->mbs, p->etp, p->cp_a2a},
                  {p->offload_optimizer + 0.0, p->offload_params + 0.0}}; /* -0 as 0 */
    return k;
}

int plan_key_eq(const plan_key *a, const plan_key *b) {
    for (int i = 0; i < 12; i++)
        if (a->f[i] != b->f[i]) return 0;
    return a->off[0] == b->off[0] && a->off[1] == b->off[1];
}

/* FNV-1a over the fields */
uint64_t plan_key_hash(const plan_key *k) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 12; i++) h = (h ^ (uint64_t)k->f[i]) * 1099511628211ull;
    for (int i = 0; i < 2; i++) {
        uint64_t b;
        memcpy(&b, &k->off[i], sizeof b);
        h = (h ^ b) * 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* 1 when keys (s1, p1) beat (s2, p2): ap_estimate_better's order. */
static int key_beats(double s1, double p1, double s2, double p2) {
    if (s1 != s2) return s1 < s2;
    return p1 < p2;
}

/* The used slots by hash: chains from head[hash & (nhead - 1)] through next[]. */
static int *bucket(const topk *t, uint64_t h) { return &t->head[h & (uint64_t)(t->nhead - 1)]; }

static void chain_add(topk *t, int s) {
    int *b = bucket(t, t->key[s]);
    t->next[s] = *b;
    *b = s;
}

static void chain_del(topk *t, int s) {
    int *b = bucket(t, t->key[s]);
    while (*b != s) b = &t->next[*b];
    *b = t->next[s];
}

/* The first rank whose keys do not beat (s, pk): where the ranks with those keys begin. */
static int first_with_keys(const topk *t, double s, double pk) {
    int lo = 0, hi = t->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (key_beats(rstep(t, mid), rpeak(t, mid), s, pk)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The rank of slot s: among the ranks with its keys. */
static int rank_of_slot(const topk *t, int s) {
    const double st = t->sstep[s], pk = t->speak[s];
    for (int i = first_with_keys(t, st, pk);
         i < t->n && !key_beats(st, pk, rstep(t, i), rpeak(t, i)); i++)
        if (rslot(t, i) == s) return i;
    for (int i = 0; i < t->n; i++) /* keys that are not numbers */
        if (rslot(t, i) == s) return i;
    return -1;
}

int topk_find(const topk *t, const plan_key *k) {
    if (t->nhead == 0) return -1;
    uint64_t h = plan_key_hash(k);
    for (int s = *bucket(t, h); s >= 0; s = t->next[s])
        if (t->key[s] == h && plan_key_eq(&t->pkey[s], k)) return rank_of_slot(t, s);
    return -1;
}

double topk_bound(const topk *t) {
    if (t->n < t->k) return INFINITY;
    double s = rstep(t, t->k - 1);
    if (!(s >= 0)) return INFINITY;
    return t->margin > 0 ? s * (1 + t->margin) : s;
}

/* Room for one more entry: 0, or -1 out of memory (a ranking by step time grows up to k). The
 * pool holds pointers, NULL until an entry with an estimate takes the slot (insert): growing
 * it moves pointers, never the estimates (tens of kilobytes each), and a provisional entry
 * has none. cap counts the slots. */
static int grow(topk *t) {
    if (t->n < t->cap) return 0;
    int cap = t->cap ? 2 * t->cap : 8;
    if (t->margin <= 0 && cap > t->k) cap = t->k;
#define GROW(a)                                                    \
    do {                                                           \
        void *q_ = ap_realloc((a), (size_t)cap * sizeof *(a));     \
        if (!q_) return -1;                                        \
        (a) = q_;                                                  \
    } while (0)
    GROW(t->pool);
    GROW(t->pkey);
    GROW(t->slot);
    GROW(t->cls);
    GROW(t->id);
    GROW(t->prov);
    GROW(t->key);
    GROW(t->used);
    GROW(t->next);
    GROW(t->sstep);
    GROW(t->speak);
    int nhead = 16;
    while (nhead < 2 * cap) nhead *= 2;
    int *head = ap_realloc(t->head, (size_t)nhead * sizeof *head);
    if (!head) return -1;
    t->head = head;
#undef GROW
    for (; t->cap < cap; t->cap++) {
        t->pool[t->cap] = NULL;
        t->used[t->cap] = 0;
        t->slot[t->cap] = t->cap; /* the new slot is free */
    }
    t->nhead = nhead; /* the chains again, over at least twice as many buckets */
    for (int b = 0; b < t->nhead; b++) t->head[b] = -1;
    for (int i = 0; i < t->n; i++) chain_add(t, t->slot[i]);
    return 0;
}

/* What an offer brings: the keys of an estimate, and the estimate unless it is provisional
 * (e NULL: a re-split candidate's uniform estimate, kept as its keys; topk_fill). */
typedef struct {
    double step, peak;
    int cls;
    plan_key pk;
    const ap_estimate *e;
} offered;

static offered offered_of(const topk *t, const ap_estimate *e, int64_t id) {
    offered x = {e->time.step_s, e->device_peak_bytes,
                 ap_estimate_complication(e, t->cp_short_seq), plan_key_of(&e->plan),
                 t->ids_provisional && id >= 0 ? NULL : e};
    return x;
}

/* Complications are 0..31 (ap_estimate_complication). */
static int cls_ix(int c) { return c < 0 ? 0 : c > 31 ? 31 : c; }

void topk_full_steps(const topk *t, double full[32]) {
    for (int c = 0; c < 32; c++) {
        const int n = t->nfinal[c];
        full[c] = t->margin > 0 && n >= t->k ? t->ckeys[c][2 * n - 2] : INFINITY;
    }
}

/* 1 when an entry of step s and device peak pk beats rank i. */
static int beats(const topk *t, double s, double pk, int i) {
    return key_beats(s, pk, rstep(t, i), rpeak(t, i));
}

/* Under a tie margin, complication c's entries that count, by their keys in rank order: its
 * slowest is known without a walk over the ranks (thousands of provisional entries under a
 * wide margin). A new one goes after every one it does not beat. -1 out of memory. */
static int class_add(topk *t, int c, double s, double pk) {
    if (t->margin <= 0) return 0;
    c = cls_ix(c);
    int n = t->nfinal[c];
    if (n == t->ccap[c]) {
        int cap = t->ccap[c] ? 2 * t->ccap[c] : t->k + 1;
        double *a = ap_realloc(t->ckeys[c], (size_t)cap * 2 * sizeof *a);
        if (!a) return -1;
        t->ckeys[c] = a;
        t->ccap[c] = cap;
    }
    double *a = t->ckeys[c];
    int pos = n;
    while (pos > 0 && key_beats(s, pk, a[2 * pos - 2], a[2 * pos - 1])) pos--;
    memmove(&a[2 * pos + 2], &a[2 * pos], (size_t)(n - pos) * 2 * sizeof *a);
    a[2 * pos] = s;
    a[2 * pos + 1] = pk;
    t->nfinal[c]++;
    return 0;
}

/* Complication c loses an entry of keys (s, pk). */
static void class_del(topk *t, int c, double s, double pk) {
    if (t->margin <= 0) return;
    c = cls_ix(c);
    double *a = t->ckeys[c];
    int n = t->nfinal[c], j = n - 1;
    while (j > 0 &&
           !(memcmp(&a[2 * j], &s, sizeof s) == 0 && memcmp(&a[2 * j + 1], &pk, sizeof pk) == 0))
        j--;
    memmove(&a[2 * j], &a[2 * j + 2], (size_t)(n - 1 - j) * 2 * sizeof *a);
    t->nfinal[c]--;
}

/* The rank of complication c's slowest entry that counts (keys s, pk: the last of its keys):
 * the first rank with those keys by bisection, then the last of them that is c's. */
static int class_last(const topk *t, int c, double s, double pk) {
    int last = -1;
    for (int i = first_with_keys(t, s, pk); i < t->n && !key_beats(s, pk, rstep(t, i), rpeak(t, i));
         i++)
        if (t->cls[rslot(t, i)] == c && !t->prov[rslot(t, i)]) last = i;
    for (int i = t->n - 1; i >= 0 && last < 0; i--) /* keys that are not numbers */
        if (t->cls[rslot(t, i)] == c && !t->prov[rslot(t, i)]) last = i;
    return last;
}

/* Insert x at rank pos (n < cap): the free slot slot[n] takes it, and the ranks before pos
 * move up by one place (rslot: rank 0 is the last place). -1 out of memory for its estimate. */
static int insert(topk *t, int pos, const offered *x, int64_t id) {
    int s = t->slot[t->n];
    if (x->e) {
        if (!t->pool[s] && !(t->pool[s] = ap_malloc(sizeof **t->pool))) return -1;
        if (class_add(t, x->cls, x->step, x->peak) < 0) return -1;
        ap_estimate_copy(t->pool[s], x->e);
    }
    memmove(&t->slot[t->n - pos + 1], &t->slot[t->n - pos], (size_t)pos * sizeof *t->slot);
    t->slot[t->n - pos] = s;
    t->cls[s] = x->cls;
    t->id[s] = id;
    t->prov[s] = (char)!x->e;
    t->used[s] = 1;
    t->key[s] = plan_key_hash(&x->pk);
    t->pkey[s] = x->pk;
    t->sstep[s] = x->step;
    t->speak[s] = x->peak;
    chain_add(t, s);
    t->n++;
    return 0;
}

void topk_remove(topk *t, int i) {
    int s = rslot(t, i), j = t->n - 1 - i; /* its place: the ranks before it move down */
    if (!t->prov[s]) class_del(t, t->cls[s], t->sstep[s], t->speak[s]);
    t->used[s] = 0;
    chain_del(t, s);
    memmove(&t->slot[j], &t->slot[j + 1], (size_t)i * sizeof *t->slot);
    t->n--;
    t->slot[t->n] = s; /* free again */
}

/* a[0 .. n) in reverse order */
static void reverse_ints(int *a, int n) {
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        int x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

/* Remove the ranks from n_new on, the slowest: the state that removing rank n - 1 as many
 * times leaves, slot[] included (the kept ranks move down, the freed slots follow them, the
 * last removed first), in O(n) where each removal moved every kept rank (the slowest rank
 * sits at slot[0]: llama-3-70b on 512 GPUs at margin 0.5 ends with 13,637 removals from a
 * ranking of 13,647 entries). */
static void trim_to(topk *t, int n_new) {
    const int r = t->n - n_new; /* the ranks that leave: slot[0 .. r), slowest first */
    if (r <= 1) {
        if (r == 1) topk_remove(t, n_new);
        return;
    }
    for (int j = 0; j < r; j++) {
        int s = t->slot[j];
        if (!t->prov[s]) class_del(t, t->cls[s], t->sstep[s], t->speak[s]);
        t->used[s] = 0;
        chain_del(t, s);
    }
    reverse_ints(t->slot + r, n_new); /* [leaving, kept reversed] */
    reverse_ints(t->slot, t->n);      /* [kept, leaving reversed] */
    t->n = n_new;
}

int topk_fill(topk *t, int i, const ap_estimate *e) {
    int s = rslot(t, i);
    int c = ap_estimate_complication(e, t->cp_short_seq);
    if (!t->pool[s] && !(t->pool[s] = ap_malloc(sizeof **t->pool))) return -1;
    if (class_add(t, c, e->time.step_s, e->device_peak_bytes) < 0) return -1;
    if (!t->prov[s]) class_del(t, t->cls[s], t->sstep[s], t->speak[s]);
    ap_estimate_copy(t->pool[s], e);
    t->cls[s] = c;
    t->prov[s] = 0;
    chain_del(t, s);
    t->pkey[s] = plan_key_of(&e->plan);
    t->key[s] = plan_key_hash(&t->pkey[s]);
    t->sstep[s] = e->time.step_s;
    t->speak[s] = e->device_peak_bytes;
    chain_add(t, s);
    return 0;
}

#define SWAP(T, a, i, j) \
    do {                  \
        T x_ = (a)[i];    \
        (a)[i] = (a)[j];  \
        (a)[j] = x_;      \
    } while (0)

void topk_swap(topk *t, int i, int j) {
    SWAP(int, t->slot, t->n - 1 - i, t->n - 1 - j);
}

void topk_sort(topk *t) {
    for (int i = 1; i < t->n; i++) /* insertion: stable */
        for (int j = i; j > 0 && beats(t, rstep(t, j), rpeak(t, j), j - 1); j--)
            topk_swap(t, j, j - 1);
}

/* The rank an offer takes: after every entry it does not beat. The ranks are in
 * ap_estimate_better's order, so those it beats are a suffix: a binary search (a walk back
 * from the end compared it with thousands of entries under a wide tie margin). */
static int rank_of(const topk *t, const offered *x) {
    int lo = 0, hi = t->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (beats(t, x->step, x->peak, mid)) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Ties: x enters unless its complication already has k entries it does not beat, or it is
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
 * counts it: a plan's best split is never slower than its uniform one. Under a wide margin
 * they are most of the ranking (39,000 entries for gpt-oss-20b on 16 GPUs at margin 1), so
 * each keeps its keys only, not its estimate; the estimates of those that end up in the
 * answer are made again (topk_fill). The entries that count are counted per complication
 * (nfinal), so an offer looks for its complication's k-th entry only when it has k. */
static int offer_tied(topk *t, const offered *x, int64_t id) {
    if (x->step > topk_bound(t)) return 0;
    int c = cls_ix(x->cls), same = x->e ? t->nfinal[c] : 0, last = -1;
    if (same >= t->k) {
        const double *a = &t->ckeys[c][2 * same - 2]; /* its slowest */
        if (!key_beats(x->step, x->peak, a[0], a[1])) return 0;
        last = class_last(t, x->cls, a[0], a[1]);
    }
    if (grow(t) < 0) return -1;
    int pos = rank_of(t, x);
    if (insert(t, pos, x, id) < 0) return -1;
    if (same >= t->k) topk_remove(t, last >= pos ? last + 1 : last);
    double b = topk_bound(t);
    int keep = t->n;
    while (keep > t->k && rstep(t, keep - 1) > b) keep--;
    trim_to(t, keep);
    return 1;
}

static int offer(topk *t, const offered *x, int64_t id) {
    if (t->margin > 0) return offer_tied(t, x, id);
    if (t->n == t->k && !beats(t, x->step, x->peak, t->k - 1)) return 0;
    if (t->n == t->k) topk_remove(t, t->k - 1); /* x takes its place */
    else if (grow(t) < 0) return -1;
    return insert(t, rank_of(t, x), x, id) < 0 ? -1 : 1;
}

int topk_offer(topk *t, const ap_estimate *e, int64_t id) {
    const offered x = offered_of(t, e, id);
    return offer(t, &x, id);
}

int topk_offer_rank(topk *t, const topk *src, int i, int64_t id) {
    const int s = rslot(src, i);
    offered x = {rstep(src, i), rpeak(src, i), src->cls[s], src->pkey[s],
                 src->prov[s] ? NULL : topk_at(src, i)};
    if (x.e && t->ids_provisional && id >= 0) x.e = NULL;
    return offer(t, &x, id);
}

void topk_rank_ties(topk *t) {
    if (t->margin <= 0) return;
    /* selection: ranks [0, i) are placed, [i, n) stay in step-time order, so the fastest left
     * is rank i and the plans within the margin of it a prefix of what is left */
    for (int i = 0; i < t->n && i < t->k; i++) {
        double w = rstep(t, i) * (1 + t->margin);
        int best = i;
        for (int j = i + 1; j < t->n && rstep(t, j) <= w; j++)
            if (t->cls[rslot(t, j)] < t->cls[rslot(t, best)]) best = j;
        for (int j = best; j > i; j--) topk_swap(t, j, j - 1); /* the rest keeps its order */
    }
    if (t->n > t->k) trim_to(t, t->k);
}

ap_estimate *topk_take(const topk *t, int *nout) {
    int n = t->n < t->k ? t->n : t->k;
    *nout = 0;
    if (n == 0) return NULL;
    for (int i = 0; i < n; i++)
        if (topk_prov(t, i)) { /* topk_fill was not called: an internal error, said as such */
            *nout = -2;
            return NULL;
        }
    ap_estimate *e = ap_calloc((size_t)n, sizeof *e);
    if (!e) {
        *nout = -1;
        return NULL;
    }
    for (int i = 0; i < n; i++) ap_estimate_copy(&e[i], topk_at(t, i));
    *nout = n;
    return e;
}

void topk_clear(topk *t) {
    for (int i = 0; i < t->n; i++) t->used[t->slot[i]] = 0;
    for (int b = 0; b < t->nhead; b++) t->head[b] = -1;
    t->n = 0; /* slot[] stays a permutation of the slots */
    memset(t->nfinal, 0, sizeof t->nfinal);
}

void topk_free(topk *t) {
    for (int i = 0; t->pool && i < t->cap; i++) ap_free(t->pool[i]);
    ap_free(t->pool);
    ap_free(t->pkey);
    ap_free(t->slot);
    ap_free(t->cls);
    ap_free(t->id);
    ap_free(t->prov);
    ap_free(t->key);
    ap_free(t->used);
    ap_free(t->next);
    ap_free(t->sstep);
    ap_free(t->speak);
    ap_free(t->head);
    t->used = NULL;
    t->next = t->head = NULL;
    t->sstep = t->speak = NULL;
    t->nhead = 0;
    t->pool = NULL;
    t->pkey = NULL;
    t->slot = t->cls = NULL;
    t->id = NULL;
    t->prov = NULL;
    t->key = NULL;
    for (int c = 0; c < 32; c++) {
        ap_free(t->ckeys[c]);
        t->ckeys[c] = NULL;
        t->ccap[c] = 0;
        t->nfinal[c] = 0;
    }
    t->n = t->cap = 0;
}
