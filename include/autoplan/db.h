/*
 * db.h - autoplan's SQLite store: the plan cache, GPU operator profiles and measured runs
 * (db/: one file per table over a thin statement wrapper, db/sqlite.c, the only file that
 * includes sqlite3.h; db/export.c does JSON/CSV export and import on top of this API;
 * cli/cmd_db.c is `autoplan db`). Schema: db/schema.sql, documented in docs/db.md.
 *
 * A database is an opaque ap_db handle. Every function returns ap_status and writes one line
 * naming the database path and the reason into the caller's ap_err; none of them prints. The
 * database is a cache and a record, never a requirement: when it cannot be opened or written
 * (corrupt file, another program's file, read-only file or directory, full disk, newer schema)
 * the call returns AP_ERR_DB (or AP_ERR_IO), leaves the file exactly as it was, and the caller
 * logs err.msg as a warning and carries on without it.
 *
 * Concurrency: any number of processes may open one database. Journal mode WAL with
 * synchronous=NORMAL (a committed transaction survives a process crash; a power loss may lose
 * the last few); where WAL is unavailable (network filesystems) journal_mode=DELETE with a
 * notice. Every write is one BEGIN IMMEDIATE transaction, waiting up to busy_timeout_ms for
 * other writers. An ap_db handle is for one thread at a time and must not cross fork().
 *
 * ---- How `autoplan plan` uses the cache -------------------------------------------------------
 *
 *     ap_db *db = NULL;
 *     ap_err e;
 *     if (!no_cache && ap_db_open(db_flag_or_NULL, 0, &db, &e) != AP_OK) {
 *         ap_log(AP_LOG_WARN, "%s; planning without the cache", e.msg);
 *         db = NULL;                     // every cache call below accepts NULL
 *     }
 *     uint64_t prof_fp = 0;
 *     ap_db_profiles_fingerprint(db, cluster.gpu_name, &prof_fp, &e);  // NULL db: no profiles
 *     // canonical text: everything the result depends on, in a fixed order, e.g.
 *     // "autoplan-plan/1\nversion=0.1.0\ncostmodel=3\ncatalog=2\nprofiles=<prof_fp hex>\n"
 *     // "model=<canonical model JSON>\ncluster=<...>\ntrainer=megatron\nsearch=<options>\n"
 *     char key[AP_DB_KEY_HEX + 1];
 *     ap_db_plan_key(canonical_text, key);
 *     char *json = NULL;
 *     double search_s = 0;
 *     if (ap_db_plan_get(db, key, &json, &search_s, &e) != AP_OK)
 *         ap_log(AP_LOG_WARN, "%s; planning without the cache", e.msg);
 *     if (json) {                        // hit: print it and say so (the search took search_s)
 *         ...; free(json);
 *     } else {                           // miss: search, then store the ranked result
 *         ...;
 *         if (ap_db_plan_put(db, key, one_line_summary, result_json, elapsed_s, &e) != AP_OK)
 *             ap_log(AP_LOG_WARN, "%s; the result was not cached", e.msg);
 *     }
 *     ap_db_close(db);                   // NULL is fine
 */
#ifndef AP_DB_H
#define AP_DB_H

#include <stddef.h>
#include <stdint.h>

#include "autoplan/common.h"
#include "autoplan/profile.h"

/* Highest schema version (PRAGMA user_version) this build reads and writes. */
#define AP_DB_SCHEMA_VERSION 2
/* PRAGMA application_id of an autoplan database: "APLN". */
#define AP_DB_APPLICATION_ID 0x41504C4E
/* Most ranks of a stored run: the most GPUs a cluster may have (ap_cluster_validate, 2^20). */
#define AP_DB_MAX_RANKS (1 << 20)
/* Length of a plan key in hex digits (128 bits). */
#define AP_DB_KEY_HEX 32

typedef struct ap_db ap_db;

/* ---- opening ------------------------------------------------------------------------------ */

typedef struct ap_db_opts {
    const char *path;      /* NULL: ap_db_default_path() (its directory is created) */
    int readonly;          /* 1: read only; never creates, migrates or writes the file */
    int no_wal;            /* 1: act as if WAL were unavailable: journal_mode=DELETE with a
                              notice. The environment variable AUTOPLAN_DB_NO_WAL=1 does the
                              same (that is how the tests force the fallback from the CLI). */
    int busy_timeout_ms;   /* how long a write waits for other writers; default 5000 */
    const char *vfs;       /* SQLite VFS name; NULL: the default. Tests use "unix-dotfile",
                              which has no shared memory, so WAL is really unavailable there
                              as on a network filesystem. Every process sharing a database
                              must use the same locking: not for production use. */
    int64_t max_pages;     /* > 0: PRAGMA max_page_count, the database cannot grow past it:
                              simulates a full disk in tests. 0: no limit (default). */
    /* Test hook: called inside every write transaction just before COMMIT. A nonzero return
       rolls the transaction back and the write fails with AP_ERR_DB ("injected failure").
       The kill -9 test blocks in it and is killed there. NULL (default): none. */
    int (*before_commit)(void *arg);
    void *hook_arg;
} ap_db_opts;

/* Defaults: path NULL, read-write, WAL, busy_timeout_ms 5000, no page limit, no hook. */
void ap_db_opts_init(ap_db_opts *o);

/* Open (creating and migrating as needed, unless readonly). On success *out is a handle the
 * caller closes with ap_db_close. On failure *out is NULL, err names the path and the reason,
 * and the file at the path is not modified. Refused with AP_ERR_DB: a file that is not SQLite
 * or is corrupt (a quick check of the tables on every open, ap_db_quick_check), a SQLite
 * database of another program, a schema version newer than
 * AP_DB_SCHEMA_VERSION, a missing directory (for an explicit path), an unwritable directory or
 * a read-only file (when readonly = 0). A read-only open of a path with no file: AP_ERR_IO; in
 * a directory it cannot write (where no -shm can be made) it opens the file as immutable. A
 * read-only open of a database with an older schema is refused (a writing open migrates it). */
ap_status ap_db_open_opts(const ap_db_opts *o, ap_db **out, ap_err *err);

/* ap_db_open_opts with defaults; path NULL = the default path. */
ap_status ap_db_open(const char *path, int readonly, ap_db **out, ap_err *err);

/* Close; NULL is a no-op. An open transaction is rolled back. */
void ap_db_close(ap_db *db);

/* The default database path into buf: $XDG_CACHE_HOME/autoplan/autoplan.db when
 * XDG_CACHE_HOME is set and absolute, else $HOME/.cache/autoplan/autoplan.db. create_dir: make
 * the directory (mode 0700 for new levels). AP_ERR_IO when HOME is unset or mkdir fails. */
ap_status ap_db_default_path(char *buf, size_t n, int create_dir, ap_err *err);

/* The path the handle was opened with (borrowed; valid until ap_db_close). */
const char *ap_db_path(const ap_db *db);
/* "wal" or "delete" (static string). */
const char *ap_db_journal_mode(const ap_db *db);
/* 1 when the handle cannot write (readonly open). */
int ap_db_is_readonly(const ap_db *db);
/* PRAGMA user_version of the open database. */
int ap_db_schema_version(const ap_db *db);
/* Rows in one table: "plans", "plan_results", "profiles", "runs" or "run_ranks". */
ap_status ap_db_count(ap_db *db, const char *table, int64_t *n, ap_err *err);
/* Files up to this size get their stored results quick-checked on every open; larger ones
 * before each store (ap_db_quick_check). */
#define AP_DB_QUICK_CHECK_BYTES (4.0 * 1048576.0)

/* PRAGMA quick_check of the tables (ap_db_open_opts runs it on every open): the plans index,
 * profiles and runs always, the stored results when results = 1 or the file is at most
 * AP_DB_QUICK_CHECK_BYTES. AP_ERR_DB "<path>: database file is corrupt (...)" otherwise. */
ap_status ap_db_quick_check(ap_db *db, int results, ap_err *err);

/* Run PRAGMA integrity_check: AP_OK when it answers "ok", else AP_ERR_DB with its first line. */
ap_status ap_db_integrity_check(ap_db *db, ap_err *err);

/* The schema text compiled into the binary (identical to db/schema.sql; static string). */
const char *ap_db_schema_sql(void);

/* ---- transactions -------------------------------------------------------------------------
 * Every write function below is atomic by itself. To make several writes one unit (importing a
 * file, a profiling sweep), bracket them: ap_db_begin (BEGIN IMMEDIATE), the writes (each then
 * runs in a SAVEPOINT: a failed one undoes only itself), ap_db_commit or ap_db_rollback. No
 * nesting of ap_db_begin. If SQLite rolled the whole transaction back after an error (it may on
 * a full disk or an I/O error), every later write and ap_db_commit fail: nothing of it is
 * stored. After ap_db_commit (whatever it returns) the handle is out of the transaction. */
ap_status ap_db_begin(ap_db *db, ap_err *err);
ap_status ap_db_commit(ap_db *db, ap_err *err);
void ap_db_rollback(ap_db *db);

/* ---- plan cache ---------------------------------------------------------------------------- */

/* The cache key of a canonical text (all inputs of a search, see the example above): 32
 * lower-case hex digits + NUL into out. Two independent 64-bit FNV-1a hashes with a final mix
 * (a 128-bit cache key, not a cryptographic hash). Pure function: same text, same key, on every
 * machine and build (tests/test_db.c pins golden values). */
void ap_db_plan_key(const char *canonical_text, char out[AP_DB_KEY_HEX + 1]);

/* Look a key up. Hit: *json_out = the stored result (caller frees with free()), *search_s =
 * the original search time (may be NULL), and the row's used_at is set to now when it is more
 * than an hour old and that does not have to wait for another writer (so repeated hits do not
 * write). Miss: AP_OK with *json_out = NULL. db NULL: a miss.
 * On a database error *json_out is NULL and the status is AP_ERR_DB (treat it as a miss). */
ap_status ap_db_plan_get(ap_db *db, const char *key, char **json_out, double *search_s,
                         ap_err *err);

/* Store (or replace) the result for key: summary is one line for `db list`, json the ranked
 * result (any text; stored as is), search_s the search's wall time. db NULL: does nothing,
 * AP_OK. AP_ERR_DB on failure (read-only, full disk, ...): nothing was written. */
ap_status ap_db_plan_put(ap_db *db, const char *key, const char *summary, const char *json,
                         double search_s, ap_err *err);

typedef struct ap_db_plan_info {
    int64_t id;
    char key[AP_DB_KEY_HEX + 1];
    char summary[256];       /* truncated to fit */
    double search_s;
    int64_t created_at, used_at; /* unix seconds; used_at: last hit, to the hour */
    int64_t json_bytes;
} ap_db_plan_info;

/* All cached plans, most recently used first. *rows: caller frees with free(). */
ap_status ap_db_plans_list(ap_db *db, ap_db_plan_info **rows, size_t *n, ap_err *err);
/* The stored result of a plan row by id, without counting a hit (caller frees; NULL if none). */
ap_status ap_db_plan_json(ap_db *db, int64_t id, char **json_out, ap_err *err);
/* Store a plan row as exported (keeping its timestamps); a key already stored is
 * left as it is (*added = 0). For `db import`. */
ap_status ap_db_plan_import(ap_db *db, const ap_db_plan_info *info, const char *json,
                            int *added, ap_err *err);
/* Delete plans not used (hit or stored) in the last older_than_s seconds; *deleted = count. */
ap_status ap_db_plans_gc(ap_db *db, double older_than_s, int64_t *deleted, ap_err *err);

/* ---- operator profiles --------------------------------------------------------------------- */

/* A stored profile row is the kernel-profile row (profile.h): its format, vocabulary and
 * validation live there; the store keeps it as it is. */
typedef ap_profile_row ap_db_profile;

/* Insert n rows in one transaction (all or none). A row equal to a stored one in every
 * identifying column (GPU, versions, op, shape, dtype, source_run) is skipped: *inserted (may
 * be NULL) counts the new rows. Rows are validated (required text, finite non-negative numbers,
 * time_s > 0, samples >= 1): AP_ERR_INPUT naming the row and field. */
ap_status ap_db_profiles_insert(ap_db *db, const ap_db_profile *rows, size_t n,
                                size_t *inserted, ap_err *err);
/* Rows for one catalog GPU (gpu NULL: all), ordered by gpu, device, versions, op, shape, dtype,
 * source run (the identifying columns). *rows:
 * caller frees with free(). */
ap_status ap_db_profiles_list(ap_db *db, const char *gpu, ap_db_profile **rows, size_t *n,
                              ap_err *err);
/* A fingerprint of the profile rows of one catalog GPU (their content, not their ids or
 * insertion order), for the plan cache key: importing or measuring a profile changes it, so a
 * cached plan made without that profile misses. No rows (or db NULL): a fixed value. Cost: one
 * index walk, about 2 us per row of that GPU (db_bench: 2000 rows in ~3 ms). */
ap_status ap_db_profiles_fingerprint(ap_db *db, const char *gpu, uint64_t *fp, ap_err *err);

/* ---- named profiles --------------------------------------------------------------------------
 * A measured profile is the set of rows sharing one source_run (its name), measured on one
 * machine: `autoplan profile bench|attach --name N`, `profile import`. Rows with source_run ""
 * or "published" belong to no measured profile. */

typedef struct ap_db_profile_info {
    char name[64];
    char gpu[64];
    char device_name[128];
    char host[64];
    char driver_version[32], cuda_version[32];
    char mig_mode[32];
    double sm_clock_mhz, mem_clock_mhz;
    int64_t rows;
    int64_t created_at;      /* of its newest row */
} ap_db_profile_info;

/* Measured profiles (of one catalog GPU; gpu NULL: all), newest first. *out: caller frees. */
ap_status ap_db_profile_names(ap_db *db, const char *gpu, ap_db_profile_info **out, size_t *n,
                              ap_err *err);
/* The rows of profile `name` into out (initialised here; free with ap_profile_free): out->name
 * and out->gpu set, rows ordered by op, shape, dtype. A stored row that fails the format's
 * check (a version-1 row of another vocabulary) is left out with a warning. No such profile:
 * AP_OK with out->n = 0. */
ap_status ap_db_profile_get(ap_db *db, const char *name, ap_profile *out, ap_err *err);
/* The newest measured profile of a catalog GPU into name (NUL-terminated, 64 bytes); "" when
 * there is none or db is NULL. */
ap_status ap_db_profile_newest(ap_db *db, const char *gpu, char name[64], ap_err *err);
/* Delete every row of profile `name`; *deleted (may be NULL) = rows removed. */
ap_status ap_db_profile_delete(ap_db *db, const char *name, int64_t *deleted, ap_err *err);

/* ---- profile files (db/profile_json.c; format in docs/profiles.md) -------------------------
 * One profile as JSON, so a profile measured on an H100 plans on a laptop:
 * {"format": "autoplan-profile", "format_version": 1, "name", "gpu", "device": {...},
 *  "rows": [{"op", "shape", "dtype", "time_s", ...}]}. */

/* Is `name` usable as a profile name: 1..63 bytes of [A-Za-z0-9._-], not "published" and not
 * "none" (they mean something else to --profile). Errors start with `what` (a flag or field). */
ap_status ap_db_profile_check_name(const char *name, const char *what, ap_err *err);
/* Text of profile p (rows must share their device fields; p->n >= 1). *out: caller frees. */
ap_status ap_db_profile_format_json(const ap_profile *p, char **out, ap_err *err);
/* Parse and validate a profile file into out (initialised here; free with ap_profile_free):
 * every row through ap_profile_row_check, every field typed and bounded, unknown fields
 * refused; errors "<where>: rows[3]: field 'time_s': ...". rename: store under this name
 * instead of the file's (NULL: keep). */
ap_status ap_db_profile_parse_json(const char *text, size_t len, const char *where,
                                   const char *rename, ap_profile *out, ap_err *err);
/* ap_db_profile_get + ap_db_profile_format_json. AP_ERR_INPUT when there is no such profile. */
ap_status ap_db_profile_export_json(ap_db *db, const char *name, char **out, ap_err *err);
/* Parse, then store in one transaction. A profile of that name already stored for another
 * machine (GPU, device, host, versions, clocks or MIG mode differ) is refused (AP_ERR_INPUT,
 * suggesting --name); the same profile again adds nothing. *added (may be NULL): new rows;
 * name_out (may be NULL, 64 bytes): the name stored under. */
ap_status ap_db_profile_import_json(ap_db *db, const char *text, size_t len, const char *where,
                                    const char *rename, size_t *added, char *name_out,
                                    ap_err *err);

/* ---- executed runs -------------------------------------------------------------------------- */

typedef struct ap_db_run_rank {
    int64_t rank;
    double predicted_step_s, measured_step_s;
    double predicted_peak_bytes, measured_peak_bytes;
} ap_db_run_rank;

typedef struct ap_db_run {
    int64_t id;              /* set by insert and list */
    char uid[AP_DB_KEY_HEX + 1]; /* set by insert and list: hash of the run's identity */
    char plan_key[AP_DB_KEY_HEX + 1]; /* "" when the plan did not come from the cache */
    char *plan_json;         /* the executed plan.json: borrowed by insert; owned by list
                                results (freed by ap_db_runs_free) */
    char host[128];
    char backend[32];        /* "cpu", "cuda" */
    int64_t started_at;      /* unix seconds; 0 on insert = now */
    int64_t ranks;           /* number of ranks */
    double predicted_step_s, measured_step_s;       /* whole step */
    double predicted_peak_bytes, measured_peak_bytes; /* max over ranks */
} ap_db_run;

/* Insert a run and its nranks per-rank rows in one transaction: all land or none. The uid is
 * computed from host, backend, started_at, plan_key and plan_json; a run with a stored uid is
 * skipped (AP_OK, *id_out = the stored id). id_out may be NULL. */
ap_status ap_db_run_insert(ap_db *db, const ap_db_run *run, const ap_db_run_rank *ranks,
                           size_t nranks, int64_t *id_out, ap_err *err);
/* All runs, newest first; free with ap_db_runs_free. */
ap_status ap_db_runs_list(ap_db *db, ap_db_run **rows, size_t *n, ap_err *err);
void ap_db_runs_free(ap_db_run *rows, size_t n);
/* The per-rank rows of one run, by rank; caller frees *ranks with free(). */
ap_status ap_db_run_ranks(ap_db *db, int64_t run_id, ap_db_run_rank **ranks, size_t *n,
                          ap_err *err);

/* ---- export / import (db/export.c) ------------------------------------------------------------ */

/* The whole database as JSON (the format docs/db.md describes and ap_db_import_json reads).
 * *out: caller frees with free(). */
ap_status ap_db_export_json(ap_db *db, char **out, ap_err *err);
/* One table as CSV with a header line ("plans", "profiles" or "runs"). */
ap_status ap_db_export_csv(ap_db *db, const char *table, char **out, ap_err *err);

typedef struct ap_db_import_counts {
    size_t plans, profiles, runs;          /* rows in the file */
    size_t plans_new, profiles_new, runs_new; /* rows that were not already stored */
} ap_db_import_counts;

/* Import text in the export format. Validated like any user input before anything is written:
 * AP_ERR_INPUT "<where>: <field path>: <reason>" on the first problem. Atomic: all rows or
 * none. counts may be NULL. db NULL: validate only, nothing written; the counts are then the
 * file's rows. */
ap_status ap_db_import_json(ap_db *db, const char *text, size_t len, const char *where,
                            ap_db_import_counts *counts, ap_err *err);


#endif
