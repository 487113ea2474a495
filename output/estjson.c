/*
 * estjson.c - an estimate as JSON (the schema of `autoplan estimate --json`, documented in
 * README), read back, and the one table of its scalar fields.
 *
 * Structure: the field table (JSON order: plan, time, throughput, memory), the value of a field
 * in an estimate, the writer (the table, then the two arrays: plan.stage_layers and
 * memory.stages), the plan reader. The same table gives the report's rows and the columns of
 * plans.csv (output/report.c), so a field is added in one place and appears in all four.
 *
 * What it does not do: the readable breakdown of the same numbers, which the CLI prints
 * (cli/print_estimate.c): the text is rounded, the JSON exact.
 */
#include "autoplan/fields.h"
#include "autoplan/planio.h"
#include "autoplan/report.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* where a field's value lives */
enum { IN_EST, IN_WORST, OVERLAP };

#define E(f) IN_EST, offsetof(ap_estimate, f)
#define W(f) IN_WORST, offsetof(ap_stage_mem, f)
#define R(f) offsetof(ap_report_row, f)
#define NOROW AP_FIELD_NO_ROW

static const ap_estimate_field fields[] = {
    {"plan", "trainer", "plan.trainer", AP_FIELD_TRAINER, E(plan.trainer), R(trainer)},
    {"plan", "tp", "plan.tp", AP_FIELD_INT, E(plan.tp), R(tp)},
    {"plan", "pp", "plan.pp", AP_FIELD_INT, E(plan.pp), R(pp)},
    {"plan", "dp", "plan.dp", AP_FIELD_INT, E(plan.dp), R(dp)},
    {"plan", "cp", "plan.cp", AP_FIELD_INT, E(plan.cp), R(cp)},
    {"plan", "ep", "plan.ep", AP_FIELD_INT, E(plan.ep), R(ep)},
    {"plan", "etp", "plan.etp", AP_FIELD_INT, E(plan.etp), R(etp)},
    {"plan", "vp", "plan.vp", AP_FIELD_INT, E(plan.vp), R(vp)},
    {"plan", "mbs", "plan.mbs", AP_FIELD_I64, E(plan.mbs), R(mbs)},
    {"plan", "gbs", "plan.gbs", AP_FIELD_I64, E(plan.gbs), R(gbs)},
    {"plan", "grad_accum", "plan.grad_accum", AP_FIELD_I64, E(plan.grad_accum), R(grad_accum)},
    {"plan", "seq", "plan.seq", AP_FIELD_I64, E(plan.seq), R(seq)},
    {"plan", "zero", "plan.zero", AP_FIELD_INT, E(plan.zero), R(zero)},
    {"plan", "recompute", "plan.recompute", AP_FIELD_RECOMPUTE, E(plan.recompute), R(recompute)},
    {"plan", "recompute_layers", "plan.recompute_layers", AP_FIELD_INT, E(plan.recompute_layers),
     R(recompute_layers)},
    {"plan", "sp", "plan.sp", AP_FIELD_BOOL, E(plan.sp), R(sp)},
    /* overlap_grad or overlap_param: derived, not read back */
    {"plan", "overlap", "plan.overlap", AP_FIELD_BOOL, OVERLAP, 0, R(overlap)},
    {"plan", "overlap_grad", "plan.overlap_grad", AP_FIELD_BOOL, E(plan.overlap_grad), NOROW},
    {"plan", "overlap_param", "plan.overlap_param", AP_FIELD_BOOL, E(plan.overlap_param), NOROW},
    {"plan", "overlap_tp", "plan.overlap_tp", AP_FIELD_BOOL, E(plan.overlap_tp), NOROW},
    {"plan.offload", "optimizer", "plan.offload.optimizer", AP_FIELD_REAL,
     E(plan.offload_optimizer), R(offload_optimizer)},
    {"plan.offload", "params", "plan.offload.params", AP_FIELD_REAL, E(plan.offload_params),
     R(offload_params)},
    {"plan", "dtype", "plan.dtype", AP_FIELD_DTYPE, E(plan.dtype), R(dtype)},
    {"plan", "flash_attn", "plan.flash_attn", AP_FIELD_BOOL, E(plan.flash_attn), R(flash_attn)},
    {"plan", "attn_impl", "plan.attn_impl", AP_FIELD_ATTN_IMPL, E(plan.attn_impl), NOROW},

    {"time", "step_s", "time.step_s", AP_FIELD_REAL, E(time.step_s), R(step_s)},
    {"time", "compute_s", "time.compute_s", AP_FIELD_REAL, E(time.compute_s), R(compute_s)},
    {"time", "recompute_s", "time.recompute_s", AP_FIELD_REAL, E(time.recompute_s), R(recompute_s)},
    {"time", "tp_comm_s", "time.tp_comm_s", AP_FIELD_REAL, E(time.tp_comm_s), R(tp_comm_s)},
    {"time", "cp_comm_s", "time.cp_comm_s", AP_FIELD_REAL, E(time.cp_comm_s), R(cp_comm_s)},
    {"time", "ep_comm_s", "time.ep_comm_s", AP_FIELD_REAL, E(time.ep_comm_s), R(ep_comm_s)},
    {"time", "pp_comm_s", "time.pp_comm_s", AP_FIELD_REAL, E(time.pp_comm_s), R(pp_comm_s)},
    {"time", "dp_comm_s", "time.dp_comm_s", AP_FIELD_REAL, E(time.dp_comm_s), R(dp_comm_s)},
    {"time", "bubble_s", "time.bubble_s", AP_FIELD_REAL, E(time.bubble_s), R(bubble_s)},
    {"time", "offload_s", "time.offload_s", AP_FIELD_REAL, E(time.offload_s), R(offload_s)},
    {"time", "optimizer_s", "time.optimizer_s", AP_FIELD_REAL, E(time.optimizer_s), R(optimizer_s)},
    {"time", "overhead_s", "time.overhead_s", AP_FIELD_REAL, E(time.overhead_s), R(overhead_s)},

    {"throughput", "tokens_per_s", "throughput.tokens_per_s", AP_FIELD_REAL, E(tp.tokens_per_s),
     R(tokens_per_s)},
    {"throughput", "model_tflops_per_gpu", "throughput.model_tflops_per_gpu", AP_FIELD_REAL,
     E(tp.model_tflops_per_gpu), R(model_tflops_per_gpu)},
    {"throughput", "hw_tflops_per_gpu", "throughput.hw_tflops_per_gpu", AP_FIELD_REAL,
     E(tp.hw_tflops_per_gpu), R(hw_tflops_per_gpu)},
    {"throughput", "mfu", "throughput.mfu", AP_FIELD_REAL, E(tp.mfu), R(mfu)},
    {"throughput", "hfu", "throughput.hfu", AP_FIELD_REAL, E(tp.hfu), R(hfu)},

    {"memory", "peak_bytes", "memory.peak_bytes", AP_FIELD_REAL, E(peak_bytes), R(peak_bytes)},
    {"memory", "capacity_bytes", "memory.capacity_bytes", AP_FIELD_REAL, E(capacity_bytes),
     R(capacity_bytes)},
    {"memory", "headroom_bytes", "memory.headroom_bytes", AP_FIELD_REAL, E(headroom_bytes),
     R(headroom_bytes)},
    /* the worst stage's breakdown */
    {"memory", "params_bytes", "memory.params_bytes", AP_FIELD_REAL, W(params_bytes),
     R(params_bytes)},
    {"memory", "grads_bytes", "memory.grads_bytes", AP_FIELD_REAL, W(grads_bytes), R(grads_bytes)},
    {"memory", "optimizer_bytes", "memory.optimizer_bytes", AP_FIELD_REAL, W(optimizer_bytes),
     R(optimizer_bytes)},
    {"memory", "activations_bytes", "memory.activations_bytes", AP_FIELD_REAL,
     W(activations_bytes), R(activations_bytes)},
    {"memory", "other_bytes", "memory.other_bytes", AP_FIELD_REAL, W(other_bytes), R(other_bytes)},
    {"memory", "fits", "memory.fits", AP_FIELD_BOOL, E(fits), R(fits)},
    {"memory", "allocated_peak_bytes", "memory.allocated_peak_bytes", AP_FIELD_REAL,
     E(allocated_peak_bytes), R(allocated_peak_bytes)},
    {"memory", "reserved_peak_bytes", "memory.reserved_peak_bytes", AP_FIELD_REAL,
     E(reserved_peak_bytes), R(reserved_peak_bytes)},
    {"memory", "device_peak_bytes", "memory.device_peak_bytes", AP_FIELD_REAL,
     E(device_peak_bytes), R(device_peak_bytes)},
    {"memory", "smi_peak_bytes", "memory.smi_peak_bytes", AP_FIELD_REAL, E(smi_peak_bytes),
     R(smi_peak_bytes)},
    {"memory", "worst_stage", "memory.worst_stage", AP_FIELD_INT, E(worst_stage), R(worst_stage)},
    {"memory", "host_bytes_per_node", "memory.host_bytes_per_node", AP_FIELD_REAL,
     E(host_bytes_per_node), R(host_bytes_per_node)},
    {"memory", "host_capacity_bytes", "memory.host_capacity_bytes", AP_FIELD_REAL,
     E(host_capacity_bytes), R(host_capacity_bytes)},
    {"memory", "host_fits", "memory.host_fits", AP_FIELD_BOOL, E(host_fits), R(host_fits)},
};

#undef E
#undef W
#undef R
#undef NOROW

int ap_estimate_field_count(void) { return (int)(sizeof fields / sizeof fields[0]); }

const ap_estimate_field *ap_estimate_field_at(int i) {
    return i >= 0 && i < ap_estimate_field_count() ? &fields[i] : NULL;
}

/* ---- values ---------------------------------------------------------------------------------- */

static const void *field_ptr(const ap_estimate_field *f, const ap_estimate *e) {
    if (f->from == IN_WORST) return (const char *)&e->stages[e->worst_stage] + f->off;
    return (const char *)e + f->off;
}

/* plan.overlap: derived, either overlap */
static int overlap_of(const ap_estimate *e) { return e->plan.overlap_grad || e->plan.overlap_param; }

double ap_estimate_field_value(const ap_estimate_field *f, const ap_estimate *e) {
    if (f->from == OVERLAP) return overlap_of(e);
    const void *v = field_ptr(f, e);
    switch (f->kind) {
    case AP_FIELD_I64: return (double)*(const int64_t *)v;
    case AP_FIELD_REAL: return *(const double *)v;
    default: return (double)*(const int *)v; /* int, bool and the enums (int-sized) */
    }
}

/* Every column of the field table, stored by its kind: ap_estimate_field_value's values,
 * copied straight from the estimate (compare fills a row for each of ~100,000 fitting plans;
 * the walk through the public accessors, a double each, cost 3,000 instructions a row). */
void ap_report_row_from_estimate(const ap_estimate *e, ap_report_row *r) {
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const ap_estimate_field *f = &fields[i];
        if (f->row_off == AP_FIELD_NO_ROW) continue;
        char *dst = (char *)r + f->row_off;
        if (f->from == OVERLAP) {
            *(int *)dst = overlap_of(e);
            continue;
        }
        const void *v = field_ptr(f, e);
        if (f->kind == AP_FIELD_REAL) memcpy(dst, v, sizeof(double));
        else if (f->kind == AP_FIELD_I64) memcpy(dst, v, sizeof(int64_t));
        else memcpy(dst, v, sizeof(int));
    }
}

const char *ap_estimate_field_name(const ap_estimate_field *f, int v) {
    switch (f->kind) {
    case AP_FIELD_TRAINER: return ap_trainer_name((ap_trainer_id)v);
    case AP_FIELD_RECOMPUTE: return ap_recompute_name((ap_recompute)v);
    case AP_FIELD_DTYPE: return ap_dtype_name((ap_dtype)v);
    case AP_FIELD_ATTN_IMPL: return ap_attn_impl_name((ap_attn_impl)v);
    default: return NULL;
    }
}

/* ---- writer ---------------------------------------------------------------------------------- */

/* Walk dotted path from o ("plan.offload"), one member per part; with create, a missing part
 * becomes a new object (so groups appear in table order). NULL when a part is missing (or, with
 * create, when out of memory). */
static ap_json *walk(const ap_json *o, const char *path, int create) {
    ap_json *cur = (ap_json *)o;
    char part[32];
    for (const char *g = path; cur && *g;) {
        size_t n = strcspn(g, ".");
        snprintf(part, sizeof part, "%.*s", (int)n, g);
        ap_json *c = ap_json_get(cur, part);
        if (!c && create && ap_json_add(cur, part, c = ap_json_new_object()) != AP_OK) c = NULL;
        cur = c;
        g += n + (g[n] == '.');
    }
    return cur;
}

static ap_json *group_obj(ap_json *root, const char *group) { return walk(root, group, 1); }

static ap_status add_field(ap_json *root, const ap_estimate_field *f, const ap_estimate *e) {
    ap_json *o = group_obj(root, f->group);
    if (!o) return AP_ERR_NOMEM;
    double v = ap_estimate_field_value(f, e);
    switch (f->kind) {
    case AP_FIELD_BOOL: return ap_json_add_bool(o, f->key, v != 0);
    case AP_FIELD_TRAINER:
    case AP_FIELD_RECOMPUTE:
    case AP_FIELD_DTYPE:
    case AP_FIELD_ATTN_IMPL: return ap_json_add_string(o, f->key, ap_estimate_field_name(f, (int)v));
    default: return ap_json_add_number(o, f->key, v);
    }
}

static ap_status add_stage(ap_json *stages, const ap_stage_mem *s) {
    ap_json *o = ap_json_new_object();
    ap_status st = ap_json_push(stages, o);
#define NUM(k, v) \
    if (st == AP_OK) st = ap_json_add_number(o, (k), (double)(v))
    NUM("stage", s->stage);
    NUM("layers", s->layers);
    NUM("params_bytes", s->params_bytes);
    NUM("grads_bytes", s->grads_bytes);
    NUM("optimizer_bytes", s->optimizer_bytes);
    NUM("activations_bytes", s->activations_bytes);
    NUM("other_bytes", s->other_bytes);
    NUM("allocated_bytes", s->allocated_bytes);
    NUM("reserved_bytes", s->reserved_bytes);
    NUM("device_bytes", s->device_bytes);
    NUM("host_bytes", s->host_bytes);
    NUM("inflight_microbatches", s->inflight);
#undef NUM
    return st;
}

ap_json *ap_estimate_to_json(const ap_estimate *e, const ap_model *m) {
    const ap_plan *p = &e->plan;
    ap_json *root = ap_json_new_object();
    ap_status st = root ? AP_OK : AP_ERR_NOMEM;
    for (int i = 0; st == AP_OK && i < ap_estimate_field_count(); i++) {
        st = add_field(root, &fields[i], e);
        /* the arrays close their objects: plan.stage_layers after the plan's last field */
        if (st == AP_OK && !strcmp(fields[i].path, "plan.flash_attn")) {
            ap_json *sl = ap_json_new_array();
            st = ap_json_add(group_obj(root, "plan"), "stage_layers", sl);
            for (int c = 0; st == AP_OK && c < p->pp * p->vp; c++)
                st = ap_json_push(sl, ap_json_new_number(ap_plan_chunk_layers(p, m->layers, c)));
            /* per-chunk recompute counts of an uneven plan (> 0; else the plan's), when set */
            int per = 0;
            for (int c = 0; c < p->pp * p->vp && c < AP_MAX_CHUNKS; c++)
                per |= p->stage_recompute[c] > 0;
            if (st == AP_OK && per) {
                ap_json *sr = ap_json_new_array();
                st = ap_json_add(group_obj(root, "plan"), "stage_recompute", sr);
                for (int c = 0; st == AP_OK && c < p->pp * p->vp && c < AP_MAX_CHUNKS; c++)
                    st = ap_json_push(sr, ap_json_new_number(p->stage_recompute[c]));
            }
            /* FP8 weights (plan.h fp8_params), when kept: absent means 16-bit weights */
            if (st == AP_OK && p->fp8_params)
                st = ap_json_add_bool(group_obj(root, "plan"), "fp8_params", 1);
            /* all-to-all context parallelism (plan.h cp_a2a), when used: absent means the ring */
            if (st == AP_OK && p->cp_a2a)
                st = ap_json_add_bool(group_obj(root, "plan"), "cp_a2a", 1);
            /* the FP8 scaling recipe of an fp8 plan, as it runs (the trainer's where AUTO) */
            if (st == AP_OK && p->dtype == AP_DTYPE_FP8)
                st = ap_json_add_string(group_obj(root, "plan"), "fp8_recipe",
                                        ap_fp8_recipe_name(ap_plan_fp8_recipe(p)));
            /* ZeRO within groups (plan.h zero_group), when set: absent means all ranks */
            if (st == AP_OK && p->zero_group > 0)
                st = ap_json_add(group_obj(root, "plan"), "zero_group",
                                 ap_json_new_number(p->zero_group));
        }
    }
    ap_json *stages = ap_json_new_array();
    if (st == AP_OK) st = ap_json_add(group_obj(root, "memory"), "stages", stages);
    else ap_json_free(stages);
    for (int i = 0; st == AP_OK && i < e->nstages; i++) st = add_stage(stages, &e->stages[i]);
    if (st != AP_OK) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}

/* ---- reader ---------------------------------------------------------------------------------- */

/* The value at dotted path `path` of an estimate object, or NULL. */
static const ap_json *at_path(const ap_json *o, const char *path) { return walk(o, path, 0); }

static ap_status read_field(const ap_estimate_field *f, const ap_json *v, ap_estimate *e,
                            const char *where, ap_err *err) {
    void *dst = (char *)e + f->off;
    const char *s = ap_json_string(v);
    double d = ap_json_number(v);
    int integral = ap_json_is_number(v) && isfinite(d) && d == floor(d) && fabs(d) < 9.0e15;
    switch (f->kind) {
    case AP_FIELD_BOOL:
        if (!ap_json_is_bool(v)) break;
        *(int *)dst = ap_json_bool(v);
        return AP_OK;
    case AP_FIELD_INT:
        if (!integral || fabs(d) > 2147483647.0) break;
        *(int *)dst = (int)d;
        return AP_OK;
    case AP_FIELD_I64:
        if (!integral) break;
        *(int64_t *)dst = (int64_t)d;
        return AP_OK;
    case AP_FIELD_REAL:
        if (!ap_json_is_number(v) || !isfinite(d)) break;
        *(double *)dst = d;
        return AP_OK;
    case AP_FIELD_TRAINER:
        if (!s || ap_trainer_parse(s, (ap_trainer_id *)dst, NULL) != AP_OK) break;
        return AP_OK;
    case AP_FIELD_RECOMPUTE:
        if (!s || ap_recompute_parse(s, f->path, (ap_recompute *)dst, NULL) != AP_OK) break;
        return AP_OK;
    case AP_FIELD_DTYPE:
        if (!s || ap_dtype_parse(s, (ap_dtype *)dst) != AP_OK) break;
        return AP_OK;
    case AP_FIELD_ATTN_IMPL:
        if (!s || ap_attn_impl_parse(s, f->path, (ap_attn_impl *)dst, NULL) != AP_OK) break;
        return AP_OK;
    }
    return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s': %s is not a valid value", where,
                      f->path, ap_json_type_name(v));
}

/* An optional boolean at path: absent leaves *out as it is. */
static ap_status optional_bool(const ap_json *est, const char *path, const char *where, int *out,
                               ap_err *err) {
    const ap_json *v = at_path(est, path);
    if (!v) return AP_OK;
    if (!ap_json_is_bool(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s': %s is not a valid value (true or "
                          "false)", where, path, ap_json_type_name(v));
    *out = ap_json_bool(v);
    return AP_OK;
}

ap_status ap_estimate_plan_from_json(const ap_json *est, const char *where, ap_plan *p,
                                     ap_err *err) {
    ap_estimate *e = ap_calloc(1, sizeof *e);
    if (!e) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", where);
    ap_plan_init(&e->plan);
    ap_status st = AP_OK;
    for (int i = 0; st == AP_OK && i < ap_estimate_field_count(); i++) {
        const ap_estimate_field *f = &fields[i];
        if (f->from != IN_EST || strncmp(f->path, "plan.", 5) != 0) continue;
        st = read_field(f, at_path(est, f->path), e, where, err);
    }
    if (st == AP_OK) st = optional_bool(est, "plan.fp8_params", where, &e->plan.fp8_params, err);
    if (st == AP_OK) st = optional_bool(est, "plan.cp_a2a", where, &e->plan.cp_a2a, err);
    /* the FP8 recipe through the plan's field table (optional, an enum of plan.h) */
    const ap_json *pj = at_path(est, "plan");
    if (st == AP_OK && pj) {
        int nf;
        const ap_field *t = ap_plan_fields(&nf);
        char pw[600];
        snprintf(pw, sizeof pw, "%s.plan", where);
        st = ap_field_read_json(ap_field_find(t, nf, "fp8_recipe"), pj, &e->plan, pw, err);
    }
    const ap_json *zg = at_path(est, "plan.zero_group");
    if (st == AP_OK && zg) {
        double d = ap_json_is_number(zg) ? ap_json_number(zg) : -1;
        if (!(d >= 0 && d <= (1 << 20) && d == floor(d)))
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan.zero_group' must be a whole "
                            "number of ranks from 0 to %d", where, 1 << 20);
        else e->plan.zero_group = (int)d;
    }
    /* the split: kept only when it is not the uniform one */
    const ap_json *sl = at_path(est, "plan.stage_layers");
    int n = ap_json_size(sl), nch = e->plan.pp * e->plan.vp, uneven = 0;
    if (st == AP_OK && (!ap_json_is_array(sl) || n != nch || n > AP_MAX_CHUNKS))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan.stage_layers' must list pp x vp = %d "
                        "layer counts", where, nch);
    for (int i = 0; st == AP_OK && i < n; i++) {
        double d = ap_json_number(ap_json_at(sl, i));
        if (!(d >= 0 && d == floor(d) && d < 1e9))
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan.stage_layers[%d]' must be a "
                            "layer count", where, i);
        else e->plan.stage_layers[i] = (int)d;
        if (st == AP_OK && e->plan.stage_layers[i] != e->plan.stage_layers[0]) uneven = 1;
    }
    e->plan.nchunks = uneven ? n : 0;
    if (!uneven) memset(e->plan.stage_layers, 0, sizeof e->plan.stage_layers); /* as ap_plan_init */
    /* per-chunk recompute counts, when the writer listed them */
    const ap_json *sr = at_path(est, "plan.stage_recompute");
    if (st == AP_OK && sr && (!ap_json_is_array(sr) || ap_json_size(sr) != nch || nch > AP_MAX_CHUNKS))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan.stage_recompute' must list pp x vp = "
                        "%d counts", where, nch);
    for (int i = 0; st == AP_OK && sr && i < nch; i++) {
        double d = ap_json_number(ap_json_at(sr, i));
        if (!(d >= -1 && d == floor(d) && d < 1e9))
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan.stage_recompute[%d]' must be a "
                            "layer count or -1", where, i);
        else e->plan.stage_recompute[i] = (int)d;
    }
    if (st == AP_OK) *p = e->plan;
    ap_free(e);
    return st;
}
