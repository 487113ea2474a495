/*
 * fuzz_cluster.c - libFuzzer target for the cluster-file reader (ap_cluster_parse).
 *
 * Any input must come back as AP_OK or AP_ERR_INPUT with a one-line message naming the file, with
 * no crash and no sanitizer report; a cluster that parses must also pass ap_cluster_validate and
 * be fingerprintable. Seed corpus: examples/clusters/. Build with -DAP_FUZZ=ON (clang), run e.g.
 *   ./build-fuzz/fuzz_cluster -max_total_time=60 examples/clusters
 */
#include "autoplan/hw.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ap_cluster c;
    ap_err err;
    memset(&err, 0, sizeof err);
    ap_log_set_level(AP_LOG_QUIET);
    ap_status st = ap_cluster_parse((const char *)data, size, "fuzz.json", &c, &err);
    if (st == AP_OK) {
        ap_err verr;
        memset(&verr, 0, sizeof verr);
        if (ap_cluster_validate(&c, "fuzz.json", &verr) != AP_OK) {
            fprintf(stderr, "parsed cluster fails validation: %s\n", verr.msg);
            abort();
        }
        (void)ap_cluster_fingerprint(&c);
        return 0;
    }
    if (st != AP_ERR_INPUT || strncmp(err.msg, "fuzz.json", 9) != 0 || strchr(err.msg, '\n')) {
        fprintf(stderr, "unexpected status %d or message: %s\n", (int)st, err.msg);
        abort();
    }
    return 0;
}
