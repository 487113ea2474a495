/*
 * comm_mpi.c - the runtime's ranks over MPI (rt_int.h: ap_rt_comm, rt_group): the only file of
 * autoplan that includes mpi.h. It is linked into the `autoplan-rank` worker only, never into
 * the `autoplan` binary.
 *
 * Collectives are built here from point-to-point messages so that every sum has a fixed order:
 * the owner of a chunk adds the contributions of ranks 0, 1, ..., P-1 in that order, element by
 * element, whatever the chunking and segmenting. An all-reduce (ZeRO-0) and a reduce-scatter
 * (ZeRO 1-3) of the same gradients therefore give bitwise the same sums, which the runtime's
 * tests rely on; MPI_Allreduce makes no such promise (its algorithm depends on the message
 * size). Each segment of a reduction posts non-blocking sends of its pieces to their owners and
 * then receives its own pieces in rank order into a fixed workspace (the runtime's collective
 * buffer), so no rank waits on another's receive order. All-gathers post every send and receive
 * at once. Pipeline transfers are buffered sends (MPI_Bsend into the attached pool) and blocking
 * receives.
 *
 * Every communicator returns errors to the caller (MPI_ERRORS_RETURN) and the message names the
 * MPI call; the worker then aborts the whole job (ap_rt_mpi_abort).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "rt_int.h"

#ifdef AP_RT_DOUBLE
#define MPI_REAL_T MPI_DOUBLE
#else
#define MPI_REAL_T MPI_FLOAT
#endif

#define TAG_RS 101
#define TAG_AG 102
#define TAG_GATHER 103
#define TAG_PING 104
/* largest piece of one message, in elements or bytes, so counts stay within int */
#define PIECE (1 << 26)

static ap_status mpi_fail(int rc, const char *call, ap_err *err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
    msg[len < (int)sizeof msg ? len : (int)sizeof msg - 1] = '\0';
    return ap_err_set(err, AP_ERR_IO, "%s: %s", call, msg);
}

#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) return mpi_fail(rc_, #call, err);                                  \
    } while (0)

typedef struct mpi_group {
    rt_group g;
    MPI_Comm comm;
} mpi_group;

static MPI_Comm comm_of(const rt_group *g) { return ((const mpi_group *)g->impl)->comm; }

/* ---- reductions in rank order ------------------------------------------------------------------ */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Owner j holds elements [j*stride, j*stride + len_j) of the n-element vector, len_j =
 * clamp(n - j*stride, 0, stride). Each owner receives the rank-order reduction of its range into
 * out (out[0 .. len_me)). */
static ap_status reduce_to_owners(rt_group *g, const rt_real *in, rt_real *out, int64_t n,
                                  int64_t stride, rt_redop op, rt_real *ws, int64_t ws_elems,
                                  ap_err *err) {
    MPI_Comm comm = comm_of(g);
    int P = g->size, me = g->rank;
    int64_t seg = ws_elems / 2;
    if (seg < 1) return ap_err_set(err, AP_ERR_INTERNAL, "reduction without a workspace");
    rt_real *acc = ws, *rbuf = ws + seg;
    MPI_Request *req = malloc((size_t)P * sizeof *req);
    if (!req) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    int64_t my_len = clamp64(n - (int64_t)me * stride, 0, stride);
    ap_status st = AP_OK;
    for (int64_t off = 0; off < stride && st == AP_OK; off += seg) {
        int nreq = 0;
        for (int j = 0; j < P && st == AP_OK; j++) {
            if (j == me) continue;
            int64_t len = clamp64(clamp64(n - (int64_t)j * stride, 0, stride) - off, 0, seg);
            if (len == 0) continue;
            int rc = MPI_Isend(in + (int64_t)j * stride + off, (int)len, MPI_REAL_T, j, TAG_RS,
                               comm, &req[nreq++]);
            if (rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Isend", err);
        }
        int64_t len = clamp64(my_len - off, 0, seg);
        for (int r = 0; r < P && st == AP_OK && len > 0; r++) {
            const rt_real *src = in + (int64_t)me * stride + off;
            if (r != me) {
                int rc = MPI_Recv(rbuf, (int)len, MPI_REAL_T, r, TAG_RS, comm, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) {
                    st = mpi_fail(rc, "MPI_Recv", err);
                    break;
                }
                src = rbuf;
            }
            if (r == 0) {
                memcpy(acc, src, (size_t)len * sizeof *acc);
            } else if (op == RT_OP_SUM) {
                for (int64_t i = 0; i < len; i++) acc[i] += src[i];
            } else {
                for (int64_t i = 0; i < len; i++)
                    if (src[i] > acc[i]) acc[i] = src[i];
            }
        }
        int rc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        if (st == AP_OK && rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Waitall", err);
        if (st == AP_OK && len > 0) memcpy(out + off, acc, (size_t)len * sizeof *out);
    }
    free(req);
    return st;
}

/* Everyone's range [j*stride, j*stride + len_j) of buf to everyone, in place. */
static ap_status gather_from_owners(rt_group *g, rt_real *buf, int64_t n, int64_t stride,
                                    ap_err *err) {
    MPI_Comm comm = comm_of(g);
    int P = g->size, me = g->rank;
    MPI_Request *req = malloc((size_t)(2 * P) * sizeof *req);
    if (!req) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    ap_status st = AP_OK;
    for (int64_t off = 0; off < stride && st == AP_OK; off += PIECE) {
        /* receives first: a message that finds its receive posted skips Open MPI's unexpected
           queue (posting the sends first costs ~0.6 ms per exchange on the shared-memory
           transport for rendezvous-sized messages) */
        int nreq = 0;
        for (int j = 0; j < P && st == AP_OK; j++) {
            int64_t theirs = clamp64(clamp64(n - (int64_t)j * stride, 0, stride) - off, 0, PIECE);
            if (j == me || theirs == 0) continue;
            int rc = MPI_Irecv(buf + (int64_t)j * stride + off, (int)theirs, MPI_REAL_T, j, TAG_AG,
                               comm, &req[nreq++]);
            if (rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Irecv", err);
        }
        int64_t mine = clamp64(clamp64(n - (int64_t)me * stride, 0, stride) - off, 0, PIECE);
        for (int j = 0; j < P && st == AP_OK && mine > 0; j++) {
            if (j == me) continue;
            int rc = MPI_Isend(buf + (int64_t)me * stride + off, (int)mine, MPI_REAL_T, j, TAG_AG,
                               comm, &req[nreq++]);
            if (rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Isend", err);
        }
        int rc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        if (st == AP_OK && rc != MPI_SUCCESS) st = mpi_fail(rc, "MPI_Waitall", err);
    }
    free(req);
    return st;
}

static ap_status mpi_reduce_scatter(rt_group *g, const rt_real *in, rt_real *out, int64_t chunk,
                                    rt_redop op, rt_real *ws, int64_t ws_elems, ap_err *err) {
    if (g->size == 1) {
        if (out != in) memmove(out, in, (size_t)chunk * sizeof *out);
        return AP_OK;
    }
    return reduce_to_owners(g, in, out, chunk * g->size, chunk, op, ws, ws_elems, err);
}

static ap_status mpi_allgather(rt_group *g, rt_real *buf, int64_t chunk, ap_err *err) {
    if (g->size == 1) return AP_OK;
    return gather_from_owners(g, buf, chunk * g->size, chunk, err);
}

static ap_status mpi_allreduce(rt_group *g, rt_real *buf, int64_t n, rt_redop op, rt_real *ws,
                               int64_t ws_elems, ap_err *err) {
    if (g->size == 1 || n <= 0) return AP_OK;
    int64_t stride = (n + g->size - 1) / g->size;
    ap_status st = reduce_to_owners(g, buf, buf + (int64_t)g->rank * stride, n, stride, op, ws,
                                    ws_elems, err);
    return st == AP_OK ? gather_from_owners(g, buf, n, stride, err) : st;
}

/* ---- point to point ----------------------------------------------------------------------------- */

static ap_status mpi_send(rt_group *g, int dst, int tag, const void *buf, int64_t bytes,
                          ap_err *err) {
    if (bytes > INT_MAX) return ap_err_set(err, AP_ERR_INPUT, "a %lld-byte message", (long long)bytes);
    MPI_TRY(MPI_Bsend(buf, (int)bytes, MPI_BYTE, dst, tag, comm_of(g)));
    return AP_OK;
}

static ap_status mpi_recv(rt_group *g, int src, int tag, void *buf, int64_t bytes, ap_err *err) {
    if (bytes > INT_MAX) return ap_err_set(err, AP_ERR_INPUT, "a %lld-byte message", (long long)bytes);
    MPI_Status status;
    MPI_TRY(MPI_Recv(buf, (int)bytes, MPI_BYTE, src, tag, comm_of(g), &status));
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (got != (int)bytes)
        return ap_err_set(err, AP_ERR_INTERNAL, "received %d bytes from rank %d, expected %lld",
                          got, src, (long long)bytes);
    return AP_OK;
}

static ap_status mpi_bcast(rt_group *g, int root, void *buf, int64_t bytes, ap_err *err) {
    for (int64_t off = 0; off < bytes; off += PIECE) {
        int64_t len = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_TRY(MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, comm_of(g)));
    }
    return AP_OK;
}

static ap_status send_big(MPI_Comm comm, int dst, const char *buf, int64_t bytes, ap_err *err) {
    for (int64_t off = 0; off < bytes; off += PIECE) {
        int64_t len = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_TRY(MPI_Send(buf + off, (int)len, MPI_BYTE, dst, TAG_GATHER, comm));
    }
    return AP_OK;
}

static ap_status recv_big(MPI_Comm comm, int src, char *buf, int64_t bytes, ap_err *err) {
    for (int64_t off = 0; off < bytes; off += PIECE) {
        int64_t len = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_TRY(MPI_Recv(buf + off, (int)len, MPI_BYTE, src, TAG_GATHER, comm, MPI_STATUS_IGNORE));
    }
    return AP_OK;
}

static ap_status mpi_gatherv(rt_group *g, const void *buf, int64_t bytes, char **out,
                             int64_t *lens, ap_err *err) {
    MPI_Comm comm = comm_of(g);
    *out = NULL;
    long long mine = bytes;
    long long *all = malloc((size_t)g->size * sizeof *all);
    if (!all) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    int rc = MPI_Gather(&mine, 1, MPI_LONG_LONG, all, 1, MPI_LONG_LONG, 0, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(rc, "MPI_Gather", err);
    }
    ap_status st = AP_OK;
    if (g->rank == 0) {
        int64_t total = 0;
        for (int r = 0; r < g->size; r++) {
            lens[r] = all[r];
            total += all[r];
        }
        *out = malloc((size_t)(total > 0 ? total : 1));
        if (!*out) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory gathering %lld bytes",
                                   (long long)total);
        int64_t off = 0;
        for (int r = 0; r < g->size; r++) {
            if (st == AP_OK && r == 0 && bytes > 0) memcpy(*out, buf, (size_t)bytes);
            else if (st == AP_OK && r > 0) st = recv_big(comm, r, *out + off, lens[r], err);
            off += lens[r];
        }
    } else {
        st = send_big(comm, 0, buf, bytes, err);
    }
    free(all);
    return st;
}

static ap_status mpi_barrier(rt_group *g, ap_err *err) {
    MPI_TRY(MPI_Barrier(comm_of(g)));
    return AP_OK;
}

static ap_status mpi_pingpong(rt_group *g, int peer, int64_t bytes, int reps, double *seconds,
                              ap_err *err) {
    *seconds = 0;
    if (g->rank != 0 && g->rank != peer) return AP_OK;
    char *buf = calloc((size_t)(bytes > 0 ? bytes : 1), 1);
    if (!buf) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    MPI_Comm comm = comm_of(g);
    int rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps && rc == MPI_SUCCESS; i++) {
        if (g->rank == 0) {
            rc = MPI_Send(buf, (int)bytes, MPI_BYTE, peer, TAG_PING, comm);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, TAG_PING, comm, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, TAG_PING, comm, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = MPI_Send(buf, (int)bytes, MPI_BYTE, 0, TAG_PING, comm);
        }
    }
    if (g->rank == 0) *seconds = MPI_Wtime() - t0;
    free(buf);
    return rc == MPI_SUCCESS ? AP_OK : mpi_fail(rc, "ping-pong", err);
}

static void mpi_group_free(rt_group *g) {
    if (!g) return;
    mpi_group *m = g->impl;
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    free(m);
}

static const rt_group_ops mpi_ops = {
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .allreduce = mpi_allreduce,
    .send = mpi_send,
    .recv = mpi_recv,
    .bcast = mpi_bcast,
    .gatherv = mpi_gatherv,
    .barrier = mpi_barrier,
    .pingpong = mpi_pingpong,
    .free = mpi_group_free,
};

static ap_status wrap(MPI_Comm comm, rt_group **out, ap_err *err) {
    mpi_group *m = calloc(1, sizeof *m);
    if (!m) return ap_err_set(err, AP_ERR_NOMEM, "out of memory");
    m->comm = comm;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_size(comm, &m->g.size);
    MPI_Comm_rank(comm, &m->g.rank);
    m->g.ops = &mpi_ops;
    m->g.impl = m;
    *out = &m->g;
    return AP_OK;
}

/* ---- the world ---------------------------------------------------------------------------------- */

static ap_status mpi_split(ap_rt_comm *c, int color, int key, rt_group **out, ap_err *err) {
    *out = NULL;
    MPI_Comm nc = MPI_COMM_NULL;
    MPI_TRY(MPI_Comm_split(comm_of(c->world), color < 0 ? MPI_UNDEFINED : color, key, &nc));
    if (nc == MPI_COMM_NULL) return AP_OK;
    return wrap(nc, out, err);
}

static ap_status mpi_attach(ap_rt_comm *c, void *pool, int64_t bytes, ap_err *err) {
    (void)c;
    if (!pool) {
        void *addr;
        int size;
        /* returns once every message buffered in the pool has been transmitted */
        MPI_TRY(MPI_Buffer_detach(&addr, &size));
        return AP_OK;
    }
    if (bytes > INT_MAX)
        return ap_err_set(err, AP_ERR_INPUT, "a %lld-byte send pool exceeds MPI's int sizes",
                          (long long)bytes);
    MPI_TRY(MPI_Buffer_attach(pool, (int)bytes));
    return AP_OK;
}

static double mpi_wtime(void) { return MPI_Wtime(); }

static ap_rt_comm mpi_world;

ap_status ap_rt_mpi_init(int *argc, char ***argv, ap_rt_comm **out, ap_err *err) {
    *out = NULL;
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) return ap_err_set(err, AP_ERR_IO, "MPI_Init failed (error %d)", rc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (MPI_BSEND_OVERHEAD > RT_POOL_SLOT_OVERHEAD_BYTES)
        return ap_err_set(err, AP_ERR_INTERNAL, "MPI_BSEND_OVERHEAD %d exceeds the runtime's %d",
                          (int)MPI_BSEND_OVERHEAD, RT_POOL_SLOT_OVERHEAD_BYTES);
    MPI_Comm dup;
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    rt_group *w = NULL;
    ap_status st = wrap(dup, &w, err);
    if (st != AP_OK) return st;
    mpi_world.world = w;
    mpi_world.split = mpi_split;
    mpi_world.attach_pool = mpi_attach;
    mpi_world.pool_overhead_bytes = MPI_BSEND_OVERHEAD;
    mpi_world.wtime = mpi_wtime;
    mpi_world.name = "mpi";
    *out = &mpi_world;
    return AP_OK;
}

int ap_rt_mpi_tag_ub(void) {
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    return flag && ub ? *ub : 32767;
}

void ap_rt_mpi_finalize(ap_rt_comm *c) {
    if (c && c->world) {
        mpi_group_free(c->world);
        c->world = NULL;
    }
    MPI_Finalize();
}

void ap_rt_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
