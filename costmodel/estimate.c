/*
 * estimate.c - the analytical cost model: per-GPU memory of every pipeline stage and the time
 * of one training step for a (model, cluster, plan).
 *
 * Structure: layer_cost() prices one layer of each kind (dense, MoE) once per plan: its
 * parameters on one GPU, its activations under each recompute level (activations.c), and its
 * forward/backward time split into compute, recompute and TP/CP/EP communication. Stages are
 * sums of layers plus the embedding (first stage) and the LM head and loss (last stage).
 * Memory then adds model states under the trainer's ZeRO/sharding (trainer.c), in-flight
 * micro-batches of the schedule, allocator rounding and device overheads. Time composes the
 * pipeline schedule, data-parallel reduction, optimizer, offload and a fixed overhead, so that
 * the reported exposed parts sum to the step time.
 *
 * Everything is O(pp * vp) per plan with no allocation: the search calls this millions of
 * times.
 */
#include "autoplan/estimate.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define GiB 1073741824.0
#define MiB 1048576.0

/* Part of every plan-cache key: bump it with every change that moves an estimate, so results
 * cached by an older cost model miss. */
const char *ap_costmodel_version(void) { return "costmodel-2"; }

/* ---- model states --------------------------------------------------------------------- */

void ap_mem_model_states(const ap_plan *p, double n, int shard, double *weights, double *grads,
                         double *optim) {
    /* ZeRO (Rajbhandari et al. 2020, Sec. 5, Fig. 1): stage 1 shards optimizer states (and
     * fp32 master weights), stage 2 also gradients, stage 3 also the parameters. Megatron's
     * distributed optimizer is stage 1: 6 + 12/d bytes/param. */
    const ap_trainer_caps *t = ap_trainer_get(p->trainer);
    double d = shard > 0 ? (double)shard : 1.0;
    double w = t->weight_bytes * n, g = t->grad_bytes * n, o = (t->master_bytes + t->optim_bytes) * n;
    if (p->zero >= 1) o /= d;
    if (p->zero >= 2) g /= d;
    if (p->zero >= 3 || (p->zero >= 2 && t->zero2_keeps_gathered)) w /= d;
    if (p->zero == 3 && t->zero3_state_bytes > 0) o = (t->zero3_state_bytes * n) / d - w - g;
    *weights = w;
    *grads = g;
    *optim = o;
}

/* ---- hardware helpers ------------------------------------------------------------------- */

typedef struct {
    const ap_model *m;
    const ap_cluster *c;
    const ap_plan *p;
    const ap_trainer_caps *tr;
    ap_calib cal;
    double peak;        /* dense FLOP/s of the GEMMs in the plan's dtype */
    double peak16;      /* 16-bit peak: attention runs in bf16/fp16 even in fp8 plans
                           (Transformer Engine's fp8 recipe quantises the linear layers) */
    double hbm;         /* effective HBM bytes/s */
    double gemm_scale;
    double net_scale;
    int sms;
} ctx;

/* Efficiency of a GEMM (M x K) * (K x N): a saturating curve in its FLOPs times the wave
 * quantisation of 128x128 output tiles over the SMs (NVIDIA "Matrix Multiplication Background
 * User's Guide", tile and wave quantization). */
static double gemm_at(const ctx *x, double peak, double M, double N, double K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    double flops = 2.0 * M * N * K;
    double eff = x->cal.gemm_eff_max * x->gemm_scale * flops / (flops + x->cal.gemm_half_flops);
    double tiles = ceil(M / 128.0) * ceil(N / 128.0);
    if (x->sms > 0) {
        double waves = ceil(tiles / x->sms);
        eff *= tiles / (waves * x->sms);
    }
    return flops / (peak * eff);
}

/* A GEMM of a transformer layer in the plan's dtype. In fp8 (Transformer Engine's recipe) the
 * 16-bit input is quantised first: read 2 bytes, write 1 byte per element of the M x K input,
 * a memory-bound pass before every fp8 GEMM (Micikevicius et al. 2022, "FP8 formats for deep
 * learning"; TE casts activations per GEMM with per-tensor scales). */
static double gemm_s(const ctx *x, double M, double N, double K) {
    double t = gemm_at(x, x->peak, M, N, K);
    if (x->p->dtype == AP_DTYPE_FP8 && t > 0) t += 3.0 * M * K / x->hbm;
    return t;
}

/* Bandwidth of a collective group of n ranks of which k sit in one NVLink domain: inside the
 * domain the peer link; across, each node's NICs are shared by the groups on it, so a group
 * gets k x (network per GPU) (nccl-tests bus bandwidth on DGX A100 reaches ~190 GB/s for a
 * full-node ring with 8 x 200 Gb/s HCAs). */
static double group_bw(const ctx *x, int n, int k) {
    double link = x->c->link_bytes_per_s * x->cal.link_eff;
    if (x->c->gpu.link == AP_LINK_NONE || link <= 0) link = x->c->pcie_bytes_per_s * 0.8;
    if (n <= k) return link;
    double net = x->c->net_bytes_per_s * x->cal.net_eff * x->net_scale * (double)k;
    return net < link ? net : link;
}

static double lat_steps(int n) { return 2.0 * ceil(log2((double)n)); }

/* Ring all-reduce of `bytes` per rank (NCCL: 2(n-1)/n of the data crosses each link). */
static double allreduce_s(const ctx *x, double bytes, int n, int k) {
    if (n <= 1 || bytes <= 0) return 0;
    return 2.0 * (n - 1) / n * bytes / group_bw(x, n, k) + lat_steps(n) * x->cal.coll_latency_s;
}
/* Reduce-scatter or all-gather: (n-1)/n of the full buffer per rank. */
static double gather_s(const ctx *x, double bytes, int n, int k) {
    if (n <= 1 || bytes <= 0) return 0;
    return (double)(n - 1) / n * bytes / group_bw(x, n, k) +
           0.5 * lat_steps(n) * x->cal.coll_latency_s;
}
/* All-to-all: each rank sends (n-1)/n of its buffer. */
static double alltoall_s(const ctx *x, double bytes, int n, int k) {
    if (n <= 1 || bytes <= 0) return 0;
    return (double)(n - 1) / n * bytes / group_bw(x, n, k) + (n - 1) * x->cal.coll_latency_s;
}

/* Ranks of a group with stride `inner` that share one NVLink domain. */
static int in_domain(const ctx *x, int n, int inner) {
    int dom = x->c->nvlink_domain > 0 ? x->c->nvlink_domain : 1;
    if (inner >= dom) return 1;
    int k = dom / inner;
    return k < n ? k : n;
}

/* FlashAttention efficiency (forward + backward, causal, head dim 128) as published, not a
 * free parameter: A100 FlashAttention-2 reaches 176-203 TFLOP/s of 312 (Dao 2023, Fig. 6);
 * Hopper with cuDNN/Transformer Engine fused attention about half of peak (Shah et al. 2024,
 * FlashAttention-3, Fig. 5: FA2 35%, FA3 61-75% forward); other GPUs 0.45. The calibrated
 * attn_eff applies to attention that materialises the scores. */
static double flash_eff(const ap_gpu *g) {
    if (strncmp(g->name, "a100", 4) == 0) return 0.60;
    if (strncmp(g->name, "h100", 4) == 0 || strncmp(g->name, "h200", 4) == 0 ||
        strncmp(g->name, "b200", 4) == 0)
        return 0.50;
    return 0.45;
}

/* ---- one layer ---------------------------------------------------------------------------- */

typedef struct {
    double params_rank;   /* non-expert parameters of the layer on one GPU */
    double expert_rank;   /* expert parameters on one GPU */
    double act[3];        /* bytes per micro-batch for none/selective/full recompute */
    double fwd_compute_s; /* GEMMs + attention + elementwise, one micro-batch */
    double bwd_compute_s;
    double attn_fwd_s;    /* attention core forward (selective recompute redoes it) */
    double tp_s;          /* exposed TP communication, forward (backward the same) */
    double tp_total_s;    /* TP communication before overlap */
    double cp_s;          /* exposed CP ring exchange, forward */
    double ep_s;          /* EP all-to-all, forward */
    double model_flops;   /* forward FLOPs per micro-batch counted for MFU (matmul params) */
    double attn_flops;    /* forward attention FLOPs (not halved) */
} layer_cost;

static void price_layer(const ctx *x, int64_t idx, layer_cost *lc) {
    const ap_model *m = x->m;
    const ap_plan *p = x->p;
    memset(lc, 0, sizeof *lc);
    ap_layer_info li;
    ap_model_layer(m, idx, &li);
    const double t = p->tp;
    const double h = (double)m->hidden;
    const double sl = (double)p->seq / p->cp;
    const double T = (double)p->mbs * sl; /* tokens through each GEMM on this rank */
    const double a_loc = (double)m->heads / t;
    const double out_t = p->sp ? t : 1.0;

    /* parameters on one GPU: matrices split by tp, KV replicated when tp > kv heads */
    double kv_params = 0;
    if (m->mla.kv_lora_rank == 0) {
        kv_params = 2.0 * h * (double)(m->kv_heads * m->head_dim);
        if (m->bias || m->qkv_bias) kv_params += 2.0 * (double)(m->kv_heads * m->head_dim);
    }
    double kv_split = m->kv_heads >= p->tp ? t : (double)m->kv_heads;
    lc->params_rank = ((double)li.attn_params - kv_params) / t + kv_params / kv_split +
                      (double)li.mlp_params / t + (double)li.norm_params +
                      (double)li.router_params + (double)li.shared_params / t;
    if (li.is_moe)
        lc->expert_rank = (double)li.expert_params * (double)(m->moe.experts / p->ep) / p->etp;

    for (int r = 0; r < 3; r++) lc->act[r] = ap_mem_layer_activation_bytes(m, p, idx, (ap_recompute)r);

    /* ---- compute, forward ---- */
    double g = 0;
    if (m->mla.kv_lora_rank > 0) {
        const ap_mla *ml = &m->mla;
        double qk = (double)(ml->qk_nope_head_dim + ml->qk_rope_head_dim);
        if (ml->q_lora_rank > 0) {
            g += gemm_s(x, T, (double)ml->q_lora_rank, h);
            g += gemm_s(x, T, a_loc * qk, (double)ml->q_lora_rank);
        } else {
            g += gemm_s(x, T, a_loc * qk, h);
        }
        g += gemm_s(x, T, (double)(ml->kv_lora_rank + ml->qk_rope_head_dim), h);
        g += gemm_s(x, T, a_loc * (double)(ml->qk_nope_head_dim + ml->v_head_dim),
                    (double)ml->kv_lora_rank);
        g += gemm_s(x, T, h, a_loc * (double)ml->v_head_dim);
    } else {
        double kvf = m->kv_heads >= p->tp ? (double)(m->kv_heads / p->tp) : 1.0;
        double qkv_n = a_loc * (double)m->head_dim + 2.0 * kvf * (double)m->head_dim;
        g += gemm_s(x, T, qkv_n, h);
        g += gemm_s(x, T, h, a_loc * (double)m->head_dim);
    }
    double ffn_elem = 0; /* activation-function bytes per token */
    if (li.is_moe) {
        const ap_moe *mo = &m->moe;
        double cf = mo->capacity_factor > 0 ? mo->capacity_factor : 1.0;
        double local_experts = (double)(mo->experts / p->ep);
        double routed = (T / out_t) * (double)mo->top_k * cf * out_t; /* tokens of the tp group
                                                                   land on this ep rank */
        double per_expert = routed / local_experts;
        double f = (double)mo->ffn_hidden / p->etp;
        double up = m->act == AP_ACT_SWIGLU ? 2.0 * f : f;
        g += gemm_s(x, T, (double)mo->experts, h); /* router */
        g += local_experts * (gemm_s(x, per_expert, up, h) + gemm_s(x, per_expert, h, f));
        ffn_elem += routed * (m->act == AP_ACT_SWIGLU ? 6.0 : 4.0) * f;
        if (mo->shared_experts > 0 && mo->shared_ffn_hidden > 0) {
            double fs = (double)mo->shared_ffn_hidden / t;
            double ups = m->act == AP_ACT_SWIGLU ? 2.0 * fs : fs;
            g += gemm_s(x, T, ups, h) + gemm_s(x, T, h, fs);
            ffn_elem += T * (m->act == AP_ACT_SWIGLU ? 6.0 : 4.0) * fs;
        }
    } else {
        double f = (double)m->ffn_hidden / t;
        double up = m->act == AP_ACT_SWIGLU ? 2.0 * f : f;
        g += gemm_s(x, T, up, h) + gemm_s(x, T, h, f);
        ffn_elem += T * (m->act == AP_ACT_SWIGLU ? 6.0 : 4.0) * f;
    }

    /* attention core: QK^T and PV, 2 * b * a * s_q * s_k * (d_qk + d_v) FLOPs */
    double dqk = (double)li.qk_head_dim, dv = (double)li.v_head_dim;
    double attn_full = 2.0 * (double)p->mbs * a_loc * sl * (double)p->seq * (dqk + dv);
    double attn_done = p->flash_attn ? 0.5 * attn_full : attn_full; /* causal skip (flash) */
    double aeff = p->flash_attn ? flash_eff(&x->c->gpu) : x->cal.attn_eff;
    double attn_s = attn_done / (x->peak16 * aeff * x->gemm_scale);

    /* elementwise bytes per token: two norms (read 2h, write 2h each) and two residual adds
     * (read 4h, write 2h each), with dropout fused into them (Megatron's bias-dropout-add: +1h
     * mask each); outside the tp region, so split only with sp */
    double out_elem = T * h * (8.0 + 12.0 + (m->dropout ? 2.0 : 0.0)) / out_t;
    double in_elem = ffn_elem;
    if (!p->flash_attn) /* scale, mask, softmax (+ dropout) on the s x s scores */
        in_elem += (double)p->mbs * a_loc * sl * (double)p->seq * (m->dropout ? 9.0 : 4.0);
    double elem_s = (out_elem + in_elem) / x->hbm;
    double attn_elem_s = p->flash_attn ? 0 : (double)p->mbs * a_loc * sl * (double)p->seq *
                                                 (m->dropout ? 9.0 : 4.0) / x->hbm;

    lc->fwd_compute_s = g + attn_s + elem_s;
    /* backward: two GEMMs per forward GEMM; FlashAttention-2 backward does 2.5x the forward
     * matmul work (5 vs 2 matmuls); elementwise about twice the traffic */
    lc->bwd_compute_s = 2.0 * g + (p->flash_attn ? 2.5 : 2.0) * attn_s + 2.0 * elem_s;
    lc->attn_fwd_s = attn_s + attn_elem_s;

    /* ---- communication, forward ---- */
    int k_tp = in_domain(x, p->tp, 1);
    double act_bytes = T * h * 2.0;
    /* Megatron TP: two all-reduces per layer forward (attention and MLP outputs); with sp an
     * all-gather + reduce-scatter pair moves the same bytes (Korthikanti 2022 Sec. 4.2.2) */
    lc->tp_total_s = 2.0 * allreduce_s(x, act_bytes, p->tp, k_tp);
    lc->tp_s = lc->tp_total_s;
    if (p->overlap_tp && p->tp > 1) {
        /* Transformer Engine's userbuffer overlap (Megatron --tp-comm-overlap) and torch's
         * async TP split each all-gather / reduce-scatter into tp chunks pipelined against the
         * GEMM that consumes or produces them (Wang et al. 2022, "Overlap communication with
         * dependent computation via decomposition"): what the layer's GEMMs cannot hide stays
         * exposed, and the first chunk never hides */
        double hide = lc->tp_total_s - g;
        double first = lc->tp_total_s / p->tp;
        lc->tp_s = hide > first ? hide : first;
    }
    if (p->cp > 1) {
        /* ring attention: cp-1 exchanges of the local K and V, overlapped with the attention
         * of the previous chunk (Megatron/TE context parallelism) */
        double kvf = m->mla.kv_lora_rank > 0 ? a_loc * (dqk + dv)
                                              : 2.0 * (m->kv_heads >= p->tp
                                                           ? (double)(m->kv_heads / p->tp)
                                                           : 1.0) * (double)m->head_dim;
        double chunk = (double)p->mbs * sl * kvf * 2.0;
        int k_cp = in_domain(x, p->cp, p->tp);
        double step = chunk / group_bw(x, p->cp, k_cp) + x->cal.coll_latency_s;
        double per_step_attn = attn_s / p->cp;
        double exposed = (p->cp - 1) * fmax(0.0, step - per_step_attn);
        lc->cp_s = exposed;
    }
    if (li.is_moe && p->ep > 1) {
        /* dispatch and combine all-to-alls of every routed token copy */
        double cf = m->moe.capacity_factor > 0 ? m->moe.capacity_factor : 1.0;
        double bytes = (T / out_t) * (double)m->moe.top_k * cf * h * 2.0;
        int k_ep = in_domain(x, p->ep, p->etp);
        lc->ep_s = 2.0 * alltoall_s(x, bytes, p->ep, k_ep);
    }

    /* model FLOPs (forward, one micro-batch on this rank): 2 x active matmul params x tokens
     * + attention (not halved for causal: Megatron's convention, Narayanan 2021 Eq. 3) */
    double active_matmul = (double)(li.active_params - li.norm_params);
    lc->model_flops = 2.0 * active_matmul / t * T;
    lc->attn_flops = attn_full;
}

/* ---- the estimate ------------------------------------------------------------------------ */

ap_status ap_estimate_plan(const ap_model *m, const ap_cluster *c, const ap_plan *pin,
                           const ap_estimate_opts *opts, ap_estimate *e, ap_err *err) {
    ap_estimate_opts dflt;
    if (!opts) {
        ap_estimate_opts_init(&dflt);
        opts = &dflt;
    }
    ap_plan pl = *pin;
    if (pl.etp < 1) pl.etp = 1;
    if (pl.dp < 1 && pl.tp > 0 && pl.pp > 0 && pl.cp > 0)
        pl.dp = c->gpus / (pl.tp * pl.pp * pl.cp);
    if (pl.mbs > 0 && pl.dp > 0 && pl.gbs % (pl.mbs * pl.dp) == 0)
        pl.grad_accum = pl.gbs / (pl.mbs * pl.dp);
    ap_status st = ap_plan_check(&pl, m, c, 1, err);
    if (st != AP_OK) return st;
    if (pl.pp > AP_MAX_STAGES)
        return ap_err_set(err, AP_ERR_INFEASIBLE, "pp %d exceeds the supported %d stages", pl.pp,
                          AP_MAX_STAGES);
    const ap_plan *p = &pl;

    ctx x;
    x.m = m;
    x.c = c;
    x.p = p;
    x.tr = ap_trainer_get(p->trainer);
    if (opts->calib) x.cal = *opts->calib;
    else ap_calib_default(&c->gpu, &x.cal);
    x.peak = c->gpu.peak_flops[p->dtype];
    x.peak16 = p->dtype == AP_DTYPE_FP8 ? (c->gpu.peak_flops[AP_DTYPE_BF16] > 0
                                               ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                               : c->gpu.peak_flops[AP_DTYPE_FP16])
                                        : x.peak;
    x.hbm = c->gpu.hbm_bytes_per_s * x.cal.mem_bound_eff;
    x.gemm_scale = opts->gemm_eff_scale > 0 ? opts->gemm_eff_scale : 1.0;
    x.net_scale = opts->net_bw_scale > 0 ? opts->net_bw_scale : 1.0;
    x.sms = c->gpu.sm_count;

    memset(e, 0, offsetof(ap_estimate, stages));
    e->worst_stage = 0;
    e->allocated_peak_bytes = e->reserved_peak_bytes = 0;
    e->plan = pl;
    e->nstages = p->pp;

    /* price the two layer kinds */
    /* a model without one of the kinds multiplies its cost by zero layers: keep it zero, not
     * stack garbage (0 x NaN is NaN) */
    layer_cost dense, moe;
    memset(&dense, 0, sizeof dense);
    memset(&moe, 0, sizeof moe);
    int64_t first_dense = -1, first_moe = -1;
    for (int64_t i = 0; i < m->layers && (first_dense < 0 || first_moe < 0); i++) {
        if (ap_model_layer_is_moe(m, i)) { if (first_moe < 0) first_moe = i; }
        else if (first_dense < 0) first_dense = i;
        if (m->moe.experts == 0) break;
    }
    if (first_dense >= 0) price_layer(&x, first_dense, &dense);
    if (first_moe >= 0) price_layer(&x, first_moe, &moe);

    const double t = p->tp;
    const double h = (double)m->hidden;
    const double V = (double)m->vocab;
    const double sl = (double)p->seq / p->cp;
    const double T = (double)p->mbs * sl;
    const double out_t = p->sp ? t : 1.0;
    const int64_t mb = p->grad_accum; /* micro-batches per step */
    const int dense_shard = p->dp * p->cp;
    int expert_shard = (int)((int64_t)p->dp * p->cp * p->tp / ((int64_t)p->ep * p->etp));
    if (expert_shard < 1) expert_shard = 1;

    /* embedding and head on the GPU (vocab-parallel over tp) */
    double emb_total = (double)ap_model_embedding_params(m);
    double vh = V * h;
    double emb_rank = vh / t + (emb_total - vh);
    double head_total = (double)ap_model_head_params(m);
    double head_rank = m->tied_embeddings ? head_total : (head_total - vh) + vh / t;
    if (m->tied_embeddings && p->pp > 1 && x.tr->tied_embedding_dup) head_rank += vh / t;

    /* per-rank layer counts and per-micro-batch times */
    double worst_dev = -1;
    double Tmax = 0, Tsum = 0;
    double crit_compute = 0, crit_recompute = 0, crit_tp = 0, crit_cp = 0, crit_ep = 0;
    double crit_tp_total = 0; /* TP communication of the slowest stage before overlap */
    double max_stage_params = 0, max_stage_shardable = 0;
    double hfu_extra_flops = 0; /* recompute forward FLOPs per step, whole model */
    double model_flops_mb = 0;  /* model FLOPs of one micro-batch through the whole model / tp */
    int rl_default = p->recompute_layers;
    double host_per_gpu_max = 0;

    for (int r = 0; r < p->pp; r++) {
        int nd = 0, nm = 0, n_rc_full = 0;
        int layers_r = 0;
        for (int k = 0; k < p->vp; k++) {
            int cidx = r + k * p->pp;
            int nl = ap_plan_chunk_layers(p, m->layers, cidx);
            int moe_here = 0;
            if (m->moe.experts > 0) {
                int f0 = ap_plan_chunk_first_layer(p, m->layers, cidx);
                for (int i = f0; i < f0 + nl; i++) moe_here += ap_model_layer_is_moe(m, i);
            }
            nm += moe_here;
            nd += nl - moe_here;
            layers_r += nl;
            int rl = p->stage_recompute[cidx] > 0 ? p->stage_recompute[cidx] : rl_default;
            if (p->recompute == AP_RECOMPUTE_FULL)
                n_rc_full += (rl > 0 && rl < nl) ? rl : nl;
        }
        const int first = (r == 0), last = (r == p->pp - 1);
        double n_layers = (double)layers_r;
        double fd = nd, fm = nm;
        /* fraction of layers recomputed fully (the rest keep all activations) */
        double frac_full = 0;
        if (p->recompute == AP_RECOMPUTE_FULL && layers_r > 0) frac_full = (double)n_rc_full / n_layers;

        /* ---- parameters on this GPU ---- */
        double p_dense = fd * dense.params_rank + fm * moe.params_rank;
        double p_exp = fm * moe.expert_rank;
        if (first) p_dense += emb_rank;
        if (last) p_dense += head_rank;

        ap_stage_mem *sm = &e->stages[r];
        memset(sm, 0, sizeof *sm);
        sm->stage = r;
        sm->layers = layers_r;
        double w1, g1, o1, w2, g2, o2;
        ap_mem_model_states(p, p_dense, dense_shard, &w1, &g1, &o1);
        ap_mem_model_states(p, p_exp, expert_shard, &w2, &g2, &o2);
        double w = w1 + w2, gr = g1 + g2, opt = o1 + o2;
        /* CPU offload (ZeRO-Offload, Ren et al. 2021): the fraction leaves the GPU */
        double host = opt * p->offload_optimizer + w * p->offload_params;
        opt *= 1.0 - p->offload_optimizer;
        if (p->zero >= 2 && p->offload_optimizer > 0) {
            /* with sharded gradients the gradient partition moves to the host as it is
             * produced (ZeRO-Offload, Ren et al. 2021 Sec. 4.1; FSDP CPUOffload) */
            host += gr * p->offload_optimizer;
            gr *= 1.0 - p->offload_optimizer;
        }
        w *= 1.0 - p->offload_params;
        sm->params_bytes = w;
        sm->grads_bytes = gr;
        sm->optimizer_bytes = opt;
        sm->host_bytes = host;
        if (host > host_per_gpu_max) host_per_gpu_max = host;

        /* ---- activations ---- */
        double act_layer_none = fd * dense.act[AP_RECOMPUTE_NONE] + fm * moe.act[AP_RECOMPUTE_NONE];
        double act_layer_sel = fd * dense.act[AP_RECOMPUTE_SELECTIVE] + fm * moe.act[AP_RECOMPUTE_SELECTIVE];
        double act_layer_full = fd * dense.act[AP_RECOMPUTE_FULL] + fm * moe.act[AP_RECOMPUTE_FULL];
        double act_mb; /* bytes one micro-batch keeps on this rank (all its chunks) */
        if (p->recompute == AP_RECOMPUTE_FULL)
            act_mb = frac_full * act_layer_full + (1.0 - frac_full) * act_layer_none;
        else if (p->recompute == AP_RECOMPUTE_SELECTIVE)
            act_mb = act_layer_sel;
        else
            act_mb = act_layer_none;
        if (first && m->dropout) act_mb += T * h / out_t; /* embedding dropout mask, 1 byte */
        if (last) act_mb += 2.0 * 2.0 * T * h / out_t;    /* final norm input + head input */

        /* in-flight micro-batches (1F1B: min(p - i, m); interleaved: Megatron's warm-up count
         * (p - i - 1) * 2 + (v - 1) * p + 1 model chunks, Narayanan 2021 Sec. 2.2) */
        double inflight;
        if (p->vp > 1) {
            double chunks = (double)(p->pp - r - 1) * 2.0 + (double)(p->vp - 1) * p->pp + 1.0;
            double cap = (double)mb * p->vp;
            if (chunks > cap) chunks = cap;
            inflight = chunks / p->vp; /* in units of whole-rank micro-batches */
        } else {
            inflight = (double)(p->pp - r) < (double)mb ? (double)(p->pp - r) : (double)mb;
        }
        sm->inflight = (int)ceil(inflight);
        double act = inflight * act_mb;
        /* working set during backward: a fully recomputed layer is rebuilt whole */
        double transient = 0;
        if (p->recompute == AP_RECOMPUTE_FULL && n_rc_full > 0) {
            double one = nm > 0 ? moe.act[AP_RECOMPUTE_NONE] : dense.act[AP_RECOMPUTE_NONE];
            transient += one;
        }
        if (last) {
            /* the loss of one micro-batch: the trainer's bytes per logit element s*b*V/t (its
             * table entry); the loss backward finishes before the last layer is rebuilt, so
             * the two working sets are not live together (docs/simulator.md) */
            double loss = x.tr->loss_bytes_per_logit * T * V / t;
            if (loss > transient) transient = loss;
        }
        sm->activations_bytes = act + transient;
        {
            double layers_only = act_mb;
            if (first && m->dropout) layers_only -= T * h / out_t;
            if (last) layers_only -= 2.0 * 2.0 * T * h / out_t;
            sm->layer_activations_bytes = inflight * layers_only;
        }

        /* ---- other: gathered parameters, fp8 copies, communication buffers ---- */
        double other = 0;
        double layer_params16 = (nm > 0 ? moe.params_rank + moe.expert_rank : dense.params_rank);
        if (x.tr->master_bytes == 0 && p->zero < 3) {
            /* fp32 parameters are the master copy: a 16-bit copy of everything is live during
             * forward and backward (FSDP MixedPrecision / autocast weight cache) */
            other += x.tr->gathered_weight_bytes * (p_dense + p_exp);
        } else if (p->zero >= 3) {
            /* ZeRO-3/FSDP: the current and the prefetched layer gathered (16-bit) */
            other += 2.0 * x.tr->gathered_weight_bytes * layer_params16;
        }
        if (p->dtype == AP_DTYPE_FP8) other += 1.0 * (p_dense + p_exp); /* fp8 weight cache (TE) */
        if (p->tp > 1 && p->sp) other += 2.0 * T * h; /* all-gathered sp input buffer */
        sm->other_bytes = other;

        sm->allocated_bytes = sm->params_bytes + sm->grads_bytes + sm->optimizer_bytes +
                              sm->activations_bytes + sm->other_bytes;
        /* PyTorch caching allocator (c10/cuda/CUDACachingAllocator.cpp): requests round to
         * 512 B, large ones are carved from 20 MiB+ segments and freed blocks of different
         * sizes fragment them; model-state buffers are few large allocations (~1% rounding),
         * activations many short-lived ones (documented 8% fragmentation, 3% with
         * expandable_segments). */
        double dyn = sm->activations_bytes + sm->other_bytes;
        double frag = opts->allocator_expandable ? 0.03 : 0.08;
        sm->reserved_bytes = sm->allocated_bytes + 0.01 * (sm->params_bytes + sm->grads_bytes +
                                                           sm->optimizer_bytes) + frag * dyn;
        /* device: CUDA context (~0.5 GiB with lazy module loading, CUDA 12), NCCL buffers
         * (NCCL_BUFFSIZE 4 MiB x channels per communicator, ~64 MiB each for tp/dp/pp/cp/ep
         * groups in use), cuBLAS workspaces (32 MiB on Hopper, 4 MiB x streams otherwise) */
        int comms = 1 + (p->tp > 1) + (p->pp > 1) + (p->cp > 1) + (p->ep > 1);
        sm->device_bytes = sm->reserved_bytes + 0.5 * GiB + comms * 64.0 * MiB + 32.0 * MiB;

        if (sm->device_bytes > worst_dev) {
            worst_dev = sm->device_bytes;
            e->worst_stage = r;
        }
        if (sm->allocated_bytes > e->allocated_peak_bytes) e->allocated_peak_bytes = sm->allocated_bytes;
        if (sm->reserved_bytes > e->reserved_peak_bytes) e->reserved_peak_bytes = sm->reserved_bytes;

        /* ---- time of one micro-batch on this rank ---- */
        double fwd_c = fd * dense.fwd_compute_s + fm * moe.fwd_compute_s;
        double bwd_c = fd * dense.bwd_compute_s + fm * moe.bwd_compute_s;
        double tp_f = fd * dense.tp_s + fm * moe.tp_s;
        double cp_f = fd * dense.cp_s + fm * moe.cp_s;
        double ep_f = fm * moe.ep_s;
        if (last) {
            /* the output layer is not a Transformer Engine linear: 16-bit even in fp8 plans */
            double head_f = gemm_at(&x, x.peak16, T, V / t, h);
            /* logits written, upcast, softmax read/written: ~ the loss working set, twice */
            double loss_bytes = T * V / t * (2.0 + x.tr->loss_bytes_per_logit);
            fwd_c += head_f + loss_bytes / x.hbm;
            bwd_c += 2.0 * head_f + loss_bytes / x.hbm;
            if (p->tp > 1) tp_f += allreduce_s(&x, 3.0 * T * 4.0, p->tp, in_domain(&x, p->tp, 1));
        }
        if (first) fwd_c += T * h * 4.0 / x.hbm; /* embedding gather */
        double rec = 0;
        if (p->recompute == AP_RECOMPUTE_FULL) {
            /* the fraction of layers recomputed runs its forward again, with its TP comm */
            double per_layer_f = (fd * dense.fwd_compute_s + fm * moe.fwd_compute_s) /
                                 (n_layers > 0 ? n_layers : 1);
            double per_layer_tp = (fd * dense.tp_s + fm * moe.tp_s) / (n_layers > 0 ? n_layers : 1);
            double per_layer_ep = (fm * moe.ep_s) / (n_layers > 0 ? n_layers : 1);
            rec = n_rc_full * (per_layer_f + per_layer_tp + per_layer_ep);
        } else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
            rec = fd * dense.attn_fwd_s + fm * moe.attn_fwd_s;
        }
        /* ZeRO-3/FSDP: all-gather of the stage's parameters in forward and backward and a
         * reduce-scatter of gradients, every micro-batch; overlapped with compute when the
         * trainer prefetches (exposed part only) */
        double z3 = 0;
        if (p->zero >= 3) {
            int k_dp = in_domain(&x, dense_shard, p->tp);
            double bytes16 = x.tr->gathered_weight_bytes * (p_dense + p_exp);
            double ag = gather_s(&x, bytes16, dense_shard, k_dp);
            double rs = gather_s(&x, x.tr->grad_bytes * (p_dense + p_exp), dense_shard, k_dp);
            double comm = 2.0 * ag + rs;
            double comp = fwd_c + bwd_c + rec;
            z3 = p->overlap_param ? fmax(0.0, comm - comp) + ag / (n_layers > 0 ? n_layers : 1)
                                  : comm;
        }
        double stage_f = fwd_c + tp_f + cp_f + ep_f;
        double stage_b = bwd_c + rec + tp_f + 2.0 * cp_f + ep_f + z3;
        e->time.stage_fwd_s[r] = stage_f;
        e->time.stage_bwd_s[r] = stage_b;
        double Ti = stage_f + stage_b;
        Tsum += Ti;
        if (Ti >= Tmax) {
            Tmax = Ti;
            crit_compute = fwd_c + bwd_c;
            crit_recompute = rec;
            crit_tp = 2.0 * tp_f;
            crit_tp_total = 2.0 * (tp_f - fd * dense.tp_s - fm * moe.tp_s +
                                   fd * dense.tp_total_s + fm * moe.tp_total_s);
            crit_cp = 3.0 * cp_f;
            crit_ep = 2.0 * ep_f;
            e->time.dp_comm_s = z3; /* per micro-batch ZeRO-3 traffic, scaled below */
        }
        double sp_params = p_dense + p_exp;
        if (sp_params > max_stage_params) max_stage_params = sp_params;
        if (p_dense > max_stage_shardable) max_stage_shardable = p_dense;

        /* FLOPs for MFU/HFU (per micro-batch, this rank's share) */
        double mf = fd * (dense.model_flops + dense.attn_flops) +
                    fm * (moe.model_flops + moe.attn_flops);
        if (last) mf += 2.0 * T * h * V / t;
        model_flops_mb += mf;
        if (p->recompute == AP_RECOMPUTE_FULL) {
            double per_layer = (fd * (dense.model_flops + dense.attn_flops) +
                                fm * (moe.model_flops + moe.attn_flops)) /
                               (n_layers > 0 ? n_layers : 1);
            hfu_extra_flops += n_rc_full * per_layer;
        } else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
            hfu_extra_flops += fd * dense.attn_flops + fm * moe.attn_flops;
        }
    }

    /* ---- pipeline schedule ---- */
    double p2p = 0;
    if (p->pp > 1) {
        /* one activation (and one gradient) per micro-batch per boundary, split across the
         * tp ranks and re-gathered over NVLink (the scatter/gather optimisation, Narayanan 2021
         * Sec. 4.1); the pp group has stride tp*cp*dp, so it crosses nodes unless the whole
         * model fits one domain */
        double bytes = T * h * 2.0 / t;
        int inner = p->tp * p->cp * p->dp;
        double bw = inner >= c->nvlink_domain
                        ? c->net_bytes_per_s * x.cal.net_eff * x.net_scale
                        : c->link_bytes_per_s * x.cal.link_eff;
        double one = bytes / bw + x.cal.coll_latency_s;
        /* on the critical path: each of the (m + p - 1) schedule slots sends forward and
         * backward; interleaving multiplies the boundaries crossed by v */
        p2p = 2.0 * one * ((double)mb + p->pp - 1) * (p->vp > 1 ? (double)p->vp : 1.0);
    }
    /* 1F1B: (m-1) x slowest stage + one pass through all stages (issue formula); interleaved
     * divides the fill/drain by v (Narayanan 2021 Sec. 2.2.2) */
    double pipe;
    if (p->pp == 1) pipe = (double)mb * Tmax;
    else pipe = (double)mb * Tmax + (Tsum - Tmax) / p->vp;
    double work = (double)mb * Tmax;
    double bubble = pipe - work;

    ap_time *tm = &e->time;
    double z3_total = tm->dp_comm_s * (double)mb;
    tm->compute_s = crit_compute * mb;
    tm->recompute_s = crit_recompute * mb;
    tm->tp_comm_s = crit_tp * mb;
    tm->cp_comm_s = crit_cp * mb;
    tm->ep_comm_s = crit_ep * mb;
    tm->bubble_s = bubble;
    tm->pp_comm_s = p2p;
    tm->tp_comm_total_s = crit_tp_total * mb;

    /* ---- data-parallel gradient reduction (the stage with the most parameters) ---- */
    int k_dp = in_domain(&x, dense_shard, p->tp);
    double dp_total = 0;
    double gbytes = x.tr->grad_bytes * max_stage_params;
    if (p->dtype == AP_DTYPE_FP16 && x.tr->grad_bytes > 2) gbytes = 2.0 * max_stage_params;
    if (dense_shard > 1) {
        if (p->zero == 0) {
            dp_total = allreduce_s(&x, gbytes, dense_shard, k_dp);
        } else if (p->zero <= 2) {
            /* reduce-scatter gradients, all-gather updated 16-bit parameters */
            dp_total = gather_s(&x, gbytes, dense_shard, k_dp) +
                       gather_s(&x, x.tr->gathered_weight_bytes * max_stage_params, dense_shard,
                                k_dp);
            if (p->zero == 2 && (x.tr->grad_reduce_per_mb_zero_mask & 4u))
                dp_total = gather_s(&x, gbytes, dense_shard, k_dp) * (double)mb +
                           gather_s(&x, x.tr->gathered_weight_bytes * max_stage_params,
                                    dense_shard, k_dp);
        }
    }
    double dp_exposed = dp_total;
    if (dp_total > 0 && p->overlap_grad && x.tr->overlap_grad) {
        /* overlapped with the backward of the last micro-batch(es); the last bucket (the
         * first layers) cannot hide: at least 1/8 of one reduction stays exposed */
        double hide = p->zero == 2 && (x.tr->grad_reduce_per_mb_zero_mask & 4u)
                          ? (double)mb * tm->stage_bwd_s[e->worst_stage]
                          : tm->stage_bwd_s[e->worst_stage];
        dp_exposed = fmax(dp_total - hide, dp_total / (8.0 * (p->zero == 2 ? (double)mb : 1.0)));
    }
    tm->dp_comm_total_s = dp_total + z3_total;
    tm->dp_comm_s = dp_exposed + z3_total;

    /* ---- optimizer step: Adam is memory-bound, ~32 bytes per parameter touched on the GPU
     * (fp32 master r/w 8, m and v r/w 16, grad 4, 16-bit param write 2 + 2) ---- */
    double local_params = p->zero >= 1 ? max_stage_shardable / dense_shard : max_stage_params;
    double on_gpu = local_params * (1.0 - p->offload_optimizer);
    tm->optimizer_s = on_gpu * 32.0 / x.hbm;

    /* ---- offload: PCIe transfers and CPU Adam (ZeRO-Offload, Ren et al. 2021 Sec. 4) ---- */
    double off = 0;
    if (p->offload_optimizer > 0) {
        double n_off = local_params * p->offload_optimizer;
        int share = c->gpus_per_pcie_switch > 0 ? c->gpus_per_pcie_switch : 1;
        double pcie = c->pcie_bytes_per_s * 0.8 / share; /* shared switch uplink */
        int gpn = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
        double host_bw = c->host_mem_bytes_per_s > 0 ? c->host_mem_bytes_per_s : 100e9;
        /* CPU Adam (DeepSpeed's vectorised CPU-Adam, Ren et al. 2021 Sec. 4.2) is bound by host
         * DRAM: per parameter it reads and writes the fp32 weight, m and v (24 bytes), reads the
         * 16-bit gradient and writes its fp32 copy (6), and writes the 16-bit weight it uploads
         * (2): 32 bytes; a two-socket server streams at ~70% of its DRAM peak (STREAM triad,
         * McCalpin); the node's GPUs share it */
        double cpu_adam = n_off * 32.0 * gpn / (0.7 * host_bw);
        /* gradient copies (2 bytes/param down) overlap the backward; the CPU step and the
         * parameter upload (2 bytes/param up) do not */
        double grad_x = n_off * 2.0 / pcie;
        off = fmax(0.0, grad_x - tm->stage_bwd_s[e->worst_stage]) + cpu_adam + n_off * 2.0 / pcie;
    }
    if (p->offload_params > 0) {
        int share = c->gpus_per_pcie_switch > 0 ? c->gpus_per_pcie_switch : 1;
        double pcie = c->pcie_bytes_per_s * 0.8 / share;
        double bytes = 2.0 * max_stage_params * p->offload_params / (p->zero >= 3 ? dense_shard : 1);
        double per_mb = 2.0 * bytes / pcie; /* fetched for forward and for backward */
        double comp = tm->stage_fwd_s[e->worst_stage] + tm->stage_bwd_s[e->worst_stage];
        off += (double)mb * fmax(0.0, per_mb - comp);
    }
    tm->offload_s = off;
    tm->overhead_s = x.cal.step_overhead_s;
    tm->step_s = pipe + p2p + tm->dp_comm_s - z3_total /* z3 already inside pipe */ +
                 tm->optimizer_s + tm->offload_s + tm->overhead_s;
    {
        /* parts: compute+recompute+tp+cp+ep+z3 (= work), bubble, pp, dp exposed, optimizer,
         * offload, overhead */
        double sum = tm->compute_s + tm->recompute_s + tm->tp_comm_s + tm->cp_comm_s +
                     tm->ep_comm_s + tm->bubble_s + tm->pp_comm_s + tm->dp_comm_s +
                     tm->optimizer_s + tm->offload_s + tm->overhead_s;
        /* rounding of the per-stage split can leave a tiny residue; fold it into compute */
        tm->compute_s += tm->step_s - sum;
    }

    /* ---- throughput ---- */
    double tokens = (double)p->gbs * (double)p->seq;
    ap_throughput *th = &e->tp;
    th->tokens_per_s = tokens / tm->step_s;
    /* model FLOPs: 3 x forward (forward + backward 2x), all micro-batches, all ranks */
    double fwd_model = model_flops_mb * (double)mb * p->tp * p->cp * p->dp;
    th->model_flops_per_step = 3.0 * fwd_model;
    th->hw_flops_per_step = th->model_flops_per_step +
                            hfu_extra_flops * (double)mb * p->tp * p->cp * p->dp;
    double gpus = (double)c->gpus;
    th->model_tflops_per_gpu = th->model_flops_per_step / tm->step_s / gpus / 1e12;
    th->hw_tflops_per_gpu = th->hw_flops_per_step / tm->step_s / gpus / 1e12;
    double ref_peak = c->gpu.peak_flops[AP_DTYPE_BF16] > 0 ? c->gpu.peak_flops[AP_DTYPE_BF16]
                                                           : c->gpu.peak_flops[AP_DTYPE_FP16];
    th->mfu = th->model_tflops_per_gpu * 1e12 / ref_peak;
    th->hfu = th->hw_tflops_per_gpu * 1e12 / ref_peak;

    /* ---- memory verdict ---- */
    e->capacity_bytes = c->gpu.mem_bytes;
    e->headroom_bytes = opts->headroom_bytes;
    e->device_peak_bytes = worst_dev;
    e->peak_bytes = worst_dev;
    int gpn = c->gpus_per_node < c->gpus ? c->gpus_per_node : c->gpus;
    e->host_bytes_per_node = host_per_gpu_max * gpn;
    e->host_capacity_bytes = c->cpu_mem_bytes;
    e->host_fits = e->host_bytes_per_node <= 0 || e->host_bytes_per_node <= 0.9 * c->cpu_mem_bytes;
    e->fits = (worst_dev + opts->headroom_bytes <= e->capacity_bytes) && e->host_fits;
    return AP_OK;
}
