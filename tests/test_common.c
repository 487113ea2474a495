/*
 * test_common.c - unit parsing and formatting (base/units.c), the JSON wrapper (base/json.c)
 * and the helper threads (base/threads.c).
 *
 * References: unit conversions are worked by hand (1 GiB = 2^30 bytes, 400 Gb/s = 50e9 bytes/s,
 * 1 d = 86400 s) and compared with relative tolerance 1e-12; JSON error positions are counted by
 * hand on the literal inputs (line, column and byte are 1-, 1- and 0-based).
 */
#include "testlib.h"

#include "autoplan/common.h"
#include "autoplan/files.h"
#include "autoplan/json.h"
#include "autoplan/strbuf.h"
#include "autoplan/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOL 1e-12
#define GIB 1073741824.0

static double bytes_ok(const char *s) {
    double v = -1;
    ap_err err = {{0}};
    ap_status st = ap_parse_bytes(s, "--x", &v, &err);
    if (st != AP_OK) fprintf(stderr, "ap_parse_bytes(\"%s\"): %s\n", s, err.msg);
    CHECK_INT(st, AP_OK);
    return v;
}

static void bytes_bad(const char *s, const char *want) {
    double v = 12345;
    ap_err err = {{0}};
    CHECK_INT(ap_parse_bytes(s, "--cpu-mem", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--cpu-mem: ");
    CHECK_CONTAINS(err.msg, want);
    CHECK(v == 12345); /* untouched on failure */
}

static double bw_ok(const char *s) {
    double v = -1;
    ap_err err = {{0}};
    ap_status st = ap_parse_bandwidth(s, "--x", &v, &err);
    if (st != AP_OK) fprintf(stderr, "ap_parse_bandwidth(\"%s\"): %s\n", s, err.msg);
    CHECK_INT(st, AP_OK);
    return v;
}

static void bw_bad(const char *s, const char *want) {
    double v = 12345;
    ap_err err = {{0}};
    CHECK_INT(ap_parse_bandwidth(s, "--network-bw", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--network-bw: ");
    CHECK_CONTAINS(err.msg, want);
    CHECK(v == 12345);
}

static void test_bytes(void) {
    CHECK_NEAR(bytes_ok("80GiB"), 80 * GIB, TOL);
    CHECK_NEAR(bytes_ok("512GB"), 512e9, TOL);
    CHECK_NEAR(bytes_ok("1.5TiB"), 1.5 * 1099511627776.0, TOL);
    CHECK_NEAR(bytes_ok("2048MiB"), 2048 * 1048576.0, TOL);
    CHECK_NEAR(bytes_ok("4096B"), 4096, TOL);
    CHECK_NEAR(bytes_ok("16KiB"), 16384, TOL);
    CHECK_NEAR(bytes_ok("3kB"), 3000, TOL);
    CHECK_NEAR(bytes_ok("2PB"), 2e15, TOL);
    CHECK_NEAR(bytes_ok(" 80 GiB "), 80 * GIB, TOL);
    CHECK_NEAR(bytes_ok(".5GiB"), 0.5 * GIB, TOL);
    CHECK_NEAR(bytes_ok("1e3MB"), 1e9, TOL);
    CHECK_NEAR(bytes_ok("0B"), 0, TOL);
    /* refused: bare numbers (with a hint), bad units, signs, junk */
    bytes_bad("80", "no unit; write e.g. 80GiB or 80GB");
    bytes_bad("80 ", "no unit");
    bytes_bad("80gib", "unknown size unit 'gib'");
    bytes_bad("80GiBs", "unknown size unit");
    bytes_bad("80 GiB extra", "unknown size unit");
    bytes_bad("-1GiB", "must not be negative");
    bytes_bad("1e9TiB", "absurdly large");
    bytes_bad("GiB", "is not a size");
    bytes_bad("", "is not a size");
    bytes_bad("   ", "is not a size");
    bytes_bad("0x10GiB", "is not a size");
    bytes_bad("inf", "is not a size");
    bytes_bad("nan GiB", "is not a size");
    bytes_bad("1e999GiB", "is not a size");
    double v;
    ap_err err = {{0}};
    CHECK_INT(ap_parse_bytes(NULL, "--x", &v, &err), AP_ERR_INPUT);
}

static void test_bandwidth(void) {
    CHECK_NEAR(bw_ok("400Gb/s"), 50e9, TOL);   /* bits */
    CHECK_NEAR(bw_ok("50GB/s"), 50e9, TOL);    /* bytes */
    CHECK_NEAR(bw_ok("25GiB/s"), 25 * GIB, TOL);
    CHECK_NEAR(bw_ok("100Mb/s"), 12.5e6, TOL);
    CHECK_NEAR(bw_ok("400Gbps"), 50e9, TOL);
    CHECK_NEAR(bw_ok("1Tb/s"), 125e9, TOL);
    CHECK_NEAR(bw_ok("1.6Tb/s"), 200e9, TOL);
    CHECK_NEAR(bw_ok("10kb/s"), 1250, TOL);
    CHECK_NEAR(bw_ok("400 Gb/s"), 50e9, TOL);
    CHECK_NEAR(bw_ok("300MiB/s"), 300 * 1048576.0, TOL);
    bw_bad("400", "no unit; write 400Gb/s (bits) or 400GB/s (bytes)");
    bw_bad("400G", "unknown bandwidth unit 'G'");
    bw_bad("400GB", "unknown bandwidth unit");
    bw_bad("400Gbit/s", "unknown bandwidth unit");
    bw_bad("400/s", "unknown bandwidth unit");
    bw_bad("400GBps", "unknown bandwidth unit");
    bw_bad("400gb/s", "unknown bandwidth unit");
    bw_bad("400Gb/s/s", "unknown bandwidth unit");
    bw_bad("0Gb/s", "must be positive");
    bw_bad("-5GB/s", "must be positive");
    bw_bad("1e6Tb/s", "absurdly large");
    bw_bad("fast", "is not a bandwidth");
    bw_bad("", "is not a bandwidth");
    /* a unit longer than the internal buffer is an error, not an overflow */
    bw_bad("1GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGb/s", "unknown bandwidth unit");
}

static void test_duration_count(void) {
    double v;
    ap_err err = {{0}};
    CHECK_INT(ap_parse_duration("30d", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 30 * 86400.0, TOL);
    CHECK_INT(ap_parse_duration("12h", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 43200, TOL);
    CHECK_INT(ap_parse_duration("90m", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 5400, TOL);
    CHECK_INT(ap_parse_duration("1.5min", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 90, TOL);
    CHECK_INT(ap_parse_duration("45s", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 45, TOL);
    CHECK_INT(ap_parse_duration("2w", "--time", &v, &err), AP_OK);
    CHECK_NEAR(v, 14 * 86400.0, TOL);
    CHECK_INT(ap_parse_duration("30", "--time", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--time: '30' has no unit; write e.g. 30d or 30h");
    CHECK_INT(ap_parse_duration("3y", "--time", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "unknown duration unit 'y'");
    CHECK_INT(ap_parse_duration("0s", "--time", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "positive");
    CHECK_INT(ap_parse_duration("soon", "--time", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "is not a duration");

    CHECK_INT(ap_parse_count("2T", "--tokens", &v, &err), AP_OK);
    CHECK_NEAR(v, 2e12, TOL);
    CHECK_INT(ap_parse_count("300B", "--tokens", &v, &err), AP_OK);
    CHECK_NEAR(v, 300e9, TOL);
    CHECK_INT(ap_parse_count("4M", "--tokens", &v, &err), AP_OK);
    CHECK_NEAR(v, 4e6, TOL);
    CHECK_INT(ap_parse_count("1.5k", "--tokens", &v, &err), AP_OK);
    CHECK_NEAR(v, 1500, TOL);
    CHECK_INT(ap_parse_count("1000", "--tokens", &v, &err), AP_OK); /* counts may be plain */
    CHECK_NEAR(v, 1000, TOL);
    CHECK_INT(ap_parse_count("0", "--tokens", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--tokens: must be positive");
    CHECK_INT(ap_parse_count("2X", "--tokens", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "unknown suffix 'X'");
    CHECK_INT(ap_parse_count("1e22", "--tokens", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "absurdly large");
    CHECK_INT(ap_parse_count("many", "--tokens", &v, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "is not a number");
}

static void test_int_real(void) {
    int64_t i = 0;
    ap_err err = {{0}};
    CHECK_INT(ap_parse_int("8", "--gpus", 1, 1024, &i, &err), AP_OK);
    CHECK_INT(i, 8);
    CHECK_INT(ap_parse_int("+16", "--gpus", 1, 1024, &i, &err), AP_OK);
    CHECK_INT(i, 16);
    CHECK_INT(ap_parse_int("9007199254740993", "--n", 0, INT64_MAX, &i, &err), AP_OK);
    CHECK(i == 9007199254740993LL); /* exact, not through a double */
    CHECK_INT(ap_parse_int("0", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--gpus: 0 is out of range [1, 1024]");
    CHECK_INT(ap_parse_int("2048", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_int("8.0", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "'8.0' is not an integer");
    CHECK_INT(ap_parse_int("8 ", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_int(" 8", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_int("eight", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_int("", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "got nothing");
    CHECK_INT(ap_parse_int(NULL, "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_int("99999999999999999999", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "out of range");
    CHECK_INT(ap_parse_int("0x10", "--gpus", 1, 1024, &i, &err), AP_ERR_INPUT);

    double r = 0;
    CHECK_INT(ap_parse_real("0.5", "--mfu", 0, 1, &r, &err), AP_OK);
    CHECK_NEAR(r, 0.5, TOL);
    CHECK_INT(ap_parse_real("1e-3", "--mfu", 0, 1, &r, &err), AP_OK);
    CHECK_NEAR(r, 1e-3, TOL);
    CHECK_INT(ap_parse_real("1.5", "--mfu", 0, 1, &r, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "--mfu: 1.5 is out of range [0, 1]");
    CHECK_INT(ap_parse_real("50%", "--mfu", 0, 1, &r, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "is not a number");
    CHECK_INT(ap_parse_real("nan", "--mfu", 0, 1, &r, &err), AP_ERR_INPUT);
    CHECK_INT(ap_parse_real("", "--mfu", 0, 1, &r, &err), AP_ERR_INPUT);
}

static void test_format(void) {
    char b[64];
    CHECK_STR(ap_fmt_bytes(80 * GIB, b, sizeof b), "80.00 GiB");
    CHECK_STR(ap_fmt_bytes(2 * 1099511627776.0, b, sizeof b), "2.00 TiB");
    CHECK_STR(ap_fmt_bytes(1536 * 1024.0, b, sizeof b), "1.5 MiB");
    CHECK_STR(ap_fmt_bytes(512, b, sizeof b), "512 B");
    CHECK_STR(ap_fmt_seconds(0.0123, b, sizeof b), "12.3 ms");
    CHECK_STR(ap_fmt_seconds(1.5, b, sizeof b), "1.500 s");
    CHECK_STR(ap_fmt_seconds(3 * 86400.0, b, sizeof b), "3.0 days");
    CHECK_STR(ap_fmt_seconds(2e-6, b, sizeof b), "2.0 us");
    CHECK_STR(ap_fmt_bandwidth(50e9, b, sizeof b), "400 Gb/s");
    CHECK_STR(ap_fmt_bandwidth(200e9, b, sizeof b), "1.6 Tb/s");
    CHECK_STR(ap_fmt_bandwidth(12.5e6, b, sizeof b), "100 Mb/s");
    /* formatted bandwidths parse back */
    CHECK_NEAR(bw_ok("400Gb/s"), 50e9, TOL);
    /* errors and status helpers */
    ap_err err = {{0}};
    CHECK_INT(ap_err_set(&err, AP_ERR_INPUT, "field '%s'", "gpus"), AP_ERR_INPUT);
    ap_err_prefix(&err, "%s", "dgx.json");
    CHECK_STR(err.msg, "dgx.json: field 'gpus'");
    CHECK_INT(ap_err_set(NULL, AP_ERR_IO, "x"), AP_ERR_IO);
    CHECK_INT(ap_status_exit_code(AP_OK), 0);
    CHECK_INT(ap_status_exit_code(AP_ERR_INPUT), 2);
    CHECK_INT(ap_status_exit_code(AP_ERR_INFEASIBLE), 2);
    CHECK_INT(ap_status_exit_code(AP_ERR_NOMEM), 1);
    CHECK_STR(ap_status_str(AP_ERR_INPUT), "bad input");
    /* FNV-1a 64 test vectors (Fowler/Noll/Vo reference): "" and "a" with seed 0. The offset
     * basis is 14695981039346656037 = 0xcbf29ce484222325. */
    CHECK(ap_hash64("", 0, 0) == 0xcbf29ce484222325ULL);
    CHECK(ap_hash64("a", 1, 0) == 0xaf63dc4c8601ec8cULL);
    CHECK(ap_hash64("a", 1, 1) != ap_hash64("a", 1, 0));
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void json_bad(const char *text, size_t len, const char *want) {
    ap_err err = {{0}};
    ap_json *j = ap_json_parse(text, len, "t.json", &err);
    CHECK(j == NULL);
    ap_json_free(j);
    CHECK_CONTAINS(err.msg, want);
    CHECK(strncmp(err.msg, "t.json: ", 8) == 0);
}

static void test_json_errors(void) {
    /* '}' where a value belongs: line 3, column 8; bytes before it: 2 + 10 + 7 = 19 */
    const char *t1 = "{\n  \"a\": 1,\n  \"b\": }";
    json_bad(t1, strlen(t1), "invalid JSON at line 3, column 8 (byte 19)");
    const char *t2 = "{\"a\": 1";
    json_bad(t2, strlen(t2), "unexpected end of input at line 1, column 8 (byte 7)");
    const char *t2b = "{\"a\": [1, 2";
    json_bad(t2b, strlen(t2b), "unexpected end of input");
    /* a bad last byte is not an end of input */
    const char *t2c = "{\"a\": 1x";
    json_bad(t2c, strlen(t2c), "invalid JSON at line 1, column 8 (byte 7)");
    json_bad("", 0, "unexpected end of input at line 1, column 1 (byte 0)");
    const char *t3 = "{} x";
    json_bad(t3, strlen(t3), "unexpected data after the value at line 1, column 4 (byte 3)");
    const char *t4 = "{\"a\": [1, 2,]}"; /* trailing comma at byte 12 */
    json_bad(t4, strlen(t4), "(byte 12)");
    const char *t5 = "{\"a\": tru}";
    json_bad(t5, strlen(t5), "line 1, column 7 (byte 6)");
    const char t6[] = "{\"a\": 1}\0garbage";
    json_bad(t6, sizeof t6 - 1, "byte 8");
    ap_err err = {{0}};
    CHECK(ap_json_parse(NULL, 5, "t.json", &err) == NULL);
    CHECK_CONTAINS(err.msg, "t.json: no data");
    /* length is honoured: the text need not be NUL-terminated */
    const char t7[] = "[1]]]]";
    ap_json *j = ap_json_parse(t7, 3, "t.json", &err);
    CHECK(j != NULL);
    CHECK_INT(ap_json_size(j), 1);
    ap_json_free(j);
    /* files */
    CHECK(ap_json_parse_file("/nonexistent/x.json", &err) == NULL);
    CHECK_CONTAINS(err.msg, "/nonexistent/x.json: cannot open");
    const char *dir = tl_tmpdir();
    CHECK(dir != NULL);
    if (dir) {
        char path[512];
        snprintf(path, sizeof path, "%s/bad.json", dir);
        CHECK_INT(tl_write(path, "{\n\"x\": 1,\n\"y\" 2}\n"), 0);
        CHECK(ap_json_parse_file(path, &err) == NULL);
        CHECK_CONTAINS(err.msg, path);
        CHECK_CONTAINS(err.msg, "line 3, column 5 (byte 14)");
        unlink(path);
        rmdir(dir);
    }
}

static void test_json_fields(void) {
    const char *t = "{\"n\": 8, \"big\": 1099511627776, \"neg\": -3, \"frac\": 2.5, \"s\": \"abc\","
                    " \"b\": true, \"z\": null, \"huge\": 1e300, \"arr\": [1, \"x\"],"
                    " \"negz\": -0}";
    ap_err err = {{0}};
    ap_json *j = ap_json_parse(t, strlen(t), "m.json", &err);
    CHECK(j != NULL);
    if (!j) return;
    int64_t i = 0;
    int present = -1;
    CHECK_INT(ap_json_get_int(j, "n", 1, 100, &i, NULL, "m.json", &err), AP_OK);
    CHECK_INT(i, 8);
    /* beyond int: read through valuedouble, exact */
    CHECK_INT(ap_json_get_int(j, "big", 0, INT64_MAX, &i, NULL, "m.json", &err), AP_OK);
    CHECK(i == 1099511627776LL);
    CHECK_INT(ap_json_get_int(j, "neg", 1, 100, &i, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "m.json: field 'neg' = -3 is out of range [1, 100]");
    CHECK_INT(ap_json_get_int(j, "frac", 1, 100, &i, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 'frac' must be an integer, got 2.5");
    CHECK_INT(ap_json_get_int(j, "s", 1, 100, &i, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 's' must be an integer, got a string");
    CHECK_INT(ap_json_get_int(j, "huge", 0, INT64_MAX, &i, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "out of range");
    CHECK_INT(ap_json_get_int(j, "missing", 1, 100, &i, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "m.json: missing field 'missing'");
    i = 77;
    CHECK_INT(ap_json_get_int(j, "missing", 1, 100, &i, &present, "m.json", &err), AP_OK);
    CHECK_INT(present, 0);
    CHECK_INT(i, 77);
    CHECK_INT(ap_json_get_int(j, "z", 1, 100, &i, &present, "m.json", &err), AP_OK); /* null */
    CHECK_INT(present, 0);
    CHECK_INT(ap_json_get_int(j, "n", 1, 100, &i, &present, "m.json", &err), AP_OK);
    CHECK_INT(present, 1);

    double d = 0;
    CHECK_INT(ap_json_get_real(j, "frac", 0, 10, &d, NULL, "m.json", &err), AP_OK);
    CHECK_NEAR(d, 2.5, TOL);
    CHECK_INT(ap_json_get_real(j, "frac", 0, 1, &d, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 'frac' = 2.5 is out of range [0, 1]");
    /* -0 reads as +0 (the writer prints "0"; a round trip must keep the bits) */
    d = 1;
    CHECK_INT(ap_json_get_real(j, "negz", 0, 1, &d, NULL, "m.json", &err), AP_OK);
    CHECK(d == 0 && !signbit(d));
    CHECK_INT(ap_json_get_real(j, "b", 0, 1, &d, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "must be a number, got a boolean");
    int b = 0;
    CHECK_INT(ap_json_get_bool(j, "b", &b, NULL, "m.json", &err), AP_OK);
    CHECK_INT(b, 1);
    CHECK_INT(ap_json_get_bool(j, "n", &b, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "must be true or false, got a number");
    char s[8];
    CHECK_INT(ap_json_get_str(j, "s", s, sizeof s, NULL, "m.json", &err), AP_OK);
    CHECK_STR(s, "abc");
    char tiny[3];
    CHECK_INT(ap_json_get_str(j, "s", tiny, sizeof tiny, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "field 's' is too long (3 characters, max 2)");
    CHECK_INT(ap_json_get_str(j, "arr", s, sizeof s, NULL, "m.json", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "must be a string, got an array");

    /* navigation and type names */
    ap_json *arr = ap_json_get(j, "arr");
    CHECK(ap_json_is_array(arr));
    CHECK_INT(ap_json_size(arr), 2);
    CHECK(ap_json_is_number(ap_json_at(arr, 0)));
    CHECK_STR(ap_json_string(ap_json_at(arr, 1)), "x");
    CHECK(ap_json_at(arr, 2) == NULL);
    CHECK(ap_json_get(arr, "x") == NULL);
    CHECK_STR(ap_json_type_name(NULL), "missing");
    CHECK_STR(ap_json_type_name(ap_json_get(j, "z")), "null");
    CHECK_INT(ap_json_size(j), 10);
    int members = 0;
    for (ap_json *m = ap_json_first(j); m; m = ap_json_next(m)) members++;
    CHECK_INT(members, 10);
    CHECK_STR(ap_json_key(ap_json_first(j)), "n");
    CHECK(ap_json_string(ap_json_get(j, "n")) == NULL);
    CHECK(ap_json_number(ap_json_get(j, "s")) == 0);

    ap_json *dup = ap_json_duplicate(j);
    ap_json *det = ap_json_detach(j, "arr");
    CHECK(det != NULL);
    CHECK(ap_json_get(j, "arr") == NULL);
    CHECK(ap_json_get(dup, "arr") != NULL);
    ap_json_free(det);
    ap_json_free(dup);
    ap_json_free(j);
}

static void test_json_print(void) {
    ap_json *o = ap_json_new_object();
    CHECK_INT(ap_json_add_number(o, "int", 1099511627776.0), AP_OK);
    CHECK_INT(ap_json_add_number(o, "tenth", 0.1), AP_OK);
    CHECK_INT(ap_json_add_number(o, "third", 1.0 / 3.0), AP_OK);
    CHECK_INT(ap_json_add_number(o, "nan", NAN), AP_OK);
    CHECK_INT(ap_json_add_number(o, "negzero", -0.0), AP_OK);
    CHECK_INT(ap_json_add_string(o, "esc", "a\"b\\c\n\x01"), AP_OK);
    CHECK_INT(ap_json_add_bool(o, "t", 1), AP_OK);
    ap_json *a = ap_json_new_array();
    CHECK_INT(ap_json_push(a, ap_json_new_number(1)), AP_OK);
    CHECK_INT(ap_json_push(a, ap_json_new_number(2)), AP_OK);
    CHECK_INT(ap_json_add(o, "arr", a), AP_OK);
    char *s = ap_json_print(o, 0);
    CHECK_STR(s, "{\"int\":1099511627776,\"tenth\":0.1,\"third\":0.33333333333333331,"
                 "\"nan\":null,\"negzero\":0,\"esc\":\"a\\\"b\\\\c\\n\\u0001\",\"t\":true,"
                 "\"arr\":[1,2]}");
    /* round trip: every number comes back bit-identical */
    ap_err err = {{0}};
    ap_json *back = s ? ap_json_parse(s, strlen(s), "rt", &err) : NULL;
    CHECK(back != NULL);
    CHECK(ap_json_number(ap_json_get(back, "third")) == 1.0 / 3.0);
    CHECK(ap_json_number(ap_json_get(back, "tenth")) == 0.1);
    CHECK_STR(ap_json_string(ap_json_get(back, "esc")), "a\"b\\c\n\x01");
    ap_json_free(back);
    free(s);
    s = ap_json_print(o, 1);
    CHECK_CONTAINS(s, "{\n  \"int\": 1099511627776,\n");
    CHECK_CONTAINS(s, "\"arr\": [1, 2]\n}");
    free(s);
    /* adding to NULL frees the item and reports NOMEM */
    CHECK_INT(ap_json_add(NULL, "x", ap_json_new_number(1)), AP_ERR_NOMEM);
    CHECK_INT(ap_json_push(NULL, ap_json_new_number(1)), AP_ERR_NOMEM);
    CHECK(ap_json_print(NULL, 0) == NULL);
    ap_json_free(o);
    ap_json *e = ap_json_new_array();
    s = ap_json_print(e, 1);
    CHECK_STR(s, "[]");
    free(s);
    ap_json_free(e);
}

/* ap_json_put_number writes an integral value below 2^53 as printf("%.0f") does (its own digit
 * loop, two digits a step), -0 as 0, and any other value as the shortest of %.15g and %.17g that
 * reads back; ap_json_put_string copies a printable ASCII run whole and escapes the rest. */
static void test_json_put(void) {
    char want[64];
    long bad = 0;
    uint64_t s = 2463534242ull;
    const double fixed[] = {0.0, -0.0, 1, -1, 9, 10, 11, 99, 100, 101, 999, 1000, 1e15, 1e15 + 1,
                            9007199254740991.0, -9007199254740991.0, 123456789012.0, -100};
    for (long i = 0; i < 200000 + (long)(sizeof fixed / sizeof fixed[0]); i++) {
        double x;
        if (i < (long)(sizeof fixed / sizeof fixed[0])) {
            x = fixed[i];
        } else {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            int digits = (int)(s % 17); /* integers of every width up to 2^53 */
            int64_t v = (int64_t)((s >> 8) % (uint64_t)pow(10, digits > 15 ? 15 : digits));
            x = (double)(s & 1 ? -v : v);
        }
        ap_strbuf b = {0};
        ap_json_put_number(&b, x);
        snprintf(want, sizeof want, "%.0f", x == 0 ? 0.0 : x);
        if (!b.buf || strcmp(b.buf, want)) {
            if (bad++ < 5) fprintf(stderr, "put_number %.17g: %s\n", x, b.buf ? b.buf : "(null)");
        }
        ap_strbuf_free(&b);
    }
    CHECK_INT(bad, 0);
    /* the integer writer under it (and under put_int of plans.csv): every width, both ends */
    const int64_t ends[] = {0, -1, 9, 10, 99, 100, -100, INT64_MAX, INT64_MIN, 1000000000000000000};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        char got[24];
        snprintf(want, sizeof want, "%lld", (long long)ends[i]);
        CHECK_INT(ap_fmt_i64(ends[i], got), (int)strlen(want));
        CHECK_STR(got, want);
    }
    const char *cases[][2] = {{"", "\"\""},
                              {"plain text, 0-9", "\"plain text, 0-9\""},
                              {"a\"b", "\"a\\\"b\""},
                              {"tail\\", "\"tail\\\\\""},
                              {"\x01lead", "\"\\u0001lead\""},
                              {"mid\nline\ttab", "\"mid\\nline\\ttab\""},
                              {"caf\xc3\xa9 ok", "\"caf\xc3\xa9 ok\""},
                              {"bad \xff byte", "\"bad \\ufffd byte\""},
                              {"del\x7f", "\"del\x7f\""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ap_strbuf b = {0};
        ap_json_put_string(&b, cases[i][0]);
        CHECK_STR(b.buf, cases[i][1]);
        ap_strbuf_free(&b);
    }
}

/* ap_fmt_g17 writes exactly what printf("%.17g") writes: random bit patterns, values across the
 * magnitudes the estimates hold, binary fractions, integers around 2^53, powers of ten, round
 * and tie cases, zeros, infinities, NaN, subnormals; ap_fmt_g17_len writes the same and returns
 * printf's count. */
static int g17_both(double x, char *b) {
    char c[64];
    int len = ap_fmt_g17_len(x, c);
    ap_fmt_g17(x, b);
    return len == (int)strlen(b) && !strcmp(b, c);
}

/* x written by both (g17_both) against printf: counted in *n, a difference in *bad (the first
 * five printed) */
static void g17_check(double x, long *n, long *bad) {
    char a[64], b[64];
    snprintf(a, sizeof a, "%.17g", x);
    int same = g17_both(x, b);
    (*n)++;
    if (strcmp(a, b) || !same) {
        if ((*bad)++ < 5) fprintf(stderr, "g17: %s vs %s\n", a, b);
    }
}

static void test_fmt_g17(void) {
    long bad = 0, n = 0;
    uint64_t s = 88172645463325252ull;
    const double fixed[] = {0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-5, 9.9999999999999995e-5, 1e16,
                            1e17, 99999999999999999.0, 123456789012345678.0, 1e-300, 5e-324,
                            1.7976931348623157e308, 2.2250738585072014e-308, 0.3, 2.0 / 3.0,
                            9007199254740993.0, 1e23, 8.589973e9, 1.0 / 0.0, -1.0 / 0.0,
                            99999999999999984.0, 1e17 - 16, -85899345920.0, 100000000000000000.0,
                            /* both ends of the exact 128-bit path's range (1e-11, 1e17) */
                            1e-11, nextafter(1e-11, 0), nextafter(1e-11, 1), 1e17 - 8,
                            99999999999999.992, 9999999999999999.0, 0.99999999999999989,
                            9.9999999999999995e-12, 1.0000000000000001e-11};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) g17_check(fixed[i], &n, &bad);
    for (long i = 0; i < 400000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        double x;
        switch (i % 6) {
        case 0: memcpy(&x, &s, sizeof x); break;
        case 1: x = (double)(s % 1000000007u) / (double)((s >> 40) % 1000 + 1) *
                    pow(10, (int)((s >> 20) % 60) - 30); break;
        case 2: x = ldexp((double)(s >> 11), (int)((s >> 3) % 200) - 150); break;
        case 3: x = (double)(s % 100000) / 64.0; break;
        case 4: x = (double)(int64_t)(s >> 10) + 0.5; break;
        default: /* integers of every width, around 1e17 and 2^53 too */
            x = (double)(int64_t)((s >> 4) % (uint64_t)pow(10, (double)(s % 19))) *
                (s & 8 ? -1 : 1);
            break;
        }
        if (x != x) continue;
        g17_check(x, &n, &bad);
    }
    /* ties at the 17th digit, which the exact 128-bit path rounds half to even: m / 2^q of 18
     * or more significant digits ending in 5 (m near 2^53: 16 integer digits, q fraction
     * digits) */
    for (int64_t m = (1ll << 53) - 5000; m < (1ll << 53); m++)
        for (int q = 2; q <= 5; q++) g17_check(ldexp((double)m, -q), &n, &bad);
    CHECK(n > 390000);
    CHECK_INT(bad, 0);
}

/* The streamed atomic writer: the file appears whole on commit, not at all on abort. */
static void test_file_out(void) {
    const char *dir = tl_tmpdir();
    CHECK(dir != NULL);
    if (!dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", dir);
    ap_err err;
    ap_file_out *f;
    CHECK(ap_file_out_open(path, &f, &err) == AP_OK);
    CHECK(ap_file_out_write(f, "hello ", 6, &err) == AP_OK);
    CHECK(ap_file_out_write(f, "world", 5, &err) == AP_OK);
    FILE *probe = fopen(path, "r");
    CHECK(probe == NULL); /* not there before the commit */
    if (probe) fclose(probe);
    CHECK(ap_file_out_commit(f, &err) == AP_OK);
    char *text = tl_read(path);
    CHECK(text && strcmp(text, "hello world") == 0);
    free(text);
    CHECK(ap_file_out_open(path, &f, &err) == AP_OK);
    CHECK(ap_file_out_write(f, "partial", 7, &err) == AP_OK);
    ap_file_out_abort(f);
    text = tl_read(path);
    CHECK(text && strcmp(text, "hello world") == 0); /* the old file stays */
    free(text);
    snprintf(path, sizeof path, "%s/no/such/dir/x", dir);
    CHECK(ap_file_out_open(path, &f, &err) == AP_ERR_IO);
    CHECK_CONTAINS(err.msg, path);
}

/* An output set made in directories that did not exist removes them when it moves nothing
 * in (abort, a begin that fails part of the way) and keeps them once its files are in; a
 * directory that existed stays. */
static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_outset_dirs(void) {
    const char *dir = tl_tmpdir();
    CHECK(dir != NULL);
    if (!dir) return;
    char sub[512], top[512], file[600];
    ap_err err;
    ap_outset *s;
    snprintf(top, sizeof top, "%s/new", dir);
    snprintf(sub, sizeof sub, "%s/new/a/b/", dir); /* a trailing '/', as users type it */
    CHECK_INT(ap_outset_begin(sub, NULL, &s, &err), AP_OK);
    CHECK(exists(sub));
    CHECK_INT(ap_outset_add(s, "x.txt", "x", 1, &err), AP_OK);
    ap_outset_abort(s);
    CHECK(!exists(top)); /* every part it made is gone, */
    CHECK(exists(dir));  /* the one that was there stays */
    /* a begin that makes "new" and then fails on a name too long for the filesystem */
    char lng[300];
    memset(lng, 'n', sizeof lng - 1);
    lng[sizeof lng - 1] = '\0';
    snprintf(file, sizeof file, "%s/new/%s", dir, lng);
    CHECK(ap_outset_begin(file, NULL, &s, &err) != AP_OK);
    CHECK(!exists(top));
    /* committed: the directories hold the set and stay */
    CHECK_INT(ap_outset_begin(sub, NULL, &s, &err), AP_OK);
    CHECK_INT(ap_outset_add(s, "x.txt", "x", 1, &err), AP_OK);
    CHECK_INT(ap_outset_commit(s, &err), AP_OK);
    snprintf(file, sizeof file, "%s/new/a/b/x.txt", dir);
    CHECK(exists(file));
    /* a dangling link where a directory goes is refused before anything is made, by the
       check as by the set */
    snprintf(file, sizeof file, "%s/dangling", dir);
    snprintf(sub, sizeof sub, "%s/nowhere", dir);
    CHECK(symlink(sub, file) == 0);
    CHECK_INT(ap_files_check_dir(file, "--out", &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "is a symbolic link that cannot be followed");
    CHECK_INT(ap_outset_begin(file, NULL, &s, &err), AP_ERR_INPUT);
    CHECK(!exists(sub));
    snprintf(sub, sizeof sub, "%s/new/a/b/", dir);
    snprintf(file, sizeof file, "%s/new/a/b/x.txt", dir);
    /* an abort in a directory that exists leaves it, and its files, as they were */
    CHECK_INT(ap_outset_begin(sub, NULL, &s, &err), AP_OK);
    ap_outset_abort(s);
    CHECK(exists(file));
}

/* ---- helper threads (base/threads.c) ---- */

typedef struct {
    _Atomic long sum;
    _Atomic int ran;
    pthread_t tid[16];
    _Atomic int ntid;
    int slow;                /* the task sleeps 20 ms before it counts */
    _Atomic int gated, open; /* gated: the task waits until open is set */
} task_log;

typedef struct {
    task_log *log;
    long value;
} task_arg;

static void *count_task(void *arg) {
    task_arg *a = arg;
    while (a->log->gated && !a->log->open) {
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
    if (a->log->slow) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    a->log->sum += a->value;
    a->log->ran++;
    int i = a->log->ntid++;
    if (i < 16) a->log->tid[i] = pthread_self();
    return NULL;
}

/* Start n counting tasks of values 1..n on log; returns how many started (after waiting). A
 * gated log's tasks wait until every start is done, so none of them can go idle and be
 * claimed again by a later start of the same call. */
static int run_counting(task_log *log, int n) {
    task_arg a[16];
    void *args[16];
    for (int i = 0; i < n; i++) {
        a[i] = (task_arg){log, i + 1};
        args[i] = &a[i];
    }
    ap_tasks t;
    int started = ap_tasks_start(&t, n, count_task, args);
    log->open = 1;
    ap_tasks_wait(&t);
    return started;
}

static int seen_tid(const pthread_t *set, int n, pthread_t t) {
    for (int i = 0; i < n; i++)
        if (pthread_equal(set[i], t)) return 1;
    return 0;
}

/* One of several tasks that share their argument (ap_tasks_start_same). */
static void *count_shared(void *arg) {
    task_log *log = arg;
    log->sum += 10;
    log->ran++;
    return NULL;
}

/* A task that starts two of its own and waits for them. */
static void *nested_task(void *arg) {
    task_log *log = arg;
    task_log inner = {0};
    int started = run_counting(&inner, 2);
    log->sum += started == 2 ? inner.sum : -1000;
    return NULL;
}

static void test_tasks(void) {
    /* every task runs once, on a thread other than the caller's, and wait returns after all */
    task_log log = {0};
    log.slow = 1;
    CHECK_INT(run_counting(&log, 3), 3);
    CHECK_INT(log.sum, 6);
    CHECK_INT(log.ran, 3);
    pthread_t first[3];
    int nfirst = log.ntid < 3 ? log.ntid : 3;
    for (int i = 0; i < nfirst; i++) {
        first[i] = log.tid[i];
        CHECK(!pthread_equal(first[i], pthread_self()));
    }
    /* kept: 50 more rounds of three run on the same three threads (a helper is idle again
       before its caller's wait returns) */
    int reused = 1;
    for (int r = 0; r < 50; r++) {
        task_log l = {0};
        CHECK_INT(run_counting(&l, 3), 3);
        CHECK_INT(l.sum, 6);
        for (int i = 0; i < 3 && i < l.ntid; i++) reused &= seen_tid(first, nfirst, l.tid[i]);
    }
    CHECK(reused);
    /* a task may start tasks of its own */
    task_log outer = {0};
    void *arg = &outer;
    ap_tasks t;
    CHECK_INT(ap_tasks_start(&t, 1, nested_task, &arg), 1);
    ap_tasks_wait(&t);
    CHECK_INT(outer.sum, 3);
    /* no memory for a new helper: the idle ones start their tasks, the rest do not */
    task_log few = {0};
    few.gated = 1; /* a task that returned early would be an idle helper to claim again */
    int idle = 3 + 2; /* the three above and the nested task's two (one may be its own) */
    ap_heap_fail_at(1, 1);
    int started = run_counting(&few, 10);
    ap_heap_fail_at(0, 0);
    CHECK(started >= 3 && started <= idle && started < 10);
    CHECK_INT(few.ran, started);
    CHECK_INT(few.sum, (long)started * (started + 1) / 2);
    /* after fork() the child has none of the parent's helpers: its own are created */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* a start that waited on a helper the child does not have would hang */
        task_log c = {0};
        int ok = run_counting(&c, 2) == 2 && c.sum == 3;
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    if (pid > 0) {
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* four copies of one task with one argument (last: it may add a helper, which the count
       of idle helpers above does not allow for): each runs once */
    task_log same = {0};
    ap_tasks ts;
    CHECK_INT(ap_tasks_start_same(&ts, 4, count_shared, &same), 4);
    ap_tasks_wait(&ts);
    CHECK_INT(same.ran, 4);
    CHECK_INT(same.sum, 40);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_bytes();
    test_bandwidth();
    test_duration_count();
    test_int_real();
    test_format();
    test_json_errors();
    test_json_fields();
    test_json_print();
    test_json_put();
    test_fmt_g17();
    test_file_out();
    test_outset_dirs();
    test_tasks();
    return tl_finish();
}
