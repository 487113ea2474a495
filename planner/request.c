/*
 * request.c - a request (request.h) resolved into model, cluster, plan, estimate and search
 * options, with the defaults every command shares; the request `autoplan estimate` needs for a
 * given plan and its command-line text; the plan-cache key text.
 *
 * Structure: ap_request_resolve is a driver over named steps, each a page at most:
 *   resolve_cluster  the cluster file or catalog GPU, then the overrides (ap_request_cluster)
 *   resolve_pins     the plan members given, on top of "nothing pinned"; sequence length and
 *                    dtype defaults; the pins' own limits
 *   finish_estimate  ESTIMATE: degrees 1, dp derived, global batch, accumulation, overlap the
 *                    trainer can do
 *   finish_search    SEARCH: the pins as ap_search_opts, --fix merged in, the global batch
 *                    (default 4M tokens per step), the stage solver
 * Messages name the flag (the field tables carry the flag names), so a library caller filling
 * a request directly gets the same words as a user typing flags.
 *
 * Not here: parsing flag text (cli/args.c), searching (search.c), printing.
 */
#include "autoplan/request.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autoplan/hetero.h"
#include "autoplan/kernels.h"
#include "autoplan/profile.h"
#include "autoplan/text.h"

/* Default global batch of a search: 4M tokens per step, the batch of Llama 2 pretraining
 * (Touvron et al. 2023, "Llama 2", Table 1: 4M tokens for every size), 4,000,000 as
 * `--tokens-per-step 4M` reads. */
#define DEFAULT_TOKENS_PER_STEP 4e6

void ap_request_init(ap_request *rq) {
    memset(rq, 0, sizeof *rq);
    ap_plan_init(&rq->plan);
    ap_plan_init(&rq->fix);
    rq->solver.v = AP_SOLVER_AUTO;
}

void ap_request_give(uint64_t *given, int row) {
    if (row >= 0 && row < 64) *given |= (uint64_t)1 << row;
}

static int row_of(const char *name) {
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return i;
    return -1;
}

int ap_request_row_given(uint64_t given, int row) {
    return row >= 0 && row < 64 && ((given >> row) & 1);
}

int ap_request_given(uint64_t given, const char *name) {
    return ap_request_row_given(given, row_of(name));
}

/* Copy member f from src to dst (CHUNKS: the length and the elements). */
static void copy_field(const ap_field *f, ap_plan *dst, const ap_plan *src) {
    if (f->kind == AP_FT_I64) {
        *(int64_t *)(void *)((char *)dst + f->offset) =
            *(const int64_t *)(const void *)((const char *)src + f->offset);
        return;
    }
    ap_field_put(f, dst, ap_field_get(f, src));
    if (f->kind == AP_FT_CHUNKS)
        for (int i = 0; i < (int)ap_field_get(f, src) && i < f->nvalues; i++)
            *ap_field_chunk(f, dst, i) = *ap_field_chunk(f, (void *)src, i);
}

/* "--tp" for a plan row (its flag), or its C name when it has none. */
static const char *flag_of(const char *name, char *buf, size_t n) {
    int nf;
    const ap_field *t = ap_plan_fields(&nf);
    const ap_field *f = ap_field_find(t, nf, name);
    snprintf(buf, n, "--%s", f && f->flag ? f->flag : name);
    return buf;
}

/* ---- the cluster ---------------------------------------------------------------------------- */

/* The base cluster: the file, or the catalog GPU and --gpus. */
static ap_status base_cluster(const ap_request *rq, ap_cluster *c, ap_err *err) {
    ap_status st;
    if (rq->cluster_file) {
        int over = rq->gpus.given && rq->gpus.v >= 1 && rq->gpus.v <= (1 << 20)
                       ? (int)rq->gpus.v : 0;
        if ((st = ap_cluster_load_gpus(rq->cluster_file, over, c, err)) != AP_OK) return st;
        if (rq->gpu) {
            const ap_gpu *g = ap_gpu_find(rq->gpu);
            char shown[64];
            if (!g || strcmp(g->name, c->gpu.name) != 0)
                return ap_err_set(err, AP_ERR_INPUT, "--gpu %s conflicts with %s (gpu %s); mixed "
                                  "GPU types are not supported yet",
                                  ap_text_line(shown, sizeof shown, rq->gpu, 40), rq->cluster_file,
                                  c->gpu.name);
        }
        if (rq->gpus.given) c->gpus = (int)rq->gpus.v;
        return AP_OK;
    }
    const ap_gpu *g;
    if ((st = ap_gpu_lookup(rq->gpu ? rq->gpu : "a100-sxm4-80g", "--gpu", &g, err)) != AP_OK)
        return st;
    if (!rq->gpus.given)
        return ap_err_set(err, AP_ERR_INPUT, "--gpus is required (number of GPUs, e.g. --gpus 8)");
    ap_cluster_from_gpu(g, (int)rq->gpus.v, c);
    return AP_OK;
}

/* --nvme SIZE with --nvme-bw BW (or the read and write bandwidths): all or nothing, named. */
static ap_status request_nvme(const ap_request *rq, ap_cluster *c, ap_err *err) {
    int any_bw = rq->nvme_bw.given || rq->nvme_read_bw.given || rq->nvme_write_bw.given;
    if (rq->nvme.given) {
        if (!(rq->nvme.v > 0)) return ap_err_set(err, AP_ERR_INPUT, "--nvme: must be positive");
        c->nvme_bytes = rq->nvme.v;
    }
    if (rq->nvme_bw.given) c->nvme_read_bytes_per_s = c->nvme_write_bytes_per_s = rq->nvme_bw.v;
    if (rq->nvme_read_bw.given) c->nvme_read_bytes_per_s = rq->nvme_read_bw.v;
    if (rq->nvme_write_bw.given) c->nvme_write_bytes_per_s = rq->nvme_write_bw.v;
    if (c->nvme_bytes > 0 && (c->nvme_read_bytes_per_s <= 0 || c->nvme_write_bytes_per_s <= 0))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme-bw: --nvme %.0f bytes needs the NVMe "
                          "bandwidth (--nvme-bw, or --nvme-read-bw and --nvme-write-bw)",
                          c->nvme_bytes);
    if (any_bw && !(c->nvme_bytes > 0))
        return ap_err_set(err, AP_ERR_INPUT, "--nvme: an NVMe bandwidth was given without its "
                          "capacity (--nvme SIZE, e.g. 3.84TB)");
    return AP_OK;
}

ap_status ap_request_cluster(const ap_request *rq, ap_cluster *c, ap_err *err) {
    ap_status st = base_cluster(rq, c, err);
    if (st != AP_OK) return st;
    if (rq->gpus.given && (rq->gpus.v < 1 || rq->gpus.v > (1 << 20)))
        return ap_err_set(err, AP_ERR_INPUT, "--gpus: %lld is out of range [1, 1048576]",
                          (long long)rq->gpus.v);
    const struct { const char *flag; const ap_opt_real *o; } bw[] = {
        {"--network-bw", &rq->network_bw}, {"--link-bw", &rq->link_bw}, {"--pcie-bw", &rq->pcie_bw}};
    for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++)
        if (bw[i].o->given && (!(bw[i].o->v >= AP_MIN_BYTES_PER_S) || bw[i].o->v > 1e15) &&
            !(bw[i].o->v == 0 && i == 0))
            return ap_err_set(err, AP_ERR_INPUT, "%s: %.3g bytes/s is not a bandwidth between 1 MB/s "
                              "and 1 PB/s", bw[i].flag, bw[i].o->v);
    if (rq->gpus_per_node.given) ap_cluster_set_gpus_per_node(c, (int)rq->gpus_per_node.v);
    if (rq->nvlink_domain.given && !rq->cluster_file) {
        /* fewer GPUs than a node use part of it (ap_cluster_from_gpu): a domain larger than
           that part but within the node as described keeps the whole node, as a cluster file's
           node does (--gpus 4 --nvlink-domain 8 on 8-GPU nodes) */
        int node = rq->gpus_per_node.given ? (int)rq->gpus_per_node.v
                                           : (c->gpu.ref_gpus_per_node > 0
                                                  ? c->gpu.ref_gpus_per_node : 1);
        if (rq->nvlink_domain.v > c->gpus_per_node && c->gpus < node &&
            rq->nvlink_domain.v <= node) {
            int sw = c->gpu.ref_gpus_per_pcie_switch > 0 ? c->gpu.ref_gpus_per_pcie_switch : 1;
            c->gpus_per_node = node;
            c->gpus_per_pcie_switch = sw < node ? sw : node;
        }
    }
    if (rq->nvlink_domain.given) c->nvlink_domain = (int)rq->nvlink_domain.v;
    if (rq->network_bw.given) c->net_bytes_per_s = rq->network_bw.v;
    if (rq->link_bw.given) c->link_bytes_per_s = rq->link_bw.v;
    if (rq->pcie_bw.given) c->pcie_bytes_per_s = rq->pcie_bw.v;
    if (rq->cpu_mem.given) {
        if (!(rq->cpu_mem.v > 0)) return ap_err_set(err, AP_ERR_INPUT, "--cpu-mem: must be positive");
        c->cpu_mem_bytes = rq->cpu_mem.v;
    }
    ap_status st2 = request_nvme(rq, c, err);
    if (st2 != AP_OK) return st2;
    if (!rq->cluster_file) return ap_cluster_validate(c, "cluster flags", err);
    /* a file with flags over it: the message names the flags too, whichever field it is about
     * (--nvlink-domain 16 over a file that says 8 is not the file's error) */
    const struct { const char *flag; int given; } over[] = {
        {"--gpus", rq->gpus.given}, {"--gpus-per-node", rq->gpus_per_node.given},
        {"--nvlink-domain", rq->nvlink_domain.given}, {"--network-bw", rq->network_bw.given},
        {"--link-bw", rq->link_bw.given}, {"--pcie-bw", rq->pcie_bw.given},
        {"--cpu-mem", rq->cpu_mem.given}, {"--nvme", rq->nvme.given}};
    char where[512];
    size_t at = (size_t)snprintf(where, sizeof where, "%s", rq->cluster_file);
    int n = 0;
    for (size_t i = 0; i < sizeof over / sizeof over[0] && at < sizeof where; i++)
        if (over[i].given)
            at += (size_t)snprintf(where + at, sizeof where - at, "%s%s", n++ ? ", " : " with ",
                                   over[i].flag);
    return ap_cluster_validate(c, where, err);
}

/* ---- the plan pins ----------------------------------------------------------------------------- */

/* An FP8 recipe the trainer runs, refused in the words of the recipes it has ("delayed or
 * tensorwise"). */
static ap_status check_fp8_recipe(const ap_plan *p, const ap_trainer_caps *tc, ap_err *err) {
    if (p->dtype != AP_DTYPE_FP8 || !tc->fp8 || (tc->fp8_recipes & (1u << ap_plan_fp8_recipe(p))))
        return AP_OK;
    char has[64] = "";
    for (int r = AP_FP8_DELAYED; r < AP_FP8_RECIPE_COUNT; r++) {
        if (!(tc->fp8_recipes & (1u << r))) continue;
        size_t l = strlen(has);
        snprintf(has + l, sizeof has - l, "%s%s", l ? " or " : "",
                 ap_fp8_recipe_name((ap_fp8_recipe)r));
    }
    return ap_err_set(err, AP_ERR_INPUT, "--fp8-recipe %s: %s scales FP8 %s only",
                      ap_fp8_recipe_name(p->fp8_recipe), tc->display, has);
}

/* The pins' own limits: recompute layers need full recompute and at most the model's layers;
 * the dtype must have tensor cores on this GPU. */
static ap_status check_pins(const ap_request *rq, const ap_resolved *r, ap_err *err) {
    const ap_plan *p = &r->plan;
    if (ap_request_given(rq->plan_given, "recompute_layers")) {
        if (p->recompute != AP_RECOMPUTE_FULL)
            return ap_err_set(err, AP_ERR_INPUT, "--recompute-layers needs --recompute full");
        if (p->recompute_layers > r->model.layers)
            return ap_err_set(err, AP_ERR_INPUT, "--recompute-layers: %d is more than the model's "
                              "%lld layers", p->recompute_layers, (long long)r->model.layers);
    }
    /* ZeRO within groups limits the plans to the stages the trainer groups (ap_plan_check); a
     * trainer with none is refused here, not answered with "nothing legal" */
    if (ap_request_given(rq->plan_given, "zero_group") && p->zero_group > 0) {
        const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
        if (p->zero_group < 2)
            return ap_err_set(err, AP_ERR_INPUT, "--zero-group: a group is at least 2 ranks (0 = "
                              "all), not %d", p->zero_group);
        if (!tc->zero_group_mask)
            return ap_err_set(err, AP_ERR_INPUT, "--zero-group: %s does not shard within groups "
                              "of the data-parallel ranks (Megatron-LM, DeepSpeed, FSDP and "
                              "torchtitan do)", tc->display);
        char st[32];
        if (ap_request_given(rq->plan_given, "zero") && !(tc->zero_group_mask & (1u << p->zero)))
            return ap_err_set(err, AP_ERR_INPUT, "--zero-group: %s groups ZeRO %s, not %d",
                              tc->display, ap_trainer_zero_group_stages(tc, st, sizeof st),
                              p->zero);
    }
    /* a pinned --sp that cannot split the sequences (ap_plan_sp_divides). A request's rule,
     * not the plan checker's: plans read from files and validation rows are taken as their
     * runs ran. */
    if (ap_request_given(rq->plan_given, "sp") && p->sp && !ap_plan_sp_divides(p))
        return ap_err_set(err, AP_ERR_INPUT, "--sp: the %lld tokens of a sequence%s are not "
                          "divisible by tp %d (sequence parallelism splits them)",
                          (long long)p->seq, p->cp > 1 ? " per cp rank" : "", p->tp);
    if (!ap_model_positions_hold(&r->model, p->seq))
        return ap_err_set(err, AP_ERR_INPUT, "--seq: %lld tokens exceed the %lld learned positions "
                          "of %s", (long long)p->seq, (long long)r->model.learned_pos,
                          rq->model ? rq->model : r->model.name);
    if (ap_request_given(rq->plan_given, "dtype") && r->cluster.gpu.peak_flops[p->dtype] <= 0)
        return ap_err_set(err, AP_ERR_INPUT, "--dtype %s: %s has no %s tensor cores",
                          ap_dtype_name(p->dtype), r->cluster.gpu.name, ap_dtype_name(p->dtype));
    if (p->cp_a2a && !ap_trainer_get(p->trainer)->cp_a2a)
        return ap_err_set(err, AP_ERR_INPUT, "--cp-a2a: %s has no all-to-all context "
                          "parallelism (Megatron-LM's --cp-comm-type a2a)",
                          ap_trainer_get(p->trainer)->display);
    /* FP8 weights limit the plans to those that can keep them (ap_plan_check, which also
     * refuses a ZeRO stage without them); a search with none is refused here, not answered
     * with "nothing legal" */
    if (p->fp8_params && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "--fp8-params needs --dtype fp8");
    if (p->fp8_params && !ap_trainer_get(p->trainer)->fp8_params_zero_mask)
        return ap_err_set(err, AP_ERR_INPUT, "--fp8-params: %s does not keep its weights in FP8 "
                          "(Megatron-LM's --fp8-param-gather does)",
                          ap_trainer_get(p->trainer)->display);
    if (p->fp8_recipe != AP_FP8_AUTO && p->dtype != AP_DTYPE_FP8)
        return ap_err_set(err, AP_ERR_INPUT, "--fp8-recipe needs --dtype fp8");
    const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
    ap_status st = check_fp8_recipe(p, tc, err);
    if (st != AP_OK) return st;
    /* pins no plan can make legal are refused here, in the words estimate refuses them, not
     * answered by a search with "nothing fits": fp32 outside the runtime, an attention kernel
     * without figures on this GPU for the model's head size (estimate.c) */
    /* the cpu device is autoplan run's: the runtime trainer there and nowhere else */
    int cpu = !strcmp(r->cluster.gpu.vendor, "cpu");
    if (cpu && p->trainer != AP_TRAINER_RUNTIME)
        return ap_err_set(err, AP_ERR_INPUT, "%s does not run on the cpu device (it is "
                          "autoplan run's)", tc->name);
    if (!cpu && p->trainer == AP_TRAINER_RUNTIME)
        return ap_err_set(err, AP_ERR_INPUT, "the runtime trainer runs on the cpu device only "
                          "(autoplan run), not on %s", r->cluster.gpu.name);
    if (ap_request_given(rq->plan_given, "dtype") && p->dtype == AP_DTYPE_FP32 &&
        p->trainer != AP_TRAINER_RUNTIME)
        return ap_err_set(err, AP_ERR_INPUT, "--dtype fp32: %s trains in bf16, fp16 or fp8, not "
                          "fp32 (fp32 is the runtime trainer's: autoplan run)", tc->name);
    const char *impl = ap_attn_impl_name(p->attn_impl);
    if (ap_request_given(rq->plan_given, "attn_impl") && p->attn_impl != AP_ATTN_AUTO &&
        p->attn_impl != AP_ATTN_UNFUSED && p->flash_attn) {
        const ap_kernels *k = ap_kernels_published(&r->cluster.gpu);
        double f = 0, b = 0, seq = p->seq > 0 ? (double)p->seq : (double)r->model.seq_len;
        if (k) ap_kernels_attn_eff(k, p->attn_impl, 1, (double)r->model.head_dim, seq, &f, &b);
        if (k && !(f > 0 && b > 0))
            return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: attention '%s' does not run on "
                              "%s (no kernel figures for it: `autoplan profile show %s`)", impl,
                              impl, r->cluster.gpu.name, r->cluster.gpu.name);
    }
    if (ap_request_given(rq->plan_given, "attn_impl") && p->attn_impl != AP_ATTN_AUTO &&
        p->attn_impl != AP_ATTN_UNFUSED && !p->flash_attn) {
        if (ap_request_given(rq->plan_given, "flash_attn"))
            return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: contradicts --no-flash-attn",
                              impl);
        return ap_err_set(err, AP_ERR_INPUT, "--attn-impl %s: %s runs attention unfused "
                          "(FlashAttention needs compute capability 8.0); use unfused or auto",
                          impl, r->cluster.gpu.name);
    }
    if (ap_request_given(rq->plan_given, "stage_recompute")) {
        /* all -1 ("as --recompute-layers") says nothing: plan --json writes it for every
           uneven plan, so that its plans read back whatever their recomputation */
        int own = 0;
        for (int c = 0; c < p->nchunks; c++) own |= p->stage_recompute[c] != -1;
        if (p->recompute != AP_RECOMPUTE_FULL && own)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-recompute needs --recompute full");
        for (int c = 0; c < p->nchunks; c++)
            if (p->stage_recompute[c] == 0) /* the cost model reads > 0 as a chunk's own count */
                return ap_err_set(err, AP_ERR_INPUT, "--stage-recompute: a count is at least 1 "
                                  "(-1 = --recompute-layers)");
    }
    if (ap_request_given(rq->plan_given, "stage_layers")) {
        int64_t sum = 0;
        for (int i = 0; i < p->nchunks; i++) sum += p->stage_layers[i];
        if (sum != r->model.layers)
            return ap_err_set(err, AP_ERR_INPUT, "--stage-layers: the entries sum to %lld layers, "
                              "the model has %lld", (long long)sum, (long long)r->model.layers);
    }
    return AP_OK;
}

/* --gemini, --shard-param-frac, --offload-device: the plan's heterogeneous placement (plan.h
 * ap_plan_hetero). Gemini static takes the offload fractions; DeepSpeed puts the offloaded
 * states on the device. The trainer rules are checked in finish_estimate. */
static ap_status resolve_hetero(const ap_request *rq, ap_plan *p, ap_err *err) {
    if (!rq->gemini.given && !rq->offload_device.given && !rq->shard_param_frac.given)
        return AP_OK;
    ap_plan_hetero_init(&p->hetero);
    if (rq->shard_param_frac.given && !rq->gemini.given)
        return ap_err_set(err, AP_ERR_INPUT, "--shard-param-frac: a Gemini static fraction; "
                          "give --gemini static");
    if (rq->gemini.given && rq->offload_device.given)
        return ap_err_set(err, AP_ERR_INPUT, "--offload-device is DeepSpeed's and --gemini "
                          "Colossal-AI's; give one");
    if (rq->gemini.given) {
        p->hetero.placement = (ap_gemini_placement)rq->gemini.v;
        if (p->hetero.placement == AP_GEMINI_OFF)
            return ap_err_set(err, AP_ERR_INPUT, "--gemini: 'off' is not a placement (static or "
                              "auto)");
        if (rq->shard_param_frac.given) {
            if (!(rq->shard_param_frac.v >= 0 && rq->shard_param_frac.v <= 1))
                return ap_err_set(err, AP_ERR_INPUT, "--shard-param-frac: %g is out of range "
                                  "[0, 1]", rq->shard_param_frac.v);
            p->hetero.shard_param_frac = rq->shard_param_frac.v;
        }
        if (p->hetero.placement == AP_GEMINI_AUTO &&
            (rq->shard_param_frac.given || p->offload_optimizer > 0 || p->offload_params > 0))
            return ap_err_set(err, AP_ERR_INPUT, "--gemini auto places chunks itself; "
                              "--offload-optimizer, --offload-params and --shard-param-frac are "
                              "static placement's fractions");
        p->hetero.offload_optim_frac = p->offload_optimizer;
        p->hetero.offload_param_frac = p->offload_params;
        return AP_OK;
    }
    ap_offload_device dev = (ap_offload_device)rq->offload_device.v;
    if (dev == AP_OFFLOAD_DEV_NONE || !(p->offload_optimizer > 0 || p->offload_params > 0))
        return ap_err_set(err, AP_ERR_INPUT, "--offload-device %s needs --offload-optimizer or "
                          "--offload-params above 0", ap_offload_device_name(dev));
    if (p->offload_optimizer > 0) p->hetero.ds_optimizer = dev;
    if (p->offload_params > 0) p->hetero.ds_params = dev;
    return AP_OK;
}

/* The plan members given, over "nothing pinned" (degrees, micro-batch and global batch 0, ZeRO
 * -1); the sequence defaults to the model's, the dtype to bf16 (fp16 where the GPU has none,
 * fp32 on the cpu device). */
static ap_status resolve_pins(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_plan *p = &r->plan;
    ap_plan_init(p);
    p->tp = p->pp = p->cp = p->ep = p->vp = 0;
    p->mbs = p->gbs = 0;
    p->zero = -1;
    p->seq = r->model.seq_len;
    /* V100, T4: no bf16; the cpu device (autoplan run's ranks) computes in fp32 */
    if (r->cluster.gpu.peak_flops[AP_DTYPE_BF16] <= 0)
        p->dtype = r->cluster.gpu.peak_flops[AP_DTYPE_FP16] > 0 ? AP_DTYPE_FP16 : AP_DTYPE_FP32;
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++)
        if (ap_request_row_given(rq->plan_given, i)) copy_field(&t[i], p, &rq->plan);
    /* --overlap: gradient reduction and parameter gathering (finish_estimate keeps what the
     * trainer can do) */
    if (ap_request_given(rq->plan_given, "overlap_grad")) p->overlap_param = p->overlap_grad;
    /* FlashAttention needs compute capability 8.0+: the catalog GPUs without bf16 tensor cores
     * (V100, Turing) run the unfused attention, in the estimate and in the emitted configs */
    if (r->cluster.gpu.peak_flops[AP_DTYPE_BF16] <= 0) p->flash_attn = 0;
    if (!ap_request_given(rq->plan_given, "seq"))
        ap_log(AP_LOG_INFO, "sequence length %lld (the model's training length; --seq to change)",
               (long long)p->seq);
    ap_status st = check_pins(rq, r, err);
    return st == AP_OK ? resolve_hetero(rq, p, err) : st;
}

/* ---- estimate: one plan ----------------------------------------------------------------------- */

/* --stage-recompute (per-chunk recomputed layers, as an uneven plan carries them): the chunks
 * keep the uniform split unless --stage-layers is given, and no chunk recomputes more layers
 * than it has. */
static ap_status finish_stage_recompute(const ap_request *rq, ap_resolved *r, int layers_given,
                                        ap_err *err) {
    ap_plan *p = &r->plan;
    if (!ap_request_given(rq->plan_given, "stage_recompute")) return AP_OK;
    if (!layers_given) {
        int n = p->nchunks;
        p->nchunks = 0;
        for (int c = 0; c < n; c++) p->stage_layers[c] = ap_plan_chunk_layers(p, r->model.layers, c);
        p->nchunks = n;
    }
    for (int c = 0; c < p->nchunks; c++)
        if (p->stage_recompute[c] > ap_plan_chunk_layers(p, r->model.layers, c))
            return ap_err_set(err, AP_ERR_INPUT, "--stage-recompute: chunk %d has %d layers, not "
                              "%d to recompute", c, ap_plan_chunk_layers(p, r->model.layers, c),
                              p->stage_recompute[c]);
    return AP_OK;
}

static ap_status finish_estimate(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_plan *p = &r->plan;
    ap_status st;
    if (p->tp == 0) p->tp = 1;
    if (p->pp == 0) p->pp = 1;
    if (p->cp == 0) p->cp = 1;
    if (p->ep == 0) p->ep = 1;
    if (p->etp == 0) p->etp = 1;
    if (p->vp == 0) p->vp = 1;
    if (p->mbs == 0) p->mbs = 1;
    if (p->zero < 0) p->zero = p->hetero.placement != AP_GEMINI_OFF ? 3 : 0; /* GeminiPlugin */
    /* sp and overlap default as the search sets them (planner/search.c): sp with tp > 1 where
     * the trainer has it and the sequence splits over tp, overlap of whatever this trainer can
     * overlap at this ZeRO stage; so a plan label's flags (ap_plan_label shows no-sp / no-ov
     * where they differ) reproduce its estimate. --no-sp / --no-overlap turn them off. */
    const ap_trainer_caps *tc = ap_trainer_get(p->trainer);
    int sp_given = ap_request_given(rq->plan_given, "sp") && p->sp;
    int ov_given = ap_request_given(rq->plan_given, "overlap_grad") &&
                   (p->overlap_grad || p->overlap_param);
    if (sp_given && rq->no_sp)
        return ap_err_set(err, AP_ERR_INPUT, "--sp and --no-sp contradict each other");
    if (ov_given && rq->no_overlap)
        return ap_err_set(err, AP_ERR_INPUT, "--overlap and --no-overlap contradict each other");
    if (!sp_given)
        p->sp = !rq->no_sp && p->tp > 1 && tc->sp && ap_plan_sp_divides(p); /* as space.c */
    if (!ov_given) p->overlap_grad = p->overlap_param = !rq->no_overlap;
    p->overlap_tp = p->overlap_grad && ap_trainer_overlap_tp(tc, &r->cluster.gpu) && p->sp &&
                    p->tp > 1;
    /* data-parallel overlap by default only where the trainer has it at this ep (the search's
       rule); TP overlap does not depend on it */
    if (!ov_given && !ap_trainer_dp_overlap(tc, p->ep)) p->overlap_grad = p->overlap_param = 0;
    p->overlap_grad = p->overlap_grad && tc->overlap_grad;
    p->overlap_param = p->overlap_param && tc->overlap_param &&
                       (tc->overlap_param_zero_mask & (1u << p->zero)) &&
                       (!tc->overlap_param_needs_grad || p->overlap_grad);
    int64_t per = (int64_t)p->tp * p->pp * p->cp;
    if (r->cluster.gpus % per != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--gpus %d is not divisible by tp*pp*cp = %lld",
                          r->cluster.gpus, (long long)per);
    p->dp = (int)(r->cluster.gpus / per);
    if (p->gbs == 0) p->gbs = p->mbs * p->dp;
    if (p->gbs % (p->mbs * p->dp) != 0)
        return ap_err_set(err, AP_ERR_INPUT, "--gbs %lld is not divisible by mbs*dp = %lld",
                          (long long)p->gbs, (long long)(p->mbs * p->dp));
    p->grad_accum = p->gbs / (p->mbs * p->dp);
    int layers_given = ap_request_given(rq->plan_given, "stage_layers");
    if (p->nchunks && p->nchunks != p->pp * p->vp)
        return ap_err_set(err, AP_ERR_INPUT, "--%s has %d entries, expected pp*vp = %d",
                          layers_given ? "stage-layers" : "stage-recompute", p->nchunks,
                          p->pp * p->vp);
    if ((st = finish_stage_recompute(rq, r, layers_given, err)) != AP_OK) return st;
    /* no placement flag: the search's default for this plan (GeminiPlugin static for
     * Colossal-AI ZeRO-3, CPU offload devices for DeepSpeed; ap_plan_hetero_default is the
     * search's rule too), so estimate and plan agree */
    if (!rq->gemini.given && !rq->offload_device.given) (void)ap_plan_hetero_default(p);
    if (p->hetero.placement != AP_GEMINI_OFF || p->hetero.ds_optimizer != AP_OFFLOAD_DEV_NONE ||
        p->hetero.ds_params != AP_OFFLOAD_DEV_NONE) {
        st = ap_plan_hetero_validate(p, &r->cluster, "flags", err);
        if (st != AP_OK) return st;
        /* no flag sets the NVMe swap buffers: size them to the largest parameter partition (a
         * model the simulation does not take, e.g. MoE, is refused by the run itself) */
        ap_err ignored;
        (void)ap_hetero_size_param_buffers(&r->model, p, &ignored);
    }
    if (p->recompute == AP_RECOMPUTE_FULL && p->recompute_layers > 0 &&
        p->recompute_layers > (r->model.layers + p->pp * p->vp - 1) / (p->pp * p->vp))
        return ap_err_set(err, AP_ERR_INPUT, "--recompute-layers: %d is more than the %lld layers "
                          "of a pipeline chunk (pp*vp = %d chunks)", p->recompute_layers,
                          (long long)((r->model.layers + p->pp * p->vp - 1) / (p->pp * p->vp)),
                          p->pp * p->vp);
    return AP_OK;
}

/* ---- search: the pins of a search ------------------------------------------------------------ */

/* --fix pins on top of the flag pins; the same member given both ways must agree. */
static ap_status merge_fix(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_search_opts *so = &r->search;
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++) {
        if (!ap_request_row_given(rq->fix_given, i)) continue;
        double v = ap_field_get(&t[i], &rq->fix);
        char fl[48];
        if (ap_request_row_given(rq->plan_given, i) && ap_field_get(&t[i], &rq->plan) != v)
            return ap_err_set(err, AP_ERR_INPUT, "--fix %s=%g contradicts %s %g", t[i].json, v,
                              flag_of(t[i].name, fl, sizeof fl), ap_field_get(&t[i], &rq->plan));
        copy_field(&t[i], &so->fixed, &rq->fix);
        if (!strcmp(t[i].name, "recompute")) so->fix_recompute = 1;
    }
    return AP_OK;
}

ap_status ap_request_check_pins(const ap_request *rq, int gpus, ap_err *err) {
    static const char *const names[] = {"tp", "pp", "cp", "dp"};
    int n;
    const ap_field *t = ap_plan_fields(&n);
    int64_t prod = 1;
    int npinned = 0;
    for (int d = 0; d < 4; d++) {
        const ap_field *f = ap_field_find(t, n, names[d]);
        int row = (int)(f - t), v = 0;
        const char *how = NULL;
        if (ap_request_row_given(rq->plan_given, row)) {
            v = (int)ap_field_get(f, &rq->plan);
            how = "--";
        } else if (ap_request_row_given(rq->fix_given, row)) {
            v = (int)ap_field_get(f, &rq->fix);
            how = "--fix ";
        }
        if (!how || v <= 0) continue;
        if (gpus % v != 0)
            return ap_err_set(err, AP_ERR_INPUT, "%s%s%s%d does not divide --gpus %d: pick a "
                              "divisor of the GPU count", how, names[d], how[2] ? "=" : " ", v,
                              gpus);
        prod *= v;
        npinned++;
    }
    if (npinned > 1 && gpus % prod != 0)
        return ap_err_set(err, AP_ERR_INPUT, "the pinned degrees multiply to %lld, which does not "
                          "divide --gpus %d", (long long)prod, gpus);
    return AP_OK;
}

/* The global batch: --gbs sequences, or --tokens-per-step (default 4M = 4,000,000 tokens, the
 * count parser's meaning) / sequence, rounded to the nearest multiple of 2^(floor(log2 b) - 3)
 * (four binary digits kept: 976.6 -> 960 = 15 x 64) so that it divides across data-parallel
 * ranks and micro-batches instead of being a prime such as 977; the note says how. */
static ap_status search_batch(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_search_opts *so = &r->search;
    if (ap_request_given(rq->plan_given, "gbs") && rq->tokens_per_step.given)
        return ap_err_set(err, AP_ERR_INPUT, "give --gbs or --tokens-per-step, not both");
    if (r->plan.gbs > 0) {
        so->gbs = r->plan.gbs;
        return AP_OK;
    }
    double tps = rq->tokens_per_step.given ? rq->tokens_per_step.v : DEFAULT_TOKENS_PER_STEP;
    if (!(tps >= 1) || tps > 1e18)
        return ap_err_set(err, AP_ERR_INPUT, "--tokens-per-step: %g is not a token count", tps);
    int64_t seq = so->fixed.seq > 0 ? so->fixed.seq : 1;
    double exact = tps / (double)seq;
    int64_t unit = 1;
    while ((double)(unit * 16) <= exact) unit *= 2;
    double g = floor(exact / (double)unit + 0.5) * (double)unit;
    so->gbs = g < 1 ? 1 : (int64_t)g;
    if (so->gbs > ((int64_t)1 << 32))
        return ap_err_set(err, AP_ERR_INPUT, "--tokens-per-step: %g tokens is more than 2^32 "
                          "sequences of %lld", tps, (long long)seq);
    snprintf(r->note, sizeof r->note, "global batch %lld sequences x %lld tokens = %.2fM tokens "
             "(%s: %.0f tokens / %lld = %.1f sequences, rounded to a multiple of %lld; --gbs to "
             "set it)", (long long)so->gbs, (long long)seq, (double)so->gbs * (double)seq / 1e6,
             rq->tokens_per_step.given ? "from --tokens-per-step" : "default 4M tokens per step",
             tps, (long long)seq, exact, (long long)unit);
    return AP_OK;
}

/* --gemini / --offload-device in a search pin the kind of heterogeneous placement (the space
 * reads so->fixed.hetero, planner/space.c hetero_place): Gemini is GeminiPlugin, Colossal-AI's
 * ZeRO-3, and DeepSpeed offloads parameters or to NVMe only at ZeRO-3, so those pin the stage;
 * the rules of ap_plan_hetero_validate hold as for estimate. */
static ap_status search_hetero(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_search_opts *so = &r->search;
    const ap_plan *cp = &r->plan;
    if (!rq->gemini.given && !rq->offload_device.given) return AP_OK;
    int needs3 = rq->gemini.given || cp->hetero.ds_params != AP_OFFLOAD_DEV_NONE ||
                 cp->hetero.ds_optimizer == AP_OFFLOAD_DEV_NVME;
    ap_plan q = *cp;
    q.zero = so->fixed.zero;
    if (needs3) {
        if (so->fixed.zero >= 0 && so->fixed.zero != 3)
            return ap_err_set(err, AP_ERR_INPUT, "--%s %s runs ZeRO stage 3; --zero %d contradicts "
                              "it", rq->gemini.given ? "gemini" : "offload-device",
                              rq->gemini.given ? ap_gemini_placement_name(cp->hetero.placement)
                                               : ap_offload_device_name((ap_offload_device)rq->offload_device.v),
                              so->fixed.zero);
        q.zero = so->fixed.zero = 3;
    } else if (q.zero < 0) {
        q.zero = 1; /* CPU optimizer offload: any stage 1-3, as the search offers it */
    }
    ap_status st = ap_plan_hetero_validate(&q, &r->cluster, "flags", err);
    if (st == AP_OK) so->fixed.hetero = cp->hetero;
    return st;
}

static ap_status finish_search(const ap_request *rq, ap_resolved *r, ap_err *err) {
    ap_search_opts *so = &r->search;
    const ap_plan *cp = &r->plan;
    ap_search_opts_init(so);
    so->fixed.trainer = cp->trainer;
    so->fixed.tp = cp->tp; so->fixed.pp = cp->pp; so->fixed.cp = cp->cp; so->fixed.ep = cp->ep;
    so->fixed.vp = cp->vp; so->fixed.mbs = cp->mbs; so->fixed.zero = cp->zero;
    so->fixed.seq = cp->seq;
    so->fixed.dtype = cp->dtype;
    so->fixed.flash_attn = cp->flash_attn;
    so->fixed.attn_impl = cp->attn_impl;
    so->fixed.fp8_params = cp->fp8_params;
    so->fixed.cp_a2a = cp->cp_a2a;
    so->fixed.fp8_recipe = cp->fp8_recipe;
    /* an explicit 0 pins "all ranks"; absent leaves the domain's group to the search */
    so->fixed.zero_group =
        ap_request_given(rq->plan_given, "zero_group") && cp->zero_group == 0 ? -1
                                                                               : cp->zero_group;
    so->fixed.grad_reduce_bytes = cp->grad_reduce_bytes;
    so->fixed.gather_bytes = cp->gather_bytes;
    /* an explicit 0 pins "no offload"; absent leaves it to the search */
    so->fixed.offload_optimizer =
        ap_request_given(rq->plan_given, "offload_optimizer") && cp->offload_optimizer == 0
            ? -1.0 : cp->offload_optimizer;
    so->fixed.offload_params =
        ap_request_given(rq->plan_given, "offload_params") && cp->offload_params == 0
            ? -1.0 : cp->offload_params;
    so->fixed.recompute_layers = cp->recompute_layers;
    if (ap_request_given(rq->plan_given, "recompute")) {
        so->fixed.recompute = cp->recompute;
        so->fix_recompute = 1;
    }
    if (ap_request_given(rq->plan_given, "stage_layers"))
        return ap_err_set(err, AP_ERR_INPUT, "--stage-layers applies to `autoplan estimate`; the "
                          "search uses uniform stages");

    if (ap_request_given(rq->plan_given, "stage_recompute"))
        return ap_err_set(err, AP_ERR_INPUT, "--stage-recompute applies to `autoplan estimate`; "
                          "the search chooses recomputation per stage");
    /* --etp pins the experts' split (the search keeps them unsplit otherwise) */
    if (ap_request_given(rq->plan_given, "etp")) so->fixed.etp = cp->etp;
    if (ap_request_given(rq->plan_given, "sp") && cp->sp && rq->no_sp)
        return ap_err_set(err, AP_ERR_INPUT, "--sp and --no-sp contradict each other");
    so->no_sp = rq->no_sp;
    so->no_overlap = rq->no_overlap;
    so->prune = !rq->no_prune;
    so->allow_cross_node_tp = r->allow_cross_node_tp;
    so->est = r->est;
    ap_status st = merge_fix(rq, r, err);
    if (st == AP_OK && so->fixed.ep > 1 &&
        ap_model_moe_layers_in(&r->model, 0, r->model.layers) == 0)
        st = ap_err_set(err, AP_ERR_INPUT, "ep %d: %s is a dense model (no experts to split%s)",
                        so->fixed.ep, r->model.name,
                        r->model.moe.experts > 0 ? ": no layer is MoE" : "");
    if (st == AP_OK) st = search_hetero(rq, r, err);
    if (st == AP_OK) st = ap_request_check_pins(rq, r->cluster.gpus, err);
    if (st != AP_OK) return st;
    so->top_k = rq->top.given ? (int)rq->top.v : 10;
    if (rq->tie_margin.given) so->tie_margin = rq->tie_margin.v;
    if (!(so->tie_margin >= 0 && so->tie_margin <= 1))
        return ap_err_set(err, AP_ERR_INPUT, "--tie-margin: %g is out of range [0, 1]",
                          so->tie_margin);
    if (so->top_k < 1 || so->top_k > 1000)
        return ap_err_set(err, AP_ERR_INPUT, "--top: %d is out of range [1, 1000]", so->top_k);
    r->partition = !rq->no_partition;
    r->solver = (ap_solver)rq->solver.v;
    /* the re-split is part of the search (search.h "Re-split") */
    so->resplit = r->partition;
    so->resplit_solver = (int)r->solver;
    so->threads = rq->threads.given ? (int)rq->threads.v : 0;
    if (so->threads < 0 || so->threads > 1024)
        return ap_err_set(err, AP_ERR_INPUT, "--threads: %d is out of range [1, 1024]",
                          so->threads);
    return search_batch(rq, r, err);
}

ap_status ap_request_resolve(const ap_request *rq, ap_request_mode mode, ap_resolved *r,
                             ap_err *err) {
    ap_status st;
    memset(r, 0, sizeof *r);
    if (!rq->model)
        return ap_err_set(err, AP_ERR_INPUT, "missing MODEL (a config.json, a model directory "
                          "or an autoplan model file)");
    if ((st = ap_model_load(rq->model, &r->model, err)) != AP_OK) return st;
    if ((st = ap_request_cluster(rq, &r->cluster, err)) != AP_OK) return st;
    r->allow_cross_node_tp = rq->allow_cross_node_tp;
    if ((st = resolve_pins(rq, r, err)) != AP_OK) return st;
    ap_estimate_opts_init(&r->est);
    if (rq->headroom.given) {
        if (!(rq->headroom.v >= 0) || rq->headroom.v > 1e15)
            return ap_err_set(err, AP_ERR_INPUT, "--headroom: must be between 0 and 1PB");
        r->est.headroom_bytes = rq->headroom.v;
    }
    r->est.allocator_expandable = rq->expandable_segments;
    if (rq->nccl_version &&
        (st = ap_nccl_version_parse(rq->nccl_version, "--nccl-version", &r->est.nccl_eager,
                                    err)) != AP_OK)
        return st;
    if (mode == AP_REQUEST_SEARCH) return finish_search(rq, r, err);
    if (rq->fix_given)
        return ap_err_set(err, AP_ERR_INPUT, "--fix pins a search; give the plan with --tp, "
                          "--pp, ... instead");
    return finish_estimate(rq, r, err);
}

/* ---- the estimate request of a plan, and its command line ------------------------------------- */

void ap_request_for_plan(const ap_request *base, const ap_plan *p, ap_request *out) {
    ap_request_init(out);
    out->model = base->model;
    out->cluster_file = base->cluster_file;
    out->gpu = base->gpu;
    out->gpus = base->gpus;
    out->gpus_per_node = base->gpus_per_node;
    out->nvlink_domain = base->nvlink_domain;
    out->network_bw = base->network_bw;
    out->link_bw = base->link_bw;
    out->pcie_bw = base->pcie_bw;
    out->cpu_mem = base->cpu_mem;
    out->allow_cross_node_tp = base->allow_cross_node_tp;
    out->headroom = base->headroom;
    out->expandable_segments = base->expandable_segments;
    out->nccl_version = base->nccl_version;
    out->plan = *p;
    /* estimate turns sp and overlap on by default (finish_estimate): a plan without them says so */
    out->no_sp = !p->sp;
    out->no_overlap = !(p->overlap_grad || p->overlap_param || p->overlap_tp);
    /* the stage split and per-chunk recompute counts the search chose (its re-split), so
     * `compare` ranks what `plan` ranks */
    int nch = p->pp * p->vp, split = p->nchunks == nch && nch > 1, per_chunk_rc = 0;
    for (int c = 0; c < nch && c < AP_MAX_CHUNKS; c++)
        per_chunk_rc |= p->recompute == AP_RECOMPUTE_FULL && p->stage_recompute[c] > 0;
    if (per_chunk_rc) { /* the chunks' count (finish_estimate splits uniformly without
                           --stage-layers); -1 = the plan's --recompute-layers */
        out->plan.nchunks = nch;
        for (int c = 0; c < nch; c++)
            if (out->plan.stage_recompute[c] <= 0) out->plan.stage_recompute[c] = -1;
    }
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++) {
        const ap_field *f = &t[i];
        double v = ap_field_get(f, p);
        const char *nm = f->name;
        int give;
        if (!f->flag) give = 0;
        else if (!strcmp(nm, "etp")) give = v > 1;
        else if (!strcmp(nm, "stage_layers")) give = split;
        else if (!strcmp(nm, "stage_recompute")) give = per_chunk_rc;
        else if (!strcmp(nm, "ep") || !strcmp(nm, "vp")) give = v > 1;
        else if (!strcmp(nm, "attn_impl")) give = v != AP_ATTN_AUTO;
        else if (!strcmp(nm, "recompute_layers"))
            give = p->recompute == AP_RECOMPUTE_FULL && v > 0;
        else if (!strcmp(nm, "overlap_grad")) give = !out->no_overlap;
        else if (f->kind == AP_FT_BOOL) give = (f->flags & AP_FIELD_NEGATED) ? v == 0 : v != 0;
        else if (f->kind == AP_FT_REAL) give = v > 0;
        else give = 1;
        if (give) ap_request_give(&out->plan_given, i);
    }
    out->plan.overlap_grad = !out->no_overlap;
}

/* A quantity in the first unit of `units` that reads back exactly (network bandwidth in Gb/s as
 * usually quoted, links in GB/s, sizes in GiB), else in bytes. */
typedef enum { Q_NETWORK, Q_LINK, Q_BYTES } quantity;

static void put_quantity(ap_strbuf *b, double v, quantity q) {
    static const struct { const char *unit; double scale; } units[3][4] = {
        {{"Gb/s", 1.25e8}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"B/s", 1}},
        {{"GB/s", 1e9}, {"Gb/s", 1.25e8}, {"MB/s", 1e6}, {"B/s", 1}},
        {{"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"GB", 1e9}, {"B", 1}}};
    for (int i = 0; i < 4; i++) {
        char txt[64];
        double scale = units[q][i].scale;
        if (scale == 1) snprintf(txt, sizeof txt, "%.17g%s", v, units[q][i].unit);
        else snprintf(txt, sizeof txt, "%.15g%s", v / scale, units[q][i].unit);
        double back = 0;
        ap_status st = q == Q_BYTES ? ap_parse_bytes(txt, "x", &back, NULL)
                                    : ap_parse_bandwidth(txt, "x", &back, NULL);
        if ((st == AP_OK && back == v) || scale == 1) {
            ap_strbuf_puts(b, txt);
            return;
        }
    }
}

/* A word of the command line: plain words as they are, anything else quoted for the shell. */
static void put_word(ap_strbuf *b, const char *value) {
    int plain = *value != '\0';
    for (const char *s = value; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/:=+-,", *s))
            plain = 0;
    if (plain) ap_strbuf_puts(b, value);
    else ap_text_escape(b, AP_TEXT_SH, value);
}

static void put_flag(ap_strbuf *b, const char *flag, const char *value) {
    ap_strbuf_printf(b, " --%s", flag);
    if (!value) return;
    ap_strbuf_puts(b, " ");
    put_word(b, value);
}

static void format_cluster(const ap_request *rq, ap_strbuf *b) {
    char v[64];
    if (rq->gpus.given) {
        snprintf(v, sizeof v, "%lld", (long long)rq->gpus.v);
        put_flag(b, "gpus", v);
    }
    if (rq->gpu) put_flag(b, "gpu", rq->gpu);
    if (rq->gpus_per_node.given) {
        snprintf(v, sizeof v, "%lld", (long long)rq->gpus_per_node.v);
        put_flag(b, "gpus-per-node", v);
    }
    if (rq->nvlink_domain.given) {
        snprintf(v, sizeof v, "%lld", (long long)rq->nvlink_domain.v);
        put_flag(b, "nvlink-domain", v);
    }
    const struct { const char *flag; const ap_opt_real *o; quantity kind; } q[] = {
        {"network-bw", &rq->network_bw, Q_NETWORK}, {"link-bw", &rq->link_bw, Q_LINK},
        {"pcie-bw", &rq->pcie_bw, Q_LINK}, {"cpu-mem", &rq->cpu_mem, Q_BYTES}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        if (!q[i].o->given) continue;
        ap_strbuf t = {0};
        put_quantity(&t, q[i].o->v, q[i].kind);
        put_flag(b, q[i].flag, t.buf ? t.buf : "0B");
        ap_strbuf_free(&t);
    }
    if (rq->cluster_file) put_flag(b, "cluster", rq->cluster_file);
    if (rq->allow_cross_node_tp) put_flag(b, "allow-cross-node-tp", NULL);
    if (rq->headroom.given) {
        ap_strbuf t = {0};
        put_quantity(&t, rq->headroom.v, Q_BYTES);
        put_flag(b, "headroom", t.buf ? t.buf : "0B");
        ap_strbuf_free(&t);
    }
    if (rq->expandable_segments) put_flag(b, "expandable-segments", NULL);
    if (rq->nccl_version) put_flag(b, "nccl-version", rq->nccl_version);
}

void ap_request_format(const ap_request *rq, ap_strbuf *b) {
    if (rq->model) put_word(b, rq->model);
    format_cluster(rq, b);
    int n;
    const ap_field *t = ap_plan_fields(&n);
    for (int i = 0; i < n; i++) {
        const ap_field *f = &t[i];
        if (!ap_request_row_given(rq->plan_given, i) || !f->flag) continue;
        char v[64];
        double x = ap_field_get(f, &rq->plan);
        switch (f->kind) {
        case AP_FT_BOOL: put_flag(b, f->flag, NULL); continue;
        case AP_FT_ENUM: put_flag(b, f->flag, f->enum_name((int)x)); continue;
        case AP_FT_REAL: snprintf(v, sizeof v, "%.17g", x); break;
        case AP_FT_CHUNKS: {
            ap_strbuf l = {0};
            for (int c = 0; c < (int)x; c++)
                ap_strbuf_printf(&l, "%s%d", c ? "," : "", *ap_field_chunk(f, (void *)&rq->plan, c));
            put_flag(b, f->flag, l.buf ? l.buf : "");
            ap_strbuf_free(&l);
            continue;
        }
        default: snprintf(v, sizeof v, "%.0f", x);
        }
        put_flag(b, f->flag, v);
    }
    if (rq->no_sp) put_flag(b, "no-sp", NULL);
    if (rq->no_overlap) put_flag(b, "no-overlap", NULL);
}

/* ---- the plan-cache key ------------------------------------------------------------------------ */

static const char *solver_name(int v) {
    return v >= 0 && v <= AP_SOLVER_AUTO ? ap_solver_name((ap_solver)v) : NULL;
}

#define R(nm, k) {#nm, NULL, NULL, k, offsetof(ap_resolved, nm), 0, 0, NULL, 0, 0, 0}

/* Every member of ap_search_opts but `fixed` (the plan table), the visitors (`visit`,
 * `visit_ctx`, `visit_keep`, `visit_fold`, `visit_rec_size`: callbacks, not inputs),
 * `est.calib` (keyed by value, calib_fields), `est.cache` (a memo of prices, not an input),
 * `est.ranks_only` (the stage tables' own option: a search refuses it) and `threads` (the
 * answer does not depend on it: tests/test_search.c); the stage re-split of `plan`, whose
 * algorithm is keyed by ap_search_version(). */
static const ap_field search_fields[] = {
    R(search.fix_recompute, AP_FT_BOOL),
    R(search.fix_dtype, AP_FT_BOOL),
    R(search.gbs, AP_FT_I64),
    R(search.top_k, AP_FT_INT),
    R(search.tie_margin, AP_FT_REAL),
    R(search.allow_cross_node_tp, AP_FT_BOOL),
    R(search.prune, AP_FT_BOOL),
    R(search.no_sp, AP_FT_BOOL),
    R(search.no_overlap, AP_FT_BOOL),
    R(search.max_mbs, AP_FT_INT),
    R(search.est.headroom_bytes, AP_FT_REAL),
    R(search.est.allocator_expandable, AP_FT_BOOL),
    R(search.est.nccl_eager, AP_FT_BOOL),
    R(search.est.gemm_eff_scale, AP_FT_REAL),
    R(search.est.net_bw_scale, AP_FT_REAL),
    R(search.max_evals, AP_FT_I64),
    R(search.resplit, AP_FT_BOOL),
    R(search.resplit_solver, AP_FT_INT),
    R(partition, AP_FT_BOOL),
    {"solver", NULL, NULL, AP_FT_ENUM, offsetof(ap_resolved, solver), 0, 0, solver_name,
     AP_SOLVER_AUTO + 1, 0, 0},
};

const ap_field *ap_search_fields(int *n) {
    *n = (int)(sizeof search_fields / sizeof search_fields[0]);
    return search_fields;
}

#define C(nm) {#nm, NULL, NULL, AP_FT_REAL, offsetof(ap_calib, nm), 0, 0, NULL, 0, 0, 0}
static const ap_field calib_fields[] = {
    C(gemm_eff_max), C(gemm_half_flops), C(attn_eff), C(link_eff),
    C(net_eff), C(coll_latency_s), C(step_overhead_s), C(mem_bound_eff),
};

/* A measured profile by content (the figures the kernel tables are built from). */
static uint64_t profile_fp(const ap_profile *pr) {
    uint64_t h = ap_hash64(pr->gpu, strlen(pr->gpu), 0x7072);
    for (size_t i = 0; i < pr->n; i++) {
        const ap_profile_row *w = &pr->rows[i];
        const char *text[] = {w->gpu, w->op, w->shape, w->dtype};
        for (int k = 0; k < 4; k++) h = ap_hash64(text[k], strlen(text[k]) + 1, h);
        const double v[] = {w->time_s, w->flops_per_s, w->bytes_per_s, w->bytes};
        h = ap_hash64(v, sizeof v, h);
    }
    return h;
}

void ap_search_key_text(const ap_resolved *r, const ap_cluster *c, uint64_t profiles_fp,
                        ap_strbuf *out) {
    ap_calib cal;
    if (r->search.est.calib) cal = *r->search.est.calib;
    else ap_calib_default(&c->gpu, &cal);
    ap_strbuf_printf(out, "autoplan-plan/2\nversion=%s\ncostmodel=%s\nsearch=%s\ncatalog=%s\n",
                     AP_VERSION, ap_costmodel_version(), ap_search_version(),
                     ap_gpu_catalog_version());
    /* the model's name is printed with the result, so it is part of the answer */
    ap_strbuf_puts(out, "model.name=");
    ap_text_escape(out, AP_TEXT_JSON, r->model.name);
    ap_strbuf_printf(out, "\nmodel=%016llx\ncluster=%016llx\ngpus=%d\n",
                     (unsigned long long)ap_model_fingerprint(&r->model),
                     (unsigned long long)ap_cluster_fingerprint(c), c->gpus);
    int n;
    const ap_field *t = ap_plan_fields(&n);
    ap_fields_canonical(t, n, &r->search.fixed, "fixed.", out);
    t = ap_search_fields(&n);
    ap_fields_canonical(t, n, r, "", out);
    ap_fields_canonical(calib_fields, (int)(sizeof calib_fields / sizeof calib_fields[0]), &cal,
                        "calib.", out);
    /* a measured profile in the options, by content; prebuilt kernel tables come from it */
    const ap_profile *pr = r->search.est.profile;
    ap_strbuf_printf(out, "profiles=%016llx\nest.profile=%016llx\nest.kernels=%d\n",
                     (unsigned long long)profiles_fp, (unsigned long long)(pr ? profile_fp(pr) : 0),
                     r->search.est.kernels != NULL);
}
