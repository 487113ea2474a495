/*
 * report.h - strategy comparison reports (output/report.c, driven by cli/cmd_compare.c).
 *
 * An ap_report holds what `autoplan compare` compared: a list of strategies (the search's top
 * plans and named baselines: DDP, ZeRO-3, ZeRO-2 + CPU offload, Megatron-style, no pipeline),
 * each either an estimate (fitting or not) or the rule that makes it illegal, and the feasible
 * plans of a bounded enumeration of the search space as compact rows (for the memory/throughput
 * scatter and plans.csv). The renderers turn it into report.html (self-contained, inline SVG),
 * report.md and plans.csv. Every number they print is formatted from an ap_estimate field that
 * `autoplan estimate --json` prints under the same name (output/estjson.c), or derived from
 * such fields in a way the report states (the overshoot: device peak + headroom - capacity).
 *
 * With a GPU-count sweep (ap_report_sweep) the report also holds the best plan per count, the
 * one `autoplan plan --gpus N` returns, for the tokens/s and time-to-train chart; and for the
 * best compared plan one simulated iteration (ap_report_simulate, sim.h) for the
 * memory-over-time chart, whose numbers are `autoplan simulate --json` fields.
 */
#ifndef AP_REPORT_H
#define AP_REPORT_H

#include "autoplan/search.h"
#include "autoplan/sim.h"

typedef enum {
    AP_REPORT_OK = 0,   /* estimated and fits */
    AP_REPORT_NOFIT,    /* estimated (the closest legal plan), does not fit */
    AP_REPORT_ILLEGAL   /* no legal plan: `reason` names the rule */
} ap_report_status;

typedef struct ap_report_strategy {
    char name[48];          /* "top1", "ddp", "zero3", "tp=2,pp=4" */
    char desc[192];         /* how the plan was chosen, one sentence */
    char note[192];         /* e.g. "evaluated with deepspeed: megatron cannot ..."; "" = none */
    char reason[512];       /* AP_REPORT_ILLEGAL: why */
    char estimate_args[1024]; /* arguments of `autoplan estimate` that reproduce `est` */
    ap_report_status status;
    ap_estimate est;        /* valid unless AP_REPORT_ILLEGAL */
} ap_report_strategy;

/* One evaluated feasible plan: the scalar fields of `estimate --json` (no per-stage arrays). */
typedef struct ap_report_row {
    /* plan */
    int trainer, tp, pp, dp, cp, ep, etp, vp, zero, recompute, recompute_layers, sp, overlap,
        dtype, flash_attn;
    int64_t mbs, gbs, grad_accum, seq;
    double offload_optimizer, offload_params; /* fractions */
    /* time, seconds */
    double step_s, compute_s, recompute_s, tp_comm_s, cp_comm_s, ep_comm_s, pp_comm_s, dp_comm_s,
        bubble_s, offload_s, optimizer_s, overhead_s;
    /* throughput */
    double tokens_per_s, model_tflops_per_gpu, hw_tflops_per_gpu, mfu, hfu;
    /* memory of the worst stage, bytes */
    double peak_bytes, capacity_bytes, headroom_bytes, params_bytes, grads_bytes, optimizer_bytes,
        activations_bytes, other_bytes, allocated_peak_bytes, reserved_peak_bytes,
        device_peak_bytes, smi_peak_bytes, host_bytes_per_node, host_capacity_bytes;
    int fits, worst_stage, host_fits;
    int64_t met;      /* the enumeration's order among the feasible plans (ties sort by it) */
} ap_report_row;

/* One GPU count of a sweep: the best plan `autoplan plan --gpus <gpus>` returns (ap_search's top
 * plan, ranked with the re-split), when one fits. */
typedef struct ap_report_sweep_point {
    int gpus;
    int fits;              /* 1: a plan fits; the fields below describe it */
    char label[160];       /* ap_plan_label of the plan */
    double step_s, tokens_per_s, mfu, device_peak_bytes, capacity_bytes; /* estimate fields */
    double time_to_train_s; /* train_tokens / tokens_per_s, as `plan --tokens`; 0 without */
} ap_report_sweep_point;

typedef struct ap_report {
    const ap_model *model;     /* borrowed; must outlive the report */
    const ap_cluster *cluster; /* borrowed */
    const char *model_arg;     /* MODEL as the user gave it (for the estimate commands) */
    int64_t gbs;               /* global batch, sequences */
    int64_t seq;               /* tokens per sequence */
    int trainer;               /* the trainer asked for */
    ap_report_strategy *strat; /* nstrat entries, owned (ap_report_free) */
    int nstrat;
    int best;                  /* the best fitting strategy, ranked as `plan` ranks (search.h
                                  "Ties"), -1 when none fits */
    ap_report_row *rows;       /* feasible plans, ascending step time; owned */
    int64_t nrows;
    int64_t evaluated;         /* plans estimated by the enumeration */
    int64_t fit;               /* of those, fitting (>= nrows when rows were capped) */
    int eval_capped;           /* the enumeration stopped at its evaluation bound */
    /* GPU-count sweep (ap_report_sweep); nsweep = 0: none asked */
    ap_report_sweep_point *sweep; /* nsweep entries in the order asked, owned */
    int nsweep;
    double train_tokens;       /* tokens to train for the time-to-train, 0 = not given */
    /* one simulated iteration of strat[best] (ap_report_simulate); NULL: sim_note says why */
    ap_sim *sim;               /* owned (ap_report_free) */
    char sim_note[512];
    int threads;               /* worker threads for plans.csv; 0 = one per online core. The
                                  text does not depend on it. */
} ap_report;

/* Bounds of the enumeration behind the scatter and plans.csv. */
#define AP_REPORT_MAX_ROWS 100000   /* plans.csv rows: the fastest feasible plans */
#define AP_REPORT_MAX_EVALS 2000000 /* estimates made before the enumeration stops */
#define AP_REPORT_MAX_POINTS 2000   /* sampled non-Pareto points in the scatter */
#define AP_REPORT_MAX_THREADS 256   /* threads on the rows (their gather, plans.csv) */

/* Visit every legal plan of the space ap_search enumerates for `so` (pinned fields as in
 * ap_search_opts), with its estimate, fitting or not; `e` is valid during the call only. This
 * is ap_search itself, unpruned, with a visitor. Stops after max_evals estimates
 * (*capped = 1). *evaluated counts the estimates made. */
ap_status ap_report_each_plan(const ap_model *m, const ap_cluster *c, const ap_search_opts *so,
                              int64_t max_evals, void (*visit)(void *ctx, const ap_estimate *e),
                              void *ctx, int64_t *evaluated, int *capped, ap_err *err);

/* Enumerate the plans ap_search considers for `so` (ap_report_each_plan), estimate each, and
 * keep the feasible ones in r->rows (the AP_REPORT_MAX_ROWS fastest, sorted by step time),
 * setting r->evaluated, r->fit and r->eval_capped. r->rows is replaced. */
ap_status ap_report_enumerate(const ap_model *m, const ap_cluster *c, const ap_search_opts *so,
                              ap_report *r, ap_err *err);

/* ap_report_enumerate, ranking on the same walk: *ranked (unless NULL) gets ap_search's
 * answer for `so` with top_k and the re-split `resplit` (the caller frees it with
 * ap_search_result_free), computed without the memory pruning. Where a plan fits and the walk
 * was not capped (r->eval_capped), its ranking is the pruned search's; its closest plan
 * (nothing fits) may differ, since every non-fitting plan was estimated. */
ap_status ap_report_enumerate_ranked(const ap_model *m, const ap_cluster *c,
                                     const ap_search_opts *so, int top_k, int resplit,
                                     ap_report *r, ap_search_result *ranked, ap_err *err);

/* Fill a row from an estimate. */
void ap_report_row_from_estimate(const ap_estimate *e, ap_report_row *row);

/* Index of the best fitting strategy, -1 if none fits: as `plan` ranks (search.h "Ties"), the
 * simplest of those within the validated time error of the fastest, the faster when equal. */
int ap_report_pick_best(const ap_report *r);

/* Renderers: a malloc'd NUL-terminated document in *out (caller frees), *len its length.
 * AP_ERR_NOMEM when building it fails. */
ap_status ap_report_html(const ap_report *r, char **out, size_t *len, ap_err *err);
ap_status ap_report_markdown(const ap_report *r, char **out, size_t *len, ap_err *err);
ap_status ap_report_csv(const ap_report *r, char **out, size_t *len, ap_err *err);

/* plans.csv in pieces, in order, to sink (a failure there stops the writing and is returned):
 * formatted on r->threads threads (0: every core), handed to sink on the calling thread while
 * later pieces are formatted (output/report_csv.c). The same bytes as ap_report_csv, whatever
 * the thread count. */
typedef ap_status (*ap_report_csv_sink)(void *ctx, const void *data, size_t len, ap_err *err);
ap_status ap_report_csv_write(const ap_report *r, ap_report_csv_sink sink, void *ctx,
                              ap_err *err);
/* ap_report_csv_write on a thread of its own, so the rest of the report is built beside it:
 * r->rows, r->nrows and r->threads must not change until ap_report_csv_finish, which waits for
 * the writing and returns its status (with cancel: stops it at its next piece, AP_OK). Where
 * the thread cannot start, ap_report_csv_finish writes on the calling thread. */
typedef struct ap_report_csv_job ap_report_csv_job;
ap_status ap_report_csv_start(const ap_report *r, ap_report_csv_sink sink, void *ctx,
                              ap_report_csv_job **job, ap_err *err);
ap_status ap_report_csv_finish(ap_report_csv_job *job, int cancel, ap_err *err);

/* The best plan at each of the n GPU counts, clusters[i] being the cluster `autoplan plan
 * --gpus <count>` builds for count i (same flags): ap_search with `so` (top_k as plan's
 * default) re-splitting with `solver` unless solver < 0 (search.h resplit), so each point is plan's
 * answer. train_tokens > 0 adds the time to train. Replaces r->sweep. A count where nothing
 * fits is a point with fits = 0. */
ap_status ap_report_sweep(const ap_model *m, const ap_cluster *clusters, int n,
                          const ap_search_opts *so, int solver, double train_tokens,
                          ap_report *r, ap_err *err);

/* Simulate one iteration of r->strat[r->best]'s plan on r->model / r->cluster with curves
 * recorded (`o` NULL: the defaults of `autoplan simulate`, headroom from the plan's estimate),
 * into r->sim. When no strategy fits or the simulator refuses the plan, r->sim stays NULL,
 * r->sim_note says why, and the call returns AP_OK; AP_ERR_NOMEM only for memory. */
ap_status ap_report_simulate(ap_report *r, const ap_sim_opts *o, ap_err *err);

/* Free what the report owns (strategies, rows, sweep, simulation); the borrowed pointers are
 * untouched. */
void ap_report_free(ap_report *r);


#endif
