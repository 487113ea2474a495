/*
 * kernels.cu - the small CUDA kernels `autoplan profile bench` times (profiler/gpubench.c):
 * the memory-bound operations of a transformer step (elementwise add, a sum reduction, RMSNorm,
 * row softmax, cross-entropy, rotary embedding, SwiGLU), fused Adam, an empty kernel for the
 * launch latency, and fills for GEMM inputs. Each is the plain one-pass form of what the
 * frameworks run (one read of each input, one write of each output), so bytes / time is the
 * bandwidth such an operation reaches; the cost model prices these operations by bytes moved.
 *
 * Byte counts per call (what the bench records as the row's bytes, docs/profiler.md):
 *   elementwise  c = a + b, n bf16:           3 x 2n
 *   reduction    sum of n fp32 to one:         4n
 *   norm         RMSNorm of rows x h bf16:     2 x 2n (+ 2h weights, ignored)
 *   softmax      row softmax, rows x w bf16:   2 x 2n
 *   cross_entropy  logits rows x V bf16 -> fp32 loss per row: 2n (+ 4 rows)
 *   rope         rotate pairs, n bf16:         2 x 2n (+ cos/sin tables, cached)
 *   activation   SwiGLU y = silu(g) * u, n bf16 out: 3 x 2n
 *   adam         fp32 p, g, m, v: read 16 B, write 12 B per parameter: 28n
 *
 * What it does not do: time anything (gpubench.c does, with events) or pick sizes.
 * Built by nvcc through profiler/CMakeLists.txt; C callers see only the extern "C" launchers
 * declared in profiler/kernels.h.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels.h"

#define THREADS 256

static unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : b); /* grid-stride loops cover the rest */
}

__global__ void k_empty(void) {}

/* Block-wide max and sum of one value per thread (THREADS threads, shared scratch s); every
 * thread gets the result. */
__device__ float block_max(float v, float *s) {
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k) s[threadIdx.x] = fmaxf(s[threadIdx.x], s[threadIdx.x + k]);
        __syncthreads();
    }
    float r = s[0];
    __syncthreads();
    return r;
}

__device__ float block_sum(float v, float *s) {
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k /= 2) {
        if ((int)threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    float r = s[0];
    __syncthreads();
    return r;
}

__global__ void k_add(const __nv_bfloat16 *a, const __nv_bfloat16 *b, __nv_bfloat16 *c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

/* Block sums with shared memory, then one atomic add per block. */
__global__ void k_sum(const float *x, float *out, size_t n) {
    __shared__ float s[THREADS];
    float acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += x[i];
    acc = block_sum(acc, s);
    if (threadIdx.x == 0) atomicAdd(out, acc);
}

/* One block per row: RMSNorm y = x / sqrt(mean(x^2) + eps) * w (Zhang & Sennrich 2019). */
__global__ void k_rmsnorm(const __nv_bfloat16 *x, const __nv_bfloat16 *w, __nv_bfloat16 *y, int h) {
    __shared__ float s[THREADS];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * h;
    __nv_bfloat16 *out = y + (size_t)blockIdx.x * h;
    float acc = 0;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float v = __bfloat162float(row[i]);
        acc += v * v;
    }
    float inv = rsqrtf(block_sum(acc, s) / h + 1e-6f);
    for (int i = threadIdx.x; i < h; i += blockDim.x)
        out[i] = __float2bfloat16(__bfloat162float(row[i]) * inv * __bfloat162float(w[i]));
}

/* One block per row: max, sum of exp, normalise (the row stays in cache between passes). */
__global__ void k_softmax(const __nv_bfloat16 *x, __nv_bfloat16 *y, int wdt) {
    __shared__ float s[THREADS];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * wdt;
    __nv_bfloat16 *out = y + (size_t)blockIdx.x * wdt;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < wdt; i += blockDim.x) m = fmaxf(m, __bfloat162float(row[i]));
    m = block_max(m, s);
    float acc = 0;
    for (int i = threadIdx.x; i < wdt; i += blockDim.x) acc += __expf(__bfloat162float(row[i]) - m);
    float inv = 1.0f / block_sum(acc, s);
    for (int i = threadIdx.x; i < wdt; i += blockDim.x)
        out[i] = __float2bfloat16(__expf(__bfloat162float(row[i]) - m) * inv);
}

/* One block per row: loss = logsumexp(logits) - logits[target]. */
__global__ void k_xent(const __nv_bfloat16 *x, const int32_t *target, float *loss, int v) {
    __shared__ float s[THREADS];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * v;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < v; i += blockDim.x) m = fmaxf(m, __bfloat162float(row[i]));
    m = block_max(m, s);
    float acc = 0;
    for (int i = threadIdx.x; i < v; i += blockDim.x) acc += __expf(__bfloat162float(row[i]) - m);
    float sum = block_sum(acc, s);
    if (threadIdx.x == 0) {
        int t = target[blockIdx.x] % v;
        loss[blockIdx.x] = logf(sum) + m - __bfloat162float(row[t < 0 ? 0 : t]);
    }
}

/* Rotary embedding (Su et al. 2021): rotate each pair (x0, x1) of a head by the angle of its
 * position and frequency; d = head dim. */
__global__ void k_rope(const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n, int d) {
    for (size_t i = 2 * (blockIdx.x * (size_t)blockDim.x + threadIdx.x); i + 1 < n;
         i += 2 * (size_t)gridDim.x * blockDim.x) {
        int j = (int)(i % d) / 2;
        float pos = (float)(i / d);
        float ang = pos * __powf(10000.0f, -2.0f * j / d);
        float c = __cosf(ang), sn = __sinf(ang);
        float a = __bfloat162float(x[i]), b = __bfloat162float(x[i + 1]);
        y[i] = __float2bfloat16(a * c - b * sn);
        y[i + 1] = __float2bfloat16(a * sn + b * c);
    }
}

/* SwiGLU (Shazeer 2020): y = silu(g) * u. */
__global__ void k_swiglu(const __nv_bfloat16 *g, const __nv_bfloat16 *u, __nv_bfloat16 *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = __bfloat162float(g[i]);
        y[i] = __float2bfloat16(a / (1.0f + __expf(-a)) * __bfloat162float(u[i]));
    }
}

/* Fused AdamW in one pass (as torch.optim.AdamW(fused=True) and Apex FusedAdam do), fp32. */
__global__ void k_adam(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                       float b2, float eps, float wd, float bc1, float bc2s) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * (1.0f - lr * wd) - lr / bc1 * mi / (sqrtf(vi) / bc2s + eps);
    }
}

/* Inputs: a hash of the index to [-1, 1) (no zeros: tensor cores draw less power on zeros and
 * would clock higher than on real data). */
__device__ float hashed(size_t i, uint32_t seed) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed * 2246822519u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return (float)(h & 0xffffff) / 8388608.0f - 1.0f;
}

__global__ void k_fill(void *buf, size_t n, int kind, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = hashed(i, seed);
        switch (kind) {
        case AP_FILL_F32: ((float *)buf)[i] = x; break;
        case AP_FILL_F16: ((__half *)buf)[i] = __float2half(x); break;
        case AP_FILL_BF16: ((__nv_bfloat16 *)buf)[i] = __float2bfloat16(x); break;
        case AP_FILL_FP8: ((__nv_fp8_e4m3 *)buf)[i] = __nv_fp8_e4m3(x); break;
        default: ((int32_t *)buf)[i] = (int32_t)((x + 1.0f) * 1e6f); break;
        }
    }
}

extern "C" {

int ap_cu_empty(cudaStream_t s) {
    k_empty<<<1, 1, 0, s>>>();
    return (int)cudaGetLastError();
}

int ap_cu_fill(void *buf, size_t n, int kind, uint32_t seed, cudaStream_t s) {
    k_fill<<<blocks_for(n), THREADS, 0, s>>>(buf, n, kind, seed);
    return (int)cudaGetLastError();
}

int ap_cu_membound(int kind, void *const *bufs, size_t n, int width, cudaStream_t s) {
    typedef __nv_bfloat16 bf;
    switch (kind) {
    case AP_MB_ELEMENTWISE:
        k_add<<<blocks_for(n), THREADS, 0, s>>>((const bf *)bufs[0], (const bf *)bufs[1], (bf *)bufs[2], n);
        break;
    case AP_MB_REDUCTION:
        k_sum<<<blocks_for(n), THREADS, 0, s>>>((const float *)bufs[0], (float *)bufs[1], n);
        break;
    case AP_MB_NORM:
        k_rmsnorm<<<(unsigned)(n / width), THREADS, 0, s>>>((const bf *)bufs[0], (const bf *)bufs[1],
                                                            (bf *)bufs[2], width);
        break;
    case AP_MB_SOFTMAX:
        k_softmax<<<(unsigned)(n / width), THREADS, 0, s>>>((const bf *)bufs[0], (bf *)bufs[2], width);
        break;
    case AP_MB_XENT:
        k_xent<<<(unsigned)(n / width), THREADS, 0, s>>>((const bf *)bufs[0], (const int32_t *)bufs[1],
                                                         (float *)bufs[2], width);
        break;
    case AP_MB_ROPE:
        k_rope<<<blocks_for(n / 2), THREADS, 0, s>>>((const bf *)bufs[0], (bf *)bufs[2], n, width);
        break;
    case AP_MB_ACTIVATION:
        k_swiglu<<<blocks_for(n), THREADS, 0, s>>>((const bf *)bufs[0], (const bf *)bufs[1], (bf *)bufs[2], n);
        break;
    default:
        return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

int ap_cu_adam(float *p, const float *g, float *m, float *v, size_t n, int64_t step, cudaStream_t s) {
    const double lr = 1e-4, b1 = 0.9, b2 = 0.999;
    float bc1 = (float)(1.0 - pow(b1, (double)step)), bc2s = (float)sqrt(1.0 - pow(b2, (double)step));
    k_adam<<<blocks_for(n), THREADS, 0, s>>>(p, g, m, v, n, (float)lr, (float)b1, (float)b2, 1e-8f,
                                             0.01f, bc1, bc2s);
    return (int)cudaGetLastError();
}

} /* extern "C" */
