/*
 * heap.c - the one allocation hook of the library (common.h): every allocation of base/,
 * costmodel/, sim/, planner/, output/ and db/ goes through ap_malloc / ap_calloc / ap_realloc /
 * ap_strdup, and so do SQLite's (db/sqlite.c installs SQLITE_CONFIG_MALLOC onto them) and
 * cJSON's (base/json.c installs cJSON_InitHooks). The memory is ordinary C heap memory: free()
 * and ap_free() are interchangeable, so "the caller frees with free()" stays true.
 *
 * Two things ride on the hook: a count of failed allocations (real or injected), which lets a
 * caller tell "out of memory" from another failure of a third-party call that reports both as
 * NULL (cJSON's parser), and the fault injection of tests/test_faults.c: fail the nth
 * allocation from now (as SQLite's own test harness does, SQLite docs "How SQLite Is Tested",
 * section 3.1), once or from then on.
 *
 * What it does not hook: GLPK, which allocates through its own glp_alloc and aborts the process
 * when that fails, by design (GLPK reference manual, "glp_alloc ... if the memory cannot be
 * allocated, the routine prints an error message and abnormally terminates the program"), and
 * memory the C library allocates for itself (stdio buffers). The counters are atomic: the
 * search and plans.csv allocate on worker threads (an injection into a threaded run fails
 * whichever allocation comes nth, so the fault tests run one thread).
 */
#include "autoplan/common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define RELAXED memory_order_relaxed
static atomic_ulong failures;    /* allocations that returned NULL so far */
static atomic_long count;        /* allocations since the last ap_heap_fail_at */
static atomic_long fail_at;      /* 0: no injection; else the allocation number that fails */
static atomic_int fail_on;       /* 1: every allocation from fail_at on fails */
static atomic_int injected;      /* an injected failure happened since ap_heap_fail_at */
static atomic_int armed;         /* ap_heap_fail_at was called: count allocations. A program
                                    that never calls it pays one load of a flag no thread
                                    writes, not a locked add on a counter every thread's
                                    allocations contend for (4-5% of fit's time) */

/* Counts one allocation; 1 when it must fail. */
static int inject(void) {
    if (!atomic_load_explicit(&armed, RELAXED)) return 0;
    long n = atomic_fetch_add_explicit(&count, 1, RELAXED) + 1;
    long at = atomic_load_explicit(&fail_at, RELAXED);
    if (at > 0 && (n == at || (atomic_load_explicit(&fail_on, RELAXED) && n > at))) {
        atomic_store_explicit(&injected, 1, RELAXED);
        return 1;
    }
    return 0;
}

static void *checked(void *p) {
    if (!p) atomic_fetch_add_explicit(&failures, 1, RELAXED);
    return p;
}

void *ap_malloc(size_t n) {
    if (inject()) return checked(NULL);
    return checked(malloc(n ? n : 1));
}

void *ap_calloc(size_t n, size_t size) {
    if (inject()) return checked(NULL);
    return checked(calloc(n ? n : 1, size ? size : 1));
}

void *ap_realloc(void *p, size_t n) {
    if (inject()) return checked(NULL);
    return checked(realloc(p, n ? n : 1));
}

char *ap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ap_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void ap_free(void *p) { free(p); }

unsigned long ap_heap_failures(void) { return failures; }

void ap_heap_fail_at(long n, int persistent) {
    count = 0;
    fail_at = n > 0 ? n : 0;
    fail_on = persistent != 0;
    injected = 0;
    armed = 1;
}

long ap_heap_count(void) { return count; }

int ap_heap_injected(void) { return injected; }
