/*
 * open.c - opening and closing the store (see include/autoplan/db.h and docs/db.md): path
 * checks before SQLite touches anything, a read-only probe of the header and schema, the
 * journal mode, schema migrations, and the small per-handle queries (counts, integrity).
 *
 * "Never modify a file we cannot use": every reason to refuse a database (not SQLite, corrupt,
 * another program's, newer schema, read-only, unwritable directory) is detected before the
 * first write, so a refused file keeps its bytes and mtime; a write that fails midway (full
 * disk, kill -9) is rolled back by SQLite's journal.
 *
 * What it does not do: the tables (plans.c, profiles.c, runs.c), the schema text (schema.c),
 * SQLite calls (sqlite.c).
 */
#include "db_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- paths ---------------------------------------------------------------------------------------- */

static int mkdir_p(char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return 0;
        errno = ENOTDIR; /* a file where a directory goes: say so, not a stale errno */
        return -1;
    }
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
        return ap_err_set(err, AP_ERR_INPUT, "default database path: neither XDG_CACHE_HOME nor "
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
    const char *p = strstr(ap_db_schema_sql(), marker);
    *to = from;
    while (p) {
        int ver = atoi(p + sizeof marker - 1);
        const char *body = strchr(p + 1, '\n');
        if (!body) break;
        const char *next = strstr(body, marker);
        size_t len = next ? (size_t)(next - body) : strlen(body);
        if (ver > from) {
            char *sql = ap_malloc(len + 1);
            if (!sql) return AP_SQL_NOMEM;
            memcpy(sql, body, len);
            sql[len] = '\0';
            int rc = ap_sql_exec(db, sql);
            ap_free(sql);
            if (rc != AP_SQL_OK) {
                snprintf(failed_sql, n, "version %d", ver);
                return rc;
            }
            *to = ver;
        }
        p = next;
    }
    return AP_SQL_OK;
}

static ap_status migrate(ap_db *db, ap_err *err) {
    int rc = ap_sql_exec(db, "BEGIN IMMEDIATE");
    if (rc != AP_SQL_OK) return ap_db_fail(db, rc, "starting the schema migration", err);
    int64_t v = 0, app = 0;
    /* Re-read inside the write lock: another process may have migrated meanwhile. */
    rc = ap_sql_query_int(db, "PRAGMA user_version", &v);
    if (rc == AP_SQL_OK) rc = ap_sql_query_int(db, "PRAGMA application_id", &app);
    if (rc != AP_SQL_OK) {
        ap_status st = ap_db_fail(db, rc, "reading the schema version", err);
        ap_sql_exec(db, "ROLLBACK");
        return st;
    }
    if (v > AP_DB_SCHEMA_VERSION) {
        ap_sql_exec(db, "ROLLBACK");
        return ap_err_set(err, AP_ERR_DB, "%s: database schema version %lld is newer than this "
                          "autoplan understands (%d); upgrade autoplan or use another --db; the "
                          "file was not modified", db->path, (long long)v, AP_DB_SCHEMA_VERSION);
    }
    if (v < AP_DB_SCHEMA_VERSION) {
        char which[64] = "";
        int to = (int)v;
        rc = apply_sections(db, (int)v, &to, which, sizeof which);
        char pragma[96];
        if (rc == AP_SQL_OK && to != AP_DB_SCHEMA_VERSION) rc = AP_SQL_INTERNAL;
        if (rc == AP_SQL_OK && app == 0) {
            snprintf(pragma, sizeof pragma, "PRAGMA application_id = %d", AP_DB_APPLICATION_ID);
            rc = ap_sql_exec(db, pragma);
        }
        if (rc == AP_SQL_OK) {
            snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", AP_DB_SCHEMA_VERSION);
            rc = ap_sql_exec(db, pragma);
        }
        if (rc != AP_SQL_OK) {
            char doing[160];
            snprintf(doing, sizeof doing, "migrating the schema from version %lld to %d (%s) "
                     "failed, nothing was changed", (long long)v, AP_DB_SCHEMA_VERSION, which);
            ap_status st = ap_db_fail(db, rc, doing, err);
            ap_sql_exec(db, "ROLLBACK");
            return st;
        }
        ap_log(AP_LOG_INFO, "%s: schema migrated from version %lld to %d", db->path, (long long)v,
               AP_DB_SCHEMA_VERSION);
    }
    rc = ap_sql_exec(db, "COMMIT");
    if (rc != AP_SQL_OK) {
        ap_status st = ap_db_fail(db, rc, "committing the schema migration", err);
        ap_sql_exec(db, "ROLLBACK");
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
    int rc = ap_sql_exec(db, "BEGIN");
    if (rc == AP_SQL_OK) rc = ap_sql_query_int(db, "PRAGMA user_version", &v);
    if (rc == AP_SQL_OK) rc = ap_sql_query_int(db, "PRAGMA application_id", &app);
    /* Parsing the schema reads page 1 and every CREATE statement: catches most corruption
     * without reading the whole file. */
    if (rc == AP_SQL_OK) rc = ap_sql_query_int(db, "SELECT count(*) FROM sqlite_schema", &objects);
    ap_status st = AP_OK;
    if (rc != AP_SQL_OK) st = ap_db_fail(db, rc, "unusable database, left as it is", err);
    if (!ap_sql_autocommit(db)) ap_sql_exec(db, "COMMIT");
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
    int rc = ap_sql_query_text(db, "PRAGMA journal_mode", mode, sizeof mode);
    if (rc != AP_SQL_OK) return ap_db_fail(db, rc, "reading the journal mode", err);
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
            rc = ap_sql_query_text(db, "PRAGMA journal_mode=WAL", mode, sizeof mode);
            if (rc == AP_SQL_OK) break;
            if (!ap_sql_is_busy(rc))
                return ap_db_fail(db, rc, "setting the journal mode", err);
            if (waited_ms >= db->busy_ms)
                return ap_db_fail(db, rc, "setting the journal mode", err);
            struct timespec ts = {0, 2 * 1000000L};
            nanosleep(&ts, NULL);
            waited_ms += 2;
            rc = ap_sql_query_text(db, "PRAGMA journal_mode", mode, sizeof mode);
            if (rc != AP_SQL_OK && !ap_sql_is_busy(rc))
                return ap_db_fail(db, rc, "reading the journal mode", err);
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
        rc = ap_sql_query_text(db, "PRAGMA journal_mode=DELETE", mode, sizeof mode);
        if (rc != AP_SQL_OK || strcmp(mode, "delete") != 0) {
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

/* A read-only open never creates files beside the database. Reading a WAL database needs its
 * -shm file, and SQLite creates it (and -wal) when the directory is writable (SQLite docs,
 * "WAL mode: read-only databases"): a reader without write permission on the database then
 * leaves files its owner cannot write, which locks the owner out of his own cache, and a
 * read-only connection cannot remove them at close. So when no -wal, -shm or -journal exists
 * (no connection has the database open: the last one to close removes them), the database is
 * opened as immutable, which creates nothing. A writer that starts during such a read is not
 * seen: a read is one short lookup, and what it returns is checked before use (result.h).
 * Returns a "file:" URI (caller frees) or NULL to open the plain path (the side files exist
 * already and are used as they are). */
static char *immutable_uri(const char *path) {
    char side[4200];
    struct stat sb;
    static const char *const sides[] = {"-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        snprintf(side, sizeof side, "%s%s", path, sides[i]);
        if (stat(side, &sb) == 0 && (sb.st_size > 0 || i == 1)) return NULL;
    }
    size_t n = strlen(path);
    char *uri = ap_malloc(3 * n + 32);
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

/* PRAGMA quick_check of one table and its indexes: AP_ERR_DB with its first line. */
static ap_status quick_check_table(ap_db *db, const char *table, ap_err *err) {
    char sql[96], res[256];
    snprintf(sql, sizeof sql, "PRAGMA quick_check(%s)", table);
    int rc = ap_sql_query_text(db, sql, res, sizeof res);
    if (rc != AP_SQL_OK) return ap_db_fail(db, rc, "quick check", err);
    if (strcmp(res, "ok") != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: database file is corrupt (quick check of %s: %s); "
                          "left as it is", db->path, table, res);
    return AP_OK;
}

ap_status ap_db_quick_check(ap_db *db, int results, ap_err *err) {
    /* the small tables every lookup and fingerprint walks: about 1 ms for 3000 cached plans */
    static const char *const tables[] = {"plans", "profiles", "runs", "run_ranks"};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        ap_status st = quick_check_table(db, tables[i], err);
        if (st != AP_OK) return st;
    }
    /* the stored results: 1.6 ms per MB (62 MB of results, 3000 plans: 100 ms), so on open
     * only while the file is small; before each store otherwise (results == 1) */
    int64_t pages = 0, page = 0;
    if (!results && ap_sql_query_int(db, "PRAGMA page_count", &pages) == AP_SQL_OK &&
        ap_sql_query_int(db, "PRAGMA page_size", &page) == AP_SQL_OK &&
        (double)pages * (double)page > AP_DB_QUICK_CHECK_BYTES)
        return AP_OK;
    return quick_check_table(db, "plan_results", err);
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

    ap_db *db = ap_calloc(1, sizeof *db);
    if (!db || !(db->path = ap_strdup(path))) {
        ap_free(db);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
    }
    db->readonly = o->readonly;
    db->busy_ms = o->busy_timeout_ms > 0 ? o->busy_timeout_ms : 5000;
    db->before_commit = o->before_commit;
    db->hook_arg = o->hook_arg;
    char *uri = o->readonly ? immutable_uri(path) : NULL;
    int rc = ap_sql_connect(db, uri ? uri : path, o->readonly, uri != NULL, o->vfs);
    ap_free(uri);
    if (rc != AP_SQL_OK) {
        st = ap_db_fail(db, rc, "cannot open", err);
        ap_db_close(db);
        return st;
    }
    if (!o->readonly && ap_sql_file_readonly(db)) {
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
        rc = ap_sql_exec(db, "PRAGMA auto_vacuum = INCREMENTAL");
        if (rc != AP_SQL_OK) st = ap_db_fail(db, rc, "setting auto_vacuum", err);
    }
    if (st == AP_OK) st = set_journal(db, !(o->no_wal || env_no_wal()), err);
    if (st == AP_OK) {
        /* NORMAL in WAL mode: commits survive a process crash; only power loss can drop the
         * last transactions (SQLite docs, "PRAGMA synchronous"). */
        rc = ap_sql_exec(db, db->wal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL");
        if (rc == AP_SQL_OK) rc = ap_sql_exec(db, "PRAGMA foreign_keys=ON");
        if (rc != AP_SQL_OK) st = ap_db_fail(db, rc, "configuring the connection", err);
    }
    if (st == AP_OK && o->max_pages > 0) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA max_page_count=%lld", (long long)o->max_pages);
        rc = ap_sql_exec(db, pragma);
        if (rc != AP_SQL_OK) st = ap_db_fail(db, rc, "setting max_page_count", err);
    }
    if (st == AP_OK && !o->readonly && db->version < AP_DB_SCHEMA_VERSION) st = migrate(db, err);
    /* corruption outside the pages a lookup reads would otherwise go unnoticed */
    if (st == AP_OK) st = ap_db_quick_check(db, 0, err);
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
    ap_sql_disconnect(db);
    ap_free(db->path);
    ap_free(db);
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
        int rc = ap_sql_query_int(db, sql[i], n);
        if (rc != AP_SQL_OK) return ap_db_fail(db, rc, "counting rows", err);
        return AP_OK;
    }
    return ap_err_set(err, AP_ERR_INPUT, "unknown table '%s' (plans, plan_results, profiles, "
                      "runs, run_ranks)", table);
}

ap_status ap_db_integrity_check(ap_db *db, ap_err *err) {
    char res[256];
    int rc = ap_sql_query_text(db, "PRAGMA integrity_check", res, sizeof res);
    if (rc != AP_SQL_OK) return ap_db_fail(db, rc, "integrity check", err);
    if (strcmp(res, "ok") != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: integrity check failed: %s", db->path, res);
    return AP_OK;
}

