/*
 * fields.h - field tables: one row per member of a plain value struct (its C name, its JSON
 * path, the flag that sets it, its kind and accepted range), and the operations every user of
 * such a struct needs, driven by the table (base/fields.c): parse a flag value, read and write
 * JSON, compare, and append a canonical text of the values for cache keys.
 *
 * A struct described by a table (ap_plan: costmodel/planfields.c; the search inputs:
 * planner/request.c) is listed once: plan.json I/O, the flags, the plan-cache key and their
 * tests walk the same rows, so a member added to the table is read, written and keyed at once,
 * and a test that changes each row in turn proves the key covers it.
 */
#ifndef AP_FIELDS_H
#define AP_FIELDS_H

#include <stddef.h>

#include "autoplan/common.h"
#include "autoplan/json.h"
#include "autoplan/strbuf.h"

typedef enum {
    AP_FT_INT = 0, /* int */
    AP_FT_I64,     /* int64_t */
    AP_FT_REAL,    /* double */
    AP_FT_BOOL,    /* int, 0 or 1 */
    AP_FT_ENUM,    /* an enum stored as int; names by enum_name */
    AP_FT_CHUNKS   /* int[] whose length is the INT member at count_offset */
} ap_field_type;

#define AP_FIELD_ROOT 1u    /* plan.json writes it beside its section, not inside (trainer) */
#define AP_FIELD_NEGATED 2u /* the flag turns it off (--no-flash-attn) */
#define AP_FIELD_OPTIONAL 4u /* JSON may omit it (or give null): the member keeps its value */

typedef struct ap_field {
    const char *name;    /* the C member: "offload_optimizer" */
    const char *json;    /* path in the JSON section: "offload.optimizer"; NULL: not stored */
    const char *flag;    /* the flag that sets it, without dashes: "offload-optimizer"; NULL */
    ap_field_type kind;
    size_t offset;       /* offsetof the member */
    double lo, hi;       /* accepted values (INT, I64, REAL, CHUNKS elements) */
    const char *(*enum_name)(int v); /* ENUM: name of value v, NULL when v is not accepted */
    int nvalues;         /* ENUM: values 0..nvalues-1 are tried; CHUNKS: capacity */
    size_t count_offset; /* CHUNKS: offsetof the int member holding the length */
    unsigned flags;      /* AP_FIELD_ROOT, AP_FIELD_NEGATED, AP_FIELD_OPTIONAL */
} ap_field;

/* The value as a number (BOOL 0/1, ENUM its value, CHUNKS its length). */
double ap_field_get(const ap_field *f, const void *obj);
/* Store v (no range check; CHUNKS: the length). */
void ap_field_put(const ap_field *f, void *obj, double v);
/* Element i of a CHUNKS member. */
int *ap_field_chunk(const ap_field *f, void *obj, int i);

/* The row named `name` (C name, JSON path or flag), NULL when none. */
const ap_field *ap_field_find(const ap_field *t, int n, const char *name);

/* Set the member from user text (a flag value, a --fix pin): INT/I64 integers in range, REAL
 * reals in range, ENUM one of its names, BOOL true/false/1/0, CHUNKS a comma-separated list of
 * integers ("16,16"; empty items refused). Errors name `what` ("--tp", "--fix tp"). */
ap_status ap_field_parse(const ap_field *f, const char *text, const char *what, void *obj,
                         ap_err *err);

/* AP_OK when the member holds an accepted value (range, enum name, 0/1, chunk elements);
 * otherwise AP_ERR_INPUT "<where>: field '<json path>' = <v> is not an accepted value". For
 * values that came from elsewhere than ap_field_parse / ap_field_read_json. */
ap_status ap_field_check(const ap_field *f, const void *obj, const char *where, ap_err *err);

/* Read the member from its JSON path under section `o` (required unless AP_FIELD_OPTIONAL,
 * typed, in range); messages
 * "<where>[.<parent>]: field '<leaf>' ...". CHUNKS: an array of exactly *count_offset
 * integers. */
ap_status ap_field_read_json(const ap_field *f, const ap_json *o, void *obj, const char *where,
                             ap_err *err);
/* Write the member at its JSON path under section `o` (parents created as needed). CHUNKS:
 * its *count_offset elements. AP_ERR_NOMEM on allocation failure. */
ap_status ap_field_write_json(const ap_field *f, ap_json *o, const void *obj);

/* Append "<prefix><name>=<value>\n" for every row to out, in table order: REAL as %.17g,
 * CHUNKS as the length then the elements. The text of a cache key. */
void ap_fields_canonical(const ap_field *t, int n, const void *obj, const char *prefix,
                         ap_strbuf *out);

#endif
