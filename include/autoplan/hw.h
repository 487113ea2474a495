/*
 * hw.h - the GPU catalog and the cluster a plan runs on.
 *
 * The catalog is built in (costmodel/catalog.c), one entry per SKU with its datasheet cited.
 * A cluster is one GPU type (mixed types are refused), a GPU count, the node shape and the
 * links between GPUs: the fast peer link inside an NVLink domain, the network across domains,
 * PCIe to the host (shared by the GPUs behind one switch), and host memory per node.
 *
 * Units: bytes, bytes per second (per direction), FLOP/s.
 */
#ifndef AP_HW_H
#define AP_HW_H

#include "autoplan/common.h"

typedef enum { AP_DTYPE_FP32 = 0, AP_DTYPE_TF32, AP_DTYPE_FP16, AP_DTYPE_BF16, AP_DTYPE_FP8,
               AP_DTYPE_COUNT } ap_dtype;

typedef enum {
    AP_LINK_NONE = 0,     /* no peer-to-peer: traffic goes through host PCIe */
    AP_LINK_PCIE,         /* P2P over PCIe */
    AP_LINK_NVLINK,       /* NVLink/NVSwitch: all GPUs of the domain at full bandwidth */
    AP_LINK_NVLINK_BRIDGE,/* NVLink bridge: pairs only */
    AP_LINK_XGMI,         /* AMD Infinity Fabric */
    AP_LINK_SHM           /* processes of one host through shared memory (the cpu device) */
} ap_link_kind;

typedef struct ap_gpu {
    char name[32];              /* catalog name, lower case: "a100-sxm4-80g" */
    char vendor[16];            /* "nvidia", "amd" */
    double mem_bytes;           /* usable device memory */
    double peak_flops[AP_DTYPE_COUNT]; /* dense peak FLOP/s per dtype, 0 = unsupported */
    double hbm_bytes_per_s;     /* device memory bandwidth */
    int sm_count;               /* SMs (CUs for AMD), for wave quantisation */
    int sm;                     /* CUDA compute capability x 10 (70 Volta, 75 Turing, 80 and 86
                                   Ampere, 89 Ada, 90 Hopper, 100 Blackwell): which kernels run
                                   (FlashAttention-2 needs 80, FlashAttention-3 90) and which
                                   GPU's published tables a GPU without its own borrows; 0: not
                                   an NVIDIA GPU */
    ap_link_kind link;
    double link_bytes_per_s;    /* peer link bandwidth per direction per GPU */
    int pcie_gen;
    double pcie_bytes_per_s;    /* host link per direction */
    int multicast;              /* CUDA multicast over the NVLink fabric (NVSwitch with NVLink
                                   SHARP: Hopper and Blackwell SXM systems;
                                   CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED), which Transformer
                                   Engine's comm-GEMM overlap needs by default */
    /* reference system (DGX/HGX or workstation) */
    int ref_gpus_per_node;
    int ref_gpus_per_host;      /* GPUs one operating-system host drives (the processes a
                                   launcher starts per node); 0: ref_gpus_per_node. GB200 NVL72:
                                   4 GPUs a compute tray, 64-72 an NVLink domain ("node") */
    int ref_nics_per_node;
    double ref_net_bytes_per_s; /* network bandwidth per GPU per direction */
    double ref_cpu_mem_bytes;   /* host memory per node */
    int ref_gpus_per_pcie_switch;
    int ref_cpu_cores;          /* host cores per node */
    double ref_host_mem_bytes_per_s; /* host DRAM bandwidth per node */
    const char *source;         /* datasheet citation */
} ap_gpu;

typedef struct ap_cluster {
    char name[64];
    ap_gpu gpu;
    int gpus;                  /* total GPUs N */
    int gpus_per_node;
    int nvlink_domain;         /* GPUs sharing the fast link (default = gpus_per_node) */
    double link_bytes_per_s;   /* peer link per direction per GPU (from gpu unless overridden) */
    double net_bytes_per_s;    /* network per GPU per direction */
    double pcie_bytes_per_s;   /* host link per GPU per direction */
    int gpus_per_pcie_switch;  /* GPUs sharing one PCIe switch uplink */
    double cpu_mem_bytes;      /* host memory per node */
    int cpu_cores;             /* host cores per node */
    double host_mem_bytes_per_s; /* host DRAM bandwidth per node */
    /* added for issue 18 (ZeRO-Infinity NVMe offload): local NVMe per node; 0 = none. A
       capacity needs both bandwidths (ap_cluster_validate). */
    double nvme_bytes;           /* NVMe capacity per node */
    double nvme_read_bytes_per_s;  /* aggregate NVMe read bandwidth per node */
    double nvme_write_bytes_per_s; /* aggregate NVMe write bandwidth per node */
} ap_cluster;

/* Catalog access. Names are matched case-insensitively, aliases included ("h100" = "h100-sxm").
 * Returned pointers are static and live for the program. */
int ap_gpu_catalog_count(void);
const ap_gpu *ap_gpu_catalog_at(int i);
const ap_gpu *ap_gpu_find(const char *name);
/* Comma-separated alias list of catalog entry i ("" if none). */
const char *ap_gpu_aliases(int i);
/* Version of the catalog data; part of every cache key. */
const char *ap_gpu_catalog_version(void);
/* The catalog name nearest to `name` (edit distance over names and aliases), for "did you
 * mean" messages. Never NULL; static. */
const char *ap_gpu_closest(const char *name);
/* ap_gpu_find with the standard error: "<what>: unknown GPU 'x' (closest: 'y'; `autoplan gpus`
 * lists the catalog)". `what` names the flag or file field ("--gpu", "dgx.json: field 'gpu'"). */
ap_status ap_gpu_lookup(const char *name, const char *what, const ap_gpu **out, ap_err *err);

const char *ap_dtype_name(ap_dtype d);                 /* "bf16" */
ap_status ap_dtype_parse(const char *s, ap_dtype *out); /* "bf16"|"fp16"|"fp8"|"fp32"|"tf32" */
const char *ap_link_name(ap_link_kind k);

/* A cluster of `gpus` GPUs of type `gpu` shaped like its reference system. */
void ap_cluster_from_gpu(const ap_gpu *gpu, int gpus, ap_cluster *out);

/* Change the node shape of a cluster and reset what depends on it to the GPU's defaults:
 * gpus_per_node (clamped to gpus when gpus is smaller: part of one node), nvlink_domain (2 for
 * NVLink-bridged pairs, else the node), gpus_per_pcie_switch (reference, at most the node).
 * Callers that also set nvlink_domain set it after this. */
void ap_cluster_set_gpus_per_node(ap_cluster *c, int gpus_per_node);

/* GPUs one operating-system host of the GPU's reference system drives: ref_gpus_per_host,
 * else its node (ref_gpus_per_node). */
int ap_gpu_gpus_per_host(const ap_gpu *g);

/* GPUs per launcher node (torchrun --nproc-per-node, SLURM --gpus-per-node): the GPU's host
 * size where it drives fewer GPUs than the cluster's node (GB200: 4 a tray in an NVLink domain of
 * 64), else the node's; never more than the cluster's GPUs. */
int ap_cluster_gpus_per_host(const ap_cluster *c);

/* Load a cluster file (JSON, format in docs/hardware.md). Refuses mixed GPU types. */
ap_status ap_cluster_load(const char *path, ap_cluster *out, ap_err *err);
ap_status ap_cluster_parse(const char *text, size_t len, const char *where, ap_cluster *out,
                           ap_err *err);
/* ap_cluster_load with `gpus` GPUs in place of the file's count (0: the file's), as --gpus over
 * --cluster: the file is checked as written, then its node (gpus_per_node, nvlink_domain, ...)
 * is kept for the new count, even where the file's own count used part of one node. Not
 * checked for the new count: the caller validates, naming its override. */
ap_status ap_cluster_load_gpus(const char *path, int gpus, ap_cluster *out, ap_err *err);
/* Consistency: gpus >= 1, gpus_per_node >= 1, nvlink_domain divides... */
/* The slowest bandwidth a cluster may have (1 MB/s): below it a value is a unit typo. */
#define AP_MIN_BYTES_PER_S 1e6

ap_status ap_cluster_validate(const ap_cluster *c, const char *where, ap_err *err);

uint64_t ap_cluster_fingerprint(const ap_cluster *c);

#endif
