/*
 * gpubench_attn.c - fused attention through cuDNN from C (the only file that includes cudnn.h;
 * CUDA builds only): scaled dot-product attention forward and backward with the backend API's
 * SDPA operations (CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR / _BWD_, cuDNN >= 9.13, the
 * operation cudnn-frontend's "unified" SDPA node emits), bf16, over sequence length, heads,
 * KV heads and head dimension. The kernel cuDNN runs is what Transformer Engine and PyTorch's
 * cuDNN SDPA backend run for the same shapes.
 *
 * Steps for each direction: tensor descriptors (layout BSHD, as Megatron-LM and TE keep
 * Q, K, V: strides {s h d, d, h d, 1} for dims {b, h, s, d}; statistics fp32 {b, h, s, 1}; the
 * softmax scale 1/sqrt(d) passed by value), the operation, an operation graph, cuDNN's first
 * heuristic engine configuration (mode A), an execution plan, its workspace, a variant pack,
 * then cudnnBackendExecute timed with events (gpubench.c).
 *
 * What it does not do: causal or sliding-window masks. The backend SDPA operation of the cuDNN
 * shipped here (9.19) takes a mask only as a block mask or through a score-modifier subgraph
 * that needs cuDNN 9.21; causal rows, and the FlashAttention and memory-efficient kernels, come
 * from profiler/scripts/attn_bench.py under `autoplan profile attach`. A shape no engine
 * supports is skipped with a note, never estimated. The backward operation did not build a
 * graph with cuDNN 9.19 on an H200 (CUDNN_STATUS_BAD_PARAM in buildDAG, with fresh or shared
 * descriptors; public reports put its engines on Blackwell or cuDNN >= 9.21): the forward rows
 * are then kept and the backward noted once.
 */
#include "gpubench_int.h"

#include <cudnn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#define DESC_MAX 24

/* UIDs of the tensors in the variant packs */
enum { U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_DQ, U_DK, U_DV, U_DO };

typedef struct {
    cudnnHandle_t h;
    cudnnBackendDescriptor_t d[DESC_MAX]; /* everything created, destroyed at the end */
    int nd;
    char where[96];
} attn_ctx;

static ap_status dnn_fail(cudnnStatus_t s, const char *doing, ap_err *err) {
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    return ap_err_set(err, AP_ERR_CUDA, "cuDNN: %s: %s%s%s", doing, cudnnGetErrorString(s),
                      last[0] ? ": " : "", last);
}

#define TRY(call, doing)                                                                      \
    do {                                                                                      \
        cudnnStatus_t s_ = (call);                                                            \
        if (s_ != CUDNN_STATUS_SUCCESS) return dnn_fail(s_, doing, err);                      \
    } while (0)

static ap_status make(attn_ctx *c, cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *out,
                      ap_err *err) {
    if (c->nd >= DESC_MAX) return ap_err_set(err, AP_ERR_INTERNAL, "too many cuDNN descriptors");
    TRY(cudnnBackendCreateDescriptor(t, out), "creating a descriptor");
    c->d[c->nd++] = *out;
    return AP_OK;
}

static void release(attn_ctx *c) {
    while (c->nd > 0) cudnnBackendDestroyDescriptor(c->d[--c->nd]);
}

/* A finalized tensor descriptor. */
static ap_status tensor(attn_ctx *c, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                        const int64_t strides[4], int by_value, cudnnBackendDescriptor_t *out,
                        ap_err *err) {
    ap_status st = make(c, CUDNN_BACKEND_TENSOR_DESCRIPTOR, out, err);
    if (st != AP_OK) return st;
    int64_t align = 16;
    bool value = by_value != 0;
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt),
        "tensor data type");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims),
        "tensor dimensions");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides),
        "tensor strides");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
        "tensor id");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align),
        "tensor alignment");
    if (by_value)
        TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &value),
            "tensor by value");
    TRY(cudnnBackendFinalize(*out), "finalizing a tensor");
    return AP_OK;
}

static ap_status set_desc(cudnnBackendDescriptor_t op, cudnnBackendAttributeName_t a,
                          cudnnBackendDescriptor_t v, ap_err *err) {
    TRY(cudnnBackendSetAttribute(op, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v), "an SDPA operand");
    return AP_OK;
}

/* Graph, heuristic engine configuration and execution plan for one finalized operation. */
static ap_status plan_for(attn_ctx *c, cudnnBackendDescriptor_t op, cudnnBackendDescriptor_t *plan,
                          int64_t *ws, ap_err *err) {
    cudnnBackendDescriptor_t graph, heur, cfg;
    ap_status st = make(c, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph, err);
    if (st != AP_OK) return st;
    TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &op), "graph operations");
    TRY(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->h),
        "graph handle");
    TRY(cudnnBackendFinalize(graph), "finalizing the operation graph");
    if ((st = make(c, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur, err)) != AP_OK) return st;
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph), "heuristic graph");
    TRY(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode),
        "heuristic mode");
    TRY(cudnnBackendFinalize(heur), "finalizing the heuristic");
    if ((st = make(c, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg, err)) != AP_OK) return st;
    int64_t got = 0;
    TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &got, &cfg), "no engine for this attention shape");
    if (got < 1) return ap_err_set(err, AP_ERR_CUDA, "cuDNN: no engine for this attention shape");
    if ((st = make(c, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan, err)) != AP_OK) return st;
    TRY(cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->h),
        "plan handle");
    TRY(cudnnBackendSetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg), "plan engine");
    TRY(cudnnBackendFinalize(*plan), "building the execution plan");
    TRY(cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                                 1, &got, ws), "plan workspace");
    return AP_OK;
}

typedef struct {
    int64_t b, s, h, kvh, d;
    void *q, *k, *v, *o, *stats, *dq, *dk, *dv, *dout, *ws;
    float scale;
    char no_bwd[256]; /* why the backward does not build here ("" while it does) */
} attn_bufs;

typedef struct {
    ap_gb *g;
    attn_ctx *c;
    cudnnBackendDescriptor_t plan, pack;
} attn_run;

static int run_plan(void *p, ap_err *err) {
    attn_run *r = p;
    cudnnStatus_t s = cudnnBackendExecute(r->c->h, r->plan, r->pack);
    if (s != CUDNN_STATUS_SUCCESS) {
        dnn_fail(s, "executing attention", err);
        return -1;
    }
    return 0;
}

static ap_status pack(attn_ctx *c, const int64_t *uids, void **ptrs, int n, void *ws,
                      cudnnBackendDescriptor_t *out, ap_err *err) {
    ap_status st = make(c, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, out, err);
    if (st != AP_OK) return st;
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids),
        "variant ids");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n,
                                 ptrs), "variant pointers");
    TRY(cudnnBackendSetAttribute(*out, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws),
        "variant workspace");
    TRY(cudnnBackendFinalize(*out), "finalizing the variant pack");
    return AP_OK;
}

/* Descriptors of Q, K, V, O (and gradients) for one shape: BSHD layout. */
static void dims_of(const attn_bufs *a, int64_t heads, int64_t dims[4], int64_t strides[4]) {
    dims[0] = a->b, dims[1] = heads, dims[2] = a->s, dims[3] = a->d;
    strides[0] = a->s * heads * a->d, strides[1] = a->d, strides[2] = heads * a->d, strides[3] = 1;
}

static ap_status one_shape(ap_gb *g, cudnnHandle_t h, attn_bufs *a, ap_err *err) {
    attn_ctx c = {h, {0}, 0, ""};
    int64_t dq[4], sq[4], dkv[4], skv[4], dst[4], sst[4], d1[4] = {1, 1, 1, 1};
    dims_of(a, a->h, dq, sq);
    dims_of(a, a->kvh, dkv, skv);
    dst[0] = a->b, dst[1] = a->h, dst[2] = a->s, dst[3] = 1;
    sst[0] = a->h * a->s, sst[1] = a->s, sst[2] = 1, sst[3] = 1;
    cudnnBackendDescriptor_t tq, tk, tv, to, tstats, tscale, fwd, plan_f = NULL, pack_f = NULL;
    ap_status st = AP_OK;
#define T(uid, dt, d, s, byv, out) if (st == AP_OK) st = tensor(&c, uid, dt, d, s, byv, out, err)
    T(U_Q, CUDNN_DATA_BFLOAT16, dq, sq, 0, &tq);
    T(U_K, CUDNN_DATA_BFLOAT16, dkv, skv, 0, &tk);
    T(U_V, CUDNN_DATA_BFLOAT16, dkv, skv, 0, &tv);
    T(U_O, CUDNN_DATA_BFLOAT16, dq, sq, 0, &to);
    T(U_STATS, CUDNN_DATA_FLOAT, dst, sst, 0, &tstats);
    T(U_SCALE, CUDNN_DATA_FLOAT, d1, d1, 1, &tscale);
    if (st == AP_OK) st = make(&c, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, &fwd, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, tq, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, tk, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, tv, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, to, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, tstats, err);
    if (st == AP_OK) st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, tscale, err);
    if (st == AP_OK) {
        cudnnStatus_t s = cudnnBackendFinalize(fwd);
        if (s != CUDNN_STATUS_SUCCESS) st = dnn_fail(s, "finalizing the SDPA forward operation", err);
    }
    int64_t ws_f = 0, ws_b = 0;
    if (st == AP_OK) st = plan_for(&c, fwd, &plan_f, &ws_f, err);
    int64_t uids_f[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE};
    void *ptrs_f[] = {a->q, a->k, a->v, a->o, a->stats, &a->scale};
    if (st == AP_OK && ws_f > (int64_t)(256 << 20))
        st = ap_err_set(err, AP_ERR_CUDA, "cuDNN asks for a %lld-byte workspace", (long long)ws_f);
    if (st == AP_OK) st = pack(&c, uids_f, ptrs_f, 6, a->ws, &pack_f, err);
    char shape[128], src[192];
    snprintf(shape, sizeof shape, "impl=cudnn,b=%lld,s=%lld,h=%lld,kvh=%lld,d=%lld,causal=0,window=0",
             (long long)a->b, (long long)a->s, (long long)a->h, (long long)a->kvh, (long long)a->d);
    snprintf(src, sizeof src, "autoplan %s profile bench (cuDNN %d backend SDPA forward, bf16, "
             "BSHD, heuristic engine)", AP_VERSION, (int)cudnnGetVersion());
    ap_bench_stats bs;
    attn_run run = {g, &c, plan_f, pack_f};
    if (st == AP_OK) st = ap_gb_time(g, run_plan, &run, &bs, err);
    if (st == AP_OK) st = ap_gb_row(g, "attn_fwd", shape, "bf16", &bs, 0, src, err);
    double fwd_s = st == AP_OK ? bs.median_s : 0;
    if (st != AP_OK || a->no_bwd[0]) {
        release(&c);
        return st;
    }
    /* backward: the forward just ran, so O and the statistics hold real values */
    cudnnBackendDescriptor_t tdq, tdk, tdv, tdo, bwd, plan_b = NULL, pack_b = NULL;
    T(U_DQ, CUDNN_DATA_BFLOAT16, dq, sq, 0, &tdq);
    T(U_DK, CUDNN_DATA_BFLOAT16, dkv, skv, 0, &tdk);
    T(U_DV, CUDNN_DATA_BFLOAT16, dkv, skv, 0, &tdv);
    T(U_DO, CUDNN_DATA_BFLOAT16, dq, sq, 0, &tdo);
#undef T
    if (st == AP_OK) st = make(&c, CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, &bwd, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, tq, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, tk, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, tv, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, to, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, tstats, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, tscale, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, tdq, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, tdk, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, tdv, err);
    if (st == AP_OK) st = set_desc(bwd, CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, tdo, err);
    if (st == AP_OK) {
        cudnnStatus_t s = cudnnBackendFinalize(bwd);
        if (s != CUDNN_STATUS_SUCCESS) st = dnn_fail(s, "finalizing the SDPA backward operation", err);
    }
    if (st == AP_OK) st = plan_for(&c, bwd, &plan_b, &ws_b, err);
    if (st == AP_ERR_CUDA && strstr(err->msg, "cuDNN")) {
        /* cuDNN 9.19's backend SDPA backward does not build a graph on an H200 (BAD_PARAM in
           buildDAG, 2026-12-04); the forward rows stand, the backward comes from attn_bench.py */
        snprintf(a->no_bwd, sizeof a->no_bwd, "%.200s", err->msg);
        release(&c);
        return AP_OK;
    }
    if (st == AP_OK && ws_b > (int64_t)(256 << 20))
        st = ap_err_set(err, AP_ERR_CUDA, "cuDNN asks for a %lld-byte workspace", (long long)ws_b);
    int64_t uids_b[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_DQ, U_DK, U_DV, U_DO};
    void *ptrs_b[] = {a->q, a->k, a->v, a->o, a->stats, &a->scale, a->dq, a->dk, a->dv, a->dout};
    if (st == AP_OK) st = pack(&c, uids_b, ptrs_b, 10, a->ws, &pack_b, err);
    attn_run runb = {g, &c, plan_b, pack_b};
    if (st == AP_OK) st = ap_gb_time(g, run_plan, &runb, &bs, err);
    snprintf(src, sizeof src, "autoplan %s profile bench (cuDNN %d backend SDPA backward, bf16, "
             "BSHD, heuristic engine)", AP_VERSION, (int)cudnnGetVersion());
    if (st == AP_OK) st = ap_gb_row(g, "attn_bwd", shape, "bf16", &bs, 0, src, err);
    if (st == AP_OK)
        ap_gb_note(g, "attention cuDNN s=%lld h=%lld kvh=%lld d=%lld: fwd %.3f ms, bwd %.3f ms",
                   (long long)a->s, (long long)a->h, (long long)a->kvh, (long long)a->d,
                   fwd_s * 1e3, bs.median_s * 1e3);
    release(&c);
    return st;
}

ap_status ap_gb_attn(ap_gb *g, ap_err *err) {
    if (cudnnGetVersion() < 91300) {
        ap_gb_note(g, "attention (cuDNN): needs cuDNN >= 9.13 for the backend SDPA operations, "
                   "this is %d; use profiler/scripts/attn_bench.py under profile attach",
                   (int)cudnnGetVersion());
        return AP_OK;
    }
    cudnnHandle_t h = NULL;
    cudnnStatus_t s = cudnnCreate(&h);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(s, "creating a handle", err);
    cudnnSetStream(h, g->stream);
    double before = ap_gb_free_bytes();
    /* sequence x (heads, KV heads) x head dim; tokens per call b s = 16k at most */
    static const int64_t seqs[] = {1024, 2048, 4096, 8192, 16384};
    static const int64_t hd[][3] = {{32, 32, 128}, {32, 8, 128}, {16, 16, 64}};
    int nseq = g->o->quick ? 2 : 5, nhd = g->o->quick ? 1 : 3;
    attn_bufs a;
    memset(&a, 0, sizeof a);
    size_t elems = (size_t)16384 * 32 * 128; /* the largest Q: 1 x 16k x 32 x 128 */
    void **bufs[] = {&a.q, &a.k, &a.v, &a.o, &a.dq, &a.dk, &a.dv, &a.dout};
    int rc = 0;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && !rc; i++)
        rc = (int)cudaMalloc(bufs[i], elems * 2);
    if (!rc) rc = (int)cudaMalloc(&a.stats, (size_t)16384 * 32 * 4);
    if (!rc) rc = (int)cudaMalloc(&a.ws, (size_t)256 << 20);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && !rc; i++)
        rc = ap_cu_fill(*bufs[i], elems, AP_FILL_BF16, 11 + (uint32_t)i, g->stream);
    ap_status st = rc ? ap_gb_cuda(rc, "allocating attention buffers", err) : AP_OK;
    size_t done = 0, skipped = 0;
    for (int i = 0; st == AP_OK && i < nseq; i++)
        for (int j = 0; st == AP_OK && j < nhd; j++) {
            a.b = 16384 / seqs[i];
            a.s = seqs[i];
            a.h = hd[j][0], a.kvh = hd[j][1], a.d = hd[j][2];
            a.scale = (float)(1.0 / sqrt((double)a.d));
            ap_err e;
            ap_status r = one_shape(g, h, &a, &e);
            if (r == AP_ERR_CUDA && done == 0 && skipped == 0 && strstr(e.msg, "cuDNN")) {
                /* the first shape already fails: this cuDNN / GPU has no such engine */
                ap_gb_note(g, "attention (cuDNN): %s; skipped (profiler/scripts/attn_bench.py under "
                           "profile attach measures attention instead)", e.msg);
                skipped = 1;
                goto out;
            }
            if (r == AP_ERR_CUDA && strstr(e.msg, "cuDNN")) {
                ap_gb_note(g, "attention (cuDNN) s=%lld d=%lld skipped: %s", (long long)a.s,
                           (long long)a.d, e.msg);
                skipped++;
                continue;
            }
            if (r != AP_OK) {
                *err = e;
                st = r;
            }
            done++;
        }
    if (st == AP_OK && a.no_bwd[0])
        ap_gb_note(g, "attention (cuDNN): forward only, the backward does not build here (%s); "
                   "backward rows come from profiler/scripts/attn_bench.py under profile attach",
                   a.no_bwd);
    if (st == AP_OK && ap_gb_wants(g, "devmem") && done) {
        double after = ap_gb_free_bytes();
        double bufs_bytes = 8.0 * (double)elems * 2 + 16384.0 * 32 * 4 + (double)(256 << 20);
        double taken = before - after - bufs_bytes;
        if (taken > 0) {
            ap_bench_stats one = {0, 0, 0, 0, 1};
            char src[192];
            snprintf(src, sizeof src, "autoplan %s profile bench (cudaMemGetInfo around cuDNN "
                     "handle, plans and kernels, less the benchmark's own buffers)", AP_VERSION);
            st = ap_gb_row(g, "device_mem", "kind=cudnn_workspace", "none", &one, taken, src, err);
        }
    }
out:
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(*bufs[i]);
    cudaFree(a.stats);
    cudaFree(a.ws);
    cudnnDestroy(h);
    return st;
}
