/*
 * profile.c - the kernel-profile row format (include/autoplan/profile.h, docs/profiles.md):
 * the vocabulary of operations and shape keys, validation of a row against it, the FLOP and
 * bus-bandwidth conventions that turn a time into a rate, and the growable row set.
 *
 * The vocabulary is one table (ops[] below): each operation lists its shape keys in order, each
 * key either a non-negative integer or one identifier from a fixed list, and the dtypes the
 * operation takes. Everything that reads or writes profiles (the built-in published tables, the
 * profiler, the store, JSON import) validates through ap_profile_row_check, so a consumer can
 * read a key without re-checking it.
 *
 * What it does not do: look figures up or interpolate between rows (the cost model's job), or
 * store rows (db/).
 */
#include "autoplan/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/hw.h"

/* ---- the vocabulary --------------------------------------------------------------------- */

typedef struct {
    const char *name;
    const char *ids; /* NULL: a non-negative integer; else "a|b|c": one of these identifiers */
    int64_t min;     /* least integer value */
} key_spec;

#define MAX_KEYS 8
#define DT_COMPUTE "fp32|tf32|fp16|bf16|fp8"
#define DT_ANY "none|fp32|tf32|fp16|bf16|fp8"

typedef enum { RATE_NONE = 0, RATE_FLOPS, RATE_BYTES, RATE_BUS } rate_kind;

typedef struct {
    const char *op;
    const char *dtypes;
    rate_kind rate;
    int nkeys;
    key_spec keys[MAX_KEYS];
} op_spec;

/* Attention implementations as trainers run them: unfused (scores materialised), FlashAttention
 * 1 (Dao et al. 2022), its Triton port, FlashAttention-2 (Dao 2023), FlashAttention-3 (Shah et
 * al. 2024), cuDNN fused attention (Transformer Engine), PyTorch SDPA's memory-efficient
 * kernel (xFormers), FlexAttention. */
#define ATTN_IMPLS "unfused|fa1|triton|fa2|fa3|cudnn|sdpa_efficient|flex"
#define ATTN_KEYS                                                                           \
    {{"impl", ATTN_IMPLS, 0}, {"b", NULL, 1}, {"s", NULL, 1}, {"h", NULL, 1},              \
     {"kvh", NULL, 1}, {"d", NULL, 1}, {"causal", "0|1", 0}, {"window", NULL, 0}}
#define COLL_LEVELS "nvlink|pcie|ib|roce|ethernet|xgmi"
#define COLL_KEYS(algos)                                                                    \
    {{"ranks", NULL, 2}, {"level", COLL_LEVELS, 0}, {"algo", algos, 0}, {"bytes", NULL, 1}}
#define COLL_ALGOS "ring|tree|nvls|collnet|pat|default"

static const op_spec ops[] = {
    {"gemm", DT_COMPUTE, RATE_FLOPS, 3, {{"m", NULL, 1}, {"n", NULL, 1}, {"k", NULL, 1}}},
    {"attn_fwd", "fp16|bf16|fp8", RATE_FLOPS, 8, ATTN_KEYS},
    {"attn_bwd", "fp16|bf16|fp8", RATE_FLOPS, 8, ATTN_KEYS},
    /* forward + backward in one figure, as the FlashAttention-2 paper plots them */
    {"attn_fwd_bwd", "fp16|bf16|fp8", RATE_FLOPS, 8, ATTN_KEYS},
    {"membound", DT_ANY, RATE_BYTES, 2,
     {{"kind", "copy|elementwise|reduction|norm|softmax|cross_entropy|adam|rope|activation", 0},
      {"bytes", NULL, 1}}},
    {"memcpy", "none", RATE_BYTES, 3,
     {{"dir", "h2d|d2h|d2d|p2p", 0}, {"mem", "pinned|pageable|device", 0}, {"bytes", NULL, 1}}},
    {"allreduce", DT_ANY, RATE_BUS, 4, COLL_KEYS(COLL_ALGOS)},
    {"allgather", DT_ANY, RATE_BUS, 4, COLL_KEYS(COLL_ALGOS)},
    {"reducescatter", DT_ANY, RATE_BUS, 4, COLL_KEYS(COLL_ALGOS)},
    {"alltoall", DT_ANY, RATE_BUS, 4, COLL_KEYS(COLL_ALGOS)},
    {"sendrecv", DT_ANY, RATE_BUS, 3,
     {{"ranks", NULL, 2}, {"level", COLL_LEVELS, 0}, {"bytes", NULL, 1}}},
    {"launch", "none", RATE_NONE, 1, {{"kind", "kernel|graph_node", 0}}},
    {"host_adam", "fp32|bf16|fp16", RATE_BYTES, 2, {{"params", NULL, 1}, {"threads", NULL, 1}}},
    {"host_membw", "none", RATE_BYTES, 2,
     {{"kind", "copy|scale|add|triad", 0}, {"bytes", NULL, 1}}},
    {"device_mem", "none", RATE_NONE, 1,
     {{"kind", "context|cublas_workspace|cudnn_workspace|nccl_buffers", 0}}},
};
#define NOPS ((int)(sizeof ops / sizeof ops[0]))

/* Bytes one host Adam step touches per parameter: reads fp32 parameter, gradient, m and v
 * (16 B), writes parameter, m and v (12 B) (ZeRO-Offload's CPU Adam, Ren et al. 2021, Sec. 5.1
 * keeps all four fp32 tensors on the host). */
#define HOST_ADAM_BYTES_PER_PARAM 28.0

int ap_profile_op_count(void) { return NOPS; }
const char *ap_profile_op_name(int i) { return i >= 0 && i < NOPS ? ops[i].op : NULL; }

const char *ap_profile_op_keys(int i) {
    static char buf[NOPS][96];
    if (i < 0 || i >= NOPS) return NULL;
    if (!buf[i][0]) {
        size_t at = 0;
        for (int k = 0; k < ops[i].nkeys; k++) {
            size_t l = strlen(ops[i].keys[k].name);
            if (at + l + 2 >= sizeof buf[i]) break;
            if (k) buf[i][at++] = ',';
            memcpy(buf[i] + at, ops[i].keys[k].name, l);
            at += l;
        }
        buf[i][at] = '\0';
    }
    return buf[i];
}

static const op_spec *find_op(const char *op) {
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(ops[i].op, op)) return &ops[i];
    return NULL;
}

/* Is `word` (len bytes) one of the '|'-separated identifiers in `list`? */
static int in_list(const char *list, const char *word, size_t len) {
    const char *p = list;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == len && !strncmp(p, word, len)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* ---- shapes --------------------------------------------------------------------------------- */

/* Find `key` in "k=v,k=v": pointer to its value and the value's length, or NULL. */
static const char *shape_find(const char *shape, const char *key, size_t *vlen) {
    size_t kl = strlen(key);
    const char *p = shape;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (eq && (size_t)(eq - p) == kl && !strncmp(p, key, kl)) {
            *vlen = (size_t)(end - eq - 1);
            return eq + 1;
        }
        p = comma ? comma + 1 : NULL;
    }
    return NULL;
}

/* Parse a plain decimal integer of exactly len bytes (no sign, no spaces), at most 18 digits. */
static int parse_uint(const char *s, size_t len, int64_t *out) {
    if (len == 0 || len > 18) return 0;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

int ap_profile_shape_num(const char *shape, const char *key, double *out) {
    size_t vl;
    int64_t v;
    const char *val = shape ? shape_find(shape, key, &vl) : NULL;
    if (!val || !parse_uint(val, vl, &v)) return 0;
    *out = (double)v;
    return 1;
}

int ap_profile_shape_text(const char *shape, const char *key, char *buf, size_t n) {
    size_t vl;
    const char *val = shape ? shape_find(shape, key, &vl) : NULL;
    if (!val || n == 0) return 0;
    if (vl >= n) vl = n - 1;
    memcpy(buf, val, vl);
    buf[vl] = '\0';
    return 1;
}

/* The shape must be exactly the op's keys, in order, each with a legal value. */
static ap_status check_shape(const op_spec *o, const char *shape, ap_err *err) {
    const char *p = shape;
    for (int k = 0; k < o->nkeys; k++) {
        const key_spec *ks = &o->keys[k];
        size_t kl = strlen(ks->name);
        if (!*p)
            return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': missing key '%s' (keys: %s)",
                              o->op, shape, ks->name, ap_profile_op_keys((int)(o - ops)));
        if (strncmp(p, ks->name, kl) || p[kl] != '=')
            return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': expected key '%s' at "
                              "position %d (keys, in order: %s)", o->op, shape, ks->name, k + 1,
                              ap_profile_op_keys((int)(o - ops)));
        const char *v = p + kl + 1;
        const char *comma = strchr(v, ',');
        size_t vl = comma ? (size_t)(comma - v) : strlen(v);
        if (ks->ids) {
            if (!in_list(ks->ids, v, vl))
                return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': %s must be one of %s",
                                  o->op, shape, ks->name, ks->ids);
        } else {
            int64_t x;
            if (!parse_uint(v, vl, &x) || x < ks->min)
                return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': %s must be an integer "
                                  ">= %lld", o->op, shape, ks->name, (long long)ks->min);
        }
        p = v + vl;
        if (k + 1 < o->nkeys) {
            if (*p != ',')
                return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': missing key '%s' "
                                  "(keys: %s)", o->op, shape, o->keys[k + 1].name,
                                  ap_profile_op_keys((int)(o - ops)));
            p++;
        }
    }
    if (*p)
        return ap_err_set(err, AP_ERR_INPUT, "op '%s' shape '%s': unexpected text after the last "
                          "key (keys: %s)", o->op, shape, ap_profile_op_keys((int)(o - ops)));
    return AP_OK;
}

/* ---- rows ------------------------------------------------------------------------------------ */

static int text_ok(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }
static int num_ok(double x) { return isfinite(x) && x >= 0; }

ap_status ap_profile_row_check(const ap_profile_row *r, ap_err *err) {
#define TEXT(f)                                                                               \
    if (!text_ok(r->f, sizeof r->f))                                                          \
        return ap_err_set(err, AP_ERR_INPUT, "%s: longer than %zu bytes", #f, sizeof r->f - 1);
    TEXT(gpu) TEXT(device_name) TEXT(pci_id) TEXT(driver_version) TEXT(cuda_version)
    TEXT(cublas_version) TEXT(nccl_version) TEXT(mig_mode) TEXT(host) TEXT(op) TEXT(shape)
    TEXT(dtype) TEXT(source_run) TEXT(source)
#undef TEXT
    if (!r->gpu[0]) return ap_err_set(err, AP_ERR_INPUT, "gpu: must not be empty");
    const op_spec *o = find_op(r->op);
    if (!o) {
        char known[512];
        size_t at = 0;
        for (int i = 0; i < NOPS && at + 34 < sizeof known; i++)
            at += (size_t)snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "", ops[i].op);
        return ap_err_set(err, AP_ERR_INPUT, "op: unknown operation '%s' (known: %s)", r->op, known);
    }
    ap_status st = check_shape(o, r->shape, err);
    if (st != AP_OK) return st;
    if (!in_list(o->dtypes, r->dtype, strlen(r->dtype)))
        return ap_err_set(err, AP_ERR_INPUT, "op '%s' dtype '%s': must be one of %s", r->op,
                          r->dtype, o->dtypes);
#define NUM(f)                                                                                \
    if (!num_ok(r->f))                                                                        \
        return ap_err_set(err, AP_ERR_INPUT, "%s: must be a finite number >= 0, got %g", #f, r->f);
    NUM(mem_bytes) NUM(sm_clock_mhz) NUM(mem_clock_mhz) NUM(power_limit_w) NUM(time_s)
    NUM(flops_per_s) NUM(bytes_per_s) NUM(bytes) NUM(spread)
#undef NUM
    if (!strcmp(r->op, "device_mem")) {
        if (!(r->bytes > 0))
            return ap_err_set(err, AP_ERR_INPUT, "op 'device_mem' bytes: must be > 0");
    } else if (!(r->time_s > 0)) {
        return ap_err_set(err, AP_ERR_INPUT, "op '%s' time_s: must be > 0", r->op);
    }
    /* physics: no kernel computes faster than the GPU's fastest tensor-core peak (catalog
     * GPUs; 10% over it for boost clocks), and a stated rate is the one its time gives */
    if (o->rate == RATE_FLOPS && r->time_s > 0) {
        double rate = ap_profile_row_flops(r) / r->time_s;
        const ap_gpu *g = ap_gpu_find(r->gpu);
        double peak = 0;
        for (int d = 0; g && d < AP_DTYPE_COUNT; d++) peak = fmax(peak, g->peak_flops[d]);
        if (peak > 0 && rate > 1.1 * peak)
            return ap_err_set(err, AP_ERR_INPUT, "op '%s' time_s: %g s gives %.3g FLOP/s, over "
                              "%s's peak %.3g", r->op, r->time_s, rate, r->gpu, peak);
        if (r->flops_per_s > 0 && fabs(r->flops_per_s - rate) > 0.01 * rate)
            return ap_err_set(err, AP_ERR_INPUT, "op '%s' flops_per_s: %g is not the %.4g its "
                              "shape and time_s give", r->op, r->flops_per_s, rate);
    }
    if (r->samples < 1)
        return ap_err_set(err, AP_ERR_INPUT, "samples: must be >= 1, got %lld",
                          (long long)r->samples);
    if (r->sm_count < 0) return ap_err_set(err, AP_ERR_INPUT, "sm_count: must be >= 0");
    if (r->created_at < 0) return ap_err_set(err, AP_ERR_INPUT, "created_at: must be >= 0");
    return AP_OK;
}

/* Attended query-key pairs per sequence and head (FlashAttention-2 paper's counting, Dao 2023
 * Sec. 4.1: causal halves the s^2 pairs). A sliding window of W keys: causal, s W - W^2/2 when
 * W < s (the first W queries see a triangle); without causality, W on each side, s min(s, 2W). */
static double attn_pairs(double s, int causal, double w) {
    if (causal) return w > 0 && w < s ? s * w - 0.5 * w * w : 0.5 * s * s;
    return w > 0 ? s * fmin(s, 2.0 * w) : s * s;
}

double ap_profile_row_flops(const ap_profile_row *r) {
    double m, n, k;
    if (!strcmp(r->op, "gemm") && ap_profile_shape_num(r->shape, "m", &m) &&
        ap_profile_shape_num(r->shape, "n", &n) && ap_profile_shape_num(r->shape, "k", &k))
        return 2.0 * m * n * k;
    int fwd = !strcmp(r->op, "attn_fwd"), bwd = !strcmp(r->op, "attn_bwd");
    int both = !strcmp(r->op, "attn_fwd_bwd");
    if (!fwd && !bwd && !both) return 0;
    double b, s, h, d, causal, w;
    if (!ap_profile_shape_num(r->shape, "b", &b) || !ap_profile_shape_num(r->shape, "s", &s) ||
        !ap_profile_shape_num(r->shape, "h", &h) || !ap_profile_shape_num(r->shape, "d", &d) ||
        !ap_profile_shape_num(r->shape, "causal", &causal) ||
        !ap_profile_shape_num(r->shape, "window", &w))
        return 0;
    /* forward: QK^T and PV, 2 FLOPs per multiply-add each: 4 b h d P (Dao 2023, Sec. 4.1);
     * backward: 2.5 x forward (five matmuls instead of two, same paper); both: 3.5 x */
    double f = 4.0 * b * h * d * attn_pairs(s, causal != 0, w);
    return bwd ? 2.5 * f : both ? 3.5 * f : f;
}

double ap_profile_busbw_factor(const char *op, double n) {
    /* nccl-tests doc/PERFORMANCE.md: bus bandwidth = algorithm bandwidth x this factor */
    if (n < 1) return 0;
    if (!strcmp(op, "allreduce")) return 2.0 * (n - 1) / n;
    if (!strcmp(op, "allgather") || !strcmp(op, "reducescatter") || !strcmp(op, "alltoall"))
        return (n - 1) / n;
    if (!strcmp(op, "sendrecv")) return 1.0;
    return 0;
}

void ap_profile_row_derive(ap_profile_row *r) {
    const op_spec *o = find_op(r->op);
    if (!o || !(r->time_s > 0)) return;
    double shape_bytes = 0, ranks = 0, params = 0;
    ap_profile_shape_num(r->shape, "bytes", &shape_bytes);
    if (!strcmp(r->op, "host_adam") && ap_profile_shape_num(r->shape, "params", &params))
        shape_bytes = HOST_ADAM_BYTES_PER_PARAM * params;
    if (r->bytes == 0 && shape_bytes > 0) r->bytes = shape_bytes;
    switch (o->rate) {
    case RATE_FLOPS:
        if (r->flops_per_s == 0) r->flops_per_s = ap_profile_row_flops(r) / r->time_s;
        break;
    case RATE_BYTES:
        if (r->bytes_per_s == 0 && r->bytes > 0) r->bytes_per_s = r->bytes / r->time_s;
        break;
    case RATE_BUS:
        if (r->bytes_per_s == 0 && r->bytes > 0 && ap_profile_shape_num(r->shape, "ranks", &ranks))
            r->bytes_per_s = r->bytes / r->time_s * ap_profile_busbw_factor(r->op, ranks);
        break;
    case RATE_NONE:
        break;
    }
}

/* ---- the set ------------------------------------------------------------------------------------ */

void ap_profile_init(ap_profile *p) { memset(p, 0, sizeof *p); }

void ap_profile_free(ap_profile *p) {
    if (!p) return;
    ap_free(p->rows);
    memset(p, 0, sizeof *p);
}

ap_status ap_profile_add(ap_profile *p, const ap_profile_row *r, ap_err *err) {
    ap_status st = ap_profile_row_check(r, err);
    if (st != AP_OK) return st;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        ap_profile_row *nr = ap_realloc(p->rows, cap * sizeof *nr);
        if (!nr) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu profile rows", cap);
        p->rows = nr;
        p->cap = cap;
    }
    p->rows[p->n] = *r;
    ap_profile_row_derive(&p->rows[p->n]);
    p->n++;
    return AP_OK;
}
