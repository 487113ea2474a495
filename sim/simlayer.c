/*
 * simlayer.c - the tensors one transformer layer allocates and frees, in order, for the
 * memory simulator (sim.h, docs/simulator.md): their sizes from the model shapes and the
 * plan's splits, the forward (saving for backward, without autograd under full recompute, or
 * rebuilt before the backward) and the backward, which allocates each op's input gradient and
 * frees the saved tensors as their consumers run.
 *
 * The saved set follows Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
 * Transformer Models", Sec. 4.1, Table 2) tensor by tensor; tests/test_sim.c rebuilds Table 2
 * exactly from it. Architecture differences (GQA/MLA widths, SwiGLU, flash attention, no
 * dropout, parallel attention, MoE) are applied per tensor. Model states, the schedule and the
 * replay are in sim.c.
 */
#include <math.h>
#include <string.h>

#include "sim_int.h"

#define T ap_simg_tensor
#define F ap_simg_free

/* ---- sizes ------------------------------------------------------------------------------- */

void ap_simg_layer_sizes(const gen *g, int64_t layer, lsz *z) {
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
    if (ap_plan_eager_elementwise(p)) {
        /* as activations.c eager_layer_bytes counts them: 4 bytes more per element of each
         * RMSNorm (the first with the attention block, the rest with the MLP's), and one
         * f-wide 16-bit tensor more per gated MLP (four for gpt-oss's clamped GLU) */
        int64_t norm = m->norm == AP_NORM_RMSNORM && ap_plan_eager_norm(p) ? 2 * z->x : 0;
        int64_t k = m->gate_act == AP_GATE_SWIGLU_OAI ? 4 : 1;
        int norms = m->norms_per_layer;
        z->eager_attn = norms > 0 ? norm : 0;
        z->eager_mlp = (norms > 1 ? (norms - 1) * norm : 0) +
                       (swiglu ? k * (z->act + z->eact + z->sact) : 0);
    }
}

/* ---- one transformer layer --------------------------------------------------------------- */

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
int32_t ap_simg_layer_fwd(gen *g, int loc, int32_t layer, int32_t mb, int mode, int selective,
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
    int32_t ea1 = z->eager_attn ? T(g, AP_SIM_T_EAGER_ATTN, ACT, layer, mb, z->eager_attn, 0) : -1;
    save(g, &kp, &sv[AP_SIM_T_EAGER_ATTN], ea1);
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
    int32_t em = z->eager_mlp ? T(g, AP_SIM_T_EAGER_MLP, ACT, layer, mb, z->eager_mlp, 0) : -1;
    save(g, &kp, &sv[AP_SIM_T_EAGER_MLP], em);
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
int32_t ap_simg_layer_bwd(gen *g, int loc, int32_t layer, int32_t mb, int selective,
                         int32_t g_out) {
    const lsz *z = &g->sz[loc];
    int32_t *sv = &SV(g, mb, loc, 0);
    int32_t gx = g_out;
    int G = 1;
    /* MLP: dropout, down projection, activation, up projection, norm */
    F(g, sv[AP_SIM_T_MLP_MASK]);
    int32_t gf2 = T(g, AP_SIM_T_FC2_OUT, OTH, layer, mb, z->fc2, G);
    F(g, sv[AP_SIM_T_EAGER_MLP]); /* the activation's and the norm's backward, as one */
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
    F(g, sv[AP_SIM_T_EAGER_ATTN]);
    F(g, sv[AP_SIM_T_INPUT]);
    F(g, gx);
    for (int k = 0; k < AP_SIM_NKINDS; k++) sv[k] = -1;
    return gin;
}
