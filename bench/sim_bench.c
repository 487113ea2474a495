/*
 * sim_bench.c - time to simulate one training iteration of llama-2-70b (tp 8, pp 8, 64
 * micro-batches of 4096 tokens, Megatron 1F1B) with the memory simulator (sim.h), every
 * pipeline rank, event by event, through the caching-allocator model. Target: < 10 ms, so the
 * top plans of every search can be simulated (issue 7).
 *
 * Prints the best and median of N runs for: the search's use (no per-event curves), the CLI's
 * use with curves (needed for --trace), and the arena allocator. Then the memory of
 * `simulate --trace` (issue 20: peak under 50 MB whatever the trace size): llama-2-7b without
 * pipelining at 1,024 to 10,240 micro-batches (the most ap_sim_run takes, AP_SIM_MAX_EVENTS), the trace written to a sink that counts its
 * bytes, streamed (ap_sim_opts.stream, what the CLI runs) and with one rank's events held
 * (release_events alone, the CLI before it), the heap in use sampled at every operation
 * (glibc mallinfo2: bytes in use, small blocks and mmapped ones). Usage:
 *   sim_bench [MODEL.json] [runs]     (default examples/models/llama-2-70b.json, 30 runs)
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autoplan/sim.h"

/* CPU time of this thread: on a shared machine the wall clock also counts other processes. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run(const char *label, const ap_model *m, const ap_plan *p, const ap_sim_opts *o,
               int runs) {
    double *t = malloc((size_t)runs * sizeof *t), *c = malloc((size_t)runs * sizeof *c);
    if (!t || !c) {
        free(t);
        free(c);
        return 1;
    }
    int64_t events = 0, peak = 0;
    for (int i = 0; i < runs; i++) {
        ap_sim *s = NULL;
        ap_err err = {{0}};
        double t0 = ap_now_s(), c0 = cpu_s();
        ap_status st = ap_sim_run(m, NULL, p, o, &s, &err);
        t[i] = ap_now_s() - t0;
        c[i] = cpu_s() - c0;
        if (st != AP_OK) {
            fprintf(stderr, "sim_bench: %s\n", err.msg);
            free(t);
            free(c);
            return 1;
        }
        events = 0;
        peak = 0;
        for (int r = 0; r < ap_sim_nranks(s); r++) {
            events += ap_sim_rank_at(s, r)->nevents;
            if (ap_sim_rank_at(s, r)->allocated_peak_bytes > peak)
                peak = ap_sim_rank_at(s, r)->allocated_peak_bytes;
        }
        ap_sim_free(s);
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    qsort(c, (size_t)runs, sizeof *c, cmp_d);
    printf("%-31s wall best %6.2f ms median %6.2f ms | cpu best %6.2f ms median %6.2f ms "
           "(%lld events, %.1f ns/event; allocated peak %.2f GiB)\n",
           label, t[0] * 1e3, t[runs / 2] * 1e3, c[0] * 1e3, c[runs / 2] * 1e3,
           (long long)events, c[0] * 1e9 / (double)events,
           (double)peak / (1024.0 * 1024.0 * 1024.0));
    free(t);
    free(c);
    return 0;
}

/* the trace's bytes, counted and dropped */
static ap_status count_sink(void *ctx, const char *data, size_t len, ap_err *err) {
    (void)data;
    (void)err;
    *(size_t *)ctx += len;
    return AP_OK;
}

typedef struct {
    ap_sim_tracer *tr;
    size_t peak;
} heap_watch;

static void sample(heap_watch *w) {
    struct mallinfo2 mi = mallinfo2();
    size_t used = mi.uordblks + mi.hblkhd;
    if (used > w->peak) w->peak = used;
}

static ap_status watch_op(void *ctx, const ap_sim *s, int rank, const ap_sim_op *op,
                          const ap_sim_op_state *st, ap_err *err) {
    heap_watch *w = ctx;
    sample(w);
    return ap_sim_tracer_op(w->tr, s, rank, op, st, err);
}

static ap_status watch_rank(void *ctx, const ap_sim *s, int rank, ap_err *err) {
    heap_watch *w = ctx;
    sample(w);
    return ap_sim_tracer_rank(w->tr, s, rank, err);
}

/* one simulate --trace of plan p: events, trace bytes and the peak heap in use */
static int trace_memory(const ap_model *m, const ap_plan *p, int stream) {
    size_t bytes = 0;
    heap_watch w = {NULL, 0};
    ap_err err = {{0}};
    if (ap_sim_tracer_open(NULL, count_sink, &bytes, &w.tr, &err) != AP_OK) return 1;
    ap_sim_opts o;
    ap_sim_opts_init(&o);
    o.release_events = 1;
    o.stream = stream;
    ap_sim_tracer_attach(w.tr, &o);
    o.rank_done = watch_rank;
    if (stream) o.op_done = watch_op;
    o.rank_ctx = &w;
    sample(&w);
    size_t base = w.peak;
    w.peak = 0;
    ap_sim *s = NULL;
    double t0 = ap_now_s();
    ap_status st = ap_sim_run(m, NULL, p, &o, &s, &err);
    if (st == AP_OK) st = ap_sim_tracer_finish(w.tr, &err);
    else ap_sim_tracer_abort(w.tr);
    if (st != AP_OK) {
        fprintf(stderr, "sim_bench: %s\n", err.msg);
        return 1;
    }
    printf("  %-8s %6lld micro-batches: %9d events, trace %6.1f MB, %.2f s, peak heap %7.1f MB "
           "above the %.1f MB before\n", stream ? "streamed" : "one rank", (long long)p->grad_accum,
           ap_sim_rank_at(s, 0)->nevents, (double)bytes / 1e6, ap_now_s() - t0,
           (double)(w.peak > base ? w.peak - base : 0) / 1e6, (double)base / 1e6);
    ap_sim_free(s);
    return 0;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : AP_SOURCE_DIR "/examples/models/llama-2-70b.json";
    int runs = argc > 2 ? atoi(argv[2]) : 30;
    if (runs < 1) runs = 1;
    ap_model m;
    ap_err err = {{0}};
    if (ap_model_load(path, &m, &err) != AP_OK) {
        fprintf(stderr, "sim_bench: %s\n", err.msg);
        return 1;
    }
    ap_plan p;
    ap_plan_init(&p);
    p.tp = 8;
    p.pp = 8;
    p.dp = 8;
    p.mbs = 1;
    p.grad_accum = 64;
    p.gbs = p.mbs * p.grad_accum * p.dp;
    p.seq = 4096;
    printf("sim_bench: %s, tp 8 pp 8 dp 8, 64 micro-batches x 4096 tokens, 1F1B, %d runs\n",
           m.name, runs);
    ap_sim_opts o;
    ap_sim_opts_init(&o);
    o.record_curves = 0;
    int rc = run("caching allocator, no curves", &m, &p, &o, runs);
    o.record_curves = 1;
    rc |= run("caching allocator, with curves", &m, &p, &o, runs);
    o.record_curves = 0;
    o.allocator = AP_ALLOC_ARENA;
    rc |= run("arena, no curves", &m, &p, &o, runs);
    ap_model small;
    if (ap_model_load(AP_SOURCE_DIR "/examples/models/llama-2-7b.json", &small, &err) != AP_OK) {
        fprintf(stderr, "sim_bench: %s\n", err.msg);
        return 1;
    }
    printf("simulate --trace memory: %s, tp 1 pp 1, micro-batch 1 x 4096 tokens\n", small.name);
    const int64_t mbs[3] = {1024, 4096, 10240};
    for (int i = 0; i < 3; i++)
        for (int stream = 1; stream >= 0; stream--) {
            ap_plan q;
            ap_plan_init(&q);
            q.mbs = 1;
            q.grad_accum = q.gbs = mbs[i];
            q.seq = 4096;
            q.zero = 1;
            rc |= trace_memory(&small, &q, stream);
        }
    return rc;
}
