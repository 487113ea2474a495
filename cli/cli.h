/*
 * cli.h - the command-line layer (cli/): flag parsing shared by all subcommands (cli/args.c),
 * the subcommands (cli/cmd_*.c, dispatched by cli/main.c) and the printing helpers. Private to
 * cli/: the library (everything else) never parses argv, prints results or exits.
 *
 * A command declares a table of ap_flag; ap_flags_parse fills it from argv, refusing unknown
 * flags (with the closest known one), missing values, and a flag given twice with different
 * values. Values stay text until the command converts them with the unit parsers, so every error
 * names the flag. Commands return a process exit code (0 ok, 1 internal, 2 bad input); only
 * main() exits.
 *
 * The cluster and plan flags are common to estimate, plan, simulate, partition and compare:
 * ap_cli_cluster_flags() and ap_cli_plan_flags() append them, ap_cli_request() turns them into
 * an ap_request (request.h), which the library resolves into a model, cluster, plan and options.
 */
#ifndef AP_CLI_H
#define AP_CLI_H

#include "autoplan/db.h"
#include "autoplan/estimate.h"
#include "autoplan/json.h"
#include "autoplan/planio.h"
#include "autoplan/request.h"

typedef enum {
    AP_FLAG_BOOL = 0,  /* --x (no value) */
    AP_FLAG_VALUE      /* --x V or --x=V */
} ap_flag_kind;

typedef struct ap_flag {
    const char *name;  /* without dashes: "gpus" */
    ap_flag_kind kind;
    const char *meta;  /* value placeholder for help: "N", "SIZE" */
    const char *help;  /* one line, with units */
    /* filled by the parser */
    int set;
    const char *value; /* borrowed from argv */
} ap_flag;

#define AP_MAX_FLAGS 96
#define AP_MAX_POSITIONAL 8

typedef struct ap_flags {
    ap_flag f[AP_MAX_FLAGS];
    int n;
    const char *pos[AP_MAX_POSITIONAL];
    int npos;
} ap_flags;

/* Append a flag definition. */
void ap_flags_add(ap_flags *fl, const char *name, ap_flag_kind kind, const char *meta,
                  const char *help);
/* Parse argv[0..argc) (argv[0] is the first argument after the subcommand). Positional
 * arguments are collected up to max_pos. "--help"/"-h" sets *help. */
ap_status ap_flags_parse(ap_flags *fl, int argc, char **argv, int max_pos, int *help,
                         ap_err *err);
/* The flag record, or NULL when not defined. */
ap_flag *ap_flags_get(ap_flags *fl, const char *name);
int ap_flags_isset(ap_flags *fl, const char *name);
const char *ap_flags_value(ap_flags *fl, const char *name); /* NULL when not set */
/* Print "usage" then the table of flags, aligned, to stdout. */
void ap_flags_print_help(const ap_flags *fl, const char *usage, const char *description);

/* Typed getters that report errors as "--name: reason". They leave *out untouched when the
 * flag is not set and return AP_OK. */
ap_status ap_flag_int(ap_flags *fl, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      ap_err *err);
ap_status ap_flag_real(ap_flags *fl, const char *name, double lo, double hi, double *out,
                       ap_err *err);
ap_status ap_flag_bytes(ap_flags *fl, const char *name, double *out, ap_err *err);
ap_status ap_flag_bw(ap_flags *fl, const char *name, double *out, ap_err *err);

/* GPU counts as `--gpus` takes them (plan, compare): a count "8", a sweep "64..1024" (powers of
 * two from the first, then the last when it is not one of them; cut at AP_MAX_GPU_COUNTS) or a
 * list "64,128,512" (more than AP_MAX_GPU_COUNTS is an error). Each count 1..2^20. Fills
 * counts[0..*n); errors name --gpus. */
#define AP_MAX_GPU_COUNTS 32
ap_status ap_parse_gpu_counts(const char *s, int counts[AP_MAX_GPU_COUNTS], int *n, ap_err *err);
/* An output file of `flag` checked before the work that writes it (exit 2 when it cannot be
 * written there): a regular file or nothing at the path, in an existing writable directory. */
ap_status ap_cli_check_out_path(const char *flag, const char *path, ap_err *err);

/* Common flag groups. */
void ap_cli_cluster_flags(ap_flags *fl);   /* --gpu --gpus --gpus-per-node --nvlink-domain
                                              --network-bw --link-bw --pcie-bw --cpu-mem
                                              --cluster --profile */
void ap_cli_plan_flags(ap_flags *fl);      /* --trainer --tp --pp --cp --ep --etp --vp --mbs
                                              --gbs --seq --zero --recompute --recompute-layers
                                              --sp --no-sp --overlap --no-overlap
                                              --offload-optimizer --offload-params --dtype
                                              --no-flash-attn --attn-impl --stage-recompute
                                              --stage-layers --headroom */
/* --nccl-version V (plan flags, compare, fit), and its value: *eager set when given and
 * before 2.22 (ap_nccl_version_parse), left as it is when not given. */
void ap_cli_nccl_flag(ap_flags *fl);
ap_status ap_cli_nccl_version(ap_flags *fl, int *eager, ap_err *err);
/* The first flag of the cluster table (and of the plan table when plan_table) that `fl` sets
 * and `keep` (NULL-terminated, or NULL) does not name; NULL when none. Its name is the
 * table's (static storage). */
const char *ap_cli_set_flag(ap_flags *fl, int plan_table, const char *const *keep);
/* With --plan FILE: every flag of the two tables above that `fl` sets and is not named in
 * `keep` (NULL-terminated) is refused, AP_ERR_INPUT "--FLAG: not with --plan (the plan file
 * holds WHAT)"; the tables themselves, so a flag added there is covered. */
ap_status ap_cli_refuse_with_plan(ap_flags *fl, const char *const *keep, const char *what,
                                  ap_err *err);

/* The request the common flags describe (request.h): MODEL (positional 0), the cluster flags,
 * the plan flags (through the plan's field table, plan.h) and, where the command defines
 * them, --headroom --fix --tokens-per-step --top --no-prune --no-sp --no-overlap --solver.
 * counts NULL: --gpus is one count; else --gpus may be a sweep or a list (ap_parse_gpu_counts)
 * into counts[0..*ncounts) and rq->gpus is the first. Errors name the flag. */
ap_status ap_cli_request(ap_flags *fl, ap_request *rq, int *counts, int *ncounts, ap_err *err);

/* The cluster alone from the cluster flags (`fit` has no model): --cluster, --gpu, --gpus
 * (default 1 unless need_gpus), the links, --cpu-mem and --nvme/--nvme-bw, validated
 * (ap_request_cluster). */
ap_status ap_cli_load_cluster(ap_flags *fl, int need_gpus, ap_cluster *c, ap_err *err);

/* Human-readable breakdown to stdout. */
void ap_estimate_print(const ap_estimate *e, const ap_model *m, const ap_cluster *c);

/* Subcommands: each returns the exit code. argv[0] is the first argument after the name. */
int ap_cmd_info(int argc, char **argv);
int ap_cmd_gpus(int argc, char **argv);
int ap_cmd_estimate(int argc, char **argv);
int ap_cmd_plan(int argc, char **argv);
int ap_cmd_validate(int argc, char **argv);
int ap_cmd_simulate(int argc, char **argv);
int ap_cmd_partition(int argc, char **argv);
int ap_cmd_compare(int argc, char **argv);
int ap_cmd_emit(int argc, char **argv);
int ap_cmd_db(int argc, char **argv);
int ap_cmd_profile(int argc, char **argv);
int ap_cmd_fit(int argc, char **argv);
/* `simulate` of a plan with a Gemini placement or DeepSpeed offload devices (print_hetero.c):
 * traffic, time, GPU and host memory per operator; returns the exit code. */
int ap_cli_simulate_hetero(const ap_resolved *ctx, const char *trace, int json);

/* The kernel profile the estimates use (--profile, cli/args.c), applied to a resolved request:
 * --profile NAME (a measured profile in the database: --db when the command has it, else the
 * default path; it must be of the cluster's GPU), --profile none (published tables only), or by
 * default the newest measured profile of the cluster's GPU when the database has one (a
 * database that cannot be read is then a warning, not an error). Sets r->est and r->search.est
 * (profile and kernel tables, kept by args.c for the run); name gets the profile's name ("" for
 * the published tables), note one line saying which tables are in use and why. */
ap_status ap_cli_profile(ap_flags *fl, ap_resolved *r, char name[64], char note[320],
                         ap_err *err);
/* User text (a model name, a label read back from the cache) fit for the terminal: one line,
 * control and escape characters shown as '?' (ap_text_line). The result lives in one of 8
 * rotating static buffers of 512 bytes: valid until 8 more calls. */
const char *ap_cli_safe(const char *s);

/* The exit code of an emit (plan --emit, emit): 0 when every target named was written (with
 * "all": at least one), 2 when a named target refused the plan. */
struct ap_emit_report;
int ap_cli_emit_exit(const char *which, const struct ap_emit_report *rep);
int ap_cmd_run(int argc, char **argv);

/* Print the one-line error for a failed status to stderr ("autoplan: <msg>") and return the
 * exit code. */
int ap_cli_fail(ap_status st, const ap_err *err);

/* ---- helpers of the store commands (cli/cmd_db.c; also `autoplan profile`) ----------------- */

/* Add --db PATH. */
void ap_cli_db_flag(ap_flags *fl);
/* Parse argv for one subcommand: -1 to go on, else the exit code (0 after --help). */
int ap_cli_subparse(ap_flags *fl, int argc, char **argv, int max_pos, const char *usage,
                    const char *description);
/* Open --db (or the default) for reading. *missing = 1 (and AP_OK with *db NULL, err saying
 * so) when there is no file yet. */
ap_status ap_cli_db_open_ro(ap_flags *fl, ap_db **db, int *missing, ap_err *err);
/* A user string fit for a one-line message (ap_text_line, text.h). Returns buf. */
const char *ap_cli_shown(const char *s, char *buf, size_t n);
/* Write text to path atomically, or to standard output when path is NULL or "-" (`what` names
 * the command in the error). */
ap_status ap_cli_write_out(const char *path, const char *text, size_t len, const char *what,
                           ap_err *err);
/* An output file (`flag` PATH) that is the database of --db (or the default), under any name
 * (a link, another path): AP_ERR_INPUT, as writing it would replace the database. AP_OK for
 * NULL, "-", or a path that does not exist yet. */
ap_status ap_cli_check_not_db(ap_flags *fl, const char *flag, const char *path, ap_err *err);
/* "2025-11-21 04:40" (UTC) or "-" into buf. */
char *ap_cli_fmt_time(int64_t t, char *buf, size_t n);

/* The subcommands of `autoplan profile` (dispatched by cli/cmd_profile.c), one file per group:
 * list/export/import/delete/compare (cmd_profile_store.c), bench (cmd_profile_bench.c),
 * attach/check (cmd_profile_attach.c). */
int ap_cmd_profile_list(int argc, char **argv);
int ap_cmd_profile_export(int argc, char **argv);
int ap_cmd_profile_import(int argc, char **argv);
int ap_cmd_profile_delete(int argc, char **argv);
int ap_cmd_profile_compare(int argc, char **argv);
int ap_cmd_profile_bench(int argc, char **argv);
int ap_cmd_profile_attach(int argc, char **argv);
int ap_cmd_profile_check(int argc, char **argv);

#endif
