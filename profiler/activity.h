/*
 * activity.h - the CUPTI wrapper's interface inside profiler/ (CUDA builds only): the
 * injection library (inject.c) and tests/test_cupti.c use it; nothing else does. cupti.c is the
 * only file that includes cupti.h, so no CUPTI type appears here.
 *
 * Tracing (start/stop) is process-wide: one trace receives every record, guarded by a mutex
 * because CUPTI hands buffers back on its own thread. Between ap_cupti_start and ap_cupti_stop
 * the trace belongs to the wrapper; after stop the caller owns it again.
 */
#ifndef AP_ACTIVITY_H
#define AP_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

#include "autoplan/profiler.h"

/* Bytes of each activity buffer handed to CUPTI: far under the 2 GB CUPTI's size field allows,
 * large enough that a buffer fills every few thousand kernels, not every few. */
#define AP_CUPTI_BUFFER_BYTES ((size_t)8 << 20)

/* The CUPTI API version this file was compiled against (CUPTI_API_VERSION). */
uint32_t ap_cupti_built_version(void);
/* cuptiGetVersion of the library loaded at run time. */
ap_status ap_cupti_runtime_version(uint32_t *v, ap_err *err);
/* AP_OK when equal; else AP_ERR_CUDA: record layouts change between CUPTI versions, so a
 * decoder built for one must not read another's buffers. */
ap_status ap_cupti_version_check(uint32_t built, uint32_t runtime, ap_err *err);

/* One line for a CUPTI result code (a CUptiResult value) while `doing` something: no device or
 * driver, insufficient privileges, MIG, another subscriber attached, ... AP_ERR_CUDA. */
ap_status ap_cupti_error(int result, const char *doing, ap_err *err);

/* Convert every record of one activity buffer (valid bytes of it) through
 * cuptiActivityGetNextRecord into t. *records (may be NULL): records converted; kinds autoplan
 * does not use are skipped. Not locked: the caller owns t. */
ap_status ap_cupti_decode(uint8_t *buf, size_t valid, ap_trace *t, size_t *records,
                          ap_err *err);

/* Write autoplan records as CUPTI activity records (the layouts of the CUPTI version built
 * against) into buf, for tests that feed hand-built buffers through ap_cupti_decode. Names
 * point into t (t must outlive buf's use). An ALLOC/FREE with AP_REC_FLAG_POOL followed by a
 * POOL record of op AP_POOL_SIZE become one pool allocation record. *used: bytes written.
 * AP_ERR_INPUT when buf is too small or a record cannot be expressed. */
ap_status ap_cupti_encode(const ap_trace *t, uint8_t *buf, size_t cap, size_t *used,
                          ap_err *err);

/* Start tracing into t: version check, driver present, claim the CUPTI subscriber, buffer
 * callbacks, the activity kinds (CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET, MEMORY2,
 * MEMORY_POOL, RUNTIME, DRIVER, MARKER, OVERHEAD). On failure nothing stays enabled. */
ap_status ap_cupti_start(ap_trace *t, ap_err *err);
/* Flush every buffer, disable the kinds, flush again, release the subscriber; adds CUPTI's
 * dropped-record count to t->dropped. Safe to call when not started. */
ap_status ap_cupti_stop(ap_err *err);
/* What the traced program did with CUPTI itself ("" when nothing): while autoplan traces, a
 * cuptiSubscribe, cuptiActivityRegisterCallbacks or cuptiActivityEnable from anyone else is
 * refused (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) and noted here. */
const char *ap_cupti_foreign_use(void);
/* Test hook: mark tracing active without a device, so tests can check the interposers refuse
 * a second subscriber (and pass calls through when inactive). */
void ap_cupti_test_set_active(int on);
/* Test hook: call cuptiActivityRegisterCallbacks as the traced program would (through the
 * interposer, with buffer callbacks of its own); returns the CUptiResult. */
int ap_cupti_test_register_as_program(void);
/* Test hook: the CUPTI function InitializeInjectionNvtx2 (the NVTX entry point) passes NVTX to:
 * CUPTI's own, in the libcupti copy this code is bound to; NULL when it cannot be found. */
void *ap_cupti_test_nvtx_target(void);

#endif
