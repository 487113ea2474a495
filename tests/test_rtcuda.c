/*
 * test_rtcuda.c - the runtime's CUDA backend (runtime/kernels_cuda.cu, comm_nccl.c) on a GPU:
 * one rank trains the same job on the GPU and on the CPU; the losses agree within 1e-4
 * relative and the parameters within 1e-3 after 5 steps (fp32 kernels of different summation
 * order; cuBLAS in pedantic fp32 mode, no TF32), and the GPU rank's tracked memory equals the
 * simulator's prediction exactly (the same layout, requested bytes). Exits 77 (skipped) where the
 * build has no CUDA backend or no GPU is visible, as every GPU test does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifdef AP_NO_RUNTIME
int main(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "test_rtcuda: the runtime was not built; skipped\n");
    return 77;
}
#else
#include "autoplan/runtime.h"

static int train(const ap_rt_job *j, double *loss, double *params, ap_rt_report *r) {
    ap_err err = {{0}};
    ap_rt_session *s = NULL;
    ap_status st = ap_rt_session_new(j, ap_rt_comm_self(), &s, &err);
    if (st == AP_OK) st = ap_rt_session_train(s, r, &err);
    if (st == AP_OK) st = ap_rt_session_gather(s, 0, params, &err);
    if (st == AP_OK) memcpy(loss, r->loss, (size_t)j->steps * sizeof *loss);
    if (st != AP_OK) fprintf(stderr, "  %s: %s\n", j->backend, err.msg);
    ap_rt_session_free(s);
    return st == AP_OK ? 0 : -1;
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    ap_err err = {{0}};
    if (!ap_rt_cuda_available(&err)) {
        fprintf(stderr, "test_rtcuda: %s; skipped\n", err.msg);
        return 77;
    }
    const char *models[] = {"examples/models/tiny-llama.json", "examples/models/tiny-gpt.json"};
    for (int mi = 0; mi < 2; mi++) {
        ap_rt_job j;
        ap_rt_job_init(&j);
        CHECK_INT(ap_model_load(tl_path(models[mi]), &j.model, &err), AP_OK);
        j.plan.seq = 32;
        j.plan.mbs = 2;
        j.plan.gbs = 4;
        j.plan.grad_accum = 2;
        j.plan.recompute = mi ? AP_RECOMPUTE_FULL : AP_RECOMPUTE_SELECTIVE;
        j.plan.offload_optimizer = 0.5;
        int64_t n = ap_rt_param_count(&j.model);
        double lc[5], lg[5], *pc = malloc((size_t)n * sizeof *pc), *pg = malloc((size_t)n * sizeof *pg);
        ap_rt_report rc, rg;
        memset(&rc, 0, sizeof rc);
        memset(&rg, 0, sizeof rg);
        CHECK(train(&j, lc, pc, &rc) == 0);
        snprintf(j.backend, sizeof j.backend, "cuda");
        CHECK(train(&j, lg, pg, &rg) == 0);
        for (int i = 0; i < 5; i++) CHECK_NEAR(lg[i], lc[i], 1e-4);
        double worst = 0;
        for (int64_t k = 0; k < n; k++) worst = fmax(worst, fabs(pg[k] - pc[k]));
        fprintf(stderr, "  %s: parameters within %.2g of the CPU run\n", models[mi], worst);
        CHECK(worst < 1e-3);
        ap_rt_prediction pr;
        CHECK_INT(ap_rt_predict(&j.model, &j.plan, NULL, &pr, &err), AP_OK);
        if (rg.nranks == 1) {
            CHECK_INT(rg.ranks[0].peak_bytes, pr.stages[0].peak_bytes);
            for (int c = 0; c < AP_RT_NCAT; c++)
                CHECK_INT(rg.ranks[0].peak_cat_bytes[c], pr.stages[0].peak_cat_bytes[c]);
        }
        ap_rt_report_free(&rc);
        ap_rt_report_free(&rg);
        free(pc);
        free(pg);
    }
    return tl_finish();
}
#endif
