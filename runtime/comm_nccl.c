/*
 * comm_nccl.c - collectives of the CUDA backend on device memory through NCCL (rt_int.h,
 * rt_nccl_group): the only file of autoplan that includes nccl.h. A group is built over an
 * existing MPI group of the same ranks: rank 0 makes the NCCL unique id and broadcasts it over
 * MPI (NCCL's documented bootstrap), then every rank joins the NCCL communicator. Reductions,
 * reduce-scatters and all-gathers run on the default stream, after the kernels that produced
 * their input, and the call waits for them; byte broadcasts, gathers and barriers stay on the
 * MPI group. Built only with the CUDA backend; never run here (no GPU).
 *
 * NCCL sums in the order of its ring or tree, not in rank order: across GPUs the runtime's
 * bitwise guarantees hold only within tolerance (docs/runtime.md).
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "rt_int.h"

typedef struct nccl_group {
    rt_group g;
    ncclComm_t comm;
    rt_group *host; /* the MPI group of the same ranks */
} nccl_group;

static ncclComm_t comm_of(const rt_group *g) { return ((const nccl_group *)g->impl)->comm; }
static rt_group *host_of(const rt_group *g) { return ((const nccl_group *)g->impl)->host; }

static ap_status done(ncclResult_t r, const char *what, ap_err *err) {
    if (r != ncclSuccess)
        return ap_err_set(err, AP_ERR_CUDA, "%s: %s", what, ncclGetErrorString(r));
    cudaError_t e = cudaStreamSynchronize(0);
    if (e != cudaSuccess)
        return ap_err_set(err, AP_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
    return AP_OK;
}

static ncclRedOp_t redop(rt_redop op) { return op == RT_OP_MAX ? ncclMax : ncclSum; }

static ap_status n_reduce_scatter(rt_group *g, const rt_real *in, rt_real *out, int64_t chunk,
                                  rt_redop op, rt_real *ws, int64_t ws_elems, ap_err *err) {
    (void)ws, (void)ws_elems;
    return done(ncclReduceScatter(in, out, (size_t)chunk, ncclFloat, redop(op), comm_of(g), 0),
                "ncclReduceScatter", err);
}

static ap_status n_allgather(rt_group *g, rt_real *buf, int64_t chunk, ap_err *err) {
    /* in place: the send buffer is this rank's chunk of the receive buffer */
    return done(ncclAllGather(buf + (int64_t)g->rank * chunk, buf, (size_t)chunk, ncclFloat,
                              comm_of(g), 0),
                "ncclAllGather", err);
}

static ap_status n_allreduce(rt_group *g, rt_real *buf, int64_t n, rt_redop op, rt_real *ws,
                             int64_t ws_elems, ap_err *err) {
    (void)ws, (void)ws_elems;
    return done(ncclAllReduce(buf, buf, (size_t)n, ncclFloat, redop(op), comm_of(g), 0),
                "ncclAllReduce", err);
}

static ap_status n_send(rt_group *g, int dst, int tag, const void *buf, int64_t bytes,
                        ap_err *err) {
    return host_of(g)->ops->send(host_of(g), dst, tag, buf, bytes, err);
}
static ap_status n_recv(rt_group *g, int src, int tag, void *buf, int64_t bytes, ap_err *err) {
    return host_of(g)->ops->recv(host_of(g), src, tag, buf, bytes, err);
}
static ap_status n_bcast(rt_group *g, int root, void *buf, int64_t bytes, ap_err *err) {
    return host_of(g)->ops->bcast(host_of(g), root, buf, bytes, err);
}
static ap_status n_gatherv(rt_group *g, const void *buf, int64_t bytes, char **out,
                           int64_t *lens, ap_err *err) {
    return host_of(g)->ops->gatherv(host_of(g), buf, bytes, out, lens, err);
}
static ap_status n_barrier(rt_group *g, ap_err *err) {
    return host_of(g)->ops->barrier(host_of(g), err);
}
static ap_status n_pingpong(rt_group *g, int peer, int64_t bytes, int reps, double *seconds,
                            ap_err *err) {
    return host_of(g)->ops->pingpong(host_of(g), peer, bytes, reps, seconds, err);
}

static void n_free(rt_group *g) {
    if (!g) return;
    nccl_group *n = g->impl;
    ncclCommDestroy(n->comm);
    n->host->ops->free(n->host);
    free(n);
}

static const rt_group_ops nccl_ops = {
    .reduce_scatter = n_reduce_scatter,
    .allgather = n_allgather,
    .allreduce = n_allreduce,
    .send = n_send,
    .recv = n_recv,
    .bcast = n_bcast,
    .gatherv = n_gatherv,
    .barrier = n_barrier,
    .pingpong = n_pingpong,
    .free = n_free,
};

ap_status rt_nccl_group(rt_group *mpi, rt_group **out, ap_err *err) {
    *out = NULL;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (mpi->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return ap_err_set(err, AP_ERR_CUDA, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
    ap_status st = mpi->ops->bcast(mpi, 0, &id, (int64_t)sizeof id, err);
    if (st != AP_OK) return st;
    nccl_group *n = calloc(1, sizeof *n);
    if (!n) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    ncclResult_t r = ncclCommInitRank(&n->comm, mpi->size, id, mpi->rank);
    if (r != ncclSuccess) {
        free(n);
        return ap_err_set(err, AP_ERR_CUDA, "ncclCommInitRank: %s", ncclGetErrorString(r));
    }
    n->host = mpi;
    n->g.ops = &nccl_ops;
    n->g.size = mpi->size;
    n->g.rank = mpi->rank;
    n->g.impl = n;
    *out = &n->g;
    return AP_OK;
}
