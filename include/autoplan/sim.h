/*
 * sim.h - the memory-planning simulator: for a plan, the ordered operations of one training
 * iteration on each pipeline rank (1F1B or interleaved schedule, forward/backward per
 * micro-batch, recompute, ZeRO-3/FSDP gathers, gradient reduction at the trainer's cadence,
 * optimizer step, offload transfers) and every allocation and free they cause, replayed through
 * an allocator model (sim/sim.c, sim/alloc.c, sim/trace.c; docs/simulator.md).
 *
 * The simulator is derived independently of the analytical estimate (estimate.h): it never
 * calls the cost model's memory functions; tensor sizes come from the model shapes
 * (ap_model_layer) and the trainer's bytes per parameter (ap_trainer_get) only. The one
 * exception is the fixed device overhead outside the allocator (CUDA context, cuBLAS, NCCL:
 * ap_mem_device_overhead_bytes), which neither derives and both add.
 *
 * Ownership: ap_sim_run returns an ap_sim the caller frees with ap_sim_free. Every pointer in an
 * ap_sim_rank (ops, tensors, events, curves, live set) borrows into the ap_sim and stays valid
 * until ap_sim_free. The allocator (ap_alloc) is an opaque handle freed with ap_alloc_free.
 *
 * Units: bytes (int64_t). Time in the trace is a logical clock (one unit per event), not a
 * prediction of seconds.
 */
#ifndef AP_SIM_H
#define AP_SIM_H

#include "autoplan/estimate.h"
#include "autoplan/json.h"

/* ---- allocator models (sim/alloc.c) ----------------------------------------------- */

typedef enum {
    AP_ALLOC_CACHING = 0, /* PyTorch CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp) */
    AP_ALLOC_ARENA        /* one arena, tensors placed at offsets by liveness (ggml-alloc style) */
} ap_alloc_mode;

/* PyTorch CUDACachingAllocator constants (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x). */
#define AP_CACHING_MIN_BLOCK_BYTES 512LL          /* kMinBlockSize: every size rounded to it */
#define AP_CACHING_SMALL_SIZE_BYTES 1048576LL     /* kSmallSize: <= 1 MiB goes to the small pool */
#define AP_CACHING_SMALL_BUFFER_BYTES 2097152LL   /* kSmallBuffer: small-pool segment, 2 MiB */
#define AP_CACHING_LARGE_BUFFER_BYTES 20971520LL  /* kLargeBuffer: segment for 1-10 MiB, 20 MiB */
#define AP_CACHING_MIN_LARGE_ALLOC_BYTES 10485760LL /* kMinLargeAlloc: 10 MiB */
#define AP_CACHING_ROUND_LARGE_BYTES 2097152LL    /* kRoundLarge: larger segments round to 2 MiB */
#define AP_ARENA_ALIGN_BYTES 256LL                /* cudaMalloc alignment; arena offsets */

typedef struct ap_alloc_opts {
    ap_alloc_mode mode;
    int expandable_segments;  /* PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (caching) */
    int64_t limit_bytes;      /* memory the allocator may reserve; 0 = unlimited. Above it the
                                 caching mode first releases cached free segments (PyTorch's
                                 release_cached_blocks), then reports the request as over the
                                 limit and grants it anyway so the replay can go on. */
} ap_alloc_opts;

void ap_alloc_opts_init(ap_alloc_opts *o); /* caching, not expandable, unlimited */

typedef struct ap_alloc ap_alloc;

typedef struct ap_alloc_stats {
    int64_t requested_bytes;      /* sum of live request sizes ("allocated" level) */
    int64_t active_bytes;         /* sum of live block sizes (after rounding / unsplit tails) */
    int64_t reserved_bytes;       /* segments held (caching), mapped pages (expandable), arena
                                     high-water mark (arena) */
    int64_t peak_requested_bytes;
    int64_t peak_active_bytes;
    int64_t peak_reserved_bytes;
    int64_t segments;             /* live segments (cudaMalloc calls not yet released) */
    int64_t segment_allocs;       /* cudaMalloc (or page-map) calls so far */
    int64_t segment_releases;     /* segments released under memory pressure */
    int64_t splits;               /* blocks split */
    int64_t reuses;               /* requests served from a cached free block */
    int64_t over_limit;           /* requests that exceeded limit_bytes */
    int64_t largest_free_bytes;   /* largest cached free block now */
} ap_alloc_stats;

/* Create an allocator model. Caller frees with ap_alloc_free. NULL on allocation failure. */
ap_alloc *ap_alloc_new(const ap_alloc_opts *o);
void ap_alloc_free(ap_alloc *a);

/* Allocate `bytes` (> 0). *out_block is a handle for ap_alloc_release, *out_addr the simulated
 * address (unique among live blocks; arena mode: the offset in the arena). *over_limit (may be
 * NULL) is set to 1 when reserved memory had to exceed limit_bytes. AP_ERR_NOMEM only when the
 * host runs out of memory for bookkeeping; AP_ERR_INPUT for bytes <= 0. */
ap_status ap_alloc_malloc(ap_alloc *a, int64_t bytes, int32_t *out_block, int64_t *out_addr,
                          int *over_limit);
/* Free a block returned by ap_alloc_malloc. AP_ERR_INPUT for an unknown or already freed block
 * (the simulator's "every free matches an allocation" check relies on it). */
ap_status ap_alloc_release(ap_alloc *a, int32_t block);
/* Size of a live block after rounding (0 for an unknown block). */
int64_t ap_alloc_block_bytes(const ap_alloc *a, int32_t block);
void ap_alloc_get_stats(const ap_alloc *a, ap_alloc_stats *out);
/* Reserved bytes now (cheap; the replay reads it after every event). */
int64_t ap_alloc_reserved_bytes(const ap_alloc *a);
/* PyTorch round_size(): sizes below 512 become 512, others round up to a multiple of 512. */
int64_t ap_alloc_round_size(int64_t bytes);
/* PyTorch get_allocation_size(): the segment cudaMalloc'd for a request of `rounded` bytes. */
int64_t ap_alloc_segment_size(int64_t rounded);
const char *ap_alloc_mode_name(ap_alloc_mode m);               /* "caching" | "arena" */
ap_status ap_alloc_mode_parse(const char *s, ap_alloc_mode *out, ap_err *err);

/* ---- the simulator (sim/sim.c) ------------------------------------------------------ */

typedef enum {
    AP_SIM_CAT_PARAMS = 0,   /* working weights (and fp8 copies) resident on the GPU */
    AP_SIM_CAT_GRADS,        /* gradient buffers */
    AP_SIM_CAT_OPTIMIZER,    /* master weights + Adam states on the GPU */
    AP_SIM_CAT_ACTIVATIONS,  /* tensors saved for backward, logits */
    AP_SIM_CAT_OTHER,        /* temporaries: gathered params, unsharded grads, backward
                                gradients, sequence-parallel gathers, p2p buffers */
    AP_SIM_NCAT
} ap_sim_category;

typedef enum {
    /* model states */
    AP_SIM_T_WEIGHT = 0, AP_SIM_T_WEIGHT_FP8, AP_SIM_T_GRAD, AP_SIM_T_MASTER, AP_SIM_T_OPTIM,
    AP_SIM_T_WEIGHT_GATHERED, AP_SIM_T_GRAD_UNSHARDED, AP_SIM_T_GRAD_REDUCE, AP_SIM_T_GRAD_ACCUM,
    AP_SIM_T_OPTIM_TEMP,
    /* activations of a transformer layer, in forward order */
    AP_SIM_T_INPUT,          /* layer input = residual stream (saved by the first norm) */
    AP_SIM_T_SP_GATHER,      /* sequence-parallel all-gather output (transient) */
    AP_SIM_T_LN1_OUT, AP_SIM_T_QKV, AP_SIM_T_SCORES, AP_SIM_T_SOFTMAX, AP_SIM_T_SOFTMAX_MASK,
    AP_SIM_T_SOFTMAX_DROP, AP_SIM_T_LSE, AP_SIM_T_ATTN_CTX, AP_SIM_T_PROJ_OUT, AP_SIM_T_ATTN_MASK,
    AP_SIM_T_LN2_IN, AP_SIM_T_LN2_OUT, AP_SIM_T_FC1_OUT, AP_SIM_T_ACT_OUT, AP_SIM_T_FC2_OUT,
    AP_SIM_T_MLP_MASK, AP_SIM_T_ROUTER_PROBS, AP_SIM_T_MOE_DISPATCHED, AP_SIM_T_EXPERT_FC1,
    AP_SIM_T_EXPERT_ACT, AP_SIM_T_EXPERT_OUT, AP_SIM_T_SHARED_FC1, AP_SIM_T_SHARED_ACT,
    AP_SIM_T_LAYER_OUT,      /* output of a recomputed forward, discarded */
    /* pipeline ends */
    AP_SIM_T_EMBED_MASK, AP_SIM_T_FINAL_NORM_OUT, AP_SIM_T_LOGITS, AP_SIM_T_LOGITS_FP32,
    AP_SIM_T_LOG_PROBS, AP_SIM_T_STAGE_OUT,
    /* the runtime's own tensors (trainer runtime, sim/simrt.c) */
    AP_SIM_T_NORM_STATS,     /* norm mean/rstd per row */
    AP_SIM_T_TOKENS, AP_SIM_T_TARGETS, /* int32 token ids of a micro-batch */
    AP_SIM_T_EMBED_OUT,      /* vocab-parallel lookup before its reduce-scatter */
    AP_SIM_T_LOSS_TEMP,      /* vocab-parallel cross-entropy row max, sum, target logit */
    AP_SIM_T_GRAD_SHARD,     /* reduced gradient shard (ZeRO 2/3) */
    AP_SIM_T_COMM_WS,        /* collective workspace (communication buffer) */
    AP_SIM_T_SEND_POOL,      /* pipeline send pool (communication buffer) */
    AP_SIM_T_GRAD_BUCKET,    /* a ZeRO optimizer's contiguous-gradient bucket (DeepSpeed IPG) */
    AP_SIM_T_EMBED_NORM_IN,  /* the embedding's output, kept by the norm after it for its
                                backward (BLOOM's word_embeddings_layernorm) */
    AP_SIM_T_EAGER_ATTN,     /* what an eager RMSNorm keeps beyond a fused one (its fp32
                                upcast and 16-bit normalised tensor), attention block */
    AP_SIM_T_EAGER_MLP,      /* the same for the MLP block's norms, with the eager gated
                                activation's output (activations.c eager_layer_bytes) */
    AP_SIM_NKINDS
} ap_sim_kind;

typedef enum {
    AP_SIM_OP_SETUP = 0,     /* persistent model states present at the start of the iteration */
    AP_SIM_OP_EMBED_FWD, AP_SIM_OP_EMBED_BWD,
    AP_SIM_OP_RECV_FWD,      /* receive the previous stage's activation */
    AP_SIM_OP_SEND_FWD,
    AP_SIM_OP_RECV_BWD,      /* receive the next stage's gradient */
    AP_SIM_OP_SEND_BWD,
    AP_SIM_OP_GATHER,        /* ZeRO-3/FSDP parameter all-gather or offloaded-parameter fetch */
    AP_SIM_OP_FWD, AP_SIM_OP_RECOMPUTE, AP_SIM_OP_BWD,
    AP_SIM_OP_HEAD_FWD, AP_SIM_OP_HEAD_BWD, /* final norm, LM head and loss */
    AP_SIM_OP_GRAD_REDUCE,   /* data-parallel gradient all-reduce / reduce-scatter */
    AP_SIM_OP_OFFLOAD,       /* gradients to host, updated parameters back */
    AP_SIM_OP_OPTIMIZER,
    AP_SIM_OP_ZERO_GRAD,     /* torch-style trainers drop .grad after the step */
    AP_SIM_NOPS
} ap_sim_op_type;

#define AP_SIM_LAYER_NONE (-1)
#define AP_SIM_LAYER_EMBED (-2) /* the embedding block; the head uses layer = L */

typedef struct ap_sim_op {
    int16_t type;            /* ap_sim_op_type */
    int16_t chunk;           /* local model chunk (0..vp-1), -1 for none */
    int32_t layer;           /* global layer, AP_SIM_LAYER_EMBED, L (head) or AP_SIM_LAYER_NONE */
    int32_t mb;              /* micro-batch, -1 for none */
    int32_t ev_begin, ev_end;/* its events: [ev_begin, ev_end) */
} ap_sim_op;

typedef struct ap_sim_tensor {
    int64_t bytes;           /* requested size */
    int64_t addr;            /* simulated address after replay (arena: offset) */
    int32_t layer;           /* as in ap_sim_op */
    int32_t mb;              /* micro-batch, -1 for model states */
    int32_t alloc_ev, free_ev; /* event indices; free_ev = -1 while never freed */
    int16_t kind;            /* ap_sim_kind */
    int8_t cat;              /* ap_sim_category */
    int8_t is_grad;          /* gradient of the activation `kind` (backward temporary) */
    int8_t persistent;       /* allocated by the SETUP op */
    int8_t pad[3];
} ap_sim_tensor;

typedef struct ap_sim_event {
    int32_t tensor;
    int32_t op;
    int32_t is_free;
} ap_sim_event;

/* Points of a rank's summary curve (ap_sim_rank.curve_allocated). */
#define AP_SIM_CURVE_POINTS 256

typedef struct ap_sim ap_sim;

/* Called by ap_sim_run after each pipeline rank is replayed, in rank order, with the rank's
 * events and curves still held (a streamed run, ap_sim_opts.stream, holds none: its operations
 * went to op_done); a status other than AP_OK (err set) stops the run. */
typedef ap_status (*ap_sim_rank_fn)(void *ctx, const ap_sim *s, int rank, ap_err *err);

/* An operation's memory as it closes, in a streamed run: the event of its allocated peak (-1
 * for an operation without events) and there the live bytes per category, the allocated
 * (live requested) and the allocator's reserved bytes; the same after its last event. They
 * are what a recorded run keeps per operation (op_peak_event, op_peak_cat, op_end_cat) and
 * its curves hold at those two events. */
typedef struct ap_sim_op_state {
    int32_t peak_event;
    int64_t peak_cat[AP_SIM_NCAT], end_cat[AP_SIM_NCAT];
    int64_t peak_allocated, peak_reserved, end_allocated, end_reserved;
} ap_sim_op_state;

/* Called in a streamed run for each operation of rank `rank` as it closes, in order (before
 * that rank's rank_done); a status other than AP_OK (err set) stops the run. */
typedef ap_status (*ap_sim_op_fn)(void *ctx, const ap_sim *s, int rank, const ap_sim_op *op,
                                  const ap_sim_op_state *st, ap_err *err);

typedef struct ap_sim_rank {
    int stage;               /* pipeline rank 0..pp-1 */
    int layers;              /* transformer layers on this rank (all chunks) */
    int nops, ntensors, nevents;
    const ap_sim_op *ops;
    const ap_sim_tensor *tensors;   /* each tensor's alloc_ev/free_ev place it in time */
    /* The rest of the per-event data is kept only with opts.record_curves (NULL otherwise):
       the events in order, and after each event the live requested bytes and the allocator's
       reserved bytes. */
    const ap_sim_event *events;
    const int64_t *allocated_curve;
    const int64_t *reserved_curve;
    /* per operation: the event where its allocated bytes are highest (-1 for an op without
       events) and the live bytes per category there and after its last event (AP_SIM_NCAT
       values per op each) */
    const int32_t *op_peak_event;
    const int64_t *op_peak_cat;
    const int64_t *op_end_cat;
    int64_t baseline_bytes;        /* live after SETUP: persistent model states */
    int64_t end_bytes;             /* live after the last op */
    int64_t allocated_peak_bytes;  /* max of allocated_curve */
    int64_t reserved_peak_bytes;   /* max of reserved_curve */
    int64_t device_peak_bytes;     /* reserved peak + device overhead */
    int peak_event;                /* first event reaching allocated_peak_bytes */
    int peak_op;
    int64_t peak_cat_bytes[AP_SIM_NCAT]; /* live per category at the allocated peak */
    const int32_t *live_at_peak;   /* tensor ids live at the allocated peak, largest first */
    int nlive_at_peak;
    int inflight_at_peak;          /* micro-batches with saved activations live at the peak */
    int over_event;                /* first event where device bytes exceed the budget, -1 */
    int over_op;
    double fragmentation;          /* 1 - allocated/reserved at the reserved peak */
    ap_alloc_stats alloc;          /* allocator counters at the end */
    /* at over_event (when >= 0): live bytes per category, micro-batches with saved activations,
       and the live logits (logits, fp32 logits, log-probs) */
    int64_t over_cat_bytes[AP_SIM_NCAT];
    int over_inflight;
    int64_t over_logits_bytes;
    /* with record_curves: the curves in curve_points points (at most AP_SIM_CURVE_POINTS; 0
       without curves), point k the maximum over events [k n / points, (k + 1) n / points) of
       the n events, so the peak is in it; kept when the per-event arrays are released */
    int curve_points;
    int64_t curve_allocated[AP_SIM_CURVE_POINTS];
    int64_t curve_reserved[AP_SIM_CURVE_POINTS];
} ap_sim_rank;

typedef struct ap_sim_opts {
    ap_alloc_mode allocator;
    int expandable_segments;
    double capacity_bytes;         /* device memory; 0 = the cluster GPU's (unlimited if none) */
    double headroom_bytes;         /* budget = capacity - headroom; default 2 GiB */
    double device_overhead_bytes;  /* < 0 = ap_mem_device_overhead_bytes(plan, 0): NCCL 2.22 or
                                      later */
    int record_curves;             /* keep events and per-event curves (trace, tests);
                                      default 1; the search leaves it 0 (faster) */
    ap_sim_rank_fn rank_done;      /* NULL: none */
    void *rank_ctx;
    /* 1: once a rank is done (after rank_done), free its per-event arrays (events, curves,
       per-op peaks: NULL after) and keep only the tensors live at its peak (tensors then holds
       those, live_at_peak[i] = i). The summaries stay; memory holds one rank's events at a
       time, whatever the pipeline depth. Default 0 */
    int release_events;
    /* 1: hold no rank's events at all. Each rank is generated twice: a first pass counts its
       events and finds its allocated peak; the replay then builds the summary curve as it
       goes, takes the live sets at the peak and at the first event over the budget when they
       happen, and hands each operation to op_done (with rank_ctx) as it closes, reusing the
       slots of freed tensors. The rank ends as with release_events (tensors: those live at its
       peak), and ops holds only the operations its summary names (peak_op and over_op index
       it); nops still counts them all. Memory grows with the tensors live at once and the
       micro-batches in flight, not with the events. The summaries, the JSON and a trace
       written from op_done and rank_done are those of a recorded run, byte for byte.
       Default 0 */
    int stream;
    ap_sim_op_fn op_done;          /* streamed runs; NULL: none */
    /* 1: every rank but the worst (ap_sim_worst_rank's: the highest device peak, the lowest
       stage among equals) ends as with release_events, as soon as another rank's peak is at
       least as high; the worst keeps its events and curves. Memory holds the events of the
       ranks in flight and of the worst so far. Default 0 */
    int keep_worst;
    /* Ranks replayed at once, each on a thread of its own (they share nothing); 0 = one per
       online core. Ranks run one after another, in order, where rank_done or op_done is set
       (they are called in rank order). Results do not depend on it, bit for bit. Default 1 */
    int threads;
    /* 1: no allocator model: the ranks' reserved figures (curves, peaks, budget, allocator
       statistics) are 0, while their events and live bytes are those of a run with it, for
       callers that read live bytes alone (ap_sim_periods; the heterogeneous simulators'
       operator templates). Default 0 */
    int no_allocator;
} ap_sim_opts;

void ap_sim_opts_init(ap_sim_opts *o);

/* Simulate one training iteration (steady state: optimizer states exist) of plan p on every
 * pipeline rank. Ranks of one tp/cp group are identical in this model (even splits), so one
 * rank per pipeline stage is simulated. `c` may be NULL (no capacity check unless
 * opts->capacity_bytes is set). Returns AP_ERR_INPUT / AP_ERR_INFEASIBLE with err naming the
 * reason for plans the schedule cannot run (interleaving with micro-batches not a multiple of
 * pp). Caller frees *out with ap_sim_free. */
ap_status ap_sim_run(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                     const ap_sim_opts *opts, ap_sim **out, ap_err *err);
void ap_sim_free(ap_sim *s);

int ap_sim_nranks(const ap_sim *s);
const ap_sim_rank *ap_sim_rank_at(const ap_sim *s, int i);
/* Index of the rank with the highest device peak. */
int ap_sim_worst_rank(const ap_sim *s);
double ap_sim_capacity_bytes(const ap_sim *s);
double ap_sim_budget_bytes(const ap_sim *s);   /* capacity - headroom (0 = unlimited) */
double ap_sim_overhead_bytes(const ap_sim *s); /* device overhead added to reserved */
const ap_plan *ap_sim_plan(const ap_sim *s);
const ap_model *ap_sim_model(const ap_sim *s);
const ap_sim_opts *ap_sim_options(const ap_sim *s);

/* One forward or backward pass of a model chunk in a pipeline rank's schedule. */
typedef struct ap_sim_pass {
    int fwd;   /* 1 forward, 0 backward */
    int chunk; /* local model chunk 0..vp-1 */
    int mb;    /* micro-batch */
} ap_sim_pass;

/* The passes of pipeline rank `stage` (0..pp-1) for m micro-batches per step in order: Megatron's
 * 1F1B, interleaved for vp > 1 (sim/schedule.c). items holds 2 * m * vp entries; returns the
 * count. The simulator and the runtime (runtime/run.c) both run this order. */
int ap_sim_schedule(int pp, int vp, int64_t m, int stage, ap_sim_pass *items);

/* Runtime trainer (sim/simrt.c): the host-pool peak of pipeline stage `stage` (offloaded AdamW
 * states and the copies of the largest unit's share during its update), which the simulator's
 * device categories do not hold. */
int64_t ap_sim_runtime_host_bytes(const ap_model *m, const ap_plan *p, int stage);

const char *ap_sim_category_name(int cat);  /* "params", "grads", "optimizer", ... */
const char *ap_sim_kind_name(int kind);     /* "qkv", "fc1_out", ... */
const char *ap_sim_op_name(int type);       /* "forward", "backward", ... */
/* "backward of layer 37, micro-batch 3, stage 0" into buf. */
char *ap_sim_op_describe(const ap_sim *s, const ap_sim_rank *r, int op, char *buf, size_t n);
/* The same for an operation of pipeline rank `stage` given itself (a streamed run's op_done). */
char *ap_sim_op_describe_op(const ap_sim *s, int stage, const ap_sim_op *op, char *buf,
                            size_t n);
/* "activation qkv of layer 37, micro-batch 3" / "grad of fc1_out ..." into buf. */
char *ap_sim_tensor_describe(const ap_sim_tensor *t, int64_t L, char *buf, size_t n);

/* JSON report: peak_bytes (device, worst rank), allocated_peak_bytes, reserved_peak_bytes,
 * fits, stages[] with their peaks, breakdown and live set at the peak, and (when curves were
 * recorded) "curve": allocated, reserved and device bytes in at most 256 points, each the
 * maximum over its run of events. Caller frees. NULL on allocation failure. `max_live` bounds
 * the live tensors listed per stage. */
ap_json *ap_sim_to_json(const ap_sim *s, int max_live);

/* The most events ap_sim_run replays in one simulation, all pipeline ranks together (about
 * 27 bytes each with the curves recorded: 1 GB); larger runs are refused with AP_ERR_INPUT. */
#define AP_SIM_MAX_EVENTS 3.0e7

/* ---- trace (sim/trace.c) ------------------------------------------------------------ */

/* One trace event {name, ph, ts (us), pid, tid} appended to the traceEvents array `arr`; returns
 * it (owned by arr) to add args to, NULL on allocation failure. The runtime's trace
 * (runtime/trace.c) builds its Chrome trace with it: the same event fields the simulator's
 * streamed trace writes, with measured time. */
ap_json *ap_trace_event(ap_json *arr, const char *name, const char *ph, double ts, int pid,
                        int tid);

/* Receives the trace text in pieces, in order (data is valid during the call only); a status
 * other than AP_OK (with err set) stops the trace. */
typedef ap_status (*ap_sim_trace_sink)(void *ctx, const char *data, size_t len, ap_err *err);

/* The Chrome trace event JSON (chrome://tracing, ui.perfetto.dev), streamed to sink: one
 * process per pipeline rank, a counter track per category plus allocated and reserved, a slice
 * per operation. Time stamps are the logical event clock (1 us per event). The text is what
 * ap_json_print writes for the same events, handed out in chunks of about 1 MiB, so memory does
 * not grow with the trace. Needs curves (record_curves; AP_ERR_INPUT otherwise); AP_ERR_NOMEM,
 * or the sink's status. */
ap_status ap_sim_trace_stream(const ap_sim *s, ap_sim_trace_sink sink, void *ctx, ap_err *err);

/* ap_sim_trace_stream into the file at path: it appears whole or not at all (ap_file_out);
 * errors name the path. */
ap_status ap_sim_trace_write(const ap_sim *s, const char *path, ap_err *err);

/* The same trace written while the simulation runs, one rank at a time, so that with
 * ap_sim_opts.release_events memory holds one rank's events whatever the pipeline depth, and
 * with ap_sim_opts.stream one operation at a time, whatever the number of events: open a
 * tracer, run the simulation with the tracer attached (ap_sim_tracer_attach: rank_done =
 * ap_sim_tracer_rank, op_done = ap_sim_tracer_op, rank_ctx = the tracer), then finish it (or
 * abort it when the run failed). The text is ap_sim_trace_stream's byte for byte. path: the trace goes to that file, whole or not at all (errors name it);
 * NULL: to sink. Once a call fails the tracer stays failed; finish then returns that error and
 * writes nothing. finish and abort free the tracer. */
typedef struct ap_sim_tracer ap_sim_tracer;
ap_status ap_sim_tracer_open(const char *path, ap_sim_trace_sink sink, void *ctx,
                             ap_sim_tracer **out, ap_err *err);
ap_status ap_sim_tracer_rank(void *tracer, const ap_sim *s, int rank, ap_err *err);
/* A streamed run's operations (ap_sim_opts.stream, op_done) through the tracer. */
ap_status ap_sim_tracer_op(void *tracer, const ap_sim *s, int rank, const ap_sim_op *op,
                           const ap_sim_op_state *st, ap_err *err);
/* Set o's callbacks to write the trace through tr: rank_done (and with o->stream, op_done),
 * rank_ctx. */
void ap_sim_tracer_attach(ap_sim_tracer *tr, ap_sim_opts *o);
ap_status ap_sim_tracer_finish(ap_sim_tracer *tr, ap_err *err);
void ap_sim_tracer_abort(ap_sim_tracer *tr);


#endif
