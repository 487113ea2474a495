/*
 * trace.c - a run's timeline as Chrome trace event JSON (runtime.h, ap_rt_trace_write), in the
 * format the simulator writes (sim/trace.c, ap_trace_event): one process per rank ("rank R:
 * stage S, tp T, dp D"), a slice per operation of the last step on thread 1, a "live bytes by
 * category" counter track with the runtime's six categories and an "allocator bytes" track
 * (allocated; the runtime has no caching allocator, so reserved equals allocated), written at
 * each operation's own peak and at its end, and an instant event at the rank's peak. Unlike the
 * simulator's logical clock, time stamps are measured: microseconds since the step began.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/runtime.h"
#include "autoplan/sim.h"

#define CHK(x)                                                                                     \
    do {                                                                                           \
        if (!(x)) goto fail;                                                                       \
    } while (0)

static char *describe(const ap_rt_op_record *o, char *buf, size_t n) {
    const char *name = ap_sim_op_name(o->type);
    if (o->layer == AP_SIM_LAYER_EMBED) snprintf(buf, n, "embedding %s", name);
    else if (o->layer >= 0 && (o->type == AP_SIM_OP_HEAD_FWD || o->type == AP_SIM_OP_HEAD_BWD))
        snprintf(buf, n, "head %s", name);
    else if (o->layer >= 0) snprintf(buf, n, "%s of layer %d", name, o->layer);
    else snprintf(buf, n, "%s", name);
    size_t k = strlen(buf);
    if (o->mb >= 0 && k < n) snprintf(buf + k, n - k, ", micro-batch %d", o->mb);
    return buf;
}

static int counters(ap_json *arr, double ts_us, const int64_t *cat, int pid) {
    ap_json *e = ap_trace_event(arr, "live bytes by category", "C", ts_us, pid, 0);
    ap_json *args = ap_json_new_object();
    if (!e || !args || ap_json_add(e, "args", args) != AP_OK) {
        ap_json_free(args);
        return 0;
    }
    double total = 0;
    for (int c = 0; c < AP_RT_NCAT; c++) {
        total += (double)cat[c];
        if (ap_json_add_number(args, ap_rt_category_name(c), (double)cat[c]) != AP_OK) return 0;
    }
    e = ap_trace_event(arr, "allocator bytes", "C", ts_us, pid, 0);
    args = ap_json_new_object();
    if (!e || !args || ap_json_add(e, "args", args) != AP_OK) {
        ap_json_free(args);
        return 0;
    }
    return ap_json_add_number(args, "allocated", total) == AP_OK &&
           ap_json_add_number(args, "reserved", total) == AP_OK;
}

static int named(ap_json *arr, const char *what, int pid, int tid, const char *name) {
    ap_json *e = ap_trace_event(arr, what, "M", 0, pid, tid);
    ap_json *args = ap_json_new_object();
    if (!e || !args || ap_json_add(e, "args", args) != AP_OK) {
        ap_json_free(args);
        return 0;
    }
    return ap_json_add_string(args, "name", name) == AP_OK;
}

ap_json *ap_rt_trace_json(const ap_rt_report *r) {
    ap_json *root = ap_json_new_object();
    ap_json *arr = ap_json_new_array();
    if (!root || !arr || ap_json_add(root, "traceEvents", arr) != AP_OK) {
        ap_json_free(arr);
        ap_json_free(root);
        return NULL;
    }
    CHK(ap_json_add_string(root, "displayTimeUnit", "ms") == AP_OK);
    for (int i = 0; i < r->nranks; i++) {
        const ap_rt_rank_report *k = &r->ranks[i];
        char name[200];
        snprintf(name, sizeof name, "rank %d: stage %d, tp %d, dp %d", k->rank, k->stage,
                 k->tp_rank, k->dp_rank);
        CHK(named(arr, "process_name", k->rank, 0, name));
        CHK(named(arr, "thread_name", k->rank, 1, "operations"));
        double peak_us = -1;
        int64_t best = -1;
        for (int o = 0; o < k->nops; o++) {
            const ap_rt_op_record *op = &k->ops[o];
            ap_json *e = ap_trace_event(arr, describe(op, name, sizeof name), "X",
                                        op->begin_s * 1e6, k->rank, 1);
            CHK(e);
            double dur = (op->end_s - op->begin_s) * 1e6;
            CHK(ap_json_add_number(e, "dur", dur > 0 ? dur : 0.5) == AP_OK);
            CHK(ap_json_add_string(e, "cat", ap_sim_op_name(op->type)) == AP_OK);
            ap_json *args = ap_json_new_object();
            if (!args || ap_json_add(e, "args", args) != AP_OK) {
                ap_json_free(args);
                goto fail;
            }
            CHK(ap_json_add_number(args, "layer", op->layer) == AP_OK);
            CHK(ap_json_add_number(args, "microbatch", op->mb) == AP_OK);
            CHK(counters(arr, op->peak_s * 1e6, op->peak_cat, k->rank));
            CHK(counters(arr, op->end_s * 1e6, op->end_cat, k->rank));
            int64_t live = 0;
            for (int c = 0; c < AP_RT_NCAT; c++) live += op->peak_cat[c];
            if (live > best) {
                best = live;
                peak_us = op->peak_s * 1e6;
            }
        }
        if (peak_us >= 0) {
            ap_json *e = ap_trace_event(arr, "allocated peak of the step", "i", peak_us, k->rank, 1);
            CHK(e && ap_json_add_string(e, "s", "p") == AP_OK);
        }
    }
    return root;
fail:
    ap_json_free(root);
    return NULL;
}

ap_status ap_rt_trace_write(const ap_rt_report *r, const char *path, ap_err *err) {
    ap_json *j = ap_rt_trace_json(r);
    char *text = j ? ap_json_print(j, 0) : NULL;
    ap_json_free(j);
    if (!text) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory building the trace", path);
    ap_status st = ap_write_file_atomic(path, text, strlen(text), err);
    ap_free(text);
    return st;
}
