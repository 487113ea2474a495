/*
 * db.c - autoplan's SQLite store (see include/autoplan/db.h and docs/db.md). The only file that
 * includes sqlite3.h.
 *
 * Structure: opening (path checks before SQLite touches anything, a read-only probe of the
 * header and schema, journal mode, migrations), a write-transaction wrapper (BEGIN IMMEDIATE,
 * or a SAVEPOINT inside ap_db_begin), then the plan cache, profiles and runs. Every statement
 * is prepared with bound parameters; nothing is formatted into SQL text.
 *
 * What it does not do: JSON/CSV export and import (db/export.c), printing (cli/cmd_db.c).
 *
 * "Never modify a file we cannot use": every reason to refuse a database (not SQLite, corrupt,
 * another program's, newer schema, read-only, unwritable directory) is detected before the
 * first write, so a refused file keeps its bytes and mtime; a write that fails midway (full
 * disk, kill -9) is rolled back by SQLite's journal.
 */
#include "autoplan/db.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* db/schema.sql, byte for byte (tests/test_db.c compares them). */
static const char schema_sql[] =
    "-- schema.sql - the autoplan database (see docs/db.md).\n"
    "--\n"
    "-- One file per migration step would scatter the schema; instead each step is a section that\n"
    "-- starts with a line \"-- @version N\". db/db.c applies, in one BEGIN IMMEDIATE transaction, every\n"
    "-- section whose N is above the file's PRAGMA user_version, then sets user_version to the last N.\n"
    "-- db/db.c embeds this text as a C string; tests/test_db.c checks the two are identical.\n"
    "-- Sections are append-only: a released section is never edited, a change is a new section.\n"
    "--\n"
    "-- Units are in the column names: _s seconds, _bytes bytes, _at unix seconds (UTC), _mhz, _w.\n"
    "\n"
    "-- @version 1\n"
    "\n"
    "-- The plan cache. key = ap_db_plan_key() of the canonical model, cluster, trainer, search\n"
    "-- options and calibration fingerprint; a changed input is a different key, so rows are never\n"
    "-- invalidated in place, only collected by `autoplan db gc`. The result lives in its own table:\n"
    "-- SQLite rewrites a whole record on UPDATE, and counting a hit must not rewrite a 1 MB result.\n"
    "CREATE TABLE plans (\n"
    "    id           INTEGER PRIMARY KEY,\n"
    "    key          TEXT NOT NULL UNIQUE,     -- 32 hex digits\n"
    "    summary      TEXT NOT NULL,            -- one line for `autoplan db list`\n"
    "    search_s     REAL NOT NULL,            -- wall time of the search that produced it\n"
    "    created_at   INTEGER NOT NULL,\n"
    "    used_at      INTEGER NOT NULL,         -- last hit, to the hour (or created_at); gc reads it\n"
    "    result_bytes INTEGER NOT NULL          -- length of plan_results.result_json\n"
    ");\n"
    "CREATE INDEX plans_used_at ON plans(used_at);\n"
    "CREATE TABLE plan_results (\n"
    "    plan_id     INTEGER PRIMARY KEY REFERENCES plans(id) ON DELETE CASCADE,\n"
    "    result_json TEXT NOT NULL              -- the ranked search result, as `autoplan plan` prints it\n"
    ");\n"
    "\n"
    "-- Operator profiles measured on a real GPU (the profiler fills this table; `db import` shares\n"
    "-- it between machines). Text columns are NOT NULL DEFAULT '' so the UNIQUE constraint, which\n"
    "-- makes importing the same file twice a no-op, sees equal rows as equal (NULLs are distinct).\n"
    "CREATE TABLE profiles (\n"
    "    id             INTEGER PRIMARY KEY,\n"
    "    gpu            TEXT NOT NULL,          -- catalog SKU it calibrates: \"h100-sxm\"\n"
    "    device_name    TEXT NOT NULL DEFAULT '', -- as the driver reports it\n"
    "    pci_id         TEXT NOT NULL DEFAULT '', -- \"10de:2330\"\n"
    "    sm_count       INTEGER NOT NULL DEFAULT 0,\n"
    "    mem_bytes      REAL NOT NULL DEFAULT 0,\n"
    "    sm_clock_mhz   REAL NOT NULL DEFAULT 0,\n"
    "    mem_clock_mhz  REAL NOT NULL DEFAULT 0,\n"
    "    power_limit_w  REAL NOT NULL DEFAULT 0,\n"
    "    driver_version TEXT NOT NULL DEFAULT '',\n"
    "    cuda_version   TEXT NOT NULL DEFAULT '',\n"
    "    cublas_version TEXT NOT NULL DEFAULT '',\n"
    "    nccl_version   TEXT NOT NULL DEFAULT '',\n"
    "    mig_mode       TEXT NOT NULL DEFAULT 'off', -- \"off\" or the MIG profile, \"1g.10gb\"\n"
    "    op             TEXT NOT NULL,          -- operator kind: \"gemm\", \"flash_attn\", \"allreduce\"\n"
    "    shape          TEXT NOT NULL,          -- \"m=8192,n=8192,k=8192\"\n"
    "    dtype          TEXT NOT NULL,          -- \"bf16\"\n"
    "    time_s         REAL NOT NULL,          -- median time of one call\n"
    "    flops_per_s    REAL NOT NULL DEFAULT 0, -- achieved FLOP/s (0: not a compute op)\n"
    "    bytes_per_s    REAL NOT NULL DEFAULT 0, -- achieved bandwidth (0: not a memory/comm op)\n"
    "    bytes          REAL NOT NULL DEFAULT 0, -- bytes moved by one call\n"
    "    samples        INTEGER NOT NULL,       -- timed repetitions behind time_s\n"
    "    spread         REAL NOT NULL DEFAULT 0, -- (max - min) / median of the samples\n"
    "    source_run     TEXT NOT NULL DEFAULT '', -- id of the profiling run that measured it\n"
    "    created_at     INTEGER NOT NULL,\n"
    "    UNIQUE (gpu, device_name, pci_id, driver_version, cuda_version, cublas_version,\n"
    "            nccl_version, mig_mode, op, shape, dtype, source_run)\n"
    ");\n"
    "CREATE INDEX profiles_gpu ON profiles(gpu, op, dtype);\n"
    "\n"
    "-- Executed plans: what was predicted and what was measured. A run and its per-rank rows are\n"
    "-- written in one transaction. uid (a hash of the run's identity) makes imports idempotent.\n"
    "CREATE TABLE runs (\n"
    "    id                   INTEGER PRIMARY KEY,\n"
    "    uid                  TEXT NOT NULL UNIQUE,\n"
    "    plan_key             TEXT NOT NULL DEFAULT '', -- plans.key when the plan came from the cache\n"
    "    plan_json            TEXT NOT NULL,            -- the plan.json that was executed\n"
    "    host                 TEXT NOT NULL,\n"
    "    backend              TEXT NOT NULL,            -- \"cpu\", \"cuda\"\n"
    "    started_at           INTEGER NOT NULL,\n"
    "    ranks                INTEGER NOT NULL,\n"
    "    predicted_step_s     REAL NOT NULL,\n"
    "    measured_step_s      REAL NOT NULL,\n"
    "    predicted_peak_bytes REAL NOT NULL,            -- max over ranks\n"
    "    measured_peak_bytes  REAL NOT NULL             -- max over ranks\n"
    ");\n"
    "CREATE TABLE run_ranks (\n"
    "    run_id               INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,\n"
    "    rank                 INTEGER NOT NULL,\n"
    "    predicted_step_s     REAL NOT NULL,\n"
    "    measured_step_s      REAL NOT NULL,\n"
    "    predicted_peak_bytes REAL NOT NULL,\n"
    "    measured_peak_bytes  REAL NOT NULL,\n"
    "    PRIMARY KEY (run_id, rank)\n"
    ") WITHOUT ROWID;\n";

struct ap_db {
    sqlite3 *h;
    char *path;
    int readonly;
    int wal;
    int in_txn;          /* inside ap_db_begin */
    int version;         /* PRAGMA user_version */
    int fresh;           /* an empty file: no schema yet */
    int busy_ms;
    int (*before_commit)(void *arg);
    void *hook_arg;
};

const char *ap_db_schema_sql(void) { return schema_sql; }

/* ---- errors ----------------------------------------------------------------------------------- */

/* A short human reason for an SQLite result code. */
static const char *rc_reason(int rc) {
    switch (rc & 0xff) {
    case SQLITE_FULL: return "database or disk is full";
    case SQLITE_READONLY: return "database is read-only";
    case SQLITE_NOTADB: return "not an SQLite database";
    case SQLITE_CORRUPT: return "database file is corrupt";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "database is locked by another process";
    case SQLITE_CANTOPEN: return "cannot open the database file";
    case SQLITE_IOERR: return "I/O error";
    case SQLITE_PERM: return "permission denied";
    case SQLITE_NOMEM: return "out of memory";
    default: return "SQLite error";
    }
}

static ap_status db_fail(ap_db *db, int rc, const char *doing, ap_err *err) {
    const char *detail = db && db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    const char *reason = rc_reason(rc);
    if (detail && strcmp(detail, reason) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: %s (%s)", db ? db->path : "?", doing, reason,
                          detail);
    return ap_err_set(err, AP_ERR_DB, "%s: %s: %s", db ? db->path : "?", doing, reason);
}

/* ---- small statement helpers -------------------------------------------------------------------- */

static int exec(ap_db *db, const char *sql) { return sqlite3_exec(db->h, sql, NULL, NULL, NULL); }

static int prepare(ap_db *db, const char *sql, sqlite3_stmt **st) {
    return sqlite3_prepare_v2(db->h, sql, -1, st, NULL);
}

/* One integer from a one-row query (a PRAGMA). */
static int query_int(ap_db *db, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, sql, &st);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            *out = 0;
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

/* One text value from a one-row query into buf. */
static int query_text(ap_db *db, const char *sql, char *buf, size_t n) {
    sqlite3_stmt *st = NULL;
    buf[0] = '\0';
    int rc = prepare(db, sql, &st);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const unsigned char *t = sqlite3_column_text(st, 0);
            snprintf(buf, n, "%s", t ? (const char *)t : "");
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

static void copy_col(sqlite3_stmt *st, int col, char *buf, size_t n) {
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(buf, n, "%s", t ? (const char *)t : "");
}

static char *dup_col(sqlite3_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    int len = sqlite3_column_bytes(st, col);
    char *s = malloc((size_t)len + 1);
    if (!s) return NULL;
    if (len > 0) memcpy(s, t, (size_t)len);
    s[len] = '\0';
    return s;
}

/* ---- write transactions ------------------------------------------------------------------------- */

/* After some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_BUSY) SQLite may roll back
 * the whole transaction by itself (SQLite docs, "Response To Errors Within A Transaction").
 * Inside ap_db_begin that must not go unnoticed: later writes would run, and commit, on their
 * own. So every write and the commit check that the transaction is still open. */
static ap_status txn_alive(ap_db *db, const char *doing, ap_err *err) {
    if (db->in_txn && sqlite3_get_autocommit(db->h))
        return ap_err_set(err, AP_ERR_DB, "%s: %s: the transaction was rolled back after an "
                          "earlier error; nothing of it was stored", db->path, doing);
    return AP_OK;
}

static ap_status wbegin(ap_db *db, const char *doing, ap_err *err) {
    if (db->readonly)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: the database was opened read-only", db->path,
                          doing);
    ap_status st = txn_alive(db, doing, err);
    if (st != AP_OK) return st;
    int rc = exec(db, db->in_txn ? "SAVEPOINT ap_write" : "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return db_fail(db, rc, doing, err);
    return AP_OK;
}

static ap_status run_hook(ap_db *db, const char *doing, ap_err *err) {
    if (db->before_commit && db->before_commit(db->hook_arg) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: injected failure before commit", db->path,
                          doing);
    return AP_OK;
}

/* Finish a write started by wbegin: commit when st is AP_OK, else roll back. Returns the final
 * status (a failed COMMIT turns AP_OK into AP_ERR_DB). */
static ap_status wend(ap_db *db, ap_status st, const char *doing, ap_err *err) {
    if (db->in_txn) {
        if (!sqlite3_get_autocommit(db->h)) {
            if (st != AP_OK) exec(db, "ROLLBACK TO ap_write");
            exec(db, "RELEASE ap_write");
        }
        return st;
    }
    if (st == AP_OK) st = run_hook(db, doing, err);
    if (st == AP_OK) {
        int rc = exec(db, "COMMIT");
        if (rc == SQLITE_OK) return AP_OK;
        st = db_fail(db, rc, doing, err);
    }
    if (!sqlite3_get_autocommit(db->h)) exec(db, "ROLLBACK");
    return st;
}

ap_status ap_db_begin(ap_db *db, ap_err *err) {
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    if (db->in_txn)
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: ap_db_begin inside a transaction", db->path);
    ap_status st = wbegin(db, "starting a transaction", err);
    if (st == AP_OK) db->in_txn = 1;
    return st;
}

ap_status ap_db_commit(ap_db *db, ap_err *err) {
    if (!db || !db->in_txn) return ap_err_set(err, AP_ERR_INTERNAL, "commit without ap_db_begin");
    ap_status st = txn_alive(db, "committing", err);
    db->in_txn = 0;
    if (st != AP_OK) return st;
    return wend(db, AP_OK, "committing", err);
}

void ap_db_rollback(ap_db *db) {
    if (!db || !db->in_txn) return;
    db->in_txn = 0;
    if (!sqlite3_get_autocommit(db->h)) exec(db, "ROLLBACK");
}

/* ---- paths ---------------------------------------------------------------------------------------- */

static int mkdir_p(char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0) return S_ISDIR(sb.st_mode) ? 0 : -1;
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int r = mkdir_p(dir);
        *slash = '/';
        if (r != 0) return r;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return -1;
    return 0;
}

ap_status ap_db_default_path(char *buf, size_t n, int create_dir, ap_err *err) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len;
    /* XDG Base Directory spec: a relative XDG_CACHE_HOME is invalid and must be ignored. */
    if (xdg && xdg[0] == '/') len = snprintf(buf, n, "%s/autoplan", xdg);
    else if (home && home[0]) len = snprintf(buf, n, "%s/.cache/autoplan", home);
    else
        return ap_err_set(err, AP_ERR_IO, "default database path: neither XDG_CACHE_HOME nor "
                          "HOME is set; give --db PATH");
    if (len < 0 || (size_t)len + sizeof "/autoplan.db" > n)
        return ap_err_set(err, AP_ERR_IO, "default database path: too long");
    if (create_dir && mkdir_p(buf) != 0)
        return ap_err_set(err, AP_ERR_IO, "%s: cannot create the database directory: %s", buf,
                          strerror(errno));
    strcat(buf, "/autoplan.db");
    return AP_OK;
}

/* The directory part of path ("." when none) into buf. */
static void dir_of(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, n, ".");
    else if (slash == path) snprintf(buf, n, "/");
    else snprintf(buf, n, "%.*s", (int)(slash - path), path);
}

/* ---- opening -------------------------------------------------------------------------------------- */

void ap_db_opts_init(ap_db_opts *o) {
    memset(o, 0, sizeof *o);
    o->busy_timeout_ms = 5000;
}

static int env_no_wal(void) {
    const char *e = getenv("AUTOPLAN_DB_NO_WAL");
    return e && e[0] && strcmp(e, "0") != 0;
}

/* The migration sections of the schema: a line "-- @version N" starts section N. Runs every
 * section with N > from, in order; *to = the last N. */
static int apply_sections(ap_db *db, int from, int *to, char *failed_sql, size_t n) {
    static const char marker[] = "\n-- @version ";
    const char *p = strstr(schema_sql, marker);
    *to = from;
    while (p) {
        int ver = atoi(p + sizeof marker - 1);
        const char *body = strchr(p + 1, '\n');
        if (!body) break;
        const char *next = strstr(body, marker);
        size_t len = next ? (size_t)(next - body) : strlen(body);
        if (ver > from) {
            char *sql = malloc(len + 1);
            if (!sql) return SQLITE_NOMEM;
            memcpy(sql, body, len);
            sql[len] = '\0';
            int rc = exec(db, sql);
            free(sql);
            if (rc != SQLITE_OK) {
                snprintf(failed_sql, n, "version %d", ver);
                return rc;
            }
            *to = ver;
        }
        p = next;
    }
    return SQLITE_OK;
}

static ap_status migrate(ap_db *db, ap_err *err) {
    int rc = exec(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return db_fail(db, rc, "starting the schema migration", err);
    int64_t v = 0, app = 0;
    /* Re-read inside the write lock: another process may have migrated meanwhile. */
    rc = query_int(db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK) rc = query_int(db, "PRAGMA application_id", &app);
    if (rc != SQLITE_OK) {
        ap_status st = db_fail(db, rc, "reading the schema version", err);
        exec(db, "ROLLBACK");
        return st;
    }
    if (v > AP_DB_SCHEMA_VERSION) {
        exec(db, "ROLLBACK");
        return ap_err_set(err, AP_ERR_DB, "%s: database schema version %lld is newer than this "
                          "autoplan understands (%d); upgrade autoplan or use another --db; the "
                          "file was not modified", db->path, (long long)v, AP_DB_SCHEMA_VERSION);
    }
    if (v < AP_DB_SCHEMA_VERSION) {
        char which[64] = "";
        int to = (int)v;
        rc = apply_sections(db, (int)v, &to, which, sizeof which);
        char pragma[96];
        if (rc == SQLITE_OK && to != AP_DB_SCHEMA_VERSION) rc = SQLITE_INTERNAL;
        if (rc == SQLITE_OK && app == 0) {
            snprintf(pragma, sizeof pragma, "PRAGMA application_id = %d", AP_DB_APPLICATION_ID);
            rc = exec(db, pragma);
        }
        if (rc == SQLITE_OK) {
            snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", AP_DB_SCHEMA_VERSION);
            rc = exec(db, pragma);
        }
        if (rc != SQLITE_OK) {
            char doing[160];
            snprintf(doing, sizeof doing, "migrating the schema from version %lld to %d (%s) "
                     "failed, nothing was changed", (long long)v, AP_DB_SCHEMA_VERSION, which);
            ap_status st = db_fail(db, rc, doing, err);
            exec(db, "ROLLBACK");
            return st;
        }
        ap_log(AP_LOG_INFO, "%s: schema migrated from version %lld to %d", db->path, (long long)v,
               AP_DB_SCHEMA_VERSION);
    }
    rc = exec(db, "COMMIT");
    if (rc != SQLITE_OK) {
        ap_status st = db_fail(db, rc, "committing the schema migration", err);
        exec(db, "ROLLBACK");
        return st;
    }
    db->version = AP_DB_SCHEMA_VERSION;
    return AP_OK;
}

/* Check what is at the path before SQLite opens it (SQLite would create or write files). */
static ap_status check_path(const char *path, int readonly, int *exists, ap_err *err) {
    struct stat sb;
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    *exists = stat(path, &sb) == 0;
    if (*exists && S_ISDIR(sb.st_mode))
        return ap_err_set(err, AP_ERR_DB, "%s: is a directory, not a database file", path);
    if (*exists && !S_ISREG(sb.st_mode))
        return ap_err_set(err, AP_ERR_DB, "%s: not a regular file", path);
    if (!*exists) {
        if (errno != ENOENT)
            return ap_err_set(err, AP_ERR_DB, "%s: cannot open: %s", path, strerror(errno));
        if (readonly) return ap_err_set(err, AP_ERR_IO, "%s: no database there yet", path);
        struct stat ds;
        if (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode))
            return ap_err_set(err, AP_ERR_DB, "%s: directory %s does not exist", path, dir);
    }
    if (readonly) {
        if (access(path, R_OK) != 0)
            return ap_err_set(err, AP_ERR_DB, "%s: cannot read: %s", path, strerror(errno));
        return AP_OK;
    }
    if (*exists && access(path, R_OK | W_OK) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: database file is read-only (%s); results cannot "
                          "be stored there", path, strerror(errno));
    /* The journal (-wal/-shm or -journal) lives beside the file: no writable directory, no
     * transactions, and a new database could not be created. */
    if (access(dir, W_OK | X_OK) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: directory %s is not writable (%s); results "
                          "cannot be stored there", path, dir, strerror(errno));
    return AP_OK;
}

static ap_status probe(ap_db *db, ap_err *err) {
    int64_t v = 0, app = 0, objects = 0;
    /* One read transaction, so the three answers come from one snapshot: another process may
     * be committing the first migration right now. */
    int rc = exec(db, "BEGIN");
    if (rc == SQLITE_OK) rc = query_int(db, "PRAGMA user_version", &v);
    if (rc == SQLITE_OK) rc = query_int(db, "PRAGMA application_id", &app);
    /* Parsing the schema reads page 1 and every CREATE statement: catches most corruption
     * without reading the whole file. */
    if (rc == SQLITE_OK) rc = query_int(db, "SELECT count(*) FROM sqlite_schema", &objects);
    ap_status st = AP_OK;
    if (rc != SQLITE_OK) st = db_fail(db, rc, "unusable database, left as it is", err);
    if (!sqlite3_get_autocommit(db->h)) exec(db, "COMMIT");
    if (st != AP_OK) return st;
    if (app != 0 && app != AP_DB_APPLICATION_ID)
        return ap_err_set(err, AP_ERR_DB, "%s: an SQLite database of another program "
                          "(application_id 0x%08llx), not autoplan's; left as it is", db->path,
                          (unsigned long long)(uint32_t)app);
    if (app == 0 && objects > 0)
        return ap_err_set(err, AP_ERR_DB, "%s: an SQLite database of another program (it has "
                          "tables but no autoplan schema); left as it is", db->path);
    if (v > AP_DB_SCHEMA_VERSION)
        return ap_err_set(err, AP_ERR_DB, "%s: database schema version %lld is newer than this "
                          "autoplan understands (%d); upgrade autoplan or use another --db; the "
                          "file was not modified", db->path, (long long)v, AP_DB_SCHEMA_VERSION);
    db->version = (int)v;
    db->fresh = v == 0 && objects == 0;
    return AP_OK;
}

static ap_status set_journal(ap_db *db, int want_wal, ap_err *err) {
    char mode[32];
    int rc = query_text(db, "PRAGMA journal_mode", mode, sizeof mode);
    if (rc != SQLITE_OK) return db_fail(db, rc, "reading the journal mode", err);
    if (db->readonly) {
        db->wal = strcmp(mode, "wal") == 0;
        return AP_OK;
    }
    if (want_wal) {
        /* Switching to WAL needs an exclusive lock, and SQLite does not call the busy handler
         * for it (the statement already holds a shared lock: waiting could deadlock). When
         * several processes open a new database at once, all but one get SQLITE_BUSY: wait a
         * little, look again (the winner has usually switched it already), up to busy_ms. */
        for (int waited_ms = 0; strcmp(mode, "wal") != 0;) {
            rc = query_text(db, "PRAGMA journal_mode=WAL", mode, sizeof mode);
            if (rc == SQLITE_OK) break;
            if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
                return db_fail(db, rc, "setting the journal mode", err);
            if (waited_ms >= db->busy_ms) return db_fail(db, rc, "setting the journal mode", err);
            struct timespec ts = {0, 2 * 1000000L};
            nanosleep(&ts, NULL);
            waited_ms += 2;
            rc = query_text(db, "PRAGMA journal_mode", mode, sizeof mode);
            if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
                return db_fail(db, rc, "reading the journal mode", err);
        }
        if (strcmp(mode, "wal") == 0) {
            db->wal = 1;
            return AP_OK;
        }
        ap_log(AP_LOG_WARN, "%s: WAL journal unavailable here (network filesystem?); using "
               "journal_mode=DELETE: concurrent readers wait for writers", db->path);
    } else {
        ap_log(AP_LOG_INFO, "%s: WAL disabled (AUTOPLAN_DB_NO_WAL or no_wal); using "
               "journal_mode=DELETE", db->path);
    }
    if (strcmp(mode, "delete") != 0) {
        rc = query_text(db, "PRAGMA journal_mode=DELETE", mode, sizeof mode);
        if (rc != SQLITE_OK || strcmp(mode, "delete") != 0) {
            /* Leaving WAL needs exclusive access; while others have it open, stay in WAL. */
            ap_log(AP_LOG_WARN, "%s: could not leave WAL mode while the database is in use; "
                   "keeping journal_mode=%s", db->path, mode[0] ? mode : "wal");
            db->wal = strcmp(mode, "wal") == 0 || mode[0] == '\0';
            return AP_OK;
        }
    }
    db->wal = 0;
    return AP_OK;
}

/* Reading a WAL database needs its -shm file, which cannot be created in a directory we cannot
 * write (SQLite docs, "WAL mode: read-only databases"). There, when no -wal or -shm exists,
 * open it as immutable: with no writable directory no writer can exist either (a writer needs
 * to create -wal, -shm or -journal beside the file), so the file cannot change under us.
 * Returns a "file:" URI (caller frees) or NULL to open the plain path. */
static char *immutable_uri(const char *path) {
    char dir[4096], side[4200];
    struct stat sb;
    dir_of(path, dir, sizeof dir);
    if (access(dir, W_OK) == 0) return NULL;
    snprintf(side, sizeof side, "%s-wal", path);
    if (stat(side, &sb) == 0 && sb.st_size > 0) return NULL;
    snprintf(side, sizeof side, "%s-shm", path);
    if (stat(side, &sb) == 0) return NULL;
    size_t n = strlen(path);
    char *uri = malloc(3 * n + 32);
    if (!uri) return NULL;
    char *q = uri + sprintf(uri, "file:");
    for (const char *p = path; *p; p++) {
        /* RFC 3986 escapes for the characters a file: URI gives a meaning to */
        if (*p == '?' || *p == '#' || *p == '%') q += sprintf(q, "%%%02X", (unsigned char)*p);
        else *q++ = *p;
    }
    strcpy(q, "?immutable=1");
    return uri;
}

ap_status ap_db_open_opts(const ap_db_opts *o, ap_db **out, ap_err *err) {
    *out = NULL;
    ap_db_opts defaults;
    if (!o) {
        ap_db_opts_init(&defaults);
        o = &defaults;
    }
    char defpath[4096];
    const char *path = o->path;
    if (!path) {
        ap_status st = ap_db_default_path(defpath, sizeof defpath, !o->readonly, err);
        if (st != AP_OK) return st;
        path = defpath;
    }
    if (!path[0]) return ap_err_set(err, AP_ERR_INPUT, "--db: empty database path");
    int exists = 0;
    ap_status st = check_path(path, o->readonly, &exists, err);
    if (st != AP_OK) return st;

    ap_db *db = calloc(1, sizeof *db);
    if (!db || !(db->path = strdup(path))) {
        free(db);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
    }
    db->readonly = o->readonly;
    db->busy_ms = o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000;
    db->before_commit = o->before_commit;
    db->hook_arg = o->hook_arg;
    int flags = o->readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    char *uri = o->readonly ? immutable_uri(path) : NULL;
    if (uri) flags |= SQLITE_OPEN_URI;
    int rc = sqlite3_open_v2(uri ? uri : path, &db->h, flags | SQLITE_OPEN_NOMUTEX, o->vfs);
    free(uri);
    if (rc != SQLITE_OK) {
        st = db_fail(db, rc, "cannot open", err);
        ap_db_close(db);
        return st;
    }
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, db->busy_ms);
    if (!o->readonly && sqlite3_db_readonly(db->h, "main") == 1) {
        st = ap_err_set(err, AP_ERR_DB, "%s: database file is read-only; results cannot be "
                        "stored there", path);
        ap_db_close(db);
        return st;
    }
    st = probe(db, err);
    if (st == AP_OK && o->readonly && db->version < AP_DB_SCHEMA_VERSION)
        st = ap_err_set(err, AP_ERR_DB, "%s: database schema version %d is older than this "
                        "autoplan's (%d); any command that writes to it migrates it", path,
                        db->version, AP_DB_SCHEMA_VERSION);
    /* A new file: incremental auto-vacuum lets gc give the pages of deleted results back to
     * the filesystem. SQLite takes it only before page 1 is written, outside a transaction,
     * so before the switch to WAL (which writes page 1) and the migration. */
    if (st == AP_OK && !o->readonly && db->fresh) {
        rc = exec(db, "PRAGMA auto_vacuum = INCREMENTAL");
        if (rc != SQLITE_OK) st = db_fail(db, rc, "setting auto_vacuum", err);
    }
    if (st == AP_OK) st = set_journal(db, !(o->no_wal || env_no_wal()), err);
    if (st == AP_OK) {
        /* NORMAL in WAL mode: commits survive a process crash; only power loss can drop the
         * last transactions (SQLite docs, "PRAGMA synchronous"). */
        rc = exec(db, db->wal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL");
        if (rc == SQLITE_OK) rc = exec(db, "PRAGMA foreign_keys=ON");
        if (rc != SQLITE_OK) st = db_fail(db, rc, "configuring the connection", err);
    }
    if (st == AP_OK && o->max_pages > 0) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA max_page_count=%lld", (long long)o->max_pages);
        rc = exec(db, pragma);
        if (rc != SQLITE_OK) st = db_fail(db, rc, "setting max_page_count", err);
    }
    if (st == AP_OK && !o->readonly && db->version < AP_DB_SCHEMA_VERSION) st = migrate(db, err);
    if (st != AP_OK) {
        ap_db_close(db);
        return st;
    }
    *out = db;
    return AP_OK;
}

ap_status ap_db_open(const char *path, int readonly, ap_db **out, ap_err *err) {
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path;
    o.readonly = readonly;
    return ap_db_open_opts(&o, out, err);
}

void ap_db_close(ap_db *db) {
    if (!db) return;
    if (db->h) {
        if (!sqlite3_get_autocommit(db->h)) exec(db, "ROLLBACK");
        sqlite3_close_v2(db->h);
    }
    free(db->path);
    free(db);
}

const char *ap_db_path(const ap_db *db) { return db ? db->path : ""; }
const char *ap_db_journal_mode(const ap_db *db) { return db && db->wal ? "wal" : "delete"; }
int ap_db_is_readonly(const ap_db *db) { return db ? db->readonly : 1; }
int ap_db_schema_version(const ap_db *db) { return db ? db->version : 0; }

ap_status ap_db_count(ap_db *db, const char *table, int64_t *n, ap_err *err) {
    static const char *const tables[] = {"plans", "plan_results", "profiles", "runs",
                                         "run_ranks"};
    static const char *const sql[] = {"SELECT count(*) FROM plans",
                                      "SELECT count(*) FROM plan_results",
                                      "SELECT count(*) FROM profiles", "SELECT count(*) FROM runs",
                                      "SELECT count(*) FROM run_ranks"};
    *n = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (strcmp(table, tables[i]) != 0) continue;
        int rc = query_int(db, sql[i], n);
        if (rc != SQLITE_OK) return db_fail(db, rc, "counting rows", err);
        return AP_OK;
    }
    return ap_err_set(err, AP_ERR_INPUT, "unknown table '%s' (plans, plan_results, profiles, "
                      "runs, run_ranks)", table);
}

ap_status ap_db_integrity_check(ap_db *db, ap_err *err) {
    char res[256];
    int rc = query_text(db, "PRAGMA integrity_check", res, sizeof res);
    if (rc != SQLITE_OK) return db_fail(db, rc, "integrity check", err);
    if (strcmp(res, "ok") != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: integrity check failed: %s", db->path, res);
    return AP_OK;
}

/* ---- hashing ------------------------------------------------------------------------------------ */

/* splitmix64 finalizer (Steele, Lea, Flood 2014): spreads FNV's weak high bits. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void key_of(const void *data, size_t n, char out[AP_DB_KEY_HEX + 1]) {
    uint64_t len = n;
    uint64_t a = ap_hash64(data, n, 0x6175746f706c616eULL);  /* "autoplan" */
    uint64_t b = ap_hash64(data, n, 0x706c616e2d6b6579ULL);  /* "plan-key" */
    a = mix64(a ^ len);
    b = mix64(b + 0x9e3779b97f4a7c15ULL * (len + 1));
    snprintf(out, AP_DB_KEY_HEX + 1, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

void ap_db_plan_key(const char *canonical_text, char out[AP_DB_KEY_HEX + 1]) {
    key_of(canonical_text, strlen(canonical_text), out);
}

/* ---- plan cache ----------------------------------------------------------------------------------- */

static int valid_key(const char *key) {
    if (!key || strlen(key) != AP_DB_KEY_HEX) return 0;
    for (const char *p = key; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* Granularity of plans.used_at: a hit writes only when the stored value is older, so a run of
 * cache hits costs no writes (a write means a WAL commit and, at close, a checkpoint with an
 * fsync: several ms, against a 20 ms budget for a whole cache hit). gc works in days. */
#define USED_AT_GRANULARITY_S 3600

/* Record a hit in used_at, but never wait for it: a busy database skips the bookkeeping. */
static void touch_plan(ap_db *db, int64_t id, int64_t used_at) {
    int64_t now = (int64_t)time(NULL);
    if (db->readonly || (used_at <= now && now - used_at < USED_AT_GRANULARITY_S)) return;
    sqlite3_busy_timeout(db->h, 0);
    int own = !db->in_txn;
    if (!own || exec(db, "BEGIN IMMEDIATE") == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        int rc = prepare(db, "UPDATE plans SET used_at = ?1 WHERE id = ?2", &st);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, now);
            sqlite3_bind_int64(st, 2, id);
            rc = sqlite3_step(st);
        }
        sqlite3_finalize(st);
        if (own) exec(db, rc == SQLITE_DONE ? "COMMIT" : "ROLLBACK");
        if (own && !sqlite3_get_autocommit(db->h)) exec(db, "ROLLBACK");
    }
    sqlite3_busy_timeout(db->h, db->busy_ms);
}

ap_status ap_db_plan_get(ap_db *db, const char *key, char **json_out, double *search_s,
                         ap_err *err) {
    *json_out = NULL;
    if (!db) return AP_OK;
    if (!valid_key(key))
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: plan key '%s' is not %d hex digits",
                          db->path, key ? key : "(null)", AP_DB_KEY_HEX);
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT p.id, r.result_json, p.search_s, p.used_at FROM plans p"
                         " JOIN plan_results r ON r.plan_id = p.id WHERE p.key = ?1", &st);
    int64_t id = 0, used_at = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            id = sqlite3_column_int64(st, 0);
            used_at = sqlite3_column_int64(st, 3);
            *json_out = dup_col(st, 1);
            if (search_s) *search_s = sqlite3_column_double(st, 2);
            rc = *json_out ? SQLITE_DONE : SQLITE_NOMEM;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_OK) {
        free(*json_out);
        *json_out = NULL;
        return db_fail(db, rc, "reading the plan cache", err);
    }
    if (*json_out) touch_plan(db, id, used_at);
    return AP_OK;
}

/* Store the result of plan row `id` (inside the caller's write transaction). */
static int put_result(ap_db *db, int64_t id, const char *json) {
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "INSERT OR REPLACE INTO plan_results (plan_id, result_json)"
                         " VALUES (?1, ?2)", &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, json, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc;
}

ap_status ap_db_plan_put(ap_db *db, const char *key, const char *summary, const char *json,
                         double search_s, ap_err *err) {
    if (!db) return AP_OK;
    if (!valid_key(key))
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: plan key '%s' is not %d hex digits",
                          db->path, key ? key : "(null)", AP_DB_KEY_HEX);
    if (!json) return ap_err_set(err, AP_ERR_INTERNAL, "%s: no plan result to store", db->path);
    if (!isfinite(search_s) || search_s < 0) search_s = 0;
    const char *doing = "storing the plan in the cache";
    ap_status s = wbegin(db, doing, err);
    if (s != AP_OK) return s;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db,
                     "INSERT INTO plans (key, summary, search_s, created_at, used_at, result_bytes)"
                     " VALUES (?1, ?2, ?3, ?4, ?4, ?5)"
                     " ON CONFLICT(key) DO UPDATE SET summary = excluded.summary,"
                     " search_s = excluded.search_s, created_at = excluded.created_at,"
                     " used_at = excluded.used_at, result_bytes = excluded.result_bytes",
                     &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, summary ? summary : "", -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, search_s);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)time(NULL));
        sqlite3_bind_int64(st, 5, (sqlite3_int64)strlen(json));
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    st = NULL;
    int64_t id = 0;
    if (rc == SQLITE_DONE) {
        rc = prepare(db, "SELECT id FROM plans WHERE key = ?1", &st);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
            rc = sqlite3_step(st);
            if (rc == SQLITE_ROW) {
                id = sqlite3_column_int64(st, 0);
                rc = SQLITE_DONE;
            } else if (rc == SQLITE_DONE) {
                rc = SQLITE_INTERNAL;
            }
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (rc == SQLITE_DONE) rc = put_result(db, id, json);
    if (rc != SQLITE_DONE) s = db_fail(db, rc, doing, err);
    return wend(db, s, doing, err);
}

ap_status ap_db_plans_list(ap_db *db, ap_db_plan_info **rows, size_t *n, ap_err *err) {
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT id, key, summary, search_s, created_at, used_at,"
                         " result_bytes FROM plans"
                         " ORDER BY used_at DESC, id DESC", &st);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_plan_info *nr = realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        ap_db_plan_info *r = &(*rows)[(*n)++];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(st, 0);
        copy_col(st, 1, r->key, sizeof r->key);
        copy_col(st, 2, r->summary, sizeof r->summary);
        r->search_s = sqlite3_column_double(st, 3);
        r->created_at = sqlite3_column_int64(st, 4);
        r->used_at = sqlite3_column_int64(st, 5);
        r->json_bytes = sqlite3_column_int64(st, 6);
        rc = SQLITE_OK;
    }
    if (s == AP_OK && rc != SQLITE_DONE) s = db_fail(db, rc, "listing plans", err);
    sqlite3_finalize(st);
    if (s != AP_OK) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_plan_json(ap_db *db, int64_t id, char **json_out, ap_err *err) {
    *json_out = NULL;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT result_json FROM plan_results WHERE plan_id = ?1", &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *json_out = dup_col(st, 0);
            rc = *json_out ? SQLITE_DONE : SQLITE_NOMEM;
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_fail(db, rc, "reading a plan", err);
    return AP_OK;
}

ap_status ap_db_plan_import(ap_db *db, const ap_db_plan_info *info, const char *json,
                            int *added, ap_err *err) {
    if (added) *added = 0;
    if (!valid_key(info->key))
        return ap_err_set(err, AP_ERR_INPUT, "plan key '%s' is not %d hex digits", info->key,
                          AP_DB_KEY_HEX);
    const char *doing = "importing a plan";
    ap_status s = wbegin(db, doing, err);
    if (s != AP_OK) return s;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "INSERT OR IGNORE INTO plans (key, summary, search_s, created_at,"
                         " used_at, result_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, info->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, info->summary, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, info->search_s);
        sqlite3_bind_int64(st, 4, info->created_at);
        sqlite3_bind_int64(st, 5, info->used_at);
        sqlite3_bind_int64(st, 6, (sqlite3_int64)strlen(json));
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    int fresh = rc == SQLITE_DONE && sqlite3_changes(db->h) > 0;
    if (fresh) rc = put_result(db, sqlite3_last_insert_rowid(db->h), json);
    if (rc == SQLITE_DONE) {
        if (added) *added = fresh;
    } else {
        s = db_fail(db, rc, doing, err);
    }
    return wend(db, s, doing, err);
}

ap_status ap_db_plans_gc(ap_db *db, double older_than_s, int64_t *deleted, ap_err *err) {
    *deleted = 0;
    if (!isfinite(older_than_s) || older_than_s < 0)
        return ap_err_set(err, AP_ERR_INPUT, "--older-than: must be a positive duration");
    const char *doing = "collecting old plans";
    ap_status s = wbegin(db, doing, err);
    if (s != AP_OK) return s;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "DELETE FROM plans WHERE used_at < ?1", &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)((double)time(NULL) - older_than_s));
        rc = sqlite3_step(st);
    }
    if (rc == SQLITE_DONE) *deleted = sqlite3_changes(db->h);
    sqlite3_finalize(st);
    /* Free pages go back to the filesystem (the file shrinks at the next checkpoint). */
    if (rc == SQLITE_DONE) rc = exec(db, "PRAGMA incremental_vacuum") == SQLITE_OK ? SQLITE_DONE
                                                                                  : SQLITE_ERROR;
    if (rc != SQLITE_DONE) s = db_fail(db, rc, doing, err);
    s = wend(db, s, doing, err);
    if (s != AP_OK) *deleted = 0;
    return s;
}

/* ---- profiles ------------------------------------------------------------------------------------- */

static int str_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

static int num_ok(double v) { return isfinite(v) && v >= 0; }

#define PROFILE_TEXT(X) X(gpu, 1) X(device_name, 0) X(pci_id, 0) X(driver_version, 0) \
    X(cuda_version, 0) X(cublas_version, 0) X(nccl_version, 0) X(mig_mode, 0) X(op, 1) \
    X(shape, 1) X(dtype, 1) X(source_run, 0)
#define PROFILE_REAL(X) X(mem_bytes) X(sm_clock_mhz) X(mem_clock_mhz) X(power_limit_w) \
    X(time_s) X(flops_per_s) X(bytes_per_s) X(bytes) X(spread)

static ap_status profile_check(const ap_db_profile *r, size_t i, ap_err *err) {
#define CHECK_TEXT(f, required)                                                               \
    if (!str_ok(r->f, sizeof r->f))                                                           \
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s: longer than %zu bytes", i, #f, \
                          sizeof r->f - 1);                                                   \
    if ((required) && !r->f[0])                                                               \
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s: must not be empty", i, #f);
    PROFILE_TEXT(CHECK_TEXT)
#undef CHECK_TEXT
#define CHECK_REAL(f)                                                                         \
    if (!num_ok(r->f))                                                                        \
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s: must be a finite number >= 0, " \
                          "got %g", i, #f, r->f);
    PROFILE_REAL(CHECK_REAL)
#undef CHECK_REAL
    if (!(r->time_s > 0))
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].time_s: must be > 0", i);
    if (r->samples < 1)
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].samples: must be >= 1, got %lld", i,
                          (long long)r->samples);
    if (r->sm_count < 0)
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].sm_count: must be >= 0", i);
    if (r->created_at < 0)
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].created_at: must be >= 0", i);
    return AP_OK;
}

/* Column order shared by insert, list and the fingerprint. */
#define PROFILE_COLS "gpu, device_name, pci_id, sm_count, mem_bytes, sm_clock_mhz," \
    " mem_clock_mhz, power_limit_w, driver_version, cuda_version, cublas_version," \
    " nccl_version, mig_mode, op, shape, dtype, time_s, flops_per_s, bytes_per_s, bytes," \
    " samples, spread, source_run, created_at"

ap_status ap_db_profiles_insert(ap_db *db, const ap_db_profile *rows, size_t n,
                                size_t *inserted, ap_err *err) {
    if (inserted) *inserted = 0;
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    for (size_t i = 0; i < n; i++) {
        ap_status s = profile_check(&rows[i], i, err);
        if (s != AP_OK) return s;
    }
    const char *doing = "storing profiles";
    ap_status s = wbegin(db, doing, err);
    if (s != AP_OK) return s;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "INSERT OR IGNORE INTO profiles (" PROFILE_COLS ") VALUES (?1, ?2, ?3,"
                         " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
                         " ?19, ?20, ?21, ?22, ?23, ?24)", &st);
    size_t added = 0;
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        const ap_db_profile *r = &rows[i];
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, r->gpu, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->device_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->pci_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, r->sm_count);
        sqlite3_bind_double(st, 5, r->mem_bytes);
        sqlite3_bind_double(st, 6, r->sm_clock_mhz);
        sqlite3_bind_double(st, 7, r->mem_clock_mhz);
        sqlite3_bind_double(st, 8, r->power_limit_w);
        sqlite3_bind_text(st, 9, r->driver_version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 10, r->cuda_version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 11, r->cublas_version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 12, r->nccl_version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 13, r->mig_mode[0] ? r->mig_mode : "off", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 14, r->op, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 15, r->shape, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 16, r->dtype, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 17, r->time_s);
        sqlite3_bind_double(st, 18, r->flops_per_s);
        sqlite3_bind_double(st, 19, r->bytes_per_s);
        sqlite3_bind_double(st, 20, r->bytes);
        sqlite3_bind_int64(st, 21, r->samples);
        sqlite3_bind_double(st, 22, r->spread);
        sqlite3_bind_text(st, 23, r->source_run, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 24, r->created_at > 0 ? r->created_at : now);
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            added += (size_t)sqlite3_changes(db->h);
            rc = SQLITE_OK;
        }
    }
    if (rc != SQLITE_OK) s = db_fail(db, rc, doing, err);
    sqlite3_finalize(st);
    s = wend(db, s, doing, err);
    if (s == AP_OK && inserted) *inserted = added;
    return s;
}

static void profile_from_row(sqlite3_stmt *st, ap_db_profile *r) {
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(st, 0);
    copy_col(st, 1, r->gpu, sizeof r->gpu);
    copy_col(st, 2, r->device_name, sizeof r->device_name);
    copy_col(st, 3, r->pci_id, sizeof r->pci_id);
    r->sm_count = sqlite3_column_int64(st, 4);
    r->mem_bytes = sqlite3_column_double(st, 5);
    r->sm_clock_mhz = sqlite3_column_double(st, 6);
    r->mem_clock_mhz = sqlite3_column_double(st, 7);
    r->power_limit_w = sqlite3_column_double(st, 8);
    copy_col(st, 9, r->driver_version, sizeof r->driver_version);
    copy_col(st, 10, r->cuda_version, sizeof r->cuda_version);
    copy_col(st, 11, r->cublas_version, sizeof r->cublas_version);
    copy_col(st, 12, r->nccl_version, sizeof r->nccl_version);
    copy_col(st, 13, r->mig_mode, sizeof r->mig_mode);
    copy_col(st, 14, r->op, sizeof r->op);
    copy_col(st, 15, r->shape, sizeof r->shape);
    copy_col(st, 16, r->dtype, sizeof r->dtype);
    r->time_s = sqlite3_column_double(st, 17);
    r->flops_per_s = sqlite3_column_double(st, 18);
    r->bytes_per_s = sqlite3_column_double(st, 19);
    r->bytes = sqlite3_column_double(st, 20);
    r->samples = sqlite3_column_int64(st, 21);
    r->spread = sqlite3_column_double(st, 22);
    copy_col(st, 23, r->source_run, sizeof r->source_run);
    r->created_at = sqlite3_column_int64(st, 24);
}

/* The columns of the UNIQUE constraint, in its order: SQLite walks that index instead of
 * sorting (the fingerprint of 2000 rows: 5 ms sorted, a fraction of that walked). */
#define PROFILE_ORDER " ORDER BY gpu, device_name, pci_id, driver_version, cuda_version," \
    " cublas_version, nccl_version, mig_mode, op, shape, dtype, source_run"

ap_status ap_db_profiles_list(ap_db *db, const char *gpu, ap_db_profile **rows, size_t *n,
                              ap_err *err) {
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT id, " PROFILE_COLS " FROM profiles"
                         " WHERE ?1 IS NULL OR gpu = ?1" PROFILE_ORDER, &st);
    if (rc == SQLITE_OK && gpu) sqlite3_bind_text(st, 1, gpu, -1, SQLITE_STATIC);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_profile *nr = realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        profile_from_row(st, &(*rows)[(*n)++]);
        rc = SQLITE_OK;
    }
    if (s == AP_OK && rc != SQLITE_DONE) s = db_fail(db, rc, "listing profiles", err);
    sqlite3_finalize(st);
    if (s != AP_OK) {
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_profiles_fingerprint(ap_db *db, const char *gpu, uint64_t *fp, ap_err *err) {
    static const char tag[] = "autoplan-profiles/1";
    uint64_t h = ap_hash64(tag, sizeof tag - 1, 0);
    *fp = mix64(h);
    if (!db) return AP_OK;
    /* Every column but id and created_at (identity and content, not history), in a fixed
     * order, each value followed by a separator byte so "ab","c" differs from "a","bc". */
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT " PROFILE_COLS " FROM profiles WHERE gpu = ?1" PROFILE_ORDER,
                     &st);
    if (rc == SQLITE_OK) sqlite3_bind_text(st, 1, gpu ? gpu : "", -1, SQLITE_STATIC);
    int ncol = rc == SQLITE_OK ? sqlite3_column_count(st) - 1 : 0; /* without created_at */
    uint64_t rows = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 0; c < ncol; c++) {
            if (sqlite3_column_type(st, c) == SQLITE_TEXT) {
                h = ap_hash64(sqlite3_column_text(st, c), (size_t)sqlite3_column_bytes(st, c), h);
            } else {
                /* The IEEE-754 bits, little-endian, so every machine hashes the same bytes
                 * (formatting with %.17g cost 10x more and made this the slowest step of a
                 * cache hit). */
                double v = sqlite3_column_double(st, c) + 0.0; /* -0.0 -> 0.0 */
                uint64_t bits;
                unsigned char le[8];
                memcpy(&bits, &v, sizeof bits);
                for (int i = 0; i < 8; i++) le[i] = (unsigned char)(bits >> (8 * i));
                h = ap_hash64(le, sizeof le, h);
            }
            h = ap_hash64("\x1f", 1, h);
        }
        h = ap_hash64("\x1e", 1, h);
        rows++;
        rc = SQLITE_OK;
    }
    ap_status s = AP_OK;
    if (rc != SQLITE_DONE) s = db_fail(db, rc, "fingerprinting profiles", err);
    sqlite3_finalize(st);
    if (s == AP_OK) *fp = mix64(h ^ rows);
    return s;
}

/* ---- runs ----------------------------------------------------------------------------------------- */

static ap_status run_check(const ap_db_run *r, const ap_db_run_rank *ranks, size_t nranks,
                           ap_err *err) {
    if (!r->plan_json) return ap_err_set(err, AP_ERR_INPUT, "run.plan_json: missing");
    if (!str_ok(r->host, sizeof r->host) || !r->host[0])
        return ap_err_set(err, AP_ERR_INPUT, "run.host: must be 1 to %zu bytes",
                          sizeof r->host - 1);
    if (!str_ok(r->backend, sizeof r->backend) || !r->backend[0])
        return ap_err_set(err, AP_ERR_INPUT, "run.backend: must be 1 to %zu bytes",
                          sizeof r->backend - 1);
    if (!str_ok(r->plan_key, sizeof r->plan_key) || (r->plan_key[0] && !valid_key(r->plan_key)))
        return ap_err_set(err, AP_ERR_INPUT, "run.plan_key: must be empty or %d hex digits",
                          AP_DB_KEY_HEX);
    if (r->ranks < 1 || r->ranks > (1 << 24))
        return ap_err_set(err, AP_ERR_INPUT, "run.ranks: must be in [1, 16777216], got %lld",
                          (long long)r->ranks);
    if (nranks > (size_t)r->ranks)
        return ap_err_set(err, AP_ERR_INPUT, "run: %zu per-rank rows for %lld ranks", nranks,
                          (long long)r->ranks);
    if (r->started_at < 0) return ap_err_set(err, AP_ERR_INPUT, "run.started_at: must be >= 0");
    if (!num_ok(r->predicted_step_s) || !num_ok(r->measured_step_s) ||
        !num_ok(r->predicted_peak_bytes) || !num_ok(r->measured_peak_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "run: step times and peak bytes must be finite "
                          "numbers >= 0");
    for (size_t i = 0; i < nranks; i++) {
        const ap_db_run_rank *k = &ranks[i];
        if (k->rank < 0 || k->rank >= r->ranks)
            return ap_err_set(err, AP_ERR_INPUT, "ranks[%zu].rank: must be in [0, %lld), got "
                              "%lld", i, (long long)r->ranks, (long long)k->rank);
        if (!num_ok(k->predicted_step_s) || !num_ok(k->measured_step_s) ||
            !num_ok(k->predicted_peak_bytes) || !num_ok(k->measured_peak_bytes))
            return ap_err_set(err, AP_ERR_INPUT, "ranks[%zu]: step times and peak bytes must "
                              "be finite numbers >= 0", i);
    }
    return AP_OK;
}

static int bind_rank(sqlite3_stmt *st, int64_t run_id, const ap_db_run_rank *k) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int64(st, 2, k->rank);
    sqlite3_bind_double(st, 3, k->predicted_step_s);
    sqlite3_bind_double(st, 4, k->measured_step_s);
    sqlite3_bind_double(st, 5, k->predicted_peak_bytes);
    sqlite3_bind_double(st, 6, k->measured_peak_bytes);
    return sqlite3_step(st);
}

ap_status ap_db_run_insert(ap_db *db, const ap_db_run *run, const ap_db_run_rank *ranks,
                           size_t nranks, int64_t *id_out, ap_err *err) {
    if (id_out) *id_out = 0;
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    ap_status s = run_check(run, ranks, nranks, err);
    if (s != AP_OK) return s;
    int64_t started = run->started_at > 0 ? run->started_at : (int64_t)time(NULL);
    /* uid: the run's identity, so importing the same run twice stores it once. */
    size_t ilen = strlen(run->host) + strlen(run->backend) + strlen(run->plan_key) +
                  strlen(run->plan_json) + 64;
    char *ident = malloc(ilen);
    if (!ident) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path);
    int il = snprintf(ident, ilen, "run/1\n%s\n%s\n%lld\n%s\n%s", run->host, run->backend,
                      (long long)started, run->plan_key, run->plan_json);
    char uid[AP_DB_KEY_HEX + 1];
    key_of(ident, (size_t)il, uid);
    free(ident);

    const char *doing = "storing a run";
    s = wbegin(db, doing, err);
    if (s != AP_OK) return s;
    sqlite3_stmt *st = NULL;
    int64_t id = 0;
    int rc = prepare(db, "SELECT id FROM runs WHERE uid = ?1", &st);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, uid, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
        if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_OK && id == 0) {
        rc = prepare(db, "INSERT INTO runs (uid, plan_key, plan_json, host, backend, started_at,"
                         " ranks, predicted_step_s, measured_step_s, predicted_peak_bytes,"
                         " measured_peak_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
                         " ?10, ?11)", &st);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(st, 1, uid, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 2, run->plan_key, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 3, run->plan_json, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 4, run->host, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 5, run->backend, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 6, started);
            sqlite3_bind_int64(st, 7, run->ranks);
            sqlite3_bind_double(st, 8, run->predicted_step_s);
            sqlite3_bind_double(st, 9, run->measured_step_s);
            sqlite3_bind_double(st, 10, run->predicted_peak_bytes);
            sqlite3_bind_double(st, 11, run->measured_peak_bytes);
            rc = sqlite3_step(st);
            if (rc == SQLITE_DONE) {
                id = sqlite3_last_insert_rowid(db->h);
                rc = SQLITE_OK;
            }
        }
        sqlite3_finalize(st);
        st = NULL;
        if (rc == SQLITE_OK && nranks > 0) {
            rc = prepare(db, "INSERT INTO run_ranks (run_id, rank, predicted_step_s,"
                             " measured_step_s, predicted_peak_bytes, measured_peak_bytes)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st);
            for (size_t i = 0; rc == SQLITE_OK && i < nranks; i++) {
                rc = bind_rank(st, id, &ranks[i]);
                if (rc == SQLITE_DONE) rc = SQLITE_OK;
            }
            sqlite3_finalize(st);
        }
    }
    if (rc != SQLITE_OK) s = db_fail(db, rc, doing, err);
    s = wend(db, s, doing, err);
    if (s == AP_OK && id_out) *id_out = id;
    return s;
}

void ap_db_runs_free(ap_db_run *rows, size_t n) {
    if (!rows) return;
    for (size_t i = 0; i < n; i++) free(rows[i].plan_json);
    free(rows);
}

ap_status ap_db_runs_list(ap_db *db, ap_db_run **rows, size_t *n, ap_err *err) {
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT id, uid, plan_key, plan_json, host, backend, started_at, ranks,"
                         " predicted_step_s, measured_step_s, predicted_peak_bytes,"
                         " measured_peak_bytes FROM runs ORDER BY started_at DESC, id DESC", &st);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_run *nr = realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        ap_db_run *r = &(*rows)[*n];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(st, 0);
        copy_col(st, 1, r->uid, sizeof r->uid);
        copy_col(st, 2, r->plan_key, sizeof r->plan_key);
        r->plan_json = dup_col(st, 3);
        if (!r->plan_json) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
        (*n)++;
        copy_col(st, 4, r->host, sizeof r->host);
        copy_col(st, 5, r->backend, sizeof r->backend);
        r->started_at = sqlite3_column_int64(st, 6);
        r->ranks = sqlite3_column_int64(st, 7);
        r->predicted_step_s = sqlite3_column_double(st, 8);
        r->measured_step_s = sqlite3_column_double(st, 9);
        r->predicted_peak_bytes = sqlite3_column_double(st, 10);
        r->measured_peak_bytes = sqlite3_column_double(st, 11);
        rc = SQLITE_OK;
    }
    if (s == AP_OK && rc != SQLITE_DONE) s = db_fail(db, rc, "listing runs", err);
    sqlite3_finalize(st);
    if (s != AP_OK) {
        ap_db_runs_free(*rows, *n);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_run_ranks(ap_db *db, int64_t run_id, ap_db_run_rank **ranks, size_t *n,
                          ap_err *err) {
    *ranks = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = prepare(db, "SELECT rank, predicted_step_s, measured_step_s, predicted_peak_bytes,"
                         " measured_peak_bytes FROM run_ranks WHERE run_id = ?1 ORDER BY rank",
                     &st);
    if (rc == SQLITE_OK) sqlite3_bind_int64(st, 1, run_id);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_run_rank *nr = realloc(*ranks, cap * sizeof **ranks);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *ranks = nr;
        }
        ap_db_run_rank *k = &(*ranks)[(*n)++];
        k->rank = sqlite3_column_int64(st, 0);
        k->predicted_step_s = sqlite3_column_double(st, 1);
        k->measured_step_s = sqlite3_column_double(st, 2);
        k->predicted_peak_bytes = sqlite3_column_double(st, 3);
        k->measured_peak_bytes = sqlite3_column_double(st, 4);
        rc = SQLITE_OK;
    }
    if (s == AP_OK && rc != SQLITE_DONE) s = db_fail(db, rc, "reading run ranks", err);
    sqlite3_finalize(st);
    if (s != AP_OK) {
        free(*ranks);
        *ranks = NULL;
        *n = 0;
    }
    return s;
}
