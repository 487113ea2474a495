/*
 * cmd_profile_store.c - the stored profiles: `autoplan profile list`, `export NAME`, `import
 * FILE`, `delete NAME`, `compare A B`. Flags as `autoplan db export/import`: --db PATH,
 * --output FILE (written atomically). The work is db/profiles.c, db/profile_json.c and
 * profiler/compare.c; this file parses flags and prints.
 *
 * Reading subcommands open the database read-only and never create it.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autoplan/db.h"
#include "autoplan/profiler.h"

#define PROFILE_MAX_BYTES ((size_t)256 << 20) /* 256 MiB: a million rows is about 300 MB */

/* ---- list ------------------------------------------------------------------------------------- */

int ap_cmd_profile_list(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "gpu", AP_FLAG_VALUE, "NAME", "only profiles of this catalog GPU");
    int rc = ap_cli_subparse(&fl, argc, argv, 0, "autoplan profile list [--gpu NAME] [--db PATH]",
                             "Measured profiles in the database, newest first: the machine each "
                             "was measured on\n(GPU, host, driver, CUDA, clocks, MIG mode) and "
                             "its rows.");
    if (rc >= 0) return rc;
    ap_err err;
    const ap_gpu *g = NULL;
    const char *gname = ap_flags_value(&fl, "gpu");
    ap_status st = gname ? ap_gpu_lookup(gname, "--gpu", &g, &err) : AP_OK;
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_db *db = NULL;
    int missing = 0;
    if ((st = ap_cli_db_open_ro(&fl, &db, &missing, &err)) != AP_OK) return ap_cli_fail(st, &err);
    if (missing) {
        printf("no profiles (%s)\n", err.msg);
        return 0;
    }
    ap_db_profile_info *p = NULL;
    size_t n = 0;
    st = ap_db_profile_names(db, g ? g->name : NULL, &p, &n, &err);
    if (st == AP_OK && n == 0)
        printf("no measured profiles in %s (`autoplan profile bench` or `profile import FILE` "
               "adds one)\n", ap_db_path(db));
    if (st == AP_OK && n > 0) {
        printf("%-40s %-14s %-16s %6s %-12s %-6s %-11s %-5s %s\n", "NAME", "GPU", "HOST", "ROWS",
               "DRIVER", "CUDA", "CLOCKS MHZ", "MIG", "CREATED (UTC)");
        for (size_t i = 0; i < n; i++) {
            char when[32], clocks[32];
            if (p[i].sm_clock_mhz > 0)
                snprintf(clocks, sizeof clocks, "%.0f/%.0f", p[i].sm_clock_mhz, p[i].mem_clock_mhz);
            else
                snprintf(clocks, sizeof clocks, "-");
            /* the device's text as the driver reported it (a `db import` keeps it as it was):
               one line whatever it holds */
            printf("%-40s %-14s %-16s %6lld %-12s %-6s %-11s %-5s %s\n", p[i].name, p[i].gpu,
                   p[i].host[0] ? ap_cli_safe(p[i].host) : "-", (long long)p[i].rows,
                   p[i].driver_version[0] ? ap_cli_safe(p[i].driver_version) : "-",
                   p[i].cuda_version[0] ? ap_cli_safe(p[i].cuda_version) : "-", clocks,
                   p[i].mig_mode[0] ? ap_cli_safe(p[i].mig_mode) : "off",
                   ap_cli_fmt_time(p[i].created_at, when, sizeof when));
        }
    }
    free(p);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- export ------------------------------------------------------------------------------------ */

int ap_cmd_profile_export(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "output", AP_FLAG_VALUE, "FILE",
                 "write to FILE (atomically) instead of standard output");
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan profile export NAME [--output FILE] "
                             "[--db PATH]",
                             "One measured profile as JSON (format in docs/profiles.md), for "
                             "`autoplan profile import`\non another machine.");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 1) {
        ap_err_set(&err, AP_ERR_INPUT, "profile export: needs a profile NAME (`autoplan profile "
                   "list` shows them)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    ap_db *db = NULL;
    int missing = 0;
    ap_status st = ap_cli_check_not_db(&fl, "--output", ap_flags_value(&fl, "output"), &err);
    if (st == AP_OK) st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    if (st == AP_OK && missing) st = AP_ERR_INPUT; /* as `db export` (README "Exit status") */
    if (st != AP_OK) return ap_cli_fail(st, &err);
    char *text = NULL;
    st = ap_db_profile_export_json(db, fl.pos[0], &text, &err);
    ap_db_close(db);
    if (st == AP_OK) {
        size_t len = strlen(text);
        text[len++] = '\n'; /* the terminating NUL becomes the final newline */
        st = ap_cli_write_out(ap_flags_value(&fl, "output"), text, len, "profile export", &err);
    }
    free(text);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- import ------------------------------------------------------------------------------------ */

int ap_cmd_profile_import(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "name", AP_FLAG_VALUE, "NAME", "store under this name instead of the file's");
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan profile import FILE [--name NAME] "
                             "[--db PATH]",
                             "Store the profile in FILE (from `autoplan profile export`). The "
                             "file is validated first;\nthen all its rows are stored in one "
                             "transaction, or none. Importing the same file again\nadds nothing. "
                             "Estimates for that GPU use the newest measured profile.");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 1) {
        ap_err_set(&err, AP_ERR_INPUT, "profile import: needs a FILE (from `autoplan profile "
                   "export`)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    char *text = NULL;
    size_t len = 0;
    ap_status st = ap_read_file(fl.pos[0], PROFILE_MAX_BYTES, &text, &len, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    /* validate before the database is even opened: a bad file creates nothing */
    ap_profile p;
    st = ap_db_profile_parse_json(text, len, fl.pos[0], ap_flags_value(&fl, "name"), &p, &err);
    size_t nrows = p.n;
    ap_profile_free(&p);
    ap_db *db = NULL;
    if (st == AP_OK) st = ap_db_open(ap_flags_value(&fl, "db"), 0, &db, &err);
    size_t added = 0;
    char name[64] = "";
    if (st == AP_OK)
        st = ap_db_profile_import_json(db, text, len, fl.pos[0], ap_flags_value(&fl, "name"),
                                       &added, name, &err);
    free(text);
    if (st == AP_OK)
        printf("imported profile '%s' into %s: %zu rows (%zu new)\n", name, ap_db_path(db), nrows,
               added);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- delete ------------------------------------------------------------------------------------ */

int ap_cmd_profile_delete(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 1, "autoplan profile delete NAME [--db PATH]",
                             "Remove every row of one measured profile (the built-in published "
                             "tables stay).");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 1) {
        ap_err_set(&err, AP_ERR_INPUT, "profile delete: needs a profile NAME");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    ap_status st = ap_db_profile_check_name(fl.pos[0], "profile delete", &err);
    ap_db *db = NULL;
    /* no database: nothing to delete, and none is created to find that out */
    int missing = 0;
    if (st == AP_OK) st = ap_cli_db_open_ro(&fl, &db, &missing, &err);
    ap_db_close(db);
    db = NULL;
    if (st == AP_OK && missing) {
        char why[sizeof err.msg];
        snprintf(why, sizeof why, "%s", err.msg);
        st = ap_err_set(&err, AP_ERR_INPUT, "no profile named '%s': %s", fl.pos[0], why);
    }
    if (st == AP_OK) st = ap_db_open(ap_flags_value(&fl, "db"), 0, &db, &err);
    int64_t n = 0;
    if (st == AP_OK) st = ap_db_profile_delete(db, fl.pos[0], &n, &err);
    if (st == AP_OK && n == 0)
        st = ap_err_set(&err, AP_ERR_INPUT, "no profile named '%s' in %s", fl.pos[0],
                        ap_db_path(db));
    if (st == AP_OK) printf("deleted profile '%s': %lld rows\n", fl.pos[0], (long long)n);
    ap_db_close(db);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}

/* ---- compare ----------------------------------------------------------------------------------- */

/* A profile by name from the database, or from a file when the argument names one. */
static ap_status load_either(ap_flags *fl, const char *what, ap_profile *p, ap_err *err) {
    struct stat sb;
    if (stat(what, &sb) == 0 && S_ISREG(sb.st_mode)) {
        char *text = NULL;
        size_t len = 0;
        ap_status st = ap_read_file(what, PROFILE_MAX_BYTES, &text, &len, err);
        if (st == AP_OK) st = ap_db_profile_parse_json(text, len, what, NULL, p, err);
        free(text);
        return st;
    }
    ap_profile_init(p);
    ap_db *db = NULL;
    int missing = 0;
    ap_status st = ap_cli_db_open_ro(fl, &db, &missing, err);
    if (st == AP_OK && missing)
        return ap_err_set(err, AP_ERR_INPUT, "profile compare: '%s' is neither a file nor a "
                          "stored profile (%s)", what, err->msg);
    if (st == AP_OK) st = ap_db_profile_get(db, what, p, err);
    if (st == AP_OK && p->n == 0)
        st = ap_err_set(err, AP_ERR_INPUT, "profile compare: '%s' is neither a file nor a profile "
                        "in %s (`autoplan profile list` shows them)", what, ap_db_path(db));
    ap_db_close(db);
    return st;
}

static void describe(const char *label, const ap_profile *p) {
    const ap_profile_row *r = &p->rows[0];
    printf("%s: %s  (%s, host %s, driver %s, CUDA %s, %zu rows)\n", label, p->name, r->gpu,
           r->host[0] ? ap_cli_safe(r->host) : "-",
           r->driver_version[0] ? ap_cli_safe(r->driver_version) : "-",
           r->cuda_version[0] ? ap_cli_safe(r->cuda_version) : "-", p->n);
}

int ap_cmd_profile_compare(int argc, char **argv) {
    ap_flags fl = {0};
    ap_cli_db_flag(&fl);
    int rc = ap_cli_subparse(&fl, argc, argv, 2, "autoplan profile compare A B [--db PATH]",
                             "Two profiles side by side. A and B are stored profile names or "
                             "profile files.\nRows of the same operation, shape and dtype are "
                             "matched; B/A is the ratio of their times\n(above 1: B is slower), "
                             "summarised per operation and dtype.");
    if (rc >= 0) return rc;
    ap_err err;
    if (fl.npos != 2) {
        ap_err_set(&err, AP_ERR_INPUT, "profile compare: needs two profiles A and B (names or "
                   "files)");
        return ap_cli_fail(AP_ERR_INPUT, &err);
    }
    ap_profile a, b;
    ap_profile_init(&b);
    ap_status st = load_either(&fl, fl.pos[0], &a, &err);
    if (st == AP_OK) st = load_either(&fl, fl.pos[1], &b, &err);
    ap_profile_cmp *c = NULL;
    size_t n = 0;
    if (st == AP_OK) st = ap_profile_compare(&a, &b, &c, &n, &err);
    if (st == AP_OK) {
        describe("A", &a);
        describe("B", &b);
        if (strcmp(a.rows[0].gpu, b.rows[0].gpu))
            printf("note: different GPU types: the ratios compare the two GPUs\n");
        printf("\n%-14s %-5s %7s %6s %6s %8s  %-36s %s\n", "OP", "DTYPE", "MATCHED", "ONLY A",
               "ONLY B", "B/A MED", "FASTEST IN B (B/A, SHAPE)", "SLOWEST IN B (B/A, SHAPE)");
        for (size_t i = 0; i < n; i++) {
            char lo[160] = "-", hi[160] = "-", med[16] = "-";
            if (c[i].matched) {
                snprintf(med, sizeof med, "%.3f", c[i].median_ratio);
                snprintf(lo, sizeof lo, "%.3f %.28s", c[i].min_ratio, c[i].min_shape);
                snprintf(hi, sizeof hi, "%.3f %.60s", c[i].max_ratio, c[i].max_shape);
            }
            printf("%-14s %-5s %7zu %6zu %6zu %8s  %-36s %s\n", c[i].op, c[i].dtype,
                   c[i].matched, c[i].only_a, c[i].only_b, med, lo, hi);
        }
    }
    free(c);
    ap_profile_free(&a);
    ap_profile_free(&b);
    return st == AP_OK ? 0 : ap_cli_fail(st, &err);
}
