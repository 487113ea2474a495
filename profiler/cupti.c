/*
 * cupti.c - autoplan's only door to CUPTI (profiler/activity.h): the Activity API, nothing
 * else (no counters, no range profiler: no administrator rights needed).
 *
 * Structure:
 *  - the version check and one line per CUPTI error;
 *  - the decoder: cuptiActivityGetNextRecord walks a buffer and every record is converted at
 *    once into an ap_trace_rec (CONCURRENT_KERNEL, never KERNEL, which serialises kernels;
 *    MEMCPY, MEMCPY2, MEMSET, MEMORY2, MEMORY_POOL, RUNTIME/DRIVER, MARKER, OVERHEAD), so no
 *    CUPTI layout escapes this file; and its inverse, the encoder, for hand-built test buffers;
 *  - tracing: buffer request/complete callbacks (AP_CUPTI_BUFFER_BYTES each), the dropped
 *    count per buffer, start (claiming the one CUPTI subscriber) and stop (flush before
 *    disabling, flush after);
 *  - the NVTX injection entry point, forwarded to the libcupti this library is bound to;
 *  - interposers of cuptiSubscribe and cuptiActivityRegisterCallbacks: while autoplan traces,
 *    a program starting its own CUPTI profiler (torch.profiler / Kineto, Nsight) would take the
 *    buffers away silently; the call is refused and remembered so attach can say so. Our own
 *    calls go to the real functions of the libcupti copy they are bound to.
 *
 * The record layouts are those of the CUPTI this file was compiled against (CUDA 13:
 * CUpti_ActivityKernel10, Memcpy6, MemcpyPtoP4, Memset4, Memory4, MemoryPool3, API, Marker2,
 * Overhead3); ap_cupti_start refuses a runtime CUPTI of another version.
 *
 * What it does not do: interpret records (attrib.c) or write files (inject.c, trace.c).
 */
#define _GNU_SOURCE 1
#include "activity.h"

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- versions and errors -------------------------------------------------------------------- */

uint32_t ap_cupti_built_version(void) { return CUPTI_API_VERSION; }

ap_status ap_cupti_runtime_version(uint32_t *v, ap_err *err) {
    *v = 0;
    CUptiResult r = cuptiGetVersion(v);
    return r == CUPTI_SUCCESS ? AP_OK : ap_cupti_error(r, "reading the CUPTI version", err);
}

ap_status ap_cupti_version_check(uint32_t built, uint32_t runtime, ap_err *err) {
    if (built == runtime) return AP_OK;
    return ap_err_set(err, AP_ERR_CUDA, "CUPTI version mismatch: autoplan was built against CUPTI "
                      "API version %u but libcupti loaded at run time is version %u; activity "
                      "record layouts differ between versions, so autoplan refuses to read them "
                      "(rebuild autoplan against this CUDA toolkit, or put the toolkit's libcupti "
                      "first in LD_LIBRARY_PATH)", built, runtime);
}

ap_status ap_cupti_error(int result, const char *doing, ap_err *err) {
    const char *why;
    switch ((CUptiResult)result) {
    case CUPTI_ERROR_INVALID_DEVICE:
        why = "no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
        break;
    case CUPTI_ERROR_NOT_INITIALIZED:
        why = "the CUDA driver could not be initialised (is the NVIDIA driver loaded?)";
        break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
        why = "insufficient privileges: the driver restricts profiling to administrators "
              "(NVreg_RestrictProfilingToAdminUsers=1); run as root or ask the administrator "
              "to allow profiling (https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
        break;
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
        why = "the device is a MIG instance, which this CUPTI feature does not support";
        break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        why = "another CUPTI subscriber is already attached (Nsight Systems, Nsight Compute, "
              "torch.profiler or another tool): only one can exist; run without it";
        break;
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
        why = "the device is virtualised (vGPU), which CUPTI does not trace";
        break;
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
        why = "this CUPTI feature is not supported under WSL";
        break;
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
        why = "the device runs in confidential-computing mode, where CUPTI cannot trace";
        break;
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_SUPPORTED:
        why = "not supported on this device or driver";
        break;
    case CUPTI_ERROR_NOT_COMPATIBLE:
        why = "the CUPTI library is not compatible with the installed driver (a driver older "
              "than the toolkit)";
        break;
    case CUPTI_ERROR_OUT_OF_MEMORY:
        why = "out of memory";
        break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
        why = "CUPTI's buffer limit was reached";
        break;
    default: {
        const char *s = NULL;
        if (cuptiGetResultString((CUptiResult)result, &s) != CUPTI_SUCCESS || !s) s = "unknown";
        return ap_err_set(err, AP_ERR_CUDA, "CUPTI: %s: %s (error %d)", doing, s, result);
    }
    }
    return ap_err_set(err, AP_ERR_CUDA, "CUPTI: %s: %s", doing, why);
}

/* ---- mapping CUPTI's enums to autoplan's ------------------------------------------------------ */

static uint8_t memk_from(uint32_t k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return AP_MEMK_PAGEABLE;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return AP_MEMK_PINNED;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return AP_MEMK_DEVICE;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return AP_MEMK_ARRAY;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return AP_MEMK_MANAGED;
    default: return AP_MEMK_UNKNOWN;
    }
}

static uint8_t memk_to(uint8_t k) {
    static const uint8_t to[AP_MEMK_END] = {
        [AP_MEMK_UNKNOWN] = CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN,
        [AP_MEMK_PAGEABLE] = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
        [AP_MEMK_PINNED] = CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
        [AP_MEMK_DEVICE] = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        [AP_MEMK_MANAGED] = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
        [AP_MEMK_ARRAY] = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY};
    return k < AP_MEMK_END ? to[k] : CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN;
}

static uint8_t copy_from(uint32_t k) {
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return AP_COPY_H2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return AP_COPY_D2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return AP_COPY_D2D;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return AP_COPY_H2H;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return AP_COPY_P2P;
    default: return AP_COPY_OTHER;
    }
}

static uint8_t copy_to(uint8_t d) {
    static const uint8_t to[AP_COPY_DIR_END] = {
        [AP_COPY_OTHER] = CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN,
        [AP_COPY_H2D] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
        [AP_COPY_D2H] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
        [AP_COPY_D2D] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
        [AP_COPY_P2P] = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
        [AP_COPY_H2H] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH};
    return d < AP_COPY_DIR_END ? to[d] : CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN;
}

/* API names ("cudaLaunchKernel"), cached per callback id; CUPTI's "_v7000" suffix dropped. */
#define MAX_CBID 4096
static const char *api_names[2][MAX_CBID];
static char api_names_buf[2][MAX_CBID][64];

static const char *api_name(int driver, uint32_t cbid) {
    if (cbid >= MAX_CBID) return NULL;
    if (api_names[driver][cbid]) return api_names[driver][cbid];
    const char *n = NULL;
    CUpti_CallbackDomain dom = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    if (cuptiGetCallbackName(dom, cbid, &n) != CUPTI_SUCCESS || !n) return NULL;
    char *b = api_names_buf[driver][cbid];
    snprintf(b, 64, "%s", n);
    char *v = strstr(b, "_v");
    if (v && v[2] >= '0' && v[2] <= '9' && v[2 + strspn(v + 2, "0123456789")] == '\0') *v = '\0';
    api_names[driver][cbid] = b;
    return b;
}

/* ---- the decoder ---------------------------------------------------------------------------------- */

/* MEMCPY, MEMCPY2 (peer) and MEMSET records: one copy or set of bytes. */
static void convert_copy(const CUpti_Activity *a, ap_trace_rec *r) {
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const void *)a;
        r->kind = AP_REC_MEMCPY;
        r->start_ns = m->start;
        r->end_ns = m->end >= m->start ? m->end : m->start;
        r->bytes = m->bytes;
        r->device = m->deviceId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->copy_dir = copy_from(m->copyKind);
        r->src_kind = memk_from(m->srcKind);
        r->dst_kind = memk_from(m->dstKind);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const void *)a;
        r->kind = AP_REC_MEMCPY;
        r->start_ns = m->start;
        r->end_ns = m->end >= m->start ? m->end : m->start;
        r->bytes = m->bytes;
        r->device = m->deviceId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->copy_dir = AP_COPY_P2P;
        r->src_kind = memk_from(m->srcKind);
        r->dst_kind = memk_from(m->dstKind);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)a;
        r->kind = AP_REC_MEMSET;
        r->start_ns = m->start;
        r->end_ns = m->end >= m->start ? m->end : m->start;
        r->bytes = m->bytes;
        r->device = m->deviceId;
        r->stream = m->streamId;
        r->correlation = m->correlationId;
        r->src_kind = memk_from(m->memoryKind);
        break;
    }
    default:
        break;
    }
}

/* A MEMORY2 record (driver allocation or release); a stream-ordered (pool) allocation also
 * yields its pool's size as a POOL record. */
static ap_status convert_memory2(const CUpti_Activity *a, ap_trace *t, int *used, ap_err *err) {
    ap_trace_rec r;
    memset(&r, 0, sizeof r);
    const CUpti_ActivityMemory4 *m = (const void *)a;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        r.kind = AP_REC_ALLOC;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        r.kind = AP_REC_FREE;
    else {
        *used = 0;
        return AP_OK;
    }
    r.start_ns = r.end_ns = m->timestamp;
    r.bytes = m->bytes;
    r.address = m->address;
    r.device = m->deviceId;
    r.stream = m->streamId;
    r.correlation = m->correlationId;
    r.src_kind = memk_from(m->memoryKind);
    int pooled = m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    if (pooled) r.flags |= AP_REC_FLAG_POOL;
    ap_status st = ap_trace_add(t, &r, NULL, err);
    if (st != AP_OK || !pooled) return st;
    ap_trace_rec p;
    memset(&p, 0, sizeof p);
    p.kind = AP_REC_POOL;
    p.id = AP_POOL_SIZE;
    p.start_ns = p.end_ns = m->timestamp;
    p.address = m->memoryPoolConfig.address;
    p.bytes = m->memoryPoolConfig.pool.size;
    p.device = m->deviceId;
    return ap_trace_add(t, &p, NULL, err);
}

/* A MEMORY_POOL record: created, destroyed or trimmed; 0 for other operations. */
static int convert_pool(const CUpti_Activity *a, ap_trace_rec *r) {
    const CUpti_ActivityMemoryPool3 *m = (const void *)a;
    r->kind = AP_REC_POOL;
    switch (m->memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED: r->id = AP_POOL_CREATED; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED: r->id = AP_POOL_DESTROYED; break;
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED: r->id = AP_POOL_TRIMMED; break;
    default: return 0;
    }
    r->start_ns = r->end_ns = m->timestamp;
    r->address = m->address;
    r->bytes = m->size;
    r->device = m->deviceId;
    r->correlation = m->correlationId;
    return 1;
}

/* Convert one CUPTI record; *used = 0 for kinds autoplan does not keep. A MEMORY2 record of a
 * stream-ordered (pool) allocation also yields the pool's size as a POOL record. */
static ap_status convert(CUpti_Activity *a, ap_trace *t, int *used, ap_err *err) {
    ap_trace_rec r;
    memset(&r, 0, sizeof r);
    const char *name = NULL;
    *used = 1;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)a;
        r.kind = AP_REC_KERNEL;
        r.start_ns = k->start;
        r.end_ns = k->end >= k->start ? k->end : k->start;
        r.device = k->deviceId;
        r.stream = k->streamId;
        r.correlation = k->correlationId;
        name = k->name;
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
    case CUPTI_ACTIVITY_KIND_MEMSET:
        convert_copy(a, &r);
        break;
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        return convert_memory2(a, t, used, err);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        if (!convert_pool(a, &r)) {
            *used = 0;
            return AP_OK;
        }
        break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const CUpti_ActivityAPI *api = (const void *)a;
        int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
        r.kind = AP_REC_API;
        r.start_ns = api->start;
        r.end_ns = api->end >= api->start ? api->end : api->start;
        r.thread = api->threadId;
        r.correlation = api->correlationId;
        r.id = api->cbid;
        r.flags = driver ? AP_REC_FLAG_DRIVER : 0;
        name = api_name(driver, api->cbid);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
        const CUpti_ActivityMarker2 *m = (const void *)a;
        if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) r.kind = AP_REC_RANGE_START;
        else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) r.kind = AP_REC_RANGE_END;
        else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) r.kind = AP_REC_MARK;
        else {
            *used = 0;
            return AP_OK;
        }
        r.start_ns = r.end_ns = m->timestamp;
        r.id = m->id;
        if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
            m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
            r.thread = m->objectId.pt.threadId;
        name = m->name;
        break;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const CUpti_ActivityOverhead3 *o = (const void *)a;
        r.kind = AP_REC_OVERHEAD;
        r.start_ns = o->start;
        r.end_ns = o->end >= o->start ? o->end : o->start;
        r.id = (uint32_t)o->overheadKind;
        if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) r.thread = o->objectId.pt.threadId;
        break;
    }
    default:
        *used = 0;
        return AP_OK;
    }
    return ap_trace_add(t, &r, name, err);
}

ap_status ap_cupti_decode(uint8_t *buf, size_t valid, ap_trace *t, size_t *records,
                          ap_err *err) {
    if (records) *records = 0;
    CUpti_Activity *a = NULL;
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buf, valid, &a);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) return AP_OK; /* the end of the buffer */
        if (r != CUPTI_SUCCESS) return ap_cupti_error(r, "reading an activity buffer", err);
        int used = 0;
        ap_status st = convert(a, t, &used, err);
        if (st != AP_OK) return st;
        if (records) *records += (size_t)used;
    }
}

/* ---- the encoder (tests) --------------------------------------------------------------------------- */

static void *slot(uint8_t *buf, size_t cap, size_t *at, size_t size, int *full) {
    size_t a = (*at + 7) & ~(size_t)7;
    if (a + size > cap) {
        *full = 1;
        return NULL;
    }
    memset(buf + a, 0, size);
    *at = a + size;
    return buf + a;
}

/* MEMCPY (MEMCPY2 for peer copies) and MEMSET records in CUPTI form; *full when cap is hit. */
static void encode_copy(const ap_trace_rec *r, uint8_t *buf, size_t cap, size_t *at, int *full) {
    switch (r->kind) {
    case AP_REC_MEMCPY:
        if (r->copy_dir == AP_COPY_P2P) {
            CUpti_ActivityMemcpyPtoP4 *m = slot(buf, cap, at, sizeof *m, full);
            if (!m) break;
            m->kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
            m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
            m->srcKind = memk_to(r->src_kind);
            m->dstKind = memk_to(r->dst_kind);
            m->bytes = r->bytes;
            m->start = r->start_ns;
            m->end = r->end_ns;
            m->deviceId = r->device;
            m->streamId = r->stream;
            m->correlationId = r->correlation;
        } else {
            CUpti_ActivityMemcpy6 *m = slot(buf, cap, at, sizeof *m, full);
            if (!m) break;
            m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
            m->copyKind = copy_to(r->copy_dir);
            m->srcKind = memk_to(r->src_kind);
            m->dstKind = memk_to(r->dst_kind);
            m->bytes = r->bytes;
            m->start = r->start_ns;
            m->end = r->end_ns;
            m->deviceId = r->device;
            m->streamId = r->stream;
            m->correlationId = r->correlation;
            m->copyCount = 1;
        }
        break;
    case AP_REC_MEMSET: {
        CUpti_ActivityMemset4 *m = slot(buf, cap, at, sizeof *m, full);
        if (!m) break;
        m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
        m->bytes = r->bytes;
        m->start = r->start_ns;
        m->end = r->end_ns;
        m->deviceId = r->device;
        m->streamId = r->stream;
        m->correlationId = r->correlation;
        m->memoryKind = memk_to(r->src_kind);
        break;
    }
    default:
        break;
    }
}

/* An ALLOC or FREE record as MEMORY2; a pool allocation takes its pool's size from the POOL
 * record after it (*i moves past it). */
static ap_status encode_memory(const ap_trace *t, size_t *i, uint8_t *buf, size_t cap, size_t *at,
                              int *full, ap_err *err) {
    const ap_trace_rec *r = &t->recs[*i];
    CUpti_ActivityMemory4 *m = slot(buf, cap, at, sizeof *m, full);
    if (!m) return AP_OK;
    m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m->memoryOperationType = r->kind == AP_REC_ALLOC
                                 ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                 : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m->memoryKind = memk_to(r->src_kind);
    m->correlationId = r->correlation;
    m->address = r->address;
    m->bytes = r->bytes;
    m->timestamp = r->start_ns;
    m->deviceId = r->device;
    m->streamId = r->stream;
    if (r->flags & AP_REC_FLAG_POOL) {
        const ap_trace_rec *p = *i + 1 < t->n ? &t->recs[*i + 1] : NULL;
        if (!p || p->kind != AP_REC_POOL || p->id != AP_POOL_SIZE)
            return ap_err_set(err, AP_ERR_INPUT, "record %zu: a pool allocation must be "
                              "followed by its pool's size", *i);
        m->isAsync = 1;
        m->memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
        m->memoryPoolConfig.address = p->address;
        m->memoryPoolConfig.pool.size = p->bytes;
        (*i)++;
    }
    return AP_OK;
}

ap_status ap_cupti_encode(const ap_trace *t, uint8_t *buf, size_t cap, size_t *used,
                          ap_err *err) {
    size_t at = 0;
    int full = 0;
    for (size_t i = 0; i < t->n && !full; i++) {
        const ap_trace_rec *r = &t->recs[i];
        const char *name = r->name ? ap_trace_name(t, r->name) : NULL;
        switch (r->kind) {
        case AP_REC_KERNEL: {
            CUpti_ActivityKernel10 *k = slot(buf, cap, &at, sizeof *k, &full);
            if (!k) break;
            k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
            k->start = r->start_ns;
            k->end = r->end_ns;
            k->deviceId = r->device;
            k->streamId = r->stream;
            k->correlationId = r->correlation;
            k->name = name;
            break;
        }
        case AP_REC_MEMCPY:
        case AP_REC_MEMSET:
            encode_copy(r, buf, cap, &at, &full);
            break;
        case AP_REC_ALLOC:
        case AP_REC_FREE: {
            ap_status st = encode_memory(t, &i, buf, cap, &at, &full, err);
            if (st != AP_OK) return st;
            break;
        }
        case AP_REC_POOL: {
            static const uint32_t ops[] = {
                [AP_POOL_CREATED] = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED,
                [AP_POOL_DESTROYED] = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED,
                [AP_POOL_TRIMMED] = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED};
            if (r->id > AP_POOL_TRIMMED)
                return ap_err_set(err, AP_ERR_INPUT, "record %zu: a pool size stands only after "
                                  "a pool allocation", i);
            CUpti_ActivityMemoryPool3 *m = slot(buf, cap, &at, sizeof *m, &full);
            if (!m) break;
            m->kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
            m->memoryPoolOperationType = ops[r->id];
            m->memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
            m->correlationId = r->correlation;
            m->deviceId = r->device;
            m->address = r->address;
            m->size = r->bytes;
            m->timestamp = r->start_ns;
            break;
        }
        case AP_REC_API: {
            CUpti_ActivityAPI *api = slot(buf, cap, &at, sizeof *api, &full);
            if (!api) break;
            api->kind = r->flags & AP_REC_FLAG_DRIVER ? CUPTI_ACTIVITY_KIND_DRIVER
                                                      : CUPTI_ACTIVITY_KIND_RUNTIME;
            api->cbid = r->id;
            api->start = r->start_ns;
            api->end = r->end_ns;
            api->threadId = r->thread;
            api->correlationId = r->correlation;
            break;
        }
        case AP_REC_RANGE_START:
        case AP_REC_RANGE_END:
        case AP_REC_MARK: {
            CUpti_ActivityMarker2 *m = slot(buf, cap, &at, sizeof *m, &full);
            if (!m) break;
            m->kind = CUPTI_ACTIVITY_KIND_MARKER;
            m->flags = r->kind == AP_REC_RANGE_START ? CUPTI_ACTIVITY_FLAG_MARKER_START
                     : r->kind == AP_REC_RANGE_END   ? CUPTI_ACTIVITY_FLAG_MARKER_END
                                                     : CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
            m->timestamp = r->start_ns;
            m->id = r->id;
            m->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
            m->objectId.pt.threadId = r->thread;
            m->name = r->kind == AP_REC_RANGE_END ? NULL : name;
            break;
        }
        case AP_REC_OVERHEAD: {
            CUpti_ActivityOverhead3 *o = slot(buf, cap, &at, sizeof *o, &full);
            if (!o) break;
            o->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
            o->overheadKind = (CUpti_ActivityOverheadKind)r->id;
            o->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
            o->objectId.pt.threadId = r->thread;
            o->start = r->start_ns;
            o->end = r->end_ns;
            break;
        }
        default:
            return ap_err_set(err, AP_ERR_INPUT, "record %zu: kind %u has no CUPTI form", i, r->kind);
        }
    }
    if (full) return ap_err_set(err, AP_ERR_INPUT, "buffer of %zu bytes is too small", cap);
    *used = at;
    return AP_OK;
}

/* ---- tracing ----------------------------------------------------------------------------------------- */

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ap_trace *g_trace;       /* records go here while tracing */
static int g_active;            /* between a successful start and stop */
static CUpti_SubscriberHandle g_sub;
static ap_err g_cb_err;         /* the first failure inside a callback */
static char g_foreign[256];     /* what the program did with CUPTI */

static const CUpti_ActivityKind g_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_OVERHEAD};
static const char *const g_kind_names[] = {
    "CONCURRENT_KERNEL", "MEMCPY", "MEMCPY2", "MEMSET", "MEMORY2", "MEMORY_POOL", "RUNTIME",
    "DRIVER", "MARKER", "OVERHEAD"};
#define NKINDS (sizeof g_kinds / sizeof g_kinds[0])

/* The libcupti copy this code's cupti* calls are bound to (dladdr of one of them), so that the
 * real cuptiSubscribe and the NVTX entry point come from the copy that holds the activity
 * buffers, wherever it sits in the search order (dlsym(RTLD_NEXT) misses a libcupti
 * preloaded before this library, as attach --cupti-lib does). A reference is kept. */
static void *bound_cupti(void) {
    static void *h;
    if (h) return h;
    union { CUptiResult (*fn)(uint32_t *); void *p; } u = {cuptiGetVersion};
    Dl_info info;
    if (dladdr(u.p, &info) && info.dli_fname) h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    return h;
}

static void *bound_sym(const char *name) {
    void *h = bound_cupti();
    return h ? dlsym(h, name) : NULL;
}

static subscribe_fn real_subscribe(void) {
    static subscribe_fn f;
    if (!f) f = (subscribe_fn)bound_sym("cuptiSubscribe");
    return f;
}

static register_fn real_register(void) {
    static register_fn f;
    if (!f) f = (register_fn)bound_sym("cuptiActivityRegisterCallbacks");
    return f;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = AP_CUPTI_BUFFER_BYTES;
    *buffer = aligned_alloc(8, AP_CUPTI_BUFFER_BYTES); /* CUPTI needs 8-byte alignment */
    *max_records = 0;                                  /* as many as fit */
    if (!*buffer) *size = 0;                           /* CUPTI counts the records dropped */
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)size;
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    pthread_mutex_lock(&g_lock);
    if (g_trace) {
        ap_err e;
        if (valid && ap_cupti_decode(buffer, valid, g_trace, NULL, &e) != AP_OK &&
            !g_cb_err.msg[0])
            g_cb_err = e;
        g_trace->dropped += dropped;
    }
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

/* The subscriber exists to hold CUPTI's one subscriber slot; it enables no callbacks. */
static void CUPTIAPI no_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *p) {
    (void)u, (void)d, (void)id, (void)p;
}

static void disable_all(void) {
    for (size_t k = 0; k < NKINDS; k++) cuptiActivityDisable(g_kinds[k]);
}

ap_status ap_cupti_start(ap_trace *t, ap_err *err) {
    if (g_active) return ap_err_set(err, AP_ERR_INTERNAL, "CUPTI tracing already started");
    uint32_t runtime = 0;
    ap_status st = ap_cupti_runtime_version(&runtime, err);
    if (st == AP_OK) st = ap_cupti_version_check(ap_cupti_built_version(), runtime, err);
    if (st != AP_OK) return st;
    subscribe_fn sub = real_subscribe();
    register_fn reg = real_register();
    if (!sub || !reg) return ap_err_set(err, AP_ERR_CUDA, "CUPTI: libcupti lacks cuptiSubscribe");
    /* CUPTI answers "unknown error" without a driver: say what is missing instead */
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
    if (!drv)
        return ap_err_set(err, AP_ERR_CUDA, "CUPTI: no CUDA driver on this machine (libcuda.so.1 "
                          "not found): tracing needs a GPU and its driver");
    dlclose(drv);
    CUptiResult r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (r != CUPTI_SUCCESS) return ap_cupti_error(r, "choosing system thread ids", err);
    r = sub(&g_sub, no_callback, NULL);
    if (r != CUPTI_SUCCESS) return ap_cupti_error(r, "subscribing", err);
    pthread_mutex_lock(&g_lock);
    g_trace = t;
    g_cb_err.msg[0] = '\0';
    pthread_mutex_unlock(&g_lock);
    r = reg(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        st = ap_cupti_error(r, "registering activity buffers", err);
    } else {
        for (size_t k = 0; k < NKINDS && st == AP_OK; k++) {
            r = cuptiActivityEnable(g_kinds[k]);
            if (r != CUPTI_SUCCESS) {
                char doing[64];
                snprintf(doing, sizeof doing, "enabling %s activity", g_kind_names[k]);
                st = ap_cupti_error(r, doing, err);
            }
        }
    }
    if (st != AP_OK) {
        disable_all();
        cuptiUnsubscribe(g_sub);
        pthread_mutex_lock(&g_lock);
        g_trace = NULL;
        pthread_mutex_unlock(&g_lock);
        return st;
    }
    g_active = 1;
    return AP_OK;
}

ap_status ap_cupti_stop(ap_err *err) {
    if (!g_active) return AP_OK;
    ap_status st = AP_OK;
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) st = ap_cupti_error(r, "flushing activity buffers", err);
    disable_all();
    r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS && st == AP_OK) st = ap_cupti_error(r, "flushing after disabling", err);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
    cuptiUnsubscribe(g_sub);
    pthread_mutex_lock(&g_lock);
    if (g_trace) g_trace->dropped += dropped;
    if (st == AP_OK && g_cb_err.msg[0]) st = ap_err_set(err, AP_ERR_CUDA, "%s", g_cb_err.msg);
    g_trace = NULL;
    g_active = 0;
    pthread_mutex_unlock(&g_lock);
    return st;
}

const char *ap_cupti_foreign_use(void) { return g_foreign; }

void ap_cupti_test_set_active(int on) { g_active = on; }

/* ---- NVTX ---------------------------------------------------------------------------------------------- */

/* attach names libautoplan_inject.so itself in NVTX_INJECTION64_PATH, and NVTX calls this. It
 * hands NVTX to CUPTI's own entry point in the libcupti copy this library's cupti* calls are
 * bound to (bound_cupti()), so ranges are recorded where the activity buffers are. Naming
 * a libcupti file there instead loads a second copy whenever the program brought its own
 * (PyTorch loads pip's nvidia/cu13/lib/libcupti.so.13 by path), and ranges recorded by the copy
 * nobody subscribed to are lost: what the first H200 run saw (docs/profiler.md). */
typedef const void *(*nvtx_table_fn)(uint32_t);
typedef int (*nvtx_init_fn)(nvtx_table_fn);

static nvtx_init_fn bound_cupti_entry(const char *name) {
    union { void *p; nvtx_init_fn fn; } v = {bound_sym(name)};
    return v.fn;
}

int InitializeInjectionNvtx2(nvtx_table_fn get_table);
int InitializeInjectionNvtx2(nvtx_table_fn get_table) {
    nvtx_init_fn f = bound_cupti_entry("InitializeInjectionNvtx2");
    return f ? f(get_table) : 0;
}

void *ap_cupti_test_nvtx_target(void) { return bound_sym("InitializeInjectionNvtx2"); }

/* ---- interposers ------------------------------------------------------------------------------------ */

static void note_foreign(const char *what) {
    pthread_mutex_lock(&g_lock);
    if (!g_foreign[0])
        snprintf(g_foreign, sizeof g_foreign, "the program started its own CUPTI profiler (%s: "
                 "torch.profiler, Kineto, Nsight or similar); only one CUPTI subscriber can exist, "
                 "so autoplan stopped: run the program without its profiler", what);
    pthread_mutex_unlock(&g_lock);
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata) {
    if (g_active) {
        note_foreign("cuptiSubscribe");
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    subscribe_fn f = real_subscribe();
    return f ? f(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
    if (g_active) {
        note_foreign("cuptiActivityRegisterCallbacks");
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    register_fn f = real_register();
    return f ? f(requested, completed) : CUPTI_ERROR_NOT_INITIALIZED;
}

static void CUPTIAPI program_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
}

static void CUPTIAPI program_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                       size_t valid) {
    (void)ctx, (void)stream, (void)buffer, (void)size, (void)valid;
}

int ap_cupti_test_register_as_program(void) {
    return (int)cuptiActivityRegisterCallbacks(program_requested, program_completed);
}
