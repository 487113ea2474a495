/*
 * planio.h - plan.json, schema version 1 (output/planio.c, documented in docs/plan-json.md), and
 * the JSON of one estimate (output/estjson.c).
 *
 * A plan file holds everything needed to act on a plan without the original inputs: the model
 * (every ap_model field, so `autoplan emit` works from plan.json alone), the cluster, the
 * trainer, the plan itself (degrees, batch, ZeRO, recompute, overlap, offload, dtype, stage
 * split) and, optionally, the estimate JSON produced by ap_estimate_to_json().
 *
 * Reading validates every field and refuses unknown major schema versions; each error is one
 * line naming the file, the field and the reason ("plan.json: plan: field 'tp' must be an
 * integer, got string").
 */
#ifndef AP_PLANIO_H
#define AP_PLANIO_H

#include "autoplan/estimate.h"
#include "autoplan/json.h"
#include "autoplan/plan.h"

#define AP_PLANFILE_SCHEMA_VERSION 1

/* Build the plan.json tree. `estimate` may be NULL; it is borrowed and deep-copied into the
 * result. Caller frees the result with ap_json_free. NULL on allocation failure. */
ap_json *ap_planfile_to_json(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_json *estimate);

/* Validate and decode a plan.json tree. `where` names the source in error messages (the file
 * path). On success fills *m, *c, *p and, when estimate_out is not NULL, *estimate_out with a
 * deep copy of the "estimate" object, checked against the plan and cluster as ap_planfile_read
 * says (NULL when the file has none; caller frees with ap_json_free). On failure the outputs
 * are unspecified and *estimate_out is NULL. */
ap_status ap_planfile_from_json(const ap_json *root, const char *where, ap_model *m,
                                ap_cluster *c, ap_plan *p, ap_json **estimate_out, ap_err *err);

/* The text of plan.json (pretty-printed, ending with a newline); caller frees. NULL when out of
 * memory. */
char *ap_planfile_print(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                        const ap_json *estimate);

/* Write plan.json to `path` atomically (temporary file + rename, ap_write_file_atomic).
 * `estimate` may be NULL (borrowed). */
ap_status ap_planfile_write(const char *path, const ap_model *m, const ap_cluster *c,
                            const ap_plan *p, const ap_json *estimate, ap_err *err);

/* Read and validate plan.json. estimate_out may be NULL (the estimate's content is not
 * checked); otherwise the estimate is checked against the file's plan and cluster (possible
 * numbers, the same plan field by field; AP_ERR_INPUT "<file>: field 'estimate.plan.tp' is 4,
 * the plan's is 8 ...") and the caller frees *estimate_out (NULL when absent) with
 * ap_json_free. */
ap_status ap_planfile_read(const char *path, ap_model *m, ap_cluster *c, ap_plan *p,
                           ap_json **estimate_out, ap_err *err);

/* The plan's heterogeneous placement (Gemini, DeepSpeed offload devices) as plan.json's plan
 * section holds it: an optional "hetero" object under plan_obj, written only when the plan uses
 * one; read back and validated (ap_plan_hetero_validate) on cluster c. The plan JSON of a
 * search result carries it the same way (result.h). */
ap_status ap_planfile_hetero_to_json(ap_json *plan_obj, const ap_plan *p);
ap_status ap_planfile_hetero_from_json(const ap_json *plan_obj, const char *where,
                                       const ap_cluster *c, ap_plan *p, ap_err *err);

/* JSON of an estimate, with the schema documented in README ("estimate --json"). Caller frees
 * with ap_json_free. NULL on allocation failure. */
ap_json *ap_estimate_to_json(const ap_estimate *e, const ap_model *m);

/* The plan of an estimate JSON (ap_estimate_to_json's "plan" object, e.g. a cached search
 * result): every plan field validated, the split kept when it is not the uniform one.
 * AP_ERR_INPUT "<where>: field 'plan.tp': ..." for a missing or malformed field. */
ap_status ap_estimate_plan_from_json(const ap_json *est, const char *where, ap_plan *p,
                                     ap_err *err);

/* ---- the scalar fields of an estimate (output/estjson.c) ---------------------------------
 * One table, in `estimate --json` order, drives ap_estimate_to_json, ap_estimate_plan_from_json,
 * the report's rows (ap_report_row_from_estimate) and the columns of plans.csv. A field is
 * added there once. The per-stage arrays (plan.stage_layers, memory.stages) are not in it. */
typedef enum {
    AP_FIELD_INT, AP_FIELD_I64, AP_FIELD_REAL, AP_FIELD_BOOL,
    AP_FIELD_TRAINER, AP_FIELD_RECOMPUTE, AP_FIELD_DTYPE, AP_FIELD_ATTN_IMPL /* as names */
} ap_field_kind;

#define AP_FIELD_NO_ROW ((size_t)-1)

typedef struct ap_estimate_field {
    const char *group; /* JSON object: "plan", "plan.offload", "time", "throughput", "memory" */
    const char *key;   /* "step_s" */
    const char *path;  /* "time.step_s": the plans.csv column name */
    ap_field_kind kind;
    int from;          /* internal: where the value lives in ap_estimate */
    size_t off;        /* internal */
    size_t row_off;    /* offset in ap_report_row (report.h), AP_FIELD_NO_ROW when not a column */
} ap_estimate_field;

int ap_estimate_field_count(void);
const ap_estimate_field *ap_estimate_field_at(int i); /* static; NULL out of range */
/* The field's value in e as a number (bools 0/1, the enums as their value). */
double ap_estimate_field_value(const ap_estimate_field *f, const ap_estimate *e);
/* The name of enum value v of an enum-kind field ("megatron", "full", "bf16"); NULL for the
 * other kinds. */
const char *ap_estimate_field_name(const ap_estimate_field *f, int v);

#endif
