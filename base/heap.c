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
 * memory the C library allocates for itself (stdio buffers). Not thread-safe: the counters are
 * plain globals (the library runs on one thread; the injection is for tests).
 */
#include "autoplan/common.h"

#include <stdlib.h>
#include <string.h>

static unsigned long failures;   /* allocations that returned NULL so far */
static long count;               /* allocations since the last ap_heap_fail_at */
static long fail_at;             /* 0: no injection; else the allocation number that fails */
static int fail_on;              /* 1: every allocation from fail_at on fails */
static int injected;             /* an injected failure happened since ap_heap_fail_at */

/* Counts one allocation; 1 when it must fail. */
static int inject(void) {
    count++;
    if (fail_at > 0 && (count == fail_at || (fail_on && count > fail_at))) {
        injected = 1;
        return 1;
    }
    return 0;
}

static void *checked(void *p) {
    if (!p) failures++;
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
}

long ap_heap_count(void) { return count; }

int ap_heap_injected(void) { return injected; }
