/*
 * fuzz_validation.c - libFuzzer target for the validation rows `autoplan validate --data FILE`
 * reads (costmodel/validation.c): arbitrary bytes go to ap_validation_load_json for each of the
 * file's arrays (rows, outofsample, crosscheck), which must accept or refuse with one line;
 * every row it accepts is then predicted (ap_validation_predict: the estimate of its model,
 * cluster and plan), which must give a finite prediction or refuse with one line, never crash.
 *
 * Build with -DAP_FUZZ=ON (clang); seed with tests/fuzz/corpus/validation-*.json:
 *   ./fuzz_validation -max_total_time=60 corpus/
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/validation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal is AP_ERR_INPUT, AP_ERR_INFEASIBLE (a plan its trainer cannot run) or NOMEM, with
 * one line. */
static void one_line(ap_status st, const ap_err *err) {
    if (st == AP_ERR_NOMEM) return;
    if ((st != AP_ERR_INPUT && st != AP_ERR_INFEASIBLE) || err->msg[0] == '\0' ||
        strchr(err->msg, '\n')) {
        fprintf(stderr, "status %d, message: %s\n", (int)st, err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ap_vset *vs;
    if (!vs && !(vs = ap_vset_new())) return 0;
    ap_err err = {{0}};
    ap_json *root = ap_json_parse((const char *)data, size, "fuzz.json", &err);
    if (!root) return 0;
    static const char *const keys[] = {"rows", "outofsample", "crosscheck"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        ap_err e = {{0}};
        ap_status st = ap_validation_load_json(root, "fuzz.json", keys[k], vs, &e);
        if (st != AP_OK) {
            one_line(st, &e);
            continue;
        }
        /* a few rows each: an estimate costs microseconds to milliseconds */
        for (int i = 0; i < vs->n && i < 4; i++) {
            ap_err pe = {{0}};
            st = ap_validation_predict(&vs->rows[i], NULL, &pe);
            if (st != AP_OK) one_line(st, &pe);
            else if (!isfinite(vs->rows[i].predicted)) abort();
        }
    }
    ap_json_free(root);
    return 0;
}
