/*
 * report_int.h - internals shared by the report renderers (output/report.c: data, tables,
 * explanations, Markdown; output/report_csv.c: plans.csv; output/report_charts.c: charts 1-3;
 * output/report_layout.c: text widths, axis ranges and label placement;
 * output/report_sweep.c: the GPU-count sweep, chart 4;
 * output/report_simchart.c: memory over one iteration from the simulator, chart 5); not a
 * public header.
 *
 * A growable text buffer (rbuf: an allocation failure sets oom and later writes do nothing;
 * report.c turns it into AP_ERR_NOMEM) and the number formats, one per unit, that every
 * renderer uses so a reader or a test can reformat a JSON field and compare text.
 */
#ifndef AP_REPORT_INT_H
#define AP_REPORT_INT_H

#include <stddef.h>

#include "autoplan/report.h"
#include "autoplan/strbuf.h"

/* The renderers' short names for the library symbols below (exported names carry the module
 * prefix; these files keep the short ones). */
#define rb_puts ap_report_puts
#define rb_html ap_report_put_html
#define rb_md ap_report_put_md
#define rb_md_command ap_report_md_command
#define rep_fmt_s ap_report_fmt_s
#define rep_fmt_gib ap_report_fmt_gib
#define rep_fmt_pct ap_report_fmt_pct
#define rep_fmt_tps ap_report_fmt_tps
#define rep_nice_step ap_report_nice_step
#define rep_sweep_html ap_report_sweep_html
#define rep_sweep_md ap_report_sweep_md
#define rep_sim_html ap_report_sim_html
#define rep_sim_md ap_report_sim_md
#define rep_time_parts ap_report_time_parts
#define rep_mem_parts ap_report_mem_parts
#define rep_rowv ap_report_rowv
#define rep_mem_part ap_report_mem_part
#define rep_overshoot_bytes ap_report_overshoot_bytes
#define rep_chart_time ap_report_chart_time
#define rep_chart_memory ap_report_chart_memory
#define rep_chart_scatter ap_report_chart_scatter
#define rep_text_width ap_report_text_width
#define rep_fit_hi ap_report_fit_hi
#define rep_axis ap_report_axis
#define rep_boxes_add ap_report_boxes_add
#define rep_place_label ap_report_place_label
#define rep_label_leader_end ap_report_label_leader_end
#define rep_anchor_name ap_report_anchor_name
#define rep_threads ap_report_threads

/* the report's text buffer is the shared one (strbuf.h) */
typedef ap_strbuf rbuf;
#define rb_printf ap_strbuf_printf
void rb_puts(rbuf *b, const char *s);
void rb_html(rbuf *b, const char *s); /* escaped for HTML/SVG text and attribute values */
void rb_md(rbuf *b, const char *s);   /* escaped for Markdown text, table cells included */
/* "autoplan COMMAND ARGS" as a Markdown code span (table-cell safe) */
void rb_md_command(rbuf *b, const char *command, const char *args);

/* Threads for work on n rows: `threads` (0: every core), at most AP_REPORT_MAX_THREADS and at
 * most one per per_thread rows (fewer rows are not worth a thread), at least 1. */
int rep_threads(int threads, int64_t n, int64_t per_thread);

/* Formats into buf (returned): seconds "%.3f", GiB "%.2f" of bytes / 2^30, percent "%.1f" of a
 * fraction, tokens/s "%.0f". */
char *rep_fmt_s(double s, char *buf, size_t n);
char *rep_fmt_gib(double bytes, char *buf, size_t n);
char *rep_fmt_pct(double frac, char *buf, size_t n);
char *rep_fmt_tps(double tps, char *buf, size_t n);

/* The parts of a step and of memory, in stacking order (report.c). */
typedef struct {
    const char *key;   /* estimate --json field (time.* or memory.*) */
    const char *name;  /* legend text and readable table header */
    const char *color; /* Okabe-Ito */
    int hatch;         /* drawn with diagonal hatching, so no two parts look alike */
    size_t off;        /* offset in ap_report_row */
} rep_part;
#define REP_NTIME 11
#define REP_NMEM 6
extern const rep_part rep_time_parts[REP_NTIME];
extern const rep_part rep_mem_parts[REP_NMEM]; /* the last: device peak minus the others */
double rep_rowv(const ap_report_row *r, size_t off);   /* the double at off in r */
double rep_mem_part(const ap_report_row *r, int i);   /* memory part i (the last derived) */
double rep_overshoot_bytes(const ap_report_row *r);   /* device peak + headroom - capacity */

/* Charts 1-3 (report_charts.c): step time and device memory per strategy, memory against
 * throughput of the evaluated plans; axes scaled to what fits. */
void rep_chart_time(rbuf *b, const ap_report *r);
void rep_chart_memory(rbuf *b, const ap_report *r);
void rep_chart_scatter(rbuf *b, const ap_report *r);

/* A "nice" axis step: {1, 2, 5} x 10^k, about 5 ticks up to at least hi. */
double rep_nice_step(double hi);

/* ---- layout (report_layout.c) ---- */

/* Estimated width in px of s at font_px (DejaVu Sans advances, bold 10% wider, plus 2 px). */
double rep_text_width(const char *s, double font_px, int bold);

/* The axis maximum "scaled to what fits": the largest v[i] with fits[i], raised to any v[i]
 * that does not fit but is at most slack times it; the largest of all when none fits. Values
 * <= 0 are ignored. */
double rep_fit_hi(const double *v, const int *fits, int n, double slack);

/* An axis from lo to hi in nice steps: starts at 0 when from_zero or lo < 0.4 hi. */
typedef struct {
    double lo, hi, step;
} rep_scale;
void rep_axis(double lo, double hi, int from_zero, rep_scale *s);

/* Boxes (SVG user units) already taken by labels and markers. */
typedef struct {
    double x0, y0, x1, y1;
} rep_box;
#define REP_MAX_BOXES 256
typedef struct {
    rep_box b[REP_MAX_BOXES];
    int n;
} rep_boxes;
int rep_boxes_add(rep_boxes *t, rep_box b); /* 0 when full (the box is then not kept) */

enum { REP_ANCHOR_START = 0, REP_ANCHOR_MIDDLE = 1, REP_ANCHOR_END = 2 };
typedef struct {
    double x, y;  /* text anchor point (baseline) */
    int anchor;   /* REP_ANCHOR_* */
    rep_box box;  /* the text's estimated box */
    int leader;   /* far from its point: draw a leader line */
    int side;     /* put in the side column (no free place near the point) */
} rep_label;

/* Places a label of width w (rep_text_width) for the point (px, py): the first free position
 * around the point inside bounds, else the next line of the side column (side->x0, side->y0,
 * advanced). The label's box is added to taken. */
rep_label rep_place_label(rep_boxes *taken, const rep_box *bounds, rep_box *side, double px,
                          double py, double w, double font_px);
/* Where a leader line from (px, py) meets the label's box. */
void rep_label_leader_end(const rep_label *l, double px, double py, double *ex, double *ey);
const char *rep_anchor_name(int anchor); /* "start", "middle", "end" */

/* Chart 4 (report_sweep.c): the section of report.html / report.md for r->sweep; says that no
 * sweep was asked when r->nsweep == 0. */
void rep_sweep_html(rbuf *b, const ap_report *r);
void rep_sweep_md(rbuf *b, const ap_report *r);

/* Chart 5 (report_simchart.c): the section for r->sim; says why it is absent when r->sim is
 * NULL (r->sim_note). */
void rep_sim_html(rbuf *b, const ap_report *r);
void rep_sim_md(rbuf *b, const ap_report *r);

#endif
