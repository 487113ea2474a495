/*
 * ilp.c - the stage partition as a GLPK mixed-integer program (partition.h). The only file of
 * autoplan that includes glpk.h.
 *
 * Formulation (a shortest path with a max term): one binary y_s per legal stage s = (rank r,
 * first layer a, n layers, and with per-stage recompute the count of recomputed layers) that
 * fits memory, one continuous M >= 0;
 *     min  sum_s t_s y_s + (m - 1) M
 *     s.t. sum_{s = (0, 0, n)} y_s = 1                                  (stage 0 starts at 0)
 *          sum_{s = (r, j, .)} y_s - sum_{s = (r-1, a, n), a+n = j} y_s = 0   (r >= 1, all j)
 *          M - sum_{s = (r, ., .)} t_s y_s >= 0                          (each rank r)
 * Stages of the last rank all end at layer L, so a unit flow from (0, 0) is exactly one split of
 * consecutive layers. Stage times and memory are the cost model's (stagecost.h), so the program
 * is exact for any cost, not a linearisation. The max is taken per rank over the sum of that
 * rank's y_s t_s (one s is chosen per rank), a tighter LP relaxation than one row per stage.
 * Joint plan-wide choices (partition.h: recompute granularity and count, offload fractions): the
 * stage binaries of every variant q share the flow rows; a binary z_q per variant with
 * sum_q z_q = 1 and, for every rank r, sum_{s of rank r, variant q} y_s = z_q (every rank takes
 * its stage from the chosen variant); z_q carries the variant's extra time X_q in the objective.
 * With a known achievable T (the DP's) the stages with m t_s > T are dropped: they cannot be
 * in a better split (T >= sum + (m - 1) max >= m t_s). Many splits share the optimal T; among
 * them the least peak stage memory is found by bisection over the stages' memories, each probe
 * the same program with the stages above the probed peak fixed out (least_peak_phase), each
 * under the same node limit.
 *
 * GLPK hygiene (GLPK 5.0 reference manual, Sec. 6.1 "glp_error_hook", Sec. 2.8 "glp_intopt"):
 * an error hook longjmps out of GLPK and the environment is freed (the problem object is never
 * reused after a failure); a limit on branch-and-bound nodes per solve (a callback counts them
 * and calls glp_ios_terminate: deterministic, unlike tm_lim); glp_mip_status is checked after
 * glp_intopt (0 does not mean optimal: GLP_FEAS after the node limit is only feasible);
 * terminal output is off and GLPK's own messages (errors force it on) go to the debug log
 * through a terminal hook. GLPK keeps global state and is not thread-safe: a process-wide mutex
 * makes solves from several threads (the search's workers, sweep points) take turns.
 */
#include "autoplan/partition.h"

#include <glpk.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GLPK's global state: one solve at a time in the process */
static pthread_mutex_t glpk_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    jmp_buf jb;
    char line[256];     /* the line GLPK is printing */
    char prev[256];     /* the last two whole lines: on an error GLPK prints its message, then */
    char prev2[256];    /* "Error detected in file ... at line ..." (GLPK 5.0 env/error.c) */
    size_t len;
} glpk_guard;

/* The deterministic limit: GLPK calls this at every point of its branch and bound; once the
 * subproblems created pass the limit, the search stops (glp_intopt returns GLP_ESTOP) with the
 * best integer solution found, if any. A count of nodes, not wall time, so the answer does not
 * depend on the machine or its load. */
typedef struct {
    long node_limit;
    int stopped;
} node_guard;

static void on_glpk_node(glp_tree *tree, void *info) {
    node_guard *ng = info;
    int active, current, total;
    glp_ios_tree_size(tree, &active, &current, &total);
    if (total > ng->node_limit) {
        ng->stopped = 1;
        glp_ios_terminate(tree);
    }
}

static void on_glpk_error(void *info) {
    glpk_guard *g = info;
    longjmp(g->jb, 1);
}

/* every piece of text GLPK prints: whole lines to the debug log and kept for error messages;
 * returns 1 so that GLPK itself prints nothing */
static int on_glpk_term(void *info, const char *s) {
    glpk_guard *g = info;
    for (; *s; s++) {
        if (*s == '\n') {
            g->line[g->len] = '\0';
            ap_log(AP_LOG_DEBUG, "glpk: %s", g->line);
            memcpy(g->prev2, g->prev, sizeof g->prev2);
            memcpy(g->prev, g->line, g->len + 1);
            g->len = 0;
        } else if (g->len < sizeof g->line - 1) {
            g->line[g->len++] = *s;
        }
    }
    return 1;
}

typedef struct {
    int r, a, n, rc; /* rank, first layer, layers, recomputed layers (-1: the plan's) */
    int var;         /* plan-wide variant (ap_ilp_variant) */
    double t_s;
    double mem_bytes;
} stage_var;

/* what the solve allocates; freed on every path, including after a longjmp */
typedef struct {
    stage_var *vars;
    int *ia, *ja;
    double *ar;
    int *ind;      /* one row for glp_set_mat_row (1-based) */
    double *val;
    double *cand;  /* the least-peak phase's peaks to try */
} ilp_mem;

static void ilp_mem_free(ilp_mem *mm) {
    ap_free(mm->vars);
    ap_free(mm->ia);
    ap_free(mm->ja);
    ap_free(mm->ar);
    ap_free(mm->ind);
    ap_free(mm->val);
    ap_free(mm->cand);
}

/* the split of the current MIP solution; returns the layers it covers */
static int read_split(glp_prob *lp, const ilp_mem *mm, int nv, int64_t m,
                      ap_partition_result *out, int *var_out) {
    int j = 0;
    double sum = 0, mx = 0;
    for (int v = 0; v < nv; v++) {
        if (glp_mip_col_val(lp, v + 1) < 0.5) continue;
        const stage_var *s = &mm->vars[v];
        out->stage_layers[s->r] = s->n;
        out->stage_recompute[s->r] = s->rc;
        out->stage_s[s->r] = s->t_s;
        out->stage_device_bytes[s->r] = s->mem_bytes;
        *var_out = s->var;
        sum += s->t_s;
        if (s->t_s > mx) mx = s->t_s;
        j += s->n;
    }
    out->max_stage_s = mx;
    out->pipe_s = sum + (double)(m - 1) * mx;
    return j;
}

/* row of flow node (r, j), r >= 1, 0 <= j <= L: rows are [start] [nodes of r = 1..p-1]
 * [max rows] */
static int node_row(int L, int r, int j) { return 2 + (r - 1) * (L + 1) + j; }

ap_status ap_partition_ilp(ap_stage_table *tab, int L, int pp, int64_t m, int per_stage_rc,
                           int fixed_rc, const ap_partition_opts *o, double upper_s,
                           ap_partition_result *out, ap_err *err) {
    ap_ilp_variant v = {tab, per_stage_rc, fixed_rc, 0.0};
    int chosen = 0;
    return ap_partition_ilp_joint(&v, 1, L, pp, m, o, upper_s, out, &chosen, err);
}

/* The stage of range (r, a, n) of variant vq, with per-stage counts the least count that fits
 * (it is best for time and fits: memory falls and time grows with the count, the DP's rule; the
 * other counts are dominated); *sc NULL when no count fits. */
static ap_status range_cost(const ap_ilp_variant *vq, int r, int a, int n, const ap_stage_cost **sc,
                            int *rc, ap_err *err) {
    ap_status st;
    if (!vq->per_stage_rc) {
        *rc = -1;
        return ap_stage_table_get(vq->tab, r, a, n, vq->fixed_rc > 0 ? vq->fixed_rc : -1, sc, err);
    }
    if ((st = ap_stage_table_get(vq->tab, r, a, n, n, sc, err)) != AP_OK) return st;
    *rc = n;
    if (!(*sc)->fits) return AP_OK;
    int lo = 1, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const ap_stage_cost *x;
        if ((st = ap_stage_table_get(vq->tab, r, a, n, mid, &x, err)) != AP_OK) return st;
        if (x->fits) hi = mid;
        else lo = mid + 1;
    }
    *rc = lo;
    return ap_stage_table_get(vq->tab, r, a, n, lo, sc, err);
}

/* Drop the stages of one variant (vars[i0..i1), in rank order) that no split better than upper
 * can use: a split through stage s = (r, a, n) has a sum of stage times at least the least sum
 * of the ranks before it to layer a, plus t_s, plus the least sum of the ranks after it from
 * layer a + n, and a slowest stage at least the largest of t_s and the least possible slowest
 * stage before and after it (the DP's prefix and suffix passes, over the variant's fitting
 * stages). Returns the new end. */
static int prune_dominated(stage_var *vars, int i0, int i1, int L, int p, int64_t m,
                           double extra_s, double upper_s, double *f) {
    const size_t W = (size_t)(L + 1);
    double *pre = f, *premax = f + (size_t)(p + 1) * W, *suf = f + 2 * (size_t)(p + 1) * W,
           *sufmax = f + 3 * (size_t)(p + 1) * W;
    for (size_t i = 0; i < 4 * (size_t)(p + 1) * W; i++) f[i] = INFINITY;
    pre[0] = premax[0] = 0;
    suf[(size_t)p * W + (size_t)L] = sufmax[(size_t)p * W + (size_t)L] = 0;
    for (int i = i0; i < i1; i++) { /* forward: ranks in increasing order */
        const stage_var *s = &vars[i];
        size_t from = (size_t)s->r * W + (size_t)s->a, to = (size_t)(s->r + 1) * W + (size_t)(s->a + s->n);
        if (pre[from] + s->t_s < pre[to]) pre[to] = pre[from] + s->t_s;
        double mx = fmax(premax[from], s->t_s);
        if (mx < premax[to]) premax[to] = mx;
    }
    for (int i = i1 - 1; i >= i0; i--) { /* backward */
        const stage_var *s = &vars[i];
        size_t at = (size_t)s->r * W + (size_t)s->a, next = (size_t)(s->r + 1) * W + (size_t)(s->a + s->n);
        if (suf[next] + s->t_s < suf[at]) suf[at] = suf[next] + s->t_s;
        double mx = fmax(sufmax[next], s->t_s);
        if (mx < sufmax[at]) sufmax[at] = mx;
    }
    int k = i0;
    for (int i = i0; i < i1; i++) {
        const stage_var *s = &vars[i];
        size_t from = (size_t)s->r * W + (size_t)s->a, to = (size_t)(s->r + 1) * W + (size_t)(s->a + s->n);
        double S = pre[from] + s->t_s + suf[to];
        double M = fmax(s->t_s, fmax(premax[from], sufmax[to]));
        if (S + (double)(m - 1) * M + extra_s > upper_s * (1.0 + 1e-9)) continue;
        vars[k++] = *s;
    }
    return k;
}

/* The variables: fitting stages of every variant that can be in a split better than upper_s
 * (objective >= m t + extra, and the prefix/suffix bound of prune_dominated), the least fitting
 * count per range with per-stage counts. Ranges are priced in increasing length and stop at the
 * first one that alone exceeds upper_s (a stage's time grows with its layers). Fills mm->vars,
 * *nv. */
static ap_status collect_vars(const ap_ilp_variant *variants, int nvar, int L, int p, int lo,
                              int64_t m, double upper_s, ilp_mem *mm, int *nv, ap_err *err) {
    size_t cap = 0;
    for (int r = 0; r < p; r++)
        for (int a = r * lo; a <= (r == 0 ? 0 : L - (p - r) * lo); a++) cap += (size_t)(L - a) + 1;
    cap *= (size_t)nvar;
    mm->vars = ap_malloc((cap ? cap : 1) * sizeof *mm->vars);
    double *f = ap_malloc(4 * (size_t)(p + 1) * (size_t)(L + 1) * sizeof *f);
    if (!mm->vars || !f) {
        ap_free(f);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ILP");
    }
    int k = 0;
    for (int q = 0; q < nvar; q++) {
        const ap_ilp_variant *vq = &variants[q];
        const int k0 = k;
        for (int r = 0; r < p; r++)
            for (int a = r * lo; a <= (r == 0 ? 0 : L - (p - r) * lo); a++) {
                int n0 = r == p - 1 ? L - a : lo;
                int n1 = r == p - 1 ? L - a : L - a - (p - 1 - r) * lo;
                for (int n = n0; n <= n1; n++) {
                    const ap_stage_cost *sc;
                    int rc;
                    ap_status st = range_cost(vq, r, a, n, &sc, &rc, err);
                    if (st != AP_OK) {
                        ap_free(f);
                        return st;
                    }
                    double t = sc->fwd_s + sc->bwd_s;
                    if (upper_s > 0 && (double)m * t + vq->extra_s > upper_s * (1.0 + 1e-9))
                        break;
                    if (sc->fits) mm->vars[k++] = (stage_var){r, a, n, rc, q, t, sc->device_bytes};
                }
            }
        if (upper_s > 0) k = prune_dominated(mm->vars, k0, k, L, p, m, vq->extra_s, upper_s, f);
    }
    ap_free(f);
    *nv = k;
    if (k == 0)
        return ap_err_set(err, AP_ERR_SOLVER, "no stage fits memory: the integer program is "
                          "empty");
    return AP_OK;
}

/* Rows and columns of the program (see the top of the file). */
typedef struct {
    int p, L, nv, nvar, joint;
    int has_M;       /* m > 1: the slowest stage M and its max rows (m = 1 weighs it 0) */
    int64_t m;
    int flow_rows, link_row0, choice_row, rows, colM, colZ0, cols;
} ilp_shape;

static ilp_shape shape_of(int p, int L, int nv, int nvar, int64_t m) {
    ilp_shape sh;
    sh.p = p;
    sh.L = L;
    sh.nv = nv;
    sh.nvar = nvar;
    sh.m = m;
    /* with several variants: one binary z_q each, sum z = 1, and on every rank the chosen
     * stage belongs to the chosen variant (sum of rank r's y of variant q = z_q) */
    sh.joint = nvar > 1;
    /* one micro-batch weighs M by m - 1 = 0: without it and its max rows the program is a
     * shortest path (plus the variant rows), whose relaxation has integral vertices; with
     * them, where every split ties on the sum (layers of one cost), GLPK's vertex was
     * fractional and each branch-and-bound node re-solved the whole relaxation (a 400-layer
     * model on 32 stages: over two minutes) */
    sh.has_M = m > 1;
    const int max_rows = sh.has_M ? p : 0;
    sh.flow_rows = 1 + (p - 1) * (L + 1);
    sh.link_row0 = sh.flow_rows + max_rows + 1;      /* (q, r): link_row0 + q * p + r */
    sh.choice_row = sh.link_row0 + nvar * p;
    sh.rows = sh.joint ? sh.choice_row : sh.flow_rows + max_rows;
    sh.colM = sh.has_M ? nv + 1 : 0;
    sh.colZ0 = nv + sh.has_M + 1;                    /* z_q: colZ0 + q */
    sh.cols = nv + sh.has_M + (sh.joint ? nvar : 0);
    return sh;
}

/* The triplets of one stage binary: out of its node, into the next, its rank's max row, its
 * variant's link row. */
static size_t stage_column(const ilp_shape *sh, const stage_var *s, int col, ilp_mem *mm,
                           size_t k) {
    k++;
    mm->ia[k] = s->r == 0 ? 1 : node_row(sh->L, s->r, s->a);
    mm->ja[k] = col;
    mm->ar[k] = 1.0;
    if (s->r < sh->p - 1) {
        k++;
        mm->ia[k] = node_row(sh->L, s->r + 1, s->a + s->n);
        mm->ja[k] = col;
        mm->ar[k] = -1.0;
    }
    if (sh->has_M) {
        k++;
        mm->ia[k] = sh->flow_rows + 1 + s->r;
        mm->ja[k] = col;
        mm->ar[k] = -s->t_s;
    }
    if (sh->joint) {
        k++;
        mm->ia[k] = sh->link_row0 + s->var * sh->p + s->r;
        mm->ja[k] = col;
        mm->ar[k] = 1.0;
    }
    return k;
}

/* Load the program into lp (GLPK errors longjmp to the caller's guard). */
static void build_problem(glp_prob *lp, const ilp_shape *sh, const ap_ilp_variant *variants,
                          ilp_mem *mm, int fault) {
    const int p = sh->p;
    glp_set_prob_name(lp, "autoplan_partition");
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_rows(lp, sh->rows);
    glp_set_row_bnds(lp, 1, GLP_FX, 1.0, 1.0);
    for (int i = 2; i <= sh->flow_rows; i++) glp_set_row_bnds(lp, i, GLP_FX, 0.0, 0.0);
    for (int r = 0; r < p && sh->has_M; r++)
        glp_set_row_bnds(lp, sh->flow_rows + 1 + r, GLP_LO, 0.0, 0.0);
    if (sh->joint) {
        for (int i = sh->link_row0; i < sh->choice_row; i++)
            glp_set_row_bnds(lp, i, GLP_FX, 0.0, 0.0);
        glp_set_row_bnds(lp, sh->choice_row, GLP_FX, 1.0, 1.0);
    }
    glp_add_cols(lp, sh->cols);
    size_t k = 0;
    for (int v = 0; v < sh->nv; v++) {
        glp_set_col_kind(lp, v + 1, GLP_BV);
        glp_set_obj_coef(lp, v + 1, mm->vars[v].t_s);
        k = stage_column(sh, &mm->vars[v], v + 1, mm, k);
    }
    if (sh->has_M) {
        glp_set_col_bnds(lp, sh->colM, GLP_LO, 0.0, 0.0);
        glp_set_obj_coef(lp, sh->colM, (double)(sh->m - 1));
    }
    for (int r = 0; r < p && sh->has_M; r++) {
        k++;
        mm->ia[k] = sh->flow_rows + 1 + r;
        mm->ja[k] = sh->colM;
        mm->ar[k] = 1.0;
    }
    if (sh->joint)
        for (int q = 0; q < sh->nvar; q++) {
            int col = sh->colZ0 + q;
            glp_set_col_kind(lp, col, GLP_BV);
            glp_set_obj_coef(lp, col, variants[q].extra_s);
            for (int r = 0; r < p; r++) {
                k++;
                mm->ia[k] = sh->link_row0 + q * p + r;
                mm->ja[k] = col;
                mm->ar[k] = -1.0;
            }
            k++;
            mm->ia[k] = sh->choice_row;
            mm->ja[k] = col;
            mm->ar[k] = 1.0;
        }
    if (fault) glp_set_col_kind(lp, sh->cols + 1, GLP_BV); /* out of range: GLPK error */
    glp_load_matrix(lp, (int)k, mm->ia, mm->ja, mm->ar);
}

/* Second phase: many splits share the optimal objective J; among them the least peak memory.
 * The least peak P is one of the stages' memories, and the best objective of the splits whose
 * stages all stay within P falls as P grows, so a bisection over those memories (up to the
 * first phase's peak P1, which is feasible) finds it: each probe fixes the binaries of the
 * stages above P at 0 and solves the first phase's program again; P is feasible when its
 * answer's exact J is no worse than J* up to the rounding of summing stage times in another
 * order (1e-12 relative; GLPK's row tolerance could let a worse one slip). A program of P >=
 * each rank's stage memory under J <= J* took thousands of branch-and-bound nodes of
 * milliseconds each where every split ties on J (one micro-batch: 26 s for llama-3-70b on 8
 * stages); a probe where the ties are is a shortest path, whose relaxation is integral. A
 * probe stopped by the node limit without such a split counts as infeasible, and the note
 * says the least peak is not proven. */
static int cmp_mem(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void least_peak_phase(glp_prob *lp, const ilp_shape *sh, const ap_ilp_variant *variants,
                             ilp_mem *mm, glp_iocp *parm, node_guard *ng,
                             ap_partition_result *out, int *var_out) {
    const int p = sh->p, nv = sh->nv;
    const double J1 = out->pipe_s + variants[*var_out].extra_s;
    double P1 = 0;
    for (int r = 0; r < p; r++)
        if (out->stage_device_bytes[r] > P1) P1 = out->stage_device_bytes[r];
    /* the distinct stage memories below P1, ascending: the peaks to try */
    /* in mm: a GLPK error longjmps out of a probe, and mm is freed on that path too */
    double *cand = mm->cand = ap_malloc(((size_t)nv + 1) * sizeof *cand);
    if (!cand) return; /* the first phase's split stands (its peak not minimised) */
    int nc = 0;
    for (int v = 0; v < nv; v++)
        if (mm->vars[v].mem_bytes < P1) cand[nc++] = mm->vars[v].mem_bytes;
    qsort(cand, (size_t)nc, sizeof *cand, cmp_mem);
    int u = 0;
    for (int i = 0; i < nc; i++)
        if (u == 0 || cand[i] != cand[u - 1]) cand[u++] = cand[i];
    int lo = 0, hi = u, unproven = 0; /* cand[hi] (P1 when hi == u) is feasible */
    ap_partition_result best = *out;
    int best_var = *var_out;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        for (int v = 0; v < nv; v++)
            glp_set_col_bnds(lp, v + 1, mm->vars[v].mem_bytes > cand[mid] ? GLP_FX : GLP_DB, 0.0,
                             mm->vars[v].mem_bytes > cand[mid] ? 0.0 : 1.0);
        ng->stopped = 0;
        int ret = glp_intopt(lp, parm), status = glp_mip_status(lp);
        ap_partition_result o2 = *out;
        int var2 = -1, ok = 0;
        if ((status == GLP_OPT || status == GLP_FEAS) &&
            read_split(lp, mm, nv, sh->m, &o2, &var2) == sh->L && var2 >= 0 &&
            o2.pipe_s + variants[var2].extra_s <= J1 * (1 + 1e-12))
            ok = 1;
        if (ok) {
            best = o2;
            best_var = var2;
            hi = mid;
        } else {
            /* proven: the program solved (its best split past J*) or found infeasible (no
             * split within the peak; the presolver says so by GLP_ENOPFS) */
            unproven |= ng->stopped || !(ret == 0 || ret == GLP_ENOPFS || status == GLP_NOFEAS);
            lo = mid + 1;
        }
    }
    ap_free(cand);
    mm->cand = NULL;
    *out = best;
    *var_out = best_var;
    if (unproven)
        snprintf(out->note, sizeof out->note, "ILP: %d binaries, optimal; least peak among "
                 "equal objectives not proven (node limit)", nv);
}

/* Solve the loaded program and read the answer (then the least-peak phase); the status says
 * why there is none. */
static ap_status solve_problem(glp_prob *lp, const ilp_shape *sh, const ap_ilp_variant *variants,
                               ilp_mem *mm, long node_limit, ap_partition_result *out,
                               int *var_out, ap_err *err) {
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.presolve = GLP_ON;
    parm.msg_lev = ap_log_get_level() <= AP_LOG_DEBUG ? GLP_MSG_ALL : GLP_MSG_OFF;
    node_guard ng = {node_limit, 0};
    parm.cb_func = on_glpk_node;
    parm.cb_info = &ng;
    int ret = glp_intopt(lp, &parm);
    int status = glp_mip_status(lp);
    if (status == GLP_OPT || status == GLP_FEAS) {
        int var = -1;
        int j = read_split(lp, mm, sh->nv, sh->m, out, &var);
        if (j != sh->L || var < 0)
            return ap_err_set(err, AP_ERR_SOLVER, "GLPK returned a split of %d layers, not %d",
                              j, sh->L);
        out->pp = sh->p;
        out->micro_batches = sh->m;
        out->fits = 1;
        out->solver = AP_SOLVER_ILP;
        *var_out = var;
        /* GLP_OPT after a normal return is proven optimal (mip_gap 0); GLP_FEAS means GLPK
         * stopped early (node limit) with an integer solution that may not be optimal */
        out->optimal = status == GLP_OPT && ret == 0;
        snprintf(out->note, sizeof out->note, "ILP: %d binaries%s, %s%s",
                 sh->nv + (sh->joint ? sh->nvar : 0), sh->joint ? " (joint choice)" : "",
                 out->optimal ? "optimal" : "feasible, not proven optimal",
                 ng.stopped ? " (node limit)" : "");
        if (out->optimal) least_peak_phase(lp, sh, variants, mm, &parm, &ng, out, var_out);
        return AP_OK;
    }
    if (ng.stopped)
        return ap_err_set(err, AP_ERR_SOLVER, "GLPK reached its limit of %ld branch-and-bound "
                          "nodes without an integer solution", node_limit);
    if (status == GLP_NOFEAS || ret == GLP_ENOPFS)
        return ap_err_set(err, AP_ERR_SOLVER, "no split fits memory (integer program infeasible)");
    return ap_err_set(err, AP_ERR_SOLVER, "GLPK glp_intopt returned %d, MIP status %d", ret,
                      status);
}

ap_status ap_partition_ilp_joint(const ap_ilp_variant *variants, int nvar, int L, int pp,
                                 int64_t m, const ap_partition_opts *o, double upper_s,
                                 ap_partition_result *out, int *var_out, ap_err *err) {
    const int p = pp, lo = o->min_layers > 0 ? o->min_layers : 1;
    memset(out, 0, sizeof *out);
    *var_out = -1;
    if (p < 1 || p > AP_MAX_STAGES || L < p * lo)
        return ap_err_set(err, AP_ERR_INPUT, "%d layers cannot fill %d stages", L, p);
    if (nvar < 1) return ap_err_set(err, AP_ERR_INPUT, "no variant to choose from");
    ilp_mem mm;
    memset(&mm, 0, sizeof mm);
    int nv = 0;
    ap_status st = collect_vars(variants, nvar, L, p, lo, m, upper_s, &mm, &nv, err);
    if (st != AP_OK) {
        ilp_mem_free(&mm);
        return st;
    }
    const ilp_shape sh = shape_of(p, L, nv, nvar, m);
    /* nonzeros: each y_s in at most two flow rows, one max row and one link row; M in p max
     * rows; z_q in p link rows and the choice row */
    size_t nz = (size_t)nv * 4 + (size_t)p + 1 + (size_t)nvar * ((size_t)p + 1);
    mm.ia = ap_malloc(nz * sizeof *mm.ia);
    mm.ja = ap_malloc(nz * sizeof *mm.ja);
    mm.ar = ap_malloc(nz * sizeof *mm.ar);
    mm.ind = ap_malloc(((size_t)nv + (size_t)nvar + 3) * sizeof *mm.ind);
    mm.val = ap_malloc(((size_t)nv + (size_t)nvar + 3) * sizeof *mm.val);
    glpk_guard *g = ap_calloc(1, sizeof *g);
    if (!mm.ia || !mm.ja || !mm.ar || !mm.ind || !mm.val || !g) {
        ap_free(g);
        ilp_mem_free(&mm);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the ILP");
    }
    pthread_mutex_lock(&glpk_mu);
    if (setjmp(g->jb)) {
        /* GLPK raised an error: everything it allocated goes with its environment */
        glp_free_env();
        pthread_mutex_unlock(&glpk_mu);
        st = ap_err_set(err, AP_ERR_SOLVER, "GLPK error: %.160s (%.120s)",
                        g->prev2[0] ? g->prev2 : "(no message)", g->prev);
        ap_free(g);
        ilp_mem_free(&mm);
        return st;
    }
    glp_error_hook(on_glpk_error, g);
    glp_term_hook(on_glpk_term, g);
    glp_term_out(ap_log_get_level() <= AP_LOG_DEBUG ? GLP_ON : GLP_OFF);
    glp_prob *lp = glp_create_prob();
    build_problem(lp, &sh, variants, &mm, o->ilp_fault);
    st = solve_problem(lp, &sh, variants, &mm, o->ilp_node_limit > 0 ? o->ilp_node_limit : 20000,
                       out, var_out, err);
    glp_delete_prob(lp);
    glp_error_hook(NULL, NULL);
    glp_term_hook(NULL, NULL);
    glp_free_env();
    pthread_mutex_unlock(&glpk_mu);
    ap_free(g);
    ilp_mem_free(&mm);
    return st;
}
