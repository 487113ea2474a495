/*
 * identify.c - which catalog GPU a measured device is (include/autoplan/profiler.h): the name
 * the driver reports (cudaGetDeviceProperties, nvidia-smi) and its memory map to one SKU of the
 * built-in catalog (costmodel/catalog.c), so a profile measured on it replaces that SKU's
 * published rows. Rules, not a lookup of exact strings: drivers spell the same part in several
 * ways ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB").
 *
 * What it does not do: query the device (gpubench.c) or guess: a part the catalog has no
 * entry for (H100 NVL, A100 PCIe 40GB, the PCIe A800 and H800, L4, ...) is refused, and the
 * user names the entry to use with --gpu.
 */
#include "autoplan/profiler.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "autoplan/hw.h"

#define GB 1e9

ap_status ap_profiler_gpu_sku(const char *device_name, double mem_bytes, char *out, size_t n,
                              ap_err *err) {
    char s[160];
    size_t i = 0;
    for (; device_name[i] && i + 1 < sizeof s; i++) s[i] = (char)tolower((unsigned char)device_name[i]);
    s[i] = '\0';
    const int pcie = strstr(s, "pcie") != NULL, nvl = strstr(s, "nvl") != NULL;
    const char *sku = NULL;
    if (strstr(s, "h100")) sku = nvl ? NULL : pcie ? "h100-pcie" : "h100-sxm";
    else if (strstr(s, "h800")) sku = nvl || pcie ? NULL : "h800-sxm";
    else if (strstr(s, "h200")) sku = nvl ? NULL : "h200";
    else if (strstr(s, "b200")) sku = "b200";
    else if (strstr(s, "a100"))
        sku = pcie ? (mem_bytes > 60 * GB ? "a100-pcie-80g" : NULL)
                   : (mem_bytes > 60 * GB ? "a100-sxm4-80g" : "a100-sxm4-40g");
    else if (strstr(s, "a800")) sku = pcie || mem_bytes < 60 * GB ? NULL : "a800-sxm4-80g";
    else if (strstr(s, "v100")) sku = mem_bytes > 20 * GB ? "v100-sxm2-32g" : "v100-sxm2-16g";
    else if (strstr(s, "l40s")) sku = "l40s";
    else if (strstr(s, "4090")) sku = "rtx-4090";
    else if (strstr(s, "3090")) sku = "rtx-3090";
    else if (strstr(s, "2060")) sku = "rtx-2060";
    else if (strstr(s, "mi300x")) sku = "mi300x";
    if (!sku || !ap_gpu_find(sku))
        return ap_err_set(err, AP_ERR_INPUT, "device '%s' (%.1f GB) has no entry in the GPU "
                          "catalog (`autoplan gpus`); say which entry its profile is for with "
                          "--gpu NAME", device_name, mem_bytes / GB);
    snprintf(out, n, "%s", sku);
    return AP_OK;
}
