/*
 * print_estimate.c - the readable per-stage breakdown of an estimate (`autoplan estimate`, and
 * the plans `compare` and `plan` show): the same numbers as the JSON of output/estjson.c,
 * rounded for reading.
 */
#include "cli.h"

#include <stdio.h>


static double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

/* What every rank holds outside the allocator (in the device column): the CUDA context and
 * cuBLAS workspaces, and the NCCL buffers of the communicators the trainer opens
 * (ap_mem_device_overhead_bytes; --nccl-version) */
static void print_outside(const ap_estimate *e) {
    if (e->device_overhead_bytes <= 0) return;
    int sizes[AP_MAX_COMMS];
    const int n = ap_mem_nccl_comms(&e->plan, sizes);
    char b1[32], b2[32], b3[32];
    printf("outside   %s on each GPU beside the allocator: CUDA context and cuBLAS workspaces %s",
           ap_fmt_bytes(e->device_overhead_bytes, b1, sizeof b1),
           ap_fmt_bytes(e->device_overhead_bytes - e->nccl_bytes, b2, sizeof b2));
    if (n > 0)
        printf(", NCCL buffers %s (%d communicator%s)", ap_fmt_bytes(e->nccl_bytes, b3, sizeof b3),
               n, n == 1 ? "" : "s");
    printf("\n");
}

/* Which of the block's elementwise ops the trainer's modeling code runs as eager PyTorch ops
 * (more memory traffic and more saved activations: layer_cost.c, activations.c). */
static void print_eager_ops(const ap_plan *p, const ap_model *m) {
    if (!ap_plan_eager_elementwise(p)) return;
    const char *what[3];
    int n = 0;
    if (m->norm == AP_NORM_RMSNORM && ap_plan_eager_norm(p)) what[n++] = "RMSNorm";
    if (m->pos == AP_POS_ROTARY && m->mla.kv_lora_rank == 0) what[n++] = "rotary";
    if (m->act == AP_ACT_SWIGLU) what[n++] = "gated activation";
    for (int i = 0; i < n; i++)
        printf("%s%s", i == 0 ? ", " : i == n - 1 ? " and " : ", ", what[i]);
    if (n > 0) printf(" as eager ops");
}

void ap_estimate_print(const ap_estimate *e, const ap_model *m, const ap_cluster *c) {
    const ap_plan *p = &e->plan;
    char lbl[160], b1[32], b2[32];
    printf("plan      %s  (%s, %s, %d x %s)\n", ap_plan_label(p, lbl, sizeof lbl),
           ap_trainer_get(p->trainer)->display, ap_dtype_name(p->dtype), c->gpus, c->gpu.name);
    printf("batch     global %lld x %lld tokens, micro-batch %lld, %lld micro-batches per step\n",
           (long long)p->gbs, (long long)p->seq, (long long)p->mbs, (long long)p->grad_accum);
    char f8[64] = "";
    if (p->dtype == AP_DTYPE_FP8)
        snprintf(f8, sizeof f8, ", fp8 linear layers with %s scaling",
                 ap_fp8_recipe_name(ap_plan_fp8_recipe(p)));
    printf("kernels   attention %s%s%s", ap_attn_impl_name(p->attn_impl),
           p->attn_impl == AP_ATTN_UNFUSED ? " (scores materialised)" : "", f8);
    print_eager_ops(p, m);
    if (ap_plan_cp_a2a(p))
        printf(", context parallelism by all-to-all (Q, K, V and output; the kernel over the "
               "whole sequence)");
    else if (p->cp > 1)
        printf(", context parallelism as a ring of %d blocks", p->cp);
    printf(" (`autoplan profile show %s` lists the figures)\n", c->gpu.name);
    const ap_time *t = &e->time;
    printf("\nstep time %s   %.0f tokens/s   MFU %.1f%%   HFU %.1f%%   (%.1f model TFLOP/s/GPU)\n",
           ap_fmt_seconds(t->step_s, b1, sizeof b1), e->tp.tokens_per_s, 100 * e->tp.mfu,
           100 * e->tp.hfu, e->tp.model_tflops_per_gpu);
    struct { const char *n; double v; } parts[] = {
        {"compute", t->compute_s}, {"recompute", t->recompute_s}, {"TP comm", t->tp_comm_s},
        {"CP comm", t->cp_comm_s}, {"EP comm", t->ep_comm_s}, {"PP comm", t->pp_comm_s},
        {"DP comm (exposed)", t->dp_comm_s}, {"pipeline bubble", t->bubble_s},
        {"offload", t->offload_s}, {"optimizer", t->optimizer_s}, {"fixed overhead", t->overhead_s}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].v > 0)
            printf("  %-20s %10.4f s  %5.1f%%\n", parts[i].n, parts[i].v, pct(parts[i].v, t->step_s));
    printf("\nmemory per GPU (GiB)    params   grads   optim   activ   other  allocated  "
           "device\n");
    for (int i = 0; i < e->nstages; i++) {
        const ap_stage_mem *s = &e->stages[i];
        printf("  stage %-3d %3d layers %7.2f %7.2f %7.2f %7.2f %7.2f %10.2f %7.2f%s\n", s->stage,
               s->layers, s->params_bytes / AP_GIB, s->grads_bytes / AP_GIB, s->optimizer_bytes / AP_GIB,
               s->activations_bytes / AP_GIB, s->other_bytes / AP_GIB, s->allocated_bytes / AP_GIB,
               s->device_bytes / AP_GIB, i == e->worst_stage ? "  <- peak" : "");
    }
    printf("peak      %s device of %s (headroom %s): %s\n",
           ap_fmt_bytes(e->device_peak_bytes, b1, sizeof b1),
           ap_fmt_bytes(e->capacity_bytes, b2, sizeof b2),
           ap_fmt_bytes(e->headroom_bytes, lbl, sizeof lbl),
           e->fits ? "fits" : "DOES NOT FIT");
    if (e->fits && e->smi_peak_bytes > e->device_peak_bytes)
        printf("nvidia-smi about %s at the peak (freed blocks the caching allocator keeps)\n",
               ap_fmt_bytes(e->smi_peak_bytes, b1, sizeof b1));
    print_outside(e);
    if (e->host_bytes_per_node > 0)
        printf("host      %s offloaded per node of %s: %s\n",
               ap_fmt_bytes(e->host_bytes_per_node, b1, sizeof b1),
               ap_fmt_bytes(e->host_capacity_bytes, b2, sizeof b2),
               e->host_fits ? "fits" : "DOES NOT FIT");
    (void)m;
}
