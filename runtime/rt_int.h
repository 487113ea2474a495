/*
 * rt_int.h - the runtime's internals shared by its files (not a public header; callers use
 * autoplan/runtime.h):
 *
 *   element type  rt_real: float, or double in the test-only build with -DAP_RT_DOUBLE
 *   rt_mem        the one tracking allocator (alloc.c): every buffer a rank holds, by category,
 *                 live and peak bytes, per-operation snapshots, optional event log; a separate
 *                 host pool for offloaded optimizer states
 *   rt_group      a communicator among some ranks with fixed-order collectives (comm_mpi.c for
 *                 Open MPI, comm_self.c for one process)
 *   rt_kernels    the compute kernels of one backend (kernels_cpu.c; kernels_cuda.cu)
 *   rt_unit       a block owning parameters (a layer, the embedding, the head) and its
 *                 parameter, gradient and optimizer buffers under the plan's ZeRO stage
 *   rt_ctx        one rank: plan, degrees, groups, units, schedule, buffers, timers
 *
 * Layout conventions: activations are row-major [rows, features] with rows = b * s tokens in
 * sample-major order; with sequence parallelism a rank holds the contiguous row block
 * [r * n/t, (r+1) * n/t). Weights are [out_features, in_features] (y = x W^T), as torch.nn.Linear
 * and Megatron store them.
 */
#ifndef AP_RT_INT_H
#define AP_RT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "autoplan/runtime.h"
#include "autoplan/sim.h"

#ifdef AP_RT_DOUBLE
typedef double rt_real;
#else
typedef float rt_real;
#endif
#define RT_ELEM ((int64_t)sizeof(rt_real))

/* ---- tracking allocator (alloc.c) ------------------------------------------------------------ */

#define RT_HOST_CAT AP_RT_NCAT /* the host pool's index in rt_mem.cat and ap_rt_event.cat */

typedef struct rt_mem_rec rt_mem_rec;
struct rt_kernels;

typedef struct rt_mem {
    const struct rt_kernels *k;        /* device memory comes from the backend */
    int64_t live;                      /* device categories */
    int64_t cat[AP_RT_NCAT + 1];       /* live per category; [RT_HOST_CAT] = host pool */
    int64_t peak, peak_cat[AP_RT_NCAT];
    int64_t cat_peak[AP_RT_NCAT + 1];
    int64_t nallocs;                   /* tracked allocations so far */
    int64_t fail_at;                   /* fault injection: allocation number fail_at fails */
    int setup;                         /* allocations now are persistent states */
    /* live buffers: open-addressing table pointer -> record */
    rt_mem_rec *tab;
    int64_t cap, used, tomb;
    /* event log (record_events): the setup's events, then the current step's */
    int record;
    ap_rt_event *ev;
    int nev, capev, nev_setup;
    /* operation timeline (trace): the current step's ops */
    int timeline;
    ap_rt_op_record *ops;
    int nops, capops;
    int64_t op_peak;                   /* live bytes at the current op's own peak */
    double t0_s;                       /* step start */
    double (*clock)(void);             /* seconds (the world's clock) */
    int oom;                           /* an allocation failed or a log could not grow */
} rt_mem;

void rt_mem_init(rt_mem *m, const struct rt_kernels *k);
/* Free every buffer still tracked and the logs. */
void rt_mem_release(rt_mem *m);
/* A zeroed buffer of `bytes` counted under `cat` (AP_RT_CAT_* on the backend, or RT_HOST_CAT in
 * host memory); `kind`, `layer`, `mb` label it for the event log (kind: ap_sim_kind). NULL on
 * failure (m->oom set) and for bytes <= 0 (nothing counted). */
void *rt_mem_alloc(rt_mem *m, int cat, int kind, int layer, int mb, int64_t bytes);
/* The same, counted under `cat` but in host memory whatever the backend (MPI's send pool on a
 * GPU rank). */
void *rt_mem_alloc_host(rt_mem *m, int cat, int kind, int layer, int mb, int64_t bytes);
/* Free a tracked buffer (NULL is a no-op). Returns 0, or -1 for a pointer it does not track. */
int rt_mem_free(rt_mem *m, void *p);
/* Open a new operation in the timeline (closing the previous one); now_s: the clock. */
void rt_mem_op(rt_mem *m, int type, int chunk, int layer, int mb, double now_s);
/* Start a step at now_s: clear the timeline and the step's events. */
void rt_mem_step_begin(rt_mem *m, double now_s);
/* Close the last op of the step. */
void rt_mem_step_end(rt_mem *m, double now_s);

/* ---- communicators (comm_mpi.c, comm_self.c) -------------------------------------------------- */

typedef struct rt_group rt_group;

typedef enum { RT_OP_SUM = 0, RT_OP_MAX } rt_redop;

typedef struct rt_group_ops {
    /* in holds size*chunk elements; rank j receives into out (chunk elements) the element-wise
     * reduction of every rank's j-th chunk, summed in rank order 0, 1, ..., size-1 whatever the
     * chunking, so every caller gets bitwise the same sums. out may alias in + rank*chunk. ws:
     * a workspace of ws_elems >= 2 elements (processed in segments of ws_elems/2). */
    ap_status (*reduce_scatter)(rt_group *g, const rt_real *in, rt_real *out, int64_t chunk,
                                rt_redop op, rt_real *ws, int64_t ws_elems, ap_err *err);
    /* buf holds size*chunk elements; rank j's chunk j is sent to everyone (in place). */
    ap_status (*allgather)(rt_group *g, rt_real *buf, int64_t chunk, ap_err *err);
    /* n elements reduced in place on every rank (reduce-scatter in rank order + all-gather,
     * chunks of ceil(n/size)). */
    ap_status (*allreduce)(rt_group *g, rt_real *buf, int64_t n, rt_redop op, rt_real *ws,
                           int64_t ws_elems, ap_err *err);
    /* Point to point. send is buffered (returns once the data is copied into the attached send
     * pool); recv blocks until the message is there. */
    ap_status (*send)(rt_group *g, int dst, int tag, const void *buf, int64_t bytes,
                      ap_err *err);
    ap_status (*recv)(rt_group *g, int src, int tag, void *buf, int64_t bytes, ap_err *err);
    /* Bytes: broadcast from root; gather variable-size blobs on rank 0 (*out malloc'd there,
     * lens[size] filled); barrier. */
    ap_status (*bcast)(rt_group *g, int root, void *buf, int64_t bytes, ap_err *err);
    ap_status (*gatherv)(rt_group *g, const void *buf, int64_t bytes, char **out,
                         int64_t *lens, ap_err *err);
    ap_status (*barrier)(rt_group *g, ap_err *err);
    /* Benchmark: group ranks 0 and `peer` bounce a message of `bytes` `reps` times (blocking,
     * unbuffered); *seconds = the elapsed time on rank 0, 0 elsewhere. */
    ap_status (*pingpong)(rt_group *g, int peer, int64_t bytes, int reps, double *seconds,
                          ap_err *err);
    void (*free)(rt_group *g);
} rt_group_ops;

struct rt_group {
    const rt_group_ops *ops;
    int size, rank;
    void *impl;
};

/* The world's ops (the comm owns its world group) and group creation: members with the same
 * color >= 0 form a group, ordered by key; color < 0 gives *out = NULL. Collective. */
struct ap_rt_comm {
    rt_group *world;
    ap_status (*split)(ap_rt_comm *c, int color, int key, rt_group **out, ap_err *err);
    /* Attach (or with NULL detach, waiting until every buffered send has left) the pool the
     * buffered sends copy into. */
    ap_status (*attach_pool)(ap_rt_comm *c, void *pool, int64_t bytes, ap_err *err);
    /* Bytes of pool each buffered message of `bytes` needs (MPI_BSEND_OVERHEAD included). */
    int64_t pool_overhead_bytes;
    double (*wtime)(void);
    const char *name; /* "mpi", "self" */
};

/* Fixed slot overhead the runtime reserves per buffered message (>= MPI_BSEND_OVERHEAD, 128 in
 * Open MPI 4.1 mpi.h; checked at start in comm_mpi.c). Part of the predicted pool size. */
#define RT_POOL_SLOT_OVERHEAD_BYTES 1024
/* Collective workspace: 2 segments of RT_COMM_SEG_ELEMS elements (256 KiB in fp32), a fixed
 * buffer like NCCL's, so large reductions run in segments. */
#define RT_COMM_SEG_ELEMS 32768

/* Open MPI's world (comm_mpi.c; linked into the autoplan-rank worker only). */
ap_status ap_rt_mpi_init(int *argc, char ***argv, ap_rt_comm **out, ap_err *err);
int ap_rt_mpi_tag_ub(void);
void ap_rt_mpi_finalize(ap_rt_comm *c);
void ap_rt_mpi_abort(int code);

/* ---- kernels (kernels_cpu.c; kernels_cuda.cu) -------------------------------------------------
 * One table per backend; every pointer argument is the backend's memory (host for the CPU,
 * device for CUDA). Shapes are row-major. GEMMs:
 *   nt: C[M,N] = A[M,K] B[N,K]^T + beta C     (y = x W^T)
 *   nn: C[M,N] = A[M,K] B[K,N]   + beta C     (dx = dy W)
 *   tn: C[M,N] = A[K,M]^T B[K,N] + beta C     (dW += dy^T x)
 * with lda/ldb/ldc the row strides in elements. Norm statistics: LayerNorm keeps mean and rstd
 * per row (2 values), RMSNorm rstd (1). */
typedef struct rt_attn_shape {
    int64_t b, s;        /* samples, sequence */
    int64_t aL, kL, d;   /* local query heads, kv heads, head dim */
    int64_t ld;          /* row stride of qkv: (aL + 2 kL) d */
    rt_real scale;       /* 1/sqrt(d) */
} rt_attn_shape;

typedef struct rt_kernels {
    const char *name;                          /* "cpu", "cuda" */
    int host_memory;                           /* buffers are host memory (MPI can read them) */
    /* memory: zeroed allocation, copies between host and backend, fills */
    void *(*alloc)(int64_t bytes);
    void (*release)(void *p);
    void (*upload)(void *dst, const void *host_src, int64_t bytes);
    void (*download)(void *host_dst, const void *src, int64_t bytes);
    void (*copy)(void *dst, const void *src, int64_t bytes);
    void (*zero)(void *dst, int64_t bytes);
    /* GEMMs */
    void (*gemm_nt)(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc);
    void (*gemm_nn)(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc);
    void (*gemm_tn)(int64_t M, int64_t N, int64_t K, const rt_real *A, int64_t lda,
                    const rt_real *B, int64_t ldb, rt_real beta, rt_real *C, int64_t ldc);
    /* norms: dx written, dw/db accumulated */
    void (*norm_fwd)(int rms, int64_t rows, int64_t h, const rt_real *x, const rt_real *w,
                     const rt_real *b, rt_real *y, rt_real *stats);
    void (*norm_bwd)(int rms, int64_t rows, int64_t h, const rt_real *dy, const rt_real *x,
                     const rt_real *w, const rt_real *stats, rt_real *dx, rt_real *dw,
                     rt_real *db);
    /* rotary embedding on the first `heads` heads of width d of each row (stride ld), row r at
     * position r mod s (Su et al. 2021, RoFormer Eq. 34; rotate-half pairing as GPT-NeoX and
     * Llama); inverse = the transposed rotation, i.e. the backward */
    void (*rope)(rt_real *x, int64_t rows, int64_t ld, int64_t heads, int64_t d, int64_t s,
                 int inverse);
    /* causal attention of every (sample, local head) from qkv [b s, ld]: P gets the softmax
     * probabilities, [b aL s s] when saved (per_head 0) or one head's [s s] reused (per_head 1,
     * selective recomputation); ctx [b s, aL d] */
    void (*attn_fwd)(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                     rt_real *ctx);
    /* backward: dqkv (zeroed by the caller) from dctx; P saved [b aL s s] (per_head 0) or
     * recomputed per head into P [s s] (per_head 1); dP: one head's [s s] scratch */
    void (*attn_bwd)(const rt_attn_shape *sh, const rt_real *qkv, rt_real *P, int per_head,
                     const rt_real *dctx, rt_real *dP, rt_real *dqkv);
    void (*gelu_fwd)(int64_t n, const rt_real *x, rt_real *y);
    void (*gelu_bwd)(int64_t n, const rt_real *dy, const rt_real *x, rt_real *dx);
    void (*swiglu_fwd)(int64_t rows, int64_t f, const rt_real *u, rt_real *y);
    void (*swiglu_bwd)(int64_t rows, int64_t f, const rt_real *dy, const rt_real *u,
                       rt_real *du);
    /* y = a + b (+ bias per column); y may alias a or b */
    void (*add)(int64_t rows, int64_t h, rt_real *y, const rt_real *a, const rt_real *b,
                const rt_real *bias);
    void (*add_bias)(int64_t rows, int64_t h, rt_real *x, const rt_real *bias);
    /* db[j] += sum over rows of dy[r, j] (row stride ld) */
    void (*colsum)(int64_t rows, int64_t h, const rt_real *dy, int64_t ld, rt_real *db);
    /* embedding rows of the local vocabulary [v0, v0 + VL): x[r] = wte[tok[r] - v0] or 0;
     * backward dwte[tok[r] - v0] += dx[r] */
    void (*embed_fwd)(int64_t rows, int64_t h, const int32_t *tok, const rt_real *wte,
                      int64_t v0, int64_t VL, rt_real *x);
    void (*embed_bwd)(int64_t rows, int64_t h, const int32_t *tok, const rt_real *dx,
                      int64_t v0, int64_t VL, rt_real *dwte);
    /* learned positions: x[r] += wpe[(row0 + r) mod s]; backward dwpe[...] += dx[r] */
    void (*pos_fwd)(int64_t rows, int64_t h, rt_real *x, const rt_real *wpe, int64_t row0,
                    int64_t s);
    void (*pos_bwd)(int64_t rows, int64_t h, const rt_real *dx, rt_real *dwpe, int64_t row0,
                    int64_t s);
    /* vocab-parallel cross-entropy (Megatron's VocabParallelCrossEntropy): per row the local
     * maximum; the sum of exp(logit - max); the target's logit where the target is local (else
     * 0); then probabilities in place and per-row losses log(sum) + max - target_logit;
     * backward in place: (p - onehot) * scale */
    void (*ce_max)(int64_t rows, int64_t VL, const rt_real *logits, rt_real *mx);
    void (*ce_sumexp)(int64_t rows, int64_t VL, const rt_real *logits, const rt_real *mx,
                      rt_real *sum);
    void (*ce_target)(int64_t rows, int64_t VL, const rt_real *logits, const int32_t *tgt,
                      int64_t v0, rt_real *tl);
    /* returns the sum of the row losses */
    double (*ce_finish)(int64_t rows, int64_t VL, rt_real *logits, const rt_real *mx,
                        const rt_real *sum, const rt_real *tl);
    void (*ce_bwd)(int64_t rows, int64_t VL, rt_real *probs, const int32_t *tgt, int64_t v0,
                   rt_real scale);
    /* AdamW on n elements (Loshchilov & Hutter 2019, Algorithm 2), bias-corrected, step t */
    void (*adamw)(int64_t n, rt_real *p, const rt_real *g, rt_real *m, rt_real *v,
                  const ap_rt_optim *o, int t);
    void (*sync)(void); /* wait for queued work (timers) */
    /* the first failure of an asynchronous backend since start ("call: reason"), or NULL; NULL
       pointer for backends that cannot fail asynchronously */
    const char *(*last_error)(void);
} rt_kernels;

const rt_kernels *rt_kernels_cpu(void);
/* The CUDA table (kernels_cuda.cu) on GPU local_rank of this host, or NULL with err saying why
 * (no device, fewer GPUs than ranks on the host). Only in builds with the CUDA backend
 * (AP_RT_HAVE_CUDA). */
const rt_kernels *rt_kernels_cuda(int local_rank, ap_err *err);
/* A group of the same ranks as `mpi` whose collectives run on device memory through NCCL
 * (comm_nccl.c), its unique id broadcast over `mpi`; host operations (bytes, barrier) stay on
 * `mpi`, which the new group owns. AP_RT_HAVE_CUDA builds only. */
ap_status rt_nccl_group(rt_group *mpi, rt_group **out, ap_err *err);
/* AdamW on host memory (the offloaded part, whatever the backend). */
void rt_adamw_host(int64_t n, rt_real *p, const rt_real *g, rt_real *m, rt_real *v,
                   const ap_rt_optim *o, int t);

/* ---- parameters: units and tensors (model.c) ------------------------------------------------ */

typedef enum { RT_SPLIT_NONE = 0, RT_SPLIT_ROWS, RT_SPLIT_COLS } rt_split;
typedef enum { RT_INIT_NORMAL = 0, RT_INIT_ONES, RT_INIT_ZEROS } rt_init;

typedef struct rt_tdesc {
    char name[16];          /* "wq" */
    int64_t rows, cols;     /* local shape */
    int64_t grows, gcols;   /* global shape */
    int64_t row0, col0;     /* local slice origin in the global tensor */
    int64_t off;            /* offset in the unit's flat buffer, elements */
    rt_split split;
    rt_init init;
    double std;
    int canon;              /* index of the canonical tensor (ap_rt_tensor_at) */
} rt_tdesc;

typedef enum { RT_UNIT_LAYER = 0, RT_UNIT_EMBED, RT_UNIT_HEAD } rt_unit_kind;

/* Where each parameter block starts in a unit's flat buffer (-1: absent). The tp-sharded part
 * comes first, the replicated part (norms, row-parallel output biases, positions) last. Blocks
 * that one GEMM reads are adjacent: wq wk wv (one [qkvL, h] matrix), their biases, w_gate w_up
 * (one [2 fL, h] matrix), their biases. */
typedef enum {
    S_WQKV = 0, S_BQKV, S_WO, S_W1, S_B1, S_W2,   /* layer, sharded */
    S_LN1W, S_LN1B, S_BO, S_LN2W, S_LN2B, S_B2,   /* layer, replicated */
    S_WTE, S_WPE,                                  /* embedding */
    S_LMH, S_LNFW, S_LNFB,                         /* head */
    RT_NSLOTS
} rt_slot;

#define RT_MAX_TENSORS 24

typedef struct rt_unit {
    rt_unit_kind kind;
    int layer;              /* global layer; -2 embedding (AP_SIM_LAYER_EMBED); L head */
    int chunk;              /* local chunk */
    int nt;
    rt_tdesc t[RT_MAX_TENSORS];
    int64_t o[RT_NSLOTS];   /* block offsets, elements */
    int64_t n;              /* local parameters (after the tp split) */
    int64_t n_rep;          /* of which the trailing replicated section (norms, row-parallel
                               biases, positions): with sp their gradients are tp-reduced */
    int64_t npad;           /* n padded to a multiple of dp (ZeRO >= 1), else n */
    int64_t shard;          /* npad / dp (ZeRO >= 1), else n */
    int64_t off;            /* offloaded elements of the optimizer shard */
    rt_real *w;             /* full weights (ZeRO 0-2), gathered copy while in use (ZeRO-3) */
    rt_real *wshard;        /* ZeRO-3: the persistent shard */
    rt_real *g;             /* full gradient (ZeRO 0/1 persistent; 2/3 during the step) */
    rt_real *gshard;        /* ZeRO 2/3: the reduced shard, from the last backward to the step */
    rt_real *m, *v;         /* device AdamW states (shard - off elements) */
    rt_real *mh, *vh;       /* host pool (off elements) */
    int gather_refs;        /* ZeRO-3: users of the gathered copy */
    int bwd_done;           /* micro-batches whose backward went through it this step */
    struct rt_unit *tie;    /* tied LM head on one stage: the embedding unit it shares */
} rt_unit;

/* ---- one rank ---------------------------------------------------------------------------------- */

#define RT_END_TOKENS 0  /* per micro-batch saved tensors at the pipeline ends */
#define RT_END_TARGETS 1
#define RT_END_NSTAT 2
#define RT_END_YF 3
#define RT_END_LOGITS 4
#define RT_END_HIN 5
#define RT_NEND 6

/* saved tensors of one layer for one micro-batch */
typedef struct rt_saved {
    rt_real *x;       /* layer input (the checkpoint under full recompute) */
    rt_real *st1, *y1, *qkv, *P, *ctx, *x2, *st2, *y2, *u, *act;
} rt_saved;

typedef struct rt_ctx {
    const ap_rt_job *job;
    ap_model m;
    ap_plan p;
    const rt_kernels *k;
    rt_mem mem;
    ap_rt_comm *world;
    rt_group *tpg, *dpg, *ppg, *tieg, *wg;  /* tp, dp, pp, tied-embedding pair, world */
    int rank, stage, tp_rank, dp_rank;
    int t, pp, dp, vp, nchunks;            /* degrees; nchunks = pp * vp */
    int64_t L, h, a, kv, d, f, V, s, b;    /* model */
    int64_t n, ns;                         /* tokens per micro-batch; local rows (sp: n/t) */
    int64_t aL, kL, fL, VL;                /* per tp rank: heads, kv heads, ffn, vocab */
    int64_t qkvL;                          /* q, k, v columns per tp rank */
    int64_t m_mb;                          /* micro-batches per step per dp rank */
    int rms, swiglu, bias, qkv_bias, learned_pos, tied, sp;
    int64_t nstat;                         /* norm statistics per row */
    /* chunks of this rank */
    int ck_first[AP_MAX_CHUNKS], ck_n[AP_MAX_CHUNKS], ck_base[AP_MAX_CHUNKS], ck_rc[AP_MAX_CHUNKS];
    int nloc;
    rt_unit *units;                        /* nloc layers, then embedding, then head */
    int nunits, u_embed, u_head;           /* -1 when not on this rank */
    rt_saved *sv;                          /* [mb][local layer] */
    void **ends;                           /* [mb][RT_NEND] */
    rt_real *ws;                           /* collective workspace (comm) */
    int64_t ws_elems;
    void *pool;                            /* buffered-send pool (comm) */
    int64_t pool_bytes;
    int step_t;                            /* AdamW step count */
    int step_index;                        /* global batch index of the current step */
    double loss_sum;                       /* this step's local cross-entropy sum */
    int64_t d2h_bytes, h2d_bytes;          /* this step's offload copies */
    /* phase timers of the current step */
    double t_fwd, t_bwd, t_comm, t_opt;
    ap_err *err;
    ap_status st;                          /* first failure */
} rt_ctx;

/* Record the first failure (message prefixed with the rank) and return it. */
ap_status rt_fail(rt_ctx *c, ap_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Tracked buffer of `elems` rt_real (or raw bytes with rt_alloc_bytes); NULL records
 * AP_ERR_NOMEM naming the tensor. */
rt_real *rt_alloc(rt_ctx *c, int cat, int kind, int layer, int mb, int64_t elems);
void *rt_alloc_bytes(rt_ctx *c, int cat, int kind, int layer, int mb, int64_t bytes);
void rt_free(rt_ctx *c, void *p);

/* Timed communication wrappers: count their time as comm time, prefix errors with the rank. */
ap_status rt_c_allreduce(rt_ctx *c, rt_group *g, rt_real *buf, int64_t n, rt_redop op);
ap_status rt_c_reduce_scatter(rt_ctx *c, rt_group *g, const rt_real *in, rt_real *out,
                              int64_t chunk);
ap_status rt_c_allgather(rt_ctx *c, rt_group *g, rt_real *buf, int64_t chunk);
ap_status rt_c_send(rt_ctx *c, rt_group *g, int dst, int tag, const void *buf, int64_t bytes);
ap_status rt_c_recv(rt_ctx *c, rt_group *g, int src, int tag, void *buf, int64_t bytes);

/* ---- model (model.c) --------------------------------------------------------------------------- */

/* Tensors of every unit on this rank, their local sizes and flat offsets. */
ap_status rt_model_layout(rt_ctx *c);
/* The initial values of unit u's flat elements [lo, hi) into dst[0 .. hi-lo) (host memory), from
 * the seed by canonical tensor and global element index, so every sharding gets the same
 * values. */
void rt_model_init_unit(rt_ctx *c, rt_unit *u, rt_real *dst, int64_t lo, int64_t hi);

enum { RT_MODE_SAVE = 0, RT_MODE_DISCARD, RT_MODE_RECOMPUTE };

/* Forward of local layer loc for micro-batch mb from input x ([ns, h], kept by the caller as
 * the saved input); returns the output ([ns, h]) or NULL on failure. */
rt_real *rt_layer_fwd(rt_ctx *c, int loc, int mb, int mode, rt_real *x);
/* Backward from the output gradient g ([ns, h], freed); returns the input gradient. */
rt_real *rt_layer_bwd(rt_ctx *c, int loc, int mb, rt_real *g);
/* Embedding forward for micro-batch mb (tokens generated from the seed); returns x0. */
rt_real *rt_embed_fwd(rt_ctx *c, int mb);
ap_status rt_embed_bwd(rt_ctx *c, int mb, rt_real *g);
/* Head forward (final norm, LM head, vocab-parallel cross-entropy; adds the loss) from the last
 * layer's output x (kept until the head backward); backward returns the input gradient. */
ap_status rt_head_fwd(rt_ctx *c, int mb, rt_real *x);
rt_real *rt_head_bwd(rt_ctx *c, int mb);

/* Synthetic data: token t (0..s) of sample `sample` of the global batch of step `step`. */
int32_t rt_data_token(const rt_ctx *c, int64_t step, int64_t sample, int64_t t);

/* ---- ZeRO states, gathers, reduction, optimizer (zero.c) --------------------------------------- */

ap_status rt_zero_setup(rt_ctx *c);
/* Before and after unit u is used for micro-batch mb (ZeRO-3 gathers the unit's parameters
 * into a temporary full copy and frees it after the pass). */
ap_status rt_zero_pre(rt_ctx *c, rt_unit *u, int mb);
void rt_zero_post(rt_ctx *c, rt_unit *u);
/* Gradient buffer of u for this backward (ZeRO 2/3 allocate it at the first backward). */
ap_status rt_zero_grad_begin(rt_ctx *c, rt_unit *u, int mb);
/* After u's backward of micro-batch mb: at the last micro-batch of the step reduce its gradient
 * (tp all-reduce of the sequence-parallel replicated parameters, then dp: all-reduce, or
 * reduce-scatter keeping the owned shard). Units of a tied embedding split over two stages
 * wait for rt_zero_finish_grads. */
ap_status rt_zero_grad_end(rt_ctx *c, rt_unit *u, int mb);
/* After every backward of the step: the deferred tied-embedding units (tp, then the sum of the
 * two copies' gradients between the first and last stage, then dp). */
ap_status rt_zero_finish_grads(rt_ctx *c);
/* AdamW on this rank's share (the offloaded part on the host pool, with counted copies), then
 * the parameter all-gather (ZeRO 1/2). */
ap_status rt_zero_update(rt_ctx *c);
/* Gradients back to zero (ZeRO 0/1) or their shards freed (ZeRO 2/3). */
void rt_zero_reset(rt_ctx *c);
/* Unit u's full parameters (which 0) or reduced gradients (1) as doubles into out[u->n] (host),
 * gathering shards over dp where they are split. Collective over the unit's dp group. */
ap_status rt_zero_full(rt_ctx *c, rt_unit *u, int which, double *out);

/* ---- the driver (run.c) ----------------------------------------------------------------------- */

/* The rank behind a session (tests of single layers: tests/runtime/layercheck.c). */
rt_ctx *rt_session_ctx(ap_rt_session *s);

/* Host figures (bench.c). */
ap_status rt_bench(rt_ctx *c, ap_rt_host_figures *out);

#endif
