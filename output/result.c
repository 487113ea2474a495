/*
 * result.c - a plan search's result as JSON: the entry of one plan, its decoding, and the check
 * a stored result passes before it is used (result.h).
 *
 * Structure: ap_result_plan_json writes an entry; ap_result_plan_decode reads its "plan" object
 * with the estimate's reader (ap_estimate_plan_from_json, planio.h), each member then checked
 * against the plan's field table (plan.h); ap_result_check is a driver over the header, the
 * search counts, each entry (decoded, checked, estimated again, compared) and the strings.
 *
 * The cost model, trainer table and options a row was made with are in the cache key, but the
 * row itself may come from an import or a damaged file. Every plan in it is decoded and checked
 * as a fresh plan (ap_plan_check), its label recomputed, and its numbers must agree with each
 * other and with the request (tokens/s = batch / step time, the cluster's capacity, the
 * options' headroom, fits and confidence from the memory, the search's ranking). Estimating the
 * plans again as well (reestimate) also catches numbers forged consistently; it needs the
 * kernel tables (about 12 ms to build once per process), so the CLI's cache hit, which must
 * answer in 20 ms, does not ask for it.
 */
#include "autoplan/result.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/hetero.h"
#include "autoplan/planio.h"
#include "autoplan/text.h"

/* Relative tolerance of a stored number against the same number estimated again: the JSON
 * printer round-trips doubles, so anything above rounding noise is a different answer. */
#define SAME_REL 1e-9
#define MAX_STRING_BYTES 1024
#define MAX_SUGGESTIONS 64

ap_json *ap_result_plan_json(const ap_estimate *e, const ap_model *m) {
    ap_json *j = ap_estimate_to_json(e, m);
    if (!j) return NULL;
    char lbl[160];
    ap_status st = ap_json_add_string(j, "label", ap_plan_label(&e->plan, lbl, sizeof lbl));
    if (st == AP_OK)
        st = ap_json_add_string(j, "confidence", ap_confidence_name(ap_estimate_confidence(e)));
    const ap_plan *p = &e->plan;
    if (st == AP_OK) st = ap_planfile_hetero_to_json(ap_json_get(j, "plan"), p);
    if (st == AP_OK && p->nchunks == p->pp * p->vp && p->nchunks > 0 &&
        !ap_json_get(ap_json_get(j, "plan"), "stage_recompute")) { /* estjson lists custom ones */
        ap_json *a = ap_json_new_array();
        st = a ? ap_json_add(ap_json_get(j, "plan"), "stage_recompute", a) : AP_ERR_NOMEM;
        for (int c = 0; st == AP_OK && c < p->nchunks; c++)
            st = ap_json_push(a, ap_json_new_number(p->stage_recompute[c]));
    }
    if (st != AP_OK) {
        ap_json_free(j);
        return NULL;
    }
    return j;
}

/* Member `name` of the plan's table read from `path` under o. */
static ap_status read_as(const char *name, const char *path, const ap_json *o, ap_plan *p,
                         const char *where, ap_err *err) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    const ap_field *f = ap_field_find(t, n, name);
    if (!f) return ap_err_set(err, AP_ERR_INTERNAL, "%s: no plan member '%s'", where, name);
    ap_field g = *f;
    g.json = path;
    return ap_field_read_json(&g, o, p, where, err);
}

/* The stage arrays: "stage_layers" (pp x vp entries summing to the layers) and the optional
 * "stage_recompute"; an explicit split is kept only when it is not the uniform one. */
static ap_status decode_stages(const ap_json *pj, const ap_model *m, ap_plan *p,
                               const char *where, ap_err *err) {
    int64_t nch = (int64_t)p->pp * p->vp;
    if (nch > AP_MAX_CHUNKS || nch > m->layers)
        return ap_err_set(err, AP_ERR_INPUT, "%s: pp x vp = %lld chunks, more than the %lld layers",
                          where, (long long)nch, (long long)m->layers);
    p->nchunks = (int)nch;
    ap_status st = read_as("stage_layers", "stage_layers", pj, p, where, err);
    if (st == AP_OK && ap_json_get(pj, "stage_recompute"))
        st = read_as("stage_recompute", "stage_recompute", pj, p, where, err);
    if (st != AP_OK) return st;
    int64_t sum = 0;
    int uniform = 1, custom_rc = 0;
    for (int i = 0; i < nch; i++) sum += p->stage_layers[i];
    if (sum != m->layers)
        return ap_err_set(err, AP_ERR_INPUT, "%s: stage_layers sum to %lld, the model has %lld "
                          "layers", where, (long long)sum, (long long)m->layers);
    int keep = p->nchunks;
    p->nchunks = 0;
    for (int i = 0; i < nch; i++) {
        if (p->stage_layers[i] != ap_plan_chunk_layers(p, m->layers, i)) uniform = 0;
        if (p->stage_recompute[i] > m->layers)
            return ap_err_set(err, AP_ERR_INPUT, "%s: stage_recompute[%d] is more than the model's "
                              "layers", where, i);
        /* > 0: a chunk's own count; 0 (absent: ap_plan_init) and -1 are the plan's, as the
         * cost model and the label read them */
        if (p->stage_recompute[i] > 0) custom_rc = 1;
    }
    if (!uniform || custom_rc) p->nchunks = keep;
    return AP_OK;
}

ap_status ap_result_plan_decode(const ap_json *entry, const ap_model *m, const ap_cluster *c,
                                ap_plan *p, const char *where, ap_err *err) {
    const ap_json *pj = ap_json_get(entry, "plan");
    if (!ap_json_is_object(entry) || !ap_json_is_object(pj))
        return ap_err_set(err, AP_ERR_INPUT, "%s: not a plan entry (no \"plan\" object)", where);
    /* the members by the estimate's table, then each in the range of the plan's table */
    ap_status st = ap_estimate_plan_from_json(entry, where, p, err);
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; st == AP_OK && i < n; i++)
        if (t[i].json && t[i].kind != AP_FT_CHUNKS) st = ap_field_check(&t[i], p, where, err);
    if (st != AP_OK) return st;
    if (p->recompute_layers > m->layers)
        return ap_err_set(err, AP_ERR_INPUT, "%s: recompute_layers is more than the model's "
                          "layers", where);
    st = decode_stages(pj, m, p, where, err);
    return st == AP_OK ? ap_planfile_hetero_from_json(pj, where, c, p, err) : st;
}

size_t ap_result_max_bytes(const ap_search_opts *so) {
    /* an entry of a 1024-stage plan prints to about 20 KiB; suggestions and counts are small */
    return (size_t)65536 + (size_t)(so->top_k > 0 ? so->top_k : 1) * 65536;
}

/* ---- the check ------------------------------------------------------------------------------ */

static int same(double got, double want) {
    double sc = fabs(want) > 1e-300 ? fabs(want) : 1.0;
    return isfinite(got) && fabs(got - want) <= SAME_REL * sc;
}

static double num_at(const ap_json *o, const char *a, const char *b) {
    const ap_json *x = ap_json_get(o, a);
    if (b) x = ap_json_get(x, b);
    return ap_json_is_number(x) ? ap_json_number(x) : NAN;
}

/* A bounded string member, or NULL. */
static const char *str_at(const ap_json *o, const char *k) {
    const ap_json *v = ap_json_get(o, k);
    const char *s = ap_json_is_string(v) ? ap_json_string(v) : NULL;
    return s && strlen(s) <= MAX_STRING_BYTES ? s : NULL;
}

static ap_status check_header(const ap_json *res, const ap_model *m, const ap_cluster *c,
                              const ap_search_opts *so, ap_err *err) {
    const char *model = str_at(res, "model"), *gpu = str_at(res, "gpu"),
               *trainer = str_at(res, "trainer");
    if (!ap_json_is_object(res))
        return ap_err_set(err, AP_ERR_INPUT, "the result is %s, not an object",
                          ap_json_type_name(res));
    if (!model || strcmp(model, m->name) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "field 'model' is not this model's name");
    if (!gpu || strcmp(gpu, c->gpu.name) != 0 || num_at(res, "gpus", NULL) != c->gpus)
        return ap_err_set(err, AP_ERR_INPUT, "fields 'gpu'/'gpus' are not this cluster's");
    if (!trainer || strcmp(trainer, ap_trainer_name(so->fixed.trainer)) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "field 'trainer' is not the request's");
    if (num_at(res, "gbs", NULL) != (double)so->gbs || num_at(res, "seq", NULL) != (double)so->fixed.seq)
        return ap_err_set(err, AP_ERR_INPUT, "fields 'gbs'/'seq' are not the request's");
    static const char *const counts[] = {"enumerated", "legal", "evaluated", "pruned", "fit",
                                         "search_s", "repartitioned"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        double v = num_at(res, "search", counts[i]);
        if (!(v >= 0 && v <= 1e15))
            return ap_err_set(err, AP_ERR_INPUT, "field 'search.%s' is not a count", counts[i]);
    }
    const ap_json *tm = ap_json_get(ap_json_get(res, "search"), "tie_margin");
    if (tm && num_at(res, "search", "tie_margin") != so->tie_margin)
        return ap_err_set(err, AP_ERR_INPUT, "field 'search.tie_margin' is not the request's");
    return AP_OK;
}

/* The stored numbers of an entry agree with each other and with the request: tokens/s is the
 * batch over the step time, capacity and headroom are the cluster's and the options', "fits"
 * and the confidence class follow from the memory (ap_estimate_confidence). Fills the parts of
 * *e the ranking and the overshoot need. */
static ap_status check_numbers(const ap_json *entry, const char *where, const ap_plan *p,
                               const ap_cluster *c, const ap_search_opts *so, ap_estimate *e,
                               ap_err *err) {
    double step = num_at(entry, "time", "step_s"), tps = num_at(entry, "throughput", "tokens_per_s");
    const ap_json *mem = ap_json_get(entry, "memory");
    memset(e, 0, offsetof(ap_estimate, stages));
    e->plan = *p;
    e->time.step_s = step;
    e->device_peak_bytes = num_at(mem, "device_peak_bytes", NULL);
    e->capacity_bytes = num_at(mem, "capacity_bytes", NULL);
    e->headroom_bytes = num_at(mem, "headroom_bytes", NULL);
    e->host_bytes_per_node = num_at(mem, "host_bytes_per_node", NULL);
    e->host_fits = ap_json_bool(ap_json_get(mem, "host_fits"));
    e->fits = ap_json_bool(ap_json_get(mem, "fits"));
    if (!(step > 0 && step <= 1e15) || !same(tps, (double)p->gbs * (double)p->seq / step))
        return ap_err_set(err, AP_ERR_INPUT, "%s: step time and tokens/s disagree", where);
    /* Gemini auto sizes its model data with its own margin and takes no headroom (hetero.c) */
    double headroom = p->hetero.placement == AP_GEMINI_AUTO ? 0 : so->est.headroom_bytes;
    if (!(e->device_peak_bytes >= 0 && e->device_peak_bytes <= 1e18) ||
        e->capacity_bytes != c->gpu.mem_bytes || e->headroom_bytes != headroom ||
        !(e->host_bytes_per_node >= 0 && e->host_bytes_per_node <= 1e21))
        return ap_err_set(err, AP_ERR_INPUT, "%s: the stored memory is not this cluster's or "
                          "options'", where);
    int fits = e->device_peak_bytes + e->headroom_bytes <= e->capacity_bytes && e->host_fits;
    if (fits != e->fits || ap_json_get(mem, "fits") == NULL)
        return ap_err_set(err, AP_ERR_INPUT, "%s: 'fits' does not follow from the memory", where);
    /* MFU and HFU are the model's and the hardware's TFLOP/s over the dense 16-bit peak
     * (estimate.c throughput), and the hardware's FLOPs hold the model's */
    const ap_json *th = ap_json_get(entry, "throughput");
    double mt = num_at(th, "model_tflops_per_gpu", NULL);
    double ht = num_at(th, "hw_tflops_per_gpu", NULL);
    double ref = c->gpu.peak_flops[AP_DTYPE_BF16] > 0 ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                                      : c->gpu.peak_flops[AP_DTYPE_FP16];
    if (ref <= 0) ref = c->gpu.peak_flops[AP_DTYPE_FP32];
    if (!(mt > 0 && mt <= 1e9 && ht >= mt * (1.0 - SAME_REL) && ht <= 1e9) ||
        !same(num_at(th, "mfu", NULL), mt * 1e12 / ref) ||
        !same(num_at(th, "hfu", NULL), ht * 1e12 / ref))
        return ap_err_set(err, AP_ERR_INPUT, "%s: the stored TFLOP/s, MFU and HFU disagree",
                          where);
    const char *conf = str_at(entry, "confidence");
    if (!conf || strcmp(conf, ap_confidence_name(ap_estimate_confidence(e))) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: the confidence does not follow from the memory",
                          where);
    return AP_OK;
}

/* Decode one entry, run the checks a fresh plan passes (ap_plan_check), then the numbers: by
 * their consistency, or (reestimate) by estimating the plan again. */
static ap_status check_entry(const ap_json *entry, const char *where, const ap_model *m,
                             const ap_cluster *c, const ap_search_opts *so, int reestimate,
                             ap_estimate *e, ap_err *err) {
    ap_plan p;
    ap_status st = ap_result_plan_decode(entry, m, c, &p, where, err);
    if (st != AP_OK) return st;
    if (p.trainer != so->fixed.trainer || p.seq != so->fixed.seq || p.gbs != so->gbs)
        return ap_err_set(err, AP_ERR_INPUT, "%s: trainer, sequence or batch is not the "
                          "request's", where);
    if ((st = ap_plan_check(&p, m, c, so->allow_cross_node_tp, err)) != AP_OK) {
        ap_err_prefix(err, "%s", where);
        return AP_ERR_INPUT;
    }
    char lbl[160];
    const char *label = str_at(entry, "label");
    if (!label || strcmp(label, ap_plan_label(&p, lbl, sizeof lbl)) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: the stored label is not the plan's", where);
    if ((st = check_numbers(entry, where, &p, c, so, e, err)) != AP_OK || !reestimate) return st;
    double step = e->time.step_s, peak = e->device_peak_bytes;
    /* the search's estimate: Gemini placements and offload devices are simulated (hetero.h) */
    st = ap_hetero_applies(&p) ? ap_hetero_estimate(m, c, &p, &so->est, NULL, e, err)
                               : ap_estimate_plan(m, c, &p, &so->est, e, err);
    if (st != AP_OK) {
        ap_err_prefix(err, "%s", where);
        return st == AP_ERR_NOMEM ? st : AP_ERR_INPUT;
    }
    if (!same(step, e->time.step_s) || !same(peak, e->device_peak_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "%s: the stored step time or memory is not what "
                          "the cost model gives", where);
    return AP_OK;
}

static ap_status check_plans(const ap_json *res, const ap_model *m, const ap_cluster *c,
                             const ap_search_opts *so, int reestimate, ap_estimate *e,
                             ap_err *err) {
    const ap_json *plans = ap_json_get(res, "plans");
    if (!ap_json_is_array(plans))
        return ap_err_set(err, AP_ERR_INPUT, "field 'plans' is not an array");
    int n = ap_json_size(plans);
    if (n > so->top_k)
        return ap_err_set(err, AP_ERR_INPUT, "%d plans stored, the request keeps %d", n,
                          so->top_k);
    char where[32];
    /* the ranking's keys of the entries read so far */
    struct rank_key { double step, peak; int cls; } *k = ap_malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return ap_err_set(err, AP_ERR_NOMEM, "out of memory checking the ranking");
    const int64_t cps = ap_cp_short_seq(m);
    for (int i = 0; i < n; i++) {
        snprintf(where, sizeof where, "plans[%d]", i);
        ap_status st = check_entry(ap_json_at(plans, i), where, m, c, so, reestimate, e, err);
        if (st == AP_OK && !e->fits) st = ap_err_set(err, AP_ERR_INPUT, "%s does not fit", where);
        k[i] = (struct rank_key){e->time.step_s, e->device_peak_bytes,
                                 ap_estimate_complication(e, cps)};
        /* ranked as the search ranks (search.h "Ties"): no plan above one more than the tie
         * margin faster, and above a faster one (ap_estimate_better) only when simpler */
        for (int j = 0; j < i && st == AP_OK; j++) {
            int faster = k[i].step < k[j].step ||
                         (k[i].step == k[j].step && k[i].peak < k[j].peak);
            if (k[j].step > k[i].step * (1 + so->tie_margin) * (1 + 1e-12))
                st = ap_err_set(err, AP_ERR_INPUT, "%s is ranked below plans[%d], which is "
                                "slower by more than the tie margin", where, j);
            else if (faster && (so->tie_margin <= 0 || k[j].cls >= k[i].cls))
                st = ap_err_set(err, AP_ERR_INPUT, "%s is ranked below plans[%d], which is "
                                "slower and no simpler", where, j);
        }
        if (st != AP_OK) {
            ap_free(k);
            return st;
        }
    }
    /* the fastest plan, when ties rank a simpler one first: it fits, no plan shown is faster,
     * and the first one is within the margin of it */
    const ap_json *fa = ap_json_get(res, "fastest");
    if (fa) {
        ap_status st = n == 0 ? ap_err_set(err, AP_ERR_INPUT, "field 'fastest' without plans")
                              : check_entry(fa, "fastest", m, c, so, reestimate, e, err);
        if (st == AP_OK && !e->fits) st = ap_err_set(err, AP_ERR_INPUT, "fastest does not fit");
        for (int i = 0; i < n && st == AP_OK; i++)
            if (k[i].step < e->time.step_s)
                st = ap_err_set(err, AP_ERR_INPUT, "plans[%d] is faster than 'fastest'", i);
        if (st == AP_OK && !(k[0].step <= e->time.step_s * (1 + so->tie_margin) * (1 + 1e-12)))
            st = ap_err_set(err, AP_ERR_INPUT, "plans[0] is slower than 'fastest' by more than "
                            "the tie margin");
        if (st != AP_OK) {
            ap_free(k);
            return st;
        }
    }
    ap_free(k);
    const ap_json *cl = ap_json_get(res, "closest");
    if (cl) {
        if (n > 0) return ap_err_set(err, AP_ERR_INPUT, "field 'closest' beside fitting plans");
        ap_status st = check_entry(cl, "closest", m, c, so, reestimate, e, err);
        if (st != AP_OK) return st;
        if (!same(num_at(cl, "overshoot_bytes", NULL),
                  e->device_peak_bytes + e->headroom_bytes - e->capacity_bytes))
            return ap_err_set(err, AP_ERR_INPUT, "closest: field 'overshoot_bytes' is not the "
                              "plan's");
    }
    return AP_OK;
}

static ap_status check_strings(const ap_json *res, ap_err *err) {
    const ap_json *plans = ap_json_get(res, "plans");
    const ap_json *sug = ap_json_get(res, "suggestions");
    if (sug && (!ap_json_is_array(sug) || ap_json_size(sug) > MAX_SUGGESTIONS))
        return ap_err_set(err, AP_ERR_INPUT, "field 'suggestions' is not a short array");
    for (int i = 0; i < ap_json_size(sug); i++) {
        const ap_json *s = ap_json_at(sug, i);
        if (!ap_json_is_string(s) || strlen(ap_json_string(s)) > MAX_STRING_BYTES ||
            !ap_text_is_safe_line(ap_json_string(s)))
            return ap_err_set(err, AP_ERR_INPUT, "suggestions[%d] is not one line of text", i);
    }
    const ap_json *rb = ap_json_get(res, "robustness");
    if (rb && (ap_json_get(rb, "best_under_stress_rank") || ap_json_get(rb, "best_under_stress") ||
               !ap_json_is_object(rb))) {
        double rank = num_at(rb, "best_under_stress_rank", NULL);
        const char *lbl = str_at(rb, "best_under_stress");
        if (!ap_json_is_object(rb) || !(rank >= 1 && rank <= ap_json_size(plans)) || !lbl ||
            strcmp(lbl, ap_json_string(ap_json_get(ap_json_at(plans, (int)rank - 1), "label"))) != 0)
            return ap_err_set(err, AP_ERR_INPUT, "field 'robustness' does not name one of the "
                              "plans");
    }
    return AP_OK;
}

ap_status ap_result_check(const ap_json *res, const ap_model *m, const ap_cluster *c,
                          const ap_search_opts *so, int reestimate, ap_err *err) {
    ap_status st = check_header(res, m, c, so, err);
    if (st != AP_OK) return st;
    ap_estimate *e = ap_malloc(sizeof *e);
    if (!e) return ap_err_set(err, AP_ERR_NOMEM, "out of memory checking a stored result");
    st = check_plans(res, m, c, so, reestimate, e, err);
    ap_free(e);
    if (st != AP_OK) return st;
    return check_strings(res, err);
}
