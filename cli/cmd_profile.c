/*
 * cmd_profile.c - `autoplan profile SUBCOMMAND`: the kernel profiles the cost model prices
 * operations with. A small dispatcher (one table, `subcommands` below) over the subcommands;
 * this file implements `profile show GPU`, which prints the lookup table in use for a GPU
 * (costmodel/kernels.c) and where each number came from. The profiler's subcommands live in
 * their own files: list/export/import/delete/compare (cmd_profile_store.c), bench
 * (cmd_profile_bench.c), attach/check (cmd_profile_attach.c).
 *
 * What it does not do: measure (profiler/) or store profiles (db/).
 */
#include "cli.h"
#include "autoplan/db.h"
#include "autoplan/kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void line(const char *what, const char *value, const char *source) {
    printf("  %-26s %-22s %s\n", what, value, source && *source ? source : "-");
}

/* One attention row: efficiency at 512 .. 16k for a direction, or nothing if no figure. */
static int attn_row(const ap_kernels *k, ap_attn_impl im, int causal, int d) {
    static const double seqs[6] = {512, 1024, 2048, 4096, 8192, 16384};
    double f[6], b[6];
    int any = 0;
    for (int i = 0; i < 6; i++) {
        ap_kernels_attn_eff(k, im, causal, d, seqs[i], &f[i], &b[i]);
        any |= f[i] > 0;
    }
    if (!any) return 0;
    for (int dir = 0; dir < 2; dir++) {
        printf("  %-15s %-6s %3d  %-3s", ap_attn_impl_name(im), causal ? "causal" : "full", d,
               dir ? "bwd" : "fwd");
        for (int i = 0; i < 6; i++) printf(" %5.3f", dir ? b[i] : f[i]);
        printf("  %s\n", dir ? "" : ap_kernels_attn_source(k, im, causal, d));
    }
    return 1;
}

/* The measured profile `show` overlays: NAME when the argument is a stored profile, else the
 * newest measured profile of the GPU (--profile NAME|none as for estimate). */
static ap_status shown_profile(ap_flags *fl, const char *arg, const ap_gpu **g, ap_profile *p,
                               ap_err *err) {
    ap_profile_init(p);
    const char *want = ap_flags_value(fl, "profile");
    int is_gpu = ap_gpu_find(arg) != NULL;
    if (want && !strcmp(want, "none")) return ap_gpu_lookup(arg, "profile show", g, err);
    ap_db *db = NULL;
    int missing = 0;
    ap_status st = ap_cli_db_open_ro(fl, &db, &missing, err);
    if (st != AP_OK || missing) { /* no database: published tables of a GPU */
        if (!is_gpu || want) {
            if (st == AP_OK) st = AP_ERR_INPUT;
            if (!is_gpu) return ap_gpu_lookup(arg, "profile show", g, err);
            return ap_err_set(err, st, "--profile %s: %s", want, err->msg);
        }
        return ap_gpu_lookup(arg, "profile show", g, err);
    }
    char name[64] = "";
    if (want) snprintf(name, sizeof name, "%s", want);
    else if (!is_gpu) snprintf(name, sizeof name, "%s", arg);
    else st = ap_db_profile_newest(db, ap_gpu_find(arg)->name, name, err);
    if (st == AP_OK && name[0]) st = ap_db_profile_get(db, name, p, err);
    ap_db_close(db);
    if (st != AP_OK) return st;
    if (name[0] && p->n == 0) {
        if (!is_gpu && !want) return ap_gpu_lookup(arg, "profile show", g, err);
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: no such profile (`autoplan profile "
                          "list` shows them)", name);
    }
    if (!is_gpu) return ap_gpu_lookup(p->gpu, "profile show", g, err);
    if ((st = ap_gpu_lookup(arg, "profile show", g, err)) != AP_OK) return st;
    if (p->n && strcmp(p->gpu, (*g)->name))
        return ap_err_set(err, AP_ERR_INPUT, "--profile %s: it was measured on %s, not %s", name,
                          p->gpu, (*g)->name);
    return AP_OK;
}

static int profile_show(int argc, char **argv) {
    ap_flags fl;
    ap_err err = {{0}};
    int help = 0;
    fl.n = 0;
    ap_cli_db_flag(&fl);
    ap_flags_add(&fl, "profile", AP_FLAG_VALUE, "NAME|none",
                 "the measured profile overlaid (default: the GPU's newest in the database)");
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan profile show GPU|NAME [--profile NAME|none] [--db PATH]",
                            "The kernel table the cost model uses for GPU (`autoplan gpus` lists "
                            "them): GEMM ceilings, attention efficiency by implementation, "
                            "sequence length, head dimension and causality, collective bus "
                            "bandwidth, NCCL's latency model, launch cost, and the source of "
                            "every figure. With a measured profile of the GPU in the database "
                            "(or NAME, a stored profile), its rows replace the published ones "
                            "series by series, and each series says which it is.");
        return 0;
    }
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (fl.npos != 1) {
        fprintf(stderr, "autoplan: profile show: expected one GPU name (autoplan gpus lists "
                        "them) or a stored profile's name\n");
        return 2;
    }
    const ap_gpu *g = NULL;
    static ap_profile prof;
    if ((st = shown_profile(&fl, fl.pos[0], &g, &prof, &err)) != AP_OK) {
        ap_profile_free(&prof);
        return ap_cli_fail(st, &err);
    }
    static ap_kernels k;
    st = ap_kernels_build(g, prof.n ? &prof : NULL, &k, &err);
    if (st != AP_OK) {
        ap_profile_free(&prof);
        return ap_cli_fail(st, &err);
    }
    if (prof.n)
        printf("measured profile '%s' (%zu rows, host %s, driver %s) overlaid on the published "
               "rows\n", prof.name, prof.n, prof.rows[0].host[0] ? prof.rows[0].host : "?",
               prof.rows[0].driver_version[0] ? prof.rows[0].driver_version : "?");
    ap_profile_free(&prof);
    ap_calib cal;
    ap_calib_default(g, &cal);
    char buf[96];

    printf("%s: kernel table in use (published rows; a measured profile replaces them series "
           "by series)\n\n", g->name);
    printf("GEMM: efficiency = ceiling x F / (F + gemm_half_flops) x wave quantisation of "
           "128x128 tiles on %d SMs,\n      x the calibration's sustained fraction "
           "gemm_eff_max %.4f (gemm_half_flops %.3g)\n", g->sm_count, cal.gemm_eff_max,
           cal.gemm_half_flops);
    for (int d = 0; d < AP_DTYPE_COUNT; d++) {
        if (g->peak_flops[d] <= 0) continue;
        const ap_kseries *s = &k.gemm[d];
        if (!s->n) {
            snprintf(buf, sizeof buf, "(the 16-bit curve)");
            line(ap_dtype_name((ap_dtype)d), buf, "same tensor-core path, as a fraction of "
                 "this dtype's peak");
            continue;
        }
        snprintf(buf, sizeof buf, "%.3f of %.0f TFLOP/s", s->y[s->n - 1],
                 g->peak_flops[d] / 1e12);
        line(ap_dtype_name((ap_dtype)d), buf, s->source);
        if (s->measured)
            printf("  %-26s measured rates / %.3f, the bench's typical share of the published "
                   "ceiling (costmodel/kernels.c)\n", "", ap_kernels_bench_of_ceiling((ap_dtype)d));
    }

    printf("\nattention: fraction of the 16-bit peak (%.0f TFLOP/s), FlashAttention FLOP count "
           "(causal halves the work);\n  sequence length 512, 1k, 2k, 4k, 8k, 16k (clamped "
           "outside); unfused attention is priced from\n  its GEMMs and softmax traffic "
           "(attn_eff %.4f)\n", (g->peak_flops[AP_DTYPE_BF16] > 0 ? g->peak_flops[AP_DTYPE_BF16]
                                 : g->peak_flops[AP_DTYPE_FP16]) / 1e12, cal.attn_eff);
    printf("  %-15s %-6s %3s  %-3s %5s %5s %5s %5s %5s %5s  source\n", "impl", "mask", "d",
           "dir", "512", "1k", "2k", "4k", "8k", "16k");
    int rows = 0;
    for (int im = AP_ATTN_FA1; im < AP_ATTN_COUNT; im++)
        for (int c = 0; c < 2; c++)
            for (int d = 64; d <= 256; d *= 2) rows += attn_row(&k, (ap_attn_impl)im, c, d);
    if (!rows) printf("  (no published figures)\n");

    printf("\ncollectives: large-message bus bandwidth (nccl-tests convention) as a fraction of "
           "the nominal link,\n  time = NCCL tuning-model latency + bytes / algorithm "
           "bandwidth, fastest of ring/tree x LL/LL128/Simple\n");
    static const char *lv[AP_LEVEL_COUNT] = {"nvlink", "pcie", "network"};
    double nominal[AP_LEVEL_COUNT] = {g->link_bytes_per_s, g->pcie_bytes_per_s,
                                      g->ref_net_bytes_per_s};
    for (int l = 0; l < AP_LEVEL_COUNT; l++) {
        snprintf(buf, sizeof buf, "%.3f (%.0f GB/s%s)", k.coll_eff[l],
                 k.coll_eff[l] * nominal[l] / 1e9, l == AP_LEVEL_NET ? " per GPU" : "");
        line(lv[l], buf, k.coll_source[l]);
    }
    if (k.nvls_busbw > 0) {
        snprintf(buf, sizeof buf, "%.0f GB/s", k.nvls_busbw / 1e9);
        line("nvlink sharp all-reduce", buf, "NVIDIA GTC24 S62129 (NVLink4 SHARP)");
    }
    printf("  NCCL latency (src/graph/tuning.cc), examples: all-gather over 8 ranks in one "
           "node %.1f us,\n  over 1024 ranks on 128 nodes %.2f ms (ring, Simple); all-reduce "
           "1024 ranks tree %.0f us\n",
           ap_nccl_latency_s(AP_COLL_ALLGATHER_OP, 0, 2, 8, 1, 1) * 1e6,
           ap_nccl_latency_s(AP_COLL_ALLGATHER_OP, 0, 2, 1024, 128, 1) * 1e3,
           ap_nccl_latency_s(AP_COLL_ALLREDUCE_OP, 1, 2, 1024, 128, 1) * 1e6);

    printf("\nother\n");
    snprintf(buf, sizeof buf, "%.3f of %.0f GB/s", k.pcie_eff, g->pcie_bytes_per_s / 1e9);
    line("PCIe copies", buf, k.pcie_source);
    if (k.membound_eff > 0) {
        snprintf(buf, sizeof buf, "%.3f of HBM", k.membound_eff);
        line("memory-bound kernels", buf, k.membound_source);
    } else {
        snprintf(buf, sizeof buf, "%.3f of HBM", cal.mem_bound_eff);
        line("memory-bound kernels", buf, "calibration mem_bound_eff (no published row)");
    }
    snprintf(buf, sizeof buf, "%.1f us", k.launch_s * 1e6);
    line("kernel launch (eager)", buf, k.launch_source);
    return 0;
}

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand;

/* The profile subcommands. Others register here, one line each. */
static const subcommand subcommands[] = {
    {"show", profile_show, "the kernel table in use for a GPU and the source of each figure"},
    {"list", ap_cmd_profile_list, "measured profiles in the database, newest first"},
    {"export", ap_cmd_profile_export, "one profile as a JSON file (to plan on another machine)"},
    {"import", ap_cmd_profile_import, "store a profile file (from `profile export`)"},
    {"delete", ap_cmd_profile_delete, "remove one measured profile"},
    {"compare", ap_cmd_profile_compare, "two profiles side by side: time ratios per operation"},
    {"bench", ap_cmd_profile_bench, "measure this machine: GEMM, attention, copies, NCCL, host"},
    {"attach", ap_cmd_profile_attach, "trace any CUDA program: kernels by NVTX range, memory"},
    {"check", ap_cmd_profile_check, "predict a training step, measure it, store the error"},
};
#define NSUB ((int)(sizeof subcommands / sizeof subcommands[0]))

int ap_cmd_profile(int argc, char **argv) {
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") ||
        !strcmp(argv[0], "help")) { /* `help` as `autoplan db help` and `autoplan help` */
        FILE *f = argc < 1 ? stderr : stdout;
        fprintf(f, "usage: autoplan profile SUBCOMMAND [args]\n\nsubcommands:\n");
        for (int i = 0; i < NSUB; i++)
            fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
        return argc < 1 ? 2 : 0;
    }
    for (int i = 0; i < NSUB; i++)
        if (!strcmp(argv[0], subcommands[i].name)) return subcommands[i].run(argc - 1, argv + 1);
    int best = 0, bd = 1 << 30;
    for (int i = 0; i < NSUB; i++) {
        int d = ap_edit_distance(argv[0], subcommands[i].name);
        if (d < bd) {
            bd = d;
            best = i;
        }
    }
    char b[64];
    fprintf(stderr, "autoplan: profile: unknown subcommand '%s' (did you mean '%s'? `autoplan "
                    "profile --help` lists them)\n", ap_cli_shown(argv[0], b, sizeof b),
            subcommands[best].name);
    return 2;
}
