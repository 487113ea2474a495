/*
 * small_model.h - the tiny models the runtime's gradient and layer tests build in code (test-only,
 * shared by tests/test_rtgrad.c and tests/runtime/layercheck.c): the two formula families of the
 * cost model, RMSNorm + SwiGLU + rotary + untied head without biases ("llama") or LayerNorm +
 * GELU + learned positions + tied head with biases ("gpt"), at sizes small enough for finite
 * differences and per-element comparisons.
 */
#ifndef AP_TEST_SMALL_MODEL_H
#define AP_TEST_SMALL_MODEL_H

#include <stdio.h>

#include "autoplan/model.h"

static inline void small_model(ap_model *m, int llama, int64_t layers, int64_t hidden,
                               int64_t heads, int64_t kv_heads, int64_t ffn, int64_t vocab,
                               int64_t seq) {
    ap_model_init(m);
    snprintf(m->name, sizeof m->name, "%s", llama ? "small-llama" : "small-gpt");
    snprintf(m->model_type, sizeof m->model_type, "native");
    m->layers = layers;
    m->hidden = hidden;
    m->heads = heads;
    m->kv_heads = kv_heads;
    m->head_dim = hidden / heads;
    m->ffn_hidden = ffn;
    m->vocab = vocab;
    m->seq_len = seq;
    m->act = llama ? AP_ACT_SWIGLU : AP_ACT_GELU;
    m->norm = llama ? AP_NORM_RMSNORM : AP_NORM_LAYERNORM;
    m->pos = llama ? AP_POS_ROTARY : AP_POS_LEARNED;
    m->learned_pos = llama ? 0 : seq;
    m->tied_embeddings = !llama;
    m->bias = !llama;
    m->norms_per_layer = 2;
    m->final_norm = 1;
}

#endif
