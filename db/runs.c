/*
 * runs.c - executed plans (tables runs and run_ranks, db/schema.sql): a run and its per-rank
 * rows are written in one transaction under a uid hashed from the run's identity (so importing
 * a run twice stores it once); list runs and read one run's ranks.
 */
#include "db_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ap_status run_check(const ap_db_run *r, const ap_db_run_rank *ranks, size_t nranks,
                           ap_err *err) {
    if (!r->plan_json) return ap_err_set(err, AP_ERR_INPUT, "run.plan_json: missing");
    if (!ap_db_str_ok(r->host, sizeof r->host) || !r->host[0])
        return ap_err_set(err, AP_ERR_INPUT, "run.host: must be 1 to %zu bytes",
                          sizeof r->host - 1);
    if (!ap_db_str_ok(r->backend, sizeof r->backend) || !r->backend[0])
        return ap_err_set(err, AP_ERR_INPUT, "run.backend: must be 1 to %zu bytes",
                          sizeof r->backend - 1);
    if (!ap_db_str_ok(r->plan_key, sizeof r->plan_key) ||
        (r->plan_key[0] && !ap_db_valid_key(r->plan_key)))
        return ap_err_set(err, AP_ERR_INPUT, "run.plan_key: must be empty or %d hex digits",
                          AP_DB_KEY_HEX);
    if (r->ranks < 1 || r->ranks > AP_DB_MAX_RANKS)
        return ap_err_set(err, AP_ERR_INPUT, "run.ranks: must be in [1, %d], got %lld",
                          AP_DB_MAX_RANKS, (long long)r->ranks);
    if (nranks > (size_t)r->ranks)
        return ap_err_set(err, AP_ERR_INPUT, "run: %zu per-rank rows for %lld ranks", nranks,
                          (long long)r->ranks);
    if (r->started_at < 0) return ap_err_set(err, AP_ERR_INPUT, "run.started_at: must be >= 0");
    if (!ap_db_num_ok(r->predicted_step_s) || !ap_db_num_ok(r->measured_step_s) ||
        !ap_db_num_ok(r->predicted_peak_bytes) || !ap_db_num_ok(r->measured_peak_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "run: step times and peak bytes must be finite "
                          "numbers >= 0");
    for (size_t i = 0; i < nranks; i++) {
        const ap_db_run_rank *k = &ranks[i];
        if (k->rank < 0 || k->rank >= r->ranks)
            return ap_err_set(err, AP_ERR_INPUT, "ranks[%zu].rank: must be in [0, %lld), got "
                              "%lld", i, (long long)r->ranks, (long long)k->rank);
        if (!ap_db_num_ok(k->predicted_step_s) || !ap_db_num_ok(k->measured_step_s) ||
            !ap_db_num_ok(k->predicted_peak_bytes) || !ap_db_num_ok(k->measured_peak_bytes))
            return ap_err_set(err, AP_ERR_INPUT, "ranks[%zu]: step times and peak bytes must "
                              "be finite numbers >= 0", i);
    }
    return AP_OK;
}

static int bind_rank(ap_sql_stmt *st, int64_t run_id, const ap_db_run_rank *k) {
    ap_sql_reset(st);
    ap_sql_bind_int(st, 1, run_id);
    ap_sql_bind_int(st, 2, k->rank);
    ap_sql_bind_real(st, 3, k->predicted_step_s);
    ap_sql_bind_real(st, 4, k->measured_step_s);
    ap_sql_bind_real(st, 5, k->predicted_peak_bytes);
    ap_sql_bind_real(st, 6, k->measured_peak_bytes);
    return ap_sql_step(st);
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
    char *ident = ap_malloc(ilen);
    if (!ident) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path);
    int il = snprintf(ident, ilen, "run/1\n%s\n%s\n%lld\n%s\n%s", run->host, run->backend,
                      (long long)started, run->plan_key, run->plan_json);
    char uid[AP_DB_KEY_HEX + 1];
    ap_db_key_of(ident, (size_t)il, uid);
    ap_free(ident);

    const char *doing = "storing a run";
    s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int64_t id = 0;
    int rc = ap_sql_prepare(db, "SELECT id FROM runs WHERE uid = ?1", &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_text(st, 1, uid);
        rc = ap_sql_step(st);
        if (rc == AP_SQL_ROW) id = ap_sql_col_int(st, 0);
        if (rc == AP_SQL_ROW || rc == AP_SQL_DONE) rc = AP_SQL_OK;
    }
    ap_sql_finalize(st);
    st = NULL;
    if (rc == AP_SQL_OK && id == 0) {
        rc = ap_sql_prepare(db, "INSERT INTO runs (uid, plan_key, plan_json, host, backend,"
                                " started_at, ranks, predicted_step_s, measured_step_s,"
                                " predicted_peak_bytes, measured_peak_bytes) VALUES (?1, ?2, ?3,"
                                " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", &st);
        if (rc == AP_SQL_OK) {
            ap_sql_bind_text(st, 1, uid);
            ap_sql_bind_text(st, 2, run->plan_key);
            ap_sql_bind_text(st, 3, run->plan_json);
            ap_sql_bind_text(st, 4, run->host);
            ap_sql_bind_text(st, 5, run->backend);
            ap_sql_bind_int(st, 6, started);
            ap_sql_bind_int(st, 7, run->ranks);
            ap_sql_bind_real(st, 8, run->predicted_step_s);
            ap_sql_bind_real(st, 9, run->measured_step_s);
            ap_sql_bind_real(st, 10, run->predicted_peak_bytes);
            ap_sql_bind_real(st, 11, run->measured_peak_bytes);
            rc = ap_sql_step(st);
            if (rc == AP_SQL_DONE) {
                id = ap_sql_last_rowid(db);
                rc = AP_SQL_OK;
            }
        }
        ap_sql_finalize(st);
        st = NULL;
        if (rc == AP_SQL_OK && nranks > 0) {
            rc = ap_sql_prepare(db, "INSERT INTO run_ranks (run_id, rank, predicted_step_s,"
                                    " measured_step_s, predicted_peak_bytes, measured_peak_bytes)"
                                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st);
            for (size_t i = 0; rc == AP_SQL_OK && i < nranks; i++) {
                rc = bind_rank(st, id, &ranks[i]);
                if (rc == AP_SQL_DONE) rc = AP_SQL_OK;
            }
            ap_sql_finalize(st);
        }
    }
    if (rc != AP_SQL_OK) s = ap_db_fail(db, rc, doing, err);
    s = ap_db_wend(db, s, doing, err);
    if (s == AP_OK && id_out) *id_out = id;
    return s;
}

void ap_db_runs_free(ap_db_run *rows, size_t n) {
    if (!rows) return;
    for (size_t i = 0; i < n; i++) ap_free(rows[i].plan_json);
    ap_free(rows);
}

ap_status ap_db_runs_list(ap_db *db, ap_db_run **rows, size_t *n, ap_err *err) {
    *rows = NULL;
    *n = 0;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT id, uid, plan_key, plan_json, host, backend,"
                                " started_at, ranks, predicted_step_s, measured_step_s,"
                                " predicted_peak_bytes, measured_peak_bytes FROM runs"
                                " ORDER BY started_at DESC, id DESC", &st);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_run *nr = ap_realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        ap_db_run *r = &(*rows)[*n];
        memset(r, 0, sizeof *r);
        r->id = ap_sql_col_int(st, 0);
        ap_sql_col_copy(st, 1, r->uid, sizeof r->uid);
        ap_sql_col_copy(st, 2, r->plan_key, sizeof r->plan_key);
        r->plan_json = ap_sql_col_dup(st, 3);
        if (!r->plan_json) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
        (*n)++;
        ap_sql_col_copy(st, 4, r->host, sizeof r->host);
        ap_sql_col_copy(st, 5, r->backend, sizeof r->backend);
        r->started_at = ap_sql_col_int(st, 6);
        r->ranks = ap_sql_col_int(st, 7);
        r->predicted_step_s = ap_sql_col_real(st, 8);
        r->measured_step_s = ap_sql_col_real(st, 9);
        r->predicted_peak_bytes = ap_sql_col_real(st, 10);
        r->measured_peak_bytes = ap_sql_col_real(st, 11);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "listing runs", err);
    ap_sql_finalize(st);
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
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT rank, predicted_step_s, measured_step_s,"
                                " predicted_peak_bytes, measured_peak_bytes FROM run_ranks"
                                " WHERE run_id = ?1 ORDER BY rank", &st);
    if (rc == AP_SQL_OK) ap_sql_bind_int(st, 1, run_id);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_run_rank *nr = ap_realloc(*ranks, cap * sizeof **ranks);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *ranks = nr;
        }
        ap_db_run_rank *k = &(*ranks)[(*n)++];
        k->rank = ap_sql_col_int(st, 0);
        k->predicted_step_s = ap_sql_col_real(st, 1);
        k->measured_step_s = ap_sql_col_real(st, 2);
        k->predicted_peak_bytes = ap_sql_col_real(st, 3);
        k->measured_peak_bytes = ap_sql_col_real(st, 4);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "reading run ranks", err);
    ap_sql_finalize(st);
    if (s != AP_OK) {
        ap_free(*ranks);
        *ranks = NULL;
        *n = 0;
    }
    return s;
}
