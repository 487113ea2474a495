/*
 * test_request.c - the request API (request.h): defaults resolved as the commands document them
 * (README: sequence from the model, global batch 4M tokens / sequence for plan, degrees 1 for
 * estimate), contradictions refused naming the flag, the estimate request of a plan reproducing
 * its estimate exactly, and the plan-cache key covering every search input (issue 14 item 1):
 * each row of the plan table and of the search table changed in turn changes the key, and the
 * tables cover every byte of the structs they describe but padding.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/profile.h"
#include "autoplan/hetero.h"
#include "autoplan/request.h"
#include "autoplan/result.h"
#include "testlib.h"

static ap_resolved R; /* large: not on the stack */

static void base_request(ap_request *rq) {
    ap_request_init(rq);
    rq->model = tl_path("examples/models/llama-2-7b.json");
    rq->gpus.given = 1;
    rq->gpus.v = 8;
}

static void set_pin(ap_request *rq, const char *name, double v) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    const ap_field *f = ap_field_find(t, n, name);
    CHECK(f != NULL);
    if (!f) return;
    ap_field_put(f, &rq->plan, v);
    ap_request_give(&rq->plan_given, (int)(f - t));
}

static void test_estimate_defaults(void) {
    ap_request rq;
    base_request(&rq);
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &R, &err), AP_OK);
    const ap_plan *p = &R.plan;
    CHECK_INT(p->tp, 1); CHECK_INT(p->pp, 1); CHECK_INT(p->cp, 1); CHECK_INT(p->dp, 8);
    CHECK_INT(p->mbs, 1);
    CHECK_INT(p->gbs, 8); /* mbs x dp */
    CHECK_INT(p->grad_accum, 1);
    CHECK_INT(p->seq, 4096); /* the model file's seq_len */
    CHECK_INT(p->zero, 0);
    CHECK_INT(p->dtype, AP_DTYPE_BF16);
    CHECK_NEAR(R.est.headroom_bytes, 2.0 * 1073741824.0, 1e-12); /* README: default 2GiB */
    /* V100 has no bf16 tensor cores: fp16 */
    rq.gpu = "v100";
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &R, &err), AP_OK);
    CHECK_INT(R.plan.dtype, AP_DTYPE_FP16);
}

static void test_search_defaults(void) {
    ap_request rq;
    base_request(&rq);
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_SEARCH, &R, &err), AP_OK);
    CHECK_INT(R.search.gbs, 960); /* 4,000,000 tokens / 4096 = 976.6, to a multiple of 64 */
    CHECK_CONTAINS(R.note, "default 4M tokens per step");
    CHECK_INT(R.search.fixed.tp, 0);
    CHECK_INT(R.search.fixed.zero, -1);
    CHECK_INT(R.search.top_k, 10);
    CHECK_INT(R.partition, 1);
    rq.tokens_per_step.given = 1;
    rq.tokens_per_step.v = 1048576;
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_SEARCH, &R, &err), AP_OK);
    CHECK_INT(R.search.gbs, 256);
    /* an explicit 0 pins "no offload" (-1 for the search), absent leaves it free (0) */
    base_request(&rq);
    set_pin(&rq, "offload_optimizer", 0);
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_SEARCH, &R, &err), AP_OK);
    CHECK(R.search.fixed.offload_optimizer < 0);
    CHECK(R.search.fixed.offload_params == 0);
}

static void refused(ap_request *rq, ap_request_mode mode, const char *needle) {
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(rq, mode, &R, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, needle);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_refusals(void) {
    ap_request rq;
    base_request(&rq);
    set_pin(&rq, "gbs", 512);
    rq.tokens_per_step.given = 1;
    rq.tokens_per_step.v = 1e6;
    refused(&rq, AP_REQUEST_SEARCH, "give --gbs or --tokens-per-step, not both");
    base_request(&rq);
    set_pin(&rq, "recompute_layers", 2);
    refused(&rq, AP_REQUEST_ESTIMATE, "--recompute-layers needs --recompute full");
    set_pin(&rq, "recompute", AP_RECOMPUTE_FULL);
    set_pin(&rq, "recompute_layers", 99); /* llama-2-7b has 32 layers */
    refused(&rq, AP_REQUEST_ESTIMATE, "--recompute-layers: 99 is more than the model's 32 layers");
    base_request(&rq);
    set_pin(&rq, "tp", 2);
    rq.fix.tp = 4;
    ap_request_give(&rq.fix_given, 1);
    refused(&rq, AP_REQUEST_SEARCH, "contradicts --tp 2");
    base_request(&rq);
    set_pin(&rq, "tp", 3);
    refused(&rq, AP_REQUEST_SEARCH, "--tp 3 does not divide --gpus 8");
    base_request(&rq);
    set_pin(&rq, "tp", 3);
    refused(&rq, AP_REQUEST_ESTIMATE, "--gpus 8 is not divisible by tp*pp*cp = 3");
    base_request(&rq);
    rq.gpus.given = 0;
    refused(&rq, AP_REQUEST_ESTIMATE, "--gpus is required");
    base_request(&rq);
    rq.model = NULL;
    refused(&rq, AP_REQUEST_ESTIMATE, "missing MODEL");
    /* pins no plan can make legal, refused before a search answers "nothing fits" */
    base_request(&rq);
    set_pin(&rq, "dtype", AP_DTYPE_FP32);
    refused(&rq, AP_REQUEST_SEARCH, "megatron trains in bf16, fp16 or fp8, not fp32");
    base_request(&rq);
    set_pin(&rq, "attn_impl", AP_ATTN_FA3); /* Hopper's kernel; the default GPU is an A100 */
    refused(&rq, AP_REQUEST_SEARCH, "attention 'fa3' does not run on a100-sxm4-80g");
    base_request(&rq);
    int nf;
    const ap_field *ft = ap_plan_fields(&nf);
    const ap_field *fep = ap_field_find(ft, nf, "ep");
    CHECK(fep != NULL);
    if (fep) {
        ap_field_put(fep, &rq.fix, 2);
        ap_request_give(&rq.fix_given, (int)(fep - ft));
    }
    refused(&rq, AP_REQUEST_SEARCH, "is a dense model");
    /* the cpu device is the runtime's (autoplan run): a GPU trainer's search there is refused,
       not answered "nothing fits" */
    base_request(&rq);
    rq.gpu = "cpu";
    rq.gpus.v = 2;
    refused(&rq, AP_REQUEST_SEARCH, "megatron does not run on the cpu device");
    /* a cluster file's field set by a flag: the message names the flag too */
    static char cfile[4096]; /* tl_path's buffer also holds the model's path */
    snprintf(cfile, sizeof cfile, "%s", tl_path("examples/clusters/dgx-a100.json"));
    base_request(&rq);
    rq.gpus.v = 12;
    rq.cluster_file = cfile;
    refused(&rq, AP_REQUEST_SEARCH, "dgx-a100.json with --gpus: field 'gpus'");
}

/* The request of a plan estimates that plan as the search did, and its command-line text is
 * the flags of `autoplan estimate`. */
static void test_for_plan(void) {
    ap_request rq, one;
    base_request(&rq);
    rq.network_bw.given = 1;
    rq.network_bw.v = 50e9;
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_SEARCH, &R, &err), AP_OK);
    ap_search_opts so = R.search;
    ap_model m = R.model;
    ap_cluster c = R.cluster;
    ap_search_result sr;
    CHECK_INT(ap_search(&m, &c, &so, &sr, &err), AP_OK);
    CHECK(sr.ntop >= 3);
    for (int i = 0; i < sr.ntop; i++) {
        ap_request_for_plan(&rq, &sr.top[i].plan, &one);
        static ap_resolved r2;
        CHECK_INT(ap_request_resolve(&one, AP_REQUEST_ESTIMATE, &r2, &err), AP_OK);
        static ap_estimate e;
        CHECK_INT(ap_estimate_plan(&r2.model, &r2.cluster, &r2.plan, &r2.est, &e, &err), AP_OK);
        CHECK(e.time.step_s == sr.top[i].time.step_s);
        CHECK(e.device_peak_bytes == sr.top[i].device_peak_bytes);
        ap_strbuf b = {0};
        ap_request_format(&one, &b);
        CHECK_CONTAINS(b.buf, "--gpus 8 --network-bw 400Gb/s --trainer megatron --tp ");
        ap_strbuf_free(&b);
    }
    ap_search_result_free(&sr);
    /* a model path that needs quoting is quoted for the shell, on one line */
    ap_request q;
    ap_request_init(&q);
    q.model = "my model's\n$(dir)/config.json";
    ap_strbuf b = {0};
    ap_request_format(&q, &b);
    CHECK_STR(b.buf, "$'my model\\'s\\x0a$(dir)/config.json'");
    ap_strbuf_free(&b);
}

/* ---- the cache key (issue 14 item 1) ---------------------------------------------------------- */

static void key_of(const ap_resolved *r, char *out, size_t n) {
    ap_strbuf b = {0};
    ap_search_key_text(r, &r->cluster, 7, &b);
    snprintf(out, n, "%s", b.buf ? b.buf : "");
    ap_strbuf_free(&b);
}

/* A different value for row f of obj: another accepted one where the range allows. */
static void perturb(const ap_field *f, void *obj) {
    double v = ap_field_get(f, obj);
    switch (f->kind) {
    case AP_FT_BOOL: ap_field_put(f, obj, !v); break;
    case AP_FT_ENUM: ap_field_put(f, obj, ((int)v + 1) % f->nvalues); break;
    case AP_FT_REAL: ap_field_put(f, obj, v == 0.25 ? 0.5 : 0.25); break;
    case AP_FT_CHUNKS:
        ap_field_put(f, obj, 2);
        *ap_field_chunk(f, obj, 0) = 7;
        *ap_field_chunk(f, obj, 1) = 9;
        break;
    default: ap_field_put(f, obj, v == 3 ? 2 : 3);
    }
}

static void test_key_covers_every_field(void) {
    ap_request rq;
    base_request(&rq);
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_SEARCH, &R, &err), AP_OK);
    static char k0[8192], k1[8192];
    key_of(&R, k0, sizeof k0);
    static ap_resolved r;
    int n, changed = 0, rows = 0;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++, rows++) {
        r = R;
        perturb(&t[i], &r.search.fixed);
        key_of(&r, k1, sizeof k1);
        if (strcmp(k0, k1) != 0) changed++;
        else fprintf(stderr, "the key misses plan member %s\n", t[i].name);
    }
    t = ap_search_fields(&n);
    for (int i = 0; i < n; i++, rows++) {
        r = R;
        perturb(&t[i], &r);
        key_of(&r, k1, sizeof k1);
        if (strcmp(k0, k1) != 0) changed++;
        else fprintf(stderr, "the key misses search input %s\n", t[i].name);
    }
    CHECK_INT(changed, rows);
    /* the model, the cluster, the calibration and the profiles */
    r = R;
    r.model.layers = 31;
    key_of(&r, k1, sizeof k1);
    CHECK(strcmp(k0, k1) != 0);
    r = R;
    snprintf(r.model.name, sizeof r.model.name, "renamed");
    key_of(&r, k1, sizeof k1);
    CHECK(strcmp(k0, k1) != 0);
    r = R;
    r.cluster.net_bytes_per_s *= 2;
    key_of(&r, k1, sizeof k1);
    CHECK(strcmp(k0, k1) != 0);
    ap_calib cal;
    ap_calib_default(&R.cluster.gpu, &cal);
    cal.net_eff *= 0.9;
    r = R;
    r.search.est.calib = &cal;
    key_of(&r, k1, sizeof k1);
    CHECK(strcmp(k0, k1) != 0);
    /* a measured profile in the options, by content */
    static ap_profile prof;
    ap_profile_init(&prof);
    snprintf(prof.gpu, sizeof prof.gpu, "%s", R.cluster.gpu.name);
    r = R;
    r.search.est.profile = &prof;
    key_of(&r, k1, sizeof k1);
    CHECK(strcmp(k0, k1) != 0);
    ap_strbuf b = {0};
    ap_search_key_text(&R, &R.cluster, 8, &b);
    CHECK(strcmp(k0, b.buf) != 0);
    ap_strbuf_free(&b);
}

/* Bytes of a struct not covered by a table must be padding: each uncovered run ends where the
 * next covered member starts on its alignment, or at the end of the struct, and is shorter
 * than 8 bytes. A member missing from a table shows as a longer run or one in the middle. */
static int mark(unsigned char *cov, size_t size, const ap_field *t, int n, size_t base) {
    for (int i = 0; i < n; i++) {
        size_t w = t[i].kind == AP_FT_I64 || t[i].kind == AP_FT_REAL ? 8 : 4;
        size_t len = t[i].kind == AP_FT_CHUNKS ? (size_t)t[i].nvalues * 4 : w;
        if (base + t[i].offset + len > size) return 0;
        memset(cov + base + t[i].offset, 1, len);
    }
    return 1;
}

static int uncovered_is_padding(const unsigned char *cov, size_t size, const char *what) {
    int ok = 1;
    for (size_t i = 0; i < size;) {
        if (cov[i]) { i++; continue; }
        size_t j = i;
        while (j < size && !cov[j]) j++;
        if (j - i >= 8 || (j < size && j % 8 != 0 && j - i >= 4)) {
            fprintf(stderr, "%s: bytes [%zu, %zu) are in no table row\n", what, i, j);
            ok = 0;
        }
        i = j;
    }
    return ok;
}

static void test_tables_cover_the_structs(void) {
    int n;
    static unsigned char cov[sizeof(ap_resolved)];
    memset(cov, 0, sizeof cov);
    const ap_field *t = ap_plan_fields(&n);
    CHECK(mark(cov, sizeof(ap_plan), t, n, 0));
    CHECK(uncovered_is_padding(cov, sizeof(ap_plan), "ap_plan"));
    /* ap_search_opts: fixed (the plan table), the search table's rows, and what the key leaves
     * out on purpose (the visit callbacks, their context and record size; the calibration
     * pointer: keyed by value; the worker threads and answer_only: the answer does not depend
     * on them, test_search; the estimate's layer-price memo) */
    memset(cov, 0, sizeof cov);
    size_t so = offsetof(ap_resolved, search);
    CHECK(mark(cov, sizeof cov, t, n, so + offsetof(ap_search_opts, fixed)));
    t = ap_search_fields(&n);
    CHECK(mark(cov, sizeof cov, t, n, 0));
    memset(cov + so + offsetof(ap_search_opts, visit), 1,
           offsetof(ap_search_opts, visit_rec_size) + sizeof(size_t) -
               offsetof(ap_search_opts, visit));
    memset(cov + so + offsetof(ap_search_opts, threads), 1, sizeof(int));
    /* answer_only: the ranking does not depend on it either (test_search), and no cached
     * search sets it; the simulation cutoff is the search's own, per plan */
    memset(cov + so + offsetof(ap_search_opts, answer_only), 1, sizeof(int));
    /* step_bound_s does change the ranking, but only fit's searches set it and they are not
     * cached (the plan cache stores `autoplan plan`'s searches, which never set it) */
    memset(cov + so + offsetof(ap_search_opts, step_bound_s), 1, sizeof(double));
    /* any_fit leaves a partial ranking: only fit's verdicts set it, and they are not cached */
    memset(cov + so + offsetof(ap_search_opts, any_fit), 1, sizeof(int));
    /* no_closest changes no ranking (test_search); only fit's evaluations set it */
    memset(cov + so + offsetof(ap_search_opts, no_closest), 1, sizeof(int));
    /* shared simulation templates: they remember simulations, they do not change them */
    memset(cov + so + offsetof(ap_search_opts, hetero_templates), 1, sizeof(void *));
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, sim_cutoff_s), 1,
           sizeof(double));
    /* the simulations' early stop: the search sets it itself where it keeps the ranking
       (search.h any_fit and answer_only), as it sets the cutoff */
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, sim_stop_unfit),
           1, sizeof(int));
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, sim_stop_over),
           1, sizeof(double));
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, sim_stop_early),
           1, sizeof(int));
    /* the layer-price memo: it remembers prices, it does not change them (estimate.h) */
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, cache), 1,
           sizeof(void *));
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, calib), 1,
           sizeof(void *));
    /* ranks_only: partial estimates for the stage tables; a search refuses it */
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, ranks_only), 1,
           sizeof(void *));
    /* plan_checked: skips a check the search has just made; the answer is the same */
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, plan_checked), 1,
           sizeof(int));
    /* the measured profile and the kernel tables built from it: keyed by the profile's content */
    memset(cov + so + offsetof(ap_search_opts, est) + offsetof(ap_estimate_opts, profile), 1,
           sizeof(void *) * 2);
    CHECK(uncovered_is_padding(cov + so, sizeof(ap_search_opts), "ap_search_opts"));
}

/* A plan with a heterogeneous placement keeps it through its result entry (result.h), so a
 * cached Gemini or ZeRO-Infinity plan decodes to the plan that was searched. */
static void test_result_entry_keeps_placement(void) {
    ap_request rq;
    base_request(&rq);
    int n;
    const ap_field *t = ap_plan_fields(&n);
    set_pin(&rq, "trainer", AP_TRAINER_COLOSSALAI);
    set_pin(&rq, "zero", 3);
    set_pin(&rq, "offload_optimizer", 1);
    rq.gemini.given = 1;
    rq.gemini.v = AP_GEMINI_STATIC;
    ap_err err = {{0}};
    CHECK_INT(ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &R, &err), AP_OK);
    CHECK(ap_hetero_applies(&R.plan));
    static ap_estimate e;
    CHECK_INT(ap_hetero_estimate(&R.model, &R.cluster, &R.plan, &R.est, NULL, &e, &err), AP_OK);
    ap_json *j = ap_result_plan_json(&e, &R.model);
    CHECK(j != NULL);
    ap_plan p;
    CHECK_INT(ap_result_plan_decode(j, &R.model, &R.cluster, &p, "entry", &err), AP_OK);
    CHECK_INT(p.hetero.placement, AP_GEMINI_STATIC);
    CHECK(p.hetero.offload_optim_frac == e.plan.hetero.offload_optim_frac);
    char a[160], b[160];
    CHECK_STR(ap_plan_label(&p, a, sizeof a), ap_plan_label(&e.plan, b, sizeof b));
    ap_json_free(j);
    (void)t;
    (void)n;
}

/* A request marks the plan rows it was given in a 64-bit mask (request.h plan_given): every
 * row a flag or plan.json can give lies within it, and rows past it are never marked given. */
static void test_given_rows_fit_the_mask(void) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 64; i < n; i++) {
        if (t[i].flag || t[i].json) fprintf(stderr, "row %d (%s) past the mask\n", i, t[i].name);
        CHECK(t[i].flag == NULL && t[i].json == NULL);
    }
    uint64_t all = ~(uint64_t)0;
    CHECK(ap_request_row_given(all, 63));
    CHECK(!ap_request_row_given(all, 64));
    CHECK(!ap_request_row_given(all, -1));
    /* the last row a request can give, and the first it cannot */
    CHECK(ap_request_given(all, "zero_group"));
    CHECK(!ap_request_given(all, "dp_bucket_params"));
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    ap_log_set_level(AP_LOG_ERROR);
    test_estimate_defaults();
    test_search_defaults();
    test_refusals();
    test_for_plan();
    test_key_covers_every_field();
    test_tables_cover_the_structs();
    test_result_entry_keeps_placement();
    test_given_rows_fit_the_mask();
    return tl_finish();
}
