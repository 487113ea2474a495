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
 * on memory growing with micro-batch and falling with recompute, which tests check. And by
 * time (not with a visitor): a member is not estimated when a lower bound on the step of every
 * plan of its degrees and micro-batch (whatever recompute, offload, ZeRO stage and split;
 * resplit.c rs_member_bound, checked by tests against every plan of several enumerations) is
 * past the time cut: the k-th least step of its chunk's fitting plans, or of the answer as it
 * stood a fixed number of chunks before, times 1 + the tie margin (no plan past it can enter
 * the ranking or win a re-split); under a tie margin also when it is past the K-th plan, as
 * the answer stood then, of every complication its plans could take ("Ties"). Placements
 * simulated operator by operator (Gemini, DeepSpeed offload) are walked after every priced
 * point, so their cut also holds the priced plans' whole ranking bound, and one is not
 * simulated when its compute, optimizer and fixed overhead alone are past it (hetero.h
 * step_cutoff_s; counted as pruned). The cut depends on the chunks' own order, not on when
 * threads reach them, so the counters are the same whatever the threads.
 *
 * Re-split (resplit = 1, trainers that take uneven stages; planner/resplit.c): every fitting
 * pipelined plan is ranked with its optimal stage split (partition.h, its own recompute and
 * offload), and every degree combination (tp, cp, pp, dp, ep, vp, micro-batch, ZeRO) with a
 * fitting pipelined plan with the granularity, recomputed-layer counts and offload fractions
 * chosen jointly with the split (those the user did not pin: a pinned granularity, count or
 * offload fraction holds in every plan); each plan (up to its split) appears once, with its best split.
 * The answer is the top K of all of these, as splitting every one of them would give
 * (tests/test_search.c checks it by brute force); a lower bound on each plan's step time under
 * any split, recompute and offload lets the search split only those that could still enter the
 * ranking. Plans that fit only with an uneven split and whose uniform members all overshoot are
 * not candidates, except the closest plan when nothing fits, which gets the joint choice.
 *
 * Ties (tie_margin > 0, the default: AP_VALIDATED_TIME_ERROR): step times that differ by less
 * than the model's own error cannot tell plans apart, so among them the simpler plan ranks
 * first. Position i holds, of the plans not yet ranked, the one with the least complication
 * (ap_estimate_complication) among those within the margin of the fastest left, the faster
 * when equal. The answer is this ranking of every fitting plan cut to K: the search keeps, per
 * complication, its K fastest plans within the margin of the K-th fastest overall, which holds
 * every plan the ranking can reach (tests/test_search.c checks it by brute force). With the
 * re-split, a candidate's uniform estimate neither counts among its complication's K nor
 * leaves for it until its split is known (a split can move a plan between tight and fits), and
 * a plan enters with its best split only (its uniform one when no split beats it), so the
 * first plan is the same whatever K (test_best_independent_of_k). A candidate whose bound is
 * past the K-th plan of every complication its split could take (fits or tight, and with or
 * without offload where the joint choice picks it) is not solved at all: its answer could not
 * enter (passed, counted in ap_search_result.passed); its uniform estimate stays in the
 * ranking as the plan it is. tie_margin 0 ranks by step time alone.
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
    /* Optional: called with every plan estimated (fitting or not), in the enumeration's order;
     * `e` is valid during the call only. The search then runs on the calling thread. */
    void (*visit)(void *ctx, const ap_estimate *e);
    void *visit_ctx;
    /* Optional, instead of visit, and the search keeps its threads: visit_keep, on a worker
     * thread, turns an estimate into a record of visit_rec_size bytes (it reads ctx, never
     * writes it; 0: no record); visit_fold receives the records in the order visit would have
     * seen their estimates, one call at a time, whatever the thread count. */
    int (*visit_keep)(const void *ctx, const ap_estimate *e, void *rec);
    void (*visit_fold)(void *ctx, const void *rec);
    size_t visit_rec_size;
    /* > 0: the search stops estimating after that many estimates in the enumeration's order
     * (capped = 1); the plans after are counted, not estimated */
    int64_t max_evals;
    /* 1: rank every fitting pipelined plan with its optimal stage split and the best degree
     * combinations with the joint recompute / offload choice (see "Re-split" above), when the
     * trainer takes uneven stages; default 0 (uniform stages) */
    int resplit;
    int resplit_solver;       /* AP_SOLVER_* (partition.h) of the final split of the answers:
                                 DP (default) or ILP */
    /* worker threads over the space; 0 = one per online core (default). The answer does not
     * depend on it: the space is cut into fixed chunks merged in order. With visit the search
     * runs on the calling thread. */
    int threads;
    /* ties: plans within this fraction of the fastest one left rank simplest first (see "Ties"
     * above); default AP_VALIDATED_TIME_ERROR, 0 = by step time alone, at most 1 */
    double tie_margin;
    /* 1: only the ranking is wanted. A plan simulated operator by operator (Gemini, DeepSpeed
     * offload devices) whose compute alone is past the ranking's bound as the search stands
     * (what is slower cannot enter it) is then not simulated (counted as pruned), also
     * without the fixed lag of the time cut (search.h "Pruning"). So the counters depend on
     * the thread count; the ranking does not. 0, the default: the time cut alone.
     * In every search the points the cost model prices are walked before the simulated ones,
     * and the simulations stop as soon as their plan cannot fit when a priced plan fits
     * (counted in stopped), and when none does, as soon as their plan is farther from fitting
     * than the closest priced plan (which keeps the closest plan). */
    int answer_only;
    /* > 0: what is slower than this step time cannot matter to the caller (its best plan from
     * elsewhere times 1 + the tie margin: a plan whose fastest is no slower than that best
     * keeps every plan of its tie window); the ranking then holds only plans no slower than
     * it, and may be empty. 0, the default: no bound */
    double step_bound_s;
    /* 1: only whether some plan fits is wanted: the enumeration stops claiming points once a
     * plan fits (the ranking then holds what the chunks in flight found, the counters are
     * partial and depend on the threads), and the re-split runs only when none fits (the
     * closest plan's joint choice may make it fit); whether ntop > 0 does not depend on it.
     * Where the trainer's space has simulated points (Colossal-AI's Gemini, DeepSpeed's
     * offload devices) the points the cost model prices are walked first, so a fitting one
     * ends the walk before any simulation, and the simulated points are then taken most
     * frugal first (the most offloaded, then the most tensor-parallel); the simulations stop
     * as soon as their plan cannot fit (ap_hetero_opts.stop_unfit, counted in stopped). The
     * closest plan is the whole search's when none stopped; otherwise it is the closest of
     * the others.
     * 0, the default: the whole search */
    int any_fit;
    /* 1: the caller reads no closest plan (it knows a plan of the trainers it asks fits, and
     * asks this search for the ranking only): simulations stop as soon as their plan cannot
     * fit (counted in stopped), which changes no ranking. 0, the default */
    int no_closest;
    /* operator templates the simulations share (hetero.h ap_hetero_store; borrowed): a caller
     * running several searches of one model (fit) passes one store to all. NULL, the
     * default: the search's threads share a store of their own */
    struct ap_hetero_store *hetero_templates;
} ap_search_opts;

void ap_search_opts_init(ap_search_opts *o);

typedef struct ap_search_result {
    ap_estimate *top;         /* ntop fitting plans, best first; owned, see _free */
    int ntop;
    ap_estimate closest;      /* when nothing fits: the legal plan with the least overshoot */
    int have_closest;
    ap_estimate fastest;      /* when ntop > 0: the fastest fitting plan, which ties (search.h
                                 "Ties") may rank below simpler ones or leave out of the K */
    int64_t enumerated;       /* combinations generated */
    int64_t legal;            /* passed the trainer/shape rules */
    int64_t evaluated;        /* estimated (legal minus pruned) */
    int64_t fit;              /* evaluated and fitting */
    int64_t pruned;           /* legal combinations skipped by pruning */
    int64_t stopped;          /* evaluated plans whose simulation stopped once they could not
                                 fit (not candidates for the closest plan) */
    int capped;               /* stopped at opts->max_evals */
    int64_t candidates;       /* resplit: fitting pipelined plans ranked with their split */
    int64_t resplit;          /* of those, split optimally (the others' bounds could not win) */
    int64_t joint;            /* degree combinations given the joint recompute/offload choice */
    int64_t passed;           /* tie margin: candidates (fixed or joint) whose bound could win
                                 but not solved: every complication their answer could take
                                 already held K faster plans (search.h "Ties") */
    int threads;              /* worker threads used */
    double search_s;
} ap_search_result;

/* Search plans for model m on cluster c with trainer opts->fixed.trainer. Returns AP_OK even
 * when nothing fits (ntop = 0, closest set when any plan was legal). */
ap_status ap_search(const ap_model *m, const ap_cluster *c, const ap_search_opts *opts,
                    ap_search_result *res, ap_err *err);
void ap_search_result_free(ap_search_result *res);

/* n searches, one per cluster (a GPU-count sweep), run side by side on opts->threads threads
 * (each search on one): res[i], st[i] and errs[i] are what ap_search(m, &clusters[i], opts)
 * alone returns (its answer does not depend on threads). Returns AP_OK; the caller frees each
 * res[i] whose st[i] is AP_OK. */
ap_status ap_search_many(const ap_model *m, const ap_cluster *clusters, int n,
                         const ap_search_opts *opts, ap_search_result *res, ap_status *st,
                         ap_err *errs);

/* ---- the plan space (planner/space.c) ---------------------------------------------------------
 * The space above as a table of dimensions walked by an odometer: a point fixes the degrees
 * (tp, cp, pp and so dp, ep, vp), the ZeRO stage and the offload fractions, i.e. the model
 * states of a group of plans; the group's members are its recompute levels x micro-batch
 * sizes. ap_search walks it (pruning a group by its least-memory member), and so does the
 * report's enumeration, through ap_search. Points come in the search's evaluation order. */
#define AP_SPACE_DIMS 9

typedef struct ap_space_point {
    int tp, cp, pp, dp, ep, etp, vp, zero;
    int zero_group;           /* ZeRO within groups of this many ranks (0: all; see space.c) */
    double offload_optimizer, offload_params;
    int cp_a2a;               /* context parallelism by all-to-all (plan.h cp_a2a; space.c) */
    int hetero_extra;         /* the extra heterogeneous-memory level (Gemini auto placement,
                                 ZeRO-Infinity on NVMe: see space.c) */
} ap_space_point;

/* The members of one point: the base plan (degrees, ZeRO, offload, sp and overlap as the
 * search sets them; recompute and micro-batch unset), nrc recompute levels in evaluation order
 * (most_rc: the one with the least activation memory) and nmbs micro-batch sizes, ascending. */
/* A group's members at most: recompute levels (none, selective, full and three partial counts)
 * and micro-batch sizes (divisors of the per-rank batch). */
#define AP_GROUP_MAX_RC 8
#define AP_GROUP_MAX_MBS 64

typedef struct ap_plan_group {
    ap_plan base;
    int nrc, most_rc;
    ap_recompute rc[AP_GROUP_MAX_RC];
    int rc_layers[AP_GROUP_MAX_RC];
    int nmbs;
    int64_t mbs[AP_GROUP_MAX_MBS];
} ap_plan_group;

/* The iterator; a plain value (no allocation), borrowing m, c and o for its lifetime. */
typedef struct ap_space {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    const ap_trainer_caps *tr;
    int started, done;
    int n[AP_SPACE_DIMS], i[AP_SPACE_DIMS]; /* values listed / chosen per dimension */
    double v[AP_SPACE_DIMS][256];
    ap_space_point pt;
    ap_plan_group scratch;    /* the group of the point being tested */
    /* the divisors of the global batch up to max_mbs, ascending (every micro-batch size of a
     * point divides gbs / dp, so it is one of them); nmb_cand < 0: more than the table holds */
    int nmb_cand;
    int64_t mb_cand[256];
} ap_space;


void ap_space_init(ap_space *s, const ap_model *m, const ap_cluster *c, const ap_search_opts *o);
/* The next point with at least one member: 1, or 0 when the space is exhausted. */
int ap_space_next(ap_space *s, ap_space_point *pt);
/* Whether the plans of point pt take a heterogeneous placement, priced by the operator-by-
 * operator simulation (Colossal-AI Gemini, DeepSpeed ZeRO-Offload/Infinity: hetero.h), each
 * costing milliseconds where an estimate costs a microsecond. */
int ap_space_point_simulated(const ap_space *s, const ap_space_point *pt);
/* The group of a point (one returned by ap_space_next: then the result is 1); 0 when the point
 * has no member (no recompute level or micro-batch, or a heterogeneous variant that does not
 * exist). */
int ap_space_group(const ap_space *s, const ap_space_point *pt, ap_plan_group *g);
/* Set plan p (a copy of g->base) to member (recompute level rc, micro-batch index mb). */
void ap_plan_group_member(const ap_plan_group *g, int rc, int mb, ap_plan *p);

/* Version of the search's answer (part of cache keys): bump it with every change that can
 * change which plans the search returns for the same inputs. */
const char *ap_search_version(void);

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

/* The first rule of every "closest plan" (the search's when nothing fits, fit's nearest row):
 * a plan with a measured device peak before one without. A peak of 0 is no measurement (a
 * Gemini placement that failed before its simulation ran: hetero.h), never the nearest.
 * 1: a goes first; -1: b goes first; 0: both or neither measured (the caller's metric
 * decides). */
int ap_estimate_measured_first(const ap_estimate *a, const ap_estimate *b);

/* How much a plan asks of the user beyond the plainest plan of its speed, compared first among
 * ties (lower = simpler), in this order: a `tight` plan after one that fits (its memory is
 * within the validated memory error of the limit); then offload (fractions, Gemini auto or
 * a fraction on the host, DeepSpeed offload devices) after none; then context parallelism at
 * a short sequence (cp > 1 and seq < cp_short_seq) after none; then the lower ZeRO stage
 * (ZeRO-3 at dp 1 shards nothing and comes after ZeRO-0 there). cp_short_seq: see
 * ap_cp_short_seq. */
int ap_estimate_complication(const ap_estimate *e, int64_t cp_short_seq);
/* The sequence length below which context parallelism counts as a complication for model m:
 * 6 h. Per token a layer's attention scores (Q K^T and the weighted sum of V) cost 4 s h FLOPs
 * forward against 24 h^2 for its linear layers (the s / 6h term of Narayanan et al. 2021,
 * Sec. 5.1: 96 B s l h^2 (1 + s / 6h + V / 16lh) FLOPs per step), so below s = 6h attention is the smaller part and context
 * parallelism, which exists to split it and its activations, buys nothing plain data
 * parallelism would not. */
int64_t ap_cp_short_seq(const ap_model *m);
/* Text of the tie rule for outputs ("fits before tight, no offload, ..."). */
const char *ap_tie_rule_text(void);

typedef enum { AP_CONF_FITS = 0, AP_CONF_TIGHT, AP_CONF_OOM } ap_confidence;
ap_confidence ap_estimate_confidence(const ap_estimate *e);
const char *ap_confidence_name(ap_confidence c);

#endif
