/*
 * alloc.c - the runtime's one tracking allocator (rt_int.h, rt_mem): every buffer a rank holds
 * goes through it, labelled with a category (parameters, gradients, optimizer states,
 * activations, temporaries, communication buffers) or the separate host pool that offloaded
 * optimizer states live in. It keeps live bytes per category, the allocated peak with the
 * per-category split at the first moment it is reached, each category's own maximum, per
 * operation the categories at the op's own peak and at its end (the timeline the trace shows,
 * written like the simulator's), and, on request, every allocation and free in order (tests put
 * that sequence against the simulator's).
 *
 * The counted size is the requested size ("allocated" level, as the simulator's): payloads come
 * from the backend (64-byte aligned host memory, or cudaMalloc), the bookkeeping lives in a
 * host-side table keyed by pointer, never inside the payload. Fault injection: with fail_at = N
 * the N-th allocation fails as if the memory were exhausted.
 */
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"

struct rt_mem_rec {
    void *p;          /* NULL: empty; (void *)1: deleted */
    int64_t bytes;
    int32_t kind, layer, mb;
    int8_t cat;
    int8_t on_host;   /* host memory (malloc) rather than the backend's */
};

#define TOMB ((void *)1)

void rt_mem_init(rt_mem *m, const rt_kernels *k) {
    memset(m, 0, sizeof *m);
    m->k = k;
}

static uint64_t hash_ptr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static int64_t find(const rt_mem *m, const void *p) {
    if (!m->cap) return -1;
    uint64_t mask = (uint64_t)m->cap - 1;
    for (uint64_t i = hash_ptr(p) & mask, n = 0; n < (uint64_t)m->cap; i = (i + 1) & mask, n++) {
        if (m->tab[i].p == p) return (int64_t)i;
        if (m->tab[i].p == NULL) return -1;
    }
    return -1;
}

static int grow_table(rt_mem *m) {
    int64_t ncap = m->cap ? m->cap * 2 : 256;
    rt_mem_rec *nt = calloc((size_t)ncap, sizeof *nt);
    if (!nt) return -1;
    uint64_t mask = (uint64_t)ncap - 1;
    for (int64_t i = 0; i < m->cap; i++) {
        if (!m->tab[i].p || m->tab[i].p == TOMB) continue;
        uint64_t j = hash_ptr(m->tab[i].p) & mask;
        while (nt[j].p) j = (j + 1) & mask;
        nt[j] = m->tab[i];
    }
    free(m->tab);
    m->tab = nt;
    m->cap = ncap;
    m->tomb = 0;
    return 0;
}

static int insert(rt_mem *m, const rt_mem_rec *r) {
    if ((m->used + m->tomb + 1) * 2 > m->cap && grow_table(m) != 0) return -1;
    uint64_t mask = (uint64_t)m->cap - 1;
    uint64_t j = hash_ptr(r->p) & mask;
    while (m->tab[j].p && m->tab[j].p != TOMB) j = (j + 1) & mask;
    if (m->tab[j].p == TOMB) m->tomb--;
    m->tab[j] = *r;
    m->used++;
    return 0;
}

/* ---- logs ------------------------------------------------------------------------------------- */

static void log_event(rt_mem *m, const rt_mem_rec *r, int is_free) {
    if (!m->record) return;
    if (m->nev == m->capev) {
        int nc = m->capev ? m->capev * 2 : 1024;
        ap_rt_event *ne = realloc(m->ev, (size_t)nc * sizeof *ne);
        if (!ne) {
            m->oom = 1;
            return;
        }
        m->ev = ne;
        m->capev = nc;
    }
    ap_rt_event *e = &m->ev[m->nev++];
    memset(e, 0, sizeof *e);
    e->bytes = r->bytes;
    e->kind = r->kind;
    e->layer = r->layer;
    e->mb = r->mb;
    e->cat = r->cat;
    e->is_free = (int8_t)is_free;
    e->persistent = (int8_t)m->setup;
}

/* After every change of the live bytes: the peaks and the current op's snapshot. */
static void account(rt_mem *m) {
    for (int c = 0; c <= AP_RT_NCAT; c++)
        if (m->cat[c] > m->cat_peak[c]) m->cat_peak[c] = m->cat[c];
    if (m->live > m->peak) {
        m->peak = m->live;
        memcpy(m->peak_cat, m->cat, sizeof m->peak_cat);
    }
    if (m->timeline && m->nops > 0) {
        ap_rt_op_record *o = &m->ops[m->nops - 1];
        if (m->live > m->op_peak) {
            m->op_peak = m->live;
            memcpy(o->peak_cat, m->cat, sizeof o->peak_cat);
            if (m->clock) o->peak_s = m->clock() - m->t0_s;
        }
        memcpy(o->end_cat, m->cat, sizeof o->end_cat);
    }
}

/* ---- allocate and free ------------------------------------------------------------------------- */

static void *alloc_rec(rt_mem *m, int cat, int kind, int layer, int mb, int64_t bytes,
                       int on_host) {
    if (bytes <= 0) return NULL;
    m->nallocs++;
    if (m->fail_at > 0 && m->nallocs == m->fail_at) {
        m->oom = 1;
        return NULL;
    }
    void *p = NULL;
    if (on_host) {
        if (posix_memalign(&p, 64, (size_t)bytes) == 0) memset(p, 0, (size_t)bytes);
        else p = NULL;
    } else {
        p = m->k->alloc(bytes);
    }
    if (!p) {
        m->oom = 1;
        return NULL;
    }
    rt_mem_rec r = {p, bytes, kind, layer, mb, (int8_t)cat, (int8_t)on_host};
    if (insert(m, &r) != 0) {
        if (on_host) free(p);
        else m->k->release(p);
        m->oom = 1;
        return NULL;
    }
    m->cat[cat] += bytes;
    if (cat != RT_HOST_CAT) m->live += bytes;
    log_event(m, &r, 0);
    account(m);
    return p;
}

void *rt_mem_alloc(rt_mem *m, int cat, int kind, int layer, int mb, int64_t bytes) {
    return alloc_rec(m, cat, kind, layer, mb, bytes, cat == RT_HOST_CAT || m->k->host_memory);
}

void *rt_mem_alloc_host(rt_mem *m, int cat, int kind, int layer, int mb, int64_t bytes) {
    return alloc_rec(m, cat, kind, layer, mb, bytes, 1);
}

int rt_mem_free(rt_mem *m, void *p) {
    if (!p) return 0;
    int64_t i = find(m, p);
    if (i < 0) return -1;
    rt_mem_rec r = m->tab[i];
    m->tab[i].p = TOMB;
    m->used--;
    m->tomb++;
    m->cat[r.cat] -= r.bytes;
    if (r.cat != RT_HOST_CAT) m->live -= r.bytes;
    if (r.on_host) free(p);
    else m->k->release(p);
    log_event(m, &r, 1);
    account(m);
    return 0;
}

void rt_mem_release(rt_mem *m) {
    for (int64_t i = 0; i < m->cap; i++) {
        void *p = m->tab[i].p;
        if (!p || p == TOMB) continue;
        if (m->tab[i].on_host) free(p);
        else m->k->release(p);
    }
    free(m->tab);
    free(m->ev);
    free(m->ops);
    m->tab = NULL;
    m->ev = NULL;
    m->ops = NULL;
    m->cap = m->used = m->tomb = 0;
    m->nev = m->capev = m->nops = m->capops = 0;
}

/* ---- timeline ------------------------------------------------------------------------------- */

void rt_mem_op(rt_mem *m, int type, int chunk, int layer, int mb, double now_s) {
    if (!m->timeline) return;
    if (m->nops > 0) m->ops[m->nops - 1].end_s = now_s - m->t0_s;
    if (m->nops == m->capops) {
        int nc = m->capops ? m->capops * 2 : 256;
        ap_rt_op_record *no = realloc(m->ops, (size_t)nc * sizeof *no);
        if (!no) {
            m->oom = 1;
            return;
        }
        m->ops = no;
        m->capops = nc;
    }
    ap_rt_op_record *o = &m->ops[m->nops++];
    memset(o, 0, sizeof *o);
    o->type = (int16_t)type;
    o->chunk = (int16_t)chunk;
    o->layer = layer;
    o->mb = mb;
    o->begin_s = o->end_s = o->peak_s = now_s - m->t0_s;
    memcpy(o->peak_cat, m->cat, sizeof o->peak_cat);
    memcpy(o->end_cat, m->cat, sizeof o->end_cat);
    m->op_peak = m->live;
}

void rt_mem_step_begin(rt_mem *m, double now_s) {
    m->nops = 0;
    m->t0_s = now_s;
    if (m->nev > m->nev_setup) m->nev = m->nev_setup;
}

void rt_mem_step_end(rt_mem *m, double now_s) {
    if (m->timeline && m->nops > 0) m->ops[m->nops - 1].end_s = now_s - m->t0_s;
}
