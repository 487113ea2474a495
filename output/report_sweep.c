/*
 * report_sweep.c - the GPU-count sweep of `autoplan compare --gpus 64..1024` (report.h): the best
 * plan at each count, found exactly as `autoplan plan --gpus <count>` finds it (ap_search with
 * its re-split), and its renderings: chart 4 of report.html (tokens/s and time to train
 * against GPUs, inline SVG) and the sweep table of report.md.
 *
 * Chart: the x axis is logarithmic in the GPU count (base 2; a tick labelled with each count
 * asked), two panels share it: throughput of the best plan (tokens/s, from 0) and, with
 * --tokens, the time to train (days = tokens / tokens_per_s / 86400, as `plan --tokens`
 * computes time_to_train_s). Points carry their numbers as data attributes (the estimate fields,
 * %.17g) and as text; series are named in text beside their last point, and told apart by
 * marker shape (circle, square) and line style as well as colour (Okabe-Ito). A count where
 * nothing fits has no point and says so under the axis.
 *
 * Not here: choosing the counts (cli/cmd_compare.c builds one cluster per count as the plan
 * command does); the strategies of the report, which are for the first count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/partition.h"
#include "report_int.h"

#define DAY_S 86400.0

ap_status ap_report_sweep(const ap_model *m, const ap_cluster *clusters, int n,
                          const ap_search_opts *so, int solver, double train_tokens,
                          ap_report *r, ap_err *err) {
    ap_free(r->sweep);
    r->sweep = NULL;
    r->nsweep = 0;
    r->train_tokens = train_tokens > 0 ? train_tokens : 0;
    if (n <= 0) return AP_OK;
    ap_report_sweep_point *pts = ap_calloc((size_t)n, sizeof *pts);
    if (!pts) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the GPU-count sweep");
    ap_search_opts o = *so;
    o.visit = NULL;
    o.visit_ctx = NULL;
    o.max_evals = 0;
    /* the chart reads each count's first plan, which does not depend on K (search.h "Ties") */
    o.top_k = 1;
    o.resplit = solver >= 0;
    o.resplit_solver = solver >= 0 ? solver : AP_SOLVER_DP;
    /* the counts side by side, each as `plan --gpus <count>` alone finds it */
    ap_search_result *res = ap_calloc((size_t)n, sizeof *res);
    ap_status *sts = ap_calloc((size_t)n, sizeof *sts);
    ap_err *errs = ap_calloc((size_t)n, sizeof *errs);
    ap_status st = res && sts && errs ? AP_OK
                                      : ap_err_set(err, AP_ERR_NOMEM, "out of memory for the sweep");
    if (st == AP_OK) ap_search_many(m, clusters, n, &o, res, sts, errs);
    for (int i = 0; i < n && st == AP_OK; i++) {
        if (sts[i] != AP_OK) {
            st = sts[i];
            *err = errs[i];
            ap_err_prefix(err, "--gpus %d", clusters[i].gpus);
            break;
        }
        ap_report_sweep_point *pt = &pts[i];
        pt->gpus = clusters[i].gpus;
        if (res[i].ntop > 0) {
            const ap_estimate *e = &res[i].top[0];
            pt->fits = 1;
            ap_plan_label(&e->plan, pt->label, sizeof pt->label);
            pt->step_s = e->time.step_s;
            pt->tokens_per_s = e->tp.tokens_per_s;
            pt->mfu = e->tp.mfu;
            pt->device_peak_bytes = e->device_peak_bytes;
            pt->capacity_bytes = e->capacity_bytes;
            if (r->train_tokens > 0 && pt->tokens_per_s > 0)
                pt->time_to_train_s = r->train_tokens / pt->tokens_per_s;
        }
    }
    for (int i = 0; res && sts && i < n; i++)
        if (sts[i] == AP_OK) ap_search_result_free(&res[i]);
    ap_free(res);
    ap_free(sts);
    ap_free(errs);
    if (st != AP_OK) {
        ap_free(pts);
        return st;
    }
    r->sweep = pts;
    r->nsweep = n;
    return AP_OK;
}

/* ---- chart 4 -------------------------------------------------------------------------------- */

/* a token count as --tokens takes it: 2T, 300B, 1.5e+15 */
static char *fmt_tokens(double v, char *buf, size_t n) {
    if (v >= 1e15) snprintf(buf, n, "%.3g", v);
    else if (v >= 1e12) snprintf(buf, n, "%gT", v / 1e12);
    else if (v >= 1e9) snprintf(buf, n, "%gB", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%gM", v / 1e6);
    else snprintf(buf, n, "%g", v);
    return buf;
}

/* tick text for a throughput: 0, 500, 2k, 1.5M */
static void tick_si(double v, char *buf, size_t n) {
    if (v >= 1e6) snprintf(buf, n, "%gM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%gk", v / 1e3);
    else snprintf(buf, n, "%g", v);
}

typedef struct {
    double x0, w, lo, hi; /* log2 of the smallest and largest count */
} xscale;

static double xpos(const xscale *s, int gpus) {
    if (s->hi <= s->lo) return s->x0 + s->w / 2;
    return s->x0 + s->w * (0.04 + 0.92 * (log2((double)gpus) - s->lo) / (s->hi - s->lo));
}

/* indices of the points in increasing GPU count (the polyline order) */
static int *by_gpus(const ap_report *r) {
    int *idx = ap_malloc((size_t)r->nsweep * sizeof *idx);
    if (!idx) return NULL;
    for (int i = 0; i < r->nsweep; i++) {
        int j = i;
        while (j > 0 && r->sweep[idx[j - 1]].gpus > r->sweep[i].gpus) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return idx;
}

/* One panel: y from 0 to a nice maximum of the values, points, line, value labels and the
 * series name beside the last point. which = 0: tokens/s, 1: time to train (days). */
static void panel(rbuf *b, const ap_report *r, const int *idx, const xscale *xs, double y0,
                  double ph, int which) {
    double ymax = 0;
    for (int i = 0; i < r->nsweep; i++) {
        const ap_report_sweep_point *p = &r->sweep[i];
        if (!p->fits) continue;
        double v = which ? p->time_to_train_s / DAY_S : p->tokens_per_s;
        if (v > ymax) ymax = v;
    }
    double ys = rep_nice_step(ymax);
    ymax = ys * ceil(ymax / ys * 1.08);
    if (!(ymax > 0)) ymax = 1;
    char t[32];
    for (double v = 0; v <= ymax * (1 + 1e-9); v += ys) {
        double y = y0 + ph - ph * v / ymax;
        if (which) snprintf(t, sizeof t, "%g", v);
        else tick_si(v, t, sizeof t);
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>",
                  xs->x0, y, xs->x0 + xs->w, y, xs->x0 - 5, y + 4, t);
    }
    rb_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
              xs->x0, y0 + ph, xs->x0 + xs->w, y0 + ph);
    rb_printf(b, "<text class=\"axis-title\" transform=\"translate(22 %.1f) rotate(-90)\" "
              "text-anchor=\"middle\">%s</text>", y0 + ph / 2,
              which ? "time to train (days)" : "throughput (tokens/s)");
    /* the counts: a tick per count asked, labelled with it */
    for (int k = 0; k < r->nsweep; k++) {
        const ap_report_sweep_point *p = &r->sweep[idx[k]];
        if (k > 0 && r->sweep[idx[k - 1]].gpus == p->gpus) continue;
        double x = xpos(xs, p->gpus);
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick gpus\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>",
                  x, y0, x, y0 + ph + 4, x, y0 + ph + 16, p->gpus);
        if (!p->fits)
            rb_printf(b, "<text class=\"na\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
                      "nothing fits</text>", x, y0 + ph - 6);
    }
    rb_printf(b, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">GPUs "
              "(log scale)</text>", xs->x0 + xs->w / 2, y0 + ph + 34);
    /* the line through the fitting points, then the points with their values */
    rb_printf(b, "<polyline class=\"%s\" points=\"", which ? "sw-ttt-line" : "sw-line");
    for (int k = 0; k < r->nsweep; k++) {
        const ap_report_sweep_point *p = &r->sweep[idx[k]];
        if (!p->fits) continue;
        double v = which ? p->time_to_train_s / DAY_S : p->tokens_per_s;
        rb_printf(b, "%.1f,%.1f ", xpos(xs, p->gpus), y0 + ph - ph * v / ymax);
    }
    rb_puts(b, "\"/>");
    double lastx = -1, lasty = 0;
    char v1[32];
    for (int k = 0; k < r->nsweep; k++) {
        const ap_report_sweep_point *p = &r->sweep[idx[k]];
        if (!p->fits) continue;
        double x = xpos(xs, p->gpus);
        if (which) {
            double d = p->time_to_train_s / DAY_S, y = y0 + ph - ph * d / ymax;
            rb_printf(b, "<rect class=\"sw-ttt-pt\" x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" "
                      "data-gpus=\"%d\" data-time-to-train-s=\"%.17g\"><title>%d GPUs: %.2f days"
                      "</title></rect><text class=\"sw-val\" x=\"%.1f\" y=\"%.1f\" "
                      "text-anchor=\"middle\">%.2f d</text>", x - 4, y - 4, p->gpus,
                      p->time_to_train_s, p->gpus, d, x, y - 11, d);
            lastx = x;
            lasty = y;
        } else {
            double y = y0 + ph - ph * p->tokens_per_s / ymax;
            rep_fmt_tps(p->tokens_per_s, v1, sizeof v1);
            rb_printf(b, "<circle class=\"sw-pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" data-gpus=\"%d\" "
                      "data-tokens-per-s=\"%.17g\"><title>%d GPUs: ", x, y, p->gpus,
                      p->tokens_per_s, p->gpus);
            rb_html(b, p->label);
            rb_printf(b, ", %s tokens/s</title></circle><text class=\"sw-val\" x=\"%.1f\" "
                      "y=\"%.1f\" text-anchor=\"middle\">%s</text>", v1, x, y - 11, v1);
            lastx = x;
            lasty = y;
        }
    }
    if (lastx >= 0) {
        /* right of the last point, below its value label (value above at y - 11) */
        rb_printf(b, "<text class=\"series\" x=\"%.1f\" y=\"%.1f\">", lastx + 12, lasty + 6);
        char tk[32];
        if (which) rb_printf(b, "time to train %s tokens", fmt_tokens(r->train_tokens, tk, sizeof tk));
        else rb_puts(b, "best plan, tokens/s");
        rb_puts(b, "</text>");
    }
}

void rep_sweep_html(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>4. Tokens/s and time to train against GPUs</h2>\n");
    if (r->nsweep == 0) {
        rb_puts(b, "<p class=\"note\" id=\"sweep-absent\">No GPU-count sweep was asked: give "
                   "<code>--gpus 64..1024</code> (powers of two) or a list "
                   "<code>--gpus 64,128,512</code> for this chart.</p>\n");
        return;
    }
    int *idx = by_gpus(r);
    if (!idx) {
        b->failed = 1;
        return;
    }
    char tk[32];
    fmt_tokens(r->train_tokens, tk, sizeof tk);
    rb_printf(b, "<p>The best plan at each GPU count, as <code>autoplan plan --gpus N</code> "
              "finds it (searched with the same trainer, batch and flags; the strategies above "
              "are for the first count, %d).", r->sweep[0].gpus);
    if (r->train_tokens > 0)
        rb_printf(b, " Time to train = %s tokens / tokens_per_s, without restarts or "
                  "evaluation.</p>\n", tk);
    else
        rb_puts(b, " Time to train needs <code>--tokens N</code> (e.g. <code>--tokens 2T</code>); "
                   "only tokens/s is drawn.</p>\n");
    int fitting = 0;
    for (int i = 0; i < r->nsweep; i++) fitting += r->sweep[i].fits;
    const double W = 1000, X0 = 90, PW = 700, PH = 220, Y0 = 30;
    int two = r->train_tokens > 0;
    double H = Y0 + PH + 56 + (two ? PH + 60 : 0);
    xscale xs = {X0, PW, log2((double)r->sweep[idx[0]].gpus),
                 log2((double)r->sweep[idx[r->nsweep - 1]].gpus)};
    rb_printf(b, "<svg id=\"chart-sweep\" class=\"chart\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
              "height=\"%.0f\" role=\"img\" aria-labelledby=\"chart-sweep-title\" "
              "data-counts=\"%d\" data-points=\"%d\" data-time-to-train=\"%d\">"
              "<title id=\"chart-sweep-title\">Throughput of the best plan (tokens/s)%s against "
              "the number of GPUs, log scale</title>", W, H, W, H, r->nsweep, fitting, two,
              two ? " and time to train (days)" : "");
    panel(b, r, idx, &xs, Y0, PH, 0);
    if (two) panel(b, r, idx, &xs, Y0 + PH + 60, PH, 1);
    else
        rb_printf(b, "<text class=\"na\" x=\"%.1f\" y=\"%.1f\">time to train: needs --tokens N"
                  "</text>", X0, H - 4);
    rb_puts(b, "</svg>\n");
    ap_free(idx);
    /* the numbers as a table */
    char a[32];
    rb_puts(b, "<div class=\"scroll\"><table id=\"sweep\"><thead><tr><th>GPUs</th><th>best plan</th>"
               "<th title=\"estimate --json: time.step_s\">step time (s)</th>"
               "<th title=\"estimate --json: throughput.tokens_per_s\">tokens/s</th>"
               "<th title=\"estimate --json: throughput.mfu\">MFU (%)</th>"
               "<th title=\"estimate --json: memory.device_peak_bytes\">peak memory (GiB)</th>"
               "<th title=\"plan --json: sweep[].time_to_train_s / 86400\">time to train "
               "(days)</th></tr></thead><tbody>\n");
    for (int i = 0; i < r->nsweep; i++) {
        const ap_report_sweep_point *p = &r->sweep[i];
        rb_printf(b, "<tr><td>%d</td>", p->gpus);
        if (!p->fits) {
            rb_puts(b, "<td class=\"l\" colspan=\"6\">nothing fits</td></tr>\n");
            continue;
        }
        rb_puts(b, "<td class=\"l plan\">");
        rb_html(b, p->label);
        rb_printf(b, "</td><td>%s</td>", rep_fmt_s(p->step_s, a, sizeof a));
        rb_printf(b, "<td>%s</td>", rep_fmt_tps(p->tokens_per_s, a, sizeof a));
        rb_printf(b, "<td>%s</td>", rep_fmt_pct(p->mfu, a, sizeof a));
        rb_printf(b, "<td>%s</td>", rep_fmt_gib(p->device_peak_bytes, a, sizeof a));
        if (p->time_to_train_s > 0) rb_printf(b, "<td>%.2f</td></tr>\n", p->time_to_train_s / DAY_S);
        else rb_puts(b, "<td></td></tr>\n");
    }
    rb_puts(b, "</tbody></table></div>\n");
}

void rep_sweep_md(rbuf *b, const ap_report *r) {
    rb_puts(b, "\n## GPU-count sweep\n\n");
    if (r->nsweep == 0) {
        rb_puts(b, "No GPU-count sweep was asked (`--gpus 64..1024` or `--gpus 64,128,512`).\n");
        return;
    }
    rb_printf(b, "The best plan at each GPU count: `autoplan plan --gpus N --json` with the same "
              "flags gives it as plans[0]. The strategies above are for the first count (%d). ",
              r->sweep[0].gpus);
    char tk[32];
    if (r->train_tokens > 0)
        rb_printf(b, "Time to train = %s tokens / tokens_per_s / 86400 (days; `plan --tokens` "
                  "gives time_to_train_s), without restarts or evaluation.\n\n",
                  fmt_tokens(r->train_tokens, tk, sizeof tk));
    else
        rb_puts(b, "Time to train needs `--tokens N` (e.g. `--tokens 2T`).\n\n");
    rb_puts(b, "| GPUs | best plan | step_s (s) | tokens_per_s | mfu (%) | device_peak_bytes (GiB) "
               "| time to train (days) |\n|--:|---|--:|--:|--:|--:|--:|\n");
    char a[32];
    for (int i = 0; i < r->nsweep; i++) {
        const ap_report_sweep_point *p = &r->sweep[i];
        if (!p->fits) {
            rb_printf(b, "| %d | nothing fits | | | | | |\n", p->gpus);
            continue;
        }
        rb_printf(b, "| %d | ", p->gpus);
        rb_md(b, p->label);
        rb_printf(b, " | %s", rep_fmt_s(p->step_s, a, sizeof a));
        rb_printf(b, " | %s", rep_fmt_tps(p->tokens_per_s, a, sizeof a));
        rb_printf(b, " | %s", rep_fmt_pct(p->mfu, a, sizeof a));
        rb_printf(b, " | %s", rep_fmt_gib(p->device_peak_bytes, a, sizeof a));
        if (p->time_to_train_s > 0) rb_printf(b, " | %.2f |\n", p->time_to_train_s / DAY_S);
        else rb_puts(b, " | |\n");
    }
}
