/*
 * inject.c - libautoplan_inject.so: the CUDA driver loads it into any program whose
 * environment has CUDA_INJECTION64_PATH pointing here and calls InitializeInjection at cuInit
 * (the CUDA injection entry point, as used by the CUPTI injection samples and Nsight Systems).
 * `autoplan profile attach` sets that variable (profiler/attach.c).
 *
 * It traces with CUPTI's Activity API (profiler/cupti.c) into one in-memory trace and writes
 * it to $AUTOPLAN_TRACE_FILE when the program exits (atexit: flush, disable, flush, write).
 * $AUTOPLAN_TRACE_MAX_RECORDS caps the records kept (default 16 Mi = 1 GiB); records past it
 * are counted as dropped. When tracing cannot start (no device, versions differ, another
 * subscriber) or the program starts its own CUPTI profiler, the reason goes into the trace
 * file's status line and attach prints it.
 *
 * One process is traced: the first of the run to initialise CUDA claims the trace by creating
 * "$AUTOPLAN_TRACE_FILE.owner" exclusively; later processes (workers started with exec) run
 * untraced, and a child forked from the traced process does not write the trace at its exit.
 *
 * What it does not do: interpret anything (attach reads the file) or write to stdout/stderr
 * beyond one line on failure (the program's output is the user's).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activity.h"

#define DEFAULT_MAX_RECORDS ((size_t)16 << 20)

static ap_trace g_trace;
static const char *g_path;
static int g_started;
static pid_t g_pid;     /* the traced process (a forked child must not write the trace) */

static void at_exit(void) {
    if (getpid() != g_pid) return;
    ap_err err = {{0}};
    if (g_started && ap_cupti_stop(&err) != AP_OK && !g_trace.status[0])
        snprintf(g_trace.status, sizeof g_trace.status, "%s", err.msg);
    const char *foreign = ap_cupti_foreign_use();
    if (foreign[0]) snprintf(g_trace.status, sizeof g_trace.status, "%s", foreign);
    if (ap_trace_write(&g_trace, g_path, &err) != AP_OK)
        fprintf(stderr, "autoplan inject: %s\n", err.msg);
    ap_trace_free(&g_trace);
}

/* Called once per process by the CUDA driver. Returns 1 (success) even when tracing could not
 * start: the program must run as it would without autoplan. */
int InitializeInjection(void);
int InitializeInjection(void) {
    static int once;
    if (once++) return 1;
    g_path = getenv("AUTOPLAN_TRACE_FILE");
    if (!g_path || !g_path[0]) return 1; /* loaded by hand without attach: do nothing */
    char owner[4096];
    snprintf(owner, sizeof owner, "%s.owner", g_path);
    int fd = open(owner, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0) return 1; /* another process of this run is traced */
    close(fd);
    g_pid = getpid();
    ap_trace_init(&g_trace);
    g_trace.max_recs = DEFAULT_MAX_RECORDS;
    const char *mx = getenv("AUTOPLAN_TRACE_MAX_RECORDS");
    if (mx && mx[0]) {
        char *end = NULL;
        unsigned long long v = strtoull(mx, &end, 10);
        if (end && !*end && v > 0) g_trace.max_recs = (size_t)v;
    }
    ap_err err = {{0}};
    if (ap_cupti_start(&g_trace, &err) == AP_OK) g_started = 1;
    else snprintf(g_trace.status, sizeof g_trace.status, "%s", err.msg);
    atexit(at_exit);
    return 1;
}
