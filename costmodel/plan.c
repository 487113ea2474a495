/*
 * plan.c - plan defaults, the layer split across pipeline chunks, labels, and the legality
 * check of a plan against the model, the cluster and the trainer table (plan.h). The search
 * calls ap_plan_check on every candidate, so it allocates nothing and stops at the first rule
 * broken, naming it.
 */
#include "autoplan/plan.h"

#include <stdio.h>
#include <string.h>

void ap_plan_init(ap_plan *p) {
    memset(p, 0, sizeof *p);
    p->trainer = AP_TRAINER_MEGATRON;
    p->tp = p->pp = p->dp = p->cp = p->ep = p->etp = p->vp = 1;
    p->mbs = 1;
    p->gbs = 1;
    p->grad_accum = 1;
    p->seq = 2048;
    p->dtype = AP_DTYPE_BF16;
    p->flash_attn = 1;
}

static const char *const recompute_names[AP_RECOMPUTE_COUNT] = {"none", "selective", "full"};

static const char *const fp8_recipe_names[AP_FP8_RECIPE_COUNT] = {"auto", "delayed", "tensorwise",
                                                                     "mxfp8"};

const char *ap_fp8_recipe_name(ap_fp8_recipe r) {
    return (unsigned)r < AP_FP8_RECIPE_COUNT ? fp8_recipe_names[r] : fp8_recipe_names[0];
}

const char *ap_recompute_name(ap_recompute r) {
    return (unsigned)r < AP_RECOMPUTE_COUNT ? recompute_names[r] : recompute_names[0];
}

ap_status ap_recompute_parse(const char *s, const char *what, ap_recompute *out, ap_err *err) {
    for (int i = 0; s && i < AP_RECOMPUTE_COUNT; i++)
        if (!strcmp(s, recompute_names[i])) {
            *out = (ap_recompute)i;
            return AP_OK;
        }
    return ap_err_set(err, AP_ERR_INPUT, "%s: '%s' is not one of none, selective, full", what,
                      s ? s : "");
}

int ap_plan_chunk_layers(const ap_plan *p, int64_t L, int c) {
    int n = p->pp * p->vp;
    if (p->nchunks == n && n > 0) return p->stage_layers[c];
    if (n <= 0) return (int)L;
    return ap_uniform_chunk_layers(ap_uniform_split_of(L, n), c);
}

int ap_plan_chunk_first_layer(const ap_plan *p, int64_t L, int c) {
    int n = p->pp * p->vp;
    if (n > 0 && p->nchunks != n) return ap_uniform_chunk_first(ap_uniform_split_of(L, n), c);
    int first = 0;
    for (int i = 0; i < c; i++) first += ap_plan_chunk_layers(p, L, i);
    return first;
}

/* The label's pieces, appended at o + k (ap_plan_label's buffer is long enough for any plan);
 * the new end is returned. Integers in decimal as "%lld" writes them. */
static size_t lbl_s(char *o, size_t k, const char *s) {
    while (*s) o[k++] = *s++;
    return k;
}

static size_t lbl_i(char *o, size_t k, const char *prefix, long long v) {
    char t[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    k = lbl_s(o, k, prefix);
    if (v < 0) o[k++] = '-';
    do t[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
    while (n) o[k++] = t[--n];
    return k;
}

/* " <name><percent>%" with the percentage as "%.0f" rounds it (rare: offload fractions) */
static size_t lbl_pct(char *o, size_t k, const char *name, double frac) {
    char t[48];
    snprintf(t, sizeof t, " %s%.0f%%", name, 100 * frac);
    return lbl_s(o, k, t);
}

char *ap_plan_label(const ap_plan *p, char *buf, size_t n) {
    static const char *rc[] = {"", " sel", " full"};
    /* built piece by piece, no format parsing (plans.csv labels every row): "tp%d pp%d dp%d
     * <extra> mbs%lld z%d<recompute>[ uneven]"; at most ~200 characters, truncated to n - 1
     * as snprintf would */
    char o[320];
    size_t k = lbl_i(o, 0, "tp", p->tp);
    k = lbl_i(o, k, " pp", p->pp);
    k = lbl_i(o, k, " dp", p->dp);
    if (p->cp > 1) k = lbl_i(o, k, " cp", p->cp);
    if (ap_plan_cp_a2a(p)) k = lbl_s(o, k, "a2a");
    if (p->ep > 1) k = lbl_i(o, k, " ep", p->ep);
    if (p->etp > 1) k = lbl_i(o, k, " etp", p->etp);
    if (p->vp > 1) k = lbl_i(o, k, " vp", p->vp);
    /* sp and overlap: "sp" when on; "no-sp" / "no-ov" when off where the trainer has them
       (the defaults of the search and of estimate), so the label's flags reproduce the plan */
    const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
    if (p->sp) k = lbl_s(o, k, " sp");
    else if (p->tp > 1 && tc->sp) k = lbl_s(o, k, " no-sp");
    if (!p->overlap_grad && !p->overlap_param && !p->overlap_tp &&
        (ap_trainer_dp_overlap(tc, p->ep) || (tc->overlap_tp && p->sp)))
        k = lbl_s(o, k, " no-ov");
    if (p->offload_optimizer > 0) k = lbl_pct(o, k, "off-opt", p->offload_optimizer);
    if (p->offload_params > 0) k = lbl_pct(o, k, "off-par", p->offload_params);
    /* heterogeneous memory (issue 18): Gemini's placement, DeepSpeed's NVMe */
    if (p->hetero.placement != AP_GEMINI_OFF)
        k = lbl_s(o, k, p->hetero.placement == AP_GEMINI_AUTO ? " gemini-auto" : " gemini-static");
    if (p->hetero.placement == AP_GEMINI_STATIC && p->hetero.shard_param_frac != 1.0)
        k = lbl_pct(o, k, "shard", p->hetero.shard_param_frac);
    if (p->hetero.ds_optimizer == AP_OFFLOAD_DEV_NVME || p->hetero.ds_params == AP_OFFLOAD_DEV_NVME)
        k = lbl_s(o, k, " nvme");
    k = lbl_i(o, k, " mbs", (long long)p->mbs);
    k = lbl_i(o, k, " z", p->zero);
    if (p->zero_group > 0) k = lbl_i(o, k, "g", p->zero_group); /* z3g8: within groups of 8 */
    if (p->recompute == AP_RECOMPUTE_FULL && p->recompute_layers > 0)
        k = lbl_i(o, k, " full", p->recompute_layers);
    else
        k = lbl_s(o, k, rc[p->recompute]);
    /* uneven: the chunks differ in layers or in recomputed layers (plan.json has both) */
    int uneven = 0;
    for (int c = 1; c < p->nchunks; c++)
        if (p->stage_layers[c] != p->stage_layers[0]) uneven = 1;
    for (int c = 0; c < p->pp * p->vp && c < AP_MAX_CHUNKS; c++)
        if (p->stage_recompute[c] > 0) uneven = 1; /* > 0: its own count (estimate.c) */
    if (uneven) k = lbl_s(o, k, " uneven");
    if (n > 0) {
        size_t m = k < n - 1 ? k : n - 1;
        memcpy(buf, o, m);
        buf[m] = '\0';
    }
    return buf;
}

/* ---- the checks that read a group member's fields ---------------------------------------
 * A search group's members differ only in recompute, recompute_layers, mbs and grad_accum
 * (ap_plan_group_member). Every check reading the first two is an rc_ check, every check
 * reading the last two an mb_ check, and none reads both: ap_plan_check's verdict is then
 * (the other checks) && ap_plan_rc_ok && ap_plan_mb_ok, which lets the search check a group
 * once (ap_plan_rc_ok). ap_plan_check calls these where the checks stood, so its first
 * failure, and so its message, is what it was. */

static ap_status mb_degrees(const ap_plan *p, ap_err *err) {
    if (p->mbs < 1 || p->gbs < 1 || p->seq < 1)
        return ap_err_set(err, AP_ERR_INPUT, "micro-batch, global batch and sequence must be >= 1");
    return AP_OK;
}

static ap_status rc_features(const ap_trainer_caps *t, const ap_plan *p, ap_err *err) {
    const char *tn = t->name;
    if ((int)p->recompute < 0 || (int)p->recompute > AP_RECOMPUTE_FULL ||
        !(t->recompute_mask & (1u << p->recompute)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not offer %s recomputation", tn,
                          ap_recompute_name(p->recompute));
    if (p->recompute_layers > 0 && !t->recompute_partial)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s recomputes all layers or none (no "
                          "recompute layer count)", tn);
    return AP_OK;
}

static ap_status rc_combinations(const ap_trainer_caps *t, const ap_plan *p, ap_err *err) {
    if (t->recompute_partial_needs_pp && p->pp == 1 && p->recompute_layers > 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: without pipeline parallelism recomputation "
                          "covers all layers or none", t->name);
    return AP_OK;
}

static ap_status mb_interleaving(const ap_trainer_caps *t, const ap_plan *p, ap_err *err) {
    if (t->vp_needs_m_multiple_of_pp && p->grad_accum % p->pp != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s interleaving needs the number of "
                          "micro-batches (%lld) to be a multiple of pp %d", t->name,
                          (long long)p->grad_accum, p->pp);
    return AP_OK;
}

static ap_status mb_batch(const ap_plan *p, ap_err *err) {
    if (p->gbs % (p->mbs * p->dp) != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "global batch %lld is not divisible by mbs*dp = "
                          "%lld", (long long)p->gbs, (long long)(p->mbs * p->dp));
    if (p->grad_accum != p->gbs / (p->mbs * p->dp))
        return ap_err_set(err, AP_ERR_INPUT, "grad_accum %lld does not equal gbs/(mbs*dp) = %lld",
                          (long long)p->grad_accum, (long long)(p->gbs / (p->mbs * p->dp)));
    return AP_OK;
}

static ap_status rc_shape(const ap_trainer_caps *t, const ap_plan *p, const ap_model *m,
                          ap_err *err) {
    if (p->recompute_layers < 0 || (p->recompute_layers > 0 && p->recompute != AP_RECOMPUTE_FULL))
        return ap_err_set(err, AP_ERR_INPUT, "a recompute layer count needs full recomputation");
    if (t->recompute_partial_divides_chunk && p->recompute_layers > 0) {
        int n = p->pp * p->vp;
        int uniform = m->layers % n == 0;
        for (int i = 0; uniform && p->nchunks && i < n; i++)
            uniform = p->stage_layers[i] == m->layers / n;
        if (!uniform || (m->layers / n) % p->recompute_layers != 0)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: recomputing %d layers per chunk (every "
                              "(n/%d)-th of n) needs uniform chunks whose size it divides",
                              t->name, p->recompute_layers, p->recompute_layers);
    }
    return AP_OK;
}

int ap_plan_rc_ok(const ap_plan *p, const ap_model *m) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    if (p->pp < 1 || p->vp < 1) return 1; /* check_degrees refuses the plan anyway */
    return rc_features(t, p, NULL) == AP_OK && rc_combinations(t, p, NULL) == AP_OK &&
           rc_shape(t, p, m, NULL) == AP_OK;
}

int ap_plan_mb_ok(const ap_plan *p) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    if (mb_degrees(p, NULL) != AP_OK) return 0;
    /* as check_shape reaches them: the interleaving rule with vp > 1 only; the batch
     * (divisions by mbs * dp) once the degrees are >= 1 */
    if (p->dp < 1 || p->pp < 1) return 1; /* check_degrees refuses the plan anyway */
    if (p->vp > 1 && mb_interleaving(t, p, NULL) != AP_OK) return 0;
    return mb_batch(p, NULL) == AP_OK;
}

/* Degrees and batch sizes positive; the degrees multiply to the GPU count. */
static ap_status check_degrees(const ap_plan *p, const ap_cluster *c, ap_err *err) {
    if (p->tp < 1 || p->pp < 1 || p->dp < 1 || p->cp < 1 || p->ep < 1 || p->etp < 1 || p->vp < 1)
        return ap_err_set(err, AP_ERR_INPUT, "degrees must be >= 1");
    ap_status st = mb_degrees(p, err);
    if (st != AP_OK) return st;
    if ((int64_t)p->tp * p->pp * p->cp * p->dp != c->gpus)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "tp*pp*cp*dp = %lld does not equal the %d GPUs",
                          (long long)p->tp * p->pp * p->cp * p->dp, c->gpus);
    return AP_OK;
}

int ap_plan_zero_shard(const ap_plan *p) {
    int64_t ranks = (int64_t)p->dp * (p->cp > 0 ? p->cp : 1);
    if (ranks < 1) ranks = 1;
    return p->zero_group > 0 && p->zero_group < ranks ? p->zero_group : (int)ranks;
}

/* ZeRO within groups (zero_group): a group of at least two ranks that divides the dp x cp
 * ranks and holds whole context-parallel groups, at a ZeRO stage the trainer shards so. A group
 * of all dp x cp ranks is ordinary ZeRO. */
ap_status ap_plan_check_zero_group(const ap_plan *p, ap_err *err) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    int64_t ranks = (int64_t)p->dp * p->cp;
    if (p->zero_group < 2)
        return ap_err_set(err, AP_ERR_INPUT, "zero_group must be 0 (all data-parallel ranks) or "
                          "at least 2, not %d", p->zero_group);
    if (p->zero < 0 || p->zero > 3 || !(t->zero_group_mask & (1u << p->zero))) {
        char st[32];
        ap_trainer_zero_group_stages(t, st, sizeof st);
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not shard ZeRO stage %d within groups "
                          "of the data-parallel ranks (zero_group)%s%s", t->name, p->zero,
                          st[0] ? "; it does at " : "", st);
    }
    if (p->cp < 1 || ranks % p->zero_group != 0 || p->zero_group % p->cp != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "zero_group %d must divide dp x cp = %lld and "
                          "hold whole context-parallel groups (a multiple of cp %d)",
                          p->zero_group, (long long)ranks, p->cp);
    /* the operator-by-operator offload simulations (sim/hetero.c: Gemini's chunks, DeepSpeed's
       offload devices) partition over all data-parallel ranks */
    if (p->hetero.placement != AP_GEMINI_OFF || p->hetero.ds_optimizer != AP_OFFLOAD_DEV_NONE ||
        p->hetero.ds_params != AP_OFFLOAD_DEV_NONE)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "zero_group: the offload simulations (Gemini, "
                          "DeepSpeed's offload devices) partition over all data-parallel ranks; "
                          "ZeRO within groups is priced without offload devices");
    return AP_OK;
}

/* The trainer offers every dimension, ZeRO stage, recompute granularity and dtype the plan
 * uses (trainer.c, each rule cited there); the GPU has the tensor cores for the dtype. */
static ap_status check_features(const ap_trainer_caps *t, const ap_plan *p, const ap_cluster *c,
                                ap_err *err) {
    const char *tn = t->name;
    /* the runtime trainer and the cpu device go together: `autoplan run` executes plans on CPU
       ranks; GPU trainers never run there and the runtime never on a GPU */
    int cpu = !strcmp(c->gpu.vendor, "cpu");
    if (p->trainer == AP_TRAINER_RUNTIME && !cpu)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "the runtime trainer runs on the cpu device "
                          "only (autoplan run), not on %s", c->gpu.name);
    if (p->trainer != AP_TRAINER_RUNTIME && cpu)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not run on the cpu device (it is "
                          "autoplan run's)", tn);
    /* trainer support of each dimension */
    if (p->tp > 1 && !t->tp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no tensor parallelism (tp must be 1)", tn);
    if (p->pp > 1 && !t->pp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no pipeline parallelism (pp must be 1)", tn);
    if (p->vp > 1 && !t->vp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no interleaved (virtual) pipeline stages", tn);
    if (p->cp > 1 && !t->cp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no context parallelism (cp must be 1)", tn);
    if (p->cp > 1 && t->cp_alone && (p->tp > 1 || p->pp > 1 || p->ep > 1))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s runs context parallelism (its sequence "
                          "parallelism) without tensor, pipeline or expert parallelism", tn);
    if ((p->ep > 1 || p->etp > 1) && !t->ep)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no expert parallelism (ep must be 1)", tn);
    if (p->sp && !t->sp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no sequence parallelism", tn);
    if (p->sp && p->tp == 1)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "sequence parallelism needs tp > 1");
    if (t->sp_with_tp_always && p->tp > 1 && !p->sp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s always uses sequence parallelism with tp > 1 "
                          "(set sp)", tn);
    if (p->zero < 0 || p->zero > 3 || !(t->zero_mask & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not offer ZeRO stage %d", tn, p->zero);
    if (p->pp > 1 && !(t->zero_mask_with_pp & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: ZeRO stage %d cannot be combined with "
                          "pipeline parallelism", tn, p->zero);
    if (p->zero_group) {
        ap_status gs = ap_plan_check_zero_group(p, err);
        if (gs != AP_OK) return gs;
    }
    if (t->dp_shard_required_with_tp && p->tp > 1 && p->dp > 1 && p->zero < 2)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: with tp > 1 the data-parallel side must be "
                          "sharded (ZeRO 2/3, FSDP), not replicated", tn);
    ap_status st = rc_features(t, p, err);
    if (st != AP_OK) return st;
    /* fp32 throughout is the runtime's (autoplan run's CPU ranks); the GPU trainers train in
       mixed precision and their configs have no fp32 mode (trainer.c) */
    if (p->dtype == AP_DTYPE_FP32 && p->trainer != AP_TRAINER_RUNTIME)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s trains in bf16, fp16 or fp8, not fp32 "
                          "(fp32 is the runtime trainer's: autoplan run)", tn);
    if (p->dtype == AP_DTYPE_FP16 && !t->fp16)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not train in fp16", tn);
    if (p->dtype == AP_DTYPE_FP8 && !t->fp8)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not train in fp8", tn);
    if (p->dtype == AP_DTYPE_FP8 && c->gpu.peak_flops[AP_DTYPE_FP8] <= 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no fp8 tensor cores", c->gpu.name);
    if (c->gpu.peak_flops[p->dtype] <= 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no %s tensor cores", c->gpu.name,
                          ap_dtype_name(p->dtype));
    /* the FP8 scaling recipe: given only for an fp8 plan, and one its trainer runs */
    if ((unsigned)p->fp8_recipe >= AP_FP8_RECIPE_COUNT)
        return ap_err_set(err, AP_ERR_INPUT, "fp8_recipe %d is not one of auto, delayed, "
                          "tensorwise, mxfp8", (int)p->fp8_recipe);
    if (p->fp8_recipe != AP_FP8_AUTO && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "fp8_recipe %s needs dtype fp8, not %s",
                          ap_fp8_recipe_name(p->fp8_recipe), ap_dtype_name(p->dtype));
    if (p->dtype == AP_DTYPE_FP8 && !(t->fp8_recipes & (1u << ap_plan_fp8_recipe(p))))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not run FP8 with %s scaling (its "
                          "recipe is %s)", tn, ap_fp8_recipe_name(p->fp8_recipe),
                          ap_fp8_recipe_name(t->fp8_recipe_default));
    /* MXFP8's block scales are Blackwell tensor cores' (Transformer Engine refuses it below
     * compute capability 10.0: check_mxfp8_support) */
    if (p->dtype == AP_DTYPE_FP8 && ap_plan_fp8_recipe(p) == AP_FP8_MXFP8 && c->gpu.sm < 100)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "fp8_recipe mxfp8 needs Blackwell tensor cores "
                          "(compute capability 10.0: b200, gb200), not %s's", c->gpu.name);
    if (p->fp8_params && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "fp8_params (FP8 weights) needs dtype fp8, not %s",
                          ap_dtype_name(p->dtype));
    if (p->fp8_params && !t->fp8_params_zero_mask)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s does not keep its weights in FP8 "
                          "(fp8_params: Megatron-LM's --fp8-param-gather)", tn);
    if (p->fp8_params && !(t->fp8_params_zero_mask & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s keeps FP8 weights (fp8_params) only with "
                          "ZeRO stage 1 or 3 (the distributed optimizer or Megatron-FSDP), not %d",
                          tn, p->zero);
    return AP_OK;
}

/* CPU offload of optimizer states and parameters as the trainer can express it. */
static ap_status check_offload(const ap_trainer_caps *t, const ap_plan *p, ap_err *err) {
    const char *tn = t->name;
    if (p->offload_optimizer > 0) {
        if (!t->offload_optimizer)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot offload optimizer states", tn);
        if (!(t->offload_optimizer_zero_mask & (1u << p->zero)))
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: optimizer offload needs ZeRO stage %s",
                              tn, p->trainer == AP_TRAINER_MEGATRON ? "1 (distributed optimizer)"
                                                                     : "1-3 as the trainer allows");
        if (p->offload_optimizer < 1 && !t->offload_fraction)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s offloads all optimizer states or none",
                              tn);
        if (p->offload_optimizer < 1 && !(t->offload_fraction_zero_mask & (1u << p->zero)))
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: optimizer offload fractions below 1 "
                              "are not possible with ZeRO stage %d", tn, p->zero);
    }
    if (t->offload_together && (p->offload_optimizer > 0) != (p->offload_params > 0))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: CPU offload moves parameters and optimizer "
                          "states together", tn);
    if (p->offload_params > 0) {
        if (!t->offload_params)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot offload parameters", tn);
        if (!(t->offload_params_zero_mask & (1u << p->zero)))
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: parameter offload needs ZeRO-3", tn);
        if (p->offload_params < 1 && !t->offload_params_fraction)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s offloads all parameters or none", tn);
    }
    return AP_OK;
}

/* Overlap options and the combinations the trainer refuses. */
static ap_status check_combinations(const ap_trainer_caps *t, const ap_plan *p, const ap_model *m,
                                    const ap_cluster *c, ap_err *err) {
    const char *tn = t->name;
    if (p->overlap_grad && !t->overlap_grad)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot overlap gradient reduction", tn);
    if (p->overlap_param && !t->overlap_param)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot overlap parameter gathering", tn);
    if (p->overlap_tp && !t->overlap_tp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot overlap tensor-parallel communication",
                          tn);
    if (p->overlap_tp && !p->sp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "overlapping tensor-parallel communication needs "
                          "sequence parallelism");
    if (p->overlap_tp && p->tp > 1 && c && !ap_trainer_overlap_tp(t, &c->gpu))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s overlaps tensor-parallel communication "
                          "(Transformer Engine userbuffers) only on GPUs with CUDA multicast over "
                          "NVSwitch (H100/H200/B200 SXM); %s has none (TE's UB_SKIPMC=1 fallback "
                          "is not modelled): --no-overlap", tn, c->gpu.name);
    if (p->overlap_param && !(t->overlap_param_zero_mask & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: no overlapped parameter gather with ZeRO "
                          "stage %d", tn, p->zero);
    if (p->overlap_param && t->overlap_param_needs_grad && !p->overlap_grad)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: overlapping the parameter gather needs the "
                          "gradient reduction overlapped too", tn);
    if (p->ep > 1 && p->tp > 1 && t->ep_with_tp_needs_sp && !p->sp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: expert parallelism with tp > 1 needs "
                          "sequence parallelism", tn);
    if (p->ep > 1 && !(t->ep_zero_mask & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: expert parallelism is not available with "
                          "ZeRO stage %d", tn, p->zero);
    if (m->moe.experts > 0 && !(t->moe_zero_mask & (1u << p->zero)))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: a mixture-of-experts model cannot train "
                          "with ZeRO stage %d (%s)", tn, p->zero,
                          p->trainer == AP_TRAINER_MEGATRON
                              ? "Megatron-FSDP is modelled for dense models only"
                              : "its engine refuses native MoE there");
    if (t->offload_params_needs_full_optimizer && p->offload_params > 0 &&
        p->offload_optimizer < 1)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: parameters are offloaded only with all "
                          "optimizer states offloaded", tn);
    if (t->ep_no_overlap && p->ep > 1 && (p->overlap_grad || p->overlap_param))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: no communication overlap with expert "
                          "parallelism", tn);
    if (t->dp_shard_required_with_cp && p->cp > 1 && p->zero < 2)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: with cp > 1 parameters are sharded "
                          "(FSDP over the context-parallel ranks): ZeRO stage %d is not "
                          "expressible", tn, p->zero);
    if (t->ddp_only_1d && p->zero == 0 && (int64_t)p->tp * p->pp * p->cp > 1)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: replicated data parallelism (ZeRO 0) "
                          "runs only as the sole parallelism (tp, pp and cp must be 1)", tn);
    if (t->ep_from_dp_shard && p->ep > 1) {
        /* the FSDP-sharded data-parallel ranks (ZeRO 2/3; ZeRO 0 replicates) x cp x tp */
        int64_t ranks = (int64_t)(p->zero >= 2 ? p->dp : 1) * p->cp * p->tp;
        if (ranks % ((int64_t)p->ep * (p->etp > 0 ? p->etp : 1)) != 0)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: expert parallelism takes its ranks "
                              "from the FSDP-sharded data-parallel x cp x tp ranks (%lld at ZeRO "
                              "stage %d), which ep %d does not divide", tn, (long long)ranks,
                              p->zero, p->ep);
    }
    /* torchtitan v0.2.2 runs multi-latent attention (deepseek_v3), attention sinks (gpt_oss:
       "CP support for gpt-oss model is still in progress") and chunked attention with NoPE
       layers (llama4 *_irope) on flex attention, which its context parallelism refuses
       ("Context Parallel only supports SDPA attention"); found with tools/trainer_validate.py */
    if (p->cp > 1 && !t->cp_with_mla &&
        (m->mla.kv_lora_rank > 0 || m->attn_sinks || m->window_chunked || m->nope_global))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: context parallelism is not available for "
                          "%s models (flex attention)", tn,
                          m->mla.kv_lora_rank > 0 ? "multi-latent attention"
                          : m->attn_sinks ? "attention-sink" : "chunked-attention");
    const char *fam = t->pp_no_qk_norm_or_sinks && p->pp > 1 ? ap_torchtitan_family(m) : "";
    if (!strcmp(fam, "qwen3") || !strcmp(fam, "gpt_oss"))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s: no pipeline parallelism for %s models (its "
                          "%s model family has no pipelining function)", tn,
                          m->attn_sinks ? "attention-sink" : "per-head q/k-norm", fam);
    return rc_combinations(t, p, err);
}

/* Interleaved chunks without an explicit layout: the layers divide into pp*vp. */
static ap_status vp_uniform(const ap_plan *p, const ap_model *m, ap_err *err) {
    int nch = p->pp * p->vp;
    if (!p->nchunks && m->layers % nch != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "layers (%lld) are not divisible by pp*vp = %d",
                          (long long)m->layers, nch);
    return AP_OK;
}

int ap_plan_cp_a2a(const ap_plan *p) {
    return p->cp > 1 && (p->cp_a2a || ap_trainer_get(p->trainer)->cp_a2a_only);
}

/* the key/value heads of each tp rank (Megatron replicates them past their count) */
static int64_t kv_per_tp_rank(const ap_model *m, int tp) {
    return m->kv_heads >= tp ? m->kv_heads / tp : 1;
}

int ap_plan_cp_a2a_heads(const ap_model *m, int tp, int cp) {
    if (m->mla.kv_lora_rank > 0 || tp < 1 || cp < 1 || m->heads % tp) return 0;
    return (m->heads / tp) % cp == 0 && kv_per_tp_rank(m, tp) % cp == 0;
}

/* Context parallelism by all-to-all (plan.h cp_a2a): a trainer that has it, cp > 1, and the
 * rank's query and key/value heads (heads / tp, kv heads / tp) divisible by cp, as Transformer
 * Engine's a2a path asserts; multi-latent attention (its own head dims for K and V) is not
 * priced that way. */
static ap_status cp_a2a_check(const ap_trainer_caps *t, const ap_plan *p, const ap_model *m,
                              ap_err *err) {
    if (!t->cp_a2a)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "%s has no all-to-all context parallelism "
                          "(cp_a2a)", t->name);
    if (p->cp < 2)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "all-to-all context parallelism (cp_a2a) "
                          "needs cp > 1");
    if (m->mla.kv_lora_rank > 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "all-to-all context parallelism (cp_a2a) is "
                          "not modelled for multi-latent attention");
    if (!ap_plan_cp_a2a_heads(m, p->tp, p->cp))
        return ap_err_set(err, AP_ERR_INFEASIBLE, "all-to-all context parallelism: the %lld "
                          "query and %lld key/value heads of each tp rank are not divisible by "
                          "cp %d", (long long)(m->heads / p->tp),
                          (long long)kv_per_tp_rank(m, p->tp), p->cp);
    return AP_OK;
}

/* What of check_shape depends on the layout (stage_layers): an explicit layout's length, sum
 * and evenness as the trainer takes it, or the uniform split's divisibility. */
static ap_status check_layout(const ap_trainer_caps *t, const ap_plan *p, const ap_model *m,
                              ap_err *err) {
    const char *tn = t->name;
    int nch = p->pp * p->vp;
    if (p->nchunks) {
        if (p->nchunks != nch)
            return ap_err_set(err, AP_ERR_INPUT, "stage_layers has %d entries, expected pp*vp = %d",
                              p->nchunks, nch);
        int64_t sum = 0;
        int uneven = 0;
        for (int i = 0; i < nch; i++) {
            if (p->stage_layers[i] < 0)
                return ap_err_set(err, AP_ERR_INPUT, "stage_layers[%d] is negative", i);
            sum += p->stage_layers[i];
            if (p->stage_layers[i] != p->stage_layers[0]) uneven = 1;
        }
        if (sum != m->layers)
            return ap_err_set(err, AP_ERR_INPUT, "stage_layers sum to %lld, the model has %lld "
                              "layers", (long long)sum, (long long)m->layers);
        int first_last = 1; /* only the first and last chunks differ from the rest */
        for (int i = 2; i + 1 < nch; i++) first_last &= p->stage_layers[i] == p->stage_layers[1];
        if (uneven && !t->uneven_stages && !(t->partition_first_last && first_last))
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s cannot split layers unevenly across "
                              "pipeline stages%s", tn, t->partition_first_last
                              ? " (except on the first and last stages)" : "");
        if (uneven && t->uneven_first_last_only && !first_last)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s splits unevenly only on the first and "
                              "last stages", tn);
        if (uneven && t->uneven_stages_no_vp && p->vp > 1)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "%s splits unevenly only without "
                              "interleaving (its stage manager takes one layer count per "
                              "pipeline rank)", tn);
    } else if (m->layers % p->pp != 0 && !t->uneven_stages) {
        return ap_err_set(err, AP_ERR_INFEASIBLE, "layers (%lld) are not divisible by pp %d and "
                          "%s needs even stages", (long long)m->layers, p->pp, tn);
    }
    return AP_OK;
}

/* The model's shape against the degrees: heads, kv heads, NVLink domain, layers per chunk and
 * the split, sequence for cp, experts for ep, the batch. */
static ap_status check_shape(const ap_trainer_caps *t, const ap_plan *p, const ap_model *m,
                             const ap_cluster *c, int allow_cross_node_tp, ap_err *err) {
    if (m->heads % p->tp != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "heads (%lld) are not divisible by tp %d",
                          (long long)m->heads, p->tp);
    if (m->kv_heads % p->tp != 0 && p->tp % m->kv_heads != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "kv heads (%lld) and tp %d: neither divides the "
                          "other", (long long)m->kv_heads, p->tp);
    if (p->tp > c->nvlink_domain && !allow_cross_node_tp)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "tp %d spans more than one NVLink domain of %d "
                          "GPUs (--allow-cross-node-tp to permit)", p->tp, c->nvlink_domain);
    int nch = p->pp * p->vp;
    /* the plan's per-chunk arrays (stage_layers, stage_recompute) hold AP_MAX_CHUNKS */
    if (nch > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d x vp %d = %d pipeline chunks exceed the "
                          "supported %d", p->pp, p->vp, nch, AP_MAX_CHUNKS);
    if (nch > m->layers) {
        if (p->vp > 1)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d x vp %d = %d pipeline chunks "
                              "exceed %s's %lld layers", p->pp, p->vp, nch, m->name,
                              (long long)m->layers);
        return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d exceeds %s's %lld layers (a stage "
                          "holds at least one)", p->pp, m->name, (long long)m->layers);
    }
    ap_status lst = check_layout(t, p, m, err);
    if (lst != AP_OK) return lst;
    if (p->vp > 1) {
        if (p->pp == 1)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "virtual stages need pp > 1");
        ap_status st = vp_uniform(p, m, err);
        if (st != AP_OK) return st;
        st = mb_interleaving(t, p, err);
        if (st != AP_OK) return st;
    }
    if (p->cp > 1 && p->seq % (2 * p->cp) != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "sequence %lld is not divisible by 2*cp = %d",
                          (long long)p->seq, 2 * p->cp);
    if (p->cp_a2a || ap_plan_cp_a2a(p)) {
        ap_status st = cp_a2a_check(t, p, m, err);
        if (st != AP_OK) return st;
    }
    if (ap_model_moe_layers_in(m, 0, m->layers) > 0) {
        if (m->moe.experts % p->ep != 0)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "experts (%lld) are not divisible by ep %d",
                              (long long)m->moe.experts, p->ep);
        /* Megatron: expert groups are carved from the dp*cp*tp ranks of a stage:
           ep*etp must divide tp*dp*cp (Megatron core "MoE parallel folding") */
        int64_t stage_ranks = (int64_t)p->tp * p->dp * p->cp;
        if (stage_ranks % ((int64_t)p->ep * p->etp) != 0)
            return ap_err_set(err, AP_ERR_INFEASIBLE, "ep*etp = %d does not divide tp*dp*cp = %lld",
                              p->ep * p->etp, (long long)stage_ranks);
    } else if ((p->ep > 1 || p->etp > 1) && m->moe.experts > 0) {
        /* experts described but no layer routes to them (moe.first_dense_layers = layers) */
        return ap_err_set(err, AP_ERR_INFEASIBLE, "ep/etp > 1 on a model whose %lld layers are "
                          "all dense (no MoE layer: moe.first_dense_layers = %lld)",
                          (long long)m->layers, (long long)m->moe.first_dense_layers);
    } else if (p->ep > 1 || p->etp > 1) {
        return ap_err_set(err, AP_ERR_INFEASIBLE, "ep/etp > 1 on a dense model");
    }
    ap_status st = mb_batch(p, err);
    if (st != AP_OK) return st;
    return rc_shape(t, p, m, err);
}

ap_status ap_plan_check_layout(const ap_plan *p, const ap_model *m, ap_err *err) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    ap_status st = check_layout(t, p, m, err);
    if (st == AP_OK && p->vp > 1) st = vp_uniform(p, m, err);
    if (st == AP_OK) st = rc_shape(t, p, m, err);
    return st;
}

ap_status ap_plan_check(const ap_plan *p, const ap_model *m, const ap_cluster *c,
                        int allow_cross_node_tp, ap_err *err) {
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    ap_status st = check_degrees(p, c, err);
    if (st == AP_OK) st = check_features(t, p, c, err);
    if (st == AP_OK) st = check_offload(t, p, err);
    if (st == AP_OK) st = check_combinations(t, p, m, c, err);
    if (st == AP_OK) st = check_shape(t, p, m, c, allow_cross_node_tp, err);
    return st;
}
