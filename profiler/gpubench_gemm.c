/*
 * gpubench_gemm.c - GEMMs through cuBLASLt (the only file that includes cublasLt.h; CUDA builds
 * only): each shape of the generic grid or of a model's linear layers (shapes.c) in bf16, fp16,
 * tf32 and, on sm89 and later, fp8, timed as trainers run them, and the device memory the
 * cuBLASLt handle, its workspace and its lazily loaded kernels take.
 *
 * Layout "TN" as Megatron-LM and PyTorch call it for a linear layer (weights transposed):
 * C[m x n] = A^T B with A stored k x m and B stored k x n, column-major, beta = 0, C = D. fp8
 * (E4M3 inputs, bf16 output, fp32 accumulate) requires exactly this layout in cuBLASLt (cuBLAS
 * documentation, "cublasLtMatmul", FP8 type combinations). Accumulation is fp32 for every
 * dtype; tf32 is fp32 data with CUBLAS_COMPUTE_32F_FAST_TF32. The algorithm is cuBLASLt's first
 * heuristic choice with a 32 MiB workspace (NVIDIA's recommendation for Hopper, cuBLAS
 * documentation "cublasSetWorkspace"), which is what a framework gets without autotuning.
 * Inputs hold non-zero values (kernels.cu fill).
 *
 * What it does not do: autotune over algorithms (a trainer does not either), batched or
 * grouped GEMMs (MoE experts appear as single GEMMs at their average token count).
 */
#include "gpubench_int.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define WORKSPACE_BYTES ((size_t)32 << 20)

void ap_gb_cublas_version(char *buf, size_t n) {
    size_t v = cublasLtGetVersion(); /* major * 10000 + minor * 100 + patch */
    snprintf(buf, n, "%zu.%zu.%zu", v / 10000, (v / 100) % 100, v % 100);
}

typedef struct {
    const char *name;    /* profile dtype */
    cudaDataType_t ab, cd;
    cublasComputeType_t compute;
    int fill;            /* kernels.cu fill kind of A and B */
    size_t elem_ab, elem_cd;
    int min_sm;          /* 10 * major + minor */
} gemm_type;

static const gemm_type types[] = {
    {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, AP_FILL_BF16, 2, 2, 80},
    {"fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, AP_FILL_F16, 2, 2, 70},
    {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, AP_FILL_FP8, 1, 2, 89},
    {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, AP_FILL_F32, 4, 4, 80},
};
#define NTYPES (sizeof types / sizeof types[0])

typedef struct {
    ap_gb *g;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulAlgo_t algo;
    void *A, *B, *C, *ws;
    size_t ws_bytes;
} gemm_arg;

static ap_status lt_fail(cublasStatus_t st, const char *doing, ap_err *err) {
    return ap_err_set(err, AP_ERR_CUDA, "cuBLASLt: %s: %s (status %d)", doing,
                      cublasLtGetStatusString(st), (int)st);
}

static int do_gemm(void *p, ap_err *err) {
    gemm_arg *a = p;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmul(a->lt, a->op, &one, a->A, a->a, a->B, a->b, &zero, a->C,
                                       a->c, a->C, a->c, &a->algo, a->ws, a->ws_bytes, a->g->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        lt_fail(st, "cublasLtMatmul", err);
        return -1;
    }
    return 0;
}

static void destroy_layouts(gemm_arg *a) {
    if (a->a) cublasLtMatrixLayoutDestroy(a->a);
    if (a->b) cublasLtMatrixLayoutDestroy(a->b);
    if (a->c) cublasLtMatrixLayoutDestroy(a->c);
    if (a->op) cublasLtMatmulDescDestroy(a->op);
    a->a = a->b = a->c = NULL;
    a->op = NULL;
}

/* Describe one TN GEMM and ask the heuristic for an algorithm: 1 when there is one. */
static int plan_gemm(gemm_arg *a, const gemm_type *t, const ap_gemm_shape *s, ap_err *err,
                     ap_status *st) {
    *st = AP_OK;
    cublasOperation_t tr = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    cublasStatus_t r = cublasLtMatmulDescCreate(&a->op, t->compute, CUDA_R_32F);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulDescSetAttribute(a->op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulDescSetAttribute(a->op, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof nt);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatrixLayoutCreate(&a->a, t->ab, (uint64_t)s->k, (uint64_t)s->m, s->k);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatrixLayoutCreate(&a->b, t->ab, (uint64_t)s->k, (uint64_t)s->n, s->k);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatrixLayoutCreate(&a->c, t->cd, (uint64_t)s->m, (uint64_t)s->n, s->m);
    if (r != CUBLAS_STATUS_SUCCESS) {
        *st = lt_fail(r, "describing a GEMM", err);
        return 0;
    }
    cublasLtMatmulPreference_t pref = NULL;
    r = cublasLtMatmulPreferenceCreate(&pref);
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &a->ws_bytes, sizeof a->ws_bytes);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (r == CUBLAS_STATUS_SUCCESS)
        r = cublasLtMatmulAlgoGetHeuristic(a->lt, a->op, a->a, a->b, a->c, a->c, pref, 1, &h, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (r != CUBLAS_STATUS_SUCCESS || found < 1) return 0; /* not supported: skipped */
    a->algo = h.algo;
    return 1;
}

/* Memory the first cuBLASLt use adds: handle, workspace, kernels loaded on first use. */
static ap_status workspace_row(ap_gb *g, double before, ap_err *err) {
    double after = ap_gb_free_bytes();
    if (!(before > 0 && after > 0 && before > after)) return AP_OK;
    ap_bench_stats st = {0, 0, 0, 0, 1};
    char src[192];
    snprintf(src, sizeof src, "autoplan %s profile bench (cudaMemGetInfo before/after the first "
             "cuBLASLt GEMM with a %zu MiB workspace)", AP_VERSION, WORKSPACE_BYTES >> 20);
    ap_gb_note(g, "cuBLASLt handle + workspace + kernels: %.0f MiB", (before - after) / (1 << 20));
    return ap_gb_row(g, "device_mem", "kind=cublas_workspace", "none", &st, before - after, src,
                     err);
}

ap_status ap_gb_gemm(ap_gb *g, ap_err *err) {
    ap_gemm_shape *grid = NULL;
    size_t n = g->o->ngemm_shapes;
    const ap_gemm_shape *shapes = g->o->gemm_shapes;
    ap_status s = AP_OK;
    if (!shapes) {
        if ((s = ap_gemm_grid(&grid, &n, err)) != AP_OK) return s;
        if (g->o->quick) { /* up to 4096 on each side */
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (grid[i].m <= 4096 && grid[i].n <= 4096 && grid[i].k <= 4096) grid[k++] = grid[i];
            n = k;
        }
        shapes = grid;
    }
    int64_t mk = 1, kn = 1, mn = 1;
    for (size_t i = 0; i < n; i++) {
        if (shapes[i].m * shapes[i].k > mk) mk = shapes[i].m * shapes[i].k;
        if (shapes[i].k * shapes[i].n > kn) kn = shapes[i].k * shapes[i].n;
        if (shapes[i].m * shapes[i].n > mn) mn = shapes[i].m * shapes[i].n;
    }
    gemm_arg a;
    memset(&a, 0, sizeof a);
    a.g = g;
    a.ws_bytes = WORKSPACE_BYTES;
    /* the inputs first, so the memory row holds the handle, its workspace and the kernels
       loaded on first use, not these buffers (the H200 run's row read 9.8 GiB: the inputs of
       Llama-3-8B's LM-head GEMMs) */
    int rc = (int)cudaMalloc(&a.A, (size_t)mk * 4);
    if (!rc) rc = (int)cudaMalloc(&a.B, (size_t)kn * 4);
    if (!rc) rc = (int)cudaMalloc(&a.C, (size_t)mn * 4);
    if (rc) s = ap_gb_cuda(rc, "allocating GEMM buffers", err);
    double before = ap_gb_free_bytes();
    cublasStatus_t r = s == AP_OK ? cublasLtCreate(&a.lt) : CUBLAS_STATUS_SUCCESS;
    if (r != CUBLAS_STATUS_SUCCESS) s = lt_fail(r, "creating a handle", err);
    if (s == AP_OK) rc = (int)cudaMalloc(&a.ws, a.ws_bytes);
    if (s == AP_OK && rc) s = ap_gb_cuda(rc, "allocating the cuBLASLt workspace", err);
    const char *dtypes = g->o->dtypes ? g->o->dtypes : "bf16,fp16,fp8,tf32";
    int sm = 10 * g->sm_major + g->sm_minor, first = 1;
    char ver[32];
    ap_gb_cublas_version(ver, sizeof ver);
    for (size_t t = 0; s == AP_OK && t < NTYPES; t++) {
        const gemm_type *ty = &types[t];
        if (!strstr(dtypes, ty->name)) continue;
        if (sm < ty->min_sm) {
            ap_gb_note(g, "gemm %s: skipped (needs sm%d, this GPU is sm%d)", ty->name, ty->min_sm, sm);
            continue;
        }
        rc = ap_cu_fill(a.A, (size_t)mk, ty->fill, 1, g->stream);
        if (!rc) rc = ap_cu_fill(a.B, (size_t)kn, ty->fill, 2, g->stream);
        if (!rc) rc = (int)cudaStreamSynchronize(g->stream);
        if (rc) s = ap_gb_cuda(rc, "filling GEMM inputs", err);
        size_t done = 0, skipped = 0;
        double best = 0;
        for (size_t i = 0; s == AP_OK && i < n; i++) {
            if (!plan_gemm(&a, ty, &shapes[i], err, &s)) {
                destroy_layouts(&a);
                skipped += s == AP_OK;
                continue;
            }
            ap_bench_stats st;
            s = ap_gb_time(g, do_gemm, &a, &st, err);
            destroy_layouts(&a);
            if (s == AP_OK && first && ap_gb_wants(g, "devmem")) {
                s = workspace_row(g, before, err);
                first = 0;
            }
            if (s != AP_OK || !ap_gb_wants(g, "gemm")) break;
            char shape[128], src[192];
            snprintf(shape, sizeof shape, "m=%lld,n=%lld,k=%lld", (long long)shapes[i].m,
                     (long long)shapes[i].n, (long long)shapes[i].k);
            snprintf(src, sizeof src, "autoplan %s profile bench (cuBLASLt %s, TN, heuristic "
                     "algorithm, %s)", AP_VERSION, ver, shapes[i].what);
            s = ap_gb_row(g, "gemm", shape, ty->name, &st, 0, src, err);
            double f = 2.0 * (double)shapes[i].m * (double)shapes[i].n * (double)shapes[i].k;
            if (s == AP_OK && f / st.median_s > best) best = f / st.median_s;
            done++;
        }
        if (s == AP_OK && ap_gb_wants(g, "gemm"))
            ap_gb_note(g, "gemm %s: %zu shapes, best %.0f TFLOP/s%s", ty->name, done, best / 1e12,
                       skipped ? " (some shapes unsupported by cuBLASLt: skipped)" : "");
        if (!ap_gb_wants(g, "gemm")) break; /* devmem only: one GEMM was enough */
    }
    cudaFree(a.A);
    cudaFree(a.B);
    cudaFree(a.C);
    cudaFree(a.ws);
    if (a.lt) cublasLtDestroy(a.lt);
    free(grid);
    return s;
}
