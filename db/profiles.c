/*
 * profiles.c - operator profiles measured on GPUs (table profiles, db/schema.sql): insert
 * validated rows (a row equal to a stored one in its identifying columns is skipped), list
 * them, and fingerprint one GPU's rows for the plan-cache key.
 *
 * A stored row is the kernel-profile row of profile.h; its vocabulary lives there.
 */
#include "db_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROFILE_TEXT(X) X(gpu, 1) X(device_name, 0) X(pci_id, 0) X(driver_version, 0) \
    X(cuda_version, 0) X(cublas_version, 0) X(nccl_version, 0) X(mig_mode, 0) X(op, 1) \
    X(shape, 1) X(dtype, 1) X(source_run, 0)
#define PROFILE_REAL(X) X(mem_bytes) X(sm_clock_mhz) X(mem_clock_mhz) X(power_limit_w) \
    X(time_s) X(flops_per_s) X(bytes_per_s) X(bytes) X(spread)

static ap_status profile_check(const ap_db_profile *r, size_t i, ap_err *err) {
#define CHECK_TEXT(f, required)                                                               \
    if (!ap_db_str_ok(r->f, sizeof r->f))                                                     \
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s: longer than %zu bytes", i, #f, \
                          sizeof r->f - 1);                                                   \
    if ((required) && !r->f[0])                                                               \
        return ap_err_set(err, AP_ERR_INPUT, "profiles[%zu].%s: must not be empty", i, #f);
    PROFILE_TEXT(CHECK_TEXT)
#undef CHECK_TEXT
#define CHECK_REAL(f)                                                                         \
    if (!ap_db_num_ok(r->f))                                                                  \
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
    ap_status s = ap_db_wbegin(db, doing, err);
    if (s != AP_OK) return s;
    ap_sql_stmt *st = NULL;
    int rc = ap_sql_prepare(db, "INSERT OR IGNORE INTO profiles (" PROFILE_COLS ") VALUES"
                                " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
                                " ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)", &st);
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
        ap_sql_bind_text(st, 23, r->source_run);
        ap_sql_bind_int(st, 24, r->created_at > 0 ? r->created_at : now);
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
    ap_sql_col_copy(st, 23, r->source_run, sizeof r->source_run);
    r->created_at = ap_sql_col_int(st, 24);
}

/* The columns of the UNIQUE constraint, in its order: SQLite walks that index instead of
 * sorting (the fingerprint of 2000 rows: 5 ms sorted, a fraction of that walked). */
#define PROFILE_ORDER " ORDER BY gpu, device_name, pci_id, driver_version, cuda_version," \
    " cublas_version, nccl_version, mig_mode, op, shape, dtype, source_run"

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
            ap_db_profile *nr = realloc(*rows, cap * sizeof **rows);
            if (!nr) { s = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", db->path); break; }
            *rows = nr;
        }
        profile_from_row(st, &(*rows)[(*n)++]);
        rc = AP_SQL_OK;
    }
    if (s == AP_OK && rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "listing profiles", err);
    ap_sql_finalize(st);
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
        for (int c = 0; c < ncol; c++) {
            if (ap_sql_col_is_text(st, c)) {
                size_t len = 0;
                const void *text = ap_sql_col_text(st, c, &len);
                h = ap_hash64(text, len, h);
            } else {
                /* The IEEE-754 bits, little-endian, so every machine hashes the same bytes
                 * (formatting with %.17g cost 10x more and made this the slowest step of a
                 * cache hit). */
                double v = ap_sql_col_real(st, c) + 0.0; /* -0.0 -> 0.0 */
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
        rc = AP_SQL_OK;
    }
    ap_status s = AP_OK;
    if (rc != AP_SQL_DONE) s = ap_db_fail(db, rc, "fingerprinting profiles", err);
    ap_sql_finalize(st);
    if (s == AP_OK) *fp = ap_db_mix64(h ^ rows);
    return s;
}
