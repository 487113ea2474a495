/*
 * resplit.c - the search's pipelined candidates ranked with their optimal stage split and the
 * joint recompute/offload choice (search.h "Re-split"), by branch and bound.
 *
 * The exact value of a candidate is its estimate after ap_partition_solve (partition.h) splits
 * it optimally: first with its own recompute and offload, then, for its degree combination
 * (tp, cp, pp, dp, ep, vp, micro-batch, ZeRO), with the granularity, recomputed-layer counts
 * and offload fractions chosen jointly with the split. Both are far dearer than an estimate, so
 * each candidate carries a lower bound on the step time of ANY split, recompute and offload of
 * its combination (rs_lower_bound), and the candidates are taken in increasing bound: once a
 * bound cannot beat the k-th plan of the ranking, no later candidate can either.
 *
 * The bound: a "sibling" of the candidate with no recomputation, no offload and ZeRO at most 2
 * has stage times no larger than any variant's for the same layers (recomputation and ZeRO-3
 * gathers only add to a stage's time; offload moves states, not stage time: estimate.c), and
 * they are linear in the layers a stage holds, plus a constant on the first and the last rank
 * (estimate.c prices one dense and one MoE layer per plan, the embedding on the first stage and
 * the head and loss on the last). So the sum S of the stage times is the same for every split,
 * and the slowest stage M is at least S / p and at least the least M for which the ranks can
 * hold the layers, floor((M - c_r) / alpha) each (alpha the per-layer time, c_r the rank's
 * constant; models with one layer kind; with two, "two layer kinds anywhere" below, read off
 * the sibling's stage times once per degree combination: a candidate takes the more of its own
 * bound and its sibling's). The step time is at least the pipeline time
 * (S + (m v - 1) M) / v plus the point-to-point time and the fixed overhead, which no split
 * changes; every other part of the step is non-negative. A candidate recomputing k layers of
 * each stage (not linear in the layers) takes its own bound from the sibling's per-layer time
 * and its recomputed layer's ("partial recomputation" below). tests/test_search.c checks the bound
 * against the exact value of every candidate of several searches, and the ranking against
 * re-splitting every candidate.
 *
 * Under a tie margin the ranking keeps K plans per complication (search.h "Ties"), so a
 * candidate can be past every complication its answer could take long before it is past the
 * k-th plan overall; such a candidate is passed over (class_cut), not solved: under a margin
 * of 0.5 most of the fixed phase's solves were of answers the ranking then turned away.
 *
 * Not here: the enumeration (search.c), the DP and the ILP (partition*.c, ilp.c).
 */
#include "search_int.h"
#include "partition_int.h"
#include "autoplan/threads.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int rs_applies(const ap_search_opts *o) {
    return o->resplit && ap_trainer_get(o->fixed.trainer)->uneven_stages;
}

/* ---- the lower bound --------------------------------------------------------------------------- */

/* Plan q, in place, at ZeRO stage z without offload (offload moves states, not stage time),
 * with the ZeRO group and the parameter-gather overlap the trainer keeps at z. */
static void at_zero(ap_plan *q, int z) {
    const ap_trainer_caps *tr = ap_trainer_get(q->trainer);
    q->offload_optimizer = q->offload_params = 0;
    q->zero = z;
    /* a stage the trainer does not group shards over all ranks: no slower per stage */
    if (!(tr->zero_group_mask & (1u << z))) q->zero_group = 0;
    q->overlap_param = q->overlap_param && (tr->overlap_param_zero_mask & (1u << z));
}

/* The sibling of plan p (no recomputation or offload, ZeRO at most 2) that the trainer runs;
 * 0 when none does. */
static int sibling(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                   const ap_plan *p, ap_plan *q) {
    static const int zs[4][3] = {{0, -1, -1}, {1, 0, -1}, {2, 0, 1}, {2, 0, 1}};
    for (int i = 0; i < 3; i++) {
        int z = zs[p->zero < 0 ? 0 : p->zero > 3 ? 3 : p->zero][i];
        if (z < 0) break;
        *q = *p;
        q->recompute = AP_RECOMPUTE_NONE;
        q->recompute_layers = 0;
        at_zero(q, z);
        if (ap_plan_check(q, m, c, o->allow_cross_node_tp, NULL) == AP_OK) return 1;
    }
    return 0;
}

/* Least M with every rank r holding at least lo and together all L layers, rank r holding
 * floor((M - c_r) / alpha) at most (c_r = 0 but on the first and the last).
 *
 * In units of alpha (x = M / alpha, d_r = c_r / alpha) rank r holds floor(x - d_r): each count
 * steps up where x - d_r is whole, so the least x is a step of one of the three kinds, d_k + j
 * for a whole j. At x = d_k + j rank r holds j + floor(d_k - d_r) (worked out once per pair, 9
 * floors), so each kind's least j is an integer bisection with no floating point in its loop;
 * the least of the three is the answer. The counts take a 1e-9 margin up against rounding (a
 * capacity counted high only lowers the bound), and the value may sit an ulp above the exact
 * one, which rs_bound's (1 - 1e-9) absorbs. */
static double least_max(int p, int L, int lo, double alpha, double c_first, double c_last) {
    const double d[3] = {c_first / alpha, c_last / alpha, 0};
    double best = INFINITY;
    for (int k = 0; k < 3; k++) {
        int64_t off[3];
        for (int r = 0; r < 3; r++) off[r] = (int64_t)floor(d[k] - d[r] + 1e-9);
        /* the least j >= 0 at which every rank holds lo and all hold L: held(j) grows with j,
         * and at j = L + the largest gap every rank holds L */
        int64_t gap = 0;
        for (int r = 0; r < 3; r++) gap = off[r] < -gap ? -off[r] : gap;
        int64_t jlo = 0, jhi = (int64_t)L + (int64_t)lo + gap;
        while (jlo < jhi) {
            int64_t j = jlo + (jhi - jlo) / 2, kf = j + off[0], kl = j + off[1], km = j + off[2];
            int ok = kf >= lo && kl >= lo && km >= lo &&
                     (kf < L ? kf : L) + (kl < L ? kl : L) + (int64_t)(p - 2) * (km < L ? km : L) >= L;
            if (ok) jhi = j;
            else jlo = j + 1;
        }
        double x = d[k] + (double)jlo;
        if (x < best) best = x;
    }
    return best * alpha;
}

/* ---- two layer kinds anywhere ------------------------------------------------------------------
 * Layers of two kinds placed otherwise than a dense prefix on the first rank (Llama 4's MoE
 * layer every interleave_moe_layer_step layers; DeepSeek's dense prefix spread over ranks): a
 * rank of d dense and m MoE layers takes c + a d + b m (estimate.c prices one layer of each
 * kind; c is the first and the last rank's constant, 0 on the others), with the rates a, b >= 0
 * unknown. A middle rank of the uniform layout holding (d_k, m_k) in x_k says a d_k + b m_k =
 * x_k, so any (d, m) costs at least x_k min(d / d_k, m / m_k), the least of the linear cost over
 * that segment of rates (at one of its ends), and at most x_k max(d / d_k, m / m_k): the most of
 * the lower readings over the middle ranks bounds a rank's cost from below, the least of the
 * upper ones from above (and so the first and the last rank's constants from below, c >= x -
 * upper). A middle rank of a split holds some range of n layers, whose MoE layers number
 * between the least and the most of any range of n (every count between is some range's: a
 * range moved by one layer gains or loses at most one); the first rank holds [0, n), the last
 * [L - n, L). Each rank's least time grows with its n, so the least M at which the ranks can
 * hold the L layers, one at least each, is at most the slowest rank of any split: one of the
 * ranks' least times (tk_least_max). One chunk per rank (v = 1). The weights of a rank read
 * the same way bound the data-parallel reduction of MoE models (rest_bound). */
#define TK_MAX 6     /* middle-rank layer mixes kept (any subset gives a bound) */
#define TK_LMAX 1024 /* layers at most (a table of every count on the stack) */

/* The model's MoE layers, which depend on its layer count, dense prefix and MoE period only
 * (ap_model_layer_is_moe): in [0, n) (pre), and the least and most in any n consecutive layers.
 * Worked out once per pattern and thread: a search keeps one model, and every fill of the
 * re-split's memo reads them. */
typedef struct {
    int valid, moe;
    int64_t L, fd, f;
    int pre[TK_LMAX + 1], lo[TK_LMAX + 1], hi[TK_LMAX + 1];
} tk_pattern;

static const tk_pattern *tk_pattern_of(const ap_model *m) {
    static _Thread_local tk_pattern pat;
    const int64_t L = m->layers, fd = m->moe.first_dense_layers,
                  f = m->moe.layer_freq > 0 ? m->moe.layer_freq : 1;
    const int moe = m->moe.experts > 0;
    if (pat.valid && pat.L == L && pat.fd == fd && pat.f == f && pat.moe == moe) return &pat;
    for (int64_t n = 0; n <= L; n++) {
        pat.pre[n] = (int)ap_model_moe_layers_in(m, 0, n);
        /* ranges starting past the dense layers repeat with the MoE period */
        int64_t stop = fd + f - 1 < L - n ? fd + f - 1 : L - n, lo = INT64_MAX, hi = -1;
        for (int64_t a = 0; a <= stop; a++) {
            int64_t mo = ap_model_moe_layers_in(m, a, a + n);
            lo = mo < lo ? mo : lo;
            hi = mo > hi ? mo : hi;
        }
        pat.lo[n] = (int)lo;
        pat.hi[n] = (int)hi;
    }
    pat.L = L, pat.fd = fd, pat.f = f, pat.moe = moe, pat.valid = 1;
    return &pat;
}

typedef struct {
    const tk_pattern *pat;
    int L, pp, nk;
    int kd[TK_MAX], km[TK_MAX];
    double kx[TK_MAX];
    double c[3];       /* the constants of the first, a middle and the last rank */
    double *T[3];      /* each rank kind's least time for 0..L layers, NAN until worked out */
} two_kinds;

static inline double tk_min(double a, double b) { return b < a ? b : a; }
static inline double tk_max(double a, double b) { return b > a ? b : a; }

static double tk_lower(const two_kinds *t, double d, double mo) {
    double lb = 0;
    for (int k = 0; k < t->nk; k++) {
        double r = INFINITY;
        if (t->kd[k] > 0) r = d / t->kd[k];
        if (t->km[k] > 0) r = tk_min(r, mo / t->km[k]);
        lb = tk_max(lb, t->kx[k] * r);
    }
    return lb;
}

static double tk_upper(const two_kinds *t, double d, double mo) {
    double ub = INFINITY;
    for (int k = 0; k < t->nk; k++) {
        double r = 0;
        if (d > 0) r = t->kd[k] > 0 ? d / t->kd[k] : INFINITY;
        if (mo > 0) r = tk_max(r, t->km[k] > 0 ? mo / t->km[k] : INFINITY);
        ub = tk_min(ub, r == INFINITY ? INFINITY : t->kx[k] * r);
    }
    return ub;
}

/* Least time of rank kind w (0 first, 1 middle, 2 last) holding n layers */
static double tk_eval(const two_kinds *t, int w, int n) {
    const tk_pattern *pt = t->pat;
    if (w != 1) {
        double mo = w == 0 ? pt->pre[n] : pt->pre[t->L] - pt->pre[t->L - n];
        return t->c[w] + tk_lower(t, n - mo, mo);
    }
    double best = INFINITY;
    for (int mo = pt->lo[n]; mo <= pt->hi[n]; mo++)
        best = tk_min(best, tk_lower(t, (double)(n - mo), (double)mo));
    return best;
}

static double tk_time(const two_kinds *t, int w, int n) {
    double *T = t->T[w];
    if (T[n] != T[n]) T[n] = tk_eval(t, w, n); /* NAN: not worked out yet */
    return T[n];
}

/* The most layers (0..L) rank kind w holds within M: -1 when not even none (the least times
 * grow with the layers) */
static int tk_count(const two_kinds *t, int w, double M) {
    int lo = -1, hi = t->L;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (tk_time(t, w, mid) <= M) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Layers the first and the last rank hold together within M */
static int tk_ends(const two_kinds *t, double M) {
    return tk_count(t, 0, M) + tk_count(t, 2, M);
}

/* The least of max(first rank's time for i, last rank's for R - i) over 1 <= i, R - i <= L: the
 * least M at which the two hold R layers (the first rank's time grows with i, the last's falls),
 * at the crossing found by bisection */
static double tk_ends_least(const two_kinds *t, int R) {
    int lo = R - t->L > 1 ? R - t->L : 1, hi = R - 1 < t->L ? R - 1 : t->L;
    if (lo > hi) return INFINITY;
    /* the least i in [lo, hi] where the first rank's time reaches the last's */
    int a = lo, b = hi;
    while (a < b) {
        int mid = a + (b - a) / 2;
        if (tk_time(t, 0, mid) >= tk_time(t, 2, R - mid)) b = mid;
        else a = mid + 1;
    }
    double best = tk_max(tk_time(t, 0, a), tk_time(t, 2, R - a));
    if (a > lo) best = tk_min(best, tk_max(tk_time(t, 0, a - 1), tk_time(t, 2, R - a + 1)));
    return best;
}

/* The least M at which every rank holds a layer and the ranks hold the L layers: first the
 * least count k of the middle ranks at whose time T1(k) they do, then whether the first and
 * the last rank can take what the middle ones leave at k - 1 in the times below T1(k) */
static double tk_least_max(const two_kinds *t) {
    const int L = t->L, mid_ranks = t->pp - 2;
    const double low = tk_max(tk_max(tk_time(t, 0, 1), tk_time(t, 1, 1)), tk_time(t, 2, 1));
    if ((int64_t)mid_ranks * tk_count(t, 1, low) + tk_ends(t, low) >= L) return low;
    int lo = 1, hi = L;
    while (lo < hi) {
        int k = lo + (hi - lo) / 2;
        double M = tk_max(low, tk_time(t, 1, k));
        if ((int64_t)mid_ranks * tk_count(t, 1, M) + tk_ends(t, M) >= L) hi = k;
        else lo = k + 1;
    }
    const double Mk = tk_max(low, tk_time(t, 1, lo));
    if (lo < 2) return Mk;
    /* below T1(lo) the middle ranks hold lo - 1 at most */
    double ends = tk_ends_least(t, L - mid_ranks * (lo - 1));
    double M = tk_max(tk_max(ends, low), tk_time(t, 1, lo - 1));
    return M < Mk ? M : Mk;
}

/* The two-kind bound (above) on the slowest of pp >= 3 ranks of x[r] for n[r] layers, one chunk
 * each; 0 where the layout says nothing (no middle rank with layers) or the model has more
 * than TK_LMAX layers. */
static double two_kinds_max(const ap_model *m, int pp, const double *x, const int *n) {
    two_kinds t = {.L = (int)m->layers, .pp = pp};
    if (t.L > TK_LMAX) return 0;
    t.pat = tk_pattern_of(m);
    int start[AP_MAX_STAGES + 1];
    start[0] = 0;
    for (int r = 0; r < pp; r++) start[r + 1] = start[r] + n[r];
    if (start[pp] != t.L) return 0;
    for (int r = 1; r < pp - 1; r++) {
        if (n[r] <= 0) continue;
        int mo = t.pat->pre[start[r + 1]] - t.pat->pre[start[r]], d = n[r] - mo, k = 0;
        while (k < t.nk && !(t.kd[k] == d && t.km[k] == mo)) k++;
        if (k < t.nk) t.kx[k] = tk_min(t.kx[k], x[r]);
        else if (t.nk < TK_MAX) t.kd[t.nk] = d, t.km[t.nk] = mo, t.kx[t.nk++] = x[r];
    }
    if (t.nk == 0) return 0;
    for (int w = 0; w < 3; w += 2) {
        int r = w == 0 ? 0 : pp - 1;
        double mo = t.pat->pre[start[r + 1]] - t.pat->pre[start[r]];
        double up = tk_upper(&t, n[r] - mo, mo);
        t.c[w] = up == INFINITY ? 0 : tk_max(0.0, x[r] - up);
    }
    double T[3][TK_LMAX + 1];
    for (int w = 0; w < 3; w++) {
        t.T[w] = T[w];
        for (int k = 0; k <= t.L; k++) T[w][k] = NAN;
    }
    double M = tk_least_max(&t);
    return M < INFINITY ? M : 0;
}

/* The linear reading (search_int.h lin_fit) of x[r] for n[r] layers: not ok with no middle
 * rank, or with layers of two kinds but for a dense prefix held by the first rank (those take
 * the two-kind bound, two_kinds_max, where `two` asks for it and each rank holds one chunk). */
static void fit_lin(const ap_model *m, int pp, int v, const double *x, const int *n, int two,
                    lin_fit *f) {
    double sum = 0;
    for (int r = 0; r < pp; r++) sum += x[r];
    *f = (lin_fit){0};
    f->mean = sum / pp;
    if (pp < 3) return;
    const int D = ap_model_single_kind(m) ? 0 : ap_model_dense_prefix(m);
    if (D < 0 || (D > 0 && (v > 1 || n[0] < D))) {
        if (two && v == 1) f->kinds2 = two_kinds_max(m, pp, x, n);
        return;
    }
    /* ranks of one kind repeat their (time, layers): one division per run of equal pairs */
    double alpha = INFINITY, xp = NAN;
    int np = -1;
    for (int r = 1; r < pp - 1; r++) {
        if (n[r] == np && x[r] == xp) continue;
        xp = x[r];
        np = n[r];
        if (n[r] > 0 && x[r] / n[r] < alpha) alpha = x[r] / n[r];
    }
    if (!(alpha > 0) || alpha == INFINITY) return;
    f->ok = 1;
    f->D = D;
    f->alpha = alpha;
    f->c_last = fmax(0.0, x[pp - 1] - alpha * n[pp - 1]);
    f->c_first = D > 0 ? 0 : fmax(0.0, x[0] - alpha * n[0]);
    f->Lm = (int)m->layers - D;
    f->lo = D > 0 ? 0 : v;
}

/* Least max over splits of a per-rank quantity that is alpha per layer plus c_first / c_last on
 * the first / last rank, read off a uniform layout (x[r] for n[r] layers); INFINITY-free: falls
 * back to the mean when the layout has no middle rank or layers of two kinds, but for a dense
 * prefix (DeepSeek's first_k_dense_replace) held by the first rank: then the middle ranks give
 * the MoE layer's alpha, and a bound below is the least max with the D dense layers and the
 * first rank's constant taken as free (a rank's quantity is its constant, at least 0, plus its
 * dense layers' share, at least 0, plus alpha per MoE layer), so the ranks hold the L - D MoE
 * layers, none of them at least one. */
static double fit_max(int pp, const lin_fit *f) {
    if (!f->ok) return fmax(f->mean, f->kinds2);
    return fmax(f->mean, least_max(pp, f->Lm, f->lo, f->alpha, f->c_first, f->c_last));
}

static double least_max_of(const ap_model *m, int pp, int v, const double *x, const int *n,
                           int two) {
    lin_fit f;
    fit_lin(m, pp, v, x, n, two, &f);
    return fit_max(pp, &f);
}

/* ---- partial recomputation ---------------------------------------------------------------------
 * A plan recomputing k layers of each stage in full (--recompute-num-layers k, vp 1) prices a
 * stage of n layers as its sibling's (no recomputation: alpha per layer plus the rank's
 * constant) plus min(k, n) layers' forward again (estimate.c stage_recompute: the stage's mean
 * layer, at least the launches), not linear in n. With beta the recomputed MoE (or only) layer's
 * time, read off the candidate's middle ranks against the sibling's alpha, a rank holding x
 * layers of the repeated kind takes at least c + alpha x + beta min(k, x); one that also holds
 * some of a dense prefix's D layers (j of them, a mean layer at least x / (x + j) of an MoE one,
 * as a dense layer costs at least nothing) at least c + alpha x + beta min(k, x) x / (x + D),
 * and at most D ranks hold dense layers. The least M at which the ranks can hold the Lm layers
 * that way bounds the slowest stage of every split from below. */
typedef struct {
    const lin_fit *f;
    double beta;
    int k, pp;
} rc_fit;

static double rc_time(const rc_fit *q, double c, int weak, int x) {
    double rec = q->beta * (x < q->k ? x : q->k);
    if (weak) rec *= (double)x / (double)(x + q->f->D);
    return c + q->f->alpha * x + rec;
}

/* The most layers (0..Lm) a rank of constant c holds within M: -1 when not even none */
static int rc_count(const rc_fit *q, double c, int weak, double M) {
    if (rc_time(q, c, weak, 0) > M) return -1;
    int lo = 0, hi = q->f->Lm;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (rc_time(q, c, weak, mid) <= M) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Whether the ranks can hold Lm layers with every rank's time within M */
static int rc_holds(const rc_fit *q, double M) {
    const lin_fit *f = q->f;
    const double c[3] = {f->c_first, 0, f->c_last};
    const int mult[3] = {1, q->pp - 2, 1};
    int64_t sum = 0;
    int inc[3] = {0, 0, 0};
    for (int t = 0; t < 3; t++) {
        int k = rc_count(q, c[t], 0, M);
        if (k < f->lo) return 0;
        sum += (int64_t)mult[t] * k;
        if (f->D > 0) inc[t] = rc_count(q, c[t], 1, M) - k;
    }
    /* at most D ranks hold dense layers: the D largest gains of the weakened count */
    for (int left = f->D; left > 0;) {
        int best = -1;
        for (int t = 0; t < 3; t++)
            if (mult[t] > 0 && inc[t] > 0 && (best < 0 || inc[t] > inc[best])) best = t;
        if (best < 0) break;
        int take = left < mult[best] ? left : mult[best];
        sum += (int64_t)take * inc[best];
        left -= take;
        inc[best] = 0;
    }
    return sum >= f->Lm;
}

/* The least M at which rc_holds: one of the times a rank of some kind takes for some layers
 * (the counts step there), found per kind by bisection over the layers */
static double rc_least_max(const rc_fit *q) {
    const lin_fit *f = q->f;
    const double c[3] = {f->c_first, 0, f->c_last};
    double best = INFINITY;
    for (int t = 0; t < 3; t++) {
        for (int weak = 0; weak <= (f->D > 0); weak++) {
            if (!rc_holds(q, rc_time(q, c[t], weak, f->Lm))) continue;
            int lo = 0, hi = f->Lm;
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (rc_holds(q, rc_time(q, c[t], weak, mid))) hi = mid;
                else lo = mid + 1;
            }
            best = fmin(best, rc_time(q, c[t], weak, lo));
        }
    }
    return best;
}

/* Per-rank layers of plan q's layout (all chunks of a rank): its stage_layers, or the uniform
 * split worked out once (ap_uniform_split_of) for every chunk. */
static void rank_layers(const ap_model *m, const ap_plan *q, int *n) {
    const int v = q->vp > 1 ? q->vp : 1, nch = q->pp * v;
    if (q->nchunks == nch && nch > 0) {
        for (int r = 0; r < q->pp; r++) {
            n[r] = 0;
            for (int k = 0; k < v; k++) n[r] += q->stage_layers[r + k * q->pp];
        }
        return;
    }
    const ap_uniform_split u = ap_uniform_split_of(m->layers, nch);
    for (int r = 0; r < q->pp; r++) {
        n[r] = 0;
        for (int k = 0; k < v; k++) n[r] += ap_uniform_chunk_layers(u, r + k * q->pp);
    }
}

/* The least max over splits of the ranks' weight bytes, over the most of e's uniform layout n
 * (both kinds of layers read, two_kinds_max); 0 where e holds none. */
static double params_rho(const ap_model *m, const ap_estimate *e, const int *n) {
    const ap_plan *p = &e->plan;
    double b[AP_MAX_STAGES], bmax = 0;
    for (int r = 0; r < p->pp; r++) {
        b[r] = e->stages[r].params_bytes;
        bmax = fmax(bmax, b[r]);
    }
    if (!(bmax > 0)) return 0;
    return fmin(1.0, least_max_of(m, p->pp, p->vp > 1 ? p->vp : 1, b, n, 1) / bmax);
}

/* What a split adds beyond the pipeline, bounded below. The data-parallel reduction and
 * parameter all-gather (estimate.c dp_reduction) are, for the stage with the most parameters P,
 * g(P) = n f(P / n) each: n buckets (ceil(P / B) for the trainer's bucket size B, else one per
 * layer and the embedding) of one collective f of the bucket's bytes. NCCL's model makes f a
 * latency plus bytes over a bandwidth, the least over its algorithms and protocols, so f grows
 * with the bytes and f(b) / b does not (a least of lines through non-negative intercepts).
 * Every split has P' >= rho P_u (rho = the least possible max stage parameters over the
 * uniform's, params_rho; below ZeRO-3 only, which mixes its gathers into the stage time; MoE
 * models read with both layer kinds, as the reduction counts a stage's dense and expert
 * parameters together): where its bucket b' <= b_u,
 * g(P') >= (P' / b_u) f(b_u) >= rho g(P_u); where b' > b_u, g(P') >= n' f(b_u) with n' >=
 * ceil(rho P_u / B) buckets (one per layer: n' >= 1). So g(P') >= g(P_u) min(rho, n'_lb / n_u).
 * One bucket stays exposed whatever the overlap (the last one; per micro-batch where the
 * trainer reduces every micro-batch): b' >= min(rho P_u, B / 2) (a bucket holds more than half
 * of B once there are two), or rho P_u / (L + 1) one per layer, so f(b') >= f(b_u) times that
 * over b_u when below 1. The overlap hides at most `window` backward (reduction) and forward
 * (all-gather) passes of one rank (estimate.c: ((v - 1) p + 1) / v of them under the
 * interleaved schedule, at most m), each below the pipeline time / m < k-th step / m for a split
 * that could enter the ranking. A trainer reducing every micro-batch hides up to m passes: only
 * the floor holds then. What hides slows the compute beside it (estimate.h AP_OVERLAP_COST c):
 * the step pays (1 - c) x exposed + c x total, bounded by the same with each bound (rs_bound).
 * The optimizer step grows with the stage's parameters alone (Adam's
 * passes over memory, no latency): rho of the uniform's for dense models (MoE stages shard
 * their expert states over another group, so not theirs); and with the optimizer's offload, no
 * split goes below the estimate's x_floor_s (the per-parameter optimizer and offload terms on
 * the mean rank's parameters, whose sum over the ranks no split changes), which holds for MoE
 * models and ZeRO-3 too. *opt_s: the optimizer part. */
static void rest_bound(const ap_model *m, const ap_estimate *e, const int *n, rs_memo *mm,
                       rs_cand *x, double *opt_s) {
    const ap_plan *p = &e->plan;
    const ap_time *t = &e->time;
    x->dp_s = x->dp_floor_s = x->inv_m = 0;
    *opt_s = t->x_floor_s > 0 ? t->x_floor_s : 0;
    if (p->zero >= 3) return;
    /* a plan's weights do not depend on its recompute: at its sibling's ZeRO stage, without
     * offloaded weights, they are the sibling's, read once per memo entry */
    double rho;
    if (mm && p->zero == mm->sib_zero && p->offload_params == 0) {
        if (mm->par_rho != mm->par_rho) mm->par_rho = params_rho(m, e, n); /* NAN: not yet */
        rho = mm->par_rho;
    } else {
        rho = params_rho(m, e, n);
    }
    if (!(rho > 0)) return;
    if (m->moe.experts == 0) *opt_s = fmax(*opt_s, rho * t->optimizer_s);
    double nu = t->dp_buckets, fill = t->dp_bucket_fill;
    if (!(nu >= 1) || !(t->dp_red_s + t->dp_ag_s > 0)) return;
    /* n' >= ceil(rho fill): a margin below against rounding (a count taken low only lowers
     * the bound) */
    double nlb = fill > 0 ? fmax(1.0, ceil(rho * fill * (1 - 1e-9))) : 1.0;
    double tot = fmin(rho, nlb / nu);
    double one = fmin(1.0, fill > 0 ? fmin(rho * nu, 0.5 * nu / fill)
                                    : rho * nu / ((double)m->layers + 1.0));
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    int ovl_red = p->overlap_grad && tr->overlap_grad;
    int ovl_ag = p->overlap_param && tr->param_gather_next_fwd;
    x->dp_s = tot * (t->dp_red_s + t->dp_ag_s);
    x->dp_floor_s = (ovl_red ? one * t->dp_red_one_s : tot * t->dp_red_s) +
                    (ovl_ag ? one * t->dp_ag_one_s : tot * t->dp_ag_s);
    /* a trainer reducing every micro-batch (ZeRO-2 in DeepSpeed and FSDP) hides up to m
     * backwards: only the floor holds */
    int per_mb = p->zero == 2 && (tr->grad_reduce_per_mb_zero_mask & 4u);
    if ((ovl_red || ovl_ag) && !per_mb) {
        double v = p->vp > 1 ? (double)p->vp : 1.0;
        double mb = (double)(p->grad_accum > 0 ? p->grad_accum : 1);
        x->inv_m = fmin(((v - 1.0) * p->pp + 1.0) / v, mb) / mb;
    }
}

double rs_bound(const rs_cand *x, double base_s, double kth_s) {
    double dp = x->dp_floor_s;
    if (x->inv_m > 0 && kth_s < INFINITY) dp = fmax(dp, x->dp_s - kth_s * x->inv_m);
    /* what stays exposed plus what the hidden part costs the compute beside it (estimate.h
     * AP_OVERLAP_COST): (1 - c) exposed + c total, the total at least dp_s */
    dp = (1.0 - AP_OVERLAP_COST) * dp + AP_OVERLAP_COST * x->dp_s;
    double b = (base_s + dp) * (1 - 1e-9);
    return b >= 0 ? b : 0; /* a cost model that returned no number bounds nothing */
}

/* Each rank's forward and backward per micro-batch into t; returns their sum. */
static double stage_totals(const ap_estimate *e, double *t) {
    double S = 0;
    for (int r = 0; r < e->plan.pp; r++) {
        t[r] = e->time.stage_fwd_s[r] + e->time.stage_bwd_s[r];
        S += t[r];
    }
    return S;
}

/* The pipeline (S + (m v - 1) M) / v of plan q's degrees and micro-batches from the sum S of
 * its stage times and its slowest stage M, the slowest taken at least P (estimate.h
 * par_floor_s: a rank's exposed parameter transfer, mb max(0, P - its time), falls by one
 * micro-batch's worth for each unit the slowest stage gains, and the pipeline grows by less,
 * (m v - 1) / v: the least of their sum over M >= M_least is at max(M_least, P)). */
static double pipe_of(const ap_plan *q, double S, double M, double P) {
    const int v = q->vp > 1 ? q->vp : 1;
    const double w = (double)q->grad_accum * v - 1.0;
    return (S + w * fmax(M, P)) / v;
}

/* The sum of the stage times and the least slowest stage over splits from a uniform estimate
 * whose stage times are linear in the layers (see the top of the file), n[r] the layers of
 * rank r. */
static void pipe_parts(const ap_model *m, const ap_estimate *e, const int *n, double *S,
                       double *M) {
    const ap_plan *q = &e->plan;
    const int pp = q->pp, v = q->vp > 1 ? q->vp : 1;
    double t[AP_MAX_STAGES];
    *S = stage_totals(e, t);
    *M = least_max_of(m, pp, v, t, n, 0);
}

/* The pipeline part of the bound from such an estimate, the slowest stage at least P. */
static double pipe_bound(const ap_model *m, const ap_estimate *e, const int *n, double P) {
    double S, M;
    pipe_parts(m, e, n, &S, &M);
    return pipe_of(&e->plan, S, M, P);
}

/* The sibling's stage times as the memo keeps them: their sum, least max and linear model, and
 * its pipeline bound (pipe_bound) */
static void memo_lin(const ap_model *m, const ap_estimate *e, const int *n, rs_memo *mm) {
    const ap_plan *q = &e->plan;
    const int pp = q->pp, v = q->vp > 1 ? q->vp : 1;
    const double w = (double)q->grad_accum * v - 1.0;
    double t[AP_MAX_STAGES];
    const double S = stage_totals(e, t);
    fit_lin(m, pp, v, t, n, 1, &mm->fit);
    mm->sum_s = S;
    mm->max_s = fit_max(pp, &mm->fit);
    mm->pipe_s = (S + w * mm->max_s) / v;
}

/* The pipeline part of the bound for a plan recomputing k = p->recompute_layers layers of each
 * stage (see "partial recomputation" above), from its uniform estimate e and its sibling's
 * memo entry; 0 where it does not apply (the caller keeps the sibling's bound). */
static double rc_pipe_bound(const ap_estimate *e, const int *n, const rs_memo *mm) {
    const ap_plan *p = &e->plan;
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    const int pp = p->pp, k = (int)p->recompute_layers;
    if (!mm->fit.ok || pp < 3 || p->vp > 1 || p->nchunks != 0 ||
        p->recompute != AP_RECOMPUTE_FULL || k <= 0 || p->zero != mm->sib_zero || p->zero > 2 ||
        (p->zero == 2 && tr->zero2_keeps_gathered))
        return 0;
    /* the sibling's fit: the same degrees, vp 1 */
    const lin_fit *f = &mm->fit;
    /* the recomputed layer: the least over the middle ranks (one kind: the sibling's fit) */
    double beta = INFINITY;
    for (int r = 1; r < pp - 1; r++) {
        if (n[r] <= 0) continue;
        double rec = e->time.stage_fwd_s[r] + e->time.stage_bwd_s[r] - f->alpha * n[r];
        beta = fmin(beta, rec / (n[r] < k ? n[r] : k));
    }
    if (!(beta > 0) || beta == INFINITY) return 0;
    rc_fit q = {f, beta, k, pp};
    double M = rc_least_max(&q);
    if (!(M < INFINITY)) return 0;
    return mm->sum_s + (double)(p->grad_accum - 1) * fmax(fmax(M, mm->max_s),
                                                          e->time.par_floor_s);
}

/* A plan whose stage times are linear in its layers: no partial recomputation, no ZeRO-3. */
static int linear_stages(const ap_plan *p) {
    return p->zero < 3 && !(p->recompute == AP_RECOMPUTE_FULL && p->recompute_layers > 0);
}

/* The memo entry of plan p's sibling (its least pipeline time over splits of p's layout n, and
 * its fixed overhead), estimated on a miss; *out NULL when the trainer runs no sibling. The
 * entry is keyed on p's own degrees, ZeRO stage and group and micro-batch, which with the
 * search's fixed fields make the sibling (sibling() clears the rest), so a hit neither copies
 * nor checks a plan. */
/* The memo slot of plan p's key (see sibling_memo); *hit: it holds p's entry. */
static rs_memo *memo_slot(rs_scratch *sc, const ap_plan *p, int *hit) {
    uint64_t h = (uint64_t)p->tp * 0x9E3779B97F4A7C15ull ^ (uint64_t)p->cp * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)p->pp * 0x165667B19E3779F9ull ^ (uint64_t)p->dp * 0x27D4EB2F165667C5ull ^
                 (uint64_t)p->ep * 0x85EBCA77C2B2AE63ull ^ (uint64_t)p->mbs * 0xD6E8FEB86659FD93ull ^
                 (uint64_t)(p->vp + 1024 * p->zero + 8192 * p->etp) ^
                 (uint64_t)p->zero_group * 0x94D049BB133111EBull ^ (uint64_t)p->cp_a2a;
    rs_memo *mm = &sc->memo[ap_hash_mix(h) & (RS_MEMO - 1)];
    *hit = mm->valid && mm->tp == p->tp && mm->cp == p->cp && mm->pp == p->pp &&
           mm->dp == p->dp && mm->ep == p->ep && mm->etp == p->etp && mm->vp == p->vp &&
           mm->zero == p->zero && mm->zero_group == p->zero_group && mm->mbs == p->mbs &&
           mm->cp_a2a == p->cp_a2a;
    return mm;
}

/* The signature of sibling plan q (search_int.h rs_sig). */
static void sig_of(const ap_plan *q, rs_sig *g) {
    memcpy(g->b, q, RS_SIG_HEAD);
    memcpy(g->b + RS_SIG_HEAD, (const char *)q + offsetof(ap_plan, attn_impl), RS_SIG_TAIL);
}

/* Entry mm valid for plan p's key (memo_slot's fields). */
static void memo_key(rs_memo *mm, const ap_plan *p) {
    mm->valid = 1;
    mm->tp = p->tp, mm->cp = p->cp, mm->pp = p->pp, mm->dp = p->dp, mm->ep = p->ep;
    mm->etp = p->etp;
    mm->vp = p->vp, mm->zero = p->zero, mm->zero_group = p->zero_group, mm->mbs = p->mbs;
    mm->cp_a2a = p->cp_a2a;
}

/* Memo entry mm for plan p's key from its sibling q's estimate se (NULL: the trainer runs no
 * sibling), the layout n. q is the plan as the search made it (the estimate's copy is
 * normalised: its attention kernel resolved, for one). */
static void memo_fill(const ap_model *m, rs_scratch *sc, rs_memo *mm, const ap_plan *p,
                      const ap_plan *q, const ap_estimate *se, const int *n) {
    mm->none = se == NULL;
    if (se) {
        if (sc->sig) sig_of(q, &sc->sig[mm - sc->memo]);
        memo_lin(m, se, n, mm);
        mm->overhead_s = se->time.overhead_s;
        mm->sib_zero = se->plan.zero;
        mm->par_rho = NAN; /* rest_bound reads it at its first use */
    }
    memo_key(mm, p);
}

/* Entry mm of plan p (a miss) from the entry of its sibling sc->q's own key where that entry
 * was filled from the same sibling (equal signatures): a ZeRO-3 plan's sibling is the ZeRO-2
 * plan of its degrees, which the search has mostly met as a member of its own. 1 when found. */
static int memo_shared(rs_scratch *sc, const ap_plan *p, rs_memo *mm) {
    const ap_plan *q = &sc->q;
    if (!sc->sig || (q->zero == p->zero && q->zero_group == p->zero_group))
        return 0; /* no signatures, or the same key */
    if (q->nchunks != 0) return 0;
    int hit;
    const rs_memo *src = memo_slot(sc, q, &hit);
    if (!hit || src->none || src == mm) return 0;
    rs_sig g;
    sig_of(q, &g);
    const rs_sig *have = &sc->sig[src - sc->memo];
    if (memcmp(g.b, have->b, sizeof g.b) != 0) return 0;
    *mm = *src;
    sc->sig[mm - sc->memo] = *have;
    mm->par_rho = NAN; /* read from p's own plans at their first use (rest_bound) */
    sc->shared++;
    memo_key(mm, p);
    return 1;
}

static ap_status sibling_memo(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                              const ap_estimate_opts *eo, const ap_plan *p, const int *n,
                              rs_scratch *sc, rs_memo **out, ap_err *err) {
    *out = NULL;
    int hit;
    rs_memo *mm = memo_slot(sc, p, &hit);
    if (!hit) {
        mm->valid = 0;
        int none = !sibling(m, c, o, p, &sc->q);
        if (!none && memo_shared(sc, p, mm)) {
            /* the sibling's figures, filled for the key it is its own sibling of */
#ifndef NDEBUG
            /* debug builds (the sanitizer tests) check them against a fresh estimate */
            rs_memo fresh = *mm;
            if (ap_estimate_plan(m, c, &sc->q, eo, &sc->e, err) == AP_OK) {
                memo_lin(m, &sc->e, n, &fresh);
                assert(fresh.pipe_s == mm->pipe_s && fresh.max_s == mm->max_s &&
                       sc->e.time.overhead_s == mm->overhead_s);
            }
#endif
        } else if (!none) {
            ap_status st = ap_estimate_plan(m, c, &sc->q, eo, &sc->e, err);
            if (st != AP_OK) {
                char lbl[160];
                ap_err_prefix(err, "estimating %s", ap_plan_label(&sc->q, lbl, sizeof lbl));
                return st;
            }
            memo_fill(m, sc, mm, p, &sc->q, &sc->e, n);
        } else {
            memo_fill(m, sc, mm, p, NULL, NULL, n);
        }
    }
    if (!mm->none) *out = mm;
    return AP_OK;
}

int rs_own_sibling(const ap_plan *p) {
    if (p->recompute != AP_RECOMPUTE_NONE || p->recompute_layers != 0 ||
        p->offload_optimizer != 0 || p->offload_params != 0 || p->zero < 0 || p->zero > 2)
        return 0;
    /* sibling() tries the plan's own ZeRO stage first and keeps the overlap the trainer
     * offers at it */
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    int ov = p->overlap_param && (tr->overlap_param_zero_mask & (1u << p->zero));
    return ov == p->overlap_param;
}

/* ---- ZeRO-3 plans that recompute ----------------------------------------------------------------
 * A ZeRO-3 plan's stage times are not linear in its layers (linear_stages), so its own bound is
 * its sibling's, which recomputes nothing: a plan recomputing every layer spends a third more
 * on its stages than that. Its counterpart at ZeRO-2 with the same recomputation (no offload,
 * which moves states, not stage time) has stage times no larger, ZeRO-3's gathers and
 * reductions only adding to a stage's (as for the sibling; debug builds check it on the
 * uniform layout), and linear in the layers, so its pipeline bound over splits (pipe_bound)
 * bounds the plan's. Each thread keeps the bounds by the counterpart's signature, which the
 * offload variants of one plan share. */

/* The counterpart's pipeline bound of ZeRO-3 plan e->plan (uniform, full or selective
 * recomputation of every layer), layout n; 0 where none applies or the trainer does not run
 * the counterpart. */
static ap_status z2_pipe(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                         const ap_estimate_opts *eo, const ap_estimate *e, const int *n,
                         rs_scratch *sc, double *out, ap_err *err) {
    const ap_plan *p = &e->plan;
    *out = 0;
    if (!sc->z2 || p->zero < 3 || p->recompute == AP_RECOMPUTE_NONE || p->recompute_layers > 0 ||
        p->nchunks != 0)
        return AP_OK;
    /* the signature from the plan's own fields (no copy of its layout arrays) */
    ap_plan h;
    memcpy(&h, p, RS_SIG_HEAD);
    const size_t tail = offsetof(ap_plan, attn_impl);
    memcpy((char *)&h + tail, (const char *)p + tail, RS_SIG_TAIL);
    at_zero(&h, 2);
    rs_sig g;
    sig_of(&h, &g);
    const uint64_t k = ap_hash_mix((uint64_t)p->tp * 0x9E3779B97F4A7C15ull ^
                                   (uint64_t)p->pp * 0x165667B19E3779F9ull ^
                                   (uint64_t)p->dp * 0xC2B2AE3D27D4EB4Full ^
                                   (uint64_t)p->mbs * 0xD6E8FEB86659FD93ull ^
                                   (uint64_t)(p->vp + 1024 * p->recompute + 8192 * p->cp) ^
                                   (uint64_t)p->ep * 0x85EBCA77C2B2AE63ull);
    const int i = (int)(k & (RS_Z2 - 1));
    rs_z2 *z = &sc->z2[i];
    if (!sc->z2_valid[i] || memcmp(z->sig.b, g.b, sizeof g.b)) {
        /* not kept: the counterpart's stage times, the entry replaced once they are known */
        int ok = 0;
        double sum_s = 0, max_s = 0;
        sc->q = *p;
        at_zero(&sc->q, 2);
        if (ap_plan_check(&sc->q, m, c, o->allow_cross_node_tp, NULL) == AP_OK) {
            ap_status st = ap_estimate_plan(m, c, &sc->q, eo, &sc->e, err);
            if (st != AP_OK) {
                char lbl[160];
                ap_err_prefix(err, "estimating %s", ap_plan_label(&sc->q, lbl, sizeof lbl));
                return st;
            }
#ifndef NDEBUG
            for (int r = 0; r < p->pp; r++)
                assert(sc->e.time.stage_fwd_s[r] + sc->e.time.stage_bwd_s[r] <=
                       (e->time.stage_fwd_s[r] + e->time.stage_bwd_s[r]) * (1 + 1e-9));
#endif
            pipe_parts(m, &sc->e, n, &sum_s, &max_s);
            ok = 1;
        }
        z->sig = g;
        z->ok = ok;
        z->sum_s = sum_s;
        z->max_s = max_s;
        sc->z2_valid[i] = 1;
    }
    *out = z->ok ? pipe_of(p, z->sum_s, z->max_s, e->time.par_floor_s) : 0;
    return AP_OK;
}

ap_status rs_lower_bound(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                         const ap_estimate_opts *eo, const ap_estimate *e, rs_scratch *sc,
                         rs_cand *x, double cutoff, int *useful, ap_err *err) {
    x->own_s = x->combo_s = x->opt_s = 0;
    x->dp_s = x->dp_floor_s = x->inv_m = 0;
    *useful = 1;
    /* the layers of each rank: the candidate's and its sibling's (the same layout) */
    int n[AP_MAX_STAGES];
    rank_layers(m, &e->plan, n);
    const double fixed = e->time.pp_comm_s + e->time.overhead_s;
    rs_memo *mm;
    ap_status st = sibling_memo(m, c, o, eo, &e->plan, n, sc, &mm, err);
    if (st != AP_OK || !mm) return st;
    const double sib = mm->pipe_s;
    x->combo_s = sib + fixed;
    /* the plan's own offloaded parameters: the sibling's pipeline with its slowest stage at
       least their least transfer (pipe_of; the combination's other variants may offload less) */
    const double P = e->time.par_floor_s;
    const double sib_own = P > mm->max_s ? pipe_of(&e->plan, mm->sum_s, mm->max_s, P) : sib;
    /* both bounds are at least combo_s (the sibling's stages are no slower than the
     * candidate's, the data-parallel parts are not negative): past the cutoff, neither can
     * matter */
    if (x->combo_s * (1 - 1e-9) > cutoff) {
        *useful = 0;
        return AP_OK;
    }
    double opt_s;
    rest_bound(m, e, n, mm, x, &opt_s);
    x->opt_s = opt_s;
    double own = fmax(sib_own, linear_stages(&e->plan) ? pipe_bound(m, e, n, P)
                                                        : rc_pipe_bound(e, n, mm));
    double z2;
    if ((st = z2_pipe(m, c, o, eo, e, n, sc, &z2, err)) != AP_OK) return st;
    x->own_s = fmax(own, z2) + fixed + opt_s;
    return AP_OK;
}

static double member_lb(const rs_memo *mm) {
    return fmax(0.0, (mm->pipe_s + mm->overhead_s) * (1 - 1e-9));
}

ap_status rs_member_bound(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                          const ap_estimate_opts *eo, const ap_plan *p, rs_scratch *sc,
                          double *lb, ap_err *err) {
    int n[AP_MAX_STAGES];
    rank_layers(m, p, n);
    rs_memo *mm;
    *lb = 0;
    ap_status st = sibling_memo(m, c, o, eo, p, n, sc, &mm, err);
    if (st == AP_OK && mm) *lb = member_lb(mm);
    return st;
}

double rs_member_bound_own(const ap_model *m, const ap_plan *p, const ap_estimate *e,
                           rs_scratch *sc) {
    int hit;
    rs_memo *mm = memo_slot(sc, &e->plan, &hit);
    if (!hit) {
        int n[AP_MAX_STAGES];
        rank_layers(m, &e->plan, n);
        memo_fill(m, sc, mm, &e->plan, p, e, n);
    }
    return mm->none ? 0 : member_lb(mm);
}

/* ---- the branch and bound ---------------------------------------------------------------------- */

struct job_pool;

/* A solver's scratch: the plan being split, its split and estimate (one per thread), and the
 * pool of a pool thread's. */
typedef struct {
    ap_plan_group g;
    ap_plan p;
    ap_estimate e;
    ap_partition_result pr;
    struct job_pool *pool;
} solver_ws;

/* Solves per batch ("batches of solves on threads" below); the ranking's threads at most */
#define BATCH 8
/* Entries per batch at most, solved or not */
#define SCAN 64

struct job_run;

/* The ranking's worker threads, started at the first batch that needs them and kept until the
 * ranking ends (a thread started per batch cost about as much as the batch's solves), each
 * with its workspace. */
typedef struct job_pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    struct job_run *jr; /* the batch posted last */
    /* written under mu, read without it while a thread polls (batch_pending, pool_busy) */
    _Atomic int64_t posted; /* batches posted */
    _Atomic int busy;       /* threads not done with the batch posted last */
    _Atomic int quit;
    int n;              /* threads started */
    ap_tasks team;      /* the threads: helpers (threads.h) */
    solver_ws *ws;      /* thread t's workspace: ws[t] */
} job_pool;

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    rs_cand *cands;
    int64_t n;
    topk *top;
    ap_space space;
    int threads;
    solver_ws ws;     /* the calling thread's */
    job_pool *pool;   /* threads - 1 more; NULL until the first batch that needs them */
    struct best_slot *best; /* the best split known of each plan solved ("Each plan once") */
    int64_t nbest, capbest;
    int64_t passed;   /* candidates passed over (class_cut) */
} ranker;

/* An entry of the order in which candidates (or degree combinations) are taken: increasing
 * bound, then index (the enumeration order), so the order is deterministic. */
typedef struct {
    double lb_s;
    int64_t i;
} ordered;

static int by_bound(const void *x, const void *y) {
    const ordered *a = x, *b = y;
    if (a->lb_s != b->lb_s) return a->lb_s < b->lb_s ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* plan of candidate x into w->p */
static void cand_plan(const ranker *rk, solver_ws *w, const rs_cand *x) {
    ap_space_group(&rk->space, &x->pt, &w->g);
    w->p = w->g.base;
    ap_plan_group_member(&w->g, x->rc, x->mb, &w->p);
}

/* ---- each plan once, with its best split --------------------------------------------------------
 * A plan (up to its split) ranks with the best of its splits, the uniform one included, by
 * ap_estimate_better. The walk offered every candidate's uniform estimate, and the ranking may
 * have let it go since (a complication holds K plans, the bound fell); a re-split or joint answer
 * of the same plan that is not better than its uniform one must then stay out, or the plan
 * would enter with a worse split than its own (and, a split changing its complication, could
 * take a place its best split could not: with K = 1, deepseek-v3 on 64 A100s ranked a 147.088 s
 * split that fits before the 143.761 s plan the ranking holds, because the same plan's 147.017 s
 * uniform split, tight, had left the ranking). So the walk notes, for every plan it solves, the
 * best split known: its uniform estimate, then each answer found for it. A plan never solved by
 * the fixed phase had a bound, hence a uniform step, past the k-th plan: no answer of it that is
 * not better than its uniform one can enter. */
typedef struct best_slot {
    int used;
    plan_key k;
    double step_s, peak_bytes;
} best_slot;

/* The slot of key k in a table of cap slots (a power of two, never full): its own or a free
 * one. */
static best_slot *slot_of(best_slot *t, int64_t cap, const plan_key *k) {
    uint64_t i = plan_key_hash(k) & (uint64_t)(cap - 1);
    while (t[i].used && !plan_key_eq(&t[i].k, k)) i = (i + 1) & (uint64_t)(cap - 1);
    return &t[i];
}

/* Note a split of plan p with step step_s and device peak peak_bytes: *better = 1 when it is
 * the plan's first or beats the best known (which it then becomes; ap_estimate_better's
 * order). AP_ERR_NOMEM when the table cannot grow. */
static ap_status note_split(ranker *rk, const ap_plan *p, double step_s, double peak_bytes,
                            int *better, ap_err *err) {
    if (2 * (rk->nbest + 1) > rk->capbest) {
        int64_t cap = rk->capbest ? 2 * rk->capbest : 256;
        best_slot *t = ap_calloc((size_t)cap, sizeof *t);
        if (!t) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the re-split's plans");
        for (int64_t i = 0; i < rk->capbest; i++)
            if (rk->best[i].used) *slot_of(t, cap, &rk->best[i].k) = rk->best[i];
        ap_free(rk->best);
        rk->best = t;
        rk->capbest = cap;
    }
    plan_key k = plan_key_of(p);
    best_slot *b = slot_of(rk->best, rk->capbest, &k);
    *better = !b->used || step_s < b->step_s || (step_s == b->step_s && peak_bytes < b->peak_bytes);
    if (!*better) return AP_OK;
    if (!b->used) {
        rk->nbest++;
        b->used = 1;
        b->k = k;
    }
    b->step_s = step_s;
    b->peak_bytes = peak_bytes;
    return AP_OK;
}

/* An explicit layout that is the uniform one, with the plan's recompute on every chunk, is the
 * uniform plan (nchunks 0): the way the search and the trainers' flags say it. */
static void normalise(ap_plan *p, int64_t L) {
    if (p->nchunks == 0) return;
    ap_plan u = *p;
    u.nchunks = 0;
    for (int i = 0; i < p->nchunks; i++)
        if (p->stage_layers[i] != ap_plan_chunk_layers(&u, L, i) || p->stage_recompute[i] > 0)
            return;
    p->nchunks = 0;
    for (int i = 0; i < AP_MAX_CHUNKS; i++) p->stage_recompute[i] = 0;
}

/* Offer the estimate e of a re-split plan, found from candidate id (fixed: its own recompute
 * and offload; joint: its degrees' joint choice): dropped unless it is the best split known of
 * its plan (note_split), else it replaces the plan's entry in the ranking or enters it as a
 * plan of its own would. */
static ap_status offer(ranker *rk, const ap_estimate *e, int64_t id, int joint, ap_err *err) {
    int better;
    ap_status st = note_split(rk, &e->plan, e->time.step_s, e->device_peak_bytes, &better, err);
    if (st != AP_OK || !better) return st;
    topk *t = rk->top;
    const plan_key k = plan_key_of(&e->plan);
    int i = topk_find(t, &k);
    if (i >= 0) topk_remove(t, i);
    if (topk_offer(t, e, joint ? -2 - id : id) < 0)
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
    return AP_OK;
}

/* Split plan w->p with opts po; on a fitting answer the re-split plan's estimate in w->e and
 * 1 in *got. Plans the solver does not take are left as they are. */
static ap_status split_plan(const ranker *rk, solver_ws *w, const ap_partition_opts *po, int *got,
                            ap_err *err) {
    *got = 0;
    /* a plan the partitioner does not take is no answer; its reason is not read (formatting
     * one cost a torchtitan MoE sweep 1% of its instructions) */
    if (pt_check_input(rk->m, &w->p, po, NULL) != AP_OK) return AP_OK;
    ap_status st = ap_partition_solve(rk->m, rk->c, &w->p, po, &w->pr, err);
    if (st == AP_OK && w->pr.fits && !w->pr.capped) {
        ap_partition_apply(&w->pr, &w->p);
        normalise(&w->p, rk->m->layers);
        /* a split the trainer's table refuses is not an answer */
        if (ap_plan_check(&w->p, rk->m, rk->c, rk->o->allow_cross_node_tp, NULL) != AP_OK)
            return AP_OK;
        st = ap_estimate_plan(rk->m, rk->c, &w->p, &rk->o->est, &w->e, err);
        *got = st == AP_OK && w->e.fits;
    }
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "re-splitting %s", ap_plan_label(&w->p, lbl, sizeof lbl));
    }
    return st;
}

/* ---- batches of solves on threads ---------------------------------------------------------------
 * The candidates are taken in order; the next BATCH whose bound can beat the k-th plan are
 * solved together (on the worker threads; the entries between them whose bound cannot, up to
 * SCAN entries in all, ride along unsolved: counting those left batches of one solve, run on
 * one thread), each capped by the k-th plan as it stood when the batch began, then offered
 * in order, each only if its bound can still beat the k-th plan at
 * its turn (what a one-by-one walk would do; a solve it would have skipped cannot enter the
 * ranking). BATCH is a constant, not the thread count, so the caps, hence the splits, are the
 * same whatever the threads (BATCH is defined with the ranker). */

typedef struct {
    int64_t cand;             /* candidate index */
    int joint;
    ap_partition_opts po;     /* with its cap */
    int run;                  /* 0: its bound could not beat the k-th plan (not solved) */
    int full;                 /* not solved either: every complication its answer can take
                                 held k plans faster than its bound (class_cut) */
    int got;
    ap_status st;
    ap_err err;
    ap_estimate *e;           /* the re-split plan's estimate when got (run: one of the
                                 batch's BATCH) */
    ap_plan *p;               /* run: the candidate's plan, uniform (one of the batch's) */
} job;

/* A batch's jobs to solve. */
typedef struct job_run {
    const ranker *rk;
    job **jobs;
    int n, next;
    pthread_mutex_t mu;
} job_run;

/* Solve jobs of jr with workspace w until none is left to claim. */
static void job_loop(job_run *jr, solver_ws *w) {
    for (;;) {
        pthread_mutex_lock(&jr->mu);
        int i = jr->next++;
        pthread_mutex_unlock(&jr->mu);
        if (i >= jr->n) break;
        job *j = jr->jobs[i];
        cand_plan(jr->rk, w, &jr->rk->cands[j->cand]);
        *j->p = w->p;
        j->st = split_plan(jr->rk, w, &j->po, &j->got, &j->err);
        if (j->got) ap_estimate_copy(j->e, &w->e);
    }
}

/* The pool and the batch a pool thread last took (batch_pending). */
typedef struct {
    const job_pool *pl;
    int64_t seen;
} pool_seen;

/* No batch past `seen` posted and the pool not quitting (a pool thread polls on it). */
static int batch_pending(const void *arg) {
    const pool_seen *ps = arg;
    return ps->pl->posted == ps->seen && !ps->pl->quit;
}

/* A pool thread is still on the batch posted last (the calling thread polls on it). */
static int pool_busy(const void *pl) { return ((const job_pool *)pl)->busy > 0; }

/* A pool thread: the jobs of each batch posted, with its own workspace. */
static void *pool_worker(void *arg) {
    solver_ws *w = arg;
    job_pool *pl = w->pool;
    int64_t seen = 0;
    for (;;) {
        pool_seen ps = {pl, seen};
        ap_poll_while(batch_pending, &ps);
        pthread_mutex_lock(&pl->mu);
        while (!pl->quit && pl->posted == seen) pthread_cond_wait(&pl->go, &pl->mu);
        if (pl->quit) {
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        seen = pl->posted;
        job_run *jr = pl->jr;
        pthread_mutex_unlock(&pl->mu);
        job_loop(jr, w);
        pthread_mutex_lock(&pl->mu);
        if (--pl->busy == 0) pthread_cond_signal(&pl->done);
        pthread_mutex_unlock(&pl->mu);
    }
}

/* Start the pool's threads (rk->threads - 1 helpers, threads.h, with their workspaces); 0 when
 * none could be started (the calling thread then solves alone). */
static int pool_start(ranker *rk) {
    int want = rk->threads - 1;
    job_pool *pl = ap_calloc(1, sizeof *pl);
    solver_ws *ws = ap_malloc((size_t)want * sizeof *ws);
    void *arg[BATCH];
    if (!pl || !ws) {
        ap_free(pl);
        ap_free(ws);
        return 0;
    }
    pl->ws = ws;
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->go, NULL);
    pthread_cond_init(&pl->done, NULL);
    rk->pool = pl;
    for (int t = 0; t < want; t++) {
        ws[t].pool = pl;
        arg[t] = &ws[t];
    }
    pl->n = ap_tasks_start(&pl->team, want, pool_worker, arg);
    return pl->n > 0;
}

/* Stop the pool's threads and wait for them. */
static void pool_stop(ranker *rk) {
    job_pool *pl = rk->pool;
    if (!pl) return;
    pthread_mutex_lock(&pl->mu);
    pl->quit = 1;
    pthread_cond_broadcast(&pl->go);
    pthread_mutex_unlock(&pl->mu);
    ap_tasks_wait(&pl->team);
    pthread_cond_destroy(&pl->go);
    pthread_cond_destroy(&pl->done);
    pthread_mutex_destroy(&pl->mu);
    ap_free(pl->ws);
    ap_free(pl);
    rk->pool = NULL;
}

/* A rough order of a joint choice's cost, for claiming the longest first: its stage tables and
 * DP grow with the chunks (pp x vp), and where the optimizer may be offloaded each recompute
 * variant is solved at several fractions (llama-3.1-405b on 16384 H100s: those solves took
 * 1.5-2x the others of the same chunks). Only the order the threads claim jobs in reads it. */
static double job_cost(const ranker *rk, const job *j) {
    const ap_space_point *pt = &rk->cands[j->cand].pt;
    const ap_trainer_caps *tr = ap_trainer_get(rk->o->fixed.trainer);
    double c = (double)pt->pp * (pt->vp > 1 ? pt->vp : 1);
    if (j->joint && j->po.choose_offload && tr->offload_optimizer &&
        (tr->offload_optimizer_zero_mask & (1u << pt->zero)))
        c *= 2;
    return c;
}

/* Solve the jobs, on the calling thread and the pool's (started at the first batch with more
 * than one job to run): a batch whose bounds all fail (most of them, late in a walk) or that
 * runs one job wakes no thread. Several threads claim joint choices longest first (job_cost;
 * a stable insertion sort of at most BATCH): claimed in walk order, llama-3.1-405b on 16384
 * H100s left one thread 0.34 ms behind the other on its batch of six (fixed-choice splits,
 * alike in cost, keep the walk's order). Each job writes its own result, which the walk reads
 * in its own order, so the order they are solved in changes nothing else. */
static void run_jobs(ranker *rk, job **jobs, int nrun) {
    job_run jr = {rk, jobs, nrun, 0, PTHREAD_MUTEX_INITIALIZER};
    if (nrun == 0) return;
    if (rk->threads > 1 && jobs[0]->joint)
        for (int a = 1; a < nrun; a++) {
            job *x = jobs[a];
            double cx = job_cost(rk, x);
            int b = a;
            for (; b > 0 && job_cost(rk, jobs[b - 1]) < cx; b--) jobs[b] = jobs[b - 1];
            jobs[b] = x;
        }
    if (nrun > 1 && rk->threads > 1 && !rk->pool && !pool_start(rk))
        rk->threads = 1; /* the calling thread alone */
    job_pool *pl = nrun > 1 ? rk->pool : NULL;
    if (pl) {
        pthread_mutex_lock(&pl->mu);
        pl->jr = &jr;
        pl->posted++;
        pl->busy = pl->n;
        pthread_cond_broadcast(&pl->go);
        pthread_mutex_unlock(&pl->mu);
    }
    job_loop(&jr, &rk->ws);
    if (pl) {
        ap_poll_while(pool_busy, pl);
        pthread_mutex_lock(&pl->mu);
        while (pl->busy > 0) pthread_cond_wait(&pl->done, &pl->mu);
        pthread_mutex_unlock(&pl->mu);
    }
    pthread_mutex_destroy(&jr.mu);
}

/* The cap of a candidate's solve when the k-th step is kt: the step is at least the pipeline
 * time plus what no split changes and the bounds of the rest, so splits whose pipeline time
 * reaches the k-th step minus those cannot enter. Fixed: the objective (no X); joint: the
 * pipeline time of every variant, whatever its X. 0: no cap; < 0: nothing can enter. */
static double cap_of(const rs_cand *x, double kt, int joint) {
    if (kt == INFINITY) return 0;
    double c = kt * (1 + 1e-12) - x->fixed_s - rs_bound(x, 0, kt) - (joint ? 0 : x->opt_s);
    return c > 0 ? c : -1;
}

/* The least step an answer of candidate x must beat to enter the ranking under a tie margin:
 * the slowest counted plan of each complication its answer can take, when each holds k
 * (topk_full_steps), the most of those; INFINITY where one has room. A split keeps the
 * plan's context parallelism and ZeRO stage, and its offload unless the joint choice picks it
 * (po), but may move it between fitting and tight (ap_estimate_complication). An answer no
 * faster than that is turned away by the ranking (offer_tied), so it is not solved; the
 * complications' k-th plans only get faster while the fixed phase runs, and where a joint
 * answer moves a plan to the other complication the cut is taken again at the offer. */
static double class_cut(const ranker *rk, const rs_cand *x, const ap_partition_opts *po) {
    if (rk->top->margin <= 0 || x->pt.hetero_extra) return INFINITY;
    double full[32];
    topk_full_steps(rk->top, full);
    return complication_cut(full, x->cls, po->choose_offload);
}

/* The walk passes over candidate x whose answer cannot enter (class_cut): its uniform split
 * is noted as its plan's best known (note_split), as a solve would have noted it, so that no
 * later answer of the plan worse than it can take its place. */
static ap_status pass_over(ranker *rk, const rs_cand *x, ap_err *err) {
    int better;
    cand_plan(rk, &rk->ws, x);
    return note_split(rk, &rk->ws.p, x->step_s, x->peak_bytes, &better, err);
}

/* The joint choice (joint = 1) of what the user left free: the granularity unless --recompute
 * pinned it; the recomputed-layer counts unless a count was pinned or the pinned granularity
 * is not full; the offload fractions unless either was pinned. */
static void joint_choices(const ap_search_opts *o, int joint, ap_partition_opts *po) {
    const ap_plan *fx = &o->fixed;
    po->choose_mode = joint && !o->fix_recompute;
    po->choose_recompute = joint && !fx->recompute_layers &&
                           (!o->fix_recompute || fx->recompute == AP_RECOMPUTE_FULL);
    po->choose_offload = joint && fx->offload_optimizer == 0 && fx->offload_params == 0;
}

/* The order the walk takes: ord[0..n), of which the first nsorted are in order and the rest,
 * unsorted, all have bounds above `floor`. */
typedef struct {
    ordered *v;
    int64_t n, nsorted;
    double floor;
} order;

/* 1 when entry j's bound is above kt (the walk stops there): the rest is sorted the first
 * time the walk reaches it with a k-th step above its floor. */
static int past(order *o, int64_t j, double kt) {
    if (j >= o->nsorted) {
        if (kt <= o->floor) return 1; /* every bound left is above kt */
        qsort(o->v + o->nsorted, (size_t)(o->n - o->nsorted), sizeof *o->v, by_bound);
        o->nsorted = o->n;
    }
    return o->v[j].lb_s > kt;
}

/* The walk over o (candidates, or one per degree combination when joint), in order: solves in
 * batches, offers in order; counts the solves a one-by-one walk makes into *count. */
static ap_status walk(ranker *rk, order *o, int joint, int64_t *count, ap_err *err) {
    const ordered *ord = o->v;
    const int64_t n = o->n;
    job *jobs = ap_malloc(SCAN * sizeof *jobs);
    /* one more of each for a job solved at its offer (class_cut) */
    ap_estimate *es = ap_malloc((BATCH + 1) * sizeof *es);
    ap_plan *ps = ap_malloc((BATCH + 1) * sizeof *ps);
    if (!jobs || !es || !ps) {
        ap_free(jobs);
        ap_free(es);
        ap_free(ps);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the re-split");
    }
    job *torun[BATCH];
    ap_partition_opts po;
    ap_partition_opts_init(&po);
    po.solver = AP_SOLVER_DP;
    po.est = rk->o->est;
    joint_choices(rk->o, joint, &po);
    ap_status st = AP_OK;
    int64_t i = 0;
    while (i < n && st == AP_OK) {
        double kt = topk_bound(rk->top);
        if (past(o, i, kt)) break;
        int nb = 0, nrun = 0;
        for (int64_t j = i; j < n && nb < SCAN && nrun < BATCH && (j == i || !past(o, j, kt));
             j++, nb++) {
            const rs_cand *x = &rk->cands[ord[j].i];
            job *jb = &jobs[nb];
            jb->cand = ord[j].i;
            jb->joint = joint;
            jb->po = po;
            jb->got = 0;
            jb->st = AP_OK;
            double cap = cap_of(x, kt, joint);
            const double lb = rs_bound(x, joint ? x->combo_s : x->own_s, kt);
            jb->run = lb <= kt && cap >= 0;
            jb->full = jb->run && lb > class_cut(rk, x, &jb->po);
            if (jb->full) jb->run = 0;
            jb->e = jb->run ? &es[nrun] : NULL;
            jb->p = jb->run ? &ps[nrun] : NULL;
            if (jb->run) torun[nrun++] = jb;
            /* a fixed choice's split matters only if it beats the candidate's uniform split
             * (offer: the plan's best split known), so its cap is also what reaches that
             * step: cap_of grows with the step it is given, and from min(k-th, uniform) it
             * still bounds every split that could enter (a joint choice's splits are of
             * other plans, which the uniform one does not bound) */
            if (!joint && x->step_s < kt) cap = fmin(cap, cap_of(x, x->step_s, 0));
            if (joint) jb->po.upper_pipe_s = cap > 0 ? cap : 0;
            else jb->po.upper_s = cap > 0 ? cap : 0;
        }
        run_jobs(rk, torun, nrun);
        for (int b = 0; b < nb; b++, i++) {
            const rs_cand *x = &rk->cands[jobs[b].cand];
            double k2 = topk_bound(rk->top);
            if (ord[i].lb_s > k2) {
                i = n; /* no later candidate can enter */
                break;
            }
            const double lb = rs_bound(x, joint ? x->combo_s : x->own_s, k2);
            if ((!jobs[b].run && !jobs[b].full) || lb > k2 || cap_of(x, k2, joint) < 0)
                continue;
            if (jobs[b].full && lb > class_cut(rk, x, &jobs[b].po)) {
                if ((st = pass_over(rk, x, err)) != AP_OK) break;
                rk->passed++;
                continue;
            }
            if (jobs[b].full) { /* a complication has room again: solved now, as in turn */
                jobs[b].e = &es[BATCH];
                jobs[b].p = &ps[BATCH];
                jobs[b].run = 1;
                job *one = &jobs[b];
                run_jobs(rk, &one, 1);
            }
            (*count)++;
            if (jobs[b].st != AP_OK) {
                st = jobs[b].st;
                *err = jobs[b].err;
                break;
            }
            /* the candidate's uniform split is one of its plan's splits */
            int better;
            st = note_split(rk, jobs[b].p, x->step_s, x->peak_bytes, &better, err);
            if (st == AP_OK && jobs[b].got) st = offer(rk, jobs[b].e, jobs[b].cand, joint, err);
            if (st != AP_OK) break;
        }
    }
    ap_free(jobs);
    ap_free(es);
    ap_free(ps);
    return st;
}

/* Phase 1: every candidate whose bound can beat the k-th plan, split with its own recompute
 * and offload. Those whose bound cannot beat the k-th plan as the walk begins are put last,
 * unsorted: the walk stops before them unless the ranking loses a plan. */
static ap_status fixed_phase(ranker *rk, ordered *ord, ap_search_result *r, ap_err *err) {
    double kt = topk_bound(rk->top);
    int64_t lo = 0, hi = rk->n;
    for (int64_t i = 0; i < rk->n; i++) {
        ordered e = {rs_bound(&rk->cands[i], rk->cands[i].own_s, INFINITY), i};
        if (e.lb_s <= kt) ord[lo++] = e;
        else ord[--hi] = e;
    }
    qsort(ord, (size_t)lo, sizeof *ord, by_bound);
    order o = {ord, rk->n, lo, kt};
    return walk(rk, &o, 0, &r->resplit, err);
}

static int same_combo(const rs_cand *a, const rs_cand *b) {
    return a->pt.tp == b->pt.tp && a->pt.cp == b->pt.cp && a->pt.pp == b->pt.pp &&
           a->pt.dp == b->pt.dp && a->pt.ep == b->pt.ep && a->pt.etp == b->pt.etp &&
           a->pt.vp == b->pt.vp && a->pt.zero == b->pt.zero &&
           a->pt.zero_group == b->pt.zero_group && a->pt.cp_a2a == b->pt.cp_a2a &&
           a->mb == b->mb;
}

/* A hash of what same_combo compares (FNV-1a over the fields). */
static uint64_t combo_hash(const rs_cand *c) {
    const int64_t f[11] = {c->pt.tp, c->pt.cp, c->pt.pp, c->pt.dp, c->pt.ep,
                           c->pt.etp, c->pt.vp, c->pt.zero, c->pt.zero_group, (int64_t)c->mb,
                           c->pt.cp_a2a};
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 11; i++) {
        h ^= (uint64_t)f[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Keeps the first entry of each degree combination among ord[0 .. n), in order, in place;
 * returns how many remain, or -1 when the set cannot be allocated. An open-addressed set of
 * the kept entries (positions in ord), twice their number or more: one probe per entry on
 * average, where comparing every entry with every kept one took a quarter of a sweep's
 * instructions. */
static int64_t first_of_combos(const ranker *rk, ordered *ord, int64_t n) {
    int64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    int64_t *set = ap_malloc((size_t)cap * sizeof *set);
    if (!set) return -1;
    for (int64_t k = 0; k < cap; k++) set[k] = -1;
    int64_t nc = 0;
    for (int64_t i = 0; i < n; i++) {
        const rs_cand *c = &rk->cands[ord[i].i];
        int64_t k = (int64_t)(combo_hash(c) & (uint64_t)(cap - 1));
        while (set[k] >= 0 && !same_combo(&rk->cands[ord[set[k]].i], c)) k = (k + 1) & (cap - 1);
        if (set[k] >= 0) continue; /* its combination came earlier */
        ord[nc] = ord[i];
        set[k] = nc++;
    }
    ap_free(set);
    return nc;
}

/* Phase 2: every degree combination (its first candidate in the enumeration order) whose bound
 * can beat the k-th plan, split with the granularity, counts and offload chosen jointly. The
 * candidates of one combination share their bound (their sibling is the same plan), so in
 * bound-then-index order a combination's first candidate comes first; the walk takes one entry
 * per combination, collected up to the first bound no plan can beat. */
static ap_status joint_phase(ranker *rk, ordered *ord, ap_search_result *r, ap_err *err) {
    /* only bounds that can beat the k-th plan now are ordered: the collection stops there */
    double kt = topk_bound(rk->top);
    int64_t nb = 0;
    for (int64_t i = 0; i < rk->n; i++) {
        ordered e = {rs_bound(&rk->cands[i], rk->cands[i].combo_s, INFINITY), i};
        if (e.lb_s <= kt) ord[nb++] = e;
    }
    qsort(ord, (size_t)nb, sizeof *ord, by_bound);
    int64_t nc = first_of_combos(rk, ord, nb);
    if (nc < 0) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the re-split");
    order o = {ord, nc, nc, INFINITY};
    return walk(rk, &o, 1, &r->joint, err);
}

/* Nothing fits: the closest plan gets the joint choice with its split (or the plain split where
 * the choice does not apply); it becomes the answer when it comes to fit, else it replaces the
 * closest plan when it overshoots less. */
static ap_status closest_phase(ranker *rk, ap_search_result *r, ap_err *err) {
    ap_estimate *cur = &r->closest;
    if (cur->plan.pp < 2) return AP_OK;
    ap_partition_opts po;
    ap_partition_opts_init(&po);
    po.solver = rk->o->resplit_solver == AP_SOLVER_ILP ? AP_SOLVER_ILP : AP_SOLVER_DP;
    po.est = rk->o->est;
    joint_choices(rk->o, 1, &po);
    ap_err ierr;
    if (pt_check_input(rk->m, &cur->plan, &po, &ierr) != AP_OK)
        po.choose_mode = po.choose_recompute = po.choose_offload = 0;
    if (pt_check_input(rk->m, &cur->plan, &po, &ierr) != AP_OK) return AP_OK;
    rk->ws.p = cur->plan;
    ap_status st = ap_partition_solve(rk->m, rk->c, &rk->ws.p, &po, &rk->ws.pr, err);
    /* every variant of the joint choice refused: the plain split */
    if ((po.choose_mode || po.choose_recompute || po.choose_offload) &&
        (st == AP_ERR_INFEASIBLE || st == AP_ERR_INPUT)) {
        po.choose_mode = po.choose_recompute = po.choose_offload = 0;
        st = ap_partition_solve(rk->m, rk->c, &rk->ws.p, &po, &rk->ws.pr, err);
    }
    /* a plan the trainer cannot split otherwise (Colossal-AI's interleaved stages, one layer
       count per rank) stays the closest as it is, as such a candidate stays unsplit (search.c) */
    if (st == AP_ERR_INFEASIBLE || st == AP_ERR_INPUT) return AP_OK;
    if (st == AP_OK) {
        ap_partition_apply(&rk->ws.pr, &rk->ws.p);
        if (ap_plan_check(&rk->ws.p, rk->m, rk->c, rk->o->allow_cross_node_tp, NULL) != AP_OK)
            return AP_OK;
        st = ap_estimate_plan(rk->m, rk->c, &rk->ws.p, &rk->o->est, &rk->ws.e, err);
    }
    if (st != AP_OK) {
        char lbl[160];
        ap_err_prefix(err, "re-splitting %s", ap_plan_label(&cur->plan, lbl, sizeof lbl));
        return st;
    }
    r->joint++;
    if (rk->ws.e.fits) {
        if (topk_offer(rk->top, &rk->ws.e, -1) < 0)
            return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
        r->have_closest = 0;
    } else if (ap_estimate_better(&rk->ws.e, cur)) {
        *cur = rk->ws.e;
    }
    return AP_OK;
}

/* --solver ilp: the answers' splits come from GLPK (the DP's optimum is the ILP's; ties may
 * split differently): each re-split answer is solved again from its candidate with the ILP
 * and the same choices, and kept when it ranks no worse. */
static ap_status ilp_phase(ranker *rk, ap_err *err) {
    topk *t = rk->top;
    ap_partition_opts po;
    ap_partition_opts_init(&po);
    po.solver = AP_SOLVER_ILP;
    po.est = rk->o->est;
    for (int i = 0; i < t->n; i++) {
        int64_t id = topk_id(t, i);
        /* a provisional entry is a uniform split */
        if (id == -1 || topk_prov(t, i) || topk_at(t, i)->plan.nchunks == 0) continue;
        int joint = id <= -2;
        cand_plan(rk, &rk->ws, &rk->cands[joint ? -2 - id : id]);
        joint_choices(rk->o, joint, &po);
        int got;
        ap_status st = split_plan(rk, &rk->ws, &po, &got, err);
        if (st != AP_OK) return st;
        if (got && !ap_estimate_better(topk_at(t, i), &rk->ws.e) && topk_fill(t, i, &rk->ws.e) < 0)
            return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
    }
    topk_sort(t);
    return AP_OK;
}

ap_status rs_fill(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                  const rs_cand *cands, topk *t, int upto, ap_err *err) {
    ranker *rk = NULL;
    ap_status st = AP_OK;
    for (int i = 0; i < t->n && i < upto && st == AP_OK; i++) {
        if (!topk_prov(t, i)) continue;
        if (!rk) {
            if (!(rk = ap_calloc(1, sizeof *rk)))
                return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
            rk->m = m;
            rk->c = c;
            rk->o = o;
            ap_space_init(&rk->space, m, c, o);
        }
        cand_plan(rk, &rk->ws, &cands[topk_id(t, i)]);
        char lbl[160];
        ap_plan_label(&rk->ws.p, lbl, sizeof lbl);
        st = ap_estimate_plan(m, c, &rk->ws.p, &o->est, &rk->ws.e, err);
        if (st != AP_OK)
            ap_err_prefix(err, "estimating %s", lbl);
        /* the same plan and options as the search's estimate: the same figures */
        else if (rk->ws.e.time.step_s != rstep(t, i) || rk->ws.e.device_peak_bytes != rpeak(t, i))
            st = ap_err_set(err, AP_ERR_INTERNAL,
                            "%s estimated again came out at %.17g s and %.17g bytes, ranked at "
                            "%.17g s and %.17g bytes",
                            lbl, rk->ws.e.time.step_s, rk->ws.e.device_peak_bytes, rstep(t, i),
                            rpeak(t, i));
        else if (topk_fill(t, i, &rk->ws.e) < 0)
            st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ranking");
    }
    ap_free(rk);
    return st;
}

ap_status rs_rank(const ap_model *m, const ap_cluster *c, const ap_search_opts *o, rs_cand *cands,
                  int64_t n, topk *top, int threads, ap_search_result *r, ap_err *err) {
    ranker *rk = ap_malloc(sizeof *rk);
    ordered *ord = ap_malloc((size_t)(n > 0 ? n : 1) * sizeof *ord);
    if (!rk || !ord) {
        ap_free(rk);
        ap_free(ord);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory ranking the re-split candidates");
    }
    rk->m = m;
    rk->c = c;
    rk->o = o;
    rk->cands = cands;
    rk->n = n;
    rk->top = top;
    rk->threads = threads < 1 ? 1 : threads > BATCH ? BATCH : threads;
    rk->pool = NULL;
    rk->best = NULL;
    rk->nbest = rk->capbest = 0;
    rk->passed = 0;
    top->ids_provisional = 0; /* what the re-split offers is a plan's best split */
    ap_space_init(&rk->space, m, c, o);
    ap_status st = fixed_phase(rk, ord, r, err);
    if (st == AP_OK) st = joint_phase(rk, ord, r, err);
    if (st == AP_OK && top->n == 0 && r->have_closest) st = closest_phase(rk, r, err);
    if (st == AP_OK && o->resplit_solver == AP_SOLVER_ILP) st = ilp_phase(rk, err);
    r->passed = rk->passed;
    pool_stop(rk);
    ap_free(rk->best);
    ap_free(rk);
    ap_free(ord);
    return st;
}
