/*
 * loo.c - how well measured points predict the shapes between them
 * (include/autoplan/profiler.h): leave each point out, predict it from the others, report the
 * relative error. The profile stores the measured points, not a fitted curve; this number says
 * how far the cost model's lookup between them can be trusted.
 *
 * The default predictor: for gemm, inverse-distance weighting (Shepard 1968) of the time per
 * FLOP over the 4 nearest shapes in (log2 m, log2 n, log2 k); for ops with one size key
 * (bytes, params, or s for attention), linear interpolation of log time in log size between
 * the nearest smaller and larger point whose other keys are equal (no extrapolation: an end
 * point counts as not predicted). The cost model's own lookup (ap_profile_predict_kernels)
 * or any other predictor plugs in through ap_profile_predict_fn.
 *
 * What it does not do: choose which points to measure (shapes.c) or store them (db/).
 */
#include "autoplan/profiler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/estimate.h"
#include "autoplan/kernels.h"

#define IDW_NEIGHBOURS 4

static int gemm_dims(const ap_profile_row *r, double d[3]) {
    return ap_profile_shape_num(r->shape, "m", &d[0]) && ap_profile_shape_num(r->shape, "n", &d[1]) &&
           ap_profile_shape_num(r->shape, "k", &d[2]) && d[0] > 0 && d[1] > 0 && d[2] > 0;
}

static int predict_gemm(const ap_profile_row *const *rows, size_t n, const ap_profile_row *q,
                        double *time_s) {
    double qd[3];
    if (!gemm_dims(q, qd)) return 0;
    double best_d[IDW_NEIGHBOURS], best_v[IDW_NEIGHBOURS];
    int nb = 0;
    for (size_t i = 0; i < n; i++) {
        double d[3];
        if (!gemm_dims(rows[i], d) || !(rows[i]->time_s > 0)) continue;
        double dist = 0;
        for (int k = 0; k < 3; k++) dist += pow(log2(d[k]) - log2(qd[k]), 2);
        double v = log(rows[i]->time_s / (2.0 * d[0] * d[1] * d[2])); /* log seconds per FLOP */
        /* keep the IDW_NEIGHBOURS nearest, sorted by distance */
        int at = nb < IDW_NEIGHBOURS ? nb++ : IDW_NEIGHBOURS;
        if (at == IDW_NEIGHBOURS && dist >= best_d[IDW_NEIGHBOURS - 1]) continue;
        if (at == IDW_NEIGHBOURS) at = IDW_NEIGHBOURS - 1;
        while (at > 0 && best_d[at - 1] > dist) {
            best_d[at] = best_d[at - 1];
            best_v[at] = best_v[at - 1];
            at--;
        }
        best_d[at] = dist;
        best_v[at] = v;
    }
    if (nb == 0) return 0;
    double wsum = 0, vsum = 0;
    for (int i = 0; i < nb; i++) {
        if (best_d[i] == 0) { /* the same shape measured again */
            wsum = 1;
            vsum = best_v[i];
            break;
        }
        double w = 1.0 / best_d[i]; /* squared distance: Shepard's power 2 */
        wsum += w;
        vsum += w * best_v[i];
    }
    *time_s = exp(vsum / wsum) * 2.0 * qd[0] * qd[1] * qd[2];
    return 1;
}

/* The size key of an op, or NULL. */
static const char *size_key(const char *op) {
    if (!strcmp(op, "host_adam")) return "params";
    if (!strncmp(op, "attn_", 5)) return "s";
    if (!strcmp(op, "gemm") || !strcmp(op, "launch") || !strcmp(op, "device_mem")) return NULL;
    return "bytes";
}

/* Are two shapes equal except for the value of `key`? */
static int same_but(const char *a, const char *b, const char *key) {
    size_t kl = strlen(key);
    while (*a && *b) {
        const char *ea = strchr(a, ','), *eb = strchr(b, ',');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        int is_key = !strncmp(a, key, kl) && a[kl] == '=' && !strncmp(b, key, kl) && b[kl] == '=';
        if (!is_key && (la != lb || strncmp(a, b, la))) return 0;
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
    }
    return !*a && !*b;
}

static int predict_1d(const ap_profile_row *const *rows, size_t n, const ap_profile_row *q,
                      double *time_s) {
    const char *key = size_key(q->op);
    double x;
    if (!key || !ap_profile_shape_num(q->shape, key, &x) || x <= 0) return 0;
    double lo_x = 0, lo_t = 0, hi_x = 0, hi_t = 0;
    for (size_t i = 0; i < n; i++) {
        double xi;
        if (!same_but(rows[i]->shape, q->shape, key) || !ap_profile_shape_num(rows[i]->shape, key, &xi) ||
            xi <= 0 || !(rows[i]->time_s > 0))
            continue;
        if (xi == x) {
            *time_s = rows[i]->time_s;
            return 1;
        }
        if (xi < x && xi > lo_x) lo_x = xi, lo_t = rows[i]->time_s;
        if (xi > x && (hi_x == 0 || xi < hi_x)) hi_x = xi, hi_t = rows[i]->time_s;
    }
    if (lo_x == 0 || hi_x == 0) return 0;
    double f = (log(x) - log(lo_x)) / (log(hi_x) - log(lo_x));
    *time_s = exp(log(lo_t) + f * (log(hi_t) - log(lo_t)));
    return 1;
}

int ap_profile_predict_default(const ap_profile_row *const *rows, size_t n,
                               const ap_profile_row *query, double *time_s, void *arg) {
    (void)arg;
    if (!strcmp(query->op, "gemm")) return predict_gemm(rows, n, query, time_s);
    return predict_1d(rows, n, query, time_s);
}

int ap_profile_predict_kernels(const ap_profile_row *const *rows, size_t n,
                               const ap_profile_row *query, double *time_s, void *arg) {
    if (strcmp(query->op, "gemm")) return ap_profile_predict_default(rows, n, query, time_s, arg);
    const ap_gpu *g = ap_gpu_find(query->gpu);
    ap_dtype dt;
    double d[3];
    if (!g || ap_dtype_parse(query->dtype, &dt) != AP_OK || !gemm_dims(query, d) ||
        !(g->peak_flops[dt] > 0))
        return 0;
    ap_profile p;
    ap_profile_init(&p);
    ap_err e;
    for (size_t i = 0; i < n; i++)
        if (ap_profile_add(&p, rows[i], &e) != AP_OK) break;
    ap_kernels *k = ap_malloc(sizeof *k);
    int ok = k && ap_kernels_build(g, &p, k, &e) == AP_OK;
    double eff = 0;
    if (ok) {
        ap_calib cal;
        ap_calib_default(g, &cal);
        eff = ap_kernels_gemm_eff(k, dt, d[0], d[1], d[2], cal.gemm_half_flops);
    }
    ap_free(k);
    ap_profile_free(&p);
    if (!(eff > 0)) return 0;
    *time_s = 2.0 * d[0] * d[1] * d[2] / (g->peak_flops[dt] * eff);
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

ap_status ap_profile_loo(const ap_profile *p, const char *op, const char *dtype,
                         ap_profile_predict_fn fn, void *arg, ap_loo_result *out, ap_err *err) {
    memset(out, 0, sizeof *out);
    if (!fn) fn = ap_profile_predict_default;
    const ap_profile_row **sel = ap_malloc((p->n + 1) * sizeof *sel);
    const ap_profile_row **rest = ap_malloc((p->n + 1) * sizeof *rest);
    double *errs = ap_malloc((p->n + 1) * sizeof *errs);
    if (!sel || !rest || !errs) {
        ap_free(sel), ap_free(rest), ap_free(errs);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu rows", p->n);
    }
    size_t ns = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->rows[i].op, op) && !strcmp(p->rows[i].dtype, dtype)) sel[ns++] = &p->rows[i];
    out->points = ns;
    double sum = 0;
    for (size_t i = 0; i < ns; i++) {
        size_t nr = 0;
        for (size_t j = 0; j < ns; j++)
            if (j != i) rest[nr++] = sel[j];
        double t = 0;
        if (!fn(rest, nr, sel[i], &t, arg) || !(t > 0) || !isfinite(t)) continue;
        double e = fabs(t - sel[i]->time_s) / sel[i]->time_s;
        errs[out->predicted++] = e;
        sum += e;
        if (e >= out->max_abs_err) {
            out->max_abs_err = e;
            snprintf(out->worst_shape, sizeof out->worst_shape, "%s", sel[i]->shape);
        }
    }
    if (out->predicted) {
        qsort(errs, out->predicted, sizeof *errs, cmp_double);
        size_t k = out->predicted;
        out->median_abs_err = k % 2 ? errs[k / 2] : 0.5 * (errs[k / 2 - 1] + errs[k / 2]);
        out->mean_abs_err = sum / (double)k;
    }
    ap_free(sel), ap_free(rest), ap_free(errs);
    return AP_OK;
}
