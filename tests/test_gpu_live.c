/*
 * test_gpu_live.c - the GPU paths on a real device: `autoplan profile bench` (launch, copies,
 * memory-bound kernels, a few GEMMs) and `autoplan profile attach` tracing autoplan's own
 * benchmark through CUPTI. Exits 77 (skipped) where there is no GPU module (a build without
 * CUDA) or no CUDA device, as on CI machines; it is the test to run on a machine with a GPU.
 */
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/db.h"
#include "autoplan/profiler.h"

int main(int argc, char **argv) {
    tl_init(argc, argv);
    const ap_gpubench_api *api = NULL;
    ap_err e;
    if (ap_gpubench_load(&api, &e) != AP_OK) {
        printf("skipped: %s\n", e.msg);
        return 77;
    }
    ap_profile_row id;
    if (api->identify(0, NULL, &id, &e) != AP_OK) {
        printf("skipped: %s\n", e.msg);
        return 77;
    }
    printf("device 0: %s (%s), driver %s, CUDA %s\n", id.device_name, id.gpu, id.driver_version,
           id.cuda_version);
    const char *dir = tl_tmpdir();
    char args[1024], *out = NULL, *err = NULL, prof[512];
    snprintf(prof, sizeof prof, "%s/live.json", dir);
    /* a quick bench: rows of each group, valid, with their median and spread */
    snprintf(args, sizeof args, "profile bench --quick --what launch,copy,membound,gemm --dtypes bf16 "
             "--no-store --output %s", prof);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "launch");
    CHECK_CONTAINS(out, "gemm bf16");
    ap_profile p;
    ap_profile_init(&p);
    char *text = NULL;
    size_t len = 0;
    CHECK_INT(ap_read_file(prof, 1 << 26, &text, &len, &e), AP_OK);
    if (text) CHECK_INT(ap_db_profile_parse_json(text, len, prof, NULL, &p, &e), AP_OK);
    static const char *const ops[] = {"launch", "memcpy", "membound", "gemm"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        size_t n = 0;
        for (size_t i = 0; i < p.n; i++)
            n += !strcmp(p.rows[i].op, ops[k]) && p.rows[i].samples >= 20 && p.rows[i].time_s > 0;
        CHECK(n > 0);
    }
    ap_profile_free(&p);
    free(out);
    free(err);
    out = err = NULL;
    /* attach traces autoplan's own benchmark: its kernels and copies appear */
    snprintf(args, sizeof args, "profile attach --top 5 -- %s profile bench --quick --what "
             "launch,copy --no-store", tl_bin);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "exited 0");
    CHECK_CONTAINS(out, "k_empty");
    CHECK_CONTAINS(out, "h2d");
    free(text);
    free(out);
    free(err);
    return tl_finish();
}
