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
#include "autoplan/emit.h"
#include "autoplan/files.h"
#include "autoplan/partition.h"
#include "autoplan/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
            /* a value never starts with "--": `--tp --gpus 8` lacks the value of --tp
               instead of setting it to "--gpus" */
            if (argv[i + 1][0] == '-' && argv[i + 1][1] == '-' && argv[i + 1][2] != '\0')
                return ap_err_set(err, AP_ERR_INPUT, "--%s needs a value (%s) before %s", nbuf,
                                  f->meta ? f->meta : "VALUE", argv[i + 1]);
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

const char *ap_cli_set_flag(ap_flags *fl, int plan_table, const char *const *keep) {
    static ap_flags defs; /* large; the CLI parses on one thread */
    defs.n = 0;
    ap_cli_cluster_flags(&defs);
    if (plan_table) ap_cli_plan_flags(&defs);
    for (int i = 0; i < defs.n; i++) {
        const char *name = defs.f[i].name;
        int kept = 0;
        for (int k = 0; keep && keep[k] && !kept; k++) kept = !strcmp(name, keep[k]);
        if (!kept && ap_flags_isset(fl, name)) return name;
    }
    return NULL;
}

ap_status ap_cli_refuse_with_plan(ap_flags *fl, const char *const *keep, const char *what,
                                  ap_err *err) {
    const char *name = ap_cli_set_flag(fl, 1, keep);
    return name ? ap_err_set(err, AP_ERR_INPUT, "--%s: not with --plan (the plan file holds %s)",
                             name, what)
                : AP_OK;
}

void ap_cli_plan_flags(ap_flags *fl) {
    ap_flags_add(fl, "trainer", AP_FLAG_VALUE, "T",
                 "megatron|deepspeed|fsdp|torchtitan|colossalai (default megatron)");
    ap_flags_add(fl, "tp", AP_FLAG_VALUE, "N", "tensor-parallel degree");
    ap_flags_add(fl, "pp", AP_FLAG_VALUE, "N", "pipeline-parallel degree");
    ap_flags_add(fl, "cp", AP_FLAG_VALUE, "N", "context-parallel degree");
    ap_flags_add(fl, "cp-a2a", AP_FLAG_BOOL, NULL,
                 "context parallelism by all-to-all (DeepSpeed-Ulysses' scheme, Megatron-LM "
                 "--cp-comm-type a2a) instead of the ring (the search tries both where the trainer has "
                 "both; given, all-to-all only)");
    ap_flags_add(fl, "ep", AP_FLAG_VALUE, "N", "expert-parallel degree (MoE)");
    ap_flags_add(fl, "etp", AP_FLAG_VALUE, "N", "expert tensor-parallel degree (MoE, default 1)");
    ap_flags_add(fl, "vp", AP_FLAG_VALUE, "N", "virtual pipeline stages per rank (interleaving)");
    ap_flags_add(fl, "mbs", AP_FLAG_VALUE, "N", "micro-batch size, sequences");
    ap_flags_add(fl, "gbs", AP_FLAG_VALUE, "N", "global batch size, sequences");
    ap_flags_add(fl, "seq", AP_FLAG_VALUE, "S",
                 "sequence length, tokens (default: the model's training length)");
    ap_flags_add(fl, "zero", AP_FLAG_VALUE, "0-3",
                 "ZeRO stage (megatron: 1 = distributed optimizer, 3 = Megatron-FSDP; fsdp: 3 = "
                 "FULL_SHARD)");
    ap_flags_add(fl, "zero-group", AP_FLAG_VALUE, "G",
                 "shard the ZeRO states within groups of G data-parallel ranks and replicate "
                 "them across the groups (HSDP; megatron: --num-distributed-optimizer-instances "
                 "at ZeRO 1, deepspeed: MiCS at ZeRO 3, fsdp and torchtitan: ZeRO 2/3)");
    ap_flags_add(fl, "recompute", AP_FLAG_VALUE, "R", "activation recomputation: none|selective|full");
    ap_flags_add(fl, "recompute-layers", AP_FLAG_VALUE, "K",
                 "with full recompute: layers per pipeline chunk recomputed (default all)");
    ap_flags_add(fl, "sp", AP_FLAG_BOOL, NULL,
                 "sequence parallelism (the default with --tp > 1 where the trainer has it and "
                 "the sequence divides by tp)");
    ap_flags_add(fl, "no-sp", AP_FLAG_BOOL, NULL, "do not use sequence parallelism");
    ap_flags_add(fl, "overlap", AP_FLAG_BOOL, NULL,
                 "overlap gradient reduction, parameter gathering and (with sp) TP communication "
                 "where the trainer can (the default)");
    ap_flags_add(fl, "no-overlap", AP_FLAG_BOOL, NULL, "do not overlap DP or TP communication");
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
    ap_flags_add(fl, "fp8-params", AP_FLAG_BOOL, NULL,
                 "with --dtype fp8: keep the weights in FP8 and gather them in FP8 (Megatron-LM "
                 "--fp8-param-gather, ZeRO 1 or 3; NeMo's fp8_params)");
    ap_flags_add(fl, "fp8-recipe", AP_FLAG_VALUE, "R",
                 "with --dtype fp8: scaling auto|delayed|tensorwise|mxfp8 (default auto: the "
                 "trainer's, Megatron-LM and Transformer Engine delayed, torchtitan and "
                 "Colossal-AI tensorwise; mxfp8: Megatron-LM on Blackwell; Megatron-LM "
                 "--fp8-recipe)");
    ap_flags_add(fl, "no-flash-attn", AP_FLAG_BOOL, NULL,
                 "attention materialises the s x s score matrix (no FlashAttention)");
    ap_flags_add(fl, "attn-impl", AP_FLAG_VALUE, "IMPL",
                 "attention kernel: auto|unfused|fa1|triton|fa2|fa3|cudnn|sdpa_efficient|flex "
                 "(default auto: the trainer's for the GPU and model, printed by estimate)");
    ap_flags_add(fl, "stage-recompute", AP_FLAG_VALUE, "LIST",
                 "with full recompute: layers recomputed per pipeline chunk, comma separated "
                 "(pp*vp numbers >= 1, -1 = --recompute-layers), as an uneven plan carries them");
    ap_flags_add(fl, "stage-layers", AP_FLAG_VALUE, "LIST",
                 "layers per pipeline chunk, comma separated (pp*vp numbers summing to L)");
    ap_flags_add(fl, "headroom", AP_FLAG_VALUE, "SIZE",
                 "memory kept free on each GPU for a plan to count as fitting (default 2GiB)");
    ap_flags_add(fl, "expandable-segments", AP_FLAG_BOOL, NULL,
                 "the run sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less "
                 "fragmentation in what fits and in nvidia-smi's reading");
    ap_cli_nccl_flag(fl);
}

void ap_cli_nccl_flag(ap_flags *fl) {
    ap_flags_add(fl, "nccl-version", AP_FLAG_VALUE, "V",
                 "the NCCL the run links, e.g. 2.18 (default 2.22 or later); before 2.22 each "
                 "communicator connects its ring and tree when made: more memory per GPU");
}

ap_status ap_cli_nccl_version(ap_flags *fl, int *eager, ap_err *err) {
    const char *v = ap_flags_value(fl, "nccl-version");
    return v ? ap_nccl_version_parse(v, "--nccl-version", eager, err) : AP_OK;
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
        for (int k = 0; k < *n; k++)
            if (counts[k] == (int)v)
                return ap_err_set(err, AP_ERR_INPUT, "--gpus: %lld is listed twice in '%s'",
                                  (long long)v, s);
        counts[(*n)++] = (int)v;
        q += len;
        if (*q == ',' && !*++q) /* "8," ends with an empty count, as ",8" starts with one */
            return ap_err_set(err, AP_ERR_INPUT, "--gpus: '%s' is not a count, a range a..b or a "
                              "list a,b,c", s);
    }
    if (*n == 0) return ap_err_set(err, AP_ERR_INPUT, "--gpus: no count given");
    return AP_OK;
}

/* ---- flags -> request ---------------------------------------------------------------------- */

/* --fix tp=8,pp=4: pins of the search by plan member (tp pp dp cp ep vp mbs zero recompute),
 * each at most once. */
static ap_status parse_fix(const char *s, ap_request *rq, ap_err *err) {
    static const char *const keys[] = {"tp", "pp", "dp", "cp", "ep", "vp", "mbs", "zero",
                                       "recompute"};
    char buf[256], shown[64];
    if (strlen(s) >= sizeof buf) return ap_err_set(err, AP_ERR_INPUT, "--fix: too long");
    strcpy(buf, s);
    if (!*buf || buf[strlen(buf) - 1] == ',' || buf[0] == ',' || strstr(buf, ",,"))
        return ap_err_set(err, AP_ERR_INPUT, "--fix: '%s' has an empty item (write tp=8,pp=4)",
                          ap_text_line(shown, sizeof shown, s, 40));
    int n;
    const ap_field *t = ap_plan_fields(&n);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return ap_err_set(err, AP_ERR_INPUT, "--fix: '%s' is not key=value (e.g. tp=8,pp=4)",
                              ap_text_line(shown, sizeof shown, tok, 40));
        *eq = '\0';
        const ap_field *f = NULL;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!strcmp(tok, keys[k])) f = ap_field_find(t, n, keys[k]);
        if (!f)
            return ap_err_set(err, AP_ERR_INPUT, "--fix: unknown key '%s' (tp, pp, dp, cp, ep, vp, "
                              "mbs, zero, recompute)", ap_text_line(shown, sizeof shown, tok, 40));
        int row = (int)(f - t);
        if (ap_request_row_given(rq->fix_given, row))
            return ap_err_set(err, AP_ERR_INPUT, "--fix: %s is given twice", tok);
        char what[64];
        snprintf(what, sizeof what, "--fix %s", tok);
        ap_status st = ap_field_parse(f, eq + 1, what, &rq->fix, err);
        if (st != AP_OK) return st;
        ap_request_give(&rq->fix_given, row);
    }
    return AP_OK;
}

/* The plan flags the command defines, through the plan's field table. */
static ap_status plan_flags(ap_flags *fl, ap_request *rq, ap_err *err) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++) {
        const ap_field *f = &t[i];
        if (!f->flag || !ap_flags_isset(fl, f->flag)) continue;
        if (f->kind == AP_FT_BOOL) {
            ap_field_put(f, &rq->plan, (f->flags & AP_FIELD_NEGATED) ? 0 : 1);
        } else {
            char what[64];
            snprintf(what, sizeof what, "--%s", f->flag);
            ap_status st = ap_field_parse(f, ap_flags_value(fl, f->flag), what, &rq->plan, err);
            if (st != AP_OK) return st;
        }
        ap_request_give(&rq->plan_given, i);
    }
    /* the two per-chunk lists share the plan's chunk count */
    const char *sl = ap_flags_value(fl, "stage-layers"), *sr = ap_flags_value(fl, "stage-recompute");
    if (sl && sr) {
        int nl = 1, nr = 1;
        for (const char *q = sl; *q; q++) nl += *q == ',';
        for (const char *q = sr; *q; q++) nr += *q == ',';
        if (nl != nr)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-recompute has %d entries and "
                              "--stage-layers %d: one per pipeline chunk each", nr, nl);
    }
    return AP_OK;
}

static ap_status opt_int(ap_flags *fl, const char *name, int64_t lo, int64_t hi, ap_opt_int *o,
                         ap_err *err) {
    if (!ap_flags_isset(fl, name)) return AP_OK;
    o->given = 1;
    return ap_flag_int(fl, name, lo, hi, &o->v, err);
}

static ap_status opt_bw(ap_flags *fl, const char *name, ap_opt_real *o, ap_err *err) {
    if (!ap_flags_isset(fl, name)) return AP_OK;
    o->given = 1;
    return ap_flag_bw(fl, name, &o->v, err);
}

static ap_status opt_bytes(ap_flags *fl, const char *name, ap_opt_real *o, ap_err *err) {
    if (!ap_flags_isset(fl, name)) return AP_OK;
    o->given = 1;
    return ap_flag_bytes(fl, name, &o->v, err);
}

/* The cluster flags: --gpus as one count, or (counts not NULL) a count, sweep or list. */
static ap_status cluster_flags(ap_flags *fl, ap_request *rq, int *counts, int *ncounts,
                               ap_err *err) {
    ap_status st;
    const char *gv = ap_flags_value(fl, "gpus");
    if (counts) *ncounts = 0;
    if (gv && counts) {
        if ((st = ap_parse_gpu_counts(gv, counts, ncounts, err)) != AP_OK) return st;
        rq->gpus.given = 1;
        rq->gpus.v = counts[0];
    } else if ((st = opt_int(fl, "gpus", 1, 1 << 20, &rq->gpus, err)) != AP_OK) {
        return st;
    }
    rq->cluster_file = ap_flags_value(fl, "cluster");
    rq->gpu = ap_flags_value(fl, "gpu");
    if ((st = opt_int(fl, "gpus-per-node", 1, 1024, &rq->gpus_per_node, err)) != AP_OK ||
        (st = opt_int(fl, "nvlink-domain", 1, 1 << 20, &rq->nvlink_domain, err)) != AP_OK ||
        (st = opt_bw(fl, "network-bw", &rq->network_bw, err)) != AP_OK ||
        (st = opt_bw(fl, "link-bw", &rq->link_bw, err)) != AP_OK ||
        (st = opt_bw(fl, "pcie-bw", &rq->pcie_bw, err)) != AP_OK ||
        (st = opt_bytes(fl, "cpu-mem", &rq->cpu_mem, err)) != AP_OK ||
        (st = opt_bytes(fl, "nvme", &rq->nvme, err)) != AP_OK ||
        (st = opt_bw(fl, "nvme-bw", &rq->nvme_bw, err)) != AP_OK ||
        (st = opt_bw(fl, "nvme-read-bw", &rq->nvme_read_bw, err)) != AP_OK ||
        (st = opt_bw(fl, "nvme-write-bw", &rq->nvme_write_bw, err)) != AP_OK)
        return st;
    /* one bandwidth for both directions, or each direction its own: not both */
    if (ap_flags_isset(fl, "nvme-bw") &&
        (ap_flags_isset(fl, "nvme-read-bw") || ap_flags_isset(fl, "nvme-write-bw")))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme-bw sets both directions: give it or "
                          "--nvme-read-bw / --nvme-write-bw, not both");
    rq->allow_cross_node_tp = ap_flags_isset(fl, "allow-cross-node-tp");
    return AP_OK;
}

/* --gemini static|auto, --shard-param-frac F, --offload-device cpu|nvme (the request resolves
 * how they combine with the offload fractions). */
static ap_status hetero_flags(ap_flags *fl, ap_request *rq, ap_err *err) {
    ap_status st;
    const char *g = ap_flags_value(fl, "gemini"), *d = ap_flags_value(fl, "offload-device");
    if (g) {
        ap_gemini_placement pl;
        if ((st = ap_gemini_placement_parse(g, "--gemini", &pl, err)) != AP_OK) return st;
        rq->gemini.given = 1;
        rq->gemini.v = pl;
    }
    if (d) {
        ap_offload_device dev;
        if ((st = ap_offload_device_parse(d, "--offload-device", &dev, err)) != AP_OK) return st;
        rq->offload_device.given = 1;
        rq->offload_device.v = dev;
    }
    if (!ap_flags_isset(fl, "shard-param-frac")) return AP_OK;
    rq->shard_param_frac.given = 1;
    return ap_flag_real(fl, "shard-param-frac", 0, 1, &rq->shard_param_frac.v, err);
}

/* The search flags the command defines. */
static ap_status search_flags(ap_flags *fl, ap_request *rq, ap_err *err) {
    ap_status st;
    const char *fx = ap_flags_value(fl, "fix");
    if (fx && (st = parse_fix(fx, rq, err)) != AP_OK) return st;
    const char *tv = ap_flags_value(fl, "tokens-per-step");
    if (tv) {
        rq->tokens_per_step.given = 1;
        if ((st = ap_parse_count(tv, "--tokens-per-step", &rq->tokens_per_step.v, err)) != AP_OK)
            return st;
    }
    if ((st = opt_int(fl, "top", 1, 1000, &rq->top, err)) != AP_OK) return st;
    if (ap_flags_isset(fl, "tie-margin")) {
        rq->tie_margin.given = 1;
        if ((st = ap_flag_real(fl, "tie-margin", 0, 1, &rq->tie_margin.v, err)) != AP_OK)
            return st;
    }
    if ((st = opt_int(fl, "threads", 1, 1024, &rq->threads, err)) != AP_OK) return st;
    rq->no_prune = ap_flags_isset(fl, "no-prune");
    rq->no_sp = ap_flags_isset(fl, "no-sp");
    rq->no_overlap = ap_flags_isset(fl, "no-overlap");
    const char *sv = ap_flags_value(fl, "solver");
    if (sv && !strcmp(sv, "off")) {
        rq->no_partition = 1;
    } else if (sv) {
        ap_solver s;
        if ((st = ap_solver_parse(sv, &s, err)) != AP_OK) {
            char shown[64]; /* the search's list has "off" too */
            return ap_err_set(err, st, "--solver: '%s' is not one of dp, ilp, auto, off",
                              ap_text_line(shown, sizeof shown, sv, 40));
        }
        rq->solver.given = 1;
        rq->solver.v = s;
    }
    return AP_OK;
}

ap_status ap_cli_request(ap_flags *fl, ap_request *rq, int *counts, int *ncounts, ap_err *err) {
    ap_status st;
    ap_request_init(rq);
    if (fl->npos < 1)
        return ap_err_set(err, AP_ERR_INPUT, "missing MODEL (a config.json, a model directory "
                          "or an autoplan model file)");
    rq->model = fl->pos[0];
    if ((st = cluster_flags(fl, rq, counts, ncounts, err)) != AP_OK) return st;
    if ((st = plan_flags(fl, rq, err)) != AP_OK) return st;
    if ((st = hetero_flags(fl, rq, err)) != AP_OK) return st;
    if ((st = opt_bytes(fl, "headroom", &rq->headroom, err)) != AP_OK) return st;
    rq->expandable_segments = ap_flags_isset(fl, "expandable-segments");
    rq->nccl_version = ap_flags_value(fl, "nccl-version");
    return search_flags(fl, rq, err);
}

/* ---- the kernel profile ------------------------------------------------------------------- */

/* The profile in use, kept for the whole run (estimates borrow it); loaded once per name; and
 * the kernel tables built from it. */
static ap_profile g_profile;
static ap_kernels g_kernels;
static const ap_profile *g_kernels_of;

/* The measured profile `want` (NULL: the newest of gpu) from the database into g_profile;
 * name gets its name ("" when the database has none). */
static ap_status fetch_profile(ap_flags *fl, const char *want, const char *gpu, char name[64],
                               char note[320], ap_err *err) {
    char path[4096];
    ap_status st;
    name[0] = '\0';
    /* set first: without a database path (no HOME) the note is still printed */
    snprintf(note, 320, "kernel tables: published (no measured %s profile in the database)", gpu);
    const char *dbp = ap_flags_get(fl, "db") ? ap_flags_value(fl, "db") : NULL;
    if (!dbp) {
        if ((st = ap_db_default_path(path, sizeof path, 0, err)) != AP_OK) return want ? st : AP_OK;
        dbp = path;
    }
    struct stat sb;
    if (stat(dbp, &sb) != 0) {
        if (want)
            return ap_err_set(err, AP_ERR_INPUT, "--profile %s: no database at %s", want, dbp);
        return AP_OK;
    }
    ap_db *db = NULL;
    ap_err e;
    if ((st = ap_db_open(dbp, 1, &db, &e)) == AP_OK && !want)
        st = ap_db_profile_newest(db, gpu, name, &e);
    if (st == AP_OK && want) snprintf(name, 64, "%s", want);
    if (st == AP_OK && name[0] && strcmp(g_profile.name, name)) {
        ap_profile_free(&g_profile);
        g_kernels_of = NULL;
        st = ap_db_profile_get(db, name, &g_profile, &e);
    }
    ap_db_close(db);
    if (st != AP_OK) {
        name[0] = '\0';
        if (want) return ap_err_set(err, st, "--profile %s: %s", want, e.msg);
        ap_log(AP_LOG_WARN, "%s; estimating with the published tables", e.msg);
        return AP_OK;
    }
    if (name[0] && g_profile.n == 0)
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: no such profile in %s (`autoplan "
                          "profile list` shows them)", name, dbp);
    return AP_OK;
}

ap_status ap_cli_profile(ap_flags *fl, ap_resolved *r, char name[64], char note[320],
                         ap_err *err) {
    const char *want = ap_flags_value(fl, "profile");
    const char *gpu = r->cluster.gpu.name;
    name[0] = '\0';
    if (want && !strcmp(want, "none")) {
        snprintf(note, 320, "kernel tables: published (--profile none)");
        return AP_OK;
    }
    ap_status st = want ? ap_db_profile_check_name(want, "--profile", err) : AP_OK;
    if (st == AP_OK) st = fetch_profile(fl, want, gpu, name, note, err);
    if (st != AP_OK || !name[0]) return st;
    if (strcmp(g_profile.gpu, gpu))
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: it was measured on %s, the cluster's "
                          "GPU is %s", name, g_profile.gpu, gpu);
    snprintf(note, 320, "kernel tables: measured profile '%s' (%zu rows, %s on %.32s) over the "
             "published ones%s", name, g_profile.n,
             g_profile.rows[0].driver_version[0] ? ap_cli_safe(g_profile.rows[0].driver_version)
                                                 : "driver ?",
             g_profile.rows[0].host[0] ? g_profile.rows[0].host : "?",
             want ? "" : " (the newest; --profile none for published only)");
    /* built once: a search estimates thousands of plans (estimate.c rebuilds them for a
     * variant on another GPU) */
    if (strcmp(g_kernels.gpu, gpu) || g_kernels_of != &g_profile) {
        if ((st = ap_kernels_build(&r->cluster.gpu, &g_profile, &g_kernels, err)) != AP_OK)
            return st;
        g_kernels_of = &g_profile;
    }
    r->est.profile = r->search.est.profile = &g_profile;
    r->est.kernels = r->search.est.kernels = &g_kernels;
    return AP_OK;
}

ap_status ap_cli_load_cluster(ap_flags *fl, int need_gpus, ap_cluster *c, ap_err *err) {
    static ap_request rq;
    ap_request_init(&rq);
    ap_status st = cluster_flags(fl, &rq, NULL, NULL, err);
    if (st != AP_OK) return st;
    if (!need_gpus && !rq.gpus.given && !rq.cluster_file) {
        rq.gpus.given = 1;
        rq.gpus.v = 1;
    }
    return ap_request_cluster(&rq, c, err);
}

/* The exit code of the configs asked for (README "Exit status"): a target named in --emit that
 * cannot express the plan is 2 (the others are still written); with "all", 2 only when none
 * could be written. */
int ap_cli_emit_exit(const char *which, const ap_emit_report *rep) {
    int all = which && strstr(which, "all") != NULL, written = 0, refused = 0;
    for (int t = 0; t < AP_EMIT_COUNT; t++) {
        if (!rep->requested[t]) continue;
        if (rep->status[t] == AP_OK) written++;
        else refused++;
    }
    if (!refused) return 0;
    return all && written ? 0 : 2;
}

const char *ap_cli_safe(const char *s) {
    static char bufs[8][512];
    static int next;
    char *b = bufs[next];
    next = (next + 1) % 8;
    return ap_text_line(b, sizeof bufs[0], s ? s : "", 0);
}

int ap_cli_fail(ap_status st, const ap_err *err) {
    /* one line, whatever the user typed: control characters in echoed input become '?' */
    char msg[sizeof err->msg];
    ap_text_line(msg, sizeof msg, err && err->msg[0] ? err->msg : ap_status_str(st), 0);
    fprintf(stderr, "autoplan: %s\n", msg);
    return ap_status_exit_code(st);
}

/* An output file named by `flag`, checked before the work that writes it, so that a path that
 * cannot take it is bad input (exit 2) now, not a failed write (exit 1) after the work: what is
 * there must be a regular file or nothing (files.h), and its directory must exist and take
 * files. */
ap_status ap_cli_check_out_path(const char *flag, const char *path, ap_err *err) {
    if (!*path) return ap_err_set(err, AP_ERR_INPUT, "%s: empty path", flag);
    ap_status st = ap_files_check_target(path, err);
    if (st != AP_OK) {
        ap_err_prefix(err, "%s", flag);
        return st;
    }
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir)
        return ap_err_set(err, AP_ERR_INPUT, "%s: path too long", flag);
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        int e = errno;
        if (e == ENOENT)
            return ap_err_set(err, AP_ERR_INPUT, "%s %s: directory %s does not exist", flag,
                              path, dir);
        return ap_err_set(err, AP_ERR_INPUT, "%s %s: directory %s: %s", flag, path, dir,
                          strerror(e));
    }
    if (!S_ISDIR(sb.st_mode))
        return ap_err_set(err, AP_ERR_INPUT, "%s %s: %s is not a directory", flag, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s %s: cannot write in %s: %s", flag, path, dir,
                          strerror(errno));
    return AP_OK;
}
