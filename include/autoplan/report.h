/*
 * report.h - strategy comparison reports (planner/report.c, driven by planner/cmd_compare.c).
 *
 * An ap_report holds what `autoplan compare` compared: a list of strategies (the search's top
 * plans and named baselines: DDP, ZeRO-3, ZeRO-2 + CPU offload, Megatron-style, no pipeline),
 * each either an estimate (fitting or not) or the rule that makes it illegal, and the feasible
 * plans of a bounded enumeration of the search space as compact rows (for the memory/throughput
 * scatter and plans.csv). The renderers turn it into report.html (self-contained, inline SVG),
 * report.md and plans.csv. Every number they print is formatted from an ap_estimate field that
 * `autoplan estimate --json` prints under the same name (planner/estjson.c), or derived from
 * such fields in a way the report states (the overshoot: device peak + headroom - capacity).
 *
 * Not here: the GPU-count sweep chart and the memory-over-time chart from the simulator; the
 * report says they are absent.
 */
#ifndef AP_REPORT_H
#define AP_REPORT_H

#include "autoplan/search.h"

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
        device_peak_bytes, host_bytes_per_node, host_capacity_bytes;
    int fits, worst_stage, host_fits;
} ap_report_row;

typedef struct ap_report {
    const ap_model *model;     /* borrowed; must outlive the report */
    const ap_cluster *cluster; /* borrowed */
    const char *model_arg;     /* MODEL as the user gave it (for the estimate commands) */
    int64_t gbs;               /* global batch, sequences */
    int64_t seq;               /* tokens per sequence */
    int trainer;               /* the trainer asked for */
    ap_report_strategy *strat; /* nstrat entries, owned (ap_report_free) */
    int nstrat;
    int best;                  /* index of the fastest fitting strategy, -1 when none fits */
    ap_report_row *rows;       /* feasible plans, ascending step time; owned */
    int64_t nrows;
    int64_t evaluated;         /* plans estimated by the enumeration */
    int64_t fit;               /* of those, fitting (>= nrows when rows were capped) */
    int eval_capped;           /* the enumeration stopped at its evaluation bound */
} ap_report;

/* Bounds of the enumeration behind the scatter and plans.csv. */
#define AP_REPORT_MAX_ROWS 100000   /* plans.csv rows: the fastest feasible plans */
#define AP_REPORT_MAX_EVALS 2000000 /* estimates made before the enumeration stops */
#define AP_REPORT_MAX_POINTS 2000   /* sampled non-Pareto points in the scatter */

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

/* Fill a row from an estimate. */
void ap_report_row_from_estimate(const ap_estimate *e, ap_report_row *row);

/* Index of the fastest fitting strategy (ties: least device memory), -1 if none fits. */
int ap_report_pick_best(const ap_report *r);

/* Renderers: a malloc'd NUL-terminated document in *out (caller frees), *len its length.
 * AP_ERR_NOMEM when building it fails. */
ap_status ap_report_html(const ap_report *r, char **out, size_t *len, ap_err *err);
ap_status ap_report_markdown(const ap_report *r, char **out, size_t *len, ap_err *err);
ap_status ap_report_csv(const ap_report *r, char **out, size_t *len, ap_err *err);

/* Free what the report owns (strategies, rows); the borrowed pointers are untouched. */
void ap_report_free(ap_report *r);

/* `autoplan compare`: argv[0] is the first argument after the command; returns the exit code. */
int ap_cmd_compare(int argc, char **argv);

#endif
