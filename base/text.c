/*
 * text.c - user text made safe for a terminal, a message, a comment line or a literal of a
 * generated file's language (text.h). One UTF-8 decoder (utf8_next) feeds one loop per
 * language; each loop says how it writes an unsafe character.
 *
 * Language rules, from their specifications:
 *   shell    single quotes take every byte but ' literally (POSIX XCU 2.2.2); $'...' takes \xHH
 *            (bash manual "ANSI-C Quoting")
 *   Python   str literal escapes \\ \" \xHH \uXXXX (Python reference 2.4.1)
 *   YAML     double-quoted scalars: \\ \" \xHH \uXXXX \N \L \P; printable set of YAML 1.1 5.1
 *   TOML     basic strings: \\ \" \uXXXX; control characters other than tab must be escaped
 *            (TOML 1.0 "String")
 *   JSON     \" \\ \n \r \t \b \f \u00XX below 0x20 (RFC 8259 section 7)
 *   HTML     & < > " ' as character references (HTML living standard 13.1.4)
 *   Markdown backslash escapes of ASCII punctuation (CommonMark 0.31 section 2.4); a code span
 *            is fenced by more backticks than it contains (section 6.1); '|' is escaped even in
 *            a code span inside a GFM table (GFM 0.29 section 4.10)
 * Not done here: choosing the language (the emitters and renderers call with theirs).
 */
#include "autoplan/text.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Decode one UTF-8 character at s: its length 1-4 and *cp, or 0 when the bytes are not UTF-8
 * (overlong forms, surrogates and values above U+10FFFF included; RFC 3629 section 4). */
static int utf8_next(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int n;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

/* Unsafe on one line (text.h): controls, line separators, bidirectional overrides. */
static int unsafe_cp(uint32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 ||
           cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

#define BAD_CP 0xFFFFFFFFu /* a byte that is not UTF-8 */

/* The next character: *cp (BAD_CP for a stray byte) and its byte length (>= 1). */
static int next_char(const unsigned char *s, uint32_t *cp) {
    int n = utf8_next(s, cp);
    if (n > 0) return n;
    *cp = BAD_CP;
    return 1;
}

static void put_u(ap_strbuf *b, const char *fmt, uint32_t cp) {
    char tmp[16];
    snprintf(tmp, sizeof tmp, fmt, (unsigned)cp);
    ap_strbuf_puts(b, tmp);
}

/* ---- one line ------------------------------------------------------------------------------ */

static void esc_line(ap_strbuf *b, const unsigned char *s) {
    while (*s) {
        uint32_t cp;
        int n = next_char(s, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) ap_strbuf_put(b, "?", 1);
        else ap_strbuf_put(b, (const char *)s, (size_t)n);
        s += n;
    }
}

/* ---- shell ----------------------------------------------------------------------------------- */

static void esc_sh(ap_strbuf *b, const unsigned char *s) {
    int ansi = 0;
    for (const unsigned char *q = s; *q;) {
        uint32_t cp;
        q += next_char(q, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) ansi = 1;
    }
    if (!ansi) {
        ap_strbuf_put(b, "'", 1);
        for (; *s; s++) {
            if (*s == '\'') ap_strbuf_puts(b, "'\\''");
            else ap_strbuf_put(b, (const char *)s, 1);
        }
        ap_strbuf_put(b, "'", 1);
        return;
    }
    /* $'...': every byte of an unsafe character as \xHH, so the word is one line and the
     * same bytes reach the program */
    ap_strbuf_puts(b, "$'");
    while (*s) {
        uint32_t cp;
        int n = next_char(s, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) {
            for (int i = 0; i < n; i++) put_u(b, "\\x%02x", s[i]);
        } else if (*s == '\'' || *s == '\\') {
            ap_strbuf_put(b, "\\", 1);
            ap_strbuf_put(b, (const char *)s, 1);
        } else {
            ap_strbuf_put(b, (const char *)s, (size_t)n);
        }
        s += n;
    }
    ap_strbuf_put(b, "'", 1);
}

/* ---- string literals of Python, YAML, TOML and JSON ------------------------------------------ */

/* The end of the run at s of bytes that all four literals take as they are: printable ASCII
 * but the quote and the backslash. */
static const unsigned char *plain_run(const unsigned char *s) {
    while (*s >= 0x20 && *s < 0x7F && *s != '"' && *s != '\\') s++;
    return s;
}

/* One loop for the four double-quoted literals: `\\` and `\"` everywhere; what else is escaped
 * and how differs (see the file comment). */
static void esc_quoted(ap_strbuf *b, ap_text_lang lang, const unsigned char *s) {
    const unsigned char *e = plain_run(s);
    if (!*e) { /* one run (most strings): copied whole with its quotes */
        char *q = ap_strbuf_extend(b, (size_t)(e - s) + 2);
        if (q) {
            q[0] = '"';
            memcpy(q + 1, s, (size_t)(e - s));
            q[e - s + 1] = '"';
        }
        return;
    }
    ap_strbuf_put(b, "\"", 1);
    while (*s) {
        e = plain_run(s);
        if (e > s) ap_strbuf_put(b, (const char *)s, (size_t)(e - s));
        s = e;
        if (!*s) break;
        uint32_t cp;
        int n = next_char(s, &cp);
        if (cp == BAD_CP) cp = 0xFFFD; /* U+FFFD REPLACEMENT CHARACTER */
        if (cp == '"' || cp == '\\') {
            ap_strbuf_put(b, "\\", 1);
            ap_strbuf_put(b, (const char *)s, 1);
        } else if (lang == AP_TEXT_JSON && cp < 0x20) {
            switch (cp) {
            case '\n': ap_strbuf_puts(b, "\\n"); break;
            case '\r': ap_strbuf_puts(b, "\\r"); break;
            case '\t': ap_strbuf_puts(b, "\\t"); break;
            case '\b': ap_strbuf_puts(b, "\\b"); break;
            case '\f': ap_strbuf_puts(b, "\\f"); break;
            default: put_u(b, "\\u%04x", cp);
            }
        } else if (lang == AP_TEXT_JSON) {
            /* JSON takes any other character as it is (RFC 8259 section 7) */
            if (cp == 0xFFFD && n == 1) ap_strbuf_puts(b, "\\ufffd");
            else ap_strbuf_put(b, (const char *)s, (size_t)n);
        } else if (lang == AP_TEXT_YAML && (cp == 0x85 || cp == 0x2028 || cp == 0x2029)) {
            ap_strbuf_puts(b, cp == 0x85 ? "\\N" : cp == 0x2028 ? "\\L" : "\\P");
        } else if (unsafe_cp(cp) || (cp == 0xFFFD && n == 1) || cp == 0xFFFE || cp == 0xFFFF) {
            if (cp < 0x100 && lang != AP_TEXT_TOML) put_u(b, "\\x%02x", cp);
            else put_u(b, "\\u%04x", cp);
        } else {
            ap_strbuf_put(b, (const char *)s, (size_t)n);
        }
        s += n;
    }
    ap_strbuf_put(b, "\"", 1);
}

/* ---- HTML and Markdown ----------------------------------------------------------------------- */

static void esc_html(ap_strbuf *b, const unsigned char *s) {
    while (*s) {
        uint32_t cp;
        int n = next_char(s, &cp);
        switch (cp) {
        case '&': ap_strbuf_puts(b, "&amp;"); break;
        case '<': ap_strbuf_puts(b, "&lt;"); break;
        case '>': ap_strbuf_puts(b, "&gt;"); break;
        case '"': ap_strbuf_puts(b, "&quot;"); break;
        case '\'': ap_strbuf_puts(b, "&#39;"); break;
        default:
            if (cp == BAD_CP || unsafe_cp(cp)) ap_strbuf_put(b, "?", 1);
            else ap_strbuf_put(b, (const char *)s, (size_t)n);
        }
        s += n;
    }
}

/* Markdown inline text: the punctuation that opens emphasis, code, links, images, raw HTML,
 * entities or a table cell is backslash-escaped; '-', '.', '+', '(' stay readable (they only
 * matter at the start of a line, and the text never starts one). */
static void esc_md(ap_strbuf *b, const unsigned char *s) {
    while (*s) {
        uint32_t cp;
        int n = next_char(s, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) {
            ap_strbuf_put(b, cp == '\n' || cp == '\t' ? " " : "?", 1);
        } else if (cp < 0x80 && strchr("\\`*_[]<>|&~#!$", (int)cp)) {
            ap_strbuf_put(b, "\\", 1);
            ap_strbuf_put(b, (const char *)s, 1);
        } else {
            ap_strbuf_put(b, (const char *)s, (size_t)n);
        }
        s += n;
    }
}

static void esc_md_code(ap_strbuf *b, const unsigned char *s) {
    /* fence: one backtick more than the longest run inside */
    int run = 0, longest = 0;
    for (const unsigned char *q = s; *q; q++) {
        run = *q == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    int fence = longest + 1;
    for (int i = 0; i < fence; i++) ap_strbuf_put(b, "`", 1);
    int pad = longest > 0 || *s == ' '; /* CommonMark strips one space each side */
    if (pad) ap_strbuf_put(b, " ", 1);
    while (*s) {
        uint32_t cp;
        int n = next_char(s, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) ap_strbuf_put(b, "?", 1);
        else if (cp == '|') ap_strbuf_puts(b, "\\|");
        else ap_strbuf_put(b, (const char *)s, (size_t)n);
        s += n;
    }
    if (pad) ap_strbuf_put(b, " ", 1);
    for (int i = 0; i < fence; i++) ap_strbuf_put(b, "`", 1);
}

void ap_text_escape(ap_strbuf *b, ap_text_lang lang, const char *str) {
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    switch (lang) {
    case AP_TEXT_LINE: esc_line(b, s); break;
    case AP_TEXT_SH: esc_sh(b, s); break;
    case AP_TEXT_PY:
    case AP_TEXT_YAML:
    case AP_TEXT_TOML:
    case AP_TEXT_JSON: esc_quoted(b, lang, s); break;
    case AP_TEXT_HTML: esc_html(b, s); break;
    case AP_TEXT_MD: esc_md(b, s); break;
    case AP_TEXT_MD_CODE: esc_md_code(b, s); break;
    }
}

/* ---- fixed buffers --------------------------------------------------------------------------- */

/* Width of s on one line: *bytes (unsafe characters count 1) and characters. */
static void line_size(const unsigned char *s, size_t *bytes, size_t *chars) {
    *bytes = *chars = 0;
    while (*s) {
        uint32_t cp;
        int k = next_char(s, &cp);
        *bytes += cp == BAD_CP || unsafe_cp(cp) ? 1 : (size_t)k;
        (*chars)++;
        s += k;
    }
}

char *ap_text_line(char *dst, size_t n, const char *str, size_t max_chars) {
    if (!dst || n == 0) return dst;
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t bytes, chars;
    line_size(s, &bytes, &chars);
    int cut = bytes >= n || (max_chars && chars > max_chars);
    size_t byte_cap = cut ? (n > 3 ? n - 4 : 0) : n - 1;
    size_t char_cap = cut && max_chars ? (max_chars > 3 ? max_chars - 3 : 0) : (size_t)-1;
    size_t len = 0, nc = 0;
    while (*s && nc < char_cap) {
        uint32_t cp;
        int k = next_char(s, &cp);
        int bad = cp == BAD_CP || unsafe_cp(cp);
        size_t w = bad ? 1 : (size_t)k;
        if (len + w > byte_cap) break;
        if (bad) dst[len] = '?';
        else memcpy(dst + len, s, w);
        len += w;
        nc++;
        s += k;
    }
    if (cut)
        for (int i = 0; i < 3 && len + 1 < n; i++) dst[len++] = '.';
    dst[len] = '\0';
    return dst;
}

int ap_text_copy(char *dst, size_t n, const char *s) {
    if (!dst || n == 0) return 0;
    size_t len = strlen(s ? s : "");
    if (len < n) {
        memcpy(dst, s ? s : "", len + 1);
        return 1;
    }
    size_t cut = n - 1;
    /* back off continuation bytes, then drop a lead byte whose character does not fit */
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    memcpy(dst, s, cut);
    dst[cut] = '\0';
    return 0;
}

int ap_text_is_safe_line(const char *str) {
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    while (*s) {
        uint32_t cp;
        s += next_char(s, &cp);
        if (cp == BAD_CP || unsafe_cp(cp)) return 0;
    }
    return 1;
}

void ap_text_cut_utf8(char *s) {
    size_t len = strlen(s);
    size_t lead = len;
    /* the last lead byte within 3 bytes of the end */
    while (lead > 0 && len - lead < 4 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80) lead--;
    if (lead == 0) return;
    uint32_t cp;
    unsigned char c = (unsigned char)s[lead - 1];
    if (c < 0x80) return;
    if (utf8_next((const unsigned char *)s + lead - 1, &cp) == 0) s[lead - 1] = '\0';
}

int ap_text_utf8_valid(const char *str, size_t n, size_t *bad) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        /* utf8_next reads at most 4 bytes and stops at a byte that is not a continuation, so a
         * sequence cut by the end of the buffer is caught by the length check */
        int k = 0;
        unsigned char tmp[5] = {0, 0, 0, 0, 0};
        for (; k < 4 && i + (size_t)k < n; k++) tmp[k] = s[i + (size_t)k];
        int len = utf8_next(tmp, &cp);
        if (len == 0) {
            if (bad) *bad = i;
            return 0;
        }
        i += (size_t)len;
    }
    return 1;
}
