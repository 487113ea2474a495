/*
 * kernels.h - how fast the operations the cost model prices run on one GPU type: GEMMs by size
 * and dtype, attention by implementation, sequence length, head dimension and causality,
 * collectives by algorithm and level (with NCCL's own latency model), memory-bound kernels,
 * PCIe copies, host Adam and kernel launches (costmodel/kernels.c).
 *
 * An ap_kernels is a lookup table built once per (GPU, profile): the built-in published rows
 * of the GPU (costmodel/profile_published.c, each citing a paper figure or benchmark page),
 * overlaid with a measured profile (profile.h) when one is given: a measured row claims its
 * whole series (one dtype's GEMM curve, one attention implementation x mask x head dim x
 * direction, one collective level), so measured and published points are never mixed. Every figure
 * remembers where it came from, so `autoplan profile show GPU` can print the table in use.
 * Lookups interpolate in log space over size (clamped at the ends of the measured range, never
 * extrapolated past them) and take the nearest implementation or head dimension a GPU has.
 *
 * Cost: ap_kernels_build parses rows (microseconds per row); the lookups are a few dozen
 * floating-point operations and never allocate, so the search can call them millions of times.
 * The published tables of catalog GPUs are built once per process (ap_kernels_published,
 * thread-safe). An ap_kernels is a plain value (no pointers): copy it freely.
 */
#ifndef AP_KERNELS_H
#define AP_KERNELS_H

#include "autoplan/plan.h"
#include "autoplan/profile.h"

#define AP_KSERIES_MAX 32   /* points of one series */
#define AP_KSOURCE_MAX 192  /* citation kept per series (truncated) */

/* One curve: y over x = log2(size), ascending x. */
typedef struct ap_kseries {
    int n;
    double x[AP_KSERIES_MAX];
    double y[AP_KSERIES_MAX];
    int measured;                /* 1: from a measured profile row */
    char source[AP_KSOURCE_MAX]; /* citation of the rows (the first row's, truncated) */
} ap_kseries;

/* Head-dimension classes of the attention tables (64, 128, 256). */
#define AP_KATTN_DCLASSES 3

/* Collective levels: the fabric a group's bottleneck link crosses. */
typedef enum {
    AP_LEVEL_NVLINK = 0, /* NVLink / NVSwitch (xGMI on AMD) inside a domain */
    AP_LEVEL_PCIE,       /* peer-to-peer over PCIe */
    AP_LEVEL_NET,        /* InfiniBand or RoCE between nodes */
    AP_LEVEL_COUNT
} ap_level;

typedef enum {
    AP_COLL_ALLREDUCE_OP = 0,
    AP_COLL_ALLGATHER_OP,
    AP_COLL_REDUCESCATTER_OP,
    AP_COLL_ALLTOALL_OP,
    AP_COLL_SENDRECV_OP
} ap_coll_op;

typedef struct ap_kernels {
    char gpu[32];                /* catalog name */
    double peak_flops[AP_DTYPE_COUNT];
    double hbm_bytes_per_s;
    int sm_count;
    int compcap_class;           /* 0 Volta/other, 1 Ampere/Ada, 2 Hopper, 3 Blackwell (NCCL) */
    /* GEMM: per dtype, efficiency (fraction of the dtype's dense peak) divided by the wave
     * quantisation of its own shape, over x = log2(2mnk). One point = the large-GEMM ceiling. */
    ap_kseries gemm[AP_DTYPE_COUNT];
    /* attention, per implementation, causal, head-dimension class and direction (0 forward,
     * 1 backward): fraction of the 16-bit dense peak under the FlashAttention papers' FLOP
     * count (causal halves the pairs), over x = log2(sequence length) */
    ap_kseries attn[AP_ATTN_COUNT][2][AP_KATTN_DCLASSES][2];
    /* collectives: large-message bus bandwidth as a fraction of the level's nominal per-GPU
     * bandwidth (NVLink: the peer link; PCIe: the host link; network: the NICs) */
    double coll_eff[AP_LEVEL_COUNT];
    char coll_source[AP_LEVEL_COUNT][AP_KSOURCE_MAX];
    int coll_measured[AP_LEVEL_COUNT];
    double nvls_busbw;           /* NVLink SHARP all-reduce bus bandwidth (0: none) */
    /* memory-bound kernels: achieved fraction of HBM bandwidth (0: use the calibration) */
    double membound_eff;
    char membound_source[AP_KSOURCE_MAX];
    /* host <-> device copies over PCIe: achieved fraction of the nominal link */
    double pcie_eff;
    char pcie_source[AP_KSOURCE_MAX];
    /* CPU Adam: host-DRAM bytes per second one node sustains (0: derive from DRAM peak) */
    double host_adam_bytes_per_s;
    char host_adam_source[AP_KSOURCE_MAX];
    /* host time to launch one kernel from an eager framework (PyTorch dispatch + launch) */
    double launch_s;
    char launch_source[AP_KSOURCE_MAX];
    int measured_rows;           /* overlay rows used */
} ap_kernels;

/* ---- building ------------------------------------------------------------------------- */

/* The published rows built into autoplan for catalog GPU `gpu` (none for GPUs without
 * published figures), appended to *out (rows carry source_run "published"). AP_ERR_NOMEM. */
ap_status ap_profile_published(const char *gpu, ap_profile *out, ap_err *err);

/* Build the lookup tables of `gpu` from its published rows, overlaid by the rows of `measured`
 * whose gpu matches (NULL: published only). Figures no row gives fall back to documented
 * rules (costmodel/kernels.c: the A100 efficiency of the same implementation for GPUs without
 * published figures, NCCL's nominal link efficiencies...). AP_ERR_INPUT when a measured row
 * is invalid (ap_profile_row_check's message). */
ap_status ap_kernels_build(const ap_gpu *gpu, const ap_profile *measured, ap_kernels *out,
                           ap_err *err);

/* The published-only tables of a catalog GPU, built on first use (thread-safe) and kept for
 * the process. NULL for a GPU that is not in the catalog (build your own with
 * ap_kernels_build). */
const ap_kernels *ap_kernels_published(const ap_gpu *gpu);

/* ---- lookups ---------------------------------------------------------------------------- */

/* Wave quantisation of an M x N output in 128 x 128 tiles over the SMs (NVIDIA, "Matrix
 * Multiplication Background User's Guide": tile and wave quantisation): useful tiles / tiles
 * the waves could hold, in (0, 1]. */
double ap_kernels_wave(int sms, double M, double N);

/* The share of the published large-GEMM ceiling that autoplan's GEMM bench measures on typical
 * large shapes (costmodel/kernels.c cites it); measured GEMM rows are divided by it. 1 for
 * dtypes without a figure. */
double ap_kernels_bench_of_ceiling(ap_dtype dt);

/* Efficiency of an M x N x K GEMM in dtype dt (fraction of its dense peak): the table's
 * curve over log2(FLOPs) times this shape's wave quantisation; with a single point (the
 * published large-GEMM ceiling) the curve is that ceiling x F / (F + half_flops), half_flops
 * standing for a fixed per-GEMM latency (calibrated). 0 when the dtype has no peak. */
double ap_kernels_gemm_eff(const ap_kernels *k, ap_dtype dt, double M, double N, double K,
                           double half_flops);

/* Attention efficiency (fraction of the 16-bit dense peak, FlashAttention FLOP convention) of
 * implementation `impl` at sequence length s (keys per query block row), head dim d, causal
 * or not, forward and backward. Rules when the table has no exact series: nearest head-dim
 * class (interpolated in log2 d between classes), causal from non-causal scaled by the
 * implementation's forward causal/non-causal ratio, then the same implementation on A100 as a
 * fraction of peak; impl UNFUSED and AUTO have no table (returns 0: the caller prices them). */
void ap_kernels_attn_eff(const ap_kernels *k, ap_attn_impl impl, int causal, double d, double s,
                         double *fwd_eff, double *bwd_eff);

/* The longest sequence length (tokens) the tables hold for impl, causal or not (any head dim
 * or direction): past it ap_kernels_attn_eff returns that length's figure; 0 when none. */
double ap_kernels_attn_longest(const ap_kernels *k, ap_attn_impl impl, int causal);

/* Where ap_kernels_attn_eff's figure for this case comes from (a citation, "A100 figure
 * carried over", or "measured"): a pointer into k, valid while k lives. */
const char *ap_kernels_attn_source(const ap_kernels *k, ap_attn_impl impl, int causal, double d);

/* NCCL's tuning-model latency (seconds) of one collective over `nranks` ranks on `nnodes`
 * nodes (NVIDIA/nccl src/graph/tuning.cc: base latency per algorithm and protocol, plus per
 * step hardware latency inside the node and across it), for the given algorithm (0 ring, 1
 * tree; tree only for all-reduce) and protocol (0 LL, 1 LL128, 2 Simple). intra_nvlink: the
 * ranks of a node talk over NVLink (else PCIe). */
double ap_nccl_latency_s(ap_coll_op op, int algo, int proto, int nranks, int nnodes,
                         int intra_nvlink);

/* Time of one collective moving `bytes` (nccl-tests "size": the full buffer of all-reduce /
 * all-gather output / reduce-scatter input / all-to-all send buffer) over nranks ranks on
 * nnodes nodes whose bottleneck bus bandwidth (nccl-tests convention, bytes/s) is busbw: the
 * fastest of NCCL's algorithm x protocol choices, each latency + bytes / algorithm bandwidth
 * (NCCL tuning.cc's own model, incl. its LL/LL128 bandwidth caps and the ring all-reduce
 * plateau factor). 0 for nranks <= 1 or bytes <= 0. */
double ap_kernels_coll_s(const ap_kernels *k, ap_coll_op op, double bytes, int nranks,
                         int nnodes, double busbw, int intra_nvlink);

/* The choices ap_kernels_coll_s weighs for calls of one shape (op, ranks, nodes, bus bandwidth,
 * link), worked out once: each a latency and an algorithm bandwidth, in its order, and for
 * all-to-all its one latency and bandwidth with the bytes' factor. ap_kernels_coll_terms_s
 * prices a call of `bytes` from them to the same bits as ap_kernels_coll_s (a caller pricing
 * many calls of few shapes keeps the terms). */
#define AP_COLL_TERMS 6
typedef struct ap_coll_terms {
    int n;          /* choices (0: the call costs nothing) */
    int alltoall;   /* lat[0] + bytes x factor / algbw[0] */
    double factor;
    double lat[AP_COLL_TERMS], algbw[AP_COLL_TERMS];
} ap_coll_terms;
void ap_kernels_coll_terms(const ap_kernels *k, ap_coll_op op, int nranks, int nnodes,
                           double busbw, int intra_nvlink, ap_coll_terms *t);
double ap_kernels_coll_terms_s(const ap_coll_terms *t, double bytes);

#endif
