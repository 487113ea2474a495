/*
 * test_runtime.c - the plan executor (runtime/, `autoplan run`, docs/runtime.md):
 *
 *   in-process (one rank, no MPI)
 *     - the shared schedule (ap_sim_schedule): every pass once, backward after forward, Megatron's
 *       warm-up counts (Narayanan et al. 2021, Sec. 2.2) and in-flight bounds;
 *     - refusals: every feature the runtime does not run is one line before anything starts;
 *     - the canonical parameter list counts exactly what costmodel/model.c counts;
 *     - memory: the tracker's peak and categories equal the simulator's runtime layout
 *       (sim/simrt.c) exactly, allocation by allocation, for recompute / ZeRO / offload variants;
 *     - bitwise equality of loss and parameters across recompute none/selective/full and
 *       offload 0/0.5/1;
 *     - fault injection: every allocation of setup and of a step failing in turn gives
 *       AP_ERR_NOMEM naming the tensor, never a crash or a leak;
 *   through MPI
 *     - rt_layercheck on 2 and 4 ranks: sharded embedding, layer, head and loss against their
 *       unsharded twins (forward, input gradients, every parameter gradient);
 *     - `autoplan run` on a pairwise matrix of plans over 1, 2, 4, 8 ranks, both model families
 *       (tiny-llama and rt-gpt, a GPT-2-style model as small: tests/data/rt-gpt.json): loss within
 *       1e-5 relative and parameters within 1e-4 of the single-rank run after 5 steps; every
 *       rank's allocated peak and categories within 2% of the prediction; bitwise equality
 *       across ZeRO 0-3, recompute and offload at the same degrees (the first plans of the
 *       matrix); the full matrix is bench/runtime_bench's;
 *     - the allocation sequence of every rank against the simulator's, event by event;
 *     - bad input, a failing rank, the timeout (no process left), a launch inside mpirun, the
 *       database row, the trace.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#ifdef AP_NO_RUNTIME
int main(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "test_runtime: the runtime was not built (OpenBLAS or MPI missing); skipped\n");
    return 77;
}
#else
#include "autoplan/hetero.h"
#include "autoplan/json.h"
#include "autoplan/planio.h"
#include "autoplan/runtime.h"
#include "autoplan/sim.h"

static const char *llama_path, *gpt_path;

/* Processes started under AddressSanitizer (the ASan build): LeakSanitizer needs full stacks
 * (fast_unwind_on_malloc=0) to match its suppressions of Open MPI's own unfreed allocations
 * (tests/data/lsan-openmpi.supp), which makes an 8-rank launch ~5x slower. So the ranks of the
 * plan matrix run with leak detection off and the runs marked leak-checked (the layer twins,
 * the event comparison, the failure paths, a launch inside mpirun) with it on; the runtime's
 * own code is leak-checked in-process above without MPI. Without ASan these options are unused. */
static char asan_fast[1024], asan_leaks[1024];
static void leak_checked(int on) { setenv("ASAN_OPTIONS", on ? asan_leaks : asan_fast, 1); }

/* ---- helpers ------------------------------------------------------------------------------- */

static ap_model load(const char *path) {
    ap_model m;
    ap_err err = {{0}};
    if (ap_model_load(path, &m, &err) != AP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return m;
}

static ap_rt_job small_job(const ap_model *m, int64_t seq, int64_t mbs, int64_t gbs) {
    ap_rt_job j;
    ap_rt_job_init(&j);
    j.model = *m;
    j.plan.seq = seq;
    j.plan.mbs = mbs;
    j.plan.gbs = gbs;
    j.plan.grad_accum = gbs / mbs;
    return j;
}

/* Run a shell command, capturing stdout and stderr; returns the exit code (-1 on a signal). */
static int run_cmd(const char *cmd, char **out, char **err) {
    char to[] = "/tmp/rtout.XXXXXX", te[] = "/tmp/rterr.XXXXXX";
    int fo = mkstemp(to), fe = mkstemp(te);
    if (fo < 0 || fe < 0) return -2;
    close(fo);
    close(fe);
    size_t n = strlen(cmd) + 128;
    char *full = malloc(n);
    snprintf(full, n, "%s </dev/null >%s 2>%s", cmd, to, te);
    int st = system(full);
    free(full);
    char *o = tl_read(to), *e = tl_read(te);
    unlink(to);
    unlink(te);
    if (out) *out = o;
    else free(o);
    if (err) *err = e;
    else free(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *mpirun_cmd(void) {
    static char buf[512];
    snprintf(buf, sizeof buf, "'%s' --oversubscribe --bind-to none%s", AP_RT_MPIEXEC,
             geteuid() == 0 ? " --allow-run-as-root" : "");
    return buf;
}

/* `autoplan run ... --json --no-db`: the parsed output (caller frees), NULL when it failed. */
static ap_json *run_json(const char *args, int *rc_out, char **err_out) {
    char *cmd = malloc(strlen(args) + 64), *out = NULL, *err = NULL;
    snprintf(cmd, strlen(args) + 64, "run %s --json --no-db", args);
    int rc = tl_run(cmd, &out, &err);
    free(cmd);
    if (rc_out) *rc_out = rc;
    ap_json *j = NULL;
    if (rc == 0 && out) {
        ap_err e = {{0}};
        j = ap_json_parse(out, strlen(out), "autoplan run --json", &e);
    }
    if (rc != 0) fprintf(stderr, "  autoplan run %s: exit %d: %s", args, rc, err ? err : "");
    if (err_out) *err_out = err;
    else free(err);
    free(out);
    return j;
}

static double num(const ap_json *o, const char *k) { return ap_json_number(ap_json_get(o, k)); }

/* Canonical parameters written by --save: a JSON header line, then float32 values. */
static float *read_params(const char *path, int64_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
    }
    float *v = malloc((size_t)n * sizeof *v);
    if (v && fread(v, sizeof *v, (size_t)n, f) != (size_t)n) {
        free(v);
        v = NULL;
    }
    if (v && fgetc(f) != EOF) { /* exactly n values */
        free(v);
        v = NULL;
    }
    fclose(f);
    return v;
}

/* ---- schedule ------------------------------------------------------------------------------ */

static void test_schedule(void) {
    for (int pp = 1; pp <= 4; pp++)
        for (int vp = 1; vp <= 3; vp++)
            for (int64_t m = 1; m <= 8; m++) {
                if (vp > 1 && (pp == 1 || m % pp)) continue;
                for (int stage = 0; stage < pp; stage++) {
                    ap_sim_pass it[2 * 8 * 3];
                    int n = ap_sim_schedule(pp, vp, m, stage, it);
                    CHECK_INT(n, 2 * m * vp);
                    int seen_f[8][3] = {{0}}, seen_b[8][3] = {{0}}, ok = 1, inflight = 0,
                        maxin = 0, warm = 0;
                    for (int i = 0; i < n; i++) {
                        int c = it[i].chunk, b = it[i].mb;
                        if (c < 0 || c >= vp || b < 0 || b >= m) {
                            ok = 0;
                            break;
                        }
                        if (it[i].fwd) {
                            ok &= !seen_f[b][c]++;
                            inflight++;
                        } else {
                            ok &= seen_f[b][c] && !seen_b[b][c]++;
                            inflight--;
                        }
                        if (inflight > maxin) maxin = inflight;
                        if (i == warm && it[i].fwd) warm++;
                    }
                    CHECK(ok);
                    /* Megatron's warm-up: pp - stage - 1 forwards (1F1B), (pp - stage - 1) * 2 +
                       (vp - 1) * pp chunk-forwards interleaved, all when m == pp; then the
                       steady phase starts with a forward */
                    int64_t want = vp == 1 ? pp - stage - 1
                                   : m == pp ? m * vp
                                             : (int64_t)(pp - stage - 1) * 2 + (vp - 1) * pp;
                    if (want > m * vp) want = m * vp;
                    CHECK_INT(warm, want < m * vp ? want + 1 : want);
                    /* 1F1B keeps at most min(pp - stage, m) micro-batches in flight */
                    if (vp == 1) CHECK_INT(maxin, pp - stage < m ? pp - stage : m);
                }
            }
}

/* ---- refusals -------------------------------------------------------------------------------- */

static void refused(const ap_model *m, const ap_plan *p, const char *needle) {
    ap_err err = {{0}};
    CHECK_INT(ap_rt_check(m, p, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, needle);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_refusals(void) {
    ap_model m = load(llama_path);
    ap_rt_job j = small_job(&m, 32, 1, 2);
    ap_err err = {{0}};
    CHECK_INT(ap_rt_check(&m, &j.plan, &err), AP_OK);
    ap_plan p = j.plan;
    p.cp = 2;
    refused(&m, &p, "context parallelism");
    p = j.plan;
    p.ep = 2;
    refused(&m, &p, "expert parallelism");
    p = j.plan;
    p.tp = 3;
    refused(&m, &p, "tp 3 must divide the heads");
    p = j.plan;
    p.tp = 8; /* 4 kv heads */
    refused(&m, &p, "kv heads");
    p = j.plan;
    p.offload_params = 1;
    refused(&m, &p, "parameter offload");
    p = j.plan;
    p.dtype = AP_DTYPE_BF16;
    refused(&m, &p, "fp32");
    p = j.plan;
    p.overlap_grad = 1;
    refused(&m, &p, "overlap");
    p = j.plan;
    p.trainer = AP_TRAINER_MEGATRON;
    refused(&m, &p, "runtime trainer");
    p = j.plan;
    p.tp = 2;
    p.sp = 1;
    p.seq = 31; /* 31 tokens do not split over 2 ranks */
    refused(&m, &p, "sequence parallelism");
    p = j.plan;
    p.pp = 2;
    p.vp = 2;
    p.grad_accum = 1; /* interleaving needs micro-batches % pp == 0 */
    p.gbs = 1;
    refused(&m, &p, "multiple of pp");
    p = j.plan;
    p.hetero.placement = AP_GEMINI_STATIC;
    refused(&m, &p, "Gemini placements");
    p = j.plan;
    p.hetero.ds_optimizer = AP_OFFLOAD_DEV_CPU;
    refused(&m, &p, "DeepSpeed offload devices");
    ap_model moe = load(tl_path("examples/models/mixtral-8x7b.json"));
    refused(&moe, &j.plan, "MoE");
    ap_model gpt = load(gpt_path);
    p = j.plan;
    p.seq = 4096; /* 64 learned positions */
    p.gbs = p.mbs = 1;
    p.grad_accum = 1;
    refused(&gpt, &p, "learned positions");
}

/* The runtime's canonical tensors count what costmodel/model.c counts, independently. */
static void test_param_count(void) {
    const char *paths[] = {"examples/models/tiny-llama.json", "examples/models/tiny-gpt.json",
                           "tests/data/rt-gpt.json",          "examples/models/llama-2-7b.json",
                           "examples/models/gpt2.json",
                           "examples/models/qwen2-7b.json"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        ap_model m = load(tl_path(paths[i]));
        CHECK_INT(ap_rt_param_count(&m), ap_model_total_params(&m));
    }
}

/* ---- in-process: memory against the simulator ----------------------------------------------- */

static int train_inprocess(ap_rt_job *j, ap_rt_report *r) {
    ap_err err = {{0}};
    ap_rt_session *s = NULL;
    if (ap_rt_session_new(j, ap_rt_comm_self(), &s, &err) != AP_OK ||
        ap_rt_session_train(s, r, &err) != AP_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        ap_rt_session_free(s);
        return -1;
    }
    ap_rt_session_free(s);
    return 0;
}

/* The simulated rank's events (tensor allocations and frees) against the runtime's log, whose
 * host-pool events the simulator's device categories do not hold. */
static int events_match(const ap_rt_rank_report *k, const ap_sim_rank *r) {
    int nk = 0;
    for (int i = 0; i < k->nevents; i++) nk += k->events[i].cat != AP_RT_NCAT;
    if (nk != r->nevents) {
        fprintf(stderr, "  %d runtime events, %d simulated\n", nk, r->nevents);
        return 0;
    }
    for (int i = 0, q = 0; i < r->nevents; i++, q++) {
        while (k->events[q].cat == AP_RT_NCAT) q++;
        const ap_sim_tensor *t = &r->tensors[r->events[i].tensor];
        const ap_rt_event *e = &k->events[q];
        int cat_ok = e->cat == AP_RT_CAT_TEMPS || e->cat == AP_RT_CAT_COMM
                         ? t->cat == AP_SIM_CAT_OTHER
                         : e->cat == t->cat; /* the first four categories coincide */
        if (e->bytes != t->bytes || e->is_free != r->events[i].is_free || !cat_ok ||
            (!e->is_free && e->kind != t->kind)) {
            fprintf(stderr, "  event %d: runtime %s %s %lld bytes, simulator %s %s %lld bytes\n",
                    i, e->is_free ? "free" : "alloc", ap_sim_kind_name(e->kind),
                    (long long)e->bytes, r->events[i].is_free ? "free" : "alloc",
                    ap_sim_kind_name(t->kind), (long long)t->bytes);
            return 0;
        }
    }
    return 1;
}

static ap_sim *simulate(const ap_rt_job *j) {
    ap_sim_opts so;
    ap_sim_opts_init(&so);
    so.allocator = AP_ALLOC_ARENA;
    so.device_overhead_bytes = 0;
    ap_sim *s = NULL;
    ap_err err = {{0}};
    if (ap_sim_run(&j->model, NULL, &j->plan, &so, &s, &err) != AP_OK)
        fprintf(stderr, "  %s\n", err.msg);
    return s;
}

static void test_memory_inprocess(void) {
    const char *models[] = {llama_path, gpt_path};
    int cases = 0;
    for (int mi = 0; mi < 2; mi++) {
        ap_model m = load(models[mi]);
        for (int rc = 0; rc < 4; rc++)
            for (int z = 0; z <= 3; z += 3)
                for (int off = 0; off <= 1; off++) {
                    ap_rt_job j = small_job(&m, 32, 2, 4);
                    j.steps = 2;
                    j.plan.recompute = rc == 3 ? AP_RECOMPUTE_FULL : (ap_recompute)rc;
                    if (rc == 3) j.plan.recompute_layers = 1;
                    j.plan.zero = z;
                    j.plan.offload_optimizer = off ? 0.5 : 0;
                    j.record_events = 1;
                    ap_rt_report r;
                    ap_rt_prediction pr;
                    ap_err err = {{0}};
                    if (train_inprocess(&j, &r) != 0) {
                        CHECK(0);
                        continue;
                    }
                    CHECK_INT(ap_rt_predict(&j.model, &j.plan, NULL, &pr, &err), AP_OK);
                    const ap_rt_rank_report *k = &r.ranks[0];
                    CHECK_INT(k->peak_bytes, pr.stages[0].peak_bytes);
                    for (int c = 0; c < AP_RT_NCAT; c++) {
                        CHECK_INT(k->peak_cat_bytes[c], pr.stages[0].peak_cat_bytes[c]);
                        CHECK_INT(k->cat_peak_bytes[c], pr.stages[0].cat_peak_bytes[c]);
                    }
                    CHECK_INT(k->host_peak_bytes, pr.stages[0].host_peak_bytes);
                    /* the offloaded half's gradient and parameter cross to the host, and the
                       parameter back: 3 x 4 bytes per offloaded element */
                    if (off) CHECK(k->d2h_bytes > 0 && k->d2h_bytes == 2 * k->h2d_bytes);
                    ap_sim *s = simulate(&j);
                    CHECK(s != NULL);
                    if (s) CHECK(events_match(k, ap_sim_rank_at(s, 0)));
                    ap_sim_free(s);
                    ap_rt_report_free(&r);
                    cases++;
                }
    }
    CHECK_INT(cases, 32);
}

/* Loss and parameters bitwise equal across recompute and offload (one rank). */
static void test_bitwise_inprocess(void) {
    ap_model m = load(llama_path);
    int64_t n = ap_rt_param_count(&m);
    double *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
    double ref_loss[3];
    for (int v = 0; v < 6; v++) {
        ap_rt_job j = small_job(&m, 32, 2, 4);
        j.steps = 3;
        j.plan.recompute = (ap_recompute)(v % 3);
        j.plan.offload_optimizer = v < 3 ? 0 : v == 3 ? 0.5 : 1;
        ap_err err = {{0}};
        ap_rt_session *s = NULL;
        CHECK_INT(ap_rt_session_new(&j, ap_rt_comm_self(), &s, &err), AP_OK);
        if (!s) continue;
        double loss[3];
        for (int i = 0; i < 3; i++) CHECK_INT(ap_rt_session_step(s, i, &loss[i], &err), AP_OK);
        CHECK_INT(ap_rt_session_gather(s, 0, v == 0 ? ref : got, &err), AP_OK);
        if (v == 0) memcpy(ref_loss, loss, sizeof loss);
        else {
            CHECK(memcmp(loss, ref_loss, sizeof loss) == 0);
            CHECK(memcmp(got, ref, (size_t)n * sizeof *ref) == 0);
        }
        ap_rt_session_free(s);
    }
    /* and the loss goes down on the learnable synthetic data */
    CHECK(ref_loss[2] < ref_loss[0]);
    free(ref);
    free(got);
}

/* Every allocation of the setup and of one step fails in turn: a clean AP_ERR_NOMEM. */
static void test_fault_injection(void) {
    ap_model m = load(llama_path);
    ap_rt_job j = small_job(&m, 16, 1, 2);
    j.steps = 1;
    j.plan.zero = 3;
    j.plan.recompute = AP_RECOMPUTE_FULL;
    j.plan.offload_optimizer = 0.5;
    /* count the allocations of a clean run */
    j.record_events = 1;
    ap_rt_report r;
    CHECK(train_inprocess(&j, &r) == 0);
    int64_t allocs = 0;
    for (int i = 0; i < r.ranks[0].nevents; i++) allocs += !r.ranks[0].events[i].is_free;
    ap_rt_report_free(&r);
    j.record_events = 0;
    CHECK(allocs > 50);
    int failed = 0;
    for (int64_t n = 1; n <= allocs + 40; n++) {
        j.fail_rank = 0;
        j.fail_alloc = n;
        ap_err err = {{0}};
        ap_rt_session *s = NULL;
        ap_status st = ap_rt_session_new(&j, ap_rt_comm_self(), &s, &err);
        if (st == AP_OK) {
            st = ap_rt_session_train(s, &r, &err);
            if (st == AP_OK) ap_rt_report_free(&r);
        }
        ap_rt_session_free(s);
        if (st != AP_OK) {
            failed++;
            if (st != AP_ERR_NOMEM || !strstr(err.msg, "rank 0: out of memory allocating")) {
                fprintf(stderr, "  allocation %lld: status %d: %s\n", (long long)n, st, err.msg);
                CHECK(0);
            }
        }
    }
    /* every tracked allocation of the setup and the step (host pool included) failed once */
    CHECK_INT(failed, allocs);
}

/* ---- MPI: the layer twins -------------------------------------------------------------------- */

static void test_layer_twins(void) {
    for (int np = 2; np <= 4; np += 2) {
        char cmd[1024], *out = NULL, *err = NULL;
        snprintf(cmd, sizeof cmd, "%s -np %d '%s'", mpirun_cmd(), np, AP_RT_LAYERCHECK_BIN);
        int rc = run_cmd(cmd, &out, &err);
        CHECK_INT(rc, 0);
        if (rc != 0) fprintf(stderr, "%s%s", out ? out : "", err ? err : "");
        int lines = 0;
        for (const char *p = out; p && (p = strstr(p, "layercheck: tp")); p++) lines++;
        CHECK_INT(lines, 8); /* 2 families x sp on/off x recompute on/off */
        CHECK(out && !strstr(out, "FAIL"));
        free(out);
        free(err);
    }
}

/* ---- MPI: the pairwise matrix ------------------------------------------------------------------ */

typedef struct plan_case {
    int gpt;
    const char *flags; /* degrees and options, all runs: --seq 16 --gbs 8 --steps 5 */
} plan_case;

/* A pairwise cover (every pair of levels of ranks {1,2,4,8}, model, ZeRO 0-3, recompute
 * none/selective/full/full-1-layer, sp, vp, offload {0,0.5}, mbs {1,2}, shape
 * single/tp/pp/dp/mixed that some valid plan has appears in some plan: 301 pairs, greedy cover,
 * 22 plans) plus uneven stages. The first BITWISE plans share their degrees (tp 2, pp 2, dp 2,
 * sp) and differ in ZeRO stage, recompute and offload only: bitwise the same losses and
 * parameters. The full matrix is bench/runtime_bench's. */
#define BITWISE 4
static const plan_case matrix[] = {
    {0, "--gpus 8 --tp 2 --pp 2 --sp --zero 0 --mbs 1"},
    {0, "--gpus 8 --tp 2 --pp 2 --sp --zero 1 --recompute full --mbs 1"},
    {0, "--gpus 8 --tp 2 --pp 2 --sp --zero 2 --recompute selective --offload-optimizer 0.5 "
        "--mbs 1"},
    {0, "--gpus 8 --tp 2 --pp 2 --sp --zero 3 --recompute full --recompute-layers 1 "
        "--offload-optimizer 0.5 --mbs 1"},
    {1, "--gpus 2 --pp 2 --vp 2 --zero 1 --offload-optimizer 0.5 --mbs 2"},
    {1, "--gpus 1 --zero 2 --recompute full --recompute-layers 1 --mbs 2"},
    {0, "--gpus 4 --tp 2 --pp 2 --vp 2 --zero 3 --recompute selective --mbs 2"},
    {1, "--gpus 4 --zero 0 --recompute full --offload-optimizer 0.5 --mbs 1"},
    {1, "--gpus 2 --tp 2 --sp --zero 0 --recompute selective --mbs 2"},
    {0, "--gpus 2 --pp 2 --vp 2 --zero 2 --recompute full --mbs 1"},
    {0, "--gpus 1 --zero 3 --offload-optimizer 0.5 --mbs 1"},
    {1, "--gpus 8 --tp 8 --zero 3 --recompute full --offload-optimizer 0.5 --mbs 2"},
    {0, "--gpus 4 --tp 4 --sp --zero 1 --recompute full --recompute-layers 1 "
        "--offload-optimizer 0.5 --mbs 1"},
    {0, "--gpus 2 --zero 3 --recompute full --recompute-layers 1 --mbs 2"},
    {1, "--gpus 8 --tp 2 --pp 2 --vp 2 --sp --zero 0 --recompute full --recompute-layers 1 "
        "--offload-optimizer 0.5 --mbs 1"},
    {1, "--gpus 1 --zero 1 --recompute selective --offload-optimizer 0.5 --mbs 1"},
    {0, "--gpus 4 --tp 4 --sp --zero 2 --offload-optimizer 0.5 --mbs 2"},
    {1, "--gpus 1 --zero 0 --recompute full --mbs 1"},
    {1, "--gpus 4 --pp 4 --zero 0 --recompute selective --mbs 1"},
    {0, "--gpus 8 --zero 1 --offload-optimizer 0.5 --mbs 1"},
    {1, "--gpus 2 --pp 2 --vp 2 --zero 3 --recompute full --recompute-layers 1 "
        "--offload-optimizer 0.5 --mbs 1"},
    {0, "--gpus 2 --zero 2 --recompute selective --mbs 1"},
    /* beyond the cover: uneven stages (a stage with no layer), all optimizer states offloaded */
    {0, "--gpus 4 --pp 4 --stage-layers 0,1,2,1 --zero 1 --mbs 1"},
    {1, "--gpus 2 --pp 2 --stage-layers 3,1 --offload-optimizer 1 --mbs 2"},
};

#define COMMON "--seq 16 --gbs 8 --steps 5 --no-bench"

/* One run: exit 0; memory of every rank within 2% of the prediction, per category; returns the
 * losses (5) and the parameter file. */
static int matrix_run(const char *model, const char *flags, const char *save, double loss[5],
                      double *worst_mem) {
    char args[1024];
    snprintf(args, sizeof args, "'%s' %s %s --save '%s'", model, flags, COMMON, save);
    int rc;
    ap_json *j = run_json(args, &rc, NULL);
    CHECK_INT(rc, 0);
    if (!j) return -1;
    const ap_json *l = ap_json_get(j, "loss");
    CHECK_INT(ap_json_size(l), 5);
    for (int i = 0; i < 5 && i < ap_json_size(l); i++) loss[i] = ap_json_number(ap_json_at(l, i));
    const ap_json *ranks = ap_json_get(j, "ranks");
    for (int i = 0; i < ap_json_size(ranks); i++) {
        const ap_json *r = ap_json_at(ranks, i);
        const ap_json *me = ap_json_get(r, "measured"), *pe = ap_json_get(r, "predicted");
        const char *keys[] = {"peak_bytes",       "params_bytes",      "grads_bytes",
                              "optimizer_bytes",  "activations_bytes", "temporaries_bytes",
                              "comm_bytes",       "host_peak_bytes"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            double a = num(me, keys[k]), b = num(pe, keys[k]);
            double e = b > 0 ? fabs(a - b) / b : (a == 0 ? 0 : 1);
            if (e > *worst_mem) *worst_mem = e;
            if (e > 0.02) {
                fprintf(stderr, "  %s rank %d: %s measured %.0f, predicted %.0f\n", flags, i,
                        keys[k], a, b);
                CHECK(0);
            }
        }
    }
    ap_json_free(j);
    return 0;
}

/* The parameter files of two runs, byte for byte. */
static int same_file(const char *pa, const char *pb) {
    FILE *a = fopen(pa, "rb"), *b = fopen(pb, "rb");
    int same = a && b;
    while (same) {
        int x = fgetc(a), y = fgetc(b);
        if (x != y) same = 0;
        if (x == EOF || y == EOF) break;
    }
    if (a) fclose(a);
    if (b) fclose(b);
    return same;
}

/* One plan against the single-rank run of its model: loss within 1e-5 relative, parameters
 * within 1e-4 after 5 steps. */
static void against_single_rank(const plan_case *pc, const double loss[5], const double ref[5],
                                const float *ref_par, const char *save, int64_t np,
                                double *worst_loss, double *worst_par) {
    for (int s = 0; s < 5; s++) {
        double e = fabs(loss[s] - ref[s]) / fabs(ref[s]);
        if (e > *worst_loss) *worst_loss = e;
        if (e > 1e-5) {
            fprintf(stderr, "  %s: step %d loss %.9g, single rank %.9g\n", pc->flags, s + 1,
                    loss[s], ref[s]);
            CHECK(0);
        }
    }
    float *par = read_params(save, np);
    CHECK(par != NULL);
    double pe = 0;
    for (int64_t k = 0; par && ref_par && k < np; k++)
        pe = fmax(pe, fabs((double)par[k] - (double)ref_par[k]));
    if (pe > *worst_par) *worst_par = pe;
    if (pe > 1e-4) {
        fprintf(stderr, "  %s: parameters differ by %.3g from the single rank\n", pc->flags, pe);
        CHECK(0);
    }
    free(par);
}

static void test_matrix(const char *dir) {
    const char *models[] = {llama_path, gpt_path};
    double ref_loss[2][5], bit_loss[5];
    float *ref_par[2] = {NULL, NULL};
    int64_t np[2];
    double worst_mem = 0, worst_loss = 0, worst_par = 0, t0 = ap_now_s();
    for (int mi = 0; mi < 2; mi++) {
        char save[600];
        snprintf(save, sizeof save, "%s/ref%d.bin", dir, mi);
        ap_model m = load(models[mi]);
        np[mi] = ap_rt_param_count(&m);
        CHECK(matrix_run(models[mi], "--gpus 1 --mbs 1", save, ref_loss[mi], &worst_mem) == 0);
        ref_par[mi] = read_params(save, np[mi]);
        CHECK(ref_par[mi] != NULL);
        CHECK(ref_loss[mi][4] < ref_loss[mi][0]);
    }
    char bit0[600];
    snprintf(bit0, sizeof bit0, "%s/run0.bin", dir);
    for (size_t i = 0; i < sizeof matrix / sizeof matrix[0]; i++) {
        const plan_case *pc = &matrix[i];
        char save[600];
        snprintf(save, sizeof save, "%s/run%zu.bin", dir, i);
        double loss[5] = {0};
        if (matrix_run(models[pc->gpt], pc->flags, save, loss, &worst_mem) != 0) continue;
        against_single_rank(pc, loss, ref_loss[pc->gpt], ref_par[pc->gpt], save, np[pc->gpt],
                            &worst_loss, &worst_par);
        /* ZeRO 0-3, recompute and offload at the same degrees: bitwise equal */
        if (i == 0) memcpy(bit_loss, loss, sizeof bit_loss);
        if (i > 0 && i < BITWISE) {
            CHECK(memcmp(loss, bit_loss, sizeof bit_loss) == 0);
            int same = same_file(save, bit0);
            CHECK(same);
            if (!same) fprintf(stderr, "  %s: parameters not bitwise equal to %s\n", pc->flags,
                               matrix[0].flags);
        }
    }
    fprintf(stderr, "  matrix: %zu plans in %.0f s; worst loss %.2g relative, parameters %.2g, "
            "memory %.2g\n", sizeof matrix / sizeof matrix[0], ap_now_s() - t0, worst_loss,
            worst_par, worst_mem);
    free(ref_par[0]);
    free(ref_par[1]);
}

/* Every rank's allocation sequence against the simulator's stage, event by event. */
static void test_events_mpi(void) {
    const char *flags = "--gpus 8 --tp 2 --pp 2 --vp 2 --sp --zero 3 --recompute full "
                        "--recompute-layers 1 --offload-optimizer 0.5 --mbs 1";
    char args[1024];
    snprintf(args, sizeof args, "'%s' %s --seq 16 --gbs 8 --steps 2 --no-bench --events",
             gpt_path, flags);
    int rc;
    ap_json *j = run_json(args, &rc, NULL);
    CHECK(j != NULL);
    if (!j) return;
    ap_rt_job job;
    ap_rt_job_init(&job);
    job.model = load(gpt_path);
    job.plan.tp = job.plan.pp = job.plan.vp = 2;
    job.plan.dp = 2;
    job.plan.sp = 1;
    job.plan.zero = 3;
    job.plan.recompute = AP_RECOMPUTE_FULL;
    job.plan.recompute_layers = 1;
    job.plan.offload_optimizer = 0.5;
    job.plan.seq = 16;
    job.plan.mbs = 1;
    job.plan.gbs = 8;
    job.plan.grad_accum = 4;
    ap_sim *s = simulate(&job);
    CHECK(s != NULL);
    const ap_json *ranks = ap_json_get(j, "ranks");
    CHECK_INT(ap_json_size(ranks), 8);
    for (int i = 0; s && i < ap_json_size(ranks); i++) {
        const ap_json *r = ap_json_at(ranks, i);
        const ap_sim_rank *sr = ap_sim_rank_at(s, (int)num(r, "stage"));
        const ap_json *ev = ap_json_get(r, "events");
        int bad = -1, q = 0, nev = ap_json_size(ev);
        for (int e = 0; e < sr->nevents && bad < 0; e++, q++) {
            /* the host pool's events: not device memory, not in the simulator */
            while (q < nev && !strcmp(ap_json_string(ap_json_at(ap_json_at(ev, q), 2)), "host"))
                q++;
            if (q >= nev) {
                bad = e;
                break;
            }
            const ap_json *a = ap_json_at(ev, q);
            const ap_sim_tensor *t = &sr->tensors[sr->events[e].tensor];
            int is_free = (int)ap_json_number(ap_json_at(a, 3));
            if ((int64_t)ap_json_number(ap_json_at(a, 0)) != t->bytes ||
                is_free != sr->events[e].is_free ||
                (!is_free && strcmp(ap_json_string(ap_json_at(a, 1)), ap_sim_kind_name(t->kind))))
                bad = e;
        }
        while (bad < 0 && q < nev &&
               !strcmp(ap_json_string(ap_json_at(ap_json_at(ev, q), 2)), "host"))
            q++;
        if (bad < 0 && q != nev) bad = sr->nevents; /* device events the simulator lacks */
        if (bad >= 0) fprintf(stderr, "  rank %d: event %d differs from the simulator\n", i, bad);
        CHECK(bad < 0);
    }
    ap_sim_free(s);
    ap_json_free(j);
}

/* ---- MPI: errors, faults, the launch, the database, the trace ----------------------------------- */

static int ranks_alive(void) {
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char p[300];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        char buf[512] = {0};
        size_t r = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t k = 0; k < r; k++)
            if (!buf[k]) buf[k] = ' ';
        if (strstr(buf, "autoplan-rank") && strstr(buf, "--tag autoplan-run-")) n++;
    }
    if (d) closedir(d);
    return n;
}

static void test_errors_and_faults(void) {
    char *out = NULL, *err = NULL, args[1024];
    /* refused before any rank starts: one line, exit 2 */
    const char *bad[][2] = {
        {"--gpus 2 --cp 2", "context parallelism"},
        {"--gpus 3 --tp 3", "tp 3 must divide"},
        {"--gpus 2 --tp 2 --dtype bf16", "--dtype"},
        {"--gpus 2 --trainer megatron", "--trainer megatron"},
        {"--gpus 2 --gpu a100", "--gpu a100"},
        {"--gpus 2 --overlap", "--overlap"},
        {"--gpus 1 --steps 0", "--steps"},
        {"--gpus 1 --timeout 5", "--timeout"},
        {"--gpus 2 --offload-params 1 --zero 3", "parameter offload"},
        {"--gpus 1 --events", "--events"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "run '%s' %s --seq 16 --no-db", llama_path, bad[i][0]);
        int rc = tl_run(args, &out, &err);
        CHECK_INT(rc, 2);
        CHECK_CONTAINS(err, bad[i][1]);
        CHECK(err && strchr(err, '\n') == strrchr(err, '\n')); /* one line */
        CHECK(out && !*out);
        free(out);
        free(err);
    }
    /* a rank failing mid-step ends the job with its message */
    setenv("AUTOPLAN_RUN_FAIL", "3:40", 1);
    snprintf(args, sizeof args, "run '%s' --gpus 4 --tp 2 --pp 2 " COMMON " --no-db", llama_path);
    int rc = tl_run(args, &out, &err);
    unsetenv("AUTOPLAN_RUN_FAIL");
    CHECK_INT(rc, 1);
    CHECK_CONTAINS(err, "autoplan: run: rank 3: out of memory allocating");
    free(out);
    free(err);
    CHECK_INT(ranks_alive(), 0);
    /* the timeout stops every rank */
    snprintf(args, sizeof args, "run '%s' --gpus 2 --pp 2 --seq 16 --steps 100000 --no-db "
             "--no-bench --timeout 3s", llama_path);
    rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 124);
    CHECK_CONTAINS(err, "did not finish within --timeout");
    free(out);
    free(err);
    CHECK_INT(ranks_alive(), 0);
}

static void test_inside_launch(void) {
    char cmd[2048], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s -np 2 '%s' run '%s' --gpus 2 --tp 2 " COMMON " --no-db --json",
             mpirun_cmd(), tl_bin, llama_path);
    int rc = run_cmd(cmd, &out, &err);
    CHECK_INT(rc, 0);
    ap_err e = {{0}};
    ap_json *j = out ? ap_json_parse(out, strlen(out), "inside launch", &e) : NULL;
    CHECK(j != NULL); /* rank 0 alone printed the report */
    CHECK_INT(ap_json_size(ap_json_get(j, "ranks")), 2);
    ap_json_free(j);
    free(out);
    free(err);
    /* a launch of the wrong size is refused */
    snprintf(cmd, sizeof cmd, "%s -np 2 '%s' run '%s' --gpus 4 --tp 4 " COMMON " --no-db",
             mpirun_cmd(), tl_bin, llama_path);
    rc = run_cmd(cmd, &out, &err);
    CHECK(rc != 0);
    CHECK_CONTAINS(err, "this launch has 2 ranks, the plan needs 4");
    free(out);
    free(err);
}

static void test_db_trace_plan(const char *dir) {
    char args[2048], db[600], trace[600], planf[600], *out = NULL, *err = NULL;
    snprintf(db, sizeof db, "%s/runs.db", dir);
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    /* a plan.json made by `autoplan estimate` for GPUs runs with its degrees */
    snprintf(planf, sizeof planf, "%s/plan", dir);
    snprintf(args, sizeof args, "'%s' --gpus 4 --tp 2 --pp 2 --seq 16 --gbs 8 --top 1 --out '%s' "
             "--no-cache --fix tp=2,pp=2,zero=1,mbs=1 --gpu a100", llama_path, planf);
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    free(out);
    free(err);
    snprintf(args, sizeof args, "run --plan '%s/plan.json' --steps 3 --db '%s' --trace '%s'",
             planf, db, trace);
    rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(err, "running its degrees and options with the runtime");
    CHECK_CONTAINS(out, "memory per rank");
    CHECK_CONTAINS(out, "time per step");
    CHECK_CONTAINS(out, "stored as run:1");
    free(out);
    free(err);
    /* a GPU plan whose placement the runtime cannot run as fixed fractions is refused, one
       whose placement is fixed fractions runs them */
    ap_model m = load(llama_path);
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 2, &c);
    ap_rt_job gj = small_job(&m, 16, 1, 2);
    gj.plan.dp = 2;
    gj.plan.grad_accum = 1;
    gj.plan.trainer = AP_TRAINER_COLOSSALAI;
    gj.plan.dtype = AP_DTYPE_BF16;
    gj.plan.zero = 3;
    const struct {
        ap_gemini_placement g;
        double shard;
        ap_offload_device ds;
        const char *refusal;
    } hp[] = {{AP_GEMINI_AUTO, 1, AP_OFFLOAD_DEV_NONE, "Gemini's auto placement"},
              {AP_GEMINI_STATIC, 0.5, AP_OFFLOAD_DEV_NONE, "shard_param_frac 0.5"},
              {AP_GEMINI_OFF, 1, AP_OFFLOAD_DEV_NVME, "NVMe offload"},
              {AP_GEMINI_STATIC, 1, AP_OFFLOAD_DEV_NONE, NULL}};
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        ap_plan gp = gj.plan;
        ap_plan_hetero_init(&gp.hetero);
        gp.hetero.placement = hp[i].g;
        gp.hetero.shard_param_frac = hp[i].shard;
        gp.hetero.ds_optimizer = hp[i].ds;
        if (hp[i].ds != AP_OFFLOAD_DEV_NONE) gp.trainer = AP_TRAINER_DEEPSPEED;
        snprintf(planf, sizeof planf, "%s/hetero%zu.json", dir, i);
        ap_err e = {{0}};
        CHECK_INT(ap_planfile_write(planf, &m, &c, &gp, NULL, &e), AP_OK);
        snprintf(args, sizeof args, "run --plan '%s' --steps 1 --no-bench --no-db", planf);
        rc = tl_run(args, &out, &err);
        CHECK_INT(rc, hp[i].refusal ? 2 : 0);
        if (hp[i].refusal) CHECK_CONTAINS(err, hp[i].refusal);
        free(out);
        free(err);
    }
    snprintf(args, sizeof args, "db list runs --db '%s'", db);
    rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "runs (1)");
    CHECK_CONTAINS(out, "cpu");
    free(out);
    free(err);
    char *t = tl_read(trace);
    ap_err e = {{0}};
    ap_json *j = t ? ap_json_parse(t, strlen(t), "trace", &e) : NULL;
    CHECK(j != NULL);
    const ap_json *evs = ap_json_get(j, "traceEvents");
    int procs = 0, counters = 0, slices = 0;
    for (int i = 0; i < ap_json_size(evs); i++) {
        const ap_json *ev = ap_json_at(evs, i);
        const char *name = ap_json_string(ap_json_get(ev, "name"));
        const char *ph = ap_json_string(ap_json_get(ev, "ph"));
        if (name && !strcmp(name, "process_name")) procs++;
        if (name && !strcmp(name, "live bytes by category")) counters++;
        if (ph && !strcmp(ph, "X")) slices++;
    }
    CHECK_INT(procs, 4);
    CHECK(counters > 0 && slices > 0);
    ap_json_free(j);
    free(t);
}

/* Each part's wall time on stderr (the CI log shows where the minutes go; nothing is checked). */
#define TIMED(call)                                                                                \
    do {                                                                                           \
        double t0_ = ap_now_s();                                                                   \
        call;                                                                                      \
        fprintf(stderr, "  %-28s %6.1f s\n", #call, ap_now_s() - t0_);                             \
    } while (0)

int main(int argc, char **argv) {
    tl_init(argc, argv);
    static char lp[4096], gp[4096];
    snprintf(lp, sizeof lp, "%s", tl_path("examples/models/tiny-llama.json"));
    snprintf(gp, sizeof gp, "%s", tl_path("tests/data/rt-gpt.json"));
    llama_path = lp;
    gpt_path = gp;
    /* ranks under AddressSanitizer: Open MPI's own leaks are suppressed (full stacks needed) */
    static char lsan[4200];
    snprintf(lsan, sizeof lsan, "suppressions=%s:print_suppressions=0",
             tl_path("tests/data/lsan-openmpi.supp"));
    setenv("LSAN_OPTIONS", lsan, 1);
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(asan_fast, sizeof asan_fast, "%s%sdetect_leaks=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    snprintf(asan_leaks, sizeof asan_leaks, "%s%sdetect_leaks=1:fast_unwind_on_malloc=0",
             asan ? asan : "", asan && *asan ? ":" : "");
    leak_checked(0);
    setenv("AUTOPLAN_RANK", AP_RT_RANK_BIN, 1);
    const char *dir = tl_tmpdir();
    TIMED(test_schedule());
    TIMED(test_refusals());
    TIMED(test_param_count());
    TIMED(test_memory_inprocess());
    TIMED(test_bitwise_inprocess());
    TIMED(test_fault_injection());
    leak_checked(1);
    TIMED(test_layer_twins());
    TIMED(test_events_mpi());
    TIMED(test_errors_and_faults());
    TIMED(test_inside_launch());
    leak_checked(0);
    TIMED(test_matrix(dir));
    TIMED(test_db_trace_plan(dir));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tl_finish();
}
#endif
