/*
 * profiler.h - measuring a GPU: traces of CUDA programs and micro-benchmarks that become
 * kernel-profile rows (profile.h) in the store (db.h). docs/profiler.md is the user's guide.
 *
 * Structure (profiler/):
 *  - trace.c      autoplan's own activity record (ap_trace_rec), the trace that holds records
 *                 and interned names, and the trace file the injection library writes;
 *  - attrib.c     plain C on those records: NVTX range nesting, per-kernel attribution to the
 *                 innermost range of the launching thread, the device-memory timeline and its
 *                 peak (driver allocations: what PyTorch calls "reserved"), copies,
 *                 per-iteration summaries, and profile rows from ranges named as a row;
 *  - stats.c      repetition statistics (median, spread) and the timing loop of every bench;
 *  - hostbench.c  host CPU Adam and host memory bandwidth (no GPU needed);
 *  - shapes.c     GEMM shape grids: generic, and the sharded linear layers of a model;
 *  - loo.c        leave-one-out interpolation error of measured points;
 *  - attach.c     running a program under the injection library and reading its trace back;
 *  - libs.c       finding the companion libraries (injection library, GPU benchmark module)
 *                 and loading the module;
 *  - identify.c   the catalog SKU of a device name; host and profile names;
 *  - cupti.c      (CUDA builds only; the only file that includes cupti.h) CUPTI Activity API:
 *                 buffers, record conversion, version check, errors;
 *  - inject.c     (CUDA builds only) libautoplan_inject.so, loaded by CUDA_INJECTION64_PATH;
 *  - gpubench*.c  (CUDA builds only) cuBLASLt, cuDNN, NCCL, copy and kernel benchmarks, built
 *                 as the module libautoplan_gpu.so and reached through ap_gpubench_load.
 * Everything declared in this header builds without CUDA.
 *
 * Ownership: an ap_trace owns its records and names (ap_trace_free); an ap_trace_summary owns
 * its arrays (ap_trace_summary_free). Names returned by ap_trace_name borrow from the trace.
 */
#ifndef AP_PROFILER_H
#define AP_PROFILER_H

#include <stdint.h>

#include "autoplan/common.h"
#include "autoplan/model.h"
#include "autoplan/profile.h"

/* ---- trace records (profiler/trace.c) ----------------------------------------------------- */

typedef enum {
    AP_REC_KERNEL = 1, /* a kernel execution on the device (CUPTI CONCURRENT_KERNEL) */
    AP_REC_MEMCPY,     /* a copy (MEMCPY, MEMCPY2 peer-to-peer) */
    AP_REC_MEMSET,
    AP_REC_ALLOC,      /* driver allocation (MEMORY2 allocation) */
    AP_REC_FREE,       /* driver release (MEMORY2 release) */
    AP_REC_POOL,       /* memory pool created / trimmed / destroyed (MEMORY_POOL) */
    AP_REC_API,        /* a runtime or driver API call on a host thread */
    AP_REC_RANGE_START,/* NVTX range start (push or start) on a host thread */
    AP_REC_RANGE_END,  /* NVTX range end (pop or end), same id as its start */
    AP_REC_MARK,       /* NVTX instantaneous marker */
    AP_REC_OVERHEAD,   /* time CUPTI itself took (buffer flush, instrumentation) */
    AP_REC_KIND_END
} ap_rec_kind;

typedef enum { AP_COPY_OTHER = 0, AP_COPY_H2D, AP_COPY_D2H, AP_COPY_D2D, AP_COPY_P2P,
               AP_COPY_H2H, AP_COPY_DIR_END } ap_copy_dir;
typedef enum { AP_MEMK_UNKNOWN = 0, AP_MEMK_PAGEABLE, AP_MEMK_PINNED, AP_MEMK_DEVICE,
               AP_MEMK_MANAGED, AP_MEMK_ARRAY, AP_MEMK_END } ap_mem_kind;
/* Pool records: created, destroyed, trimmed, or a size observed with a stream-ordered
 * allocation from the pool (CUPTI reports the pool's size with each such allocation). */
typedef enum { AP_POOL_CREATED = 0, AP_POOL_DESTROYED, AP_POOL_TRIMMED, AP_POOL_SIZE,
               AP_POOL_OP_END } ap_pool_op;

#define AP_REC_FLAG_DRIVER 1u /* API record: a driver call (else runtime) */
#define AP_REC_FLAG_POOL 2u   /* ALLOC/FREE: stream-ordered, from a memory pool (cudaMallocAsync) */

/* One activity, as autoplan keeps it (64 bytes). Times are CUPTI timestamps in ns. */
typedef struct ap_trace_rec {
    uint64_t start_ns, end_ns; /* ranges, marks, alloc/free, pool: start_ns == end_ns */
    uint64_t bytes;            /* copy, memset, alloc, free: size; pool: its size after the op */
    uint64_t address;          /* alloc, free, pool: device address */
    uint32_t kind;             /* ap_rec_kind */
    uint32_t device;
    uint32_t stream;
    uint32_t correlation;      /* kernel/copy/memset/alloc/free: of the launching API call;
                                  API: its own */
    uint32_t thread;           /* API, range, mark: OS thread id (low 32 bits) */
    uint32_t id;               /* range: the NVTX range id pairing start and end; API: callback
                                  id; pool: ap_pool_op; overhead: CUPTI's overhead kind */
    uint32_t name;             /* ap_trace_name index (0 = none) */
    uint8_t copy_dir;          /* copy: ap_copy_dir */
    uint8_t src_kind, dst_kind;/* copy: ap_mem_kind of each side; alloc/free: src_kind */
    uint8_t flags;             /* AP_REC_FLAG_* */
} ap_trace_rec;

typedef struct ap_trace {
    ap_trace_rec *recs;
    size_t n, cap;
    char *names;               /* interned NUL-terminated names; index 0 is "" */
    size_t names_len, names_cap;
    uint32_t *slots;           /* open-addressing index of names (internal) */
    size_t nslots, nnames;
    size_t max_recs;           /* 0: no limit; past it records are counted in dropped */
    uint64_t dropped;          /* records lost: CUPTI's dropped count plus max_recs overflow */
    char status[512];          /* "" when tracing ran to the end; else why it stopped */
} ap_trace;

void ap_trace_init(ap_trace *t);
void ap_trace_free(ap_trace *t);
/* Append rec with its name (NULL or "" = none); the name is copied and interned (names longer
 * than 4095 bytes are cut). Over max_recs the record is counted in t->dropped, AP_OK.
 * AP_ERR_NOMEM leaves t as it was. */
ap_status ap_trace_add(ap_trace *t, const ap_trace_rec *rec, const char *name, ap_err *err);
/* The name of index i ("" for 0 or an index out of range); borrowed, valid until t changes. */
const char *ap_trace_name(const ap_trace *t, uint32_t i);
/* Intern a name: its index, or 0 with AP_ERR_NOMEM in *st. */
uint32_t ap_trace_intern(ap_trace *t, const char *name, ap_status *st);

/* The trace file the injection library writes at exit and `profile attach` reads (format in
 * docs/profiler.md: a header with magic "APTRACE1", record size, counts, dropped, status, then
 * the records and the name table; native byte order, read on the machine that wrote it).
 * Writing is atomic (ap_write_file_atomic). */
ap_status ap_trace_write(const ap_trace *t, const char *path, ap_err *err);
/* Read and validate (every kind, name index and count is checked; a truncated or foreign file
 * is AP_ERR_INPUT naming `where`). t is initialised by the call; free it even on failure. */
ap_status ap_trace_parse(const void *data, size_t len, const char *where, ap_trace *t,
                         ap_err *err);
ap_status ap_trace_read(const char *path, ap_trace *t, ap_err *err);

/* ---- aggregation (profiler/attrib.c) -------------------------------------------------------- */

/* A node of the NVTX range tree: the path of range names from the root ("step/fwd/attn"). */
typedef struct ap_range_stat {
    uint32_t parent;           /* index of the parent node; node 0 is the root (no range) */
    uint32_t name;             /* trace name index of this range */
    uint32_t depth;            /* 0 for the root */
    uint64_t count;            /* occurrences */
    double wall_s;             /* host time inside the range, summed over occurrences */
    double kernel_s;           /* device time of kernels launched directly in this range */
    double kernel_incl_s;      /* ... in this range or a range nested in it */
    uint64_t kernels;          /* kernels launched directly in this range */
} ap_range_stat;

/* Kernels of one name launched directly in one range node. */
typedef struct ap_kernel_stat {
    uint32_t node;             /* ap_range_stat index */
    uint32_t name;             /* kernel name index */
    uint64_t calls;
    double total_s, min_s, max_s;
} ap_kernel_stat;

typedef struct ap_copy_stat {
    uint64_t calls;
    double bytes, time_s;      /* summed */
} ap_copy_stat;

/* One point of the memory timeline: after an allocation or a release on `device`. */
typedef struct ap_mem_point {
    uint64_t t_ns;
    uint32_t device;
    double reserved_bytes;     /* driver allocations alive + memory-pool sizes on the device */
} ap_mem_point;

/* One iteration: one occurrence of the step range. */
typedef struct ap_iter_stat {
    uint64_t start_ns, end_ns; /* the step range on the host */
    double wall_s;             /* next iteration's start - this start (last: its own range) */
    double kernel_s;           /* kernels launched inside it, summed */
    double gpu_span_s;         /* first kernel start to last kernel end of those kernels */
    uint64_t kernels;
    double peak_reserved_bytes;/* highest reserved (all devices) from its start to its end */
} ap_iter_stat;

#define AP_TRACE_MAX_DEVICES 64

typedef struct ap_trace_summary {
    ap_range_stat *nodes;      /* [0] is the root: kernels launched outside any range */
    size_t nnodes;
    ap_kernel_stat *kernels;   /* sorted by total_s, largest first */
    size_t nkernels;
    ap_mem_point *timeline;    /* in time order */
    size_t ntimeline;
    ap_iter_stat *iters;
    size_t niters;
    char step_range[128];      /* name of the range taken as one iteration ("" when none) */
    ap_copy_stat copies[AP_COPY_DIR_END][AP_MEMK_END]; /* by direction and host-side kind */
    uint64_t memsets;
    double peak_reserved_bytes;/* max over the timeline */
    uint32_t peak_device;
    uint64_t peak_at_ns;
    double end_reserved_bytes; /* all devices, after the last record */
    uint64_t kernel_count;
    double kernel_s;           /* all kernels, summed */
    uint64_t unattributed;     /* kernels whose launching API call was not in the trace */
    uint64_t unmatched_ranges; /* range starts without an end, or ends without a start */
    uint64_t projected;        /* kernels launched with no range open on their thread, placed
                                  in the range open then on thread projected_thread */
    uint32_t projected_thread; /* the thread with the most range occurrences */
    uint64_t first_ns, last_ns;/* span of device activity */
    double overhead_s;         /* CUPTI's own overhead records, summed */
    uint64_t dropped;
} ap_trace_summary;

/* Options: step_range = the name of the range that is one iteration (NULL: the top-level range
 * name of at least two occurrences that cover the most host time; none: no iterations). */
typedef struct ap_summary_opts {
    const char *step_range;
} ap_summary_opts;

/* Summarise a trace. Kernels are attributed through the correlation id to the API call that
 * launched them and from there to the innermost NVTX range open on that thread at the call
 * (the "projection" Nsight Systems draws) or, when that thread has none open, on the thread
 * with the most ranges (autograd launches the backward from its own threads); copies by direction; the memory timeline from
 * driver allocations and releases (a release of an unknown address is ignored). out owns
 * arrays; free with ap_trace_summary_free. AP_ERR_NOMEM on allocation failure. */
ap_status ap_trace_summarize(const ap_trace *t, const ap_summary_opts *opts,
                             ap_trace_summary *out, ap_err *err);
void ap_trace_summary_free(ap_trace_summary *s);
/* "a/b/c": the range path of node i into buf (returns buf; "(no range)" for the root). */
char *ap_trace_node_path(const ap_trace *t, const ap_trace_summary *s, uint32_t i, char *buf,
                         size_t n);
/* Median of the iterations' wall_s, leaving out the first `skip` (warm-up); 0 when none. */
double ap_trace_step_s(const ap_trace_summary *s, size_t skip);
/* The same median of the iterations' kernel time (kernel_s): what of a step the GPU computes. */
double ap_trace_step_kernel_s(const ap_trace_summary *s, size_t skip);

/* The value of the last NVTX mark named "<key>=<number>" (e.g. the bundled scripts mark
 * "autoplan.max_memory_reserved=81604378624" with torch.cuda.max_memory_reserved()): 1 and
 * *value when found, else 0. */
int ap_trace_mark_value(const ap_trace *t, const char *key, double *value);

/* Kinds of kernel by name, for comparing a trace with the cost model's parts (estimate.h
 * AP_PART_*, the same order): GEMMs (cuBLAS/cuBLASLt/CUTLASS: "gemm", "nvjet", "xmma",
 * "cutlass", "splitKreduce"), the attention core ("flash", "fmha", "attention", "sdpa"; checked
 * first: "fmha_cutlass..." is attention) and everything else. Case-insensitive. */
enum { AP_KKIND_GEMM = 0, AP_KKIND_ATTN, AP_KKIND_OTHER, AP_KKIND_COUNT };
int ap_trace_kernel_kind(const char *name);
/* Device time per iteration, by kind, of the kernels launched inside ranges named `range` (at
 * any depth, a range nested in a same-named one counted once): out[AP_KKIND_*]; zeros without
 * iterations. */
void ap_trace_range_kinds(const ap_trace *t, const ap_trace_summary *s, const char *range,
                          double out[AP_KKIND_COUNT]);

/* A kernel name fit for a table: the qualified function name of an Itanium-mangled name
 * ("_ZN2at6native29vectorized_elementwise_kernelI...E" -> "at::native::vectorized_elementwise_
 * kernel"), other names as they are; cut to n - 1 bytes. Returns buf. */
char *ap_trace_short_name(const char *name, char *buf, size_t n);

/* Profile rows from ranges whose name is a row: "<op> <shape> <dtype>", e.g.
 * "attn_fwd impl=fa2,b=1,s=4096,h=32,kvh=8,d=128,causal=1,window=0 bf16" (the scripts in
 * profiler/scripts/ emit them). For each such range name: time_s = the median over its
 * occurrences of the device time of the kernels launched inside it (nested ranges included;
 * occurrences without kernels are left out), samples = those occurrences, spread as stats.c;
 * `source` names the kernel that took most of that time. `skip` first occurrences of each
 * name are warm-up and left out. Rows get the device fields of `tmpl` (gpu, versions, host,
 * source_run). A range whose first word is a known op but whose row is invalid is
 * AP_ERR_INPUT naming the range. Rows are appended to out; *nrows (may be NULL) counts them. */
ap_status ap_trace_profile_rows(const ap_trace *t, const ap_profile_row *tmpl, int skip,
                                ap_profile *out, size_t *nrows, ap_err *err);

/* ---- repetition statistics (profiler/stats.c) ----------------------------------------------- */

#define AP_BENCH_MIN_REPS 20   /* timed repetitions at least (issue 16: median of >= 20) */
#define AP_BENCH_MAX_REPS 4096

typedef struct ap_bench_stats {
    double median_s, min_s, max_s;
    double spread;             /* (max - min) / median */
    int samples;
} ap_bench_stats;

/* Statistics of n samples (n >= 1; the array is sorted in place). */
void ap_bench_stats_of(double *samples_s, int n, ap_bench_stats *out);

/* Time fn(arg) (one call = one sample, measured with the host monotonic clock by the caller's
 * fn returning its own elapsed seconds, so GPU benches time with events): `warmup` untimed
 * calls, then max(reps, AP_BENCH_MIN_REPS) timed calls. fn returns < 0 on failure: the loop
 * stops and returns AP_ERR_INTERNAL (the caller's message is in err, which fn may fill). */
typedef double (*ap_bench_fn)(void *arg, ap_err *err);
ap_status ap_bench_repeat(ap_bench_fn fn, void *arg, int warmup, int reps, ap_bench_stats *out,
                          ap_err *err);

/* Fill a row's op, shape, dtype and timing from stats (time_s = median, samples, spread) and
 * validate and append it to p (ap_profile_add: rates are derived). tmpl holds the device
 * fields. */
ap_status ap_bench_row(ap_profile *p, const ap_profile_row *tmpl, const char *op,
                       const char *shape, const char *dtype, const ap_bench_stats *st,
                       double bytes, const char *source, ap_err *err);

/* ---- host benchmarks (profiler/hostbench.c) ------------------------------------------------- */

typedef struct ap_hostbench_opts {
    int threads;               /* worker threads; 0 = online CPUs */
    double membw_bytes;        /* bytes of each STREAM array; 0 = 256 MiB */
    double adam_params;        /* parameters of the Adam step; 0 = 64 Mi */
    int reps;                  /* timed repetitions; 0 = AP_BENCH_MIN_REPS */
} ap_hostbench_opts;

void ap_hostbench_opts_init(ap_hostbench_opts *o);
/* The sizes in o are ones the benchmarks below take, and fit this host's physical memory:
 * AP_ERR_INPUT naming the quantity otherwise. Checked before any benchmark starts, so a bad
 * size is refused before anything is measured, printed or stored. */
ap_status ap_hostbench_check(const ap_hostbench_opts *o, ap_err *err);

/* STREAM copy, scale, add and triad (McCalpin, "Memory Bandwidth and Machine Balance", 1995;
 * byte counts as STREAM counts them: 2 or 3 arrays of 8-byte words per element) over three
 * arrays of membw_bytes each, split over `threads` threads. Appends four host_membw rows. */
ap_status ap_hostbench_membw(const ap_hostbench_opts *o, const ap_profile_row *tmpl,
                             ap_profile *out, ap_err *err);
/* One fp32 Adam step (Kingma & Ba 2015, Algorithm 1, with decoupled weight decay as AdamW,
 * Loshchilov & Hutter 2019) over adam_params parameters held as fp32 p, g, m, v, split over
 * `threads` threads: the CPU optimizer step of ZeRO-Offload (Ren et al. 2021). Appends one
 * host_adam row. */
ap_status ap_hostbench_adam(const ap_hostbench_opts *o, const ap_profile_row *tmpl,
                            ap_profile *out, ap_err *err);

/* One Adam update of n parameters, the kernel the bench times (exposed so tests can check it
 * against the update worked by hand). step >= 1. */
void ap_adam_update(float *p, const float *g, float *m, float *v, size_t n, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int64_t step);

/* ---- shapes (profiler/shapes.c) -------------------------------------------------------------- */

typedef struct ap_gemm_shape {
    int64_t m, n, k;
    char what[48];             /* "layer0 qkv fwd tp2", "grid" */
} ap_gemm_shape;

/* The generic grid: m, n, k each in {512, 1024, ..., 16384}; *n = 216 shapes. Caller frees. */
ap_status ap_gemm_grid(ap_gemm_shape **out, size_t *n, ap_err *err);
/* The GEMMs of a model's linear layers at tensor-parallel degree tp, micro-batch mbs and
 * sequence seq, as the cost model times them (C[m x n] = A[m x k] B[k x n]):
 *   forward  m = tokens, n = out/tp (column-parallel) or out, k = in or in/tp (row-parallel);
 *   dgrad    m = tokens, n = in, k = out (the same matrices transposed);
 *   wgrad    m = out, n = in, k = tokens.
 * tokens = mbs * seq. Linear layers: attention q/k/v (fused) and output, the MLP (gate+up
 * fused for SwiGLU) and down, MoE router and one expert at its average tokens
 * (tokens * top_k / experts), MLA projections, the LM head (vocab-parallel). Duplicates are
 * merged (the first description is kept) and appended to *out (caller frees). */
ap_status ap_gemm_model_shapes(const ap_model *m, int tp, int64_t mbs, int64_t seq,
                               ap_gemm_shape **out, size_t *n, ap_err *err);

/* ---- leave-one-out interpolation error (profiler/loo.c) ------------------------------------- */

/* A predictor of a row's time from the other rows of the same op and dtype: *time_s, 0 when
 * it cannot predict. The interpolation the cost model uses plugs in here. */
typedef int (*ap_profile_predict_fn)(const ap_profile_row *const *rows, size_t n,
                                     const ap_profile_row *query, double *time_s, void *arg);

/* Inverse-distance interpolation of log(time / FLOPs) over the k = 4 nearest rows in
 * (log m, log n, log k) for gemm; for other ops, linear interpolation of log time in log bytes
 * (or log tokens for attention) between the nearest rows on each side with the other keys
 * equal. */
int ap_profile_predict_default(const ap_profile_row *const *rows, size_t n,
                               const ap_profile_row *query, double *time_s, void *arg);

/* The cost model's own lookup (costmodel/kernels.c, ap_kernels_gemm_eff: the measured GEMM
 * points of the dtype become a curve over log2(FLOPs) with each shape's wave quantisation
 * divided out) for gemm rows; other ops fall back to ap_profile_predict_default. */
int ap_profile_predict_kernels(const ap_profile_row *const *rows, size_t n,
                               const ap_profile_row *query, double *time_s, void *arg);

typedef struct ap_loo_result {
    size_t points;             /* rows of that op and dtype */
    size_t predicted;          /* of which the others could predict */
    double median_abs_err, max_abs_err, mean_abs_err; /* relative: |pred - meas| / meas */
    char worst_shape[128];
} ap_loo_result;

/* Leave each row of (op, dtype) out in turn and predict it from the rest. */
ap_status ap_profile_loo(const ap_profile *p, const char *op, const char *dtype,
                         ap_profile_predict_fn fn, void *arg, ap_loo_result *out, ap_err *err);

/* ---- comparing two profiles (profiler/compare.c) -------------------------------------------- */

/* One operation and dtype of a comparison: rows of the same (op, shape, dtype) are matched;
 * ratio = time in B / time in A (above 1: B is slower). */
typedef struct ap_profile_cmp {
    char op[32], dtype[16];
    size_t matched, only_a, only_b;
    double median_ratio, min_ratio, max_ratio;
    char min_shape[128], max_shape[128];
} ap_profile_cmp;

/* Group by (op, dtype) in the order ops appear in the vocabulary, then dtype. *out: caller
 * frees; *n groups (those with at least one row in A or B). */
ap_status ap_profile_compare(const ap_profile *a, const ap_profile *b, ap_profile_cmp **out,
                             size_t *n, ap_err *err);

/* ---- identity of a measurement (profiler/attach.c) ------------------------------------------ */

/* The catalog SKU of a device as the driver names it (cudaGetDeviceProperties name, memory):
 * "NVIDIA H100 80GB HBM3" -> "h100-sxm", "NVIDIA A100-SXM4-40GB" -> "a100-sxm4-40g",
 * "NVIDIA GeForce RTX 4090" -> "rtx-4090" (profiler/identify.c). A device the catalog has no
 * entry for (H100 NVL, A100 PCIe 40GB, ...) is AP_ERR_INPUT naming it and asking for --gpu. */
ap_status ap_profiler_gpu_sku(const char *device_name, double mem_bytes, char *out, size_t n,
                              ap_err *err);

/* The host name (gethostname, cut to 63 bytes) into buf. */
void ap_profiler_host(char *buf, size_t n);
/* A default profile name "<gpu>-<host>-<YYYYmmdd-HHMMSS>" (UTC) into buf. */
void ap_profiler_default_name(const char *gpu, const char *host, int64_t unix_s, char *buf,
                              size_t n);

/* ---- attach (profiler/attach.c) -------------------------------------------------------------- */

typedef struct ap_attach_opts {
    char *const *argv;         /* the program and its arguments (argv[0] searched in PATH) */
    const char *inject_lib;    /* libautoplan_inject.so; NULL: ap_attach_find_inject() */
    const char *cupti_lib;     /* the libcupti to trace with, preloaded before the library
                                  (the one the program loads itself); NULL: the one the
                                  library finds (the build's, or one already loaded) */
    const char *trace_path;    /* where the library writes the trace; NULL: a temporary file
                                  that is removed after reading */
    size_t max_records;        /* AUTOPLAN_TRACE_MAX_RECORDS for the library; 0: its default */
} ap_attach_opts;

/* The injection library: $AUTOPLAN_INJECT_LIB, else libautoplan_inject.so beside the running
 * executable or in ../lib of it, else the build tree's (AP_INJECT_LIB). AP_ERR_INPUT saying
 * how to get one when none exists (a build without CUDA has none). */
ap_status ap_attach_find_inject(char *buf, size_t n, ap_err *err);

/* Run the program with CUDA_INJECTION64_PATH (and NVTX_INJECTION64_PATH) set, wait for it and
 * read the trace it left. *exit_code: the program's exit status (128 + signal when killed).
 * Refused before running: CUDA_INJECTION64_PATH already set by another tool; a trace_path
 * where something other than a regular file exists (a device, FIFO, link or directory is
 * never removed to make room, files.h). After the run:
 * no trace (the program never initialised CUDA, or the library refused: the trace status or
 * the reason), AP_ERR_CUDA with that reason. The trace is initialised by the call. */
ap_status ap_attach_run(const ap_attach_opts *o, ap_trace *t, int *exit_code, ap_err *err);

/* ---- GPU benchmarks (profiler/gpubench*.c, loaded from libautoplan_gpu.so) -------------------
 * The GPU benchmarks link cuBLASLt, cuDNN and NCCL, which take a third of a second to load: they
 * live in a module autoplan loads only when it measures (profiler/libs.c), so every other
 * command starts as fast as without CUDA. Builds without the CUDA toolkit have no module. */

typedef struct ap_gpubench_opts {
    int device;                /* CUDA device index */
    const char *what;          /* comma-separated: gemm,membound,adam,copy,launch,devmem,attn,
                                  nccl; NULL: all */
    const ap_gemm_shape *gemm_shapes; /* NULL: the generic grid */
    size_t ngemm_shapes;
    const char *dtypes;        /* GEMM dtypes: "bf16,fp16,fp8,tf32" by default (fp8 on sm89+) */
    int reps;                  /* 0: AP_BENCH_MIN_REPS */
    int quick;                 /* 1: smaller grids and sizes (a smoke run in minutes) */
    void (*progress)(const char *line, void *arg); /* one line per finished group; may be NULL */
    void *progress_arg;
} ap_gpubench_opts;

#define AP_GPUBENCH_ABI 1 /* bumped when ap_gpubench_api, its options or the row change */

typedef struct ap_gpubench_api {
    int abi;                   /* AP_GPUBENCH_ABI of the module */
    size_t row_size, opts_size;/* sizeof(ap_profile_row), sizeof(ap_gpubench_opts) there */
    const char *version;       /* AP_VERSION of the module */
    /* The device's identity into a row template: catalog SKU (ap_profiler_gpu_sku of the
     * device's name and memory, or `gpu` when not NULL: a catalog name for a device the catalog
     * lacks), device_name, pci_id, sm_count, mem_bytes, clocks and power limit (NVML when the
     * driver has it), versions (driver, CUDA runtime, cuBLAS, NCCL), MIG mode, host.
     * AP_ERR_CUDA when there is no device. */
    ap_status (*identify)(int device, const char *gpu, ap_profile_row *tmpl, ap_err *err);
    /* Run the chosen benchmarks on one device and append their rows to out (rows get tmpl's
     * identity). Notes (e.g. "one GPU: collectives come from the published tables") go through
     * o->progress. */
    ap_status (*run)(const ap_gpubench_opts *o, const ap_profile_row *tmpl, ap_profile *out,
                     ap_err *err);
} ap_gpubench_api;

/* Load libautoplan_gpu.so ($AUTOPLAN_GPU_MODULE, beside the executable, ../lib, or the build
 * tree's) once and return its table (static; valid for the process). AP_ERR_INPUT saying why
 * when there is none (a build without CUDA) or it is of another autoplan build. */
ap_status ap_gpubench_load(const ap_gpubench_api **api, ap_err *err);
void ap_gpubench_opts_init(ap_gpubench_opts *o);

/* A companion library of autoplan: $env when set, else `name` beside the running executable
 * or in its ../lib, else build_path (NULL: none). AP_ERR_INPUT naming what was tried. */
ap_status ap_profiler_find_lib(const char *name, const char *env, const char *build_path,
                               char *buf, size_t n, ap_err *err);

#endif
