/*
 * json.c - the one file that includes cJSON.h (see json.h). ap_json is cJSON itself behind an
 * opaque name; this file adds error positions, validating field readers, and a printer with
 * stable two-space indentation and round-trip number formatting. cJSON allocates through the
 * library's hook (ap_malloc / ap_free, common.h), installed before the first cJSON call.
 */
#include "autoplan/json.h"
#include "autoplan/strbuf.h"
#include "autoplan/text.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define J(x) ((cJSON *)(x))
#define CJ(x) ((const cJSON *)(x))

/* cJSON's allocations go through ap_malloc / ap_free. Installed by every function that can
 * create a cJSON value, before it does (nothing else creates one). With hooks other than
 * malloc/free cJSON grows buffers by malloc + copy instead of realloc (cJSON.c, ensure()): it
 * only prints through that path, and this file has its own printer. */
static void hooks(void) {
    static int installed;
    if (installed) return;
    cJSON_Hooks h = {ap_malloc, ap_free};
    cJSON_InitHooks(&h);
    installed = 1;
}

/* Deepest nesting of [ and { before byte `off` (outside strings): cJSON gives up at
 * CJSON_NESTING_LIMIT levels with the same error as a syntax error. */
static int depth_before(const char *text, size_t off) {
    int depth = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < off; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max) max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A key of object j that appears twice, or NULL: pairwise for small objects, sorted above 32
 * members (a 10^5-member object costs a sort, not 10^10 comparisons). */
static const char *duplicate_in(const cJSON *j) {
    int n = 0;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    const char **keys = n > 32 ? ap_malloc((size_t)n * sizeof *keys) : NULL;
    if (!keys) {
        for (const cJSON *c = j->child; c; c = c->next)
            for (const cJSON *d = j->child; d != c; d = d->next)
                if (c->string && d->string && strcmp(d->string, c->string) == 0) return c->string;
        return NULL;
    }
    int k = 0;
    for (const cJSON *c = j->child; c; c = c->next) keys[k++] = c->string ? c->string : "";
    qsort(keys, (size_t)k, sizeof *keys, cmp_key);
    const char *dup = NULL;
    for (int i = 1; i < k && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) dup = keys[i];
    ap_free(keys);
    return dup;
}

/* The first key that appears twice in one object, depth first; *path gets where ("model.moe").
 * cJSON keeps both members and its lookups return the first, so a duplicate would be silently
 * ignored: refused instead (RFC 8259 section 4: names SHOULD be unique). */
static const char *duplicate_key(const cJSON *j, char *path, size_t n) {
    if (!j || !(cJSON_IsObject(j) || cJSON_IsArray(j))) return NULL;
    size_t base = strlen(path);
    if (cJSON_IsObject(j)) {
        const char *k = duplicate_in(j);
        if (k) return k;
    }
    int idx = 0;
    for (const cJSON *c = j->child; c; c = c->next, idx++) {
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) {
            if (cJSON_IsObject(j))
                snprintf(path + base, n - base, "%s%s", base ? "." : "", c->string ? c->string : "");
            else
                snprintf(path + base, n - base, "[%d]", idx);
            const char *k = duplicate_key(c, path, n);
            if (k) return k;
            path[base] = '\0';
        }
    }
    return NULL;
}

ap_status ap_json_decode(const char *text, size_t len, const char *where, ap_json **out,
                         ap_err *err) {
    *out = NULL;
    if (!text) return ap_err_set(err, AP_ERR_INPUT, "%s: no data", where);
    hooks();
    /* cJSON stops at NUL; a NUL inside the text is an error at that byte. */
    size_t nul = strnlen(text, len);
    const char *end = NULL;
    unsigned long failures = ap_heap_failures();
    cJSON *j = cJSON_ParseWithLengthOpts(text, nul, &end, 0);
    if (!j && ap_heap_failures() != failures) /* cJSON's NULL means either */
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory while parsing JSON", where);
    if (j && nul < len) {
        cJSON_Delete(j);
        j = NULL;
        end = text + nul;
    }
    if (!j) {
        size_t off = end ? (size_t)(end - text) : 0;
        if (off > len) off = len;
        /* cJSON clamps the error position to the last byte when it runs out of input, so a
         * truncated document and a bad last byte look alike. Parse again with one space
         * appended: running out now points past the original text. */
        if (nul > 0 && off == nul - 1) {
            char *pad = ap_malloc(nul + 1);
            if (pad) {
                memcpy(pad, text, nul);
                pad[nul] = ' ';
                const char *end2 = NULL;
                cJSON *j2 = cJSON_ParseWithLengthOpts(pad, nul + 1, &end2, 0);
                if (!j2 && end2 && (size_t)(end2 - pad) >= nul) off = nul;
                cJSON_Delete(j2);
                ap_free(pad);
            }
        }
        size_t line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') { line++; col = 1; } else col++;
        }
        if (depth_before(text, off < nul ? off + 1 : nul) >= CJSON_NESTING_LIMIT)
            return ap_err_set(err, AP_ERR_INPUT, "%s: JSON nested deeper than %d levels at line "
                              "%zu, column %zu (byte %zu)", where, CJSON_NESTING_LIMIT, line, col,
                              off);
        if (nul == 0 || off >= nul)
            return ap_err_set(err, AP_ERR_INPUT, "%s: invalid JSON: unexpected end of input at "
                              "line %zu, column %zu (byte %zu)", where, line, col, off);
        return ap_err_set(err, AP_ERR_INPUT, "%s: invalid JSON at line %zu, column %zu (byte %zu)",
                          where, line, col, off);
    }
    /* JSON text is UTF-8 (RFC 8259 section 8.1): other bytes would reach names and files */
    size_t bad = 0;
    if (!ap_text_utf8_valid(text, nul, &bad)) {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < bad; i++) {
            if (text[i] == '\n') { line++; col = 1; } else col++;
        }
        cJSON_Delete(j);
        return ap_err_set(err, AP_ERR_INPUT, "%s: not UTF-8 at line %zu, column %zu (byte %zu)",
                          where, line, col, bad);
    }
    /* trailing garbage after the value */
    const char *p = end;
    while (p && p < text + nul && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    if (p && p < text + nul) {
        size_t off = (size_t)(p - text), line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (text[i] == '\n') { line++; col = 1; } else col++;
        }
        cJSON_Delete(j);
        return ap_err_set(err, AP_ERR_INPUT, "%s: invalid JSON: unexpected data after the value "
                          "at line %zu, column %zu (byte %zu)", where, line, col, off);
    }
    char path[256] = "";
    const char *dup = duplicate_key(j, path, sizeof path);
    if (dup) {
        char shown[64];
        ap_text_line(shown, sizeof shown, dup, 40);
        ap_err_set(err, AP_ERR_INPUT, "%s: key '%s' appears twice in %s%s", where, shown,
                   path[0] ? "object " : "the top-level object", path);
        cJSON_Delete(j);
        return AP_ERR_INPUT;
    }
    *out = (ap_json *)j;
    return AP_OK;
}

ap_status ap_json_decode_file(const char *path, ap_json **out, ap_err *err) {
    char *buf;
    size_t n;
    *out = NULL;
    ap_status st = ap_read_file(path, (size_t)64 << 20, &buf, &n, err);
    if (st != AP_OK) return st;
    st = ap_json_decode(buf, n, path, out, err);
    ap_free(buf);
    return st;
}

ap_json *ap_json_parse(const char *text, size_t len, const char *where, ap_err *err) {
    ap_json *j = NULL;
    ap_json_decode(text, len, where, &j, err);
    return j;
}

ap_json *ap_json_parse_file(const char *path, ap_err *err) {
    ap_json *j = NULL;
    ap_json_decode_file(path, &j, err);
    return j;
}

void ap_json_free(ap_json *j) { cJSON_Delete(J(j)); }

int ap_json_is_object(const ap_json *j) { return j && cJSON_IsObject(CJ(j)); }
int ap_json_is_array(const ap_json *j) { return j && cJSON_IsArray(CJ(j)); }
int ap_json_is_number(const ap_json *j) { return j && cJSON_IsNumber(CJ(j)); }
int ap_json_is_string(const ap_json *j) { return j && cJSON_IsString(CJ(j)); }
int ap_json_is_bool(const ap_json *j) { return j && cJSON_IsBool(CJ(j)); }
int ap_json_is_null(const ap_json *j) { return j && cJSON_IsNull(CJ(j)); }

const char *ap_json_type_name(const ap_json *j) {
    if (!j) return "missing";
    if (cJSON_IsObject(CJ(j))) return "an object";
    if (cJSON_IsArray(CJ(j))) return "an array";
    if (cJSON_IsNumber(CJ(j))) return "a number";
    if (cJSON_IsString(CJ(j))) return "a string";
    if (cJSON_IsBool(CJ(j))) return "a boolean";
    if (cJSON_IsNull(CJ(j))) return "null";
    return "invalid";
}

ap_json *ap_json_get(const ap_json *obj, const char *key) {
    if (!obj || !cJSON_IsObject(CJ(obj))) return NULL;
    return (ap_json *)cJSON_GetObjectItemCaseSensitive(CJ(obj), key);
}

int ap_json_size(const ap_json *arr) {
    if (!arr || !(cJSON_IsArray(CJ(arr)) || cJSON_IsObject(CJ(arr)))) return 0;
    return cJSON_GetArraySize(CJ(arr));
}

ap_json *ap_json_at(const ap_json *arr, int i) {
    if (!arr || !cJSON_IsArray(CJ(arr))) return NULL;
    return (ap_json *)cJSON_GetArrayItem(CJ(arr), i);
}

ap_json *ap_json_first(const ap_json *c) { return c ? (ap_json *)CJ(c)->child : NULL; }
ap_json *ap_json_next(const ap_json *item) { return item ? (ap_json *)CJ(item)->next : NULL; }
const char *ap_json_key(const ap_json *item) { return item ? CJ(item)->string : NULL; }

double ap_json_number(const ap_json *j) {
    return j && cJSON_IsNumber(CJ(j)) ? CJ(j)->valuedouble : 0.0;
}
const char *ap_json_string(const ap_json *j) {
    return j && cJSON_IsString(CJ(j)) ? CJ(j)->valuestring : NULL;
}
int ap_json_bool(const ap_json *j) { return j && cJSON_IsTrue(CJ(j)); }

static ap_json *field(const ap_json *obj, const char *key, int *present, const char *where,
                      ap_err *err, ap_status *st) {
    *st = AP_OK;
    ap_json *v = ap_json_get(obj, key);
    if (!v || cJSON_IsNull(CJ(v))) {
        if (present) *present = 0;
        else *st = ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where, key);
        return NULL;
    }
    if (present) *present = 1;
    return v;
}

ap_status ap_json_get_int(const ap_json *obj, const char *key, int64_t lo, int64_t hi,
                          int64_t *out, int *present, const char *where, ap_err *err) {
    ap_status st;
    ap_json *v = field(obj, key, present, where, err, &st);
    if (!v) return st;
    if (!cJSON_IsNumber(CJ(v)))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an integer, got %s", where,
                          key, ap_json_type_name(v));
    double d = CJ(v)->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an integer, got %g", where,
                          key, d);
    if (d < (double)lo || d > (double)hi)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = %.17g is out of range [%lld, %lld]",
                          where, key, d, (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return AP_OK;
}

ap_status ap_json_get_real(const ap_json *obj, const char *key, double lo, double hi, double *out,
                           int *present, const char *where, ap_err *err) {
    ap_status st;
    ap_json *v = field(obj, key, present, where, err, &st);
    if (!v) return st;
    if (!cJSON_IsNumber(CJ(v)))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be a number, got %s", where,
                          key, ap_json_type_name(v));
    double d = CJ(v)->valuedouble;
    if (!isfinite(d) || d < lo || d > hi)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = %g is out of range [%g, %g]",
                          where, key, d, lo, hi);
    /* -0 reads as 0: the writer prints both as "0", so a value read, written and read again
     * keeps its bits (found by fuzz_profile_import: "spread": -0). */
    *out = d == 0 ? 0.0 : d;
    return AP_OK;
}

ap_status ap_json_get_bool(const ap_json *obj, const char *key, int *out, int *present,
                           const char *where, ap_err *err) {
    ap_status st;
    ap_json *v = field(obj, key, present, where, err, &st);
    if (!v) return st;
    if (!cJSON_IsBool(CJ(v)))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be true or false, got %s",
                          where, key, ap_json_type_name(v));
    *out = cJSON_IsTrue(CJ(v)) ? 1 : 0;
    return AP_OK;
}

ap_status ap_json_get_str(const ap_json *obj, const char *key, char *buf, size_t n, int *present,
                          const char *where, ap_err *err) {
    ap_status st;
    ap_json *v = field(obj, key, present, where, err, &st);
    if (!v) return st;
    if (!cJSON_IsString(CJ(v)))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be a string, got %s", where,
                          key, ap_json_type_name(v));
    size_t len = strlen(CJ(v)->valuestring);
    if (len >= n)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' is too long (%zu characters, max %zu)",
                          where, key, len, n - 1);
    memcpy(buf, CJ(v)->valuestring, len + 1);
    return AP_OK;
}

ap_json *ap_json_new_object(void) {
    hooks();
    return (ap_json *)cJSON_CreateObject();
}
ap_json *ap_json_new_array(void) {
    hooks();
    return (ap_json *)cJSON_CreateArray();
}
ap_json *ap_json_new_number(double v) {
    hooks();
    return isfinite(v) ? (ap_json *)cJSON_CreateNumber(v) : (ap_json *)cJSON_CreateNull();
}
ap_json *ap_json_new_string(const char *s) {
    hooks();
    return (ap_json *)cJSON_CreateString(s ? s : "");
}
ap_json *ap_json_new_bool(int v) {
    hooks();
    return (ap_json *)cJSON_CreateBool(v ? 1 : 0);
}
ap_json *ap_json_new_null(void) {
    hooks();
    return (ap_json *)cJSON_CreateNull();
}

ap_status ap_json_add(ap_json *obj, const char *key, ap_json *item) {
    if (!obj || !item) {
        cJSON_Delete(J(item));
        return AP_ERR_NOMEM;
    }
    if (!cJSON_AddItemToObject(J(obj), key, J(item))) {
        cJSON_Delete(J(item));
        return AP_ERR_NOMEM;
    }
    return AP_OK;
}
ap_status ap_json_add_number(ap_json *obj, const char *key, double v) {
    return ap_json_add(obj, key, ap_json_new_number(v));
}
ap_status ap_json_add_string(ap_json *obj, const char *key, const char *s) {
    return ap_json_add(obj, key, ap_json_new_string(s));
}
ap_status ap_json_add_bool(ap_json *obj, const char *key, int v) {
    return ap_json_add(obj, key, ap_json_new_bool(v));
}
ap_status ap_json_push(ap_json *arr, ap_json *item) {
    if (!arr || !item) {
        cJSON_Delete(J(item));
        return AP_ERR_NOMEM;
    }
    if (!cJSON_AddItemToArray(J(arr), J(item))) {
        cJSON_Delete(J(item));
        return AP_ERR_NOMEM;
    }
    return AP_OK;
}
ap_json *ap_json_detach(ap_json *obj, const char *key) {
    return obj ? (ap_json *)cJSON_DetachItemFromObjectCaseSensitive(J(obj), key) : NULL;
}
ap_json *ap_json_duplicate(const ap_json *j) {
    return j ? (ap_json *)cJSON_Duplicate(CJ(j), 1) : NULL;
}

/* ---- printer ----------------------------------------------------------------------------- */

typedef ap_strbuf sbuf;
#define sb_put ap_strbuf_put
static void sb_s(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Strings are written by the one escaper (text.h): same output for valid text, U+FFFD for
 * bytes that are not UTF-8 so the document stays valid. */
static void put_string(sbuf *b, const char *s) { ap_text_escape(b, AP_TEXT_JSON, s); }

static void put_number(sbuf *b, double d) {
    char num[40];
    if (fabs(d) < 9007199254740992.0 && (double)(int64_t)d == d) {
        /* an integer: what %.0f writes (-0 as 0), without printf */
        sb_put(b, num, (size_t)ap_fmt_i64((int64_t)d, num));
        return;
    }
    if (!isfinite(d)) { sb_s(b, "null"); return; }
    /* shortest of %.15g/%.17g that round-trips */
    snprintf(num, sizeof num, "%.15g", d);
    if (strtod(num, NULL) != d) snprintf(num, sizeof num, "%.17g", d);
    if (strcmp(num, "-0") == 0) strcpy(num, "0");
    sb_s(b, num);
}

void ap_json_put_string(struct ap_strbuf *b, const char *s) { put_string(b, s); }
void ap_json_put_number(struct ap_strbuf *b, double d) { put_number(b, d); }

static void indent(sbuf *b, int pretty, int depth) {
    if (!pretty) return;
    sb_s(b, "\n");
    for (int i = 0; i < depth; i++) sb_s(b, "  ");
}

static void put_value(sbuf *b, const cJSON *j, int pretty, int depth) {
    if (cJSON_IsNull(j) || cJSON_IsInvalid(j)) sb_s(b, "null");
    else if (cJSON_IsFalse(j)) sb_s(b, "false");
    else if (cJSON_IsTrue(j)) sb_s(b, "true");
    else if (cJSON_IsNumber(j)) put_number(b, j->valuedouble);
    else if (cJSON_IsString(j)) put_string(b, j->valuestring ? j->valuestring : "");
    else if (cJSON_IsRaw(j)) sb_s(b, j->valuestring ? j->valuestring : "null");
    else {
        int obj = cJSON_IsObject(j);
        sb_s(b, obj ? "{" : "[");
        const cJSON *c = j->child;
        if (!c) { sb_s(b, obj ? "}" : "]"); return; }
        /* arrays of scalars stay on one line in pretty mode */
        int flat = !obj;
        for (const cJSON *k = c; k && flat; k = k->next)
            if (cJSON_IsObject(k) || cJSON_IsArray(k)) flat = 0;
        for (; c; c = c->next) {
            if (!flat) indent(b, pretty, depth + 1);
            if (obj) {
                put_string(b, c->string ? c->string : "");
                sb_s(b, pretty ? ": " : ":");
            }
            put_value(b, c, pretty, depth + 1);
            if (c->next) sb_s(b, flat && pretty ? ", " : ",");
        }
        if (!flat) indent(b, pretty, depth);
        sb_s(b, obj ? "}" : "]");
    }
}

char *ap_json_print(const ap_json *j, int pretty) {
    sbuf b = {0};
    if (!j) return NULL;
    put_value(&b, CJ(j), pretty, 0);
    if (b.failed) { ap_free(b.buf); return NULL; }
    if (!b.buf) {
        b.buf = ap_malloc(1);
        if (b.buf) b.buf[0] = '\0';
    }
    return b.buf;
}
