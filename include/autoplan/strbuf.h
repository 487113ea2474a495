/*
 * strbuf.h - a growable text buffer, the one used wherever autoplan composes text (JSON, configs,
 * reports, CSV). An allocation failure sets `failed` and turns later appends into no-ops, so
 * callers check once at the end. The buffer owns `buf` (NUL-terminated whenever len > 0); free
 * it with ap_strbuf_free or take it (set the struct to zero afterwards).
 */
#ifndef AP_STRBUF_H
#define AP_STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

typedef struct ap_strbuf {
    char *buf;
    size_t len, cap;
    int failed; /* an allocation failed; the text is incomplete */
} ap_strbuf;

void ap_strbuf_put(ap_strbuf *b, const char *s, size_t n);
/* n more bytes at the end, for the caller to write: their address, NULL after a failure */
char *ap_strbuf_extend(ap_strbuf *b, size_t n);
/* inline: the length of a literal is known where it is written */
static inline void ap_strbuf_puts(ap_strbuf *b, const char *s) { ap_strbuf_put(b, s, strlen(s)); }
void ap_strbuf_vprintf(ap_strbuf *b, const char *fmt, va_list ap);
void ap_strbuf_printf(ap_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ap_strbuf_free(ap_strbuf *b);

#endif
