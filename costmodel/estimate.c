/*
 * estimate.c - the analytical cost model: per-GPU memory of every pipeline stage and the time
 * of one training step for a (model, cluster, plan).
 *
 * ap_estimate_plan reads top to bottom as a short driver over named chapters that share one
 * context (est): normalise the plan; price one layer of each kind (dense, MoE) once
 * (layer_cost.c: its parameters on one GPU, its activations under each recompute level, and its
 * forward/backward time split into GEMMs, attention, memory-bound kernels and TP/CP/EP
 * communication; collectives.c prices every collective and pipeline send); then for every
 * pipeline rank its layers, model states under the trainer's ZeRO/sharding (trainer.c) and
 * offload, activations of the in-flight micro-batches, overheads (temporaries, allocator,
 * device), and its time per micro-batch; then the pipeline schedule,
 * the data-parallel reduction, the optimizer and offload, the throughput and the memory
 * verdict. The reported exposed time parts sum to the step time.
 *
 * Everything is O(pp * vp) per plan with no allocation: the search calls this millions of
 * times.
 */
#include "estimate_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>


/* Part of every plan-cache key: bump it with every change that moves an estimate, so results
 * cached by an older cost model miss. */
const char *ap_costmodel_version(void) { return "costmodel-14"; }

void ap_estimate_copy(ap_estimate *dst, const ap_estimate *src) {
    if (dst == src) return;
    size_t n = src->nstages < 0               ? 0
               : src->nstages > AP_MAX_STAGES ? AP_MAX_STAGES
                                              : (size_t)src->nstages;
    dst->plan = src->plan;
    memcpy(&dst->time, &src->time, offsetof(ap_time, stage_fwd_s));
    memcpy(dst->time.stage_fwd_s, src->time.stage_fwd_s, n * sizeof *src->time.stage_fwd_s);
    memcpy(dst->time.stage_bwd_s, src->time.stage_bwd_s, n * sizeof *src->time.stage_bwd_s);
    dst->tp = src->tp;
    dst->nstages = src->nstages;
    memcpy(dst->stages, src->stages, n * sizeof *src->stages);
    memcpy(&dst->worst_stage, &src->worst_stage,
           sizeof *src - offsetof(ap_estimate, worst_stage));
}

/* ---- model states --------------------------------------------------------------------- */

/* What ap_mem_model_states reads of a plan, looked up once per estimate (a stage asks twice). */
typedef struct {
    double w, g, o;   /* weight, gradient, master + optimizer bytes per parameter, unsharded */
    double z3;        /* the trainer's ZeRO-3 state bytes per parameter (0: the sum above) */
    int sharded;      /* optimizer states shard (ZeRO-1 and up, BF16_Optimizer) */
    int shard_g, shard_w;
} ms_coef;

static void ms_coef_of(const ap_plan *p, ms_coef *k) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    k->w = ap_plan_weight_bytes(p);
    k->g = ap_plan_grad_bytes(p);
    k->o = ap_plan_master_bytes(p) + ap_plan_optim_bytes(p);
    k->sharded = ap_plan_optim_sharded(p); /* with DeepSpeed's BF16_Optimizer too (trainer.c) */
    k->shard_g = p->zero >= 2;
    k->shard_w = p->zero >= 3 || (p->zero >= 2 && t->zero2_keeps_gathered);
    k->z3 = p->zero == 3 ? t->zero3_state_bytes : 0;
}

/* ZeRO (Rajbhandari et al. 2020, Sec. 5, Fig. 1): stage 1 shards optimizer states (and fp32
 * master weights), stage 2 also gradients, stage 3 also the parameters. Megatron's distributed
 * optimizer is stage 1: 6 + 12/d bytes/param. */
static void ms_apply(const ms_coef *k, double n, int shard, double *weights, double *grads,
                     double *optim) {
    double d = shard > 0 ? (double)shard : 1.0;
    double w = k->w * n, g = k->g * n;
    double o = k->o * n;
    if (k->sharded) o /= d;
    if (k->shard_g) g /= d;
    if (k->shard_w) w /= d;
    if (k->z3 > 0) o = (k->z3 * n) / d - w - g;
    *weights = w;
    *grads = g;
    *optim = o;
}

void ap_mem_model_states(const ap_plan *p, double n, int shard, double *weights, double *grads,
                         double *optim) {
    ms_coef k;
    ms_coef_of(p, &k);
    ms_apply(&k, n, shard, weights, grads, optim);
}

/* ---- the layer-price memo (estimate.h) ----------------------------------------------------- */

/* Everything the two layer prices and the attention check read: the model, cluster and kernel
 * tables (by address), the calibration and scales, and the plan's layer shape and trainer
 * (layer_cost.c, activations.c). */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_kernels *k;
    ap_calib cal;
    double gemm_scale, net_scale;
    int fp8_recipe;  /* the quantisation passes of fp8 GEMM inputs (layer_cost.c gemm_s) */
    int64_t mbs, seq;
    int tp, cp, ep, etp, sp, overlap_tp, dtype, flash_attn, attn;
    int trainer; /* torchtitan's per-op selective checkpointing (ap_mem_op_sac) */
    int elementwise; /* eager or fused norms, rotary and SwiGLU (layer_cost.c) */
    int cp_a2a, te_attention, no_tp_bwd_overlap; /* CP's kind and kernels, the TP backward */
} price_key;

/* The memo is an open-addressed table (linear probing) that doubles at half load, from
 * PRICE_SLOTS0 up to PRICE_SLOTS_MAX entries; a full table at its largest (or one that could not
 * grow) overwrites the home slot instead. A search meets a few hundred shapes (megatron-1t on
 * 3072 GPUs: 336); the former 64-slot direct-mapped table missed on 19% of its calls, mostly on
 * shapes it had priced before and lost to a collision. */
#define PRICE_SLOTS0 8 /* a stage table's memo holds one or two shapes: small to make */
#define PRICE_SLOTS_MAX 4096
typedef struct {
    int valid;
    price_key key;
    layer_cost dense, moe;
    double head_f, head_tp;
    int attn_ok;
} price_slot;

/* The collective memo: a direct-mapped table of call shapes and their NCCL choices (a search
 * prices dozens to hundreds of shapes, the data-parallel and pipeline calls of every plan: a
 * ZeRO-3 sweep gathers over every data-parallel size of every point; a stage table a handful;
 * a collision works the shape out again). 256 slots: the torchtitan sweep of mixtral-8x7b
 * missed 15% of its 3.0 million lookups with 32 (-1.4% instructions); 1,024 gained no more. */
#define COLL_SLOTS 256
typedef struct {
    const ap_kernels *k;
    double bw;
    int op, n, domains, nvlink, valid;
    ap_coll_terms t;
} coll_slot;

struct ap_estimate_cache {
    int cap, n;          /* slots (a power of two) and slots in use */
    price_slot *slot;
    coll_slot *coll;     /* COLL_SLOTS, made on the first collective priced */
};

/* cap slots, each marked empty (the rest of a slot is written when it is filled: no need
 * to clear the 0.6 kB of each, a table being made for each partition solve) */
static price_slot *slots_new(int cap) {
    price_slot *s = ap_malloc((size_t)cap * sizeof *s);
    if (s)
        for (int i = 0; i < cap; i++) s[i].valid = 0;
    return s;
}

ap_estimate_cache *ap_estimate_cache_new(void) {
    ap_estimate_cache *c = ap_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slot = slots_new(PRICE_SLOTS0);
    if (!c->slot) {
        ap_free(c);
        return NULL;
    }
    c->cap = PRICE_SLOTS0;
    return c;
}

void ap_estimate_cache_free(ap_estimate_cache *c) {
    if (!c) return;
    ap_free(c->coll);
    ap_free(c->slot);
    ap_free(c);
}

/* What ap_estimate_plan and setup look up when the options leave it out, looked up once. */
void ap_estimate_opts_resolve(ap_estimate_opts *o, const ap_gpu *gpu, ap_calib *cal,
                              ap_kernels **built) {
    *built = NULL;
    if (!o->calib) {
        ap_calib_default(gpu, cal);
        o->calib = cal;
    }
    if (o->kernels) return;
    if (!o->profile) {
        o->kernels = ap_kernels_published(gpu);
    } else if ((*built = ap_malloc(sizeof **built))) {
        ap_err berr;
        if (ap_kernels_build(gpu, o->profile, *built, &berr) == AP_OK) o->kernels = *built;
    }
}

static void key_of(const ctx *x, price_key *key) {
    const ap_plan *p = x->p;
    memset(key, 0, sizeof *key); /* the padding too: keys compare with memcmp */
    key->m = x->m;
    key->c = x->c;
    key->k = x->k;
    key->cal = x->cal;
    key->gemm_scale = x->gemm_scale;
    key->net_scale = x->net_scale;
    key->fp8_recipe = (int)ap_plan_fp8_recipe(p);
    key->mbs = p->mbs;
    key->seq = p->seq;
    key->tp = p->tp;
    key->cp = p->cp;
    key->ep = p->ep;
    key->etp = p->etp;
    key->sp = p->sp;
    key->overlap_tp = p->overlap_tp;
    key->dtype = (int)p->dtype;
    key->flash_attn = p->flash_attn;
    key->attn = (int)x->attn;
    key->trainer = (int)p->trainer;
    key->elementwise = p->elementwise;
    key->cp_a2a = ap_plan_cp_a2a(p);
    key->te_attention = p->te_attention;
    key->no_tp_bwd_overlap = p->no_tp_bwd_overlap;
}

static uint64_t key_hash(const price_key *key) {
    /* the shape (the rest is the same for every call through one cache as a rule, and a key
     * that differs there still compares unequal) */
    uint64_t h = (uint64_t)key->tp * 0x9E3779B97F4A7C15ull ^ (uint64_t)key->cp * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)key->ep * 0x165667B19E3779F9ull ^ (uint64_t)key->mbs * 0x27D4EB2F165667C5ull ^
                 (uint64_t)key->seq * 0x85EBCA77C2B2AE63ull ^ (uint64_t)(key->sp + 2 * key->overlap_tp +
                 4 * key->dtype + 16 * key->flash_attn + 32 * key->attn + 256 * key->etp +
                 4096 * key->trainer + 65536 * key->cp_a2a);
    return ap_hash_mix(h);
}

/* The slot holding key, or an empty one where it would go. */
static price_slot *probe(price_slot *slot, int cap, const price_key *key) {
    size_t mask = (size_t)cap - 1, i = (size_t)(key_hash(key) & mask);
    while (slot[i].valid && memcmp(&slot[i].key, key, sizeof *key) != 0) i = (i + 1) & mask;
    return &slot[i];
}

/* Double the table; 0 (the table unchanged) when it is at its largest or memory is short. */
static int grow(ap_estimate_cache *c) {
    if (c->cap >= PRICE_SLOTS_MAX) return 0;
    int cap = 2 * c->cap;
    price_slot *s = slots_new(cap);
    if (!s) return 0;
    for (int i = 0; i < c->cap; i++)
        if (c->slot[i].valid) *probe(s, cap, &c->slot[i].key) = c->slot[i];
    ap_free(c->slot);
    c->slot = s;
    c->cap = cap;
    return 1;
}

/* The slot of key: valid when the shape was priced before; else an invalid slot, which the
 * caller fills and marks valid before it returns. The table stays at most half full, so a probe
 * always ends. */
static price_slot *slot_of(ap_estimate_cache *c, const price_key *key) {
    price_slot *ps = probe(c->slot, c->cap, key);
    if (ps->valid) return ps;
    if (2 * (c->n + 1) > c->cap) {
        if (!grow(c)) {
            /* at its largest: the home slot is overwritten (it is filled again at once, so
             * the probe sequences through it stay unbroken) */
            ps = &c->slot[key_hash(key) & (size_t)(c->cap - 1)];
            ps->valid = 0;
            return ps;
        }
        ps = probe(c->slot, c->cap, key);
    }
    c->n++;
    return ps;
}

const ap_coll_terms *coll_terms_of(const ctx *x, ap_coll_op op, int n, int domains, double bw,
                                   int nvlink, ap_coll_terms *scratch) {
    ap_estimate_cache *c = x->memo;
    if (c && !c->coll && (c->coll = ap_malloc(COLL_SLOTS * sizeof *c->coll)))
        for (int i = 0; i < COLL_SLOTS; i++) c->coll[i].valid = 0;
    if (!c || !c->coll) { /* no memo (or no memory for it): worked out here */
        ap_kernels_coll_terms(x->k, op, n, domains, bw, nvlink, scratch);
        return scratch;
    }
    uint64_t bits;
    memcpy(&bits, &bw, sizeof bits);
    uint64_t h = ((uint64_t)op * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Full) ^
                 ((uint64_t)domains * 0x165667B19E3779F9ull) ^ bits;
    coll_slot *cs = &c->coll[ap_hash_mix(h) & (COLL_SLOTS - 1)];
    if (!(cs->valid && cs->k == x->k && cs->bw == bw && cs->op == (int)op && cs->n == n &&
          cs->domains == domains && cs->nvlink == nvlink)) {
        ap_kernels_coll_terms(x->k, op, n, domains, bw, nvlink, &cs->t);
        cs->k = x->k;
        cs->bw = bw;
        cs->op = (int)op;
        cs->n = n;
        cs->domains = domains;
        cs->nvlink = nvlink;
        cs->valid = 1;
    }
    return &cs->t;
}

/* ---- the estimate: shared context ----------------------------------------------------------- */

/* Everything the chapters of one estimate share. */
typedef struct {
    ctx x;                        /* model, cluster, plan, calibration, peaks */
    const ap_estimate_opts *opts;
    ap_estimate *e;
    layer_cost dense, moe;        /* one layer of each kind, priced once */
    double head_f, head_tp;       /* the output layer's forward GEMM and the loss's TP
                                     all-reduce, one micro-batch (stage_compute) */
    double t, h, V, T, out_t;     /* tp, hidden, vocabulary, tokens per micro-batch, sp split */
    int64_t mb;                   /* micro-batches per step per data-parallel rank */
    int dense_shard;              /* ranks reducing dense gradients: dp x cp */
    int state_shard;              /* ranks sharding dense states: dp x cp, or the plan's
                                     zero_group */
    int expert_shard;             /* ranks sharding expert states: dp cp tp / (ep etp) */
    ms_coef ms;                   /* model-state bytes per parameter (ms_apply) */
    double emb_rank, head_rank;   /* embedding and output-layer parameters on one GPU */
    /* accumulated over the pipeline ranks */
    double worst_dev;             /* highest device bytes so far */
    double Tmax, Tsum;            /* slowest and summed (t_f + t_b) per micro-batch */
    double crit_compute, crit_recompute, crit_tp, crit_cp, crit_ep, crit_tp_total, crit_z3;
    double max_stage_params, max_stage_shardable;
    double hfu_extra_flops;       /* recompute forward FLOPs per micro-batch, whole model / tp */
    double model_flops_mb;        /* model FLOPs of one micro-batch, whole model / tp */
    double host_per_gpu_max;      /* offloaded bytes of the GPU holding most */
    double max_stage_expert;      /* expert parameters on the GPU holding most */
    int max_stage_layers;         /* transformer layers on the rank holding most parameters */
    double grad_reduce_bytes;     /* bytes per gradient element in the DP reduction */
    double gather_bytes;          /* bytes per parameter of a ZeRO-3 / FSDP all-gather */
    double loss_bytes;            /* bytes per logit element the loss keeps at its peak */
    double z3_step;               /* exposed ZeRO-3 traffic paid once per step (under PP) */
    /* the step */
    double pipe, p2p, z3_total, local_params;
    double sum_local;             /* the parameters each rank updates, summed over the ranks */
    double sum_params;            /* the parameters each rank holds, summed over the ranks */
    double device_overhead;       /* bytes outside the allocator (ap_mem_device_overhead_bytes) */
    int uniform;                  /* the plan's layout is the uniform one (no stage_layers) */
    ap_uniform_split split;       /* its chunks, when uniform */
    int closed_form;              /* stage_layers counts a rank's chunks in closed form
                                     (closed_form_applies) */
    int all_moe;                  /* with it, every layer is an MoE layer (else none is) */
    const int *chunk_first;       /* an explicit layout of a model with experts: each chunk's
                                     first layer (price_ranks' prefix sums); else NULL */
} est;

/* One pipeline rank while it is priced. */
typedef struct {
    /* the kind (stage_layers); stage_new_kind clears everything from frac_full on */
    int r, first, last;
    int nd, nm;                   /* dense and MoE layers on the rank (all its chunks) */
    int n_rc_full;                /* layers recomputed in full */
    int layers;
    double frac_full;             /* fraction of the rank's layers recomputed in full */
    double p_dense, p_exp;        /* non-expert and expert parameters on this GPU */
    double p_layers;              /* of those, the transformer layers' (no embedding or head) */
    double fwd_c, bwd_c;          /* compute of one micro-batch */
    double tp_f, cp_f, ep_f;      /* exposed communication, forward */
    double cp_b;                  /* exposed CP communication, backward */
    double tp_b;                  /* exposed TP communication, backward */
    double tp_all;                /* TP communication before overlap, forward and backward */
    double rec, z3;               /* recompute; exposed ZeRO-3 traffic per micro-batch */
    double z3_step;               /* exposed ZeRO-3 traffic once per step (PP schedules) */
    double stage_f, stage_b;      /* the rank's forward and backward per micro-batch */
    double model_flops, hfu_extra;/* FLOPs of one micro-batch on the rank, recompute's extra */
    /* what every rank of the kind keeps, whatever its in-flight count (stage_kind_activations,
     * stage_kind_other) */
    double act_mb;                /* activation bytes per in-flight micro-batch */
    double act_layers_mb;         /* of that, the transformer layers' */
    double act_transient;         /* the backward working set */
    double other;                 /* temporaries: gathered parameters, fp8 copies, buffers */
} stage;

/* Ranks of the same kind (first or last, dense and MoE layers, recomputed layers) cost the
 * same; only their in-flight micro-batches differ. The driver prices each kind once. */
#define STAGE_KINDS 8
typedef struct {
    uint64_t key;                 /* stage_layers' kind */
    stage S;
    ap_stage_mem states;          /* params, grads, optimizer, host bytes */
} stage_kind;

/* ---- chapter 1: the plan as evaluated ------------------------------------------------------- */

/* Fill what the plan leaves implicit (etp, dp from the GPU count, grad_accum) and ask the
 * trainer table whether it can run it at all. */
static ap_status normalise_plan(const ap_model *m, const ap_cluster *c, const ap_plan *pin,
                                int checked, ap_plan *pl, ap_err *err) {
    if (pl != pin) *pl = *pin;
    if (!checked) { /* checked: ap_plan_check passed on it as given, nothing here changes it */
        if (pl->etp < 1) pl->etp = 1;
        if (pl->dp < 1 && pl->tp > 0 && pl->pp > 0 && pl->cp > 0)
            pl->dp = c->gpus / (pl->tp * pl->pp * pl->cp);
        if (pl->mbs > 0 && pl->dp > 0 && pl->gbs % (pl->mbs * pl->dp) == 0)
            pl->grad_accum = pl->gbs / (pl->mbs * pl->dp);
        ap_status st = ap_plan_check(pl, m, c, 1, err);
        if (st != AP_OK) return st;
    }
    if (pl->pp > AP_MAX_STAGES)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d exceeds the supported %d stages", pl->pp,
                          AP_MAX_STAGES);
    if ((int64_t)pl->pp * pl->vp > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d x vp %d pipeline chunks exceed the "
                          "supported %d", pl->pp, pl->vp, AP_MAX_CHUNKS);
    return AP_OK;
}

/* ---- chapter 2: hardware, shapes and the two layer kinds ------------------------------------ */

static ap_status setup(est *E, const ap_model *m, const ap_cluster *c, const ap_plan *p,
                       const ap_estimate_opts *opts, const ap_kernels *k, ap_estimate *e,
                       ap_err *err) {
    memset(E, 0, sizeof *E);
    ctx *x = &E->x;
    x->m = m;
    x->c = c;
    x->p = p;
    x->tr = ap_trainer_get(p->trainer);
    x->k = k;
    x->memo = opts->cache;
    x->dt16 = c->gpu.peak_flops[AP_DTYPE_BF16] > 0 ? AP_DTYPE_BF16 : AP_DTYPE_FP16;
    /* the attention kernel: asked for, or the trainer's default for this GPU and model; one
     * without figures for this GPU (FlashAttention-3 off Hopper) is a plan it cannot run */
    x->attn = ap_attn_default(p, m, &c->gpu);
    if (opts->calib) x->cal = *opts->calib;
    else ap_calib_default(&c->gpu, &x->cal);
    x->peak = c->gpu.peak_flops[p->dtype];
    /* attention runs in bf16/fp16 even in fp8 plans (Transformer Engine quantises the linear
     * layers only) */
    x->peak16 = p->dtype == AP_DTYPE_FP8 ? (c->gpu.peak_flops[AP_DTYPE_BF16] > 0
                                                ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                                : c->gpu.peak_flops[AP_DTYPE_FP16])
                                         : x->peak;
    x->hbm = c->gpu.hbm_bytes_per_s * x->cal.mem_bound_eff;
    x->gemm_scale = opts->gemm_eff_scale > 0 ? opts->gemm_eff_scale : 1.0;
    x->net_scale = opts->net_bw_scale > 0 ? opts->net_bw_scale : 1.0;
    x->sms = c->gpu.sm_count;
    E->opts = opts;
    E->e = e;
    E->worst_dev = -1;
    E->device_overhead = ap_mem_device_overhead_bytes(p, opts->nccl_eager);
    E->t = p->tp;
    E->h = (double)m->hidden;
    E->V = (double)m->vocab;
    E->T = (double)p->mbs * ((double)p->seq / p->cp);
    E->out_t = p->sp ? E->t : 1.0;

    /* the attention check and the two layer prices: from the memo when the shape was priced
     * before, else computed (and kept) */
    price_key key;
    price_slot *ps = NULL;
    if (opts->cache) {
        key_of(x, &key);
        ps = slot_of(opts->cache, &key);
        if (!ps->valid) {
            ps->key = key;
        } else {
            E->dense = ps->dense;
            E->moe = ps->moe;
            E->head_f = ps->head_f;
            E->head_tp = ps->head_tp;
            if (!ps->attn_ok)
                return ap_err_set(err, AP_ERR_INFEASIBLE, "attention '%s' does not run on %s "
                                  "(no kernel figures for it: `autoplan profile show %s`)",
                                  ap_attn_impl_name(x->attn), c->gpu.name, c->gpu.name);
            goto priced;
        }
    }
    int attn_ok = 1;
    if (x->attn != AP_ATTN_UNFUSED) {
        double f, b;
        ap_kernels_attn_eff(k, x->attn, 1, (double)m->head_dim, (double)p->seq, &f, &b);
        attn_ok = f > 0 && b > 0;
    }
    if (attn_ok) {
        /* price the two layer kinds; a model without one of them keeps its cost zero (it is
         * multiplied by zero layers, and 0 x NaN would be NaN) */
        int64_t first_dense = -1, first_moe = -1;
        for (int64_t i = 0; i < m->layers && (first_dense < 0 || first_moe < 0); i++) {
            if (ap_model_layer_is_moe(m, i)) { if (first_moe < 0) first_moe = i; }
            else if (first_dense < 0) first_dense = i;
            if (m->moe.experts == 0) break;
        }
        if (first_dense >= 0) price_layer(x, first_dense, &E->dense);
        if (first_moe >= 0) price_layer(x, first_moe, &E->moe);
        /* the output layer is not a Transformer Engine linear: 16-bit even in fp8 plans; the
         * loss all-reduces three fp32 numbers per token over tp (max, sum, target logit) */
        E->head_f = gemm_at(x, x->dt16, E->T, E->V / E->t, E->h);
        if (p->tp > 1) E->head_tp = allreduce_s(x, 3.0 * E->T * 4.0, p->tp, in_domain(x, p->tp, 1));
    }
    if (ps) {
        ps->dense = E->dense;
        ps->moe = E->moe;
        ps->head_f = E->head_f;
        ps->head_tp = E->head_tp;
        ps->attn_ok = attn_ok;
        ps->valid = 1;
    }
    if (!attn_ok)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "attention '%s' does not run on %s (no "
                          "kernel figures for it: `autoplan profile show %s`)",
                          ap_attn_impl_name(x->attn), c->gpu.name, c->gpu.name);
priced:
    E->mb = p->grad_accum;
    /* gradients reduce at the trainer's dtype (fp16 training reduces 16-bit), or as asked */
    E->grad_reduce_bytes = p->grad_reduce_bytes > 0 ? p->grad_reduce_bytes
                           : p->dtype == AP_DTYPE_FP16 ? 2.0 : x->tr->grad_reduce_bytes;
    if (p->grad_reduce_bytes <= 0 && ap_plan_bf16_optimizer(p))
        E->grad_reduce_bytes = x->tr->bf16_optimizer_bytes; /* BF16_Optimizer's fp32 buffer */
    E->gather_bytes = p->gather_bytes > 0 ? p->gather_bytes
                                          : ap_plan_gathered_weight_bytes(p);
    E->loss_bytes = p->loss_bytes_per_logit > 0 ? p->loss_bytes_per_logit
                                                : x->tr->loss_bytes_per_logit;
    E->dense_shard = p->dp * p->cp;
    E->state_shard = ap_plan_zero_shard(p);
    E->expert_shard = (int)((int64_t)p->dp * p->cp * p->tp / ((int64_t)p->ep * p->etp));
    if (E->expert_shard < 1) E->expert_shard = 1;
    ms_coef_of(p, &E->ms);

    /* embedding and head on the GPU (vocab-parallel over tp); tied embeddings are duplicated
     * on the last stage where the trainer does so (Megatron) */
    double emb_total = (double)ap_model_embedding_params(m);
    double vh = E->V * E->h;
    E->emb_rank = vh / E->t + (emb_total - vh);
    double head_total = (double)ap_model_head_params(m);
    E->head_rank = m->tied_embeddings ? head_total : (head_total - vh) + vh / E->t;
    if (m->tied_embeddings && p->pp > 1 && x->tr->tied_embedding_dup) E->head_rank += vh / E->t;
    return AP_OK;
}

/* ---- chapter 3: the layers of one rank ------------------------------------------------------ */

/* Dense layers and layers recomputed in full of rank r's chunks r, r + pp, ... under a uniform
 * split of a model without MoE layers and with no chunk recompute count of its own
 * (E->closed_form): of the rank's vp chunks, those with index in [start, start + rem) hold
 * base + 1 layers, the others base; they are the k with k pp in [start - r, start + rem - r). */
static void chunks_closed_form(const est *E, int r, int *nd, int *nrc) {
    const ap_plan *p = E->x.p;
    const ap_uniform_split u = E->split;
    const int pp = p->pp, vp = p->vp;
    int longer = 0;
    if (u.rem > 0) {
        int lo = u.start - r, hi = u.start + u.rem - r;
        int klo = lo <= 0 ? 0 : (lo + pp - 1) / pp;
        int khi = hi <= 0 ? 0 : (hi + pp - 1) / pp;
        if (khi > vp) khi = vp;
        longer = khi > klo ? khi - klo : 0;
    }
    *nd = vp * u.base + longer;
    *nrc = 0;
    if (p->recompute == AP_RECOMPUTE_FULL) {
        int rl = p->recompute_layers;
        int rc0 = rl > 0 && rl < u.base ? rl : u.base;
        int rc1 = rl > 0 && rl < u.base + 1 ? rl : u.base + 1;
        *nrc = (vp - longer) * rc0 + longer * rc1;
    }
}

/* The same, chunk by chunk, for any layout: dense and MoE layers, and those recomputed in full
 * (a chunk's own count, or the plan's). A uniform layout's sizes come from E->split. */
static void chunks_each(const est *E, int r, int *nd, int *nm, int *nrc) {
    const ap_model *m = E->x.m;
    const ap_plan *p = E->x.p;
    *nd = *nm = *nrc = 0;
    for (int k = 0; k < p->vp; k++) {
        int cidx = r + k * p->pp;
        int nl = E->uniform ? ap_uniform_chunk_layers(E->split, cidx)
                            : ap_plan_chunk_layers(p, m->layers, cidx);
        int moe_here = 0;
        if (m->moe.experts > 0) {
            int f0 = E->uniform ? ap_uniform_chunk_first(E->split, cidx) : E->chunk_first[cidx];
            moe_here = (int)ap_model_moe_layers_in(m, f0, f0 + nl);
        }
        *nm += moe_here;
        *nd += nl - moe_here;
        if (p->recompute == AP_RECOMPUTE_FULL) {
            int rl = p->stage_recompute[cidx] > 0 ? p->stage_recompute[cidx] : p->recompute_layers;
            *nrc += (rl > 0 && rl < nl) ? rl : nl;
        }
    }
}

/* Rank r's layers of each kind, those recomputed in full, and whether it is the first or the
 * last, into S (only those fields: stage_new_kind clears and fills the rest); returns them as
 * the rank's kind, a number equal for ranks priced alike. This runs for every rank of every
 * plan: the common layout is counted without a loop over chunks. */
static uint64_t stage_layers(const est *E, int r, stage *S) {
    int first = r == 0, last = r == E->x.p->pp - 1, nd, nm = 0, nrc;
    if (E->closed_form) {
        chunks_closed_form(E, r, &nd, &nrc);
        if (E->all_moe) nm = nd, nd = 0;
    } else {
        chunks_each(E, r, &nd, &nm, &nrc);
    }
    S->r = r;
    S->first = first;
    S->last = last;
    S->nd = nd;
    S->nm = nm;
    S->n_rc_full = nrc;
    S->layers = nd + nm;
    /* the kind as one number: layer counts are below 2^20 (a model has at most 10,000) */
    return (uint64_t)first | (uint64_t)last << 1 | (uint64_t)nd << 2 | (uint64_t)nm << 22 |
           (uint64_t)nrc << 42;
}

/* A rank of a kind not met before: everything but its kind cleared, then the fraction of its
 * layers recomputed in full. */
static void stage_new_kind(const est *E, stage *S) {
    /* the kind's fields lead the struct: r .. layers */
    memset((char *)S + offsetof(stage, frac_full), 0, sizeof *S - offsetof(stage, frac_full));
    if (E->x.p->recompute == AP_RECOMPUTE_FULL && S->layers > 0)
        S->frac_full = (double)S->n_rc_full / (double)S->layers;
}

/* ---- chapter 4: model states of one rank ---------------------------------------------------- */

/* Parameters on this GPU, their weights, gradients and optimizer states under the trainer's
 * ZeRO stage (ap_mem_model_states; dense states shard over dp x cp, expert states over the
 * expert-data-parallel group), and what CPU offload moves to the host (ZeRO-Offload, Ren et
 * al. 2021). */
static void stage_states(const est *E, stage *S, ap_stage_mem *sm) {
    const ap_plan *p = E->x.p;
    S->p_dense = S->nd * E->dense.params_rank + S->nm * E->moe.params_rank;
    S->p_exp = S->nm * E->moe.expert_rank;
    S->p_layers = S->p_dense + S->p_exp;
    if (S->first) S->p_dense += E->emb_rank;
    if (S->last) S->p_dense += E->head_rank;

    memset(sm, 0, sizeof *sm);
    sm->stage = S->r;
    sm->layers = S->layers;
    double w1, g1, o1, w2 = 0, g2 = 0, o2 = 0; /* no expert parameters: no expert states */
    ms_apply(&E->ms, S->p_dense, E->state_shard, &w1, &g1, &o1);
    if (S->p_exp > 0) ms_apply(&E->ms, S->p_exp, E->expert_shard, &w2, &g2, &o2);
    double w = w1 + w2, gr = g1 + g2, opt = o1 + o2;
    /* CPU offload: the fraction leaves the GPU */
    double host = opt * p->offload_optimizer + w * p->offload_params;
    opt *= 1.0 - p->offload_optimizer;
    if (p->zero >= 2 && p->offload_optimizer > 0) {
        /* with sharded gradients the gradient partition moves to the host as it is produced
         * (ZeRO-Offload, Ren et al. 2021 Sec. 4.1; FSDP CPUOffload) */
        host += gr * p->offload_optimizer;
        gr *= 1.0 - p->offload_optimizer;
    }
    w *= 1.0 - p->offload_params;
    sm->params_bytes = w;
    sm->grads_bytes = gr;
    sm->optimizer_bytes = opt;
    sm->host_bytes = host;
}

/* ---- chapter 5: activations of one rank ----------------------------------------------------- */

/* In-flight micro-batches of the schedule (1F1B: min(p - i, m); interleaved: Megatron's warm-up
 * count (p - i - 1) * 2 + (v - 1) * p + 1 model chunks, Narayanan 2021 Sec. 2.2), in units of
 * whole-rank micro-batches. */
static inline double stage_inflight(const est *E, int r, int *whole) {
    const ap_plan *p = E->x.p;
    /* counted in integers (whole numbers far below 2^53: the doubles they replace were exact) */
    if (p->vp > 1) {
        int64_t chunks = (int64_t)(p->pp - r - 1) * 2 + (int64_t)(p->vp - 1) * p->pp + 1;
        int64_t cap = E->mb * p->vp;
        if (chunks > cap) chunks = cap;
        *whole = (int)((chunks + p->vp - 1) / p->vp);
        return (double)chunks / p->vp;
    }
    int64_t n = p->pp - r < E->mb ? p->pp - r : E->mb;
    *whole = (int)n;
    return (double)n;
}

/* Elements of the largest parameter tensor on a rank of this kind: the vocabulary-parallel
 * embedding on the first rank, the output layer's weight on the last where it is a tensor of
 * its own (untied, or the trainer's tied copy), and a layer's MLP input projection (h x ffn / t,
 * gate and up fused under SwiGLU as Megatron's linear_fc1 holds them; an expert's over etp). */
static double largest_param(const est *E, const stage *S) {
    const ap_model *m = E->x.m;
    const ap_plan *p = E->x.p;
    const double mats = m->act == AP_ACT_SWIGLU ? 2.0 : 1.0, vh = E->V * E->h / E->t;
    double big = 0;
    if (S->nd > 0) big = mats * (double)m->hidden * (double)m->ffn_hidden / E->t;
    if (S->nm > 0) {
        const double etp = p->etp > 0 ? p->etp : 1;
        big = fmax(big, mats * (double)m->hidden * (double)m->moe.ffn_hidden / etp);
    }
    if (S->first) big = fmax(big, vh);
    if (S->last && (!m->tied_embeddings || (p->pp > 1 && E->x.tr->tied_embedding_dup)))
        big = fmax(big, vh);
    return big;
}

/* Bytes a rank of this kind keeps per in-flight micro-batch under the plan's recompute, and its
 * backward working set: a fully recomputed layer rebuilt whole, or on the last stage the loss,
 * whichever is larger (the loss backward finishes before the last layer is rebuilt,
 * so the two are not live together: docs/simulator.md). */
static void stage_kind_activations(const est *E, stage *S) {
    const ap_model *m = E->x.m;
    const ap_plan *p = E->x.p;
    const layer_cost *d = &E->dense, *mo = &E->moe;
    const double T = E->T, h = E->h;
    double act_none = S->nd * d->act[AP_RECOMPUTE_NONE] + S->nm * mo->act[AP_RECOMPUTE_NONE];
    double act_sel = S->nd * d->act[AP_RECOMPUTE_SELECTIVE] + S->nm * mo->act[AP_RECOMPUTE_SELECTIVE];
    double act_full = S->nd * d->act[AP_RECOMPUTE_FULL] + S->nm * mo->act[AP_RECOMPUTE_FULL];
    double act_mb; /* bytes one micro-batch keeps on this rank (all its chunks) */
    if (p->recompute == AP_RECOMPUTE_FULL)
        act_mb = S->frac_full * act_full + (1.0 - S->frac_full) * act_none;
    else if (p->recompute == AP_RECOMPUTE_SELECTIVE)
        act_mb = act_sel;
    else
        act_mb = act_none;
    double layers_only = act_mb;
    if (S->first && m->dropout) act_mb += T * h / E->out_t; /* embedding dropout mask, 1 byte */
    /* a norm after the embedding (BLOOM's word_embeddings_layernorm) keeps its input, the
     * embedding's 16-bit output, for its backward: outside every recomputed layer */
    if (S->first && m->embed_norm) act_mb += 2.0 * T * h / E->out_t;
    if (S->last) act_mb += 2.0 * 2.0 * T * h / E->out_t;    /* final norm input + head input */
    double transient = 0;
    if (p->recompute == AP_RECOMPUTE_FULL && S->n_rc_full > 0)
        transient += S->nm > 0 ? mo->act[AP_RECOMPUTE_NONE] : d->act[AP_RECOMPUTE_NONE];
    if (S->last) {
        /* the loss of one micro-batch: the loss kernel's bytes per logit element s*b*V/t */
        double loss = E->loss_bytes * T * E->V / E->t;
        if (loss > transient) transient = loss;
    }
    /* DeepSpeed's BF16_Optimizer adds each micro-batch's 16-bit gradients into its fp32 buffer
     * one parameter at a time, each through an fp32 copy of the gradient (runtime/
     * bf16_optimizer.py update_hp_grads: the gradient cast to the buffer's dtype, then added),
     * after the micro-batch's backward: its activations and working set are freed by then, and
     * 4 bytes x the rank's largest parameter are live */
    if (ap_plan_bf16_optimizer(p)) {
        double upcast = 4.0 * largest_param(E, S) - act_mb;
        if (upcast > transient) transient = upcast;
    }
    S->act_mb = act_mb;
    S->act_layers_mb = layers_only;
    S->act_transient = transient;
}

/* The rank's activations: its kind's per micro-batch times its in-flight count. */
static void stage_activations(const est *E, const stage *S, int r, ap_stage_mem *sm) {
    double inflight = stage_inflight(E, r, &sm->inflight);
    sm->activations_bytes = inflight * S->act_mb + S->act_transient;
    sm->layer_activations_bytes = inflight * S->act_layers_mb;
}

/* ---- chapter 6: temporaries, allocator and device overheads of one rank --------------------- */

/* The NCCL communicators a rank uses (each collective or send on a group makes one, once):
 * the tensor-parallel group, the pipeline's sends, the data-parallel (x context-parallel)
 * reduction, the context-parallel ring and the expert all-to-all. DeepSpeed's pipeline engine
 * adds the groups of its own grid beside the model's (runtime/pipe/topology.py
 * PipelineParallelGrid; engine.py): its sends go over the default group of every rank
 * (pipe/p2p.py, send/recv since torch 1.8), the tensor-parallel slice group gathers the
 * activations it partitions (is_pipe_partitioned, tp > 1), the pipe group broadcasts the loss
 * (_aggregate_total_loss), the model group (pipe x tensor ranks of a replica) sums the
 * parameter count and the overflow and gradient-norm checks, and with tied embeddings the
 * first and last stages sum their gradients in a group of two (pipe/module.py
 * _index_tied_modules, engine.py _exec_reduce_tied_grads). */
int ap_mem_nccl_comms(const ap_plan *p, int sizes[AP_MAX_COMMS]) {
    int n = 0;
    const int ds_pipe = p->trainer == AP_TRAINER_DEEPSPEED && p->pp > 1;
    const int world = p->tp * p->pp * p->dp * p->cp;
    if (p->tp > 1) sizes[n++] = p->tp;
    if (p->pp > 1) sizes[n++] = ds_pipe ? world : p->pp;
    if (p->dp * p->cp > 1) sizes[n++] = p->dp * p->cp;
    if (p->cp > 1) sizes[n++] = p->cp;
    if (p->ep > 1) sizes[n++] = p->ep;
    if (ds_pipe) {
        if (p->tp > 1) sizes[n++] = p->tp;
        sizes[n++] = p->pp;
        sizes[n++] = p->tp * p->pp;
        sizes[n++] = 2;
    }
    return n;
}

/* NCCL's buffers, per communicator (ap_mem_nccl_comms): from 2.22 (NCCL_RUNTIME_CONNECT,
 * default 1 since 2.22.3, src/init.cc) a communicator connects only what its collectives use
 * when they first run: NCCL_BUFFSIZE = 4 MiB per channel and peer connection (NCCL docs,
 * environment variables), a ring's two connections, 16 channels on NVLink: 2 x 16 x 4 MiB =
 * 128 MiB. Before 2.22 every communicator connects its ring and its tree at creation, each
 * connection with the LL (512 KiB), LL128 (4.7 MiB) and Simple (4 MiB) buffers (src/init.cc
 * DEFAULT_*_BUFFSIZE): measured 544 MB per communicator of two ranks and 688 MB above
 * (NVIDIA/nccl issue 964: PyTorch on 4 x A100 NVLink, NCCL 2.18, one 4 MB all-reduce on each
 * group). */
double ap_mem_nccl_bytes(const ap_plan *p, int nccl_eager) {
    if (p->trainer == AP_TRAINER_RUNTIME) return 0;
    int sizes[AP_MAX_COMMS];
    const int n = ap_mem_nccl_comms(p, sizes);
    double b = 0;
    for (int i = 0; i < n; i++)
        b += !nccl_eager ? 128.0 * AP_MIB : sizes[i] == 2 ? 544e6 : 688e6;
    return b;
}

/* CUDA context with lazy module loading: ~500 MiB on A100/H100 as reported by nvidia-smi for an
 * idle PyTorch process (CUDA_MODULE_LOADING=LAZY, CUDA 11.7+). cuBLAS workspace: 32 MiB per
 * handle on Hopper (cuBLAS docs, "cublasSetWorkspace": 32 MiB recommended for sm90); one handle
 * per stream, two streams (compute, communication). The runtime's CPU ranks have neither, nor
 * NCCL buffers (their communication buffers are tensors of its layout, sim/simrt.c). */
static double context_bytes(const ap_plan *p) {
    return p->trainer == AP_TRAINER_RUNTIME ? 0 : 500.0 * AP_MIB + 2 * 32.0 * AP_MIB;
}

double ap_mem_device_overhead_bytes(const ap_plan *p, int nccl_eager) {
    return context_bytes(p) + ap_mem_nccl_bytes(p, nccl_eager);
}

/* NCCL 2.22.3 made connections at first use the default (NCCL_RUNTIME_CONNECT, src/init.cc) */
ap_status ap_nccl_version_parse(const char *s, const char *what, int *eager, ap_err *err) {
    char *end;
    long major = s && *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
    long minor = major >= 0 && *end == '.' && end[1] >= '0' && end[1] <= '9'
                     ? strtol(end + 1, &end, 10) : -1;
    if (minor >= 0 && *end == '.' && end[1] >= '0' && end[1] <= '9') strtol(end + 1, &end, 10);
    if (minor < 0 || *end || major > 99 || minor > 999)
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%.40s' is not an NCCL version (as 2.18 or "
                          "2.21.5)", what, s ? s : "");
    *eager = major < 2 || (major == 2 && minor < 22);
    return AP_OK;
}

/* The temporaries a rank of this kind holds beside its states and activations. */
static void stage_kind_other(const est *E, stage *S) {
    const ap_plan *p = E->x.p;
    const ap_trainer_caps *tr = E->x.tr;
    /* temporaries: gathered parameters, fp8 copies, communication buffers */
    double other = 0;
    double layer_params16 = S->nm > 0 ? E->moe.params_rank + E->moe.expert_rank
                                      : E->dense.params_rank;
    if (tr->master_bytes == 0 && p->zero < 3) {
        /* fp32 parameters are the master copy: a 16-bit copy of everything is live during
         * forward and backward (FSDP MixedPrecision / autocast weight cache) */
        other += tr->gathered_weight_bytes * (S->p_dense + S->p_exp);
    } else if (p->zero >= 3 && p->pp > 1 && tr->reduce_once_with_pp) {
        /* FSDP2 under torch.distributed.pipelining: parameters stay gathered between
         * micro-batches (reshard_after_forward off) and gradients accumulate unsharded in the
         * reduce dtype until the one reduce-scatter of the step */
        other += (E->gather_bytes + E->grad_reduce_bytes) * (S->p_dense + S->p_exp);
    } else if (p->zero >= 3) {
        /* ZeRO-3/FSDP: the current and the prefetched layer gathered (16-bit) */
        other += 2.0 * E->gather_bytes * layer_params16;
    }
    /* fp8 weight copies (Transformer Engine / torchao): of the transformer layers' weights (the
     * embedding is a lookup and Megatron-Core's output layer a bf16 ColumnParallelLinear, outside
     * the fp8 autocast), or under ZeRO-3 of the gathered layers only */
    if (p->dtype == AP_DTYPE_FP8 && !ap_plan_fp8_weights(p))
        other += p->zero >= 3 ? 2.0 * layer_params16 : 1.0 * S->p_layers;
    if (p->tp > 1 && p->sp) other += 2.0 * E->T * E->h; /* all-gathered sp input buffer */
    /* DeepSpeed ZeRO's contiguous-gradient buckets (trainer.c ap_plan_grad_bucket_bytes) */
    other += ap_plan_grad_bucket_bytes(p);
    S->other = other;
}

/* The rank's allocated, reserved and device bytes, from its model states' sum (params + grads +
 * optimizer bytes, added in that order) and the allocator's fragmentation of what is
 * allocated and freed during the step. */
static inline void stage_totals_of(const est *E, double states, double frag, ap_stage_mem *sm) {
    sm->allocated_bytes = states + sm->activations_bytes + sm->other_bytes;
    double dyn = sm->activations_bytes + sm->other_bytes;
    sm->reserved_bytes = sm->allocated_bytes + 0.01 * states + frag * dyn;
    /* device: the fixed overhead outside the allocator (context, cuBLAS, NCCL) */
    sm->device_bytes = sm->reserved_bytes + E->device_overhead;
}

/* PyTorch caching allocator (c10/cuda/CUDACachingAllocator.cpp): requests round to 512 B,
 * large ones are carved from 20 MiB+ segments and freed blocks of different sizes fragment
 * them; model-state buffers are few large allocations (~1% rounding), activations many
 * short-lived ones (documented 8% fragmentation, 3% with expandable_segments). */
static inline double stage_frag(const est *E) {
    return E->opts->allocator_expandable ? 0.03 : 0.08;
}

/* nvidia-smi's reading is the caching allocator's high-water mark, not what the step must
 * hold: PyTorch keeps freed blocks cached and releases them (and retries) only when a cudaMalloc
 * fails (c10/cuda/CUDACachingAllocator.cpp, release_cached_blocks), so a run fits by its
 * device bytes while the reading grows by what fragmentation strands. GMLake (Guo et al.,
 * ASPLOS 2024, abstract) measured that fragmentation for eight LLMs trained on A100-80GB with
 * recomputation, ZeRO and offload: stitching the stranded blocks removed 15% fragmentation
 * (1 - allocated/reserved) on average, 9.2 GB of reserved memory. With expandable_segments
 * the allocator maps what it frees into one range and the reading is the reserved bytes. */
#define SMI_CACHED_FRAG 0.15

double ap_mem_smi_bytes(const ap_stage_mem *sm, double overhead, int expandable) {
    double held = expandable ? sm->reserved_bytes
                             : fmax(sm->reserved_bytes,
                                    sm->allocated_bytes * (1.0 / (1.0 - SMI_CACHED_FRAG)));
    return fmax(held + overhead, sm->device_bytes);
}

/* The rank's allocated, reserved and device bytes. */
static void stage_totals(const est *E, const stage *S, ap_stage_mem *sm) {
    sm->other_bytes = S->other;
    stage_totals_of(E, sm->params_bytes + sm->grads_bytes + sm->optimizer_bytes, stage_frag(E), sm);
}

/* The rank's allocated, reserved and device bytes, and the peaks so far. */
static void stage_overheads(est *E, const stage *S, int r, ap_stage_mem *sm) {
    ap_estimate *e = E->e;
    stage_totals(E, S, sm);
    if (sm->device_bytes > E->worst_dev) {
        E->worst_dev = sm->device_bytes;
        e->worst_stage = r;
    }
    if (sm->allocated_bytes > e->allocated_peak_bytes) e->allocated_peak_bytes = sm->allocated_bytes;
    if (sm->reserved_bytes > e->reserved_peak_bytes) e->reserved_peak_bytes = sm->reserved_bytes;
}

/* ---- chapter 7: time of one micro-batch on one rank ----------------------------------------- */

/* Compute and exposed communication of the rank's layers, plus the embedding (first) and the
 * output layer and loss (last). */
static void stage_compute(const est *E, stage *S) {
    const ap_plan *p = E->x.p;
    const ctx *x = &E->x;
    const layer_cost *d = &E->dense, *mo = &E->moe;
    const double T = E->T, h = E->h, V = E->V, t = E->t;
    S->fwd_c = S->nd * d->fwd_compute_s + S->nm * mo->fwd_compute_s;
    S->bwd_c = S->nd * d->bwd_compute_s + S->nm * mo->bwd_compute_s;
    S->tp_f = S->nd * d->tp_s + S->nm * mo->tp_s;
    S->tp_b = S->nd * d->tp_bwd_s + S->nm * mo->tp_bwd_s;
    S->tp_all = S->nd * (d->tp_total_s + d->tp_bwd_total_s) +
                S->nm * (mo->tp_total_s + mo->tp_bwd_total_s);
    S->cp_f = S->nd * d->cp_s + S->nm * mo->cp_s;
    S->cp_b = S->nd * d->cp_bwd_s + S->nm * mo->cp_bwd_s;
    S->ep_f = S->nm * mo->ep_s;
    if (S->last) {
        /* logits written, upcast, softmax read/written: ~ the loss working set, twice */
        double loss_bytes = T * V / t * (2.0 + E->loss_bytes);
        S->fwd_c += E->head_f + loss_bytes / x->hbm;
        S->bwd_c += 2.0 * E->head_f + loss_bytes / x->hbm;
        if (p->tp > 1) {
            S->tp_f += E->head_tp;
            S->tp_b += E->head_tp;
            S->tp_all += 2.0 * E->head_tp;
        }
    }
    if (S->first) S->fwd_c += T * h * 4.0 / x->hbm; /* embedding gather */
    /* BF16_Optimizer accumulates in fp32 after every micro-batch's backward (update_hp_grads,
     * called by runtime/pipe/engine.py _exec_backward_pass and by BF16_Optimizer.backward): per
     * parameter of the rank, the bf16 gradient cast to fp32 (read 2 bytes, write 4) and added
     * into the fp32 buffer (read 4 + 4, write 4): 18 bytes, memory-bound */
    if (ap_plan_bf16_optimizer(p)) S->bwd_c += 18.0 * (S->p_dense + S->p_exp) / x->hbm;
    /* a trainer that keeps gradients in param.grad between reductions adds each micro-batch's
     * weight gradient after the step's first into it (trainer.c grad_accum_pass_zero_mask):
     * read the new and the stored gradient, write the sum, in the gradient dtype; averaged
     * over the step's micro-batches */
    else if ((x->tr->grad_accum_pass_zero_mask >> p->zero & 1u) && E->mb > 1)
        S->bwd_c += 3.0 * ap_plan_grad_bytes(p) * (S->p_dense + S->p_exp) * (E->mb - 1) /
                    E->mb / x->hbm;
    /* one that reduces from a contiguous bucket copies every backward's gradients into it
     * (trainer.c grad_copy_zero_mask): read and write in the gradient dtype */
    if (x->tr->grad_copy_zero_mask >> p->zero & 1u)
        S->bwd_c += 2.0 * ap_plan_grad_bytes(p) * (S->p_dense + S->p_exp) / x->hbm;
    /* the host launches every kernel: an eager framework's layer issues the trainer's
     * launches_per_layer kernels forward and about twice as many backward, each at the kernel
     * table's launch cost; the GPU runs behind the host unless its kernels are shorter than
     * the launches (small models, small micro-batches) */
    double host = (double)S->layers * x->tr->launches_per_layer * x->k->launch_s;
    S->fwd_c = fmax(S->fwd_c, host);
    S->bwd_c = fmax(S->bwd_c, 2.0 * host);
    if (S->first && E->opts->compute_parts) {
        ap_time *tm = &E->e->time;
        double g = S->nd * d->gemm_s + S->nm * mo->gemm_s + (S->last ? E->head_f : 0.0);
        tm->part_fwd_s[AP_PART_GEMM] = g;
        tm->part_fwd_s[AP_PART_ATTN] = S->nd * d->attn_core_s + S->nm * mo->attn_core_s;
        tm->part_fwd_s[AP_PART_OTHER] = fmax(0.0, S->fwd_c - g - tm->part_fwd_s[AP_PART_ATTN]);
        tm->part_bwd_s[AP_PART_GEMM] = 2.0 * g;
        tm->part_bwd_s[AP_PART_ATTN] = S->nd * d->attn_bwd_s + S->nm * mo->attn_bwd_s;
        tm->part_bwd_s[AP_PART_OTHER] =
            fmax(0.0, S->bwd_c - 2.0 * g - tm->part_bwd_s[AP_PART_ATTN]);
    }
}

/* Recompute: the fraction of layers recomputed in full runs its forward again with its TP and
 * EP communication; selective recompute redoes the attention core (Korthikanti 2022 Sec. 5),
 * or under a trainer's per-op checkpointing the matmuls and kernels it does not keep. */
static void stage_recompute(const est *E, stage *S) {
    const ap_plan *p = E->x.p;
    const layer_cost *d = &E->dense, *mo = &E->moe;
    double n = S->layers > 0 ? (double)S->layers : 1;
    if (p->recompute == AP_RECOMPUTE_FULL) {
        double per_layer_f = (S->nd * d->fwd_compute_s + S->nm * mo->fwd_compute_s) / n;
        double per_layer_tp = (S->nd * d->tp_s + S->nm * mo->tp_s) / n;
        double per_layer_ep = (S->nm * mo->ep_s) / n;
        /* the recomputed forward exchanges again what context parallelism exchanged */
        double per_layer_cp = S->cp_f / n;
        S->rec = S->n_rc_full * (per_layer_f + per_layer_tp + per_layer_ep + per_layer_cp);
        S->rec = fmax(S->rec, S->n_rc_full * E->x.tr->launches_per_layer * E->x.k->launch_s);
    } else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
        /* Megatron's core attention, or the trainer's per-op checkpointing (layer_cost.c) */
        S->rec = S->nd * (d->sac_rec_s > 0 ? d->sac_rec_s + d->sac_rec_tp_s : d->attn_fwd_s) +
                 S->nm * mo->attn_fwd_s;
    }
}

/* Parameters per gradient bucket over `shard` data-parallel ranks: the plan's where the run set
 * its own, else the trainer's size, which Megatron-Core grows with the ranks so that each ring
 * chunk stays bandwidth-bound, max(40M, 1M x dp x cp) parameters when --overlap-grad-reduce
 * buckets the gradients (megatron/training/training.py get_model / resolve_ddp_bucket_size,
 * core distributed_data_parallel.py); 0: one call per FSDP unit. */
static double dp_bucket_params(const ap_plan *p, const ap_trainer_caps *tr, int shard) {
    if (p->dp_bucket_params > 0) return p->dp_bucket_params;
    return fmax(tr->dp_bucket_params, tr->dp_bucket_per_rank * (double)shard);
}

/* FSDP2's copies on the compute stream (trainer.c fsdp2_copies), memory-bound: seconds of one
 * all-gather's output read and written in the gather dtype into the unsharded parameters
 * (*gather_s), and of the backward's 16-bit gradients read and written, cast to the reduce
 * dtype, into one reduce-scatter's input (*reduce_s); 0 for a run without them. */
static void fsdp2_copy_s(const est *E, double params, double *gather_s, double *reduce_s) {
    const int on = E->x.tr->fsdp2_copies && !E->x.p->fsdp1;
    *gather_s = on ? 2.0 * E->gather_bytes * params / E->x.hbm : 0;
    *reduce_s = on ? (2.0 + E->grad_reduce_bytes) * params / E->x.hbm : 0;
}

/* Sharded parameters at the trainer's granularity: ZeRO-3/FSDP FULL_SHARD all-gathers the
 * parameters (at the gather dtype: FSDP MixedPrecision param_dtype) per FSDP unit (a
 * transformer block, plus the root module's embedding and head) or per DeepSpeed prefetch
 * bucket, in forward and again in backward; FSDP SHARD_GRAD_OP (ZeRO-2 that keeps the gathered
 * parameters from forward to backward) gathers once, in forward. Gradients reduce-scatter per
 * unit or reduce bucket. Every call pays NCCL's latency (at hundreds of ranks a ring call costs
 * milliseconds: tuning.cc). Every micro-batch, overlapped with compute when the trainer
 * prefetches (what compute cannot hide, plus the first gather); under pipeline parallelism
 * torch.distributed.pipelining gathers once per step and reduces once after the last backward
 * (reduce_once_with_pp), overlapped with the first forward and the last backward. */
static void stage_zero3(const est *E, stage *S) {
    const ap_plan *p = E->x.p;
    const ctx *x = &E->x;
    const ap_trainer_caps *tr = x->tr;
    int passes = p->zero >= 3 ? 2 : p->zero == 2 && tr->zero2_keeps_gathered ? 1 : 0;
    if (!passes) return;
    /* within groups (HSDP, MiCS): gathers and reduce-scatters over the group's ranks, then
       each shard all-reduced over the groups, whose ranks lie a group's width apart */
    int shard = E->state_shard;
    int replicas = E->dense_shard / E->state_shard;
    int k_dp = in_domain(x, shard, p->tp);
    double params = S->p_dense + S->p_exp;
    double units = (double)S->layers + 1.0;
    double ag_calls = tr->zero3_gather_params > 0
                          ? fmax(units, ceil(params / tr->zero3_gather_params)) : units;
    double bucket = dp_bucket_params(p, tr, shard);
    double rs_calls = bucket > 0 && !(p->zero >= 3 && tr->zero3_reduce_per_unit)
                          ? fmax(1.0, ceil(params / bucket))
                          : units;
    double ag = ag_calls * gather_s(x, E->gather_bytes * params / ag_calls, shard, k_dp);
    double rs = rs_calls * coll_s(x, AP_COLL_REDUCESCATTER_OP,
                                  E->grad_reduce_bytes * params / rs_calls, shard, k_dp);
    if (replicas > 1)
        rs += rs_calls * allreduce_s(x, E->grad_reduce_bytes * params / rs_calls / shard,
                                     replicas, in_domain(x, replicas, shard * p->tp));
    double copy_ag, copy_rs;
    fsdp2_copy_s(E, params, &copy_ag, &copy_rs);
    if (p->pp > 1 && tr->reduce_once_with_pp) {
        S->z3_step += copy_ag + copy_rs; /* one gather and one reduction a step, each copied */
        S->z3_step += p->overlap_param ? fmax(0.0, ag - S->fwd_c) + ag / ag_calls +
                                            fmax(0.0, rs - S->bwd_c) + rs / rs_calls
                                      : ag + rs;
        S->z3_step += overlap_cost_s(ag + rs - S->z3_step);
        return;
    }
    /* every micro-batch: the forward's gather, the backward's where it re-gathers, its
     * reduction */
    S->fwd_c += copy_ag;
    S->bwd_c += (passes - 1) * copy_ag + copy_rs;
    double comm = passes * ag + rs;
    /* each phase hides only behind its own compute: a unit's forward needs its gathered
     * parameters before it runs (the prefetch runs one unit ahead), so the forward's gathers
     * overlap the forward and the backward's gathers and reduce-scatters the backward and
     * its recomputation; the first gather and the last reduce-scatter (after the last
     * backward, awaited before the optimizer step) have nothing beside them */
    double fwd = ag, bwd = comm - ag;
    S->z3 = p->overlap_param ? fmax(0.0, fwd - S->fwd_c) + ag / ag_calls +
                                   fmax(0.0, bwd - S->bwd_c - S->rec) + rs / rs_calls
                             : comm;
    S->z3 = fmin(S->z3, comm);
    S->z3 += overlap_cost_s(comm - S->z3); /* what the hidden part costs the compute */
}

/* The rank's forward and backward per micro-batch; the slowest rank is the critical path
 * whose parts the step reports. */
static void stage_time(const est *E, stage *S) {
    stage_compute(E, S);
    stage_recompute(E, S);
    stage_zero3(E, S);
    S->stage_f = S->fwd_c + S->tp_f + S->cp_f + S->ep_f;
    S->stage_b = S->bwd_c + S->rec + S->tp_b + S->cp_b + S->ep_f + S->z3;
}

/* The rank in the step: its times, and the running slowest rank, largest parameters and host
 * bytes (in rank order, so the sums round as rank by rank). */
/* What every rank adds whatever its kind: its times, and its share of the step's sums;
 * returns its (t_f + t_b) per micro-batch. */
static double stage_sums(est *E, const stage *S, int r) {
    ap_time *tm = &E->e->time;
    tm->stage_fwd_s[r] = S->stage_f;
    tm->stage_bwd_s[r] = S->stage_b;
    double Ti = S->stage_f + S->stage_b;
    E->Tsum += Ti;
    E->model_flops_mb += S->model_flops;
    E->hfu_extra_flops += S->hfu_extra;
    return Ti;
}

/* The parameters rank S updates (optimizer_offload's local_params, of this rank alone). */
static double stage_local(const est *E, const stage *S) {
    return E->x.p->zero >= 1 ? S->p_dense / E->state_shard + S->p_exp / E->expert_shard
                             : S->p_dense + S->p_exp;
}

static void stage_account(est *E, const stage *S, int r, const ap_stage_mem *sm) {
    if (sm->host_bytes > E->host_per_gpu_max) E->host_per_gpu_max = sm->host_bytes;
    double Ti = stage_sums(E, S, r);
    if (Ti >= E->Tmax) {
        E->Tmax = Ti;
        E->crit_compute = S->fwd_c + S->bwd_c;
        E->crit_recompute = S->rec;
        E->crit_tp = S->tp_f + S->tp_b;
        E->crit_tp_total = S->tp_all;
        E->crit_cp = S->cp_f + S->cp_b;
        E->crit_ep = 2.0 * S->ep_f;
        E->crit_z3 = S->z3;
    }
    if (S->z3_step > E->z3_step) E->z3_step = S->z3_step;
    double sp_params = S->p_dense + S->p_exp;
    E->sum_params += sp_params;
    if (sp_params > E->max_stage_params) {
        E->max_stage_params = sp_params;
        E->max_stage_layers = S->layers;
    }
    if (S->p_exp > E->max_stage_expert) E->max_stage_expert = S->p_exp;
    if (S->p_dense > E->max_stage_shardable) E->max_stage_shardable = S->p_dense;
    E->sum_local += stage_local(E, S);
}

/* FLOPs of one micro-batch on this rank for MFU and HFU: model FLOPs (Narayanan 2021 Eq. 3,
 * attention not halved) and the extra forward of recomputation. */
static void stage_flops(const est *E, stage *S) {
    const ap_plan *p = E->x.p;
    const layer_cost *d = &E->dense, *mo = &E->moe;
    double mf = S->nd * (d->model_flops + d->attn_flops) + S->nm * (mo->model_flops + mo->attn_flops);
    if (S->last) mf += 2.0 * E->T * E->h * E->V / E->t;
    S->model_flops = mf;
    S->hfu_extra = 0;
    if (p->recompute == AP_RECOMPUTE_FULL) {
        double per_layer = (S->nd * (d->model_flops + d->attn_flops) +
                            S->nm * (mo->model_flops + mo->attn_flops)) /
                           (S->layers > 0 ? S->layers : 1);
        S->hfu_extra = S->n_rc_full * per_layer;
    } else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
        S->hfu_extra = S->nd * (d->sac_rec_s > 0 ? d->sac_rec_flops : d->attn_flops) +
                       S->nm * mo->attn_flops;
    }
}

/* Ranks r .. end - 1, each of the same kind as rank r - 1 (K): the same states and times, and
 * no more in-flight micro-batches (stage_inflight falls with r), so no more activation,
 * allocated, reserved or device bytes (sums of non-negative terms, one of them smaller). The
 * running peaks, the slowest rank and the largest ranks therefore stay as rank r - 1 left them
 * (their tests are strict, or set the same values); only the sums take each rank (stage_sums,
 * in rank order). */
static void stage_repeat(est *E, const stage *K, int r, int end) {
    ap_stage_mem *st = E->e->stages;
    const ap_stage_mem kind = st[r - 1];
    const double states = kind.params_bytes + kind.grads_bytes + kind.optimizer_bytes;
    const double frag = stage_frag(E), local = stage_local(E, K);
    for (; r < end; r++) {
        ap_stage_mem *sm = &st[r];
        *sm = kind;
        sm->stage = r;
        stage_activations(E, K, r, sm);
        stage_totals_of(E, states, frag, sm);
        stage_sums(E, K, r);
        E->sum_local += local;
        E->sum_params += K->p_dense + K->p_exp;
    }
}

/* Whether rank layers are counted in closed form (chunks_closed_form): a uniform layout, layers
 * of one kind (no MoE layer, or MoE layers only: E->all_moe), no chunk with its own recompute
 * count. */
static int closed_form_applies(est *E) {
    const ap_plan *p = E->x.p;
    const int n = p->pp * p->vp;
    E->all_moe = 0;
    if (!E->uniform) return 0;
    const ap_model *m = E->x.m;
    const int64_t moe = ap_model_moe_layers_in(m, 0, m->layers);
    if (moe > 0 && moe < m->layers) return 0;
    E->all_moe = moe > 0;
    if (p->recompute == AP_RECOMPUTE_FULL)
        for (int c = 0; c < n; c++)
            if (p->stage_recompute[c] > 0) return 0;
    return 1;
}

/* The first rank after r whose kind may differ from rank r's, counted in closed form
 * (chunks_closed_form): rank r holds a longer chunk for each c = k pp + r in [start, start +
 * rem), and rank r's count minus rank r - 1's is [r = start] - [r = start + rem] (mod pp), so
 * it changes only at those two ranks. The first and the last rank are kinds of their own.
 * Without the closed form: r + 1. */
static int same_kind_until(const est *E, int r) {
    const int pp = E->x.p->pp;
    if (!E->closed_form || r == 0 || r >= pp - 1) return r + 1;
    int next = pp - 1;
    if (E->split.rem > 0) {
        int b1 = E->split.start % pp, b2 = (E->split.start + E->split.rem) % pp;
        if (b1 > r && b1 < next) next = b1;
        if (b2 > r && b2 < next) next = b2;
    }
    return next;
}

/* Every pipeline rank in order: its kind priced once (states, times, FLOPs and what its
 * memory needs per micro-batch), then its in-flight activations, device bytes and share of the
 * step's sums. Ranks of a kind met before start from that kind (the last one matched is tried
 * first: consecutive ranks are mostly of one kind, and a rank of its predecessor's kind takes
 * the short way, stage_repeat; in closed form the ranks up to the next possible change of kind
 * take it without counting their layers, same_kind_until). */
static void price_ranks(est *E) {
    ap_estimate *e = E->e;
    stage_kind kinds[STAGE_KINDS];
    stage spill;  /* a kind beyond STAGE_KINDS: priced for its rank only */
    int nkinds = 0, last = 0;
    const ap_plan *p = E->x.p;
    const int pp = p->pp, n = pp * p->vp;
    E->uniform = p->nchunks != n && n > 0; /* ap_plan_chunk_layers, without its divisions */
    if (E->uniform) E->split = ap_uniform_split_of(E->x.m->layers, n);
    E->closed_form = closed_form_applies(E);
    /* an explicit layout's first layers, summed once (chunks_each reads them per rank) */
    int first_of[AP_MAX_CHUNKS];
    E->chunk_first = NULL;
    if (!E->uniform && E->x.m->moe.experts > 0 && n <= AP_MAX_CHUNKS) {
        for (int c = 0, f = 0; c < n; c++) {
            first_of[c] = f;
            f += p->stage_layers[c];
        }
        E->chunk_first = first_of;
    }
    uint64_t prev_key = 0;
    const stage *K = NULL;
    const unsigned char *only = E->opts->ranks_only;
    for (int r = 0; r < pp;) {
        if (only && !only[r]) {
            r++;
            continue;
        }
        stage S;
        uint64_t key = stage_layers(E, r, &S);
        /* asked for some ranks only: each takes the kind path (a rank of its predecessor's kind
         * takes the same figures either way, the predecessor may not be priced) */
        int end = only ? r + 1 : same_kind_until(E, r);
        if (r > 0 && key == prev_key && !only) {
            stage_repeat(E, K, r, end);
            r = end;
            continue;
        }
        prev_key = key;
        ap_stage_mem *sm = &e->stages[r];
        int k = last;
        if (!(k < nkinds && kinds[k].key == key))
            for (k = 0; k < nkinds && kinds[k].key != key; k++) {}
        if (k < nkinds) {
            /* a rank of a kind already priced: its states and times */
            K = &kinds[k].S;
            *sm = kinds[k].states;
            sm->stage = r;
            last = k;
        } else {
            stage *N = nkinds < STAGE_KINDS ? &kinds[nkinds].S : &spill;
            *N = S;
            stage_new_kind(E, N);
            stage_states(E, N, sm);
            stage_time(E, N);
            stage_flops(E, N);
            stage_kind_activations(E, N);
            stage_kind_other(E, N);
            if (nkinds < STAGE_KINDS) {
                kinds[nkinds].key = key;
                kinds[nkinds].states = *sm;
                last = nkinds++;
            }
            K = N;
        }
        stage_activations(E, K, r, sm);
        stage_overheads(E, K, r, sm);
        stage_account(E, K, r, sm);
        if (r + 1 < end) stage_repeat(E, K, r + 1, end);
        r = end;
    }
    E->chunk_first = NULL; /* first_of goes out of scope */
}

/* ---- chapter 8: the pipeline schedule ------------------------------------------------------- */

/* 1F1B: (m - 1) x the slowest stage + one pass through all stages; interleaving divides the
 * fill and drain by v (Narayanan 2021 Sec. 2.2.2). Point-to-point sends: one activation (and
 * one gradient) per micro-batch per boundary, split across the tp ranks and re-gathered over
 * NVLink (the scatter/gather optimisation, Narayanan 2021 Sec. 4.1), each priced on the link it
 * crosses (collectives.c p2p_send_s). On the critical path each of
 * the (m + p - 1) schedule slots sends forward and backward, v times with interleaving, where
 * the trainer overlaps them with the next chunk's compute (Megatron's interleaved schedule,
 * --no-overlap-p2p-communication to disable): only what a chunk's compute cannot hide and the
 * first and last sends stay exposed. */
static void pipeline_time(est *E) {
    const ap_plan *p = E->x.p;
    const ctx *x = &E->x;
    ap_time *tm = &E->e->time;
    const double mb = (double)E->mb;
    if (p->pp > 1) {
        double bytes = E->T * E->h * 2.0 / (x->tr->p2p_split_tp ? E->t : 1.0);
        double one = p2p_send_s(x, bytes);
        double v = p->vp > 1 ? (double)p->vp : 1.0;
        double sends = 2.0 * (mb + p->pp - 1) * v;
        if (p->vp > 1 && x->tr->p2p_overlap && !p->no_p2p_overlap) {
            double chunk = E->Tmax / (2.0 * v);
            E->p2p = sends * (fmax(0.0, one - chunk) + overlap_cost_s(fmin(one, chunk))) +
                     2.0 * one;
        } else {
            E->p2p = sends * one;
        }
        /* tied embeddings kept on the first and last stage: their gradients are summed over
         * the two once per step, after the last backward, in the gradient-reduction dtype
         * (Megatron-LM finalize_model_grads' embedding all-reduce of main_grad; DeepSpeed
         * runtime/pipe/engine.py _exec_reduce_tied_grads, the BF16_Optimizer's fp32 copy or
         * param.grad); across nodes when the pipeline spans NVLink domains */
        if (E->x.m->tied_embeddings && x->tr->tied_embedding_dup)
            E->p2p += allreduce_s(x, E->V * E->h / E->t * E->grad_reduce_bytes, 2,
                                  pipe_cross(x) ? 1 : 2);
    }
    if (p->pp == 1) E->pipe = mb * E->Tmax;
    else E->pipe = mb * E->Tmax + (E->Tsum - E->Tmax) / p->vp;
    E->z3_total = E->crit_z3 * mb;
    tm->compute_s = E->crit_compute * mb;
    tm->recompute_s = E->crit_recompute * mb;
    tm->tp_comm_s = E->crit_tp * mb;
    tm->cp_comm_s = E->crit_cp * mb;
    tm->ep_comm_s = E->crit_ep * mb;
    tm->bubble_s = E->pipe - mb * E->Tmax;
    tm->pp_comm_s = E->p2p;
    tm->tp_comm_total_s = E->crit_tp_total * mb;
}

/* ---- chapter 9: data-parallel gradient reduction -------------------------------------------- */

/* The reduction of the stage with the most parameters at the trainer's cadence and
 * granularity: gradient buckets of dp_bucket_params (one per FSDP unit where it is 0), each an
 * all-reduce (ZeRO-0) or a reduce-scatter followed, after the optimizer step, by an all-gather
 * of the updated 16-bit parameters (ZeRO-1/2, Megatron's distributed optimizer), at the
 * trainer's gradient dtype; DeepSpeed and FSDP ZeRO-2 reduce every micro-batch, except under
 * pipeline parallelism in torch.distributed.pipelining, which reduces once per step. The
 * reduction overlaps the backward where the trainer offers it (the last bucket stays exposed);
 * the parameter all-gather overlaps the next forward where the trainer dispatches it there
 * (Megatron --overlap-param-gather), else it is exposed after the step. ZeRO-3 traffic is in
 * the stage times (per micro-batch) or z3_step (once per step). */
static void dp_reduction(est *E) {
    const ap_plan *p = E->x.p;
    const ctx *x = &E->x;
    const ap_trainer_caps *tr = x->tr;
    ap_time *tm = &E->e->time;
    const double mb = (double)E->mb;
    const int shard = E->dense_shard;
    int k_dp = in_domain(x, shard, p->tp);
    double params = E->max_stage_params;
    double bucket = dp_bucket_params(p, tr, shard);
    double buckets = bucket > 0 ? fmax(1.0, ceil(params / bucket))
                                : (double)E->max_stage_layers + 1.0;
    double gbytes = E->grad_reduce_bytes * params / buckets;
    double wbytes = ap_plan_gathered_weight_bytes(p) * params / buckets;
    int per_mb = p->zero == 2 && (tr->grad_reduce_per_mb_zero_mask & 4u) &&
                 !(p->pp > 1 && tr->reduce_once_with_pp);
    tm->dp_red_s = tm->dp_ag_s = tm->dp_red_one_s = tm->dp_ag_one_s = 0;
    tm->dp_buckets = buckets;
    tm->dp_bucket_fill = bucket > 0 ? params / bucket : 0;
    /* FSDP SHARD_GRAD_OP's traffic is per FSDP unit, in the stage times (stage_zero3) */
    if (p->zero == 2 && tr->zero2_keeps_gathered) {
        tm->dp_comm_total_s = E->z3_total + E->z3_step;
        tm->dp_comm_s = E->z3_total + E->z3_step;
        return;
    }
    /* BF16_Optimizer (DeepSpeed bf16 at stage 0) shards the update like ZeRO-1 */
    int bf16opt = ap_plan_bf16_optimizer(p);
    double red = 0, ag = 0;
    /* ZeRO within groups of E->state_shard ranks (the plan's zero_group): the gradients are
     * all-reduced over every rank and each group gathers its updated parameters */
    const int group = E->state_shard;
    if (shard > 1 && p->zero <= 2) {
        if (p->zero == 0 || group < shard) red = buckets * allreduce_s(x, gbytes, shard, k_dp);
        else red = buckets * coll_s(x, AP_COLL_REDUCESCATTER_OP, gbytes, shard, k_dp);
        if (group > 1 && (p->zero >= 1 || bf16opt))
            ag = buckets * gather_s(x, wbytes, group, in_domain(x, group, p->tp));
        if (per_mb) red *= mb;
    }
    tm->dp_red_s = red;
    tm->dp_ag_s = ag;
    tm->dp_red_one_s = red / (buckets * (per_mb ? mb : 1.0));
    tm->dp_ag_one_s = ag / buckets;
    double red_exp = red, ag_exp = ag;
    int w = E->e->worst_stage;
    /* the compute a once-per-step reduction can hide, in micro-batch passes of the rank: its
     * last micro-batch's backward (gradient sync is off for the others: Megatron-core
     * schedules.py enables it in the last backward pass, torch DDP no_sync); under the
     * interleaved schedule each of the v model chunks starts its reduction at its own last
     * backward (is_last_microbatch_for_model_chunk), and after chunk k's last backward k x p
     * chunk passes of t/v remain, so from the first chunk's to the end ((v - 1) p + 1) / v
     * passes; the parameter all-gather of each chunk likewise overlaps the forward of the
     * chunks before it in the next step (distributed optimizer, --overlap-param-gather) */
    double v = p->vp > 1 ? (double)p->vp : 1.0;
    double window = fmin(((v - 1.0) * p->pp + 1.0) / v, mb);
    if (red > 0 && p->overlap_grad && tr->overlap_grad) {
        double hide = (per_mb ? mb : window) * tm->stage_bwd_s[w];
        red_exp = fmax(red - hide, red / (buckets * (per_mb ? mb : 1.0)));
    }
    if (ag > 0 && p->overlap_param && tr->param_gather_next_fwd)
        ag_exp = fmax(ag - window * tm->stage_fwd_s[w], ag / buckets);
    tm->dp_comm_total_s = red + ag + E->z3_total + E->z3_step;
    /* the hidden parts slow the backward and forward beside them (overlap_cost_s) */
    tm->dp_comm_s = red_exp + ag_exp + overlap_cost_s(red - red_exp) +
                    overlap_cost_s(ag - ag_exp) + E->z3_total + E->z3_step;
}

/* FP8 under Transformer Engine's delayed scaling (trainer.c fp8_amax_reduce; not per-tensor
 * current scaling, plan.h ap_fp8_recipe): each model chunk's forward is one fp8_autocast
 * region whose amaxes are all-reduced (MAX) over the tensor x data x context parallel ranks
 * when it exits, and its backward's once more, each call blocking the rank's stream. The
 * buffers are small (the forward's three fp32 amaxes and the backward's two per GEMM, four
 * GEMMs a layer), so each call is NCCL's latency across the group's nodes. Every rank pays them
 * in every chunk of every micro-batch, so the pipeline's critical path, (m v + p - 1) chunk
 * passes of a rank's v chunks (the 1F1B fill and drain as pipeline_time counts them), grows by
 * both calls per pass; no split changes it. Reported with the data-parallel communication. */
static void fp8_amax_time(est *E) {
    const ap_plan *p = E->x.p;
    const ctx *x = &E->x;
    ap_time *tm = &E->e->time;
    const int n = p->tp * p->dp * p->cp;
    if (p->dtype != AP_DTYPE_FP8 || !x->tr->fp8_amax_reduce ||
        ap_plan_fp8_recipe(p) != AP_FP8_DELAYED || n < 2)
        return;
    const double v = p->vp > 1 ? (double)p->vp : 1.0;
    const double layers = (double)E->x.m->layers / ((double)p->pp * v); /* per chunk */
    const int k = in_domain(x, n, 1);
    double call = allreduce_s(x, 3.0 * 4.0 * 4.0 * layers, n, k) +
                  allreduce_s(x, 2.0 * 4.0 * 4.0 * layers, n, k);
    double t = call * ((double)E->mb * v + (double)(p->pp - 1));
    tm->dp_comm_s += t;
    tm->dp_comm_total_s += t;
}

/* ---- chapter 10: optimizer step and CPU offload --------------------------------------------- */

/* One micro-batch's fetches of a rank's offloaded parameters: 2 bytes each, over `shard`
 * ranks under ZeRO-3, for the forward and again for the backward, over the PCIe share. */
static double param_fetch_s(double params, double frac, double shard, double pcie) {
    double bytes = 2.0 * params * frac / shard;
    return 2.0 * bytes / pcie;
}

/* Adam on the GPU is memory-bound, ~32 bytes per parameter touched (fp32 master r/w 8, m and v
 * r/w 16, grad 4, 16-bit param write 2 + 2). Offload (ZeRO-Offload, Ren et al. 2021 Sec. 4):
 * gradients down and parameters up over PCIe shared per switch, and CPU Adam bound by host DRAM
 * (DeepSpeed's vectorised CPU-Adam, Sec. 4.2): per parameter it reads and writes the fp32
 * weight, m and v (24 bytes), reads the 16-bit gradient and writes its fp32 copy (6), and
 * writes the 16-bit weight it uploads (2): 32 bytes; a two-socket server streams at ~70% of its
 * DRAM peak (STREAM triad, McCalpin); the node's GPUs share it. Gradient copies overlap the
 * backward; the CPU step and the parameter upload do not. Offloaded parameters are fetched for
 * forward and for backward every micro-batch. */
static void optimizer_offload(est *E) {
    const ap_plan *p = E->x.p;
    const ap_cluster *c = E->x.c;
    const ctx *x = &E->x;
    ap_time *tm = &E->e->time;
    int w = E->e->worst_stage;
    /* the parameters this GPU updates: its shard of the dense states and of the expert states
     * (ZeRO-1+ shards experts over the expert-data-parallel group) */
    E->local_params = p->zero >= 1 ? E->max_stage_shardable / E->state_shard +
                                         E->max_stage_expert / E->expert_shard
                                   : E->max_stage_params;
    double on_gpu = E->local_params * (1.0 - p->offload_optimizer);
    tm->optimizer_s = on_gpu * 32.0 / x->hbm;
    /* per parameter updated: what the step pays for it below (on the GPU, and offloaded the
     * CPU Adam and the upload), the gradient copy's exposed part and offloaded parameters
     * aside; the mean rank's parameters bound the most any split leaves a rank with (their sum
     * over the ranks does not depend on the split), so x_floor_s bounds every split's step */
    double per_param = (1.0 - p->offload_optimizer) * 32.0 / x->hbm;

    int share = c->gpus_per_pcie_switch > 0 ? c->gpus_per_pcie_switch : 1;
    /* the switch uplink, shared, at the kernel table's PCIe efficiency */
    double pcie = c->pcie_bytes_per_s * x->k->pcie_eff / share;
    double off = 0;
    if (p->offload_optimizer > 0) {
        double n_off = E->local_params * p->offload_optimizer;
        int gpn = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
        double host_bw = c->host_mem_bytes_per_s > 0 ? c->host_mem_bytes_per_s : 100e9;
        double cpu_adam = n_off * 32.0 * gpn / (0.7 * host_bw);
        double grad_x = n_off * 2.0 / pcie;
        off = fmax(0.0, grad_x - tm->stage_bwd_s[w]) + cpu_adam + n_off * 2.0 / pcie;
        per_param += p->offload_optimizer * (32.0 * gpn / (0.7 * host_bw) + 2.0 / pcie);
    }
    tm->x_floor_s = per_param * E->sum_local / (p->pp > 0 ? p->pp : 1);
    tm->par_floor_s = 0;
    if (p->offload_params > 0) {
        const double shard = p->zero >= 3 ? E->state_shard : 1;
        double per_mb = param_fetch_s(E->max_stage_params, p->offload_params, shard, pcie);
        /* the rank holding the most holds at least the mean (the sum over the ranks does not
           depend on the split) */
        tm->par_floor_s = param_fetch_s(E->sum_params / (p->pp > 0 ? p->pp : 1),
                                        p->offload_params, shard, pcie);
        double comp = tm->stage_fwd_s[w] + tm->stage_bwd_s[w];
        off += (double)E->mb * fmax(0.0, per_mb - comp);
    }
    tm->offload_s = off;
}

/* ---- chapter 11: the step, throughput and verdict ------------------------------------------- */

/* The step: pipeline + p2p + exposed DP + optimizer + offload + the fixed per-step overhead;
 * the parts sum to it (the rounding residue of the per-stage split goes to compute). */
static void step_total(est *E) {
    ap_time *tm = &E->e->time;
    tm->overhead_s = E->x.cal.step_overhead_s;
    tm->step_s = E->pipe + E->p2p + tm->dp_comm_s - E->z3_total /* z3 already inside pipe */ +
                 tm->optimizer_s + tm->offload_s + tm->overhead_s;
    double sum = tm->compute_s + tm->recompute_s + tm->tp_comm_s + tm->cp_comm_s +
                 tm->ep_comm_s + tm->bubble_s + tm->pp_comm_s + tm->dp_comm_s + tm->optimizer_s +
                 tm->offload_s + tm->overhead_s;
    tm->compute_s += tm->step_s - sum;
}

/* Tokens/s, model and hardware FLOPs (3 x forward, all micro-batches, all ranks; README
 * "Throughput definitions") and MFU/HFU against the dense 16-bit peak. */
static void throughput(est *E) {
    const ap_plan *p = E->x.p;
    const ap_cluster *c = E->x.c;
    const ap_time *tm = &E->e->time;
    ap_throughput *th = &E->e->tp;
    double tokens = (double)p->gbs * (double)p->seq;
    th->tokens_per_s = tokens / tm->step_s;
    double fwd_model = E->model_flops_mb * (double)E->mb * p->tp * p->cp * p->dp;
    th->model_flops_per_step = 3.0 * fwd_model;
    th->hw_flops_per_step = th->model_flops_per_step +
                            E->hfu_extra_flops * (double)E->mb * p->tp * p->cp * p->dp;
    double gpus = (double)c->gpus;
    th->model_tflops_per_gpu = th->model_flops_per_step / tm->step_s / gpus / 1e12;
    th->hw_tflops_per_gpu = th->hw_flops_per_step / tm->step_s / gpus / 1e12;
    double ref_peak = c->gpu.peak_flops[AP_DTYPE_BF16] > 0 ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                                           : c->gpu.peak_flops[AP_DTYPE_FP16];
    if (ref_peak <= 0) ref_peak = c->gpu.peak_flops[AP_DTYPE_FP32]; /* the cpu device */
    th->mfu = th->model_tflops_per_gpu * 1e12 / ref_peak;
    th->hfu = th->hw_tflops_per_gpu * 1e12 / ref_peak;
}

/* Fits when the worst rank's device peak plus the headroom fits the GPU and the node's
 * offloaded states fit 90% of its host memory. */
static void verdict(est *E) {
    const ap_cluster *c = E->x.c;
    ap_estimate *e = E->e;
    e->device_peak_bytes = E->worst_dev;
    e->peak_bytes = E->worst_dev;
    e->device_overhead_bytes = E->device_overhead;
    e->nccl_bytes = E->device_overhead - context_bytes(&e->plan); /* counted once, in setup */
    /* nvidia-smi's reading of the fullest rank: every rank adds the same overhead to its
     * reserved bytes, so the highest reading is that of the peaks (no per-rank work); it
     * cannot show more than the GPU has */
    ap_stage_mem peak = {.allocated_bytes = e->allocated_peak_bytes,
                         .reserved_bytes = e->reserved_peak_bytes,
                         .device_bytes = E->worst_dev};
    e->smi_peak_bytes = fmin(ap_mem_smi_bytes(&peak, E->device_overhead,
                                              E->opts->allocator_expandable),
                             c->gpu.mem_bytes);
    int gpn = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
    e->host_bytes_per_node = E->host_per_gpu_max * gpn;
    e->host_capacity_bytes = c->cpu_mem_bytes;
    e->host_fits = e->host_bytes_per_node <= 0 || e->host_bytes_per_node <= 0.9 * c->cpu_mem_bytes;
    e->fits = (E->worst_dev + E->opts->headroom_bytes <= e->capacity_bytes) && e->host_fits;
    e->partial = 0;
}

/* ---- a prepared estimate (estimate_int.h) ---------------------------------------------------- */

struct ap_est_prep {
    const ap_model *m;
    const ap_cluster *c;
    ap_plan plan;             /* normalised and checked */
    est E;                    /* after setup: nothing of it reads the layout */
    ap_kernels *built;        /* the tables built from a measured profile, or NULL */
};

/* The kernel tables of the estimate: prebuilt, the published ones, or built from the measured
 * profile into *built (the slow path: callers estimating many plans pass prebuilt tables). */
static ap_status kernels_of(const ap_cluster *c, const ap_estimate_opts *opts,
                            const ap_kernels **out, ap_kernels **built, ap_err *err) {
    const ap_kernels *k = opts->kernels;
    *built = NULL;
    if (k && strcmp(k->gpu, c->gpu.name)) k = NULL; /* prebuilt for another GPU (a variant) */
    if (!k && !opts->profile) k = ap_kernels_published(&c->gpu);
    if (!k) {
        if (!(*built = ap_malloc(sizeof **built)))
            return ap_err_set(err, AP_ERR_NOMEM, "out of memory for kernel tables");
        ap_status st = ap_kernels_build(&c->gpu, opts->profile, *built, err);
        if (st != AP_OK) {
            ap_free(*built);
            *built = NULL;
            return st;
        }
        k = *built;
    }
    *out = k;
    return AP_OK;
}

ap_status ap_est_prep_new(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                          const ap_estimate_opts *opts, ap_est_prep **out, ap_err *err) {
    *out = NULL;
    ap_est_prep *pp = ap_malloc(sizeof *pp);
    if (!pp) return ap_err_set(err, AP_ERR_NOMEM, "out of memory preparing an estimate");
    pp->m = m;
    pp->c = c;
    pp->built = NULL;
    const ap_kernels *k = NULL;
    ap_status st = normalise_plan(m, c, p, opts->plan_checked, &pp->plan, err);
    if (st == AP_OK) st = kernels_of(c, opts, &k, &pp->built, err);
    if (st == AP_OK) st = setup(&pp->E, m, c, &pp->plan, opts, k, NULL, err);
    if (st != AP_OK) {
        ap_est_prep_free(pp);
        return st;
    }
    *out = pp;
    return AP_OK;
}

void ap_est_prep_free(ap_est_prep *pp) {
    if (!pp) return;
    ap_free(pp->built);
    ap_free(pp);
}

const ap_plan *ap_est_prep_plan(const ap_est_prep *pp) { return &pp->plan; }

/* The estimate's scalars cleared for a new plan (the stage chapters fill the first pp entries of
 * the per-rank arrays). */
static void estimate_clear(ap_estimate *e) {
    memset(&e->time, 0, offsetof(ap_time, stage_fwd_s));
    memset(&e->tp, 0, sizeof e->tp);
    e->worst_stage = 0;
    e->allocated_peak_bytes = e->reserved_peak_bytes = e->smi_peak_bytes = 0;
    e->nstages = e->plan.pp;
}

ap_status ap_est_prep_ranks(const ap_est_prep *pp, const ap_estimate_opts *opts, ap_estimate *e,
                            ap_err *err) {
    /* as normalise_plan: a plan the caller vouches for is not checked */
    ap_status st = opts->plan_checked ? AP_OK : ap_plan_check_layout(&e->plan, pp->m, err);
    if (st != AP_OK) return st;
    estimate_clear(e);
    est E = pp->E;
    E.x.p = &e->plan;
    E.e = e;
    E.opts = opts;
    e->plan.attn_impl = E.x.attn;
    price_ranks(&E);
    e->capacity_bytes = pp->c->gpu.mem_bytes;
    e->headroom_bytes = opts->headroom_bytes;
    return AP_OK;
}

/* ---- the driver ------------------------------------------------------------------------------ */

ap_status ap_estimate_plan(const ap_model *m, const ap_cluster *c, const ap_plan *pin,
                           const ap_estimate_opts *opts, ap_estimate *e, ap_err *err) {
    ap_estimate_opts dflt;
    if (!opts) {
        ap_estimate_opts_init(&dflt);
        opts = &dflt;
    }
    /* the plan is copied once, into the estimate; of the rest only the scalars are cleared:
     * the stage chapters fill the first pp entries of the per-rank arrays (the others are not
     * part of the estimate), so a call clears no more than it uses */
    ap_status st = normalise_plan(m, c, pin, opts->plan_checked, &e->plan, err);
    if (st != AP_OK) return st;
    estimate_clear(e);
    const ap_kernels *k;
    ap_kernels *built;
    if ((st = kernels_of(c, opts, &k, &built, err)) != AP_OK) return st;
    est E;
    st = setup(&E, m, c, &e->plan, opts, k, e, err);
    if (st != AP_OK) {
        ap_free(built);
        return st;
    }
    e->plan.attn_impl = E.x.attn;
    price_ranks(&E);
    e->capacity_bytes = c->gpu.mem_bytes; /* what the verdict and a rank's fit read */
    e->headroom_bytes = opts->headroom_bytes;
    if (opts->ranks_only) { /* the asked-for ranks only */
        ap_free(built);
        return AP_OK;
    }
    pipeline_time(&E);
    dp_reduction(&E);
    fp8_amax_time(&E);
    optimizer_offload(&E);
    step_total(&E);
    throughput(&E);
    verdict(&E);
    ap_free(built);
    return AP_OK;
}
