/*
 * nonmodel.c - non-model data per operator (hetero.h ap_sim_periods): the event simulator's
 * replay (sim.h) cut at the calls of modules that own parameters, so the heterogeneous-memory
 * trainers reserve what the simulator says each operator needs rather than re-deriving it.
 *
 * A period starts when the module's hooks fire: in forward at the allocation of the module's
 * output (the layer tensors of simlayer.c: ln1_out, qkv, proj_out, ln2_out, fc1_out, fc2_out;
 * the head's final_norm_out and logits; the embedding's output), in backward at the allocation
 * of the gradient of the module's input (the module's backward is what produces it: grad
 * act_out for fc2, grad ln2_out for fc1, grad ln2_in for the second norm, grad attn_ctx for the
 * output projection, grad ln1_out for qkv, grad input for the first norm; grad final_norm_out
 * for the head, grad input of the head op for the final norm; the embedding's backward op).
 * Recomputed forwards (full recompute) give periods of phase recompute. A period ends where the
 * next begins; parameter-free work in between (attention core, activation, residual, loss)
 * belongs to the period it runs in, which is what Gemini's sampling measures
 * (memory_tracer/memstats_collector.py: one sample per pre_op).
 *
 * Non-model bytes are the live tensors of the activation and other categories; model states
 * are never counted, whatever the simulated plan does with them.
 */
#include <stdlib.h>
#include <string.h>

#include "autoplan/hetero.h"

/* The period an event opens, or -1. */
static int boundary(const ap_sim_op *op, const ap_sim_tensor *t, const ap_sim_event *ev,
                    int first_of_op, int *phase) {
    int type = op->type;
    if (type == AP_SIM_OP_EMBED_BWD && first_of_op) return *phase = AP_PHASE_BWD, AP_PERIOD_EMBED;
    if (ev->is_free) return -1;
    if (!t->is_grad) {
        if (type == AP_SIM_OP_EMBED_FWD && t->kind == AP_SIM_T_INPUT)
            return *phase = AP_PHASE_FWD, AP_PERIOD_EMBED;
        if (type != AP_SIM_OP_FWD && type != AP_SIM_OP_RECOMPUTE && type != AP_SIM_OP_HEAD_FWD)
            return -1;
        *phase = type == AP_SIM_OP_RECOMPUTE ? AP_PHASE_RECOMPUTE : AP_PHASE_FWD;
        switch (t->kind) {
        case AP_SIM_T_LN1_OUT: return AP_PERIOD_LN1;
        case AP_SIM_T_QKV: return AP_PERIOD_QKV;
        case AP_SIM_T_PROJ_OUT: return AP_PERIOD_PROJ;
        case AP_SIM_T_LN2_OUT: return AP_PERIOD_LN2;
        case AP_SIM_T_FC1_OUT: return AP_PERIOD_FC1;
        case AP_SIM_T_FC2_OUT: return AP_PERIOD_FC2;
        case AP_SIM_T_FINAL_NORM_OUT: return AP_PERIOD_FINAL_NORM;
        case AP_SIM_T_LOGITS: return AP_PERIOD_HEAD;
        }
        return -1;
    }
    *phase = AP_PHASE_BWD;
    if (type == AP_SIM_OP_HEAD_BWD) {
        if (t->kind == AP_SIM_T_FINAL_NORM_OUT) return AP_PERIOD_HEAD;
        if (t->kind == AP_SIM_T_INPUT) return AP_PERIOD_FINAL_NORM;
        return -1;
    }
    if (type != AP_SIM_OP_BWD) return -1;
    switch (t->kind) {
    case AP_SIM_T_ACT_OUT: return AP_PERIOD_FC2;
    case AP_SIM_T_LN2_OUT: return AP_PERIOD_FC1;
    case AP_SIM_T_LN2_IN: return AP_PERIOD_LN2;
    case AP_SIM_T_ATTN_CTX: return AP_PERIOD_PROJ;
    case AP_SIM_T_LN1_OUT: return AP_PERIOD_QKV;
    case AP_SIM_T_INPUT: return AP_PERIOD_LN1;
    }
    return -1;
}

ap_status ap_sim_periods(const ap_sim *s, int rank, ap_sim_period **out, int *n, ap_err *err) {
    *out = NULL;
    *n = 0;
    if (rank < 0 || rank >= ap_sim_nranks(s))
        return ap_err_set(err, AP_ERR_INPUT, "simulator: no rank %d", rank);
    const ap_sim_rank *r = ap_sim_rank_at(s, rank);
    if (!r->events)
        return ap_err_set(err, AP_ERR_INPUT, "simulator: the run kept no events (record_curves)");
    int cap = 256, np = 0;
    ap_sim_period *v = ap_malloc((size_t)cap * sizeof *v);
    if (!v) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    int64_t live = 0;
    int cur = -1, prev_op = -1;
    int64_t L = ap_sim_model(s)->layers;
    for (int e = 0; e < r->nevents; e++) {
        const ap_sim_event *ev = &r->events[e];
        const ap_sim_tensor *t = &r->tensors[ev->tensor];
        const ap_sim_op *op = &r->ops[ev->op];
        int phase = 0;
        int k = boundary(op, t, ev, ev->op != prev_op, &phase);
        prev_op = ev->op;
        int nonmodel = t->cat == AP_SIM_CAT_ACTIVATIONS || t->cat == AP_SIM_CAT_OTHER;
        if (k >= 0) {
            if (cur >= 0) v[cur].ev_end = e;
            if (np == cap) {
                cap *= 2;
                ap_sim_period *q = ap_realloc(v, (size_t)cap * sizeof *q);
                if (!q) {
                    ap_free(v);
                    return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
                }
                v = q;
            }
            cur = np++;
            ap_sim_period *p = &v[cur];
            p->kind = (int8_t)k;
            p->phase = (int8_t)phase;
            p->layer = k == AP_PERIOD_EMBED ? -1
                       : (k == AP_PERIOD_HEAD || k == AP_PERIOD_FINAL_NORM) ? (int32_t)L
                                                                              : t->layer;
            p->mb = op->mb;
            p->ev_begin = e;
            p->ev_end = r->nevents;
            p->start_bytes = p->peak_bytes = live;
        }
        if (nonmodel) live += ev->is_free ? -t->bytes : t->bytes;
        /* the optimizer and the reduction after the last backward belong to no period */
        if (cur >= 0 && (op->type == AP_SIM_OP_OPTIMIZER || op->type == AP_SIM_OP_ZERO_GRAD ||
                         op->type == AP_SIM_OP_OFFLOAD ||
                         (op->type == AP_SIM_OP_GRAD_REDUCE && op->layer == AP_SIM_LAYER_NONE))) {
            v[cur].ev_end = e;
            cur = -1;
        }
        if (cur >= 0 && live > v[cur].peak_bytes) v[cur].peak_bytes = live;
    }
    *out = v;
    *n = np;
    return AP_OK;
}
