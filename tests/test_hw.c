/*
 * test_hw.c - the GPU catalog, cluster construction, cluster files and `autoplan gpus`.
 *
 * References: datasheet figures are compared exactly (relative tolerance 1e-9) against the
 * numbers printed in the cited datasheets (A100, H100, V100, H200, B200, L40S, MI300X, GA102 and
 * Ada whitepapers); memory sizes against nvidia-smi memory.total in MiB. Fault paths: every bad
 * cluster file must return AP_ERR_INPUT with a message naming the file and the field.
 */
#include "testlib.h"

#include "autoplan/estimate.h"
#include "autoplan/hw.h"
#include "autoplan/json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB 1048576.0
#define GIB 1073741824.0
#define TIB 1099511627776.0
#define T 1e12
#define EXACT 1e-9

static const ap_gpu *must(const char *name) {
    const ap_gpu *g = ap_gpu_find(name);
    if (!g) {
        fprintf(stderr, "catalog has no '%s'\n", name);
        exit(1);
    }
    return g;
}

static void test_catalog_sane(void) {
    static const char *required[] = {"v100-sxm2-16g", "v100-sxm2-32g", "a100-sxm4-40g",
                                     "a100-sxm4-80g", "a100-pcie-80g", "a800-sxm4-80g",
                                     "h100-sxm",      "h100-pcie",     "h100-96g-500w",
                                     "h800-sxm",      "h200",          "b200",
                                     "gb200",         "l40s",          "rtx-2060",      "rtx-3090",
                                     "rtx-4090",      "mi300x",        "cpu"};
    int n = ap_gpu_catalog_count();
    CHECK_INT(n, (int)(sizeof required / sizeof required[0]));
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        const ap_gpu *g = ap_gpu_find(required[i]);
        CHECK(g != NULL);
        if (g) CHECK_STR(g->name, required[i]);
    }
    for (int i = 0; i < n; i++) {
        const ap_gpu *g = ap_gpu_catalog_at(i);
        /* names: lower case, unique, found by themselves */
        for (const char *p = g->name; *p; p++) CHECK(!isupper((unsigned char)*p));
        for (int j = 0; j < i; j++) CHECK(strcmp(g->name, ap_gpu_catalog_at(j)->name) != 0);
        CHECK(ap_gpu_find(g->name) == g);
        if (!strcmp(g->vendor, "cpu")) {
            /* the runtime's rank (docs/runtime.md): fp32 only, shared-memory peers, no PCIe */
            CHECK(g->peak_flops[AP_DTYPE_FP32] > 0);
            CHECK(g->peak_flops[AP_DTYPE_BF16] == 0 && g->peak_flops[AP_DTYPE_FP16] == 0);
            CHECK(g->link == AP_LINK_SHM && g->link_bytes_per_s > 0);
            CHECK(g->hbm_bytes_per_s > 1e9 && g->sm_count == 1);
            ap_cluster c;
            ap_err err = {{0}};
            ap_cluster_from_gpu(g, 8, &c);
            CHECK_INT(ap_cluster_validate(&c, g->name, &err), AP_OK);
            continue;
        }
        CHECK(!strcmp(g->vendor, "nvidia") || !strcmp(g->vendor, "amd"));
        /* memory between 4 GiB and 256 GiB, and at most the nominal marketing size */
        CHECK(g->mem_bytes > 4 * GIB && g->mem_bytes < 256 * GIB);
        CHECK(g->peak_flops[AP_DTYPE_BF16] > 0 || g->peak_flops[AP_DTYPE_FP16] > 0);
        CHECK(g->peak_flops[AP_DTYPE_FP32] > 0);
        /* tensor-core half precision is never slower than plain fp32 */
        CHECK(g->peak_flops[AP_DTYPE_FP16] >= g->peak_flops[AP_DTYPE_FP32]);
        /* fp8 where present is twice bf16 on every part in the catalog; 2% because the L40S
         * datasheet's dense bf16 (362.05) is 1.2% below half its fp8 (733) */
        if (g->peak_flops[AP_DTYPE_FP8] > 0)
            CHECK_NEAR(g->peak_flops[AP_DTYPE_FP8], 2 * g->peak_flops[AP_DTYPE_BF16], 0.02);
        for (int d = 0; d < AP_DTYPE_COUNT; d++) CHECK(g->peak_flops[d] >= 0);
        CHECK(g->hbm_bytes_per_s > 100e9 && g->hbm_bytes_per_s < 20e12);
        CHECK(g->sm_count > 0);
        CHECK((g->link == AP_LINK_NONE) == (g->link_bytes_per_s == 0));
        CHECK(g->link_bytes_per_s >= 0);
        CHECK(g->pcie_gen >= 3 && g->pcie_gen <= 6);
        /* x16 nominal per direction: 16 GB/s at gen3, doubling per generation; GB200's host
         * link is NVLink-C2C instead, 450 GB/s a direction shared by its Grace's two GPUs */
        if (strcmp(g->name, "gb200"))
            CHECK_NEAR(g->pcie_bytes_per_s, 16e9 * (1 << (g->pcie_gen - 3)), EXACT);
        else
            CHECK_NEAR(g->pcie_bytes_per_s, 450e9, EXACT);
        CHECK(g->ref_gpus_per_node >= 1);
        CHECK(g->ref_nics_per_node >= 1);
        CHECK(g->ref_net_bytes_per_s > 0);
        CHECK(g->ref_cpu_mem_bytes >= 16 * GIB);
        CHECK(g->ref_gpus_per_pcie_switch >= 1 &&
              g->ref_gpus_per_pcie_switch <= g->ref_gpus_per_node);
        CHECK(g->ref_cpu_cores >= 1);
        CHECK(g->ref_host_mem_bytes_per_s > 10e9);
        CHECK(g->source && strlen(g->source) > 40);
        /* its reference cluster is valid */
        ap_cluster c;
        ap_err err = {{0}};
        ap_cluster_from_gpu(g, g->ref_gpus_per_node * 4, &c);
        ap_status st = ap_cluster_validate(&c, g->name, &err);
        CHECK_INT(st, AP_OK);
        if (st != AP_OK) fprintf(stderr, "  %s\n", err.msg);
    }
    CHECK(ap_gpu_catalog_at(-1) == NULL);
    CHECK(ap_gpu_catalog_at(n) == NULL);
    CHECK_STR(ap_gpu_catalog_version(), "catalog-2026.11-1");
}

static void test_aliases_and_lookup(void) {
    CHECK_STR(must("a100-80g")->name, "a100-sxm4-80g");
    CHECK_STR(must("a100")->name, "a100-sxm4-80g");
    CHECK_STR(must("a100-40g")->name, "a100-sxm4-40g");
    CHECK_STR(must("h100")->name, "h100-sxm");
    CHECK_STR(must("v100")->name, "v100-sxm2-32g");
    CHECK_STR(must("v100-16g")->name, "v100-sxm2-16g");
    CHECK_STR(must("a100-pcie")->name, "a100-pcie-80g");
    /* case-insensitive, '_' for '-', "GB" suffix */
    CHECK_STR(must("H100-SXM")->name, "h100-sxm");
    CHECK_STR(must("A100-SXM4-80GB")->name, "a100-sxm4-80g");
    CHECK_STR(must("A100_80GB")->name, "a100-sxm4-80g");
    CHECK_STR(must("RTX-4090")->name, "rtx-4090");
    CHECK_STR(must("MI300X")->name, "mi300x");
    /* names as drivers print them: vendor and brand words first */
    CHECK_STR(must("NVIDIA A100-SXM4-80GB")->name, "a100-sxm4-80g");
    CHECK_STR(must("NVIDIA A800-SXM4-80GB")->name, "a800-sxm4-80g");
    CHECK_STR(must("NVIDIA H800")->name, "h800-sxm");
    CHECK_STR(must("NVIDIA GeForce RTX 4090")->name, "rtx-4090");
    CHECK_STR(must("Tesla V100-SXM2-32GB")->name, "v100-sxm2-32g");
    CHECK_STR(must("AMD Instinct MI300X")->name, "mi300x");
    CHECK_STR(must("NVIDIA H100 80GB HBM3")->name, "h100-sxm");
    CHECK_STR(must("NVIDIA A100 80GB PCIe")->name, "a100-pcie-80g");
    /* as papers write them */
    CHECK_STR(must("H100-SXM5-80GB")->name, "h100-sxm");
    CHECK(ap_gpu_find("nvidia") == NULL);
    CHECK(ap_gpu_find("nvidia-") == NULL);
    CHECK(ap_gpu_find("NVIDIA H300") == NULL);
    CHECK_STR(ap_gpu_closest("NVIDIA H80"), "h800-sxm");
    CHECK(ap_gpu_find("a100-sxm4-80") == NULL);
    CHECK(ap_gpu_find("h300") == NULL);
    CHECK(ap_gpu_find("") == NULL);
    CHECK(ap_gpu_find(NULL) == NULL);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK(ap_gpu_find(longname) == NULL);
    CHECK(ap_gpu_closest(longname) != NULL);

    /* every alias listed for entry i resolves to entry i */
    int n_alias = 0;
    for (int i = 0; i < ap_gpu_catalog_count(); i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", ap_gpu_aliases(i));
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            CHECK(ap_gpu_find(tok) == ap_gpu_catalog_at(i));
            n_alias++;
        }
    }
    CHECK_INT(n_alias, 35); /* every alias in catalog.c's table is attached to its GPU */
    CHECK_CONTAINS(ap_gpu_aliases(3), "a100-80g"); /* a100-sxm4-80g */
    CHECK_STR(ap_gpu_aliases(-1), "");

    /* did-you-mean */
    CHECK_STR(ap_gpu_closest("h100-sx"), "h100-sxm");
    CHECK_STR(ap_gpu_closest("a100-sxm4-80"), "a100-sxm4-80g");
    CHECK_STR(ap_gpu_closest("rtx4080"), "rtx-4090");
    CHECK_STR(ap_gpu_closest("mi300"), "mi300x");
    const ap_gpu *g = NULL;
    ap_err err = {{0}};
    CHECK_INT(ap_gpu_lookup("h100-sxn", "--gpu", &g, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--gpu: unknown GPU 'h100-sxn'");
    CHECK_CONTAINS(err.msg, "'h100-sxm'");
    CHECK_CONTAINS(err.msg, "autoplan gpus");
    CHECK_INT(ap_gpu_lookup("h100", "--gpu", &g, &err), AP_OK);
    CHECK(g == ap_gpu_find("h100-sxm"));
}

/* Numbers as printed in the cited datasheets and whitepapers. */
static void test_datasheet_numbers(void) {
    const ap_gpu *a100 = must("a100-sxm4-80g"), *a40 = must("a100-sxm4-40g");
    const ap_gpu *h100 = must("h100-sxm"), *v100 = must("v100-sxm2-32g");
    /* A100 datasheet: 312 TFLOPS bf16/fp16, 156 tf32, 19.5 fp32, no fp8 */
    CHECK_NEAR(a100->peak_flops[AP_DTYPE_BF16], 312 * T, EXACT);
    CHECK_NEAR(a100->peak_flops[AP_DTYPE_FP16], 312 * T, EXACT);
    CHECK_NEAR(a100->peak_flops[AP_DTYPE_TF32], 156 * T, EXACT);
    CHECK_NEAR(a100->peak_flops[AP_DTYPE_FP32], 19.5 * T, EXACT);
    CHECK(a100->peak_flops[AP_DTYPE_FP8] == 0);
    CHECK_NEAR(a100->hbm_bytes_per_s, 2039e9, EXACT);
    CHECK_NEAR(a40->hbm_bytes_per_s, 1555e9, EXACT);
    CHECK_NEAR(a100->mem_bytes, 81920 * MIB, EXACT);
    CHECK_NEAR(a40->mem_bytes, 40536 * MIB, EXACT);
    CHECK_INT(a100->sm_count, 108);
    CHECK_INT(a100->link, AP_LINK_NVLINK);
    CHECK_NEAR(a100->link_bytes_per_s, 300e9, EXACT); /* 600 GB/s bidirectional */
    CHECK_NEAR(a100->pcie_bytes_per_s, 32e9, EXACT);
    /* DGX A100: 8x 200 Gb/s HDR -> 25 GB/s per GPU; 2 TB in the 640 GB system */
    CHECK_INT(a100->ref_gpus_per_node, 8);
    CHECK_INT(a100->ref_nics_per_node, 8);
    CHECK_NEAR(a100->ref_net_bytes_per_s, 25e9, EXACT);
    CHECK_NEAR(a100->ref_cpu_mem_bytes, 2 * TIB, EXACT);
    CHECK_NEAR(a40->ref_cpu_mem_bytes, 1 * TIB, EXACT);
    CHECK_INT(a100->ref_gpus_per_pcie_switch, 2);
    CHECK_INT(a100->ref_cpu_cores, 128);
    CHECK_NEAR(a100->ref_host_mem_bytes_per_s, 409.6e9, EXACT); /* 2 x 8 ch DDR4-3200 */
    /* H100 SXM whitepaper: 989.4 bf16 dense, 1978.9 fp8, 494.7 tf32; 3.35 TB/s; NVLink4 */
    CHECK_NEAR(h100->peak_flops[AP_DTYPE_BF16], 989.4 * T, EXACT);
    CHECK_NEAR(h100->peak_flops[AP_DTYPE_FP8], 1978.9 * T, EXACT);
    CHECK_NEAR(h100->peak_flops[AP_DTYPE_TF32], 494.7 * T, EXACT);
    CHECK_NEAR(h100->hbm_bytes_per_s, 3.35e12, EXACT);
    CHECK_NEAR(h100->mem_bytes, 81559 * MIB, EXACT);
    CHECK_INT(h100->sm_count, 132);
    CHECK_NEAR(h100->link_bytes_per_s, 450e9, EXACT);
    CHECK_INT(h100->pcie_gen, 5);
    CHECK_NEAR(h100->ref_net_bytes_per_s, 50e9, EXACT); /* DGX H100 8x 400 Gb/s */
    CHECK_NEAR(h100->ref_cpu_mem_bytes, 2 * TIB, EXACT);
    /* H100 PCIe: datasheet 1,513 bf16 "with sparsity" -> 756.5 dense; NVLink bridge pairs */
    CHECK_NEAR(must("h100-pcie")->peak_flops[AP_DTYPE_BF16], 756.5 * T, EXACT);
    CHECK_INT(must("h100-pcie")->link, AP_LINK_NVLINK_BRIDGE);
    /* torchtitan's Grand Teton H100: 96 GB HBM2e at 2.4 TB/s; peak the midpoint of the H100
     * SXM5 (989.4) and NVL (835.5) dense BF16 figures the torchtitan paper brackets it by */
    {
        const ap_gpu *gt = must("h100-grand-teton");
        CHECK_STR(gt->name, "h100-96g-500w");
        CHECK_NEAR(gt->peak_flops[AP_DTYPE_BF16], (989.4 + 835.5) / 2 * T, EXACT);
        CHECK_NEAR(gt->peak_flops[AP_DTYPE_FP8], 2 * gt->peak_flops[AP_DTYPE_BF16], EXACT);
        CHECK_NEAR(gt->hbm_bytes_per_s, 2.4e12, EXACT);
        CHECK_NEAR(gt->mem_bytes, (6 * 16384 - (81920 - 81559)) * MIB, EXACT);
        CHECK_INT(gt->sm_count, h100->sm_count);
        CHECK_NEAR(gt->ref_net_bytes_per_s, 50e9, EXACT); /* 400 Gb/s per GPU */
    }
    /* V100: 125 tensor TFLOPS fp16, no bf16/tf32/fp8; NVLink2 150 GB/s per direction */
    CHECK_NEAR(v100->peak_flops[AP_DTYPE_FP16], 125 * T, EXACT);
    CHECK(v100->peak_flops[AP_DTYPE_BF16] == 0);
    CHECK(v100->peak_flops[AP_DTYPE_TF32] == 0);
    CHECK(v100->peak_flops[AP_DTYPE_FP8] == 0);
    CHECK_NEAR(v100->link_bytes_per_s, 150e9, EXACT);
    CHECK_NEAR(v100->hbm_bytes_per_s, 900e9, EXACT);
    CHECK_NEAR(v100->ref_net_bytes_per_s, 6.25e9, EXACT); /* DGX-1: 4x EDR per 8 GPUs */
    CHECK_NEAR(must("v100-sxm2-16g")->mem_bytes, 16160 * MIB, EXACT);
    /* H200: 141 GB HBM3e at 4.8 TB/s, same compute as H100 SXM */
    CHECK_NEAR(must("h200")->mem_bytes, 143771 * MIB, EXACT);
    CHECK_NEAR(must("h200")->hbm_bytes_per_s, 4.8e12, EXACT);
    CHECK_NEAR(must("h200")->peak_flops[AP_DTYPE_BF16], 989.4 * T, EXACT);
    /* B200: HGX B200 36 PFLOPS bf16 with sparsity per 8 GPUs -> 2.25 PFLOPS dense per GPU */
    CHECK_NEAR(must("b200")->peak_flops[AP_DTYPE_BF16], 2250 * T, EXACT);
    CHECK_NEAR(must("b200")->link_bytes_per_s, 900e9, EXACT);
    CHECK_INT(must("b200")->sm_count, 148);
    /* L40S: 362.05 bf16, 733 fp8 dense, 864 GB/s, no NVLink */
    CHECK_NEAR(must("l40s")->peak_flops[AP_DTYPE_BF16], 362.05 * T, EXACT);
    CHECK_NEAR(must("l40s")->hbm_bytes_per_s, 864e9, EXACT);
    CHECK(must("l40s")->link != AP_LINK_NVLINK);
    /* GeForce: fp32-accumulate tensor figures */
    CHECK_NEAR(must("rtx-3090")->peak_flops[AP_DTYPE_BF16], 71 * T, EXACT);
    CHECK_INT(must("rtx-3090")->link, AP_LINK_NVLINK_BRIDGE);
    CHECK_NEAR(must("rtx-4090")->peak_flops[AP_DTYPE_BF16], 165.2 * T, EXACT);
    CHECK_NEAR(must("rtx-4090")->peak_flops[AP_DTYPE_FP8], 330.3 * T, EXACT);
    CHECK_INT(must("rtx-4090")->link, AP_LINK_NONE);
    CHECK_NEAR(must("rtx-4090")->mem_bytes, 24564 * MIB, EXACT);
    CHECK(must("rtx-2060")->peak_flops[AP_DTYPE_BF16] == 0);
    CHECK(must("rtx-2060")->peak_flops[AP_DTYPE_FP8] == 0);
    CHECK_INT(must("rtx-2060")->pcie_gen, 3);
    /* MI300X: 1307.4 bf16 dense, 5.3 TB/s, 304 CUs, Infinity Fabric */
    CHECK_NEAR(must("mi300x")->peak_flops[AP_DTYPE_BF16], 1307.4 * T, EXACT);
    CHECK_NEAR(must("mi300x")->hbm_bytes_per_s, 5.3e12, EXACT);
    CHECK_INT(must("mi300x")->sm_count, 304);
    CHECK_INT(must("mi300x")->link, AP_LINK_XGMI);
    CHECK_STR(must("mi300x")->vendor, "amd");
    /* compute capabilities (developer.nvidia.com/cuda-gpus); 0 off NVIDIA */
    static const struct { const char *name; int sm; } cc[] = {
        {"v100-sxm2-16g", 70}, {"v100-sxm2-32g", 70}, {"rtx-2060", 75},     {"a100-sxm4-40g", 80},
        {"a100-sxm4-80g", 80}, {"a100-pcie-80g", 80}, {"a800-sxm4-80g", 80}, {"rtx-3090", 86},
        {"l40s", 89},          {"rtx-4090", 89},      {"h100-sxm", 90},      {"h100-pcie", 90},
        {"h100-96g-500w", 90}, {"h800-sxm", 90},      {"h200", 90},          {"b200", 100},
        {"gb200", 100},        {"mi300x", 0},         {"cpu", 0},
    };
    CHECK_INT((int)(sizeof cc / sizeof cc[0]), ap_gpu_catalog_count());
    for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) CHECK_INT(must(cc[i].name)->sm, cc[i].sm);
    /* the export variants: their dies' numbers, NVLink "400 GB/s" bidirectional */
    const ap_gpu *a800 = must("a800"), *h800 = must("h800");
    for (int d = 0; d < AP_DTYPE_COUNT; d++) {
        CHECK_NEAR(a800->peak_flops[d], a100->peak_flops[d], EXACT);
        CHECK_NEAR(h800->peak_flops[d], h100->peak_flops[d], EXACT);
    }
    CHECK_NEAR(a800->hbm_bytes_per_s, a100->hbm_bytes_per_s, EXACT);
    CHECK_NEAR(h800->hbm_bytes_per_s, h100->hbm_bytes_per_s, EXACT);
    CHECK_NEAR(a800->link_bytes_per_s, 200e9, EXACT);
    CHECK_NEAR(h800->link_bytes_per_s, 200e9, EXACT);
    CHECK_NEAR(h800->ref_net_bytes_per_s, 50e9, EXACT); /* DeepSeek-V3: IB 50 GB/s per GPU */
    CHECK_INT(h800->multicast, 0); /* not published */
}

static void test_names(void) {
    ap_dtype d;
    for (int i = 0; i < AP_DTYPE_COUNT; i++) {
        CHECK_INT(ap_dtype_parse(ap_dtype_name((ap_dtype)i), &d), AP_OK);
        CHECK_INT(d, i);
    }
    CHECK_STR(ap_dtype_name(AP_DTYPE_BF16), "bf16");
    CHECK_STR(ap_dtype_name(AP_DTYPE_COUNT), "unknown");
    CHECK_INT(ap_dtype_parse("BF16", &d), AP_OK);
    CHECK_INT(d, AP_DTYPE_BF16);
    CHECK_INT(ap_dtype_parse("bfloat16", &d), AP_OK);
    CHECK_INT(ap_dtype_parse("int8", &d), AP_ERR_INPUT);
    CHECK_INT(ap_dtype_parse("", &d), AP_ERR_INPUT);
    CHECK_INT(ap_dtype_parse(NULL, &d), AP_ERR_INPUT);
    CHECK_STR(ap_link_name(AP_LINK_NONE), "none");
    CHECK_STR(ap_link_name(AP_LINK_PCIE), "pcie");
    CHECK_STR(ap_link_name(AP_LINK_NVLINK), "nvlink");
    CHECK_STR(ap_link_name(AP_LINK_NVLINK_BRIDGE), "nvlink-bridge");
    CHECK_STR(ap_link_name(AP_LINK_XGMI), "xgmi");
}

static void test_from_gpu(void) {
    ap_cluster c;
    ap_err err = {{0}};
    ap_cluster_from_gpu(must("a100-sxm4-80g"), 64, &c);
    CHECK_INT(c.gpus, 64);
    CHECK_INT(c.gpus_per_node, 8);
    CHECK_INT(c.nvlink_domain, 8);
    CHECK_NEAR(c.link_bytes_per_s, 300e9, EXACT);
    CHECK_NEAR(c.net_bytes_per_s, 25e9, EXACT);
    CHECK_NEAR(c.pcie_bytes_per_s, 32e9, EXACT);
    CHECK_INT(c.gpus_per_pcie_switch, 2);
    CHECK_NEAR(c.cpu_mem_bytes, 2 * TIB, EXACT);
    CHECK_INT(c.cpu_cores, 128);
    CHECK_STR(c.gpu.name, "a100-sxm4-80g");
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);

    /* fewer GPUs than a node: part of one node */
    ap_cluster_from_gpu(must("h100"), 4, &c);
    CHECK_INT(c.gpus_per_node, 4);
    CHECK_INT(c.nvlink_domain, 4);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);
    ap_cluster_from_gpu(must("a100"), 1, &c);
    CHECK_INT(c.gpus_per_node, 1);
    CHECK_INT(c.nvlink_domain, 1);
    CHECK_INT(c.gpus_per_pcie_switch, 1);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);

    /* bridged pairs; no peer link */
    ap_cluster_from_gpu(must("rtx-3090"), 8, &c);
    CHECK_INT(c.gpus_per_node, 2);
    CHECK_INT(c.nvlink_domain, 2);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);
    ap_cluster_from_gpu(must("a100-pcie-80g"), 16, &c);
    CHECK_INT(c.gpus_per_node, 8);
    CHECK_INT(c.nvlink_domain, 2);
    /* no peer link: the node is the domain, its traffic goes through host PCIe */
    ap_cluster_from_gpu(must("rtx-4090"), 4, &c);
    CHECK_INT(c.nvlink_domain, 4);
    CHECK(c.link_bytes_per_s == 0);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);

    /* 12 GPUs do not fill 8-GPU nodes */
    ap_cluster_from_gpu(must("a100"), 12, &c);
    CHECK_INT(ap_cluster_validate(&c, "flags", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "flags: field 'gpus'");
    CHECK_CONTAINS(err.msg, "multiple of 8");
    /* gpus 0 and a missing GPU */
    ap_cluster_from_gpu(must("a100"), 0, &c);
    CHECK_INT(ap_cluster_validate(&c, "flags", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 'gpus'");
    ap_cluster_from_gpu(NULL, 8, &c);
    CHECK_INT(ap_cluster_validate(&c, "flags", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 'gpu'");

    /* changing the node shape resets the domain to the GPU's default */
    ap_cluster_from_gpu(must("rtx-4090"), 8, &c);
    ap_cluster_set_gpus_per_node(&c, 8);
    CHECK_INT(c.gpus_per_node, 8);
    CHECK_INT(c.nvlink_domain, 8);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);
    ap_cluster_from_gpu(must("rtx-3090"), 8, &c);
    ap_cluster_set_gpus_per_node(&c, 8);
    CHECK_INT(c.nvlink_domain, 2); /* bridged pairs */
    ap_cluster_set_gpus_per_node(&c, 1);
    CHECK_INT(c.nvlink_domain, 1);
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_OK);
    ap_cluster_from_gpu(must("h100"), 16, &c);
    ap_cluster_set_gpus_per_node(&c, 4);
    CHECK_INT(c.nvlink_domain, 4);
    CHECK_INT(c.gpus_per_pcie_switch, 1);
    ap_cluster_set_gpus_per_node(&c, 32);
    CHECK_INT(c.gpus_per_node, 16); /* clamped to the 16 GPUs there are */

    /* hand-made inconsistencies */
    ap_cluster_from_gpu(must("h100"), 16, &c);
    c.nvlink_domain = 3;
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "'nvlink_domain'");
    ap_cluster_from_gpu(must("h100"), 16, &c);
    c.net_bytes_per_s = 0;
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "'network_bw'");
    ap_cluster_from_gpu(must("h100"), 16, &c);
    c.gpus_per_pcie_switch = 9;
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "'gpus_per_pcie_switch'");
    ap_cluster_from_gpu(must("h100"), 16, &c);
    c.gpu.mem_bytes = NAN;
    CHECK_INT(ap_cluster_validate(&c, "x", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "'gpu_mem'");
}

/* Property: for every GPU and every count 1..64, the reference-shaped cluster validates exactly
 * when the count fills whole nodes or fits in one, and its shape invariants hold. */
static void test_from_gpu_all(void) {
    for (int i = 0; i < ap_gpu_catalog_count(); i++) {
        const ap_gpu *g = ap_gpu_catalog_at(i);
        for (int n = 1; n <= 64; n++) {
            ap_cluster c;
            ap_err err = {{0}};
            ap_cluster_from_gpu(g, n, &c);
            int ref = g->ref_gpus_per_node;
            int want_ok = n <= ref || n % ref == 0;
            ap_status st = ap_cluster_validate(&c, "p", &err);
            if ((st == AP_OK) != want_ok)
                fprintf(stderr, "  %s x%d: %s\n", g->name, n, err.msg);
            CHECK_INT(st == AP_OK, want_ok);
            if (!want_ok) {
                CHECK_CONTAINS(err.msg, "field 'gpus'");
                continue;
            }
            CHECK(c.gpus_per_node <= n && c.gpus_per_node <= ref);
            CHECK(c.gpus_per_node % c.nvlink_domain == 0);
            CHECK(c.gpus_per_pcie_switch >= 1 && c.gpus_per_pcie_switch <= c.gpus_per_node);
            if (g->link == AP_LINK_NVLINK_BRIDGE) CHECK(c.nvlink_domain <= 2);
            else CHECK_INT(c.nvlink_domain, c.gpus_per_node);
        }
    }
}

static void test_fingerprint(void) {
    ap_cluster a, b;
    ap_cluster_from_gpu(must("a100"), 64, &a);
    ap_cluster_from_gpu(must("a100-sxm4-80g"), 64, &b);
    CHECK(ap_cluster_fingerprint(&a) == ap_cluster_fingerprint(&b));
    snprintf(b.name, sizeof b.name, "renamed");
    CHECK(ap_cluster_fingerprint(&a) == ap_cluster_fingerprint(&b)); /* name is cosmetic */
    b.gpus = 128;
    CHECK(ap_cluster_fingerprint(&a) != ap_cluster_fingerprint(&b));
    ap_cluster_from_gpu(must("a100"), 64, &b);
    b.net_bytes_per_s *= 2;
    CHECK(ap_cluster_fingerprint(&a) != ap_cluster_fingerprint(&b));
    ap_cluster_from_gpu(must("a100-sxm4-40g"), 64, &b);
    CHECK(ap_cluster_fingerprint(&a) != ap_cluster_fingerprint(&b));
    ap_cluster_from_gpu(must("a100"), 64, &b);
    b.gpu.peak_flops[AP_DTYPE_FP8] = 1;
    CHECK(ap_cluster_fingerprint(&a) != ap_cluster_fingerprint(&b));
}

static void test_example_files(void) {
    ap_cluster c;
    ap_err err = {{0}};
    ap_status st = ap_cluster_load(tl_path("examples/clusters/dgx-a100.json"), &c, &err);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) fprintf(stderr, "  %s\n", err.msg);
    CHECK_STR(c.name, "dgx-a100");
    CHECK_STR(c.gpu.name, "a100-sxm4-80g");
    CHECK_INT(c.gpus, 64);
    CHECK_INT(c.gpus_per_node, 8);
    CHECK_INT(c.nvlink_domain, 8);
    CHECK_NEAR(c.net_bytes_per_s, 25e9, EXACT);
    CHECK_NEAR(c.link_bytes_per_s, 300e9, EXACT);
    CHECK_NEAR(c.cpu_mem_bytes, 2 * TIB, EXACT);
    /* the file spells out the catalog's reference system: same numbers */
    ap_cluster ref;
    ap_cluster_from_gpu(must("a100-sxm4-80g"), 64, &ref);
    CHECK_NEAR(c.pcie_bytes_per_s, ref.pcie_bytes_per_s, EXACT);
    CHECK_NEAR(c.host_mem_bytes_per_s, ref.host_mem_bytes_per_s, EXACT);
    CHECK_INT(c.gpus_per_pcie_switch, ref.gpus_per_pcie_switch);
    CHECK_INT(c.cpu_cores, ref.cpu_cores);

    st = ap_cluster_load(tl_path("examples/clusters/dgx-h100.json"), &c, &err);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) fprintf(stderr, "  %s\n", err.msg);
    CHECK_STR(c.gpu.name, "h100-sxm");
    CHECK_INT(c.gpus, 128);
    CHECK_NEAR(c.net_bytes_per_s, 50e9, EXACT);
    CHECK_NEAR(c.link_bytes_per_s, 450e9, EXACT);
    ap_cluster_from_gpu(must("h100-sxm"), 128, &ref);
    CHECK_NEAR(c.host_mem_bytes_per_s, ref.host_mem_bytes_per_s, EXACT);
    CHECK_NEAR(c.cpu_mem_bytes, ref.cpu_mem_bytes, EXACT);

    st = ap_cluster_load(tl_path("examples/clusters/pcie-workstation.json"), &c, &err);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) fprintf(stderr, "  %s\n", err.msg);
    CHECK_STR(c.gpu.name, "rtx-4090");
    CHECK_INT(c.gpus, 4);
    CHECK_INT(c.nvlink_domain, 4);
    CHECK(c.link_bytes_per_s == 0);
    CHECK_NEAR(c.net_bytes_per_s, 2.5e9 / 8, EXACT);
    CHECK_NEAR(c.cpu_mem_bytes, 256 * GIB, EXACT);

    /* defaults: a minimal file equals the reference cluster, fingerprint included */
    const char *min = "{\"gpu\": \"H100\", \"gpus\": 32}";
    st = ap_cluster_parse(min, strlen(min), "min.json", &c, &err);
    CHECK_INT(st, AP_OK);
    ap_cluster_from_gpu(must("h100-sxm"), 32, &ref);
    CHECK(ap_cluster_fingerprint(&c) == ap_cluster_fingerprint(&ref));
    /* a whole-node description used with fewer GPUs (a DGX file and --gpus 4) stays valid */
    CHECK_INT(ap_cluster_load(tl_path("examples/clusters/dgx-a100.json"), &c, &err), AP_OK);
    c.gpus = 4;
    CHECK_INT(ap_cluster_validate(&c, "dgx-a100.json", &err), AP_OK);
    c.gpus = 12;
    CHECK_INT(ap_cluster_validate(&c, "dgx-a100.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "dgx-a100.json: field 'gpus'");
    /* partial node from a file */
    const char *part = "{\"gpu\": \"a100\", \"gpus\": 4, \"gpus_per_node\": 8}";
    CHECK_INT(ap_cluster_parse(part, strlen(part), "p.json", &c, &err), AP_OK);
    CHECK_INT(c.gpus_per_node, 4);
    CHECK_INT(c.nvlink_domain, 4);
    /* a uniform nodes list and a one-type gpu list are fine */
    const char *nodes = "{\"gpu\": \"a100\", \"nodes\": [{\"gpu\": \"a100-80g\", \"gpus\": 8},"
                        " {\"gpu\": \"A100-SXM4-80GB\", \"gpus\": 8}]}";
    CHECK_INT(ap_cluster_parse(nodes, strlen(nodes), "n.json", &c, &err), AP_OK);
    CHECK_INT(c.gpus, 16);
    CHECK_INT(c.gpus_per_node, 8);
    /* "_" keys are free-form comments in a node entry too */
    const char *note = "{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8, \"_note\": \"rack 3\"}]}";
    CHECK_INT(ap_cluster_parse(note, strlen(note), "note.json", &c, &err), AP_OK);
    CHECK_INT(c.gpus, 8);
    const char *same = "{\"gpu\": [\"h100\", \"h100-sxm\"], \"gpus\": 8, \"_note\": 1}";
    CHECK_INT(ap_cluster_parse(same, strlen(same), "s.json", &c, &err), AP_OK);
    /* overrides */
    const char *ov = "{\"gpu\": \"h100\", \"gpus\": 16, \"gpus_per_node\": 4, \"gpu_mem\": "
                     "\"70GiB\", \"link_bw\": \"400GB/s\", \"comment\": \"x\"}";
    CHECK_INT(ap_cluster_parse(ov, strlen(ov), "o.json", &c, &err), AP_OK);
    CHECK_NEAR(c.gpu.mem_bytes, 70 * GIB, EXACT);
    CHECK_NEAR(c.link_bytes_per_s, 400e9, EXACT);
    CHECK_INT(c.nvlink_domain, 4);
}

/* Each case: text (NULL = load a path instead), expected message fragments. */
typedef struct {
    const char *text;
    const char *want1, *want2;
} bad_case;

static void test_bad_files(void) {
    static const bad_case cases[] = {
        {"{\"gpu\": \"a100\", \"gpus\": 8,\n \"network_bw\": }", "invalid JSON at line 2",
         "bad.json"},
        {"", "unexpected end", "bad.json"},
        {"[1, 2]", "must be a JSON object", "an array"},
        {"{\"gpu\": \"a100-sxm5-80g\", \"gpus\": 8}", "field 'gpu': unknown GPU 'a100-sxm5-80g'",
         "closest: 'a100-sxm4-80g'"},
        {"{\"gpu\": \"a100\", \"gpus\": 8, \"x\": 1} ", "unknown field 'x'", "bad.json"},
        {"{\"gpu\": \"h100\", \"gpus\": 8, \"gpu_per_node\": 8}", "unknown field 'gpu_per_node'",
         "did you mean 'gpus_per_node'"},
        {"{\"gpu\": [\"a100-sxm4-80g\", \"h100-sxm\"], \"gpus\": 16}",
         "mixed GPU types are not supported yet", "a100-sxm4-80g and h100-sxm"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8}, {\"gpu\": \"h100\", \"gpus\": 8}]}",
         "mixed GPU types are not supported yet", "bad.json"},
        {"{\"gpu\": \"a100\", \"nodes\": [{\"gpu\": \"h100\", \"gpus\": 8}]}",
         "mixed GPU types are not supported yet", "bad.json"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8}, {\"gpu\": \"a100\", \"gpus\": 4}]}",
         "field 'nodes'", "different GPU counts"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8}], \"gpus\": 16}", "field 'gpus'",
         "disagrees"},
        {"{\"nodes\": {}}", "field 'nodes'", "non-empty list"},
        {"{\"nodes\": [{\"gpus\": 8}]}", "nodes[0]", "missing field 'gpu'"},
        /* a node entry's keys are checked like the top level's: a typo, and a cluster-wide
         * field given per node (it would be ignored), are refused */
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8, \"bogus\": 1}]}",
         "nodes[0]: unknown field 'bogus'", "only 'gpu' and 'gpus'"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8}, {\"gpu\": \"a100\", \"gpu_s\": 8}]}",
         "nodes[1]: unknown field 'gpu_s'", "did you mean 'gpus'"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8, \"network_bw\": \"1Gb/s\"}]}",
         "nodes[0]: field 'network_bw' is not supported per node", "top level"},
        {"{\"nodes\": [{\"gpu\": \"a100\", \"gpus\": 8, \"gpus_per_node\": 8}]}",
         "field 'gpus_per_node' is not supported per node", "top level"},
        {"{\"gpu\": \"a100\", \"gpus\": 0}", "field 'gpus'", "out of range"},
        {"{\"gpu\": \"a100\", \"gpus\": -8}", "field 'gpus'", "out of range"},
        {"{\"gpu\": \"a100\", \"gpus\": 1e15}", "field 'gpus'", "out of range"},
        {"{\"gpu\": \"a100\", \"gpus\": 8.5}", "field 'gpus'", "integer"},
        {"{\"gpu\": \"a100\", \"gpus\": \"64\"}", "field 'gpus'", "integer, got a string"},
        {"{\"gpu\": \"a100\"}", "missing field 'gpus'", "bad.json"},
        {"{\"gpus\": 8}", "missing field 'gpu'", "autoplan gpus"},
        {"{\"gpu\": 100, \"gpus\": 8}", "field 'gpu'", "a number"},
        {"{\"gpu\": [], \"gpus\": 8}", "field 'gpu'", "empty"},
        {"{\"gpu\": [\"a100\", 7], \"gpus\": 8}", "field 'gpu[1]'", "a number"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"network_bw\": 200}", "field 'network_bw'",
         "no unit"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"network_bw\": \"200\"}", "field 'network_bw'",
         "no unit"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"network_bw\": \"200Gbit/s\"}",
         "field 'network_bw'", "unknown bandwidth unit"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"network_bw\": \"0Gb/s\"}", "field 'network_bw'",
         "positive"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"link_bw\": true}", "field 'link_bw'",
         "a boolean"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"cpu_mem\": \"-1TiB\"}", "field 'cpu_mem'",
         "negative"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"cpu_mem\": \"0GiB\"}", "field 'cpu_mem'",
         "positive"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"cpu_mem\": 2048}", "field 'cpu_mem'", "no unit"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"gpu_mem\": \"1e9TiB\"}", "field 'gpu_mem'",
         "absurdly large"},
        {"{\"gpu\": \"a100\", \"gpus\": 12, \"gpus_per_node\": 8}", "field 'gpus'",
         "multiple of 8"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"nvlink_domain\": 16}", "field 'nvlink_domain'",
         "[1, 8]"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"nvlink_domain\": 3}", "field 'nvlink_domain'",
         "does not divide"},
        {"{\"gpu\": \"h100\", \"gpus\": 16, \"link_bw\": \"0GB/s\"}", "field 'link_bw'",
         "positive"},
        {"{\"gpu\": \"rtx-3090\", \"gpus\": 4, \"gpus_per_node\": 4, \"nvlink_domain\": 4}",
         "field 'nvlink_domain'", "pairs only"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"gpus_per_pcie_switch\": 16}",
         "field 'gpus_per_pcie_switch'", "[1, 8]"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"cpu_cores\": 0}", "field 'cpu_cores'",
         "out of range"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"name\": 5}", "field 'name'", "string"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"comment\": 5}", "field 'comment'", "string"},
        {"{\"gpu\": \"a100\", \"gpus\": 16} {}", "unexpected data after the value", "bad.json"},
        /* raw control characters in a key or value stay out of the one-line message */
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"\ncpu_cores\": 1}", "unknown field '?cpu_cores'",
         "did you mean 'cpu_cores'"},
        {"{\"gpu\": \"a100\", \"gpus\": 16, \"pcie_bw\": \"32\n\"}", "field 'pcie_bw'",
         "no unit"},
        {"{\"gpu\": \"a1\t00\", \"gpus\": 16}", "unknown GPU 'a1?00'", "closest"},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    CHECK(n >= 10);
    for (int i = 0; i < n; i++) {
        ap_cluster c;
        ap_err err = {{0}};
        ap_status st = ap_cluster_parse(cases[i].text, strlen(cases[i].text), "bad.json", &c, &err);
        if (st != AP_ERR_INPUT) fprintf(stderr, "case %d: %s\n", i, cases[i].text);
        CHECK_INT(st, AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, cases[i].want1);
        CHECK_CONTAINS(err.msg, cases[i].want2);
        CHECK(strchr(err.msg, '\n') == NULL); /* one line */
        CHECK(strncmp(err.msg, "bad.json", 8) == 0); /* names the file first */
    }

    /* embedded NUL, not NUL-terminated input */
    {
        const char txt[] = "{\"gpu\": \"a100\",\0 \"gpus\": 8}";
        ap_cluster c;
        ap_err err = {{0}};
        CHECK_INT(ap_cluster_parse(txt, sizeof txt - 1, "nul.json", &c, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, "nul.json: invalid JSON");
        char buf[64];
        const char *ok = "{\"gpu\": \"a100\", \"gpus\": 8}";
        memcpy(buf, ok, strlen(ok));
        memset(buf + strlen(ok), 'x', sizeof buf - strlen(ok)); /* no terminator in range */
        CHECK_INT(ap_cluster_parse(buf, strlen(ok), "buf.json", &c, &err), AP_OK);
    }
    /* files: missing, a directory, too large */
    {
        ap_cluster c;
        ap_err err = {{0}};
        CHECK_INT(ap_cluster_load("/nonexistent/dir/cluster.json", &c, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, "/nonexistent/dir/cluster.json: cannot open");
        CHECK_INT(ap_cluster_load(tl_path("examples"), &c, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, "is a directory");
        CHECK_INT(ap_cluster_load("", &c, &err), AP_ERR_INPUT);
        CHECK_INT(ap_cluster_load(NULL, &c, &err), AP_ERR_INPUT);
        const char *dir = tl_tmpdir();
        CHECK(dir != NULL);
        if (dir) {
            char path[512];
            snprintf(path, sizeof path, "%s/big.json", dir);
            size_t big = (size_t)2 << 20;
            char *s = malloc(big + 1);
            if (s) {
                memset(s, ' ', big);
                s[0] = '{';
                s[big - 1] = '}';
                s[big] = '\0';
                CHECK_INT(tl_write(path, s), 0);
                free(s);
                CHECK_INT(ap_cluster_load(path, &c, &err), AP_ERR_INPUT);
                CHECK_CONTAINS(err.msg, "too large");
                unlink(path);
            }
            snprintf(path, sizeof path, "%s/bad.json", dir);
            CHECK_INT(tl_write(path, "{\"gpu\": \"a100\", \"gpus\": 8, \"pcie_bw\": \"32\"}"), 0);
            CHECK_INT(ap_cluster_load(path, &c, &err), AP_ERR_INPUT);
            CHECK_CONTAINS(err.msg, path);
            CHECK_CONTAINS(err.msg, "field 'pcie_bw'");
            unlink(path);
            rmdir(dir);
        }
    }
}

/* Launcher hosts (ap_cluster_gpus_per_host): GB200's 4-GPU trays inside its 64-GPU node, also
 * when the node is the whole 72-GPU rack; fewer GPUs than a tray run on one host; a DGX's host
 * is its node. */
static void test_gpus_per_host(void) {
    ap_cluster c;
    ap_cluster_from_gpu(must("gb200"), 128, &c);
    CHECK_INT(c.gpus_per_node, 64);
    CHECK_INT(ap_cluster_gpus_per_host(&c), 4);
    ap_cluster_from_gpu(must("gb200"), 144, &c);
    ap_cluster_set_gpus_per_node(&c, 72);
    CHECK_INT(ap_cluster_gpus_per_host(&c), 4);
    ap_cluster_from_gpu(must("gb200"), 2, &c);
    CHECK_INT(ap_cluster_gpus_per_host(&c), 2);
    ap_cluster_from_gpu(must("h100-sxm"), 64, &c);
    CHECK_INT(ap_cluster_gpus_per_host(&c), 8);
    ap_cluster_set_gpus_per_node(&c, 4);
    CHECK_INT(ap_cluster_gpus_per_host(&c), 4);
}

/* docs/hardware.md documents every catalog entry. */
static void test_docs(void) {
    char *doc = tl_read(tl_path("docs/hardware.md"));
    CHECK(doc != NULL);
    if (!doc) return;
    for (int i = 0; i < ap_gpu_catalog_count(); i++) {
        char needle[48];
        snprintf(needle, sizeof needle, "`%s`", ap_gpu_catalog_at(i)->name);
        CHECK_CONTAINS(doc, needle);
    }
    CHECK_CONTAINS(doc, ap_gpu_catalog_version());
    free(doc);
}

static void test_cli(void) {
    char *out = NULL, *err = NULL;
    int rc = tl_run("gpus", &out, &err);
    CHECK_INT(rc, 0);
    for (int i = 0; i < ap_gpu_catalog_count(); i++) CHECK_CONTAINS(out, ap_gpu_catalog_at(i)->name);
    CHECK_CONTAINS(out, "989.4");        /* h100 bf16 */
    CHECK_CONTAINS(out, "nvlink 300"); /* a100 */
    CHECK_CONTAINS(out, "8, 8x 400");    /* DGX H100 node */
    CHECK_CONTAINS(out, "8, 8x 200");    /* DGX A100 node */
    free(out);
    free(err);

    rc = tl_run("gpus --json", &out, &err);
    CHECK_INT(rc, 0);
    ap_err e = {{0}};
    ap_json *j = out ? ap_json_parse(out, strlen(out), "gpus --json", &e) : NULL;
    CHECK(j != NULL);
    if (j) {
        ap_json *arr = ap_json_get(j, "gpus");
        CHECK_INT(ap_json_size(arr), ap_gpu_catalog_count());
        for (int i = 0; i < ap_json_size(arr) && i < ap_gpu_catalog_count(); i++) {
            const ap_gpu *g = ap_gpu_catalog_at(i);
            ap_json *e = ap_json_at(arr, i);
            CHECK_STR(ap_json_string(ap_json_get(e, "name")), g->name);
            CHECK_NEAR(ap_json_number(ap_json_get(e, "mem_bytes")), g->mem_bytes, EXACT);
            ap_json *pf = ap_json_get(e, "peak_flops");
            for (int d = 0; d < AP_DTYPE_COUNT; d++)
                CHECK(ap_json_number(ap_json_get(pf, ap_dtype_name((ap_dtype)d))) ==
                      g->peak_flops[d]);
            CHECK_NEAR(ap_json_number(ap_json_get(ap_json_get(e, "reference_node"),
                                                  "net_bytes_per_s_per_gpu")),
                       g->ref_net_bytes_per_s, EXACT);
            CHECK_INT(ap_json_size(ap_json_get(e, "aliases")) > 0, *ap_gpu_aliases(i) != '\0');
        }
        CHECK_STR(ap_json_string(ap_json_get(j, "catalog_version")), ap_gpu_catalog_version());
        ap_json_free(j);
    }
    free(out);
    free(err);

    rc = tl_run("gpus H100 --json", &out, &err);
    CHECK_INT(rc, 0);
    j = out ? ap_json_parse(out, strlen(out), "gpus h100 --json", &e) : NULL;
    CHECK(j != NULL);
    if (j) {
        ap_json *g = ap_json_at(ap_json_get(j, "gpus"), 0);
        CHECK_INT(ap_json_size(ap_json_get(j, "gpus")), 1);
        CHECK_STR(ap_json_string(ap_json_get(g, "name")), "h100-sxm");
        CHECK_NEAR(ap_json_number(ap_json_get(ap_json_get(g, "peak_flops"), "bf16")), 989.4e12,
                   EXACT);
        CHECK_STR(ap_json_string(ap_json_get(g, "link")), "nvlink");
        CHECK(ap_json_get(g, "multicast") && ap_json_bool(ap_json_get(g, "multicast")));
        ap_json_free(j);
    }
    free(out);
    free(err);

    rc = tl_run("gpus a100-80g", &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "a100-sxm4-80g");
    CHECK_CONTAINS(out, "DGX A100");
    CHECK_CONTAINS(out, "multicast            no");
    free(out);
    free(err);

    rc = tl_run("gpus h100-sxn", &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err, "unknown GPU 'h100-sxn'");
    CHECK_CONTAINS(err, "h100-sxm");
    free(out);
    free(err);

    rc = tl_run("gpus --jsn", &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err, "--json");
    free(out);
    free(err);

    rc = tl_run("gpus a100 h100", &out, &err);
    CHECK_INT(rc, 2);
    free(out);
    free(err);

    rc = tl_run("gpus --help", &out, &err);
    CHECK_INT(rc, 0);
    CHECK_CONTAINS(out, "--json");
    CHECK_CONTAINS(out, "usage: autoplan gpus");
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_catalog_sane();
    test_aliases_and_lookup();
    test_datasheet_numbers();
    test_names();
    test_from_gpu();
    test_from_gpu_all();
    test_fingerprint();
    test_example_files();
    test_bad_files();
    test_docs();
    test_gpus_per_host();
    test_cli();
    return tl_finish();
}
