/*
 * libs.c - autoplan's companion libraries (include/autoplan/profiler.h): where to find the
 * injection library (libautoplan_inject.so, loaded into traced programs) and the GPU benchmark
 * module (libautoplan_gpu.so), and loading the module with dlopen.
 *
 * The module holds everything that links cuBLASLt, cuDNN and NCCL (profiler/gpubench*.c):
 * loading those libraries costs about 0.3 s per process, which every `autoplan` command and
 * every CLI test would pay if the executable linked them. It exports one table,
 * ap_gpubench_module; the loader checks its ABI number and struct sizes, so a module of another
 * build is refused rather than called with the wrong layout.
 *
 * Plain POSIX: builds without CUDA, and then finds no module and says so.
 */
#include "autoplan/profiler.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GPU_MODULE "libautoplan_gpu.so"

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

ap_status ap_profiler_find_lib(const char *name, const char *env, const char *build_path,
                               char *buf, size_t n, ap_err *err) {
    const char *e = env ? getenv(env) : NULL;
    if (e && e[0]) {
        if (!is_file(e)) return ap_err_set(err, AP_ERR_INPUT, "%s=%s: no such file", env, e);
        snprintf(buf, n, "%s", e);
        return AP_OK;
    }
    char exe[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l > 0) {
        exe[l] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, name);
        if (is_file(cand) && strlen(cand) < n) return snprintf(buf, n, "%s", cand), AP_OK;
        snprintf(cand, sizeof cand, "%s/../lib/%s", exe, name);
        if (is_file(cand) && strlen(cand) < n) return snprintf(buf, n, "%s", cand), AP_OK;
    }
    if (build_path && is_file(build_path)) return snprintf(buf, n, "%s", build_path), AP_OK;
    if (build_path)
        return ap_err_set(err, AP_ERR_INPUT, "%s not found beside autoplan, in ../lib or at %s "
                          "(build it, or set %s)", name, build_path, env ? env : "its path");
    return ap_err_set(err, AP_ERR_INPUT, "%s not found: this autoplan was built without the CUDA "
                      "toolkit, so it has no %s; rebuild where the toolkit is installed%s%s",
                      name, name, env ? ", or set " : "", env ? env : "");
}

void ap_gpubench_opts_init(ap_gpubench_opts *o) { memset(o, 0, sizeof *o); }

ap_status ap_gpubench_load(const ap_gpubench_api **api, ap_err *err) {
    static const ap_gpubench_api *loaded;
    *api = loaded;
    if (loaded) return AP_OK;
#ifdef AP_GPU_MODULE
    const char *built = AP_GPU_MODULE;
#else
    const char *built = NULL;
#endif
    char path[PATH_MAX];
    ap_status st = ap_profiler_find_lib(GPU_MODULE, "AUTOPLAN_GPU_MODULE", built, path,
                                        sizeof path, err);
    if (st != AP_OK) return st;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return ap_err_set(err, AP_ERR_INPUT, "%s: cannot load: %s", path, dlerror());
    const ap_gpubench_api *a = (const ap_gpubench_api *)dlsym(h, "ap_gpubench_module");
    if (!a || a->abi != AP_GPUBENCH_ABI || a->row_size != sizeof(ap_profile_row) ||
        a->opts_size != sizeof(ap_gpubench_opts) || !a->identify || !a->run) {
        dlclose(h);
        return ap_err_set(err, AP_ERR_INPUT, "%s is from another autoplan build (module %s, this "
                          "is %s): use the module built with this autoplan", path,
                          a && a->version ? a->version : "?", AP_VERSION);
    }
    loaded = a;
    *api = a;
    return AP_OK;
}
