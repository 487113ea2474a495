/*
 * space.c - the plan space ap_search enumerates, as a table of dimensions (search.h).
 *
 * Structure: eight dimensions, outermost first: tp, cp, pp (which fixes dp), ep, vp, ZeRO stage
 * (with its group: ZeRO-3 within an NVLink domain is a value of its own), optimizer offload,
 * parameter offload. Each dimension is one function that lists its legal
 * values given the choices of the dimensions outside it (the trainer's table, the user's pins,
 * divisibility); an odometer walks the product, refilling a dimension's list whenever an outer
 * choice changes. A choice of all eight is a point: the model states of a group of plans. The
 * group's members, the recompute levels and micro-batch sizes, are listed by ap_space_group, so
 * the search can bound a whole group by its least-memory member before estimating any of it.
 *
 * Not here: estimating, pruning and ranking (search.c). The order of the points is the
 * search's evaluation order; the pruning rules and the report's enumeration rely on it only
 * through ap_search.
 */
#include "autoplan/search.h"
#include "autoplan/hetero.h"

#include <string.h>

enum { D_TP, D_CP, D_PP, D_EP, D_ETP, D_VP, D_ZERO, D_OFFO, D_OFFP };

/* Divisors of n up to max, ascending, at most cap of them. */
static int divisors(int64_t n, int64_t max, double *out, int cap) {
    int k = 0;
    for (int64_t d = 1; d <= n && d <= max && k < cap; d++)
        if (n % d == 0) out[k++] = (double)d;
    return k;
}

/* Keep the values that pass `ok`; returns the new count. */
#define KEEP_IF(v, n, ok)                                                                       \
    do {                                                                                        \
        int kept_ = 0;                                                                          \
        for (int i_ = 0; i_ < (n); i_++) {                                                      \
            double x = (v)[i_];                                                                 \
            if (ok) (v)[kept_++] = x;                                                           \
        }                                                                                       \
        (n) = kept_;                                                                            \
    } while (0)

/* ---- the dimensions: legal values given the outer choices in pt --------------------------- */

static int tp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    (void)pt;
    const ap_trainer_caps *tr = s->tr;
    int64_t max = tr->tp ? (s->o->allow_cross_node_tp ? s->c->gpus : s->c->nvlink_domain) : 1;
    int n = divisors(s->c->gpus, max, v, 64);
    int fx = s->o->fixed.tp;
    KEEP_IF(v, n, !fx || (int)x == fx);
    return n;
}

/* Whether cp ranks can run context parallelism by all-to-all beside tp ones (ap_plan_check's
 * cp_a2a rule: the trainer has it and the heads allow it; DeepSpeed's only with tp 1). */
static int a2a_fits(const ap_space *s, int tp, int cp) {
    if (!s->tr->cp_a2a || cp < 2 || (s->tr->cp_alone && tp > 1)) return 0;
    return ap_plan_cp_a2a_heads(s->m, tp, cp);
}

/* Context-parallel degrees, each cp > 1 followed by cp + 0.5 where the trainer can run it by
 * all-to-all instead of the ring (set_value: the half marks cp_a2a, as ZeRO's half marks its
 * domain group); --cp-a2a, or a trainer with no ring (DeepSpeed), keeps the all-to-all
 * variants only. */
static int cp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    double d[64];
    int n = divisors(s->c->gpus / pt->tp, s->tr->cp ? 64 : 1, d, 64);
    int fx = s->o->fixed.cp, only_a2a = s->o->fixed.cp_a2a || s->tr->cp_a2a_only;
    int64_t seq = s->o->fixed.seq;
    KEEP_IF(d, n, (!fx || (int)x == fx) && ((int)x == 1 || seq % (2 * (int64_t)x) == 0));
    int k = 0;
    for (int i = 0; i < n; i++) {
        int cp = (int)d[i], a2a = a2a_fits(s, pt->tp, cp);
        if (cp == 1 || !only_a2a) v[k++] = d[i];
        if (a2a) v[k++] = d[i] + 0.5;
    }
    return k;
}

static int pp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    const int64_t L = s->m->layers;
    int rest = s->c->gpus / (pt->tp * pt->cp);
    int alone = s->tr->cp_alone && pt->cp > 1; /* DeepSpeed-Ulysses: no pipeline beside it */
    int n = divisors(rest, s->tr->pp && !alone ? (L < 256 ? L : 256) : 1, v, 256);
    int fx = s->o->fixed.pp, fdp = s->o->fixed.dp;
    KEEP_IF(v, n, (!fx || (int)x == fx) && (!fdp || rest / (int)x == fdp) &&
                      s->o->gbs % (rest / (int)x) == 0);
    return n;
}

static int ep_values(const ap_space *s, const ap_space_point *pt, double *v) {
    int64_t group = (int64_t)pt->tp * pt->dp * pt->cp;
    int n = 1;
    v[0] = 1;
    if (s->m->moe.experts > 0 && s->tr->ep && !(s->tr->cp_alone && pt->cp > 1))
        n = divisors(s->m->moe.experts, group, v, 64);
    int fx = s->o->fixed.ep;
    KEEP_IF(v, n, (!fx || (int)x == fx) && group % (int64_t)x == 0);
    return n;
}

/* Expert tensor parallelism: the experts unsplit (each rank routes its own tokens to experts
 * at their full width), or the pinned split (--etp: the etp group gathers its ranks' tokens
 * for a 1/etp of the width each, the same work and 1/etp of the experts' states; Megatron-Core
 * takes etp = tp when none is given). Trying etp = tp beside 1 in every MoE search cost 25-60%
 * more time on the bundled MoE examples and won none of their first ten plans, so it is asked
 * for, not searched. ep x etp must divide tp x dp x cp (ap_plan_check). */
static int etp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    int n = 1, fx = s->o->fixed.etp;
    v[0] = fx > 0 ? fx : 1;
    int64_t group = (int64_t)pt->tp * pt->dp * pt->cp;
    KEEP_IF(v, n, group % ((int64_t)pt->ep * (int)x) == 0);
    return n;
}

static int vp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    const int64_t L = s->m->layers;
    int n = 1;
    v[0] = 1;
    if (pt->pp > 1 && s->tr->vp) n = divisors(L / pt->pp, 64, v, 64);
    int fx = s->o->fixed.vp;
    KEEP_IF(v, n, (!fx || (int)x == fx) && ((int)x == 1 || L % ((int64_t)pt->pp * (int)x) == 0));
    return n;
}

/* The ZeRO group the search tries beside full sharding: the data-parallel ranks of one NVLink
 * domain (ranks tp apart, whole cp groups), when that is fewer than all of them; 0 when none.
 * Sharding inside the domain and replicating across domains (HSDP) gathers over NVLink and
 * crosses the network with each rank's shard only, at the cost of dp x cp / group times the
 * states: it wins on slow networks and where ring latency grows with the ranks. */
static int domain_group(const ap_space *s, const ap_space_point *pt) {
    int dom = s->c->nvlink_domain > 0 ? s->c->nvlink_domain : 1;
    int64_t ranks = (int64_t)pt->dp * pt->cp;
    int g = pt->tp < dom ? dom / pt->tp : 1;
    if (g < 2 || g >= ranks || ranks % g != 0 || g % pt->cp != 0) return 0;
    return g;
}

/* ZeRO stages of the trainer (or the pinned one). Without data parallelism a stage shards
 * nothing: it is the same plan as a lower one unless it unlocks another offload option.
 * ZeRO-3, where the trainer shards it within groups (HSDP, MiCS), is tried a second time within
 * the domain's group (value 3.5, domain_group; without offload unless pinned, offo_values),
 * unless the user pinned a group or none. Not
 * tried unpinned: ZeRO-2 in groups (FSDP2 gathers once per step there; on the slow networks
 * where groups pay, the grouped ZeRO-3 plan is about as fast with less memory: Llama-2-7B under
 * FSDP on 32 A100s at 25 Gb/s, ZeRO-2 in groups of 8 is 0.4% faster, its per-layer gathers
 * slowing less compute, and needs 12.7 GiB more; trying it costs a sweep of torchtitan's MoE
 * plans 6% more work and fills the ranking with near-twins) and Megatron-LM's
 * partial distributed optimizer (ZeRO 1 all-reduces over every rank as ZeRO-0 does, never
 * faster than the full one). */
static int zero_values(const ap_space *s, const ap_space_point *pt, double *v) {
    const ap_trainer_caps *tr = s->tr;
    const int fz = s->o->fixed.zero;
    unsigned seen_offload = 0;
    int n = 0, zany = 0;
    for (int z = 0; z <= 3; z++) {
        if (!(tr->zero_mask & (1u << z))) continue;
        if (fz >= 0 && z != fz) continue;
        if (pt->dp * pt->cp == 1 && fz < 0) {
            if (pt->pp > 1 && !(tr->zero_mask_with_pp & (1u << z))) continue;
            unsigned off = ((tr->offload_optimizer_zero_mask >> z) & 1u) |
                           (((tr->offload_params_zero_mask >> z) & 1u) << 1) |
                           (((tr->offload_fraction_zero_mask >> z) & 1u) << 2);
            if (zany && (seen_offload | off) == seen_offload) continue;
            seen_offload |= off;
            zany = 1;
        }
        v[n++] = z;
        if (z == 3 && (tr->zero_group_mask & (1u << z)) && s->o->fixed.zero_group == 0 &&
            domain_group(s, pt) > 0)
            v[n++] = z + 0.5;
    }
    return n;
}

/* Heterogeneous-memory variants (issue 18, hetero.h): an extra offload level beyond the
 * fractions, Colossal-AI ZeRO-3's Gemini auto placement, or DeepSpeed ZeRO-3 with the cluster's
 * NVMe (ZeRO-Infinity: both states on NVMe), unless the user pinned the other kind. */
static int hetero_extra_level(const ap_space *s, int z) {
    const ap_plan *fx = &s->o->fixed;
    if (fx->trainer == AP_TRAINER_COLOSSALAI && z == 3 && fx->hetero.placement != AP_GEMINI_STATIC)
        return 1;
    if (fx->trainer == AP_TRAINER_DEEPSPEED && z == 3 && s->c->nvme_bytes > 0 &&
        fx->hetero.ds_optimizer != AP_OFFLOAD_DEV_CPU)
        return 1;
    return 0;
}

/* Optimizer offload: none, and where the trainer offers it under this ZeRO stage half and all
 * of the optimizer states; a pinned fraction is the only level (< 0 pins "none"); then the
 * heterogeneous level where it exists (value -1). */
static int offo_values(const ap_space *s, const ap_space_point *pt, double *v) {
    const ap_trainer_caps *tr = s->tr;
    double fx = s->o->fixed.offload_optimizer;
    v[0] = 0;
    v[1] = 0.5;
    v[2] = 1;
    int n = tr->offload_optimizer && (tr->offload_optimizer_zero_mask & (1u << pt->zero)) ? 3 : 1;
    if (fx > 0) {
        v[0] = fx;
        n = 1;
    }
    if (fx < 0) n = 1;
    /* the domain's group is tried without offload: offload buys memory, the group spends it */
    if (pt->zero_group > 0 && fx == 0) return 1;
    if (hetero_extra_level(s, pt->zero)) v[n++] = -1; /* the extra heterogeneous level */
    return n;
}

/* Parameter offload: none or all (ZeRO-3 trainers), or the pinned fraction; trainers that move
 * parameters and optimizer states together take both or neither. */
static int offp_values(const ap_space *s, const ap_space_point *pt, double *v) {
    const ap_trainer_caps *tr = s->tr;
    double fx = s->o->fixed.offload_params;
    v[0] = 0;
    v[1] = 1;
    int n = tr->offload_params && (tr->offload_params_zero_mask & (1u << pt->zero)) ? 2 : 1;
    if (fx > 0) {
        v[0] = fx;
        n = 1;
    }
    if (fx < 0) n = 1;
    if (pt->hetero_extra || (pt->zero_group > 0 && fx == 0)) n = 1; /* see offo_values */
    double oo = pt->offload_optimizer;
    KEEP_IF(v, n, !tr->offload_together || (oo > 0) == (x > 0));
    return n;
}

static void set_value(ap_space *s, ap_space_point *pt, int d, double x) {
    switch (d) {
    case D_TP: pt->tp = (int)x; break;
    case D_CP:
        pt->cp = (int)x;
        pt->cp_a2a = x != (double)pt->cp;
        break;
    case D_PP:
        pt->pp = (int)x;
        pt->dp = s->c->gpus / (pt->tp * pt->cp * pt->pp);
        break;
    case D_EP: pt->ep = (int)x; break;
    case D_ETP: pt->etp = (int)x; break;
    case D_VP: pt->vp = (int)x; break;
    case D_ZERO:
        pt->zero = (int)x;
        pt->zero_group = x != (double)pt->zero ? domain_group(s, pt) : 0;
        break;
    case D_OFFO:
        pt->hetero_extra = x < 0;
        pt->offload_optimizer = x < 0 ? 0 : x;
        break;
    default: pt->offload_params = x; break;
    }
}

typedef int (*values_fn)(const ap_space *, const ap_space_point *, double *);
static const values_fn dim_values[AP_SPACE_DIMS] = {
    tp_values, cp_values, pp_values, ep_values, etp_values, vp_values, zero_values, offo_values,
    offp_values,
};

/* ---- the odometer ------------------------------------------------------------------------- */

void ap_space_init(ap_space *s, const ap_model *m, const ap_cluster *c, const ap_search_opts *o) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->c = c;
    s->o = o;
    s->tr = ap_trainer_get(o->fixed.trainer);
    const int cap = (int)(sizeof s->mb_cand / sizeof s->mb_cand[0]);
    for (int64_t d = 1; d <= o->gbs && d <= o->max_mbs && s->nmb_cand >= 0; d++)
        if (o->gbs % d == 0) {
            if (s->nmb_cand == cap) s->nmb_cand = -1;
            else s->mb_cand[s->nmb_cand++] = d;
        }
}

/* Micro-batch sizes of a point: divisors of the per-replica batch up to max_mbs, at most
 * AP_GROUP_MAX_MBS of them, ascending (or the pinned size). They are read off the divisors of
 * the global batch (ap_space_init): a point tests a dozen sizes, not every one up to 64.
 * `cap`: list at most that many from the candidates (the walk asks for one: has_members). */
static int mbs_values(const ap_space *s, int dp, int64_t *out, int cap) {
    int64_t per_dp = s->o->gbs / dp, fx = s->o->fixed.mbs;
    int n = 0;
    if (s->nmb_cand < 0) {
        double v[AP_GROUP_MAX_MBS];
        n = divisors(per_dp, s->o->max_mbs, v, AP_GROUP_MAX_MBS);
        KEEP_IF(v, n, !fx || (int64_t)x == fx);
        for (int i = 0; i < n; i++) out[i] = (int64_t)v[i];
        return n;
    }
    for (int i = 0; i < s->nmb_cand && n < cap; i++) {
        int64_t d = s->mb_cand[i];
        if (d > per_dp) break;
        if (per_dp % d == 0 && (!fx || d == fx)) out[n++] = d;
    }
    return n;
}

/* Whether the search offers recompute level g: the trainer has it and it is not pinned away. */
static int rc_level(const ap_space *s, int g) {
    return (s->tr->recompute_mask & (1u << g)) &&
           (!s->o->fix_recompute || g == (int)s->o->fixed.recompute);
}

/* Recompute levels of a point: none / selective / full (the trainer's, or the pinned one) and,
 * where the trainer recomputes part of a chunk, 3/4, 1/2 and 1/4 of its layers. */
static int rc_values(const ap_space *s, const ap_space_point *pt, ap_recompute *rc, int *layers) {
    const ap_trainer_caps *tr = s->tr;
    const ap_plan *fx = &s->o->fixed;
    int chunk = (int)(s->m->layers / ((int64_t)pt->pp * pt->vp));
    int n = 0;
    for (int g = 0; g < 3; g++) {
        if (!rc_level(s, g)) continue;
        rc[n] = (ap_recompute)g;
        layers[n++] = 0;
        if (g == AP_RECOMPUTE_FULL && tr->recompute_partial && !fx->recompute_layers &&
            chunk >= 4) {
            int fr[3] = {chunk * 3 / 4, chunk / 2, chunk / 4};
            for (int q = 0; q < 3; q++)
                if (fr[q] >= 1 && fr[q] < chunk && (q == 0 || fr[q] != fr[q - 1])) {
                    rc[n] = AP_RECOMPUTE_FULL;
                    layers[n++] = fr[q];
                }
        }
        if (g == AP_RECOMPUTE_FULL && fx->recompute_layers) layers[n - 1] = fx->recompute_layers;
    }
    return n;
}

/* The heterogeneous-memory placement of a base plan (hetero.h), from its offload level:
 * Colossal-AI ZeRO-3 is GeminiPlugin, static with the level's fractions (a parameter fraction
 * without the optimizer's at 1.0 does not exist: Colossal-AI ignores it) or, as the extra level,
 * auto placement; DeepSpeed offload goes to the CPU, and as the extra level with the cluster's
 * NVMe both states to NVMe (ZeRO-Infinity), with swap buffers that hold the largest partition.
 * Returns 0 when the variant does not exist. */
static int no_placement_ok(const ap_space *s, int extra);

/* Whether the plans of point pt take a heterogeneous placement (hetero_place's two cases). */
int ap_space_point_simulated(const ap_space *s, const ap_space_point *pt) {
    const ap_trainer_id tr = s->o->fixed.trainer;
    if (tr == AP_TRAINER_COLOSSALAI) return pt->zero == 3 && pt->pp == 1;
    return tr == AP_TRAINER_DEEPSPEED && pt->pp == 1 && pt->cp == 1 &&
           (pt->hetero_extra || pt->offload_optimizer > 0 || pt->offload_params > 0);
}

static int hetero_place(const ap_space *s, const ap_space_point *pt, ap_plan *p) {
    const ap_plan *fx = &s->o->fixed;
    const int extra = pt->hetero_extra;
    if (!ap_space_point_simulated(s, pt)) return no_placement_ok(s, extra);
    if (p->trainer == AP_TRAINER_COLOSSALAI) {
        ap_plan_hetero_init(&p->hetero);
        if (extra) {
            p->hetero.placement = AP_GEMINI_AUTO;
            p->offload_optimizer = p->offload_params = 0;
            return 1;
        }
        if (fx->hetero.placement == AP_GEMINI_AUTO) return 0;
        /* static, the level's fractions (estimate's rule), and a pinned --shard-param-frac */
        if (!ap_plan_hetero_default(p)) return 0;
        if (fx->hetero.placement == AP_GEMINI_STATIC) {
            p->hetero.shard_param_frac = fx->hetero.shard_param_frac;
            /* offload_param_frac acts only with both other fractions 1.0 (GeminiPlugin) */
            if (p->hetero.offload_param_frac > 0 && p->hetero.shard_param_frac != 1.0) return 0;
        }
        return 1;
    }
    /* DeepSpeed */
    ap_plan_hetero_init(&p->hetero);
    if (extra) {
        if (!(s->c->nvme_bytes > 0)) return 0;
        p->offload_optimizer = p->offload_params = 1.0;
        p->hetero.ds_optimizer = p->hetero.ds_params = AP_OFFLOAD_DEV_NVME;
        /* swap buffers that hold the largest partition (DeepSpeed asserts otherwise) */
        return ap_hetero_size_param_buffers(s->m, p, NULL) == AP_OK;
    }
    if (fx->hetero.ds_optimizer == AP_OFFLOAD_DEV_NVME) return 0;
    return ap_plan_hetero_default(p); /* CPU (estimate's rule) */
}

/* A plan without a placement: none where one is pinned (--gemini, --offload-device nvme), and
 * no extra level. */
static int no_placement_ok(const ap_space *s, int extra) {
    const ap_plan *fx = &s->o->fixed;
    if (fx->hetero.placement != AP_GEMINI_OFF || fx->hetero.ds_optimizer == AP_OFFLOAD_DEV_NVME ||
        fx->hetero.ds_params == AP_OFFLOAD_DEV_NVME)
        return 0;
    return !extra;
}

/* Whether point pt has a member, as ap_space_group says, without building its plan where no
 * placement applies (the odometer asks it of every point it passes). */
static int has_members(ap_space *s, const ap_space_point *pt) {
    if (ap_space_point_simulated(s, pt)) return ap_space_group(s, pt, &s->scratch);
    if (!no_placement_ok(s, pt->hetero_extra)) return 0;
    /* rc_values lists a level whenever one is offered; mbs_values the first size it finds */
    int rc = rc_level(s, AP_RECOMPUTE_NONE) || rc_level(s, AP_RECOMPUTE_SELECTIVE) ||
             rc_level(s, AP_RECOMPUTE_FULL);
    int64_t mbs[AP_GROUP_MAX_MBS];
    return rc && mbs_values(s, pt->dp, mbs, 1) > 0;
}

int ap_space_next(ap_space *s, ap_space_point *pt) {
    int d;
    if (!s->started) {
        s->started = 1;
        d = 0;
        s->n[0] = dim_values[0](s, &s->pt, s->v[0]);
        s->i[0] = 0;
    } else {
        if (s->done) return 0;
        d = AP_SPACE_DIMS - 1;
        s->i[d]++;
    }
    for (;;) {
        if (s->i[d] >= s->n[d]) {
            if (d == 0) {
                s->done = 1;
                return 0;
            }
            s->i[--d]++;
            continue;
        }
        set_value(s, &s->pt, d, s->v[d][s->i[d]]);
        if (d == AP_SPACE_DIMS - 1) {
            if (has_members(s, &s->pt)) {
                *pt = s->pt;
                return 1;
            }
            s->i[d]++;
            continue;
        }
        d++;
        s->n[d] = dim_values[d](s, &s->pt, s->v[d]);
        s->i[d] = 0;
    }
}

/* ---- a point's group ------------------------------------------------------------------------ */

int ap_space_group(const ap_space *s, const ap_space_point *pt, ap_plan_group *g) {
    const ap_trainer_caps *tr = s->tr;
    const ap_search_opts *o = s->o;
    const ap_plan *fx = &o->fixed;
    ap_plan *p = &g->base;
    ap_plan_init(p);
    p->trainer = fx->trainer;
    p->tp = pt->tp; p->cp = pt->cp; p->pp = pt->pp; p->dp = pt->dp; p->ep = pt->ep;
    p->etp = pt->etp; p->vp = pt->vp;
    p->gbs = o->gbs; p->seq = fx->seq;
    p->zero = pt->zero;
    p->dtype = fx->dtype;
    p->flash_attn = fx->flash_attn;
    p->attn_impl = fx->attn_impl;
    p->fp8_params = fx->fp8_params;
    p->cp_a2a = pt->cp_a2a;
    p->fp8_recipe = fx->fp8_recipe;
    p->zero_group = fx->zero_group > 0 ? fx->zero_group : pt->zero_group;
    p->grad_reduce_bytes = fx->grad_reduce_bytes;
    p->gather_bytes = fx->gather_bytes;
    /* dominated in the cost model (search.h): sequence parallelism and overlap when offered,
     * where the sequence splits over tp (without it the plan runs plain TP) */
    p->sp = (pt->tp > 1 && tr->sp && !o->no_sp && ap_plan_sp_divides(p)) ? 1 : 0;
    int dov = !o->no_overlap && ap_trainer_dp_overlap(tr, pt->ep);
    p->overlap_grad = tr->overlap_grad && dov;
    p->overlap_param = tr->overlap_param && dov &&
                       (tr->overlap_param_zero_mask & (1u << pt->zero));
    p->overlap_tp = p->sp && ap_trainer_overlap_tp(tr, &s->c->gpu) && !o->no_overlap;
    p->offload_optimizer = pt->offload_optimizer;
    p->offload_params = pt->offload_params;
    if (!hetero_place(s, pt, p)) return 0;
    g->nrc = rc_values(s, pt, g->rc, g->rc_layers);
    g->nmbs = mbs_values(s, pt->dp, g->mbs, AP_GROUP_MAX_MBS);
    /* the least activation memory: full beats selective beats none; among full, all layers
     * (0) beats a count, and a larger count beats a smaller one */
    int most = 0;
    for (int i = 1; i < g->nrc; i++) {
        if (g->rc[i] != g->rc[most]) {
            if (g->rc[i] > g->rc[most]) most = i;
        } else if (g->rc_layers[most] != 0 &&
                   (g->rc_layers[i] == 0 || g->rc_layers[i] > g->rc_layers[most])) {
            most = i;
        }
    }
    g->most_rc = most;
    return g->nrc > 0 && g->nmbs > 0;
}

void ap_plan_group_member(const ap_plan_group *g, int rc, int mb, ap_plan *p) {
    p->recompute = g->rc[rc];
    p->recompute_layers = g->rc_layers[rc];
    p->mbs = g->mbs[mb];
    p->grad_accum = p->gbs / (p->mbs * p->dp);
}
