/*
 * predict.c - what the runtime should measure for a plan, from the plan alone (runtime.h,
 * ap_rt_predict): memory from the simulator's description of the runtime (sim/simrt.c), one
 * simulated rank per pipeline stage, replayed into the runtime's six categories (temporaries and
 * communication buffers share the simulator's "other" and are told apart by tensor kind), with
 * the allocated peak, the categories at it and each category's maximum defined exactly as the
 * runtime's tracker defines them; the host pool from its formula; time per phase from the cost
 * model (estimate.c) on the cpu device with the host figures the ranks measured in place of its
 * peak, bandwidths and latency (ap_rt_cluster) and its GEMM efficiency curve as a measured
 * kernel profile (profile.h).
 *
 * Time mapping (docs/runtime.md): forward and backward = the stage's per-micro-batch times
 * times the micro-batches, less the tensor-parallel communication, which with the pipeline
 * bubble, the point-to-point and the data-parallel traffic is "comm"; optimizer = AdamW and
 * offload. The estimate prices 16-bit GPU kernels, so its elementwise and attention terms are
 * coarse for fp32 CPU code: the error is reported, not tuned away.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "autoplan/estimate.h"
#include "autoplan/profile.h"
#include "autoplan/runtime.h"
#include "autoplan/sim.h"

static int rt_cat(const ap_sim_tensor *t) {
    switch (t->cat) {
    case AP_SIM_CAT_PARAMS: return AP_RT_CAT_PARAMS;
    case AP_SIM_CAT_GRADS: return AP_RT_CAT_GRADS;
    case AP_SIM_CAT_OPTIMIZER: return AP_RT_CAT_OPTIMIZER;
    case AP_SIM_CAT_ACTIVATIONS: return AP_RT_CAT_ACTIVATIONS;
    default:
        return t->kind == AP_SIM_T_COMM_WS || t->kind == AP_SIM_T_SEND_POOL ? AP_RT_CAT_COMM
                                                                             : AP_RT_CAT_TEMPS;
    }
}

/* Replay one simulated rank's events into the runtime's categories. */
static void replay(const ap_sim_rank *r, ap_rt_stage_prediction *out) {
    int64_t cat[AP_RT_NCAT] = {0}, live = 0;
    for (int i = 0; i < r->nevents; i++) {
        const ap_sim_event *e = &r->events[i];
        const ap_sim_tensor *t = &r->tensors[e->tensor];
        int c = rt_cat(t);
        int64_t d = e->is_free ? -t->bytes : t->bytes;
        cat[c] += d;
        live += d;
        if (cat[c] > out->cat_peak_bytes[c]) out->cat_peak_bytes[c] = cat[c];
        if (live > out->peak_bytes) {
            out->peak_bytes = live;
            memcpy(out->peak_cat_bytes, cat, sizeof cat);
        }
    }
}

/* Calibration of the cpu device from the measured host figures (estimate.h, ap_calib): the
 * peak is the measured large-GEMM rate, so its efficiency is 1 at large sizes and half at the
 * measured half-size; attention runs at the measured score-GEMM rate; bandwidths are measured,
 * so their efficiencies are 1; the latency is the measured point-to-point one. */
static void host_calib(const ap_rt_host_figures *h, ap_calib *cal) {
    memset(cal, 0, sizeof *cal);
    cal->gemm_eff_max = 1.0;
    cal->gemm_half_flops = h->gemm_half_flops > 0 ? h->gemm_half_flops : 1.0;
    cal->attn_eff = h->gemm_flops_per_s > 0 && h->attn_flops_per_s > 0
                        ? fmin(1.0, h->attn_flops_per_s / h->gemm_flops_per_s)
                        : 1.0;
    cal->link_eff = 1.0;
    cal->net_eff = 1.0;
    cal->coll_latency_s = h->p2p_latency_s;
    cal->step_overhead_s = 0;
    cal->mem_bound_eff = 1.0;
}

/* The measured GEMM rates as a kernel profile of the cpu device (profile.h rows, op "gemm",
 * fp32): the large product, the small one and the plan's attention-score shape, so the cost
 * model reads this host's own efficiency curve (kernels.c interpolates it over log2 FLOPs)
 * instead of the catalog's borrowed GPU ceiling. */
static ap_status host_profile(const ap_plan *p, const ap_model *m, const ap_rt_host_figures *h,
                              ap_profile *prof, ap_err *err) {
    ap_profile_init(prof);
    snprintf(prof->name, sizeof prof->name, "autoplan-run");
    snprintf(prof->gpu, sizeof prof->gpu, "cpu");
    struct {
        double m, n, k, rate;
    } g[3] = {{512, 512, 512, h->gemm_flops_per_s}, {64, 64, 64, 0},
              {(double)p->seq, (double)p->seq, (double)m->head_dim, h->attn_flops_per_s}};
    /* the small product's rate from the two-point fit: rate = big / (1 + F_half / F) */
    double fs = 2.0 * 64 * 64 * 64;
    g[1].rate = h->gemm_half_flops > 0 ? h->gemm_flops_per_s / (1.0 + h->gemm_half_flops / fs)
                                       : h->gemm_flops_per_s;
    for (int i = 0; i < 3; i++) {
        if (g[i].rate <= 0) continue;
        ap_profile_row r;
        memset(&r, 0, sizeof r);
        snprintf(r.gpu, sizeof r.gpu, "cpu");
        snprintf(r.op, sizeof r.op, "gemm");
        snprintf(r.shape, sizeof r.shape, "m=%.0f,n=%.0f,k=%.0f", g[i].m, g[i].n, g[i].k);
        snprintf(r.dtype, sizeof r.dtype, "fp32");
        r.time_s = 2.0 * g[i].m * g[i].n * g[i].k / g[i].rate;
        r.samples = 5;
        snprintf(r.mig_mode, sizeof r.mig_mode, "off");
        snprintf(r.source_run, sizeof r.source_run, "autoplan-run");
        snprintf(r.source, sizeof r.source, "runtime/bench.c: OpenBLAS sgemm, every rank at once");
        ap_status st = ap_profile_add(prof, &r, err);
        if (st != AP_OK) return st;
    }
    return AP_OK;
}

static ap_status predict_time(const ap_model *m, const ap_plan *p, const ap_rt_host_figures *h,
                              ap_rt_prediction *out, ap_err *err) {
    ap_cluster c;
    ap_rt_cluster(p->tp * p->pp * p->dp, h, &c);
    ap_calib cal;
    host_calib(h, &cal);
    ap_profile prof;
    ap_status pst = host_profile(p, m, h, &prof, err);
    if (pst != AP_OK) {
        ap_profile_free(&prof);
        return pst;
    }
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    o.calib = &cal;
    o.profile = &prof;
    o.headroom_bytes = 0;
    ap_estimate *e = ap_malloc(sizeof *e);
    if (!e) {
        ap_profile_free(&prof);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    }
    ap_status st = ap_estimate_plan(m, &c, p, &o, e, err);
    if (st == AP_OK) {
        const ap_time *t = &e->time;
        double mb = (double)(p->grad_accum > 0 ? p->grad_accum : 1);
        for (int r = 0; r < out->nstages && r < AP_MAX_STAGES; r++) {
            ap_rt_phase_times *pt = &out->stages[r].time;
            pt->forward_s = fmax(0.0, mb * t->stage_fwd_s[r] - 0.5 * t->tp_comm_s);
            pt->backward_s = fmax(0.0, mb * t->stage_bwd_s[r] - 0.5 * t->tp_comm_s);
            pt->comm_s = t->tp_comm_s + t->pp_comm_s + t->dp_comm_s + t->bubble_s;
            pt->optimizer_s = t->optimizer_s + t->offload_s;
            pt->step_s = t->step_s;
        }
        out->time_predicted = 1;
    }
    ap_free(e);
    ap_profile_free(&prof);
    return st;
}

ap_status ap_rt_predict(const ap_model *m, const ap_plan *p, const ap_rt_host_figures *h,
                        ap_rt_prediction *out, ap_err *err) {
    memset(out, 0, sizeof *out);
    ap_status st = ap_rt_check(m, p, err);
    if (st != AP_OK) return st;
    ap_sim_opts so;
    ap_sim_opts_init(&so);
    so.allocator = AP_ALLOC_ARENA;
    so.device_overhead_bytes = 0; /* no CUDA context, NCCL or cuBLAS workspaces on a CPU rank */
    so.record_curves = 1;
    ap_sim *s = NULL;
    if ((st = ap_sim_run(m, NULL, p, &so, &s, err)) != AP_OK) return st;
    out->nstages = ap_sim_nranks(s);
    for (int i = 0; i < out->nstages && i < AP_MAX_CHUNKS; i++) {
        replay(ap_sim_rank_at(s, i), &out->stages[i]);
        out->stages[i].host_peak_bytes = ap_sim_runtime_host_bytes(m, p, i);
    }
    ap_sim_free(s);
    if (h && h->measured) return predict_time(m, p, h, out, err);
    return AP_OK;
}
