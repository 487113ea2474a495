/*
 * db_int.h - inside the store (not a public header): the connection struct and the thin
 * statement wrapper the per-table files use.
 *
 * Files: sqlite.c (this wrapper; the only file that includes sqlite3.h), open.c (paths,
 * probing, journal mode, migrations, close), schema.c (the schema text), txn.c (write
 * transactions), keys.c (plan keys and run uids), plans.c, profiles.c, runs.c (one table each),
 * export.c (JSON/CSV export and import over the public db.h API), profile_json.c (one
 * profile as a JSON file).
 *
 * Result codes are SQLite's primary codes under our own names (sqlite.c asserts that they are
 * equal), so an SQLite result passes unchanged from ap_sql_step to ap_db_fail. Text bound with
 * ap_sql_bind_text is borrowed: it must stay valid until the statement is reset or finalized.
 */
#ifndef AP_DB_INT_H
#define AP_DB_INT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "autoplan/db.h"
#include "autoplan/json.h"

enum {
    AP_SQL_OK = 0,
    AP_SQL_ERROR = 1,
    AP_SQL_INTERNAL = 2,
    AP_SQL_BUSY = 5,
    AP_SQL_LOCKED = 6,
    AP_SQL_NOMEM = 7,
    AP_SQL_ROW = 100,
    AP_SQL_DONE = 101
};

/* An SQLite connection and prepared statement, opaque outside sqlite.c. */
struct sqlite3;
typedef struct sqlite3_stmt ap_sql_stmt;

struct ap_db {
    struct sqlite3 *h;
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

/* ---- the connection (sqlite.c) ---------------------------------------------------------- */

/* Open db->h on name (a path, or a "file:" URI when uri = 1): read-only or read-write-create,
 * no mutex, extended result codes, busy timeout db->busy_ms. vfs NULL: the default. */
int ap_sql_connect(ap_db *db, const char *name, int readonly, int uri, const char *vfs);
/* Roll back an open transaction and close db->h (NULL: nothing). */
void ap_sql_disconnect(ap_db *db);
/* 1 when SQLite opened the main database read-only. */
int ap_sql_file_readonly(ap_db *db);
/* 1 when no transaction is open (SQLite may roll one back by itself after an error). */
int ap_sql_autocommit(ap_db *db);
void ap_sql_busy_timeout(ap_db *db, int ms);
/* Rows changed by the last statement; rowid of the last insert. */
int64_t ap_sql_changes(ap_db *db);
int64_t ap_sql_last_rowid(ap_db *db);
/* 1 when rc means another connection holds the lock. */
int ap_sql_is_busy(int rc);

/* ---- statements (sqlite.c) -------------------------------------------------------------- */

int ap_sql_exec(ap_db *db, const char *sql);
int ap_sql_prepare(ap_db *db, const char *sql, ap_sql_stmt **st);
int ap_sql_step(ap_sql_stmt *st);
void ap_sql_reset(ap_sql_stmt *st);
void ap_sql_finalize(ap_sql_stmt *st); /* NULL is fine */
void ap_sql_bind_text(ap_sql_stmt *st, int i, const char *s);
void ap_sql_bind_int(ap_sql_stmt *st, int i, int64_t v);
void ap_sql_bind_real(ap_sql_stmt *st, int i, double v);
int ap_sql_col_count(ap_sql_stmt *st);
int64_t ap_sql_col_int(ap_sql_stmt *st, int col);
double ap_sql_col_real(ap_sql_stmt *st, int col);
/* Copy the text of col into buf (cut to n - 1 bytes; NULL reads as ""). */
void ap_sql_col_copy(ap_sql_stmt *st, int col, char *buf, size_t n);
/* The text of col as a new string (caller frees); NULL when out of memory. */
char *ap_sql_col_dup(ap_sql_stmt *st, int col);
/* FNV-1a (ap_hash64) of the first ncol values of the current row, continuing from h: a text
 * value's bytes, a number's IEEE-754 bits little-endian (-0.0 as 0.0), each followed by 0x1f.
 * The same bytes on every machine; one call per row (the profile fingerprint is on the path of
 * every cache hit). */
uint64_t ap_sql_hash_row(ap_sql_stmt *st, int ncol, uint64_t h);
/* One integer (text) from a one-row query such as a PRAGMA; no row: 0 (""). */
int ap_sql_query_int(ap_db *db, const char *sql, int64_t *out);
int ap_sql_query_text(ap_db *db, const char *sql, char *buf, size_t n);

/* AP_ERR_DB "<path>: <doing>: <reason> (<SQLite's message>)" for result code rc. */
ap_status ap_db_fail(ap_db *db, int rc, const char *doing, ap_err *err);

/* ---- write transactions (txn.c) ----------------------------------------------------------- */

/* Start a write: BEGIN IMMEDIATE, or a SAVEPOINT inside ap_db_begin. */
ap_status ap_db_wbegin(ap_db *db, const char *doing, ap_err *err);
/* Finish a write started by ap_db_wbegin: commit when st is AP_OK, else roll back. Returns the
 * final status (a failed COMMIT turns AP_OK into AP_ERR_DB). */
ap_status ap_db_wend(ap_db *db, ap_status st, const char *doing, ap_err *err);

/* ---- hashing (keys.c) --------------------------------------------------------------------- */

/* splitmix64 finalizer (Steele, Lea, Flood 2014). */
uint64_t ap_db_mix64(uint64_t z);
/* The 128-bit key of n bytes as AP_DB_KEY_HEX hex digits (see ap_db_plan_key). */
void ap_db_key_of(const void *data, size_t n, char out[AP_DB_KEY_HEX + 1]);
/* 1 when key is AP_DB_KEY_HEX lower-case hex digits. */
int ap_db_valid_key(const char *key);

/* ---- JSON files (export.c, profile_json.c) ------------------------------------------------ */

/* AP_ERR_INPUT "<where>: unknown field 'k'" for a member of o not in the NULL-terminated list
 * (a typo would otherwise be dropped silently); control characters in the key shown as '?'. */
ap_status ap_db_json_only_known(const ap_json *o, const char *const *known, const char *where,
                                ap_err *err);

/* A user string fit for a one-line message: control characters become '?', long strings are
 * cut with "...". Returns buf. */
const char *ap_db_json_shown(const char *s, char *buf, size_t n);

/* A profile row read from a file is checked by ap_profile_row_check, whose messages quote the
 * row's op, shape and dtype: refuse control characters in them first, so every message stays
 * one line. AP_ERR_INPUT "<where>: field '<f>' contains a control character". */
ap_status ap_db_json_row_text_ok(const ap_profile_row *r, const char *where, ap_err *err);
/* The same for one text field: AP_ERR_INPUT when text holds a control character (a run's host
 * or backend, printed by `db list` and `db show` as they are). */
ap_status ap_db_json_text_ok(const char *text, const char *field, const char *where,
                             ap_err *err);

/* ---- row checks shared by the tables ------------------------------------------------------ */

/* A NUL inside a fixed-size text field of cap bytes. */
static inline int ap_db_str_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }
static inline int ap_db_num_ok(double v) { return isfinite(v) && v >= 0; }

#endif
