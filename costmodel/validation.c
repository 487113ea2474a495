/*
 * validation.c - published training runs as validation rows (tests/data/validation.json, built
 * by tools/make_validation.py), their predictions by the cost model, error statistics per
 * source, and the fit of the eight physical calibration parameters on them
 * (include/autoplan/validation.h). Printing is the CLI's (cli/cmd_validate.c).
 *
 * Time metrics (step_s, layer_s) form the time MAPE; memory metrics (activations_bytes,
 * states_bytes, reserved_bytes, device_bytes: what nvidia-smi shows) the memory MAPE; "oom" rows count as hit or missed. Overall =
 * mean over sources of each source's MAPE.
 */
#include "autoplan/validation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/json.h"

#define MAX_ROWS AP_VALIDATION_MAX_ROWS
#define MAX_SOURCES AP_VALIDATION_MAX_SOURCES

typedef ap_vrow vrow;
typedef ap_vshown vshown;
typedef ap_vset vset;
typedef ap_verr errstat;

ap_vset *ap_vset_new(void) { return ap_calloc(1, sizeof(ap_vset)); }

void ap_vset_free(ap_vset *vs) {
    if (vs) ap_free(vs->rows);
    ap_free(vs);
}

/* Room for row n: the capacity doubles (from 64). 0 when out of memory. */
static int room_for_row(vset *vs) {
    if (vs->n < vs->cap) return 1;
    int cap = vs->cap ? 2 * vs->cap : 64;
    vrow *r = ap_realloc(vs->rows, (size_t)cap * sizeof *r);
    if (!r) return 0;
    vs->rows = r;
    vs->cap = cap;
    return 1;
}

ap_status ap_vset_copy(ap_vset *dst, const ap_vset *src, ap_err *err) {
    vrow *rows = dst->rows;
    int cap = dst->cap;
    if (cap < src->n) {
        ap_free(rows);
        rows = ap_malloc((size_t)(src->n > 0 ? src->n : 1) * sizeof *rows);
        cap = rows ? src->n : 0;
    }
    *dst = *src;
    dst->rows = rows;
    dst->cap = cap;
    if (!rows) {
        dst->n = 0;
        return ap_err_set(err, AP_ERR_NOMEM, "out of memory for %d validation rows", src->n);
    }
    if (src->n > 0) memcpy(rows, src->rows, (size_t)src->n * sizeof *rows);
    return AP_OK;
}

/* The model of a row: native fields (or an HF config) parsed by the model reader; the row may
 * name it (an HF config has no name of its own). */
static ap_status read_model(const ap_json *r, const char *where, vrow *v, ap_err *err) {
    const ap_json *mj = ap_json_get(r, "model");
    char *mtext = mj ? ap_json_print(mj, 0) : NULL;
    if (!mtext) return ap_err_set(err, AP_ERR_INPUT, "%s: missing field 'model'", where);
    char mwhere[4224];
    snprintf(mwhere, sizeof mwhere, "%s.model", where);
    ap_status st = ap_model_parse(mtext, strlen(mtext), mwhere, &v->model, err);
    ap_free(mtext);
    if (st != AP_OK) return st;
    size_t nl = strnlen(v->model.name, sizeof v->model_name - 1);
    memcpy(v->model_name, v->model.name, nl);
    v->model_name[nl] = '\0';
    int named = 0;
    return ap_json_get_str(r, "model_name", v->model_name, sizeof v->model_name, &named, where,
                           err);
}

/* The cluster of a row: catalog GPU, count, node size and network bandwidth per GPU. */
static ap_status read_cluster(const ap_json *r, const char *where, vrow *v, ap_err *err) {
    char gpu[64], net[64];
    int64_t gpus, gpn;
    ap_status st;
    const ap_gpu *g;
    if ((st = ap_json_get_str(r, "gpu", gpu, sizeof gpu, NULL, where, err)) ||
        (st = ap_json_get_int(r, "gpus", 1, 1 << 20, &gpus, NULL, where, err)) ||
        (st = ap_json_get_int(r, "gpus_per_node", 1, 1024, &gpn, NULL, where, err)) ||
        (st = ap_json_get_str(r, "network_bw", net, sizeof net, NULL, where, err)) ||
        (st = ap_gpu_lookup(gpu, where, &g, err)))
        return st;
    ap_cluster_from_gpu(g, (int)gpus, &v->cluster);
    ap_cluster_set_gpus_per_node(&v->cluster, (int)gpn);
    /* the NCCL the run linked where its source states it ("nccl": "2.10"): before 2.22 its
       communicators connect at creation (ap_mem_device_overhead_bytes) */
    char nccl[32], field[4224];
    int given = 0;
    if ((st = ap_json_get_str(r, "nccl", nccl, sizeof nccl, &given, where, err))) return st;
    snprintf(field, sizeof field, "%s: field 'nccl'", where);
    if (given && (st = ap_nccl_version_parse(nccl, field, &v->nccl_eager, err))) return st;
    return ap_parse_bandwidth(net, where, &v->cluster.net_bytes_per_s, err);
}

/* Bytes per element of a dtype name a row gives for a collective ("bf16", "fp16", "fp32"). */
static ap_status dtype_bytes(const ap_json *pj, const char *key, const char *where, double *out,
                             ap_err *err) {
    char buf[16];
    int given = 0;
    ap_status st = ap_json_get_str(pj, key, buf, sizeof buf, &given, where, err);
    if (st != AP_OK || !given) return st;
    if (!strcmp(buf, "bf16") || !strcmp(buf, "fp16")) *out = 2;
    else if (!strcmp(buf, "fp32")) *out = 4;
    else
        return ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' = '%s' is not one of bf16, fp16, "
                          "fp32", where, key, buf);
    return AP_OK;
}

/* What a row may say about kernels and collectives beyond the common plan fields: the
 * attention kernel ("attn_impl"), the gradient-reduction and parameter-gather dtypes ("grad_
 * reduce", "gather": FSDP MixedPrecision; "optim_dtype": the master copy's and Adam's moments'
 * dtype, Apex DistributedFusedAdam's dtype; "param_remainders": its store_param_remainders, which
 * NeMo sets for an fp32 optimizer over bf16 weights (nemo/collections/nlp/models/language_modeling/
 * megatron_base_model.py setup_optimization): the master copy is the 16 low bits the bf16 weight
 * lacks, 2 bytes instead of 4), "te_attention" (the attention and its context-parallel ring
 * run in Transformer Engine's module, not the trainer's own path), context parallelism by
 * all-to-all ("cp_a2a": Megatron-LM --cp-comm-type a2a), TP overlap ("overlap_tp",
 * default: as "overlap"), whether pipeline sends overlap compute ("p2p_overlap", default: as
 * the trainer does), whether the backward's TP collectives overlap its GEMMs
 * ("tp_bwd_overlap", default: as the trainer does), whether an FSDP run used PyTorch's first
 * FSDP ("fsdp_version": 1, trainer fsdp; default 2, as autoplan emits), whether torch.compile
 * fused the block's elementwise ops ("compile", default: as the trainer table prices its code) and, without it,
 * whether the RMSNorm alone ran as one fused kernel ("fused_norm"), the parameters
 * per gradient-reduction bucket where the run set its own ("dp_bucket"), FP8 weights without a
 * 16-bit copy
 * ("fp8_params", dtype fp8 only), the FP8 scaling recipe ("fp8_recipe": "delayed", the
 * trainer's default, or "tensorwise", per-tensor current scaling; dtype fp8 only), an explicit
 * stage split ("stage_layers"), the layers
 * per chunk a full recomputation covers ("recompute_layers", default all) and the
 * cross-entropy kernel ("loss": "torch", the trainer's default; "fused" or "fused_inplace",
 * flash-attn's CrossEntropyLoss, plan.h). */
static ap_status read_plan_kernels(const ap_json *pj, const char *where, ap_plan *p,
                                   ap_err *err) {
    char impl[32];
    int given = 0, otp = 0;
    ap_status st;
    if ((st = ap_json_get_str(pj, "attn_impl", impl, sizeof impl, &given, where, err))) return st;
    if (given && (st = ap_attn_impl_parse(impl, where, &p->attn_impl, err))) return st;
    if ((st = dtype_bytes(pj, "grad_reduce", where, &p->grad_reduce_bytes, err)) ||
        (st = dtype_bytes(pj, "gather", where, &p->gather_bytes, err)) ||
        (st = dtype_bytes(pj, "optim_dtype", where, &p->optim_state_bytes, err)))
        return st;
    if ((st = ap_json_get_real(pj, "dp_bucket", 1, 1e13, &p->dp_bucket_params, &given, where, err)))
        return st;
    char loss[32];
    if ((st = ap_json_get_str(pj, "loss", loss, sizeof loss, &given, where, err))) return st;
    if (given && !strcmp(loss, "fused")) p->loss_bytes_per_logit = AP_LOSS_FUSED_BYTES;
    else if (given && !strcmp(loss, "fused_inplace"))
        p->loss_bytes_per_logit = AP_LOSS_FUSED_INPLACE_BYTES;
    else if (given && strcmp(loss, "torch"))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'loss' = '%s' is not one of torch, "
                          "fused, fused_inplace", where, loss);
    int compiled = 0;
    if ((st = ap_json_get_bool(pj, "compile", &compiled, &given, where, err))) return st;
    if (given) p->elementwise = compiled ? AP_ELEMENTWISE_FUSED : AP_ELEMENTWISE_EAGER;
    int fused_norm = 0, fn_given = 0;
    if ((st = ap_json_get_bool(pj, "fused_norm", &fused_norm, &fn_given, where, err))) return st;
    if (fn_given && fused_norm && p->elementwise != AP_ELEMENTWISE_EAGER)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'fused_norm' needs 'compile': false (a "
                          "compiled block fuses its norms anyway)", where);
    if (fn_given && fused_norm) p->elementwise = AP_ELEMENTWISE_EAGER_FUSED_NORM;
    int te = 0;
    if ((st = ap_json_get_bool(pj, "te_attention", &te, &given, where, err))) return st;
    p->te_attention = given && te;
    int a2a = 0;
    if ((st = ap_json_get_bool(pj, "cp_a2a", &a2a, &given, where, err))) return st;
    p->cp_a2a = given && a2a;
    int rem = 0;
    if ((st = ap_json_get_bool(pj, "param_remainders", &rem, &given, where, err))) return st;
    if (given && rem && p->dtype != AP_DTYPE_BF16 && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'param_remainders' needs bf16 weights "
                          "(dtype bf16 or fp8)", where);
    if (given && rem) p->master_state_bytes = 2;
    char recipe[32];
    if ((st = ap_json_get_str(pj, "fp8_recipe", recipe, sizeof recipe, &given, where, err)))
        return st;
    /* a named recipe (plan.c's names; "auto" is the trainer's and not a run's) */
    int r = AP_FP8_DELAYED;
    while (given && r < AP_FP8_RECIPE_COUNT && strcmp(recipe, ap_fp8_recipe_name((ap_fp8_recipe)r)))
        r++;
    if (given && r == AP_FP8_RECIPE_COUNT)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'fp8_recipe' = '%s' is not one of "
                          "delayed, tensorwise, mxfp8", where, recipe);
    if (given && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'fp8_recipe' needs dtype fp8", where);
    if (given) p->fp8_recipe = (ap_fp8_recipe)r;
    int fp8p = 0;
    if ((st = ap_json_get_bool(pj, "fp8_params", &fp8p, &given, where, err))) return st;
    if (given && fp8p && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'fp8_params' needs dtype fp8", where);
    p->fp8_params = given && fp8p;
    if (p->fp8_params && p->master_state_bytes > 0)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'param_remainders' needs bf16 weights, "
                          "not fp8_params", where);
    int p2p = 1;
    if ((st = ap_json_get_bool(pj, "p2p_overlap", &p2p, &given, where, err))) return st;
    p->no_p2p_overlap = given && !p2p;
    int tbo = 1;
    if ((st = ap_json_get_bool(pj, "tp_bwd_overlap", &tbo, &given, where, err))) return st;
    p->no_tp_bwd_overlap = given && !tbo;
    int64_t fv = 2;
    if ((st = ap_json_get_int(pj, "fsdp_version", 1, 2, &fv, &given, where, err))) return st;
    if (given && p->trainer != AP_TRAINER_FSDP)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'fsdp_version' needs trainer \"fsdp\" "
                          "(torchtitan runs FSDP2)", where);
    p->fsdp1 = given && fv == 1;
    if ((st = ap_json_get_bool(pj, "overlap_tp", &otp, &given, where, err))) return st;
    if (given) p->overlap_tp = otp && p->sp && p->tp > 1 && ap_trainer_get(p->trainer)->overlap_tp;
    int64_t rl = 0;
    if ((st = ap_json_get_int(pj, "recompute_layers", 1, AP_MODEL_MAX_LAYERS, &rl, &given, where,
                              err)))
        return st;
    if (given && p->recompute != AP_RECOMPUTE_FULL)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'recompute_layers' needs recompute "
                          "\"full\"", where);
    if (given) p->recompute_layers = (int)rl;
    const ap_json *sl = ap_json_get(pj, "stage_layers");
    if (sl) {
        int n = ap_json_size(sl);
        if (!ap_json_is_array(sl) || n != p->pp * p->vp || n > AP_MAX_CHUNKS)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'stage_layers' must be an array of "
                              "pp x vp = %d layer counts", where, p->pp * p->vp);
        for (int i = 0; i < n; i++) {
            const ap_json *x = ap_json_at(sl, i);
            double v = ap_json_is_number(x) ? ap_json_number(x) : -1;
            if (!(v >= 1 && v <= AP_MODEL_MAX_LAYERS && v == floor(v)))
                return ap_err_set(err, AP_ERR_INPUT, "%s: field 'stage_layers'[%d] must be a "
                                  "positive integer", where, i);
            p->stage_layers[i] = (int)v;
        }
        p->nchunks = n;
    }
    return AP_OK;
}

/* The plan of a row: degrees, batch, ZeRO, recompute, dtype, and overlap as the run's trainer
 * (Megatron unless named) offers it. */
static ap_status read_plan(const ap_json *pj, const char *where, vrow *v, ap_err *err) {
    ap_plan *p = &v->plan;
    ap_plan_init(p);
    int64_t x;
    ap_status st = AP_OK;
#define GETI(k, lo, hi, dst) \
    if ((st = ap_json_get_int(pj, k, lo, hi, &x, NULL, where, err))) return st; \
    dst = x;
    GETI("tp", 1, 4096, p->tp); GETI("pp", 1, 4096, p->pp); GETI("dp", 1, 1 << 20, p->dp);
    GETI("cp", 1, 4096, p->cp); GETI("vp", 1, 4096, p->vp); GETI("mbs", 1, 1 << 20, p->mbs);
    GETI("gbs", 1, (int64_t)1 << 32, p->gbs); GETI("zero", 0, 3, p->zero);
#undef GETI
    /* expert parallelism and expert tensor parallelism (MoE rows; default none): ep x etp
     * ranks come out of tp x dp x cp */
    int ep_given = 0;
    if ((st = ap_json_get_int(pj, "ep", 1, 4096, &x, &ep_given, where, err))) return st;
    p->ep = ep_given ? (int)x : 1;
    if ((st = ap_json_get_int(pj, "etp", 1, 4096, &x, &ep_given, where, err))) return st;
    p->etp = ep_given ? (int)x : 1;
    char rc[32], dt[16], trn[32];
    int sp = 0, ov = 0, fa = 1, fa_given = 0, seq_given = 0, trn_given = 0;
    if ((st = ap_json_get_str(pj, "recompute", rc, sizeof rc, NULL, where, err)) ||
        (st = ap_json_get_str(pj, "dtype", dt, sizeof dt, NULL, where, err)) ||
        (st = ap_json_get_bool(pj, "sp", &sp, NULL, where, err)) ||
        (st = ap_json_get_bool(pj, "overlap", &ov, NULL, where, err)) ||
        (st = ap_json_get_bool(pj, "flash_attn", &fa, &fa_given, where, err)) ||
        (st = ap_json_get_int(pj, "seq", 1, 1 << 24, &x, &seq_given, where, err)) ||
        (st = ap_json_get_str(pj, "trainer", trn, sizeof trn, &trn_given, where, err)))
        return st;
    char what[4300];
    snprintf(what, sizeof what, "%s: field 'recompute'", where);
    if ((st = ap_recompute_parse(rc, what, &p->recompute, err)) != AP_OK) return st;
    if (ap_dtype_parse(dt, &p->dtype) != AP_OK)
        return ap_err_set(err, AP_ERR_INPUT, "%s: unknown dtype '%s'", where, dt);
    p->sp = sp;
    p->flash_attn = fa;
    p->seq = seq_given ? x : v->model.seq_len;
    p->grad_accum = p->gbs / (p->mbs * p->dp);
    p->trainer = AP_TRAINER_MEGATRON;
    if (trn_given && (st = ap_trainer_parse(trn, &p->trainer, err)) != AP_OK) {
        ap_err_prefix(err, "%s", where);
        return st;
    }
    /* overlap as the trainer offers it at this ZeRO stage and on this GPU; Megatron overlaps
     * the parameter gather only with its distributed optimizer, TP communication only on
     * multicast GPUs */
    const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
    p->overlap_grad = ov && tc->overlap_grad;
    p->overlap_param = ov && tc->overlap_param && (tc->overlap_param_zero_mask & (1u << p->zero));
    p->overlap_tp = ov && sp && p->tp > 1 && ap_trainer_overlap_tp(tc, &v->cluster.gpu);
    /* the parameter gather after the step where the run's trainer does not overlap it
     * ("overlap_param": false) */
    int op = 1, op_given = 0;
    if ((st = ap_json_get_bool(pj, "overlap_param", &op, &op_given, where, err))) return st;
    if (op_given && !op) p->overlap_param = 0;
    int64_t g = 0;
    int g_given = 0;
    if ((st = ap_json_get_int(pj, "zero_group", 2, 1 << 20, &g, &g_given, where, err))) return st;
    if (g_given) {
        if (p->zero < 1)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'zero_group' needs zero 1, 2 or 3",
                              where);
        if (((int64_t)p->dp * p->cp) % g != 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s: field 'zero_group' = %lld must divide dp x "
                              "cp = %d", where, (long long)g, p->dp * p->cp);
        p->zero_group = g < (int64_t)p->dp * p->cp ? (int)g : 0;
    }
    return read_plan_kernels(pj, where, p, err);
}

static ap_status read_row(const ap_json *r, const char *where, vrow *v, ap_err *err) {
    memset(v, 0, sizeof *v);
    ap_status st;
    if ((st = ap_json_get_str(r, "source", v->source, sizeof v->source, NULL, where, err)) ||
        (st = ap_json_get_str(r, "metric", v->metric, sizeof v->metric, NULL, where, err)) ||
        (st = ap_json_get_real(r, "measured", 1e-9, 1e18, &v->measured, NULL, where, err)))
        return st;
    v->is_time = !strcmp(v->metric, "step_s") || !strcmp(v->metric, "layer_s") ||
                 !strcmp(v->metric, "layer_fwd_s") || !strcmp(v->metric, "layer_bwd_s");
    v->is_oom = !strcmp(v->metric, "oom");
    if (!v->is_time && !v->is_oom && strcmp(v->metric, "activations_bytes") &&
        strcmp(v->metric, "states_bytes") && strcmp(v->metric, "reserved_bytes") &&
        strcmp(v->metric, "max_reserved_bytes") && strcmp(v->metric, "device_bytes"))
        return ap_err_set(err, AP_ERR_INPUT, "%s: unknown metric '%s' (one of step_s, layer_s, "
                          "layer_fwd_s, layer_bwd_s, activations_bytes, states_bytes, "
                          "reserved_bytes, max_reserved_bytes, device_bytes, oom)",
                          where, v->metric);
    if ((st = read_model(r, where, v, err)) || (st = read_cluster(r, where, v, err)))
        return st;
    char pwhere[4224];
    snprintf(pwhere, sizeof pwhere, "%s.plan", where);
    if ((st = read_plan(ap_json_get(r, "plan"), pwhere, v, err))) return st;
    ap_plan_label(&v->plan, v->plan_label, sizeof v->plan_label);
    return AP_OK;
}

/* A largest-model row and its bound: usable memory / model-state bytes per parameter, ZeRO
 * paper accounting (2 + 2 + 12, as DeepSpeed's ZeRO-1 of 2020); with ZeRO-Offload (ZeRO-2 with
 * the optimizer, its states and the gradients on the CPU) the GPU keeps the 16-bit parameters
 * only. */
static ap_status read_shown(const ap_json *r, const char *where, vshown *v, ap_err *err) {
    memset(v, 0, sizeof *v);
    int64_t gpus, tp, dp, zero;
    const ap_gpu *g;
    ap_status st;
    if ((st = ap_json_get_str(r, "source", v->source, sizeof v->source, NULL, where, err)) ||
        (st = ap_json_get_str(r, "gpu", v->gpu, sizeof v->gpu, NULL, where, err)) ||
        (st = ap_json_get_str(r, "framework", v->framework, sizeof v->framework, NULL, where, err)) ||
        (st = ap_json_get_str(r, "mode", v->mode, sizeof v->mode, NULL, where, err)) ||
        (st = ap_json_get_int(r, "gpus", 1, 1 << 20, &gpus, NULL, where, err)) ||
        (st = ap_json_get_int(r, "tp", 1, 4096, &tp, NULL, where, err)) ||
        (st = ap_json_get_int(r, "dp", 1, 1 << 20, &dp, NULL, where, err)) ||
        (st = ap_json_get_int(r, "zero", 0, 3, &zero, NULL, where, err)) ||
        (st = ap_json_get_real(r, "measured_params", 1, 1e16, &v->measured_params, NULL, where,
                               err)) ||
        (st = ap_gpu_lookup(v->gpu, where, &g, err)))
        return st;
    v->gpus = (int)gpus;
    v->tp = (int)tp;
    v->dp = (int)dp;
    v->zero = (int)zero;
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_COLOSSALAI;
    p.zero = v->zero;
    double w, gr, o;
    ap_mem_model_states(&p, 1.0, v->dp, &w, &gr, &o);
    double per = !strcmp(v->mode, "optimizer-offload") ? w : w + gr + o;
    v->bound_params = !strcmp(v->mode, "unbounded") ? 0 : g->mem_bytes * v->tp / per;
    return AP_OK;
}

/* Register a row's source; 0 when the table of sources is full. */
static int add_source(vset *vs, const char *source) {
    for (int s = 0; s < vs->nsources; s++)
        if (!strcmp(vs->sources[s], source)) return 1;
    if (vs->nsources == MAX_SOURCES) return 0;
    size_t n = strnlen(source, sizeof vs->sources[0] - 1);
    memcpy(vs->sources[vs->nsources], source, n);
    vs->sources[vs->nsources][n] = '\0';
    vs->nsources++;
    return 1;
}

ap_status ap_validation_load(const char *path, const char *key, ap_vset *vs, ap_err *err) {
    ap_json *root = NULL;
    ap_status st = ap_json_decode_file(path, &root, err);
    if (st != AP_OK) return st;
    st = ap_validation_load_json(root, path, key, vs, err);
    ap_json_free(root);
    return st;
}

ap_status ap_validation_load_json(const ap_json *root, const char *path, const char *key,
                                  ap_vset *vs, ap_err *err) {
    ap_status st = AP_OK;
    vs->n = vs->nsources = vs->nshown = 0;
    const ap_json *rows = ap_json_get(root, key);
    char where[4160];
    if (!rows && strcmp(key, "rows") != 0) return AP_OK;
    if (ap_json_is_array(root)) /* shared/reference/published-public.json's layout */
        return ap_err_set(err, AP_ERR_INPUT, "%s: a top-level array of rows (the layout of "
                          "shared/reference/published-public.json) is not a validation file; "
                          "tools/make_validation.py converts it (an object with 'rows')", path);
    if (!ap_json_is_array(rows))
        st = ap_err_set(err, AP_ERR_INPUT, "%s: field '%s' must be an array", path, key);
    for (int i = 0; st == AP_OK && i < ap_json_size(rows); i++) {
        if (vs->n >= MAX_ROWS) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: more than %d rows", path, MAX_ROWS);
            break;
        }
        if (!room_for_row(vs)) {
            st = ap_err_set(err, AP_ERR_NOMEM, "%s: out of memory for %d rows", path, vs->n + 1);
            break;
        }
        snprintf(where, sizeof where, "%s: %s[%d]", path, key, i);
        if ((st = read_row(ap_json_at(rows, i), where, &vs->rows[vs->n], err)) != AP_OK) break;
        if (!add_source(vs, vs->rows[vs->n].source))
            st = ap_err_set(err, AP_ERR_INPUT, "%s: more than %d sources", where, MAX_SOURCES);
        vs->n++;
    }
    const ap_json *sh = strcmp(key, "rows") == 0 ? ap_json_get(root, "shown") : NULL;
    for (int i = 0; st == AP_OK && i < ap_json_size(sh); i++) {
        if (vs->nshown >= AP_VALIDATION_MAX_SHOWN) {
            st = ap_err_set(err, AP_ERR_INPUT, "%s: more than %d shown rows", path,
                            AP_VALIDATION_MAX_SHOWN);
            break;
        }
        snprintf(where, sizeof where, "%s: shown[%d]", path, i);
        if ((st = read_shown(ap_json_at(sh, i), where, &vs->shown[vs->nshown], err)) == AP_OK)
            vs->nshown++;
    }
    return st;
}

/* Predict one row's metric under calibration cal (NULL: the built-in one of its GPU). The
 * estimate (tens of kB) lives on the heap: the fit calls this thousands of times. */
ap_status ap_validation_predict(ap_vrow *v, const ap_calib *cal, ap_err *err) {
    return ap_validation_predict_profile(v, cal, NULL, err);
}

/* The options a row is predicted with: the calibration and profile asked for, the NCCL its
 * run linked. */
static void row_opts(const ap_vrow *v, const ap_calib *cal, const struct ap_profile *profile,
                     ap_estimate_opts *o) {
    ap_estimate_opts_init(o);
    o->calib = cal;
    o->profile = profile;
    o->nccl_eager = v->nccl_eager;
}

ap_status ap_validation_estimate(const ap_vrow *v, const ap_calib *cal,
                                 const struct ap_profile *profile, ap_estimate *out,
                                 ap_err *err) {
    ap_estimate_opts o;
    row_opts(v, cal, profile, &o);
    return ap_estimate_plan(&v->model, &v->cluster, &v->plan, &o, out, err);
}

ap_status ap_validation_predict_profile(ap_vrow *v, const ap_calib *cal,
                                        const struct ap_profile *profile, ap_err *err) {
    ap_estimate_opts o;
    row_opts(v, cal, profile, &o);
    ap_estimate *e = ap_malloc(sizeof *e);
    if (!e) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for an estimate");
    ap_status st = AP_OK;
    if (!strncmp(v->metric, "layer_", 6)) {
        /* one layer's forward + backward (or either): difference of a 2-layer and a 1-layer
         * model */
        const int fw = strcmp(v->metric, "layer_bwd_s") != 0;
        const int bw = strcmp(v->metric, "layer_fwd_s") != 0;
        ap_model m1 = v->model, m2 = v->model;
        m1.layers = 1;
        m2.layers = 2;
        ap_plan p = v->plan;
        p.pp = 1;
        p.vp = 1;
        if ((st = ap_estimate_plan(&m2, &v->cluster, &p, &o, e, err)) == AP_OK) {
            double t2 = fw * e->time.stage_fwd_s[0] + bw * e->time.stage_bwd_s[0];
            if ((st = ap_estimate_plan(&m1, &v->cluster, &p, &o, e, err)) == AP_OK) {
                v->predicted = t2 - (fw * e->time.stage_fwd_s[0] + bw * e->time.stage_bwd_s[0]);
                v->fits = v->fits_device = 1;
            }
        }
    } else if ((st = ap_validation_estimate(v, cal, profile, e, err)) == AP_OK) {
        v->fits = e->fits;
        /* a recorded run asks whether it could start, not whether a planner would keep the
         * 2 GiB margin it keeps for safety: the peak against the memory itself */
        v->fits_device = e->device_peak_bytes <= e->capacity_bytes && e->host_fits;
        const ap_stage_mem *s0 = &e->stages[0];
        /* states: a stage holding only transformer layers, as the transcribed readings count */
        const ap_stage_mem *sm = &e->stages[e->nstages > 2 ? 1 : 0];
        if (!strcmp(v->metric, "step_s")) v->predicted = e->time.step_s;
        else if (!strcmp(v->metric, "activations_bytes")) v->predicted = s0->layer_activations_bytes;
        else if (!strcmp(v->metric, "reserved_bytes")) v->predicted = e->reserved_peak_bytes;
        /* nvidia-smi's reading of the fullest GPU: the allocator's high-water mark (with the
         * blocks it keeps cached, estimate.c ap_mem_smi_bytes), CUDA context, cuBLAS
         * workspaces and NCCL buffers */
        else if (!strcmp(v->metric, "device_bytes")) v->predicted = e->smi_peak_bytes;
        /* torch.cuda.max_memory_reserved(), as trainers log it: that high-water mark without
         * what lies outside the allocator */
        else if (!strcmp(v->metric, "max_reserved_bytes"))
            v->predicted = e->smi_peak_bytes - e->device_overhead_bytes;
        else if (v->is_oom) v->predicted = v->fits_device ? 0.0 : 1.0;
        else v->predicted = sm->params_bytes + sm->grads_bytes + sm->optimizer_bytes;
    }
    ap_free(e);
    return st;
}

/* Errors of rows whose source is (or, with exclude, is not) `only` (NULL = all). Overall MAPE =
 * mean over sources. */
void ap_validation_summarize(const ap_vset *vs, const char *only, int exclude, ap_verr *out,
                             ap_verr per[AP_VALIDATION_MAX_SOURCES]) {
    memset(out, 0, sizeof *out);
    int nts = 0, nms = 0;
    for (int s = 0; s < vs->nsources; s++) {
        errstat *ps = &per[s];
        memset(ps, 0, sizeof *ps);
        int in = !only || (!strcmp(vs->sources[s], only) != !!exclude);
        for (int i = 0; i < vs->n; i++) {
            const vrow *v = &vs->rows[i];
            if (strcmp(v->source, vs->sources[s])) continue;
            double e = fabs(v->predicted - v->measured) / v->measured;
            ps->rows++;
            if (v->refused[0]) {
                ps->refused++;
            } else if (v->is_oom) {
                ps->oom_rows++;
                ps->oom_hit += v->predicted >= 0.5;
            } else if (v->is_time) {
                ps->time_mape += e;
                ps->time_bias += (v->predicted - v->measured) / v->measured;
                ps->time_rows++;
                if (e > ps->time_max) ps->time_max = e;
            } else {
                ps->mem_mape += e;
                ps->mem_rows++;
                if (e > ps->mem_max) ps->mem_max = e;
            }
        }
        if (ps->time_rows) ps->time_mape /= ps->time_rows;
        if (ps->time_rows) ps->time_bias /= ps->time_rows;
        if (ps->mem_rows) ps->mem_mape /= ps->mem_rows;
        if (!in) continue;
        out->rows += ps->rows;
        out->refused += ps->refused;
        out->oom_rows += ps->oom_rows;
        out->oom_hit += ps->oom_hit;
        if (ps->time_rows) {
            out->time_mape += ps->time_mape;
            out->time_bias += ps->time_bias;
            nts++;
            if (ps->time_max > out->time_max) out->time_max = ps->time_max;
        }
        if (ps->mem_rows) {
            out->mem_mape += ps->mem_mape;
            nms++;
            if (ps->mem_max > out->mem_max) out->mem_max = ps->mem_max;
        }
    }
    if (nts) out->time_mape /= nts;
    if (nts) out->time_bias /= nts;
    if (nms) out->mem_mape /= nms;
}

static double objective(vset *vs, const ap_calib *cal, const char *leave_out) {
    for (int i = 0; i < vs->n; i++) {
        vrow *v = &vs->rows[i];
        if (!v->is_time) continue;
        if (leave_out && !strcmp(v->source, leave_out)) continue;
        if (ap_validation_predict(v, cal, NULL) != AP_OK) return 1e9;
    }
    errstat all, per[MAX_SOURCES];
    ap_validation_summarize(vs, leave_out, 1, &all, per);
    /* mean MAPE over sources plus a little of the worst row, so no source is sacrificed */
    return all.time_mape + 0.25 * all.time_max;
}

/* Coordinate search in log space within physical bounds. */
void ap_calib_fit(ap_vset *vs, ap_calib *cal, const char *leave_out) {
    double *par[8] = {&cal->gemm_eff_max, &cal->gemm_half_flops, &cal->attn_eff, &cal->link_eff,
                      &cal->net_eff, &cal->coll_latency_s, &cal->step_overhead_s,
                      &cal->mem_bound_eff};
    /* physical ranges: training reaches 60-100% of the kernel table's microbenchmark rates
     * (GEMMs and flash attention: sustained clocks, layouts, SM contention) and of its
     * nccl-tests plateaus (link_eff, net_eff); a fixed per-GEMM cost of 1e8-5e10 FLOPs at peak
     * (0.3-160 us on A100); materialised-score attention at 20-90% of peak; issuing one
     * collective costs the host 0-50 us beyond NCCL's own latency; HBM streaming kernels
     * 50-95% */
    const double lo[8] = {0.60, 1e8, 0.20, 0.80, 0.80, 0.0, 0.0, 0.50};
    const double hi[8] = {1.00, 5e10, 0.90, 1.00, 1.00, 5e-5, 0.5, 0.95};
    double best = objective(vs, cal, leave_out);
    double step = 0.25;
    for (int round = 0; round < 60 && step > 1e-3; round++) {
        int improved = 0;
        for (int k = 0; k < 8; k++) {
            for (int dir = -1; dir <= 1; dir += 2) {
                double old = *par[k];
                double nv = k == 6 || (k == 5 && old < 1e-7)
                                ? old + dir * step * (k == 6 ? 0.1 : 1e-5)
                                : old * exp(dir * step);
                if (nv < lo[k]) nv = lo[k];
                if (nv > hi[k]) nv = hi[k];
                if (nv == old) continue;
                *par[k] = nv;
                double f = objective(vs, cal, leave_out);
                if (f < best - 1e-12) {
                    best = f;
                    improved = 1;
                } else {
                    *par[k] = old;
                }
            }
        }
        if (!improved) step *= 0.5;
    }
}

/* One-dimensional golden-section search of gemm_eff_max on the time rows of vs. */
void ap_calib_fit_gemm_eff(ap_vset *vs, ap_calib *cal) {
    double lo = 0.40, hi = 1.00;
    const double g = 0.6180339887498949;
    for (int it = 0; it < 40; it++) {
        double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
        cal->gemm_eff_max = a;
        double fa = objective(vs, cal, NULL);
        cal->gemm_eff_max = b;
        double fb = objective(vs, cal, NULL);
        if (fa < fb) hi = b;
        else lo = a;
    }
    cal->gemm_eff_max = 0.5 * (lo + hi);
}

ap_status ap_validation_leave_one_out(const ap_vset *vs, const ap_calib *base, ap_verr *out,
                                      double loso_src[AP_VALIDATION_MAX_SOURCES], ap_err *err) {
    memset(out, 0, sizeof *out);
    ap_vset *tmp = ap_vset_new();
    if (!tmp) return ap_err_set(err, AP_ERR_NOMEM, "out of memory for the validation rows");
    int nts = 0;
    ap_status st = AP_OK;
    for (int s = 0; s < vs->nsources && st == AP_OK; s++) {
        if ((st = ap_vset_copy(tmp, vs, err)) != AP_OK) break;
        ap_calib c2 = *base;
        ap_calib_fit(tmp, &c2, vs->sources[s]);
        for (int i = 0; i < tmp->n; i++) ap_validation_predict(&tmp->rows[i], &c2, NULL);
        ap_verr one, per2[MAX_SOURCES];
        ap_validation_summarize(tmp, vs->sources[s], 0, &one, per2);
        loso_src[s] = one.time_mape;
        if (one.time_rows || per2[s].time_rows) {
            out->time_mape += per2[s].time_mape;
            if (per2[s].time_max > out->time_max) out->time_max = per2[s].time_max;
            nts++;
        }
    }
    if (nts) out->time_mape /= nts;
    ap_vset_free(tmp);
    return st;
}
