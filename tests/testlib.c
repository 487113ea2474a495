/*
 * testlib.c - see testlib.h. Plain C, POSIX popen-free process running (fork/exec through
 * /bin/sh) so stdout and stderr are captured separately.
 */
#include "testlib.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int tl_pass, tl_fail;
const char *tl_srcdir = ".";
const char *tl_bin = "autoplan";

void tl_init(int argc, char **argv) {
    if (argc > 1) tl_srcdir = argv[1];
    if (argc > 2) tl_bin = argv[2];
}

int tl_finish(void) {
    printf("%d passed, %d failed\n", tl_pass, tl_fail);
    return tl_fail ? 1 : 0;
}

void tl_check(int ok, const char *file, int line, const char *expr) {
    if (ok) { tl_pass++; return; }
    tl_fail++;
    fprintf(stderr, "%s:%d: FAIL: %s\n", file, line, expr);
}

void tl_check_near(double got, double want, double rel_tol, const char *file, int line,
                   const char *expr) {
    double scale = fabs(want) > 1e-300 ? fabs(want) : 1.0;
    int ok = isfinite(got) && fabs(got - want) <= rel_tol * scale;
    if (ok) { tl_pass++; return; }
    tl_fail++;
    fprintf(stderr, "%s:%d: FAIL: %s = %.10g, want %.10g (rel tol %g, off by %.3g%%)\n", file,
            line, expr, got, want, rel_tol, 100.0 * (got - want) / scale);
}

void tl_check_int(int64_t got, int64_t want, const char *file, int line, const char *expr) {
    if (got == want) { tl_pass++; return; }
    tl_fail++;
    fprintf(stderr, "%s:%d: FAIL: %s = %lld, want %lld\n", file, line, expr, (long long)got,
            (long long)want);
}

void tl_check_str(const char *got, const char *want, const char *file, int line,
                  const char *expr) {
    if (got && want && strcmp(got, want) == 0) { tl_pass++; return; }
    tl_fail++;
    fprintf(stderr, "%s:%d: FAIL: %s = \"%s\", want \"%s\"\n", file, line, expr,
            got ? got : "(null)", want ? want : "(null)");
}

void tl_check_contains(const char *hay, const char *needle, const char *file, int line,
                       const char *expr) {
    if (hay && needle && strstr(hay, needle)) { tl_pass++; return; }
    tl_fail++;
    fprintf(stderr, "%s:%d: FAIL: %s does not contain \"%s\"; it is:\n%s\n", file, line, expr,
            needle ? needle : "(null)", hay ? hay : "(null)");
}

const char *tl_path(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", tl_srcdir, rel);
    return buf;
}

char *tl_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); return NULL; }
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

int tl_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = strlen(text);
    int ok = fwrite(text, 1, n, f) == n;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

const char *tl_tmpdir(void) {
    static char buf[256];
    const char *base = getenv("TMPDIR");
    snprintf(buf, sizeof buf, "%s/aptest.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(buf)) return NULL;
    return buf;
}

int tl_run(const char *args, char **out, char **err) {
    char tmpl_o[] = "/tmp/aprun_out.XXXXXX", tmpl_e[] = "/tmp/aprun_err.XXXXXX";
    int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e);
    if (fo < 0 || fe < 0) return -2;
    close(fo);
    close(fe);
    size_t n = strlen(tl_bin) + strlen(args) + strlen(tmpl_o) + strlen(tmpl_e) + 64;
    char *cmd = malloc(n);
    if (!cmd) return -2;
    snprintf(cmd, n, "'%s' %s </dev/null >%s 2>%s", tl_bin, args, tmpl_o, tmpl_e);
    int st = system(cmd);
    free(cmd);
    char *o = tl_read(tmpl_o), *e = tl_read(tmpl_e);
    unlink(tmpl_o);
    unlink(tmpl_e);
    if (out) *out = o; else free(o);
    if (err) *err = e; else free(e);
    if (st == -1) return -2;
    if (WIFEXITED(st)) {
        int code = WEXITSTATUS(st);
        /* the shell reports a signal-killed child as 128+signo */
        return code > 128 ? -1 : code;
    }
    return -1;
}

int tl_vrun(char *args, size_t n, const char *fmt, va_list ap, char **out, char **err) {
    vsnprintf(args, n, fmt, ap);
    return tl_run(args, out, err);
}

char *tl_run_ok(const char *fmt, ...) {
    char args[4096], *out = NULL, *err = NULL;
    va_list ap;
    va_start(ap, fmt);
    int rc = tl_vrun(args, sizeof args, fmt, ap, &out, &err);
    va_end(ap);
    CHECK_INT(rc, 0);
    if (rc != 0) fprintf(stderr, "  autoplan %s\n  stderr: %s\n", args, err ? err : "");
    free(err);
    return out;
}

int tl_loaded_library(const char *needle, char *buf, size_t n) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, needle)) {
            p[strcspn(p, "\n")] = '\0';
            snprintf(buf, n, "%s", p);
            found = 1;
        }
    }
    if (f) fclose(f);
    return found;
}
