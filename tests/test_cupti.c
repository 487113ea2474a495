/*
 * test_cupti.c - the CUPTI wrapper without a GPU (profiler/cupti.c; CUDA builds only, the test
 * skips with 77 in builds without CUPTI).
 *
 * CUPTI's own cuptiActivityGetNextRecord reads activity buffers with no device and no driver
 * present (checked on this machine: CUDA 13.0, no libcuda), so the real parsing path runs here:
 * autoplan records are written as CUPTI records (ap_cupti_encode, the layouts of the CUPTI
 * built against), walked by CUPTI, converted back (ap_cupti_decode) and must come back equal,
 * field by field; the summary of the decoded trace must equal the summary of the original.
 * Also: the version check, the one-line error for each CUPTI error that matters, start without
 * a driver, and the interposer that refuses a second CUPTI subscriber while autoplan traces.
 */
#define _GNU_SOURCE 1 /* dladdr */
#include "testlib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/profiler.h"

#ifndef AP_HAVE_CUPTI
int main(void) {
    printf("built without CUPTI: skipped\n");
    return 77;
}
#else
#include <dlfcn.h>
#include <unistd.h>

#include "activity.h"

/* Two CUPTI functions whose addresses the NVTX test compares (declared here: the test must not
 * include cupti.h), and autoplan's NVTX entry point (profiler/cupti.c). */
int cuptiGetVersion(uint32_t *version);
int InitializeInjectionNvtx2(const void *(*get_table)(uint32_t));

/* CUptiResult values (cupti_result.h, CUDA 13.0); the test must not include cupti.h */
enum { R_NO_DEVICE = 2 /* INVALID_DEVICE */, R_NOT_INITIALIZED = 15, R_INSUFFICIENT_PRIVILEGES = 35,
       R_MULTIPLE_SUBSCRIBERS = 39, R_MIG = 43, R_SUCCESS = 0 };

static void test_version(void) {
    ap_err e;
    CHECK_INT(ap_cupti_version_check(130001, 130001, &e), AP_OK);
    CHECK_INT(ap_cupti_version_check(130001, 130100, &e), AP_ERR_CUDA);
    CHECK_CONTAINS(e.msg, "CUPTI version mismatch");
    CHECK_CONTAINS(e.msg, "130001");
    CHECK_CONTAINS(e.msg, "130100");
    CHECK(strchr(e.msg, '\n') == NULL);
    uint32_t v = 0;
    CHECK_INT(ap_cupti_runtime_version(&v, &e), AP_OK);
    CHECK_INT(v, ap_cupti_built_version()); /* this build's libcupti is the one it found */
}

static void test_errors(void) {
    static const struct { int code; const char *want; } cases[] = {
        {R_NO_DEVICE, "no CUDA device"},
        {R_NOT_INITIALIZED, "driver could not be initialised"},
        {R_INSUFFICIENT_PRIVILEGES, "insufficient privileges"},
        {R_MULTIPLE_SUBSCRIBERS, "another CUPTI subscriber is already attached"},
        {R_MIG, "MIG"},
        {12345, "(error 12345)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ap_err e;
        CHECK_INT(ap_cupti_error(cases[i].code, "enabling MEMORY2 activity", &e), AP_ERR_CUDA);
        CHECK_CONTAINS(e.msg, "CUPTI: enabling MEMORY2 activity: ");
        CHECK_CONTAINS(e.msg, cases[i].want);
        CHECK(strchr(e.msg, '\n') == NULL);
    }
}

static void add(ap_trace *t, ap_trace_rec r, const char *name) {
    ap_err e;
    CHECK_INT(ap_trace_add(t, &r, name, &e), AP_OK);
}

/* One record of every kind and form the decoder handles. */
static void build(ap_trace *t) {
    ap_trace_init(t);
    ap_trace_rec r;
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_RANGE_START, r.start_ns = r.end_ns = 100, r.thread = 4242, r.id = 1;
    add(t, r, "step");
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_API, r.start_ns = 110, r.end_ns = 130, r.thread = 4242, r.correlation = 9;
    r.id = 211; /* a runtime callback id; its name comes from CUPTI */
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_API, r.start_ns = 111, r.end_ns = 129, r.thread = 4242, r.correlation = 9;
    r.id = 307, r.flags = AP_REC_FLAG_DRIVER;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_KERNEL, r.start_ns = 150, r.end_ns = 450, r.device = 1, r.stream = 7;
    r.correlation = 9;
    add(t, r, "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_");
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_MEMCPY, r.start_ns = 500, r.end_ns = 600, r.bytes = 1 << 20, r.device = 1;
    r.stream = 7, r.correlation = 10, r.copy_dir = AP_COPY_H2D;
    r.src_kind = AP_MEMK_PINNED, r.dst_kind = AP_MEMK_DEVICE;
    add(t, r, NULL);
    r.copy_dir = AP_COPY_P2P, r.src_kind = AP_MEMK_DEVICE, r.correlation = 11;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_MEMSET, r.start_ns = 610, r.end_ns = 620, r.bytes = 4096, r.device = 1;
    r.stream = 7, r.correlation = 12, r.src_kind = AP_MEMK_DEVICE;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_ALLOC, r.start_ns = r.end_ns = 50, r.bytes = 2u << 30, r.address = 0x7f0000000000;
    r.device = 1, r.src_kind = AP_MEMK_DEVICE, r.correlation = 3;
    add(t, r, NULL);
    r.kind = AP_REC_FREE, r.start_ns = r.end_ns = 900;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_POOL, r.start_ns = r.end_ns = 60, r.bytes = 64u << 20, r.address = 0x500000;
    r.device = 1, r.id = AP_POOL_CREATED;
    add(t, r, NULL);
    memset(&r, 0, sizeof r); /* a stream-ordered allocation and its pool's size */
    r.kind = AP_REC_ALLOC, r.start_ns = r.end_ns = 70, r.bytes = 1 << 20, r.address = 0x510000;
    r.device = 1, r.src_kind = AP_MEMK_DEVICE, r.flags = AP_REC_FLAG_POOL, r.stream = 7;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_POOL, r.start_ns = r.end_ns = 70, r.bytes = 128u << 20, r.address = 0x500000;
    r.device = 1, r.id = AP_POOL_SIZE;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_RANGE_END, r.start_ns = r.end_ns = 800, r.thread = 4242, r.id = 1;
    add(t, r, NULL);
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_MARK, r.start_ns = r.end_ns = 805, r.thread = 4242, r.id = 2;
    add(t, r, "checkpoint");
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_OVERHEAD, r.start_ns = 810, r.end_ns = 890, r.thread = 4242, r.id = 1;
    add(t, r, NULL);
}

static void test_round_trip(void) {
    ap_trace in, out;
    build(&in);
    ap_err e;
    static uint8_t buf[1 << 16] __attribute__((aligned(8)));
    size_t used = 0, recs = 0;
    CHECK_INT(ap_cupti_encode(&in, buf, sizeof buf, &used, &e), AP_OK);
    CHECK(used > 0);
    ap_trace_init(&out);
    CHECK_INT(ap_cupti_decode(buf, used, &out, &recs, &e), AP_OK);
    CHECK_INT(recs, in.n - 1); /* the pool allocation and its size travel as one record */
    CHECK_INT(out.n, in.n);
    int same = out.n == in.n;
    for (size_t i = 0; same && i < in.n; i++) {
        ap_trace_rec a = in.recs[i], b = out.recs[i];
        const char *na = ap_trace_name(&in, a.name), *nb = ap_trace_name(&out, b.name);
        a.name = b.name = 0;
        if (memcmp(&a, &b, sizeof a)) {
            fprintf(stderr, "record %zu differs after the round trip (kind %u)\n", i, a.kind);
            same = 0;
        }
        if (a.kind != AP_REC_API && strcmp(na, nb)) {
            fprintf(stderr, "record %zu: name '%s' came back as '%s'\n", i, na, nb);
            same = 0;
        }
    }
    CHECK(same);
    /* API names come from CUPTI's callback table, without the _vNNNN suffix */
    CHECK(strncmp(ap_trace_name(&out, out.recs[1].name), "cuda", 4) == 0);
    CHECK(strstr(ap_trace_name(&out, out.recs[1].name), "_v") == NULL);
    CHECK(strncmp(ap_trace_name(&out, out.recs[2].name), "cu", 2) == 0);
    /* the decoded trace says what the original says */
    ap_trace_summary s1, s2;
    CHECK_INT(ap_trace_summarize(&in, NULL, &s1, &e), AP_OK);
    CHECK_INT(ap_trace_summarize(&out, NULL, &s2, &e), AP_OK);
    CHECK_INT(s2.kernel_count, 1);
    CHECK_NEAR(s2.kernel_s, 300e-9, 1e-9);
    CHECK_NEAR(s2.peak_reserved_bytes, s1.peak_reserved_bytes, 0);
    /* peak: 2 GiB + the pool at 128 MiB (the pool allocation is inside the pool) */
    CHECK_NEAR(s2.peak_reserved_bytes, 2147483648.0 + 134217728.0, 0);
    CHECK_INT(s2.nnodes, 2);
    CHECK_NEAR(s2.nodes[1].kernel_s, 300e-9, 1e-9); /* launched inside "step" */
    CHECK_INT(s2.copies[AP_COPY_P2P][AP_MEMK_DEVICE].calls, 1);
    CHECK_NEAR(s2.overhead_s, 80e-9, 1e-9);
    ap_trace_summary_free(&s1);
    ap_trace_summary_free(&s2);
    ap_trace_free(&out);

    /* a buffer cut short: CUPTI stops at the last whole record, nothing is invented */
    ap_trace_init(&out);
    CHECK_INT(ap_cupti_decode(buf, used - 8, &out, &recs, &e), AP_OK);
    CHECK(out.n < in.n);
    ap_trace_free(&out);
    /* too small a buffer to encode into */
    CHECK_INT(ap_cupti_encode(&in, buf, 64, &used, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "too small");
    /* a pool size without its allocation has no CUPTI form */
    ap_trace lone;
    ap_trace_init(&lone);
    ap_trace_rec r;
    memset(&r, 0, sizeof r);
    r.kind = AP_REC_POOL, r.id = AP_POOL_SIZE;
    add(&lone, r, NULL);
    CHECK_INT(ap_cupti_encode(&lone, buf, sizeof buf, &used, &e), AP_ERR_INPUT);
    ap_trace_free(&lone);
    ap_trace_free(&in);
}

static void test_start_without_device(void) {
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY);
    if (drv) {
        dlclose(drv);
        printf("a CUDA driver is installed: the no-driver refusal is not checked here\n");
        return;
    }
    ap_trace t;
    ap_trace_init(&t);
    ap_err e;
    CHECK_INT(ap_cupti_start(&t, &e), AP_ERR_CUDA);
    CHECK_CONTAINS(e.msg, "no CUDA driver");
    CHECK_INT(ap_cupti_stop(&e), AP_OK); /* not started: nothing to do */
    ap_trace_free(&t);
}

static void test_interposer(void) {
    /* not tracing: the program's call goes to CUPTI */
    CHECK(ap_cupti_test_register_as_program() != R_MULTIPLE_SUBSCRIBERS);
    CHECK_STR(ap_cupti_foreign_use(), "");
    /* tracing: refused and remembered, with the function named */
    ap_cupti_test_set_active(1);
    CHECK_INT(ap_cupti_test_register_as_program(), R_MULTIPLE_SUBSCRIBERS);
    ap_cupti_test_set_active(0);
    CHECK_CONTAINS(ap_cupti_foreign_use(), "started its own CUPTI profiler");
    CHECK_CONTAINS(ap_cupti_foreign_use(), "cuptiActivityRegisterCallbacks");
}

/* NVTX reaches CUPTI through autoplan's entry point, which passes it to CUPTI's own in the copy
 * of libcupti that autoplan's cupti* calls are bound to (not in some other copy, and not back to
 * itself); the injection library exports the entry point. */
static void test_nvtx_forward(void) {
    void *target = ap_cupti_test_nvtx_target();
    CHECK(target != NULL);
    union { int (*fn)(uint32_t *); void *p; } bound = {cuptiGetVersion};
    union { int (*fn)(const void *(*)(uint32_t)); void *p; } self = {InitializeInjectionNvtx2};
    Dl_info a, b;
    CHECK(target != self.p);
    CHECK(dladdr(bound.p, &a) && dladdr(target, &b));
    if (target && dladdr(bound.p, &a) && dladdr(target, &b)) {
        CHECK(a.dli_fbase == b.dli_fbase);
        CHECK_CONTAINS(b.dli_fname, "libcupti");
        CHECK_STR(b.dli_sname ? b.dli_sname : "", "InitializeInjectionNvtx2");
    }
    void *lib = dlopen(AP_INJECT_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    if (lib) {
        CHECK(dlsym(lib, "InitializeInjectionNvtx2") != NULL);
        CHECK(dlsym(lib, "ap_cupti_start") == NULL); /* everything else stays inside */
        dlclose(lib);
    }
}

/* The injection library inside a program, without a device: it cannot trace, and the reason
 * reaches attach through the trace file's status. The program is this test run again with
 * --as-program: it loads the library as the driver would (the driver itself is absent) and
 * calls InitializeInjection. */
static int as_program(void) {
    void *lib = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW);
    if (!lib) return 10;
    int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
    if (!init) return 11;
    return init() == 1 ? 0 : 12;
}

static void test_inject_without_device(void) {
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY);
    if (drv) {
        dlclose(drv);
        printf("a CUDA driver is installed: the injection refusal is not checked here\n");
        return;
    }
    char self[4096];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(l > 0);
    if (l <= 0) return;
    self[l] = '\0';
    char *argv[] = {self, "--as-program", NULL};
    /* in sanitizer builds the preloaded library brings the ASan runtime after the program's:
     * allowed for this test program, which links it too */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && asan[0] ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    ap_attach_opts o = {0};
    o.argv = argv;
    o.inject_lib = AP_INJECT_LIB_PATH;
    ap_trace t;
    ap_err e;
    int code = -1;
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_CUDA);
    CHECK_INT(code, 0);
    CHECK_CONTAINS(e.msg, "no CUDA driver");
    ap_trace_free(&t);
    /* --cupti-lib: that libcupti is preloaded before the library, which must still find the
       real cuptiSubscribe (it comes first in the search order, not after the library) */
    union { int (*fn)(uint32_t *); void *p; } bound = {cuptiGetVersion};
    Dl_info a;
    CHECK(dladdr(bound.p, &a) && a.dli_fname);
    if (!dladdr(bound.p, &a) || !a.dli_fname) return;
    o.cupti_lib = a.dli_fname;
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_CUDA);
    CHECK_INT(code, 0);
    CHECK_CONTAINS(e.msg, "no CUDA driver");
    ap_trace_free(&t);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--as-program")) return as_program();
    tl_init(argc, argv);
    test_version();
    test_errors();
    test_round_trip();
    test_start_without_device();
    test_interposer();
    test_nvtx_forward();
    test_inject_without_device();
    return tl_finish();
}
#endif
