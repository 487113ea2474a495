/*
 * chunk.c - Colossal-AI Gemini's chunks (hetero.h): the chunk-size search and the packing of
 * parameters into chunks, reproduced from colossalai/zero/gemini/chunk/ (v0.5.1, @4f9953be).
 *
 *   search   search_utils.py search_chunk_configuration: a group whose parameters sum below
 *            min_chunk_size stays one gathered chunk; otherwise parameters above mean + 3 std
 *            (_filter_exlarge_params, numpy's population std) leave the search, and every size
 *            from ceil(max(largest, min_chunk)/interval)*interval to search_range more, in steps
 *            of interval (GeminiPlugin passes hidden_dim, default 1024), is scored by
 *            _get_unused_byte; the least wins (the first on ties), rounded up to the zero group.
 *   layout   manager.py ChunkManager.register_tensor: parameters in registration order append to
 *            the last chunk while they fit its own size (chunk.py append_tensor raises
 *            ChunkFullError); a parameter larger than the chunk size opens a chunk of its own
 *            size rounded up to the zero group.
 *
 * The fp32 master chunks use the same configuration and the same parameter sizes, so they pair
 * one to one with the fp16 chunks (gemini_ddp.py _init_chunks); callers reuse one layout.
 * Not here: what the chunks do at run time (gemini.c).
 */
#include <math.h>
#include <stdlib.h>

#include "autoplan/hetero.h"

int64_t ap_gemini_unused_elems(const int64_t *sizes, int n, int64_t chunk_elems) {
    /* _get_unused_byte: a parameter that does not fit the space left closes the chunk (its
     * tail is waste) and opens a new one; the last chunk's tail counts too */
    int64_t acc = 0, left = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] > left) {
            acc += left;
            left = chunk_elems;
        }
        left -= sizes[i];
    }
    return left + acc;
}

/* The parameters of a model repeat layer by layer. The longest periodic stretch of sizes:
 * [*a, *a + *reps * *per) is *reps copies of sizes[*a, *a + *per), with *per <= max_per
 * (the shortest period on equal coverage); *reps = 0 when nothing repeats. One pass per
 * period. */
static void find_period(const int64_t *s, int n, int max_per, int *a, int *per, int *reps) {
    *a = *per = *reps = 0;
    int64_t best = 0;
    for (int p = 1; p <= max_per && 2 * p <= n; p++) {
        int run = 0; /* s[i - run .. i) == s[i - run + p .. i + p) */
        for (int i = 0; i + p <= n; i++) {
            if (i + p < n && s[i] == s[i + p]) {
                run++;
                continue;
            }
            /* the stretch [i - run, i + p) has period p: (run + p) / p whole copies */
            int r = (run + p) / p;
            if (r >= 2 && (int64_t)r * p > best) {
                best = (int64_t)r * p;
                *a = i - run, *per = p, *reps = r;
            }
            run = 0;
        }
    }
}

/* ap_gemini_unused_elems with the period of find_period. The packing's state at a copy's start
 * is the space left in the open chunk, and the next copy's state is a function of it; once a
 * state repeats, the copies between the two add the same waste each time, and the rest of the
 * cycles are skipped. The cycle is found as Brent's algorithm finds one (one comparison per copy
 * against a state saved at power-of-two distances). Exact: the same sum. */
static int64_t unused_periodic(const int64_t *s, int n, int64_t cs, int a, int per, int reps) {
    int64_t acc = 0, left = 0;
    for (int i = 0; i < a; i++) {
        if (s[i] > left) acc += left, left = cs;
        left -= s[i];
    }
    int64_t saved_left = left, saved_acc = acc;
    int saved_r = 0, power = 1, skipped = 0;
    for (int r = 0; r < reps; r++) {
        if (!skipped && r > saved_r) {
            if (left == saved_left) {
                int c = r - saved_r;
                int64_t jumps = (reps - r) / c;
                acc += jumps * (acc - saved_acc);
                r += (int)(jumps * c);
                skipped = 1;
                if (r >= reps) break;
            } else if (r - saved_r == power) {
                saved_left = left, saved_acc = acc, saved_r = r;
                power *= 2;
            }
        }
        const int64_t *b = s + a + (int64_t)r * per;
        for (int i = 0; i < per; i++) {
            if (b[i] > left) acc += left, left = cs;
            left -= b[i];
        }
    }
    for (int i = a + reps * per; i < n; i++) {
        if (s[i] > left) acc += left, left = cs;
        left -= s[i];
    }
    return left + acc;
}

static int64_t round_up(int64_t v, int64_t q) { return q > 1 ? v + (-v % q + q) % q : v; }

ap_status ap_gemini_chunk_search(const int64_t *sizes, int n, int zero_size,
                                 double search_range_m, int64_t interval,
                                 double min_chunk_size_m, ap_chunk_config *out, ap_err *err) {
    *out = (ap_chunk_config){0};
    if (n < 1 || !sizes)
        return ap_err_set(err, AP_ERR_INPUT, "chunk search: no parameters");
    if (zero_size < 1)
        return ap_err_set(err, AP_ERR_INPUT, "chunk search: zero group size must be >= 1");
    if (!(search_range_m >= 0) || search_range_m > 1e6 || !(min_chunk_size_m >= 0) ||
        min_chunk_size_m > 1e6)
        return ap_err_set(err, AP_ERR_INPUT, "chunk search: search_range_m and min_chunk_size_m "
                          "must be in [0, 1e6]");
    if (interval < 1)
        return ap_err_set(err, AP_ERR_INPUT, "chunk search: the search interval must be >= 1");
    /* search_range = round(search_range_m * 1024**2); min_chunk_size likewise (Python's round
       is to nearest even on .5; the products here are whole for the usual inputs) */
    int64_t search_range = (int64_t)nearbyint(search_range_m * AP_MIB);
    int64_t min_chunk = (int64_t)nearbyint(min_chunk_size_m * AP_MIB);
    if (search_range / interval > 100000000)
        return ap_err_set(err, AP_ERR_INPUT, "chunk search: %lld sizes to scan (search range / "
                          "interval) is too many", (long long)(search_range / interval));
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 1)
            return ap_err_set(err, AP_ERR_INPUT, "chunk search: parameter %d has %lld elements", i,
                              (long long)sizes[i]);
        total += sizes[i];
    }
    out->total_elems = total;
    if (total < min_chunk) {
        /* "let small parameters keep gathered in CUDA all the time" */
        out->keep_gathered = 1;
        out->chunk_elems = total;
        out->waste_elems = 0;
        return AP_OK;
    }
    /* _filter_exlarge_params: mean + 3 * population std over all sizes */
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++) mean += (double)sizes[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += ((double)sizes[i] - mean) * ((double)sizes[i] - mean);
    double upper = mean + 3.0 * sqrt(var / n);
    int64_t *kept = ap_malloc((size_t)n * sizeof *kept);
    if (!kept) return ap_err_set(err, AP_ERR_NOMEM, "chunk search: out of memory");
    int nk = 0;
    int64_t max_size = min_chunk;
    for (int i = 0; i < n; i++) {
        if ((double)sizes[i] <= upper) {
            kept[nk++] = sizes[i];
            if (sizes[i] > max_size) max_size = sizes[i];
        }
    }
    out->nfiltered = n - nk;
    int a, per, reps;
    find_period(kept, nk, 64, &a, &per, &reps);
    int64_t start = (max_size + interval - 1) / interval * interval;
    int64_t best = start, best_waste = -1;
    for (int64_t cs = start; cs <= start + search_range; cs += interval) {
        int64_t w = unused_periodic(kept, nk, cs, a, per, reps);
        if (best_waste < 0 || w < best_waste) {
            best_waste = w;
            best = cs;
        }
    }
    ap_free(kept);
    out->search_start = start;
    out->search_end = start + search_range / interval * interval;
    out->waste_elems = best_waste;
    /* "the chunk size needs to be divided by each groups sizes" (one group: the zero size) */
    out->chunk_elems = round_up(best, zero_size);
    return AP_OK;
}

int ap_gemini_chunk_layout(const int64_t *sizes, int n, const ap_chunk_config *cfg, int zero_size,
                           int32_t *chunk_of, int64_t *chunk_elems) {
    int nc = 0;
    int64_t used = 0; /* utilized_size of the last chunk */
    for (int i = 0; i < n; i++) {
        if (nc > 0 && used + sizes[i] <= chunk_elems[nc - 1]) {
            used += sizes[i];
        } else {
            int64_t cs = cfg->chunk_elems;
            if (sizes[i] > cs) cs = round_up(sizes[i], cfg->keep_gathered ? 1 : zero_size);
            chunk_elems[nc++] = cs;
            used = sizes[i];
        }
        chunk_of[i] = nc - 1;
    }
    return nc;
}
