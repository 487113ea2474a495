/*
 * alloc.c - allocator models the simulator replays its allocations through (sim.h).
 *
 * Two modes, documented in docs/simulator.md:
 *
 * 1. PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, PyTorch 2.x):
 *    - round_size: requests round up to 512 bytes (kMinBlockSize);
 *    - two pools: small (<= 1 MiB, kSmallSize) and large;
 *    - get_allocation_size: a new segment is 2 MiB (kSmallBuffer) for small requests, 20 MiB
 *      (kLargeBuffer) for requests of 1-10 MiB, and the request rounded up to 2 MiB
 *      (kRoundLarge) from 10 MiB (kMinLargeAlloc);
 *    - get_free_block: best fit, the smallest cached free block of the pool with size >= request
 *      (std::set ordered by (size, address)); max_split_size is left at its default (unlimited);
 *    - should_split: the remainder becomes a free block when it is >= 512 bytes (small pool,
 *      or any pool with expandable segments) or > 1 MiB (large pool);
 *    - free: the block merges with free neighbours of its segment (try_merge_blocks) and stays
 *      cached; segments are only returned when a cudaMalloc would fail (release_cached_blocks
 *      frees every segment that is entirely free, then the request is retried);
 *    - expandable_segments: one segment per pool whose physical pages are mapped on demand at
 *      its end, in pages of 2 MiB (small pool) or 20 MiB (large pool) (expandable_segments_ /
 *      map_block); under pressure the free pages at the end are unmapped.
 *    One stream only: the simulator does not model cross-stream reuse (record_stream).
 *
 * 2. An arena (ggml-alloc's dynamic allocator, ggml/src/ggml-alloc.c): one address range,
 *    offsets aligned to 256 bytes, best-fit reuse of freed ranges, growth at the end when no
 *    free range fits, adjacent free ranges merged. Tensors are freed at their last use, so the
 *    offsets follow liveness; the arena size is its high-water mark. This is the plan the
 *    runtime executes (one allocation, offsets).
 *
 * Data structures: blocks in an array (ids reused), linked to their address neighbours; the
 * free blocks of each pool grouped by size (classes sorted by size, each class sorted by
 * address), searched by bisection, whose answer per size is remembered until a class is
 * inserted or the classes compacted. A training replay requests a few distinct sizes thousands
 * of times, so classes are few and short and insertion by memmove beats a tree.
 */
#include "autoplan/sim.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct blk {
    int64_t addr, size, requested;
    int32_t prev, next; /* address neighbours in the same segment, -1 at the ends */
    int32_t hpos;       /* position in its free class's heap while free */
    int8_t pool;        /* 0 small, 1 large (arena: 1) */
    int8_t allocated;
    int8_t in_use;      /* slot holds a block (free or allocated) */
    int8_t pad;
} blk;

/* Free blocks of one size: a binary min-heap on the address (the lowest address is the best
 * fit among equals); each block knows its heap position so merges can remove it. */
typedef struct fent {
    int64_t addr;
    int32_t id;
} fent;

typedef struct fclass {
    int64_t size;
    fent *v;
    int n, cap;
} fclass;

/* A pool's free blocks: classes of equal size, sorted by size. Best fit (PyTorch's std::set
 * lower_bound on (size, address)) is the first class with size >= request, lowest address.
 * Replays reuse a few distinct sizes many times, so the classes stay few (about ten) while a
 * class can hold hundreds of blocks. */
#define FSET_MEMO 64 /* remembered lower bounds (a power of two) */

typedef struct fset {
    fclass *c;
    int n, cap;
    int64_t count; /* free blocks */
    int nempty;    /* classes with no block, left in place */
    fclass *spare; /* buffers of emptied classes, reused by new ones */
    int nspare, capspare;
    /* fset_lower's answers for recent sizes, valid while `layout` is unchanged (a class
       inserted or the array compacted bumps it): a replay asks for the same few sizes
       millions of times, and the classes move a few hundred times */
    uint32_t layout;
    struct {
        int64_t size;
        int32_t lower;
        uint32_t layout;
    } memo[FSET_MEMO];
} fset;

struct ap_alloc {
    ap_alloc_opts o;
    blk *b;
    int nb, capb;
    int32_t *ids; /* recycled block slots */
    int nids, capids;
    fset pools[2];
    /* expandable segments and arena: one growing segment per pool */
    int64_t base[2], top[2];
    int32_t tail[2];
    int64_t next_addr; /* caching: address of the next segment */
    ap_alloc_stats st;
};

void ap_alloc_opts_init(ap_alloc_opts *o) {
    memset(o, 0, sizeof *o);
    o->mode = AP_ALLOC_CACHING;
}

const char *ap_alloc_mode_name(ap_alloc_mode m) {
    return m == AP_ALLOC_ARENA ? "arena" : "caching";
}

ap_status ap_alloc_mode_parse(const char *s, ap_alloc_mode *out, ap_err *err) {
    if (s && !strcasecmp(s, "caching")) {
        *out = AP_ALLOC_CACHING;
        return AP_OK;
    }
    if (s && !strcasecmp(s, "arena")) {
        *out = AP_ALLOC_ARENA;
        return AP_OK;
    }
    return ap_err_set(err, AP_ERR_INPUT, "--allocator: expected caching or arena, got '%s'",
                      s ? s : "");
}

int64_t ap_alloc_round_size(int64_t bytes) {
    if (bytes < AP_CACHING_MIN_BLOCK_BYTES) return AP_CACHING_MIN_BLOCK_BYTES;
    return AP_CACHING_MIN_BLOCK_BYTES *
           ((bytes + AP_CACHING_MIN_BLOCK_BYTES - 1) / AP_CACHING_MIN_BLOCK_BYTES);
}

int64_t ap_alloc_segment_size(int64_t rounded) {
    if (rounded <= AP_CACHING_SMALL_SIZE_BYTES) return AP_CACHING_SMALL_BUFFER_BYTES;
    if (rounded < AP_CACHING_MIN_LARGE_ALLOC_BYTES) return AP_CACHING_LARGE_BUFFER_BYTES;
    return AP_CACHING_ROUND_LARGE_BYTES *
           ((rounded + AP_CACHING_ROUND_LARGE_BYTES - 1) / AP_CACHING_ROUND_LARGE_BYTES);
}

/* ---- free sets --------------------------------------------------------------------------- */

/* First class whose size >= size. */
static int fset_lower(fset *f, int64_t size) {
    /* sizes are multiples of 512 (256 in an arena): hash the bits above */
    unsigned h = (unsigned)(((uint64_t)size >> 8) * 0x9E3779B97F4A7C15ull >> 58) & (FSET_MEMO - 1);
    if (f->memo[h].size == size && f->memo[h].layout == f->layout) return f->memo[h].lower;
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (f->c[mid].size < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    f->memo[h].size = size;
    f->memo[h].lower = lo;
    f->memo[h].layout = f->layout;
    return lo;
}

static void heap_set(blk *b, fclass *c, int i, fent e) {
    c->v[i] = e;
    b[e.id].hpos = i;
}

static void heap_up(blk *b, fclass *c, int i) {
    fent e = c->v[i];
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (c->v[parent].addr <= e.addr) break;
        heap_set(b, c, i, c->v[parent]);
        i = parent;
    }
    heap_set(b, c, i, e);
}

static void heap_down(blk *b, fclass *c, int i) {
    fent e = c->v[i];
    for (;;) {
        int l = 2 * i + 1, m = i;
        int64_t best = e.addr;
        if (l < c->n && c->v[l].addr < best) {
            m = l;
            best = c->v[l].addr;
        }
        if (l + 1 < c->n && c->v[l + 1].addr < best) m = l + 1;
        if (m == i) break;
        heap_set(b, c, i, c->v[m]);
        i = m;
    }
    heap_set(b, c, i, e);
}

/* Remove heap entry i of class c. */
static void heap_remove(blk *b, fclass *c, int i) {
    c->n--;
    if (i == c->n) return;
    fent last = c->v[c->n];
    int64_t old = c->v[i].addr;
    heap_set(b, c, i, last);
    if (last.addr < old)
        heap_up(b, c, i);
    else
        heap_down(b, c, i);
}

static int fset_grow_spare(fset *f) {
    int nc = f->capspare ? f->capspare * 2 : 16;
    fclass *ns = ap_realloc(f->spare, (size_t)nc * sizeof *ns);
    if (!ns) return 0;
    f->spare = ns;
    f->capspare = nc;
    return 1;
}

static void fset_class_emptied(fset *f);

static int fset_insert(blk *b, fset *f, int32_t id) {
    int64_t size = b[id].size;
    int i = fset_lower(f, size);
    int existed = i < f->n && f->c[i].size == size;
    if (!existed) {
        if (f->n == f->cap) {
            int nc = f->cap ? f->cap * 2 : 32;
            fclass *nv = ap_realloc(f->c, (size_t)nc * sizeof *nv);
            if (!nv) return -1;
            f->c = nv;
            f->cap = nc;
        }
        memmove(f->c + i + 1, f->c + i, (size_t)(f->n - i) * sizeof *f->c);
        f->layout++;
        if (f->nspare > 0)
            f->c[i] = f->spare[--f->nspare];
        else
            memset(&f->c[i], 0, sizeof f->c[i]);
        f->c[i].size = size;
        f->c[i].n = 0;
        f->n++;
    }
    fclass *c = &f->c[i];
    if (existed && c->n == 0) f->nempty--; /* an emptied class reused */
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 8;
        fent *nv = ap_realloc(c->v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        c->v = nv;
        c->cap = nc;
    }
    c->v[c->n].addr = b[id].addr;
    c->v[c->n].id = id;
    c->n++;
    heap_up(b, c, c->n - 1);
    f->count++;
    return 0;
}

/* Class i became empty. It stays in place (sizes recur: the next free of that size reuses it)
 * until empty classes are the majority, then the array is compacted. */
static void fset_class_emptied(fset *f) {
    if (++f->nempty <= 16 || f->nempty * 2 <= f->n) return;
    int w = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->c[i].n > 0) {
            f->c[w++] = f->c[i];
        } else if (f->nspare < f->capspare || fset_grow_spare(f)) {
            f->spare[f->nspare++] = f->c[i];
        } else {
            ap_free(f->c[i].v);
        }
    }
    f->n = w;
    f->nempty = 0;
    f->layout++;
}

/* Remove free block id (its size and address unchanged since insertion). */
static void fset_remove(blk *b, fset *f, int32_t id) {
    int i = fset_lower(f, b[id].size);
    if (i == f->n || f->c[i].size != b[id].size) return;
    fclass *c = &f->c[i];
    int k = b[id].hpos;
    if (k < 0 || k >= c->n || c->v[k].id != id) return;
    heap_remove(b, c, k);
    f->count--;
    if (c->n == 0) fset_class_emptied(f);
}

/* Remove and return the best-fit block for `size`, or -1. */
static int32_t fset_take(blk *b, fset *f, int64_t size) {
    int i = fset_lower(f, size);
    while (i < f->n && f->c[i].n == 0) i++;
    if (i == f->n) return -1;
    fclass *c = &f->c[i];
    int32_t id = c->v[0].id;
    heap_remove(b, c, 0);
    f->count--;
    if (c->n == 0) fset_class_emptied(f);
    return id;
}

static void fset_free(fset *f) {
    for (int i = 0; i < f->n; i++) ap_free(f->c[i].v);
    for (int i = 0; i < f->nspare; i++) ap_free(f->spare[i].v);
    ap_free(f->c);
    ap_free(f->spare);
}

/* ---- block slots ----------------------------------------------------------------------- */

static int32_t blk_new(ap_alloc *a) {
    if (a->nids > 0) return a->ids[--a->nids];
    if (a->nb == a->capb) {
        int nc = a->capb ? a->capb * 2 : 256;
        blk *nb = ap_realloc(a->b, (size_t)nc * sizeof *nb);
        if (!nb) return -1;
        a->b = nb;
        a->capb = nc;
    }
    return a->nb++;
}

/* Out of memory for the recycling list only costs the slot (it is not reused); callers ignore
 * the -1. */
static int blk_drop(ap_alloc *a, int32_t id) {
    a->b[id].in_use = 0;
    if (a->nids == a->capids) {
        int nc = a->capids ? a->capids * 2 : 256;
        int32_t *ni = ap_realloc(a->ids, (size_t)nc * sizeof *ni);
        if (!ni) return -1;
        a->ids = ni;
        a->capids = nc;
    }
    a->ids[a->nids++] = id;
    return 0;
}

ap_alloc *ap_alloc_new(const ap_alloc_opts *o) {
    ap_alloc *a = ap_calloc(1, sizeof *a);
    if (!a) return NULL;
    if (o)
        a->o = *o;
    else
        ap_alloc_opts_init(&a->o);
    if (a->o.mode == AP_ALLOC_ARENA) a->o.expandable_segments = 0;
    a->tail[0] = a->tail[1] = -1;
    /* expandable segments reserve address space up front; give each pool its own range */
    a->base[0] = 0;
    a->base[1] = a->o.mode == AP_ALLOC_ARENA ? 0 : (int64_t)1 << 52;
    a->top[0] = a->base[0];
    a->top[1] = a->base[1];
    return a;
}

void ap_alloc_free(ap_alloc *a) {
    if (!a) return;
    ap_free(a->b);
    ap_free(a->ids);
    fset_free(&a->pools[0]);
    fset_free(&a->pools[1]);
    ap_free(a);
}

static int single_segment(const ap_alloc *a) {
    return a->o.mode == AP_ALLOC_ARENA || a->o.expandable_segments;
}

static int64_t page_bytes(const ap_alloc *a, int pool) {
    if (a->o.mode == AP_ALLOC_ARENA) return AP_ARENA_ALIGN_BYTES;
    return pool == 0 ? AP_CACHING_SMALL_BUFFER_BYTES : AP_CACHING_LARGE_BUFFER_BYTES;
}

/* PyTorch release_cached_blocks: return every segment whose only block is free. */
static void release_cached(ap_alloc *a) {
    for (int p = 0; p < 2; p++) {
        fset *f = &a->pools[p];
        for (int i = f->n - 1; i >= 0; i--) {
            fclass *c = &f->c[i];
            int w = 0, k0 = c->n; /* class emptied here: counted, compacted later */
            for (int k = 0; k < c->n; k++) {
                blk *b = &a->b[c->v[k].id];
                if (b->prev < 0 && b->next < 0) {
                    a->st.reserved_bytes -= b->size;
                    a->st.segments--;
                    a->st.segment_releases++;
                    f->count--;
                    blk_drop(a, c->v[k].id);
                } else {
                    c->v[w++] = c->v[k];
                }
            }
            c->n = w;
            for (int k = c->n / 2 - 1; k >= 0; k--) heap_down(a->b, c, k);
            for (int k = 0; k < c->n; k++) a->b[c->v[k].id].hpos = k;
            if (k0 > 0 && c->n == 0) f->nempty++;
        }
    }
}

/* Expandable segments under pressure: unmap the whole free pages at the end of each pool. */
static void release_tail_pages(ap_alloc *a) {
    for (int p = 0; p < 2; p++) {
        int32_t t = a->tail[p];
        if (t < 0 || a->b[t].allocated) continue;
        int64_t page = page_bytes(a, p);
        int64_t start = ((a->b[t].addr + page - 1) / page) * page;
        int64_t cut = a->top[p] - start;
        if (cut <= 0) continue;
        fset_remove(a->b, &a->pools[p], t);
        a->b[t].size -= cut;
        a->top[p] -= cut;
        a->st.reserved_bytes -= cut;
        a->st.segment_releases++;
        if (a->b[t].size == 0) {
            int32_t pv = a->b[t].prev;
            if (pv >= 0) a->b[pv].next = -1;
            a->tail[p] = pv;
            blk_drop(a, t);
        } else {
            fset_insert(a->b, &a->pools[p], t);
        }
    }
}

static int over(const ap_alloc *a, int64_t extra) {
    return a->o.limit_bytes > 0 && a->st.reserved_bytes + extra > a->o.limit_bytes;
}

static int should_split(const ap_alloc *a, int pool, int64_t remaining) {
    if (a->o.mode == AP_ALLOC_ARENA) return remaining > 0;
    if (pool == 0 || a->o.expandable_segments) return remaining >= AP_CACHING_MIN_BLOCK_BYTES;
    return remaining > AP_CACHING_SMALL_SIZE_BYTES;
}

ap_status ap_alloc_malloc(ap_alloc *a, int64_t bytes, int32_t *out_block, int64_t *out_addr,
                          int *over_limit) {
    if (over_limit) *over_limit = 0;
    if (bytes <= 0) return AP_ERR_INPUT;
    int64_t size;
    int pool;
    if (a->o.mode == AP_ALLOC_ARENA) {
        size = ((bytes + AP_ARENA_ALIGN_BYTES - 1) / AP_ARENA_ALIGN_BYTES) * AP_ARENA_ALIGN_BYTES;
        pool = 1;
    } else {
        size = ap_alloc_round_size(bytes);
        pool = size <= AP_CACHING_SMALL_SIZE_BYTES ? 0 : 1;
    }
    fset *f = &a->pools[pool];
    int32_t id = fset_take(a->b, f, size);
    if (id >= 0) {
        a->st.reuses++;
    } else if (!single_segment(a)) {
        int64_t seg = ap_alloc_segment_size(size);
        if (over(a, seg)) {
            release_cached(a);
            if (over(a, seg)) {
                a->st.over_limit++;
                if (over_limit) *over_limit = 1;
            }
        }
        id = blk_new(a);
        if (id < 0) return AP_ERR_NOMEM;
        blk *b = &a->b[id];
        b->addr = a->next_addr;
        b->size = seg;
        b->prev = b->next = -1;
        b->pool = (int8_t)pool;
        a->next_addr += seg;
        a->st.reserved_bytes += seg;
        a->st.segments++;
        a->st.segment_allocs++;
    } else {
        /* grow the pool's single segment at its end, reusing a free block there */
        int32_t t = a->tail[pool];
        int64_t have = 0;
        if (t >= 0 && !a->b[t].allocated) {
            have = a->b[t].size;
            fset_remove(a->b, f, t);
            id = t;
        } else {
            id = blk_new(a);
            if (id < 0) return AP_ERR_NOMEM;
            blk *b = &a->b[id];
            b->addr = a->top[pool];
            b->size = 0;
            b->prev = t;
            b->next = -1;
            b->pool = (int8_t)pool;
            if (t >= 0) a->b[t].next = id;
            a->tail[pool] = id;
        }
        int64_t page = page_bytes(a, pool);
        int64_t grow = ((size - have + page - 1) / page) * page;
        if (over(a, grow)) {
            if (a->o.expandable_segments) release_tail_pages(a);
            if (over(a, grow)) {
                a->st.over_limit++;
                if (over_limit) *over_limit = 1;
            }
        }
        a->b[id].size += grow;
        a->top[pool] += grow;
        a->st.reserved_bytes += grow;
        a->st.segment_allocs++;
    }
    blk *b = &a->b[id];
    b->in_use = 1;
    int64_t remaining = b->size - size;
    if (should_split(a, pool, remaining)) {
        int32_t r = blk_new(a);
        if (r < 0) return AP_ERR_NOMEM;
        b = &a->b[id]; /* blk_new may have moved the array */
        blk *rb = &a->b[r];
        rb->addr = b->addr + size;
        rb->size = remaining;
        rb->prev = id;
        rb->next = b->next;
        rb->pool = b->pool;
        rb->allocated = 0;
        rb->in_use = 1;
        rb->requested = 0;
        if (b->next >= 0) a->b[b->next].prev = r;
        b->next = r;
        b->size = size;
        if (single_segment(a) && a->tail[pool] == id) a->tail[pool] = r;
        if (fset_insert(a->b, f, r)) return AP_ERR_NOMEM;
        a->st.splits++;
    }
    b->allocated = 1;
    b->requested = bytes;
    a->st.requested_bytes += bytes;
    a->st.active_bytes += b->size;
    if (a->st.requested_bytes > a->st.peak_requested_bytes)
        a->st.peak_requested_bytes = a->st.requested_bytes;
    if (a->st.active_bytes > a->st.peak_active_bytes) a->st.peak_active_bytes = a->st.active_bytes;
    if (a->st.reserved_bytes > a->st.peak_reserved_bytes)
        a->st.peak_reserved_bytes = a->st.reserved_bytes;
    *out_block = id;
    if (out_addr) *out_addr = b->addr;
    return AP_OK;
}

/* Merge free block `src` into its address neighbour `dst` (PyTorch try_merge_blocks). */
static void merge(ap_alloc *a, int32_t dst, int32_t src) {
    blk *d = &a->b[dst], *s = &a->b[src];
    fset_remove(a->b, &a->pools[s->pool], src);
    if (d->prev == src) {
        d->addr = s->addr;
        d->prev = s->prev;
        if (d->prev >= 0) a->b[d->prev].next = dst;
    } else {
        d->next = s->next;
        if (d->next >= 0) a->b[d->next].prev = dst;
    }
    d->size += s->size;
    if (single_segment(a) && a->tail[s->pool] == src) a->tail[s->pool] = dst;
    blk_drop(a, src);
}

ap_status ap_alloc_release(ap_alloc *a, int32_t id) {
    if (id < 0 || id >= a->nb || !a->b[id].in_use || !a->b[id].allocated) return AP_ERR_INPUT;
    blk *b = &a->b[id];
    b->allocated = 0;
    a->st.requested_bytes -= b->requested;
    a->st.active_bytes -= b->size;
    b->requested = 0;
    if (b->prev >= 0 && !a->b[b->prev].allocated) merge(a, id, b->prev);
    b = &a->b[id];
    if (b->next >= 0 && !a->b[b->next].allocated) merge(a, id, b->next);
    b = &a->b[id];
    if (fset_insert(a->b, &a->pools[b->pool], id)) return AP_ERR_NOMEM;
    return AP_OK;
}

int64_t ap_alloc_block_bytes(const ap_alloc *a, int32_t id) {
    if (id < 0 || id >= a->nb || !a->b[id].in_use || !a->b[id].allocated) return 0;
    return a->b[id].size;
}

void ap_alloc_get_stats(const ap_alloc *a, ap_alloc_stats *out) {
    *out = a->st;
    if (single_segment(a)) out->segments = (a->top[0] > a->base[0]) + (a->top[1] > a->base[1]);
    out->largest_free_bytes = 0;
    for (int p = 0; p < 2; p++)
        for (int i = a->pools[p].n - 1; i >= 0; i--)
            if (a->pools[p].c[i].n > 0) {
                if (a->pools[p].c[i].size > out->largest_free_bytes)
                    out->largest_free_bytes = a->pools[p].c[i].size;
                break;
            }
}

int64_t ap_alloc_reserved_bytes(const ap_alloc *a) { return a->st.reserved_bytes; }
