/*
 * hetero_bench.c - time of the heterogeneous-memory simulation (issue 18): one Gemini or
 * DeepSpeed offload run operator by operator (sim/gemini.c, sim/zero_infinity.c), with and
 * without the per-operator records the CLI prints, and one `autoplan fit` ladder. The search
 * runs the same simulation for every Colossal-AI ZeRO-3 and DeepSpeed offload candidate, so a
 * run should stay in the milliseconds.
 *
 * Cases (the claims of docs/heterogeneous.md): Gemini auto on gpt2_xl / RTX 2060; Gemini static
 * on an 18B GPT-2 / RTX 3090; ZeRO-Infinity (params and optimizer on NVMe) on GPT-3 13B / one
 * V100 with 16 micro-batches per step (micro-batches 2..m-2 are counted, not re-simulated); and
 * fit over the gpt2-colossalai ladder on an RTX 3090 (every strategy but the search's best);
 * `autoplan fit`'s default (the gpt ladder, one A100, every strategy with the search's best) on
 * one and two threads; and the Colossal-AI search of GPT-3 175B on 16 A100s that `plan
 * --gpus 8 --trainer colossalai` runs for its suggestion, in full and as the suggestion runs it
 * (answer_only: only the best plan is read). Prints best and median of N runs, wall and CPU
 * time (the calling thread's; the process's where threads run). Usage: hetero_bench [runs]
 * [repository root, default .]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "autoplan/family.h"
#include "autoplan/fit.h"
#include "autoplan/hetero.h"
#include "autoplan/search.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double proc_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *label, double *t, double *c, int runs, const char *what) {
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    qsort(c, (size_t)runs, sizeof *c, cmp_d);
    printf("%-48s wall best %8.2f ms median %8.2f ms | cpu best %8.2f ms median %8.2f ms  %s\n",
           label, t[0] * 1e3, t[runs / 2] * 1e3, c[0] * 1e3, c[runs / 2] * 1e3, what);
}

/* The plan fit evaluates for this strategy and model (its defaults: one sequence, full
   recompute, the claim's dtype). */
static int plan_of(const char *family, int shape, int64_t layers, const char *gpu, int gpus,
                   double cpu_gib, double nvme_tb, int64_t mbs, double tokens, const char *strat,
                   ap_model *m, ap_cluster *c, ap_plan *p) {
    ap_err err = {{0}};
    ap_family f;
    if (ap_family_get(family, &f, &err) != AP_OK) goto bad;
    ap_family_rung r = {shape, layers, 0};
    if (ap_family_model(&f, &r, m, &err) != AP_OK) goto bad;
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_cluster_from_gpu(ap_gpu_find(gpu), gpus, &o.cluster);
    if (cpu_gib > 0) o.cluster.cpu_mem_bytes = cpu_gib * 1073741824.0;
    if (nvme_tb > 0) {
        o.cluster.nvme_bytes = nvme_tb * 1e12;
        o.cluster.nvme_read_bytes_per_s = o.cluster.nvme_write_bytes_per_s = 6e9;
    }
    o.family = &f;
    o.mbs = mbs;
    o.tokens_per_step = tokens;
    o.dtype = AP_DTYPE_FP16;
    o.dtype_set = 1;
    int s;
    if (ap_fit_strategy_parse(strat, &s, &err) != AP_OK) goto bad;
    ap_fit_verdict v;
    if (ap_fit_eval(&o, s, m, &v, &err) != AP_OK) goto bad;
    *c = o.cluster;
    *p = v.plan;
    return 0;
bad:
    fprintf(stderr, "hetero_bench: %s\n", err.msg);
    return 1;
}

/* A benchmark case: run() makes the timed call; done() describes its result and frees it,
 * outside the clock. */
typedef struct {
    int (*run)(void *ctx, ap_err *err);        /* 0, or 1 with err set */
    void (*done)(void *ctx, char *what, size_t n);
    void *ctx;
    int process_cpu;                           /* threads run: the process's CPU time */
} bench_case;

/* `runs` timed calls of a case, then their best and median; 1 on failure. */
static int timed(const char *label, const bench_case *bc, int runs) {
    double *t = malloc((size_t)runs * sizeof *t), *cp = malloc((size_t)runs * sizeof *cp);
    int rc = !t || !cp;
    char what[160] = "";
    for (int i = 0; i < runs && !rc; i++) {
        ap_err err = {{0}};
        double t0 = ap_now_s(), c0 = bc->process_cpu ? proc_cpu_s() : cpu_s();
        rc = bc->run(bc->ctx, &err);
        t[i] = ap_now_s() - t0;
        cp[i] = (bc->process_cpu ? proc_cpu_s() : cpu_s()) - c0;
        if (rc) fprintf(stderr, "hetero_bench: %s: %s\n", label, err.msg);
        else bc->done(bc->ctx, what, sizeof what);
    }
    if (!rc) report(label, t, cp, runs, what);
    free(t);
    free(cp);
    return rc;
}

/* One simulation of a plan (ap_hetero_run), with or without its per-operator records. */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    ap_hetero_opts o;
    ap_hetero *h;
} run_ctx;

static int run_once(void *ctx, ap_err *err) {
    run_ctx *x = ctx;
    return ap_hetero_run(x->m, x->c, x->p, &x->o, &x->h, err) != AP_OK;
}

static void run_done(void *ctx, char *what, size_t n) {
    run_ctx *x = ctx;
    const ap_hetero_summary *s = ap_hetero_summary_of(x->h);
    snprintf(what, n, "(%.2fB params, %lld micro-batches, step %.2f s)",
             (double)ap_model_total_params(x->m) / 1e9, (long long)s->micro_batches, s->step_s);
    ap_hetero_free(x->h);
    x->h = NULL;
}

static int bench_run(const char *label, const ap_model *m, const ap_cluster *c, const ap_plan *p,
                     int record, int runs) {
    run_ctx x = {.m = m, .c = c, .p = p};
    ap_hetero_opts_init(&x.o);
    x.o.record = record;
    bench_case bc = {run_once, run_done, &x, 0};
    return timed(label, &bc, runs);
}

/* One `autoplan fit` over a family's ladder. */
typedef struct {
    ap_fit_opts o;
    ap_fit_result r;
} fit_ctx;

static int fit_once(void *ctx, ap_err *err) {
    fit_ctx *x = ctx;
    return ap_fit(&x->o, &x->r, err) != AP_OK;
}

static void fit_done(void *ctx, char *what, size_t n) {
    fit_ctx *x = ctx;
    int evals = 0;
    for (int k = 0; k < x->r.n; k++) evals += x->r.e[k].evaluations;
    snprintf(what, n, "(%d strategies, %d evaluations)", x->r.n, evals);
}

static int bench_fit(const char *label, const char *family, const char *gpu, double cpu_gib,
                     int fp16, int with_best, int threads, int runs) {
    fit_ctx *x = malloc(sizeof *x);
    ap_err err = {{0}};
    ap_family f;
    if (!x || ap_family_get(family, &f, &err) != AP_OK) {
        fprintf(stderr, "hetero_bench: %s\n", x ? err.msg : "out of memory");
        free(x);
        return 1;
    }
    ap_fit_opts_init(&x->o);
    ap_cluster_from_gpu(ap_gpu_find(gpu), 1, &x->o.cluster);
    if (cpu_gib > 0) x->o.cluster.cpu_mem_bytes = cpu_gib * 1073741824.0;
    x->o.family = &f;
    if (fp16) {
        x->o.dtype = AP_DTYPE_FP16;
        x->o.dtype_set = 1;
    }
    if (!with_best) x->o.strategies = ((1u << AP_FIT_NSTRATEGIES) - 1u) & ~(1u << AP_FIT_BEST);
    x->o.threads = threads;
    bench_case bc = {fit_once, fit_done, x, 1};
    int rc = timed(label, &bc, runs);
    free(x);
    return rc;
}

/* One search of a model on n GPUs of one trainer, one thread. */
typedef struct {
    ap_model m;
    ap_cluster c;
    ap_search_opts o;
    ap_search_result r;
} search_ctx;

static int search_once(void *ctx, ap_err *err) {
    search_ctx *x = ctx;
    return ap_search(&x->m, &x->c, &x->o, &x->r, err) != AP_OK;
}

static void search_done(void *ctx, char *what, size_t n) {
    search_ctx *x = ctx;
    snprintf(what, n, "(%lld estimated, best step %.1f s)", (long long)x->r.evaluated,
             x->r.ntop > 0 ? x->r.top[0].time.step_s : 0.0);
    ap_search_result_free(&x->r);
}

/* The search of model `path` (under root). */
static int bench_search(const char *label, const char *root, const char *path, const char *gpu,
                        int n, int64_t gbs, ap_trainer_id tr, int answer_only, int runs) {
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", root, path);
    search_ctx x;
    ap_err err = {{0}};
    if (ap_model_load(full, &x.m, &err) != AP_OK) {
        fprintf(stderr, "hetero_bench: %s\n", err.msg);
        return 1;
    }
    ap_cluster_from_gpu(ap_gpu_find(gpu), n, &x.c);
    ap_search_opts_init(&x.o);
    x.o.fixed.trainer = tr;
    x.o.fixed.seq = x.m.seq_len;
    x.o.gbs = gbs;
    x.o.threads = 1;
    x.o.answer_only = answer_only;
    if (answer_only) {
        x.o.top_k = 1; /* as the suggestions search */
        x.o.resplit = 0;
    }
    bench_case bc = {search_once, search_done, &x, 0};
    return timed(label, &bc, runs);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    const char *root = argc > 2 ? argv[2] : ".";
    if (runs < 1) runs = 1;
    printf("hetero_bench: %d runs each\n", runs);
    ap_model m;
    ap_cluster c;
    ap_plan p;
    int rc = 0;
    if (plan_of("gpt2-colossalai", 1, 48, "rtx-2060", 1, 0, 0, 1, 0, "gemini-auto", &m, &c, &p))
        return 1;
    rc |= bench_run("gemini auto, gpt2_xl, rtx-2060, records", &m, &c, &p, 1, runs);
    rc |= bench_run("gemini auto, gpt2_xl, rtx-2060, no records", &m, &c, &p, 0, runs);
    if (plan_of("gpt2-colossalai", 3, 89, "rtx-3090", 1, 384, 0, 1, 0, "gemini-static", &m, &c,
                &p))
        return 1;
    rc |= bench_run("gemini static, 18B, rtx-3090, no records", &m, &c, &p, 0, runs);
    if (plan_of("gpt", 6, 40, "v100-sxm2-32g", 1, 1536, 30.72, 2, 32768, "zero-infinity-nvme",
                &m, &c, &p))
        return 1;
    rc |= bench_run("zero-infinity nvme, GPT-3 13B, v100, no records", &m, &c, &p, 0, runs);
    rc |= bench_fit("fit, gpt2-colossalai, rtx-3090 128 GiB", "gpt2-colossalai", "rtx-3090", 128,
                    1, 0, 1, runs > 3 ? 3 : runs);
    rc |= bench_fit("fit, gpt, a100-sxm4-80g, strategies on 1 thread", "gpt", "a100-sxm4-80g", 0,
                    0, 1, 1, runs > 3 ? 3 : runs);
    rc |= bench_fit("fit, gpt, a100-sxm4-80g, strategies on 2 threads", "gpt", "a100-sxm4-80g",
                    0, 0, 1, 2, runs > 3 ? 3 : runs);
    rc |= bench_search("search gpt3-175b, 16 a100, colossalai, full", root,
                       "examples/models/gpt3-175b.json", "a100-sxm4-80g", 16, 1920,
                       AP_TRAINER_COLOSSALAI, 0, runs > 3 ? 3 : runs);
    rc |= bench_search("the same, answer_only (a suggestion)", root,
                       "examples/models/gpt3-175b.json", "a100-sxm4-80g", 16, 1920,
                       AP_TRAINER_COLOSSALAI, 1, runs > 3 ? 3 : runs);
    return rc;
}
