/*
 * profile.h - kernel profiles: how fast the operations the cost model prices run on one GPU
 * type, as rows of (operation, shape, dtype) -> time, each row naming where its number came
 * from (costmodel/profile.c; the format in docs/profiles.md).
 *
 * One format for both origins:
 *  - published rows, built in, each citing a paper, figure or benchmark page;
 *  - measured rows, from `autoplan profile bench` / `profile attach` (profiler/), stored in the
 *    SQLite `profiles` table (db/) and exported / imported as JSON.
 * The cost model looks a figure up measured row > published row > catalog and calibration, so
 * a profile measured on the user's GPU replaces the published one row by row.
 *
 * A shape is text "key=value,key=value" with exactly the keys of its operation, in the order of
 * the table in costmodel/profile.c (docs/profiles.md lists it): values are non-negative integers
 * or short lower-case identifiers from a fixed vocabulary. ap_profile_row_check validates a row
 * against that vocabulary, so every consumer can trust the keys it reads.
 *
 * Rows are plain values (no pointers). An ap_profile owns a growable array of rows; free it
 * with ap_profile_free.
 */
#ifndef AP_PROFILE_H
#define AP_PROFILE_H

#include "autoplan/common.h"

typedef struct ap_profile_row {
    int64_t id;              /* database id (0 when not stored) */
    /* the GPU and the software it was measured with (published rows: gpu only) */
    char gpu[64];            /* catalog SKU the row describes: "h100-sxm" (required) */
    char device_name[128];   /* as the driver reports it: "NVIDIA H100 80GB HBM3" */
    char pci_id[32];         /* "10de:2330" */
    int64_t sm_count;
    double mem_bytes;
    double sm_clock_mhz, mem_clock_mhz; /* application clocks during the measurement */
    double power_limit_w;
    char driver_version[32], cuda_version[32], cublas_version[32], nccl_version[32];
    char mig_mode[32];       /* "off" or the MIG profile */
    char host[64];           /* host name of a measurement ("" for published rows) */
    /* the operation (vocabulary: costmodel/profile.c, docs/profiles.md) */
    char op[32];             /* "gemm", "attn_fwd", "allreduce", ... (required) */
    char shape[128];         /* "m=8192,n=8192,k=8192" (required) */
    char dtype[16];          /* "bf16"; "none" for operations without an element type */
    /* the figure */
    double time_s;           /* median time of one call (> 0; 0 only for device_mem rows) */
    double flops_per_s;      /* achieved FLOP/s under the op's FLOP convention (0: not compute) */
    double bytes_per_s;      /* achieved bandwidth (collectives: nccl-tests bus bandwidth) */
    double bytes;            /* bytes of one call as the op defines them */
    int64_t samples;         /* timed repetitions (published rows: 1) */
    double spread;           /* (max - min) / median of the samples, >= 0 */
    char source_run[64];     /* the profile it belongs to: its name ("published" for built-in) */
    char source[192];        /* published: paper + figure/table; measured: tool and version */
    int64_t created_at;      /* unix seconds; 0 on insert = now */
} ap_profile_row;

/* A set of rows for one GPU type. `rows` is owned (free with ap_profile_free). */
typedef struct ap_profile {
    char name[64];           /* profile name: the source_run of its rows */
    char gpu[64];            /* catalog SKU */
    ap_profile_row *rows;
    size_t n, cap;
} ap_profile;

void ap_profile_init(ap_profile *p);
void ap_profile_free(ap_profile *p);

/* Validate r (ap_profile_row_check), derive its rates (ap_profile_row_derive) and append a copy.
 * AP_ERR_INPUT with the check's message, AP_ERR_NOMEM when growing fails (p unchanged). */
ap_status ap_profile_add(ap_profile *p, const ap_profile_row *r, ap_err *err);

/* Is the row well formed? Required text present and NUL-terminated, op known, shape with
 * exactly the op's keys in order and legal values, dtype legal for the op, numbers finite and
 * non-negative, time_s > 0 (device_mem: bytes > 0 instead), samples >= 1. The message names
 * the field: "op 'gemm' shape 'm=1,n=2': missing key 'k'". */
ap_status ap_profile_row_check(const ap_profile_row *r, ap_err *err);

/* Fill flops_per_s and bytes_per_s from the shape and time_s where the op defines them and
 * they are 0 (e.g. gemm: 2mnk / time_s; collectives: nccl-tests bus bandwidth). Rows that
 * already carry a rate keep it. */
void ap_profile_row_derive(ap_profile_row *r);

/* FLOPs of one call under the op's convention (docs/profiles.md): gemm 2mnk; attention as the
 * FlashAttention-2 paper counts it (forward 4 b h d P with P the attended query-key pairs,
 * backward 2.5 x forward, attn_fwd_bwd 3.5 x forward). 0 for operations that are not compute.
 * The row must be valid. */
double ap_profile_row_flops(const ap_profile_row *r);

/* Bytes that cross the bottleneck for the bus-bandwidth convention of a collective of `ranks`
 * ranks moving `bytes` (nccl-tests "size"): all-reduce 2(n-1)/n, all-gather, reduce-scatter and
 * all-to-all (n-1)/n, send/recv 1. 0 for other ops. */
double ap_profile_busbw_factor(const char *op, double ranks);

/* Numeric value of `key` in a shape: 1 and *out when present and numeric, else 0. */
int ap_profile_shape_num(const char *shape, const char *key, double *out);
/* Text value of `key` (copied into buf, NUL-terminated): 1 when present, else 0. */
int ap_profile_shape_text(const char *shape, const char *key, char *buf, size_t n);

/* The vocabulary, for help texts and tests: the number of operations, and each one's name and
 * its comma-separated key list ("m,n,k"). NULL past the end. */
int ap_profile_op_count(void);
const char *ap_profile_op_name(int i);
const char *ap_profile_op_keys(int i);

#endif
