/*
 * plans.c - the plan cache (tables plans and plan_results, db/schema.sql): look a key up,
 * store a ranked search result, list, read, import and collect old rows.
 *
 * A hit records its time in used_at at most once an hour and never waits for another writer
 * for it; the result text lives in its own table so that counting a hit does not rewrite it.
 */
#include "db_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Granularity of plans.used_at: a hit writes only when the stored value is older, so a run of
 * cache hits costs no writes (a write means a WAL commit and, at close, a checkpoint with an
 * fsync: several ms, against a 20 ms budget for a whole cache hit). gc works in days. */
#define USED_AT_GRANULARITY_S 3600

/* Record a hit in used_at, but never wait for it: a busy database skips the bookkeeping. */
static void touch_plan(ap_db *db, int64_t id, int64_t used_at) {
    int64_t now = (int64_t)time(NULL);
    if (db->readonly || (used_at <= now && now - used_at < USED_AT_GRANULARITY_S)) return;
    ap_sql_busy_timeout(db, 0);
    int own = !db->in_txn;
    if (!own || ap_sql_exec(db, "BEGIN IMMEDIATE") == AP_SQL_OK) {
        ap_sql_stmt *st = NULL;
        int rc = ap_sql_prepare(db, "UPDATE plans SET used_at = ?1 WHERE id = ?2", &st);
        if (rc == AP_SQL_OK) {
            ap_sql_bind_int(st, 1, now);
            ap_sql_bind_int(st, 2, id);
            rc = ap_sql_step(st);
        }
        ap_sql_finalize(st);
        if (own) ap_sql_exec(db, rc == AP_SQL_DONE ? "COMMIT" : "ROLLBACK");
        if (own && !ap_sql_autocommit(db)) ap_sql_exec(db, "ROLLBACK");
    }
    ap_sql_busy_timeout(db, db->busy_ms);
}

ap_status ap_db_plan_get(ap_db *db, const char *key, char **json_out, double *search_s,
                         ap_err *err) {
    *json_out = NULL;
    if (!db) return AP_OK;
    if (!ap_db_valid_key(key))
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: plan key '%s' is not %d hex digits",
                          db->path, key ? key : "(null)", AP_DB_KEY_HEX);
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT p.id, r.result_json, p.search_s, p.used_at FROM plans p"
                                " JOIN plan_results r ON r.plan_id = p.id WHERE p.key = ?1", &st);
    int64_t id = 0, used_at = 0;
    if (rc == AP_SQL_OK) {
        ap_sql_bind_text(st, 1, key);
        rc = ap_sql_step(st);
        if (rc == AP_SQL_ROW) {
            id = ap_sql_col_int(st, 0);
            used_at = ap_sql_col_int(st, 3);
            *json_out = ap_sql_col_dup(st, 1);
            if (search_s) *search_s = ap_sql_col_real(st, 2);
            rc = *json_out ? AP_SQL_DONE : AP_SQL_NOMEM;
        }
    }
    ap_sql_finalize(st);
    if (rc != AP_SQL_DONE && rc != AP_SQL_OK) {
        ap_free(*json_out);
        *json_out = NULL;
        return ap_db_fail(db, rc, "reading the plan cache", err);
    }
    if (*json_out) touch_plan(db, id, used_at);
    return AP_OK;
}

/* Store the result of plan row `id` (inside the caller's write transaction). */
static int put_result(ap_db *db, int64_t id, const char *json) {
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "INSERT OR REPLACE INTO plan_results (plan_id, result_json)"
                                " VALUES (?1, ?2)", &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_int(st, 1, id);
        ap_sql_bind_text(st, 2, json);
        rc = ap_sql_step(st);
    }
    ap_sql_finalize(st);
    return rc;
}

ap_status ap_db_plan_put(ap_db *db, const char *key, const char *summary, const char *json,
                         double search_s, ap_err *err) {
    if (!db) return AP_OK;
    if (!ap_db_valid_key(key))
        return ap_err_set(err, AP_ERR_INTERNAL, "%s: plan key '%s' is not %d hex digits",
                          db->path, key ? key : "(null)", AP_DB_KEY_HEX);
    if (!json) return ap_err_set(err, AP_ERR_INTERNAL, "%s: no plan result to store", db->path);
    if (!isfinite(search_s) || search_s < 0) search_s = 0;
    const char *doing = "storing the plan in the cache";
    /* the stored results of a large file are checked here, not at open (a store follows a
     * search, which takes longer than the check) */
    ap_status s = ap_db_quick_check(db, 1, err);
    if (s != AP_OK) return s;
    s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db,
                     "INSERT INTO plans (key, summary, search_s, created_at, used_at, result_bytes)"
                     " VALUES (?1, ?2, ?3, ?4, ?4, ?5)"
                     " ON CONFLICT(key) DO UPDATE SET summary = excluded.summary,"
                     " search_s = excluded.search_s, created_at = excluded.created_at,"
                     " used_at = excluded.used_at, result_bytes = excluded.result_bytes",
                     &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_text(st, 1, key);
        ap_sql_bind_text(st, 2, summary ? summary : "");
        ap_sql_bind_real(st, 3, search_s);
        ap_sql_bind_int(st, 4, (int64_t)time(NULL));
        ap_sql_bind_int(st, 5, (int64_t)strlen(json));
        rc = ap_sql_step(st);
    }
    ap_sql_finalize(st);
    st = NULL;
    int64_t id = 0;
    if (rc == AP_SQL_DONE) {
        rc = ap_sql_prepare(db, "SELECT id FROM plans WHERE key = ?1", &st);
        if (rc == AP_SQL_OK) {
            ap_sql_bind_text(st, 1, key);
            rc = ap_sql_step(st);
            if (rc == AP_SQL_ROW) {
                id = ap_sql_col_int(st, 0);
                rc = AP_SQL_DONE;
            } else if (rc == AP_SQL_DONE) {
                rc = AP_SQL_INTERNAL;
            }
        }
        ap_sql_finalize(st);
        st = NULL;
    }
    if (rc == AP_SQL_DONE) rc = put_result(db, id, json);
    if (rc != AP_SQL_DONE) s = ap_db_fail(db, rc, doing, err);
    return ap_db_wend(db, s, doing, err);
}

ap_status ap_db_plans_list(ap_db *db, ap_db_plan_info **rows, size_t *n, ap_err *err) {
    *rows = NULL;
    *n = 0;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT id, key, summary, search_s, created_at, used_at,"
                                " result_bytes FROM plans"
                                " ORDER BY used_at DESC, id DESC", &st);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_plan_info *nr = ap_realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        ap_db_plan_info *r = &(*rows)[(*n)++];
        memset(r, 0, sizeof *r);
        r->id = ap_sql_col_int(st, 0);
        ap_sql_col_copy(st, 1, r->key, sizeof r->key);
        ap_sql_col_copy(st, 2, r->summary, sizeof r->summary);
        r->search_s = ap_sql_col_real(st, 3);
        r->created_at = ap_sql_col_int(st, 4);
        r->used_at = ap_sql_col_int(st, 5);
        r->json_bytes = ap_sql_col_int(st, 6);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "listing plans", err);
    ap_sql_finalize(st);
    if (s != AP_OK) {
        ap_free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_plan_json(ap_db *db, int64_t id, char **json_out, ap_err *err) {
    *json_out = NULL;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT result_json FROM plan_results WHERE plan_id = ?1", &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_int(st, 1, id);
        rc = ap_sql_step(st);
        if (rc == AP_SQL_ROW) {
            *json_out = ap_sql_col_dup(st, 0);
            rc = *json_out ? AP_SQL_DONE : AP_SQL_NOMEM;
        }
    }
    ap_sql_finalize(st);
    if (rc != AP_SQL_DONE) return ap_db_fail(db, rc, "reading a plan", err);
    return AP_OK;
}

ap_status ap_db_plan_import(ap_db *db, const ap_db_plan_info *info, const char *json,
                            int *added, ap_err *err) {
    if (added) *added = 0;
    if (!ap_db_valid_key(info->key))
        return ap_err_set(err, AP_ERR_INPUT, "plan key '%s' is not %d hex digits", info->key,
                          AP_DB_KEY_HEX);
    const char *doing = "importing a plan";
    ap_status s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "INSERT OR IGNORE INTO plans (key, summary, search_s, created_at,"
                                " used_at, result_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_text(st, 1, info->key);
        ap_sql_bind_text(st, 2, info->summary);
        ap_sql_bind_real(st, 3, info->search_s);
        ap_sql_bind_int(st, 4, info->created_at);
        ap_sql_bind_int(st, 5, info->used_at);
        ap_sql_bind_int(st, 6, (int64_t)strlen(json));
        rc = ap_sql_step(st);
    }
    ap_sql_finalize(st);
    int fresh = rc == AP_SQL_DONE && ap_sql_changes(db) > 0;
    if (fresh) rc = put_result(db, ap_sql_last_rowid(db), json);
    if (rc == AP_SQL_DONE) {
        if (added) *added = fresh;
    } else {
        s = ap_db_fail(db, rc, doing, err);
    }
    return ap_db_wend(db, s, doing, err);
}

ap_status ap_db_plans_gc(ap_db *db, double older_than_s, int64_t *deleted, ap_err *err) {
    *deleted = 0;
    /* the cut-off is a time_t: a duration past 10000 years would overflow the conversion */
    if (!isfinite(older_than_s) || older_than_s < 0 || older_than_s > 3.15e11)
        return ap_err_set(err, AP_ERR_INPUT, "--older-than: must be a positive duration of at "
                          "most 10000 years");
    const char *doing = "collecting old plans";
    ap_status s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "DELETE FROM plans WHERE used_at < ?1", &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_int(st, 1, (int64_t)((double)time(NULL) - older_than_s));
        rc = ap_sql_step(st);
    }
    if (rc == AP_SQL_DONE) *deleted = ap_sql_changes(db);
    ap_sql_finalize(st);
    /* Free pages go back to the filesystem (the file shrinks at the next checkpoint). */
    if (rc == AP_SQL_DONE)
        rc = ap_sql_exec(db, "PRAGMA incremental_vacuum") == AP_SQL_OK ? AP_SQL_DONE : AP_SQL_ERROR;
    if (rc != AP_SQL_DONE) s = ap_db_fail(db, rc, doing, err);
    s = ap_db_wend(db, s, doing, err);
    if (s != AP_OK) *deleted = 0;
    return s;
}
