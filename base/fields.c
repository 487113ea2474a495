/*
 * fields.c - operations on a struct described by a field table (fields.h): numeric access,
 * parsing user text, JSON read/write by path, canonical text. Nothing here knows which struct
 * it works on; the tables live with their structs (costmodel/planfields.c, planner/request.c).
 */
#include "autoplan/fields.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "autoplan/text.h"

#define AT(obj, off, T) ((T *)(void *)((char *)(obj) + (off)))
#define CAT(obj, off, T) ((const T *)(const void *)((const char *)(obj) + (off)))

double ap_field_get(const ap_field *f, const void *obj) {
    switch (f->kind) {
    case AP_FT_INT:
    case AP_FT_BOOL:
    case AP_FT_ENUM: return *CAT(obj, f->offset, int);
    case AP_FT_I64: return (double)*CAT(obj, f->offset, int64_t);
    case AP_FT_REAL: return *CAT(obj, f->offset, double);
    case AP_FT_CHUNKS: return *CAT(obj, f->count_offset, int);
    }
    return 0;
}

void ap_field_put(const ap_field *f, void *obj, double v) {
    switch (f->kind) {
    case AP_FT_INT:
    case AP_FT_ENUM: *AT(obj, f->offset, int) = (int)v; break;
    case AP_FT_BOOL: *AT(obj, f->offset, int) = v != 0; break;
    case AP_FT_I64: *AT(obj, f->offset, int64_t) = (int64_t)v; break;
    case AP_FT_REAL: *AT(obj, f->offset, double) = v; break;
    case AP_FT_CHUNKS: *AT(obj, f->count_offset, int) = (int)v; break;
    }
}

int *ap_field_chunk(const ap_field *f, void *obj, int i) { return AT(obj, f->offset, int) + i; }

const ap_field *ap_field_find(const ap_field *t, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name) || (t[i].json && !strcmp(t[i].json, name)) ||
            (t[i].flag && !strcmp(t[i].flag, name)))
            return &t[i];
    return NULL;
}

/* "none, selective, full" */
static void enum_list(const ap_field *f, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
    for (int v = 0; v < f->nvalues && k < n; v++) {
        const char *nm = f->enum_name(v);
        if (nm) k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", nm);
    }
}

/* The value named s (names compare without case: "BF16" is bf16), -1 when none. */
static int enum_value(const ap_field *f, const char *s) {
    for (int v = 0; v < f->nvalues; v++) {
        const char *nm = f->enum_name(v);
        if (nm && !strcasecmp(nm, s)) return v;
    }
    return -1;
}

static ap_status parse_chunks(const ap_field *f, const char *text, const char *what, void *obj,
                              ap_err *err) {
    int n = 0;
    const char *q = text;
    char shown[64];
    while (*q) {
        char item[32];
        const char *comma = strchr(q, ',');
        size_t len = comma ? (size_t)(comma - q) : strlen(q);
        int64_t v;
        if (len == 0 || len >= sizeof item || (comma && comma[1] == '\0'))
            return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a comma-separated list of "
                              "integers", what, ap_text_line(shown, sizeof shown, text, 40));
        if (n >= f->nvalues)
            return ap_err_set(err, AP_ERR_INPUT, "%s: more than %d entries", what, f->nvalues);
        memcpy(item, q, len);
        item[len] = '\0';
        ap_status st = ap_parse_int(item, what, (int64_t)f->lo, (int64_t)f->hi, &v, err);
        if (st != AP_OK) return st;
        *ap_field_chunk(f, obj, n++) = (int)v;
        q += len + (comma ? 1 : 0);
    }
    if (n == 0) return ap_err_set(err, AP_ERR_INPUT, "%s: empty list", what);
    *AT(obj, f->count_offset, int) = n;
    return AP_OK;
}

ap_status ap_field_parse(const ap_field *f, const char *text, const char *what, void *obj,
                         ap_err *err) {
    char shown[64], list[160];
    ap_status st;
    int64_t i;
    double d;
    if (!text) text = "";
    switch (f->kind) {
    case AP_FT_INT:
    case AP_FT_I64:
        if ((st = ap_parse_int(text, what, (int64_t)f->lo, (int64_t)f->hi, &i, err)) != AP_OK)
            return st;
        ap_field_put(f, obj, (double)i);
        if (f->kind == AP_FT_I64) *AT(obj, f->offset, int64_t) = i; /* exact above 2^53 */
        return AP_OK;
    case AP_FT_REAL:
        if ((st = ap_parse_real(text, what, f->lo, f->hi, &d, err)) != AP_OK) return st;
        ap_field_put(f, obj, d);
        return AP_OK;
    case AP_FT_BOOL:
        if (!strcmp(text, "true") || !strcmp(text, "1")) ap_field_put(f, obj, 1);
        else if (!strcmp(text, "false") || !strcmp(text, "0")) ap_field_put(f, obj, 0);
        else
            return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not true or false", what,
                              ap_text_line(shown, sizeof shown, text, 40));
        return AP_OK;
    case AP_FT_ENUM: {
        int v = enum_value(f, text);
        if (v < 0) {
            enum_list(f, list, sizeof list);
            return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not one of %s", what,
                              ap_text_line(shown, sizeof shown, text, 40), list);
        }
        ap_field_put(f, obj, v);
        return AP_OK;
    }
    case AP_FT_CHUNKS: return parse_chunks(f, text, what, obj, err);
    }
    return ap_err_set(err, AP_ERR_INTERNAL, "%s: unknown field kind", what);
}

ap_status ap_field_check(const ap_field *f, const void *obj, const char *where, ap_err *err) {
    double v = ap_field_get(f, obj);
    int ok;
    switch (f->kind) {
    case AP_FT_BOOL: ok = v == 0 || v == 1; break;
    case AP_FT_ENUM: ok = v >= 0 && v < f->nvalues && f->enum_name((int)v) != NULL; break;
    case AP_FT_CHUNKS:
        ok = v >= 0 && v <= f->nvalues;
        for (int i = 0; ok && i < (int)v; i++) {
            int c = CAT(obj, f->offset, int)[i];
            ok = c >= f->lo && c <= f->hi;
        }
        break;
    default: ok = isfinite(v) && v >= f->lo && v <= f->hi;
    }
    if (ok) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = %.17g is not an accepted value", where,
                      f->json ? f->json : f->name, v);
}

/* Walk a JSON path "a.b.c" to the parent of its leaf: *parent and *leaf; where2 gets "where.a.b".
 * The parents must be objects. */
static ap_status json_parent(const ap_json *o, const char *path, const ap_json **parent,
                             const char **leaf, char *where2, size_t n, const char *where,
                             ap_err *err) {
    snprintf(where2, n, "%s", where);
    const char *s = path;
    const char *dot;
    while ((dot = strchr(s, '.')) != NULL) {
        char key[64];
        size_t len = (size_t)(dot - s);
        if (len >= sizeof key) len = sizeof key - 1;
        memcpy(key, s, len);
        key[len] = '\0';
        const ap_json *v = ap_json_get(o, key);
        if (!v) return ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where2, key);
        if (!ap_json_is_object(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an object, got %s", where2,
                              key, ap_json_type_name(v));
        size_t k = strlen(where2);
        snprintf(where2 + k, n - k, ".%s", key);
        o = v;
        s = dot + 1;
    }
    *parent = o;
    *leaf = s;
    return AP_OK;
}

static ap_status read_chunks(const ap_field *f, const ap_json *o, const char *k, void *obj,
                             const char *where, ap_err *err) {
    ap_json *a = ap_json_get(o, k);
    int n = *AT(obj, f->count_offset, int);
    if (!a) return ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where, k);
    if (!ap_json_is_array(a))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an array, got %s", where, k,
                          ap_json_type_name(a));
    if (ap_json_size(a) != n)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' has %d entries, want pp x vp = %d",
                          where, k, ap_json_size(a), n);
    for (int i = 0; i < n && i < f->nvalues; i++) {
        ap_json *v = ap_json_at(a, i);
        double d = ap_json_number(v);
        if (!ap_json_is_number(v) || d != floor(d) || d < f->lo || d > f->hi)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s'[%d] must be an integer in [%g, %g]",
                              where, k, i, f->lo, f->hi);
        *ap_field_chunk(f, obj, i) = (int)d;
    }
    return AP_OK;
}

ap_status ap_field_read_json(const ap_field *f, const ap_json *o, void *obj, const char *where,
                             ap_err *err) {
    const ap_json *parent = NULL;
    const char *k = "";
    char w[640], buf[64], list[160];
    ap_status st = json_parent(o, f->json, &parent, &k, w, sizeof w, where, err);
    if (st != AP_OK) return st;
    if (f->flags & AP_FIELD_OPTIONAL) {
        const ap_json *v = ap_json_get(parent, k);
        if (!v || ap_json_is_null(v)) return AP_OK;
    }
    int64_t i;
    double d;
    int b;
    switch (f->kind) {
    case AP_FT_INT:
    case AP_FT_I64:
        if ((st = ap_json_get_int(parent, k, (int64_t)f->lo, (int64_t)f->hi, &i, NULL, w, err)) !=
            AP_OK)
            return st;
        if (f->kind == AP_FT_I64) *AT(obj, f->offset, int64_t) = i;
        else *AT(obj, f->offset, int) = (int)i;
        return AP_OK;
    case AP_FT_REAL:
        if ((st = ap_json_get_real(parent, k, f->lo, f->hi, &d, NULL, w, err)) != AP_OK) return st;
        ap_field_put(f, obj, d);
        return AP_OK;
    case AP_FT_BOOL:
        if ((st = ap_json_get_bool(parent, k, &b, NULL, w, err)) != AP_OK) return st;
        ap_field_put(f, obj, b);
        return AP_OK;
    case AP_FT_ENUM: {
        if ((st = ap_json_get_str(parent, k, buf, sizeof buf, NULL, w, err)) != AP_OK) return st;
        int v = enum_value(f, buf);
        if (v < 0) {
            char shown[64];
            enum_list(f, list, sizeof list);
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = \"%s\" is not one of %s", w, k,
                              ap_text_line(shown, sizeof shown, buf, 40), list);
        }
        ap_field_put(f, obj, v);
        return AP_OK;
    }
    case AP_FT_CHUNKS: return read_chunks(f, parent, k, obj, w, err);
    }
    return ap_err_set(err, AP_ERR_INTERNAL, "%s: unknown field kind", where);
}

/* The object at the parent path of f->json under o, created when missing. */
static ap_json *parent_for_write(ap_json *o, const char *path, const char **leaf) {
    const char *s = path;
    *leaf = path;
    const char *dot;
    while (o && (dot = strchr(s, '.')) != NULL) {
        char key[64];
        size_t len = (size_t)(dot - s);
        if (len >= sizeof key) len = sizeof key - 1;
        memcpy(key, s, len);
        key[len] = '\0';
        ap_json *v = ap_json_get(o, key);
        if (!v) {
            v = ap_json_new_object();
            if (!v || ap_json_add(o, key, v) != AP_OK) return NULL;
        }
        o = v;
        s = dot + 1;
    }
    *leaf = s;
    return o;
}

ap_status ap_field_write_json(const ap_field *f, ap_json *o, const void *obj) {
    const char *k = "";
    ap_json *parent = parent_for_write(o, f->json, &k);
    if (!parent) return AP_ERR_NOMEM;
    switch (f->kind) {
    case AP_FT_INT:
    case AP_FT_I64:
    case AP_FT_REAL: return ap_json_add_number(parent, k, ap_field_get(f, obj));
    case AP_FT_BOOL: return ap_json_add_bool(parent, k, (int)ap_field_get(f, obj));
    case AP_FT_ENUM: {
        const char *nm = f->enum_name((int)ap_field_get(f, obj));
        return ap_json_add_string(parent, k, nm ? nm : "?");
    }
    case AP_FT_CHUNKS: {
        ap_json *a = ap_json_new_array();
        if (!a || ap_json_add(parent, k, a) != AP_OK) return AP_ERR_NOMEM;
        int n = (int)ap_field_get(f, obj);
        for (int i = 0; i < n && i < f->nvalues; i++)
            if (ap_json_push(a, ap_json_new_number(CAT(obj, f->offset, int)[i])) != AP_OK)
                return AP_ERR_NOMEM;
        return AP_OK;
    }
    }
    return AP_ERR_INTERNAL;
}

void ap_fields_canonical(const ap_field *t, int n, const void *obj, const char *prefix,
                         ap_strbuf *out) {
    for (int i = 0; i < n; i++) {
        const ap_field *f = &t[i];
        ap_strbuf_printf(out, "%s%s=", prefix, f->name);
        switch (f->kind) {
        case AP_FT_REAL: ap_strbuf_printf(out, "%.17g", ap_field_get(f, obj)); break;
        case AP_FT_I64:
            ap_strbuf_printf(out, "%lld", (long long)*CAT(obj, f->offset, int64_t));
            break;
        case AP_FT_CHUNKS: {
            int len = (int)ap_field_get(f, obj);
            ap_strbuf_printf(out, "%d:", len);
            for (int c = 0; c < len && c < f->nvalues; c++)
                ap_strbuf_printf(out, "%s%d", c ? "," : "", CAT(obj, f->offset, int)[c]);
            break;
        }
        default: ap_strbuf_printf(out, "%d", (int)ap_field_get(f, obj));
        }
        ap_strbuf_puts(out, "\n");
    }
}
