/*
 * test_rtgrad.c - the runtime's gradients against finite differences, in the double-precision
 * build (aprt_double, -DAP_RT_DOUBLE): for small models of both formula families (RMSNorm +
 * SwiGLU + GQA + rotary + untied head; LayerNorm + GELU + biases + learned positions + tied
 * head; q/k/v biases only), every parameter tensor's analytical gradient (backward of one step's
 * global batch, all micro-batches) is put against the central difference
 * (L(w + e) - L(w - e)) / 2e of the loss, e = 1e-6, at several elements of each tensor, with and
 * without recomputation. In double precision the difference is accurate to ~1e-9 relative
 * (truncation e^2 ~ 1e-12, rounding 1e-16 / 1e-6), so a tolerance of 1e-6 relative catches any
 * wrong term while never failing on rounding.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifdef AP_NO_RUNTIME
int main(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "test_rtgrad: the runtime was not built (OpenBLAS or MPI missing); skipped\n");
    return 77;
}
#else
#include "autoplan/runtime.h"
#include "runtime/small_model.h"

/* One model and plan: analytical gradients of all tensors vs central differences at up to 4
 * elements of each. Returns the worst relative error. */
static double check_model(const ap_model *m, ap_recompute rc) {
    ap_rt_job j;
    ap_rt_job_init(&j);
    j.model = *m;
    j.plan.seq = 6;
    j.plan.mbs = 2;
    j.plan.gbs = 4;
    j.plan.grad_accum = 2;
    j.plan.recompute = rc;
    ap_err err = {{0}};
    ap_rt_session *s = NULL;
    ap_status st = ap_rt_session_new(&j, ap_rt_comm_self(), &s, &err);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        return 1;
    }
    int64_t n = ap_rt_param_count(m);
    double *w = malloc((size_t)n * sizeof *w), *g = malloc((size_t)n * sizeof *g);
    double loss0 = 0, worst = 0;
    CHECK(w && g);
    CHECK_INT(ap_rt_session_loss_grad(s, 0, &loss0, &err), AP_OK);
    CHECK_INT(ap_rt_session_gather(s, 0, w, &err), AP_OK);
    CHECK_INT(ap_rt_session_gather(s, 1, g, &err), AP_OK);
    /* the initial loss of a model whose logits are near zero is about ln V */
    CHECK_NEAR(loss0, log((double)m->vocab), 0.05);
    const double e = 1e-4;
    int nt = ap_rt_tensor_count(m), checked = 0;
    for (int t = 0; t < nt; t++) {
        ap_rt_tensor_info ti;
        ap_rt_tensor_at(m, t, &ti);
        int64_t size = ti.rows * ti.cols;
        for (int k = 0; k < 4 && k < size; k++) {
            /* spread the picks over the tensor: first, last, and two in between */
            int64_t idx = ti.offset + (k == 0 ? 0 : k == 1 ? size - 1 : (size * k) / 5);
            /* five-point stencil (f(-2e) - 8 f(-e) + 8 f(e) - f(2e)) / 12e: truncation O(e^4),
               rounding ~ulp(L)/e */
            double l[4] = {0, 0, 0, 0};
            static const double at[4] = {-2, -1, 1, 2};
            for (int q = 0; q < 4; q++) {
                ap_rt_session_set_param(s, idx, w[idx] + at[q] * e, &err);
                ap_rt_session_loss_grad(s, 0, &l[q], &err);
            }
            ap_rt_session_set_param(s, idx, w[idx], &err);
            double fd = (l[0] - 8 * l[1] + 8 * l[2] - l[3]) / (12 * e);
            double rel = fabs(fd - g[idx]) / fmax(fabs(fd), 1e-4);
            if (rel > worst) worst = rel;
            if (rel > 1e-6)
                fprintf(stderr, "  %s %s[%lld]: backward %.12g, finite difference %.12g (rel %.2g)\n",
                        m->name, ti.name, (long long)(idx - ti.offset), g[idx], fd, rel);
            checked++;
        }
    }
    CHECK(checked > 20);
    free(w);
    free(g);
    ap_rt_session_free(s);
    return worst;
}

static void test_gradients(void) {
    static const char *rcn[] = {"none", "selective", "full"};
    for (int fam = 0; fam < 2; fam++) {
        /* 2 layers, h 8, 4 heads of 2 (GQA with 2 kv heads for llama), sequence 6 */
        ap_model m;
        small_model(&m, fam == 0, 2, 8, 4, fam == 0 ? 2 : 4, fam == 0 ? 12 : 16, 16, 6);
        for (int rc = 0; rc < 3; rc++) {
            double worst = check_model(&m, (ap_recompute)rc);
            fprintf(stderr, "  %s recompute %s: worst relative error %.2g\n", m.name, rcn[rc],
                    worst);
            CHECK(worst < 1e-6);
        }
    }
    /* q/k/v biases alone (Qwen2) with a tied head and GQA */
    ap_model m;
    small_model(&m, 1, 2, 8, 4, 2, 12, 16, 6);
    m.qkv_bias = 1;
    m.tied_embeddings = 1;
    snprintf(m.name, sizeof m.name, "small-qwen");
    CHECK(check_model(&m, AP_RECOMPUTE_NONE) < 1e-6);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_gradients();
    return tl_finish();
}
#endif
