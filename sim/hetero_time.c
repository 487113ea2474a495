/*
 * hetero_time.c - what the heterogeneous-memory simulators charge for a byte moved: PCIe copies
 * (pinned or pageable), NVMe reads and writes, ZeRO collectives, CPU Adam over host DRAM and
 * memory-bound GPU passes; and the step timeline, one clock per engine (compute stream, the two
 * PCIe copy directions, the NVMe queue, the communication stream), so a transfer is charged
 * only for the time the compute stream waits for it.
 *
 * Every rate is a physical number of the cluster (hw.h) times a cited efficiency; none is fitted
 * to a run. Not here: which bytes move (gemini.c, zero_infinity.c).
 */
#include <math.h>

#include "hetero_int.h"

/* Pinned copies run at the kernel table's PCIe efficiency (kernels.c pcie_eff: a measured or
 * published bandwidthTest figure over the nominal per-direction rate); the GPUs behind one
 * switch share its uplink. The same rate and sharing as the cost model's offload time
 * (costmodel/estimate.c). */
/* Host DRAM streams at about 70% of its peak (STREAM triad on two-socket servers, McCalpin;
 * the cost model's CPU Adam uses the same factor). */
#define HOST_STREAM_EFF 0.7

static int share_of(const hctx *x) {
    int s = x->c->gpus_per_pcie_switch > 0 ? x->c->gpus_per_pcie_switch : 1;
    return s < x->gpus_per_node ? s : x->gpus_per_node;
}

/* Host DRAM bandwidth one rank gets while every rank of the node streams at once. */
static double host_bps(const hctx *x) {
    double bw = x->c->host_mem_bytes_per_s > 0 ? x->c->host_mem_bytes_per_s : 100e9;
    return HOST_STREAM_EFF * bw / (x->gpus_per_node > 0 ? x->gpus_per_node : 1);
}

static double pcie_bps(const hctx *x) { return x->c->pcie_bytes_per_s * x->k->pcie_eff / share_of(x); }

/* A pageable copy goes through the driver's pinned staging buffer (CUDA C++ Best Practices
 * Guide, "Pinned Memory"): the PCIe leg and a host memcpy (read + write of DRAM) in series. */
static double pageable(const hctx *x, double pcie) {
    double host_copy = host_bps(x) / 2.0;
    return 1.0 / (1.0 / pcie + 1.0 / host_copy);
}

double ht_h2d_bps(const hctx *x, int pinned) {
    return pinned ? pcie_bps(x) : pageable(x, pcie_bps(x));
}

double ht_d2h_bps(const hctx *x, int pinned) {
    return pinned ? pcie_bps(x) : pageable(x, pcie_bps(x));
}

/* The node's drives are shared by its ranks (DeepSpeed's aio reads each rank's own swap files
 * on the same local drives: deepspeed/runtime/swap_tensor/partitioned_param_swapper.py). */
double ht_nvme_read_bps(const hctx *x) {
    return x->c->nvme_read_bytes_per_s / (x->gpus_per_node > 0 ? x->gpus_per_node : 1);
}

double ht_nvme_write_bps(const hctx *x) {
    return x->c->nvme_write_bytes_per_s / (x->gpus_per_node > 0 ? x->gpus_per_node : 1);
}

double ht_collective_s(hctx *x, ap_coll_op op, double bytes) {
    int Z = x->Z;
    if (Z <= 1 || bytes <= 0) return 0;
    for (int i = 0; i < HT_COLL_MEMO; i++)
        if (x->coll_memo[i].bytes == bytes && x->coll_memo[i].op == (int)op) return x->coll_memo[i].s;
    /* the group has stride tp, so an NVLink domain holds domain / tp of its ranks */
    int dom = x->c->nvlink_domain > 0 ? x->c->nvlink_domain : 1;
    int k = dom / (x->p->tp > 0 ? x->p->tp : 1);
    double s = ap_estimate_coll_s(x->c, &x->cal, x->k, op, bytes, Z, k < 1 ? 1 : k);
    x->coll_memo[x->coll_next].op = (int)op;
    x->coll_memo[x->coll_next].bytes = bytes;
    x->coll_memo[x->coll_next].s = s;
    x->coll_next = (x->coll_next + 1) % HT_COLL_MEMO;
    return s;
}

double ht_cpu_adam_s(const hctx *x, double n, double bytes_per_elem) {
    return n > 0 ? n * bytes_per_elem / host_bps(x) : 0;
}

double ht_gpu_pass_s(const hctx *x, double bytes) {
    return bytes > 0 ? bytes / (x->c->gpu.hbm_bytes_per_s * x->cal.mem_bound_eff) : 0;
}

/* ---- the timeline ------------------------------------------------------------------------ */

void ht_reset(tline *t) { *t = (tline){0}; }

static double *engine(hctx *x, int eng) {
    switch (eng) {
    case ENG_H2D: return &x->tl.h2d_free;
    case ENG_D2H: return &x->tl.d2h_free;
    case ENG_NVME: return &x->tl.nvme_free;
    default: return &x->tl.coll_free;
    }
}

static void busy(hctx *x, int eng, double d) {
    if (eng == ENG_H2D) x->tl.h2d_busy += d;
    else if (eng == ENG_D2H) x->tl.d2h_busy += d;
    else if (eng == ENG_NVME) x->tl.nvme_busy += d;
}

double ht_span(hctx *x, int eng, double dur_s, double not_before, int sync) {
    double *f = engine(x, eng);
    double start = *f > x->tl.t ? *f : x->tl.t;
    if (not_before > start) start = not_before;
    if (dur_s <= 0) dur_s = 0;
    *f = start + dur_s;
    busy(x, eng, dur_s);
    /* an asynchronous collective runs beside the compute and slows it (estimate.h
     * AP_OVERLAP_COST, Lee et al. 2025), charged to the compute stream now, as the estimate
     * charges a hidden collective: a later wait for it absorbs the charge where the compute
     * had nothing left to do beside it, so the stream ends at max(the collective's end, the
     * compute's end + the charge). Copies (H2D, D2H, NVMe) run on copy engines, not SMs. */
    if (!sync && eng == ENG_COLL && dur_s > 0) {
        x->tl.coll_exposed += AP_OVERLAP_COST * dur_s;
        x->tl.t += AP_OVERLAP_COST * dur_s;
    }
    if (sync && *f > x->tl.t) {
        if (eng == ENG_COLL) x->tl.coll_exposed += *f - x->tl.t;
        else x->tl.exposed += *f - x->tl.t;
        x->tl.t = *f;
    }
    return *f;
}

double ht_async(hctx *x, int eng, double bytes, double bps) {
    return ht_span(x, eng, bytes > 0 && bps > 0 ? bytes / bps : 0, 0, 0);
}

double ht_sync(hctx *x, int eng, double bytes, double bps) {
    return ht_span(x, eng, bytes > 0 && bps > 0 ? bytes / bps : 0, 0, 1);
}

void ht_wait(hctx *x, double when) {
    if (when > x->tl.t) {
        x->tl.exposed += when - x->tl.t;
        x->tl.t = when;
    }
}
