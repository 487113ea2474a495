/*
 * test_profiler.c - the profiler's plain-C parts, no GPU needed (profiler/trace.c, attrib.c,
 * stats.c, hostbench.c, shapes.c, loo.c, attach.c).
 *
 * References: a hand-built trace whose every figure is worked out below (three iterations of
 * a "step" range with nested "fwd"/"attn" and "bwd" ranges, kernels launched in each,
 * allocations, a pool, copies); AdamW worked by hand from torch.optim.AdamW's update
 * (Loshchilov & Hutter 2019, Algorithm 2); STREAM byte counts from McCalpin's stream.c; GEMM
 * shapes of Llama-2-7B (config: h 4096, 32 heads, ffn 11008, vocab 32000) worked by hand from
 * Megatron-LM's column/row-parallel split; leave-one-out on power laws, which the
 * interpolation reproduces exactly.
 */
#include "testlib.h"

#include "autoplan/profiler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ap_profile_row tmpl(void) {
    ap_profile_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.gpu, sizeof r.gpu, "h100-sxm");
    snprintf(r.source_run, sizeof r.source_run, "test-profile");
    snprintf(r.host, sizeof r.host, "testhost");
    return r;
}

/* ---- a hand-built trace ------------------------------------------------------------------------ */

typedef struct {
    ap_trace t;
    uint32_t corr;
    uint32_t range_id;
} builder;

static void add(builder *b, ap_trace_rec r, const char *name) {
    ap_err e;
    CHECK_INT(ap_trace_add(&b->t, &r, name, &e), AP_OK);
}

static uint32_t range_start(builder *b, uint32_t thread, uint64_t ts, const char *name) {
    ap_trace_rec r = {0};
    r.kind = AP_REC_RANGE_START;
    r.start_ns = r.end_ns = ts;
    r.thread = thread;
    r.id = ++b->range_id;
    add(b, r, name);
    return r.id;
}

static void range_end(builder *b, uint32_t thread, uint64_t ts, uint32_t id) {
    ap_trace_rec r = {0};
    r.kind = AP_REC_RANGE_END;
    r.start_ns = r.end_ns = ts;
    r.thread = thread;
    r.id = id;
    add(b, r, NULL);
}

/* A cudaLaunchKernel at host time ts on thread, and its kernel on the device. The kernel is
 * added before the API record, as CUPTI delivers buffers in no particular order. */
static void kernel(builder *b, uint32_t thread, uint64_t ts, uint64_t k0, uint64_t k1,
                   const char *name) {
    uint32_t c = ++b->corr;
    ap_trace_rec k = {0};
    k.kind = AP_REC_KERNEL;
    k.start_ns = k0;
    k.end_ns = k1;
    k.correlation = c;
    add(b, k, name);
    ap_trace_rec a = {0};
    a.kind = AP_REC_API;
    a.start_ns = ts;
    a.end_ns = ts + 5;
    a.thread = thread;
    a.correlation = c;
    add(b, a, "cudaLaunchKernel");
    /* the driver call under it, same correlation: the runtime record must win */
    a.flags = AP_REC_FLAG_DRIVER;
    a.thread = 999;
    a.start_ns = ts + 1;
    add(b, a, "cuLaunchKernel");
}

static void mem(builder *b, uint32_t kind, uint64_t ts, uint64_t addr, uint64_t bytes,
                uint32_t flags) {
    ap_trace_rec r = {0};
    r.kind = kind;
    r.start_ns = r.end_ns = ts;
    r.address = addr;
    r.bytes = bytes;
    r.src_kind = AP_MEMK_DEVICE;
    r.flags = (uint8_t)flags;
    add(b, r, NULL);
}

static void pool(builder *b, uint32_t op, uint64_t ts, uint64_t addr, uint64_t bytes) {
    ap_trace_rec r = {0};
    r.kind = AP_REC_POOL;
    r.start_ns = r.end_ns = ts;
    r.address = addr;
    r.bytes = bytes;
    r.id = op;
    add(b, r, NULL);
}

/* Three iterations, 1000 ns apart (us = 1000 ns):
 *   step i at [1000i, 1000i + 900):
 *     fwd [+10, +400): kernel gemm_fwd 100 ns; attn [+100, +300): kernel flash_fwd 50 ns
 *     bwd [+400, +800): kernel gemm_bwd 200 ns, flash_bwd 80 ns
 *   an optimizer kernel launched at +850 directly in step: adam 30 ns
 * plus a kernel launched with no range open on another thread (helper: 7 ns at 1200, placed
 * in step/fwd/attn of thread 7, the thread with the most ranges), and one kernel whose launch
 * is not in the trace (unattributed: 11 ns).
 * Memory: 1 GB alloc at 5, 0.5 GB at 1100, released at 2100; a pool of 256 MB at 1500 growing
 * to 512 MB at 2500 (seen with a pool allocation that itself is not counted again). */
static void build_trace(builder *b) {
    memset(b, 0, sizeof *b);
    ap_trace_init(&b->t);
    const double GB = 1e9;
    mem(b, AP_REC_ALLOC, 5, 0x1000, (uint64_t)(1 * GB), 0);
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = 1000 * (uint64_t)i + 1000;
        uint32_t step = range_start(b, 7, t0, "step");
        uint32_t fwd = range_start(b, 7, t0 + 10, "fwd");
        kernel(b, 7, t0 + 20, t0 + 30, t0 + 130, "gemm_fwd");
        uint32_t attn = range_start(b, 7, t0 + 100, "attn");
        kernel(b, 7, t0 + 110, t0 + 140, t0 + 190, "flash_fwd");
        range_end(b, 7, t0 + 300, attn);
        range_end(b, 7, t0 + 400, fwd);
        uint32_t bwd = range_start(b, 7, t0 + 400, "bwd");
        kernel(b, 7, t0 + 410, t0 + 420, t0 + 620, "gemm_bwd");
        kernel(b, 7, t0 + 420, t0 + 620, t0 + 700, "flash_bwd");
        range_end(b, 7, t0 + 800, bwd);
        kernel(b, 7, t0 + 850, t0 + 860, t0 + 890, "adam");
        range_end(b, 7, t0 + 900, step);
    }
    kernel(b, 8, 1200, 1210, 1217, "helper");
    ap_trace_rec k = {0};
    k.kind = AP_REC_KERNEL;
    k.start_ns = 3950;
    k.end_ns = 3961;
    k.correlation = 77777;
    add(b, k, "orphan");
    mem(b, AP_REC_ALLOC, 1100, 0x2000, (uint64_t)(0.5 * GB), 0);
    pool(b, AP_POOL_CREATED, 1500, 0x9000, (uint64_t)(0.25 * GB));
    mem(b, AP_REC_ALLOC, 2500, 0xa000, (uint64_t)(0.1 * GB), AP_REC_FLAG_POOL);
    pool(b, AP_POOL_SIZE, 2500, 0x9000, (uint64_t)(0.5 * GB));
    mem(b, AP_REC_FREE, 2100, 0x2000, (uint64_t)(0.5 * GB), 0);
    mem(b, AP_REC_FREE, 2200, 0x7777, 12345, 0); /* unknown address: ignored */
    /* copies: two pinned H2D of 1 MB in 100 ns each, one pageable D2H */
    for (int i = 0; i < 3; i++) {
        ap_trace_rec c = {0};
        c.kind = AP_REC_MEMCPY;
        c.start_ns = 100 + 200 * (uint64_t)i;
        c.end_ns = c.start_ns + 100;
        c.bytes = 1000000;
        c.copy_dir = i < 2 ? AP_COPY_H2D : AP_COPY_D2H;
        c.src_kind = i < 2 ? AP_MEMK_PINNED : AP_MEMK_DEVICE;
        c.dst_kind = i < 2 ? AP_MEMK_DEVICE : AP_MEMK_PAGEABLE;
        add(b, c, NULL);
    }
    /* a range that never ends and an end without a start */
    range_start(b, 9, 3500, "dangling");
    range_end(b, 9, 3600, 4242);
}

static int find_node(const ap_trace *t, const ap_trace_summary *s, const char *path) {
    char buf[256];
    for (size_t i = 0; i < s->nnodes; i++)
        if (!strcmp(ap_trace_node_path(t, s, (uint32_t)i, buf, sizeof buf), path)) return (int)i;
    return -1;
}

static void test_names(void) {
    ap_trace t;
    ap_trace_init(&t);
    ap_status st;
    uint32_t a = ap_trace_intern(&t, "alpha", &st);
    uint32_t b = ap_trace_intern(&t, "beta", &st);
    CHECK(a != 0 && b != 0 && a != b);
    CHECK_INT(ap_trace_intern(&t, "alpha", &st), a);
    CHECK_INT(ap_trace_intern(&t, "", &st), 0);
    CHECK_STR(ap_trace_name(&t, a), "alpha");
    CHECK_STR(ap_trace_name(&t, 0), "");
    CHECK_STR(ap_trace_name(&t, 1u << 30), "");
    /* many names: the table grows and every name still maps to itself */
    char nm[32];
    uint32_t idx[3000];
    for (int i = 0; i < 3000; i++) {
        snprintf(nm, sizeof nm, "kernel_%d", i);
        idx[i] = ap_trace_intern(&t, nm, &st);
    }
    int ok = 1;
    for (int i = 0; i < 3000; i++) {
        snprintf(nm, sizeof nm, "kernel_%d", i);
        ok &= ap_trace_intern(&t, nm, &st) == idx[i] && !strcmp(ap_trace_name(&t, idx[i]), nm);
    }
    CHECK(ok);
    /* max_recs: records past it are counted, not stored */
    t.max_recs = 2;
    ap_trace_rec r = {0};
    r.kind = AP_REC_KERNEL;
    ap_err e;
    for (int i = 0; i < 5; i++) CHECK_INT(ap_trace_add(&t, &r, "k", &e), AP_OK);
    CHECK_INT(t.n, 2);
    CHECK_INT(t.dropped, 3);
    ap_trace_free(&t);
}

static void test_summary(void) {
    builder b;
    build_trace(&b);
    ap_trace_summary s;
    ap_err e;
    CHECK_INT(ap_trace_summarize(&b.t, NULL, &s, &e), AP_OK);
    /* kernels: 3 x (100 + 50 + 200 + 80 + 30) + 7 + 11 = 1398 ns */
    CHECK_INT(s.kernel_count, 17);
    CHECK_NEAR(s.kernel_s, 1398e-9, 1e-9);
    CHECK_INT(s.unattributed, 1);
    CHECK_INT(s.unmatched_ranges, 2);
    int step = find_node(&b.t, &s, "step"), fwd = find_node(&b.t, &s, "step/fwd");
    int attn = find_node(&b.t, &s, "step/fwd/attn"), bwd = find_node(&b.t, &s, "step/bwd");
    CHECK(step > 0 && fwd > 0 && attn > 0 && bwd > 0);
    if (step > 0 && fwd > 0 && attn > 0 && bwd > 0) {
        CHECK_INT(s.nodes[step].count, 3);
        CHECK_NEAR(s.nodes[step].wall_s, 3 * 900e-9, 1e-9);
        CHECK_NEAR(s.nodes[step].kernel_s, 3 * 30e-9, 1e-9);     /* adam only */
        CHECK_NEAR(s.nodes[step].kernel_incl_s, 3 * 460e-9 + 7e-9, 1e-9);
        CHECK_NEAR(s.nodes[fwd].kernel_s, 3 * 100e-9, 1e-9);
        CHECK_NEAR(s.nodes[fwd].kernel_incl_s, 3 * 150e-9 + 7e-9, 1e-9);
        CHECK_NEAR(s.nodes[attn].kernel_s, 3 * 50e-9 + 7e-9, 1e-9);
        CHECK_NEAR(s.nodes[bwd].kernel_s, 3 * 280e-9, 1e-9);
        CHECK_INT(s.nodes[attn].depth, 3);
    }
    /* root: the orphan; the helper went to thread 7's ranges */
    CHECK_NEAR(s.nodes[0].kernel_s, 11e-9, 1e-9);
    CHECK_INT(s.projected, 1);
    CHECK_INT(s.projected_thread, 7);
    CHECK(find_node(&b.t, &s, "dangling") > 0);
    /* per-kernel table: sorted by total, gemm_bwd first (600 ns) */
    CHECK(s.nkernels >= 7);
    if (s.nkernels) {
        CHECK_STR(ap_trace_name(&b.t, s.kernels[0].name), "gemm_bwd");
        CHECK_INT(s.kernels[0].calls, 3);
        CHECK_NEAR(s.kernels[0].total_s, 600e-9, 1e-9);
        CHECK_INT(s.kernels[0].node, bwd);
    }
    /* iterations: "step" is the repeated top-level range covering the most time */
    CHECK_STR(s.step_range, "step");
    CHECK_INT(s.niters, 3);
    if (s.niters == 3) {
        CHECK_NEAR(s.iters[0].wall_s, 1000e-9, 1e-9);
        CHECK_NEAR(s.iters[2].wall_s, 900e-9, 1e-9); /* the last: its own range */
        CHECK_INT(s.iters[1].kernels, 5);           /* the helper is on another thread but
                                                       launched at 1200, inside step 0 */
        CHECK_NEAR(s.iters[1].kernel_s, 460e-9, 1e-9);
        CHECK_NEAR(s.iters[1].gpu_span_s, (2890.0 - 2030.0) * 1e-9, 1e-9);
        CHECK_INT(s.iters[0].kernels, 6);
        /* peak inside iteration 0 [1000, 1900]: 1 GB + 0.5 GB (1100) + pool 0.25 GB (1500) */
        CHECK_NEAR(s.iters[0].peak_reserved_bytes, 1.75e9, 1e-12);
        /* iteration 1 [2000, 2900]: 1.75 at its start, 0.5 released at 2100, pool 0.5 at 2500 */
        CHECK_NEAR(s.iters[1].peak_reserved_bytes, 1.75e9, 1e-12);
        CHECK_NEAR(s.iters[2].peak_reserved_bytes, 1.5e9, 1e-12);
    }
    CHECK_NEAR(ap_trace_step_s(&s, 1), 0.5 * (1000e-9 + 900e-9), 1e-9);
    CHECK_NEAR(ap_trace_step_s(&s, 0), 1000e-9, 1e-9);
    CHECK_NEAR(ap_trace_step_s(&s, 5), 0, 0);
    /* kernel time per iteration: 467 (the helper's 7 in iteration 0), 460, 460 ns */
    CHECK_NEAR(s.iters[0].kernel_s, 467e-9, 1e-12);
    CHECK_NEAR(ap_trace_step_kernel_s(&s, 0), 460e-9, 1e-12);
    CHECK_NEAR(ap_trace_step_kernel_s(&s, 2), 460e-9, 1e-12);
    CHECK_NEAR(ap_trace_step_kernel_s(&s, 3), 0, 0);
    /* memory: peak 1.75 GB at 1500; end 1 GB + 0.5 GB pool */
    CHECK_NEAR(s.peak_reserved_bytes, 1.75e9, 1e-12);
    CHECK_INT(s.peak_at_ns, 1500);
    CHECK_NEAR(s.end_reserved_bytes, 1.5e9, 1e-12);
    CHECK_INT(s.ntimeline, 5); /* 2 allocations, 1 release, 2 pool sizes; the pool
                                  allocation and the release of an unknown address add none */
    /* copies */
    CHECK_INT(s.copies[AP_COPY_H2D][AP_MEMK_PINNED].calls, 2);
    CHECK_NEAR(s.copies[AP_COPY_H2D][AP_MEMK_PINNED].bytes, 2e6, 1e-12);
    CHECK_NEAR(s.copies[AP_COPY_H2D][AP_MEMK_PINNED].time_s, 200e-9, 1e-9);
    CHECK_INT(s.copies[AP_COPY_D2H][AP_MEMK_PAGEABLE].calls, 1);
    ap_trace_summary_free(&s);

    /* an explicit step range; a name that does not exist gives no iterations */
    ap_summary_opts o = {"fwd"};
    CHECK_INT(ap_trace_summarize(&b.t, &o, &s, &e), AP_OK);
    CHECK_INT(s.niters, 3);
    /* gemm_fwd 100 + flash_fwd 50 + the helper launched on thread 8 at 1200, inside the first
     * fwd range's time: iterations take every thread's launches */
    CHECK_NEAR(s.iters[0].kernel_s, 157e-9, 1e-9);
    ap_trace_summary_free(&s);
    o.step_range = "nothing";
    CHECK_INT(ap_trace_summarize(&b.t, &o, &s, &e), AP_OK);
    CHECK_INT(s.niters, 0);
    CHECK_STR(s.step_range, "");
    ap_trace_summary_free(&s);

    /* an empty trace summarises to zeros */
    ap_trace empty;
    ap_trace_init(&empty);
    CHECK_INT(ap_trace_summarize(&empty, NULL, &s, &e), AP_OK);
    CHECK_INT(s.nnodes, 1);
    CHECK_INT(s.kernel_count, 0);
    CHECK_INT(s.niters, 0);
    ap_trace_summary_free(&s);
    ap_trace_free(&b.t);
}

/* The autograd case: the training loop (thread 1) pushes step and backward ranges and waits
 * while thread 2 launches the backward's kernels with no range of its own; thread 3 has a
 * range of its own and launches once inside it and once after it. Thread 1's own launch
 * outside its ranges stays outside. */
static void test_projection(void) {
    builder b;
    memset(&b, 0, sizeof b);
    ap_trace_init(&b.t);
    /* a library's range on the autograd thread, once per step like "step" and named first
       (CUB's sort in PyTorch's embedding backward): not the iteration */
    for (int i = 0; i < 2; i++) {
        uint64_t t0 = 1000 * (uint64_t)(i + 1);
        uint32_t cub = range_start(&b, 2, t0 + 270, "cub::DeviceRadixSort");
        range_end(&b, 2, t0 + 280, cub);
    }
    for (int i = 0; i < 2; i++) {
        uint64_t t0 = 1000 * (uint64_t)(i + 1);
        uint32_t step = range_start(&b, 1, t0, "step");
        uint32_t fwd = range_start(&b, 1, t0 + 10, "forward");
        kernel(&b, 1, t0 + 20, t0 + 30, t0 + 130, "fwd_gemm");       /* 100 */
        range_end(&b, 1, t0 + 200, fwd);
        uint32_t bwd = range_start(&b, 1, t0 + 200, "backward");
        kernel(&b, 2, t0 + 250, t0 + 260, t0 + 460, "bwd_gemm");     /* 200: projected */
        kernel(&b, 2, t0 + 300, t0 + 460, t0 + 500, "bwd_elem");     /* 40: projected */
        range_end(&b, 1, t0 + 600, bwd);
        kernel(&b, 2, t0 + 650, t0 + 660, t0 + 670, "after_bwd");    /* 10: step itself */
        range_end(&b, 1, t0 + 900, step);
    }
    kernel(&b, 1, 3500, 3510, 3513, "between_steps");                /* 3: thread 1, no range */
    kernel(&b, 2, 3600, 3610, 3615, "late");                         /* 5: nothing open */
    uint32_t own = range_start(&b, 3, 1210, "loader");
    kernel(&b, 3, 1220, 1230, 1231, "in_own");                       /* 1: its own range */
    range_end(&b, 3, 1230, own);
    kernel(&b, 3, 1240, 1250, 1252, "after_own");                    /* 2: thread 1's backward */
    ap_trace_summary s;
    ap_err e;
    CHECK_INT(ap_trace_summarize(&b.t, NULL, &s, &e), AP_OK);
    CHECK_INT(s.projected_thread, 1);
    CHECK_INT(s.projected, 2 * 3 + 1);
    CHECK_STR(s.step_range, "step");
    int step = find_node(&b.t, &s, "step"), fwd = find_node(&b.t, &s, "step/forward");
    int bwd = find_node(&b.t, &s, "step/backward"), loader = find_node(&b.t, &s, "loader");
    CHECK(step > 0 && fwd > 0 && bwd > 0 && loader > 0);
    if (step > 0 && fwd > 0 && bwd > 0 && loader > 0) {
        CHECK_NEAR(s.nodes[bwd].kernel_s, 2 * 240e-9 + 2e-9, 1e-9);
        CHECK_NEAR(s.nodes[fwd].kernel_s, 2 * 100e-9, 1e-9);
        CHECK_NEAR(s.nodes[step].kernel_s, 2 * 10e-9, 1e-9);
        CHECK_NEAR(s.nodes[loader].kernel_s, 1e-9, 1e-12);
    }
    CHECK_NEAR(s.nodes[0].kernel_s, 8e-9, 1e-12); /* between_steps and late */
    /* the backward's kernels by kind per iteration (2 steps): bwd_gemm 200 ns a step; bwd_elem
       40 and after_own's 2 ns once */
    double k[AP_KKIND_COUNT];
    CHECK_INT(s.niters, 2);
    ap_trace_range_kinds(&b.t, &s, "backward", k);
    CHECK_NEAR(k[AP_KKIND_GEMM], 200e-9, 1e-12);
    CHECK_NEAR(k[AP_KKIND_ATTN], 0, 0);
    CHECK_NEAR(k[AP_KKIND_OTHER], 41e-9, 1e-12);
    ap_trace_range_kinds(&b.t, &s, "nothing", k);
    CHECK_NEAR(k[AP_KKIND_GEMM] + k[AP_KKIND_ATTN] + k[AP_KKIND_OTHER], 0, 0);
    ap_trace_summary_free(&s);
    ap_trace_free(&b.t);
}

/* Kernel names as CUDA libraries and PyTorch emit them, sorted into the cost model's parts. */
static void test_kernel_kinds(void) {
    static const struct { const char *name; int kind; } k[] = {
        {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", AP_KKIND_GEMM},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", AP_KKIND_GEMM},
        {"ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", AP_KKIND_GEMM},
        {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu>(Params)", AP_KKIND_GEMM},
        {"void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasSplitKParams)", AP_KKIND_GEMM},
        {"fmha_cutlassF_bf16_aligned_64x128_rf_sm80", AP_KKIND_ATTN},
        {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>(Flash_fwd_params)",
         AP_KKIND_ATTN},
        {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26", AP_KKIND_ATTN},
        {"MultiHeadAttention_backward", AP_KKIND_ATTN},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>", AP_KKIND_OTHER},
        {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", AP_KKIND_OTHER},
        {"", AP_KKIND_OTHER},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) CHECK_INT(ap_trace_kernel_kind(k[i].name), k[i].kind);
    CHECK_INT(ap_trace_kernel_kind(NULL), AP_KKIND_OTHER);
}

/* Ranges named as rows become profile rows, time = median kernel time per occurrence. */
static void test_rows_from_ranges(void) {
    builder b;
    memset(&b, 0, sizeof b);
    ap_trace_init(&b.t);
    /* a small shape: nanosecond kernels of a real one would beat the GPU's peak, which a
       profile row may not (profile.c) */
    const char *fwd = "attn_fwd impl=fa2,b=1,s=128,h=1,kvh=1,d=64,causal=1,window=0 bf16";
    /* 5 occurrences: kernel times 900 (warm-up), 100, 120, 110, 130 ns; the last one also has
     * a small helper kernel of 5 ns, nested in an inner range */
    const uint64_t dur[5] = {900, 100, 120, 110, 130};
    for (int i = 0; i < 5; i++) {
        uint64_t t0 = 10000 * (uint64_t)(i + 1);
        uint32_t id = range_start(&b, 1, t0, fwd);
        kernel(&b, 1, t0 + 1, t0 + 10, t0 + 10 + dur[i], "flash_fwd_kernel");
        if (i == 4) {
            uint32_t in = range_start(&b, 1, t0 + 2, "inner");
            kernel(&b, 1, t0 + 3, t0 + 200, t0 + 205, "small");
            range_end(&b, 1, t0 + 4, in);
        }
        range_end(&b, 1, t0 + 50, id);
    }
    uint32_t plain = range_start(&b, 1, 90000, "not a row");
    kernel(&b, 1, 90001, 90010, 90020, "x");
    range_end(&b, 1, 90050, plain);
    ap_profile p;
    ap_profile_init(&p);
    ap_profile_row tm = tmpl();
    size_t nrows = 0;
    ap_err e;
    CHECK_INT(ap_trace_profile_rows(&b.t, &tm, 1, &p, &nrows, &e), AP_OK);
    CHECK_INT(nrows, 1);
    CHECK_INT(p.n, 1);
    if (p.n == 1) {
        CHECK_STR(p.rows[0].op, "attn_fwd");
        CHECK_STR(p.rows[0].dtype, "bf16");
        CHECK_INT(p.rows[0].samples, 4);
        /* samples 100, 120, 110, 135: median (110 + 120) / 2 */
        CHECK_NEAR(p.rows[0].time_s, 115e-9, 1e-9);
        CHECK_NEAR(p.rows[0].spread, (135.0 - 100.0) / 115.0, 1e-9);
        CHECK_CONTAINS(p.rows[0].source, "flash_fwd_kernel");
        CHECK_STR(p.rows[0].source_run, "test-profile");
        CHECK(p.rows[0].flops_per_s > 0); /* derived from the shape */
    }
    /* a range that starts with an op but is not a valid row is refused, naming it */
    uint32_t badr = range_start(&b, 1, 100000, "gemm m=1,n=2 bf16");
    kernel(&b, 1, 100001, 100010, 100020, "y");
    range_end(&b, 1, 100050, badr);
    CHECK_INT(ap_trace_profile_rows(&b.t, &tm, 0, &p, &nrows, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "NVTX range 'gemm m=1,n=2 bf16'");
    CHECK_CONTAINS(e.msg, "missing key 'k'");
    ap_profile_free(&p);
    ap_trace_free(&b.t);
}

static void test_trace_file(void) {
    builder b;
    build_trace(&b);
    b.t.dropped = 12;
    snprintf(b.t.status, sizeof b.t.status, "all good");
    const char *dir = tl_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/t.aptrace", dir);
    ap_err e;
    CHECK_INT(ap_trace_write(&b.t, path, &e), AP_OK);
    ap_trace r;
    CHECK_INT(ap_trace_read(path, &r, &e), AP_OK);
    CHECK_INT(r.n, b.t.n);
    CHECK_INT(r.dropped, 12);
    CHECK_STR(r.status, "all good");
    CHECK(r.n == b.t.n && memcmp(r.recs, b.t.recs, r.n * sizeof *r.recs) == 0);
    int names_ok = 1;
    for (size_t i = 0; i < r.n; i++)
        names_ok &= !strcmp(ap_trace_name(&r, r.recs[i].name), ap_trace_name(&b.t, b.t.recs[i].name));
    CHECK(names_ok);
    /* interning keeps working on a trace read back */
    ap_status st;
    CHECK_INT(ap_trace_intern(&r, "gemm_fwd", &st), b.t.recs[1].name == 0 ? 0 : ap_trace_intern(&b.t, "gemm_fwd", &st));
    ap_trace_free(&r);

    /* bad files: each refused with a reason, never a crash */
    char *data = NULL;
    size_t len = 0;
    CHECK_INT(ap_read_file(path, 1 << 24, &data, &len, &e), AP_OK);
    CHECK_INT(ap_trace_parse(data, 10, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "shorter than");
    ap_trace_free(&r);
    CHECK_INT(ap_trace_parse(data, len - 1, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "truncated");
    ap_trace_free(&r);
    char *bad = malloc(len);
    memcpy(bad, data, len);
    bad[0] = 'X';
    CHECK_INT(ap_trace_parse(bad, len, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "bad magic");
    ap_trace_free(&r);
    memcpy(bad, data, len);
    size_t hdr = len - b.t.n * sizeof(ap_trace_rec) - b.t.names_len;
    ap_trace_rec rec;
    memcpy(&rec, bad + hdr, sizeof rec);
    rec.kind = 99;
    memcpy(bad + hdr, &rec, sizeof rec);
    CHECK_INT(ap_trace_parse(bad, len, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "record 0: unknown kind 99");
    ap_trace_free(&r);
    memcpy(bad, data, len);
    memcpy(&rec, bad + hdr, sizeof rec);
    rec.name = 2; /* inside "cudaLaunchKernel"? any index not after a NUL */
    while (((char *)bad)[len - b.t.names_len + rec.name - 1] == '\0') rec.name++;
    memcpy(bad + hdr, &rec, sizeof rec);
    CHECK_INT(ap_trace_parse(bad, len, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "is not a name");
    ap_trace_free(&r);
    memcpy(bad, data, len);
    bad[len - 1] = 'z';
    CHECK_INT(ap_trace_parse(bad, len, "x", &r, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "name table");
    ap_trace_free(&r);
    /* every truncation of the file is refused */
    int all_refused = 1;
    for (size_t cut = 0; cut < len; cut += 97) {
        all_refused &= ap_trace_parse(data, cut, "x", &r, &e) == AP_ERR_INPUT;
        ap_trace_free(&r);
    }
    CHECK(all_refused);
    free(bad);
    free(data);
    unlink(path);
    rmdir(dir);
    ap_trace_free(&b.t);
}

/* ---- statistics and host benchmarks -------------------------------------------------------------- */

static double fake_calls;
static double fake_fn(void *arg, ap_err *err) {
    (void)err;
    int *i = arg;
    fake_calls++;
    return (double)((*i)++ % 7 + 1); /* 1..7 repeating */
}
static double failing_fn(void *arg, ap_err *err) {
    (void)arg;
    ap_err_set(err, AP_ERR_CUDA, "device lost");
    return -1;
}

static void test_stats(void) {
    double v[] = {5, 1, 4, 2, 3};
    ap_bench_stats s;
    ap_bench_stats_of(v, 5, &s);
    CHECK_NEAR(s.median_s, 3, 0);
    CHECK_NEAR(s.spread, (5.0 - 1.0) / 3.0, 1e-15);
    double w[] = {4, 1, 3, 2};
    ap_bench_stats_of(w, 4, &s);
    CHECK_NEAR(s.median_s, 2.5, 0);
    /* warm-up calls are not timed; at least 20 timed calls even when fewer are asked */
    int i = 0;
    ap_err e;
    fake_calls = 0;
    CHECK_INT(ap_bench_repeat(fake_fn, &i, 3, 5, &s, &e), AP_OK);
    CHECK_INT(s.samples, AP_BENCH_MIN_REPS);
    CHECK_INT(fake_calls, 3 + AP_BENCH_MIN_REPS);
    /* calls 3..22 give 4,5,6,7,1,2,...: 20 values, each of 1..7 about 3 times; median 4 */
    CHECK_NEAR(s.median_s, 4, 0);
    CHECK_NEAR(s.min_s, 1, 0);
    CHECK_NEAR(s.max_s, 7, 0);
    CHECK_INT(ap_bench_repeat(failing_fn, NULL, 0, 20, &s, &e), AP_ERR_INTERNAL);
    CHECK_CONTAINS(e.msg, "device lost");
}

static void test_adam(void) {
    /* one step by hand, torch.optim.AdamW, lr 0.1, betas (0.9, 0.999), eps 1e-8, wd 0.01:
     *   p = 1.0, g = 0.5, m = v = 0, step 1:
     *   p <- 1 * (1 - 0.1 * 0.01) = 0.999
     *   m = 0.05, v = 0.00025; m_hat = 0.5, sqrt(v_hat) = 0.5
     *   p <- 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899 */
    float p = 1.0f, g = 0.5f, m = 0, v = 0;
    ap_adam_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.01, 1);
    CHECK_NEAR(m, 0.05, 1e-6); /* fp32 arithmetic: relative 1e-6 .. 1e-4 */
    CHECK_NEAR(v, 0.00025, 1e-4);
    CHECK_NEAR(p, 0.899, 1e-6);
    /* step 2 with the same gradient: m = 0.095, v = 0.00049975; m_hat = 0.095 / 0.19 = 0.5,
     * v_hat = 0.00049975 / 0.001999 = 0.25; p <- 0.899 * 0.999 - 0.1 * 0.5 / 0.5 = 0.798101 */
    ap_adam_update(&p, &g, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8, 0.01, 2);
    CHECK_NEAR(p, 0.798101, 1e-5);
}

static void test_hostbench(void) {
    ap_hostbench_opts o;
    ap_hostbench_opts_init(&o);
    o.threads = 2;
    o.membw_bytes = 1 << 20;
    o.adam_params = 1 << 16;
    ap_profile p;
    ap_profile_init(&p);
    ap_profile_row tm = tmpl();
    ap_err e;
    CHECK_INT(ap_hostbench_membw(&o, &tm, &p, &e), AP_OK);
    CHECK_INT(ap_hostbench_adam(&o, &tm, &p, &e), AP_OK);
    CHECK_INT(p.n, 5);
    if (p.n == 5) {
        /* STREAM counts: copy 2 words per element, triad 3 (1 MiB arrays = 131072 doubles) */
        CHECK_STR(p.rows[0].shape, "kind=copy,bytes=2097152");
        CHECK_STR(p.rows[3].shape, "kind=triad,bytes=3145728");
        CHECK_STR(p.rows[4].op, "host_adam");
        CHECK_STR(p.rows[4].shape, "params=65536,threads=2");
        CHECK_NEAR(p.rows[4].bytes, 28.0 * 65536, 0); /* derived: 28 bytes per parameter */
        int ok = 1;
        ap_err ce;
        for (size_t i = 0; i < p.n; i++)
            ok &= ap_profile_row_check(&p.rows[i], &ce) == AP_OK && p.rows[i].samples >= 20 &&
                  p.rows[i].time_s > 0 && p.rows[i].bytes_per_s > 0;
        CHECK(ok);
        CHECK_CONTAINS(p.rows[0].source, "STREAM copy");
    }
    o.membw_bytes = 100;
    CHECK_INT(ap_hostbench_membw(&o, &tm, &p, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "too small");
    o.adam_params = 10;
    CHECK_INT(ap_hostbench_adam(&o, &tm, &p, &e), AP_ERR_INPUT);
    ap_profile_free(&p);
}

/* ---- shapes and interpolation ---------------------------------------------------------------------- */

static int has_shape(const ap_gemm_shape *v, size_t n, int64_t m, int64_t nn, int64_t k,
                     const char *what) {
    for (size_t i = 0; i < n; i++)
        if (v[i].m == m && v[i].n == nn && v[i].k == k) return !what || strstr(v[i].what, what);
    return 0;
}

static void test_shapes(void) {
    ap_gemm_shape *v = NULL;
    size_t n = 0;
    ap_err e;
    CHECK_INT(ap_gemm_grid(&v, &n, &e), AP_OK);
    CHECK_INT(n, 216);
    CHECK(has_shape(v, n, 512, 16384, 1024, "grid"));
    free(v);
    v = NULL;
    n = 0;
    ap_model m;
    CHECK_INT(ap_model_load(tl_path("examples/models/llama-2-7b.json"), &m, &e), AP_OK);
    CHECK_INT(ap_gemm_model_shapes(&m, 2, 1, 4096, &v, &n, &e), AP_OK);
    /* tp 2: 16 heads per rank, 16 KV heads: qkv out (16 + 32) x 128 = 6144 */
    CHECK(has_shape(v, n, 4096, 6144, 4096, "qkv fwd tp2"));
    CHECK(has_shape(v, n, 4096, 4096, 6144, "qkv dgrad"));
    CHECK(has_shape(v, n, 6144, 4096, 4096, "qkv wgrad"));
    /* output projection, row-parallel: in 2048 */
    CHECK(has_shape(v, n, 4096, 4096, 2048, "o fwd"));
    /* SwiGLU gate+up fused: 2 x 11008 / 2 = 11008; down in 5504 */
    CHECK(has_shape(v, n, 4096, 11008, 4096, "mlp_up fwd"));
    CHECK(has_shape(v, n, 4096, 4096, 5504, "mlp_down fwd"));
    CHECK(has_shape(v, n, 11008, 4096, 4096, "mlp_up wgrad"));
    CHECK(has_shape(v, n, 4096, 5504, 4096, "mlp_down dgrad")); /* = its wgrad when T = h */
    CHECK(has_shape(v, n, 4096, 16000, 4096, "lm_head fwd"));
    CHECK(has_shape(v, n, 16000, 4096, 4096, "lm_head wgrad"));
    size_t n_tp2 = n;
    /* a second degree appends, duplicates merged */
    CHECK_INT(ap_gemm_model_shapes(&m, 2, 1, 4096, &v, &n, &e), AP_OK);
    CHECK_INT(n, n_tp2);
    CHECK_INT(ap_gemm_model_shapes(&m, 8, 1, 4096, &v, &n, &e), AP_OK);
    CHECK(n > n_tp2);
    CHECK(has_shape(v, n, 4096, 1536, 4096, "qkv fwd tp8"));
    CHECK_INT(ap_gemm_model_shapes(&m, 3, 1, 4096, &v, &n, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "--tp 3");
    free(v);
    /* a MoE model gets router and expert GEMMs at the average tokens per expert */
    v = NULL;
    n = 0;
    CHECK_INT(ap_model_load(tl_path("examples/models/mixtral-8x7b.json"), &m, &e), AP_OK);
    CHECK_INT(ap_gemm_model_shapes(&m, 1, 1, 4096, &v, &n, &e), AP_OK);
    /* 4096 tokens x top-2 / 8 experts = 1024 tokens; SwiGLU up 2 x 14336 */
    CHECK(has_shape(v, n, 1024, 28672, 4096, "expert_up fwd"));
    CHECK(has_shape(v, n, 4096, 8, 4096, "router fwd"));
    free(v);
}

static ap_profile_row gemm_row(int64_t m, int64_t n, int64_t k, double flops_per_s) {
    ap_profile_row r = tmpl();
    snprintf(r.op, sizeof r.op, "gemm");
    snprintf(r.shape, sizeof r.shape, "m=%lld,n=%lld,k=%lld", (long long)m, (long long)n,
             (long long)k);
    snprintf(r.dtype, sizeof r.dtype, "bf16");
    r.time_s = 2.0 * m * n * k / flops_per_s;
    r.samples = 20;
    return r;
}

static void test_loo(void) {
    ap_profile p;
    ap_profile_init(&p);
    ap_err e;
    /* constant throughput: time per FLOP is the same everywhere, so every point is predicted
     * exactly */
    for (int64_t m = 512; m <= 4096; m *= 2)
        for (int64_t k = 512; k <= 4096; k *= 2) {
            ap_profile_row r = gemm_row(m, 1024, k, 5e14);
            CHECK_INT(ap_profile_add(&p, &r, &e), AP_OK);
        }
    ap_loo_result res;
    CHECK_INT(ap_profile_loo(&p, "gemm", "bf16", NULL, NULL, &res, &e), AP_OK);
    CHECK_INT(res.points, 16);
    CHECK_INT(res.predicted, 16);
    CHECK_NEAR(res.max_abs_err, 0, 1e-9);
    /* efficiency rising with size (a saturating curve): errors are small but not zero, and
     * the largest error sits at a corner of the grid */
    ap_profile_free(&p);
    ap_profile_init(&p);
    for (int64_t m = 512; m <= 8192; m *= 2)
        for (int64_t k = 512; k <= 8192; k *= 2) {
            double f = 2.0 * m * 1024.0 * k;
            ap_profile_row r = gemm_row(m, 1024, k, 8e14 * f / (f + 4e9));
            CHECK_INT(ap_profile_add(&p, &r, &e), AP_OK);
        }
    CHECK_INT(ap_profile_loo(&p, "gemm", "bf16", NULL, NULL, &res, &e), AP_OK);
    CHECK_INT(res.predicted, 25);
    CHECK(res.median_abs_err > 0 && res.median_abs_err < 0.10);
    CHECK(res.max_abs_err >= res.median_abs_err);
    CHECK_CONTAINS(res.worst_shape, "m=512");
    /* the cost model's lookup on the same points: a 1-D curve in FLOPs, so it predicts every
     * point, less exactly where shapes of equal FLOPs differ */
    ap_loo_result km;
    CHECK_INT(ap_profile_loo(&p, "gemm", "bf16", ap_profile_predict_kernels, NULL, &km, &e), AP_OK);
    CHECK_INT(km.predicted, 25);
    CHECK(km.median_abs_err >= 0 && km.median_abs_err < 0.5);
    /* other dtypes are not mixed in */
    CHECK_INT(ap_profile_loo(&p, "gemm", "fp16", NULL, NULL, &res, &e), AP_OK);
    CHECK_INT(res.points, 0);
    ap_profile_free(&p);

    /* one size key: a power law time = c bytes^0.8 is interpolated exactly in log-log; the two
     * end points cannot be predicted (no extrapolation) */
    ap_profile_init(&p);
    for (int i = 10; i <= 30; i += 2) {
        ap_profile_row r = tmpl();
        snprintf(r.op, sizeof r.op, "memcpy");
        snprintf(r.shape, sizeof r.shape, "dir=h2d,mem=pinned,bytes=%lld", 1LL << i);
        snprintf(r.dtype, sizeof r.dtype, "none");
        r.time_s = 1e-9 * pow((double)(1LL << i), 0.8);
        r.samples = 20;
        CHECK_INT(ap_profile_add(&p, &r, &e), AP_OK);
        snprintf(r.shape, sizeof r.shape, "dir=d2h,mem=pinned,bytes=%lld", 1LL << i);
        r.time_s *= 3; /* another direction must not be used to predict h2d */
        CHECK_INT(ap_profile_add(&p, &r, &e), AP_OK);
    }
    CHECK_INT(ap_profile_loo(&p, "memcpy", "none", NULL, NULL, &res, &e), AP_OK);
    CHECK_INT(res.points, 22);
    CHECK_INT(res.predicted, 18);
    CHECK_NEAR(res.max_abs_err, 0, 1e-9);
    ap_profile_free(&p);
}

/* ---- identity and attach -------------------------------------------------------------------------- */

static void test_names_and_ids(void) {
    char buf[64];
    ap_profiler_default_name("h100-sxm", "node-a", 1763700000, buf, sizeof buf);
    CHECK_STR(buf, "h100-sxm-node-a-20251121-044000");
    /* device names as drivers report them -> catalog SKUs */
    static const struct { const char *dev; double gb; const char *sku; } devs[] = {
        {"NVIDIA H100 80GB HBM3", 85.5, "h100-sxm"},   {"NVIDIA H100 PCIe", 85.5, "h100-pcie"},
        {"NVIDIA H200", 150.1, "h200"},                {"NVIDIA A100-SXM4-80GB", 85.1, "a100-sxm4-80g"},
        {"NVIDIA A100-SXM4-40GB", 42.5, "a100-sxm4-40g"}, {"NVIDIA A100 80GB PCIe", 85.1, "a100-pcie-80g"},
        {"Tesla V100-SXM2-32GB", 34.1, "v100-sxm2-32g"}, {"NVIDIA GeForce RTX 4090", 25.3, "rtx-4090"},
        {"NVIDIA L40S", 48.3, "l40s"},                 {"NVIDIA B200", 191.5, "b200"},
        {"NVIDIA H800", 85.5, "h800-sxm"},
        {"NVIDIA A800-SXM4-80GB", 85.1, "a800-sxm4-80g"},
    };
    ap_err e;
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        char sku[64] = "";
        CHECK_INT(ap_profiler_gpu_sku(devs[i].dev, devs[i].gb * 1e9, sku, sizeof sku, &e), AP_OK);
        CHECK_STR(sku, devs[i].sku);
    }
    char sku[64];
    CHECK_INT(ap_profiler_gpu_sku("NVIDIA H100 NVL", 100e9, sku, sizeof sku, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "'NVIDIA H100 NVL'");
    CHECK_CONTAINS(e.msg, "--gpu NAME");
    CHECK_INT(ap_profiler_gpu_sku("NVIDIA L4", 24e9, sku, sizeof sku, &e), AP_ERR_INPUT);
    /* the PCIe export variants have no entry (their cards are not the SXM parts') */
    CHECK_INT(ap_profiler_gpu_sku("NVIDIA H800 PCIe", 85.5e9, sku, sizeof sku, &e), AP_ERR_INPUT);
    CHECK_INT(ap_profiler_gpu_sku("NVIDIA A800 80GB PCIe", 85.1e9, sku, sizeof sku, &e),
              AP_ERR_INPUT);
    ap_profiler_host(buf, sizeof buf);
    CHECK(buf[0] != '\0' && strlen(buf) <= 63);
}

static void test_attach(void) {
    ap_err e;
    ap_trace t;
    int code = 0;
    /* a program started through attach gets the environment; this one plays the injection
     * library: it copies a trace into AUTOPLAN_TRACE_FILE */
    builder b;
    build_trace(&b);
    const char *dir = tl_tmpdir();
    char src[512], lib[512], cmd[1400];
    snprintf(src, sizeof src, "%s/made.aptrace", dir);
    if (!tl_loaded_library("/libc.so", lib, sizeof lib)) snprintf(lib, sizeof lib, "/lib/x86_64-linux-gnu/libc.so.6");
    CHECK_INT(ap_trace_write(&b.t, src, &e), AP_OK);
    snprintf(cmd, sizeof cmd,
             "test \"$CUDA_INJECTION64_PATH\" = '%s' && cp '%s' \"$AUTOPLAN_TRACE_FILE\" && exit 3",
             lib, src);
    char *argv[] = {"sh", "-c", cmd, NULL};
    ap_attach_opts o = {0};
    o.argv = argv;
    o.inject_lib = lib;
    unsetenv("CUDA_INJECTION64_PATH");
    setenv("LD_PRELOAD", "", 1);
    /* libc stands in for the injection library: preloading it changes nothing */
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_OK);
    CHECK_INT(code, 3);
    CHECK_INT(t.n, b.t.n);
    ap_trace_free(&t);
    /* a status written by the library is the error */
    snprintf(b.t.status, sizeof b.t.status, "CUPTI: another subscriber is attached");
    CHECK_INT(ap_trace_write(&b.t, src, &e), AP_OK);
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_CUDA);
    CHECK_CONTAINS(e.msg, "another subscriber");
    ap_trace_free(&t);
    /* no trace left */
    char *quiet[] = {"true", NULL};
    o.argv = quiet;
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_CUDA);
    CHECK_CONTAINS(e.msg, "left no trace");
    ap_trace_free(&t);
    /* a program that does not exist */
    char *missing[] = {"/nonexistent/program", NULL};
    o.argv = missing;
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "cannot run '/nonexistent/program'");
    ap_trace_free(&t);
    /* another tool already attached */
    setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so", 1);
    o.argv = quiet;
    CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "CUDA_INJECTION64_PATH is already set");
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("LD_PRELOAD");
    ap_trace_free(&t);
    unlink(src);
    rmdir(dir);
    ap_trace_free(&b.t);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    ap_log_set_level(AP_LOG_ERROR);
    test_names();
    test_summary();
    test_projection();
    test_kernel_kinds();
    test_rows_from_ranges();
    test_trace_file();
    test_stats();
    test_adam();
    test_hostbench();
    test_shapes();
    test_loo();
    test_names_and_ids();
    test_attach();
    return tl_finish();
}
