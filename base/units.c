/*
 * units.c - parsing and printing of quantities with units. Every parser refuses a bare number
 * where a unit is needed, with a hint showing the accepted forms, so "--network-bw 400" can
 * never silently mean bits or bytes.
 */
#include "autoplan/common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Split "12.5GiB" into 12.5 and "GiB". Leading/trailing spaces allowed, one space between. */
static int split_number(const char *text, double *num, const char **unit) {
    if (!text) return 0;
    while (isspace((unsigned char)*text)) text++;
    if (!*text) return 0;
    /* refuse hex, inf, nan: only digits, one dot, optional exponent */
    const char *p = text;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1]))) return 0;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno == ERANGE || !isfinite(v)) return 0;
    /* strtod accepts hex floats "0x1p3": refuse them */
    for (const char *q = text; q < end; q++)
        if (*q == 'x' || *q == 'X') return 0;
    while (isspace((unsigned char)*end)) end++;
    *num = v;
    *unit = end;
    return 1;
}

static int unit_eq(const char *u, size_t n, const char *want) {
    return strlen(want) == n && strncmp(u, want, n) == 0;
}

/* length of unit text without trailing spaces */
static size_t unit_len(const char *u) {
    size_t n = strlen(u);
    while (n > 0 && isspace((unsigned char)u[n - 1])) n--;
    return n;
}

static double size_mult(const char *u, size_t n, int *ok) {
    static const struct { const char *s; double m; } t[] = {
        {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
        {"KiB", AP_KIB}, {"MiB", AP_MIB}, {"GiB", AP_GIB},
        {"TiB", 1099511627776.0}, {"PiB", 1125899906842624.0},
        {"kB", 1e3}, {"K", AP_KIB}, {"M", AP_MIB}, {"G", AP_GIB}, {"T", 1099511627776.0}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (unit_eq(u, n, t[i].s)) { *ok = 1; return t[i].m; }
    *ok = 0;
    return 0;
}

ap_status ap_parse_bytes(const char *text, const char *what, double *out_bytes, ap_err *err) {
    double v;
    const char *u;
    if (!split_number(text, &v, &u))
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a size (e.g. 80GiB, 512GB)", what,
                          text ? text : "");
    size_t n = unit_len(u);
    if (n == 0)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: '%s' has no unit; write e.g. %gGiB or %gGB", what, text, v, v);
    int ok;
    double m = size_mult(u, n, &ok);
    if (!ok)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: unknown size unit '%.*s' (use B, KB, MB, GB, TB, KiB, MiB, GiB, "
                          "TiB)", what, (int)n, u);
    if (v < 0) return ap_err_set(err, AP_ERR_INPUT, "%s: size must not be negative", what);
    double b = v * m;
    if (b > 1e18) return ap_err_set(err, AP_ERR_INPUT, "%s: size '%s' is absurdly large", what, text);
    *out_bytes = b;
    return AP_OK;
}

ap_status ap_parse_bandwidth(const char *text, const char *what, double *out, ap_err *err) {
    double v;
    const char *u;
    if (!split_number(text, &v, &u))
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: '%s' is not a bandwidth (e.g. 400Gb/s or 50GB/s)", what,
                          text ? text : "");
    size_t n = unit_len(u);
    if (n == 0)
        return ap_err_set(err, AP_ERR_INPUT,
                          "%s: '%s' has no unit; write %gGb/s (bits) or %gGB/s (bytes)", what,
                          text, v, v);
    /* unit = <prefix><b|B>/s or <prefix>bps */
    char buf[16];
    if (n >= sizeof buf) goto bad;
    memcpy(buf, u, n);
    buf[n] = '\0';
    size_t k = n;
    if (k >= 2 && strcmp(buf + k - 2, "/s") == 0) {
        k -= 2;
    } else if (k >= 3 && strcmp(buf + k - 3, "bps") == 0) {
        k -= 2; /* keep the 'b' */
        buf[k] = '\0';
    } else {
        goto bad;
    }
    buf[k] = '\0';
    if (k == 0) goto bad;
    char bit = buf[k - 1];
    if (bit != 'b' && bit != 'B') goto bad;
    buf[k - 1] = '\0';
    double m;
    const char *pre = buf;
    if (!*pre) m = 1;
    else if (!strcmp(pre, "K") || !strcmp(pre, "k")) m = 1e3;
    else if (!strcmp(pre, "M")) m = 1e6;
    else if (!strcmp(pre, "G")) m = 1e9;
    else if (!strcmp(pre, "T")) m = 1e12;
    else if (!strcmp(pre, "Ki")) m = 1024.0;
    else if (!strcmp(pre, "Mi")) m = AP_MIB;
    else if (!strcmp(pre, "Gi")) m = AP_GIB;
    else if (!strcmp(pre, "Ti")) m = 1099511627776.0;
    else goto bad;
    if (v <= 0) return ap_err_set(err, AP_ERR_INPUT, "%s: bandwidth must be positive", what);
    double bps = v * m / (bit == 'b' ? 8.0 : 1.0);
    if (bps > 1e15)
        return ap_err_set(err, AP_ERR_INPUT, "%s: bandwidth '%s' is absurdly large", what, text);
    *out = bps;
    return AP_OK;
bad:
    return ap_err_set(err, AP_ERR_INPUT,
                      "%s: unknown bandwidth unit '%.*s' (use Gb/s for bits or GB/s for bytes "
                      "per second, also Mb/s, Tb/s, MB/s, GiB/s)", what, (int)n, u);
}

ap_status ap_parse_duration(const char *text, const char *what, double *out_s, ap_err *err) {
    double v;
    const char *u;
    if (!split_number(text, &v, &u))
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a duration (e.g. 30d, 12h)", what,
                          text ? text : "");
    size_t n = unit_len(u);
    if (n == 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' has no unit; write e.g. %gd or %gh", what,
                          text, v, v);
    double m;
    if (unit_eq(u, n, "s")) m = 1;
    else if (unit_eq(u, n, "m") || unit_eq(u, n, "min")) m = 60;
    else if (unit_eq(u, n, "h")) m = 3600;
    else if (unit_eq(u, n, "d")) m = 86400;
    else if (unit_eq(u, n, "w")) m = 7 * 86400.0;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: unknown duration unit '%.*s' (use s, m, h, d, w)",
                          what, (int)n, u);
    if (v <= 0) return ap_err_set(err, AP_ERR_INPUT, "%s: duration must be positive", what);
    *out_s = v * m;
    return AP_OK;
}

ap_status ap_parse_count(const char *text, const char *what, double *out, ap_err *err) {
    double v;
    const char *u;
    if (!split_number(text, &v, &u))
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a number (e.g. 2T, 300B, 4M)",
                          what, text ? text : "");
    size_t n = unit_len(u);
    double m = 1;
    if (n == 0) m = 1;
    else if (unit_eq(u, n, "k") || unit_eq(u, n, "K")) m = 1e3;
    else if (unit_eq(u, n, "M")) m = 1e6;
    else if (unit_eq(u, n, "B") || unit_eq(u, n, "G")) m = 1e9;
    else if (unit_eq(u, n, "T")) m = 1e12;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: unknown suffix '%.*s' (use k, M, B, T)", what,
                          (int)n, u);
    if (v <= 0) return ap_err_set(err, AP_ERR_INPUT, "%s: must be positive", what);
    if (v * m > 1e21) return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is absurdly large", what, text);
    *out = v * m;
    return AP_OK;
}

ap_status ap_parse_int(const char *text, const char *what, int64_t lo, int64_t hi, int64_t *out,
                       ap_err *err) {
    if (!text || !*text)
        return ap_err_set(err, AP_ERR_INPUT, "%s: expected an integer, got nothing", what);
    const char *p = text;
    if (*p == '-' || *p == '+') p++;
    if (!isdigit((unsigned char)*p))
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not an integer", what, text);
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0')
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not an integer", what, text);
    if (errno == ERANGE || v < lo || v > hi)
        return ap_err_set(err, AP_ERR_INPUT, "%s: %s is out of range [%lld, %lld]", what, text,
                          (long long)lo, (long long)hi);
    *out = v;
    return AP_OK;
}

ap_status ap_parse_real(const char *text, const char *what, double lo, double hi, double *out,
                        ap_err *err) {
    double v;
    const char *u;
    if (!split_number(text, &v, &u) || unit_len(u) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not a number", what, text ? text : "");
    if (v < lo || v > hi)
        return ap_err_set(err, AP_ERR_INPUT, "%s: %s is out of range [%g, %g]", what, text, lo, hi);
    *out = v;
    return AP_OK;
}

char *ap_fmt_bytes(double bytes, char *buf, size_t n) {
    double a = fabs(bytes);
    if (a >= 1099511627776.0) snprintf(buf, n, "%.2f TiB", bytes / 1099511627776.0);
    else if (a >= AP_GIB) snprintf(buf, n, "%.2f GiB", bytes / AP_GIB);
    else if (a >= AP_MIB) snprintf(buf, n, "%.1f MiB", bytes / AP_MIB);
    else if (a >= 1024.0) snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
    else snprintf(buf, n, "%.0f B", bytes);
    return buf;
}

char *ap_fmt_seconds(double s, char *buf, size_t n) {
    double a = fabs(s);
    if (a >= 86400.0 * 1e6 || !isfinite(s)) snprintf(buf, n, "%.3g days", s / 86400.0);
    else if (a >= 86400.0 * 2) snprintf(buf, n, "%.1f days", s / 86400.0);
    else if (a >= 3600.0 * 2) snprintf(buf, n, "%.1f h", s / 3600.0);
    else if (a >= 1.0) snprintf(buf, n, "%.3f s", s);
    else if (a >= 1e-3) snprintf(buf, n, "%.1f ms", s * 1e3);
    else snprintf(buf, n, "%.1f us", s * 1e6);
    return buf;
}

char *ap_fmt_bandwidth(double bps, char *buf, size_t n) {
    double bits = bps * 8.0;
    if (bits >= 1e12) snprintf(buf, n, "%.1f Tb/s", bits / 1e12);
    else if (bits >= 1e9) snprintf(buf, n, "%.0f Gb/s", bits / 1e9);
    else snprintf(buf, n, "%.0f Mb/s", bits / 1e6);
    return buf;
}
