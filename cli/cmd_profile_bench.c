/*
 * cmd_profile_bench.c - `autoplan profile bench`: measure this machine and store the result as
 * a named profile. GPU benchmarks (cuBLASLt GEMMs over a grid and a model's exact shapes,
 * memory-bound kernels, fused Adam, copies, launch latency, device memory taken by the CUDA
 * context / cuBLAS / NCCL, cuDNN fused attention, NCCL collectives) run in builds with the CUDA
 * toolkit (profiler/gpubench*.c); the host benchmarks (CPU Adam, host memory bandwidth) run
 * everywhere (`--host-only`).
 *
 * Every figure is the median of >= 20 timed repetitions after warm-up, with its spread. GEMM
 * points are stored as measured (no fitted curve) and the leave-one-out interpolation error
 * between them is printed. The profile is validated row by row and stored in one transaction
 * (db/), under --name or "<gpu>-<host>-<UTC time>"; --output also writes the profile file.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autoplan/db.h"
#include "autoplan/profiler.h"

#define ALL_GPU "gemm,membound,adam,copy,launch,devmem,attn,nccl"

static int in_list(const char *list, const char *word) {
    size_t l = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == l && !strncmp(p, word, l)) return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

/* Every word of --what is known. */
static ap_status check_what(const char *what, int host_only, ap_err *err) {
    const char *known = host_only ? "host" : "host," ALL_GPU;
    for (const char *p = what; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        char w[32];
        snprintf(w, sizeof w, "%.*s", (int)(n < 31 ? n : 31), p);
        if (!in_list(known, w))
            return ap_err_set(err, AP_ERR_INPUT, "--what: unknown benchmark '%s' (%s)", w,
                              host_only ? "with --host-only: host, the CPU Adam step and "
                                          "host bandwidth" : "host, " ALL_GPU);
        if (!c) break;
        p = c + 1;
    }
    return AP_OK;
}

static void progress(const char *line, void *arg) {
    (void)arg;
    printf("  %s\n", line);
    fflush(stdout);
}

/* One line per row of the non-GEMM operations; GEMMs summarised per dtype. */
static void print_rows(const ap_profile *p, const ap_gpu *g) {
    printf("\n%-11s %-52s %-5s %11s %14s %7s\n", "OP", "SHAPE", "DTYPE", "MEDIAN", "RATE",
           "SPREAD");
    for (size_t i = 0; i < p->n; i++) {
        const ap_profile_row *r = &p->rows[i];
        if (!strcmp(r->op, "gemm")) continue;
        char t[32], rate[32] = "-";
        if (!strcmp(r->op, "device_mem")) ap_fmt_bytes(r->bytes, t, sizeof t);
        else ap_fmt_seconds(r->time_s, t, sizeof t);
        if (r->flops_per_s > 0) snprintf(rate, sizeof rate, "%.1f TFLOP/s", r->flops_per_s / 1e12);
        else if (r->bytes_per_s > 0) snprintf(rate, sizeof rate, "%.1f GB/s", r->bytes_per_s / 1e9);
        printf("%-11s %-52.52s %-5s %11s %14s %6.1f%%\n", r->op, r->shape, r->dtype, t, rate,
               100.0 * r->spread);
    }
    static const char *const dts[] = {"bf16", "fp16", "fp8", "tf32", "fp32"};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        size_t n = 0, best = 0;
        for (size_t i = 0; i < p->n; i++) {
            const ap_profile_row *r = &p->rows[i];
            if (strcmp(r->op, "gemm") || strcmp(r->dtype, dts[d])) continue;
            if (!n++ || r->flops_per_s > p->rows[best].flops_per_s) best = i;
        }
        if (!n) continue;
        ap_dtype dt;
        double peak = 0;
        if (g && ap_dtype_parse(dts[d], &dt) == AP_OK) peak = g->peak_flops[dt];
        ap_loo_result loo, idw;
        ap_err e;
        ap_profile_loo(p, "gemm", dts[d], ap_profile_predict_kernels, NULL, &loo, &e);
        ap_profile_loo(p, "gemm", dts[d], NULL, NULL, &idw, &e);
        printf("gemm %-5s %4zu shapes, best %.1f TFLOP/s", dts[d], n,
               p->rows[best].flops_per_s / 1e12);
        if (peak > 0) printf(" (%.0f%% of the %.0f TFLOP/s datasheet peak)",
                             100.0 * p->rows[best].flops_per_s / peak, peak / 1e12);
        printf(" at %s\n", p->rows[best].shape);
        if (loo.predicted)
            printf("  leave-one-out error of the cost model's lookup over %zu of %zu points: "
                   "median %.1f%%, mean %.1f%%, max %.1f%% (%s)\n", loo.predicted, loo.points,
                   100 * loo.median_abs_err, 100 * loo.mean_abs_err, 100 * loo.max_abs_err,
                   loo.worst_shape);
        if (idw.predicted)
            printf("  ... of 3-D inverse-distance interpolation: median %.1f%%, mean %.1f%%, max "
                   "%.1f%%\n", 100 * idw.median_abs_err, 100 * idw.mean_abs_err,
                   100 * idw.max_abs_err);
    }
}

/* --host-only runs no GPU benchmark: the flags that only shape those are refused, not
 * ignored. */
static ap_status check_host_only(ap_flags *fl, ap_err *err) {
    static const char *const gpu_flags[] = {"model", "device", "dtypes"};
    for (size_t i = 0; i < sizeof gpu_flags / sizeof gpu_flags[0]; i++)
        if (ap_flags_isset(fl, gpu_flags[i]))
            return ap_err_set(err, AP_ERR_INPUT, "--%s: shapes the GPU benchmarks (not with "
                              "--host-only)", gpu_flags[i]);
    return AP_OK;
}

/* The row template: the GPU's identity (device benches) or --gpu (host-only). */
static ap_status identity(ap_flags *fl, int host_only, int device, ap_profile_row *tmpl,
                          ap_err *err) {
    memset(tmpl, 0, sizeof *tmpl);
    const char *gname = ap_flags_value(fl, "gpu");
    if (!host_only) {
        const ap_gpubench_api *api = NULL;
        ap_status st = ap_gpubench_load(&api, err);
        if (st != AP_OK) {
            ap_err_prefix(err, "profile bench (GPU benchmarks; --host-only --gpu NAME runs the "
                          "host ones without a GPU)");
            return st;
        }
        /* --gpu names the catalog entry of a device the catalog lacks */
        return api->identify(device, gname, tmpl, err);
    }
    if (!gname)
        return ap_err_set(err, AP_ERR_INPUT, "--host-only: needs --gpu NAME, the GPU type the "
                          "host figures belong to (profiles are kept per GPU type)");
    const ap_gpu *g = NULL;
    ap_status st = ap_gpu_lookup(gname, "--gpu", &g, err);
    if (st != AP_OK) return st;
    snprintf(tmpl->gpu, sizeof tmpl->gpu, "%s", g->name);
    snprintf(tmpl->mig_mode, sizeof tmpl->mig_mode, "off");
    return AP_OK;
}

static void bench_flags(ap_flags *fl) {
    ap_cli_db_flag(fl);
    ap_flags_add(fl, "name", AP_FLAG_VALUE, "NAME",
                 "profile name (default <gpu>-<host>-<UTC time>); [A-Za-z0-9._-], <= 63 chars");
    ap_flags_add(fl, "host-only", AP_FLAG_BOOL, NULL,
                 "only the host benchmarks (CPU Adam, host memory bandwidth): no GPU needed");
    ap_flags_add(fl, "gpu", AP_FLAG_VALUE, "NAME",
                 "catalog GPU the rows are for (required with --host-only; else checked)");
    ap_flags_add(fl, "what", AP_FLAG_VALUE, "LIST",
                 "benchmarks: host," ALL_GPU " (default: all)");
    ap_flags_add(fl, "model", AP_FLAG_VALUE, "MODEL",
                 "also time the GEMMs of this model's linear layers (fwd, dgrad, wgrad; with "
                 "--quick: only those)");
    ap_flags_add(fl, "tp", AP_FLAG_VALUE, "LIST", "tensor-parallel degrees for --model "
                 "(default 1,2,4,8)");
    ap_flags_add(fl, "mbs", AP_FLAG_VALUE, "N", "micro-batch for --model (default 1)");
    ap_flags_add(fl, "seq", AP_FLAG_VALUE, "N", "sequence length for --model (default the "
                 "model's)");
    ap_flags_add(fl, "dtypes", AP_FLAG_VALUE, "LIST", "GEMM dtypes (default bf16,fp16,fp8,tf32;"
                 " fp8 on sm89+)");
    ap_flags_add(fl, "device", AP_FLAG_VALUE, "N", "CUDA device index (default 0)");
    ap_flags_add(fl, "quick", AP_FLAG_BOOL, NULL, "smaller grids and sizes: a smoke run");
    ap_flags_add(fl, "reps", AP_FLAG_VALUE, "N", "timed repetitions per point (>= 20)");
    ap_flags_add(fl, "threads", AP_FLAG_VALUE, "N", "host threads (default: online CPUs)");
    ap_flags_add(fl, "host-bytes", AP_FLAG_VALUE, "SIZE",
                 "size of each host-bandwidth array (default 256MiB)");
    ap_flags_add(fl, "adam-params", AP_FLAG_VALUE, "COUNT",
                 "parameters of the CPU Adam step (default 64M)");
    ap_flags_add(fl, "output", AP_FLAG_VALUE, "FILE", "also write the profile file (JSON)");
    ap_flags_add(fl, "no-store", AP_FLAG_BOOL, NULL, "do not store the profile in the database");
}

/* The options besides the model's shapes, every one checked before anything runs: a bad size or
 * output path is refused before a benchmark is measured, printed or stored. */
typedef struct {
    int host_only;
    const char *what;
    int64_t device, reps, mbs, seq;
    ap_hostbench_opts ho; /* the host benchmarks' threads, sizes (--quick's applied) and reps */
} bench_opts;

static ap_status bench_options(ap_flags *fl, bench_opts *o, ap_err *err) {
    memset(o, 0, sizeof *o);
    o->host_only = ap_flags_isset(fl, "host-only");
    o->what = ap_flags_value(fl, "what");
    if (!o->what) o->what = o->host_only ? "host" : "host," ALL_GPU;
    o->mbs = 1;
    int64_t threads = 0;
    double host_bytes = 0, adam_params = 0;
    ap_status st = check_what(o->what, o->host_only, err);
    if (st == AP_OK) st = ap_flag_int(fl, "device", 0, 1024, &o->device, err);
    if (st == AP_OK)
        st = ap_flag_int(fl, "reps", AP_BENCH_MIN_REPS, AP_BENCH_MAX_REPS, &o->reps, err);
    if (st == AP_OK) st = ap_flag_int(fl, "threads", 1, 4096, &threads, err);
    if (st == AP_OK) st = ap_flag_int(fl, "mbs", 1, 1 << 20, &o->mbs, err);
    if (st == AP_OK) st = ap_flag_int(fl, "seq", 1, AP_MODEL_MAX_SEQ, &o->seq, err);
    if (st == AP_OK) st = ap_flag_bytes(fl, "host-bytes", &host_bytes, err);
    const char *ap = ap_flags_value(fl, "adam-params");
    if (st == AP_OK && ap) st = ap_parse_count(ap, "--adam-params", &adam_params, err);
    if (st == AP_OK && o->host_only) st = check_host_only(fl, err);
    if (st == AP_OK && !ap_flags_isset(fl, "model") &&
        (ap_flags_isset(fl, "tp") || ap_flags_isset(fl, "seq") || ap_flags_isset(fl, "mbs")))
        st = ap_err_set(err, AP_ERR_INPUT, "--tp, --mbs and --seq describe --model's GEMMs: "
                        "give --model too");
    int quick = ap_flags_isset(fl, "quick");
    ap_hostbench_opts_init(&o->ho);
    o->ho.threads = (int)threads;
    o->ho.membw_bytes = host_bytes > 0 ? host_bytes : quick ? 32 << 20 : 0;
    o->ho.adam_params = adam_params > 0 ? adam_params : quick ? 4 << 20 : 0;
    o->ho.reps = (int)o->reps;
    if (st == AP_OK && in_list(o->what, "host") && (st = ap_hostbench_check(&o->ho, err)) != AP_OK)
        ap_err_prefix(err, "%s", strncmp(err->msg, "host Adam", 9) ? "--host-bytes"
                                                                       : "--adam-params");
    const char *out = ap_flags_value(fl, "output");
    if (st == AP_OK && out) st = ap_cli_check_out_path("--output", out, err);
    if (st == AP_OK) st = ap_cli_check_not_db(fl, "--output", out, err);
    return st;
}

/* With --model: the generic grid (unless --quick) and the model's exact shapes, merged. */
static ap_status model_shapes(ap_flags *fl, const bench_opts *o, ap_gemm_shape **shapes,
                              size_t *nshapes, ap_err *err) {
    if (!ap_flags_isset(fl, "model")) return AP_OK;
    ap_status st = ap_flags_isset(fl, "quick") ? AP_OK : ap_gemm_grid(shapes, nshapes, err);
    ap_model m;
    if (st == AP_OK) st = ap_model_load(ap_flags_value(fl, "model"), &m, err);
    const char *tps = ap_flags_value(fl, "tp");
    if (!tps) tps = "1,2,4,8";
    for (const char *p = tps; st == AP_OK && p && *p;) {
        char *end = NULL;
        long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > 4096 || (*end && *end != ','))
            st = ap_err_set(err, AP_ERR_INPUT, "--tp: '%s' is not a list of degrees like "
                            "1,2,4,8", tps);
        else if (m.heads % t == 0)
            st = ap_gemm_model_shapes(&m, (int)t, o->mbs, o->seq ? o->seq : m.seq_len, shapes,
                                      nshapes, err);
        else
            printf("note: --tp %ld skipped: it does not divide %s's %lld heads\n", t, m.name,
                   (long long)m.heads);
        p = end && *end == ',' ? end + 1 : NULL;
    }
    return st;
}

/* The profile's name (--name or the default) and, when it is stored, the database, open, with
 * no profile of that name in it yet. */
static ap_status name_and_store(ap_flags *fl, ap_profile_row *tmpl, char *name, size_t n,
                                ap_db **db, ap_err *err) {
    ap_profiler_host(tmpl->host, sizeof tmpl->host);
    const char *nm = ap_flags_value(fl, "name");
    if (nm) snprintf(name, n, "%.63s", nm);
    else ap_profiler_default_name(tmpl->gpu, tmpl->host, (int64_t)time(NULL), name, n);
    ap_status st = ap_db_profile_check_name(nm ? nm : name, "--name", err);
    snprintf(tmpl->source_run, sizeof tmpl->source_run, "%s", name);
    if (st != AP_OK || ap_flags_isset(fl, "no-store")) return st;
    st = ap_db_open(ap_flags_value(fl, "db"), 0, db, err);
    ap_profile old;
    ap_profile_init(&old);
    if (st == AP_OK) st = ap_db_profile_get(*db, name, &old, err);
    if (st == AP_OK && old.n)
        st = ap_err_set(err, AP_ERR_INPUT, "--name %s: a profile of that name exists in %s "
                        "(choose another name, or `autoplan profile delete %s`)", name,
                        ap_db_path(*db), name);
    ap_profile_free(&old);
    return st;
}

/* The benchmarks --what names, appended to prof. */
static ap_status run_benches(ap_flags *fl, const bench_opts *o, ap_gemm_shape *shapes,
                             size_t nshapes, ap_profile_row *tmpl, ap_profile *prof,
                             ap_err *err) {
    ap_status st = AP_OK;
    if (in_list(o->what, "host")) {
        printf("  host memory bandwidth (STREAM) ...\n");
        fflush(stdout);
        st = ap_hostbench_membw(&o->ho, tmpl, prof, err);
        if (st == AP_OK) {
            printf("  host Adam step ...\n");
            fflush(stdout);
            st = ap_hostbench_adam(&o->ho, tmpl, prof, err);
        }
    }
    if (st == AP_OK && !o->host_only) {
        const ap_gpubench_api *api = NULL;
        st = ap_gpubench_load(&api, err);
        ap_gpubench_opts go;
        ap_gpubench_opts_init(&go);
        go.device = (int)o->device;
        go.what = o->what;
        go.gemm_shapes = shapes;
        go.ngemm_shapes = nshapes;
        go.dtypes = ap_flags_value(fl, "dtypes");
        go.reps = (int)o->reps;
        go.quick = ap_flags_isset(fl, "quick");
        go.progress = progress;
        if (st == AP_OK) st = api->run(&go, tmpl, prof, err);
    }
    return st;
}

/* The measured profile: printed, stored (db non-NULL), written to --output. */
static ap_status keep_profile(ap_flags *fl, const ap_profile *prof, const ap_profile_row *tmpl,
                              ap_db *db, ap_err *err) {
    print_rows(prof, ap_gpu_find(tmpl->gpu));
    size_t added = 0;
    ap_status st = AP_OK;
    if (db && prof->n) st = ap_db_profiles_insert(db, prof->rows, prof->n, &added, err);
    if (st == AP_OK && db)
        printf("\nstored profile '%s' in %s: %zu rows; estimates for %s use it (newest measured "
               "profile) unless --profile says otherwise\n", prof->name, ap_db_path(db), added,
               tmpl->gpu);
    const char *out = ap_flags_value(fl, "output");
    if (st == AP_OK && out && prof->n) {
        char *text = NULL;
        st = ap_db_profile_format_json(prof, &text, err);
        if (st == AP_OK) {
            size_t len = strlen(text);
            text[len++] = '\n';
            st = ap_write_file_atomic(out, text, len, err);
        }
        free(text);
        if (st == AP_OK) printf("wrote %s\n", out);
    }
    return st;
}

int ap_cmd_profile_bench(int argc, char **argv) {
    ap_flags fl = {0};
    bench_flags(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 0, "autoplan profile bench [--host-only --gpu NAME]"
                             " [--name NAME] [--model MODEL --tp 1,2,4,8] [flags]",
                             "Measure this machine and store the result as a profile "
                             "(docs/profiler.md). Each figure is\nthe median of at least 20 "
                             "repetitions after warm-up, with its spread.");
    if (rc >= 0) return rc;
    ap_err err = {{0}};
    bench_opts o;
    ap_status st = bench_options(&fl, &o, &err);
    ap_gemm_shape *shapes = NULL;
    size_t nshapes = 0;
    if (st == AP_OK) st = model_shapes(&fl, &o, &shapes, &nshapes, &err);
    /* identity, name and the store */
    ap_profile_row tmpl;
    if (st == AP_OK) st = identity(&fl, o.host_only, (int)o.device, &tmpl, &err);
    char name[64];
    ap_db *db = NULL;
    if (st == AP_OK) st = name_and_store(&fl, &tmpl, name, sizeof name, &db, &err);
    if (st != AP_OK) {
        free(shapes);
        ap_db_close(db);
        return ap_cli_fail(st, &err);
    }
    ap_profile prof;
    ap_profile_init(&prof);
    snprintf(prof.name, sizeof prof.name, "%s", name);
    snprintf(prof.gpu, sizeof prof.gpu, "%s", tmpl.gpu);
    printf("profile %s: %s", name, tmpl.gpu);
    if (tmpl.device_name[0]) printf(" (%s, driver %s, CUDA %s)", tmpl.device_name,
                                    tmpl.driver_version, tmpl.cuda_version);
    printf(" on %s\n", tmpl.host);
    st = run_benches(&fl, &o, shapes, nshapes, &tmpl, &prof, &err);
    free(shapes);
    if (st == AP_OK) st = keep_profile(&fl, &prof, &tmpl, db, &err);
    ap_profile_free(&prof);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}
