/*
 * test_search.c - properties of every plan the search returns, pruning safety against the
 * unpruned enumeration, the best plan against an independent brute force, --fix, the
 * nothing-fits path, and the sweep / time-to-train arithmetic of `autoplan plan`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/json.h"
#include "autoplan/partition.h"
#include "autoplan/search.h"
#include "autoplan/hetero.h"
#include "testlib.h"

static ap_model load(const char *rel) {
    ap_model m;
    ap_err err;
    if (ap_model_load(tl_path(rel), &m, &err) != AP_OK) {
        fprintf(stderr, "cannot load %s: %s\n", rel, err.msg);
        ap_model_init(&m);
    }
    return m;
}

static ap_cluster cluster(const char *gpu, int n) {
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find(gpu), n, &c);
    return c;
}

/* Every returned plan is legal for its trainer, fits, and is sorted. */
static void check_result(const ap_model *m, const ap_cluster *c, const ap_search_opts *o,
                         const ap_search_result *r) {
    ap_err err;
    static ap_estimate e;
    for (int i = 0; i < r->ntop; i++) {
        const ap_estimate *x = &r->top[i];
        CHECK(ap_plan_check(&x->plan, m, c, o->allow_cross_node_tp, &err) == AP_OK);
        CHECK(x->fits);
        CHECK(x->device_peak_bytes + o->est.headroom_bytes <= x->capacity_bytes);
        CHECK_INT((int64_t)x->plan.tp * x->plan.pp * x->plan.cp * x->plan.dp, c->gpus);
        CHECK_INT(x->plan.gbs, o->gbs);
        CHECK_INT(x->plan.gbs % (x->plan.mbs * x->plan.dp), 0);
        CHECK(m->heads % x->plan.tp == 0);
        CHECK(x->plan.tp <= c->nvlink_domain || o->allow_cross_node_tp);
        if (x->plan.vp > 1) CHECK(x->plan.pp > 1 && m->layers % (x->plan.pp * x->plan.vp) == 0);
        if (i > 0) CHECK(r->top[i - 1].time.step_s <= x->time.step_s);
        /* the stored estimate is what a fresh estimate of the plan gives (the simulation for
           Gemini placements and DeepSpeed offload devices, hetero.h) */
        if (ap_hetero_applies(&x->plan))
            CHECK(ap_hetero_estimate(m, c, &x->plan, &o->est, NULL, &e, &err) == AP_OK);
        else
            CHECK(ap_estimate_plan(m, c, &x->plan, &o->est, &e, &err) == AP_OK);
        CHECK_NEAR(e.time.step_s, x->time.step_s, 1e-12);
        CHECK_NEAR(e.device_peak_bytes, x->device_peak_bytes, 1e-12);
    }
}

static void same_top(const ap_search_result *a, const ap_search_result *b) {
    CHECK_INT(a->ntop, b->ntop);
    for (int i = 0; i < a->ntop && i < b->ntop; i++) {
        CHECK(memcmp(&a->top[i].plan, &b->top[i].plan, sizeof(ap_plan)) == 0);
        CHECK_NEAR(a->top[i].time.step_s, b->top[i].time.step_s, 1e-12);
    }
}

static void test_cases(void) {
    struct { const char *model; const char *gpu; int n; int64_t gbs; ap_trainer_id tr; } cases[] = {
        {"examples/models/llama-2-7b.json", "a100-sxm4-80g", 8, 64, AP_TRAINER_MEGATRON},
        {"examples/models/llama-3-70b.json", "h100-sxm", 64, 256, AP_TRAINER_MEGATRON},
        {"examples/models/mixtral-8x7b.json", "a100-sxm4-80g", 16, 128, AP_TRAINER_MEGATRON},
        {"examples/models/llama-2-7b.json", "a100-sxm4-40g", 8, 64, AP_TRAINER_DEEPSPEED},
        {"examples/models/llama-3-8b.json", "h100-sxm", 16, 128, AP_TRAINER_TORCHTITAN},
        {"examples/models/opt-1.3b.json", "rtx-4090", 4, 32, AP_TRAINER_FSDP},
        {"examples/models/gpt2.json", "a100-sxm4-80g", 8, 64, AP_TRAINER_COLOSSALAI},
    };
    ap_err err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ap_model m = load(cases[i].model);
        ap_cluster c = cluster(cases[i].gpu, cases[i].n);
        ap_search_opts o;
        ap_search_opts_init(&o);
        o.fixed.trainer = cases[i].tr;
        o.fixed.seq = m.seq_len;
        if (cases[i].tr == AP_TRAINER_COLOSSALAI || cases[i].tr == AP_TRAINER_FSDP)
            o.fixed.seq = 1024;
        o.gbs = cases[i].gbs;
        ap_search_result pr, un;
        CHECK(ap_search(&m, &c, &o, &pr, &err) == AP_OK);
        CHECK(pr.ntop > 0);
        check_result(&m, &c, &o, &pr);
        o.prune = 0;
        CHECK(ap_search(&m, &c, &o, &un, &err) == AP_OK);
        same_top(&pr, &un);
        CHECK(un.pruned == 0);
        CHECK(pr.evaluated <= un.evaluated);
        /* both enumerate the same space; pruned = legal plans not evaluated */
        CHECK_INT(pr.enumerated, un.enumerated);
        CHECK_INT(pr.legal, un.legal);
        CHECK_INT(pr.evaluated + pr.pruned, pr.legal);
        ap_search_result_free(&pr);
        ap_search_result_free(&un);
    }
}

/* Brute force independent of the search's loops: every (tp, pp, cp, vp, mbs, zero, recompute,
 * sp, overlap, offload) for a small case, including the sp/overlap variants the search does not
 * enumerate; the search's best must be the best of all. */
static void test_brute_force(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-40g", 8);
    ap_err err;
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.fixed.seq = 4096;
    o.gbs = 32;
    ap_search_result r;
    CHECK(ap_search(&m, &c, &o, &r, &err) == AP_OK);
    CHECK(r.ntop > 0);
    double best = 1e300;
    static ap_estimate e;
    int n_fit = 0;
    const double offs[] = {0, 0.5, 1};
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int pp = 1; tp * pp <= 8; pp *= 2)
            for (int cp = 1; tp * pp * cp <= 8; cp *= 2)
                for (int vp = 1; vp <= 32; vp *= 2)
                    for (int mbs = 1; mbs <= 32; mbs *= 2)
                        for (int z = 0; z <= 1; z++)
                            for (int rc = 0; rc < 3; rc++)
                                for (int rl = 0; rl <= 8; rl += 2)
                                    for (int sp = 0; sp <= 1; sp++)
                                        for (int ov = 0; ov <= 1; ov++)
                                            for (int io = 0; io < 3; io++) {
                                                ap_plan p;
                                                ap_plan_init(&p);
                                                p.tp = tp; p.pp = pp; p.cp = cp; p.vp = vp;
                                                p.dp = 8 / (tp * pp * cp);
                                                p.mbs = mbs; p.gbs = 32; p.seq = 4096;
                                                if (32 % (mbs * p.dp)) continue;
                                                p.grad_accum = 32 / (mbs * p.dp);
                                                p.zero = z; p.recompute = (ap_recompute)rc;
                                                p.recompute_layers = rc == 2 ? rl : 0;
                                                if (rc != 2 && rl) continue;
                                                p.sp = sp;
                                                p.overlap_grad = ov;
                                                p.overlap_param = ov && z == 1;
                                                p.overlap_tp = ov && sp;
                                                p.offload_optimizer = offs[io];
                                                if (ap_plan_check(&p, &m, &c, 0, NULL) != AP_OK) continue;
                                                if (ap_estimate_plan(&m, &c, &p, NULL, &e, NULL) != AP_OK) continue;
                                                if (!e.fits) continue;
                                                n_fit++;
                                                if (e.time.step_s < best) best = e.time.step_s;
                                            }
    CHECK(n_fit > 0);
    if (r.ntop > 0) CHECK_NEAR(r.top[0].time.step_s, best, 1e-12);
    ap_search_result_free(&r);
}

static void test_nothing_fits(void) {
    ap_model m = load("examples/models/llama-3.1-405b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_err err;
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.fixed.seq = 4096;
    o.gbs = 64;
    ap_search_result r;
    CHECK(ap_search(&m, &c, &o, &r, &err) == AP_OK);
    CHECK_INT(r.ntop, 0);
    CHECK(r.have_closest);
    CHECK(!r.closest.fits);
    /* the closest is the least-overshooting legal plan: no evaluated plan is smaller */
    o.prune = 0;
    o.top_k = 1;
    ap_search_result u;
    CHECK(ap_search(&m, &c, &o, &u, &err) == AP_OK);
    CHECK(u.have_closest);
    CHECK_NEAR(r.closest.device_peak_bytes, u.closest.device_peak_bytes, 1e-12);
    ap_search_result_free(&r);
    ap_search_result_free(&u);

    char *out = NULL, *er = NULL;
    char args[1024];
    snprintf(args, sizeof args, "plan '%s' --gpus 8 --gbs 64 --no-cache",
             tl_path("examples/models/llama-3.1-405b.json"));
    int rc = tl_run(args, &out, &er);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "nothing fits");
    CHECK_CONTAINS(out, "closest:");
    CHECK_CONTAINS(out, "GiB over");
    CHECK_CONTAINS(out, "use ");
    free(out);
    free(er);
}

static double jget(const ap_json *o, const char *a, const char *b) {
    const ap_json *x = ap_json_get(o, a);
    if (b) x = ap_json_get(x, b);
    return ap_json_number(x);
}

static void test_fix_and_sweep(void) {
    char *out = NULL, *er = NULL;
    char args[1024];
    ap_err err;
    snprintf(args, sizeof args, "'%s' --gpus 16 --gbs 128 --fix tp=2,pp=2 --json --no-cache",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    ap_json *j = ap_json_parse(out, strlen(out), "plan --json", &err);
    CHECK(j != NULL);
    const ap_json *plans = ap_json_get(j, "plans");
    CHECK(ap_json_size(plans) > 0);
    for (int i = 0; i < ap_json_size(plans); i++) {
        const ap_json *p = ap_json_at(plans, i);
        CHECK_INT((int)jget(p, "plan", "tp"), 2);
        CHECK_INT((int)jget(p, "plan", "pp"), 2);
        CHECK(ap_json_get(ap_json_get(p, "time"), "step_s") != NULL);
        CHECK(ap_json_get(ap_json_get(p, "memory"), "stages") != NULL);
    }
    ap_json_free(j);
    free(out);
    free(er);

    /* sweep + time-to-train + cost, checked by hand: time = tokens / (tokens/s),
     * GPU-hours = time * GPUs / 3600, cost = GPU-hours * price */
    snprintf(args, sizeof args, "'%s' --gpus 8,16 --gbs 64 --tokens 1T --gpu-hour-price 2.5 "
             "--deadline 3000d --json --no-cache", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    j = ap_json_parse(out, strlen(out), "sweep --json", &err);
    CHECK(j != NULL);
    const ap_json *sw = ap_json_get(j, "sweep");
    CHECK_INT(ap_json_size(sw), 2);
    double first_per_gpu = 0;
    int first_ok = 0;
    for (int i = 0; i < ap_json_size(sw); i++) {
        const ap_json *row = ap_json_at(sw, i);
        double n = jget(row, "gpus", NULL);
        const ap_json *best = ap_json_get(row, "best");
        CHECK(best != NULL);
        double tps = jget(best, "throughput", "tokens_per_s");
        double t = 1e12 / tps;
        CHECK_NEAR(jget(row, "time_to_train_s", NULL), t, 1e-12);
        CHECK_NEAR(jget(row, "gpu_hours", NULL), t * n / 3600.0, 1e-12);
        CHECK_NEAR(jget(row, "cost_usd", NULL), t * n / 3600.0 * 2.5, 1e-12);
        if (!first_ok) {
            first_per_gpu = tps / n;
            first_ok = 1;
        }
        CHECK_NEAR(jget(row, "scaling_efficiency", NULL), (tps / n) / first_per_gpu, 1e-12);
        /* the deadline answer is the first count whose time is within it */
        if (i == 0 && t <= 3000 * 86400.0) CHECK_INT((int)jget(j, "deadline_gpus", NULL), (int)n);
    }
    ap_json_free(j);
    free(out);
    free(er);

    /* a sweep starting below one node: every count is planned as `--gpus <count>` alone */
    double alone = 0;
    snprintf(args, sizeof args, "'%s' --gpus 16 --gbs 64 --json --no-cache",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    j = ap_json_parse(out, strlen(out), "plan --json", &err);
    CHECK(j != NULL);
    alone = jget(ap_json_at(ap_json_get(j, "plans"), 0), "throughput", "tokens_per_s");
    ap_json_free(j);
    free(out);
    free(er);
    snprintf(args, sizeof args, "'%s' --gpus 4,16 --gbs 64 --tokens 1T --json --no-cache",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &er), 0);
    j = ap_json_parse(out, strlen(out), "sweep --json", &err);
    CHECK(j != NULL);
    const ap_json *r16 = ap_json_at(ap_json_get(j, "sweep"), 1);
    CHECK_NEAR(jget(ap_json_get(r16, "best"), "throughput", "tokens_per_s"), alone, 1e-12);
    ap_json_free(j);
    free(out);
    free(er);
}

/* The plan cache: a repeated search answers from the cache and says so; importing a profile
 * for the GPU changes the calibration fingerprint, so the next search misses. */
static void test_cache(void) {
    const char *dir = tl_tmpdir();
    CHECK(dir != NULL);
    if (!dir) return;
    char db[512], prof[512], args[2048];
    snprintf(db, sizeof db, "%s/cache.db", dir);
    snprintf(prof, sizeof prof, "%s/prof.json", dir);
    const char *model = tl_path("examples/models/llama-2-7b.json");
    char *out = NULL, *er = NULL;
    snprintf(args, sizeof args, "'%s' --gpus 8 --gbs 64 --db '%s'", model, db);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK(out && !strstr(out, "answered from the cache"));
    free(out); free(er);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "answered from the cache");
    free(out); free(er);
    CHECK(tl_write(prof, "{\"format\": \"autoplan-db-export\", \"format_version\": 1, "
                         "\"profiles\": [{\"gpu\": \"a100-sxm4-80g\", \"op\": \"gemm\", "
                         "\"shape\": \"m=8192,n=8192,k=8192\", \"dtype\": \"bf16\", "
                         "\"time_s\": 0.0045, \"samples\": 20}]}") == 0);
    snprintf(args, sizeof args, "db import '%s' --db '%s'", prof, db);
    int rc = tl_run(args, &out, &er);
    CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "db import: %s\n", er ? er : "");
    free(out); free(er);
    snprintf(args, sizeof args, "'%s' --gpus 8 --gbs 64 --db '%s'", model, db);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK(out && !strstr(out, "answered from the cache"));
    free(out); free(er);
    /* a corrupt database at --db: a warning naming the path, planning goes on, the file is
     * left byte for byte as it was */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/corrupt.db", dir);
    CHECK(tl_write(bad, "this is not an SQLite database\n") == 0);
    snprintf(args, sizeof args, "'%s' --gpus 8 --gbs 64 --db '%s'", model, bad);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(er, "warning");
    CHECK_CONTAINS(er, bad);
    CHECK_CONTAINS(out, " 1  tp");
    char *after = tl_read(bad);
    CHECK(after && strcmp(after, "this is not an SQLite database\n") == 0);
    free(after);
    free(out); free(er);
    /* --no-cache neither reads nor writes */
    snprintf(args, sizeof args, "'%s' --gpus 8 --gbs 64 --db '%s' --no-cache", model, db);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK(out && !strstr(out, "answered from the cache"));
    free(out); free(er);
}

/* Issue 8 in the search: the closest plan of a search where no uniform split fits is
 * re-split optimally and fits; --solver off keeps uniform stages and nothing fits; the plan.json
 * written keeps the uneven split, and it sums to the layers. */
static void test_partition_in_search(void) {
    char *out = NULL, *er = NULL, args[2048];
    const char *model = tl_path("examples/models/llama-3-70b.json");
    const char *dir = tl_tmpdir();
    CHECK(dir != NULL);
    if (!dir) return;
    snprintf(args, sizeof args, "'%s' --gpus 64 --gpu a100-40g --gbs 128 --seq 8192 --no-cache "
             "--fix tp=8,pp=8,recompute=selective,zero=0 --solver off", model);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "nothing fits");
    free(out); free(er);
    snprintf(args, sizeof args, "'%s' --gpus 64 --gpu a100-40g --gbs 128 --seq 8192 --no-cache "
             "--fix tp=8,pp=8,recompute=selective,zero=0 --out '%s'", model, dir);
    CHECK_INT(tl_run(args, &out, &er), 0);
    CHECK_CONTAINS(out, "uneven");
    CHECK_CONTAINS(out, "no uniform split fits");
    free(out); free(er);
    char path[600];
    snprintf(path, sizeof path, "%s/plan.json", dir);
    ap_err err;
    ap_json *j = ap_json_parse_file(path, &err);
    CHECK(j != NULL);
    const ap_json *sl = ap_json_get(ap_json_get(j, "plan"), "stage_layers");
    CHECK_INT(ap_json_size(sl), 8);
    int sum = 0, uneven = 0;
    for (int i = 0; i < ap_json_size(sl); i++) {
        int v = (int)ap_json_number(ap_json_at(sl, i));
        sum += v;
        if (v != (int)ap_json_number(ap_json_at(sl, 0))) uneven = 1;
    }
    CHECK_INT(sum, 80);
    CHECK(uneven);
    CHECK(ap_json_bool(ap_json_get(ap_json_get(ap_json_get(j, "estimate"), "memory"), "fits")));
    ap_json_free(j);
    /* --solver takes dp|ilp|auto|off only */
    snprintf(args, sizeof args, "'%s' --gpus 8 --solver simplex --no-cache", model);
    CHECK_INT(tl_run(args, &out, &er), 2);
    CHECK_CONTAINS(er, "--solver");
    free(out); free(er);
}

/* Errors are not swallowed on the way up: a cost model that prices stages at infinity (a GPU
 * with no memory bandwidth, built here by hand: the catalog and cluster files refuse it) makes
 * the stage re-split fail, and ap_partition_top returns that error with the plan named. */
static void test_errors_propagate(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 16);
    c.gpu.hbm_bytes_per_s = 0;
    ap_err err = {{0}};
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.fixed.seq = 4096;
    o.gbs = 64;
    o.fixed.pp = 2;
    ap_search_result r;
    CHECK(ap_search(&m, &c, &o, &r, &err) == AP_OK);
    CHECK(r.ntop > 0 || r.have_closest);
    int changed = -1;
    ap_status st = ap_partition_top(&m, &c, &o, AP_SOLVER_DP, &r, &changed, &err);
    CHECK_INT(st, AP_ERR_INTERNAL);
    CHECK_CONTAINS(err.msg, "re-splitting tp");
    CHECK_CONTAINS(err.msg, "non-finite");
    ap_search_result_free(&r);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_cases();
    test_brute_force();
    test_nothing_fits();
    test_fix_and_sweep();
    test_cache();
    test_partition_in_search();
    test_errors_propagate();
    return tl_finish();
}
