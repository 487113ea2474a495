/*
 * validate.c - `autoplan validate`: predict every published run shipped in
 * tests/data/validation.json (built by tools/make_validation.py), report per-row, per-source
 * and overall errors, fit the eight calibration parameters (--fit) and estimate the error on
 * unseen runs by leaving each source out of the fit in turn (--leave-one-source-out).
 *
 * Time metrics (step_s, layer_s) form the time MAPE; memory metrics (activations_bytes,
 * states_bytes) the memory MAPE. Overall = mean over sources of each source's MAPE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/cli.h"

#define MAX_ROWS 512
#define MAX_SOURCES 16

typedef struct {
    char source[64];
    char metric[32];
    char model_name[64];
    char plan_label[160];
    ap_model model;
    ap_cluster cluster;
    ap_plan plan;
    double measured;
    double predicted;
    int fits;
    int is_time;
} vrow;

/* A largest-model row: shown beside the model-state bound, not scored. */
typedef struct {
    char source[64];
    char gpu[32];
    char framework[64];
    char mode[24];      /* states | optimizer-offload | unbounded */
    int gpus, tp, dp, zero;
    double measured_params;
    double bound_params; /* 0 = no bound (host memory not stated) */
} vshown;

typedef struct {
    vrow rows[MAX_ROWS];
    int n;
    vshown shown[64];
    int nshown;
    char sources[MAX_SOURCES][64];
    int nsources;
} vset;

/* Load the array `key` ("rows": scored; "crosscheck": shown with errors, not scored) into vs;
 * the "shown" capacity rows come with "rows". A missing "crosscheck" array is empty. */
static ap_status load_rows(const char *path, const char *key, vset *vs, ap_err *err) {
    ap_json *root = ap_json_parse_file(path, err);
    if (!root) return AP_ERR_INPUT;
    ap_json *rows = ap_json_get(root, key);
    ap_status st = AP_OK;
    vs->n = vs->nsources = vs->nshown = 0;
    if (!rows && strcmp(key, "rows") != 0) goto done;
    if (!ap_json_is_array(rows)) {
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an array", path, key);
        goto done;
    }
    vs->n = 0;
    vs->nsources = 0;
    for (int i = 0; i < ap_json_size(rows) && st == AP_OK; i++) {
        if (vs->n >= MAX_ROWS) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: more than %d rows", path, MAX_ROWS);
            break;
        }
        ap_json *r = ap_json_at(rows, i);
        vrow *v = &vs->rows[vs->n];
        memset(v, 0, sizeof *v);
        char where[4160];
        snprintf(where, sizeof where, "%s: %s[%d]", path, key, i);
        if ((st = ap_json_get_str(r, "source", v->source, sizeof v->source, NULL, where, err))) break;
        if ((st = ap_json_get_str(r, "metric", v->metric, sizeof v->metric, NULL, where, err))) break;
        if ((st = ap_json_get_real(r, "measured", 1e-9, 1e18, &v->measured, NULL, where, err))) break;
        v->is_time = !strcmp(v->metric, "step_s") || !strcmp(v->metric, "layer_s");
        if (!v->is_time && strcmp(v->metric, "activations_bytes") && strcmp(v->metric, "states_bytes")) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: unknown metric '%s'", where, v->metric);
            break;
        }
        /* model: native fields, parsed by the model reader */
        ap_json *mj = ap_json_get(r, "model");
        char *mtext = mj ? ap_json_print(mj, 0) : NULL;
        if (!mtext) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: missing field 'model'", where);
            break;
        }
        char mwhere[4224];
        snprintf(mwhere, sizeof mwhere, "%s.model", where);
        st = ap_model_parse(mtext, strlen(mtext), mwhere, &v->model, err);
        free(mtext);
        if (st) break;
        size_t nl = strnlen(v->model.name, sizeof v->model_name - 1);
        memcpy(v->model_name, v->model.name, nl);
        v->model_name[nl] = '\0';
        /* an HF config has no name of its own: the row may give one */
        int named = 0;
        if ((st = ap_json_get_str(r, "model_name", v->model_name, sizeof v->model_name, &named,
                                  where, err)))
            break;
        /* cluster */
        char gpu[64], net[64];
        int64_t gpus, gpn;
        if ((st = ap_json_get_str(r, "gpu", gpu, sizeof gpu, NULL, where, err))) break;
        if ((st = ap_json_get_int(r, "gpus", 1, 1 << 20, &gpus, NULL, where, err))) break;
        if ((st = ap_json_get_int(r, "gpus_per_node", 1, 1024, &gpn, NULL, where, err))) break;
        if ((st = ap_json_get_str(r, "network_bw", net, sizeof net, NULL, where, err))) break;
        const ap_gpu *g;
        if ((st = ap_gpu_lookup(gpu, where, &g, err))) break;
        ap_cluster_from_gpu(g, (int)gpus, &v->cluster);
        ap_cluster_set_gpus_per_node(&v->cluster, (int)gpn);
        if ((st = ap_parse_bandwidth(net, where, &v->cluster.net_bytes_per_s, err))) break;
        /* plan */
        ap_json *pj = ap_json_get(r, "plan");
        ap_plan *p = &v->plan;
        ap_plan_init(p);
        int64_t x;
        snprintf(mwhere, sizeof mwhere, "%s.plan", where);
#define GETI(k, lo, hi, dst) \
    if ((st = ap_json_get_int(pj, k, lo, hi, &x, NULL, mwhere, err))) break; \
    dst = x;
        GETI("tp", 1, 4096, p->tp); GETI("pp", 1, 4096, p->pp); GETI("dp", 1, 1 << 20, p->dp);
        GETI("cp", 1, 4096, p->cp); GETI("vp", 1, 4096, p->vp); GETI("mbs", 1, 1 << 20, p->mbs);
        GETI("gbs", 1, (int64_t)1 << 32, p->gbs); GETI("zero", 0, 3, p->zero);
#undef GETI
        char rc[32], dt[16];
        int sp = 0, ov = 0, fa = 1;
        if ((st = ap_json_get_str(pj, "recompute", rc, sizeof rc, NULL, mwhere, err))) break;
        if ((st = ap_json_get_str(pj, "dtype", dt, sizeof dt, NULL, mwhere, err))) break;
        if ((st = ap_json_get_bool(pj, "sp", &sp, NULL, mwhere, err))) break;
        if ((st = ap_json_get_bool(pj, "overlap", &ov, NULL, mwhere, err))) break;
        int fa_given = 0;
        if ((st = ap_json_get_bool(pj, "flash_attn", &fa, &fa_given, mwhere, err))) break;
        p->recompute = !strcmp(rc, "full") ? AP_RECOMPUTE_FULL
                       : !strcmp(rc, "selective") ? AP_RECOMPUTE_SELECTIVE : AP_RECOMPUTE_NONE;
        if ((st = ap_dtype_parse(dt, &p->dtype))) {
            ap_err_set(err, st, "%s: unknown dtype '%s'", mwhere, dt);
            break;
        }
        p->sp = sp;
        p->flash_attn = fa;
        /* Megatron overlaps the parameter gather only with its distributed optimizer */
        p->overlap_grad = ov;
        p->overlap_param = ov && p->zero == 1;
        p->overlap_tp = ov && sp && p->tp > 1;
        p->seq = v->model.seq_len;
        int seq_given = 0;
        if ((st = ap_json_get_int(pj, "seq", 1, 1 << 24, &x, &seq_given, mwhere, err))) break;
        if (seq_given) p->seq = x;
        p->grad_accum = p->gbs / (p->mbs * p->dp);
        p->trainer = AP_TRAINER_MEGATRON;
        char trn[32];
        int trn_given = 0;
        if ((st = ap_json_get_str(pj, "trainer", trn, sizeof trn, &trn_given, mwhere, err))) break;
        if (trn_given && (st = ap_trainer_parse(trn, &p->trainer, err))) {
            ap_err_prefix(err, "%s", mwhere);
            break;
        }
        /* overlap as the trainer offers it at this ZeRO stage */
        const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
        if (trn_given) {
            p->overlap_grad = ov && tc->overlap_grad;
            p->overlap_param = ov && tc->overlap_param && (tc->overlap_param_zero_mask & (1u << p->zero));
            p->overlap_tp = ov && sp && p->tp > 1 && tc->overlap_tp;
        }
        ap_plan_label(p, v->plan_label, sizeof v->plan_label);
        int known = 0;
        for (int s = 0; s < vs->nsources; s++)
            if (!strcmp(vs->sources[s], v->source)) known = 1;
        if (!known && vs->nsources < MAX_SOURCES) {
            memcpy(vs->sources[vs->nsources], v->source, sizeof v->source);
            vs->nsources++;
        }
        vs->n++;
    }
    /* shown rows (optional) */
    ap_json *sh = strcmp(key, "rows") == 0 ? ap_json_get(root, "shown") : NULL;
    vs->nshown = 0;
    for (int i = 0; st == AP_OK && i < ap_json_size(sh) && vs->nshown < 64; i++) {
        ap_json *r = ap_json_at(sh, i);
        vshown *v = &vs->shown[vs->nshown];
        memset(v, 0, sizeof *v);
        char where[4160];
        snprintf(where, sizeof where, "%s: shown[%d]", path, i);
        int64_t x;
        if ((st = ap_json_get_str(r, "source", v->source, sizeof v->source, NULL, where, err))) break;
        if ((st = ap_json_get_str(r, "gpu", v->gpu, sizeof v->gpu, NULL, where, err))) break;
        if ((st = ap_json_get_str(r, "framework", v->framework, sizeof v->framework, NULL, where, err))) break;
        if ((st = ap_json_get_str(r, "mode", v->mode, sizeof v->mode, NULL, where, err))) break;
        if ((st = ap_json_get_int(r, "gpus", 1, 1 << 20, &x, NULL, where, err))) break;
        v->gpus = (int)x;
        if ((st = ap_json_get_int(r, "tp", 1, 4096, &x, NULL, where, err))) break;
        v->tp = (int)x;
        if ((st = ap_json_get_int(r, "dp", 1, 1 << 20, &x, NULL, where, err))) break;
        v->dp = (int)x;
        if ((st = ap_json_get_int(r, "zero", 0, 3, &x, NULL, where, err))) break;
        v->zero = (int)x;
        if ((st = ap_json_get_real(r, "measured_params", 1, 1e16, &v->measured_params, NULL, where, err))) break;
        const ap_gpu *g;
        if ((st = ap_gpu_lookup(v->gpu, where, &g, err))) break;
        /* the bound: usable memory / model-state bytes per parameter, ZeRO paper accounting
         * (2 + 2 + 12, as DeepSpeed's ZeRO-1 of 2020); with ZeRO-Offload (ZeRO-2 with the
         * optimizer, its states and the gradients on the CPU) the GPU keeps the 16-bit
         * parameters only */
        ap_plan p;
        ap_plan_init(&p);
        p.trainer = AP_TRAINER_COLOSSALAI;
        p.zero = v->zero;
        double w, gr, o;
        ap_mem_model_states(&p, 1.0, v->dp, &w, &gr, &o);
        double per = !strcmp(v->mode, "optimizer-offload") ? w : w + gr + o;
        v->bound_params = !strcmp(v->mode, "unbounded") ? 0 : g->mem_bytes * v->tp / per;
        vs->nshown++;
    }
done:
    ap_json_free(root);
    return st;
}

/* Predict one row's metric under calibration cal. */
static ap_status predict(vrow *v, const ap_calib *cal, ap_err *err) {
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    o.calib = cal;
    static ap_estimate e;
    ap_status st;
    if (!strcmp(v->metric, "layer_s")) {
        /* one layer's forward + backward: difference of a 2-layer and a 1-layer model */
        ap_model m1 = v->model, m2 = v->model;
        m1.layers = 1;
        m2.layers = 2;
        ap_plan p = v->plan;
        p.pp = 1;
        p.vp = 1;
        if ((st = ap_estimate_plan(&m2, &v->cluster, &p, &o, &e, err))) return st;
        double t2 = e.time.stage_fwd_s[0] + e.time.stage_bwd_s[0];
        if ((st = ap_estimate_plan(&m1, &v->cluster, &p, &o, &e, err))) return st;
        double t1 = e.time.stage_fwd_s[0] + e.time.stage_bwd_s[0];
        v->predicted = t2 - t1;
        v->fits = 1;
        return AP_OK;
    }
    if ((st = ap_estimate_plan(&v->model, &v->cluster, &v->plan, &o, &e, err))) return st;
    v->fits = e.fits;
    const ap_stage_mem *s0 = &e.stages[0];
    /* states: a stage holding only transformer layers, as the transcribed readings count */
    const ap_stage_mem *sm = &e.stages[e.nstages > 2 ? 1 : 0];
    if (!strcmp(v->metric, "step_s")) v->predicted = e.time.step_s;
    else if (!strcmp(v->metric, "activations_bytes")) v->predicted = s0->layer_activations_bytes;
    else v->predicted = sm->params_bytes + sm->grads_bytes + sm->optimizer_bytes;
    return AP_OK;
}

typedef struct {
    double time_mape, time_max, mem_mape, mem_max;
    int rows, time_rows, mem_rows;
} errstat;

/* Errors of rows whose source is (or, with exclude, is not) `only` (NULL = all). Overall MAPE =
 * mean over sources. */
static void summarize(const vset *vs, const char *only, int exclude, errstat *out,
                      errstat per[MAX_SOURCES]) {
    memset(out, 0, sizeof *out);
    int nts = 0, nms = 0;
    for (int s = 0; s < vs->nsources; s++) {
        errstat *ps = &per[s];
        memset(ps, 0, sizeof *ps);
        int in = !only || (!strcmp(vs->sources[s], only) != !!exclude);
        for (int i = 0; i < vs->n; i++) {
            const vrow *v = &vs->rows[i];
            if (strcmp(v->source, vs->sources[s])) continue;
            double e = fabs(v->predicted - v->measured) / v->measured;
            ps->rows++;
            if (v->is_time) {
                ps->time_mape += e;
                ps->time_rows++;
                if (e > ps->time_max) ps->time_max = e;
            } else {
                ps->mem_mape += e;
                ps->mem_rows++;
                if (e > ps->mem_max) ps->mem_max = e;
            }
        }
        if (ps->time_rows) ps->time_mape /= ps->time_rows;
        if (ps->mem_rows) ps->mem_mape /= ps->mem_rows;
        if (!in) continue;
        out->rows += ps->rows;
        if (ps->time_rows) {
            out->time_mape += ps->time_mape;
            nts++;
            if (ps->time_max > out->time_max) out->time_max = ps->time_max;
        }
        if (ps->mem_rows) {
            out->mem_mape += ps->mem_mape;
            nms++;
            if (ps->mem_max > out->mem_max) out->mem_max = ps->mem_max;
        }
    }
    if (nts) out->time_mape /= nts;
    if (nms) out->mem_mape /= nms;
}

static double objective(vset *vs, const ap_calib *cal, const char *leave_out) {
    for (int i = 0; i < vs->n; i++) {
        vrow *v = &vs->rows[i];
        if (!v->is_time) continue;
        if (leave_out && !strcmp(v->source, leave_out)) continue;
        if (predict(v, cal, NULL) != AP_OK) return 1e9;
    }
    errstat all, per[MAX_SOURCES];
    summarize(vs, leave_out, 1, &all, per);
    /* mean MAPE over sources plus a little of the worst row, so no source is sacrificed */
    return all.time_mape + 0.25 * all.time_max;
}

/* Coordinate search in log space within physical bounds. */
static void fit(vset *vs, ap_calib *cal, const char *leave_out) {
    double *par[8] = {&cal->gemm_eff_max, &cal->gemm_half_flops, &cal->attn_eff, &cal->link_eff,
                      &cal->net_eff, &cal->coll_latency_s, &cal->step_overhead_s,
                      &cal->mem_bound_eff};
    /* physical ranges: cuBLAS does not exceed ~95% of peak nor fall below half on large
     * GEMMs; NCCL reaches 60-95% of NVLink and InfiniBand line rates (nccl-tests); latency
     * per step 2-50 us; HBM streaming kernels 50-95% */
    const double lo[8] = {0.50, 1e8, 0.20, 0.60, 0.60, 2e-6, 0.0, 0.50};
    const double hi[8] = {0.95, 5e10, 0.90, 0.95, 0.95, 5e-5, 0.5, 0.95};
    double best = objective(vs, cal, leave_out);
    double step = 0.25;
    for (int round = 0; round < 60 && step > 1e-3; round++) {
        int improved = 0;
        for (int k = 0; k < 8; k++) {
            for (int dir = -1; dir <= 1; dir += 2) {
                double old = *par[k];
                double nv = k == 6 ? old + dir * step * 0.1 : old * exp(dir * step);
                if (nv < lo[k]) nv = lo[k];
                if (nv > hi[k]) nv = hi[k];
                if (nv == old) continue;
                *par[k] = nv;
                double f = objective(vs, cal, leave_out);
                if (f < best - 1e-12) {
                    best = f;
                    improved = 1;
                } else {
                    *par[k] = old;
                }
            }
        }
        if (!improved) step *= 0.5;
    }
}

/* One-dimensional golden-section search of gemm_eff_max on the time rows of vs. */
static void fit_gemm_eff(vset *vs, ap_calib *cal) {
    double lo = 0.40, hi = 0.95;
    const double g = 0.6180339887498949;
    for (int it = 0; it < 40; it++) {
        double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
        cal->gemm_eff_max = a;
        double fa = objective(vs, cal, NULL);
        cal->gemm_eff_max = b;
        double fb = objective(vs, cal, NULL);
        if (fa < fb) hi = b;
        else lo = a;
    }
    cal->gemm_eff_max = 0.5 * (lo + hi);
}

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
    printf("  gemm_eff_max     %.4f   achievable fraction of dense peak on large GEMMs\n", c->gemm_eff_max);
    printf("  gemm_half_flops  %.4g   GEMM size (FLOPs) at half of that efficiency\n", c->gemm_half_flops);
    printf("  attn_eff         %.4f   attention matmuls with materialised scores, fraction of peak\n", c->attn_eff);
    printf("  link_eff         %.4f   achieved fraction of NVLink bandwidth\n", c->link_eff);
    printf("  net_eff          %.4f   achieved fraction of network bandwidth\n", c->net_eff);
    printf("  coll_latency_s   %.3g   per collective step\n", c->coll_latency_s);
    printf("  step_overhead_s  %.4f   fixed per-step overhead\n", c->step_overhead_s);
    printf("  mem_bound_eff    %.4f   achieved fraction of HBM bandwidth\n", c->mem_bound_eff);
}

int ap_cmd_validate(int argc, char **argv) {
    static ap_flags fl;
    static vset vs;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    ap_flags_add(&fl, "data", AP_FLAG_VALUE, "FILE",
                 "validation rows (default tests/data/validation.json of the source tree)");
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print {overall, by_source, rows} as JSON; "
                 "errors are fractions");
    ap_flags_add(&fl, "leave-one-source-out", AP_FLAG_BOOL, NULL,
                 "fit on all sources but one, predict that one, for each source");
    ap_flags_add(&fl, "fit", AP_FLAG_BOOL, NULL,
                 "fit the calibration on all rows and print it (instead of the built-in one)");
    ap_status st = ap_flags_parse(&fl, argc, argv, 0, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan validate [--data FILE] [--json] [--leave-one-source-out]",
                            "Predict the published training runs and report the errors.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    const char *path = ap_flags_value(&fl, "data");
    char dflt[4096];
    if (!path) {
        snprintf(dflt, sizeof dflt, "%s/tests/data/validation.json", AP_SOURCE_DIR);
        path = dflt;
    }
    if ((st = load_rows(path, "rows", &vs, &err)) != AP_OK) return ap_cli_fail(st, &err);
    if (vs.n == 0) {
        fprintf(stderr, "autoplan: %s: no rows\n", path);
        return 2;
    }
    static vset cross, oos;
    if ((st = load_rows(path, "crosscheck", &cross, &err)) != AP_OK) return ap_cli_fail(st, &err);
    if ((st = load_rows(path, "outofsample", &oos, &err)) != AP_OK) return ap_cli_fail(st, &err);
    /* out-of-sample rows: never fitted, each with the built-in calibration of its GPU */
    for (int i = 0; i < oos.n; i++) {
        ap_calib oc;
        ap_calib_default(&oos.rows[i].cluster.gpu, &oc);
        if ((st = predict(&oos.rows[i], &oc, &err)) != AP_OK) {
            ap_err_prefix(&err, "%s: outofsample[%d]", path, i);
            return ap_cli_fail(st, &err);
        }
    }
    ap_calib cal;
    ap_calib_default(&vs.rows[0].cluster.gpu, &cal);
    if (ap_flags_isset(&fl, "fit")) fit(&vs, &cal, NULL);
    /* cross-check rows run with the calibration of their own GPU; --fit refits only the GEMM
     * efficiency of that GPU on them (the other seven parameters stay the fit above) */
    ap_calib ccal;
    if (cross.n > 0) {
        ap_calib_default(&cross.rows[0].cluster.gpu, &ccal);
        if (ap_flags_isset(&fl, "fit")) {
            double keep_half = ccal.gemm_half_flops;
            ccal = cal;
            ccal.gemm_half_flops = keep_half;
            fit_gemm_eff(&cross, &ccal);
        }
        for (int i = 0; i < cross.n; i++)
            if ((st = predict(&cross.rows[i], &ccal, &err)) != AP_OK) {
                ap_err_prefix(&err, "%s: crosscheck[%d]", path, i);
                return ap_cli_fail(st, &err);
            }
    }
    for (int i = 0; i < vs.n; i++)
        if ((st = predict(&vs.rows[i], &cal, &err)) != AP_OK) {
            ap_err_prefix(&err, "%s: rows[%d] (%s, %s)", path, i, vs.rows[i].model_name,
                          vs.rows[i].plan_label);
            return ap_cli_fail(st, &err);
        }
    errstat all, per[MAX_SOURCES];
    summarize(&vs, NULL, 0, &all, per);
    /* runs that ran must fit (Figure 1's no-recompute bars are not runs: they exceed 80 GB) */
    int all_fit = 1;
    for (int i = 0; i < vs.n; i++)
        if (!strcmp(vs.rows[i].metric, "step_s")) all_fit &= vs.rows[i].fits;

    /* leave one source out: fit without it, predict it */
    errstat loso = {0};
    double loso_src[MAX_SOURCES] = {0};
    int do_loso = ap_flags_isset(&fl, "leave-one-source-out");
    if (do_loso) {
        static vset tmp;
        int nts = 0;
        for (int s = 0; s < vs.nsources; s++) {
            tmp = vs;
            ap_calib c2 = cal;
            ap_calib_default(&vs.rows[0].cluster.gpu, &c2);
            fit(&tmp, &c2, vs.sources[s]);
            for (int i = 0; i < tmp.n; i++) predict(&tmp.rows[i], &c2, NULL);
            errstat one, per2[MAX_SOURCES];
            summarize(&tmp, vs.sources[s], 0, &one, per2);
            loso_src[s] = one.time_mape;
            if (one.time_rows || per2[s].time_rows) {
                loso.time_mape += per2[s].time_mape;
                if (per2[s].time_max > loso.time_max) loso.time_max = per2[s].time_max;
                nts++;
            }
        }
        if (nts) loso.time_mape /= nts;
    }

    if (ap_flags_isset(&fl, "json")) {
        ap_json *root = ap_json_new_object();
        ap_json_add(root, "overall", errjson(&all, 1));
        ap_json *bs = ap_json_new_array();
        for (int s = 0; s < vs.nsources; s++) {
            ap_json *o = errjson(&per[s], 0);
            ap_json *o2 = ap_json_new_object();
            ap_json_add_string(o2, "source", vs.sources[s]);
            ap_json_add_number(o2, "time_mape", per[s].time_mape);
            ap_json_add_number(o2, "time_max", per[s].time_max);
            ap_json_add_number(o2, "memory_mape", per[s].mem_mape);
            ap_json_add_number(o2, "rows", per[s].rows);
            ap_json_free(o);
            ap_json_push(bs, o2);
        }
        ap_json_add(root, "by_source", bs);
        ap_json *rows = ap_json_new_array();
        for (int i = 0; i < vs.n; i++) {
            const vrow *v = &vs.rows[i];
            ap_json *o = ap_json_new_object();
            ap_json_add_string(o, "source", v->source);
            ap_json_add_string(o, "model", v->model_name);
            ap_json_add_string(o, "plan", v->plan_label);
            ap_json_add_string(o, "metric", v->metric);
            ap_json_add_number(o, "predicted", v->predicted);
            ap_json_add_number(o, "measured", v->measured);
            ap_json_add_number(o, "error", fabs(v->predicted - v->measured) / v->measured);
            ap_json_push(rows, o);
        }
        ap_json_add(root, "rows", rows);
        /* the schema above is exact; --leave-one-source-out adds one object beside it */
        if (do_loso) {
            ap_json *lo = ap_json_new_object();
            ap_json_add_number(lo, "time_mape", loso.time_mape);
            ap_json_add_number(lo, "time_max", loso.time_max);
            ap_json *bs2 = ap_json_new_array();
            for (int s = 0; s < vs.nsources; s++) {
                if (!per[s].time_rows) continue;
                ap_json *o = ap_json_new_object();
                ap_json_add_string(o, "source", vs.sources[s]);
                ap_json_add_number(o, "time_mape", loso_src[s]);
                ap_json_push(bs2, o);
            }
            ap_json_add(lo, "by_source", bs2);
            ap_json_add(root, "leave_one_source_out", lo);
        }
        char *s = ap_json_print(root, 1);
        printf("%s\n", s ? s : "null");
        free(s);
        ap_json_free(root);
        return 0;
    }
    printf("%-24s %-14s %-34s %-18s %12s %12s %7s\n", "source", "model", "plan", "metric",
           "predicted", "measured", "error");
    for (int i = 0; i < vs.n; i++) {
        const vrow *v = &vs.rows[i];
        double scale = v->is_time ? 1.0 : 1073741824.0;
        printf("%-24s %-14.14s %-34.34s %-18s %12.4g %12.4g %6.1f%%%s\n", v->source, v->model_name,
               v->plan_label, v->metric, v->predicted / scale, v->measured / scale,
               100 * fabs(v->predicted - v->measured) / v->measured, !strcmp(v->metric, "step_s") && !v->fits ? "  (predicted not to fit!)" : "");
    }
    printf("\n%-24s %10s %10s %12s %5s%s\n", "source", "time MAPE", "time max", "memory MAPE",
           "rows", do_loso ? "   left-out time MAPE" : "");
    for (int s = 0; s < vs.nsources; s++) {
        printf("%-24s %9.2f%% %9.2f%% %11.2f%% %5d", vs.sources[s], 100 * per[s].time_mape,
               100 * per[s].time_max, 100 * per[s].mem_mape, per[s].rows);
        if (do_loso && per[s].time_rows) printf("   %9.2f%%", 100 * loso_src[s]);
        printf("\n");
    }
    printf("%-24s %9.2f%% %9.2f%% %11.2f%% %5d\n", "overall (mean of sources)", 100 * all.time_mape,
           100 * all.time_max, 100 * all.mem_mape, all.rows);
    printf("memory max error %.2f%%; every published run predicted to fit: %s\n",
           100 * all.mem_max, all_fit ? "yes" : "NO");
    if (do_loso)
        printf("leave-one-source-out time MAPE %.2f%% (max row %.2f%%)\n", 100 * loso.time_mape,
               100 * loso.time_max);
    if (vs.nshown) {
        printf("\nlargest trainable model (shown, not scored: batch, sequence and host memory not "
               "stated)\n%-22s %-14s %5s %3s %4s %-28s %10s %16s\n", "source", "gpu", "gpus",
               "tp", "zero", "framework", "measured", "state bound");
        for (int i = 0; i < vs.nshown; i++) {
            const vshown *v = &vs.shown[i];
            char bound[48];
            if (v->bound_params > 0) snprintf(bound, sizeof bound, "%.2fB", v->bound_params / 1e9);
            else snprintf(bound, sizeof bound, "host-bound");
            printf("%-22s %-14s %5d %3d %4d %-28.28s %9.2fB %16s\n", v->source, v->gpu, v->gpus,
                   v->tp, v->zero, v->framework, v->measured_params / 1e9, bound);
        }
        printf("(state bound = usable memory x tp / model-state bytes per parameter: no model "
               "that ran exceeds it)\n");
    }
    if (cross.n > 0) {
        errstat ca, cper[MAX_SOURCES];
        summarize(&cross, NULL, 0, &ca, cper);
        printf("\ncross-check on %s (shown, not scored; its GEMM efficiency is fitted on these "
               "rows, so the error is in-sample):\n", cross.rows[0].cluster.gpu.name);
        for (int i = 0; i < cross.n; i++) {
            const vrow *v = &cross.rows[i];
            printf("%-24s %-14.14s %-34.34s %-10s %8.3f s %8.3f s %6.1f%%%s\n", v->source,
                   v->model_name, v->plan_label, ap_dtype_name(v->plan.dtype), v->predicted,
                   v->measured, 100 * fabs(v->predicted - v->measured) / v->measured,
                   v->fits ? "" : "  (predicted not to fit)");
        }
        printf("cross-check time MAPE %.2f%%, max %.2f%%\n", 100 * ca.time_mape, 100 * ca.time_max);
        printf("calibration of %s: as below, gemm_eff_max %.4f, gemm_half_flops %.4g\n",
               cross.rows[0].cluster.gpu.name, ccal.gemm_eff_max, ccal.gemm_half_flops);
    }
    if (oos.n > 0) {
        errstat oa, oper[MAX_SOURCES];
        summarize(&oos, NULL, 0, &oa, oper);
        printf("\nout of sample (shown, not scored, never used in a fit; built-in calibration of "
               "each GPU):\n");
        for (int i = 0; i < oos.n; i++) {
            const vrow *v = &oos.rows[i];
            printf("%-24s %-10.10s %-13s %-38.38s %8.3f s %8.3f s %+6.1f%%%s\n", v->source,
                   v->model_name, v->cluster.gpu.name, v->plan_label, v->predicted, v->measured,
                   100 * (v->predicted - v->measured) / v->measured,
                   v->fits ? "" : "  (predicted not to fit)");
        }
        printf("out-of-sample time MAPE %.2f%%, max %.2f%%\n", 100 * oa.time_mape, 100 * oa.time_max);
    }
    printf("\ncalibration (%s):\n", ap_flags_isset(&fl, "fit") ? "fitted now" : "built in");
    print_calib(&cal);
    return 0;
}
