/*
 * model.h - the transformer being trained: read from a Hugging Face config.json (file or model
 * directory) or autoplan's native JSON, and its exact parameter and FLOP counts.
 *
 * ap_model is a plain value struct (no pointers), safe to copy. Everything the cost model needs
 * about a layer comes from ap_model_layer(): parameter counts per component and the shapes of
 * its GEMMs, so the cost model never re-derives architecture rules.
 *
 * Symbols follow the papers (Korthikanti et al. 2022): L layers, h hidden, a heads, s sequence.
 */
#ifndef AP_MODEL_H
#define AP_MODEL_H

#include "autoplan/common.h"
#include "autoplan/json.h"

/* SWIGLU: 3 mats; RELU2: squared ReLU, relu(x)^2 (Nemotron-4; Megatron-LM --squared-relu) */
typedef enum { AP_ACT_GELU = 0, AP_ACT_SWIGLU, AP_ACT_RELU, AP_ACT_RELU2 } ap_activation;
typedef enum { AP_NORM_LAYERNORM = 0, AP_NORM_RMSNORM } ap_norm;
typedef enum { AP_POS_ROTARY = 0, AP_POS_LEARNED, AP_POS_ALIBI } ap_posemb;
/* activation inside a gated MLP: SiLU (SwiGLU, Llama), tanh-GELU (GeGLU, Gemma), gpt-oss's
 * clamped SwiGLU with alpha 1.702 and a +1 on the linear half */
typedef enum { AP_GATE_SILU = 0, AP_GATE_GELU, AP_GATE_SWIGLU_OAI } ap_gate_act;
/* q/k norms: none; one norm of head_dim shared by all heads (qwen3, gemma3: 2 x head_dim
 * parameters); one over all heads' features (olmo2, cohere: (a + kv) x head_dim); an L2 norm
 * without parameters (llama4) */
typedef enum { AP_QKNORM_NONE = 0, AP_QKNORM_HEAD, AP_QKNORM_FULL, AP_QKNORM_L2 } ap_qk_norm;
/* pre-norm (GPT-2 onwards), post-norm after each sublayer inside the residual (olmo2), or
 * sandwich: pre and post (gemma2, gemma3) */
typedef enum { AP_NORM_PRE = 0, AP_NORM_POST, AP_NORM_SANDWICH } ap_norm_order;
typedef enum { AP_ROUTER_SOFTMAX = 0, AP_ROUTER_SIGMOID } ap_router_act;

typedef struct ap_moe {
    int64_t experts;            /* routed experts per MoE layer; 0 = dense model */
    int64_t top_k;              /* routed experts per token */
    int64_t ffn_hidden;         /* intermediate size of one routed expert */
    int64_t shared_experts;     /* always-active experts (DeepSeek, Qwen2-MoE) */
    int64_t shared_ffn_hidden;  /* intermediate size of the shared block (total over shared) */
    int64_t first_dense_layers; /* leading layers that are dense (DeepSeek-V3: 3) */
    int64_t layer_freq;         /* every layer_freq-th layer (after the dense ones) is MoE; 1 */
    int shared_expert_gate;     /* Qwen2-MoE: a sigmoid gate h->1 on the shared expert */
    int router_bias;            /* DeepSeek-V3: e_score_correction_bias, E params */
    double capacity_factor;     /* 0 = dropless */
} ap_moe;

typedef struct ap_mla {         /* DeepSeek multi-head latent attention; enabled when kv_lora_rank>0 */
    int64_t q_lora_rank;        /* 0 = no query compression */
    int64_t kv_lora_rank;
    int64_t qk_nope_head_dim;
    int64_t qk_rope_head_dim;
    int64_t v_head_dim;
} ap_mla;

typedef struct ap_model {
    char name[128];
    char model_type[32];   /* "native" or the HF model_type */
    int64_t layers;        /* L */
    int64_t hidden;        /* h */
    int64_t heads;         /* a (query heads) */
    int64_t kv_heads;      /* key/value heads (= heads for MHA, 1 for MQA) */
    int64_t head_dim;      /* per-head dim of q/k/v (hidden/heads unless given) */
    int64_t ffn_hidden;    /* dense MLP intermediate size */
    int64_t vocab;         /* V */
    int64_t seq_len;       /* default training sequence length s */
    int64_t max_positions; /* max_position_embeddings (0 if unknown) */
    int64_t learned_pos;   /* rows of a learned position table (gpt2: 1024, opt: 2050), else 0 */
    ap_activation act;
    ap_norm norm;
    ap_posemb pos;
    int tied_embeddings;   /* LM head shares the embedding matrix */
    int bias;              /* biases on all linear layers (gpt2, opt, bloom) */
    int qkv_bias;          /* biases on q/k/v only (qwen2) */
    int norms_per_layer;   /* 2 usually; 4 for gemma2 (pre+post); 1 for falcon-7b parallel */
    int parallel_attn;     /* attention and MLP read the same input (gpt-neox, falcon) */
    int embed_norm;        /* a norm right after the embedding (bloom) */
    int final_norm;        /* a norm before the LM head (1 for all supported models) */
    int dropout;           /* dropout layers present during training (GPT-style; 0 for llama) */
    ap_moe moe;
    ap_mla mla;
    /* ---- added for today's families (issue 19); read by hf.c, counted by model.c ---- */
    ap_gate_act gate_act;  /* activation inside a gated MLP (act == AP_ACT_SWIGLU) */
    int attn_bias;         /* biases on q, k, v and o but not on the MLP (phimoe, gpt-oss) */
    int mlp_bias;          /* biases on the MLP / expert projections but not on q,k,v,o (gpt-j) */
    int lm_head_bias;      /* the LM head has a bias of V (phimoe, gpt-j) */
    int norm_no_bias;      /* LayerNorm without a bias: h parameters (cohere) */
    int norm_1p;           /* LayerNorm1P: the weight stored as gamma - 1 (Nemotron; Megatron-LM
                            * --apply-layernorm-1p); counts as a LayerNorm */
    ap_qk_norm qk_norm;    /* norms on queries and keys before the dot product */
    ap_norm_order norm_order; /* where the per-layer norms sit */
    int64_t window;        /* tokens a local layer attends to (sliding window or chunk); 0 = none */
    int64_t window_period; /* with window: layer i is global when (i + 1) % period == 0; 0 = all
                            * layers local (mistral v0.1, starcoder2) */
    int window_chunked;    /* local layers attend within fixed chunks (llama4), not a sliding band */
    int nope_global;       /* global layers use no rotary embedding (llama4 NoPE layers) */
    int attn_sinks;        /* learned per-head sink logits: a parameters per layer (gpt-oss) */
    double attn_softcap;   /* tanh soft-capping of attention logits (gemma2: 50), 0 = none */
    double final_softcap;  /* tanh soft-capping of the LM-head logits (gemma2: 30), 0 = none */
    double rope_theta;     /* rotary base (0 = unknown / not rotary) */
    double rotary_pct;     /* fraction of head_dim that is rotated (1 = all; phi-4-mini 0.75) */
    char rope_scaling[16]; /* rope_scaling type ("" = none): llama3, linear, dynamic, yarn, ... */
    double rope_factor;    /* rope_scaling factor (0 = none) */
    int64_t rope_orig_positions; /* rope_scaling original_max_position_embeddings (0 = absent) */
    ap_router_act router_act; /* router score function */
    int router_linear_bias; /* the router linear has a bias of E (gpt-oss); DeepSeek-V3's
                             * correction bias is moe.router_bias */
    int text_of_multimodal; /* read from the text_config of a multimodal config: the vision tower
                             * and projector are not counted */
} ap_model;

/* Parameter counts and GEMM shapes of one transformer layer (all values per full layer, before
 * any parallel split). Matrices are listed so the cost model can time each GEMM. */
typedef struct ap_layer_info {
    int is_moe;
    int64_t attn_params;    /* q,k,v,o (+ MLA projections and their norms) incl. biases */
    int64_t mlp_params;     /* dense MLP incl. biases (0 for MoE layers) */
    int64_t norm_params;    /* layer norms of this layer */
    int64_t router_params;  /* MoE gate (+ correction bias) */
    int64_t expert_params;  /* ONE routed expert */
    int64_t shared_params;  /* all shared experts (+ shared gate) */
    int64_t total_params;   /* everything above, all experts counted */
    int64_t active_params;  /* parameters touched per token: routed top_k experts only */
    int64_t qkv_out;        /* output features of the fused q,k,v projection(s) */
    int64_t attn_out_in;    /* input features of the output projection (heads * v_head_dim) */
    int64_t qk_head_dim;    /* per-head dim used in QK^T */
    int64_t v_head_dim;     /* per-head dim used in PV */
    int64_t mlp_ffn;        /* intermediate size of the dense MLP, or of one expert */
    int64_t attn_window;    /* keys a query of this layer attends to at most (sliding window or
                             * chunk); 0 = the whole sequence */
} ap_layer_info;

/* Upper bounds the readers and ap_model_validate accept (costmodel/model.c). They are far above
 * any published model (DeepSeek-V3: 61 layers, h 7168, 256 experts; Llama-3.1-405B: 126 layers,
 * h 16384, V 128256) and low enough that every count below fits int64_t without overflow. */
#define AP_MODEL_MAX_LAYERS 10000
#define AP_MODEL_MAX_HIDDEN 1000000
#define AP_MODEL_MAX_HEADS 65536
#define AP_MODEL_MAX_HEAD_DIM 65536
#define AP_MODEL_MAX_FFN 10000000
#define AP_MODEL_MAX_VOCAB 10000000
#define AP_MODEL_MAX_SEQ 16777216       /* 2^24 tokens */
#define AP_MODEL_MAX_POSITIONS 1073741824 /* 2^30 */
#define AP_MODEL_MAX_EXPERTS 65536
#define AP_MODEL_MAX_PARAMS 1e15        /* a thousand trillion parameters */

/* Initialise with neutral defaults (norms_per_layer 2, final_norm 1, layer_freq 1, ...). */
void ap_model_init(ap_model *m);

/* Load a model from a native JSON file, an HF config.json, or a directory containing
 * config.json. The file kind is detected (native files have "layers", HF files "model_type").
 * All fields are validated; err names the file, field and reason. */
ap_status ap_model_load(const char *path, ap_model *out, ap_err *err);

/* Parse from text already in memory (used by the fuzzer); `where` names it in errors. */
ap_status ap_model_parse(const char *text, size_t len, const char *where, ap_model *out,
                         ap_err *err);

/* Check internal consistency (positive sizes, heads dividing hidden or head_dim given, kv_heads
 * dividing heads, MoE fields coherent, absurd sizes refused). Called by the loaders. */
ap_status ap_model_validate(const ap_model *m, const char *where, ap_err *err);

/* Layer i in [0, L) is local (sliding window or chunked attention of m->window tokens). */
int ap_model_layer_is_local(const ap_model *m, int64_t i);
/* Number of local layers (closed form of ap_model_layer_is_local over [0, L)). */
int64_t ap_model_local_layers(const ap_model *m);

/* Whether a sequence of `seq` tokens has positions in m: a learned position table (GPT-2's
 * wpe, OPT's embed_positions) holds learned_pos of them; rotary and ALiBi have no table. The
 * request (--seq), plan.json's reader and `info` refuse one beyond it. */
static inline int ap_model_positions_hold(const ap_model *m, int64_t seq) {
    return m->pos != AP_POS_LEARNED || seq <= m->learned_pos;
}

/* Layer i in [0, L): dense or MoE per moe.first_dense_layers / layer_freq: MoE when i >=
 * first_dense_layers and (i - first_dense_layers) % layer_freq == 0. The readers map each
 * convention onto this one: DeepSeek-V3 (i >= first_k_dense_replace and i % moe_layer_freq ==
 * 0) and Qwen2-MoE ((i + 1) % decoder_sparse_step == 0). Inline: the stage tables and the
 * partition's prefix sums ask it for every layer of every candidate. */
static inline int ap_model_layer_is_moe(const ap_model *m, int64_t i) {
    if (m->moe.experts <= 0 || i < m->moe.first_dense_layers) return 0;
    int64_t f = m->moe.layer_freq > 0 ? m->moe.layer_freq : 1;
    return f == 1 || (i - m->moe.first_dense_layers) % f == 0;
}
/* How many of the layers a <= i < b are MoE layers (ap_model_layer_is_moe, in closed form:
 * those below x past the dense ones number ceil((x - first_dense_layers) / layer_freq)).
 * Inline: every rank of every estimate of a mixed model counts its own. */
static inline int64_t ap_model_moe_layers_in(const ap_model *m, int64_t a, int64_t b) {
    if (m->moe.experts <= 0) return 0;
    int64_t fd = m->moe.first_dense_layers, f = m->moe.layer_freq > 0 ? m->moe.layer_freq : 1;
    if (a < fd) a = fd;
    if (b <= a) return 0;
    if (f == 1) return b - a;
    return (b - fd + f - 1) / f - (a - fd + f - 1) / f;
}
/* 1 when every layer is of one kind: all dense or all MoE. */
int ap_model_single_kind(const ap_model *m);
/* With layers of both kinds where every dense layer comes before every MoE layer (DeepSeek's
 * first_k_dense_replace): the number of dense layers; -1 otherwise (one kind, or interleaved). */
int ap_model_dense_prefix(const ap_model *m);
void ap_model_layer(const ap_model *m, int64_t i, ap_layer_info *out);

/* Embedding block: token embedding (+ learned positions, + embed norm). */
int64_t ap_model_embedding_params(const ap_model *m);
/* Output block: final norm + LM head (the head counts 0 when tied). */
int64_t ap_model_head_params(const ap_model *m);
/* Totals. */
int64_t ap_model_total_params(const ap_model *m);
int64_t ap_model_active_params(const ap_model *m);     /* per token (MoE: top_k experts) */
int64_t ap_model_nonembed_params(const ap_model *m);   /* layers + final norm */
/* The critical batch in tokens of a dense model of this size (Kaplan et al. 2020, Eqs. 1.1 and
 * 1.4, from its non-embedding parameters): beyond it a larger batch saves few optimizer steps
 * (McCandlish et al. 2018). 0 for MoE models. A rough guide for hints, not used in ranking. */
double ap_model_critical_batch_tokens(const ap_model *m);

/* Forward FLOPs per token at sequence length s: 2 x active matmul params (incl. LM head) plus
 * attention scores/values 4 * s * a * d_head per layer (causal not halved here; see cost model
 * for the counting convention). */
double ap_model_fwd_flops_per_token(const ap_model *m, int64_t s);

/* Stable fingerprint of everything that affects cost (not the name). */
uint64_t ap_model_fingerprint(const ap_model *m);

/* ---- names and the complete JSON shape (costmodel/model.c) ---------------------------------
 * One spelling per enum value, shared by the native reader (hf.c), plan.json and reports. The
 * lookups return the enum value, or -1 for an unknown name; *_names is the list for messages
 * ("gelu, swiglu, relu"). */
const char *ap_activation_name(ap_activation a);
const char *ap_norm_name(ap_norm n);
const char *ap_posemb_name(ap_posemb p);
int ap_activation_lookup(const char *s);
int ap_norm_lookup(const char *s);
int ap_posemb_lookup(const char *s);
extern const char ap_activation_names[], ap_norm_names[], ap_posemb_names[];

/* Every ap_model field into the JSON object obj, from one field table (plan.json's "model":
 * the complete shape, nothing defaulted). AP_ERR_NOMEM when building fails. */
ap_status ap_model_to_json(const ap_model *m, ap_json *obj);
/* Read that shape: every field required and range-checked, then ap_model_validate. AP_ERR_INPUT
 * "<where>: field 'layers' ..." (where.moe / where.mla for the nested objects). */
ap_status ap_model_from_json(const ap_json *obj, const char *where, ap_model *m, ap_err *err);

#endif
