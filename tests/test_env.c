/*
 * test_env.c - user input and the environment at the edges of the database, profile, run and
 * top-level commands: each check runs the built autoplan and compares the exit code, a
 * distinctive part of the one-line message, and what is left on disk (nothing created or
 * replaced by a refused command). One test per bug fixed:
 *
 *   - a failed write to standard output reported once (db export > /dev/full);
 *   - the default database directory under a regular file named as such (not "Success");
 *   - control characters: a run's host refused on import, a profile's host refused where it
 *     is written, a device's text printed on one line;
 *   - an output path that is the database refused (it was replaced by the export);
 *   - `db list --gpu` resolves aliases and refuses an unknown GPU;
 *   - run: --timeout below 1 s, and plan/cluster flags run cannot honour, refused;
 *   - profile bench: sizes and --output checked before anything is measured or stored;
 *   - profile attach/check: output paths checked before the program runs, a FIFO at
 *     --keep-trace never removed, bad tracer flags a refusal instead of an abort;
 *   - profile export/delete against a database that does not exist (exit 2, none created);
 *   - `autoplan help COMMAND`, `--version ARG`, `profile help`.
 *
 * Nothing here needs root, a GPU or MPI: every refusal happens before ranks or programs start.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autoplan/profiler.h"
#include "testlib.h"

static const char *dir;

static const char *path_in(const char *name) {
    static char buf[16][600];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Run the command `fmt` formats and check exit 2 with `want` in its error. */
__attribute__((format(printf, 2, 3))) static void run_refused(const char *want, const char *fmt,
                                                              ...) {
    char args[4096], *out = NULL, *err = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = tl_vrun(args, sizeof args, fmt, ap, &out, &err);
    va_end(ap);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err, want);
    free(out);
    free(err);
}


static int exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

static int lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Run the binary with args and the shell redirections in `redir` (stdout elsewhere); stderr
 * captured. Returns the exit code. */
static int run_redirected(const char *args, const char *redir, char **err) {
    const char *errf = path_in("stderr.txt");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s </dev/null %s 2>'%s'", tl_bin, args, redir, errf);
    int st = system(cmd);
    *err = tl_read(errf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A one-row profile file as `profile export` writes it, with device field `field` = value
 * (a JSON string body). */
static void write_profile(const char *path, const char *field, const char *value) {
    char dev[512] = "";
    const char *fields[] = {"device_name", "driver_version", "host"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        size_t l = strlen(dev);
        snprintf(dev + l, sizeof dev - l, "%s\"%s\": \"%s\"", i ? ", " : "", fields[i],
                 field && !strcmp(field, fields[i]) ? value : "x");
    }
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\": \"autoplan-profile\", \"format_version\": 1, \"name\": \"envp\", "
             "\"gpu\": \"h100-sxm\", \"device\": {%s, \"mig_mode\": \"off\"}, \"rows\": [{\"op\": "
             "\"host_membw\", \"shape\": \"kind=copy,bytes=67108864\", \"dtype\": \"none\", "
             "\"time_s\": 0.0038465649959107395, \"bytes_per_s\": 17446439634.152298, "
             "\"bytes\": 67108864, \"samples\": 20, \"spread\": 0.25}]}\n", dev);
    CHECK(tl_write(path, text) == 0);
}

/* A database export holding one run whose host is `host` (a JSON string body). */
static void write_export(const char *path, const char *host) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"runs\": [{\"host\": "
             "\"%s\", \"backend\": \"cpu\", \"started_at\": 1700000000, \"ranks\": 1, "
             "\"predicted_step_s\": 1, \"measured_step_s\": 1.1, \"predicted_peak_bytes\": 1e6, "
             "\"measured_peak_bytes\": 1e6, \"plan_json\": \"{}\", \"per_rank\": []}]}\n", host);
    CHECK(tl_write(path, text) == 0);
}

/* `db export > /dev/full`: exit 1 and one line saying which write failed and why (main's
 * check of standard output used to add a second line). */
static void test_stdout_full_one_line(void) {
    if (access("/dev/full", W_OK) != 0) return;
    const char *db = path_in("full.db"), *exp = path_in("full-export.json");
    write_export(exp, "node-a");
    char args[1500], *err = NULL;
    free(tl_run_ok("db import '%s' --db '%s'", exp, db));
    const char *cmds[] = {"db export --db '%s'", "db export --csv --table runs --db '%s'"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(args, sizeof args, cmds[i], db);
        CHECK_INT(run_redirected(args, ">/dev/full", &err), 1);
        CHECK_CONTAINS(err, "db export: writing standard output failed: No space left");
        CHECK_INT(lines(err), 1);
        free(err);
    }
    /* a command that succeeded still reports the failed write, once */
    CHECK_INT(run_redirected("gpus", ">/dev/full", &err), 1);
    CHECK_CONTAINS(err, "writing standard output failed");
    CHECK_INT(lines(err), 1);
    free(err);
}

/* XDG_CACHE_HOME/autoplan is a regular file: the default directory cannot be made, and the
 * message says why (it said "Success": a stale errno). */
static void test_default_dir_is_file(void) {
    const char *xdg = path_in("xdg");
    CHECK(mkdir(xdg, 0700) == 0);
    char f[700];
    snprintf(f, sizeof f, "%s/autoplan", xdg);
    CHECK(tl_write(f, "not a directory\n") == 0);
    const char *exp = path_in("xdg-export.json");
    write_export(exp, "node-a");
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", xdg, 1);
    char args[700], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "db import '%s'", exp);
    CHECK_INT(tl_run(args, &out, &err), 1);
    CHECK_CONTAINS(err, "cannot create the database directory: Not a directory");
    CHECK(err && !strstr(err, "Success"));
    free(out);
    free(err);
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
}

/* Control characters in the text `profile list`, `db list` and `db show` print: a run's host
 * or backend is refused on import (it was stored, and printed raw: a newline broke the table, an
 * escape sequence reached the terminal), a profile file's host is refused where it is written
 * ("device", not "rows[0]"), and a device field the driver reported (which `db import` keeps
 * as it was, for a lossless round trip) is shown on one line with '?' for each. */
static void test_control_characters(void) {
    const char *db = path_in("ctl.db"), *f = path_in("ctl.json");
    char args[1500], *out = NULL, *err = NULL;
    write_profile(f, "host", "a\\nb");
    snprintf(args, sizeof args, "profile import '%s' --db '%s'", f, db);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "ctl.json: device: field 'host' contains a control character");
    CHECK(!exists(db));
    free(out);
    free(err);
    write_export(f, "node\\u001b[31m-a");
    snprintf(args, sizeof args, "db import '%s' --db '%s'", f, db);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "ctl.json: runs[0]: field 'host' contains a control character");
    CHECK_INT(lines(err), 1);
    CHECK(!exists(db));
    free(out);
    free(err);
    write_profile(f, "driver_version", "575\\n\\u001b[2J");
    free(tl_run_ok("profile import '%s' --db '%s'", f, db));
    const char *shows[][2] = {{"profile list", "575??[2J"}, {"db show profile:1", "575??[2J"}};
    for (size_t i = 0; i < sizeof shows / sizeof shows[0]; i++) {
        snprintf(args, sizeof args, "%s --db '%s'", shows[i][0], db);
        CHECK_INT(tl_run(args, &out, &err), 0);
        CHECK_CONTAINS(out, shows[i][1]);
        CHECK(out && !strchr(out, '\033'));
        free(out);
        free(err);
    }
    /* estimate names the profile it uses (the default database: estimate has no --db) */
    const char *xdg = path_in("xdg-ctl");
    char *old = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", xdg, 1);
    free(tl_run_ok("profile import '%s'", f));
    snprintf(args, sizeof args, "estimate '%s' --gpus 1 --gpu h100",
             tl_path("examples/models/tiny-gpt.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "kernel tables: measured profile 'envp' (1 rows, 575??[2J on x)");
    CHECK(out && !strchr(out, '\033'));
    free(out);
    free(err);
    if (old) setenv("XDG_CACHE_HOME", old, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old);
    write_export(f, "node-a");
    free(tl_run_ok("db import '%s' --db '%s'", f, db));
}

/* `db list --gpu` takes a catalog name or alias as `profile list` does: "h100" listed none of
 * the h100-sxm rows, an unknown GPU listed nothing without a word, and --gpu with plans or runs
 * was ignored. */
static void test_db_list_gpu(void) {
    const char *db = path_in("gpu.db"), *f = path_in("gpu.json");
    char args[1500], *out = NULL, *err = NULL;
    write_profile(f, NULL, NULL);
    free(tl_run_ok("profile import '%s' --db '%s'", f, db));
    snprintf(args, sizeof args, "db list profiles --gpu H100 --db '%s'", db);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "profiles (1)");
    CHECK_CONTAINS(out, "host_membw");
    free(out);
    free(err);
    const char *bad[][2] = {{"--gpu nosuch", "--gpu: unknown GPU 'nosuch'"},
                            {"runs --gpu h100", "--gpu: selects profiles, not runs"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "db list %s --db '%s'", bad[i][0], db);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, bad[i][1]);
        CHECK(out && !*out);
        free(out);
        free(err);
    }
}

/* An output path that is the database itself (`db export --db x.db --output x.db`) replaced
 * the database with its own export; now refused before anything is written, for every output
 * flag of the commands that take --db. */
static void test_output_is_db(void) {
    const char *db = path_in("self.db"), *f = path_in("self.json");
    char args[2048], *out = NULL, *err = NULL;
    write_profile(f, NULL, NULL);
    free(tl_run_ok("profile import '%s' --db '%s'", f, db));
    char model[600];
    snprintf(model, sizeof model, "%s", tl_path("examples/models/tiny-gpt.json"));
    const char *cmds[][2] = {
        {"db export --output '%s' --db '%s'", "--output "},
        {"db export --csv --output '%s' --db '%s'", "--output "},
        {"profile export envp --output '%s' --db '%s'", "--output "},
        {"profile bench --host-only --gpu h100 --quick --name envs --output '%s' --db '%s'",
         "--output "},
        {"run '%s' --gpus 1 --seq 16 --gbs 1 --steps 1 --no-bench --trace '%s' --db '%s'",
         "--trace "},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (i == 4) snprintf(args, sizeof args, cmds[i][0], model, db, db);
        else snprintf(args, sizeof args, cmds[i][0], db, db);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, cmds[i][1]);
        CHECK_CONTAINS(err, "that is the database");
        CHECK(out && !*out);
        free(out);
        free(err);
        snprintf(args, sizeof args, "profile list --db '%s'", db);
        CHECK_INT(tl_run(args, &out, &err), 0); /* still the database, with its profile */
        CHECK_CONTAINS(out, "envp");
        free(out);
        free(err);
    }
}

/* `run` refuses what it cannot honour, before any rank starts (no MPI needed): a timeout
 * below its 1 s floor (1e-9s was taken and every run "timed out", exit 124), the cluster,
 * profile and headroom flags (silently ignored), an attention kernel other than its own, and
 * with --plan every plan flag (--zero-group, --no-sp, --gpu... were silently ignored). */
static void test_run_refusals(void) {
    char model[600], args[2048], *out = NULL, *err = NULL;
    snprintf(model, sizeof model, "%s", tl_path("examples/models/tiny-gpt.json"));
    const char *plandir = path_in("plan");
    snprintf(args, sizeof args, "'%s' --gpus 2 --gbs 2 --seq 128 --out '%s' --no-cache", model,
             plandir);
    CHECK_INT(tl_run(args, &out, &err), 0);
    free(out);
    free(err);
    const char *bad[][2] = {
        {"--timeout 1e-9s", "--timeout: 1e-9s is not between 1s and 7d"},
        {"--timeout 0.5s", "--timeout: 0.5s is not between 1s and 7d"},
        {"--network-bw 1Gb/s", "--network-bw: autoplan run measures the host"},
        {"--cluster /nonexistent.json", "--cluster: autoplan run measures the host"},
        {"--profile nosuch", "--profile: autoplan run measures the host"},
        {"--headroom 1GiB", "--headroom: autoplan run measures the host"},
        {"--attn-impl fa2", "--attn-impl fa2: the runtime's attention materialises"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "run '%s' --gpus 1 --seq 16 --gbs 1 --steps 1 --no-db "
                 "--no-bench %s", model, bad[i][0]);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, bad[i][1]);
        CHECK_INT(lines(err), 1);
        CHECK(out && !*out);
        free(out);
        free(err);
    }
    const char *plan_flags[] = {"--zero-group 2", "--no-sp", "--no-overlap", "--gpu h100",
                                "--fp8-recipe delayed", "--stage-recompute 1,1",
                                "--offload-device nvme", "--attn-impl unfused"};
    for (size_t i = 0; i < sizeof plan_flags / sizeof plan_flags[0]; i++) {
        snprintf(args, sizeof args, "run --plan '%s/plan.json' --steps 1 --no-db --no-bench %s",
                 plandir, plan_flags[i]);
        CHECK_INT(tl_run(args, &out, &err), 2);
        char want[64];
        snprintf(want, sizeof want, "%.*s: not with --plan", (int)strcspn(plan_flags[i], " "),
                 plan_flags[i]);
        CHECK_CONTAINS(err, want);
        CHECK(out && !*out);
        free(out);
        free(err);
    }
}

/* `profile bench --host-only`: a size the benchmarks refuse, or an --output that cannot be
 * written, is refused before the header is printed, anything is measured, or the profile is
 * stored (the profile used to be stored, then the output refused). */
static void test_bench_checks_first(void) {
    const char *db = path_in("bench.db"), *fifo = path_in("bench.fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    char args[1500], *out = NULL, *err = NULL;
    struct {
        const char *flags, *want;
    } bad[] = {
        {"--adam-params 1", "--adam-params: host Adam: 1 parameters is outside [1024, 1e11]"},
        {"--host-bytes 1KiB", "--host-bytes: host bandwidth arrays: 1024 bytes is too small"},
        {"--host-bytes 1000TiB", "--host-bytes: host bandwidth arrays: 3 x "},
        {"--output /etc/passwd/x", "--output /etc/passwd/x: /etc/passwd is not a directory"},
        {NULL, "--output: "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char flags[700];
        if (bad[i].flags) snprintf(flags, sizeof flags, "%s", bad[i].flags);
        else snprintf(flags, sizeof flags, "--output '%s'", fifo);
        snprintf(args, sizeof args, "profile bench --host-only --gpu h100 --quick --name envb "
                 "--db '%s' %s", db, flags);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, bad[i].want);
        CHECK(out && !*out);
        CHECK(!exists(db));
        free(out);
        free(err);
    }
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
}

/* `profile attach` and `profile check`: --keep-trace and --timeline are checked before the
 * program runs (a FIFO or device at --keep-trace was unlinked, /dev/full included when run as
 * root); a bad --skip or --max-records in `profile check` was an abort (free() of a trace
 * never initialised). */
static void test_attach_outputs(void) {
    const char *fifo = path_in("trace.fifo"), *marker = path_in("ran");
    CHECK(mkfifo(fifo, 0600) == 0);
    char args[2048], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "profile attach --keep-trace '%s' -- touch '%s'", fifo, marker);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "--keep-trace: ");
    CHECK_CONTAINS(err, "exists and is a FIFO");
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(!exists(marker));
    free(out);
    free(err);
    snprintf(args, sizeof args, "profile attach --timeline /etc/passwd/x -- touch '%s'", marker);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "--timeline /etc/passwd/x: /etc/passwd is not a directory");
    CHECK(!exists(marker));
    free(out);
    free(err);
    char model[600];
    snprintf(model, sizeof model, "%s", tl_path("examples/models/tiny-gpt.json"));
    const char *bad[][2] = {{"--skip -1", "--skip: -1 is out of range"},
                            {"--max-records 5", "--max-records: 5 is out of range"},
                            {"--keep-trace /", "--keep-trace: /: exists and is a directory"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "profile check '%s' %s -- touch '%s'", model, bad[i][0],
                 marker);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, bad[i][1]);
        CHECK(out && !*out); /* refused before the prediction is printed */
        CHECK(!exists(marker));
        free(out);
        free(err);
    }
    /* the library itself never removes what is not a regular file */
    char *argv[] = {"true", NULL};
    ap_attach_opts o = {0};
    o.argv = argv;
    o.inject_lib = "/nonexistent/libautoplan_inject.so";
    o.trace_path = fifo;
    ap_trace t;
    int code = 0;
    ap_err e = {{0}};
    if (!getenv("CUDA_INJECTION64_PATH")) {
        CHECK_INT(ap_attach_run(&o, &t, &code, &e), AP_ERR_INPUT);
        CHECK_CONTAINS(e.msg, "exists and is a FIFO");
        CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
        ap_trace_free(&t);
    }
}

/* A database that does not exist: `profile export` is bad input as `db export` (exit 2, was
 * 1), and `profile delete` finds nothing without creating the file. */
static void test_profile_missing_db(void) {
    const char *db = path_in("missing.db");
    run_refused("no database there yet", "profile export x --db '%s'", db);
    run_refused("no profile named 'x'", "profile delete x --db '%s'", db);
    CHECK(!exists(db));
}

/* `autoplan help db list` shows that subcommand's help (it showed the overview), an unknown
 * word after help or --version is refused, and `profile help` is help as `db help` is. */
static void test_help_placement(void) {
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run("help db", &out, &err), 0);
    CHECK_CONTAINS(out, "usage: autoplan db SUBCOMMAND");
    free(out);
    free(err);
    CHECK_INT(tl_run("--help db list", &out, &err), 0);
    CHECK_CONTAINS(out, "usage: autoplan db list");
    free(out);
    free(err);
    CHECK_INT(tl_run("help run", &out, &err), 0);
    CHECK_CONTAINS(out, "usage: autoplan run MODEL");
    free(out);
    free(err);
    CHECK_INT(tl_run("help nosuch", &out, &err), 2);
    CHECK_CONTAINS(err, "help: 'nosuch' is not a command");
    free(out);
    free(err);
    CHECK_INT(tl_run("--version extra", &out, &err), 2);
    CHECK_CONTAINS(err, "--version: unexpected argument 'extra'");
    CHECK(out && !*out);
    free(out);
    free(err);
    CHECK_INT(tl_run("profile help", &out, &err), 0);
    CHECK_CONTAINS(out, "usage: autoplan profile SUBCOMMAND");
    free(out);
    free(err);
}

/* A regular file larger than the reader's limit is refused from its size, unread (a sparse
 * 2 GiB file: instant, no disk), and nothing is created */
static void test_large_file_unread(void) {
    const char *big = path_in("big.json"), *db = path_in("big.db");
    FILE *f = fopen(big, "w");
    CHECK(f != NULL);
    if (!f) return;
    fclose(f);
    CHECK(truncate(big, (off_t)2 << 30) == 0);
    char args[800], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "db import '%s' --db '%s'", big, db);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "file too large (over 1073741824 bytes)");
    CHECK(access(db, F_OK) != 0);
    free(out);
    free(err);
    remove(big);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    dir = tl_tmpdir();
    setenv("AUTOPLAN_DB_NO_WAL", "1", 1);
    test_stdout_full_one_line();
    test_default_dir_is_file();
    test_control_characters();
    test_db_list_gpu();
    test_output_is_db();
    test_run_refusals();
    test_bench_checks_first();
    test_attach_outputs();
    test_profile_missing_db();
    test_help_placement();
    test_large_file_unread();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tl_finish();
}
