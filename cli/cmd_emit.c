/*
 * cmd_emit.c - `autoplan emit --plan plan.json --emit LIST --out DIR`: trainer configs from a
 * saved plan (plan.json holds the model, cluster and estimate, so nothing else is needed).
 *
 * Prints one line per file written to stdout and one line per refused target to stderr (the
 * reason and the closest plan that target can express). Exit status (README): 0 when every
 * target named was written (with "all": at least one), 2 when a named target refused the plan
 * (the others are written) or on bad input, 1 on an I/O failure.
 *
 * plan.json's "estimate", which the configs' headers quote, is checked against the file's plan
 * and cluster by the reader (ap_planfile_read); a run that writes nothing leaves no directory
 * it made (ap_outset_abort, files.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "autoplan/emit.h"
#include "autoplan/planio.h"

int ap_cmd_emit(int argc, char **argv) {
    static const char usage[] = "autoplan emit --plan plan.json --emit LIST --out DIR";
    static const char description[] =
        "Write trainer configuration files for a saved plan. LIST is a comma-separated subset of\n"
        "deepspeed (ds_config.json, ds_config_hf.json, deepspeed_launch.sh), megatron\n"
        "(megatron.sh), colossalai (colossalai_booster.py), torchtitan (torchtitan.toml, v0.2.2)\n"
        "and accelerate (accelerate.yaml), or all. A target that cannot express the plan is\n"
        "skipped with the reason and the closest plan it can express; the others are written.\n"
        "Exit status: 0 if every target named was written (with all: at least one), 2 if a named\n"
        "target refused the plan (the others are written) or on bad input, 1 on I/O failure.";
    ap_flags fl;
    memset(&fl, 0, sizeof fl);
    ap_flags_add(&fl, "plan", AP_FLAG_VALUE, "FILE", "plan.json written by `autoplan plan --out`");
    ap_flags_add(&fl, "emit", AP_FLAG_VALUE, "LIST",
                 "deepspeed,megatron,colossalai,torchtitan,accelerate or all (default all)");
    ap_flags_add(&fl, "out", AP_FLAG_VALUE, "DIR", "output directory, created if missing");
    int help = 0;
    ap_err err;
    err.msg[0] = '\0';
    ap_status st = ap_flags_parse(&fl, argc, argv, 0, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, usage, description);
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    const char *plan = ap_flags_value(&fl, "plan");
    const char *out = ap_flags_value(&fl, "out");
    const char *which = ap_flags_value(&fl, "emit");
    if (!plan) return ap_cli_fail(ap_err_set(&err, AP_ERR_INPUT, "--plan FILE is required (%s)",
                                             usage), &err);
    if (!out) return ap_cli_fail(ap_err_set(&err, AP_ERR_INPUT, "--out DIR is required (%s)",
                                            usage), &err);
    if (!which) which = "all";

    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_json *est = NULL;
    st = ap_planfile_read(plan, &m, &c, &p, &est, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_emit_report rep;
    st = ap_emit_files_ex(out, which, &m, &c, &p, est, &rep, &err);
    ap_json_free(est);
    int requested = 0;
    for (int t = 0; t < AP_EMIT_COUNT; t++) requested += rep.requested[t];
    if (!requested || (st != AP_OK && st != AP_ERR_INFEASIBLE))
        return ap_cli_fail(st, &err); /* the list, the directory or a file was refused */
    for (int t = 0; t < AP_EMIT_COUNT; t++) {
        if (!rep.requested[t]) continue;
        if (rep.status[t] == AP_OK) {
            printf("%s: wrote %s in %s\n", ap_emit_target_name((ap_emit_target)t), rep.files[t],
                   ap_cli_safe(out));
            if (rep.msg[t][0]) printf("%s: note: %s\n", ap_emit_target_name((ap_emit_target)t),
                                      ap_cli_safe(rep.msg[t]));
        } else {
            fprintf(stderr, "autoplan: %s\n", ap_cli_safe(rep.msg[t]));
        }
    }
    return ap_cli_emit_exit(which, &rep);
}
