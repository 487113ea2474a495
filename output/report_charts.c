/*
 * report_charts.c - charts 1-3 of report.html (report_int.h): (1) step time per strategy,
 * stacked by part with the validated error as whiskers; (2) device memory of the worst stage
 * per strategy against the capacity; (3) device memory against throughput of every feasible
 * evaluated plan (Pareto front, an even sample of the rest, the compared strategies labelled).
 *
 * Scales follow what fits: an axis ends at the largest value among the strategies that fit
 * (and the capacity for memory), so one baseline that does not fit cannot squeeze everything
 * else into a strip. A bar longer than the axis is cut at its end with a break mark (its value
 * is written beside it); a scatter point off the axis sits on the plot's edge as an arrow and
 * its label carries the value. Label positions come from report_layout.c: the left column of
 * the bar charts is as wide as its widest heading; scatter labels never overlap each other or
 * the markers and stay inside the plot.
 *
 * Not here: tables, text and the other charts (report.c, report_sweep.c, report_simchart.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_int.h"

#define GiB AP_GIB

/* A "nice" axis: step in {1, 2, 5} x 10^k, about 5 ticks up to at least hi. */
double rep_nice_step(double hi) {
    if (!(hi > 0)) return 1;
    double raw = hi / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* ---- SVG pieces ------------------------------------------------------------------------------ */

static void svg_patterns(rbuf *b, const char *prefix, const rep_part *parts, int n) {
    rb_puts(b, "<defs>");
    for (int i = 0; i < n; i++) {
        if (!parts[i].hatch) continue;
        rb_printf(b, "<pattern id=\"%s-h%d\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                  "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#FFFFFF\"/>"
                  "<rect width=\"3\" height=\"6\" fill=\"%s\"/></pattern>", prefix, i, parts[i].color);
    }
    rb_puts(b, "</defs>");
}

static void svg_fill(rbuf *b, const char *prefix, const rep_part *parts, int i) {
    if (parts[i].hatch) rb_printf(b, "url(#%s-h%d)", prefix, i);
    else rb_puts(b, parts[i].color);
}

/* legend: one swatch and name per part, in stacking order, wrapped at width; returns the
 * height used */
static double svg_legend(rbuf *b, const char *prefix, const rep_part *parts, int n, double x0,
                         double y0, double width) {
    double x = x0, y = y0;
    rb_puts(b, "<g class=\"legend\">");
    for (int i = 0; i < n; i++) {
        char txt[64];
        snprintf(txt, sizeof txt, "%d %s", i + 1, parts[i].name);
        double w = 16 + rep_text_width(txt, 12, 0);
        if (x + w > x0 + width && x > x0) {
            x = x0;
            y += 18;
        }
        rb_printf(b, "<g class=\"legend-item\"><rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" "
                  "class=\"swatch\" fill=\"", x, y);
        svg_fill(b, prefix, parts, i);
        rb_printf(b, "\"/><text x=\"%.1f\" y=\"%.1f\">", x + 16, y + 10);
        rb_html(b, txt);
        rb_puts(b, "</text></g>");
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

static const char *heading_sub(const ap_report_strategy *s, char *lbl, size_t n) {
    if (s->status == AP_REPORT_ILLEGAL) return "no legal plan";
    return ap_plan_label(&s->est.plan, lbl, n);
}

/* the width of the left column of a bar chart: its widest strategy name or plan label */
static double heading_width(const ap_report *r) {
    double w = 120;
    char lbl[160];
    for (int i = 0; i < r->nstrat; i++) {
        double a = rep_text_width(r->strat[i].name, 12, 1);
        double c = rep_text_width(heading_sub(&r->strat[i], lbl, sizeof lbl), 11, 0);
        if (a > w) w = a;
        if (c > w) w = c;
    }
    return w;
}

/* name (bold) over the plan label, 14 px apart (the line height of 12 px text) */
static void strat_heading(rbuf *b, const ap_report_strategy *s, double x, double y) {
    char lbl[160];
    rb_printf(b, "<text class=\"name\" x=\"%.1f\" y=\"%.1f\">", x, y);
    rb_html(b, s->name);
    rb_printf(b, "</text><text class=\"sub\" x=\"%.1f\" y=\"%.1f\">", x, y + 14);
    rb_html(b, heading_sub(s, lbl, sizeof lbl));
    rb_puts(b, "</text>");
}

/* a break mark across the end of a bar cut at x (two slanted strokes in the page colour) */
static void svg_break(rbuf *b, double x, double y, double h) {
    rb_printf(b, "<path class=\"break\" d=\"M%.1f %.1f l6 %.1f M%.1f %.1f l6 %.1f\"/>", x - 10,
              y - 2, h + 4, x - 5, y - 2, h + 4);
}

/* ---- (1) step time ------------------------------------------------------------------------- */

typedef struct {
    double LX, PW, W, RH, BH, top, yb;
} bar_frame;

/* the frame shared by charts 1 and 2: left column, plot, right labels of width rw */
static bar_frame bar_layout(const ap_report *r, double legend_h, double rw) {
    bar_frame f;
    f.RH = 40;
    f.BH = 18;
    f.PW = 500;
    f.LX = 10 + heading_width(r) + 14;
    f.W = f.LX + f.PW + 8 + rw + 10;
    if (f.W < 1000) {
        f.PW += 1000 - f.W; /* a short heading column leaves the room to the plot */
        f.W = 1000;
    }
    f.top = 10 + legend_h + 16;
    f.yb = f.top + f.RH * r->nstrat;
    return f;
}

/* The per-strategy values of a bar chart (zeroed); 0, or -1 with b failed. */
static int bar_values(rbuf *b, int n, double **v, int **fits) {
    *v = ap_calloc((size_t)(n > 0 ? n : 1), sizeof **v);
    *fits = ap_calloc((size_t)(n > 0 ? n : 1), sizeof **fits);
    if (*v && *fits) return 0;
    ap_free(*v);
    ap_free(*fits);
    b->failed = 1;
    return -1;
}

/* The legend of a bar chart, built into leg first: its height sets the chart's layout. */
static bar_frame legend_layout(const ap_report *r, double rw, rbuf *leg, const char *prefix,
                               const rep_part *parts, int n) {
    bar_frame f0 = bar_layout(r, 0, rw);
    double lh = svg_legend(leg, prefix, parts, n, 10, 10, f0.W - 20);
    return bar_layout(r, lh, rw);
}

/* The legend into the chart; a legend that could not be built fails the chart. */
static void put_legend(rbuf *b, rbuf *leg) {
    if (leg->failed) b->failed = 1;
    else if (leg->buf) rb_printf(b, "%.*s", (int)leg->len, leg->buf);
    ap_free(leg->buf);
}

/* A strategy's row: its heading, and for an illegal one the note; 0 when it has no bar. */
static int bar_row(rbuf *b, const bar_frame *f, const ap_report_strategy *s, int i, double *y) {
    *y = f->top + f->RH * i + (f->RH - f->BH) / 2;
    strat_heading(b, s, 10, *y + 4);
    if (s->status != AP_REPORT_ILLEGAL) return 1;
    rb_printf(b, "<text class=\"na\" x=\"%.1f\" y=\"%.1f\">not legal (see the table)</text>",
              f->LX + 4, *y + 13);
    return 0;
}

static void bar_open(rbuf *b, const ap_report_strategy *s, int beyond) {
    rb_printf(b, "<g class=\"bar\" data-fits=\"%d\" data-beyond=\"%d\" data-strategy=\"",
              s->status == AP_REPORT_OK, beyond);
    rb_html(b, s->name);
    rb_puts(b, "\">");
}

void rep_chart_time(rbuf *b, const ap_report *r) {
    int n = r->nstrat;
    double *v;
    int *fits;
    if (bar_values(b, n, &v, &fits) != 0) return;
    char x1[32], x2[32], x3[32], txt[160];
    double rw = 0;
    for (int i = 0; i < n; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (s->status == AP_REPORT_ILLEGAL) continue;
        v[i] = s->est.time.step_s * (1 + AP_VALIDATED_TIME_ERROR);
        fits[i] = s->status == AP_REPORT_OK;
        snprintf(txt, sizeof txt, "%s tokens/s - does not fit",
                 rep_fmt_tps(s->est.tp.tokens_per_s, x1, sizeof x1));
        double w = rep_text_width(txt, 12, 0);
        if (w > rw) rw = w;
    }
    /* the axis: what fits, and what does not fit within 15% of it */
    double hi = rep_fit_hi(v, fits, n, 1.15), step = rep_nice_step(hi);
    hi = step * ceil(hi / step);
    if (!(hi > 0)) hi = step = 1;
    ap_free(v);
    ap_free(fits);

    rbuf leg = {0};
    bar_frame f = legend_layout(r, rw, &leg, "t", rep_time_parts, REP_NTIME);
    double H = f.yb + 50;
    rb_printf(b, "<svg id=\"chart-time\" class=\"chart\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
              "height=\"%.0f\" role=\"img\" data-plot-x0=\"%.1f\" data-plot-x1=\"%.1f\" "
              "aria-labelledby=\"chart-time-title\"><title id=\"chart-time-title\">Step time per "
              "strategy, stacked by part, seconds; whiskers show the validated error of "
              "&#177;%.0f%%</title>", f.W, H, f.W, H, f.LX, f.LX + f.PW,
              100 * AP_VALIDATED_TIME_ERROR);
    svg_patterns(b, "t", rep_time_parts, REP_NTIME);
    put_legend(b, &leg);
    svg_xaxis(b, f.LX, f.PW, f.top, f.yb, hi, step, "step time (s)", 1);
    double end = f.LX + f.PW;
    for (int i = 0; i < n; i++) {
        const ap_report_strategy *s = &r->strat[i];
        double y;
        if (!bar_row(b, &f, s, i, &y)) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&s->est, &o);
        int beyond = o.step_s * (1 + AP_VALIDATED_TIME_ERROR) > hi * (1 + 1e-9);
        bar_open(b, s, beyond);
        double x = f.LX;
        for (int j = 0; j < REP_NTIME; j++) {
            double val = rep_rowv(&o, rep_time_parts[j].off), w = f.PW * val / hi;
            if (val <= 0 || x >= end) continue;
            if (x + w > end) w = end - x;
            rb_printf(b, "<rect class=\"seg\" data-part=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                      "height=\"%.0f\" fill=\"", rep_time_parts[j].key, x, y, w, f.BH);
            svg_fill(b, "t", rep_time_parts, j);
            rb_printf(b, "\"><title>%s %s s</title></rect>", rep_time_parts[j].name,
                      rep_fmt_s(val, x1, sizeof x1));
            x += w;
        }
        if (beyond) {
            svg_break(b, end, y, f.BH);
        } else {
            double lo = f.LX + f.PW * o.step_s * (1 - AP_VALIDATED_TIME_ERROR) / hi;
            double up = f.LX + f.PW * o.step_s * (1 + AP_VALIDATED_TIME_ERROR) / hi;
            double yc = y + f.BH / 2;
            rb_printf(b, "<g class=\"errband\"><line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                      "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                      "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/></g>",
                      lo, yc, up, yc, lo, y - 3, lo, y + f.BH + 3, up, y - 3, up, y + f.BH + 3);
        }
        rb_printf(b, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\">%s s &#183; MFU %s%%"
                  "<tspan x=\"%.1f\" dy=\"14\">%s tokens/s%s</tspan></text></g>", end + 8,
                  y + 4, rep_fmt_s(o.step_s, x1, sizeof x1), rep_fmt_pct(o.mfu, x3, sizeof x3),
                  end + 8, rep_fmt_tps(o.tokens_per_s, x2, sizeof x2),
                  s->status == AP_REPORT_NOFIT ? " &#183; does not fit" : "");
    }
    rb_puts(b, "</svg>\n");
}

/* ---- (2) device memory ------------------------------------------------------------------- */

void rep_chart_memory(rbuf *b, const ap_report *r) {
    int n = r->nstrat;
    double *v;
    int *fits;
    if (bar_values(b, n, &v, &fits) != 0) return;
    char x1[32], x2[32], x3[32], txt[160];
    double cap = r->cluster->gpu.mem_bytes, head = 0, rw = 0;
    for (int i = 0; i < n; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (s->status == AP_REPORT_ILLEGAL) continue;
        v[i] = s->est.device_peak_bytes;
        fits[i] = s->status == AP_REPORT_OK;
        cap = s->est.capacity_bytes;
        head = s->est.headroom_bytes;
        snprintf(txt, sizeof txt, "%s GiB of %s GiB",
                 rep_fmt_gib(s->est.device_peak_bytes, x1, sizeof x1),
                 rep_fmt_gib(s->est.capacity_bytes, x2, sizeof x2));
        double w = rep_text_width(txt, 12, 0);
        if (w > rw) rw = w;
    }
    /* the axis: the capacity, what fits, and what does not fit within 15% of that */
    double top_v = rep_fit_hi(v, fits, n, 1.15);
    if (cap > top_v) top_v = cap;
    for (int i = 0; i < n; i++)
        if (!fits[i] && v[i] > top_v && v[i] <= 1.15 * top_v) top_v = v[i];
    ap_free(v);
    ap_free(fits);
    double step = rep_nice_step(top_v / GiB) * GiB;
    double hi = step * ceil(top_v / step * 1.02);
    if (!(hi > 0)) hi = step = GiB;

    rbuf leg = {0};
    bar_frame f = legend_layout(r, rw, &leg, "m", rep_mem_parts, REP_NMEM);
    double H = f.yb + 50, end = f.LX + f.PW;
    rb_printf(b, "<svg id=\"chart-memory\" class=\"chart\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
              "height=\"%.0f\" role=\"img\" data-plot-x0=\"%.1f\" data-plot-x1=\"%.1f\" "
              "aria-labelledby=\"chart-memory-title\"><title id=\"chart-memory-title\">Device "
              "memory per GPU of the worst pipeline stage, GiB, against the GPU capacity</title>",
              f.W, H, f.W, H, f.LX, end);
    svg_patterns(b, "m", rep_mem_parts, REP_NMEM);
    put_legend(b, &leg);
    svg_xaxis(b, f.LX, f.PW, f.top, f.yb, hi, step, "device memory per GPU, worst stage (GiB)", GiB);
    for (int i = 0; i < n; i++) {
        const ap_report_strategy *s = &r->strat[i];
        double y;
        if (!bar_row(b, &f, s, i, &y)) continue;
        ap_report_row o;
        ap_report_row_from_estimate(&s->est, &o);
        int beyond = o.device_peak_bytes > hi * (1 + 1e-9);
        bar_open(b, s, beyond);
        double x = f.LX;
        for (int j = 0; j < REP_NMEM; j++) {
            double val = rep_mem_part(&o, j), w = f.PW * val / hi;
            if (val <= 0 || x >= end) continue;
            if (x + w > end) w = end - x;
            rb_printf(b, "<rect class=\"seg\" data-part=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                      "height=\"%.0f\" fill=\"", rep_mem_parts[j].key ? rep_mem_parts[j].key : "runtime",
                      x, y, w, f.BH);
            svg_fill(b, "m", rep_mem_parts, j);
            rb_printf(b, "\"><title>%s %s GiB</title></rect>", rep_mem_parts[j].name,
                      rep_fmt_gib(val, x1, sizeof x1));
            x += w;
        }
        if (beyond) svg_break(b, end, y, f.BH);
        int over = !o.fits;
        if (over) {
            double from = f.LX + f.PW * (o.capacity_bytes - o.headroom_bytes) / hi;
            double to = beyond ? end : f.LX + f.PW * o.device_peak_bytes / hi;
            if (to < from + 2) to = from + 2;
            rb_printf(b, "<g class=\"over\"><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" "
                      "fill=\"none\" stroke=\"#D55E00\" stroke-width=\"3\" stroke-dasharray=\"4 2\"/></g>",
                      from, y - 3, to - from, f.BH + 6);
        }
        rb_printf(b, "<text class=\"barlabel\" x=\"%.1f\" y=\"%.1f\">%s GiB of %s GiB", end + 8,
                  y + 4, rep_fmt_gib(o.device_peak_bytes, x1, sizeof x1),
                  rep_fmt_gib(o.capacity_bytes, x2, sizeof x2));
        if (over && rep_overshoot_bytes(&o) > 0)
            rb_printf(b, "<tspan x=\"%.1f\" dy=\"14\">OVER by %s GiB</tspan>", end + 8,
                      rep_fmt_gib(rep_overshoot_bytes(&o), x3, sizeof x3));
        else if (over)
            rb_printf(b, "<tspan x=\"%.1f\" dy=\"14\">host memory OVER</tspan>", end + 8);
        rb_puts(b, "</text></g>");
    }
    if (cap > 0) {
        double xc = f.LX + f.PW * cap / hi, xu = f.LX + f.PW * (cap - head) / hi;
        rb_printf(b, "<line class=\"capacity\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.2f\" y=\"%.1f\" text-anchor=\"end\">capacity %s GiB</text>",
                  xc, f.top - 4, xc, f.yb, xc - 3, f.top - 6, rep_fmt_gib(cap, x1, sizeof x1));
        if (head > 0)
            rb_printf(b, "<line class=\"usable\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\"/>",
                      xu, f.top, xu, f.yb);
    }
    rb_puts(b, "</svg>\n");
}

/* ---- (3) memory against throughput -------------------------------------------------------- */

/* A row's place on the scatter, sorted by memory (then throughput, descending). */
typedef struct {
    double mem, tps;
    int64_t i;
} pareto_key;

/* a before b: less memory, or as much and at least the throughput (the merge keeps a first
 * on a tie, so equal keys stay in row order) */
static int key_first(const pareto_key *a, const pareto_key *b) {
    return a->mem < b->mem || (a->mem == b->mem && a->tps >= b->tps);
}

/* the Pareto front of the rows: sorted by memory (ties: faster first), each plan faster than
 * every plan with less memory; idx gets the memory order, front[i] = 1 on the front */
static int64_t pareto(const ap_report *r, int64_t *idx, char *front) {
    int64_t n = r->nrows;
    /* the keys side by side (a sort through the rows' indices missed the cache on each
     * comparison), merged bottom-up between two arrays */
    pareto_key *key = n ? ap_malloc((size_t)n * sizeof *key) : NULL;
    pareto_key *tmp = n ? ap_malloc((size_t)n * sizeof *tmp) : NULL;
    if (n && (!key || !tmp)) {
        ap_free(key);
        ap_free(tmp);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        key[i] = (pareto_key){r->rows[i].device_peak_bytes, r->rows[i].tokens_per_s, i};
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n;
            int64_t hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, c = mid, k = lo;
            while (a < mid && c < hi) tmp[k++] = key_first(&key[a], &key[c]) ? key[a++] : key[c++];
            while (a < mid) tmp[k++] = key[a++];
            while (c < hi) tmp[k++] = key[c++];
        }
        pareto_key *t = key;
        key = tmp;
        tmp = t;
    }
    for (int64_t i = 0; i < n; i++) idx[i] = key[i].i;
    ap_free(key);
    ap_free(tmp);
    double best_y = -1;
    int64_t nfront = 0;
    for (int64_t i = 0; i < n; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (q->tokens_per_s > best_y) {
            best_y = q->tokens_per_s;
            front[idx[i]] = 1;
            nfront++;
        }
    }
    return nfront;
}

typedef struct {
    double X0, Y0, PW, PH;
    rep_scale xs, ys;
} scatter_frame;

static double sx(const scatter_frame *f, double bytes) {
    return f->X0 + f->PW * (bytes - f->xs.lo) / (f->xs.hi - f->xs.lo);
}
static double sy(const scatter_frame *f, double tps) {
    return f->Y0 + f->PH - f->PH * (tps - f->ys.lo) / (f->ys.hi - f->ys.lo);
}

/* the axes: memory up to the capacity, both over the feasible plans and the strategies that
 * fit (from 0 unless that leaves most of the plot empty: rep_axis) */
static void scatter_scales(const ap_report *r, double cap, scatter_frame *f) {
    double xmin = INFINITY, xmax = cap, ymin = INFINITY, ymax = 0;
    int any = 0;
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[i];
        if (q->device_peak_bytes > xmax) xmax = q->device_peak_bytes;
        if (q->device_peak_bytes < xmin) xmin = q->device_peak_bytes;
        if (q->tokens_per_s > ymax) ymax = q->tokens_per_s;
        if (q->tokens_per_s < ymin) ymin = q->tokens_per_s;
        any = 1;
    }
    for (int pass = 0; pass < 2 && !any; pass++) {
        /* pass 0: strategies that fit; pass 1 (none fit, no rows): all of them */
        for (int i = 0; i < r->nstrat; i++) {
            const ap_report_strategy *s = &r->strat[i];
            if (s->status == AP_REPORT_ILLEGAL || (pass == 0 && s->status != AP_REPORT_OK))
                continue;
            if (s->est.device_peak_bytes > xmax) xmax = s->est.device_peak_bytes;
            if (s->est.device_peak_bytes < xmin) xmin = s->est.device_peak_bytes;
            if (s->est.tp.tokens_per_s > ymax) ymax = s->est.tp.tokens_per_s;
            if (s->est.tp.tokens_per_s < ymin) ymin = s->est.tp.tokens_per_s;
            any = 1;
        }
    }
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (s->status != AP_REPORT_OK) continue;
        if (s->est.device_peak_bytes > xmax) xmax = s->est.device_peak_bytes;
        if (s->est.device_peak_bytes < xmin) xmin = s->est.device_peak_bytes;
        if (s->est.tp.tokens_per_s > ymax) ymax = s->est.tp.tokens_per_s;
        if (s->est.tp.tokens_per_s < ymin) ymin = s->est.tp.tokens_per_s;
    }
    if (!(ymin < INFINITY)) ymin = 0;
    if (!(xmin < INFINITY)) xmin = 0;
    double xpad = (xmax - xmin) * 0.03;
    rep_axis((xmin - xpad) / GiB, (xmax + (xpad > 0 ? xpad : xmax * 0.02)) / GiB, 0, &f->xs);
    f->xs.lo *= GiB;
    f->xs.hi *= GiB;
    f->xs.step *= GiB;
    double pad = (ymax - ymin) * 0.04;
    rep_axis(ymin - pad, ymax + (pad > 0 ? pad : ymax * 0.02), 0, &f->ys);
}

/* compared strategies at one spot share a label: names joined in table order */
typedef struct {
    double x, y;       /* marker, clamped to the plot (an arrow's tip) */
    double cx, cy;     /* the marker's centre */
    int off_x, off_y;  /* the true value lies beyond the axis (1) or below it (-1) */
    int first;         /* index of the first strategy */
    char text[256];
} spot;

static void scatter_labels(rbuf *b, const ap_report *r, const scatter_frame *f, double kx,
                           double key_bottom, double W, double H) {
    spot *sp = ap_calloc((size_t)(r->nstrat > 0 ? r->nstrat : 1), sizeof *sp);
    if (!sp) {
        b->failed = 1;
        return;
    }
    int ns = 0;
    char x1[32], x2[32];
    for (int i = 0; i < r->nstrat; i++) {
        const ap_report_strategy *s = &r->strat[i];
        if (s->status == AP_REPORT_ILLEGAL) continue;
        double x = sx(f, s->est.device_peak_bytes), y = sy(f, s->est.tp.tokens_per_s);
        int ox = 0, oy = 0;
        if (x > f->X0 + f->PW) { x = f->X0 + f->PW; ox = 1; }
        if (y < f->Y0) { y = f->Y0; oy = 1; }
        if (y > f->Y0 + f->PH) { y = f->Y0 + f->PH; oy = -1; }
        int k;
        for (k = 0; k < ns; k++)
            if (fabs(sp[k].x - x) < 1 && fabs(sp[k].y - y) < 1 && sp[k].off_x == ox &&
                sp[k].off_y == oy)
                break;
        char one[160];
        snprintf(one, sizeof one, "%s%s", s->name,
                 s->status == AP_REPORT_NOFIT ? " (does not fit)" : "");
        if (k < ns) {
            size_t l = strlen(sp[k].text);
            snprintf(sp[k].text + l, sizeof sp[k].text - l, ", %s", one);
            continue;
        }
        spot *p = &sp[ns++];
        p->x = x;
        p->y = y;
        /* an arrow's centre lies 6 units inside the plot from its tip on the edge */
        p->cx = x - 6 * (ox ? 1 : 0);
        p->cy = y + 6 * oy;
        p->off_x = ox;
        p->off_y = oy;
        p->first = i;
        snprintf(p->text, sizeof p->text, "%s", one);
        if (ox || oy) {
            /* the value off the axis goes into the label */
            size_t l = strlen(p->text);
            snprintf(p->text + l, sizeof p->text - l, ": %s GiB, %s tokens/s",
                     rep_fmt_gib(s->est.device_peak_bytes, x1, sizeof x1),
                     rep_fmt_tps(s->est.tp.tokens_per_s, x2, sizeof x2));
        }
    }
    /* every marker is an obstacle for every label */
    rep_boxes taken;
    taken.n = 0;
    for (int k = 0; k < ns; k++) {
        rep_box m = {sp[k].cx - 7, sp[k].cy - 7, sp[k].cx + 7, sp[k].cy + 7};
        rep_boxes_add(&taken, m);
    }
    rep_box bounds = {f->X0 + 2, f->Y0 + 2, f->X0 + f->PW - 2, f->Y0 + f->PH - 2};
    rep_box side = {kx, key_bottom + 8, W - 4, H};
    for (int k = 0; k < ns; k++) {
        const spot *p = &sp[k];
        double w = rep_text_width(p->text, 12, 0);
        rep_label l = rep_place_label(&taken, &bounds, &side, p->cx, p->cy, w, 12);
        rb_printf(b, "<g class=\"strat\" data-strategy=\"");
        rb_html(b, r->strat[p->first].name);
        rb_puts(b, "\">");
        if (p->off_x || p->off_y) {
            /* an arrow inside the plot, its tip on the edge, pointing to where the value lies */
            double dx = p->off_x ? 1 : 0, dy = p->off_y > 0 ? -1 : p->off_y < 0 ? 1 : 0;
            double bx = p->x - 11 * dx, by = p->y - 11 * dy;
            rb_printf(b, "<path class=\"offscale\" d=\"M%.1f %.1f L%.1f %.1f L%.1f %.1f Z\"/>",
                      p->x, p->y, bx + 5 * dy, by - 5 * dx, bx - 5 * dy, by + 5 * dx);
        } else {
            rb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>", p->x, p->y);
        }
        if (l.leader) {
            double ex, ey;
            rep_label_leader_end(&l, p->cx, p->cy, &ex, &ey);
            rb_printf(b, "<line class=\"leader\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                      p->cx, p->cy, ex, ey);
        }
        rb_printf(b, "<text class=\"stratlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", l.x,
                  l.y, rep_anchor_name(l.anchor));
        rb_html(b, p->text);
        rb_puts(b, "</text></g>");
    }
    ap_free(sp);
}

void rep_chart_scatter(rbuf *b, const ap_report *r) {
    const double W = 1000, H = 540;
    scatter_frame f = {.X0 = 90, .Y0 = 30, .PW = 690, .PH = 420};
    double cap = r->cluster->gpu.mem_bytes;
    for (int i = 0; i < r->nstrat; i++)
        if (r->strat[i].status != AP_REPORT_ILLEGAL) cap = r->strat[i].est.capacity_bytes;
    scatter_scales(r, cap, &f);
    int64_t *idx = r->nrows ? ap_malloc((size_t)r->nrows * sizeof *idx) : NULL;
    char *front = r->nrows ? ap_calloc((size_t)r->nrows, 1) : NULL;
    int64_t nfront = r->nrows && idx && front ? pareto(r, idx, front) : 0;
    if (r->nrows && (!idx || !front || nfront < 0)) {
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
              "data-front=\"%lld\" data-sampled=\"%lld\" data-plot=\"%.1f %.1f %.1f %.1f\">"
              "<title id=\"chart-scatter-title\">Device memory (GiB) against throughput (tokens/s) "
              "of the feasible evaluated plans</title>",
              W, H, W, H, (long long)r->evaluated, (long long)r->fit, (long long)nfront,
              (long long)nsample, f.X0, f.Y0, f.X0 + f.PW, f.Y0 + f.PH);
    /* axes */
    for (double v = f.xs.lo; v <= f.xs.hi * (1 + 1e-9); v += f.xs.step) {
        double x = sx(&f, v);
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>",
                  x, f.Y0, x, f.Y0 + f.PH, x, f.Y0 + f.PH + 16, v / GiB);
    }
    for (double v = f.ys.lo; v <= f.ys.hi * (1 + 1e-9); v += f.ys.step) {
        double y = sy(&f, v);
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  f.X0, y, f.X0 + f.PW, y, f.X0 - 10, y + 4, v); /* clear of the x ticks */
    }
    rb_printf(b, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">device "
              "memory per GPU, worst stage (GiB)</text>", f.X0 + f.PW / 2, f.Y0 + f.PH + 34);
    rb_printf(b, "<text class=\"axis-title\" transform=\"translate(18 %.1f) rotate(-90)\" "
              "text-anchor=\"middle\">throughput (tokens/s)%s</text>", f.Y0 + f.PH / 2,
              f.ys.lo > 0 ? ", axis from a nonzero value" : "");
    /* sampled points: every k-th non-front plan in step-time order */
    rb_puts(b, "<g class=\"samples\">");
    int64_t seen = 0, drawn = 0;
    for (int64_t i = 0; i < r->nrows && drawn < nsample; i++) {
        if (front[i]) continue;
        if (seen++ * nsample / (nrest ? nrest : 1) < drawn) continue;
        const ap_report_row *q = &r->rows[i];
        rb_printf(b, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2\"/>",
                  sx(&f, q->device_peak_bytes), sy(&f, q->tokens_per_s));
        drawn++;
    }
    rb_puts(b, "</g><polyline class=\"front\" points=\"");
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (front[idx[i]])
            rb_printf(b, "%.1f,%.1f ", sx(&f, q->device_peak_bytes), sy(&f, q->tokens_per_s));
    }
    rb_puts(b, "\"/><g class=\"fronts\">");
    for (int64_t i = 0; i < r->nrows; i++) {
        const ap_report_row *q = &r->rows[idx[i]];
        if (front[idx[i]])
            rb_printf(b, "<rect class=\"front-pt\" x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\"/>",
                      sx(&f, q->device_peak_bytes) - 3, sy(&f, q->tokens_per_s) - 3);
    }
    rb_puts(b, "</g>");
    ap_free(idx);
    ap_free(front);
    /* capacity line */
    char x1[32];
    double xc = sx(&f, cap);
    rb_printf(b, "<line class=\"capacity\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
              "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">capacity %s GiB</text>",
              xc, f.Y0, xc, f.Y0 + f.PH, xc - 3, f.Y0 - 6, rep_fmt_gib(cap, x1, sizeof x1));
    /* key */
    double kx = f.X0 + f.PW + 14;
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
              kx + 4, f.Y0 + 10, kx + 14, f.Y0 + 14, kx + 1, f.Y0 + 27, kx + 14, f.Y0 + 34, kx + 4,
              f.Y0 + 50, kx + 14, f.Y0 + 54, kx, f.Y0 + 80, (long long)r->evaluated, kx, f.Y0 + 96,
              (long long)r->fit, kx, f.Y0 + 112, (long long)nfront, kx, f.Y0 + 128,
              (long long)nsample);
    /* compared strategies last, labelled where no label or marker is */
    scatter_labels(b, r, &f, kx, f.Y0 + 132, W, H);
    rb_puts(b, "</svg>\n");
}
