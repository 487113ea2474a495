/*
 * test_hetero.c - heterogeneous memory (hetero.h, family.h, fit.h): Colossal-AI Gemini and
 * DeepSpeed ZeRO-Offload / ZeRO-Infinity simulated operator by operator, and `autoplan fit`.
 *
 * References:
 *  - the chunk-size search against an exhaustive scan that packs the parameters chunk by chunk
 *    (an independent implementation of ChunkManager.register_tensor's tail waste), and against
 *    hand-worked size lists;
 *  - the parameter lists against the models' own counts (tests/test_model.c holds those exact);
 *  - traffic and host memory worked by hand from the trainers' rules (cited in sim/gemini.c and
 *    sim/zero_infinity.c): e.g. Gemini auto with room to spare moves each chunk's fp32 master
 *    up once per step (4 B/element, Chunk.__paired_shard_move) and its gradients down once
 *    (2 B/element, grad_handle move_chunk force_copy); the host holds 2 + 4 pinned + 8 B per
 *    element;
 *  - invariants of the issue: auto's own account never above 90% of the device in steady
 *    state; its H2D never above the fully offloaded static policy's; static without offload
 *    equals the ZeRO-3 model states (less the gradient buffer Gemini does not keep);
 *  - fit: the largest size fits, the next does not, and the bisection equals a scan;
 *  - bad input: fractions, the ignored offload_param_frac, NVMe without bandwidth.
 */
#include "testlib.h"

#include "autoplan/emit.h"
#include "autoplan/fit.h"
#include "autoplan/hetero.h"
#include "autoplan/json.h"
#include "autoplan/kernels.h"
#include "autoplan/planio.h"
#include "autoplan/search.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

static ap_model load(const char *rel) {
    ap_model m;
    ap_err err;
    if (ap_model_load(tl_path(rel), &m, &err) != AP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return m;
}

/* ---- chunk search --------------------------------------------------------------------------- */

/* Pack sizes into chunks of cs in order; waste = the unused tail of every chunk (a parameter
 * that does not fit the space left starts a new chunk). */
static int64_t pack_waste(const int64_t *s, int n, int64_t cs) {
    int64_t waste = 0, used = -1;
    for (int i = 0; i < n; i++) {
        if (used < 0 || used + s[i] > cs) {
            if (used >= 0) waste += cs - used;
            used = 0;
        }
        used += s[i];
    }
    return used >= 0 ? waste + cs - used : 0;
}

/* The search done by brute force: drop sizes above mean + 3 std, scan every multiple of the
 * interval in the range, least waste, first on ties, rounded up to the group. */
static void brute_search(const int64_t *s, int n, int Z, double range_m, int64_t interval,
                         double min_m, int64_t *best_out, int64_t *waste_out) {
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += (double)s[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += ((double)s[i] - mean) * ((double)s[i] - mean);
    double up = mean + 3 * sqrt(var / n);
    int64_t *k = malloc((size_t)n * sizeof *k);
    int nk = 0;
    int64_t mx = (int64_t)(min_m * 1048576.0);
    for (int i = 0; i < n; i++)
        if ((double)s[i] <= up) {
            k[nk++] = s[i];
            if (s[i] > mx) mx = s[i];
        }
    int64_t start = ((mx + interval - 1) / interval) * interval;
    int64_t range = (int64_t)(range_m * 1048576.0);
    int64_t best = -1, bw = -1;
    for (int64_t cs = start; cs <= start + range; cs++) {
        if ((cs - start) % interval) continue;
        int64_t w = pack_waste(k, nk, cs);
        if (bw < 0 || w < bw) bw = w, best = cs;
    }
    free(k);
    if (best % Z) best += Z - best % Z;
    *best_out = best;
    *waste_out = bw;
}

static void test_chunk_search(void) {
    ap_err err;
    ap_chunk_config c;
    /* hand-worked: five parameters of 3, 3, 3, 5, 5 elements, interval 1, no minimum, range 4:
       sizes 5..9 waste 5:5 (3|3|3|5|5 -> 2+2+2+0+0=6? no: 3+... packs 3,3 into... see below) */
    int64_t s1[] = {3, 3, 3, 5, 5};
    /* cs 5: [3][3][3][5][5] tails 2,2,2,0,0 = 6; cs 6: [3,3][3][5][5] 0,3,1,1 = 5;
       cs 7: [3,3][3][5][5] 1,4,2,2 = 9; cs 8: [3,3][3,5][5] 2,0,3 = 5; cs 9: [3,3,3][5][5] 0,4,4
       = 8 -> 6 (first of the two 5s) */
    CHECK(ap_gemini_chunk_search(s1, 5, 1, 4.0 / 1048576.0, 1, 0, &c, &err) == AP_OK);
    CHECK_INT(c.chunk_elems, 6);
    CHECK_INT(c.waste_elems, 5);
    CHECK_INT(ap_gemini_unused_elems(s1, 5, 8), 5);
    CHECK_INT(ap_gemini_unused_elems(s1, 5, 9), 8);
    /* rounded up to the zero group: 6 -> 8 with 4 ranks */
    CHECK(ap_gemini_chunk_search(s1, 5, 4, 4.0 / 1048576.0, 1, 0, &c, &err) == AP_OK);
    CHECK_INT(c.chunk_elems, 8);
    /* a small group stays gathered in one chunk of its size */
    CHECK(ap_gemini_chunk_search(s1, 5, 2, 32, 1024, 32, &c, &err) == AP_OK);
    CHECK(c.keep_gathered);
    CHECK_INT(c.chunk_elems, 19);

    /* pseudo-random lists against the brute force (sizes 1..5000, one outlier) */
    uint64_t x = 88172645463325252ull;
    for (int t = 0; t < 30; t++) {
        int n = 20 + t * 7;
        int64_t *s = malloc((size_t)n * sizeof *s);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            s[i] = 1 + (int64_t)(x % 5000);
        }
        s[t % n] = 400000; /* an embedding-like outlier, filtered out */
        int Z = 1 + t % 4;
        int64_t interval = 1 + t % 13;
        double range_m = (2000.0 + 100 * t) / 1048576.0, min_m = (t % 3) * 1000.0 / 1048576.0;
        CHECK(ap_gemini_chunk_search(s, n, Z, range_m, interval, min_m, &c, &err) == AP_OK);
        int64_t best, bw;
        brute_search(s, n, Z, range_m, interval, min_m, &best, &bw);
        CHECK_INT(c.chunk_elems, best);
        CHECK_INT(c.waste_elems, bw);
        CHECK(c.nfiltered >= 1);
        /* the layout: every parameter in a chunk big enough; an outlier in its own chunk */
        int32_t *of = malloc((size_t)n * sizeof *of);
        int64_t *ce = malloc((size_t)n * sizeof *ce);
        int nc = ap_gemini_chunk_layout(s, n, &c, Z, of, ce);
        CHECK(nc >= 1);
        int64_t *used = calloc((size_t)nc, sizeof *used);
        for (int i = 0; i < n; i++) {
            used[of[i]] += s[i];
            if (i > 0) CHECK(of[i] == of[i - 1] || of[i] == of[i - 1] + 1);
        }
        for (int k = 0; k < nc; k++) {
            CHECK(used[k] <= ce[k]);
            CHECK(ce[k] % Z == 0);
        }
        free(used);
        free(of);
        free(ce);
        free(s);
    }
    /* layer-periodic lists (a prefix, a block repeated, a suffix: the search skips repeated
       packing states) against the brute force, also with near-periodic blocks and blocks of
       one size */
    for (int t = 0; t < 200; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int pre = (int)(x % 4), per = 1 + (int)((x >> 8) % 13), reps = 2 + (int)((x >> 16) % 90);
        int suf = (int)((x >> 24) % 4), n = pre + per * reps + suf;
        int64_t *s = malloc((size_t)n * sizeof *s);
        int64_t blk[16];
        for (int i = 0; i < per; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            blk[i] = t % 7 == 0 ? 64 : 1 + (int64_t)(x % (i % 3 == 0 ? 3000 : 40));
        }
        int k = 0;
        for (int i = 0; i < pre; i++) s[k++] = 100 + i * 37;
        for (int r = 0; r < reps; r++)
            for (int i = 0; i < per; i++) s[k++] = blk[i];
        for (int i = 0; i < suf; i++) s[k++] = 50 + i * 11;
        if (t % 5 == 1) s[pre + (int)(x % (uint64_t)(per * reps))] += 1; /* one copy differs */
        int Z = 1 + t % 3;
        int64_t interval = 1 + t % 11;
        double range_m = (200.0 + 9 * t) / 1048576.0;
        CHECK(ap_gemini_chunk_search(s, n, Z, range_m, interval, 0, &c, &err) == AP_OK);
        int64_t best, bw;
        brute_search(s, n, Z, range_m, interval, 0, &best, &bw);
        CHECK_INT(c.chunk_elems, best);
        CHECK_INT(c.waste_elems, bw);
        free(s);
    }
    /* a real model: GPT-2 (124M) with Colossal-AI's defaults: the embedding (38.6M) is the
       outlier, the search starts at the 32 Mi minimum and takes 43313152 */
    ap_model m = load("examples/models/gpt2.json");
    ap_hparam *ps;
    int np;
    CHECK(ap_hetero_params(&m, 1, &ps, &np, &err) == AP_OK);
    int64_t *sz = malloc((size_t)np * sizeof *sz);
    for (int i = 0; i < np; i++) sz[i] = ps[i].numel;
    CHECK(ap_gemini_chunk_search(sz, np, 1, 32, 1024, 32, &c, &err) == AP_OK);
    int64_t best, bw;
    brute_search(sz, np, 1, 32, 1024, 32, &best, &bw);
    CHECK_INT(c.chunk_elems, best);
    CHECK_INT(c.waste_elems, bw);
    CHECK_INT(c.search_start, 33554432);
    CHECK_INT(c.nfiltered, 1);
    free(sz);
    free(ps);
    /* bad input */
    CHECK(ap_gemini_chunk_search(s1, 0, 1, 32, 1024, 32, &c, &err) == AP_ERR_INPUT);
    CHECK(ap_gemini_chunk_search(s1, 5, 0, 32, 1024, 32, &c, &err) == AP_ERR_INPUT);
    CHECK(ap_gemini_chunk_search(s1, 5, 1, -1, 1024, 32, &c, &err) == AP_ERR_INPUT);
    CHECK(ap_gemini_chunk_search(s1, 5, 1, 32, 0, 32, &c, &err) == AP_ERR_INPUT);
}

/* ---- parameters and periods ------------------------------------------------------------------ */

static void test_params(void) {
    static const char *models[] = {"examples/models/gpt2.json", "examples/models/opt-1.3b.json",
                                   "examples/models/llama-2-7b.json",
                                   "examples/models/llama-3-8b.json",
                                   "examples/models/qwen2-7b.json", "examples/models/tiny-gpt.json"};
    ap_err err;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        ap_model m = load(models[k]);
        ap_hparam *ps;
        int np;
        CHECK(ap_hetero_params(&m, 1, &ps, &np, &err) == AP_OK);
        int64_t sum = 0;
        for (int i = 0; i < np; i++) sum += ps[i].numel;
        CHECK_INT(sum, ap_model_total_params(&m));
        free(ps);
        /* tensor parallel: each rank holds at least 1/t of the model, replicated norms more */
        CHECK(ap_hetero_params(&m, 2, &ps, &np, &err) == AP_OK);
        int64_t s2 = 0;
        for (int i = 0; i < np; i++) s2 += ps[i].numel;
        CHECK(s2 >= sum / 2 && s2 < sum);
        free(ps);
    }
    ap_model moe = load("examples/models/mixtral-8x7b.json");
    ap_hparam *ps;
    int np;
    CHECK(ap_hetero_params(&moe, 1, &ps, &np, &err) == AP_ERR_INFEASIBLE);
}

static void test_periods(void) {
    /* tiny-gpt, full recompute: embedding + 6 per layer + final norm + head forward; the same
       with recomputed forwards and backwards; peaks never below their start */
    ap_model m = load("examples/models/tiny-gpt.json");
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_COLOSSALAI;
    p.seq = 512;
    p.mbs = 2;
    p.gbs = 2;
    p.recompute = AP_RECOMPUTE_FULL;
    ap_sim_opts so;
    ap_sim_opts_init(&so);
    ap_sim *s;
    ap_err err;
    CHECK(ap_sim_run(&m, NULL, &p, &so, &s, &err) == AP_OK);
    ap_sim_period *per;
    int n;
    CHECK(ap_sim_periods(s, 0, &per, &n, &err) == AP_OK);
    int64_t L = m.layers;
    int f = 0, r = 0, b = 0;
    for (int i = 0; i < n; i++) {
        if (per[i].phase == AP_PHASE_FWD) f++;
        else if (per[i].phase == AP_PHASE_RECOMPUTE) r++;
        else b++;
        CHECK(per[i].peak_bytes >= per[i].start_bytes);
        CHECK(per[i].ev_end >= per[i].ev_begin);
        if (i > 0) CHECK(per[i].ev_begin >= per[i - 1].ev_end);
    }
    CHECK_INT(f, 1 + 6 * L + 2);
    CHECK_INT(r, 6 * L);
    CHECK_INT(b, 1 + 6 * L + 2);
    /* the first backward period is the head's, the last the embedding's */
    CHECK_INT(per[f].kind, AP_PERIOD_HEAD);
    CHECK_INT(per[n - 1].kind, AP_PERIOD_EMBED);
    free(per);
    ap_sim_free(s);
    /* without events kept, no periods */
    so.record_curves = 0;
    CHECK(ap_sim_run(&m, NULL, &p, &so, &s, &err) == AP_OK);
    CHECK(ap_sim_periods(s, 0, &per, &n, &err) == AP_ERR_INPUT);
    ap_sim_free(s);
}

/* ---- Gemini ------------------------------------------------------------------------------- */

static ap_cluster one_gpu(const char *gpu, double cpu_gib) {
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find(gpu), 1, &c);
    c.cpu_mem_bytes = cpu_gib * GIB;
    return c;
}

static ap_plan gemini_plan(ap_gemini_placement pl, double optim, double param, int64_t mbs,
                           int64_t ga, int64_t seq) {
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_COLOSSALAI;
    p.zero = 3;
    p.mbs = mbs;
    p.gbs = mbs * ga;
    p.grad_accum = ga;
    p.seq = seq;
    p.recompute = AP_RECOMPUTE_FULL;
    p.dtype = AP_DTYPE_FP16;
    ap_plan_hetero_init(&p.hetero);
    p.hetero.placement = pl;
    p.hetero.offload_optim_frac = optim;
    p.hetero.offload_param_frac = param;
    if (pl == AP_GEMINI_STATIC) {
        /* the plan's copy of the static fractions (ap_plan_hetero_validate) */
        p.offload_optimizer = optim;
        p.offload_params = param;
    }
    return p;
}

static const ap_hetero_summary *run(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                                    ap_hetero **h) {
    ap_err err;
    ap_hetero_opts o;
    ap_hetero_opts_init(&o);
    o.headroom_bytes = 0;
    ap_status st = ap_hetero_run(m, c, p, &o, h, &err);
    if (st != AP_OK) {
        fprintf(stderr, "hetero run: %s\n", err.msg);
        CHECK(st == AP_OK);
        return NULL;
    }
    return ap_hetero_summary_of(*h);
}

/* Sum of chunk elements of a model with Colossal-AI's default search (Z ranks). */
static int64_t chunk_elems_total(const ap_model *m, int Z, int64_t interval) {
    ap_hparam *ps;
    int np;
    ap_err err;
    if (ap_hetero_params(m, 1, &ps, &np, &err) != AP_OK) return -1;
    int64_t *sz = malloc((size_t)np * sizeof *sz), *ce = malloc((size_t)np * sizeof *ce);
    int32_t *of = malloc((size_t)np * sizeof *of);
    for (int i = 0; i < np; i++) sz[i] = ps[i].numel;
    ap_chunk_config c;
    ap_gemini_chunk_search(sz, np, Z, 32, interval, 32, &c, &err);
    int nc = ap_gemini_chunk_layout(sz, np, &c, Z, of, ce);
    int64_t t = 0;
    for (int k = 0; k < nc; k++) t += ce[k];
    free(sz);
    free(ce);
    free(of);
    free(ps);
    return t;
}

static void test_gemini_hand(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster big = one_gpu("h200", 1024);
    double E = (double)chunk_elems_total(&m, 1, 1024);
    double P = (double)ap_model_total_params(&m);
    ap_hetero *h;
    /* auto with room to spare: nothing is evicted; every step each chunk's fp32 master comes up
       once (4 B) and its gradient goes down once (2 B); host: fp16 and fp32 shards pinned
       (2 + 4) and Adam's m and v (8 per valid element) */
    ap_plan p = gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 1, 1024);
    const ap_hetero_summary *s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->h2d_bytes, 4.0 * E, 1e-12);
        CHECK_NEAR(s->d2h_bytes, 2.0 * E, 1e-12);
        CHECK_NEAR(s->host_peak_bytes, 6.0 * E + 8.0 * P, 1e-12);
        CHECK_NEAR(s->host_pinned_bytes, 6.0 * E, 1e-12);
        CHECK(s->fits);
        CHECK_INT(s->binding, AP_BIND_NONE);
        CHECK_NEAR(s->offload_optim_frac_effective, 1.0, 1e-12);
        /* the step: compute, the exposed fetches, CPU Adam at 26 B/element over 70% of the
           host's DRAM bandwidth, the fixed overhead */
        double adam = P * 26.0 / (0.7 * big.host_mem_bytes_per_s);
        CHECK_NEAR(s->cpu_adam_s, adam, 1e-9);
        CHECK_NEAR(s->step_s, s->compute_s + s->transfer_exposed_s + adam + s->overhead_s, 1e-9);
        CHECK(s->transfer_exposed_s >= 4.0 * E / (0.8 * big.pcie_bytes_per_s) - 1e-9);
    }
    ap_hetero_free(h);
    /* static, optimizer on the host, parameters on the GPU: the same traffic */
    p = gemini_plan(AP_GEMINI_STATIC, 1, 0, 1, 1, 1024);
    s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->h2d_bytes, 4.0 * E, 1e-12);
        CHECK_NEAR(s->d2h_bytes, 2.0 * E, 1e-12);
    }
    ap_hetero_free(h);
    /* static without offload: nothing crosses PCIe; the model data at the optimizer step is
       2 + 4 + 8 B per element, ZeRO-3's 16 less the gradient buffer Gemini does without (the
       gradients are written into the fp16 chunk, reuse_fp16_chunk) */
    p = gemini_plan(AP_GEMINI_STATIC, 0, 0, 1, 1, 1024);
    s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->h2d_bytes + s->d2h_bytes, 0, 1e-12);
        int n;
        const ap_hetero_oprec *r = ap_hetero_ops(h, &n);
        CHECK(n > 0 && r[n - 1].phase == 3);
        double md = (double)r[n - 1].gpu_model_bytes;
        CHECK_NEAR(md, 6.0 * E + 8.0 * P, 1e-9);
        double w, g, o;
        ap_plan z3 = p;
        z3.hetero.placement = AP_GEMINI_OFF;
        ap_mem_model_states(&z3, P, 1, &w, &g, &o);
        /* equal up to the chunk padding (E - P elements of fp16 + fp32) */
        CHECK_NEAR(md, w + g + o - g + 6.0 * (E - P), 1e-9);
        /* host: the pinned copies only (pin_memory, the default with async reduce) */
        CHECK_NEAR(s->host_peak_bytes, 6.0 * E, 1e-12);
    }
    ap_hetero_free(h);
    /* gradient accumulation: a gradient chunk per chunk, +2 B per element on the GPU */
    ap_plan pa = gemini_plan(AP_GEMINI_STATIC, 0, 0, 1, 2, 1024);
    s = run(&m, &big, &pa, &h);
    if (s) {
        int n;
        const ap_hetero_oprec *r = ap_hetero_ops(h, &n);
        CHECK_NEAR((double)r[n - 1].gpu_model_bytes, 8.0 * E + 8.0 * P, 1e-9);
        CHECK_INT(s->micro_batches, 2);
    }
    ap_hetero_free(h);
    /* the fully offloaded static policy fetches each chunk at least once per pass */
    p = gemini_plan(AP_GEMINI_STATIC, 1, 1, 1, 1, 1024);
    s = run(&m, &big, &p, &h);
    if (s) {
        CHECK(s->h2d_bytes >= 4.0 * E);
        CHECK(s->d2h_bytes >= 2.0 * E);
        int n;
        const ap_hetero_move *mv = ap_hetero_moves(h, &n);
        double grads = 0;
        for (int i = 0; i < n; i++)
            if (mv[i].kind == AP_MOVE_D2H && mv[i].what == 1) grads += (double)mv[i].bytes;
        CHECK_NEAR(grads, 2.0 * E, 1e-12);
    }
    ap_hetero_free(h);
}

/* Colossal-AI computes the static fractions over a per-parameter sum of chunk sizes, so a small
 * offload_optim_frac already moves every chunk's optimizer to the host (setup_grads_device). */
static void test_gemini_static_fraction_sum(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster big = one_gpu("h200", 1024);
    ap_hetero *h;
    ap_plan p = gemini_plan(AP_GEMINI_STATIC, 0.05, 0, 1, 1, 1024);
    const ap_hetero_summary *s = run(&m, &big, &p, &h);
    /* GPT-2 packs ~50 parameters per chunk: 5% of the per-parameter sum exceeds one chunk */
    if (s) CHECK(s->offload_optim_frac_effective > 0.3);
    ap_hetero_free(h);
    p = gemini_plan(AP_GEMINI_STATIC, 0, 0, 1, 1, 1024);
    s = run(&m, &big, &p, &h);
    if (s) CHECK_NEAR(s->offload_optim_frac_effective, 0, 1e-12);
    ap_hetero_free(h);
}

static void test_gemini_auto_invariants(void) {
    /* GPT-2 XL (1.56B, 3.1 GB of fp16 chunks) on GPUs too small to keep it: auto evicts */
    ap_family f;
    ap_err err;
    CHECK(ap_family_get("gpt2-colossalai", &f, &err) == AP_OK);
    ap_family_rung xl = {1, 48, 0};
    ap_model m;
    CHECK(ap_family_model(&f, &xl, &m, &err) == AP_OK);
    int evicted = 0;
    for (int k = 0; k < 6; k++) {
        ap_cluster c = one_gpu("rtx-2060", 64);
        c.gpu.mem_bytes = (1.0 + 0.5 * k) * GIB;
        ap_plan pa = gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 1 + k % 2, 1024);
        ap_plan ps = gemini_plan(AP_GEMINI_STATIC, 1, 1, 1, 1 + k % 2, 1024);
        ap_hetero *ha, *hs;
        const ap_hetero_summary *sa = run(&m, &c, &pa, &ha);
        const ap_hetero_summary *ss = run(&m, &c, &ps, &hs);
        if (sa && ss) {
            if (!sa->failure[0]) {
                int n;
                const ap_hetero_oprec *r = ap_hetero_ops(ha, &n);
                for (int i = 0; i < n; i++)
                    if (r[i].phase != 3) CHECK((double)r[i].planned_bytes <= 0.9 * c.gpu.mem_bytes);
            }
            CHECK(sa->h2d_bytes <= ss->h2d_bytes);
            /* the fp32 masters come up once (4 B per element); more means evictions */
            if (sa->h2d_bytes > 4.1 * (double)ap_model_total_params(&m)) evicted++;
        }
        ap_hetero_free(ha);
        ap_hetero_free(hs);
    }
    CHECK(evicted >= 3);
    /* too small for one operator's chunks in the warm-up (20% for model data): Gemini's own
       failure, named, GPU binding */
    m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("rtx-2060", 64);
    c.gpu.mem_bytes = 0.5 * GIB;
    ap_plan pa = gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 1, 512);
    ap_hetero *h;
    const ap_hetero_summary *s = run(&m, &c, &pa, &h);
    if (s) {
        CHECK(!s->fits);
        CHECK_INT(s->binding, AP_BIND_GPU);
        CHECK_CONTAINS(s->failure, "Adjust layout failed");
    }
    ap_hetero_free(h);
    /* host memory binds when the pinned copies and Adam states exceed it */
    c = one_gpu("h200", 1);
    s = run(&m, &c, &pa, &h);
    if (s) {
        CHECK(!s->fits);
        CHECK_INT(s->binding, AP_BIND_HOST);
    }
    ap_hetero_free(h);
}

/* ---- DeepSpeed ------------------------------------------------------------------------------ */

static ap_plan ds_plan(int zero, ap_offload_device opt, ap_offload_device par, int64_t ga) {
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_DEEPSPEED;
    p.zero = zero;
    p.mbs = 1;
    p.gbs = ga;
    p.grad_accum = ga;
    p.seq = 1024;
    p.dtype = AP_DTYPE_FP16;
    p.recompute = AP_RECOMPUTE_NONE;
    ap_plan_hetero_init(&p.hetero);
    p.hetero.ds_optimizer = opt;
    p.hetero.ds_params = par;
    return p;
}

/* The search's overshoot of a summary (search.c overshoot), worked from the verdict's figures. */
static double overshoot_of(const ap_hetero_summary *s) {
    double over = (s->gpu_peak_bytes + s->headroom_bytes - s->gpu_capacity_bytes) /
                  s->gpu_capacity_bytes;
    if (s->host_bytes_per_node > 0.9 * s->host_capacity_bytes) {
        double h = (s->host_bytes_per_node - 0.9 * s->host_capacity_bytes) / s->host_capacity_bytes;
        if (h > over) over = h;
    }
    return over;
}

/* Placement k of the heterogeneous cases the stop tests run, k < 8: Gemini static (nothing,
 * the optimizer, both offloaded) and auto; ZeRO-Offload; ZeRO-Infinity to the host, to NVMe,
 * and with the optimizer alone on the host. */
static ap_plan offload_case(int k) {
    return k == 0   ? gemini_plan(AP_GEMINI_STATIC, 0, 0, 1, 2, 1024)
           : k == 1 ? gemini_plan(AP_GEMINI_STATIC, 1, 0, 1, 2, 1024)
           : k == 2 ? gemini_plan(AP_GEMINI_STATIC, 1, 1, 1, 2, 1024)
           : k == 3 ? gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 2, 1024)
           : k == 4 ? ds_plan(2, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 2)
           : k == 5 ? ds_plan(3, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_CPU, 2)
           : k == 6 ? ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_NVME, 2)
                    : ds_plan(3, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 2);
}

/* Case (mi, hi, k) of the stop tests: model mi on its GPU with host hi (the ample host with
 * small drives) and placement k (offload_case); 0 where the plan's buffers cannot be sized. */
static int stop_case(int mi, int hi, int k, ap_model *m, ap_cluster *c, ap_plan *p) {
    static const char *const models[] = {"examples/models/gpt2.json",
                                          "examples/models/llama-2-7b.json",
                                          "examples/models/llama-2-7b.json"};
    static const char *const gpus[] = {"rtx-3090", "a100-sxm4-40g", "rtx-4090"};
    static const double hosts[] = {16, 64, 1024};
    *m = load(models[mi]);
    *c = one_gpu(gpus[mi], hosts[hi]);
    c->nvme_bytes = hi == 2 ? 50e9 : 4e12;
    c->nvme_read_bytes_per_s = c->nvme_write_bytes_per_s = 3e9;
    *p = offload_case(k);
    ap_err err;
    return ap_hetero_size_param_buffers(m, p, &err) == AP_OK;
}

/* Whether two summaries report the same run. */
static int same_run(const ap_hetero_summary *a, const ap_hetero_summary *b) {
    return a->fits == b->fits && a->binding == b->binding && a->step_s == b->step_s &&
           a->gpu_peak_bytes == b->gpu_peak_bytes && a->host_peak_bytes == b->host_peak_bytes;
}

/* ap_hetero_opts.stop_unfit: a run that stops says what the whole run says of the resource it
 * stopped on (the whole run does not fit for that reason), and a run that fits, or that
 * stops for no reason, reports what the whole run reports. stop_over: a run that stops has the
 * whole run's overshoot past the bound; one that does not reports the whole run. Gemini static
 * and auto, ZeRO-Offload and ZeRO-Infinity to the host and to NVMe, on hosts and drives from
 * too small to ample. */
static void test_stop_unfit(void) {
    int fits = 0, by_host = 0, by_gpu = 0, by_nvme = 0, by_over = 0, near_enough = 0;
    for (int mi = 0; mi < 3; mi++)
        for (int hi = 0; hi < 3; hi++)
            for (int k = 0; k < 8; k++) {
                ap_model m;
                ap_cluster c;
                ap_plan p;
                ap_err err;
                if (!stop_case(mi, hi, k, &m, &c, &p)) continue;
                ap_hetero_opts o;
                ap_hetero_opts_init(&o);
                ap_hetero *hw = NULL, *hs = NULL;
                ap_status sw = ap_hetero_run(&m, &c, &p, &o, &hw, &err);
                o.stop_unfit = 1;
                ap_status ss = ap_hetero_run(&m, &c, &p, &o, &hs, &err);
                CHECK_INT(ss, sw);
                if (sw == AP_OK && ss == AP_OK) {
                    const ap_hetero_summary *w = ap_hetero_summary_of(hw);
                    const ap_hetero_summary *t = ap_hetero_summary_of(hs);
                    CHECK(!t->stopped || !t->fits);
                    if (!t->stopped) {
                        CHECK(same_run(t, w));
                        fits += w->fits;
                    } else if (t->binding == AP_BIND_HOST) {
                        CHECK(w->host_bytes_per_node > 0.9 * w->host_capacity_bytes);
                        by_host++;
                    } else if (t->binding == AP_BIND_NVME) {
                        CHECK(w->nvme_bytes_per_node > w->nvme_capacity_bytes);
                        by_nvme++;
                    } else {
                        CHECK_INT((int)t->binding, (int)AP_BIND_GPU);
                        CHECK(w->failure[0] ||
                              w->gpu_peak_bytes + w->headroom_bytes > w->gpu_capacity_bytes);
                        by_gpu++;
                    }
                    if (t->stopped) CHECK(!w->fits);
                    /* stop_over: a run stopped on its overshoot has the whole run's past it */
                    /* the bounds: the whole run's own overshoot (no stop: it is not past
                       it), half of it and a small one */
                    const double ov = overshoot_of(w);
                    for (int v = 0; v < 3; v++) {
                        const double bounds[] = {ov, 0.5 * ov, 1e-4};
                        if (!(bounds[v] > 0)) continue;
                        ap_hetero_opts_init(&o);
                        o.stop_over = bounds[v];
                        ap_hetero *hv = NULL;
                        CHECK(ap_hetero_run(&m, &c, &p, &o, &hv, &err) == AP_OK);
                        const ap_hetero_summary *u = hv ? ap_hetero_summary_of(hv) : NULL;
                        if (v == 0 && u) CHECK_INT(u->stopped, 0);
                        if (u && u->stopped) {
                            CHECK_INT(u->stopped, 2);
                            CHECK(!w->fits && !u->fits);
                            CHECK(overshoot_of(w) > bounds[v]);
                            by_over++;
                        } else if (u) {
                            CHECK(u->step_s == w->step_s);
                            CHECK(u->gpu_peak_bytes == w->gpu_peak_bytes);
                            CHECK(u->host_peak_bytes == w->host_peak_bytes);
                            CHECK_INT(u->fits, w->fits);
                            near_enough += !w->fits;
                        }
                        ap_hetero_free(hv);
                    }
                }
                ap_hetero_free(hw);
                ap_hetero_free(hs);
            }
    CHECK(fits > 0);
    CHECK(by_host > 0);
    CHECK(by_gpu > 0);
    CHECK(by_nvme > 0);
    CHECK(by_over > 0);
    CHECK(near_enough > 0);
}

/* ap_hetero_opts.stop_early: a run that stops early stops as the run without it stops, of
 * the same kind (an auto placement under stop_unfit may stop where the run without it fails,
 * unfit as well), and a run it does not stop reports what the run without it reports. Under
 * stop_unfit and under stop_over, on the cases and hosts above; some runs stop before the
 * point the simulation would stop at (their figures say less), on the host and on the GPU. */
static void test_stop_early(void) {
    int stops = 0, early_host = 0, early_gpu = 0, same = 0;
    for (int mi = 0; mi < 3; mi++)
        for (int hi = 0; hi < 3; hi++)
            for (int k = 0; k < 8; k++)
                for (int mode = 0; mode < 3; mode++) {
                    ap_model m;
                    ap_cluster c;
                    ap_plan p;
                    ap_err err;
                    if (!stop_case(mi, hi, k, &m, &c, &p)) continue;
                    ap_hetero_opts o;
                    ap_hetero_opts_init(&o);
                    o.record = 0;
                    if (mode == 0) o.stop_unfit = 1;
                    else o.stop_over = mode == 1 ? 1e-4 : 0.5;
                    ap_hetero *h0 = NULL, *h1 = NULL;
                    ap_status s0 = ap_hetero_run(&m, &c, &p, &o, &h0, &err);
                    o.stop_early = 1;
                    ap_status s1 = ap_hetero_run(&m, &c, &p, &o, &h1, &err);
                    CHECK_INT(s1, s0);
                    if (s0 == AP_OK && s1 == AP_OK) {
                        const ap_hetero_summary *a = ap_hetero_summary_of(h0);
                        const ap_hetero_summary *b = ap_hetero_summary_of(h1);
                        int failed_auto = mode == 0 && k == 3 && a->failure[0] && !a->stopped;
                        if (failed_auto && b->stopped) {
                            CHECK_INT(b->stopped, 1);
                        } else {
                            CHECK_INT(b->stopped, a->stopped);
                            CHECK_INT(b->fits, a->fits);
                        }
                        if (b->stopped) {
                            CHECK(!a->fits);
                            stops++;
                            if (b->gpu_peak_bytes != a->gpu_peak_bytes ||
                                b->host_peak_bytes != a->host_peak_bytes) {
                                early_host += b->binding == AP_BIND_HOST;
                                early_gpu += b->binding == AP_BIND_GPU;
                            }
                        } else {
                            CHECK(same_run(b, a));
                            same++;
                        }
                    }
                    ap_hetero_free(h0);
                    ap_hetero_free(h1);
                }
    CHECK(stops > 0);
    CHECK(same > 0);
    CHECK(early_host > 0);
    CHECK(early_gpu > 0);
}

/* ap_hetero_opts.step_cutoff_s: a run whose compute alone is past the cutoff simulates no step
 * (stopped 3, fits 0), whether its operator template is built (the cutoff is checked before
 * the event simulation) or taken from the cache; a cutoff at the run's own step time changes
 * nothing. Gemini static and auto, ZeRO-Offload and ZeRO-Infinity. */
static void test_step_cutoff(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = one_gpu("a100-sxm4-40g", 1024);
    c.nvme_bytes = 4e12;
    c.nvme_read_bytes_per_s = c.nvme_write_bytes_per_s = 3e9;
    static const int cases[] = {1, 3, 4, 5, 6}; /* of offload_case */
    int cut = 0, whole = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        ap_plan p = offload_case(cases[ci]);
        ap_err err;
        if (ap_hetero_size_param_buffers(&m, &p, &err) != AP_OK) continue;
        ap_hetero_cache cache;
        memset(&cache, 0, sizeof cache);
        for (int cached = 0; cached < 2; cached++) {
            ap_hetero_opts o;
            ap_hetero_opts_init(&o);
            o.cache = cached ? &cache : NULL;
            ap_hetero *hw = NULL, *hc = NULL, *hs = NULL;
            if (ap_hetero_run(&m, &c, &p, &o, &hw, &err) != AP_OK) continue;
            const ap_hetero_summary *w = ap_hetero_summary_of(hw);
            CHECK_INT(w->stopped, 0);
            o.step_cutoff_s = 1e-3 * w->step_s; /* below the compute of any step */
            CHECK(ap_hetero_run(&m, &c, &p, &o, &hc, &err) == AP_OK);
            if (hc) {
                CHECK_INT(ap_hetero_summary_of(hc)->stopped, 3);
                CHECK_INT(ap_hetero_summary_of(hc)->fits, 0);
                cut++;
            }
            o.step_cutoff_s = w->step_s;
            CHECK(ap_hetero_run(&m, &c, &p, &o, &hs, &err) == AP_OK);
            if (hs) {
                const ap_hetero_summary *t = ap_hetero_summary_of(hs);
                CHECK_INT(t->stopped, 0);
                CHECK(t->step_s == w->step_s);
                CHECK(t->gpu_peak_bytes == w->gpu_peak_bytes);
                CHECK_INT(t->fits, w->fits);
                whole++;
            }
            ap_hetero_free(hw);
            ap_hetero_free(hc);
            ap_hetero_free(hs);
        }
        ap_hetero_cache_free(&cache);
    }
    CHECK_INT(cut, 10);
    CHECK_INT(whole, 10);
}

/* Steps of more micro-batches than an int counts (--gbs up to 2^32 sequences, one GPU): the
 * simulators run the first two and the last and count the second m - 3 more times (hetero_int.h
 * hsnap), so with m = 2^32 + 3 against m = 2^20 + 3 the step grows by the second micro-batch's
 * time x (2^32 - 2^20) and every traffic counter likewise, and the summary reports m. The count
 * was an int: 2^32 + 3 read as 3 (a 50 ms step for 4 billion sequences), and the walk over the
 * repeated micro-batches took minutes. Gemini static and auto, ZeRO-Offload, ZeRO-Infinity. */
static void test_many_micro_batches(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("a100-sxm4-80g", 1024);
    c.nvme_bytes = 4e12;
    c.nvme_read_bytes_per_s = c.nvme_write_bytes_per_s = 3e9;
    const int64_t small = ((int64_t)1 << 20) + 3, big = ((int64_t)1 << 32) + 3;
    int ran = 0;
    for (int k = 0; k <= 6; k++) {
        ap_plan ps = offload_case(k), pb = ps;
        ps.grad_accum = ps.gbs = small * ps.mbs;
        pb.grad_accum = pb.gbs = big * pb.mbs;
        ap_err err;
        if (ap_hetero_size_param_buffers(&m, &ps, &err) != AP_OK ||
            ap_hetero_size_param_buffers(&m, &pb, &err) != AP_OK)
            continue;
        ap_hetero *h1 = NULL, *h2 = NULL, *h3 = NULL;
        ap_plan p3 = ps;
        p3.grad_accum = p3.gbs = 4 * ps.mbs; /* m = 4: the second micro-batch once more */
        ap_hetero_opts o;
        ap_hetero_opts_init(&o);
        if (ap_hetero_run(&m, &c, &ps, &o, &h1, &err) != AP_OK ||
            ap_hetero_run(&m, &c, &pb, &o, &h2, &err) != AP_OK ||
            ap_hetero_run(&m, &c, &p3, &o, &h3, &err) != AP_OK) {
            CHECK(0);
            fprintf(stderr, "  case %d: %s\n", k, err.msg);
        } else {
            const ap_hetero_summary *a = ap_hetero_summary_of(h1), *b = ap_hetero_summary_of(h2);
            const ap_hetero_summary *four = ap_hetero_summary_of(h3);
            CHECK(a->micro_batches == small && b->micro_batches == big);
            /* the second micro-batch's share: m = 4 less m = 3's, read from m = 2^20 + 3 less
             * m = 4 over 2^20 - 1 repetitions */
            double one = (a->step_s - four->step_s) / (double)(small - 4);
            CHECK(one > 0);
            CHECK_NEAR(b->step_s, a->step_s + one * (double)(big - small), 1e-6 * b->step_s);
            CHECK(b->compute_s > 4000.0 * a->compute_s);
            /* the reported step's records: the last micro-batch is number 2^32 + 2 */
            int nops = 0;
            const ap_hetero_oprec *ops = ap_hetero_ops(h2, &nops);
            int64_t last_mb = -1;
            for (int i = 0; i < nops; i++)
                if (ops[i].mb > last_mb) last_mb = ops[i].mb;
            CHECK(last_mb == big - 1);
            CHECK_NEAR(b->h2d_bytes, a->h2d_bytes + (a->h2d_bytes - four->h2d_bytes) /
                                                    (double)(small - 4) * (double)(big - small),
                       1e-6 * b->h2d_bytes + 1);
            ran++;
        }
        ap_hetero_free(h1);
        ap_hetero_free(h2);
        ap_hetero_free(h3);
    }
    CHECK(ran >= 5);
}

static void test_zero_hand(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster big = one_gpu("h200", 1024);
    double P = (double)ap_model_total_params(&m);
    int64_t largest = m.vocab * m.hidden;
    ap_hetero *h;
    /* ZeRO-Offload (stage 2), one GPU, one micro-batch: the fp32 gradient partition down (4 B,
       async_inplace_copy_grad_to_fp32_buffer_from_gpu), the 16-bit parameters up (2 B); host:
       fp32 4 + fp32 gradient 4 + m, v 8 + bit16 buffer 2, and the largest parameter's staging
       buffer (2 B) */
    ap_plan p = ds_plan(2, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 1);
    const ap_hetero_summary *s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->d2h_bytes, 4.0 * P, 1e-12);
        CHECK_NEAR(s->h2d_bytes, 2.0 * P, 1e-12);
        CHECK_NEAR(s->host_peak_bytes, 18.0 * P + 2.0 * (double)largest, 1e-12);
        CHECK_NEAR(s->host_pinned_bytes, 10.0 * P + 2.0 * (double)largest, 1e-12);
        CHECK_NEAR(s->cpu_adam_s, P * 34.0 / (0.7 * big.host_mem_bytes_per_s), 1e-9);
    }
    ap_hetero_free(h);
    /* with two micro-batches: the 16-bit gradients accumulate on the host (down every
       micro-batch, up from the second) and the boundary copies fp32 down */
    p = ds_plan(2, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 2);
    s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->d2h_bytes, 2.0 * 2.0 * P + 4.0 * P, 1e-12);
        CHECK_NEAR(s->h2d_bytes, 2.0 * P + 2.0 * P, 1e-12);
        CHECK_NEAR(s->host_peak_bytes, 20.0 * P + 2.0 * (double)largest, 1e-12);
    }
    ap_hetero_free(h);
    /* six micro-batches (the middle ones stand in for each other: simulated once, counted
       three times): down 2 B each and 4 B at the boundary, up from the second on */
    p = ds_plan(2, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 6);
    s = run(&m, &big, &p, &h);
    if (s) {
        CHECK_NEAR(s->d2h_bytes, 6.0 * 2.0 * P + 4.0 * P, 1e-12);
        CHECK_NEAR(s->h2d_bytes, 5.0 * 2.0 * P + 2.0 * P, 1e-12);
        /* the step is six micro-batches of compute plus what is exposed */
        CHECK(s->step_s > 6.0 * (s->compute_s / 6.0));
        CHECK_NEAR(s->compute_s / 6.0, s->compute_s / s->micro_batches, 1e-12);
    }
    ap_hetero_free(h);
    /* ZeRO-Infinity on the host, nothing persistent, nothing kept for reuse, no prefetch: the
       16-bit partitions come up for the forward and the backward (2 + 2; the tied embedding
       twice more, as the LM head); each gradient partition goes down, back up, and at the
       boundary down in fp32 (partition_grads) */
    p = ds_plan(3, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_CPU, 1);
    p.hetero.ds_param_persistence_threshold = 0;
    p.hetero.ds_max_reuse_distance = 0;
    p.hetero.ds_prefetch_bucket_size = 0;
    s = run(&m, &big, &p, &h);
    if (s) {
        double tied = 2.0 * (double)largest;
        CHECK_NEAR(s->h2d_bytes, 2.0 * (2.0 * P + tied) + 2.0 * P, 1e-12);
        CHECK_NEAR(s->d2h_bytes, 2.0 * P + 4.0 * P, 1e-12);
        CHECK_NEAR(s->nvme_read_bytes + s->nvme_write_bytes, 0, 1e-12);
    }
    ap_hetero_free(h);
    /* keeping parameters for reuse only lowers the traffic */
    ap_plan p2 = ds_plan(3, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_CPU, 1);
    s = run(&m, &big, &p2, &h);
    if (s) CHECK(s->h2d_bytes <= 6.0 * P);
    ap_hetero_free(h);
    /* NVMe: a partition larger than the swap buffer is DeepSpeed's assertion */
    ap_cluster nv = big;
    nv.nvme_bytes = 3.84e12;
    nv.nvme_read_bytes_per_s = nv.nvme_write_bytes_per_s = 6e9;
    p = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_NVME, 1);
    p.hetero.ds_max_in_cpu = 0;
    p.hetero.ds_param_buffer_size = 1000000;
    ap_err err;
    ap_hetero_opts o;
    ap_hetero_opts_init(&o);
    CHECK(ap_hetero_run(&m, &nv, &p, &o, &h, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "buffer_size");
    /* with big enough buffers: the optimizer's sub-groups swap 16 B in and 12 B out, and the
       parameters beyond max_in_cpu are read from NVMe */
    p.hetero.ds_param_buffer_size = 100000000;
    s = run(&m, &nv, &p, &h);
    if (s) {
        CHECK(s->nvme_read_bytes >= 16.0 * P);
        CHECK(s->nvme_write_bytes >= 12.0 * P);
        CHECK(s->nvme_bytes_per_node >= 16.0 * P);
    }
    ap_hetero_free(h);
}

/* ---- validation ----------------------------------------------------------------------------- */

static void test_validation(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("rtx-3090", 128);
    ap_err err;
    ap_plan p = gemini_plan(AP_GEMINI_STATIC, 1.5, 0, 1, 1, 1024);
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "offload_optim_frac");
    p = gemini_plan(AP_GEMINI_STATIC, 0.5, 0.5, 1, 1, 1024);
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "ignored by Colossal-AI");
    p = gemini_plan(AP_GEMINI_STATIC, 1, 0.5, 1, 1, 1024);
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_OK);
    p.hetero.shard_param_frac = NAN;
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    p = ds_plan(2, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_CPU, 1);
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "ZeRO stage 3");
    p = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_NONE, 1);
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "NVMe");
    p = ds_plan(3, AP_OFFLOAD_DEV_CPU, AP_OFFLOAD_DEV_NONE, 1);
    p.hetero.ds_param_buffer_count = 0;
    CHECK(ap_plan_hetero_validate(&p, &c, "plan", &err) == AP_ERR_INPUT);
    /* a plan the simulators do not take */
    ap_plan q;
    ap_plan_init(&q);
    ap_hetero *h;
    CHECK(ap_hetero_run(&m, &c, &q, NULL, &h, &err) == AP_ERR_INPUT);
    /* GeminiPlugin is ZeRO-3 without pipelines */
    p = gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 1, 1024);
    p.zero = 2;
    CHECK(ap_hetero_run(&m, &c, &p, NULL, &h, &err) == AP_ERR_INFEASIBLE);
    /* cluster files: NVMe needs both capacity and bandwidth */
    ap_cluster cc;
    const char *bad1 = "{\"gpu\": \"rtx-3090\", \"gpus\": 1, \"nvme\": \"2TB\"}";
    CHECK(ap_cluster_parse(bad1, strlen(bad1), "nv.json", &cc, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "nv.json: field 'nvme_bw'");
    const char *bad2 = "{\"gpu\": \"rtx-3090\", \"gpus\": 1, \"nvme_bw\": \"6GB/s\"}";
    CHECK(ap_cluster_parse(bad2, strlen(bad2), "nv.json", &cc, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 'nvme'");
    const char *bad3 = "{\"gpu\": \"rtx-3090\", \"gpus\": 1, \"nvme\": 3}";
    CHECK(ap_cluster_parse(bad3, strlen(bad3), "nv.json", &cc, &err) == AP_ERR_INPUT);
    const char *ok = "{\"gpu\": \"rtx-3090\", \"gpus\": 1, \"nvme\": \"2TB\", \"nvme_read_bw\": "
                     "\"7GB/s\", \"nvme_write_bw\": \"5GB/s\"}";
    CHECK(ap_cluster_parse(ok, strlen(ok), "nv.json", &cc, &err) == AP_OK);
    CHECK_NEAR(cc.nvme_bytes, 2e12, 1e-12);
    CHECK_NEAR(cc.nvme_read_bytes_per_s, 7e9, 1e-12);
    CHECK_NEAR(cc.nvme_write_bytes_per_s, 5e9, 1e-12);
    /* NVMe changes the fingerprint; no NVMe keeps the old one */
    ap_cluster c0 = one_gpu("rtx-3090", 128), c1 = c0;
    uint64_t f0 = ap_cluster_fingerprint(&c0);
    c1.nvme_bytes = 1e12;
    c1.nvme_read_bytes_per_s = c1.nvme_write_bytes_per_s = 1e9;
    CHECK(ap_cluster_fingerprint(&c1) != f0);
}

/* ---- families and fit ----------------------------------------------------------------------- */

static void test_families(void) {
    ap_err err;
    ap_family f;
    static const char *fams[] = {"gpt", "llama", "llama3", "gpt2-colossalai"};
    for (size_t k = 0; k < 4; k++) {
        CHECK(ap_family_get(fams[k], &f, &err) == AP_OK);
        ap_family_rung *r;
        int n;
        CHECK(ap_family_ladder(&f, &r, &n, &err) == AP_OK);
        CHECK(n > 10);
        for (int i = 1; i < n; i++) CHECK(r[i].params > r[i - 1].params);
        /* every published shape is a rung, with its own parameter count */
        for (int s = 0; s < f.nshapes; s++) {
            int seen = 0;
            for (int i = 0; i < n; i++) seen |= r[i].shape == s && r[i].layers == f.shapes[s].layers;
            CHECK(seen);
        }
        ap_model m;
        CHECK(ap_family_model(&f, &r[n / 2], &m, &err) == AP_OK);
        CHECK_INT(ap_model_total_params(&m), r[n / 2].params);
        free(r);
    }
    /* GPT-3 13B as published (d 5120, 40 layers): 12.85e9 parameters with the 2048-row
       position table and tied embeddings */
    CHECK(ap_family_get("gpt", &f, &err) == AP_OK);
    ap_family_rung r13 = {6, 40, 0};
    ap_model m;
    CHECK(ap_family_model(&f, &r13, &m, &err) == AP_OK);
    CHECK_NEAR((double)ap_model_total_params(&m), 12.85e9, 0.002);
    CHECK(ap_family_get("nope", &f, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "unknown family");
    /* a family file */
    const char *dir = tl_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/fam.json", dir);
    tl_write(path, "{\"name\": \"mini\", \"model\": {\"layers\": 2, \"hidden\": 256, \"heads\": 4, "
                   "\"vocab\": 1000, \"seq_len\": 256}, \"shapes\": [{\"layers\": 4, \"hidden\": "
                   "512, \"heads\": 8, \"ffn_hidden\": 2048}, {\"layers\": 2, \"hidden\": 256, "
                   "\"heads\": 4, \"ffn_hidden\": 1024}]}");
    CHECK(ap_family_get(path, &f, &err) == AP_OK);
    CHECK_INT(f.nshapes, 2);
    CHECK_INT(f.shapes[0].hidden, 256); /* sorted by size */
    tl_write(path, "{\"name\": \"mini\", \"model\": {\"layers\": 2, \"hidden\": 256, \"heads\": 4, "
                   "\"vocab\": 1000}, \"shapes\": [{\"layers\": 4, \"hidden\": 512, \"heads\": 8, "
                   "\"kv_heads\": 3, \"ffn_hidden\": 2048}]}");
    CHECK(ap_family_get(path, &f, &err) == AP_ERR_INPUT);
    tl_write(path, "{\"name\": \"mini\", \"shapez\": []}");
    CHECK(ap_family_get(path, &f, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "shapez");
}

static void test_fit_boundary(void) {
    ap_err err;
    ap_family f;
    CHECK(ap_family_get("gpt2-colossalai", &f, &err) == AP_OK);
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_cluster_from_gpu(ap_gpu_find("rtx-3090"), 1, &o.cluster);
    o.cluster.cpu_mem_bytes = 256 * GIB;
    o.family = &f;
    o.strategies = (1u << AP_FIT_ZERO3) | (1u << AP_FIT_ZERO_OFFLOAD) |
                   (1u << AP_FIT_GEMINI_AUTO) | (1u << AP_FIT_GEMINI_STATIC) |
                   (1u << AP_FIT_ZERO_INF_NVME);
    ap_fit_result r;
    CHECK(ap_fit(&o, &r, &err) == AP_OK);
    CHECK_INT(r.n, 5);
    ap_family_rung *rungs;
    int n;
    CHECK(ap_family_ladder(&f, &rungs, &n, &err) == AP_OK);
    for (int i = 0; i < r.n; i++) {
        const ap_fit_entry *e = &r.e[i];
        if (e->strategy == AP_FIT_ZERO_INF_NVME) {
            CHECK(!e->available);
            continue;
        }
        CHECK(e->found);
        if (!e->found) continue;
        ap_model m;
        ap_fit_verdict v;
        /* the largest size fits, the next does not */
        CHECK(ap_family_model(&f, &rungs[e->rung], &m, &err) == AP_OK);
        CHECK(ap_fit_eval(&o, e->strategy, &m, &v, &err) == AP_OK);
        CHECK(v.fits);
        CHECK(e->have_next);
        CHECK(ap_family_model(&f, &rungs[e->rung + 1], &m, &err) == AP_OK);
        CHECK(ap_fit_eval(&o, e->strategy, &m, &v, &err) == AP_OK);
        CHECK(!v.fits);
        CHECK(v.binding != AP_BIND_NONE);
        CHECK_INT(e->binding, v.binding);
        CHECK(e->evaluations < 20);
    }
    /* the host binds Gemini at 256 GiB (14 B per parameter, 90% usable): about 16-17B */
    for (int i = 0; i < r.n; i++)
        if (r.e[i].strategy == AP_FIT_GEMINI_AUTO) {
            CHECK_INT(r.e[i].binding, AP_BIND_HOST);
            CHECK(r.e[i].largest_params > 14e9 && r.e[i].largest_params < 18e9);
        }
    free(rungs);
}

/* The bisection against a scan of every rung, on a small family and a small GPU. */
static void test_fit_scan(void) {
    ap_err err;
    ap_family f;
    const char *dir = tl_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/fam.json", dir);
    tl_write(path, "{\"name\": \"mini\", \"model\": {\"layers\": 2, \"hidden\": 512, \"heads\": 8, "
                   "\"vocab\": 32000, \"seq_len\": 512, \"activation\": \"swiglu\", \"norm\": "
                   "\"rmsnorm\"}, \"shapes\": [{\"layers\": 4, \"hidden\": 512, \"heads\": 8, "
                   "\"ffn_hidden\": 1536}, {\"layers\": 8, \"hidden\": 1024, \"heads\": 16, "
                   "\"ffn_hidden\": 3072}]}");
    CHECK(ap_family_get(path, &f, &err) == AP_OK);
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_cluster_from_gpu(ap_gpu_find("rtx-2060"), 1, &o.cluster);
    o.cluster.gpu.mem_bytes = 1.2 * GIB;
    o.headroom_bytes = 0;
    o.cluster.cpu_mem_bytes = 8 * GIB;
    o.family = &f;
    o.strategies = (1u << AP_FIT_ZERO3) | (1u << AP_FIT_GEMINI_AUTO) |
                   (1u << AP_FIT_ZERO_OFFLOAD) | (1u << AP_FIT_BEST);
    ap_fit_result r;
    CHECK(ap_fit(&o, &r, &err) == AP_OK);
    ap_family_rung *rungs;
    int n;
    CHECK(ap_family_ladder(&f, &rungs, &n, &err) == AP_OK);
    for (int i = 0; i < r.n; i++) {
        const ap_fit_entry *e = &r.e[i];
        int last_fit = -1;
        static ap_fit_verdict at, next;
        for (int k = 0; k < n; k++) {
            ap_model m;
            ap_fit_verdict v;
            ap_family_model(&f, &rungs[k], &m, &err);
            CHECK(ap_fit_eval(&o, e->strategy, &m, &v, &err) == AP_OK);
            if (v.fits) last_fit = k, at = v;
            if (k == last_fit + 1 && !v.fits) next = v;
        }
        CHECK_INT(e->found ? e->rung : -1, last_fit);
        /* the boundary's two sizes as a full evaluation gives them (the best's bisection asks
           the sizes between only whether they fit) */
        if (e->found) {
            char la[160], lb[160];
            CHECK(e->at.step_s == at.step_s && e->at.gpu_peak_bytes == at.gpu_peak_bytes);
            CHECK(strcmp(ap_plan_label(&e->at.plan, la, sizeof la),
                         ap_plan_label(&at.plan, lb, sizeof lb)) == 0);
        }
        if (e->found && e->have_next) {
            CHECK_INT(e->next.binding, next.binding);
            CHECK(strcmp(e->next.detail, next.detail) == 0);
        }
    }
    free(rungs);
    /* every strategy, on 1 and 3 threads: the same entries, byte for byte */
    o.strategies = 0;
    static ap_fit_result r1, r3;
    o.threads = 1;
    CHECK(ap_fit(&o, &r1, &err) == AP_OK);
    o.threads = 3;
    CHECK(ap_fit(&o, &r3, &err) == AP_OK);
    CHECK_INT(r1.n, r3.n);
    CHECK(r1.n >= 8);
    for (int i = 0; i < r1.n && i < r3.n; i++) {
        const ap_fit_entry *a = &r1.e[i], *b = &r3.e[i];
        char la[160], lb[160];
        CHECK_INT(a->strategy, b->strategy);
        CHECK_INT(a->found, b->found);
        CHECK_INT(a->rung, b->rung);
        CHECK_INT(a->binding, b->binding);
        CHECK_INT(a->evaluations, b->evaluations);
        CHECK(a->at.step_s == b->at.step_s && a->next.step_s == b->next.step_s);
        CHECK(a->at.gpu_peak_bytes == b->at.gpu_peak_bytes);
        CHECK(strcmp(a->next.detail, b->next.detail) == 0);
        CHECK(strcmp(ap_plan_label(&a->at.plan, la, sizeof la),
                     ap_plan_label(&b->at.plan, lb, sizeof lb)) == 0);
    }
    /* a throughput floor binds before memory */
    o.min_tokens_per_s = 1e12;
    o.strategies = 1u << AP_FIT_GEMINI_AUTO;
    CHECK(ap_fit(&o, &r, &err) == AP_OK);
    CHECK(!r.e[0].found);
    CHECK_INT(r.e[0].binding, AP_BIND_THROUGHPUT);
    /* bad options */
    o.mbs = 0;
    CHECK(ap_fit(&o, &r, &err) == AP_ERR_INPUT);
}


/* ---- the seeds' claims (tests/data/hetero_claims.json, docs/heterogeneous.md) ------------------ */

static double jnum(const ap_json *o, const char *k, double dflt) {
    ap_json *v = ap_json_get(o, k);
    return v && ap_json_is_number(v) ? ap_json_number(v) : dflt;
}

static void test_claims(void) {
    ap_err err;
    ap_json *root = ap_json_parse_file(tl_path("tests/data/hetero_claims.json"), &err);
    CHECK(root != NULL);
    if (!root) return;
    char *doc = tl_read(tl_path("docs/heterogeneous.md"));
    CHECK(doc != NULL);
    ap_json *arr = ap_json_get(root, "claims");
    CHECK(ap_json_size(arr) >= 6);
    for (int i = 0; i < ap_json_size(arr); i++) {
        ap_json *c = ap_json_at(arr, i);
        const char *id = ap_json_string(ap_json_get(c, "id"));
        ap_family f;
        CHECK(ap_family_get(ap_json_string(ap_json_get(c, "family")), &f, &err) == AP_OK);
        ap_family_rung r = {(int)jnum(c, "shape", 0), (int64_t)jnum(c, "layers", 1), 0};
        ap_model m;
        CHECK(ap_family_model(&f, &r, &m, &err) == AP_OK);
        ap_fit_opts o;
        ap_fit_opts_init(&o);
        int gpus = (int)jnum(c, "gpus", 1);
        ap_cluster_from_gpu(ap_gpu_find(ap_json_string(ap_json_get(c, "gpu"))), gpus, &o.cluster);
        if (jnum(c, "gpus_per_node", 0) > 0)
            ap_cluster_set_gpus_per_node(&o.cluster, (int)jnum(c, "gpus_per_node", 0));
        if (jnum(c, "cpu_mem_gib", 0) > 0) o.cluster.cpu_mem_bytes = jnum(c, "cpu_mem_gib", 0) * GIB;
        if (jnum(c, "nvme_tb", 0) > 0) {
            o.cluster.nvme_bytes = jnum(c, "nvme_tb", 0) * 1e12;
            o.cluster.nvme_read_bytes_per_s = o.cluster.nvme_write_bytes_per_s =
                jnum(c, "nvme_gbps", 0) * 1e9;
        }
        o.family = &f;
        o.seq = (int64_t)jnum(c, "seq", 0);
        o.mbs = (int64_t)jnum(c, "mbs", 1);
        o.tokens_per_step = jnum(c, "tokens_per_step", 0);
        ap_json *dt = ap_json_get(c, "dtype");
        if (dt) {
            CHECK(ap_dtype_parse(ap_json_string(dt), &o.dtype) == AP_OK);
            o.dtype_set = 1;
        }
        int strat;
        CHECK(ap_fit_strategy_parse(ap_json_string(ap_json_get(c, "strategy")), &strat, &err) ==
              AP_OK);
        ap_fit_verdict v;
        CHECK(ap_fit_eval(&o, strat, &m, &v, &err) == AP_OK);
        ap_json *e = ap_json_get(c, "expect");
        fprintf(stderr, "claim %s: fits %d binding %s host %.2f GiB gpu %.2f GiB %.1f tokens/s\n",
                id, v.fits, ap_binding_name(v.binding), v.host_bytes_per_node / GIB,
                v.gpu_peak_bytes / GIB, v.tokens_per_s);
        CHECK_INT(v.fits, ap_json_bool(ap_json_get(e, "fits")));
        CHECK_STR(ap_binding_name(v.binding), ap_json_string(ap_json_get(e, "binding")));
        CHECK_NEAR(v.host_bytes_per_node / GIB, jnum(e, "host_gib", 0), 0.01);
        CHECK_NEAR(v.gpu_peak_bytes / GIB, jnum(e, "gpu_gib", 0), 0.01);
        CHECK_NEAR(v.tokens_per_s, jnum(e, "tokens_per_s", 0), 0.01);
        /* the docs' table carries every claim */
        if (doc) CHECK_CONTAINS(doc, id);
    }
    free(doc);
    ap_json_free(root);
}

/* ---- configs and the command line ---------------------------------------------------------- */

/* Every "name=" argument of the plugin call is GeminiPlugin's (colossalai_plugin_args.txt). */
static void check_plugin_args(const char *py) {
    char *keys = tl_read(tl_path("tests/data/trainers/colossalai_plugin_args.txt"));
    CHECK(keys != NULL);
    if (!keys) return;
    const char *p = strstr(py, "GeminiPlugin(");
    CHECK(p != NULL);
    for (p = p ? strchr(p, '\n') : NULL; p && p[1] == ' '; p = strchr(p + 1, '\n')) {
        const char *q = p + 1;
        while (*q == ' ') q++;
        const char *eq = strchr(q, '=');
        if (!eq) break;
        char want[96];
        snprintf(want, sizeof want, "\nGeminiPlugin.%.*s\n", (int)(eq - q), q);
        CHECK_CONTAINS(keys, want);
    }
    free(keys);
}

static void test_emit(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("rtx-3090", 128);
    ap_err err;
    ap_emit_out out;
    /* Gemini auto: the placement, its ratios and the chunk search */
    ap_plan p = gemini_plan(AP_GEMINI_AUTO, 0, 0, 1, 1, 1024);
    p.hetero.hidden_dim = 768;
    p.dp = 1;
    CHECK(ap_emit_render(AP_EMIT_COLOSSALAI, &m, &c, &p, NULL, &out, &err) == AP_OK);
    const char *py = out.nfiles > 0 ? out.files[0].text : "";
    CHECK_CONTAINS(py, "placement_policy=\"auto\"");
    CHECK_CONTAINS(py, "steady_cuda_cap_ratio=0.9");
    CHECK_CONTAINS(py, "hidden_dim=768");
    CHECK(strstr(py, "offload_optim_frac") == NULL);
    check_plugin_args(py);
    ap_emit_out_free(&out);
    /* static with its fractions */
    p = gemini_plan(AP_GEMINI_STATIC, 1.0, 0.5, 1, 1, 1024);
    p.dp = 1;
    CHECK(ap_emit_render(AP_EMIT_COLOSSALAI, &m, &c, &p, NULL, &out, &err) == AP_OK);
    py = out.nfiles > 0 ? out.files[0].text : "";
    CHECK_CONTAINS(py, "placement_policy=\"static\"");
    CHECK_CONTAINS(py, "offload_optim_frac=1,");
    CHECK_CONTAINS(py, "offload_param_frac=0.5,");
    check_plugin_args(py);
    ap_emit_out_free(&out);
    /* a combination Colossal-AI ignores is refused, naming the rule */
    ap_plan q;
    ap_plan_init(&q);
    q.trainer = AP_TRAINER_COLOSSALAI;
    q.zero = 3;
    q.mbs = q.gbs = q.grad_accum = 1;
    q.seq = 1024;
    q.offload_optimizer = 0.5;
    q.offload_params = 0.5;
    CHECK(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &q, NULL, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "only with all optimizer states offloaded");
    /* and a static placement that shards less than everything */
    q = gemini_plan(AP_GEMINI_STATIC, 1.0, 0.5, 1, 1, 1024);
    q.offload_optimizer = 1.0;
    q.offload_params = 0.5;
    q.hetero.shard_param_frac = 0.5;
    q.dp = 1;
    CHECK(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &q, NULL, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "ignores offload_param_frac");
    /* a placement whose fractions disagree with the plan's: the config would not be what was
       simulated */
    q = gemini_plan(AP_GEMINI_STATIC, 1.0, 0.0, 1, 1, 1024);
    q.offload_optimizer = 0.25;
    q.dp = 1;
    CHECK(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &q, NULL, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "differ from the plan's offload fractions");
    /* DeepSpeed ZeRO-Infinity on NVMe: device, path, buffers, pinning */
    ap_cluster nv = c;
    nv.nvme_bytes = 2e12;
    nv.nvme_read_bytes_per_s = nv.nvme_write_bytes_per_s = 6e9;
    ap_plan d = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_NVME, 1);
    d.dp = 1;
    d.offload_optimizer = d.offload_params = 1;
    d.hetero.ds_param_buffer_count = 7;
    CHECK(ap_emit_render(AP_EMIT_DEEPSPEED, &m, &nv, &d, NULL, &out, &err) == AP_OK);
    ap_json *cfg = NULL;
    for (int i = 0; i < out.nfiles; i++)
        if (!strcmp(out.files[i].name, "ds_config.json"))
            cfg = ap_json_parse(out.files[i].text, out.files[i].len, "ds_config.json", &err);
    CHECK(cfg != NULL);
    if (cfg) {
        ap_json *z = ap_json_get(cfg, "zero_optimization");
        ap_json *op = ap_json_get(z, "offload_param"), *oo = ap_json_get(z, "offload_optimizer");
        CHECK_STR(ap_json_string(ap_json_get(op, "device")), "nvme");
        CHECK_STR(ap_json_string(ap_json_get(oo, "device")), "nvme");
        CHECK_NEAR(ap_json_number(ap_json_get(op, "buffer_count")), 7, 0);
        CHECK_NEAR(ap_json_number(ap_json_get(op, "max_in_cpu")), 1e9, 0);
        CHECK(ap_json_bool(ap_json_get(op, "pin_memory")));
        CHECK(ap_json_get(op, "nvme_path") != NULL);
        CHECK_NEAR(ap_json_number(ap_json_get(z, "sub_group_size")), 1e9, 0);
        /* every key is one DeepSpeed reads (deepspeed_keys.txt) */
        char *keys = tl_read(tl_path("tests/data/trainers/deepspeed_keys.txt"));
        static const char *paths[] = {"zero_optimization.offload_param.nvme_path",
                                      "zero_optimization.offload_param.buffer_size",
                                      "zero_optimization.offload_param.max_in_cpu",
                                      "zero_optimization.offload_optimizer.buffer_count",
                                      "zero_optimization.sub_group_size"};
        for (size_t k = 0; keys && k < sizeof paths / sizeof paths[0]; k++)
            CHECK_CONTAINS(keys, paths[k]);
        free(keys);
        ap_json_free(cfg);
    }
    ap_emit_out_free(&out);
}


/* tl_run with "examples/" resolved against the source directory (ctest runs in the build tree) */
static int run_src(const char *args, char **out, char **err) {
    char cmd[2048];
    size_t n = 0;
    const char *root = tl_path("");
    for (const char *a = args; *a && n + 1 < sizeof cmd;) {
        if (!strncmp(a, "examples/", 9)) {
            n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s", root);
            if (n >= sizeof cmd) return -2;
        }
        cmd[n++] = *a++;
    }
    cmd[n] = 0;
    return tl_run(cmd, out, err);
}
static void test_cli(void) {
    char *out, *err;
    /* fit --json: the schema the issue names */
    int rc = tl_run("fit --gpu rtx-3090 --cpu-mem 256GiB --family gpt2-colossalai --seq 1024 "
                    "--strategies zero-offload,gemini-auto,zero-infinity-nvme --json",
                    &out, &err);
    CHECK_INT(rc, 0);
    ap_err e;
    ap_json *j = ap_json_parse(out, strlen(out), "fit", &e);
    CHECK(j != NULL);
    if (j) {
        ap_json *st = ap_json_get(j, "strategies");
        CHECK_INT(ap_json_size(st), 3);
        for (int i = 0; i < ap_json_size(st); i++) {
            ap_json *x = ap_json_at(st, i);
            CHECK(ap_json_get(x, "name") && ap_json_get(x, "largest_params") &&
                  ap_json_get(x, "binding") && ap_json_get(x, "step_s") &&
                  ap_json_get(x, "tokens_per_s"));
        }
        /* in the strategies' order: zero-offload, zero-infinity-nvme, gemini-auto */
        CHECK_STR(ap_json_string(ap_json_get(ap_json_at(st, 2), "name")), "gemini-auto");
        CHECK_STR(ap_json_string(ap_json_get(ap_json_at(st, 2), "binding")), "host");
        CHECK(ap_json_number(ap_json_get(ap_json_at(st, 2), "largest_params")) > 14e9);
        CHECK(!ap_json_bool(ap_json_get(ap_json_at(st, 1), "available")));
        ap_json_free(j);
    }
    free(out);
    free(err);
    /* the table */
    rc = tl_run("fit --gpu rtx-2060 --family gpt2-colossalai --strategies gemini-auto", &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "gemini-auto");
    CHECK_CONTAINS(out, "binding");
    free(out);
    free(err);
    /* simulate a Gemini plan: memory over the iteration and PCIe traffic */
    rc = run_src("simulate examples/models/gpt2.json --gpus 1 --gpu rtx-3090 --trainer colossalai "
                "--gemini static --offload-optimizer 1 --offload-params 1 --recompute full",
                &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "PCIe      per step");
    CHECK_CONTAINS(out, "host      ");
    CHECK_CONTAINS(out, "GPU and host memory over the step");
    free(out);
    free(err);
    rc = run_src("simulate examples/models/gpt2.json --gpus 1 --gpu rtx-3090 --trainer deepspeed "
                "--zero 3 --offload-optimizer 1 --offload-params 1 --offload-device nvme --nvme 2TB "
                "--nvme-bw 3GB/s --json", &out, &err);
    CHECK_INT(rc, 0);
    j = ap_json_parse(out, strlen(out), "simulate", &e);
    CHECK(j != NULL);
    if (j) {
        CHECK_STR(ap_json_string(ap_json_get(j, "strategy")), "zero-infinity-nvme");
        CHECK(ap_json_number(ap_json_get(ap_json_get(j, "traffic"), "nvme_read_bytes")) > 0);
        CHECK(ap_json_size(ap_json_get(j, "curve")) > 10);
        ap_json_free(j);
    }
    free(out);
    free(err);
    /* bad input: one line, exit 2 */
    static const char *bad[][2] = {
        {"fit --gpu rtx-3090 --nvme 2TB", "--nvme-bw"},
        {"fit --gpu rtx-3090 --nvme-bw 3GB/s", "--nvme"},
        {"fit --gpu rtx-3090 --cpu-mem 12", "--cpu-mem"},
        {"fit --gpu rtx-3090 --family nope", "unknown family"},
        {"fit --gpu rtx-3090 --strategies gemini", "unknown strategy"},
        {"fit --gpu rtx-3090 --mbs 0", "--mbs"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer colossalai --gemini static "
         "--offload-optimizer 1.5", "--offload-optimizer"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer colossalai --gemini static "
         "--offload-optimizer 0.5 --offload-params 0.5", "ignored by Colossal-AI"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer colossalai --gemini static "
         "--shard-param-frac -0.1", "--shard-param-frac"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer colossalai --gemini sometimes",
         "--gemini"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer deepspeed --zero 3 "
         "--offload-optimizer 1 --offload-device nvme", "NVMe"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer deepspeed --zero 3 "
         "--offload-device cpu", "--offload-device"},
        {"estimate examples/models/gpt2.json --gpus 1 --trainer megatron --gemini auto",
         "Colossal-AI"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = run_src(bad[i][0], &out, &err);
        CHECK_INT(rc, 2);
        CHECK_CONTAINS(err, bad[i][1]);
        /* one line */
        CHECK(strchr(err, '\n') == err + strlen(err) - 1);
        free(out);
        free(err);
    }
}

/* plan.json keeps the placement and the NVMe; a tampered fraction is refused. */
static void test_planfile(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("rtx-3090", 128);
    c.nvme_bytes = 2e12;
    c.nvme_read_bytes_per_s = 7e9;
    c.nvme_write_bytes_per_s = 5e9;
    ap_err err;
    ap_plan ps[2];
    ps[0] = gemini_plan(AP_GEMINI_STATIC, 1.0, 0.5, 1, 1, 1024);
    ps[0].offload_optimizer = 1.0;
    ps[0].offload_params = 0.5;
    ps[0].hetero.max_prefetch = 2;
    ps[1] = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_CPU, 1);
    ps[1].offload_optimizer = ps[1].offload_params = 1;
    ps[1].hetero.ds_param_buffer_size = 12345678;
    for (int k = 0; k < 2; k++) {
        ps[k].dp = 1;
        ap_json *j = ap_planfile_to_json(&m, &c, &ps[k], NULL);
        CHECK(j != NULL);
        ap_model m2;
        ap_cluster c2;
        ap_plan p2;
        CHECK(ap_planfile_from_json(j, "plan.json", &m2, &c2, &p2, NULL, &err) == AP_OK);
        CHECK(memcmp(&p2.hetero, &ps[k].hetero, sizeof p2.hetero) == 0);
        CHECK_NEAR(c2.nvme_bytes, 2e12, 0);
        CHECK_NEAR(c2.nvme_write_bytes_per_s, 5e9, 0);
        if (k == 0) {
            /* Colossal-AI would ignore this parameter fraction: refused on reading */
            ap_json *g = ap_json_get(ap_json_get(ap_json_get(j, "plan"), "hetero"), "gemini");
            ap_json_free(ap_json_detach(g, "shard_param_frac"));
            ap_json_add_number(g, "shard_param_frac", 0.5);
            CHECK(ap_planfile_from_json(j, "plan.json", &m2, &c2, &p2, NULL, &err) == AP_ERR_INPUT);
            CHECK_CONTAINS(err.msg, "plan.json");
            CHECK_CONTAINS(err.msg, "ignored by Colossal-AI");
            /* and a placement fraction that disagrees with the plan's offload fraction */
            ap_json_free(ap_json_detach(g, "shard_param_frac"));
            ap_json_add_number(g, "shard_param_frac", 1.0);
            ap_json_free(ap_json_detach(g, "offload_optim_frac"));
            ap_json_add_number(g, "offload_optim_frac", 0.5);
            CHECK(ap_planfile_from_json(j, "plan.json", &m2, &c2, &p2, NULL, &err) == AP_ERR_INPUT);
            CHECK_CONTAINS(err.msg, "same GeminiPlugin arguments");
        }
        ap_json_free(j);
    }
}

/* The rates come from the cost model's kernel tables: a pinned copy moves at PCIe x pcie_eff
 * (one GPU, no switch sharing), so halving pcie_eff doubles the busy time of the same bytes;
 * a collective costs what ap_estimate_coll_s says, so a slower peer link slows the ZeRO group. */
static void test_kernel_rates(void) {
    ap_model m = load("examples/models/gpt2.json");
    ap_cluster c = one_gpu("rtx-3090", 128);
    ap_plan p = gemini_plan(AP_GEMINI_STATIC, 1.0, 1.0, 1, 1, 1024);
    p.dp = 1;
    ap_hetero_opts o;
    ap_hetero_opts_init(&o);
    o.headroom_bytes = 0;
    ap_err err;
    const ap_kernels *pub = ap_kernels_published(&c.gpu);
    CHECK(pub != NULL);
    if (!pub) return;
    ap_kernels slow = *pub;
    slow.pcie_eff = pub->pcie_eff / 2;
    ap_hetero *h1 = NULL, *h2 = NULL;
    CHECK(ap_hetero_run(&m, &c, &p, &o, &h1, &err) == AP_OK);
    o.kernels = &slow;
    CHECK(ap_hetero_run(&m, &c, &p, &o, &h2, &err) == AP_OK);
    if (h1 && h2) {
        const ap_hetero_summary *a = ap_hetero_summary_of(h1), *b = ap_hetero_summary_of(h2);
        CHECK(a->h2d_bytes > 0);
        CHECK_NEAR(a->h2d_s, a->h2d_bytes / (c.pcie_bytes_per_s * pub->pcie_eff), 1e-9);
        CHECK_NEAR(b->h2d_bytes, a->h2d_bytes, 1e-12);
        CHECK_NEAR(b->h2d_s, 2 * a->h2d_s, 1e-9);
        CHECK_NEAR(b->d2h_s, 2 * a->d2h_s, 1e-9);
        CHECK(b->step_s > a->step_s);
    }
    ap_hetero_free(h1);
    ap_hetero_free(h2);
    /* eight GPUs in a ZeRO group: the exposed collectives follow the tables' link efficiency */
    ap_cluster c8;
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &c8);
    ap_plan q = gemini_plan(AP_GEMINI_STATIC, 0.0, 0.0, 1, 1, 1024);
    q.dp = 8;
    q.gbs = 8;
    ap_kernels k8 = *ap_kernels_published(&c8.gpu), k8s = k8;
    k8s.coll_eff[AP_LEVEL_NVLINK] = k8.coll_eff[AP_LEVEL_NVLINK] / 4;
    o.kernels = &k8;
    h1 = h2 = NULL;
    CHECK(ap_hetero_run(&m, &c8, &q, &o, &h1, &err) == AP_OK);
    o.kernels = &k8s;
    CHECK(ap_hetero_run(&m, &c8, &q, &o, &h2, &err) == AP_OK);
    if (h1 && h2) {
        const ap_hetero_summary *a = ap_hetero_summary_of(h1), *b = ap_hetero_summary_of(h2);
        CHECK_NEAR(b->gather_bytes, a->gather_bytes, 1e-12);
        CHECK(a->gather_bytes > 0);
        CHECK(b->collective_exposed_s > a->collective_exposed_s);
    }
    ap_hetero_free(h1);
    ap_hetero_free(h2);
}

/* NVMe swap buffers sized to the largest partition: GPT-3 13B's embedding is 50257 x 5120 =
 * 257,315,840 elements, past DeepSpeed's default buffer_size of 1e8 on one GPU (it would
 * assert); on four GPUs its partition, ceil(257315840 / 4) = 64,328,960, fits the default. */
static void test_param_buffers(void) {
    ap_err err;
    ap_family f;
    CHECK(ap_family_get("gpt", &f, &err) == AP_OK);
    ap_family_rung r = {6, 40, 0};
    ap_model m;
    CHECK(ap_family_model(&f, &r, &m, &err) == AP_OK);
    ap_plan p = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_NVME, 1);
    p.offload_optimizer = p.offload_params = 1;
    p.dp = 1;
    CHECK(ap_hetero_size_param_buffers(&m, &p, &err) == AP_OK);
    CHECK_INT(p.hetero.ds_param_buffer_size, 257315840);
    p.hetero.ds_param_buffer_size = 100000000;
    p.dp = 4;
    CHECK(ap_hetero_size_param_buffers(&m, &p, &err) == AP_OK);
    CHECK_INT(p.hetero.ds_param_buffer_size, 100000000);
    /* parameters on the CPU use no swap buffers: left alone */
    p = ds_plan(3, AP_OFFLOAD_DEV_NVME, AP_OFFLOAD_DEV_CPU, 1);
    p.dp = 1;
    CHECK(ap_hetero_size_param_buffers(&m, &p, &err) == AP_OK);
    CHECK_INT(p.hetero.ds_param_buffer_size, 100000000);
    /* fit evaluates ZeRO-Infinity on one V100 with the buffers a user would set */
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_cluster_from_gpu(ap_gpu_find("v100-sxm2-32g"), 1, &o.cluster);
    o.cluster.cpu_mem_bytes = 1536 * GIB;
    o.cluster.nvme_bytes = 30.72e12;
    o.cluster.nvme_read_bytes_per_s = o.cluster.nvme_write_bytes_per_s = 6e9;
    o.family = &f;
    int s;
    CHECK(ap_fit_strategy_parse("zero-infinity-nvme", &s, &err) == AP_OK);
    ap_fit_verdict v;
    CHECK(ap_fit_eval(&o, s, &m, &v, &err) == AP_OK);
    CHECK(strstr(v.detail, "buffer_size") == NULL);
    CHECK_INT(v.plan.hetero.ds_param_buffer_size, 257315840);
    CHECK(v.step_s > 0);
}

/* Placement pl of the template tests: Gemini auto, static with the optimizer offloaded, and
 * static half offloaded and half sharded. */
static ap_plan placement_plan(int pl, int64_t mbs) {
    return pl == 0 ? gemini_plan(AP_GEMINI_AUTO, 0, 0, mbs, 4, 1024)
                   : gemini_plan(AP_GEMINI_STATIC, pl == 1 ? 1.0 : 0.5, pl == 1 ? 0.0 : 0.5, mbs,
                                 4, 1024);
}

/* The cache's operator templates change nothing: estimates through one cache, over placements
 * and micro-batches of two models in turn (more shapes than the cache keeps, each seen twice),
 * equal those without it, bit for bit; a model of another depth finds none of the first's. */
static void test_template_cache(void) {
    ap_model ms[2] = {load("examples/models/gpt2.json"), load("examples/models/gpt2.json")};
    ms[1].layers = 6;
    ap_cluster c = one_gpu("a100-sxm4-80g", 256);
    ap_hetero_cache cache;
    memset(&cache, 0, sizeof cache);
    ap_estimate_opts eo;
    ap_estimate_opts_init(&eo);
    static ap_estimate a, b;
    int n = 0, same = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int mi = 0; mi < 2; mi++)
            for (int64_t mbs = 1; mbs <= 20; mbs++)
                for (int pl = 0; pl < 3; pl++) {
                    ap_plan p = placement_plan(pl, mbs);
                    ap_err e1, e2;
                    ap_status s1 = ap_hetero_estimate(&ms[mi], &c, &p, &eo, &cache, &a, &e1);
                    ap_status s2 = ap_hetero_estimate(&ms[mi], &c, &p, &eo, NULL, &b, &e2);
                    CHECK_INT(s1, s2);
                    if (s1 != AP_OK) continue;
                    n++;
                    /* the estimate names the attention kernel it priced, not "auto" */
                    CHECK(a.plan.attn_impl != AP_ATTN_AUTO);
                    same += a.time.step_s == b.time.step_s &&
                            a.device_peak_bytes == b.device_peak_bytes &&
                            a.host_bytes_per_node == b.host_bytes_per_node &&
                            a.tp.mfu == b.tp.mfu && a.fits == b.fits &&
                            a.time.offload_s == b.time.offload_s;
                }
    CHECK(n >= 150); /* 160 of the 240 run; the others fail alike with and without it */
    CHECK_INT(same, n);
    int kept = 0;
    for (int i = 0; i < AP_HETERO_TEMPLATES; i++) kept += cache.tpl[i] != NULL;
    CHECK_INT(kept, AP_HETERO_TEMPLATES);
    ap_hetero_cache_free(&cache);
    CHECK(cache.tpl[0] == NULL);
    ap_hetero_cache_free(NULL);
}

/* A store of templates shared by caches on two threads at once (the search's workers, fit's
 * strategies): each thread's estimates over placements and micro-batches, in its own order,
 * equal those without any cache, bit for bit. */
typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    ap_hetero_store *store;
    int reverse;
    double step[2][12][3];
    int ok[2][12][3];
} store_job;

static void *store_worker(void *arg) {
    store_job *j = arg;
    ap_hetero_cache cache;
    memset(&cache, 0, sizeof cache);
    cache.shared = j->store;
    ap_estimate_opts eo;
    ap_estimate_opts_init(&eo);
    static _Thread_local ap_estimate e;
    for (int n = 0; n < 2 * 12 * 3; n++) {
        int k = j->reverse ? 2 * 12 * 3 - 1 - n : n;
        int mi = k / 36, mbs = 1 + k / 3 % 12, pl = k % 3;
        ap_plan p = placement_plan(pl, mbs);
        ap_err err;
        j->ok[mi][mbs - 1][pl] = ap_hetero_estimate(&j->m[mi], j->c, &p, &eo, &cache, &e, &err) ==
                                 AP_OK;
        j->step[mi][mbs - 1][pl] = j->ok[mi][mbs - 1][pl] ? e.time.step_s + e.device_peak_bytes : 0;
    }
    ap_hetero_cache_free(&cache);
    return NULL;
}

static void test_template_store(void) {
    ap_model ms[2] = {load("examples/models/gpt2.json"), load("examples/models/gpt2.json")};
    ms[1].layers = 6;
    ap_cluster c = one_gpu("a100-sxm4-80g", 256);
    ap_hetero_store *store = ap_hetero_store_new();
    CHECK(store != NULL);
    static store_job jobs[2];
    pthread_t tid;
    for (int t = 0; t < 2; t++) jobs[t] = (store_job){ms, &c, store, t, {{{0}}}, {{{0}}}};
    int started = pthread_create(&tid, NULL, store_worker, &jobs[1]) == 0;
    store_worker(&jobs[0]);
    if (started) pthread_join(tid, NULL);
    else store_worker(&jobs[1]);
    ap_hetero_store_free(store);
    ap_hetero_store_free(NULL);
    ap_estimate_opts eo;
    ap_estimate_opts_init(&eo);
    static ap_estimate e;
    int n = 0;
    for (int mi = 0; mi < 2; mi++)
        for (int mbs = 1; mbs <= 12; mbs++)
            for (int pl = 0; pl < 3; pl++) {
                ap_plan p = placement_plan(pl, mbs);
                ap_err err;
                int ok = ap_hetero_estimate(&ms[mi], &c, &p, &eo, NULL, &e, &err) == AP_OK;
                double v = ok ? e.time.step_s + e.device_peak_bytes : 0;
                for (int t = 0; t < 2; t++) {
                    CHECK_INT(jobs[t].ok[mi][mbs - 1][pl], ok);
                    CHECK(jobs[t].step[mi][mbs - 1][pl] == v);
                }
                n += ok;
            }
    CHECK(n >= 40);
}

/* fit's "best" searches each trainer in turn under the best step so far (times 1 + the tie
 * margin): its verdict is the best of the trainers' unbounded searches, plan and step. */
static void test_fit_best_bound(void) {
    ap_err err;
    ap_family f;
    CHECK(ap_family_get("llama", &f, &err) == AP_OK);
    ap_family_rung *rungs;
    int n;
    CHECK(ap_family_ladder(&f, &rungs, &n, &err) == AP_OK);
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &o.cluster);
    o.family = &f;
    int checked = 0;
    for (int k = 0; k < n; k += n / 6) {
        ap_model m;
        CHECK(ap_family_model(&f, &rungs[k], &m, &err) == AP_OK);
        ap_fit_verdict v;
        CHECK(ap_fit_eval(&o, AP_FIT_BEST, &m, &v, &err) == AP_OK);
        /* the trainers unbounded, as eval_best asks them otherwise */
        static ap_estimate best;
        int have = 0;
        for (int t = 0; t < AP_TRAINER_COUNT; t++) {
            if (t == AP_TRAINER_RUNTIME) continue;
            ap_search_opts so;
            ap_search_opts_init(&so);
            so.fixed.trainer = (ap_trainer_id)t;
            so.fixed.seq = v.plan.seq;
            so.fixed.dtype = v.plan.dtype;
            so.fix_dtype = 1;
            so.gbs = v.plan.gbs;
            so.top_k = 1;
            so.est.headroom_bytes = o.headroom_bytes;
            ap_model mm = m;
            mm.seq_len = v.plan.seq;
            ap_search_result r;
            ap_status st = ap_search(&mm, &o.cluster, &so, &r, &err);
            if (st == AP_OK && r.ntop > 0 && (!have || ap_estimate_better(&r.top[0], &best))) {
                best = r.top[0];
                have = 1;
            }
            if (st == AP_OK) ap_search_result_free(&r);
        }
        CHECK_INT(v.fits, have);
        if (!have || !v.fits) continue;
        char a[160], b[160];
        CHECK(strcmp(ap_plan_label(&v.plan, a, sizeof a),
                     ap_plan_label(&best.plan, b, sizeof b)) == 0);
        CHECK(v.step_s == best.time.step_s);
        checked++;
    }
    CHECK(checked >= 3);
    free(rungs);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_chunk_search();
    test_params();
    test_periods();
    test_gemini_hand();
    test_gemini_static_fraction_sum();
    test_gemini_auto_invariants();
    test_template_cache();
    test_zero_hand();
    test_kernel_rates();
    test_param_buffers();
    test_validation();
    test_families();
    test_fit_boundary();
    test_fit_scan();
    test_fit_best_bound();
    test_planfile();
    test_claims();
    test_stop_unfit();
    test_stop_early();
    test_step_cutoff();
    test_many_micro_batches();
    test_template_store();
    test_emit();
    test_cli();
    return tl_finish();
}
