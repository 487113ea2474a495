/*
 * stagecost.h - the cost of one pipeline stage as a function of the layers it holds, taken from
 * the cost model itself (costmodel/stagecost.c), for the stage partitioner (partition.h).
 *
 * For a non-interleaved plan (vp = 1) the cost model prices rank r from its position (first,
 * last, in-flight micro-batches min(p - r, m)) and the layers it holds: per-micro-batch forward
 * and backward time, device bytes, host bytes. Nothing of rank r depends on the layers of other
 * ranks (costmodel/estimate.c: the per-rank loop reads only its own chunk), so any split's
 * pipeline time sum_r (t_f + t_b)_r + (m - 1) max_r (t_f + t_b)_r and its memory verdict can be
 * assembled from per-stage entries. Each entry is obtained by calling ap_estimate_plan on a plan
 * with explicit stage_layers in which rank r holds exactly the asked-for layers; the table
 * memoises entries by (r, dense layers, MoE layers, recomputed layers), the only things of a
 * range the cost model reads (estimate.c prices one dense and one MoE layer per plan).
 * tests/test_partition.c checks the memo against direct evaluation of whole plans.
 */
#ifndef AP_STAGECOST_H
#define AP_STAGECOST_H

#include "autoplan/estimate.h"

typedef struct ap_stage_cost {
    double fwd_s;         /* forward of one micro-batch on this rank (compute + exposed comm) */
    double bwd_s;         /* backward incl. recompute */
    double device_bytes;  /* device peak of this rank (estimate.c ap_stage_mem.device_bytes) */
    double host_bytes;    /* host memory of this rank's offloaded states */
    int fits;             /* device_bytes + headroom <= capacity and host fits (per node) */
    int host_ok;          /* the host part of fits alone */
} ap_stage_cost;

/* Layers of chunk k (0..v-1) of a rank holding n layers in v chunks: as even as possible, the
 * remainder on its first chunks. The layout the partitioner gives interleaved ranks. */
int ap_stage_chunk_layers(int n, int v, int k);

/* Cost of pipeline rank r of plan p holding the `n` layers [first, first + n). With vp = 1 the
 * trainer must accept uneven stages (or the range must be the uniform split). With vp > 1 the
 * model's layers must all be of one kind: rank r holds n layers spread over its chunks by
 * ap_stage_chunk_layers (`first` only checks the range).
 * p->stage_layers is ignored. rc_layers > 0 sets p->stage_recompute[r] (layers of this stage
 * recomputed in full; meaningful when p->recompute is FULL), else the plan's is kept. `opts`
 * may be NULL. Returns the cost model's status (AP_ERR_INFEASIBLE with the rule named when the
 * trainer refuses). */
ap_status ap_stage_cost_eval(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, int r, int first, int n, int rc_layers,
                             ap_stage_cost *out, ap_err *err);

/* ap_estimate_plan as the partitioner calls it: the same arguments and result, plus a check
 * that every stage time and memory figure it returns is finite (AP_ERR_INTERNAL otherwise):
 * with opts->ranks_only, those of the ranks asked for. */
ap_status ap_stage_estimate(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                            const ap_estimate_opts *opts, ap_estimate *out, ap_err *err);

/* Memo of ap_stage_cost_eval for one (model, cluster, plan). Opaque; ap_stage_table_free frees
 * it. The model and cluster are borrowed (they must outlive the table, unchanged); the plan and
 * opts are copied. A layer-price memo in opts->cache is borrowed too, so the tables of one
 * model and cluster can share it (one thread at a time); without one the table keeps its own. */
typedef struct ap_stage_table ap_stage_table;

ap_status ap_stage_table_new(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_estimate_opts *opts, ap_stage_table **out, ap_err *err);
void ap_stage_table_free(ap_stage_table *t);

/* The cost of rank r holding [first, first + n) with rc_layers as in ap_stage_cost_eval (the
 * memo is keyed by the effective count min(rc_layers, n)) into *out: evaluated on first use,
 * then memoised. The pointer stays valid until ap_stage_table_free. On failure *out is NULL and
 * the cost model's status is returned (err says why). */
ap_status ap_stage_table_get(ap_stage_table *t, int r, int first, int n, int rc_layers,
                              const ap_stage_cost **out, ap_err *err);

/* The memoised cost of that entry, or NULL when it has not been priced (nothing is priced). */
const ap_stage_cost *ap_stage_table_peek(const ap_stage_table *t, int r, int first, int n,
                                         int rc_layers);

/* Price the entries of ranks[0..k) holding n layers (recomputing rc_layers as above) in as few
 * cost-model calls as possible: one layout puts n layers on as many of them as fit side by side
 * (each rank is priced from its own layers only; an interleaved rank's spread evenly over its
 * chunks, as ap_stage_cost_eval does). Models of one layer kind; a no-op otherwise or for a
 * layout the trainer refuses (the entries are then priced one by one on use). Entries already
 * priced are skipped. */
ap_status ap_stage_table_fill_n(ap_stage_table *t, const int *ranks, int k, int n, int rc_layers,
                                ap_err *err);

/* Number of ap_estimate_plan calls the table made (for benchmarks and tests). */
long ap_stage_table_evals(const ap_stage_table *t);

#endif
