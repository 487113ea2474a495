/*
 * cmd_fit.c - `autoplan fit --gpu NAME [--gpus N] [--cpu-mem SIZE] [--nvme SIZE --nvme-bw BW]
 * [--family gpt|llama|llama3|gpt2-colossalai|FILE] [--seq S --mbs B | --tokens-per-step T]`:
 * for each strategy (plain data parallel, ZeRO-2, ZeRO-3, ZeRO-Offload, ZeRO-Infinity on CPU and
 * NVMe, Gemini static and auto, and the best plan of autoplan's search) the largest model of the
 * family that trains, the resource that stops the next size, and the step time and tokens/s.
 * The work is planner/fit.c's; this file reads the flags and prints (table or --json).
 *
 * --json: {"gpu", "gpus", "cpu_mem_bytes", "nvme_bytes", "family", "seq", "mbs",
 *          "tokens_per_step", "strategies": [{"name", "available", "largest_params", "model",
 *          "binding", "step_s", "tokens_per_s", "next_params", "next_model", "detail",
 *          "gpu_peak_bytes", "host_bytes_per_node", "next_gpu_peak_bytes"}],
 *          "global_batch"}; tokens_per_step and global_batch are the batch run (--tokens-per-step
 *          rounded to whole micro-batches per GPU); binding "trainer": the trainer does not offer
 *          the plan (e.g. the recomputation asked)
 * largest_params is 0 (and binding names what stops the smallest size) when nothing trains.
 */
#include "cli.h"
#include "autoplan/fit.h"
#include "autoplan/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add_flags(ap_flags *fl) {
    ap_cli_cluster_flags(fl);
    ap_flags_add(fl, "family", AP_FLAG_VALUE, "F",
                 "model family: gpt (GPT-3 shapes, default), llama, llama3, gpt2-colossalai, or a "
                 "JSON file (docs/heterogeneous.md)");
    ap_flags_add(fl, "seq", AP_FLAG_VALUE, "S", "sequence length, tokens (default: the family's)");
    ap_flags_add(fl, "mbs", AP_FLAG_VALUE, "B", "micro-batch size, sequences (default 1)");
    ap_flags_add(fl, "tokens-per-step", AP_FLAG_VALUE, "T",
                 "global batch in tokens, e.g. 1M (default: one micro-batch per GPU)");
    ap_flags_add(fl, "recompute", AP_FLAG_VALUE, "R",
                 "activation recomputation: none|selective|full (default full; without "
                 "it the best plan's search picks its own, with it searches only that)");
    ap_flags_add(fl, "dtype", AP_FLAG_VALUE, "D", "bf16|fp16 (default bf16 where the GPU has it)");
    ap_flags_add(fl, "headroom", AP_FLAG_VALUE, "SIZE",
                 "GPU memory kept free for a size to count as fitting (default 2GiB; Gemini auto "
                 "keeps its own 10%)");
    ap_flags_add(fl, "expandable-segments", AP_FLAG_BOOL, NULL,
                 "the run sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less "
                 "fragmentation in what fits");
    ap_cli_nccl_flag(fl);
    ap_flags_add(fl, "min-tokens-per-s", AP_FLAG_VALUE, "T",
                 "throughput floor: a size slower than this does not count (binding throughput)");
    ap_flags_add(fl, "strategies", AP_FLAG_VALUE, "LIST",
                 "comma-separated subset: ddp,zero-2,zero-3,zero-offload,zero-infinity-cpu,"
                 "zero-infinity-nvme,gemini-static,gemini-auto,best");
    ap_flags_add(fl, "threads", AP_FLAG_VALUE, "N", "worker threads over the strategies (default: "
                 "one per core; the answer does not depend on it)");
    ap_flags_add(fl, "json", AP_FLAG_BOOL, NULL, "print JSON (schema in cli/cmd_fit.c)");
}

static ap_status parse_strategies(const char *s, unsigned *mask, ap_err *err) {
    *mask = 0;
    char buf[512], shown[64];
    size_t len = strlen(s);
    if (len >= sizeof buf) return ap_err_set(err, AP_ERR_INPUT, "--strategies: too long");
    /* an empty item is a typo (strtok would skip it), as in compare's --strategies */
    if (strstr(s, ",,") || (len && (s[0] == ',' || s[len - 1] == ',')))
        return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%s' has an empty item",
                          ap_text_line(shown, sizeof shown, s, 40));
    memcpy(buf, s, len + 1);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k;
        ap_status st = ap_fit_strategy_parse(tok, &k, err);
        if (st != AP_OK) return st;
        if (*mask & (1u << k))
            return ap_err_set(err, AP_ERR_INPUT, "--strategies: '%s' listed twice",
                              ap_text_line(shown, sizeof shown, tok, 40));
        *mask |= 1u << k;
    }
    if (!*mask) return ap_err_set(err, AP_ERR_INPUT, "--strategies: empty list");
    return AP_OK;
}

/* --profile: the kernel tables every estimate and simulation of the run uses, and the note
   saying which */
static ap_resolved g_prof;
static char g_prof_name[64], g_prof_note[320];

static ap_status read_options(ap_flags *fl, ap_fit_opts *o, ap_family *fam, ap_err *err) {
    ap_status st;
    if ((st = ap_cli_load_cluster(fl, 0, &o->cluster, err)) != AP_OK) return st;
    /* fit's strategies are GPU trainers; the cpu device is autoplan run's */
    if (!strcmp(o->cluster.gpu.vendor, "cpu"))
        return ap_err_set(err, AP_ERR_INPUT, "--gpu %s: fit's trainers do not run on the cpu "
                          "device (it is autoplan run's)", o->cluster.gpu.name);
    memset(&g_prof, 0, sizeof g_prof);
    g_prof.cluster = o->cluster;
    ap_estimate_opts_init(&g_prof.est);
    if ((st = ap_cli_profile(fl, &g_prof, g_prof_name, g_prof_note, err)) != AP_OK) return st;
    o->profile = g_prof.est.profile;
    o->kernels = g_prof.est.kernels;
    const char *f = ap_flags_value(fl, "family");
    /* a file, as ap_family_get tells one from a built-in name */
    if ((st = ap_family_get(f ? f : "gpt", fam, err)) != AP_OK) return st;
    o->family = fam;
    if ((st = ap_flag_int(fl, "seq", 1, 1 << 24, &o->seq, err)) != AP_OK) return st;
    if ((st = ap_flag_int(fl, "mbs", 1, 1 << 20, &o->mbs, err)) != AP_OK) return st;
    int64_t threads = 0;
    if ((st = ap_flag_int(fl, "threads", 1, 1024, &threads, err)) != AP_OK) return st;
    o->threads = (int)threads;
    const char *t = ap_flags_value(fl, "tokens-per-step");
    if (t && (st = ap_parse_count(t, "--tokens-per-step", &o->tokens_per_step, err)) != AP_OK)
        return st;
    if (t && !(o->tokens_per_step >= 1 && o->tokens_per_step <= 1e15))
        return ap_err_set(err, AP_ERR_INPUT, "--tokens-per-step: must be in [1, 1e15]");
    const char *rc = ap_flags_value(fl, "recompute");
    if (rc) {
        o->recompute_set = 1;
        if (!strcmp(rc, "none")) o->recompute = AP_RECOMPUTE_NONE;
        else if (!strcmp(rc, "selective")) o->recompute = AP_RECOMPUTE_SELECTIVE;
        else if (!strcmp(rc, "full")) o->recompute = AP_RECOMPUTE_FULL;
        else
            return ap_err_set(err, AP_ERR_INPUT, "--recompute: '%s' is not one of none, "
                              "selective, full", rc);
    }
    const char *d = ap_flags_value(fl, "dtype");
    if (d) {
        if (ap_dtype_parse(d, &o->dtype) != AP_OK ||
            (o->dtype != AP_DTYPE_BF16 && o->dtype != AP_DTYPE_FP16))
            return ap_err_set(err, AP_ERR_INPUT, "--dtype: '%s' is not bf16 or fp16", d);
        if (o->cluster.gpu.peak_flops[o->dtype] <= 0)
            return ap_err_set(err, AP_ERR_INPUT, "--dtype: %s has no %s tensor cores",
                              o->cluster.gpu.name, d);
        o->dtype_set = 1;
    }
    if ((st = ap_flag_bytes(fl, "headroom", &o->headroom_bytes, err)) != AP_OK) return st;
    o->allocator_expandable = ap_flags_isset(fl, "expandable-segments");
    if ((st = ap_cli_nccl_version(fl, &o->nccl_eager, err)) != AP_OK) return st;
    const char *mt = ap_flags_value(fl, "min-tokens-per-s");
    if (mt && (st = ap_parse_count(mt, "--min-tokens-per-s", &o->min_tokens_per_s, err)) != AP_OK)
        return st;
    const char *sl = ap_flags_value(fl, "strategies");
    if (sl && (st = parse_strategies(sl, &o->strategies, err)) != AP_OK) return st;
    return AP_OK;
}

/* What stops the next size: a resource, or "trainer" when the strategy's trainer does not
 * offer the plan at all (e.g. DeepSpeed and --recompute selective), which no memory would fix */
static const char *binding_name(const ap_fit_entry *e) {
    if (!e->available) return "none";
    if (e->have_next && e->next.not_offered) return "trainer";
    return ap_binding_name(e->binding);
}

/* Parameters in billions, both ends of a range alike: two decimals below 10B, one below 100B */
static char *fmt_params(int64_t n, char *buf, size_t len) {
    double b = (double)n / 1e9;
    snprintf(buf, len, b < 10 ? "%.2fB" : b < 100 ? "%.1fB" : "%.0fB", b);
    return buf;
}

/* Says on stderr how --tokens-per-step became whole sequences (plan's note), so the batch is
 * never changed silently. */
static void batch_note(const ap_fit_opts *o, const ap_fit_result *r) {
    double used = (double)r->gbs * (double)r->seq;
    if (!(o->tokens_per_step > 0) || used == o->tokens_per_step) return;
    fprintf(stderr, "autoplan: fit: global batch %lld sequences x %lld tokens = %.0f tokens "
            "(from --tokens-per-step: %.0f tokens / %lld = %.2f sequences, rounded to a multiple "
            "of %lld, mbs x GPUs)\n", (long long)r->gbs, (long long)r->seq, used,
            o->tokens_per_step, (long long)r->seq, o->tokens_per_step / (double)r->seq,
            (long long)(o->mbs * o->cluster.gpus));
}

static ap_json *to_json(const ap_fit_opts *o, const ap_fit_result *r) {
    ap_json *root = ap_json_new_object();
    if (!root) return NULL;
    ap_json_add_string(root, "gpu", o->cluster.gpu.name);
    ap_json_add_number(root, "gpus", o->cluster.gpus);
    ap_json_add_number(root, "cpu_mem_bytes", o->cluster.cpu_mem_bytes);
    ap_json_add_number(root, "nvme_bytes", o->cluster.nvme_bytes);
    ap_json_add_string(root, "family", o->family->name);
    ap_json_add_number(root, "mbs", (double)o->mbs);
    /* the batch run, not the one asked (rounded to whole micro-batches per GPU: the note) */
    ap_json_add_number(root, "tokens_per_step", (double)r->gbs * (double)r->seq);
    ap_json_add_number(root, "global_batch", (double)r->gbs);
    if (g_prof_name[0]) ap_json_add_string(root, "kernel_profile", g_prof_name);
    ap_json *arr = ap_json_new_array();
    for (int i = 0; i < r->n; i++) {
        const ap_fit_entry *e = &r->e[i];
        ap_json *s = ap_json_new_object();
        ap_json_add_string(s, "name", e->name);
        ap_json_add_bool(s, "available", e->available);
        ap_json_add_number(s, "largest_params", e->found ? (double)e->largest_params : 0);
        ap_json_add_string(s, "model", e->found ? e->model : "");
        ap_json_add_string(s, "binding", binding_name(e));
        ap_json_add_number(s, "step_s", e->found ? e->at.step_s : 0);
        ap_json_add_number(s, "tokens_per_s", e->found ? e->at.tokens_per_s : 0);
        ap_json_add_number(s, "seq", (double)e->at.plan.seq);
        ap_json_add_number(s, "next_params", e->have_next ? (double)e->next_params : 0);
        ap_json_add_string(s, "next_model", e->have_next ? e->next_model : "");
        ap_json_add_string(s, "detail", e->available ? e->next.detail : e->why_unavailable);
        ap_json_add_number(s, "gpu_peak_bytes", e->found ? e->at.gpu_peak_bytes : 0);
        ap_json_add_number(s, "host_bytes_per_node", e->found ? e->at.host_bytes_per_node : 0);
        /* what the next size needs (0: no next size, or a failure that measured no peak) */
        ap_json_add_number(s, "next_gpu_peak_bytes", e->have_next ? e->next.gpu_peak_bytes : 0);
        ap_json_push(arr, s);
    }
    ap_json_add(root, "strategies", arr);
    return root;
}

static void print_table(const ap_fit_opts *o, const ap_fit_result *r) {
    char a[32], b[32], c[32];
    const ap_cluster *cl = &o->cluster;
    printf("fit: %d x %s, host %s per node, PCIe %s", cl->gpus, cl->gpu.name,
           ap_fmt_bytes(cl->cpu_mem_bytes, a, sizeof a),
           ap_fmt_bandwidth(cl->pcie_bytes_per_s, b, sizeof b));
    if (cl->nvme_bytes > 0)
        printf(", NVMe %s at %s", ap_fmt_bytes(cl->nvme_bytes, c, sizeof c),
               ap_fmt_bandwidth(cl->nvme_read_bytes_per_s, a, sizeof a));
    if (g_prof_note[0]) printf("\n%s", g_prof_note);
    char lo[32], hi[32];
    printf("\nfamily %s (%d sizes, %s to %s): %s\n\n", o->family->name, r->nrungs,
           fmt_params(r->smallest_params, lo, sizeof lo),
           fmt_params(r->largest_rung_params, hi, sizeof hi), o->family->cite);
    printf("  %-19s %-24s %9s  %-10s %11s %10s   %s\n", "strategy", "largest model", "params",
           "binding", "step", "tokens/s", "the next size");
    for (int i = 0; i < r->n; i++) {
        const ap_fit_entry *e = &r->e[i];
        if (!e->available) {
            printf("  %-19s %-24s %9s  %-10s %11s %10s   %s\n", e->name, "-", "-", "-", "-", "-",
                   e->why_unavailable);
            continue;
        }
        char step[32], par[32];
        if (e->found) {
            snprintf(par, sizeof par, "%.2fB", e->largest_params / 1e9);
            ap_fmt_seconds(e->at.step_s, step, sizeof step);
        } else {
            snprintf(par, sizeof par, "none");
            snprintf(step, sizeof step, "-");
        }
        char tps[32];
        snprintf(tps, sizeof tps, e->found ? "%.0f" : "-", e->at.tokens_per_s);
        const char *why = e->have_next ? e->next.detail : "the family's largest size trains";
        printf("  %-19s %-24s %9s  %-10s %11s %10s   %s%s%s\n", e->name,
               e->found ? e->model : "nothing trains", par, binding_name(e), step, tps,
               e->have_next ? e->next_model : "", e->have_next ? ": " : "", why);
    }
    printf("\nbinding: what the next size runs out of (gpu, host, nvme, or the --min-tokens-per-s "
           "floor; trainer: it does not offer the plan); docs/heterogeneous.md explains the "
           "simulation\n");
}

int ap_cmd_fit(int argc, char **argv) {
    ap_flags fl = {0};
    add_flags(&fl);
    ap_err err = {{0}};
    int help = 0;
    ap_status st = ap_flags_parse(&fl, argc, argv, 0, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan fit --gpu NAME [--gpus N] [--cpu-mem SIZE] [--nvme SIZE "
                                 "--nvme-bw BW] [--family F] [--seq S --mbs B | --tokens-per-step "
                                 "T] [--json]",
                            "The largest model of a family each strategy can train on these GPUs "
                            "and this host:\nplain data parallel, ZeRO-2/3, ZeRO-Offload, "
                            "ZeRO-Infinity (CPU, NVMe), Colossal-AI Gemini\n(static, auto) and "
                            "the best plan of the search; what binds the next size; step time.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    ap_fit_opts o;
    ap_fit_opts_init(&o);
    ap_family fam;
    if ((st = read_options(&fl, &o, &fam, &err)) != AP_OK) return ap_cli_fail(st, &err);
    ap_fit_result r;
    if ((st = ap_fit(&o, &r, &err)) != AP_OK) return ap_cli_fail(st, &err);
    batch_note(&o, &r);
    if (ap_flags_isset(&fl, "json")) {
        ap_json *j = to_json(&o, &r);
        char *s = j ? ap_json_print(j, 1) : NULL;
        ap_json_free(j);
        if (!s) {
            ap_err_set(&err, AP_ERR_NOMEM, "fit: out of memory");
            return ap_cli_fail(AP_ERR_NOMEM, &err);
        }
        printf("%s\n", s);
        free(s);
        return 0;
    }
    print_table(&o, &r);
    return 0;
}
