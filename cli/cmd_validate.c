/*
 * cmd_validate.c - `autoplan validate`: predict every published run shipped in
 * tests/data/validation.json (built by tools/make_validation.py), report per-row, per-source
 * and overall errors, fit the eight calibration parameters (--fit) and estimate the error on
 * unseen runs by leaving each source out of the fit in turn (--leave-one-source-out). The
 * computing is costmodel/validation.c's; this file reads flags and prints.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/db.h"
#include "autoplan/validation.h"
#include "cli.h"

#define MAX_SOURCES AP_VALIDATION_MAX_SOURCES

typedef ap_vrow vrow;
typedef ap_vshown vshown;
typedef ap_vset vset;
typedef ap_verr errstat;

static ap_json *errjson(const errstat *e, int with_mem_max) {
    ap_json *o = ap_json_new_object();
    ap_json_add_number(o, "time_mape", e->time_mape);
    ap_json_add_number(o, "time_max", e->time_max);
    ap_json_add_number(o, "memory_mape", e->mem_mape);
    if (with_mem_max) ap_json_add_number(o, "memory_max", e->mem_max);
    ap_json_add_number(o, "rows", e->rows);
    return o;
}

static void print_calib(const ap_calib *c) {
    printf("  gemm_eff_max     %.4f   sustained fraction of the kernel tables' GEMM/flash rates\n", c->gemm_eff_max);
    printf("  gemm_half_flops  %.4g   GEMM size (FLOPs) at half of that efficiency\n", c->gemm_half_flops);
    printf("  attn_eff         %.4f   attention matmuls with materialised scores, fraction of peak\n", c->attn_eff);
    printf("  link_eff         %.4f   achieved fraction of NVLink bandwidth\n", c->link_eff);
    printf("  net_eff          %.4f   achieved fraction of network bandwidth\n", c->net_eff);
    printf("  coll_latency_s   %.3g   per collective step\n", c->coll_latency_s);
    printf("  step_overhead_s  %.4f   fixed per-step overhead\n", c->step_overhead_s);
    printf("  mem_bound_eff    %.4f   achieved fraction of HBM bandwidth\n", c->mem_bound_eff);
}

/* GPUs of the cross-check: each has its own rows and GEMM efficiency */
#define MAX_CROSS_GPUS 8

/* Everything validate computes, for the printers. */
typedef struct {
    vset *vs, *cross, *oos;
    ap_calib cal;
    ap_calib ccal[MAX_CROSS_GPUS]; /* the calibration of each cross-check GPU, cgpu[k] */
    char cgpu[MAX_CROSS_GPUS][32];
    int ncgpu;
    errstat all, per[MAX_SOURCES];
    int all_fit, fitted, do_loso;
    errstat loso;
    double loso_src[MAX_SOURCES];
} vresult;

/* A row: what it is, then its prediction and error, or (a refused run) why there is none. */
static ap_json *row_json(const vrow *v) {
    ap_json *o = ap_json_new_object();
    ap_json_add_string(o, "source", v->source);
    ap_json_add_string(o, "model", v->model_name);
    ap_json_add_string(o, "plan", v->plan_label);
    ap_json_add_string(o, "metric", v->metric);
    if (v->refused[0]) {
        ap_json_add_number(o, "measured", v->measured);
        ap_json_add_string(o, "refused", v->refused);
        return o;
    }
    ap_json_add_number(o, "predicted", v->predicted);
    ap_json_add_number(o, "measured", v->measured);
    ap_json_add_number(o, "error", fabs(v->predicted - v->measured) / v->measured);
    return o;
}

/* The out-of-sample runs that ran (time rows): how many, how many are predicted above their
 * GPU's memory, and how many fit it only without the planning headroom. */
static void ran_counts(const vset *oos, int *ran, int *nofit, int *tight) {
    *ran = *nofit = *tight = 0;
    for (int i = 0; i < oos->n; i++) {
        if (!oos->rows[i].is_time || oos->rows[i].refused[0]) continue;
        (*ran)++;
        *nofit += !oos->rows[i].fits_device;
        *tight += oos->rows[i].fits_device && !oos->rows[i].fits;
    }
}

/* The recorded out-of-memory runs predicted within the GPU's memory but not within it less the
 * planning headroom (the plan a search would not offer). */
static int oom_tight(const vset *oos) {
    int n = 0;
    for (int i = 0; i < oos->n; i++)
        n += oos->rows[i].is_oom && !oos->rows[i].refused[0] && oos->rows[i].fits_device &&
             !oos->rows[i].fits;
    return n;
}

/* The out-of-sample part of --json: the same figures the text prints (errors as fractions;
 * signed errors negative when predicted too fast or too small). */
static ap_json *oos_json(const vset *oos) {
    errstat oa, oper[MAX_SOURCES];
    ap_validation_summarize(oos, NULL, 0, &oa, oper);
    ap_json *root = ap_json_new_object();
    ap_json *all = errjson(&oa, 1);
    ap_json_add_number(all, "time_bias", oa.time_bias);
    ap_json_add(root, "overall", all);
    ap_json *bs = ap_json_new_array();
    for (int s = 0; s < oos->nsources; s++) {
        ap_json *o = ap_json_new_object();
        ap_json_add_string(o, "source", oos->sources[s]);
        ap_json_add_number(o, "time_mape", oper[s].time_mape);
        ap_json_add_number(o, "time_bias", oper[s].time_bias);
        ap_json_add_number(o, "time_max", oper[s].time_max);
        if (oper[s].mem_rows > 0) ap_json_add_number(o, "memory_mape", oper[s].mem_mape);
        ap_json_add_number(o, "rows", oper[s].rows);
        if (oper[s].refused > 0) ap_json_add_number(o, "refused", oper[s].refused);
        ap_json_push(bs, o);
    }
    ap_json_add(root, "by_source", bs);
    if (oa.refused > 0) ap_json_add_number(root, "refused", oa.refused);
    ap_json *rows = ap_json_new_array();
    for (int i = 0; i < oos->n; i++) {
        const vrow *v = &oos->rows[i];
        ap_json *o = row_json(v);
        if (v->refused[0]) { /* no prediction, no error */
        } else if (v->is_oom) {
            ap_json_add_bool(o, "predicted_not_to_fit", v->predicted >= 0.5);
        } else {
            ap_json_add_number(o, "signed_error", (v->predicted - v->measured) / v->measured);
        }
        ap_json_push(rows, o);
    }
    ap_json_add(root, "rows", rows);
    ap_json *oom = ap_json_new_object();
    ap_json_add_number(oom, "rows", oa.oom_rows);
    ap_json_add_number(oom, "predicted_not_to_fit", oa.oom_hit);
    ap_json_add_number(oom, "within_headroom", oom_tight(oos));
    ap_json_add(root, "recorded_oom", oom);
    int ran, nofit, tight;
    ran_counts(oos, &ran, &nofit, &tight);
    ap_json *rj = ap_json_new_object();
    ap_json_add_number(rj, "rows", ran);
    ap_json_add_number(rj, "predicted_not_to_fit", nofit);
    ap_json_add_number(rj, "within_headroom", tight);
    ap_json_add(root, "ran", rj);
    return root;
}

static ap_status print_breakdown(const vresult *r, const char *src, ap_json *json, ap_err *err);

/* The cross-check: its errors, rows and each GPU's calibration (gemm_eff_max fitted on its
 * rows under --fit, else the built-in one), as the text prints them. */
static ap_json *cross_json(const vresult *r) {
    errstat ca, cper[MAX_SOURCES];
    ap_validation_summarize(r->cross, NULL, 0, &ca, cper);
    ap_json *root = ap_json_new_object();
    ap_json_add(root, "overall", errjson(&ca, 1));
    ap_json *cal = ap_json_new_array();
    for (int k = 0; k < r->ncgpu; k++) {
        ap_json *o = ap_json_new_object();
        ap_json_add_string(o, "gpu", r->cgpu[k]);
        ap_json_add_number(o, "gemm_eff_max", r->ccal[k].gemm_eff_max);
        ap_json_add_number(o, "gemm_half_flops", r->ccal[k].gemm_half_flops);
        ap_json_push(cal, o);
    }
    ap_json_add(root, "calibration", cal);
    ap_json *rows = ap_json_new_array();
    for (int i = 0; i < r->cross->n; i++) ap_json_push(rows, row_json(&r->cross->rows[i]));
    ap_json_add(root, "rows", rows);
    return root;
}

/* The document; with --breakdown (bsrc) its rows' parts beside the rest. */
static int print_json(const vresult *r, const char *bsrc) {
    const vset *vs = r->vs;
    ap_json *root = ap_json_new_object();
    ap_json_add(root, "overall", errjson(&r->all, 1));
    ap_json *bs = ap_json_new_array();
    for (int s = 0; s < vs->nsources; s++) {
        ap_json *o = ap_json_new_object();
        ap_json_add_string(o, "source", vs->sources[s]);
        ap_json_add_number(o, "time_mape", r->per[s].time_mape);
        ap_json_add_number(o, "time_max", r->per[s].time_max);
        ap_json_add_number(o, "memory_mape", r->per[s].mem_mape);
        ap_json_add_number(o, "rows", r->per[s].rows);
        ap_json_push(bs, o);
    }
    ap_json_add(root, "by_source", bs);
    ap_json *rows = ap_json_new_array();
    for (int i = 0; i < vs->n; i++) ap_json_push(rows, row_json(&vs->rows[i]));
    ap_json_add(root, "rows", rows);
    /* the schema above is exact; --leave-one-source-out adds one object beside it */
    if (r->do_loso) {
        ap_json *lo = ap_json_new_object();
        ap_json_add_number(lo, "time_mape", r->loso.time_mape);
        ap_json_add_number(lo, "time_max", r->loso.time_max);
        ap_json *bs2 = ap_json_new_array();
        for (int s = 0; s < vs->nsources; s++) {
            if (!r->per[s].time_rows) continue;
            ap_json *o = ap_json_new_object();
            ap_json_add_string(o, "source", vs->sources[s]);
            ap_json_add_number(o, "time_mape", r->loso_src[s]);
            ap_json_push(bs2, o);
        }
        ap_json_add(lo, "by_source", bs2);
        ap_json_add(root, "leave_one_source_out", lo);
    }
    if (r->cross->n > 0) ap_json_add(root, "crosscheck", cross_json(r));
    if (r->oos->n > 0) ap_json_add(root, "out_of_sample", oos_json(r->oos));
    ap_err err = {{0}};
    if (bsrc && print_breakdown(r, bsrc, root, &err) != AP_OK) {
        ap_json_free(root);
        return ap_cli_fail(AP_ERR_INTERNAL, &err);
    }
    char *s = ap_json_print(root, 1);
    printf("%s\n", s ? s : "null");
    free(s);
    ap_json_free(root);
    return 0;
}

/* A run's memory verdict beside its time: its predicted peak above the GPU's memory, or within
 * it but not with the planning headroom. */
static const char *fit_note(const vrow *v) {
    if (!v->fits_device) return "  (predicted not to fit)";
    return v->fits ? "" : "  (fits, not with the planning headroom)";
}

static void print_rows(const vresult *r) {
    const vset *vs = r->vs;
    printf("%-24s %-14s %-34s %-18s %12s %12s %7s\n", "source", "model", "plan", "metric",
           "predicted", "measured", "error");
    for (int i = 0; i < vs->n; i++) {
        const vrow *v = &vs->rows[i];
        double scale = v->is_time ? 1.0 : AP_GIB;
        printf("%-24s %-14.14s %-34.34s %-18s %12.4g %12.4g %6.1f%%%s\n", v->source, v->model_name,
               v->plan_label, v->metric, v->predicted / scale, v->measured / scale,
               100 * fabs(v->predicted - v->measured) / v->measured,
               !strcmp(v->metric, "step_s") && !v->fits ? "  (predicted not to fit!)" : "");
    }
    printf("\n%-24s %10s %10s %12s %5s%s\n", "source", "time MAPE", "time max", "memory MAPE",
           "rows", r->do_loso ? "   left-out time MAPE" : "");
    for (int s = 0; s < vs->nsources; s++) {
        printf("%-24s %9.2f%% %9.2f%% %11.2f%% %5d", vs->sources[s], 100 * r->per[s].time_mape,
               100 * r->per[s].time_max, 100 * r->per[s].mem_mape, r->per[s].rows);
        if (r->do_loso && r->per[s].time_rows) printf("   %9.2f%%", 100 * r->loso_src[s]);
        printf("\n");
    }
    printf("%-24s %9.2f%% %9.2f%% %11.2f%% %5d\n", "overall (mean of sources)",
           100 * r->all.time_mape, 100 * r->all.time_max, 100 * r->all.mem_mape, r->all.rows);
    printf("memory max error %.2f%%; every published run predicted to fit: %s\n",
           100 * r->all.mem_max, r->all_fit ? "yes" : "NO");
    if (r->do_loso)
        printf("leave-one-source-out time MAPE %.2f%% (max row %.2f%%)\n",
               100 * r->loso.time_mape, 100 * r->loso.time_max);
}

static void print_shown(const vset *vs) {
    if (!vs->nshown) return;
    printf("\nlargest trainable model (shown, not scored: batch, sequence and host memory not "
           "stated)\n%-22s %-14s %5s %3s %4s %-28s %10s %16s\n", "source", "gpu", "gpus",
           "tp", "zero", "framework", "measured", "state bound");
    for (int i = 0; i < vs->nshown; i++) {
        const vshown *v = &vs->shown[i];
        char bound[48];
        if (v->bound_params > 0) snprintf(bound, sizeof bound, "%.2fB", v->bound_params / 1e9);
        else snprintf(bound, sizeof bound, "host-bound");
        printf("%-22s %-14s %5d %3d %4d %-28.28s %9.2fB %16s\n", v->source, v->gpu, v->gpus,
               v->tp, v->zero, v->framework, v->measured_params / 1e9, bound);
    }
    printf("(state bound = usable memory x tp / model-state bytes per parameter: no model "
           "that ran exceeds it)\n");
}

static void print_cross(const vresult *r) {
    const vset *cross = r->cross;
    if (cross->n == 0) return;
    errstat ca, cper[MAX_SOURCES];
    ap_validation_summarize(cross, NULL, 0, &ca, cper);
    printf("\ncross-check on %s", r->cgpu[0]);
    for (int k = 1; k < r->ncgpu; k++) printf("%s%s", k + 1 < r->ncgpu ? ", " : " and ", r->cgpu[k]);
    printf(" (shown, not scored; each GPU's GEMM efficiency is fitted on its rows, so the "
           "error is in-sample):\n");
    for (int i = 0; i < cross->n; i++) {
        const vrow *v = &cross->rows[i];
        printf("%-24s %-14.14s %-34.34s %-10s %8.3f s %8.3f s %6.1f%%%s\n", v->source,
               v->model_name, v->plan_label, ap_dtype_name(v->plan.dtype), v->predicted,
               v->measured, 100 * fabs(v->predicted - v->measured) / v->measured,
               fit_note(v));
    }
    printf("cross-check time MAPE %.2f%%, max %.2f%%\n", 100 * ca.time_mape, 100 * ca.time_max);
    for (int k = 0; k < r->ncgpu; k++)
        printf("calibration of %s: as below, gemm_eff_max %.4f, gemm_half_flops %.4g\n",
               r->cgpu[k], r->ccal[k].gemm_eff_max, r->ccal[k].gemm_half_flops);
}

/* One out-of-sample row: times in seconds, memory in GiB, OOM records as predicted or not. */
static void print_oos_row(const vrow *v) {
    if (v->refused[0]) {
        printf("%-24s %-10.10s %-13s %-38.38s REFUSED: %s\n", v->source, v->model_name,
               v->cluster.gpu.name, v->plan_label, v->refused);
        return;
    }
    if (v->is_oom) {
        printf("%-24s %-10.10s %-13s %-38.38s recorded out of memory: %s%s\n", v->source,
               v->model_name, v->cluster.gpu.name, v->plan_label,
               v->predicted >= 0.5 ? "predicted not to fit" : "PREDICTED TO FIT",
               v->predicted < 0.5 && !v->fits ? " (not with the planning headroom)" : "");
        return;
    }
    double scale = v->is_time ? 1.0 : AP_GIB;
    const char *unit = v->is_time ? "s  " : "GiB";
    printf("%-24s %-10.10s %-13s %-38.38s %8.3f %s %8.3f %s %+6.1f%%%s\n", v->source,
           v->model_name, v->cluster.gpu.name, v->plan_label, v->predicted / scale, unit,
           v->measured / scale, unit, 100 * (v->predicted - v->measured) / v->measured,
           v->is_time ? fit_note(v) : "");
}

static void print_oos(const vset *oos) {
    if (oos->n == 0) return;
    errstat oa, oper[MAX_SOURCES];
    ap_validation_summarize(oos, NULL, 0, &oa, oper);
    printf("\nout of sample (shown, not scored, never used in a fit; built-in calibration of "
           "each GPU):\n");
    for (int i = 0; i < oos->n; i++) print_oos_row(&oos->rows[i]);
    printf("\n%-24s %10s %10s %10s %12s %5s\n", "out-of-sample source", "time MAPE",
           "time bias", "time max", "memory MAPE", "rows");
    for (int s = 0; s < oos->nsources; s++) {
        printf("%-24s %9.2f%% %+9.2f%% %9.2f%% ", oos->sources[s], 100 * oper[s].time_mape,
               100 * oper[s].time_bias, 100 * oper[s].time_max);
        if (oper[s].mem_rows > 0) printf("%11.2f%% %5d\n", 100 * oper[s].mem_mape, oper[s].rows);
        else printf("%12s %5d\n", "-", oper[s].rows);
    }
    printf("out-of-sample time MAPE %.2f%%, max %.2f%% (MAPE: mean over sources)\n",
           100 * oa.time_mape, 100 * oa.time_max);
    if (oa.refused > 0)
        printf("runs autoplan refuses (REFUSED above, in no error): %d of %d\n", oa.refused,
               oa.rows);
    if (oa.mem_rows > 0)
        printf("out-of-sample memory MAPE %.2f%%, max %.2f%%\n", 100 * oa.mem_mape,
               100 * oa.mem_max);
    printf("recorded out-of-memory runs predicted not to fit: %d of %d (device peak above the "
           "GPU's memory); %d more within the %.0f GiB planning headroom\n", oa.oom_hit,
           oa.oom_rows, oom_tight(oos), AP_DEFAULT_HEADROOM_BYTES / AP_GIB);
    int ran, nofit, tight;
    ran_counts(oos, &ran, &nofit, &tight);
    printf("runs that ran predicted not to fit: %d of %d (device peak above the GPU's memory); "
           "%d more within the %.0f GiB planning headroom\n", nofit, ran, tight,
           AP_DEFAULT_HEADROOM_BYTES / AP_GIB);
}

/* Predict every row of a set with calibration cal (NULL: each row's GPU's built-in one); err
 * names the file, array and row. With `refuse`, a run the estimate finds infeasible (a
 * trainer's rule, a shape its degrees do not divide) is marked refused with the reason and the
 * others go on: a published run that autoplan cannot express is a finding to show, and one
 * such row would otherwise hide every other prediction. */
static ap_status predict_set(vset *vs, const ap_calib *cal, const char *path, const char *key,
                             int refuse, ap_err *err) {
    for (int i = 0; i < vs->n; i++) {
        vrow *v = &vs->rows[i];
        v->refused[0] = '\0';
        ap_status st = ap_validation_predict(v, cal, err);
        if (st == AP_ERR_INFEASIBLE && refuse) {
            snprintf(v->refused, sizeof v->refused, "%s", err->msg);
            v->predicted = 0;
            v->fits = v->fits_device = 1;
            continue;
        }
        if (st != AP_OK) {
            ap_err_prefix(err, "%s: %s[%d] (%s, %s)", path, key, i, vs->rows[i].model_name,
                          vs->rows[i].plan_label);
            return st;
        }
    }
    return AP_OK;
}

/* The calibration a cross-check row is predicted with: its GPU's (fit_cross). */
static const ap_calib *cross_cal(const vresult *r, const vrow *v) {
    for (int k = 0; k < r->ncgpu; k++)
        if (!strcmp(r->cgpu[k], v->cluster.gpu.name)) return &r->ccal[k];
    return NULL;
}

/* Cross-check rows run with the calibration of their own GPU; --fit refits only the GEMM
 * efficiency of each GPU on that GPU's rows (the other seven parameters stay the fit of the
 * scored rows, gemm_half_flops the GPU's own), then every row is predicted. */
static ap_status fit_cross(const char *path, vresult *r, ap_err *err) {
    r->ncgpu = 0;
    for (int i = 0; i < r->cross->n; i++) {
        const ap_gpu *g = &r->cross->rows[i].cluster.gpu;
        if (cross_cal(r, &r->cross->rows[i])) continue;
        if (r->ncgpu == MAX_CROSS_GPUS)
            return ap_err_set(err, AP_ERR_INPUT, "%s: crosscheck[%d]: more than %d GPUs in the "
                              "cross-check", path, i, MAX_CROSS_GPUS);
        int k = r->ncgpu++;
        snprintf(r->cgpu[k], sizeof r->cgpu[k], "%s", g->name);
        ap_calib_default(g, &r->ccal[k]);
        if (!r->fitted) continue;
        double keep_half = r->ccal[k].gemm_half_flops;
        r->ccal[k] = r->cal;
        r->ccal[k].gemm_half_flops = keep_half;
        vset *one = ap_vset_new();
        ap_status st = one ? ap_vset_copy(one, r->cross, err)
                           : ap_err_set(err, AP_ERR_NOMEM, "out of memory for the validation rows");
        if (st != AP_OK) {
            ap_vset_free(one);
            return st;
        }
        int n = 0;
        for (int j = 0; j < one->n; j++)
            if (!strcmp(one->rows[j].cluster.gpu.name, g->name)) one->rows[n++] = one->rows[j];
        one->n = n;
        ap_calib_fit_gemm_eff(one, &r->ccal[k]);
        ap_vset_free(one);
    }
    for (int i = 0; i < r->cross->n; i++) {
        vrow *v = &r->cross->rows[i];
        v->refused[0] = '\0';
        ap_status st = ap_validation_predict(v, cross_cal(r, v), err);
        if (st != AP_OK) {
            ap_err_prefix(err, "%s: crosscheck[%d] (%s, %s)", path, i, v->model_name,
                          v->plan_label);
            return st;
        }
    }
    return AP_OK;
}

/* Load the three sets, fit if asked, predict everything, score. */
static ap_status run_validation(const char *path, vresult *r, ap_err *err) {
    ap_status st;
    if ((st = ap_validation_load(path, "rows", r->vs, err)) != AP_OK) return st;
    if (r->vs->n == 0) return ap_err_set(err, AP_ERR_INPUT, "%s: no rows", path);
    if ((st = ap_validation_load(path, "crosscheck", r->cross, err)) != AP_OK ||
        (st = ap_validation_load(path, "outofsample", r->oos, err)) != AP_OK)
        return st;
    /* out-of-sample rows: never fitted, each with the built-in calibration of its GPU */
    if ((st = predict_set(r->oos, NULL, path, "outofsample", 1, err)) != AP_OK) return st;
    ap_calib_default(&r->vs->rows[0].cluster.gpu, &r->cal);
    if (r->fitted) ap_calib_fit(r->vs, &r->cal, NULL);
    if ((st = fit_cross(path, r, err)) != AP_OK) return st;
    /* the scored rows with the calibration shown below when it is fitted, else each with the
     * built-in one of its own GPU (the bundled rows are all A100s: the same figures) */
    if ((st = predict_set(r->vs, r->fitted ? &r->cal : NULL, path, "rows", 0, err)) != AP_OK)
        return st;
    ap_validation_summarize(r->vs, NULL, 0, &r->all, r->per);
    /* runs that ran must fit (Figure 1's no-recompute bars are not runs: they exceed 80 GB) */
    r->all_fit = 1;
    for (int i = 0; i < r->vs->n; i++)
        if (!strcmp(r->vs->rows[i].metric, "step_s")) r->all_fit &= r->vs->rows[i].fits;
    if (r->do_loso) {
        ap_calib base;
        ap_calib_default(&r->vs->rows[0].cluster.gpu, &base);
        return ap_validation_leave_one_out(r->vs, &base, &r->loso, r->loso_src, err);
    }
    return AP_OK;
}

/* Both sets of predictions for the GPUs that have a measured profile in the database (the
 * newest of each, or --profile NAME): every time row of that GPU predicted with the published
 * tables and with the profile, built-in calibration, side by side. */
static void print_measured(const vresult *r, ap_flags *fl) {
    const char *want = ap_flags_value(fl, "profile");
    if (want && !strcmp(want, "none")) return;
    ap_db *db = NULL;
    int missing = 0;
    ap_err err;
    if (ap_cli_db_open_ro(fl, &db, &missing, &err) != AP_OK || missing) {
        if (want) printf("\n--profile %s: %s\n", want, err.msg);
        return;
    }
    const vset *sets[] = {r->vs, r->cross, r->oos};
    char done[16][32];
    int ndone = 0;
    for (int si = 0; si < 3; si++)
        for (int i = 0; i < sets[si]->n; i++) {
            const char *gpu = sets[si]->rows[i].cluster.gpu.name;
            int seen = 0;
            for (int k = 0; k < ndone; k++) seen |= !strcmp(done[k], gpu);
            if (seen || ndone == 16) continue;
            snprintf(done[ndone++], sizeof done[0], "%s", gpu);
            char name[64] = "";
            if (want) snprintf(name, sizeof name, "%s", want);
            else if (ap_db_profile_newest(db, gpu, name, &err) != AP_OK || !name[0]) continue;
            ap_profile p;
            if (ap_db_profile_get(db, name, &p, &err) != AP_OK || !p.n || strcmp(p.gpu, gpu)) {
                ap_profile_free(&p);
                continue;
            }
            printf("\n%s: published tables vs measured profile '%s' (%zu rows; built-in "
                   "calibration; --profile none leaves this out)\n", gpu, name, p.n);
            double sum_pub = 0, sum_meas = 0;
            int n = 0;
            for (int sj = 0; sj < 3; sj++)
                for (int j = 0; j < sets[sj]->n; j++) {
                    vrow a = sets[sj]->rows[j], b = a;
                    if (strcmp(a.cluster.gpu.name, gpu) || !a.is_time || a.is_oom) continue;
                    if (ap_validation_predict_profile(&a, NULL, NULL, &err) != AP_OK ||
                        ap_validation_predict_profile(&b, NULL, &p, &err) != AP_OK)
                        continue;
                    double ea = (a.predicted - a.measured) / a.measured;
                    double eb = (b.predicted - b.measured) / b.measured;
                    printf("  %-24s %-10.10s %-38.38s %8.3f s  published %8.3f s %+6.1f%%  "
                           "measured %8.3f s %+6.1f%%\n", a.source, a.model_name, a.plan_label,
                           a.measured, a.predicted, 100 * ea, b.predicted, 100 * eb);
                    sum_pub += fabs(ea);
                    sum_meas += fabs(eb);
                    n++;
                }
            if (n)
                printf("  time MAPE over %d rows: published %.2f%%, with the profile %.2f%%\n", n,
                       100 * sum_pub / n, 100 * sum_meas / n);
            ap_profile_free(&p);
        }
    ap_db_close(db);
}

/* ---- --breakdown SOURCE ----------------------------------------------------------------------
 * Every step-time row of that source ("all": of every source) with its predicted step in the
 * parts the cost model adds up to it (estimate.h ap_time), each set with the calibration it was
 * predicted with above: where a source's error comes from. */
static const struct {
    const char *head, *key;
    size_t off;
} parts[] = {
    {"compute", "compute_s", offsetof(ap_time, compute_s)},
    {"recomp", "recompute_s", offsetof(ap_time, recompute_s)},
    {"TP", "tp_comm_s", offsetof(ap_time, tp_comm_s)},
    {"CP", "cp_comm_s", offsetof(ap_time, cp_comm_s)},
    {"EP", "ep_comm_s", offsetof(ap_time, ep_comm_s)},
    {"PP", "pp_comm_s", offsetof(ap_time, pp_comm_s)},
    {"DP", "dp_comm_s", offsetof(ap_time, dp_comm_s)},
    {"bubble", "bubble_s", offsetof(ap_time, bubble_s)},
    {"offload", "offload_s", offsetof(ap_time, offload_s)},
    {"optim", "optimizer_s", offsetof(ap_time, optimizer_s)},
    {"overhead", "overhead_s", offsetof(ap_time, overhead_s)},
};
enum { NPARTS = sizeof parts / sizeof parts[0] };

static double part_of(const ap_time *t, int i) {
    return *(const double *)((const char *)t + parts[i].off);
}

static int breakdown_row(const vrow *v, const char *src) {
    return !strcmp(v->metric, "step_s") && !v->refused[0] &&
           (!strcmp(src, "all") || !strcmp(v->source, src));
}

/* The three sets of rows, in the order validate lists them. */
static void breakdown_sets(const vresult *r, const vset *sets[3]) {
    sets[0] = r->vs;
    sets[1] = r->cross;
    sets[2] = r->oos;
}

/* The calibration row v of set si was predicted with (run_validation; NULL: its GPU's
 * built-in one). */
static const ap_calib *set_cal(const vresult *r, int si, const vrow *v) {
    if (si == 0) return r->fitted ? &r->cal : NULL;
    return si == 1 ? cross_cal(r, v) : NULL;
}

/* A source with no step-time row to show is an input error, named. */
static ap_status check_breakdown(const vresult *r, const char *src, const char *path,
                                 ap_err *err) {
    const vset *sets[3];
    breakdown_sets(r, sets);
    for (int si = 0; si < 3; si++)
        for (int i = 0; i < sets[si]->n; i++)
            if (breakdown_row(&sets[si]->rows[i], src)) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "--breakdown %s: %s has no step-time row of that "
                      "source (`autoplan validate --data %s` lists the sources; all: every one)",
                      src, path, path);
}

/* Each row's parts into the text report or, with json, an array under the document's
 * "breakdown" key. */
static ap_status print_breakdown(const vresult *r, const char *src, ap_json *json, ap_err *err) {
    const vset *sets[3];
    breakdown_sets(r, sets);
    ap_estimate *e = ap_malloc(sizeof *e);
    if (!e) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for an estimate");
    ap_json *arr = json ? ap_json_new_array() : NULL;
    if (!json) {
        printf("\nbreakdown of %s: the predicted step in the parts it adds up from (seconds; "
               "communication as it stays exposed)\n  %-24s %-10s %-46s %9s %9s %7s", src,
               "source", "model", "plan", "measured", "predicted", "error");
        for (int k = 0; k < NPARTS; k++) printf(" %8s", parts[k].head);
        printf("\n");
    }
    ap_status st = AP_OK;
    for (int si = 0; si < 3 && st == AP_OK; si++)
        for (int i = 0; i < sets[si]->n && st == AP_OK; i++) {
            const vrow *v = &sets[si]->rows[i];
            if (!breakdown_row(v, src)) continue;
            if ((st = ap_validation_estimate(v, set_cal(r, si, v), NULL, e, err)) != AP_OK) break;
            const ap_time *t = &e->time;
            if (json) {
                ap_json *o = ap_json_new_object(), *pj = ap_json_new_object();
                ap_json_add_string(o, "source", v->source);
                ap_json_add_string(o, "model", v->model_name);
                ap_json_add_string(o, "plan", v->plan_label);
                ap_json_add_number(o, "measured", v->measured);
                ap_json_add_number(o, "predicted", t->step_s);
                for (int k = 0; k < NPARTS; k++)
                    ap_json_add_number(pj, parts[k].key, part_of(t, k));
                ap_json_add(o, "parts", pj);
                ap_json_push(arr, o);
                continue;
            }
            printf("  %-24.24s %-10.10s %-46.46s %9.3f %9.3f %+6.1f%%", v->source,
                   v->model_name, v->plan_label, v->measured, t->step_s,
                   100 * (t->step_s - v->measured) / v->measured);
            for (int k = 0; k < NPARTS; k++) printf(" %8.3f", part_of(t, k));
            printf("\n");
        }
    ap_free(e);
    if (json) {
        if (st == AP_OK) ap_json_add(json, "breakdown", arr);
        else ap_json_free(arr);
    }
    return st;
}

/* --profile NAME names a stored profile, refused up front like estimate's (a misspelt name
 * would otherwise leave the comparison out without a word). */
static ap_status check_profile(ap_flags *fl, ap_err *err) {
    const char *want = ap_flags_value(fl, "profile");
    if (!want || !strcmp(want, "none")) return AP_OK;
    ap_status st = ap_db_profile_check_name(want, "--profile", err);
    if (st != AP_OK) return st;
    ap_db *db = NULL;
    int missing = 0;
    if ((st = ap_cli_db_open_ro(fl, &db, &missing, err)) != AP_OK) return st;
    if (missing)
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: there is no database yet (autoplan "
                          "profile import or profile bench stores one)", want);
    ap_profile p;
    st = ap_db_profile_get(db, want, &p, err);
    if (st == AP_OK && !p.n)
        st = ap_err_set(err, AP_ERR_INPUT, "--profile %s: no such profile (autoplan profile "
                        "list)", want);
    ap_profile_free(&p);
    ap_db_close(db);
    return st;
}

int ap_cmd_validate(int argc, char **argv) {
    ap_flags fl = {0};
    ap_err err = {{0}};
    int help = 0;
    ap_flags_add(&fl, "data", AP_FLAG_VALUE, "FILE",
                 "validation rows (default tests/data/validation.json of the source tree)");
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print {overall, by_source, rows, "
                 "crosscheck, out_of_sample} as JSON (crosscheck with each GPU's calibration); "
                 "errors are fractions");
    ap_flags_add(&fl, "leave-one-source-out", AP_FLAG_BOOL, NULL,
                 "fit on all sources but one, predict that one, for each source");
    ap_flags_add(&fl, "fit", AP_FLAG_BOOL, NULL,
                 "fit the calibration on all rows and print it (instead of the built-in one)");
    ap_flags_add(&fl, "profile", AP_FLAG_VALUE, "NAME|none",
                 "also predict with this measured profile (default: each GPU's newest in the "
                 "database; none: published tables only)");
    ap_flags_add(&fl, "breakdown", AP_FLAG_VALUE, "SOURCE|all",
                 "also print each step-time row of this source (all: of every source) with "
                 "its predicted step split into compute, recomputation, TP, CP, EP, PP and DP "
                 "communication left exposed, bubble, offload, optimizer and overhead (seconds; "
                 "--json: a \"breakdown\" array)");
    ap_cli_db_flag(&fl);
    ap_status st = ap_flags_parse(&fl, argc, argv, 0, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan validate [--data FILE] [--json] "
                                 "[--leave-one-source-out] [--breakdown SOURCE|all]",
                            "Predict the published training runs and report the errors.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if ((st = check_profile(&fl, &err)) != AP_OK) return ap_cli_fail(st, &err);
    const char *path = ap_flags_value(&fl, "data");
    char dflt[4096];
    if (!path) {
        snprintf(dflt, sizeof dflt, "%s/tests/data/validation.json", AP_SOURCE_DIR);
        path = dflt;
    }
    vresult r;
    memset(&r, 0, sizeof r);
    r.fitted = ap_flags_isset(&fl, "fit");
    r.do_loso = ap_flags_isset(&fl, "leave-one-source-out");
    r.vs = ap_vset_new();
    r.cross = ap_vset_new();
    r.oos = ap_vset_new();
    if (!r.vs || !r.cross || !r.oos)
        st = ap_err_set(&err, AP_ERR_NOMEM, "out of memory for the validation rows");
    else
        st = run_validation(path, &r, &err);
    const char *bsrc = ap_flags_value(&fl, "breakdown");
    if (st == AP_OK && bsrc) st = check_breakdown(&r, bsrc, path, &err);
    int rc = 0;
    if (st != AP_OK) {
        rc = ap_cli_fail(st, &err);
    } else if (ap_flags_isset(&fl, "json")) {
        rc = print_json(&r, bsrc);
    } else {
        print_rows(&r);
        print_shown(r.vs);
        print_cross(&r);
        print_oos(r.oos);
        print_measured(&r, &fl);
        printf("\ncalibration (%s):\n", r.fitted ? "fitted now" : "built in");
        print_calib(&r.cal);
        if (bsrc && (st = print_breakdown(&r, bsrc, NULL, &err)) != AP_OK)
            rc = ap_cli_fail(st, &err);
    }
    ap_vset_free(r.vs);
    ap_vset_free(r.cross);
    ap_vset_free(r.oos);
    return rc;
}
