/*
 * profile_json.c - one measured profile as a JSON file (include/autoplan/db.h, format in
 * docs/profiles.md): `autoplan profile export NAME --output FILE` on the machine with the GPU,
 * `autoplan profile import FILE` on the laptop that plans with it.
 *
 * A profile is one machine, so the device and software fields are written once ("device")
 * and each row carries only its operation and figures. Reading validates everything before
 * anything is stored: the format tag and version, the name (ap_db_profile_check_name), the GPU
 * (a catalog SKU), every device field (typed, bounded, known), every row through the format's
 * own check (ap_profile_row_check); unknown fields are refused, as in `db import`. Import is one
 * transaction: all rows or none.
 *
 * Built on db.h and json.h only: no SQL here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autoplan/db.h"
#include "autoplan/hw.h"
#include "autoplan/json.h"
#include "db_int.h"

#define FORMAT "autoplan-profile"
#define FORMAT_VERSION 1
#define BIG_REAL 1e300
#define BIG_INT ((int64_t)1 << 53)
#define MAX_ROWS 1000000

ap_status ap_db_profile_check_name(const char *name, const char *what, ap_err *err) {
    size_t l = strlen(name);
    char b[72];
    if (l == 0 || l > 63)
        return ap_err_set(err, AP_ERR_INPUT, "%s: a profile name has 1 to 63 characters, got %zu",
                          what, l);
    for (size_t i = 0; i < l; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return ap_err_set(err, AP_ERR_INPUT, "%s: '%s': a profile name may hold letters, "
                              "digits, '.', '_' and '-' only", what,
                              ap_db_json_shown(name, b, sizeof b));
    }
    if (!strcmp(name, "published") || !strcmp(name, "none"))
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is reserved (published: the built-in "
                          "tables; none: no profile)", what, name);
    return AP_OK;
}

ap_status ap_db_json_text_ok(const char *text, const char *field, const char *where,
                             ap_err *err) {
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' contains a control character",
                              where, field);
    return AP_OK;
}

ap_status ap_db_json_row_text_ok(const ap_profile_row *r, const char *where, ap_err *err) {
    const struct { const char *name, *text; } f[] = {
        {"op", r->op}, {"shape", r->shape}, {"dtype", r->dtype}, {"source", r->source},
        {"gpu", r->gpu}, {"host", r->host}, {"source_run", r->source_run}};
    ap_status st = AP_OK;
    for (size_t i = 0; st == AP_OK && i < sizeof f / sizeof f[0]; i++)
        st = ap_db_json_text_ok(f[i].text, f[i].name, where, err);
    return st;
}

/* ---- writing ---------------------------------------------------------------------------------------- */

/* Do two rows come from the same machine and software? */
static int same_machine(const ap_profile_row *a, const ap_profile_row *b) {
    return !strcmp(a->gpu, b->gpu) && !strcmp(a->device_name, b->device_name) &&
           !strcmp(a->pci_id, b->pci_id) && a->sm_count == b->sm_count &&
           a->mem_bytes == b->mem_bytes && a->sm_clock_mhz == b->sm_clock_mhz &&
           a->mem_clock_mhz == b->mem_clock_mhz && a->power_limit_w == b->power_limit_w &&
           !strcmp(a->driver_version, b->driver_version) &&
           !strcmp(a->cuda_version, b->cuda_version) &&
           !strcmp(a->cublas_version, b->cublas_version) &&
           !strcmp(a->nccl_version, b->nccl_version) && !strcmp(a->mig_mode, b->mig_mode) &&
           !strcmp(a->host, b->host);
}

static ap_json *device_json(const ap_profile_row *r) {
    ap_json *d = ap_json_new_object();
    ap_status st = d ? AP_OK : AP_ERR_NOMEM;
#define S(f) if (st == AP_OK) st = ap_json_add_string(d, #f, r->f);
#define N(f) if (st == AP_OK) st = ap_json_add_number(d, #f, (double)r->f);
    S(device_name) S(pci_id) N(sm_count) N(mem_bytes) N(sm_clock_mhz) N(mem_clock_mhz)
    N(power_limit_w) S(driver_version) S(cuda_version) S(cublas_version) S(nccl_version)
    S(mig_mode) S(host)
#undef S
#undef N
    if (st != AP_OK) {
        ap_json_free(d);
        return NULL;
    }
    return d;
}

static ap_json *row_json(const ap_profile_row *r) {
    ap_json *o = ap_json_new_object();
    ap_status st = o ? AP_OK : AP_ERR_NOMEM;
#define S(f) if (st == AP_OK) st = ap_json_add_string(o, #f, r->f);
#define N(f) if (st == AP_OK) st = ap_json_add_number(o, #f, (double)r->f);
    S(op) S(shape) S(dtype) N(time_s) N(flops_per_s) N(bytes_per_s) N(bytes) N(samples)
    N(spread) S(source) N(created_at)
#undef S
#undef N
    if (st != AP_OK) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

ap_status ap_db_profile_format_json(const ap_profile *p, char **out, ap_err *err) {
    *out = NULL;
    if (p->n == 0)
        return ap_err_set(err, AP_ERR_INPUT, "profile '%s' has no rows", p->name);
    for (size_t i = 1; i < p->n; i++)
        if (!same_machine(&p->rows[0], &p->rows[i]))
            return ap_err_set(err, AP_ERR_INPUT, "profile '%s' mixes machines (row %zu: %s %s on "
                              "'%s' vs %s %s on '%s')", p->name, i, p->rows[i].gpu,
                              p->rows[i].driver_version, p->rows[i].host, p->rows[0].gpu,
                              p->rows[0].driver_version, p->rows[0].host);
    ap_json *root = ap_json_new_object(), *rows = ap_json_new_array();
    ap_status st = root && rows ? AP_OK : AP_ERR_NOMEM;
    if (st == AP_OK) st = ap_json_add_string(root, "format", FORMAT);
    if (st == AP_OK) st = ap_json_add_number(root, "format_version", FORMAT_VERSION);
    if (st == AP_OK) st = ap_json_add_string(root, "autoplan_version", AP_VERSION);
    if (st == AP_OK) st = ap_json_add_string(root, "name", p->name);
    if (st == AP_OK) st = ap_json_add_string(root, "gpu", p->rows[0].gpu);
    if (st == AP_OK) {
        ap_json *d = device_json(&p->rows[0]);
        st = d ? ap_json_add(root, "device", d) : AP_ERR_NOMEM;
        if (st != AP_OK) ap_json_free(d);
    }
    for (size_t i = 0; st == AP_OK && i < p->n; i++) {
        ap_json *r = row_json(&p->rows[i]);
        st = r ? ap_json_push(rows, r) : AP_ERR_NOMEM;
        if (st != AP_OK) ap_json_free(r);
    }
    if (st == AP_OK) {
        st = ap_json_add(root, "rows", rows);
        if (st == AP_OK) rows = NULL;
    }
    if (st == AP_OK) *out = ap_json_print(root, 1);
    ap_json_free(rows);
    ap_json_free(root);
    if (st == AP_OK && !*out) st = AP_ERR_NOMEM;
    if (st != AP_OK) return ap_err_set(err, st, "out of memory writing profile '%s'", p->name);
    return AP_OK;
}

/* ---- reading ---------------------------------------------------------------------------------------- */

static ap_status read_device(const ap_json *d, const char *where, ap_profile_row *r, ap_err *err) {
    static const char *const known[] = {
        "device_name", "pci_id", "sm_count", "mem_bytes", "sm_clock_mhz", "mem_clock_mhz",
        "power_limit_w", "driver_version", "cuda_version", "cublas_version", "nccl_version",
        "mig_mode", "host", NULL};
    char w[96];
    snprintf(w, sizeof w, "%s: device", where);
    if (!d || ap_json_is_null(d)) return AP_OK; /* optional: a profile of host figures only */
    if (!ap_json_is_object(d))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'device' must be an object, got %s", where,
                          ap_json_type_name(d));
    ap_status st = ap_db_json_only_known(d, known, w, err);
    int pr;
#define S(f) if (st == AP_OK) st = ap_json_get_str(d, #f, r->f, sizeof r->f, &pr, w, err);
#define N(f) if (st == AP_OK) st = ap_json_get_real(d, #f, 0, BIG_REAL, &r->f, &pr, w, err);
    S(device_name) S(pci_id)
    if (st == AP_OK) st = ap_json_get_int(d, "sm_count", 0, 1 << 20, &r->sm_count, &pr, w, err);
    N(mem_bytes) N(sm_clock_mhz) N(mem_clock_mhz) N(power_limit_w)
    S(driver_version) S(cuda_version) S(cublas_version) S(nccl_version) S(mig_mode) S(host)
#undef S
#undef N
    /* the host is refused where it is written (ap_db_json_row_text_ok would name a row) */
    return st == AP_OK ? ap_db_json_text_ok(r->host, "host", w, err) : st;
}

static ap_status read_row(const ap_json *o, const char *w, ap_profile_row *r, ap_err *err) {
    static const char *const known[] = {"op", "shape", "dtype", "time_s", "flops_per_s",
                                        "bytes_per_s", "bytes", "samples", "spread", "source",
                                        "created_at", NULL};
    if (!ap_json_is_object(o))
        return ap_err_set(err, AP_ERR_INPUT, "%s must be an object, got %s", w,
                          ap_json_type_name(o));
    ap_status st = ap_db_json_only_known(o, known, w, err);
    int pr;
    if (st == AP_OK) st = ap_json_get_str(o, "op", r->op, sizeof r->op, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_str(o, "shape", r->shape, sizeof r->shape, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_str(o, "dtype", r->dtype, sizeof r->dtype, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_real(o, "time_s", 0, BIG_REAL, &r->time_s, NULL, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "flops_per_s", 0, BIG_REAL, &r->flops_per_s, &pr, w, err);
    if (st == AP_OK)
        st = ap_json_get_real(o, "bytes_per_s", 0, BIG_REAL, &r->bytes_per_s, &pr, w, err);
    if (st == AP_OK) st = ap_json_get_real(o, "bytes", 0, BIG_REAL, &r->bytes, &pr, w, err);
    if (st == AP_OK) st = ap_json_get_int(o, "samples", 1, BIG_INT, &r->samples, NULL, w, err);
    if (st == AP_OK) st = ap_json_get_real(o, "spread", 0, BIG_REAL, &r->spread, &pr, w, err);
    if (st == AP_OK) st = ap_json_get_str(o, "source", r->source, sizeof r->source, &pr, w, err);
    if (st == AP_OK)
        st = ap_json_get_int(o, "created_at", 0, BIG_INT, &r->created_at, &pr, w, err);
    ap_err e;
    if (st == AP_OK) st = ap_db_json_row_text_ok(r, w, err);
    if (st == AP_OK && ap_profile_row_check(r, &e) != AP_OK)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: %s", w, e.msg);
    return st;
}

ap_status ap_db_profile_parse_json(const char *text, size_t len, const char *where,
                                   const char *rename, ap_profile *out, ap_err *err) {
    static const char *const known[] = {"format", "format_version", "autoplan_version", "name",
                                        "gpu", "device", "rows", NULL};
    ap_profile_init(out);
    ap_json *root = ap_json_parse(text, len, where, err);
    if (!root) return AP_ERR_INPUT;
    ap_status st = AP_OK;
    char fmt[32] = "", name[64] = "", gpu[64] = "";
    int64_t version = 0;
    if (!ap_json_is_object(root))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: must be a JSON object (an autoplan profile "
                        "file), got %s", where, ap_json_type_name(root));
    if (st == AP_OK) st = ap_db_json_only_known(root, known, where, err);
    if (st == AP_OK) st = ap_json_get_str(root, "format", fmt, sizeof fmt, NULL, where, err);
    if (st == AP_OK && strcmp(fmt, FORMAT))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'format' must be \"" FORMAT "\" (a file "
                        "written by `autoplan profile export`)", where);
    if (st == AP_OK)
        st = ap_json_get_int(root, "format_version", 1, 1000000, &version, NULL, where, err);
    if (st == AP_OK && version > FORMAT_VERSION)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: format_version %lld is newer than this autoplan "
                        "reads (%d); upgrade autoplan", where, (long long)version, FORMAT_VERSION);
    if (st == AP_OK) st = ap_json_get_str(root, "name", name, sizeof name, NULL, where, err);
    if (st == AP_OK && rename) snprintf(name, sizeof name, "%s", rename);
    char what[160];
    snprintf(what, sizeof what, rename ? "--name" : "%s: field 'name'", where);
    if (st == AP_OK) st = ap_db_profile_check_name(name, what, err);
    if (st == AP_OK) st = ap_json_get_str(root, "gpu", gpu, sizeof gpu, NULL, where, err);
    for (const unsigned char *c = (const unsigned char *)gpu; st == AP_OK && *c; c++)
        if (*c < 0x20 || *c == 0x7f) /* the catalog's message quotes it: keep it one line */
            st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu' contains a control character", where);
    const ap_gpu *g = NULL;
    snprintf(what, sizeof what, "%s: field 'gpu'", where);
    if (st == AP_OK) st = ap_gpu_lookup(gpu, what, &g, err);
    ap_profile_row dev;
    memset(&dev, 0, sizeof dev);
    if (st == AP_OK) st = read_device(ap_json_get(root, "device"), where, &dev, err);
    ap_json *rows = ap_json_get(root, "rows");
    if (st == AP_OK && !ap_json_is_array(rows))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'rows' must be an array, got %s", where,
                        ap_json_type_name(rows));
    if (st == AP_OK && (ap_json_size(rows) < 1 || ap_json_size(rows) > MAX_ROWS))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field 'rows' must hold 1 to %d rows, got %d",
                        where, MAX_ROWS, ap_json_size(rows));
    if (st == AP_OK) {
        snprintf(out->name, sizeof out->name, "%s", name);
        snprintf(out->gpu, sizeof out->gpu, "%s", g->name);
        snprintf(dev.gpu, sizeof dev.gpu, "%s", g->name);
        snprintf(dev.source_run, sizeof dev.source_run, "%s", name);
    }
    int i = 0;
    for (ap_json *o = ap_json_first(rows); st == AP_OK && o; o = ap_json_next(o), i++) {
        char w[128];
        snprintf(w, sizeof w, "%s: rows[%d]", where, i);
        ap_profile_row r = dev;
        st = read_row(o, w, &r, err);
        ap_err e;
        if (st == AP_OK && (st = ap_profile_add(out, &r, &e)) != AP_OK)
            ap_err_set(err, st, "%s: %s", w, e.msg);
    }
    ap_json_free(root);
    if (st != AP_OK) ap_profile_free(out);
    return st;
}

/* ---- the store --------------------------------------------------------------------------------------- */

ap_status ap_db_profile_export_json(ap_db *db, const char *name, char **out, ap_err *err) {
    *out = NULL;
    ap_profile p;
    ap_status st = ap_db_profile_get(db, name, &p, err);
    if (st == AP_OK && p.n == 0)
        st = ap_err_set(err, AP_ERR_INPUT, "no profile named '%s' in %s (`autoplan profile list` "
                        "shows them)", name, ap_db_path(db));
    if (st == AP_OK) st = ap_db_profile_format_json(&p, out, err);
    ap_profile_free(&p);
    return st;
}

ap_status ap_db_profile_import_json(ap_db *db, const char *text, size_t len, const char *where,
                                    const char *rename, size_t *added, char *name_out,
                                    ap_err *err) {
    if (added) *added = 0;
    ap_profile p, old;
    ap_status st = ap_db_profile_parse_json(text, len, where, rename, &p, err);
    if (st != AP_OK) return st;
    /* a name already used for another machine is refused, not merged */
    st = ap_db_profile_get(db, p.name, &old, err);
    if (st == AP_OK && old.n > 0 && !same_machine(&old.rows[0], &p.rows[0]))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: a profile named '%s' is already stored for "
                        "another machine (%s on '%s', driver %s); import under another name with "
                        "--name NEW", where, p.name, old.rows[0].gpu, old.rows[0].host,
                        old.rows[0].driver_version);
    ap_profile_free(&old);
    if (st == AP_OK) st = ap_db_profiles_insert(db, p.rows, p.n, added, err);
    if (st == AP_OK && name_out) snprintf(name_out, 64, "%s", p.name);
    ap_profile_free(&p);
    return st;
}
