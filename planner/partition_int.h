/*
 * partition_int.h - internals of the stage partitioner shared by planner/partition.c (variants,
 * the entry point), planner/partition_dp.c (the DP over prefixes) and planner/resplit.c (the
 * search's re-split); not a public header.
 *
 * The DP table holds one entry per (rank, kind of range): a range of consecutive layers is
 * priced by the cost model from its rank and its numbers of dense and MoE layers only
 * (stagecost.h), so ranges with the same counts share an entry. `key` maps a range (first
 * layer a, n layers) to its kind; a dense model has L + 1 kinds (n), so the table is p x (L + 1)
 * whatever the start, and every DP pass reads it through the key.
 */
#ifndef AP_PARTITION_INT_H
#define AP_PARTITION_INT_H

#include "autoplan/partition.h"

/* The short names of the functions below; the exported names carry the module prefix. */
#define pdp_fill ap_pdp_fill
#define pdp_fill_split ap_pdp_fill_split
#define pdp_free ap_pdp_free
#define pdp_init ap_pdp_init
#define pdp_longest ap_pdp_longest
#define pdp_reset ap_pdp_reset
#define pdp_min_peak ap_pdp_min_peak
#define pdp_probe_count ap_pdp_probe_count
#define pdp_restricted ap_pdp_restricted
#define pdp_solve ap_pdp_solve
#define pdp_split_T ap_pdp_split_T
#define pdp_split_fits ap_pdp_split_fits
#define pdp_split_peak ap_pdp_split_peak
#define pt_check_input ap_pt_check_input

typedef struct pdp {
    int L, p, lo;          /* lo: layers per rank at least (v x min_layers) */
    int64_t m;
    int v;                 /* chunks per rank */
    double w;              /* weight of the max: m v - 1 (T = (S + w M) / v) */
    int nkeys;             /* kinds of range per rank */
    int *key;              /* key[a * (L + 1) + n]: the kind of range [a, a + n); NULL for a
                              model of one layer kind, where the kind is n (nkeys = L + 1) */
    int dense_prefix;      /* mixed kinds whose dense layers all come first: their number (the
                              ranges past them are of one kind, their length); else -1 */
    /* per (r, kind), index r * nkeys + kind: stage time, device bytes, verdict, count */
    double *t, *mem;
    unsigned char *ok;     /* 1: a legal range that fits; 2: legal but does not fit; 0: not
                              filled (no legal range of this kind on this rank) */
    int *rc;               /* recomputed layers chosen for the range (-1: the plan's) */
    int per_stage_rc;      /* choose rc per range */
    int ignore_mem;        /* treat every legal range as fitting (a lower bound on T) */
    double cap;            /* only splits of T below it are wanted (solve_once's cap): pdp_solve
                              stops once a bound shows none (INFINITY: no cap) */
    int host_short;        /* a range priced since the last reset misses host memory */
    int fixed_rc;          /* > 0: every stage recomputes min(fixed_rc, n) layers (a plan-wide
                              recompute_layers, read from the shared per-stage memo) */
    double *f;             /* (p+1) x (L+1) */
    int *tmp;              /* p: scratch split */
    double *cand;          /* candidate bounds (p x nkeys) */
    double *vv;            /* per (r, kind): the value a pass reads (p x nkeys) */
    double *tu;            /* per (r, kind): the stage time where usable, else INFINITY */
    int *flo, *fhi;        /* p + 1: the prefixes f(r, .) a pass wrote (INFINITY or a value);
                              f outside [flo[r], fhi[r]] is stale */
    int *span;             /* p: the longest range a pass read on rank r */
    int *nmax;             /* per (r, a), index r * (L + 1) + a: the longest range from a that
                              the passes read (pdp_fill) */
    int *filled;           /* the cells priced (ok != 0), in the order priced; tu and vv are
                              INFINITY at every other cell, so the loops over cells take these */
    int nfilled;
    int *seg_a, *seg_n;    /* per (r, kind): the start and length of a range of that kind
                              (the one priced) */
    unsigned char *ok_keep;/* per filled cell: its verdict while a probe replaces it */
    int *pseg;             /* a probe's cells to price, by length */
    int *nstart;           /* L + 2: a probe's counting sort by length */
    void *arena;           /* the one block every array above lies in (pdp_init) */
} pdp;

/* Allocate the DP for model m on pp ranks of v chunks each (at least lo layers per rank),
 * m_mb micro-batches. AP_ERR_NOMEM on failure (pdp_free is safe after a failed init). */
ap_status pdp_init(pdp *d, const ap_model *m, int pp, int v, int lo, int64_t m_mb,
                   int per_stage_rc, int fixed_rc, ap_err *err);
/* Ready d (initialised for the same model, ranks, chunks and micro-batches) for another
 * variant: nothing priced, the variant's recompute counts. */
void pdp_reset(pdp *d, int per_stage_rc, int fixed_rc);
void pdp_free(pdp *d);

/* Index of range [a, a + n) on rank r. */
static inline size_t pdp_seg(const pdp *d, int r, int a, int n) {
    return (size_t)r * (size_t)d->nkeys + (size_t)(d->key ? d->key[a * (d->L + 1) + n] : n);
}

/* Price the legal ranges from the stage table, each start's lengths in increasing order up to
 * the first whose stage time exceeds tcap (INFINITY: all of them). A stage of time t makes
 * T >= m t (T = (S + (m v - 1) M) / v >= m M), so with tcap = U / m every split of T below U
 * is made of priced ranges, given that a stage's time grows with its layers (the cost model
 * adds each layer's time; tests/test_partition.c checks it). The passes read ranges up to the
 * last one priced. Calling it again with a larger tcap prices the rest. */
ap_status pdp_fill(pdp *d, ap_stage_table *tab, double tcap, ap_err *err);
/* The longest range the passes read after pdp_fill (its nmax over every rank and start). */
int pdp_longest(const pdp *d);
/* Price only the ranges of one split (restricted trainers: no passes). */
ap_status pdp_fill_split(pdp *d, ap_stage_table *tab, const int *split, ap_err *err);
/* 1 when every range of the split is priced and fits. */
int pdp_split_fits(const pdp *d, const int *split);

/* The optimal split into best[]: 1 when a fitting split exists, 0 when none does (best is
 * then unset), -1 out of memory. */
int pdp_solve(pdp *d, int *best);
ap_status pdp_probe_count(pdp *d, ap_stage_table *tab, int k2, double U, int *any, ap_err *err);
/* Least peak memory over legal splits (all of them, or only fitting stages of time <= bound
 * when only_fit); the peak, INFINITY when no split qualifies. */
double pdp_min_peak(pdp *d, int only_fit, double bound, int *split);
/* Pipeline time of a split from the table: (S + w M) / v; *mx_out the max stage time. */
double pdp_split_T(const pdp *d, const int *split, double *mx_out);
double pdp_split_peak(const pdp *d, const int *split);

/* Restricted trainers: enumerate the splits the trainer can express (uniform, or first/last
 * differing); the best fitting (least T), or when none fits the least peak. */
ap_status pdp_restricted(const pdp *d, const ap_trainer_caps *tr, int first_last,
                         const int *uniform, int *best, int *fits, char *note, size_t note_n);

/* The inputs ap_partition_solve refuses with AP_ERR_INPUT before solving (partition.h): stage
 * and chunk counts, tables too large, interleaving with mixed layer kinds or with choices. */
ap_status pt_check_input(const ap_model *m, const ap_plan *p, const ap_partition_opts *o,
                         ap_err *err);

#endif
