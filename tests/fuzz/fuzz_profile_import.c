/*
 * fuzz_profile_import.c - libFuzzer target for `autoplan profile import` (db/profile_json.c):
 * arbitrary bytes go to ap_db_profile_parse_json, which must return AP_OK or AP_ERR_INPUT with
 * a one-line message and never crash, leak or trip a sanitizer. A file that parses must hold
 * only rows the kernel-profile format accepts, and must survive a round trip: written back with
 * ap_db_profile_format_json and read again, the same rows, field by field.
 *
 * Build with -DAP_FUZZ=ON (clang); seed with tests/fuzz/corpus/profile-*.json:
 *   ./fuzz_profile_import -max_total_time=60 corpus/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ap_err err = {{0}};
    ap_profile p, q;
    ap_status st = ap_db_profile_parse_json((const char *)data, size, "fuzz.json", NULL, &p, &err);
    if (st != AP_OK) {
        if (st != AP_ERR_INPUT || err.msg[0] == '\0' || strchr(err.msg, '\n') || p.n) abort();
        return 0;
    }
    if (p.n == 0 || !p.name[0] || !p.gpu[0]) abort();
    for (size_t i = 0; i < p.n; i++)
        if (ap_profile_row_check(&p.rows[i], &err) != AP_OK) abort();
    char *text = NULL;
    if (ap_db_profile_format_json(&p, &text, &err) != AP_OK) abort();
    if (ap_db_profile_parse_json(text, strlen(text), "again.json", NULL, &q, &err) != AP_OK) abort();
    if (q.n != p.n || memcmp(q.rows, p.rows, p.n * sizeof *p.rows) != 0) abort();
    free(text);
    ap_profile_free(&p);
    ap_profile_free(&q);
    return 0;
}
