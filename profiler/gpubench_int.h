/*
 * gpubench_int.h - shared by the GPU benchmark files of profiler/ (CUDA builds only):
 * gpubench.c (the driver, device identity, event timing, copies, launch, memory-bound kernels,
 * fused Adam, the CUDA context's memory), gpubench_gemm.c (the only cuBLASLt user),
 * gpubench_attn.c (the only cuDNN user), gpubench_nccl.c (the only NCCL user).
 */
#ifndef AP_GPUBENCH_INT_H
#define AP_GPUBENCH_INT_H

#include <cuda_runtime.h>

#include "autoplan/profiler.h"

typedef struct ap_gb {
    const ap_gpubench_opts *o;
    const ap_profile_row *tmpl;  /* the device's identity */
    ap_profile *out;             /* rows go here */
    int device;
    int sm_major, sm_minor;
    cudaStream_t stream;
    cudaEvent_t e0, e1;
} ap_gb;

/* enqueue one call of the operation on g->stream; returns a cudaError_t (0 = success) or,
 * for library calls, any nonzero code with the message already in err */
typedef int (*ap_gb_enqueue)(void *arg, ap_err *err);

/* Time an operation on the device with CUDA events: one untimed call, a calibration call, then
 * warm-up and >= 20 samples (ap_bench_repeat); each sample runs enough calls back to back to
 * last >= 1 ms (event resolution is ~0.5 us) and reports the time of one. */
ap_status ap_gb_time(ap_gb *g, ap_gb_enqueue fn, void *arg, ap_bench_stats *st, ap_err *err);

/* AP_ERR_CUDA "<doing>: <cudaGetErrorString>" for a failed runtime call (rc != 0). */
ap_status ap_gb_cuda(int rc, const char *doing, ap_err *err);

/* One progress line (printf-style) through o->progress. */
void ap_gb_note(ap_gb *g, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Append a row of this device (ap_bench_row with the identity template). */
ap_status ap_gb_row(ap_gb *g, const char *op, const char *shape, const char *dtype,
                    const ap_bench_stats *st, double bytes, const char *source, ap_err *err);

/* Free device memory in bytes (cudaMemGetInfo), 0 on failure. */
double ap_gb_free_bytes(void);

/* Is `what` (a benchmark group) selected by o->what? */
int ap_gb_wants(const ap_gb *g, const char *what);

/* gpubench_gemm.c: cuBLASLt GEMMs over o->gemm_shapes (or the generic grid) for each dtype,
 * and the memory the cuBLASLt handle and its workspace take (device_mem cublas_workspace). */
ap_status ap_gb_gemm(ap_gb *g, ap_err *err);
/* The cuBLASLt version as text ("13.1.0"). */
void ap_gb_cublas_version(char *buf, size_t n);

/* gpubench_attn.c: cuDNN fused attention (scaled dot-product) forward and backward. */
ap_status ap_gb_attn(ap_gb *g, ap_err *err);

/* gpubench_nccl.c: NCCL collectives across every visible GPU (one process, ncclCommInitAll);
 * with one GPU a note that collectives come from the published tables; and the memory a
 * communicator takes (device_mem nccl_buffers). */
ap_status ap_gb_nccl(ap_gb *g, ap_err *err);
/* The NCCL version as text ("2.28.9"). */
void ap_gb_nccl_version(char *buf, size_t n);

#endif
