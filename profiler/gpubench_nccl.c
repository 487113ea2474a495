/*
 * gpubench_nccl.c - NCCL collectives (the only file that includes nccl.h; CUDA builds only):
 * all-reduce, all-gather, reduce-scatter, all-to-all and send/recv across every visible GPU
 * from one process (ncclCommInitAll, one communicator per device), and the device memory one
 * communicator takes (NCCL's buffers). With one GPU there is nothing to measure: collectives
 * then come from the published tables (costmodel), and the bench says so.
 *
 * Conventions are those of nccl-tests (doc/PERFORMANCE.md), which the profile format uses:
 * `bytes` is the "size" of the operation (the buffer each rank holds: the all-reduce buffer,
 * the all-gather output, the reduce-scatter input, the all-to-all buffer, the message), the
 * time is host wall time from launching the group on every device to every stream finishing,
 * and the bus bandwidth follows from the op's factor (ap_profile_busbw_factor). All-to-all and
 * send/recv are grouped ncclSend/ncclRecv, as nccl-tests builds them.
 *
 * The level (nvlink or pcie) is what peer access between device 0 and 1 reports: NVLink when
 * the CUDA performance rank between them says so (cudaDevP2PAttrPerformanceRank > 0 is NVLink
 * on NVIDIA systems), else PCIe. Network levels need several hosts: not measured here.
 */
#include "gpubench_int.h"

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 16

void ap_gb_nccl_version(char *buf, size_t n) {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, n, "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
        return;
    }
    /* NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 */
    snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

typedef struct {
    ap_gb *g;
    int ndev;
    ncclComm_t comm[MAX_DEV];
    cudaStream_t stream[MAX_DEV];
    void *send[MAX_DEV], *recv[MAX_DEV];
    int op;          /* 0 allreduce, 1 allgather, 2 reducescatter, 3 alltoall, 4 sendrecv */
    size_t bytes;    /* nccl-tests "size" */
} coll;

static const char *const op_names[] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                       "sendrecv"};

static ap_status nccl_fail(ncclResult_t r, const char *doing, ap_err *err) {
    return ap_err_set(err, AP_ERR_CUDA, "NCCL: %s: %s", doing, ncclGetErrorString(r));
}

/* Launch one collective on every device and wait for all of them; host seconds. */
static double run_coll(void *p, ap_err *err) {
    coll *c = p;
    const int n = c->ndev;
    size_t count = c->bytes / 2; /* bf16 elements */
    double t0 = ap_now_s();
    ncclResult_t r = ncclGroupStart();
    for (int d = 0; r == ncclSuccess && d < n; d++) {
        switch (c->op) {
        case 0:
            r = ncclAllReduce(c->send[d], c->recv[d], count, ncclBfloat16, ncclSum, c->comm[d],
                              c->stream[d]);
            break;
        case 1: /* output `bytes`, each rank contributes bytes / n */
            r = ncclAllGather(c->send[d], c->recv[d], count / n, ncclBfloat16, c->comm[d],
                              c->stream[d]);
            break;
        case 2: /* input `bytes`, each rank keeps bytes / n */
            r = ncclReduceScatter(c->send[d], c->recv[d], count / n, ncclBfloat16, ncclSum,
                                  c->comm[d], c->stream[d]);
            break;
        case 3: /* every rank sends bytes / n to every rank */
            for (int peer = 0; r == ncclSuccess && peer < n; peer++) {
                size_t part = count / n;
                r = ncclSend((char *)c->send[d] + peer * part * 2, part, ncclBfloat16, peer,
                             c->comm[d], c->stream[d]);
                if (r == ncclSuccess)
                    r = ncclRecv((char *)c->recv[d] + peer * part * 2, part, ncclBfloat16, peer,
                                 c->comm[d], c->stream[d]);
            }
            break;
        default: /* a ring of send/recv: rank d sends to d + 1 */
            r = ncclSend(c->send[d], count, ncclBfloat16, (d + 1) % n, c->comm[d], c->stream[d]);
            if (r == ncclSuccess)
                r = ncclRecv(c->recv[d], count, ncclBfloat16, (d + n - 1) % n, c->comm[d],
                             c->stream[d]);
        }
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) return nccl_fail(r, op_names[c->op], err), -1;
    for (int d = 0; d < n; d++) {
        cudaSetDevice(d);
        int rc = (int)cudaStreamSynchronize(c->stream[d]);
        if (rc) return ap_gb_cuda(rc, "waiting for a collective", err), -1;
    }
    cudaSetDevice(c->g->device);
    return ap_now_s() - t0;
}

static const char *level(int ndev) {
    int rank = 0;
    if (ndev > 1 && cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, 0, 1) ==
                        cudaSuccess && rank > 0)
        return "nvlink";
    return "pcie";
}

ap_status ap_gb_nccl(ap_gb *g, ap_err *err) {
    coll c;
    memset(&c, 0, sizeof c);
    c.g = g;
    cudaGetDeviceCount(&c.ndev);
    if (c.ndev > MAX_DEV) c.ndev = MAX_DEV;
    int devs[MAX_DEV];
    for (int d = 0; d < c.ndev; d++) devs[d] = d;
    if (c.ndev < 2 && ap_gb_wants(g, "nccl"))
        ap_gb_note(g, "collectives: one GPU visible, nothing to measure; the cost model uses the "
                   "published tables for them (`autoplan profile show %s`)", g->tmpl->gpu);
    double before = ap_gb_free_bytes();
    ncclResult_t r = ncclCommInitAll(c.comm, c.ndev, devs);
    if (r != ncclSuccess) return nccl_fail(r, "ncclCommInitAll", err);
    const double top = g->o->quick ? 64.0 * (1 << 20) : 4.0 * (1 << 30);
    size_t max = (size_t)top;
    ap_status s = AP_OK;
    for (int d = 0; s == AP_OK && d < c.ndev; d++) {
        cudaSetDevice(d);
        int rc = (int)cudaStreamCreateWithFlags(&c.stream[d], cudaStreamNonBlocking);
        if (!rc && c.ndev > 1) rc = (int)cudaMalloc(&c.send[d], max);
        if (!rc && c.ndev > 1) rc = (int)cudaMalloc(&c.recv[d], max);
        if (!rc && c.ndev > 1) rc = (int)cudaMemset(c.send[d], 1, max);
        if (rc) s = ap_gb_cuda(rc, "allocating collective buffers", err);
    }
    cudaSetDevice(g->device);
    /* the communicator's memory: NCCL allocates its buffers at init and first use */
    if (s == AP_OK && ap_gb_wants(g, "devmem")) {
        c.op = 0;
        c.bytes = 1024;
        if (c.ndev > 1 && run_coll(&c, err) < 0) s = AP_ERR_CUDA;
        double after = ap_gb_free_bytes();
        double taken = before - after - (c.ndev > 1 ? 2.0 * (double)max : 0.0);
        if (s == AP_OK && taken > 0) {
            ap_bench_stats st = {0, 0, 0, 0, 1};
            char src[192], shape[64];
            snprintf(shape, sizeof shape, "kind=nccl_buffers");
            snprintf(src, sizeof src, "autoplan %s profile bench (cudaMemGetInfo around "
                     "ncclCommInitAll of %d GPUs and a first all-reduce, NCCL %s)", AP_VERSION,
                     c.ndev, g->tmpl->nccl_version);
            ap_gb_note(g, "NCCL communicator: %.0f MiB on device %d", taken / (1 << 20), g->device);
            s = ap_gb_row(g, "device_mem", shape, "none", &st, taken, src, err);
        }
    }
    const char *lv = level(c.ndev);
    for (c.op = 0; s == AP_OK && c.ndev > 1 && ap_gb_wants(g, "nccl") && c.op < 5; c.op++) {
        double best = 0;
        for (double b = 1024; s == AP_OK && b <= top; b *= 4) {
            c.bytes = (size_t)b;
            if (c.bytes / 2 < (size_t)c.ndev * c.ndev) continue; /* a part per rank per rank */
            ap_bench_stats st;
            s = ap_bench_repeat(run_coll, &c, 5, g->o->reps, &st, err);
            if (s == AP_ERR_INTERNAL) s = AP_ERR_CUDA;
            char shape[128], src[192];
            if (c.op == 4)
                snprintf(shape, sizeof shape, "ranks=%d,level=%s,bytes=%zu", c.ndev, lv, c.bytes);
            else
                snprintf(shape, sizeof shape, "ranks=%d,level=%s,algo=default,bytes=%zu", c.ndev,
                         lv, c.bytes);
            snprintf(src, sizeof src, "autoplan %s profile bench (NCCL %s, one process, "
                     "ncclCommInitAll, host wall time)", AP_VERSION, g->tmpl->nccl_version);
            if (s == AP_OK) s = ap_gb_row(g, op_names[c.op], shape, "bf16", &st, b, src, err);
            if (s == AP_OK) {
                double bus = b / st.median_s * ap_profile_busbw_factor(op_names[c.op], c.ndev);
                if (bus > best) best = bus;
            }
        }
        if (s == AP_OK)
            ap_gb_note(g, "%s over %d GPUs (%s): up to %.0f GB/s bus bandwidth", op_names[c.op],
                       c.ndev, lv, best / 1e9);
    }
    for (int d = 0; d < c.ndev; d++) {
        cudaSetDevice(d);
        cudaFree(c.send[d]);
        cudaFree(c.recv[d]);
        if (c.stream[d]) cudaStreamDestroy(c.stream[d]);
        ncclCommDestroy(c.comm[d]);
    }
    cudaSetDevice(g->device);
    return s;
}
