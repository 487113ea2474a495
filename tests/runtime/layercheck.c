/*
 * layercheck.c - each tensor-parallel piece of the runtime against its unsharded twin, run by
 * tests/test_runtime.c as `mpirun -np T rt_layercheck`: on T ranks the model's embedding, one
 * transformer layer and the head run sharded (Megatron column/row split, vocab-parallel
 * embedding and cross-entropy, with and without sequence parallelism, saving or recomputing),
 * while rank 0 runs the same pieces unsharded in a one-process session with the same weights
 * and inputs. Compared: each piece's output, its input gradient, the loss, and every parameter
 * gradient (sharded slices reassembled in the canonical layout; sequence-parallel replicated
 * gradients summed over the tp ranks as the runtime does at its reduction).
 *
 * Tolerance: fp32 sums of different lengths and orders (a row-parallel GEMM splits K over the
 * ranks): |a - b| <= 1e-5 max|b| + 1e-6 per tensor. Prints one line per case; exit 1 when any
 * comparison fails (every rank takes part; rank 0 judges).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_int.h"
#include "small_model.h"

/* deterministic inputs: standard-ish values from a hash */
static double val(uint64_t seed, int64_t i) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xbf58476d1ce4e5b9ULL + 1;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 29;
    return ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 2.0;
}

/* Host copy of `rows` rows of width h of a tracked buffer, prefixed by their first global row. */
static double *rows_to_host(rt_ctx *c, const rt_real *p, int64_t rows, int64_t h) {
    rt_real *tmp = malloc((size_t)(rows * h) * sizeof *tmp);
    double *out = malloc((size_t)(rows * h + 1) * sizeof *out);
    if (!tmp || !out) {
        free(tmp);
        free(out);
        return NULL;
    }
    c->k->download(tmp, p, rows * h * RT_ELEM);
    for (int64_t i = 0; i < rows * h; i++) out[i + 1] = tmp[i];
    out[0] = c->sp ? (double)c->tp_rank * (double)c->ns : 0;
    free(tmp);
    return out;
}

static rt_real *tracked_input(rt_ctx *c, uint64_t seed, int kind, int cat) {
    int64_t rows = c->ns, h = c->h, row0 = c->sp ? (int64_t)c->tp_rank * c->ns : 0;
    rt_real *host = malloc((size_t)(rows * h) * sizeof *host);
    rt_real *p = rt_alloc(c, cat, kind, 0, 0, rows * h);
    if (!host || !p) {
        free(host);
        return NULL;
    }
    for (int64_t i = 0; i < rows * h; i++) host[i] = (rt_real)val(seed, row0 * h + i);
    c->k->upload(p, host, rows * h * RT_ELEM);
    free(host);
    return p;
}

typedef struct outs {
    double *emb, *emb_dx_dummy, *layer, *layer_dx, *head_dx;
    double loss;
} outs;

/* embedding, one layer, head: forward and backward of micro-batch 0 on session s */
static int run_pieces(ap_rt_session *s, int recompute, outs *o) {
    rt_ctx *c = rt_session_ctx(s);
    int64_t h = c->h;
    memset(o, 0, sizeof *o);
    c->step_index = 0;
    c->loss_sum = 0;
    /* embedding */
    rt_real *x0 = rt_embed_fwd(c, 0);
    if (!x0) return -1;
    o->emb = rows_to_host(c, x0, c->ns, h);
    rt_free(c, x0);
    rt_real *ge = tracked_input(c, 11, AP_SIM_T_INPUT, AP_RT_CAT_TEMPS);
    if (!ge || rt_embed_bwd(c, 0, ge) != AP_OK) return -1;
    /* one layer */
    rt_real *x = tracked_input(c, 22, AP_SIM_T_INPUT, AP_RT_CAT_ACTIVATIONS);
    if (!x) return -1;
    c->sv[0].x = x;
    rt_real *out = rt_layer_fwd(c, 0, 0, recompute ? RT_MODE_DISCARD : RT_MODE_SAVE, x);
    if (!out) return -1;
    o->layer = rows_to_host(c, out, c->ns, h);
    rt_free(c, out);
    if (recompute) {
        rt_real *again = rt_layer_fwd(c, 0, 0, RT_MODE_RECOMPUTE, x);
        if (!again) return -1;
        rt_free(c, again);
    }
    rt_real *gl = tracked_input(c, 33, AP_SIM_T_INPUT, AP_RT_CAT_TEMPS);
    rt_real *dx = gl ? rt_layer_bwd(c, 0, 0, gl) : NULL;
    if (!dx) return -1;
    o->layer_dx = rows_to_host(c, dx, c->ns, h);
    rt_free(c, dx);
    /* head and loss */
    rt_real *xh = tracked_input(c, 44, AP_SIM_T_INPUT, AP_RT_CAT_ACTIVATIONS);
    if (!xh || rt_head_fwd(c, 0, xh) != AP_OK) return -1;
    rt_real *dh = rt_head_bwd(c, 0);
    if (!dh) return -1;
    o->head_dx = rows_to_host(c, dh, c->ns, h);
    rt_free(c, dh);
    /* sequence parallelism: replicated parameters saw one row block per rank */
    for (int i = 0; i < c->nunits; i++) {
        rt_unit *u = &c->units[i];
        if (u->n > 0 && c->sp && u->n_rep > 0 &&
            rt_c_allreduce(c, c->tpg, u->g + u->n - u->n_rep, u->n_rep, RT_OP_SUM) != AP_OK)
            return -1;
    }
    o->loss = c->loss_sum;
    return c->st == AP_OK ? 0 : -1;
}

static void free_outs(outs *o) {
    free(o->emb);
    free(o->layer);
    free(o->layer_dx);
    free(o->head_dx);
}

/* gather rank blocks of rows (each prefixed by its first row) into full [n, h] on rank 0 */
static double *gather_rows(rt_group *w, const double *mine, int64_t rows, int64_t h, int64_t n) {
    char *all = NULL;
    int64_t *lens = calloc((size_t)w->size, sizeof *lens);
    ap_err e = {{0}};
    if (!lens || w->ops->gatherv(w, mine, (rows * h + 1) * 8, &all, lens, &e) != AP_OK) {
        free(lens);
        return NULL;
    }
    double *full = NULL;
    if (w->rank == 0) {
        full = calloc((size_t)(n * h), sizeof *full);
        int64_t off = 0;
        for (int r = 0; r < w->size && full; r++) {
            const double *blk = (const double *)(all + off);
            int64_t row0 = (int64_t)blk[0];
            memcpy(full + row0 * h, blk + 1, (size_t)(rows * h) * sizeof *full);
            off += lens[r];
        }
    }
    free(all);
    free(lens);
    return full;
}

static double max_err(const double *a, const double *b, int64_t n, double *scale) {
    double mx = 0, e = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    *scale = mx;
    return e;
}

static int judge(const char *what, const double *a, const double *b, int64_t n, char *line,
                 size_t ln) {
    double scale;
    double e = max_err(a, b, n, &scale);
    int ok = e <= 1e-5 * scale + 1e-6;
    size_t k = strlen(line);
    snprintf(line + k, ln - k, " %s %.1e%s", what, scale > 0 ? e / scale : e, ok ? "" : "(FAIL)");
    return ok;
}

static int run_case(ap_rt_comm *w, int llama, int sp, int recompute) {
    int T = ap_rt_comm_size(w), rank = ap_rt_comm_rank(w);
    ap_rt_job job;
    ap_rt_job_init(&job);
    /* one layer, h 16, 8 heads of 2; GQA for llama with kv heads tp divides; sequence 8 */
    small_model(&job.model, llama, 1, 16, 8, llama ? (T > 2 ? 4 : 2) : 8, 32, 32, 8);
    job.plan.tp = T;
    job.plan.dp = 1;
    job.plan.seq = 8;
    job.plan.mbs = 2;
    job.plan.gbs = 2;
    job.plan.grad_accum = 1;
    job.plan.sp = sp;
    job.plan.recompute = recompute ? AP_RECOMPUTE_FULL : AP_RECOMPUTE_NONE;
    ap_err err = {{0}};
    ap_rt_session *s = NULL, *twin = NULL;
    if (ap_rt_session_new(&job, w, &s, &err) != AP_OK) {
        fprintf(stderr, "layercheck: %s\n", err.msg);
        return 0;
    }
    outs so, to;
    int ok = run_pieces(s, recompute, &so) == 0;
    if (!ok) fprintf(stderr, "layercheck: rank %d: %s\n", rank, rt_session_ctx(s)->err->msg);
    rt_ctx *c = rt_session_ctx(s);
    int64_t n = c->n, h = c->h, np = ap_rt_param_count(&job.model);
    double *emb = gather_rows(w->world, so.emb, c->ns, h, n);
    double *lay = gather_rows(w->world, so.layer, c->ns, h, n);
    double *ldx = gather_rows(w->world, so.layer_dx, c->ns, h, n);
    double *hdx = gather_rows(w->world, so.head_dx, c->ns, h, n);
    double *g = rank == 0 ? malloc((size_t)np * sizeof *g) : NULL;
    ap_rt_session_gather(s, 1, g, &err);
    /* the loss of the micro-batch: every tp rank computed it, rank 0 reports it */
    double loss = so.loss;
    if (rank == 0) {
        ap_rt_job tj = job;
        tj.plan.tp = 1;
        tj.plan.sp = 0;
        double *tg = malloc((size_t)np * sizeof *tg);
        if (tg && ap_rt_session_new(&tj, ap_rt_comm_self(), &twin, &err) == AP_OK &&
            run_pieces(twin, recompute, &to) == 0 &&
            ap_rt_session_gather(twin, 1, tg, &err) == AP_OK && emb && lay && ldx && hdx && g) {
            char line[512];
            snprintf(line, sizeof line, "layercheck: tp %d %s%s%s:", T, llama ? "llama" : "gpt",
                     sp ? " sp" : "", recompute ? " recompute" : "");
            ok &= judge("embed", emb, to.emb + 1, n * h, line, sizeof line);
            ok &= judge("layer", lay, to.layer + 1, n * h, line, sizeof line);
            ok &= judge("layer_dx", ldx, to.layer_dx + 1, n * h, line, sizeof line);
            ok &= judge("head_dx", hdx, to.head_dx + 1, n * h, line, sizeof line);
            ok &= judge("loss", &loss, &to.loss, 1, line, sizeof line);
            /* every gradient tensor */
            int nt = ap_rt_tensor_count(&job.model), bad = 0;
            for (int i = 0; i < nt; i++) {
                ap_rt_tensor_info ti;
                ap_rt_tensor_at(&job.model, i, &ti);
                double scale;
                double e = max_err(g + ti.offset, tg + ti.offset, ti.rows * ti.cols, &scale);
                if (e > 1e-5 * scale + 1e-6) {
                    fprintf(stderr, "layercheck: gradient %s differs by %.3g (scale %.3g)\n",
                            ti.name, e, scale);
                    bad++;
                }
            }
            size_t k = strlen(line);
            snprintf(line + k, sizeof line - k, " grads %d/%d%s", nt - bad, nt, bad ? "(FAIL)" : "");
            ok &= bad == 0;
            printf("%s %s\n", line, ok ? "ok" : "FAIL");
            fflush(stdout);
            free_outs(&to);
        } else {
            fprintf(stderr, "layercheck: twin failed: %s\n", err.msg);
            ok = 0;
        }
        free(tg);
        ap_rt_session_free(twin);
    }
    free(g);
    free(emb);
    free(lay);
    free(ldx);
    free(hdx);
    free_outs(&so);
    ap_rt_session_free(s);
    return ok;
}

int main(int argc, char **argv) {
    ap_rt_comm *w = NULL;
    ap_err err = {{0}};
    if (ap_rt_mpi_init(&argc, &argv, &w, &err) != AP_OK) {
        fprintf(stderr, "layercheck: %s\n", err.msg);
        return 1;
    }
    int ok = 1;
    for (int llama = 0; llama < 2; llama++)
        for (int sp = 0; sp < 2; sp++)
            for (int rc = 0; rc < 2; rc++) ok &= run_case(w, llama, sp, rc);
    int rank = ap_rt_comm_rank(w);
    ap_rt_mpi_finalize(w);
    return rank == 0 && !ok ? 1 : 0;
}
