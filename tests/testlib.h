/*
 * testlib.h - the small test harness every tests/test_*.c uses.
 *
 * Each test executable is run by CTest as `test_x SOURCE_DIR AUTOPLAN_BINARY`. Checks count
 * passes and failures; tl_finish() prints "N passed, N failed" and returns the exit status
 * (1 if anything failed). A failed check prints file:line and the values compared.
 */
#ifndef AP_TESTLIB_H
#define AP_TESTLIB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

extern int tl_pass, tl_fail;
extern const char *tl_srcdir;  /* repository root */
extern const char *tl_bin;     /* the autoplan binary */

void tl_init(int argc, char **argv);
int tl_finish(void);

void tl_check(int ok, const char *file, int line, const char *expr);
void tl_check_near(double got, double want, double rel_tol, const char *file, int line,
                   const char *expr);
void tl_check_int(int64_t got, int64_t want, const char *file, int line, const char *expr);
void tl_check_str(const char *got, const char *want, const char *file, int line,
                  const char *expr);
void tl_check_contains(const char *hay, const char *needle, const char *file, int line,
                       const char *expr);

#define CHECK(e) tl_check(!!(e), __FILE__, __LINE__, #e)
#define CHECK_NEAR(got, want, tol) tl_check_near((got), (want), (tol), __FILE__, __LINE__, #got)
#define CHECK_INT(got, want) tl_check_int((int64_t)(got), (int64_t)(want), __FILE__, __LINE__, #got)
#define CHECK_STR(got, want) tl_check_str((got), (want), __FILE__, __LINE__, #got)
#define CHECK_CONTAINS(hay, needle) tl_check_contains((hay), (needle), __FILE__, __LINE__, #hay)

/* Path under the repository root (static buffer, valid until the next call... use quickly). */
const char *tl_path(const char *rel);

/* Run the autoplan binary with a shell-quoted argument string ("info x.json --json"),
 * capturing stdout and stderr (caller frees both) and returning the exit code (-1 if it died
 * by a signal). stdin is /dev/null. */
int tl_run(const char *args, char **out, char **err);
/* tl_run of the arguments `fmt` formats with `ap` (into args, n bytes, for the caller's
 * messages). */
int tl_vrun(char *args, size_t n, const char *fmt, va_list ap, char **out, char **err);
/* tl_run of the arguments `fmt` formats, checked to exit 0 (a failure prints them and the
 * stderr); its stdout (the caller frees it; NULL when there was none). */
char *tl_run_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Make a fresh temporary directory (static buffer). Removed by the caller if wanted. */
const char *tl_tmpdir(void);
/* Write text to path; returns 0 on success. */
int tl_write(const char *path, const char *text);
/* The path of a shared library this process has mapped whose path contains `needle`
 * ("/libc.so"), from /proc/self/maps: 1 and buf, else 0. Tests preload it as a harmless
 * stand-in for the profiler's injection library. */
int tl_loaded_library(const char *needle, char *buf, size_t n);
/* Read a whole file, caller frees; NULL if unreadable. */
char *tl_read(const char *path);

#endif
