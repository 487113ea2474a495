/*
 * stats.c - how every autoplan benchmark turns repetitions into one number
 * (include/autoplan/profiler.h): warm-up calls, then at least AP_BENCH_MIN_REPS timed calls,
 * the median as the figure and (max - min) / median as its spread; and the step that makes a
 * kernel-profile row of it.
 *
 * The median, not the mean: one preempted repetition (a context switch, a clock ramp) moves a
 * mean but not a median. The spread is kept with the row so a reader sees how noisy it was.
 *
 * What it does not do: time anything itself (each bench's fn returns its own seconds, measured
 * with CUDA events on the device or the monotonic clock on the host).
 */
#include "autoplan/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void ap_bench_stats_of(double *samples_s, int n, ap_bench_stats *out) {
    memset(out, 0, sizeof *out);
    if (n < 1) return;
    qsort(samples_s, (size_t)n, sizeof *samples_s, cmp_double);
    out->samples = n;
    out->min_s = samples_s[0];
    out->max_s = samples_s[n - 1];
    out->median_s = n % 2 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
    out->spread = out->median_s > 0 ? (out->max_s - out->min_s) / out->median_s : 0;
}

ap_status ap_bench_repeat(ap_bench_fn fn, void *arg, int warmup, int reps, ap_bench_stats *out,
                          ap_err *err) {
    memset(out, 0, sizeof *out);
    if (reps < AP_BENCH_MIN_REPS) reps = AP_BENCH_MIN_REPS;
    if (reps > AP_BENCH_MAX_REPS) reps = AP_BENCH_MAX_REPS;
    for (int i = 0; i < warmup; i++)
        if (fn(arg, err) < 0) return AP_ERR_INTERNAL;
    double *s = ap_malloc((size_t)reps * sizeof *s);
    if (!s) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %d samples", reps);
    for (int i = 0; i < reps; i++) {
        s[i] = fn(arg, err);
        if (s[i] < 0) {
            ap_free(s);
            return AP_ERR_INTERNAL;
        }
    }
    ap_bench_stats_of(s, reps, out);
    ap_free(s);
    return AP_OK;
}

ap_status ap_bench_row(ap_profile *p, const ap_profile_row *tmpl, const char *op,
                       const char *shape, const char *dtype, const ap_bench_stats *st,
                       double bytes, const char *source, ap_err *err) {
    ap_profile_row r = *tmpl;
    r.id = 0;
    snprintf(r.op, sizeof r.op, "%s", op);
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    snprintf(r.dtype, sizeof r.dtype, "%s", dtype);
    snprintf(r.source, sizeof r.source, "%s", source ? source : "");
    r.time_s = st->median_s;
    r.samples = st->samples;
    r.spread = st->spread;
    r.flops_per_s = 0;
    r.bytes_per_s = 0;
    r.bytes = bytes;
    if (!strcmp(op, "device_mem")) r.time_s = 0;
    return ap_profile_add(p, &r, err);
}
