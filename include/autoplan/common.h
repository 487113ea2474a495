/*
 * common.h - status codes, the caller-owned error buffer, logging and unit parsing shared by
 * every module of autoplan.
 *
 * Library functions return ap_status and write a one-line human explanation into an ap_err the
 * caller owns ("model.json: field 'layers': must be a positive integer, got -3"). Only the CLI
 * (cli/main.c and the cmd_*.c files) prints results or exits.
 *
 * Units: sizes are bytes (double or int64_t), bandwidths bytes per second, times seconds.
 */
#ifndef AP_COMMON_H
#define AP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define AP_VERSION "0.1.0"

typedef enum {
    AP_OK = 0,
    AP_ERR_INPUT,      /* bad user input: file, field or flag; CLI exit 2 */
    AP_ERR_NOMEM,      /* allocation failed */
    AP_ERR_INFEASIBLE, /* a plan the trainer cannot run, or no plan at all */
    AP_ERR_SOLVER,     /* GLPK failed or timed out without a feasible answer */
    AP_ERR_DB,         /* SQLite failure */
    AP_ERR_CUDA,       /* CUDA/CUPTI failure */
    AP_ERR_IO,         /* a file could not be written or read (not the user's fault) */
    AP_ERR_INTERNAL
} ap_status;

/* Error buffer owned by the caller; functions fill msg with one line, no trailing newline. */
typedef struct ap_err {
    char msg[512];
} ap_err;

/* printf-style; always returns `st` so callers can `return ap_err_set(err, AP_ERR_INPUT, ...)`.
 * err may be NULL. */
ap_status ap_err_set(ap_err *err, ap_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix the existing message: "<prefix>: <old msg>". */
void ap_err_prefix(ap_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

const char *ap_status_str(ap_status st);

/* CLI exit code for a status: 0 ok, 2 input/infeasible, 1 otherwise. */
int ap_status_exit_code(ap_status st);

typedef enum { AP_LOG_DEBUG = 0, AP_LOG_INFO, AP_LOG_WARN, AP_LOG_ERROR, AP_LOG_QUIET } ap_log_level;

/* Default level AP_LOG_WARN; AUTOPLAN_LOG=debug|info|warn|error overrides it. Writes to stderr. */
void ap_log_set_level(ap_log_level lvl);
ap_log_level ap_log_get_level(void);
void ap_log(ap_log_level lvl, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Binary size units in bytes (IEC 80000-13: 1 GiB = 2^30 bytes). */
#define AP_KIB 1024.0
#define AP_MIB 1048576.0
#define AP_GIB 1073741824.0

/* ---- units (base/units.c) ----------------------------------------------------------
 * Every parser takes the text a user typed and refuses bare numbers with a hint.
 *   sizes:      "80GiB" "512GB" "1.5TiB" "2048MiB" "4096B" (SI = 1000^n, IEC = 1024^n)
 *   bandwidth:  "400Gb/s" (bits) "50GB/s" (bytes) "25GiB/s" "100Mb/s" -> bytes per second
 *   duration:   "30d" "12h" "90m" "45s" "2w" -> seconds
 *   count:      "2T" "300B" "4M" "1.5k" or a plain integer -> double (tokens, etc.)
 * Return AP_ERR_INPUT with a message naming `what` (flag or field) on failure. */
ap_status ap_parse_bytes(const char *text, const char *what, double *out_bytes, ap_err *err);
ap_status ap_parse_bandwidth(const char *text, const char *what, double *out_bytes_per_s,
                             ap_err *err);
ap_status ap_parse_duration(const char *text, const char *what, double *out_s, ap_err *err);
ap_status ap_parse_count(const char *text, const char *what, double *out, ap_err *err);
/* Plain integer in [lo, hi]. */
ap_status ap_parse_int(const char *text, const char *what, int64_t lo, int64_t hi, int64_t *out,
                       ap_err *err);
/* Plain real in [lo, hi] (e.g. a fraction in [0,1]). */
ap_status ap_parse_real(const char *text, const char *what, double lo, double hi, double *out,
                        ap_err *err);

/* Human formatting into buf (returns buf): "12.34 GiB", "1.23 s" / "456 ms", "400 Gb/s". */
char *ap_fmt_bytes(double bytes, char *buf, size_t n);
char *ap_fmt_seconds(double s, char *buf, size_t n);
char *ap_fmt_bandwidth(double bytes_per_s, char *buf, size_t n);

/* x as printf("%.17g") writes it, byte for byte, into out (at least 32 bytes; returned), an
 * order of magnitude faster (base/numfmt.c): for the CSV and JSON writers. */
char *ap_fmt_g17(double x, char *out);
/* The same, returning the length written (without the terminating zero). */
int ap_fmt_g17_len(double x, char *out);
/* v in decimal, as printf("%lld") writes it, into out (at least 21 bytes); returns the length */
int ap_fmt_i64(int64_t v, char *out);

/* Levenshtein edit distance between two short names (each read up to 63 characters), for the
 * "did you mean" hints of flags, fields and GPU names. */
int ap_edit_distance(const char *a, const char *b);
/* The word of words[0..n) nearest to w by ap_edit_distance (the first on a tie); *exact set
 * when w is one of them. n >= 1. */
const char *ap_closest_word(const char *w, const char *const *words, size_t n, int *exact);

/* 64-bit FNV-1a, used for fingerprints and cache keys. */
uint64_t ap_hash64(const void *data, size_t n, uint64_t seed);
/* The last steps of a 64-bit mix (SplitMix64's finaliser, shifted): spreads a sum or xor of a
 * few small fields, each times an odd constant, over the low bits a power-of-two memo indexes
 * by. */
static inline uint64_t ap_hash_mix(uint64_t h) {
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

/* Monotonic wall clock in seconds. */
double ap_now_s(void);
/* Online CPU cores (sysconf), at least 1. */
int ap_online_cores(void);

/* Write `len` bytes to `path` atomically: a temporary file in the same directory, fsync, rename.
 * Never leaves a half-written `path`. A path that exists and is not a regular file (FIFO,
 * symlink, device) is refused with AP_ERR_INPUT (files.h). */
ap_status ap_write_file_atomic(const char *path, const void *data, size_t len, ap_err *err);

/* The same, written in pieces: ap_file_out_open creates the temporary file, _write appends,
 * _commit syncs it and renames it to `path` (and frees f), _abort removes it (and frees f). For
 * outputs too large to hold in memory (traces). Each returns AP_ERR_IO naming the path. */
typedef struct ap_file_out ap_file_out;
ap_status ap_file_out_open(const char *path, ap_file_out **f, ap_err *err);
ap_status ap_file_out_write(ap_file_out *f, const void *data, size_t len, ap_err *err);
ap_status ap_file_out_commit(ap_file_out *f, ap_err *err);
void ap_file_out_abort(ap_file_out *f);

/* Read a whole file (NUL-terminated, *out_len without the NUL). Caller frees *out. Files over
 * max_bytes are refused. */
ap_status ap_read_file(const char *path, size_t max_bytes, char **out, size_t *out_len,
                       ap_err *err);

/* ---- memory (base/heap.c) ----------------------------------------------------------------
 * The one allocation hook of the library: every allocation of the library goes through these,
 * SQLite's and cJSON's too. The memory is ordinary C heap memory: free() and ap_free() are
 * interchangeable. GLPK allocates on its own and aborts on failure, by design. A request for 0
 * bytes allocates 1, so NULL always means out of memory. */
void *ap_malloc(size_t n);
void *ap_calloc(size_t n, size_t size);
void *ap_realloc(void *p, size_t n);
char *ap_strdup(const char *s);
void ap_free(void *p);
/* Allocations that returned NULL since the program started (real or injected): compare it
 * before and after a call to tell "out of memory" from another failure. */
unsigned long ap_heap_failures(void);
/* Test hook (tests/test_faults.c): the nth allocation from now (n >= 1) fails, and with
 * persistent = 1 every later one too; n = 0 stops injecting. It also restarts the count that
 * ap_heap_count returns (allocations since this call); ap_heap_injected says whether an
 * injected failure has happened since. Not thread-safe. */
void ap_heap_fail_at(long n, int persistent);
long ap_heap_count(void);
int ap_heap_injected(void);

#endif
