/*
 * text.h - the one place where text a user supplied (a model name, a path, a label read back
 * from the cache) is made safe for where it goes (base/text.c): a terminal or a one-line
 * message, a comment line of a generated script, or a literal of the file's language.
 *
 * Every generated file embeds user text only through ap_text_escape with that file's language,
 * and the CLI prints user text only through ap_text_line, so a model named
 * "x\ntouch PWNED\n#" stays inside its comment and an ESC sequence never reaches the terminal.
 *
 * What counts as unsafe on one line: C0 controls (tab, newline and NUL included), DEL, C1
 * controls (U+0080-U+009F: NEL ends a YAML 1.1 line, CSI is an escape sequence on most
 * terminals), the line and paragraph separators U+2028/U+2029 (line breaks for YAML 1.1 and
 * JavaScript), the bidirectional overrides U+202A-U+202E and U+2066-U+2069 (text that reads
 * differently from what runs, CVE-2021-42574), and bytes that are not UTF-8 (a Python source
 * or a TOML file with them does not load). Valid UTF-8 otherwise passes through.
 */
#ifndef AP_TEXT_H
#define AP_TEXT_H

#include <stddef.h>

#include "autoplan/strbuf.h"

typedef enum {
    AP_TEXT_LINE = 0, /* one line for a terminal, a message or a '#' comment: unsafe -> '?' */
    AP_TEXT_SH,       /* one shell word: 'single quoted', or $'...' with \xHH when the text has
                         unsafe characters (bash, zsh, ksh) */
    AP_TEXT_PY,       /* a Python str literal in double quotes */
    AP_TEXT_YAML,     /* a YAML double-quoted scalar */
    AP_TEXT_TOML,     /* a TOML basic string */
    AP_TEXT_JSON,     /* a JSON string (RFC 8259); the one JSON string writer (base/json.c) */
    AP_TEXT_HTML,     /* HTML text or a double- or single-quoted attribute value */
    AP_TEXT_MD,       /* Markdown inline text, also inside a table cell */
    AP_TEXT_MD_CODE   /* a Markdown code span with its backticks (table-cell safe) */
} ap_text_lang;

/* Append s (NUL-terminated, may be NULL = "") to b escaped for lang. The literal languages
 * (SH, PY, YAML, TOML, JSON, MD_CODE) append the quotes or backticks too; LINE, HTML and MD
 * append text to place between other text. Bytes that are not UTF-8 become U+FFFD (or '?'
 * where the language has no escape for it). */
void ap_text_escape(ap_strbuf *b, ap_text_lang lang, const char *s);

/* s as one safe line (AP_TEXT_LINE) into dst[n]; at most max_chars characters (0: as many as
 * fit), cut on a character boundary and ended with "..." when longer. Returns dst. */
char *ap_text_line(char *dst, size_t n, const char *s, size_t max_chars);

/* Copy s into dst[n] cutting at a UTF-8 character boundary (never inside a multi-byte
 * character), for fixed-size name fields. Returns 1 when all of s fit. */
int ap_text_copy(char *dst, size_t n, const char *s);

/* Cut an incomplete UTF-8 character off the end of s (what a byte-counted copy such as
 * snprintf leaves when it truncates). */
void ap_text_cut_utf8(char *s);

/* 1 when the n bytes at s are UTF-8 (RFC 3629); otherwise 0 and *bad = the offset of the
 * first byte that is not. */
int ap_text_utf8_valid(const char *s, size_t n, size_t *bad);

/* 1 when s is valid UTF-8 with no unsafe character (what ap_text_line would leave as is). */
int ap_text_is_safe_line(const char *s);

#endif
