/*
 * partition.c - optimal split of consecutive layers onto pipeline stages by dynamic programming
 * (partition.h), the uniform baseline, and the dispatch to the GLPK integer program (ilp.c).
 *
 * Objective T = S + (m - 1) M with S the sum and M the max of the stage times. A DP over
 * prefixes minimises S exactly but not the max term, so the max is fixed from outside (the
 * bound enumeration of Alpa's stage DP, Zheng et al. 2022 Sec. 5.2): for a bound B, f_B(r, j) =
 * least S of the first j layers on the first r stages with every stage time <= B and every
 * stage fitting memory,
 *     f_B(r + 1, a + n) = min_a f_B(r, a) + t(r, a, n),
 * and T* = min over candidate B of S_B + (m - 1) B, the candidates being the stage times
 * themselves (the optimum's max is one of them). The smallest feasible B is found by bisection
 * (feasibility is monotone in B); upwards the scan stops as soon as (m - 1) B + S_min exceeds
 * the best T found, S_min being the unbounded least sum: every split with max >= B costs at
 * least that. Each DP is O(p L^2) table reads; the table (stagecost.h) calls the cost model at
 * most p (L + 1) times for a dense model.
 *
 * When no split fits, a second DP minimises the peak stage memory (minimax) and that split is
 * returned with fits = 0. Restricted trainers (no uneven stages; first/last only) are solved by
 * enumerating what they can express.
 *
 * Joint plan-wide choices (partition.h): every (granularity, Megatron count, offload fractions)
 * variant the trainer accepts is solved by the DP above on its own stage table (counts of one
 * granularity and fractions share one); the least T + X wins. The ILP gets every variant whose
 * lower bound (its least T with memory ignored, + X) is below the DP's best, in one program.
 *
 * Interleaved plans (vp = v > 1): the same DP over per-rank totals ("ranges" of a prefix of
 * ranks), with T = (S + (m v - 1) M) / v and at least v x min_layers per rank; each rank's total
 * is spread evenly over its chunks (partition.h says when that is exact).
 *
 * Recompute choice (partition.h): per range the least recomputed-layer count that fits is kept
 * (it is best for the sum and the max alike), so the DP above is unchanged; a single count for
 * all stages (Megatron) is an outer loop over the count with an exact early stop.
 *
 * The search's re-split (planner/resplit.c, search.h "Re-split") applies the solve to every
 * pipelined candidate of `autoplan plan` and of each count of `autoplan compare`'s GPU sweep.
 */
#include "partition_int.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ap_partition_opts_init(ap_partition_opts *o) {
    memset(o, 0, sizeof *o);
    o->min_layers = 1;
    o->solver = AP_SOLVER_AUTO;
    o->ilp_node_limit = 20000;
    o->noffload_fracs = 5;
    for (int i = 0; i < 5; i++) o->offload_fracs[i] = 0.25 * i;
    ap_estimate_opts_init(&o->est);
}

ap_status ap_solver_parse(const char *s, ap_solver *out, ap_err *err) {
    if (s && !strcmp(s, "dp")) *out = AP_SOLVER_DP;
    else if (s && !strcmp(s, "ilp")) *out = AP_SOLVER_ILP;
    else if (s && !strcmp(s, "auto")) *out = AP_SOLVER_AUTO;
    else
        return ap_err_set(err, AP_ERR_INPUT, "solver '%s': expected dp, ilp or auto",
                          s ? s : "(null)");
    return AP_OK;
}

const char *ap_solver_name(ap_solver s) {
    return s == AP_SOLVER_DP ? "dp" : s == AP_SOLVER_ILP ? "ilp" : "auto";
}

/* micro-batches per step per dp rank, as estimate.c derives them */
static int64_t micro_batches(const ap_plan *p, const ap_cluster *c) {
    int dp = p->dp;
    if (dp < 1 && p->tp > 0 && p->pp > 0 && p->cp > 0) dp = c->gpus / (p->tp * p->pp * p->cp);
    if (p->mbs > 0 && dp > 0 && p->gbs % (p->mbs * dp) == 0) return p->gbs / (p->mbs * dp);
    return p->grad_accum > 0 ? p->grad_accum : 1;
}

/* out cleared for a result of pp ranks and nch chunks: its scalars and the arrays' first pp
 * (nch) entries (partition.h). */
static void result_clear(ap_partition_result *out, int pp, int nch) {
    pp = pp < 0 ? 0 : pp > AP_MAX_STAGES ? AP_MAX_STAGES : pp;
    nch = nch < 0 ? 0 : nch > AP_MAX_CHUNKS ? AP_MAX_CHUNKS : nch;
    memset(out, 0, offsetof(ap_partition_result, stage_layers));
    memset(out->stage_layers, 0, (size_t)nch * sizeof *out->stage_layers);
    memset(out->stage_recompute, 0, (size_t)nch * sizeof *out->stage_recompute);
    memset(out->rank_layers, 0, (size_t)pp * sizeof *out->rank_layers);
    memset(out->stage_s, 0, (size_t)pp * sizeof *out->stage_s);
    memset(out->stage_device_bytes, 0, (size_t)pp * sizeof *out->stage_device_bytes);
}

ap_status ap_partition_eval(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                            const ap_estimate_opts *est, const int *layers, const int *rc,
                            ap_partition_result *out, ap_err *err) {
    const int v = p->vp > 1 ? p->vp : 1;
    if (p->pp < 1 || p->pp > AP_MAX_STAGES || (int64_t)p->pp * v > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INPUT, "pp %d x vp %d outside 1..%d stages, %d chunks",
                          p->pp, v, AP_MAX_STAGES, AP_MAX_CHUNKS);
    if (v > 1 && rc)
        return ap_err_set(err, AP_ERR_INPUT, "per-stage recompute counts need vp 1");
    ap_plan *q = ap_malloc(sizeof *q);
    ap_estimate *e = ap_malloc(sizeof *e);
    if (!q || !e) {
        ap_free(q);
        ap_free(e);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory evaluating a split");
    }
    const int nch = p->pp * v;
    *q = *p;
    q->nchunks = nch;
    for (int i = 0; i < nch; i++) {
        q->stage_layers[i] = layers[i];
        if (rc) q->stage_recompute[i] = rc[i];
    }
    ap_status st = ap_stage_estimate(m, c, q, est, e, err);
    if (st == AP_OK) {
        result_clear(out, p->pp, nch);
        out->pp = p->pp;
        out->vp = v;
        out->nchunks = nch;
        out->micro_batches = e->plan.grad_accum;
        out->recompute_layers = p->recompute_layers;
        out->recompute = p->recompute;
        out->offload_optimizer = p->offload_optimizer;
        out->offload_params = p->offload_params;
        out->host_bytes_per_node = e->host_bytes_per_node;
        out->variants = 1;
        for (int i = 0; i < nch; i++) {
            out->stage_layers[i] = layers[i];
            out->stage_recompute[i] = rc ? rc[i] : -1;
            out->rank_layers[i % p->pp] += layers[i];
        }
        double sum = 0, mx = 0;
        for (int r = 0; r < p->pp; r++) {
            out->stage_s[r] = e->time.stage_fwd_s[r] + e->time.stage_bwd_s[r];
            out->stage_device_bytes[r] = e->stages[r].device_bytes;
            sum += out->stage_s[r];
            if (out->stage_s[r] > mx) mx = out->stage_s[r];
        }
        out->max_stage_s = mx;
        /* estimate.c: m Tmax + (Tsum - Tmax) / v */
        out->pipe_s = (sum + ((double)out->micro_batches * v - 1.0) * mx) / v;
        out->step_s = e->time.step_s;
        out->peak_device_bytes = e->device_peak_bytes;
        out->fits = e->fits;
        out->evals = 1;
    }
    ap_free(q);
    ap_free(e);
    return st;
}

void ap_partition_apply(const ap_partition_result *r, ap_plan *q) {
    q->nchunks = r->nchunks;
    q->recompute_layers = r->recompute_layers;
    q->recompute = r->recompute;
    q->offload_optimizer = r->offload_optimizer;
    q->offload_params = r->offload_params;
    for (int i = 0; i < r->nchunks; i++) {
        q->stage_layers[i] = r->stage_layers[i];
        q->stage_recompute[i] = r->stage_recompute[i];
    }
}

/* ---- one solve: fixed plan-wide recompute ---------------------------------------------------- */

typedef struct {
    int split[AP_MAX_STAGES];
    int rc[AP_MAX_STAGES];
    int fits, optimal, restricted, fell_back;
    int capped;       /* no fitting split beats the upper bound given (T, peak infinite) */
    ap_solver solver;
    double T, peak;   /* from the table */
    double T_nomem;   /* least T with memory ignored (want_bound only) */
    int longest;      /* the longest range the DP read (pdp_longest; L when restricted) */
    long evals;
    char note[256];
} solve_out;

/* The least T with memory ignored over the ranges d priced (tn_known where not NAN): with a
 * cap, splits using a range not priced take longer than the cap, so the least T is at least
 * the smaller of the cap and the best split of priced ranges. */
static double nomem_T(pdp *d, double tn_known, double upper_s) {
    if (!isnan(tn_known)) return tn_known;
    int tmp[AP_MAX_STAGES];
    d->ignore_mem = 1;
    double T = pdp_solve(d, tmp) > 0 ? pdp_split_T(d, tmp, NULL) : INFINITY;
    d->ignore_mem = 0;
    return upper_s > 0 && T > upper_s ? upper_s : T;
}

/* tab: the stage table of plan p (shared by the calls of one ap_partition_solve); fixed_rc as
 * in dp_ctx; use_ilp: run the ILP when the options ask for it; want_bound: also T_nomem, or
 * tn_known as it when not NAN */
static ap_status solve_once(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                            const ap_partition_opts *o, ap_stage_table *tab, int per_stage_rc,
                            int fixed_rc, int use_ilp, int want_bound, double tn_known,
                            double upper_s, pdp *d, solve_out *so, ap_err *err) {
    const int L = (int)m->layers;
    memset(so, 0, sizeof *so);
    const int v = p->vp > 1 ? p->vp : 1;
    /* the DP's arrays are the solve's (every variant has the same degrees): allocated by the
     * first variant, cleared for the next */
    ap_status st = AP_OK;
    if (d->t) pdp_reset(d, per_stage_rc, fixed_rc);
    else if ((st = pdp_init(d, m, p->pp, v, (o->min_layers > 0 ? o->min_layers : 1) * v,
                            micro_batches(p, c), per_stage_rc, fixed_rc, err)) != AP_OK)
        pdp_free(d);
    int *split = so->split;
    const ap_trainer_caps *tr = ap_trainer_get(p->trainer);
    int first_last = tr->uneven_stages && d->v == 1 &&
                     (tr->uneven_first_last_only || o->first_last_only);
    int restricted = !tr->uneven_stages || (first_last && p->pp >= 3);
    if (st != AP_OK) goto done;
    /* the uniform split (per-rank totals of the plan's chunks) */
    int uniform[AP_MAX_STAGES];
    {
        ap_plan u = *p;
        u.nchunks = 0;
        for (int r = 0; r < p->pp; r++) {
            uniform[r] = 0;
            for (int k = 0; k < d->v; k++) uniform[r] += ap_plan_chunk_layers(&u, L, r + k * p->pp);
        }
    }
    memcpy(split, uniform, sizeof(int) * (size_t)p->pp);
    if (restricted && !tr->uneven_stages) {
        /* only the uniform split can be evaluated (the cost model refuses others) */
        st = pdp_fill_split(d, tab, split, err);
    } else {
        /* only splits better than the uniform one (when it fits) or than upper_s matter:
         * ranges that alone would make T exceed that are not priced (pdp_fill) */
        double U = upper_s > 0 ? upper_s : INFINITY;
        if (!restricted && U == INFINITY && (st = pdp_fill_split(d, tab, uniform, err)) == AP_OK &&
            pdp_split_fits(d, uniform))
            U = pdp_split_T(d, uniform, NULL);
        if (st == AP_OK) st = pdp_fill(d, tab, restricted || U == INFINITY ? INFINITY
                                                    : U / (double)d->m * (1 + 1e-9), err);
    }
    if (st != AP_OK) goto done;

    int fits;
    if (restricted) {
        if ((st = pdp_restricted(d, tr, first_last, uniform, split, &fits, so->note,
                                 sizeof so->note)) != AP_OK) {
            st = ap_err_set(err, st, "out of memory enumerating splits");
            goto done;
        }
        so->restricted = 1;
    } else {
        /* a split is wanted only below the cap: pdp_solve may stop once none can be */
        d->cap = upper_s > 0 ? upper_s : INFINITY;
        fits = pdp_solve(d, split);
        if (fits < 0) {
            st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the partition DP");
            goto done;
        }
        if (!fits && upper_s > 0) {
            /* no split beats upper_s: nothing the caller wants (the uniform split, T and peak
             * unknown) */
            memcpy(split, uniform, sizeof(int) * (size_t)p->pp);
            so->capped = 1;
        } else if (!fits) {
            /* none fits: the least peak over every legal split */
            if ((st = pdp_fill(d, tab, INFINITY, err)) != AP_OK) goto done;
            pdp_min_peak(d, 0, INFINITY, split);
        }
    }
    so->solver = AP_SOLVER_DP;
    so->longest = restricted ? L : pdp_longest(d);
    so->optimal = fits;
    so->fits = fits;
    for (int r = 0, a = 0; r < p->pp; a += split[r], r++)
        so->rc[r] = d->rc[pdp_seg(d, r, a, split[r])];

    if (use_ilp && o->solver == AP_SOLVER_ILP && !restricted) {
        ap_partition_result ir;
        ap_err ierr = {{0}};
        /* the ILP works in units of v T: S + (m v - 1) M, rank minimum v x min_layers */
        double dp_T = fits ? pdp_split_T(d, split, NULL) * d->v : 0;
        ap_partition_opts oi = *o;
        oi.min_layers = d->lo;
        ap_status is = ap_partition_ilp(tab, L, p->pp, d->m * d->v, per_stage_rc, fixed_rc, &oi,
                                        dp_T, &ir, &ierr);
        if (is == AP_OK) {
            memcpy(split, ir.stage_layers, sizeof(int) * (size_t)p->pp);
            memcpy(so->rc, ir.stage_recompute, sizeof(int) * (size_t)p->pp);
            so->solver = AP_SOLVER_ILP;
            so->optimal = ir.optimal;
            so->T = ir.pipe_s / d->v;
            snprintf(so->note, sizeof so->note, "%s", ir.note);
        } else {
            so->fell_back = 1;
            snprintf(so->note, sizeof so->note, "ILP failed (%.200s); using the DP answer",
                     ierr.msg);
            ap_log(AP_LOG_WARN, "partition: %s", so->note);
        }
    }
    if (so->solver == AP_SOLVER_DP) so->T = so->capped ? INFINITY : pdp_split_T(d, split, NULL);
    so->T_nomem = want_bound && !restricted ? nomem_T(d, tn_known, upper_s) : 0;
    /* with a cap, an infinite T_nomem means: at least the cap (no split below it) */
    so->peak = so->capped ? INFINITY : pdp_split_peak(d, split);
    so->evals = ap_stage_table_evals(tab);
    st = AP_OK;
done:
    return st;
}

/* ---- entry point ----------------------------------------------------------------------------- */

/* One plan-wide variant of the joint choice: a recompute granularity, Megatron's one count, the
 * offload fractions; its stage table is shared with the other counts of the same granularity and
 * fractions. */
typedef struct {
    ap_plan q;          /* the plan of this variant (recompute, recompute_layers, offload) */
    int table;          /* index of its stage table */
    int per_stage_rc, fixed_rc;
    double extra_s;     /* optimizer + offload time (see variant_extra) */
    solve_out so;
    double J;           /* so.T + extra_s */
    double lb;          /* so.T_nomem + extra_s: no split of this variant does better */
} variant;

/* The optimizer step and the exposed offload time of a plan-wide variant (estimate.c: CPU Adam
 * over host DRAM shared by the node's GPUs, PCIe shared per switch), taken from the cost model on
 * the variant's uniform split: they depend on the split only through the stage with the most
 * parameters, which the partition does not optimise. AP_ERR_INFEASIBLE when the trainer refuses
 * the variant (its table: ZeRO stage, fractions, offload together). */
static ap_status variant_extra(const ap_model *m, const ap_cluster *c, const ap_plan *q,
                               const ap_estimate_opts *est, double *extra_s, double *xfloor_s,
                               int *ufits, double *ustep_s, ap_err *err) {
    ap_estimate *e = ap_malloc(sizeof *e);
    ap_plan *u = ap_malloc(sizeof *u);
    if (!e || !u) {
        ap_free(e);
        ap_free(u);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory evaluating a variant");
    }
    *u = *q;
    u->nchunks = 0;
    ap_status st = ap_stage_estimate(m, c, u, est, e, err);
    if (st == AP_OK) {
        *extra_s = e->time.optimizer_s + e->time.offload_s;
        *xfloor_s = e->time.x_floor_s;
        *ufits = e->fits;
        *ustep_s = e->time.step_s;
    }
    ap_free(e);
    ap_free(u);
    return st;
}

static int variant_better(const variant *a, const variant *b) {
    if (a->so.fits != b->so.fits) return a->so.fits;
    return a->so.fits ? a->J < b->J : a->so.peak < b->so.peak;
}

ap_status pt_check_input(const ap_model *m, const ap_plan *p, const ap_partition_opts *o,
                             ap_err *err) {
    const int L = (int)m->layers;
    const int lo = o->min_layers > 0 ? o->min_layers : 1;
    const int v = p->vp > 1 ? p->vp : 1;
    if (p->pp < 1 || p->pp > AP_MAX_STAGES || (int64_t)p->pp * v > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INPUT, "pp %d x vp %d outside 1..%d stages, %d chunks",
                          p->pp, v, AP_MAX_STAGES, AP_MAX_CHUNKS);
    if ((int64_t)p->pp * v * lo > L)
        return ap_err_set(err, AP_ERR_INPUT, "%d chunks of at least %d layers need %d layers, "
                          "the model has %d", p->pp * v, lo, p->pp * v * lo, L);
    if (v > 1 && m->moe.experts > 0)
        for (int64_t i = 1; i < m->layers; i++)
            if (ap_model_layer_is_moe(m, i) != ap_model_layer_is_moe(m, 0))
                return ap_err_set(err, AP_ERR_INPUT, "interleaved partitions need layers of one "
                                  "kind (layers 0 and %lld differ: dense and MoE)", (long long)i);
    if (v > 1 && (o->choose_recompute || o->choose_mode || o->choose_offload))
        return ap_err_set(err, AP_ERR_INPUT, "choosing recompute or offload is implemented for "
                          "vp 1 only");
    if ((size_t)p->pp * (size_t)(L + 1) * (size_t)(L + 1) > ((size_t)1 << 26))
        return ap_err_set(err, AP_ERR_INPUT, "%d layers on %d stages: too large for the "
                          "partition table", L, p->pp);
    if (o->choose_recompute && !o->choose_mode && p->recompute != AP_RECOMPUTE_FULL)
        return ap_err_set(err, AP_ERR_INPUT, "choosing recomputed layers needs a plan with full "
                          "recomputation (or the granularity choice)");
    return AP_OK;
}

/* One ap_partition_solve: the plan-wide choices, their stage tables and variants. */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_partition_opts *o;
    const ap_trainer_caps *tr;
    int L, lo;
    int counts;             /* choose recomputed-layer counts */
    int partial_ok;         /* the trainer takes a count at this pp */
    ap_recompute modes[3];  /* granularities to try */
    int nmodes;
    double fr[8];           /* offload fractions to try */
    int nfr, nfo, nfp, ntab_max;
    ap_stage_table **tabs;
    int ntab;
    variant *vars;
    int nvar, cap, best;
    double tfloor[3];       /* per granularity: a lower bound on the T of its every variant
                               (solve_choice), 0 while none is known */
    int skipped;            /* choices not solved (they cannot beat the best objective) */
    int cut;                /* choices not solved: nothing of theirs can beat opts.upper_s */
    pdp dp;                 /* the DP's arrays, shared by the variants (solve_once) */
    struct mref *ref;       /* what each solved fraction tells the smaller ones (mref); NULL:
                               no offload fraction to choose */
    int nks;                /* count slots per granularity in ref and tnm */
    struct tn_memo *tnm;    /* T_nomem per granularity and count slot (tn_memo); NULL: none */
    const struct choice *chs; /* the choices in solve order, and the one being solved */
    int nch, cur;
    ap_status refused;      /* a variant the trainer refused, and why */
    ap_err rerr;
} psolve;

/* The plan-wide choices: granularities (the trainer's recompute_mask) x offload fractions. */
static ap_status list_choices(psolve *ps, ap_err *err) {
    const ap_partition_opts *o = ps->o;
    if (o->choose_mode) {
        for (int g = AP_RECOMPUTE_NONE; g <= AP_RECOMPUTE_FULL; g++)
            if (ps->tr->recompute_mask & (1u << g)) ps->modes[ps->nmodes++] = (ap_recompute)g;
    } else {
        ps->modes[ps->nmodes++] = ps->p->recompute;
    }
    if (o->choose_offload) {
        for (int i = 0; i < o->noffload_fracs && i < 8; i++)
            if (o->offload_fracs[i] >= 0 && o->offload_fracs[i] <= 1)
                ps->fr[ps->nfr++] = o->offload_fracs[i];
        if (ps->nfr == 0)
            return ap_err_set(err, AP_ERR_INPUT, "no offload fraction in [0, 1] to choose from");
    }
    ps->nfo = o->choose_offload ? ps->nfr : 1;
    ps->nfp = o->choose_offload && ps->tr->offload_params ? ps->nfr : 1;
    ps->ntab_max = ps->nmodes * ps->nfo * ps->nfp;
    ps->tabs = ap_calloc((size_t)ps->ntab_max, sizeof *ps->tabs);
    if (!ps->tabs) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the partition variants");
    return AP_OK;
}

/* A new variant slot at ps->vars[ps->nvar] (not yet counted). */
static variant *new_variant(psolve *ps, ap_err *err) {
    if (ps->nvar == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        variant *nv = ap_realloc(ps->vars, (size_t)cap * sizeof *ps->vars);
        if (!nv) {
            ap_err_set(err, AP_ERR_NOMEM, "out of memory for the variants");
            return NULL;
        }
        ps->vars = nv;
        ps->cap = cap;
    }
    return &ps->vars[ps->nvar];
}

/* One (granularity, offload fractions) choice: its plan, how its counts are chosen, its X and
 * how its uniform split does (the order in which choices are solved). */
typedef struct choice {
    int gi, oi, pi;
    ap_plan q;
    int per_stage_rc, one_count;
    double extra;
    double xfloor;      /* the least optimizer and offload time of any split (x_floor_s) */
    int ufits;          /* its uniform split fits */
    double ustep_s;     /* the uniform split's step time */
    int order;          /* index in the natural order */
    int frac_first;     /* order by optimizer-offload fraction first (choice_first) */
} choice;

/* Build choice (gi, oi, pi) into *ch; *refused = 1 when the trainer cannot run it (ps->refused
 * keeps the first reason). */
static ap_status probe_choice(psolve *ps, int gi, int oi, int pi, choice *ch, int *refused,
                              ap_err *err) {
    const ap_partition_opts *o = ps->o;
    *refused = 0;
    ch->gi = gi;
    ch->oi = oi;
    ch->pi = pi;
    ap_plan *q = &ch->q;
    *q = *ps->p;
    q->recompute = ps->modes[gi];
    if (o->choose_offload) {
        q->offload_optimizer = ps->fr[oi];
        q->offload_params = ps->tr->offload_params ? ps->fr[pi] : 0.0;
    }
    int full = q->recompute == AP_RECOMPUTE_FULL;
    ch->per_stage_rc = ps->counts && full && ps->tr->per_stage_recompute && ps->partial_ok;
    /* torchtitan's count is every (n/K)-th layer of uniform chunks: no count over a split */
    ch->one_count = ps->counts && full && !ch->per_stage_rc && ps->tr->recompute_partial &&
                    ps->partial_ok && !ps->tr->recompute_partial_divides_chunk;
    if (ps->counts) {
        q->recompute_layers = 0;
        for (int i = 0; i < AP_MAX_CHUNKS; i++) q->stage_recompute[i] = -1;
    }
    if (!full) q->recompute_layers = 0;
    /* X only matters between variants of different granularity or offload; with one table it
     * is a constant left out (and an interleaved plan's uniform layout may not even be one the
     * trainer accepts) */
    ch->extra = 0;
    ch->xfloor = 0;
    ch->ufits = 0;
    ch->ustep_s = INFINITY;
    if (ps->ntab_max == 1) return AP_OK;
    /* once a refusal's reason is kept, another variant the trainer's table refuses is told
     * without one (formatting the reasons of the offload fractions torchtitan refuses cost its
     * MoE sweep 5% of its instructions); the estimate below checks the same plan the same way
     * (estimate.c normalise_plan) */
    if (ps->refused != AP_OK && ap_plan_check(q, ps->m, ps->c, 1, NULL) == AP_ERR_INFEASIBLE) {
        ps->refused = AP_ERR_INFEASIBLE;
        *refused = 1;
        return AP_OK;
    }
    ap_err verr = {{0}};
    ap_status vs = variant_extra(ps->m, ps->c, q, &o->est, &ch->extra, &ch->xfloor, &ch->ufits,
                                 &ch->ustep_s, &verr);
    if (vs == AP_ERR_INFEASIBLE) {
        /* the trainer cannot run this variant: not a candidate */
        if (ps->refused == AP_OK) ps->rerr = verr;
        ps->refused = vs;
        *refused = 1;
        return AP_OK;
    }
    if (vs != AP_OK) *err = verr;
    return vs;
}

/* Solve order: where a larger optimizer-offload fraction bounds the smaller ones (mref), the
 * larger fraction first (its answers, solved under the smaller ones' caps, leave them mostly
 * nothing to solve); then choices whose uniform split fits first, fastest first (a fitting
 * answer early bounds the others, whose ranges beyond it are then never priced), then the
 * rest as listed. */
static int choice_first(const void *x, const void *y) {
    const choice *a = x, *b = y;
    if (a->frac_first && a->q.offload_optimizer != b->q.offload_optimizer)
        return a->q.offload_optimizer > b->q.offload_optimizer ? -1 : 1;
    if (a->ufits != b->ufits) return a->ufits ? -1 : 1;
    if (a->ufits && a->ustep_s != b->ustep_s) return a->ustep_s < b->ustep_s ? -1 : 1;
    return a->order - b->order;
}

/* The cap on the pipeline time T of a variant of choice ch: only splits whose objective beats
 * the best found, and what the caller's caps leave (upper_s on the objective, upper_pipe_s on
 * T plus the optimizer and offload time, of which any split pays at least ch->xfloor);
 * *capped 0 when there is none. */
static double choice_upper(const psolve *ps, const choice *ch, int single, int *capped) {
    const double extra = ch->extra;
    const ap_partition_opts *o = ps->o;
    const variant *bb = ps->best >= 0 ? &ps->vars[ps->best] : NULL;
    *capped = bb && bb->so.fits && !single;
    double upper = *capped ? bb->J * (1 + 1e-9) - extra : 0;
    if (o->upper_s > 0 && (!*capped || o->upper_s - extra < upper)) {
        upper = o->upper_s - extra;
        *capped = 1;
    }
    if (o->upper_pipe_s > 0 && (!*capped || o->upper_pipe_s - ch->xfloor < upper)) {
        upper = o->upper_pipe_s - ch->xfloor;
        *capped = 1;
    }
    return upper;
}

/* ---- what a larger offload fraction tells the smaller ones -----------------------------------
 * Offload moves states, not stage time (estimate.c puts it in the step), and a larger
 * optimizer-offload fraction leaves every range no more device memory (ap_mem_model_states
 * scales the optimizer states, and from ZeRO-2 the gradients, by 1 - f; nothing else on the
 * device depends on f) and more host memory. So where a variant at fraction f' priced every
 * range within host memory, each split that fits at a smaller f (same granularity, count and
 * parameter offload) fits at f' with the same T: the least T of a fitting split at f is at
 * least that at f'. A variant solved under a cap U that found no fitting split below U rules
 * out each smaller fraction whose cap is at most U, and one that found its least T rules out
 * those whose cap is at most T. So when smaller fractions of its granularity are still to
 * come, a variant is solved under the largest cap they can have (their caps only fall as the
 * best objective does), and its count loop runs on while their objectives could gain. */
typedef struct mref {
    int valid;
    double lb;      /* no split fitting at this fraction has T below it */
    double tn;      /* its T_nomem (at most the least T with memory ignored, which every
                       fraction shares) */
    double ucap;    /* the cap its ranges were priced to: longest holds for caps up to it */
    int longest;    /* the longest range the DP read under ucap */
} mref;

static mref *ref_at(const psolve *ps, int gi, int k, int oi) {
    return &ps->ref[((size_t)gi * (size_t)ps->nks + (size_t)k) * (size_t)ps->nfo + (size_t)oi];
}

/* The reference with the largest lb among the fractions at least choice ch's for count slot
 * k; NULL when none is known. */
static const mref *ref_for(const psolve *ps, const choice *ch, int k) {
    if (!ps->ref || ch->per_stage_rc) return NULL;
    const mref *best = NULL;
    for (int j = 0; j < ps->nfo; j++) {
        const mref *r = ref_at(ps, ch->gi, k, j);
        if (r->valid && ps->fr[j] >= ps->fr[ch->oi] && (!best || r->lb > best->lb)) best = r;
    }
    return best;
}

static double choice_upper(const psolve *ps, const choice *ch, int single, int *capped);

/* The largest cap the choices still to solve with choice ch's granularity and a smaller
 * fraction can have, and in *xmin their least optimizer and offload time; 0 when there are
 * none or one of them has no cap. */
static double pending_cap(const psolve *ps, const choice *ch, double *xmin) {
    double u = 0;
    *xmin = INFINITY;
    for (int j = ps->cur + 1; j < ps->nch; j++) {
        const choice *c = &ps->chs[j];
        if (c->gi != ch->gi || c->pi != ch->pi || ps->fr[c->oi] >= ps->fr[ch->oi]) continue;
        int capped;
        double cu = choice_upper(ps, c, 0, &capped);
        if (!capped) return 0;
        if (cu > u) u = cu;
        if (c->extra < *xmin) *xmin = c->extra;
    }
    return u;
}

/* T_nomem of a granularity and count, which every offload fraction shares (their stage times
 * are the same): solved under cap U (INFINITY: none) it is min(T*, U) for the least T* with
 * memory ignored (a split below the cap uses priced ranges only, and solve_once clips at the
 * cap), so it gives min(T*, U') under any cap U' where T* is known (v < U) or U' <= U. */
typedef struct tn_memo {
    int valid;
    double v, U;
} tn_memo;

/* The T_nomem solve_once would find for count slot k of granularity gi under cap upper
 * (capped 0: none), NAN when the memo cannot tell. */
static double tn_lookup(const psolve *ps, int gi, int k, int capped, double upper) {
    if (!ps->tnm) return NAN;
    const tn_memo *t = &ps->tnm[(size_t)gi * (size_t)ps->nks + (size_t)k];
    if (!t->valid) return NAN;
    double U = capped ? upper : INFINITY;
    if (t->v < t->U) return capped && upper < t->v ? upper : t->v;
    return U <= t->U ? U : NAN;
}

static void tn_note(psolve *ps, int gi, int k, int capped, double upper, double v) {
    if (!ps->tnm) return;
    tn_memo *t = &ps->tnm[(size_t)gi * (size_t)ps->nks + (size_t)k];
    *t = (tn_memo){1, v, capped ? upper : INFINITY};
}

/* Note what count slot k of choice ch, its ranges priced to cap upper, tells the smaller
 * fractions: no fitting split below lb, T_nomem at least tn, the longest range read; nothing
 * where a range priced misses host memory. */
static void set_ref(psolve *ps, const choice *ch, int k, double lb, double tn, double upper,
                    int longest) {
    if (!ps->ref || ch->per_stage_rc || ps->dp.host_short) return;
    *ref_at(ps, ch->gi, k, ch->oi) = (mref){1, lb, tn, upper, longest};
}

/* Note what variant x (count slot k of choice ch, solved under cap upper) tells the smaller
 * fractions. */
static void note_ref(psolve *ps, const choice *ch, int k, const variant *x, double upper) {
    if (x->so.restricted) return;
    /* a split below the cap uses priced ranges only: none fits below min(T, cap) */
    double lb = x->so.fits ? fmin(x->so.T, upper) : upper;
    set_ref(ps, ch, k, lb, x->so.T_nomem, upper, x->so.longest);
}

/* After count k of choice ch found no fitting split below U: the next count worth solving.
 * Probes (pdp_probe_count, with k's times) rule out counts k + 2, k + 4, k + 8, ... while they
 * can, and every count up to the last one ruled out is skipped (k + 1 itself is left to its
 * solve, the exact test). The far end is probed first unless all layers recomputed (count 0)
 * fit below U, which a probe there would find: when it goes, every count left does. The
 * counts skipped tell the smaller fractions what a solve would have (mref: no fitting split
 * below U; T_nomem at least k's). */
static ap_status next_count(psolve *ps, const choice *ch, ap_stage_table *tab, const variant *x,
                            int k, int kend, double U, int all_fit, int *next, ap_err *err) {
    pdp *d = &ps->dp;
    int lo = k, any = 1;
    ap_status st = AP_OK;
    if (!all_fit && (st = pdp_probe_count(d, tab, kend, U, &any, err)) != AP_OK) return st;
    if (!any) {
        lo = kend;
    } else {
        for (int step = 2; k + step < kend; step *= 2) {
            if ((st = pdp_probe_count(d, tab, k + step, U, &any, err)) != AP_OK) return st;
            if (any) break;
            lo = k + step;
        }
    }
    *next = lo + 1;
    for (int j = k + 1; j <= lo; j++) set_ref(ps, ch, j, U, x->so.T_nomem, U, ps->L + 1);
    return AP_OK;
}

/* The variants of one choice: its stage table, and with Megatron's one count one variant per
 * count K, each solved by the DP. */
static ap_status solve_choice(psolve *ps, const choice *ch, ap_err *err) {
    const ap_partition_opts *o = ps->o;
    const int gi = ch->gi, per_stage_rc = ch->per_stage_rc, one_count = ch->one_count;
    const double extra = ch->extra;
    const ap_plan *qp = &ch->q;
    int kmax = one_count ? ps->nks - 1 : 0;
    int single = ps->ntab_max == 1 && !one_count;
    /* A choice that cannot beat the best objective found, or come under the caps, is not
     * solved: its T is at least its granularity's floor, since its stage times are those of
     * the granularity's other offload choices (offload changes the memory of a stage, not its
     * time: estimate.c puts offload in the step, not the stage); not with counts chosen per
     * stage, which depend on the memory. */
    const variant *b0 = ps->best >= 0 ? &ps->vars[ps->best] : NULL;
    const double lb_T = per_stage_rc ? 0 : ps->tfloor[gi];
    if (b0 && b0->so.fits && lb_T > 0 && lb_T + extra >= b0->J * (1 - 1e-12)) {
        ps->skipped++;
        return AP_OK;
    }
    int capped;
    double upper = choice_upper(ps, ch, single, &capped);
    if (capped && (upper <= 0 || lb_T >= upper * (1 - 1e-12))) {
        ps->cut++;
        return AP_OK;
    }
    ap_status st = AP_OK;
    int tab = -1; /* the choice's stage table, made for its first solve (counts the caps rule
                     out before any solve price nothing) */
    int all_fit = 0; /* count 0 (every layer recomputed) had a fitting split below its cap */
    for (int k = 0; k <= kmax; k++) {
        /* only splits whose objective beats the best one found matter */
        upper = choice_upper(ps, ch, single, &capped);
        if (capped && upper <= 0) {
            ps->cut++;
            break;
        }
        /* a larger fraction's answer rules this count out (mref); so do its breaks below */
        const mref *rf = capped ? ref_for(ps, ch, k) : NULL;
        if (rf && rf->lb >= upper * (1 - 1e-12)) {
            ps->cut++;
            const variant *b = ps->best >= 0 ? &ps->vars[ps->best] : NULL;
            if (one_count && k > 0 &&
                (rf->tn >= upper * (1 - 1e-12) || (rf->ucap >= upper && rf->longest <= k) ||
                 (b && b->so.fits && rf->tn + extra >= b->J * (1 - 1e-12))))
                break;
            continue;
        }
        /* the smaller fractions still to come read this count's answer (mref): solved under
         * the largest cap they can have, with their least objective for its breaks */
        double xref = extra, ubig = ps->ref && capped && !per_stage_rc
                                        ? pending_cap(ps, ch, &xref) : 0;
        if (xref > extra) xref = extra;
        const double U = ubig > upper ? ubig : upper;
        if (tab < 0) {
            st = ap_stage_table_new(ps->m, ps->c, qp, &o->est, &ps->tabs[ps->ntab], err);
            if (st != AP_OK) return st;
            tab = ps->ntab++;
        }
        variant *x = new_variant(ps, err);
        if (!x) return AP_ERR_NOMEM;
        x->q = *qp;
        x->q.recompute_layers = one_count ? k : qp->recompute_layers;
        x->table = tab;
        x->per_stage_rc = per_stage_rc;
        x->fixed_rc = one_count ? k : -1;
        x->extra_s = extra;
        /* one variant without choices: the ILP (when asked) runs inside, as before; otherwise
         * the joint ILP sees every variant */
        /* per-stage counts depend on the memory, hence their times: no memo */
        double tn = per_stage_rc || single ? NAN : tn_lookup(ps, gi, k, capped, U);
        st = solve_once(ps->m, ps->c, &x->q, o, ps->tabs[tab], per_stage_rc, x->fixed_rc, single,
                        !single, tn, U, &ps->dp, &x->so, err);
        if (st != AP_OK) return st;
        if (!per_stage_rc && !single && isnan(tn) && !x->so.restricted)
            tn_note(ps, gi, k, capped, U, x->so.T_nomem);
        x->J = x->so.T + extra;
        if (capped) note_ref(ps, ch, k, x, U);
        x->lb = single ? x->J : x->so.T_nomem + extra;
        if (x->so.restricted) x->lb = x->J; /* exact already */
        /* the granularity's floor: T with memory ignored (at least the cap when capped) is the
         * least of this variant's stage times, which every offload choice shares; of Megatron's
         * counts the least recomputes one layer (K = 1: a range's time grows with K, and K = 0
         * recomputes them all) */
        if (!single && !x->so.restricted && !per_stage_rc && (!one_count || k == 1) &&
            x->so.T_nomem > ps->tfloor[gi])
            ps->tfloor[gi] = x->so.T_nomem;
        ps->nvar++;
        if (ps->best < 0 || variant_better(x, &ps->vars[ps->best])) ps->best = ps->nvar - 1;
        /* Megatron's one count: every range's time grows with K, so the least T ignoring
         * memory grows with K: once it reaches the best objective, no larger K can do better */
        const variant *b = &ps->vars[ps->best];
        if (k > 0 && b->so.fits && x->so.T_nomem + xref >= b->J * (1 - 1e-12)) break;
        /* nor once it reaches the cap: no split of a larger K is below it */
        if (k > 0 && capped && x->so.T_nomem >= U * (1 - 1e-12)) break;
        /* all layers recomputed (K = 0) is the least memory of every count (memory falls as
         * the count grows): when no split of it fits, no count's does, and each has a larger
         * peak */
        if (one_count && k == 0 && !x->so.fits && !x->so.capped) break;
        if (k == 0) all_fit = x->so.fits;
        /* a count no shorter than every range the DP read recomputes each of them whole: the
         * next count reads the same entries (a range of n <= K layers recomputes min(K, n) =
         * n; the longer ones, past the cap under K, only slow down), so it and every later
         * count repeat this variant */
        if (one_count && k > 0 && x->so.longest <= k) break;
        /* no fitting split below the cap: the counts that probes rule out are not solved */
        if (one_count && k > 0 && capped && !x->so.fits && !x->so.restricted && k < kmax) {
            int next;
            if ((st = next_count(ps, ch, ps->tabs[tab], x, k, kmax, U, all_fit, &next, err)) !=
                AP_OK)
                return st;
            k = next - 1;
        }
    }
    return AP_OK;
}

/* The joint integer program over every variant that could beat the DP's best; when GLPK fails
 * the DP's answer stands (its note says why). */
static ap_status solve_joint(psolve *ps, ap_err *err) {
    ap_ilp_variant *iv = ap_malloc((size_t)ps->nvar * sizeof *iv);
    int *map = ap_malloc((size_t)ps->nvar * sizeof *map);
    if (!iv || !map) {
        ap_free(iv);
        ap_free(map);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ILP variants");
    }
    int ni = 0;
    double upper = ps->vars[ps->best].so.fits ? ps->vars[ps->best].J : 0;
    for (int i = 0; i < ps->nvar; i++) {
        if (upper > 0 && ps->vars[i].lb > upper * (1 + 1e-9)) continue;
        iv[ni] = (ap_ilp_variant){ps->tabs[ps->vars[i].table], ps->vars[i].per_stage_rc,
                                  ps->vars[i].fixed_rc, ps->vars[i].extra_s};
        map[ni++] = i;
    }
    ap_partition_result *ir = ap_malloc(sizeof *ir);
    ap_err ierr = {{0}};
    int chosen = -1;
    ap_partition_opts oi = *ps->o;
    oi.min_layers = ps->lo;
    ap_status is = ir ? ap_partition_ilp_joint(iv, ni, ps->L, ps->p->pp,
                                               micro_batches(ps->p, ps->c), &oi, upper, ir,
                                               &chosen, &ierr)
                      : ap_err_set(&ierr, AP_ERR_NOMEM, "out of memory for the ILP result");
    if (is == AP_OK && chosen >= 0 && chosen < ni) {
        variant *x = &ps->vars[map[chosen]];
        memcpy(x->so.split, ir->stage_layers, sizeof(int) * (size_t)ps->p->pp);
        memcpy(x->so.rc, ir->stage_recompute, sizeof(int) * (size_t)ps->p->pp);
        x->so.solver = AP_SOLVER_ILP;
        x->so.optimal = ir->optimal;
        x->so.fits = 1;
        x->so.T = ir->pipe_s;
        x->J = ir->pipe_s + x->extra_s;
        snprintf(x->so.note, sizeof x->so.note, "%.200s, %d of %d variants", ir->note, ni,
                 ps->nvar);
        ps->best = map[chosen];
    } else {
        variant *x = &ps->vars[ps->best];
        x->so.fell_back = 1;
        snprintf(x->so.note, sizeof x->so.note, "ILP failed (%.200s); using the DP answer",
                 ierr.msg);
        ap_log(AP_LOG_WARN, "partition: %s", x->so.note);
    }
    ap_free(ir);
    ap_free(iv);
    ap_free(map);
    return AP_OK;
}

/* The reported figures come from the cost model on the whole plan, not the table; ranks of an
 * interleaved plan spread their layers over their chunks as the table priced them. */
static ap_status fill_result(const psolve *ps, double t0, ap_partition_result *out, ap_err *err) {
    const variant *b = &ps->vars[ps->best];
    const int v = ps->p->vp > 1 ? ps->p->vp : 1;
    int chunks[AP_MAX_CHUNKS];
    for (int r = 0; r < ps->p->pp; r++)
        for (int k = 0; k < v; k++)
            chunks[r + k * ps->p->pp] = ap_stage_chunk_layers(b->so.split[r], v, k);
    ap_status st = ap_partition_eval(ps->m, ps->c, &b->q, &ps->o->est, chunks,
                                     b->per_stage_rc ? b->so.rc : NULL, out, err);
    if (st != AP_OK) return st;
    long evals = 0;
    for (int i = 0; i < ps->ntab; i++) evals += ap_stage_table_evals(ps->tabs[i]);
    out->solver = b->so.solver;
    out->optimal = b->so.optimal;
    out->fell_back = b->so.fell_back;
    out->capped = b->so.capped;
    out->restricted = b->so.restricted;
    out->extra_s = b->extra_s;
    out->objective_s = out->pipe_s + b->extra_s;
    out->variants = ps->nvar + ps->skipped;
    snprintf(out->note, sizeof out->note, "%s", b->so.note);
    out->evals = evals + 1 + ps->ntab;
    out->solve_s = ap_now_s() - t0;
    return AP_OK;
}

ap_status ap_partition_solve(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_partition_opts *o, ap_partition_result *out, ap_err *err) {
    ap_partition_opts oc;
    if (o) oc = *o;
    else ap_partition_opts_init(&oc);
    /* every estimate of the solve (its variants' uniform splits, their stage tables) prices
     * the same layer shapes: one memo for them all unless the caller gave one */
    ap_estimate_cache *cache = NULL;
    if (!oc.est.cache) oc.est.cache = cache = ap_estimate_cache_new();
    o = &oc;
    double t0 = ap_now_s();
    result_clear(out, p->pp, p->pp * (p->vp > 1 ? p->vp : 1));
    ap_status st = pt_check_input(m, p, o, err);
    if (st != AP_OK) {
        ap_estimate_cache_free(cache);
        return st;
    }
    psolve ps;
    memset(&ps, 0, sizeof ps);
    ps.m = m;
    ps.c = c;
    ps.p = p;
    ps.o = o;
    ps.tr = ap_trainer_get(p->trainer);
    ps.L = (int)m->layers;
    ps.lo = o->min_layers > 0 ? o->min_layers : 1;
    ps.counts = o->choose_recompute || o->choose_mode;
    ps.partial_ok = !(ps.tr->recompute_partial_needs_pp && p->pp == 1);
    ps.best = -1;
    ps.refused = AP_OK;
    st = list_choices(&ps, err);
    choice *ch = st == AP_OK ? ap_malloc((size_t)ps.ntab_max * sizeof *ch) : NULL;
    if (st == AP_OK && !ch) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the choices");
    int nch = 0;
    for (int gi = 0; gi < ps.nmodes && st == AP_OK; gi++)
        for (int oi = 0; oi < ps.nfo && st == AP_OK; oi++)
            for (int pi = 0; pi < ps.nfp && st == AP_OK; pi++) {
                int refused;
                st = probe_choice(&ps, gi, oi, pi, &ch[nch], &refused, err);
                if (st == AP_OK && !refused) ch[nch].order = nch, nch++;
            }
    /* the bounds between offload fractions (mref) hold for the optimizer's alone */
    const int refs = o->choose_offload && ps.nfo > 1 && ps.nfp == 1;
    for (int i = 0; i < nch; i++) ch[i].frac_first = refs;
    if (st == AP_OK) qsort(ch, (size_t)nch, sizeof *ch, choice_first);
    /* count slots: Megatron's one count K = 0 .. L - (pp - 1) lo (at least lo: pt_check_input
     * took pp lo <= L), the counts solve_choice tries; the other choices use slot 0 */
    ps.nks = ps.L - (p->pp - 1) * ps.lo + 1;
    if (st == AP_OK && refs) {
        ps.ref = ap_calloc((size_t)ps.nmodes * (size_t)ps.nks * (size_t)ps.nfo, sizeof *ps.ref);
        if (!ps.ref) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the partition variants");
    }
    if (st == AP_OK && ps.ntab_max > 1) {
        ps.tnm = ap_calloc((size_t)ps.nmodes * (size_t)ps.nks, sizeof *ps.tnm);
        if (!ps.tnm) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for the partition variants");
    }
    ps.chs = ch;
    ps.nch = nch;
    for (int i = 0; i < nch && st == AP_OK; i++) {
        ps.cur = i;
        st = solve_choice(&ps, &ch[i], err);
    }
    ap_free(ch);
    if (st == AP_OK && ps.nvar == 0 && ps.cut > 0) {
        /* nothing can beat upper_s: the uniform split, capped */
        int u[AP_MAX_CHUNKS];
        ap_plan up = *p;
        up.nchunks = 0;
        for (int i = 0; i < p->pp * (p->vp > 1 ? p->vp : 1); i++)
            u[i] = ap_plan_chunk_layers(&up, ps.L, i);
        st = ap_partition_eval(m, c, p, &o->est, u, NULL, out, err);
        out->capped = 1;
        goto free_all;
    }
    if (st == AP_OK && ps.nvar == 0) {
        st = ps.refused != AP_OK ? ps.refused : AP_ERR_INPUT;
        *err = ps.rerr;
        if (ps.refused == AP_OK) ap_err_set(err, AP_ERR_INPUT, "no variant to solve");
    }
    /* the joint integer program when a choice is open (one plain variant runs it inside) */
    if (st == AP_OK && o->solver == AP_SOLVER_ILP &&
        !(ps.nvar == 1 && ps.ntab_max == 1 && ps.vars[0].fixed_rc < 0) &&
        !ps.vars[ps.best].so.restricted)
        st = solve_joint(&ps, err);
    if (st == AP_OK) st = fill_result(&ps, t0, out, err);
free_all:
    pdp_free(&ps.dp);
    for (int i = 0; i < ps.ntab; i++) ap_stage_table_free(ps.tabs[i]);
    ap_free(ps.tabs);
    ap_free(ps.vars);
    ap_free(ps.ref);
    ap_free(ps.tnm);
    ap_estimate_cache_free(cache);
    return st;
}
