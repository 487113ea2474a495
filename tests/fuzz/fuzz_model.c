/*
 * fuzz_model.c - libFuzzer target for the model readers (costmodel/hf.c): arbitrary bytes go to
 * ap_model_parse, which must return AP_OK or AP_ERR_INPUT with a one-line message and never
 * crash, leak or trip a sanitizer. A model that parses must give consistent counts (active <=
 * total, both positive, finite FLOPs), which the counters' int64 arithmetic relies on.
 *
 * Build with -DAP_FUZZ=ON (clang); seed with examples/models/:
 *   ./fuzz_model -max_total_time=60 corpus/ ../examples/models/
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ap_model m;
    ap_err err = {{0}};
    ap_status st = ap_model_parse((const char *)data, size, "fuzz.json", &m, &err);
    if (st == AP_OK) {
        int64_t total = ap_model_total_params(&m), active = ap_model_active_params(&m);
        double f = ap_model_fwd_flops_per_token(&m, 0);
        if (total <= 0 || active <= 0 || active > total || !isfinite(f) || f <= 0) abort();
        ap_layer_info li;
        ap_model_layer(&m, m.layers - 1, &li);
        if (li.total_params <= 0 || li.active_params > li.total_params) abort();
        (void)ap_model_fingerprint(&m);
    } else {
        if (st != AP_ERR_INPUT || err.msg[0] == '\0' || strchr(err.msg, '\n')) abort();
    }
    return 0;
}
