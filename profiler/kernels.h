/*
 * kernels.h - the launchers of profiler/kernels.cu, callable from C (CUDA builds only; used by
 * profiler/gpubench.c). Each enqueues one kernel on stream s and returns the cudaError_t of the
 * launch as an int (0 = cudaSuccess). Buffers are device pointers the caller owns.
 */
#ifndef AP_PROFILER_KERNELS_H
#define AP_PROFILER_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { AP_FILL_F32 = 0, AP_FILL_F16, AP_FILL_BF16, AP_FILL_FP8, AP_FILL_I32 };

/* Memory-bound operations; bufs[0..2] as each uses them (kernels.cu lists the byte counts):
 *   ELEMENTWISE  bufs a, b -> c (bf16, n)
 *   REDUCTION    bufs x (fp32, n) -> bufs[1] one fp32
 *   NORM         x (bf16 rows x width), w (bf16 width) -> y
 *   SOFTMAX      x (bf16 rows x width) -> bufs[2]
 *   XENT         logits (bf16 rows x width), targets (int32 rows) -> loss (fp32 rows)
 *   ROPE         x (bf16, n, head dim = width) -> bufs[2]
 *   ACTIVATION   gate, up (bf16, n) -> y */
enum { AP_MB_ELEMENTWISE = 0, AP_MB_REDUCTION, AP_MB_NORM, AP_MB_SOFTMAX, AP_MB_XENT, AP_MB_ROPE,
       AP_MB_ACTIVATION, AP_MB_COUNT };

int ap_cu_empty(cudaStream_t s);
int ap_cu_fill(void *buf, size_t n, int kind, uint32_t seed, cudaStream_t s);
int ap_cu_membound(int kind, void *const *bufs, size_t n, int width, cudaStream_t s);
/* One fused AdamW step (lr 1e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01) over n fp32. */
int ap_cu_adam(float *p, const float *g, float *m, float *v, size_t n, int64_t step, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
