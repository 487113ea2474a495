/*
 * sim_int.h - the simulator's internals shared by its files: sim/sim.c (schedule, model
 * states, replay, the result), sim/simlayer.c (the tensors of one transformer layer) and
 * sim/simreport.c (accessors, descriptions, JSON). Not a public header: callers use
 * sim.h. The ap_simg_* functions are the generator's internal interface.
 */
#ifndef AP_SIM_INT_H
#define AP_SIM_INT_H

#include "autoplan/sim.h"

/* One simulated rank: the public view and the arrays it borrows from (owned here). */
typedef struct rank_store {
    ap_sim_rank r;
    ap_sim_op *ops;
    ap_sim_tensor *ts;
    ap_sim_event *ev;                 /* NULL unless opts.record_curves */
    int64_t *acurve, *rcurve;         /* per event (record_curves) */
    int64_t *opk_cat, *ope_cat;       /* per op x AP_SIM_NCAT (record_curves) */
    int32_t *opk_ev;                  /* per op (record_curves) */
    int32_t *live;                    /* tensors live at the allocated peak */
    int capts, capev, capops;         /* the capacities of ts, of ev and the curves, of the
                                         per-op arrays (spare_give) */
} rank_store;

/* Free a rank's per-event arrays (events, curves, per-op peaks), or give them to the run's
 * spares while it keeps some (sim.c), and set them to NULL: what release_events drops and
 * what ap_sim_free frees with the rest. */
void ap_simg_free_events(ap_sim *s, rank_store *rs);

struct sim_spares;

struct ap_sim {
    ap_model m;
    ap_plan p;
    ap_sim_opts o;
    double capacity_bytes, budget_bytes, overhead_bytes;
    int nranks;
    rank_store *ranks;
    struct sim_spares *spares; /* released ranks' arrays for the next ranks (sim.c); NULL
                                  outside run_ranks */
};

/* Rank a before rank b as the worst (ap_sim_worst_rank, keep_worst): the higher device peak,
 * then the lower stage. */
static inline int ap_simg_rank_worse(const ap_sim *s, int a, int b) {
    int64_t pa = s->ranks[a].r.device_peak_bytes, pb = s->ranks[b].r.device_peak_bytes;
    return pa > pb || (pa == pb && a < b);
}

/* ---- the generator of one rank (sim.c, simlayer.c) -------------------------------------- */

typedef struct lsz { /* bytes of one layer's tensors for one micro-batch on this rank */
    int is_moe;
    int64_t x;          /* residual stream (layer input/output), sp-split */
    int64_t ln;         /* norm output saved (sp-split) */
    int64_t gather;     /* sp all-gather of a norm output, full sequence (0 without sp) */
    int64_t qkv, ctx, lse, softmax, smask, proj, hmask, fc1, act, fc2;
    int64_t router, disp, efc1, eact, eout, sfc1, sact;
    int64_t eager_attn, eager_mlp; /* eager composites' extra saves (0 when fused) */
    int64_t p_dense, p_expert; /* parameters held on this rank (tp/ep split, before ZeRO) */
    int64_t p_linear;          /* GEMM weights (fp8 copies) */
} lsz;

typedef struct unit { /* a block that owns parameters: a layer, the embedding or the head */
    int32_t layer;
    int64_t p_dense, p_expert, p_linear;
    int32_t t_weight, t_grad, t_gathered, t_accum;
    int gather_refs;  /* micro-batches holding the gathered copy (zero2_keeps_gathered) */
    int bwd_done;     /* micro-batches whose backward went through this unit */
} unit;

typedef struct gen {
    const ap_model *m;
    const ap_plan *p;
    const ap_trainer_caps *caps;
    int stage, pp, vp;
    int64_t L, mbs_n; /* micro-batches per iteration */
    /* chunks of this rank */
    int ck_first[AP_MAX_CHUNKS], ck_n[AP_MAX_CHUNKS], ck_base[AP_MAX_CHUNKS], ck_rc[AP_MAX_CHUNKS];
    int nloc;
    lsz *sz;        /* per local layer */
    unit *units;    /* per local layer, then embedding, then head */
    int nunits, u_embed, u_head;
    int32_t *saved; /* [mb row][local layer][kind] */
    int32_t *ends;  /* [mb row][4]: embed mask, final norm out, logits saved, head input */
    int mb_rows;    /* rows of saved and ends: micro-batch mb uses row mb % mb_rows, enough rows
                       for the micro-batches in flight (schedule_rows) */
    int row;        /* the row of the pass being generated */
    ap_sim_pass *it;/* the rank's passes in order (ap_sim_schedule) */
    uint8_t *opens; /* per pass: 1 when it is its micro-batch's first (the rows are cleared) */
    int nit;
    /* growing arrays */
    ap_sim_op *ops;
    int nops, capops;
    ap_sim_tensor *ts;
    int nts, capts;
    ap_sim_event *ev;
    int nev, capev;
    int nomem;      /* host allocation failed */
    int bad_free;   /* a free that matches no allocation (a generator bug) */
    /* replay state: the allocator sees every event as it is generated */
    ap_alloc *al;
    int32_t *blk;   /* allocator block of each tensor (capts) */
    int record;     /* keep events, curves and per-op snapshots */
    int64_t *acurve, *rcurve; /* capev */
    int32_t *opk_ev;          /* capops */
    int64_t *opk_cat, *ope_cat;
    int64_t live, cat[AP_SIM_NCAT], apeak, rpeak, alloc_at_rpeak, baseline;
    int64_t over_res;  /* the largest reserved figure tested against the budget so far */
    int64_t opk_live;  /* allocated bytes at the open operation's peak event (record) */
    int peak_ev, peak_op, over_ev, over_op;
    double budget, overhead;
    /* a streamed rank (ap_sim_opts.stream): 1 the counting pass, 2 the replay, 0 otherwise.
       Freed tensor slots are reused (fl), each slot with its tensor's creation number and,
       when it was live at the peak, its index among the kept tensors */
    int stream;
    int32_t *fl, *serial, *keep; /* capts each */
    int nfl;
    int32_t ncreated;            /* tensors created (streamed ranks) */
    struct stream_rank *sr;      /* the replay's summaries (sim.c), NULL in the first pass */
    /* bytes common to all layers */
    int64_t xb, hmask_b, logits_b;
    /* trainer behaviour */
    int lazy_grads, torch_loss, gather_mode, gather_keep, fetch_frac_mode, prefetch;
    int grads_sharded, reduce_per_mb, foreach_adam;
    int64_t ipg_b;               /* the contiguous-gradient bucket's bytes at the peak (0: none) */
    int32_t t_ipg;               /* that bucket while it is live (-1: not) */
    double D_dense, D_expert;
} gen;

/* The tensor saved under kind k by local layer loc for micro-batch mb (-1 when none). mb is
 * always the micro-batch of the pass being generated, whose row (mb % mb_rows) schedule()
 * works out once per pass: no division per access. */
#define SV(g, mb, loc, k)                                                                          \
    ((g)->saved[(((int64_t)(g)->row * (g)->nloc + (loc)) * AP_SIM_NKINDS) + (k)])

#define ACT AP_SIM_CAT_ACTIVATIONS
#define OTH AP_SIM_CAT_OTHER

static inline int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

/* Allocate a tensor (one event, replayed at once); -1 for an empty tensor. */
int32_t ap_simg_tensor(gen *g, int kind, int cat, int32_t layer, int32_t mb, int64_t bytes,
                       int is_grad);
/* Free tensor id (ignored for -1); a double free marks the rank as broken (bad_free). */
void ap_simg_free(gen *g, int32_t id);
/* A zeroed generator for pipeline rank `stage` of plan p: the rank's chunks, their layers and
 * full-recompute counts (no allocator, no arrays). */
void ap_simg_place(gen *g, const ap_model *m, const ap_plan *p, int stage);
/* Close the current operation and open a new one. */
void ap_simg_op(gen *g, int type, int chunk, int32_t layer, int32_t mb);
/* The runtime trainer's iteration (simrt.c): its model states, schedule and tensors. */
void ap_simrt_generate(gen *g);

/* Forward modes of a layer: saving for backward, run without autograd (a fully recomputed
 * layer: only its input is kept), or the recompute before its backward. */
enum { MODE_SAVE = 0, MODE_DISCARD, MODE_RECOMPUTE };

/* Bytes of layer `layer`'s tensors for one micro-batch on this rank. */
void ap_simg_layer_sizes(const gen *g, int64_t layer, lsz *z);
/* Forward of global layer `layer` (local index loc) for micro-batch mb from its saved input x;
 * returns the output (the next layer's input). */
int32_t ap_simg_layer_fwd(gen *g, int loc, int32_t layer, int32_t mb, int mode, int selective,
                          int32_t x);
/* Backward of one layer from the gradient of its output (freed); frees the layer's saved
 * tensors as their consumers' backward runs; returns the gradient of its input. */
int32_t ap_simg_layer_bwd(gen *g, int loc, int32_t layer, int32_t mb, int selective,
                          int32_t g_out);

#endif
