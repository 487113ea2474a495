/*
 * fuzz_db_import.c - libFuzzer target for `autoplan db import` (db/export.c): arbitrary bytes go
 * to ap_db_import_json, which must return AP_OK or AP_ERR_INPUT with a one-line message and
 * never crash, leak or trip a sanitizer; after any input the database passes its integrity
 * check and a refused input added no row (all or nothing).
 *
 * One database per fuzzing process, in a temporary directory removed at exit. Build with -DAP_FUZZ=ON (clang);
 * seed with exports (autoplan db export --output seed.json):
 *   ./fuzz_db_import -max_total_time=60 corpus/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ap_db *db;
static char dir[] = "/tmp/apfuzzdb.XXXXXX", path[64];

static void cleanup(void) {
    char side[80];
    ap_db_close(db);
    db = NULL;
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    rmdir(dir);
}

static int64_t rows(void) {
    static const char *const tables[] = {"plans", "plan_results", "profiles", "runs", "run_ranks"};
    int64_t total = 0, n = 0;
    ap_err err;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (ap_db_count(db, tables[i], &n, &err) != AP_OK) abort();
        total += n;
    }
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ap_err err = {{0}};
    if (!db) {
        if (!mkdtemp(dir)) abort();
        snprintf(path, sizeof path, "%s/fuzz.db", dir);
        ap_log_set_level(AP_LOG_ERROR);
        if (ap_db_open(path, 0, &db, &err) != AP_OK) abort();
        atexit(cleanup);
    }
    int64_t before = rows();
    ap_status st = ap_db_import_json(db, (const char *)data, size, "fuzz.json", NULL, &err);
    if (st != AP_OK) {
        if (st != AP_ERR_INPUT || err.msg[0] == '\0' || strchr(err.msg, '\n')) abort();
        if (rows() != before) abort();
    }
    if (size % 64 == 0 && ap_db_integrity_check(db, &err) != AP_OK) abort();
    return 0;
}
