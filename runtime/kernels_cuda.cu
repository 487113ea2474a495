/*
 * kernels_cuda.cu - the runtime's CUDA backend (rt_int.h, rt_kernels): the same kernel table as
 * kernels_cpu.c on device memory, GEMMs through cuBLAS (row-major products computed as their
 * column-major transposes), everything else as small CUDA kernels. Built only where the CUDA
 * toolkit is found; never run in this repository's CI (no GPU): docs/runtime.md says what is
 * verified.
 *
 * Determinism: no atomics. Reductions over rows (norm weight gradients, bias sums, embedding
 * and position gradients) run one thread per column over the rows in order, so a recomputed
 * pass or a rerun gives the same bits on one GPU; per-row reductions use a fixed tree in a block
 * of 256 threads. Across GPUs the collectives are NCCL's (comm_nccl.c), whose sums are not in
 * rank order: the bitwise guarantees of the CPU backend do not hold here.
 *
 * Errors: allocation failures return NULL (the tracker reports them); any other CUDA or cuBLAS
 * failure is kept and returned by last_error(), which the driver checks after every pass.
 */
extern "C" {
#include "rt_int.h"
}

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef AP_RT_DOUBLE
#error "the CUDA backend is fp32"
#endif

static cublasHandle_t blas;
static char err_msg[256];

static void note(const char *what, const char *why) {
    if (!err_msg[0]) snprintf(err_msg, sizeof err_msg, "%s: %s", what, why);
}
#define CU(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) note(#call, cudaGetErrorString(e_));                                \
    } while (0)
#define CB(call)                                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) note(#call, "cuBLAS failure");                            \
    } while (0)

static const int TPB = 256;
static unsigned blocks(int64_t n) { return (unsigned)((n + TPB - 1) / TPB); }

/* ---- memory ------------------------------------------------------------------------------------ */

static void *cu_alloc(int64_t bytes) {
    void *p = NULL;
    if (bytes <= 0 || cudaMalloc(&p, (size_t)bytes) != cudaSuccess) return NULL;
    if (cudaMemset(p, 0, (size_t)bytes) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}
static void cu_release(void *p) {
    if (p) CU(cudaFree(p));
}
static void cu_upload(void *d, const void *h, int64_t bytes) {
    if (bytes > 0) CU(cudaMemcpy(d, h, (size_t)bytes, cudaMemcpyHostToDevice));
}
static void cu_download(void *h, const void *d, int64_t bytes) {
    if (bytes > 0) CU(cudaMemcpy(h, d, (size_t)bytes, cudaMemcpyDeviceToHost));
}
static void cu_copy(void *d, const void *s, int64_t bytes) {
    if (bytes > 0 && d != s) CU(cudaMemcpy(d, s, (size_t)bytes, cudaMemcpyDeviceToDevice));
}
static void cu_zero(void *d, int64_t bytes) {
    if (bytes > 0) CU(cudaMemset(d, 0, (size_t)bytes));
}
static void cu_sync(void) { CU(cudaDeviceSynchronize()); }

/* ---- GEMMs: row-major X[r][c] is column-major X^T -------------------------------------------- */

static void scale_rows(int64_t M, int64_t N, rt_real beta, rt_real *C, int64_t ldc);

/* C = A B^T: C^T (N x M) = B A^T, B viewed as (K x N) transposed */
static void cu_gemm_nt(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                       const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_rows(M, N, beta, C, ldc);
    const float one = 1;
    CB(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, (int)ldb, A,
                   (int)lda, &beta, C, (int)ldc));
}
/* C = A B: C^T = B^T A^T */
static void cu_gemm_nn(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                       const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_rows(M, N, beta, C, ldc);
    const float one = 1;
    CB(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B, (int)ldb, A,
                   (int)lda, &beta, C, (int)ldc));
}
/* C = A^T B (A is K x M): C^T = B^T A */
static void cu_gemm_tn(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                       const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_rows(M, N, beta, C, ldc);
    const float one = 1;
    CB(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)N, (int)M, (int)K, &one, B, (int)ldb, A,
                   (int)lda, &beta, C, (int)ldc));
}

__global__ void k_scale(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * N) return;
    int64_t r = i / N, c = i % N;
    C[r * ldc + c] = beta == 0 ? 0.f : beta * C[r * ldc + c];
}
static void scale_rows(int64_t M, int64_t N, rt_real beta, rt_real *C, int64_t ldc) {
    k_scale<<<blocks(M * N), TPB>>>(M, N, beta, C, ldc);
}

/* ---- block reductions ------------------------------------------------------------------------ */

/* Sum (or max) of one value per thread over a block of TPB threads, fixed tree order. */
__device__ float block_reduce(float v, int is_max) {
    __shared__ float sh[256];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] = is_max ? fmaxf(sh[threadIdx.x], sh[threadIdx.x + s])
                                     : sh[threadIdx.x] + sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

/* ---- norms (kernels_cpu.c has the formulas and their sources) --------------------------------- */

#define NORM_EPS 1e-5f

__global__ void k_norm_fwd(int rms, int64_t h, const float *x, const float *w, const float *b,
                           float *y, float *stats) {
    const float *xr = x + blockIdx.x * h;
    float *yr = y + blockIdx.x * h;
    float s = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) s += xr[j];
    float mean = rms ? 0.f : block_reduce(s, 0) / (float)h;
    float v = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) v += (xr[j] - mean) * (xr[j] - mean);
    float rstd = rsqrtf(block_reduce(v, 0) / (float)h + NORM_EPS);
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
        float o = (xr[j] - mean) * rstd * w[j];
        if (!rms && b) o += b[j];
        yr[j] = o;
    }
    if (threadIdx.x == 0) {
        if (rms) stats[blockIdx.x] = rstd;
        else {
            stats[2 * blockIdx.x] = mean;
            stats[2 * blockIdx.x + 1] = rstd;
        }
    }
}

__global__ void k_norm_bwd_dx(int rms, int64_t h, const float *dy, const float *x,
                              const float *w, const float *stats, float *dx) {
    int64_t r = blockIdx.x;
    const float *xr = x + r * h, *dyr = dy + r * h;
    float mean = rms ? 0.f : stats[2 * r], rstd = rms ? stats[r] : stats[2 * r + 1];
    float a = 0, c = 0;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
        float xh = (xr[j] - mean) * rstd, g = dyr[j] * w[j];
        a += g;
        c += g * xh;
    }
    float mg = block_reduce(a, 0) / (float)h, mgx = block_reduce(c, 0) / (float)h;
    for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
        float xh = (xr[j] - mean) * rstd, g = dyr[j] * w[j];
        dx[r * h + j] = rstd * (g - xh * mgx - (rms ? 0.f : mg));
    }
}

/* dw, db: one thread per column, rows in order */
__global__ void k_norm_bwd_dw(int rms, int64_t rows, int64_t h, const float *dy, const float *x,
                              const float *stats, float *dw, float *db) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= h) return;
    float sw = 0, sb = 0;
    for (int64_t r = 0; r < rows; r++) {
        float mean = rms ? 0.f : stats[2 * r], rstd = rms ? stats[r] : stats[2 * r + 1];
        sw += dy[r * h + j] * (x[r * h + j] - mean) * rstd;
        sb += dy[r * h + j];
    }
    dw[j] += sw;
    if (!rms && db) db[j] += sb;
}

static void cu_norm_fwd(int rms, int64_t rows, int64_t h, const rt_real *x, const rt_real *w,
                        const rt_real *b, rt_real *y, rt_real *stats) {
    if (rows > 0) k_norm_fwd<<<(unsigned)rows, TPB>>>(rms, h, x, w, b, y, stats);
}
static void cu_norm_bwd(int rms, int64_t rows, int64_t h, const rt_real *dy, const rt_real *x,
                        const rt_real *w, const rt_real *stats, rt_real *dx, rt_real *dw,
                        rt_real *db) {
    if (rows <= 0) return;
    k_norm_bwd_dx<<<(unsigned)rows, TPB>>>(rms, h, dy, x, w, stats, dx);
    k_norm_bwd_dw<<<blocks(h), TPB>>>(rms, rows, h, dy, x, stats, dw, db);
}

/* ---- rotary embedding --------------------------------------------------------------------------- */

__global__ void k_rope(float *x, int64_t rows, int64_t ld, int64_t heads, int64_t d, int64_t s,
                       int inverse) {
    int64_t half = d / 2, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * heads * half) return;
    int64_t r = i / (heads * half), hd = (i / half) % heads, k = i % half;
    double theta = (double)(r % s) * pow(10000.0, -2.0 * (double)k / (double)d);
    double cs = cos(theta), sn = inverse ? -sin(theta) : sin(theta);
    float *v = x + r * ld + hd * d;
    double x1 = v[k], x2 = v[k + half];
    v[k] = (float)(x1 * cs - x2 * sn);
    v[k + half] = (float)(x2 * cs + x1 * sn);
}
static void cu_rope(rt_real *x, int64_t rows, int64_t ld, int64_t heads, int64_t d, int64_t s,
                    int inverse) {
    int64_t n = rows * heads * (d / 2);
    if (n > 0) k_rope<<<blocks(n), TPB>>>(x, rows, ld, heads, d, s, inverse);
}

/* ---- attention ---------------------------------------------------------------------------------- */

__global__ void k_causal_softmax(float *P, int64_t s, float scale) {
    int64_t i = blockIdx.x;
    float *row = P + i * s;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, scale * row[j]);
    mx = block_reduce(mx, 1);
    float sum = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
        float e = expf(scale * row[j] - mx);
        row[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, 0);
    for (int64_t j = threadIdx.x; j < s; j += blockDim.x) row[j] = j <= i ? row[j] / sum : 0.f;
}

__global__ void k_softmax_bwd(float *dP, const float *P, int64_t s, float scale) {
    int64_t i = blockIdx.x;
    float *d = dP + i * s;
    const float *p = P + i * s;
    float dot = 0;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += d[j] * p[j];
    dot = block_reduce(dot, 0);
    for (int64_t j = threadIdx.x; j < s; j += blockDim.x)
        d[j] = j <= i ? scale * p[j] * (d[j] - dot) : 0.f;
}

static void head_ptrs(const rt_attn_shape *sh, const float *base, int64_t bi, int64_t hi,
                      const float **q, const float **k, const float **v) {
    int64_t g = hi / (sh->aL / sh->kL);
    const float *b = base + bi * sh->s * sh->ld;
    *q = b + hi * sh->d;
    *k = b + sh->aL * sh->d + g * sh->d;
    *v = b + (sh->aL + sh->kL) * sh->d + g * sh->d;
}

static void cu_attn_fwd(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                        rt_real *ctx) {
    int64_t s = sh->s, d = sh->d, ldc = sh->aL * d;
    for (int64_t bi = 0; bi < sh->b; bi++)
        for (int64_t hi = 0; hi < sh->aL; hi++) {
            const float *q, *k, *v;
            head_ptrs(sh, qkv, bi, hi, &q, &k, &v);
            float *Ph = per_head ? P : P + (bi * sh->aL + hi) * s * s;
            cu_gemm_nt(s, s, d, q, sh->ld, k, sh->ld, 0, Ph, s);
            k_causal_softmax<<<(unsigned)s, TPB>>>(Ph, s, sh->scale);
            cu_gemm_nn(s, d, s, Ph, s, v, sh->ld, 0, ctx + bi * s * ldc + hi * d, ldc);
        }
}

static void cu_attn_bwd(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                        const rt_real *dctx, rt_real *dP, rt_real *dqkv) {
    int64_t s = sh->s, d = sh->d, ldc = sh->aL * d;
    for (int64_t bi = 0; bi < sh->b; bi++)
        for (int64_t hi = 0; hi < sh->aL; hi++) {
            const float *q, *k, *v, *dq, *dk, *dv;
            head_ptrs(sh, qkv, bi, hi, &q, &k, &v);
            head_ptrs(sh, dqkv, bi, hi, &dq, &dk, &dv);
            float *Ph = per_head ? P : P + (bi * sh->aL + hi) * s * s;
            if (per_head) {
                cu_gemm_nt(s, s, d, q, sh->ld, k, sh->ld, 0, Ph, s);
                k_causal_softmax<<<(unsigned)s, TPB>>>(Ph, s, sh->scale);
            }
            const float *dc = dctx + bi * s * ldc + hi * d;
            cu_gemm_nt(s, s, d, dc, ldc, v, sh->ld, 0, dP, s);
            cu_gemm_tn(s, d, s, Ph, s, dc, ldc, 1, (float *)dv, sh->ld);
            k_softmax_bwd<<<(unsigned)s, TPB>>>(dP, Ph, s, sh->scale);
            cu_gemm_nn(s, d, s, dP, s, k, sh->ld, 1, (float *)dq, sh->ld);
            cu_gemm_tn(s, d, s, dP, s, q, sh->ld, 1, (float *)dk, sh->ld);
        }
}

/* ---- activations and elementwise ------------------------------------------------------------------ */

#define GELU_C 0.7978845608028654f

__global__ void k_gelu_fwd(int64_t n, const float *x, float *y) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = 0.5f * v * (1.f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
}
__global__ void k_gelu_bwd(int64_t n, const float *dy, const float *x, float *dx) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], t = tanhf(GELU_C * (v + 0.044715f * v * v * v));
    float dt = (1.f - t * t) * GELU_C * (1.f + 3.f * 0.044715f * v * v);
    dx[i] = dy[i] * (0.5f * (1.f + t) + 0.5f * v * dt);
}
__global__ void k_swiglu_fwd(int64_t rows, int64_t f, const float *u, float *y) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * f) return;
    int64_t r = i / f, j = i % f;
    float g = u[r * 2 * f + j], up = u[r * 2 * f + f + j];
    y[i] = g / (1.f + expf(-g)) * up;
}
__global__ void k_swiglu_bwd(int64_t rows, int64_t f, const float *dy, const float *u, float *du) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * f) return;
    int64_t r = i / f, j = i % f;
    float g = u[r * 2 * f + j], up = u[r * 2 * f + f + j], d = dy[i];
    float sg = 1.f / (1.f + expf(-g));
    du[r * 2 * f + j] = d * up * sg * (1.f + g * (1.f - sg));
    du[r * 2 * f + f + j] = d * g * sg;
}
__global__ void k_add(int64_t n, int64_t h, float *y, const float *a, const float *b,
                      const float *bias) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = a[i] + b[i];
    if (bias) v += bias[i % h];
    y[i] = v;
}
__global__ void k_add_bias(int64_t n, int64_t h, float *x, const float *bias) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += bias[i % h];
}
__global__ void k_colsum(int64_t rows, int64_t h, const float *dy, int64_t ld, float *db) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= h) return;
    float s = 0;
    for (int64_t r = 0; r < rows; r++) s += dy[r * ld + j];
    db[j] += s;
}

static void cu_gelu_fwd(int64_t n, const rt_real *x, rt_real *y) {
    if (n > 0) k_gelu_fwd<<<blocks(n), TPB>>>(n, x, y);
}
static void cu_gelu_bwd(int64_t n, const rt_real *dy, const rt_real *x, rt_real *dx) {
    if (n > 0) k_gelu_bwd<<<blocks(n), TPB>>>(n, dy, x, dx);
}
static void cu_swiglu_fwd(int64_t rows, int64_t f, const rt_real *u, rt_real *y) {
    if (rows * f > 0) k_swiglu_fwd<<<blocks(rows * f), TPB>>>(rows, f, u, y);
}
static void cu_swiglu_bwd(int64_t rows, int64_t f, const rt_real *dy, const rt_real *u,
                          rt_real *du) {
    if (rows * f > 0) k_swiglu_bwd<<<blocks(rows * f), TPB>>>(rows, f, dy, u, du);
}
static void cu_add(int64_t rows, int64_t h, rt_real *y, const rt_real *a, const rt_real *b,
                   const rt_real *bias) {
    if (rows * h > 0) k_add<<<blocks(rows * h), TPB>>>(rows * h, h, y, a, b, bias);
}
static void cu_add_bias(int64_t rows, int64_t h, rt_real *x, const rt_real *bias) {
    if (rows * h > 0) k_add_bias<<<blocks(rows * h), TPB>>>(rows * h, h, x, bias);
}
static void cu_colsum(int64_t rows, int64_t h, const rt_real *dy, int64_t ld, rt_real *db) {
    if (h > 0) k_colsum<<<blocks(h), TPB>>>(rows, h, dy, ld, db);
}

/* ---- embeddings ------------------------------------------------------------------------------- */

__global__ void k_embed_fwd(int64_t rows, int64_t h, const int32_t *tok, const float *wte,
                            int64_t v0, int64_t VL, float *x) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * h) return;
    int64_t r = i / h, j = i % h, t = (int64_t)tok[r] - v0;
    x[i] = t >= 0 && t < VL ? wte[t * h + j] : 0.f;
}
__global__ void k_embed_bwd(int64_t rows, int64_t h, const int32_t *tok, const float *dx,
                            int64_t v0, int64_t VL, float *dwte) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= h) return;
    for (int64_t r = 0; r < rows; r++) { /* rows in order: deterministic */
        int64_t t = (int64_t)tok[r] - v0;
        if (t >= 0 && t < VL) dwte[t * h + j] += dx[r * h + j];
    }
}
__global__ void k_pos_fwd(int64_t rows, int64_t h, float *x, const float *wpe, int64_t row0,
                          int64_t s) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * h) return;
    x[i] += wpe[((row0 + i / h) % s) * h + i % h];
}
__global__ void k_pos_bwd(int64_t rows, int64_t h, const float *dx, float *dwpe, int64_t row0,
                          int64_t s) {
    int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= h) return;
    for (int64_t r = 0; r < rows; r++) dwpe[((row0 + r) % s) * h + j] += dx[r * h + j];
}

static void cu_embed_fwd(int64_t rows, int64_t h, const int32_t *tok, const rt_real *wte,
                         int64_t v0, int64_t VL, rt_real *x) {
    if (rows * h > 0) k_embed_fwd<<<blocks(rows * h), TPB>>>(rows, h, tok, wte, v0, VL, x);
}
static void cu_embed_bwd(int64_t rows, int64_t h, const int32_t *tok, const rt_real *dx,
                         int64_t v0, int64_t VL, rt_real *dwte) {
    if (h > 0) k_embed_bwd<<<blocks(h), TPB>>>(rows, h, tok, dx, v0, VL, dwte);
}
static void cu_pos_fwd(int64_t rows, int64_t h, rt_real *x, const rt_real *wpe, int64_t row0,
                       int64_t s) {
    if (rows * h > 0) k_pos_fwd<<<blocks(rows * h), TPB>>>(rows, h, x, wpe, row0, s);
}
static void cu_pos_bwd(int64_t rows, int64_t h, const rt_real *dx, rt_real *dwpe, int64_t row0,
                       int64_t s) {
    if (h > 0) k_pos_bwd<<<blocks(h), TPB>>>(rows, h, dx, dwpe, row0, s);
}

/* ---- vocab-parallel cross-entropy -------------------------------------------------------------- */

__global__ void k_ce_max(int64_t VL, const float *l, float *mx) {
    const float *row = l + blockIdx.x * VL;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < VL; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, 1);
    if (threadIdx.x == 0) mx[blockIdx.x] = m;
}
__global__ void k_ce_sumexp(int64_t VL, const float *l, const float *mx, float *sum) {
    const float *row = l + blockIdx.x * VL;
    float s = 0;
    for (int64_t j = threadIdx.x; j < VL; j += blockDim.x) s += expf(row[j] - mx[blockIdx.x]);
    s = block_reduce(s, 0);
    if (threadIdx.x == 0) sum[blockIdx.x] = s;
}
__global__ void k_ce_target(int64_t rows, int64_t VL, const float *l, const int32_t *tgt,
                            int64_t v0, float *tl) {
    int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    int64_t t = (int64_t)tgt[r] - v0;
    tl[r] = t >= 0 && t < VL ? l[r * VL + t] : 0.f;
}
__global__ void k_ce_finish(int64_t VL, float *l, const float *mx, const float *sum,
                            const float *tl, float *loss) {
    int64_t r = blockIdx.x;
    for (int64_t j = threadIdx.x; j < VL; j += blockDim.x)
        l[r * VL + j] = expf(l[r * VL + j] - mx[r]) / sum[r];
    if (threadIdx.x == 0) loss[r] = logf(sum[r]) + mx[r] - tl[r];
}
__global__ void k_ce_bwd(int64_t rows, int64_t VL, float *p, const int32_t *tgt, int64_t v0,
                         float scale) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * VL) return;
    int64_t r = i / VL, j = i % VL;
    float v = p[i];
    if (j == (int64_t)tgt[r] - v0) v -= 1.f;
    p[i] = v * scale;
}

static void cu_ce_max(int64_t rows, int64_t VL, const rt_real *l, rt_real *mx) {
    if (rows > 0) k_ce_max<<<(unsigned)rows, TPB>>>(VL, l, mx);
}
static void cu_ce_sumexp(int64_t rows, int64_t VL, const rt_real *l, const rt_real *mx,
                         rt_real *sum) {
    if (rows > 0) k_ce_sumexp<<<(unsigned)rows, TPB>>>(VL, l, mx, sum);
}
static void cu_ce_target(int64_t rows, int64_t VL, const rt_real *l, const int32_t *tgt,
                         int64_t v0, rt_real *tl) {
    if (rows > 0) k_ce_target<<<blocks(rows), TPB>>>(rows, VL, l, tgt, v0, tl);
}
static double cu_ce_finish(int64_t rows, int64_t VL, rt_real *l, const rt_real *mx,
                           const rt_real *sum, const rt_real *tl) {
    if (rows <= 0) return 0;
    float *loss = NULL;
    if (cudaMalloc(&loss, (size_t)rows * sizeof *loss) != cudaSuccess) {
        note("cudaMalloc", "no memory for the loss rows");
        return 0;
    }
    k_ce_finish<<<(unsigned)rows, TPB>>>(VL, l, mx, sum, tl, loss);
    float *host = (float *)malloc((size_t)rows * sizeof *host);
    double total = 0;
    if (host) {
        CU(cudaMemcpy(host, loss, (size_t)rows * sizeof *host, cudaMemcpyDeviceToHost));
        for (int64_t r = 0; r < rows; r++) total += host[r];
        free(host);
    }
    CU(cudaFree(loss));
    return total;
}
static void cu_ce_bwd(int64_t rows, int64_t VL, rt_real *p, const int32_t *tgt, int64_t v0,
                      rt_real scale) {
    if (rows * VL > 0) k_ce_bwd<<<blocks(rows * VL), TPB>>>(rows, VL, p, tgt, v0, scale);
}

/* ---- AdamW (kernels_cpu.c: Loshchilov & Hutter 2019, Algorithm 2) ------------------------------- */

__global__ void k_adamw(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                        float b1, float b2, float eps, float wd, float c1, float c2) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = b1 * m[i] + (1.f - b1) * g[i];
    float vi = b2 * v[i] + (1.f - b2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p[i]);
}
static void cu_adamw(int64_t n, rt_real *p, const rt_real *g, rt_real *m, rt_real *v,
                     const ap_rt_optim *o, int t) {
    if (n <= 0) return;
    k_adamw<<<blocks(n), TPB>>>(n, p, g, m, v, (float)o->lr, (float)o->beta1, (float)o->beta2,
                                (float)o->eps, (float)o->weight_decay,
                                (float)(1.0 - pow(o->beta1, t)), (float)(1.0 - pow(o->beta2, t)));
}

static const char *cu_last_error(void) {
    cudaError_t e = cudaPeekAtLastError();
    if (e != cudaSuccess) note("kernel launch", cudaGetErrorString(e));
    return err_msg[0] ? err_msg : NULL;
}

static rt_kernels table;

extern "C" const rt_kernels *rt_kernels_cuda(int local_rank, ap_err *err) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        ap_err_set(err, AP_ERR_CUDA, "no CUDA device (%s)",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    if (local_rank >= n) {
        /* NCCL refuses two ranks of one communicator on one GPU */
        ap_err_set(err, AP_ERR_CUDA, "%d ranks on this host but %d GPU%s: the CUDA backend runs "
                   "one rank per GPU", local_rank + 1, n, n == 1 ? "" : "s");
        return NULL;
    }
    if ((e = cudaSetDevice(local_rank)) != cudaSuccess) {
        ap_err_set(err, AP_ERR_CUDA, "cudaSetDevice(%d): %s", local_rank, cudaGetErrorString(e));
        return NULL;
    }
    if (!blas && cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        ap_err_set(err, AP_ERR_CUDA, "cublasCreate failed");
        return NULL;
    }
    /* exact fp32 products (no TF32), as the CPU backend computes */
    cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH);
    table.name = "cuda";
    table.host_memory = 0;
    table.alloc = cu_alloc;
    table.release = cu_release;
    table.upload = cu_upload;
    table.download = cu_download;
    table.copy = cu_copy;
    table.zero = cu_zero;
    table.gemm_nt = cu_gemm_nt;
    table.gemm_nn = cu_gemm_nn;
    table.gemm_tn = cu_gemm_tn;
    table.norm_fwd = cu_norm_fwd;
    table.norm_bwd = cu_norm_bwd;
    table.rope = cu_rope;
    table.attn_fwd = cu_attn_fwd;
    table.attn_bwd = cu_attn_bwd;
    table.gelu_fwd = cu_gelu_fwd;
    table.gelu_bwd = cu_gelu_bwd;
    table.swiglu_fwd = cu_swiglu_fwd;
    table.swiglu_bwd = cu_swiglu_bwd;
    table.add = cu_add;
    table.add_bias = cu_add_bias;
    table.colsum = cu_colsum;
    table.embed_fwd = cu_embed_fwd;
    table.embed_bwd = cu_embed_bwd;
    table.pos_fwd = cu_pos_fwd;
    table.pos_bwd = cu_pos_bwd;
    table.ce_max = cu_ce_max;
    table.ce_sumexp = cu_ce_sumexp;
    table.ce_target = cu_ce_target;
    table.ce_finish = cu_ce_finish;
    table.ce_bwd = cu_ce_bwd;
    table.adamw = cu_adamw;
    table.sync = cu_sync;
    table.last_error = cu_last_error;
    return &table;
}
