/*
 * compare.c - two profiles side by side (include/autoplan/profiler.h; `autoplan profile
 * compare A B`): rows of the same operation, shape and dtype are matched and their time ratio
 * summarised per operation and dtype (median, extremes and where they are), with the rows each
 * profile has alone. Two H100s of one cluster should agree within their spread; a driver
 * upgrade or a clock cap shows as a ratio away from 1 on one family of operations.
 *
 * What it does not do: print (cli/cmd_profile_store.c) or decide which is right.
 */
#include "autoplan/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int op_rank(const char *op) {
    for (int i = 0; i < ap_profile_op_count(); i++)
        if (!strcmp(ap_profile_op_name(i), op)) return i;
    return ap_profile_op_count();
}

static int same_key(const ap_profile_row *x, const ap_profile_row *y) {
    return !strcmp(x->op, y->op) && !strcmp(x->shape, y->shape) && !strcmp(x->dtype, y->dtype);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The group of (op, dtype), appended when new. */
static ap_profile_cmp *group(ap_profile_cmp *g, size_t *n, const ap_profile_row *r) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(g[i].op, r->op) && !strcmp(g[i].dtype, r->dtype)) return &g[i];
    ap_profile_cmp *c = &g[(*n)++];
    memset(c, 0, sizeof *c);
    snprintf(c->op, sizeof c->op, "%s", r->op);
    snprintf(c->dtype, sizeof c->dtype, "%s", r->dtype);
    return c;
}

static int cmp_group(const void *a, const void *b) {
    const ap_profile_cmp *x = a, *y = b;
    int rx = op_rank(x->op), ry = op_rank(y->op);
    if (rx != ry) return rx < ry ? -1 : 1;
    return strcmp(x->dtype, y->dtype);
}

ap_status ap_profile_compare(const ap_profile *a, const ap_profile *b, ap_profile_cmp **out,
                             size_t *n, ap_err *err) {
    *out = NULL;
    *n = 0;
    size_t cap = a->n + b->n + 1;
    ap_profile_cmp *g = ap_malloc(cap * sizeof *g);
    double *ratios = ap_malloc(cap * sizeof *ratios);
    char *matched_b = ap_calloc(b->n + 1, 1);
    if (!g || !ratios || !matched_b) {
        ap_free(g), ap_free(ratios), ap_free(matched_b);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory comparing profiles");
    }
    size_t ng = 0;
    for (size_t i = 0; i < a->n; i++) group(g, &ng, &a->rows[i]);
    for (size_t j = 0; j < b->n; j++) group(g, &ng, &b->rows[j]);
    qsort(g, ng, sizeof *g, cmp_group);
    for (size_t k = 0; k < ng; k++) {
        ap_profile_cmp *c = &g[k];
        size_t nr = 0;
        for (size_t i = 0; i < a->n; i++) {
            const ap_profile_row *ra = &a->rows[i];
            if (strcmp(ra->op, c->op) || strcmp(ra->dtype, c->dtype)) continue;
            size_t j = 0;
            while (j < b->n && (matched_b[j] || !same_key(ra, &b->rows[j]))) j++;
            if (j == b->n || !(ra->time_s > 0) || !(b->rows[j].time_s > 0)) {
                c->only_a += j == b->n;
                continue;
            }
            matched_b[j] = 1;
            double r = b->rows[j].time_s / ra->time_s;
            ratios[nr++] = r;
            if (nr == 1 || r < c->min_ratio) {
                c->min_ratio = r;
                snprintf(c->min_shape, sizeof c->min_shape, "%s", ra->shape);
            }
            if (nr == 1 || r > c->max_ratio) {
                c->max_ratio = r;
                snprintf(c->max_shape, sizeof c->max_shape, "%s", ra->shape);
            }
        }
        for (size_t j = 0; j < b->n; j++)
            if (!matched_b[j] && !strcmp(b->rows[j].op, c->op) && !strcmp(b->rows[j].dtype, c->dtype))
                c->only_b++;
        c->matched = nr;
        if (nr) {
            qsort(ratios, nr, sizeof *ratios, cmp_double);
            c->median_ratio = nr % 2 ? ratios[nr / 2] : 0.5 * (ratios[nr / 2 - 1] + ratios[nr / 2]);
        }
    }
    ap_free(ratios);
    ap_free(matched_b);
    *out = g;
    *n = ng;
    return AP_OK;
}
