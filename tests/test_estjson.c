/*
 * test_estjson.c - the one table of estimate fields (output/estjson.c): `estimate --json`, its
 * plan reader, the report's rows and plans.csv all come from it.
 *
 * Checks: every field of the table appears in the JSON at its path with the estimate's value
 * (compared with the struct members named here by hand, an independent list); the plan read
 * back from the JSON equals the plan estimated, also with an uneven split; a malformed plan
 * field is refused naming its path; a report row holds the same values; the plans.csv header
 * is "label" and the row fields' paths in table order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/planio.h"
#include "autoplan/report.h"
#include "testlib.h"

static const ap_json *at(const ap_json *o, const char *path) {
    char part[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        snprintf(part, sizeof part, "%.*s", (int)n, path);
        o = ap_json_get(o, part);
        path += n + (path[n] == '.');
    }
    return o;
}

static void estimate(const char *model, int tp, int pp, ap_model *m, ap_estimate *e) {
    ap_err err;
    ap_cluster c;
    CHECK(ap_model_load(tl_path(model), m, &err) == AP_OK);
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 16, &c);
    ap_plan p;
    ap_plan_init(&p);
    p.tp = tp;
    p.pp = pp;
    p.dp = 16 / (tp * pp);
    p.mbs = 1;
    p.gbs = 64;
    p.grad_accum = p.gbs / (p.mbs * p.dp);
    p.seq = 2048;
    p.zero = 1;
    p.sp = tp > 1;
    p.recompute = AP_RECOMPUTE_SELECTIVE;
    p.overlap_grad = 1;
    p.offload_optimizer = 0.25;
    if (pp == 4) { /* an uneven split of 32 layers */
        p.nchunks = 4;
        int split[4] = {7, 9, 9, 7};
        memcpy(p.stage_layers, split, sizeof split);
    }
    CHECK(ap_estimate_plan(m, &c, &p, NULL, e, &err) == AP_OK);
}

/* The JSON value at every table path equals the estimate's struct member. */
static void test_writer(const ap_estimate *e, const ap_json *j) {
    const ap_stage_mem *w = &e->stages[e->worst_stage];
    struct { const char *path; double want; } num[] = {
        {"plan.tp", e->plan.tp}, {"plan.pp", e->plan.pp}, {"plan.dp", e->plan.dp},
        {"plan.gbs", (double)e->plan.gbs}, {"plan.grad_accum", (double)e->plan.grad_accum},
        {"plan.offload.optimizer", e->plan.offload_optimizer},
        {"time.step_s", e->time.step_s}, {"time.bubble_s", e->time.bubble_s},
        {"throughput.mfu", e->tp.mfu}, {"memory.peak_bytes", e->peak_bytes},
        {"memory.params_bytes", w->params_bytes}, {"memory.other_bytes", w->other_bytes},
        {"memory.worst_stage", e->worst_stage}, {"memory.host_capacity_bytes", e->host_capacity_bytes},
    };
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        const ap_json *v = at(j, num[i].path);
        CHECK(ap_json_is_number(v));
        CHECK_NEAR(ap_json_number(v), num[i].want, 1e-15);
    }
    CHECK_STR(ap_json_string(at(j, "plan.trainer")), "megatron");
    CHECK_STR(ap_json_string(at(j, "plan.recompute")), "selective");
    CHECK_STR(ap_json_string(at(j, "plan.dtype")), "bf16");
    CHECK(ap_json_bool(at(j, "plan.overlap")) == 1);
    CHECK(ap_json_bool(at(j, "memory.fits")) == e->fits);
    /* every table field is present, and nothing else is scalar-valued at those groups */
    for (int i = 0; i < ap_estimate_field_count(); i++) {
        const ap_estimate_field *f = ap_estimate_field_at(i);
        CHECK(at(j, f->path) != NULL);
        double v = ap_estimate_field_value(f, e);
        if (f->kind == AP_FIELD_REAL || f->kind == AP_FIELD_INT || f->kind == AP_FIELD_I64)
            CHECK_NEAR(ap_json_number(at(j, f->path)), v, 1e-15);
    }
    CHECK_INT(ap_json_size(at(j, "memory.stages")), e->nstages);
    CHECK_INT(ap_json_size(at(j, "plan.stage_layers")), e->plan.pp * e->plan.vp);
}

static void test_reader(const ap_estimate *e, const ap_json *j) {
    ap_plan p;
    ap_err err;
    CHECK(ap_estimate_plan_from_json(j, "est", &p, &err) == AP_OK);
    ap_plan want = e->plan;
    if (want.nchunks == 0) memset(want.stage_layers, 0, sizeof want.stage_layers);
    CHECK(memcmp(&p, &want, sizeof p) == 0);
    /* a malformed field is refused by its path */
    ap_json *bad = ap_json_duplicate(j);
    ap_json *pl = ap_json_detach(bad, "plan");
    ap_json_free(ap_json_detach(pl, "zero"));
    ap_json_add_string(pl, "zero", "one");
    ap_json_add(bad, "plan", pl);
    CHECK(ap_estimate_plan_from_json(bad, "est", &p, &err) == AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "plan.zero");
    ap_json_free(bad);
    /* the FP8 recipe (written for fp8 plans) reads by name, and a wrong one is refused */
    const char *names[] = {"tensorwise", "current", NULL};
    for (int i = 0; names[i]; i++) {
        bad = ap_json_duplicate(j);
        pl = ap_json_detach(bad, "plan");
        ap_json_add_string(pl, "fp8_recipe", names[i]);
        ap_json_add(bad, "plan", pl);
        ap_status st = ap_estimate_plan_from_json(bad, "est", &p, &err);
        if (i == 0) {
            CHECK(st == AP_OK);
            CHECK_INT(p.fp8_recipe, AP_FP8_TENSORWISE);
        } else {
            CHECK(st == AP_ERR_INPUT);
            CHECK_CONTAINS(err.msg, "est.plan: field 'fp8_recipe'");
            CHECK_CONTAINS(err.msg, "is not one of auto, delayed, tensorwise");
        }
        ap_json_free(bad);
    }
}

static void test_row_and_csv(const ap_estimate *e) {
    ap_report_row row;
    ap_report_row_from_estimate(e, &row);
    CHECK_INT(row.tp, e->plan.tp);
    CHECK_INT(row.gbs, e->plan.gbs);
    CHECK_INT(row.trainer, e->plan.trainer);
    CHECK_INT(row.overlap, 1);
    CHECK_NEAR(row.step_s, e->time.step_s, 1e-15);
    CHECK_NEAR(row.params_bytes, e->stages[e->worst_stage].params_bytes, 1e-15);
    CHECK_NEAR(row.host_bytes_per_node, e->host_bytes_per_node, 1e-15);
    CHECK_INT(row.host_fits, e->host_fits);

    ap_report rep;
    memset(&rep, 0, sizeof rep);
    rep.rows = &row;
    rep.nrows = 1;
    char *csv = NULL;
    size_t len = 0;
    ap_err err;
    CHECK(ap_report_csv(&rep, &csv, &len, &err) == AP_OK);
    char want[4096] = "label";
    for (int i = 0; i < ap_estimate_field_count(); i++)
        if (ap_estimate_field_at(i)->row_off != AP_FIELD_NO_ROW) {
            strcat(want, ",");
            strcat(want, ap_estimate_field_at(i)->path);
        }
    strcat(want, "\n");
    CHECK(csv && strncmp(csv, want, strlen(want)) == 0);
    /* the columns the report's documentation promises, in this order */
    CHECK(csv && strncmp(csv, "label,plan.trainer,plan.tp,plan.pp,", 35) == 0);
    CHECK_CONTAINS(csv, ",throughput.hfu,memory.peak_bytes,");
    CHECK_CONTAINS(csv, ",megatron,");
    free(csv);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    static ap_estimate e;
    ap_model m;
    for (int k = 0; k < 2; k++) {
        estimate("examples/models/llama-2-7b.json", k ? 2 : 4, k ? 4 : 2, &m, &e);
        ap_json *j = ap_estimate_to_json(&e, &m);
        CHECK(j != NULL);
        if (!j) continue;
        test_writer(&e, j);
        test_reader(&e, j);
        test_row_and_csv(&e);
        ap_json_free(j);
    }
    return tl_finish();
}
