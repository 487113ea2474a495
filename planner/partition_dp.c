/*
 * partition_dp.c - the optimal split of consecutive layers onto pipeline stages by dynamic
 * programming over prefixes (partition.h; the table layout in partition_int.h).
 *
 * Objective T = (S + w M) / v with S the sum and M the max of the stage times, w = m v - 1. A DP
 * over prefixes minimises S exactly but not the max term, so the max is fixed from outside (the
 * bound enumeration of Alpa's stage DP, Zheng et al. 2022 Sec. 5.2): for a bound B, f_B(r, j) =
 * least S of the first j layers on the first r stages with every stage time <= B and every
 * stage fitting memory,
 *     f_B(r + 1, a + n) = min_a f_B(r, a) + t(r, a, n),
 * and T* = min over candidate B of (S_B + w B) / v, the candidates being the stage times
 * themselves (the optimum's max is one of them). Only few candidates can matter: the smallest
 * feasible bound B* is the least possible max, found by one minimax pass
 *     g(r + 1, a + n) = min_a max(g(r, a), t(r, a, n)),
 * and a bound B can only beat the best T found so far when (w B + S_min) / v < T, S_min being
 * the unbounded least sum (every split with max >= B costs at least that). So the candidates
 * are the stage times in [B*, (v T - S_min) / w], sorted once, scanned upwards until that test
 * fails. Each pass is O(p L^2) table reads.
 *
 * Ties: many splits share the optimal T; among those with the same max, the least peak memory
 * (a minimax pass on memory). When no split fits, the minimax pass on memory over all legal
 * ranges gives the split with the least peak. Restricted trainers (no uneven stages; first/last
 * only) are solved by enumerating what they can express.
 */
#include "partition_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The arena's next block of n elements of size sz, 16-byte aligned (*at: bytes used so far;
 * base NULL: count only). */
static void *carve(unsigned char *base, size_t *at, size_t n, size_t sz) {
    size_t off = (*at + 15) & ~(size_t)15;
    *at = off + n * sz;
    return base ? base + off : NULL;
}

/* Every array of d in one block (a partition solve makes a DP per variant: one allocation, not
 * twenty), laid out twice: once to size it, once to place the arrays. */
static void lay_out(pdp *d, unsigned char *base, size_t *at, int **pre, int keyed) {
    const int L = d->L, pp = d->p;
    const size_t cells = (size_t)pp * (size_t)d->nkeys;
    *at = 0;
    *pre = keyed ? carve(base, at, (size_t)L + 1, sizeof(int)) : NULL; /* key's prefix sums */
    d->key = keyed ? carve(base, at, (size_t)(L + 1) * (size_t)(L + 1), sizeof(int)) : NULL;
    d->t = carve(base, at, cells, sizeof *d->t);
    d->mem = carve(base, at, cells, sizeof *d->mem);
    d->ok = carve(base, at, cells, 1);
    d->rc = carve(base, at, cells, sizeof *d->rc);
    d->f = carve(base, at, (size_t)(pp + 1) * (size_t)(L + 1), sizeof(double));
    d->tmp = carve(base, at, (size_t)pp, sizeof(int));
    d->cand = carve(base, at, cells, sizeof *d->cand);
    d->vv = carve(base, at, cells, sizeof *d->vv);
    d->tu = carve(base, at, cells, sizeof *d->tu);
    d->flo = carve(base, at, (size_t)pp + 1, sizeof(int));
    d->fhi = carve(base, at, (size_t)pp + 1, sizeof(int));
    d->span = carve(base, at, (size_t)pp, sizeof(int));
    d->nmax = carve(base, at, (size_t)pp * (size_t)(L + 1), sizeof(int));
    d->filled = carve(base, at, cells, sizeof *d->filled);
    d->seg_a = carve(base, at, cells, sizeof *d->seg_a);
    d->seg_n = carve(base, at, cells, sizeof *d->seg_n);
    d->ok_keep = carve(base, at, cells, 1);
    d->pseg = carve(base, at, cells, sizeof *d->pseg);
    d->nstart = carve(base, at, (size_t)L + 2, sizeof(int));
}

ap_status pdp_init(pdp *d, const ap_model *m, int pp, int v, int lo, int64_t m_mb,
                   int per_stage_rc, int fixed_rc, ap_err *err) {
    memset(d, 0, sizeof *d);
    const int L = (int)m->layers;
    d->L = L;
    d->p = pp;
    d->v = v;
    d->lo = lo;
    d->m = m_mb;
    d->w = (double)m_mb * v - 1.0;
    d->cap = INFINITY;
    d->per_stage_rc = per_stage_rc;
    d->fixed_rc = fixed_rc;
    /* kinds of range: (dense layers, MoE layers); of one kind, the kind is the length */
    const int nm_max = (int)ap_model_moe_layers_in(m, 0, L), nd_max = L - nm_max;
    d->nkeys = (nd_max + 1) * (nm_max + 1);
    d->dense_prefix = ap_model_dense_prefix(m);
    const int keyed = d->nkeys != L + 1;
    int *pre;
    size_t bytes;
    lay_out(d, NULL, &bytes, &pre, keyed);
    unsigned char *base = ap_malloc(bytes);
    if (!base) {
        memset(d, 0, sizeof *d);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the partition DP");
    }
    d->arena = base;
    lay_out(d, base, &bytes, &pre, keyed);
    if (keyed) {
        pre[0] = 0;
        for (int i = 0; i < L; i++) pre[i + 1] = pre[i] + ap_model_layer_is_moe(m, i);
        for (int a = 0; a <= L; a++)
            for (int n = 0; a + n <= L; n++) {
                int nm = pre[a + n] - pre[a];
                d->key[a * (L + 1) + n] = (n - nm) * (nm_max + 1) + nm;
            }
    }
    const size_t cells = (size_t)pp * (size_t)d->nkeys;
    memset(d->ok, 0, cells);
    for (size_t k = 0; k < cells; k++) d->tu[k] = d->vv[k] = INFINITY;
    d->nfilled = 0;
    return AP_OK;
}

void pdp_reset(pdp *d, int per_stage_rc, int fixed_rc) {
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->ok[k] = 0;
        d->tu[k] = d->vv[k] = INFINITY;
    }
    d->nfilled = 0;
    d->per_stage_rc = per_stage_rc;
    d->fixed_rc = fixed_rc;
    d->ignore_mem = 0;
    d->host_short = 0;
    d->cap = INFINITY;
}

void pdp_free(pdp *d) {
    ap_free(d->arena);
    memset(d, 0, sizeof *d);
}

/* legal start and lengths of stage r's range */
static int a_lo(const pdp *d, int r) { return r * d->lo; }
static int a_hi(const pdp *d, int r) { return r == 0 ? 0 : d->L - (d->p - r) * d->lo; }
static int n_hi(const pdp *d, int r, int a) {
    return r == d->p - 1 ? d->L - a : d->L - a - (d->p - 1 - r) * d->lo;
}
static int n_lo(const pdp *d, int r, int a) { return r == d->p - 1 ? d->L - a : d->lo; }

/* ---- filling the table ----------------------------------------------------------------------- */

/* one range: the plan's recompute, or with per_stage_rc the least count that fits (all
 * layers when none fits: the least memory) */
static ap_status fill_seg(pdp *d, ap_stage_table *tab, int r, int a, int n, ap_err *err) {
    size_t k = pdp_seg(d, r, a, n);
    if (d->ok[k]) return AP_OK; /* a range of the same kind on this rank: the same entry */
    const ap_stage_cost *sc = NULL;
    int rc = -1;
    ap_status st;
    if (d->per_stage_rc) {
        /* memory falls as the count grows (estimate.c: fewer layers keep their activations),
         * so the least count that fits is found by bisection; none fits if n does not */
        if ((st = ap_stage_table_get(tab, r, a, n, n, &sc, err)) != AP_OK) return st;
        rc = n;
        if (sc->fits) {
            int lo = 1, hi = n;
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                const ap_stage_cost *x;
                if ((st = ap_stage_table_get(tab, r, a, n, mid, &x, err)) != AP_OK) return st;
                if (x->fits) hi = mid;
                else lo = mid + 1;
            }
            rc = lo;
            if ((st = ap_stage_table_get(tab, r, a, n, rc, &sc, err)) != AP_OK) return st;
        }
    } else {
        st = ap_stage_table_get(tab, r, a, n, d->fixed_rc > 0 ? d->fixed_rc : -1, &sc, err);
        if (st != AP_OK) return st;
    }
    d->t[k] = sc->fwd_s + sc->bwd_s;
    d->mem[k] = sc->device_bytes;
    d->ok[k] = sc->fits ? 1 : 2;
    if (!sc->host_ok) d->host_short = 1;
    d->filled[d->nfilled++] = (int)k;
    d->rc[k] = rc;
    d->seg_a[k] = a;
    d->seg_n[k] = n;
    return AP_OK;
}

/* The start of rank r's ranges that a prefill prices: its first legal start, past the dense
 * prefix of a mixed model (rank 0 starts at 0); -1 when it has none there. */
static int prefill_start(const pdp *d, int r) {
    int D = d->key ? d->dense_prefix : 0, a = a_lo(d, r);
    if (r > 0 && a < D) a = D;
    return a <= a_hi(d, r) ? a : -1;
}

/* Models of one layer kind, the plan's (or one) recompute count: a range's cost
 * depends on its rank and length only, so the lengths each rank needs are priced rank-parallel
 * (ap_stage_table_fill_n), n = lo, lo + 1, ... until every rank's stage exceeds tcap. So are a
 * model's MoE layers after a dense prefix: rank 0's ranges from layer 0 and the others' past
 * the prefix (the ranges that reach into it are priced one by one on use). */
static ap_status prefill(pdp *d, ap_stage_table *tab, double tcap, ap_err *err) {
    if (d->per_stage_rc || (d->key && d->dense_prefix < 0) || d->p < 2) return AP_OK;
    int active[AP_MAX_STAGES], na = 0;
    for (int r = 0; r < d->p; r++)
        if (prefill_start(d, r) >= 0) active[na++] = r;
    const int rc = d->fixed_rc > 0 ? d->fixed_rc : -1;
    for (int n = d->lo; na > 0 && n <= d->L; n++) {
        int ranks[AP_MAX_STAGES], k = 0;
        for (int i = 0; i < na; i++) {
            int r = active[i], a = prefill_start(d, r);
            int nmax = r == d->p - 1 ? d->L - a : n_hi(d, r, a);
            if (n <= nmax) ranks[k++] = r;
        }
        if (k == 0) break;
        ap_status st = ap_stage_table_fill_n(tab, ranks, k, n, rc, err);
        if (st != AP_OK) return st;
        /* a rank whose stage of n layers exceeds the cap needs no longer ones */
        int na2 = 0;
        for (int i = 0; i < k; i++) {
            const ap_stage_cost *sc;
            int r = ranks[i], a = r == d->p - 1 ? d->L - n : prefill_start(d, r);
            if ((st = ap_stage_table_get(tab, r, a, n, rc, &sc, err)) != AP_OK) return st;
            if (sc->fwd_s + sc->bwd_s <= tcap) active[na2++] = r;
        }
        na = na2;
    }
    return AP_OK;
}

/* Rank r's ranges from start a, lengths upwards to the first past the cap (or the limit). */
static ap_status fill_starts(pdp *d, ap_stage_table *tab, int r, int a, double tcap, ap_err *err) {
    int n = n_lo(d, r, a);
    for (; n <= n_hi(d, r, a); n++) {
        ap_status st = fill_seg(d, tab, r, a, n, err);
        if (st != AP_OK) return st;
        if (d->t[pdp_seg(d, r, a, n)] > tcap) break;
    }
    d->nmax[r * (d->L + 1) + a] = n <= n_hi(d, r, a) ? n : n_hi(d, r, a);
    return AP_OK;
}

ap_status pdp_fill(pdp *d, ap_stage_table *tab, double tcap, ap_err *err) {
    const int L = d->L;
    ap_status pst = prefill(d, tab, tcap, err);
    if (pst != AP_OK) return pst;
    for (int r = 0; r < d->p; r++) {
        const int ahi = a_hi(d, r);
        if (r == d->p - 1) {
            /* the last rank ends at layer L: its lengths grow as its start falls; the starts
             * below the first range past the cap read none */
            for (int a = a_lo(d, r); a <= ahi; a++) d->nmax[r * (L + 1) + a] = L - a - 1;
            for (int a = ahi; a >= a_lo(d, r); a--) {
                ap_status st = fill_seg(d, tab, r, a, L - a, err);
                if (st != AP_OK) return st;
                d->nmax[r * (L + 1) + a] = L - a;
                if (d->t[pdp_seg(d, r, a, L - a)] > tcap) break;
            }
            continue;
        }
        /* the starts inside a dense prefix (mixed kinds): one by one, as below */
        int from = a_lo(d, r);
        if (d->key && d->dense_prefix > 0 && r > 0) {
            for (; from < d->dense_prefix && from <= ahi; from++) {
                ap_status st = fill_starts(d, tab, r, from, tcap, err);
                if (st != AP_OK) return st;
            }
        }
        if (from <= ahi && (d->nkeys == L + 1 || (d->dense_prefix > 0 && r > 0))) {
            /* one layer kind, or past a dense prefix: a range's entry depends on its length
             * only (the key is n, or (0 dense, n MoE)), so the first length past the cap is
             * one per rank, n* (or none), and every start's ranges end there or at their own
             * limit: the loop below, start by start, fills the same entries and finds
             * min(n*, n_hi) for each */
            const int a0 = from, nl = n_lo(d, r, a0), nh0 = n_hi(d, r, a0);
            int nstar = nh0 + 1;
            for (int n = nl; n <= nh0; n++) {
                ap_status st = fill_seg(d, tab, r, a0, n, err);
                if (st != AP_OK) return st;
                if (d->t[pdp_seg(d, r, a0, n)] > tcap) {
                    nstar = n;
                    break;
                }
            }
            for (int a = a0; a <= ahi; a++) {
                int nh = n_hi(d, r, a);
                d->nmax[r * (L + 1) + a] = nstar <= nh ? nstar : nh;
            }
            continue;
        }
        for (int a = from; a <= ahi; a++) {
            ap_status st = fill_starts(d, tab, r, a, tcap, err);
            if (st != AP_OK) return st;
        }
    }
    return AP_OK;
}

int pdp_longest(const pdp *d) {
    int n = 0;
    for (int r = 0; r < d->p; r++)
        for (int a = a_lo(d, r); a <= a_hi(d, r); a++) {
            int x = d->nmax[r * (d->L + 1) + a];
            if (x >= n_lo(d, r, a) && x > n) n = x;
        }
    return n;
}

ap_status pdp_fill_split(pdp *d, ap_stage_table *tab, const int *split, ap_err *err) {
    for (int r = 0, a = 0; r < d->p; a += split[r], r++) {
        ap_status st = fill_seg(d, tab, r, a, split[r], err);
        if (st != AP_OK) return st;
    }
    return AP_OK;
}

int pdp_split_fits(const pdp *d, const int *split) {
    for (int r = 0, a = 0; r < d->p; a += split[r], r++)
        if (split[r] < n_lo(d, r, a) || split[r] > n_hi(d, r, a) ||
            d->ok[pdp_seg(d, r, a, split[r])] != 1)
            return 0;
    return 1;
}

/* ---- the passes ------------------------------------------------------------------------------ */

/* a range the DP may use: legal and fitting (or any legal one when memory is ignored) */
static int usable(const pdp *d, size_t k) {
    return d->ok[k] == 1 || (d->ok[k] && d->ignore_mem);
}

enum { P_SUM, P_MAX };

/* the value a range of n layers from a gives the prefix fa: the pass's own arithmetic */
static double pass_val(int op, double fa, double x) {
    return op == P_SUM ? fa + x : (fa > x ? fa : x);
}

/* The starts a pass visits on rank r: the legal ones it reached ([flo, fhi] of the last pass) */
static void pass_starts(const pdp *d, int r, int *a0, int *a1) {
    *a0 = d->flo[r] > a_lo(d, r) ? d->flo[r] : a_lo(d, r);
    *a1 = d->fhi[r] < a_hi(d, r) ? d->fhi[r] : a_hi(d, r);
}

/* The split ending at layer L, read back from the pass's values: the range of stage r ending
 * at j is the first start a (ascending) whose value equals f(r + 1, j), the one the pass's
 * strict "<" kept (the same arithmetic gives the same bits). No choice table is written: the
 * pass's inner loop stays a branch-free min. */
static void read_back(const pdp *d, int op, const double *vals, int *split) {
    const int L = d->L;
    int j = L;
    for (int r = d->p - 1; r >= 0; r--) {
        const double *fr = d->f + (size_t)r * (size_t)(L + 1);
        const double *vr = vals + (size_t)r * (size_t)d->nkeys;
        const double want = d->f[(size_t)(r + 1) * (size_t)(L + 1) + (size_t)j];
        int lo, hi;
        pass_starts(d, r, &lo, &hi);
        if (lo < j - d->span[r]) lo = j - d->span[r];
        if (hi > j) hi = j;
        for (int a = lo; a <= hi; a++) {
            int n = j - a;
            if (fr[a] == INFINITY || n < n_lo(d, r, a) || n > d->nmax[r * (L + 1) + a]) continue;
            if (pass_val(op, fr[a], vr[pdp_seg(d, 0, a, n)]) == want) {
                split[r] = n;
                j = a;
                break;
            }
        }
    }
}

/* The ranges from prefix fa, lengths n0..n1: the targets up to n_old were written before (a
 * min), those after are new (written). ka NULL: one layer kind, the key of (a, n) is n. Called
 * with constant op and ka, so each call site is its own loop. */
static inline void relax(double *restrict fna, const double *restrict vr, const int *ka, int op,
                         double fa, int n0, int n_old, int n1) {
    const int e = n_old < n1 ? n_old : n1; /* the last target written before */
    int n = n0;
    for (; n <= e; n++) {
        double v = pass_val(op, fa, vr[ka ? ka[n] : n]);
        fna[n] = v < fna[n] ? v : fna[n];
    }
    for (; n <= n1; n++) fna[n] = pass_val(op, fa, vr[ka ? ka[n] : n]);
}

/* One pass over the prefixes with the per-range values vals (INFINITY: range not allowed):
 * f(r + 1, a + n) = min_a f(r, a) (+ or max) vals(r, a, n). Only the prefixes a rank can reach
 * are visited and written ([flo, fhi]: where the ranges of the previous rank ended; the first
 * range to reach a prefix writes it, the later ones take the min). Writes the split; returns
 * the value of the whole model, INFINITY when no split qualifies. */
static double pass(pdp *d, int op, const double *vals, int *split) {
    const int L = d->L, p = d->p;
    d->f[0] = 0;
    d->flo[0] = d->fhi[0] = 0;
    for (int r = 0; r < p; r++) {
        const double *fr = d->f + (size_t)r * (size_t)(L + 1);
        double *fn = d->f + (size_t)(r + 1) * (size_t)(L + 1);
        const double *vr = vals + (size_t)r * (size_t)d->nkeys;
        const int *nmax = d->nmax + r * (L + 1);
        const int last = r == p - 1;
        int a0, a1;
        pass_starts(d, r, &a0, &a1);
        int jlo = -1, jhi = -1, span = 0;
        for (int a = a0; a <= a1; a++) {
            const double fa = fr[a];
            const int n0 = last ? L - a : d->lo, n1 = nmax[a];
            if (fa == INFINITY || n1 < n0) continue;
            /* the ranges from a end at a + n0 .. a + n1; a + n0 never falls as a grows, so
             * the prefixes written so far are [jlo, jhi] (a gap before a + n0: none reach it) */
            if (jlo < 0) jlo = a + n0, jhi = jlo - 1;
            while (jhi < a + n0 - 1) fn[++jhi] = INFINITY;
            if (n1 > span) span = n1;
            double *fna = fn + a;
            const int n_old = jhi - a;
            /* past a dense prefix the kind of a range is its length, as without keys */
            const int keyed = d->key && !(d->dense_prefix > 0 && a >= d->dense_prefix);
            if (!keyed && op == P_SUM) relax(fna, vr, NULL, P_SUM, fa, n0, n_old, n1);
            else if (!keyed) relax(fna, vr, NULL, P_MAX, fa, n0, n_old, n1);
            else relax(fna, vr, d->key + a * (L + 1), op, fa, n0, n_old, n1);
            if (a + n1 > jhi) jhi = a + n1;
        }
        if (jlo < 0) return INFINITY; /* no range from a reachable prefix */
        d->flo[r + 1] = jlo;
        d->fhi[r + 1] = jhi;
        d->span[r] = span;
    }
    if (d->flo[p] > L || d->fhi[p] < L) return INFINITY;
    double best = d->f[(size_t)p * (size_t)(L + 1) + (size_t)L];
    if (best < INFINITY) read_back(d, op, vals, split);
    return best;
}

/* least sum with every stage <= bound (and usable); writes the split; returns its sum or
 * INFINITY */
static double min_sum(pdp *d, double bound, int *split) {
    if (bound == INFINITY) return pass(d, P_SUM, d->tu, split);
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->vv[k] = d->tu[k] <= bound ? d->tu[k] : INFINITY;
    }
    return pass(d, P_SUM, d->vv, split);
}

enum { MM_TIME_USABLE, MM_MEM_LEGAL, MM_MEM_FIT_BOUND };

/* least max over a split (minimax): of the stage time over usable ranges (the least feasible
 * bound; d->tu as pdp_solve set it), of the memory over all legal ranges, or over fitting
 * ranges of time <= bound; returns it, INFINITY when no split qualifies */
static double minimax(pdp *d, int mode, double bound, int *split) {
    if (mode == MM_TIME_USABLE) return pass(d, P_MAX, d->tu, split);
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        int allow = mode == MM_MEM_LEGAL ? d->ok[k] != 0 : d->ok[k] == 1 && d->t[k] <= bound;
        d->vv[k] = allow ? d->mem[k] : INFINITY;
    }
    return pass(d, P_MAX, d->vv, split);
}

double pdp_min_peak(pdp *d, int only_fit, double bound, int *split) {
    return minimax(d, only_fit ? MM_MEM_FIT_BOUND : MM_MEM_LEGAL, bound, split);
}

double pdp_split_peak(const pdp *d, const int *split) {
    double pk = 0;
    for (int r = 0, a = 0; r < d->p; a += split[r], r++)
        pk = fmax(pk, d->mem[pdp_seg(d, r, a, split[r])]);
    return pk;
}

double pdp_split_T(const pdp *d, const int *split, double *mx_out) {
    double s = 0, mx = 0;
    int a = 0;
    for (int r = 0; r < d->p; r++) {
        double t = d->t[pdp_seg(d, r, a, split[r])];
        s += t;
        if (t > mx) mx = t;
        a += split[r];
    }
    if (mx_out) *mx_out = mx;
    return (s + d->w * mx) / d->v;
}

/* v[0..n) ascending (finite values: candidates() keeps no NaN): quicksort on the median of
 * three with the smaller side recursed, insertion sort below 16 elements. In place of qsort,
 * whose comparator call per comparison cost more than the rest of a re-split's DP. */
static void sort_doubles(double *v, size_t n) {
    while (n > 16) {
        double a = v[0], b = v[n / 2], c = v[n - 1];
        double piv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = 0, j = n - 1;
        for (;;) {
            while (v[i] < piv) i++;
            while (v[j] > piv) j--;
            if (i >= j) break;
            double t = v[i];
            v[i] = v[j];
            v[j] = t;
            i++;
            j--;
        }
        /* [0, j] <= piv <= [j + 1, n): recurse into the smaller part, loop on the larger */
        size_t left = j + 1, right = n - left;
        if (right == 0) break; /* cannot happen with a median of three: insertion sort */
        if (left < right) {
            sort_doubles(v, left);
            v += left;
            n = right;
        } else {
            sort_doubles(v + left, right);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        double x = v[i];
        size_t k = i;
        for (; k > 0 && v[k - 1] > x; k--) v[k] = v[k - 1];
        v[k] = x;
    }
}

/* The usable stage times (d->tu as pdp_solve set it) in [lo, hi], ascending, without repeats,
 * into d->cand. */
static size_t candidates(pdp *d, double lo, double hi) {
    size_t n = 0;
    for (int i = 0; i < d->nfilled; i++) {
        double t = d->tu[d->filled[i]];
        if (t < INFINITY && t >= lo && t <= hi) d->cand[n++] = t;
    }
    sort_doubles(d->cand, n);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || d->cand[i] != d->cand[u - 1]) d->cand[u++] = d->cand[i];
    return u;
}

int pdp_solve(pdp *d, int *best) {
    int *tmp = d->tmp;
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->tu[k] = usable(d, (size_t)k) ? d->t[k] : INFINITY;
    }
    double s_min = min_sum(d, INFINITY, best);
    if (s_min == INFINITY) return 0;
    /* every split's sum is at least s_min and its largest stage at least b_star (below), so
     * its T at least their (s_min + w b_star) / v: past the cap (with a margin for the
     * rounding of sums taken in another order), no split is wanted */
    if (s_min / d->v >= d->cap * (1 + 1e-9)) return 0;
    double best_T = pdp_split_T(d, best, NULL);
    if (d->w > 0) {
        /* the least feasible bound, then the bounds that could still beat best_T (a margin
         * for the rounding of the division; the scan's own test is exact) */
        double b_star = minimax(d, MM_TIME_USABLE, INFINITY, tmp);
        if ((s_min + d->w * b_star) / d->v >= d->cap * (1 + 1e-9)) return 0;
        double b_hi = (d->v * best_T - s_min) / d->w;
        size_t ncand = candidates(d, b_star, b_hi + fabs(b_hi) * 1e-9);
        for (size_t i = 0; i < ncand; i++) {
            if ((d->w * d->cand[i] + s_min) / d->v >= best_T) break;
            if (min_sum(d, d->cand[i], tmp) == INFINITY) continue;
            double T = pdp_split_T(d, tmp, NULL);
            if (T < best_T) {
                best_T = T;
                memcpy(best, tmp, sizeof(int) * (size_t)d->p);
            }
        }
    }
    /* ties: many splits share the optimal T (the sum of stage times barely depends on the
     * split); among those with the same max, prefer the least peak memory. "Same T" up to the
     * rounding of summing the same stage times in another order (1e-12 relative). With memory
     * ignored only the least T is wanted (a bound), not the split */
    if (d->ignore_mem) return 1;
    double mx;
    pdp_split_T(d, best, &mx);
    if (pdp_min_peak(d, 1, mx, tmp) < pdp_split_peak(d, best) &&
        pdp_split_T(d, tmp, NULL) <= best_T * (1 + 1e-12))
        memcpy(best, tmp, sizeof(int) * (size_t)d->p);
    return 1;
}

/* ---- probing a larger count ------------------------------------------------------------------
 * With Megatron's one count K no range's memory grows with K and no range's time falls with it
 * (what the count loop's breaks and the per-stage bisection rely on). So a split that fits at a
 * count K' in (K, K2] fits at K2, with stage times at K' no less than at K: when no split that
 * fits at K2 has T below U with the times of K, no count in (K, K2] has a fitting split below U.
 * A probe tells that from d as filled for count K under the cap U. A range that fits at K fits
 * at K2, and one of n <= K layers recomputes all n at both: only the longer ranges that do not
 * fit at K are priced at K2, rank-parallel by length as a fill prices them (an entry that stays
 * unpriced, a range reaching into a dense prefix, counts as fitting). It then bounds the least
 * T with K's times and K2's verdicts, (least sum + w x least max) / v over the splits that fit
 * (two DP passes): a bound below U stops the skip, as the least T would. d is left as it was,
 * but for host_short, which a probed entry short of host memory sets. */
ap_status pdp_probe_count(pdp *d, ap_stage_table *tab, int k2, double U, int *any, ap_err *err) {
    *any = 1;
    const int k1 = d->fixed_rc, L = d->L;
    if (d->per_stage_rc || d->v != 1 || k1 < 1 || k2 <= k1 || !(U > 0) || U == INFINITY)
        return AP_OK;
    /* the ranges to price, grouped by length (a counting sort into pseg) */
    int *cnt = d->nstart;
    for (int n = 0; n <= L + 1; n++) cnt[n] = 0;
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        if (d->ok[k] == 2 && d->seg_n[k] > k1) cnt[d->seg_n[k] + 1]++;
    }
    for (int n = 1; n <= L + 1; n++) cnt[n] += cnt[n - 1];
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        if (d->ok[k] == 2 && d->seg_n[k] > k1) d->pseg[cnt[d->seg_n[k]]++] = k;
    }
    /* cnt[n] is now the end of length n's group; the group starts at cnt[n - 1] (0 for n 0) */
    unsigned char seen[AP_MAX_STAGES];
    for (int n = k1 + 1, from = cnt[k1]; n <= L; from = cnt[n], n++) {
        if (from == cnt[n]) continue;
        /* the ranks with ranges of n layers to price (a rank may have several kinds of that
         * length), ascending and distinct as fill_n wants them */
        memset(seen, 0, (size_t)d->p);
        for (int j = from; j < cnt[n]; j++) seen[d->pseg[j] / d->nkeys] = 1;
        int ranks[AP_MAX_STAGES], nr = 0;
        for (int r = 0; r < d->p; r++)
            if (seen[r]) ranks[nr++] = r;
        ap_status st = ap_stage_table_fill_n(tab, ranks, nr, n, k2, err);
        if (st != AP_OK) return st;
    }
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->ok_keep[i] = d->ok[k];
        if (d->ok[k] != 2 || d->seg_n[k] <= k1) continue;
        const ap_stage_cost *sc =
            ap_stage_table_peek(tab, k / d->nkeys, d->seg_a[k], d->seg_n[k], k2);
        d->ok[k] = !sc || sc->fits ? 1 : 2;
        if (sc && !sc->host_ok) d->host_short = 1;
    }
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->tu[k] = usable(d, (size_t)k) ? d->t[k] : INFINITY;
    }
    int split[AP_MAX_STAGES];
    double s_min = min_sum(d, INFINITY, split);
    *any = s_min < INFINITY &&
           (s_min + d->w * minimax(d, MM_TIME_USABLE, INFINITY, split)) / d->v < U;
    for (int i = 0; i < d->nfilled; i++) {
        int k = d->filled[i];
        d->ok[k] = d->ok_keep[i];
        d->tu[k] = usable(d, (size_t)k) ? d->t[k] : INFINITY;
    }
    return AP_OK;
}

/* ---- restricted trainers --------------------------------------------------------------------- */

ap_status pdp_restricted(const pdp *d, const ap_trainer_caps *tr, int first_last,
                         const int *uniform, int *best, int *fits, char *note, size_t note_n) {
    int have_fit = 0;
    double best_T = INFINITY, best_peak = INFINITY;
    int *s = ap_malloc(sizeof(int) * (size_t)d->p);
    if (!s) return AP_ERR_NOMEM;
    /* candidates: uniform, or (first f, middle k each, last l) */
    int kmax = first_last && d->p >= 3 ? d->L : 0;
    for (int k = 0; k <= kmax; k++) {
        int fmax_ = kmax ? d->L : 0;
        for (int f = 0; f <= fmax_; f++) {
            if (!kmax) {
                memcpy(s, uniform, sizeof(int) * (size_t)d->p);
            } else {
                int l = d->L - f - (d->p - 2) * k;
                if (k < d->lo || f < d->lo || l < d->lo) continue;
                s[0] = f;
                for (int r = 1; r < d->p - 1; r++) s[r] = k;
                s[d->p - 1] = l;
            }
            int a = 0, all_fit = 1, legal = 1;
            double peak = 0;
            for (int r = 0; r < d->p; r++) {
                if (s[r] < n_lo(d, r, a) || s[r] > n_hi(d, r, a)) legal = 0;
                if (!legal) break;
                size_t q = pdp_seg(d, r, a, s[r]);
                if (d->ok[q] != 1) all_fit = 0;
                if (d->mem[q] > peak) peak = d->mem[q];
                a += s[r];
            }
            if (!legal) continue;
            double T = pdp_split_T(d, s, NULL);
            if (all_fit && (!have_fit || T < best_T)) {
                have_fit = 1;
                best_T = T;
                memcpy(best, s, sizeof(int) * (size_t)d->p);
            } else if (!have_fit && peak < best_peak) {
                best_peak = peak;
                memcpy(best, s, sizeof(int) * (size_t)d->p);
            }
        }
    }
    ap_free(s);
    *fits = have_fit;
    snprintf(note, note_n, "%s: %s", tr->name,
             kmax ? "only the first and last stage may differ" : "uniform stages only");
    return AP_OK;
}
