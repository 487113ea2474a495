/*
 * cmd_db.c - `autoplan db`: look into and maintain the database (plan cache, operator profiles,
 * measured runs). Subcommands: path, list, show, export, import, gc; every one takes --db PATH
 * (default: ap_db_default_path) and --help. The work is done by db/ (db.h); this
 * file parses flags and prints.
 *
 * Reading commands (path, list, show, export) open the database read-only and never create it.
 * IDs shown by `list` are "plan:N", "profile:N" and "run:N"; `show` also takes a plan key or a
 * unique prefix of one (at least 4 hex digits).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "autoplan/text.h"
#include "autoplan/db.h"

#define IMPORT_MAX_BYTES ((size_t)1 << 30) /* 1 GiB: far above any real export */

static const char *db_usage =
    "autoplan db SUBCOMMAND [args] [--db PATH]\n"
    "\n"
    "subcommands:\n"
    "  path                         print the database path\n"
    "  list [plans|profiles|runs]   list cached plans, GPU operator profiles, measured runs\n"
    "  show ID                      one row in full: plan:N, profile:N, run:N or a plan key\n"
    "  export [--json|--csv]        the whole database as JSON (default) or one table as CSV\n"
    "  import FILE                  add the rows of a JSON export (all or none)\n"
    "  gc --older-than DURATION     delete cached plans not used for DURATION (e.g. 30d)\n"
    "\n"
    "The default database is $XDG_CACHE_HOME/autoplan/autoplan.db, else\n"
    "~/.cache/autoplan/autoplan.db. AUTOPLAN_DB_NO_WAL=1 uses journal_mode=DELETE instead of\n"
    "WAL. `autoplan db SUBCOMMAND --help` for the flags of each.";

void ap_cli_db_flag(ap_flags *fl) {
    ap_flags_add(fl, "db", AP_FLAG_VALUE, "PATH",
                 "database file (default $XDG_CACHE_HOME/autoplan/autoplan.db)");
}

int ap_cli_subparse(ap_flags *fl, int argc, char **argv, int max_pos, const char *usage,
                    const char *description) {
    int help = 0;
    ap_err err;
    ap_status st = ap_flags_parse(fl, argc, argv, max_pos, &help, &err);
    if (help) {
        ap_flags_print_help(fl, usage, description);
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    return -1;
}

char *ap_cli_fmt_time(int64_t t, char *buf, size_t n) {
    time_t tt = (time_t)t;
    struct tm tm;
    if (t <= 0 || !gmtime_r(&tt, &tm)) snprintf(buf, n, "-");
    else strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
    return buf;
}

ap_status ap_cli_write_out(const char *path, const char *text, size_t len, const char *what,
                           ap_err *err) {
    if (path && strcmp(path, "-") != 0) return ap_write_file_atomic(path, text, len, err);
    if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
        return ap_err_set(err, AP_ERR_IO, "%s: writing standard output failed: %s", what,
                          strerror(errno));
    return AP_OK;
}

ap_status ap_cli_check_not_db(ap_flags *fl, const char *flag, const char *path, ap_err *err) {
    if (!path || !strcmp(path, "-")) return AP_OK;
    char buf[4096];
    const char *db = ap_flags_value(fl, "db");
    ap_err ignored;
    if (!db && ap_db_default_path(buf, sizeof buf, 0, &ignored) == AP_OK) db = buf;
    struct stat a, b;
    if (db && stat(path, &a) == 0 && stat(db, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        return ap_err_set(err, AP_ERR_INPUT, "%s %s: that is the database (%s); writing there "
                          "would replace it, write to another file", flag, path, db);
    return AP_OK;
}

ap_status ap_cli_db_open_ro(ap_flags *fl, ap_db **db, int *missing, ap_err *err) {
    *missing = 0;
    *db = NULL;
    char buf[4096];
    const char *path = ap_flags_value(fl, "db");
    if (!path) {
        ap_status st = ap_db_default_path(buf, sizeof buf, 0, err);
        if (st != AP_OK) return st;
        path = buf;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        *missing = 1;
        return ap_err_set(err, AP_OK, "%s: no database there yet", path);
    }
    ap_status st = ap_db_open(path, 1, db, err);
    /* an older schema: migrate it as any writing command would (the rows are kept), so that
       listing or exporting an old cache works; a file that cannot be written keeps the
       refusal */
    if (st != AP_OK && strstr(err->msg, "any command that writes to it migrates it") &&
        access(path, W_OK) == 0) {
        ap_err e2;
        if (ap_db_open(path, 0, db, &e2) == AP_OK) {
            ap_log(AP_LOG_WARN, "%s: database migrated to this autoplan's schema", path);
            return AP_OK;
        }
    }
    return st;
}

const char *ap_cli_shown(const char *s, char *buf, size_t n) {
    return ap_text_line(buf, n, s, 0); /* the one sanitiser (text.h) */
}

/* ---- path ------------------------------------------------------------------------------------- */

static int cmd_path(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 0, "autoplan db path [--db PATH]",
                   "Print the path of the database (it need not exist yet).");
    if (rc >= 0) return rc;
    const char *p = ap_flags_value(&fl, "db");
    char buf[4096];
    ap_err err;
    if (!p) {
        ap_status st = ap_db_default_path(buf, sizeof buf, 0, &err);
        if (st != AP_OK) return ap_cli_fail(st, &err);
        p = buf;
    }
    printf("%s\n", p);
    return 0;
}

/* ---- list ------------------------------------------------------------------------------------- */

static ap_status list_plans(ap_db *db, ap_err *err) {
    ap_db_plan_info *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_plans_list(db, &r, &n, err);
    if (st != AP_OK) return st;
    printf("plans (%zu)\n", n);
    if (n) printf("  %-10s %-12s %10s %-16s %10s  %s\n", "ID", "KEY", "SEARCH",
                  "LAST USED (UTC)", "SIZE", "SUMMARY");
    for (size_t i = 0; i < n; i++) {
        char id[32], t[32], s[32], b[32];
        snprintf(id, sizeof id, "plan:%lld", (long long)r[i].id);
        printf("  %-10s %-12.12s %10s %-16s %10s  %s\n", id, r[i].key,
               ap_fmt_seconds(r[i].search_s, s, sizeof s),
               ap_cli_fmt_time(r[i].used_at, t, sizeof t), ap_fmt_bytes((double)r[i].json_bytes, b,
                                                                 sizeof b), ap_cli_safe(r[i].summary));
    }
    free(r);
    return AP_OK;
}

static ap_status list_profiles(ap_db *db, const char *gpu, ap_err *err) {
    ap_db_profile *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_profiles_list(db, gpu, &r, &n, err);
    if (st != AP_OK) return st;
    printf("profiles (%zu)\n", n);
    if (n) printf("  %-12s %-12s %-12s %-6s %-28s %10s %14s %7s %7s\n", "ID", "GPU", "OP", "DTYPE",
                  "SHAPE", "TIME", "ACHIEVED", "SAMPLES", "SPREAD");
    for (size_t i = 0; i < n; i++) {
        char id[32], t[32], a[48];
        snprintf(id, sizeof id, "profile:%lld", (long long)r[i].id);
        if (r[i].flops_per_s > 0) snprintf(a, sizeof a, "%.1f TFLOP/s", r[i].flops_per_s / 1e12);
        else if (r[i].bytes_per_s > 0) snprintf(a, sizeof a, "%.1f GB/s", r[i].bytes_per_s / 1e9);
        else snprintf(a, sizeof a, "-");
        printf("  %-12s %-12s %-12s %-6s %-28s %10s %14s %7lld %6.1f%%\n", id, r[i].gpu, r[i].op,
               r[i].dtype, r[i].shape, ap_fmt_seconds(r[i].time_s, t, sizeof t), a,
               (long long)r[i].samples, 100.0 * r[i].spread);
    }
    free(r);
    return AP_OK;
}

/* A run's step time, "-" when it was not taken: `run --no-bench` (and a run whose time the cost
 * model does not predict) stores a predicted step time of 0, and the run itself printed "-". */
static const char *fmt_step(double s, char *buf, size_t n) {
    if (s > 0) return ap_fmt_seconds(s, buf, n);
    snprintf(buf, n, "-");
    return buf;
}

static ap_status list_runs(ap_db *db, ap_err *err) {
    ap_db_run *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_runs_list(db, &r, &n, err);
    if (st != AP_OK) return st;
    printf("runs (%zu)\n", n);
    if (n) printf("  %-10s %-16s %-16s %-7s %6s %12s %12s %12s\n", "ID", "STARTED (UTC)", "HOST",
                  "BACKEND", "RANKS", "PREDICTED", "MEASURED", "PEAK MEM");
    for (size_t i = 0; i < n; i++) {
        char id[32], t[32], p[32], m[32], b[32];
        snprintf(id, sizeof id, "run:%lld", (long long)r[i].id);
        printf("  %-10s %-16s %-16.16s %-7s %6lld %12s %12s %12s\n", id,
               ap_cli_fmt_time(r[i].started_at, t, sizeof t), ap_cli_safe(r[i].host),
               ap_cli_safe(r[i].backend),
               (long long)r[i].ranks, fmt_step(r[i].predicted_step_s, p, sizeof p),
               fmt_step(r[i].measured_step_s, m, sizeof m),
               ap_fmt_bytes(r[i].measured_peak_bytes, b, sizeof b));
    }
    ap_db_runs_free(r, n);
    return AP_OK;
}

static int cmd_list(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "gpu", AP_FLAG_VALUE, "NAME", "only profiles of this catalog GPU");
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan db list [plans|profiles|runs] [--db PATH]",
                   "List the rows of one table, or of all three. IDs are what `db show` takes.");
    if (rc >= 0) return rc;
    ap_err err;
    const char *what = fl.npos ? fl.pos[0] : "all";
    int all = !strcmp(what, "all");
    if (!all && strcmp(what, "plans") && strcmp(what, "profiles") && strcmp(what, "runs")) {
        char b[64];
        ap_err_set(&err, AP_ERR_INPUT, "db list: unknown table '%s' (plans, profiles or runs)",
                   ap_cli_shown(what, b, sizeof b));
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    /* --gpu as `profile list` takes it: a catalog name or alias, stored rows carry the name */
    const char *gname = ap_flags_value(&fl, "gpu");
    const ap_gpu *g = NULL;
    ap_status st = AP_OK;
    if (gname && !all && strcmp(what, "profiles"))
        st = ap_err_set(&err, AP_ERR_INPUT, "--gpu: selects profiles, not %s", what);
    if (st == AP_OK && gname) st = ap_gpu_lookup(gname, "--gpu", &g, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_db *db = NULL;
    int missing = 0;
    st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    if (st == AP_OK && missing) st = AP_ERR_INPUT; /* README "Exit status": the path given */
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (st == AP_OK && (all || !strcmp(what, "plans"))) st = list_plans(db, &err);
    if (st == AP_OK && (all || !strcmp(what, "profiles")))
        st = list_profiles(db, g ? g->name : NULL, &err);
    if (st == AP_OK && (all || !strcmp(what, "runs"))) st = list_runs(db, &err);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- show ------------------------------------------------------------------------------------- */

static ap_status show_plan(ap_db *db, const char *id_text, int64_t id, ap_err *err) {
    ap_db_plan_info *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_plans_list(db, &r, &n, err);
    if (st != AP_OK) return st;
    const ap_db_plan_info *hit = NULL;
    size_t plen = strlen(id_text);
    for (size_t i = 0; i < n; i++) {
        int match = id ? r[i].id == id : strncmp(r[i].key, id_text, plen) == 0;
        if (!match) continue;
        if (hit) {
            free(r);
            return ap_err_set(err, AP_ERR_INPUT, "db show: key prefix '%s' is ambiguous (give "
                              "more digits)", id_text);
        }
        hit = &r[i];
    }
    if (!hit) {
        free(r);
        return ap_err_set(err, AP_ERR_INPUT, "db show: no plan '%s' in %s", id_text,
                          ap_db_path(db));
    }
    char *json = NULL;
    st = ap_db_plan_json(db, hit->id, &json, err);
    if (st == AP_OK) {
        char t1[32], t2[32], s[32];
        printf("id:         plan:%lld\nkey:        %s\nsummary:    %s\nsearch:     %s\n"
               "created:    %s UTC\nlast used:  %s UTC (to the hour)\nresult:\n%s\n",
               (long long)hit->id, hit->key, ap_cli_safe(hit->summary),
               ap_fmt_seconds(hit->search_s, s, sizeof s), ap_cli_fmt_time(hit->created_at, t1, sizeof t1),
               ap_cli_fmt_time(hit->used_at, t2, sizeof t2), json ? json : "");
    }
    free(json);
    free(r);
    return st;
}

static ap_status show_profile(ap_db *db, int64_t id, ap_err *err) {
    ap_db_profile *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_profiles_list(db, NULL, &r, &n, err);
    if (st != AP_OK) return st;
    const ap_db_profile *p = NULL;
    for (size_t i = 0; i < n && !p; i++)
        if (r[i].id == id) p = &r[i];
    if (!p) {
        free(r);
        return ap_err_set(err, AP_ERR_INPUT, "db show: no profile:%lld in %s", (long long)id,
                          ap_db_path(db));
    }
    char t[32], b[32];
    printf("id:             profile:%lld\n", (long long)p->id);
    /* the device's text as the driver reported it: shown on one line whatever it holds */
    printf("gpu:            %s\ndevice:         %s\npci id:         %s\nSMs:            %lld\n",
           p->gpu, ap_cli_safe(p->device_name), ap_cli_safe(p->pci_id), (long long)p->sm_count);
    printf("memory:         %s\nclocks:         SM %.0f MHz, memory %.0f MHz\n",
           ap_fmt_bytes(p->mem_bytes, b, sizeof b), p->sm_clock_mhz, p->mem_clock_mhz);
    printf("power limit:    %.0f W\ndriver:         %s\nCUDA:           %s\ncuBLAS:         %s\n"
           "NCCL:           %s\nMIG:            %s\n", p->power_limit_w,
           ap_cli_safe(p->driver_version), ap_cli_safe(p->cuda_version),
           ap_cli_safe(p->cublas_version), ap_cli_safe(p->nccl_version), ap_cli_safe(p->mig_mode));
    printf("op:             %s\nshape:          %s\ndtype:          %s\n", p->op, p->shape,
           p->dtype);
    printf("time:           %s (%.6g s)\n", ap_fmt_seconds(p->time_s, t, sizeof t), p->time_s);
    printf("achieved:       %.4g FLOP/s, %.4g B/s\nbytes:          %.0f\nsamples:        %lld\n"
           "spread:         %.2f%%\nsource run:     %s\ncreated:        %s UTC\n",
           p->flops_per_s, p->bytes_per_s, p->bytes, (long long)p->samples, 100.0 * p->spread,
           p->source_run, ap_cli_fmt_time(p->created_at, t, sizeof t));
    free(r);
    return AP_OK;
}

static ap_status show_run(ap_db *db, int64_t id, ap_err *err) {
    ap_db_run *r = NULL;
    size_t n = 0;
    ap_status st = ap_db_runs_list(db, &r, &n, err);
    if (st != AP_OK) return st;
    const ap_db_run *run = NULL;
    for (size_t i = 0; i < n && !run; i++)
        if (r[i].id == id) run = &r[i];
    if (!run) {
        ap_db_runs_free(r, n);
        return ap_err_set(err, AP_ERR_INPUT, "db show: no run:%lld in %s", (long long)id,
                          ap_db_path(db));
    }
    ap_db_run_rank *k = NULL;
    size_t nk = 0;
    st = ap_db_run_ranks(db, run->id, &k, &nk, err);
    if (st == AP_OK) {
        char t[32], a[32], b[32], c[32], d[32];
        printf("id:             run:%lld\nuid:            %s\nplan key:       %s\n"
               "host:           %s\nbackend:        %s\nstarted:        %s UTC\nranks:          "
               "%lld\n", (long long)run->id, run->uid, run->plan_key[0] ? run->plan_key : "-",
               ap_cli_safe(run->host), ap_cli_safe(run->backend),
               ap_cli_fmt_time(run->started_at, t, sizeof t),
               (long long)run->ranks);
        printf("step time:      predicted %s, measured %s\npeak memory:    predicted %s, "
               "measured %s (max over ranks)\n",
               fmt_step(run->predicted_step_s, a, sizeof a),
               fmt_step(run->measured_step_s, b, sizeof b),
               ap_fmt_bytes(run->predicted_peak_bytes, c, sizeof c),
               ap_fmt_bytes(run->measured_peak_bytes, d, sizeof d));
        if (nk) printf("per rank:\n  %6s %12s %12s %12s %12s\n", "RANK", "PRED STEP",
                       "MEAS STEP", "PRED PEAK", "MEAS PEAK");
        for (size_t i = 0; i < nk; i++)
            printf("  %6lld %12s %12s %12s %12s\n", (long long)k[i].rank,
                   fmt_step(k[i].predicted_step_s, a, sizeof a),
                   fmt_step(k[i].measured_step_s, b, sizeof b),
                   ap_fmt_bytes(k[i].predicted_peak_bytes, c, sizeof c),
                   ap_fmt_bytes(k[i].measured_peak_bytes, d, sizeof d));
        printf("plan:\n%s\n", run->plan_json);
    }
    free(k);
    ap_db_runs_free(r, n);
    return st;
}

static int cmd_show(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan db show ID [--db PATH]",
                   "Show one row in full. ID is plan:N, profile:N or run:N as `db list` prints "
                   "it,\nor a plan key (or a unique prefix of at least 4 hex digits).");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 1) {
        ap_err_set(&err, AP_ERR_INPUT, "db show: needs an ID (see `autoplan db list`)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    const char *id = fl.pos[0];
    const char *colon = strchr(id, ':');
    int64_t num = 0;
    char kind[16] = "plan";
    if (colon) {
        snprintf(kind, sizeof kind, "%.*s", (int)(colon - id), id);
        if (strcmp(kind, "plan") && strcmp(kind, "profile") && strcmp(kind, "run")) {
            char b[64];
            ap_err_set(&err, AP_ERR_INPUT, "db show: '%s': the kind before ':' must be plan, "
                       "profile or run", ap_cli_shown(id, b, sizeof b));
            return ap_cli_fail(AP_ERR_INPUT, &err);
        }
        ap_status st = ap_parse_int(colon + 1, "db show: ID", 1, INT64_MAX, &num, &err);
        if (st != AP_OK) return ap_cli_fail(st, &err);
    } else {
        size_t n = strlen(id);
        int hex = n >= 4 && n <= AP_DB_KEY_HEX;
        for (size_t i = 0; hex && i < n; i++)
            hex = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
        if (!hex) {
            char b[64];
            ap_err_set(&err, AP_ERR_INPUT, "db show: '%s' is not an ID (plan:N, profile:N, "
                       "run:N, or 4 to %d hex digits of a plan key)", ap_cli_shown(id, b, sizeof b),
                       AP_DB_KEY_HEX);
            return ap_cli_fail(AP_ERR_INPUT, &err);
        }
    }
    ap_db *db = NULL;
    int missing = 0;
    ap_status st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    if (st == AP_OK && missing) st = AP_ERR_INPUT;
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (!strcmp(kind, "plan")) st = show_plan(db, id, num, &err);
    else if (!strcmp(kind, "profile")) st = show_profile(db, num, &err);
    else st = show_run(db, num, &err);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- export ----------------------------------------------------------------------------------- */

static int cmd_export(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL, "the whole database as JSON (default)");
    ap_flags_add(&fl, "csv", AP_FLAG_BOOL, NULL, "one table as CSV (see --table)");
    ap_flags_add(&fl, "table", AP_FLAG_VALUE, "NAME",
                 "table for --csv: plans, profiles (default) or runs");
    ap_flags_add(&fl, "output", AP_FLAG_VALUE, "FILE",
                 "write to FILE (atomically; a FIFO or device is refused) instead of standard "
                 "output; - is standard output");
    int rc = ap_cli_subparse(&fl, argc, argv, 0, "autoplan db export [--json|--csv [--table NAME]] "
                   "[--output FILE] [--db PATH]",
                   "Export the database. The JSON is what `autoplan db import` reads (format in "
                   "docs/db.md).");
    if (rc >= 0) return rc;
    ap_err err;
    int csv = ap_flags_isset(&fl, "csv");
    if (csv && ap_flags_isset(&fl, "json")) {
        ap_err_set(&err, AP_ERR_INPUT, "db export: --json and --csv exclude each other");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    if (!csv && ap_flags_isset(&fl, "table")) {
        ap_err_set(&err, AP_ERR_INPUT, "--table: only with --csv (--json exports every table)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    const char *table = ap_flags_value(&fl, "table");
    if (!table) table = "profiles";
    if (csv && strcmp(table, "plans") && strcmp(table, "profiles") && strcmp(table, "runs")) {
        char b[64];
        ap_err_set(&err, AP_ERR_INPUT, "--table: unknown table '%s' (plans, profiles or runs)",
                   ap_cli_shown(table, b, sizeof b));
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    ap_status st = ap_cli_check_not_db(&fl, "--output", ap_flags_value(&fl, "output"), &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_db *db = NULL;
    int missing = 0;
    st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    if (st == AP_OK && missing) st = AP_ERR_INPUT;
    if (st != AP_OK) return ap_cli_fail(st, &err);
    char *text = NULL;
    st = csv ? ap_db_export_csv(db, table, &text, &err) : ap_db_export_json(db, &text, &err);
    ap_db_close(db);
    if (st == AP_OK) {
        size_t len = strlen(text);
        if (!csv) text[len++] = '\n'; /* the terminating NUL becomes the final newline */
        st = ap_cli_write_out(ap_flags_value(&fl, "output"), text, len, "db export", &err);
    }
    free(text);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- import ----------------------------------------------------------------------------------- */

static int cmd_import(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan db import FILE [--db PATH]",
                   "Add the plans, profiles and runs of FILE (a `db export --json`) to the "
                   "database.\nThe file is validated first; then all its rows are stored in one "
                   "transaction,\nor none. Rows already stored are skipped.");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 1) {
        ap_err_set(&err, AP_ERR_INPUT, "db import: needs a FILE (from `autoplan db export "
                   "--json`)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    char *text = NULL;
    size_t len = 0;
    ap_status st = ap_read_file(fl.pos[0], IMPORT_MAX_BYTES, &text, &len, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_db *db = NULL;
    ap_db_import_counts c;
    /* validate before opening: a refused file must not create or migrate the database */
    st = ap_db_import_json(NULL, text, len, fl.pos[0], &c, &err);
    if (st == AP_OK) st = ap_db_open(ap_flags_value(&fl, "db"), 0, &db, &err);
    if (st == AP_OK) st = ap_db_import_json(db, text, len, fl.pos[0], &c, &err);
    free(text);
    if (st == AP_OK)
        printf("imported into %s: %zu plans (%zu new), %zu profiles (%zu new), %zu runs (%zu "
               "new)\n", ap_db_path(db), c.plans, c.plans_new, c.profiles, c.profiles_new,
               c.runs, c.runs_new);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- gc --------------------------------------------------------------------------------------- */

static int cmd_gc(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "older-than", AP_FLAG_VALUE, "DURATION",
                 "delete cached plans not used for this long: 30d, 12h, 2w (required)");
    int rc = ap_cli_subparse(&fl, argc, argv, 0, "autoplan db gc --older-than DURATION [--db PATH]",
                   "Delete cached plans that were neither stored nor hit within DURATION.\n"
                   "Profiles and runs are measurements and are never collected.");
    if (rc >= 0) return rc;
    ap_err err;
    const char *d = ap_flags_value(&fl, "older-than");
    if (!d) {
        ap_err_set(&err, AP_ERR_INPUT, "db gc: --older-than DURATION is required (e.g. 30d)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    double older_s = 0;
    ap_status st = ap_parse_duration(d, "--older-than", &older_s, &err);
    /* time_t arithmetic must not overflow: 10000 years is older than any row */
    if (st == AP_OK && older_s > 3.15e11)
        st = ap_err_set(&err, AP_ERR_INPUT, "--older-than: %s is more than 10000 years", d);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    /* Do not create a database just to find it empty. */
    ap_db *db = NULL;
    int missing = 0;
    st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    ap_db_close(db);
    db = NULL;
    if (st == AP_OK && missing) {
        printf("nothing to collect: %s\n", err.msg);
        return 0;
    }
    if (st == AP_OK) st = ap_db_open(ap_flags_value(&fl, "db"), 0, &db, &err);
    int64_t deleted = 0;
    if (st == AP_OK) st = ap_db_plans_gc(db, older_s, &deleted, &err);
    if (st == AP_OK)
        printf("deleted %lld cached plans not used in %s from %s\n", (long long)deleted, d,
               ap_db_path(db));
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- dispatch --------------------------------------------------------------------------------- */

int ap_cmd_db(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subs[] = {{"path", cmd_path},     {"list", cmd_list}, {"show", cmd_show},
                {"export", cmd_export}, {"import", cmd_import}, {"gc", cmd_gc}};
    if (argc < 1) {
        fprintf(stderr, "usage: %s\n", db_usage);
        return 2;
    }
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
        printf("usage: %s\n", db_usage);
        return 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(argv[0], subs[i].name)) return subs[i].run(argc - 1, argv + 1);
    char b[64];
    fprintf(stderr, "autoplan: db: unknown subcommand '%s' (path, list, show, export, import, "
            "gc; see autoplan db --help)\n", ap_cli_shown(argv[0], b, sizeof b));
    return 2;
}
