/*
 * trace.c - autoplan's activity records (include/autoplan/profiler.h): the trace that holds
 * them with interned names, and the trace file the injection library writes at exit and
 * `autoplan profile attach` reads back.
 *
 * Names (kernel names, NVTX range names, API names) repeat millions of times in a training
 * run, so the trace keeps each once: a byte array of NUL-terminated names and an
 * open-addressing table of their offsets (FNV-1a hash, linear probing, grown at 1/2 load).
 *
 * The file: a fixed header, the records, the name bytes (docs/profiler.md). The reader trusts
 * nothing: magic, version, record size, counts against the file length, every kind and copy
 * direction, every name index (it must start a name), and a NUL at the end of the names.
 *
 * What it does not do: talk to CUPTI (cupti.c converts CUPTI's records into these) or
 * interpret records (attrib.c).
 */
#include "autoplan/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 4095
#define TRACE_MAGIC "APTRACE1"
#define TRACE_VERSION 1u

/* ---- the trace and its names ---------------------------------------------------------------- */

void ap_trace_init(ap_trace *t) { memset(t, 0, sizeof *t); }

void ap_trace_free(ap_trace *t) {
    if (!t) return;
    ap_free(t->recs);
    ap_free(t->names);
    ap_free(t->slots);
    memset(t, 0, sizeof *t);
}

const char *ap_trace_name(const ap_trace *t, uint32_t i) {
    if (!t || i == 0 || i >= t->names_len) return "";
    return t->names + i;
}

static uint64_t name_hash(const char *s, size_t n) { return ap_hash64(s, n, 0); }

/* Rebuild the slot table with `cap` slots (a power of two) from the names. */
static int rehash(ap_trace *t, size_t cap) {
    uint32_t *slots = ap_calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t at = 1; at < t->names_len;) {
        size_t l = strlen(t->names + at);
        size_t h = (size_t)name_hash(t->names + at, l) & (cap - 1);
        while (slots[h]) h = (h + 1) & (cap - 1);
        slots[h] = (uint32_t)at;
        at += l + 1;
    }
    ap_free(t->slots);
    t->slots = slots;
    t->nslots = cap;
    return 1;
}

uint32_t ap_trace_intern(ap_trace *t, const char *name, ap_status *st) {
    *st = AP_OK;
    if (!name || !name[0]) return 0;
    size_t l = strnlen(name, NAME_MAX_BYTES);
    if (!t->names) { /* index 0 is the empty name */
        t->names = ap_malloc(4096);
        if (!t->names) { *st = AP_ERR_NOMEM; return 0; }
        t->names[0] = '\0';
        t->names_len = 1;
        t->names_cap = 4096;
    }
    if (!t->slots && !rehash(t, 1024)) { *st = AP_ERR_NOMEM; return 0; }
    size_t h = (size_t)name_hash(name, l) & (t->nslots - 1);
    while (t->slots[h]) {
        const char *s = t->names + t->slots[h];
        if (!strncmp(s, name, l) && s[l] == '\0') return t->slots[h];
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->names_len + l + 1 > UINT32_MAX) { *st = AP_ERR_NOMEM; return 0; }
    if (t->names_len + l + 1 > t->names_cap) {
        size_t cap = t->names_cap;
        while (cap < t->names_len + l + 1) cap *= 2;
        char *nn = ap_realloc(t->names, cap);
        if (!nn) { *st = AP_ERR_NOMEM; return 0; }
        t->names = nn;
        t->names_cap = cap;
    }
    uint32_t at = (uint32_t)t->names_len;
    memcpy(t->names + at, name, l);
    t->names[at + l] = '\0';
    t->names_len += l + 1;
    t->slots[h] = at;
    t->nnames++;
    /* keep the load under 1/2: probing stays short */
    if (2 * t->nnames > t->nslots && !rehash(t, 2 * t->nslots)) {
        t->slots[h] = 0; /* undo: the name bytes stay but are unreachable, harmless */
        t->nnames--;
        *st = AP_ERR_NOMEM;
        return 0;
    }
    return at;
}

ap_status ap_trace_add(ap_trace *t, const ap_trace_rec *rec, const char *name, ap_err *err) {
    if (t->max_recs && t->n >= t->max_recs) {
        t->dropped++;
        return AP_OK;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 4096;
        ap_trace_rec *nr = ap_realloc(t->recs, cap * sizeof *nr);
        if (!nr) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu trace records", cap);
        t->recs = nr;
        t->cap = cap;
    }
    ap_status st;
    uint32_t idx = ap_trace_intern(t, name, &st);
    if (st != AP_OK) return ap_err_set(err, st, "out of memory for trace names");
    t->recs[t->n] = *rec;
    t->recs[t->n].name = idx;
    t->n++;
    return AP_OK;
}

/* ---- the file ------------------------------------------------------------------------------------ */

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t rec_size;
    uint64_t nrecs;
    uint64_t names_len;
    uint64_t dropped;
    char status[512];
} file_header;

ap_status ap_trace_write(const ap_trace *t, const char *path, ap_err *err) {
    file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TRACE_MAGIC, 8);
    h.version = TRACE_VERSION;
    h.rec_size = (uint32_t)sizeof(ap_trace_rec);
    h.nrecs = t->n;
    h.names_len = t->names ? t->names_len : 1;
    h.dropped = t->dropped;
    snprintf(h.status, sizeof h.status, "%s", t->status);
    size_t total = sizeof h + t->n * sizeof(ap_trace_rec) + (size_t)h.names_len;
    char *buf = ap_malloc(total);
    if (!buf) return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory for %zu bytes", path, total);
    memcpy(buf, &h, sizeof h);
    if (t->n) memcpy(buf + sizeof h, t->recs, t->n * sizeof(ap_trace_rec));
    if (t->names) memcpy(buf + sizeof h + t->n * sizeof(ap_trace_rec), t->names, t->names_len);
    else buf[total - 1] = '\0';
    ap_status st = ap_write_file_atomic(path, buf, total, err);
    ap_free(buf);
    return st;
}

/* Is `i` the start of a name: 0, or inside the table right after a NUL. */
static int name_index_ok(const char *names, size_t len, uint32_t i) {
    return i == 0 || (i < len && names[i - 1] == '\0');
}

ap_status ap_trace_parse(const void *data, size_t len, const char *where, ap_trace *t,
                         ap_err *err) {
    ap_trace_init(t);
    file_header h;
    if (len < sizeof h)
        return ap_err_set(err, AP_ERR_INPUT, "%s: not an autoplan trace (%zu bytes, shorter "
                          "than the %zu-byte header)", where, len, sizeof h);
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, TRACE_MAGIC, 8))
        return ap_err_set(err, AP_ERR_INPUT, "%s: not an autoplan trace (bad magic)", where);
    if (h.version != TRACE_VERSION || h.rec_size != sizeof(ap_trace_rec))
        return ap_err_set(err, AP_ERR_INPUT, "%s: trace version %u with %u-byte records; this "
                          "autoplan reads version %u with %zu-byte records (use the injection "
                          "library of the same build)", where, h.version, h.rec_size,
                          TRACE_VERSION, sizeof(ap_trace_rec));
    if (memchr(h.status, '\0', sizeof h.status) == NULL)
        return ap_err_set(err, AP_ERR_INPUT, "%s: status text not terminated", where);
    size_t body = len - sizeof h;
    if (h.nrecs > body / sizeof(ap_trace_rec) || h.names_len < 1 ||
        h.names_len != body - h.nrecs * sizeof(ap_trace_rec))
        return ap_err_set(err, AP_ERR_INPUT, "%s: truncated or inconsistent trace (%llu records "
                          "and %llu name bytes do not make %zu bytes)", where,
                          (unsigned long long)h.nrecs, (unsigned long long)h.names_len, len);
    const char *names = (const char *)data + sizeof h + h.nrecs * sizeof(ap_trace_rec);
    if (names[0] != '\0' || names[h.names_len - 1] != '\0' || h.names_len > UINT32_MAX)
        return ap_err_set(err, AP_ERR_INPUT, "%s: malformed name table", where);
    const char *recs = (const char *)data + sizeof h;
    for (uint64_t i = 0; i < h.nrecs; i++) {
        ap_trace_rec r;
        memcpy(&r, recs + i * sizeof r, sizeof r);
        if (r.kind < AP_REC_KERNEL || r.kind >= AP_REC_KIND_END)
            return ap_err_set(err, AP_ERR_INPUT, "%s: record %llu: unknown kind %u", where,
                              (unsigned long long)i, r.kind);
        if (r.copy_dir >= AP_COPY_DIR_END || r.src_kind >= AP_MEMK_END || r.dst_kind >= AP_MEMK_END)
            return ap_err_set(err, AP_ERR_INPUT, "%s: record %llu: bad copy direction or memory "
                              "kind", where, (unsigned long long)i);
        if (r.end_ns < r.start_ns)
            return ap_err_set(err, AP_ERR_INPUT, "%s: record %llu: ends before it starts", where,
                              (unsigned long long)i);
        if (!name_index_ok(names, (size_t)h.names_len, r.name))
            return ap_err_set(err, AP_ERR_INPUT, "%s: record %llu: name index %u is not a name",
                              where, (unsigned long long)i, r.name);
    }
    t->recs = h.nrecs ? ap_malloc((size_t)h.nrecs * sizeof *t->recs) : NULL;
    t->names = ap_malloc((size_t)h.names_len);
    if ((h.nrecs && !t->recs) || !t->names) {
        ap_trace_free(t);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory reading the trace", where);
    }
    if (h.nrecs) memcpy(t->recs, recs, (size_t)h.nrecs * sizeof *t->recs);
    memcpy(t->names, names, (size_t)h.names_len);
    t->n = t->cap = (size_t)h.nrecs;
    t->names_len = t->names_cap = (size_t)h.names_len;
    t->dropped = h.dropped;
    snprintf(t->status, sizeof t->status, "%s", h.status);
    for (size_t i = 1; i < t->names_len; i++) t->nnames += t->names[i] == '\0';
    size_t cap = 1024;
    while (cap < 4 * t->nnames) cap *= 2;
    if (!rehash(t, cap)) {
        ap_trace_free(t);
        return ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory reading the trace", where);
    }
    return AP_OK;
}

ap_status ap_trace_read(const char *path, ap_trace *t, ap_err *err) {
    ap_trace_init(t);
    char *data = NULL;
    size_t len = 0;
    ap_status st = ap_read_file(path, (size_t)16 << 30, &data, &len, err);
    if (st != AP_OK) return st;
    st = ap_trace_parse(data, len, path, t, err);
    ap_free(data);
    return st;
}
