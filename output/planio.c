/*
 * planio.c - plan.json schema version 1: writer and validating reader (see planio.h and
 * docs/plan-json.md).
 *
 * Structure: one builder and one reader per section (model, cluster, plan), each listing the
 * fields in the same order as the schema document. The reader refuses any missing or mistyped
 * field with a one-line message "<file>: <section>: field '<key>' ...", then runs the model,
 * cluster and plan checks the rest of autoplan uses (ap_model_validate, ap_cluster_validate,
 * ap_plan_check), so a plan file that reads is a plan the estimator accepts.
 *
 * Fingerprints are written for humans and caches; on reading they are recomputed and compared:
 * a mismatch is an error when the file was written by this autoplan version (the file was edited
 * inconsistently) and a warning otherwise (the fingerprint function may have changed).
 *
 * Not done here: choosing or estimating plans, emitting trainer configs (emit*.c).
 */
#include "autoplan/planio.h"
#include "autoplan/hetero.h"
#include "autoplan/text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEGREE ((int64_t)1 << 20)
#define MAX_BATCH ((int64_t)1 << 40)

static void hex64(uint64_t v, char buf[17]) { snprintf(buf, 17, "%016" PRIx64, v); }

/* ---- writing ---------------------------------------------------------------------------- */

/* A builder that remembers the first allocation failure so section builders stay linear. */
typedef struct jb {
    int failed;
} jb;

static void num(jb *b, ap_json *o, const char *k, double v) {
    if (!o || ap_json_add_number(o, k, v) != AP_OK) b->failed = 1;
}
static void str(jb *b, ap_json *o, const char *k, const char *v) {
    if (!o || ap_json_add_string(o, k, v) != AP_OK) b->failed = 1;
}
static void boo(jb *b, ap_json *o, const char *k, int v) {
    if (!o || ap_json_add_bool(o, k, v) != AP_OK) b->failed = 1;
}
/* Add child (takes ownership, frees it on failure); returns child or NULL. */
static ap_json *sub(jb *b, ap_json *o, const char *k, ap_json *child) {
    if (ap_json_add(o, k, child) != AP_OK) {
        b->failed = 1;
        return NULL;
    }
    return child;
}
static void build_model(jb *b, ap_json *o, const ap_model *m) {
    char fp[17];
    if (ap_model_to_json(m, o) != AP_OK) b->failed = 1;
    hex64(ap_model_fingerprint(m), fp);
    str(b, o, "fingerprint", fp);
}

static void build_cluster(jb *b, ap_json *o, const ap_cluster *c) {
    char fp[17];
    str(b, o, "name", c->name);
    str(b, o, "gpu", c->gpu.name);
    num(b, o, "gpu_mem_bytes", c->gpu.mem_bytes);
    num(b, o, "gpus", c->gpus);
    num(b, o, "gpus_per_node", c->gpus_per_node);
    num(b, o, "nvlink_domain", c->nvlink_domain);
    num(b, o, "link_bytes_per_s", c->link_bytes_per_s);
    num(b, o, "net_bytes_per_s", c->net_bytes_per_s);
    num(b, o, "pcie_bytes_per_s", c->pcie_bytes_per_s);
    num(b, o, "gpus_per_pcie_switch", c->gpus_per_pcie_switch);
    num(b, o, "cpu_mem_bytes", c->cpu_mem_bytes);
    num(b, o, "cpu_cores", c->cpu_cores);
    num(b, o, "host_mem_bytes_per_s", c->host_mem_bytes_per_s);
    if (c->nvme_bytes > 0) { /* issue 18: written only when the cluster has NVMe */
        num(b, o, "nvme_bytes", c->nvme_bytes);
        num(b, o, "nvme_read_bytes_per_s", c->nvme_read_bytes_per_s);
        num(b, o, "nvme_write_bytes_per_s", c->nvme_write_bytes_per_s);
    }
    hex64(ap_cluster_fingerprint(c), fp);
    str(b, o, "fingerprint", fp);
}

/* Heterogeneous placement (issue 18), written only when used: "hetero": {"gemini": {...}} or
 * {"deepspeed": {...}} with the trainer's own option names (docs/plan-json.md). */
static void build_hetero(jb *b, ap_json *o, const ap_plan_hetero *h) {
    if (h->placement != AP_GEMINI_OFF) {
        ap_json *g = sub(b, sub(b, o, "hetero", ap_json_new_object()), "gemini",
                         ap_json_new_object());
        str(b, g, "placement_policy", ap_gemini_placement_name(h->placement));
        num(b, g, "shard_param_frac", h->shard_param_frac);
        num(b, g, "offload_optim_frac", h->offload_optim_frac);
        num(b, g, "offload_param_frac", h->offload_param_frac);
        num(b, g, "warmup_non_model_data_ratio", h->warmup_non_model_data_ratio);
        num(b, g, "steady_cuda_cap_ratio", h->steady_cuda_cap_ratio);
        num(b, g, "gpu_margin_mem_ratio", h->gpu_margin_mem_ratio);
        boo(b, g, "pin_memory", h->pin_memory);
        boo(b, g, "enable_async_reduce", h->enable_async_reduce);
        num(b, g, "max_prefetch", h->max_prefetch);
        num(b, g, "search_range_m", h->search_range_m);
        num(b, g, "min_chunk_size_m", h->min_chunk_size_m);
        num(b, g, "hidden_dim", (double)h->hidden_dim);
    } else if (h->ds_optimizer != AP_OFFLOAD_DEV_NONE || h->ds_params != AP_OFFLOAD_DEV_NONE) {
        ap_json *d = sub(b, sub(b, o, "hetero", ap_json_new_object()), "deepspeed",
                         ap_json_new_object());
        str(b, d, "offload_optimizer_device", ap_offload_device_name(h->ds_optimizer));
        str(b, d, "offload_param_device", ap_offload_device_name(h->ds_params));
        boo(b, d, "optimizer_pin_memory", h->ds_optimizer_pin);
        boo(b, d, "param_pin_memory", h->ds_param_pin);
        num(b, d, "param_buffer_count", (double)h->ds_param_buffer_count);
        num(b, d, "param_buffer_size", (double)h->ds_param_buffer_size);
        num(b, d, "max_in_cpu", (double)h->ds_max_in_cpu);
        num(b, d, "optimizer_buffer_count", (double)h->ds_optimizer_buffer_count);
        num(b, d, "sub_group_size", (double)h->ds_sub_group_size);
        num(b, d, "reduce_bucket_size", (double)h->ds_reduce_bucket_size);
        num(b, d, "prefetch_bucket_size", (double)h->ds_prefetch_bucket_size);
        num(b, d, "param_persistence_threshold", (double)h->ds_param_persistence_threshold);
        num(b, d, "max_live_parameters", (double)h->ds_max_live_parameters);
        num(b, d, "max_reuse_distance", (double)h->ds_max_reuse_distance);
    }
}

/* The plan section: every row of the plan's field table with a JSON path (plan.h), the stage
 * arrays written out for all pp x vp chunks, then the optional placement. */
static void build_plan(jb *b, ap_json *o, const ap_plan *p, const ap_model *m) {
    static ap_plan q; /* 4 KiB of chunk arrays: not on the stack of every caller */
    q = *p;
    int nch = p->pp * p->vp;
    if (nch > AP_MAX_CHUNKS) nch = AP_MAX_CHUNKS;
    for (int c = 0; c < nch; c++) q.stage_layers[c] = ap_plan_chunk_layers(p, m->layers, c);
    q.nchunks = nch;
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n && o; i++)
        if (t[i].json && !(t[i].flags & AP_FIELD_ROOT) && ap_field_write_json(&t[i], o, &q) != AP_OK)
            b->failed = 1;
    if (!o) b->failed = 1;
    build_hetero(b, o, &p->hetero);
}

ap_status ap_planfile_hetero_to_json(ap_json *plan_obj, const ap_plan *p) {
    jb b = {0};
    build_hetero(&b, plan_obj, &p->hetero);
    return b.failed ? AP_ERR_NOMEM : AP_OK;
}

ap_json *ap_planfile_to_json(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                             const ap_json *estimate) {
    jb b = {0};
    ap_json *root = ap_json_new_object();
    if (!root) return NULL;
    num(&b, root, "schema_version", AP_PLANFILE_SCHEMA_VERSION);
    str(&b, root, "autoplan_version", AP_VERSION);
    build_model(&b, sub(&b, root, "model", ap_json_new_object()), m);
    build_cluster(&b, sub(&b, root, "cluster", ap_json_new_object()), c);
    int nf;
    const ap_field *t = ap_plan_fields(&nf);
    for (int i = 0; i < nf; i++)
        if ((t[i].flags & AP_FIELD_ROOT) && ap_field_write_json(&t[i], root, p) != AP_OK) b.failed = 1;
    build_plan(&b, sub(&b, root, "plan", ap_json_new_object()), p, m);
    if (estimate) sub(&b, root, "estimate", ap_json_duplicate(estimate));
    if (b.failed) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}

char *ap_planfile_print(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                        const ap_json *estimate) {
    ap_json *root = ap_planfile_to_json(m, c, p, estimate);
    char *text = root ? ap_json_print(root, 1) : NULL;
    ap_json_free(root);
    if (!text) return NULL;
    size_t n = strlen(text);
    /* end the file with a newline, as text files should */
    char *withnl = ap_realloc(text, n + 2);
    if (!withnl) {
        ap_free(text);
        return NULL;
    }
    withnl[n] = '\n';
    withnl[n + 1] = '\0';
    return withnl;
}

ap_status ap_planfile_write(const char *path, const ap_model *m, const ap_cluster *c,
                            const ap_plan *p, const ap_json *estimate, ap_err *err) {
    char *text = ap_planfile_print(m, c, p, estimate);
    if (!text) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory building plan.json", path);
    ap_status st = ap_write_file_atomic(path, text, strlen(text), err);
    ap_free(text);
    return st;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* A required object member. */
static ap_status get_obj(const ap_json *o, const char *key, const char *where, ap_json **out,
                         ap_err *err) {
    ap_json *v = ap_json_get(o, key);
    if (!v) return ap_err_set(err, AP_ERR_INPUT, "%s: missing field '%s'", where, key);
    if (!ap_json_is_object(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an object, got %s", where,
                          key, ap_json_type_name(v));
    *out = v;
    return AP_OK;
}

static ap_status get_i64(const ap_json *o, const char *k, int64_t lo, int64_t hi, int64_t *out,
                         const char *where, ap_err *err) {
    return ap_json_get_int(o, k, lo, hi, out, NULL, where, err);
}

static ap_status get_int(const ap_json *o, const char *k, int64_t lo, int64_t hi, int *out,
                         const char *where, ap_err *err) {
    int64_t v = 0;
    ap_status st = ap_json_get_int(o, k, lo, hi, &v, NULL, where, err);
    if (st == AP_OK) *out = (int)v;
    return st;
}

#define TRY(x)                                                                                 \
    do {                                                                                       \
        ap_status st_ = (x);                                                                   \
        if (st_ != AP_OK) return st_;                                                          \
    } while (0)

/* schema_version: the number 1 or 1.x, or the string "1" or "1.x" (x: digits). */
static ap_status check_version(const ap_json *root, const char *where, ap_err *err) {
    ap_json *v = ap_json_get(root, "schema_version");
    if (!v || ap_json_is_null(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: missing field 'schema_version'", where);
    long major = -1;
    if (ap_json_is_number(v)) {
        double d = ap_json_number(v);
        if (!isfinite(d) || d < 0 || d > 1e6)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'schema_version' = %g is not a version",
                              where, d);
        major = (long)floor(d);
    } else if (ap_json_is_string(v)) {
        const char *s = ap_json_string(v);
        char *end = NULL;
        if (*s < '0' || *s > '9')
            return ap_err_set(err, AP_ERR_INPUT,
                              "%s: field 'schema_version' = \"%s\" is not a version like \"1\" or "
                              "\"1.2\"", where, s);
        major = strtol(s, &end, 10);
        if (*end == '.') {
            const char *q = end + 1;
            if (!*q) end = (char *)q - 1; /* "1." is malformed */
            else {
                while (*q >= '0' && *q <= '9') q++;
                end = (char *)q;
            }
        }
        if (*end)
            return ap_err_set(err, AP_ERR_INPUT,
                              "%s: field 'schema_version' = \"%s\" is not a version like \"1\" or "
                              "\"1.2\"", where, s);
    } else {
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'schema_version' must be a number or string, got %s", where,
                          ap_json_type_name(v));
    }
    if (major != AP_PLANFILE_SCHEMA_VERSION)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'schema_version': major version %ld is not supported (this "
                          "autoplan %s reads version %d)", where, major, AP_VERSION,
                          AP_PLANFILE_SCHEMA_VERSION);
    return AP_OK;
}

/* Compare a stored fingerprint with the recomputed one (see the file comment for the policy):
 * from another version the difference is a warning, written into warn (n bytes; empty when
 * none) for the caller to log once the whole file has read (an error found later stays the
 * one line on stderr). */
static ap_status check_fingerprint(const ap_json *o, uint64_t want, int same_version,
                                   const char *where, char *warn, size_t n, ap_err *err) {
    char buf[32], hex[17];
    TRY(ap_json_get_str(o, "fingerprint", buf, sizeof buf, NULL, where, err));
    hex64(want, hex);
    if (strcmp(buf, hex) == 0) return AP_OK;
    if (same_version)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'fingerprint' = \"%s\" does not match the fields, which "
                          "give \"%s\": the file was edited inconsistently", where, buf, hex);
    snprintf(warn, n, "%s: fingerprint %s differs from %s computed by autoplan %s", where, buf,
             hex, AP_VERSION);
    return AP_OK;
}

/* The "arch" object: the architecture fields added for today's families. */
static ap_status read_model(const ap_json *o, const char *where, int same_version, ap_model *m,
                            char *warn, size_t n, ap_err *err) {
    TRY(ap_model_from_json(o, where, m, err));
    return check_fingerprint(o, ap_model_fingerprint(m), same_version, where, warn, n, err);
}

static ap_status read_cluster(const ap_json *o, const char *where, int same_version,
                              ap_cluster *c, char *warn, size_t n, ap_err *err) {
    char gpu[64];
    memset(c, 0, sizeof *c);
    TRY(ap_json_get_str(o, "name", c->name, sizeof c->name, NULL, where, err));
    TRY(ap_json_get_str(o, "gpu", gpu, sizeof gpu, NULL, where, err));
    const ap_gpu *g = ap_gpu_find(gpu);
    if (!g)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'gpu' = \"%s\" is not in the GPU catalog (see autoplan gpus)",
                          where, gpu);
    int gpus = 0;
    TRY(get_int(o, "gpus", 1, MAX_DEGREE, &gpus, where, err));
    /* catalog defaults first, so cluster fields added after schema 1 get their usual values */
    char name[sizeof c->name];
    memcpy(name, c->name, sizeof name);
    ap_cluster_from_gpu(g, gpus, c);
    memcpy(c->name, name, sizeof name);
    TRY(ap_json_get_real(o, "gpu_mem_bytes", 1, 1e15, &c->gpu.mem_bytes, NULL, where, err));
    TRY(get_int(o, "gpus_per_node", 1, MAX_DEGREE, &c->gpus_per_node, where, err));
    TRY(get_int(o, "nvlink_domain", 1, MAX_DEGREE, &c->nvlink_domain, where, err));
    TRY(ap_json_get_real(o, "link_bytes_per_s", 0, 1e15, &c->link_bytes_per_s, NULL, where, err));
    TRY(ap_json_get_real(o, "net_bytes_per_s", 0, 1e15, &c->net_bytes_per_s, NULL, where, err));
    TRY(ap_json_get_real(o, "pcie_bytes_per_s", 0, 1e15, &c->pcie_bytes_per_s, NULL, where, err));
    TRY(get_int(o, "gpus_per_pcie_switch", 0, MAX_DEGREE, &c->gpus_per_pcie_switch, where, err));
    TRY(ap_json_get_real(o, "cpu_mem_bytes", 0, 1e18, &c->cpu_mem_bytes, NULL, where, err));
    TRY(get_int(o, "cpu_cores", 0, MAX_DEGREE, &c->cpu_cores, where, err));
    TRY(ap_json_get_real(o, "host_mem_bytes_per_s", 0, 1e15, &c->host_mem_bytes_per_s, NULL,
                         where, err));
    int nv = 0; /* optional: written only for clusters with NVMe */
    TRY(ap_json_get_real(o, "nvme_bytes", 0, 1e18, &c->nvme_bytes, &nv, where, err));
    TRY(ap_json_get_real(o, "nvme_read_bytes_per_s", 0, 1e15, &c->nvme_read_bytes_per_s, &nv,
                         where, err));
    TRY(ap_json_get_real(o, "nvme_write_bytes_per_s", 0, 1e15, &c->nvme_write_bytes_per_s, &nv,
                         where, err));
    TRY(ap_cluster_validate(c, where, err));
    return check_fingerprint(o, ap_cluster_fingerprint(c), same_version, where, warn, n, err);
}

/* The optional "hetero" object (build_hetero), validated like the flags. */
static ap_status read_hetero(const ap_json *o, const char *where, const ap_cluster *c, ap_plan *p,
                             ap_err *err) {
    ap_json *h = ap_json_get(o, "hetero");
    if (!h || ap_json_is_null(h)) return AP_OK;
    char w2[600], buf[32];
    snprintf(w2, sizeof w2, "%s.hetero", where);
    if (!ap_json_is_object(h))
        return ap_err_set(err, AP_ERR_INPUT, "%s: must be an object", w2);
    ap_plan_hetero *x = &p->hetero;
    ap_plan_hetero_init(x);
    ap_json *g = ap_json_get(h, "gemini"), *d = ap_json_get(h, "deepspeed");
    if (g && d) return ap_err_set(err, AP_ERR_INPUT, "%s: gemini or deepspeed, not both", w2);
    if (g) {
        snprintf(w2, sizeof w2, "%s.hetero.gemini", where);
        if (!ap_json_is_object(g)) return ap_err_set(err, AP_ERR_INPUT, "%s: must be an object", w2);
        TRY(ap_json_get_str(g, "placement_policy", buf, sizeof buf, NULL, w2, err));
        char what[640];
        snprintf(what, sizeof what, "%s: field 'placement_policy'", w2);
        TRY(ap_gemini_placement_parse(buf, what, &x->placement, err));
        TRY(ap_json_get_real(g, "shard_param_frac", -1e9, 1e9, &x->shard_param_frac, NULL, w2, err));
        TRY(ap_json_get_real(g, "offload_optim_frac", -1e9, 1e9, &x->offload_optim_frac, NULL, w2,
                             err));
        TRY(ap_json_get_real(g, "offload_param_frac", -1e9, 1e9, &x->offload_param_frac, NULL, w2,
                             err));
        TRY(ap_json_get_real(g, "warmup_non_model_data_ratio", -1e9, 1e9,
                             &x->warmup_non_model_data_ratio, NULL, w2, err));
        TRY(ap_json_get_real(g, "steady_cuda_cap_ratio", -1e9, 1e9, &x->steady_cuda_cap_ratio, NULL,
                             w2, err));
        TRY(ap_json_get_real(g, "gpu_margin_mem_ratio", -1e9, 1e9, &x->gpu_margin_mem_ratio, NULL,
                             w2, err));
        TRY(ap_json_get_bool(g, "pin_memory", &x->pin_memory, NULL, w2, err));
        TRY(ap_json_get_bool(g, "enable_async_reduce", &x->enable_async_reduce, NULL, w2, err));
        TRY(get_int(g, "max_prefetch", 0, 1024, &x->max_prefetch, w2, err));
        TRY(ap_json_get_real(g, "search_range_m", -1e9, 1e9, &x->search_range_m, NULL, w2, err));
        TRY(ap_json_get_real(g, "min_chunk_size_m", -1e9, 1e9, &x->min_chunk_size_m, NULL, w2, err));
        TRY(get_i64(g, "hidden_dim", 0, 1000000000, &x->hidden_dim, w2, err));
    } else if (d) {
        snprintf(w2, sizeof w2, "%s.hetero.deepspeed", where);
        if (!ap_json_is_object(d)) return ap_err_set(err, AP_ERR_INPUT, "%s: must be an object", w2);
        char what[640];
        TRY(ap_json_get_str(d, "offload_optimizer_device", buf, sizeof buf, NULL, w2, err));
        snprintf(what, sizeof what, "%s: field 'offload_optimizer_device'", w2);
        TRY(ap_offload_device_parse(buf, what, &x->ds_optimizer, err));
        TRY(ap_json_get_str(d, "offload_param_device", buf, sizeof buf, NULL, w2, err));
        snprintf(what, sizeof what, "%s: field 'offload_param_device'", w2);
        TRY(ap_offload_device_parse(buf, what, &x->ds_params, err));
        TRY(ap_json_get_bool(d, "optimizer_pin_memory", &x->ds_optimizer_pin, NULL, w2, err));
        TRY(ap_json_get_bool(d, "param_pin_memory", &x->ds_param_pin, NULL, w2, err));
        const int64_t big = (int64_t)1e13;
        TRY(get_i64(d, "param_buffer_count", 0, big, &x->ds_param_buffer_count, w2, err));
        TRY(get_i64(d, "param_buffer_size", 0, big, &x->ds_param_buffer_size, w2, err));
        TRY(get_i64(d, "max_in_cpu", 0, big, &x->ds_max_in_cpu, w2, err));
        TRY(get_i64(d, "optimizer_buffer_count", 0, big, &x->ds_optimizer_buffer_count, w2, err));
        TRY(get_i64(d, "sub_group_size", 0, big, &x->ds_sub_group_size, w2, err));
        TRY(get_i64(d, "reduce_bucket_size", 0, big, &x->ds_reduce_bucket_size, w2, err));
        TRY(get_i64(d, "prefetch_bucket_size", 0, big, &x->ds_prefetch_bucket_size, w2, err));
        TRY(get_i64(d, "param_persistence_threshold", 0, big, &x->ds_param_persistence_threshold,
                    w2, err));
        TRY(get_i64(d, "max_live_parameters", 0, big, &x->ds_max_live_parameters, w2, err));
        TRY(get_i64(d, "max_reuse_distance", 0, big, &x->ds_max_reuse_distance, w2, err));
    } else {
        return ap_err_set(err, AP_ERR_INPUT, "%s: needs 'gemini' or 'deepspeed'", w2);
    }
    snprintf(w2, sizeof w2, "%s.hetero", where);
    return ap_plan_hetero_validate(p, c, w2, err);
}

ap_status ap_planfile_hetero_from_json(const ap_json *plan_obj, const char *where,
                                       const ap_cluster *c, ap_plan *p, ap_err *err) {
    return read_hetero(plan_obj, where, c, p, err);
}

/* a * b * c * d, or -1 when it does not fit in int64 */
static int64_t product(int64_t a, int64_t b, int64_t c, int64_t d) {
    if ((double)a * (double)b * (double)c * (double)d > 9.0e18) return -1;
    return a * b * c * d;
}

/* The shape rules between fields: GPUs, batch, model chunks. */
static ap_status check_shape(const ap_plan *p, const ap_model *m, const ap_cluster *c,
                             const char *where, ap_err *err) {
    if (product(p->tp, p->pp, p->cp, p->dp) != c->gpus)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: tp x pp x cp x dp = %d x %d x %d x %d = %.0f, but the cluster has "
                          "%d GPUs", where, p->tp, p->pp, p->cp, p->dp,
                          (double)p->tp * p->pp * p->cp * p->dp, c->gpus);
    if (product(p->mbs, p->dp, p->grad_accum, 1) != p->gbs)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'gbs' = %lld must equal mbs x dp x grad_accum = %lld x %d x "
                          "%lld = %.0f", where, (long long)p->gbs, (long long)p->mbs, p->dp,
                          (long long)p->grad_accum, (double)p->mbs * p->dp * (double)p->grad_accum);
    int64_t nch = (int64_t)p->pp * p->vp;
    if (nch > AP_MAX_CHUNKS || nch > m->layers)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: pp x vp = %lld model chunks, more than the %lld layers (or the "
                          "limit %d)", where, (long long)nch, (long long)m->layers, AP_MAX_CHUNKS);
    if (p->recompute_layers > m->layers)
        return ap_err_set(err, AP_ERR_INPUT, "%s.recompute: field 'layers' = %d is more than the "
                          "model's %lld layers", where, p->recompute_layers, (long long)m->layers);
    return AP_OK;
}

/* The plan section: the scalar rows of the plan's field table, the shape rules, the stage
 * arrays (pp x vp entries each), then the optional placement. */
static ap_status read_plan(const ap_json *o, const char *where, const ap_model *m,
                           const ap_cluster *c, ap_plan *p, ap_err *err) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++)
        if (t[i].json && !(t[i].flags & AP_FIELD_ROOT) && t[i].kind != AP_FT_CHUNKS)
            TRY(ap_field_read_json(&t[i], o, p, where, err));
    TRY(check_shape(p, m, c, where, err));
    int nch = p->pp * p->vp;
    p->nchunks = nch;
    for (int i = 0; i < n; i++)
        if (t[i].json && t[i].kind == AP_FT_CHUNKS) TRY(ap_field_read_json(&t[i], o, p, where, err));
    for (int i = 0; i < nch; i++)
        if (p->stage_recompute[i] > m->layers)
            return ap_err_set(err, AP_ERR_INPUT, "%s.recompute: field 'per_stage'[%d] = %d is more "
                              "than the model's %lld layers", where, i, p->stage_recompute[i],
                              (long long)m->layers);
    int64_t sum = 0;
    for (int i = 0; i < nch; i++) sum += p->stage_layers[i];
    if (sum != m->layers)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: field 'stage_layers' sums to %lld layers, the model has %lld",
                          where, (long long)sum, (long long)m->layers);
    /* An explicit split is kept only when it differs from the uniform one or per-stage
     * recompute counts are given, so a uniform plan reads back exactly as it was written. */
    int uniform = 1, custom_rc = 0;
    p->nchunks = 0;
    for (int i = 0; i < nch; i++) {
        if (p->stage_layers[i] != ap_plan_chunk_layers(p, m->layers, i)) uniform = 0;
        if (p->stage_recompute[i] != -1) custom_rc = 1;
    }
    if (!uniform || custom_rc) p->nchunks = nch;
    return read_hetero(o, where, c, p, err);
}

/* ---- the estimate of plan.json ----------------------------------------------------------------
 * A reader that asks for plan.json's "estimate" gets one checked against the file (emit quotes
 * its step time and peak memory of capacity in the configs' headers and does not estimate
 * again: the numbers may come from a measured kernel profile this machine lacks). The numbers
 * must be possible (a step time above zero, a peak above zero, the capacity of the cluster's
 * GPU), and the plan the estimate was made for must be this file's plan, field by field where
 * the estimate has the field (older writers left some out). A reader that does not ask
 * (simulate, run) ignores the estimate. */

/* The member at dotted path `path` ("plan.offload.optimizer") of o, or NULL. */
static const ap_json *est_at(const ap_json *o, const char *path) {
    char key[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = ap_json_get(o, key);
        path += n + (path[n] == '.');
    }
    return o;
}

/* A number of the estimate that emit prints: absent is fine (the header says "?"); present, it
 * must be a finite number above zero. */
static ap_status est_positive(const char *file, const ap_json *est, const char *path,
                              const char *what, ap_err *err) {
    const ap_json *v = est_at(est, path);
    if (!v) return AP_OK;
    if (!ap_json_is_number(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be %s, got %s", file,
                          path, what, ap_json_type_name(v));
    double d = ap_json_number(v);
    if (!isfinite(d) || d <= 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be %s, got %g", file,
                          path, what, d);
    return AP_OK;
}

/* One field of the estimate's plan (the estimate's field table, planio.h) against the plan's
 * value in x (an estimate holding the file's plan). */
static ap_status est_plan_field(const char *file, const ap_json *est,
                                const ap_estimate_field *f, const ap_estimate *x,
                                const ap_model *m, const ap_cluster *c, ap_err *err) {
    const ap_json *v = est_at(est, f->path);
    if (!v) return AP_OK; /* not written by this file's writer */
    double want = ap_estimate_field_value(f, x);
    int is_enum = f->kind == AP_FIELD_TRAINER || f->kind == AP_FIELD_RECOMPUTE ||
                  f->kind == AP_FIELD_DTYPE || f->kind == AP_FIELD_ATTN_IMPL;
    const char *want_name = is_enum ? ap_estimate_field_name(f, (int)want) : NULL;
    char got[64] = "", plan[64] = "";
    int same;
    if (want_name) { /* trainer, recompute, dtype, attention kernel: by name */
        const char *s = ap_json_string(v);
        if (!ap_json_is_string(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be a string, got "
                              "%s", file, f->path, ap_json_type_name(v));
        same = !strcmp(s, want_name);
        /* the estimate records the kernel it priced: the plan's, or for "auto" the trainer's
           default (a simulated plan keeps "auto") */
        if (!same && f->kind == AP_FIELD_ATTN_IMPL)
            same = !strcmp(s, ap_attn_impl_name(ap_attn_default(&x->plan, m, &c->gpu)));
        snprintf(got, sizeof got, "'%.40s'", s);
        snprintf(plan, sizeof plan, "'%s'", want_name);
    } else if (f->kind == AP_FIELD_BOOL) {
        if (!ap_json_is_bool(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be true or false, "
                              "got %s", file, f->path, ap_json_type_name(v));
        same = ap_json_bool(v) == (want != 0);
        snprintf(got, sizeof got, "%s", ap_json_bool(v) ? "true" : "false");
        snprintf(plan, sizeof plan, "%s", want != 0 ? "true" : "false");
    } else {
        if (!ap_json_is_number(v))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' must be a number, got "
                              "%s", file, f->path, ap_json_type_name(v));
        double d = ap_json_number(v);
        /* the writer prints doubles that read back exactly; the slack is for hand-written
           fractions such as 0.1 */
        same = fabs(d - want) <= 1e-9 * fmax(1.0, fabs(want));
        snprintf(got, sizeof got, "%.10g", d);
        snprintf(plan, sizeof plan, "%.10g", want);
    }
    if (same) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.%s' is %s, the plan's is %s (the "
                      "estimate is of another plan)", file, f->path, got, plan);
}

/* The estimate's optional boolean plan.<key> (absent: false) against the plan's value. */
static ap_status same_bool(const ap_json *est, const char *key, int want, const char *file,
                           ap_err *err) {
    char path[48];
    snprintf(path, sizeof path, "plan.%s", key);
    const ap_json *v = est_at(est, path);
    if ((v && (!ap_json_is_bool(v) || ap_json_bool(v) != (want != 0))) || (!v && want))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.%s' is not the plan's %s "
                          "(the estimate is of another plan)", file, key, want ? "true" : "false");
    return AP_OK;
}

/* The members of the estimate's plan outside the field table: the split, FP8 weights and
 * recipe, the ZeRO group. (Not the label of a searched plan: the search labels a split that
 * only spreads the remainder of the layers as even, the plan file's reader as "uneven".) */
static ap_status est_plan_extras(const char *file, const ap_json *est, const ap_model *m,
                                 const ap_plan *p, ap_err *err) {
    const ap_json *sl = est_at(est, "plan.stage_layers");
    int nch = p->pp * p->vp;
    if (sl && (!ap_json_is_array(sl) || ap_json_size(sl) != nch))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.stage_layers' must list "
                          "the plan's pp x vp = %d layer counts", file, nch);
    for (int i = 0; sl && i < nch; i++) {
        const ap_json *v = ap_json_at(sl, i);
        int want = ap_plan_chunk_layers(p, m->layers, i);
        if (!ap_json_is_number(v) || ap_json_number(v) != want)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.stage_layers[%d]' is "
                              "not the plan's %d layers (the estimate is of another plan)", file,
                              i, want);
    }
    const ap_json *zg = est_at(est, "plan.zero_group"), *rc = est_at(est, "plan.fp8_recipe");
    ap_status st = same_bool(est, "fp8_params", p->fp8_params, file, err);
    if (st == AP_OK) st = same_bool(est, "cp_a2a", p->cp_a2a, file, err);
    if (st != AP_OK) return st;
    if (zg && (!ap_json_is_number(zg) || ap_json_number(zg) != p->zero_group))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.zero_group' is not the "
                          "plan's %d (the estimate is of another plan)", file, p->zero_group);
    const char *recipe = ap_fp8_recipe_name(ap_plan_fp8_recipe(p));
    if (rc && p->dtype == AP_DTYPE_FP8 &&
        (!ap_json_is_string(rc) || strcmp(ap_json_string(rc), recipe) != 0))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan.fp8_recipe' is not the "
                          "plan's '%s' (the estimate is of another plan)", file, recipe);
    return AP_OK;
}

/* The estimate of plan.json `file` (may be NULL: none) against its model, cluster and plan. */
static ap_status check_estimate(const char *file, const ap_json *est, const ap_model *m,
                                const ap_cluster *c, const ap_plan *p, ap_err *err) {
    if (!est) return AP_OK;
    ap_status st;
    if ((st = est_positive(file, est, "time.step_s", "a positive number of seconds", err)) !=
            AP_OK ||
        (st = est_positive(file, est, "memory.peak_bytes", "a positive number of bytes", err)) !=
            AP_OK)
        return st;
    const ap_json *cap = est_at(est, "memory.capacity_bytes");
    if (cap && (!ap_json_is_number(cap) || ap_json_number(cap) != c->gpu.mem_bytes))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.memory.capacity_bytes' is not "
                          "the %.0f bytes of the cluster's %s", file, c->gpu.mem_bytes,
                          c->gpu.name);
    const ap_json *ep = ap_json_get(est, "plan");
    if (!ep)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan' is missing (the plan the "
                          "estimate is of, as `autoplan estimate --json` writes it)", file);
    if (!ap_json_is_object(ep))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate.plan' must be an object, got %s",
                          file, ap_json_type_name(ep));
    ap_estimate *x = ap_calloc(1, sizeof *x);
    if (!x) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", file);
    x->plan = *p;
    st = AP_OK;
    for (int i = 0; st == AP_OK && i < ap_estimate_field_count(); i++) {
        const ap_estimate_field *f = ap_estimate_field_at(i);
        if (!strcmp(f->group, "plan") || !strcmp(f->group, "plan.offload"))
            st = est_plan_field(file, est, f, x, m, c, err);
    }
    ap_free(x);
    return st == AP_OK ? est_plan_extras(file, est, m, p, err) : st;
}

ap_status ap_planfile_from_json(const ap_json *root, const char *where, ap_model *m,
                                ap_cluster *c, ap_plan *p, ap_json **estimate_out, ap_err *err) {
    char w[560], warn[2][800] = {"", ""};
    if (estimate_out) *estimate_out = NULL;
    if (!ap_json_is_object(root))
        return ap_err_set(err, AP_ERR_INPUT, "%s: plan file must be a JSON object, got %s", where,
                          ap_json_type_name(root));
    /* another autoplan file (a `db export`, a profile) names its format: say what it is */
    const ap_json *fmt = ap_json_get(root, "format");
    if (fmt && ap_json_is_string(fmt) && !ap_json_get(root, "schema_version")) {
        char shown[64];
        return ap_err_set(err, AP_ERR_INPUT, "%s: format '%s', not a plan file (plan.json, as "
                          "`autoplan plan --out DIR` writes it)", where,
                          ap_text_line(shown, sizeof shown, ap_json_string(fmt), 40));
    }
    TRY(check_version(root, where, err));
    char ver[64];
    TRY(ap_json_get_str(root, "autoplan_version", ver, sizeof ver, NULL, where, err));
    int same = strcmp(ver, AP_VERSION) == 0;

    ap_json *jm, *jc, *jp;
    TRY(get_obj(root, "model", where, &jm, err));
    snprintf(w, sizeof w, "%s: model", where);
    TRY(read_model(jm, w, same, m, warn[0], sizeof warn[0], err));
    TRY(get_obj(root, "cluster", where, &jc, err));
    snprintf(w, sizeof w, "%s: cluster", where);
    TRY(read_cluster(jc, w, same, c, warn[1], sizeof warn[1], err));

    ap_plan_init(p);
    int nf;
    const ap_field *t = ap_plan_fields(&nf);
    for (int i = 0; i < nf; i++)
        if (t[i].flags & AP_FIELD_ROOT) TRY(ap_field_read_json(&t[i], root, p, where, err));
    TRY(get_obj(root, "plan", where, &jp, err));
    snprintf(w, sizeof w, "%s: plan", where);
    TRY(read_plan(jp, w, m, c, p, err));
    /* the rules the estimator applies: a file that reads is a plan it accepts */
    ap_status st = ap_plan_check(p, m, c, 1, err);
    if (st != AP_OK) {
        ap_err_prefix(err, "%s: plan", where);
        return st == AP_ERR_INFEASIBLE ? AP_ERR_INPUT : st;
    }
    /* and the request's: no sequence longer than a learned position table (request.c) */
    if (!ap_model_positions_hold(m, p->seq))
        return ap_err_set(err, AP_ERR_INPUT, "%s: plan: field 'seq' = %lld exceeds the %lld "
                          "learned positions of the model", where, (long long)p->seq,
                          (long long)m->learned_pos);

    ap_json *est = ap_json_get(root, "estimate");
    if (est && !ap_json_is_null(est) && !ap_json_is_object(est))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'estimate' must be an object, got %s",
                          where, ap_json_type_name(est));
    if (estimate_out && est && ap_json_is_object(est)) {
        TRY(check_estimate(where, est, m, c, p, err));
        *estimate_out = ap_json_duplicate(est);
        if (!*estimate_out) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", where);
    }
    for (int i = 0; i < 2; i++)
        if (warn[i][0]) ap_log(AP_LOG_WARN, "%s", warn[i]);
    return AP_OK;
}

ap_status ap_planfile_read(const char *path, ap_model *m, ap_cluster *c, ap_plan *p,
                           ap_json **estimate_out, ap_err *err) {
    if (estimate_out) *estimate_out = NULL;
    ap_json *root = NULL;
    ap_status st = ap_json_decode_file(path, &root, err);
    if (st != AP_OK) return st;
    st = ap_planfile_from_json(root, path, m, c, p, estimate_out, err);
    ap_json_free(root);
    return st;
}
