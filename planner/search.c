/*
 * search.c - exhaustive plan enumeration with safe pruning (see search.h for the space and the
 * pruning rules). Degrees are enumerated outermost (tp, cp, pp, ep, vp), then ZeRO and offload,
 * which fix the model states of a group; inside a group the recompute level and micro-batch
 * vary. Only the top K fitting estimates are kept, so memory stays O(K).
 */
#include "autoplan/search.h"
#include "autoplan/hetero.h"

#include <stdlib.h>
#include <string.h>

void ap_search_opts_init(ap_search_opts *o) {
    memset(o, 0, sizeof *o);
    ap_plan_init(&o->fixed);
    o->fixed.tp = o->fixed.pp = o->fixed.dp = o->fixed.cp = o->fixed.ep = o->fixed.vp = 0;
    o->fixed.etp = 1;
    o->fixed.mbs = 0;
    o->fixed.zero = -1;
    o->top_k = 10;
    o->prune = 1;
    o->max_mbs = 64;
    ap_estimate_opts_init(&o->est);
}

void ap_search_result_free(ap_search_result *r) {
    ap_free(r->top);
    r->top = NULL;
    r->ntop = 0;
}

ap_confidence ap_estimate_confidence(const ap_estimate *e) {
    if (!e->fits) return AP_CONF_OOM;
    if (e->device_peak_bytes * (1.0 + AP_VALIDATED_MEMORY_ERROR) + e->headroom_bytes >
        e->capacity_bytes)
        return AP_CONF_TIGHT;
    return AP_CONF_FITS;
}

const char *ap_confidence_name(ap_confidence c) {
    return c == AP_CONF_FITS ? "fits" : c == AP_CONF_TIGHT ? "tight" : "oom";
}

static int divisors(int64_t n, int64_t max, int *out, int cap) {
    int k = 0;
    for (int64_t d = 1; d <= n && d <= max && k < cap; d++)
        if (n % d == 0) out[k++] = (int)d;
    return k;
}

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_search_opts *o;
    ap_search_result *r;
    int cap;
    ap_estimate scratch;
    double best_overshoot;
    ap_hetero_cache chunk_cache; /* Gemini's chunk search, shared by a group's plans */
} search_state;

/* The cost model, or for Gemini placements and DeepSpeed offload devices the operator-by-
 * operator simulation (hetero.h). */
static ap_status estimate(search_state *s, const ap_plan *p, ap_estimate *e) {
    if (ap_hetero_applies(p))
        return ap_hetero_estimate(s->m, s->c, p, &s->o->est, &s->chunk_cache, e, NULL);
    return ap_estimate_plan(s->m, s->c, p, &s->o->est, e, NULL);
}

/* Heterogeneous-memory variants of an offload level (issue 18): Colossal-AI ZeRO-3 is
 * GeminiPlugin, static with the level's fractions (a parameter fraction without the other two
 * at 1.0 is skipped: Colossal-AI ignores it) or, as the extra level, auto placement; DeepSpeed
 * offload goes to the CPU, and as the extra level under ZeRO-3 with the cluster's NVMe, both
 * states to NVMe (ZeRO-Infinity). Returns 0 when the variant does not exist. */
static int extra_levels(const ap_trainer_caps *tr, const ap_cluster *c, const ap_plan *fx, int z) {
    (void)tr;
    if (fx->trainer == AP_TRAINER_COLOSSALAI && z == 3 &&
        fx->hetero.placement != AP_GEMINI_STATIC)
        return 1;
    if (fx->trainer == AP_TRAINER_DEEPSPEED && z == 3 && c->nvme_bytes > 0 &&
        fx->hetero.ds_optimizer != AP_OFFLOAD_DEV_CPU)
        return 1;
    return 0;
}

static int hetero_place(ap_plan *p, const ap_model *m, const ap_cluster *c, const ap_plan *fx,
                        int extra, int ipp) {
    if (p->trainer == AP_TRAINER_COLOSSALAI && p->zero == 3 && p->pp == 1) {
        ap_plan_hetero_init(&p->hetero);
        if (extra) {
            if (ipp != 0) return 0;
            p->hetero.placement = AP_GEMINI_AUTO;
            p->offload_optimizer = p->offload_params = 0;
            return 1;
        }
        if (fx->hetero.placement == AP_GEMINI_AUTO) return 0;
        if (p->offload_params > 0 && p->offload_optimizer < 1.0) return 0;
        p->hetero.placement = AP_GEMINI_STATIC;
        p->hetero.offload_optim_frac = p->offload_optimizer;
        p->hetero.offload_param_frac = p->offload_params;
        return 1;
    }
    if (p->trainer == AP_TRAINER_DEEPSPEED && p->pp == 1 && p->cp == 1 &&
        (extra || p->offload_optimizer > 0 || p->offload_params > 0)) {
        ap_plan_hetero_init(&p->hetero);
        if (extra) {
            if (ipp != 0 || !(c->nvme_bytes > 0)) return 0;
            p->offload_optimizer = p->offload_params = 1.0;
            p->hetero.ds_optimizer = p->hetero.ds_params = AP_OFFLOAD_DEV_NVME;
            /* swap buffers that hold the largest partition (DeepSpeed asserts otherwise) */
            return ap_hetero_size_param_buffers(m, p, NULL) == AP_OK;
        }
        if (fx->hetero.ds_optimizer == AP_OFFLOAD_DEV_NVME) return 0;
        if (p->offload_optimizer > 0) p->hetero.ds_optimizer = AP_OFFLOAD_DEV_CPU;
        if (p->offload_params > 0) p->hetero.ds_params = AP_OFFLOAD_DEV_CPU;
        return 1;
    }
    return !extra;
}

int ap_estimate_better(const ap_estimate *a, const ap_estimate *b) {
    if (a->time.step_s != b->time.step_s) return a->time.step_s < b->time.step_s;
    return a->device_peak_bytes < b->device_peak_bytes;
}

static void keep(search_state *s, const ap_estimate *e) {
    ap_search_result *r = s->r;
    int k = s->o->top_k;
    if (r->ntop == k && !ap_estimate_better(e, &r->top[k - 1])) return;
    int pos = r->ntop < k ? r->ntop : k - 1;
    while (pos > 0 && ap_estimate_better(e, &r->top[pos - 1])) pos--;
    int last = r->ntop < k ? r->ntop : k - 1;
    memmove(&r->top[pos + 1], &r->top[pos], (size_t)(last - pos) * sizeof *r->top);
    r->top[pos] = *e;
    if (r->ntop < k) r->ntop++;
}

static void consider_closest(search_state *s, const ap_estimate *e) {
    double over = (e->device_peak_bytes + e->headroom_bytes - e->capacity_bytes) /
                  e->capacity_bytes;
    if (!e->host_fits && e->host_capacity_bytes > 0) {
        double h = (e->host_bytes_per_node - 0.9 * e->host_capacity_bytes) / e->host_capacity_bytes;
        if (h > over) over = h;
    }
    if (!s->r->have_closest || over < s->best_overshoot ||
        (over == s->best_overshoot && ap_estimate_better(e, &s->r->closest))) {
        s->r->closest = *e;
        s->r->have_closest = 1;
        s->best_overshoot = over;
    }
}

/* Evaluate one plan: 1 = fits, 0 = legal but does not fit, -1 = illegal. */
static int eval(search_state *s, const ap_plan *p) {
    ap_search_result *r = s->r;
    r->enumerated++;
    if (ap_plan_check(p, s->m, s->c, s->o->allow_cross_node_tp, NULL) != AP_OK) return -1;
    r->legal++;
    if (s->o->max_evals > 0 && r->evaluated >= s->o->max_evals) {
        r->capped = 1;
        return -1;
    }
    if (estimate(s, p, &s->scratch) != AP_OK) return -1;
    r->evaluated++;
    if (s->o->visit) s->o->visit(s->o->visit_ctx, &s->scratch);
    if (s->scratch.fits) {
        r->fit++;
        keep(s, &s->scratch);
        return 1;
    }
    consider_closest(s, &s->scratch);
    return 0;
}

typedef struct { ap_recompute rc; int layers; } rc_level;

/* The least-memory member of a group (the smallest micro-batch, the most recomputation) does
 * not fit: then no member does. The member is evaluated outside the counters; when it is legal
 * and does not fit it is still a candidate for the closest plan. */
static int group_cannot_fit(search_state *s, const ap_plan *base, const rc_level *lv, int nl,
                            int64_t mbs) {
    ap_plan q = *base;
    q.mbs = mbs;
    q.grad_accum = q.gbs / (q.mbs * q.dp);
    int most = 0;
    for (int i = 1; i < nl; i++) {
        /* full beats selective beats none; among full, all layers (0) beats a count, and a
         * larger count beats a smaller one */
        if (lv[i].rc != lv[most].rc) {
            if (lv[i].rc > lv[most].rc) most = i;
        } else if (lv[most].layers != 0 && (lv[i].layers == 0 || lv[i].layers > lv[most].layers)) {
            most = i;
        }
    }
    q.recompute = lv[most].rc;
    q.recompute_layers = lv[most].layers;
    if (ap_plan_check(&q, s->m, s->c, s->o->allow_cross_node_tp, NULL) != AP_OK) return 0;
    if (estimate(s, &q, &s->scratch) != AP_OK) return 0;
    if (s->scratch.fits) return 0;
    consider_closest(s, &s->scratch);
    return 1;
}

ap_status ap_search(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                    ap_search_result *r, ap_err *err) {
    double t0 = ap_now_s();
    memset(r, 0, sizeof *r);
    if (o->top_k < 1 || o->top_k > 10000)
        return ap_err_set(err, AP_ERR_INPUT, "--top must be in [1, 10000]");
    if (o->gbs < 1) return ap_err_set(err, AP_ERR_INPUT, "the global batch must be >= 1");
    r->top = ap_calloc((size_t)o->top_k, sizeof *r->top);
    if (!r->top) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %d plans", o->top_k);
    search_state *s = ap_malloc(sizeof *s);
    if (!s) {
        ap_free(r->top);
        r->top = NULL;
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    }
    s->m = m;
    s->c = c;
    s->o = o;
    s->r = r;
    s->best_overshoot = 0;
    memset(&s->chunk_cache, 0, sizeof s->chunk_cache);
    const ap_plan *fx = &o->fixed;
    const ap_trainer_caps *tr = ap_trainer_get(fx->trainer);
    const int N = c->gpus;
    const int64_t L = m->layers;

    int tps[64], cps[64], pps[256], eps[64], vps[64], mbss[64];
    int ntp = divisors(N, tr->tp ? (o->allow_cross_node_tp ? N : c->nvlink_domain) : 1, tps, 64);
    for (int it = 0; it < ntp; it++) {
        int tp = tps[it];
        if (fx->tp && tp != fx->tp) continue;
        int ncp = divisors(N / tp, tr->cp ? 64 : 1, cps, 64);
        for (int ic = 0; ic < ncp; ic++) {
            int cp = cps[ic];
            if (fx->cp && cp != fx->cp) continue;
            if (cp > 1 && fx->seq % (2 * cp) != 0) continue;
            int npp = divisors(N / (tp * cp), tr->pp ? (L < 256 ? L : 256) : 1, pps, 256);
            for (int ip = 0; ip < npp; ip++) {
                int pp = pps[ip];
                if (fx->pp && pp != fx->pp) continue;
                int dp = N / (tp * cp * pp);
                if (fx->dp && dp != fx->dp) continue;
                if (o->gbs % dp != 0) continue;
                int nep = 1;
                eps[0] = 1;
                if (m->moe.experts > 0 && tr->ep)
                    nep = divisors(m->moe.experts, (int64_t)tp * dp * cp, eps, 64);
                for (int ie = 0; ie < nep; ie++) {
                    int ep = eps[ie];
                    if (fx->ep && ep != fx->ep) continue;
                    if (((int64_t)tp * dp * cp) % ep != 0) continue;
                    int nvp = 1;
                    vps[0] = 1;
                    if (pp > 1 && tr->vp) nvp = divisors(L / pp, 64, vps, 64);
                    for (int iv = 0; iv < nvp; iv++) {
                        int vp = vps[iv];
                        if (fx->vp && vp != fx->vp) continue;
                        if (vp > 1 && L % ((int64_t)pp * vp) != 0) continue;
                        int64_t per_dp = o->gbs / dp;
                        int nmb = divisors(per_dp, o->max_mbs, mbss, 64);
                        /* without data parallelism ZeRO stages shard nothing: a stage is the
                         * same plan as a lower one unless it unlocks another offload option */
                        unsigned seen_offload = 0;
                        int zany = 0;
                        for (int z = 0; z <= 3; z++) {
                            if (!(tr->zero_mask & (1u << z))) continue;
                            if (fx->zero >= 0 && z != fx->zero) continue;
                            if (dp * cp == 1 && fx->zero < 0) {
                                if (pp > 1 && !(tr->zero_mask_with_pp & (1u << z))) continue;
                                unsigned off = ((tr->offload_optimizer_zero_mask >> z) & 1u) |
                                               (((tr->offload_params_zero_mask >> z) & 1u) << 1) |
                                               (((tr->offload_fraction_zero_mask >> z) & 1u) << 2);
                                if (zany && (seen_offload | off) == seen_offload) continue;
                                seen_offload |= off;
                                zany = 1;
                            }
                            /* offload levels: none, and where the trainer offers it half and
                             * all of the optimizer states; all parameters under ZeRO-3 */
                            double offo[4] = {0, 0.5, 1, 0}, offp[2] = {0, 1};
                            int noo = 1, nop = 1;
                            if (tr->offload_optimizer && (tr->offload_optimizer_zero_mask & (1u << z)))
                                noo = 3;
                            if (tr->offload_params && (tr->offload_params_zero_mask & (1u << z)))
                                nop = 2;
                            /* a pinned fraction is the only level (< 0 pins "none") */
                            if (fx->offload_optimizer > 0) { offo[0] = fx->offload_optimizer; noo = 1; }
                            if (fx->offload_optimizer < 0) noo = 1;
                            if (fx->offload_params > 0) { offp[0] = fx->offload_params; nop = 1; }
                            if (fx->offload_params < 0) nop = 1;
                            int nextra = extra_levels(tr, c, fx, z);
                            for (int io = 0; io < noo + nextra; io++) {
                                for (int ipp = 0; ipp < nop; ipp++) {
                                    if (tr->offload_together && (offo[io] > 0) != (offp[ipp] > 0))
                                        continue;
                                    ap_plan p;
                                    ap_plan_init(&p);
                                    p.trainer = fx->trainer;
                                    p.tp = tp; p.cp = cp; p.pp = pp; p.dp = dp; p.ep = ep;
                                    p.etp = 1; p.vp = vp;
                                    p.gbs = o->gbs; p.seq = fx->seq;
                                    p.zero = z;
                                    p.dtype = fx->dtype;
                                    p.flash_attn = fx->flash_attn;
                                    p.attn_impl = fx->attn_impl;
                                    p.grad_reduce_bytes = fx->grad_reduce_bytes;
                                    p.gather_bytes = fx->gather_bytes;
                                    p.sp = (tp > 1 && tr->sp && !o->no_sp) ? 1 : 0;
                                    p.overlap_grad = tr->overlap_grad && !o->no_overlap;
                                    p.overlap_param = tr->overlap_param && !o->no_overlap &&
                                                      (tr->overlap_param_zero_mask & (1u << z));
                                    p.overlap_tp = p.sp && tr->overlap_tp && !o->no_overlap;
                                    p.offload_optimizer = offo[io < noo ? io : 3];
                                    p.offload_params = offp[ipp];
                                    if (!hetero_place(&p, m, c, fx, io >= noo, ipp)) continue;
                                    /* recompute levels */
                                    rc_level lv[8];
                                    int nl = 0;
                                    int chunk = (int)(L / ((int64_t)pp * vp));
                                    for (int rc = 0; rc < 3; rc++) {
                                        if (!(tr->recompute_mask & (1u << rc))) continue;
                                        if (o->fix_recompute && rc != (int)fx->recompute) continue;
                                        lv[nl].rc = (ap_recompute)rc;
                                        lv[nl++].layers = 0;
                                        if (rc == AP_RECOMPUTE_FULL && tr->recompute_partial &&
                                            !fx->recompute_layers && chunk >= 4) {
                                            int fr[3] = {chunk * 3 / 4, chunk / 2, chunk / 4};
                                            for (int q = 0; q < 3; q++)
                                                if (fr[q] >= 1 && fr[q] < chunk &&
                                                    (q == 0 || fr[q] != fr[q - 1])) {
                                                    lv[nl].rc = AP_RECOMPUTE_FULL;
                                                    lv[nl++].layers = fr[q];
                                                }
                                        }
                                        if (rc == AP_RECOMPUTE_FULL && fx->recompute_layers)
                                            lv[nl - 1].layers = fx->recompute_layers;
                                    }
                                    if (nl == 0 || nmb == 0) continue;
                                    /* group bound: least memory = mbs 1 (or the pinned one),
                                     * the most recompute available */
                                    if (o->prune && group_cannot_fit(s, &p, lv, nl,
                                                                     fx->mbs ? fx->mbs : mbss[0])) {
                                        /* count the skipped members: legal ones are pruned */
                                        for (int il = 0; il < nl; il++)
                                            for (int im = 0; im < nmb; im++) {
                                                if (fx->mbs && mbss[im] != fx->mbs) continue;
                                                ap_plan q = p;
                                                q.recompute = lv[il].rc;
                                                q.recompute_layers = lv[il].layers;
                                                q.mbs = mbss[im];
                                                q.grad_accum = q.gbs / (q.mbs * q.dp);
                                                r->enumerated++;
                                                if (ap_plan_check(&q, m, c, o->allow_cross_node_tp,
                                                                  NULL) == AP_OK) {
                                                    r->legal++;
                                                    r->pruned++;
                                                }
                                            }
                                        continue;
                                    }
                                    for (int il = 0; il < nl; il++) {
                                        p.recompute = lv[il].rc;
                                        p.recompute_layers = lv[il].layers;
                                        for (int im = 0; im < nmb; im++) {
                                            p.mbs = mbss[im];
                                            if (fx->mbs && p.mbs != fx->mbs) continue;
                                            p.grad_accum = p.gbs / (p.mbs * p.dp);
                                            int v = eval(s, &p);
                                            if (v == 0 && o->prune) {
                                                /* larger micro-batches only use more memory */
                                                for (int k = im + 1; k < nmb && !fx->mbs; k++) {
                                                    ap_plan q = p;
                                                    q.mbs = mbss[k];
                                                    q.grad_accum = q.gbs / (q.mbs * q.dp);
                                                    r->enumerated++;
                                                    if (ap_plan_check(&q, m, c,
                                                                      o->allow_cross_node_tp,
                                                                      NULL) == AP_OK) {
                                                        r->legal++;
                                                        r->pruned++;
                                                    }
                                                }
                                                break;
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    ap_free(s);
    r->search_s = ap_now_s() - t0;
    return AP_OK;
}
