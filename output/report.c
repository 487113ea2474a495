/*
 * report.c - the data behind `autoplan compare` and its three renderers (report.h).
 *
 * Structure: a bounded enumeration of the search space (ap_search itself, unpruned, walking
 * the plan space of planner/space.c and visiting every legal estimated plan), compact rows for the
 * feasible plans, then report.html (inline SVG charts, CSS for light, dark and print schemes,
 * no scripts and nothing fetched) and report.md, each built in one growable buffer; plans.csv
 * is streamed in chunks (output/report_csv.c).
 *
 * Numbers: every printed value is formatted from an ap_estimate field under the name
 * `autoplan estimate --json` gives it (output/estjson.c), with one fixed format per unit
 * (rep_fmt_s, rep_fmt_gib, rep_fmt_pct below) so a reader or a test can reformat the JSON and compare.
 * Derived values are named as such: the overshoot (device peak + headroom - capacity) and the
 * "allocator & runtime" memory segment (device peak minus the five allocated categories).
 *
 * The HTML holds no URL at all: inline <svg> needs no xmlns in an HTML document (the parser
 * puts it in the SVG namespace), hatching patterns are referenced as url(#id) in the same SVG.
 *
 * Charts 1-3 are in output/report_charts.c (layout helpers: report_layout.c), charts 4
 * (GPU-count sweep) and 5 (memory over one iteration from the simulator) in
 * output/report_sweep.c and output/report_simchart.c, sharing the buffer, formats and part
 * tables through report_int.h. Headers in report.html are readable; each names its JSON field. Not here: choosing the strategies (cli/cmd_compare.c).
 */
#include "autoplan/planio.h"
#include "autoplan/report.h"
#include "report_int.h"
#include "autoplan/text.h"
#include "autoplan/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- growable text buffer ------------------------------------------------------------------ */

void rb_puts(rbuf *b, const char *s) { ap_strbuf_puts(b, s); }

/* user text in the report: the one escaper (text.h) */
void rb_html(rbuf *b, const char *s) { ap_text_escape(b, AP_TEXT_HTML, s); }
void rb_md(rbuf *b, const char *s) { ap_text_escape(b, AP_TEXT_MD, s); }

/* "`autoplan <command> <args>`" as a Markdown code span that a table cell cannot break */
void rb_md_command(rbuf *b, const char *command, const char *args) {
    ap_strbuf t = {0};
    ap_strbuf_printf(&t, "autoplan %s %s", command, args);
    if (t.failed) b->failed = 1;
    else ap_text_escape(b, AP_TEXT_MD_CODE, t.buf);
    ap_strbuf_free(&t);
}

static ap_status rb_finish(rbuf *b, char **out, size_t *len, ap_err *err) {
    if (b->failed || !b->buf) {
        ap_free(b->buf);
        *out = NULL;
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory building the report");
    }
    *out = b->buf;
    if (len) *len = b->len;
    return AP_OK;
}

/* ---- number formats: one per unit, used by every renderer ------------------------------ */

char *rep_fmt_s(double s, char *buf, size_t n) { snprintf(buf, n, "%.3f", s); return buf; }
char *rep_fmt_gib(double bytes, char *buf, size_t n) {
    snprintf(buf, n, "%.2f", bytes / AP_GIB);
    return buf;
}
char *rep_fmt_pct(double frac, char *buf, size_t n) {
    snprintf(buf, n, "%.1f", 100.0 * frac);
    return buf;
}
char *rep_fmt_tps(double tps, char *buf, size_t n) { snprintf(buf, n, "%.0f", tps); return buf; }

/* ---- rows ------------------------------------------------------------------------------ */

/* A row's sort key and its index. */
typedef struct {
    double step_s, peak;
    int64_t met, i;
} row_key;

static row_key key_of(const ap_report_row *r, int64_t i) {
    return (row_key){r->step_s, r->device_peak_bytes, r->met, i};
}

/* 1 if a ranks before b: lower step time, then lower device memory (as ap_search ranks),
 * then met first by the enumeration (a total order: the rows kept and their order do not
 * depend on the sort) */
static int key_before(const row_key *a, const row_key *b) {
    if (a->step_s != b->step_s) return a->step_s < b->step_s;
    if (a->peak != b->peak) return a->peak < b->peak;
    return a->met < b->met;
}

/* Sort the n keys by key_before, tmp holding n more: runs of 16 by insertion, then bottom-up
 * merges between k and tmp (qsort, calling a comparator through a pointer, took three times
 * as long on compare's 90,000 rows). */
static void sort_keys(row_key *k, row_key *tmp, int64_t n) {
    enum { RUN = 16 };
    for (int64_t lo = 0; lo < n; lo += RUN) {
        int64_t hi = lo + RUN < n ? lo + RUN : n;
        for (int64_t i = lo + 1; i < hi; i++) {
            row_key x = k[i];
            int64_t j = i;
            for (; j > lo && key_before(&x, &k[j - 1]); j--) k[j] = k[j - 1];
            k[j] = x;
        }
    }
    row_key *from = k, *to = tmp;
    for (int64_t w = RUN; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) to[o++] = key_before(&from[b], &from[a]) ? from[b++] : from[a++];
            while (a < mid) to[o++] = from[a++];
            while (b < hi) to[o++] = from[b++];
        }
        row_key *t = from;
        from = to;
        to = t;
    }
    if (from != k) memcpy(k, from, (size_t)n * sizeof *k);
}

int rep_threads(int threads, int64_t n, int64_t per_thread) {
    int nt = threads > 0 ? threads : ap_online_cores();
    if (nt > AP_REPORT_MAX_THREADS) nt = AP_REPORT_MAX_THREADS;
    if ((int64_t)nt * per_thread > n) nt = (int)(n / per_thread);
    return nt < 1 ? 1 : nt;
}

/* Rows [j0, j1) of the sorted array gathered from the unsorted one, on a thread of sort_rows. */
typedef struct {
    const ap_report_row *from;
    ap_report_row *to;
    const row_key *k;
    int64_t j0, j1;
} gather_part;

static void *gather(void *arg) {
    const gather_part *g = arg;
    for (int64_t j = g->j0; j < g->j1; j++) g->to[j] = g->from[g->k[j].i];
    return NULL;
}

#define GATHER_ROWS_PER_THREAD 16384 /* rows per thread below which fewer threads gather */

/* The n rows sorted by key_before into a new array (the old one is left to the caller): their
 * keys are sorted (a sort of the rows themselves moved hundreds of bytes per step), then the
 * rows gathered in that order on `threads` threads (0: every core). NULL: out of memory. */
static ap_report_row *sort_rows(const ap_report_row *rows, int64_t n, int threads) {
    const int nt = rep_threads(threads, n, GATHER_ROWS_PER_THREAD);
    size_t m = (size_t)(n > 0 ? n : 1);
    row_key *k = ap_malloc(2 * m * sizeof *k);
    ap_report_row *out = ap_malloc(m * sizeof *out);
    gather_part *g = ap_calloc((size_t)nt, sizeof *g);
    void **targ = ap_calloc((size_t)nt, sizeof *targ);
    if (k && out && g && targ) {
        for (int64_t i = 0; i < n; i++) k[i] = key_of(&rows[i], i);
        sort_keys(k, k + m, n);
        for (int t = 0; t < nt; t++) {
            g[t] = (gather_part){rows, out, k, n * t / nt, n * (t + 1) / nt};
            if (t > 0) targ[t - 1] = &g[t];
        }
        /* parts 1.. on helpers (threads.h); those that did not start are gathered below, on
           this thread */
        ap_tasks team;
        int started = ap_tasks_start(&team, nt - 1, gather, targ);
        gather(&g[0]);
        for (int t = 1 + started; t < nt; t++) gather(&g[t]);
        ap_tasks_wait(&team);
    } else {
        ap_free(out);
        out = NULL;
    }
    ap_free(k);
    ap_free(g);
    ap_free(targ);
    return out;
}

/* ---- enumeration ------------------------------------------------------------------------ */

typedef struct {
    ap_report *r;
    ap_report_row *heap; /* the rows kept, in the order met until AP_REPORT_MAX_ROWS were met,
                            then each in the slot of the row it replaced */
    row_key *keys;       /* once AP_REPORT_MAX_ROWS were met: a max-heap on (step, memory,
                            met) of the rows kept, each key naming its row's slot (a sift
                            moves 32-byte keys, not 300-byte rows) */
    int64_t n, cap;
    int heaped;
    int oom;
} collect_state;

/* Sift keys[i] down the max-heap of cs->n keys. */
static void sift_down(collect_state *cs, int64_t i) {
    row_key *h = cs->keys;
    for (;;) {
        int64_t l = 2 * i + 1, rr = l + 1, m = i;
        if (l < cs->n && key_before(&h[m], &h[l])) m = l;
        if (rr < cs->n && key_before(&h[m], &h[rr])) m = rr;
        if (m == i) return;
        row_key t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Keep row, the met-th feasible plan met: appended while fewer than AP_REPORT_MAX_ROWS were
 * kept (the sort at the end orders them), then in place of the slowest kept when it ranks
 * before it. */
static void heap_push(collect_state *cs, const ap_report_row *row, int64_t met) {
    if (cs->n == AP_REPORT_MAX_ROWS) {
        if (!cs->heaped) {
            cs->keys = ap_malloc((size_t)cs->n * sizeof *cs->keys);
            if (!cs->keys) {
                cs->oom = 1;
                return;
            }
            for (int64_t i = 0; i < cs->n; i++) cs->keys[i] = key_of(&cs->heap[i], i);
            for (int64_t i = cs->n / 2 - 1; i >= 0; i--) sift_down(cs, i);
            cs->heaped = 1;
        }
        row_key k = key_of(row, cs->keys[0].i);
        k.met = met;
        if (!key_before(&k, &cs->keys[0])) return;
        cs->heap[k.i] = *row;
        cs->heap[k.i].met = met;
        cs->keys[0] = k;
        sift_down(cs, 0);
        return;
    }
    if (cs->n == cs->cap) {
        int64_t cap = cs->cap ? cs->cap * 2 : 4096;
        if (cap > AP_REPORT_MAX_ROWS) cap = AP_REPORT_MAX_ROWS;
        ap_report_row *q = ap_realloc(cs->heap, (size_t)cap * sizeof *q);
        if (!q) {
            cs->oom = 1;
            return;
        }
        cs->heap = q;
        cs->cap = cap;
    }
    cs->heap[cs->n] = *row;
    cs->heap[cs->n++].met = met;
}

/* A fitting estimate's row (on a search thread) and its place in the heap (in the search's
 * order, ap_search_opts.visit_fold): the rows are those a serial walk would keep */
static int collect_keep(const void *ctx, const ap_estimate *e, void *rec) {
    (void)ctx;
    if (!e->fits) return 0;
    ap_report_row_from_estimate(e, rec);
    return 1;
}

static void collect_fold(void *ctx, const void *rec) {
    collect_state *cs = ctx;
    if (cs->oom) return;
    heap_push(cs, rec, cs->r->fit++);
}

/* The search's own enumeration, unpruned, with the visitor in `v` (so the scatter and
 * plans.csv show exactly the space the ranking came from), ranking top_k plans with the
 * re-split `resplit`; *r is the search's answer (the caller frees it). Unpruned, the ranking is
 * the pruned one's whenever a plan fits: the pruning skips only plans that cannot fit
 * (search.c). */
static ap_status walk_all(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                          int top_k, int resplit, int64_t max_evals, const ap_search_opts *v,
                          ap_search_result *r, ap_err *err) {
    ap_search_opts so = *o;
    so.prune = 0;
    so.top_k = top_k;
    so.resplit = resplit;
    so.visit = v->visit;
    so.visit_ctx = v->visit_ctx;
    so.visit_keep = v->visit_keep;
    so.visit_fold = v->visit_fold;
    so.visit_rec_size = v->visit_rec_size;
    so.max_evals = max_evals;
    return ap_search(m, c, &so, r, err);
}

ap_status ap_report_each_plan(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                              int64_t max_evals, void (*visit)(void *, const ap_estimate *),
                              void *ctx, int64_t *evaluated, int *capped, ap_err *err) {
    ap_search_result r;
    *evaluated = 0;
    *capped = 0;
    ap_search_opts v = {.visit = visit, .visit_ctx = ctx};
    ap_status st = walk_all(m, c, o, 1, o->resplit, max_evals, &v, &r, err);
    if (st != AP_OK) return st;
    *evaluated = r.evaluated;
    *capped = r.capped;
    ap_search_result_free(&r);
    return AP_OK;
}

ap_status ap_report_enumerate_ranked(const ap_model *m, const ap_cluster *c,
                                     const ap_search_opts *so, int top_k, int resplit,
                                     ap_report *r, ap_search_result *ranked, ap_err *err) {
    collect_state cs = {r, NULL, NULL, 0, 0, 0, 0};
    ap_free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
    r->fit = 0;
    r->evaluated = 0;
    r->eval_capped = 0;
    ap_search_result res;
    ap_search_opts v = {.visit_keep = collect_keep, .visit_fold = collect_fold,
                        .visit_rec_size = sizeof(ap_report_row), .visit_ctx = &cs};
    ap_status st = walk_all(m, c, so, top_k, resplit, AP_REPORT_MAX_EVALS, &v, &res, err);
    if (st == AP_OK) {
        r->evaluated = res.evaluated;
        r->eval_capped = res.capped;
        if (ranked) *ranked = res;
        else ap_search_result_free(&res);
        if (cs.oom) {
            if (ranked) ap_search_result_free(ranked);
            st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plan rows");
        }
    }
    ap_free(cs.keys);
    if (st != AP_OK) {
        ap_free(cs.heap);
        return st;
    }
    if (cs.n > 1) {
        ap_report_row *sorted = sort_rows(cs.heap, cs.n, so->threads);
        ap_free(cs.heap);
        cs.heap = sorted;
        if (!sorted) {
            if (ranked) ap_search_result_free(ranked);
            return ap_err_set(err, AP_ERR_NOMEM, "out of memory for plan rows");
        }
    }
    r->rows = cs.heap;
    r->nrows = cs.n;
    return AP_OK;
}

ap_status ap_report_enumerate(const ap_model *m, const ap_cluster *c, const ap_search_opts *so,
                              ap_report *r, ap_err *err) {
    return ap_report_enumerate_ranked(m, c, so, 1, so->resplit, r, NULL, err);
}

int ap_report_pick_best(const ap_report *r) {
    /* the rule `plan` ranks by (search.h "Ties"): of the fitting strategies within the validated
       time error of the fastest, the simplest (ap_estimate_complication), the faster when equal */
    int fastest = -1, best = -1, best_cx = 0;
    for (int i = 0; i < r->nstrat; i++)
        if (r->strat[i].status == AP_REPORT_OK &&
            (fastest < 0 || ap_estimate_better(&r->strat[i].est, &r->strat[fastest].est)))
            fastest = i;
    if (fastest < 0) return -1;
    double lim = r->strat[fastest].est.time.step_s * (1 + AP_VALIDATED_TIME_ERROR);
    int64_t short_seq = r->model ? ap_cp_short_seq(r->model) : 0;
    for (int i = 0; i < r->nstrat; i++) {
        const ap_estimate *e = &r->strat[i].est;
        if (r->strat[i].status != AP_REPORT_OK || !(e->time.step_s <= lim)) continue;
        int cx = ap_estimate_complication(e, short_seq);
        if (best < 0 || cx < best_cx ||
            (cx == best_cx && ap_estimate_better(e, &r->strat[best].est)))
            best = i, best_cx = cx;
    }
    return best;
}

void ap_report_free(ap_report *r) {
    ap_free(r->strat);
    ap_free(r->rows);
    ap_free(r->sweep);
    ap_sim_free(r->sim);
    r->strat = NULL;
    r->rows = NULL;
    r->sweep = NULL;
    r->sim = NULL;
    r->nsweep = 0;
    r->nstrat = 0;
    r->nrows = 0;
}

/* ---- the parts of a step and of memory --------------------------------------------------- */

#define ROWF(f) offsetof(ap_report_row, f)
const rep_part rep_time_parts[REP_NTIME] = {
    {"compute_s", "compute", "#0072B2", 0, ROWF(compute_s)},
    {"recompute_s", "recompute", "#56B4E9", 0, ROWF(recompute_s)},
    {"tp_comm_s", "TP comm", "#009E73", 0, ROWF(tp_comm_s)},
    {"cp_comm_s", "CP comm", "#F0E442", 0, ROWF(cp_comm_s)},
    {"ep_comm_s", "EP comm", "#CC79A7", 0, ROWF(ep_comm_s)},
    {"pp_comm_s", "PP comm", "#D55E00", 0, ROWF(pp_comm_s)},
    {"dp_comm_s", "DP comm", "#E69F00", 0, ROWF(dp_comm_s)},
    {"bubble_s", "pipeline bubble", "#000000", 0, ROWF(bubble_s)},
    {"offload_s", "offload", "#0072B2", 1, ROWF(offload_s)},
    {"optimizer_s", "optimizer", "#D55E00", 1, ROWF(optimizer_s)},
    {"overhead_s", "fixed overhead", "#009E73", 1, ROWF(overhead_s)},
};

const rep_part rep_mem_parts[REP_NMEM] = {
    {"params_bytes", "parameters", "#0072B2", 0, ROWF(params_bytes)},
    {"grads_bytes", "gradients", "#56B4E9", 0, ROWF(grads_bytes)},
    {"optimizer_bytes", "optimizer", "#009E73", 0, ROWF(optimizer_bytes)},
    {"activations_bytes", "activations", "#E69F00", 0, ROWF(activations_bytes)},
    {"other_bytes", "other", "#CC79A7", 0, ROWF(other_bytes)},
    {NULL, "allocator & runtime", "#F0E442", 1, 0}, /* device peak minus the five above */
};

double rep_rowv(const ap_report_row *r, size_t off) {
    return *(const double *)((const char *)r + off);
}

double rep_mem_part(const ap_report_row *r, int i) {
    if (rep_mem_parts[i].key) return rep_rowv(r, rep_mem_parts[i].off);
    double rest = r->device_peak_bytes;
    for (int k = 0; k < REP_NMEM - 1; k++) rest -= rep_rowv(r, rep_mem_parts[k].off);
    return rest > 0 ? rest : 0;
}

/* largest exposed part; skip_compute = 1: the largest other than compute */
static int largest_part(const ap_report_row *r, int skip_compute) {
    int best = skip_compute ? 1 : 0;
    for (int i = best + 1; i < REP_NTIME; i++)
        if (rep_rowv(r, rep_time_parts[i].off) > rep_rowv(r, rep_time_parts[best].off)) best = i;
    return best;
}

double rep_overshoot_bytes(const ap_report_row *r) {
    return r->device_peak_bytes + r->headroom_bytes - r->capacity_bytes;
}


static const char *status_text(const ap_report_strategy *s) {
    return s->status == AP_REPORT_OK ? "yes" : s->status == AP_REPORT_NOFIT ? "no" : "illegal";
}

/* ---- explanations (shared by HTML and Markdown) ------------------------------------------ */

typedef struct {
    char text[2048];
    size_t n;
} line_buf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void lb_add(line_buf *l, const char *fmt, ...) {
    if (l->n + 1 >= sizeof l->text) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->text + l->n, sizeof l->text - l->n, fmt, ap);
    va_end(ap);
    if (k > 0) l->n += (size_t)k < sizeof l->text - l->n ? (size_t)k : sizeof l->text - l->n - 1;
}

/* Why the best plan beats strategy i: one sentence, numbers as "field value unit". */
static void explain(const ap_report *r, int i, line_buf *out) {
    const ap_report_strategy *s = &r->strat[i];
    char a[32], b[32], c[32], d[32];
    out->text[0] = '\0';
    out->n = 0;
#define ADD(...) lb_add(out, __VA_ARGS__)
    if (s->status == AP_REPORT_ILLEGAL) {
        ADD("not legal: %s.", s->reason);
        return;
    }
    ap_report_row o, bst;
    ap_report_row_from_estimate(&s->est, &o);
    if (s->status == AP_REPORT_NOFIT) {
        if (!o.host_fits && rep_overshoot_bytes(&o) <= 0)
            ADD("does not fit: host_bytes_per_node %s GiB of host_capacity_bytes %s GiB.",
                rep_fmt_gib(o.host_bytes_per_node, a, sizeof a),
                rep_fmt_gib(o.host_capacity_bytes, b, sizeof b));
        else
            ADD("does not fit: device_peak_bytes %s GiB + headroom_bytes %s GiB > capacity_bytes "
                "%s GiB, over by %s GiB.", rep_fmt_gib(o.device_peak_bytes, a, sizeof a),
                rep_fmt_gib(o.headroom_bytes, b, sizeof b), rep_fmt_gib(o.capacity_bytes, c, sizeof c),
                rep_fmt_gib(rep_overshoot_bytes(&o), d, sizeof d));
        return;
    }
    if (r->best < 0) return;
    ap_report_row_from_estimate(&r->strat[r->best].est, &bst);
    double rel = (o.step_s - bst.step_s) / bst.step_s;
    if (fabs(rel) < AP_VALIDATED_TIME_ERROR) {
        ADD("a tie: step_s %s s vs %s s differ by less than the validated time error (%.0f%%)",
            rep_fmt_s(o.step_s, a, sizeof a), rep_fmt_s(bst.step_s, b, sizeof b),
            100 * AP_VALIDATED_TIME_ERROR);
        if (o.device_peak_bytes != bst.device_peak_bytes)
            ADD("; device_peak_bytes %s GiB vs %s GiB", rep_fmt_gib(o.device_peak_bytes, a, sizeof a),
                rep_fmt_gib(bst.device_peak_bytes, b, sizeof b));
        ADD(".");
        return;
    }
    ADD("slower: step_s %s s vs %s s", rep_fmt_s(o.step_s, a, sizeof a), rep_fmt_s(bst.step_s, b, sizeof b));
    /* the parts that grew most, largest first (at most three) */
    int used[REP_NTIME] = {0};
    int shown = 0;
    for (int n = 0; n < 3; n++) {
        int pick = -1;
        double pd = 0;
        for (int j = 0; j < REP_NTIME; j++) {
            double dlt = rep_rowv(&o, rep_time_parts[j].off) - rep_rowv(&bst, rep_time_parts[j].off);
            if (!used[j] && dlt > pd) {
                pd = dlt;
                pick = j;
            }
        }
        if (pick < 0 || pd < 1e-3 * bst.step_s) break;
        used[pick] = 1;
        ADD("%s %s %s s vs %s s", shown ? "," : "; larger parts:", rep_time_parts[pick].key,
            rep_fmt_s(rep_rowv(&o, rep_time_parts[pick].off), a, sizeof a),
            rep_fmt_s(rep_rowv(&bst, rep_time_parts[pick].off), b, sizeof b));
        shown++;
    }
    ADD("; tokens_per_s %s vs %s.", rep_fmt_tps(o.tokens_per_s, a, sizeof a),
        rep_fmt_tps(bst.tokens_per_s, b, sizeof b));
#undef ADD
}

static void bottleneck(const ap_report *r, line_buf *out) {
    out->text[0] = '\0';
    out->n = 0;
    if (r->best < 0) return;
    ap_report_row b;
    ap_report_row_from_estimate(&r->strat[r->best].est, &b);
    int big = largest_part(&b, 0), nc = largest_part(&b, 1);
    char x[32], y[32], z[32];
    snprintf(out->text, sizeof out->text,
             "the largest exposed part of %s is %s %s s of step_s %s s; the largest part other "
             "than compute is %s %s s.",
             r->strat[r->best].name, rep_time_parts[big].key,
             rep_fmt_s(rep_rowv(&b, rep_time_parts[big].off), x, sizeof x), rep_fmt_s(b.step_s, y, sizeof y),
             rep_time_parts[nc].key, rep_fmt_s(rep_rowv(&b, rep_time_parts[nc].off), z, sizeof z));
}

/* ---- HTML ------------------------------------------------------------------------------------ */

/* Text colours: contrast with the background >= 4.5:1 (WCAG 2.x) in each scheme; tests/test_report.c
 * recomputes the ratios from these declarations. */
static const char *css =
    ":root{--bg:#ffffff;--fg:#1a1a1a;--muted:#4d4d4d;--grid:#c8c8c8;color-scheme:light dark}\n"
    "@media (prefers-color-scheme: dark){:root{--bg:#121212;--fg:#ededed;--muted:#b8b8b8;"
    "--grid:#4a4a4a}}\n"
    "@media print{:root{--bg:#ffffff;--fg:#000000;--muted:#333333;--grid:#bbbbbb}}\n"
    "body{box-sizing:border-box;background:var(--bg);color:var(--fg);font-family:system-ui,-apple-system,'Segoe UI',"
    "sans-serif;margin:2em auto;padding:0 1em;max-width:1100px;line-height:1.45}\n"
    "table{border-collapse:collapse;margin:1em 0;font-size:0.92em}\n"
    "th,td{border:1px solid var(--grid);padding:3px 5px;text-align:right}\n"
    "th:first-child,td:first-child,td.l{text-align:left}\n"
    "td.l,td:first-child{white-space:nowrap}\n"
    "td.plan{white-space:normal;min-width:11em}\ntd.wrap{white-space:normal;min-width:7em}\n"
    "td code{overflow-wrap:anywhere}\n"
    "caption{text-align:left;color:var(--muted);font-size:0.9em;padding-bottom:3px}\n"
    "th{font-weight:600;font-size:0.9em}\n"
    "code{font-family:ui-monospace,monospace;font-size:0.9em}\n"
    ".note,.muted{color:var(--muted)}\n"
    ".scroll{overflow-x:auto}\n"
    "svg.chart{max-width:100%;height:auto;display:block;margin:1em 0}\n"
    "svg text{fill:var(--fg);font-size:12px;font-family:inherit}\n"
    "svg text.sub,svg text.tick,svg text.na{fill:var(--muted);font-size:11px}\n"
    "svg text.name{font-weight:bold}\n"
    "svg .grid{stroke:var(--grid);stroke-width:1}\n"
    "svg .seg,svg .swatch{stroke:var(--fg);stroke-width:0.5}\n"
    "svg .errband line{stroke:var(--fg);stroke-width:1.5}\n"
    "svg .capacity{stroke:#D55E00;stroke-width:2}\n"
    "svg .usable{stroke:#D55E00;stroke-width:1;stroke-dasharray:3 3}\n"
    "svg .pt{fill:#56B4E9;fill-opacity:0.6}\n"
    "svg .front{fill:none;stroke:#0072B2;stroke-width:2}\n"
    "svg .front-pt{fill:#0072B2}\n"
    "svg .strat circle{fill:none;stroke:var(--fg);stroke-width:2}\n"
    "svg .leader{stroke:var(--fg);stroke-width:0.7}\n"
    "svg text.stratlabel{paint-order:stroke;stroke:var(--bg);stroke-width:3px}\n"
    "svg .offscale{fill:var(--fg)}\n"
    "svg .break{stroke:var(--bg);stroke-width:2;fill:none}\n"
    "svg .axis{stroke:var(--fg);stroke-width:1}\n"
    "svg .sw-line{fill:none;stroke:#0072B2;stroke-width:2}\n"
    "svg .sw-pt{fill:#0072B2;stroke:var(--bg);stroke-width:1}\n"
    "svg .sw-ttt-line{fill:none;stroke:#D55E00;stroke-width:2;stroke-dasharray:6 3}\n"
    "svg .sw-ttt-pt{fill:#D55E00;stroke:var(--bg);stroke-width:1}\n"
    "svg .sim-alloc{fill:none;stroke:#0072B2;stroke-width:1.5}\n"
    "svg .sim-res{fill:none;stroke:#E69F00;stroke-width:2;stroke-dasharray:6 3}\n"
    "svg .sim-peak{fill:none;stroke:var(--fg);stroke-width:2}\n"
    "svg text.series,svg text.peaklabel{font-weight:bold}\n"
    "@media print{svg .pt{fill-opacity:1}}\n";

/* a readable column header; its estimate --json field in the tooltip and a data attribute */
static void th(rbuf *b, const char *text, const char *field) {
    rb_puts(b, "<th title=\"estimate --json: ");
    rb_html(b, field);
    rb_puts(b, "\" data-field=\"");
    rb_html(b, field);
    rb_puts(b, "\">");
    rb_html(b, text);
    rb_puts(b, "</th>");
}

static void html_num_row(rbuf *b, const ap_report *r, int i) {
    const ap_report_strategy *s = &r->strat[i];
    char a[32], lbl[160];
    rb_puts(b, "<tr><td>");
    rb_html(b, s->name);
    rb_puts(b, i == r->best ? " (best)" : "");
    rb_puts(b, "</td>");
    if (s->status == AP_REPORT_ILLEGAL) {
        rb_puts(b, "<td class=\"l\" colspan=\"9\">not legal: ");
        rb_html(b, s->reason);
        rb_puts(b, "</td><td>illegal</td></tr>\n");
        return;
    }
    ap_report_row o;
    ap_report_row_from_estimate(&s->est, &o);
    rb_puts(b, "<td class=\"l plan\">");
    rb_html(b, ap_plan_label(&s->est.plan, lbl, sizeof lbl));
    rb_printf(b, "</td><td class=\"l\">%s</td>", ap_trainer_name(s->est.plan.trainer));
    rb_printf(b, "<td>%s</td>", rep_fmt_s(o.step_s, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_tps(o.tokens_per_s, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_pct(o.mfu, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_gib(o.device_peak_bytes, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_gib(o.capacity_bytes, a, sizeof a));
    int lp = largest_part(&o, 1);
    rb_printf(b, "<td class=\"l wrap\" title=\"time.%s\">%s %s s</td>", rep_time_parts[lp].key,
              rep_time_parts[lp].name,
              rep_fmt_s(rep_rowv(&o, rep_time_parts[lp].off), a, sizeof a));
    rb_printf(b, "<td>%s</td>", s->status == AP_REPORT_OK ? "" : rep_fmt_gib(rep_overshoot_bytes(&o), a, sizeof a));
    rb_printf(b, "<td>%s</td></tr>\n", status_text(s));
}

/* The document head, style sheet, title and the introduction. */
static void html_head(rbuf *b, const ap_report *r) {
    const ap_cluster *c = r->cluster;
    rb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                "<meta name=\"color-scheme\" content=\"light dark\"><title>autoplan compare: ");
    rb_html(b, r->model->name);
    rb_printf(b, "</title>\n<style>\n%s</style></head><body>\n", css);
    rb_puts(b, "<h1>Strategy comparison: ");
    rb_html(b, r->model->name);
    rb_printf(b, " on %d &#215; ", c->gpus);
    rb_html(b, c->gpu.name);
    rb_printf(b, "</h1>\n<p>Trainer %s, global batch %lld sequences &#215; %lld tokens. Times are "
              "predictions of the autoplan cost model %s; the validated time error is %.0f%% "
              "(differences below it are ties). Every number is an <code>autoplan estimate "
              "--json</code> field of that plan; the commands are at the end.</p>\n",
              ap_trainer_name((ap_trainer_id)r->trainer), (long long)r->gbs, (long long)r->seq,
              ap_costmodel_version(), 100 * AP_VALIDATED_TIME_ERROR);
}

/* The compared plans table and each strategy's description. */
static void html_plans(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>Compared plans</h2>\n<div class=\"scroll\"><table id=\"plans\"><thead><tr>"
               "<th>strategy</th><th class=\"l\">plan</th><th class=\"l\">trainer</th>");
    th(b, "step time (s)", "time.step_s");
    th(b, "tokens/s", "throughput.tokens_per_s");
    th(b, "MFU (%)", "throughput.mfu");
    th(b, "peak memory (GiB)", "memory.device_peak_bytes");
    th(b, "capacity (GiB)", "memory.capacity_bytes");
    rb_puts(b, "<th class=\"l\">largest part besides compute</th>");
    th(b, "over capacity by (GiB)",
       "memory.device_peak_bytes + memory.headroom_bytes - memory.capacity_bytes");
    rb_puts(b, "<th>fits</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->nstrat; i++) html_num_row(b, r, i);
    rb_puts(b, "</tbody></table></div>\n<p class=\"note\">Over capacity by = peak memory + "
               "headroom &#8722; capacity (device_peak_bytes + headroom_bytes &#8722; "
               "capacity_bytes), for plans that do not fit. Each header names its <code>estimate "
               "--json</code> field in its tooltip.</p>\n");
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (!s->desc[0] && !s->note[0]) continue;
        rb_puts(b, "<p class=\"note\"><b>");
        rb_html(b, s->name);
        rb_puts(b, "</b>: ");
        rb_html(b, s->desc);
        if (s->note[0]) {
            rb_puts(b, " ");
            rb_html(b, s->note);
        }
        rb_puts(b, "</p>\n");
    }
}

/* How the best strategy is picked (ap_report_pick_best), one sentence into buf. */
static const char *best_rule(char *buf, size_t n) {
    snprintf(buf, n, "Picked as `autoplan plan` ranks: of the strategies that fit within %.0f%% "
             "(the validated time error) of the fastest, the simplest (%s).",
             100 * AP_VALIDATED_TIME_ERROR, ap_tie_rule_text());
    return buf;
}

/* Why the best plan wins: one line per other strategy, then the bottleneck. */
static void html_why(rbuf *b, const ap_report *r) {
    char lbl[160];
    rb_puts(b, "<h2>Why the best plan wins</h2>\n");
    if (r->best < 0) {
        rb_puts(b, "<p>None of the compared strategies fits.</p>\n");
    } else {
        line_buf lb;
        rb_puts(b, "<p>Best: <b>");
        rb_html(b, r->strat[r->best].name);
        rb_puts(b, "</b> (");
        rb_html(b, ap_plan_label(&r->strat[r->best].est.plan, lbl, sizeof lbl));
        char rule[512];
        rb_puts(b, "). ");
        rb_html(b, best_rule(rule, sizeof rule));
        rb_puts(b, "</p>\n<ul id=\"explain\">\n");
        for (int i = 0; i < r->nstrat; i++) {
            if (i == r->best) continue;
            explain(r, i, &lb);
            rb_puts(b, "<li><b>");
            rb_html(b, r->strat[i].name);
            rb_puts(b, "</b>: ");
            rb_html(b, lb.text);
            rb_puts(b, "</li>\n");
        }
        bottleneck(r, &lb);
        rb_puts(b, "</ul>\n<p id=\"bottleneck\">Bottleneck: ");
        rb_html(b, lb.text);
        rb_puts(b, "</p>\n");
    }
}

/* Chart 1 and its table of exposed time parts. */
static void html_time(rbuf *b, const ap_report *r) {
    char a[32];
    rb_puts(b, "<h2>1. Step time per strategy</h2>\n<p>Stacked exposed parts of one step, in "
                "the legend's order; the whiskers mark &#177;");
    rb_printf(b, "%.0f%% (the validated time error).</p>\n", 100 * AP_VALIDATED_TIME_ERROR);
    rep_chart_time(b, r);
    rb_puts(b, "<div class=\"scroll\"><table id=\"time-parts\"><caption>Exposed time per "
               "step by part (s)</caption><thead><tr><th>strategy</th>");
    for (int j = 0; j < REP_NTIME; j++) {
        char field[64];
        snprintf(field, sizeof field, "time.%s", rep_time_parts[j].key);
        th(b, rep_time_parts[j].name, field);
    }
    th(b, "step", "time.step_s");
    rb_puts(b, "</tr></thead><tbody>\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_puts(b, "<tr><td>");
        rb_html(b, r->strat[i].name);
        rb_puts(b, "</td>");
        for (int j = 0; j < REP_NTIME; j++)
            rb_printf(b, "<td>%s</td>", rep_fmt_s(rep_rowv(&o, rep_time_parts[j].off), a, sizeof a));
        rb_printf(b, "<td>%s</td></tr>\n", rep_fmt_s(o.step_s, a, sizeof a));
    }
    rb_puts(b, "</tbody></table></div>\n");
}

/* Chart 2. */
static void html_memory(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>2. Device memory per GPU (worst stage)</h2>\n<p>Bars stack the worst "
                "pipeline stage's memory; \"allocator &amp; runtime\" is device_peak_bytes minus "
                "the five allocated categories (allocator rounding, CUDA context, workspaces). "
                "The solid line is the capacity, the dotted line capacity minus headroom; "
                "plans over it are outlined and say by how much.</p>\n");
    rep_chart_memory(b, r);
}

/* Chart 3 with the size of the space it shows. */
static void html_scatter(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>3. Memory against throughput</h2>\n");
    rb_printf(b, "<p>The search space of the %s trainer (as <code>autoplan plan</code> searches "
              "it): %lld plans evaluated, %lld feasible", ap_trainer_name((ap_trainer_id)r->trainer),
              (long long)r->evaluated, (long long)r->fit);
    if (r->fit > r->nrows) rb_printf(b, " (the %lld fastest kept)", (long long)r->nrows);
    if (r->eval_capped)
        rb_printf(b, "; the enumeration stopped at its bound of %d evaluations",
                  AP_REPORT_MAX_EVALS);
    rb_printf(b, ". Shown: the Pareto front (least memory for its throughput) and at most %d "
              "other plans sampled evenly in step-time order.</p>\n", AP_REPORT_MAX_POINTS);
    rep_chart_scatter(b, r);
}

/* The estimate command of each strategy, and the document end. */
static void html_reproduce(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>Reproduce</h2>\n<table id=\"reproduce\"><thead><tr><th>strategy</th>"
                "<th>command</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        rb_puts(b, "<tr><td>");
        rb_html(b, r->strat[i].name);
        rb_puts(b, "</td><td class=\"l wrap\"><code>autoplan estimate ");
        rb_html(b, r->strat[i].estimate_args);
        rb_puts(b, "</code></td></tr>\n");
    }
    rb_puts(b, "</tbody></table>\n<p class=\"note\">plans.csv lists the feasible plans with every "
                "scalar field of <code>estimate --json</code>.</p>\n</body></html>\n");
}

ap_status ap_report_html(const ap_report *r, char **out, size_t *len, ap_err *err) {
    rbuf b = {0};
    html_head(&b, r);
    html_plans(&b, r);
    html_why(&b, r);
    html_time(&b, r);
    html_memory(&b, r);
    html_scatter(&b, r);
    rep_sweep_html(&b, r);
    rep_sim_html(&b, r);
    html_reproduce(&b, r);
    return rb_finish(&b, out, len, err);
}

/* ---- Markdown -------------------------------------------------------------------------------- */

ap_status ap_report_markdown(const ap_report *r, char **out, size_t *len, ap_err *err) {
    rbuf b = {0};
    char a[32], lbl[160];
    rb_puts(&b, "# Strategy comparison: ");
    rb_md(&b, r->model->name);
    rb_printf(&b, " on %d x %s\n\n", r->cluster->gpus, r->cluster->gpu.name);
    rb_printf(&b, "Trainer %s, global batch %lld sequences x %lld tokens, cost model %s. Validated "
              "time error %.0f%%: smaller differences are ties. Every number below is an "
              "`autoplan estimate --json` field of that plan (commands at the end), except the "
              "overshoot = device_peak_bytes + headroom_bytes - capacity_bytes.\n\n",
              ap_trainer_name((ap_trainer_id)r->trainer), (long long)r->gbs, (long long)r->seq,
              ap_costmodel_version(), 100 * AP_VALIDATED_TIME_ERROR);
    rb_puts(&b, "## Compared plans\n\n| strategy | plan | trainer | step_s (s) | tokens_per_s | "
                "mfu (%) | device_peak_bytes (GiB) | capacity_bytes (GiB) | largest non-compute "
                "part | overshoot (GiB) | fits |\n|---|---|---|--:|--:|--:|--:|--:|---|--:|---|\n");
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        rb_puts(&b, "| ");
        rb_md(&b, s->name);
        if (s->status == AP_REPORT_ILLEGAL) {
            rb_puts(&b, " | not legal: ");
            rb_md(&b, s->reason);
            rb_puts(&b, " | | | | | | | | | illegal |\n");
            continue;
        }
        ap_report_row o;
        ap_report_row_from_estimate(&s->est, &o);
        rb_printf(&b, " | %s | %s", ap_plan_label(&s->est.plan, lbl, sizeof lbl),
                  ap_trainer_name(s->est.plan.trainer));
        rb_printf(&b, " | %s", rep_fmt_s(o.step_s, a, sizeof a));
        rb_printf(&b, " | %s", rep_fmt_tps(o.tokens_per_s, a, sizeof a));
        rb_printf(&b, " | %s", rep_fmt_pct(o.mfu, a, sizeof a));
        rb_printf(&b, " | %s", rep_fmt_gib(o.device_peak_bytes, a, sizeof a));
        rb_printf(&b, " | %s", rep_fmt_gib(o.capacity_bytes, a, sizeof a));
        int lp = largest_part(&o, 1);
        rb_printf(&b, " | %s %s s", rep_time_parts[lp].key,
                  rep_fmt_s(rep_rowv(&o, rep_time_parts[lp].off), a, sizeof a));
        rb_printf(&b, " | %s", s->status == AP_REPORT_OK ? "" : rep_fmt_gib(rep_overshoot_bytes(&o), a, sizeof a));
        rb_printf(&b, " | %s |\n", status_text(s));
    }
    rb_puts(&b, "\n");
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (!s->desc[0] && !s->note[0]) continue;
        rb_puts(&b, "- **");
        rb_md(&b, s->name);
        rb_printf(&b, "**: %s%s%s\n", s->desc, s->note[0] ? " " : "", s->note);
    }
    rb_puts(&b, "\n## Step time parts (s)\n\n| strategy |");
    for (int j = 0; j < REP_NTIME; j++) rb_printf(&b, " %s |", rep_time_parts[j].key);
    rb_puts(&b, " step_s |\n|---|");
    for (int j = 0; j <= REP_NTIME; j++) rb_puts(&b, "--:|");
    rb_puts(&b, "\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_printf(&b, "| %s |", r->strat[i].name);
        for (int j = 0; j < REP_NTIME; j++) rb_printf(&b, " %s |", rep_fmt_s(rep_rowv(&o, rep_time_parts[j].off), a, sizeof a));
        rb_printf(&b, " %s |\n", rep_fmt_s(o.step_s, a, sizeof a));
    }
    rb_puts(&b, "\n## Memory of the worst stage (GiB)\n\n| strategy |");
    for (int j = 0; j < REP_NMEM - 1; j++) rb_printf(&b, " %s |", rep_mem_parts[j].key);
    rb_puts(&b, " device_peak_bytes | headroom_bytes | capacity_bytes |\n|---|");
    for (int j = 0; j < REP_NMEM + 2; j++) rb_puts(&b, "--:|");
    rb_puts(&b, "\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_printf(&b, "| %s |", r->strat[i].name);
        for (int j = 0; j < REP_NMEM - 1; j++) rb_printf(&b, " %s |", rep_fmt_gib(rep_rowv(&o, rep_mem_parts[j].off), a, sizeof a));
        rb_printf(&b, " %s |", rep_fmt_gib(o.device_peak_bytes, a, sizeof a));
        rb_printf(&b, " %s |", rep_fmt_gib(o.headroom_bytes, a, sizeof a));
        rb_printf(&b, " %s |\n", rep_fmt_gib(o.capacity_bytes, a, sizeof a));
    }
    rb_puts(&b, "\n## Why the best plan wins\n\n");
    if (r->best < 0) {
        rb_puts(&b, "None of the compared strategies fits.\n");
    } else {
        line_buf lb;
        rb_printf(&b, "Best: **%s** (%s). ", r->strat[r->best].name,
                  ap_plan_label(&r->strat[r->best].est.plan, lbl, sizeof lbl));
        char rule[512];
        rb_printf(&b, "%s\n\n", best_rule(rule, sizeof rule));
        for (int i = 0; i < r->nstrat; i++) {
            if (i == r->best) continue;
            explain(r, i, &lb);
            rb_printf(&b, "- vs **%s**: %s\n", r->strat[i].name, lb.text);
        }
        bottleneck(r, &lb);
        rb_printf(&b, "\nBottleneck: %s\n", lb.text);
    }
    rb_printf(&b, "\n## Evaluated plans\n\n%lld plans evaluated, %lld feasible", (long long)r->evaluated,
              (long long)r->fit);
    rb_printf(&b, " (the search space of the %s trainer)", ap_trainer_name((ap_trainer_id)r->trainer));
    if (r->fit > r->nrows) rb_printf(&b, " (the %lld fastest kept)", (long long)r->nrows);
    if (r->eval_capped)
        rb_printf(&b, "; the enumeration stopped at its bound of %d evaluations", AP_REPORT_MAX_EVALS);
    rb_printf(&b, "; plans.csv has %lld rows.\n", (long long)r->nrows);
    rep_sweep_md(&b, r);
    rep_sim_md(&b, r);
    rb_puts(&b, "\n## Reproduce\n\n| strategy | command |\n|---|---|\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        rb_puts(&b, "| ");
        rb_md(&b, r->strat[i].name);
        rb_puts(&b, " | ");
        rb_md_command(&b, "estimate", r->strat[i].estimate_args);
        rb_puts(&b, " |\n");
    }
    return rb_finish(&b, out, len, err);
}
