/*
 * cluster.c - the cluster a plan runs on: built from a catalog GPU and its reference system
 * (ap_cluster_from_gpu), or read from a cluster file (ap_cluster_parse/ap_cluster_load), then
 * checked for consistency (ap_cluster_validate) and fingerprinted for plan.json and caches.
 * Also the dtype and link-kind names.
 *
 * A cluster file is one JSON object (format in docs/hardware.md). Sizes and bandwidths are
 * strings with units parsed by base/units.c; GPU counts are integers. Unknown fields are
 * refused with the closest known one, so a typo never silently falls back to a default. One GPU
 * type per cluster: a "nodes" list or a "gpu" array naming two types is refused ("mixed GPU
 * types are not supported yet").
 *
 * Not here: what the links cost (the communication model reads these numbers).
 */
#include "autoplan/hw.h"
#include "autoplan/json.h"
#include "autoplan/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Upper bounds that catch absurd input (typos in exponents) without limiting real systems. */
#define MAX_GPUS (1 << 20)
#define MAX_GPUS_PER_NODE 1024
#define MAX_CPU_CORES 65536
#define MAX_CLUSTER_FILE_BYTES ((size_t)1 << 20)

static const char *dtype_names[AP_DTYPE_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8"};

const char *ap_dtype_name(ap_dtype d) {
    return (d >= 0 && d < AP_DTYPE_COUNT) ? dtype_names[d] : "unknown";
}

ap_status ap_dtype_parse(const char *s, ap_dtype *out) {
    static const struct {
        const char *name;
        ap_dtype d;
    } t[] = {{"fp32", AP_DTYPE_FP32},     {"float32", AP_DTYPE_FP32}, {"tf32", AP_DTYPE_TF32},
             {"fp16", AP_DTYPE_FP16},     {"float16", AP_DTYPE_FP16}, {"half", AP_DTYPE_FP16},
             {"bf16", AP_DTYPE_BF16},     {"bfloat16", AP_DTYPE_BF16}, {"fp8", AP_DTYPE_FP8},
             {"float8", AP_DTYPE_FP8}};
    if (!s) return AP_ERR_INPUT;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcasecmp(s, t[i].name) == 0) {
            *out = t[i].d;
            return AP_OK;
        }
    return AP_ERR_INPUT;
}

const char *ap_link_name(ap_link_kind k) {
    switch (k) {
    case AP_LINK_NONE: return "none";
    case AP_LINK_PCIE: return "pcie";
    case AP_LINK_NVLINK: return "nvlink";
    case AP_LINK_NVLINK_BRIDGE: return "nvlink-bridge";
    case AP_LINK_XGMI: return "xgmi";
    case AP_LINK_SHM: return "shm";
    }
    return "unknown";
}

/* GPUs that share the fast link by default: pairs over a bridge (when pairs tile the node), else
 * the whole node: NVSwitch, xGMI, PCIe P2P, and for cards without any peer link the node's GPUs
 * talking through host PCIe (the cost model uses pcie_bw there; link_bw is 0). */
static int default_domain(ap_link_kind k, int gpus_per_node) {
    if (k == AP_LINK_NVLINK_BRIDGE) return gpus_per_node % 2 == 0 ? 2 : 1;
    return gpus_per_node;
}

void ap_cluster_from_gpu(const ap_gpu *gpu, int gpus, ap_cluster *out) {
    memset(out, 0, sizeof *out);
    out->gpus = gpus;
    if (!gpu) return; /* a zeroed cluster, refused by ap_cluster_validate */
    out->gpu = *gpu;
    snprintf(out->name, sizeof out->name, "%s x%d", gpu->name, gpus);
    int gpn = gpu->ref_gpus_per_node > 0 ? gpu->ref_gpus_per_node : 1;
    if (gpus >= 1 && gpus < gpn) gpn = gpus; /* part of one node */
    out->gpus_per_node = gpn;
    out->nvlink_domain = default_domain(gpu->link, gpn);
    out->link_bytes_per_s = gpu->link_bytes_per_s;
    out->net_bytes_per_s = gpu->ref_net_bytes_per_s;
    out->pcie_bytes_per_s = gpu->pcie_bytes_per_s;
    int sw = gpu->ref_gpus_per_pcie_switch > 0 ? gpu->ref_gpus_per_pcie_switch : 1;
    out->gpus_per_pcie_switch = sw < gpn ? sw : gpn;
    out->cpu_mem_bytes = gpu->ref_cpu_mem_bytes;
    out->cpu_cores = gpu->ref_cpu_cores;
    out->host_mem_bytes_per_s = gpu->ref_host_mem_bytes_per_s;
}

void ap_cluster_set_gpus_per_node(ap_cluster *c, int gpus_per_node) {
    int gpn = gpus_per_node;
    if (c->gpus >= 1 && c->gpus < gpn) gpn = c->gpus;
    c->gpus_per_node = gpn;
    c->nvlink_domain = default_domain(c->gpu.link, gpn);
    int sw = c->gpu.ref_gpus_per_pcie_switch > 0 ? c->gpu.ref_gpus_per_pcie_switch : 1;
    c->gpus_per_pcie_switch = sw < gpn ? sw : gpn;
}

int ap_gpu_gpus_per_host(const ap_gpu *g) {
    return g->ref_gpus_per_host > 0 ? g->ref_gpus_per_host : g->ref_gpus_per_node;
}

int ap_cluster_gpus_per_host(const ap_cluster *c) {
    int n = c->gpus_per_node;
    int h = ap_gpu_gpus_per_host(&c->gpu);
    if (h > 0 && h < n && n % h == 0) n = h;
    return c->gpus < n ? c->gpus : n;
}

static int pos_finite(double v, double hi) { return isfinite(v) && v > 0 && v <= hi; }

ap_status ap_cluster_validate(const ap_cluster *c, const char *where, ap_err *err) {
    const ap_gpu *g = &c->gpu;
    if (!where) where = "cluster";
    if (!g->name[0]) return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': no GPU type given", where);
    if (!pos_finite(g->mem_bytes, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu_mem': GPU memory must be positive "
                          "and below 1 PB, got %g bytes", where, g->mem_bytes);
    /* the cpu device (the runtime's ranks) computes in fp32 only */
    int cpu = !strcmp(g->vendor, "cpu") && g->peak_flops[AP_DTYPE_FP32] > 0;
    if (!(g->peak_flops[AP_DTYPE_BF16] > 0 || g->peak_flops[AP_DTYPE_FP16] > 0 || cpu))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': %s has no fp16 or bf16 peak", where,
                          g->name);
    for (int d = 0; d < AP_DTYPE_COUNT; d++)
        if (!isfinite(g->peak_flops[d]) || g->peak_flops[d] < 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': %s peak must be >= 0", where,
                              ap_dtype_name((ap_dtype)d));
    if (!pos_finite(g->hbm_bytes_per_s, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': memory bandwidth must be positive",
                          where);
    if (c->gpus < 1 || c->gpus > MAX_GPUS)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus': must be in [1, %d], got %d", where,
                          MAX_GPUS, c->gpus);
    if (c->gpus_per_node < 1 || c->gpus_per_node > MAX_GPUS_PER_NODE)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus_per_node': must be in [1, %d], got "
                          "%d", where, MAX_GPUS_PER_NODE, c->gpus_per_node);
    if (c->gpus > c->gpus_per_node && c->gpus % c->gpus_per_node != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus': %d GPUs do not fill whole nodes of "
                          "%d (gpus_per_node); use a multiple of %d", where, c->gpus,
                          c->gpus_per_node, c->gpus_per_node);
    /* Shape checks use the node as described even when fewer GPUs than a node are used (a
     * DGX file run with --gpus 4): the domain and switch sharing are properties of the node. */
    int gpn = c->gpus_per_node;
    if (c->nvlink_domain < 1 || c->nvlink_domain > gpn)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvlink_domain': must be in [1, %d] (the "
                          "GPUs of one node), got %d", where, gpn, c->nvlink_domain);
    if (gpn % c->nvlink_domain != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvlink_domain': %d does not divide the "
                          "%d GPUs of a node", where, c->nvlink_domain, gpn);
    if (g->link == AP_LINK_NVLINK_BRIDGE && c->nvlink_domain > 2)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvlink_domain': %s NVLink bridges join "
                          "pairs only, so the domain must be 1 or 2, got %d", where, g->name,
                          c->nvlink_domain);
    if (g->link != AP_LINK_NONE && c->nvlink_domain > 1 && !pos_finite(c->link_bytes_per_s, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'link_bw': must be positive when "
                          "nvlink_domain > 1 (%s has a %s peer link)", where, g->name,
                          ap_link_name(g->link));
    if (!isfinite(c->link_bytes_per_s) || c->link_bytes_per_s < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'link_bw': must not be negative", where);
    int nodes = (c->gpus + c->gpus_per_node - 1) / c->gpus_per_node;
    if (nodes > 1 && !pos_finite(c->net_bytes_per_s, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'network_bw': must be positive for a "
                          "cluster of %d nodes", where, nodes);
    if (!isfinite(c->net_bytes_per_s) || c->net_bytes_per_s < 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'network_bw': must not be negative", where);
    if (!pos_finite(c->pcie_bytes_per_s, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'pcie_bw': must be positive", where);
    if (c->gpus_per_pcie_switch < 1 || c->gpus_per_pcie_switch > gpn)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus_per_pcie_switch': must be in [1, "
                          "%d], got %d", where, gpn, c->gpus_per_pcie_switch);
    if (!pos_finite(c->cpu_mem_bytes, 1e18))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'cpu_mem': host memory per node must be "
                          "positive", where);
    if (c->cpu_cores < 1 || c->cpu_cores > MAX_CPU_CORES)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'cpu_cores': must be in [1, %d], got %d",
                          where, MAX_CPU_CORES, c->cpu_cores);
    if (!pos_finite(c->host_mem_bytes_per_s, 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'host_mem_bw': must be positive", where);
    /* NVMe (issue 18): all three or none; a bandwidth without a capacity is as incomplete as a
       capacity without one (ZeRO-Infinity could neither size nor time the swap) */
    if (!isfinite(c->nvme_bytes) || c->nvme_bytes < 0 || c->nvme_bytes > 1e18)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvme': NVMe capacity must be in [0, 1 EB]",
                          where);
    if (!isfinite(c->nvme_read_bytes_per_s) || c->nvme_read_bytes_per_s < 0 ||
        c->nvme_read_bytes_per_s > 1e15 || !isfinite(c->nvme_write_bytes_per_s) ||
        c->nvme_write_bytes_per_s < 0 || c->nvme_write_bytes_per_s > 1e15)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvme_bw': NVMe bandwidth must be "
                          "positive and below 1 PB/s", where);
    if (c->nvme_bytes > 0 && (c->nvme_read_bytes_per_s <= 0 || c->nvme_write_bytes_per_s <= 0))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvme_bw': NVMe capacity given without "
                          "its %s bandwidth (nvme_bw, or nvme_read_bw and nvme_write_bw)", where,
                          c->nvme_read_bytes_per_s <= 0 ? "read" : "write");
    if (c->nvme_bytes <= 0 && (c->nvme_read_bytes_per_s > 0 || c->nvme_write_bytes_per_s > 0))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nvme': NVMe bandwidth given without a "
                          "capacity (nvme, e.g. \"3.84TB\")", where);
    /* below 1 MB/s a bandwidth is a unit typo, not a link (and gives step times of 1e300 s) */
    const struct { const char *field; double v; } bw[] = {
        {"link_bw", c->link_bytes_per_s}, {"network_bw", c->net_bytes_per_s},
        {"pcie_bw", c->pcie_bytes_per_s}, {"host_mem_bw", c->host_mem_bytes_per_s}};
    for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++)
        if (bw[i].v > 0 && bw[i].v < AP_MIN_BYTES_PER_S)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s': %.3g bytes/s is below 1 MB/s",
                              where, bw[i].field, bw[i].v);
    return AP_OK;
}

/* ---- cluster files ----------------------------------------------------------------------- */

static const char *const known_fields[] = {
    "name",       "gpu",         "gpus",         "gpus_per_node", "nvlink_domain",
    "network_bw", "link_bw",     "pcie_bw",      "cpu_mem",       "gpu_mem",
    "host_mem_bw", "gpus_per_pcie_switch", "cpu_cores", "nodes",  "comment",
    "description", "nvme",        "nvme_bw",      "nvme_read_bw",  "nvme_write_bw"};

static ap_status check_fields(const ap_json *root, const char *where, ap_err *err) {
    for (ap_json *m = ap_json_first(root); m; m = ap_json_next(m)) {
        const char *k = ap_json_key(m);
        if (!k || k[0] == '_') continue; /* "_note": free-form comments */
        int ok;
        const char *best = ap_closest_word(k, known_fields,
                                           sizeof known_fields / sizeof known_fields[0], &ok);
        if (!ok)
            return ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%.64s' (did you mean '%s'? "
                              "docs/hardware.md lists the fields)", where, k, best);
    }
    return AP_OK;
}

/* A "nodes" entry has only a GPU type and count. The cluster-wide fields (network_bw, cpu_mem,
 * ...) are read from the top level alone, so one given per node would be silently ignored: it
 * is refused with a pointer to the top level, and any other key like a top-level typo. */
static ap_status check_node_fields(const ap_json *node, const char *w, ap_err *err) {
    static const char *const node_fields[] = {"gpu", "gpus"};
    for (ap_json *m = ap_json_first(node); m; m = ap_json_next(m)) {
        const char *k = ap_json_key(m);
        if (!k || k[0] == '_') continue; /* "_note": free-form comments, as at the top level */
        int ok, top;
        const char *best = ap_closest_word(k, node_fields, 2, &ok);
        if (ok) continue;
        ap_closest_word(k, known_fields, sizeof known_fields / sizeof known_fields[0], &top);
        if (top)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' is not supported per node; "
                              "give it at the top level of the cluster file (it applies to "
                              "every node)", w, k);
        return ap_err_set(err, AP_ERR_INPUT, "%s: unknown field '%.64s' (did you mean '%s'? a "
                          "node entry has only 'gpu' and 'gpus')", w, k, best);
    }
    return AP_OK;
}

/* A bandwidth or size field: a string with a unit. A bare JSON number is refused with a hint. */
static ap_status get_quantity(const ap_json *root, const char *key, int is_bw, double *out,
                              int *present, const char *where, ap_err *err) {
    ap_json *v = ap_json_get(root, key);
    *present = 0;
    if (!v || ap_json_is_null(v)) return AP_OK;
    char what[300];
    snprintf(what, sizeof what, "%s: field '%s'", where, key);
    if (ap_json_is_number(v)) {
        double n = ap_json_number(v);
        return is_bw ? ap_err_set(err, AP_ERR_INPUT, "%s: %g has no unit; write a string such as "
                                  "\"%gGb/s\" (bits) or \"%gGB/s\" (bytes)", what, n, n, n)
                     : ap_err_set(err, AP_ERR_INPUT, "%s: %g has no unit; write a string such as "
                                  "\"%gGiB\" or \"%gGB\"", what, n, n, n);
    }
    if (!ap_json_is_string(v))
        return ap_err_set(err, AP_ERR_INPUT, "%s: must be a string with a unit, got %s", what,
                          ap_json_type_name(v));
    ap_status st = is_bw ? ap_parse_bandwidth(ap_json_string(v), what, out, err)
                         : ap_parse_bytes(ap_json_string(v), what, out, err);
    if (st == AP_OK && !(*out > 0))
        return ap_err_set(err, AP_ERR_INPUT, "%s: must be positive", what);
    if (st == AP_OK) *present = 1;
    return st;
}

/* Resolve one GPU name into *g; a second, different type is the mixed-types error. */
static ap_status add_gpu_type(const char *name, const char *what, const ap_gpu **g,
                              const char *where, ap_err *err) {
    const ap_gpu *x;
    ap_status st = ap_gpu_lookup(name, what, &x, err);
    if (st != AP_OK) return st;
    if (*g && *g != x)
        return ap_err_set(err, AP_ERR_INPUT, "%s: mixed GPU types are not supported yet (%s and "
                          "%s); describe one cluster per GPU type", where, (*g)->name, x->name);
    *g = x;
    return AP_OK;
}

/* The GPU counts a cluster file gives: "gpus" and "gpus_per_node", or a "nodes" list. */
typedef struct {
    int64_t gpus, gpn;
    int have_gpus, have_gpn;
} node_counts;

/* "gpu": a catalog name, or an array of names of one type. */
static ap_status read_gpu_type(const ap_json *root, const char *where, const ap_gpu **g,
                               ap_err *err) {
    ap_status st;
    char what[300];
    ap_json *jg = ap_json_get(root, "gpu");
    if (jg && ap_json_is_string(jg)) {
        snprintf(what, sizeof what, "%s: field 'gpu'", where);
        if ((st = add_gpu_type(ap_json_string(jg), what, g, where, err)) != AP_OK) return st;
    } else if (jg && ap_json_is_array(jg)) {
        if (ap_json_size(jg) == 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': empty list", where);
        for (int i = 0; i < ap_json_size(jg); i++) {
            ap_json *e = ap_json_at(jg, i);
            if (!ap_json_is_string(e))
                return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu[%d]': must be a GPU name, "
                                  "got %s", where, i, ap_json_type_name(e));
            snprintf(what, sizeof what, "%s: field 'gpu[%d]'", where, i);
            if ((st = add_gpu_type(ap_json_string(e), what, g, where, err)) != AP_OK) return st;
        }
    } else if (jg && !ap_json_is_null(jg)) {
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpu': must be a GPU name such as "
                          "\"a100-sxm4-80g\", got %s", where, ap_json_type_name(jg));
    }
    return AP_OK;
}

/* "nodes": a per-node list, accepted only when every node is the same GPU type and count. */
static ap_status read_nodes(const ap_json *root, const char *where, const ap_gpu **g,
                            node_counts *cnt, ap_err *err) {
    ap_status st;
    char what[300];
    ap_json *jn = ap_json_get(root, "nodes");
    if (jn && !ap_json_is_null(jn)) {
        if (!ap_json_is_array(jn) || ap_json_size(jn) == 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nodes': must be a non-empty list of "
                              "{\"gpu\": NAME, \"gpus\": N} objects, got %s", where,
                              ap_json_type_name(jn));
        int64_t total = 0, per = 0;
        for (int i = 0; i < ap_json_size(jn); i++) {
            ap_json *e = ap_json_at(jn, i);
            char w[256];
            snprintf(w, sizeof w, "%.200s: nodes[%d]", where, i);
            if (!ap_json_is_object(e))
                return ap_err_set(err, AP_ERR_INPUT, "%s: must be an object, got %s", w,
                                  ap_json_type_name(e));
            if ((st = check_node_fields(e, w, err)) != AP_OK) return st;
            char name[64];
            if ((st = ap_json_get_str(e, "gpu", name, sizeof name, NULL, w, err)) != AP_OK)
                return st;
            snprintf(what, sizeof what, "%s: field 'gpu'", w);
            if ((st = add_gpu_type(name, what, g, where, err)) != AP_OK) return st;
            int64_t n;
            if ((st = ap_json_get_int(e, "gpus", 1, MAX_GPUS_PER_NODE, &n, NULL, w, err)) != AP_OK)
                return st;
            if (per && n != per)
                return ap_err_set(err, AP_ERR_INPUT, "%s: field 'nodes': nodes with different GPU "
                                  "counts (%lld and %lld) are not supported yet", where,
                                  (long long)per, (long long)n);
            per = n;
            total += n;
        }
        cnt->gpus = total;
        cnt->gpn = per;
        cnt->have_gpus = cnt->have_gpn = 1;
    }
    return AP_OK;
}

/* "gpus" and "gpus_per_node", which must agree with "nodes" when both are given. */
static ap_status read_counts(const ap_json *root, const char *where, node_counts *cnt,
                             ap_err *err) {
    ap_status st;
    int present;
    int64_t v;
    if ((st = ap_json_get_int(root, "gpus", 1, MAX_GPUS, &v, &present, where, err)) != AP_OK)
        return st;
    if (present) {
        if (cnt->have_gpus && v != cnt->gpus)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus': %lld disagrees with the %lld "
                              "GPUs listed in 'nodes'", where, (long long)v, (long long)cnt->gpus);
        cnt->gpus = v;
        cnt->have_gpus = 1;
    }
    if (!cnt->have_gpus)
        return ap_err_set(err, AP_ERR_INPUT, "%s: missing field 'gpus' (total number of GPUs)",
                          where);
    if ((st = ap_json_get_int(root, "gpus_per_node", 1, MAX_GPUS_PER_NODE, &v, &present, where,
                              err)) != AP_OK)
        return st;
    if (present) {
        if (cnt->have_gpn && v != cnt->gpn)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'gpus_per_node': %lld disagrees with "
                              "the %lld GPUs per node listed in 'nodes'", where, (long long)v,
                              (long long)cnt->gpn);
        cnt->gpn = v;
        cnt->have_gpn = 1;
    }
    return AP_OK;
}

/* The optional fields over the catalog's reference node: links, bandwidths, memory, name. */
static ap_status read_options(const ap_json *root, const char *where, ap_cluster *c,
                              ap_err *err) {
    ap_status st;
    int present;
    int64_t v;
    if ((st = ap_json_get_int(root, "nvlink_domain", 1, MAX_GPUS_PER_NODE, &v, &present, where,
                              err)) != AP_OK)
        return st;
    if (present) c->nvlink_domain = (int)v;
    if ((st = ap_json_get_int(root, "gpus_per_pcie_switch", 1, MAX_GPUS_PER_NODE, &v, &present,
                              where, err)) != AP_OK)
        return st;
    if (present) c->gpus_per_pcie_switch = (int)v;
    if ((st = ap_json_get_int(root, "cpu_cores", 1, MAX_CPU_CORES, &v, &present, where, err)) !=
        AP_OK)
        return st;
    if (present) c->cpu_cores = (int)v;

    double q;
    if ((st = get_quantity(root, "network_bw", 1, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->net_bytes_per_s = q;
    if ((st = get_quantity(root, "link_bw", 1, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->link_bytes_per_s = q;
    if ((st = get_quantity(root, "pcie_bw", 1, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->pcie_bytes_per_s = q;
    if ((st = get_quantity(root, "host_mem_bw", 1, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->host_mem_bytes_per_s = q;
    if ((st = get_quantity(root, "cpu_mem", 0, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->cpu_mem_bytes = q;
    if ((st = get_quantity(root, "gpu_mem", 0, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->gpu.mem_bytes = q;
    /* NVMe for ZeRO-Infinity: "nvme" capacity per node, "nvme_bw" both directions or
       "nvme_read_bw" / "nvme_write_bw" (which win over "nvme_bw") */
    if ((st = get_quantity(root, "nvme", 0, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->nvme_bytes = q;
    if ((st = get_quantity(root, "nvme_bw", 1, &q, &present, where, err)) != AP_OK) return st;
    if (present) c->nvme_read_bytes_per_s = c->nvme_write_bytes_per_s = q;
    if ((st = get_quantity(root, "nvme_read_bw", 1, &q, &present, where, err)) != AP_OK)
        return st;
    if (present) c->nvme_read_bytes_per_s = q;
    if ((st = get_quantity(root, "nvme_write_bw", 1, &q, &present, where, err)) != AP_OK)
        return st;
    if (present) c->nvme_write_bytes_per_s = q;

    if ((st = ap_json_get_str(root, "name", c->name, sizeof c->name, &present, where, err)) !=
        AP_OK)
        return st;
    static const char *const text_fields[] = {"comment", "description"};
    for (size_t i = 0; i < 2; i++) {
        ap_json *t = ap_json_get(root, text_fields[i]);
        if (t && !ap_json_is_string(t) && !ap_json_is_null(t))
            return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s': must be a string, got %s", where,
                              text_fields[i], ap_json_type_name(t));
    }
    return AP_OK;
}

/* The cluster of `count` GPUs on the node the file describes (its nodes list or
 * gpus_per_node, else the GPU's reference node; part of one node when count is smaller). */
static ap_status build(const ap_json *root, const char *where, const ap_gpu *g,
                       const node_counts *n, int count, ap_cluster *c, ap_err *err) {
    ap_cluster_from_gpu(g, count, c);
    if (n->have_gpn) ap_cluster_set_gpus_per_node(c, (int)n->gpn);
    return read_options(root, where, c, err);
}

/* gpus > 0: that many GPUs in place of the file's count, once the file is valid as written. */
static ap_status parse_root(const ap_json *root, const char *where, int gpus, ap_cluster *out,
                            ap_err *err) {
    if (!ap_json_is_object(root))
        return ap_err_set(err, AP_ERR_INPUT, "%s: a cluster file must be a JSON object, got %s",
                          where, ap_json_type_name(root));
    const ap_gpu *g = NULL;
    node_counts n = {0, 0, 0, 0};
    ap_status st = check_fields(root, where, err);
    if (st == AP_OK) st = read_gpu_type(root, where, &g, err);
    if (st == AP_OK) st = read_nodes(root, where, &g, &n, err);
    if (st == AP_OK && !g)
        st = ap_err_set(err, AP_ERR_INPUT, "%s: missing field 'gpu' (a catalog name; `autoplan "
                        "gpus` lists them)", where);
    if (st == AP_OK) st = read_counts(root, where, &n, err);
    if (st != AP_OK) return st;

    ap_cluster c;
    if (n.have_gpn && n.gpus < n.gpn)
        ap_log(AP_LOG_INFO, "%s: %lld GPUs use part of one node of %lld", where,
               (long long)n.gpus, (long long)n.gpn);
    if ((st = build(root, where, g, &n, (int)n.gpus, &c, err)) != AP_OK) return st;
    if ((st = ap_cluster_validate(&c, where, err)) != AP_OK) return st;
    if (gpus > 0 && gpus != c.gpus) {
        /* another count keeps the node as described: the file's own count may have made it
           part of one node (4 GPUs of an 8-GPU node, run with --gpus 16: two 8-GPU nodes) */
        int node = n.have_gpn ? (int)n.gpn
                              : (g->ref_gpus_per_node > 0 ? g->ref_gpus_per_node : 1);
        ap_cluster o;
        if ((st = build(root, where, g, &n, gpus > node ? gpus : node, &o, err)) != AP_OK)
            return st;
        memcpy(o.name, c.name, sizeof o.name);
        o.gpus = gpus;
        c = o;
    }
    *out = c;
    return AP_OK;
}

/* Messages quote the user's text (keys, names, values); keep them on one line. */
static void one_line(ap_err *err) {
    if (!err) return;
    char tmp[sizeof err->msg];
    ap_text_line(tmp, sizeof tmp, err->msg, 0);
    memcpy(err->msg, tmp, sizeof tmp);
}

static ap_status parse_text(const char *text, size_t len, const char *where, int gpus,
                            ap_cluster *out, ap_err *err) {
    if (!where) where = "cluster";
    ap_json *root = NULL;
    ap_status st = ap_json_decode(text, len, where, &root, err);
    if (st != AP_OK) {
        one_line(err);
        return st;
    }
    st = parse_root(root, where, gpus, out, err);
    ap_json_free(root);
    if (st != AP_OK) one_line(err);
    return st;
}

ap_status ap_cluster_parse(const char *text, size_t len, const char *where, ap_cluster *out,
                           ap_err *err) {
    return parse_text(text, len, where, 0, out, err);
}

ap_status ap_cluster_load_gpus(const char *path, int gpus, ap_cluster *out, ap_err *err) {
    if (!path || !*path) return ap_err_set(err, AP_ERR_INPUT, "cluster file: no path given");
    char *text;
    size_t n;
    ap_status st = ap_read_file(path, MAX_CLUSTER_FILE_BYTES, &text, &n, err);
    if (st != AP_OK) return st;
    st = parse_text(text, n, path, gpus, out, err);
    ap_free(text);
    return st;
}

ap_status ap_cluster_load(const char *path, ap_cluster *out, ap_err *err) {
    return ap_cluster_load_gpus(path, 0, out, err);
}

/* ---- fingerprint ------------------------------------------------------------------------- */

static uint64_t mix_d(uint64_t h, double v) {
    if (v == 0) v = 0; /* -0 and 0 hash alike */
    return ap_hash64(&v, sizeof v, h);
}
static uint64_t mix_i(uint64_t h, int64_t v) { return ap_hash64(&v, sizeof v, h); }
static uint64_t mix_s(uint64_t h, const char *s) { return ap_hash64(s, strlen(s) + 1, h); }

/* Hash of everything that changes a plan's cost: the GPU's numbers, the shape and links, and the
 * catalog version. The cluster's display name is left out. Field by field, so struct padding
 * never enters. The GPU's multicast flag is not hashed: it is the catalog's, fixed by the name
 * (plan files written before the flag keep their fingerprints). */
uint64_t ap_cluster_fingerprint(const ap_cluster *c) {
    const ap_gpu *g = &c->gpu;
    uint64_t h = mix_s(0, ap_gpu_catalog_version());
    h = mix_s(h, g->name);
    h = mix_s(h, g->vendor);
    h = mix_d(h, g->mem_bytes);
    for (int d = 0; d < AP_DTYPE_COUNT; d++) h = mix_d(h, g->peak_flops[d]);
    h = mix_d(h, g->hbm_bytes_per_s);
    h = mix_i(h, g->sm_count);
    h = mix_i(h, g->link);
    h = mix_i(h, g->pcie_gen);
    h = mix_i(h, c->gpus);
    h = mix_i(h, c->gpus_per_node);
    h = mix_i(h, c->nvlink_domain);
    h = mix_d(h, c->link_bytes_per_s);
    h = mix_d(h, c->net_bytes_per_s);
    h = mix_d(h, c->pcie_bytes_per_s);
    h = mix_i(h, c->gpus_per_pcie_switch);
    h = mix_d(h, c->cpu_mem_bytes);
    h = mix_i(h, c->cpu_cores);
    h = mix_d(h, c->host_mem_bytes_per_s);
    if (c->nvme_bytes > 0) { /* clusters without NVMe keep their old fingerprints */
        h = mix_d(h, c->nvme_bytes);
        h = mix_d(h, c->nvme_read_bytes_per_s);
        h = mix_d(h, c->nvme_write_bytes_per_s);
    }
    return h;
}
