/*
 * test_db.c - the SQLite store (db/) and `autoplan db` (cli/cmd_db.c).
 *
 * Unit checks: the embedded schema equals db/schema.sql, plan keys (stable golden value,
 * sensitivity, no collisions among 20000 texts), the plan cache, profiles and their fingerprint,
 * runs, migrations and the refusal of a newer schema, WAL and its forced fallback, export/import
 * round trip and validation. Reliability checks, each a real fault: 8 processes writing at once,
 * kill -9 inside a write transaction and at random times, a corrupt file, a non-SQLite file,
 * another program's database, a read-only file, an unwritable directory, a full disk
 * (max_page_count): each refused with the path in the message and the file's bytes and mtime
 * unchanged. Permission checks run in a child that drops root to nobody (root ignores modes).
 * CLI checks run the autoplan binary through tl_run.
 */
#define _DEFAULT_SOURCE /* setgroups */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "autoplan/db.h"
#include "testlib.h"

/* ---- helpers ---------------------------------------------------------------------------------- */

static char *path_in(const char *dir, const char *name) {
    static char bufs[8][2048];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* A file's bytes and modification time, to prove it was not touched. */
typedef struct {
    char *bytes;
    size_t len;
    struct timespec mtime;
    int ok;
} snapshot;

static snapshot snap(const char *path) {
    snapshot s = {0};
    struct stat sb;
    if (stat(path, &sb) != 0) return s;
    FILE *f = fopen(path, "rb");
    if (!f) return s;
    s.len = (size_t)sb.st_size;
    s.bytes = malloc(s.len + 1);
    s.ok = s.bytes && fread(s.bytes, 1, s.len, f) == s.len;
    fclose(f);
    s.mtime = sb.st_mtim;
    return s;
}

static int same_snap(const snapshot *a, const char *path) {
    snapshot b = snap(path);
    int same = a->ok && b.ok && a->len == b.len && memcmp(a->bytes, b.bytes, a->len) == 0 &&
               a->mtime.tv_sec == b.mtime.tv_sec && a->mtime.tv_nsec == b.mtime.tv_nsec;
    free(b.bytes);
    return same;
}

static void free_snap(snapshot *s) { free(s->bytes); }

static int write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Overwrite 4 big-endian bytes of the SQLite header (file format: offset 60 user_version,
 * offset 68 application_id). The database must be closed (WAL checkpointed into the file). */
static int patch_be32(const char *path, long off, uint32_t v) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    int ok = pwrite(fd, b, 4, off) == 4;
    return close(fd) == 0 && ok ? 0 : -1;
}

static int64_t count(ap_db *db, const char *table) {
    int64_t n = -1;
    ap_err e;
    if (ap_db_count(db, table, &n, &e) != AP_OK) {
        fprintf(stderr, "count %s: %s\n", table, e.msg);
        return -1;
    }
    return n;
}

static ap_db *open_rw(const char *path) {
    ap_db *db = NULL;
    ap_err e;
    if (ap_db_open(path, 0, &db, &e) != AP_OK) {
        fprintf(stderr, "open %s: %s\n", path, e.msg);
        return NULL;
    }
    return db;
}

static void make_profile(ap_db_profile *p, const char *gpu, int i) {
    memset(p, 0, sizeof *p);
    snprintf(p->gpu, sizeof p->gpu, "%s", gpu);
    snprintf(p->device_name, sizeof p->device_name, "NVIDIA H100 80GB HBM3");
    snprintf(p->pci_id, sizeof p->pci_id, "10de:2330");
    p->sm_count = 132;
    p->mem_bytes = 85520809984.0;
    p->sm_clock_mhz = 1980;
    p->mem_clock_mhz = 2619;
    p->power_limit_w = 700;
    snprintf(p->driver_version, sizeof p->driver_version, "550.54.15");
    snprintf(p->cuda_version, sizeof p->cuda_version, "12.4");
    snprintf(p->cublas_version, sizeof p->cublas_version, "12.4.5");
    snprintf(p->nccl_version, sizeof p->nccl_version, "2.21.5");
    snprintf(p->mig_mode, sizeof p->mig_mode, "off");
    snprintf(p->op, sizeof p->op, "gemm");
    snprintf(p->shape, sizeof p->shape, "m=%d,n=8192,k=8192", 1024 * (i + 1));
    snprintf(p->dtype, sizeof p->dtype, "bf16");
    double flops = 2.0 * 1024 * (i + 1) * 8192.0 * 8192.0;
    /* a rate the GPU can reach (a profile row may not beat its peak: profile.c) */
    double rate = strcmp(gpu, "h100-sxm") ? 2.5e14 : 7e14;
    p->time_s = flops / rate;
    p->flops_per_s = rate;
    p->bytes = 2.0 * (1024.0 * (i + 1) * 8192 * 2 + 8192.0 * 8192);
    p->samples = 50;
    p->spread = 0.02;
    snprintf(p->source_run, sizeof p->source_run, "prof-%d", i / 4);
}

static void make_run(ap_db_run *r, ap_db_run_rank *ranks, int nranks, const char *host,
                     int64_t started, const char *plan_json) {
    memset(r, 0, sizeof *r);
    snprintf(r->host, sizeof r->host, "%s", host);
    snprintf(r->backend, sizeof r->backend, "cpu");
    r->plan_json = (char *)plan_json;
    r->started_at = started;
    r->ranks = nranks;
    r->predicted_step_s = 1.5;
    r->measured_step_s = 1.62;
    r->predicted_peak_bytes = 60e9;
    r->measured_peak_bytes = 61.5e9;
    for (int i = 0; i < nranks; i++) {
        ranks[i].rank = i;
        ranks[i].predicted_step_s = 1.5;
        ranks[i].measured_step_s = 1.6 + 0.001 * i;
        ranks[i].predicted_peak_bytes = 60e9 - i;
        ranks[i].measured_peak_bytes = 61e9 + i;
    }
}

/* Run fn in a child process, as an unprivileged user (nobody) when drop_root and we are root
 * (root ignores file modes); add the child's check counts to ours. */
static void in_child(void (*fn)(void), int drop_root) {
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(!"pipe");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        int ok = 1;
        if (drop_root && geteuid() == 0)
            ok = setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0;
        tl_pass = tl_fail = 0;
        if (ok) fn();
        else CHECK(!"could not drop root privileges to nobody");
        int counts[2] = {tl_pass, tl_fail};
        if (write(fds[1], counts, sizeof counts) != (ssize_t)sizeof counts) _exit(3);
        _exit(0);
    }
    close(fds[1]);
    int counts[2] = {0, 0};
    ssize_t r = read(fds[0], counts, sizeof counts);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(r == (ssize_t)sizeof counts && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tl_pass += counts[0];
    tl_fail += counts[1];
}

/* ---- schema and keys -------------------------------------------------------------------------- */

static void test_schema_file(void) {
    char *file = tl_read(tl_path("db/schema.sql"));
    CHECK(file != NULL);
    if (file) CHECK(strcmp(file, ap_db_schema_sql()) == 0);
    if (file && strcmp(file, ap_db_schema_sql()) != 0)
        fprintf(stderr, "db/schema.sql and the string in db/schema.c differ: update the string\n");
    free(file);
}

static void test_keys(void) {
    char k1[AP_DB_KEY_HEX + 1], k2[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("model=llama-2-7b\ncluster=8xh100\n", k1);
    ap_db_plan_key("model=llama-2-7b\ncluster=8xh100\n", k2);
    CHECK_INT(strlen(k1), AP_DB_KEY_HEX);
    CHECK_STR(k1, k2);
    for (const char *p = k1; *p; p++) CHECK((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'));
    /* Golden values: keys must not change between builds or machines, or every cached plan
     * misses after an upgrade. Reference: an independent Python transcription of the
     * algorithm (FNV-1a 64, offset basis 14695981039346656037 and prime 1099511628211 as
     * published by Fowler/Noll/Vo, XORed with db/keys.c's two seeds; length mixed in; splitmix64
     * finalizer). A change of ap_hash64 shows up here first. */
    ap_db_plan_key("", k2);
    CHECK_STR(k2, "7575ce9cec659af3eddce4f12d2565d2");
    CHECK_STR(k1, "9e0b3049fc0ed37c273d40afa5ca91be");
    /* One changed byte flips about half of the 128 bits (avalanche); 30..98 is > 6 sigma. */
    ap_db_plan_key("model=llama-2-7b\ncluster=8xh101\n", k2);
    int bits = 0;
    for (int i = 0; i < AP_DB_KEY_HEX; i++) {
        int a = k1[i] <= '9' ? k1[i] - '0' : k1[i] - 'a' + 10;
        int b = k2[i] <= '9' ? k2[i] - '0' : k2[i] - 'a' + 10;
        bits += __builtin_popcount((unsigned)(a ^ b));
    }
    CHECK(bits > 30 && bits < 98);
    /* No collision among 20000 similar texts (first 64 bits suffice to compare). */
    enum { N = 20000 };
    uint64_t *h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++) {
        char text[64], k[AP_DB_KEY_HEX + 1];
        snprintf(text, sizeof text, "gpus=%d\nmbs=%d", i, i % 7);
        ap_db_plan_key(text, k);
        h[i] = strtoull((char[17]){k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], k[8], k[9],
                                   k[10], k[11], k[12], k[13], k[14], k[15], 0}, NULL, 16);
    }
    int collisions = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N && j < i + 64; j++) collisions += h[i] == h[j];
    CHECK_INT(collisions, 0);
    free(h);
}

/* ---- opening, default path, migrations -------------------------------------------------------- */

static void test_default_path(const char *dir) {
    char buf[2048], want[2048];
    ap_err e;
    const char *old_xdg = getenv("XDG_CACHE_HOME");
    char *saved_xdg = old_xdg ? strdup(old_xdg) : NULL;
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

    setenv("XDG_CACHE_HOME", path_in(dir, "xdg"), 1);
    CHECK_INT(ap_db_default_path(buf, sizeof buf, 0, &e), AP_OK);
    snprintf(want, sizeof want, "%s/xdg/autoplan/autoplan.db", dir);
    CHECK_STR(buf, want);
    ap_db *db = NULL;
    CHECK_INT(ap_db_open(NULL, 0, &db, &e), AP_OK); /* creates xdg/autoplan/ */
    if (db) CHECK_STR(ap_db_path(db), want);
    ap_db_close(db);
    struct stat sb;
    CHECK(stat(want, &sb) == 0);

    setenv("XDG_CACHE_HOME", "relative/ignored", 1); /* XDG spec: relative paths are invalid */
    setenv("HOME", path_in(dir, "home"), 1);
    CHECK_INT(ap_db_default_path(buf, sizeof buf, 1, &e), AP_OK);
    snprintf(want, sizeof want, "%s/home/.cache/autoplan/autoplan.db", dir);
    CHECK_STR(buf, want);
    snprintf(want, sizeof want, "%s/home/.cache/autoplan", dir);
    CHECK(stat(want, &sb) == 0 && S_ISDIR(sb.st_mode));

    /* no place for the default: the user must name one (--db), an input error (exit 2) */
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    CHECK_INT(ap_db_default_path(buf, sizeof buf, 0, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "--db");
    if (saved_xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
    if (saved_home) setenv("HOME", saved_home, 1);
    free(saved_xdg);
    free(saved_home);
}

static void test_open_migrate(const char *dir) {
    const char *path = path_in(dir, "mig.db");
    ap_err e;
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_schema_version(db), AP_DB_SCHEMA_VERSION);
    CHECK_STR(ap_db_journal_mode(db), "wal");
    CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    CHECK_INT(count(db, "plans"), 0);
    CHECK_INT(ap_db_count(db, "sqlite_master", &(int64_t){0}, &e), AP_ERR_INPUT);
    ap_db_close(db);

    /* Header fields as the SQLite file format defines them. */
    snapshot s = snap(path);
    CHECK(s.ok && s.len >= 100);
    if (s.ok && s.len >= 100) {
        const unsigned char *h = (const unsigned char *)s.bytes;
        CHECK(memcmp(h, "SQLite format 3", 16) == 0);
        CHECK_INT(((uint32_t)h[60] << 24) | ((uint32_t)h[61] << 16) | (h[62] << 8) | h[63],
                  AP_DB_SCHEMA_VERSION);
        CHECK_INT(((uint32_t)h[68] << 24) | ((uint32_t)h[69] << 16) | (h[70] << 8) | h[71],
                  AP_DB_APPLICATION_ID);
        CHECK_INT(h[18], 2); /* file format write version 2 = WAL */
    }
    /* Reopening a current database writes nothing. */
    db = open_rw(path);
    CHECK(db != NULL);
    ap_db_close(db);
    CHECK(same_snap(&s, path));
    free_snap(&s);

    /* A newer schema version is refused, read-write or read-only, and never rewritten. */
    CHECK(patch_be32(path, 60, 99) == 0);
    s = snap(path);
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_ERR_DB);
    CHECK(db == NULL);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "version 99 is newer");
    CHECK_INT(ap_db_open(path, 1, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, "newer");
    CHECK(same_snap(&s, path));
    free_snap(&s);

    /* A migration that fails halfway leaves nothing: version 0 with the tables already there
     * makes CREATE TABLE fail inside the migration transaction. */
    CHECK(patch_be32(path, 60, 0) == 0);
    s = snap(path);
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "migrating the schema from version 0 to 2");
    CHECK(same_snap(&s, path));
    free_snap(&s);

    /* Another program's SQLite database (different application_id). */
    CHECK(patch_be32(path, 60, 1) == 0);
    CHECK(patch_be32(path, 68, 0x12345678) == 0);
    s = snap(path);
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, "another program");
    CHECK_CONTAINS(e.msg, path);
    CHECK(same_snap(&s, path));
    free_snap(&s);

    /* Read-only open of a missing file: AP_ERR_IO and no file created. */
    const char *none = path_in(dir, "none.db");
    CHECK_INT(ap_db_open(none, 1, &db, &e), AP_ERR_IO);
    CHECK(access(none, F_OK) != 0);
    /* An explicit path in a missing directory. */
    CHECK_INT(ap_db_open(path_in(dir, "missing/x.db"), 0, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, "does not exist");
    /* A directory at the path. */
    CHECK_INT(ap_db_open(dir, 0, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, "is a directory");
}

/* A version-1 database (tests/data/db-v1.db, made by tools/make_db_v1_fixture.py from the
 * version-1 section of the schema) is migrated to version 2 on a writing open: every row and
 * id kept, the new host and source columns empty, the wider identity in force. */
static void test_migrate_v1(const char *dir) {
    const char *path = path_in(dir, "v1.db");
    char *bytes = NULL;
    size_t len = 0;
    ap_err e;
    CHECK_INT(ap_read_file(tl_path("tests/data/db-v1.db"), 1 << 20, &bytes, &len, &e), AP_OK);
    CHECK_INT(ap_write_file_atomic(path, bytes, len, &e), AP_OK);
    free(bytes);
    ap_db *db = NULL;
    /* read-only: an older schema is refused, not migrated */
    CHECK_INT(ap_db_open(path, 1, &db, &e), AP_ERR_DB);
    CHECK(db == NULL);
    db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_schema_version(db), 2);
    CHECK_INT(count(db, "profiles"), 3);
    CHECK_INT(count(db, "plans"), 1);
    ap_db_profile *rows = NULL;
    size_t n = 0;
    CHECK_INT(ap_db_profiles_list(db, "h100-sxm", &rows, &n, &e), AP_OK);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(rows[0].op, "gemm");
        CHECK_STR(rows[0].source_run, "old-run");
        CHECK_STR(rows[0].host, "");
        CHECK_STR(rows[0].source, "");
        CHECK_NEAR(rows[0].time_s, 0.0016, 0);
        CHECK_INT(rows[0].created_at, 1763700000);
        CHECK_NEAR(rows[1].sm_clock_mhz, 1980, 0);
    }
    /* the same measurement from another host is another row now */
    if (n >= 1) {
        ap_db_profile q = rows[0];
        snprintf(q.host, sizeof q.host, "node-b");
        size_t ins = 0;
        CHECK_INT(ap_db_profiles_insert(db, &q, 1, &ins, &e), AP_OK);
        CHECK_INT(ins, 1);
        q.sm_clock_mhz = 1755; /* and at another clock */
        CHECK_INT(ap_db_profiles_insert(db, &q, 1, &ins, &e), AP_OK);
        CHECK_INT(ins, 1);
        CHECK_INT(ap_db_profiles_insert(db, &q, 1, &ins, &e), AP_OK); /* again: the same row */
        CHECK_INT(ins, 0);
    }
    free(rows);
    CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    ap_db_close(db);
    /* opening again does nothing more */
    db = open_rw(path);
    CHECK(db != NULL);
    if (db) CHECK_INT(count(db, "profiles"), 5);
    ap_db_close(db);
    /* the reading commands migrate an old file they can write (listing an old cache works) */
    const char *p2 = path_in(dir, "v1-list.db");
    CHECK_INT(ap_read_file(tl_path("tests/data/db-v1.db"), 1 << 20, &bytes, &len, &e), AP_OK);
    CHECK_INT(ap_write_file_atomic(p2, bytes, len, &e), AP_OK);
    free(bytes);
    char args[4200], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "db list --db '%s'", p2);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "v1 plan");
    CHECK_CONTAINS(err, "migrated");
    free(out);
    free(err);
}

static void test_wal_fallback(const char *dir) {
    const char *path = path_in(dir, "nowal.db");
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path;
    o.no_wal = 1;
    ap_db *db = NULL;
    ap_err e;
    CHECK_INT(ap_db_open_opts(&o, &db, &e), AP_OK);
    if (!db) return;
    CHECK_STR(ap_db_journal_mode(db), "delete");
    char key[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("nowal", key);
    CHECK_INT(ap_db_plan_put(db, key, "s", "{\"x\":1}", 0.5, &e), AP_OK);
    char wal[1100];
    snprintf(wal, sizeof wal, "%s-wal", path);
    CHECK(access(wal, F_OK) != 0); /* a rollback journal, not a WAL, was used */
    ap_db_close(db);
    snapshot s = snap(path);
    CHECK(s.ok && s.len > 18 && s.bytes[18] == 1); /* write version 1 = legacy (rollback) */
    free_snap(&s);
    /* The environment variable forces it too (the CLI tests use it). */
    setenv("AUTOPLAN_DB_NO_WAL", "1", 1);
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_OK);
    if (db) CHECK_STR(ap_db_journal_mode(db), "delete");
    char *json = NULL;
    if (db) CHECK_INT(ap_db_plan_get(db, key, &json, NULL, &e), AP_OK);
    CHECK_STR(json, "{\"x\":1}");
    free(json);
    ap_db_close(db);
    unsetenv("AUTOPLAN_DB_NO_WAL");
    /* WAL really unavailable: the unix-dotfile VFS has no shared memory (like a network
     * filesystem), so SQLite refuses the switch; autoplan warns, naming the file, and goes on
     * with a rollback journal. stderr is captured to check the warning. */
    const char *dot = path_in(dir, "dotfile.db");
    ap_db_opts_init(&o);
    o.path = dot;
    o.vfs = "unix-dotfile";
    const char *logf = path_in(dir, "stderr.txt");
    fflush(stderr);
    int saved = dup(2), lf = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(lf, 2);
    close(lf);
    ap_log_set_level(AP_LOG_WARN);
    ap_status ost = ap_db_open_opts(&o, &db, &e);
    ap_log_set_level(AP_LOG_ERROR);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK_INT(ost, AP_OK);
    char *logged = tl_read(logf);
    CHECK_CONTAINS(logged, dot);
    CHECK_CONTAINS(logged, "WAL journal unavailable");
    CHECK_CONTAINS(logged, "journal_mode=DELETE");
    free(logged);
    if (db) {
        CHECK_STR(ap_db_journal_mode(db), "delete");
        CHECK_INT(ap_db_plan_put(db, key, "s", "{\"dot\":1}", 0.5, &e), AP_OK);
        CHECK_INT(ap_db_plan_get(db, key, &json, NULL, &e), AP_OK);
        CHECK_STR(json, "{\"dot\":1}");
        free(json);
        ap_db_close(db);
    }
    snprintf(wal, sizeof wal, "%s-wal", dot);
    CHECK(access(wal, F_OK) != 0);
    /* Without the override the same file goes (back) to WAL. */
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_OK);
    if (db) CHECK_STR(ap_db_journal_mode(db), "wal");
    ap_db_close(db);
}

/* ---- plan cache, profiles, runs --------------------------------------------------------------- */

static void test_plan_cache(const char *dir) {
    ap_err e;
    char key[AP_DB_KEY_HEX + 1], other[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("canonical A", key);
    ap_db_plan_key("canonical B", other);
    char *json = (char *)"x";
    double search_s = -1;
    /* NULL db: the cache is off; a miss, and put is a no-op. */
    CHECK_INT(ap_db_plan_get(NULL, key, &json, &search_s, &e), AP_OK);
    CHECK(json == NULL);
    CHECK_INT(ap_db_plan_put(NULL, key, "s", "{}", 1, &e), AP_OK);

    ap_db *db = open_rw(path_in(dir, "cache.db"));
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_plan_get(db, key, &json, &search_s, &e), AP_OK);
    CHECK(json == NULL);
    CHECK_INT(ap_db_plan_put(db, key, "llama-2-7b on 8x h100: tp2 pp1 dp4", "{\"plans\":[1]}",
                             12.5, &e), AP_OK);
    CHECK_INT(ap_db_plan_get(db, key, &json, &search_s, &e), AP_OK);
    CHECK_STR(json, "{\"plans\":[1]}");
    CHECK_NEAR(search_s, 12.5, 0);
    free(json);
    CHECK_INT(ap_db_plan_get(db, other, &json, NULL, &e), AP_OK);
    CHECK(json == NULL);
    /* Replace. */
    CHECK_INT(ap_db_plan_put(db, key, "v2", "{\"plans\":[2]}", 3, &e), AP_OK);
    CHECK_INT(ap_db_plan_get(db, key, &json, &search_s, &e), AP_OK);
    CHECK_STR(json, "{\"plans\":[2]}");
    free(json);
    CHECK_INT(count(db, "plans"), 1);
    ap_db_plan_info *rows = NULL;
    size_t n = 0;
    CHECK_INT(ap_db_plans_list(db, &rows, &n, &e), AP_OK);
    CHECK_INT(n, 1);
    if (n == 1) {
        CHECK_STR(rows[0].key, key);
        CHECK_STR(rows[0].summary, "v2");
        CHECK_INT(rows[0].json_bytes, 13);
    }
    free(rows);
    /* Bad keys are caught. */
    CHECK_INT(ap_db_plan_put(db, "XYZ", "s", "{}", 1, &e), AP_ERR_INTERNAL);
    CHECK_INT(ap_db_plan_get(db, "0123", &json, NULL, &e), AP_ERR_INTERNAL);
    /* gc: nothing is older than a day; everything is older than -now... not allowed. */
    int64_t deleted = -1;
    CHECK_INT(ap_db_plans_gc(db, 86400, &deleted, &e), AP_OK);
    CHECK_INT(deleted, 0);
    ap_db_plan_info old = {0};
    snprintf(old.key, sizeof old.key, "%s", other);
    snprintf(old.summary, sizeof old.summary, "old");
    old.created_at = old.used_at = 1577836800; /* 2020-01-01 */
    int added = 0;
    CHECK_INT(ap_db_plan_import(db, &old, "{}", &added, &e), AP_OK);
    CHECK_INT(added, 1);
    CHECK_INT(ap_db_plan_import(db, &old, "{}", &added, &e), AP_OK);
    CHECK_INT(added, 0);
    CHECK_INT(ap_db_plans_gc(db, 30 * 86400.0, &deleted, &e), AP_OK);
    CHECK_INT(deleted, 1);
    CHECK_INT(count(db, "plans"), 1);
    CHECK_INT(count(db, "plan_results"), 1); /* the result went with its plan (cascade) */
    /* A hit refreshes a used_at older than an hour (so gc keeps the plan), and leaves a recent
     * one alone (no write per hit). */
    int64_t now = (int64_t)time(NULL);
    ap_db_plan_info stale = {0}, recent = {0};
    ap_db_plan_key("stale", stale.key);
    ap_db_plan_key("recent", recent.key);
    stale.created_at = stale.used_at = 1577836800;
    recent.created_at = recent.used_at = now - 600;
    CHECK_INT(ap_db_plan_import(db, &stale, "{\"s\":1}", NULL, &e), AP_OK);
    CHECK_INT(ap_db_plan_import(db, &recent, "{\"r\":1}", NULL, &e), AP_OK);
    CHECK_INT(ap_db_plan_get(db, stale.key, &json, NULL, &e), AP_OK);
    CHECK_STR(json, "{\"s\":1}");
    free(json);
    CHECK_INT(ap_db_plan_get(db, recent.key, &json, NULL, &e), AP_OK);
    free(json);
    CHECK_INT(ap_db_plans_list(db, &rows, &n, &e), AP_OK);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].key, stale.key)) CHECK(rows[i].used_at >= now);
        if (!strcmp(rows[i].key, recent.key)) CHECK_INT(rows[i].used_at, now - 600);
    }
    free(rows);
    CHECK_INT(ap_db_plans_gc(db, 30 * 86400.0, &deleted, &e), AP_OK);
    CHECK_INT(deleted, 0);
    ap_db_close(db);
}

/* gc gives the space of deleted results back: the file shrinks (WAL or rollback journal). */
static void test_gc_shrinks(const char *dir, int no_wal) {
    const char *path = path_in(dir, no_wal ? "gc_nowal.db" : "gc.db");
    ap_err e;
    if (no_wal) setenv("AUTOPLAN_DB_NO_WAL", "1", 1);
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    size_t big = 3u << 20;
    char *json = malloc(big + 1);
    memset(json, 'q', big);
    json[big] = '\0';
    ap_db_plan_info old = {0};
    ap_db_plan_key("gc me", old.key);
    old.created_at = old.used_at = 1577836800;
    CHECK_INT(ap_db_plan_import(db, &old, json, NULL, &e), AP_OK);
    free(json);
    ap_db_close(db);
    struct stat before, after;
    CHECK(stat(path, &before) == 0 && before.st_size > (off_t)big);
    db = open_rw(path);
    int64_t deleted = 0;
    if (db) CHECK_INT(ap_db_plans_gc(db, 30 * 86400.0, &deleted, &e), AP_OK);
    CHECK_INT(deleted, 1);
    if (db) CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    ap_db_close(db);
    CHECK(stat(path, &after) == 0 && after.st_size < before.st_size - (off_t)(2u << 20));
    unsetenv("AUTOPLAN_DB_NO_WAL");
}

static void test_profiles(const char *dir) {
    ap_err e;
    ap_db *a = open_rw(path_in(dir, "prof_a.db")), *b = open_rw(path_in(dir, "prof_b.db"));
    CHECK(a && b);
    if (!a || !b) {
        ap_db_close(a);
        ap_db_close(b);
        return;
    }
    uint64_t fp_null = 1, fp0 = 2, fp1 = 3, fp2 = 4, fp_other = 5;
    CHECK_INT(ap_db_profiles_fingerprint(NULL, "h100-sxm", &fp_null, &e), AP_OK);
    CHECK_INT(ap_db_profiles_fingerprint(a, "h100-sxm", &fp0, &e), AP_OK);
    CHECK(fp_null == fp0); /* no db = no profiles */
    ap_db_profile p[8];
    for (int i = 0; i < 8; i++) make_profile(&p[i], "h100-sxm", i);
    size_t ins = 0;
    CHECK_INT(ap_db_profiles_insert(a, p, 8, &ins, &e), AP_OK);
    CHECK_INT(ins, 8);
    CHECK_INT(ap_db_profiles_fingerprint(a, "h100-sxm", &fp1, &e), AP_OK);
    CHECK(fp1 != fp0);
    /* The same rows inserted in another order in another database: same fingerprint. */
    ap_db_profile rev[8];
    for (int i = 0; i < 8; i++) rev[i] = p[7 - i];
    CHECK_INT(ap_db_profiles_insert(b, rev, 4, &ins, &e), AP_OK);
    CHECK_INT(ap_db_profiles_insert(b, rev + 4, 4, &ins, &e), AP_OK);
    CHECK_INT(ap_db_profiles_fingerprint(b, "h100-sxm", &fp2, &e), AP_OK);
    CHECK(fp2 == fp1);
    /* Re-inserting is a no-op and keeps the fingerprint. */
    CHECK_INT(ap_db_profiles_insert(a, p, 8, &ins, &e), AP_OK);
    CHECK_INT(ins, 0);
    CHECK_INT(count(a, "profiles"), 8);
    CHECK_INT(ap_db_profiles_fingerprint(a, "h100-sxm", &fp2, &e), AP_OK);
    CHECK(fp2 == fp1);
    /* A profile of another GPU does not change this GPU's fingerprint; a changed measurement
     * (a new source run) does. */
    ap_db_profile q;
    make_profile(&q, "a100-sxm4-80g", 0);
    CHECK_INT(ap_db_profiles_insert(a, &q, 1, &ins, &e), AP_OK);
    CHECK_INT(ap_db_profiles_fingerprint(a, "h100-sxm", &fp2, &e), AP_OK);
    CHECK(fp2 == fp1);
    CHECK_INT(ap_db_profiles_fingerprint(a, "a100-sxm4-80g", &fp_other, &e), AP_OK);
    CHECK(fp_other != fp0 && fp_other != fp1);
    make_profile(&q, "h100-sxm", 0);
    q.time_s *= 1.01;
    snprintf(q.source_run, sizeof q.source_run, "prof-new");
    CHECK_INT(ap_db_profiles_insert(a, &q, 1, &ins, &e), AP_OK);
    CHECK_INT(ap_db_profiles_fingerprint(a, "h100-sxm", &fp2, &e), AP_OK);
    CHECK(fp2 != fp1);
    /* Listing returns what was stored, field by field. */
    ap_db_profile *rows = NULL;
    size_t n = 0;
    CHECK_INT(ap_db_profiles_list(a, "a100-sxm4-80g", &rows, &n, &e), AP_OK);
    CHECK_INT(n, 1);
    if (n == 1) {
        ap_db_profile w;
        make_profile(&w, "a100-sxm4-80g", 0);
        CHECK_STR(rows[0].shape, w.shape);
        CHECK_STR(rows[0].nccl_version, "2.21.5");
        CHECK_NEAR(rows[0].time_s, w.time_s, 0);
        CHECK_NEAR(rows[0].mem_bytes, w.mem_bytes, 0);
        CHECK_INT(rows[0].samples, 50);
        CHECK(rows[0].created_at > 1700000000);
    }
    free(rows);
    /* Validation: one bad row refuses the whole batch. */
    ap_db_profile bad[2];
    make_profile(&bad[0], "h100-sxm", 20);
    make_profile(&bad[1], "h100-sxm", 21);
    bad[1].time_s = -1;
    CHECK_INT(ap_db_profiles_insert(a, bad, 2, &ins, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "profiles[1].time_s");
    bad[1].time_s = 1;
    bad[1].op[0] = '\0';
    CHECK_INT(ap_db_profiles_insert(a, bad, 2, &ins, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "profiles[1].op");
    CHECK_INT(count(a, "profiles"), 10);
    ap_db_close(a);
    ap_db_close(b);
}

static void test_runs(const char *dir) {
    ap_err e;
    ap_db *db = open_rw(path_in(dir, "runs.db"));
    CHECK(db != NULL);
    if (!db) return;
    ap_db_run r;
    ap_db_run_rank ranks[8];
    make_run(&r, ranks, 8, "node-a", 1763700000, "{\"tp\":2,\"pp\":4}");
    int64_t id = 0, id2 = 0;
    CHECK_INT(ap_db_run_insert(db, &r, ranks, 8, &id, &e), AP_OK);
    CHECK(id > 0);
    CHECK_INT(ap_db_run_insert(db, &r, ranks, 8, &id2, &e), AP_OK); /* same run: stored once */
    CHECK_INT(id2, id);
    CHECK_INT(count(db, "runs"), 1);
    CHECK_INT(count(db, "run_ranks"), 8);
    ap_db_run *rows = NULL;
    size_t n = 0;
    CHECK_INT(ap_db_runs_list(db, &rows, &n, &e), AP_OK);
    CHECK_INT(n, 1);
    if (n == 1) {
        CHECK_STR(rows[0].host, "node-a");
        CHECK_STR(rows[0].plan_json, "{\"tp\":2,\"pp\":4}");
        CHECK_INT(rows[0].ranks, 8);
        CHECK_NEAR(rows[0].measured_peak_bytes, 61.5e9, 0);
        CHECK_INT(strlen(rows[0].uid), AP_DB_KEY_HEX);
    }
    ap_db_runs_free(rows, n);
    ap_db_run_rank *k = NULL;
    CHECK_INT(ap_db_run_ranks(db, id, &k, &n, &e), AP_OK);
    CHECK_INT(n, 8);
    if (n == 8) {
        CHECK_INT(k[7].rank, 7);
        CHECK_NEAR(k[7].measured_step_s, 1.607, 1e-12);
    }
    free(k);
    /* A bad rank row refuses the run and stores nothing; duplicate ranks roll back. */
    make_run(&r, ranks, 4, "node-b", 1763700001, "{}");
    ranks[3].rank = 9;
    CHECK_INT(ap_db_run_insert(db, &r, ranks, 4, &id, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "ranks[3].rank");
    ranks[3].rank = 0; /* duplicates rank 0: the primary key refuses it inside the transaction */
    CHECK_INT(ap_db_run_insert(db, &r, ranks, 4, &id, &e), AP_ERR_DB);
    CHECK_INT(count(db, "runs"), 1);
    CHECK_INT(count(db, "run_ranks"), 8);
    ap_db_close(db);
}

/* ---- transactions and injected failures ------------------------------------------------------- */

static int fail_hook(void *arg) {
    (*(int *)arg)++;
    return 1;
}

static void test_transactions(const char *dir) {
    const char *path = path_in(dir, "txn.db");
    ap_err e;
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    ap_db_profile p[3];
    for (int i = 0; i < 3; i++) make_profile(&p[i], "h100-sxm", i);
    char key[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("txn", key);
    /* Rolled back as a unit. */
    CHECK_INT(ap_db_begin(db, &e), AP_OK);
    CHECK_INT(ap_db_profiles_insert(db, p, 3, NULL, &e), AP_OK);
    CHECK_INT(ap_db_plan_put(db, key, "s", "{}", 1, &e), AP_OK);
    CHECK_INT(ap_db_begin(db, &e), AP_ERR_INTERNAL); /* no nesting */
    ap_db_rollback(db);
    CHECK_INT(count(db, "profiles"), 0);
    CHECK_INT(count(db, "plans"), 0);
    /* A failed write inside a transaction undoes only itself. */
    CHECK_INT(ap_db_begin(db, &e), AP_OK);
    CHECK_INT(ap_db_plan_put(db, key, "s", "{}", 1, &e), AP_OK);
    p[2].samples = 0;
    CHECK_INT(ap_db_profiles_insert(db, p, 3, NULL, &e), AP_ERR_INPUT);
    CHECK_INT(ap_db_commit(db, &e), AP_OK);
    CHECK_INT(count(db, "plans"), 1);
    CHECK_INT(count(db, "profiles"), 0);
    ap_db_close(db);
    /* An injected failure at commit: nothing lands, the error names the path. */
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path;
    int calls = 0;
    o.before_commit = fail_hook;
    o.hook_arg = &calls;
    CHECK_INT(ap_db_open_opts(&o, &db, &e), AP_OK);
    if (!db) return;
    p[2].samples = 5;
    CHECK_INT(ap_db_profiles_insert(db, p, 3, NULL, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "injected failure");
    CHECK_INT(calls, 1);
    CHECK_INT(count(db, "profiles"), 0);
    ap_db_close(db);
}

/* ---- 8 processes at once ---------------------------------------------------------------------- */

enum { NPROC = 8, PLANS_PER = 100, RUNS_PER = 10, RANKS_PER = 4 };

static int child_writer(const char *path, int who) {
    ap_db *db = NULL;
    ap_err e;
    /* Every child opens the fresh file at once: creation and migration race too. */
    if (ap_db_open(path, 0, &db, &e) != AP_OK) {
        fprintf(stderr, "child %d: %s\n", who, e.msg);
        return 1;
    }
    /* Racing to create the file must not push anyone off WAL. */
    int bad = strcmp(ap_db_journal_mode(db), "wal") != 0 ? 5 : 0;
    for (int i = 0; i < PLANS_PER && !bad; i++) {
        char text[64], key[AP_DB_KEY_HEX + 1], json[128], *got = NULL;
        snprintf(text, sizeof text, "proc=%d plan=%d", who, i);
        ap_db_plan_key(text, key);
        snprintf(json, sizeof json, "{\"proc\":%d,\"plan\":%d}", who, i);
        if (ap_db_plan_put(db, key, text, json, 0.01, &e) != AP_OK) bad = 1;
        else if (ap_db_plan_get(db, key, &got, NULL, &e) != AP_OK || !got || strcmp(got, json))
            bad = 2;
        free(got);
        if (i % (PLANS_PER / RUNS_PER) == 0 && !bad) {
            ap_db_run r;
            ap_db_run_rank k[RANKS_PER];
            make_run(&r, k, RANKS_PER, "host", 1763700000 + who * 1000 + i, json);
            if (ap_db_run_insert(db, &r, k, RANKS_PER, NULL, &e) != AP_OK) bad = 3;
        }
    }
    ap_db_profile p;
    make_profile(&p, "h100-sxm", who);
    if (!bad && ap_db_profiles_insert(db, &p, 1, NULL, &e) != AP_OK) bad = 4;
    if (bad) fprintf(stderr, "child %d: failure %d: %s\n", who, bad, e.msg);
    ap_db_close(db);
    return bad;
}

static void test_concurrent(const char *dir) {
    const char *path = path_in(dir, "conc.db");
    pid_t pids[NPROC];
    fflush(stdout);
    fflush(stderr);
    /* A start barrier: every child blocks reading the pipe until the parent closes it, so all
     * eight open the fresh file and write at the same moment. */
    int gate[2];
    CHECK(pipe(gate) == 0);
    double t0 = ap_now_s();
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(gate[1]);
            char c;
            while (read(gate[0], &c, 1) > 0) {
            }
            _exit(child_writer(path, i));
        }
    }
    close(gate[0]);
    close(gate[1]);
    int ok = 0;
    for (int i = 0; i < NPROC; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    CHECK_INT(ok, NPROC);
    printf("  %d processes x (%d plans + %d runs): %.2f s\n", NPROC, PLANS_PER, RUNS_PER,
           ap_now_s() - t0);
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    ap_err e;
    CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    CHECK_INT(count(db, "plans"), NPROC * PLANS_PER);
    CHECK_INT(count(db, "runs"), NPROC * RUNS_PER);
    CHECK_INT(count(db, "run_ranks"), NPROC * RUNS_PER * RANKS_PER);
    CHECK_INT(count(db, "profiles"), NPROC);
    /* Every row is the one its writer wrote. */
    int right = 0;
    for (int w = 0; w < NPROC; w++)
        for (int i = 0; i < PLANS_PER; i++) {
            char text[64], key[AP_DB_KEY_HEX + 1], json[128], *got = NULL;
            snprintf(text, sizeof text, "proc=%d plan=%d", w, i);
            ap_db_plan_key(text, key);
            snprintf(json, sizeof json, "{\"proc\":%d,\"plan\":%d}", w, i);
            if (ap_db_plan_get(db, key, &got, NULL, &e) == AP_OK && got && !strcmp(got, json))
                right++;
            free(got);
        }
    CHECK_INT(right, NPROC * PLANS_PER);
    ap_db_close(db);
}

/* ---- kill -9 ---------------------------------------------------------------------------------- */

static int hook_fd = -1;

/* Called just before COMMIT: tell the parent, then wait to be killed. */
static int block_hook(void *arg) {
    (void)arg;
    if (write(hook_fd, "x", 1) != 1) _exit(4);
    for (;;) pause();
    return 0;
}

static int wait_readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

static void test_kill9(const char *dir) {
    const char *path = path_in(dir, "kill.db");
    ap_err e;
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    ap_db_run r;
    ap_db_run_rank k[64];
    make_run(&r, k, 64, "before", 1763700000, "{}");
    CHECK_INT(ap_db_run_insert(db, &r, k, 64, NULL, &e), AP_OK);
    ap_db_close(db);

    /* 1. Killed inside the transaction: the run row (with a 4 MB plan, more than SQLite's 2 MB
     *    page cache, so uncommitted pages spill into the WAL file) and its 64 rank rows are all
     *    written but not committed. Afterwards: consistent, and none of them. */
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        hook_fd = fds[1];
        ap_db_opts o;
        ap_db_opts_init(&o);
        o.path = path;
        o.before_commit = block_hook;
        ap_db *cdb = NULL;
        ap_err ce;
        if (ap_db_open_opts(&o, &cdb, &ce) != AP_OK) _exit(2);
        size_t big = 4u << 20;
        char *plan = malloc(big + 1);
        if (!plan) _exit(6);
        for (size_t i = 0; i < big; i++) plan[i] = (char)('a' + (i * 7919) % 26);
        plan[big] = '\0';
        ap_db_run cr;
        ap_db_run_rank ck[64];
        make_run(&cr, ck, 64, "killed", 1763700001, plan);
        ap_db_run_insert(cdb, &cr, ck, 64, NULL, &ce);
        _exit(5); /* not reached: the hook blocks */
    }
    close(fds[1]);
    int reached = wait_readable(fds[0], 10000);
    CHECK(reached);
    char walpath[2100];
    snprintf(walpath, sizeof walpath, "%s-wal", path);
    struct stat wsb;
    CHECK(stat(walpath, &wsb) == 0 && wsb.st_size > (1 << 20)); /* uncommitted frames on disk */
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    close(fds[0]);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    CHECK_INT(count(db, "runs"), 1);
    CHECK_INT(count(db, "run_ranks"), 64);
    ap_db_close(db);

    /* 2. Killed at a random moment while committing runs in a loop (after its first commit,
     *    signalled through a pipe): every run that landed has all its 16 rank rows. */
    for (int round = 0; round < 3; round++) {
        CHECK(pipe(fds) == 0);
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid == 0) {
            close(fds[0]);
            ap_db *cdb = NULL;
            ap_err ce;
            if (ap_db_open(path, 0, &cdb, &ce) != AP_OK) _exit(2);
            for (int i = 0;; i++) {
                ap_db_run cr;
                ap_db_run_rank ck[16];
                make_run(&cr, ck, 16, "loop", 1763800000 + round * 1000000 + i, "{}");
                if (ap_db_run_insert(cdb, &cr, ck, 16, NULL, &ce) != AP_OK) _exit(3);
                if (i == 0 && write(fds[1], "x", 1) != 1) _exit(4);
            }
        }
        close(fds[1]);
        CHECK(wait_readable(fds[0], 10000));
        close(fds[0]);
        struct timespec ts = {0, (3 + 11 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    }
    db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
    int64_t runs = count(db, "runs"), ranks = count(db, "run_ranks");
    CHECK(runs > 1);
    CHECK_INT(ranks, 64 + (runs - 1) * 16);
    printf("  kill -9 loop: %lld runs landed whole\n", (long long)(runs - 1));
    ap_db_close(db);
}

/* A database another process holds the write lock on: reads go on (WAL), a write waits
 * busy_timeout_ms and then fails with a message naming the path; the cache stays usable. */
static void test_locked(const char *dir) {
    const char *path = path_in(dir, "locked.db");
    ap_err e;
    char key[AP_DB_KEY_HEX + 1], key2[AP_DB_KEY_HEX + 1], *json = NULL;
    ap_db_plan_key("locked", key);
    ap_db_plan_key("locked 2", key2);
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    CHECK_INT(ap_db_plan_put(db, key, "s", "{\"l\":1}", 1, &e), AP_OK);
    ap_db_close(db);
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        hook_fd = fds[1];
        ap_db_opts o;
        ap_db_opts_init(&o);
        o.path = path;
        o.before_commit = block_hook;
        ap_db *cdb = NULL;
        ap_err ce;
        if (ap_db_open_opts(&o, &cdb, &ce) != AP_OK) _exit(2);
        ap_db_plan_put(cdb, key2, "holder", "{}", 1, &ce); /* blocks holding the lock */
        _exit(5);
    }
    close(fds[1]);
    CHECK(wait_readable(fds[0], 10000));
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path;
    o.busy_timeout_ms = 200;
    CHECK_INT(ap_db_open_opts(&o, &db, &e), AP_OK);
    if (db) {
        CHECK_INT(ap_db_plan_get(db, key, &json, NULL, &e), AP_OK);
        CHECK_STR(json, "{\"l\":1}");
        free(json);
        double t0 = ap_now_s();
        CHECK_INT(ap_db_plan_put(db, key2, "mine", "{}", 1, &e), AP_ERR_DB);
        double waited = ap_now_s() - t0;
        CHECK(waited >= 0.15 && waited < 5);
        CHECK_CONTAINS(e.msg, path);
        CHECK_CONTAINS(e.msg, "locked");
    }
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    close(fds[0]);
    if (db) {
        CHECK_INT(ap_db_plan_put(db, key2, "mine", "{}", 1, &e), AP_OK);
        CHECK_INT(count(db, "plans"), 2);
    }
    ap_db_close(db);
}

/* ---- unusable files --------------------------------------------------------------------------- */

static void check_refused(const char *path, const char *reason) {
    snapshot s = snap(path);
    CHECK(s.ok);
    ap_db *db = NULL;
    ap_err e;
    e.msg[0] = '\0';
    CHECK_INT(ap_db_open(path, 0, &db, &e), AP_ERR_DB);
    CHECK(db == NULL);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, reason);
    /* The planner's pattern: a NULL handle means no cache, and everything still answers. */
    char key[AP_DB_KEY_HEX + 1], *json = NULL;
    ap_db_plan_key("x", key);
    CHECK_INT(ap_db_plan_get(db, key, &json, NULL, &e), AP_OK);
    CHECK(json == NULL);
    CHECK_INT(ap_db_plan_put(db, key, "s", "{}", 1, &e), AP_OK);
    ap_db_close(db);
    CHECK(same_snap(&s, path));
    free_snap(&s);
}

static void make_small_db(const char *path) {
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    ap_err e;
    ap_db_profile p[20];
    for (int i = 0; i < 20; i++) make_profile(&p[i], "h100-sxm", i);
    CHECK_INT(ap_db_profiles_insert(db, p, 20, NULL, &e), AP_OK);
    ap_db_close(db);
}

static void test_bad_files(const char *dir) {
    /* Not SQLite at all. */
    const char *text = path_in(dir, "notes.db");
    CHECK(tl_write(text, "these are my notes, not a database\n") == 0);
    check_refused(text, "not an SQLite database");
    /* Random bytes of a database's size. */
    const char *rnd = path_in(dir, "random.db");
    unsigned char junk[8192];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 2654435761u >> 13);
    CHECK(write_bytes(rnd, junk, sizeof junk) == 0);
    check_refused(rnd, "not an SQLite database");
    /* A real database whose schema page is garbled after the 100-byte header. */
    const char *cor = path_in(dir, "corrupt.db");
    make_small_db(cor);
    snapshot good = snap(cor);
    CHECK(good.ok && good.len > 4096);
    if (good.ok && good.len > 4096) {
        memset(good.bytes + 100, 0xA5, 400);
        CHECK(write_bytes(cor, good.bytes, good.len) == 0);
        check_refused(cor, "corrupt");
    }
    free_snap(&good);
    /* Truncated in the middle of a page. */
    const char *trunc = path_in(dir, "trunc.db");
    make_small_db(trunc);
    snapshot t = snap(trunc);
    if (t.ok && t.len > 4096) {
        CHECK(write_bytes(trunc, t.bytes, 4096 + 1000) == 0);
        /* SQLite may only notice when it reads the lost pages; what matters is that a write
         * never damages the file further: open, try to write, check it is byte-identical or
         * that the open was refused. */
        snapshot before = snap(trunc);
        ap_db *db = NULL;
        ap_err e;
        ap_status st = ap_db_open(trunc, 0, &db, &e);
        if (st == AP_OK) {
            ap_db_profile p;
            make_profile(&p, "h100-sxm", 99);
            st = ap_db_profiles_insert(db, &p, 1, NULL, &e);
            CHECK_INT(st, AP_ERR_DB);
            ap_db_close(db);
        }
        CHECK(st == AP_ERR_DB);
        CHECK_CONTAINS(e.msg, trunc);
        CHECK(same_snap(&before, trunc));
        free_snap(&before);
    }
    free_snap(&t);
}

static void unprivileged_checks(void) {
    const char *d = tl_tmpdir();
    CHECK(d != NULL);
    if (!d) return;
    /* A read-only database file. */
    const char *ro = path_in(d, "ro.db");
    make_small_db(ro);
    CHECK(chmod(ro, 0444) == 0);
    check_refused(ro, "read-only");
    /* ...can still be read (db list). */
    ap_db *db = NULL;
    ap_err e;
    CHECK_INT(ap_db_open(ro, 1, &db, &e), AP_OK);
    if (db) CHECK_INT(count(db, "profiles"), 20);
    ap_db_close(db);
    /* An unwritable directory: an existing database in it, and a new one. */
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/locked", d);
    CHECK(mkdir(sub, 0755) == 0);
    const char *in_locked = path_in(sub, "a.db");
    make_small_db(in_locked);
    CHECK(chmod(sub, 0555) == 0);
    check_refused(in_locked, "not writable");
    /* ...but can be read (db list, and cache hits), even though no -shm can be made there. */
    snapshot s = snap(in_locked);
    CHECK_INT(ap_db_open(in_locked, 1, &db, &e), AP_OK);
    if (db) CHECK_INT(count(db, "profiles"), 20);
    ap_db_close(db);
    CHECK(same_snap(&s, in_locked));
    free_snap(&s);
    const char *fresh = path_in(sub, "new.db");
    CHECK_INT(ap_db_open(fresh, 0, &db, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, fresh);
    CHECK_CONTAINS(e.msg, "not writable");
    CHECK(access(fresh, F_OK) != 0);
    chmod(sub, 0755);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", d);
}

static void test_full_disk(const char *dir) {
    const char *path = path_in(dir, "full.db");
    make_small_db(path);
    snapshot s = snap(path);
    CHECK(s.ok);
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path;
    o.max_pages = (int64_t)(s.len / 4096); /* the file as it is: no room to grow */
    ap_db *db = NULL;
    ap_err e;
    CHECK_INT(ap_db_open_opts(&o, &db, &e), AP_OK);
    if (!db) {
        free_snap(&s);
        return;
    }
    size_t big = 1 << 20;
    char *json = malloc(big + 1);
    memset(json, 'a', big);
    json[0] = '"';
    json[big - 1] = '"';
    json[big] = '\0';
    char key[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("full", key);
    CHECK_INT(ap_db_plan_put(db, key, "big", json, 1, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, path);
    CHECK_CONTAINS(e.msg, "full");
    ap_db_profile p[50];
    for (int i = 0; i < 50; i++) make_profile(&p[i], "b200", i);
    CHECK_INT(ap_db_profiles_insert(db, p, 50, NULL, &e), AP_ERR_DB);
    CHECK_CONTAINS(e.msg, "full");
    CHECK_INT(count(db, "profiles"), 20); /* the failed batch left nothing */
    /* Inside ap_db_begin: whatever SQLite does after SQLITE_FULL (undo the statement or the
     * whole transaction), the commit stores all the successful writes or none of them. */
    ap_db_profile small[2];
    make_profile(&small[0], "l40s", 0);
    make_profile(&small[1], "l40s", 1);
    CHECK_INT(ap_db_begin(db, &e), AP_OK);
    ap_status s1 = ap_db_profiles_insert(db, &small[0], 1, NULL, &e);
    CHECK_INT(ap_db_plan_put(db, key, "big", json, 1, &e), AP_ERR_DB);
    ap_status s2 = ap_db_profiles_insert(db, &small[1], 1, NULL, &e);
    ap_status sc = ap_db_commit(db, &e);
    int64_t l40s = -1;
    ap_db_profile *rows = NULL;
    size_t nrows = 0;
    if (ap_db_profiles_list(db, "l40s", &rows, &nrows, &e) == AP_OK) l40s = (int64_t)nrows;
    free(rows);
    if (sc == AP_OK) CHECK_INT(l40s, (s1 == AP_OK) + (s2 == AP_OK));
    else CHECK_INT(l40s, 0);
    ap_db_close(db);
    if (l40s == 0) CHECK(same_snap(&s, path));
    free_snap(&s);
    /* With room again, the same write succeeds. */
    db = open_rw(path);
    if (db) CHECK_INT(ap_db_plan_put(db, key, "big", json, 1, &e), AP_OK);
    ap_db_close(db);
    free(json);
}

/* A full disk as the OS reports it: RLIMIT_FSIZE makes every write past the limit fail
 * (EFBIG; SIGXFSZ ignored). The limit is the database's own size, so nothing can grow. Runs in
 * a child: the limit is per process. */
static char fsize_path[2048];

static void fsize_full_disk(void) {
    snapshot s = snap(fsize_path);
    CHECK(s.ok);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {(rlim_t)s.len, (rlim_t)s.len};
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    ap_db *db = NULL;
    ap_err e;
    CHECK_INT(ap_db_open(fsize_path, 0, &db, &e), AP_OK);
    if (db) {
        size_t big = 1 << 20;
        char *json = malloc(big + 1);
        memset(json, '7', big);
        json[big] = '\0';
        char key[AP_DB_KEY_HEX + 1];
        ap_db_plan_key("fsize", key);
        CHECK_INT(ap_db_plan_put(db, key, "big", json, 1, &e), AP_ERR_DB);
        CHECK_CONTAINS(e.msg, fsize_path);
        CHECK_CONTAINS(e.msg, "storing the plan");
        char *got = NULL;
        CHECK_INT(ap_db_plan_get(db, key, &got, NULL, &e), AP_OK); /* still usable: a miss */
        CHECK(got == NULL);
        free(json);
        ap_db_close(db);
    }
    CHECK(same_snap(&s, fsize_path));
    free_snap(&s);
}

/* ---- export / import -------------------------------------------------------------------------- */

static void fill_db(ap_db *db) {
    ap_err e;
    ap_db_profile p[5];
    for (int i = 0; i < 5; i++) make_profile(&p[i], i < 3 ? "h100-sxm" : "a100-sxm4-80g", i);
    snprintf(p[1].device_name, sizeof p[1].device_name, "quote \" comma , newline \n end");
    CHECK_INT(ap_db_profiles_insert(db, p, 5, NULL, &e), AP_OK);
    char key[AP_DB_KEY_HEX + 1];
    ap_db_plan_key("export", key);
    CHECK_INT(ap_db_plan_put(db, key, "gpt3-175b on 1024x a100", "{\"ranked\":[{\"tp\":8}]}",
                             42.25, &e), AP_OK);
    ap_db_run r;
    ap_db_run_rank k[4];
    make_run(&r, k, 4, "node-x", 1763700000, "{\"tp\":4}");
    snprintf(r.plan_key, sizeof r.plan_key, "%s", key);
    CHECK_INT(ap_db_run_insert(db, &r, k, 4, NULL, &e), AP_OK);
}

/* Drop the "exported_at" line so two exports can be compared. */
static void strip_exported_at(char *s) {
    char *p = strstr(s, "\"exported_at\"");
    if (!p) return;
    char *eol = strchr(p, '\n');
    if (eol) memmove(p, eol + 1, strlen(eol + 1) + 1);
}

static void test_export_import(const char *dir) {
    ap_err e;
    ap_db *a = open_rw(path_in(dir, "exp_a.db")), *b = open_rw(path_in(dir, "exp_b.db"));
    CHECK(a && b);
    if (!a || !b) {
        ap_db_close(a);
        ap_db_close(b);
        return;
    }
    fill_db(a);
    char *ja = NULL, *jb = NULL;
    CHECK_INT(ap_db_export_json(a, &ja, &e), AP_OK);
    ap_db_import_counts c;
    CHECK_INT(ap_db_import_json(b, ja, strlen(ja), "a.json", &c, &e), AP_OK);
    CHECK_INT(c.plans, 1);
    CHECK_INT(c.profiles, 5);
    CHECK_INT(c.runs, 1);
    CHECK_INT(c.profiles_new, 5);
    CHECK_INT(c.runs_new, 1);
    CHECK_INT(count(b, "run_ranks"), 4);
    CHECK_INT(ap_db_export_json(b, &jb, &e), AP_OK);
    if (ja && jb) {
        strip_exported_at(ja);
        strip_exported_at(jb);
        CHECK_STR(jb, ja); /* a lossless round trip */
    }
    uint64_t fa = 0, fb = 1;
    ap_db_profiles_fingerprint(a, "h100-sxm", &fa, &e);
    ap_db_profiles_fingerprint(b, "h100-sxm", &fb, &e);
    CHECK(fa == fb);
    /* Importing again adds nothing. */
    CHECK_INT(ap_db_import_json(b, ja, strlen(ja), "a.json", &c, &e), AP_OK);
    CHECK_INT(c.plans_new + c.profiles_new + c.runs_new, 0);
    CHECK_INT(count(b, "profiles"), 5);

    /* CSV: header + one line per row, RFC 4180 quoting. */
    char *csv = NULL;
    CHECK_INT(ap_db_export_csv(a, "profiles", &csv, &e), AP_OK);
    if (csv) {
        CHECK(strncmp(csv, "id,gpu,device_name,pci_id,", 26) == 0);
        CHECK_CONTAINS(csv, "\"quote \"\" comma , newline \n end\"");
    }
    free(csv);
    CHECK_INT(ap_db_export_csv(a, "runs", &csv, &e), AP_OK);
    if (csv) CHECK_CONTAINS(csv, ",node-x,cpu,1763700000,4,");
    free(csv);
    CHECK_INT(ap_db_export_csv(a, "nope", &csv, &e), AP_ERR_INPUT);

    /* Bad input: every case refused with the file, the field and the reason; nothing stored. */
    static const struct {
        const char *text, *want1, *want2;
    } bad[] = {
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [", "bad.json",
         "invalid JSON"},
        {"[1, 2]", "bad.json", "must be a JSON object"},
        {"{\"format\": \"something-else\", \"format_version\": 1}", "format", "autoplan-db-export"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 7}", "format_version", "newer"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profile\": []}",
         "unknown field 'profile'", "bad.json"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": {}}",
         "'profiles' must be an array", "bad.json"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [3]}",
         "profiles[0] must be an object", "bad.json"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"op\": "
         "\"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": 1, \"samples\": 3}]}",
         "profiles[0]", "missing field 'gpu'"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"gpu\": "
         "\"h100-sxm\", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": "
         "-1, \"samples\": 3}]}", "field 'time_s'", "out of range"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"gpu\": "
         "\"h100-sxm\", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": "
         "1, \"samples\": \"many\"}]}", "field 'samples'", "must be an integer"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"plans\": [{\"key\": "
         "\"xyz\", \"summary\": \"\", \"search_s\": 1, \"created_at\": 1, \"used_at\": 1, "
         "\"result_json\": \"{}\"}]}", "plans[0]", "32 lower-case hex"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"runs\": [{\"host\": \"h\","
         " \"backend\": \"cpu\", \"started_at\": 5, \"ranks\": 2, \"predicted_step_s\": 1, "
         "\"measured_step_s\": 1, \"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1, "
         "\"plan_json\": \"{}\", \"per_rank\": [{\"rank\": 2, \"predicted_step_s\": 1, "
         "\"measured_step_s\": 1, \"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1}]}]}",
         "runs[0].per_rank[0]", "field 'rank'"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"gpu\": "
         "\"h100-sxm\", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": "
         "1, \"samples\": 3, \"colour\": \"red\"}]}", "unknown field 'colour'", "profiles[0]"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"runs\": [{\"host\": \"h\","
         " \"backend\": \"cpu\", \"started_at\": 5, \"ranks\": 2, \"predicted_step_s\": 1, "
         "\"measured_step_s\": 1, \"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1, "
         "\"plan_json\": \"{}\", \"plan_key\": \"zz\"}]}", "runs[0]", "field 'plan_key'"},
        {"{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"a\\nb\": 1}",
         "unknown field 'a?b'", "bad.json"},
        {"{\"format\": \"autoplan-\\r\\ndb\", \"format_version\": 1}", "got \"autoplan-??db\"",
         "bad.json"},
    };
    int64_t before = count(b, "profiles");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = '\0';
        CHECK_INT(ap_db_import_json(b, bad[i].text, strlen(bad[i].text), "bad.json", &c, &e),
                  AP_ERR_INPUT);
        CHECK_CONTAINS(e.msg, bad[i].want1);
        CHECK_CONTAINS(e.msg, bad[i].want2);
        CHECK(strchr(e.msg, '\n') == NULL);
    }
    CHECK_INT(count(b, "profiles"), before);

    /* Atomic: a file whose last row fails in the database (a duplicate rank, which only the
     * primary key catches) leaves none of its rows, including the valid profiles before it. */
    const char *partial =
        "{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"gpu\": "
        "\"rtx-4090\", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": 1,"
        " \"samples\": 3}], \"runs\": [{\"host\": \"h\", \"backend\": \"cpu\", \"started_at\": 5,"
        " \"ranks\": 2, \"predicted_step_s\": 1, \"measured_step_s\": 1, "
        "\"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1, \"plan_json\": \"{}\", "
        "\"per_rank\": [{\"rank\": 1, \"predicted_step_s\": 1, \"measured_step_s\": 1, "
        "\"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1}, {\"rank\": 1, "
        "\"predicted_step_s\": 1, \"measured_step_s\": 1, \"predicted_peak_bytes\": 1, "
        "\"measured_peak_bytes\": 1}]}]}";
    CHECK_INT(ap_db_import_json(b, partial, strlen(partial), "partial.json", &c, &e),
              AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "rank 1 appears twice");
    CHECK_INT(count(b, "profiles"), before);
    CHECK_INT(count(b, "runs"), 1);
    /* Same, failing at commit (injected): still nothing. */
    ap_db_close(b);
    ap_db_opts o;
    ap_db_opts_init(&o);
    o.path = path_in(dir, "exp_b.db");
    int calls = 0;
    o.before_commit = fail_hook;
    o.hook_arg = &calls;
    CHECK_INT(ap_db_open_opts(&o, &b, &e), AP_OK);
    const char *one =
        "{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"profiles\": [{\"gpu\": "
        "\"rtx-4090\", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": 1,"
        " \"samples\": 3}]}";
    if (b) {
        CHECK_INT(ap_db_import_json(b, one, strlen(one), "one.json", &c, &e), AP_ERR_DB);
        CHECK_INT(calls, 1);
        CHECK_INT(count(b, "profiles"), before);
    }
    free(ja);
    free(jb);
    ap_db_close(a);
    ap_db_close(b);
}

/* ---- the CLI ---------------------------------------------------------------------------------- */

static int run_cli(const char *fmt, const char *a, const char *b, char **out, char **err) {
    char args[4096];
    snprintf(args, sizeof args, fmt, a, b);
    return tl_run(args, out, err);
}

static int one_line(const char *s) {
    if (!s) return 0;
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == '\0';
}

static void test_cli(const char *dir) {
    if (access(tl_bin, X_OK) != 0) {
        CHECK(!"the autoplan binary is missing (argv[2])");
        return;
    }
    char *out = NULL, *err = NULL;
    const char *db = path_in(dir, "cli.db");
    /* help */
    CHECK_INT(tl_run("db --help", &out, &err), 0);
    CHECK_CONTAINS(out, "gc --older-than");
    free(out), free(err);
    static const char *const subs[] = {"path", "list", "show", "export", "import", "gc"};
    for (size_t i = 0; i < 6; i++) {
        CHECK_INT(run_cli("db %s --help", subs[i], "", &out, &err), 0);
        CHECK_CONTAINS(out, "--db PATH");
        free(out), free(err);
    }
    CHECK_INT(tl_run("db", &out, &err), 2);
    free(out), free(err);
    CHECK_INT(tl_run("db frobnicate", &out, &err), 2);
    CHECK_CONTAINS(err, "unknown subcommand 'frobnicate'");
    free(out), free(err);
    /* path */
    CHECK_INT(run_cli("db path --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, db);
    free(out), free(err);
    /* list on a missing database: exit 2 as show and export (README "Exit status"), nothing
     * created */
    CHECK_INT(run_cli("db list --db '%s'", db, "", &out, &err), 2);
    CHECK_CONTAINS(err, "no database there yet");
    CHECK(access(db, F_OK) != 0);
    free(out), free(err);
    /* import an export made through the API */
    ap_db *src = open_rw(path_in(dir, "cli_src.db"));
    CHECK(src != NULL);
    if (!src) return;
    fill_db(src);
    ap_db_plan_info old = {0};
    ap_db_plan_key("old plan", old.key);
    snprintf(old.summary, sizeof old.summary, "an old plan");
    old.created_at = old.used_at = 1577836800;
    ap_err e;
    CHECK_INT(ap_db_plan_import(src, &old, "{\"old\":1}", NULL, &e), AP_OK);
    char *json = NULL;
    CHECK_INT(ap_db_export_json(src, &json, &e), AP_OK);
    ap_db_close(src);
    const char *exp = path_in(dir, "export.json");
    CHECK(json && tl_write(exp, json) == 0);
    free(json);
    CHECK_INT(run_cli("db import '%s' --db '%s'", exp, db, &out, &err), 0);
    CHECK_CONTAINS(out, "2 plans (2 new), 5 profiles (5 new), 1 runs (1 new)");
    free(out), free(err);
    CHECK_INT(run_cli("db import '%s' --db '%s'", exp, db, &out, &err), 0);
    CHECK_CONTAINS(out, "(0 new)");
    free(out), free(err);
    /* list */
    CHECK_INT(run_cli("db list --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "plans (2)");
    CHECK_CONTAINS(out, "profiles (5)");
    CHECK_CONTAINS(out, "runs (1)");
    CHECK_CONTAINS(out, "gpt3-175b on 1024x a100");
    CHECK_CONTAINS(out, "profile:1");
    CHECK_CONTAINS(out, "run:1");
    free(out), free(err);
    CHECK_INT(run_cli("db list profiles --gpu a100-sxm4-80g --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "profiles (2)");
    CHECK(strstr(out, "plans (") == NULL);
    free(out), free(err);
    CHECK_INT(run_cli("db list tables --db '%s'", db, "", &out, &err), 2);
    CHECK(one_line(err));
    free(out), free(err);
    /* show */
    CHECK_INT(run_cli("db show run:1 --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "node-x");
    CHECK_CONTAINS(out, "per rank:");
    free(out), free(err);
    CHECK_INT(run_cli("db show profile:2 --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "NVIDIA H100 80GB HBM3");
    CHECK_CONTAINS(out, "10de:2330");
    free(out), free(err);
    char key[AP_DB_KEY_HEX + 1], prefix[9];
    ap_db_plan_key("export", key);
    snprintf(prefix, sizeof prefix, "%.8s", key);
    CHECK_INT(run_cli("db show %s --db '%s'", prefix, db, &out, &err), 0);
    CHECK_CONTAINS(out, key);
    CHECK_CONTAINS(out, "{\"ranked\":[{\"tp\":8}]}");
    free(out), free(err);
    CHECK_INT(run_cli("db show run:99 --db '%s'", db, "", &out, &err), 2);
    CHECK_CONTAINS(err, "no run:99");
    free(out), free(err);
    CHECK_INT(run_cli("db show bogus --db '%s'", db, "", &out, &err), 2);
    CHECK(one_line(err));
    free(out), free(err);
    /* export */
    CHECK_INT(run_cli("db export --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"format\": \"autoplan-db-export\"");
    free(out), free(err);
    const char *csvf = path_in(dir, "p.csv");
    CHECK_INT(run_cli("db export --csv --table profiles --output '%s' --db '%s'", csvf, db, &out,
                      &err), 0);
    char *csv = tl_read(csvf);
    CHECK(csv && strncmp(csv, "id,gpu,", 7) == 0);
    free(csv);
    free(out), free(err);
    CHECK_INT(run_cli("db export --json --csv --db '%s'", db, "", &out, &err), 2);
    free(out), free(err);
    /* import: bad input is one line naming the file and field, exit 2, nothing stored */
    const char *badf = path_in(dir, "bad_import.json");
    CHECK(tl_write(badf, "{\"format\": \"autoplan-db-export\", \"format_version\": 1, "
                         "\"profiles\": [{\"gpu\": \"h100-sxm\", \"op\": \"gemm\", \"shape\": "
                         "\"m=1,n=1,k=1\", \"dtype\": \"bf16\", \"time_s\": 0, \"samples\": 3}]}") == 0);
    CHECK_INT(run_cli("db import '%s' --db '%s'", badf, db, &out, &err), 2);
    CHECK(one_line(err));
    CHECK_CONTAINS(err, badf);
    CHECK_CONTAINS(err, "time_s");
    free(out), free(err);
    CHECK_INT(run_cli("db import '%s' --db '%s'", path_in(dir, "missing.json"), db, &out, &err),
              2);
    CHECK(one_line(err));
    free(out), free(err);
    /* gc */
    CHECK_INT(run_cli("db gc --db '%s'", db, "", &out, &err), 2);
    CHECK_CONTAINS(err, "--older-than");
    free(out), free(err);
    CHECK_INT(run_cli("db gc --older-than 30 --db '%s'", db, "", &out, &err), 2);
    CHECK_CONTAINS(err, "--older-than");
    CHECK(one_line(err));
    free(out), free(err);
    CHECK_INT(run_cli("db gc --older-than 30d --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "deleted 1 cached plans");
    free(out), free(err);
    CHECK_INT(run_cli("db list plans --db '%s'", db, "", &out, &err), 0);
    CHECK_CONTAINS(out, "plans (1)");
    free(out), free(err);
    /* a database that cannot be used: clear message with the path, exit 1, file untouched */
    const char *notes = path_in(dir, "cli_notes.db");
    CHECK(tl_write(notes, "not a database\n") == 0);
    snapshot s = snap(notes);
    CHECK_INT(run_cli("db import '%s' --db '%s'", exp, notes, &out, &err), 1);
    CHECK_CONTAINS(err, notes);
    CHECK(one_line(err));
    CHECK(same_snap(&s, notes));
    free_snap(&s);
    free(out), free(err);
    /* the WAL fallback from the command line */
    setenv("AUTOPLAN_DB_NO_WAL", "1", 1);
    setenv("AUTOPLAN_LOG", "info", 1);
    const char *nw = path_in(dir, "cli_nowal.db");
    CHECK_INT(run_cli("db import '%s' --db '%s'", exp, nw, &out, &err), 0);
    CHECK_CONTAINS(err, "journal_mode=DELETE");
    free(out), free(err);
    unsetenv("AUTOPLAN_DB_NO_WAL");
    unsetenv("AUTOPLAN_LOG");
    char walf[1100];
    snprintf(walf, sizeof walf, "%s-wal", nw);
    CHECK(access(walf, F_OK) != 0);
}

/* `autoplan plan` with the cache at the default path (the lead's command, db.h's pattern): a
 * repeat is answered from the cache, an imported profile of the GPU makes it miss, --no-cache
 * touches nothing, and an unusable database only costs a warning. */
static void test_cli_plan(const char *dir) {
    if (access(tl_bin, X_OK) != 0) return; /* test_cli already failed on it */
    char *out = NULL, *err = NULL, xdg[1200], model[1200];
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    snprintf(model, sizeof model, "'%s'", tl_path("examples/models/tiny-gpt.json"));
    const char *args = "plan %s --gpus 8 --gpu h100 --json%s";
    snprintf(xdg, sizeof xdg, "%s/xdg-plan", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    CHECK_INT(run_cli(args, model, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"cached\": false");
    free(out), free(err);
    CHECK_INT(run_cli(args, model, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"cached\": true");
    free(out), free(err);
    /* Importing an H100 profile changes the calibration: the cached plan misses. */
    const char *prof = path_in(dir, "h100-profile.json");
    CHECK(tl_write(prof, "{\"format\": \"autoplan-db-export\", \"format_version\": 1, "
                         "\"profiles\": [{\"gpu\": \"h100-sxm\", \"op\": \"gemm\", \"shape\": "
                         "\"m=4096,n=4096,k=4096\", \"dtype\": \"bf16\", \"time_s\": 0.0002, "
                         "\"flops_per_s\": 6.9e14, \"samples\": 20}]}") == 0);
    CHECK_INT(run_cli("db import '%s'%s", prof, "", &out, &err), 0);
    CHECK_CONTAINS(out, "1 profiles (1 new)");
    free(out), free(err);
    CHECK_INT(run_cli(args, model, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"cached\": false");
    free(out), free(err);
    CHECK_INT(run_cli(args, model, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"cached\": true");
    free(out), free(err);
    /* --no-cache: no database is created. */
    snprintf(xdg, sizeof xdg, "%s/xdg-nocache", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    CHECK_INT(run_cli(args, model, " --no-cache", &out, &err), 0);
    CHECK_CONTAINS(out, "\"cached\": false");
    CHECK(access(path_in(xdg, "autoplan/autoplan.db"), F_OK) != 0);
    free(out), free(err);
    /* A non-SQLite file at the default path: a warning naming it, a plan all the same, and the
     * file untouched. */
    snprintf(xdg, sizeof xdg, "%s/xdg-corrupt", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    char sub[1300];
    snprintf(sub, sizeof sub, "%s/autoplan", xdg);
    CHECK(mkdir(xdg, 0700) == 0 && mkdir(sub, 0700) == 0);
    const char *bad = path_in(sub, "autoplan.db");
    CHECK(tl_write(bad, "definitely not SQLite\n") == 0);
    snapshot sn = snap(bad);
    CHECK_INT(run_cli(args, model, "", &out, &err), 0);
    CHECK_CONTAINS(out, "\"plans\"");
    CHECK_CONTAINS(err, bad);
    CHECK_CONTAINS(err, "not an SQLite database");
    CHECK(same_snap(&sn, bad));
    free_snap(&sn);
    free(out), free(err);
    if (saved) setenv("XDG_CACHE_HOME", saved, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(saved);
}

/* ---- import: what the rows' own checks refuse (added with the fixes) ----------------------- */

#define EXPORT_HEAD "{\"format\": \"autoplan-db-export\", \"format_version\": 1, "
#define PLAN_ROW(rj) \
    "\"plans\": [{\"key\": \"00ab320b2b4e3c2c1088038afc77a99f\", \"summary\": \"s\", " \
    "\"search_s\": 1, \"created_at\": 1, \"used_at\": 1, \"result_json\": " rj "}]}"
#define RUN_ROW(ranks, pj, per_rank) \
    "\"runs\": [{\"plan_key\": \"\", \"host\": \"h\", \"backend\": \"cpu\", \"started_at\": 5, " \
    "\"ranks\": " ranks ", \"predicted_step_s\": 1, \"measured_step_s\": 1, " \
    "\"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1, \"plan_json\": " pj ", " \
    "\"per_rank\": " per_rank "}]}"
#define RANK(r) \
    "{\"rank\": " r ", \"predicted_step_s\": 1, \"measured_step_s\": 1, " \
    "\"predicted_peak_bytes\": 1, \"measured_peak_bytes\": 1}"
#define PROFILE_ROW(gpu) \
    "\"profiles\": [{\"gpu\": " gpu ", \"op\": \"gemm\", \"shape\": \"m=1,n=1,k=1\", " \
    "\"dtype\": \"bf16\", \"time_s\": 1, \"samples\": 3}]}"

/* `db import FILE` of a bad file: exit 2, one line naming the file and field, the database
 * byte-identical (and a database that did not exist still does not). */
static void import_refused(const char *dir, const char *text, const char *want1,
                           const char *want2) {
    const char *file = path_in(dir, "refused.json"), *db = path_in(dir, "refused.db"),
               *fresh = path_in(dir, "refused-fresh.db");
    CHECK(tl_write(file, text) == 0);
    snapshot before = snap(db);
    CHECK(before.ok);
    char *out = NULL, *err = NULL;
    CHECK_INT(run_cli("db import '%s' --db '%s'", file, db, &out, &err), 2);
    CHECK_CONTAINS(err, "refused.json");
    CHECK_CONTAINS(err, want1);
    CHECK_CONTAINS(err, want2);
    CHECK(one_line(err));
    CHECK(same_snap(&before, db));
    free_snap(&before);
    free(out), free(err);
    CHECK_INT(run_cli("db import '%s' --db '%s'", file, fresh, &out, &err), 2);
    CHECK(access(fresh, F_OK) != 0);
    free(out), free(err);
}

/* A database for import_refused to keep unchanged: one row of each table, closed. */
static void make_refused_db(const char *dir) {
    ap_db *db = open_rw(path_in(dir, "refused.db"));
    CHECK(db != NULL);
    if (db) fill_db(db);
    ap_db_close(db);
}

/* result_json and plan_json are JSON text that the cache and `db show` parse later: an import
 * refuses what they would refuse, with the row and field. */
static void test_import_json_text(const char *dir) {
    ap_err e;
    ap_db_import_counts c;
    ap_db *db = open_rw(path_in(dir, "jtext.db"));
    CHECK(db != NULL);
    if (!db) return;
    static const struct {
        const char *text, *want1, *want2;
    } bad[] = {
        {EXPORT_HEAD PLAN_ROW("\"{bad\""), "plans[0]: field 'result_json'", "invalid JSON"},
        {EXPORT_HEAD PLAN_ROW("\"[1, 2]\""), "plans[0]: field 'result_json'", "JSON object"},
        {EXPORT_HEAD PLAN_ROW("\"\""), "plans[0]: field 'result_json'", "invalid JSON"},
        {EXPORT_HEAD RUN_ROW("1", "\"not json\"", "[]"), "runs[0]: field 'plan_json'",
         "invalid JSON"},
        {EXPORT_HEAD RUN_ROW("1", "\"3\"", "[]"), "runs[0]: field 'plan_json'", "JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = '\0';
        CHECK_INT(ap_db_import_json(db, bad[i].text, strlen(bad[i].text), "j.json", &c, &e),
                  AP_ERR_INPUT);
        CHECK_CONTAINS(e.msg, "j.json: ");
        CHECK_CONTAINS(e.msg, bad[i].want1);
        CHECK_CONTAINS(e.msg, bad[i].want2);
        CHECK(strchr(e.msg, '\n') == NULL);
    }
    CHECK_INT(count(db, "plans"), 0);
    CHECK_INT(count(db, "runs"), 0);
    const char *good = EXPORT_HEAD PLAN_ROW("\"{\\\"ranked\\\": []}\"");
    CHECK_INT(ap_db_import_json(db, good, strlen(good), "j.json", &c, &e), AP_OK);
    CHECK_INT(c.plans_new, 1);
    ap_db_close(db);
    make_refused_db(dir);
    import_refused(dir, EXPORT_HEAD PLAN_ROW("\"{bad\""), "field 'result_json'", "invalid JSON");
    import_refused(dir, EXPORT_HEAD RUN_ROW("1", "\"not json\"", "[]"), "field 'plan_json'",
                   "invalid JSON");
}

/* A run's per_rank rows are all of its ranks or none. */
static void test_import_per_rank(const char *dir) {
    ap_err e;
    ap_db_import_counts c;
    ap_db *db = open_rw(path_in(dir, "perrank.db"));
    CHECK(db != NULL);
    if (!db) return;
    const char *part = EXPORT_HEAD RUN_ROW("64", "\"{}\"", "[" RANK("0") ", " RANK("1") "]");
    CHECK_INT(ap_db_import_json(db, part, strlen(part), "p.json", &c, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "p.json: runs[0]: field 'per_rank': ranks is 64 but per_rank has 2 "
                          "entries");
    const char *many = EXPORT_HEAD RUN_ROW("1", "\"{}\"", "[" RANK("0") ", " RANK("0") "]");
    CHECK_INT(ap_db_import_json(db, many, strlen(many), "p.json", &c, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "ranks is 1 but per_rank has 2 entries");
    CHECK_INT(count(db, "runs"), 0);
    /* a run recorded without rank rows exports "per_rank": [] and must import again */
    const char *none = EXPORT_HEAD RUN_ROW("64", "\"{}\"", "[]");
    CHECK_INT(ap_db_import_json(db, none, strlen(none), "p.json", &c, &e), AP_OK);
    const char *all = EXPORT_HEAD RUN_ROW("2", "\"{\\\"tp\\\": 2}\"", "[" RANK("1") ", "
                                          RANK("0") "]");
    CHECK_INT(ap_db_import_json(db, all, strlen(all), "p.json", &c, &e), AP_OK);
    CHECK_INT(count(db, "runs"), 2);
    CHECK_INT(count(db, "run_ranks"), 2);
    ap_db_close(db);
    make_refused_db(dir);
    import_refused(dir, part, "field 'per_rank'", "ranks is 64 but per_rank has 2 entries");
}

/* Profile rows pass the GPU check of `profile import`; a catalog alias is stored under the
 * catalog name, which is what plans look rows up by. */
static void test_import_profile_gpu(const char *dir) {
    ap_err e;
    ap_db_import_counts c;
    ap_db *db = open_rw(path_in(dir, "pgpu.db"));
    CHECK(db != NULL);
    if (!db) return;
    const char *bad = EXPORT_HEAD PROFILE_ROW("\"nonexistent-gpu\"");
    CHECK_INT(ap_db_import_json(db, bad, strlen(bad), "g.json", &c, &e), AP_ERR_INPUT);
    CHECK_CONTAINS(e.msg, "g.json: profiles[0]: field 'gpu': unknown GPU 'nonexistent-gpu'");
    CHECK(strchr(e.msg, '\n') == NULL);
    CHECK_INT(count(db, "profiles"), 0);
    const char *alias = EXPORT_HEAD PROFILE_ROW("\"v100\"");
    CHECK_INT(ap_db_import_json(db, alias, strlen(alias), "g.json", &c, &e), AP_OK);
    ap_db_profile *rows = NULL;
    size_t n = 0;
    CHECK_INT(ap_db_profiles_list(db, NULL, &rows, &n, &e), AP_OK);
    CHECK_INT(n, 1);
    if (n == 1) CHECK_STR(rows[0].gpu, "v100-sxm2-32g"); /* `autoplan gpus`: alias v100 */
    free(rows);
    ap_db_close(db);
    make_refused_db(dir);
    import_refused(dir, bad, "field 'gpu'", "unknown GPU 'nonexistent-gpu'");
}

/* A run stored without a prediction (`run --no-bench` stores 0) shows "-" as the run printed,
 * not "0.0 us", in `db list` and `db show`, for the run and every rank. */
static void test_run_no_prediction(const char *dir) {
    const char *path = path_in(dir, "nopred.db");
    ap_db *db = open_rw(path);
    CHECK(db != NULL);
    if (!db) return;
    ap_db_run r;
    ap_db_run_rank k[2];
    make_run(&r, k, 2, "node-np", 1763700000, "{\"tp\":1}");
    r.predicted_step_s = 0;
    k[0].predicted_step_s = k[1].predicted_step_s = 0;
    ap_err e;
    int64_t id = 0;
    CHECK_INT(ap_db_run_insert(db, &r, k, 2, &id, &e), AP_OK);
    ap_db_close(db);
    char *out = NULL, *err = NULL, show[64];
    CHECK_INT(run_cli("db list runs --db '%s'%s", path, "", &out, &err), 0);
    CHECK(out && !strstr(out, "0.0 us"));
    CHECK_CONTAINS(out, "      -      1.620 s");
    free(out), free(err);
    snprintf(show, sizeof show, "run:%lld", (long long)id);
    CHECK_INT(run_cli("db show %s --db '%s'", show, path, &out, &err), 0);
    CHECK(out && !strstr(out, "0.0 us"));
    CHECK_CONTAINS(out, "step time:      predicted -, measured 1.620 s");
    CHECK_CONTAINS(out, "       0            -");
    CHECK_CONTAINS(out, "       1            -");
    free(out), free(err);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    const char *d = tl_tmpdir();
    if (!d) {
        fprintf(stderr, "cannot make a temporary directory\n");
        return 1;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", d);
    ap_log_set_level(AP_LOG_ERROR);
    test_schema_file();
    test_keys();
    test_default_path(dir);
    test_open_migrate(dir);
    test_migrate_v1(dir);
    test_wal_fallback(dir);
    test_plan_cache(dir);
    test_gc_shrinks(dir, 0);
    test_gc_shrinks(dir, 1);
    test_profiles(dir);
    test_runs(dir);
    test_transactions(dir);
    test_concurrent(dir);
    test_kill9(dir);
    test_locked(dir);
    test_bad_files(dir);
    in_child(unprivileged_checks, 1);
    test_full_disk(dir);
    snprintf(fsize_path, sizeof fsize_path, "%s/fsize.db", dir);
    make_small_db(fsize_path);
    in_child(fsize_full_disk, 0);
    {
        ap_db *db = open_rw(fsize_path);
        ap_err e;
        if (db) CHECK_INT(ap_db_integrity_check(db, &e), AP_OK);
        if (db) CHECK_INT(count(db, "plans"), 0);
        ap_db_close(db);
    }
    test_export_import(dir);
    test_cli(dir);
    test_cli_plan(dir);
    test_import_json_text(dir);
    test_import_per_rank(dir);
    test_import_profile_gpu(dir);
    test_run_no_prediction(dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tl_finish();
}
