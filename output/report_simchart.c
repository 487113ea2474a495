/*
 * report_simchart.c - memory over one training iteration of the report's best plan, from the
 * simulator (sim.h; report.h ap_report_simulate): chart 5 of report.html and its table in
 * report.md.
 *
 * The chart shows the worst pipeline stage (ap_sim_worst_rank: highest device peak), x = its
 * operations in execution order (setup, forward/backward per micro-batch, gradient reduction,
 * optimizer step), y = GiB. Per operation the allocated value is the highest live requested
 * bytes over the operation's events (ap_sim_rank.allocated_curve), the reserved value the
 * highest allocator-reserved bytes (reserved_curve); an operation without events keeps the
 * values of the last event before it. Operations are then merged into at most MAX_POINTS runs,
 * each drawn at its maximum, so the allocated peak (allocated_peak_bytes, `autoplan simulate
 * --json`) is a point of the curve; it is marked and labelled with the operation where it
 * happens (ap_sim_op_describe). The capacity and the reserved limit (capacity - headroom -
 * device overhead: the reserved curve must stay under it for the plan to fit) are lines.
 *
 * Not here: the replay itself (sim/sim.c) and the simulator's text and trace outputs
 * (cli/cmd_simulate.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_int.h"

#define MAX_POINTS 500

ap_status ap_report_simulate(ap_report *r, const ap_sim_opts *o, ap_err *err) {
    ap_sim_free(r->sim);
    r->sim = NULL;
    r->sim_note[0] = '\0';
    if (r->best < 0) {
        snprintf(r->sim_note, sizeof r->sim_note, "none of the compared strategies fits, so "
                 "there is no best plan to simulate");
        return AP_OK;
    }
    const ap_estimate *e = &r->strat[r->best].est;
    ap_sim_opts so;
    if (o) {
        so = *o;
    } else {
        /* as `autoplan simulate` with the plan's flags: caching allocator, its headroom */
        ap_sim_opts_init(&so);
        so.headroom_bytes = e->headroom_bytes;
        so.device_overhead_bytes = e->device_overhead_bytes; /* the estimate's NCCL */
    }
    so.record_curves = 1;
    /* chart 5 draws the worst stage alone: the others keep their summaries only, and the
       stages replay side by side on the report's threads */
    so.keep_worst = 1;
    so.threads = r->threads;
    ap_err e2 = {{0}};
    ap_status st = ap_sim_run(r->model, r->cluster, &e->plan, &so, &r->sim, &e2);
    if (st == AP_ERR_NOMEM) return ap_err_set(err, st, "simulating the best plan: %s", e2.msg);
    if (st != AP_OK) {
        r->sim = NULL;
        snprintf(r->sim_note, sizeof r->sim_note, "the simulator cannot replay the best plan: %.400s",
                 e2.msg);
    }
    return AP_OK;
}

/* ---- chart 5 -------------------------------------------------------------------------------- */

/* a label right of the plot */
typedef struct {
    double y;
    char text[64];
    const char *cls; /* "tick" or "series" */
} side_label;

/* per-operation maxima of the allocated and reserved curves of rank k (malloc'd; NULL = OOM) */
static int op_values(const ap_sim_rank *k, int64_t **alloc_out, int64_t **res_out) {
    int64_t *a = ap_malloc((size_t)k->nops * sizeof *a), *rs = ap_malloc((size_t)k->nops * sizeof *rs);
    if (!a || !rs) {
        ap_free(a);
        ap_free(rs);
        return -1;
    }
    int64_t pa = 0, pr = 0;
    for (int i = 0; i < k->nops; i++) {
        const ap_sim_op *op = &k->ops[i];
        int64_t ma = pa, mr = pr;
        if (op->ev_end > op->ev_begin) {
            ma = mr = 0;
            for (int ev = op->ev_begin; ev < op->ev_end && ev < k->nevents; ev++) {
                if (k->allocated_curve[ev] > ma) ma = k->allocated_curve[ev];
                if (k->reserved_curve[ev] > mr) mr = k->reserved_curve[ev];
            }
            int last = op->ev_end - 1 < k->nevents ? op->ev_end - 1 : k->nevents - 1;
            if (last >= 0) {
                pa = k->allocated_curve[last];
                pr = k->reserved_curve[last];
            }
        }
        a[i] = ma;
        rs[i] = mr;
    }
    *alloc_out = a;
    *res_out = rs;
    return 0;
}

static void absent(rbuf *b, const char *why) {
    rb_puts(b, "<p class=\"note\" id=\"sim-absent\">Absent: ");
    rb_html(b, why);
    rb_puts(b, ".</p>\n");
}

/* The chart's geometry: the SVG, the plot area, the y range (bytes) and the operations. */
typedef struct {
    double W, H, X0, PW, Y0, PH, ymax, ys;
    int n, nb; /* operations, points drawn */
} sim_geom;

static double xop(const sim_geom *g, int op) {
    return g->X0 + g->PW * ((double)op + 0.5) / (double)g->n;
}
static double yb(const sim_geom *g, double v) { return g->Y0 + g->PH - g->PH * v / g->ymax; }

/* The paragraph that says what the chart shows. */
static void sim_intro(rbuf *b, const ap_report *r, const ap_sim *s, const ap_sim_rank *k) {
    const ap_report_strategy *bs = &r->strat[r->best];
    char lbl[160], g1[32];
    rb_puts(b, "<p>One training iteration of the best plan, <b>");
    rb_html(b, bs->name);
    rb_puts(b, "</b> (");
    rb_html(b, ap_plan_label(&bs->est.plan, lbl, sizeof lbl));
    rb_printf(b, "), replayed allocation by allocation through the %s allocator model on its "
              "worst pipeline stage, stage %d (%d operations, %d events). Allocated = live "
              "tensor bytes, reserved = the allocator's segments; the device also holds %s GiB "
              "of CUDA context, cuBLAS workspace and NCCL buffers, so the reserved curve must stay "
              "under the dotted limit (capacity &#8722; headroom &#8722; that overhead). The "
              "numbers are <code>autoplan simulate --json</code> fields (command below).</p>\n",
              ap_alloc_mode_name(ap_sim_options(s)->allocator), k->stage, k->nops, k->nevents,
              rep_fmt_gib(ap_sim_overhead_bytes(s), g1, sizeof g1));
}

/* The svg element, grid, ticks, axis titles, and the capacity and reserved-limit lines. */
static void sim_axes(rbuf *b, const sim_geom *g, const ap_sim_rank *k, double cap, double limit) {
    rb_printf(b, "<svg id=\"chart-sim\" class=\"chart\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
              "height=\"%.0f\" role=\"img\" aria-labelledby=\"chart-sim-title\" data-stage=\"%d\" "
              "data-ops=\"%d\" data-points=\"%d\" data-allocated-peak-bytes=\"%lld\" "
              "data-reserved-peak-bytes=\"%lld\" data-capacity-bytes=\"%.17g\" "
              "data-peak-op=\"%d\"><title id=\"chart-sim-title\">Allocated and reserved device "
              "memory (GiB) of stage %d over the operations of one iteration, against the GPU "
              "capacity</title>", g->W, g->H, g->W, g->H, k->stage, g->n, g->nb,
              (long long)k->allocated_peak_bytes, (long long)k->reserved_peak_bytes, cap,
              k->peak_op, k->stage);
    for (double v = 0; v <= g->ymax * (1 + 1e-9); v += g->ys)
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                  g->X0, yb(g, v), g->X0 + g->PW, yb(g, v), g->X0 - 5, yb(g, v) + 4, v / AP_GIB);
    double xstep = rep_nice_step((double)g->n);
    for (double v = 0; v <= (double)g->n; v += xstep) {
        double x = g->X0 + g->PW * v / (double)g->n;
        rb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                  "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>",
                  x, g->Y0, x, g->Y0 + g->PH + 4, x, g->Y0 + g->PH + 16, v);
    }
    rb_printf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
              g->X0, g->Y0 + g->PH, g->X0 + g->PW, g->Y0 + g->PH);
    rb_printf(b, "<text class=\"axis-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">"
              "operation of one iteration on stage %d, in execution order (count)</text>",
              g->X0 + g->PW / 2, g->Y0 + g->PH + 34, k->stage);
    rb_printf(b, "<text class=\"axis-title\" transform=\"translate(22 %.1f) rotate(-90)\" "
              "text-anchor=\"middle\">device memory (GiB)</text>", g->Y0 + g->PH / 2);
    /* capacity and the reserved limit (their labels go with the series names, sim_labels) */
    if (cap > 0)
        rb_printf(b, "<line class=\"capacity\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  g->X0, yb(g, cap), g->X0 + g->PW, yb(g, cap));
    if (limit > 0)
        rb_printf(b, "<line class=\"usable\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  g->X0, yb(g, limit), g->X0 + g->PW, yb(g, limit));
}

/* The reserved and allocated curves, each run of operations at its maximum; yend[] = the y of
 * each curve's last point. */
static void sim_curves(rbuf *b, const sim_geom *g, const int64_t *rv, const int64_t *av,
                       double yend[2]) {
    for (int c = 0; c < 2; c++) {
        const int64_t *v = c == 0 ? rv : av;
        rb_printf(b, "<polyline class=\"%s\" points=\"", c == 0 ? "sim-res" : "sim-alloc");
        for (int j = 0; j < g->nb; j++) {
            int lo = (int)((int64_t)j * g->n / g->nb), hi = (int)((int64_t)(j + 1) * g->n / g->nb);
            int at = lo;
            for (int i = lo; i < hi; i++)
                if (v[i] > v[at]) at = i;
            rb_printf(b, "%.1f,%.1f ", xop(g, at), yb(g, (double)v[at]));
            yend[c] = yb(g, (double)v[at]);
        }
        rb_puts(b, "\"/>");
    }
}

/* Right of the plot: the series names at their curves' ends and the two lines' values, top to
 * bottom, pushed apart so none overlaps. */
static void sim_labels(rbuf *b, const sim_geom *g, double cap, double limit,
                       const double yend[2]) {
    side_label lab[4];
    char g1[32];
    int nl = 0;
    if (cap > 0) {
        lab[nl].y = yb(g, cap) + 4;
        snprintf(lab[nl].text, sizeof lab[nl].text, "capacity %s GiB",
                 rep_fmt_gib(cap, g1, sizeof g1));
        lab[nl++].cls = "tick";
    }
    if (limit > 0) {
        lab[nl].y = yb(g, limit) + 4;
        snprintf(lab[nl].text, sizeof lab[nl].text, "reserved limit %s GiB",
                 rep_fmt_gib(limit, g1, sizeof g1));
        lab[nl++].cls = "tick";
    }
    lab[nl].y = yend[0] + 4;
    snprintf(lab[nl].text, sizeof lab[nl].text, "reserved");
    lab[nl++].cls = "series";
    lab[nl].y = yend[1] + 4;
    snprintf(lab[nl].text, sizeof lab[nl].text, "allocated");
    lab[nl++].cls = "series";
    for (int i = 1; i < nl; i++) /* insertion sort by y */
        for (int j = i; j > 0 && lab[j].y < lab[j - 1].y; j--) {
            side_label t = lab[j];
            lab[j] = lab[j - 1];
            lab[j - 1] = t;
        }
    for (int i = 1; i < nl; i++)
        if (lab[i].y < lab[i - 1].y + 15) lab[i].y = lab[i - 1].y + 15; /* 12 px text: 14 px line */
    for (int i = 0; i < nl; i++)
        rb_printf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\">%s</text>", lab[i].cls,
                  g->X0 + g->PW + 6, lab[i].y, lab[i].text);
}

/* The allocated peak, marked and labelled with its operation (desc). */
static void sim_peak(rbuf *b, const sim_geom *g, const ap_sim_rank *k, const char *desc) {
    char g3[32];
    double px = xop(g, k->peak_op), py = yb(g, (double)k->allocated_peak_bytes);
    int right = px > g->X0 + g->PW / 2;
    rb_printf(b, "<g class=\"sim-peak-mark\"><circle class=\"sim-peak\" cx=\"%.1f\" cy=\"%.1f\" "
              "r=\"6\"/><line class=\"leader\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
              "<text class=\"peaklabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %s GiB "
              "allocated: ", px, py, px, py - 6, px, g->Y0 - 16, px + (right ? 4 : -4),
              g->Y0 - 20, right ? "end" : "start",
              rep_fmt_gib((double)k->allocated_peak_bytes, g3, sizeof g3));
    rb_html(b, desc);
    rb_puts(b, "</text></g>");
}

/* The numbers of the worst stage and the command that reproduces them. */
static void sim_table(rbuf *b, const ap_report *r, const ap_sim_rank *k, double cap,
                      const char *desc) {
    char g1[32], g2[32], g3[32], g4[32];
    rb_puts(b, "<div class=\"scroll\"><table id=\"sim\"><thead><tr><th>stage</th>"
               "<th title=\"simulate --json: stages[].allocated_peak_bytes\">allocated peak "
               "(bytes)</th><th title=\"simulate --json: stages[].reserved_peak_bytes\">reserved "
               "peak (bytes)</th><th title=\"simulate --json: stages[].device_peak_bytes\">device "
               "peak (GiB)</th><th title=\"simulate --json: capacity_bytes\">capacity (GiB)</th>"
               "<th class=\"l\" title=\"simulate --json: stages[].peak_op\">operation at the "
               "peak</th></tr></thead><tbody>\n");
    rb_printf(b, "<tr><td>%d</td><td>%lld (%s GiB)</td><td>%lld (%s GiB)</td><td>%s</td>"
              "<td>%s</td><td class=\"l wrap\">", k->stage, (long long)k->allocated_peak_bytes,
              rep_fmt_gib((double)k->allocated_peak_bytes, g1, sizeof g1),
              (long long)k->reserved_peak_bytes,
              rep_fmt_gib((double)k->reserved_peak_bytes, g2, sizeof g2),
              rep_fmt_gib((double)k->device_peak_bytes, g3, sizeof g3),
              rep_fmt_gib(cap, g4, sizeof g4));
    rb_html(b, desc);
    rb_puts(b, "</td></tr>\n</tbody></table></div>\n<p class=\"note\">Reproduce: <code>autoplan "
               "simulate ");
    rb_html(b, r->strat[r->best].estimate_args);
    rb_puts(b, "</code> (stages[].allocated_peak_bytes, reserved_peak_bytes, device_peak_bytes, "
               "peak_op of the worst_stage).</p>\n");
}

void rep_sim_html(rbuf *b, const ap_report *r) {
    rb_puts(b, "<h2>5. Memory over one iteration (simulator)</h2>\n");
    const ap_sim *s = r->sim;
    if (!s) {
        absent(b, r->sim_note[0] ? r->sim_note : "the best plan was not simulated");
        return;
    }
    const ap_sim_rank *k = ap_sim_rank_at(s, ap_sim_worst_rank(s));
    if (!k || !k->allocated_curve || k->nops <= 0 || k->nevents <= 0) {
        absent(b, "the simulation recorded no memory curve");
        return;
    }
    int64_t *av = NULL, *rv = NULL;
    if (op_values(k, &av, &rv) != 0) {
        b->failed = 1;
        return;
    }
    sim_intro(b, r, s, k);
    double cap = ap_sim_capacity_bytes(s), budget = ap_sim_budget_bytes(s);
    double limit = budget > 0 ? budget - ap_sim_overhead_bytes(s) : 0;
    sim_geom g = {1000, 0, 90, 720, 50, 320, 0, 0, k->nops, 0};
    g.H = g.Y0 + g.PH + 56;
    g.ymax = (double)k->reserved_peak_bytes;
    if ((double)k->allocated_peak_bytes > g.ymax) g.ymax = (double)k->allocated_peak_bytes;
    if (cap > g.ymax) g.ymax = cap;
    g.ys = rep_nice_step(g.ymax / AP_GIB) * AP_GIB;
    g.ymax = g.ys * ceil(g.ymax / g.ys * 1.02);
    if (!(g.ymax > 0)) g.ymax = AP_GIB;
    g.nb = g.n < MAX_POINTS ? g.n : MAX_POINTS;
    char desc[256];
    ap_sim_op_describe(s, k, k->peak_op, desc, sizeof desc);
    double yend[2] = {0, 0};
    sim_axes(b, &g, k, cap, limit);
    sim_curves(b, &g, rv, av, yend);
    sim_labels(b, &g, cap, limit, yend);
    sim_peak(b, &g, k, desc);
    rb_puts(b, "</svg>\n");
    ap_free(av);
    ap_free(rv);
    sim_table(b, r, k, cap, desc);
}

void rep_sim_md(rbuf *b, const ap_report *r) {
    rb_puts(b, "\n## Memory over one iteration (simulator)\n\n");
    const ap_sim *s = r->sim;
    const ap_sim_rank *k = s ? ap_sim_rank_at(s, ap_sim_worst_rank(s)) : NULL;
    if (!k) {
        rb_printf(b, "Absent: %s.\n", r->sim_note[0] ? r->sim_note : "the best plan was not "
                  "simulated");
        return;
    }
    const ap_report_strategy *bs = &r->strat[r->best];
    char lbl[160], g1[32], g2[32], g3[32], g4[32], desc[256];
    rb_puts(b, "The best plan, **");
    rb_md(b, bs->name);
    rb_printf(b, "** (%s), replayed by the simulator (%s allocator) on its worst stage; every "
              "number below is a field (stages[worst_stage]) of the JSON of ",
              ap_plan_label(&bs->est.plan, lbl, sizeof lbl),
              ap_alloc_mode_name(ap_sim_options(s)->allocator));
    rb_md_command(b, "simulate", bs->estimate_args);
    rb_puts(b, ".\n\n| worst_stage | allocated_peak_bytes | allocated (GiB) | reserved_peak_bytes "
               "| reserved (GiB) | device_peak_bytes (GiB) | capacity_bytes (GiB) | peak_op |\n"
               "|--:|--:|--:|--:|--:|--:|--:|---|\n");
    rb_printf(b, "| %d | %lld | %s | %lld | %s | %s | %s | ", k->stage,
              (long long)k->allocated_peak_bytes,
              rep_fmt_gib((double)k->allocated_peak_bytes, g1, sizeof g1),
              (long long)k->reserved_peak_bytes,
              rep_fmt_gib((double)k->reserved_peak_bytes, g2, sizeof g2),
              rep_fmt_gib((double)k->device_peak_bytes, g3, sizeof g3),
              rep_fmt_gib(ap_sim_capacity_bytes(s), g4, sizeof g4));
    rb_md(b, ap_sim_op_describe(s, k, k->peak_op, desc, sizeof desc));
    rb_puts(b, " |\n");
}
