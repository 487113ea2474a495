/*
 * search.h - exhaustive enumeration of the plans a trainer can run, with safe pruning, ranked
 * by predicted step time (planner/search.c).
 *
 * The space: tp, pp, cp, ep, vp, mbs, ZeRO stage, recompute (none/selective/full and, where the
 * trainer allows, the number of fully recomputed layers per chunk), and offload levels. Two
 * choices are not enumerated because they are dominated in the cost model (never more memory,
 * never a slower step; tests/test_search.c checks it): sequence parallelism whenever tp > 1
 * and the trainer offers it, and overlap of gradient reduction / parameter gathering whenever
 * the trainer offers it. `no_sp` / `no_overlap` turn them off.
 *
 * Pruning (off with prune = 0): a group of plans sharing degrees, ZeRO and offload is skipped
 * when its least-memory member (micro-batch 1, full recompute) does not fit; within a group the
 * micro-batch loop stops at the first size that does not fit for a recompute level. Both rest
 * on memory growing with micro-batch and falling with recompute, which tests check.
 */
#ifndef AP_SEARCH_H
#define AP_SEARCH_H

#include "autoplan/estimate.h"

typedef struct ap_search_opts {
    ap_plan fixed;            /* degrees/options pinned by the user: 0 (or -1 for zero) = free;
                                 an offload fraction < 0 pins it to 0 */
    int fix_recompute;        /* 1 = fixed.recompute pinned */
    int fix_dtype;
    int64_t gbs;              /* global batch (sequences), required */
    int top_k;                /* plans returned (default 10) */
    int allow_cross_node_tp;
    int prune;                /* default 1 */
    int no_sp, no_overlap;
    int max_mbs;              /* default 64 */
    ap_estimate_opts est;
    /* Optional: called with every plan estimated (fitting or not); `e` is valid during the call
     * only. With max_evals > 0 the search stops after that many estimates (capped = 1). */
    void (*visit)(void *ctx, const ap_estimate *e);
    void *visit_ctx;
    int64_t max_evals;
} ap_search_opts;

void ap_search_opts_init(ap_search_opts *o);

typedef struct ap_search_result {
    ap_estimate *top;         /* ntop fitting plans, best first; owned, see _free */
    int ntop;
    ap_estimate closest;      /* when nothing fits: the legal plan with the least overshoot */
    int have_closest;
    int64_t enumerated;       /* combinations generated */
    int64_t legal;            /* passed the trainer/shape rules */
    int64_t evaluated;        /* estimated (legal minus pruned) */
    int64_t fit;              /* evaluated and fitting */
    int64_t pruned;           /* legal combinations skipped by pruning */
    int capped;               /* stopped at opts->max_evals */
    double search_s;
} ap_search_result;

/* Search plans for model m on cluster c with trainer opts->fixed.trainer. Returns AP_OK even
 * when nothing fits (ntop = 0, closest set when any plan was legal). */
ap_status ap_search(const ap_model *m, const ap_cluster *c, const ap_search_opts *opts,
                    ap_search_result *res, ap_err *err);
void ap_search_result_free(ap_search_result *res);

/* Memory error the confidence classes use, as a fraction: the validated readings agree within
 * 1.97% (Korthikanti Figure 1, README "Validation") and the event simulator within 3% at the
 * allocated level (docs/simulator.md), but allocator fragmentation at the reserved level is not
 * validated against a measurement, so a plan within 5% of the limit is "tight". */
#define AP_VALIDATED_MEMORY_ERROR 0.05
/* Validated time error (the scored time MAPE, 3.6%, rounded up to 5%): differences smaller
 * than this are ties. */
#define AP_VALIDATED_TIME_ERROR 0.05

/* The ranking: 1 if a is better than b (lower step time, ties by lower device memory). */
int ap_estimate_better(const ap_estimate *a, const ap_estimate *b);

typedef enum { AP_CONF_FITS = 0, AP_CONF_TIGHT, AP_CONF_OOM } ap_confidence;
ap_confidence ap_estimate_confidence(const ap_estimate *e);
const char *ap_confidence_name(ap_confidence c);

#endif
