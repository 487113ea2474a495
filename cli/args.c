/*
 * args.c - the flag parser every subcommand uses, and the shared cluster/plan flags that
 * estimate, plan, simulate and compare accept (one parser, so the same flag means the same thing
 * everywhere). Values are kept as text until a typed getter converts them, so every error
 * names the flag: "--network-bw: '400' has no unit; write 400Gb/s (bits) or 400GB/s (bytes)".
 */
#include "cli.h"
#include "autoplan/db.h"
#include "autoplan/kernels.h"
#include "autoplan/hetero.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ap_flags_add(ap_flags *fl, const char *name, ap_flag_kind kind, const char *meta,
                  const char *help) {
    if (fl->n >= AP_MAX_FLAGS) return;
    ap_flag *f = &fl->f[fl->n++];
    memset(f, 0, sizeof *f);
    f->name = name;
    f->kind = kind;
    f->meta = meta;
    f->help = help;
}

ap_flag *ap_flags_get(ap_flags *fl, const char *name) {
    for (int i = 0; i < fl->n; i++)
        if (!strcmp(fl->f[i].name, name)) return &fl->f[i];
    return NULL;
}

int ap_flags_isset(ap_flags *fl, const char *name) {
    ap_flag *f = ap_flags_get(fl, name);
    return f && f->set;
}

const char *ap_flags_value(ap_flags *fl, const char *name) {
    ap_flag *f = ap_flags_get(fl, name);
    return f && f->set ? f->value : NULL;
}

static const char *closest_flag(const ap_flags *fl, const char *name) {
    const char *best = NULL;
    int bd = 4;
    for (int i = 0; i < fl->n; i++) {
        int d = ap_edit_distance(name, fl->f[i].name);
        if (d < bd) { bd = d; best = fl->f[i].name; }
    }
    return best;
}

ap_status ap_flags_parse(ap_flags *fl, int argc, char **argv, int max_pos, int *help,
                         ap_err *err) {
    if (help) *help = 0;
    fl->npos = 0;
    int only_pos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            if (help) *help = 1;
            continue;
        }
        if (!only_pos && !strcmp(a, "--")) { only_pos = 1; continue; }
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (fl->npos >= max_pos || fl->npos >= AP_MAX_POSITIONAL)
                return ap_err_set(err, AP_ERR_INPUT, "unexpected argument '%s'", a);
            fl->pos[fl->npos++] = a;
            continue;
        }
        if (a[1] != '-')
            return ap_err_set(err, AP_ERR_INPUT, "unknown flag '%s' (flags are spelled --name)", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        char nbuf[64];
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        if (nlen == 0 || nlen >= sizeof nbuf)
            return ap_err_set(err, AP_ERR_INPUT, "unknown flag '%s'", a);
        memcpy(nbuf, name, nlen);
        nbuf[nlen] = '\0';
        ap_flag *f = ap_flags_get(fl, nbuf);
        if (!f) {
            const char *c = closest_flag(fl, nbuf);
            if (c)
                return ap_err_set(err, AP_ERR_INPUT, "unknown flag '--%s' (did you mean --%s?)",
                                  nbuf, c);
            return ap_err_set(err, AP_ERR_INPUT, "unknown flag '--%s' (see --help)", nbuf);
        }
        const char *val = NULL;
        if (f->kind == AP_FLAG_BOOL) {
            if (eq)
                return ap_err_set(err, AP_ERR_INPUT, "--%s takes no value (got '%s')", nbuf,
                                  eq + 1);
            val = "1";
        } else if (eq) {
            val = eq + 1;
        } else {
            if (i + 1 >= argc)
                return ap_err_set(err, AP_ERR_INPUT, "--%s needs a value (%s)", nbuf,
                                  f->meta ? f->meta : "VALUE");
            val = argv[++i];
        }
        if (f->kind == AP_FLAG_VALUE && *val == '\0')
            return ap_err_set(err, AP_ERR_INPUT, "--%s: empty value", nbuf);
        if (f->set && strcmp(f->value, val) != 0)
            return ap_err_set(err, AP_ERR_INPUT, "--%s given twice with different values ('%s' "
                              "and '%s')", nbuf, f->value, val);
        f->set = 1;
        f->value = val;
    }
    return AP_OK;
}

void ap_flags_print_help(const ap_flags *fl, const char *usage, const char *description) {
    printf("usage: %s\n", usage);
    if (description && *description) printf("\n%s\n", description);
    printf("\nflags:\n");
    for (int i = 0; i < fl->n; i++) {
        char lhs[64];
        const ap_flag *f = &fl->f[i];
        if (f->kind == AP_FLAG_BOOL) snprintf(lhs, sizeof lhs, "--%s", f->name);
        else snprintf(lhs, sizeof lhs, "--%s %s", f->name, f->meta ? f->meta : "VALUE");
        printf("  %-28s %s\n", lhs, f->help);
    }
    printf("  %-28s %s\n", "--help", "show this help");
}

ap_status ap_flag_int(ap_flags *fl, const char *name, int64_t lo, int64_t hi, int64_t *out,
                      ap_err *err) {
    const char *v = ap_flags_value(fl, name);
    if (!v) return AP_OK;
    char what[72];
    snprintf(what, sizeof what, "--%s", name);
    return ap_parse_int(v, what, lo, hi, out, err);
}

ap_status ap_flag_real(ap_flags *fl, const char *name, double lo, double hi, double *out,
                       ap_err *err) {
    const char *v = ap_flags_value(fl, name);
    if (!v) return AP_OK;
    char what[72];
    snprintf(what, sizeof what, "--%s", name);
    return ap_parse_real(v, what, lo, hi, out, err);
}

ap_status ap_flag_bytes(ap_flags *fl, const char *name, double *out, ap_err *err) {
    const char *v = ap_flags_value(fl, name);
    if (!v) return AP_OK;
    char what[72];
    snprintf(what, sizeof what, "--%s", name);
    return ap_parse_bytes(v, what, out, err);
}

ap_status ap_flag_bw(ap_flags *fl, const char *name, double *out, ap_err *err) {
    const char *v = ap_flags_value(fl, name);
    if (!v) return AP_OK;
    char what[72];
    snprintf(what, sizeof what, "--%s", name);
    return ap_parse_bandwidth(v, what, out, err);
}

void ap_cli_cluster_flags(ap_flags *fl) {
    ap_flags_add(fl, "gpus", AP_FLAG_VALUE, "N", "total number of GPUs");
    ap_flags_add(fl, "gpu", AP_FLAG_VALUE, "NAME",
                 "GPU type from the catalog (default a100-sxm4-80g; see `autoplan gpus`)");
    ap_flags_add(fl, "gpus-per-node", AP_FLAG_VALUE, "N",
                 "GPUs per node (default: the GPU's reference system, e.g. 8 for DGX)");
    ap_flags_add(fl, "nvlink-domain", AP_FLAG_VALUE, "N",
                 "GPUs sharing the fast peer link (default = GPUs per node)");
    ap_flags_add(fl, "network-bw", AP_FLAG_VALUE, "BW",
                 "network bandwidth per GPU per direction, with units: 200Gb/s or 25GB/s");
    ap_flags_add(fl, "link-bw", AP_FLAG_VALUE, "BW",
                 "peer-link (NVLink) bandwidth per GPU per direction, e.g. 300GB/s");
    ap_flags_add(fl, "pcie-bw", AP_FLAG_VALUE, "BW", "host PCIe bandwidth per GPU, e.g. 32GB/s");
    ap_flags_add(fl, "cpu-mem", AP_FLAG_VALUE, "SIZE", "host memory per node, e.g. 1TiB");
    ap_flags_add(fl, "nvme", AP_FLAG_VALUE, "SIZE",
                 "local NVMe per node for ZeRO-Infinity, e.g. 3.84TB (needs --nvme-bw)");
    ap_flags_add(fl, "nvme-bw", AP_FLAG_VALUE, "BW",
                 "NVMe bandwidth per node, each direction, e.g. 6GB/s (or --nvme-read-bw and "
                 "--nvme-write-bw)");
    ap_flags_add(fl, "nvme-read-bw", AP_FLAG_VALUE, "BW", "NVMe read bandwidth per node");
    ap_flags_add(fl, "nvme-write-bw", AP_FLAG_VALUE, "BW", "NVMe write bandwidth per node");
    ap_flags_add(fl, "cluster", AP_FLAG_VALUE, "FILE",
                 "cluster description (JSON, see docs/hardware.md); flags above override it");
    ap_flags_add(fl, "allow-cross-node-tp", AP_FLAG_BOOL, NULL,
                 "allow tensor parallelism across NVLink domains");
    ap_flags_add(fl, "profile", AP_FLAG_VALUE, "NAME|none",
                 "kernel profile: a measured profile (`autoplan profile list`) or none for the "
                 "published tables (default: the GPU's newest measured profile)");
}

void ap_cli_plan_flags(ap_flags *fl) {
    ap_flags_add(fl, "trainer", AP_FLAG_VALUE, "T",
                 "megatron|deepspeed|fsdp|torchtitan|colossalai (default megatron)");
    ap_flags_add(fl, "tp", AP_FLAG_VALUE, "N", "tensor-parallel degree");
    ap_flags_add(fl, "pp", AP_FLAG_VALUE, "N", "pipeline-parallel degree");
    ap_flags_add(fl, "cp", AP_FLAG_VALUE, "N", "context-parallel degree");
    ap_flags_add(fl, "ep", AP_FLAG_VALUE, "N", "expert-parallel degree (MoE)");
    ap_flags_add(fl, "etp", AP_FLAG_VALUE, "N", "expert tensor-parallel degree (MoE, default 1)");
    ap_flags_add(fl, "vp", AP_FLAG_VALUE, "N", "virtual pipeline stages per rank (interleaving)");
    ap_flags_add(fl, "mbs", AP_FLAG_VALUE, "N", "micro-batch size, sequences");
    ap_flags_add(fl, "gbs", AP_FLAG_VALUE, "N", "global batch size, sequences");
    ap_flags_add(fl, "seq", AP_FLAG_VALUE, "S",
                 "sequence length, tokens (default: the model's training length)");
    ap_flags_add(fl, "zero", AP_FLAG_VALUE, "0-3",
                 "ZeRO stage (megatron: 1 = distributed optimizer; fsdp: 3 = FULL_SHARD)");
    ap_flags_add(fl, "recompute", AP_FLAG_VALUE, "R", "activation recomputation: none|selective|full");
    ap_flags_add(fl, "recompute-layers", AP_FLAG_VALUE, "K",
                 "with full recompute: layers per pipeline chunk recomputed (default all)");
    ap_flags_add(fl, "sp", AP_FLAG_BOOL, NULL, "sequence parallelism (with --tp > 1)");
    ap_flags_add(fl, "overlap", AP_FLAG_BOOL, NULL,
                 "overlap gradient reduction, parameter gathering and (with --sp) TP communication "
                 "where the trainer can");
    ap_flags_add(fl, "offload-optimizer", AP_FLAG_VALUE, "F",
                 "fraction in [0,1] of optimizer states and master weights kept in CPU memory");
    ap_flags_add(fl, "offload-params", AP_FLAG_VALUE, "F",
                 "fraction in [0,1] of parameters kept in CPU memory (ZeRO-3)");
    ap_flags_add(fl, "gemini", AP_FLAG_VALUE, "P",
                 "Colossal-AI GeminiPlugin placement: static|auto (ZeRO-3; static takes "
                 "--offload-optimizer, --offload-params and --shard-param-frac as its fractions)");
    ap_flags_add(fl, "shard-param-frac", AP_FLAG_VALUE, "F",
                 "Gemini static: fraction in [0,1] of chunk memory sharded (default 1)");
    ap_flags_add(fl, "offload-device", AP_FLAG_VALUE, "D",
                 "DeepSpeed: cpu|nvme for the offloaded optimizer states and parameters "
                 "(ZeRO-Offload / ZeRO-Infinity, simulated operator by operator)");
    ap_flags_add(fl, "dtype", AP_FLAG_VALUE, "D", "compute precision: bf16|fp16|fp8 (default bf16)");
    ap_flags_add(fl, "no-flash-attn", AP_FLAG_BOOL, NULL,
                 "attention materialises the s x s score matrix (no FlashAttention)");
    ap_flags_add(fl, "attn-impl", AP_FLAG_VALUE, "IMPL",
                 "attention kernel: auto|unfused|fa1|triton|fa2|fa3|cudnn|sdpa_efficient|flex "
                 "(default auto: the trainer's for the GPU and model, printed by estimate)");
    ap_flags_add(fl, "stage-layers", AP_FLAG_VALUE, "LIST",
                 "layers per pipeline chunk, comma separated (pp*vp numbers summing to L)");
    ap_flags_add(fl, "headroom", AP_FLAG_VALUE, "SIZE",
                 "memory kept free on each GPU for a plan to count as fitting (default 2GiB)");
}

ap_status ap_parse_gpu_counts(const char *s, int counts[AP_MAX_GPU_COUNTS], int *n, ap_err *err) {
    const char *dots = strstr(s, "..");
    *n = 0;
    if (dots) {
        char a[32], b[32];
        size_t la = (size_t)(dots - s);
        if (la == 0 || la >= sizeof a || strlen(dots + 2) >= sizeof b || !dots[2])
            return ap_err_set(err, AP_ERR_INPUT, "--gpus: '%s' is not a range like 64..1024", s);
        memcpy(a, s, la);
        a[la] = '\0';
        strcpy(b, dots + 2);
        int64_t lo, hi;
        ap_status st;
        if ((st = ap_parse_int(a, "--gpus", 1, 1 << 20, &lo, err)) != AP_OK) return st;
        if ((st = ap_parse_int(b, "--gpus", 1, 1 << 20, &hi, err)) != AP_OK) return st;
        if (hi < lo) return ap_err_set(err, AP_ERR_INPUT, "--gpus: range %s is empty", s);
        for (int64_t v = lo; v <= hi && *n < AP_MAX_GPU_COUNTS; v *= 2) counts[(*n)++] = (int)v;
        if (counts[*n - 1] != hi && *n < AP_MAX_GPU_COUNTS) counts[(*n)++] = (int)hi;
        return AP_OK;
    }
    const char *q = s;
    while (*q) {
        char buf[32];
        const char *comma = strchr(q, ',');
        size_t len = comma ? (size_t)(comma - q) : strlen(q);
        if (len == 0 || len >= sizeof buf)
            return ap_err_set(err, AP_ERR_INPUT, "--gpus: '%s' is not a count, a range a..b or a "
                              "list a,b,c", s);
        memcpy(buf, q, len);
        buf[len] = '\0';
        int64_t v;
        ap_status st = ap_parse_int(buf, "--gpus", 1, 1 << 20, &v, err);
        if (st != AP_OK) return st;
        if (*n >= AP_MAX_GPU_COUNTS)
            return ap_err_set(err, AP_ERR_INPUT, "--gpus: at most %d counts", AP_MAX_GPU_COUNTS);
        counts[(*n)++] = (int)v;
        q += len;
        if (*q == ',') q++;
    }
    if (*n == 0) return ap_err_set(err, AP_ERR_INPUT, "--gpus: no count given");
    return AP_OK;
}

static ap_status int_flag(ap_flags *fl, const char *name, int64_t lo, int64_t hi, int *out,
                          ap_err *err) {
    int64_t v = *out;
    ap_status st = ap_flag_int(fl, name, lo, hi, &v, err);
    if (st == AP_OK) *out = (int)v;
    return st;
}

/* --nvme SIZE with --nvme-bw BW (or the read and write bandwidths): all or nothing, named. */
static ap_status nvme_flags(ap_flags *fl, ap_cluster *c, ap_err *err) {
    ap_status st;
    int any_bw = ap_flags_isset(fl, "nvme-bw") || ap_flags_isset(fl, "nvme-read-bw") ||
                 ap_flags_isset(fl, "nvme-write-bw");
    if ((st = ap_flag_bytes(fl, "nvme", &c->nvme_bytes, err)) != AP_OK) return st;
    if (ap_flags_isset(fl, "nvme") && !(c->nvme_bytes > 0))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme: must be positive");
    if (ap_flags_isset(fl, "nvme-bw")) {
        double bw = 0;
        if ((st = ap_flag_bw(fl, "nvme-bw", &bw, err)) != AP_OK) return st;
        c->nvme_read_bytes_per_s = c->nvme_write_bytes_per_s = bw;
    }
    if ((st = ap_flag_bw(fl, "nvme-read-bw", &c->nvme_read_bytes_per_s, err)) != AP_OK) return st;
    if ((st = ap_flag_bw(fl, "nvme-write-bw", &c->nvme_write_bytes_per_s, err)) != AP_OK)
        return st;
    if (c->nvme_bytes > 0 && (c->nvme_read_bytes_per_s <= 0 || c->nvme_write_bytes_per_s <= 0))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme-bw: --nvme %s needs the NVMe bandwidth "
                          "(--nvme-bw, or --nvme-read-bw and --nvme-write-bw)",
                          ap_flags_value(fl, "nvme") ? ap_flags_value(fl, "nvme") : "");
    if (any_bw && !(c->nvme_bytes > 0))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme: an NVMe bandwidth was given without its "
                          "capacity (--nvme SIZE, e.g. 3.84TB)");
    return AP_OK;
}

ap_status ap_cli_load_cluster(ap_flags *fl, int need_gpus, ap_cluster *c, ap_err *err) {
    ap_status st;
    const char *cfile = ap_flags_value(fl, "cluster");
    int64_t gpus = 0;
    if ((st = ap_flag_int(fl, "gpus", 1, 1 << 20, &gpus, err)) != AP_OK) return st;
    if (cfile) {
        if ((st = ap_cluster_load(cfile, c, err)) != AP_OK) return st;
        if (ap_flags_isset(fl, "gpu")) {
            const ap_gpu *g = ap_gpu_find(ap_flags_value(fl, "gpu"));
            if (!g || strcmp(g->name, c->gpu.name) != 0)
                return ap_err_set(err, AP_ERR_INPUT, "--gpu %s conflicts with %s (gpu %s); mixed "
                                  "GPU types are not supported yet", ap_flags_value(fl, "gpu"),
                                  cfile, c->gpu.name);
        }
        if (gpus > 0) c->gpus = (int)gpus;
    } else {
        const char *gname = ap_flags_value(fl, "gpu");
        const ap_gpu *g;
        if ((st = ap_gpu_lookup(gname ? gname : "a100-sxm4-80g", "--gpu", &g, err)) != AP_OK)
            return st;
        if (gpus == 0) {
            if (need_gpus)
                return ap_err_set(err, AP_ERR_INPUT, "--gpus is required (number of GPUs, e.g. "
                                  "--gpus 8)");
            gpus = 1;
        }
        ap_cluster_from_gpu(g, (int)gpus, c);
    }
    int64_t v;
    if (ap_flags_isset(fl, "gpus-per-node")) {
        v = 0;
        if ((st = ap_flag_int(fl, "gpus-per-node", 1, 1024, &v, err)) != AP_OK) return st;
        ap_cluster_set_gpus_per_node(c, (int)v);
    }
    if ((st = int_flag(fl, "nvlink-domain", 1, 1 << 20, &c->nvlink_domain, err)) != AP_OK)
        return st;
    if ((st = ap_flag_bw(fl, "network-bw", &c->net_bytes_per_s, err)) != AP_OK) return st;
    if ((st = ap_flag_bw(fl, "link-bw", &c->link_bytes_per_s, err)) != AP_OK) return st;
    if ((st = ap_flag_bw(fl, "pcie-bw", &c->pcie_bytes_per_s, err)) != AP_OK) return st;
    if ((st = ap_flag_bytes(fl, "cpu-mem", &c->cpu_mem_bytes, err)) != AP_OK) return st;
    if (ap_flags_isset(fl, "cpu-mem") && c->cpu_mem_bytes <= 0)
        return ap_err_set(err, AP_ERR_INPUT, "--cpu-mem: must be positive");
    if ((st = nvme_flags(fl, c, err)) != AP_OK) return st;
    return ap_cluster_validate(c, cfile ? cfile : "cluster flags", err);
}

static ap_status parse_stage_layers(const char *s, ap_plan *p, ap_err *err) {
    int n = 0;
    const char *q = s;
    while (*q) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q || v < 0 || v > 100000)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-layers: '%s' is not a comma-separated "
                              "list of layer counts", s);
        if (n >= AP_MAX_CHUNKS)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-layers: more than %d entries",
                              AP_MAX_CHUNKS);
        p->stage_layers[n++] = (int)v;
        q = end;
        if (*q == ',') q++;
        else if (*q)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-layers: '%s' is not a comma-separated "
                              "list of layer counts", s);
    }
    p->nchunks = n;
    return AP_OK;
}

/* The profile in use, kept for the whole run (estimates borrow it); loaded once per name; and
 * the kernel tables built from it. */
static ap_profile g_profile;
static ap_kernels g_kernels;
static const ap_profile *g_kernels_of;

static ap_status load_profile(ap_flags *fl, ap_cli_ctx *ctx, ap_err *err) {
    const char *want = ap_flags_value(fl, "profile");
    const char *gpu = ctx->cluster.gpu.name;
    if (want && !strcmp(want, "none")) {
        snprintf(ctx->profile_note, sizeof ctx->profile_note, "kernel tables: published "
                 "(--profile none)");
        return AP_OK;
    }
    ap_status st = want ? ap_db_profile_check_name(want, "--profile", err) : AP_OK;
    if (st != AP_OK) return st;
    char path[4096];
    const char *dbp = ap_flags_get(fl, "db") ? ap_flags_value(fl, "db") : NULL;
    if (!dbp) {
        if ((st = ap_db_default_path(path, sizeof path, 0, err)) != AP_OK) return want ? st : AP_OK;
        dbp = path;
    }
    snprintf(ctx->profile_note, sizeof ctx->profile_note, "kernel tables: published (no measured "
             "%s profile in the database)", gpu);
    struct stat sb;
    if (stat(dbp, &sb) != 0) {
        if (want)
            return ap_err_set(err, AP_ERR_INPUT, "--profile %s: no database at %s", want, dbp);
        return AP_OK;
    }
    ap_db *db = NULL;
    ap_err e;
    char name[64];
    if ((st = ap_db_open(dbp, 1, &db, &e)) == AP_OK && !want)
        st = ap_db_profile_newest(db, gpu, name, &e);
    if (st == AP_OK && want) snprintf(name, sizeof name, "%s", want);
    if (st == AP_OK && name[0] && strcmp(g_profile.name, name)) {
        ap_profile_free(&g_profile);
        g_kernels_of = NULL;
        st = ap_db_profile_get(db, name, &g_profile, &e);
    }
    ap_db_close(db);
    if (st != AP_OK) {
        if (want) return ap_err_set(err, st, "--profile %s: %s", want, e.msg);
        ap_log(AP_LOG_WARN, "%s; estimating with the published tables", e.msg);
        return AP_OK;
    }
    if (!name[0]) return AP_OK;
    if (g_profile.n == 0)
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: no such profile in %s (`autoplan "
                          "profile list` shows them)", name, dbp);
    if (strcmp(g_profile.gpu, gpu))
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: it was measured on %s, the cluster's "
                          "GPU is %s", name, g_profile.gpu, gpu);
    snprintf(ctx->profile_name, sizeof ctx->profile_name, "%s", name);
    snprintf(ctx->profile_note, sizeof ctx->profile_note, "kernel tables: measured profile '%s' "
             "(%zu rows, %s on %.32s) over the published ones%s", name, g_profile.n,
             g_profile.rows[0].driver_version[0] ? g_profile.rows[0].driver_version : "driver ?",
             g_profile.rows[0].host[0] ? g_profile.rows[0].host : "?",
             want ? "" : " (the newest; --profile none for published only)");
    ctx->opts.profile = &g_profile;
    /* built once: a search estimates thousands of plans (estimate.c rebuilds them for a
     * variant on another GPU) */
    if (strcmp(g_kernels.gpu, gpu) || g_kernels_of != &g_profile) {
        if ((st = ap_kernels_build(&ctx->cluster.gpu, &g_profile, &g_kernels, err)) != AP_OK)
            return st;
        g_kernels_of = &g_profile;
    }
    ctx->opts.kernels = &g_kernels;
    return AP_OK;
}

ap_status ap_cli_load_profile(ap_flags *fl, ap_cli_ctx *ctx, ap_err *err) {
    return load_profile(fl, ctx, err);
}

/* --gemini, --shard-param-frac, --offload-device: the plan's heterogeneous placement (plan.h
 * ap_plan_hetero). Gemini static takes the offload fractions; DeepSpeed puts the offloaded
 * states on the device. The trainer rules are checked in ap_cli_finish_plan. */
static ap_status hetero_flags(ap_flags *fl, ap_plan *p, ap_err *err) {
    ap_status st;
    const char *g = ap_flags_value(fl, "gemini");
    const char *d = ap_flags_value(fl, "offload-device");
    int shard = ap_flags_isset(fl, "shard-param-frac");
    if (!g && !d && !shard) return AP_OK;
    ap_plan_hetero_init(&p->hetero);
    if (shard && !g)
        return ap_err_set(err, AP_ERR_INPUT, "--shard-param-frac: a Gemini static fraction; "
                          "give --gemini static");
    if (g && d)
        return ap_err_set(err, AP_ERR_INPUT, "--offload-device is DeepSpeed's and --gemini "
                          "Colossal-AI's; give one");
    if (g) {
        if ((st = ap_gemini_placement_parse(g, "--gemini", &p->hetero.placement, err)) != AP_OK)
            return st;
        if (p->hetero.placement == AP_GEMINI_OFF)
            return ap_err_set(err, AP_ERR_INPUT, "--gemini: 'off' is not a placement (static or "
                              "auto)");
        if ((st = ap_flag_real(fl, "shard-param-frac", 0, 1, &p->hetero.shard_param_frac, err)) !=
            AP_OK)
            return st;
        if (p->hetero.placement == AP_GEMINI_AUTO &&
            (shard || p->offload_optimizer > 0 || p->offload_params > 0))
            return ap_err_set(err, AP_ERR_INPUT, "--gemini auto places chunks itself; "
                              "--offload-optimizer, --offload-params and --shard-param-frac are "
                              "static placement's fractions");
        p->hetero.offload_optim_frac = p->offload_optimizer;
        p->hetero.offload_param_frac = p->offload_params;
        return AP_OK;
    }
    ap_offload_device dev;
    if ((st = ap_offload_device_parse(d, "--offload-device", &dev, err)) != AP_OK) return st;
    if (dev == AP_OFFLOAD_DEV_NONE || !(p->offload_optimizer > 0 || p->offload_params > 0))
        return ap_err_set(err, AP_ERR_INPUT, "--offload-device %s needs --offload-optimizer or "
                          "--offload-params above 0", d);
    if (p->offload_optimizer > 0) p->hetero.ds_optimizer = dev;
    if (p->offload_params > 0) p->hetero.ds_params = dev;
    return AP_OK;
}

ap_status ap_cli_load(ap_flags *fl, int need_gpus, ap_cli_ctx *ctx, ap_err *err) {
    ap_status st;
    memset(ctx, 0, sizeof *ctx);
    if (fl->npos < 1)
        return ap_err_set(err, AP_ERR_INPUT, "missing MODEL (a config.json, a model directory "
                          "or an autoplan model file)");
    ctx->model_path = fl->pos[0];
    if ((st = ap_model_load(ctx->model_path, &ctx->model, err)) != AP_OK) return st;
    if ((st = ap_cli_load_cluster(fl, need_gpus, &ctx->cluster, err)) != AP_OK) return st;
    ctx->allow_cross_node_tp = ap_flags_isset(fl, "allow-cross-node-tp");

    ap_plan *p = &ctx->plan;
    ap_plan_init(p);
    p->tp = p->pp = p->cp = p->ep = p->vp = 0; /* 0 = not given */
    p->mbs = 0;
    const char *t = ap_flags_value(fl, "trainer");
    if (t && (st = ap_trainer_parse(t, &p->trainer, err)) != AP_OK) {
        ap_err_prefix(err, "--trainer");
        return st;
    }
    if ((st = int_flag(fl, "tp", 1, 4096, &p->tp, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "pp", 1, 4096, &p->pp, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "cp", 1, 4096, &p->cp, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "ep", 1, 4096, &p->ep, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "etp", 1, 4096, &p->etp, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "vp", 1, 4096, &p->vp, err)) != AP_OK) return st;
    if ((st = ap_flag_int(fl, "mbs", 1, 1 << 20, &p->mbs, err)) != AP_OK) return st;
    p->gbs = 0;
    if ((st = ap_flag_int(fl, "gbs", 1, (int64_t)1 << 32, &p->gbs, err)) != AP_OK) return st;
    p->seq = ctx->model.seq_len;
    if (ap_flags_isset(fl, "seq")) {
        if ((st = ap_flag_int(fl, "seq", 1, 1 << 24, &p->seq, err)) != AP_OK) return st;
        ctx->seq_given = 1;
    } else {
        ap_log(AP_LOG_INFO, "sequence length %lld (the model's training length; --seq to change)",
               (long long)p->seq);
    }
    p->zero = -1;
    if ((st = int_flag(fl, "zero", 0, 3, &p->zero, err)) != AP_OK) return st;
    const char *rc = ap_flags_value(fl, "recompute");
    p->recompute = AP_RECOMPUTE_NONE;
    if (rc && (st = ap_recompute_parse(rc, "--recompute", &p->recompute, err)) != AP_OK) return st;
    if ((st = int_flag(fl, "recompute-layers", 0, 100000, &p->recompute_layers, err)) != AP_OK)
        return st;
    if (ap_flags_isset(fl, "recompute-layers") && p->recompute != AP_RECOMPUTE_FULL)
        return ap_err_set(err, AP_ERR_INPUT, "--recompute-layers needs --recompute full");
    p->sp = ap_flags_isset(fl, "sp");
    int ov = ap_flags_isset(fl, "overlap");
    p->overlap_grad = p->overlap_param = ov;
    if ((st = ap_flag_real(fl, "offload-optimizer", 0, 1, &p->offload_optimizer, err)) != AP_OK)
        return st;
    if ((st = ap_flag_real(fl, "offload-params", 0, 1, &p->offload_params, err)) != AP_OK)
        return st;
    if ((st = hetero_flags(fl, p, err)) != AP_OK) return st;
    const char *dt = ap_flags_value(fl, "dtype");
    if (dt) {
        if (ap_dtype_parse(dt, &p->dtype) != AP_OK ||
            !(p->dtype == AP_DTYPE_BF16 || p->dtype == AP_DTYPE_FP16 || p->dtype == AP_DTYPE_FP8))
            return ap_err_set(err, AP_ERR_INPUT, "--dtype: '%s' is not one of bf16, fp16, fp8", dt);
        if (ctx->cluster.gpu.peak_flops[p->dtype] <= 0)
            return ap_err_set(err, AP_ERR_INPUT, "--dtype %s: %s has no %s tensor cores", dt,
                              ctx->cluster.gpu.name, dt);
    } else if (ctx->cluster.gpu.peak_flops[AP_DTYPE_BF16] <= 0) {
        p->dtype = AP_DTYPE_FP16; /* V100, Turing: no bf16 */
    }
    /* FlashAttention needs compute capability 8.0+: the catalog GPUs without bf16 tensor cores
       (V100, Turing) run the unfused attention, in the estimate and in the emitted configs */
    p->flash_attn = !ap_flags_isset(fl, "no-flash-attn") &&
                    ctx->cluster.gpu.peak_flops[AP_DTYPE_BF16] > 0;
    const char *impl = ap_flags_value(fl, "attn-impl");
    if (impl && (st = ap_attn_impl_parse(impl, "--attn-impl", &p->attn_impl, err)) != AP_OK)
        return st;
    if (impl && p->attn_impl != AP_ATTN_AUTO && p->attn_impl != AP_ATTN_UNFUSED && !p->flash_attn) {
        if (ap_flags_isset(fl, "no-flash-attn"))
            return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: contradicts --no-flash-attn",
                              impl);
        return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: %s runs attention unfused "
                          "(FlashAttention needs compute capability 8.0); use unfused or auto",
                          impl,
                          ctx->cluster.gpu.name);
    }
    const char *sl = ap_flags_value(fl, "stage-layers");
    if (sl && (st = parse_stage_layers(sl, p, err)) != AP_OK) return st;

    ap_estimate_opts_init(&ctx->opts);
    if ((st = ap_flag_bytes(fl, "headroom", &ctx->opts.headroom_bytes, err)) != AP_OK) return st;
    return load_profile(fl, ctx, err);
}

ap_status ap_cli_finish_plan(ap_cli_ctx *ctx, ap_err *err) {
    ap_plan *p = &ctx->plan;
    if (p->tp == 0) p->tp = 1;
    if (p->pp == 0) p->pp = 1;
    if (p->cp == 0) p->cp = 1;
    if (p->ep == 0) p->ep = 1;
    if (p->etp == 0) p->etp = 1;
    if (p->vp == 0) p->vp = 1;
    if (p->mbs == 0) p->mbs = 1;
    if (p->zero < 0) p->zero = p->hetero.placement != AP_GEMINI_OFF ? 3 : 0; /* GeminiPlugin */
    /* --overlap: overlap whatever this trainer can overlap at this ZeRO stage */
    const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
    p->overlap_tp = p->overlap_grad && tc->overlap_tp && p->sp && p->tp > 1;
    p->overlap_grad = p->overlap_grad && tc->overlap_grad;
    p->overlap_param = p->overlap_param && tc->overlap_param &&
                       (tc->overlap_param_zero_mask & (1u << p->zero)) &&
                       (!tc->overlap_param_needs_grad || p->overlap_grad);
    int64_t per = (int64_t)p->tp * p->pp * p->cp;
    if (ctx->cluster.gpus % per != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--gpus %d is not divisible by tp*pp*cp = %lld",
                          ctx->cluster.gpus, (long long)per);
    p->dp = (int)(ctx->cluster.gpus / per);
    if (p->gbs == 0) p->gbs = p->mbs * p->dp;
    if (p->gbs % (p->mbs * p->dp) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--gbs %lld is not divisible by mbs*dp = %lld",
                          (long long)p->gbs, (long long)(p->mbs * p->dp));
    p->grad_accum = p->gbs / (p->mbs * p->dp);
    if (p->nchunks && p->nchunks != p->pp * p->vp)
        return ap_err_set(err, AP_ERR_INPUT, "--stage-layers has %d entries, expected pp*vp = %d",
                          p->nchunks, p->pp * p->vp);
    if (p->hetero.placement != AP_GEMINI_OFF || p->hetero.ds_optimizer != AP_OFFLOAD_DEV_NONE ||
        p->hetero.ds_params != AP_OFFLOAD_DEV_NONE) {
        ap_status st = ap_plan_hetero_validate(p, &ctx->cluster, "flags", err);
        /* no flag sets the NVMe swap buffers: size them to the largest parameter partition
           (a model the simulation does not take, e.g. MoE, is refused by the run itself) */
        ap_err ignored;
        if (st == AP_OK) (void)ap_hetero_size_param_buffers(&ctx->model, p, &ignored);
        return st;
    }
    return AP_OK;
}

int ap_cli_fail(ap_status st, const ap_err *err) {
    /* one line, whatever the user typed: control characters in echoed input become '?' */
    char msg[sizeof err->msg];
    const char *src = err && err->msg[0] ? err->msg : ap_status_str(st);
    size_t n = 0;
    for (; src[n] && n < sizeof msg - 1; n++)
        msg[n] = ((unsigned char)src[n] < 0x20 || src[n] == 0x7f) ? '?' : src[n];
    msg[n] = '\0';
    fprintf(stderr, "autoplan: %s\n", msg);
    return ap_status_exit_code(st);
}

ap_status ap_cli_tokens_gbs(ap_flags *fl, int64_t seq, int64_t *gbs, char *note, size_t n,
                            ap_err *err) {
    /* One meaning of "4M": the count parser's (4,000,000), for the default too. The batch in
     * sequences is rounded to the nearest multiple of 2^(floor(log2 b) - 3) (four binary digits
     * kept: 976.6 -> 960 = 15 x 64), so that it divides across data-parallel ranks and
     * micro-batches instead of being a prime such as 977; the note says how. */
    double tps = 4e6;
    const char *tv = ap_flags_value(fl, "tokens-per-step");
    ap_status st;
    if (tv && (st = ap_parse_count(tv, "--tokens-per-step", &tps, err)) != AP_OK) return st;
    if (seq < 1) seq = 1;
    double exact = tps / (double)seq;
    int64_t unit = 1;
    while ((double)(unit * 16) <= exact) unit *= 2;
    *gbs = (int64_t)llround(exact / (double)unit) * unit;
    if (*gbs < 1) *gbs = 1;
    snprintf(note, n, "%s: %.0f tokens / %lld = %.1f sequences, rounded to a multiple of %lld",
             tv ? "from --tokens-per-step" : "default 4M tokens per step", tps, (long long)seq,
             exact, (long long)unit);
    return AP_OK;
}
