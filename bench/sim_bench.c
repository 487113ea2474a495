/*
 * sim_bench.c - time to simulate one training iteration of llama-2-70b (tp 8, pp 8, 64
 * micro-batches of 4096 tokens, Megatron 1F1B) with the memory simulator (sim.h), every
 * pipeline rank, event by event, through the caching-allocator model. Target: < 10 ms, so the
 * top plans of every search can be simulated (issue 7).
 *
 * Prints the best and median of N runs for: the search's use (no per-event curves), the CLI's
 * use with curves (needed for --trace), and the arena allocator. Usage:
 *   sim_bench [MODEL.json] [runs]     (default examples/models/llama-2-70b.json, 30 runs)
 */
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
    return rc;
}
