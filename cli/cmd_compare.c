/*
 * cmd_compare.c - `autoplan compare MODEL --gpus N --out DIR`: choose the strategies to compare
 * (the search's top plans and named baselines, or `--strategies`), estimate each exactly as
 * `autoplan estimate` would from the flags printed in the report, enumerate the plan space for
 * the scatter and plans.csv, and write report.html, report.md and plans.csv atomically.
 *
 * Strategies (--strategies, comma separated; default top5,ddp,zero3,zero2-offload,megatron,no-pp):
 *   topN           the first N plans of ap_search, as `autoplan plan` ranks them
 *   ddp            pure data parallel: tp = pp = cp = 1, ZeRO 0, no offload
 *   zero3          ZeRO-3 / FSDP FULL_SHARD, tp = pp = cp = 1, no offload (fsdp when the
 *                  trainer has no ZeRO-3)
 *   zero2-offload  ZeRO-2 with all optimizer states in CPU memory, tp = pp = cp = 1 (deepspeed
 *                  when the trainer cannot offload under ZeRO-2)
 *   megatron       Megatron-style: tp = min(8, GPUs per node) within a node, pp = number of
 *                  nodes, megatron trainer
 *   no-pp          the fastest plan with pp = 1
 *   K=V,K=V        pinned dimensions (tp pp cp dp ep vp mbs zero recompute offload trainer);
 *                  consecutive K=V items form one strategy, ';' separates two of them
 * Free dimensions (micro-batch, recompute, ...) are chosen as the fastest fitting plan; when
 * nothing fits, the legal plan with the least overshoot is shown; when nothing is legal, the
 * rule that refuses it.
 *
 * --gpus takes what `autoplan plan` takes (ap_parse_gpu_counts): with a sweep (64..1024, a list,
 * or --tokens) the strategies are compared on the first count, and each count gets the
 * cluster `plan --gpus <count>` would load and plan's answer there (ap_report_sweep) for the
 * GPU-count chart. The best compared plan is also simulated (ap_report_simulate) for the
 * memory-over-one-iteration chart.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "autoplan/text.h"
#include "autoplan/files.h"
#include "autoplan/hetero.h"
#include "autoplan/partition.h"
#include "autoplan/report.h"

#define MAX_STRATEGIES 32
#define DEFAULT_STRATEGIES "top5,ddp,zero3,zero2-offload,megatron,no-pp"

typedef struct {
    ap_flags fl;
    ap_request rq;                 /* the flags as values */
    ap_resolved r;                 /* model, cluster of the compared count, the base search:
                                      trainer, batch, sequence, dtype, estimate options */
    int counts[AP_MAX_GPU_COUNTS]; /* --gpus: the compared count first, then the sweep */
    int ncounts;
    double tokens;                 /* --tokens, 0 = not given */
} compare_cmd;

/* one strategy to resolve */
typedef struct {
    char name[48];
    int top;             /* > 0: the top N of the search */
    ap_search_opts so;   /* pins for a baseline or spec */
    char desc[192];
    char note[192];
} strat_spec;

/* ---- the estimate that reproduces a plan ---------------------------------------------------- */

/* Estimate plan p exactly as `autoplan estimate` does from the request the report prints
 * (ap_request_for_plan: same resolution, same defaults), so the report's numbers are that
 * command's. */
static ap_status estimate_as_cli(compare_cmd *cc, const ap_plan *p, ap_report_strategy *s,
                                 ap_err *err) {
    ap_request *rq = malloc(sizeof *rq);
    ap_resolved *r = malloc(sizeof *r);
    ap_strbuf args = {0};
    ap_status st = AP_OK;
    if (!rq || !r) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory");
        goto done;
    }
    ap_request_for_plan(&cc->rq, p, rq);
    ap_request_format(rq, &args);
    ap_strbuf_puts(&args, " --json");
    if (args.failed || args.len >= sizeof s->estimate_args) {
        st = ap_err_set(err, AP_ERR_INTERNAL, "estimate command line too long");
        goto done;
    }
    memcpy(s->estimate_args, args.buf, args.len + 1);
    if ((st = ap_request_resolve(rq, AP_REQUEST_ESTIMATE, r, err)) != AP_OK) goto done;
    r->est.profile = cc->r.est.profile; /* the kernel tables of the compared cluster */
    r->est.kernels = cc->r.est.kernels;
    if ((st = ap_plan_check(&r->plan, &r->model, &r->cluster, r->allow_cross_node_tp, err)) !=
        AP_OK)
        goto done;
    /* as cmd_estimate.c: Gemini placements and DeepSpeed offload devices are simulated */
    if (ap_hetero_applies(&r->plan))
        st = ap_hetero_estimate(&r->model, &r->cluster, &r->plan, &r->est, NULL, &s->est, err);
    else
        st = ap_estimate_plan(&r->model, &r->cluster, &r->plan, &r->est, &s->est, err);
done:
    ap_strbuf_free(&args);
    free(rq);
    free(r);
    return st;
}

/* ---- strategies ---------------------------------------------------------------------------- */

/* One K=V pin of a strategy: a plan member by name (tp pp cp dp ep vp mbs zero zero_group
 * recompute trainer), or offload = the optimizer offload fraction (0 pins "none"). */
static ap_status parse_kv(const char *tok, strat_spec *sp, ap_err *err) {
    static const char *const keys[] = {"tp", "pp", "cp", "dp", "ep", "vp", "mbs", "zero",
                                       "zero_group", "recompute", "trainer", "offload"};
    char k[32], what[64], shown[64];
    const char *eq = strchr(tok, '=');
    size_t kl = eq ? (size_t)(eq - tok) : 0;
    if (!eq || kl == 0 || kl >= sizeof k || !eq[1])
        return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%s' is not key=value",
                          ap_text_line(shown, sizeof shown, tok, 40));
    memcpy(k, tok, kl);
    k[kl] = '\0';
    snprintf(what, sizeof what, "--strategies %s", k);
    int known = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) known |= !strcmp(k, keys[i]);
    if (!known)
        return ap_err_set(err, AP_ERR_INPUT, "--strategies: unknown key '%s' (tp, pp, cp, dp, ep, "
                          "vp, mbs, zero, zero_group, recompute, offload, trainer)",
                          ap_text_line(shown, sizeof shown, k, 40));
    int n;
    const ap_field *t = ap_plan_fields(&n);
    ap_plan *f = &sp->so.fixed;
    ap_status st = ap_field_parse(ap_field_find(t, n, strcmp(k, "offload") ? k : "offload_optimizer"),
                                  eq + 1, what, f, err);
    if (st != AP_OK) return st;
    if (!strcmp(k, "recompute")) sp->so.fix_recompute = 1;
    if (!strcmp(k, "offload") && f->offload_optimizer == 0) f->offload_optimizer = -1;
    return AP_OK;
}

/* the trainer to use for a baseline needing ZeRO stage z (and optimizer offload when off) */
static ap_trainer_id trainer_for(ap_trainer_id want, int z, int off, ap_trainer_id fallback,
                                 char *note, size_t n) {
    const ap_trainer_caps *t = ap_trainer_get(want);
    int ok = (t->zero_mask & (1u << z)) &&
             (!off || (t->offload_optimizer && (t->offload_optimizer_zero_mask & (1u << z))));
    if (ok) return want;
    snprintf(note, n, "Evaluated with %s: %s cannot run ZeRO-%d%s.", ap_trainer_name(fallback),
             t->name, z, off ? " with optimizer offload" : "");
    return fallback;
}

static ap_status named(compare_cmd *cc, const char *nm, strat_spec *sp, ap_err *err) {
    ap_plan *f = &sp->so.fixed;
    const ap_cluster *c = &cc->r.cluster;
    snprintf(sp->name, sizeof sp->name, "%s", nm);
    if (!strcmp(nm, "ddp")) {
        f->tp = f->pp = f->cp = 1;
        f->zero = 0;
        f->offload_optimizer = f->offload_params = -1;
        f->trainer = trainer_for(f->trainer, 0, 0, AP_TRAINER_DEEPSPEED, sp->note, sizeof sp->note);
        snprintf(sp->desc, sizeof sp->desc, "pure data parallel (tp = pp = cp = 1, ZeRO 0, no "
                 "offload); micro-batch and recompute chosen for speed.");
    } else if (!strcmp(nm, "zero3")) {
        f->tp = f->pp = f->cp = 1;
        f->zero = 3;
        f->zero_group = -1; /* full sharding over every rank, not the search's groups */
        f->offload_optimizer = f->offload_params = -1;
        f->trainer = trainer_for(f->trainer, 3, 0, AP_TRAINER_FSDP, sp->note, sizeof sp->note);
        snprintf(sp->desc, sizeof sp->desc, "ZeRO-3 / FSDP full sharding (tp = pp = cp = 1, no "
                 "offload); micro-batch and recompute chosen for speed.");
    } else if (!strcmp(nm, "zero2-offload")) {
        f->tp = f->pp = f->cp = 1;
        f->zero = 2;
        f->zero_group = -1;
        f->offload_optimizer = 1;
        f->offload_params = -1;
        f->trainer = trainer_for(f->trainer, 2, 1, AP_TRAINER_DEEPSPEED, sp->note, sizeof sp->note);
        snprintf(sp->desc, sizeof sp->desc, "ZeRO-2 with all optimizer states and master weights "
                 "in CPU memory (ZeRO-Offload; tp = pp = cp = 1).");
    } else if (!strcmp(nm, "megatron")) {
        int tp = c->gpus_per_node < 8 ? c->gpus_per_node : 8;
        if (tp > c->gpus) tp = c->gpus;
        if (tp < 1) tp = 1;
        int nodes = c->gpus_per_node > 0 ? (c->gpus + c->gpus_per_node - 1) / c->gpus_per_node : 1;
        f->tp = tp;
        f->pp = nodes;
        f->cp = 1;
        if (f->trainer != AP_TRAINER_MEGATRON)
            snprintf(sp->note, sizeof sp->note, "Evaluated with megatron.");
        f->trainer = AP_TRAINER_MEGATRON;
        snprintf(sp->desc, sizeof sp->desc, "Megatron-style: tp = %d within a node, pp = %d "
                 "(one stage per node), data parallel over the rest.", tp, nodes);
    } else if (!strcmp(nm, "no-pp")) {
        f->pp = 1;
        snprintf(sp->desc, sizeof sp->desc, "the fastest plan without pipeline parallelism "
                 "(pp = 1).");
    } else if (!strncmp(nm, "top", 3) && nm[3]) {
        int64_t n;
        if (ap_parse_int(nm + 3, "--strategies topN", 1, 20, &n, err) != AP_OK) return AP_ERR_INPUT;
        sp->top = (int)n;
    } else {
        return ap_err_set(err, AP_ERR_INPUT, "--strategies: unknown strategy '%s' (topN, ddp, "
                          "zero3, zero2-offload, megatron, no-pp, or key=value pins like "
                          "tp=2,pp=4)", nm);
    }
    (void)cc;
    return AP_OK;
}

static ap_status parse_strategies(compare_cmd *cc, const char *list, strat_spec *out, int *n,
                                  ap_err *err) {
    char buf[1024];
    if (strlen(list) >= sizeof buf) return ap_err_set(err, AP_ERR_INPUT, "--strategies: too long");
    /* an empty item is a typo (strtok would skip it) */
    size_t ll = strlen(list);
    if (strstr(list, ",,") || strstr(list, ";;") || strstr(list, ",;") || strstr(list, ";,") ||
        (ll && strchr(",;", list[0])) || (ll && strchr(",;", list[ll - 1])))
        return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%s' has an empty item", list);
    strcpy(buf, list);
    *n = 0;
    int in_spec = 0; /* the last strategy is a key=value one still collecting pins */
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        /* ';' separates two key=value strategies: "tp=2,pp=4;tp=4" */
        char *sub_save = NULL;
        int first_sub = 1;
        for (char *t = strtok_r(tok, ";", &sub_save); t; t = strtok_r(NULL, ";", &sub_save)) {
            if (!first_sub) in_spec = 0;
            first_sub = 0;
            while (*t == ' ') t++;
            if (!*t) continue;
            int kv = strchr(t, '=') != NULL;
            if (!kv || !in_spec) {
                if (*n >= MAX_STRATEGIES)
                    return ap_err_set(err, AP_ERR_INPUT, "--strategies: at most %d", MAX_STRATEGIES);
                strat_spec *sp = &out[(*n)++];
                memset(sp, 0, sizeof *sp);
                sp->so = cc->r.search;
                sp->so.top_k = 1;
                if (!kv) {
                    ap_status st = named(cc, t, sp, err);
                    if (st != AP_OK) return st;
                    in_spec = 0;
                    continue;
                }
                in_spec = 1;
                sp->name[0] = '\0';
                snprintf(sp->desc, sizeof sp->desc, "pinned by --strategies; the other "
                         "dimensions chosen for speed.");
            }
            strat_spec *sp = &out[*n - 1];
            /* a key twice in one strategy is a missing ';' ("tp=2,tp=4") */
            size_t kl = (size_t)(strchr(t, '=') - t) + 1;
            for (const char *q = sp->name; *q; q = strchr(q, ',') ? strchr(q, ',') + 1 : "")
                if (!strncmp(q, t, kl))
                    return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%.*s' given twice in "
                                      "one strategy ('%s', then '%s'); separate two strategies "
                                      "with ';'", (int)kl - 1, t, sp->name, t);
            ap_status st = parse_kv(t, sp, err);
            if (st != AP_OK) return st;
            size_t l = strlen(sp->name);
            snprintf(sp->name + l, sizeof sp->name - l, "%s%s", l ? "," : "", t);
        }
    }
    if (*n == 0) return ap_err_set(err, AP_ERR_INPUT, "--strategies: empty list");
    /* each strategy once, and one topN (top1 and top3 would list plan 1 twice) */
    int tops = 0;
    for (int i = 0; i < *n; i++) {
        tops += out[i].top > 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(out[i].name, out[j].name))
                return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%s' listed twice",
                                  out[i].name);
    }
    if (tops > 1) return ap_err_set(err, AP_ERR_INPUT, "--strategies: give one topN, not %d", tops);
    return AP_OK;
}

/* best fitting plan and least-overshoot plan among the visited ones */
typedef struct {
    ap_estimate *best, *closest;
    int have_best, have_closest;
    double closest_over;
} pick_state;

static void pick_visit(void *ctx, const ap_estimate *e) {
    pick_state *ps = ctx;
    if (e->fits) {
        if (!ps->have_best || e->time.step_s < ps->best->time.step_s ||
            (e->time.step_s == ps->best->time.step_s &&
             e->device_peak_bytes < ps->best->device_peak_bytes)) {
            *ps->best = *e;
            ps->have_best = 1;
        }
        return;
    }
    double over = (e->device_peak_bytes + e->headroom_bytes - e->capacity_bytes) / e->capacity_bytes;
    if (!e->host_fits && e->host_capacity_bytes > 0) {
        double h = (e->host_bytes_per_node - e->host_capacity_bytes) / e->host_capacity_bytes;
        if (h > over) over = h;
    }
    if (!ps->have_closest || over < ps->closest_over) {
        *ps->closest = *e;
        ps->have_closest = 1;
        ps->closest_over = over;
    }
}

/* the rule that refuses the simplest plan with these pins */
static void illegal_reason(compare_cmd *cc, const ap_search_opts *so, char *out, size_t n) {
    const ap_plan *f = &so->fixed;
    const ap_cluster *c = &cc->r.cluster;
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = f->trainer;
    p.tp = f->tp ? f->tp : 1;
    p.pp = f->pp ? f->pp : 1;
    p.cp = f->cp ? f->cp : 1;
    p.ep = f->ep ? f->ep : 1;
    p.vp = f->vp ? f->vp : 1;
    p.zero = f->zero >= 0 ? f->zero : 0;
    p.mbs = f->mbs ? f->mbs : 1;
    p.gbs = so->gbs;
    p.seq = f->seq;
    p.dtype = f->dtype;
    p.fp8_recipe = f->fp8_recipe;
    p.offload_optimizer = f->offload_optimizer > 0 ? f->offload_optimizer : 0;
    p.recompute = so->fix_recompute ? f->recompute : AP_RECOMPUTE_NONE;
    int64_t per = (int64_t)p.tp * p.pp * p.cp;
    if (c->gpus % per != 0) {
        snprintf(out, n, "tp*pp*cp = %lld does not divide the %d GPUs", (long long)per, c->gpus);
        return;
    }
    p.dp = (int)(c->gpus / per);
    if (f->dp && f->dp != p.dp) {
        snprintf(out, n, "dp = %d is not %d GPUs / (tp*pp*cp)", f->dp, c->gpus);
        return;
    }
    if (p.gbs % (p.mbs * p.dp) != 0) {
        snprintf(out, n, "the global batch %lld is not divisible by mbs*dp = %lld",
                 (long long)p.gbs, (long long)(p.mbs * p.dp));
        return;
    }
    p.grad_accum = p.gbs / (p.mbs * p.dp);
    ap_err e = {{0}};
    if (ap_plan_check(&p, &cc->r.model, c, so->allow_cross_node_tp, &e) != AP_OK) {
        snprintf(out, n, "%s", e.msg);
        return;
    }
    snprintf(out, n, "no plan with these pins passes the %s rules for this model and batch",
             ap_trainer_name(f->trainer));
}

/* `ranked`: NULL, or the ranking of a topN strategy already made (on the enumeration's walk,
 * build_report), used instead of searching again. */
static ap_status resolve(compare_cmd *cc, strat_spec *sp, ap_search_result *ranked,
                         ap_report_strategy *out, int *nout, int cap, ap_err *err) {
    ap_status st = AP_OK;
    if (sp->top > 0) {
        ap_search_opts so = cc->r.search;
        so.top_k = sp->top;
        /* plan's stage re-split (the request's; off for the named strategies), so topN are
           plan's top N (the reproduce command carries the split: ap_request_for_plan) */
        so.resplit = cc->r.partition;
        ap_search_result r;
        if (ranked) r = *ranked;
        else if ((st = ap_search(&cc->r.model, &cc->r.cluster, &so, &r, err)) != AP_OK)
            return st;
        for (int i = 0; i < r.ntop && *nout < cap; i++) {
            ap_report_strategy *s = &out[(*nout)++];
            memset(s, 0, sizeof *s);
            snprintf(s->name, sizeof s->name, "top%d", i + 1);
            snprintf(s->desc, sizeof s->desc, "rank %d of the search (%s).", i + 1,
                     ap_trainer_name(so.fixed.trainer));
            if ((st = estimate_as_cli(cc, &r.top[i].plan, s, err)) != AP_OK) break;
            s->status = s->est.fits ? AP_REPORT_OK : AP_REPORT_NOFIT;
        }
        if (st == AP_OK && r.ntop == 0 && *nout < cap) {
            ap_report_strategy *s = &out[(*nout)++];
            memset(s, 0, sizeof *s);
            snprintf(s->name, sizeof s->name, "top1");
            if (r.have_closest) {
                snprintf(s->desc, sizeof s->desc, "nothing fits: the legal plan with the least "
                         "overshoot.");
                st = estimate_as_cli(cc, &r.closest.plan, s, err);
                s->status = s->est.fits ? AP_REPORT_OK : AP_REPORT_NOFIT;
            } else {
                s->status = AP_REPORT_ILLEGAL;
                illegal_reason(cc, &so, s->reason, sizeof s->reason);
            }
        }
        if (!ranked) ap_search_result_free(&r); /* build_report frees the one it made */
        return st;
    }
    if (*nout >= cap) return AP_OK;
    ap_report_strategy *s = &out[(*nout)++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", sp->name);
    snprintf(s->desc, sizeof s->desc, "%s", sp->desc);
    snprintf(s->note, sizeof s->note, "%s", sp->note);
    pick_state ps = {malloc(sizeof(ap_estimate)), malloc(sizeof(ap_estimate)), 0, 0, 0};
    if (!ps.best || !ps.closest) {
        free(ps.best);
        free(ps.closest);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    }
    int64_t nev;
    int capped;
    st = ap_report_each_plan(&cc->r.model, &cc->r.cluster, &sp->so, AP_REPORT_MAX_EVALS,
                             pick_visit, &ps, &nev, &capped, err);
    if (st == AP_OK) {
        const ap_estimate *e = ps.have_best ? ps.best : ps.have_closest ? ps.closest : NULL;
        if (e) {
            st = estimate_as_cli(cc, &e->plan, s, err);
            s->status = s->est.fits ? AP_REPORT_OK : AP_REPORT_NOFIT;
        } else {
            s->status = AP_REPORT_ILLEGAL;
            illegal_reason(cc, &sp->so, s->reason, sizeof s->reason);
        }
    }
    free(ps.best);
    free(ps.closest);
    return st;
}

/* ---- the command --------------------------------------------------------------------------- */

static void add_flags(ap_flags *fl) {
    ap_cli_cluster_flags(fl);
    ap_flag *g = ap_flags_get(fl, "gpus");
    if (g) g->help = "GPUs: a count, or a sweep 64..1024 (powers of two) or list 64,128,512 for "
                     "the GPU-count chart (strategies are compared on the first count)";
    ap_flags_add(fl, "trainer", AP_FLAG_VALUE, "T",
                 "megatron|deepspeed|fsdp|torchtitan|colossalai (default megatron)");
    ap_flags_add(fl, "gbs", AP_FLAG_VALUE, "N", "global batch size, sequences (default: 4M tokens)");
    ap_flags_add(fl, "tokens-per-step", AP_FLAG_VALUE, "T",
                 "global batch in tokens (default 4M; --gbs sets sequences instead)");
    ap_flags_add(fl, "seq", AP_FLAG_VALUE, "S",
                 "sequence length, tokens (default: the model's training length)");
    ap_flags_add(fl, "dtype", AP_FLAG_VALUE, "D", "compute precision: bf16|fp16|fp8 (default bf16)");
    ap_flags_add(fl, "fp8-recipe", AP_FLAG_VALUE, "R",
                 "with --dtype fp8: scaling auto|delayed|tensorwise|mxfp8 (default auto: each "
                 "strategy's trainer's)");
    ap_flags_add(fl, "no-flash-attn", AP_FLAG_BOOL, NULL,
                 "attention materialises the s x s score matrix (no FlashAttention)");
    ap_flags_add(fl, "headroom", AP_FLAG_VALUE, "SIZE",
                 "memory kept free on each GPU for a plan to count as fitting (default 2GiB)");
    ap_flags_add(fl, "expandable-segments", AP_FLAG_BOOL, NULL,
                 "the run sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less "
                 "fragmentation in what fits and in nvidia-smi's reading");
    ap_cli_nccl_flag(fl);
    ap_flags_add(fl, "strategies", AP_FLAG_VALUE, "LIST",
                 "compared strategies (default " DEFAULT_STRATEGIES "); also key=value pins "
                 "such as tp=2,pp=4 (';' between two)");
    ap_flags_add(fl, "tokens", AP_FLAG_VALUE, "N", "training tokens (e.g. 2T) for the time to "
                 "train in the GPU-count chart");
    ap_flags_add(fl, "threads", AP_FLAG_VALUE, "N", "worker threads for the searches, the simulated "
                 "stages and plans.csv (default: one per core; the report does not depend on it)");
    ap_flags_add(fl, "out", AP_FLAG_VALUE, "DIR",
                 "directory for report.html, report.md and plans.csv (created if missing)");
}

static ap_status setup(compare_cmd *cc, ap_err *err) {
    ap_flags *fl = &cc->fl;
    ap_status st;
    if (!ap_flags_isset(fl, "out"))
        return ap_err_set(err, AP_ERR_INPUT, "--out DIR is required (where the report goes)");
    if ((st = ap_files_check_dir(ap_flags_value(fl, "out"), "--out", err)) != AP_OK) return st;
    const char *tk = ap_flags_value(fl, "tokens");
    if (tk && (st = ap_parse_count(tk, "--tokens", &cc->tokens, err)) != AP_OK) return st;
    if (tk && !(cc->tokens >= 1)) /* as --tokens-per-step: a fraction of a token is a typo */
        return ap_err_set(err, AP_ERR_INPUT, "--tokens: %g is not a token count", cc->tokens);
    /* as `autoplan plan`: the strategies are compared on the first count; each count of a sweep
     * gets its own cluster later (run_sweep) */
    if ((st = ap_cli_request(fl, &cc->rq, cc->counts, &cc->ncounts, err)) != AP_OK) return st;
    if ((st = ap_request_resolve(&cc->rq, AP_REQUEST_SEARCH, &cc->r, err)) != AP_OK) return st;
    char profile[64], note[320];
    if ((st = ap_cli_profile(fl, &cc->r, profile, note, err)) != AP_OK) return st;
    if (cc->ncounts == 0) {
        cc->counts[0] = cc->r.cluster.gpus;
        cc->ncounts = 1;
    }
    /* the named strategies are compared on uniform stages, as `estimate` prices them without
     * --stage-layers; topN (resolve) and the sweep (ap_report_sweep) re-split as `plan` does */
    cc->r.search.resplit = 0;
    return AP_OK;
}

/* The sweep: for each count the cluster `autoplan plan --gpus <count>` resolves from the same
 * request, then the best plan per count (ap_report_sweep, with plan's default solver). */
static ap_status run_sweep(compare_cmd *cc, ap_report *rep, ap_err *err) {
    if (cc->ncounts < 2 && cc->tokens <= 0) return AP_OK; /* no sweep asked (as `plan`) */
    ap_cluster *cl = calloc((size_t)cc->ncounts, sizeof *cl);
    if (!cl) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    ap_status st = AP_OK;
    for (int i = 0; i < cc->ncounts && st == AP_OK; i++) {
        ap_request rq = cc->rq;
        rq.gpus.given = 1;
        rq.gpus.v = cc->counts[i];
        if ((st = ap_request_cluster(&rq, &cl[i], err)) != AP_OK)
            ap_err_prefix(err, "--gpus %d", cc->counts[i]);
    }
    if (st == AP_OK)
        st = ap_report_sweep(&cc->r.model, cl, cc->ncounts, &cc->r.search, (int)AP_SOLVER_AUTO,
                             cc->tokens, rep, err);
    free(cl);
    return st;
}

/* The report's rows: the space enumerated (and, for the first topN strategy, ranked on the
 * same walk: one pass instead of two, where that ranking is the search's, i.e. a plan fits
 * and the walk was whole; *have_ranked then says *ranked holds it). */
static ap_status enumerate_rows(compare_cmd *cc, const strat_spec *specs, int nspec, ap_report *rep,
                                int *first_top, ap_search_result *ranked, int *have_ranked,
                                ap_err *err) {
    rep->model = &cc->r.model;
    rep->cluster = &cc->r.cluster;
    rep->model_arg = cc->rq.model;
    rep->gbs = cc->r.search.gbs;
    rep->seq = cc->r.search.fixed.seq;
    rep->trainer = (int)cc->r.search.fixed.trainer;
    rep->threads = cc->r.search.threads;
    rep->strat = calloc(MAX_STRATEGIES, sizeof *rep->strat);
    if (!rep->strat) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    *first_top = -1;
    *have_ranked = 0;
    for (int i = 0; i < nspec && *first_top < 0; i++)
        if (specs[i].top > 0) *first_top = i;
    if (*first_top < 0) return ap_report_enumerate(rep->model, rep->cluster, &cc->r.search, rep, err);
    ap_status st = ap_report_enumerate_ranked(rep->model, rep->cluster, &cc->r.search,
                                              specs[*first_top].top, cc->r.partition, rep, ranked,
                                              err);
    if (st == AP_OK) {
        *have_ranked = !rep->eval_capped && ranked->ntop > 0;
        if (!*have_ranked) ap_search_result_free(ranked);
    }
    return st;
}

/* The rest of the report's data: the strategies resolved, the best simulated, the sweep. */
static ap_status finish_report(compare_cmd *cc, strat_spec *specs, int nspec, ap_report *rep,
                               int first_top, ap_search_result *ranked, int have_ranked,
                               ap_err *err) {
    ap_status st = AP_OK;
    for (int i = 0; i < nspec && st == AP_OK; i++)
        st = resolve(cc, &specs[i], i == first_top && have_ranked ? ranked : NULL, rep->strat,
                     &rep->nstrat, MAX_STRATEGIES, err);
    if (st == AP_OK) {
        rep->best = ap_report_pick_best(rep);
        st = ap_report_simulate(rep, NULL, err);
    }
    if (st == AP_OK) st = run_sweep(cc, rep, err);
    return st;
}

static ap_status csv_sink(void *set, const void *data, size_t len, ap_err *err) {
    return ap_outset_write(set, data, len, err);
}

/* The report into --out as one output set (files.h): plans.csv, from the rows alone, is
 * formatted and written on threads of its own while the strategies are resolved and
 * report.html and report.md built. */
static ap_status build_and_write(compare_cmd *cc, strat_spec *specs, int nspec, ap_report *rep,
                                 ap_err *err) {
    static const char *const family[] = {"plans.csv", "report.html", "report.md", NULL};
    const char *dir = ap_flags_value(&cc->fl, "out");
    char *text[2] = {NULL, NULL}; /* report.html, report.md */
    size_t len[2] = {0, 0};
    ap_outset *set = NULL;
    ap_report_csv_job *job = NULL;
    ap_search_result ranked;
    int first_top = -1, have_ranked = 0;
    ap_status st = enumerate_rows(cc, specs, nspec, rep, &first_top, &ranked, &have_ranked, err);
    if (st == AP_OK) st = ap_outset_begin(dir, family, &set, err);
    if (st == AP_OK) st = ap_outset_open(set, family[0], err);
    if (st == AP_OK) st = ap_report_csv_start(rep, csv_sink, set, &job, err);
    if (st == AP_OK) st = finish_report(cc, specs, nspec, rep, first_top, &ranked, have_ranked, err);
    if (have_ranked) ap_search_result_free(&ranked);
    if (st == AP_OK) st = ap_report_html(rep, &text[0], &len[0], err);
    if (st == AP_OK) st = ap_report_markdown(rep, &text[1], &len[1], err);
    /* an error above stops the writing at its next piece */
    ap_status cst = ap_report_csv_finish(job, st != AP_OK, err);
    if (st == AP_OK) st = cst;
    if (st == AP_OK) st = ap_outset_close(set, err);
    for (int i = 0; i < 2 && st == AP_OK; i++)
        st = ap_outset_add(set, family[1 + i], text[i], len[i], err);
    if (st == AP_OK) st = ap_outset_commit(set, err);
    else ap_outset_abort(set);
    if (st == AP_OK) { /* in the order earlier versions printed */
        const char *d = ap_cli_safe(dir);
        printf("wrote %s/report.html\nwrote %s/report.md\nwrote %s/plans.csv\n", d, d, d);
    }
    free(text[0]);
    free(text[1]);
    return st;
}

static void print_summary(const ap_report *rep) {
    if (rep->best >= 0) {
        char lbl[160];
        const ap_report_strategy *b = &rep->strat[rep->best];
        printf("best: %s (%s), %.3f s per step, %.0f tokens/s; %lld plans evaluated, %lld "
               "feasible\n", ap_cli_safe(b->name), ap_plan_label(&b->est.plan, lbl, sizeof lbl),
               b->est.time.step_s, b->est.tp.tokens_per_s, (long long)rep->evaluated,
               (long long)rep->fit);
    } else {
        printf("none of the compared strategies fits; %lld plans evaluated, %lld feasible\n",
               (long long)rep->evaluated, (long long)rep->fit);
    }
}

int ap_cmd_compare(int argc, char **argv) {
    compare_cmd *cc = calloc(1, sizeof *cc);
    strat_spec *specs = calloc(MAX_STRATEGIES, sizeof *specs);
    ap_report rep;
    memset(&rep, 0, sizeof rep);
    ap_err err = {{0}};
    int help = 0, rc = 0, nspec = 0;
    if (!cc || !specs) {
        free(cc);
        free(specs);
        fprintf(stderr, "autoplan: out of memory\n");
        return 1;
    }
    add_flags(&cc->fl);
    ap_status st = ap_flags_parse(&cc->fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&cc->fl, "autoplan compare MODEL --gpus N|A..B|A,B,C --out DIR [flags]",
                            "Compare parallel strategies for one model and cluster: the search's "
                            "top plans and\nbaselines (DDP, ZeRO-3, ZeRO-2 + CPU offload, "
                            "Megatron-style, no pipeline). Writes\nDIR/report.html (charts), "
                            "DIR/report.md and DIR/plans.csv (every feasible plan evaluated).");
        goto out;
    }
    if (st == AP_OK) st = setup(cc, &err);
    if (st == AP_OK) {
        const char *list = ap_flags_value(&cc->fl, "strategies");
        st = parse_strategies(cc, list ? list : DEFAULT_STRATEGIES, specs, &nspec, &err);
    }
    /* the request's note once every flag has been read: an input error stays one line */
    if (st == AP_OK && cc->r.note[0]) fprintf(stderr, "autoplan: %s\n", cc->r.note);
    if (st == AP_OK) st = build_and_write(cc, specs, nspec, &rep, &err);
    if (st != AP_OK) rc = ap_cli_fail(st, &err);
    else print_summary(&rep);
out:
    ap_report_free(&rep);
    free(specs);
    free(cc);
    return rc;
}
