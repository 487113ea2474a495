/*
 * kernels.c - the kernel lookup tables of one GPU type (kernels.h): built from the published
 * rows (profile_published.c) overlaid by a measured profile, then looked up by the cost model.
 *
 * Structure:
 *   1. series: sorted (log2 size, value) curves with clamped linear interpolation;
 *   2. build: rows -> series. A measured row claims its whole series (the published points of
 *      that series are not mixed in), so a profile measured on the user's GPU replaces the
 *      published curve it covers and leaves the others; GPUs without published figures borrow
 *      the curves of their nearest published relative, marked "carried over";
 *   3. lookups: GEMM efficiency (curve x wave quantisation), attention efficiency (nearest
 *      head-dim class, causal derived from non-causal where a paper plots only one), and the
 *      collective model: NCCL's own latency model (src/graph/tuning.cc) with the bus
 *      bandwidths of the table.
 *
 * What it does not do: decide which kernel a plan runs (the cost model and the trainer table
 * do) or price a whole layer.
 */
#include "autoplan/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SRC_NCCL_PLATEAU                                                                      \
    "NVIDIA GTC24 S62129 nccl-tests all-reduce bus bandwidth (NVLink3 232, PCIe Gen4 24, 8x "  \
    "200Gb RDMA 192 GB/s)"

/* ---- attention implementations ---------------------------------------------------------- */

static const char *const impl_names[AP_ATTN_COUNT] = {
    "auto", "unfused", "fa1", "triton", "fa2", "fa3", "cudnn", "sdpa_efficient", "flex"};

const char *ap_attn_impl_name(ap_attn_impl impl) {
    return (int)impl >= 0 && impl < AP_ATTN_COUNT ? impl_names[impl] : "?";
}

ap_status ap_attn_impl_parse(const char *s, const char *what, ap_attn_impl *out, ap_err *err) {
    for (int i = 0; i < AP_ATTN_COUNT; i++)
        if (s && !strcmp(s, impl_names[i])) {
            *out = (ap_attn_impl)i;
            return AP_OK;
        }
    return ap_err_set(err, AP_ERR_INPUT, "%s: unknown attention implementation '%s' (one of "
                      "auto, unfused, fa1, triton, fa2, fa3, cudnn, sdpa_efficient, flex)",
                      what, s ? s : "");
}

/* ---- series ----------------------------------------------------------------------------- */

/* Insert (x, y), keeping x ascending; an existing point at the same x is replaced. */
static void series_put(ap_kseries *s, double x, double y) {
    int i = 0;
    while (i < s->n && s->x[i] < x - 1e-9) i++;
    if (i < s->n && fabs(s->x[i] - x) <= 1e-9) {
        s->y[i] = y;
        return;
    }
    if (s->n >= AP_KSERIES_MAX) return; /* full: keep the first points */
    memmove(&s->x[i + 1], &s->x[i], (size_t)(s->n - i) * sizeof s->x[0]);
    memmove(&s->y[i + 1], &s->y[i], (size_t)(s->n - i) * sizeof s->y[0]);
    s->x[i] = x;
    s->y[i] = y;
    s->n++;
}

/* Linear in x between points, clamped to the end values outside the measured range. */
static double series_at(const ap_kseries *s, double x) {
    if (s->n <= 0) return 0;
    if (x <= s->x[0]) return s->y[0];
    if (x >= s->x[s->n - 1]) return s->y[s->n - 1];
    int i = 1;
    while (i < s->n - 1 && s->x[i] < x) i++;
    double t = (x - s->x[i - 1]) / (s->x[i] - s->x[i - 1]);
    return s->y[i - 1] + t * (s->y[i] - s->y[i - 1]);
}

/* prefix + src into dst, truncated to AP_KSOURCE_MAX - 1 characters */
static void set_source(char *dst, const char *prefix, const char *src) {
    char tmp[AP_KSOURCE_MAX];
    size_t at = 0;
    for (const char *p = prefix; p && *p && at + 1 < sizeof tmp; p++) tmp[at++] = *p;
    for (const char *p = src; p && *p && at + 1 < sizeof tmp; p++) tmp[at++] = *p;
    tmp[at] = '\0';
    memcpy(dst, tmp, at + 1);
}

/* ---- build ------------------------------------------------------------------------------- */

double ap_kernels_wave(int sms, double M, double N) {
    if (sms <= 0 || M <= 0 || N <= 0) return 1.0;
    double tiles = ceil(M / 128.0) * ceil(N / 128.0);
    double waves = ceil(tiles / sms);
    return tiles / (waves * sms);
}

static int dclass_of(double d) {
    if (d <= 90.5) return 0;     /* nearer 64 than 128 in log2 */
    if (d <= 181.0) return 1;
    return 2;
}

static int impl_of(const char *name) {
    for (int i = 1; i < AP_ATTN_COUNT; i++)
        if (!strcmp(name, impl_names[i])) return i;
    return -1;
}

static double peak16(const ap_kernels *k) {
    return k->peak_flops[AP_DTYPE_BF16] > 0 ? k->peak_flops[AP_DTYPE_BF16]
                                            : k->peak_flops[AP_DTYPE_FP16];
}

/* Backward over forward FLOP rate of the flash kernels: FlashAttention-2 reaches up to 73% of
 * peak forward and 63% backward on A100 (Dao 2023, Sec. 4.1), 0.86; the FlashAttention-3
 * paper's H100 sweeps give the same ratio for FA2 at 16k (322 / 370 = 0.87, Figs. 5-6). A
 * forward+backward figure R splits as r_f = R (1 + 2.5/kappa) / 3.5, r_b = kappa r_f. */
#define FLASH_BWD_OVER_FWD 0.86

static int level_of(const char *name) {
    if (!strcmp(name, "nvlink") || !strcmp(name, "xgmi")) return AP_LEVEL_NVLINK;
    if (!strcmp(name, "pcie")) return AP_LEVEL_PCIE;
    if (!strcmp(name, "ib") || !strcmp(name, "roce") || !strcmp(name, "ethernet"))
        return AP_LEVEL_NET;
    return -1;
}

/* Nominal per-GPU bandwidth of a level on the GPU's reference system (catalog). */
static double level_nominal(const ap_gpu *g, int level, double ranks) {
    switch (level) {
    case AP_LEVEL_NVLINK: return g->link_bytes_per_s;
    case AP_LEVEL_PCIE: return g->pcie_bytes_per_s;
    default: {
        /* a ring over whole nodes crosses the node boundary on every NIC at once: the node's
         * GPUs (up to the group) times the network per GPU */
        double per_node = g->ref_gpus_per_node > 0 ? g->ref_gpus_per_node : 1;
        if (ranks > 0 && ranks < per_node) per_node = ranks;
        return per_node * g->ref_net_bytes_per_s;
    }
    }
}

/* One row into k. `claim`: mark touched series measured (and skip unmeasured-only logic). */
typedef struct {
    ap_kernels *k;
    const ap_gpu *g;
    int measured;            /* rows of this pass are measured */
    const char *prefix;      /* source prefix ("carried over from x: ") */
    double coll_bytes[AP_LEVEL_COUNT]; /* size of the row that set coll_eff (largest wins) */
    double mem_bytes, pcie_bytes;
} builder;

static int may_write(const builder *b, int series_measured) {
    /* measured rows write anything; published rows never overwrite a measured series */
    return b->measured || !series_measured;
}

/* What autoplan's GEMM bench (profile bench: cuBLASLt's first heuristic algorithm, TN, median of
 * 20 timed calls per shape) measures, relative to the published large-GEMM ceilings the
 * calibration's gemm_eff_max was fitted on (maximum achievable matmul FLOPS: the best shape of a
 * search, stas00/ml-engineering). The published curve prices every large GEMM at that best
 * shape's rate, so the fit absorbed the gap between typical and best shapes; a measured row
 * holds its own shape's rate, and dividing it by this ratio puts it on the published scale, so
 * gemm_eff_max means the same on both (without it, the measured H200 profile priced
 * torchtitan's H200 runs 17-19% slow, docs/profiler.md). Measured on the H200 of
 * examples/profiles/h200-20261204.json: median over its GEMMs of >= 1e11 FLOPs (44 shapes per
 * dtype), wave quantisation divided out, over the published ceiling of that GPU: bf16 0.706 /
 * 0.828, fp16 0.675 / 0.828 and tf32 0.683 / 0.828 (Hopper has no published fp16 or tf32 row:
 * the 16-bit ceiling serves them), fp8 0.620 / 0.909 (the bench runs fp8 without cuBLASLt's
 * fast accumulation). One GPU's ratios, assumed for every GPU: a property of the two methods. */
double ap_kernels_bench_of_ceiling(ap_dtype dt) {
    switch (dt) {
    case AP_DTYPE_BF16: return 0.706 / 0.828;
    case AP_DTYPE_FP16: return 0.675 / 0.828;
    case AP_DTYPE_TF32: return 0.683 / 0.828;
    case AP_DTYPE_FP8: return 0.620 / 0.909;
    default: return 1.0;
    }
}

static void take_row(builder *b, const ap_profile_row *r) {
    ap_kernels *k = b->k;
    const char *op = r->op;
    if (!strcmp(op, "gemm")) {
        double m, n, kk;
        ap_dtype dt;
        if (ap_dtype_parse(r->dtype, &dt) != AP_OK || k->peak_flops[dt] <= 0) return;
        if (!ap_profile_shape_num(r->shape, "m", &m) || !ap_profile_shape_num(r->shape, "n", &n) ||
            !ap_profile_shape_num(r->shape, "k", &kk) || r->flops_per_s <= 0)
            return;
        ap_kseries *s = &k->gemm[dt];
        if (!may_write(b, s->measured)) return;
        if (b->measured && !s->measured) s->n = 0; /* measured replaces the published curve */
        double eff = r->flops_per_s / k->peak_flops[dt] / ap_kernels_wave(k->sm_count, m, n);
        if (b->measured) eff = fmin(1.0, eff / ap_kernels_bench_of_ceiling(dt));
        series_put(s, log2(2.0 * m * n * kk), eff);
        if (!s->source[0] || b->measured != s->measured) set_source(s->source, b->prefix, r->source);
        s->measured = b->measured;
        return;
    }
    int fwd = !strcmp(op, "attn_fwd"), bwd = !strcmp(op, "attn_bwd");
    int both = !strcmp(op, "attn_fwd_bwd");
    if (fwd || bwd || both) {
        char impl[32];
        double s, d, causal, w;
        if (!ap_profile_shape_text(r->shape, "impl", impl, sizeof impl) ||
            !ap_profile_shape_num(r->shape, "s", &s) || !ap_profile_shape_num(r->shape, "d", &d) ||
            !ap_profile_shape_num(r->shape, "causal", &causal) ||
            !ap_profile_shape_num(r->shape, "window", &w) || r->flops_per_s <= 0)
            return;
        int im = impl_of(impl);
        if (im < 0 || peak16(k) <= 0) return;
        if (w > 0 && w < s) s = w; /* a sliding window runs like a sequence of its width */
        double x = log2(s), eff = r->flops_per_s / peak16(k);
        int c = causal != 0, dc = dclass_of(d);
        ap_kseries *sf = &k->attn[im][c][dc][0], *sb = &k->attn[im][c][dc][1];
        if (both) {
            /* split forward+backward (see FLASH_BWD_OVER_FWD); a direct row of either
             * direction at this length, from the same pass, wins */
            double ef = eff * (1.0 + 2.5 / FLASH_BWD_OVER_FWD) / 3.5;
            ap_kseries *dir[2] = {sf, sb};
            double val[2] = {ef, FLASH_BWD_OVER_FWD * ef};
            for (int i = 0; i < 2; i++) {
                ap_kseries *q = dir[i];
                if (!may_write(b, q->measured)) continue;
                if (b->measured && !q->measured) q->n = 0;
                int have = 0;
                for (int j = 0; j < q->n; j++) have |= fabs(q->x[j] - x) <= 1e-9;
                if (!have) series_put(q, x, val[i]);
                if (!q->source[0] || b->measured != q->measured)
                    set_source(q->source, b->prefix, r->source);
                q->measured = b->measured;
            }
            return;
        }
        ap_kseries *q = fwd ? sf : sb;
        if (!may_write(b, q->measured)) return;
        if (b->measured && !q->measured) q->n = 0;
        series_put(q, x, eff);
        set_source(q->source, b->prefix, r->source);
        q->measured = b->measured;
        return;
    }
    if (!strcmp(op, "allreduce") || !strcmp(op, "allgather") || !strcmp(op, "reducescatter")) {
        char level[16], algo[16];
        double ranks, bytes;
        if (!ap_profile_shape_text(r->shape, "level", level, sizeof level) ||
            !ap_profile_shape_text(r->shape, "algo", algo, sizeof algo) ||
            !ap_profile_shape_num(r->shape, "ranks", &ranks) ||
            !ap_profile_shape_num(r->shape, "bytes", &bytes) || r->bytes_per_s <= 0)
            return;
        int lv = level_of(level);
        if (lv < 0) return;
        if (!strcmp(algo, "nvls")) {
            if (!strcmp(op, "allreduce") && (b->measured || !k->nvls_busbw))
                k->nvls_busbw = r->bytes_per_s;
            return;
        }
        double nominal = level_nominal(b->g, lv, ranks);
        if (nominal <= 0) return;
        if (!may_write(b, k->coll_measured[lv])) return;
        if (b->measured && !k->coll_measured[lv]) b->coll_bytes[lv] = 0;
        if (bytes < b->coll_bytes[lv]) return; /* the plateau: the largest message wins */
        b->coll_bytes[lv] = bytes;
        k->coll_eff[lv] = r->bytes_per_s / nominal;
        set_source(k->coll_source[lv], b->prefix, r->source);
        k->coll_measured[lv] = b->measured;
        return;
    }
    if (!strcmp(op, "membound")) {
        if (r->bytes_per_s <= 0 || k->hbm_bytes_per_s <= 0 || r->bytes < b->mem_bytes) return;
        b->mem_bytes = r->bytes;
        k->membound_eff = r->bytes_per_s / k->hbm_bytes_per_s;
        set_source(k->membound_source, b->prefix, r->source);
        return;
    }
    if (!strcmp(op, "memcpy")) {
        char dir[8];
        if (!ap_profile_shape_text(r->shape, "dir", dir, sizeof dir) || r->bytes_per_s <= 0 ||
            b->g->pcie_bytes_per_s <= 0 || (strcmp(dir, "h2d") && strcmp(dir, "d2h")) ||
            r->bytes < b->pcie_bytes)
            return;
        b->pcie_bytes = r->bytes;
        k->pcie_eff = r->bytes_per_s / b->g->pcie_bytes_per_s;
        set_source(k->pcie_source, b->prefix, r->source);
        return;
    }
    if (!strcmp(op, "launch")) {
        char kind[16];
        if (ap_profile_shape_text(r->shape, "kind", kind, sizeof kind) && !strcmp(kind, "kernel")) {
            k->launch_s = r->time_s;
            set_source(k->launch_source, b->prefix, r->source);
        }
        return;
    }
    if (!strcmp(op, "host_adam") && r->bytes_per_s > 0) {
        k->host_adam_bytes_per_s = r->bytes_per_s;
        set_source(k->host_adam_source, b->prefix, r->source);
    }
}

/* Rows of `rows` into k (one pass). */
static void take_rows(builder *b, const ap_profile *rows, int measured, const char *gpu) {
    b->measured = measured;
    for (size_t i = 0; i < rows->n; i++)
        if (!strcmp(rows->rows[i].gpu, gpu)) take_row(b, &rows->rows[i]);
}

/* The published relative a GPU without its own figures borrows from, by compute capability
 * (ap_gpu.sm): the H100 for Hopper (the H200, H800 and the PCIe and 500 W cards: the same die)
 * and, for want of published figures, Blackwell; the A100 (the best-covered GPU) for everything
 * else. */
static const char *relative_of(const ap_gpu *g) {
    return g->sm >= 90 ? "h100-sxm" : "a100-sxm4-80g";
}

/* NCCL's compute-capability classes (src/graph/tuning.cc): Volta and Turing, Ampere and Ada,
 * Hopper, Blackwell; other vendors and the CPU as Ampere. */
static int compcap_class(const ap_gpu *g) {
    if (g->sm <= 0) return 1;
    return g->sm < 80 ? 0 : g->sm < 90 ? 1 : g->sm < 100 ? 2 : 3;
}

static void kernels_init(ap_kernels *k, const ap_gpu *gpu) {
    memset(k, 0, sizeof *k);
    snprintf(k->gpu, sizeof k->gpu, "%s", gpu->name);
    memcpy(k->peak_flops, gpu->peak_flops, sizeof k->peak_flops);
    k->hbm_bytes_per_s = gpu->hbm_bytes_per_s;
    k->sm_count = gpu->sm_count;
    k->compcap_class = compcap_class(gpu);
}

/* Fill what `k` lacks from `rel` (the relative's published tables), marking the source. */
static void borrow(ap_kernels *k, const ap_kernels *rel) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "carried over from %s: ", rel->gpu);
    for (int d = 0; d < AP_DTYPE_COUNT; d++)
        if (!k->gemm[d].n && rel->gemm[d].n && k->peak_flops[d] > 0) {
            k->gemm[d] = rel->gemm[d];
            set_source(k->gemm[d].source, prefix, rel->gemm[d].source);
        }
    for (int i = 0; i < AP_ATTN_COUNT; i++)
        for (int c = 0; c < 2; c++)
            for (int dc = 0; dc < AP_KATTN_DCLASSES; dc++)
                for (int dir = 0; dir < 2; dir++) {
                    ap_kseries *q = &k->attn[i][c][dc][dir];
                    const ap_kseries *r = &rel->attn[i][c][dc][dir];
                    if (q->n || !r->n) continue;
                    /* FlashAttention-3's kernels are Hopper's (sm90: WGMMA and TMA; its
                     * README requires H100/H800): a Blackwell GPU does not borrow them */
                    if (i == AP_ATTN_FA3 && k->compcap_class != 2) continue;
                    *q = *r;
                    set_source(q->source, prefix, r->source);
                }
    /* the network fabric is the cluster's, not the GPU's: its efficiency carries over; NVLink
     * and PCIe plateaus belong to the GPU's own links (defaults below) */
    if (k->coll_eff[AP_LEVEL_NET] <= 0 && rel->coll_eff[AP_LEVEL_NET] > 0) {
        k->coll_eff[AP_LEVEL_NET] = rel->coll_eff[AP_LEVEL_NET];
        set_source(k->coll_source[AP_LEVEL_NET], prefix, rel->coll_source[AP_LEVEL_NET]);
    }
    if (k->launch_s <= 0 && rel->launch_s > 0) {
        k->launch_s = rel->launch_s;
        set_source(k->launch_source, prefix, rel->launch_source);
    }
}

/* Figures no row of the GPU or its relative gives. */
static void defaults(ap_kernels *k) {
    /* the nccl-tests plateaus of the table as fractions of the nominal link: NVLink3 232 of
     * 300 GB/s, PCIe Gen4 24 of 32, 8x 200 Gb RDMA 192 of 200 (GTC24 S62129) */
    static const double eff[AP_LEVEL_COUNT] = {232.0 / 300.0, 24.0 / 32.0, 192.0 / 200.0};
    for (int lv = 0; lv < AP_LEVEL_COUNT; lv++) {
        if (k->coll_eff[lv] > 0) continue;
        k->coll_eff[lv] = eff[lv];
        set_source(k->coll_source[lv], "carried over (A100-class plateau): ", SRC_NCCL_PLATEAU);
    }
    if (k->pcie_eff <= 0) {
        k->pcie_eff = k->coll_eff[AP_LEVEL_PCIE];
        set_source(k->pcie_source, "PCIe all-reduce plateau (no memcpy row): ",
                   k->coll_source[AP_LEVEL_PCIE]);
    }
}

ap_status ap_kernels_build(const ap_gpu *gpu, const ap_profile *measured, ap_kernels *out,
                           ap_err *err) {
    if (!gpu) return ap_err_set(err, AP_ERR_INPUT, "kernels: no GPU");
    kernels_init(out, gpu);
    builder b;
    memset(&b, 0, sizeof b);
    b.k = out;
    b.g = gpu;
    /* 1. measured rows of this GPU claim their series */
    if (measured) {
        for (size_t i = 0; i < measured->n; i++) {
            ap_profile_row rr = measured->rows[i];
            if (strcmp(rr.gpu, gpu->name)) continue;
            ap_status st = ap_profile_row_check(&rr, err);
            if (st != AP_OK) {
                ap_err_prefix(err, "profile '%s' row %zu", measured->name, i + 1);
                return st;
            }
            ap_profile_row_derive(&rr);
            b.measured = 1;
            take_row(&b, &rr);
            out->measured_rows++;
        }
    }
    /* 2. the GPU's own published rows */
    ap_profile pub;
    ap_profile_init(&pub);
    ap_status st = ap_profile_published(gpu->name, &pub, err);
    if (st == AP_OK) take_rows(&b, &pub, 0, gpu->name);
    ap_profile_free(&pub);
    if (st != AP_OK) return st;
    /* 3. the relative's published rows for what is still missing */
    const char *rel_name = relative_of(gpu);
    const ap_gpu *rg = ap_gpu_find(rel_name);
    if (rg && strcmp(rel_name, gpu->name)) {
        ap_kernels rel;
        kernels_init(&rel, rg);
        builder rb;
        memset(&rb, 0, sizeof rb);
        rb.k = &rel;
        rb.g = rg;
        ap_profile_init(&pub);
        st = ap_profile_published(rel_name, &pub, err);
        if (st == AP_OK) take_rows(&rb, &pub, 0, rel_name);
        ap_profile_free(&pub);
        if (st != AP_OK) return st;
        borrow(out, &rel);
    }
    defaults(out);
    return AP_OK;
}

/* ---- the published tables of the catalog, each built on first use ---------------------------
 * A command prices one or two GPUs of the catalog: building all of its tables up front cost
 * every command about 2 ms (2 M instructions a GPU). Each entry is built under a lock the first
 * time it is asked for and published with a release store; later lookups read its state with
 * an acquire load and take no lock. */

#define MAX_CATALOG 64
static ap_kernels published[MAX_CATALOG];
static _Atomic int published_state[MAX_CATALOG]; /* 0 not built, 1 built, 2 failed to build */
static pthread_mutex_t published_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t published_once = PTHREAD_ONCE_INIT;

/* the catalog's entries by GPU name: open addressing over FNV-1a hashes (the estimate looks its
 * GPU up once per plan; the hash saves the strcmp scan of the catalog, about 150 instructions a
 * plan) */
#define PUB_SLOTS 256 /* a power of two, at least 2 x MAX_CATALOG */
static int16_t published_slot[PUB_SLOTS];

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static void index_published(void) {
    int n = ap_gpu_catalog_count();
    for (int j = 0; j < PUB_SLOTS; j++) published_slot[j] = -1;
    for (int i = 0; i < n && i < MAX_CATALOG; i++) {
        /* in catalog order, so a name's first entry is met first, as a scan finds it */
        uint32_t h = name_hash(ap_gpu_catalog_at(i)->name) & (PUB_SLOTS - 1);
        while (published_slot[h] >= 0) h = (h + 1) & (PUB_SLOTS - 1);
        published_slot[h] = (int16_t)i;
    }
}

/* Entry i's tables, built on first use; NULL when they do not build. */
static const ap_kernels *published_at(int i) {
    int s = atomic_load_explicit(&published_state[i], memory_order_acquire);
    if (s == 0) {
        pthread_mutex_lock(&published_mu);
        s = atomic_load_explicit(&published_state[i], memory_order_relaxed);
        if (s == 0) {
            ap_err e;
            s = ap_kernels_build(ap_gpu_catalog_at(i), NULL, &published[i], &e) == AP_OK ? 1 : 2;
            atomic_store_explicit(&published_state[i], s, memory_order_release);
        }
        pthread_mutex_unlock(&published_mu);
    }
    return s == 1 ? &published[i] : NULL;
}

const ap_kernels *ap_kernels_published(const ap_gpu *gpu) {
    if (!gpu) return NULL;
    pthread_once(&published_once, index_published);
    for (uint32_t h = name_hash(gpu->name) & (PUB_SLOTS - 1); published_slot[h] >= 0;
         h = (h + 1) & (PUB_SLOTS - 1)) {
        int i = published_slot[h];
        if (strcmp(ap_gpu_catalog_at(i)->name, gpu->name)) continue;
        const ap_kernels *k = published_at(i); /* a name's first entry that builds, as before */
        if (k) return k;
    }
    return NULL;
}

/* ---- GEMM ------------------------------------------------------------------------------------- */

static const ap_kseries *gemm_series(const ap_kernels *k, ap_dtype dt) {
    if (k->gemm[dt].n) return &k->gemm[dt];
    /* fp16 and bf16 run on the same tensor-core path at the same peak: either's curve serves
     * the other; tf32/fp32 without rows take the 16-bit curve as a fraction of their peak */
    if (k->gemm[AP_DTYPE_BF16].n) return &k->gemm[AP_DTYPE_BF16];
    if (k->gemm[AP_DTYPE_FP16].n) return &k->gemm[AP_DTYPE_FP16];
    return NULL;
}

double ap_kernels_gemm_eff(const ap_kernels *k, ap_dtype dt, double M, double N, double K,
                           double half_flops) {
    if (M <= 0 || N <= 0 || K <= 0 || k->peak_flops[dt] <= 0) return 0;
    double f = 2.0 * M * N * K;
    const ap_kseries *s = gemm_series(k, dt);
    double eff;
    if (s && s->n >= 2) {
        eff = series_at(s, log2(f));
    } else {
        /* the large-GEMM ceiling (or, with no row at all, the A100's 271.2 of 312 TFLOP/s) and
         * the saturation of a fixed per-GEMM latency */
        double top = s && s->n == 1 ? s->y[0] : 271.2 / 312.0;
        eff = top * f / (f + (half_flops > 0 ? half_flops : 0));
    }
    return eff * ap_kernels_wave(k->sm_count, M, N);
}

/* ---- attention ---------------------------------------------------------------------------------- */

/* forward (dir 0) or backward (1) efficiency of (impl, causal, class) at x = log2 s; 0 when
 * the series is missing. Causal from non-causal: x the forward causal/non-causal ratio. */
static double attn_class(const ap_kernels *k, int im, int c, int dc, int dir, double x) {
    const ap_kseries *q = &k->attn[im][c][dc][dir];
    if (q->n) return series_at(q, x);
    const ap_kseries *nc = &k->attn[im][!c][dc][dir];
    const ap_kseries *f1 = &k->attn[im][c][dc][0], *f0 = &k->attn[im][!c][dc][0];
    if (nc->n && f1->n && f0->n) {
        double a = series_at(f1, x), b = series_at(f0, x);
        if (b > 0) return series_at(nc, x) * a / b;
    }
    return 0;
}

/* Efficiency over head dim d: interpolated in log2 d between the classes on either side
 * (64, 128, 256) that have figures, else the nearest class that has one. */
static double attn_dir(const ap_kernels *k, int im, int c, double d, int dir, double x) {
    static const double cls[AP_KATTN_DCLASSES] = {64, 128, 256};
    double v[AP_KATTN_DCLASSES];
    for (int i = 0; i < AP_KATTN_DCLASSES; i++) v[i] = attn_class(k, im, c, i, dir, x);
    double ld = log2(d > 1 ? d : 1);
    for (int i = 0; i + 1 < AP_KATTN_DCLASSES; i++) {
        if (d >= cls[i] && d <= cls[i + 1] && v[i] > 0 && v[i + 1] > 0) {
            double t = (ld - log2(cls[i])) / (log2(cls[i + 1]) - log2(cls[i]));
            return v[i] + t * (v[i + 1] - v[i]);
        }
    }
    int best = -1;
    double bd = 1e9;
    for (int i = 0; i < AP_KATTN_DCLASSES; i++) {
        double dist = fabs(ld - log2(cls[i]));
        if (v[i] > 0 && dist < bd) {
            bd = dist;
            best = i;
        }
    }
    return best >= 0 ? v[best] : 0;
}

void ap_kernels_attn_eff(const ap_kernels *k, ap_attn_impl impl, int causal, double d, double s,
                         double *fwd_eff, double *bwd_eff) {
    *fwd_eff = *bwd_eff = 0;
    if (impl <= AP_ATTN_UNFUSED || impl >= AP_ATTN_COUNT || s <= 0) return;
    double x = log2(s);
    int c = causal != 0;
    double f = attn_dir(k, impl, c, d, 0, x), b = attn_dir(k, impl, c, d, 1, x);
    if (impl == AP_ATTN_FLEX && f <= 0 && b <= 0) {
        /* FlexAttention compiles to Triton FlashAttention kernels (PyTorch blog "FlexAttention",
         * 2024): without its own figures it runs at the Triton kernel's */
        f = attn_dir(k, AP_ATTN_TRITON, c, d, 0, x);
        b = attn_dir(k, AP_ATTN_TRITON, c, d, 1, x);
    }
    /* one direction only: the other by the flash kernels' backward/forward ratio */
    if (f > 0 && b <= 0) b = FLASH_BWD_OVER_FWD * f;
    if (b > 0 && f <= 0) f = b / FLASH_BWD_OVER_FWD;
    *fwd_eff = f;
    *bwd_eff = b;
}

double ap_kernels_attn_longest(const ap_kernels *k, ap_attn_impl impl, int causal) {
    if (impl <= AP_ATTN_UNFUSED || impl >= AP_ATTN_COUNT) return 0;
    double x = -1;
    for (int pass = 0; pass < 2 && x < 0; pass++) {
        int im = pass ? AP_ATTN_TRITON : (int)impl; /* FLEX without figures: Triton's (above) */
        if (pass && impl != AP_ATTN_FLEX) break;
        for (int i = 0; i < AP_KATTN_DCLASSES; i++)
            for (int dir = 0; dir < 2; dir++) {
                const ap_kseries *q = &k->attn[im][causal != 0][i][dir];
                if (q->n && q->x[q->n - 1] > x) x = q->x[q->n - 1];
            }
    }
    return x < 0 ? 0 : exp2(x);
}

const char *ap_kernels_attn_source(const ap_kernels *k, ap_attn_impl impl, int causal, double d) {
    if (impl <= AP_ATTN_UNFUSED || impl >= AP_ATTN_COUNT) return "";
    if (impl == AP_ATTN_FLEX) {
        int any = 0;
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < AP_KATTN_DCLASSES; i++)
                any |= k->attn[impl][c][i][0].n || k->attn[impl][c][i][1].n;
        if (!any) impl = AP_ATTN_TRITON;
    }
    int dc = dclass_of(d), c = causal != 0;
    for (int dir = 0; dir < 2; dir++) {
        if (k->attn[impl][c][dc][dir].n) return k->attn[impl][c][dc][dir].source;
        if (k->attn[impl][!c][dc][dir].n) return k->attn[impl][!c][dc][dir].source;
    }
    for (int i = 0; i < AP_KATTN_DCLASSES; i++)
        for (int dir = 0; dir < 2; dir++)
            if (k->attn[impl][c][i][dir].n) return k->attn[impl][c][i][dir].source;
    return "";
}

/* ---- collectives: NCCL's tuning model ------------------------------------------------------
 * NVIDIA/nccl src/graph/tuning.cc (ncclTunerConstantsDefaults, ncclTopoTuneModel,
 * ncclTopoGetAlgoTime), in microseconds. Protocols LL, LL128, Simple; algorithms ring and
 * tree (tree for all-reduce only). */
enum { P_LL = 0, P_LL128, P_SIMPLE };
static const double base_lat_us[2][3] = {{6.6, 14.0, 8.4},   /* ring */
                                         {6.8, 14.0, 8.4}};  /* tree */
/* hardware latency per step: [hw][algo][proto], hw 0 NVLink, 1 PCIe, 2 network */
static const double hw_lat_us[3][2][3] = {
    {{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}},
    {{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}},
    {{2.7, 4.0, 14.0}, {5.0, 8.5, 14.0}},
};
/* LL bandwidth cap (GB/s), llMaxBws: single node by GPU generation, multi-node by CPU (x86
 * Intel row), index by min(nodes - 1, 2) */
static const double ll_max_gbps_single[4] = {39.0, 87.7, 141.0, 282.0};
static const double ll_max_gbps_multi[3] = {39.0, 39.0, 20.4};
/* network post overhead per step (getNetOverhead: 1 us on Intel x86), x3 for Simple */
#define NET_OVERHEAD_US 1.0

static int log2i(int n) {
    int l = 0;
    while (n > 1) {
        n >>= 1;
        l++;
    }
    return l;
}

/* What NCCL's ring/tree latency model reads of a call of nranks ranks on nnodes nodes (clamped
 * to [1, nranks]), worked out once for the algorithms and protocols ap_kernels_coll_s tries. */
typedef struct {
    int ar;       /* all-reduce (the tree's only collective; the ring's steps doubled) */
    int intra;    /* hardware row inside a node: 0 NVLink, 1 PCIe */
    int nnodes;
    int nsteps;   /* ring steps, and of them those crossing nodes */
    int ninter;
    int log2n;    /* tree depth across nodes */
    double ppn;   /* ranks per node */
} nccl_shape;

static nccl_shape nccl_shape_of(ap_coll_op op, int nranks, int nnodes, int intra_nvlink) {
    nccl_shape s;
    if (nnodes < 1) nnodes = 1;
    if (nnodes > nranks) nnodes = nranks;
    s.ar = op == AP_COLL_ALLREDUCE_OP;
    s.intra = intra_nvlink ? 0 : 1;
    s.nnodes = nnodes;
    s.ppn = (double)nranks / nnodes;
    s.nsteps = s.ar ? 2 * (nranks - 1) : nranks - 1;
    s.ninter = nnodes == 1 ? 0 : s.ar ? 2 * (nnodes - 1) : nnodes - 1;
    s.log2n = log2i(nnodes);
    return s;
}

/* Latency of the ring (algo 0) or tree (1) under protocol proto, seconds (the tree does
 * all-reduce only: 1e30 otherwise). */
static double ring_tree_latency(const nccl_shape *s, int algo, int proto) {
    double lat = base_lat_us[algo][proto];
    double intra_lat = hw_lat_us[s->intra][algo][proto];
    /* with one rank per node every step crosses the network: NCCL uses the tree's latency */
    double inter_lat = s->ppn <= 1.0 ? hw_lat_us[2][1][proto] : hw_lat_us[2][algo][proto];
    if (algo == 0) {
        double step = s->nnodes > 1 ? fmax(intra_lat, NET_OVERHEAD_US * (proto == P_SIMPLE ? 3 : 1))
                                    : hw_lat_us[s->intra][0][proto];
        lat += (s->nsteps - s->ninter) * step + s->ninter * inter_lat;
    } else {
        if (!s->ar) return 1e30; /* tree is all-reduce only */
        lat += 2.0 * ((s->ppn - 1.0) * intra_lat + s->log2n * inter_lat);
    }
    return lat * 1e-6;
}

double ap_nccl_latency_s(ap_coll_op op, int algo, int proto, int nranks, int nnodes,
                         int intra_nvlink) {
    if (nranks <= 1) return 0;
    if (nnodes < 1) nnodes = 1;
    if (nnodes > nranks) nnodes = nranks;
    if (op == AP_COLL_ALLTOALL_OP || op == AP_COLL_SENDRECV_OP) {
        /* point-to-point: one ring step's hardware latency over the slowest hop it crosses
         * plus the Simple protocol's base latency (the send/recv path of tuning.cc's model) */
        int hw = nnodes > 1 ? 2 : intra_nvlink ? 0 : 1;
        return (base_lat_us[0][P_SIMPLE] + hw_lat_us[hw][0][P_SIMPLE]) * 1e-6;
    }
    nccl_shape sh = nccl_shape_of(op, nranks, nnodes, intra_nvlink);
    return ring_tree_latency(&sh, algo, proto);
}

void ap_kernels_coll_terms(const ap_kernels *k, ap_coll_op op, int nranks, int nnodes,
                           double busbw, int intra_nvlink, ap_coll_terms *t) {
    t->n = 0;
    t->alltoall = 0;
    t->factor = 1.0;
    if (nranks <= 1 || busbw <= 0) return;
    if (nnodes < 1) nnodes = 1;
    double n = nranks;
    if (op == AP_COLL_SENDRECV_OP) {
        t->lat[0] = ap_nccl_latency_s(op, 0, P_SIMPLE, nranks, nnodes, intra_nvlink);
        t->algbw[0] = busbw;
        t->n = 1;
        return;
    }
    /* bus bandwidth -> algorithm bandwidth (nccl-tests and tuning.cc: ring moves
     * 2(n-1)/n of the buffer per rank for all-reduce, (n-1)/n otherwise; tree all-reduce
     * moves it twice, ratio 0.5) */
    double factor = op == AP_COLL_ALLREDUCE_OP ? 2.0 * (n - 1) / n : (n - 1) / n;
    if (op == AP_COLL_ALLTOALL_OP) {
        t->lat[0] = ap_nccl_latency_s(op, 0, P_SIMPLE, nranks, nnodes, intra_nvlink) * (n - 1);
        t->algbw[0] = busbw;
        t->factor = factor;
        t->alltoall = 1;
        t->n = 1;
        return;
    }
    int cls = k ? k->compcap_class : 1;
    double ll_cap = (nnodes == 1 ? ll_max_gbps_single[cls < 0 ? 0 : cls > 3 ? 3 : cls]
                                 : ll_max_gbps_multi[nnodes - 1 < 2 ? nnodes - 1 : 2]) * 1e9;
    /* LL128 is on by default on Hopper and newer, and on Ampere with NVLink inside the node,
     * across nodes too where the NIC sits on the GPU's PCIe switch (tuning.cc: typeInter <=
     * PATH_PXB, as on DGX A100, catalog.c) */
    int ll128_ok = cls >= 2 || (intra_nvlink && cls == 1);
    nccl_shape sh = nccl_shape_of(op, nranks, nnodes, intra_nvlink);
    for (int algo = 0; algo < 2; algo++) {
        if (algo == 1 && op != AP_COLL_ALLREDUCE_OP) continue;
        for (int p = 0; p < 3; p++) {
            if (p == P_LL128 && !ll128_ok) continue;
            double bw = busbw;
            if (p == P_LL) bw = fmin(ll_cap, bw * (algo == 0 ? 0.5 : 1.0 / 3.8));
            if (p == P_LL128) bw *= algo == 0 ? 0.92 : (nnodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0);
            if (algo == 1 && p != P_LL) bw *= 0.92; /* tree all-reduce refinement */
            double lat = ring_tree_latency(&sh, algo, p);
            /* the ring all-reduce plateau across nodes (Ampere and newer: x1.4) */
            if (algo == 0 && p == P_SIMPLE && nnodes > 1 && op == AP_COLL_ALLREDUCE_OP)
                lat *= cls >= 1 ? 1.4 : 1.9;
            t->lat[t->n] = lat;
            t->algbw[t->n] = algo == 0 ? bw / factor : 0.5 * bw;
            t->n++;
        }
    }
}

double ap_kernels_coll_terms_s(const ap_coll_terms *t, double bytes) {
    if (t->n == 0 || bytes <= 0) return 0;
    if (t->alltoall) return t->lat[0] + bytes * t->factor / t->algbw[0];
    double best = 1e30;
    for (int i = 0; i < t->n; i++) {
        double s = t->lat[i] + bytes / t->algbw[i];
        if (s < best) best = s;
    }
    return best;
}

double ap_kernels_coll_s(const ap_kernels *k, ap_coll_op op, double bytes, int nranks,
                         int nnodes, double busbw, int intra_nvlink) {
    if (nranks <= 1 || bytes <= 0 || busbw <= 0) return 0;
    ap_coll_terms t;
    ap_kernels_coll_terms(k, op, nranks, nnodes, busbw, intra_nvlink, &t);
    return ap_kernels_coll_terms_s(&t, bytes);
}
