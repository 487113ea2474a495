/*
 * search_int.h - internals shared by planner/search.c (the enumeration, its threads and their
 * merge) and planner/resplit.c (ranking the pipelined candidates with their optimal split and
 * joint recompute/offload choice); not a public header.
 */
#ifndef AP_SEARCH_INT_H
#define AP_SEARCH_INT_H

#include "autoplan/partition.h"

/* The short names of the functions below; the exported names carry the module prefix. */
#define rs_applies ap_rs_applies
#define rs_bound ap_rs_bound
#define rs_lower_bound ap_rs_lower_bound
#define rs_rank ap_rs_rank
#define topk_offer ap_topk_offer
#define topk_remove ap_topk_remove

/* A ranking of at most k estimates, best first (ap_estimate_better; an estimate that ties the
 * last one does not enter), each with an id (a candidate index, or -1). */
typedef struct topk {
    ap_estimate *e;
    int64_t *id;
    int n, k;
    int cap;      /* entries allocated (grown up to k) */
} topk;

/* Offer e: inserted after every entry it does not beat; 1 when it entered, 0 when not, -1 out
 * of memory growing the arrays. */
int topk_offer(topk *t, const ap_estimate *e, int64_t id);
/* Remove entry i (the ones after it move up). */
void topk_remove(topk *t, int i);

/* A fitting pipelined plan the search evaluated, to be ranked with its optimal split: its
 * point, member (recompute level rc, micro-batch index mb), the step time of its uniform split
 * and lower bounds on the step time of its splits (resplit.c): own_s for its own recompute
 * and offload, combo_s for any recompute and offload of its degrees, both plus what the
 * data-parallel reduction leaves exposed, at least dp_floor_s and at least dp_s minus what a
 * split that could enter the ranking can hide (its slowest stage, below k-th step x inv_m). */
typedef struct rs_cand {
    ap_space_point pt;
    int rc, mb;
    double step_s;
    double own_s, combo_s;
    double dp_s, dp_floor_s, inv_m;
    double opt_s;     /* the optimizer part of own_s */
    double fixed_s;   /* the part of its step no split changes (point-to-point, overhead) */
} rs_cand;

/* The bound of a candidate with base own_s or combo_s when the ranking's k-th step is kth_s
 * (INFINITY: not full). */
double rs_bound(const rs_cand *x, double base_s, double kth_s);

/* Worker scratch for rs_lower_bound (large values off the stack), with a memo of the
 * siblings' pipeline bounds (direct-mapped on the sibling's degrees, ZeRO stage and micro-batch;
 * a sibling serves every recompute level and offload of its degrees). */
#define RS_MEMO 256
typedef struct rs_memo {
    int valid, tp, cp, pp, dp, ep, vp, zero;
    int64_t mbs;
    double pipe_s;
} rs_memo;

typedef struct rs_scratch {
    ap_plan q;
    ap_estimate e;
    rs_memo memo[RS_MEMO];
} rs_scratch;

/* Whether plans of this search can be re-split (the trainer takes uneven stages). */
int rs_applies(const ap_search_opts *o);

/* The lower bounds of candidate x, whose uniform estimate is e (a fitting pipelined plan); 0
 * where none is known. Errors of the cost model on a legal plan are returned. */
ap_status rs_lower_bound(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                         const ap_estimate *e, rs_scratch *sc, rs_cand *x, ap_err *err);

/* Rank the candidates (ids: their indices) into top: each candidate whose bound can still
 * beat the k-th entry gets its optimal split, each degree combination whose bound can, the
 * joint choice, solved on up to `threads` threads (the answer does not depend on it); r's
 * counters of re-split plans are set. */
ap_status rs_rank(const ap_model *m, const ap_cluster *c, const ap_search_opts *o, rs_cand *cands,
                  int64_t n, topk *top, int threads, ap_search_result *r, ap_err *err);

#endif
