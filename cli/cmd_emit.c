/*
 * cmd_emit.c - `autoplan emit --plan plan.json --emit LIST --out DIR`: trainer configs from a
 * saved plan (plan.json holds the model, cluster and estimate, so nothing else is needed).
 *
 * Prints one line per file written to stdout and one line per refused target to stderr (the
 * reason and the closest plan that target can express). Exit status (README): 0 when every
 * target named was written (with "all": at least one), 2 when a named target refused the plan
 * (the others are written) or on bad input, 1 on an I/O failure.
 *
 * plan.json's "estimate", which the configs' headers quote, is checked against the file's plan
 * and cluster first (check_estimate); a run that writes nothing leaves no directory it made
 * (ap_emit_files_ex).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "autoplan/emit.h"
#include "autoplan/planio.h"

/* ---- the estimate of plan.json ----------------------------------------------------------------
 * The configs' headers quote plan.json's "estimate" (step time, peak memory of capacity), which
 * the reader takes as any object. emit does not estimate again (the numbers may come from a
 * measured kernel profile this machine lacks), so what it copies is checked instead: the
 * numbers it prints must be possible (a step time above zero, a peak above zero, the capacity
 * of the cluster's GPU), and the plan the estimate was made for must be this file's plan, field
 * by field where the estimate has the field (older writers left some out). */

/* The member at dotted path `path` ("plan.offload.optimizer") of o, or NULL. */
static const ap_json *est_at(const ap_json *o, const char *path) {
    char key[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = ap_json_get(o, key);
        path += n + (path[n] == '.');
    }
    return o;
}

/* A number of the estimate that emit prints: absent is fine (the header says "?"); present, it
 * must be a finite number above zero. */
static ap_status est_positive(const char *file, const ap_json *est, const char *path,
                              const char *what, ap_err *err) {
    const ap_json *v = est_at(est, path);
    if (!v) return AP_OK;
    if (!ap_json_is_number(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be %s, got %s", file,
                          path, what, ap_json_type_name(v));
    double d = ap_json_number(v);
    if (!isfinite(d) || d <= 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be %s, got %g", file,
                          path, what, d);
    return AP_OK;
}

/* One field of the estimate's plan (the estimate's field table, planio.h) against the plan's
 * value in x (an estimate holding the file's plan). */
static ap_status est_plan_field(const char *file, const ap_json *est,
                                const ap_estimate_field *f, const ap_estimate *x,
                                const ap_model *m, const ap_cluster *c, ap_err *err) {
    const ap_json *v = est_at(est, f->path);
    if (!v) return AP_OK; /* not written by this file's writer */
    double want = ap_estimate_field_value(f, x);
    int is_enum = f->kind == AP_FIELD_TRAINER || f->kind == AP_FIELD_RECOMPUTE ||
                  f->kind == AP_FIELD_DTYPE || f->kind == AP_FIELD_ATTN_IMPL;
    const char *want_name = is_enum ? ap_estimate_field_name(f, (int)want) : NULL;
    char got[64] = "", plan[64] = "";
    int same;
    if (want_name) { /* trainer, recompute, dtype, attention kernel: by name */
        const char *s = ap_json_string(v);
        if (!ap_json_is_string(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be a string, got "
                              "%s", file, f->path, ap_json_type_name(v));
        same = !strcmp(s, want_name);
        /* the estimate records the kernel it priced: the plan's, or for "auto" the trainer's
           default (a simulated plan keeps "auto") */
        if (!same && f->kind == AP_FIELD_ATTN_IMPL)
            same = !strcmp(s, ap_attn_impl_name(ap_attn_default(&x->plan, m, &c->gpu)));
        snprintf(got, sizeof got, "'%.40s'", s);
        snprintf(plan, sizeof plan, "'%s'", want_name);
    } else if (f->kind == AP_FIELD_BOOL) {
        if (!ap_json_is_bool(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be true or false, "
                              "got %s", file, f->path, ap_json_type_name(v));
        same = ap_json_bool(v) == (want != 0);
        snprintf(got, sizeof got, "%s", ap_json_bool(v) ? "true" : "false");
        snprintf(plan, sizeof plan, "%s", want != 0 ? "true" : "false");
    } else {
        if (!ap_json_is_number(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be a number, got "
                              "%s", file, f->path, ap_json_type_name(v));
        double d = ap_json_number(v);
        /* the writer prints doubles that read back exactly; the slack is for hand-written
           fractions such as 0.1 */
        same = fabs(d - want) <= 1e-9 * fmax(1.0, fabs(want));
        snprintf(got, sizeof got, "%.10g", d);
        snprintf(plan, sizeof plan, "%.10g", want);
    }
    if (same) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' is %s, the plan's is %s (the "
                      "estimate is of another plan)", file, f->path, got, plan);
}

/* The members of the estimate's plan outside the field table: the split, FP8 weights and
 * recipe, the ZeRO group. (Not the label of a searched plan: the search labels a split that
 * only spreads the remainder of the layers as even, the plan file's reader as "uneven".) */
static ap_status est_plan_extras(const char *file, const ap_json *est, const ap_model *m,
                                 const ap_plan *p, ap_err *err) {
    const ap_json *sl = est_at(est, "plan.stage_layers");
    int nch = p->pp * p->vp;
    if (sl && (!ap_json_is_array(sl) || ap_json_size(sl) != nch))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.stage_layers' must list "
                          "the plan's pp x vp = %d layer counts", file, nch);
    for (int i = 0; sl && i < nch; i++) {
        const ap_json *v = ap_json_at(sl, i);
        int want = ap_plan_chunk_layers(p, m->layers, i);
        if (!ap_json_is_number(v) || ap_json_number(v) != want)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.stage_layers[%d]' is "
                              "not the plan's %d layers (the estimate is of another plan)", file,
                              i, want);
    }
    const ap_json *f8 = est_at(est, "plan.fp8_params"), *zg = est_at(est, "plan.zero_group");
    const ap_json *rc = est_at(est, "plan.fp8_recipe");
    if ((f8 && (!ap_json_is_bool(f8) || ap_json_bool(f8) != (p->fp8_params != 0))) ||
        (!f8 && p->fp8_params))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.fp8_params' is not the "
                          "plan's %s (the estimate is of another plan)", file,
                          p->fp8_params ? "true" : "false");
    if (zg && (!ap_json_is_number(zg) || ap_json_number(zg) != p->zero_group))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.zero_group' is not the "
                          "plan's %d (the estimate is of another plan)", file, p->zero_group);
    const char *recipe = ap_fp8_recipe_name(ap_plan_fp8_recipe(p));
    if (rc && p->dtype == AP_DTYPE_FP8 &&
        (!ap_json_is_string(rc) || strcmp(ap_json_string(rc), recipe) != 0))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.fp8_recipe' is not the "
                          "plan's '%s' (the estimate is of another plan)", file, recipe);
    return AP_OK;
}

/* The estimate of plan.json `file` (may be NULL: none) against its model, cluster and plan. */
static ap_status check_estimate(const char *file, const ap_json *est, const ap_model *m,
                                const ap_cluster *c, const ap_plan *p, ap_err *err) {
    if (!est) return AP_OK;
    ap_status st;
    if ((st = est_positive(file, est, "time.step_s", "a positive number of seconds", err)) !=
            AP_OK ||
        (st = est_positive(file, est, "memory.peak_bytes", "a positive number of bytes", err)) !=
            AP_OK)
        return st;
    const ap_json *cap = est_at(est, "memory.capacity_bytes");
    if (cap && (!ap_json_is_number(cap) || ap_json_number(cap) != c->gpu.mem_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.memory.capacity_bytes' is not "
                          "the %.0f bytes of the cluster's %s", file, c->gpu.mem_bytes,
                          c->gpu.name);
    const ap_json *ep = ap_json_get(est, "plan");
    if (!ep)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan' is missing (the plan the "
                          "estimate is of, as `autoplan estimate --json` writes it)", file);
    if (!ap_json_is_object(ep))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan' must be an object, got %s",
                          file, ap_json_type_name(ep));
    ap_estimate *x = ap_calloc(1, sizeof *x);
    if (!x) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", file);
    x->plan = *p;
    st = AP_OK;
    for (int i = 0; st == AP_OK && i < ap_estimate_field_count(); i++) {
        const ap_estimate_field *f = ap_estimate_field_at(i);
        if (!strcmp(f->group, "plan") || !strcmp(f->group, "plan.offload"))
            st = est_plan_field(file, est, f, x, m, c, err);
    }
    ap_free(x);
    return st == AP_OK ? est_plan_extras(file, est, m, p, err) : st;
}

int ap_cmd_emit(int argc, char **argv) {
    static const char usage[] = "autoplan emit --plan plan.json --emit LIST --out DIR";
    static const char description[] =
        "Write trainer configuration files for a saved plan. LIST is a comma-separated subset of\n"
        "deepspeed (ds_config.json, ds_config_hf.json, deepspeed_launch.sh), megatron\n"
        "(megatron.sh), colossalai (colossalai_booster.py), torchtitan (torchtitan.toml, v0.2.2)\n"
        "and accelerate (accelerate.yaml), or all. A target that cannot express the plan is\n"
        "skipped with the reason and the closest plan it can express; the others are written.\n"
        "Exit status: 0 if every target named was written (with all: at least one), 2 if a named\n"
        "target refused the plan (the others are written) or on bad input, 1 on I/O failure.";
    ap_flags fl;
    memset(&fl, 0, sizeof fl);
    ap_flags_add(&fl, "plan", AP_FLAG_VALUE, "FILE", "plan.json written by `autoplan plan --out`");
    ap_flags_add(&fl, "emit", AP_FLAG_VALUE, "LIST",
                 "deepspeed,megatron,colossalai,torchtitan,accelerate or all (default all)");
    ap_flags_add(&fl, "out", AP_FLAG_VALUE, "DIR", "output directory, created if missing");
    int help = 0;
    ap_err err;
    err.msg[0] = '\0';
    ap_status st = ap_flags_parse(&fl, argc, argv, 0, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, usage, description);
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    const char *plan = ap_flags_value(&fl, "plan");
    const char *out = ap_flags_value(&fl, "out");
    const char *which = ap_flags_value(&fl, "emit");
    if (!plan) return ap_cli_fail(ap_err_set(&err, AP_ERR_INPUT, "--plan FILE is required (%s)",
                                             usage), &err);
    if (!out) return ap_cli_fail(ap_err_set(&err, AP_ERR_INPUT, "--out DIR is required (%s)",
                                            usage), &err);
    if (!which) which = "all";

    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_json *est = NULL;
    st = ap_planfile_read(plan, &m, &c, &p, &est, &err);
    if (st == AP_OK) st = check_estimate(plan, est, &m, &c, &p, &err);
    if (st != AP_OK) {
        ap_json_free(est);
        return ap_cli_fail(st, &err);
    }
    ap_emit_report rep;
    st = ap_emit_files_ex(out, which, &m, &c, &p, est, &rep, &err);
    ap_json_free(est);
    int requested = 0;
    for (int t = 0; t < AP_EMIT_COUNT; t++) requested += rep.requested[t];
    if (!requested || (st != AP_OK && st != AP_ERR_INFEASIBLE))
        return ap_cli_fail(st, &err); /* the list, the directory or a file was refused */
    for (int t = 0; t < AP_EMIT_COUNT; t++) {
        if (!rep.requested[t]) continue;
        if (rep.status[t] == AP_OK) {
            printf("%s: wrote %s in %s\n", ap_emit_target_name((ap_emit_target)t), rep.files[t],
                   ap_cli_safe(out));
            if (rep.msg[t][0]) printf("%s: note: %s\n", ap_emit_target_name((ap_emit_target)t),
                                      ap_cli_safe(rep.msg[t]));
        } else {
            fprintf(stderr, "autoplan: %s\n", ap_cli_safe(rep.msg[t]));
        }
    }
    return ap_cli_emit_exit(which, &rep);
}
