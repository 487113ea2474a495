/*
 * kernels_cpu.c - the CPU backend's kernels (rt_int.h, rt_kernels): matrix products through a
 * BLAS (OpenBLAS's cblas_sgemm / cblas_dgemm, row-major), everything else in plain C: norms,
 * rotary embedding, causal attention (scores and context through the same GEMMs, softmax in C),
 * GELU and SwiGLU, embedding lookups, the vocab-parallel cross-entropy pieces and AdamW.
 *
 * Every kernel is deterministic: sums run in a fixed order (per row, left to right, in double
 * accumulators), nothing depends on threads or alignment, so a recomputed forward or a
 * differently sharded ZeRO state sees bitwise the same arithmetic. Formulas cite their source
 * at the function. It does not parallelise: one rank is one process (OPENBLAS_NUM_THREADS=1 is
 * set by `autoplan run`).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "rt_int.h"

#ifdef AP_RT_DOUBLE
#define GEMM cblas_dgemm
#else
#define GEMM cblas_sgemm
#endif

/* LayerNorm and RMSNorm epsilon: 1e-5 (GPT-2 layer_norm_epsilon; Llama-2/3 rms_norm_eps). */
#define NORM_EPS 1e-5

/* ---- memory ----------------------------------------------------------------------------------- */

static void *cpu_alloc(int64_t bytes) {
    void *p = NULL;
    /* 64-byte alignment: a cache line, and what AVX-512 loads want */
    if (bytes <= 0 || posix_memalign(&p, 64, (size_t)bytes) != 0) return NULL;
    memset(p, 0, (size_t)bytes);
    return p;
}

static void cpu_release(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, int64_t bytes) {
    if (bytes > 0 && dst != src) memmove(dst, src, (size_t)bytes);
}
static void cpu_zero(void *dst, int64_t bytes) {
    if (bytes > 0) memset(dst, 0, (size_t)bytes);
}
static void cpu_sync(void) {}

/* ---- GEMMs ------------------------------------------------------------------------------------- */

/* C = beta C when there is nothing to multiply (K = 0): BLAS leaves that case to the caller's
 * reading of the standard, so do it here. */
static void scale_c(int64_t M, int64_t N, rt_real beta, rt_real *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
}

static void gemm_nt(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_c(M, N, beta, C, ldc);
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1, A, (int)lda, B,
         (int)ldb, beta, C, (int)ldc);
}

static void gemm_nn(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_c(M, N, beta, C, ldc);
    GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, A, (int)lda, B,
         (int)ldb, beta, C, (int)ldc);
}

static void gemm_tn(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) return scale_c(M, N, beta, C, ldc);
    GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1, A, (int)lda, B,
         (int)ldb, beta, C, (int)ldc);
}

/* ---- norms --------------------------------------------------------------------------------- */

/* LayerNorm (Ba et al. 2016, Eq. 4): y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + eps);
 * RMSNorm (Zhang & Sennrich 2019, Eq. 4): y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps). */
static void norm_fwd(int rms, int64_t rows, int64_t h, const rt_real *x, const rt_real *w,
                     const rt_real *b, rt_real *y, rt_real *stats) {
    for (int64_t r = 0; r < rows; r++) {
        const rt_real *xr = x + r * h;
        rt_real *yr = y + r * h;
        double mean = 0, var = 0;
        if (!rms) {
            for (int64_t j = 0; j < h; j++) mean += xr[j];
            mean /= (double)h;
        }
        for (int64_t j = 0; j < h; j++) {
            double dlt = xr[j] - mean;
            var += dlt * dlt;
        }
        var /= (double)h;
        double rstd = 1.0 / sqrt(var + NORM_EPS);
        for (int64_t j = 0; j < h; j++) {
            double v = ((double)xr[j] - mean) * rstd * w[j];
            if (!rms && b) v += b[j];
            yr[j] = (rt_real)v;
        }
        if (rms) {
            stats[r] = (rt_real)rstd;
        } else {
            stats[2 * r] = (rt_real)mean;
            stats[2 * r + 1] = (rt_real)rstd;
        }
    }
}

/* Backward of the norms with x_hat = (x - mean) * rstd, g = dy * w:
 *   LayerNorm: dx = rstd (g - mean(g) - x_hat mean(g x_hat))
 *   RMSNorm:   dx = rstd (g - x_hat mean(g x_hat))
 *   dw += dy x_hat, db += dy (llm.c layernorm_backward; the RMS form drops the mean terms). */
static void norm_bwd(int rms, int64_t rows, int64_t h, const rt_real *dy, const rt_real *x,
                     const rt_real *w, const rt_real *stats, rt_real *dx, rt_real *dw,
                     rt_real *db) {
    for (int64_t r = 0; r < rows; r++) {
        const rt_real *xr = x + r * h, *dyr = dy + r * h;
        rt_real *dxr = dx + r * h;
        double mean = rms ? 0 : stats[2 * r];
        double rstd = rms ? stats[r] : stats[2 * r + 1];
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < h; j++) {
            double xh = ((double)xr[j] - mean) * rstd;
            double g = (double)dyr[j] * w[j];
            mg += g;
            mgx += g * xh;
        }
        mg /= (double)h;
        mgx /= (double)h;
        for (int64_t j = 0; j < h; j++) {
            double xh = ((double)xr[j] - mean) * rstd;
            double g = (double)dyr[j] * w[j];
            double v = g - xh * mgx - (rms ? 0 : mg);
            dxr[j] = (rt_real)(rstd * v);
            dw[j] += (rt_real)(dyr[j] * xh);
            if (!rms && db) db[j] += dyr[j];
        }
    }
}

/* ---- rotary embedding ------------------------------------------------------------------------ */

/* RoFormer (Su et al. 2021, Eq. 34) with base 10000: dimension pair (i, i + d/2) of position
 * `pos` rotates by pos * 10000^(-2i/d) (GPT-NeoX / Llama "rotate_half"). */
#define ROPE_BASE 10000.0

static void rope(rt_real *x, int64_t rows, int64_t ld, int64_t heads, int64_t d, int64_t s,
                 int inverse) {
    int64_t half = d / 2;
    for (int64_t r = 0; r < rows; r++) {
        double pos = (double)(r % s);
        for (int64_t i = 0; i < half; i++) {
            double theta = pos * pow(ROPE_BASE, -2.0 * (double)i / (double)d);
            double cs = cos(theta), sn = inverse ? -sin(theta) : sin(theta);
            for (int64_t hd = 0; hd < heads; hd++) {
                rt_real *v = x + r * ld + hd * d;
                double x1 = v[i], x2 = v[i + half];
                v[i] = (rt_real)(x1 * cs - x2 * sn);
                v[i + half] = (rt_real)(x2 * cs + x1 * sn);
            }
        }
    }
}

/* ---- attention ------------------------------------------------------------------------------- */

/* Softmax of each row i over columns 0..i of scale * P (causal mask: later columns 0). */
static void causal_softmax(rt_real *P, int64_t s, rt_real scale) {
    for (int64_t i = 0; i < s; i++) {
        rt_real *row = P + i * s;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= i; j++)
            if ((double)scale * row[j] > mx) mx = (double)scale * row[j];
        for (int64_t j = 0; j <= i; j++) {
            double e = exp((double)scale * row[j] - mx);
            row[j] = (rt_real)e;
            sum += e;
        }
        for (int64_t j = 0; j <= i; j++) row[j] = (rt_real)(row[j] / sum);
        for (int64_t j = i + 1; j < s; j++) row[j] = 0;
    }
}

/* d(scores) from d(probabilities): dS = P (dP - sum_j dP P), times the score scale. */
static void softmax_bwd(rt_real *dP, const rt_real *P, int64_t s, rt_real scale) {
    for (int64_t i = 0; i < s; i++) {
        rt_real *d = dP + i * s;
        const rt_real *p = P + i * s;
        double dot = 0;
        for (int64_t j = 0; j <= i; j++) dot += (double)d[j] * p[j];
        for (int64_t j = 0; j <= i; j++) d[j] = (rt_real)((double)scale * p[j] * (d[j] - dot));
        for (int64_t j = i + 1; j < s; j++) d[j] = 0;
    }
}

/* Pointers of head hi of sample bi: q, its kv group's k and v (GQA: aL/kL query heads share a
 * kv head, Ainslie et al. 2023). */
static void head_ptrs(const rt_attn_shape *sh, const rt_real *qkv, int64_t bi, int64_t hi,
                      const rt_real **q, const rt_real **k, const rt_real **v) {
    int64_t grp = sh->aL / sh->kL, g = hi / grp;
    const rt_real *base = qkv + bi * sh->s * sh->ld;
    *q = base + hi * sh->d;
    *k = base + sh->aL * sh->d + g * sh->d;
    *v = base + (sh->aL + sh->kL) * sh->d + g * sh->d;
}

/* scores = q k^T (scaled inside the softmax), P = causal softmax, ctx = P v (Vaswani et al.
 * 2017, Eq. 1) */
static void attn_fwd(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                     rt_real *ctx) {
    int64_t s = sh->s, d = sh->d, ldc = sh->aL * d;
    for (int64_t bi = 0; bi < sh->b; bi++)
        for (int64_t hi = 0; hi < sh->aL; hi++) {
            const rt_real *q, *k, *v;
            head_ptrs(sh, qkv, bi, hi, &q, &k, &v);
            rt_real *Ph = per_head ? P : P + (bi * sh->aL + hi) * s * s;
            gemm_nt(s, s, d, q, sh->ld, k, sh->ld, 0, Ph, s);
            causal_softmax(Ph, s, sh->scale);
            gemm_nn(s, d, s, Ph, s, v, sh->ld, 0, ctx + bi * s * ldc + hi * d, ldc);
        }
}

/* dP = dctx v^T, dv += P^T dctx, dS = softmax backward, dq = dS k, dk += dS^T q. */
static void attn_bwd(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                     const rt_real *dctx, rt_real *dP, rt_real *dqkv) {
    int64_t s = sh->s, d = sh->d, ldc = sh->aL * d;
    for (int64_t bi = 0; bi < sh->b; bi++)
        for (int64_t hi = 0; hi < sh->aL; hi++) {
            const rt_real *q, *k, *v;
            head_ptrs(sh, qkv, bi, hi, &q, &k, &v);
            rt_real *dq, *dk, *dv;
            {
                const rt_real *cq, *ck, *cv;
                head_ptrs(sh, dqkv, bi, hi, &cq, &ck, &cv);
                dq = (rt_real *)cq;
                dk = (rt_real *)ck;
                dv = (rt_real *)cv;
            }
            rt_real *Ph = per_head ? P : P + (bi * sh->aL + hi) * s * s;
            if (per_head) { /* selective recomputation: rebuild this head's probabilities */
                gemm_nt(s, s, d, q, sh->ld, k, sh->ld, 0, Ph, s);
                causal_softmax(Ph, s, sh->scale);
            }
            const rt_real *dc = dctx + bi * s * ldc + hi * d;
            gemm_nt(s, s, d, dc, ldc, v, sh->ld, 0, dP, s);
            gemm_tn(s, d, s, Ph, s, dc, ldc, 1, dv, sh->ld);
            softmax_bwd(dP, Ph, s, sh->scale);
            gemm_nn(s, d, s, dP, s, k, sh->ld, 1, dq, sh->ld);
            gemm_tn(s, d, s, dP, s, q, sh->ld, 1, dk, sh->ld);
        }
}

/* ---- activations ------------------------------------------------------------------------------ */

/* GELU, tanh approximation (Hendrycks & Gimpel 2016, Sec. 2; GPT-2's gelu):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */

static void gelu_fwd(int64_t n, const rt_real *x, rt_real *y) {
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (rt_real)(0.5 * v * (1.0 + tanh(GELU_C * (v + 0.044715 * v * v * v))));
    }
}

static void gelu_bwd(int64_t n, const rt_real *dy, const rt_real *x, rt_real *dx) {
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        double t = tanh(GELU_C * (v + 0.044715 * v * v * v));
        double dt = (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * v * v);
        dx[i] = (rt_real)(dy[i] * (0.5 * (1.0 + t) + 0.5 * v * dt));
    }
}

/* SwiGLU (Shazeer 2020, Eq. 6): silu(x W) * (x V), silu(z) = z sigmoid(z). */
static void swiglu_fwd(int64_t rows, int64_t f, const rt_real *u, rt_real *y) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < f; j++) {
            double g = u[r * 2 * f + j], up = u[r * 2 * f + f + j];
            double sg = 1.0 / (1.0 + exp(-g));
            y[r * f + j] = (rt_real)(g * sg * up);
        }
}

static void swiglu_bwd(int64_t rows, int64_t f, const rt_real *dy, const rt_real *u,
                       rt_real *du) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < f; j++) {
            double g = u[r * 2 * f + j], up = u[r * 2 * f + f + j], d = dy[r * f + j];
            double sg = 1.0 / (1.0 + exp(-g));
            du[r * 2 * f + j] = (rt_real)(d * up * sg * (1.0 + g * (1.0 - sg)));
            du[r * 2 * f + f + j] = (rt_real)(d * g * sg);
        }
}

/* ---- elementwise ------------------------------------------------------------------------------- */

static void add(int64_t rows, int64_t h, rt_real *y, const rt_real *a, const rt_real *b,
                const rt_real *bias) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < h; j++) {
            rt_real v = a[r * h + j] + b[r * h + j];
            if (bias) v += bias[j];
            y[r * h + j] = v;
        }
}

static void add_bias(int64_t rows, int64_t h, rt_real *x, const rt_real *bias) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < h; j++) x[r * h + j] += bias[j];
}

static void colsum(int64_t rows, int64_t h, const rt_real *dy, int64_t ld, rt_real *db) {
    for (int64_t j = 0; j < h; j++) {
        double sum = 0;
        for (int64_t r = 0; r < rows; r++) sum += dy[r * ld + j];
        db[j] += (rt_real)sum;
    }
}

/* ---- embeddings --------------------------------------------------------------------------------- */

static void embed_fwd(int64_t rows, int64_t h, const int32_t *tok, const rt_real *wte, int64_t v0,
                      int64_t VL, rt_real *x) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = (int64_t)tok[r] - v0;
        if (t >= 0 && t < VL) memcpy(x + r * h, wte + t * h, (size_t)h * sizeof *x);
        else memset(x + r * h, 0, (size_t)h * sizeof *x);
    }
}

static void embed_bwd(int64_t rows, int64_t h, const int32_t *tok, const rt_real *dx, int64_t v0,
                      int64_t VL, rt_real *dwte) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = (int64_t)tok[r] - v0;
        if (t < 0 || t >= VL) continue;
        for (int64_t j = 0; j < h; j++) dwte[t * h + j] += dx[r * h + j];
    }
}

static void pos_fwd(int64_t rows, int64_t h, rt_real *x, const rt_real *wpe, int64_t row0,
                    int64_t s) {
    for (int64_t r = 0; r < rows; r++) {
        const rt_real *pr = wpe + ((row0 + r) % s) * h;
        for (int64_t j = 0; j < h; j++) x[r * h + j] += pr[j];
    }
}

static void pos_bwd(int64_t rows, int64_t h, const rt_real *dx, rt_real *dwpe, int64_t row0,
                    int64_t s) {
    for (int64_t r = 0; r < rows; r++) {
        rt_real *pr = dwpe + ((row0 + r) % s) * h;
        for (int64_t j = 0; j < h; j++) pr[j] += dx[r * h + j];
    }
}

/* ---- vocab-parallel cross-entropy (Megatron-LM core tensor_parallel/cross_entropy.py) ---------- */

static void ce_max(int64_t rows, int64_t VL, const rt_real *logits, rt_real *mx) {
    for (int64_t r = 0; r < rows; r++) {
        rt_real m = -INFINITY;
        for (int64_t j = 0; j < VL; j++)
            if (logits[r * VL + j] > m) m = logits[r * VL + j];
        mx[r] = m;
    }
}

static void ce_sumexp(int64_t rows, int64_t VL, const rt_real *logits, const rt_real *mx,
                      rt_real *sum) {
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < VL; j++) s += exp((double)logits[r * VL + j] - mx[r]);
        sum[r] = (rt_real)s;
    }
}

static void ce_target(int64_t rows, int64_t VL, const rt_real *logits, const int32_t *tgt,
                      int64_t v0, rt_real *tl) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = (int64_t)tgt[r] - v0;
        tl[r] = (t >= 0 && t < VL) ? logits[r * VL + t] : 0;
    }
}

static double ce_finish(int64_t rows, int64_t VL, rt_real *logits, const rt_real *mx,
                        const rt_real *sum, const rt_real *tl) {
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < VL; j++)
            logits[r * VL + j] = (rt_real)(exp((double)logits[r * VL + j] - mx[r]) / sum[r]);
        total += log((double)sum[r]) + mx[r] - tl[r];
    }
    return total;
}

static void ce_bwd(int64_t rows, int64_t VL, rt_real *probs, const int32_t *tgt, int64_t v0,
                   rt_real scale) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = (int64_t)tgt[r] - v0;
        for (int64_t j = 0; j < VL; j++) {
            double v = probs[r * VL + j];
            if (j == t) v -= 1.0;
            probs[r * VL + j] = (rt_real)(v * scale);
        }
    }
}

/* ---- AdamW -------------------------------------------------------------------------------------- */

/* Loshchilov & Hutter 2019, Algorithm 2 (decoupled weight decay), with Adam's bias correction
 * (Kingma & Ba 2015, Algorithm 1): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p). Element by element, so any split of
 * the elements (ZeRO shards, offloaded part) computes bitwise the same values. */
void rt_adamw_host(int64_t n, rt_real *p, const rt_real *g, rt_real *m, rt_real *v,
                   const ap_rt_optim *o, int t) {
    double c1 = 1.0 - pow(o->beta1, t), c2 = 1.0 - pow(o->beta2, t);
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i];
        double mi = o->beta1 * m[i] + (1.0 - o->beta1) * gi;
        double vi = o->beta2 * v[i] + (1.0 - o->beta2) * gi * gi;
        m[i] = (rt_real)mi;
        v[i] = (rt_real)vi;
        double upd = ((double)m[i] / c1) / (sqrt((double)v[i] / c2) + o->eps) +
                     o->weight_decay * p[i];
        p[i] = (rt_real)(p[i] - o->lr * upd);
    }
}

static const rt_kernels cpu = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .gemm_nt = gemm_nt,
    .gemm_nn = gemm_nn,
    .gemm_tn = gemm_tn,
    .norm_fwd = norm_fwd,
    .norm_bwd = norm_bwd,
    .rope = rope,
    .attn_fwd = attn_fwd,
    .attn_bwd = attn_bwd,
    .gelu_fwd = gelu_fwd,
    .gelu_bwd = gelu_bwd,
    .swiglu_fwd = swiglu_fwd,
    .swiglu_bwd = swiglu_bwd,
    .add = add,
    .add_bias = add_bias,
    .colsum = colsum,
    .embed_fwd = embed_fwd,
    .embed_bwd = embed_bwd,
    .pos_fwd = pos_fwd,
    .pos_bwd = pos_bwd,
    .ce_max = ce_max,
    .ce_sumexp = ce_sumexp,
    .ce_target = ce_target,
    .ce_finish = ce_finish,
    .ce_bwd = ce_bwd,
    .adamw = rt_adamw_host,
    .sync = cpu_sync,
    .last_error = NULL,
};

const rt_kernels *rt_kernels_cpu(void) { return &cpu; }
