/*
 * test_profile.c - the kernel-profile row format (costmodel/profile.c, docs/profiles.md).
 *
 * References: FLOP conventions worked by hand from the FlashAttention-2 paper's counting (Dao
 * 2023, Sec. 4.1: forward 4 s^2 d h per sequence, halved when causal; backward 2.5 x forward);
 * bus bandwidth factors from nccl-tests doc/PERFORMANCE.md (all-reduce 2(n-1)/n, all-gather
 * (n-1)/n); shapes and messages checked on literal inputs.
 */
#include "testlib.h"

#include "autoplan/profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static ap_profile_row row(const char *op, const char *shape, const char *dtype, double time_s) {
    ap_profile_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.gpu, sizeof r.gpu, "h100-sxm");
    snprintf(r.op, sizeof r.op, "%s", op);
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    snprintf(r.dtype, sizeof r.dtype, "%s", dtype);
    snprintf(r.source_run, sizeof r.source_run, "published");
    r.time_s = time_s;
    r.samples = 1;
    return r;
}

static void ok(const ap_profile_row *r) {
    ap_err err = {{0}};
    ap_status st = ap_profile_row_check(r, &err);
    if (st != AP_OK) fprintf(stderr, "unexpected refusal of %s %s: %s\n", r->op, r->shape, err.msg);
    CHECK_INT(st, AP_OK);
}

static void bad(ap_profile_row r, const char *want) {
    ap_err err = {{0}};
    CHECK_INT(ap_profile_row_check(&r, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, want);
}

static void test_vocabulary(void) {
    CHECK(ap_profile_op_count() >= 14);
    CHECK_STR(ap_profile_op_name(0), "gemm");
    CHECK_STR(ap_profile_op_keys(0), "m,n,k");
    CHECK_STR(ap_profile_op_keys(1), "impl,b,s,h,kvh,d,causal,window");
    CHECK(ap_profile_op_name(ap_profile_op_count()) == NULL);
    CHECK(ap_profile_op_keys(-1) == NULL);
}

static void test_valid_rows(void) {
    ok((ap_profile_row[]){row("gemm", "m=8192,n=8192,k=8192", "bf16", 1e-3)});
    ok((ap_profile_row[]){row("attn_fwd", "impl=fa2,b=1,s=4096,h=32,kvh=8,d=128,causal=1,window=0",
                              "bf16", 1e-3)});
    ok((ap_profile_row[]){row("allreduce", "ranks=8,level=nvlink,algo=ring,bytes=1073741824",
                              "bf16", 5e-3)});
    ok((ap_profile_row[]){row("sendrecv", "ranks=2,level=ib,bytes=65536", "bf16", 2e-5)});
    ok((ap_profile_row[]){row("memcpy", "dir=h2d,mem=pinned,bytes=1048576", "none", 5e-5)});
    ok((ap_profile_row[]){row("host_adam", "params=1000000,threads=16", "fp32", 2e-3)});
    ok((ap_profile_row[]){row("launch", "kind=kernel", "none", 4e-6)});
    ap_profile_row dm = row("device_mem", "kind=context", "none", 0);
    dm.bytes = 536870912;
    ok(&dm);
}

static void test_bad_rows(void) {
    bad(row("gemv", "m=1", "bf16", 1), "unknown operation 'gemv'");
    bad(row("gemm", "m=1,n=2", "bf16", 1), "missing key 'k'");
    bad(row("gemm", "n=1,m=2,k=3", "bf16", 1), "expected key 'm' at position 1");
    bad(row("gemm", "m=1,n=2,k=3,x=4", "bf16", 1), "unexpected text");
    bad(row("gemm", "m=0,n=2,k=3", "bf16", 1), "m must be an integer >= 1");
    bad(row("gemm", "m=-1,n=2,k=3", "bf16", 1), "m must be an integer");
    bad(row("gemm", "m=1.5,n=2,k=3", "bf16", 1), "m must be an integer");
    bad(row("gemm", "m=1,n=2,k=3", "int4", 1), "dtype 'int4': must be one of");
    bad(row("gemm", "m=1,n=2,k=3", "bf16", 0), "time_s: must be > 0");
    bad(row("gemm", "m=1,n=2,k=3", "bf16", NAN), "time_s: must be a finite number");
    bad(row("attn_fwd", "impl=fa9,b=1,s=1,h=1,kvh=1,d=1,causal=1,window=0", "bf16", 1),
        "impl must be one of");
    bad(row("attn_fwd", "impl=fa2,b=1,s=1,h=1,kvh=1,d=1,causal=2,window=0", "bf16", 1),
        "causal must be one of 0|1");
    bad(row("allreduce", "ranks=1,level=nvlink,algo=ring,bytes=8", "bf16", 1),
        "ranks must be an integer >= 2");
    bad(row("device_mem", "kind=context", "none", 0), "bytes: must be > 0");
    ap_profile_row r = row("gemm", "m=1,n=2,k=3", "bf16", 1);
    r.gpu[0] = '\0';
    bad(r, "gpu: must not be empty");
    r = row("gemm", "m=1,n=2,k=3", "bf16", 1);
    r.samples = 0;
    bad(r, "samples: must be >= 1");
    r = row("gemm", "m=1,n=2,k=3", "bf16", 1);
    memset(r.source, 'x', sizeof r.source); /* not NUL-terminated */
    bad(r, "source: longer than");
}

static void test_conventions(void) {
    /* gemm 8192^3 in 1 ms: 2 * 8192^3 = 1.0995e12 FLOPs -> 1.0995e15 FLOP/s */
    ap_profile_row g = row("gemm", "m=8192,n=8192,k=8192", "bf16", 1e-3);
    ap_profile_row_derive(&g);
    CHECK_NEAR(g.flops_per_s, 2.0 * 8192.0 * 8192.0 * 8192.0 / 1e-3, 1e-12);
    /* attention forward, causal, b 2, s 4096, h 16, d 128: 4 * 2 * 16 * 128 * 4096^2 / 2
     * = 1.37439e11 FLOPs; backward 2.5 x */
    ap_profile_row a = row("attn_fwd", "impl=fa2,b=2,s=4096,h=16,kvh=16,d=128,causal=1,window=0",
                           "bf16", 1e-3);
    CHECK_NEAR(ap_profile_row_flops(&a), 4.0 * 2 * 16 * 128 * 4096.0 * 4096.0 / 2, 1e-12);
    ap_profile_row ab = a;
    snprintf(ab.op, sizeof ab.op, "attn_bwd");
    CHECK_NEAR(ap_profile_row_flops(&ab), 2.5 * ap_profile_row_flops(&a), 1e-12);
    /* not causal: twice the causal count */
    ap_profile_row an = row("attn_fwd", "impl=fa2,b=2,s=4096,h=16,kvh=16,d=128,causal=0,window=0",
                            "bf16", 1e-3);
    CHECK_NEAR(ap_profile_row_flops(&an), 2 * ap_profile_row_flops(&a), 1e-12);
    /* causal sliding window 1024 over 4096: pairs 4096 * 1024 - 1024^2 / 2 = 3670016 */
    ap_profile_row aw = row("attn_fwd",
                            "impl=fa2,b=1,s=4096,h=1,kvh=1,d=1,causal=1,window=1024", "bf16", 1);
    CHECK_NEAR(ap_profile_row_flops(&aw), 4.0 * 3670016.0, 1e-12);
    /* a window at least the sequence is no window */
    ap_profile_row aw2 = row("attn_fwd",
                             "impl=fa2,b=1,s=4096,h=1,kvh=1,d=1,causal=1,window=8192", "bf16", 1);
    CHECK_NEAR(ap_profile_row_flops(&aw2), 4.0 * 4096.0 * 4096.0 / 2, 1e-12);
    /* all-reduce of 1 GiB over 8 ranks in 5 ms: algbw 214.7 GB/s, busbw x 2 * 7/8 */
    ap_profile_row c = row("allreduce", "ranks=8,level=nvlink,algo=ring,bytes=1073741824", "bf16",
                           5e-3);
    ap_profile_row_derive(&c);
    CHECK_NEAR(c.bytes, 1073741824.0, 1e-12);
    CHECK_NEAR(c.bytes_per_s, 1073741824.0 / 5e-3 * 1.75, 1e-12);
    CHECK_NEAR(ap_profile_busbw_factor("allgather", 4), 0.75, 1e-12);
    CHECK_NEAR(ap_profile_busbw_factor("sendrecv", 2), 1.0, 1e-12);
    CHECK_NEAR(ap_profile_busbw_factor("gemm", 8), 0.0, 1e-12);
    /* host Adam: 1e6 params in 2 ms touch 28 bytes each: 1.4e10 B/s */
    ap_profile_row h = row("host_adam", "params=1000000,threads=16", "fp32", 2e-3);
    ap_profile_row_derive(&h);
    CHECK_NEAR(h.bytes_per_s, 28e6 / 2e-3, 1e-12);
    /* a rate given stays */
    ap_profile_row m = row("membound", "kind=copy,bytes=1000", "bf16", 1e-6);
    m.bytes_per_s = 5;
    ap_profile_row_derive(&m);
    CHECK_NEAR(m.bytes_per_s, 5, 1e-12);
}

static void test_shape_readers(void) {
    double v = -1;
    char buf[16];
    const char *s = "impl=fa3,b=1,s=8192,h=64,kvh=8,d=128,causal=1,window=0";
    CHECK(ap_profile_shape_num(s, "s", &v) && v == 8192);
    CHECK(ap_profile_shape_num(s, "h", &v) && v == 64);
    CHECK(!ap_profile_shape_num(s, "impl", &v)); /* text, not a number */
    CHECK(!ap_profile_shape_num(s, "x", &v));
    CHECK(ap_profile_shape_text(s, "impl", buf, sizeof buf));
    CHECK_STR(buf, "fa3");
    CHECK(ap_profile_shape_text(s, "impl", buf, 3));
    CHECK_STR(buf, "fa"); /* truncated, NUL-terminated */
    CHECK(!ap_profile_shape_text(NULL, "s", buf, sizeof buf));
}

static void test_set(void) {
    ap_profile p;
    ap_profile_init(&p);
    ap_err err = {{0}};
    for (int i = 1; i <= 200; i++) {
        char shape[64];
        snprintf(shape, sizeof shape, "m=%d,n=1024,k=1024", i * 64);
        ap_profile_row r = row("gemm", shape, "bf16", 1e-4 * i);
        CHECK_INT(ap_profile_add(&p, &r, &err), AP_OK);
    }
    CHECK_INT(p.n, 200);
    CHECK(p.rows[199].flops_per_s > 0); /* derived on add */
    ap_profile_row r = row("gemm", "m=1", "bf16", 1);
    CHECK_INT(ap_profile_add(&p, &r, &err), AP_ERR_INPUT);
    CHECK_INT(p.n, 200); /* refused rows are not added */
    ap_profile_free(&p);
    CHECK(p.rows == NULL && p.n == 0);
    ap_profile_free(NULL);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_valid_rows();
    test_bad_rows();
    test_conventions();
    test_shape_readers();
    test_set();
    test_vocabulary();
    return tl_finish();
}
