/*
 * export.c - the database as JSON or CSV, and importing that JSON (see db.h, docs/db.md).
 *
 * Built only on the public db.h API and json.h: no SQL here. Import is two passes: first the
 * whole file is parsed and validated into memory (any problem: AP_ERR_INPUT naming the file, the
 * row and the field, nothing written), then every row is written inside one ap_db_begin /
 * ap_db_commit, so a failure halfway (full disk, a kill) leaves none of them.
 *
 * Format (version 1): {"format": "autoplan-db-export", "format_version": 1, "autoplan_version",
 * "schema_version", "exported_at", "plans": [...], "profiles": [...], "runs": [...]}; the rows'
 * fields are the table columns (docs/db.md lists them), a run carries its "per_rank" rows.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autoplan/db.h"
#include "autoplan/hw.h"
#include "autoplan/strbuf.h"
#include "autoplan/json.h"
#include "db_int.h"
#include "autoplan/text.h"

#define EXPORT_FORMAT "autoplan-db-export"
#define EXPORT_VERSION 1
/* Timestamps and counts fit comfortably below 2^53 (exact in a JSON double). */
#define BIG_INT 9007199254740991LL
#define BIG_REAL 1e300

/* A user string fit for a one-line message (ap_text_line). Returns buf. */
const char *ap_db_json_shown(const char *s, char *buf, size_t n) {
    return ap_text_line(buf, n, s, 0); /* the one sanitiser (text.h) */
}

/* ---- export ----------------------------------------------------------------------------------- */

static ap_status add_num(ap_json *o, const char *k, double v, ap_status st) {
    return st == AP_OK ? ap_json_add_number(o, k, v) : st;
}

static ap_status add_str(ap_json *o, const char *k, const char *v, ap_status st) {
    return st == AP_OK ? ap_json_add_string(o, k, v) : st;
}

static ap_status export_plans(ap_db *db, ap_json *arr, ap_err *err) {
    ap_db_plan_info *rows = NULL;
    size_t n = 0;
    ap_status st = ap_db_plans_list(db, &rows, &n, err);
    for (size_t i = 0; st == AP_OK && i < n; i++) {
        char *json = NULL;
        st = ap_db_plan_json(db, rows[i].id, &json, err);
        if (st != AP_OK) break;
        ap_json *o = ap_json_new_object();
        if (!o) st = AP_ERR_NOMEM;
        st = add_str(o, "key", rows[i].key, st);
        st = add_str(o, "summary", rows[i].summary, st);
        st = add_num(o, "search_s", rows[i].search_s, st);
        st = add_num(o, "created_at", (double)rows[i].created_at, st);
        st = add_num(o, "used_at", (double)rows[i].used_at, st);
        st = add_str(o, "result_json", json ? json : "", st);
        ap_free(json);
        if (st == AP_OK) st = ap_json_push(arr, o);
        else ap_json_free(o);
    }
    ap_free(rows);
    if (st == AP_ERR_NOMEM) ap_err_set(err, st, "%s: out of memory", ap_db_path(db));
    return st;
}

static ap_json *profile_json(const ap_db_profile *r) {
    ap_json *o = ap_json_new_object();
    ap_status st = o ? AP_OK : AP_ERR_NOMEM;
    st = add_str(o, "gpu", r->gpu, st);
    st = add_str(o, "device_name", r->device_name, st);
    st = add_str(o, "pci_id", r->pci_id, st);
    st = add_num(o, "sm_count", (double)r->sm_count, st);
    st = add_num(o, "mem_bytes", r->mem_bytes, st);
    st = add_num(o, "sm_clock_mhz", r->sm_clock_mhz, st);
    st = add_num(o, "mem_clock_mhz", r->mem_clock_mhz, st);
    st = add_num(o, "power_limit_w", r->power_limit_w, st);
    st = add_str(o, "driver_version", r->driver_version, st);
    st = add_str(o, "cuda_version", r->cuda_version, st);
    st = add_str(o, "cublas_version", r->cublas_version, st);
    st = add_str(o, "nccl_version", r->nccl_version, st);
    st = add_str(o, "mig_mode", r->mig_mode, st);
    st = add_str(o, "op", r->op, st);
    st = add_str(o, "shape", r->shape, st);
    st = add_str(o, "dtype", r->dtype, st);
    st = add_num(o, "time_s", r->time_s, st);
    st = add_num(o, "flops_per_s", r->flops_per_s, st);
    st = add_num(o, "bytes_per_s", r->bytes_per_s, st);
    st = add_num(o, "bytes", r->bytes, st);
    st = add_num(o, "samples", (double)r->samples, st);
    st = add_num(o, "spread", r->spread, st);
    st = add_str(o, "host", r->host, st);
    st = add_str(o, "source", r->source, st);
    st = add_str(o, "source_run", r->source_run, st);
    st = add_num(o, "created_at", (double)r->created_at, st);
    if (st != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

static ap_json *rank_json(const ap_db_run_rank *k) {
    ap_json *o = ap_json_new_object();
    ap_status st = o ? AP_OK : AP_ERR_NOMEM;
    st = add_num(o, "rank", (double)k->rank, st);
    st = add_num(o, "predicted_step_s", k->predicted_step_s, st);
    st = add_num(o, "measured_step_s", k->measured_step_s, st);
    st = add_num(o, "predicted_peak_bytes", k->predicted_peak_bytes, st);
    st = add_num(o, "measured_peak_bytes", k->measured_peak_bytes, st);
    if (st != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

static ap_status export_runs(ap_db *db, ap_json *arr, ap_err *err) {
    ap_db_run *rows = NULL;
    size_t n = 0;
    ap_status st = ap_db_runs_list(db, &rows, &n, err);
    for (size_t i = 0; st == AP_OK && i < n; i++) {
        const ap_db_run *r = &rows[i];
        ap_db_run_rank *ranks = NULL;
        size_t nr = 0;
        st = ap_db_run_ranks(db, r->id, &ranks, &nr, err);
        if (st != AP_OK) break;
        ap_json *o = ap_json_new_object(), *pr = ap_json_new_array();
        if (!o || !pr) st = AP_ERR_NOMEM;
        st = add_str(o, "plan_key", r->plan_key, st);
        st = add_str(o, "host", r->host, st);
        st = add_str(o, "backend", r->backend, st);
        st = add_num(o, "started_at", (double)r->started_at, st);
        st = add_num(o, "ranks", (double)r->ranks, st);
        st = add_num(o, "predicted_step_s", r->predicted_step_s, st);
        st = add_num(o, "measured_step_s", r->measured_step_s, st);
        st = add_num(o, "predicted_peak_bytes", r->predicted_peak_bytes, st);
        st = add_num(o, "measured_peak_bytes", r->measured_peak_bytes, st);
        st = add_str(o, "plan_json", r->plan_json, st);
        for (size_t k = 0; st == AP_OK && k < nr; k++) {
            ap_json *kj = rank_json(&ranks[k]);
            st = kj ? ap_json_push(pr, kj) : AP_ERR_NOMEM;
        }
        ap_free(ranks);
        if (st == AP_OK) {
            st = ap_json_add(o, "per_rank", pr);
            pr = NULL;
        }
        if (st == AP_OK) st = ap_json_push(arr, o);
        else ap_json_free(o);
        ap_json_free(pr);
    }
    ap_db_runs_free(rows, n);
    if (st == AP_ERR_NOMEM) ap_err_set(err, st, "%s: out of memory", ap_db_path(db));
    return st;
}

ap_status ap_db_export_json(ap_db *db, char **out, ap_err *err) {
    *out = NULL;
    ap_json *root = ap_json_new_object();
    ap_json *plans = ap_json_new_array(), *profiles = ap_json_new_array(),
            *runs = ap_json_new_array();
    ap_status st = root && plans && profiles && runs ? AP_OK : AP_ERR_NOMEM;
    st = add_str(root, "format", EXPORT_FORMAT, st);
    st = add_num(root, "format_version", EXPORT_VERSION, st);
    st = add_str(root, "autoplan_version", AP_VERSION, st);
    st = add_num(root, "schema_version", ap_db_schema_version(db), st);
    st = add_num(root, "exported_at", (double)time(NULL), st);
    if (st == AP_OK) st = export_plans(db, plans, err);
    if (st == AP_OK) {
        ap_db_profile *rows = NULL;
        size_t n = 0;
        st = ap_db_profiles_list(db, NULL, &rows, &n, err);
        for (size_t i = 0; st == AP_OK && i < n; i++) {
            ap_json *o = profile_json(&rows[i]);
            st = o ? ap_json_push(profiles, o) : AP_ERR_NOMEM;
        }
        ap_free(rows);
    }
    if (st == AP_OK) st = export_runs(db, runs, err);
    if (st == AP_OK) {
        st = ap_json_add(root, "plans", plans);
        plans = NULL;
    }
    if (st == AP_OK) {
        st = ap_json_add(root, "profiles", profiles);
        profiles = NULL;
    }
    if (st == AP_OK) {
        st = ap_json_add(root, "runs", runs);
        runs = NULL;
    }
    if (st == AP_OK) {
        *out = ap_json_print(root, 1);
        if (!*out) st = AP_ERR_NOMEM;
    }
    if (st == AP_ERR_NOMEM) ap_err_set(err, st, "%s: out of memory", ap_db_path(db));
    ap_json_free(plans);
    ap_json_free(profiles);
    ap_json_free(runs);
    ap_json_free(root);
    return st;
}

/* ---- CSV (RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled) ------ */

/* the shared text buffer (strbuf.h) */
typedef ap_strbuf sbuf;
#define sb_put ap_strbuf_put
#define sb_printf ap_strbuf_printf

static void csv_str(sbuf *b, const char *s, int last) {
    if (strpbrk(s, ",\"\r\n")) {
        sb_put(b, "\"", 1);
        for (const char *p = s; *p; p++) {
            if (*p == '"') sb_put(b, "\"\"", 2);
            else sb_put(b, p, 1);
        }
        sb_put(b, "\"", 1);
    } else {
        sb_put(b, s, strlen(s));
    }
    sb_put(b, last ? "\n" : ",", 1);
}

static void csv_num(sbuf *b, double v, int last) {
    sb_printf(b, "%.17g%s", v, last ? "\n" : ",");
}

static void csv_int(sbuf *b, int64_t v, int last) {
    sb_printf(b, "%lld%s", (long long)v, last ? "\n" : ",");
}

ap_status ap_db_export_csv(ap_db *db, const char *table, char **out, ap_err *err) {
    *out = NULL;
    sbuf b = {0};
    ap_status st;
    if (!strcmp(table, "plans")) {
        ap_db_plan_info *r = NULL;
        size_t n = 0;
        st = ap_db_plans_list(db, &r, &n, err);
        sb_printf(&b, "id,key,summary,search_s,created_at,used_at,json_bytes\n");
        for (size_t i = 0; st == AP_OK && i < n; i++) {
            csv_int(&b, r[i].id, 0);
            csv_str(&b, r[i].key, 0);
            csv_str(&b, r[i].summary, 0);
            csv_num(&b, r[i].search_s, 0);
            csv_int(&b, r[i].created_at, 0);
            csv_int(&b, r[i].used_at, 0);
            csv_int(&b, r[i].json_bytes, 1);
        }
        ap_free(r);
    } else if (!strcmp(table, "profiles")) {
        ap_db_profile *r = NULL;
        size_t n = 0;
        st = ap_db_profiles_list(db, NULL, &r, &n, err);
        sb_printf(&b, "id,gpu,device_name,pci_id,sm_count,mem_bytes,sm_clock_mhz,"
                      "mem_clock_mhz,power_limit_w,");
        sb_printf(&b, "driver_version,cuda_version,cublas_version,nccl_version,mig_mode,op,");
        sb_printf(&b, "shape,dtype,time_s,flops_per_s,bytes_per_s,bytes,samples,spread,");
        sb_printf(&b, "host,source,source_run,created_at\n");
        for (size_t i = 0; st == AP_OK && i < n; i++) {
            const ap_db_profile *p = &r[i];
            csv_int(&b, p->id, 0);
            csv_str(&b, p->gpu, 0);
            csv_str(&b, p->device_name, 0);
            csv_str(&b, p->pci_id, 0);
            csv_int(&b, p->sm_count, 0);
            csv_num(&b, p->mem_bytes, 0);
            csv_num(&b, p->sm_clock_mhz, 0);
            csv_num(&b, p->mem_clock_mhz, 0);
            csv_num(&b, p->power_limit_w, 0);
            csv_str(&b, p->driver_version, 0);
            csv_str(&b, p->cuda_version, 0);
            csv_str(&b, p->cublas_version, 0);
            csv_str(&b, p->nccl_version, 0);
            csv_str(&b, p->mig_mode, 0);
            csv_str(&b, p->op, 0);
            csv_str(&b, p->shape, 0);
            csv_str(&b, p->dtype, 0);
            csv_num(&b, p->time_s, 0);
            csv_num(&b, p->flops_per_s, 0);
            csv_num(&b, p->bytes_per_s, 0);
            csv_num(&b, p->bytes, 0);
            csv_int(&b, p->samples, 0);
            csv_num(&b, p->spread, 0);
            csv_str(&b, p->host, 0);
            csv_str(&b, p->source, 0);
            csv_str(&b, p->source_run, 0);
            csv_int(&b, p->created_at, 1);
        }
        ap_free(r);
    } else if (!strcmp(table, "runs")) {
        ap_db_run *r = NULL;
        size_t n = 0;
        st = ap_db_runs_list(db, &r, &n, err);
        sb_printf(&b, "id,plan_key,host,backend,started_at,ranks,predicted_step_s,");
        sb_printf(&b, "measured_step_s,predicted_peak_bytes,measured_peak_bytes\n");
        for (size_t i = 0; st == AP_OK && i < n; i++) {
            csv_int(&b, r[i].id, 0);
            csv_str(&b, r[i].plan_key, 0);
            csv_str(&b, r[i].host, 0);
            csv_str(&b, r[i].backend, 0);
            csv_int(&b, r[i].started_at, 0);
            csv_int(&b, r[i].ranks, 0);
            csv_num(&b, r[i].predicted_step_s, 0);
            csv_num(&b, r[i].measured_step_s, 0);
            csv_num(&b, r[i].predicted_peak_bytes, 0);
            csv_num(&b, r[i].measured_peak_bytes, 1);
        }
        ap_db_runs_free(r, n);
    } else {
    {
        char b[64];
        return ap_err_set(err, AP_ERR_INPUT, "--table: unknown table '%s' (plans, profiles, runs)",
                          ap_db_json_shown(table, b, sizeof b));
    }
    }
    if (st == AP_OK && b.failed) st = ap_err_set(err, AP_ERR_NOMEM, "CSV export: out of memory");
    if (st != AP_OK) {
        ap_free(b.buf);
        return st;
    }
    *out = b.buf;
    return AP_OK;
}

/* ---- import ----------------------------------------------------------------------------------- */

typedef struct {
    ap_db_plan_info info;
    const char *json;       /* borrowed from the parsed tree */
} plan_row;

typedef struct {
    ap_db_run run;          /* plan_json borrowed from the parsed tree */
    ap_db_run_rank *ranks;
    size_t nranks;
} run_row;

typedef struct {
    plan_row *plans;
    size_t nplans;
    ap_db_profile *profiles;
    size_t nprofiles;
    run_row *runs;
    size_t nruns;
} import_set;

static void import_free(import_set *s) {
    ap_free(s->plans);
    ap_free(s->profiles);
    for (size_t i = 0; i < s->nruns; i++) ap_free(s->runs[i].ranks);
    ap_free(s->runs);
}

/* Refuse members not in `known` (a typo would otherwise be silently dropped). */
ap_status ap_db_json_only_known(const ap_json *o, const char *const *known, const char *where,
                                ap_err *err) {
    for (ap_json *m = ap_json_first(o); m; m = ap_json_next(m)) {
        const char *k = ap_json_key(m);
        int ok = 0;
        for (const char *const *p = known; *p && !ok; p++) ok = !strcmp(*p, k);
        char b[64];
        if (!ok)
            return ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%s'", where,
                              ap_db_json_shown(k, b, sizeof b));
    }
    return AP_OK;
}

/* A required string of any length, borrowed from the tree. */
static ap_status get_long_str(const ap_json *o, const char *key, const char **out,
                              const char *where, ap_err *err) {
    ap_json *v = ap_json_get(o, key);
    if (!v || ap_json_is_null(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where, key);
    if (!ap_json_is_string(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be a string, got %s", where,
                          key, ap_json_type_name(v));
    *out = ap_json_string(v);
    return AP_OK;
}

/* The array member `key` of root: NULL when absent; error when not an array of objects. */
static ap_status get_rows(const ap_json *root, const char *key, const char *file, ap_json **arr,
                          ap_err *err) {
    *arr = ap_json_get(root, key);
    if (!*arr || ap_json_is_null(*arr)) {
        *arr = NULL;
        return AP_OK;
    }
    if (!ap_json_is_array(*arr))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an array, got %s", file, key,
                          ap_json_type_name(*arr));
    for (int i = 0; i < ap_json_size(*arr); i++)
        if (!ap_json_is_object(ap_json_at(*arr, i)))
            return ap_err_set(err, AP_ERR_INPUT, "%s: %s[%d] must be an object, got %s", file,
                              key, i, ap_json_type_name(ap_json_at(*arr, i)));
    return AP_OK;
}

/* A member holding JSON text (a plan's result_json, a run's plan_json) is stored as is and
 * parsed only when it is used, by the same reader (ap_json_decode): refuse here what that use
 * would refuse, rather than store a row that can only warn later. The full check of a cached
 * result (ap_result_check) needs the model, cluster and search options the result answers,
 * which an export does not carry; the cache still runs it on every hit. */
static ap_status json_text_ok(const char *text, const char *key, const char *w, ap_err *err) {
    char where[340];
    snprintf(where, sizeof where, "%s: field '%s'", w, key);
    ap_json *j = NULL;
    ap_status st = ap_json_decode(text, strlen(text), where, &j, err);
    if (st == AP_OK && !ap_json_is_object(j))
        st = ap_err_set(err, AP_ERR_INPUT, "%s must hold a JSON object, got %s", where,
                        ap_json_type_name(j));
    ap_json_free(j);
    return st;
}

/* 32 lower-case hex digits, as ap_db_plan_key writes them. */
static int is_key(const char *k) {
    size_t n = strlen(k);
    int hex = n == AP_DB_KEY_HEX;
    for (size_t i = 0; hex && i < n; i++)
        hex = (k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f');
    return hex;
}

static ap_status read_plan(const ap_json *o, const char *w, plan_row *p, ap_err *err) {
    static const char *const known[] = {"key", "summary", "search_s", "created_at", "used_at",
                                        "result_json", NULL};
    ap_status st = ap_db_json_only_known(o, known, w, err);
    memset(p, 0, sizeof *p);
    if (st == AP_OK) st = ap_json_get_str(o, "key", p->info.key, sizeof p->info.key, NULL, w, err);
    if (st == AP_OK) {
        if (!is_key(p->info.key))
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'key' must be %d lower-case hex digits",
                            w, AP_DB_KEY_HEX);
    }
    if (st == AP_OK)
        st = ap_json_get_str(o, "summary", p->info.summary, sizeof p->info.summary, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "search_s", 0, BIG_REAL, &p->info.search_s, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_int(o, "created_at", 0, BIG_INT, &p->info.created_at, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_int(o, "used_at", 0, BIG_INT, &p->info.used_at, NULL, w, err);
    if (st == AP_OK) st = get_long_str(o, "result_json", &p->json, w, err);
    if (st == AP_OK) st = json_text_ok(p->json, "result_json", w, err);
    return st;
}

static ap_status read_profile(const ap_json *o, const char *w, ap_db_profile *r, ap_err *err) {
    static const char *const known[] = {
        "gpu", "device_name", "pci_id", "sm_count", "mem_bytes", "sm_clock_mhz",
        "mem_clock_mhz", "power_limit_w", "driver_version", "cuda_version", "cublas_version",
        "nccl_version", "mig_mode", "op", "shape", "dtype", "time_s", "flops_per_s",
        "bytes_per_s", "bytes", "samples", "spread", "host", "source", "source_run", "created_at",
        NULL};
    memset(r, 0, sizeof *r);
    ap_status st = ap_db_json_only_known(o, known, w, err);
    int pr; /* optional fields keep their zero/empty default when absent */
#define STR(f, req)                                                                           \
    if (st == AP_OK) st = ap_json_get_str(o, #f, r->f, sizeof r->f, (req) ? NULL : &pr, w, err);
#define REAL(f, req, lo)                                                                      \
    if (st == AP_OK) st = ap_json_get_real(o, #f, lo, BIG_REAL, &r->f, (req) ? NULL : &pr, w, err);
    STR(gpu, 1) STR(device_name, 0) STR(pci_id, 0)
    if (st == AP_OK) st = ap_json_get_int(o, "sm_count", 0, 1 << 20, &r->sm_count, &pr, w, err);
    REAL(mem_bytes, 0, 0) REAL(sm_clock_mhz, 0, 0) REAL(mem_clock_mhz, 0, 0)
    REAL(power_limit_w, 0, 0)
    STR(driver_version, 0) STR(cuda_version, 0) STR(cublas_version, 0) STR(nccl_version, 0)
    STR(mig_mode, 0) STR(op, 1) STR(shape, 1) STR(dtype, 1)
    REAL(time_s, 1, 0) REAL(flops_per_s, 0, 0) REAL(bytes_per_s, 0, 0) REAL(bytes, 0, 0)
    if (st == AP_OK) st = ap_json_get_int(o, "samples", 1, BIG_INT, &r->samples, NULL, w, err);
    REAL(spread, 0, 0) STR(host, 0) STR(source, 0) STR(source_run, 0)
    if (st == AP_OK) st = ap_json_get_int(o, "created_at", 0, BIG_INT, &r->created_at, &pr, w, err);
#undef STR
#undef REAL
    if (st == AP_OK && !r->gpu[0])
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu' must not be empty", w);
    if (st == AP_OK && (!r->op[0] || !r->shape[0] || !r->dtype[0]))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: fields 'op', 'shape' and 'dtype' must not be "
                        "empty", w);
    ap_err e;
    if (st == AP_OK) st = ap_db_json_row_text_ok(r, w, err);
    /* As `profile import`: a row of a GPU the catalog lacks would never calibrate a plan, and
     * it is stored under the catalog's own name so the GPU's fingerprint and lookups find it. */
    const ap_gpu *g = NULL;
    char what[340];
    snprintf(what, sizeof what, "%s: field 'gpu'", w);
    if (st == AP_OK) st = ap_gpu_lookup(r->gpu, what, &g, err);
    if (st == AP_OK) snprintf(r->gpu, sizeof r->gpu, "%s", g->name);
    if (st == AP_OK && ap_profile_row_check(r, &e) != AP_OK) /* the kernel-profile vocabulary */
        st = ap_err_set(err, AP_ERR_INPUT, "%s: %s", w, e.msg);
    return st;
}

static ap_status read_run(const ap_json *o, const char *w, run_row *rr, ap_err *err) {
    static const char *const known[] = {
        "plan_key", "host", "backend", "started_at", "ranks", "predicted_step_s",
        "measured_step_s", "predicted_peak_bytes", "measured_peak_bytes", "plan_json",
        "per_rank", NULL};
    static const char *const known_rank[] = {"rank", "predicted_step_s", "measured_step_s",
                                             "predicted_peak_bytes", "measured_peak_bytes", NULL};
    memset(rr, 0, sizeof *rr);
    ap_db_run *r = &rr->run;
    int pr;
    ap_status st = ap_db_json_only_known(o, known, w, err);
    if (st == AP_OK)
        st = ap_json_get_str(o, "plan_key", r->plan_key, sizeof r->plan_key, &pr, w, err);
    if (st == AP_OK && r->plan_key[0] && !is_key(r->plan_key))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'plan_key' must be empty or %d lower-case "
                        "hex digits", w, AP_DB_KEY_HEX);
    if (st == AP_OK) st = ap_json_get_str(o, "host", r->host, sizeof r->host, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_str(o, "backend", r->backend, sizeof r->backend, NULL, w, err);
    if (st == AP_OK && (!r->host[0] || !r->backend[0]))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: fields 'host' and 'backend' must not be empty", w);
    if (st == AP_OK) st = ap_db_json_text_ok(r->host, "host", w, err);
    if (st == AP_OK) st = ap_db_json_text_ok(r->backend, "backend", w, err);
    if (st == AP_OK) st = ap_json_get_int(o, "started_at", 1, BIG_INT, &r->started_at, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_int(o, "ranks", 1, AP_DB_MAX_RANKS, &r->ranks, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "predicted_step_s", 0, BIG_REAL, &r->predicted_step_s, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "measured_step_s", 0, BIG_REAL, &r->measured_step_s, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "predicted_peak_bytes", 0, BIG_REAL, &r->predicted_peak_bytes,
                              NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "measured_peak_bytes", 0, BIG_REAL, &r->measured_peak_bytes,
                              NULL, w, err);
    const char *pj = NULL;
    if (st == AP_OK) st = get_long_str(o, "plan_json", &pj, w, err);
    if (st == AP_OK) st = json_text_ok(pj, "plan_json", w, err);
    r->plan_json = (char *)pj; /* borrowed; never freed through this struct */
    ap_json *arr = ap_json_get(o, "per_rank");
    if (st == AP_OK && arr && !ap_json_is_array(arr))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'per_rank' must be an array, got %s", w,
                        ap_json_type_name(arr));
    int n = st == AP_OK && arr ? ap_json_size(arr) : 0;
    /* A run's rank rows are all of its ranks (`autoplan run` stores one per rank) or none (a run
     * recorded without them exports "per_rank": []); a part would make every max-over-ranks
     * figure and `db show` silently wrong. Too many is refused before the rows are read, too
     * few after them, so a bad row is named first. */
    char many[64];
    snprintf(many, sizeof many, "ranks is %lld but per_rank has %d entries", (long long)r->ranks,
             n);
    if (st == AP_OK && n > r->ranks)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'per_rank': %s", w, many);
    unsigned char *seen = NULL; /* one flag per rank: duplicates in O(n), ranks up to 2^20 */
    if (st == AP_OK && n > 0) {
        rr->ranks = ap_calloc((size_t)n, sizeof *rr->ranks);
        seen = ap_calloc((size_t)r->ranks, 1);
        if (!rr->ranks || !seen) st = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", w);
    }
    for (int i = 0; st == AP_OK && i < n; i++) {
        char wk[340];
        snprintf(wk, sizeof wk, "%s.per_rank[%d]", w, i);
        const ap_json *k = ap_json_at(arr, i);
        ap_db_run_rank *rk = &rr->ranks[i];
        if (!ap_json_is_object(k)) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: must be an object, got %s", wk,
                            ap_json_type_name(k));
            break;
        }
        st = ap_db_json_only_known(k, known_rank, wk, err);
        if (st == AP_OK) st = ap_json_get_int(k, "rank", 0, r->ranks - 1, &rk->rank, NULL, wk, err);
        if (st == AP_OK && seen[rk->rank]++)
            st = ap_err_set(err, AP_ERR_INPUT, "%s: rank %lld appears twice", wk,
                            (long long)rk->rank);
        if (st == AP_OK)
            st = ap_json_get_real(k, "predicted_step_s", 0, BIG_REAL, &rk->predicted_step_s, NULL,
                                  wk, err);
        if (st == AP_OK)
            st = ap_json_get_real(k, "measured_step_s", 0, BIG_REAL, &rk->measured_step_s, NULL,
                                  wk, err);
        if (st == AP_OK)
            st = ap_json_get_real(k, "predicted_peak_bytes", 0, BIG_REAL,
                                  &rk->predicted_peak_bytes, NULL, wk, err);
        if (st == AP_OK)
            st = ap_json_get_real(k, "measured_peak_bytes", 0, BIG_REAL,
                                  &rk->measured_peak_bytes, NULL, wk, err);
        rr->nranks = (size_t)i + 1;
    }
    ap_free(seen);
    if (st == AP_OK && n > 0 && n != r->ranks)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'per_rank': %s", w, many);
    return st;
}

static ap_status validate(const ap_json *root, const char *where, import_set *s, ap_err *err) {
    static const char *const known[] = {"format", "format_version", "autoplan_version",
                                        "schema_version", "exported_at", "plans", "profiles",
                                        "runs", NULL};
    if (!ap_json_is_object(root))
        return ap_err_set(err, AP_ERR_INPUT, "%s: must be a JSON object (as `autoplan db export "
                          "--json` writes), got %s", where, ap_json_type_name(root));
    char format[64];
    ap_status st = ap_json_get_str(root, "format", format, sizeof format, NULL, where, err);
    char b[64];
    if (st == AP_OK && strcmp(format, EXPORT_FORMAT) != 0)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'format' must be \"%s\", got \"%s\"", where,
                        EXPORT_FORMAT, ap_db_json_shown(format, b, sizeof b));
    int64_t fv = 0;
    if (st == AP_OK)
        st = ap_json_get_int(root, "format_version", 1, BIG_INT, &fv, NULL, where, err);
    if (st == AP_OK && fv > EXPORT_VERSION)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'format_version' = %lld is newer than this "
                        "autoplan reads (%d)", where, (long long)fv, EXPORT_VERSION);
    if (st == AP_OK) st = ap_db_json_only_known(root, known, where, err);
    ap_json *plans = NULL, *profiles = NULL, *runs = NULL;
    if (st == AP_OK) st = get_rows(root, "plans", where, &plans, err);
    if (st == AP_OK) st = get_rows(root, "profiles", where, &profiles, err);
    if (st == AP_OK) st = get_rows(root, "runs", where, &runs, err);
    if (st != AP_OK) return st;
    size_t np = (size_t)ap_json_size(plans), nf = (size_t)ap_json_size(profiles),
           nr = (size_t)ap_json_size(runs);
    s->plans = np ? ap_calloc(np, sizeof *s->plans) : NULL;
    s->profiles = nf ? ap_calloc(nf, sizeof *s->profiles) : NULL;
    s->runs = nr ? ap_calloc(nr, sizeof *s->runs) : NULL;
    if ((np && !s->plans) || (nf && !s->profiles) || (nr && !s->runs))
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", where);
    char w[300];
    for (size_t i = 0; st == AP_OK && i < np; i++) {
        snprintf(w, sizeof w, "%s: plans[%zu]", where, i);
        st = read_plan(ap_json_at(plans, (int)i), w, &s->plans[i], err);
        s->nplans = i + 1;
    }
    for (size_t i = 0; st == AP_OK && i < nf; i++) {
        snprintf(w, sizeof w, "%s: profiles[%zu]", where, i);
        st = read_profile(ap_json_at(profiles, (int)i), w, &s->profiles[i], err);
        s->nprofiles = i + 1;
    }
    for (size_t i = 0; st == AP_OK && i < nr; i++) {
        snprintf(w, sizeof w, "%s: runs[%zu]", where, i);
        s->nruns = i + 1;
        st = read_run(ap_json_at(runs, (int)i), w, &s->runs[i], err);
    }
    return st;
}

ap_status ap_db_import_json(ap_db *db, const char *text, size_t len, const char *where,
                            ap_db_import_counts *counts, ap_err *err) {
    ap_db_import_counts c;
    memset(&c, 0, sizeof c);
    if (counts) *counts = c;
    ap_json *root = NULL;
    ap_status st = ap_json_decode(text, len, where, &root, err);
    if (st != AP_OK) return st;
    import_set s;
    memset(&s, 0, sizeof s);
    st = validate(root, where, &s, err);
    int64_t runs_before = 0, runs_after = 0;
    /* db NULL: validate only, so a caller can refuse a bad file before it opens (and so
     * creates) the database; counts then hold the file's rows, none of them new. */
    if (st == AP_OK && !db) {
        c.plans = s.nplans;
        c.profiles = s.nprofiles;
        c.runs = s.nruns;
        if (counts) *counts = c;
        import_free(&s);
        ap_json_free(root);
        return AP_OK;
    }
    if (st == AP_OK) st = ap_db_begin(db, err);
    if (st == AP_OK) {
        /* counted inside the write lock, so other writers cannot skew runs_new */
        st = ap_db_count(db, "runs", &runs_before, err);
        for (size_t i = 0; st == AP_OK && i < s.nplans; i++) {
            int added = 0;
            st = ap_db_plan_import(db, &s.plans[i].info, s.plans[i].json, &added, err);
            c.plans_new += (size_t)added;
        }
        if (st == AP_OK && s.nprofiles)
            st = ap_db_profiles_insert(db, s.profiles, s.nprofiles, &c.profiles_new, err);
        for (size_t i = 0; st == AP_OK && i < s.nruns; i++)
            st = ap_db_run_insert(db, &s.runs[i].run, s.runs[i].ranks, s.runs[i].nranks, NULL,
                                  err);
        if (st == AP_OK) st = ap_db_count(db, "runs", &runs_after, err);
        if (st == AP_OK) st = ap_db_commit(db, err);
        else ap_db_rollback(db);
    }
    if (st == AP_OK) {
        c.plans = s.nplans;
        c.profiles = s.nprofiles;
        c.runs = s.nruns;
        c.runs_new = (size_t)(runs_after - runs_before);
        if (counts) *counts = c;
    }
    import_free(&s);
    ap_json_free(root);
    return st;
}
