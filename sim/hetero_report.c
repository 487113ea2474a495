/*
 * hetero_report.c - the heterogeneous-memory run's report (hetero.h): operator records and the
 * movement log the simulators fill while recording the reported step, the GPU / host verdict
 * points, accessors, descriptions, the JSON report (summary, memory and PCIe traffic per
 * operator, downsampled) and the Chrome trace (memory counters, one slice per operator and per
 * transfer).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero_int.h"

/* ---- filling -------------------------------------------------------------------------------- */

/* Record rec, or NULL. A run that keeps no records (opts->record 0: an estimate, fit) numbers
 * them all the same but holds only the last two, the one being filled and the one whose end
 * it sets, in two slots: what the verdict reads of a record (the first operator over the
 * capacity, described when it is met) is the current one's. */
static ap_hetero_oprec *rec_at(hctx *x, int rec) {
    if (rec < 0 || rec >= x->nrecs) return NULL;
    if (x->keep_recs) return &x->recs[rec];
    return rec >= x->nrecs - 2 ? &x->recs[rec & 1] : NULL;
}

int hx_rec(hctx *x, int module, int phase, int32_t layer, int64_t mb) {
    if (!x->recording || x->nomem) return -1;
    if (!x->keep_recs && x->caprecs < 2) {
        ap_hetero_oprec *q = ap_realloc(x->recs, 2 * sizeof *q);
        if (!q) {
            x->nomem = 1;
            return -1;
        }
        x->recs = q;
        x->caprecs = 2;
    } else if (x->keep_recs && x->nrecs == x->caprecs) {
        int nc = x->caprecs ? x->caprecs * 2 : 1024;
        ap_hetero_oprec *q = ap_realloc(x->recs, (size_t)nc * sizeof *q);
        if (!q) {
            x->nomem = 1;
            return -1;
        }
        x->recs = q;
        x->caprecs = nc;
    }
    int i = x->nrecs++;
    ap_hetero_oprec *r = &x->recs[x->keep_recs ? i : i & 1];
    memset(r, 0, sizeof *r);
    r->module = (int8_t)module;
    r->phase = (int8_t)phase;
    r->layer = layer;
    r->mb = mb;
    r->start_s = x->tl.t;
    r->host_bytes = (int64_t)x->host_now;
    if (i > 0) x->recs[x->keep_recs ? i - 1 : (i - 1) & 1].end_s = x->tl.t;
    return i;
}

void hx_move(hctx *x, int rec, int32_t chunk, int kind, int what, double bytes) {
    if (!x->recording || bytes <= 0) return;
    ap_hetero_summary *s = &x->sum;
    switch (kind) {
    case AP_MOVE_H2D:
    case AP_MOVE_H2D_FP32: s->h2d_bytes += bytes; break;
    case AP_MOVE_D2H: s->d2h_bytes += bytes; break;
    case AP_MOVE_NVME_READ: s->nvme_read_bytes += bytes; break;
    case AP_MOVE_NVME_WRITE: s->nvme_write_bytes += bytes; break;
    case AP_MOVE_GATHER: s->gather_bytes += bytes; break;
    case AP_MOVE_REDUCE: s->reduce_bytes += bytes; break;
    }
    ap_hetero_oprec *r = rec_at(x, rec);
    if (r) {
        if (kind == AP_MOVE_H2D || kind == AP_MOVE_H2D_FP32) r->h2d_bytes += (int64_t)bytes;
        else if (kind == AP_MOVE_D2H) r->d2h_bytes += (int64_t)bytes;
        else if (kind == AP_MOVE_NVME_READ) r->nvme_read_bytes += (int64_t)bytes;
        else if (kind == AP_MOVE_NVME_WRITE) r->nvme_write_bytes += (int64_t)bytes;
    }
    if (!x->keep_recs || x->nomem) return;
    if (x->nmoves == x->capmoves) {
        int nc = x->capmoves ? x->capmoves * 2 : 1024;
        ap_hetero_move *q = ap_realloc(x->moves, (size_t)nc * sizeof *q);
        if (!q) {
            x->nomem = 1;
            return;
        }
        x->moves = q;
        x->capmoves = nc;
    }
    x->moves[x->nmoves++] = (ap_hetero_move){rec, chunk, (int8_t)kind, (int8_t)what,
                                              (int64_t)bytes};
}

void hx_gpu_point(hctx *x, int rec, double model_bytes, double nonmodel_bytes) {
    if (!x->recording) return;
    ap_hetero_summary *s = &x->sum;
    double dev = model_bytes + nonmodel_bytes + x->overhead_bytes;
    if (model_bytes > s->gpu_model_peak_bytes) s->gpu_model_peak_bytes = model_bytes;
    if (dev > s->gpu_peak_bytes) {
        s->gpu_peak_bytes = dev;
        s->gpu_nonmodel_at_peak_bytes = nonmodel_bytes;
    }
    ap_hetero_oprec *r = rec_at(x, rec);
    if (r) {
        if (model_bytes > (double)r->gpu_model_bytes) r->gpu_model_bytes = (int64_t)model_bytes;
        if (nonmodel_bytes > (double)r->gpu_nonmodel_bytes)
            r->gpu_nonmodel_bytes = (int64_t)nonmodel_bytes;
        if (dev > (double)r->gpu_bytes) r->gpu_bytes = (int64_t)dev;
    }
    double over = dev + s->headroom_bytes - s->gpu_capacity_bytes;
    if (over > 0 && s->first_over_op < 0) {
        s->first_over_op = rec;
        s->over_bytes = over;
        if (r) ap_hetero_op_describe(r, s->over_op, sizeof s->over_op);
    } else if (over > 0 && rec == s->first_over_op && over > s->over_bytes) {
        s->over_bytes = over;
    }
    /* the reported step's peak only grows, and the verdict's GPU rule reads it (hetero.c), as
       the search's overshoot does (device peak + headroom - capacity, over the capacity) */
    if (over > 0)
        hx_stop_past(x, AP_BIND_GPU, s->gpu_peak_bytes + s->headroom_bytes - s->gpu_capacity_bytes,
                     s->gpu_capacity_bytes);
}

void hx_stop(hctx *x, int binding, int kind) {
    x->unfit = binding;
    x->stop_kind = kind;
}

void hx_stop_past(hctx *x, int binding, double excess, double cap) {
    if (x->unfit || !(excess > 0)) return;
    if (x->o->stop_unfit) hx_stop(x, binding, 1);
    else if (x->o->stop_over > 0 && cap > 0 && excess / cap > x->o->stop_over)
        hx_stop(x, binding, 2);
}

int hx_may_stop_early(const hctx *x) {
    const ap_hetero_opts *o = x->o;
    return o->stop_early && !x->unfit && (o->stop_unfit || o->stop_over > 0);
}

void hx_planned(hctx *x, int rec, double bytes) {
    ap_hetero_oprec *r = rec_at(x, rec);
    if (r) r->planned_bytes = (int64_t)bytes;
}

void hx_host_point(hctx *x, int rec, double host_bytes, double pinned_bytes) {
    ap_hetero_summary *s = &x->sum;
    x->host_now = host_bytes;
    /* host memory is charged in every step: buffers created once stay */
    if (host_bytes > s->host_peak_bytes) {
        s->host_peak_bytes = host_bytes;
        s->host_pinned_bytes = pinned_bytes;
        /* the peak only grows, and the verdict's host rule reads it (hetero.c), as the
           search's overshoot does (the node's share past 90%, over the node's memory) */
        const double node = host_bytes * x->gpus_per_node, cap = s->host_capacity_bytes;
        hx_stop_past(x, AP_BIND_HOST, node - 0.9 * cap, cap);
    }
    ap_hetero_oprec *r = x->recording ? rec_at(x, rec) : NULL;
    if (r && host_bytes > (double)r->host_bytes) r->host_bytes = (int64_t)host_bytes;
}

void hx_snap(const hctx *x, hsnap *s) {
    s->t = x->tl.t;
    s->h2d_busy = x->tl.h2d_busy;
    s->d2h_busy = x->tl.d2h_busy;
    s->nvme_busy = x->tl.nvme_busy;
    s->exposed = x->tl.exposed;
    s->coll_exposed = x->tl.coll_exposed;
    s->h2d = x->sum.h2d_bytes;
    s->d2h = x->sum.d2h_bytes;
    s->nvme_r = x->sum.nvme_read_bytes;
    s->nvme_w = x->sum.nvme_write_bytes;
    s->gather = x->sum.gather_bytes;
    s->reduce = x->sum.reduce_bytes;
}

static void repeat(hctx *x, const hsnap *a, const hsnap *b, double times) {
    if (times <= 0) return;
    double dt = (b->t - a->t) * times;
    x->tl.t += dt;
    /* the engines were drained at the micro-batch's end: move them with the clock */
    if (x->tl.h2d_free < x->tl.t) x->tl.h2d_free += dt;
    if (x->tl.d2h_free < x->tl.t) x->tl.d2h_free += dt;
    if (x->tl.nvme_free < x->tl.t) x->tl.nvme_free += dt;
    if (x->tl.coll_free < x->tl.t) x->tl.coll_free += dt;
    x->tl.h2d_busy += (b->h2d_busy - a->h2d_busy) * times;
    x->tl.d2h_busy += (b->d2h_busy - a->d2h_busy) * times;
    x->tl.nvme_busy += (b->nvme_busy - a->nvme_busy) * times;
    x->tl.exposed += (b->exposed - a->exposed) * times;
    x->tl.coll_exposed += (b->coll_exposed - a->coll_exposed) * times;
    x->sum.h2d_bytes += (b->h2d - a->h2d) * times;
    x->sum.d2h_bytes += (b->d2h - a->d2h) * times;
    x->sum.nvme_read_bytes += (b->nvme_r - a->nvme_r) * times;
    x->sum.nvme_write_bytes += (b->nvme_w - a->nvme_w) * times;
    x->sum.gather_bytes += (b->gather - a->gather) * times;
    x->sum.reduce_bytes += (b->reduce - a->reduce) * times;
}

int64_t hx_repeat_rest(hctx *x, const hsnap *a, const hsnap *b) {
    repeat(x, a, b, (double)(x->mb - 3));
    return x->mb - 2;
}

/* ---- accessors ------------------------------------------------------------------------------ */

const ap_hetero_summary *ap_hetero_summary_of(const ap_hetero *h) { return &((const hctx *)h)->sum; }

const ap_hetero_oprec *ap_hetero_ops(const ap_hetero *h, int *n) {
    const hctx *x = (const hctx *)h;
    *n = x->keep_recs ? x->nrecs : 0; /* a run that keeps none holds the last two only */
    return *n ? x->recs : NULL;
}

const ap_hetero_move *ap_hetero_moves(const ap_hetero *h, int *n) {
    const hctx *x = (const hctx *)h;
    *n = x->nmoves;
    return x->moves;
}

const char *ap_binding_name(ap_binding b) {
    static const char *n[] = {"none", "gpu", "host", "nvme", "throughput"};
    return b >= AP_BIND_NONE && b <= AP_BIND_THROUGHPUT ? n[b] : "none";
}

const char *ap_move_kind_name(int k) {
    static const char *n[AP_MOVE_COUNT] = {"h2d", "h2d_fp32", "d2h", "nvme_read", "nvme_write",
                                           "all_gather", "reduce_scatter"};
    return k >= 0 && k < AP_MOVE_COUNT ? n[k] : "?";
}

char *ap_hetero_op_describe(const ap_hetero_oprec *r, char *buf, size_t n) {
    static const char *ph[] = {"forward", "recomputed forward", "backward", "optimizer step"};
    if (r->phase == 3) {
        snprintf(buf, n, "optimizer step");
        return buf;
    }
    char where[48] = "";
    if (r->layer >= 0) snprintf(where, sizeof where, ", layer %d", (int)r->layer);
    snprintf(buf, n, "%s of %s%s, micro-batch %lld",
             ph[r->phase >= 0 && r->phase < 3 ? r->phase : 0], ap_hmod_name(r->module), where,
             (long long)r->mb);
    return buf;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static ap_json *summary_json(const hctx *x) {
    const ap_hetero_summary *s = &x->sum;
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    ap_json_add_string(o, "strategy", s->name);
    ap_json_add_number(o, "zero_size", s->zero_size);
    ap_json_add_number(o, "micro_batches", s->micro_batches);
    if (s->kind == AP_HETERO_GEMINI) {
        ap_json *c = ap_json_new_object();
        ap_json_add_number(c, "chunk_elems", (double)s->chunks.chunk_elems);
        ap_json_add_number(c, "chunks", s->nchunks);
        ap_json_add_number(c, "waste_elems", (double)s->chunks.waste_elems);
        ap_json_add_bool(c, "keep_gathered", s->chunks.keep_gathered);
        ap_json_add_number(c, "filtered_params", s->chunks.nfiltered);
        ap_json_add_number(c, "offload_optim_frac_effective", s->offload_optim_frac_effective);
        ap_json_add(o, "chunks", c);
    }
    ap_json *t = ap_json_new_object();
    ap_json_add_number(t, "h2d_bytes", s->h2d_bytes);
    ap_json_add_number(t, "d2h_bytes", s->d2h_bytes);
    ap_json_add_number(t, "nvme_read_bytes", s->nvme_read_bytes);
    ap_json_add_number(t, "nvme_write_bytes", s->nvme_write_bytes);
    ap_json_add_number(t, "all_gather_bytes", s->gather_bytes);
    ap_json_add_number(t, "reduce_scatter_bytes", s->reduce_bytes);
    ap_json_add_number(t, "h2d_s", s->h2d_s);
    ap_json_add_number(t, "d2h_s", s->d2h_s);
    ap_json_add_number(t, "nvme_s", s->nvme_s);
    ap_json_add_number(t, "exposed_s", s->transfer_exposed_s);
    ap_json_add(o, "traffic", t);
    ap_json *tm = ap_json_new_object();
    ap_json_add_number(tm, "step_s", s->step_s);
    ap_json_add_number(tm, "compute_s", s->compute_s);
    ap_json_add_number(tm, "transfer_exposed_s", s->transfer_exposed_s);
    ap_json_add_number(tm, "collective_exposed_s", s->collective_exposed_s);
    ap_json_add_number(tm, "cpu_adam_s", s->cpu_adam_s);
    ap_json_add_number(tm, "gpu_adam_s", s->gpu_adam_s);
    ap_json_add_number(tm, "nvme_optimizer_s", s->nvme_optimizer_s);
    ap_json_add_number(tm, "overhead_s", s->overhead_s);
    ap_json_add_number(tm, "tokens_per_s", s->tokens_per_s);
    ap_json_add_number(tm, "mfu", s->mfu);
    ap_json_add(o, "time", tm);
    ap_json *m = ap_json_new_object();
    ap_json_add_number(m, "gpu_model_peak_bytes", s->gpu_model_peak_bytes);
    ap_json_add_number(m, "gpu_peak_bytes", s->gpu_peak_bytes);
    ap_json_add_number(m, "gpu_nonmodel_at_peak_bytes", s->gpu_nonmodel_at_peak_bytes);
    ap_json_add_number(m, "gpu_capacity_bytes", s->gpu_capacity_bytes);
    ap_json_add_number(m, "headroom_bytes", s->headroom_bytes);
    ap_json_add_number(m, "host_peak_bytes_per_gpu", s->host_peak_bytes);
    ap_json_add_number(m, "host_pinned_bytes_per_gpu", s->host_pinned_bytes);
    ap_json_add_number(m, "host_bytes_per_node", s->host_bytes_per_node);
    ap_json_add_number(m, "host_capacity_bytes", s->host_capacity_bytes);
    ap_json_add_number(m, "nvme_bytes_per_node", s->nvme_bytes_per_node);
    ap_json_add_number(m, "nvme_capacity_bytes", s->nvme_capacity_bytes);
    ap_json_add(o, "memory", m);
    ap_json_add_bool(o, "fits", s->fits);
    ap_json_add_string(o, "binding", ap_binding_name(s->binding));
    if (s->first_over_op >= 0) {
        ap_json *ov = ap_json_new_object();
        ap_json_add_string(ov, "op", s->over_op);
        ap_json_add_number(ov, "over_bytes", s->over_bytes);
        ap_json_add(o, "first_over", ov);
    }
    if (s->failure[0]) ap_json_add_string(o, "failure", s->failure);
    return o;
}

ap_json *ap_hetero_to_json(const ap_hetero *h, int max_points) {
    const hctx *x = (const hctx *)h;
    ap_json *o = summary_json(x);
    if (!o) return NULL;
    if (x->keep_recs && x->nrecs > 0 && max_points > 0) {
        /* per operator, downsampled: the maximum of each run of records */
        ap_json *arr = ap_json_new_array();
        int n = x->nrecs, per = (n + max_points - 1) / max_points;
        for (int i = 0; i < n; i += per) {
            ap_hetero_oprec mx = x->recs[i];
            int64_t h2d = 0, d2h = 0, nr = 0, nw = 0;
            for (int j = i; j < n && j < i + per; j++) {
                const ap_hetero_oprec *r = &x->recs[j];
                if (r->gpu_bytes > mx.gpu_bytes) mx = *r;
                if (r->host_bytes > mx.host_bytes) mx.host_bytes = r->host_bytes;
                h2d += r->h2d_bytes;
                d2h += r->d2h_bytes;
                nr += r->nvme_read_bytes;
                nw += r->nvme_write_bytes;
            }
            char d[128];
            ap_json *p = ap_json_new_object();
            ap_json_add_string(p, "op", ap_hetero_op_describe(&mx, d, sizeof d));
            ap_json_add_number(p, "t_s", x->recs[i].start_s);
            ap_json_add_number(p, "gpu_bytes", (double)mx.gpu_bytes);
            ap_json_add_number(p, "gpu_model_bytes", (double)mx.gpu_model_bytes);
            ap_json_add_number(p, "gpu_nonmodel_bytes", (double)mx.gpu_nonmodel_bytes);
            ap_json_add_number(p, "host_bytes", (double)mx.host_bytes);
            ap_json_add_number(p, "h2d_bytes", (double)h2d);
            ap_json_add_number(p, "d2h_bytes", (double)d2h);
            ap_json_add_number(p, "nvme_read_bytes", (double)nr);
            ap_json_add_number(p, "nvme_write_bytes", (double)nw);
            ap_json_push(arr, p);
        }
        ap_json_add(o, "curve", arr);
    }
    return o;
}

ap_json *ap_hetero_trace_json(const ap_hetero *h) {
    const hctx *x = (const hctx *)h;
    ap_json *root = ap_json_new_object();
    ap_json *ev = ap_json_new_array();
    if (!root || !ev) {
        ap_json_free(root);
        ap_json_free(ev);
        return NULL;
    }
    /* Chrome trace: microseconds of simulated time; pid 0 = the rank */
    for (int i = 0; i < (x->keep_recs ? x->nrecs : 0); i++) {
        const ap_hetero_oprec *r = &x->recs[i];
        char d[128];
        double ts = r->start_s * 1e6, dur = (r->end_s - r->start_s) * 1e6;
        if (dur < 0) dur = 0;
        ap_json *e = ap_json_new_object();
        ap_json_add_string(e, "name", ap_hetero_op_describe(r, d, sizeof d));
        ap_json_add_string(e, "ph", "X");
        ap_json_add_number(e, "ts", ts);
        ap_json_add_number(e, "dur", dur);
        ap_json_add_number(e, "pid", 0);
        ap_json_add_number(e, "tid", 0);
        ap_json_push(ev, e);
        ap_json *c = ap_json_new_object();
        ap_json_add_string(c, "name", "memory");
        ap_json_add_string(c, "ph", "C");
        ap_json_add_number(c, "ts", ts);
        ap_json_add_number(c, "pid", 0);
        ap_json *a = ap_json_new_object();
        ap_json_add_number(a, "gpu_model_bytes", (double)r->gpu_model_bytes);
        ap_json_add_number(a, "gpu_nonmodel_bytes", (double)r->gpu_nonmodel_bytes);
        ap_json_add_number(a, "host_bytes", (double)r->host_bytes);
        ap_json_add(c, "args", a);
        ap_json_push(ev, c);
    }
    for (int i = 0; i < x->nmoves; i++) {
        const ap_hetero_move *mv = &x->moves[i];
        if (mv->op < 0 || mv->op >= x->nrecs) continue;
        const ap_hetero_oprec *r = &x->recs[mv->op];
        char name[64];
        snprintf(name, sizeof name, "%s chunk %d", ap_move_kind_name(mv->kind), (int)mv->chunk);
        ap_json *e = ap_json_new_object();
        ap_json_add_string(e, "name", name);
        ap_json_add_string(e, "ph", "i");
        ap_json_add_string(e, "s", "t");
        ap_json_add_number(e, "ts", r->start_s * 1e6);
        ap_json_add_number(e, "pid", 0);
        ap_json_add_number(e, "tid", 1 + mv->kind);
        ap_json *a = ap_json_new_object();
        ap_json_add_number(a, "bytes", (double)mv->bytes);
        ap_json_add(e, "args", a);
        ap_json_push(ev, e);
    }
    ap_json_add(root, "traceEvents", ev);
    ap_json_add_string(root, "displayTimeUnit", "ms");
    return root;
}
