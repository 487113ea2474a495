/*
 * sqlite.c - the one file that includes sqlite3.h: a thin wrapper over connections and
 * prepared statements for the rest of db/ (declared in db/db_int.h).
 *
 * Structure: SQLite's allocator (onto the library's hook, ap_malloc), error text for a result
 * code, the connection (open, close, flags), statements (prepare, bind, step, columns), one-row
 * queries.
 *
 * What it does not do: SQL. Every statement is written in the per-table files with bound
 * parameters; nothing here formats values into SQL text.
 */
#include "db_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(AP_SQL_OK == SQLITE_OK && AP_SQL_ERROR == SQLITE_ERROR &&
               AP_SQL_INTERNAL == SQLITE_INTERNAL && AP_SQL_BUSY == SQLITE_BUSY &&
               AP_SQL_LOCKED == SQLITE_LOCKED && AP_SQL_NOMEM == SQLITE_NOMEM &&
               AP_SQL_ROW == SQLITE_ROW && AP_SQL_DONE == SQLITE_DONE,
               "db_int.h result codes must equal SQLite's");

/* ---- memory ----------------------------------------------------------------------------------- */

/* SQLite allocates through the library's hook (common.h), so a failing allocation can be
 * injected into SQLite too. sqlite3_mem_methods needs the size of a live allocation: kept in an
 * 8-byte header, as SQLite's own default allocator does without malloc_usable_size (SQLite
 * source, mem1.c). SQLite asks for 8-byte alignment; malloc gives at least that. */
#define HDR 8

static void *mem_malloc(int n) {
    if (n <= 0) return NULL;
    int64_t *p = ap_malloc((size_t)n + HDR);
    if (!p) return NULL;
    p[0] = n;
    return p + 1;
}

static void mem_free(void *p) {
    if (p) ap_free((int64_t *)p - 1);
}

static void *mem_realloc(void *p, int n) {
    if (!p) return mem_malloc(n);
    if (n <= 0) return NULL;
    int64_t *q = ap_realloc((int64_t *)p - 1, (size_t)n + HDR);
    if (!q) return NULL;
    q[0] = n;
    return q + 1;
}

static int mem_size(void *p) { return p ? (int)((int64_t *)p)[-1] : 0; }
static int mem_roundup(int n) { return (n + 7) & ~7; }
static int mem_init(void *arg) { (void)arg; return SQLITE_OK; }
static void mem_shutdown(void *arg) { (void)arg; }

/* Must run before SQLite initialises itself, i.e. before the first connection: called by
 * ap_sql_connect, the only place this library starts SQLite. A program that started SQLite
 * earlier keeps SQLite's own allocator (sqlite3_config answers SQLITE_MISUSE). */
static void install_allocator(void) {
    static int done;
    if (done) return;
    static const sqlite3_mem_methods m = {mem_malloc, mem_free, mem_realloc, mem_size,
                                          mem_roundup, mem_init, mem_shutdown, NULL};
    sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
    done = 1;
}

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

ap_status ap_db_fail(ap_db *db, int rc, const char *doing, ap_err *err) {
    const char *detail = db && db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    const char *reason = rc_reason(rc);
    if (detail && strcmp(detail, reason) != 0)
        return ap_err_set(err, AP_ERR_DB, "%s: %s: %s (%s)", db ? db->path : "?", doing, reason,
                          detail);
    return ap_err_set(err, AP_ERR_DB, "%s: %s: %s", db ? db->path : "?", doing, reason);
}

int ap_sql_is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

/* ---- the connection ----------------------------------------------------------------------------- */

int ap_sql_connect(ap_db *db, const char *name, int readonly, int uri, const char *vfs) {
    install_allocator();
    int flags = readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (uri) flags |= SQLITE_OPEN_URI;
    int rc = sqlite3_open_v2(name, &db->h, flags | SQLITE_OPEN_NOMUTEX, vfs);
    if (rc != SQLITE_OK) return rc;
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_timeout(db->h, db->busy_ms);
    return SQLITE_OK;
}

void ap_sql_disconnect(ap_db *db) {
    if (!db->h) return;
    if (!sqlite3_get_autocommit(db->h)) ap_sql_exec(db, "ROLLBACK");
    sqlite3_close_v2(db->h);
    db->h = NULL;
}

int ap_sql_file_readonly(ap_db *db) { return sqlite3_db_readonly(db->h, "main") == 1; }
int ap_sql_autocommit(ap_db *db) { return sqlite3_get_autocommit(db->h) != 0; }
void ap_sql_busy_timeout(ap_db *db, int ms) { sqlite3_busy_timeout(db->h, ms); }
int64_t ap_sql_changes(ap_db *db) { return sqlite3_changes(db->h); }
int64_t ap_sql_last_rowid(ap_db *db) { return sqlite3_last_insert_rowid(db->h); }

/* ---- statements --------------------------------------------------------------------------------- */

int ap_sql_exec(ap_db *db, const char *sql) { return sqlite3_exec(db->h, sql, NULL, NULL, NULL); }

int ap_sql_prepare(ap_db *db, const char *sql, ap_sql_stmt **st) {
    return sqlite3_prepare_v2(db->h, sql, -1, st, NULL);
}

int ap_sql_step(ap_sql_stmt *st) { return sqlite3_step(st); }
void ap_sql_reset(ap_sql_stmt *st) { sqlite3_reset(st); }
void ap_sql_finalize(ap_sql_stmt *st) { sqlite3_finalize(st); }

void ap_sql_bind_text(ap_sql_stmt *st, int i, const char *s) {
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}
void ap_sql_bind_int(ap_sql_stmt *st, int i, int64_t v) { sqlite3_bind_int64(st, i, v); }
void ap_sql_bind_real(ap_sql_stmt *st, int i, double v) { sqlite3_bind_double(st, i, v); }

int ap_sql_col_count(ap_sql_stmt *st) { return sqlite3_column_count(st); }
int64_t ap_sql_col_int(ap_sql_stmt *st, int col) { return sqlite3_column_int64(st, col); }
double ap_sql_col_real(ap_sql_stmt *st, int col) { return sqlite3_column_double(st, col); }
void ap_sql_col_copy(ap_sql_stmt *st, int col, char *buf, size_t n) {
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(buf, n, "%s", t ? (const char *)t : "");
}

char *ap_sql_col_dup(ap_sql_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    int len = sqlite3_column_bytes(st, col);
    char *s = ap_malloc((size_t)len + 1);
    if (!s) return NULL;
    if (len > 0) memcpy(s, t, (size_t)len);
    s[len] = '\0';
    return s;
}

uint64_t ap_sql_hash_row(ap_sql_stmt *st, int ncol, uint64_t h) {
    for (int c = 0; c < ncol; c++) {
        if (sqlite3_column_type(st, c) == SQLITE_TEXT) {
            const unsigned char *t = sqlite3_column_text(st, c);
            h = ap_hash64(t, (size_t)sqlite3_column_bytes(st, c), h);
        } else {
            /* formatting with %.17g cost 10x more and made this the slowest step of a hit */
            double v = sqlite3_column_double(st, c) + 0.0; /* -0.0 -> 0.0 */
            uint64_t bits;
            unsigned char le[8];
            memcpy(&bits, &v, sizeof bits);
            for (int i = 0; i < 8; i++) le[i] = (unsigned char)(bits >> (8 * i));
            h = ap_hash64(le, sizeof le, h);
        }
        h = ap_hash64("\x1f", 1, h);
    }
    return h;
}

/* ---- one-row queries ----------------------------------------------------------------------------- */

int ap_sql_query_int(ap_db *db, const char *sql, int64_t *out) {
    sqlite3_stmt *st = NULL;
    int rc = ap_sql_prepare(db, sql, &st);
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

int ap_sql_query_text(ap_db *db, const char *sql, char *buf, size_t n) {
    sqlite3_stmt *st = NULL;
    buf[0] = '\0';
    int rc = ap_sql_prepare(db, sql, &st);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            ap_sql_col_copy(st, 0, buf, n);
            rc = SQLITE_OK;
        } else if (rc == SQLITE_DONE) {
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    return rc;
}
