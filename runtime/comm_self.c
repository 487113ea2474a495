/*
 * comm_self.c - a world of one process (ap_rt_comm_self, rt_int.h): every group has one member,
 * so reductions are identities, gathers copy, and there is no peer to send to. Tests run
 * single-rank sessions in-process with it, and the double-precision build (no MPI) uses it for
 * the finite-difference gradient check. Multi-rank worlds are Open MPI's (comm_mpi.c).
 */
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"

static ap_status self_reduce_scatter(rt_group *g, const rt_real *in, rt_real *out, int64_t chunk,
                                     rt_redop op, rt_real *ws, int64_t ws_elems, ap_err *err) {
    (void)g, (void)op, (void)ws, (void)ws_elems, (void)err;
    if (out != in && chunk > 0) memmove(out, in, (size_t)chunk * sizeof *out);
    return AP_OK;
}

static ap_status self_allgather(rt_group *g, rt_real *buf, int64_t chunk, ap_err *err) {
    (void)g, (void)buf, (void)chunk, (void)err;
    return AP_OK;
}

static ap_status self_allreduce(rt_group *g, rt_real *buf, int64_t n, rt_redop op, rt_real *ws,
                                int64_t ws_elems, ap_err *err) {
    (void)g, (void)buf, (void)n, (void)op, (void)ws, (void)ws_elems, (void)err;
    return AP_OK;
}

static ap_status self_send(rt_group *g, int dst, int tag, const void *buf, int64_t bytes,
                           ap_err *err) {
    (void)g, (void)tag, (void)buf, (void)bytes;
    return ap_err_set(err, AP_ERR_INTERNAL, "send to rank %d in a one-process world", dst);
}

static ap_status self_recv(rt_group *g, int src, int tag, void *buf, int64_t bytes,
                           ap_err *err) {
    (void)g, (void)tag, (void)buf, (void)bytes;
    return ap_err_set(err, AP_ERR_INTERNAL, "receive from rank %d in a one-process world", src);
}

static ap_status self_bcast(rt_group *g, int root, void *buf, int64_t bytes, ap_err *err) {
    (void)g, (void)root, (void)buf, (void)bytes, (void)err;
    return AP_OK;
}

static ap_status self_gatherv(rt_group *g, const void *buf, int64_t bytes, char **out,
                              int64_t *lens, ap_err *err) {
    (void)g;
    *out = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!*out) return ap_err_set(err, AP_ERR_NOMEM, "out of memory gathering %lld bytes",
                                 (long long)bytes);
    if (bytes > 0) memcpy(*out, buf, (size_t)bytes);
    lens[0] = bytes;
    return AP_OK;
}

static ap_status self_barrier(rt_group *g, ap_err *err) {
    (void)g, (void)err;
    return AP_OK;
}

static void self_free(rt_group *g) {
    if (g && g->impl) free(g);
}

static const rt_group_ops self_ops = {
    .reduce_scatter = self_reduce_scatter,
    .allgather = self_allgather,
    .allreduce = self_allreduce,
    .send = self_send,
    .recv = self_recv,
    .bcast = self_bcast,
    .gatherv = self_gatherv,
    .barrier = self_barrier,
    .free = self_free,
};

/* impl = NULL marks the static world group (never freed); split groups are malloc'd with impl
 * pointing at themselves. */
static rt_group self_world = {&self_ops, 1, 0, NULL};

static ap_status self_split(ap_rt_comm *c, int color, int key, rt_group **out, ap_err *err) {
    (void)c, (void)key;
    *out = NULL;
    if (color < 0) return AP_OK;
    rt_group *g = malloc(sizeof *g);
    if (!g) return ap_err_set(err, AP_ERR_NOMEM, "out of memory creating a group");
    *g = self_world;
    g->impl = g;
    *out = g;
    return AP_OK;
}

static ap_status self_attach(ap_rt_comm *c, void *pool, int64_t bytes, ap_err *err) {
    (void)c, (void)pool, (void)bytes, (void)err;
    return AP_OK;
}

static ap_rt_comm self_comm = {
    .world = &self_world,
    .split = self_split,
    .attach_pool = self_attach,
    .pool_overhead_bytes = 0,
    .wtime = ap_now_s,
    .name = "self",
};

ap_rt_comm *ap_rt_comm_self(void) { return &self_comm; }

int ap_rt_comm_rank(const ap_rt_comm *c) { return c->world->rank; }
int ap_rt_comm_size(const ap_rt_comm *c) { return c->world->size; }
