/*
 * fit.c - the largest model of a family each strategy can train on the given GPUs and host
 * (fit.h). For one strategy and one model, ap_fit_eval builds the strategy's plan (one GPU
 * group, data parallel over all GPUs, the requested micro-batch, sequence, recompute) and asks
 * the verdict of the part of autoplan that knows it: the cost model (estimate.h) for plain data
 * parallelism and ZeRO-2/3, the heterogeneous-memory simulation (hetero.h) for ZeRO-Offload,
 * ZeRO-Infinity and Gemini, the search (search.h) over every trainer for "best". ap_fit bisects
 * the family's ladder for the boundary between a size that trains and the next that does not.
 *
 * Not here: printing (cli/cmd_fit.c), the families (costmodel/family.c).
 */
#include "autoplan/fit.h"
#include "autoplan/search.h"
#include "autoplan/threads.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[AP_FIT_NSTRATEGIES] = {
    "ddp", "zero-2", "zero-3", "zero-offload", "zero-infinity-cpu", "zero-infinity-nvme",
    "gemini-static", "gemini-auto", "best"};

const char *ap_fit_strategy_name(int s) {
    return s >= 0 && s < AP_FIT_NSTRATEGIES ? names[s] : "?";
}

ap_status ap_fit_strategy_parse(const char *name, int *out, ap_err *err) {
    for (int i = 0; i < AP_FIT_NSTRATEGIES; i++)
        if (name && !strcmp(name, names[i])) return (*out = i), AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "--strategies: unknown strategy '%s' (ddp, zero-2, "
                      "zero-3, zero-offload, zero-infinity-cpu, zero-infinity-nvme, gemini-static, "
                      "gemini-auto, best)", name ? name : "");
}

void ap_fit_opts_init(ap_fit_opts *o) {
    memset(o, 0, sizeof *o);
    o->mbs = 1;
    o->recompute = AP_RECOMPUTE_FULL;
    o->headroom_bytes = AP_DEFAULT_HEADROOM_BYTES;
}

/* ---- one evaluation ----------------------------------------------------------------------- */

static ap_dtype dtype_of(const ap_fit_opts *o) {
    if (o->dtype_set) return o->dtype;
    return o->cluster.gpu.peak_flops[AP_DTYPE_BF16] > 0 ? AP_DTYPE_BF16 : AP_DTYPE_FP16;
}

static ap_status batch_of(const ap_fit_opts *o, const ap_model *m, int64_t *seq, int64_t *gbs,
                          ap_err *err) {
    int dp = o->cluster.gpus;
    *seq = o->seq > 0 ? o->seq : m->seq_len;
    if (*seq < 1) return ap_err_set(err, AP_ERR_INPUT, "--seq: the family has no sequence length");
    int64_t one = o->mbs * dp;
    if (o->tokens_per_step > 0) {
        double seqs = o->tokens_per_step / (double)*seq;
        int64_t g = (int64_t)llround(seqs / (double)one) * one;
        if (g < one) g = one;
        *gbs = g;
    } else {
        *gbs = one;
    }
    return AP_OK;
}

static void plan_of(const ap_fit_opts *o, int s, const ap_model *m, int64_t seq, int64_t gbs,
                    ap_plan *p) {
    ap_plan_init(p);
    p->tp = p->pp = p->cp = p->ep = p->etp = p->vp = 1;
    p->dp = o->cluster.gpus;
    p->mbs = o->mbs;
    p->gbs = gbs;
    p->grad_accum = gbs / (o->mbs * p->dp);
    p->seq = seq;
    p->recompute = o->recompute;
    p->dtype = dtype_of(o);
    p->flash_attn = 1;
    p->overlap_grad = p->overlap_param = 1;
    ap_plan_hetero_init(&p->hetero);
    p->trainer = s == AP_FIT_GEMINI_STATIC || s == AP_FIT_GEMINI_AUTO ? AP_TRAINER_COLOSSALAI
                                                                       : AP_TRAINER_DEEPSPEED;
    switch (s) {
    case AP_FIT_DDP: p->zero = 0; break;
    case AP_FIT_ZERO2: p->zero = 2; break;
    case AP_FIT_ZERO3: p->zero = 3; break;
    case AP_FIT_ZERO_OFFLOAD:
        /* ZeRO-Offload: ZeRO-2 with the optimizer on the host (Ren et al. 2021 Sec. 4) */
        p->zero = 2;
        p->hetero.ds_optimizer = AP_OFFLOAD_DEV_CPU;
        break;
    case AP_FIT_ZERO_INF_CPU:
        p->zero = 3;
        p->hetero.ds_optimizer = p->hetero.ds_params = AP_OFFLOAD_DEV_CPU;
        break;
    case AP_FIT_ZERO_INF_NVME:
        p->zero = 3;
        p->hetero.ds_optimizer = p->hetero.ds_params = AP_OFFLOAD_DEV_NVME;
        break;
    case AP_FIT_GEMINI_STATIC:
        /* the most memory-saving static placement: everything sharded and on the host */
        p->zero = 3;
        p->hetero.placement = AP_GEMINI_STATIC;
        p->hetero.shard_param_frac = p->hetero.offload_optim_frac = 1.0;
        p->hetero.offload_param_frac = 1.0;
        p->offload_optimizer = p->offload_params = 1.0; /* the plan's copy of the fractions */
        p->hetero.hidden_dim = m->hidden; /* the example's chunk search (below) */
        p->hetero.search_range_m = 128;
        break;
    case AP_FIT_GEMINI_AUTO:
        p->zero = 3;
        p->hetero.placement = AP_GEMINI_AUTO;
        /* Colossal-AI's GPT example, examples/language/gpt/gemini/train_gpt_demo.py, builds
           GeminiPlugin(search_range_m=128, hidden_dim=model.config.n_embd) */
        p->hetero.hidden_dim = m->hidden;
        p->hetero.search_range_m = 128;
        break;
    }
    /* overlap the parameter gather only where the trainer offers it for this stage */
    if (!((ap_trainer_get(p->trainer)->overlap_param_zero_mask >> p->zero) & 1u))
        p->overlap_param = 0;
}

static void gib(double b, char *buf, size_t n) { ap_fmt_bytes(b, buf, n); }

static ap_status eval_estimate(const ap_fit_opts *o, const ap_model *m, ap_plan *p,
                               ap_fit_verdict *v, ap_err *err) {
    ap_estimate_opts eo;
    ap_estimate_opts_init(&eo);
    eo.headroom_bytes = o->headroom_bytes;
    eo.allocator_expandable = o->allocator_expandable;
    eo.nccl_eager = o->nccl_eager;
    eo.profile = o->profile;
    eo.kernels = o->kernels;
    ap_estimate e;
    ap_status st = ap_estimate_plan(m, &o->cluster, p, &eo, &e, err);
    if (st == AP_ERR_INFEASIBLE) {
        /* a rule of the trainer, not its memory: no resource binds */
        v->fits = 0;
        v->not_offered = 1;
        v->binding = AP_BIND_NONE;
        snprintf(v->detail, sizeof v->detail, "the trainer cannot run it: %.200s", err->msg);
        return AP_OK;
    }
    if (st != AP_OK) return st;
    v->fits = e.fits;
    v->step_s = e.time.step_s;
    v->tokens_per_s = e.tp.tokens_per_s;
    v->gpu_peak_bytes = e.device_peak_bytes;
    v->host_bytes_per_node = e.host_bytes_per_node;
    char a[32], b[32];
    if (!e.fits) {
        int host = !e.host_fits && e.device_peak_bytes + e.headroom_bytes <= e.capacity_bytes;
        v->binding = host ? AP_BIND_HOST : AP_BIND_GPU;
        if (host) {
            gib(e.host_bytes_per_node, a, sizeof a);
            gib(e.host_capacity_bytes, b, sizeof b);
            snprintf(v->detail, sizeof v->detail, "host %s per node of %s (90%% usable)", a, b);
        } else {
            gib(e.device_peak_bytes + e.headroom_bytes, a, sizeof a);
            gib(e.capacity_bytes, b, sizeof b);
            snprintf(v->detail, sizeof v->detail, "GPU needs %s (peak + headroom) of %s", a, b);
        }
    }
    return AP_OK;
}

static ap_status eval_hetero(const ap_fit_opts *o, const ap_model *m, ap_plan *p,
                             ap_fit_verdict *v, ap_err *err) {
    ap_hetero_opts ho;
    ap_hetero_opts_init(&ho);
    ho.headroom_bytes = o->headroom_bytes; /* Gemini auto ignores it (hetero.h) */
    ho.profile = o->profile;
    ho.kernels = o->kernels;
    ho.nccl_eager = o->nccl_eager;
    ho.record = 0;
    ho.steps = 3;
    ap_hetero_cache hc;
    memset(&hc, 0, sizeof hc);
    hc.shared = o->templates;
    if (o->templates) ho.cache = &hc;
    ap_hetero *h = NULL;
    /* the parameter swap buffers a user of this model sets (DeepSpeed asserts otherwise) */
    ap_status st = ap_hetero_size_param_buffers(m, p, err);
    if (st == AP_OK) st = ap_hetero_run(m, &o->cluster, p, &ho, &h, err);
    ap_hetero_cache_free(&hc); /* the run keeps its copy of the template */
    if (st == AP_ERR_INFEASIBLE) {
        v->fits = 0;
        v->not_offered = 1;
        v->binding = AP_BIND_NONE;
        snprintf(v->detail, sizeof v->detail, "the trainer cannot run it: %.200s", err->msg);
        return AP_OK;
    }
    if (st != AP_OK) return st;
    const ap_hetero_summary *s = ap_hetero_summary_of(h);
    v->fits = s->fits;
    v->binding = s->binding;
    v->step_s = s->step_s;
    v->tokens_per_s = s->tokens_per_s;
    v->gpu_peak_bytes = s->gpu_peak_bytes;
    v->host_bytes_per_node = s->host_bytes_per_node;
    v->nvme_bytes_per_node = s->nvme_bytes_per_node;
    char a[32], b[32];
    if (s->binding == AP_BIND_GPU) {
        if (s->failure[0]) {
            snprintf(v->detail, sizeof v->detail, "%s", s->failure);
        } else {
            gib(s->gpu_peak_bytes + s->headroom_bytes, a, sizeof a);
            gib(s->gpu_capacity_bytes, b, sizeof b);
            snprintf(v->detail, sizeof v->detail,
                     "GPU needs %s (peak + headroom) of %s, first over at %s", a, b, s->over_op);
        }
    } else if (s->binding == AP_BIND_HOST) {
        gib(s->host_bytes_per_node, a, sizeof a);
        gib(s->host_capacity_bytes, b, sizeof b);
        snprintf(v->detail, sizeof v->detail, "host %s per node of %s (90%% usable)", a, b);
    } else if (s->binding == AP_BIND_NVME) {
        gib(s->nvme_bytes_per_node, a, sizeof a);
        gib(s->nvme_capacity_bytes, b, sizeof b);
        snprintf(v->detail, sizeof v->detail, "NVMe %s per node of %s", a, b);
    }
    ap_hetero_free(h);
    return AP_OK;
}

/* The trainers a verdict asks first: those whose searches take no simulation (fsdp's and
 * torchtitan's spaces are small) before Colossal-AI's Gemini and DeepSpeed's offload devices
 * (Gemini holds the larger models where the host binds: 14 bytes per parameter on the host
 * against ZeRO-Offload's 16 and more). */
static const ap_trainer_id verdict_order[] = {AP_TRAINER_MEGATRON, AP_TRAINER_FSDP,
                                              AP_TRAINER_TORCHTITAN, AP_TRAINER_COLOSSALAI,
                                              AP_TRAINER_DEEPSPEED};

/* 1 when no trainer's plan of model m can fit the cluster: every trainer keeps its weights,
 * master weights and optimizer states somewhere (the least of their sums over the trainer
 * table, per parameter: fsdp's fp32 weights and Adam, 12 bytes), and the cluster's GPU, host and
 * NVMe memory together hold less. */
static int states_exceed_cluster(const ap_model *m, const ap_cluster *c) {
    double per_param = INFINITY;
    for (int t = 0; t < AP_TRAINER_COUNT; t++) {
        const ap_trainer_caps *tr = ap_trainer_get((ap_trainer_id)t);
        double b = tr->weight_bytes + tr->master_bytes + tr->optim_bytes;
        if (b < per_param) per_param = b;
    }
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    double nodes = (double)((c->gpus + gpn - 1) / gpn);
    double have = c->gpus * c->gpu.mem_bytes + nodes * (c->cpu_mem_bytes + c->nvme_bytes);
    return (double)ap_model_total_params(m) * per_param > have;
}

/* Whether trainer t's closest plan c is nearer to fitting than the one kept (k of trainer kt):
 * a measured peak first (ap_estimate_measured_first), then the lower device peak, the earlier
 * trainer on a tie. */
static int closer(const ap_estimate *c, int t, int have, const ap_estimate *k, int kt) {
    if (!have) return 1;
    int first = ap_estimate_measured_first(c, k);
    if (first != 0) return first > 0;
    if (c->device_peak_bytes != k->device_peak_bytes)
        return c->device_peak_bytes < k->device_peak_bytes;
    return t < kt;
}

/* The best row's detail when its closest plan has no measured peak (no trainer's plan measured
 * one): the plan's own simulation says why it stopped (e.g. Gemini's "Adjust layout failed",
 * with how much more it needs) instead of a GPU need of 0 B. */
static ap_status closest_unmeasured(const ap_fit_opts *o, const ap_model *m, int64_t seq,
                                    const ap_estimate *c, const char *label, ap_fit_verdict *v,
                                    ap_err *err) {
    ap_fit_verdict sv;
    memset(&sv, 0, sizeof sv);
    ap_model mm = *m;
    mm.seq_len = seq;
    ap_plan p = c->plan;
    const char *why = "its simulation measured no GPU peak";
    if (ap_hetero_applies(&p)) {
        ap_status st = eval_hetero(o, &mm, &p, &sv, err);
        if (st != AP_OK) return st;
        if (sv.detail[0]) why = sv.detail;
        if (sv.gpu_peak_bytes > 0) v->gpu_peak_bytes = sv.gpu_peak_bytes;
    }
    /* composed whole, then cut to the detail's size (the trainer's message can be long) */
    char line[640];
    int len = snprintf(line, sizeof line, "no trainer's plan fits; closest %s (%s): GPU need "
                       "unknown, %s", label, ap_trainer_name(c->plan.trainer), why);
    size_t cut = len < 0 ? 0 : (size_t)len < sizeof v->detail ? (size_t)len : sizeof v->detail - 1;
    memcpy(v->detail, line, cut);
    v->detail[cut] = '\0';
    return AP_OK;
}

/* The search's best over every trainer; verdict: only whether one fits (v->fits; the first
 * trainer with a fitting plan ends it, its plan is not the best and nothing else is set:
 * *complete 0). A verdict that asks every trainer and finds none fitting has searched what the
 * full evaluation searches (no trainer's search is bounded then), so it says all of it
 * (*complete 1: the closest plan does not depend on the order the trainers are asked in)
 * unless a simulation stopped once its plan could not fit (search.h any_fit), which leaves
 * that plan out of the closest: *complete 0. */
static ap_status eval_best(const ap_fit_opts *o, const ap_model *m, int64_t seq, int64_t gbs,
                           int verdict, int known_fit, ap_fit_verdict *v, int *complete,
                           ap_err *err) {
    int have = 0;
    ap_estimate best;
    ap_estimate closest;
    int have_closest = 0, closest_t = 0, stopped = 0;
    const int nt = verdict ? (int)(sizeof verdict_order / sizeof verdict_order[0])
                           : AP_TRAINER_COUNT;
    *complete = 0;
    if (verdict && states_exceed_cluster(m, &o->cluster)) return AP_OK; /* v->fits = 0 */
    for (int i = 0; i < nt; i++) {
        int t = verdict ? (int)verdict_order[i] : i;
        if (t == AP_TRAINER_RUNTIME) continue; /* autoplan run's CPU executor, not a GPU trainer */
        ap_search_opts so;
        ap_search_opts_init(&so);
        so.fixed.trainer = (ap_trainer_id)t;
        so.fixed.seq = seq;
        so.fixed.dtype = dtype_of(o);
        so.fix_dtype = 1;
        /* a recomputation the caller gave is pinned like the sequence and dtype */
        so.fixed.recompute = o->recompute;
        so.fix_recompute = o->recompute_set;
        so.gbs = gbs;
        so.top_k = 1;
        /* the best plan is read, and the closest only when none fits (no bound then) */
        so.answer_only = 1;
        so.any_fit = verdict;
        /* a verdict found a fitting plan: the best is read, never the closest */
        so.no_closest = known_fit;
        so.hetero_templates = o->templates;
        so.est.headroom_bytes = o->headroom_bytes;
        so.est.allocator_expandable = o->allocator_expandable;
        so.est.nccl_eager = o->nccl_eager;
        so.est.profile = o->profile;
        so.est.kernels = o->kernels;
        /* a trainer slower than the best so far cannot take its place; one whose fastest is
           no slower keeps its whole tie window under this bound, so its answer is the same */
        if (have) so.step_bound_s = best.time.step_s * (1 + so.tie_margin);
        ap_search_result r;
        memset(&r, 0, sizeof r);
        ap_model mm = *m;
        mm.seq_len = seq;
        ap_status st = ap_search(&mm, &o->cluster, &so, &r, err);
        if (st != AP_OK) {
            ap_search_result_free(&r);
            if (st == AP_ERR_INFEASIBLE || st == AP_ERR_INPUT) continue;
            return st;
        }
        stopped |= r.stopped > 0;
        if (verdict && r.ntop > 0) {
            ap_search_result_free(&r);
            v->fits = 1;
            return AP_OK;
        }
        if (r.ntop > 0 && (!have || ap_estimate_better(&r.top[0], &best))) {
            best = r.top[0];
            have = 1;
        }
        if (r.ntop == 0 && r.have_closest && closer(&r.closest, t, have_closest, &closest,
                                                    closest_t)) {
            closest = r.closest;
            closest_t = t;
            have_closest = 1;
        }
        ap_search_result_free(&r);
    }
    *complete = !stopped;
    if (have) {
        v->fits = 1;
        v->plan = best.plan;
        v->step_s = best.time.step_s;
        v->tokens_per_s = best.tp.tokens_per_s;
        v->gpu_peak_bytes = best.device_peak_bytes;
        v->host_bytes_per_node = best.host_bytes_per_node;
        return AP_OK;
    }
    v->fits = 0;
    v->binding = AP_BIND_GPU;
    if (have_closest) {
        char a[32], b[32], l[96];
        v->binding = closest.host_fits ? AP_BIND_GPU : AP_BIND_HOST;
        v->plan = closest.plan;
        v->gpu_peak_bytes = closest.device_peak_bytes;
        v->host_bytes_per_node = closest.host_bytes_per_node;
        ap_plan_label(&closest.plan, l, sizeof l);
        if (!(closest.device_peak_bytes > 0))
            return closest_unmeasured(o, m, seq, &closest, l, v, err);
        gib(closest.device_peak_bytes + closest.headroom_bytes, a, sizeof a);
        gib(closest.capacity_bytes, b, sizeof b);
        snprintf(v->detail, sizeof v->detail, "no trainer's plan fits; closest %s (%s): GPU needs "
                 "%s (peak + headroom) of %s%s", l, ap_trainer_name(closest.plan.trainer), a, b,
                 closest.host_fits ? "" : ", host memory short too");
    } else {
        snprintf(v->detail, sizeof v->detail, "no trainer can run this model on these GPUs");
    }
    return AP_OK;
}

/* What an evaluation is asked: everything (EVAL_FULL); only whether the size fits
 * (EVAL_VERDICT, where that saves work: the best, without a throughput floor, which needs the
 * best plan's tokens/s); or everything of a size a verdict found fitting (EVAL_FITS: the best
 * plan is read, never the closest, so simulations stop once their plan cannot fit). */
enum { EVAL_FULL, EVAL_VERDICT, EVAL_FITS };

/* ap_fit_eval for the question `ask` (EVAL_*); *full = 0 when only v->fits is set (1 when the
 * verdict took the whole evaluation). */
static ap_status fit_eval(const ap_fit_opts *o, int s, const ap_model *m, int ask,
                          ap_fit_verdict *v, int *full, ap_err *err) {
    memset(v, 0, sizeof *v);
    int64_t seq = 0, gbs = 0;
    ap_status st = batch_of(o, m, &seq, &gbs, err);
    if (st != AP_OK) return st;
    const int verdict = ask == EVAL_VERDICT && s == AP_FIT_BEST && !(o->min_tokens_per_s > 0);
    *full = !verdict;
    if (s == AP_FIT_BEST) {
        st = eval_best(o, m, seq, gbs, verdict, ask == EVAL_FITS, v, full, err);
    } else {
        plan_of(o, s, m, seq, gbs, &v->plan);
        if (s <= AP_FIT_ZERO3) st = eval_estimate(o, m, &v->plan, v, err);
        else st = eval_hetero(o, m, &v->plan, v, err);
    }
    if (st != AP_OK) return st;
    if (v->fits && o->min_tokens_per_s > 0 && v->tokens_per_s < o->min_tokens_per_s) {
        v->fits = 0;
        v->binding = AP_BIND_THROUGHPUT;
        snprintf(v->detail, sizeof v->detail, "%.0f tokens/s, below the floor of %.0f",
                 v->tokens_per_s, o->min_tokens_per_s);
    }
    return AP_OK;
}

ap_status ap_fit_eval(const ap_fit_opts *o, int s, const ap_model *m, ap_fit_verdict *v,
                      ap_err *err) {
    int full;
    return fit_eval(o, s, m, EVAL_FULL, v, &full, err);
}

/* ---- the bisection ------------------------------------------------------------------------ */

/* Rung r's evaluation for the question `ask` (EVAL_*; *full says whether the rest of v is
 * set); counted in e->evaluations. */
static ap_status eval_rung(const ap_fit_opts *o, int s, const ap_family_rung *r, int ask,
                           ap_fit_verdict *v, int *full, char *name, size_t nn, ap_fit_entry *e,
                           ap_err *err) {
    ap_model m;
    ap_status st = ap_family_model(o->family, r, &m, err);
    if (st != AP_OK) return st;
    if (name) snprintf(name, nn, "%s", m.name);
    e->evaluations++;
    return fit_eval(o, s, &m, ask, v, full, err);
}

/* Bisect the ladder for the boundary between a size that trains and the next that does not.
 * The sizes between are asked only whether they fit; the boundary's two are then evaluated in
 * full where the probe was not (the best plan at the largest, why the next stops). */
static ap_status fit_one(const ap_fit_opts *o, int s, const ap_family_rung *rungs, int n,
                         ap_fit_entry *e, ap_err *err) {
    ap_fit_verdict v;
    ap_status st;
    char nm[128];
    int full;
    e->nrungs = n;
    e->rung = -1;
    /* the smallest size: when it fails, nothing trains */
    if ((st = eval_rung(o, s, &rungs[0], EVAL_FULL, &v, &full, nm, sizeof nm, e, err)) != AP_OK)
        return st;
    if (!v.fits) {
        e->found = 0;
        e->next = v;
        e->binding = v.binding;
        e->have_next = 1;
        e->next_params = rungs[0].params;
        snprintf(e->next_model, sizeof e->next_model, "%s", nm);
        return AP_OK;
    }
    int lo = 0, hi = n; /* fits(lo), !fits(hi) (hi == n: past the ladder) */
    int lo_full = 1, hi_full = 0;
    ap_fit_verdict vlo = v, vhi;
    memset(&vhi, 0, sizeof vhi);
    st = eval_rung(o, s, &rungs[n - 1], EVAL_VERDICT, &v, &full, NULL, 0, e, err);
    if (st != AP_OK) return st;
    if (v.fits) {
        lo = n - 1;
        vlo = v;
        lo_full = full;
    } else {
        hi = n - 1;
        vhi = v;
        hi_full = full;
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            st = eval_rung(o, s, &rungs[mid], EVAL_VERDICT, &v, &full, NULL, 0, e, err);
            if (st != AP_OK) return st;
            if (v.fits) {
                lo = mid;
                vlo = v;
                lo_full = full;
            } else {
                hi = mid;
                vhi = v;
                hi_full = full;
            }
        }
    }
    if (!lo_full &&
        (st = eval_rung(o, s, &rungs[lo], EVAL_FITS, &vlo, &full, NULL, 0, e, err)) != AP_OK)
        return st;
    if (hi < n && !hi_full &&
        (st = eval_rung(o, s, &rungs[hi], EVAL_FULL, &vhi, &full, NULL, 0, e, err)) != AP_OK)
        return st;
    e->found = 1;
    e->rung = lo;
    e->largest_params = rungs[lo].params;
    e->at = vlo;
    ap_model m;
    if ((st = ap_family_model(o->family, &rungs[lo], &m, err)) != AP_OK) return st;
    snprintf(e->model, sizeof e->model, "%s", m.name);
    if (hi < n) {
        e->have_next = 1;
        e->next = vhi;
        e->next_params = rungs[hi].params;
        e->binding = vhi.binding;
        if ((st = ap_family_model(o->family, &rungs[hi], &m, err)) != AP_OK) return st;
        snprintf(e->next_model, sizeof e->next_model, "%s", m.name);
    } else {
        e->binding = AP_BIND_NONE;
    }
    return AP_OK;
}

/* The strategies to bisect, each with its own entry, status and error, taken by the workers in
 * turn: each entry is one strategy's alone, so the answer does not depend on the threads. */
typedef struct {
    ap_fit_entry *e;
    ap_status st;
    ap_err err;
} fit_job;

typedef struct {
    const ap_fit_opts *o;
    const ap_family_rung *rungs;
    int nrungs;
    fit_job jobs[AP_FIT_NSTRATEGIES];
    int njobs, next;
    pthread_mutex_t mu;
} fit_run;

static void *fit_worker(void *arg) {
    fit_run *run = arg;
    for (;;) {
        pthread_mutex_lock(&run->mu);
        int i = run->next < run->njobs ? run->next++ : -1;
        pthread_mutex_unlock(&run->mu);
        if (i < 0) return NULL;
        fit_job *j = &run->jobs[i];
        memset(&j->err, 0, sizeof j->err);
        j->st = fit_one(run->o, j->e->strategy, run->rungs, run->nrungs, j->e, &j->err);
    }
}

/* A recomputation no strategy asked can run is a bad option, not an answer: every trainer
 * refusing the smallest size refuses them all (a rule of the plan, not of the size). */
static ap_status refuse_not_offered(const ap_fit_opts *o, const ap_fit_result *r, ap_err *err) {
    const ap_fit_entry *first = NULL;
    for (int i = 0; i < r->n; i++) {
        const ap_fit_entry *e = &r->e[i];
        if (!e->available) continue;
        /* refused for the recomputation, not some other rule of the size */
        if (e->found || !e->next.not_offered || !strstr(e->next.detail, "recomput"))
            return AP_OK;
        if (!first) first = e;
    }
    if (!first || !o->recompute_set) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "--recompute: no strategy asked can run %s "
                      "recomputation (%s: %.150s)", ap_recompute_name(o->recompute), first->name,
                      first->next.detail);
}

ap_status ap_fit(const ap_fit_opts *o, ap_fit_result *r, ap_err *err) {
    memset(r, 0, sizeof *r);
    if (!o->family) return ap_err_set(err, AP_ERR_INPUT, "fit: no family");
    if (o->mbs < 1 || o->mbs > 1 << 20)
        return ap_err_set(err, AP_ERR_INPUT, "--mbs: must be in [1, 2^20], got %lld",
                          (long long)o->mbs);
    if (!(o->headroom_bytes >= 0) || !isfinite(o->headroom_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "--headroom: must be >= 0");
    if (!(o->min_tokens_per_s >= 0) || !isfinite(o->min_tokens_per_s))
        return ap_err_set(err, AP_ERR_INPUT, "--min-tokens-per-s: must be >= 0");
    ap_status st = ap_cluster_validate(&o->cluster, "cluster", err);
    if (st != AP_OK) return st;
    ap_family_rung *rungs = NULL;
    int n = 0;
    if ((st = ap_family_ladder(o->family, &rungs, &n, err)) != AP_OK) return st;
    r->nrungs = n;
    r->smallest_params = rungs[0].params;
    r->largest_rung_params = rungs[n - 1].params;
    ap_model m0;
    if ((st = ap_family_model(o->family, &rungs[0], &m0, err)) != AP_OK ||
        (st = batch_of(o, &m0, &r->seq, &r->gbs, err)) != AP_OK) {
        ap_free(rungs);
        return st;
    }
    /* one store of simulation templates for every strategy and probe */
    ap_fit_opts oc = *o;
    ap_hetero_store *own = o->templates ? NULL : ap_hetero_store_new();
    if (own) oc.templates = own;
    fit_run run = {.o = &oc, .rungs = rungs, .nrungs = n};
    for (int s = 0; s < AP_FIT_NSTRATEGIES; s++) {
        if (o->strategies && !(o->strategies & (1u << s))) continue;
        ap_fit_entry *e = &r->e[r->n++];
        e->strategy = s;
        snprintf(e->name, sizeof e->name, "%s", names[s]);
        e->available = 1;
        if (s == AP_FIT_ZERO_INF_NVME && !(o->cluster.nvme_bytes > 0)) {
            e->available = 0;
            snprintf(e->why_unavailable, sizeof e->why_unavailable,
                     "no NVMe (--nvme SIZE --nvme-bw BW)");
            continue;
        }
        /* the search over every trainer is the longest: it starts first */
        fit_job *j = &run.jobs[run.njobs++];
        j->e = e;
        if (s == AP_FIT_BEST) {
            fit_job t = run.jobs[0];
            run.jobs[0] = *j;
            *j = t;
        }
    }
    int nt = o->threads > 0 ? o->threads : ap_online_cores();
    if (nt > run.njobs) nt = run.njobs;
    pthread_mutex_init(&run.mu, NULL);
    /* nt - 1 helpers (threads.h) and this thread pull the jobs; a helper that cannot be had
       leaves its share to the others */
    ap_tasks team;
    ap_tasks_start_same(&team, nt > 1 ? nt - 1 : 0, fit_worker, &run);
    fit_worker(&run);
    ap_tasks_wait(&team);
    pthread_mutex_destroy(&run.mu);
    ap_hetero_store_free(own);
    ap_free(rungs);
    /* the first failure in the strategies' order */
    const fit_job *bad = NULL;
    for (int i = 0; i < run.njobs; i++)
        if (run.jobs[i].st != AP_OK && (!bad || run.jobs[i].e < bad->e)) bad = &run.jobs[i];
    if (bad) {
        if (err) *err = bad->err;
        return bad->st;
    }
    return refuse_not_offered(o, r, err);
}
