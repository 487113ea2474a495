/*
 * fuzz_planfile.c - libFuzzer target for plan.json and everything that reads it: arbitrary bytes
 * go to ap_planfile_from_json (output/planio.c), which must accept or refuse with one line;
 * a plan it accepts must write back to a plan.json that reads to the same plan, and render
 * in every emitter (output/emit*.c) without a crash, with no NUL inside a file and every line of
 * a script's header still a comment. The same bytes also go to the cached-result check
 * (ap_result_check, output/result.c) against a fixed model and cluster, which must never crash
 * and accept nothing that is not a search's answer.
 *
 * Build with -DAP_FUZZ=ON (clang); seed with tests/fuzz/corpus/planfile-*.json:
 *   ./fuzz_planfile -max_total_time=60 corpus/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/emit.h"
#include "autoplan/planio.h"
#include "autoplan/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal is AP_ERR_INPUT (or NOMEM) with one line. */
static void one_line(ap_status st, const ap_err *err) {
    if (st == AP_ERR_NOMEM) return;
    if (st != AP_ERR_INPUT || err->msg[0] == '\0' || strchr(err->msg, '\n')) {
        fprintf(stderr, "status %d, message: %s\n", (int)st, err->msg);
        abort();
    }
}

/* The header of a generated file (emit_header: every line up to "predicted:") must be comment
 * lines of its language, whatever the model's name was. */
static void check_file(const ap_emit_file *f) {
    if (strlen(f->text) != f->len) abort(); /* no NUL inside */
    const char *dot = strrchr(f->name, '.');
    if (!dot || !strcmp(dot, ".json")) return;
    const char *line = f->text;
    for (int n = 0; *line && n < 40; n++) {
        if (line[0] != '#') abort();
        const char *nl = strchr(line, '\n');
        if (!nl) abort();
        if (!strncmp(line, "# predicted:", 12)) return;
        line = nl + 1;
    }
    abort(); /* no "predicted:" line in the header */
}

static void render_all(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                       const ap_json *est) {
    for (int t = 0; t < AP_EMIT_COUNT; t++) {
        ap_emit_out out;
        ap_err err = {{0}};
        ap_status st = ap_emit_render((ap_emit_target)t, m, c, p, est, &out, &err);
        if (st != AP_OK) {
            if (st != AP_ERR_INFEASIBLE && st != AP_ERR_INPUT && st != AP_ERR_NOMEM) abort();
            continue;
        }
        for (int i = 0; i < out.nfiles; i++) check_file(&out.files[i]);
        ap_emit_out_free(&out);
    }
}

static void round_trip(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                       const ap_json *est) {
    char *text = ap_planfile_print(m, c, p, est);
    if (!text) return;
    ap_err err = {{0}};
    ap_json *again = ap_json_parse(text, strlen(text), "round trip", &err);
    if (!again) abort();
    static ap_model m2;
    static ap_cluster c2;
    static ap_plan p2;
    if (ap_planfile_from_json(again, "round trip", &m2, &c2, &p2, NULL, &err) != AP_OK) abort();
    if (p2.tp != p->tp || p2.pp != p->pp || p2.dp != p->dp || p2.gbs != p->gbs ||
        p2.nchunks != p->nchunks || strcmp(m2.name, m->name) != 0)
        abort();
    ap_json_free(again);
    free(text);
}

/* The cached-result check against a fixed problem: tiny-gpt-like, 8 A100s. */
static void result_check(const ap_json *root) {
    static ap_model m;
    static ap_cluster c;
    static ap_search_opts so;
    static int ready;
    if (!ready) {
        ap_err e;
        static const char model[] = "{\"name\": \"tiny\", \"layers\": 4, \"hidden\": 256, "
                                    "\"heads\": 8, \"vocab\": 1024, \"seq_len\": 512}";
        if (ap_model_parse(model, sizeof model - 1, "tiny", &m, &e) != AP_OK) abort();
        ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &c);
        ap_search_opts_init(&so);
        so.fixed.seq = 512;
        so.gbs = 64;
        ready = 1;
    }
    ap_err err = {{0}};
    ap_status st = ap_result_check(root, &m, &c, &so, 1, &err);
    if (st != AP_OK) one_line(st, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ap_log_set_level(AP_LOG_QUIET);
    ap_err err = {{0}};
    ap_json *root = ap_json_parse((const char *)data, size, "fuzz.json", &err);
    if (!root) {
        one_line(AP_ERR_INPUT, &err);
        return 0;
    }
    static ap_model m;
    static ap_cluster c;
    static ap_plan p;
    ap_json *est = NULL;
    ap_status st = ap_planfile_from_json(root, "fuzz.json", &m, &c, &p, &est, &err);
    if (st == AP_OK) {
        round_trip(&m, &c, &p, est);
        render_all(&m, &c, &p, est);
    } else {
        one_line(st, &err);
    }
    ap_json_free(est);
    result_check(root);
    ap_json_free(root);
    return 0;
}
