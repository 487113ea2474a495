/*
 * cmd_gpus.c - `autoplan gpus [GPU] [--json]`: the built-in GPU catalog as a table, one GPU in
 * detail (every field and its datasheet source), or either as JSON for scripts.
 *
 * Table columns: name, aliases, memory (GiB), dense bf16 and fp8 peaks (TFLOP/s), memory
 * bandwidth (TB/s), peer link kind and GB/s per direction, PCIe generation and GB/s per
 * direction, and the reference node (GPUs, NICs x Gb/s per NIC).
 */
#include "cli.h"
#include "autoplan/hw.h"
#include "autoplan/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* Speed of one reference NIC in Gb/s: the per-GPU share times GPUs, spread over the NICs. */
static double nic_gbps(const ap_gpu *g) {
    if (g->ref_nics_per_node <= 0) return 0;
    return g->ref_net_bytes_per_s * 8.0 * g->ref_gpus_per_node / g->ref_nics_per_node / 1e9;
}

static int catalog_index(const ap_gpu *g) {
    for (int i = 0; i < ap_gpu_catalog_count(); i++)
        if (ap_gpu_catalog_at(i) == g) return i;
    return -1;
}

static ap_json *gpu_json(const ap_gpu *g) {
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    int ok = 1;
    ok &= ap_json_add_string(o, "name", g->name) == AP_OK;
    ap_json *al = ap_json_new_array();
    const char *a = ap_gpu_aliases(catalog_index(g));
    while (al && *a) {
        const char *c = strchr(a, ',');
        size_t n = c ? (size_t)(c - a) : strlen(a);
        char buf[64];
        if (n >= sizeof buf) n = sizeof buf - 1;
        memcpy(buf, a, n);
        buf[n] = '\0';
        ok &= ap_json_push(al, ap_json_new_string(buf)) == AP_OK;
        a += n + (c ? 1 : 0);
    }
    ok &= ap_json_add(o, "aliases", al) == AP_OK;
    ok &= ap_json_add_string(o, "vendor", g->vendor) == AP_OK;
    ok &= ap_json_add_number(o, "mem_bytes", g->mem_bytes) == AP_OK;
    ap_json *pf = ap_json_new_object();
    for (int d = 0; pf && d < AP_DTYPE_COUNT; d++)
        ok &= ap_json_add_number(pf, ap_dtype_name((ap_dtype)d), g->peak_flops[d]) == AP_OK;
    ok &= ap_json_add(o, "peak_flops", pf) == AP_OK;
    ok &= ap_json_add_number(o, "hbm_bytes_per_s", g->hbm_bytes_per_s) == AP_OK;
    ok &= ap_json_add_number(o, "sm_count", g->sm_count) == AP_OK;
    ok &= ap_json_add_number(o, "compute_capability", g->sm / 10.0) == AP_OK;
    ok &= ap_json_add_string(o, "link", ap_link_name(g->link)) == AP_OK;
    ok &= ap_json_add_number(o, "link_bytes_per_s", g->link_bytes_per_s) == AP_OK;
    ok &= ap_json_add_bool(o, "multicast", g->multicast) == AP_OK;
    ok &= ap_json_add_number(o, "pcie_gen", g->pcie_gen) == AP_OK;
    ok &= ap_json_add_number(o, "pcie_bytes_per_s", g->pcie_bytes_per_s) == AP_OK;
    ap_json *r = ap_json_new_object();
    ok &= ap_json_add_number(r, "gpus_per_node", g->ref_gpus_per_node) == AP_OK;
    ok &= ap_json_add_number(r, "gpus_per_host", ap_gpu_gpus_per_host(g)) == AP_OK;
    ok &= ap_json_add_number(r, "nics_per_node", g->ref_nics_per_node) == AP_OK;
    ok &= ap_json_add_number(r, "net_bytes_per_s_per_gpu", g->ref_net_bytes_per_s) == AP_OK;
    ok &= ap_json_add_number(r, "cpu_mem_bytes", g->ref_cpu_mem_bytes) == AP_OK;
    ok &= ap_json_add_number(r, "gpus_per_pcie_switch", g->ref_gpus_per_pcie_switch) == AP_OK;
    ok &= ap_json_add_number(r, "cpu_cores", g->ref_cpu_cores) == AP_OK;
    ok &= ap_json_add_number(r, "host_mem_bytes_per_s", g->ref_host_mem_bytes_per_s) == AP_OK;
    ok &= ap_json_add(o, "reference_node", r) == AP_OK;
    ok &= ap_json_add_string(o, "source", g->source ? g->source : "") == AP_OK;
    if (!ok) {
        ap_json_free(o);
        return NULL;
    }
    return o;
}

static int print_json(const ap_gpu *only) {
    ap_json *root = ap_json_new_object();
    ap_json *arr = ap_json_new_array();
    int ok = root && arr;
    if (ok) ok = ap_json_add_string(root, "catalog_version", ap_gpu_catalog_version()) == AP_OK;
    for (int i = 0; ok && i < ap_gpu_catalog_count(); i++) {
        const ap_gpu *g = ap_gpu_catalog_at(i);
        if (only && g != only) continue;
        ok = ap_json_push(arr, gpu_json(g)) == AP_OK;
    }
    if (ok) {
        ok = ap_json_add(root, "gpus", arr) == AP_OK;
        arr = NULL;
    }
    char *s = ok ? ap_json_print(root, 1) : NULL;
    ap_json_free(arr);
    ap_json_free(root);
    if (!s) {
        fprintf(stderr, "autoplan: out of memory\n");
        return 1;
    }
    printf("%s\n", s);
    free(s);
    return 0;
}

static void fmt_tflops(double flops, char *buf, size_t n) {
    if (flops > 0) snprintf(buf, n, "%.1f", flops / 1e12);
    else snprintf(buf, n, "-");
}

#define NCOL 9
#define MAXROWS 64

/* One row of cells; columns are sized to their widest cell. Numbers align right. */
static void put_row(char cell[][NCOL][48], int r, const int *w, const int *right) {
    for (int c = 0; c < NCOL; c++) {
        const char *sep = c + 1 < NCOL ? "  " : "\n";
        if (c + 1 == NCOL) printf("%s%s", cell[r][c], sep);
        else if (right[c]) printf("%*s%s", w[c], cell[r][c], sep);
        else printf("%-*s%s", w[c], cell[r][c], sep);
    }
}

static int print_table(void) {
    static char cell[MAXROWS + 2][NCOL][48];
    static const int right[NCOL] = {0, 0, 1, 1, 1, 1, 0, 0, 0};
    static const char *head[2][NCOL] = {
        {"name", "aliases", "mem", "bf16", "fp8", "HBM", "peer link", "PCIe", "reference node"},
        {"", "", "GiB", "TFLOP/s", "TFLOP/s", "TB/s", "GB/s per dir.", "GB/s per dir.",
         "GPUs, NICs x Gb/s"}};
    int n = ap_gpu_catalog_count();
    if (n > MAXROWS) n = MAXROWS;
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < NCOL; c++) snprintf(cell[h][c], sizeof cell[h][c], "%s", head[h][c]);
    for (int i = 0; i < n; i++) {
        const ap_gpu *g = ap_gpu_catalog_at(i);
        char(*row)[48] = cell[i + 2];
        const char *al = ap_gpu_aliases(i);
        snprintf(row[0], 48, "%s", g->name);
        snprintf(row[1], 48, "%s", *al ? al : "-");
        snprintf(row[2], 48, "%.1f", g->mem_bytes / AP_GIB);
        double bf = g->peak_flops[AP_DTYPE_BF16];
        if (bf > 0) fmt_tflops(bf, row[3], 48);
        else /* no bf16: show the fp16 peak, in parentheses */
            snprintf(row[3], 48, "(%.1f)", g->peak_flops[AP_DTYPE_FP16] / 1e12);
        fmt_tflops(g->peak_flops[AP_DTYPE_FP8], row[4], 48);
        snprintf(row[5], 48, "%.2f", g->hbm_bytes_per_s / 1e12);
        if (g->link == AP_LINK_NONE) snprintf(row[6], 48, "none");
        else snprintf(row[6], 48, "%s %.0f", ap_link_name(g->link), g->link_bytes_per_s / 1e9);
        snprintf(row[7], 48, "gen%d %.0f", g->pcie_gen, g->pcie_bytes_per_s / 1e9);
        snprintf(row[8], 48, "%d, %dx %.0f", g->ref_gpus_per_node, g->ref_nics_per_node,
                 nic_gbps(g));
    }
    int w[NCOL] = {0};
    for (int r = 0; r < n + 2; r++)
        for (int c = 0; c < NCOL; c++) {
            int len = (int)strlen(cell[r][c]);
            if (len > w[c]) w[c] = len;
        }
    for (int r = 0; r < n + 2; r++) put_row(cell, r, w, right);
    printf("\nDense peaks without sparsity; (N): no bf16, the fp16 peak is shown. Memory is what "
           "the driver\nreports. Catalog %s; sources: `autoplan gpus NAME` or docs/hardware.md.\n",
           ap_gpu_catalog_version());
    return 0;
}

static int print_detail(const ap_gpu *g) {
    char b1[32], b2[32];
    int i = catalog_index(g);
    printf("%s (%s)\n", g->name, g->vendor);
    printf("  aliases              %s\n", *ap_gpu_aliases(i) ? ap_gpu_aliases(i) : "-");
    printf("  memory               %s (%.0f bytes)\n", ap_fmt_bytes(g->mem_bytes, b1, sizeof b1),
           g->mem_bytes);
    for (int d = 0; d < AP_DTYPE_COUNT; d++) {
        if (g->peak_flops[d] > 0)
            printf("  peak %-15s %.1f TFLOP/s dense\n", ap_dtype_name((ap_dtype)d),
                   g->peak_flops[d] / 1e12);
        else
            printf("  peak %-15s unsupported\n", ap_dtype_name((ap_dtype)d));
    }
    printf("  memory bandwidth     %.0f GB/s\n", g->hbm_bytes_per_s / 1e9);
    printf("  SMs (CUs)            %d\n", g->sm_count);
    if (g->sm > 0) printf("  compute capability   %d.%d\n", g->sm / 10, g->sm % 10);
    else printf("  compute capability   - (not an NVIDIA GPU)\n");
    printf("  peer link            %s, %.2f GB/s per direction\n", ap_link_name(g->link),
           g->link_bytes_per_s / 1e9);
    printf("  multicast            %s\n",
           g->multicast ? "yes (NVLink SHARP: Megatron-LM can overlap TP communication)"
                        : "no (Megatron-LM does not overlap TP communication here)");
    printf("  PCIe                 gen%d, %.0f GB/s per direction\n", g->pcie_gen,
           g->pcie_bytes_per_s / 1e9);
    printf("  reference node       %d GPUs, %d NICs x %.0f Gb/s (%s per GPU), %d GPUs per PCIe "
           "switch\n", g->ref_gpus_per_node, g->ref_nics_per_node, nic_gbps(g),
           ap_fmt_bandwidth(g->ref_net_bytes_per_s, b2, sizeof b2), g->ref_gpus_per_pcie_switch);
    printf("  reference host       %s, %d cores, %.0f GB/s DRAM\n",
           ap_fmt_bytes(g->ref_cpu_mem_bytes, b1, sizeof b1), g->ref_cpu_cores,
           g->ref_host_mem_bytes_per_s / 1e9);
    int host = ap_gpu_gpus_per_host(g);
    if (host < g->ref_gpus_per_node)
        printf("  launcher hosts       %d GPUs each (%d per node): the processes `emit`'s launch "
               "scripts start per host\n", host, g->ref_gpus_per_node / host);
    printf("  source               %s\n", g->source ? g->source : "-");
    return 0;
}

int ap_cmd_gpus(int argc, char **argv) {
    ap_flags fl;
    memset(&fl, 0, sizeof fl);
    ap_flags_add(&fl, "json", AP_FLAG_BOOL, NULL,
                 "print JSON (bytes, bytes/s per direction, FLOP/s) instead of a table");
    int help = 0;
    ap_err err = {{0}};
    ap_status st = ap_flags_parse(&fl, argc, argv, 1, &help, &err);
    if (st != AP_OK) return ap_cli_fail(st, &err);
    if (help) {
        ap_flags_print_help(&fl, "autoplan gpus [GPU] [--json]",
                            "List the built-in GPU catalog: memory, dense peak TFLOP/s, memory "
                            "bandwidth, peer link and PCIe\nbandwidth per direction, and the "
                            "reference node. With GPU (a name or alias, any case), show\nthat "
                            "entry in full with its datasheet sources.");
        return 0;
    }
    const ap_gpu *only = NULL;
    if (fl.npos == 1) {
        st = ap_gpu_lookup(fl.pos[0], "gpus", &only, &err);
        if (st != AP_OK) return ap_cli_fail(st, &err);
    }
    if (ap_flags_isset(&fl, "json")) return print_json(only);
    return only ? print_detail(only) : print_table();
}
