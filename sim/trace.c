/*
 * trace.c - the simulator's timeline as Chrome trace event JSON (sim.h), readable by
 * chrome://tracing and ui.perfetto.dev ("Trace Event Format", Google, 2016: objects with
 * name, ph, ts (microseconds), pid, tid, args; "X" complete events with dur, "C" counters,
 * "M" metadata).
 *
 * One process per pipeline rank ("stage N"); thread 1 holds one slice per simulated operation
 * ("forward of layer 3, micro-batch 0"); two counter series per rank: "live bytes by category"
 * (one track per category) and "allocator bytes" (allocated, reserved). Time is the logical
 * event clock of the simulation (1 us per allocation or free), not a time prediction: the
 * simulator orders events, the cost model times them. Counters are written at each
 * operation's own peak and at its end, which keeps traces of long schedules small while every
 * local maximum stays visible.
 *
 * The file is streamed: events are composed in a small buffer that is written out whenever it
 * passes TRACE_CHUNK, into a temporary file renamed into place at the end, so memory does not
 * grow with the trace (the JSON text is what ap_json_print would write for the same events).
 * A recorded rank is written whole from its per-operation arrays (trace_rank); a streamed run
 * (ap_sim_opts.stream) hands each operation over as it closes (ap_sim_tracer_op) and the
 * peak at the rank's end: both go through operation() with the same state, so the text is the
 * same.
 */
#include "autoplan/sim.h"
#include "autoplan/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_CHUNK (1u << 20) /* bytes composed before they are written out */

typedef struct {
    ap_strbuf b;
    ap_sim_trace_sink sink;
    void *ctx;
    int first;       /* no event written yet */
    ap_status st;
    ap_err *err;
} trace_out;

/* write the composed text out once it passes the chunk size (or at the end) */
static void flush(trace_out *t, int all) {
    if (t->st != AP_OK) return;
    if (t->b.failed) {
        t->st = ap_err_set(t->err, AP_ERR_NOMEM, "out of memory writing the trace");
        return;
    }
    if (t->b.len < TRACE_CHUNK && !all) return;
    t->st = t->sink(t->ctx, t->b.buf, t->b.len, t->err);
    t->b.len = 0;
}

static void key(trace_out *t, const char *k) {
    ap_strbuf_puts(&t->b, ",");
    ap_json_put_string(&t->b, k);
    ap_strbuf_puts(&t->b, ":");
}

static void num(trace_out *t, const char *k, double v) {
    key(t, k);
    ap_json_put_number(&t->b, v);
}

static void str(trace_out *t, const char *k, const char *v) {
    key(t, k);
    ap_json_put_string(&t->b, v);
}

/* open an event object: name, ph, ts, pid, tid (the caller adds members and closes it) */
static void event(trace_out *t, const char *name, const char *ph, double ts, int pid, int tid) {
    ap_strbuf_puts(&t->b, t->first ? "{\"name\":" : ",{\"name\":");
    t->first = 0;
    ap_json_put_string(&t->b, name);
    str(t, "ph", ph);
    num(t, "ts", ts);
    num(t, "pid", pid);
    num(t, "tid", tid);
}

/* the counters at event ev: live bytes per category, allocated and reserved bytes */
static void counters(trace_out *t, int ev, const int64_t *cat, int64_t allocated,
                     int64_t reserved, int pid) {
    event(t, "live bytes by category", "C", ev, pid, 0);
    ap_strbuf_puts(&t->b, ",\"args\":{");
    for (int c = 0; c < AP_SIM_NCAT; c++) {
        if (c) ap_strbuf_puts(&t->b, ",");
        ap_json_put_string(&t->b, ap_sim_category_name(c));
        ap_strbuf_puts(&t->b, ":");
        ap_json_put_number(&t->b, (double)cat[c]);
    }
    ap_strbuf_puts(&t->b, "}}");
    event(t, "allocator bytes", "C", ev, pid, 0);
    ap_strbuf_puts(&t->b, ",\"args\":{\"allocated\":");
    ap_json_put_number(&t->b, (double)allocated);
    ap_strbuf_puts(&t->b, ",\"reserved\":");
    ap_json_put_number(&t->b, (double)reserved);
    ap_strbuf_puts(&t->b, "}}");
}

/* process and thread names of a rank */
static void names(trace_out *t, int stage) {
    char name[64];
    snprintf(name, sizeof name, "stage %d", stage);
    event(t, "process_name", "M", 0, stage, 0);
    ap_strbuf_puts(&t->b, ",\"args\":{\"name\":");
    ap_json_put_string(&t->b, name);
    ap_strbuf_puts(&t->b, "}}");
    event(t, "thread_name", "M", 0, stage, 1);
    ap_strbuf_puts(&t->b, ",\"args\":{\"name\":\"operations\"}}");
}

/* one operation's slice and its counters (at its peak and at its end) */
static void operation(trace_out *t, const ap_sim *s, int stage, const ap_sim_op *op,
                      const ap_sim_op_state *st) {
    char name[256];
    ap_sim_op_describe_op(s, stage, op, name, sizeof name);
    event(t, name, "X", op->ev_begin, stage, 1);
    int dur = op->ev_end - op->ev_begin;
    num(t, "dur", dur > 0 ? dur : 0.5);
    str(t, "cat", ap_sim_op_name(op->type));
    ap_strbuf_puts(&t->b, ",\"args\":{\"layer\":");
    ap_json_put_number(&t->b, op->layer);
    ap_strbuf_puts(&t->b, ",\"microbatch\":");
    ap_json_put_number(&t->b, op->mb);
    ap_strbuf_puts(&t->b, ",\"events\":");
    ap_json_put_number(&t->b, dur);
    ap_strbuf_puts(&t->b, "}}");
    if (dur <= 0) return;
    int peak = st->peak_event;
    counters(t, peak, st->peak_cat, st->peak_allocated, st->peak_reserved, stage);
    if (op->ev_end - 1 != peak)
        counters(t, op->ev_end - 1, st->end_cat, st->end_allocated, st->end_reserved, stage);
}

/* the state of operation o of a recorded rank (its per-op arrays and curves) */
static void recorded_state(const ap_sim_rank *r, int o, ap_sim_op_state *st) {
    const ap_sim_op *op = &r->ops[o];
    memset(st, 0, sizeof *st);
    st->peak_event = r->op_peak_event[o];
    if (op->ev_end <= op->ev_begin) return;
    memcpy(st->peak_cat, &r->op_peak_cat[(int64_t)o * AP_SIM_NCAT], sizeof st->peak_cat);
    memcpy(st->end_cat, &r->op_end_cat[(int64_t)o * AP_SIM_NCAT], sizeof st->end_cat);
    st->peak_allocated = r->allocated_curve[st->peak_event];
    st->peak_reserved = r->reserved_curve[st->peak_event];
    st->end_allocated = r->allocated_curve[op->ev_end - 1];
    st->end_reserved = r->reserved_curve[op->ev_end - 1];
}

/* the rank's allocated peak as an instant event on the operations thread */
static void peak_instant(trace_out *t, const ap_sim *s, const ap_sim_rank *r) {
    if (r->peak_event < 0) return;
    char name[256], d[200];
    snprintf(name, sizeof name, "allocated peak: %s",
             ap_sim_op_describe(s, r, r->peak_op, d, sizeof d));
    event(t, name, "i", r->peak_event, r->stage, 1);
    str(t, "s", "p");
    ap_strbuf_puts(&t->b, "}");
}

/* one recorded rank: its names, an operation at a time (flushed as it grows), the peak */
static void trace_rank(trace_out *t, const ap_sim *s, const ap_sim_rank *r) {
    names(t, r->stage);
    for (int o = 0; o < r->nops && t->st == AP_OK; o++) {
        ap_sim_op_state st;
        recorded_state(r, o, &st);
        operation(t, s, r->stage, &r->ops[o], &st);
        flush(t, 0);
    }
    peak_instant(t, s, r);
}

static ap_status no_curves(ap_err *err) {
    return ap_err_set(err, AP_ERR_INPUT, "the simulation recorded no curves (the trace needs "
                      "record_curves)");
}

struct ap_sim_tracer {
    trace_out t;
    int named;      /* the last rank whose names are written (a streamed run), -1 none */
    ap_file_out *f; /* the file (whole or not at all), or NULL for the caller's sink */
    char path[1024];
    ap_err failure; /* the error that stopped it (t.st != AP_OK) */
};

static ap_status file_sink(void *ctx, const char *data, size_t len, ap_err *err) {
    return ap_file_out_write(ctx, data, len, err);
}

ap_status ap_sim_tracer_open(const char *path, ap_sim_trace_sink sink, void *ctx,
                             ap_sim_tracer **out, ap_err *err) {
    *out = NULL;
    ap_sim_tracer *tr = ap_calloc(1, sizeof *tr);
    if (!tr) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the trace");
    if (path) {
        ap_status st = ap_file_out_open(path, &tr->f, err);
        if (st != AP_OK) {
            ap_free(tr);
            return st;
        }
        snprintf(tr->path, sizeof tr->path, "%s", path);
        sink = file_sink;
        ctx = tr->f;
    }
    tr->t = (trace_out){{0}, sink, ctx, 1, AP_OK, err};
    tr->named = -1;
    ap_strbuf_puts(&tr->t.b, "{\"traceEvents\":[");
    *out = tr;
    return AP_OK;
}

/* a write that failed just now names the file; the error is kept */
static ap_status failed(ap_sim_tracer *tr, ap_err *err) {
    if (tr->t.st == AP_OK) return AP_OK;
    if (tr->f) ap_err_prefix(err, "%s", tr->path);
    tr->failure = *err;
    return tr->t.st;
}

/* the names of rank `rank` once, before its first operation (a streamed run) */
static void name_rank(ap_sim_tracer *tr, int rank) {
    if (tr->named == rank) return;
    names(&tr->t, rank);
    tr->named = rank;
}

ap_status ap_sim_tracer_rank(void *tracer, const ap_sim *s, int rank, ap_err *err) {
    ap_sim_tracer *tr = tracer;
    if (tr->t.st != AP_OK) { /* stopped earlier */
        *err = tr->failure;
        return tr->t.st;
    }
    const ap_sim_rank *r = ap_sim_rank_at(s, rank);
    tr->t.err = err;
    if (ap_sim_options(s)->stream) { /* its operations went through ap_sim_tracer_op */
        name_rank(tr, rank);
        peak_instant(&tr->t, s, r);
        return failed(tr, err);
    }
    if (!r->allocated_curve) {
        tr->t.st = no_curves(err);
        tr->failure = *err;
        return tr->t.st;
    }
    trace_rank(&tr->t, s, r);
    return failed(tr, err);
}

ap_status ap_sim_tracer_op(void *tracer, const ap_sim *s, int rank, const ap_sim_op *op,
                           const ap_sim_op_state *st, ap_err *err) {
    ap_sim_tracer *tr = tracer;
    if (tr->t.st != AP_OK) {
        *err = tr->failure;
        return tr->t.st;
    }
    tr->t.err = err;
    name_rank(tr, rank);
    operation(&tr->t, s, rank, op, st);
    flush(&tr->t, 0);
    return failed(tr, err);
}

void ap_sim_tracer_attach(ap_sim_tracer *tr, ap_sim_opts *o) {
    o->rank_done = ap_sim_tracer_rank;
    o->op_done = o->stream ? ap_sim_tracer_op : NULL;
    o->rank_ctx = tr;
}

ap_status ap_sim_tracer_finish(ap_sim_tracer *tr, ap_err *err) {
    ap_status st;
    if (tr->t.st == AP_OK) {
        tr->t.err = err;
        ap_strbuf_puts(&tr->t.b, "],\"displayTimeUnit\":\"ns\"}");
        flush(&tr->t, 1);
        st = failed(tr, err);
    } else {
        *err = tr->failure;
        st = tr->t.st;
    }
    ap_strbuf_free(&tr->t.b);
    if (tr->f) {
        if (st == AP_OK)
            st = ap_file_out_commit(tr->f, err);
        else
            ap_file_out_abort(tr->f);
    }
    ap_free(tr);
    return st;
}

void ap_sim_tracer_abort(ap_sim_tracer *tr) {
    if (!tr) return;
    ap_strbuf_free(&tr->t.b);
    if (tr->f) ap_file_out_abort(tr->f);
    ap_free(tr);
}

/* the whole trace of a finished simulation through a tracer */
static ap_status trace_all(const ap_sim *s, const char *path, ap_sim_trace_sink sink, void *ctx,
                           ap_err *err) {
    for (int i = 0; i < ap_sim_nranks(s); i++)
        if (!ap_sim_rank_at(s, i)->allocated_curve) return no_curves(err);
    ap_sim_tracer *tr;
    ap_status st = ap_sim_tracer_open(path, sink, ctx, &tr, err);
    for (int i = 0; i < ap_sim_nranks(s) && st == AP_OK; i++)
        st = ap_sim_tracer_rank(tr, s, i, err);
    if (st != AP_OK) {
        ap_sim_tracer_abort(tr);
        return st;
    }
    return ap_sim_tracer_finish(tr, err);
}

ap_status ap_sim_trace_stream(const ap_sim *s, ap_sim_trace_sink sink, void *ctx, ap_err *err) {
    return trace_all(s, NULL, sink, ctx, err);
}

ap_json *ap_trace_event(ap_json *arr, const char *name, const char *ph, double ts, int pid,
                        int tid) {
    ap_json *e = ap_json_new_object();
    if (ap_json_push(arr, e) != AP_OK) return NULL;
    if (ap_json_add_string(e, "name", name) != AP_OK || ap_json_add_string(e, "ph", ph) != AP_OK ||
        ap_json_add_number(e, "ts", ts) != AP_OK || ap_json_add_number(e, "pid", pid) != AP_OK ||
        ap_json_add_number(e, "tid", tid) != AP_OK)
        return NULL;
    return e;
}

ap_status ap_sim_trace_write(const ap_sim *s, const char *path, ap_err *err) {
    return trace_all(s, path, NULL, NULL, err);
}
