/*
 * json.h - autoplan's only door to cJSON (base/json.c is the one file that includes
 * cJSON.h). A value is an opaque ap_json; trees are owned by whoever created or parsed them and
 * freed with ap_json_free on the root. Pointers returned by the getters borrow into the tree and
 * stay valid until the root is freed.
 *
 * Reading helpers validate as they read: ap_json_get_int refuses non-integers, out-of-range
 * values and values that do not fit int64 (cJSON's valueint is an int; we read valuedouble and
 * check range), and name the field in the error.
 */
#ifndef AP_JSON_H
#define AP_JSON_H

#include "autoplan/common.h"

typedef struct ap_json ap_json;

/* Parse text (need not be NUL-terminated) into *out (caller frees with ap_json_free; NULL on
 * failure). AP_ERR_INPUT with "<where>: invalid JSON at line L, column C (byte B)", or
 * AP_ERR_NOMEM when memory ran out. `where` names the file. */
ap_status ap_json_decode(const char *text, size_t len, const char *where, ap_json **out,
                         ap_err *err);
/* Read and parse a file (max 64 MiB): ap_read_file's statuses, then ap_json_decode's. */
ap_status ap_json_decode_file(const char *path, ap_json **out, ap_err *err);
/* The same two returning the tree, NULL on any failure (err says why), for callers that treat
 * every failure alike. */
ap_json *ap_json_parse(const char *text, size_t len, const char *where, ap_err *err);
ap_json *ap_json_parse_file(const char *path, ap_err *err);
void ap_json_free(ap_json *j);

/* Type tests (NULL-safe: all return 0 for NULL). */
int ap_json_is_object(const ap_json *j);
int ap_json_is_array(const ap_json *j);
int ap_json_is_number(const ap_json *j);
int ap_json_is_string(const ap_json *j);
int ap_json_is_bool(const ap_json *j);
int ap_json_is_null(const ap_json *j);
const char *ap_json_type_name(const ap_json *j); /* "object", "number", ... "missing" */

/* Object member by exact key (NULL when absent or j is not an object). */
ap_json *ap_json_get(const ap_json *obj, const char *key);
/* Arrays and object iteration. */
int ap_json_size(const ap_json *arr); /* elements of an array or members of an object */
ap_json *ap_json_at(const ap_json *arr, int i);
ap_json *ap_json_first(const ap_json *container); /* first child */
ap_json *ap_json_next(const ap_json *item);
const char *ap_json_key(const ap_json *item); /* key of an object member */

/* Raw values (no checks; 0/NULL when of another type). */
double ap_json_number(const ap_json *j);
const char *ap_json_string(const ap_json *j);
int ap_json_bool(const ap_json *j);

/* Validating field readers. `where` names the file or object for messages ("llama.json").
 * Return AP_OK and set *out when present and valid; when absent: AP_OK with *out untouched and
 * *present = 0 if present != NULL, else AP_ERR_INPUT "missing field". Null values count as
 * absent. */
ap_status ap_json_get_int(const ap_json *obj, const char *key, int64_t lo, int64_t hi,
                          int64_t *out, int *present, const char *where, ap_err *err);
ap_status ap_json_get_real(const ap_json *obj, const char *key, double lo, double hi, double *out,
                           int *present, const char *where, ap_err *err);
ap_status ap_json_get_bool(const ap_json *obj, const char *key, int *out, int *present,
                           const char *where, ap_err *err);
/* Copies into buf (truncation is an error). */
ap_status ap_json_get_str(const ap_json *obj, const char *key, char *buf, size_t n, int *present,
                          const char *where, ap_err *err);

/* Building. ap_json_add and ap_json_push always take the item: the container owns it after a
 * successful add, and a failed add (AP_ERR_NOMEM; also for a NULL container or item) frees it,
 * so `ap_json_push(arr, ap_json_new_number(x))` is safe and a caller never frees an item it
 * passed. Non-finite numbers are written as null. */
ap_json *ap_json_new_object(void);
ap_json *ap_json_new_array(void);
ap_json *ap_json_new_number(double v);
ap_json *ap_json_new_string(const char *s);
ap_json *ap_json_new_bool(int v);
ap_json *ap_json_new_null(void);
ap_status ap_json_add(ap_json *obj, const char *key, ap_json *item);
ap_status ap_json_add_number(ap_json *obj, const char *key, double v);
ap_status ap_json_add_string(ap_json *obj, const char *key, const char *s);
ap_status ap_json_add_bool(ap_json *obj, const char *key, int v);
ap_status ap_json_push(ap_json *arr, ap_json *item);
ap_json *ap_json_detach(ap_json *obj, const char *key); /* remove member, caller owns it */
ap_json *ap_json_duplicate(const ap_json *j);           /* deep copy, caller owns it */

/* Serialise; caller frees the result with free(). pretty: 2-space indentation. Numbers that are
 * integral and |v| < 2^53 print without a fraction; others with %.17g round-trip precision. */
char *ap_json_print(const ap_json *j, int pretty);

/* The JSON text ap_json_print writes for one string (quoted and escaped) and one number,
 * appended to b: for writers that stream JSON without building a tree (sim/trace.c). */
struct ap_strbuf;
void ap_json_put_string(struct ap_strbuf *b, const char *s);
void ap_json_put_number(struct ap_strbuf *b, double d);

#endif
