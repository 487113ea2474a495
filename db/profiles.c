/*
 * profiles.c - operator profiles measured on GPUs (table profiles, db/schema.sql): insert
 * validated rows (a row equal to a stored one in its identifying columns is skipped), list
 * them, and fingerprint one GPU's rows for the plan-cache key.
 *
 * A stored row is the kernel-profile row of profile.h; its vocabulary lives there. Named
 * profiles (the rows sharing one source_run: list, get, newest, delete) are at the end.
 */
#include "db_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A row is a kernel-profile row: validated by the format's own check (profile.h), the field
 * named after the row's index ("profiles[3].time_s: must be ..."). */
static ap_status profile_check(const ap_db_profile *r, size_t i, ap_err *err) {
    ap_err e;
    if (ap_profile_row_check(r, &e) == AP_OK) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s", i, e.msg);
}

/* Column order shared by insert, list and the fingerprint. */
#define PROFILE_COLS "gpu, device_name, pci_id, sm_count, mem_bytes, sm_clock_mhz," \
    " mem_clock_mhz, power_limit_w, driver_version, cuda_version, cublas_version," \
    " nccl_version, mig_mode, op, shape, dtype, time_s, flops_per_s, bytes_per_s, bytes," \
    " samples, spread, host, source, source_run, created_at"

ap_status ap_db_profiles_insert(ap_db *db, const ap_db_profile *rows, size_t n,
                                size_t *inserted, ap_err *err) {
    if (inserted) *inserted = 0;
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    for (size_t i = 0; i < n; i++) {
        ap_status s = profile_check(&rows[i], i, err);
        if (s != AP_OK) return s;
    }
    const char *doing = "storing profiles";
    ap_status s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "INSERT OR IGNORE INTO profiles (" PROFILE_COLS ") VALUES"
                                " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                                " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
                        &st);
    size_t added = 0;
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; rc == AP_SQL_OK && i < n; i++) {
        const ap_db_profile *r = &rows[i];
        ap_sql_reset(st);
        ap_sql_bind_text(st, 1, r->gpu);
        ap_sql_bind_text(st, 2, r->device_name);
        ap_sql_bind_text(st, 3, r->pci_id);
        ap_sql_bind_int(st, 4, r->sm_count);
        ap_sql_bind_real(st, 5, r->mem_bytes);
        ap_sql_bind_real(st, 6, r->sm_clock_mhz);
        ap_sql_bind_real(st, 7, r->mem_clock_mhz);
        ap_sql_bind_real(st, 8, r->power_limit_w);
        ap_sql_bind_text(st, 9, r->driver_version);
        ap_sql_bind_text(st, 10, r->cuda_version);
        ap_sql_bind_text(st, 11, r->cublas_version);
        ap_sql_bind_text(st, 12, r->nccl_version);
        ap_sql_bind_text(st, 13, r->mig_mode[0] ? r->mig_mode : "off");
        ap_sql_bind_text(st, 14, r->op);
        ap_sql_bind_text(st, 15, r->shape);
        ap_sql_bind_text(st, 16, r->dtype);
        ap_sql_bind_real(st, 17, r->time_s);
        ap_sql_bind_real(st, 18, r->flops_per_s);
        ap_sql_bind_real(st, 19, r->bytes_per_s);
        ap_sql_bind_real(st, 20, r->bytes);
        ap_sql_bind_int(st, 21, r->samples);
        ap_sql_bind_real(st, 22, r->spread);
        ap_sql_bind_text(st, 23, r->host);
        ap_sql_bind_text(st, 24, r->source);
        ap_sql_bind_text(st, 25, r->source_run);
        ap_sql_bind_int(st, 26, r->created_at > 0 ? r->created_at : now);
        rc = ap_sql_step(st);
        if (rc == AP_SQL_DONE) {
            added += (size_t)ap_sql_changes(db);
            rc = AP_SQL_OK;
        }
    }
    if (rc != AP_SQL_OK) s = ap_db_fail(db, rc, doing, err);
    ap_sql_finalize(st);
    s = ap_db_wend(db, s, doing, err);
    if (s == AP_OK && inserted) *inserted = added;
    return s;
}

static void profile_from_row(ap_sql_stmt *st, ap_db_profile *r) {
    memset(r, 0, sizeof *r);
    r->id = ap_sql_col_int(st, 0);
    ap_sql_col_copy(st, 1, r->gpu, sizeof r->gpu);
    ap_sql_col_copy(st, 2, r->device_name, sizeof r->device_name);
    ap_sql_col_copy(st, 3, r->pci_id, sizeof r->pci_id);
    r->sm_count = ap_sql_col_int(st, 4);
    r->mem_bytes = ap_sql_col_real(st, 5);
    r->sm_clock_mhz = ap_sql_col_real(st, 6);
    r->mem_clock_mhz = ap_sql_col_real(st, 7);
    r->power_limit_w = ap_sql_col_real(st, 8);
    ap_sql_col_copy(st, 9, r->driver_version, sizeof r->driver_version);
    ap_sql_col_copy(st, 10, r->cuda_version, sizeof r->cuda_version);
    ap_sql_col_copy(st, 11, r->cublas_version, sizeof r->cublas_version);
    ap_sql_col_copy(st, 12, r->nccl_version, sizeof r->nccl_version);
    ap_sql_col_copy(st, 13, r->mig_mode, sizeof r->mig_mode);
    ap_sql_col_copy(st, 14, r->op, sizeof r->op);
    ap_sql_col_copy(st, 15, r->shape, sizeof r->shape);
    ap_sql_col_copy(st, 16, r->dtype, sizeof r->dtype);
    r->time_s = ap_sql_col_real(st, 17);
    r->flops_per_s = ap_sql_col_real(st, 18);
    r->bytes_per_s = ap_sql_col_real(st, 19);
    r->bytes = ap_sql_col_real(st, 20);
    r->samples = ap_sql_col_int(st, 21);
    r->spread = ap_sql_col_real(st, 22);
    ap_sql_col_copy(st, 23, r->host, sizeof r->host);
    ap_sql_col_copy(st, 24, r->source, sizeof r->source);
    ap_sql_col_copy(st, 25, r->source_run, sizeof r->source_run);
    r->created_at = ap_sql_col_int(st, 26);
}

/* The columns of the UNIQUE constraint, in its order: SQLite walks that index instead of
 * sorting (the fingerprint of 2000 rows: 5 ms sorted, a fraction of that walked). */
#define PROFILE_ORDER " ORDER BY gpu, device_name, pci_id, driver_version, cuda_version," \
    " cublas_version, nccl_version, sm_clock_mhz, mem_clock_mhz, mig_mode, host, op, shape," \
    " dtype, source_run"

ap_status ap_db_profiles_list(ap_db *db, const char *gpu, ap_db_profile **rows, size_t *n,
                              ap_err *err) {
    *rows = NULL;
    *n = 0;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT id, " PROFILE_COLS " FROM profiles"
                                " WHERE ?1 IS NULL OR gpu = ?1" PROFILE_ORDER, &st);
    if (rc == AP_SQL_OK && gpu) ap_sql_bind_text(st, 1, gpu);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_profile *nr = ap_realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        profile_from_row(st, &(*rows)[(*n)++]);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "listing profiles", err);
    ap_sql_finalize(st);
    if (s != AP_OK) {
        ap_free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_profiles_fingerprint(ap_db *db, const char *gpu, uint64_t *fp, ap_err *err) {
    static const char tag[] = "autoplan-profiles/1";
    uint64_t h = ap_hash64(tag, sizeof tag - 1, 0);
    *fp = ap_db_mix64(h);
    if (!db) return AP_OK;
    /* Every column but id and created_at (identity and content, not history), in a fixed
     * order, each value followed by a separator byte so "ab","c" differs from "a","bc". */
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT " PROFILE_COLS " FROM profiles WHERE gpu = ?1"
                                PROFILE_ORDER, &st);
    if (rc == AP_SQL_OK) ap_sql_bind_text(st, 1, gpu ? gpu : "");
    int ncol = rc == AP_SQL_OK ? ap_sql_col_count(st) - 1 : 0; /* without created_at */
    uint64_t rows = 0;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        h = ap_sql_hash_row(st, ncol, h);
        h = ap_hash64("\x1e", 1, h);
        rows++;
        rc = AP_SQL_OK;
    }
    ap_status s = AP_OK;
    if (rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "fingerprinting profiles", err);
    ap_sql_finalize(st);
    if (s == AP_OK) *fp = ap_db_mix64(h ^ rows);
    return s;
}

/* ---- named profiles ----------------------------------------------------------------------- */

#define MEASURED " source_run NOT IN ('', 'published')"

ap_status ap_db_profile_names(ap_db *db, const char *gpu, ap_db_profile_info **out, size_t *n,
                              ap_err *err) {
    *out = NULL;
    *n = 0;
    if (!db) return AP_OK;
    ap_sql_stmt *st = NULL;
    /* a profile is one machine, so min() only picks a value deterministically */
    int rc = ap_sql_prepare(db, "SELECT source_run, min(gpu), min(device_name), min(host),"
                                " min(driver_version), min(cuda_version), min(mig_mode),"
                                " min(sm_clock_mhz), min(mem_clock_mhz), count(*), max(created_at)"
                                " FROM profiles WHERE" MEASURED " AND (?1 IS NULL OR gpu = ?1)"
                                " GROUP BY source_run ORDER BY max(created_at) DESC, source_run",
                            &st);
    if (rc == AP_SQL_OK && gpu) ap_sql_bind_text(st, 1, gpu);
    size_t cap = 0;
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ap_db_profile_info *nr = ap_realloc(*out, cap * sizeof **out);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *out = nr;
        }
        ap_db_profile_info *p = &(*out)[(*n)++];
        memset(p, 0, sizeof *p);
        ap_sql_col_copy(st, 0, p->name, sizeof p->name);
        ap_sql_col_copy(st, 1, p->gpu, sizeof p->gpu);
        ap_sql_col_copy(st, 2, p->device_name, sizeof p->device_name);
        ap_sql_col_copy(st, 3, p->host, sizeof p->host);
        ap_sql_col_copy(st, 4, p->driver_version, sizeof p->driver_version);
        ap_sql_col_copy(st, 5, p->cuda_version, sizeof p->cuda_version);
        ap_sql_col_copy(st, 6, p->mig_mode, sizeof p->mig_mode);
        p->sm_clock_mhz = ap_sql_col_real(st, 7);
        p->mem_clock_mhz = ap_sql_col_real(st, 8);
        p->rows = ap_sql_col_int(st, 9);
        p->created_at = ap_sql_col_int(st, 10);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "listing profiles", err);
    ap_sql_finalize(st);
    if (s != AP_OK) {
        ap_free(*out);
        *out = NULL;
        *n = 0;
    }
    return s;
}

ap_status ap_db_profile_get(ap_db *db, const char *name, ap_profile *out, ap_err *err) {
    ap_profile_init(out);
    snprintf(out->name, sizeof out->name, "%s", name);
    if (!db) return AP_OK;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT id, " PROFILE_COLS " FROM profiles WHERE source_run = ?1"
                                " ORDER BY op, shape, dtype, id", &st);
    if (rc == AP_SQL_OK) ap_sql_bind_text(st, 1, name);
    ap_status s = AP_OK;
    while (rc == AP_SQL_OK && (rc = ap_sql_step(st)) == AP_SQL_ROW) {
        ap_db_profile r;
        profile_from_row(st, &r);
        rc = AP_SQL_OK;
        ap_err e;
        s = ap_profile_add(out, &r, &e);
        if (s == AP_ERR_INPUT) { /* stored before the vocabulary existed */
            ap_log(AP_LOG_WARN, "%s: profile '%s' row %lld left out: %s", db->path, name,
                   (long long)r.id, e.msg);
            s = AP_OK;
            continue;
        }
        if (s != AP_OK) {
            ap_err_set(err, s, "%s: %s", db->path, e.msg);
            break;
        }
        if (!out->gpu[0]) snprintf(out->gpu, sizeof out->gpu, "%s", r.gpu);
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "reading a profile", err);
    ap_sql_finalize(st);
    if (s != AP_OK) {
        ap_profile_free(out);
        snprintf(out->name, sizeof out->name, "%s", name);
    }
    return s;
}

ap_status ap_db_profile_newest(ap_db *db, const char *gpu, char name[64], ap_err *err) {
    name[0] = '\0';
    if (!db) return AP_OK;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "SELECT source_run FROM profiles WHERE gpu = ?1 AND" MEASURED
                                " GROUP BY source_run ORDER BY max(created_at) DESC, source_run"
                                " LIMIT 1", &st);
    if (rc == AP_SQL_OK) ap_sql_bind_text(st, 1, gpu ? gpu : "");
    if (rc == AP_SQL_OK) rc = ap_sql_step(st);
    if (rc == AP_SQL_ROW) {
        ap_sql_col_copy(st, 0, name, 64);
        rc = AP_SQL_DONE;
    }
    ap_status s = rc == AP_SQL_DONE ? AP_OK : ap_db_fail(db, rc, "finding the newest profile", err);
    ap_sql_finalize(st);
    return s;
}

ap_status ap_db_profile_delete(ap_db *db, const char *name, int64_t *deleted, ap_err *err) {
    if (deleted) *deleted = 0;
    if (!db) return ap_err_set(err, AP_ERR_DB, "no database");
    const char *doing = "deleting a profile";
    ap_status s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "DELETE FROM profiles WHERE source_run = ?1 AND" MEASURED, &st);
    if (rc == AP_SQL_OK) {
        ap_sql_bind_text(st, 1, name);
        rc = ap_sql_step(st);
        if (rc == AP_SQL_DONE) rc = AP_SQL_OK;
    }
    int64_t n = rc == AP_SQL_OK ? ap_sql_changes(db) : 0;
    ap_sql_finalize(st);
    if (rc != AP_SQL_OK) s = ap_db_fail(db, rc, doing, err);
    s = ap_db_wend(db, s, doing, err);
    if (s == AP_OK && deleted) *deleted = n;
    return s;
}
