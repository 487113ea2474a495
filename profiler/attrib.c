/*
 * attrib.c - what a trace says (include/autoplan/profiler.h): NVTX range nesting, kernels
 * attributed to the range they were launched in, the device-memory timeline and its peak,
 * copies by direction, per-iteration summaries, and profile rows from ranges named as a row.
 * Plain C on ap_trace records: tested without CUDA (tests/test_profiler.c).
 *
 * Structure: build() turns range start/end records into intervals (paired by range id), sorts
 * them per thread by start (outer before inner) and sweeps each thread once, interleaving the
 * launches of kernels (the API call found by correlation id): a stack of open ranges gives
 * every interval its parent and every launch its innermost range, the attribution Nsight
 * Systems draws as "NVTX projected onto the GPU". Range paths become nodes of a tree (parent
 * node, name), so 10^6 occurrences of the same operator share one node. summarize() adds the
 * numbers; the memory timeline replays allocations, releases and pool sizes in time order.
 *
 * Semantics worth knowing:
 *  - a kernel belongs to the range open on the thread that launched it at the launch, not to
 *    whatever runs on the host while the kernel executes; a launch from a thread with no range
 *    open (PyTorch's autograd threads) belongs to the range open at that moment on the thread
 *    with the most ranges (the training loop's), see project();
 *  - ranges that cross instead of nesting (nvtxRangeStart/End used out of order) are treated
 *    as if the later one were nested in the earlier one;
 *  - "reserved" is what the driver handed out: cudaMalloc'd device memory alive plus the size
 *    of every stream-ordered memory pool (PyTorch's caching allocator reserves with cudaMalloc,
 *    so this is its memory_reserved() plus what lives outside it, such as cuBLAS workspaces).
 *
 * What it does not do: read CUPTI (cupti.c) or print (cli/cmd_profile_attach.c).
 */
#include "autoplan/profiler.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a fixed-capacity hash map uint64 -> uint32 (sized up front, never shrinks) --------------- */

typedef struct {
    uint64_t *keys;
    uint32_t *vals; /* value + 1; 0 = empty slot */
    size_t cap;
} map64;

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int map_init(map64 *m, size_t entries) {
    m->cap = 64;
    while (m->cap < 2 * entries + 16) m->cap *= 2;
    m->keys = ap_calloc(m->cap, sizeof *m->keys);
    m->vals = ap_calloc(m->cap, sizeof *m->vals);
    return m->keys && m->vals;
}

static void map_free(map64 *m) {
    ap_free(m->keys);
    ap_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* The slot of key: its value + 1 when present, else an empty slot to fill. */
static size_t map_slot(const map64 *m, uint64_t key) {
    size_t h = (size_t)mix(key) & (m->cap - 1);
    while (m->vals[h] && m->keys[h] != key) h = (h + 1) & (m->cap - 1);
    return h;
}

static int map_get(const map64 *m, uint64_t key, uint32_t *val) {
    size_t h = map_slot(m, key);
    if (!m->vals[h]) return 0;
    *val = m->vals[h] - 1;
    return 1;
}

static void map_put(map64 *m, uint64_t key, uint32_t val) {
    size_t h = map_slot(m, key);
    m->keys[h] = key;
    m->vals[h] = val + 1;
}

/* ---- intervals, nesting and launch attribution ------------------------------------------------- */

typedef struct {
    uint64_t start, end;
    uint32_t thread, name;
    uint32_t node;   /* range-tree node */
    uint32_t parent; /* enclosing interval + 1; 0 = none */
} interval;

typedef struct {
    uint32_t rec;    /* trace index of the kernel */
    uint32_t thread;
    uint64_t ts;     /* host time of the launching API call */
    uint32_t iv;     /* innermost interval + 1; 0 = none */
} launch;

typedef struct {
    interval *iv;
    size_t niv;
    launch *ln;      /* kernels whose launching call is in the trace */
    size_t nln;
    ap_range_stat *nodes;
    size_t nnodes;
    uint64_t unmatched, unattributed, kernels;
    uint64_t projected;   /* launches placed in another thread's range (project()) */
    uint32_t main_thread; /* the thread with the most range occurrences */
    uint64_t trace_end;
} work;

static void work_free(work *w) {
    ap_free(w->iv);
    ap_free(w->ln);
    ap_free(w->nodes);
    memset(w, 0, sizeof *w);
}

static int cmp_iv(const void *a, const void *b) {
    const interval *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end > y->end ? -1 : 1; /* outer first */
    return 0;
}

static int cmp_ln(const void *a, const void *b) {
    const launch *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->rec < y->rec ? -1 : x->rec > y->rec;
}

/* Pair range starts and ends by id into intervals. */
static ap_status pair_ranges(const ap_trace *t, work *w, ap_err *err) {
    size_t starts = 0;
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        if (r->kind == AP_REC_RANGE_START) starts++;
        uint64_t e = r->end_ns > r->start_ns ? r->end_ns : r->start_ns;
        if (e > w->trace_end) w->trace_end = e;
    }
    w->iv = starts ? ap_malloc(starts * sizeof *w->iv) : NULL;
    map64 byid = {0};
    if ((starts && !w->iv) || !map_init(&byid, starts)) {
        map_free(&byid);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu ranges", starts);
    }
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        if (r->kind != AP_REC_RANGE_START) continue;
        interval *v = &w->iv[w->niv];
        memset(v, 0, sizeof *v);
        v->start = r->start_ns;
        v->end = UINT64_MAX;
        v->thread = r->thread;
        v->name = r->name;
        uint32_t prev;
        if (map_get(&byid, r->id, &prev)) w->unmatched++; /* a reused id: the later start wins */
        map_put(&byid, r->id, (uint32_t)w->niv++);
    }
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        uint32_t at;
        if (r->kind != AP_REC_RANGE_END) continue;
        if (!map_get(&byid, r->id, &at) || w->iv[at].end != UINT64_MAX || r->start_ns < w->iv[at].start)
            w->unmatched++;
        else
            w->iv[at].end = r->start_ns;
    }
    for (size_t i = 0; i < w->niv; i++)
        if (w->iv[i].end == UINT64_MAX) { /* never ended: open until the trace ends */
            w->unmatched++;
            w->iv[i].end = w->trace_end > w->iv[i].start ? w->trace_end : w->iv[i].start;
        }
    map_free(&byid);
    return AP_OK;
}

/* Kernels and their launching API call (by correlation id; runtime preferred over driver). */
static ap_status find_launches(const ap_trace *t, work *w, ap_err *err) {
    size_t napi = 0, nk = 0;
    for (size_t i = 0; i < t->n; i++) {
        napi += t->recs[i].kind == AP_REC_API;
        nk += t->recs[i].kind == AP_REC_KERNEL;
    }
    if (t->n > UINT32_MAX) return ap_err_set(err, AP_ERR_INPUT, "trace of %zu records: too many", t->n);
    map64 api = {0};
    w->ln = nk ? ap_malloc(nk * sizeof *w->ln) : NULL;
    if ((nk && !w->ln) || !map_init(&api, napi)) {
        map_free(&api);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %zu kernels", nk);
    }
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        if (r->kind != AP_REC_API) continue;
        uint32_t prev;
        /* a runtime call and the driver call under it share the id: keep the runtime one */
        if (map_get(&api, r->correlation, &prev) && !(t->recs[prev].flags & AP_REC_FLAG_DRIVER))
            continue;
        map_put(&api, r->correlation, (uint32_t)i);
    }
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        uint32_t a;
        if (r->kind != AP_REC_KERNEL) continue;
        w->kernels++;
        if (!map_get(&api, r->correlation, &a)) {
            w->unattributed++;
            continue;
        }
        launch *l = &w->ln[w->nln++];
        l->rec = (uint32_t)i;
        l->thread = t->recs[a].thread;
        l->ts = t->recs[a].start_ns;
        l->iv = 0;
    }
    map_free(&api);
    return AP_OK;
}

/* The node (parent node, name), created on first sight (the table has room for every
 * interval). */
static uint32_t add_node(work *w, map64 *nodes_by_key, uint32_t parent_node, uint32_t name) {
    uint64_t key = (uint64_t)parent_node << 32 | name;
    uint32_t node;
    if (map_get(nodes_by_key, key, &node)) return node;
    ap_range_stat *n = &w->nodes[w->nnodes];
    memset(n, 0, sizeof *n);
    n->parent = parent_node;
    n->name = name;
    n->depth = w->nodes[parent_node].depth + 1;
    node = (uint32_t)w->nnodes++;
    map_put(nodes_by_key, key, node);
    return node;
}

/* One sweep per thread over interval starts and launches in time order with a stack of the
 * ranges open at that moment. */
static ap_status nest(work *w, ap_err *err) {
    if (w->niv > 1) qsort(w->iv, w->niv, sizeof *w->iv, cmp_iv);
    if (w->nln > 1) qsort(w->ln, w->nln, sizeof *w->ln, cmp_ln);
    w->nodes = ap_malloc((w->niv + 1) * sizeof *w->nodes);
    uint32_t *stack = ap_malloc((w->niv + 1) * sizeof *stack);
    map64 nodes_by_key = {0};
    if (!w->nodes || !stack || !map_init(&nodes_by_key, w->niv + 1)) {
        ap_free(stack);
        map_free(&nodes_by_key);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory nesting %zu ranges", w->niv);
    }
    memset(&w->nodes[0], 0, sizeof w->nodes[0]); /* the root */
    w->nnodes = 1;
    size_t i = 0, j = 0, top = 0;
    uint32_t thread = 0;
    int have_thread = 0;
    while (i < w->niv || j < w->nln) {
        int take_iv;
        uint32_t th;
        if (i < w->niv && j < w->nln) {
            const interval *v = &w->iv[i];
            const launch *l = &w->ln[j];
            take_iv = v->thread < l->thread || (v->thread == l->thread && v->start <= l->ts);
        } else {
            take_iv = i < w->niv;
        }
        th = take_iv ? w->iv[i].thread : w->ln[j].thread;
        if (!have_thread || th != thread) {
            thread = th;
            have_thread = 1;
            top = 0;
        }
        uint64_t now = take_iv ? w->iv[i].start : w->ln[j].ts;
        while (top > 0 && w->iv[stack[top - 1]].end <= now) top--;
        uint32_t inner = top > 0 ? stack[top - 1] + 1 : 0;
        if (take_iv) {
            interval *v = &w->iv[i];
            v->parent = inner;
            uint32_t pnode = inner ? w->iv[inner - 1].node : 0;
            v->node = add_node(w, &nodes_by_key, pnode, v->name);
            stack[top++] = (uint32_t)i;
            i++;
        } else {
            w->ln[j].iv = inner;
            j++;
        }
    }
    ap_free(stack);
    map_free(&nodes_by_key);
    return AP_OK;
}

typedef struct {
    uint64_t ts;
    uint32_t j; /* index into work.ln */
} orphan;

static int cmp_orphan(const void *a, const void *b) {
    const orphan *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->j < y->j ? -1 : x->j > y->j;
}

/* Launches made with no range open on their own thread take the innermost range open at that
 * moment on the main thread: the thread with the most range occurrences (ties: the lowest id).
 * PyTorch's autograd launches the whole backward from its own threads while the training loop
 * waits inside the "backward" range it pushed; per-thread projection alone leaves those
 * kernels outside every range. The main thread's own launches outside ranges stay outside. */
static ap_status project(work *w, ap_err *err) {
    if (!w->niv) return AP_OK;
    size_t best = 0, lo = 0, run = 0; /* iv is sorted by thread */
    for (size_t i = 0; i <= w->niv; i++) {
        if (i == w->niv || (i > 0 && w->iv[i].thread != w->iv[i - 1].thread)) {
            if (i - run > best) best = i - run, lo = run;
            run = i;
        }
    }
    size_t hi = lo + best;
    w->main_thread = w->iv[lo].thread;
    size_t n = 0;
    for (size_t j = 0; j < w->nln; j++) n += !w->ln[j].iv && w->ln[j].thread != w->main_thread;
    if (!n) return AP_OK;
    orphan *o = ap_malloc(n * sizeof *o);
    uint32_t *stack = ap_malloc(best * sizeof *stack);
    if (!o || !stack) {
        ap_free(o);
        ap_free(stack);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory placing %zu launches", n);
    }
    n = 0;
    for (size_t j = 0; j < w->nln; j++)
        if (!w->ln[j].iv && w->ln[j].thread != w->main_thread)
            o[n++] = (orphan){w->ln[j].ts, (uint32_t)j};
    if (n > 1) qsort(o, n, sizeof *o, cmp_orphan);
    size_t i = lo, k = 0, top = 0;
    while (k < n) {
        int take_iv = i < hi && w->iv[i].start <= o[k].ts;
        uint64_t now = take_iv ? w->iv[i].start : o[k].ts;
        while (top > 0 && w->iv[stack[top - 1]].end <= now) top--;
        if (take_iv) {
            stack[top++] = (uint32_t)i++;
        } else {
            if (top > 0) {
                w->ln[o[k].j].iv = stack[top - 1] + 1;
                w->projected++;
            }
            k++;
        }
    }
    ap_free(o);
    ap_free(stack);
    return AP_OK;
}

static ap_status build(const ap_trace *t, work *w, ap_err *err) {
    memset(w, 0, sizeof *w);
    ap_status st = pair_ranges(t, w, err);
    if (st == AP_OK) st = find_launches(t, w, err);
    if (st == AP_OK) st = nest(w, err);
    if (st == AP_OK) st = project(w, err);
    if (st != AP_OK) work_free(w);
    return st;
}

/* ---- the summary ------------------------------------------------------------------------------- */

static double ns_s(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) * 1e-9 : 0.0; }

static ap_status sum_kernels(const ap_trace *t, const work *w, ap_trace_summary *s, ap_err *err) {
    map64 byk = {0};
    /* node of every kernel record; kernels whose launch is unknown stay at the root */
    uint32_t *node_of = ap_calloc(t->n ? t->n : 1, sizeof *node_of);
    s->kernels = ap_malloc((w->kernels + 1) * sizeof *s->kernels);
    if (!node_of || !s->kernels || !map_init(&byk, w->kernels + 1)) {
        ap_free(node_of);
        map_free(&byk);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for kernel statistics");
    }
    for (size_t j = 0; j < w->nln; j++)
        node_of[w->ln[j].rec] = w->ln[j].iv ? w->iv[w->ln[j].iv - 1].node : 0;
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        if (r->kind != AP_REC_KERNEL) continue;
        uint32_t node = node_of[i], at;
        double d = ns_s(r->start_ns, r->end_ns);
        s->kernel_count++;
        s->kernel_s += d;
        s->nodes[node].kernel_s += d;
        s->nodes[node].kernels++;
        uint64_t key = (uint64_t)node << 32 | r->name;
        if (!map_get(&byk, key, &at)) {
            at = (uint32_t)s->nkernels++;
            map_put(&byk, key, at);
            ap_kernel_stat *k = &s->kernels[at];
            memset(k, 0, sizeof *k);
            k->node = node;
            k->name = r->name;
            k->min_s = d;
            k->max_s = d;
        }
        ap_kernel_stat *k = &s->kernels[at];
        k->calls++;
        k->total_s += d;
        if (d < k->min_s) k->min_s = d;
        if (d > k->max_s) k->max_s = d;
        if (!s->first_ns || r->start_ns < s->first_ns) s->first_ns = r->start_ns;
        if (r->end_ns > s->last_ns) s->last_ns = r->end_ns;
    }
    ap_free(node_of);
    map_free(&byk);
    /* inclusive times: a node's parent was created before it, so one backward pass */
    for (size_t n = 0; n < s->nnodes; n++) s->nodes[n].kernel_incl_s = s->nodes[n].kernel_s;
    for (size_t n = s->nnodes; n-- > 1;)
        s->nodes[s->nodes[n].parent].kernel_incl_s += s->nodes[n].kernel_incl_s;
    return AP_OK;
}

static int cmp_kernel(const void *a, const void *b) {
    const ap_kernel_stat *x = a, *y = b;
    if (x->total_s != y->total_s) return x->total_s > y->total_s ? -1 : 1;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

static void sum_copies(const ap_trace *t, ap_trace_summary *s) {
    for (size_t i = 0; i < t->n; i++) {
        const ap_trace_rec *r = &t->recs[i];
        if (r->kind == AP_REC_MEMSET) s->memsets++;
        if (r->kind == AP_REC_OVERHEAD) s->overhead_s += ns_s(r->start_ns, r->end_ns);
        if (r->kind != AP_REC_MEMCPY) continue;
        unsigned kind = r->copy_dir == AP_COPY_D2H ? r->dst_kind : r->src_kind;
        ap_copy_stat *c = &s->copies[r->copy_dir][kind];
        c->calls++;
        c->bytes += (double)r->bytes;
        c->time_s += ns_s(r->start_ns, r->end_ns);
        if (!s->first_ns || r->start_ns < s->first_ns) s->first_ns = r->start_ns;
        if (r->end_ns > s->last_ns) s->last_ns = r->end_ns;
    }
}

static int cmp_time_idx(const void *a, const void *b, const ap_trace *t) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (t->recs[x].start_ns != t->recs[y].start_ns)
        return t->recs[x].start_ns < t->recs[y].start_ns ? -1 : 1;
    return x < y ? -1 : x > y;
}

static const ap_trace *sort_trace; /* qsort has no context argument in C11 */
static int cmp_mem(const void *a, const void *b) { return cmp_time_idx(a, b, sort_trace); }

/* Replay allocations, releases and pool sizes in time order. */
static ap_status memory_timeline(const ap_trace *t, ap_trace_summary *s, ap_err *err) {
    size_t nev = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t k = t->recs[i].kind;
        nev += k == AP_REC_ALLOC || k == AP_REC_FREE || k == AP_REC_POOL;
    }
    uint32_t *ev = ap_malloc((nev + 1) * sizeof *ev);
    double *bytes = ap_malloc((nev + 1) * sizeof *bytes);
    uint32_t *dev_of = ap_malloc((nev + 1) * sizeof *dev_of);
    s->timeline = ap_malloc((nev + 1) * sizeof *s->timeline);
    map64 live = {0};
    if (!ev || !bytes || !dev_of || !s->timeline || !map_init(&live, nev)) {
        ap_free(ev), ap_free(bytes), ap_free(dev_of), map_free(&live);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the memory timeline");
    }
    nev = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t k = t->recs[i].kind;
        if (k == AP_REC_ALLOC || k == AP_REC_FREE || k == AP_REC_POOL) ev[nev++] = (uint32_t)i;
    }
    sort_trace = t;
    if (nev > 1) qsort(ev, nev, sizeof *ev, cmp_mem);
    double alloc[AP_TRACE_MAX_DEVICES] = {0}, pools[AP_TRACE_MAX_DEVICES] = {0};
    size_t nvals = 0;
    for (size_t e = 0; e < nev; e++) {
        const ap_trace_rec *r = &t->recs[ev[e]];
        if (r->device >= AP_TRACE_MAX_DEVICES) continue;
        /* pool and allocation addresses live in one map: tag pools in the top bit */
        uint64_t key = r->kind == AP_REC_POOL ? r->address | (1ULL << 63) : r->address & ~(1ULL << 63);
        uint32_t at;
        int known = map_get(&live, key, &at);
        if (r->kind == AP_REC_POOL) {
            double old = known ? bytes[at] : 0;
            double now = r->id == AP_POOL_DESTROYED ? 0 : (double)r->bytes;
            if (!known) {
                at = (uint32_t)nvals++;
                map_put(&live, key, at);
                dev_of[at] = r->device;
            }
            bytes[at] = now;
            pools[dev_of[at]] += now - old;
        } else if (r->flags & AP_REC_FLAG_POOL || r->src_kind != AP_MEMK_DEVICE) {
            continue; /* from a pool (counted in its size) or not device memory */
        } else if (r->kind == AP_REC_ALLOC) {
            if (known) alloc[dev_of[at]] -= bytes[at]; /* reused address without a release */
            else {
                at = (uint32_t)nvals++;
                map_put(&live, key, at);
            }
            dev_of[at] = r->device;
            bytes[at] = (double)r->bytes;
            alloc[r->device] += bytes[at];
        } else { /* release */
            if (!known || bytes[at] == 0) continue;
            alloc[dev_of[at]] -= bytes[at];
            bytes[at] = 0;
        }
        uint32_t d = r->kind == AP_REC_POOL || known ? dev_of[at] : r->device;
        ap_mem_point *p = &s->timeline[s->ntimeline++];
        p->t_ns = r->start_ns;
        p->device = d;
        p->reserved_bytes = alloc[d] + pools[d];
        if (p->reserved_bytes > s->peak_reserved_bytes) {
            s->peak_reserved_bytes = p->reserved_bytes;
            s->peak_device = d;
            s->peak_at_ns = p->t_ns;
        }
    }
    for (int d = 0; d < AP_TRACE_MAX_DEVICES; d++)
        if (alloc[d] + pools[d] > s->end_reserved_bytes) s->end_reserved_bytes = alloc[d] + pools[d];
    ap_free(ev), ap_free(bytes), ap_free(dev_of), map_free(&live);
    return AP_OK;
}

/* The step range: the asked-for name, else the top-level range name of >= 2 occurrences that
 * cover the most host time (on a tie the one named first). */
static uint32_t step_name(const ap_trace *t, const work *w, const ap_trace_summary *s,
                          const char *want) {
    if (want && want[0]) {
        for (size_t i = 0; i < w->niv; i++)
            if (!strcmp(ap_trace_name(t, w->iv[i].name), want)) return w->iv[i].name;
        return 0;
    }
    /* the top-level range repeated at least twice whose occurrences cover the most host time:
     * a training loop's step range covers the step, while libraries open top-level ranges as
     * often on threads of their own (PyTorch's autograd thread runs CUB's
     * "cub::DeviceRadixSort" once per step: counting alone tied it with "step" on an H200) */
    uint32_t best = 0;
    double best_wall = -1;
    for (size_t n = 1; n < s->nnodes; n++) { /* top-level nodes: one per name */
        const ap_range_stat *r = &s->nodes[n];
        if (r->depth != 1 || !r->name || r->count < 2) continue;
        if (r->wall_s > best_wall || (r->wall_s == best_wall && r->name < best)) {
            best = r->name;
            best_wall = r->wall_s;
        }
    }
    return best;
}

static int cmp_iter(const void *a, const void *b) {
    const ap_iter_stat *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Is interval i nested in another interval of the same name? */
static int has_same_name_ancestor(const work *w, size_t i) {
    for (uint32_t p = w->iv[i].parent; p; p = w->iv[p - 1].parent)
        if (w->iv[p - 1].name == w->iv[i].name) return 1;
    return 0;
}

static ap_status iterations(const ap_trace *t, const work *w, const ap_summary_opts *o,
                            ap_trace_summary *s, ap_err *err) {
    uint32_t name = step_name(t, w, s, o ? o->step_range : NULL);
    if (!name) return AP_OK;
    snprintf(s->step_range, sizeof s->step_range, "%s", ap_trace_name(t, name));
    size_t n = 0;
    for (size_t i = 0; i < w->niv; i++) n += w->iv[i].name == name;
    s->iters = ap_calloc(n ? n : 1, sizeof *s->iters);
    if (!s->iters) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for iterations");
    for (size_t i = 0; i < w->niv; i++)
        if (w->iv[i].name == name && !has_same_name_ancestor(w, i)) {
            ap_iter_stat *it = &s->iters[s->niters++];
            it->start_ns = w->iv[i].start;
            it->end_ns = w->iv[i].end;
        }
    if (s->niters > 1) qsort(s->iters, s->niters, sizeof *s->iters, cmp_iter);
    for (size_t k = 0; k < s->niters; k++)
        s->iters[k].wall_s = k + 1 < s->niters ? ns_s(s->iters[k].start_ns, s->iters[k + 1].start_ns)
                                               : ns_s(s->iters[k].start_ns, s->iters[k].end_ns);
    /* kernels by launch time: the last iteration starting at or before it, if still open */
    uint64_t *first = ap_calloc(s->niters ? s->niters : 1, sizeof *first);
    uint64_t *last = ap_calloc(s->niters ? s->niters : 1, sizeof *last);
    if (!first || !last) {
        ap_free(first), ap_free(last);
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for iterations");
    }
    for (size_t j = 0; j < w->nln; j++) {
        uint64_t ts = w->ln[j].ts;
        size_t lo = 0, hi = s->niters;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s->iters[mid].start_ns <= ts) lo = mid + 1;
            else hi = mid;
        }
        if (lo == 0 || ts >= s->iters[lo - 1].end_ns) continue;
        ap_iter_stat *it = &s->iters[lo - 1];
        const ap_trace_rec *r = &t->recs[w->ln[j].rec];
        it->kernels++;
        it->kernel_s += ns_s(r->start_ns, r->end_ns);
        if (!first[lo - 1] || r->start_ns < first[lo - 1]) first[lo - 1] = r->start_ns;
        if (r->end_ns > last[lo - 1]) last[lo - 1] = r->end_ns;
    }
    /* peak reserved inside each iteration: the level at its start, then every point in it */
    size_t p = 0;
    double level[AP_TRACE_MAX_DEVICES] = {0};
    for (size_t k = 0; k < s->niters; k++) {
        ap_iter_stat *it = &s->iters[k];
        it->gpu_span_s = ns_s(first[k], last[k]);
        uint64_t until = last[k] > it->end_ns ? last[k] : it->end_ns;
        while (p < s->ntimeline && s->timeline[p].t_ns < it->start_ns) {
            level[s->timeline[p].device] = s->timeline[p].reserved_bytes;
            p++;
        }
        double peak = 0;
        for (int d = 0; d < AP_TRACE_MAX_DEVICES; d++) peak = fmax(peak, level[d]);
        for (size_t q = p; q < s->ntimeline && s->timeline[q].t_ns <= until; q++)
            peak = fmax(peak, s->timeline[q].reserved_bytes);
        it->peak_reserved_bytes = peak;
    }
    ap_free(first), ap_free(last);
    return AP_OK;
}

ap_status ap_trace_summarize(const ap_trace *t, const ap_summary_opts *opts,
                             ap_trace_summary *out, ap_err *err) {
    memset(out, 0, sizeof *out);
    work w;
    ap_status st = build(t, &w, err);
    if (st != AP_OK) return st;
    out->nodes = w.nodes; /* the summary takes the node table */
    out->nnodes = w.nnodes;
    w.nodes = NULL;
    for (size_t i = 0; i < w.niv; i++) {
        out->nodes[w.iv[i].node].count++;
        out->nodes[w.iv[i].node].wall_s += ns_s(w.iv[i].start, w.iv[i].end);
    }
    out->unmatched_ranges = w.unmatched;
    out->unattributed = w.unattributed;
    out->projected = w.projected;
    out->projected_thread = w.main_thread;
    out->dropped = t->dropped;
    st = sum_kernels(t, &w, out, err);
    if (st == AP_OK) {
        if (out->nkernels > 1) qsort(out->kernels, out->nkernels, sizeof *out->kernels, cmp_kernel);
        sum_copies(t, out);
        st = memory_timeline(t, out, err);
    }
    if (st == AP_OK) st = iterations(t, &w, opts, out, err);
    work_free(&w);
    if (st != AP_OK) ap_trace_summary_free(out);
    return st;
}

void ap_trace_summary_free(ap_trace_summary *s) {
    if (!s) return;
    ap_free(s->nodes);
    ap_free(s->kernels);
    ap_free(s->timeline);
    ap_free(s->iters);
    memset(s, 0, sizeof *s);
}

char *ap_trace_node_path(const ap_trace *t, const ap_trace_summary *s, uint32_t i, char *buf,
                         size_t n) {
    if (n == 0) return buf;
    buf[0] = '\0';
    if (i == 0 || i >= s->nnodes) {
        snprintf(buf, n, "(no range)");
        return buf;
    }
    /* collect the chain root-first (depth bounds it) */
    uint32_t chain[64];
    int depth = 0;
    for (uint32_t k = i; k && depth < 64; k = s->nodes[k].parent) chain[depth++] = k;
    size_t at = 0;
    if (s->nodes[i].depth > 64) at = (size_t)snprintf(buf, n, ".../");
    for (int d = depth - 1; d >= 0 && at < n; d--)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", ap_trace_name(t, s->nodes[chain[d]].name),
                               d ? "/" : "");
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over the iterations after `skip` of their wall time (kernels 0) or kernel time (1). */
static double iter_median(const ap_trace_summary *s, size_t skip, int kernels) {
    if (s->niters <= skip) return 0;
    size_t n = s->niters - skip;
    double *v = ap_malloc(n * sizeof *v);
    if (!v) return 0;
    for (size_t k = 0; k < n; k++)
        v[k] = kernels ? s->iters[skip + k].kernel_s : s->iters[skip + k].wall_s;
    qsort(v, n, sizeof *v, cmp_double);
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    ap_free(v);
    return med;
}

double ap_trace_step_s(const ap_trace_summary *s, size_t skip) { return iter_median(s, skip, 0); }

double ap_trace_step_kernel_s(const ap_trace_summary *s, size_t skip) {
    return iter_median(s, skip, 1);
}

int ap_trace_mark_value(const ap_trace *t, const char *key, double *value) {
    size_t kl = strlen(key);
    int found = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->recs[i].kind != AP_REC_MARK) continue;
        const char *nm = ap_trace_name(t, t->recs[i].name);
        if (strncmp(nm, key, kl) || nm[kl] != '=') continue;
        char *end = NULL;
        double v = strtod(nm + kl + 1, &end);
        if (end && !*end && isfinite(v)) {
            *value = v;
            found = 1;
        }
    }
    return found;
}

/* Itanium C++ ABI, "Mangling Structure" (itanium-cxx-abi.github.io): a function name is
 * _Z <name>; a nested name is N <source-name>... E, a source-name is <length><identifier>.
 * Only the name is read (no templates or parameters): enough to tell kernels apart. */
char *ap_trace_short_name(const char *name, char *buf, size_t n) {
    if (!n) return buf;
    buf[0] = '\0';
    if (strncmp(name, "_Z", 2) != 0) {
        snprintf(buf, n, "%s", name);
        return buf;
    }
    const char *p = name + 2;
    int nested = *p == 'N';
    if (nested) p++;
    while (*p == 'K' || *p == 'V' || *p == 'r') p++; /* cv-qualifiers of a nested name */
    size_t at = 0;
    for (int part = 0; *p >= '0' && *p <= '9'; part++) {
        char *end = NULL;
        long len = strtol(p, &end, 10);
        if (len <= 0 || (size_t)len > strlen(end)) break;
        if (at + 2 < n && part) at += (size_t)snprintf(buf + at, n - at, "::");
        if (at < n) at += (size_t)snprintf(buf + at, n - at, "%.*s", (int)len, end);
        if (at >= n) break;
        p = end + len;
        if (!nested) break;
        if (*p == 'I') break; /* template arguments follow: the name is complete */
    }
    if (!buf[0]) snprintf(buf, n, "%s", name);
    return buf;
}

/* ---- profile rows from row-named ranges ------------------------------------------------------------ */

/* "<op> <shape> <dtype>" with op in the vocabulary: 1 and the three parts; 0 when the first
 * word is not an op (an ordinary range name). */
static int row_name(const char *name, char *op, size_t nop, char *shape, size_t nshape,
                    char *dtype, size_t ndtype) {
    const char *sp1 = strchr(name, ' ');
    if (!sp1 || (size_t)(sp1 - name) >= nop) return 0;
    memcpy(op, name, (size_t)(sp1 - name));
    op[sp1 - name] = '\0';
    int known = 0;
    for (int i = 0; i < ap_profile_op_count(); i++) known |= !strcmp(ap_profile_op_name(i), op);
    if (!known) return 0;
    const char *sp2 = strchr(sp1 + 1, ' ');
    size_t ls = sp2 ? (size_t)(sp2 - sp1 - 1) : strlen(sp1 + 1);
    const char *dt = sp2 ? sp2 + 1 : "";
    snprintf(shape, nshape, "%.*s", (int)(ls < nshape ? ls : nshape - 1), sp1 + 1);
    snprintf(dtype, ndtype, "%s", dt);
    return 1;
}

typedef struct {
    uint32_t name;       /* the range name */
    double *times;       /* per occurrence with kernels, in start order */
    size_t ntimes;
    size_t total;        /* occurrences */
    size_t seen;         /* occurrences so far (for skip) */
    uint32_t top_kernel; /* name index of the kernel with the most time */
    uint32_t top_at1;    /* its (row, kernel) total + 1; 0 = none yet */
} row_acc;

ap_status ap_trace_profile_rows(const ap_trace *t, const ap_profile_row *tmpl, int skip,
                                ap_profile *out, size_t *nrows, ap_err *err) {
    if (nrows) *nrows = 0;
    work w;
    ap_status st = build(t, &w, err);
    if (st != AP_OK) return st;
    double *incl = ap_calloc(w.niv + 1, sizeof *incl);
    int32_t *row_of = ap_malloc((w.niv + 1) * sizeof *row_of);
    row_acc *rows = ap_calloc(w.niv + 1, sizeof *rows);
    size_t nr = 0;
    map64 byname = {0}, kern = {0};
    double *ktime = NULL;
    if (!incl || !row_of || !rows || !map_init(&byname, w.niv + 1)) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for profile rows");
        goto done;
    }
    /* which intervals are rows (first word an op) */
    char op[32], shape[128], dtype[16];
    for (size_t i = 0; i < w.niv; i++) {
        row_of[i] = -1;
        const char *nm = ap_trace_name(t, w.iv[i].name);
        if (!row_name(nm, op, sizeof op, shape, sizeof shape, dtype, sizeof dtype)) continue;
        uint32_t r;
        if (!map_get(&byname, w.iv[i].name, &r)) {
            r = (uint32_t)nr++;
            map_put(&byname, w.iv[i].name, r);
            rows[r].name = w.iv[i].name;
        }
        rows[r].total++;
        row_of[i] = (int32_t)r;
    }
    /* kernel time, inclusive, into every enclosing interval; per (row, kernel) totals */
    size_t pairs = 0;
    for (size_t j = 0; j < w.nln; j++)
        for (uint32_t p = w.ln[j].iv; p; p = w.iv[p - 1].parent) pairs += row_of[p - 1] >= 0;
    if (!map_init(&kern, pairs) || !(ktime = ap_calloc(pairs + 1, sizeof *ktime))) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for profile rows");
        goto done;
    }
    size_t nkt = 0;
    for (size_t j = 0; j < w.nln; j++) {
        const ap_trace_rec *r = &t->recs[w.ln[j].rec];
        double d = ns_s(r->start_ns, r->end_ns);
        for (uint32_t p = w.ln[j].iv; p; p = w.iv[p - 1].parent) {
            incl[p - 1] += d;
            if (row_of[p - 1] < 0) continue;
            uint64_t key = (uint64_t)(uint32_t)row_of[p - 1] << 32 | r->name;
            uint32_t at;
            if (!map_get(&kern, key, &at)) {
                at = (uint32_t)nkt++;
                map_put(&kern, key, at);
            }
            ktime[at] += d;
            row_acc *ra = &rows[row_of[p - 1]];
            if (!ra->top_at1 || ktime[at] > ktime[ra->top_at1 - 1]) {
                ra->top_at1 = at + 1;
                ra->top_kernel = r->name;
            }
        }
    }
    /* per row name, the occurrences in start order (intervals are sorted by thread, start) */
    size_t *order = ap_malloc((w.niv + 1) * sizeof *order);
    if (!order) {
        st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for profile rows");
        goto done;
    }
    size_t no = 0;
    for (size_t i = 0; i < w.niv; i++)
        if (row_of[i] >= 0) order[no++] = i;
    for (size_t a = 1; a < no; a++) /* insertion sort by start: rows are few */
        for (size_t b = a; b > 0 && w.iv[order[b]].start < w.iv[order[b - 1]].start; b--) {
            size_t x = order[b];
            order[b] = order[b - 1];
            order[b - 1] = x;
        }
    for (size_t a = 0; a < no; a++) {
        row_acc *ra = &rows[row_of[order[a]]];
        if (ra->seen++ < (size_t)(skip > 0 ? skip : 0) || incl[order[a]] <= 0) continue;
        if (!ra->times && !(ra->times = ap_malloc(ra->total * sizeof *ra->times))) {
            st = ap_err_set(err, AP_ERR_NOMEM, "out of memory for profile rows");
            break;
        }
        ra->times[ra->ntimes++] = incl[order[a]];
    }
    ap_free(order);
    for (size_t r = 0; st == AP_OK && r < nr; r++) {
        if (!rows[r].ntimes) continue;
        const char *nm = ap_trace_name(t, rows[r].name);
        row_name(nm, op, sizeof op, shape, sizeof shape, dtype, sizeof dtype);
        ap_bench_stats bs;
        ap_bench_stats_of(rows[r].times, rows[r].ntimes > INT32_MAX ? INT32_MAX : (int)rows[r].ntimes,
                          &bs);
        char source[192];
        snprintf(source, sizeof source, "autoplan %s profile attach; kernel %.140s", AP_VERSION,
                 ap_trace_name(t, rows[r].top_kernel));
        st = ap_bench_row(out, tmpl, op, shape, dtype, &bs, 0, source, err);
        if (st != AP_OK) ap_err_prefix(err, "NVTX range '%.200s'", nm);
        else if (nrows) (*nrows)++;
    }
done:
    for (size_t r = 0; rows && r < nr; r++) ap_free(rows[r].times);
    ap_free(rows), ap_free(incl), ap_free(row_of), ap_free(ktime);
    map_free(&byname), map_free(&kern);
    work_free(&w);
    return st;
}

/* ---- kernels by kind ---------------------------------------------------------------------------- */

static int has_ci(const char *s, const char *sub) {
    size_t n = strlen(sub);
    for (; *s; s++) {
        size_t i = 0;
        while (i < n && s[i] && tolower((unsigned char)s[i]) == sub[i]) i++;
        if (i == n) return 1;
    }
    return 0;
}

int ap_trace_kernel_kind(const char *name) {
    static const char *const attn[] = {"flash", "fmha", "attention", "sdpa"};
    static const char *const gemm[] = {"gemm", "nvjet", "xmma", "cutlass", "splitkreduce"};
    if (!name) return AP_KKIND_OTHER;
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++)
        if (has_ci(name, attn[i])) return AP_KKIND_ATTN;
    for (size_t i = 0; i < sizeof gemm / sizeof gemm[0]; i++)
        if (has_ci(name, gemm[i])) return AP_KKIND_GEMM;
    return AP_KKIND_OTHER;
}

/* 1 when node i is, or lies inside, a range named `range` (and i itself is counted there). */
static int under_range(const ap_trace *t, const ap_trace_summary *s, uint32_t i, const char *range) {
    for (uint32_t n = i; n; n = s->nodes[n].parent)
        if (!strcmp(ap_trace_name(t, s->nodes[n].name), range)) return 1;
    return 0;
}

void ap_trace_range_kinds(const ap_trace *t, const ap_trace_summary *s, const char *range,
                          double out[AP_KKIND_COUNT]) {
    for (int k = 0; k < AP_KKIND_COUNT; k++) out[k] = 0;
    if (!s->niters) return;
    for (size_t i = 0; i < s->nkernels; i++) {
        const ap_kernel_stat *ks = &s->kernels[i];
        if (ks->node >= s->nnodes || !under_range(t, s, ks->node, range)) continue;
        out[ap_trace_kernel_kind(ap_trace_name(t, ks->name))] += ks->total_s;
    }
    for (int k = 0; k < AP_KKIND_COUNT; k++) out[k] /= (double)s->niters;
}

