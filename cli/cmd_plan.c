/*
 * cmd_plan.c - `autoplan plan` (also `autoplan MODEL --gpus N`): search the plans that fit,
 * rank them, say how sure the answer is, and for GPU-count sweeps how long and how much the
 * training takes. Results are cached in the SQLite store (db/), keyed by everything that
 * determines them (ap_search_key_text); the table is always printed from the result JSON, so a
 * cached answer prints exactly like a fresh one.
 *
 * Structure: setup (flags -> request -> resolved search, the cache), run_search (the cache or a
 * fresh search with its suggestions and robustness check), the printers, write_outputs
 * (plan.json and trainer configs of the best plan), sweep (one search per GPU count).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "autoplan/text.h"
#include "autoplan/db.h"
#include "autoplan/emit.h"
#include "autoplan/files.h"
#include "autoplan/partition.h"
#include "autoplan/planio.h"
#include "autoplan/result.h"
#include "autoplan/search.h"


typedef struct {
    ap_flags fl;
    ap_request rq;
    ap_resolved r;        /* model, cluster (of the first count), search options */
    int counts[AP_MAX_GPU_COUNTS];
    int ncounts;
    double tokens;        /* --tokens, 0 = not asked */
    double price;         /* --gpu-hour-price, USD */
    double deadline_s;
    int json;
    int default_batch;    /* the global batch is the default (no --gbs/--tokens-per-step) */
    ap_db *db;
} plan_cmd;

static double jnum(const ap_json *o, const char *a, const char *b) {
    const ap_json *x = ap_json_get(o, a);
    if (b) x = ap_json_get(x, b);
    return ap_json_number(x);
}

/* ---- variants of the problem, for the suggestions ---- */

/* Best fitting plan of the search `base` with another cluster or trainer; returns 1 and fills
 * *best when something fits. */
static int try_variant(const ap_model *m, const ap_search_opts *base, const ap_cluster *c,
                       ap_trainer_id tr, ap_estimate *best) {
    ap_search_opts so = *base;
    so.fixed.trainer = tr;
    so.top_k = 1;
    so.resplit = 0; /* whether it fits, as the uniform search finds it */
    so.answer_only = 1; /* its best plan alone is read */
    if (tr != base->fixed.trainer && !ap_trainer_get(tr)->fp16 && so.fixed.dtype == AP_DTYPE_FP16)
        so.fixed.dtype = AP_DTYPE_BF16;
    ap_search_result r;
    if (ap_search(m, c, &so, &r, NULL) != AP_OK) return 0;
    int ok = r.ntop > 0;
    if (ok) *best = r.top[0];
    ap_search_result_free(&r);
    return ok;
}

/* 1 if anything beyond the trainer was pinned by the user. */
static int has_pins(const ap_search_opts *so) {
    const ap_plan *f = &so->fixed;
    return f->tp || f->pp || f->dp || f->cp || f->ep || f->vp || f->mbs || f->zero >= 0 ||
           so->fix_recompute || f->offload_optimizer != 0 || f->offload_params != 0 ||
           f->recompute_layers || f->zero_group || so->no_sp || so->no_overlap;
}

static void suggest(ap_json *sug, const char *what, const ap_estimate *best) {
    char line[512], lbl[160];
    snprintf(line, sizeof line, "%s: %s fits (%.1f GiB of %.1f GiB)", what,
             ap_plan_label(&best->plan, lbl, sizeof lbl), best->device_peak_bytes / AP_GIB,
             best->capacity_bytes / AP_GIB);
    ap_json_push(sug, ap_json_new_string(line));
}

/* When no plan is legal, is the global batch the reason? Every data-parallel rank takes an
 * equal share of the batch, so dp must divide it; with --gpus 1000 and 1024 sequences only dp 8
 * divides both, and 125 GPUs per replica has no legal tp x pp x cp. Tries the batches nearest
 * to the asked one that are multiples of a divisor d >= sqrt(N) of the GPU count (large
 * data-parallel groups), closest first, at most eight; returns 1 with the first that fits. */
static int batch_variant(const plan_cmd *pc, const ap_cluster *c, int64_t *gbs,
                         ap_estimate *best) {
    int64_t B = pc->r.search.gbs, N = c->gpus, cand[128];
    int n = 0;
    for (int64_t d = N; d >= 1 && d * d >= N && n < 126; d--) {
        if (N % d) continue;
        int64_t lo = B / d * d, hi = lo + d;
        if (lo >= d && lo != B) cand[n++] = lo;
        if (hi != B) cand[n++] = hi;
    }
    /* closest to the asked batch first, the smaller of two as close */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            int64_t a = cand[j - 1], b = cand[j];
            int64_t da = a > B ? a - B : B - a, db = b > B ? b - B : B - b;
            if (db < da || (db == da && b < a)) {
                cand[j - 1] = b;
                cand[j] = a;
            }
        }
    static ap_search_opts v;
    v = pc->r.search;
    int found = 0;
    for (int i = 0, tried = 0; i < n && tried < 8 && !found; i++) {
        if (i > 0 && cand[i] == cand[i - 1]) continue;
        tried++;
        v.gbs = cand[i];
        if (try_variant(&pc->r.model, &v, c, v.fixed.trainer, best)) {
            *gbs = cand[i];
            found = 1;
        }
    }
    return found;
}

/* The cluster the command's flags give with `gpus` GPUs, and with the catalog GPU `gpu` where
 * not NULL (as adding --gpu to the command line would: it overrides a --cluster file's): the
 * node shape `--gpus <gpus>` alone would give it, unless the user fixed the node (a sweep
 * starting below one node, or a suggestion of more GPUs than one node, must not keep that
 * partial node). */
static ap_status cluster_at(const plan_cmd *pc, int gpus, const char *gpu, ap_cluster *c,
                            ap_err *err) {
    ap_request rq = pc->rq;
    if (gpu) rq.gpu = gpu;
    rq.gpus.given = 1;
    rq.gpus.v = gpus;
    ap_status st = ap_request_cluster(&rq, c, err);
    if (st != AP_OK) return st;
    int auto_node = !rq.gpus_per_node.given && !rq.cluster_file && !rq.nvlink_domain.given;
    int ref = c->gpu.ref_gpus_per_node > 0 ? c->gpu.ref_gpus_per_node : 1;
    if (auto_node)
        ap_cluster_set_gpus_per_node(c, ref);
    else if (c->gpus_per_node > c->gpus)
        ap_cluster_set_gpus_per_node(c, c->gpus);
    return AP_OK;
}

static void add_suggestions(const plan_cmd *pc, const ap_cluster *c, ap_json *out) {
    const ap_search_opts *so = &pc->r.search;
    const ap_model *m = &pc->r.model;
    ap_json *sug = ap_json_new_array();
    static ap_estimate best;
    static ap_search_opts free_so;
    char what[128];
    /* nothing legal: the batch first, it is the usual reason at odd GPU counts */
    int64_t g2 = 0;
    if (!ap_json_get(out, "closest") && batch_variant(pc, c, &g2, &best)) {
        ap_json_add_number(out, "batch_fits", (double)g2);
        snprintf(what, sizeof what, "use --gbs %lld", (long long)g2);
        suggest(sug, what, &best);
    }
    /* the user's pins first: the same GPUs with everything free */
    if (has_pins(so)) {
        ap_search_opts_init(&free_so);
        free_so.fixed.trainer = so->fixed.trainer;
        free_so.fixed.seq = so->fixed.seq;
        free_so.fixed.dtype = so->fixed.dtype;
        free_so.fixed.flash_attn = so->fixed.flash_attn;
        free_so.fixed.attn_impl = so->fixed.attn_impl;
        free_so.gbs = so->gbs;
        free_so.est = so->est;
        free_so.allow_cross_node_tp = so->allow_cross_node_tp;
        if (try_variant(m, &free_so, c, so->fixed.trainer, &best))
            suggest(sug, "drop the pinned options (--fix, --tp, --mbs, --recompute, ...)", &best);
    }
    /* more GPUs of the same kind (the global batch must stay divisible) */
    for (int mult = 2; mult <= 64; mult *= 2) {
        ap_cluster c2;
        ap_err e2;
        if (cluster_at(pc, c->gpus * mult, NULL, &c2, &e2) != AP_OK) continue;
        if (try_variant(m, so, &c2, so->fixed.trainer, &best)) {
            snprintf(what, sizeof what, "use %d GPUs", c2.gpus);
            suggest(sug, what, &best);
            break;
        }
    }
    /* another trainer on the same GPUs */
    for (int t = 0; t < AP_TRAINER_COUNT; t++) {
        /* the runtime trainer: autoplan run's CPU executor, not a GPU trainer */
        if (t == (int)so->fixed.trainer || t == AP_TRAINER_RUNTIME ||
            !try_variant(m, so, c, (ap_trainer_id)t, &best))
            continue;
        snprintf(what, sizeof what, "use --trainer %s", ap_trainer_name((ap_trainer_id)t));
        suggest(sug, what, &best);
    }
    /* more host memory (offload, Gemini and ZeRO-Infinity keep model states there): the
       search's best plan with twice, four and eight times the host memory per node */
    for (int mult = 2; mult <= 8; mult *= 2) {
        ap_cluster c2 = *c;
        c2.cpu_mem_bytes = c->cpu_mem_bytes * mult;
        if (try_variant(m, so, &c2, so->fixed.trainer, &best)) {
            char line[512], lbl[160];
            snprintf(line, sizeof line, "more host memory: with --cpu-mem %.0fGiB (per node) "
                     "%s fits (host %.1f GiB per node, GPU %.1f GiB of %.1f GiB)",
                     c2.cpu_mem_bytes / AP_GIB,
                     ap_plan_label(&best.plan, lbl, sizeof lbl), best.host_bytes_per_node / AP_GIB,
                     best.device_peak_bytes / AP_GIB, best.capacity_bytes / AP_GIB);
            ap_json_push(sug, ap_json_new_string(line));
            break;
        }
    }
    /* a GPU with more memory */
    const char *bigger[] = {"h200", "b200", "mi300x"};
    for (size_t i = 0; i < sizeof bigger / sizeof bigger[0]; i++) {
        const ap_gpu *g = ap_gpu_find(bigger[i]);
        if (!g || g->mem_bytes <= c->gpu.mem_bytes) continue;
        /* the user's other cluster settings kept (network, node size, host memory), as the
           suggested command line would keep them */
        ap_cluster c2;
        ap_err e2;
        if (cluster_at(pc, c->gpus, g->name, &c2, &e2) != AP_OK) continue;
        if (try_variant(m, so, &c2, so->fixed.trainer, &best)) {
            snprintf(what, sizeof what, "use --gpu %s", g->name);
            suggest(sug, what, &best);
            break;
        }
    }
    if (ap_json_size(sug) == 0 && ap_json_get(out, "closest"))
        ap_json_push(sug, ap_json_new_string(
                              "no variant tried fits (up to 64x the GPUs, every trainer, "
                              "H200/B200/MI300X); the searched space already includes full "
                              "recompute, the smallest micro-batch and CPU offload"));
    else if (ap_json_size(sug) == 0)
        ap_json_push(sug, ap_json_new_string("no variant tried has a legal plan (up to 64x the "
                                             "GPUs, every trainer, nearby global batches)"));
    ap_json_add(out, "suggestions", sug);
}

/* Does the best plan stay best under -20% network bandwidth and -10% GEMM efficiency? Stress
 * can only reorder plans that it slows by different factors: when no other plan shown is slowed
 * less than plan 1 (all compute-bound alike, or plan 1 the least exposed), the answer is known
 * without asking and the line is not printed (could_reorder false). */
static void add_robustness(const plan_cmd *pc, const ap_cluster *c, const ap_search_result *r,
                           ap_json *out) {
    if (r->ntop == 0) return;
    ap_estimate_opts stress = pc->r.search.est;
    stress.net_bw_scale = 0.8;
    stress.gemm_eff_scale = 0.9;
    static ap_estimate e;
    int best = -1, closest = -1, could = 0;
    double best_s = 0, slow0 = 0, gap = 0;
    for (int i = 0; i < r->ntop; i++) {
        if (ap_estimate_plan(&pc->r.model, c, &r->top[i].plan, &stress, &e, NULL) != AP_OK)
            continue;
        double slow = e.time.step_s / r->top[i].time.step_s; /* how much stress slows it */
        if (i == 0) slow0 = slow;
        else if (slow < slow0 * (1 - 1e-3)) could = 1;
        if (best < 0 || e.time.step_s < best_s) {
            best = i;
            best_s = e.time.step_s;
        }
    }
    /* the nearest other plan under stress, for the robust line */
    for (int i = 1; i < r->ntop && best == 0; i++) {
        if (ap_estimate_plan(&pc->r.model, c, &r->top[i].plan, &stress, &e, NULL) != AP_OK)
            continue;
        double g = e.time.step_s / best_s - 1;
        if (closest < 0 || g < gap) {
            closest = i;
            gap = g;
        }
    }
    ap_json *rb = ap_json_new_object();
    char lbl[160];
    ap_json_add_number(rb, "net_bw_scale", 0.8);
    ap_json_add_number(rb, "gemm_eff_scale", 0.9);
    ap_json_add_bool(rb, "best_stays_best", best == 0);
    ap_json_add_bool(rb, "could_reorder", could);
    if (best >= 0) {
        ap_json_add_string(rb, "best_under_stress", ap_plan_label(&r->top[best].plan, lbl, sizeof lbl));
        ap_json_add_number(rb, "best_under_stress_rank", best + 1);
        ap_json_add_number(rb, "best_under_stress_step_s", best_s);
    }
    if (closest > 0) {
        ap_json_add_number(rb, "runner_up_rank", closest + 1);
        ap_json_add_number(rb, "runner_up_gap", gap);
    }
    ap_json_add(out, "robustness", rb);
}

/* ---- one search, as result JSON (from the cache when possible) ---- */

static void cache_key(const plan_cmd *pc, const ap_cluster *c, char key[AP_DB_KEY_HEX + 1]) {
    uint64_t prof = 0;
    if (pc->db) ap_db_profiles_fingerprint(pc->db, c->gpu.name, &prof, NULL);
    ap_strbuf text = {0};
    ap_search_key_text(&pc->r, c, prof, &text);
    ap_db_plan_key(text.buf ? text.buf : "", key);
    ap_strbuf_free(&text);
}

/* A fresh search of cluster c as result JSON: `pre` (a search already run for c: taken over,
 * freed here) or a search now; NULL with *stp and err on failure. */
static ap_json *search_fresh(plan_cmd *pc, const ap_cluster *c, ap_search_result *pre,
                             int suggest, ap_status *stp, ap_err *err) {
    const ap_model *m = &pc->r.model;
    ap_search_result r;
    if (pre) r = *pre;
    else if ((*stp = ap_search(m, c, &pc->r.search, &r, err)) != AP_OK) return NULL;
    int repartitioned = 0;
    for (int i = 0; i < r.ntop; i++) repartitioned += r.top[i].plan.nchunks > 0;
    if (r.ntop == 0 && r.have_closest) repartitioned += r.closest.plan.nchunks > 0;
    ap_json *out = ap_json_new_object();
    ap_json *srch = ap_json_new_object();
    ap_json *plans = ap_json_new_array();
    ap_json_add_string(out, "model", m->name);
    ap_json_add_number(out, "gpus", c->gpus);
    ap_json_add_string(out, "gpu", c->gpu.name);
    ap_json_add_string(out, "trainer", ap_trainer_name(pc->r.search.fixed.trainer));
    ap_json_add_number(out, "gbs", (double)pc->r.search.gbs);
    ap_json_add_number(out, "seq", (double)pc->r.search.fixed.seq);
    ap_json_add_number(srch, "enumerated", (double)r.enumerated);
    ap_json_add_number(srch, "legal", (double)r.legal);
    ap_json_add_number(srch, "evaluated", (double)r.evaluated);
    ap_json_add_number(srch, "pruned", (double)r.pruned);
    ap_json_add_number(srch, "fit", (double)r.fit);
    ap_json_add_number(srch, "search_s", r.search_s);
    ap_json_add_number(srch, "repartitioned", repartitioned);
    ap_json_add_number(srch, "resplit_candidates", (double)r.candidates);
    ap_json_add_number(srch, "resplit", (double)r.resplit);
    ap_json_add_number(srch, "joint", (double)r.joint);
    ap_json_add_number(srch, "passed_over", (double)r.passed);
    ap_json_add_number(srch, "tie_margin", pc->r.search.tie_margin);
    ap_json_add(out, "search", srch);
    for (int i = 0; i < r.ntop; i++) ap_json_push(plans, ap_result_plan_json(&r.top[i], m));
    ap_json_add(out, "plans", plans);
    /* ties put a simpler plan first: name the fastest when it is not */
    if (r.ntop > 0 && r.fastest.time.step_s < r.top[0].time.step_s)
        ap_json_add(out, "fastest", ap_result_plan_json(&r.fastest, m));
    if (r.ntop == 0) {
        if (r.have_closest) {
            ap_json *cl = ap_result_plan_json(&r.closest, m);
            ap_json_add_number(cl, "overshoot_bytes", r.closest.device_peak_bytes +
                                                          r.closest.headroom_bytes -
                                                          r.closest.capacity_bytes);
            /* what binds it: GPU memory, host memory, or both (issue 18) */
            int gpu_over = r.closest.device_peak_bytes + r.closest.headroom_bytes >
                           r.closest.capacity_bytes;
            ap_json_add_string(cl, "binding", gpu_over && !r.closest.host_fits ? "gpu+host"
                                              : !r.closest.host_fits         ? "host"
                                                                             : "gpu");
            ap_json_add(out, "closest", cl);
        }
        if (suggest) add_suggestions(pc, c, out);
    } else {
        add_robustness(pc, c, &r, out);
    }
    ap_search_result_free(&r);
    return out;
}

/* The cached result for key, or NULL: a miss, or a row that is not what this search would
 * answer (too large, unreadable, or failing ap_result_check: the checks of a fresh plan and an
 * estimate again), which is a warning and searched again. */
static ap_json *cache_get(plan_cmd *pc, const ap_cluster *c, const char *key) {
    if (!pc->db) return NULL;
    char *js = NULL;
    ap_err e2;
    ap_status gs = ap_db_plan_get(pc->db, key, &js, NULL, &e2);
    if (gs != AP_OK)
        fprintf(stderr, "autoplan: warning: plan cache lookup failed, searching: %s\n", e2.msg);
    if (gs != AP_OK || !js) return NULL;
    size_t len = strlen(js);
    ap_json *j = NULL;
    if (len > ap_result_max_bytes(&pc->r.search))
        ap_err_set(&e2, AP_ERR_INPUT, "%zu bytes, more than a result of %d plans", len,
                   pc->r.search.top_k);
    else if ((j = ap_json_parse(js, len, "plan cache", &e2)) != NULL &&
             ap_result_check(j, &pc->r.model, c, &pc->r.search, 0, &e2) != AP_OK) {
        ap_json_free(j);
        j = NULL;
    }
    free(js);
    if (!j)
        fprintf(stderr, "autoplan: warning: cached result %.12s not used (%s); searching again\n",
                key, ap_cli_safe(e2.msg));
    return j;
}

static void cache_put(plan_cmd *pc, const ap_cluster *c, const char *key, const ap_json *out) {
    if (!pc->db || ap_db_is_readonly(pc->db)) return;
    char *js = ap_json_print(out, 0);
    char summary[256];
    snprintf(summary, sizeof summary, "%s on %d x %s, %s, gbs %lld", pc->r.model.name, c->gpus,
             c->gpu.name, ap_trainer_name(pc->r.search.fixed.trainer), (long long)pc->r.search.gbs);
    ap_err e2;
    if (js && ap_db_plan_put(pc->db, key, summary, js, jnum(out, "search", "search_s"), &e2) != AP_OK)
        fprintf(stderr, "autoplan: warning: plan cache not updated: %s\n", e2.msg);
    free(js);
}

/* 1 when the plan cache holds a row for cluster c (a sweep searches the others up front). */
static int cache_has(plan_cmd *pc, const ap_cluster *c) {
    if (!pc->db) return 0;
    char key[AP_DB_KEY_HEX + 1];
    cache_key(pc, c, key);
    char *js = NULL;
    ap_err e2;
    int has = ap_db_plan_get(pc->db, key, &js, NULL, &e2) == AP_OK && js;
    free(js);
    return has;
}

/* The result for cluster c, cached or fresh (from `pre` when given: a search already run for
 * c, taken over and freed); NULL with *stp and err on failure. When nothing fits, `suggest`
 * asks for the suggestions (one search per variant, most of a nothing-fits answer's time): a
 * single count shows them, a sweep's table does not, so a sweep stores its nothing-fits rows
 * without them and the first single count answered from such a row adds them to it (the
 * same keys, in the same order, as a fresh search gives). */
static ap_json *run_search(plan_cmd *pc, const ap_cluster *c, ap_search_result *pre, int suggest,
                           int *cached, ap_status *stp, ap_err *err) {
    char key[AP_DB_KEY_HEX + 1];
    *stp = AP_OK;
    cache_key(pc, c, key);
    ap_json *j = cache_get(pc, c, key);
    *cached = j != NULL;
    if (j) {
        if (pre) ap_search_result_free(pre);
        if (suggest && ap_json_size(ap_json_get(j, "plans")) == 0 &&
            !ap_json_get(j, "suggestions")) {
            add_suggestions(pc, c, j);
            cache_put(pc, c, key, j);
        }
        return j;
    }
    ap_json *out = search_fresh(pc, c, pre, suggest, stp, err);
    if (out) cache_put(pc, c, key, out);
    return out;
}

/* ---- printing ---- */

static const char *largest_cost(const ap_json *e, double *v) {
    static const char *keys[] = {"compute_s", "recompute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s",
                                 "pp_comm_s", "dp_comm_s", "bubble_s", "offload_s", "optimizer_s"};
    static const char *names[] = {"compute", "recompute", "TP comm", "CP comm", "EP comm",
                                  "PP comm", "DP comm", "bubble", "offload", "optimizer"};
    int best = 0;
    double bv = -1;
    const ap_json *t = ap_json_get(e, "time");
    /* the largest exposed cost other than useful compute */
    for (int i = 1; i < 10; i++) {
        double x = ap_json_number(ap_json_get(t, keys[i]));
        if (x > bv) { bv = x; best = i; }
    }
    *v = bv / ap_json_number(ap_json_get(t, "step_s"));
    return names[best];
}

/* One-line hints when the default batch (4M tokens) does not suit the job: far above the
 * model's critical batch (a small model: the steps buy little), or so small per pipeline that
 * the bubble is a tenth of the step or more (many GPUs). Only for the default batch: a batch the
 * user chose is theirs. */
static void print_batch_hints(const plan_cmd *pc, const ap_json *res) {
    const ap_json *e = ap_json_at(ap_json_get(res, "plans"), 0);
    const ap_json *p = ap_json_get(e, "plan");
    double tokens = jnum(res, "gbs", NULL) * jnum(res, "seq", NULL);
    double crit = ap_model_critical_batch_tokens(&pc->r.model);
    if (crit > 0 && tokens > 2 * crit)
        printf("\nhint: the default batch of %.2fM tokens is %.1fx the critical batch of a model "
               "this size (about %.2fM tokens, Kaplan et al. 2020): larger batches save few "
               "steps; try --tokens-per-step %.1fM\n", tokens / 1e6, tokens / crit, crit / 1e6,
               crit / 1e6 < 0.1 ? 0.1 : crit / 1e6);
    double bubble = jnum(e, "time", "bubble_s") / jnum(e, "time", "step_s");
    if (bubble >= 0.10) {
        /* 1F1B: the bubble shrinks as 1 / micro-batches per pipeline (Narayanan et al. 2021) */
        double k = ceil(bubble / 0.10);
        printf("\nhint: the pipeline bubble is %.0f%% of the step: the default batch gives each of "
               "the %.0f pipelines %.0f micro-batches for %.0f stages; about %.0fx the batch "
               "(--tokens-per-step %.0fM) or fewer stages would bring it under 10%%\n",
               100 * bubble, jnum(p, "dp", NULL),
               jnum(p, "grad_accum", NULL), jnum(p, "pp", NULL), k, k * tokens / 1e6);
    }
}

/* The plans shown within the tie margin of the fastest plan (shown or not: "fastest"), as
 * ranks ("1-4, 6"), when the ties changed the order: the model cannot order them, so they are
 * listed simplest first. */
static void print_ties(const ap_json *res) {
    const ap_json *plans = ap_json_get(res, "plans"), *fa = ap_json_get(res, "fastest");
    int n = ap_json_size(plans), fastest = 0, count = 0, reordered = fa != NULL;
    double margin = jnum(res, "search", "tie_margin");
    if (!(margin > 0) || n < 1) return;
    for (int i = 1; i < n; i++) {
        double s = jnum(ap_json_at(plans, i), "time", "step_s");
        reordered |= s < jnum(ap_json_at(plans, i - 1), "time", "step_s");
        if (s < jnum(ap_json_at(plans, fastest), "time", "step_s")) fastest = i;
    }
    if (!reordered) return;
    double best = fa ? jnum(fa, "time", "step_s") : jnum(ap_json_at(plans, fastest), "time", "step_s");
    char list[256];
    size_t len = 0;
    list[0] = 0;
    for (int i = 0; i < n; i++) {
        if (!(jnum(ap_json_at(plans, i), "time", "step_s") <= best * (1 + margin))) continue;
        int j = i;
        while (j + 1 < n && jnum(ap_json_at(plans, j + 1), "time", "step_s") <= best * (1 + margin))
            j++;
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", i + 1);
        if (j > i && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "-%d", j + 1);
        count += j - i + 1;
        i = j;
    }
    char step[32], who[200];
    /* the fastest may be among the plans shown, further down */
    const char *fl = fa ? ap_json_string(ap_json_get(fa, "label")) : NULL;
    for (int i = 0; fl && i < n; i++) {
        const char *l = ap_json_string(ap_json_get(ap_json_at(plans, i), "label"));
        if (l && !strcmp(l, fl) && jnum(ap_json_at(plans, i), "time", "step_s") == best)
            fa = NULL, fastest = i;
    }
    if (fa)
        snprintf(who, sizeof who, "%s (%s, %s, not shown)",
                 ap_cli_safe(ap_json_string(ap_json_get(fa, "label"))),
                 ap_fmt_seconds(best, step, sizeof step),
                 ap_cli_safe(ap_json_string(ap_json_get(fa, "confidence"))));
    else
        snprintf(who, sizeof who, "plan %d", fastest + 1);
    printf("\nties: plan%s %s within %.0f%% (the validated time error) of the fastest, %s, so "
           "listed simplest first: %s; --tie-margin 0 ranks by step time alone\n",
           count > 1 ? "s" : "", list, 100 * margin, who, ap_tie_rule_text());
}

static void print_result(const plan_cmd *pc, const ap_json *res, int cached) {
    const ap_json *plans = ap_json_get(res, "plans");
    int n = ap_json_size(plans);
    printf("%s on %d x %s, trainer %s, global batch %.0f x %.0f tokens\n",
           ap_cli_safe(ap_json_string(ap_json_get(res, "model"))), (int)jnum(res, "gpus", NULL),
           ap_cli_safe(ap_json_string(ap_json_get(res, "gpu"))), ap_cli_safe(ap_json_string(ap_json_get(res, "trainer"))),
           jnum(res, "gbs", NULL), jnum(res, "seq", NULL));
    if (n > 0) {
        printf("\n  #  %-48s %9s %11s %6s %17s  %-6s %s\n", "plan", "step", "tokens/s", "MFU",
               "device/capacity", "class", "largest exposed cost");
        for (int i = 0; i < n; i++) {
            const ap_json *e = ap_json_at(plans, i);
            char step[32];
            double share;
            const char *lc = largest_cost(e, &share);
            printf(" %2d  %-48s %9s %11.0f %5.1f%% %7.1f/%5.1f GiB  %-6s %s %.0f%%\n", i + 1,
                   ap_cli_safe(ap_json_string(ap_json_get(e, "label"))),
                   ap_fmt_seconds(jnum(e, "time", "step_s"), step, sizeof step),
                   jnum(e, "throughput", "tokens_per_s"), 100 * jnum(e, "throughput", "mfu"),
                   jnum(e, "memory", "device_peak_bytes") / AP_GIB,
                   jnum(e, "memory", "capacity_bytes") / AP_GIB,
                   ap_cli_safe(ap_json_string(ap_json_get(e, "confidence"))), lc, 100 * share);
        }
        print_ties(res);
        const ap_json *rb = ap_json_get(res, "robustness");
        if (pc->default_batch) print_batch_hints(pc, res);
        /* only where stress could reorder the plans shown (add_robustness) */
        if (rb && ap_json_bool(ap_json_get(rb, "could_reorder"))) {
            if (ap_json_bool(ap_json_get(rb, "best_stays_best")))
                printf("\nrobust: plan 1 stays best with -20%% network bandwidth and -10%% GEMM "
                       "efficiency (plan %.0f then %.1f%% slower)\n",
                       jnum(rb, "runner_up_rank", NULL), 100 * jnum(rb, "runner_up_gap", NULL));
            else
                printf("\nnot robust: with -20%% network bandwidth and -10%% GEMM efficiency plan "
                       "%.0f (%s) wins\n", jnum(rb, "best_under_stress_rank", NULL),
                       ap_cli_safe(ap_json_string(ap_json_get(rb, "best_under_stress"))));
        }
    } else if (!ap_json_get(res, "closest") && ap_json_get(res, "batch_fits")) {
        /* not memory: the batch does not split over the data-parallel ranks */
        printf("\nno plan: the global batch of %.0f sequences does not split over %.0f GPUs (each "
               "data-parallel rank takes an equal share, and no data-parallel size that divides "
               "it leaves a legal tp x pp x cp for the rest); %.0f sequences would\n",
               jnum(res, "gbs", NULL), jnum(res, "gpus", NULL), jnum(res, "batch_fits", NULL));
        const ap_json *sug = ap_json_get(res, "suggestions");
        for (int i = 0; i < ap_json_size(sug); i++)
            printf("  - %s\n", ap_cli_safe(ap_json_string(ap_json_at(sug, i))));
    } else {
        printf("\nnothing fits.\n");
        const ap_json *cl = ap_json_get(res, "closest");
        if (cl) {
            /* over on the GPU, or (host memory binding alone) within it */
            double over = jnum(cl, "overshoot_bytes", NULL);
            printf("closest: %s needs %.1f GiB on its worst GPU (stage %.0f) of %.1f GiB with "
                   "%.1f GiB headroom: %.1f GiB %s\n",
                   ap_cli_safe(ap_json_string(ap_json_get(cl, "label"))),
                   jnum(cl, "memory", "device_peak_bytes") / AP_GIB,
                   jnum(cl, "memory", "worst_stage"), jnum(cl, "memory", "capacity_bytes") / AP_GIB,
                   jnum(cl, "memory", "headroom_bytes") / AP_GIB, fabs(over) / AP_GIB,
                   over > 0 ? "over" : "to spare");
            const char *bind = ap_json_string(ap_json_get(cl, "binding"));
            if (bind && strcmp(bind, "gpu") != 0)
                printf("host memory binds%s: %.1f GiB per node of %.1f GiB (90%% usable)\n",
                       strcmp(bind, "host") ? " too" : "",
                       jnum(cl, "memory", "host_bytes_per_node") / AP_GIB,
                       jnum(cl, "memory", "host_capacity_bytes") / AP_GIB);
        } else {
            printf("no plan is legal for this model, GPU count and global batch with this trainer\n");
        }
        const ap_json *sug = ap_json_get(res, "suggestions");
        for (int i = 0; i < ap_json_size(sug); i++)
            printf("  - %s\n", ap_cli_safe(ap_json_string(ap_json_at(sug, i))));
    }
    const ap_json *s = ap_json_get(res, "search");
    if (jnum(s, "repartitioned", NULL) > 0)
        printf("\n%.0f of the plans shown have optimised uneven stages (--solver off for "
               "uniform)%s", jnum(s, "repartitioned", NULL),
               n > 0 && jnum(s, "fit", NULL) == 0 ? "; no uniform split fits" : "");
    printf("\n%.0f plans enumerated, %.0f legal, %.0f evaluated (%.0f pruned), %.0f fit; "
           "search %.3f s%s\n",
           jnum(s, "enumerated", NULL), jnum(s, "legal", NULL), jnum(s, "evaluated", NULL),
           jnum(s, "pruned", NULL), jnum(s, "fit", NULL), jnum(s, "search_s", NULL),
           cached ? " (answered from the cache)" : "");
}

/* ---- the command ---- */

static void add_flags(ap_flags *fl) {
    ap_cli_cluster_flags(fl);
    ap_cli_plan_flags(fl);
    ap_flag *g = ap_flags_get(fl, "gpus");
    if (g) g->help = "GPUs: a count, a sweep 64..1024 (powers of two) or a list 64,128,512";
    ap_flags_add(fl, "tokens-per-step", AP_FLAG_VALUE, "T",
                 "global batch in tokens (default 4M; --gbs sets sequences instead)");
    ap_flags_add(fl, "fix", AP_FLAG_VALUE, "K=V,..", "pin dimensions: tp=8,pp=4 (tp pp dp cp ep "
                 "vp mbs zero recompute)");
    ap_flags_add(fl, "top", AP_FLAG_VALUE, "K", "plans shown (default 10)");
    ap_flags_add(fl, "tie-margin", AP_FLAG_VALUE, "F", "step times within this fraction of the "
                 "fastest plan left are ties, ranked simplest first (default 0.05, the validated "
                 "time error; 0: by step time alone)");
    ap_flags_add(fl, "out", AP_FLAG_VALUE, "DIR", "write plan.json of the best plan (and --emit "
                 "configs) into DIR");
    ap_flags_add(fl, "emit", AP_FLAG_VALUE, "LIST", "trainer configs for the best plan: "
                 "deepspeed,megatron,colossalai,torchtitan,accelerate|all (needs --out)");
    ap_flags_add(fl, "json", AP_FLAG_BOOL, NULL, "print the result as JSON (each plan with the "
                 "estimate schema)");
    ap_flags_add(fl, "tokens", AP_FLAG_VALUE, "N", "training tokens (e.g. 2T) for time-to-train "
                 "and GPU-hours");
    ap_flags_add(fl, "gpu-hour-price", AP_FLAG_VALUE, "USD", "price of one GPU-hour, for the cost");
    ap_flags_add(fl, "deadline", AP_FLAG_VALUE, "D", "with a sweep and --tokens: name the smallest "
                 "GPU count that trains within D (e.g. 30d)");
    ap_flags_add(fl, "no-prune", AP_FLAG_BOOL, NULL, "evaluate every plan (slower; same answer)");
    ap_flags_add(fl, "solver", AP_FLAG_VALUE, "S", "stage split of the top pipelined plans: "
                 "dp|ilp|auto (GLPK) or off for uniform stages (default auto)");
    ap_flags_add(fl, "db", AP_FLAG_VALUE, "PATH", "plan cache database (default "
                 "$XDG_CACHE_HOME/autoplan/autoplan.db)");
    ap_flags_add(fl, "no-cache", AP_FLAG_BOOL, NULL, "neither read nor write the plan cache");
    ap_flags_add(fl, "threads", AP_FLAG_VALUE, "N", "worker threads for the search (default: one "
                 "per core; the answer does not depend on it)");
}


static ap_status setup_extras(plan_cmd *pc, ap_err *err) {
    ap_flags *fl = &pc->fl;
    ap_status st;
    const char *tk = ap_flags_value(fl, "tokens");
    if (tk && (st = ap_parse_count(tk, "--tokens", &pc->tokens, err)) != AP_OK) return st;
    if (tk && !(pc->tokens >= 1)) /* as --tokens-per-step: a fraction of a token is a typo */
        return ap_err_set(err, AP_ERR_INPUT, "--tokens: %g is not a token count", pc->tokens);
    if ((st = ap_flag_real(fl, "gpu-hour-price", 0, 1e6, &pc->price, err)) != AP_OK) return st;
    const char *dl = ap_flags_value(fl, "deadline");
    if (dl && (st = ap_parse_duration(dl, "--deadline", &pc->deadline_s, err)) != AP_OK) return st;
    if (dl && !tk) return ap_err_set(err, AP_ERR_INPUT, "--deadline needs --tokens");
    if (ap_flags_isset(fl, "gpu-hour-price") && !tk)
        return ap_err_set(err, AP_ERR_INPUT, "--gpu-hour-price needs --tokens");
    if (ap_flags_isset(fl, "emit") && !ap_flags_isset(fl, "out"))
        return ap_err_set(err, AP_ERR_INPUT, "--emit needs --out DIR");
    const char *out = ap_flags_value(fl, "out");
    if (out && (st = ap_files_check_dir(out, "--out", err)) != AP_OK) return st;
    if (ap_flags_isset(fl, "emit")) {
        unsigned mask;
        if ((st = ap_emit_parse_list(ap_flags_value(fl, "emit"), &mask, err)) != AP_OK)
            return st; /* the message names --emit */
    }
    pc->json = ap_flags_isset(fl, "json");
    return AP_OK;
}

/* The cache is an optimisation: an unusable database (corrupt, newer, read-only, full,
 * unwritable directory) is a warning naming the path, and planning goes on; a read-only one
 * still answers hits. */
static void open_cache(plan_cmd *pc) {
    if (ap_flags_isset(&pc->fl, "no-cache")) return;
    ap_err e2, e3;
    const char *dbp = ap_flags_value(&pc->fl, "db");
    if (ap_db_open(dbp, 0, &pc->db, &e2) == AP_OK) return;
    pc->db = NULL;
    if (ap_db_open(dbp, 1, &pc->db, &e3) == AP_OK) {
        fprintf(stderr, "autoplan: warning: plan cache is read-only, results are not stored: %s\n",
                e2.msg);
    } else {
        pc->db = NULL;
        fprintf(stderr, "autoplan: warning: plan cache unavailable, planning without it: %s\n",
                e2.msg);
    }
}

static ap_status setup(plan_cmd *pc, ap_err *err) {
    ap_status st;
    if ((st = ap_cli_request(&pc->fl, &pc->rq, pc->counts, &pc->ncounts, err)) != AP_OK) return st;
    if ((st = ap_request_resolve(&pc->rq, AP_REQUEST_SEARCH, &pc->r, err)) != AP_OK) return st;
    char profile[64], note[320];
    if ((st = ap_cli_profile(&pc->fl, &pc->r, profile, note, err)) != AP_OK) return st;
    if (pc->ncounts == 0) {
        pc->counts[0] = pc->r.cluster.gpus;
        pc->ncounts = 1;
    }
    /* a pinned degree that does not divide a count is an input error, not "nothing fits" */
    for (int k = 0; k < pc->ncounts; k++)
        if ((st = ap_request_check_pins(&pc->rq, pc->counts[k], err)) != AP_OK) return st;
    if ((st = setup_extras(pc, err)) != AP_OK) return st;
    pc->default_batch =
        !ap_request_given(pc->rq.plan_given, "gbs") && !pc->rq.tokens_per_step.given;
    if (pc->r.note[0]) fprintf(stderr, "autoplan: %s\n", pc->r.note);
    open_cache(pc);
    return AP_OK;
}

/* plan.json and the --emit configs of the best plan of `res`, one output set in dir. *rc gets
 * the exit code of the configs (ap_cli_emit_exit). */
static ap_status write_outputs(plan_cmd *pc, const char *dir, const ap_cluster *c,
                               const ap_json *res, int *rc, ap_err *err) {
    const ap_json *best = ap_json_at(ap_json_get(res, "plans"), 0);
    *rc = 0;
    if (!best) {
        ap_log(AP_LOG_WARN, "nothing fits on %d GPUs: no plan.json written to %s", c->gpus, dir);
        return AP_OK;
    }
    /* the plan from the result (checked again: a cached result was, a fresh one is valid) */
    ap_plan p;
    ap_status st = ap_result_plan_decode(best, &pc->r.model, c, &p, "plans[0]", err);
    if (st == AP_OK) st = ap_plan_check(&p, &pc->r.model, c, 1, err);
    if (st != AP_OK) return st == AP_ERR_NOMEM ? st : AP_ERR_INTERNAL;
    static const char *family[16];
    const char *const *ef = ap_emit_file_family();
    family[0] = "plan.json";
    for (int i = 0; ef[i] && i < 14; i++) family[i + 1] = ef[i];
    ap_outset *set;
    if ((st = ap_outset_begin(dir, family, &set, err)) != AP_OK) return st;
    char *text = ap_planfile_print(&pc->r.model, c, &p, best);
    st = text ? ap_outset_add(set, "plan.json", text, strlen(text), err)
              : ap_err_set(err, AP_ERR_NOMEM, "out of memory building plan.json");
    free(text);
    const char *em = ap_flags_value(&pc->fl, "emit");
    static ap_emit_report rep;
    memset(&rep, 0, sizeof rep);
    if (st == AP_OK && em) {
        st = ap_emit_into(set, em, &pc->r.model, c, &p, best, &rep, err);
        if (st == AP_ERR_INFEASIBLE) st = AP_OK; /* refusals reported below */
    }
    if (st != AP_OK) {
        ap_outset_abort(set);
        return st;
    }
    if ((st = ap_outset_commit(set, err)) != AP_OK) return st;
    if (!pc->json) printf("wrote %s/plan.json\n", ap_cli_safe(dir));
    for (int t = 0; em && t < AP_EMIT_COUNT; t++) {
        if (!rep.requested[t]) continue;
        if (rep.status[t] == AP_OK && !pc->json) printf("wrote %s/%s\n", ap_cli_safe(dir), rep.files[t]);
        if (rep.status[t] != AP_OK) fprintf(stderr, "autoplan: %s\n", ap_cli_safe(rep.msg[t]));
    }
    *rc = em ? ap_cli_emit_exit(em, &rep) : 0;
    return AP_OK;
}

/* ---- sweeps ---- */

static void sweep_header(const plan_cmd *pc) {
    if (pc->json) return;
    printf("%s, trainer %s, global batch %lld x %lld tokens, %s\n", ap_cli_safe(pc->r.model.name),
           ap_trainer_name(pc->r.search.fixed.trainer), (long long)pc->r.search.gbs,
           (long long)pc->r.search.fixed.seq, pc->r.cluster.gpu.name);
    printf("\n %6s  %-48s %9s %12s %6s %8s", "GPUs", "best plan", "step", "tokens/s", "MFU",
           "scaling");
    if (pc->tokens > 0) printf(" %12s %12s", "train time", "GPU-hours");
    if (pc->price > 0) printf(" %14s", "cost (USD)");
    printf("\n");
}

/* The cluster of count i (cluster_at, the message naming the count). */
static ap_status sweep_cluster(const plan_cmd *pc, int i, ap_cluster *c, ap_err *err) {
    ap_status st = cluster_at(pc, pc->counts[i], NULL, c, err);
    if (st != AP_OK) ap_err_prefix(err, "--gpus %d", pc->counts[i]);
    return st;
}

typedef struct {
    double base_per_gpu; /* tokens/s per GPU of the first count with a plan */
    int deadline_n;      /* smallest count meeting --deadline, 0 = none */
} sweep_state;

/* One row of the sweep: JSON into `row`, text to stdout. */
static void sweep_row(const plan_cmd *pc, const ap_cluster *c, const ap_json *res, ap_json *row,
                      sweep_state *ss) {
    const ap_json *best = ap_json_at(ap_json_get(res, "plans"), 0);
    ap_json_add_number(row, "gpus", c->gpus);
    if (!best) {
        if (!pc->json) printf(" %6d  %-48s\n", c->gpus, "nothing fits");
        return;
    }
    double tps = jnum(best, "throughput", "tokens_per_s");
    double per_gpu = tps / c->gpus;
    if (ss->base_per_gpu == 0) ss->base_per_gpu = per_gpu;
    double scaling = per_gpu / ss->base_per_gpu;
    ap_json_add(row, "best", ap_json_duplicate(best));
    ap_json_add_number(row, "scaling_efficiency", scaling);
    double ttt = 0, gh = 0;
    if (pc->tokens > 0) {
        ttt = pc->tokens / tps;         /* seconds */
        gh = ttt * c->gpus / 3600.0;    /* GPU-hours */
        ap_json_add_number(row, "time_to_train_s", ttt);
        ap_json_add_number(row, "gpu_hours", gh);
        if (pc->price > 0) ap_json_add_number(row, "cost_usd", gh * pc->price);
        if (pc->deadline_s > 0 && ttt <= pc->deadline_s && !ss->deadline_n) ss->deadline_n = c->gpus;
    }
    if (pc->json) return;
    char step[32], tt[32];
    printf(" %6d  %-48s %9s %12.0f %5.1f%% %7.1f%%", c->gpus,
           ap_cli_safe(ap_json_string(ap_json_get(best, "label"))),
           ap_fmt_seconds(jnum(best, "time", "step_s"), step, sizeof step), tps,
           100 * jnum(best, "throughput", "mfu"), 100 * scaling);
    if (pc->tokens > 0) printf(" %12s %12.0f", ap_fmt_seconds(ttt, tt, sizeof tt), gh);
    if (pc->price > 0) printf(" %14.0f", gh * pc->price);
    printf("\n");
}

static void sweep_footer(const plan_cmd *pc, ap_json *all, const sweep_state *ss) {
    if (pc->json) {
        ap_json *o = ap_json_new_object();
        ap_json_add(o, "sweep", all);
        if (pc->deadline_s > 0) {
            if (ss->deadline_n) ap_json_add_number(o, "deadline_gpus", ss->deadline_n);
            else ap_json_add(o, "deadline_gpus", ap_json_new_null());
        }
        char *s = ap_json_print(o, 1);
        printf("%s\n", s ? s : "null");
        free(s);
        ap_json_free(o);
        return;
    }
    ap_json_free(all);
    if (pc->tokens > 0)
        printf("\ntime to train %.3g tokens at the predicted throughput (no restarts or "
               "evaluation counted)\n", pc->tokens);
    if (pc->deadline_s > 0) {
        char d[32];
        ap_fmt_seconds(pc->deadline_s, d, sizeof d);
        if (ss->deadline_n)
            printf("deadline %s: the smallest count that meets it is %d GPUs\n", d, ss->deadline_n);
        else
            printf("deadline %s: no count in the sweep meets it\n", d);
    }
}

/* --out of one count of a sweep: DIR itself for one count, DIR/gpus-N for several. */
static ap_status sweep_outputs(plan_cmd *pc, const ap_cluster *c, const ap_json *res, int *rc,
                               ap_err *err) {
    const char *dir = ap_flags_value(&pc->fl, "out");
    *rc = 0;
    if (!dir) return AP_OK;
    char sub[4200];
    if (pc->ncounts > 1) snprintf(sub, sizeof sub, "%s/gpus-%d", dir, c->gpus);
    else snprintf(sub, sizeof sub, "%s", dir);
    return write_outputs(pc, sub, c, res, rc, err);
}

/* The counts of a sweep: every count's cluster, and the searches of those the cache does not
 * answer, run side by side (threads over the sweep points), each exactly as `plan --gpus
 * <count>` alone searches it (ap_search_many). */
typedef struct {
    int n, nok;              /* counts; counts before the first whose cluster fails */
    ap_status cst;           /* that failure */
    ap_err cerr;
    ap_cluster *cl, *mc;     /* [n]: every count's cluster; the searched ones */
    ap_search_result *mres;  /* [nmiss]: their results, taken over by run_search */
    ap_status *mst;
    ap_err *merr;
    int *slot, nmiss;        /* count -> index of its search, -1 = answered by the cache */
} sweep_pre;

static void sweep_pre_free(sweep_pre *sp) {
    for (int j = 0; sp->mst && j < sp->nmiss; j++)
        if (sp->mst[j] == AP_OK) ap_search_result_free(&sp->mres[j]);
    free(sp->cl), free(sp->mc), free(sp->mres), free(sp->mst), free(sp->merr), free(sp->slot);
}

static ap_status sweep_prepare(plan_cmd *pc, sweep_pre *sp, ap_err *err) {
    const int n = pc->ncounts;
    memset(sp, 0, sizeof *sp);
    sp->n = sp->nok = n;
    sp->cl = calloc((size_t)n, sizeof *sp->cl);
    sp->mc = calloc((size_t)n, sizeof *sp->mc);
    sp->mres = calloc((size_t)n, sizeof *sp->mres);
    sp->mst = calloc((size_t)n, sizeof *sp->mst);
    sp->merr = calloc((size_t)n, sizeof *sp->merr);
    sp->slot = calloc((size_t)n, sizeof *sp->slot);
    if (!sp->cl || !sp->mc || !sp->mres || !sp->mst || !sp->merr || !sp->slot)
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the sweep");
    for (int i = 0; i < n; i++) {
        sp->slot[i] = -1;
        /* a count the cluster cannot take is an input error: refused before any search or
           output, not after the counts before it were written */
        if ((sp->cst = sweep_cluster(pc, i, &sp->cl[i], &sp->cerr)) != AP_OK) {
            sp->nok = i;
            *err = sp->cerr;
            return sp->cst;
        }
        if (!cache_has(pc, &sp->cl[i])) {
            sp->slot[i] = sp->nmiss;
            sp->mc[sp->nmiss++] = sp->cl[i];
        }
    }
    return ap_search_many(&pc->r.model, sp->mc, sp->nmiss, &pc->r.search, sp->mres, sp->mst,
                          sp->merr);
}

/* Count i's result (NULL with *st and err on failure). */
static ap_json *sweep_result(plan_cmd *pc, sweep_pre *sp, int i, ap_status *st, ap_err *err) {
    if (i == sp->nok) {
        *st = sp->cst;
        *err = sp->cerr;
        return NULL;
    }
    int cached, j = sp->slot[i];
    *st = j >= 0 ? sp->mst[j] : AP_OK;
    if (*st != AP_OK) {
        *err = sp->merr[j];
        return NULL;
    }
    if (j >= 0) sp->mst[j] = AP_ERR_INTERNAL; /* taken over by run_search */
    return run_search(pc, &sp->cl[i], j >= 0 ? &sp->mres[j] : NULL, 0, &cached, st, err);
}

static int sweep(plan_cmd *pc) {
    ap_err err = {{0}};
    sweep_pre sp;
    ap_status st = sweep_prepare(pc, &sp, &err);
    if (st != AP_OK) {
        sweep_pre_free(&sp);
        return ap_cli_fail(st, &err);
    }
    ap_json *all = ap_json_new_array();
    sweep_state ss = {0, 0};
    int rc = 0;
    sweep_header(pc);
    for (int i = 0; i < pc->ncounts; i++) {
        int orc = 0;
        ap_json *res = sweep_result(pc, &sp, i, &st, &err);
        if (res) {
            ap_json *row = ap_json_new_object();
            sweep_row(pc, &sp.cl[i], res, row, &ss);
            ap_json_push(all, row);
            st = sweep_outputs(pc, &sp.cl[i], res, &orc, &err);
            ap_json_free(res);
        }
        if (st != AP_OK) {
            ap_json_free(all);
            sweep_pre_free(&sp);
            return ap_cli_fail(st, &err);
        }
        if (orc > rc) rc = orc;
    }
    sweep_pre_free(&sp);
    sweep_footer(pc, all, &ss);
    return rc;
}

/* One count: the table (or JSON) and the outputs. */
static int single(plan_cmd *pc) {
    ap_err err = {{0}};
    int cached;
    ap_status st;
    ap_json *res = run_search(pc, &pc->r.cluster, NULL, 1, &cached, &st, &err);
    if (!res) return ap_cli_fail(st, &err);
    if (pc->json) {
        ap_json_add_bool(res, "cached", cached);
        char *s = ap_json_print(res, 1);
        printf("%s\n", s ? s : "null");
        free(s);
    } else {
        print_result(pc, res, cached);
    }
    const char *dir = ap_flags_value(&pc->fl, "out");
    int rc = 0;
    st = dir ? write_outputs(pc, dir, &pc->r.cluster, res, &rc, &err) : AP_OK;
    ap_json_free(res);
    return st != AP_OK ? ap_cli_fail(st, &err) : rc;
}

int ap_cmd_plan(int argc, char **argv) {
    static plan_cmd pc;
    memset(&pc, 0, sizeof pc);
    ap_err err = {{0}};
    int help = 0;
    add_flags(&pc.fl);
    ap_status st = ap_flags_parse(&pc.fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&pc.fl, "autoplan [plan] MODEL --gpus N [flags]",
                            "Search every plan the trainer can run (tp, pp, dp, cp, ep, vp, "
                            "micro-batch, ZeRO,\nrecompute, offload), keep those that fit, rank by "
                            "predicted step time.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (pc.fl.npos == 1) {
        struct stat sb;
        const char *m = pc.fl.pos[0];
        if (stat(m, &sb) != 0 && !strchr(m, '/') && !strchr(m, '.')) {
            char shown[64];
            fprintf(stderr, "autoplan: '%s' is neither a command nor a model file (try "
                    "autoplan --help)\n", ap_text_line(shown, sizeof shown, m, 40));
            return 2;
        }
    }
    st = setup(&pc, &err);
    int rc = st != AP_OK ? ap_cli_fail(st, &err)
             : pc.ncounts > 1 || pc.tokens > 0 ? sweep(&pc) : single(&pc);
    ap_db_close(pc.db);
    return rc;
}
