/*
 * gpubench.c - `autoplan profile bench` on a GPU (include/autoplan/profiler.h; CUDA builds
 * only): the device's identity, and the benchmarks that need only the CUDA runtime: launch
 * latency (eager and as a graph node), copies both ways (pinned, pageable, device, peer),
 * memory-bound kernels and fused Adam (profiler/kernels.cu), and the device memory the CUDA
 * context takes. GEMMs (gpubench_gemm.c), attention (gpubench_attn.c) and collectives
 * (gpubench_nccl.c) are in their own files, one per library.
 *
 * Timing: CUDA events around back-to-back calls on one stream (ap_gb_time), >= 1 ms per sample
 * so the ~0.5 us event resolution does not matter, warm-up, the median of >= 20 samples and its
 * spread (stats.c). Inputs are filled with non-zero values first. Repeated calls on the same
 * buffers run from L2 when they fit there (50 MB on H100): the sizes go well past that.
 *
 * Identity: cudaGetDeviceProperties for the name, memory and SMs; the PCI vendor:device from
 * sysfs; the driver release, application clocks, power limit and memory used before the
 * context exists from NVML, loaded with dlopen (it ships with the driver, not the toolkit, so
 * autoplan must start without it; only these few stable entry points are declared here);
 * MIG from the device name ("... MIG 1g.10gb").
 *
 * Built into libautoplan_gpu.so (profiler/CMakeLists.txt), whose only export is the table
 * ap_gpubench_module at the end of this file.
 *
 * What it does not do: print (it reports progress through a callback) or store (the caller).
 */
#include "gpubench_int.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/hw.h"
#include "kernels.h"

#define MiB (1024.0 * 1024.0)

/* ---- helpers shared by the bench files ------------------------------------------------------ */

ap_status ap_gb_cuda(int rc, const char *doing, ap_err *err) {
    return ap_err_set(err, AP_ERR_CUDA, "%s: %s (CUDA error %d)", doing,
                      cudaGetErrorString((cudaError_t)rc), rc);
}

void ap_gb_note(ap_gb *g, const char *fmt, ...) {
    if (!g->o->progress) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    g->o->progress(line, g->o->progress_arg);
}

ap_status ap_gb_row(ap_gb *g, const char *op, const char *shape, const char *dtype,
                    const ap_bench_stats *st, double bytes, const char *source, ap_err *err) {
    return ap_bench_row(g->out, g->tmpl, op, shape, dtype, st, bytes, source, err);
}

double ap_gb_free_bytes(void) {
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) return 0;
    return (double)free_b;
}

int ap_gb_wants(const ap_gb *g, const char *what) {
    const char *list = g->o->what;
    if (!list) return 1;
    size_t l = strlen(what);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == l && !strncmp(p, what, l)) return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

/* ---- event timing ------------------------------------------------------------------------------ */

typedef struct {
    ap_gb *g;
    ap_gb_enqueue fn;
    void *arg;
    int calls;     /* per sample */
} timed;

static double one_sample(void *a, ap_err *err) {
    timed *t = a;
    cudaEventRecord(t->g->e0, t->g->stream);
    for (int i = 0; i < t->calls; i++) {
        int rc = t->fn(t->arg, err);
        if (rc) {
            if (rc > 0 && !err->msg[0]) ap_gb_cuda(rc, "launching a benchmark", err);
            return -1;
        }
    }
    cudaEventRecord(t->g->e1, t->g->stream);
    int rc = (int)cudaEventSynchronize(t->g->e1);
    if (rc) {
        ap_gb_cuda(rc, "waiting for a benchmark", err);
        return -1;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, t->g->e0, t->g->e1);
    return (double)ms * 1e-3 / t->calls;
}

ap_status ap_gb_time(ap_gb *g, ap_gb_enqueue fn, void *arg, ap_bench_stats *st, ap_err *err) {
    err->msg[0] = '\0';
    timed t = {g, fn, arg, 1};
    if (one_sample(&t, err) < 0) return AP_ERR_CUDA; /* first call: lazy loading, caches */
    double t1 = one_sample(&t, err);
    if (t1 < 0) return AP_ERR_CUDA;
    t.calls = t1 > 0 ? (int)ceil(1e-3 / t1) : 1000;
    if (t.calls < 1) t.calls = 1;
    if (t.calls > 1000) t.calls = 1000;
    ap_status s = ap_bench_repeat(one_sample, &t, 2, g->o->reps, st, err);
    return s == AP_ERR_INTERNAL ? AP_ERR_CUDA : s;
}

/* ---- NVML (dlopen) ----------------------------------------------------------------------------- */

typedef struct nvmlDevice_st *nvml_dev;
typedef struct {
    unsigned long long total, free, used; /* nvmlMemory_t (v1) */
} nvml_memory;

static struct {
    int tried, ok;
    int (*init)(void);
    int (*by_bus)(const char *, nvml_dev *);
    int (*driver)(char *, unsigned);
    int (*app_clock)(nvml_dev, int, unsigned *);
    int (*power)(nvml_dev, unsigned *);
    int (*memory)(nvml_dev, nvml_memory *);
} nvml;

enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 }; /* nvmlClockType_t */

static int nvml_load(void) {
    if (nvml.tried) return nvml.ok;
    nvml.tried = 1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    if (!h) return 0;
    *(void **)&nvml.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml.by_bus = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.driver = dlsym(h, "nvmlSystemGetDriverVersion");
    *(void **)&nvml.app_clock = dlsym(h, "nvmlDeviceGetApplicationsClock");
    *(void **)&nvml.power = dlsym(h, "nvmlDeviceGetPowerManagementLimit");
    *(void **)&nvml.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml.ok = nvml.init && nvml.by_bus && nvml.driver && nvml.app_clock && nvml.power &&
              nvml.memory && nvml.init() == 0;
    return nvml.ok;
}

static nvml_dev nvml_device(int device) {
    char bus[32];
    nvml_dev d = NULL;
    if (!nvml_load() || cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) return NULL;
    return nvml.by_bus(bus, &d) == 0 ? d : NULL;
}

/* memory used on the device before this process made its context (bytes; -1 unknown) */
static double g_used_before_context = -1;

/* ---- identity ----------------------------------------------------------------------------------- */

/* "0x10de" -> "10de" from a sysfs file. */
static void sysfs_hex(const char *bus, const char *file, char *out, size_t n) {
    char path[160], v[32] = "";
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", bus, file);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(v, sizeof v, f)) v[0] = '\0';
        fclose(f);
    }
    v[strcspn(v, "\n")] = '\0';
    snprintf(out, n, "%.15s", strncmp(v, "0x", 2) ? v : v + 2);
}

/* The driver release ("575.51.03") from /proc when NVML is absent. */
static void proc_driver(char *out, size_t n) {
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    char line[256] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = '\0';
        fclose(f);
    }
    const char *p = strstr(line, "Kernel Module");
    if (!p) return;
    p += strlen("Kernel Module");
    while (*p == ' ') p++;
    snprintf(out, n, "%.*s", (int)strcspn(p, " \n"), p);
}

static ap_status identify(int device, const char *gpu, ap_profile_row *r, ap_err *err) {
    memset(r, 0, sizeof *r);
    /* NVML first: the memory in use before this process creates its CUDA context */
    nvml_dev nd0 = NULL;
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        /* without a driver the runtime says "driver version is insufficient": say what is
         * really missing */
        void *drv = dlopen("libcuda.so.1", RTLD_LAZY);
        if (!drv)
            return ap_err_set(err, AP_ERR_CUDA, "no CUDA driver on this machine (libcuda.so.1 not "
                              "found): GPU benchmarks need an NVIDIA GPU and its driver");
        dlclose(drv);
        return ap_err_set(err, AP_ERR_CUDA, "no CUDA device: %s", ce != cudaSuccess
                          ? cudaGetErrorString(ce) : "cudaGetDeviceCount found none");
    }
    if (device >= count)
        return ap_err_set(err, AP_ERR_INPUT, "--device %d: there are %d CUDA devices", device,
                          count);
    if ((nd0 = nvml_device(device)) != NULL && g_used_before_context < 0) {
        nvml_memory m;
        if (nvml.memory(nd0, &m) == 0) g_used_before_context = (double)m.used;
    }
    struct cudaDeviceProp p;
    if ((ce = cudaGetDeviceProperties(&p, device)) != cudaSuccess)
        return ap_gb_cuda(ce, "reading the device properties", err);
    snprintf(r->device_name, sizeof r->device_name, "%.127s", p.name);
    r->sm_count = p.multiProcessorCount;
    r->mem_bytes = (double)p.totalGlobalMem;
    ap_status st = gpu ? AP_OK : ap_profiler_gpu_sku(p.name, r->mem_bytes, r->gpu, sizeof r->gpu, err);
    if (st != AP_OK) return st;
    if (gpu) {
        const ap_gpu *g = NULL;
        if ((st = ap_gpu_lookup(gpu, "--gpu", &g, err)) != AP_OK) return st;
        snprintf(r->gpu, sizeof r->gpu, "%s", g->name);
    }
    char bus[32] = "", ven[16] = "", dev[16] = "";
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) {
        for (char *c = bus; *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c + 32 : *c);
        sysfs_hex(bus, "vendor", ven, sizeof ven);
        sysfs_hex(bus, "device", dev, sizeof dev);
        if (ven[0] && dev[0]) snprintf(r->pci_id, sizeof r->pci_id, "%.8s:%.8s", ven, dev);
    }
    const char *mig = strstr(p.name, " MIG ");
    snprintf(r->mig_mode, sizeof r->mig_mode, "%s", mig ? mig + 5 : "off");
    int v = 0;
    cudaRuntimeGetVersion(&v);
    snprintf(r->cuda_version, sizeof r->cuda_version, "%d.%d", v / 1000, (v % 1000) / 10);
    ap_gb_cublas_version(r->cublas_version, sizeof r->cublas_version);
#ifdef AP_HAVE_NCCL
    ap_gb_nccl_version(r->nccl_version, sizeof r->nccl_version);
#endif
    unsigned mhz = 0, mw = 0;
    if (nd0 && nvml.driver(r->driver_version, sizeof r->driver_version) != 0)
        r->driver_version[0] = '\0';
    if (!r->driver_version[0]) proc_driver(r->driver_version, sizeof r->driver_version);
    if (nd0 && nvml.app_clock(nd0, NVML_CLOCK_SM, &mhz) == 0) r->sm_clock_mhz = mhz;
    if (nd0 && nvml.app_clock(nd0, NVML_CLOCK_MEM, &mhz) == 0) r->mem_clock_mhz = mhz;
    if (nd0 && nvml.power(nd0, &mw) == 0) r->power_limit_w = mw / 1000.0;
    int khz = 0; /* without NVML: the maximum clocks the runtime reports */
    if (!r->sm_clock_mhz && cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess)
        r->sm_clock_mhz = khz / 1000.0;
    if (!r->mem_clock_mhz &&
        cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
        r->mem_clock_mhz = khz / 1000.0;
    ap_profiler_host(r->host, sizeof r->host);
    return AP_OK;
}

/* ---- launch latency --------------------------------------------------------------------------- */

#define LAUNCHES 1000

static double host_launches(void *a, ap_err *err) {
    ap_gb *g = a;
    double t0 = ap_now_s();
    for (int i = 0; i < LAUNCHES; i++) {
        int rc = ap_cu_empty(g->stream);
        if (rc) return ap_gb_cuda(rc, "launching an empty kernel", err), -1;
    }
    double t = (ap_now_s() - t0) / LAUNCHES;
    cudaStreamSynchronize(g->stream);
    return t;
}

typedef struct {
    ap_gb *g;
    cudaGraphExec_t exec;
} graph_arg;

static int launch_graph(void *a, ap_err *err) {
    (void)err;
    graph_arg *ga = a;
    return (int)cudaGraphLaunch(ga->exec, ga->g->stream);
}

static ap_status bench_launch(ap_gb *g, ap_err *err) {
    ap_bench_stats st;
    char src[192];
    ap_status s = ap_bench_repeat(host_launches, g, 2, g->o->reps, &st, err);
    if (s != AP_OK) return s == AP_ERR_INTERNAL ? AP_ERR_CUDA : s;
    snprintf(src, sizeof src, "autoplan %s profile bench (host time of %d empty-kernel launches)",
             AP_VERSION, LAUNCHES);
    if ((s = ap_gb_row(g, "launch", "kind=kernel", "none", &st, 0, src, err)) != AP_OK) return s;
    /* a graph of LAUNCHES empty kernels: device time per node */
    cudaGraph_t graph = NULL;
    graph_arg ga = {g, NULL};
    int rc = (int)cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal);
    for (int i = 0; !rc && i < LAUNCHES; i++) rc = ap_cu_empty(g->stream);
    int rc2 = (int)cudaStreamEndCapture(g->stream, &graph);
    if (!rc) rc = rc2;
    if (!rc) rc = (int)cudaGraphInstantiate(&ga.exec, graph, 0);
    if (rc) s = ap_gb_cuda(rc, "capturing a CUDA graph", err);
    ap_bench_stats gs;
    if (s == AP_OK) s = ap_gb_time(g, launch_graph, &ga, &gs, err);
    if (s == AP_OK) {
        gs.median_s /= LAUNCHES, gs.min_s /= LAUNCHES, gs.max_s /= LAUNCHES;
        snprintf(src, sizeof src, "autoplan %s profile bench (device time of a %d-node graph "
                 "of empty kernels, per node)", AP_VERSION, LAUNCHES);
        s = ap_gb_row(g, "launch", "kind=graph_node", "none", &gs, 0, src, err);
    }
    if (ga.exec) cudaGraphExecDestroy(ga.exec);
    if (graph) cudaGraphDestroy(graph);
    if (s == AP_OK) ap_gb_note(g, "launch: %.1f us eager (host), %.2f us per graph node",
                               st.median_s * 1e6, gs.median_s * 1e6);
    return s;
}

/* ---- copies --------------------------------------------------------------------------------------- */

typedef struct {
    ap_gb *g;
    void *dst;
    const void *src;
    size_t bytes;
    enum cudaMemcpyKind kind;
    int peer_src, peer_dst; /* -1: not a peer copy */
} copy_arg;

static int do_copy(void *a, ap_err *err) {
    (void)err;
    copy_arg *c = a;
    if (c->peer_src >= 0)
        return (int)cudaMemcpyPeerAsync(c->dst, c->peer_dst, c->src, c->peer_src, c->bytes,
                                        c->g->stream);
    return (int)cudaMemcpyAsync(c->dst, c->src, c->bytes, c->kind, c->g->stream);
}

static ap_status bench_copies(ap_gb *g, ap_err *err) {
    const double top = g->o->quick ? 64 * MiB : 1024 * MiB;
    size_t max = (size_t)top;
    void *dev = NULL, *dev2 = NULL, *pinned = NULL, *pageable = malloc(max);
    int rc = (int)cudaMalloc(&dev, max);
    if (!rc) rc = (int)cudaMalloc(&dev2, max);
    if (!rc) rc = (int)cudaMallocHost(&pinned, max);
    ap_status s = rc ? ap_gb_cuda(rc, "allocating copy buffers", err) : AP_OK;
    if (s == AP_OK && !pageable) s = ap_err_set(err, AP_ERR_NOMEM, "out of host memory");
    if (s == AP_OK) {
        memset(pageable, 1, max);
        memset(pinned, 1, max);
    }
    static const struct { const char *dir, *mem; enum cudaMemcpyKind kind; } cases[] = {
        {"h2d", "pinned", cudaMemcpyHostToDevice}, {"d2h", "pinned", cudaMemcpyDeviceToHost},
        {"h2d", "pageable", cudaMemcpyHostToDevice}, {"d2h", "pageable", cudaMemcpyDeviceToHost},
        {"d2d", "device", cudaMemcpyDeviceToDevice}};
    for (size_t c = 0; s == AP_OK && c < sizeof cases / sizeof cases[0]; c++) {
        double best = 0;
        for (double b = 64 * 1024; s == AP_OK && b <= top; b *= 4) {
            copy_arg a = {g, NULL, NULL, (size_t)b, cases[c].kind, -1, -1};
            void *host = !strcmp(cases[c].mem, "pinned") ? pinned : pageable;
            a.dst = cases[c].kind == cudaMemcpyDeviceToHost ? host : dev;
            a.src = cases[c].kind == cudaMemcpyHostToDevice ? host
                  : cases[c].kind == cudaMemcpyDeviceToHost ? dev : dev2;
            ap_bench_stats st;
            char shape[96], src[192];
            s = ap_gb_time(g, do_copy, &a, &st, err);
            snprintf(shape, sizeof shape, "dir=%s,mem=%s,bytes=%zu", cases[c].dir, cases[c].mem, a.bytes);
            snprintf(src, sizeof src, "autoplan %s profile bench (cudaMemcpyAsync)", AP_VERSION);
            if (s == AP_OK) s = ap_gb_row(g, "memcpy", shape, "none", &st, b, src, err);
            if (s == AP_OK && b / st.median_s > best) best = b / st.median_s;
        }
        if (s == AP_OK) ap_gb_note(g, "copy %s %s: up to %.1f GB/s", cases[c].dir, cases[c].mem,
                                   best / 1e9);
    }
    /* peer copies to the next device when peer access works */
    int count = 0, can = 0;
    cudaGetDeviceCount(&count);
    if (s == AP_OK && count > 1 && cudaDeviceCanAccessPeer(&can, g->device, (g->device + 1) % count) ==
                                       cudaSuccess && can) {
        int other = (g->device + 1) % count;
        void *far = NULL;
        cudaSetDevice(other);
        rc = (int)cudaMalloc(&far, max);
        cudaSetDevice(g->device);
        cudaError_t pe = cudaDeviceEnablePeerAccess(other, 0);
        if (pe == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        double best = 0;
        for (double b = 64 * 1024; !rc && s == AP_OK && b <= top; b *= 4) {
            copy_arg a = {g, far, dev, (size_t)b, cudaMemcpyDefault, g->device, other};
            ap_bench_stats st;
            char shape[96], src[192];
            s = ap_gb_time(g, do_copy, &a, &st, err);
            snprintf(shape, sizeof shape, "dir=p2p,mem=device,bytes=%zu", a.bytes);
            snprintf(src, sizeof src, "autoplan %s profile bench (cudaMemcpyPeerAsync %d -> %d)",
                     AP_VERSION, g->device, other);
            if (s == AP_OK) s = ap_gb_row(g, "memcpy", shape, "none", &st, b, src, err);
            if (s == AP_OK && b / st.median_s > best) best = b / st.median_s;
        }
        if (s == AP_OK && !rc) ap_gb_note(g, "copy p2p: up to %.1f GB/s", best / 1e9);
        if (far) {
            cudaSetDevice(other);
            cudaFree(far);
            cudaSetDevice(g->device);
        }
    }
    cudaFree(dev);
    cudaFree(dev2);
    cudaFreeHost(pinned);
    free(pageable);
    return s;
}

/* ---- memory-bound kernels and fused Adam ----------------------------------------------------------- */

typedef struct {
    int kind;
    void *bufs[3];
    size_t n;
    int width;
    int64_t step;
} mb_arg;

static ap_gb *g_stream_owner; /* the bench whose stream the kernel launches use */

static int do_membound_s(void *a, ap_err *err) {
    (void)err;
    mb_arg *m = a;
    return ap_cu_membound(m->kind, m->bufs, m->n, m->width, g_stream_owner->stream);
}

static int do_adam(void *a, ap_err *err) {
    (void)err;
    mb_arg *m = a;
    m->step++;
    return ap_cu_adam((float *)m->bufs[0], (const float *)m->bufs[1], (float *)m->bufs[2],
                      (float *)m->bufs[2] + m->n, m->n, m->step, g_stream_owner->stream);
}

static ap_status bench_membound(ap_gb *g, int adam, ap_err *err) {
    /* kind, profile name, bytes moved per element, row width (0: none), element type */
    static const struct { int kind; const char *name; double per_elem; int width; const char *dt; } ks[] = {
        {AP_MB_ELEMENTWISE, "elementwise", 6, 0, "bf16"},
        {AP_MB_REDUCTION, "reduction", 4, 0, "fp32"},
        {AP_MB_NORM, "norm", 4, 4096, "bf16"},
        {AP_MB_SOFTMAX, "softmax", 4, 4096, "bf16"},
        {AP_MB_XENT, "cross_entropy", 2, 32000, "bf16"},
        {AP_MB_ROPE, "rope", 4, 128, "bf16"},
        {AP_MB_ACTIVATION, "activation", 6, 0, "bf16"},
    };
    const double top = g->o->quick ? 64 * MiB : 1024 * MiB;
    size_t max = (size_t)top + 64 * (size_t)MiB;
    mb_arg a;
    memset(&a, 0, sizeof a);
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) rc = (int)cudaMalloc(&a.bufs[i], i == 2 && adam ? 2 * max : max);
    for (int i = 0; i < 3 && !rc; i++) rc = ap_cu_fill(a.bufs[i], max / 4, AP_FILL_F32, 7 + i, g->stream);
    if (!rc) rc = (int)cudaStreamSynchronize(g->stream);
    ap_status s = rc ? ap_gb_cuda(rc, "allocating kernel buffers", err) : AP_OK;
    g_stream_owner = g;
    char shape[96], src[192];
    if (!adam) {
        for (size_t k = 0; s == AP_OK && k < sizeof ks / sizeof ks[0]; k++) {
            double best = 0;
            for (double b = 4 * MiB; s == AP_OK && b <= top; b *= 4) {
                a.kind = ks[k].kind;
                a.width = ks[k].width;
                a.n = (size_t)(b / ks[k].per_elem);
                if (a.width) a.n = a.n / (size_t)a.width * (size_t)a.width;
                if (ks[k].kind == AP_MB_XENT) { /* targets: one int32 per row */
                    rc = ap_cu_fill(a.bufs[1], a.n / (size_t)a.width, AP_FILL_I32, 3, g->stream);
                    if (rc) s = ap_gb_cuda(rc, "filling targets", err);
                }
                double bytes = (double)a.n * ks[k].per_elem;
                ap_bench_stats st;
                if (s == AP_OK) s = ap_gb_time(g, do_membound_s, &a, &st, err);
                snprintf(shape, sizeof shape, "kind=%s,bytes=%.0f", ks[k].name, bytes);
                snprintf(src, sizeof src, "autoplan %s profile bench (kernels.cu %s)", AP_VERSION,
                         ks[k].name);
                if (s == AP_OK) s = ap_gb_row(g, "membound", shape, ks[k].dt, &st, bytes, src, err);
                if (s == AP_OK && bytes / st.median_s > best) best = bytes / st.median_s;
            }
            if (s == AP_OK) ap_gb_note(g, "%s: up to %.0f GB/s", ks[k].name, best / 1e9);
        }
    } else {
        double best = 0;
        for (double params = 1 << 20; s == AP_OK && params * 16 <= top; params *= 4) {
            a.n = (size_t)params;
            a.step = 0;
            ap_bench_stats st;
            double bytes = 28.0 * params; /* read p, g, m, v; write p, m, v (fp32) */
            s = ap_gb_time(g, do_adam, &a, &st, err);
            snprintf(shape, sizeof shape, "kind=adam,bytes=%.0f", bytes);
            snprintf(src, sizeof src, "autoplan %s profile bench (kernels.cu fused AdamW, %.0f "
                     "fp32 parameters)", AP_VERSION, params);
            if (s == AP_OK) s = ap_gb_row(g, "membound", shape, "fp32", &st, bytes, src, err);
            if (s == AP_OK && bytes / st.median_s > best) best = bytes / st.median_s;
        }
        if (s == AP_OK) ap_gb_note(g, "fused Adam: up to %.0f GB/s", best / 1e9);
    }
    for (int i = 0; i < 3; i++) cudaFree(a.bufs[i]);
    return s;
}

/* ---- the CUDA context's memory ------------------------------------------------------------------ */

static ap_status bench_context(ap_gb *g, ap_err *err) {
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess || g_used_before_context < 0) {
        ap_gb_note(g, "CUDA context memory: not measured (needs NVML to read the memory in use "
                   "before the context exists)");
        return AP_OK;
    }
    double bytes = (double)(total - free_b) - g_used_before_context;
    if (bytes <= 0) return AP_OK;
    ap_bench_stats st = {0, 0, 0, 0, 1};
    char src[192];
    snprintf(src, sizeof src, "autoplan %s profile bench (NVML used before the context, "
             "cudaMemGetInfo after; includes other processes' changes meanwhile)", AP_VERSION);
    ap_gb_note(g, "CUDA context: %.0f MiB", bytes / MiB);
    return ap_gb_row(g, "device_mem", "kind=context", "none", &st, bytes, src, err);
}

/* ---- the driver -------------------------------------------------------------------------------------- */

static ap_status run(const ap_gpubench_opts *o, const ap_profile_row *tmpl, ap_profile *out,
                     ap_err *err) {
    ap_gb g;
    memset(&g, 0, sizeof g);
    g.o = o;
    g.tmpl = tmpl;
    g.out = out;
    g.device = o->device;
    int rc = (int)cudaSetDevice(o->device);
    if (!rc) rc = (int)cudaFree(0); /* create the context now */
    if (rc) return ap_gb_cuda(rc, "opening the device", err);
    cudaDeviceGetAttribute(&g.sm_major, cudaDevAttrComputeCapabilityMajor, o->device);
    cudaDeviceGetAttribute(&g.sm_minor, cudaDevAttrComputeCapabilityMinor, o->device);
    rc = (int)cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking);
    if (!rc) rc = (int)cudaEventCreate(&g.e0);
    if (!rc) rc = (int)cudaEventCreate(&g.e1);
    if (rc) return ap_gb_cuda(rc, "creating a stream and events", err);
    ap_status s = AP_OK;
    if (ap_gb_wants(&g, "devmem")) s = bench_context(&g, err);
    if (s == AP_OK && ap_gb_wants(&g, "launch")) s = bench_launch(&g, err);
    if (s == AP_OK && ap_gb_wants(&g, "copy")) s = bench_copies(&g, err);
    if (s == AP_OK && ap_gb_wants(&g, "membound")) s = bench_membound(&g, 0, err);
    if (s == AP_OK && ap_gb_wants(&g, "adam")) s = bench_membound(&g, 1, err);
    if (s == AP_OK && (ap_gb_wants(&g, "gemm") || ap_gb_wants(&g, "devmem"))) s = ap_gb_gemm(&g, err);
#ifdef AP_HAVE_CUDNN
    if (s == AP_OK && ap_gb_wants(&g, "attn")) s = ap_gb_attn(&g, err);
#else
    if (ap_gb_wants(&g, "attn"))
        ap_gb_note(&g, "attention (cuDNN): not built (no cuDNN at build time); "
                   "profiler/scripts/attn_bench.py under profile attach measures attention");
#endif
#ifdef AP_HAVE_NCCL
    if (s == AP_OK && (ap_gb_wants(&g, "nccl") || ap_gb_wants(&g, "devmem"))) s = ap_gb_nccl(&g, err);
#else
    if (ap_gb_wants(&g, "nccl"))
        ap_gb_note(&g, "collectives: not built (no NCCL at build time); the cost model uses the "
                   "published tables");
#endif
    cudaEventDestroy(g.e0);
    cudaEventDestroy(g.e1);
    cudaStreamDestroy(g.stream);
    return s;
}

/* The module's one export (profiler/libs.c loads it; profiler/gpubench.map keeps the rest
 * inside). */
extern const ap_gpubench_api ap_gpubench_module;
const ap_gpubench_api ap_gpubench_module = {AP_GPUBENCH_ABI, sizeof(ap_profile_row),
                                            sizeof(ap_gpubench_opts), AP_VERSION, identify, run};
