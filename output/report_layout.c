/*
 * report_layout.c - layout helpers for the report's SVG charts (report_int.h): text widths,
 * axis ranges scaled to what fits, and placement of point labels so that no two overlap and
 * none leaves the plot.
 *
 * The report has no script, so the browser cannot lay labels out: widths are estimated here
 * from the advance widths of DejaVu Sans (the sans-serif face of Debian and most Linux
 * systems; the widest common sans face, so narrower faces only leave more room), bold 10%
 * wider. The estimate is deliberately generous (tests/test_report.c measures the real boxes in
 * headless Chromium).
 *
 * Label placement is greedy: each label tries positions around its point at growing distances
 * (right, left, above, below, the diagonals) and takes the first that stays inside the bounds
 * and clear of every box already taken (other labels and markers); when none is free the label
 * goes to a column beside the plot, under the previous ones, with a leader line.
 *
 * Not here: drawing (report.c draws; this file only computes positions).
 */
#include <math.h>
#include <string.h>

#include "report_int.h"

/* Advance widths in em of DejaVu Sans Book (glyph table of DejaVuSans.ttf, units per em 2048),
 * grouped: narrow punctuation and i/j/l, the lower-case average, digits, wide letters, upper
 * case. */
static double char_em(unsigned char c) {
    if (c == ' ' || c == '.' || c == ',' || c == ':' || c == ';' || c == '\'' || c == '!' ||
        c == '|' || c == 'i' || c == 'j' || c == 'l')
        return 0.34;
    if (c == 'f' || c == 't' || c == 'r' || c == '(' || c == ')' || c == '-' || c == '/' ||
        c == '[' || c == ']')
        return 0.42;
    if (c == 'm') return 0.98;
    if (c == 'w' || c == '%' || c == '@' || c == 'W' || c == 'M') return 0.96;
    if (c == '=' || c == '+' || c == '<' || c == '>' || c == '~') return 0.84;
    if (c >= 'A' && c <= 'Z') return 0.78;
    if (c >= '0' && c <= '9') return 0.64;
    if (c >= 0x80) return 0.5; /* UTF-8 bytes: a two-byte character counts as one em */
    return 0.64;
}

double rep_text_width(const char *s, double font_px, int bold) {
    double em = 0;
    for (; s && *s; s++) em += char_em((unsigned char)*s);
    return em * font_px * (bold ? 1.1 : 1.0) + 2;
}

double rep_fit_hi(const double *v, const int *fits, int n, double slack) {
    double hi_fit = 0, hi_all = 0;
    for (int i = 0; i < n; i++) {
        if (!(v[i] > 0)) continue;
        if (v[i] > hi_all) hi_all = v[i];
        if (fits[i] && v[i] > hi_fit) hi_fit = v[i];
    }
    if (!(hi_fit > 0)) return hi_all;
    /* values that do not fit stay on the axis when they are close to what fits */
    double hi = hi_fit;
    for (int i = 0; i < n; i++)
        if (!fits[i] && v[i] > hi && v[i] <= hi_fit * slack) hi = v[i];
    return hi;
}

static int overlaps(const rep_box *a, const rep_box *b) {
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

static int inside(const rep_box *a, const rep_box *bounds) {
    return a->x0 >= bounds->x0 && a->x1 <= bounds->x1 && a->y0 >= bounds->y0 &&
           a->y1 <= bounds->y1;
}

int rep_boxes_add(rep_boxes *t, rep_box b) {
    if (t->n >= REP_MAX_BOXES) return 0;
    t->b[t->n++] = b;
    return 1;
}

static int free_at(const rep_boxes *t, const rep_box *b) {
    for (int i = 0; i < t->n; i++)
        if (overlaps(&t->b[i], b)) return 0;
    return 1;
}

/* The text box of a label whose anchor point is (x, y): baseline at y, ascent 0.8 em above
 * and descent 0.25 em below (DejaVu Sans: ascender 0.76, descender 0.24), width w. */
static rep_box text_box(double x, double y, double w, double font_px, int anchor) {
    rep_box b;
    b.x0 = anchor == REP_ANCHOR_END ? x - w : anchor == REP_ANCHOR_MIDDLE ? x - w / 2 : x;
    b.x1 = b.x0 + w;
    b.y0 = y - 0.8 * font_px;
    b.y1 = y + 0.25 * font_px;
    return b;
}

rep_label rep_place_label(rep_boxes *taken, const rep_box *bounds, rep_box *side, double px,
                          double py, double w, double font_px) {
    /* directions: right, left, up, down, then the four diagonals (dx, dy multiples of r) */
    static const double dir[8][2] = {{1, 0},  {-1, 0}, {0, -1}, {0, 1},
                                     {1, -1}, {-1, -1}, {1, 1}, {-1, 1}};
    static const double radius[] = {8, 16, 26, 38, 52, 70, 92, 120, 150};
    const double pad = 2;
    rep_label l;
    memset(&l, 0, sizeof l);
    for (size_t k = 0; k < sizeof radius / sizeof radius[0]; k++) {
        for (int d = 0; d < 8; d++) {
            double dx = dir[d][0] * radius[k], dy = dir[d][1] * radius[k];
            int anchor = dx > 0 ? REP_ANCHOR_START : dx < 0 ? REP_ANCHOR_END : REP_ANCHOR_MIDDLE;
            /* text baseline: vertically centred on the point when going sideways */
            double tx = px + dx, ty = py + dy + (dy == 0 ? 0.3 * font_px
                                                 : dy > 0 ? 0.8 * font_px : 0);
            rep_box b = text_box(tx, ty, w, font_px, anchor);
            rep_box padded = {b.x0 - pad, b.y0 - pad, b.x1 + pad, b.y1 + pad};
            if (!inside(&b, bounds) || !free_at(taken, &padded)) continue;
            rep_boxes_add(taken, padded);
            l.x = tx;
            l.y = ty;
            l.anchor = anchor;
            l.box = b;
            l.leader = k >= 2;
            return l;
        }
    }
    /* nothing free nearby: the next line of the side column */
    l.x = side->x0;
    l.y = side->y0 + 0.8 * font_px;
    l.anchor = REP_ANCHOR_START;
    l.box = text_box(l.x, l.y, w, font_px, REP_ANCHOR_START);
    l.leader = 1;
    l.side = 1;
    side->y0 += 1.3 * font_px;
    rep_boxes_add(taken, l.box);
    return l;
}

void rep_label_leader_end(const rep_label *l, double px, double py, double *ex, double *ey) {
    /* the nearest point of the label's box to the marker */
    *ex = px < l->box.x0 ? l->box.x0 : px > l->box.x1 ? l->box.x1 : px;
    *ey = py < l->box.y0 ? l->box.y0 : py > l->box.y1 ? l->box.y1 : py;
}

const char *rep_anchor_name(int anchor) {
    return anchor == REP_ANCHOR_END ? "end" : anchor == REP_ANCHOR_MIDDLE ? "middle" : "start";
}

void rep_axis(double lo, double hi, int from_zero, rep_scale *s) {
    if (!(hi > lo)) hi = lo > 0 ? lo * 1.1 : 1;
    if (from_zero || lo < 0.4 * hi) lo = 0;
    double step = rep_nice_step(hi - lo);
    s->lo = step * floor(lo / step);
    s->hi = step * ceil(hi / step);
    if (!(s->hi > s->lo)) s->hi = s->lo + step;
    s->step = step;
}
