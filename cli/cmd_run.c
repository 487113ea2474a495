/*
 * cmd_run.c - `autoplan run`: execute a plan for real with autoplan's runtime (runtime/,
 * docs/runtime.md) and put what it measures against what autoplan predicts for the same plan.
 *
 *   autoplan run MODEL --gpus N [plan flags] | --plan plan.json  [--steps K] [--json]
 *                [--trace FILE] [--timeout DUR] [--hostfile FILE] [--save FILE] [--seed N]
 *
 * Steps: build the plan (flags, or plan.json whose degrees and options are kept while the
 * trainer becomes the runtime: fp32 on CPU ranks); refuse with one line anything the runtime
 * cannot run, or a plan whose predicted memory exceeds the host, before any rank starts; start
 * N = tp*pp*dp ranks of `autoplan-rank` through mpirun (or take over the ranks of an existing
 * mpirun/srun launch); read rank 0's report; predict memory per rank (the simulator's runtime
 * layout) and time per phase (the cost model with the host figures the ranks measured); print
 * both with their errors, or JSON; write the Chrome trace; store the run in the database
 * (`autoplan db list runs`).
 *
 * Exit codes: 0 ok; 2 bad input or a plan the runtime cannot run (also when a rank refuses its
 * job); 1 a rank failed, the launch failed or timed out (124 for a timeout, as timeout(1)).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "autoplan/db.h"
#include "autoplan/runtime.h"
#include "autoplan/sim.h"

static const char *usage_line =
    "autoplan run MODEL --gpus N [plan flags] | --plan plan.json [--steps K] [--json] "
    "[--trace FILE]";

static const char *description =
    "Train the model for K steps with autoplan's runtime on N CPU ranks (MPI), exactly as the\n"
    "plan says: tensor, pipeline and data parallelism, ZeRO stage, recomputation, optimizer\n"
    "offload. Prints the loss per step, each rank's memory per category against the simulator's\n"
    "prediction, and the time per phase against the cost model's. The runtime computes in fp32\n"
    "(trainer `runtime`, device `cpu`); plan.json files made for GPU trainers run with its\n"
    "degrees and options. Across hosts: --hostfile (mpirun's), or start `autoplan run` itself\n"
    "under mpirun/srun with N ranks. docs/runtime.md.";

static volatile int interrupted;
static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

/* ---- the plan --------------------------------------------------------------------------------- */

/* The flags `run` takes from `estimate` (ap_cli_cluster_flags, ap_cli_plan_flags) that it
 * cannot honour are refused, not ignored: the ranks run on this host's CPUs and the time is
 * priced with the figures they measure (ap_rt_cluster), so no cluster, kernel profile or
 * headroom enters; the runtime's attention materialises its scores. */
static ap_status refuse_unused_flags(ap_flags *fl, ap_err *err) {
    /* every cluster flag but the rank count and the GPU type (the cluster table itself, so a
       flag added there is covered), and the headroom */
    static const char *const keep[] = {"gpus", "gpu", NULL};
    const char *host = ap_cli_set_flag(fl, 0, keep);
    if (!host && ap_flags_isset(fl, "headroom")) host = "headroom";
    if (host)
        return ap_err_set(err, AP_ERR_INPUT, "--%s: autoplan run measures the host its ranks run "
                          "on (cluster, profile and headroom flags are for plan and estimate)",
                          host);
    const char *attn = ap_flags_value(fl, "attn-impl");
    if (attn && strcmp(attn, "auto") != 0 && strcmp(attn, "unfused") != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: the runtime's attention "
                          "materialises its scores (unfused)", attn);
    return AP_OK;
}

static ap_status plan_from_file(ap_flags *fl, const char *path, ap_resolved *ctx, ap_err *err) {
    /* --gpus is checked against the file below; the cluster, profile and headroom flags were
       refused already (refuse_unused_flags) */
    static const char *const keep[] = {"gpus", "expandable-segments", NULL};
    ap_status st = ap_cli_refuse_with_plan(fl, keep, "the plan", err);
    if (st != AP_OK) return st;
    if (fl->npos > 0)
        return ap_err_set(err, AP_ERR_INPUT, "give MODEL or --plan, not both (plan.json holds "
                          "the model)");
    st = ap_planfile_read(path, &ctx->model, &ctx->cluster, &ctx->plan, NULL, err);
    if (st != AP_OK) return st;
    int64_t gpus = 0;
    if ((st = ap_flag_int(fl, "gpus", 1, 1 << 20, &gpus, err)) != AP_OK) return st;
    int need = ctx->plan.tp * ctx->plan.pp * ctx->plan.cp * ctx->plan.dp;
    if (gpus > 0 && gpus != need)
        return ap_err_set(err, AP_ERR_INPUT, "--gpus %lld: %s runs on tp*pp*cp*dp = %d ranks",
                          (long long)gpus, path, need);
    /* A GPU trainer's placement the runtime can run as plain fractions: Gemini static with the
       parameters fully sharded (its fractions are the plan's offload fractions) and DeepSpeed's
       CPU offload; what decides at run time or needs NVMe is refused. */
    ap_plan_hetero *h = &ctx->plan.hetero;
    if (h->placement == AP_GEMINI_AUTO)
        return ap_err_set(err, AP_ERR_INPUT, "%s: Gemini's auto placement moves chunks at run "
                          "time; the runtime runs fixed offload fractions", path);
    if (h->placement == AP_GEMINI_STATIC && h->shard_param_frac < 1)
        return ap_err_set(err, AP_ERR_INPUT, "%s: Gemini shard_param_frac %g; the runtime shards "
                          "all parameters with ZeRO-3", path, h->shard_param_frac);
    if (h->ds_optimizer == AP_OFFLOAD_DEV_NVME || h->ds_params == AP_OFFLOAD_DEV_NVME)
        return ap_err_set(err, AP_ERR_INPUT, "%s: NVMe offload is not implemented by the runtime "
                          "(host memory is)", path);
    memset(h, 0, sizeof *h); /* plain fractions, as ap_plan_init leaves them */
    if (ctx->plan.trainer != AP_TRAINER_RUNTIME)
        fprintf(stderr, "autoplan run: %s targets %s on %s; running its degrees and options with "
                "the runtime (fp32 on CPU ranks)\n", path, ap_trainer_name(ctx->plan.trainer),
                ctx->cluster.gpu.name);
    return AP_OK;
}

static ap_status plan_from_flags(ap_flags *fl, ap_resolved *ctx, ap_err *err) {
    const char *t = ap_flags_value(fl, "trainer");
    if (t && strcmp(t, "runtime") != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--trainer %s: autoplan run executes with its own "
                          "runtime (trainer runtime); other trainers are for plan and estimate", t);
    if (ap_flags_isset(fl, "dtype"))
        return ap_err_set(err, AP_ERR_INPUT, "--dtype: the runtime computes in fp32");
    const char *g = ap_flags_value(fl, "gpu");
    if (g && strcmp(g, "cpu") != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--gpu %s: autoplan run executes on CPU ranks "
                          "(device cpu)", g);
    if (ap_flags_isset(fl, "overlap"))
        return ap_err_set(err, AP_ERR_INPUT, "--overlap: the runtime does not overlap "
                          "communication with compute");
    /* the plan flags as `estimate` reads them (degrees not given are 1, dp derived); the
       trainer becomes the runtime after (only --overlap, refused above, depends on it) */
    static ap_request rq;
    ap_status st = ap_cli_request(fl, &rq, NULL, NULL, err);
    if (st == AP_OK) st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, ctx, err);
    if (st != AP_OK) return st;
    ctx->plan.trainer = AP_TRAINER_RUNTIME;
    return AP_OK;
}

/* ---- host memory --------------------------------------------------------------------------- */

/* MemAvailable from /proc/meminfo (Linux), else the physical memory. */
static double host_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            unsigned long long kb;
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                fclose(f);
                return (double)kb * 1024.0;
            }
        }
        fclose(f);
    }
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : 0;
}

/* ---- finding the programs ------------------------------------------------------------------- */

static int rank_binary(char *out, size_t n) {
    const char *env = getenv("AUTOPLAN_RANK");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, X_OK) == 0;
    }
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 0;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return 0;
    *slash = '\0';
    snprintf(out, n, "%s/autoplan-rank", self);
    return access(out, X_OK) == 0;
}

/* The first failing rank's own lines ("autoplan-rank: ..."), else the launcher's last line. */
static void report_failure(const ap_rt_launch_result *r, double timeout_s, char *msg, size_t n) {
    const char *t = r->errtext ? r->errtext : "";
    const char *hit = strstr(t, "autoplan-rank: ");
    if (hit) {
        hit += strlen("autoplan-rank: ");
        size_t len = strcspn(hit, "\n");
        snprintf(msg, n, "%.*s", (int)len, hit);
        return;
    }
    if (r->timed_out) {
        snprintf(msg, n, "the ranks did not finish within --timeout %.0f s; stopped", timeout_s);
        return;
    }
    if (strstr(t, "autoplan run: cannot start")) {
        snprintf(msg, n, "cannot start mpirun (install openmpi-bin, or set AUTOPLAN_MPIRUN): %s",
                 strstr(t, "cannot start") + 13);
        msg[strcspn(msg, "\n")] = '\0';
        return;
    }
    /* the last non-empty line of the launcher */
    const char *last = NULL, *p = t;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && strspn(p, " -\t") < len) last = p;
        p += len + (e ? 1 : 0);
    }
    if (last) snprintf(msg, n, "the ranks failed (exit %d): %.*s", r->exit_code,
                       (int)strcspn(last, "\n"), last);
    else snprintf(msg, n, "the ranks failed (exit %d) without a message", r->exit_code);
}

/* ---- output ------------------------------------------------------------------------------------- */

static double rel_err(double meas, double pred) {
    if (pred == 0 && meas == 0) return 0;
    if (pred == 0) return INFINITY;
    return (meas - pred) / pred;
}

static ap_json *cat_json(const int64_t *cat, const int64_t *cat_peak, int64_t peak,
                         int64_t host) {
    ap_json *o = ap_json_new_object(), *mx = ap_json_new_object();
    int ok = o && mx && ap_json_add_number(o, "peak_bytes", (double)peak) == AP_OK;
    for (int c = 0; ok && c < AP_RT_NCAT; c++) {
        char k[48];
        snprintf(k, sizeof k, "%s_bytes", ap_rt_category_name(c));
        ok = ap_json_add_number(o, k, (double)cat[c]) == AP_OK &&
             ap_json_add_number(mx, k, (double)cat_peak[c]) == AP_OK;
    }
    if (ok) ok = ap_json_add(o, "category_peaks", mx) == AP_OK;
    else ap_json_free(mx);
    if (ok) ok = ap_json_add_number(o, "host_peak_bytes", (double)host) == AP_OK;
    if (!ok) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

static ap_json *phase_json(const ap_rt_phase_times *t) {
    ap_json *o = ap_json_new_object();
    if (!o || ap_json_add_number(o, "forward_s", t->forward_s) != AP_OK ||
        ap_json_add_number(o, "backward_s", t->backward_s) != AP_OK ||
        ap_json_add_number(o, "comm_s", t->comm_s) != AP_OK ||
        ap_json_add_number(o, "optimizer_s", t->optimizer_s) != AP_OK ||
        ap_json_add_number(o, "step_s", t->step_s) != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

/* Each phase's maximum over ranks (the step waits for the slowest). */
static void max_phases(const ap_rt_report *r, const ap_rt_prediction *pr, ap_rt_phase_times *m,
                       ap_rt_phase_times *p) {
    memset(m, 0, sizeof *m);
    memset(p, 0, sizeof *p);
    for (int i = 0; i < r->nranks; i++) {
        const ap_rt_phase_times *a = &r->ranks[i].time;
        const ap_rt_phase_times *b = &pr->stages[r->ranks[i].stage].time;
        m->forward_s = fmax(m->forward_s, a->forward_s);
        m->backward_s = fmax(m->backward_s, a->backward_s);
        m->comm_s = fmax(m->comm_s, a->comm_s);
        m->optimizer_s = fmax(m->optimizer_s, a->optimizer_s);
        m->step_s = fmax(m->step_s, a->step_s);
        p->forward_s = fmax(p->forward_s, b->forward_s);
        p->backward_s = fmax(p->backward_s, b->backward_s);
        p->comm_s = fmax(p->comm_s, b->comm_s);
        p->optimizer_s = fmax(p->optimizer_s, b->optimizer_s);
        p->step_s = fmax(p->step_s, b->step_s);
    }
}

static ap_json *run_json(const ap_resolved *ctx, const ap_rt_report *r, const ap_rt_prediction *pr,
                         int events, int64_t run_id) {
    ap_json *root = ap_json_new_object(), *loss = ap_json_new_array(), *ranks = ap_json_new_array();
    char lbl[160];
    int ok = root && loss && ranks &&
             ap_json_add_string(root, "model", ctx->model.name) == AP_OK &&
             ap_json_add_string(root, "plan", ap_plan_label(&ctx->plan, lbl, sizeof lbl)) == AP_OK &&
             ap_json_add_string(root, "backend", r->backend) == AP_OK &&
             ap_json_add_string(root, "host", r->host) == AP_OK &&
             ap_json_add_number(root, "steps", r->steps) == AP_OK;
    for (int i = 0; ok && i < r->steps; i++) ok = ap_json_push(loss, ap_json_new_number(r->loss[i])) == AP_OK;
    if (ok) ok = ap_json_add(root, "loss", loss) == AP_OK;
    else ap_json_free(loss);
    for (int i = 0; ok && i < r->nranks; i++) {
        const ap_rt_rank_report *k = &r->ranks[i];
        const ap_rt_stage_prediction *s = &pr->stages[k->stage];
        ap_json *o = ap_json_new_object();
        ap_json *me = cat_json(k->peak_cat_bytes, k->cat_peak_bytes, k->peak_bytes,
                               k->host_peak_bytes);
        ap_json *pe = cat_json(s->peak_cat_bytes, s->cat_peak_bytes, s->peak_bytes,
                               s->host_peak_bytes);
        ap_json *tm = ap_json_new_object();
        ok = o && me && pe && tm && ap_json_add_number(o, "rank", k->rank) == AP_OK &&
             ap_json_add_number(o, "stage", k->stage) == AP_OK &&
             ap_json_add_number(o, "tp_rank", k->tp_rank) == AP_OK &&
             ap_json_add_number(o, "dp_rank", k->dp_rank) == AP_OK &&
             ap_json_add_number(me, "rss_peak_bytes", (double)k->rss_peak_bytes) == AP_OK &&
             ap_json_add_number(me, "d2h_bytes", (double)k->d2h_bytes) == AP_OK &&
             ap_json_add_number(me, "h2d_bytes", (double)k->h2d_bytes) == AP_OK &&
             ap_json_add(o, "measured", me) == AP_OK;
        if (!ok) {
            ap_json_free(me);
            ap_json_free(pe);
            ap_json_free(tm);
            ap_json_free(o);
            break;
        }
        ok = ap_json_add(o, "predicted", pe) == AP_OK;
        if (!ok) ap_json_free(pe);
        ap_json *tmm = phase_json(&k->time), *tmp = pr->time_predicted ? phase_json(&s->time) : NULL;
        ok = ok && tmm && ap_json_add(tm, "measured", tmm) == AP_OK;
        if (ok && tmp) ok = ap_json_add(tm, "predicted", tmp) == AP_OK;
        else ap_json_free(tmp);
        if (ok) ok = ap_json_add(o, "time", tm) == AP_OK;
        else ap_json_free(tm);
        if (ok && events) {
            ap_json *ev = ap_json_new_array();
            for (int e = 0; ev && ok && e < k->nevents; e++) {
                const ap_rt_event *x = &k->events[e];
                ap_json *a = ap_json_new_array();
                ok = a && ap_json_push(a, ap_json_new_number((double)x->bytes)) == AP_OK &&
                     ap_json_push(a, ap_json_new_string(ap_sim_kind_name(x->kind))) == AP_OK &&
                     ap_json_push(a, ap_json_new_string(ap_rt_category_name(x->cat))) == AP_OK &&
                     ap_json_push(a, ap_json_new_number(x->is_free)) == AP_OK &&
                     ap_json_push(ev, a) == AP_OK;
            }
            ok = ok && ev && ap_json_add(o, "events", ev) == AP_OK;
        }
        if (!ok || ap_json_push(ranks, o) != AP_OK) {
            ap_json_free(o);
            ok = 0;
        }
    }
    if (ok) ok = ap_json_add(root, "ranks", ranks) == AP_OK;
    else ap_json_free(ranks);
    ap_rt_phase_times mt, pt;
    max_phases(r, pr, &mt, &pt);
    ap_json *time = ap_json_new_object(), *tm = phase_json(&mt);
    ok = ok && time && tm && ap_json_add(time, "measured", tm) == AP_OK;
    if (ok && pr->time_predicted) {
        ap_json *tp = phase_json(&pt);
        ok = tp && ap_json_add(time, "predicted", tp) == AP_OK;
    }
    if (ok) ok = ap_json_add(root, "time", time) == AP_OK;
    ap_json *h = ap_json_new_object();
    const ap_rt_host_figures *f = &r->hostfig;
    ok = ok && h && ap_json_add_bool(h, "measured", f->measured) == AP_OK &&
         ap_json_add_number(h, "gemm_flops_per_s", f->gemm_flops_per_s) == AP_OK &&
         ap_json_add_number(h, "gemm_half_flops", f->gemm_half_flops) == AP_OK &&
         ap_json_add_number(h, "attn_flops_per_s", f->attn_flops_per_s) == AP_OK &&
         ap_json_add_number(h, "mem_bytes_per_s", f->mem_bytes_per_s) == AP_OK &&
         ap_json_add_number(h, "p2p_latency_s", f->p2p_latency_s) == AP_OK &&
         ap_json_add_number(h, "p2p_bytes_per_s", f->p2p_bytes_per_s) == AP_OK &&
         ap_json_add(root, "host_figures", h) == AP_OK;
    if (ok && run_id > 0) ok = ap_json_add_number(root, "run_id", (double)run_id) == AP_OK;
    if (!ok) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}

static void print_text(const ap_resolved *ctx, const ap_rt_report *r, const ap_rt_prediction *pr) {
    char b1[32], b2[32], b3[32], b4[32], lbl[160];
    const ap_plan *p = &ctx->plan;
    printf("autoplan run: %s, %s, %d ranks (%s), %d steps of %lld x %lld tokens\n",
           ctx->model.name, ap_plan_label(p, lbl, sizeof lbl), r->nranks, r->backend, r->steps,
           (long long)p->gbs, (long long)p->seq);
    const ap_rt_host_figures *f = &r->hostfig;
    if (f->measured)
        printf("host %s (measured): GEMM %.1f GFLOP/s (half of it at %.2g FLOP), memory %.1f GB/s, "
               "p2p %.1f us and %.2f GB/s\n", r->host, f->gemm_flops_per_s / 1e9,
               f->gemm_half_flops, f->mem_bytes_per_s / 1e9, f->p2p_latency_s * 1e6,
               f->p2p_bytes_per_s / 1e9);
    printf("\n  step        loss\n");
    for (int i = 0; i < r->steps; i++) printf("  %4d  %10.6f\n", i + 1, r->loss[i]);
    printf("\nmemory per rank: allocated peak, measured vs the simulator's prediction\n");
    printf("  %4s %5s %3s %3s %12s %12s %8s  %-24s %11s %11s\n", "rank", "stage", "tp", "dp",
           "measured", "predicted", "error", "largest category error", "host pool", "RSS");
    for (int i = 0; i < r->nranks; i++) {
        const ap_rt_rank_report *k = &r->ranks[i];
        const ap_rt_stage_prediction *s = &pr->stages[k->stage];
        int worst = 0;
        double we = 0;
        for (int c = 0; c < AP_RT_NCAT; c++) {
            double e = fabs(rel_err((double)k->peak_cat_bytes[c], (double)s->peak_cat_bytes[c]));
            if (e > we) {
                we = e;
                worst = c;
            }
        }
        char cat[40];
        if (we > 0)
            snprintf(cat, sizeof cat, "%s %+.2f%%", ap_rt_category_name(worst),
                     100.0 * rel_err((double)k->peak_cat_bytes[worst],
                                     (double)s->peak_cat_bytes[worst]));
        else
            snprintf(cat, sizeof cat, "none (all exact)");
        printf("  %4d %5d %3d %3d %12s %12s %+7.2f%%  %-24s %11s %11s\n", k->rank, k->stage,
               k->tp_rank, k->dp_rank, ap_fmt_bytes((double)k->peak_bytes, b1, sizeof b1),
               ap_fmt_bytes((double)s->peak_bytes, b2, sizeof b2),
               100.0 * rel_err((double)k->peak_bytes, (double)s->peak_bytes), cat,
               ap_fmt_bytes((double)k->host_peak_bytes, b3, sizeof b3),
               ap_fmt_bytes((double)k->rss_peak_bytes, b4, sizeof b4));
    }
    ap_rt_phase_times mt, pt;
    max_phases(r, pr, &mt, &pt);
    printf("\ntime per step, slowest rank: measured vs the cost model with the host figures\n");
    printf("  %-10s %11s %11s %8s\n", "phase", "measured", "predicted", "error");
    const char *names[] = {"forward", "backward", "comm", "optimizer", "step"};
    double mv[] = {mt.forward_s, mt.backward_s, mt.comm_s, mt.optimizer_s, mt.step_s};
    double pv[] = {pt.forward_s, pt.backward_s, pt.comm_s, pt.optimizer_s, pt.step_s};
    for (int i = 0; i < 5; i++) {
        if (pr->time_predicted && pv[i] <= 0) /* nothing to communicate on one rank */
            printf("  %-10s %11s %11s %8s\n", names[i], ap_fmt_seconds(mv[i], b1, sizeof b1),
                   ap_fmt_seconds(pv[i], b2, sizeof b2), "-");
        else if (pr->time_predicted)
            printf("  %-10s %11s %11s %+7.0f%%\n", names[i], ap_fmt_seconds(mv[i], b1, sizeof b1),
                   ap_fmt_seconds(pv[i], b2, sizeof b2), 100.0 * rel_err(mv[i], pv[i]));
        else
            printf("  %-10s %11s %11s\n", names[i], ap_fmt_seconds(mv[i], b1, sizeof b1), "-");
    }
}

/* ---- the database -------------------------------------------------------------------------------- */

static int64_t store_run(ap_flags *fl, const ap_resolved *ctx, const ap_rt_report *r,
                         const ap_rt_prediction *pr) {
    if (ap_flags_isset(fl, "no-db")) return 0;
    ap_err err = {{0}};
    ap_db *db = NULL;
    if (ap_db_open(ap_flags_value(fl, "db"), 0, &db, &err) != AP_OK) {
        ap_log(AP_LOG_WARN, "%s; the run was not stored", err.msg);
        return 0;
    }
    ap_cluster c;
    ap_rt_cluster(r->nranks, &r->hostfig, &c);
    ap_json *pj = ap_planfile_to_json(&ctx->model, &c, &ctx->plan, NULL);
    char *text = pj ? ap_json_print(pj, 0) : NULL;
    ap_json_free(pj);
    ap_db_run run;
    memset(&run, 0, sizeof run);
    run.plan_json = text ? text : "{}";
    snprintf(run.host, sizeof run.host, "%s", r->host);
    snprintf(run.backend, sizeof run.backend, "%s", r->backend);
    run.ranks = r->nranks;
    ap_db_run_rank *rows = calloc((size_t)r->nranks, sizeof *rows);
    int64_t id = 0;
    if (rows) {
        ap_rt_phase_times mt, pt;
        max_phases(r, pr, &mt, &pt);
        run.measured_step_s = mt.step_s;
        run.predicted_step_s = pr->time_predicted ? pt.step_s : 0;
        for (int i = 0; i < r->nranks; i++) {
            const ap_rt_rank_report *k = &r->ranks[i];
            const ap_rt_stage_prediction *s = &pr->stages[k->stage];
            rows[i].rank = k->rank;
            rows[i].measured_step_s = k->time.step_s;
            rows[i].predicted_step_s = pr->time_predicted ? s->time.step_s : 0;
            rows[i].measured_peak_bytes = (double)k->peak_bytes;
            rows[i].predicted_peak_bytes = (double)s->peak_bytes;
            run.measured_peak_bytes = fmax(run.measured_peak_bytes, (double)k->peak_bytes);
            run.predicted_peak_bytes = fmax(run.predicted_peak_bytes, (double)s->peak_bytes);
        }
        if (ap_db_run_insert(db, &run, rows, (size_t)r->nranks, &id, &err) != AP_OK) {
            ap_log(AP_LOG_WARN, "%s; the run was not stored", err.msg);
            id = 0;
        }
    }
    free(rows);
    free(text);
    ap_db_close(db);
    return id;
}

/* ---- the command ------------------------------------------------------------------------------ */

static void add_flags(ap_flags *fl) {
    ap_cli_cluster_flags(fl);
    ap_cli_plan_flags(fl);
    ap_flags_add(fl, "plan", AP_FLAG_VALUE, "FILE",
                 "run the plan in plan.json (its model and degrees; the runtime's layout)");
    ap_flags_add(fl, "steps", AP_FLAG_VALUE, "K", "optimizer steps (default 5)");
    ap_flags_add(fl, "backend", AP_FLAG_VALUE, "B",
                 "cpu (OpenBLAS, default) or cuda (cuBLAS + NCCL, one rank per GPU; builds with "
                 "CUDA only)");
    ap_flags_add(fl, "seed", AP_FLAG_VALUE, "N", "seed of the initialisation and data (1234)");
    ap_flags_add(fl, "json", AP_FLAG_BOOL, NULL, "print the result as JSON");
    ap_flags_add(fl, "no-bench", AP_FLAG_BOOL, NULL,
                 "skip the host benchmark (~0.3 s): no time prediction");
    ap_flags_add(fl, "events", AP_FLAG_BOOL, NULL,
                 "with --json: every tracked allocation and free of each rank's setup and last "
                 "step");
    ap_flags_add(fl, "trace", AP_FLAG_VALUE, "FILE",
                 "write the last step's timeline as a Chrome trace (ui.perfetto.dev)");
    ap_flags_add(fl, "timeout", AP_FLAG_VALUE, "DUR",
                 "stop the ranks after this long, e.g. 90s or 10m (default 10m)");
    ap_flags_add(fl, "hostfile", AP_FLAG_VALUE, "FILE", "mpirun hostfile: ranks across hosts");
    ap_flags_add(fl, "save", AP_FLAG_VALUE, "FILE",
                 "write the trained parameters (canonical layout, float32; rank 0's host)");
    ap_flags_add(fl, "db", AP_FLAG_VALUE, "PATH", "database to store the run in");
    ap_flags_add(fl, "no-db", AP_FLAG_BOOL, NULL, "do not store the run");
}

/* ---- paths checked before the ranks start -------------------------------------------------- */

/* mpirun's hostfile: a regular file this process can read with at least one host line. mpirun
 * itself reports an empty file or a device with a message cut to its last line, and a directory
 * with its parser's "input in flex scanner failed". */
static ap_status check_hostfile(const char *path, ap_err *err) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: is a directory, not a file of hosts",
                          path);
    if (!S_ISREG(sb.st_mode))
        return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: is not a regular file (a file of "
                          "hosts, one per line)", path);
    FILE *f = fopen(path, "r");
    if (!f) return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: %s", path, strerror(errno));
    char line[1024];
    int hosts = 0;
    while (!hosts && fgets(line, sizeof line, f)) {
        const char *c = line + strspn(line, " \t\r\n");
        hosts = *c && *c != '#'; /* mpirun skips blank lines and comments */
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: cannot read it", path);
    if (!hosts)
        return ap_err_set(err, AP_ERR_INPUT, "--hostfile %s: names no host (one per line, "
                          "e.g. 'node1 slots=8')", path);
    return AP_OK;
}

/* Fault injection for the tests: AUTOPLAN_RUN_FAIL=RANK:N fails RANK's N-th allocation. */
static void fault_from_env(ap_rt_job *job) {
    const char *f = getenv("AUTOPLAN_RUN_FAIL");
    int r = 0;
    long long n = 0;
    if (f && sscanf(f, "%d:%lld", &r, &n) == 2 && r >= 0 && n > 0) {
        job->fail_rank = r;
        job->fail_alloc = n;
    }
}

static int finish(int rc, ap_rt_launch_result *lr, ap_rt_report *rep) {
    ap_rt_launch_result_free(lr);
    ap_rt_report_free(rep);
    return rc;
}

/* The job's options besides the plan: steps, seed, timeout, parameters to save, benchmark,
 * backend, trace, events, the fault hook, the hostfile. */
static ap_status job_options(ap_flags *fl, ap_rt_job *job, double *timeout_s, ap_err *err) {
    int64_t v = job->steps;
    ap_status st = ap_flag_int(fl, "steps", 1, 100000, &v, err);
    if (st != AP_OK) return st;
    job->steps = (int)v;
    v = (int64_t)job->seed;
    if ((st = ap_flag_int(fl, "seed", 0, INT64_MAX, &v, err)) != AP_OK) return st;
    job->seed = (uint64_t)v;
    *timeout_s = 600;
    const char *to = ap_flags_value(fl, "timeout");
    if (to && (st = ap_parse_duration(to, "--timeout", timeout_s, err)) != AP_OK) return st;
    if (*timeout_s < 1 || *timeout_s > 7 * 86400.0)
        return ap_err_set(err, AP_ERR_INPUT, "--timeout: %s is not between 1s and 7d", to);
    const char *save = ap_flags_value(fl, "save");
    if (save && snprintf(job->save_path, sizeof job->save_path, "%s", save) >=
                    (int)sizeof job->save_path)
        return ap_err_set(err, AP_ERR_INPUT, "--save: path too long");
    job->bench = !ap_flags_isset(fl, "no-bench");
    const char *backend = ap_flags_value(fl, "backend");
    if (backend && strcmp(backend, "cpu") && strcmp(backend, "cuda"))
        return ap_err_set(err, AP_ERR_INPUT, "--backend: '%s' is not cpu or cuda", backend);
    if (backend) snprintf(job->backend, sizeof job->backend, "%s", backend);
    if (ap_flags_isset(fl, "expandable-segments"))
        return ap_err_set(err, AP_ERR_INPUT, "--expandable-segments: the runtime allocates its "
                          "own buffers (no PyTorch caching allocator)");
    if (ap_flags_isset(fl, "nccl-version"))
        return ap_err_set(err, AP_ERR_INPUT, "--nccl-version: the runtime's ranks talk over MPI "
                          "(no NCCL)");
    job->trace = ap_flags_isset(fl, "trace");
    job->record_events = ap_flags_isset(fl, "events");
    if (job->record_events && !ap_flags_isset(fl, "json"))
        return ap_err_set(err, AP_ERR_INPUT, "--events: only with --json");
    fault_from_env(job);
    const char *hostfile = ap_flags_value(fl, "hostfile");
    if (hostfile && (st = check_hostfile(hostfile, err)) != AP_OK) return st;
    /* the outputs, where they are written: the trace by this process (rank 0 of an existing
       launch); the parameters by rank 0, on this host unless a hostfile places it elsewhere */
    int lrank = 0, lsize = 0, launched = ap_rt_launched_rank(&lrank, &lsize);
    const char *trace = ap_flags_value(fl, "trace");
    if (trace && lrank == 0 && (st = ap_cli_check_out_path("--trace", trace, err)) != AP_OK)
        return st;
    if (save && !hostfile && !launched &&
        (st = ap_cli_check_out_path("--save", save, err)) != AP_OK)
        return st;
    if ((st = ap_cli_check_not_db(fl, "--trace", trace, err)) != AP_OK) return st;
    return ap_cli_check_not_db(fl, "--save", save, err);
}

/* The plan and options as the job the ranks run; refused (one line) before any rank starts. */
static ap_status make_job(ap_flags *fl, ap_resolved *ctx, ap_rt_job *job, double *timeout_s,
                          ap_err *err) {
    const char *planfile = ap_flags_value(fl, "plan");
    ap_status st = refuse_unused_flags(fl, err);
    if (st != AP_OK) return st;
    st = planfile ? plan_from_file(fl, planfile, ctx, err) : plan_from_flags(fl, ctx, err);
    if (st != AP_OK) return st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st;
    ap_rt_job_init(job);
    job->model = ctx->model;
    job->plan = ctx->plan;
    job->plan.trainer = AP_TRAINER_RUNTIME;
    job->plan.dtype = AP_DTYPE_FP32;
    job->plan.flash_attn = 0;
    job->plan.overlap_grad = job->plan.overlap_param = job->plan.overlap_tp = 0;
    ctx->plan = job->plan;
    if ((st = job_options(fl, job, timeout_s, err)) != AP_OK) return st;
    return ap_rt_check(&job->model, &job->plan, err);
}

/* A launch on this host: the ranks' predicted memory must fit what the host has available. */
static ap_status check_host_memory(const ap_rt_job *job, const ap_rt_prediction *pred,
                                   ap_err *err) {
    int ranks = job->plan.tp * job->plan.pp * job->plan.dp;
    double need = 0;
    for (int r = 0; r < ranks; r++) {
        int stage = r / (job->plan.tp * job->plan.dp);
        need += (double)(pred->stages[stage].peak_bytes + pred->stages[stage].host_peak_bytes);
    }
    double avail = host_available_bytes();
    if (avail > 0 && need > 0.9 * avail) {
        char b1[32], b2[32];
        return ap_err_set(err, AP_ERR_INPUT, "the %d ranks need %s (predicted), this host has %s "
                          "available", ranks, ap_fmt_bytes(need, b1, sizeof b1),
                          ap_fmt_bytes(avail, b2, sizeof b2));
    }
    return AP_OK;
}

/* Start the ranks with the job and wait for them; SIGINT and SIGTERM stop them. */
static ap_status launch_ranks(const ap_rt_job *job, const char *hostfile, double timeout_s,
                              ap_rt_launch_result *lr, ap_err *err) {
    memset(lr, 0, sizeof *lr);
    char rankbin[PATH_MAX + 32];
    if (!rank_binary(rankbin, sizeof rankbin))
        return ap_err_set(err, AP_ERR_IO, "the worker %s is missing: the runtime was not built "
                          "(configure with libopenblas-dev and libopenmpi-dev installed)",
                          rankbin);
    ap_json *jj = ap_rt_job_to_json(job);
    char *jobtext = jj ? ap_json_print(jj, 0) : NULL;
    ap_json_free(jj);
    if (!jobtext) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    char tag[64];
    snprintf(tag, sizeof tag, "autoplan-run-%ld", (long)getpid());
    const char *mpirun = getenv("AUTOPLAN_MPIRUN");
    ap_rt_launch_opts lo = {job->plan.tp * job->plan.pp * job->plan.dp, rankbin,
                            mpirun && *mpirun ? mpirun : "mpirun", hostfile, timeout_s, tag,
                            &interrupted};
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    ap_status st = ap_rt_launch(&lo, jobtext, lr, err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(jobtext);
    return st;
}

/* The exit code of a launch that did not end with a report: interrupted, timed out, a rank
 * failed (its message on stderr); -1 when the ranks finished. */
static int launch_failed(const ap_rt_launch_result *lr, double timeout_s) {
    if (lr->cancelled) {
        fprintf(stderr, "autoplan: run: interrupted; the ranks were stopped\n");
        return 130;
    }
    if (lr->exit_code != 0 || lr->timed_out) {
        char msg[400];
        report_failure(lr, timeout_s, msg, sizeof msg);
        fprintf(stderr, "autoplan: run: %s\n", msg);
        return lr->timed_out ? 124 : lr->exit_code == 2 ? 2 : 1;
    }
    return -1;
}

/* Rank 0's report, the prediction with the measured host figures, the trace, the database row
 * and the output; returns the exit code. */
static int report_run(ap_flags *fl, const ap_resolved *ctx, const ap_rt_job *job,
                      ap_rt_prediction *pred, const ap_rt_launch_result *lr, ap_rt_report *rep) {
    ap_err err = {{0}};
    size_t len = 0;
    const char *text = ap_rt_result_text(lr->out, &len);
    ap_json *rj = text ? ap_json_parse(text, len, "the ranks' report", &err) : NULL;
    if (!text) ap_err_set(&err, AP_ERR_INTERNAL, "the ranks finished without a report");
    ap_status st = rj ? ap_rt_report_from_json(rj, "the ranks' report", rep, &err)
                      : AP_ERR_INTERNAL;
    ap_json_free(rj);
    if (st != AP_OK) return ap_cli_fail(AP_ERR_INTERNAL, &err);
    /* time is predicted for CPU ranks (the cpu device with the measured figures); a GPU run's
       memory prediction is the same layout's, its time is measured only */
    if (rep->hostfig.measured && !strcmp(job->backend, "cpu") &&
        ap_rt_predict(&job->model, &job->plan, &rep->hostfig, pred, &err) != AP_OK)
        ap_log(AP_LOG_WARN, "no time prediction: %s", err.msg);
    const char *trace = ap_flags_value(fl, "trace");
    if (trace && (st = ap_rt_trace_write(rep, trace, &err)) != AP_OK) return ap_cli_fail(st, &err);
    int64_t id = store_run(fl, ctx, rep, pred);
    if (ap_flags_isset(fl, "json")) {
        ap_json *out = run_json(ctx, rep, pred, job->record_events, id);
        char *s = out ? ap_json_print(out, 1) : NULL;
        ap_json_free(out);
        if (!s) return ap_cli_fail(ap_err_set(&err, AP_ERR_NOMEM, "out of memory"), &err);
        printf("%s\n", s);
        free(s);
    } else {
        print_text(ctx, rep, pred);
        if (trace) printf("\ntrace written to %s (open in ui.perfetto.dev)\n", trace);
        if (id > 0) printf("\nstored as run:%lld (autoplan db show run:%lld)\n", (long long)id,
                           (long long)id);
    }
    return 0;
}

int ap_cmd_run(int argc, char **argv) {
    static ap_flags fl;
    static ap_resolved ctx;
    static ap_rt_job job;
    static ap_rt_prediction pred;
    ap_err err = {{0}};
    int help = 0;
    memset(&fl, 0, sizeof fl);
    memset(&ctx, 0, sizeof ctx);
    add_flags(&fl);
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, usage_line, description);
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    /* the job, refused before any rank starts when the runtime cannot run it */
    double timeout_s = 600;
    if ((st = make_job(&fl, &ctx, &job, &timeout_s, &err)) != AP_OK) return ap_cli_fail(st, &err);
    if ((st = ap_rt_predict(&job.model, &job.plan, NULL, &pred, &err)) != AP_OK)
        return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    const char *hostfile = ap_flags_value(&fl, "hostfile");
    int lrank = 0, lsize = 0;
    if (!hostfile && !ap_rt_launched_rank(&lrank, &lsize) &&
        (st = check_host_memory(&job, &pred, &err)) != AP_OK)
        return ap_cli_fail(st, &err);
    /* the ranks */
    ap_rt_launch_result lr;
    ap_rt_report rep;
    memset(&rep, 0, sizeof rep);
    st = launch_ranks(&job, hostfile, timeout_s, &lr, &err);
    int rc = st != AP_OK ? ap_cli_fail(st, &err) : launch_failed(&lr, timeout_s);
    if (rc < 0) /* rank 0 reports (in a launch by mpirun/srun, the others print nothing) */
        rc = lr.direct && lr.launch_rank != 0 ? 0 : report_run(&fl, &ctx, &job, &pred, &lr, &rep);
    return finish(rc, &lr, &rep);
}
