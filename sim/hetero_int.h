/*
 * hetero_int.h - internals shared by the heterogeneous-memory simulators: sim/hetero.c (the
 * parameter list, the operator template of one micro-batch, the run and its report),
 * sim/hetero_time.c (links, CPU Adam, the step timeline), sim/gemini.c and
 * sim/zero_infinity.c (the trainers). Not a public header: callers use hetero.h.
 */
#ifndef AP_HETERO_INT_H
#define AP_HETERO_INT_H

#include "autoplan/hetero.h"
#include "autoplan/kernels.h"

#include <pthread.h>

/* The short names of the functions below; the exported names carry the module prefix. */
#define ht_async ap_ht_async
#define ht_collective_s ap_ht_collective_s
#define ht_cpu_adam_s ap_ht_cpu_adam_s
#define ht_d2h_bps ap_ht_d2h_bps
#define ht_gpu_pass_s ap_ht_gpu_pass_s
#define ht_h2d_bps ap_ht_h2d_bps
#define ht_nvme_read_bps ap_ht_nvme_read_bps
#define ht_nvme_write_bps ap_ht_nvme_write_bps
#define ht_reset ap_ht_reset
#define ht_span ap_ht_span
#define ht_sync ap_ht_sync
#define ht_wait ap_ht_wait
#define hx_gpu_point ap_hx_gpu_point
#define hx_host_point ap_hx_host_point
#define hx_move ap_hx_move
#define hx_ops ap_hx_ops
#define hx_past_cutoff ap_hx_past_cutoff
#define hx_planned ap_hx_planned
#define hx_rec ap_hx_rec
#define hx_repeat_rest ap_hx_repeat_rest
#define hx_skipped ap_hx_skipped
#define hx_snap ap_hx_snap
#define hx_stop ap_hx_stop
#define hx_stop_past ap_hx_stop_past
#define hx_may_stop_early ap_hx_may_stop_early
#define hx_chunks_find ap_hx_chunks_find
#define hx_chunks_keep ap_hx_chunks_keep

#define HOP_MAXP 4

/* One module call of one micro-batch: the operator template every micro-batch repeats. */
typedef struct hop {
    int8_t module;              /* ap_hmod */
    int8_t phase;               /* AP_PHASE_FWD / RECOMPUTE / BWD */
    int8_t nparams;
    int8_t nhooks;              /* bwd: parameters whose gradient hook fires after it */
    int32_t layer;
    int32_t params[HOP_MAXP];   /* indices into the parameter list */
    int32_t hooks[HOP_MAXP];
    int64_t nmd_start;          /* non-model bytes live when its hooks fire (event simulator) */
    int64_t nmd_peak;           /* highest non-model bytes in its period */
    int64_t wgrad_bytes;        /* bwd: its weight gradients, produced by autograd before the
                                   gradient hooks copy them into the trainer's buffers */
    double flops;               /* its share of the micro-batch's FLOPs (compute split:
                                   hx_op_compute_s) */
} hop;

/* Link state of the step timeline (hetero_time.c): one clock per engine. */
typedef struct tline {
    double t;                   /* compute stream */
    double h2d_free, d2h_free;  /* PCIe copy engines, one per direction */
    double nvme_free;           /* NVMe queue (reads and writes share the drives) */
    double coll_free;           /* communication stream (async reduce) */
    double h2d_busy, d2h_busy, nvme_busy;
    double exposed;             /* transfer time the compute stream waited for */
    double coll_exposed;        /* collective time on the compute stream */
} tline;

#define HT_COLL_MEMO 8
typedef struct hctx {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_hetero_opts *o;
    ap_calib cal;
    const ap_kernels *k;        /* the kernel tables the estimate prices with */
    ap_kernels *k_built;        /* owned when built here from opts->profile */
    ap_hparam *params;
    int nparams;
    const hop *ops;             /* one micro-batch, execution order (hx_ops): the cache's
                                   template's (tpl) or the run's own */
    int nops;
    double ops_fwd_flops;       /* the forward operators' flops summed, and the rest's */
    double ops_bwd_flops;
    struct ap_hetero_template *tpl; /* the template ops belongs to (referenced), or NULL */
    pthread_mutex_t *tpl_mu;    /* its store's lock (NULL: a cache of one thread) */
    int ops_pending;            /* ops not made yet: hx_ops makes them */
    int Z;                      /* ranks sharding model states (dp) */
    int64_t mb;                 /* micro-batches per step (up to 2^32 per rank: --gbs) */
    double elt;                 /* bytes per element of the 16-bit copies */
    double overhead_bytes;      /* CUDA context, cuBLAS and NCCL buffers */
    double capacity_bytes;      /* device memory */
    double fwd_s, bwd_s;        /* compute of one micro-batch (bwd includes recompute) */
    double step_overhead_s;     /* the cost model's fixed per-step overhead */
    double model_flops_step;    /* for MFU */
    int gpus_per_node;          /* GPUs sharing one host */
    /* the report */
    ap_hetero_summary sum;
    int recording;              /* inside the reported step */
    ap_hetero_oprec *recs;
    int nrecs, caprecs;
    int keep_recs;              /* opts->record: every record kept (else the last two) */
    ap_hetero_move *moves;
    int nmoves, capmoves;
    int nomem;
    double host_now;            /* this rank's host memory now */
    int unfit;                  /* the run stops (opts->stop_unfit, stop_over): the
                                   resource it stopped on (AP_BIND_*); the simulators stop */
    int stop_kind;              /* ap_hetero_summary.stopped: 1 cannot fit, 2 overshoot */
    int cut;                    /* the step cannot come under opts->step_cutoff_s: no step is
                                   simulated (stopped 3) */
    tline tl;
    /* the last collectives priced (ht_collective_s): a simulation repeats a few sizes (one per
     * chunk or bucket size) thousands of times; zeroed with the context (bytes 0: empty) */
    struct { int op; double bytes, s; } coll_memo[HT_COLL_MEMO];
    int coll_next;
} hctx;

/* ---- hetero.c ---------------------------------------------------------------------------- */
/* Operator o's compute time: its phase's compute (fwd_s, or bwd_s for the backward and
 * recomputation) in proportion to its FLOPs. */
static inline double hx_op_compute_s(const hctx *x, const hop *o) {
    const double tot = o->phase == AP_PHASE_FWD ? x->ops_fwd_flops : x->ops_bwd_flops;
    return tot > 0 ? (o->phase == AP_PHASE_FWD ? x->fwd_s : x->bwd_s) * o->flops / tot : 0;
}

/* The operators of one micro-batch (x->ops, x->nops), made on first use: the simulators ask for
 * them once the layout has not stopped the run. */
ap_status hx_ops(hctx *x, ap_err *err);
/* Append an operator record / a movement while recording (no-ops otherwise); -1 / nothing on
 * allocation failure (ctx->nomem set). */
int hx_rec(hctx *x, int module, int phase, int32_t layer, int64_t mb);
void hx_move(hctx *x, int rec, int32_t chunk, int kind, int what, double bytes);
/* GPU verdict at an operator: device bytes = model + non-model + overhead; records the peak
 * and the first overflow (capacity - headroom). */
void hx_gpu_point(hctx *x, int rec, double model_bytes, double nonmodel_bytes);
void hx_host_point(hctx *x, int rec, double host_bytes, double pinned_bytes);
/* The run stops on `binding` (AP_BIND_*): kind 1, the plan cannot fit (opts->stop_unfit);
 * 2, its overshoot is past opts->stop_over. */
void hx_stop(hctx *x, int binding, int kind);
/* The stop rule of a resource `excess` bytes past its limit (capacity `cap`): none where it
 * is not past it or the run has stopped; kind 1 under stop_unfit; kind 2 where the excess
 * over the capacity is past stop_over. */
void hx_stop_past(hctx *x, int binding, double excess, double cap);
/* Whether the run may stop before the point it reaches (ap_hetero_opts.stop_early): asked
 * for, not stopped yet, and some stop rule set. */
int hx_may_stop_early(const hctx *x);
/* The caller's memo of Gemini's chunk-size searches (opts->cache, or the store it shares):
 * find the answer for `key` into *out (1) or not (0); keep one. */
int hx_chunks_find(const hctx *x, uint64_t key, ap_chunk_config *out);
void hx_chunks_keep(const hctx *x, uint64_t key, const ap_chunk_config *cfg);
/* The run's step cannot come under opts->step_cutoff_s (hetero.h): its compute (the clock
 * advances by every operator's, micro-batches repeated included, and by waits), extra_s the
 * step waits for besides, and the fixed overhead are past it. */
int hx_past_cutoff(const hctx *x, double extra_s);
/* The trainer's own account at record rec (ap_hetero_oprec.planned_bytes). */
void hx_planned(hctx *x, int rec, double bytes);

/* Micro-batches between the second and the last of a step repeat the second exactly (each ends
 * with the trainers' stream synchronisation and leaves the same state), so the simulators run
 * the first two and the last and count the second (m - 3) more times. */
typedef struct hsnap {
    double t, h2d_busy, d2h_busy, nvme_busy, exposed, coll_exposed;
    double h2d, d2h, nvme_r, nvme_w, gather, reduce;
} hsnap;
void hx_snap(const hctx *x, hsnap *s);
/* At the first micro-batch hx_skipped says is repeated: counts the second micro-batch for all
 * m - 3 of them at once and returns the last of them, so that the loop goes on to the step's
 * last (a step of a billion micro-batches walked them one by one for minutes). */
int64_t hx_repeat_rest(hctx *x, const hsnap *before, const hsnap *after);
/* Whether micro-batch mb of m is one the repetition stands for (not simulated). */
static inline int hx_skipped(int64_t mb, int64_t m) { return m > 3 && mb >= 2 && mb <= m - 2; }

/* ---- hetero_time.c ----------------------------------------------------------------------- */
double ht_h2d_bps(const hctx *x, int pinned);   /* bytes/s of one rank's host-to-GPU copies */
double ht_d2h_bps(const hctx *x, int pinned);
double ht_nvme_read_bps(const hctx *x);         /* one rank's share of the node's drives */
double ht_nvme_write_bps(const hctx *x);
/* One collective (an ap_coll_op) of `bytes` (the full buffer, nccl-tests size) across the ZeRO
 * group, priced as the estimate prices its own (ap_estimate_coll_s). */
double ht_collective_s(hctx *x, ap_coll_op op, double bytes);
/* CPU Adam over n elements moving bytes_per_elem through host DRAM, the node's GPUs sharing
 * it (every rank steps at the same time). */
double ht_cpu_adam_s(const hctx *x, double n, double bytes_per_elem);
/* Memory-bound GPU pass over `bytes` of HBM traffic. */
double ht_gpu_pass_s(const hctx *x, double bytes);
void ht_reset(tline *t);
/* An engine busy for dur_s, starting when it and the compute stream are free and not before
 * not_before; with sync the compute stream waits for it (exposed time). Returns its end. */
double ht_span(hctx *x, int eng, double dur_s, double not_before, int sync);
/* A transfer the compute stream waits for (synchronous copy): returns its end. */
double ht_sync(hctx *x, int engine, double bytes, double bps);
/* A transfer queued behind the compute stream's present (async copy): returns its end. */
double ht_async(hctx *x, int engine, double bytes, double bps);
/* The compute stream waits until `when`. */
void ht_wait(hctx *x, double when);
enum { ENG_H2D = 0, ENG_D2H, ENG_NVME, ENG_COLL };

/* ---- the trainers ------------------------------------------------------------------------ */
ap_status ap_gemini_sim(hctx *x, ap_err *err);
ap_status ap_zero_offload_sim(hctx *x, ap_err *err);

#endif
