/*
 * common.c - error buffer, logging, hashing, clock and atomic file I/O shared by all modules.
 * Nothing here knows about models or plans.
 */
#include "autoplan/common.h"
#include "autoplan/files.h"
#include "autoplan/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Fit text into out[n] keeping its end: a message ends with its reason, and what makes it too
 * long is a path or a value the user gave. The longest word is cut in its middle ("/very/lo...
 * /model.json") until the text fits; only then is the end cut. */
static void fit_message(char *text, char *out, size_t n) {
    size_t len = strlen(text);
    while (len >= n) {
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < len;) {
            size_t j = i;
            while (j < len && text[j] != ' ') j++;
            if (j - i > best_len) { best = i; best_len = j - i; }
            i = j + 1;
        }
        size_t over = len - (n - 1);
        if (best_len < 16 || best_len - 3 < over + 8) break;
        /* keep both ends of the word, drop over + 3 bytes from its middle for "..." */
        size_t drop = over + 3, head = (best_len - drop) / 2;
        size_t at = best + head;
        /* cut on UTF-8 character boundaries */
        while (at > best && ((unsigned char)text[at] & 0xC0) == 0x80) at--;
        size_t end = at + drop;
        while (end < len && ((unsigned char)text[end] & 0xC0) == 0x80) end++;
        memcpy(text + at, "...", 3);
        memmove(text + at + 3, text + end, len - end + 1);
        len = strlen(text);
    }
    /* a message is one line whatever user text it quotes (text.h) */
    ap_text_line(out, n, text, 0);
}

ap_status ap_err_set(ap_err *err, ap_status st, const char *fmt, ...) {
    if (!err) return st;
    char big[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(big, sizeof big, fmt, ap);
    va_end(ap);
    fit_message(big, err->msg, sizeof err->msg);
    return st;
}

void ap_err_prefix(ap_err *err, const char *fmt, ...) {
    if (!err) return;
    char pre[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    char big[sizeof pre + sizeof old + 4];
    snprintf(big, sizeof big, "%s: %s", pre, old);
    fit_message(big, err->msg, sizeof err->msg);
}

const char *ap_status_str(ap_status st) {
    switch (st) {
    case AP_OK: return "ok";
    case AP_ERR_INPUT: return "bad input";
    case AP_ERR_NOMEM: return "out of memory";
    case AP_ERR_INFEASIBLE: return "infeasible";
    case AP_ERR_SOLVER: return "solver failure";
    case AP_ERR_DB: return "database error";
    case AP_ERR_CUDA: return "CUDA error";
    case AP_ERR_IO: return "I/O error";
    case AP_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

int ap_status_exit_code(ap_status st) {
    if (st == AP_OK) return 0;
    if (st == AP_ERR_INPUT || st == AP_ERR_INFEASIBLE) return 2;
    return 1;
}

static int log_level = -1;

static ap_log_level env_level(void) {
    const char *e = getenv("AUTOPLAN_LOG");
    if (!e) return AP_LOG_WARN;
    if (!strcasecmp(e, "debug")) return AP_LOG_DEBUG;
    if (!strcasecmp(e, "info")) return AP_LOG_INFO;
    if (!strcasecmp(e, "error")) return AP_LOG_ERROR;
    if (!strcasecmp(e, "quiet")) return AP_LOG_QUIET;
    return AP_LOG_WARN;
}

void ap_log_set_level(ap_log_level lvl) { log_level = (int)lvl; }

ap_log_level ap_log_get_level(void) {
    if (log_level < 0) log_level = (int)env_level();
    return (ap_log_level)log_level;
}

void ap_log(ap_log_level lvl, const char *fmt, ...) {
    if (lvl < ap_log_get_level() || lvl >= AP_LOG_QUIET) return;
    static const char *names[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "autoplan: %s: ", names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int ap_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63) la = 63;
    if (lb > 63) lb = 63;
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int v = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            cur[j] = v;
        }
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

const char *ap_closest_word(const char *w, const char *const *words, size_t n, int *exact) {
    const char *best = words[0];
    int best_d = 1 << 30;
    *exact = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(w, words[i])) {
            *exact = 1;
            return words[i];
        }
        int d = ap_edit_distance(w, words[i]);
        if (d < best_d) best_d = d, best = words[i];
    }
    return best;
}

uint64_t ap_hash64(const void *data, size_t n, uint64_t seed) {
    /* FNV-1a 64 (Fowler, Noll, Vo), seed mixed into the offset basis */
    uint64_t h = 14695981039346656037ULL ^ seed;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

double ap_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ap_online_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (n > 65536 ? 65536 : (int)n) : 1;
}

struct ap_file_out {
    char *path, *tmp;
    int fd;
    long long written; /* bytes so far (ap_files_write_fd) */
};

ap_status ap_file_out_open(const char *path, ap_file_out **out, ap_err *err) {
    *out = NULL;
    /* a FIFO, symlink or device at path is refused, not replaced; temporary files of killed
     * runs beside it are removed (files.h) */
    ap_status cst = ap_files_check_target(path, err);
    if (cst != AP_OK) return cst;
    ap_files_remove_stale(path);
    size_t n = strlen(path);
    ap_file_out *f = ap_calloc(1, sizeof *f);
    char *tmp = ap_malloc(n + 32), *dup = ap_malloc(n + 1);
    if (!f || !tmp || !dup) {
        ap_free(f);
        ap_free(tmp);
        ap_free(dup);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(dup, path, n + 1);
    snprintf(tmp, n + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ap_status st = ap_err_set(err, AP_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        ap_free(f);
        ap_free(tmp);
        ap_free(dup);
        return st;
    }
    f->path = dup;
    f->tmp = tmp;
    f->fd = fd;
    *out = f;
    return AP_OK;
}

void ap_file_out_abort(ap_file_out *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp);
    ap_free(f->tmp);
    ap_free(f->path);
    ap_free(f);
}

ap_status ap_file_out_write(ap_file_out *f, const void *data, size_t len, ap_err *err) {
    int e = ap_files_write_fd(f->fd, data, len, &f->written);
    if (e) return ap_err_set(err, AP_ERR_IO, "%s: write failed: %s", f->path, strerror(e));
    return AP_OK;
}

ap_status ap_file_out_commit(ap_file_out *f, ap_err *err) {
    ap_status st = AP_OK;
    int fd = f->fd;
    f->fd = -1;
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        st = ap_err_set(err, AP_ERR_IO, "%s: write failed: %s", f->path, strerror(e));
    } else if (close(fd) != 0) {
        st = ap_err_set(err, AP_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    } else if (rename(f->tmp, f->path) != 0) {
        st = ap_err_set(err, AP_ERR_IO, "%s: cannot rename into place: %s", f->path,
                        strerror(errno));
    }
    if (st != AP_OK) {
        ap_file_out_abort(f);
        return st;
    }
    ap_free(f->tmp);
    ap_free(f->path);
    ap_free(f);
    return AP_OK;
}

ap_status ap_write_file_atomic(const char *path, const void *data, size_t len, ap_err *err) {
    ap_file_out *f;
    ap_status st = ap_file_out_open(path, &f, err);
    if (st != AP_OK) return st;
    if ((st = ap_file_out_write(f, data, len, err)) != AP_OK) {
        ap_file_out_abort(f);
        return st;
    }
    return ap_file_out_commit(f, err);
}

ap_status ap_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len,
                       ap_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return ap_err_set(err, AP_ERR_INPUT, "%s: is a directory", path);
    /* a regular file says its size: one too large is refused unread */
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)max_bytes)
        return ap_err_set(err, AP_ERR_INPUT, "%s: file too large (over %zu bytes)", path,
                          max_bytes);
    FILE *f = fopen(path, "rb");
    if (!f) return ap_err_set(err, AP_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 65536, n = 0;
    char *buf = ap_malloc(cap);
    if (!buf) {
        fclose(f);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
    }
    /* a stream (a pipe, /dev/zero) is read until it passes max_bytes, the buffer growing to at
       most one chunk beyond it */
    const size_t lim = max_bytes + 65536 + 1;
    for (;;) {
        if (n > max_bytes) {
            ap_free(buf);
            fclose(f);
            return ap_err_set(err, AP_ERR_INPUT, "%s: file too large (over %zu bytes)", path,
                              max_bytes);
        }
        if (n + 65536 + 1 > cap) {
            cap = cap * 2 < lim ? cap * 2 : lim;
            char *nb = ap_realloc(buf, cap);
            if (!nb) {
                ap_free(buf);
                fclose(f);
                return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        ap_free(buf);
        return ap_err_set(err, AP_ERR_INPUT, "%s: read error", path);
    }
    if (n > max_bytes) {
        ap_free(buf);
        return ap_err_set(err, AP_ERR_INPUT, "%s: file too large (over %zu bytes)", path,
                          max_bytes);
    }
    buf[n] = '\0';
    *out = buf;
    if (out_len) *out_len = n;
    return AP_OK;
}
