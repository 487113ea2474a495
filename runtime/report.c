/*
 * report.c - the runtime's measurements as JSON and back (runtime.h, ap_rt_report): each rank
 * sends its own to rank 0 in this form, and rank 0 writes the whole report for `autoplan run`,
 * which reads it back. Per rank: the allocated peak and the categories at it, each category's
 * own maximum, the host pool, the process RSS, counted offload copies, time per phase, and on
 * request the last step's timeline (ops as compact arrays) and the allocation log.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"

void ap_rt_report_free(ap_rt_report *r) {
    if (!r) return;
    for (int i = 0; i < r->nranks && r->ranks; i++) {
        ap_free(r->ranks[i].ops);
        ap_free(r->ranks[i].events);
    }
    ap_free(r->ranks);
    ap_free(r->loss);
    memset(r, 0, sizeof *r);
}

/* ---- writing ----------------------------------------------------------------------------------- */

typedef struct jw {
    int ok;
} jw;

static void num(jw *w, ap_json *o, const char *k, double v) {
    if (w->ok && ap_json_add_number(o, k, v) != AP_OK) w->ok = 0;
}

static ap_json *cats(jw *w, const int64_t *v) {
    ap_json *o = ap_json_new_object();
    if (!o) {
        w->ok = 0;
        return NULL;
    }
    for (int c = 0; c < AP_RT_NCAT; c++) num(w, o, ap_rt_category_name(c), (double)v[c]);
    return o;
}

static void add(jw *w, ap_json *o, const char *k, ap_json *v) {
    if (!v) {
        w->ok = 0;
        return;
    }
    if (!w->ok || ap_json_add(o, k, v) != AP_OK) {
        ap_json_free(v);
        w->ok = 0;
    }
}

static void push(jw *w, ap_json *arr, ap_json *v) {
    if (!v) {
        w->ok = 0;
        return;
    }
    if (!w->ok || ap_json_push(arr, v) != AP_OK) {
        ap_json_free(v);
        w->ok = 0;
    }
}

static ap_json *numbers(jw *w, const double *v, int n) {
    ap_json *a = ap_json_new_array();
    if (!a) w->ok = 0;
    for (int i = 0; a && i < n; i++) push(w, a, ap_json_new_number(v[i]));
    return a;
}

static ap_json *phase_json(const ap_rt_phase_times *t) {
    jw w = {1};
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    num(&w, o, "forward_s", t->forward_s);
    num(&w, o, "backward_s", t->backward_s);
    num(&w, o, "comm_s", t->comm_s);
    num(&w, o, "optimizer_s", t->optimizer_s);
    num(&w, o, "step_s", t->step_s);
    if (!w.ok) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

static ap_json *rank_json(jw *w, const ap_rt_rank_report *r) {
    ap_json *o = ap_json_new_object();
    if (!o) {
        w->ok = 0;
        return NULL;
    }
    num(w, o, "rank", r->rank);
    num(w, o, "stage", r->stage);
    num(w, o, "tp_rank", r->tp_rank);
    num(w, o, "dp_rank", r->dp_rank);
    num(w, o, "peak_bytes", (double)r->peak_bytes);
    add(w, o, "peak_cat", cats(w, r->peak_cat_bytes));
    add(w, o, "cat_peak", cats(w, r->cat_peak_bytes));
    num(w, o, "host_peak_bytes", (double)r->host_peak_bytes);
    num(w, o, "rss_peak_bytes", (double)r->rss_peak_bytes);
    num(w, o, "d2h_bytes", (double)r->d2h_bytes);
    num(w, o, "h2d_bytes", (double)r->h2d_bytes);
    add(w, o, "time", phase_json(&r->time));
    ap_json *ops = ap_json_new_array();
    for (int i = 0; ops && i < r->nops; i++) {
        const ap_rt_op_record *p = &r->ops[i];
        double v[7 + 2 * AP_RT_NCAT] = {p->type,    p->chunk, p->layer, p->mb,
                                        p->begin_s, p->end_s, p->peak_s};
        for (int c = 0; c < AP_RT_NCAT; c++) {
            v[7 + c] = (double)p->peak_cat[c];
            v[7 + AP_RT_NCAT + c] = (double)p->end_cat[c];
        }
        push(w, ops, numbers(w, v, 7 + 2 * AP_RT_NCAT));
    }
    add(w, o, "ops", ops);
    ap_json *ev = ap_json_new_array();
    for (int i = 0; ev && i < r->nevents; i++) {
        const ap_rt_event *e = &r->events[i];
        double v[7] = {(double)e->bytes, e->kind, e->layer, e->mb, e->cat, e->is_free,
                       e->persistent};
        push(w, ev, numbers(w, v, 7));
    }
    add(w, o, "events", ev);
    return o;
}

ap_json *ap_rt_report_to_json(const ap_rt_report *r) {
    jw w = {1};
    ap_json *root = ap_json_new_object();
    if (!root) return NULL;
    if (ap_json_add_string(root, "backend", r->backend) != AP_OK ||
        ap_json_add_string(root, "host", r->host) != AP_OK)
        w.ok = 0;
    num(&w, root, "steps", r->steps);
    static const double none = 0;
    add(&w, root, "loss", numbers(&w, r->loss ? r->loss : &none, r->loss ? r->steps : 0));
    ap_json *h = ap_json_new_object();
    if (h) {
        const ap_rt_host_figures *f = &r->hostfig;
        if (ap_json_add_bool(h, "measured", f->measured) != AP_OK) w.ok = 0;
        num(&w, h, "gemm_flops_per_s", f->gemm_flops_per_s);
        num(&w, h, "gemm_half_flops", f->gemm_half_flops);
        num(&w, h, "attn_flops_per_s", f->attn_flops_per_s);
        num(&w, h, "mem_bytes_per_s", f->mem_bytes_per_s);
        num(&w, h, "p2p_latency_s", f->p2p_latency_s);
        num(&w, h, "p2p_bytes_per_s", f->p2p_bytes_per_s);
    }
    add(&w, root, "hostfig", h);
    ap_json *ranks = ap_json_new_array();
    for (int i = 0; ranks && i < r->nranks; i++) push(&w, ranks, rank_json(&w, &r->ranks[i]));
    add(&w, root, "ranks", ranks);
    if (!w.ok) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}

/* ---- reading ---------------------------------------------------------------------------------- */

#define TRY(x)                                                                                     \
    do {                                                                                           \
        ap_status st_ = (x);                                                                       \
        if (st_ != AP_OK) return st_;                                                              \
    } while (0)

static ap_status get_i64(const ap_json *o, const char *k, int64_t *out, const char *where,
                         ap_err *err) {
    return ap_json_get_int(o, k, 0, (int64_t)1 << 53, out, NULL, where, err);
}

static ap_status get_cats(const ap_json *o, const char *k, int64_t *v, const char *where,
                          ap_err *err) {
    const ap_json *c = ap_json_get(o, k);
    if (!ap_json_is_object(c))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an object", where, k);
    for (int i = 0; i < AP_RT_NCAT; i++) TRY(get_i64(c, ap_rt_category_name(i), &v[i], where, err));
    return AP_OK;
}

static ap_status get_time(const ap_json *o, ap_rt_phase_times *t, const char *where,
                          ap_err *err) {
    const ap_json *j = ap_json_get(o, "time");
    TRY(ap_json_get_real(j, "forward_s", 0, 1e9, &t->forward_s, NULL, where, err));
    TRY(ap_json_get_real(j, "backward_s", 0, 1e9, &t->backward_s, NULL, where, err));
    TRY(ap_json_get_real(j, "comm_s", 0, 1e9, &t->comm_s, NULL, where, err));
    TRY(ap_json_get_real(j, "optimizer_s", 0, 1e9, &t->optimizer_s, NULL, where, err));
    TRY(ap_json_get_real(j, "step_s", 0, 1e9, &t->step_s, NULL, where, err));
    return AP_OK;
}

static ap_status bad(ap_err *err, const char *where, const char *what) {
    return ap_err_set(err, AP_ERR_INPUT, "%s: malformed %s", where, what);
}

static ap_status get_rank(const ap_json *o, ap_rt_rank_report *r, const char *where, ap_err *err) {
    int64_t v;
    TRY(get_i64(o, "rank", &v, where, err));
    r->rank = (int)v;
    TRY(get_i64(o, "stage", &v, where, err));
    r->stage = (int)v;
    TRY(get_i64(o, "tp_rank", &v, where, err));
    r->tp_rank = (int)v;
    TRY(get_i64(o, "dp_rank", &v, where, err));
    r->dp_rank = (int)v;
    TRY(get_i64(o, "peak_bytes", &r->peak_bytes, where, err));
    TRY(get_cats(o, "peak_cat", r->peak_cat_bytes, where, err));
    TRY(get_cats(o, "cat_peak", r->cat_peak_bytes, where, err));
    TRY(get_i64(o, "host_peak_bytes", &r->host_peak_bytes, where, err));
    TRY(get_i64(o, "rss_peak_bytes", &r->rss_peak_bytes, where, err));
    TRY(get_i64(o, "d2h_bytes", &r->d2h_bytes, where, err));
    TRY(get_i64(o, "h2d_bytes", &r->h2d_bytes, where, err));
    TRY(get_time(o, &r->time, where, err));
    const ap_json *ops = ap_json_get(o, "ops"), *ev = ap_json_get(o, "events");
    if (!ap_json_is_array(ops) || !ap_json_is_array(ev)) return bad(err, where, "ops/events");
    int n = ap_json_size(ops);
    r->ops = ap_calloc((size_t)(n > 0 ? n : 1), sizeof *r->ops);
    if (!r->ops) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const ap_json *a = ap_json_at(ops, i);
        if (ap_json_size(a) != 7 + 2 * AP_RT_NCAT) return bad(err, where, "op record");
        ap_rt_op_record *p = &r->ops[i];
        p->type = (int16_t)ap_json_number(ap_json_at(a, 0));
        p->chunk = (int16_t)ap_json_number(ap_json_at(a, 1));
        p->layer = (int32_t)ap_json_number(ap_json_at(a, 2));
        p->mb = (int32_t)ap_json_number(ap_json_at(a, 3));
        p->begin_s = ap_json_number(ap_json_at(a, 4));
        p->end_s = ap_json_number(ap_json_at(a, 5));
        p->peak_s = ap_json_number(ap_json_at(a, 6));
        for (int c = 0; c < AP_RT_NCAT; c++) {
            p->peak_cat[c] = (int64_t)ap_json_number(ap_json_at(a, 7 + c));
            p->end_cat[c] = (int64_t)ap_json_number(ap_json_at(a, 7 + AP_RT_NCAT + c));
        }
    }
    r->nops = n;
    n = ap_json_size(ev);
    r->events = ap_calloc((size_t)(n > 0 ? n : 1), sizeof *r->events);
    if (!r->events) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const ap_json *a = ap_json_at(ev, i);
        if (ap_json_size(a) != 7) return bad(err, where, "event");
        ap_rt_event *e = &r->events[i];
        e->bytes = (int64_t)ap_json_number(ap_json_at(a, 0));
        e->kind = (int32_t)ap_json_number(ap_json_at(a, 1));
        e->layer = (int32_t)ap_json_number(ap_json_at(a, 2));
        e->mb = (int32_t)ap_json_number(ap_json_at(a, 3));
        e->cat = (int8_t)ap_json_number(ap_json_at(a, 4));
        e->is_free = (int8_t)ap_json_number(ap_json_at(a, 5));
        e->persistent = (int8_t)ap_json_number(ap_json_at(a, 6));
    }
    r->nevents = n;
    return AP_OK;
}

ap_status ap_rt_report_from_json(const ap_json *root, const char *where, ap_rt_report *r,
                                 ap_err *err) {
    memset(r, 0, sizeof *r);
    if (!ap_json_is_object(root)) return bad(err, where, "report");
    ap_status st = ap_json_get_str(root, "backend", r->backend, sizeof r->backend, NULL, where, err);
    if (st == AP_OK) st = ap_json_get_str(root, "host", r->host, sizeof r->host, NULL, where, err);
    int64_t v = 0;
    if (st == AP_OK) st = ap_json_get_int(root, "steps", 0, 1000000, &v, NULL, where, err);
    if (st != AP_OK) return st;
    r->steps = (int)v;
    const ap_json *loss = ap_json_get(root, "loss");
    if (!ap_json_is_array(loss)) return bad(err, where, "loss");
    int nl = ap_json_size(loss);
    r->loss = ap_calloc((size_t)(nl > 0 ? nl : 1), sizeof *r->loss);
    if (!r->loss) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nl; i++) r->loss[i] = ap_json_number(ap_json_at(loss, i));
    if (nl != r->steps) r->steps = nl;
    const ap_json *h = ap_json_get(root, "hostfig");
    ap_rt_host_figures *f = &r->hostfig;
    if (!ap_json_is_object(h)) return bad(err, where, "hostfig");
    if ((st = ap_json_get_bool(h, "measured", &f->measured, NULL, where, err)) != AP_OK ||
        (st = ap_json_get_real(h, "gemm_flops_per_s", 0, 1e20, &f->gemm_flops_per_s, NULL, where,
                               err)) != AP_OK ||
        (st = ap_json_get_real(h, "gemm_half_flops", 0, 1e20, &f->gemm_half_flops, NULL, where,
                               err)) != AP_OK ||
        (st = ap_json_get_real(h, "attn_flops_per_s", 0, 1e20, &f->attn_flops_per_s, NULL, where,
                               err)) != AP_OK ||
        (st = ap_json_get_real(h, "mem_bytes_per_s", 0, 1e20, &f->mem_bytes_per_s, NULL, where,
                               err)) != AP_OK ||
        (st = ap_json_get_real(h, "p2p_latency_s", 0, 1e9, &f->p2p_latency_s, NULL, where, err)) !=
            AP_OK ||
        (st = ap_json_get_real(h, "p2p_bytes_per_s", 0, 1e20, &f->p2p_bytes_per_s, NULL, where,
                               err)) != AP_OK) {
        ap_rt_report_free(r);
        return st;
    }
    const ap_json *ranks = ap_json_get(root, "ranks");
    if (!ap_json_is_array(ranks)) {
        ap_rt_report_free(r);
        return bad(err, where, "ranks");
    }
    int n = ap_json_size(ranks);
    r->ranks = ap_calloc((size_t)(n > 0 ? n : 1), sizeof *r->ranks);
    if (!r->ranks) {
        ap_rt_report_free(r);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    }
    r->nranks = n;
    for (int i = 0; i < n; i++) {
        st = get_rank(ap_json_at(ranks, i), &r->ranks[i], where, err);
        if (st != AP_OK) {
            ap_rt_report_free(r);
            return st;
        }
    }
    return AP_OK;
}
