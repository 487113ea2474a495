/*
 * cmd_plan.c - `autoplan plan` (also `autoplan MODEL --gpus N`): search the plans that fit,
 * rank them, say how sure the answer is, and for GPU-count sweeps how long and how much the
 * training takes. Results are cached in the SQLite store (db/), keyed by everything that
 * determines them; the table is always printed from the result JSON, so a cached answer
 * prints exactly like a fresh one.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "autoplan/db.h"
#include "autoplan/emit.h"
#include "autoplan/partition.h"
#include "autoplan/planio.h"
#include "autoplan/search.h"


typedef struct {
    ap_flags fl;
    ap_cli_ctx ctx;
    ap_search_opts so;
    int counts[AP_MAX_GPU_COUNTS];
    int ncounts;
    double tokens;        /* --tokens, 0 = not asked */
    double price;         /* --gpu-hour-price, USD */
    double deadline_s;
    int json;
    int partition;        /* optimise the stage split of the top plans (issue 8) */
    ap_solver solver;
    ap_db *db;
} plan_cmd;

static double jnum(const ap_json *o, const char *a, const char *b) {
    const ap_json *x = ap_json_get(o, a);
    if (b) x = ap_json_get(x, b);
    return ap_json_number(x);
}

/* ---- --fix tp=8,pp=4 ---- */
static ap_status parse_fix(const char *s, ap_search_opts *so, ap_err *err) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return ap_err_set(err, AP_ERR_INPUT, "--fix: too long");
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return ap_err_set(err, AP_ERR_INPUT, "--fix: '%s' is not key=value (e.g. tp=8,pp=4)", tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        char what[64];
        snprintf(what, sizeof what, "--fix %s", k);
        int64_t x;
        ap_status st;
        if (!strcmp(k, "recompute")) {
            if ((st = ap_recompute_parse(v, "--fix recompute", &so->fixed.recompute, err)) != AP_OK)
                return st;
            so->fix_recompute = 1;
            continue;
        }
        if ((st = ap_parse_int(v, what, k[0] == 'z' ? 0 : 1, 1 << 20, &x, err)) != AP_OK) return st;
        if (!strcmp(k, "tp")) so->fixed.tp = (int)x;
        else if (!strcmp(k, "pp")) so->fixed.pp = (int)x;
        else if (!strcmp(k, "dp")) so->fixed.dp = (int)x;
        else if (!strcmp(k, "cp")) so->fixed.cp = (int)x;
        else if (!strcmp(k, "ep")) so->fixed.ep = (int)x;
        else if (!strcmp(k, "vp")) so->fixed.vp = (int)x;
        else if (!strcmp(k, "mbs")) so->fixed.mbs = x;
        else if (!strcmp(k, "zero")) {
            if (x > 3) return ap_err_set(err, AP_ERR_INPUT, "--fix zero: must be 0-3");
            so->fixed.zero = (int)x;
        } else
            return ap_err_set(err, AP_ERR_INPUT, "--fix: unknown key '%s' (tp, pp, dp, cp, ep, vp, "
                              "mbs, zero, recompute)", k);
    }
    return AP_OK;
}

/* ---- one search, as result JSON (from the cache when possible) ---- */

static ap_json *estimate_json(const ap_estimate *e, const ap_model *m) {
    ap_json *j = ap_estimate_to_json(e, m);
    if (j) {
        char lbl[160];
        ap_json_add_string(j, "label", ap_plan_label(&e->plan, lbl, sizeof lbl));
        ap_json_add_string(j, "confidence", ap_confidence_name(ap_estimate_confidence(e)));
    }
    return j;
}

static void canonical(const plan_cmd *pc, const ap_cluster *c, char *buf, size_t n) {
    const ap_search_opts *so = &pc->so;
    const ap_plan *f = &so->fixed;
    ap_calib cal;
    ap_calib_default(&c->gpu, &cal);
    uint64_t prof = 0;
    if (pc->db) ap_db_profiles_fingerprint(pc->db, c->gpu.name, &prof, NULL);
    snprintf(buf, n,
             "autoplan %s|%s|%s|model %016llx|cluster %016llx gpus %d|trainer %s|gbs %lld seq %lld"
             "|fix tp%d pp%d dp%d cp%d ep%d vp%d mbs%lld z%d rc%d/%d dt%d fa%d ai%d"
             "|top %d prune %d nosp %d noov %d xtp %d maxmbs %d headroom %.0f part %d/%d"
             "|calib %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g|profiles %016llx %s",
             AP_VERSION, ap_costmodel_version(), ap_gpu_catalog_version(),
             (unsigned long long)ap_model_fingerprint(&pc->ctx.model),
             (unsigned long long)ap_cluster_fingerprint(c), c->gpus, ap_trainer_name(f->trainer),
             (long long)so->gbs, (long long)f->seq, f->tp, f->pp, f->dp, f->cp, f->ep, f->vp,
             (long long)f->mbs, f->zero, so->fix_recompute, (int)f->recompute, (int)f->dtype,
             f->flash_attn, (int)f->attn_impl, so->top_k, so->prune, so->no_sp, so->no_overlap,
             so->allow_cross_node_tp, so->max_mbs, so->est.headroom_bytes, pc->partition,
             (int)pc->solver, cal.gemm_eff_max,
             cal.gemm_half_flops, cal.attn_eff, cal.link_eff, cal.net_eff, cal.coll_latency_s,
             cal.step_overhead_s, cal.mem_bound_eff, (unsigned long long)prof,
             pc->ctx.profile_name[0] ? pc->ctx.profile_name : "-");
}

/* Best fitting plan for a variant of the problem (another GPU count, trainer or GPU), for the
 * suggestions; returns 1 and fills *best when something fits. */
static int try_variant(const plan_cmd *pc, const ap_cluster *c, ap_trainer_id tr,
                       ap_estimate *best) {
    ap_search_opts so = pc->so;
    so.fixed.trainer = tr;
    so.top_k = 1;
    if (tr != pc->so.fixed.trainer && !ap_trainer_get(tr)->fp16 && so.fixed.dtype == AP_DTYPE_FP16)
        so.fixed.dtype = AP_DTYPE_BF16;
    ap_search_result r;
    if (ap_search(&pc->ctx.model, c, &so, &r, NULL) != AP_OK) return 0;
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
           f->recompute_layers || so->no_sp || so->no_overlap;
}

static void add_suggestions(const plan_cmd *pc, const ap_cluster *c, ap_json *out) {
    ap_json *sug = ap_json_new_array();
    static ap_estimate best;
    char line[512], lbl[160];
    /* the user's pins first: the same GPUs with everything free */
    if (has_pins(&pc->so)) {
        plan_cmd *free_pc = malloc(sizeof *free_pc);
        if (free_pc) {
            *free_pc = *pc;
            ap_search_opts *so = &free_pc->so;
            ap_plan keep = so->fixed;
            ap_search_opts_init(so);
            so->fixed.trainer = keep.trainer;
            so->fixed.seq = keep.seq;
            so->fixed.dtype = keep.dtype;
            so->fixed.flash_attn = keep.flash_attn;
            so->fixed.attn_impl = keep.attn_impl;
            so->gbs = pc->so.gbs;
            so->est = pc->so.est;
            so->allow_cross_node_tp = pc->so.allow_cross_node_tp;
            if (try_variant(free_pc, c, keep.trainer, &best)) {
                snprintf(line, sizeof line, "drop the pinned options (--fix, --tp, --mbs, "
                         "--recompute, ...): %s fits (%.1f GiB of %.1f GiB)",
                         ap_plan_label(&best.plan, lbl, sizeof lbl), best.device_peak_bytes / AP_GIB,
                         best.capacity_bytes / AP_GIB);
                ap_json_push(sug, ap_json_new_string(line));
            }
            free(free_pc);
        }
    }
    /* more GPUs of the same kind (the global batch must stay divisible) */
    for (int mult = 2; mult <= 64; mult *= 2) {
        ap_cluster c2 = *c;
        c2.gpus = c->gpus * mult;
        if (try_variant(pc, &c2, pc->so.fixed.trainer, &best)) {
            snprintf(line, sizeof line, "use %d GPUs: %s fits (%.1f GiB of %.1f GiB)", c2.gpus,
                     ap_plan_label(&best.plan, lbl, sizeof lbl), best.device_peak_bytes / AP_GIB,
                     best.capacity_bytes / AP_GIB);
            ap_json_push(sug, ap_json_new_string(line));
            break;
        }
    }
    /* another trainer on the same GPUs */
    for (int t = 0; t < AP_TRAINER_COUNT; t++) {
        if (t == (int)pc->so.fixed.trainer) continue;
        if (try_variant(pc, c, (ap_trainer_id)t, &best)) {
            snprintf(line, sizeof line, "use --trainer %s: %s fits (%.1f GiB of %.1f GiB)",
                     ap_trainer_name((ap_trainer_id)t), ap_plan_label(&best.plan, lbl, sizeof lbl),
                     best.device_peak_bytes / AP_GIB, best.capacity_bytes / AP_GIB);
            ap_json_push(sug, ap_json_new_string(line));
        }
    }
    /* more host memory (offload, Gemini and ZeRO-Infinity keep model states there): the
       search's best plan with twice, four and eight times the host memory per node */
    for (int mult = 2; mult <= 8; mult *= 2) {
        ap_cluster c2 = *c;
        c2.cpu_mem_bytes = c->cpu_mem_bytes * mult;
        if (try_variant(pc, &c2, pc->so.fixed.trainer, &best)) {
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
        ap_cluster c2;
        ap_cluster_from_gpu(g, c->gpus, &c2);
        if (try_variant(pc, &c2, pc->so.fixed.trainer, &best)) {
            snprintf(line, sizeof line, "use --gpu %s: %s fits (%.1f GiB of %.1f GiB)", g->name,
                     ap_plan_label(&best.plan, lbl, sizeof lbl), best.device_peak_bytes / AP_GIB,
                     best.capacity_bytes / AP_GIB);
            ap_json_push(sug, ap_json_new_string(line));
            break;
        }
    }
    if (ap_json_size(sug) == 0)
        ap_json_push(sug, ap_json_new_string(
                              "no variant tried fits (up to 64x the GPUs, every trainer, "
                              "H200/B200/MI300X); the searched space already includes full "
                              "recompute, the smallest micro-batch and CPU offload"));
    ap_json_add(out, "suggestions", sug);
}

/* Does the best plan stay best under -20% network bandwidth and -10% GEMM efficiency? */
static void add_robustness(const plan_cmd *pc, const ap_cluster *c, const ap_search_result *r,
                           ap_json *out) {
    if (r->ntop == 0) return;
    ap_estimate_opts stress = pc->so.est;
    stress.net_bw_scale = 0.8;
    stress.gemm_eff_scale = 0.9;
    static ap_estimate e;
    int best = -1;
    double best_s = 0;
    for (int i = 0; i < r->ntop; i++) {
        if (ap_estimate_plan(&pc->ctx.model, c, &r->top[i].plan, &stress, &e, NULL) != AP_OK)
            continue;
        if (best < 0 || e.time.step_s < best_s) {
            best = i;
            best_s = e.time.step_s;
        }
    }
    ap_json *rb = ap_json_new_object();
    char lbl[160];
    ap_json_add_number(rb, "net_bw_scale", 0.8);
    ap_json_add_number(rb, "gemm_eff_scale", 0.9);
    ap_json_add_bool(rb, "best_stays_best", best == 0);
    if (best >= 0) {
        ap_json_add_string(rb, "best_under_stress", ap_plan_label(&r->top[best].plan, lbl, sizeof lbl));
        ap_json_add_number(rb, "best_under_stress_rank", best + 1);
        ap_json_add_number(rb, "best_under_stress_step_s", best_s);
    }
    ap_json_add(out, "robustness", rb);
}

static ap_json *run_search(plan_cmd *pc, const ap_cluster *c, int *cached, ap_err *err) {
    char canon[2048], key[AP_DB_KEY_HEX + 1];
    *cached = 0;
    canonical(pc, c, canon, sizeof canon);
    ap_db_plan_key(canon, key);
    if (pc->db) {
        char *js = NULL;
        double ss = 0;
        ap_err e2;
        ap_status gs = ap_db_plan_get(pc->db, key, &js, &ss, &e2);
        if (gs != AP_OK)
            fprintf(stderr, "autoplan: warning: plan cache lookup failed, searching: %s\n", e2.msg);
        if (gs == AP_OK && js) {
            ap_json *j = ap_json_parse(js, strlen(js), "plan cache", &e2);
            free(js);
            if (j) {
                *cached = 1;
                return j;
            }
            ap_log(AP_LOG_WARN, "ignoring an unreadable cached result: %s", e2.msg);
        }
    }
    ap_search_result r;
    ap_status st = ap_search(&pc->ctx.model, c, &pc->so, &r, err);
    if (st != AP_OK) return NULL;
    int repartitioned = 0;
    if (pc->partition &&
        ap_partition_top(&pc->ctx.model, c, &pc->so, pc->solver, &r, &repartitioned, err) !=
            AP_OK) {
        ap_search_result_free(&r);
        return NULL;
    }
    ap_json *out = ap_json_new_object();
    ap_json *srch = ap_json_new_object();
    ap_json *plans = ap_json_new_array();
    ap_json_add_string(out, "model", pc->ctx.model.name);
    ap_json_add_number(out, "gpus", c->gpus);
    ap_json_add_string(out, "gpu", c->gpu.name);
    ap_json_add_string(out, "trainer", ap_trainer_name(pc->so.fixed.trainer));
    ap_json_add_number(out, "gbs", (double)pc->so.gbs);
    ap_json_add_number(out, "seq", (double)pc->so.fixed.seq);
    ap_json_add_number(srch, "enumerated", (double)r.enumerated);
    ap_json_add_number(srch, "legal", (double)r.legal);
    ap_json_add_number(srch, "evaluated", (double)r.evaluated);
    ap_json_add_number(srch, "pruned", (double)r.pruned);
    ap_json_add_number(srch, "fit", (double)r.fit);
    ap_json_add_number(srch, "search_s", r.search_s);
    ap_json_add_number(srch, "repartitioned", repartitioned);
    ap_json_add(out, "search", srch);
    for (int i = 0; i < r.ntop; i++) ap_json_push(plans, estimate_json(&r.top[i], &pc->ctx.model));
    ap_json_add(out, "plans", plans);
    if (r.ntop == 0) {
        if (r.have_closest) {
            ap_json *cl = estimate_json(&r.closest, &pc->ctx.model);
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
        add_suggestions(pc, c, out);
    } else {
        add_robustness(pc, c, &r, out);
    }
    ap_search_result_free(&r);
    if (pc->db) {
        char *js = ap_json_print(out, 0);
        char summary[256];
        snprintf(summary, sizeof summary, "%s on %d x %s, %s, gbs %lld", pc->ctx.model.name,
                 c->gpus, c->gpu.name, ap_trainer_name(pc->so.fixed.trainer), (long long)pc->so.gbs);
        ap_err e2;
        if (js && !ap_db_is_readonly(pc->db) &&
            ap_db_plan_put(pc->db, key, summary, js, jnum(out, "search", "search_s"), &e2) != AP_OK)
            fprintf(stderr, "autoplan: warning: plan cache not updated: %s\n", e2.msg);
        free(js);
    }
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

static void print_result(const plan_cmd *pc, const ap_json *res, int cached) {
    const ap_json *plans = ap_json_get(res, "plans");
    int n = ap_json_size(plans);
    printf("%s on %d x %s, trainer %s, global batch %.0f x %.0f tokens\n",
           ap_json_string(ap_json_get(res, "model")), (int)jnum(res, "gpus", NULL),
           ap_json_string(ap_json_get(res, "gpu")), ap_json_string(ap_json_get(res, "trainer")),
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
                   ap_json_string(ap_json_get(e, "label")),
                   ap_fmt_seconds(jnum(e, "time", "step_s"), step, sizeof step),
                   jnum(e, "throughput", "tokens_per_s"), 100 * jnum(e, "throughput", "mfu"),
                   jnum(e, "memory", "device_peak_bytes") / AP_GIB,
                   jnum(e, "memory", "capacity_bytes") / AP_GIB,
                   ap_json_string(ap_json_get(e, "confidence")), lc, 100 * share);
        }
        const ap_json *rb = ap_json_get(res, "robustness");
        if (rb) {
            if (ap_json_bool(ap_json_get(rb, "best_stays_best")))
                printf("\nrobust: plan 1 stays best with -20%% network bandwidth and -10%% GEMM "
                       "efficiency\n");
            else
                printf("\nnot robust: with -20%% network bandwidth and -10%% GEMM efficiency plan "
                       "%.0f (%s) wins\n", jnum(rb, "best_under_stress_rank", NULL),
                       ap_json_string(ap_json_get(rb, "best_under_stress")));
        }
    } else {
        printf("\nnothing fits.\n");
        const ap_json *cl = ap_json_get(res, "closest");
        if (cl) {
            printf("closest: %s needs %.1f GiB on its worst GPU (stage %.0f) of %.1f GiB with "
                   "%.1f GiB headroom: %.1f GiB over\n",
                   ap_json_string(ap_json_get(cl, "label")),
                   jnum(cl, "memory", "device_peak_bytes") / AP_GIB,
                   jnum(cl, "memory", "worst_stage"), jnum(cl, "memory", "capacity_bytes") / AP_GIB,
                   jnum(cl, "memory", "headroom_bytes") / AP_GIB,
                   jnum(cl, "overshoot_bytes", NULL) / AP_GIB);
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
            printf("  - %s\n", ap_json_string(ap_json_at(sug, i)));
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
    (void)pc;
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
    ap_flags_add(fl, "no-sp", AP_FLAG_BOOL, NULL, "do not use sequence parallelism");
    ap_flags_add(fl, "no-overlap", AP_FLAG_BOOL, NULL, "do not overlap DP communication");
    ap_flags_add(fl, "db", AP_FLAG_VALUE, "PATH", "plan cache database (default "
                 "$XDG_CACHE_HOME/autoplan/autoplan.db)");
    ap_flags_add(fl, "no-cache", AP_FLAG_BOOL, NULL, "neither read nor write the plan cache");
}

static ap_status setup(plan_cmd *pc, ap_err *err) {
    ap_flags *fl = &pc->fl;
    ap_status st;
    const char *gv = ap_flags_value(fl, "gpus");
    if (gv) {
        if ((st = ap_parse_gpu_counts(gv, pc->counts, &pc->ncounts, err)) != AP_OK) return st;
        static char first[16];
        snprintf(first, sizeof first, "%d", pc->counts[0]);
        ap_flags_get(fl, "gpus")->value = first;
    }
    if ((st = ap_cli_load(fl, 1, &pc->ctx, err)) != AP_OK) return st;
    if (!gv) {
        pc->counts[0] = pc->ctx.cluster.gpus;
        pc->ncounts = 1;
    }
    ap_search_opts *so = &pc->so;
    ap_search_opts_init(so);
    const ap_plan *cp = &pc->ctx.plan;
    so->fixed.trainer = cp->trainer;
    so->fixed.tp = cp->tp; so->fixed.pp = cp->pp; so->fixed.cp = cp->cp; so->fixed.ep = cp->ep;
    so->fixed.vp = cp->vp; so->fixed.mbs = cp->mbs; so->fixed.zero = cp->zero;
    so->fixed.seq = cp->seq;
    so->fixed.dtype = cp->dtype;
    so->fixed.flash_attn = cp->flash_attn;
    so->fixed.attn_impl = cp->attn_impl;
    /* an explicit 0 pins "no offload"; absent leaves it to the search */
    so->fixed.offload_optimizer = ap_flags_isset(fl, "offload-optimizer") && cp->offload_optimizer == 0
                                      ? -1.0 : cp->offload_optimizer;
    so->fixed.offload_params = ap_flags_isset(fl, "offload-params") && cp->offload_params == 0
                                   ? -1.0 : cp->offload_params;
    so->fixed.recompute_layers = cp->recompute_layers;
    if (ap_flags_isset(fl, "recompute")) {
        so->fixed.recompute = cp->recompute;
        so->fix_recompute = 1;
    }
    if (ap_flags_isset(fl, "stage-layers"))
        return ap_err_set(err, AP_ERR_INPUT, "--stage-layers applies to `autoplan estimate`; the "
                          "search uses uniform stages");
    if (ap_flags_isset(fl, "sp") && ap_flags_isset(fl, "no-sp"))
        return ap_err_set(err, AP_ERR_INPUT, "--sp and --no-sp contradict each other");
    so->no_sp = ap_flags_isset(fl, "no-sp");
    so->no_overlap = ap_flags_isset(fl, "no-overlap");
    so->prune = !ap_flags_isset(fl, "no-prune");
    so->allow_cross_node_tp = pc->ctx.allow_cross_node_tp;
    so->est = pc->ctx.opts;
    const char *fx = ap_flags_value(fl, "fix");
    if (fx && (st = parse_fix(fx, so, err)) != AP_OK) return st;
    int64_t top = 10;
    if ((st = ap_flag_int(fl, "top", 1, 1000, &top, err)) != AP_OK) return st;
    so->top_k = (int)top;
    /* global batch: --gbs sequences, or --tokens-per-step (default 4M tokens) */
    if (ap_flags_isset(fl, "gbs") && ap_flags_isset(fl, "tokens-per-step"))
        return ap_err_set(err, AP_ERR_INPUT, "give --gbs or --tokens-per-step, not both");
    const char *gbs_note = NULL;
    char gbs_buf[200];
    if (cp->gbs > 0) {
        so->gbs = cp->gbs;
    } else {
        if ((st = ap_cli_tokens_gbs(fl, cp->seq, &so->gbs, gbs_buf, sizeof gbs_buf, err)) != AP_OK)
            return st;
        gbs_note = gbs_buf;
    }
    /* a pinned degree that does not divide the GPU count is an input error, not "nothing
       fits" (every count of a sweep is checked) */
    for (int k = 0; k < pc->ncounts; k++) {
        static const char *const names[] = {"tp", "pp", "cp"};
        const int vals[] = {cp->tp, cp->pp, cp->cp};
        for (int d = 0; d < 3; d++)
            if (ap_flags_isset(fl, names[d]) && vals[d] > 0 && pc->counts[k] % vals[d] != 0)
                return ap_err_set(err, AP_ERR_INPUT, "--%s %d does not divide --gpus %d: pick a "
                                  "divisor of the GPU count", names[d], vals[d], pc->counts[k]);
        int prod = (ap_flags_isset(fl, "tp") ? cp->tp : 1) * (ap_flags_isset(fl, "pp") ? cp->pp : 1) *
                   (ap_flags_isset(fl, "cp") ? cp->cp : 1);
        if (prod > 1 && pc->counts[k] % prod != 0)
            return ap_err_set(err, AP_ERR_INPUT, "--tp x --pp x --cp = %d does not divide --gpus "
                              "%d", prod, pc->counts[k]);
    }
    const char *tk = ap_flags_value(fl, "tokens");
    if (tk && (st = ap_parse_count(tk, "--tokens", &pc->tokens, err)) != AP_OK) return st;
    if ((st = ap_flag_real(fl, "gpu-hour-price", 0, 1e6, &pc->price, err)) != AP_OK) return st;
    const char *dl = ap_flags_value(fl, "deadline");
    if (dl && (st = ap_parse_duration(dl, "--deadline", &pc->deadline_s, err)) != AP_OK) return st;
    if (dl && !tk) return ap_err_set(err, AP_ERR_INPUT, "--deadline needs --tokens");
    if (ap_flags_isset(fl, "gpu-hour-price") && !tk)
        return ap_err_set(err, AP_ERR_INPUT, "--gpu-hour-price needs --tokens");
    if (ap_flags_isset(fl, "emit") && !ap_flags_isset(fl, "out"))
        return ap_err_set(err, AP_ERR_INPUT, "--emit needs --out DIR");
    if (ap_flags_isset(fl, "emit")) {
        unsigned mask;
        if ((st = ap_emit_parse_list(ap_flags_value(fl, "emit"), &mask, err)) != AP_OK) {
            ap_err_prefix(err, "--emit");
            return st;
        }
    }
    pc->json = ap_flags_isset(fl, "json");
    pc->partition = 1;
    pc->solver = AP_SOLVER_AUTO;
    const char *sv = ap_flags_value(fl, "solver");
    if (sv && !strcmp(sv, "off")) {
        pc->partition = 0;
    } else if (sv && (st = ap_solver_parse(sv, &pc->solver, err)) != AP_OK) {
        ap_err_prefix(err, "--solver");
        return st;
    }
    if (gbs_note)
        fprintf(stderr, "autoplan: global batch %lld sequences x %lld tokens = %.2fM tokens "
                "(%s; --gbs to set it)\n", (long long)so->gbs, (long long)cp->seq,
                (double)so->gbs * (double)cp->seq / 1e6, gbs_note);
    if (!ap_flags_isset(fl, "no-cache")) {
        /* the cache is an optimisation: an unusable database (corrupt, newer, read-only, full,
         * unwritable directory) is a warning naming the path, and planning goes on; a
         * read-only one still answers hits */
        ap_err e2, e3;
        const char *dbp = ap_flags_value(fl, "db");
        if (ap_db_open(dbp, 0, &pc->db, &e2) != AP_OK) {
            pc->db = NULL;
            if (ap_db_open(dbp, 1, &pc->db, &e3) == AP_OK) {
                fprintf(stderr, "autoplan: warning: plan cache is read-only, results are not "
                        "stored: %s\n", e2.msg);
            } else {
                pc->db = NULL;
                fprintf(stderr, "autoplan: warning: plan cache unavailable, planning without it: "
                        "%s\n", e2.msg);
            }
        }
    }
    return AP_OK;
}

static ap_status write_outputs(plan_cmd *pc, const ap_cluster *c, const ap_json *res, ap_err *err) {
    const char *dir = ap_flags_value(&pc->fl, "out");
    if (!dir) return AP_OK;
    const ap_json *best = ap_json_at(ap_json_get(res, "plans"), 0);
    if (!best) {
        ap_log(AP_LOG_WARN, "nothing fits: no plan.json written to %s", dir);
        return AP_OK;
    }
    /* mkdir -p */
    char part[4096];
    size_t dl = strlen(dir);
    if (dl >= sizeof part) return ap_err_set(err, AP_ERR_INPUT, "--out: path too long");
    for (size_t i = 1; i <= dl; i++) {
        if (dir[i] != '/' && dir[i] != '\0') continue;
        memcpy(part, dir, i);
        part[i] = '\0';
        struct stat sb;
        if (stat(part, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                return ap_err_set(err, AP_ERR_INPUT, "--out: %s exists and is not a directory", part);
            continue;
        }
        if (mkdir(part, 0755) != 0)
            return ap_err_set(err, AP_ERR_INPUT, "--out: cannot create directory %s: %s", part,
                              strerror(errno));
    }
    /* rebuild the plan from the result (works for cached results too) */
    ap_plan p;
    ap_status st = ap_estimate_plan_from_json(best, "search result", &p, err);
    if (st != AP_OK) return st;
    char path[4096];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    st = ap_planfile_write(path, &pc->ctx.model, c, &p, best, err);
    if (st != AP_OK) return st;
    if (!pc->json) printf("wrote %s\n", path);
    const char *em = ap_flags_value(&pc->fl, "emit");
    if (em) {
        ap_emit_report rep;
        st = ap_emit_files_ex(dir, em, &pc->ctx.model, c, &p, best, &rep, err);
        for (int t = 0; t < AP_EMIT_COUNT; t++) {
            if (!rep.requested[t]) continue;
            if (rep.status[t] == AP_OK) {
                if (!pc->json) printf("wrote %s/%s\n", dir, rep.files[t]);
            } else {
                fprintf(stderr, "autoplan: %s\n", rep.msg[t]);
            }
        }
        if (st == AP_ERR_INFEASIBLE) st = AP_OK; /* refusals reported, other files written */
    }
    return st;
}

static int sweep(plan_cmd *pc) {
    ap_err err = {{0}};
    int auto_node = !ap_flags_isset(&pc->fl, "gpus-per-node") && !ap_flags_isset(&pc->fl, "cluster") &&
                    !ap_flags_isset(&pc->fl, "nvlink-domain");
    ap_json *all = ap_json_new_array();
    double base_per_gpu = 0;
    int deadline_n = 0;
    if (!pc->json) {
        printf("%s, trainer %s, global batch %lld x %lld tokens, %s\n", pc->ctx.model.name,
               ap_trainer_name(pc->so.fixed.trainer), (long long)pc->so.gbs,
               (long long)pc->so.fixed.seq, pc->ctx.cluster.gpu.name);
        printf("\n %6s  %-48s %9s %12s %6s %8s", "GPUs", "best plan", "step", "tokens/s", "MFU",
               "scaling");
        if (pc->tokens > 0) printf(" %12s %12s", "train time", "GPU-hours");
        if (pc->price > 0) printf(" %14s", "cost (USD)");
        printf("\n");
    }
    for (int i = 0; i < pc->ncounts; i++) {
        ap_cluster c = pc->ctx.cluster;
        c.gpus = pc->counts[i];
        /* each count gets the node shape `--gpus <count>` alone would give it, unless the user
         * fixed the node (a sweep starting below one node must not keep that partial node) */
        if (auto_node)
            ap_cluster_set_gpus_per_node(&c, c.gpu.ref_gpus_per_node > 0 ? c.gpu.ref_gpus_per_node : 1);
        else if (c.gpus_per_node > c.gpus)
            ap_cluster_set_gpus_per_node(&c, c.gpus);
        int cached;
        ap_json *res = run_search(pc, &c, &cached, &err);
        if (!res) {
            ap_json_free(all);
            return ap_cli_fail(AP_ERR_INPUT, &err);
        }
        const ap_json *best = ap_json_at(ap_json_get(res, "plans"), 0);
        ap_json *row = ap_json_new_object();
        ap_json_add_number(row, "gpus", c.gpus);
        if (best) {
            double tps = jnum(best, "throughput", "tokens_per_s");
            double per_gpu = tps / c.gpus;
            if (base_per_gpu == 0) base_per_gpu = per_gpu;
            double scaling = per_gpu / base_per_gpu;
            ap_json_add(row, "best", ap_json_duplicate(best));
            ap_json_add_number(row, "scaling_efficiency", scaling);
            double ttt = 0, gh = 0;
            if (pc->tokens > 0) {
                ttt = pc->tokens / tps;         /* seconds */
                gh = ttt * c.gpus / 3600.0;     /* GPU-hours */
                ap_json_add_number(row, "time_to_train_s", ttt);
                ap_json_add_number(row, "gpu_hours", gh);
                if (pc->price > 0) ap_json_add_number(row, "cost_usd", gh * pc->price);
                if (pc->deadline_s > 0 && ttt <= pc->deadline_s && !deadline_n) deadline_n = c.gpus;
            }
            if (!pc->json) {
                char step[32], tt[32];
                printf(" %6d  %-48s %9s %12.0f %5.1f%% %7.1f%%", c.gpus,
                       ap_json_string(ap_json_get(best, "label")),
                       ap_fmt_seconds(jnum(best, "time", "step_s"), step, sizeof step), tps,
                       100 * jnum(best, "throughput", "mfu"), 100 * scaling);
                if (pc->tokens > 0) printf(" %12s %12.0f", ap_fmt_seconds(ttt, tt, sizeof tt), gh);
                if (pc->price > 0) printf(" %14.0f", gh * pc->price);
                printf("\n");
            }
        } else if (!pc->json) {
            printf(" %6d  %-48s\n", c.gpus, "nothing fits");
        }
        ap_json_push(all, row);
        ap_json_free(res);
    }
    if (pc->json) {
        ap_json *o = ap_json_new_object();
        ap_json_add(o, "sweep", all);
        if (pc->deadline_s > 0) {
            if (deadline_n) ap_json_add_number(o, "deadline_gpus", deadline_n);
            else ap_json_add(o, "deadline_gpus", ap_json_new_null());
        }
        char *s = ap_json_print(o, 1);
        printf("%s\n", s ? s : "null");
        free(s);
        ap_json_free(o);
    } else {
        ap_json_free(all);
        if (pc->tokens > 0)
            printf("\ntime to train %.3g tokens at the predicted throughput (no restarts or "
                   "evaluation counted)\n", pc->tokens);
        if (pc->deadline_s > 0) {
            char d[32];
            ap_fmt_seconds(pc->deadline_s, d, sizeof d);
            if (deadline_n) printf("deadline %s: the smallest count that meets it is %d GPUs\n", d, deadline_n);
            else printf("deadline %s: no count in the sweep meets it\n", d);
        }
    }
    return 0;
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
            fprintf(stderr, "autoplan: '%s' is neither a command nor a model file (try "
                    "autoplan --help)\n", m);
            return 2;
        }
    }
    st = setup(&pc, &err);
    if (st != AP_OK) {
        ap_db_close(pc.db);
        return ap_cli_fail(st, &err);
    }
    int rc = 0;
    if (pc.ncounts > 1 || pc.tokens > 0) {
        rc = sweep(&pc);
    } else {
        int cached;
        ap_json *res = run_search(&pc, &pc.ctx.cluster, &cached, &err);
        if (!res) {
            ap_db_close(pc.db);
            return ap_cli_fail(AP_ERR_INPUT, &err);
        }
        if (pc.json) {
            ap_json_add_bool(res, "cached", cached);
            char *s = ap_json_print(res, 1);
            printf("%s\n", s ? s : "null");
            free(s);
        } else {
            print_result(&pc, res, cached);
        }
        st = write_outputs(&pc, &pc.ctx.cluster, res, &err);
        if (st != AP_OK) rc = ap_cli_fail(st, &err);
        ap_json_free(res);
    }
    ap_db_close(pc.db);
    return rc;
}
