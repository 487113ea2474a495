/*
 * cmd_estimate.c - `autoplan estimate`: memory per stage and step time of one given plan.
 * A plan the trainer cannot run is refused (exit 2, the rule named); a valid plan that does
 * not fit exits 0 with fits false.
 */
#include "cli.h"
#include "autoplan/hetero.h"

#include <stdio.h>
#include <stdlib.h>

/* --dp N: the data-parallel degree the run reports. Without --gpus (and without a cluster file
 * that counts them) it sets the GPUs, dp x tp x pp x cp; with them it must be what they give. */
static ap_status dp_flag(ap_flags *fl, ap_request *rq, int64_t *dp, ap_err *err) {
    *dp = 0;
    if (!ap_flags_isset(fl, "dp")) return AP_OK;
    ap_status st = ap_flag_int(fl, "dp", 1, 1 << 20, dp, err);
    if (st != AP_OK) return st;
    int64_t rest = (int64_t)rq->plan.tp * rq->plan.pp * rq->plan.cp;
    if (!rq->gpus.given && !rq->cluster_file) {
        if (*dp * rest > (1 << 20))
            return ap_err_set(err, AP_ERR_INPUT, "--dp %lld x tp %d x pp %d x cp %d is more than "
                              "%d GPUs", (long long)*dp, rq->plan.tp, rq->plan.pp, rq->plan.cp,
                              1 << 20);
        rq->gpus.given = 1;
        rq->gpus.v = *dp * rest;
    }
    return AP_OK;
}

int ap_cmd_estimate(int argc, char **argv) {
    static ap_flags fl;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    ap_cli_cluster_flags(&fl);
    ap_cli_plan_flags(&fl);
    ap_flags_add(&fl, "dp", AP_FLAG_VALUE, "N",
                 "data-parallel degree: checked against gpus / (tp * pp * cp), or without "
                 "--gpus the GPUs are dp * tp * pp * cp");
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print the estimate as JSON (schema in README)");
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan estimate MODEL (--gpus N | --dp N) [flags]",
                            "Predict per-GPU memory (per pipeline stage) and the step time of one "
                            "plan.\ndp = gpus / (tp * pp * cp); degrees not given are 1.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    static ap_request rq;
    static ap_resolved ctx;
    char profile[64], note[320];
    int64_t dp;
    if ((st = ap_cli_request(&fl, &rq, NULL, NULL, &err)) != AP_OK ||
        (st = dp_flag(&fl, &rq, &dp, &err)) != AP_OK ||
        (st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &ctx, &err)) != AP_OK ||
        (st = ap_cli_profile(&fl, &ctx, profile, note, &err)) != AP_OK)
        return ap_cli_fail(st, &err);
    if (dp && dp != ctx.plan.dp)
        return ap_cli_fail(ap_err_set(&err, AP_ERR_INPUT, "--dp %lld: %d GPUs / (tp %d x pp %d x "
                                      "cp %d) give dp %d", (long long)dp, ctx.cluster.gpus,
                                      ctx.plan.tp, ctx.plan.pp, ctx.plan.cp, ctx.plan.dp),
                           &err);
    if ((st = ap_plan_check(&ctx.plan, &ctx.model, &ctx.cluster, ctx.allow_cross_node_tp,
                            &err)) != AP_OK)
        return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    static ap_estimate e;
    /* Gemini placements and DeepSpeed offload devices: the operator-by-operator simulation */
    if (ap_hetero_applies(&ctx.plan))
        st = ap_hetero_estimate(&ctx.model, &ctx.cluster, &ctx.plan, &ctx.est, NULL, &e, &err);
    else
        st = ap_estimate_plan(&ctx.model, &ctx.cluster, &ctx.plan, &ctx.est, &e, &err);
    if (st != AP_OK) return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    if (ap_flags_isset(&fl, "json")) {
        ap_json *j = ap_estimate_to_json(&e, &ctx.model);
        if (j && profile[0]) ap_json_add_string(j, "kernel_profile", profile);
        char *s = j ? ap_json_print(j, 1) : NULL;
        ap_json_free(j);
        if (!s) {
            fprintf(stderr, "autoplan: out of memory\n");
            return 1;
        }
        printf("%s\n", s);
        free(s);
    } else {
        ap_estimate_print(&e, &ctx.model, &ctx.cluster);
        printf("%s\n", note);
    }
    return 0;
}
