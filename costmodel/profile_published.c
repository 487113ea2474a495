/*
 * profile_published.c - the published kernel profiles built into autoplan: rows in the profile
 * format (profile.h, docs/profiles.md) for the catalog GPUs that have published measurements,
 * each citing the paper figure or benchmark page it was read from.
 *
 * Structure: compact tables per kind (attention sweeps, large-GEMM ceilings, collective bus
 * bandwidths, host launch cost), expanded by ap_profile_published into validated rows with
 * source_run "published". Figures were read off the cited figures' bar labels; where a paper
 * plots forward + backward together, the row is an attn_fwd_bwd row (the split into forward
 * and backward is the lookup's job, costmodel/kernels.c).
 *
 * What it does not do: interpolate, fall back between GPUs or decide what a plan uses
 * (costmodel/kernels.c); it holds facts only. GPUs not listed here have no published rows.
 */
#include "autoplan/kernels.h"

#include <stdio.h>
#include <string.h>

#define SRC_FA2_A100                                                                          \
    "Dao 2023, FlashAttention-2 (arXiv 2307.08691) Fig. 4: attention fwd+bwd TFLOP/s, A100 "  \
    "80GB SXM4, batch x seqlen = 16k, hidden 2048"
#define SRC_FA2_H100                                                                          \
    "Dao 2023, FlashAttention-2 (arXiv 2307.08691) Fig. 7: attention fwd+bwd TFLOP/s, H100 "  \
    "80GB SXM5, batch x seqlen = 16k, hidden 2048"
#define SRC_FA3_FWD                                                                           \
    "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608) Fig. 5: attention forward BF16 "   \
    "TFLOP/s, H100 80GB SXM5, batch x seqlen = 16k, hidden 2048"
#define SRC_FA3_BWD                                                                           \
    "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608) Fig. 6: attention backward BF16 "  \
    "TFLOP/s, non-causal, H100 80GB SXM5, batch x seqlen = 16k, hidden 2048"
#define SRC_MAMF_BF16                                                                         \
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS "   \
    "table (BF16, mean of 100 iterations, best shape)"
#define SRC_MAMF_FP8                                                                          \
    "stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS "   \
    "table (FP8 e4m3, mean of 100 iterations, best shape)"
#define SRC_NCCL_GTC                                                                          \
    "NVIDIA GTC24 S62129 'Collective Communication Bandwidth' slide: nccl-tests all-reduce "  \
    "bus bandwidth (reproduced in stas00/ml-engineering network/benchmarks)"
#define SRC_LAUNCH                                                                            \
    "eager op: pytorch/pytorch#32194 operator micro-benchmark (~3.3 us per call) + kernel "   \
    "launch (NVIDIA blog 'Getting Started with CUDA Graphs' 2019: 3.8 us per kernel)"

/* ---- attention sweeps ---------------------------------------------------------------------
 * Sequence lengths 512, 1k, 2k, 4k, 8k, 16k; batch = 16384 / seqlen, heads = 2048 / d, as both
 * papers benchmark. 0 = not measured (out of memory). TFLOP/s under the papers' count (the
 * profile convention: forward 4 b h d s^2, halved when causal; backward 2.5 x forward). */
static const int attn_seqs[6] = {512, 1024, 2048, 4096, 8192, 16384};

typedef struct {
    const char *gpu;
    const char *op;     /* attn_fwd, attn_bwd or attn_fwd_bwd */
    const char *impl;   /* profile vocabulary */
    int d;
    int causal;
    double tflops[6];
    const char *source;
} attn_sweep;

static const attn_sweep attn_table[] = {
    /* FlashAttention-2 paper, Fig. 4 (A100): (a) non-causal d64, (b) non-causal d128, (c)
     * causal d64, (d) causal d128. "Pytorch" = standard attention, "xformers" = the cutlass
     * memory-efficient kernel PyTorch ships as SDPA's efficient backend. */
    {"a100-sxm4-80g", "attn_fwd_bwd", "unfused", 64, 0, {36, 40, 43, 45, 46, 0}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa1", 64, 0, {91, 92, 104, 108, 110, 110}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "sdpa_efficient", 64, 0, {68, 73, 76, 77, 75, 75}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "triton", 64, 0, {90, 102, 98, 98, 100, 100}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa2", 64, 0, {132, 153, 162, 171, 175, 176}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "unfused", 128, 0, {53, 67, 76, 79, 86, 0}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa1", 128, 0, {76, 72, 76, 80, 82, 83}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "sdpa_efficient", 128, 0, {83, 91, 95, 96, 97, 98}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "triton", 128, 0, {78, 85, 90, 93, 95, 95}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa2", 128, 0, {151, 173, 187, 196, 201, 203}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "unfused", 64, 1, {15, 16, 17, 18, 18, 0}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa1", 64, 1, {58, 70, 77, 87, 92, 97}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "sdpa_efficient", 64, 1, {51, 60, 66, 68, 69, 67}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "triton", 64, 1, {59, 75, 79, 76, 79, 80}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa2", 64, 1, {88, 119, 140, 156, 165, 171}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "unfused", 128, 1, {23, 28, 32, 32, 34, 0}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa1", 128, 1, {55, 62, 69, 76, 80, 83}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "sdpa_efficient", 128, 1, {58, 72, 82, 87, 91, 92}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "triton", 128, 1, {50, 61, 68, 74, 78, 80}, SRC_FA2_A100},
    {"a100-sxm4-80g", "attn_fwd_bwd", "fa2", 128, 1, {99, 133, 155, 173, 182, 189}, SRC_FA2_A100},
    /* FlashAttention-2 paper, Fig. 7 (H100 SXM5), same panels */
    {"h100-sxm", "attn_fwd_bwd", "unfused", 64, 0, {62, 72, 81, 86, 87, 0}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa1", 64, 0, {157, 159, 161, 161, 166, 168}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa2", 64, 0, {215, 254, 274, 288, 294, 296}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "unfused", 128, 0, {93, 120, 145, 160, 167, 0}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa1", 128, 0, {127, 127, 128, 131, 137, 139}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa2", 128, 0, {248, 294, 320, 326, 335, 338}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "unfused", 64, 1, {26, 29, 31, 32, 32, 0}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa1", 64, 1, {104, 123, 136, 138, 149, 156}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa2", 64, 1, {141, 192, 232, 257, 273, 284}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "unfused", 128, 1, {40, 50, 57, 61, 63, 0}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa1", 128, 1, {98, 109, 108, 126, 135, 137}, SRC_FA2_H100},
    {"h100-sxm", "attn_fwd_bwd", "fa2", 128, 1, {163, 221, 265, 294, 308, 328}, SRC_FA2_H100},
    /* FlashAttention-3 paper, Fig. 5 (forward, BF16, H100 SXM5): (a) non-causal d64, (b)
     * causal d64, (c) non-causal d128, (d) causal d128, (e) non-causal d256, (f) causal d256.
     * "Triton" = the Triton tutorial kernel, "cuDNN" = cuDNN fused attention (the kernel
     * Transformer Engine calls). */
    {"h100-sxm", "attn_fwd", "unfused", 64, 0, {52, 63, 67, 72, 73, 0}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 64, 0, {282, 306, 318, 321, 322, 324}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "triton", 64, 0, {340, 382, 396, 400, 401, 403}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 64, 0, {335, 373, 395, 408, 412, 413}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 64, 0, {333, 392, 460, 476, 496, 497}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "unfused", 64, 1, {16, 18, 18, 18, 18, 0}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 64, 1, {180, 229, 262, 284, 295, 299}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "triton", 64, 1, {152, 291, 342, 363, 376, 363}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 64, 1, {225, 288, 334, 363, 379, 388}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 64, 1, {197, 265, 371, 420, 460, 473}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "unfused", 128, 0, {74, 100, 119, 133, 139, 0}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 128, 0, {309, 350, 362, 368, 370, 370}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "triton", 128, 0, {323, 372, 389, 389, 392, 395}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 128, 0, {497, 574, 617, 609, 600, 595}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 128, 0, {467, 565, 625, 638, 646, 648}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "unfused", 128, 1, {26, 31, 34, 35, 35, 0}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 128, 1, {191, 260, 298, 319, 333, 335}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "triton", 128, 1, {146, 273, 323, 353, 369, 378}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 128, 1, {315, 410, 484, 518, 529, 539}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 128, 1, {292, 423, 521, 579, 602, 616}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 256, 0, {275, 313, 321, 323, 324, 326}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 256, 0, {470, 546, 580, 581, 580, 581}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 256, 0, {482, 0, 707, 736, 746, 756}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa2", 256, 1, {208, 251, 278, 293, 297, 298}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "cudnn", 256, 1, {308, 391, 450, 483, 497, 509}, SRC_FA3_FWD},
    {"h100-sxm", "attn_fwd", "fa3", 256, 1, {286, 427, 537, 612, 628, 642}, SRC_FA3_FWD},
    /* FlashAttention-3 paper, Fig. 6 (backward, BF16, non-causal, H100 SXM5): d64, d128 */
    {"h100-sxm", "attn_bwd", "unfused", 64, 0, {68, 76, 88, 92, 95, 0}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "fa2", 64, 0, {198, 238, 264, 279, 287, 291}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "cudnn", 64, 0, {266, 348, 395, 417, 432, 433}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "fa3", 64, 0, {272, 363, 422, 453, 472, 474}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "unfused", 128, 0, {104, 131, 159, 174, 181, 0}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "fa2", 128, 0, {214, 260, 291, 310, 318, 322}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "cudnn", 128, 0, {305, 408, 465, 499, 518, 516}, SRC_FA3_BWD},
    {"h100-sxm", "attn_bwd", "fa3", 128, 0, {316, 424, 501, 542, 559, 561}, SRC_FA3_BWD},
};

/* ---- large-GEMM ceilings: the best measured shape of a brute-force matmul sweep ---------- */
typedef struct {
    const char *gpu;
    const char *dtype;
    int m, n, k;
    double tflops;
    const char *source;
} gemm_point;

static const gemm_point gemm_table[] = {
    {"a100-sxm4-80g", "bf16", 1024, 10240, 5120, 271.2, SRC_MAMF_BF16 ": NVIDIA A100 SXM"},
    {"a100-pcie-80g", "bf16", 2048, 5120, 6144, 252.9, SRC_MAMF_BF16 ": NVIDIA A100 PCIe"},
    {"h100-sxm", "bf16", 2048, 2048, 13312, 794.5, SRC_MAMF_BF16 ": NVIDIA H100 SXM"},
    {"h100-sxm", "fp8", 1024, 9216, 14336, 1402.6, SRC_MAMF_FP8 ": NVIDIA H100 SXM"},
    {"h200", "bf16", 2048, 2048, 13312, 794.5, SRC_MAMF_BF16 ": NVIDIA H100 SXM ('H200 is the same')"},
    {"h200", "fp8", 1280, 4096, 12032, 1453.4, SRC_MAMF_FP8 ": NVIDIA H200 SXM"},
    {"b200", "bf16", 1792, 16128, 3072, 1745.0, SRC_MAMF_BF16 ": NVIDIA B200 SXM"},
    {"b200", "fp8", 15360, 4096, 3072, 3432.5, SRC_MAMF_FP8 ": NVIDIA B200 SXM"},
    /* GB200: the B200's die; no published sweep of its own (assumed the same) */
    {"gb200", "bf16", 1792, 16128, 3072, 1745.0, SRC_MAMF_BF16 ": NVIDIA B200 SXM (GB200: the same die, assumed)"},
    {"gb200", "fp8", 15360, 4096, 3072, 3432.5, SRC_MAMF_FP8 ": NVIDIA B200 SXM (GB200: the same die, assumed)"},
    {"mi300x", "bf16", 10240, 15360, 8192, 668.4, SRC_MAMF_BF16 ": AMD MI300X"},
};

/* ---- collectives: nccl-tests all-reduce bus bandwidth at the large-message plateau -------- */
typedef struct {
    const char *gpu;
    const char *shape;  /* ranks,level,algo,bytes */
    double gbps;        /* bus bandwidth, GB/s */
    const char *source;
} coll_point;

#define BIG "bytes=8589934592"
static const coll_point coll_table[] = {
    {"v100-sxm2-16g", "ranks=8,level=nvlink,algo=ring," BIG, 122, SRC_NCCL_GTC ": NVLink2 (V100)"},
    {"v100-sxm2-32g", "ranks=8,level=nvlink,algo=ring," BIG, 122, SRC_NCCL_GTC ": NVLink2 (V100)"},
    {"a100-sxm4-40g", "ranks=8,level=nvlink,algo=ring," BIG, 232, SRC_NCCL_GTC ": NVLink3 (A100)"},
    {"a100-sxm4-80g", "ranks=8,level=nvlink,algo=ring," BIG, 232, SRC_NCCL_GTC ": NVLink3 (A100)"},
    {"h100-sxm", "ranks=8,level=nvlink,algo=ring," BIG, 370, SRC_NCCL_GTC ": NVLink4 (H100)"},
    {"h100-sxm", "ranks=8,level=nvlink,algo=nvls," BIG, 480, SRC_NCCL_GTC ": NVLink4 SHARP (H100)"},
    {"h200", "ranks=8,level=nvlink,algo=ring," BIG, 370, SRC_NCCL_GTC ": NVLink4 (H100)"},
    {"h200", "ranks=8,level=nvlink,algo=nvls," BIG, 480, SRC_NCCL_GTC ": NVLink4 SHARP (H100)"},
    /* across nodes: the DGX systems' 8 NICs per node, rings spanning whole nodes */
    {"a100-sxm4-40g", "ranks=16,level=ib,algo=ring," BIG, 192, SRC_NCCL_GTC ": NVL3 + 8x 200Gb RDMA (DGX A100)"},
    {"a100-sxm4-80g", "ranks=16,level=ib,algo=ring," BIG, 192, SRC_NCCL_GTC ": NVL3 + 8x 200Gb RDMA (DGX A100)"},
    {"h100-sxm", "ranks=16,level=ib,algo=ring," BIG, 380, SRC_NCCL_GTC ": NVL4 + 8x 400Gb RDMA (DGX H100)"},
    {"h200", "ranks=16,level=ib,algo=ring," BIG, 380, SRC_NCCL_GTC ": NVL4 + 8x 400Gb RDMA (DGX H100)"},
    /* over PCIe, by generation */
    {"a100-pcie-80g", "ranks=8,level=pcie,algo=ring," BIG, 24, SRC_NCCL_GTC ": PCI Gen4"},
    {"l40s", "ranks=8,level=pcie,algo=ring," BIG, 24, SRC_NCCL_GTC ": PCI Gen4"},
    {"rtx-3090", "ranks=2,level=pcie,algo=ring," BIG, 24, SRC_NCCL_GTC ": PCI Gen4"},
    {"rtx-4090", "ranks=4,level=pcie,algo=ring," BIG, 24, SRC_NCCL_GTC ": PCI Gen4"},
    {"h100-pcie", "ranks=8,level=pcie,algo=ring," BIG, 48, SRC_NCCL_GTC ": PCI Gen5"},
};
#undef BIG

/* GPUs whose eager-framework launch cost the table states (every NVIDIA catalog GPU: the cost
 * is host-side) */
static const char *const launch_gpus[] = {"v100-sxm2-16g", "v100-sxm2-32g", "a100-sxm4-40g",
                                          "a100-sxm4-80g", "a100-pcie-80g", "h100-sxm",
                                          "h100-pcie", "h200", "b200", "gb200", "l40s", "rtx-2060",
                                          "rtx-3090", "rtx-4090", "mi300x"};
#define LAUNCH_S 7.0e-6

/* ---- expansion into rows ----------------------------------------------------------------- */

static void row_init(ap_profile_row *r, const char *gpu, const char *op, const char *dtype,
                     const char *source) {
    memset(r, 0, sizeof *r);
    snprintf(r->gpu, sizeof r->gpu, "%s", gpu);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->dtype, sizeof r->dtype, "%s", dtype);
    snprintf(r->source_run, sizeof r->source_run, "published");
    snprintf(r->source, sizeof r->source, "%s", source);
    r->samples = 1;
}

/* Attended pairs of the papers' convention (profile.c's attn_pairs without a window). */
static double pairs(double s, int causal) { return causal ? 0.5 * s * s : s * s; }

ap_status ap_profile_published(const char *gpu, ap_profile *out, ap_err *err) {
    ap_profile_row r;
    ap_status st;
    for (size_t i = 0; i < sizeof attn_table / sizeof attn_table[0]; i++) {
        const attn_sweep *a = &attn_table[i];
        if (strcmp(a->gpu, gpu)) continue;
        for (int j = 0; j < 6; j++) {
            if (a->tflops[j] <= 0) continue;
            int s = attn_seqs[j], b = 16384 / s, h = 2048 / a->d;
            row_init(&r, gpu, a->op, "bf16", a->source);
            snprintf(r.shape, sizeof r.shape, "impl=%s,b=%d,s=%d,h=%d,kvh=%d,d=%d,causal=%d,"
                     "window=0", a->impl, b, s, h, h, a->d, a->causal);
            double fwd = 4.0 * b * h * a->d * pairs(s, a->causal);
            double flops = !strcmp(a->op, "attn_fwd") ? fwd
                           : !strcmp(a->op, "attn_bwd") ? 2.5 * fwd : 3.5 * fwd;
            r.flops_per_s = a->tflops[j] * 1e12;
            r.time_s = flops / r.flops_per_s;
            if ((st = ap_profile_add(out, &r, err)) != AP_OK) return st;
        }
    }
    for (size_t i = 0; i < sizeof gemm_table / sizeof gemm_table[0]; i++) {
        const gemm_point *g = &gemm_table[i];
        if (strcmp(g->gpu, gpu)) continue;
        row_init(&r, gpu, "gemm", g->dtype, g->source);
        snprintf(r.shape, sizeof r.shape, "m=%d,n=%d,k=%d", g->m, g->n, g->k);
        r.flops_per_s = g->tflops * 1e12;
        r.time_s = 2.0 * g->m * (double)g->n * g->k / r.flops_per_s;
        if ((st = ap_profile_add(out, &r, err)) != AP_OK) return st;
    }
    for (size_t i = 0; i < sizeof coll_table / sizeof coll_table[0]; i++) {
        const coll_point *c = &coll_table[i];
        if (strcmp(c->gpu, gpu)) continue;
        row_init(&r, gpu, "allreduce", "bf16", c->source);
        snprintf(r.shape, sizeof r.shape, "%s", c->shape);
        double ranks = 0, bytes = 0;
        ap_profile_shape_num(r.shape, "ranks", &ranks);
        ap_profile_shape_num(r.shape, "bytes", &bytes);
        r.bytes_per_s = c->gbps * 1e9;
        r.bytes = bytes;
        r.time_s = bytes * ap_profile_busbw_factor("allreduce", ranks) / r.bytes_per_s;
        if ((st = ap_profile_add(out, &r, err)) != AP_OK) return st;
    }
    for (size_t i = 0; i < sizeof launch_gpus / sizeof launch_gpus[0]; i++) {
        if (strcmp(launch_gpus[i], gpu)) continue;
        row_init(&r, gpu, "launch", "none", SRC_LAUNCH);
        snprintf(r.shape, sizeof r.shape, "kind=kernel");
        r.time_s = LAUNCH_S;
        if ((st = ap_profile_add(out, &r, err)) != AP_OK) return st;
    }
    snprintf(out->gpu, sizeof out->gpu, "%s", gpu);
    if (!out->name[0]) snprintf(out->name, sizeof out->name, "published");
    return AP_OK;
}
