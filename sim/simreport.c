/*
 * simreport.c - reading a simulation (sim.h): accessors, the names of categories, tensor kinds
 * and operations, human descriptions ("backward of layer 37, micro-batch 3, stage 0") and the
 * JSON report. The events themselves are written by sim.c; this file only reads them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* ---- names ------------------------------------------------------------------------------ */

static const char *const cat_names[AP_SIM_NCAT] = {"params", "grads", "optimizer",
                                                   "activations", "other"};

static const char *const kind_names[AP_SIM_NKINDS] = {
    "weights", "weights_fp8", "grads", "master_weights", "optimizer_states",
    "gathered_weights", "unsharded_grads", "grad_reduce_buffer", "grad_accum_buffer",
    "optimizer_temp",
    "input", "sp_gather", "ln1_out", "qkv", "attn_scores", "softmax", "softmax_dropout_mask",
    "softmax_dropout_out", "flash_lse", "attn_context", "attn_proj_out", "attn_dropout_mask",
    "ln2_in", "ln2_out", "fc1_out", "act_out", "fc2_out", "mlp_dropout_mask", "router_probs",
    "moe_dispatched", "expert_fc1_out", "expert_act_out", "expert_out", "shared_fc1_out",
    "shared_act_out", "recomputed_layer_out",
    "embed_dropout_mask", "final_norm_out", "logits", "logits_fp32", "log_probs", "stage_out",
    "norm_stats", "tokens", "targets", "embed_partial", "loss_temp", "grad_shard",
    "comm_workspace", "send_pool", "grad_bucket", "embed_norm_in", "eager_attn_saved",
    "eager_mlp_saved"};

static const char *const op_names[AP_SIM_NOPS] = {
    "model-state setup", "forward", "backward", "receive activation",
    "send activation", "receive gradient", "send gradient", "gather", "forward", "recompute",
    "backward", "forward", "backward", "gradient reduction", "offload",
    "optimizer step", "zero_grad"};

const char *ap_sim_category_name(int cat) {
    return cat >= 0 && cat < AP_SIM_NCAT ? cat_names[cat] : "?";
}
const char *ap_sim_kind_name(int kind) {
    return kind >= 0 && kind < AP_SIM_NKINDS ? kind_names[kind] : "?";
}
const char *ap_sim_op_name(int type) {
    return type >= 0 && type < AP_SIM_NOPS ? op_names[type] : "?";
}

/* ---- the result -------------------------------------------------------------------------- */

int ap_sim_nranks(const ap_sim *s) { return s->nranks; }
const ap_sim_rank *ap_sim_rank_at(const ap_sim *s, int i) {
    return i >= 0 && i < s->nranks ? &s->ranks[i].r : NULL;
}
double ap_sim_capacity_bytes(const ap_sim *s) { return s->capacity_bytes; }
double ap_sim_budget_bytes(const ap_sim *s) { return s->budget_bytes; }
double ap_sim_overhead_bytes(const ap_sim *s) { return s->overhead_bytes; }
const ap_plan *ap_sim_plan(const ap_sim *s) { return &s->p; }
const ap_model *ap_sim_model(const ap_sim *s) { return &s->m; }
const ap_sim_opts *ap_sim_options(const ap_sim *s) { return &s->o; }

int ap_sim_worst_rank(const ap_sim *s) {
    int w = 0;
    for (int i = 1; i < s->nranks; i++)
        if (ap_simg_rank_worse(s, i, w)) w = i;
    return w;
}

void ap_sim_free(ap_sim *s) {
    if (!s) return;
    for (int i = 0; i < s->nranks; i++) {
        rank_store *rs = &s->ranks[i];
        ap_free(rs->ops);
        ap_free(rs->ts);
        ap_simg_free_events(s, rs);
        ap_free(rs->live);
    }
    ap_free(s->ranks);
    ap_free(s);
}

/* ---- descriptions and JSON -------------------------------------------------------------- */

static char *layer_label(int32_t layer, int64_t L, char *buf, size_t n) {
    if (layer == AP_SIM_LAYER_EMBED)
        snprintf(buf, n, "the embedding");
    else if (layer == L)
        snprintf(buf, n, "the head");
    else
        snprintf(buf, n, "layer %d", layer);
    return buf;
}

char *ap_sim_op_describe(const ap_sim *s, const ap_sim_rank *r, int op, char *buf, size_t n) {
    if (op < 0 || op >= r->nops) {
        snprintf(buf, n, "(none)");
        return buf;
    }
    return ap_sim_op_describe_op(s, r->stage, &r->ops[op], buf, n);
}

char *ap_sim_op_describe_op(const ap_sim *s, int stage, const ap_sim_op *o, char *buf,
                            size_t n) {
    char lb[48];
    if (o->layer == AP_SIM_LAYER_NONE)
        snprintf(buf, n, "%s, stage %d", ap_sim_op_name(o->type), stage);
    else if (o->mb < 0)
        snprintf(buf, n, "%s of %s, stage %d", ap_sim_op_name(o->type),
                 layer_label(o->layer, s->m.layers, lb, sizeof lb), stage);
    else
        snprintf(buf, n, "%s of %s, micro-batch %d, stage %d", ap_sim_op_name(o->type),
                 layer_label(o->layer, s->m.layers, lb, sizeof lb), o->mb, stage);
    return buf;
}

char *ap_sim_tensor_describe(const ap_sim_tensor *t, int64_t L, char *buf, size_t n) {
    char lb[48];
    const char *what = t->is_grad ? "grad of " : "";
    if (t->layer == AP_SIM_LAYER_NONE)
        snprintf(buf, n, "%s%s", what, ap_sim_kind_name(t->kind));
    else if (t->mb < 0)
        snprintf(buf, n, "%s%s of %s", what, ap_sim_kind_name(t->kind),
                 layer_label(t->layer, L, lb, sizeof lb));
    else
        snprintf(buf, n, "%s%s of %s, micro-batch %d", what, ap_sim_kind_name(t->kind),
                 layer_label(t->layer, L, lb, sizeof lb), t->mb);
    return buf;
}

#define J(call)                                                                                   \
    do {                                                                                          \
        if ((call) != AP_OK) goto fail;                                                           \
    } while (0)

static ap_json *cats_json(const int64_t *cat) {
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    for (int c = 0; c < AP_SIM_NCAT; c++)
        if (ap_json_add_number(o, cat_names[c], (double)cat[c]) != AP_OK) {
            ap_json_free(o);
            return NULL;
        }
    return o;
}

/* The allocated, reserved and device curves of a rank: its summary curve (sim.h), each point
 * the maximum over its run of events, so the peak is always in the curve. */
static ap_json *curve_json(const ap_sim_rank *r, double overhead) {
    ap_json *o = ap_json_new_object();
    if (ap_json_add(o, "allocated", ap_json_new_array()) != AP_OK ||
        ap_json_add(o, "reserved", ap_json_new_array()) != AP_OK ||
        ap_json_add(o, "device", ap_json_new_array()) != AP_OK)
        goto fail;
    int n = r->nevents, pts = r->curve_points;
    if (ap_json_add_number(o, "events_per_point", pts > 0 ? (double)n / pts : 0) != AP_OK)
        goto fail;
    ap_json *A = ap_json_get(o, "allocated"), *R = ap_json_get(o, "reserved"),
            *D = ap_json_get(o, "device");
    for (int k = 0; k < pts; k++) {
        int64_t amax = r->curve_allocated[k], rmax = r->curve_reserved[k];
        if (ap_json_push(A, ap_json_new_number((double)amax)) != AP_OK ||
            ap_json_push(R, ap_json_new_number((double)rmax)) != AP_OK ||
            ap_json_push(D, ap_json_new_number((double)rmax + overhead)) != AP_OK)
            goto fail;
    }
    return o;
fail:
    ap_json_free(o);
    return NULL;
}

ap_json *ap_sim_to_json(const ap_sim *s, int max_live) {
    ap_json *root = ap_json_new_object(), *stages = NULL;
    if (!root) return NULL;
    int w = ap_sim_worst_rank(s);
    const ap_sim_rank *wr = &s->ranks[w].r;
    int64_t apeak = 0, rpeak = 0;
    for (int i = 0; i < s->nranks; i++) {
        if (s->ranks[i].r.allocated_peak_bytes > apeak) apeak = s->ranks[i].r.allocated_peak_bytes;
        if (s->ranks[i].r.reserved_peak_bytes > rpeak) rpeak = s->ranks[i].r.reserved_peak_bytes;
    }
    double dev = (double)wr->device_peak_bytes;
    J(ap_json_add_string(root, "allocator", ap_alloc_mode_name(s->o.allocator)));
    J(ap_json_add_bool(root, "expandable_segments", s->o.expandable_segments));
    J(ap_json_add_number(root, "peak_bytes", dev));
    J(ap_json_add_number(root, "allocated_peak_bytes", (double)apeak));
    J(ap_json_add_number(root, "reserved_peak_bytes", (double)rpeak));
    J(ap_json_add_number(root, "device_overhead_bytes", s->overhead_bytes));
    J(ap_json_add_number(root, "capacity_bytes", s->capacity_bytes));
    J(ap_json_add_number(root, "headroom_bytes", s->o.headroom_bytes));
    int fits = s->capacity_bytes <= 0 || dev + s->o.headroom_bytes <= s->capacity_bytes;
    J(ap_json_add_bool(root, "fits", fits));
    J(ap_json_add_number(root, "worst_stage", w));
    stages = ap_json_new_array();
    if (ap_json_add(root, "stages", stages) != AP_OK) goto fail;
    for (int i = 0; i < s->nranks; i++) {
        const ap_sim_rank *r = &s->ranks[i].r;
        ap_json *st = ap_json_new_object();
        if (ap_json_push(stages, st) != AP_OK) goto fail;
        char buf[256];
        J(ap_json_add_number(st, "stage", r->stage));
        J(ap_json_add_number(st, "layers", r->layers));
        J(ap_json_add_number(st, "allocated_peak_bytes", (double)r->allocated_peak_bytes));
        J(ap_json_add_number(st, "reserved_peak_bytes", (double)r->reserved_peak_bytes));
        J(ap_json_add_number(st, "device_peak_bytes", (double)r->device_peak_bytes));
        J(ap_json_add_number(st, "baseline_bytes", (double)r->baseline_bytes));
        J(ap_json_add_number(st, "fragmentation", r->fragmentation));
        J(ap_json_add_number(st, "inflight_microbatches", r->inflight_at_peak));
        J(ap_json_add_number(st, "ops", r->nops));
        J(ap_json_add_number(st, "events", r->nevents));
        J(ap_json_add_string(st, "peak_op", ap_sim_op_describe(s, r, r->peak_op, buf, sizeof buf)));
        if (ap_json_add(st, "breakdown", cats_json(r->peak_cat_bytes)) != AP_OK) goto fail;
        if (r->over_op >= 0)
            J(ap_json_add_string(st, "first_over_budget_op",
                                 ap_sim_op_describe(s, r, r->over_op, buf, sizeof buf)));
        ap_json *live = ap_json_new_array();
        if (ap_json_add(st, "live_at_peak", live) != AP_OK) goto fail;
        for (int k = 0; k < r->nlive_at_peak && k < max_live; k++) {
            const ap_sim_tensor *t = &r->tensors[r->live_at_peak[k]];
            ap_json *tj = ap_json_new_object();
            if (ap_json_push(live, tj) != AP_OK) goto fail;
            J(ap_json_add_string(tj, "name", ap_sim_tensor_describe(t, s->m.layers, buf,
                                                                    sizeof buf)));
            J(ap_json_add_string(tj, "kind", ap_sim_kind_name(t->kind)));
            J(ap_json_add_string(tj, "category", ap_sim_category_name(t->cat)));
            J(ap_json_add_number(tj, "layer", t->layer));
            J(ap_json_add_number(tj, "microbatch", t->mb));
            J(ap_json_add_bool(tj, "grad", t->is_grad));
            J(ap_json_add_number(tj, "bytes", (double)t->bytes));
        }
        J(ap_json_add_number(st, "live_tensors_at_peak", r->nlive_at_peak));
        if (s->o.record_curves) {
            if (ap_json_add(st, "curve", curve_json(r, s->overhead_bytes)) != AP_OK) goto fail;
        }
    }
    return root;
fail:
    ap_json_free(root);
    return NULL;
}
