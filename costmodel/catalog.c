/*
 * catalog.c - the built-in GPU catalog: one entry per SKU (SXM and PCIe parts are separate),
 * each with its datasheet cited, plus short aliases and name lookup.
 *
 * Conventions (docs/hardware.md explains them at length):
 *  - mem_bytes is "usable" device memory: the total nvidia-smi reports (memory.total, MiB) on a
 *    Linux driver with ECC as shipped, which is what cudaMemGetInfo's total is close to
 *    (PyTorch's "total capacity" is a few hundred MiB lower on some drivers). The CUDA context
 *    and allocator slack are not subtracted here; the estimate's headroom covers them.
 *  - peak_flops are dense (no 2:4 sparsity) tensor-core peaks with fp32 accumulation for
 *    fp16/bf16/fp8 (GeForce cards run fp32 accumulation at half rate; those figures are used),
 *    tf32 is the tensor-core tf32 peak, fp32 the plain fp32 (non-tensor) peak, 0 = unsupported.
 *  - Bandwidths are bytes per second per direction. NVIDIA datasheets quote NVLink and PCIe as
 *    bidirectional totals (A100: "NVLink 600 GB/s", "PCIe Gen4 64 GB/s"); we store half.
 *    PCIe is the nominal per-direction figure (Gen3 16, Gen4 32, Gen5 64 GB/s for x16); link
 *    encoding and protocol overheads are left to the cost model's efficiency factors.
 *  - sm is the CUDA compute capability x 10 (NVIDIA's "CUDA GPUs - Compute Capability" table,
 *    developer.nvidia.com/cuda-gpus: V100 7.0, RTX 2060 7.5, A100/A800 8.0, RTX 3090 8.6, L40S
 *    and RTX 4090 8.9, H100/H800/H200 9.0, B200 and GB200 10.0); 0 for other vendors and the CPU.
 *  - ref_* describe the vendor's reference system (DGX/HGX) where one exists. For PCIe and
 *    GeForce cards no reference system is published; those entries describe a typical server or
 *    workstation and their source string says "assumed".
 *
 * What it does not do: measure anything. Calibrated efficiencies live with the cost model.
 */
#include "autoplan/hw.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define TIB 1099511627776.0
#define TFLOPS 1e12
#define GBPS 1e9 /* GB/s, bytes */

/* Host DRAM peak: channels x MT/s x 8 bytes per transfer, per socket, times sockets. */
#define DRAM_BPS(sockets, channels, mts) ((sockets) * (channels) * (mts) * 1e6 * 8.0)

/* NVIDIA datasheets quote PCIe x16 as a bidirectional total: Gen3 32 GB/s (V100 datasheet),
 * Gen4 64 GB/s (A100 datasheet), Gen5 128 GB/s (H100 datasheet). Per direction: half. */
#define PCIE3_BPS (16.0 * GBPS)
#define PCIE4_BPS (32.0 * GBPS)
#define PCIE5_BPS (64.0 * GBPS)

/* Dense peaks of one die, shared by its SKUs. GA100 (A100 datasheet): FP32 19.5, TF32 156,
 * BF16/FP16 312 TFLOPS; no fp8. GH100 SXM5 (H100 architecture whitepaper): FP32 66.9, TF32
 * 494.7, FP16/BF16 989.4, FP8 1978.9 TFLOPS (the datasheet quotes twice these "with
 * sparsity"). */
#define GA100_PEAKS                                                                            \
    {[AP_DTYPE_FP32] = 19.5 * TFLOPS, [AP_DTYPE_TF32] = 156 * TFLOPS,                          \
     [AP_DTYPE_FP16] = 312 * TFLOPS, [AP_DTYPE_BF16] = 312 * TFLOPS}
#define GH100_SXM_PEAKS                                                                        \
    {[AP_DTYPE_FP32] = 66.9 * TFLOPS, [AP_DTYPE_TF32] = 494.7 * TFLOPS,                        \
     [AP_DTYPE_FP16] = 989.4 * TFLOPS, [AP_DTYPE_BF16] = 989.4 * TFLOPS,                       \
     [AP_DTYPE_FP8] = 1978.9 * TFLOPS}

/* The reference nodes several SKUs share. DGX A100: 8x ConnectX-6 HDR 200 Gb/s for compute =
 * 25 GB/s per GPU, 2x AMD EPYC 7742 (64 cores, 8 DDR4-3200 channels each), 2 GPUs per PCIe
 * switch (nvidia-smi topo on DGX A100: GPU0/GPU1 PXB to NIC0/NIC1, NVIDIA/nccl#1505); 1 TB
 * (320 GB system) or 2 TB (640 GB system) of host memory. DGX H100: 8x ConnectX-7 400 Gb/s =
 * 50 GB/s per GPU, 2 TB, 2x Xeon Platinum 8480C (56 cores, 8 DDR5-4800 channels each), each
 * GPU behind its own PCIe switch with its NIC (nvidia-smi topo on HGX H100: GPU-NIC PIX,
 * GPU-GPU NODE/SYS, NVIDIA/nccl#1264). */
#define DGX_A100_NODE(host_bytes)                                                              \
    .ref_gpus_per_node = 8, .ref_nics_per_node = 8, .ref_net_bytes_per_s = 200e9 / 8.0,        \
    .ref_cpu_mem_bytes = (host_bytes), .ref_gpus_per_pcie_switch = 2, .ref_cpu_cores = 128,    \
    .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 3200)
#define DGX_H100_NODE                                                                          \
    .ref_gpus_per_node = 8, .ref_nics_per_node = 8, .ref_net_bytes_per_s = 400e9 / 8.0,        \
    .ref_cpu_mem_bytes = 2 * TIB, .ref_gpus_per_pcie_switch = 1, .ref_cpu_cores = 112,         \
    .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 4800)

static const ap_gpu catalog[] = {
    /* ---- Volta: V100 SXM2 in DGX-1 ------------------------------------------------------- */
    {
        .name = "v100-sxm2-16g",
        .vendor = "nvidia",
        .mem_bytes = 16160 * AP_MIB,
        /* V100 SXM2 datasheet: FP32 15.7 TFLOPS, Tensor (fp16, fp32 acc) 125 TFLOPS; no tf32,
         * bf16 or fp8 on Volta (sm_70). */
        .peak_flops = {[AP_DTYPE_FP32] = 15.7 * TFLOPS, [AP_DTYPE_FP16] = 125 * TFLOPS},
        .hbm_bytes_per_s = 900 * GBPS,
        .sm_count = 80,
        .sm = 70,
        /* NVLink2: 6 links x 25 GB/s per direction = 150 GB/s ("300 GB/s" bidirectional). In
         * DGX-1 the links form a hybrid cube-mesh, not a switch (see docs/hardware.md). */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 150 * GBPS,
        .pcie_gen = 3,
        .pcie_bytes_per_s = PCIE3_BPS,
        /* DGX-1 (V100): 8 GPUs, 4x EDR InfiniBand 100 Gb/s = 50 GB/s / 8 GPUs = 6.25 GB/s per
         * GPU; 512 GB DDR4-2133; 2x Xeon E5-2698 v4 (20 cores, 4 DDR4 channels each); 4 PCIe
         * switches with 2 GPUs each. */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 4,
        .ref_net_bytes_per_s = 4 * 100e9 / 8.0 / 8,
        .ref_cpu_mem_bytes = 512 * AP_GIB,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 40,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 4, 2133),
        .source = "NVIDIA Tesla V100 datasheet (SXM2: 15.7 FP32 / 125 tensor TFLOPS, 900 GB/s "
                  "HBM2, NVLink 300 GB/s, PCIe 32 GB/s); Volta whitepaper WP-08608-001 (80 SMs, "
                  "6 NVLink2 links); NVIDIA DGX-1 with Tesla V100 datasheet (4x EDR IB, 512 GB, "
                  "2x E5-2698 v4); memory: nvidia-smi memory.total 16160 MiB",
    },
    {
        .name = "v100-sxm2-32g",
        .vendor = "nvidia",
        .mem_bytes = 32510 * AP_MIB,
        .peak_flops = {[AP_DTYPE_FP32] = 15.7 * TFLOPS, [AP_DTYPE_FP16] = 125 * TFLOPS},
        .hbm_bytes_per_s = 900 * GBPS,
        .sm_count = 80,
        .sm = 70,
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 150 * GBPS,
        .pcie_gen = 3,
        .pcie_bytes_per_s = PCIE3_BPS,
        /* DGX-1 with 32 GB V100 (2018 refresh): same chassis as above. */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 4,
        .ref_net_bytes_per_s = 4 * 100e9 / 8.0 / 8,
        .ref_cpu_mem_bytes = 512 * AP_GIB,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 40,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 4, 2133),
        .source = "NVIDIA Tesla V100 datasheet (SXM2 32GB: 15.7 FP32 / 125 tensor TFLOPS, 900 "
                  "GB/s, NVLink 300 GB/s); Volta whitepaper WP-08608-001; NVIDIA DGX-1 with "
                  "Tesla V100 datasheet; memory: nvidia-smi memory.total 32510 MiB",
    },
    /* ---- Ampere: A100, A800 ------------------------------------------------------------------ */
    {
        .name = "a100-sxm4-40g",
        .vendor = "nvidia",
        .mem_bytes = 40536 * AP_MIB,
        .peak_flops = GA100_PEAKS,
        .hbm_bytes_per_s = 1555 * GBPS,
        .sm_count = 108,
        .sm = 80,
        /* NVLink3: 12 links, 600 GB/s bidirectional -> 300 GB/s per direction, via NVSwitch. */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 300 * GBPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        DGX_A100_NODE(1 * TIB),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (40GB SXM: 19.5 FP32 / 156 TF32 / 312 "
                  "BF16 TFLOPS, 1,555 GB/s, NVLink 600 GB/s, PCIe Gen4 64 GB/s); Ampere GA100 "
                  "whitepaper (108 SMs); NVIDIA DGX A100 datasheet (8x 200 Gb/s HDR, 1 TB, 2x "
                  "EPYC 7742); memory: nvidia-smi memory.total 40536 MiB",
    },
    {
        .name = "a100-sxm4-80g",
        .vendor = "nvidia",
        .mem_bytes = 81920 * AP_MIB,
        .peak_flops = GA100_PEAKS,
        .hbm_bytes_per_s = 2039 * GBPS,
        .sm_count = 108,
        .sm = 80,
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 300 * GBPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* DGX A100 640 GB: as the 320 GB system but 2 TB of host memory. */
        DGX_A100_NODE(2 * TIB),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM: 19.5 FP32 / 156 TF32 / 312 "
                  "BF16 TFLOPS, 2,039 GB/s HBM2e, NVLink 600 GB/s, PCIe Gen4 64 GB/s); NVIDIA "
                  "DGX A100 datasheet (640 GB version: 8x 200 Gb/s HDR, 2 TB, 2x EPYC 7742); "
                  "memory: nvidia-smi memory.total 81920 MiB",
    },
    {
        .name = "a100-pcie-80g",
        .vendor = "nvidia",
        .mem_bytes = 81920 * AP_MIB,
        .peak_flops = GA100_PEAKS,
        .hbm_bytes_per_s = 1935 * GBPS,
        .sm_count = 108,
        .sm = 80,
        /* "NVLink Bridge for 2 GPUs: 600 GB/s" (bidirectional) -> 300 GB/s per direction. */
        .link = AP_LINK_NVLINK_BRIDGE,
        .link_bytes_per_s = 300 * GBPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* assumed: 2-socket PCIe Gen4 server with 8 cards in bridged pairs, one 200 Gb/s NIC per
         * GPU pair, 2 GPUs per PCIe switch, 2x 32-core EPYC (8 DDR4-3200 channels each). */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 4,
        .ref_net_bytes_per_s = 4 * 200e9 / 8.0 / 8,
        .ref_cpu_mem_bytes = 1 * TIB,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 64,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 3200),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (80GB PCIe: 19.5 FP32 / 156 TF32 / 312 "
                  "BF16 TFLOPS, 1,935 GB/s, NVLink Bridge for 2 GPUs 600 GB/s, PCIe Gen4 64 "
                  "GB/s); reference server assumed (8 GPUs, 4x 200 Gb/s); memory: nvidia-smi "
                  "memory.total 81920 MiB",
    },
    {
        /* A800: the export variant of the A100 80GB SXM4 for China, the same GA100 part with
         * its NVLink cut from 600 to 400 GB/s (NVIDIA to Reuters, 2022-11-07: "an alternative
         * product to the NVIDIA A100 GPU for customers in China"; the A800 specification sheet
         * listed by the distributor Omnisky, reproduced by heise.de 2022-11-08 and
         * tweakers.net: compute, 80 GB HBM2e and the 400 W SXM module as the A100's). */
        .name = "a800-sxm4-80g",
        .vendor = "nvidia",
        .mem_bytes = 81920 * AP_MIB, /* assumed: the A100 80GB's nvidia-smi total */
        .peak_flops = GA100_PEAKS,
        .hbm_bytes_per_s = 2039 * GBPS,
        .sm_count = 108,
        .sm = 80,
        /* NVLink3 "400 GB/s" bidirectional -> 200 GB/s per direction, via NVSwitch */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 200 * GBPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* assumed: the DGX A100 640 GB system around it (8x 200 Gb/s, 2 TB, 2x EPYC 7742) */
        DGX_A100_NODE(2 * TIB),
        .source = "NVIDIA statement to Reuters 2022-11-07 and the A800 specification sheet "
                  "(Omnisky listing, heise.de 2022-11-08): the A100 80GB SXM4 (19.5 FP32 / 156 "
                  "TF32 / 312 BF16 TFLOPS, 2,039 GB/s HBM2e, PCIe Gen4 64 GB/s) with NVLink 400 "
                  "GB/s; reference system assumed as DGX A100 640 GB; memory assumed as the "
                  "A100 80GB's nvidia-smi memory.total 81920 MiB",
    },
    /* ---- Hopper: H100, H800, H200 ------------------------------------------------------------ */
    {
        .name = "h100-sxm",
        .vendor = "nvidia",
        .mem_bytes = 81559 * AP_MIB,
        .peak_flops = GH100_SXM_PEAKS,
        .hbm_bytes_per_s = 3350 * GBPS,
        .sm_count = 132,
        .sm = 90,
        /* NVLink4: 18 links, 900 GB/s bidirectional -> 450 GB/s per direction, via NVSwitch. */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 450 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        /* NVSwitch gen 3 with NVLink SHARP: CUDA multicast objects (CUDA 12.1+, driver 535+;
         * Transformer Engine examples/pytorch/comm_gemm_overlap/README.md) */
        .multicast = 1,
        DGX_H100_NODE,
        .source = "NVIDIA H100 Tensor Core GPU datasheet and H100 architecture whitepaper (SXM5: "
                  "66.9 FP32 / 494.7 TF32 / 989.4 BF16 / 1978.9 FP8 TFLOPS dense, 3.35 TB/s, "
                  "132 SMs, NVLink 900 GB/s, PCIe Gen5 128 GB/s); NVIDIA DGX H100 datasheet (8x "
                  "400 Gb/s ConnectX-7, 2 TB, 2x Xeon 8480C); memory: nvidia-smi memory.total "
                  "81559 MiB",
    },
    {
        .name = "h100-pcie",
        .vendor = "nvidia",
        .mem_bytes = 81559 * AP_MIB,
        /* H100 PCIe datasheet: FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026* TFLOPS where *
         * is with sparsity; dense is half. */
        .peak_flops = {[AP_DTYPE_FP32] = 51 * TFLOPS, [AP_DTYPE_TF32] = 378 * TFLOPS,
                       [AP_DTYPE_FP16] = 756.5 * TFLOPS, [AP_DTYPE_BF16] = 756.5 * TFLOPS,
                       [AP_DTYPE_FP8] = 1513 * TFLOPS},
        .hbm_bytes_per_s = 2000 * GBPS,
        .sm_count = 114,
        .sm = 90,
        /* "NVLink: 600 GB/s" over a 2-way bridge -> 300 GB/s per direction, pairs only. */
        .link = AP_LINK_NVLINK_BRIDGE,
        .link_bytes_per_s = 300 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        /* assumed: 2-socket PCIe Gen5 server, 8 cards in bridged pairs, one 400 Gb/s NIC per
         * GPU pair, 2 GPUs per PCIe switch, 2x 56-core Xeon (8 DDR5-4800 channels each). */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 4,
        .ref_net_bytes_per_s = 4 * 400e9 / 8.0 / 8,
        .ref_cpu_mem_bytes = 1 * TIB,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 112,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 4800),
        .source = "NVIDIA H100 Tensor Core GPU datasheet (PCIe: 51 FP32, 756 TF32 / 1,513 BF16 / "
                  "3,026 FP8 TFLOPS with sparsity, 2 TB/s HBM2e, NVLink bridge 600 GB/s, PCIe "
                  "Gen5 128 GB/s) and H100 whitepaper (114 SMs); reference server assumed (8 "
                  "GPUs, 4x 400 Gb/s); memory: nvidia-smi memory.total 81559 MiB",
    },
    {
        /* Meta's Grand Teton H100 (torchtitan's benchmark GPU): the H100 die with 96 GB of
         * HBM2e at 2.4 TB/s, run at a 500 W power limit (pytorch/torchtitan docs/performance.md:
         * "96GB HBM2e with 2.4 TB/sec peak memory bandwidth", "the default 500W power limit").
         * No datasheet gives its tensor-core peak; the torchtitan paper (Liang et al. 2024,
         * arXiv 2410.06511) bounds it: "between SXM and NVL". Here the midpoint of
         * those bounds, H100 SXM5 (989.4 BF16 dense, whitepaper) and H100 NVL (1,671 BF16
         * with sparsity = 835.5 dense per GPU, H100 datasheet), FP8 twice and TF32 half of
         * it; FP32 the midpoint of 66.9 and 60. */
        .name = "h100-96g-500w",
        .vendor = "nvidia",
        /* 6 HBM2e stacks of 16 GiB less the 361 MiB the 80 GB part's driver keeps (81920 ->
         * 81559 MiB): assumed, no nvidia-smi reading is published */
        .mem_bytes = 97943 * AP_MIB,
        .peak_flops = {[AP_DTYPE_FP32] = 63.45 * TFLOPS, [AP_DTYPE_TF32] = 456.2 * TFLOPS,
                       [AP_DTYPE_FP16] = 912.45 * TFLOPS, [AP_DTYPE_BF16] = 912.45 * TFLOPS,
                       [AP_DTYPE_FP8] = 1824.9 * TFLOPS},
        .hbm_bytes_per_s = 2400 * GBPS,
        .sm_count = 132,
        .sm = 90,
        /* "8 NVIDIA H100 GPUs fully connected with NVLink" (HGX baseboard, NVLink4 as the SXM) */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 450 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        .multicast = 1, /* NVSwitch with NVLink SHARP, as h100-sxm */
        /* "backend RDMA network with 400 Gb/s per GPU"; host memory, CPUs and PCIe switches of
         * Grand Teton are not stated there: assumed as DGX H100 */
        DGX_H100_NODE,
        .source = "pytorch/torchtitan docs/performance.md (Grand Teton: 8 H100 with 96 GB HBM2e, "
                  "2.4 TB/s, 500 W power limit, 400 Gb/s RDMA per GPU); peak: midpoint of H100 "
                  "SXM5 989.4 and H100 NVL 835.5 BF16 TFLOPS dense, the bounds the torchtitan "
                  "paper (arXiv 2410.06511) gives; memory assumed (6 x 16 GiB less 361 MiB); host "
                  "assumed as DGX H100",
    },
    {
        /* H800: the export variant of the H100 SXM5 for China, the same GH100 part with NVLink
         * cut from 900 to 400 GB/s and FP64 reduced (Reuters 2023-03-21, NVIDIA: "the H800 ...
         * is used by the Chinese branches of tech firms"; NVIDIA's China product listing).
         * DeepSeek-V3's cluster (Liu et al. 2024, arXiv 2412.19437, Sec. 3.1 and 3.2.2): 8 H800
         * per node on NVLink and NVSwitch, InfiniBand across nodes, "NVLink offers a bandwidth
         * of 160 GB/s, roughly 3.2 times that of IB (50 GB/s)" (achieved, per direction). */
        .name = "h800-sxm",
        .vendor = "nvidia",
        .mem_bytes = 81559 * AP_MIB, /* assumed: the H100 SXM's nvidia-smi total */
        .peak_flops = GH100_SXM_PEAKS,
        .hbm_bytes_per_s = 3350 * GBPS,
        .sm_count = 132,
        .sm = 90,
        /* NVLink4 "400 GB/s" bidirectional -> 200 GB/s per direction, via NVSwitch; whether its
         * fabric offers CUDA multicast is not published: autoplan does not assume it */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 200 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        /* 50 GB/s of InfiniBand per GPU (DeepSeek-V3, above); host assumed as DGX H100 */
        DGX_H100_NODE,
        .source = "Reuters 2023-03-21 and NVIDIA's China listing: the H100 SXM5 (66.9 FP32 / "
                  "494.7 TF32 / 989.4 BF16 / 1978.9 FP8 TFLOPS dense, 3.35 TB/s HBM3, 132 SMs, "
                  "PCIe Gen5 128 GB/s) with NVLink 400 GB/s; DeepSeek-V3 report (arXiv "
                  "2412.19437, Sec. 3.1, 3.2.2: 8 GPUs per node, IB 50 GB/s per GPU); host "
                  "assumed as DGX H100; memory assumed as the H100 SXM's nvidia-smi "
                  "memory.total 81559 MiB",
    },
    {
        .name = "h200",
        .vendor = "nvidia",
        .mem_bytes = 143771 * AP_MIB,
        /* H200 datasheet (SXM): same tensor cores and clocks as H100 SXM: FP32 67, TF32 989*,
         * BF16 1,979*, FP8 3,958* TFLOPS (* with sparsity). */
        .peak_flops = GH100_SXM_PEAKS,
        .hbm_bytes_per_s = 4800 * GBPS,
        .sm_count = 132,
        .sm = 90,
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 450 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        .multicast = 1, /* NVSwitch with NVLink SHARP, as h100-sxm */
        /* DGX H200: same chassis as DGX H100 (8x 400 Gb/s, 2 TB, 2x Xeon 8480C). */
        DGX_H100_NODE,
        .source = "NVIDIA H200 Tensor Core GPU datasheet (SXM: 141 GB HBM3e, 4.8 TB/s, 1,979 "
                  "BF16 / 3,958 FP8 TFLOPS with sparsity, NVLink 900 GB/s, PCIe Gen5 128 GB/s); "
                  "NVIDIA DGX H200 datasheet (8x 400 Gb/s, 2 TB); memory: nvidia-smi "
                  "memory.total 143771 MiB",
    },
    /* ---- Blackwell: B200 ------------------------------------------------------------------- */
    {
        .name = "b200",
        .vendor = "nvidia",
        .mem_bytes = 183359 * AP_MIB,
        /* HGX B200 datasheet, individual GPU: FP32 75 TFLOPS, TF32 2.2 PF*, FP16/BF16 4.5 PF*,
         * FP8 9 PF* (* with sparsity) -> dense: 75 / 1100 / 2250 / 4500 TFLOPS. */
        .peak_flops = {[AP_DTYPE_FP32] = 75 * TFLOPS, [AP_DTYPE_TF32] = 1100 * TFLOPS,
                       [AP_DTYPE_FP16] = 2250 * TFLOPS, [AP_DTYPE_BF16] = 2250 * TFLOPS,
                       [AP_DTYPE_FP8] = 4500 * TFLOPS},
        /* HGX B200: 7.7 TB/s per GPU (62 TB/s per 8; the driver's 7680-bit bus at 3996 MHz gives
         * 7.67 TB/s, pytorch/ao#4002); DGX B200's "64 TB/s" rounds up. */
        .hbm_bytes_per_s = 7700 * GBPS,
        .sm_count = 148,
        .sm = 100,
        /* NVLink5: 1.8 TB/s bidirectional -> 900 GB/s per direction. */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 900 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        .multicast = 1, /* NVSwitch with NVLink SHARP, as h100-sxm */
        /* DGX B200: 8x ConnectX-7 400 Gb/s; 2 TB (up to 4 TB); 2x Xeon Platinum 8570 (56 cores,
         * 8 DDR5-5600 channels each); one GPU per PCIe switch (nvidia-smi topo on B200 nodes:
         * GPU pairs NODE, vllm-project/vllm#16336). */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 8,
        .ref_net_bytes_per_s = 400e9 / 8.0,
        .ref_cpu_mem_bytes = 2 * TIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 112,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 5600),
        .source = "NVIDIA HGX B200 datasheet (per GPU: 75 FP32 TFLOPS, 2.2 TF32 / 4.5 BF16 / 9 "
                  "FP8 PFLOPS with sparsity, 180 GB at 7.7 TB/s, NVLink 1.8 TB/s, PCIe Gen5 128 "
                  "GB/s); "
                  "NVIDIA DGX B200 datasheet (8x 400 Gb/s ConnectX-7, 2 TB, 2x Xeon 8570); 148 "
                  "SMs and 7.67 TB/s from cudaGetDeviceProperties (pytorch/ao#4002); memory: "
                  "nvidia-smi memory.total 183359 MiB",
    },
    /* ---- Blackwell: GB200 (NVL72) ----------------------------------------------------------- */
    {
        .name = "gb200",
        .vendor = "nvidia",
        /* GB200 NVL72 datasheet: up to 13.4 TB of HBM3e for 72 GPUs, 186 GB a GPU against the
         * B200's 180 GB; memory.total assumed as B200's 183359 MiB x 186 / 180 */
        .mem_bytes = 189471 * AP_MIB,
        /* GB200 NVL72 datasheet, rack totals for 72 GPUs: FP32 5,760 TFLOPS, TF32 180 PF*,
         * FP16/BF16 360 PF*, FP8 720 PF* (* with sparsity) -> per GPU dense: 80 / 1250 / 2500 /
         * 5000 TFLOPS */
        .peak_flops = {[AP_DTYPE_FP32] = 80 * TFLOPS, [AP_DTYPE_TF32] = 1250 * TFLOPS,
                       [AP_DTYPE_FP16] = 2500 * TFLOPS, [AP_DTYPE_BF16] = 2500 * TFLOPS,
                       [AP_DTYPE_FP8] = 5000 * TFLOPS},
        .hbm_bytes_per_s = 8000 * GBPS, /* 576 TB/s / 72 */
        .sm_count = 148,                /* assumed: the B200 die's */
        .sm = 100,
        /* NVLink5 through the NVL72's NVLink switch trays: 130 TB/s / 72 = 1.8 TB/s
         * bidirectional -> 900 GB/s per direction, every GPU of the rack one NVLink domain */
        .link = AP_LINK_NVLINK,
        .link_bytes_per_s = 900 * GBPS,
        /* host link: NVLink-C2C, 900 GB/s bidirectional between one Grace CPU and its two GPUs
         * (GB200 superchip): 450 GB/s per direction, shared by two GPUs */
        .pcie_gen = 5,
        .pcie_bytes_per_s = 450 * GBPS,
        .multicast = 1, /* NVLink switch with NVLink SHARP, as b200 */
        /* the reference "node" is an NVL72 rack's NVLink domain as power-of-two layouts use it:
         * 64 of its 72 GPUs (NVIDIA's GB200 benchmarks run 64, 128 and 256 GPUs; --gpus-per-node
         * 72 for the whole rack) with their 32 Grace CPUs (a GB200 superchip: one Grace, 72 Arm
         * Neoverse V2 cores and up to 480 GB of LPDDR5X at up to 512 GB/s, for two GPUs), one
         * 400 Gb/s ConnectX-7 NIC per GPU (assumed, as DGX B200) */
        .ref_gpus_per_node = 64,
        /* an operating system per compute tray: 18 trays of 2 GB200 superchips, 4 GPUs each
         * (the datasheet's 72 GPUs / 36 Grace CPUs a rack) */
        .ref_gpus_per_host = 4,
        .ref_nics_per_node = 64,
        .ref_net_bytes_per_s = 400e9 / 8.0,
        .ref_cpu_mem_bytes = 32 * 480e9,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 32 * 72,
        .ref_host_mem_bytes_per_s = 32 * 512e9,
        .source = "NVIDIA GB200 NVL72 datasheet (72 Blackwell GPUs and 36 Grace CPUs a rack: FP32 "
                  "5,760 TFLOPS, TF32 180 / BF16 360 / FP8 720 PFLOPS with sparsity, up to 13.4 "
                  "TB HBM3e at 576 TB/s, NVLink 130 TB/s, 2,592 cores, up to 17 TB LPDDR5X at "
                  "18.4 TB/s; a superchip: NVLink-C2C 900 GB/s, up to 480 GB LPDDR5X at 512 "
                  "GB/s); per GPU: totals / 72, dense = sparse / 2; SMs, memory.total and one "
                  "400 Gb/s NIC a GPU assumed from the B200",
    },
    /* ---- Ada: L40S, RTX 4090 --------------------------------------------------------------- */
    {
        .name = "l40s",
        .vendor = "nvidia",
        .mem_bytes = 46068 * AP_MIB,
        /* L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733
         * (1,466*) TFLOPS; * = with sparsity. */
        .peak_flops = {[AP_DTYPE_FP32] = 91.6 * TFLOPS, [AP_DTYPE_TF32] = 183 * TFLOPS,
                       [AP_DTYPE_FP16] = 362.05 * TFLOPS, [AP_DTYPE_BF16] = 362.05 * TFLOPS,
                       [AP_DTYPE_FP8] = 733 * TFLOPS},
        .hbm_bytes_per_s = 864 * GBPS, /* GDDR6 */
        .sm_count = 142,
        .sm = 89,
        /* No NVLink; peer-to-peer over PCIe Gen4 x16. */
        .link = AP_LINK_PCIE,
        .link_bytes_per_s = PCIE4_BPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* assumed: 8-GPU PCIe server, one 200 Gb/s NIC per GPU pair, 2 GPUs per PCIe switch,
         * 2x 32-core Xeon (8 DDR5-4800 channels each), 1 TiB. */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 4,
        .ref_net_bytes_per_s = 4 * 200e9 / 8.0 / 8,
        .ref_cpu_mem_bytes = 1 * TIB,
        .ref_gpus_per_pcie_switch = 2,
        .ref_cpu_cores = 64,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 8, 4800),
        .source = "NVIDIA L40S datasheet (91.6 FP32, 183 TF32 / 362.05 BF16 / 733 FP8 TFLOPS "
                  "dense, 48 GB GDDR6 864 GB/s, PCIe Gen4 x16 64 GB/s, no NVLink); Ada "
                  "whitepaper (142 SMs); reference server assumed (8 GPUs, 4x 200 Gb/s); "
                  "memory: nvidia-smi memory.total 46068 MiB",
    },
    /* ---- GeForce ---------------------------------------------------------------------------- */
    {
        .name = "rtx-2060",
        .vendor = "nvidia",
        .mem_bytes = 5931 * AP_MIB,
        /* TU106: 1920 CUDA cores x 2 x 1.68 GHz boost = 6.45 TFLOPS fp32. 240 tensor cores x 64
         * fp16 FMA/clk x 2 x 1.68 GHz = 51.6 TFLOPS with fp16 accumulate; GeForce Turing runs
         * fp32 accumulate at half rate (Turing whitepaper, Appendix A, RTX 2080 Ti: 53.8 vs
         * 107.6) -> 25.8 TFLOPS. No tf32/bf16/fp8 on Turing (sm_75). */
        .peak_flops = {[AP_DTYPE_FP32] = 6.45 * TFLOPS, [AP_DTYPE_FP16] = 25.8 * TFLOPS},
        .hbm_bytes_per_s = 336 * GBPS, /* GDDR6, 192-bit at 14 Gb/s */
        .sm_count = 30,
        .sm = 75,
        .link = AP_LINK_NONE, /* no NVLink connector, no P2P on GeForce */
        .link_bytes_per_s = 0,
        .pcie_gen = 3,
        .pcie_bytes_per_s = PCIE3_BPS,
        /* assumed: a desktop with one card, 1 GbE, 32 GiB dual-channel DDR4-3200, 8 cores. */
        .ref_gpus_per_node = 1,
        .ref_nics_per_node = 1,
        .ref_net_bytes_per_s = 1e9 / 8.0,
        .ref_cpu_mem_bytes = 32 * AP_GIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 8,
        .ref_host_mem_bytes_per_s = DRAM_BPS(1, 2, 3200),
        .source = "NVIDIA GeForce RTX 2060 specifications (1920 CUDA cores, 1.68 GHz boost, 6 GB "
                  "GDDR6 336 GB/s, PCIe 3.0 x16); NVIDIA Turing whitepaper (tensor core rates, "
                  "half-rate fp32 accumulate on GeForce); desktop reference assumed; memory: "
                  "nvidia-smi memory.total 5931 MiB (Linux)",
    },
    {
        .name = "rtx-3090",
        .vendor = "nvidia",
        .mem_bytes = 24576 * AP_MIB,
        /* GA102 whitepaper, Table (RTX 3090): FP32 35.6; FP16 and BF16 tensor with fp32
         * accumulate 71 (142 with sparsity); TF32 35.6. No fp8 on Ampere (sm_86). */
        .peak_flops = {[AP_DTYPE_FP32] = 35.6 * TFLOPS, [AP_DTYPE_TF32] = 35.6 * TFLOPS,
                       [AP_DTYPE_FP16] = 71 * TFLOPS, [AP_DTYPE_BF16] = 71 * TFLOPS},
        .hbm_bytes_per_s = 936 * GBPS, /* GDDR6X */
        .sm_count = 82,
        .sm = 86,
        /* NVLink bridge (4 links x 14.0625 GB/s per direction): 112.5 GB/s total, pairs only. */
        .link = AP_LINK_NVLINK_BRIDGE,
        .link_bytes_per_s = 56.25 * GBPS,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* assumed: a workstation with one bridged pair, 10 GbE, 128 GiB quad-channel DDR4-3200,
         * 16 cores, each card on its own CPU root port. */
        .ref_gpus_per_node = 2,
        .ref_nics_per_node = 1,
        .ref_net_bytes_per_s = 10e9 / 8.0 / 2,
        .ref_cpu_mem_bytes = 128 * AP_GIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 16,
        .ref_host_mem_bytes_per_s = DRAM_BPS(1, 4, 3200),
        .source = "NVIDIA Ampere GA102 GPU architecture whitepaper (RTX 3090: 82 SMs, 35.6 FP32 "
                  "/ 71 FP16-BF16 tensor TFLOPS with fp32 accumulate, 936 GB/s, NVLink 112.5 "
                  "GB/s); workstation reference assumed; memory: nvidia-smi memory.total 24576 "
                  "MiB",
    },
    {
        .name = "rtx-4090",
        .vendor = "nvidia",
        .mem_bytes = 24564 * AP_MIB,
        /* Ada whitepaper, Appendix (RTX 4090): FP32 82.6; FP16/BF16 tensor with fp32 accumulate
         * 165.2 (330.4*); FP8 with fp32 accumulate 330.3 (660.6*); TF32 82.6 (165.2*). */
        .peak_flops = {[AP_DTYPE_FP32] = 82.6 * TFLOPS, [AP_DTYPE_TF32] = 82.6 * TFLOPS,
                       [AP_DTYPE_FP16] = 165.2 * TFLOPS, [AP_DTYPE_BF16] = 165.2 * TFLOPS,
                       [AP_DTYPE_FP8] = 330.3 * TFLOPS},
        .hbm_bytes_per_s = 1008 * GBPS, /* GDDR6X */
        .sm_count = 128,
        .sm = 89,
        .link = AP_LINK_NONE, /* no NVLink; P2P disabled on GeForce Ada */
        .link_bytes_per_s = 0,
        .pcie_gen = 4,
        .pcie_bytes_per_s = PCIE4_BPS,
        /* assumed: a 4-card workstation (Threadripper PRO: 32 cores, 8 DDR4-3200 channels),
         * 10 GbE, 256 GiB, each card on its own root port. */
        .ref_gpus_per_node = 4,
        .ref_nics_per_node = 1,
        .ref_net_bytes_per_s = 10e9 / 8.0 / 4,
        .ref_cpu_mem_bytes = 256 * AP_GIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 32,
        .ref_host_mem_bytes_per_s = DRAM_BPS(1, 8, 3200),
        .source = "NVIDIA Ada GPU architecture whitepaper (RTX 4090: 128 SMs, 82.6 FP32 / 165.2 "
                  "FP16-BF16 / 330.3 FP8 tensor TFLOPS with fp32 accumulate, 1,008 GB/s, PCIe "
                  "Gen4, no NVLink); workstation reference assumed; memory: nvidia-smi "
                  "memory.total 24564 MiB",
    },
    /* ---- AMD: MI300X ------------------------------------------------------------------------ */
    {
        .name = "mi300x",
        .vendor = "amd",
        /* 192 GB HBM3; rocminfo reports the GPU's global pool as 201310208 KB
         * (ROCm/legacy-rocm-build#4414). */
        .mem_bytes = 201310208.0 * 1024.0,
        /* AMD Instinct MI300X data sheet: FP32 matrix 163.4, TF32 653.7, FP16/BF16 1307.4, FP8
         * 2614.9 TFLOPS dense (the sheet lists twice these with sparsity). */
        .peak_flops = {[AP_DTYPE_FP32] = 163.4 * TFLOPS, [AP_DTYPE_TF32] = 653.7 * TFLOPS,
                       [AP_DTYPE_FP16] = 1307.4 * TFLOPS, [AP_DTYPE_BF16] = 1307.4 * TFLOPS,
                       [AP_DTYPE_FP8] = 2614.9 * TFLOPS},
        .hbm_bytes_per_s = 5300 * GBPS,
        .sm_count = 304, /* compute units */
        /* Infinity Fabric: 7 links of 128 GB/s bidirectional (64 per direction), one to each
         * peer of the 8-GPU mesh: 448 GB/s per direction per GPU in aggregate (collectives),
         * 64 GB/s between any one pair. */
        .link = AP_LINK_XGMI,
        .link_bytes_per_s = 7 * 64 * GBPS,
        .pcie_gen = 5,
        .pcie_bytes_per_s = PCIE5_BPS,
        /* AMD Instinct MI300X Platform (8 OAM GPUs). Host side assumed as typical OEM builds:
         * one 400 Gb/s NIC per GPU, 2 TiB, 2x 64-core EPYC 9004 (12 DDR5-4800 channels each). */
        .ref_gpus_per_node = 8,
        .ref_nics_per_node = 8,
        .ref_net_bytes_per_s = 400e9 / 8.0,
        .ref_cpu_mem_bytes = 2 * TIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 128,
        .ref_host_mem_bytes_per_s = DRAM_BPS(2, 12, 4800),
        .source = "AMD Instinct MI300X data sheet (304 CUs, 192 GB HBM3 5.3 TB/s, 163.4 FP32 "
                  "matrix / 653.7 TF32 / 1307.4 BF16 / 2614.9 FP8 TFLOPS dense, 7 Infinity "
                  "Fabric links 128 GB/s each, PCIe Gen5 x16 128 GB/s); AMD Instinct MI300X "
                  "Platform (8 GPUs); host side assumed; memory: rocminfo pool 201310208 KB",
    },
    /* ---- the runtime's CPU ranks (`autoplan run`) ------------------------------------------ */
    {
        /* One rank of autoplan's runtime: one x86-64 core of a server, fp32 only. Nominal figures
         * for planning without a measurement; `autoplan run` measures GEMM, memory and MPI
         * figures on the host and prices its plans with those (runtime/bench.c). Used with the
         * runtime trainer only (costmodel/plan.c). */
        .name = "cpu",
        .vendor = "cpu",
        .mem_bytes = 16 * AP_GIB, /* assumed share of host memory per rank */
        /* AVX2 with two 256-bit FMA units: 2 x 8 fp32 lanes x 2 FLOP = 32 FLOP/cycle (Intel 64
         * and IA-32 Architectures Optimization Reference Manual, Haswell and later: FMA on
         * ports 0 and 1), at 3.0 GHz */
        .peak_flops = {[AP_DTYPE_FP32] = 96e9},
        .hbm_bytes_per_s = 25.6 * GBPS, /* one DDR4-3200 channel: 3200 MT/s x 8 bytes */
        .sm_count = 1,                  /* no tile waves */
        /* MPI between processes of one host copies through shared memory: each byte read and
         * written once, about half a channel (assumed) */
        .link = AP_LINK_SHM,
        .link_bytes_per_s = 12.8 * GBPS,
        .pcie_gen = 0,                  /* no PCIe hop: "offload" copies are host memcpy */
        .pcie_bytes_per_s = 12.8 * GBPS,
        /* assumed: a 64-core single-socket server, 8 DDR4-3200 channels, 256 GiB, 100 Gb/s */
        .ref_gpus_per_node = 64,
        .ref_nics_per_node = 1,
        .ref_net_bytes_per_s = 100e9 / 8.0 / 64,
        .ref_cpu_mem_bytes = 256 * AP_GIB,
        .ref_gpus_per_pcie_switch = 1,
        .ref_cpu_cores = 64,
        .ref_host_mem_bytes_per_s = DRAM_BPS(1, 8, 3200),
        .source = "one AVX2/FMA x86-64 core at 3.0 GHz (32 fp32 FLOP/cycle, Intel Optimization "
                  "Reference Manual) and one DDR4-3200 channel (25.6 GB/s, JEDEC JESD79-4); "
                  "nominal: autoplan run measures the host (runtime/bench.c)",
    },
};

#define CATALOG_N ((int)(sizeof catalog / sizeof catalog[0]))

/* Short names, comma-separated, per catalog name (tests/test_hw.c checks that every entry
 * here names a catalog GPU and that every alias resolves to it). */
static const struct {
    const char *name;
    const char *aliases;
} alias_table[] = {
    {"v100-sxm2-16g", "v100-16g"},
    {"v100-sxm2-32g", "v100,v100-32g,v100-sxm2"},
    {"a100-sxm4-40g", "a100-40g"},
    {"a100-sxm4-80g", "a100,a100-80g,a100-sxm4,a100-sxm"},
    {"a100-pcie-80g", "a100-pcie,a100-80gb-pcie"},
    {"a800-sxm4-80g", "a800,a800-80g,a800-sxm4,a800-sxm"},
    /* nvidia-smi: "NVIDIA H100 80GB HBM3"; papers: "H100-SXM5-80GB" */
    {"h100-sxm", "h100,h100-sxm5,h100-80g,h100-sxm5-80g,h100-sxm-80g,h100-80gb-hbm3"},
    {"h100-pcie", "h100-pcie-80g"},
    {"h100-96g-500w", "h100-hbm2e-500w,h100-grand-teton"},
    {"h800-sxm", "h800,h800-sxm5,h800-80g"},
    {"h200", "h200-sxm,h200-141g"},
    {"b200", "b200-sxm"},
    {"gb200", "gb200-nvl72"},
    {"rtx-2060", "rtx2060"},
    {"rtx-3090", "rtx3090"},
    {"rtx-4090", "rtx4090"},
    {"mi300x", "mi300x-192g"},
};

#define ALIAS_N ((int)(sizeof alias_table / sizeof alias_table[0]))

int ap_gpu_catalog_count(void) { return CATALOG_N; }

const ap_gpu *ap_gpu_catalog_at(int i) {
    return i >= 0 && i < CATALOG_N ? &catalog[i] : NULL;
}

/* Bump when any number above changes: it is part of every cache key. A new entry changes no
 * other entry's numbers and keeps it (gb200 joined under catalog-2026.11-1). */
const char *ap_gpu_catalog_version(void) { return "catalog-2026.11-1"; }

/* Lower-case, '_' and ' ' to '-', and a trailing "gb" after a digit to "g" ("A100_80GB" ->
 * "a100-80g"). Returns 0 when the name does not fit. */
static int normalize(const char *in, char *out, size_t n) {
    size_t k = 0;
    for (; in[k]; k++) {
        if (k + 1 >= n) return 0;
        unsigned char c = (unsigned char)in[k];
        out[k] = (c == '_' || c == ' ') ? '-' : (char)tolower(c);
    }
    out[k] = '\0';
    if (k >= 3 && out[k - 1] == 'b' && out[k - 2] == 'g' && isdigit((unsigned char)out[k - 3]))
        out[k - 1] = '\0';
    return 1;
}

static const ap_gpu *by_name(const char *name) {
    for (int i = 0; i < CATALOG_N; i++)
        if (strcmp(catalog[i].name, name) == 0) return &catalog[i];
    return NULL;
}

/* Is `word` one of the comma-separated names in `list`? */
static int in_list(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        p += len + (c ? 1 : 0);
    }
    return 0;
}

static const ap_gpu *find_exact(const char *norm) {
    const ap_gpu *g = by_name(norm);
    if (g) return g;
    for (int i = 0; i < ALIAS_N; i++)
        if (in_list(alias_table[i].aliases, norm)) return by_name(alias_table[i].name);
    return NULL;
}

/* A normalised name past the vendor and brand words drivers print before the part ("NVIDIA
 * GeForce RTX 4090", "Tesla V100-SXM2-32GB", "AMD Instinct MI300X"), so a name pasted from
 * nvidia-smi or rocm-smi finds its entry; a name that is only a brand word stays as it is. */
static const char *past_brand(const char *norm) {
    static const char *const brands[] = {"nvidia-", "tesla-", "geforce-", "amd-", "instinct-"};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++) {
            size_t n = strlen(brands[i]);
            if (strncmp(norm, brands[i], n) == 0 && norm[n]) {
                norm += n;
                again = 1;
            }
        }
    }
    return norm;
}

const ap_gpu *ap_gpu_find(const char *name) {
    char norm[64];
    if (!name || !normalize(name, norm, sizeof norm)) return NULL;
    return find_exact(past_brand(norm));
}

const char *ap_gpu_aliases(int i) {
    if (i < 0 || i >= CATALOG_N) return "";
    for (int a = 0; a < ALIAS_N; a++)
        if (strcmp(alias_table[a].name, catalog[i].name) == 0) return alias_table[a].aliases;
    return "";
}

const char *ap_gpu_closest(const char *name) {
    char norm[64];
    if (!name || !normalize(name, norm, sizeof norm)) {
        /* too long to be a GPU name: compare its first 63 characters */
        size_t k = 0;
        for (; name && name[k] && k < sizeof norm - 1; k++)
            norm[k] = (char)tolower((unsigned char)name[k]);
        norm[k] = '\0';
    }
    const char *best = catalog[0].name, *key = past_brand(norm);
    int best_d = 1 << 30;
    for (int i = 0; i < CATALOG_N; i++) {
        int d = ap_edit_distance(key, catalog[i].name);
        /* a prefix match ("h100-sx") counts as close */
        if (key[0] && strncmp(catalog[i].name, key, strlen(key)) == 0) d = 0;
        if (d < best_d) { best_d = d; best = catalog[i].name; }
    }
    for (int i = 0; i < ALIAS_N; i++) {
        const char *p = alias_table[i].aliases;
        while (*p) {
            char word[64];
            const char *c = strchr(p, ',');
            size_t full = c ? (size_t)(c - p) : strlen(p);
            size_t len = full < sizeof word ? full : sizeof word - 1;
            memcpy(word, p, len);
            word[len] = '\0';
            int d = ap_edit_distance(key, word);
            if (d < best_d) { best_d = d; best = alias_table[i].name; }
            p += full + (c ? 1 : 0);
        }
    }
    return best;
}

ap_status ap_gpu_lookup(const char *name, const char *what, const ap_gpu **out, ap_err *err) {
    const ap_gpu *g = ap_gpu_find(name);
    if (!g)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: unknown GPU '%.64s' (closest: '%s'; `autoplan gpus` lists the "
                          "catalog)", what, name ? name : "", ap_gpu_closest(name ? name : ""));
    *out = g;
    return AP_OK;
}
