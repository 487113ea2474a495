/*
 * search_int.h - internals shared by planner/search.c (the enumeration, its threads and their
 * merge) and planner/resplit.c (ranking the pipelined candidates with their optimal split and
 * joint recompute/offload choice); not a public header.
 */
#ifndef AP_SEARCH_INT_H
#define AP_SEARCH_INT_H

#include "autoplan/partition.h"

#include <stddef.h>

/* The short names of the functions below; the exported names carry the module prefix. */
#define rs_applies ap_rs_applies
#define rs_bound ap_rs_bound
#define rs_lower_bound ap_rs_lower_bound
#define rs_member_bound ap_rs_member_bound
#define rs_own_sibling ap_rs_own_sibling
#define rs_member_bound_own ap_rs_member_bound_own
#define rs_rank ap_rs_rank
#define rs_fill ap_rs_fill
#define topk_bound ap_topk_bound
#define topk_free ap_topk_free
#define topk_offer ap_topk_offer
#define topk_rank_ties ap_topk_rank_ties
#define topk_remove ap_topk_remove
#define topk_swap ap_topk_swap
#define topk_take ap_topk_take

/* The same plan up to its split: degrees, batch, ZeRO, recompute and offload. A ranking holds
 * each such plan once (resplit.c, with its best split). */
typedef struct {
    int64_t f[12]; /* tp, pp, dp, cp, ep, vp, ZeRO, recompute, its count, mbs, etp, cp_a2a */
    double off[2]; /* the offload fractions of optimizer states and parameters */
} plan_key;

/* A ranking of estimates, best first (ap_estimate_better), each with an id (a candidate index,
 * or -1); planner/topk.c. margin 0: at most k entries (an estimate that ties the last one does
 * not enter). margin > 0 (ties, search.h): at most k entries per complication, each within
 * (1 + margin) of the k-th step time overall; topk_rank_ties then orders them and keeps k.
 * Entries live in a pool of separately allocated estimates and are ranked through slot[]: an
 * insertion moves ints, and growing the pool moves pointers, not the estimates (tens of
 * kilobytes each). A provisional entry (an estimate offered with an id >= 0 while
 * ids_provisional is set: a re-split candidate's uniform split, topk.c) keeps its keys, not its
 * estimate, until topk_fill gives it one; topk_at is only for the others. */
typedef struct topk {
    /* per slot (an entry keeps its slot while its rank changes) */
    ap_estimate **pool;   /* cap estimates; NULL until a slot holds one */
    plan_key *pkey;       /* the plan key of the slot's entry */
    uint64_t *key;        /* plan_key_hash of it (topk_find) */
    int *cls;             /* its complication */
    int64_t *id;          /* its id */
    char *prov;           /* it is provisional (no estimate; see topk.c) */
    char *used;           /* the slot holds an entry */
    double *sstep, *speak;/* its step time and device peak, the keys of ap_estimate_better:
                             ranking and bounding read them (rstep, rpeak), not the estimates */
    int *next, *head;     /* the used slots by key: chains from head[key & (nhead - 1)] */
    int nhead;
    /* per rank: what an insertion moves (with a wide tie margin tens of thousands of entries:
     * the rank's keys stay with its slot, so a move is 4 bytes an entry). The ranks are kept
     * last first: an entry enters or leaves near the fastest far more often than near the
     * slowest (re-split plans, the complications' best), and the ranks before it move. */
    int *slot;            /* slot[n - 1 - i]: the slot of rank i (rslot); slot[n..cap): free */
    int nfinal[32];       /* margin > 0: the entries that are not provisional, per
                             complication, */
    double *ckeys[32];    /* their (step, peak) pairs in rank order (capacity ccap[c]) */
    int ccap[32];
    int ids_provisional;  /* 1: an entry offered with an id >= 0 (a re-split candidate's
                             uniform estimate) is provisional */
    int n, k;
    int cap;              /* entries allocated (grown on demand) */
    double margin;        /* ap_search_opts.tie_margin */
    int64_t cp_short_seq; /* ap_cp_short_seq of the model */
} topk;

/* Entry of rank i (not provisional), its id, whether it is provisional. */
#define rslot(t, i) ((t)->slot[(t)->n - 1 - (i)])
#define topk_at(t, i) ((t)->pool[rslot(t, i)])
#define topk_id(t, i) ((t)->id[rslot(t, i)])
#define topk_prov(t, i) ((t)->prov[rslot(t, i)])
/* Step time and device peak of rank i. */
#define rstep(t, i) ((t)->sstep[rslot(t, i)])
#define rpeak(t, i) ((t)->speak[rslot(t, i)])

#define plan_key_of ap_plan_key_of
#define plan_key_eq ap_plan_key_eq
#define plan_key_hash ap_plan_key_hash
#define topk_find ap_topk_find
#define topk_full_steps ap_topk_full_steps
#define plan_complication ap_plan_complication
#define complication_cut ap_complication_cut
#define topk_fill ap_topk_fill
#define topk_sort ap_topk_sort
#define topk_clear ap_topk_clear
#define topk_offer_rank ap_topk_offer_rank
plan_key plan_key_of(const ap_plan *p);
int plan_key_eq(const plan_key *a, const plan_key *b);
uint64_t plan_key_hash(const plan_key *k);
/* The rank of the entry whose plan has key k, or -1. */
int topk_find(const topk *t, const plan_key *k);
/* Offer e: inserted after every entry it does not beat; 1 when it entered, 0 when not, -1 out
 * of memory growing the arrays. */
int topk_offer(topk *t, const ap_estimate *e, int64_t id);
/* Offer rank i of src (its estimate, or its keys when it is provisional there or here). */
int topk_offer_rank(topk *t, const topk *src, int i, int64_t id);
/* Give rank i the estimate e (a provisional entry's, made again): no longer provisional, its
 * keys and complication e's, its rank unchanged. -1 out of memory. */
int topk_fill(topk *t, int i, const ap_estimate *e);
/* Restore the ranks' order after topk_fill changed keys (stable). */
void topk_sort(topk *t);
/* Remove the entry of rank i (the ones after it move up). */
void topk_remove(topk *t, int i);
/* Swap the entries of ranks i and j. */
void topk_swap(topk *t, int i, int j);
/* The step time above which no offer can enter (INFINITY while the ranking is not full, or
 * when the cost model returned no number). */
double topk_bound(const topk *t);
/* Under a tie margin, full[c] = the step of complication c's slowest entry that counts once c
 * holds k of them: an offer of c no faster than that cannot enter (offer_tied). INFINITY while
 * c has room, and without a margin. */
void topk_full_steps(const topk *t, double full[32]);
/* ap_estimate_complication without its tight bit: what the plan alone says. */
int plan_complication(const ap_plan *p, int64_t cp_short_seq);
/* The step below which a plan of complication c (its tight bit not read) must come to enter
 * whichever complication it takes once estimated or split, fitting or tight, and with
 * offload_free either offload (the re-split's joint choice picks it): the most of those
 * complications' full steps (topk_full_steps); INFINITY where one has room. */
double complication_cut(const double *full, int c, int offload_free);
/* margin > 0: order the entries as search.h "Ties" says and keep the first k; 0: nothing. */
void topk_rank_ties(topk *t);
/* The first min(n, k) entries in rank order as one allocated array (NULL when n is 0 or out of
 * memory: *nout says which: n = 0 gives *nout 0, out of memory -1, a provisional entry among
 * them -2). */
ap_estimate *topk_take(const topk *t, int *nout);
/* Empty the ranking, keeping its arrays and estimates for reuse. */
void topk_clear(topk *t);
void topk_free(topk *t);

/* A fitting pipelined plan the search evaluated, to be ranked with its optimal split: its
 * point, member (recompute level rc, micro-batch index mb), the step time of its uniform split
 * and lower bounds on the step time of its splits (resplit.c): own_s for its own recompute
 * and offload, combo_s for any recompute and offload of its degrees, both plus what the
 * data-parallel reduction leaves exposed, at least dp_floor_s and at least dp_s minus what a
 * split that could enter the ranking can hide (its slowest stage, below k-th step x inv_m). */
typedef struct rs_cand {
    ap_space_point pt;
    int rc, mb;
    int cls;          /* plan_complication of its plan */
    double step_s, peak_bytes; /* its uniform estimate's step and device peak */
    double own_s, combo_s;
    double dp_s, dp_floor_s, inv_m;
    double opt_s;     /* the optimizer part of own_s */
    double fixed_s;   /* the part of its step no split changes (point-to-point, overhead) */
} rs_cand;

/* The bound of a candidate with base own_s or combo_s when the ranking's k-th step is kth_s
 * (INFINITY: not full). */
double rs_bound(const rs_cand *x, double base_s, double kth_s);

/* Worker scratch for rs_lower_bound (large values off the stack), with a memo of the
 * siblings' pipeline bounds (direct-mapped on the plan's degrees, ZeRO stage and micro-batch,
 * which make its sibling: every recompute level and offload of them shares one; none: the
 * trainer runs no sibling of them). */
#define RS_MEMO 1024
/* A per-rank quantity of a uniform layout read as alpha per layer plus c_first / c_last on the
 * first / last rank (resplit.c fit_lin): ok = 0 where that reading does not apply; the ranks
 * then hold Lm layers of the repeated kind, at least lo each (with a dense prefix of D layers:
 * the L - D MoE layers, the first rank's constant and the dense layers taken as free). mean:
 * the mean over the ranks, a bound in any case. kinds2: where ok = 0 for layers of two kinds
 * placed otherwise (interleaved MoE layers, a dense prefix the first rank does not hold), the
 * least slowest rank over splits from both kinds' rates (resplit.c two_kinds_max); 0 where
 * none applies. */
typedef struct {
    int ok, D, Lm, lo;
    double alpha, c_first, c_last, mean, kinds2;
} lin_fit;

typedef struct rs_memo {
    int valid, none, tp, cp, pp, dp, ep, etp, vp, zero, zero_group, cp_a2a;
    int64_t mbs;
    double pipe_s;
    double overhead_s; /* the sibling's fixed per-step overhead (the calibration's) */
    /* its stage times as resplit.c's linear model reads them, their sum (the same for every
     * split) and least slowest stage over splits, and the sibling's ZeRO stage */
    lin_fit fit;
    double sum_s, max_s;
    /* the least max over splits of its ranks' weight bytes over the uniform's most (rho in
     * resplit.c rest_bound), the same for every plan of its key at its ZeRO stage; NAN until
     * the first such plan reads it */
    double par_rho;
    int sib_zero;
} rs_memo;

/* The sibling plan a memo entry was filled from, less its layout arrays (the memo's plans are
 * uniform): entries of two keys with equal signatures hold the same sibling's figures, so a
 * ZeRO-3 plan whose sibling is the ZeRO-2 plan of its degrees finds that plan's entry
 * (resplit.c sibling_memo). */
#define RS_SIG_HEAD offsetof(ap_plan, stage_layers)
#define RS_SIG_TAIL (sizeof(ap_plan) - offsetof(ap_plan, attn_impl))
typedef struct {
    unsigned char b[RS_SIG_HEAD + RS_SIG_TAIL];
} rs_sig;

/* The pipeline bound of a ZeRO-3 plan's ZeRO-2 counterpart with its recomputation (resplit.c
 * z2_pipe), kept by the counterpart's signature. */
#define RS_Z2 256
typedef struct {
    rs_sig sig;
    int ok;              /* 0: the trainer does not run the counterpart */
    double sum_s, max_s; /* its stage times' sum and least slowest stage over splits */
} rs_z2;

typedef struct rs_scratch {
    ap_plan q;
    ap_estimate e;
    rs_memo memo[RS_MEMO];
    rs_sig *sig;         /* RS_MEMO signatures, sig[i] memo[i]'s sibling's where it has one
                            (written when filled, the owner's array: not cleared with the
                            rest); NULL: no entry is taken from another key's */
    int64_t shared;      /* entries taken from another key's (tests read it) */
    rs_z2 *z2;           /* RS_Z2 entries (the owner's array, not cleared: z2_valid says
                            which hold one); NULL: no counterpart bound */
    unsigned char z2_valid[RS_Z2];
} rs_scratch;

/* Whether plans of this search can be re-split (the trainer takes uneven stages). */
int rs_applies(const ap_search_opts *o);

/* The lower bounds of candidate x, whose uniform estimate is e (a fitting pipelined plan); 0
 * where none is known. The sibling plans are estimated with eo (o->est, or the same with a
 * layer-price memo, the GPU's tables and plan_checked: sibling checks each). *useful = 0 when
 * both bounds exceed cutoff (INFINITY: never), found from combo_s alone: the rest of x is then
 * not computed. Errors of the cost model on a legal plan are returned. */
ap_status rs_lower_bound(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                         const ap_estimate_opts *eo, const ap_estimate *e, rs_scratch *sc,
                         rs_cand *x, double cutoff, int *useful, ap_err *err);

/* A lower bound on the step time of every plan sharing plan p's degrees (tp, cp, pp, dp, ep,
 * vp) and micro-batch, whatever its recompute, offload, ZeRO stage and split: its sibling's
 * least pipeline time over splits plus the fixed overhead (estimate.c: the step is the pipeline
 * plus non-negative parts; the sibling's stages are no slower, see the top of resplit.c); 0
 * when the trainer runs no sibling. The search skips members past its ranking's bound with it
 * (search.h "Pruning"). Estimated with eo as rs_lower_bound, sharing its memo. */
ap_status rs_member_bound(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                          const ap_estimate_opts *eo, const ap_plan *p, rs_scratch *sc,
                          double *lb, ap_err *err);
/* Whether plan p is its own sibling: no recomputation or offload, ZeRO at most 2, the overlap
 * its sibling keeps (an estimate of it is the sibling's). */
int rs_own_sibling(const ap_plan *p);
/* rs_member_bound of a legal plan p that is its own sibling, from its estimate e (the memo
 * entry filled from e on a miss: no estimate of its own). */
double rs_member_bound_own(const ap_model *m, const ap_plan *p, const ap_estimate *e,
                           rs_scratch *sc);

/* Rank the candidates (ids: their indices) into top: each candidate whose bound can still
 * beat the k-th entry gets its optimal split, each degree combination whose bound can, the
 * joint choice, solved on up to `threads` threads (the answer does not depend on it); r's
 * counters of re-split plans are set. */
ap_status rs_rank(const ap_model *m, const ap_cluster *c, const ap_search_opts *o, rs_cand *cands,
                  int64_t n, topk *top, int threads, ap_search_result *r, ap_err *err);
/* Give the provisional entries among the first `upto` ranks of top their estimates, made again
 * from their candidates (ids: indices into cands); AP_ERR_INTERNAL if one does not come out
 * at the figures it was ranked with. */
ap_status rs_fill(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                  const rs_cand *cands, topk *top, int upto, ap_err *err);

#endif
