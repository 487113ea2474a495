/*
 * zero_infinity.c - DeepSpeed ZeRO-Offload (stages 1-2 with offload_optimizer cpu) and
 * ZeRO-Infinity (stage 3 with offload_optimizer and/or offload_param on cpu or nvme), simulated
 * operator by operator with their own movement rules (deepspeed v0.19 @edaa7221, files under
 * deepspeed/runtime/zero/ and runtime/swap_tensor/ cited at each rule; docs/heterogeneous.md).
 *
 * Stages 1-2 (stage_1_and_2.py, cpu_offload): 16-bit parameters stay whole on the GPU; the
 *   gradients go through the IPG bucket (reduce_bucket_size elements, contiguous_gradients is
 *   forced on) and are reduced when it fills; this rank's partition goes to the host: with
 *   accumulation (micro_step_id > 0 or not at the boundary) async_accumulate_grad_in_cpu_via_gpu
 *   copies the 16-bit gradient down (and the accumulated one up first after micro-batch 0); at
 *   the boundary async_inplace_copy_grad_to_fp32_buffer_from_gpu casts to fp32 on the GPU and
 *   copies 4 bytes/element down. step(): CPU Adam on the fp32 partition, the 16-bit copy into
 *   the pinned bit16 buffer, 2 bytes/element up, an all-gather of the 16-bit parameters.
 * Stage 3 (stage3.py, partitioned_param_coordinator.py, swap_tensor/): parameters are
 *   partitioned; persistent ones (<= stage3_param_persistence_threshold elements) stay whole on
 *   the GPU; the others live on the GPU, in pinned host memory or (NVMe: beyond max_in_cpu, per
 *   sub-group, when at least 1 MiB) on NVMe. Each module call fetches its parameters (NVMe read
 *   into a swap buffer, H2D, all-gather), prefetching up to stage3_prefetch_bucket_size elements
 *   ahead once the trace is known, and releases them afterwards unless they are used again within
 *   stage3_max_reuse_distance elements (__params_to_release). Gradients are reduce-scattered
 *   through the IPG bucket; with offload_optimizer each partition is copied to the pinned host
 *   buffer every micro-batch (and back, partition_grads), and at the boundary cast to fp32 and
 *   copied down (or swapped to NVMe). step(): per sub-group (sub_group_size) swap in the fp32
 *   parameters, momentum, variance and gradient (NVMe), Adam on its device, swap out, and the
 *   16-bit partition refreshed (on the host, copied up to the GPU, or written to NVMe).
 *
 * Not modelled: the first step's trace recording, ZeRO++ and the MiCS variants, tiling of huge
 * linears, prefetch of NVMe partitions (they are swapped in when the module is fetched).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero_int.h"

enum { LOC_GPU = 0, LOC_CPU, LOC_NVME };

typedef struct zs {
    hctx *x;
    const ap_plan_hetero *h;
    int stage;
    int64_t *part;          /* partition elements of each parameter (stage 3) */
    int8_t *persist, *loc, *avail;
    int32_t *sub_of;        /* sub-group of each parameter */
    int nsub;
    int64_t *sub_elems;     /* partition elements per sub-group */
    int8_t *sub_nvme_opt;   /* optimizer states of the sub-group on NVMe */
    int8_t *sub_cpu_opt;    /* optimizer on the host (CPU Adam) */
    double gathered;        /* bytes of whole parameters gathered on the GPU (non-persistent) */
    double fixed_gpu;       /* resident model data on the GPU */
    double host, pinned, nvme;
    int rec;
    int64_t bucket;         /* elements in the IPG bucket */
    int32_t *bucket_params;
    int nbucket;
    int64_t micro;          /* micro-batch of the step */
    int traced;             /* trace complete: prefetch and reuse distance active */
    int8_t *reuse;          /* per operator slot: used again within max_reuse_distance */
    int32_t *next_use;      /* per operator slot: the next operator using the parameter (nops:
                               none) */
    int pf_from;            /* the prefetch scan's first operator: every parameter of the
                               operators between the current one and it is gathered (or
                               persistent), so the scan would skip them (run_micro) */
    double cur_nmd;
} zs;

static void point(zs *z, double extra) {
    hx_gpu_point(z->x, z->rec, z->fixed_gpu + z->gathered + extra, z->cur_nmd);
}

/* ---- layout ------------------------------------------------------------------------------- */

/* The per-parameter and per-sub-group arrays of the layout. */
static ap_status layout_alloc(zs *z, int n, ap_err *err) {
    z->part = ap_calloc((size_t)n, sizeof *z->part);
    z->persist = ap_calloc((size_t)n, 1);
    z->loc = ap_calloc((size_t)n, 1);
    z->avail = ap_calloc((size_t)n, 1);
    z->sub_of = ap_calloc((size_t)n, sizeof *z->sub_of);
    z->bucket_params = ap_malloc((size_t)(n + 1) * sizeof *z->bucket_params);
    z->sub_elems = ap_calloc((size_t)n + 1, sizeof *z->sub_elems);
    z->sub_nvme_opt = ap_calloc((size_t)n + 1, 1);
    z->sub_cpu_opt = ap_calloc((size_t)n + 1, 1);
    if (!z->part || !z->persist || !z->loc || !z->avail || !z->sub_of || !z->bucket_params ||
        !z->sub_elems || !z->sub_nvme_opt || !z->sub_cpu_opt)
        return ap_err_set(err, AP_ERR_NOMEM, "zero: out of memory");
    return AP_OK;
}

/* Partition sizes and persistence of each parameter, and the optimizer sub-groups. */
static void layout_partitions(zs *z, int64_t *total_part_out, int64_t *largest_out) {
    hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    int n = x->nparams, Z = x->Z;
    int64_t total_part = 0, largest = 0;
    for (int i = 0; i < n; i++) {
        int64_t numel = x->params[i].numel;
        /* partition_numel: ceil(numel / world) (partition_parameters.py _aligned_size) */
        z->part[i] = z->stage == 3 ? (numel + Z - 1) / Z : numel;
        total_part += z->part[i];
        if (numel > largest) largest = numel;
        /* persistent: numel <= param_persistence_threshold (parameter_offload.py
           _mark_persistent_parameters) */
        z->persist[i] = (int8_t)(z->stage == 3 && numel <= h->ds_param_persistence_threshold);
    }
    /* sub-groups: parameters in order until sub_group_size partition elements
       (stage3.py _create_fp16_sub_groups); stages 1-2 have one flat group per param group */
    int64_t acc = 0;
    z->nsub = 0;
    for (int i = 0; i < n; i++) {
        z->sub_of[i] = z->nsub;
        z->sub_elems[z->nsub] += z->part[i];
        acc += z->part[i];
        if ((z->stage == 3 && acc >= h->ds_sub_group_size) || i == n - 1) {
            z->nsub++;
            acc = 0;
        }
    }
    *total_part_out = total_part;
    *largest_out = largest;
}

/* What the placement decides: the host buffer of 16-bit partitions and the 16-bit bytes on
 * the host and on NVMe. */
typedef struct {
    int64_t cpu_buf;
    double fp16_host, fp16_nvme;
} zplace;

/* Where each 16-bit partition lives and on which device each sub-group's optimizer states
 * are; refuses a partition larger than DeepSpeed's swap buffer. */
static ap_status layout_placement(zs *z, int64_t total_part, zplace *pl, ap_err *err) {
    hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    int n = x->nparams;
    double e = x->elt;
    /* where 16-bit partitions live (stage 3): the GPU without offload_param; with nvme the
       first max_in_cpu elements by whole sub-groups in a pinned host buffer
       (_create_param_groups_fp16_flat_cpu_memory), the rest on NVMe when a partition is at
       least MIN_AIO_BYTES = 1 MiB (swap_tensor/utils.py; smaller stay on the host) */
    int64_t cpu_buf = total_part;
    if (h->ds_params == AP_OFFLOAD_DEV_NVME && total_part > h->ds_max_in_cpu)
        cpu_buf = h->ds_max_in_cpu;
    int64_t off = 0;
    int8_t *sub_in_cpu = ap_calloc((size_t)z->nsub + 1, 1);
    if (!sub_in_cpu) return ap_err_set(err, AP_ERR_NOMEM, "zero: out of memory");
    for (int s = 0; s < z->nsub; s++) {
        sub_in_cpu[s] = (int8_t)(off + z->sub_elems[s] <= cpu_buf);
        off += z->sub_elems[s];
    }
    int64_t largest_nvme_part = 0;
    double fp16_host = 0, fp16_nvme = 0;
    for (int i = 0; i < n; i++) {
        if (z->stage < 3 || z->persist[i] || h->ds_params == AP_OFFLOAD_DEV_NONE) {
            z->loc[i] = LOC_GPU;
        } else if (h->ds_params == AP_OFFLOAD_DEV_CPU || sub_in_cpu[z->sub_of[i]] ||
                   (double)z->part[i] * e < AP_MIB) {
            z->loc[i] = LOC_CPU;
        } else {
            z->loc[i] = LOC_NVME;
            if (z->part[i] > largest_nvme_part) largest_nvme_part = z->part[i];
        }
        if (z->loc[i] == LOC_CPU) fp16_host += (double)z->part[i] * e;
        if (z->loc[i] == LOC_NVME) fp16_nvme += (double)z->part[i] * e;
    }
    ap_free(sub_in_cpu);
    if (largest_nvme_part > h->ds_param_buffer_size)
        /* AsyncPartitionedParameterSwapper.get_buffer: "More elements than buffer size" */
        return ap_err_set(err, AP_ERR_INFEASIBLE, "DeepSpeed offload_param: buffer_size %lld "
                          "elements is smaller than a parameter partition of %lld elements "
                          "(DeepSpeed asserts); raise buffer_size",
                          (long long)h->ds_param_buffer_size, (long long)largest_nvme_part);
    /* optimizer devices per sub-group: partial offload `ratio` (stage3.py: sub-group i on the
       CPU when i >= int((1 - ratio) * n)); NVMe when swappable (>= 1 MiB of fp32) */
    for (int s = 0; s < z->nsub; s++) {
        int on_host = h->ds_optimizer != AP_OFFLOAD_DEV_NONE;
        z->sub_cpu_opt[s] = (int8_t)on_host;
        z->sub_nvme_opt[s] = (int8_t)(h->ds_optimizer == AP_OFFLOAD_DEV_NVME &&
                                      (double)z->sub_elems[s] * 4.0 >= AP_MIB);
    }
    pl->cpu_buf = cpu_buf;
    pl->fp16_host = fp16_host;
    pl->fp16_nvme = fp16_nvme;
    return AP_OK;
}

/* Resident bytes on the GPU, the host (and how much of it pinned) and NVMe. */
typedef struct {
    double gpu, host, pinned, nvme;
} zmem;

/* Stages 1 and 2: whole 16-bit parameters on the GPU, the optimizer partition offloaded. */
static void resident_stage12(const zs *z, int64_t largest, zmem *r) {
    const hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    int n = x->nparams, Z = x->Z;
    double e = x->elt;
    double gpu = 0, host = 0, pinned = 0;
    int opin = h->ds_optimizer_pin;
    /* 16-bit parameters whole on the GPU; host: fp32 partition (pinned), its fp32 gradient
       (pinned), Adam m and v (DeepSpeedCPUAdam zeros_like, pageable), the pinned bit16
       buffer (stage_1_and_2.py __init__ and initialize_optimizer_states) */
    int64_t P = 0;
    for (int i = 0; i < n; i++) P += x->params[i].numel;
    double Pr = ceil((double)P / Z);
    gpu += (double)P * e;
    host += Pr * (4.0 + 4.0 + 8.0 + e);
    if (opin) pinned += Pr * (4.0 + 4.0 + e);
    /* temp_grad_buffer_for_cpu_offload: the largest parameter, on the host (pinned) and
       temp_grad_buffer_for_gpu_offload on the GPU */
    host += (double)largest * e;
    if (opin) pinned += (double)largest * e;
    gpu += (double)largest * e;
    /* accumulated_grads_in_cpu: 16-bit, whole parameters of this partition, when gradients
       accumulate over micro-batches (pinned) */
    if (x->mb > 1 || z->stage == 1) {
        host += Pr * e;
        if (opin) pinned += Pr * e;
    }
    /* IPG bucket (contiguous_gradients forced on with cpu_offload) */
    gpu += (double)h->ds_reduce_bucket_size * e;
    /* stage 1 keeps whole gradients on the GPU until the boundary reduction */
    if (z->stage == 1) gpu += (double)P * e;
    r->gpu += gpu;
    r->host += host;
    r->pinned += pinned;
}

/* Stage 3: partitions where the placement put them, swap buffers, the optimizer states per
 * sub-group on their devices. */
static void resident_stage3(const zs *z, int64_t total_part, const zplace *pl, zmem *r) {
    const hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    int n = x->nparams, Z = x->Z;
    double e = x->elt;
    double gpu = 0, host = 0, pinned = 0, nvme = 0;
    int opin = h->ds_optimizer_pin, ppin = h->ds_param_pin;
    int64_t largest_sub = 0;
    for (int s = 0; s < z->nsub; s++)
        if (z->sub_elems[s] > largest_sub) largest_sub = z->sub_elems[s];
    double fp16_host = pl->fp16_host, fp16_nvme = pl->fp16_nvme;
    int64_t cpu_buf = pl->cpu_buf;
    for (int i = 0; i < n; i++) {
        if (z->persist[i]) gpu += (double)x->params[i].numel * e;
        else if (z->loc[i] == LOC_GPU) gpu += (double)z->part[i] * e;
    }
    host += fp16_host;
    if (ppin) pinned += fp16_host;
    nvme += fp16_nvme;
    if (fp16_nvme > 0) {
        /* the pinned CPU flat buffer is allocated at max_in_cpu even when the sub-groups
           do not fit it; swap buffers buffer_count x buffer_size; the partitioned swap
           buffer for the largest sub-group (reserve_partitioned_swap_space) */
        double buf = (double)cpu_buf * e - fp16_host;
        if (buf > 0) host += buf, pinned += buf;
        double sw = (double)h->ds_param_buffer_count * (double)h->ds_param_buffer_size * e;
        host += sw;
        pinned += sw;
        host += (double)largest_sub * Z * e;
        pinned += (double)largest_sub * Z * e;
    }
    gpu += (double)h->ds_reduce_bucket_size * e; /* IPG bucket (stage3.py __init__) */
    /* grad_partitions_flat_buffer: on the optimizer's device (pinned host with offload) */
    double gp = (double)total_part * e;
    if (h->ds_optimizer != AP_OFFLOAD_DEV_NONE) {
        host += gp;
        if (opin) pinned += gp;
    } else {
        gpu += gp;
    }
    for (int s = 0; s < z->nsub; s++) {
        double ne = (double)z->sub_elems[s];
        if (z->sub_nvme_opt[s]) {
            nvme += ne * 16.0; /* fp32 parameters, momentum, variance, fp32 gradient */
        } else if (z->sub_cpu_opt[s]) {
            host += ne * 16.0;
            if (opin) pinned += ne * 8.0; /* fp32 parameters and their gradient buffer */
        } else {
            gpu += ne * 12.0; /* fp32 parameters, momentum, variance */
        }
    }
    if (h->ds_optimizer == AP_OFFLOAD_DEV_NVME) {
        /* PartitionedOptimizerSwapper: buffer_count pinned buffers of the largest
           sub-group (fp32), and the pageable gradient buffer of the same size */
        double ob = (double)h->ds_optimizer_buffer_count * (double)largest_sub * 4.0;
        host += ob + (double)largest_sub * 4.0;
        pinned += ob;
    }
    r->gpu += gpu;
    r->host += host;
    r->pinned += pinned;
    r->nvme += nvme;
}

static ap_status layout(zs *z, ap_err *err) {
    hctx *x = z->x;
    int64_t total_part = 0, largest = 0;
    zplace pl = {0, 0, 0};
    zmem r = {0, 0, 0, 0};
    ap_status st = layout_alloc(z, x->nparams, err);
    if (st != AP_OK) return st;
    layout_partitions(z, &total_part, &largest);
    if ((st = layout_placement(z, total_part, &pl, err)) != AP_OK) return st;
    if (z->stage < 3) resident_stage12(z, largest, &r);
    else resident_stage3(z, total_part, &pl, &r);
    z->fixed_gpu = r.gpu;
    z->host = r.host;
    z->pinned = r.pinned;
    z->nvme = r.nvme;
    x->sum.nvme_bytes_per_node = r.nvme * x->gpus_per_node;
    hx_host_point(x, -1, r.host, r.pinned);
    return AP_OK;
}

/* ---- stage 3 parameter fetch and release -------------------------------------------------- */

/* Parameter i is on the GPU whole: persistent, or gathered and not yet released. */
static inline int resident(const zs *z, int i) { return z->persist[i] || z->avail[i]; }

/* Gather parameter i, which is not resident (the callers test it: most operators find theirs
 * resident, and the test is cheaper than the call). */
static void fetch_param(zs *z, int i, int prefetch) {
    hctx *x = z->x;
    double e = x->elt;
    double pb = (double)z->part[i] * e, full = (double)x->params[i].numel * e;
    double ready = 0;
    if (z->loc[i] == LOC_NVME) {
        /* swap_in(async_op=False) into a swap buffer, then to the GPU */
        hx_move(x, z->rec, i, AP_MOVE_NVME_READ, 0, pb);
        ready = ht_span(x, ENG_NVME, pb / ht_nvme_read_bps(x), 0, 1);
    }
    if (z->loc[i] != LOC_GPU) {
        hx_move(x, z->rec, i, AP_MOVE_H2D, 0, pb);
        ready = ht_span(x, ENG_H2D, pb / ht_h2d_bps(x, z->h->ds_param_pin), ready, !prefetch);
    }
    point(z, full); /* the gathered buffer is allocated while the partition copy lives */
    if (x->Z > 1) hx_move(x, z->rec, i, AP_MOVE_GATHER, 0, full * (x->Z - 1) / x->Z);
    ht_span(x, ENG_COLL, ht_collective_s(x, AP_COLL_ALLGATHER_OP, full), ready, !prefetch);
    z->avail[i] = 1;
    z->gathered += full;
}

/* __params_to_release: not when used again within max_reuse_distance elements of the trace;
 * and each slot's next use (pf_from). The trace walked from operator k + 1 reaches the next use
 * j of a slot's parameter having traversed every parameter of the operators in between (none
 * of them is that parameter): pre[j] - pre[k + 1] elements, the distance checked before each
 * operator. */
static ap_status reuse_table(zs *z, ap_err *err) {
    const hctx *x = z->x;
    z->reuse = ap_calloc((size_t)x->nops * HOP_MAXP + 1, 1);
    z->next_use = ap_malloc(((size_t)x->nops * HOP_MAXP + 1) * sizeof *z->next_use);
    int32_t *last = ap_malloc(((size_t)x->nparams + 1) * sizeof *last);
    int64_t *pre = ap_malloc(((size_t)x->nops + 1) * sizeof *pre);
    if (!z->reuse || !z->next_use || !last || !pre) {
        ap_free(last);
        ap_free(pre);
        return ap_err_set(err, AP_ERR_NOMEM, "zero: out of memory");
    }
    for (int p = 0; p < x->nparams; p++) last[p] = x->nops;
    for (int k = x->nops - 1; k >= 0; k--) {
        for (int i = 0; i < x->ops[k].nparams; i++)
            z->next_use[k * HOP_MAXP + i] = last[x->ops[k].params[i]];
        for (int i = 0; i < x->ops[k].nparams; i++) last[x->ops[k].params[i]] = k;
    }
    pre[0] = 0;
    for (int j = 0; j < x->nops; j++) {
        int64_t n = 0;
        for (int q = 0; q < x->ops[j].nparams; q++) n += x->params[x->ops[j].params[q]].numel;
        pre[j + 1] = pre[j] + n;
    }
    for (int k = 0; k < x->nops; k++)
        for (int i = 0; i < x->ops[k].nparams; i++) {
            int j = z->next_use[k * HOP_MAXP + i];
            z->reuse[k * HOP_MAXP + i] =
                j < x->nops && pre[j] - pre[k + 1] < z->h->ds_max_reuse_distance;
        }
    ap_free(last);
    ap_free(pre);
    return AP_OK;
}

static int reused_soon(const zs *z, int k, int slot) {
    return z->traced && z->reuse[k * HOP_MAXP + slot];
}

static void release_after(zs *z, int k) {
    hctx *x = z->x;
    const hop *o = &x->ops[k];
    for (int i = 0; i < o->nparams; i++) {
        int p = o->params[i];
        if (z->persist[p] || !z->avail[p] || reused_soon(z, k, i)) continue;
        z->avail[p] = 0;
        if (z->next_use[k * HOP_MAXP + i] < z->pf_from) z->pf_from = z->next_use[k * HOP_MAXP + i];
        z->gathered -= (double)x->params[p].numel * x->elt;
    }
}

/* ---- gradients ---------------------------------------------------------------------------- */

/* Reduce the IPG bucket and hand each partition to the optimizer side. */
static void flush_bucket(zs *z, int boundary) {
    hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    if (z->nbucket == 0) return;
    double e = x->elt;
    double bytes = (double)z->bucket * e;
    /* average_tensor / __avg_scatter_grads: reduce-scatter in the ZeRO group (stage 1 and the
       partition-less stage 2 reduce the same volume) */
    if (x->Z > 1) hx_move(x, z->rec, -1, AP_MOVE_REDUCE, 1, bytes * (x->Z - 1) / x->Z);
    double rend = ht_span(x, ENG_COLL, ht_collective_s(x, AP_COLL_REDUCESCATTER_OP, bytes), 0, 0);
    double pe = 0; /* this rank's partition elements of the bucket */
    for (int j = 0; j < z->nbucket; j++) {
        int p = z->bucket_params[j];
        pe += z->stage == 3 ? (double)z->part[p] : ceil((double)x->params[p].numel / x->Z);
    }
    int opt_host = h->ds_optimizer != AP_OFFLOAD_DEV_NONE;
    double pin = h->ds_optimizer_pin;
    if (opt_host) {
        double down = 0, up = 0, nvme_w = 0;
        if (z->stage < 3) {
            /* copy_grads_in_partition (cpu_offload): accumulation copies (16-bit) when
               micro_step_id > 0 or before the boundary, the fp32 copy at the boundary */
            int accum = z->micro > 0 || !boundary;
            if (z->stage == 1) accum = boundary && x->mb > 1;
            if (accum) {
                if (z->micro > 0) up += pe * e;
                down += pe * e;
            }
            if (boundary) down += pe * 4.0;
        } else {
            /* partition_grads: micro-batch 0 copies the partition down and back up
               (grad_buffer.copy_ then .to(device)); later ones up, add, down; the boundary
               casts to fp32 and copies down or swaps it out to NVMe */
            up += pe * e;
            down += pe * e;
            if (boundary) {
                double nvme_part = 0;
                for (int j = 0; j < z->nbucket; j++) {
                    int p = z->bucket_params[j];
                    if (z->sub_nvme_opt[z->sub_of[p]]) nvme_part += (double)z->part[p];
                }
                down += pe * 4.0;
                nvme_w += nvme_part * 4.0;
            }
        }
        if (up > 0) {
            hx_move(x, z->rec, -1, AP_MOVE_H2D, 1, up);
            ht_span(x, ENG_H2D, up / ht_h2d_bps(x, (int)pin), rend, 0);
        }
        if (down > 0) {
            hx_move(x, z->rec, -1, AP_MOVE_D2H, 1, down);
            double dend = ht_span(x, ENG_D2H, down / ht_d2h_bps(x, (int)pin), rend, 0);
            if (nvme_w > 0) {
                hx_move(x, z->rec, -1, AP_MOVE_NVME_WRITE, 1, nvme_w);
                ht_span(x, ENG_NVME, nvme_w / ht_nvme_write_bps(x), dend, 0);
            }
        }
    }
    z->bucket = 0;
    z->nbucket = 0;
}

static void grad_hooks(zs *z, const hop *o, int boundary) {
    hctx *x = z->x;
    for (int i = 0; i < o->nhooks; i++) {
        int p = o->hooks[i];
        int64_t numel = x->params[p].numel;
        if (z->stage == 1 && !boundary) continue; /* stage 1 reduces at the boundary only */
        /* reduce_independent_p_g_buckets_and_remove_grads: flush when it would overflow */
        if (z->bucket + numel > z->h->ds_reduce_bucket_size) flush_bucket(z, boundary);
        z->bucket_params[z->nbucket++] = p;
        z->bucket += numel;
    }
}

/* ---- the step ----------------------------------------------------------------------------- */

static void run_micro(zs *z, int64_t mb, int boundary) {
    hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    z->micro = mb;
    z->pf_from = 0;
    for (int k = 0; k < x->nops; k++) {
        const hop *o = &x->ops[k];
        z->rec = hx_rec(x, o->module, o->phase, o->layer, mb);
        z->cur_nmd = (double)o->nmd_start;
        if (z->stage == 3) {
            for (int i = 0; i < o->nparams; i++) {
                int p = o->params[i];
                if (!resident(z, p)) fetch_param(z, p, 0);
            }
            /* prefetch the next modules' parameters up to stage3_prefetch_bucket_size elements
               (and max_live_parameters) once the trace is known (fetch_sub_module) */
            /* the emitted config turns prefetching off (bucket 0) without parameter overlap */
            if (z->traced && h->ds_prefetch_bucket_size > 0 && x->p->overlap_param) {
                double budget = (double)h->ds_prefetch_bucket_size;
                double live_left = (double)h->ds_max_live_parameters - z->gathered / x->elt;
                if (live_left < budget) budget = live_left;
                /* the operators before pf_from hold nothing left to fetch: the scan skips
                   them at no cost to the budget, as one from k + 1 would */
                int j = k + 1 > z->pf_from ? k + 1 : z->pf_from;
                for (; j < x->nops && budget > 0; j++) {
                    const hop *q = &x->ops[j];
                    for (int i = 0; i < q->nparams && budget > 0; i++) {
                        int p = q->params[i];
                        if (resident(z, p)) continue;
                        if (z->loc[p] == LOC_NVME) { budget = 0; break; }
                        fetch_param(z, p, 1);
                        budget -= (double)x->params[p].numel;
                    }
                    if (!(budget > 0)) break; /* op j may hold more: the next scan starts there */
                }
                z->pf_from = j;
            }
        }
        z->cur_nmd = (double)o->nmd_peak + (double)o->wgrad_bytes;
        point(z, 0);
        x->tl.t += hx_op_compute_s(x, o);
        if (o->phase == AP_PHASE_BWD) grad_hooks(z, o, boundary);
        if (z->stage == 3) release_after(z, k);
    }
    /* the backward epilogue reduces what the bucket holds and synchronises the streams */
    z->rec = -1;
    if (z->stage != 1 || boundary) flush_bucket(z, boundary);
    double w = x->tl.coll_free;
    if (x->tl.d2h_free > w) w = x->tl.d2h_free;
    if (x->tl.h2d_free > w) w = x->tl.h2d_free;
    if (x->tl.nvme_free > w) w = x->tl.nvme_free;
    ht_wait(x, w);
}

/* The elements the optimizer step updates on the host (CPU Adam) and on the GPU, fixed by the
 * layout: stages 1-2 offload this rank's whole partition, stage 3 each sub-group where the
 * placement put its states. */
static void optimizer_elems(const zs *z, double *cpu_n, double *gpu_n) {
    const hctx *x = z->x;
    *cpu_n = *gpu_n = 0;
    if (z->stage < 3) {
        int64_t P = 0;
        for (int i = 0; i < x->nparams; i++) P += x->params[i].numel;
        *cpu_n = ceil((double)P / x->Z);
        return;
    }
    for (int s = 0; s < z->nsub; s++) {
        if (z->sub_cpu_opt[s]) *cpu_n += (double)z->sub_elems[s];
        else *gpu_n += (double)z->sub_elems[s];
    }
}

static void optimizer_step(zs *z) {
    hctx *x = z->x;
    const ap_plan_hetero *h = z->h;
    int rec = hx_rec(x, -1, 3, -1, -1);
    z->rec = rec;
    z->cur_nmd = 0;
    double e = x->elt;
    double cpu_n, gpu_n, nvme_r = 0, nvme_w = 0, up = 0, p16_nvme = 0;
    optimizer_elems(z, &cpu_n, &gpu_n);
    if (z->stage < 3) {
        up = cpu_n * e; /* bit16_partitions[partition_id].data.copy_(bit16 buffer) */
    } else {
        for (int s = 0; s < z->nsub; s++) {
            double ne = (double)z->sub_elems[s];
            if (z->sub_nvme_opt[s]) {
                /* swap_in_optimizer_state: fp32 parameters, momentum, variance (12) and the
                   fp32 gradient (4); swap_out_optimizer_state: 12 */
                nvme_r += ne * 16.0;
                nvme_w += ne * 12.0;
            }
        }
        /* _reassign_or_swap_out_partitioned_parameters: the 16-bit partitions */
        for (int i = 0; i < x->nparams; i++) {
            double pb = (double)z->part[i] * e;
            if (!z->sub_cpu_opt[z->sub_of[i]]) continue; /* GPU optimizer: copied in place */
            if (z->loc[i] == LOC_GPU) up += pb;
            else if (z->loc[i] == LOC_NVME) p16_nvme += pb;
        }
    }
    /* DeepSpeedCPUAdam (csrc/adam/cpu_adam_impl.cpp Step): reads and writes fp32 parameter,
       momentum, variance (24) and reads the fp32 gradient (4); the 16-bit refresh reads 4 and
       writes 2: 34 bytes per element through host DRAM. GPU Adam: 28 + 6 through HBM. */
    x->sum.cpu_adam_s = ht_cpu_adam_s(x, cpu_n, 34.0);
    x->sum.gpu_adam_s = ht_gpu_pass_s(x, gpu_n * 34.0);
    double t0 = x->tl.t;
    if (nvme_r > 0) {
        hx_move(x, rec, -1, AP_MOVE_NVME_READ, 3, nvme_r);
        hx_move(x, rec, -1, AP_MOVE_NVME_WRITE, 3, nvme_w);
    }
    if (p16_nvme > 0) hx_move(x, rec, -1, AP_MOVE_NVME_WRITE, 0, p16_nvme);
    /* the swapper pipelines sub-groups (next sub-group's swap-in overlaps this one's Adam), so
       the step takes the longer of the drives and the CPU, plus one sub-group's fill */
    double nv = (nvme_r + nvme_w + p16_nvme) > 0
                    ? nvme_r / ht_nvme_read_bps(x) + (nvme_w + p16_nvme) / ht_nvme_write_bps(x)
                    : 0;
    double comp = x->sum.cpu_adam_s + x->sum.gpu_adam_s;
    double step = nv > comp ? nv : comp;
    if (nv > 0 && z->nsub > 1) step += (nv < comp ? nv : comp) / z->nsub;
    x->sum.nvme_optimizer_s = nv;
    if (nv > 0) x->tl.nvme_busy += nv;
    x->tl.t = t0 + step;
    if (up > 0) {
        hx_move(x, rec, -1, AP_MOVE_H2D, 0, up);
        ht_sync(x, ENG_H2D, up, ht_h2d_bps(x, h->ds_optimizer_pin));
    }
    if (z->stage < 3 && x->Z > 1) {
        /* all_gather_dp_groups: the updated 16-bit partitions */
        double full = cpu_n * e * x->Z;
        hx_move(x, rec, -1, AP_MOVE_GATHER, 0, full * (x->Z - 1) / x->Z);
        ht_span(x, ENG_COLL, ht_collective_s(x, AP_COLL_ALLGATHER_OP, full), 0, 1);
    }
    /* ZeRO-3 after the step: nothing stays gathered but the persistent parameters */
    if (z->stage == 3)
        for (int i = 0; i < x->nparams; i++)
            if (z->avail[i]) {
                z->avail[i] = 0;
                z->gathered -= (double)x->params[i].numel * e;
            }
    point(z, 0);
}

/* The GPU at each operator of the first micro-batch (run_micro's point): the resident model
 * data, the operator's own parameters gathered whole (stage 3, those not persistent), and its
 * non-model data and weight gradients with the device overhead. Where the largest passes the
 * GPU's stop rule (hx_gpu_point's) and the caller reads nothing of a stopped run
 * (ap_hetero_opts.stop_early), the run stops now: it would stop by that operator. */
static void ops_stop(zs *z) {
    hctx *x = z->x;
    if (!hx_may_stop_early(x) || x->cut) return;
    double worst = 0;
    for (int k = 0; k < x->nops; k++) {
        const hop *op = &x->ops[k];
        double v = (double)op->nmd_peak + (double)op->wgrad_bytes;
        if (z->stage == 3)
            for (int i = 0; i < op->nparams; i++)
                if (!z->persist[op->params[i]])
                    v += (double)x->params[op->params[i]].numel * x->elt;
        if (v > worst) worst = v;
    }
    const ap_hetero_summary *s = &x->sum;
    const double cap = s->gpu_capacity_bytes;
    hx_stop_past(x, AP_BIND_GPU, z->fixed_gpu + worst + x->overhead_bytes + s->headroom_bytes - cap,
                 cap);
}

ap_status ap_zero_offload_sim(hctx *x, ap_err *err) {
    zs zz, *z = &zz;
    memset(z, 0, sizeof *z);
    z->x = x;
    z->h = &x->p->hetero;
    z->stage = x->p->zero;
    const ap_plan_hetero *h = z->h;
    if (z->stage == 3) {
        x->sum.kind = AP_HETERO_ZERO_INFINITY;
        const char *dev = h->ds_params == AP_OFFLOAD_DEV_NVME || h->ds_optimizer == AP_OFFLOAD_DEV_NVME
                              ? "nvme"
                              : "cpu";
        snprintf(x->sum.name, sizeof x->sum.name, "zero-infinity-%s", dev);
    } else {
        x->sum.kind = AP_HETERO_ZERO_OFFLOAD;
        snprintf(x->sum.name, sizeof x->sum.name, "zero-offload");
    }
    ap_status st = layout(z, err);
    if (st == AP_OK && !x->unfit) {
        /* what the layout fixes decides (hetero.c's verdict): the drives' share, and the
           resident model data, which every point of the reported step holds on the GPU */
        const ap_hetero_summary *s = &x->sum;
        const double cap = s->gpu_capacity_bytes;
        const double gpu = z->fixed_gpu + x->overhead_bytes + s->headroom_bytes;
        if (x->o->stop_unfit && s->nvme_bytes_per_node > 0 &&
            s->nvme_bytes_per_node > s->nvme_capacity_bytes)
            hx_stop(x, AP_BIND_NVME, 1);
        else
            hx_stop_past(x, AP_BIND_GPU, gpu - cap, cap);
    }
    /* the operators, once the layout has not stopped the run (hetero_int.h) */
    if (st == AP_OK && !x->unfit) st = hx_ops(x, err);
    if (st == AP_OK && z->stage == 3 && !x->unfit) st = reuse_table(z, err);
    if (st == AP_OK && x->o->step_cutoff_s > 0) {
        /* the step also waits for the optimizer's Adam passes (optimizer_step) */
        double cpu_n, gpu_n;
        optimizer_elems(z, &cpu_n, &gpu_n);
        x->cut = hx_past_cutoff(x, ht_cpu_adam_s(x, cpu_n, 34.0) + ht_gpu_pass_s(x, gpu_n * 34.0));
    }
    if (st == AP_OK && !x->unfit) ops_stop(z);
    for (int s = 0; st == AP_OK && s < x->o->steps && !x->unfit && !x->cut; s++) {
        int last = s == x->o->steps - 1;
        z->traced = s > 0; /* the first step records the trace */
        if (last) {
            ht_reset(&x->tl);
            x->recording = 1;
            x->sum.h2d_bytes = x->sum.d2h_bytes = x->sum.nvme_read_bytes = 0;
            x->sum.nvme_write_bytes = x->sum.gather_bytes = x->sum.reduce_bytes = 0;
        }
        hsnap s1a, s1b;
        for (int64_t mb = 0; mb < x->mb; mb++) {
            if (hx_skipped(mb, x->mb)) {
                mb = hx_repeat_rest(x, &s1a, &s1b);
                continue;
            }
            if (mb == 1) hx_snap(x, &s1a);
            run_micro(z, mb, mb == x->mb - 1);
            if (mb == 1) hx_snap(x, &s1b);
        }
        optimizer_step(z);
    }
    if (st == AP_OK) {
        x->sum.compute_s = x->mb * (x->fwd_s + x->bwd_s);
        x->sum.h2d_s = x->tl.h2d_busy;
        x->sum.d2h_s = x->tl.d2h_busy;
        x->sum.nvme_s = x->tl.nvme_busy;
        x->sum.transfer_exposed_s = x->tl.exposed;
        x->sum.collective_exposed_s = x->tl.coll_exposed;
        x->sum.overhead_s = x->step_overhead_s;
        x->sum.step_s = x->tl.t + x->step_overhead_s;
    }
    ap_free(z->part);
    ap_free(z->persist);
    ap_free(z->loc);
    ap_free(z->avail);
    ap_free(z->sub_of);
    ap_free(z->bucket_params);
    ap_free(z->sub_elems);
    ap_free(z->sub_nvme_opt);
    ap_free(z->sub_cpu_opt);
    ap_free(z->reuse);
    ap_free(z->next_use);
    return st;
}
