/*
 * bench.c - the host figures the runtime's time prediction uses (runtime.h,
 * ap_rt_host_figures), measured by every rank at once before training so each sees the cores,
 * caches and memory channels shared as they are during the run: the GEMM rate of a large square
 * product and of a small one (a two-point fit of the cost model's saturating GEMM efficiency,
 * estimate.c), the rate of the plan's attention-score GEMM shape, streaming memory bandwidth,
 * and the point-to-point latency and bandwidth between world ranks 0 and 1. Rank 0's figures are
 * the report's. About a quarter of a second; buffers are not tracked (they are not training
 * memory). Figures taken while every rank measures are the contended ones the run sees when
 * ranks share cores.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"

static double median5(double *v) {
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[2];
}

/* Seconds per call of f: five blocks of calls, each at least min_s / 5 long; the median block
 * (while every rank measures at once, as ranks share cores during the run; one block disturbed
 * by another process does not move it). */
static double time_per_call(rt_ctx *c, void (*f)(void *), void *arg, double min_s) {
    f(arg); /* warm up: first touches, code paths */
    c->k->sync();
    double per[5];
    for (int blk = 0; blk < 5; blk++) {
        int reps = 0;
        double t0 = c->world->wtime(), t;
        do {
            f(arg);
            reps++;
            c->k->sync();
            t = c->world->wtime() - t0;
        } while (t < min_s / 5 && reps < 1000000);
        per[blk] = t / reps;
    }
    return median5(per);
}

typedef struct gemm_arg {
    const rt_kernels *k;
    int64_t M, N, K;
    rt_real *A, *B, *C;
} gemm_arg;

static void run_gemm(void *p) {
    gemm_arg *g = p;
    g->k->gemm_nt(g->M, g->N, g->K, g->A, g->K, g->B, g->K, 0, g->C, g->N);
}

/* FLOP/s of C[M,N] = A[M,K] B[N,K]^T */
static double gemm_rate(rt_ctx *c, int64_t M, int64_t N, int64_t K, double min_s) {
    gemm_arg g = {c->k, M, N, K, c->k->alloc(M * K * RT_ELEM), c->k->alloc(N * K * RT_ELEM),
                  c->k->alloc(M * N * RT_ELEM)};
    double rate = 0;
    if (g.A && g.B && g.C) rate = 2.0 * (double)(M * N * K) / time_per_call(c, run_gemm, &g, min_s);
    c->k->release(g.A);
    c->k->release(g.B);
    c->k->release(g.C);
    return rate;
}

typedef struct copy_arg {
    const rt_kernels *k;
    void *a, *b;
    int64_t bytes;
} copy_arg;

static void run_copy(void *p) {
    copy_arg *a = p;
    a->k->copy(a->b, a->a, a->bytes);
}

ap_status rt_bench(rt_ctx *c, ap_rt_host_figures *out) {
    memset(out, 0, sizeof *out);
    /* GEMMs: 512^3 (268 MFLOP) stands for the large ones; 64^3 (0.5 MFLOP) sits on the rising
       part of the efficiency curve eff(F) = eff_max F / (F + F_half), so
       F_half = F_small (rate_large / rate_small - 1) */
    double big = gemm_rate(c, 512, 512, 512, 0.08);
    double small = gemm_rate(c, 64, 64, 64, 0.03);
    out->gemm_flops_per_s = big;
    if (small > 0 && big > small) out->gemm_half_flops = 2.0 * 64 * 64 * 64 * (big / small - 1.0);
    out->attn_flops_per_s = gemm_rate(c, c->s, c->s, c->d, 0.03);
    /* streaming copy of the plan's largest per-layer activation (the attention probabilities
       or the MLP's up projection of one micro-batch: what the elementwise kernels stream; a
       small model's fits in the caches, a large one's does not), 64 KiB to 64 MiB; 2 bytes
       moved per byte copied */
    int64_t act = c->b * c->aL * c->s * c->s;
    int64_t uL = c->swiglu ? 2 * c->fL : c->fL;
    if (c->n * uL > act) act = c->n * uL;
    int64_t bytes = act * RT_ELEM;
    if (bytes < (64 << 10)) bytes = 64 << 10;
    if (bytes > (64 << 20)) bytes = 64 << 20;
    copy_arg cp = {c->k, c->k->alloc(bytes), c->k->alloc(bytes), bytes};
    if (cp.a && cp.b) out->mem_bytes_per_s = 2.0 * (double)cp.bytes / time_per_call(c, run_copy, &cp, 0.05);
    c->k->release(cp.a);
    c->k->release(cp.b);
    /* point to point between world ranks 0 and 1: half the round trip of 8 bytes, and the
       one-way time of 4 MiB */
    if (c->wg->size > 1) {
        ap_err e = {{0}};
        /* everyone has finished the compute benchmarks before ranks 0 and 1 time messages;
           the median of five blocks, as above */
        double lat[5] = {0}, bw[5] = {0};
        ap_status st = c->wg->ops->barrier(c->wg, &e);
        for (int blk = 0; blk < 5 && st == AP_OK; blk++) {
            st = c->wg->ops->pingpong(c->wg, 1, 8, 50, &lat[blk], &e);
            if (st == AP_OK) st = c->wg->ops->pingpong(c->wg, 1, 4 << 20, 2, &bw[blk], &e);
        }
        if (st != AP_OK) return rt_fail(c, st, "benchmark: %s", e.msg);
        if (c->rank == 0) {
            double l = median5(lat), b = median5(bw);
            out->p2p_latency_s = l / (2.0 * 50);
            out->p2p_bytes_per_s = b > 0 ? (double)(4 << 20) * 2.0 * 2 / b : 0;
        }
    }
    out->measured = out->gemm_flops_per_s > 0 && out->mem_bytes_per_s > 0;
    return AP_OK;
}
