/*
 * test_partition.c - the stage partitioner (partition.h, stagecost.h, planner/ilp.c).
 *
 * References: brute force over every split of L layers into p stages, each priced by the cost
 * model on the whole plan (ap_stage_estimate = ap_estimate_plan + finiteness checks), independent
 * of the memoised stage table the DP reads;
 * the GLPK integer program against the DP; properties on every answer (never worse than the
 * uniform split, fits memory when it says so, T recomputed from the cost model); the fault
 * paths of the solver (GLPK error through the hook, a tiny node limit); the llama-3-70b pp=8
 * case where the uniform split does not fit and the optimal one does; and the CLI.
 * Tolerance: 1e-9 relative (the same doubles summed in a different order).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/partition.h"
#include "testlib.h"

#define TOL 1e-9

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_estimate_opts *est;
    int lo;
    int split[AP_MAX_STAGES];
    int count;
    double best_T;       /* least T over fitting splits (INFINITY: none fits) */
    double min_peak;     /* least peak over all splits */
    double tie_T;        /* > 0: a second pass takes tie_peak, the least peak of the fitting
                            splits of T <= tie_T */
    double tie_peak;
    int best[AP_MAX_STAGES];
    int errors;
} brute;

static double T_of(const ap_estimate *e) {
    double s = 0, mx = 0;
    for (int r = 0; r < e->plan.pp; r++) {
        double t = e->time.stage_fwd_s[r] + e->time.stage_bwd_s[r];
        s += t;
        if (t > mx) mx = t;
    }
    return s + (double)(e->plan.grad_accum - 1) * mx;
}

static void brute_rec(brute *b, int r, int left) {
    int p = b->p->pp;
    if (r == p - 1) {
        if (left < b->lo) return;
        b->split[r] = left;
        static ap_plan q;
        static ap_estimate e;
        q = *b->p;
        q.nchunks = p;
        memcpy(q.stage_layers, b->split, sizeof(int) * (size_t)p);
        ap_err err;
        if (ap_stage_estimate(b->m, b->c, &q, b->est, &e, &err) != AP_OK) {
            b->errors++;
            return;
        }
        b->count++;
        if (e.device_peak_bytes < b->min_peak) b->min_peak = e.device_peak_bytes;
        double T = T_of(&e);
        if (b->tie_T > 0 && e.fits && T <= b->tie_T && e.device_peak_bytes < b->tie_peak)
            b->tie_peak = e.device_peak_bytes;
        if (e.fits && T < b->best_T) {
            b->best_T = T;
            memcpy(b->best, b->split, sizeof(int) * (size_t)p);
        }
        return;
    }
    for (int n = b->lo; n <= left - (p - 1 - r) * b->lo; n++) {
        b->split[r] = n;
        brute_rec(b, r + 1, left - n);
    }
}

static void brute_force(brute *b) {
    b->count = 0;
    b->errors = 0;
    b->best_T = INFINITY;
    b->min_peak = INFINITY;
    b->tie_T = 0;
    brute_rec(b, 0, (int)b->m->layers);
    if (b->best_T < INFINITY) { /* the ties: every split within rounding of the least T */
        const int count = b->count;
        b->tie_T = b->best_T * (1 + 1e-12);
        b->tie_peak = INFINITY;
        brute_rec(b, 0, (int)b->m->layers);
        b->count = count; /* the splits, counted once */
    }
}

static long binom(int n, int k) {
    long r = 1;
    for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
    return r;
}

static void uniform_of(const ap_plan *p, int64_t L, int *layers) {
    ap_plan u = *p;
    u.nchunks = 0;
    for (int r = 0; r < p->pp; r++) layers[r] = ap_plan_chunk_layers(&u, L, r);
}

/* one case: brute force, DP, ILP and the properties, unbounded memory and memory-bound */
static void check_case(const char *what, const ap_model *m, const ap_cluster *c, const ap_plan *p) {
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_err err = {{0}};
    for (int bound = 0; bound < 2; bound++) {
        brute b;
        memset(&b, 0, sizeof b);
        b.m = m;
        b.c = c;
        b.p = p;
        b.est = &o.est;
        b.lo = 1;
        if (bound) {
            /* capacity between the least peak of any split and the uniform split's peak: the
             * uniform split must not fit, some other must */
            int u[AP_MAX_STAGES];
            uniform_of(p, m->layers, u);
            ap_partition_result ur;
            CHECK(ap_partition_eval(m, c, p, &o.est, u, NULL, &ur, &err) == AP_OK);
            brute_force(&b);
            if (!(b.min_peak < ur.peak_device_bytes * (1 - 1e-6))) {
                fprintf(stderr, "%s: the uniform split already has the least peak\n", what);
                CHECK(0);
                return;
            }
            o.est.headroom_bytes = c->gpu.mem_bytes - 0.5 * (b.min_peak + ur.peak_device_bytes);
        }
        brute_force(&b);
        CHECK_INT(b.errors, 0);
        CHECK_INT(b.count, binom((int)m->layers - 1, p->pp - 1));
        CHECK(b.best_T < INFINITY);

        ap_partition_result dp, ilp, uni;
        o.solver = AP_SOLVER_DP;
        CHECK(ap_partition_solve(m, c, p, &o, &dp, &err) == AP_OK);
        CHECK(dp.fits);
        CHECK(dp.optimal);
        CHECK_INT(dp.solver, AP_SOLVER_DP);
        CHECK_NEAR(dp.pipe_s, b.best_T, TOL);
        if (fabs(dp.pipe_s - b.best_T) > TOL * b.best_T) {
            fprintf(stderr, "%s bound %d: dp", what, bound);
            for (int r = 0; r < p->pp; r++) fprintf(stderr, " %d", dp.stage_layers[r]);
            fprintf(stderr, " T %.9g, brute force", dp.pipe_s);
            for (int r = 0; r < p->pp; r++) fprintf(stderr, " %d", b.best[r]);
            fprintf(stderr, " T %.9g\n", b.best_T);
        }

        /* the reported split, evaluated afresh, fits and has the reported T */
        ap_plan q = *p;
        ap_partition_apply(&dp, &q);
        static ap_estimate e;
        CHECK(ap_stage_estimate(m, c, &q, &o.est, &e, &err) == AP_OK);
        CHECK(e.fits);
        CHECK_NEAR(T_of(&e), dp.pipe_s, TOL);
        CHECK_NEAR(e.time.step_s, dp.step_s, TOL);
        for (int r = 0; r < p->pp; r++)
            CHECK(dp.stage_device_bytes[r] + o.est.headroom_bytes <= c->gpu.mem_bytes);

        /* never worse than the uniform split; when memory binds, the uniform split does not fit */
        int u[AP_MAX_STAGES];
        uniform_of(p, m->layers, u);
        CHECK(ap_partition_eval(m, c, p, &o.est, u, NULL, &uni, &err) == AP_OK);
        if (uni.fits) CHECK(dp.pipe_s <= uni.pipe_s * (1 + 1e-12));
        if (bound) CHECK(!uni.fits);

        /* Megatron's first/last-stage flags: the best (f, k, ..., k, l) by enumeration */
        if (p->pp >= 3) {
            double fl_best = INFINITY;
            static ap_plan qf;
            static ap_estimate ef;
            int L = (int)m->layers;
            for (int k = 1; k <= L; k++)
                for (int f = 1; f <= L; f++) {
                    int l = L - f - (p->pp - 2) * k;
                    if (l < 1) continue;
                    qf = *p;
                    qf.nchunks = p->pp;
                    qf.stage_layers[0] = f;
                    for (int r = 1; r < p->pp - 1; r++) qf.stage_layers[r] = k;
                    qf.stage_layers[p->pp - 1] = l;
                    CHECK(ap_stage_estimate(m, c, &qf, &o.est, &ef, &err) == AP_OK);
                    if (ef.fits && T_of(&ef) < fl_best) fl_best = T_of(&ef);
                }
            ap_partition_result flr;
            ap_partition_opts of = o;
            of.first_last_only = 1;
            of.solver = AP_SOLVER_DP;
            CHECK(ap_partition_solve(m, c, p, &of, &flr, &err) == AP_OK);
            CHECK(flr.restricted);
            CHECK_INT(flr.fits, fl_best < INFINITY);
            if (flr.fits) {
                CHECK_NEAR(flr.pipe_s, fl_best, TOL);
                CHECK(dp.pipe_s <= flr.pipe_s * (1 + 1e-12));
            }
            for (int r = 2; r < p->pp - 1; r++) CHECK_INT(flr.stage_layers[r], flr.stage_layers[1]);
        }

        /* the ILP equals the DP */
        o.solver = AP_SOLVER_ILP;
        CHECK(ap_partition_solve(m, c, p, &o, &ilp, &err) == AP_OK);
        CHECK_INT(ilp.solver, AP_SOLVER_ILP);
        CHECK(!ilp.fell_back);
        CHECK(ilp.optimal);
        CHECK(ilp.fits);
        CHECK_NEAR(ilp.pipe_s, dp.pipe_s, TOL);
        if (ilp.fell_back) fprintf(stderr, "%s: ILP fell back: %s\n", what, ilp.note);
        /* the ILP's second phase takes the least peak among all splits of optimal T; the DP's
         * tie-break only among those with the same max stage time */
        CHECK(ilp.peak_device_bytes <= dp.peak_device_bytes * (1 + 1e-9));
        /* and that least peak is the brute force's (its bisection over the stage memories) */
        CHECK(ilp.peak_device_bytes <= b.tie_peak * (1 + 1e-9));
        o.est.headroom_bytes = 2.0 * 1073741824.0;
    }
}

static void load(const char *rel, ap_model *m) {
    ap_err err = {{0}};
    ap_status st = ap_model_load(tl_path(rel), m, &err);
    if (st != AP_OK) fprintf(stderr, "%s: %s\n", rel, err.msg);
    CHECK(st == AP_OK);
}

static void small_plan(ap_plan *p, int pp, int tp, int64_t micro) {
    ap_plan_init(p);
    p->tp = tp;
    p->pp = pp;
    p->dp = 1;
    p->mbs = 1;
    p->gbs = micro;
    p->grad_accum = micro;
    p->seq = 4096;
    p->sp = tp > 1;
    p->recompute = AP_RECOMPUTE_SELECTIVE;
}

static void test_dp_brute_force_ilp(void) {
    static ap_model m;
    static ap_cluster c;
    ap_plan p;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 14; /* a shortened llama-3-8b: 128k vocabulary on a small stack */
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    int64_t micro[] = {1, 3, 16, 128};
    for (int i = 0; i < 4; i++) {
        small_plan(&p, 4, 1, micro[i]);
        char what[64];
        snprintf(what, sizeof what, "llama-3-8b/14 pp4 m%lld", (long long)micro[i]);
        check_case(what, &m, &c, &p);
    }
    /* 3 stages, full recompute of 2 layers per stage, tp 2 */
    ap_cluster_from_gpu(ap_gpu_find("h100"), 6, &c);
    small_plan(&p, 3, 2, 8);
    p.recompute = AP_RECOMPUTE_FULL;
    p.recompute_layers = 2;
    check_case("llama-3-8b/14 tp2 pp3 full2", &m, &c, &p);

    /* heterogeneous layers: mixtral shortened to 13 layers, MoE every other layer after one
     * dense layer (dense FFN = the expert size) */
    load("examples/models/mixtral-8x7b.json", &m);
    m.layers = 13;
    m.moe.first_dense_layers = 1;
    m.moe.layer_freq = 2;
    ap_err err = {{0}};
    CHECK(ap_model_validate(&m, "mixtral/13", &err) == AP_OK);
    CHECK(ap_model_layer_is_moe(&m, 1) != ap_model_layer_is_moe(&m, 2));
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    small_plan(&p, 4, 1, 32);
    check_case("mixtral/13 alternating pp4", &m, &c, &p);
    /* a dense prefix, then MoE layers only (DeepSeek's layout): the prefilled ranges past the
     * prefix and the one-by-one ranges reaching into it, with and without a recompute count */
    m.moe.first_dense_layers = 3;
    m.moe.layer_freq = 1;
    CHECK(ap_model_validate(&m, "mixtral/13 prefix", &err) == AP_OK);
    c.gpu.mem_bytes = 4.0 * 1099511627776.0; /* ten MoE layers on 4 GPUs: room for any split */
    small_plan(&p, 4, 1, 32);
    check_case("mixtral/13 dense prefix pp4", &m, &c, &p);
    p.recompute = AP_RECOMPUTE_FULL;
    p.recompute_layers = 2;
    check_case("mixtral/13 dense prefix pp4 full2", &m, &c, &p);
}

/* ---- interleaved: brute force over every layout of the p * v chunks ---------------------- */

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_estimate_opts *est;
    int chunks[AP_MAX_CHUNKS];
    double best_T, min_peak;
    long count;
    int errors;
} brute_vp;

static void brute_vp_rec(brute_vp *b, int i, int left) {
    int n = b->p->pp * b->p->vp;
    if (i == n - 1) {
        b->chunks[i] = left;
        static ap_plan q;
        static ap_estimate e;
        q = *b->p;
        q.nchunks = n;
        memcpy(q.stage_layers, b->chunks, sizeof(int) * (size_t)n);
        ap_err err;
        if (ap_stage_estimate(b->m, b->c, &q, b->est, &e, &err) != AP_OK) {
            b->errors++;
            return;
        }
        b->count++;
        double s = 0, mx = 0;
        for (int r = 0; r < q.pp; r++) {
            double t = e.time.stage_fwd_s[r] + e.time.stage_bwd_s[r];
            s += t;
            mx = fmax(mx, t);
        }
        /* estimate.c: m Tmax + (Tsum - Tmax) / v */
        double T = (s + ((double)e.plan.grad_accum * q.vp - 1.0) * mx) / q.vp;
        if (e.device_peak_bytes < b->min_peak) b->min_peak = e.device_peak_bytes;
        if (e.fits && T < b->best_T) b->best_T = T;
        return;
    }
    for (int k = 1; k <= left - (n - 1 - i); k++) {
        b->chunks[i] = k;
        brute_vp_rec(b, i + 1, left - k);
    }
}

static void check_interleaved(const char *what, const ap_model *m, const ap_cluster *c,
                              const ap_plan *p) {
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_err err = {{0}};
    brute_vp b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.c = c;
    b.p = p;
    b.est = &o.est;
    int u[AP_MAX_CHUNKS];
    for (int i = 0; i < p->pp * p->vp; i++) u[i] = ap_plan_chunk_layers(p, m->layers, i);
    for (int bound = 0; bound < 2; bound++) {
        b.best_T = b.min_peak = INFINITY;
        b.count = b.errors = 0;
        brute_vp_rec(&b, 0, (int)m->layers);
        CHECK_INT(b.errors, 0);
        CHECK_INT(b.count, binom((int)m->layers - 1, p->pp * p->vp - 1));
        CHECK(b.best_T < INFINITY);
        ap_partition_result uni, dp, ilp;
        CHECK(ap_partition_eval(m, c, p, &o.est, u, NULL, &uni, &err) == AP_OK);
        if (!bound) {
            /* next round: capacity between the least peak of any layout and the uniform's */
            CHECK(b.min_peak < uni.peak_device_bytes * (1 - 1e-6));
            o.est.headroom_bytes = c->gpu.mem_bytes - 0.5 * (b.min_peak + uni.peak_device_bytes);
            /* this round without the bound */
            o.est.headroom_bytes = 2.0 * 1073741824.0;
        }
        o.solver = AP_SOLVER_DP;
        CHECK(ap_partition_solve(m, c, p, &o, &dp, &err) == AP_OK);
        CHECK(dp.fits);
        CHECK_INT(dp.nchunks, p->pp * p->vp);
        CHECK_NEAR(dp.pipe_s, b.best_T, TOL);
        if (fabs(dp.pipe_s - b.best_T) > TOL * b.best_T)
            fprintf(stderr, "%s bound %d: dp T %.9g, brute force %.9g\n", what, bound, dp.pipe_s,
                    b.best_T);
        if (uni.fits) CHECK(dp.pipe_s <= uni.pipe_s * (1 + 1e-12));
        if (bound) CHECK(!uni.fits);
        /* T as estimate.c composes it for the plan the answer describes */
        ap_plan q = *p;
        ap_partition_apply(&dp, &q);
        static ap_estimate e;
        CHECK(ap_stage_estimate(m, c, &q, &o.est, &e, &err) == AP_OK);
        CHECK(e.fits);
        CHECK_NEAR(e.time.step_s, dp.step_s, TOL);
        o.solver = AP_SOLVER_ILP;
        CHECK(ap_partition_solve(m, c, p, &o, &ilp, &err) == AP_OK);
        CHECK_INT(ilp.solver, AP_SOLVER_ILP);
        CHECK(ilp.optimal);
        CHECK_NEAR(ilp.pipe_s, dp.pipe_s, TOL);
        if (!bound)
            o.est.headroom_bytes = c->gpu.mem_bytes - 0.5 * (b.min_peak + uni.peak_device_bytes);
    }
}

static void test_interleaved(void) {
    static ap_model m;
    static ap_cluster c;
    ap_plan p;
    /* llama-2-7b (32k vocabulary) shortened to 12 layers, 16k / 8k tokens: rank 0 with the
     * most in-flight chunks is the heaviest, so the uniform layout is not the least-memory one */
    load("examples/models/llama-2-7b.json", &m);
    m.layers = 12;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 2, &c);
    small_plan(&p, 2, 1, 8);
    p.vp = 2;
    p.seq = 16384;
    check_interleaved("llama-2-7b/12 pp2 vp2", &m, &c, &p);
    ap_cluster_from_gpu(ap_gpu_find("h100"), 3, &c);
    small_plan(&p, 3, 1, 6);
    p.vp = 2;
    p.seq = 8192;
    check_interleaved("llama-2-7b/12 pp3 vp2", &m, &c, &p);
    /* all layers MoE (mixtral): one kind, so per-rank totals decide; 32k tokens */
    load("examples/models/mixtral-8x7b.json", &m);
    m.layers = 12;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 2, &c);
    small_plan(&p, 2, 1, 8);
    p.vp = 2;
    p.seq = 32768;
    c.gpu.mem_bytes = 1099511627776.0; /* a 1 TiB GPU: 12 mixtral layers on 2 GPUs need ~300 GB */
    check_interleaved("mixtral/12 pp2 vp2", &m, &c, &p);
    /* dense and MoE layers mixed: refused for vp > 1 */
    m.layers = 12;
    m.moe.first_dense_layers = 1;
    m.moe.layer_freq = 2;
    ap_partition_result r;
    ap_err err = {{0}};
    CHECK(ap_partition_solve(&m, &c, &p, NULL, &r, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "one kind");
}

/* ---- recompute choice: brute force over splits x recompute counts -------------------------- */

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    ap_plan p;               /* recompute_layers set by the one-count mode */
    const ap_estimate_opts *est;
    int per_stage;           /* 1: a count per stage; 0: the plan's count */
    int split[AP_MAX_STAGES], rc[AP_MAX_STAGES];
    double best_T, min_peak, peak_k1; /* peak_k1: uniform split, 1 layer recomputed per stage */
    long count;
    int errors;
} brute_rc;

static void brute_rc_eval(brute_rc *b) {
    static ap_plan q;
    static ap_estimate e;
    q = b->p;
    q.nchunks = q.pp;
    for (int r = 0; r < q.pp; r++) {
        q.stage_layers[r] = b->split[r];
        q.stage_recompute[r] = b->per_stage ? b->rc[r] : -1;
    }
    ap_err err;
    if (ap_stage_estimate(b->m, b->c, &q, b->est, &e, &err) != AP_OK) {
        b->errors++;
        return;
    }
    b->count++;
    if (e.device_peak_bytes < b->min_peak) b->min_peak = e.device_peak_bytes;
    if (e.fits && T_of(&e) < b->best_T) b->best_T = T_of(&e);
}

static void brute_rc_counts(brute_rc *b, int r) {
    if (r == b->p.pp) {
        brute_rc_eval(b);
        return;
    }
    for (int k = 1; k <= b->split[r]; k++) {
        b->rc[r] = k;
        brute_rc_counts(b, r + 1);
    }
}

static void brute_rc_splits(brute_rc *b, int r, int left) {
    int p = b->p.pp;
    if (r == p - 1) {
        b->split[r] = left;
        if (b->per_stage) brute_rc_counts(b, 0);
        else brute_rc_eval(b);
        return;
    }
    for (int n = 1; n <= left - (p - 1 - r); n++) {
        b->split[r] = n;
        brute_rc_splits(b, r + 1, left - n);
    }
}

static void brute_rc_run(brute_rc *b) {
    b->best_T = INFINITY;
    b->min_peak = INFINITY;
    b->count = 0;
    b->errors = 0;
    int L = (int)b->m->layers;
    if (b->per_stage) {
        brute_rc_splits(b, 0, L);
    } else {
        for (int k = 0; k <= L - (b->p.pp - 1); k++) {
            b->p.recompute_layers = k;
            brute_rc_splits(b, 0, L);
        }
        b->p.recompute_layers = 0;
    }
}

static void check_recompute_case(const char *what, const ap_model *m, const ap_cluster *c,
                                 const ap_plan *p, int per_stage) {
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    o.choose_recompute = 1;
    ap_err err = {{0}};
    brute_rc b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.c = c;
    b.p = *p;
    b.est = &o.est;
    b.per_stage = per_stage;
    /* memory-bound: capacity midway between the least peak of any split and count and the
     * peak of the uniform split recomputing one layer per stage */
    brute_rc_run(&b);
    CHECK_INT(b.errors, 0);
    int u[AP_MAX_STAGES], one[AP_MAX_STAGES];
    uniform_of(p, m->layers, u);
    for (int r = 0; r < p->pp; r++) one[r] = 1;
    ap_plan q1 = *p;
    q1.recompute_layers = 1;
    ap_partition_result ur;
    CHECK(ap_partition_eval(m, c, &q1, &o.est, u, per_stage ? one : NULL, &ur, &err) == AP_OK);
    CHECK(b.min_peak < ur.peak_device_bytes * (1 - 1e-6));
    for (int bound = 0; bound < 2; bound++) {
        o.est.headroom_bytes = bound ? c->gpu.mem_bytes - 0.5 * (b.min_peak + ur.peak_device_bytes)
                                     : 2.0 * 1073741824.0;
        brute_rc_run(&b);
        CHECK(b.best_T < INFINITY);
        ap_partition_result dp, ilp;
        o.solver = AP_SOLVER_DP;
        CHECK(ap_partition_solve(m, c, p, &o, &dp, &err) == AP_OK);
        CHECK(dp.fits);
        CHECK_NEAR(dp.pipe_s, b.best_T, TOL);
        if (fabs(dp.pipe_s - b.best_T) > TOL * b.best_T)
            fprintf(stderr, "%s bound %d: dp T %.9g, brute force %.9g\n", what, bound, dp.pipe_s,
                    b.best_T);
        /* the answer as a plan: the counts land where the trainer reads them */
        ap_plan q = *p;
        ap_partition_apply(&dp, &q);
        static ap_estimate e;
        CHECK(ap_stage_estimate(m, c, &q, &o.est, &e, &err) == AP_OK);
        CHECK(e.fits);
        CHECK_NEAR(T_of(&e), dp.pipe_s, TOL);
        for (int r = 0; r < p->pp; r++) {
            if (per_stage)
                CHECK(dp.stage_recompute[r] >= 1 && dp.stage_recompute[r] <= dp.stage_layers[r]);
            else CHECK_INT(dp.stage_recompute[r], -1);
        }
        /* without a memory bound one recomputed layer per stage is fastest */
        if (!bound && per_stage)
            for (int r = 0; r < p->pp; r++) CHECK_INT(dp.stage_recompute[r], 1);
        if (!bound && !per_stage) CHECK_INT(dp.recompute_layers, 1);
        if (bound) {
            /* memory binds: the fastest choice without a bound does not fit any more */
            ap_partition_result ub;
            CHECK(ap_partition_eval(m, c, &q1, &o.est, u, per_stage ? one : NULL, &ub, &err) ==
                  AP_OK);
            CHECK(!ub.fits);
        }
        o.solver = AP_SOLVER_ILP;
        CHECK(ap_partition_solve(m, c, p, &o, &ilp, &err) == AP_OK);
        CHECK_INT(ilp.solver, AP_SOLVER_ILP);
        CHECK(ilp.optimal);
        CHECK_NEAR(ilp.pipe_s, dp.pipe_s, TOL);
    }
}

static void test_recompute_choice(void) {
    static ap_model m;
    static ap_cluster c;
    ap_plan p;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 10;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 3, &c);
    /* Colossal-AI: per-stage checkpoint counts */
    small_plan(&p, 3, 1, 12);
    p.trainer = AP_TRAINER_COLOSSALAI;
    p.recompute = AP_RECOMPUTE_FULL;
    check_recompute_case("colossalai llama-3-8b/10 pp3", &m, &c, &p, 1);
    /* Megatron: one --recompute-num-layers for every stage */
    p.trainer = AP_TRAINER_MEGATRON;
    check_recompute_case("megatron llama-3-8b/10 pp3", &m, &c, &p, 0);
    /* the choice needs full recomputation */
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    o.choose_recompute = 1;
    p.recompute = AP_RECOMPUTE_SELECTIVE;
    ap_partition_result r;
    ap_err err = {{0}};
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
}

/* ---- joint choice: brute force over variants (granularity, one count, offload fractions) x
 * splits (x per-stage counts), each whole plan priced by the cost model ------------------------ */

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_estimate_opts *est;
    ap_plan q;              /* the variant being enumerated */
    double extra_s;         /* its optimizer + offload time on the uniform split */
    int per_stage;          /* per-stage counts under full */
    int split[AP_MAX_STAGES], rc[AP_MAX_STAGES];
    double best_J, min_peak, best_peak; /* best_peak: peak of the best_J answer */
    ap_plan best;           /* the best plan (split, counts, variant) */
    long count, variants;
    int errors;
} brute_j;

static void brute_j_eval(brute_j *b) {
    static ap_plan q;
    static ap_estimate e;
    q = b->q;
    q.nchunks = q.pp;
    for (int r = 0; r < q.pp; r++) {
        q.stage_layers[r] = b->split[r];
        q.stage_recompute[r] = b->per_stage ? b->rc[r] : -1;
    }
    ap_err err;
    if (ap_stage_estimate(b->m, b->c, &q, b->est, &e, &err) != AP_OK) {
        b->errors++;
        return;
    }
    b->count++;
    if (e.device_peak_bytes < b->min_peak) b->min_peak = e.device_peak_bytes;
    double J = T_of(&e) + b->extra_s;
    if (e.fits && J < b->best_J) {
        b->best_J = J;
        b->best_peak = e.device_peak_bytes;
        b->best = q;
    }
}

static void brute_j_counts(brute_j *b, int r) {
    if (r == b->q.pp) {
        brute_j_eval(b);
        return;
    }
    for (int k = 1; k <= b->split[r]; k++) {
        b->rc[r] = k;
        brute_j_counts(b, r + 1);
    }
}

static void brute_j_splits(brute_j *b, int r, int left) {
    int p = b->q.pp;
    if (!ap_trainer_get(b->q.trainer)->uneven_stages) {
        /* the trainer runs only the uniform split */
        if (r > 0) return;
        for (int i = 0; i < p; i++) b->split[i] = left / p;
        if (b->per_stage) brute_j_counts(b, 0);
        else brute_j_eval(b);
        return;
    }
    if (r == p - 1) {
        b->split[r] = left;
        if (b->per_stage) brute_j_counts(b, 0);
        else brute_j_eval(b);
        return;
    }
    for (int n = 1; n <= left - (p - 1 - r); n++) {
        b->split[r] = n;
        brute_j_splits(b, r + 1, left - n);
    }
}

/* every variant the options open for plan p; the trainer refuses some (its table) */
static void brute_j_run(brute_j *b, const ap_plan *p, const ap_partition_opts *o) {
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    int L = (int)b->m->layers;
    b->best_J = b->min_peak = b->best_peak = INFINITY;
    b->count = b->variants = 0;
    b->errors = 0;
    for (int g = 0; g < 3; g++) {
        if (o->choose_mode ? !(tr->recompute_mask & (1u << g)) : g != (int)p->recompute) continue;
        int nf = o->choose_offload ? o->noffload_fracs : 1;
        for (int fo = 0; fo < nf; fo++)
            for (int fp = 0; fp < nf; fp++) {
                int full = g == AP_RECOMPUTE_FULL;
                /* Colossal-AI: per-stage counts only with pp > 1 (its table) */
                int counts = (o->choose_mode || o->choose_recompute) && full &&
                             !(tr->recompute_partial_needs_pp && p->pp == 1);
                int kmax = counts && tr->recompute_partial && !tr->per_stage_recompute
                               ? L - (p->pp - 1) : 0;
                for (int k = 0; k <= kmax; k++) {
                    b->q = *p;
                    b->q.recompute = (ap_recompute)g;
                    b->q.recompute_layers = counts ? k : (full ? p->recompute_layers : 0);
                    if (o->choose_offload) {
                        b->q.offload_optimizer = o->offload_fracs[fo];
                        b->q.offload_params = o->offload_fracs[fp];
                    }
                    b->per_stage = counts && tr->per_stage_recompute;
                    static ap_plan u;
                    static ap_estimate e;
                    u = b->q;
                    u.nchunks = 0;
                    u.recompute_layers = counts ? 0 : b->q.recompute_layers;
                    ap_err err;
                    ap_status st = ap_stage_estimate(b->m, b->c, &u, b->est, &e, &err);
                    if (st == AP_ERR_INFEASIBLE) continue; /* the trainer refuses the variant */
                    CHECK(st == AP_OK);
                    b->extra_s = e.time.optimizer_s + e.time.offload_s;
                    b->variants++;
                    brute_j_splits(b, 0, L);
                }
            }
    }
}

/* DP == brute force == ILP on the joint objective, and the answer as a plan fits with the
 * reported figures; returns the DP's answer in *dp_out */
static void check_joint(const char *what, const ap_model *m, const ap_cluster *c, const ap_plan *p,
                        const ap_partition_opts *o0, ap_partition_result *dp_out) {
    ap_partition_opts o = *o0;
    ap_err err = {{0}};
    brute_j b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.c = c;
    b.est = &o.est;
    brute_j_run(&b, p, &o);
    CHECK_INT(b.errors, 0);
    ap_partition_result dp, ilp;
    o.solver = AP_SOLVER_DP;
    ap_status st = ap_partition_solve(m, c, p, &o, &dp, &err);
    CHECK(st == AP_OK);
    if (st != AP_OK) fprintf(stderr, "%s: %s\n", what, err.msg);
    CHECK_INT(dp.fits, b.best_J < INFINITY);
    if (dp.fits) {
        CHECK(dp.optimal);
        CHECK_NEAR(dp.objective_s, b.best_J, TOL);
        if (fabs(dp.objective_s - b.best_J) > TOL * b.best_J)
            fprintf(stderr, "%s: dp J %.9g (rc %d/%d off %.2f/%.2f), brute force %.9g (rc %d/%d "
                    "off %.2f/%.2f)\n", what, dp.objective_s, dp.recompute, dp.recompute_layers,
                    dp.offload_optimizer, dp.offload_params, b.best_J, b.best.recompute,
                    b.best.recompute_layers, b.best.offload_optimizer, b.best.offload_params);
        /* the answer as a plan: what the trainer would run */
        static ap_plan q;
        static ap_estimate e;
        q = *p;
        ap_partition_apply(&dp, &q);
        CHECK(ap_plan_check(&q, m, c, 1, &err) == AP_OK);
        CHECK(ap_stage_estimate(m, c, &q, &o.est, &e, &err) == AP_OK);
        CHECK(e.fits);
        CHECK_NEAR(T_of(&e), dp.pipe_s, TOL);
        CHECK_NEAR(e.time.step_s, dp.step_s, TOL);
    }
    o.solver = AP_SOLVER_ILP;
    CHECK(ap_partition_solve(m, c, p, &o, &ilp, &err) == AP_OK);
    CHECK_INT(ilp.fits, dp.fits);
    if (dp.fits && dp.restricted) {
        /* what the trainer can express is enumerated: no integer program */
        CHECK(ilp.restricted);
        CHECK_NEAR(ilp.objective_s, dp.objective_s, TOL);
    } else if (dp.fits) {
        CHECK_INT(ilp.solver, AP_SOLVER_ILP);
        CHECK(!ilp.fell_back);
        CHECK(ilp.optimal);
        CHECK_NEAR(ilp.objective_s, dp.objective_s, TOL);
        if (ilp.fell_back) fprintf(stderr, "%s: ILP fell back: %s\n", what, ilp.note);
    }
    if (getenv("AP_TEST_VERBOSE"))
        fprintf(stderr, "%s: fits %d recompute %d/%d offload %.2f/%.2f J %.6g (ILP %.6g, %s)\n",
                what, dp.fits, dp.recompute, dp.recompute_layers, dp.offload_optimizer,
                dp.offload_params, dp.objective_s, ilp.objective_s, ilp.note);
    *dp_out = dp;
}

/* the capacity bound where the joint answer at `loose` headroom no longer fits but something
 * does: midway between the least peak of all variants and splits and that answer's peak */
static double tight_headroom(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_partition_opts *o, double frac) {
    brute_j b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.c = c;
    b.est = &o->est;
    brute_j_run(&b, p, o);
    CHECK(b.min_peak < b.best_peak * (1 - 1e-6));
    return c->gpu.mem_bytes - (b.min_peak + frac * (b.best_peak - b.min_peak));
}

static void test_recompute_granularity(void) {
    static ap_model m;
    static ap_cluster c;
    ap_plan p;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 10;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 3, &c);
    ap_trainer_id trainers[3] = {AP_TRAINER_MEGATRON, AP_TRAINER_COLOSSALAI, AP_TRAINER_DEEPSPEED};
    for (int ti = 0; ti < 3; ti++) {
        small_plan(&p, 3, 1, 12);
        p.trainer = trainers[ti];
        p.recompute = AP_RECOMPUTE_FULL;
        p.seq = 8192;
        /* DeepSpeed's pipeline takes only uniform stages: 9 layers on 3 */
        m.layers = p.trainer == AP_TRAINER_DEEPSPEED ? 9 : 10;
        ap_partition_opts o;
        ap_partition_opts_init(&o);
        o.choose_mode = 1;
        ap_partition_result loose, mid, tight;
        char what[96];
        snprintf(what, sizeof what, "%s granularity loose", ap_trainer_name(p.trainer));
        check_joint(what, &m, &c, &p, &o, &loose);
        CHECK(loose.fits);
        /* without a memory bound nothing is recomputed */
        CHECK_INT(loose.recompute, AP_RECOMPUTE_NONE);
        CHECK(loose.variants >= 2);
        /* memory binds at two levels: a slower granularity or count must be chosen */
        double hr_mid = tight_headroom(&m, &c, &p, &o, 0.5);
        double hr_tight = tight_headroom(&m, &c, &p, &o, 0.05);
        o.est.headroom_bytes = hr_mid;
        snprintf(what, sizeof what, "%s granularity mid", ap_trainer_name(p.trainer));
        check_joint(what, &m, &c, &p, &o, &mid);
        CHECK(mid.fits);
        CHECK(mid.objective_s > loose.objective_s);
        o.est.headroom_bytes = hr_tight;
        snprintf(what, sizeof what, "%s granularity tight", ap_trainer_name(p.trainer));
        check_joint(what, &m, &c, &p, &o, &tight);
        CHECK(tight.fits);
        CHECK(tight.objective_s >= mid.objective_s * (1 - 1e-12));
        /* the chosen granularity is one the trainer has */
        CHECK(ap_trainer_get(p.trainer)->recompute_mask & (1u << tight.recompute));
        if (p.trainer == AP_TRAINER_COLOSSALAI && tight.recompute == AP_RECOMPUTE_FULL)
            for (int r = 0; r < 3; r++)
                CHECK(tight.stage_recompute[r] >= 1 &&
                      tight.stage_recompute[r] <= tight.stage_layers[r]);
        if (p.trainer == AP_TRAINER_DEEPSPEED) {
            CHECK(tight.restricted);
            for (int r = 0; r < 3; r++) CHECK_INT(tight.rank_layers[r], loose.rank_layers[r]);
        }
        /* with the plan's granularity fixed (full, counts chosen) the answer is never better */
        ap_partition_opts of = o;
        of.choose_mode = 0;
        of.choose_recompute = p.trainer != AP_TRAINER_DEEPSPEED;
        ap_partition_result fixed;
        ap_err err = {{0}};
        CHECK(ap_partition_solve(&m, &c, &p, &of, &fixed, &err) == AP_OK);
        /* (without offload X is the same for every granularity: compare T) */
        if (fixed.fits) CHECK(tight.pipe_s <= fixed.pipe_s * (1 + 1e-12));
    }
}

/* offload fractions chosen jointly with the split and the recompute: brute force on small
 * cases for every trainer rule; a plan that fits with neither a uniform recompute nor without
 * offload fits with the joint choice; the node's CPU memory binds */
/* The joint choice under the caps a search passes (upper_s on the objective, upper_pipe_s on
 * the pipeline time plus the optimizer and offload time): with the uncapped answer r below the
 * cap, the capped solve finds it; above, nothing better. The caps prune variants, among them
 * those a larger offload fraction rules out (partition.c mref), which this checks. */
static void check_capped(const char *what, const ap_model *m, const ap_cluster *c,
                         const ap_plan *p, const ap_partition_opts *o,
                         const ap_partition_result *r) {
    static ap_plan q;
    static ap_estimate e;
    ap_err err = {{0}};
    CHECK(r->fits);
    if (!r->fits) return;
    q = *p;
    ap_partition_apply(r, &q);
    CHECK(ap_stage_estimate(m, c, &q, &o->est, &e, &err) == AP_OK);
    const double J = r->objective_s, P = r->pipe_s + e.time.x_floor_s;
    static const double f[] = {0.9, 0.99, 0.999999, 1.000001, 1.01, 1.1, 1.5};
    for (int pipe = 0; pipe < 2; pipe++)
        for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
            ap_partition_opts oc = *o;
            oc.solver = AP_SOLVER_DP;
            double U = f[i] * (pipe ? P : J);
            if (pipe) oc.upper_pipe_s = U;
            else oc.upper_s = U;
            ap_partition_result rc;
            CHECK(ap_partition_solve(m, c, p, &oc, &rc, &err) == AP_OK);
            int below = f[i] > 1;
            if (below) {
                CHECK(rc.fits && !rc.capped);
                CHECK_NEAR(rc.objective_s, J, TOL);
            } else if (rc.fits && !rc.capped) {
                CHECK(rc.objective_s >= J * (1 - TOL));
            }
            if (below && !(rc.fits && !rc.capped && fabs(rc.objective_s - J) <= TOL * J))
                fprintf(stderr, "%s: cap %s %.6g: fits %d capped %d J %.9g, uncapped %.9g\n",
                        what, pipe ? "pipe" : "objective", U, rc.fits, rc.capped,
                        rc.objective_s, J);
        }
}

static void test_offload_choice(void) {
    static ap_model m;
    static ap_cluster c;
    ap_plan p;
    ap_err err = {{0}};
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 10;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 3, &c);
    small_plan(&p, 3, 1, 12);
    p.seq = 8192;
    p.zero = 1; /* Megatron's offload fraction needs the distributed optimizer */
    p.recompute = AP_RECOMPUTE_FULL;
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    o.choose_mode = 1;
    o.choose_offload = 1;
    ap_partition_result r, nooff, uni;

    /* the GPU fits no split of any recompute without offload: capacity below the least peak */
    ap_partition_opts on = o;
    on.choose_offload = 0;
    brute_j b;
    memset(&b, 0, sizeof b);
    b.m = &m;
    b.c = &c;
    b.est = &o.est;
    brute_j_run(&b, &p, &on);
    double min_peak_nooff = b.min_peak;
    o.est.headroom_bytes = on.est.headroom_bytes =
        c.gpu.mem_bytes - (min_peak_nooff - 0.5 * 1073741824.0);
    CHECK(ap_partition_solve(&m, &c, &p, &on, &nooff, &err) == AP_OK);
    CHECK(!nooff.fits);
    /* nor the uniform split recomputing every layer (the least memory of a uniform recompute) */
    int u[AP_MAX_STAGES];
    uniform_of(&p, m.layers, u);
    CHECK(ap_partition_eval(&m, &c, &p, &o.est, u, NULL, &uni, &err) == AP_OK);
    CHECK(!uni.fits);
    check_joint("megatron offload, no fit without", &m, &c, &p, &o, &r);
    CHECK(r.fits);
    check_capped("megatron offload, no fit without", &m, &c, &p, &o, &r);
    CHECK(r.offload_optimizer > 0);
    CHECK_INT(r.offload_params * 4, 0); /* Megatron offloads no parameters */

    /* a capacity where offloading is the best choice and a heavier recompute without offload
     * also fits: then a node's CPU memory below what that offload needs moves the answer */
    int found = 0;
    for (int i = 1; i <= 9 && !found; i++) {
        o.est.headroom_bytes = 2.0 * 1073741824.0;
        o.est.headroom_bytes = tight_headroom(&m, &c, &p, &o, 0.1 * i);
        on.est.headroom_bytes = o.est.headroom_bytes;
        CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
        CHECK(ap_partition_solve(&m, &c, &p, &on, &nooff, &err) == AP_OK);
        found = r.fits && r.offload_optimizer > 0 && nooff.fits;
    }
    CHECK(found);
    if (found) {
        CHECK(r.objective_s < nooff.objective_s);
        CHECK(r.host_bytes_per_node > 0);
        /* 90% of the node's memory is usable (estimate.c host_fits) */
        ap_cluster cb = c;
        cb.cpu_mem_bytes = 0.8 * r.host_bytes_per_node / 0.9;
        ap_partition_result rb;
        check_joint("megatron offload, CPU-bound", &m, &cb, &p, &o, &rb);
        CHECK(rb.fits);
        CHECK(rb.host_bytes_per_node <= 0.9 * cb.cpu_mem_bytes);
        CHECK(rb.offload_optimizer < r.offload_optimizer);
        CHECK(rb.objective_s > r.objective_s);
        CHECK(rb.objective_s <= nooff.objective_s * (1 + 1e-12));
        check_capped("megatron offload, CPU-bound", &m, &cb, &p, &o, &rb);
        /* tighter GPUs with that CPU memory: the larger fractions miss host memory, so what
         * they leave unsolved says nothing of the smaller ones (partition.c mref) */
        for (int i = 1; i <= 9; i++) {
            ap_partition_opts ot = o;
            ot.est.headroom_bytes = 2.0 * 1073741824.0;
            ot.est.headroom_bytes = tight_headroom(&m, &cb, &p, &ot, 0.1 * i);
            ap_partition_result rt;
            char what[80];
            snprintf(what, sizeof what, "megatron offload, CPU-bound, tight %d", i);
            check_joint(what, &m, &cb, &p, &ot, &rt);
            if (rt.fits) check_capped(what, &m, &cb, &p, &ot, &rt);
        }
        check_joint("megatron offload, offload best", &m, &c, &p, &o, &r);
        check_capped("megatron offload, offload best", &m, &c, &p, &o, &r);
    }
    /* no distributed optimizer: Megatron cannot offload; the choice degenerates to none */
    p.zero = 0;
    o.est.headroom_bytes = 2.0 * 1073741824.0;
    check_joint("megatron zero0 offload", &m, &c, &p, &o, &r);
    CHECK_INT(r.offload_optimizer * 4, 0);

    /* ZeRO-3 without a pipeline: Colossal-AI Gemini (fractions of both), DeepSpeed (optimizer
     * fractions, all parameters or none), FSDP (both together, all or nothing) */
    ap_trainer_id z3[3] = {AP_TRAINER_COLOSSALAI, AP_TRAINER_DEEPSPEED, AP_TRAINER_FSDP};
    for (int ti = 0; ti < 3; ti++) {
        ap_cluster_from_gpu(ap_gpu_find("h100"), 2, &c);
        small_plan(&p, 1, 1, 4);
        p.dp = 2;
        p.gbs = 8;
        p.zero = 3;
        p.seq = 8192;
        p.trainer = z3[ti];
        p.recompute = AP_RECOMPUTE_FULL;
        m.layers = 10;
        ap_partition_opts oz;
        ap_partition_opts_init(&oz);
        oz.choose_mode = 1;
        oz.choose_offload = 1;
        char what[96];
        for (int bound = 0; bound < 3; bound++) {
            oz.est.headroom_bytes = 2.0 * 1073741824.0;
            if (bound)
                oz.est.headroom_bytes = tight_headroom(&m, &c, &p, &oz, bound == 1 ? 0.5 : 0.05);
            snprintf(what, sizeof what, "%s z3 offload bound %d", ap_trainer_name(p.trainer), bound);
            check_joint(what, &m, &c, &p, &oz, &r);
            CHECK(r.fits);
            const ap_trainer_caps *tr = ap_trainer_get(p.trainer);
            if (!tr->offload_params_fraction) CHECK(r.offload_params == 0 || r.offload_params == 1);
            if (tr->offload_together) CHECK((r.offload_optimizer > 0) == (r.offload_params > 0));
            if (bound == 2) CHECK(r.offload_optimizer > 0 || r.offload_params > 0 ||
                                  r.recompute != AP_RECOMPUTE_NONE);
        }
    }
    /* a bad set of fractions is refused */
    o.noffload_fracs = 1;
    o.offload_fracs[0] = 2.0;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
}

/* the memo (keyed by rank, dense and MoE counts) equals direct evaluation of other ranges */
static void test_stage_table(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/mixtral-8x7b.json", &m);
    m.layers = 13;
    m.moe.first_dense_layers = 1;
    m.moe.layer_freq = 2;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    ap_plan p;
    small_plan(&p, 4, 1, 8);
    ap_stage_table *t = NULL;
    ap_err err = {{0}};
    CHECK(ap_stage_table_new(&m, &c, &p, NULL, &t, &err) == AP_OK);
    int calls = 0;
    for (int r = 1; r < 3; r++)
        for (int a = 1; a < 10; a++)
            for (int n = 1; a + n <= 12; n++) {
                const ap_stage_cost *sc = NULL;
                CHECK(ap_stage_table_get(t, r, a, n, -1, &sc, &err) == AP_OK);
                ap_stage_cost d;
                CHECK(sc != NULL);
                CHECK(ap_stage_cost_eval(&m, &c, &p, NULL, r, a, n, -1, &d, &err) == AP_OK);
                if (!sc) continue;
                calls++;
                CHECK_NEAR(sc->fwd_s, d.fwd_s, 1e-12);
                CHECK_NEAR(sc->bwd_s, d.bwd_s, 1e-12);
                CHECK_NEAR(sc->device_bytes, d.device_bytes, 1e-12);
                CHECK_INT(sc->fits, d.fits);
            }
    /* fewer evaluations than lookups: ranges with the same counts share an entry */
    CHECK(ap_stage_table_evals(t) < calls);
    /* bad ranges are refused */
    ap_stage_cost d;
    const ap_stage_cost *bad = &d;
    CHECK(ap_stage_table_get(t, 0, 1, 2, -1, &bad, &err) == AP_ERR_INPUT);
    CHECK(bad == NULL);
    CHECK(ap_stage_cost_eval(&m, &c, &p, NULL, 3, 5, 3, -1, &d, &err) == AP_ERR_INPUT);
    CHECK(ap_stage_cost_eval(&m, &c, &p, NULL, 0, 0, 14, -1, &d, &err) == AP_ERR_INPUT);
    ap_stage_table_free(t);
}

/* Batch fills (ap_stage_table_fill_n: several ranks priced by one layout) equal the ranks
 * priced one by one, bit for bit: a model of one kind, and MoE layers after a dense prefix
 * (rank 0 from layer 0 when it holds the whole prefix, the others past it), with and without a
 * recompute count; a layout with fewer estimates than entries. A mixed model whose kinds
 * alternate has no batch fill. */
static void test_stage_table_fill(void) {
    static ap_model m;
    static ap_cluster c;
    ap_err err = {{0}};
    for (int kind = 0; kind < 3; kind++) {
        load("examples/models/mixtral-8x7b.json", &m);
        m.layers = 14;
        m.moe.first_dense_layers = kind == 0 ? 0 : 3;
        m.moe.layer_freq = kind == 2 ? 2 : 1;
        ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
        ap_plan p;
        small_plan(&p, 4, 1, 8);
        p.recompute = AP_RECOMPUTE_FULL;
        const int D = (int)m.moe.first_dense_layers;
        /* one kind, a dense prefix, interleaved kinds */
        CHECK_INT(ap_model_dense_prefix(&m), kind == 1 ? 3 : -1);
        for (int rc = -1; rc <= 2; rc += 3) {
            ap_stage_table *t = NULL;
            CHECK(ap_stage_table_new(&m, &c, &p, NULL, &t, &err) == AP_OK);
            /* ranks 1-3 first (rank 0 then holds the prefix and what is left), then all four */
            int ranks[4] = {0, 1, 2, 3}, cells = 0;
            for (int n = 1; n <= 5; n++) {
                CHECK(ap_stage_table_fill_n(t, ranks + 1, 3, n, rc, &err) == AP_OK);
                CHECK(ap_stage_table_fill_n(t, ranks, 4, n, rc, &err) == AP_OK);
                cells += 4;
            }
            long batched = ap_stage_table_evals(t);
            if (kind == 2) CHECK(batched == 0);
            else CHECK(batched > 0 && batched < cells);
            for (int n = 1; n <= 5; n++)
                for (int r = 0; r < 4; r++) {
                    /* rank 0 from layer 0, the others past the prefix, the last ending at L */
                    int a = r == 0 ? 0 : r == 3 ? 14 - n : D + r;
                    const ap_stage_cost *sc = NULL;
                    ap_stage_cost d;
                    CHECK(ap_stage_table_get(t, r, a, n, rc, &sc, &err) == AP_OK);
                    CHECK(ap_stage_cost_eval(&m, &c, &p, NULL, r, a, n, rc, &d, &err) == AP_OK);
                    if (!sc) continue;
                    CHECK(sc->fwd_s == d.fwd_s && sc->bwd_s == d.bwd_s);
                    CHECK(sc->device_bytes == d.device_bytes && sc->host_bytes == d.host_bytes);
                    CHECK_INT(sc->fits, d.fits);
                }
            ap_stage_table_free(t);
        }
    }
}

/* llama-3-70b pp=8 on 40 GB A100s: stage 0 holds 8 in-flight micro-batches plus the
 * embedding and does not fit with 10 layers; fewer layers there fit */
static void llama70b_plan(ap_plan *p) {
    ap_plan_init(p);
    p->tp = 8;
    p->pp = 8;
    p->dp = 1;
    p->mbs = 1;
    p->gbs = 128;
    p->grad_accum = 128;
    p->seq = 8192;
    p->sp = 1;
    p->zero = 1;
    p->recompute = AP_RECOMPUTE_SELECTIVE;
}

static void test_llama70b(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/llama-3-70b.json", &m);
    ap_cluster_from_gpu(ap_gpu_find("a100-40gb"), 64, &c);
    ap_plan p;
    llama70b_plan(&p);
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_err err = {{0}};
    int u[AP_MAX_STAGES];
    uniform_of(&p, m.layers, u);
    ap_partition_result uni, dp, ilp;
    CHECK(ap_partition_eval(&m, &c, &p, &o.est, u, NULL, &uni, &err) == AP_OK);
    CHECK(!uni.fits);
    CHECK(uni.stage_device_bytes[0] > uni.stage_device_bytes[1]); /* stage 0 is the heaviest */
    CHECK(ap_partition_solve(&m, &c, &p, &o, &dp, &err) == AP_OK);
    CHECK(dp.fits);
    CHECK(dp.optimal);
    CHECK(dp.stage_layers[0] < 10);
    CHECK(dp.peak_device_bytes < uni.peak_device_bytes);
    /* the price of fitting: a little slower than the uniform split that does not fit */
    CHECK(dp.pipe_s >= uni.pipe_s * (1 - 1e-12));
    CHECK(dp.pipe_s < uni.pipe_s * 1.02);
    int sum = 0;
    for (int r = 0; r < 8; r++) sum += dp.stage_layers[r];
    CHECK_INT(sum, 80);
    /* C(79, 7) = 2.9e9 splits are too many for brute force: the ILP is the reference here */
    o.solver = AP_SOLVER_ILP;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &ilp, &err) == AP_OK);
    CHECK_INT(ilp.solver, AP_SOLVER_ILP);
    CHECK(ilp.optimal);
    CHECK_NEAR(ilp.pipe_s, dp.pipe_s, TOL);

    /* under a cap (the search's upper_s): above the optimum the capped solve finds it; at or
     * below it, no split that beats the cap (a capped answer, or one at least the optimum).
     * Far below it the DP's bound (least sum and least maximum) already passes the cap, and
     * the answer is capped without the candidate scan */
    o.solver = AP_SOLVER_DP;
    static const double f[] = {0.5, 0.9, 0.999999, 1.000001, 1.1};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        ap_partition_opts oc = o;
        oc.upper_s = f[i] * dp.objective_s;
        ap_partition_result rc;
        CHECK(ap_partition_solve(&m, &c, &p, &oc, &rc, &err) == AP_OK);
        if (f[i] > 1) {
            CHECK(rc.fits && !rc.capped);
            CHECK_NEAR(rc.objective_s, dp.objective_s, TOL);
        } else {
            CHECK(rc.capped || rc.objective_s >= dp.objective_s * (1 - TOL));
        }
        if (f[i] == 0.5) CHECK(rc.capped);
    }

    /* a 4x larger vocabulary makes the last stage (LM head, fp32 logits) the slowest on H100
     * where memory does not bind: the optimum gives it fewer layers and beats the uniform split */
    m.vocab = 4 * 128256;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 64, &c);
    uniform_of(&p, m.layers, u);
    o.solver = AP_SOLVER_DP;
    CHECK(ap_partition_eval(&m, &c, &p, &o.est, u, NULL, &uni, &err) == AP_OK);
    CHECK(uni.fits);
    CHECK(uni.stage_s[7] > uni.stage_s[3]);
    CHECK(ap_partition_solve(&m, &c, &p, &o, &dp, &err) == AP_OK);
    CHECK(dp.fits);
    CHECK(dp.stage_layers[7] < dp.stage_layers[3]);
    CHECK(dp.pipe_s < uni.pipe_s * (1 - 1e-3));
}

/* trainers that cannot split unevenly get the uniform split */
static void test_restricted(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 16;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    ap_plan p;
    small_plan(&p, 4, 1, 16);
    p.trainer = AP_TRAINER_DEEPSPEED;
    p.recompute = AP_RECOMPUTE_FULL;
    ap_partition_result r;
    ap_err err = {{0}};
    CHECK(ap_partition_solve(&m, &c, &p, NULL, &r, &err) == AP_OK);
    CHECK(r.restricted);
    for (int i = 0; i < 4; i++) CHECK_INT(r.stage_layers[i], 4);
    CHECK_CONTAINS(r.note, "uniform");
}

static void test_bad_input(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 8;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    ap_plan p;
    small_plan(&p, 4, 1, 8);
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_partition_result r;
    ap_err err = {{0}};
    /* 4 x 2 chunks of at least 2 layers need 16 */
    p.vp = 2;
    o.min_layers = 2;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "chunks");
    /* interleaved with the recompute choice: not implemented */
    o.min_layers = 1;
    o.choose_recompute = 1;
    p.recompute = AP_RECOMPUTE_FULL;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "vp 1");
    o.choose_recompute = 0;
    o.choose_offload = 1;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "vp 1");
    o.choose_offload = 0;
    p.recompute = AP_RECOMPUTE_SELECTIVE;
    p.vp = 1;
    o.min_layers = 3;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_ERR_INPUT);
    o.min_layers = 2;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    for (int i = 0; i < 4; i++) CHECK_INT(r.stage_layers[i], 2);
    CHECK(ap_solver_parse("glpk", &o.solver, &err) == AP_ERR_INPUT);
    CHECK(ap_solver_parse("ilp", &o.solver, &err) == AP_OK && o.solver == AP_SOLVER_ILP);

    /* nothing fits (a headroom larger than the GPU): a result, not an error; the least-peak
     * split is returned, and the ILP falls back to it */
    o.min_layers = 1;
    o.est.headroom_bytes = 2 * c.gpu.mem_bytes;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    CHECK(!r.fits);
    CHECK(r.fell_back);
    CHECK_INT(r.solver, AP_SOLVER_DP);
}

/* the ends of the range: one stage holds everything, one layer per stage; both solvers */
static void test_edges(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 6;
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_partition_result r;
    ap_err err = {{0}};
    for (int s = 0; s < 2; s++) {
        o.solver = s ? AP_SOLVER_ILP : AP_SOLVER_DP;
        ap_plan p;
        ap_cluster_from_gpu(ap_gpu_find("h100"), 1, &c);
        small_plan(&p, 1, 1, 4);
        CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
        CHECK_INT(r.pp, 1);
        CHECK_INT(r.stage_layers[0], 6);
        CHECK(!r.fell_back);
        ap_cluster_from_gpu(ap_gpu_find("h100"), 6, &c);
        small_plan(&p, 6, 1, 4);
        CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
        for (int i = 0; i < 6; i++) CHECK_INT(r.stage_layers[i], 1);
        CHECK(!r.fell_back);
        CHECK(r.optimal);
    }
}

/* GLPK failures: an error inside GLPK (through glp_error_hook) and a tiny node limit */
static void test_solver_faults(void) {
    static ap_model m;
    static ap_cluster c;
    load("examples/models/llama-3-8b.json", &m);
    m.layers = 12;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 4, &c);
    ap_plan p;
    small_plan(&p, 4, 1, 16);
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    ap_partition_result dp, r;
    ap_err err = {{0}};
    o.solver = AP_SOLVER_DP;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &dp, &err) == AP_OK);
    o.solver = AP_SOLVER_ILP;
    o.ilp_fault = 1;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    CHECK(r.fell_back);
    CHECK_INT(r.solver, AP_SOLVER_DP);
    CHECK_CONTAINS(r.note, "GLPK error");
    CHECK_NEAR(r.pipe_s, dp.pipe_s, TOL);
    /* the same through the joint program over several variants */
    ap_partition_result jdp;
    o.choose_mode = 1;
    o.solver = AP_SOLVER_DP;
    o.ilp_fault = 0;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &jdp, &err) == AP_OK);
    o.solver = AP_SOLVER_ILP;
    o.ilp_fault = 1;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    CHECK(r.fell_back);
    CHECK_INT(r.solver, AP_SOLVER_DP);
    CHECK_CONTAINS(r.note, "GLPK error");
    CHECK_NEAR(r.objective_s, jdp.objective_s, TOL);
    o.ilp_fault = 0;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    CHECK(!r.fell_back);
    CHECK_NEAR(r.objective_s, jdp.objective_s, TOL);
    o.choose_mode = 0;
    o.ilp_fault = 1;
    /* the direct call reports the error */
    ap_stage_table *t = NULL;
    CHECK(ap_stage_table_new(&m, &c, &p, &o.est, &t, &err) == AP_OK);
    CHECK(ap_partition_ilp(t, 12, 4, 16, 0, -1, &o, 0, &r, &err) == AP_ERR_SOLVER);
    CHECK_CONTAINS(err.msg, "GLPK error");
    /* GLPK works again after the failure (its environment was freed, not reused) */
    o.ilp_fault = 0;
    CHECK(ap_partition_ilp(t, 12, 4, 16, 0, -1, &o, 0, &r, &err) == AP_OK);
    CHECK(r.optimal);
    CHECK_NEAR(r.pipe_s, dp.pipe_s, TOL);
    ap_stage_table_free(t);

    /* llama-3.1-405b pp16 dp8: a one-node limit on the full program (no upper bound to prune
     * it, ~60k binaries) stops GLPK before it proves anything: a solver error or a feasible
     * answer that says so, the same on every run */
    load("examples/models/llama-3.1-405b.json", &m);
    ap_cluster_from_gpu(ap_gpu_find("h100"), 1024, &c);
    small_plan(&p, 16, 8, 128);
    p.dp = 8;
    p.gbs = 1024;
    p.seq = 8192;
    p.zero = 1;
    o.solver = AP_SOLVER_DP;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &dp, &err) == AP_OK);
    CHECK(dp.fits);
    o.ilp_node_limit = 1;
    CHECK(ap_stage_table_new(&m, &c, &p, &o.est, &t, &err) == AP_OK);
    ap_status is = ap_partition_ilp(t, (int)m.layers, 16, 128, 0, -1, &o, 0, &r, &err);
    CHECK(is == AP_ERR_SOLVER || (is == AP_OK && !r.optimal));
    if (is == AP_ERR_SOLVER) CHECK_CONTAINS(err.msg, "node");
    else CHECK_CONTAINS(r.note, "node limit");
    /* the limit is a count: the same answer twice */
    ap_partition_result r2;
    ap_status is2 = ap_partition_ilp(t, (int)m.layers, 16, 128, 0, -1, &o, 0, &r2, &err);
    CHECK_INT(is2, is);
    if (is == AP_OK && is2 == AP_OK) CHECK(r.pipe_s == r2.pipe_s);
    ap_stage_table_free(t);
    /* through ap_partition_solve the ILP gets the DP's T as a bound; whatever GLPK manages in
     * one node, the answer is consistent: optimal = DP, feasible >= DP, or the DP after a
     * fallback */
    o.solver = AP_SOLVER_ILP;
    CHECK(ap_partition_solve(&m, &c, &p, &o, &r, &err) == AP_OK);
    CHECK(r.fits);
    if (r.fell_back) {
        CHECK_INT(r.solver, AP_SOLVER_DP);
        CHECK_CONTAINS(r.note, "node");
        CHECK_NEAR(r.pipe_s, dp.pipe_s, TOL);
    } else if (r.optimal) {
        CHECK_NEAR(r.pipe_s, dp.pipe_s, TOL);
    } else {
        CHECK(r.pipe_s >= dp.pipe_s * (1 - TOL));
        CHECK_CONTAINS(r.note, "not proven optimal");
    }
}

static void test_cli(void) {
    char *out = NULL, *er = NULL;
    char args[512];
    snprintf(args, sizeof args,
             "partition %s --gpu a100-40gb --gpus 64 --tp 8 --pp 8 --gbs 128 --seq 8192 --sp "
             "--zero 1 --recompute selective",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    /* stage 1 holds 7 in-flight micro-batches: moving only the first and last stage cannot fit */
    CHECK_CONTAINS(out, "fits         NO           NO           yes");
    CHECK_CONTAINS(out, "first/last   4,10,10,10,10,10,10,16");
    CHECK_CONTAINS(out, "--stage-layers 8,");
    CHECK_CONTAINS(out, "solver    dp, optimal");
    free(out);
    free(er);
    snprintf(args, sizeof args,
             "partition %s --gpu a100-40gb --gpus 64 --tp 8 --pp 8 --gbs 128 --seq 8192 --sp "
             "--zero 1 --recompute selective --solver ilp --node-limit 50000",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "solver    ilp, optimal");
    free(out);
    free(er);
    snprintf(args, sizeof args, "partition %s --gpus 8 --pp 8 --solver simplex",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &er), 2);
    CHECK_CONTAINS(er, "--solver");
    free(out);
    free(er);
    /* llama-3-70b on 32 40 GB A100s (tp 8, pp 4, ZeRO-1): no split and no recompute fits
     * without offload; the joint choice offloads the optimizer states and recomputes nothing;
     * with 128 GiB of CPU memory per node half of them fit the host, and 6 layers per stage are
     * recomputed instead */
    const char *a70 =
        "partition %s --gpu a100-40gb --gpus 32 --tp 8 --pp 4 --gbs 128 --seq 8192 --sp --zero 1 "
        "--no-overlap --recompute full --choose-recompute %s"; /* overlap off: the figures below */
    snprintf(args, sizeof args, a70, tl_path("examples/models/llama-3-70b.json"), "");
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "fits         NO           NO           NO");
    free(out);
    free(er);
    snprintf(args, sizeof args, a70, tl_path("examples/models/llama-3-70b.json"),
             "--choose-offload --cpu-mem 1TiB --solver ilp");
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "solver    ilp, optimal");
    CHECK_CONTAINS(out, "recompute none (optimal of");
    CHECK_CONTAINS(out, "offload   optimizer states 100%, parameters 0%");
    CHECK_CONTAINS(out, "fits         NO           NO           yes");
    CHECK_CONTAINS(out, "--offload-optimizer 1\n");
    free(out);
    free(er);
    snprintf(args, sizeof args, a70, tl_path("examples/models/llama-3-70b.json"),
             "--choose-offload --cpu-mem 128GiB");
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "offload   optimizer states 50%, parameters 0%");
    CHECK_CONTAINS(out, "--recompute-layers 6\n");
    CHECK_CONTAINS(out, "fits         NO           NO           yes");
    free(out);
    free(er);
    snprintf(args, sizeof args, "partition %s --gpus 8 --pp 8 --choose-offload "
             "--offload-fractions 0,1.5", tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &er), 2);
    CHECK_CONTAINS(er, "--offload-fractions");
    free(out);
    free(er);
    /* interleaved: per-rank totals, chunks listed in pipeline order */
    snprintf(args, sizeof args, "partition %s --gpu h100 --gpus 64 --tp 8 --pp 8 --vp 2 --gbs 128 "
             "--seq 8192 --sp --zero 1 --recompute selective --no-overlap",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "rank      layers");
    CHECK_CONTAINS(out, "fits         yes          -            yes");
    CHECK_CONTAINS(out, "--stage-layers 5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5\n");
    free(out);
    free(er);

}

/* The properties of the cost model the solvers' shortcuts rest on (partition_int.h,
 * planner/partition.c, planner/resplit.c), checked on the stage tables of several trainers:
 * a stage's time grows with its layers (ranges beyond a cap are not priced); offload moves a
 * stage's memory, not its time (offload choices bounded by another's least T); more
 * recomputation never makes a stage faster (lighter granularities bound heavier ones); a larger
 * recomputed count never uses more memory (Megatron's K = all is the least memory) nor takes
 * less time (partition_dp.c's count probes); and the closed-form first layer of a uniform chunk is the sum of the chunks before it. */
static void test_cost_properties(void) {
    ap_model m;
    ap_err err = {{0}};
    CHECK(ap_model_load(tl_path("examples/models/llama-3-8b.json"), &m, &err) == AP_OK);
    m.layers = 12;
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find("h100"), 32, &c);
    ap_trainer_id trs[3] = {AP_TRAINER_MEGATRON, AP_TRAINER_TORCHTITAN, AP_TRAINER_COLOSSALAI};
    int zeros[3] = {1, 3, 3};
    /* offload (optimizer, parameters) choices; those the trainer refuses are skipped */
    const double offs[4][2] = {{0, 0}, {0.5, 0}, {1, 0}, {1, 1}};
    int bad_mono = 0, bad_off = 0, bad_rc = 0, bad_mem = 0, n = 0;
    for (int ti = 0; ti < 3; ti++) {
        ap_plan p;
        small_plan(&p, 4, 2, 8);
        p.trainer = trs[ti];
        p.dp = 4;
        p.gbs = 32;
        p.zero = zeros[ti];
        ap_stage_table *t[3][4] = {{NULL}}; /* granularity x offload; NULL: refused */
        for (int g = 0; g < 3; g++)
            for (int f = 0; f < 4; f++) {
                ap_plan q = p;
                q.recompute = (ap_recompute)g;
                q.offload_optimizer = offs[f][0];
                q.offload_params = offs[f][1];
                if (ap_plan_check(&q, &m, &c, 1, NULL) != AP_OK) continue;
                CHECK(ap_stage_table_new(&m, &c, &q, NULL, &t[g][f], &err) == AP_OK);
            }
        for (int r = 0; r < p.pp; r++) {
            int a = r == 0 ? 0 : r;
            for (int len = 1; a + len <= (int)m.layers; len++) {
                if (r == p.pp - 1 && a + len != (int)m.layers) continue;
                if (r < p.pp - 1 && a + len > (int)m.layers - (p.pp - 1 - r)) break;
                double tprev = -1; /* time of the next lighter granularity, offload 0 */
                for (int g = 0; g < 3; g++) {
                    double tg = -1;
                    for (int f = 0; f < 4; f++) {
                        if (!t[g][f]) continue;
                        const ap_stage_cost *x, *y;
                        CHECK(ap_stage_table_get(t[g][f], r, a, len, -1, &x, &err) == AP_OK);
                        n++;
                        double tx = x->fwd_s + x->bwd_s;
                        if (tg < 0) tg = tx;
                        else if (tx != tg) bad_off++;
                        if (r < p.pp - 1 && a + len + 1 <= (int)m.layers - (p.pp - 1 - r)) {
                            CHECK(ap_stage_table_get(t[g][f], r, a, len + 1, -1, &y, &err) == AP_OK);
                            if (y->fwd_s + y->bwd_s < tx) bad_mono++;
                        }
                    }
                    if (tg >= 0 && tprev >= 0 && tg < tprev) bad_rc++;
                    if (tg >= 0) tprev = tg;
                }
                /* recomputed counts: memory falls and time grows as the count grows (what
                 * the count loop's breaks and partition_dp.c's count probes rest on) */
                double prev = INFINITY, prev_t = 0;
                for (int k = 1; k <= len && t[2][0]; k++) {
                    const ap_stage_cost *y;
                    CHECK(ap_stage_table_get(t[2][0], r, a, len, k, &y, &err) == AP_OK);
                    if (y->device_bytes > prev) bad_mem++;
                    if (y->fwd_s + y->bwd_s < prev_t) bad_rc++;
                    prev = y->device_bytes;
                    prev_t = y->fwd_s + y->bwd_s;
                }
            }
        }
        for (int g = 0; g < 3; g++)
            for (int f = 0; f < 4; f++) ap_stage_table_free(t[g][f]);
    }
    CHECK(n > 100);
    CHECK_INT(bad_mono, 0);
    CHECK_INT(bad_off, 0);
    CHECK_INT(bad_rc, 0);
    CHECK_INT(bad_mem, 0);
    int bad_first = 0;
    for (int pp = 1; pp <= 12; pp++)
        for (int vp = 1; vp <= 4; vp++)
            for (int L = pp * vp; L <= 70; L++) {
                ap_plan q;
                ap_plan_init(&q);
                q.pp = pp;
                q.vp = vp;
                int first = 0;
                for (int ch = 0; ch < pp * vp; ch++) {
                    if (ap_plan_chunk_first_layer(&q, L, ch) != first) bad_first++;
                    first += ap_plan_chunk_layers(&q, L, ch);
                }
            }
    CHECK_INT(bad_first, 0);
}

/* Every split of L layers over pp stages (each at least one) from stage r on, into out (pp
 * entries each, at most cap splits); returns the count. */
static int all_splits_rec(int L, int pp, int r, int *s, int *out, int cap, int n) {
    if (r == pp - 1) {
        s[r] = L;
        if (n < cap) memcpy(out + (size_t)n * pp, s, sizeof(int) * (size_t)pp);
        return n + 1;
    }
    for (int k = 1; k <= L - (pp - 1 - r); k++) {
        s[r] = k;
        n = all_splits_rec(L - k, pp, r + 1, s, out, cap, n);
    }
    return n;
}

/* A case of the floor tests below: the model's first `layers` layers on 2 x pp GPUs, ZeRO stage
 * and offload fraction. */
typedef struct {
    const char *model, *gpu;
    int pp, layers, zero;
    double off;
} floor_case;

/* Case fc's model, cluster and plan: pp stages, dp 2 (ZeRO shards the optimizer over two
 * ranks), 8 micro-batches of one sequence, ep 2 with experts, the offload left to the caller. */
static void floor_setup(const floor_case *fc, ap_model *m, ap_cluster *c, ap_plan *p) {
    load(fc->model, m);
    m->layers = fc->layers;
    if (m->moe.first_dense_layers > 2) m->moe.first_dense_layers = 2;
    ap_cluster_from_gpu(ap_gpu_find(fc->gpu), 2 * fc->pp, c);
    small_plan(p, fc->pp, 1, 8);
    p->dp = 2;
    p->gbs = 16;
    p->zero = fc->zero;
    if (m->moe.experts > 0) p->ep = 2;
}

/* Every split of plan p's layers (more than 10 of them, at most 4096) estimated, check called
 * on each the cost model takes with the split's plan and estimate; returns how many it took. */
static int each_split(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                      void (*check)(const ap_plan *q, const ap_estimate *e, const void *ctx),
                      const void *ctx) {
    static ap_estimate e;
    static int splits[4096 * AP_MAX_STAGES];
    ap_err err = {{0}};
    int sp[AP_MAX_STAGES];
    int n = all_splits_rec((int)m->layers, p->pp, 0, sp, splits, 4096, 0);
    CHECK(n > 10 && n <= 4096);
    int checked = 0;
    for (int i = 0; i < n && i < 4096; i++) {
        ap_plan q = *p;
        q.nchunks = q.pp;
        for (int r = 0; r < q.pp; r++) q.stage_layers[r] = splits[i * q.pp + r];
        if (ap_estimate_plan(m, c, &q, NULL, &e, &err) != AP_OK) continue;
        checked++;
        check(&q, &e, ctx);
    }
    return checked;
}

/* A split's step against the pipeline with its slowest stage at least *ctx (par_floor_s). */
static void check_par_floor(const ap_plan *q, const ap_estimate *e, const void *ctx) {
    const double P = *(const double *)ctx;
    const ap_time *t = &e->time;
    double S = 0, M = 0;
    for (int r = 0; r < q->pp; r++) {
        S += t->stage_fwd_s[r] + t->stage_bwd_s[r];
        M = fmax(M, t->stage_fwd_s[r] + t->stage_bwd_s[r]);
    }
    const double w = (double)q->grad_accum - 1.0; /* vp 1 */
    CHECK(t->step_s >= (S + w * fmax(M, P)) * (1 - 1e-9));
    CHECK_NEAR(t->par_floor_s, P, 1e-9);
}

/* estimate.h par_floor_s: with parameters offloaded (torchtitan's FSDP2 CPU offload), on
 * every split the step is at least the pipeline (S + (m v - 1) max(M, P)) / v of the split's own
 * stage times (the other parts are not negative), with P the uniform split's floor; the floor is
 * the same on every split and past the uniform split's slowest stage in some case (it then
 * bounds something). */
static void test_par_floor(void) {
    static const floor_case cases[] = {
        {"examples/models/llama-3-8b.json", "h100", 4, 12, 3, 1.0},
        {"examples/models/llama-3-8b.json", "a100-sxm4-80g", 3, 10, 3, 1.0},
        {"examples/models/llama-2-7b.json", "a100-sxm4-40g", 3, 9, 3, 1.0},
        {"examples/models/mixtral-8x7b.json", "h100", 4, 10, 3, 1.0},
    };
    static ap_model m;
    static ap_cluster c;
    static ap_estimate eu;
    ap_err err = {{0}};
    int past = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ap_plan p;
        floor_setup(&cases[k], &m, &c, &p);
        p.offload_params = p.offload_optimizer = cases[k].off;
        p.trainer = AP_TRAINER_TORCHTITAN; /* FSDP2's CPU offload under PP, uneven stages */
        if (ap_estimate_plan(&m, &c, &p, NULL, &eu, &err) != AP_OK) {
            fprintf(stderr, "  %s: %s\n", cases[k].model, err.msg);
            CHECK(0);
            continue;
        }
        const double P = eu.time.par_floor_s;
        CHECK(P > 0);
        double Mu = 0;
        for (int r = 0; r < p.pp; r++)
            Mu = fmax(Mu, eu.time.stage_fwd_s[r] + eu.time.stage_bwd_s[r]);
        past += P > Mu;
        CHECK(each_split(&m, &c, &p, check_par_floor, &P) > 10);
    }
    CHECK(past > 0);
}

/* A split's optimizer and offload time against the floor *ctx (x_floor_s). */
static void check_x_floor(const ap_plan *q, const ap_estimate *e, const void *ctx) {
    (void)q;
    const double floor = *(const double *)ctx;
    CHECK(e->time.optimizer_s + e->time.offload_s >= floor * (1 - 1e-12));
    CHECK_NEAR(e->time.x_floor_s, floor, 1e-9);
}

/* estimate.h x_floor_s: the optimizer and offload time no split goes below. On every split of
 * dense and MoE plans, ZeRO 0 and 1, with and without the optimizer offloaded: the split's
 * optimizer_s + offload_s is at least the uniform split's floor, and the floor is a real share
 * of it (the per-parameter terms, not zero). */
static void test_x_floor(void) {
    static const floor_case cases[] = {
        {"examples/models/llama-3-8b.json", "h100", 4, 12, 1, 0.0},
        {"examples/models/llama-3-8b.json", "h100", 4, 12, 1, 0.5},
        {"examples/models/llama-3-8b.json", "a100-sxm4-80g", 3, 10, 0, 0.0},
        {"examples/models/mixtral-8x7b.json", "h100", 4, 10, 1, 1.0},
        {"examples/models/deepseek-v3.json", "h100", 3, 9, 1, 0.75},
    };
    static ap_model m;
    static ap_cluster c;
    static ap_estimate eu;
    ap_err err = {{0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ap_plan p;
        floor_setup(&cases[k], &m, &c, &p);
        p.offload_optimizer = cases[k].off;
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &eu, &err) == AP_OK);
        double floor = eu.time.x_floor_s;
        CHECK(floor > 0.5 * (eu.time.optimizer_s + eu.time.offload_s));
        CHECK(each_split(&m, &c, &p, check_x_floor, &floor) > 10);
    }
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_stage_table();
    test_stage_table_fill();
    test_cost_properties();
    test_dp_brute_force_ilp();
    test_llama70b();
    test_recompute_choice();
    test_recompute_granularity();
    test_offload_choice();
    test_x_floor();
    test_par_floor();
    test_interleaved();
    test_restricted();
    test_bad_input();
    test_edges();
    test_solver_faults();
    test_cli();
    return tl_finish();
}
