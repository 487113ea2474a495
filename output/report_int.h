/*
 * report_int.h - internals shared by the report renderers (output/report.c: tables, charts
 * 1-3, Markdown, CSV; output/report_sweep.c: the GPU-count sweep, chart 4;
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

/* the report's text buffer is the shared one (strbuf.h) */
typedef ap_strbuf rbuf;
#define rb_printf ap_strbuf_printf
void rb_puts(rbuf *b, const char *s);
void rb_html(rbuf *b, const char *s); /* escaped for HTML/SVG text and attribute values */
void rb_md(rbuf *b, const char *s);   /* escaped for Markdown text, table cells included */
/* "autoplan COMMAND ARGS" as a Markdown code span (table-cell safe) */
void rb_md_command(rbuf *b, const char *command, const char *args);

/* Formats into buf (returned): seconds "%.3f", GiB "%.2f" of bytes / 2^30, percent "%.1f" of a
 * fraction, tokens/s "%.0f". */
char *rep_fmt_s(double s, char *buf, size_t n);
char *rep_fmt_gib(double bytes, char *buf, size_t n);
char *rep_fmt_pct(double frac, char *buf, size_t n);
char *rep_fmt_tps(double tps, char *buf, size_t n);

/* A "nice" axis step: {1, 2, 5} x 10^k, about 5 ticks up to at least hi. */
double rep_nice_step(double hi);

/* Chart 4 (report_sweep.c): the section of report.html / report.md for r->sweep; says that no
 * sweep was asked when r->nsweep == 0. */
void rep_sweep_html(rbuf *b, const ap_report *r);
void rep_sweep_md(rbuf *b, const ap_report *r);

/* Chart 5 (report_simchart.c): the section for r->sim; says why it is absent when r->sim is
 * NULL (r->sim_note). */
void rep_sim_html(rbuf *b, const ap_report *r);
void rep_sim_md(rbuf *b, const ap_report *r);

#endif
