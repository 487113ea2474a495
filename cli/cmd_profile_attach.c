/*
 * cmd_profile_attach.c - `autoplan profile attach -- CMD ARGS...` traces any CUDA program
 * (profiler/attach.c runs it under libautoplan_inject.so) and prints what the trace says
 * (profiler/attrib.c): kernel time by NVTX range, the kernels that took it, the memory peak,
 * copies and per-iteration figures. `autoplan profile check MODEL [plan flags] -- CMD` does the
 * same for one training step of a plan and puts the prediction beside the measurement: reserved
 * peak, step time, forward / backward / optimizer time; the errors go to the runs table.
 *
 * Everything after "--" is the program and its arguments, untouched.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "autoplan/db.h"
#include "autoplan/planio.h"
#include "autoplan/profiler.h"
#include "autoplan/strbuf.h"

/* Split argv at the first "--": the flags before, the program after. */
static void split(int argc, char **argv, int *nflags, char ***prog) {
    *nflags = argc;
    *prog = NULL;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            *nflags = i;
            *prog = i + 1 < argc ? argv + i + 1 : NULL;
            return;
        }
}

static void attach_flags(ap_flags *fl) {
    ap_flags_add(fl, "step-range", AP_FLAG_VALUE, "NAME",
                 "NVTX range that is one iteration (default: the top-level range repeated at "
                 "least twice that covers the most time)");
    ap_flags_add(fl, "skip", AP_FLAG_VALUE, "N",
                 "first iterations (and row-range occurrences) left out as warm-up (default 1)");
    ap_flags_add(fl, "keep-trace", AP_FLAG_VALUE, "FILE", "keep the raw trace in FILE");
    ap_flags_add(fl, "timeline", AP_FLAG_VALUE, "FILE",
                 "write the memory timeline as CSV: t_s,device,reserved_bytes");
    ap_flags_add(fl, "max-records", AP_FLAG_VALUE, "N",
                 "records kept by the tracer (default 16M = 1 GiB; more are counted as dropped)");
    ap_flags_add(fl, "cupti-lib", AP_FLAG_VALUE, "FILE",
                 "the libcupti to trace with, e.g. the one the program loads itself (default: the "
                 "one autoplan was built against)");
}

/* The tracer's flags (attach_flags), checked before anything is predicted, printed or run: the
 * program may train for hours, so an output path that cannot be written is refused first. */
static ap_status tracer_options(ap_flags *fl, int64_t *skip, int64_t *max_records, ap_err *err) {
    *skip = 1;
    *max_records = 0;
    ap_status st = ap_flag_int(fl, "skip", 0, 1 << 20, skip, err);
    if (st == AP_OK) st = ap_flag_int(fl, "max-records", 1000, (int64_t)1 << 34, max_records, err);
    const char *cupti = ap_flags_value(fl, "cupti-lib");
    struct stat sb;
    if (st == AP_OK && cupti && (stat(cupti, &sb) != 0 || !S_ISREG(sb.st_mode)))
        st = ap_err_set(err, AP_ERR_INPUT, "--cupti-lib: %s: not a file", cupti);
    if (st == AP_OK && cupti && !strstr(cupti, "libcupti.so"))
        st = ap_err_set(err, AP_ERR_INPUT, "--cupti-lib: %s: not a libcupti.so* file", cupti);
    if (st == AP_OK && cupti && strpbrk(cupti, ": \t"))
        st = ap_err_set(err, AP_ERR_INPUT, "--cupti-lib: %s: a path with ':' or blanks cannot "
                        "go into LD_PRELOAD", cupti);
    const char *outs[] = {"keep-trace", "timeline"};
    for (size_t i = 0; st == AP_OK && i < sizeof outs / sizeof outs[0]; i++) {
        const char *path = ap_flags_value(fl, outs[i]);
        char flag[32];
        snprintf(flag, sizeof flag, "--%s", outs[i]);
        if (path) st = ap_cli_check_out_path(flag, path, err);
        if (st == AP_OK) st = ap_cli_check_not_db(fl, flag, path, err);
    }
    return st;
}

/* Run the program and summarise; prints the run's header line. */
static ap_status trace_and_summarise(ap_flags *fl, char **prog, ap_trace *t, ap_trace_summary *s,
                                     int64_t max_records, int *exit_code, ap_err *err) {
    ap_trace_init(t); /* the caller frees it whatever this returns */
    ap_status st;
    char lib[4096];
    if ((st = ap_attach_find_inject(lib, sizeof lib, err)) != AP_OK) return st;
    ap_attach_opts o = {0};
    o.argv = prog;
    o.inject_lib = lib;
    o.trace_path = ap_flags_value(fl, "keep-trace");
    o.cupti_lib = ap_flags_value(fl, "cupti-lib");
    o.max_records = (size_t)max_records;
    fprintf(stderr, "autoplan: tracing %s ...\n", prog[0]);
    st = ap_attach_run(&o, t, exit_code, err);
    if (st != AP_OK) return st;
    ap_summary_opts so = {ap_flags_value(fl, "step-range")};
    st = ap_trace_summarize(t, &so, s, err);
    if (st != AP_OK) return st;
    const char *tl = ap_flags_value(fl, "timeline");
    if (tl) {
        ap_strbuf b = {0};
        ap_strbuf_puts(&b, "t_s,device,reserved_bytes\n");
        uint64_t t0 = s->ntimeline ? s->timeline[0].t_ns : 0;
        for (size_t i = 0; i < s->ntimeline; i++)
            ap_strbuf_printf(&b, "%.9f,%u,%.0f\n", (double)(s->timeline[i].t_ns - t0) * 1e-9,
                             s->timeline[i].device, s->timeline[i].reserved_bytes);
        st = b.failed ? ap_err_set(err, AP_ERR_NOMEM, "out of memory for the timeline")
                      : ap_write_file_atomic(tl, b.buf, b.len, err);
        ap_strbuf_free(&b);
        if (st != AP_OK) return st;
    }
    char k[32];
    printf("%s exited %d: %llu kernels, %s of kernel time", prog[0], *exit_code,
           (unsigned long long)s->kernel_count, ap_fmt_seconds(s->kernel_s, k, sizeof k));
    if (t->dropped)
        printf("; %llu records DROPPED (buffers full or --max-records): figures are low",
               (unsigned long long)t->dropped);
    if (s->unattributed) printf("; %llu kernels without their launch", (unsigned long long)s->unattributed);
    if (s->unmatched_ranges) printf("; %llu unmatched NVTX ranges", (unsigned long long)s->unmatched_ranges);
    if (s->projected)
        printf("; %llu kernels launched from threads without a range placed in thread %u's ranges",
               (unsigned long long)s->projected, (unsigned)s->projected_thread);
    printf("\n");
    return AP_OK;
}

static int cmp_node(const void *a, const void *b, const ap_trace_summary *s) {
    double x = s->nodes[*(const uint32_t *)a].kernel_incl_s, y = s->nodes[*(const uint32_t *)b].kernel_incl_s;
    return x > y ? -1 : x < y;
}
static const ap_trace_summary *g_sort_summary;
static int cmp_node_q(const void *a, const void *b) { return cmp_node(a, b, g_sort_summary); }

static void print_summary(const ap_trace *t, const ap_trace_summary *s, int top, size_t skip) {
    char a[32], b[32], c[32], path[256], nm[96];
    /* ranges by inclusive kernel time */
    if (s->nnodes > 1) {
        uint32_t *idx = malloc(s->nnodes * sizeof *idx);
        if (idx) {
            for (size_t i = 0; i < s->nnodes; i++) idx[i] = (uint32_t)i;
            g_sort_summary = s;
            qsort(idx, s->nnodes, sizeof *idx, cmp_node_q);
            printf("\nNVTX ranges by kernel time launched inside (nested ranges included):\n");
            printf("  %-60s %8s %12s %12s %12s\n", "RANGE", "COUNT", "KERNELS", "PER CALL", "HOST");
            for (int i = 0, shown = 0; shown < top && (size_t)i < s->nnodes; i++) {
                const ap_range_stat *r = &s->nodes[idx[i]];
                /* the root holds everything; shown as the kernels launched outside ranges */
                double k = idx[i] ? r->kernel_incl_s : r->kernel_s;
                if (k <= 0) continue;
                double per = r->count ? k / (double)r->count : 0;
                printf("  %-60.60s %8llu %12s %12s %12s\n",
                       ap_trace_node_path(t, s, idx[i], path, sizeof path),
                       (unsigned long long)r->count, ap_fmt_seconds(k, a, sizeof a),
                       idx[i] ? ap_fmt_seconds(per, b, sizeof b) : "-",
                       idx[i] ? ap_fmt_seconds(r->wall_s, c, sizeof c) : "-");
                shown++;
            }
            free(idx);
        }
    } else {
        printf("\nno NVTX ranges: per-operator times need ranges (torch.cuda.nvtx.range_push / "
               "torch.autograd.profiler.emit_nvtx)\n");
    }
    printf("\nkernels by time (the range they were launched in):\n");
    printf("  %-48s %-28s %8s %12s %12s\n", "KERNEL", "RANGE", "CALLS", "TOTAL", "MEAN");
    for (int i = 0; i < top && (size_t)i < s->nkernels; i++) {
        const ap_kernel_stat *k = &s->kernels[i];
        printf("  %-48.48s %-28.28s %8llu %12s %12s\n",
               ap_trace_short_name(ap_trace_name(t, k->name), nm, sizeof nm),
               ap_trace_node_path(t, s, k->node, path, sizeof path), (unsigned long long)k->calls,
               ap_fmt_seconds(k->total_s, a, sizeof a),
               ap_fmt_seconds(k->total_s / (double)k->calls, b, sizeof b));
    }
    printf("\nmemory (driver allocations, CUPTI MEMORY2: what PyTorch reserves plus cuBLAS/NCCL "
           "buffers, without the CUDA context):\n");
    if (s->ntimeline)
        printf("  peak %s on device %u at +%s; at exit %s; %zu allocation events\n",
               ap_fmt_bytes(s->peak_reserved_bytes, a, sizeof a), s->peak_device,
               ap_fmt_seconds(s->peak_at_ns > s->timeline[0].t_ns
                                  ? (double)(s->peak_at_ns - s->timeline[0].t_ns) * 1e-9 : 0,
                              b, sizeof b),
               ap_fmt_bytes(s->end_reserved_bytes, c, sizeof c), s->ntimeline);
    else
        printf("  no device allocations recorded\n");
    static const char *const dir[AP_COPY_DIR_END] = {"other", "h2d", "d2h", "d2d", "p2p", "h2h"};
    static const char *const kind[AP_MEMK_END] = {"", "pageable", "pinned", "device", "managed",
                                                  "array"};
    int any = 0;
    for (int d = 0; d < AP_COPY_DIR_END; d++)
        for (int k = 0; k < AP_MEMK_END; k++) {
            const ap_copy_stat *cs = &s->copies[d][k];
            if (!cs->calls) continue;
            if (!any++) printf("\ncopies:\n");
            printf("  %-4s %-9s %8llu calls %12s %12s %12s\n", dir[d], kind[k],
                   (unsigned long long)cs->calls, ap_fmt_bytes(cs->bytes, a, sizeof a),
                   ap_fmt_seconds(cs->time_s, b, sizeof b),
                   cs->time_s > 0 ? ap_fmt_bandwidth(cs->bytes / cs->time_s, c, sizeof c) : "-");
        }
    if (s->niters) {
        printf("\niterations (range '%s'): %zu", s->step_range, s->niters);
        if (skip) printf(", the first %zu left out as warm-up", skip);
        printf("\n  %-5s %12s %12s %12s %8s %12s\n", "ITER", "WALL", "KERNELS", "GPU SPAN",
               "LAUNCHES", "PEAK");
        for (size_t i = 0; i < s->niters && i < 20; i++) {
            const ap_iter_stat *it = &s->iters[i];
            char d[32];
            printf("  %-5zu %12s %12s %12s %8llu %12s%s\n", i, ap_fmt_seconds(it->wall_s, a, sizeof a),
                   ap_fmt_seconds(it->kernel_s, b, sizeof b),
                   ap_fmt_seconds(it->gpu_span_s, c, sizeof c), (unsigned long long)it->kernels,
                   ap_fmt_bytes(it->peak_reserved_bytes, d, sizeof d), i < skip ? "  (warm-up)" : "");
        }
        if (s->niters > 20) printf("  ... %zu more\n", s->niters - 20);
        printf("  median step %s\n", ap_fmt_seconds(ap_trace_step_s(s, skip), a, sizeof a));
    }
}

/* The device identity for rows from a trace: device 0 of this machine, as the GPU module reads
 * it. */
static ap_status trace_identity(ap_profile_row *tmpl, ap_err *err) {
    memset(tmpl, 0, sizeof *tmpl);
    const ap_gpubench_api *api = NULL;
    ap_status st = ap_gpubench_load(&api, err);
    if (st != AP_OK) {
        ap_err_prefix(err, "--name: storing rows needs the GPU's identity");
        return st;
    }
    return api->identify(0, NULL, tmpl, err);
}

int ap_cmd_profile_attach(int argc, char **argv) {
    int nflags;
    char **prog;
    split(argc, argv, &nflags, &prog);
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    attach_flags(&fl);
    ap_flags_add(&fl, "name", AP_FLAG_VALUE, "NAME",
                 "store ranges named \"<op> <shape> <dtype>\" as rows of profile NAME");
    ap_flags_add(&fl, "top", AP_FLAG_VALUE, "N", "ranges and kernels shown (default 15)");
    int rc = ap_cli_subparse(&fl, nflags, argv, 0, "autoplan profile attach [--name NAME] [flags] "
                             "-- CMD [ARGS...]",
                             "Run CMD under autoplan's CUPTI tracer (libautoplan_inject.so via "
                             "CUDA_INJECTION64_PATH) and\nprint kernel time by NVTX range, the "
                             "memory peak, copies and per-iteration figures.\nWith --name, NVTX "
                             "ranges named as a profile row (\"attn_fwd impl=fa2,b=1,... bf16\",\n"
                             "see profiler/scripts/) become rows of that profile, each naming its "
                             "kernel.");
    if (rc >= 0) return rc;
    ap_err err = {{0}};
    if (!prog) {
        ap_err_set(&err, AP_ERR_INPUT, "profile attach: put the program after --: autoplan "
                   "profile attach -- python train.py");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    int64_t top = 15, skip = 1, max_records = 0;
    ap_status st = ap_flag_int(&fl, "top", 1, 100000, &top, &err);
    if (st == AP_OK) st = tracer_options(&fl, &skip, &max_records, &err);
    const char *name = ap_flags_value(&fl, "name");
    if (st == AP_OK && name) st = ap_db_profile_check_name(name, "--name", &err);
    ap_profile_row tmpl;
    if (st == AP_OK && name) st = trace_identity(&tmpl, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_trace t;
    ap_trace_summary s;
    memset(&s, 0, sizeof s);
    int code = 0;
    st = trace_and_summarise(&fl, prog, &t, &s, max_records, &code, &err);
    if (st == AP_OK) print_summary(&t, &s, (int)top, (size_t)skip);
    if (st == AP_OK && name) {
        ap_profile prof;
        ap_profile_init(&prof);
        ap_profiler_host(tmpl.host, sizeof tmpl.host);
        snprintf(tmpl.source_run, sizeof tmpl.source_run, "%s", name);
        size_t nrows = 0, added = 0;
        st = ap_trace_profile_rows(&t, &tmpl, (int)skip, &prof, &nrows, &err);
        ap_db *db = NULL;
        if (st == AP_OK && nrows == 0)
            printf("\n--name %s: no NVTX range is named as a profile row; nothing stored\n", name);
        if (st == AP_OK && nrows) st = ap_db_open(ap_flags_value(&fl, "db"), 0, &db, &err);
        if (st == AP_OK && nrows) st = ap_db_profiles_insert(db, prof.rows, prof.n, &added, &err);
        if (st == AP_OK && nrows) {
            printf("\nrows from row-named ranges, stored in profile '%s' (%zu new):\n", name, added);
            for (size_t i = 0; i < prof.n; i++) {
                char a[32];
                printf("  %-9s %-60.60s %-5s %10s %7.1f TFLOP/s  %s\n", prof.rows[i].op,
                       prof.rows[i].shape, prof.rows[i].dtype,
                       ap_fmt_seconds(prof.rows[i].time_s, a, sizeof a),
                       prof.rows[i].flops_per_s / 1e12, prof.rows[i].source);
            }
        }
        ap_db_close(db);
        ap_profile_free(&prof);
    }
    ap_trace_summary_free(&s);
    ap_trace_free(&t);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    return code == 0 ? 0 : 1;
}

/* ---- check ---------------------------------------------------------------------------------------- */

/* Kernel time per iteration of the ranges named `name` (at any depth), by kind, and in all. */
static double range_kinds(const ap_trace *t, const ap_trace_summary *s, const char *name,
                          double kinds[AP_KKIND_COUNT]) {
    ap_trace_range_kinds(t, s, name, kinds);
    return kinds[AP_KKIND_GEMM] + kinds[AP_KKIND_ATTN] + kinds[AP_KKIND_OTHER];
}

static void row(const char *what, double pred, double meas, int bytes) {
    char a[32], b[32];
    if (bytes) {
        ap_fmt_bytes(pred, a, sizeof a);
        ap_fmt_bytes(meas, b, sizeof b);
    } else {
        ap_fmt_seconds(pred, a, sizeof a);
        ap_fmt_seconds(meas, b, sizeof b);
    }
    if (meas > 0)
        printf("  %-34s %12s %12s %+8.1f%%\n", what, a, b, 100.0 * (pred - meas) / meas);
    else
        printf("  %-34s %12s %12s %9s\n", what, a, "-", "-");
}

_Static_assert((int)AP_KKIND_GEMM == (int)AP_PART_GEMM && (int)AP_KKIND_ATTN == (int)AP_PART_ATTN &&
                   (int)AP_KKIND_OTHER == (int)AP_PART_OTHER,
               "kernel kinds in the cost model's order");

/* The forward and backward ranges' kernels by kind (profiler.h AP_KKIND_*, named as the cost
 * model's parts, estimate.h AP_PART_*), when the program marks those ranges. */
static void print_kinds(double meas[][AP_KKIND_COUNT], const ap_time *tm, double ga) {
    static const char *const dir[2] = {"forward", "backward"};
    static const char *const kind[AP_KKIND_COUNT] = {"GEMMs", "attention", "other kernels"};
    for (int d = 0; d < 2; d++) {
        if (meas[d][0] + meas[d][1] + meas[d][2] <= 0) continue;
        const double *pred = d ? tm->part_bwd_s : tm->part_fwd_s;
        for (int k = 0; k < AP_KKIND_COUNT; k++) {
            char what[48];
            snprintf(what, sizeof what, "  %s %s", dir[d], kind[k]);
            row(what, pred[k] * ga, meas[d][k], 0);
        }
    }
}

/* The check's run into the runs table: the plan, predicted and measured step and peak. */
static ap_status store_run(ap_flags *fl, const ap_resolved *ctx, const ap_estimate *e,
                           int64_t started, double meas_step, double meas_peak, ap_err *err) {
    ap_db *db = NULL;
    ap_json *ej = ap_estimate_to_json(e, &ctx->model);
    ap_json *pj = ap_planfile_to_json(&ctx->model, &ctx->cluster, &e->plan, ej);
    char *plan_json = pj ? ap_json_print(pj, 0) : NULL;
    ap_json_free(ej);
    ap_json_free(pj);
    ap_db_run run;
    memset(&run, 0, sizeof run);
    run.plan_json = plan_json;
    ap_profiler_host(run.host, sizeof run.host);
    snprintf(run.backend, sizeof run.backend, "cuda");
    run.started_at = started;
    run.ranks = 1;
    run.predicted_step_s = e->time.step_s;
    run.measured_step_s = meas_step;
    run.predicted_peak_bytes = e->reserved_peak_bytes;
    run.measured_peak_bytes = meas_peak;
    ap_db_run_rank rk = {0, e->time.step_s, meas_step, e->reserved_peak_bytes, meas_peak};
    int64_t id_out = 0;
    ap_status st = plan_json ? ap_db_open(ap_flags_value(fl, "db"), 0, &db, err)
                             : ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    if (st == AP_OK) st = ap_db_run_insert(db, &run, &rk, 1, &id_out, err);
    if (st == AP_OK) printf("stored as run:%lld in %s\n", (long long)id_out, ap_db_path(db));
    ap_db_close(db);
    free(plan_json);
    return st;
}

int ap_cmd_profile_check(int argc, char **argv) {
    int nflags;
    char **prog;
    split(argc, argv, &nflags, &prog);
    static ap_flags fl;
    fl.n = 0;
    ap_cli_cluster_flags(&fl);
    ap_cli_plan_flags(&fl);
    ap_cli_db_flag(&fl);
    attach_flags(&fl);
    ap_flags_add(&fl, "no-store", AP_FLAG_BOOL, NULL, "do not store the run in the database");
    int rc = ap_cli_subparse(&fl, nflags, argv, 1, "autoplan profile check MODEL [plan flags] "
                             "-- CMD [ARGS...]",
                             "Predict one training step of the plan the flags describe (one GPU "
                             "unless --gpus), run CMD\n(the user's training step) under the "
                             "tracer, and compare: reserved memory peak,\nstep time (its "
                             "kernels and the time outside them), and the forward / backward /\n"
                             "optimizer ranges when CMD marks them (NVTX ranges named so; "
                             "profiler/scripts/llama_step.py\ndoes), forward and backward also by "
                             "kind (GEMMs, attention, the rest). The errors are\nprinted and "
                             "stored in the runs table.");
    if (rc >= 0) return rc;
    ap_err err = {{0}};
    if (!prog) {
        ap_err_set(&err, AP_ERR_INPUT, "profile check: put the training program after --");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    static ap_request rq;
    static ap_resolved ctx;
    int64_t skip = 1, max_records = 0;
    ap_status st = tracer_options(&fl, &skip, &max_records, &err);
    if (st == AP_OK) st = ap_cli_request(&fl, &rq, NULL, NULL, &err);
    /* one GPU, the one the step runs on, unless told otherwise (request values, not flags) */
    if (!rq.gpus.given && !rq.cluster_file) {
        rq.gpus.given = 1;
        rq.gpus.v = 1;
    }
    static ap_profile_row id;
    memset(&id, 0, sizeof id);
    const ap_gpubench_api *api = NULL;
    if (st == AP_OK && !rq.gpu && !rq.cluster_file && ap_gpubench_load(&api, &err) == AP_OK &&
        api->identify(0, NULL, &id, &err) == AP_OK)
        rq.gpu = id.gpu;
    char profile[64], note[320];
    if (st == AP_OK) st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &ctx, &err);
    if (st == AP_OK) st = ap_cli_profile(&fl, &ctx, profile, note, &err);
    if (st == AP_OK) {
        st = ap_plan_check(&ctx.plan, &ctx.model, &ctx.cluster, ctx.allow_cross_node_tp, &err);
        if (st == AP_ERR_INFEASIBLE) st = AP_ERR_INPUT;
    }
    static ap_estimate e;
    ctx.est.compute_parts = 1;
    if (st == AP_OK) st = ap_estimate_plan(&ctx.model, &ctx.cluster, &ctx.plan, &ctx.est, &e, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    char lbl[160];
    printf("predicted: %s on %d x %s: step %.3f s, reserved peak %.2f GiB\n",
           ap_plan_label(&ctx.plan, lbl, sizeof lbl), ctx.cluster.gpus, ctx.cluster.gpu.name,
           e.time.step_s, e.reserved_peak_bytes / (1024.0 * 1024 * 1024));
    int64_t started = (int64_t)time(NULL);
    ap_trace t;
    ap_trace_summary s;
    memset(&s, 0, sizeof s);
    int code = 0;
    st = trace_and_summarise(&fl, prog, &t, &s, max_records, &code, &err);
    if (st == AP_OK && code != 0)
        st = ap_err_set(&err, AP_ERR_INPUT, "the training program exited %d: nothing to compare",
                        code);
    if (st == AP_OK && s.niters <= (size_t)skip)
        st = ap_err_set(&err, AP_ERR_INPUT, "found %zu iterations%s%s, need more than --skip %lld:"
                        " mark each step with an NVTX range (--step-range NAME)", s.niters,
                        s.step_range[0] ? " of range " : "", s.step_range, (long long)skip);
    if (st != AP_OK) {
        ap_trace_summary_free(&s);
        ap_trace_free(&t);
        return ap_cli_fail(st, &err);
    }
    double torch_reserved = 0;
    int have_torch = ap_trace_mark_value(&t, "autoplan.max_memory_reserved", &torch_reserved);
    double meas_peak = have_torch ? torch_reserved : s.peak_reserved_bytes;
    double meas_step = ap_trace_step_s(&s, (size_t)skip);
    double ga = (double)e.plan.grad_accum;
    printf("\n  %-34s %12s %12s %9s\n", "", "PREDICTED", "MEASURED", "ERROR");
    row(have_torch ? "reserved peak (torch)" : "reserved peak (driver allocations)",
        e.reserved_peak_bytes, meas_peak, 1);
    if (have_torch) row("driver allocations peak", e.reserved_peak_bytes, s.peak_reserved_bytes, 1);
    row("step time", e.time.step_s, meas_step, 0);
    /* the step's kernels and what is left of it (the host, an idle GPU): predicted, the step
       less the calibration's fixed per-step overhead, and that overhead */
    double meas_kern = ap_trace_step_kernel_s(&s, (size_t)skip);
    row("  kernels", e.time.step_s - e.time.overhead_s, meas_kern, 0);
    row("  outside kernels (host, idle)", e.time.overhead_s,
        meas_step > meas_kern ? meas_step - meas_kern : 0, 0);
    double kinds[3][AP_KKIND_COUNT];
    row("forward (kernels)", e.time.stage_fwd_s[0] * ga,
        range_kinds(&t, &s, "forward", kinds[0]), 0);
    row("backward (kernels)", e.time.stage_bwd_s[0] * ga,
        range_kinds(&t, &s, "backward", kinds[1]), 0);
    row("optimizer (kernels)", e.time.optimizer_s, range_kinds(&t, &s, "optimizer", kinds[2]), 0);
    print_kinds(kinds, &e.time, ga);
    printf("(goal: reserved peak within 5%%, step time within 10%%; ranges missing from the "
           "program show '-')\n");
    if (!ap_flags_isset(&fl, "no-store"))
        st = store_run(&fl, &ctx, &e, started, meas_step, meas_peak, &err);
    ap_trace_summary_free(&s);
    ap_trace_free(&t);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}
