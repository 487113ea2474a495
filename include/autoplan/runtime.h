/*
 * runtime.h - the plan executor (runtime/, docs/runtime.md): a GPT-style decoder trained for
 * real with exactly the tensor, pipeline and data parallelism, ZeRO stage, recomputation and
 * optimizer offload a plan names, one process per rank, fp32 on the CPU (BLAS) or on a GPU
 * (cuBLAS, where built), and every byte it holds counted per category so the run can be put
 * against the simulator's prediction for the same plan.
 *
 * Pieces:
 *   - ap_rt_check: can the runtime execute this (model, plan)? One line naming the first thing
 *     it cannot run; nothing starts before it passes.
 *   - ap_rt_job: what to run (model, plan, steps, seed, optimizer, what to record), as JSON for
 *     the ranks (`autoplan run` writes it to rank 0, which broadcasts it).
 *   - ap_rt_comm / ap_rt_session: a rank. The world communicator is Open MPI's
 *     (runtime/comm_mpi.c, the only file that includes mpi.h, linked into the `autoplan-rank`
 *     worker) or a single process (ap_rt_comm_self, used by tests and the double-precision
 *     build). A session holds the rank's share of the model and trains it.
 *   - ap_rt_report: what was measured on every rank (loss per step, memory per category, peak,
 *     time per phase, the timeline) as rank 0 gathers it, and its JSON.
 *   - ap_rt_predict: the prediction for the same plan from the plan alone (simulator for memory,
 *     cost model with measured host figures for time).
 *
 * Units: bytes, seconds, FLOP/s. Element type: fp32 (a test-only library is built with
 * -DAP_RT_DOUBLE for the finite-difference gradient check).
 */
#ifndef AP_RUNTIME_H
#define AP_RUNTIME_H

#include "autoplan/json.h"
#include "autoplan/plan.h"

/* ---- memory categories ---------------------------------------------------------------------- */

typedef enum {
    AP_RT_CAT_PARAMS = 0,   /* weights (a ZeRO-3 shard; gathered copies are temporaries) */
    AP_RT_CAT_GRADS,        /* gradient buffers (full, or the reduced ZeRO-2/3 shard) */
    AP_RT_CAT_OPTIMIZER,    /* AdamW m and v kept on the device */
    AP_RT_CAT_ACTIVATIONS,  /* tensors saved for backward, tokens, targets, probabilities */
    AP_RT_CAT_TEMPS,        /* transient: gradients of activations, gathered weights, scores */
    AP_RT_CAT_COMM,         /* communication buffers: collective workspace, p2p send pool */
    AP_RT_NCAT
} ap_rt_category;

/* "params", "grads", "optimizer", "activations", "temporaries", "comm", and "host" for
 * AP_RT_NCAT, the host pool (static). */
const char *ap_rt_category_name(int cat);

/* ---- what the runtime can run ------------------------------------------------------------- */

/* The runtime runs dense decoders: RMSNorm or LayerNorm, rotary or learned positions, MHA/GQA,
 * GELU or SwiGLU MLP, biases or not, tied or untied LM head; tp (Megatron column/row split,
 * with or without sequence parallelism), pp (1F1B, interleaved with vp > 1, uneven
 * stage_layers), dp with ZeRO 0-3, recompute none/selective/full (K layers per chunk),
 * optimizer offload fractions. Anything else (context or expert parallelism, MoE, MLA,
 * parallel attention, ALiBi, parameter offload, 16-bit or fp8 compute, degrees that do not
 * divide the heads, kv heads, FFN, vocabulary or tokens) is refused with one line in err,
 * AP_ERR_INPUT. The plan must already be complete (dp and grad_accum filled in). */
ap_status ap_rt_check(const ap_model *m, const ap_plan *p, ap_err *err);

/* ---- a job ---------------------------------------------------------------------------------- */

typedef struct ap_rt_optim {
    double lr;           /* AdamW learning rate (constant) */
    double beta1, beta2; /* moment decay rates */
    double eps;          /* denominator term */
    double weight_decay; /* decoupled (Loshchilov & Hutter 2019) */
} ap_rt_optim;

typedef struct ap_rt_job {
    ap_model model;
    ap_plan plan;          /* trainer AP_TRAINER_RUNTIME, dtype fp32 */
    int steps;             /* optimizer steps, >= 1 */
    uint64_t seed;         /* parameter init and synthetic data */
    ap_rt_optim optim;
    char backend[8];       /* "cpu" (OpenBLAS) or "cuda" (cuBLAS + NCCL, one rank per GPU) */
    int bench;             /* measure host figures (GEMM, memory, p2p) before training */
    int trace;             /* keep the timeline of the last step (ops and category counters) */
    int record_events;     /* keep every allocation and free of the setup and the last step */
    char save_path[1024];  /* "" or a file rank 0 writes the final parameters to (see below) */
    int fail_rank;         /* fault injection for tests: this rank fails its fail_alloc-th */
    int64_t fail_alloc;    /* tracked allocation (0 = never) */
} ap_rt_job;

/* Defaults: 5 steps, seed 1234, AdamW lr 1e-3, betas 0.9/0.95, eps 1e-5, weight decay 0.1
 * (Llama 2's settings, Touvron et al. 2023 Sec. 2.2, with a larger learning rate for short
 * runs), nothing recorded, no fault. */
void ap_rt_job_init(ap_rt_job *j);

/* JSON of a job: {"plan": <plan.json tree>, "steps", "seed", "optim": {...}, "bench", "trace",
 * "record_events", "save_path", "fail_rank", "fail_alloc"}. Caller frees. NULL on OOM. */
ap_json *ap_rt_job_to_json(const ap_rt_job *j);
/* Decode and validate (the plan is checked with ap_rt_check). `where` names the source. */
ap_status ap_rt_job_from_json(const ap_json *root, const char *where, ap_rt_job *out,
                              ap_err *err);

/* ---- measurements --------------------------------------------------------------------------- */

typedef struct ap_rt_op_record {  /* one operation of the last step's timeline */
    int16_t type;                 /* ap_sim_op_type (sim.h): forward, backward, ... */
    int16_t chunk;
    int32_t layer, mb;
    double begin_s, end_s;        /* seconds since the step began */
    double peak_s;                /* when its live bytes were highest */
    int64_t peak_cat[AP_RT_NCAT]; /* live bytes per category at the op's own peak */
    int64_t end_cat[AP_RT_NCAT];  /* and after its last allocation or free */
} ap_rt_op_record;

typedef struct ap_rt_event {      /* one tracked allocation or free (record_events) */
    int64_t bytes;
    int32_t kind;                 /* ap_sim_kind (sim.h) of the tensor */
    int32_t layer, mb;
    int8_t cat;                   /* ap_rt_category, or AP_RT_NCAT for the host pool */
    int8_t is_free;
    int8_t persistent;            /* allocated while setting up (model and optimizer states) */
    int8_t pad;
} ap_rt_event;

typedef struct ap_rt_phase_times { /* seconds per step, mean over the measured steps */
    double forward_s;              /* forward compute (incl. the loss) */
    double backward_s;             /* backward compute (incl. recomputation) */
    double comm_s;                 /* inside communication calls: tp, pp (incl. waiting), dp */
    double optimizer_s;            /* AdamW, offload copies, parameter all-gather */
    double step_s;                 /* wall time of the whole step */
} ap_rt_phase_times;

typedef struct ap_rt_rank_report {
    int rank, stage, tp_rank, dp_rank;
    int64_t peak_bytes;                  /* allocated peak over the run (device categories) */
    int64_t peak_cat_bytes[AP_RT_NCAT];  /* live per category at that peak */
    int64_t cat_peak_bytes[AP_RT_NCAT];  /* each category's own maximum */
    int64_t host_peak_bytes;             /* the host pool (offloaded optimizer states) */
    int64_t rss_peak_bytes;              /* the process's peak resident set (getrusage) */
    int64_t d2h_bytes, h2d_bytes;        /* counted offload copies, per step */
    ap_rt_phase_times time;
    int nops;
    ap_rt_op_record *ops;                /* trace: the last step's operations */
    int nevents;
    ap_rt_event *events;                 /* record_events */
} ap_rt_rank_report;

typedef struct ap_rt_host_figures {  /* measured by the ranks before training (job.bench) */
    int measured;
    double gemm_flops_per_s;      /* large square GEMM, one rank */
    double gemm_half_flops;       /* GEMM size (FLOPs) at half of that rate (two-point fit) */
    double attn_flops_per_s;      /* the attention score GEMM shape of the plan (s x d x s) */
    double mem_bytes_per_s;       /* streaming copy, bytes read + written per second */
    double p2p_latency_s;         /* half round trip of an 8-byte message, ranks 0 and 1 */
    double p2p_bytes_per_s;       /* one-way bandwidth of a 4 MiB message, ranks 0 and 1 */
} ap_rt_host_figures;

typedef struct ap_rt_report {
    char backend[16];             /* "cpu" or "cuda" */
    char host[128];               /* rank 0's host name */
    int steps;
    double *loss;                 /* steps values: mean cross-entropy over the global batch */
    int nranks;
    ap_rt_rank_report *ranks;     /* by world rank */
    ap_rt_host_figures hostfig;
} ap_rt_report;

/* Free everything a report owns (not the struct). NULL-safe. */
void ap_rt_report_free(ap_rt_report *r);
/* JSON of a report (the worker's output): caller frees; NULL on OOM. */
ap_json *ap_rt_report_to_json(const ap_rt_report *r);
/* Decode the worker's JSON into *out (caller frees with ap_rt_report_free). */
ap_status ap_rt_report_from_json(const ap_json *root, const char *where, ap_rt_report *out,
                                 ap_err *err);

/* Chrome trace of a report's timelines (runtime/trace.c; the simulator's format with measured
 * time): caller frees; NULL on OOM. ap_rt_trace_write writes it atomically. */
ap_json *ap_rt_trace_json(const ap_rt_report *r);
ap_status ap_rt_trace_write(const ap_rt_report *r, const char *path, ap_err *err);

/* ---- ranks: communicator and session -------------------------------------------------------- */

typedef struct ap_rt_comm ap_rt_comm;

/* A world of one process (no MPI). Static; never freed. */
ap_rt_comm *ap_rt_comm_self(void);
int ap_rt_comm_rank(const ap_rt_comm *c);
int ap_rt_comm_size(const ap_rt_comm *c);

typedef struct ap_rt_session ap_rt_session;

/* 1 when this build has the CUDA backend and a GPU is visible; else 0 with err saying why. */
int ap_rt_cuda_available(ap_err *err);

/* Build this rank's share of the job (collective over `world`, whose size must equal
 * tp*pp*dp): communicators, parameters initialised from the seed exactly as a single rank
 * would, optimizer states, buffers. AP_ERR_NOMEM (naming the tensor) when an allocation fails;
 * AP_ERR_INPUT when the plan does not match the world. Caller frees with
 * ap_rt_session_free. */
ap_status ap_rt_session_new(const ap_rt_job *job, ap_rt_comm *world, ap_rt_session **out,
                            ap_err *err);
void ap_rt_session_free(ap_rt_session *s);

/* Measure the host figures (collective). */
ap_status ap_rt_session_bench(ap_rt_session *s, ap_err *err);

/* One training step over the global batch of step `step` (0-based): forward and backward of
 * every micro-batch in the plan's schedule, gradient reduction, AdamW. *loss (may be NULL) gets
 * the step's mean loss on world rank 0 (0 elsewhere). Collective. */
ap_status ap_rt_session_step(ap_rt_session *s, int step, double *loss, ap_err *err);

/* All job.steps steps, then gather the report on world rank 0 (*out filled there; elsewhere
 * zeroed). Caller frees with ap_rt_report_free. Collective. */
ap_status ap_rt_session_train(ap_rt_session *s, ap_rt_report *out, ap_err *err);

/* Forward and backward of the global batch of step `step` without the optimizer: *loss on
 * world rank 0; gradients stay in the session (ap_rt_session_grad). For the gradient checks. */
ap_status ap_rt_session_loss_grad(ap_rt_session *s, int step, double *loss, ap_err *err);

/* ---- parameters in the canonical layout ----------------------------------------------------
 * The model's parameters as one flat list of named global tensors, independent of the
 * sharding: embedding (wte, wpe), then each layer (wq, wk, wv, [bq, bk, bv], wo, [bo], ln1_w,
 * [ln1_b], w_gate/w_up or w_fc, [biases], w2, [b2], ln2_w, [ln2_b]), then the head (lnf_w,
 * [lnf_b], lm_head when untied). */
typedef struct ap_rt_tensor_info {
    char name[40];                /* "layers.3.wq" */
    int64_t rows, cols;           /* global shape */
    int64_t offset;               /* in the canonical flat vector, elements */
} ap_rt_tensor_info;

/* Number of canonical tensors and their total elements for model m. */
int ap_rt_tensor_count(const ap_model *m);
int64_t ap_rt_param_count(const ap_model *m);
/* Tensor i (0 <= i < ap_rt_tensor_count). */
void ap_rt_tensor_at(const ap_model *m, int i, ap_rt_tensor_info *out);

/* Gather all parameters (or their accumulated gradients, which = 1) into `out` (ap_rt_param_count
 * doubles) on world rank 0 (others pass NULL). Collective. */
ap_status ap_rt_session_gather(ap_rt_session *s, int which, double *out, ap_err *err);
/* Set one canonical parameter element (every rank holding it updates its copy). For the
 * finite-difference check: single rank only. */
ap_status ap_rt_session_set_param(ap_rt_session *s, int64_t index, double value, ap_err *err);

/* Write the canonical parameters (gathered on rank 0) to `path` atomically: one JSON line
 * {"format":"autoplan-params/1","dtype":"f32","tensors":[{"name","rows","cols","offset"}...]}
 * then the float32 values in canonical order, little endian. Collective. */
ap_status ap_rt_session_save(ap_rt_session *s, const char *path, ap_err *err);

/* ---- launching the ranks (runtime/launch.c) ------------------------------------------------- */

typedef struct ap_rt_launch_opts {
    int ranks;                 /* world size: tp * pp * dp */
    const char *rank_bin;      /* the autoplan-rank worker */
    const char *mpirun;        /* "mpirun" (searched in PATH) or a path */
    const char *hostfile;      /* NULL or mpirun's --hostfile */
    double timeout_s;          /* whole launch; 0 = none */
    const char *tag;           /* passed to the ranks (--tag) to find them in the process table */
    volatile int *cancel;      /* NULL, or set asynchronously (a signal) to stop the launch */
} ap_rt_launch_opts;

typedef struct ap_rt_launch_result {
    int exit_code;             /* of mpirun (or of the direct worker); 128+N for signal N */
    int timed_out, cancelled;
    int direct;                /* ran as one rank of an existing launch */
    int launch_rank;           /* that launch's rank (direct) */
    double elapsed_s;
    char *out;                 /* standard output (rank 0's report), NUL-terminated */
    size_t out_len;
    char *errtext;             /* standard error of the launch */
    size_t err_len;
} ap_rt_launch_result;

/* 1 when this process is one rank of an mpirun (Open MPI, MPICH/Hydra) or srun launch, with its
 * rank and the launch's size. */
int ap_rt_launched_rank(int *rank, int *size);
/* Run the ranks with `job` (ap_rt_job_to_json text) on rank 0's standard input; wait for them
 * within the timeout. AP_OK when the processes could be run (look at res->exit_code), AP_ERR_IO
 * when not, AP_ERR_INPUT when an existing launch has the wrong size. Caller frees res with
 * ap_rt_launch_result_free. */
ap_status ap_rt_launch(const ap_rt_launch_opts *o, const char *job, ap_rt_launch_result *res,
                       ap_err *err);
void ap_rt_launch_result_free(ap_rt_launch_result *r);
/* The report text between rank 0's marker lines in `out` (borrowed), or NULL. */
const char *ap_rt_result_text(const char *out, size_t *len);

/* ---- prediction ------------------------------------------------------------------------------ */

typedef struct ap_rt_stage_prediction {
    int64_t peak_bytes;                 /* allocated peak of the simulated rank */
    int64_t peak_cat_bytes[AP_RT_NCAT]; /* live per category at that peak */
    int64_t cat_peak_bytes[AP_RT_NCAT]; /* each category's own maximum */
    int64_t host_peak_bytes;            /* host pool peak */
    ap_rt_phase_times time;             /* per step */
} ap_rt_stage_prediction;

typedef struct ap_rt_prediction {
    int nstages;
    ap_rt_stage_prediction stages[AP_MAX_CHUNKS];
    int time_predicted;                 /* host figures were given */
} ap_rt_prediction;

/* The CPU cluster the runtime's plans are priced on: `ranks` processes of the catalog's "cpu"
 * device on one host, with the measured host figures in place of the catalog's when `h` is
 * measured. */
void ap_rt_cluster(int ranks, const ap_rt_host_figures *h, ap_cluster *out);

/* Predict memory per pipeline stage from the plan alone (the simulator's runtime layout, sim.h)
 * and, when h is measured, time per phase (the cost model, estimate.h, with the host figures as
 * the device's peak, bandwidths and latency). */
ap_status ap_rt_predict(const ap_model *m, const ap_plan *p, const ap_rt_host_figures *h,
                        ap_rt_prediction *out, ap_err *err);

#endif
