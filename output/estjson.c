/*
 * estjson.c - an estimate as JSON (the schema of `autoplan estimate --json`, documented in
 * README). The readable breakdown of the same numbers is printed by the CLI
 * (cli/print_estimate.c): the text is rounded, the JSON exact.
 */
#include "autoplan/planio.h"


ap_json *ap_estimate_to_json(const ap_estimate *e, const ap_model *m) {
    const ap_plan *p = &e->plan;
    ap_json *root = ap_json_new_object();
    ap_json *pl = ap_json_new_object();
    ap_json *tm = ap_json_new_object();
    ap_json *th = ap_json_new_object();
    ap_json *mem = ap_json_new_object();
    ap_json *stages = ap_json_new_array();
    ap_json *sl = ap_json_new_array();
    ap_json *off = ap_json_new_object();
    int bad = !root || !pl || !tm || !th || !mem || !stages || !sl || !off;
    if (bad) {
        ap_json_free(root); ap_json_free(pl); ap_json_free(tm); ap_json_free(th);
        ap_json_free(mem); ap_json_free(stages); ap_json_free(sl); ap_json_free(off);
        return NULL;
    }
    ap_status st = AP_OK;
#define NUM(o, k, v) st |= ap_json_add_number((o), (k), (double)(v))
    NUM(pl, "tp", p->tp); NUM(pl, "pp", p->pp); NUM(pl, "dp", p->dp); NUM(pl, "cp", p->cp);
    NUM(pl, "ep", p->ep); NUM(pl, "etp", p->etp); NUM(pl, "vp", p->vp); NUM(pl, "mbs", p->mbs);
    NUM(pl, "gbs", p->gbs); NUM(pl, "grad_accum", p->grad_accum); NUM(pl, "seq", p->seq);
    NUM(pl, "zero", p->zero);
    st |= ap_json_add_string(pl, "recompute", ap_recompute_name(p->recompute));
    NUM(pl, "recompute_layers", p->recompute_layers);
    st |= ap_json_add_bool(pl, "sp", p->sp);
    st |= ap_json_add_bool(pl, "overlap", p->overlap_grad || p->overlap_param);
    st |= ap_json_add_bool(pl, "overlap_grad", p->overlap_grad);
    st |= ap_json_add_bool(pl, "overlap_param", p->overlap_param);
    st |= ap_json_add_bool(pl, "overlap_tp", p->overlap_tp);
    NUM(off, "optimizer", p->offload_optimizer);
    NUM(off, "params", p->offload_params);
    st |= ap_json_add(pl, "offload", off);
    st |= ap_json_add_string(pl, "dtype", ap_dtype_name(p->dtype));
    st |= ap_json_add_string(pl, "trainer", ap_trainer_name(p->trainer));
    st |= ap_json_add_bool(pl, "flash_attn", p->flash_attn);
    st |= ap_json_add_string(pl, "attn_impl", ap_attn_impl_name(p->attn_impl));
    for (int c = 0; c < p->pp * p->vp; c++)
        st |= ap_json_push(sl, ap_json_new_number(ap_plan_chunk_layers(p, m->layers, c)));
    st |= ap_json_add(pl, "stage_layers", sl);
    st |= ap_json_add(root, "plan", pl);

    const ap_time *t = &e->time;
    NUM(tm, "step_s", t->step_s); NUM(tm, "compute_s", t->compute_s);
    NUM(tm, "recompute_s", t->recompute_s); NUM(tm, "tp_comm_s", t->tp_comm_s);
    NUM(tm, "cp_comm_s", t->cp_comm_s); NUM(tm, "ep_comm_s", t->ep_comm_s);
    NUM(tm, "pp_comm_s", t->pp_comm_s); NUM(tm, "dp_comm_s", t->dp_comm_s);
    NUM(tm, "bubble_s", t->bubble_s); NUM(tm, "offload_s", t->offload_s);
    NUM(tm, "optimizer_s", t->optimizer_s); NUM(tm, "overhead_s", t->overhead_s);
    st |= ap_json_add(root, "time", tm);

    NUM(th, "tokens_per_s", e->tp.tokens_per_s);
    NUM(th, "model_tflops_per_gpu", e->tp.model_tflops_per_gpu);
    NUM(th, "hw_tflops_per_gpu", e->tp.hw_tflops_per_gpu);
    NUM(th, "mfu", e->tp.mfu);
    NUM(th, "hfu", e->tp.hfu);
    st |= ap_json_add(root, "throughput", th);

    const ap_stage_mem *w = &e->stages[e->worst_stage];
    NUM(mem, "peak_bytes", e->peak_bytes);
    NUM(mem, "capacity_bytes", e->capacity_bytes);
    NUM(mem, "headroom_bytes", e->headroom_bytes);
    NUM(mem, "params_bytes", w->params_bytes);
    NUM(mem, "grads_bytes", w->grads_bytes);
    NUM(mem, "optimizer_bytes", w->optimizer_bytes);
    NUM(mem, "activations_bytes", w->activations_bytes);
    NUM(mem, "other_bytes", w->other_bytes);
    st |= ap_json_add_bool(mem, "fits", e->fits);
    NUM(mem, "allocated_peak_bytes", e->allocated_peak_bytes);
    NUM(mem, "reserved_peak_bytes", e->reserved_peak_bytes);
    NUM(mem, "device_peak_bytes", e->device_peak_bytes);
    NUM(mem, "worst_stage", e->worst_stage);
    NUM(mem, "host_bytes_per_node", e->host_bytes_per_node);
    NUM(mem, "host_capacity_bytes", e->host_capacity_bytes);
    st |= ap_json_add_bool(mem, "host_fits", e->host_fits);
    for (int i = 0; i < e->nstages; i++) {
        const ap_stage_mem *s = &e->stages[i];
        ap_json *o = ap_json_new_object();
        NUM(o, "stage", s->stage); NUM(o, "layers", s->layers);
        NUM(o, "params_bytes", s->params_bytes); NUM(o, "grads_bytes", s->grads_bytes);
        NUM(o, "optimizer_bytes", s->optimizer_bytes);
        NUM(o, "activations_bytes", s->activations_bytes); NUM(o, "other_bytes", s->other_bytes);
        NUM(o, "allocated_bytes", s->allocated_bytes); NUM(o, "reserved_bytes", s->reserved_bytes);
        NUM(o, "device_bytes", s->device_bytes); NUM(o, "host_bytes", s->host_bytes);
        NUM(o, "inflight_microbatches", s->inflight);
        st |= ap_json_push(stages, o);
    }
    st |= ap_json_add(mem, "stages", stages);
    st |= ap_json_add(root, "memory", mem);
#undef NUM
    if (st != AP_OK) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}
