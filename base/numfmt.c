/*
 * numfmt.c - a double formatted as printf's "%.17g" gives it, byte for byte, without printf's
 * multi-precision path (glibc's __printf_fp spends most of the time of writing plans.csv).
 *
 * The 17 significant digits D of |x| = D x 10^(X - 16), rounded half to even (printf's rounding
 * in the default mode), come first, for |x| in 1e-11..1e17 where 128-bit integers are
 * available, exactly from m x 5^(16 - X) (exact_digits); else from one long-double operation:
 * y = |x| x 10^(16 - X) with an exact power of ten (|16 - X| <= 27: 5^27 < 2^64), one
 * rounding of relative error 2^-64, so y (< 2^57) is within 2^-7 of the truth and rounding it
 * is certain unless its fraction is near one half; then (about 2% of those values, and outside
 * 1e-11..1e43) exactly: a finite double is
 * m x 2^e (m < 2^53), whose decimal digits are those of the integer m << e (e >= 0) or of
 * m x 5^-e with the point -e places from the right (m / 2^k = m 5^k / 10^k), computed in a small
 * multi-precision integer (32-bit limbs, 64-bit products: standard C). The digits are laid out
 * by %g's rule: exponent form when the decimal exponent is below -4 or at least 17, trailing
 * zeros of the fraction removed. Zero, infinities, NaN and exponents outside the limbs' range
 * (below about 1e-30 or above 1e135) go to snprintf. tests/test_common.c compares it with
 * snprintf over millions of values.
 */
#include "autoplan/common.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define LIMBS 16 /* 512 bits: m x 5^150 and m << 400 fit */

typedef struct {
    uint32_t w[LIMBS];
    int n; /* limbs in use; w[n-1] != 0 unless n == 0 */
} big;

static void big_mul(big *b, uint32_t k) {
    uint64_t carry = 0;
    for (int i = 0; i < b->n; i++) {
        carry += (uint64_t)b->w[i] * k;
        b->w[i] = (uint32_t)carry;
        carry >>= 32;
    }
    if (carry) b->w[b->n++] = (uint32_t)carry;
}

static void big_shl(big *b, int s) {
    int words = s / 32, bits = s % 32;
    if (bits) {
        uint32_t carry = 0;
        for (int i = 0; i < b->n; i++) {
            uint32_t x = b->w[i];
            b->w[i] = (x << bits) | carry;
            carry = x >> (32 - bits);
        }
        if (carry) b->w[b->n++] = carry;
    }
    if (words) {
        memmove(b->w + words, b->w, (size_t)b->n * sizeof *b->w);
        memset(b->w, 0, (size_t)words * sizeof *b->w);
        b->n += words;
    }
}

/* b /= d, returns the remainder (d < 2^32) */
static uint32_t big_div(big *b, uint32_t d) {
    uint64_t rem = 0;
    for (int i = b->n - 1; i >= 0; i--) {
        uint64_t cur = (rem << 32) | b->w[i];
        b->w[i] = (uint32_t)(cur / d);
        rem = cur % d;
    }
    while (b->n > 0 && b->w[b->n - 1] == 0) b->n--;
    return (uint32_t)rem;
}

/* The decimal digits of b (consumed), most significant first, into d; their count. */
static int big_digits(big *b, char *d) {
    char rev[192];
    int n = 0;
    while (b->n > 0) {
        uint32_t chunk = big_div(b, 1000000000u);
        for (int i = 0; i < 9; i++) {
            rev[n++] = (char)('0' + chunk % 10);
            chunk /= 10;
        }
    }
    while (n > 1 && rev[n - 1] == '0') n--;
    for (int i = 0; i < n; i++) d[i] = rev[n - 1 - i];
    return n;
}

/* "00" .. "99": the digits are written two at a time */
static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930"
                            "31323334353637383940414243444546474849505152535455565758596061"
                            "62636465666768697071727374757677787980818283848586878889909192"
                            "93949596979899";

int ap_fmt_i64(int64_t v, char *out) {
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    char t[24], *end = t + sizeof t, *p = end;
    while (u >= 100) {
        memcpy(p -= 2, pairs + 2 * (u % 100), 2);
        u /= 100;
    }
    if (u >= 10) memcpy(p -= 2, pairs + 2 * u, 2);
    else *--p = (char)('0' + u);
    if (v < 0) *--p = '-';
    int n = (int)(end - p);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    return n;
}

/* The 17 digits of D (10^16 <= D < 10^17) into d[0..17), two at a time. */
static void digits17(uint64_t D, char *d) {
    uint32_t hi = (uint32_t)(D / 1000000000u), lo = (uint32_t)(D % 1000000000u);
    d[16] = (char)('0' + lo % 10);
    lo /= 10;
    for (int i = 14; i >= 8; i -= 2) {
        memcpy(d + i, pairs + 2 * (lo % 100), 2);
        lo /= 100;
    }
    for (int i = 6; i >= 0; i -= 2) {
        memcpy(d + i, pairs + 2 * (hi % 100), 2);
        hi /= 100;
    }
}

#ifdef __SIZEOF_INT128__
/* The 17 digits of |x| and the decimal exponent of the first, exactly, in 128-bit integers,
 * where |x| = m 2^q lies in 1e-11..1e17 (the values the estimates hold, times and fractions):
 * with s = 16 - X in 0..27, |x| 10^s = m 5^s 2^(q + s), and m 5^s < 2^53 5^27 < 2^116 is
 * exact; shifted right by -(q + s) it gives floor(y) and the bits shifted out give the
 * rounding (half to even) with nothing approximate. 0 outside that range. Twice as fast as
 * the long-double path (which stays for the rest): 62 -> 29 ns per number of plans.csv's
 * magnitudes. */
static int exact_digits(double x, char *d, int *X_out) {
    static const uint64_t p5[28] = {
        1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull,
        1953125ull, 9765625ull, 48828125ull, 244140625ull, 1220703125ull, 6103515625ull,
        30517578125ull, 152587890625ull, 762939453125ull, 3814697265625ull,
        19073486328125ull, 95367431640625ull, 476837158203125ull, 2384185791015625ull,
        11920928955078125ull, 59604644775390625ull, 298023223876953125ull,
        1490116119384765625ull, 7450580596923828125ull};
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int be = (int)(bits >> 52 & 0x7FF);
    if (be == 0 || be == 0x7FF) return 0;
    uint64_t m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
    int q = be - 1075, e2 = be - 1022;
    /* floor(log10 |x|) is X or X + 1 (78913 / 2^18 ~ log10 2) */
    int X = ((e2 - 1) * 78913) >> 18;
    for (int tries = 0; tries < 2; tries++) {
        int s = 16 - X;
        if (s < 0 || s > 27) return 0;
        unsigned __int128 P = (unsigned __int128)m * p5[s];
        int k = -(q + s); /* y = P / 2^k */
        /* k <= 0: y is an integer (|x| near 1e15-1e17 with few fraction bits), left to the
         * long-double path; k >= 128 cannot happen for |x| >= 1e-11 */
        if (k <= 0 || k >= 128) return 0;
        unsigned __int128 Dq = P >> k;
        if (Dq >= 100000000000000000ull) { /* y >= 10^17: one digit more */
            X++;
            continue;
        }
        uint64_t D = (uint64_t)Dq;
        unsigned __int128 rem = P - (Dq << k), half = (unsigned __int128)1 << (k - 1);
        if (rem > half || (rem == half && (D & 1))) D++;
        if (D == 100000000000000000ull) { /* rounded up to 10^17 */
            D = 10000000000000000ull;
            X++;
        }
        if (D < 10000000000000000ull) return 0; /* X was not floor(log10 |x|) - 1 or it */
        digits17(D, d);
        *X_out = X;
        return 1;
    }
    return 0;
}
#endif

/* The 17 digits of |x| and the decimal exponent of the first by one long-double operation; 0
 * when the rounding is not certain (or long double is too short, or |x| out of range). */
static int fast_digits(double x, char *d, int *X_out) {
#if LDBL_MANT_DIG >= 64
    static const long double p10[28] = {
        1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
        1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
        1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    long double ax = fabs(x);
    /* frexp's exponent from the bits (x is finite and nonzero; a subnormal, exponent field
     * 0, is out of range below anyway) */
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e2 = (int)(bits >> 52 & 0x7FF) - 1022;
    if ((bits >> 52 & 0x7FF) == 0) return 0;
    /* floor(log10 |x|) is floor((e2 - 1) log10 2) or one more (78913 / 2^18 ~ log10 2) */
    int X = ((e2 - 1) * 78913) >> 18;
    for (int tries = 0; tries < 3; tries++) {
        int s = 16 - X;
        if (s > 27 || s < -27) return 0;
        long double y = s >= 0 ? ax * p10[s] : ax / p10[-s];
        if (y < 1e16L - 0.5L) { X--; continue; }
        if (y >= 1e17L - 0.5L) { X++; continue; }
        /* floor(y), y < 2^63: rounded in the current (nearest) mode, then one down if that
         * went up (exact: D and y both fit the 64-bit mantissa). A truncating cast would
         * switch the x87 rounding mode twice per number (fldcw), which stalls the pipeline:
         * a third of compare's plans.csv time */
        uint64_t D = (uint64_t)llrintl(y);
        if ((long double)D > y) D--;
        long double fr = y - (long double)D;
        if (fabsl(fr - 0.5L) < 0.01L) return 0;
        D += fr > 0.5L;
        digits17(D, d);
        *X_out = X;
        return 1;
    }
#else
    (void)x;
    (void)d;
    (void)X_out;
#endif
    return 0;
}

/* %g's layout of n digits d (no trailing zeros but the first) with decimal exponent X; returns
 * the end of what it wrote (its terminating zero). */
static char *layout(double x, const char *d, int n, int X, char *out) {
    char *o = out;
    if (x < 0) *o++ = '-';
    if (X < -4 || X >= 17) {
        *o++ = d[0];
        if (n > 1) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)(n - 1));
            o += n - 1;
        }
        int ax = X < 0 ? -X : X; /* |X| <= 324 */
        *o++ = 'e';
        *o++ = X < 0 ? '-' : '+';
        if (ax >= 100) *o++ = (char)('0' + ax / 100);
        *o++ = (char)('0' + ax / 10 % 10);
        *o++ = (char)('0' + ax % 10);
        *o = '\0';
        return o;
    }
    if (X < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -X - 1; i++) *o++ = '0';
        memcpy(o, d, (size_t)n);
        o += n;
    } else {
        for (int i = 0; i <= X; i++) *o++ = i < n ? d[i] : '0';
        if (n > X + 1) {
            *o++ = '.';
            memcpy(o, d + X + 1, (size_t)(n - X - 1));
            o += n - X - 1;
        }
    }
    *o = '\0';
    return o;
}

/* ap_fmt_g17's work: the end of what it wrote (its terminating zero). */
static char *g17_end(double x, char *out) {
    if (x == 0) { /* printf's "0" and "-0" without its slow path (CSV columns are often zero) */
        memcpy(out, signbit(x) ? "-0" : "0", signbit(x) ? 3 : 2);
        return out + (signbit(x) ? 2 : 1);
    }
    if (!isfinite(x)) return out + snprintf(out, 32, "%.17g", x);
    if (fabs(x) < 1e17 && (double)(int64_t)x == x) {
        /* an integer of at most 17 digits: %.17g writes it exactly, without a point */
        return out + ap_fmt_i64((int64_t)x, out);
    }
    char d[192];
    int X, n = 17;
#ifdef __SIZEOF_INT128__
    if (exact_digits(x, d, &X)) {
        while (n > 1 && d[n - 1] == '0') n--;
        return layout(x, d, n, X, out);
    }
#endif
    if (fast_digits(x, d, &X)) {
        while (n > 1 && d[n - 1] == '0') n--;
        return layout(x, d, n, X, out);
    }
    int e2;
    double fr = frexp(fabs(x), &e2);
    uint64_t m = (uint64_t)ldexp(fr, 53);
    int e = e2 - 53;
    if (e > 400 || e < -150) return out + snprintf(out, 32, "%.17g", x);
    big b = {{(uint32_t)m, (uint32_t)(m >> 32)}, m >> 32 ? 2 : 1};
    if (e >= 0) {
        big_shl(&b, e);
    } else {
        int k = -e;
        for (; k >= 13; k -= 13) big_mul(&b, 1220703125u); /* 5^13 */
        for (; k > 0; k--) big_mul(&b, 5);
    }
    n = big_digits(&b, d);
    X = n + (e < 0 ? e : 0) - 1; /* decimal exponent of the first digit */
    if (n > 17) {
        /* round half to even at the 17th digit */
        int up = d[17] > '5';
        if (d[17] == '5') {
            int rest = 0;
            for (int i = 18; i < n; i++) rest |= d[i] != '0';
            up = rest || ((d[16] - '0') & 1);
        }
        n = 17;
        for (int i = 16; up && i >= 0; i--) {
            if (d[i] == '9') {
                d[i] = '0';
            } else {
                d[i]++;
                up = 0;
            }
        }
        if (up) { /* 99..9 rounded to 100..0 */
            d[0] = '1';
            X++;
        }
    }
    while (n > 1 && d[n - 1] == '0') n--;
    return layout(x, d, n, X, out);
}

char *ap_fmt_g17(double x, char *out) {
    g17_end(x, out);
    return out;
}

int ap_fmt_g17_len(double x, char *out) { return (int)(g17_end(x, out) - out); }
