/*
 * cmd_partition.c - `autoplan partition`: the optimal split of layers onto the pipeline stages
 * of one plan (partition.h), printed next to the baseline (the uniform split, or the split
 * given with --stage-layers): per-stage layers, time per micro-batch and device memory, the
 * pipeline time T the partitioner minimises and the cost model's whole step time of each, and
 * the best split Megatron's first/last-stage layer flags can express.
 */
#include "cli.h"
#include "autoplan/partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_split(const char *name, const ap_partition_result *r) {
    printf("%s ", name);
    for (int i = 0; i < r->nchunks; i++) printf("%s%d", i ? "," : "", r->stage_layers[i]);
    printf("\n");
}

/* The baseline, the best split moving only the first and last stage (Megatron's
 * --decoder-first/last-pipeline-num-layers) under the plan's recompute, and the optimum; then
 * the flags that give the optimum. ub NULL: the baseline did not evaluate (berr says why). */
static void print_summary(const ap_model *m, const ap_cluster *c, const ap_plan *base,
                          const ap_partition_opts *o, const char *base_name,
                          const ap_partition_result *ub, const ap_err *berr,
                          const ap_partition_result *opt) {
    static ap_partition_result flr;
    ap_partition_opts ofl = *o;
    ofl.first_last_only = 1;
    ofl.choose_recompute = 0;
    ofl.choose_mode = 0;
    ofl.choose_offload = 0;
    ofl.solver = AP_SOLVER_DP;
    ap_err ferr = {{0}};
    ap_status fst = base->vp > 1 ? AP_ERR_INPUT /* the flags move stages, not chunks */
                                : ap_partition_solve(m, c, base, &ofl, &flr, &ferr);
    const ap_partition_result *col[3] = {ub, fst == AP_OK ? &flr : NULL,
                                         opt};
    printf("\n             %-12s %-12s %-12s\n", base_name, "first/last", "optimal");
    const char *rows[4] = {"pipeline T", "step time", "peak memory", "fits"};
    for (int i = 0; i < 4; i++) {
        printf("%-12s", rows[i]);
        for (int k = 0; k < 3; k++) {
            const ap_partition_result *r = col[k];
            char v[32] = "-";
            if (r && i == 0) ap_fmt_seconds(r->pipe_s, v, sizeof v);
            if (r && i == 1) ap_fmt_seconds(r->step_s, v, sizeof v);
            if (r && i == 2) ap_fmt_bytes(r->peak_device_bytes, v, sizeof v);
            if (r && i == 3) snprintf(v, sizeof v, "%s", r->fits ? "yes" : "NO");
            printf(" %-12s", v);
        }
        if (col[0] && i < 2) {
            double a = i == 0 ? col[0]->pipe_s : col[0]->step_s;
            double b = i == 0 ? opt->pipe_s : opt->step_s;
            printf(" (%+.1f%% vs %s)", 100.0 * (b / a - 1.0), base_name);
        }
        printf("\n");
    }
    if (!ub) printf("%s split: %s\n", base_name, berr->msg);
    if (fst == AP_OK) {
        printf("%-13s", "first/last");
        for (int r = 0; r < flr.pp; r++) printf("%s%d", r ? "," : "", flr.stage_layers[r]);
        printf("\n");
    }
    printf("\n");
    print_split("--stage-layers", opt);
    if (o->choose_recompute) {
        printf("--recompute %s\n", ap_recompute_name(opt->recompute));
    }
    if (o->choose_recompute && opt->recompute == AP_RECOMPUTE_FULL && opt->stage_recompute[0] <= 0 &&
        opt->recompute_layers > 0)
        printf("--recompute-layers %d\n", opt->recompute_layers);
    if (o->choose_offload) {
        if (opt->offload_optimizer > 0) printf("--offload-optimizer %g\n", opt->offload_optimizer);
        if (opt->offload_params > 0) printf("--offload-params %g\n", opt->offload_params);
    }
    if (!opt->fits) printf("no split fits: shown is the one with the least peak memory\n");
}

static void add_flags(ap_flags *fl) {
    ap_cli_cluster_flags(fl);
    ap_cli_plan_flags(fl);
    ap_flags_add(fl, "solver", AP_FLAG_VALUE, "dp|ilp|auto",
                 "dp: dynamic programming; ilp: GLPK integer program (falls back to dp); auto: dp, "
                 "exact here also with the recompute and offload choices, which every trainer "
                 "makes plan-wide (default auto)");
    ap_flags_add(fl, "node-limit", AP_FLAG_VALUE, "N",
                 "branch-and-bound nodes of one ILP solve (default 20000; a count, not a time, "
                 "so the answer does not depend on the machine)");
    ap_flags_add(fl, "min-layers", AP_FLAG_VALUE, "N", "layers per stage at least (default 1)");
    ap_flags_add(fl, "choose-recompute", AP_FLAG_BOOL, NULL,
                 "also choose the recompute granularity (none, selective, full: those the trainer "
                 "has) and with full the recomputed layers (per stage where the trainer allows "
                 "it, else one count for all stages); --recompute is then ignored");
    ap_flags_add(fl, "choose-offload", AP_FLAG_BOOL, NULL,
                 "also choose the CPU offload fractions of optimizer states and, where the trainer "
                 "allows it (ZeRO-3), parameters, under GPU memory per stage and CPU memory per "
                 "node (--cpu-mem); --offload-optimizer/--offload-params are then ignored");
    ap_flags_add(fl, "offload-fractions", AP_FLAG_VALUE, "LIST",
                 "the fractions --choose-offload tries, comma-separated, at most 8 "
                 "(default 0,0.25,0.5,0.75,1)");
}

/* --offload-fractions 0,0.5,1 (with --choose-offload) */
static ap_status offload_fractions(ap_flags *fl, ap_partition_opts *o, ap_err *err) {
    const char *v = ap_flags_value(fl, "offload-fractions");
    if (!v) return AP_OK;
    if (!o->choose_offload)
        return ap_err_set(err, AP_ERR_INPUT, "--offload-fractions needs --choose-offload (the "
                          "fractions it tries)");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    size_t len = strlen(buf);
    if (len == 0 || buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))
        return ap_err_set(err, AP_ERR_INPUT, "--offload-fractions: empty item in '%s'", buf);
    o->noffload_fracs = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (o->noffload_fracs == 8)
            return ap_err_set(err, AP_ERR_INPUT, "--offload-fractions: at most 8 fractions");
        ap_status st = ap_parse_real(tok, "--offload-fractions", 0, 1,
                                     &o->offload_fracs[o->noffload_fracs], err);
        if (st != AP_OK) return st;
        o->noffload_fracs++;
    }
    return AP_OK;
}

/* The partitioner's options from the flags. */
static ap_status partition_opts(ap_flags *fl, const ap_estimate_opts *est, ap_partition_opts *o,
                                ap_err *err) {
    ap_status st;
    ap_partition_opts_init(o);
    o->est = *est;
    if (ap_flags_isset(fl, "solver") &&
        (st = ap_solver_parse(ap_flags_value(fl, "solver"), &o->solver, err)) != AP_OK) {
        ap_err_prefix(err, "--solver");
        return st;
    }
    int64_t nodes = o->ilp_node_limit;
    if ((st = ap_flag_int(fl, "node-limit", 1, 1000000000, &nodes, err)) != AP_OK) return st;
    o->ilp_node_limit = (long)nodes;
    int64_t ml = 1;
    if ((st = ap_flag_int(fl, "min-layers", 1, 100000, &ml, err)) != AP_OK) return st;
    o->min_layers = (int)ml;
    o->choose_recompute = ap_flags_isset(fl, "choose-recompute");
    o->choose_mode = o->choose_recompute;
    o->choose_offload = ap_flags_isset(fl, "choose-offload");
    return offload_fractions(fl, o, err);
}

int ap_cmd_partition(int argc, char **argv) {
    static ap_flags fl;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    add_flags(&fl);
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan partition MODEL --gpus N --pp P [flags]",
                            "Split the layers unevenly across the pipeline stages to minimise the "
                            "1F1B pipeline time\nsum(t_f+t_b) + (m-1) max(t_f+t_b) with every "
                            "stage fitting memory; compare with the\nuniform split (or "
                            "--stage-layers). Interleaved plans (--vp): per-rank totals, spread "
                            "evenly over the\nrank's chunks. --choose-recompute and "
                            "--choose-offload add the plan-wide recompute granularity\nand "
                            "offload fractions to the choice (objective: T + optimizer and "
                            "offload time).");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    static ap_request rq;
    static ap_resolved ctx;
    char profile[64], note[320];
    ap_partition_opts o;
    if ((st = ap_cli_request(&fl, &rq, NULL, NULL, &err)) != AP_OK ||
        (st = ap_request_resolve(&rq, AP_REQUEST_ESTIMATE, &ctx, &err)) != AP_OK ||
        (st = ap_cli_profile(&fl, &ctx, profile, note, &err)) != AP_OK ||
        (st = partition_opts(&fl, &ctx.est, &o, &err)) != AP_OK)
        return ap_cli_fail(st, &err);

    const ap_model *m = &ctx.model;
    ap_plan base = ctx.plan;
    if ((st = ap_plan_check(&base, m, &ctx.cluster, ctx.allow_cross_node_tp, &err)) != AP_OK)
        return ap_cli_fail(st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st, &err);
    /* the baseline: the given --stage-layers, else the uniform split */
    static int layers[AP_MAX_CHUNKS];
    const char *base_name = base.nchunks ? "given" : "uniform";
    for (int i = 0; i < base.pp * base.vp; i++)
        layers[i] = ap_plan_chunk_layers(&base, m->layers, i);
    static ap_partition_result ub, opt;
    ap_err berr = {{0}};
    ap_status bst = ap_partition_eval(m, &ctx.cluster, &base, &o.est, layers, NULL, &ub, &berr);
    if ((st = ap_partition_solve(m, &ctx.cluster, &base, &o, &opt, &err)) != AP_OK)
        return ap_cli_fail(st, &err);

    char lb[160], b1[32], b2[32], b3[32], b4[32];
    printf("plan      %s  (%s, %lld micro-batches, %d x %s)\n", ap_plan_label(&base, lb, sizeof lb),
           ap_trainer_get(base.trainer)->display, (long long)opt.micro_batches, ctx.cluster.gpus,
           ctx.cluster.gpu.name);
    printf("solver    %s%s, %s, %ld cost-model evaluations, %s\n", ap_solver_name(opt.solver),
           opt.fell_back ? " (fallback)" : "", opt.optimal ? "optimal" : "not proven optimal",
           opt.evals, ap_fmt_seconds(opt.solve_s, b1, sizeof b1));
    if (opt.note[0]) printf("note      %s\n", opt.note);
    if (o.choose_recompute) {
        printf("recompute %s", ap_recompute_name(opt.recompute));
        if (opt.recompute == AP_RECOMPUTE_FULL) {
            if (opt.stage_recompute[0] > 0) {
                printf(", layers per stage ");
                for (int r = 0; r < opt.pp; r++)
                    printf("%s%d", r ? "," : "", opt.stage_recompute[r]);
            } else if (opt.recompute_layers > 0) {
                printf(", %d layer(s) in every stage", opt.recompute_layers);
            } else {
                printf(", all layers");
            }
        }
        printf(" (optimal of %d variants)\n", opt.variants);
    }
    if (o.choose_offload)
        printf("offload   optimizer states %.0f%%, parameters %.0f%%; host %s per node of %s "
               "(optimal)\n", 100 * opt.offload_optimizer, 100 * opt.offload_params,
               ap_fmt_bytes(opt.host_bytes_per_node, b1, sizeof b1),
               ap_fmt_bytes(ctx.cluster.cpu_mem_bytes, b2, sizeof b2));
    printf("\n          %-30s  %s\n", base_name, "optimal");
    printf("%-8s  layers  t_f+t_b    device     layers  t_f+t_b    device\n",
           base.vp > 1 ? "rank" : "stage");
    for (int r = 0; r < base.pp; r++) {
        if (bst == AP_OK)
            printf("  %-6d  %6d  %-9s  %-9s", r, ub.rank_layers[r],
                   ap_fmt_seconds(ub.stage_s[r], b1, sizeof b1),
                   ap_fmt_bytes(ub.stage_device_bytes[r], b2, sizeof b2));
        else
            printf("  %-6d  %6s  %-9s  %-9s", r, "-", "-", "-");
        printf("  %6d  %-9s  %s\n", opt.rank_layers[r],
               ap_fmt_seconds(opt.stage_s[r], b3, sizeof b3),
               ap_fmt_bytes(opt.stage_device_bytes[r], b4, sizeof b4));
    }
    print_summary(m, &ctx.cluster, &base, &o, base_name, bst == AP_OK ? &ub : NULL, &berr, &opt);
    return 0;
}
