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
 */
#include "autoplan/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHK(call)                                                                                 \
    do {                                                                                          \
        if ((call) != AP_OK) goto fail;                                                           \
    } while (0)

static ap_json *event(ap_json *arr, const char *name, const char *ph, double ts, int pid,
                      int tid) {
    ap_json *e = ap_json_new_object();
    if (ap_json_push(arr, e) != AP_OK) return NULL;
    if (ap_json_add_string(e, "name", name) != AP_OK || ap_json_add_string(e, "ph", ph) != AP_OK ||
        ap_json_add_number(e, "ts", ts) != AP_OK || ap_json_add_number(e, "pid", pid) != AP_OK ||
        ap_json_add_number(e, "tid", tid) != AP_OK)
        return NULL;
    return e;
}

static ap_status counters(ap_json *arr, const ap_sim_rank *r, int ev, const int64_t *cat,
                          int pid) {
    ap_json *e = event(arr, "live bytes by category", "C", ev, pid, 0);
    if (!e) return AP_ERR_NOMEM;
    ap_json *args = ap_json_new_object();
    if (ap_json_add(e, "args", args) != AP_OK) return AP_ERR_NOMEM;
    for (int c = 0; c < AP_SIM_NCAT; c++)
        if (ap_json_add_number(args, ap_sim_category_name(c),
                               (double)cat[c]) != AP_OK)
            return AP_ERR_NOMEM;
    e = event(arr, "allocator bytes", "C", ev, pid, 0);
    if (!e) return AP_ERR_NOMEM;
    args = ap_json_new_object();
    if (ap_json_add(e, "args", args) != AP_OK) return AP_ERR_NOMEM;
    if (ap_json_add_number(args, "allocated", (double)r->allocated_curve[ev]) != AP_OK ||
        ap_json_add_number(args, "reserved", (double)r->reserved_curve[ev]) != AP_OK)
        return AP_ERR_NOMEM;
    return AP_OK;
}

ap_json *ap_sim_trace_json(const ap_sim *s) {
    ap_json *root = ap_json_new_object();
    ap_json *arr = ap_json_new_array();
    if (ap_json_add(root, "traceEvents", arr) != AP_OK) {
        ap_json_free(root);
        return NULL;
    }
    CHK(ap_json_add_string(root, "displayTimeUnit", "ns"));
    for (int i = 0; i < ap_sim_nranks(s); i++) {
        const ap_sim_rank *r = ap_sim_rank_at(s, i);
        if (!r->allocated_curve) goto fail; /* curves were not recorded */
        char name[256];
        snprintf(name, sizeof name, "stage %d", r->stage);
        ap_json *e = event(arr, "process_name", "M", 0, r->stage, 0);
        if (!e) goto fail;
        ap_json *args = ap_json_new_object();
        if (ap_json_add(e, "args", args) != AP_OK) goto fail;
        CHK(ap_json_add_string(args, "name", name));
        e = event(arr, "thread_name", "M", 0, r->stage, 1);
        if (!e) goto fail;
        args = ap_json_new_object();
        if (ap_json_add(e, "args", args) != AP_OK) goto fail;
        CHK(ap_json_add_string(args, "name", "operations"));
        for (int o = 0; o < r->nops; o++) {
            const ap_sim_op *op = &r->ops[o];
            ap_sim_op_describe(s, r, o, name, sizeof name);
            e = event(arr, name, "X", op->ev_begin, r->stage, 1);
            if (!e) goto fail;
            int dur = op->ev_end - op->ev_begin;
            CHK(ap_json_add_number(e, "dur", dur > 0 ? dur : 0.5));
            CHK(ap_json_add_string(e, "cat", ap_sim_op_name(op->type)));
            args = ap_json_new_object();
            if (ap_json_add(e, "args", args) != AP_OK) goto fail;
            CHK(ap_json_add_number(args, "layer", op->layer));
            CHK(ap_json_add_number(args, "microbatch", op->mb));
            CHK(ap_json_add_number(args, "events", dur));
            if (dur <= 0) continue;
            int peak = r->op_peak_event[o];
            CHK(counters(arr, r, peak, &r->op_peak_cat[(int64_t)o * AP_SIM_NCAT], r->stage));
            if (op->ev_end - 1 != peak)
                CHK(counters(arr, r, op->ev_end - 1, &r->op_end_cat[(int64_t)o * AP_SIM_NCAT],
                             r->stage));
        }
        /* mark the peak as an instant event on the operations thread */
        if (r->peak_event >= 0) {
            char t[200];
            snprintf(name, sizeof name, "allocated peak: %s",
                     ap_sim_op_describe(s, r, r->peak_op, t, sizeof t));
            e = event(arr, name, "i", r->peak_event, r->stage, 1);
            if (!e) goto fail;
            CHK(ap_json_add_string(e, "s", "p"));
        }
    }
    return root;
fail:
    ap_json_free(root);
    return NULL;
}

ap_status ap_sim_trace_write(const ap_sim *s, const char *path, ap_err *err) {
    ap_json *j = ap_sim_trace_json(s);
    if (!j)
        return ap_err_set(err, AP_ERR_NOMEM,
                          "%s: could not build the trace (out of memory, or curves not recorded)",
                          path);
    char *text = ap_json_print(j, 0);
    ap_json_free(j);
    if (!text) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory printing the trace", path);
    ap_status st = ap_write_file_atomic(path, text, strlen(text), err);
    ap_free(text);
    return st;
}
