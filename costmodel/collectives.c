/*
 * collectives.c - the cost model's collectives on the cluster's links: the bus bandwidth a group
 * of ranks reaches (NVLink inside a domain, the network across domains, PCIe without a peer
 * link), one NCCL call priced by the kernel tables' NCCL model plus the host cost of issuing
 * it, and one pipeline send between adjacent stages.
 *
 * What it does not do: decide how often a trainer calls a collective or how much of it
 * overlaps compute (estimate.c and layer_cost.c do), or model NCCL's algorithms
 * (costmodel/kernels.c does).
 */
#include "estimate_int.h"

#include <math.h>

/* Bus bandwidth (nccl-tests convention) of a collective group of n ranks, k of them per NVLink
 * domain, and the domains it spans: inside one domain the peer link at the kernel table's
 * nccl-tests plateau (PCIe for GPUs without a peer link); across domains each domain's NICs
 * are shared by the groups on it, so a group gets k x (network per GPU) at the table's RDMA
 * plateau (GTC24 S62129: 8 x 200 Gb HDR reaches 192 GB/s), never more than inside. The
 * calibrated link_eff / net_eff are the fraction of those plateaus reached during training. */
double group_busbw(const ctx *x, int n, int k, int *domains) {
    const ap_kernels *K = x->k;
    double intra = x->c->link_bytes_per_s * K->coll_eff[AP_LEVEL_NVLINK] * x->cal.link_eff;
    if (x->c->gpu.link == AP_LINK_NONE || x->c->gpu.link == AP_LINK_PCIE ||
        x->c->link_bytes_per_s <= 0)
        intra = x->c->pcie_bytes_per_s * K->coll_eff[AP_LEVEL_PCIE] * x->cal.link_eff;
    if (k < 1) k = 1;
    *domains = (n + k - 1) / k;
    if (n <= k) return intra;
    double net = x->c->net_bytes_per_s * K->coll_eff[AP_LEVEL_NET] * x->cal.net_eff *
                 x->net_scale * (double)k;
    return net < intra ? net : intra;
}

/* One collective call moving `bytes` (nccl-tests size) over n ranks, k per domain: NCCL's own
 * algorithm/protocol choice, latency and bandwidth model (ap_kernels_coll_s) plus the host cost
 * of issuing a call (calibrated coll_latency_s: ProcessGroupNCCL launch and stream events). */
double coll_s(const ctx *x, ap_coll_op op, double bytes, int n, int k) {
    if (n <= 1 || bytes <= 0) return 0;
    int domains;
    double bw = group_busbw(x, n, k, &domains);
    int nvlink = x->c->gpu.link == AP_LINK_NVLINK || x->c->gpu.link == AP_LINK_NVLINK_BRIDGE ||
                 x->c->gpu.link == AP_LINK_XGMI;
    ap_coll_terms scratch;
    const ap_coll_terms *t = coll_terms_of(x, op, n, domains, bw, nvlink, &scratch);
    return ap_kernels_coll_terms_s(t, bytes) + x->cal.coll_latency_s;
}

double ap_estimate_coll_s(const ap_cluster *c, const ap_calib *cal, const ap_kernels *k,
                          int op, double bytes, int n, int k_per_domain) {
    ctx x = {.c = c, .cal = *cal, .k = k, .net_scale = 1.0};
    return coll_s(&x, (ap_coll_op)op, bytes, n, k_per_domain);
}

double allreduce_s(const ctx *x, double bytes, int n, int k) {
    return coll_s(x, AP_COLL_ALLREDUCE_OP, bytes, n, k);
}
/* Reduce-scatter or all-gather of a full buffer of `bytes` (the same time in NCCL's model). */
double gather_s(const ctx *x, double bytes, int n, int k) {
    return coll_s(x, AP_COLL_ALLGATHER_OP, bytes, n, k);
}
double alltoall_s(const ctx *x, double bytes, int n, int k) {
    return coll_s(x, AP_COLL_ALLTOALL_OP, bytes, n, k);
}

/* Ranks of a group with stride `inner` that share one NVLink domain. */
int in_domain(const ctx *x, int n, int inner) {
    int dom = x->c->nvlink_domain > 0 ? x->c->nvlink_domain : 1;
    if (inner >= dom) return 1;
    int k = dom / inner;
    return k < n ? k : n;
}

/* One activation (or gradient) send between adjacent pipeline stages: the pp group has stride
 * tp*cp*dp, so when the pipeline does not fit one NVLink domain some boundary crosses nodes,
 * and every micro-batch crosses every boundary: the send is priced on one GPU's share of the
 * network (one NIC per GPU) at the kernel table's RDMA plateau; inside a domain at the peer
 * link's. Plus the host cost of a call and NCCL's point-to-point latency. */
int pipe_cross(const ctx *x) {
    const ap_plan *p = x->p;
    int dom = x->c->nvlink_domain > 0 ? x->c->nvlink_domain : 1;
    return (double)p->tp * p->cp * p->dp * p->pp > (double)dom;
}

double p2p_send_s(const ctx *x, double bytes) {
    const ap_cluster *c = x->c;
    int cross = pipe_cross(x);
    int domains;
    double bw = cross ? c->net_bytes_per_s * x->k->coll_eff[AP_LEVEL_NET] * x->cal.net_eff *
                            x->net_scale
                      : group_busbw(x, 2, 2, &domains);
    int nvlink = x->c->gpu.link == AP_LINK_NVLINK || x->c->gpu.link == AP_LINK_XGMI;
    return bytes / bw + x->cal.coll_latency_s +
           ap_nccl_latency_s(AP_COLL_SENDRECV_OP, 0, 2, 2, cross ? 2 : 1, nvlink);
}
