/*
 * estimate_int.h - internals shared by the cost model's three files: costmodel/estimate.c (the
 * estimate's chapters: model states, the stages, the pipeline schedule, the data-parallel
 * reduction, the optimizer, the step), costmodel/layer_cost.c (one transformer layer priced:
 * GEMMs, attention, memory-bound kernels and its TP/CP/EP communication) and
 * costmodel/collectives.c (collectives and pipeline sends on the cluster's links); and the
 * prepared estimate costmodel/stagecost.c prices its ranges with. Not a public header: callers
 * use estimate.h.
 */
#ifndef AP_ESTIMATE_INT_H
#define AP_ESTIMATE_INT_H

#include "autoplan/estimate.h"
#include "autoplan/kernels.h"

/* The short names of the functions below; the exported names carry the module prefix. */
#define allreduce_s ap_est_allreduce_s
#define alltoall_s ap_est_alltoall_s
#define coll_s ap_est_coll_s
#define coll_terms_of ap_est_coll_terms_of
#define gather_s ap_est_gather_s
#define gemm_at ap_est_gemm_at
#define group_busbw ap_est_group_busbw
#define in_domain ap_est_in_domain
#define p2p_send_s ap_est_p2p_send_s
#define pipe_cross ap_est_pipe_cross
#define price_layer ap_est_price_layer

/* What pricing a layer or a collective needs of one estimate: the model, cluster and plan, the
 * calibration, the peaks and the kernel tables. */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_trainer_caps *tr;
    ap_calib cal;
    double peak;        /* dense FLOP/s of the GEMMs in the plan's dtype */
    double peak16;      /* 16-bit peak: attention runs in bf16/fp16 even in fp8 plans
                           (Transformer Engine's fp8 recipe quantises the linear layers) */
    double hbm;         /* effective HBM bytes/s */
    double gemm_scale;
    double net_scale;
    int sms;
    const ap_kernels *k; /* kernel tables of the GPU: a measured profile over the published */
    ap_attn_impl attn;   /* the attention kernel the plan runs (ap_attn_default) */
    ap_dtype dt16;       /* the 16-bit dtype of attention and the output layer */
    struct ap_estimate_cache *memo; /* the caller's memo (coll_terms_of); NULL: none */
} ctx;

/* One layer of one kind (dense or MoE) on one rank, one micro-batch. */
typedef struct {
    double params_rank;   /* non-expert parameters of the layer on one GPU */
    double expert_rank;   /* expert parameters on one GPU */
    double act[3];        /* bytes per micro-batch for none/selective/full recompute */
    double fwd_compute_s; /* GEMMs + attention + elementwise, one micro-batch */
    double bwd_compute_s;
    double attn_fwd_s;    /* attention core forward (selective recompute redoes it) */
    double attn_core_s;   /* of that, the QK^T and PV matmuls (CP hides its ring behind it) */
    double gemm_s;        /* the forward's GEMMs (the backward runs twice as many) */
    double attn_bwd_s;    /* attention core backward */
    double tp_s;          /* exposed TP communication, forward */
    double tp_bwd_s;      /* exposed TP communication, backward */
    double tp_total_s;    /* TP communication before overlap, forward */
    double tp_bwd_total_s; /* TP communication before overlap, backward */
    double cp_s;          /* exposed CP exchange (ring or all-to-all), forward */
    double cp_bwd_s;      /* exposed CP exchange, backward */
    double ep_s;          /* EP all-to-all, forward */
    double model_flops;   /* forward FLOPs per micro-batch counted for MFU (matmul params) */
    double attn_flops;    /* forward attention FLOPs (not halved) */
    double sac_rec_s;     /* per-op selective checkpointing (torchtitan): forward recompute of
                             the matmuls it does not keep and of the memory-bound kernels */
    double sac_rec_flops; /* the FLOPs of those matmuls */
    double sac_rec_g[2];  /* of those matmuls, the ones fed by the attention's and the MLP's
                             sequence-parallel all-gather (0: none recomputed) */
    double sac_rec_tp_s;  /* the sequence-parallel all-gathers that recompute runs again */
} layer_cost;

/* ---- costmodel/layer_cost.c ---- */

/* Seconds of a GEMM (M x K) * (K x N) in dtype dt at the kernel table's efficiency. */
double gemm_at(const ctx *x, ap_dtype dt, double M, double N, double K);

/* Price layer `idx` (its kind stands for every layer of that kind): parameters on one GPU,
 * activations per recompute level, forward/backward compute and communication, model FLOPs. */
void price_layer(const ctx *x, int64_t idx, layer_cost *lc);

/* ---- costmodel/collectives.c ---- */

/* Bus bandwidth of a group of n ranks, k per NVLink domain; *domains gets the domains it
 * spans. */
double group_busbw(const ctx *x, int n, int k, int *domains);

/* The NCCL choices of a call shape (kernels.h ap_kernels_coll_terms), from x's memo where it
 * has one (estimate.c), else worked out into *scratch; valid until the memo's next lookup. */
const ap_coll_terms *coll_terms_of(const ctx *x, ap_coll_op op, int n, int domains, double bw,
                                   int nvlink, ap_coll_terms *scratch);

/* One collective call of `bytes` (nccl-tests size) over n ranks, k per domain, seconds. */
double coll_s(const ctx *x, ap_coll_op op, double bytes, int n, int k);
double allreduce_s(const ctx *x, double bytes, int n, int k);
double gather_s(const ctx *x, double bytes, int n, int k);
double alltoall_s(const ctx *x, double bytes, int n, int k);

/* Ranks of a group with stride `inner` that share one NVLink domain. */
int in_domain(const ctx *x, int n, int inner);

/* What hiding hidden_s seconds of communication behind compute costs that compute
 * (estimate.h AP_OVERLAP_COST, Lee et al. 2025); 0 for hidden_s <= 0. */
static inline double overlap_cost_s(double hidden_s) {
    return hidden_s > 0 ? hidden_s * AP_OVERLAP_COST : 0;
}

/* One pipeline send of `bytes` between adjacent stages, seconds. */
double p2p_send_s(const ctx *x, double bytes);
/* Whether the plan's pipeline spans more than one NVLink domain (its stages talk over the
 * network). */
int pipe_cross(const ctx *x);

/* ---- costmodel/estimate.c: a prepared estimate (stagecost.c) ---- */

/* An estimate of plan p with its plan-wide part done once: the trainer's checks but the
 * layout's, and setup (layer prices, shards, the kernel tables); then any layout of the same
 * plan prices its ranks as ap_estimate_plan would, bit for bit. */
typedef struct ap_est_prep ap_est_prep;

/* Prepare plan p (as ap_estimate_plan normalises and checks it) under opts; *out NULL and the
 * estimate's error when p itself is refused. */
ap_status ap_est_prep_new(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                          const ap_estimate_opts *opts, ap_est_prep **out, ap_err *err);
void ap_est_prep_free(ap_est_prep *pp);
/* The prepared plan, normalised (what a layout is written over). */
const ap_plan *ap_est_prep_plan(const ap_est_prep *pp);
/* ap_estimate_plan(m, c, &e->plan, opts, e) for e->plan = the prepared plan with another
 * layout (nchunks, stage_layers, stage_recompute) and opts = the prepared options with
 * ranks_only set: the layout checked (ap_plan_check_layout), the ranks asked for priced. */
ap_status ap_est_prep_ranks(const ap_est_prep *pp, const ap_estimate_opts *opts, ap_estimate *e,
                            ap_err *err);

#endif
