/*
 * gemini.c - Colossal-AI Gemini (GeminiPlugin, v0.5.1 @4f9953be) simulated as it runs, chunk by
 * chunk and operator by operator, to reproduce its byte movements. Each rule cites the file and
 * function of colossalai/zero/gemini/ it follows; docs/heterogeneous.md walks through them.
 *
 * Structure:
 *   setup      chunks from the search (chunk.c) in parameter order, fp16 and fp32 paired
 *              (gemini_ddp.py _init_chunks); where each chunk's shard starts (cpu_offload unless
 *              static without parameter offload; pinned host copies with pin_memory); which
 *              chunks' optimizer runs on the CPU (placement_policy.py setup_grads_device).
 *   operator   pre_op (gemini_hook.py): states to COMPUTE, adjust_layout (gemini_mgr.py: CUDA
 *              demand, evictable chunks, the policy's evict_tensors), synchronous fetch
 *              (manager.py access_chunk: H2D of a CPU shard, all-gather), prefetch; the
 *              operator's non-model data (event simulator) on top; post_op; gradient hooks
 *              (gemini_ddp.py grad_handle: reduce-scatter when a chunk's tensors are all
 *              READY_FOR_REDUCE, D2H of the gradient shard to the optimizer's device).
 *   policies   static (StaticPlacementPolicy.evict_tensors: release then offload until the kept
 *              memory is reached) and auto (AutoPlacementPolicy.evict_tensors: warm-up with 80%
 *              of the GPU for non-model data, then per operator the measured non-model data and
 *              a 90% cap, evicting by furthest next use).
 *   step       GeminiOptimizer.step: HybridAdam on the CPU (cpu_adam_op) or the GPU, the fp16
 *              chunks updated from the fp32 ones or marked for a paired move
 *              (chunk.py optim_update / __paired_shard_move: the next fetch moves fp32).
 *
 * Reproduced as the code does it, including: the static policy's fractions are taken of a sum
 * over parameters, not chunks (setup_grads_device sums chunk_mem per parameter); the auto
 * policy's layout information is cached per operator index (gemini_mgr.py _get_layout_info is
 * an lru_cache), so after the first steady iteration it reuses that iteration's CUDA demand and
 * evictable list; the warm-up measures non-model data as the peak allocated memory of each
 * sampling window minus the model data after the fetch (memstats_collector.py).
 * Assumed: CPython iterates the set of chunks in setup_grads_device in creation order (the real
 * order follows object addresses); one rank of the ZeRO group is simulated (rank 0, whose
 * shards hold the most valid elements).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hetero_int.h"

enum { ST_FREE = 0, ST_COMPUTE, ST_HOLD, ST_HOLD_AFTER_BWD, ST_READY, ST_N };

typedef struct gch {
    int64_t elems, utilized, shard, valid;
    int ntensors;
    int cnt[ST_N];           /* fp16 chunk tensor states (TensorState counter) */
    int gcnt[ST_N];          /* gradient chunk tensor states */
    int8_t keep;             /* keep_gathered */
    int8_t gathered, cuda_shard, cpu_shard, cpu_vis, optim_sync, inflight; /* accessed: g->acc */
    int8_t f32_cuda, f32_cpu;/* fp32 master shard on the GPU; a host copy of it */
    int8_t grad_cuda;        /* grads_device (and the optimizer) is the GPU */
    int8_t g_exists, g_gathered, g_cuda_shard, g_cpu_shard, g_accessed;
    double ready_at;         /* prefetched: when its copy lands */
    double mem, shard_b;     /* bytes of the 16-bit chunk and of this rank's shard, and of the */
    double shard32, valid8;  /* fp32 shard and of Adam's m and v over the valid elements: fixed
                                by the layout, worked out once (setup) */
    double u_cuda, u_host, u_pin;/* its usage as add_usage last counted it: every change of a
                                    chunk's state sits between sub_usage and add_usage, so
                                    sub_usage takes these back instead of working them out */
} gch;

/* The layout information of one operator index (gemini_mgr.py _get_layout_info, lru_cache). */
typedef struct lcache {
    int valid;
    double demand;
    size_t evict;            /* the list's first element in gem.pool */
    int nevict;
    double evict_mem;        /* the chunk memory of evict[], summed in its order */
    int sorted;              /* evict[] is in eviction order (auto placement, steady state:
                                sort_by_next_use, once: its keys are the operator's) */
} lcache;

typedef struct gem {
    hctx *x;
    const ap_plan_hetero *h;
    gch *ch;
    int nch;
    int32_t *chunk_of;       /* per parameter */
    int32_t *first;          /* nch + 1: chunk c holds parameters [first[c], first[c + 1]) (the
                                layout packs them in order) */
    int8_t *pst;             /* per parameter: fp16 chunk tensor state */
    int8_t *gst;             /* per parameter: gradient chunk tensor state */
    int reuse;               /* reuse_fp16_chunk = master_weights and not gradient accumulation */
    int ga;                  /* enable_gradient_accumulation */
    int accumulating;
    int warmup;
    int states_exist;        /* Adam states created (after the first step) */
    int moved_fp32;          /* _maybe_move_fp32_params done */
    double keep_gathered_mem, keep_cuda_mem;
    /* model data on the GPU (ChunkManager.total_mem["cuda"]) and on the host */
    double md, host, pinned;
    /* warm-up memory statistics */
    double *nmd;
    int nnmd, capnmd, step_idx;
    double win_peak, md_recorded, max_overall;
    int have_window;
    double cur_nmd;          /* non-model bytes at this moment */
    /* operators: compute list of the warm-up iteration, lru caches */
    int compute_idx;
    int32_t *cl;             /* chunks per operator, flattened */
    int32_t *cl_off;         /* nops + 1 offsets */
    int cl_have;
    lcache *lc_warm, *lc_steady;
    int32_t *pool;           /* the lcaches' evictable lists, end to end (one per operator and
                                phase, each written once): one array grown by doubling, not an
                                allocation per operator (they were 11% of fit's time) */
    size_t npool, cappool;
    int32_t *tmp, *tmp2;     /* scratch lists of chunks */
    uint64_t *acc;           /* chunk i accessed (ChunkManager.accessed_chunks) as bit i, 64
                                chunks a word: layout_info scans the few accessed chunks (under
                                1% of megatron-1t's at a time) by word instead of every chunk */
    uint64_t *acc_any;       /* bit w: acc[w] is not zero (the scan visits those words only:
                                a 500-layer model's thousands of chunks are dozens of words,
                                most of them zero, at each of its operators) */
    int32_t *use_off, *use;  /* the compute list by chunk: chunk c is used by operators
                                use[use_off[c] .. use_off[c + 1]), ascending (built once) */
    int64_t *nextuse;
    double avail_prefetch;
    double reserved_nmd;     /* non-model data the auto policy reserved at this operator */
    int failed;
    int rec;                 /* current operator record */
    int nasync;              /* prefetches in flight */
    int8_t what;             /* what a movement carries now (ap_hetero_move.what) */
} gem;

#define E16 (g->x->elt)

/* ---- memory accounting (Chunk.memory_usage, ChunkManager.__add/__sub_memory_usage) ------- */

static void usage(const gem *g, const gch *c, double *cuda, double *host, double *pin) {
    double e = E16;
    double cu = 0, ho = 0, pi = 0;
    if (c->keep) {
        cu += (double)c->elems * (e + 4.0); /* fp16 and fp32 kept gathered */
        if (g->states_exist) cu += 8.0 * (double)c->utilized;
        if (c->g_exists) cu += c->mem;
    } else {
        const int pinned = g->h->pin_memory;
        if (c->gathered) cu += c->mem;
        if (c->cuda_shard) cu += c->shard_b;
        if (c->cpu_shard) ho += c->shard_b, pi += pinned ? c->shard_b : 0;
        if (c->f32_cuda) cu += c->shard32;
        if (c->f32_cpu) ho += c->shard32, pi += pinned ? c->shard32 : 0;
        if (g->states_exist) {
            /* HybridAdam's exp_avg and exp_avg_sq, zeros_like the fake parameter on its device
               (hybrid_adam.py step), registered as extern static tensors */
            if (c->grad_cuda) cu += c->valid8;
            else ho += c->valid8;
        }
        if (c->g_gathered) cu += c->mem;
        if (c->g_cuda_shard) cu += c->shard_b;
        if (c->g_cpu_shard) ho += c->shard_b, pi += pinned ? c->shard_b : 0;
    }
    *cuda = cu;
    *host = ho;
    *pin = pi;
}

static void sub_usage(gem *g, const gch *c) {
#ifdef AP_GEMINI_CHECK_USAGE
    double cu, ho, pi;
    usage(g, c, &cu, &ho, &pi);
    if (cu != c->u_cuda || ho != c->u_host || pi != c->u_pin) abort();
#endif
    g->md -= c->u_cuda;
    g->host -= c->u_host;
    g->pinned -= c->u_pin;
}

static void add_usage(gem *g, gch *c) {
    double cu, ho, pi;
    usage(g, c, &cu, &ho, &pi);
    c->u_cuda = cu;
    c->u_host = ho;
    c->u_pin = pi;
    g->md += cu;
    g->host += ho;
    g->pinned += pi;
    hx_host_point(g->x, g->rec, g->host, g->pinned);
}

/* A moment inside an operation: model data now plus `extra` transient bytes. */
static void point(gem *g, double extra) {
    double v = g->md + extra + g->cur_nmd;
    if (v > g->win_peak) g->win_peak = v;
    if (v > g->max_overall) g->max_overall = v;
    hx_gpu_point(g->x, g->rec, g->md + extra, g->cur_nmd);
}

static int device_cuda(const gch *c) { return c->gathered || c->cuda_shard || c->keep; }
static double chunk_mem(const gem *g, const gch *c) { (void)g; return c->mem; }
static double shard_mem(const gem *g, const gch *c) { (void)g; return c->shard_b; }
static int can_release(const gch *c) {
    return !c->keep && c->cnt[ST_HOLD] + c->cnt[ST_HOLD_AFTER_BWD] == c->ntensors;
}

/* ---- chunk operations (chunk.py, manager.py) -------------------------------------------- */

/* Chunk.shard_move to the GPU or the host. */
static void shard_move(gem *g, int ci, int to_cuda, int force, int async, double not_before) {
    gch *c = &g->ch[ci];
    hctx *x = g->x;
    if (to_cuda) {
        if (!c->optim_sync) {
            /* __paired_shard_move: the fp32 master shard goes up and is cast on the GPU */
            point(g, c->shard32 + shard_mem(g, c));
            double b = (double)c->shard * 4.0;
            hx_move(x, g->rec, ci, AP_MOVE_H2D_FP32, 2, b);
            double end = ht_span(x, ENG_H2D, b / ht_h2d_bps(x, g->h->pin_memory), not_before,
                                 !async);
            if (async) c->ready_at = end;
            c->cuda_shard = 1;
            if (!g->h->pin_memory) c->cpu_shard = 0;
            c->optim_sync = 1;
            return;
        }
        if (c->cuda_shard) return;
        point(g, shard_mem(g, c));
        hx_move(x, g->rec, ci, AP_MOVE_H2D, g->what, shard_mem(g, c));
        double end = ht_span(x, ENG_H2D, shard_mem(g, c) / ht_h2d_bps(x, g->h->pin_memory),
                             not_before, !async);
        if (async) c->ready_at = end;
        c->cuda_shard = 1;
        if (!g->h->pin_memory) c->cpu_shard = 0;
        return;
    }
    if (!c->cuda_shard) return;
    int copy = !g->h->pin_memory || force || !c->cpu_vis;
    if (copy) {
        hx_move(x, g->rec, ci, AP_MOVE_D2H, g->what, shard_mem(g, c));
        ht_span(x, ENG_D2H, shard_mem(g, c) / ht_d2h_bps(x, g->h->pin_memory), not_before, !async);
    }
    c->cpu_shard = 1;
    c->cpu_vis = 1;
    c->cuda_shard = 0;
}

/* Chunk.__gather: all-gather the shards into the global chunk. */
static void gather(gem *g, int ci, int async) {
    gch *c = &g->ch[ci];
    if (c->gathered) return;
    point(g, chunk_mem(g, c)); /* global allocated while the shard lives */
    hctx *x = g->x;
    double dur = ht_collective_s(x, AP_COLL_ALLGATHER_OP, chunk_mem(g, c));
    if (x->Z > 1) hx_move(x, g->rec, ci, AP_MOVE_GATHER, 0, chunk_mem(g, c) * (x->Z - 1) / x->Z);
    double end = ht_span(x, ENG_COLL, dur, async ? c->ready_at : 0, !async);
    if (async) c->ready_at = end;
    c->gathered = 1;
    c->cuda_shard = 0;
}

/* Chunk.__scatter: keep this rank's shard, free the global chunk (a GPU copy). */
static void scatter(gem *g, int ci) {
    gch *c = &g->ch[ci];
    if (c->keep || !c->gathered) return;
    point(g, shard_mem(g, c));
    c->cuda_shard = 1;
    c->gathered = 0;
}

/* Chunk ci accessed or not (its bit in g->acc). */
static int is_accessed(const gem *g, int ci) { return (int)(g->acc[ci >> 6] >> (ci & 63) & 1); }

static void set_accessed(gem *g, int ci, int on) {
    int w = ci >> 6;
    if (on) {
        g->acc[w] |= 1ull << (ci & 63);
        g->acc_any[w >> 6] |= 1ull << (w & 63);
    } else {
        g->acc[w] &= ~(1ull << (ci & 63));
        if (!g->acc[w]) g->acc_any[w >> 6] &= ~(1ull << (w & 63));
    }
}

/* ChunkManager.access_chunk */
static void access_chunk(gem *g, int ci, int async) {
    gch *c = &g->ch[ci];
    if (is_accessed(g, ci)) return;
    sub_usage(g, c);
    if (!device_cuda(c)) shard_move(g, ci, 1, 0, async, 0);
    gather(g, ci, async);
    set_accessed(g, ci, 1);
    if (async) {
        c->inflight = 1;
        g->nasync++;
    }
    add_usage(g, c);
}

/* ChunkManager.release_chunk */
static void release_chunk(gem *g, int ci) {
    gch *c = &g->ch[ci];
    if (!is_accessed(g, ci) || !can_release(c)) return;
    sub_usage(g, c);
    scatter(g, ci);
    set_accessed(g, ci, 0);
    add_usage(g, c);
}

/* ChunkManager.move_chunk */
static void move_chunk(gem *g, int ci, int to_cuda, int force, int async, double not_before) {
    gch *c = &g->ch[ci];
    if (c->keep || c->gathered || device_cuda(c) == to_cuda) return;
    sub_usage(g, c);
    shard_move(g, ci, to_cuda, force, async, not_before);
    add_usage(g, c);
}

/* The gradient chunk's shard to the optimizer's device (move_chunk on grad_chunk). */
static void move_grad_chunk(gem *g, int ci, int to_cuda, int async, double not_before) {
    gch *c = &g->ch[ci];
    if (c->keep || c->g_gathered) return;
    int on_cuda = c->g_cuda_shard;
    if (on_cuda == to_cuda) return;
    sub_usage(g, c);
    hctx *x = g->x;
    if (to_cuda) {
        hx_move(x, g->rec, ci, AP_MOVE_H2D, 1, shard_mem(g, c));
        ht_span(x, ENG_H2D, shard_mem(g, c) / ht_h2d_bps(x, g->h->pin_memory), not_before, !async);
        c->g_cuda_shard = 1;
        if (!g->h->pin_memory) c->g_cpu_shard = 0;
    } else {
        hx_move(x, g->rec, ci, AP_MOVE_D2H, 1, shard_mem(g, c)); /* force_copy=True */
        ht_span(x, ENG_D2H, shard_mem(g, c) / ht_d2h_bps(x, g->h->pin_memory), not_before, !async);
        c->g_cpu_shard = 1;
        c->g_cuda_shard = 0;
    }
    add_usage(g, c);
}

/* ---- setup -------------------------------------------------------------------------------- */

/* The chunk configuration of the parameter sizes (search_chunk_configuration), through the
 * caller's memo: the scan for a zero group of 1, then rounded up to this plan's
 * (search_utils.py rounds the chunk size to the group after the scan), so plans differing in
 * dp share it. */
static ap_status chunk_config(hctx *x, const int64_t *sizes, int n, ap_err *err) {
    const ap_plan_hetero *h = &x->p->hetero;
    /* init_chunk_manager: search_interval = hidden_dim or 1024 (chunk/utils.py) */
    int64_t interval = h->hidden_dim > 0 ? h->hidden_dim : 1024;
    ap_status st = AP_OK;
    uint64_t key = ap_hash64(sizes, (size_t)n * sizeof *sizes, 0x9e3779b97f4a7c15ull);
    key = ap_hash64(&h->search_range_m, sizeof h->search_range_m, key);
    key = ap_hash64(&interval, sizeof interval, key);
    key = ap_hash64(&h->min_chunk_size_m, sizeof h->min_chunk_size_m, key);
    if (x->Z < 1) {
        st = ap_err_set(err, AP_ERR_INPUT, "chunk search: zero group size must be >= 1");
    } else if (!hx_chunks_find(x, key, &x->sum.chunks)) {
        st = ap_gemini_chunk_search(sizes, n, 1, h->search_range_m, interval,
                                    h->min_chunk_size_m, &x->sum.chunks, err);
        if (st == AP_OK) hx_chunks_keep(x, key, &x->sum.chunks);
    }
    if (st == AP_OK && !x->sum.chunks.keep_gathered && x->Z > 1) {
        int64_t z = x->Z, c = x->sum.chunks.chunk_elems;
        x->sum.chunks.chunk_elems = (c + z - 1) / z * z;
    }
    return st;
}

static ap_status setup(gem *g, ap_err *err) {
    hctx *x = g->x;
    const ap_plan_hetero *h = g->h;
    int n = x->nparams;
    int64_t *sizes = ap_malloc((size_t)n * sizeof *sizes);
    int64_t *celems = ap_malloc((size_t)n * sizeof *celems);
    g->chunk_of = ap_malloc((size_t)n * sizeof *g->chunk_of);
    g->pst = ap_malloc((size_t)n);
    g->gst = ap_malloc((size_t)n);
    if (!sizes || !celems || !g->chunk_of || !g->pst || !g->gst) {
        ap_free(sizes);
        ap_free(celems);
        return ap_err_set(err, AP_ERR_NOMEM, "gemini: out of memory");
    }
    for (int i = 0; i < n; i++) sizes[i] = x->params[i].numel;
    ap_status st = chunk_config(x, sizes, n, err);
    if (st != AP_OK) {
        ap_free(sizes);
        ap_free(celems);
        return st;
    }
    g->nch = ap_gemini_chunk_layout(sizes, n, &x->sum.chunks, x->Z, g->chunk_of, celems);
    x->sum.nchunks = g->nch;
    g->ch = ap_calloc((size_t)g->nch, sizeof *g->ch);
    g->tmp = ap_malloc((size_t)(g->nch + 1) * sizeof *g->tmp);
    g->tmp2 = ap_malloc((size_t)(g->nch + 1) * sizeof *g->tmp2);
    g->acc = ap_calloc((size_t)g->nch / 64 + 1, sizeof *g->acc);
    g->acc_any = ap_calloc((size_t)g->nch / 4096 + 1, sizeof *g->acc_any);
    g->nextuse = ap_malloc((size_t)(g->nch + 1) * sizeof *g->nextuse);
    g->first = ap_malloc((size_t)(g->nch + 1) * sizeof *g->first);
    if (!g->ch || !g->tmp || !g->tmp2 || !g->acc || !g->acc_any || !g->nextuse || !g->first) {
        ap_free(sizes);
        ap_free(celems);
        return ap_err_set(err, AP_ERR_NOMEM, "gemini: out of memory");
    }
    for (int i = 0; i < g->nch; i++) {
        gch *c = &g->ch[i];
        c->elems = celems[i];
        c->keep = (int8_t)x->sum.chunks.keep_gathered;
        c->shard = c->keep ? c->elems : c->elems / x->Z;
    }
    for (int c = 0, i = 0; c <= g->nch; c++) {
        while (i < n && g->chunk_of[i] < c) i++;
        g->first[c] = i;
    }
    for (int i = 0; i < n; i++) {
        gch *c = &g->ch[g->chunk_of[i]];
        c->utilized += sizes[i];
        c->ntensors++;
        c->cnt[ST_HOLD]++;
        g->pst[i] = ST_HOLD;
        g->gst[i] = ST_HOLD;
    }
    ap_free(sizes);
    ap_free(celems);
    /* rank 0's shard: [0, shard) of the chunk, valid up to utilized (Chunk.close_chunk) */
    for (int i = 0; i < g->nch; i++) {
        gch *c = &g->ch[i];
        c->valid = c->keep ? c->utilized : (c->utilized < c->shard ? c->utilized : c->shard);
        c->mem = (double)c->elems * E16;
        c->shard_b = (double)c->shard * E16;
        c->shard32 = (double)c->shard * 4.0;
        c->valid8 = 8.0 * (double)c->valid;
    }
    /* GeminiDDP._init_chunks: cpu_offload = not (static and offload_param_frac == 0); a closed
       chunk keeps a host shard when pinned or offloaded, and its CUDA shard only when not
       offloaded (Chunk.close_chunk); keep_gathered chunks stay gathered */
    int cpu_offload = !(h->placement == AP_GEMINI_STATIC && h->offload_param_frac == 0);
    /* setup_grads_device: static offloads optimizer chunks until offload_optim_frac of
       total_chunk_mem, summed per parameter (sum(get_chunk(p).chunk_mem for p in params)),
       over the set of chunks (creation order assumed); auto offloads all but kept chunks */
    double total_chunk_mem = 0, real_total = 0, off_mem = 0;
    for (int i = 0; i < n; i++) total_chunk_mem += chunk_mem(g, &g->ch[g->chunk_of[i]]);
    for (int i = 0; i < g->nch; i++) real_total += chunk_mem(g, &g->ch[i]);
    double target = total_chunk_mem * h->offload_optim_frac, offloaded = 0;
    for (int i = 0; i < g->nch; i++) {
        gch *c = &g->ch[i];
        if (h->placement == AP_GEMINI_AUTO) {
            c->grad_cuda = c->keep;
        } else if (c->keep || offloaded >= target) {
            c->grad_cuda = 1;
        } else {
            c->grad_cuda = 0;
            offloaded += chunk_mem(g, c);
        }
        if (!c->grad_cuda) off_mem += chunk_mem(g, c);
        if (c->keep) {
            c->gathered = 1; /* not accessed: g->acc starts clear */
        } else {
            c->cpu_shard = (int8_t)(h->pin_memory || cpu_offload);
            c->cpu_vis = c->cpu_shard;
            c->cuda_shard = (int8_t)!cpu_offload;
            /* the fp32 chunk starts like the fp16 one, then moves to its grads device */
            c->f32_cuda = (int8_t)c->grad_cuda;
            c->f32_cpu = (int8_t)(h->pin_memory || !c->grad_cuda);
        }
        c->optim_sync = 1;
        add_usage(g, c);
    }
    x->sum.offload_optim_frac_effective = real_total > 0 ? off_mem / real_total : 0;
    g->keep_gathered_mem = total_chunk_mem * (1.0 - h->shard_param_frac);
    g->keep_cuda_mem = total_chunk_mem * (1.0 - h->offload_param_frac);
    g->reuse = !g->ga; /* master_weights=True (GeminiPlugin default) */
    g->warmup = 1;
    return AP_OK;
}

/* What the steps keep per operator (hx_ops makes the operators). */
static ap_status setup_ops(gem *g, ap_err *err) {
    hctx *x = g->x;
    ap_status st = hx_ops(x, err);
    if (st != AP_OK) return st;
    g->cl_off = ap_calloc((size_t)x->nops + 1, sizeof *g->cl_off);
    g->cl = ap_malloc(((size_t)x->nops * HOP_MAXP + 1) * sizeof *g->cl);
    g->lc_warm = ap_calloc((size_t)x->nops + 1, sizeof *g->lc_warm);
    g->lc_steady = ap_calloc((size_t)x->nops + 1, sizeof *g->lc_steady);
    g->cappool = 1024;
    g->pool = ap_malloc(g->cappool * sizeof *g->pool);
    if (!g->cl_off || !g->cl || !g->lc_warm || !g->lc_steady || !g->pool)
        return ap_err_set(err, AP_ERR_NOMEM, "gemini: out of memory");
    return AP_OK;
}

/* The memory once the Adam states exist (optimizer_step's _register_states, the end of the
 * first step): each chunk's fp32 shard stays where setup put it (only the auto placement
 * moves fp32 chunks, _maybe_move_fp32_params, with gpu_margin_mem_ratio > 0), the states join
 * the chunk's gradient device, and kept chunks stay gathered on the GPU with their fp32 copy
 * and states. So the host then holds at least the fp32 shards and states placed there, and
 * the GPU at least its kept chunks, fp32 shards and states with the device overhead (the
 * step's point after the registration has no operator's data); the 16-bit and gradient
 * shards, which come and go, are left out. Where the caller reads nothing of a stopped run
 * (ap_hetero_opts.stop_early) and either alone passes its stop rule (hx_host_point's,
 * hx_gpu_point's), the run stops now: a static run would stop by then, on that resource or
 * sooner (no static step fails). An auto run may fail first ("Adjust layout failed"), unfit
 * too but not stopped: it stops now only where every unfit run stops (stop_unfit), whose
 * caller reads no failed run's figures either (search.h any_fit, no_closest; a search once a
 * plan fits). */
static int may_stop_early(const gem *g) {
    return hx_may_stop_early(g->x) &&
           (g->h->placement == AP_GEMINI_STATIC || g->x->o->stop_unfit);
}

static void states_stop(gem *g) {
    hctx *x = g->x;
    if (!may_stop_early(g) || g->h->gpu_margin_mem_ratio > 0) return;
    double host = 0, gpu = 0;
    for (int i = 0; i < g->nch; i++) {
        const gch *c = &g->ch[i];
        if (c->keep) {
            gpu += (double)c->elems * (E16 + 4.0) + 8.0 * (double)c->utilized;
            continue;
        }
        if (c->f32_cpu) host += c->shard32;
        if (c->f32_cuda) gpu += c->shard32;
        if (c->grad_cuda) gpu += c->valid8;
        else host += c->valid8;
    }
    const ap_hetero_summary *s = &x->sum;
    const double cap = s->gpu_capacity_bytes;
    hx_stop_past(x, AP_BIND_GPU, gpu + x->overhead_bytes + s->headroom_bytes - cap, cap);
    hx_stop_past(x, AP_BIND_HOST, host * x->gpus_per_node - 0.9 * s->host_capacity_bytes,
                 s->host_capacity_bytes);
}

/* The GPU at each operator of the first micro-batch, at run_op's point once the operator's
 * chunks are accessed (gathered): at least the kept chunks and the fp32 shards on the GPU
 * (setup's, as above), the operator's own chunks whole, and its non-model data and weight
 * gradients with the device overhead. Where the largest passes the GPU's stop rule, the run
 * stops now, under the conditions above (an auto run may fail before that operator). */
static void ops_stop(gem *g) {
    hctx *x = g->x;
    if (!may_stop_early(g)) return;
    double fixed = 0;
    for (int i = 0; i < g->nch; i++) {
        const gch *c = &g->ch[i];
        if (c->keep) fixed += (double)c->elems * (E16 + 4.0);
        else if (c->f32_cuda) fixed += c->shard32;
    }
    double worst = 0;
    for (int k = 0; k < x->nops; k++) {
        const hop *o = &x->ops[k];
        int32_t seen[HOP_MAXP];
        int ns = 0;
        double v = (double)o->nmd_peak + (double)o->wgrad_bytes;
        for (int i = 0; i < o->nparams; i++) {
            int ci = g->chunk_of[o->params[i]], dup = 0;
            for (int j = 0; j < ns; j++) dup |= seen[j] == ci;
            if (dup) continue;
            seen[ns++] = ci;
            if (!g->ch[ci].keep) v += chunk_mem(g, &g->ch[ci]);
        }
        if (v > worst) worst = v;
    }
    const ap_hetero_summary *s = &x->sum;
    hx_stop_past(x, AP_BIND_GPU,
                 fixed + worst + x->overhead_bytes + s->headroom_bytes - s->gpu_capacity_bytes,
                 s->gpu_capacity_bytes);
}

/* ---- placement policies (placement_policy.py) -------------------------------------------- */

/* Index of the lowest set bit of b (b != 0). */
static int ctz64(uint64_t b) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(b);
#else
    int n = 0;
    while (!(b & 1)) b >>= 1, n++;
    return n;
#endif
}

/* GeminiManager._get_layout_info: CUDA demand of the operator's chunks and the evictable
 * chunks (ChunkManager.get_cuda_movable_chunks: accessed and releasable, by count_id). */
static lcache *layout_info(gem *g, const int32_t *chunks, int nc, ap_err *err) {
    lcache *lc = g->warmup ? &g->lc_warm[g->compute_idx] : &g->lc_steady[g->compute_idx];
    if (lc->valid) return lc;
    double demand = 0;
    for (int i = 0; i < nc; i++) {
        const gch *c = &g->ch[chunks[i]];
        if (device_cuda(c)) demand += c->gathered ? 0 : chunk_mem(g, c) - shard_mem(g, c);
        else demand += chunk_mem(g, c);
    }
    /* the list in g->tmp2, then kept at its own length (one list per operator and phase) */
    int ne = 0;
    double mem = 0;
    for (int a = 0; a <= (g->nch - 1) >> 12; a++)
        for (uint64_t wb = g->acc_any[a]; wb; wb &= wb - 1) {
            int w = (a << 6) + ctz64(wb);
            for (uint64_t b = g->acc[w]; b; b &= b - 1) {
                int i = (w << 6) + ctz64(b);
                if (can_release(&g->ch[i])) {
                    g->tmp2[ne++] = i;
                    mem += chunk_mem(g, &g->ch[i]);
                }
            }
        }
    if (g->npool + (size_t)ne > g->cappool) {
        size_t cap = 2 * g->cappool;
        while (cap < g->npool + (size_t)ne) cap *= 2;
        int32_t *p = ap_realloc(g->pool, cap * sizeof *p);
        if (!p) {
            ap_err_set(err, AP_ERR_NOMEM, "gemini: out of memory");
            return NULL;
        }
        g->pool = p, g->cappool = cap;
    }
    memcpy(g->pool + g->npool, g->tmp2, (size_t)ne * sizeof *g->pool);
    lc->evict = g->npool;
    g->npool += (size_t)ne;
    lc->nevict = ne;
    lc->evict_mem = mem;
    lc->demand = demand;
    lc->valid = 1;
    return lc;
}

/* The operator's evictable chunks are the layout's list less the prefetches in flight (a
 * chunk being copied is not movable); neither loop below starts or ends a prefetch. With none
 * in flight the list's memory is the sum layout_info took in the same order, and an operator
 * whose chunks stay within both kept budgets walks no list at all. */
static void static_evict(gem *g, const lcache *lc) {
    const int32_t *ev = g->pool + lc->evict;
    const int ne = lc->nevict;
    double can_shard = lc->evict_mem;
    if (g->nasync > 0) {
        can_shard = 0;
        for (int i = 0; i < ne; i++)
            if (!g->ch[ev[i]].inflight) can_shard += chunk_mem(g, &g->ch[ev[i]]);
    }
    double can_offload = can_shard;
    for (int i = 0; i < ne && can_shard > g->keep_gathered_mem; i++) {
        if (g->ch[ev[i]].inflight) continue;
        release_chunk(g, ev[i]);
        can_shard -= chunk_mem(g, &g->ch[ev[i]]);
    }
    for (int i = 0; i < ne && can_offload > g->keep_cuda_mem; i++) {
        if (g->ch[ev[i]].inflight) continue;
        move_chunk(g, ev[i], 0, 0, 0, 0);
        can_offload -= chunk_mem(g, &g->ch[ev[i]]);
    }
}

/* AutoPlacementPolicy._sort_can_evict_chunks: next use after compute_idx (len(compute_list)
 * when none), furthest first; Python's sort is stable. */
static int build_uses(gem *g) {
    int nops = g->x->nops, n = g->cl_off[nops];
    g->use_off = ap_calloc((size_t)g->nch + 2, sizeof *g->use_off);
    g->use = ap_malloc((size_t)n + 1 > 0 ? ((size_t)n + 1) * sizeof *g->use : 1);
    if (!g->use_off || !g->use) return -1;
    for (int j = 0; j < n; j++) g->use_off[g->cl[j] + 2]++;
    for (int c = 0; c < g->nch; c++) g->use_off[c + 2] += g->use_off[c + 1];
    for (int k = 0; k < nops; k++)
        for (int j = g->cl_off[k]; j < g->cl_off[k + 1]; j++) g->use[g->use_off[g->cl[j] + 1]++] = k;
    return 0; /* use_off[c + 1] is now the end of chunk c, use_off[c] its start */
}

static void sort_by_next_use(gem *g, int32_t *ev, int ne) {
    int nops = g->x->nops;
    if (!g->use && build_uses(g) < 0) {
        /* out of memory: the scan of the compute list */
        for (int i = 0; i < ne; i++) g->nextuse[ev[i]] = nops;
        for (int k = nops - 1; k > g->compute_idx; k--)
            for (int j = g->cl_off[k]; j < g->cl_off[k + 1]; j++) g->nextuse[g->cl[j]] = k;
    } else {
        for (int i = 0; i < ne; i++) {
            /* the first use after compute_idx (a chunk's uses are ascending) */
            int lo = g->use_off[ev[i]], hi = g->use_off[ev[i] + 1];
            while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                if (g->use[mid] <= g->compute_idx) lo = mid + 1;
                else hi = mid;
            }
            g->nextuse[ev[i]] = lo < g->use_off[ev[i] + 1] ? g->use[lo] : nops;
        }
    }
    /* stable insertion sort, descending */
    for (int i = 1; i < ne; i++) {
        int32_t v = ev[i];
        int j = i - 1;
        while (j >= 0 && g->nextuse[ev[j]] < g->nextuse[v]) {
            ev[j + 1] = ev[j];
            j--;
        }
        ev[j + 1] = v;
    }
}

static int auto_evict(gem *g, lcache *lc) {
    const double demand = lc->demand;
    const ap_plan_hetero *h = g->h;
    double cap = g->x->capacity_bytes; /* colo_device_memory_capacity: total x fraction 1.0 */
    double max_nmd;
    if (g->warmup) {
        max_nmd = cap * h->warmup_non_model_data_ratio;
    } else {
        /* next_period_non_model_data_usage: the warm-up's list, one entry per call */
        max_nmd = g->nnmd > 0 ? g->nmd[g->step_idx] : 0;
        g->reserved_nmd = max_nmd;
        g->step_idx = g->nnmd > 0 ? (g->step_idx + 1) % g->nnmd : 0;
        cap *= h->steady_cuda_cap_ratio;
    }
    double avail = cap - max_nmd - g->md, freed = 0;
    if (avail < demand) {
        double to_free = demand - avail;
        /* the layout's evictable chunks less the prefetches in flight (static_evict), in the
         * order of their next use after this operator: the sort of the operator's whole list,
         * kept, less those in flight is the (stable) sort of what is left */
        if (!g->warmup && !lc->sorted) {
            sort_by_next_use(g, g->pool + lc->evict, lc->nevict);
            lc->sorted = 1;
        }
        const int32_t *ev = g->pool + lc->evict;
        for (int i = 0; i < lc->nevict; i++) {
            if (g->ch[ev[i]].inflight) continue;
            if (freed >= to_free) break;
            release_chunk(g, ev[i]);
            move_chunk(g, ev[i], 0, 0, 0, 0);
            freed += chunk_mem(g, &g->ch[ev[i]]);
        }
        if (freed < to_free) {
            char a[32], b[32];
            snprintf(g->x->sum.failure, sizeof g->x->sum.failure,
                     "Gemini auto placement: \"Adjust layout failed! No enough CUDA memory!\" "
                     "(need %s more for model data, freed %s)",
                     ap_fmt_bytes(to_free, a, sizeof a), ap_fmt_bytes(freed, b, sizeof b));
            return -1;
        }
    }
    g->avail_prefetch = avail + freed;
    return 0;
}

/* PlacementPolicy.get_prefetch_chunks (static and auto; none during warm-up). */
static int prefetch_list(gem *g, int32_t *out) {
    if (g->warmup || g->h->max_prefetch <= 0 || !g->cl_have) return 0;
    int can = g->h->max_prefetch - g->nasync, n = 0;
    double mem = 0;
    for (int k = g->compute_idx + 1; k < g->x->nops && n < can; k++) {
        int brk = 0;
        for (int j = g->cl_off[k]; j < g->cl_off[k + 1]; j++) {
            int ci = g->cl[j];
            const gch *c = &g->ch[ci];
            if (n >= can || (g->h->placement == AP_GEMINI_AUTO &&
                             mem + chunk_mem(g, c) > g->avail_prefetch)) {
                brk = 1;
                break;
            }
            int dup = 0;
            for (int i = 0; i < n; i++) dup |= out[i] == ci;
            if (!dup && !is_accessed(g, ci)) {
                mem += chunk_mem(g, c);
                out[n++] = ci;
            }
        }
        if (brk) break;
    }
    return n;
}

/* ---- one operator ------------------------------------------------------------------------- */

static void set_state(gem *g, int8_t *st, int *cnt, int p, int to) {
    static const int ok[ST_N][ST_N] = {
        /* STATE_TRANS of chunk.py */
        [ST_FREE] = {[ST_HOLD] = 1, [ST_COMPUTE] = 1},
        [ST_HOLD] = {[ST_FREE] = 1, [ST_COMPUTE] = 1},
        [ST_COMPUTE] = {[ST_HOLD] = 1, [ST_HOLD_AFTER_BWD] = 1},
        [ST_HOLD_AFTER_BWD] = {[ST_COMPUTE] = 1, [ST_READY] = 1},
        [ST_READY] = {[ST_HOLD] = 1}};
    (void)g;
    if (!ok[st[p]][to]) return;
    cnt[st[p]]--;
    st[p] = (int8_t)to;
    cnt[to]++;
}

static void grad_handle(gem *g, int p) {
    hctx *x = g->x;
    int ci = g->chunk_of[p];
    gch *c = &g->ch[ci];
    int async = g->h->enable_async_reduce;
    if (!g->reuse) {
        sub_usage(g, c);
        if (!g->accumulating || !c->g_exists) {
            /* init_grad_chunk: a gathered gradient chunk on the GPU (pinned host shard) */
            if (!c->g_exists) {
                c->g_exists = 1;
                for (int i = g->first[ci]; i < g->first[ci + 1]; i++) g->gst[i] = ST_HOLD;
                c->gcnt[ST_HOLD] = c->ntensors;
                for (int s = 0; s < ST_N; s++)
                    if (s != ST_HOLD) c->gcnt[s] = 0;
                c->g_cpu_shard = (int8_t)g->h->pin_memory;
            }
            if (!c->g_gathered) point(g, chunk_mem(g, c));
            c->g_cuda_shard = 0;
            c->g_gathered = 1;
            c->g_accessed = 1;
        } else if (!c->g_accessed) {
            /* rearrange_accumulated_grad_chunk: the accumulated shard back to the GPU (H2D
               when it sits on the host), a fresh gathered chunk, the shard added in */
            point(g, chunk_mem(g, c) + shard_mem(g, c));
            if (!c->g_cuda_shard) {
                hx_move(x, g->rec, ci, AP_MOVE_H2D, 1, shard_mem(g, c));
                ht_sync(x, ENG_H2D, shard_mem(g, c), ht_h2d_bps(x, g->h->pin_memory));
            }
            c->g_cuda_shard = 0;
            c->g_gathered = 1;
            c->g_accessed = 1;
        }
        add_usage(g, c);
        set_state(g, g->gst, c->gcnt, p, ST_COMPUTE);
        set_state(g, g->gst, c->gcnt, p, ST_HOLD_AFTER_BWD);
        set_state(g, g->pst, c->cnt, p, ST_READY);
        set_state(g, g->pst, c->cnt, p, ST_HOLD);
        set_state(g, g->gst, c->gcnt, p, ST_READY);
        if (c->gcnt[ST_READY] != c->ntensors) return;
    } else {
        set_state(g, g->pst, c->cnt, p, ST_READY);
        if (c->cnt[ST_READY] != c->ntensors) return;
    }
    /* reduce_chunk: all tensors READY_FOR_REDUCE; pg_size 1 scatters, keep_gathered
       all-reduces, otherwise reduce-scatter into a new CUDA shard (chunk.py Chunk.reduce) */
    sub_usage(g, c);
    double bytes = chunk_mem(g, c);
    double dur = ht_collective_s(x, c->keep ? AP_COLL_ALLREDUCE_OP : AP_COLL_REDUCESCATTER_OP, bytes);
    if (x->Z > 1) hx_move(x, g->rec, ci, AP_MOVE_REDUCE, 1, bytes * (x->Z - 1) / x->Z);
    double rend = ht_span(x, ENG_COLL, dur, 0, !async);
    if (g->reuse) {
        if (!c->keep) {
            point(g, shard_mem(g, c));
            c->gathered = 0;
            c->cuda_shard = 1;
        }
        for (int i = g->first[ci]; i < g->first[ci + 1]; i++)
            if (g->pst[i] == ST_READY) {
                c->cnt[ST_READY]--;
                c->cnt[ST_HOLD]++;
                g->pst[i] = ST_HOLD;
            }
        set_accessed(g, ci, 0);
        add_usage(g, c);
        /* move_chunk(grad_chunk = chunk, grads_device, force_copy=True) */
        g->what = 1;
        if (!c->grad_cuda) move_chunk(g, ci, 0, 1, async, rend);
        g->what = 0;
    } else {
        if (!c->keep) {
            point(g, shard_mem(g, c));
            c->g_gathered = 0;
            c->g_cuda_shard = 1;
        }
        for (int i = g->first[ci]; i < g->first[ci + 1]; i++)
            if (g->gst[i] == ST_READY) {
                c->gcnt[ST_READY]--;
                c->gcnt[ST_HOLD]++;
                g->gst[i] = ST_HOLD;
            }
        c->g_accessed = 0;
        add_usage(g, c);
        release_chunk(g, ci);
        if (!c->grad_cuda) move_grad_chunk(g, ci, 0, async, rend);
        /* "if not master_weights or enable_gradient_accumulation": the fp16 chunk follows */
        g->what = 0;
        if (!c->grad_cuda) move_chunk(g, ci, 0, 1, async, rend);
    }
}

/* Warm-up sampling (memstats_collector.py sample_overall_data): close the window. */
static void sample(gem *g) {
    if (!g->warmup) return;
    if (g->have_window) {
        if (g->nnmd == g->capnmd) {
            int nc = g->capnmd ? g->capnmd * 2 : 256;
            double *q = ap_realloc(g->nmd, (size_t)nc * sizeof *q);
            if (!q) {
                g->x->nomem = 1;
                return;
            }
            g->nmd = q;
            g->capnmd = nc;
        }
        g->nmd[g->nnmd++] = g->win_peak - g->md_recorded;
    }
    g->have_window = 1;
    g->win_peak = g->md + g->cur_nmd;
}

static int run_op(gem *g, int k, int64_t mb, ap_err *err) {
    hctx *x = g->x;
    const hop *o = &x->ops[k];
    g->rec = hx_rec(x, o->module, o->phase, o->layer, mb);
    g->cur_nmd = (double)o->nmd_start;
    /* pre_op: the operator's chunks, in parameter order */
    int nc = 0;
    int32_t *chunks = g->tmp;
    for (int i = 0; i < o->nparams; i++) {
        int ci = g->chunk_of[o->params[i]];
        int dup = 0;
        for (int j = 0; j < nc; j++) dup |= chunks[j] == ci;
        if (!dup) chunks[nc++] = ci;
    }
    /* wait_chunks: prefetched chunks are waited for, the rest fetched below */
    for (int i = 0; i < nc; i++) {
        gch *c = &g->ch[chunks[i]];
        if (c->inflight) {
            ht_wait(x, c->ready_at);
            c->inflight = 0;
            g->nasync--;
        }
    }
    for (int i = 0; i < o->nparams; i++) {
        gch *c = &g->ch[g->chunk_of[o->params[i]]];
        set_state(g, g->pst, c->cnt, o->params[i], ST_COMPUTE);
    }
    sample(g);
    /* adjust_layout */
    g->compute_idx++;
    if (g->warmup) {
        g->cl_off[g->compute_idx + 1] = g->cl_off[g->compute_idx] + nc;
        memcpy(&g->cl[g->cl_off[g->compute_idx]], chunks, (size_t)nc * sizeof *chunks);
    }
    lcache *lc = layout_info(g, chunks, nc, err);
    if (!lc) return -1;
    int rc = 0;
    if (g->h->placement == AP_GEMINI_STATIC) static_evict(g, lc);
    else rc = auto_evict(g, lc);
    if (rc < 0) {
        g->failed = 1;
        hx_gpu_point(x, g->rec, g->md + lc->demand, g->cur_nmd);
        return 0;
    }
    for (int i = 0; i < nc; i++) access_chunk(g, chunks[i], 0);
    int32_t pf[1024];
    int npf = prefetch_list(g, pf);
    for (int i = 0; i < npf; i++) access_chunk(g, pf[i], 1);
    g->md_recorded = g->md; /* record_model_data_volume */
    if (g->rec >= 0) {
        double res = g->h->placement == AP_GEMINI_AUTO && !g->warmup
                         ? g->reserved_nmd
                         : (double)o->nmd_peak + (double)o->wgrad_bytes;
        hx_planned(x, g->rec, g->md + res);
    }
    /* the operator runs: its non-model data on top of the model data */
    g->cur_nmd = (double)o->nmd_peak + (double)o->wgrad_bytes;
    point(g, 0);
    x->tl.t += hx_op_compute_s(x, o);
    /* post_op and the gradient hooks */
    for (int i = 0; i < o->nparams; i++) {
        gch *c = &g->ch[g->chunk_of[o->params[i]]];
        set_state(g, g->pst, c->cnt, o->params[i], o->phase == AP_PHASE_FWD ? ST_HOLD
                                                                            : ST_HOLD_AFTER_BWD);
    }
    for (int i = 0; i < o->nhooks; i++) grad_handle(g, o->hooks[i]);
    return 0;
}

/* ---- the optimizer step ------------------------------------------------------------------- */

static void optimizer_step(gem *g) {
    hctx *x = g->x;
    const ap_plan_hetero *h = g->h;
    int rec = hx_rec(x, -1, 3, -1, -1);
    g->rec = rec;
    g->cur_nmd = 0;
    if (!g->moved_fp32) {
        g->moved_fp32 = 1;
        /* GeminiOptimizer._maybe_move_fp32_params: auto placement with gpu_margin_mem_ratio >
           0 and HybridAdam (num_fp32_shards_per_param = 4 >= 2) moves fp32 chunks (and their
           fp16 chunks, now holding gradients) to the GPU within margin * ratio / 4 */
        if (h->placement == AP_GEMINI_AUTO && h->gpu_margin_mem_ratio > 0) {
            double margin = x->capacity_bytes - g->max_overall;
            double avail = margin * h->gpu_margin_mem_ratio / 4.0, used = 0;
            for (int i = 0; i < g->nch; i++) {
                gch *c = &g->ch[i];
                if (c->keep || c->grad_cuda) continue;
                double pm = (double)c->shard * 4.0;
                if (used + pm < avail) {
                    sub_usage(g, c);
                    c->f32_cuda = 1;
                    if (!h->pin_memory) c->f32_cpu = 0;
                    hx_move(x, rec, i, AP_MOVE_H2D_FP32, 2, pm);
                    add_usage(g, c);
                    move_chunk(g, i, 1, 0, 0, 0);
                    sub_usage(g, c);
                    c->grad_cuda = 1;
                    add_usage(g, c);
                    used += pm;
                }
            }
        }
    }
    /* HybridAdam.step: cpu_adam_op on the host partitions (fp16 gradients: reads fp32 param,
       m, v and the 16-bit gradient, writes param, m, v: 4+4+4+2 + 4+4+4 = 26 bytes per
       element; bf16 gradients take torch_adam_update, a chain of PyTorch ops: grad.to(fp32) 6,
       weight decay 8, m 20, v 20, denominator 24, update 16 = 94 bytes, cpu_adam.py);
       multi_tensor_adam on the GPU ones (26 bytes) plus optim_update's fp32 -> fp16 copy (6) */
    double ncpu = 0, ngpu = 0;
    for (int i = 0; i < g->nch; i++) {
        const gch *c = &g->ch[i];
        if (c->keep) ngpu += (double)c->utilized;
        else if (c->grad_cuda) ngpu += (double)c->valid;
        else ncpu += (double)c->valid;
    }
    double cpu_bpe = x->p->dtype == AP_DTYPE_BF16 ? 94.0 : 26.0;
    x->sum.cpu_adam_s = ht_cpu_adam_s(x, ncpu, cpu_bpe);
    x->sum.gpu_adam_s = ht_gpu_pass_s(x, ngpu * 32.0);
    x->tl.t += x->sum.cpu_adam_s + x->sum.gpu_adam_s;
    if (!g->states_exist) {
        /* _register_states: the Adam states now count as model data */
        for (int i = 0; i < g->nch; i++) sub_usage(g, &g->ch[i]);
        g->states_exist = 1;
        for (int i = 0; i < g->nch; i++) add_usage(g, &g->ch[i]);
    }
    point(g, 0);
    /* _update_fp16_params -> Chunk.optim_update */
    for (int i = 0; i < g->nch; i++) {
        gch *c = &g->ch[i];
        if (c->keep || c->gathered) continue;
        if (device_cuda(c) && c->f32_cuda) {
            c->optim_sync = 1;
            c->cpu_vis = 0;
        } else {
            c->optim_sync = 0;
            c->cpu_vis = 0;
        }
    }
    g->accumulating = 0;
}

/* ---- the run ------------------------------------------------------------------------------ */

static void backward_end(gem *g) {
    hctx *x = g->x;
    /* _post_backward: async_reduce_stream.synchronize(); accessed_mem must be 0 */
    double w = x->tl.coll_free > x->tl.d2h_free ? x->tl.coll_free : x->tl.d2h_free;
    ht_wait(x, w);
    g->cur_nmd = 0;
    sample(g); /* post_iter: finish_collection samples once more */
    if (g->warmup) g->have_window = 0;
    if (g->warmup) g->cl_have = 1;
    g->warmup = 0;
    g->compute_idx = -1;
    if (g->ga && !g->accumulating) g->accumulating = 1;
    for (int i = 0; i < g->nch; i++) g->ch[i].g_accessed = 0;
}

ap_status ap_gemini_sim(hctx *x, ap_err *err) {
    gem gg, *g = &gg;
    memset(g, 0, sizeof *g);
    g->x = x;
    g->h = &x->p->hetero;
    g->ga = x->mb > 1;
    g->compute_idx = -1;
    snprintf(x->sum.name, sizeof x->sum.name, "gemini-%s",
             ap_gemini_placement_name(g->h->placement));
    x->sum.kind = AP_HETERO_GEMINI;
    ap_status st = setup(g, err);
    if (st == AP_OK) states_stop(g);
    if (st == AP_OK && !x->unfit) st = setup_ops(g, err);
    if (st == AP_OK) ops_stop(g);
    int steps = x->o->steps;
    for (int s = 0; st == AP_OK && s < steps && !g->failed && !x->unfit; s++) {
        int last = s == steps - 1;
        x->recording = last && x->o->record;
        if (last) {
            /* the reported step: fresh clocks and traffic counters */
            ht_reset(&x->tl);
            x->sum.h2d_bytes = x->sum.d2h_bytes = x->sum.gather_bytes = x->sum.reduce_bytes = 0;
            x->sum.gpu_peak_bytes = x->sum.gpu_model_peak_bytes = 0;
            x->sum.first_over_op = -1;
            x->sum.over_bytes = 0;
            x->recording = 1;
        }
        hsnap s1a, s1b;
        for (int64_t mb = 0; mb < x->mb && !g->failed && !x->unfit && st == AP_OK; mb++) {
            if (hx_skipped(mb, x->mb)) {
                mb = hx_repeat_rest(x, &s1a, &s1b);
                continue;
            }
            if (mb == 1) hx_snap(x, &s1a);
            for (int k = 0; k < x->nops && !g->failed && !x->unfit; k++)
                if (run_op(g, k, mb, err) < 0) st = AP_ERR_NOMEM;
            if (!g->failed && !x->unfit) backward_end(g);
            if (mb == 1) hx_snap(x, &s1b);
        }
        if (st == AP_OK && !g->failed && !x->unfit) optimizer_step(g);
    }
    if (st == AP_OK) {
        x->sum.compute_s = x->mb * (x->fwd_s + x->bwd_s);
        x->sum.h2d_s = x->tl.h2d_busy;
        x->sum.d2h_s = x->tl.d2h_busy;
        x->sum.transfer_exposed_s = x->tl.exposed;
        x->sum.collective_exposed_s = x->tl.coll_exposed;
        x->sum.overhead_s = x->step_overhead_s;
        x->sum.step_s = x->tl.t + x->step_overhead_s;
    }
    ap_free(g->pool);
    ap_free(g->lc_warm);
    ap_free(g->lc_steady);
    ap_free(g->ch);
    ap_free(g->chunk_of);
    ap_free(g->first);
    ap_free(g->pst);
    ap_free(g->gst);
    ap_free(g->nmd);
    ap_free(g->cl);
    ap_free(g->cl_off);
    ap_free(g->tmp);
    ap_free(g->tmp2);
    ap_free(g->acc);
    ap_free(g->acc_any);
    ap_free(g->use_off);
    ap_free(g->use);
    ap_free(g->nextuse);
    return st;
}
