/*
 * strbuf.c - the growable text buffer (strbuf.h): doubling growth, one allocation-failure flag.
 */
#include "autoplan/strbuf.h"
#include "autoplan/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the room for need more bytes and the NUL: 1, or 0 after a failure (the slow path apart, so
 * the common appends, with room left, stay a compare and a copy) */
static int grow_slow(ap_strbuf *b, size_t need) {
    if (b->failed) return 0;
    if (b->len + need + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + need + 1) cap *= 2;
    char *nb = ap_realloc(b->buf, cap);
    if (!nb) {
        b->failed = 1;
        return 0;
    }
    b->buf = nb;
    b->cap = cap;
    return 1;
}

#define GROW(b, need) (((b)->len + (need) + 1 <= (b)->cap && !(b)->failed) || grow_slow(b, need))

void ap_strbuf_put(ap_strbuf *b, const char *s, size_t n) {
    if (!GROW(b, n)) return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

char *ap_strbuf_extend(ap_strbuf *b, size_t n) {
    if (!GROW(b, n)) return NULL;
    char *p = b->buf + b->len;
    b->len += n;
    b->buf[b->len] = '\0';
    return p;
}

void ap_strbuf_vprintf(ap_strbuf *b, const char *fmt, va_list ap) {
    if (b->failed) return;
    /* format once into the room left; only text that does not fit is formatted again */
    if (!GROW(b, 64)) return;
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, cp);
    va_end(cp);
    if (n < 0) {
        b->failed = 1;
        b->buf[b->len] = '\0';
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (!GROW(b, (size_t)n)) {
            b->buf[b->len] = '\0';
            return;
        }
        vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
    }
    b->len += (size_t)n;
}

void ap_strbuf_printf(ap_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ap_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void ap_strbuf_free(ap_strbuf *b) {
    ap_free(b->buf);
    memset(b, 0, sizeof *b);
}
