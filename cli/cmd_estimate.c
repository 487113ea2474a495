/*
 * cmd_estimate.c - `autoplan estimate`: memory per stage and step time of one given plan.
 * A plan the trainer cannot run is refused (exit 2, the rule named); a valid plan that does
 * not fit exits 0 with fits false.
 */
#include "cli.h"
#include "autoplan/hetero.h"

#include <stdio.h>
#include <stdlib.h>

int ap_cmd_estimate(int argc, char **argv) {
    static ap_flags fl;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    ap_cli_cluster_flags(&fl);
    ap_cli_plan_flags(&fl);
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "print the estimate as JSON (schema in README)");
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan estimate MODEL --gpus N [flags]",
                            "Predict per-GPU memory (per pipeline stage) and the step time of one "
                            "plan.\ndp = gpus / (tp * pp * cp); degrees not given are 1.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    static ap_request rq;
    static ap_resolved ctx;
    char profile[64], note[320];
    if ((st = ap_cli_request(&fl, &rq, NULL, NULL, &err)) != AP_OK ||
        (st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &ctx, &err)) != AP_OK ||
        (st = ap_cli_profile(&fl, &ctx, profile, note, &err)) != AP_OK)
        return ap_cli_fail(st, &err);
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
