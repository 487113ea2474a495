/*
 * hostbench.c - the host side of a training step, measured without a GPU
 * (include/autoplan/profiler.h): the CPU Adam step of optimizer offload (ZeRO-Offload, Ren et
 * al. 2021) and host memory bandwidth (STREAM, McCalpin 1995). Both become kernel-profile rows
 * (host_adam, host_membw), so the cost model prices offload with this host's numbers.
 *
 * Structure: a small pool of worker threads that meet at a barrier, each doing its slice of
 * the arrays, with the calling thread as worker 0 timing from the first barrier to the last;
 * the arrays are first touched by the thread that later works on them (first-touch NUMA
 * placement, as STREAM's OpenMP version does). Each bench is warm-up + >= 20 timed calls
 * through ap_bench_repeat.
 *
 * What it does not do: vectorise by hand (the compiler does, at -O2 with -ftree-vectorize on
 * the simple loops) or pin threads to cores; DeepSpeed's CPU Adam uses AVX-512 intrinsics and
 * may run faster than this plain-C loop, which then gives an upper bound on the step time.
 */
#include "autoplan/profiler.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ap_hostbench_opts_init(ap_hostbench_opts *o) {
    memset(o, 0, sizeof *o);
}

/* The STREAM arrays' bytes (default 256 MiB), at least 1024 doubles each. */
static ap_status membw_bytes_of(const ap_hostbench_opts *o, double *bytes, ap_err *err) {
    *bytes = o->membw_bytes > 0 ? o->membw_bytes : 256.0 * (1 << 20);
    if (*bytes < 1024.0 * sizeof(double))
        return ap_err_set(err, AP_ERR_INPUT, "host bandwidth arrays: %.0f bytes is too small (at "
                          "least 8 KiB)", *bytes);
    return AP_OK;
}

/* The host Adam's parameters (default 64M), in [1024, 1e11]. */
static ap_status adam_params_of(const ap_hostbench_opts *o, double *params, ap_err *err) {
    *params = o->adam_params > 0 ? o->adam_params : 64.0 * (1 << 20);
    if (*params < 1024 || *params > 1e11)
        return ap_err_set(err, AP_ERR_INPUT, "host Adam: %.0f parameters is outside [1024, 1e11]",
                          *params);
    return AP_OK;
}

ap_status ap_hostbench_check(const ap_hostbench_opts *o, ap_err *err) {
    double bytes, params;
    ap_status st = membw_bytes_of(o, &bytes, err);
    if (st == AP_OK) st = adam_params_of(o, &params, err);
    if (st != AP_OK) return st;
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    double phys = pages > 0 && page_bytes > 0 ? (double)pages * (double)page_bytes : 0;
    char a[32], b[32];
    if (phys > 0 && 3 * bytes > phys) /* STREAM's three arrays */
        return ap_err_set(err, AP_ERR_INPUT, "host bandwidth arrays: 3 x %s is more than this "
                          "host's %s of memory", ap_fmt_bytes(bytes, a, sizeof a),
                          ap_fmt_bytes(phys, b, sizeof b));
    if (phys > 0 && 16 * params > phys) /* fp32 p, g, m, v */
        return ap_err_set(err, AP_ERR_INPUT, "host Adam: %.0f parameters take %s (4 fp32 values "
                          "each), more than this host's %s of memory", params,
                          ap_fmt_bytes(16 * params, a, sizeof a), ap_fmt_bytes(phys, b, sizeof b));
    return AP_OK;
}

static int online_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 4096 ? (int)n : 1;
}

/* ---- a barrier-driven worker pool ------------------------------------------------------------- */

typedef void (*slice_fn)(void *arg, int worker, int workers);

typedef struct pool {
    int workers;               /* threads running, the caller included */
    pthread_t *threads;        /* [1, workers) */
    struct pool_seat *seats;
    pthread_barrier_t start, done;
    pthread_mutex_t lock;      /* startup: workers wait for `go` (the barriers exist then) */
    pthread_cond_t cond;
    int go;
    slice_fn fn;
    void *arg;
    int quit;
} pool;

typedef struct pool_seat {
    pool *p;
    int worker;
} pool_seat;

static void *pool_main(void *a) {
    pool_seat *seat = a;
    pool *p = seat->p;
    pthread_mutex_lock(&p->lock);
    while (!p->go) pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->quit) break;
        p->fn(p->arg, seat->worker, p->workers);
        pthread_barrier_wait(&p->done);
    }
    return NULL;
}

/* Start up to want - 1 threads; the barriers count the ones that started (a failed
 * pthread_create leaves fewer workers, with a warning). */
static ap_status pool_open(pool *p, int want, ap_err *err) {
    memset(p, 0, sizeof *p);
    p->threads = ap_malloc((size_t)want * sizeof *p->threads);
    p->seats = ap_malloc((size_t)want * sizeof *p->seats);
    if (!p->threads || !p->seats) {
        ap_free(p->threads), ap_free(p->seats);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %d threads", want);
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    int started = 1;
    for (int w = 1; w < want; w++) {
        p->seats[w] = (pool_seat){p, w};
        if (pthread_create(&p->threads[w], NULL, pool_main, &p->seats[w])) break;
        started++;
    }
    if (started < want)
        ap_log(AP_LOG_WARN, "host bench: %d of %d threads started", started, want);
    p->workers = started;
    pthread_barrier_init(&p->start, NULL, (unsigned)started);
    pthread_barrier_init(&p->done, NULL, (unsigned)started);
    pthread_mutex_lock(&p->lock);
    p->go = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    return AP_OK;
}

/* Run fn on every worker; returns the wall time in seconds. */
static double pool_run(pool *p, slice_fn fn, void *arg) {
    p->fn = fn;
    p->arg = arg;
    double t0 = ap_now_s();
    if (p->workers > 1) pthread_barrier_wait(&p->start);
    fn(arg, 0, p->workers);
    if (p->workers > 1) pthread_barrier_wait(&p->done);
    return ap_now_s() - t0;
}

static void pool_close(pool *p) {
    if (!p->threads) return;
    p->quit = 1;
    if (p->workers > 1) pthread_barrier_wait(&p->start);
    for (int w = 1; w < p->workers; w++) pthread_join(p->threads[w], NULL);
    pthread_barrier_destroy(&p->start);
    pthread_barrier_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    ap_free(p->threads);
    ap_free(p->seats);
    memset(p, 0, sizeof *p);
}

static void slice(size_t n, int w, int ws, size_t *lo, size_t *hi) {
    *lo = n * (size_t)w / (size_t)ws;
    *hi = n * (size_t)(w + 1) / (size_t)ws;
}

/* ---- STREAM ------------------------------------------------------------------------------------- */

typedef struct {
    double *a, *b, *c;
    size_t n;
    int kernel; /* 0 copy, 1 scale, 2 add, 3 triad, 4 first touch */
    pool *p;
} stream_ctx;

/* STREAM's kernels and scalar (McCalpin's stream.c uses q = 3.0) */
static void stream_slice(void *arg, int w, int ws) {
    stream_ctx *s = arg;
    size_t lo, hi;
    slice(s->n, w, ws, &lo, &hi);
    const double q = 3.0;
    double *restrict a = s->a, *restrict b = s->b, *restrict c = s->c;
    switch (s->kernel) {
    case 0: for (size_t i = lo; i < hi; i++) c[i] = a[i]; break;
    case 1: for (size_t i = lo; i < hi; i++) b[i] = q * c[i]; break;
    case 2: for (size_t i = lo; i < hi; i++) c[i] = a[i] + b[i]; break;
    case 3: for (size_t i = lo; i < hi; i++) a[i] = b[i] + q * c[i]; break;
    default:
        for (size_t i = lo; i < hi; i++) {
            a[i] = 1.0;
            b[i] = 2.0;
            c[i] = 0.0;
        }
    }
}

static double stream_call(void *arg, ap_err *err) {
    (void)err;
    stream_ctx *s = arg;
    return pool_run(s->p, stream_slice, s);
}

static int threads_of(const ap_hostbench_opts *o) { return o->threads > 0 ? o->threads : online_cpus(); }

ap_status ap_hostbench_membw(const ap_hostbench_opts *o, const ap_profile_row *tmpl,
                             ap_profile *out, ap_err *err) {
    static const char *const kinds[] = {"copy", "scale", "add", "triad"};
    static const double words[] = {2, 2, 3, 3}; /* arrays touched per element, STREAM's count */
    double bytes;
    if (membw_bytes_of(o, &bytes, err) != AP_OK) return AP_ERR_INPUT;
    size_t n = (size_t)(bytes / sizeof(double));
    stream_ctx s = {0};
    s.n = n;
    s.a = ap_malloc(n * sizeof(double));
    s.b = ap_malloc(n * sizeof(double));
    s.c = ap_malloc(n * sizeof(double));
    pool p;
    ap_status st = s.a && s.b && s.c ? AP_OK
                 : ap_err_set(err, AP_ERR_NOMEM, "out of memory for 3 x %.0f bytes", bytes);
    if (st == AP_OK) st = pool_open(&p, threads_of(o), err);
    if (st == AP_OK) {
        s.p = &p;
        s.kernel = 4;
        pool_run(&p, stream_slice, &s);
        for (int k = 0; k < 4 && st == AP_OK; k++) {
            s.kernel = k;
            ap_bench_stats bs;
            st = ap_bench_repeat(stream_call, &s, 2, o->reps, &bs, err);
            if (st != AP_OK) break;
            char shape[128], source[192];
            double moved = words[k] * (double)n * sizeof(double);
            snprintf(shape, sizeof shape, "kind=%s,bytes=%.0f", kinds[k], moved);
            snprintf(source, sizeof source, "autoplan %s profile bench (STREAM %s, %d threads)",
                     AP_VERSION, kinds[k], p.workers);
            st = ap_bench_row(out, tmpl, "host_membw", shape, "none", &bs, moved, source, err);
        }
        pool_close(&p);
    }
    ap_free(s.a), ap_free(s.b), ap_free(s.c);
    return st;
}

/* ---- Adam --------------------------------------------------------------------------------------- */

void ap_adam_update(float *p, const float *g, float *m, float *v, size_t n, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    /* AdamW as torch.optim.AdamW computes it: decay the weight, update the moments, step by
     * the bias-corrected ratio (Loshchilov & Hutter 2019, Algorithm 2) */
    const float b1 = (float)beta1, b2 = (float)beta2;
    const float bc2s = (float)sqrt(1.0 - pow(beta2, (double)step));
    const float step_size = (float)(lr / (1.0 - pow(beta1, (double)step)));
    const float decay = (float)(1.0 - lr * weight_decay);
    const float e = (float)eps;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bc2s + e);
    }
}

typedef struct {
    float *p, *g, *m, *v;
    size_t n;
    int64_t step;
    int init;
    pool *pl;
} adam_ctx;

static void adam_slice(void *arg, int w, int ws) {
    adam_ctx *a = arg;
    size_t lo, hi;
    slice(a->n, w, ws, &lo, &hi);
    if (a->init) {
        for (size_t i = lo; i < hi; i++) {
            a->p[i] = 0.01f * (float)((i % 97) + 1);
            a->g[i] = 0.001f * (float)((i % 89) + 1);
            a->m[i] = 0;
            a->v[i] = 0;
        }
        return;
    }
    ap_adam_update(a->p + lo, a->g + lo, a->m + lo, a->v + lo, hi - lo, 1e-4, 0.9, 0.999, 1e-8,
                   0.01, a->step);
}

static double adam_call(void *arg, ap_err *err) {
    (void)err;
    adam_ctx *a = arg;
    a->step++;
    return pool_run(a->pl, adam_slice, a);
}

ap_status ap_hostbench_adam(const ap_hostbench_opts *o, const ap_profile_row *tmpl,
                            ap_profile *out, ap_err *err) {
    double params;
    if (adam_params_of(o, &params, err) != AP_OK) return AP_ERR_INPUT;
    adam_ctx a = {0};
    a.n = (size_t)params;
    a.p = ap_malloc(a.n * sizeof(float));
    a.g = ap_malloc(a.n * sizeof(float));
    a.m = ap_malloc(a.n * sizeof(float));
    a.v = ap_malloc(a.n * sizeof(float));
    pool pl;
    ap_status st = a.p && a.g && a.m && a.v ? AP_OK
                 : ap_err_set(err, AP_ERR_NOMEM, "out of memory for 4 x %.0f fp32 values", params);
    if (st == AP_OK) st = pool_open(&pl, threads_of(o), err);
    if (st == AP_OK) {
        a.pl = &pl;
        a.init = 1;
        pool_run(&pl, adam_slice, &a);
        a.init = 0;
        ap_bench_stats bs;
        st = ap_bench_repeat(adam_call, &a, 2, o->reps, &bs, err);
        if (st == AP_OK) {
            char shape[128], source[192];
            snprintf(shape, sizeof shape, "params=%zu,threads=%d", a.n, pl.workers);
            snprintf(source, sizeof source, "autoplan %s profile bench (plain-C fp32 AdamW, %d "
                     "threads)", AP_VERSION, pl.workers);
            st = ap_bench_row(out, tmpl, "host_adam", shape, "fp32", &bs, 0, source, err);
        }
        pool_close(&pl);
    }
    ap_free(a.p), ap_free(a.g), ap_free(a.m), ap_free(a.v);
    return st;
}
