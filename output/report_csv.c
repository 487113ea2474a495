/*
 * report_csv.c - plans.csv (report.h): one row per feasible plan the enumeration kept, in the
 * rows' order, a column per estimate field that is a report-row field, named by JSON path.
 *
 * The file is tens of MB (mixtral-8x7b on 64 GPUs: 90,000 rows, 54 MB), so it is formatted in
 * chunks of CSV_CHUNK_ROWS rows on r->threads threads and handed to the writer in order while
 * later chunks are still being formatted: writing (the kernel's copy into the page cache)
 * overlaps formatting, no copy of the whole file is ever made, and memory stays at a few
 * chunks. The calling thread writes; while the next chunk to write is not ready it formats
 * one of its own. A chunk's buffer is a slot of a ring of CSV_SLOTS_PER_THREAD
 * slots per thread, reused (its capacity kept) once written; a chunk is claimed only when its
 * slot is free, so a slow writer holds the formatters back instead of growing memory.
 *
 * The bytes do not depend on the thread count: chunk c is rows [c x CSV_CHUNK_ROWS, ...) and
 * is written after chunk c - 1, whoever formatted it.
 */
#include "autoplan/planio.h"
#include "autoplan/report.h"
#include "report_int.h"
#include "autoplan/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define CSV_CHUNK_ROWS 1024      /* rows per chunk: about 600 KB of text */
#define CSV_SLOTS_PER_THREAD 3   /* chunk buffers per formatting thread */
#define CSV_ROWS_PER_THREAD 8192 /* rows per thread below which fewer threads are used */

/* The plan of row r into p, an ap_plan_init'ed plan (the fields set here are all a row sets). */
static void row_plan(const ap_report_row *r, ap_plan *p) {
    p->trainer = (ap_trainer_id)r->trainer;
    p->tp = r->tp; p->pp = r->pp; p->dp = r->dp; p->cp = r->cp; p->ep = r->ep; p->etp = r->etp;
    p->vp = r->vp; p->zero = r->zero; p->recompute = (ap_recompute)r->recompute;
    p->recompute_layers = r->recompute_layers; p->sp = r->sp;
    p->overlap_grad = p->overlap_param = r->overlap;
    p->dtype = (ap_dtype)r->dtype; p->flash_attn = r->flash_attn;
    p->mbs = r->mbs; p->gbs = r->gbs; p->grad_accum = r->grad_accum; p->seq = r->seq;
    p->offload_optimizer = r->offload_optimizer; p->offload_params = r->offload_params;
}

typedef struct {
    const ap_report *r;
    const ap_estimate_field **col; /* the columns after the label */
    int nc;
    int64_t nchunks;
    int nslots;
    rbuf *slot;  /* chunk c is formatted into slot[c % nslots] */
    char *ready; /* per slot: its chunk is formatted and not yet written */
    int64_t next_claim, next_write;
    int stop;    /* a buffer or the writer failed: nobody claims another chunk */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} csv_job;

/* Rows [i0, i1) appended to b: each row is laid out in a line buffer and appended once (the
 * appends of its ~55 fields one by one cost as much as formatting them). A field whose text
 * could overflow the line buffer (an enum name is at most a few dozen characters; a number
 * 24) flushes it first. */
static void csv_rows(const csv_job *j, int64_t i0, int64_t i1, rbuf *b) {
    char line[1024];
    ap_plan p;
    ap_plan_init(&p);
    for (int64_t i = i0; i < i1 && !b->failed; i++) {
        const ap_report_row *q = &j->r->rows[i];
        const char *base = (const char *)q;
        row_plan(q, &p);
        size_t n = 0;
        line[n++] = '"';
        ap_plan_label(&p, line + n, 160); /* as `plan` prints it: at most 159 characters */
        n += strlen(line + n);
        line[n++] = '"';
        for (int k = 0; k < j->nc; k++) {
            const ap_estimate_field *f = j->col[k];
            const void *v = base + f->row_off;
            if (n > sizeof line - 64) {
                ap_strbuf_put(b, line, n);
                n = 0;
            }
            line[n++] = ',';
            int iv = f->kind == AP_FIELD_I64 || f->kind == AP_FIELD_REAL ? 0 : *(const int *)v;
            const char *t;
            switch (f->kind) {
            case AP_FIELD_INT: n += (size_t)ap_fmt_i64(iv, line + n); break;
            case AP_FIELD_I64: n += (size_t)ap_fmt_i64(*(const int64_t *)v, line + n); break;
            case AP_FIELD_REAL:
                /* %.17g, byte for byte (ap_fmt_g17), without printf's slow path */
                n += (size_t)ap_fmt_g17_len(*(const double *)v, line + n);
                break;
            default:
                t = f->kind == AP_FIELD_BOOL ? (iv ? "true" : "false") : ap_estimate_field_name(f, iv);
                size_t tn = strlen(t);
                if (tn < 60) {
                    memcpy(line + n, t, tn);
                    n += tn;
                } else {
                    ap_strbuf_put(b, line, n);
                    ap_strbuf_put(b, t, tn);
                    n = 0;
                }
                break;
            }
        }
        line[n++] = '\n';
        ap_strbuf_put(b, line, n);
    }
}

/* Claim the next chunk, format it into its slot, mark it ready; called and returning with
 * j->mu held, which it releases while formatting. The caller checked that the chunk's slot is
 * free (j->next_claim < j->next_write + j->nslots). */
static void claim_and_format(csv_job *j) {
    int64_t c = j->next_claim++;
    rbuf *b = &j->slot[c % j->nslots];
    pthread_mutex_unlock(&j->mu);
    b->len = 0;
    int64_t i0 = c * CSV_CHUNK_ROWS, i1 = i0 + CSV_CHUNK_ROWS;
    csv_rows(j, i0, i1 < j->r->nrows ? i1 : j->r->nrows, b);
    pthread_mutex_lock(&j->mu);
    if (b->failed) j->stop = 1;
    j->ready[c % j->nslots] = 1;
    pthread_cond_broadcast(&j->cv);
}

static int can_claim(const csv_job *j) {
    return !j->stop && j->next_claim < j->nchunks && j->next_claim < j->next_write + j->nslots;
}

static void *formatter(void *arg) {
    csv_job *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->stop && j->next_claim < j->nchunks && !can_claim(j))
            pthread_cond_wait(&j->cv, &j->mu);
        if (!can_claim(j)) break;
        claim_and_format(j);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* The calling thread: write the chunks in order, formatting one itself whenever the next to
 * write is not formatted yet and a slot is free. */
static ap_status write_chunks(csv_job *j, ap_report_csv_sink sink, void *ctx, ap_err *err) {
    ap_status st = AP_OK;
    pthread_mutex_lock(&j->mu);
    while (j->next_write < j->nchunks && !j->stop) {
        int s = (int)(j->next_write % j->nslots);
        if (j->ready[s]) {
            pthread_mutex_unlock(&j->mu);
            st = sink(ctx, j->slot[s].buf, j->slot[s].len, err);
            pthread_mutex_lock(&j->mu);
            j->ready[s] = 0;
            j->next_write++;
            if (st != AP_OK) j->stop = 1;
            pthread_cond_broadcast(&j->cv);
        } else if (can_claim(j)) {
            claim_and_format(j);
        } else {
            pthread_cond_wait(&j->cv, &j->mu);
        }
    }
    j->stop = 1; /* the formatters' exit condition, whatever ended the loop */
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return st;
}

/* The header line into b. */
static void csv_header(const csv_job *j, rbuf *b) {
    rb_puts(b, "label");
    for (int k = 0; k < j->nc; k++) {
        rb_puts(b, ",");
        rb_puts(b, j->col[k]->path);
    }
    rb_puts(b, "\n");
}

ap_status ap_report_csv_write(const ap_report *r, ap_report_csv_sink sink, void *ctx,
                              ap_err *err) {
    const int nf = ap_estimate_field_count();
    const int nt = rep_threads(r->threads, r->nrows, CSV_ROWS_PER_THREAD); /* the caller's too */
    csv_job j;
    memset(&j, 0, sizeof j);
    j.r = r;
    j.nchunks = (r->nrows + CSV_CHUNK_ROWS - 1) / CSV_CHUNK_ROWS;
    j.nslots = nt * CSV_SLOTS_PER_THREAD;
    j.col = ap_malloc((size_t)(nf > 0 ? nf : 1) * sizeof *j.col);
    j.slot = ap_calloc((size_t)j.nslots, sizeof *j.slot);
    j.ready = ap_calloc((size_t)j.nslots, 1);
    ap_status st = AP_OK;
    if (!j.col || !j.slot || !j.ready) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plans.csv");
        goto done;
    }
    for (int k = 0; k < nf; k++)
        if (ap_estimate_field_at(k)->row_off != AP_FIELD_NO_ROW)
            j.col[j.nc++] = ap_estimate_field_at(k);
    rbuf head = {0};
    csv_header(&j, &head);
    if (head.failed) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plans.csv");
    else st = sink(ctx, head.buf, head.len, err);
    ap_strbuf_free(&head);
    if (st != AP_OK) goto done;
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    /* nt - 1 formatters on helpers (threads.h); one that cannot be had leaves its share to
       the others and the calling thread */
    ap_tasks team;
    ap_tasks_start_same(&team, nt - 1, formatter, &j);
    st = write_chunks(&j, sink, ctx, err);
    ap_tasks_wait(&team);
    pthread_cond_destroy(&j.cv);
    pthread_mutex_destroy(&j.mu);
    if (st == AP_OK && j.next_write < j.nchunks)
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plans.csv");
done:
    for (int s = 0; j.slot && s < j.nslots; s++) ap_strbuf_free(&j.slot[s]);
    ap_free(j.col);
    ap_free(j.slot);
    ap_free(j.ready);
    return st;
}

static ap_status put_sink(void *ctx, const void *data, size_t len, ap_err *err) {
    (void)err;
    ap_strbuf_put(ctx, data, len);
    return AP_OK; /* a failure is the buffer's flag, turned into AP_ERR_NOMEM below */
}

ap_status ap_report_csv(const ap_report *r, char **out, size_t *len, ap_err *err) {
    rbuf b = {0};
    *out = NULL;
    ap_status st = ap_report_csv_write(r, put_sink, &b, err);
    if (st == AP_OK && (b.failed || !b.buf))
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for plans.csv");
    if (st != AP_OK) {
        ap_strbuf_free(&b);
        return st;
    }
    *out = b.buf;
    if (len) *len = b.len;
    return AP_OK;
}

/* ---- on a thread of its own, beside the rest of the report ------------------------------- */

struct ap_report_csv_job {
    const ap_report *r;
    ap_report_csv_sink sink;
    void *ctx;
    ap_tasks task; /* the writer on a helper (threads.h) */
    int started;
    atomic_int cancel; /* set by ap_report_csv_finish: the writer stops at its next piece */
    ap_status st;
    ap_err err;
};

static ap_status job_sink(void *ctx, const void *data, size_t len, ap_err *err) {
    ap_report_csv_job *j = ctx;
    if (atomic_load(&j->cancel)) return ap_err_set(err, AP_ERR_INTERNAL, "plans.csv: cancelled");
    return j->sink(j->ctx, data, len, err);
}

static void *job_run(void *arg) {
    ap_report_csv_job *j = arg;
    j->st = ap_report_csv_write(j->r, job_sink, j, &j->err);
    return NULL;
}

ap_status ap_report_csv_start(const ap_report *r, ap_report_csv_sink sink, void *ctx,
                              ap_report_csv_job **job, ap_err *err) {
    ap_report_csv_job *j = ap_calloc(1, sizeof *j);
    *job = j;
    if (!j) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for plans.csv");
    j->r = r;
    j->sink = sink;
    j->ctx = ctx;
    atomic_init(&j->cancel, 0);
    /* a helper that cannot be had leaves the writing to ap_report_csv_finish */
    j->started = ap_tasks_start_same(&j->task, 1, job_run, j);
    return AP_OK;
}

ap_status ap_report_csv_finish(ap_report_csv_job *j, int cancel, ap_err *err) {
    if (!j) return AP_OK;
    if (cancel) atomic_store(&j->cancel, 1);
    ap_tasks_wait(&j->task);
    if (!j->started && !cancel) job_run(j);
    ap_status st = cancel ? AP_OK : j->st;
    if (st != AP_OK && err) *err = j->err;
    ap_free(j);
    return st;
}
