/*
 * report.c - the data behind `autoplan compare` and its three renderers (report.h).
 *
 * Structure: a bounded enumeration of the search space (ap_search itself, unpruned, walking
 * the plan space of planner/space.c and visiting every legal estimated plan), compact rows for the
 * feasible plans, then report.html (inline SVG charts, CSS for light, dark and print schemes,
 * no scripts and nothing fetched), report.md and plans.csv, all built in one growable buffer.
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
 * Charts 4 (GPU-count sweep) and 5 (memory over one iteration from the simulator) are in
 * output/report_sweep.c and output/report_simchart.c, sharing the buffer and formats through
 * report_int.h. Not here: choosing the strategies (cli/cmd_compare.c).
 */
#include "autoplan/planio.h"
#include "autoplan/report.h"
#include "report_int.h"
#include "autoplan/text.h"

#include <math.h>
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

/* Every column of the estimate's field table (planio.h), stored by its kind. */
void ap_report_row_from_estimate(const ap_estimate *e, ap_report_row *r) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < ap_estimate_field_count(); i++) {
        const ap_estimate_field *f = ap_estimate_field_at(i);
        if (f->row_off == AP_FIELD_NO_ROW) continue;
        void *dst = (char *)r + f->row_off;
        double v = ap_estimate_field_value(f, e);
        if (f->kind == AP_FIELD_REAL) *(double *)dst = v;
        else if (f->kind == AP_FIELD_I64) *(int64_t *)dst = (int64_t)v;
        else *(int *)dst = (int)v;
    }
}

static void row_plan(const ap_report_row *r, ap_plan *p) {
    ap_plan_init(p);
    p->trainer = (ap_trainer_id)r->trainer;
    p->tp = r->tp; p->pp = r->pp; p->dp = r->dp; p->cp = r->cp; p->ep = r->ep; p->etp = r->etp;
    p->vp = r->vp; p->zero = r->zero; p->recompute = (ap_recompute)r->recompute;
    p->recompute_layers = r->recompute_layers; p->sp = r->sp;
    p->overlap_grad = p->overlap_param = r->overlap;
    p->dtype = (ap_dtype)r->dtype; p->flash_attn = r->flash_attn;
    p->mbs = r->mbs; p->gbs = r->gbs; p->grad_accum = r->grad_accum; p->seq = r->seq;
    p->offload_optimizer = r->offload_optimizer; p->offload_params = r->offload_params;
}

/* 1 if a ranks before b: lower step time, then lower device memory (as ap_search ranks) */
static int row_before(const ap_report_row *a, const ap_report_row *b) {
    if (a->step_s != b->step_s) return a->step_s < b->step_s;
    return a->device_peak_bytes < b->device_peak_bytes;
}

static int row_cmp(const void *x, const void *y) {
    const ap_report_row *a = x, *b = y;
    if (row_before(a, b)) return -1;
    if (row_before(b, a)) return 1;
    return 0;
}

/* ---- enumeration ------------------------------------------------------------------------ */

typedef struct {
    ap_report *r;
    ap_report_row *heap; /* max-heap on (step, memory) while collecting, capped */
    int64_t n, cap;
    int oom;
} collect_state;

static void heap_push(collect_state *cs, const ap_report_row *row) {
    if (cs->n == AP_REPORT_MAX_ROWS) {
        /* full: replace the slowest when this one ranks before it */
        if (!row_before(row, &cs->heap[0])) return;
        int64_t i = 0;
        cs->heap[0] = *row;
        for (;;) {
            int64_t l = 2 * i + 1, rr = l + 1, m = i;
            if (l < cs->n && row_before(&cs->heap[m], &cs->heap[l])) m = l;
            if (rr < cs->n && row_before(&cs->heap[m], &cs->heap[rr])) m = rr;
            if (m == i) break;
            ap_report_row t = cs->heap[i];
            cs->heap[i] = cs->heap[m];
            cs->heap[m] = t;
            i = m;
        }
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
    int64_t i = cs->n++;
    cs->heap[i] = *row;
    while (i > 0) {
        int64_t par = (i - 1) / 2;
        if (!row_before(&cs->heap[par], &cs->heap[i])) break;
        ap_report_row t = cs->heap[i];
        cs->heap[i] = cs->heap[par];
        cs->heap[par] = t;
        i = par;
    }
}

static void collect_visit(void *ctx, const ap_estimate *e) {
    collect_state *cs = ctx;
    if (!e->fits || cs->oom) return;
    ap_report_row row;
    ap_report_row_from_estimate(e, &row);
    cs->r->fit++;
    heap_push(cs, &row);
}

ap_status ap_report_each_plan(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                              int64_t max_evals, void (*visit)(void *, const ap_estimate *),
                              void *ctx, int64_t *evaluated, int *capped, ap_err *err) {
    /* the search's own enumeration, unpruned, with a visitor: the scatter and plans.csv show
     * exactly the space the ranking came from */
    ap_search_opts so = *o;
    so.prune = 0;
    so.top_k = 1;
    so.visit = visit;
    so.visit_ctx = ctx;
    so.max_evals = max_evals;
    ap_search_result r;
    *evaluated = 0;
    *capped = 0;
    ap_status st = ap_search(m, c, &so, &r, err);
    if (st != AP_OK) return st;
    *evaluated = r.evaluated;
    *capped = r.capped;
    ap_search_result_free(&r);
    return AP_OK;
}

ap_status ap_report_enumerate(const ap_model *m, const ap_cluster *c, const ap_search_opts *so,
                              ap_report *r, ap_err *err) {
    collect_state cs = {r, NULL, 0, 0, 0};
    ap_free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
    r->fit = 0;
    ap_status st = ap_report_each_plan(m, c, so, AP_REPORT_MAX_EVALS, collect_visit, &cs,
                                       &r->evaluated, &r->eval_capped, err);
    if (st == AP_OK && cs.oom) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plan rows");
    if (st != AP_OK) {
        ap_free(cs.heap);
        return st;
    }
    if (cs.n > 0) qsort(cs.heap, (size_t)cs.n, sizeof *cs.heap, row_cmp);
    r->rows = cs.heap;
    r->nrows = cs.n;
    return AP_OK;
}

int ap_report_pick_best(const ap_report *r) {
    int best = -1;
    ap_report_row a, b;
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status != AP_REPORT_OK) continue;
        if (best < 0) {
            best = i;
            continue;
        }
        ap_report_row_from_estimate(&r->strat[i].est, &a);
        ap_report_row_from_estimate(&r->strat[best].est, &b);
        if (row_before(&a, &b)) best = i;
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

typedef struct {
    const char *key;   /* estimate --json field (time.* or memory.*) */
    const char *name;  /* legend text */
    const char *color; /* Okabe-Ito */
    int hatch;         /* drawn with diagonal hatching, so no two parts look alike */
    size_t off;        /* offset in ap_report_row */
} part_def;

#define ROWF(f) offsetof(ap_report_row, f)
static const part_def time_parts[] = {
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
#define NTIME ((int)(sizeof time_parts / sizeof time_parts[0]))

static const part_def mem_parts[] = {
    {"params_bytes", "parameters", "#0072B2", 0, ROWF(params_bytes)},
    {"grads_bytes", "gradients", "#56B4E9", 0, ROWF(grads_bytes)},
    {"optimizer_bytes", "optimizer", "#009E73", 0, ROWF(optimizer_bytes)},
    {"activations_bytes", "activations", "#E69F00", 0, ROWF(activations_bytes)},
    {"other_bytes", "other", "#CC79A7", 0, ROWF(other_bytes)},
    {NULL, "allocator & runtime", "#F0E442", 1, 0}, /* device peak minus the five above */
};
#define NMEM ((int)(sizeof mem_parts / sizeof mem_parts[0]))

static double rowv(const ap_report_row *r, size_t off) {
    return *(const double *)((const char *)r + off);
}

static double mem_part(const ap_report_row *r, int i) {
    if (mem_parts[i].key) return rowv(r, mem_parts[i].off);
    double rest = r->device_peak_bytes;
    for (int k = 0; k < NMEM - 1; k++) rest -= rowv(r, mem_parts[k].off);
    return rest > 0 ? rest : 0;
}

/* largest exposed part; skip_compute = 1: the largest other than compute */
static int largest_part(const ap_report_row *r, int skip_compute) {
    int best = skip_compute ? 1 : 0;
    for (int i = best + 1; i < NTIME; i++)
        if (rowv(r, time_parts[i].off) > rowv(r, time_parts[best].off)) best = i;
    return best;
}

static double overshoot_bytes(const ap_report_row *r) {
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
        if (!o.host_fits && overshoot_bytes(&o) <= 0)
            ADD("does not fit: host_bytes_per_node %s GiB of host_capacity_bytes %s GiB.",
                rep_fmt_gib(o.host_bytes_per_node, a, sizeof a),
                rep_fmt_gib(o.host_capacity_bytes, b, sizeof b));
        else
            ADD("does not fit: device_peak_bytes %s GiB + headroom_bytes %s GiB > capacity_bytes "
                "%s GiB, over by %s GiB.", rep_fmt_gib(o.device_peak_bytes, a, sizeof a),
                rep_fmt_gib(o.headroom_bytes, b, sizeof b), rep_fmt_gib(o.capacity_bytes, c, sizeof c),
                rep_fmt_gib(overshoot_bytes(&o), d, sizeof d));
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
    int used[NTIME] = {0};
    int shown = 0;
    for (int n = 0; n < 3; n++) {
        int pick = -1;
        double pd = 0;
        for (int j = 0; j < NTIME; j++) {
            double dlt = rowv(&o, time_parts[j].off) - rowv(&bst, time_parts[j].off);
            if (!used[j] && dlt > pd) {
                pd = dlt;
                pick = j;
            }
        }
        if (pick < 0 || pd < 1e-3 * bst.step_s) break;
        used[pick] = 1;
        ADD("%s %s %s s vs %s s", shown ? "," : "; larger parts:", time_parts[pick].key,
            rep_fmt_s(rowv(&o, time_parts[pick].off), a, sizeof a),
            rep_fmt_s(rowv(&bst, time_parts[pick].off), b, sizeof b));
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
             r->strat[r->best].name, time_parts[big].key,
             rep_fmt_s(rowv(&b, time_parts[big].off), x, sizeof x), rep_fmt_s(b.step_s, y, sizeof y),
             time_parts[nc].key, rep_fmt_s(rowv(&b, time_parts[nc].off), z, sizeof z));
}

/* ---- SVG helpers --------------------------------------------------------------------------- */

/* A "nice" axis: step in {1, 2, 5} x 10^k, about 5 ticks up to at least hi. */
double rep_nice_step(double hi) {
    if (!(hi > 0)) return 1;
    double raw = hi / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void svg_patterns(rbuf *b, const char *prefix, const part_def *parts, int n) {
    rb_puts(b, "<defs>");
    for (int i = 0; i < n; i++) {
        if (!parts[i].hatch) continue;
        rb_printf(b, "<pattern id=\"%s-h%d\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                  "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#FFFFFF\"/>"
                  "<rect width=\"3\" height=\"6\" fill=\"%s\"/></pattern>", prefix, i, parts[i].color);
    }
    rb_puts(b, "</defs>");
}

static void svg_fill(rbuf *b, const char *prefix, const part_def *parts, int i) {
    if (parts[i].hatch) rb_printf(b, "url(#%s-h%d)", prefix, i);
    else rb_puts(b, parts[i].color);
}

/* legend: one swatch and name per part, in stacking order; returns the height used */
static double svg_legend(rbuf *b, const char *prefix, const part_def *parts, int n, double x0,
                         double y0, double width) {
    double x = x0, y = y0;
    rb_puts(b, "<g class=\"legend\">");
    for (int i = 0; i < n; i++) {
        double w = 26 + 7.0 * (double)strlen(parts[i].name);
        if (x + w > x0 + width) {
            x = x0;
            y += 18;
        }
        rb_printf(b, "<g class=\"legend-item\"><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
                  "class=\"swatch\" fill=\"", x, y);
        svg_fill(b, prefix, parts, i);
        rb_printf(b, "\"/><text x=\"%.1f\" y=\"%.1f\">%d %s</text></g>", x + 16, y + 10, i + 1,
                  parts[i].name);
        x += w + 14;
    }
    rb_puts(b, "</g>");
    return y - y0 + 22;
}

static void svg_xaxis(rbuf *b, double x0, double w, double y0, double y1, double hi, double step,
                      const char *title, double scale) {
    for (double v = 0; v <= hi * (1 + 1e-9); v += step) {
        double x = x0 + w * v / hi;
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>",
                  x, y0, x, y1, x, y1 + 14, v / scale);
    }
    rb_printf(b, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
              x0 + w / 2, y1 + 32);
    rb_html(b, title);
    rb_puts(b, "</text>");
}

static void strat_heading(rbuf *b, const ap_report_strategy *s, double x, double y) {
    char lbl[160];
    rb_printf(b, "<text class=\"name\" x=\"%.1f\" y=\"%.1f\">", x, y);
    rb_html(b, s->name);
    rb_printf(b, "</text><text class=\"sub\" x=\"%.1f\" y=\"%.1f\">", x, y + 13);
    if (s->status == AP_REPORT_ILLEGAL) {
        rb_puts(b, "no legal plan");
    } else {
        rb_html(b, ap_plan_label(&s->est.plan, lbl, sizeof lbl));
    }
    rb_puts(b, "</text>");
}

/* (1) step time per strategy: stacked parts, error band, tokens/s and MFU */
static void chart_time(rbuf *b, const ap_report *r) {
    const double W = 1000, LX = 250, PW = 500, RH = 40, BH = 18;
    double hi = 0;
    int nbars = 0;
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        nbars++;
        double v = r->strat[i].est.time.step_s * (1 + AP_VALIDATED_TIME_ERROR);
        if (v > hi) hi = v;
    }
    double step = rep_nice_step(hi);
    hi = step * ceil(hi / step);
    if (!(hi > 0)) hi = 1;
    rbuf leg = {0};
    double lh = svg_legend(&leg, "t", time_parts, NTIME, 10, 10, W - 20);
    double top = 10 + lh + 6, H = top + RH * r->nstrat + 50;
    rb_printf(b, "<svg id=\"chart-time\" class=\"chart\" "
              "viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
              "aria-labelledby=\"chart-time-title\"><title id=\"chart-time-title\">Step time per "
              "strategy, stacked by part, seconds; whiskers show the validated error of "
              "&#177;%.0f%%</title>", W, H, W, H, 100 * AP_VALIDATED_TIME_ERROR);
    svg_patterns(b, "t", time_parts, NTIME);
    if (leg.failed) b->failed = 1; /* the chart is incomplete: the document fails */
    else if (leg.buf) rb_printf(b, "%.*s", (int)leg.len, leg.buf);
    ap_free(leg.buf);
    double yb = top + RH * r->nstrat;
    svg_xaxis(b, LX, PW, top, yb, hi, step, "step time (s)", 1);
    char x1[32], x2[32], x3[32];
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        double y = top + RH * i + (RH - BH) / 2;
        strat_heading(b, s, 10, y + 6);
        if (s->status == AP_REPORT_ILLEGAL) {
            rb_printf(b, "<text class=\"na\" x=\"%.1f\" y=\"%.1f\">not legal (see the table)</text>",
                      LX + 4, y + 13);
            continue;
        }
        ap_report_row o;
        ap_report_row_from_estimate(&s->est, &o);
        rb_puts(b, "<g class=\"bar\" data-strategy=\"");
        rb_html(b, s->name);
        rb_puts(b, "\">");
        double x = LX;
        for (int j = 0; j < NTIME; j++) {
            double v = rowv(&o, time_parts[j].off), w = PW * v / hi;
            if (v <= 0) continue;
            rb_printf(b, "<rect class=\"seg\" data-part=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                      "height=\"%.0f\" fill=\"", time_parts[j].key, x, y, w, BH);
            svg_fill(b, "t", time_parts, j);
            rb_printf(b, "\"><title>%s %s s</title></rect>", time_parts[j].name,
                      rep_fmt_s(v, x1, sizeof x1));
            x += w;
        }
        double lo = LX + PW * o.step_s * (1 - AP_VALIDATED_TIME_ERROR) / hi;
        double up = LX + PW * o.step_s * (1 + AP_VALIDATED_TIME_ERROR) / hi, yc = y + BH / 2;
        rb_printf(b, "<g class=\"errband\"><line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                  "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                  "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/></g>",
                  lo, yc, up, yc, lo, y - 3, lo, y + BH + 3, up, y - 3, up, y + BH + 3);
        rb_printf(b, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\">%s s &#183; MFU %s%%"
                  "<tspan x=\"%.1f\" dy=\"13\">%s tokens/s%s</tspan></text></g>", LX + PW + 8,
                  y + 6, rep_fmt_s(o.step_s, x1, sizeof x1), rep_fmt_pct(o.mfu, x3, sizeof x3),
                  LX + PW + 8, rep_fmt_tps(o.tokens_per_s, x2, sizeof x2),
                  s->status == AP_REPORT_NOFIT ? " &#183; does not fit" : "");
    }
    rb_puts(b, "</svg>\n");
}

/* (2) device memory of the worst stage per strategy, against capacity */
static void chart_memory(rbuf *b, const ap_report *r) {
    const double W = 1000, LX = 250, PW = 500, RH = 40, BH = 18;
    double hi = r->cluster->gpu.mem_bytes;
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        const ap_estimate *e = &r->strat[i].est;
        if (e->capacity_bytes > hi) hi = e->capacity_bytes;
        if (e->device_peak_bytes > hi) hi = e->device_peak_bytes;
    }
    double step = rep_nice_step(hi / AP_GIB) * AP_GIB;
    hi = step * ceil(hi / step * 1.02);
    rbuf leg = {0};
    double lh = svg_legend(&leg, "m", mem_parts, NMEM, 10, 10, W - 20);
    double top = 10 + lh + 6, H = top + RH * r->nstrat + 50;
    rb_printf(b, "<svg id=\"chart-memory\" class=\"chart\" "
              "viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
              "aria-labelledby=\"chart-memory-title\"><title id=\"chart-memory-title\">Device "
              "memory per GPU of the worst pipeline stage, GiB, against the GPU capacity</title>",
              W, H, W, H);
    svg_patterns(b, "m", mem_parts, NMEM);
    if (leg.failed) b->failed = 1; /* the chart is incomplete: the document fails */
    else if (leg.buf) rb_printf(b, "%.*s", (int)leg.len, leg.buf);
    ap_free(leg.buf);
    double yb = top + RH * r->nstrat;
    svg_xaxis(b, LX, PW, top, yb, hi, step, "device memory per GPU, worst stage (GiB)", AP_GIB);
    char x1[32], x2[32], x3[32];
    double cap = 0, head = 0;
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        double y = top + RH * i + (RH - BH) / 2;
        strat_heading(b, s, 10, y + 6);
        if (s->status == AP_REPORT_ILLEGAL) {
            rb_printf(b, "<text class=\"na\" x=\"%.1f\" y=\"%.1f\">not legal (see the table)</text>",
                      LX + 4, y + 13);
            continue;
        }
        ap_report_row o;
        ap_report_row_from_estimate(&s->est, &o);
        cap = o.capacity_bytes;
        head = o.headroom_bytes;
        rb_puts(b, "<g class=\"bar\" data-strategy=\"");
        rb_html(b, s->name);
        rb_puts(b, "\">");
        double x = LX;
        for (int j = 0; j < NMEM; j++) {
            double v = mem_part(&o, j), w = PW * v / hi;
            if (v <= 0) continue;
            rb_printf(b, "<rect class=\"seg\" data-part=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                      "height=\"%.0f\" fill=\"", mem_parts[j].key ? mem_parts[j].key : "runtime",
                      x, y, w, BH);
            svg_fill(b, "m", mem_parts, j);
            rb_printf(b, "\"><title>%s %s GiB</title></rect>", mem_parts[j].name,
                      rep_fmt_gib(v, x1, sizeof x1));
            x += w;
        }
        int over = !o.fits;
        if (over) {
            double from = LX + PW * (o.capacity_bytes - o.headroom_bytes) / hi;
            double to = LX + PW * o.device_peak_bytes / hi;
            if (to < from + 2) to = from + 2;
            rb_printf(b, "<g class=\"over\"><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                      "fill=\"none\" stroke=\"#D55E00\" stroke-width=\"3\" stroke-dasharray=\"4 2\"/></g>",
                      from, y - 3, to - from, BH + 6);
        }
        rb_printf(b, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\">%s GiB of %s GiB", LX + PW + 8,
                  y + 6, rep_fmt_gib(o.device_peak_bytes, x1, sizeof x1),
                  rep_fmt_gib(o.capacity_bytes, x2, sizeof x2));
        if (over && overshoot_bytes(&o) > 0)
            rb_printf(b, "<tspan x=\"%.1f\" dy=\"13\">OVER by %s GiB</tspan>", LX + PW + 8,
                      rep_fmt_gib(overshoot_bytes(&o), x3, sizeof x3));
        else if (over)
            rb_printf(b, "<tspan x=\"%.1f\" dy=\"13\">host memory OVER</tspan>", LX + PW + 8);
        rb_puts(b, "</text></g>");
    }
    if (cap > 0) {
        double xc = LX + PW * cap / hi, xu = LX + PW * (cap - head) / hi;
        rb_printf(b, "<line class=\"capacity\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"end\">capacity %s GiB</text>",
                  xc, top - 4, xc, yb, xc - 3, top - 6, rep_fmt_gib(cap, x1, sizeof x1));
        if (head > 0)
            rb_printf(b, "<line class=\"usable\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>",
                      xu, top, xu, yb);
    }
    rb_puts(b, "</svg>\n");
}

/* ---- (3) memory vs throughput of the feasible evaluated plans ---- */

/* The scatter's geometry: the SVG size, the plot area and the axis ranges and steps. */
typedef struct {
    double W, H, X0, Y0, PW, PH;
    double xmax, ymax, xs, ys; /* bytes, tokens/s */
} scatter_geom;

/* Axis ranges covering the feasible plans and the compared strategies, on "nice" steps. */
static void scatter_scale(const ap_report *r, scatter_geom *g) {
    g->xmax = g->ymax = 0;
    for (int64_t i = 0; i < r->nrows; i++) {
        if (r->rows[i].device_peak_bytes > g->xmax) g->xmax = r->rows[i].device_peak_bytes;
        if (r->rows[i].tokens_per_s > g->ymax) g->ymax = r->rows[i].tokens_per_s;
    }
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        const ap_estimate *e = &r->strat[i].est;
        if (e->device_peak_bytes > g->xmax) g->xmax = e->device_peak_bytes;
        if (e->capacity_bytes > g->xmax) g->xmax = e->capacity_bytes;
        if (e->tp.tokens_per_s > g->ymax) g->ymax = e->tp.tokens_per_s;
    }
    g->xs = rep_nice_step(g->xmax / AP_GIB) * AP_GIB;
    g->ys = rep_nice_step(g->ymax);
    g->xmax = g->xs * ceil(g->xmax / g->xs * 1.02);
    g->ymax = g->ys * ceil(g->ymax / g->ys * 1.02);
    if (!(g->xmax > 0)) g->xmax = AP_GIB;
    if (!(g->ymax > 0)) g->ymax = 1;
}

/* The Pareto front of the feasible plans (memory against throughput): idx = the rows by
 * memory, then throughput; front[i] = 1 for a row faster than every row with less memory.
 * Returns the front's size, or -1 when out of memory. */
static int64_t pareto_front(const ap_report *r, int64_t *idx, char *front) {
    int64_t nfront = 0;
    for (int64_t i = 0; i < r->nrows; i++) idx[i] = i;
    /* insertion by memory would be quadratic; a small merge sort on indices instead */
    {
        int64_t *tmp = r->nrows ? ap_malloc((size_t)r->nrows * sizeof *tmp) : NULL;
        if (r->nrows && !tmp) return -1;
        for (int64_t w = 1; w < r->nrows; w *= 2) {
            for (int64_t lo = 0; lo < r->nrows; lo += 2 * w) {
                int64_t mid = lo + w < r->nrows ? lo + w : r->nrows;
                int64_t hi = lo + 2 * w < r->nrows ? lo + 2 * w : r->nrows, a = lo, c = mid, k = lo;
                while (a < mid || c < hi) {
                    int take_a;
                    if (a >= mid) take_a = 0;
                    else if (c >= hi) take_a = 1;
                    else {
                        const ap_report_row *ra = &r->rows[idx[a]], *rc = &r->rows[idx[c]];
                        take_a = ra->device_peak_bytes < rc->device_peak_bytes ||
                                 (ra->device_peak_bytes == rc->device_peak_bytes &&
                                  ra->tokens_per_s >= rc->tokens_per_s);
                    }
                    tmp[k++] = take_a ? idx[a++] : idx[c++];
                }
            }
            memcpy(idx, tmp, (size_t)r->nrows * sizeof *idx);
        }
        ap_free(tmp);
    }
    double best_y = -1;
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (q->tokens_per_s > best_y) {
            best_y = q->tokens_per_s;
            front[idx[i]] = 1;
            nfront++;
        }
    }
    return nfront;
}

/* Grid, ticks and axis titles. */
static void scatter_axes(rbuf *b, const scatter_geom *g) {
    for (double v = 0; v <= g->xmax * (1 + 1e-9); v += g->xs) {
        double x = g->X0 + g->PW * v / g->xmax;
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>",
                  x, g->Y0, x, g->Y0 + g->PH, x, g->Y0 + g->PH + 14, v / AP_GIB);
    }
    for (double v = 0; v <= g->ymax * (1 + 1e-9); v += g->ys) {
        double y = g->Y0 + g->PH - g->PH * v / g->ymax;
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  g->X0, y, g->X0 + g->PW, y, g->X0 - 4, y + 4, v);
    }
    rb_printf(b, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">device "
              "memory per GPU, worst stage (GiB)</text>", g->X0 + g->PW / 2, g->Y0 + g->PH + 34);
    rb_printf(b, "<text class=\"axis-title\" transform=\"translate(18 %.1f) rotate(-90)\" "
              "text-anchor=\"middle\">throughput (tokens/s)</text>", g->Y0 + g->PH / 2);
}

/* Sampled plans (every k-th plan off the front, in step-time order) and the front itself. */
static void scatter_points(rbuf *b, const ap_report *r, const scatter_geom *g, const int64_t *idx,
                           const char *front, int64_t nrest, int64_t nsample) {
    rb_puts(b, "<g class=\"samples\">");
    int64_t seen = 0, drawn = 0;
    for (int64_t i = 0; i < r->nrows && drawn < nsample; i++) {
        if (front[i]) continue;
        if (seen++ * nsample / (nrest ? nrest : 1) < drawn) continue;
        const ap_report_row *q = &r->rows[i];
        rb_printf(b, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2\"/>",
                  g->X0 + g->PW * q->device_peak_bytes / g->xmax, g->Y0 + g->PH - g->PH * q->tokens_per_s / g->ymax);
        drawn++;
    }
    rb_puts(b, "</g><polyline class=\"front\" points=\"");
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (front[idx[i]])
            rb_printf(b, "%.1f,%.1f ", g->X0 + g->PW * q->device_peak_bytes / g->xmax,
                      g->Y0 + g->PH - g->PH * q->tokens_per_s / g->ymax);
    }
    rb_puts(b, "\"/><g class=\"fronts\">");
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (front[idx[i]])
            rb_printf(b, "<rect class=\"front-pt\" x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"/>",
                      g->X0 + g->PW * q->device_peak_bytes / g->xmax - 3,
                      g->Y0 + g->PH - g->PH * q->tokens_per_s / g->ymax - 3);
    }
    rb_puts(b, "</g>");
}

/* The capacity line and the compared strategies, labelled by name. */
static void scatter_strategies(rbuf *b, const ap_report *r, const scatter_geom *g) {
    double cap = r->cluster->gpu.mem_bytes;
    for (int i = 0; i < r->nstrat; i++)
        if (r->strat[i].status != AP_REPORT_ILLEGAL) cap = r->strat[i].est.capacity_bytes;
    char x1[32];
    double xc = g->X0 + g->PW * cap / g->xmax;
    rb_printf(b, "<line class=\"capacity\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
              "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">capacity %s GiB</text>",
              xc, g->Y0, xc, g->Y0 + g->PH, xc - 3, g->Y0 - 6, rep_fmt_gib(cap, x1, sizeof x1));
    /* labels staggered so coincident ones stay legible */
    int k = 0;
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (s->status == AP_REPORT_ILLEGAL) continue;
        double x = g->X0 + g->PW * s->est.device_peak_bytes / g->xmax;
        double y = g->Y0 + g->PH - g->PH * s->est.tp.tokens_per_s / g->ymax;
        double ly = y - 8 - 13.0 * (k % 6);
        rb_printf(b, "<g class=\"strat\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>"
                  "<line class=\"leader\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"stratlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">",
                  x, y, x, y, x - 6, ly + 2, x - 8, ly);
        rb_html(b, s->name);
        rb_puts(b, s->status == AP_REPORT_NOFIT ? " (does not fit)</text></g>" : "</text></g>");
        k++;
    }
}

/* The key with the counts behind the chart. */
static void scatter_key(rbuf *b, const ap_report *r, const scatter_geom *g, int64_t nfront,
                        int64_t nsample) {
    double kx = g->X0 + g->PW + 14;
    rb_printf(b, "<g class=\"key\"><circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2\"/>"
              "<text x=\"%.1f\" y=\"%.1f\">sampled plan</text>"
              "<rect class=\"front-pt\" x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"/>"
              "<text x=\"%.1f\" y=\"%.1f\">Pareto front</text>"
              "<g class=\"strat\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/></g>"
              "<text x=\"%.1f\" y=\"%.1f\">compared strategy</text>"
              "<text x=\"%.1f\" y=\"%.1f\">%lld evaluated</text>"
              "<text x=\"%.1f\" y=\"%.1f\">%lld feasible</text>"
              "<text x=\"%.1f\" y=\"%.1f\">%lld on the front</text>"
              "<text x=\"%.1f\" y=\"%.1f\">%lld sampled</text></g>",
              kx + 4, g->Y0 + 10, kx + 14, g->Y0 + 14, kx + 1, g->Y0 + 27, kx + 14, g->Y0 + 34, kx + 4,
              g->Y0 + 50, kx + 14, g->Y0 + 54, kx, g->Y0 + 80, (long long)r->evaluated, kx, g->Y0 + 96,
              (long long)r->fit, kx, g->Y0 + 112, (long long)nfront, kx, g->Y0 + 128,
              (long long)nsample);
}

/* (3) device memory against throughput of every feasible plan: the Pareto front, at most
 * AP_REPORT_MAX_POINTS sampled others, the compared strategies and the capacity */
static void chart_scatter(rbuf *b, const ap_report *r) {
    scatter_geom g = {980, 520, 90, 30, 700, 400, 0, 0, 0, 0};
    scatter_scale(r, &g);
    int64_t *idx = r->nrows ? ap_malloc((size_t)r->nrows * sizeof *idx) : NULL;
    char *front = r->nrows ? ap_calloc((size_t)r->nrows, 1) : NULL;
    int64_t nfront = r->nrows && (!idx || !front) ? -1 : pareto_front(r, idx, front);
    if (nfront < 0) {
        b->failed = 1;
        ap_free(idx);
        ap_free(front);
        return;
    }
    int64_t nrest = r->nrows - nfront;
    int64_t nsample = nrest < AP_REPORT_MAX_POINTS ? nrest : AP_REPORT_MAX_POINTS;
    rb_printf(b, "<svg id=\"chart-scatter\" class=\"chart\" "
              "viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
              "aria-labelledby=\"chart-scatter-title\" data-evaluated=\"%lld\" data-feasible=\"%lld\" "
              "data-front=\"%lld\" data-sampled=\"%lld\"><title id=\"chart-scatter-title\">Device "
              "memory (GiB) against throughput (tokens/s) of the feasible evaluated plans</title>",
              g.W, g.H, g.W, g.H, (long long)r->evaluated, (long long)r->fit, (long long)nfront,
              (long long)nsample);
    scatter_axes(b, &g);
    scatter_points(b, r, &g, idx, front, nrest, nsample);
    ap_free(idx);
    ap_free(front);
    scatter_strategies(b, r, &g);
    scatter_key(b, r, &g, nfront, nsample);
    rb_puts(b, "</svg>\n");
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
    "th,td{border:1px solid var(--grid);padding:3px 7px;text-align:right}\n"
    "th:first-child,td:first-child,td.l{text-align:left}\n"
    "td.l,td:first-child{white-space:nowrap}\n"
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
    rb_puts(b, "<td class=\"l\">");
    rb_html(b, ap_plan_label(&s->est.plan, lbl, sizeof lbl));
    rb_printf(b, "</td><td class=\"l\">%s</td>", ap_trainer_name(s->est.plan.trainer));
    rb_printf(b, "<td>%s</td>", rep_fmt_s(o.step_s, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_tps(o.tokens_per_s, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_pct(o.mfu, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_gib(o.device_peak_bytes, a, sizeof a));
    rb_printf(b, "<td>%s</td>", rep_fmt_gib(o.capacity_bytes, a, sizeof a));
    int lp = largest_part(&o, 1);
    rb_printf(b, "<td class=\"l\">%s %s s</td>", time_parts[lp].key,
              rep_fmt_s(rowv(&o, time_parts[lp].off), a, sizeof a));
    rb_printf(b, "<td>%s</td>", s->status == AP_REPORT_OK ? "" : rep_fmt_gib(overshoot_bytes(&o), a, sizeof a));
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
    rb_puts(b, "<h2>Compared plans</h2>\n<div class=\"scroll\"><table id=\"plans\"><thead><tr><th>strategy</th><th>plan</th>"
                "<th>trainer</th><th>step_s (s)</th><th>tokens_per_s</th><th>mfu (%)</th>"
                "<th>device_peak_bytes (GiB)</th><th>capacity_bytes (GiB)</th>"
                "<th>largest non-compute part</th><th>overshoot (GiB)</th><th>fits</th></tr></thead>"
                "<tbody>\n");
    for (int i = 0; i < r->nstrat; i++) html_num_row(b, r, i);
    rb_puts(b, "</tbody></table></div>\n<p class=\"note\">Overshoot = device_peak_bytes + "
                "headroom_bytes &#8722; capacity_bytes, for plans that do not fit.</p>\n");
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
        rb_puts(b, ").</p>\n<ul id=\"explain\">\n");
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
    chart_time(b, r);
    rb_puts(b, "<div class=\"scroll\"><table id=\"time-parts\"><thead><tr><th>strategy</th>");
    for (int j = 0; j < NTIME; j++) rb_printf(b, "<th>%s (s)</th>", time_parts[j].key);
    rb_puts(b, "<th>step_s (s)</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_puts(b, "<tr><td>");
        rb_html(b, r->strat[i].name);
        rb_puts(b, "</td>");
        for (int j = 0; j < NTIME; j++)
            rb_printf(b, "<td>%s</td>", rep_fmt_s(rowv(&o, time_parts[j].off), a, sizeof a));
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
    chart_memory(b, r);
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
    chart_scatter(b, r);
}

/* The estimate command of each strategy, and the document end. */
static void html_reproduce(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>Reproduce</h2>\n<table id=\"reproduce\"><thead><tr><th>strategy</th>"
                "<th>command</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        rb_puts(b, "<tr><td>");
        rb_html(b, r->strat[i].name);
        rb_puts(b, "</td><td class=\"l\"><code>autoplan estimate ");
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
        rb_printf(&b, " | %s %s s", time_parts[lp].key,
                  rep_fmt_s(rowv(&o, time_parts[lp].off), a, sizeof a));
        rb_printf(&b, " | %s", s->status == AP_REPORT_OK ? "" : rep_fmt_gib(overshoot_bytes(&o), a, sizeof a));
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
    for (int j = 0; j < NTIME; j++) rb_printf(&b, " %s |", time_parts[j].key);
    rb_puts(&b, " step_s |\n|---|");
    for (int j = 0; j <= NTIME; j++) rb_puts(&b, "--:|");
    rb_puts(&b, "\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_printf(&b, "| %s |", r->strat[i].name);
        for (int j = 0; j < NTIME; j++) rb_printf(&b, " %s |", rep_fmt_s(rowv(&o, time_parts[j].off), a, sizeof a));
        rb_printf(&b, " %s |\n", rep_fmt_s(o.step_s, a, sizeof a));
    }
    rb_puts(&b, "\n## Memory of the worst stage (GiB)\n\n| strategy |");
    for (int j = 0; j < NMEM - 1; j++) rb_printf(&b, " %s |", mem_parts[j].key);
    rb_puts(&b, " device_peak_bytes | headroom_bytes | capacity_bytes |\n|---|");
    for (int j = 0; j < NMEM + 2; j++) rb_puts(&b, "--:|");
    rb_puts(&b, "\n");
    for (int i = 0; i < r->nstrat; i++) {
        if (r->strat[i].status == AP_REPORT_ILLEGAL) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&r->strat[i].est, &o);
        rb_printf(&b, "| %s |", r->strat[i].name);
        for (int j = 0; j < NMEM - 1; j++) rb_printf(&b, " %s |", rep_fmt_gib(rowv(&o, mem_parts[j].off), a, sizeof a));
        rb_printf(&b, " %s |", rep_fmt_gib(o.device_peak_bytes, a, sizeof a));
        rb_printf(&b, " %s |", rep_fmt_gib(o.headroom_bytes, a, sizeof a));
        rb_printf(&b, " %s |\n", rep_fmt_gib(o.capacity_bytes, a, sizeof a));
    }
    rb_puts(&b, "\n## Why the best plan wins\n\n");
    if (r->best < 0) {
        rb_puts(&b, "None of the compared strategies fits.\n");
    } else {
        line_buf lb;
        rb_printf(&b, "Best: **%s** (%s).\n\n", r->strat[r->best].name,
                  ap_plan_label(&r->strat[r->best].est.plan, lbl, sizeof lbl));
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

/* ---- CSV ------------------------------------------------------------------------------------- */

/* ",<v>" in decimal */
static void put_int(rbuf *b, int64_t v) {
    char buf[24], *p = buf + sizeof buf;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) *--p = '-';
    *--p = ',';
    ap_strbuf_put(b, p, (size_t)(buf + sizeof buf - p));
}

ap_status ap_report_csv(const ap_report *r, char **out, size_t *len, ap_err *err) {
    rbuf b = {0};
    const int nf = ap_estimate_field_count();
    char lbl[160];
    /* the columns: the estimate's fields that are report-row fields, named by JSON path */
    rb_puts(&b, "label");
    for (int k = 0; k < nf; k++)
        if (ap_estimate_field_at(k)->row_off != AP_FIELD_NO_ROW)
            rb_printf(&b, ",%s", ap_estimate_field_at(k)->path);
    rb_puts(&b, "\n");
    for (int64_t i = 0; i < r->nrows && !b.failed; i++) {
        const ap_report_row *q = &r->rows[i];
        const char *base = (const char *)q;
        ap_plan p;
        row_plan(q, &p);
        rb_printf(&b, "\"%s\"", ap_plan_label(&p, lbl, sizeof lbl));
        for (int k = 0; k < nf; k++) {
            const ap_estimate_field *f = ap_estimate_field_at(k);
            if (f->row_off == AP_FIELD_NO_ROW) continue;
            const void *v = base + f->row_off;
            int iv = f->kind == AP_FIELD_I64 || f->kind == AP_FIELD_REAL ? 0 : *(const int *)v;
            char num[40];
            switch (f->kind) {
            case AP_FIELD_INT: put_int(&b, iv); break;
            case AP_FIELD_I64: put_int(&b, *(const int64_t *)v); break;
            case AP_FIELD_REAL:
                /* %.17g, byte for byte (ap_fmt_g17), without printf's slow path */
                num[0] = ',';
                ap_fmt_g17(*(const double *)v, num + 1);
                rb_puts(&b, num);
                break;
            case AP_FIELD_BOOL: rb_puts(&b, iv ? ",true" : ",false"); break;
            default: rb_printf(&b, ",%s", ap_estimate_field_name(f, iv)); break;
            }
        }
        rb_puts(&b, "\n");
    }
    return rb_finish(&b, out, len, err);
}
