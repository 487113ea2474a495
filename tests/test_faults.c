/*
 * test_faults.c - failing allocations (base/heap.c's injection hook) over the library's main
 * entry points: load a model and a cluster, estimate, search, partition (DP and ILP),
 * simulate, the database (open, put, get, profiles, runs, export, import), plan.json and
 * trainer configs, and the comparison report.
 *
 * Method (SQLite's "How SQLite Is Tested", section 3.1, and llama.cpp's test-alloc): run each
 * scenario once to get its reference result and allocation count, then again with allocation
 * N failing, for N = 1, 2, ... until a run completes without reaching N; once with only the
 * Nth allocation failing (recovery paths) and once with every allocation from the Nth on
 * failing (cascades). Each run must end in a clean status: AP_ERR_NOMEM with a message, the
 * database's documented fallback (AP_ERR_DB: "the database is a cache, never a requirement",
 * db.h), or AP_OK with exactly the reference result (a fallback that recovered). A run that
 * returns AP_OK with a different result (a failure swallowed on the way up) fails the test.
 * Leaks: every scenario frees what it made on every path; the sanitizer build (CI) runs this
 * test under LeakSanitizer. A crash is a failure by itself.
 *
 * GLPK's own allocations are not injected: GLPK aborts the process when glp_alloc fails, by
 * design (base/heap.c); the ILP scenario injects into everything around it.
 *
 * Each scenario hashes its result (64-bit FNV-1a over the text or numbers it produced) so the
 * comparison needs no allocation of its own. Inputs are small (tiny-gpt, a 7B model on 8 GPUs)
 * so the quadratic cost of the method stays in seconds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/db.h"
#include "autoplan/emit.h"
#include "autoplan/partition.h"
#include "autoplan/planio.h"
#include "autoplan/report.h"
#include "autoplan/sim.h"
#include "autoplan/strbuf.h"
#include "testlib.h"

/* ---- result hashes ---------------------------------------------------------------------- */

typedef struct {
    uint64_t h;
} digest;

static void d_bytes(digest *d, const void *p, size_t n) { d->h = ap_hash64(p, n, d->h); }
static void d_str(digest *d, const char *s) { d_bytes(d, s ? s : "(null)", strlen(s ? s : "(null)") + 1); }
static void d_num(digest *d, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    d_str(d, buf);
}
static void d_int(digest *d, int64_t v) { d_num(d, (double)v); }

/* Hash the printed form of a JSON tree and free both; a NULL tree is an allocation failure. */
static ap_status d_json(digest *d, ap_json *j, ap_err *err) {
    if (!j) return ap_err_set(err, AP_ERR_NOMEM, "out of memory building JSON");
    char *text = ap_json_print(j, 1);
    ap_json_free(j);
    if (!text) return ap_err_set(err, AP_ERR_NOMEM, "out of memory printing JSON");
    d_str(d, text);
    free(text);
    return AP_OK;
}

/* ---- shared inputs (built once, without injection) ----------------------------------------- */

static ap_model tiny, llama;
static ap_cluster c8;

static int load_inputs(void) {
    ap_err err;
    if (ap_model_load(tl_path("examples/models/tiny-gpt.json"), &tiny, &err) != AP_OK ||
        ap_model_load(tl_path("examples/models/llama-2-7b.json"), &llama, &err) != AP_OK) {
        fprintf(stderr, "cannot load the example models: %s\n", err.msg);
        return -1;
    }
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &c8);
    return 0;
}

/* tp2 pp2 dp2 on 8 GPUs, selective recompute: touches every stage kind of the cost model. */
static void plan_pp(const ap_model *m, ap_plan *p) {
    ap_plan_init(p);
    p->tp = 2;
    p->pp = 2;
    p->dp = 2;
    p->mbs = 1;
    p->gbs = 16;
    p->grad_accum = p->gbs / (p->mbs * p->dp);
    p->seq = m->seq_len > 0 ? m->seq_len : 2048;
    p->zero = 1;
    p->sp = 1;
    p->recompute = AP_RECOMPUTE_SELECTIVE;
}

/* ---- scenarios: run an entry point, hash its result, free everything ----------------------- */

static ap_status sc_load(digest *d, ap_err *err) {
    ap_model m;
    ap_cluster c;
    ap_status st = ap_model_load(tl_path("examples/models/llama-2-7b.json"), &m, err);
    if (st == AP_OK) d_int(d, (int64_t)ap_model_fingerprint(&m));
    if (st == AP_OK) st = ap_model_load(tl_path("examples/models/tiny-gpt.json"), &m, err);
    if (st == AP_OK) d_int(d, (int64_t)ap_model_fingerprint(&m));
    if (st == AP_OK) st = ap_cluster_load(tl_path("examples/clusters/dgx-h100.json"), &c, err);
    if (st == AP_OK) d_int(d, (int64_t)ap_cluster_fingerprint(&c));
    return st;
}

/* Estimate plan p of llama on c8 and build its JSON into *est (caller frees). */
static ap_status estimate_json(const ap_plan *p, ap_json **est, ap_err *err) {
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    *est = NULL;
    ap_estimate *e = malloc(sizeof *e);
    if (!e) return ap_err_set(err, AP_ERR_NOMEM, "test: out of memory");
    ap_status st = ap_estimate_plan(&llama, &c8, p, &o, e, err);
    if (st == AP_OK && !(*est = ap_estimate_to_json(e, &llama)))
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory building the estimate");
    free(e);
    return st;
}

static ap_status sc_estimate(digest *d, ap_err *err) {
    ap_plan p;
    plan_pp(&llama, &p);
    ap_json *est = NULL;
    ap_status st = estimate_json(&p, &est, err);
    return st == AP_OK ? d_json(d, est, err) : st;
}

static ap_status sc_search(digest *d, ap_err *err) {
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.gbs = 64;
    o.top_k = 2;
    /* a small space (tp 2, mbs 1), and pipelined plans for the re-split: the search runs once
     * per injected failure, and the re-split allocates per candidate */
    o.fixed.pp = 2;
    o.fixed.tp = 2;
    o.fixed.mbs = 1;
    /* the re-split `autoplan plan` ranks its plans with (search.h), on one thread so the
     * allocations come in the same order on every run */
    o.resplit = 1;
    o.resplit_solver = AP_SOLVER_DP;
    o.threads = 1;
    ap_search_result r;
    memset(&r, 0, sizeof r);
    ap_status st = ap_search(&llama, &c8, &o, &r, err);
    if (st == AP_OK) {
        d_int(d, r.ntop);
        d_int(d, r.evaluated);
        d_int(d, r.candidates);
        d_int(d, r.resplit);
        for (int i = 0; i < r.ntop; i++) {
            char lbl[160];
            d_str(d, ap_plan_label(&r.top[i].plan, lbl, sizeof lbl));
            d_int(d, r.top[i].plan.nchunks);
            d_num(d, r.top[i].time.step_s);
        }
    }
    ap_search_result_free(&r);
    return st;
}

static ap_status partition(digest *d, ap_solver solver, int ilp_fault, ap_err *err) {
    ap_plan p;
    plan_pp(&llama, &p);
    p.tp = 1;
    p.sp = 0;
    p.pp = 4;
    p.grad_accum = p.gbs / (p.mbs * p.dp);
    ap_partition_opts o;
    ap_partition_opts_init(&o);
    o.solver = solver;
    o.ilp_fault = ilp_fault;
    ap_partition_result *r = malloc(sizeof *r);
    if (!r) return ap_err_set(err, AP_ERR_NOMEM, "test: out of memory");
    ap_status st = ap_partition_solve(&llama, &c8, &p, &o, r, err);
    if (st == AP_OK) {
        for (int i = 0; i < r->nchunks; i++) d_int(d, r->stage_layers[i]);
        d_num(d, r->pipe_s);
        d_int(d, r->fits);
        d_int(d, r->solver);
        d_int(d, r->fell_back);
    }
    free(r);
    return st;
}

static ap_status sc_partition_dp(digest *d, ap_err *err) {
    return partition(d, AP_SOLVER_DP, 0, err);
}
static ap_status sc_partition_ilp(digest *d, ap_err *err) {
    return partition(d, AP_SOLVER_ILP, 0, err);
}
/* The ILP's documented fallback (partition.h): when GLPK fails or memory for the integer
 * program runs out, the DP answer, marked fell_back. Forced here by GLPK's error hook. */
static ap_status sc_partition_ilp_fallback(digest *d, ap_err *err) {
    return partition(d, AP_SOLVER_ILP, 1, err);
}

/* The simulation of a 2-layer model on 2 stages with 2 micro-batches: every kind of
 * operation, few events (the renderings allocate per event). what: 0 the run, 1 its JSON, 2 the
 * Chrome trace (of one stage: its code is the same for every stage, and it allocates most), 3
 * the trace written during the run with each rank's events released, and the JSON after. */
/* the streamed trace, gathered whole for the digest */
static ap_status text_sink(void *ctx, const char *data, size_t len, ap_err *err) {
    (void)err;
    ap_strbuf_put(ctx, data, len);
    return AP_OK;
}

static ap_status simulate(digest *d, int what, ap_err *err) {
    ap_model m = tiny;
    m.layers = 2;
    ap_plan p;
    plan_pp(&m, &p);
    p.gbs = 4;
    if (what == 2) {
        p.pp = 1;
        p.dp = 4;
    }
    p.grad_accum = p.gbs / (p.mbs * p.dp);
    ap_sim_opts o;
    ap_sim_opts_init(&o);
    ap_sim *s = NULL;
    ap_strbuf streamed = {0};
    ap_sim_tracer *tr = NULL;
    ap_status st = AP_OK;
    if (what == 3) { /* the trace written rank by rank, each rank's events released */
        st = ap_sim_tracer_open(NULL, text_sink, &streamed, &tr, err);
        o.rank_done = ap_sim_tracer_rank;
        o.rank_ctx = tr;
        o.release_events = 1;
    }
    if (st == AP_OK) st = ap_sim_run(&m, &c8, &p, &o, &s, err);
    if (tr && st != AP_OK) ap_sim_tracer_abort(tr);
    if (tr && st == AP_OK) st = ap_sim_tracer_finish(tr, err);
    if (st == AP_OK && what == 3) {
        if (streamed.failed) st = ap_err_set(err, AP_ERR_NOMEM, "test: out of memory");
        if (st == AP_OK) d_str(d, streamed.buf);
        if (st == AP_OK) st = d_json(d, ap_sim_to_json(s, 8), err);
    }
    ap_strbuf_free(&streamed);
    if (st == AP_OK) {
        const ap_sim_rank *r = ap_sim_rank_at(s, ap_sim_worst_rank(s));
        d_int(d, r->allocated_peak_bytes);
        d_int(d, r->reserved_peak_bytes);
        d_int(d, r->nevents);
    }
    if (st == AP_OK && what == 1) st = d_json(d, ap_sim_to_json(s, 8), err);
    if (st == AP_OK && what == 2) {
        ap_strbuf text = {0};
        st = ap_sim_trace_stream(s, text_sink, &text, err);
        if (st == AP_OK && text.failed) st = ap_err_set(err, AP_ERR_NOMEM, "test: out of memory");
        if (st == AP_OK) d_str(d, text.buf);
        ap_strbuf_free(&text);
    }
    ap_sim_free(s);
    return st;
}

static ap_status sc_simulate(digest *d, ap_err *err) { return simulate(d, 0, err); }
static ap_status sc_simulate_json(digest *d, ap_err *err) { return simulate(d, 1, err); }
static ap_status sc_simulate_trace(digest *d, ap_err *err) { return simulate(d, 2, err); }
static ap_status sc_simulate_streamed(digest *d, ap_err *err) { return simulate(d, 3, err); }

static char dbdir[4096];

static void db_remove(const char *path) {
    char side[4300]; /* a path of up to 4200 bytes (callers' buffers) and its suffix */
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-journal", path);
    unlink(side);
}

static ap_status db_plans(ap_db *db, digest *d, ap_err *err) {
    char key[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("model=tiny\ncluster=8\n", key);
    ap_status st = ap_db_plan_put(db, key, "tiny on 8", "{\"plans\": [1, 2, 3]}", 0.25, err);
    char *json = NULL;
    double search_s = 0;
    if (st == AP_OK) st = ap_db_plan_get(db, key, &json, &search_s, err);
    if (st == AP_OK) {
        d_str(d, json);
        d_num(d, search_s);
    }
    free(json);
    return st;
}

static ap_status db_profiles(ap_db *db, digest *d, ap_err *err) {
    ap_db_profile rows[2];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < 2; i++) {
        snprintf(rows[i].gpu, sizeof rows[i].gpu, "a100-sxm4-80g");
        snprintf(rows[i].op, sizeof rows[i].op, "gemm");
        snprintf(rows[i].shape, sizeof rows[i].shape, "m=%d,n=4096,k=4096", 1024 << i);
        snprintf(rows[i].dtype, sizeof rows[i].dtype, "bf16");
        rows[i].time_s = 1e-3 * (i + 1);
        rows[i].samples = 10;
        rows[i].created_at = 1700000000;
    }
    size_t added = 0;
    ap_status st = ap_db_profiles_insert(db, rows, 2, &added, err);
    if (st == AP_OK) d_int(d, (int64_t)added);
    uint64_t fp = 0;
    if (st == AP_OK) st = ap_db_profiles_fingerprint(db, "a100-sxm4-80g", &fp, err);
    if (st == AP_OK) d_int(d, (int64_t)fp);
    return st;
}

static ap_status db_runs(ap_db *db, digest *d, ap_err *err) {
    ap_db_run run;
    memset(&run, 0, sizeof run);
    run.plan_json = "{\"plan\": {}}";
    snprintf(run.host, sizeof run.host, "node0");
    snprintf(run.backend, sizeof run.backend, "cpu");
    run.started_at = 1700000000;
    run.ranks = 2;
    run.predicted_step_s = run.measured_step_s = 1.5;
    ap_db_run_rank ranks[2] = {{0, 1.5, 1.4, 1e9, 1.1e9}, {1, 1.5, 1.6, 1e9, 0.9e9}};
    int64_t id = 0;
    ap_status st = ap_db_run_insert(db, &run, ranks, 2, &id, err);
    ap_db_run *runs = NULL;
    size_t nruns = 0;
    if (st == AP_OK) st = ap_db_runs_list(db, &runs, &nruns, err);
    if (st == AP_OK) {
        d_int(d, (int64_t)nruns);
        if (nruns) d_str(d, runs[0].uid);
    }
    ap_db_runs_free(runs, nruns);
    return st;
}

/* Export the database as JSON and CSV and import that JSON again: every row is validated,
 * written and found already stored. */
static ap_status db_export(ap_db *db, digest *d, ap_err *err) {
    char *exported = NULL, *csv = NULL;
    ap_status st = ap_db_export_json(db, &exported, err);
    if (st == AP_OK) st = ap_db_export_csv(db, "profiles", &csv, err);
    if (st == AP_OK) d_str(d, csv);
    ap_db_import_counts counts;
    memset(&counts, 0, sizeof counts);
    if (st == AP_OK) st = ap_db_import_json(db, exported, strlen(exported), "export.json",
                                            &counts, err);
    if (st == AP_OK) {
        d_int(d, (int64_t)(counts.plans + counts.profiles + counts.runs));
        d_int(d, (int64_t)(counts.plans_new + counts.profiles_new + counts.runs_new));
        st = ap_db_integrity_check(db, err);
    }
    ap_free(exported);
    ap_free(csv);
    return st;
}

/* Creating a database: the checks, the journal mode, the first migration. */
static ap_status sc_db_create(digest *d, ap_err *err) {
    char a[4200];
    snprintf(a, sizeof a, "%s/new.db", dbdir);
    db_remove(a);
    ap_db *db = NULL;
    ap_status st = ap_db_open(a, 0, &db, err);
    if (st == AP_OK) {
        d_str(d, ap_db_journal_mode(db));
        d_int(d, ap_db_schema_version(db));
    }
    ap_db_close(db);
    return st;
}

/* Copy a database made once by make_templates() (plain stdio: not the code under test). */
static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[8192];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    return ok ? 0 : -1;
}

/* Open a fresh copy of template `name` (an empty database, or one holding the rows of
 * db_plans, db_profiles and db_runs) and run step on it. */
static ap_status on_copy(const char *name, ap_status (*step)(ap_db *, digest *, ap_err *),
                         digest *d, ap_err *err) {
    char t[4200], a[4200];
    snprintf(t, sizeof t, "%s/%s", dbdir, name);
    snprintf(a, sizeof a, "%s/a.db", dbdir);
    db_remove(a);
    if (copy_file(t, a) != 0) return ap_err_set(err, AP_ERR_IO, "test: cannot copy %s", t);
    ap_db *db = NULL;
    ap_status st = ap_db_open(a, 0, &db, err);
    if (st == AP_OK) st = step(db, d, err);
    ap_db_close(db);
    return st;
}

static int make_templates(void) {
    char t[4200];
    ap_db *db = NULL;
    ap_err err;
    digest d = {0};
    snprintf(t, sizeof t, "%s/empty.db", dbdir);
    ap_status st = ap_db_open(t, 0, &db, &err);
    ap_db_close(db); /* the last connection checkpoints the WAL into the file */
    db = NULL;
    snprintf(t, sizeof t, "%s/filled.db", dbdir);
    if (st == AP_OK) st = ap_db_open(t, 0, &db, &err);
    if (st == AP_OK) st = db_plans(db, &d, &err);
    if (st == AP_OK) st = db_profiles(db, &d, &err);
    if (st == AP_OK) st = db_runs(db, &d, &err);
    ap_db_close(db);
    if (st != AP_OK) fprintf(stderr, "template databases: %s\n", err.msg);
    return st == AP_OK ? 0 : -1;
}

static ap_status sc_db_plans(digest *d, ap_err *err) {
    return on_copy("empty.db", db_plans, d, err);
}
static ap_status sc_db_profiles(digest *d, ap_err *err) {
    return on_copy("empty.db", db_profiles, d, err);
}
static ap_status sc_db_runs(digest *d, ap_err *err) { return on_copy("empty.db", db_runs, d, err); }
static ap_status sc_db_export(digest *d, ap_err *err) {
    return on_copy("filled.db", db_export, d, err);
}

static ap_status sc_emit(digest *d, ap_err *err) {
    ap_plan p;
    plan_pp(&llama, &p);
    ap_json *est = NULL;
    ap_status st = estimate_json(&p, &est, err);
    for (int t = 0; st == AP_OK && t < AP_EMIT_COUNT; t++) {
        ap_emit_out out;
        memset(&out, 0, sizeof out);
        st = ap_emit_render((ap_emit_target)t, &llama, &c8, &p, est, &out, err);
        if (st == AP_ERR_INFEASIBLE) {
            /* this target cannot express the plan: a result, the same every run */
            d_str(d, err->msg);
            st = AP_OK;
            continue;
        }
        for (int i = 0; st == AP_OK && i < out.nfiles; i++) {
            d_str(d, out.files[i].name);
            d_str(d, out.files[i].text);
        }
        ap_emit_out_free(&out);
    }
    /* plan.json there and back */
    ap_json *root = NULL;
    if (st == AP_OK && !(root = ap_planfile_to_json(&llama, &c8, &p, est)))
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory building plan.json");
    ap_model m2;
    ap_cluster c2;
    ap_plan p2;
    ap_json *est2 = NULL;
    if (st == AP_OK) st = ap_planfile_from_json(root, "plan.json", &m2, &c2, &p2, &est2, err);
    if (st == AP_OK) {
        d_int(d, (int64_t)ap_model_fingerprint(&m2));
        st = d_json(d, est2, err);
        est2 = NULL;
    }
    ap_json_free(est2);
    if (st == AP_OK) st = d_json(d, root, err);
    else ap_json_free(root);
    ap_json_free(est);
    return st;
}

static ap_status sc_report(digest *d, ap_err *err) {
    ap_report rep;
    memset(&rep, 0, sizeof rep);
    rep.model = &tiny;
    rep.cluster = &c8;
    rep.model_arg = "tiny-gpt.json";
    ap_search_opts so;
    ap_search_opts_init(&so);
    so.gbs = 16;
    so.top_k = 2;
    so.fixed.seq = tiny.seq_len;
    so.fixed.tp = 2; /* a small space: the enumeration runs once per injected failure */
    so.fixed.pp = 2;
    rep.gbs = so.gbs;
    rep.seq = tiny.seq_len;
    rep.trainer = (int)so.fixed.trainer;
    ap_search_result r;
    memset(&r, 0, sizeof r);
    ap_status st = ap_search(&tiny, &c8, &so, &r, err);
    if (st == AP_OK && r.ntop > 0) {
        rep.strat = ap_calloc((size_t)r.ntop, sizeof *rep.strat);
        if (!rep.strat) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory");
        for (int i = 0; st == AP_OK && i < r.ntop; i++) {
            ap_report_strategy *s = &rep.strat[rep.nstrat++];
            snprintf(s->name, sizeof s->name, "top%d", i + 1);
            snprintf(s->desc, sizeof s->desc, "search rank %d", i + 1);
            s->status = r.top[i].fits ? AP_REPORT_OK : AP_REPORT_NOFIT;
            s->est = r.top[i];
        }
    }
    ap_search_result_free(&r);
    if (st == AP_OK) st = ap_report_enumerate(&tiny, &c8, &so, &rep, err);
    if (st == AP_OK) {
        rep.best = ap_report_pick_best(&rep);
        st = ap_report_simulate(&rep, NULL, err);
    }
    ap_cluster sweep[2];
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 4, &sweep[0]);
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &sweep[1]);
    if (st == AP_OK) st = ap_report_sweep(&tiny, sweep, 2, &so, (int)AP_SOLVER_DP, 1e9, &rep, err);
    char *doc = NULL;
    size_t len = 0;
    if (st == AP_OK) st = ap_report_html(&rep, &doc, &len, err);
    if (st == AP_OK) d_str(d, doc);
    free(doc);
    doc = NULL;
    if (st == AP_OK) st = ap_report_markdown(&rep, &doc, &len, err);
    if (st == AP_OK) d_str(d, doc);
    free(doc);
    doc = NULL;
    if (st == AP_OK) st = ap_report_csv(&rep, &doc, &len, err);
    if (st == AP_OK) d_str(d, doc);
    free(doc);
    ap_report_free(&rep);
    return st;
}

/* ---- the driver ----------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    ap_status (*run)(digest *d, ap_err *err);
    int db; /* AP_ERR_DB is a documented outcome (the database is optional) */
    /* a documented fallback: AP_OK with this run's result is accepted too (NULL: none) */
    ap_status (*fallback)(digest *d, ap_err *err);
} scenario;

static const scenario scenarios[] = {
    {"load model and cluster", sc_load, 0, NULL},
    {"estimate", sc_estimate, 0, NULL},
    {"search + re-split", sc_search, 0, NULL},
    {"partition (DP)", sc_partition_dp, 0, NULL},
    {"partition (ILP)", sc_partition_ilp, 0, sc_partition_ilp_fallback},
    {"simulate", sc_simulate, 0, NULL},
    {"simulate: JSON", sc_simulate_json, 0, NULL},
    {"simulate: trace", sc_simulate_trace, 0, NULL},
    {"simulate: streamed trace, events released", sc_simulate_streamed, 0, NULL},
    {"database: create", sc_db_create, 1, NULL},
    {"database: plans", sc_db_plans, 1, NULL},
    {"database: profiles", sc_db_profiles, 1, NULL},
    {"database: runs", sc_db_runs, 1, NULL},
    {"database: export, import", sc_db_export, 1, NULL},
    {"plan.json + trainer configs", sc_emit, 0, NULL},
    {"report", sc_report, 0, NULL},
};

/* One run of fn with allocation n failing (n = 0: none). */
static ap_status run_once(ap_status (*fn)(digest *, ap_err *), long n, int persistent,
                          uint64_t *h, int *hit, long *count, ap_err *err) {
    digest d = {0x9e3779b97f4a7c15ULL};
    err->msg[0] = '\0';
    ap_log_level lvl = ap_log_get_level();
    ap_log_set_level(AP_LOG_QUIET); /* warnings of the fallbacks are expected here */
    ap_heap_fail_at(n, persistent);
    ap_status st = fn(&d, err);
    *hit = ap_heap_injected();
    *count = ap_heap_count();
    ap_heap_fail_at(0, 0);
    ap_log_set_level(lvl);
    *h = d.h;
    return st;
}

static void run_scenario(const scenario *s) {
    ap_err err;
    uint64_t ref = 0, again = 0;
    int hit = 0;
    long total = 0, count = 0;
    ap_status st = run_once(s->run, 0, 0, &ref, &hit, &total, &err);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) {
        fprintf(stderr, "%s: reference run failed: %s\n", s->name, err.msg);
        return;
    }
    /* the result must be deterministic for the comparison to mean anything */
    st = run_once(s->run, 0, 0, &again, &hit, &count, &err);
    CHECK(st == AP_OK && again == ref);
    uint64_t alt = ref;
    if (s->fallback) {
        st = run_once(s->fallback, 0, 0, &alt, &hit, &count, &err);
        CHECK_INT(st, AP_OK);
    }
    for (int persistent = 0; persistent <= 1; persistent++) {
        long bad = 0, recovered = 0;
        for (long n = 1;; n++) {
            uint64_t h = 0;
            st = run_once(s->run, n, persistent, &h, &hit, &count, &err);
            if (!hit) { /* ran to the end without reaching allocation n */
                CHECK_INT(st, AP_OK);
                CHECK(h == ref);
                break;
            }
            int ok = st == AP_ERR_NOMEM || (s->db && st == AP_ERR_DB);
            if (ok && !err.msg[0]) ok = 0; /* an error must say what happened */
            if (st == AP_OK) {
                ok = h == ref || h == alt; /* recovered: the same result, or the fallback's */
                recovered++;
                if (getenv("AP_FAULTS_VERBOSE"))
                    fprintf(stderr, "%s: allocation %ld failing%s: recovered\n", s->name, n,
                            persistent ? " (and every later one)" : "");
            }
            if (!ok && bad++ < 5)
                fprintf(stderr, "%s: allocation %ld failing%s: status %s, %s\n", s->name, n,
                        persistent ? " (and every later one)" : "", ap_status_str(st),
                        st == AP_OK ? "a different result" : err.msg);
            CHECK(ok);
            if (n > 4 * total + 1000) { /* the count must converge */
                CHECK(!"allocation count does not converge");
                break;
            }
        }
        if (persistent == 0)
            fprintf(stderr, "%-28s %6ld allocations, %ld recovered\n", s->name, total, recovered);
    }
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    if (load_inputs() != 0) {
        CHECK(!"inputs");
        return tl_finish();
    }
    /* on tmpfs when there is one: thousands of commits, each with an fsync on a disk */
    const char *tmp = getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0) setenv("TMPDIR", "/dev/shm", 1);
    const char *dir = tl_tmpdir();
    if (tmp) setenv("TMPDIR", tmp, 1);
    else unsetenv("TMPDIR");
    if (!dir) {
        CHECK(!"temporary directory");
        return tl_finish();
    }
    snprintf(dbdir, sizeof dbdir, "%s", dir);
    if (make_templates() != 0) {
        CHECK(!"template databases");
        return tl_finish();
    }
    const char *only = getenv("AP_FAULTS_ONLY"); /* a scenario name prefix, for debugging */
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (!only || !strncmp(scenarios[i].name, only, strlen(only))) run_scenario(&scenarios[i]);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dbdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dbdir);
    return tl_finish();
}
