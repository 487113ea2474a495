/*
 * sim.c - the memory-planning simulator (sim.h, docs/simulator.md).
 *
 * For each pipeline rank it writes the operations of one steady-state training iteration in the
 * plan's schedule and the allocations and frees each causes, then replays them through an
 * allocator model (alloc.c). Structure:
 *   1. sizes   - bytes of every tensor of a layer from the model shapes (ap_model_layer) and the
 *                plan's splits (tp, sp, cp, ep/etp); model-state bytes from the trainer's bytes
 *                per parameter (ap_trainer_get). Nothing is taken from the analytical estimate.
 *   2. events  - schedule (Megatron 1F1B / interleaved, Narayanan et al. 2021), per micro-batch
 *                forward and backward of each layer tensor by tensor, full or selective
 *                recompute, ZeRO-3/FSDP gathers and releases, gradient reduction at the
 *                trainer's cadence, offload transfers, optimizer step, zero_grad.
 *   3. replay  - allocator curves (allocated, reserved, per category), the peak, the live set at
 *                the peak, the first operation over the memory budget.
 *
 * Activation tensors follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
 * Transformer Models", Sec. 4.1 and Table 2): per layer the first norm's input (2sbh), the QKV
 * GEMM input (2sbh), Q,K,V (6sbh for MHA), softmax output (2as^2b), its dropout mask (as^2b) and
 * dropout output (2as^2b), the output projection input (2sbh) and its dropout mask (sbh), the
 * second norm's input (2sbh), the MLP input (2sbh), the activation input (8sbh) and output
 * (8sbh) and the dropout mask (sbh): 34sbh + 5as^2b. Architecture differences are applied per
 * tensor: GQA/MLA change the QKV width, SwiGLU saves gate+up (2f) and the down-projection input
 * (f), flash attention (Dao 2023) saves the fp32 log-sum-exp instead of the s^2 terms, no dropout
 * drops the masks, tp divides the head/intermediate tensors, sp (and cp) the rest.
 *
 * It does not model: cross-stream reuse, NCCL's internal buffers beyond a fixed overhead,
 * prefetching of the next ZeRO-3 layer (overlap_param), vocabulary padding, the norms' fp32
 * mean/rstd (4 bytes per row, < 0.1% of a layer).
 */
#include "autoplan/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)

/* ---- names ------------------------------------------------------------------------------ */

static const char *const cat_names[AP_SIM_NCAT] = {"params", "grads", "optimizer",
                                                   "activations", "other"};

static const char *const kind_names[AP_SIM_NKINDS] = {
    "weights", "weights_fp8", "grads", "master_weights", "optimizer_states",
    "gathered_weights", "unsharded_grads", "grad_reduce_buffer", "grad_accum_buffer",
    "optimizer_temp",
    "input", "sp_gather", "ln1_out", "qkv", "attn_scores", "softmax", "softmax_dropout_mask",
    "softmax_dropout_out", "flash_lse", "attn_context", "attn_proj_out", "attn_dropout_mask",
    "ln2_in", "ln2_out", "fc1_out", "act_out", "fc2_out", "mlp_dropout_mask", "router_probs",
    "moe_dispatched", "expert_fc1_out", "expert_act_out", "expert_out", "shared_fc1_out",
    "shared_act_out", "recomputed_layer_out",
    "embed_dropout_mask", "final_norm_out", "logits", "logits_fp32", "log_probs", "stage_out"};

static const char *const op_names[AP_SIM_NOPS] = {
    "model-state setup", "forward", "backward", "receive activation",
    "send activation", "receive gradient", "send gradient", "gather", "forward", "recompute",
    "backward", "forward", "backward", "gradient reduction", "offload",
    "optimizer step", "zero_grad"};

const char *ap_sim_category_name(int cat) {
    return cat >= 0 && cat < AP_SIM_NCAT ? cat_names[cat] : "?";
}
const char *ap_sim_kind_name(int kind) {
    return kind >= 0 && kind < AP_SIM_NKINDS ? kind_names[kind] : "?";
}
const char *ap_sim_op_name(int type) {
    return type >= 0 && type < AP_SIM_NOPS ? op_names[type] : "?";
}

/* ---- options and the result ------------------------------------------------------------- */

void ap_sim_opts_init(ap_sim_opts *o) {
    memset(o, 0, sizeof *o);
    o->allocator = AP_ALLOC_CACHING;
    o->headroom_bytes = 2.0 * GIB;
    o->device_overhead_bytes = -1;
    o->record_curves = 1;
}

typedef struct rank_store {
    ap_sim_rank r;
    ap_sim_op *ops;
    ap_sim_tensor *ts;
    ap_sim_event *ev;
    int64_t *acurve, *rcurve, *opk_cat, *ope_cat;
    int32_t *opk_ev;
    int32_t *live;
} rank_store;

struct ap_sim {
    ap_model m;
    ap_plan p;
    ap_sim_opts o;
    double capacity_bytes, budget_bytes, overhead_bytes;
    int nranks;
    rank_store *ranks;
};

int ap_sim_nranks(const ap_sim *s) { return s->nranks; }
const ap_sim_rank *ap_sim_rank_at(const ap_sim *s, int i) {
    return i >= 0 && i < s->nranks ? &s->ranks[i].r : NULL;
}
double ap_sim_capacity_bytes(const ap_sim *s) { return s->capacity_bytes; }
double ap_sim_budget_bytes(const ap_sim *s) { return s->budget_bytes; }
double ap_sim_overhead_bytes(const ap_sim *s) { return s->overhead_bytes; }
const ap_plan *ap_sim_plan(const ap_sim *s) { return &s->p; }
const ap_model *ap_sim_model(const ap_sim *s) { return &s->m; }
const ap_sim_opts *ap_sim_options(const ap_sim *s) { return &s->o; }

int ap_sim_worst_rank(const ap_sim *s) {
    int w = 0;
    for (int i = 1; i < s->nranks; i++)
        if (s->ranks[i].r.device_peak_bytes > s->ranks[w].r.device_peak_bytes) w = i;
    return w;
}

void ap_sim_free(ap_sim *s) {
    if (!s) return;
    for (int i = 0; i < s->nranks; i++) {
        rank_store *rs = &s->ranks[i];
        free(rs->ops);
        free(rs->ts);
        free(rs->ev);
        free(rs->acurve);
        free(rs->rcurve);
        free(rs->opk_cat);
        free(rs->ope_cat);
        free(rs->opk_ev);
        free(rs->live);
    }
    free(s->ranks);
    free(s);
}

double ap_sim_device_overhead_bytes(const ap_plan *p) {
    /* CUDA context with lazy module loading: ~500 MiB on A100/H100 as reported by nvidia-smi for
     * an idle PyTorch process (CUDA_MODULE_LOADING=LAZY, CUDA 11.7+). cuBLAS workspace: 32 MiB
     * per handle on Hopper (cuBLAS docs, "cublasSetWorkspace": 32 MiB recommended for sm90);
     * one handle per stream, two streams (compute, communication). NCCL: NCCL_BUFFSIZE = 4 MiB
     * per channel and peer connection (NCCL docs, environment variables); a ring has two
     * connections, 16 channels on NVLink: 2 x 16 x 4 MiB = 128 MiB per communicator. */
    double b = 500.0 * MIB + 2 * 32.0 * MIB;
    int comms = 0;
    if (p->tp > 1) comms++;
    if (p->pp > 1) comms++;
    if (p->dp * p->cp > 1) comms++;
    if (p->cp > 1) comms++;
    if (p->ep > 1) comms++;
    return b + comms * 128.0 * MIB;
}

/* ---- generation context ----------------------------------------------------------------- */

typedef struct lsz { /* bytes of one layer's tensors for one micro-batch on this rank */
    int is_moe;
    int64_t x;          /* residual stream (layer input/output), sp-split */
    int64_t ln;         /* norm output saved (sp-split) */
    int64_t gather;     /* sp all-gather of a norm output, full sequence (0 without sp) */
    int64_t qkv, ctx, lse, softmax, smask, proj, hmask, fc1, act, fc2;
    int64_t router, disp, efc1, eact, eout, sfc1, sact;
    int64_t p_dense, p_expert; /* parameters held on this rank (tp/ep split, before ZeRO) */
    int64_t p_linear;          /* GEMM weights (fp8 copies) */
} lsz;

typedef struct unit { /* a block that owns parameters: a layer, the embedding or the head */
    int32_t layer;
    int64_t p_dense, p_expert, p_linear;
    int32_t t_weight, t_grad, t_gathered, t_accum;
    int gather_refs;  /* micro-batches holding the gathered copy (zero2_keeps_gathered) */
    int bwd_done;     /* micro-batches whose backward went through this unit */
} unit;

typedef struct gen {
    const ap_model *m;
    const ap_plan *p;
    const ap_trainer_caps *caps;
    int stage, pp, vp;
    int64_t L, mbs_n; /* micro-batches per iteration */
    /* chunks of this rank */
    int ck_first[AP_MAX_CHUNKS], ck_n[AP_MAX_CHUNKS], ck_base[AP_MAX_CHUNKS], ck_rc[AP_MAX_CHUNKS];
    int nloc;
    lsz *sz;        /* per local layer */
    unit *units;    /* per local layer, then embedding, then head */
    int nunits, u_embed, u_head;
    int32_t *saved; /* [mb][local layer][kind] */
    int32_t *ends;  /* [mb][4]: embed mask, final norm out, logits saved, head input */
    /* growing arrays */
    ap_sim_op *ops;
    int nops, capops;
    ap_sim_tensor *ts;
    int nts, capts;
    ap_sim_event *ev;
    int nev, capev;
    int nomem;
    /* bytes common to all layers */
    int64_t xb, hmask_b, logits_b;
    /* trainer behaviour */
    int lazy_grads, torch_loss, gather_mode, gather_keep, fetch_frac_mode;
    int grads_sharded, reduce_per_mb, foreach_adam;
    double D_dense, D_expert;
} gen;

#define SV(g, mb, loc, k) ((g)->saved[(((int64_t)(mb) * (g)->nloc + (loc)) * AP_SIM_NKINDS) + (k)])

static void op_begin(gen *g, int type, int chunk, int32_t layer, int32_t mb) {
    if (g->nops == g->capops) {
        int nc = g->capops ? g->capops * 2 : 1024;
        ap_sim_op *n = realloc(g->ops, (size_t)nc * sizeof *n);
        if (!n) {
            g->nomem = 1;
            return;
        }
        g->ops = n;
        g->capops = nc;
    }
    if (g->nops > 0) g->ops[g->nops - 1].ev_end = g->nev;
    ap_sim_op *o = &g->ops[g->nops++];
    o->type = (int16_t)type;
    o->chunk = (int16_t)chunk;
    o->layer = layer;
    o->mb = mb;
    o->ev_begin = o->ev_end = g->nev;
}

static int push_event(gen *g, int32_t tensor, int is_free) {
    if (g->nev == g->capev) {
        int nc = g->capev ? g->capev * 2 : 4096;
        ap_sim_event *n = realloc(g->ev, (size_t)nc * sizeof *n);
        if (!n) {
            g->nomem = 1;
            return -1;
        }
        g->ev = n;
        g->capev = nc;
    }
    ap_sim_event *e = &g->ev[g->nev++];
    e->tensor = tensor;
    e->op = g->nops - 1;
    e->is_free = is_free;
    return 0;
}

/* Allocate a tensor; returns its id, or -1 for an empty tensor (nothing to allocate). */
static int32_t T(gen *g, int kind, int cat, int32_t layer, int32_t mb, int64_t bytes,
                 int is_grad) {
    if (bytes <= 0 || g->nomem) return -1;
    if (g->nts == g->capts) {
        int nc = g->capts ? g->capts * 2 : 4096;
        ap_sim_tensor *n = realloc(g->ts, (size_t)nc * sizeof *n);
        if (!n) {
            g->nomem = 1;
            return -1;
        }
        g->ts = n;
        g->capts = nc;
    }
    int32_t id = g->nts++;
    ap_sim_tensor *t = &g->ts[id];
    memset(t, 0, sizeof *t);
    t->bytes = bytes;
    t->layer = layer;
    t->mb = mb;
    t->kind = (int16_t)kind;
    t->cat = (int8_t)cat;
    t->is_grad = (int8_t)is_grad;
    t->persistent = g->nops > 0 && g->ops[g->nops - 1].type == AP_SIM_OP_SETUP;
    t->alloc_ev = g->nev;
    t->free_ev = -1;
    push_event(g, id, 0);
    return id;
}

static void F(gen *g, int32_t id) {
    if (id < 0 || g->nomem) return;
    g->ts[id].free_ev = g->nev;
    push_event(g, id, 1);
}

#define ACT AP_SIM_CAT_ACTIVATIONS
#define OTH AP_SIM_CAT_OTHER

static int64_t cdiv(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }

/* ---- sizes ------------------------------------------------------------------------------- */

static void layer_sizes(const gen *g, int64_t layer, lsz *z) {
    const ap_model *m = g->m;
    const ap_plan *p = g->p;
    ap_layer_info li;
    ap_model_layer(m, layer, &li);
    memset(z, 0, sizeof *z);
    z->is_moe = li.is_moe;
    int64_t t = p->tp > 0 ? p->tp : 1, cp = p->cp > 0 ? p->cp : 1;
    int64_t s = p->seq, b = p->mbs, h = m->hidden;
    int64_t e = 2; /* activations are 16-bit (bf16/fp16; fp8 runs keep bf16 activations here) */
    int sp = p->sp && t > 1;
    int64_t n = cdiv(s, cp) * b;          /* tokens of this rank's sequence shard */
    int64_t ns = sp ? cdiv(n, t) : n;     /* rows of the tensors sp splits (Korthikanti 4.2.2) */
    int64_t a_loc = cdiv(m->heads, t);
    z->x = ns * h * e;
    z->ln = ns * h * e;
    z->gather = sp ? n * h * e : 0;
    z->qkv = n * cdiv(li.qkv_out, t) * e;
    z->ctx = n * cdiv(li.attn_out_in, t) * e;
    if (p->flash_attn) {
        /* FlashAttention-2 saves the fp32 softmax log-sum-exp, [b, a, s] (Dao 2023, Alg. 1) */
        z->lse = b * a_loc * cdiv(s, cp) * 4;
    } else {
        /* softmax over the local queries x all keys: 2as^2b, its mask as^2b (Korthikanti) */
        int64_t elems = b * a_loc * cdiv(s, cp) * s;
        z->softmax = elems * e;
        z->smask = m->dropout ? elems : 0;
    }
    z->proj = n * h * e;            /* output projection partial sum before all-reduce/RS */
    z->hmask = m->dropout ? ns * h : 0; /* bool dropout masks, 1 byte per element */
    int swiglu = m->act == AP_ACT_SWIGLU;
    int64_t f = li.mlp_ffn;
    if (!li.is_moe) {
        z->fc1 = n * cdiv((swiglu ? 2 : 1) * f, t) * e;
        z->act = n * cdiv(f, t) * e;
        z->p_dense = cdiv(li.attn_params + li.mlp_params, t) + li.norm_params;
        z->p_linear = cdiv(li.attn_params + li.mlp_params, t);
    } else {
        const ap_moe *mo = &m->moe;
        int64_t etp = p->etp > 0 ? p->etp : 1, ep = p->ep > 0 ? p->ep : 1;
        /* tokens routed to this rank's experts: every local token top_k times (dropless,
         * balanced), times the capacity factor when one is set (Fedus et al. 2021) */
        double cf = mo->capacity_factor > 0 ? mo->capacity_factor : 1.0;
        int64_t nk = (int64_t)ceil((double)ns * (double)mo->top_k * cf);
        z->router = ns * mo->experts * 4; /* fp32 router probabilities (Megatron router) */
        z->disp = nk * h * e;
        z->efc1 = nk * cdiv((swiglu ? 2 : 1) * f, etp) * e;
        z->eact = nk * cdiv(f, etp) * e;
        z->eout = nk * h * e;
        if (mo->shared_experts > 0 && mo->shared_ffn_hidden > 0) {
            z->sfc1 = n * cdiv((swiglu ? 2 : 1) * mo->shared_ffn_hidden, t) * e;
            z->sact = n * cdiv(mo->shared_ffn_hidden, t) * e;
        }
        z->p_dense = cdiv(li.attn_params + li.shared_params, t) + li.norm_params + li.router_params;
        z->p_expert = cdiv(mo->experts, ep) * cdiv(li.expert_params, etp);
        z->p_linear = cdiv(li.attn_params + li.shared_params, t) + z->p_expert;
    }
    z->fc2 = n * h * e;
}

/* ---- model states ------------------------------------------------------------------------ */

static int64_t bytes_of(double per_param, double params) {
    double v = per_param * params;
    return v > 0 ? (int64_t)llround(v) : 0;
}

/* parameters of unit u after ZeRO sharding of kind `shard` */
static double shard_params(const gen *g, const unit *u, int shard) {
    if (!shard) return (double)(u->p_dense + u->p_expert);
    return (double)u->p_dense / g->D_dense + (double)u->p_expert / g->D_expert;
}

static void setup_states(gen *g) {
    const ap_trainer_caps *c = g->caps;
    const ap_plan *p = g->p;
    int z = p->zero;
    double off_o = p->offload_optimizer, off_p = p->offload_params;
    op_begin(g, AP_SIM_OP_SETUP, -1, AP_SIM_LAYER_NONE, -1);
    for (int i = 0; i < g->nunits; i++) {
        unit *u = &g->units[i];
        int w_shard = z >= 3 || (z == 2 && c->zero2_keeps_gathered);
        u->t_weight = T(g, AP_SIM_T_WEIGHT, AP_SIM_CAT_PARAMS, u->layer, -1,
                        bytes_of(c->weight_bytes * (1 - off_p), shard_params(g, u, w_shard)), 0);
        if (p->dtype == AP_DTYPE_FP8)
            /* Transformer Engine keeps an fp8 copy of every GEMM weight (1 byte/param) */
            T(g, AP_SIM_T_WEIGHT_FP8, AP_SIM_CAT_PARAMS, u->layer, -1, u->p_linear, 0);
        if (!g->lazy_grads)
            u->t_grad = T(g, AP_SIM_T_GRAD, AP_SIM_CAT_GRADS, u->layer, -1,
                          bytes_of(c->grad_bytes, shard_params(g, u, z >= 2)), 0);
        T(g, AP_SIM_T_MASTER, AP_SIM_CAT_OPTIMIZER, u->layer, -1,
          bytes_of(c->master_bytes * (1 - off_o), shard_params(g, u, z >= 1)), 0);
        T(g, AP_SIM_T_OPTIM, AP_SIM_CAT_OPTIMIZER, u->layer, -1,
          bytes_of(c->optim_bytes * (1 - off_o), shard_params(g, u, z >= 1)), 0);
    }
}

/* Bytes of the 16-bit copy gathered (ZeRO-3/FSDP) or fetched from host (parameter offload). */
static int64_t gathered_bytes(const gen *g, const unit *u) {
    double full = (double)(u->p_dense + u->p_expert);
    if (g->gather_mode) return bytes_of(g->caps->gathered_weight_bytes, full);
    if (g->fetch_frac_mode) return bytes_of(g->caps->weight_bytes * g->p->offload_params, full);
    return 0;
}

static void unit_pre(gen *g, unit *u, int chunk, int32_t mb, int fwd) {
    if (!g->gather_mode && !g->fetch_frac_mode) return;
    if (u->t_gathered >= 0) {
        if (fwd) u->gather_refs++;
        return;
    }
    op_begin(g, AP_SIM_OP_GATHER, chunk, u->layer, mb);
    u->t_gathered = T(g, AP_SIM_T_WEIGHT_GATHERED, OTH, u->layer, mb, gathered_bytes(g, u), 0);
    u->gather_refs = 1;
}

/* After forward (fwd=1) or backward of micro-batch mb: ZeRO-3 reshards after each pass; FSDP
 * SHARD_GRAD_OP (zero2_keeps_gathered) keeps the copy until no micro-batch needs it. */
static void unit_post(gen *g, unit *u, int fwd) {
    if (u->t_gathered < 0) return;
    if (g->gather_keep) {
        if (fwd) return; /* the forward's reference is dropped by the same micro-batch's bwd */
        if (--u->gather_refs > 0) return;
    }
    F(g, u->t_gathered);
    u->t_gathered = -1;
    u->gather_refs = 0;
}

/* Gradient handling at the backward of unit u for micro-batch mb (inside its BWD op). */
static int32_t grads_begin(gen *g, unit *u, int32_t mb) {
    const ap_trainer_caps *c = g->caps;
    if (g->lazy_grads && u->t_grad < 0)
        /* torch .grad is created by the first backward and kept until zero_grad */
        u->t_grad = T(g, AP_SIM_T_GRAD, AP_SIM_CAT_GRADS, u->layer, -1,
                      bytes_of(c->grad_bytes, shard_params(g, u, g->grads_sharded)), 0);
    if (!g->grads_sharded) return -1;
    double full = (double)(u->p_dense + u->p_expert);
    if (g->reduce_per_mb)
        /* the unsharded gradient of this block, in the compute dtype, before reduce-scatter */
        return T(g, AP_SIM_T_GRAD_UNSHARDED, OTH, u->layer, mb,
                 bytes_of(c->gathered_weight_bytes, full), 0);
    if (u->t_accum < 0)
        u->t_accum = T(g, AP_SIM_T_GRAD_ACCUM, OTH, u->layer, -1, bytes_of(c->grad_bytes, full), 0);
    return -1;
}

static void grads_end(gen *g, unit *u, int chunk, int32_t mb, int32_t unsharded) {
    const ap_trainer_caps *c = g->caps;
    u->bwd_done++;
    int last = u->bwd_done == g->mbs_n;
    double full = (double)(u->p_dense + u->p_expert);
    if (g->grads_sharded && g->reduce_per_mb) {
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
        int32_t rs = -1;
        if (c->grad_bytes > c->gathered_weight_bytes) /* reduce in fp32 (FSDP reduce_dtype) */
            rs = T(g, AP_SIM_T_GRAD_REDUCE, OTH, u->layer, mb, bytes_of(c->grad_bytes, full), 0);
        F(g, unsharded);
        F(g, rs);
    } else if (g->grads_sharded) {
        if (last) {
            op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
            F(g, u->t_accum);
            u->t_accum = -1;
        }
    } else if (last && g->p->overlap_grad) {
        /* all-reduce / reduce-scatter in place in the gradient buffer, bucket by bucket as the
           last micro-batch's backward goes (Megatron DDP overlap_grad_reduce) */
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, chunk, u->layer, mb);
    }
}

/* ---- one transformer layer --------------------------------------------------------------- */

enum { MODE_SAVE = 0, MODE_DISCARD, MODE_RECOMPUTE };

typedef struct keep {
    int mode;
    int32_t pending;
} keep;

/* Save tensor `id` under kind k for backward; in DISCARD mode (forward of a fully recomputed
 * layer, run without autograd) intermediates die as soon as the next one exists. */
static void save(gen *g, keep *kp, int32_t *slot, int32_t id) {
    if (kp->mode != MODE_DISCARD) {
        *slot = id;
        return;
    }
    F(g, kp->pending);
    kp->pending = id;
    *slot = -1;
}

/* Forward of global layer `layer` (local index loc) for micro-batch mb. `x` is the saved input
 * (already allocated). Returns the output tensor (the next layer's input). */
static int32_t layer_fwd(gen *g, int loc, int32_t layer, int32_t mb, int mode, int selective,
                         int32_t x) {
    const ap_model *m = g->m;
    const lsz *z = &g->sz[loc];
    int32_t *sv = &SV(g, mb, loc, 0);
    int32_t d_sv[AP_SIM_NKINDS];
    if (mode == MODE_DISCARD) sv = d_sv;
    keep kp = {mode, -1};
    int32_t tmp, gth;
    int dropout = m->dropout;

    sv[AP_SIM_T_INPUT] = x;
    SV(g, mb, loc, AP_SIM_T_INPUT) = x; /* the checkpoint a recomputed layer restarts from */
    /* attention block */
    int32_t ln1 = T(g, AP_SIM_T_LN1_OUT, ACT, layer, mb, z->ln, 0);
    gth = T(g, AP_SIM_T_SP_GATHER, OTH, layer, mb, z->gather, 0);
    int32_t qkv = T(g, AP_SIM_T_QKV, ACT, layer, mb, z->qkv, 0);
    F(g, gth);
    save(g, &kp, &sv[AP_SIM_T_LN1_OUT], ln1);
    save(g, &kp, &sv[AP_SIM_T_QKV], qkv);
    int32_t ctx;
    if (g->p->flash_attn) {
        ctx = T(g, AP_SIM_T_ATTN_CTX, ACT, layer, mb, z->ctx, 0);
        int32_t lse = T(g, AP_SIM_T_LSE, ACT, layer, mb, z->lse, 0);
        if (selective) {
            F(g, lse); /* checkpointed core attention: recomputed in backward */
            lse = -1;
        }
        save(g, &kp, &sv[AP_SIM_T_LSE], lse);
    } else {
        /* QK^T scores, then the fused scale-mask-softmax output (Megatron fused kernels) */
        int32_t sc = T(g, AP_SIM_T_SCORES, OTH, layer, mb, z->softmax, 0);
        int32_t sm = T(g, AP_SIM_T_SOFTMAX, ACT, layer, mb, z->softmax, 0);
        F(g, sc);
        int32_t mk = -1, dr = -1;
        if (dropout) {
            mk = T(g, AP_SIM_T_SOFTMAX_MASK, ACT, layer, mb, z->smask, 0);
            dr = T(g, AP_SIM_T_SOFTMAX_DROP, ACT, layer, mb, z->softmax, 0);
        }
        ctx = T(g, AP_SIM_T_ATTN_CTX, ACT, layer, mb, z->ctx, 0);
        if (selective) {
            F(g, sm);
            F(g, mk);
            F(g, dr);
            sm = mk = dr = -1;
        }
        save(g, &kp, &sv[AP_SIM_T_SOFTMAX], sm);
        save(g, &kp, &sv[AP_SIM_T_SOFTMAX_MASK], mk);
        save(g, &kp, &sv[AP_SIM_T_SOFTMAX_DROP], dr);
    }
    save(g, &kp, &sv[AP_SIM_T_ATTN_CTX], ctx);
    tmp = T(g, AP_SIM_T_PROJ_OUT, OTH, layer, mb, z->proj, 0);
    int32_t amask = dropout ? T(g, AP_SIM_T_ATTN_MASK, ACT, layer, mb, z->hmask, 0) : -1;
    save(g, &kp, &sv[AP_SIM_T_ATTN_MASK], amask);
    int32_t x2 = -1;
    if (!m->parallel_attn) {
        x2 = T(g, AP_SIM_T_LN2_IN, ACT, layer, mb, z->x, 0); /* x + dropout(proj) */
        F(g, tmp);
        tmp = -1;
    }
    /* MLP block: parallel attention (GPT-J/NeoX/Falcon) feeds the MLP from the layer input */
    int32_t ln2;
    if (m->parallel_attn && m->norms_per_layer < 2) {
        ln2 = -1; /* one shared norm: the MLP reads ln1's output */
    } else {
        ln2 = T(g, AP_SIM_T_LN2_OUT, ACT, layer, mb, z->ln, 0);
    }
    gth = T(g, AP_SIM_T_SP_GATHER, OTH, layer, mb, z->gather, 0);
    if (!z->is_moe) {
        int32_t fc1 = T(g, AP_SIM_T_FC1_OUT, ACT, layer, mb, z->fc1, 0);
        F(g, gth);
        int32_t act = T(g, AP_SIM_T_ACT_OUT, ACT, layer, mb, z->act, 0);
        save(g, &kp, &sv[AP_SIM_T_LN2_OUT], ln2);
        save(g, &kp, &sv[AP_SIM_T_FC1_OUT], fc1);
        save(g, &kp, &sv[AP_SIM_T_ACT_OUT], act);
    } else {
        F(g, gth);
        int32_t r = T(g, AP_SIM_T_ROUTER_PROBS, ACT, layer, mb, z->router, 0);
        int32_t d = T(g, AP_SIM_T_MOE_DISPATCHED, ACT, layer, mb, z->disp, 0);
        int32_t f1 = T(g, AP_SIM_T_EXPERT_FC1, ACT, layer, mb, z->efc1, 0);
        int32_t ea = T(g, AP_SIM_T_EXPERT_ACT, ACT, layer, mb, z->eact, 0);
        int32_t eo = T(g, AP_SIM_T_EXPERT_OUT, ACT, layer, mb, z->eout, 0);
        int32_t s1 = T(g, AP_SIM_T_SHARED_FC1, ACT, layer, mb, z->sfc1, 0);
        int32_t sa = T(g, AP_SIM_T_SHARED_ACT, ACT, layer, mb, z->sact, 0);
        save(g, &kp, &sv[AP_SIM_T_LN2_OUT], ln2);
        save(g, &kp, &sv[AP_SIM_T_ROUTER_PROBS], r);
        save(g, &kp, &sv[AP_SIM_T_MOE_DISPATCHED], d);
        save(g, &kp, &sv[AP_SIM_T_EXPERT_FC1], f1);
        save(g, &kp, &sv[AP_SIM_T_EXPERT_ACT], ea);
        save(g, &kp, &sv[AP_SIM_T_EXPERT_OUT], eo);
        save(g, &kp, &sv[AP_SIM_T_SHARED_FC1], s1);
        save(g, &kp, &sv[AP_SIM_T_SHARED_ACT], sa);
    }
    int32_t fc2 = T(g, AP_SIM_T_FC2_OUT, OTH, layer, mb, z->fc2, 0);
    int32_t mmask = dropout ? T(g, AP_SIM_T_MLP_MASK, ACT, layer, mb, z->hmask, 0) : -1;
    save(g, &kp, &sv[AP_SIM_T_MLP_MASK], mmask);
    int kind_out = mode == MODE_RECOMPUTE ? AP_SIM_T_LAYER_OUT : AP_SIM_T_INPUT;
    int32_t out = T(g, kind_out, ACT, mode == MODE_RECOMPUTE ? layer : layer + 1, mb, z->x, 0);
    F(g, fc2);
    F(g, tmp);
    if (mode == MODE_DISCARD) {
        F(g, kp.pending);
        F(g, x2);
        x2 = -1;
    }
    sv[AP_SIM_T_LN2_IN] = x2;
    return out;
}

/* Backward of one layer; g_out is the gradient of its output (freed here). Frees the layer's
 * saved tensors as their consumers' backward runs. Returns the gradient of its input. */
static int32_t layer_bwd(gen *g, int loc, int32_t layer, int32_t mb, int selective,
                         int32_t g_out) {
    const lsz *z = &g->sz[loc];
    int32_t *sv = &SV(g, mb, loc, 0);
    int32_t gx = g_out;
    int G = 1;
    /* MLP: dropout, down projection, activation, up projection, norm */
    F(g, sv[AP_SIM_T_MLP_MASK]);
    int32_t gf2 = T(g, AP_SIM_T_FC2_OUT, OTH, layer, mb, z->fc2, G);
    if (!z->is_moe) {
        int32_t ga = T(g, AP_SIM_T_ACT_OUT, OTH, layer, mb, z->act, G);
        F(g, gf2);
        F(g, sv[AP_SIM_T_ACT_OUT]);
        int32_t gf1 = T(g, AP_SIM_T_FC1_OUT, OTH, layer, mb, z->fc1, G);
        F(g, ga);
        F(g, sv[AP_SIM_T_FC1_OUT]);
        int32_t gl2 = T(g, AP_SIM_T_LN2_OUT, OTH, layer, mb, z->gather ? z->gather : z->ln, G);
        F(g, gf1);
        F(g, sv[AP_SIM_T_LN2_OUT]);
        gf2 = gl2;
    } else {
        int32_t gs = T(g, AP_SIM_T_SHARED_ACT, OTH, layer, mb, z->sact, G);
        F(g, sv[AP_SIM_T_SHARED_ACT]);
        int32_t gs1 = T(g, AP_SIM_T_SHARED_FC1, OTH, layer, mb, z->sfc1, G);
        F(g, gs);
        F(g, sv[AP_SIM_T_SHARED_FC1]);
        F(g, gs1);
        int32_t geo = T(g, AP_SIM_T_EXPERT_OUT, OTH, layer, mb, z->eout, G);
        F(g, sv[AP_SIM_T_EXPERT_OUT]);
        F(g, sv[AP_SIM_T_ROUTER_PROBS]);
        int32_t gea = T(g, AP_SIM_T_EXPERT_ACT, OTH, layer, mb, z->eact, G);
        F(g, geo);
        F(g, sv[AP_SIM_T_EXPERT_ACT]);
        int32_t ge1 = T(g, AP_SIM_T_EXPERT_FC1, OTH, layer, mb, z->efc1, G);
        F(g, gea);
        F(g, sv[AP_SIM_T_EXPERT_FC1]);
        int32_t gd = T(g, AP_SIM_T_MOE_DISPATCHED, OTH, layer, mb, z->disp, G);
        F(g, ge1);
        F(g, sv[AP_SIM_T_MOE_DISPATCHED]);
        int32_t gl2 = T(g, AP_SIM_T_LN2_OUT, OTH, layer, mb, z->gather ? z->gather : z->ln, G);
        F(g, gd);
        F(g, sv[AP_SIM_T_LN2_OUT]);
        F(g, gf2);
        gf2 = gl2;
    }
    if (!g->m->parallel_attn) {
        /* second norm backward; the residual adds into its output gradient */
        int32_t gx2 = T(g, AP_SIM_T_LN2_IN, OTH, layer, mb, z->x, G);
        F(g, gf2);
        F(g, sv[AP_SIM_T_LN2_IN]);
        F(g, gx);
        gx = gx2;
        gf2 = -1;
    }
    /* attention: dropout, output projection, core attention, QKV projection, first norm */
    F(g, sv[AP_SIM_T_ATTN_MASK]);
    int32_t gp = T(g, AP_SIM_T_PROJ_OUT, OTH, layer, mb, z->gather ? z->gather : z->x, G);
    int32_t gctx = T(g, AP_SIM_T_ATTN_CTX, OTH, layer, mb, z->ctx, G);
    F(g, gp);
    int32_t gqkv;
    if (g->p->flash_attn) {
        int32_t lse = sv[AP_SIM_T_LSE];
        if (selective) { /* recompute the checkpointed core attention's forward */
            lse = T(g, AP_SIM_T_LSE, ACT, layer, mb, z->lse, 0);
        }
        gqkv = T(g, AP_SIM_T_QKV, OTH, layer, mb, z->qkv, G);
        F(g, lse);
    } else {
        int32_t sm = sv[AP_SIM_T_SOFTMAX], mk = sv[AP_SIM_T_SOFTMAX_MASK],
                dr = sv[AP_SIM_T_SOFTMAX_DROP];
        if (selective) {
            sm = T(g, AP_SIM_T_SOFTMAX, ACT, layer, mb, z->softmax, 0);
            if (g->m->dropout) {
                mk = T(g, AP_SIM_T_SOFTMAX_MASK, ACT, layer, mb, z->smask, 0);
                dr = T(g, AP_SIM_T_SOFTMAX_DROP, ACT, layer, mb, z->softmax, 0);
            }
        }
        int32_t gsm = T(g, AP_SIM_T_SOFTMAX, OTH, layer, mb, z->softmax, G);
        F(g, dr);
        F(g, mk);
        gqkv = T(g, AP_SIM_T_QKV, OTH, layer, mb, z->qkv, G);
        F(g, sm);
        F(g, gsm);
    }
    F(g, gctx);
    F(g, sv[AP_SIM_T_ATTN_CTX]);
    int32_t gl1 = T(g, AP_SIM_T_LN1_OUT, OTH, layer, mb, z->gather ? z->gather : z->ln, G);
    F(g, gqkv);
    F(g, sv[AP_SIM_T_QKV]);
    if (gf2 >= 0) F(g, gf2); /* parallel attention: the MLP branch joins here */
    int32_t gin = T(g, AP_SIM_T_INPUT, OTH, layer, mb, z->x, G);
    F(g, gl1);
    F(g, sv[AP_SIM_T_LN1_OUT]);
    F(g, sv[AP_SIM_T_INPUT]);
    F(g, gx);
    for (int k = 0; k < AP_SIM_NKINDS; k++) sv[k] = -1;
    return gin;
}

/* ---- chunks: embedding, layers, head ------------------------------------------------------ */

#define END_EMASK 0
#define END_FNORM 1
#define END_LOSS 2
#define END_HIN 3

static int chunk_recomputes(const gen *g, int k, int i) { /* layer i of chunk k */
    if (g->p->recompute != AP_RECOMPUTE_FULL) return 0;
    int K = g->ck_rc[k];
    return K <= 0 || i < K;
}

static void chunk_fwd(gen *g, int k, int32_t mb) {
    const ap_model *m = g->m;
    const ap_plan *p = g->p;
    int c = k * g->pp + g->stage, nchunks = g->pp * g->vp;
    int32_t *ends = &g->ends[(int64_t)mb * 4];
    int32_t x;
    int64_t xb = g->xb;
    if (c == 0) {
        unit *ue = &g->units[g->u_embed];
        unit_pre(g, ue, k, mb, 1);
        op_begin(g, AP_SIM_OP_EMBED_FWD, k, AP_SIM_LAYER_EMBED, mb);
        x = T(g, AP_SIM_T_INPUT, ACT, g->ck_first[k], mb, xb, 0);
        ends[END_EMASK] = m->dropout ? T(g, AP_SIM_T_EMBED_MASK, ACT, AP_SIM_LAYER_EMBED, mb,
                                         g->hmask_b, 0)
                                     : -1;
        unit_post(g, ue, 1);
    } else {
        op_begin(g, AP_SIM_OP_RECV_FWD, k, g->ck_first[k], mb);
        x = T(g, AP_SIM_T_INPUT, ACT, g->ck_first[k], mb, xb, 0);
    }
    for (int i = 0; i < g->ck_n[k]; i++) {
        int32_t layer = g->ck_first[k] + i;
        int loc = g->ck_base[k] + i;
        unit *u = &g->units[loc];
        unit_pre(g, u, k, mb, 1);
        op_begin(g, AP_SIM_OP_FWD, k, layer, mb);
        int rc = chunk_recomputes(g, k, i);
        x = layer_fwd(g, loc, layer, mb, rc ? MODE_DISCARD : MODE_SAVE,
                      p->recompute == AP_RECOMPUTE_SELECTIVE, x);
        unit_post(g, u, 1);
    }
    if (c == nchunks - 1) {
        unit *uh = &g->units[g->u_head];
        unit_pre(g, uh, k, mb, 1);
        op_begin(g, AP_SIM_OP_HEAD_FWD, k, (int32_t)g->L, mb);
        ends[END_HIN] = x;
        int32_t fn = T(g, AP_SIM_T_FINAL_NORM_OUT, ACT, (int32_t)g->L, mb, g->sz[0].ln, 0);
        int32_t gth = T(g, AP_SIM_T_SP_GATHER, OTH, (int32_t)g->L, mb, g->sz[0].gather, 0);
        int32_t lg = T(g, AP_SIM_T_LOGITS, ACT, (int32_t)g->L, mb, g->logits_b, 0);
        F(g, gth);
        int32_t keep = lg;
        if (g->caps->loss_fp32) {
            /* logits.float() for the loss */
            int32_t lf = T(g, AP_SIM_T_LOGITS_FP32, ACT, (int32_t)g->L, mb, g->logits_b * 2, 0);
            F(g, lg);
            keep = lf;
            if (g->torch_loss) {
                /* torch F.cross_entropy: log_softmax saves its fp32 output */
                int32_t lp = T(g, AP_SIM_T_LOG_PROBS, ACT, (int32_t)g->L, mb, g->logits_b * 2, 0);
                F(g, lf);
                keep = lp;
            }
            /* Megatron's vocab-parallel cross entropy works in place on the fp32 logits and
               keeps them (megatron/core/tensor_parallel/cross_entropy.py) */
        }
        ends[END_FNORM] = fn;
        ends[END_LOSS] = keep;
        unit_post(g, uh, 1);
    } else {
        op_begin(g, AP_SIM_OP_SEND_FWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        /* the stage output is sent and freed (Megatron deallocate_output_tensor) */
        if (x >= 0) g->ts[x].kind = AP_SIM_T_STAGE_OUT;
        F(g, x);
    }
}

static void chunk_bwd(gen *g, int k, int32_t mb) {
    const ap_plan *p = g->p;
    int c = k * g->pp + g->stage, nchunks = g->pp * g->vp;
    int32_t *ends = &g->ends[(int64_t)mb * 4];
    int32_t gx;
    int64_t xb = g->xb;
    int32_t Lh = (int32_t)g->L;
    if (c == nchunks - 1) {
        unit *uh = &g->units[g->u_head];
        unit_pre(g, uh, k, mb, 0);
        op_begin(g, AP_SIM_OP_HEAD_BWD, k, Lh, mb);
        int32_t un = grads_begin(g, uh, mb);
        int32_t lossbuf = ends[END_LOSS];
        if (g->torch_loss) {
            if (g->caps->loss_fp32) {
                /* nll backward, log_softmax backward (fp32), then the cast to the compute dtype */
                int32_t g1 = T(g, AP_SIM_T_LOG_PROBS, OTH, Lh, mb, g->logits_b * 2, 1);
                int32_t g2 = T(g, AP_SIM_T_LOGITS_FP32, OTH, Lh, mb, g->logits_b * 2, 1);
                F(g, g1);
                F(g, lossbuf);
                lossbuf = g2;
            }
        }
        /* Megatron: the gradient is written in place into the saved fp32 softmax */
        int32_t gl = T(g, AP_SIM_T_LOGITS, OTH, Lh, mb, g->logits_b, 1);
        F(g, lossbuf);
        int32_t gfn = T(g, AP_SIM_T_FINAL_NORM_OUT, OTH, Lh, mb,
                        g->sz[0].gather ? g->sz[0].gather : g->sz[0].ln, 1);
        F(g, gl);
        F(g, ends[END_FNORM]);
        gx = T(g, AP_SIM_T_INPUT, OTH, Lh, mb, xb, 1);
        F(g, gfn);
        F(g, ends[END_HIN]);
        ends[END_FNORM] = ends[END_LOSS] = ends[END_HIN] = -1;
        grads_end(g, uh, k, mb, un);
        unit_post(g, uh, 0);
    } else {
        op_begin(g, AP_SIM_OP_RECV_BWD, k, g->ck_first[k] + g->ck_n[k] - 1, mb);
        gx = T(g, AP_SIM_T_STAGE_OUT, OTH, g->ck_first[k] + g->ck_n[k], mb, xb, 1);
    }
    for (int i = g->ck_n[k] - 1; i >= 0; i--) {
        int32_t layer = g->ck_first[k] + i;
        int loc = g->ck_base[k] + i;
        unit *u = &g->units[loc];
        unit_pre(g, u, k, mb, 0);
        if (chunk_recomputes(g, k, i)) {
            op_begin(g, AP_SIM_OP_RECOMPUTE, k, layer, mb);
            int32_t x = SV(g, mb, loc, AP_SIM_T_INPUT);
            int32_t out = layer_fwd(g, loc, layer, mb, MODE_RECOMPUTE, 0, x);
            F(g, out);
        }
        op_begin(g, AP_SIM_OP_BWD, k, layer, mb);
        int32_t un = grads_begin(g, u, mb);
        gx = layer_bwd(g, loc, layer, mb, p->recompute == AP_RECOMPUTE_SELECTIVE &&
                                               !chunk_recomputes(g, k, i), gx);
        grads_end(g, u, k, mb, un);
        unit_post(g, u, 0);
    }
    if (c == 0) {
        unit *ue = &g->units[g->u_embed];
        unit_pre(g, ue, k, mb, 0);
        op_begin(g, AP_SIM_OP_EMBED_BWD, k, AP_SIM_LAYER_EMBED, mb);
        int32_t un = grads_begin(g, ue, mb);
        F(g, ends[END_EMASK]);
        ends[END_EMASK] = -1;
        F(g, gx);
        grads_end(g, ue, k, mb, un);
        unit_post(g, ue, 0);
    } else {
        op_begin(g, AP_SIM_OP_SEND_BWD, k, g->ck_first[k], mb);
        F(g, gx);
    }
}

/* Megatron's schedules (megatron/core/pipeline_parallel/schedules.py): warm-up forwards, steady
 * one-forward-one-backward, cool-down backwards. Interleaved: micro-batch k of the rank's
 * sequence runs model chunk (k mod pv) / p forward and v-1 minus that backward, on micro-batch
 * (k / pv) * p + k mod p (get_model_chunk_id, Narayanan et al. 2021 Sec. 2.2). */
static void schedule(gen *g) {
    int64_t m = g->mbs_n;
    int pp = g->pp, vp = g->vp, i = g->stage;
    int64_t total = m * vp, warm;
    if (vp == 1) {
        warm = pp - i - 1;
    } else if (m == pp) {
        warm = total;
    } else {
        warm = (int64_t)(pp - i - 1) * 2 + (int64_t)(vp - 1) * pp;
    }
    if (warm > total) warm = total;
    int64_t steady = total - warm;
    int64_t group = (int64_t)pp * vp;
    for (int64_t f = 0, b = 0; f < total || b < total;) {
        int do_fwd;
        if (f < warm) do_fwd = 1;
        else if (f < total && f - warm == b) do_fwd = 1; /* steady: F then B */
        else do_fwd = 0;
        (void)steady;
        int64_t kk = do_fwd ? f : b;
        int64_t in_group = kk % group;
        int chunk = (int)(in_group / pp);
        if (!do_fwd) chunk = vp - 1 - chunk;
        int32_t mb = (int32_t)((kk / group) * pp + kk % pp);
        if (vp == 1) mb = (int32_t)kk;
        if (do_fwd) {
            chunk_fwd(g, chunk, mb);
            f++;
        } else {
            chunk_bwd(g, chunk, mb);
            b++;
        }
        if (g->nomem) return;
    }
}

static void finish_step(gen *g) {
    const ap_plan *p = g->p;
    const ap_trainer_caps *c = g->caps;
    if (!g->grads_sharded && !p->overlap_grad) {
        op_begin(g, AP_SIM_OP_GRAD_REDUCE, -1, AP_SIM_LAYER_NONE, -1);
    }
    if (p->offload_optimizer > 0 || p->offload_params > 0) {
        /* ZeRO-Offload: gradients to host, CPU Adam, updated 16-bit parameters copied back into
           their device buffers (Ren et al. 2021); host staging buffers are pinned host memory */
        op_begin(g, AP_SIM_OP_OFFLOAD, -1, AP_SIM_LAYER_NONE, -1);
    }
    op_begin(g, AP_SIM_OP_OPTIMIZER, -1, AP_SIM_LAYER_NONE, -1);
    if (g->foreach_adam) {
        /* torch.optim.AdamW foreach (the default): _multi_tensor_adam computes
           torch._foreach_sqrt(exp_avg_sqs) over all local states at once, one fp32 temporary
           of the parameter shard's size (torch/optim/adam.py) */
        double params = 0;
        for (int i = 0; i < g->nunits; i++) params += shard_params(g, &g->units[i], p->zero >= 1);
        int32_t t = T(g, AP_SIM_T_OPTIM_TEMP, OTH, AP_SIM_LAYER_NONE, -1,
                      bytes_of(4.0 * (1 - p->offload_optimizer), params), 0);
        F(g, t);
    }
    (void)c;
    if (g->lazy_grads) {
        op_begin(g, AP_SIM_OP_ZERO_GRAD, -1, AP_SIM_LAYER_NONE, -1);
        for (int i = 0; i < g->nunits; i++) {
            F(g, g->units[i].t_grad);
            g->units[i].t_grad = -1;
        }
    }
    if (g->nops > 0) g->ops[g->nops - 1].ev_end = g->nev;
}

/* ---- replay --------------------------------------------------------------------------- */

typedef struct live_ent {
    int64_t bytes;
    int32_t id;
} live_ent;

static int cmp_live(const void *a, const void *b) {
    const live_ent *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static ap_status replay(ap_sim *s, rank_store *rs, ap_err *err) {
    ap_sim_rank *r = &rs->r;
    ap_alloc_opts ao;
    ap_alloc_opts_init(&ao);
    ao.mode = s->o.allocator;
    ao.expandable_segments = s->o.expandable_segments;
    if (s->capacity_bytes > 0) {
        double lim = s->capacity_bytes - s->overhead_bytes;
        ao.limit_bytes = lim > 0 ? (int64_t)lim : 1;
    }
    ap_alloc *a = ap_alloc_new(&ao);
    int32_t *blocks = malloc((size_t)(r->ntensors > 0 ? r->ntensors : 1) * sizeof *blocks);
    if (!a || !blocks) {
        ap_alloc_free(a);
        free(blocks);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory replaying stage %d",
                          r->stage);
    }
    if (s->o.record_curves && r->nevents > 0) {
        rs->acurve = malloc((size_t)r->nevents * sizeof *rs->acurve);
        rs->rcurve = malloc((size_t)r->nevents * sizeof *rs->rcurve);
        rs->opk_cat = calloc((size_t)r->nops * AP_SIM_NCAT, sizeof *rs->opk_cat);
        rs->ope_cat = calloc((size_t)r->nops * AP_SIM_NCAT, sizeof *rs->ope_cat);
        rs->opk_ev = malloc((size_t)r->nops * sizeof *rs->opk_ev);
        if (!rs->acurve || !rs->rcurve || !rs->opk_cat || !rs->ope_cat || !rs->opk_ev) {
            ap_alloc_free(a);
            free(blocks);
            return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory for curves");
        }
        for (int i = 0; i < r->nops; i++) rs->opk_ev[i] = -1;
    }
    int64_t cat[AP_SIM_NCAT] = {0};
    int64_t live = 0, apeak = -1, rpeak = 0;
    int peak_ev = -1;
    int setup_end = r->nops > 0 && rs->ops[0].type == AP_SIM_OP_SETUP ? rs->ops[0].ev_end : 0;
    r->over_event = -1;
    r->over_op = -1;
    double budget = s->budget_bytes;
    int64_t reserved = 0;
    int64_t alloc_at_rpeak = 0;
    for (int i = 0; i < r->nevents; i++) {
        const ap_sim_event *e = &rs->ev[i];
        ap_sim_tensor *t = &rs->ts[e->tensor];
        if (!e->is_free) {
            int64_t addr = 0;
            ap_status stt = ap_alloc_malloc(a, t->bytes, &blocks[e->tensor], &addr, NULL);
            if (stt != AP_OK) {
                ap_alloc_free(a);
                free(blocks);
                return ap_err_set(err, stt, "simulator: allocator failed on stage %d", r->stage);
            }
            t->addr = addr;
            live += t->bytes;
            cat[t->cat] += t->bytes;
        } else {
            if (ap_alloc_release(a, blocks[e->tensor]) != AP_OK) {
                ap_alloc_free(a);
                free(blocks);
                return ap_err_set(err, AP_ERR_INTERNAL,
                                  "simulator: stage %d frees tensor %d that is not allocated",
                                  r->stage, e->tensor);
            }
            live -= t->bytes;
            cat[t->cat] -= t->bytes;
        }
        reserved = ap_alloc_reserved_bytes(a);
        if (live > apeak) {
            apeak = live;
            peak_ev = i;
        }
        if (reserved > rpeak) {
            rpeak = reserved;
            alloc_at_rpeak = live;
        }
        if (budget > 0 && r->over_event < 0 && (double)reserved + s->overhead_bytes > budget) {
            r->over_event = i;
            r->over_op = e->op;
        }
        if (rs->acurve) {
            rs->acurve[i] = live;
            rs->rcurve[i] = reserved;
            int o = e->op;
            if (rs->opk_ev[o] < 0 || live > rs->acurve[rs->opk_ev[o]]) {
                rs->opk_ev[o] = i;
                memcpy(&rs->opk_cat[(int64_t)o * AP_SIM_NCAT], cat, sizeof cat);
            }
            if (i + 1 == rs->ops[o].ev_end)
                memcpy(&rs->ope_cat[(int64_t)o * AP_SIM_NCAT], cat, sizeof cat);
        }
        if (i + 1 == setup_end) r->baseline_bytes = live;
    }
    ap_alloc_get_stats(a, &r->alloc);
    ap_alloc_free(a);
    free(blocks);
    r->end_bytes = live;
    r->allocated_peak_bytes = apeak < 0 ? 0 : apeak;
    r->reserved_peak_bytes = rpeak;
    r->device_peak_bytes = rpeak + (int64_t)s->overhead_bytes;
    r->peak_event = peak_ev;
    r->peak_op = peak_ev >= 0 ? rs->ev[peak_ev].op : -1;
    r->fragmentation = rpeak > 0 ? 1.0 - (double)alloc_at_rpeak / (double)rpeak : 0;
    /* the live set at the peak: allocated at or before peak_ev, not yet freed */
    int nlive = 0;
    memset(r->peak_cat_bytes, 0, sizeof r->peak_cat_bytes);
    rs->live = malloc((size_t)(r->ntensors > 0 ? r->ntensors : 1) * sizeof *rs->live);
    if (!rs->live) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    uint8_t *mbseen = NULL;
    int64_t mbs = s->p.grad_accum > 0 ? s->p.grad_accum : 1;
    mbseen = calloc((size_t)mbs, 1);
    int inflight = 0;
    for (int i = 0; i < r->ntensors && peak_ev >= 0; i++) {
        const ap_sim_tensor *t = &rs->ts[i];
        if (t->alloc_ev <= peak_ev && (t->free_ev < 0 || t->free_ev > peak_ev)) {
            rs->live[nlive++] = i;
            r->peak_cat_bytes[t->cat] += t->bytes;
            if (mbseen && t->cat == AP_SIM_CAT_ACTIVATIONS && !t->is_grad && t->mb >= 0 &&
                t->mb < mbs && !mbseen[t->mb]) {
                mbseen[t->mb] = 1;
                inflight++;
            }
        }
    }
    free(mbseen);
    r->inflight_at_peak = inflight;
    live_ent *le = malloc((size_t)(nlive > 0 ? nlive : 1) * sizeof *le);
    if (!le) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    for (int i = 0; i < nlive; i++) {
        le[i].bytes = rs->ts[rs->live[i]].bytes;
        le[i].id = rs->live[i];
    }
    qsort(le, (size_t)nlive, sizeof *le, cmp_live);
    for (int i = 0; i < nlive; i++) rs->live[i] = le[i].id;
    free(le);
    r->live_at_peak = rs->live;
    r->nlive_at_peak = nlive;
    return AP_OK;
}

/* ---- one rank --------------------------------------------------------------------------- */

static ap_status sim_rank(ap_sim *s, int stage, rank_store *rs, ap_err *err) {
    const ap_model *m = &s->m;
    const ap_plan *p = &s->p;
    gen g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.p = p;
    g.caps = ap_trainer_get(p->trainer);
    g.stage = stage;
    g.pp = p->pp;
    g.vp = p->vp > 0 ? p->vp : 1;
    g.L = m->layers;
    g.mbs_n = p->grad_accum > 0 ? p->grad_accum : 1;
    for (int k = 0; k < g.vp; k++) {
        int c = k * g.pp + stage;
        g.ck_first[k] = ap_plan_chunk_first_layer(p, g.L, c);
        g.ck_n[k] = ap_plan_chunk_layers(p, g.L, c);
        g.ck_base[k] = g.nloc;
        g.nloc += g.ck_n[k];
        int K = p->recompute_layers;
        if (p->nchunks == g.pp * g.vp && p->stage_recompute[c] >= 0 &&
            p->stage_recompute[c] != 0)
            K = p->stage_recompute[c];
        g.ck_rc[k] = K;
    }
    g.nunits = g.nloc + 2;
    g.u_embed = g.nloc;
    g.u_head = g.nloc + 1;
    int t = p->tp > 0 ? p->tp : 1;
    double dd = (double)p->dp * (p->cp > 0 ? p->cp : 1);
    g.D_dense = dd > 0 ? dd : 1;
    /* experts are sharded over the expert-data-parallel group: tp*cp*dp / (ep*etp) ranks
       (Megatron MoE "parallel folding") */
    double de = (double)t * dd / ((p->ep > 0 ? p->ep : 1) * (p->etp > 0 ? p->etp : 1));
    g.D_expert = de >= 1 ? de : 1;
    g.lazy_grads = p->trainer == AP_TRAINER_FSDP || p->trainer == AP_TRAINER_TORCHTITAN;
    /* Megatron-LM computes the loss with its fused vocab-parallel cross entropy, in place on
       the fp32 logits; the other trainers run torch/Hugging Face models whose loss is
       F.cross_entropy(logits.float()) = log_softmax + nll_loss, each with its own output */
    g.torch_loss = p->trainer != AP_TRAINER_MEGATRON;
    g.foreach_adam = p->trainer == AP_TRAINER_FSDP;
    /* 16-bit working copies: ZeRO-3 gathers per layer and reshards after each pass; FSDP
       SHARD_GRAD_OP keeps the gathered copy from forward to backward; trainers whose
       parameters are fp32 (master_bytes 0) without sharding cast a 16-bit copy per layer that
       lives from its first forward to its last backward (FSDP MixedPrecision) */
    g.gather_keep = (p->zero == 2 && g.caps->zero2_keeps_gathered) ||
                    (p->zero < 2 && g.caps->master_bytes == 0);
    g.gather_mode = p->zero == 3 || g.gather_keep;
    g.fetch_frac_mode = !g.gather_mode && p->offload_params > 0;
    g.grads_sharded = p->zero >= 2;
    g.reduce_per_mb = (g.caps->grad_reduce_per_mb_zero_mask >> p->zero) & 1u;

    g.sz = calloc((size_t)(g.nloc > 0 ? g.nloc : 1), sizeof *g.sz);
    g.units = calloc((size_t)g.nunits, sizeof *g.units);
    g.saved = malloc((size_t)g.mbs_n * (size_t)(g.nloc > 0 ? g.nloc : 1) * AP_SIM_NKINDS *
                     sizeof *g.saved);
    g.ends = malloc((size_t)g.mbs_n * 4 * sizeof *g.ends);
    if (!g.sz || !g.units || !g.saved || !g.ends) {
        free(g.sz);
        free(g.units);
        free(g.saved);
        free(g.ends);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    memset(g.saved, 0xff, (size_t)g.mbs_n * (size_t)(g.nloc > 0 ? g.nloc : 1) * AP_SIM_NKINDS *
                              sizeof *g.saved);
    memset(g.ends, 0xff, (size_t)g.mbs_n * 4 * sizeof *g.ends);
    /* layers of a kind share sizes: compute the dense and MoE shapes once */
    lsz dense_sz, moe_sz;
    int have_dense = 0, have_moe = 0;
    for (int k = 0; k < g.vp; k++)
        for (int i = 0; i < g.ck_n[k]; i++) {
            int64_t layer = g.ck_first[k] + i;
            int moe = ap_model_layer_is_moe(m, layer);
            if (moe && !have_moe) {
                layer_sizes(&g, layer, &moe_sz);
                have_moe = 1;
            } else if (!moe && !have_dense) {
                layer_sizes(&g, layer, &dense_sz);
                have_dense = 1;
            }
            int loc = g.ck_base[k] + i;
            g.sz[loc] = moe ? moe_sz : dense_sz;
            unit *u = &g.units[loc];
            u->layer = (int32_t)layer;
            u->p_dense = g.sz[loc].p_dense;
            u->p_expert = g.sz[loc].p_expert;
            u->p_linear = g.sz[loc].p_linear;
        }
    if (g.nloc == 0) layer_sizes(&g, 0, &g.sz[0]);
    int64_t V = m->vocab, h = m->hidden;
    g.xb = g.sz[0].x;
    g.hmask_b = m->dropout ? g.sz[0].x / 2 : 0;
    /* logits: [s/cp * b, V/t] in the compute dtype (vocab-parallel head, Megatron) */
    g.logits_b = cdiv(p->seq, p->cp > 0 ? p->cp : 1) * p->mbs * cdiv(V, t) * 2;
    unit *ue = &g.units[g.u_embed], *uh = &g.units[g.u_head];
    ue->layer = AP_SIM_LAYER_EMBED;
    uh->layer = (int32_t)g.L;
    if (stage == 0) {
        int64_t emb = ap_model_embedding_params(m);
        ue->p_dense = emb - V * h + cdiv(V, t) * h;
        ue->p_linear = 0;
    }
    if (stage == p->pp - 1) {
        int64_t head = ap_model_head_params(m);
        if (!m->tied_embeddings) head = head - V * h + cdiv(V, t) * h;
        else if (p->pp > 1) head += cdiv(V, t) * h; /* tied copy on the last stage (Megatron) */
        uh->p_dense = head;
        uh->p_linear = (!m->tied_embeddings || p->pp > 1) ? cdiv(V, t) * h : 0;
    }
    for (int i = 0; i < g.nunits; i++) {
        g.units[i].t_weight = g.units[i].t_grad = g.units[i].t_gathered = g.units[i].t_accum = -1;
    }

    /* size the event arrays from the schedule once (about 70 events per layer and
       micro-batch) instead of growing them by doubling */
    int64_t est = ((int64_t)g.nloc + 2) * g.mbs_n * 72 + 4096;
    g.capev = (int)est;
    g.capts = (int)(est / 2);
    g.capops = (int)(((int64_t)g.nloc + 4) * g.mbs_n * 3 + 256);
    g.ev = malloc((size_t)g.capev * sizeof *g.ev);
    g.ts = malloc((size_t)g.capts * sizeof *g.ts);
    g.ops = malloc((size_t)g.capops * sizeof *g.ops);
    if (!g.ev || !g.ts || !g.ops) g.nomem = 1;
    setup_states(&g);
    schedule(&g);
    finish_step(&g);
    free(g.sz);
    free(g.units);
    free(g.saved);
    free(g.ends);
    rs->ops = g.ops;
    rs->ts = g.ts;
    rs->ev = g.ev;
    if (g.nomem) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory (stage %d)", stage);
    ap_sim_rank *r = &rs->r;
    r->stage = stage;
    r->layers = g.nloc;
    r->nops = g.nops;
    r->ntensors = g.nts;
    r->nevents = g.nev;
    r->ops = g.ops;
    r->tensors = g.ts;
    r->events = g.ev;
    ap_status st = replay(s, rs, err);
    r->allocated_curve = rs->acurve;
    r->reserved_curve = rs->rcurve;
    r->op_peak_event = rs->opk_ev;
    r->op_peak_cat = rs->opk_cat;
    r->op_end_cat = rs->ope_cat;
    return st;
}

ap_status ap_sim_run(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                     const ap_sim_opts *opts, ap_sim **out, ap_err *err) {
    *out = NULL;
    if (p->pp < 1 || p->tp < 1 || p->dp < 1 || p->mbs < 1 || p->seq < 1)
        return ap_err_set(err, AP_ERR_INPUT,
                          "simulator: plan degrees, micro-batch and sequence must be >= 1");
    if (m->layers < 1 || m->hidden < 1)
        return ap_err_set(err, AP_ERR_INPUT, "simulator: model has no layers");
    const ap_trainer_caps *caps = ap_trainer_get(p->trainer);
    if (!caps) return ap_err_set(err, AP_ERR_INPUT, "simulator: unknown trainer");
    int vp = p->vp > 0 ? p->vp : 1;
    if (p->pp * vp > AP_MAX_CHUNKS)
        return ap_err_set(err, AP_ERR_INPUT, "simulator: pp x vp = %d exceeds %d chunks",
                          p->pp * vp, AP_MAX_CHUNKS);
    int64_t mb = p->grad_accum > 0 ? p->grad_accum : 1;
    if (vp > 1 && mb % p->pp != 0)
        return ap_err_set(err, AP_ERR_INFEASIBLE,
                          "simulator: the interleaved schedule needs the micro-batches per step "
                          "(%lld) to be a multiple of pp (%d)",
                          (long long)mb, p->pp);
    /* events per rank ~ 70 per (layer, micro-batch); int32 indices hold 2^31 */
    double per_rank = ((double)m->layers / p->pp + 2.0) * (double)mb * 72.0 + 4096.0;
    if (per_rank > 1.0e9)
        return ap_err_set(err, AP_ERR_INPUT,
                          "simulator: %lld layers x %lld micro-batches per step is too large to "
                          "simulate event by event (about %.0f events per rank)",
                          (long long)m->layers, (long long)mb, per_rank);
    for (int ch = 0; ch < p->pp * vp; ch++)
        if (ap_plan_chunk_layers(p, m->layers, ch) < 0)
            return ap_err_set(err, AP_ERR_INPUT, "simulator: chunk %d has a negative layer count",
                              ch);
    ap_sim *s = calloc(1, sizeof *s);
    if (!s) return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    s->m = *m;
    s->p = *p;
    s->p.vp = vp;
    s->p.grad_accum = mb;
    if (opts)
        s->o = *opts;
    else
        ap_sim_opts_init(&s->o);
    s->capacity_bytes = s->o.capacity_bytes > 0 ? s->o.capacity_bytes
                        : c                     ? c->gpu.mem_bytes
                                                : 0;
    s->overhead_bytes = s->o.device_overhead_bytes >= 0 ? s->o.device_overhead_bytes
                                                        : ap_sim_device_overhead_bytes(p);
    s->budget_bytes = s->capacity_bytes > 0 ? s->capacity_bytes - s->o.headroom_bytes : 0;
    if (s->capacity_bytes > 0 && s->budget_bytes <= 0) s->budget_bytes = 1;
    s->ranks = calloc((size_t)p->pp, sizeof *s->ranks);
    if (!s->ranks) {
        free(s);
        return ap_err_set(err, AP_ERR_NOMEM, "simulator: out of memory");
    }
    s->nranks = p->pp;
    for (int i = 0; i < p->pp; i++) {
        ap_status st = sim_rank(s, i, &s->ranks[i], err);
        if (st != AP_OK) {
            ap_sim_free(s);
            return st;
        }
    }
    *out = s;
    return AP_OK;
}

/* ---- descriptions and JSON -------------------------------------------------------------- */

static char *layer_label(int32_t layer, int64_t L, char *buf, size_t n) {
    if (layer == AP_SIM_LAYER_EMBED)
        snprintf(buf, n, "the embedding");
    else if (layer == L)
        snprintf(buf, n, "the head");
    else
        snprintf(buf, n, "layer %d", layer);
    return buf;
}

char *ap_sim_op_describe(const ap_sim *s, const ap_sim_rank *r, int op, char *buf, size_t n) {
    if (op < 0 || op >= r->nops) {
        snprintf(buf, n, "(none)");
        return buf;
    }
    const ap_sim_op *o = &r->ops[op];
    char lb[48];
    if (o->layer == AP_SIM_LAYER_NONE)
        snprintf(buf, n, "%s, stage %d", ap_sim_op_name(o->type), r->stage);
    else if (o->mb < 0)
        snprintf(buf, n, "%s of %s, stage %d", ap_sim_op_name(o->type),
                 layer_label(o->layer, s->m.layers, lb, sizeof lb), r->stage);
    else
        snprintf(buf, n, "%s of %s, micro-batch %d, stage %d", ap_sim_op_name(o->type),
                 layer_label(o->layer, s->m.layers, lb, sizeof lb), o->mb, r->stage);
    return buf;
}

char *ap_sim_tensor_describe(const ap_sim_tensor *t, int64_t L, char *buf, size_t n) {
    char lb[48];
    const char *what = t->is_grad ? "grad of " : "";
    if (t->layer == AP_SIM_LAYER_NONE)
        snprintf(buf, n, "%s%s", what, ap_sim_kind_name(t->kind));
    else if (t->mb < 0)
        snprintf(buf, n, "%s%s of %s", what, ap_sim_kind_name(t->kind),
                 layer_label(t->layer, L, lb, sizeof lb));
    else
        snprintf(buf, n, "%s%s of %s, micro-batch %d", what, ap_sim_kind_name(t->kind),
                 layer_label(t->layer, L, lb, sizeof lb), t->mb);
    return buf;
}

#define J(call)                                                                                   \
    do {                                                                                          \
        if ((call) != AP_OK) goto fail;                                                           \
    } while (0)

static ap_json *cats_json(const int64_t *cat) {
    ap_json *o = ap_json_new_object();
    if (!o) return NULL;
    for (int c = 0; c < AP_SIM_NCAT; c++)
        if (ap_json_add_number(o, cat_names[c], (double)cat[c]) != AP_OK) {
            ap_json_free(o);
            return NULL;
        }
    return o;
}

ap_json *ap_sim_to_json(const ap_sim *s, int max_live) {
    ap_json *root = ap_json_new_object(), *stages = NULL;
    if (!root) return NULL;
    int w = ap_sim_worst_rank(s);
    const ap_sim_rank *wr = &s->ranks[w].r;
    int64_t apeak = 0, rpeak = 0;
    for (int i = 0; i < s->nranks; i++) {
        if (s->ranks[i].r.allocated_peak_bytes > apeak) apeak = s->ranks[i].r.allocated_peak_bytes;
        if (s->ranks[i].r.reserved_peak_bytes > rpeak) rpeak = s->ranks[i].r.reserved_peak_bytes;
    }
    double dev = (double)wr->device_peak_bytes;
    J(ap_json_add_string(root, "allocator", ap_alloc_mode_name(s->o.allocator)));
    J(ap_json_add_bool(root, "expandable_segments", s->o.expandable_segments));
    J(ap_json_add_number(root, "peak_bytes", dev));
    J(ap_json_add_number(root, "allocated_peak_bytes", (double)apeak));
    J(ap_json_add_number(root, "reserved_peak_bytes", (double)rpeak));
    J(ap_json_add_number(root, "device_overhead_bytes", s->overhead_bytes));
    J(ap_json_add_number(root, "capacity_bytes", s->capacity_bytes));
    J(ap_json_add_number(root, "headroom_bytes", s->o.headroom_bytes));
    int fits = s->capacity_bytes <= 0 || dev + s->o.headroom_bytes <= s->capacity_bytes;
    J(ap_json_add_bool(root, "fits", fits));
    J(ap_json_add_number(root, "worst_stage", w));
    stages = ap_json_new_array();
    if (!stages) goto fail;
    for (int i = 0; i < s->nranks; i++) {
        const ap_sim_rank *r = &s->ranks[i].r;
        ap_json *st = ap_json_new_object();
        if (!st || ap_json_push(stages, st) != AP_OK) {
            ap_json_free(st);
            goto fail;
        }
        char buf[256];
        J(ap_json_add_number(st, "stage", r->stage));
        J(ap_json_add_number(st, "layers", r->layers));
        J(ap_json_add_number(st, "allocated_peak_bytes", (double)r->allocated_peak_bytes));
        J(ap_json_add_number(st, "reserved_peak_bytes", (double)r->reserved_peak_bytes));
        J(ap_json_add_number(st, "device_peak_bytes", (double)r->device_peak_bytes));
        J(ap_json_add_number(st, "baseline_bytes", (double)r->baseline_bytes));
        J(ap_json_add_number(st, "fragmentation", r->fragmentation));
        J(ap_json_add_number(st, "inflight_microbatches", r->inflight_at_peak));
        J(ap_json_add_number(st, "ops", r->nops));
        J(ap_json_add_number(st, "events", r->nevents));
        J(ap_json_add_string(st, "peak_op", ap_sim_op_describe(s, r, r->peak_op, buf, sizeof buf)));
        ap_json *cj = cats_json(r->peak_cat_bytes);
        if (!cj || ap_json_add(st, "breakdown", cj) != AP_OK) {
            ap_json_free(cj);
            goto fail;
        }
        if (r->over_op >= 0)
            J(ap_json_add_string(st, "first_over_budget_op",
                                 ap_sim_op_describe(s, r, r->over_op, buf, sizeof buf)));
        ap_json *live = ap_json_new_array();
        if (!live || ap_json_add(st, "live_at_peak", live) != AP_OK) {
            ap_json_free(live);
            goto fail;
        }
        for (int k = 0; k < r->nlive_at_peak && k < max_live; k++) {
            const ap_sim_tensor *t = &r->tensors[r->live_at_peak[k]];
            ap_json *tj = ap_json_new_object();
            if (!tj || ap_json_push(live, tj) != AP_OK) {
                ap_json_free(tj);
                goto fail;
            }
            J(ap_json_add_string(tj, "name", ap_sim_tensor_describe(t, s->m.layers, buf,
                                                                    sizeof buf)));
            J(ap_json_add_string(tj, "kind", ap_sim_kind_name(t->kind)));
            J(ap_json_add_string(tj, "category", ap_sim_category_name(t->cat)));
            J(ap_json_add_number(tj, "layer", t->layer));
            J(ap_json_add_number(tj, "microbatch", t->mb));
            J(ap_json_add_bool(tj, "grad", t->is_grad));
            J(ap_json_add_number(tj, "bytes", (double)t->bytes));
        }
        J(ap_json_add_number(st, "live_tensors_at_peak", r->nlive_at_peak));
    }
    if (ap_json_add(root, "stages", stages) != AP_OK) goto fail;
    return root;
fail:
    if (stages && !ap_json_get(root, "stages")) ap_json_free(stages);
    ap_json_free(root);
    return NULL;
}
