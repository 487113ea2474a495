/*
 * files.c - output files that never hurt the user (files.h): the regular-file check, stale
 * temporary files of dead processes, mkdir -p, and the output set (a temporary directory
 * moved in file by file after every file is written).
 *
 * POSIX only: rename(2) within one directory tree is atomic per file; a process is dead when
 * kill(pid, 0) fails with ESRCH (a live process of another user answers EPERM and is left
 * alone).
 */
#define _GNU_SOURCE /* DT_DIR in dirent.h; sync_file_range on Linux */
#include "autoplan/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SET 16
#define WRITEBACK_BYTES (4LL << 20) /* written bytes handed to writeback at a time */

struct ap_outset {
    char dir[4096];
    char tmp[4200];           /* dir/.autoplan-<pid>.tmp */
    const char *const *family;
    char names[MAX_SET][64];  /* the files written, closed */
    int n;
    int fd;                   /* the file open for writing (ap_outset_open), or -1 */
    char open_name[64];
    long long written;        /* bytes of the open file written so far */
    size_t made_from;         /* the directories of dir the set made (walk_dir's missing) */
};

static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    return "not a regular file";
}

ap_status ap_files_check_target(const char *path, ap_err *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return AP_OK; /* absent: it will be created */
    if (S_ISREG(sb.st_mode)) return AP_OK;
    return ap_err_set(err, AP_ERR_INPUT, "%s: exists and is %s, not a regular file; not replaced "
                      "(write to a new path, or '-' for standard output where the flag takes it)",
                      path, kind_of(sb.st_mode));
}

static int dead(long pid) { return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH; }

/* Remove the regular files in dir and dir itself. */
static void remove_tree1(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

void ap_files_remove_stale(const char *path) {
    char dir[4096], base[512];
    struct stat sb;
    int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    const char *slash = strrchr(path, '/');
    if (is_dir) {
        snprintf(dir, sizeof dir, "%s", path);
        base[0] = '\0';
    } else {
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (slash && slash == path) snprintf(dir, sizeof dir, "/");
        snprintf(base, sizeof base, "%s", slash ? slash + 1 : path);
    }
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    size_t bl = strlen(base);
    char p[4700];
    while ((e = readdir(d)) != NULL) {
        long pid = 0;
        char tail[8];
        const char *nm = e->d_name;
        if (is_dir && sscanf(nm, ".autoplan-%ld.tm%1s", &pid, tail) == 2 && !strcmp(tail, "p") &&
            dead(pid)) {
            snprintf(p, sizeof p, "%s/%s", dir, nm);
            remove_tree1(p);
        } else if (is_dir ? strstr(nm, ".tmp.") != NULL
                          : bl && !strncmp(nm, base, bl) && !strncmp(nm + bl, ".tmp.", 5)) {
            /* "<file>.tmp.<pid>" of ap_write_file_atomic (in a directory: of any file) */
            const char *num = is_dir ? strrchr(nm, '.') + 1 : nm + bl + 5;
            char *end;
            pid = strtol(num, &end, 10);
            if (end != num && *end == '\0' && (is_dir ? !strncmp(num - 5, ".tmp.", 5) : 1) &&
                dead(pid)) {
                snprintf(p, sizeof p, "%s/%s", dir, nm);
                unlink(p);
            }
        }
    }
    closedir(d);
}

/* Walk the prefixes of dir: each that exists must be a directory; the others are made
 * (create) or the walk stops there (they would be made later), the length of the first missing
 * prefix (ending at a '/' or at the end of dir) into *missing (0 when all exist). */
static ap_status walk_dir(const char *dir, const char *what, int create, size_t *missing,
                         ap_err *err) {
    *missing = 0;
    char part[4096];
    size_t dl = strlen(dir);
    if (dl == 0) return ap_err_set(err, AP_ERR_INPUT, "%s: empty path", what);
    if (dl >= sizeof part) return ap_err_set(err, AP_ERR_INPUT, "%s: path too long", what);
    for (size_t i = 1; i <= dl; i++) {
        if (dir[i] != '/' && dir[i] != '\0') continue;
        memcpy(part, dir, i);
        part[i] = '\0';
        struct stat sb;
        if (stat(part, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode))
                return ap_err_set(err, AP_ERR_INPUT, "%s: %s exists and is not a directory", what,
                                  part);
            continue;
        }
        int e = errno;
        if (lstat(part, &sb) == 0) /* the name is there but does not lead anywhere */
            return ap_err_set(err, AP_ERR_INPUT, "%s: %s is a symbolic link that cannot be "
                              "followed: %s", what, part, strerror(e));
        if (!*missing) *missing = i;
        if (!create) return AP_OK;
        if (mkdir(part, 0755) != 0 && errno != EEXIST) {
            e = errno;
            return ap_err_set(err, e == EACCES || e == EROFS || e == ENOENT || e == ENOTDIR
                                       ? AP_ERR_INPUT : AP_ERR_IO,
                              "%s: cannot create directory %s: %s", what, part, strerror(e));
        }
    }
    return AP_OK;
}

ap_status ap_files_make_dir(const char *dir, const char *what, ap_err *err) {
    size_t missing;
    return walk_dir(dir, what, 1, &missing, err);
}

ap_status ap_files_check_dir(const char *dir, const char *what, ap_err *err) {
    size_t missing;
    return walk_dir(dir, what, 0, &missing, err);
}

/* ---- the output set --------------------------------------------------------------------------- */

/* Remove the directories of dir made from the prefix of length `from` on (walk_dir; 0:
 * none made), the deepest first (a part a failed ap_files_make_dir never made is passed over).
 * rmdir removes only empty directories, so one that holds something (the set's files once moved
 * in, or another writer's) stays, and the walk stops there. */
static void remove_made(const char *dir, size_t from) {
    char part[4096];
    size_t n = strlen(dir);
    if (from == 0 || n >= sizeof part) return;
    memcpy(part, dir, n + 1);
    for (;;) {
        while (n > 1 && part[n - 1] == '/') part[--n] = '\0'; /* "a/b/" is "a/b" */
        if (n < from) return;
        /* a part that holds something stays, and so do those above it; one that a failed
           make never made (ENOENT, ENAMETOOLONG) is passed over */
        if (rmdir(part) != 0 && (errno == ENOTEMPTY || errno == EEXIST)) return;
        while (n > 0 && part[n - 1] != '/') n--; /* up one level */
        part[n] = '\0';
    }
}

ap_status ap_outset_begin(const char *dir, const char *const *family, ap_outset **out,
                          ap_err *err) {
    *out = NULL;
    /* made_from: where the directories made for dir start, so that a set that moves nothing
       in removes what it made and no more */
    size_t made_from;
    ap_status st = walk_dir(dir, "--out", 1, &made_from, err);
    if (st != AP_OK) {
        remove_made(dir, made_from); /* a part of the path may have been made */
        return st;
    }
    ap_files_remove_stale(dir);
    ap_outset *s = ap_calloc(1, sizeof *s);
    if (!s) {
        remove_made(dir, made_from);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory", dir);
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->tmp, sizeof s->tmp, "%s/.autoplan-%ld.tmp", dir, (long)getpid());
    s->family = family;
    s->fd = -1;
    s->made_from = made_from;
    remove_tree1(s->tmp); /* ours from an earlier set of this process */
    if (mkdir(s->tmp, 0700) != 0) {
        int e = errno;
        ap_free(s);
        remove_made(dir, made_from);
        return ap_err_set(err, e == EACCES || e == EROFS ? AP_ERR_INPUT : AP_ERR_IO,
                          "--out: cannot write in %s: %s", dir, strerror(e));
    }
    *out = s;
    return AP_OK;
}

const char *ap_outset_dir(const ap_outset *s) { return s->dir; }

ap_status ap_outset_open(ap_outset *s, const char *name, ap_err *err) {
    if (s->fd >= 0)
        return ap_err_set(err, AP_ERR_INTERNAL, "output file '%s' opened while '%s' is open", name,
                          s->open_name);
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
        strlen(name) >= sizeof s->names[0])
        return ap_err_set(err, AP_ERR_INTERNAL, "output file name '%s' is not a plain name", name);
    if (s->n >= MAX_SET) return ap_err_set(err, AP_ERR_INTERNAL, "more than %d output files", MAX_SET);
    char target[4200], tmp[4300];
    snprintf(target, sizeof target, "%s/%s", s->dir, name);
    ap_status st = ap_files_check_target(target, err);
    if (st != AP_OK) return st;
    snprintf(tmp, sizeof tmp, "%s/%s", s->tmp, name);
    s->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (s->fd < 0)
        return ap_err_set(err, AP_ERR_IO, "%s: %s: cannot write: %s", target, tmp, strerror(errno));
    snprintf(s->open_name, sizeof s->open_name, "%s", name);
    s->written = 0;
    return AP_OK;
}

/* The open file's temporary copy removed after a failure (the file is not in the set). */
static void drop_open(ap_outset *s) {
    char tmp[4300];
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    snprintf(tmp, sizeof tmp, "%s/%s", s->tmp, s->open_name);
    unlink(tmp);
}

/* "<dir>/<name>: <dir>/.autoplan-<pid>.tmp/<name>: write failed: <reason>", the file dropped */
static ap_status write_failed(ap_outset *s, int e, ap_err *err) {
    ap_status st = ap_err_set(err, AP_ERR_IO, "%s/%s: %s/%s: write failed: %s", s->dir,
                              s->open_name, s->tmp, s->open_name, strerror(e));
    drop_open(s);
    return st;
}

int ap_files_write_fd(int fd, const void *data, size_t len, long long *written) {
    const char *p = data;
    long long before = *written;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        p += w;
        len -= (size_t)w;
        *written += w;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    /* Linux: a large file's pages start going to the disk while later ones are produced, so
     * the fsync at the end waits for the last few MB instead of the whole file (compare's
     * 54 MB plans.csv: 80 ms of waiting at the end). Advisory: a failure here is fsync's to
     * report. */
    long long from = before / WRITEBACK_BYTES * WRITEBACK_BYTES;
    long long to = *written / WRITEBACK_BYTES * WRITEBACK_BYTES;
    if (to > from) (void)sync_file_range(fd, from, to - from, SYNC_FILE_RANGE_WRITE);
#else
    (void)before;
#endif
    return 0;
}

ap_status ap_outset_write(ap_outset *s, const void *data, size_t len, ap_err *err) {
    if (s->fd < 0) return ap_err_set(err, AP_ERR_INTERNAL, "output file written while none is open");
    int e = ap_files_write_fd(s->fd, data, len, &s->written);
    return e ? write_failed(s, e, err) : AP_OK;
}

ap_status ap_outset_close(ap_outset *s, ap_err *err) {
    if (s->fd < 0) return ap_err_set(err, AP_ERR_INTERNAL, "output file closed while none is open");
    if (fsync(s->fd) != 0) return write_failed(s, errno, err);
    int fd = s->fd;
    s->fd = -1;
    if (close(fd) != 0) return write_failed(s, errno, err);
    snprintf(s->names[s->n++], sizeof s->names[0], "%s", s->open_name);
    return AP_OK;
}

ap_status ap_outset_add(ap_outset *s, const char *name, const void *data, size_t len,
                        ap_err *err) {
    ap_status st = ap_outset_open(s, name, err);
    if (st == AP_OK) st = ap_outset_write(s, data, len, err);
    if (st == AP_OK) st = ap_outset_close(s, err);
    return st;
}

/* Remove dir/name when it is a regular file (an earlier run's). */
static void remove_regular(const char *dir, const char *name) {
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) unlink(p);
}

ap_status ap_outset_commit(ap_outset *s, ap_err *err) {
    ap_status st = AP_OK;
    if (s->fd >= 0) {
        st = ap_err_set(err, AP_ERR_INTERNAL, "output set committed with '%s' open", s->open_name);
        ap_outset_abort(s);
        return st;
    }
    /* the earlier run's files first: a kill from here on leaves part of this set, not a mix */
    for (int i = 0; s->family && s->family[i]; i++) remove_regular(s->dir, s->family[i]);
    for (int i = 0; i < s->n; i++) remove_regular(s->dir, s->names[i]);
    for (int i = 0; i < s->n && st == AP_OK; i++) {
        char from[4300], to[4200];
        snprintf(from, sizeof from, "%s/%s", s->tmp, s->names[i]);
        snprintf(to, sizeof to, "%s/%s", s->dir, s->names[i]);
        if ((st = ap_files_check_target(to, err)) == AP_OK && rename(from, to) != 0)
            st = ap_err_set(err, AP_ERR_IO, "%s: cannot move into place: %s", to, strerror(errno));
    }
    int fd = open(s->dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd); /* the renames are durable */
        close(fd);
    }
    remove_tree1(s->tmp);
    if (st != AP_OK) remove_made(s->dir, s->made_from); /* empty only when nothing moved in */
    ap_free(s);
    return st;
}

void ap_outset_abort(ap_outset *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    remove_tree1(s->tmp);
    remove_made(s->dir, s->made_from);
    ap_free(s);
}
