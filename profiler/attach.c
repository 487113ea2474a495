/*
 * attach.c - run any CUDA program under autoplan's injection library and read back what it
 * recorded (include/autoplan/profiler.h), plus the identity of a measurement (host, profile
 * name).
 *
 * The CUDA driver loads the library named by CUDA_INJECTION64_PATH into the program at cuInit
 * and calls its InitializeInjection (profiler/inject.c), which enables CUPTI activity tracing
 * and writes the trace to AUTOPLAN_TRACE_FILE when the program exits. NVTX ranges reach CUPTI
 * only through NVTX_INJECTION64_PATH, which names the same library: it passes NVTX on to the
 * libcupti copy it traces with (profiler/cupti.c). The library is also preloaded (LD_PRELOAD)
 * so that it sees a program that starts its own CUPTI profiler (only one subscriber can exist)
 * and can say so instead of silently losing records; with --cupti-lib that file is preloaded
 * before it, so the library binds to it (one soname, one copy).
 *
 * This file is plain POSIX: it builds without CUDA, and then has no library to find.
 *
 * What it does not do: interpret the trace (attrib.c) or print (cli/).
 */
#include "autoplan/files.h"
#include "autoplan/profiler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define INJECT_NAME "libautoplan_inject.so"

/* ---- identity ----------------------------------------------------------------------------------- */

void ap_profiler_host(char *buf, size_t n) {
    char h[256] = "";
    if (gethostname(h, sizeof h - 1) != 0 || !h[0]) snprintf(h, sizeof h, "unknown-host");
    h[sizeof h - 1] = '\0';
    /* keep it a valid name part: [A-Za-z0-9.-], at most 63 bytes */
    size_t i = 0;
    for (; h[i] && i < 63 && i + 1 < n; i++) {
        char c = h[i];
        buf[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '.' || c == '-'
                     ? c
                     : '-';
    }
    if (n) buf[i] = '\0';
}

void ap_profiler_default_name(const char *gpu, const char *host, int64_t unix_s, char *buf,
                              size_t n) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    char when[32] = "19700101-000000";
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
    /* gpu (<= 31) + host (<= 15 kept) + stamp (15) + dashes fit in 63 */
    snprintf(buf, n, "%.31s-%.15s-%s", gpu, host, when);
}

ap_status ap_attach_find_inject(char *buf, size_t n, ap_err *err) {
#ifdef AP_INJECT_LIB
    const char *built = AP_INJECT_LIB;
#else
    const char *built = NULL;
#endif
    return ap_profiler_find_lib(INJECT_NAME, "AUTOPLAN_INJECT_LIB", built, buf, n, err);
}

/* ---- running the program --------------------------------------------------------------------------- */

/* The child: environment, default signals, exec; on failure the errno goes up the pipe. */
static void child(const ap_attach_opts *o, const char *lib, const char *trace, int fd) {
    char num[32];
    setenv("CUDA_INJECTION64_PATH", lib, 1);
    setenv("AUTOPLAN_TRACE_FILE", trace, 1);
    if (!getenv("NVTX_INJECTION64_PATH")) setenv("NVTX_INJECTION64_PATH", lib, 1);
    if (o->max_records) {
        snprintf(num, sizeof num, "%zu", o->max_records);
        setenv("AUTOPLAN_TRACE_MAX_RECORDS", num, 1);
    }
    const char *pre = getenv("LD_PRELOAD");
    const char *cupti = o->cupti_lib ? o->cupti_lib : "";
    size_t l = strlen(cupti) + strlen(lib) + (pre ? strlen(pre) : 0) + 3;
    char *all = ap_malloc(l);
    if (all) {
        snprintf(all, l, "%s%s%s%s%s", cupti, cupti[0] ? ":" : "", lib, pre && pre[0] ? ":" : "",
                 pre && pre[0] ? pre : "");
        setenv("LD_PRELOAD", all, 1);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    execvp(o->argv[0], o->argv);
    int e = errno;
    ssize_t w = write(fd, &e, sizeof e);
    (void)w;
    _exit(127);
}

ap_status ap_attach_run(const ap_attach_opts *o, ap_trace *t, int *exit_code, ap_err *err) {
    ap_trace_init(t);
    *exit_code = -1;
    if (!o->argv || !o->argv[0] || !o->argv[0][0])
        return ap_err_set(err, AP_ERR_INPUT, "no program to run: put it after --");
    const char *other = getenv("CUDA_INJECTION64_PATH");
    if (other && other[0])
        return ap_err_set(err, AP_ERR_INPUT, "CUDA_INJECTION64_PATH is already set (%s): another "
                          "tool is attached; only one CUPTI subscriber can exist, unset it first",
                          other);
    char lib[PATH_MAX];
    ap_status st = o->inject_lib ? (snprintf(lib, sizeof lib, "%s", o->inject_lib), AP_OK)
                                 : ap_attach_find_inject(lib, sizeof lib, err);
    if (st != AP_OK) return st;
    char tmp[PATH_MAX];
    const char *trace = o->trace_path;
    if (!trace) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/autoplan-trace.XXXXXX", dir && dir[0] ? dir : "/tmp");
        int fd = mkstemp(tmp);
        if (fd < 0)
            return ap_err_set(err, AP_ERR_IO, "%s: cannot create a trace file: %s", tmp,
                              strerror(errno));
        close(fd);
        trace = tmp;
    } else {
        /* an old trace must not pass for this run's; but only a regular file is replaced (a
           device, FIFO, link or directory there is refused, files.h) */
        if ((st = ap_files_check_target(trace, err)) != AP_OK) return st;
        unlink(trace);
    }
    char owner[PATH_MAX + 8];
    snprintf(owner, sizeof owner, "%s.owner", trace);
    unlink(owner); /* the first process to start CUDA claims the trace (inject.c) */
    int pipefd[2];
    if (pipe(pipefd) != 0 || fcntl(pipefd[1], F_SETFD, FD_CLOEXEC) != 0) {
        if (!o->trace_path) unlink(tmp);
        return ap_err_set(err, AP_ERR_IO, "cannot create a pipe: %s", strerror(errno));
    }
    /* the program gets ^C; autoplan waits for it and still reads what it wrote */
    void (*old_int)(int) = signal(SIGINT, SIG_IGN);
    void (*old_quit)(int) = signal(SIGQUIT, SIG_IGN);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        child(o, lib, trace, pipefd[1]);
    }
    close(pipefd[1]);
    int exec_errno = 0, status = 0;
    if (pid > 0) {
        ssize_t r;
        while ((r = read(pipefd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
        if (r != (ssize_t)sizeof exec_errno) exec_errno = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    }
    int fork_errno = pid < 0 ? errno : 0;
    close(pipefd[0]);
    signal(SIGINT, old_int);
    signal(SIGQUIT, old_quit);
    if (pid < 0 || exec_errno) {
        if (!o->trace_path) unlink(tmp);
        if (pid < 0) return ap_err_set(err, AP_ERR_IO, "cannot start a process: %s", strerror(fork_errno));
        return ap_err_set(err, AP_ERR_INPUT, "cannot run '%s': %s", o->argv[0], strerror(exec_errno));
    }
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
               : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    unlink(owner);
    struct stat sb;
    if (stat(trace, &sb) != 0 || sb.st_size == 0) {
        if (!o->trace_path) unlink(tmp);
        return ap_err_set(err, AP_ERR_CUDA, "'%s' left no trace (exit %d): it never initialised "
                          "CUDA, or it died before its exit handlers ran", o->argv[0], *exit_code);
    }
    st = ap_trace_read(trace, t, err);
    if (!o->trace_path) unlink(tmp);
    if (st == AP_OK && t->status[0]) {
        st = ap_err_set(err, AP_ERR_CUDA, "%s", t->status);
    }
    return st;
}
