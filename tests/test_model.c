/*
 * test_model.c - the model module (costmodel/model.c, costmodel/hf.c) and `autoplan info`.
 *
 * References: exact parameter counts of published checkpoints (safetensors index total_size / 2
 * bytes for bf16/fp16 checkpoints, or transformers' num_parameters(); the source is noted at
 * each number), the parameter and FLOP formulas of Narayanan et al. 2021 for the paper models
 * (computed here, independently of model.c), hand-worked counts for smaller configs, and fault
 * paths: every bad input must return AP_ERR_INPUT with a one-line message naming the field.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autoplan/model.h"
#include "testlib.h"

/* one scratch directory per run (tl_tmpdir makes a new one per call), removed at the end */
static char scratch[256];

static ap_status load_example(const char *name, ap_model *m, ap_err *err) {
    char rel[256];
    snprintf(rel, sizeof rel, "examples/models/%s", name);
    return ap_model_load(tl_path(rel), m, err);
}

static void check_example(const char *name, int64_t want_total) {
    ap_model m;
    ap_err err = {{0}};
    ap_status st = load_example(name, &m, &err);
    if (st != AP_OK) fprintf(stderr, "%s: %s\n", name, err.msg);
    CHECK_INT(st, AP_OK);
    if (st == AP_OK) CHECK_INT(ap_model_total_params(&m), want_total);
}

/* ---- published HF checkpoints ---------------------------------------------------------------- */

static void test_hf_examples(void) {
    /* transformers GPT2LMHeadModel.from_pretrained("gpt2").num_parameters() = 124,439,808
     * (wte 50257*768 + wpe 1024*768 + 12 blocks + ln_f; lm_head tied). The hub page's "137M"
     * also counts the 12 causal-mask buffers (attn.bias, 1024*1024) stored in the checkpoint. */
    check_example("gpt2.json", 124439808);
    /* facebook/opt-1.3b: OPTForCausalLM num_parameters() = 1,315,758,080 (fp16
     * pytorch_model.bin of 2,631,516,160 bytes of tensors / 2); positions table has 2050 rows. */
    check_example("opt-1.3b.json", 1315758080);
    /* meta-llama/Llama-2-7b-hf model.safetensors.index.json total_size 13,476,831,232 B / 2 */
    check_example("llama-2-7b.json", 6738415616);
    /* meta-llama/Llama-2-70b-hf model.safetensors.index.json total_size 137,953,296,384 B / 2 */
    check_example("llama-2-70b.json", 68976648192);
    /* meta-llama/Meta-Llama-3-8B model.safetensors.index.json total_size 16,060,522,496 B / 2 */
    check_example("llama-3-8b.json", 8030261248);
    /* meta-llama/Meta-Llama-3-70B model.safetensors.index.json total_size 141,107,412,992 B / 2 */
    check_example("llama-3-70b.json", 70553706496);
    /* meta-llama/Llama-3.1-405B model.safetensors.index.json total_size 811,706,777,600 B / 2 */
    check_example("llama-3.1-405b.json", 405853388800);
    /* mistralai/Mixtral-8x7B-v0.1 model.safetensors.index.json total_size 93,405,585,408 B / 2 */
    check_example("mixtral-8x7b.json", 46702792704);
    /* Qwen/Qwen2-7B model.safetensors.index.json total_size 15,231,233,024 B / 2 */
    check_example("qwen2-7b.json", 7615616512);
    /* deepseek-ai/DeepSeek-V3: "671B" total (README_WEIGHTS.md, main model). Exactly
     * 671,026,419,200 = the element count of the main model's tensors in the checkpoint
     * (embedding, 61 layers incl. the 58 x 256 e_score_correction_bias values, norm, lm_head);
     * the published checkpoint also holds the MTP module (num_nextn_predict_layers = 1, 11.5B
     * unique) and fp8 weight_scale_inv tensors, which are not part of the 671B and not counted
     * here. The checkpoint is fp8, so its total_size / 2 is not the count. */
    check_example("deepseek-v3.json", 671026419200);
    /* the profiler's compute-bound proxy (tools/profile_gpu.sh): Llama-3-8B cut to 8 layers,
     * 8,030,261,248 less 24 of its 218,112,000-parameter layers; llama_step.py built it with
     * 2.80B parameters on the H200 (docs/profiler.md) */
    ap_model m;
    ap_err err = {{0}};
    CHECK_INT(ap_model_load(tl_path("profiler/scripts/llama-3-8b-8layers.json"), &m, &err), AP_OK);
    CHECK_INT(ap_model_total_params(&m), 8030261248LL - 24LL * 218112000LL);
    CHECK_INT(m.layers, 8);
}

static void test_moe_details(void) {
    ap_model m;
    ap_err err = {{0}};
    CHECK_INT(load_example("deepseek-v3.json", &m, &err), AP_OK);
    /* 3 dense layers then 58 MoE layers (first_k_dense_replace 3, moe_layer_freq 1) */
    CHECK(!ap_model_layer_is_moe(&m, 0));
    CHECK(!ap_model_layer_is_moe(&m, 2));
    CHECK(ap_model_layer_is_moe(&m, 3));
    CHECK(ap_model_layer_is_moe(&m, 60));
    CHECK_INT(ap_model_moe_layers_in(&m, 0, 61), 58); /* 61 layers, 3 dense */
    CHECK_INT(ap_model_moe_layers_in(&m, 2, 4), 1);
    /* the closed form against counting, over dense prefixes, frequencies and ranges */
    {
        ap_model q = m;
        int bad = 0;
        for (int fd = 0; fd <= 5; fd++)
            for (int f = 0; f <= 4; f++) /* 0 = unset, read as every layer */
                for (int a = 0; a <= 13; a++)
                    for (int b = 0; b <= 13; b++) {
                        q.moe.first_dense_layers = fd;
                        q.moe.layer_freq = f;
                        int64_t n = 0;
                        for (int i = a; i < b; i++) n += ap_model_layer_is_moe(&q, i);
                        bad += ap_model_moe_layers_in(&q, a, b) != n;
                    }
        CHECK_INT(bad, 0);
        q.moe.experts = 0; /* a dense model has none */
        CHECK_INT(ap_model_moe_layers_in(&q, 0, 61), 0);
    }
    ap_layer_info li;
    ap_model_layer(&m, 3, &li);
    CHECK(li.is_moe);
    /* one routed expert: gate, up, down 7168 x 2048 */
    CHECK_INT(li.expert_params, 3LL * 7168 * 2048);
    /* router 256 x 7168 + 256 correction biases */
    CHECK_INT(li.router_params, 256LL * 7168 + 256);
    /* MLA by hand: q_a 7168*1536 + norm 1536 + q_b 1536*128*192 + kv_a 7168*576 + norm 512 +
     * kv_b 512*128*256 + o 128*128*7168 */
    CHECK_INT(li.attn_params, 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                                  512LL * 128 * 256 + 128LL * 128 * 7168);
    /* "37B activated" (DeepSeek-V3 README): 37,552,297,472 = total minus 58 layers x 248
     * inactive experts */
    CHECK_INT(ap_model_active_params(&m), 671026419200LL - 58LL * 248 * 3 * 7168 * 2048);
    ap_model_layer(&m, 0, &li);
    CHECK(!li.is_moe);
    CHECK_INT(li.mlp_params, 3LL * 7168 * 18432);

    CHECK_INT(load_example("mixtral-8x7b.json", &m, &err), AP_OK);
    /* "12.9B active parameters" (Mistral AI, Mixtral of experts, 2023): worked by hand, 32 layers
     * x (attention 41,943,040 + router 32,768 + norms 8,192 + 2 experts x 176,160,768) +
     * embedding and head 2 x 131,072,000 + final norm 4,096 */
    CHECK_INT(ap_model_active_params(&m),
              32LL * (41943040 + 32768 + 8192 + 2 * 176160768LL) + 2 * 131072000LL + 4096);
    CHECK_INT(ap_model_embedding_params(&m), 32000LL * 4096);
    CHECK_INT(ap_model_head_params(&m), 32000LL * 4096 + 4096);
    CHECK_INT(ap_model_nonembed_params(&m), ap_model_total_params(&m) - 32000LL * 4096 * 2);
}

/* ---- paper models ------------------------------------------------------------------------------ */

static void check_paper(const char *name, int64_t l, int64_t h, int64_t a, int64_t V,
                        int64_t s) {
    ap_model m;
    ap_err err = {{0}};
    CHECK_INT(load_example(name, &m, &err), AP_OK);
    CHECK_INT(m.layers, l);
    CHECK_INT(m.hidden, h);
    CHECK_INT(m.heads, a);
    /* Narayanan et al. 2021 (arXiv:2104.04473) Sec. 5.1:
     * P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) = 12lh^2 + 13lh + (V + s)h; the paper's
     * formula leaves out the final layer norm (2h), which the model has. */
    int64_t paper = 12 * l * h * h + 13 * l * h + (V + s) * h;
    CHECK_INT(ap_model_total_params(&m), paper + 2 * h);
    /* Same paper, Appendix: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per iteration with full
     * recomputation (4 forward-equivalents of the layers, 3 of the logit layer); one forward per
     * token is 24 l h^2 (1 + s/(6h)) + 2 V h. */
    double dl = (double)l, dh = (double)h, ds = (double)s, dV = (double)V;
    double fwd = 24.0 * dl * dh * dh * (1.0 + ds / (6.0 * dh)) + 2.0 * dV * dh;
    CHECK_NEAR(ap_model_fwd_flops_per_token(&m, s), fwd, 1e-12);
    double per_iter = 96.0 * ds * dl * dh * dh * (1.0 + ds / (6.0 * dh) + dV / (16.0 * dl * dh));
    double layers_fwd = ap_model_fwd_flops_per_token(&m, s) - 2.0 * dV * dh;
    CHECK_NEAR(4.0 * layers_fwd * ds + 3.0 * 2.0 * dV * dh * ds, per_iter, 1e-12);
    CHECK(m.dropout == 1);
    CHECK(m.pos == AP_POS_LEARNED);
    CHECK_INT(m.seq_len, s);
}

static void test_paper_models(void) {
    /* GPT-3 175B (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, 96 heads, s 2048;
     * V 51200 as in Narayanan et al. 2021 */
    check_paper("gpt3-175b.json", 96, 12288, 96, 51200, 2048);
    /* Korthikanti et al. 2022 (arXiv:2205.05198) Table 3, 22B: 64 heads, h 6144, 48 layers */
    check_paper("megatron-22b.json", 48, 6144, 64, 51200, 2048);
    /* Narayanan et al. 2021 Table 1, 1T (1008B): 160 heads, h 25600, 128 layers */
    check_paper("megatron-1t.json", 128, 25600, 160, 51200, 2048);
    check_paper("tiny-gpt.json", 4, 256, 8, 1024, 512);
    /* the published round numbers: 175B and 1008B (Narayanan Table 1: 1008.0) */
    ap_model m;
    ap_err err = {{0}};
    CHECK_INT(load_example("gpt3-175b.json", &m, &err), AP_OK);
    CHECK_NEAR((double)ap_model_total_params(&m), 174.6e9, 1e-3);
    CHECK_INT(load_example("megatron-1t.json", &m, &err), AP_OK);
    CHECK_NEAR((double)ap_model_total_params(&m), 1008.0e9, 1e-3);
}

/* ---- other HF architectures, inline configs ---------------------------------------------------- */

static int64_t parse_total(const char *json, ap_model *m) {
    ap_err err = {{0}};
    ap_status st = ap_model_parse(json, strlen(json), "inline.json", m, &err);
    if (st != AP_OK) {
        fprintf(stderr, "inline.json: %s\n", err.msg);
        return -1;
    }
    return ap_model_total_params(m);
}

static void test_hf_inline(void) {
    ap_model m;
    /* mistralai/Mistral-7B-v0.1: 7,241,732,096 (model.safetensors.index.json total_size
     * 14,483,464,192 B / 2) */
    CHECK_INT(parse_total("{\"model_type\":\"mistral\",\"hidden_size\":4096,\"intermediate_size\":"
                          "14336,\"max_position_embeddings\":32768,\"num_attention_heads\":32,"
                          "\"num_hidden_layers\":32,\"num_key_value_heads\":8,\"sliding_window\":"
                          "4096,\"tie_word_embeddings\":false,\"vocab_size\":32000}", &m),
              7241732096LL);
    CHECK_INT(m.seq_len, 4096);
    CHECK_INT(m.max_positions, 32768);
    /* google/gemma-2-9b: 9,241,705,984 (total_size 18,483,411,968 B / 2): head_dim 256 with 16
     * heads (q 4096 wide from h 3584), 4 RMSNorms per layer, tied head */
    CHECK_INT(parse_total("{\"model_type\":\"gemma2\",\"hidden_size\":3584,\"head_dim\":256,"
                          "\"intermediate_size\":14336,\"max_position_embeddings\":8192,"
                          "\"num_attention_heads\":16,\"num_hidden_layers\":42,"
                          "\"num_key_value_heads\":8,\"vocab_size\":256000,\"hidden_act\":"
                          "\"gelu_pytorch_tanh\"}", &m), 9241705984LL);
    CHECK_INT(m.norms_per_layer, 4);
    /* tiiuae/falcon-7b: 6,921,720,704 (transformers num_parameters(); MQA, parallel attention,
     * one layer norm per layer, no biases) */
    CHECK_INT(parse_total("{\"model_type\":\"falcon\",\"hidden_size\":4544,\"num_attention_heads\":"
                          "71,\"num_hidden_layers\":32,\"vocab_size\":65024,\"multi_query\":true,"
                          "\"parallel_attn\":true,\"bias\":false,\"alibi\":false,"
                          "\"new_decoder_architecture\":false}", &m), 6921720704LL);
    CHECK_INT(m.kv_heads, 1);
    CHECK_INT(m.head_dim, 64);
    /* tiiuae/falcon-40b: 41,303,293,952 (num_parameters(); new decoder architecture, 8 kv
     * heads, ln_attn + ln_mlp) */
    CHECK_INT(parse_total("{\"model_type\":\"falcon\",\"hidden_size\":8192,\"num_attention_heads\":"
                          "128,\"num_hidden_layers\":60,\"num_kv_heads\":8,\"vocab_size\":65024,"
                          "\"new_decoder_architecture\":true,\"parallel_attn\":true,\"bias\":"
                          "false}", &m), 41303293952LL);
    /* bigscience/bloom-560m: 559,214,592 (num_parameters(); n_embed alias, embedding layer
     * norm, ALiBi) */
    CHECK_INT(parse_total("{\"model_type\":\"bloom\",\"n_embed\":1024,\"n_layer\":24,"
                          "\"num_attention_heads\":16,\"vocab_size\":250880}", &m), 559214592LL);
    CHECK(m.pos == AP_POS_ALIBI);
    CHECK_INT(m.seq_len, 2048);
    /* EleutherAI/pythia-160m: 162,322,944 (num_parameters(); untied embed_out) */
    CHECK_INT(parse_total("{\"model_type\":\"gpt_neox\",\"hidden_size\":768,\"intermediate_size\":"
                          "3072,\"max_position_embeddings\":2048,\"num_attention_heads\":12,"
                          "\"num_hidden_layers\":12,\"vocab_size\":50304,\"rotary_pct\":0.25,"
                          "\"use_parallel_residual\":true,\"tie_word_embeddings\":false}", &m),
              162322944LL);
    CHECK(m.parallel_attn == 1);
    /* Qwen/Qwen1.5-MoE-A2.7B (qwen2_moe), worked by hand from modeling_qwen2_moe.py: per layer
     * attention 4*2048^2 + 3*2048 (q,k,v biases), router 60*2048, 60 experts of 3*2048*1408,
     * shared expert 3*2048*5632 + shared gate 2048, 2 norms of 2048; 24 layers; untied
     * embedding and head of 151936*2048; final norm. = 14,315,784,192 ("14.3B" in its card) */
    int64_t layer = 4LL * 2048 * 2048 + 3 * 2048 + 60 * 2048 + 60LL * 3 * 2048 * 1408 +
                    3LL * 2048 * 5632 + 2048 + 2 * 2048;
    CHECK_INT(parse_total("{\"model_type\":\"qwen2_moe\",\"hidden_size\":2048,\"intermediate_size\":"
                          "5632,\"moe_intermediate_size\":1408,\"shared_expert_intermediate_size\":"
                          "5632,\"num_experts\":60,\"num_experts_per_tok\":4,\"num_attention_heads\":"
                          "16,\"num_key_value_heads\":16,\"num_hidden_layers\":24,\"vocab_size\":"
                          "151936,\"decoder_sparse_step\":1,\"mlp_only_layers\":[],"
                          "\"tie_word_embeddings\":false}", &m),
              24 * layer + 2 * 151936LL * 2048 + 2048);
    CHECK_INT(layer, 570560512);
    CHECK_INT(24 * layer + 2 * 151936LL * 2048 + 2048, 14315784192LL);
    /* decoder_sparse_step 2: layers 1, 3, 5, ... are MoE ((i + 1) % 2 == 0) */
    CHECK(parse_total("{\"model_type\":\"qwen2_moe\",\"hidden_size\":64,\"intermediate_size\":128,"
                      "\"num_experts\":4,\"num_experts_per_tok\":2,\"num_attention_heads\":4,"
                      "\"num_hidden_layers\":6,\"vocab_size\":100,\"decoder_sparse_step\":2}",
                      &m) > 0);
    CHECK(!ap_model_layer_is_moe(&m, 0));
    CHECK(ap_model_layer_is_moe(&m, 1));
    CHECK(!ap_model_layer_is_moe(&m, 2));
    CHECK(ap_model_layer_is_moe(&m, 5));
    /* llama with an explicit head_dim narrower than hidden/heads: q,o 1024*(16*32), k,v
     * 1024*(4*32); MLP 3*1024*2816; 2 norms; 2 layers; untied 1000-token embedding and head */
    CHECK_INT(parse_total("{\"model_type\":\"llama\",\"hidden_size\":1024,\"head_dim\":32,"
                          "\"num_attention_heads\":16,\"num_key_value_heads\":4,"
                          "\"intermediate_size\":2816,\"num_hidden_layers\":2,\"vocab_size\":1000,"
                          "\"rope_scaling\":{\"factor\":32.0,\"low_freq_factor\":1.0,"
                          "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,"
                          "\"rope_type\":\"llama3\"},\"max_position_embeddings\":131072}", &m),
              2 * (2 * 1024LL * 512 + 2 * 1024LL * 128 + 3 * 1024LL * 2816 + 2 * 1024) +
                  2 * 1000LL * 1024 + 1024);
    CHECK_INT(m.head_dim, 32);
    CHECK_INT(m.seq_len, 4096);        /* min(max_position_embeddings, 4096) */
    CHECK_INT(m.max_positions, 131072);
    ap_layer_info li;
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.qkv_out, (16 + 2 * 4) * 32);
    CHECK_INT(li.attn_out_in, 16 * 32);

    /* a model directory containing config.json, named after the directory */
    const char *dir = scratch;
    char sub[512], cfg[600];
    snprintf(sub, sizeof sub, "%s/my-llama", dir);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", sub);
    CHECK(system(cmd) == 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", sub);
    char *text = tl_read(tl_path("examples/models/llama-2-7b.json"));
    CHECK(text != NULL);
    if (text) {
        /* drop _name_or_path so the name comes from the directory */
        char *p = strstr(text, "\"_name_or_path\"");
        if (p) memset(p, ' ', strchr(p, ',') + 1 - p);
        CHECK(tl_write(cfg, text) == 0);
        free(text);
        ap_err err = {{0}};
        CHECK_INT(ap_model_load(sub, &m, &err), AP_OK);
        CHECK_INT(ap_model_total_params(&m), 6738415616LL);
        CHECK_STR(m.name, "my-llama");
    }
}

/* ---- FLOPs, fingerprint, native defaults -------------------------------------------------------- */

static void test_flops_and_fingerprint(void) {
    ap_model m, m2;
    ap_err err = {{0}};
    CHECK_INT(load_example("llama-2-7b.json", &m, &err), AP_OK);
    /* Llama-2-7B by hand: 2 x (32 layers x (4*4096^2 + 3*4096*11008) + head 32000*4096) +
     * attention 32 x 4 * s * 4096 at s = 4096 */
    double w = 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008) + 32000.0 * 4096;
    CHECK_NEAR(ap_model_fwd_flops_per_token(&m, 4096), 2.0 * w + 32.0 * 4 * 4096 * 4096.0, 1e-12);
    /* s <= 0 means the model's own sequence length */
    CHECK_NEAR(ap_model_fwd_flops_per_token(&m, 0), ap_model_fwd_flops_per_token(&m, m.seq_len),
               1e-15);
    /* MoE: only top_k experts count. Mixtral: 2 x active matmul weights (+ head once) */
    CHECK_INT(load_example("mixtral-8x7b.json", &m2, &err), AP_OK);
    double wa = 32.0 * (41943040.0 + 4096.0 * 8 + 2 * 176160768.0) + 32000.0 * 4096;
    CHECK_NEAR(ap_model_fwd_flops_per_token(&m2, 1), 2.0 * wa + 32.0 * 4 * 1 * 4096, 1e-12);

    uint64_t f = ap_model_fingerprint(&m);
    m2 = m;
    CHECK(ap_model_fingerprint(&m2) == f);
    snprintf(m2.name, sizeof m2.name, "renamed");
    CHECK(ap_model_fingerprint(&m2) == f); /* the name is not cost-relevant */
    m2.seq_len = 2048;
    CHECK(ap_model_fingerprint(&m2) != f);
    m2 = m;
    m2.kv_heads = 8;
    CHECK(ap_model_fingerprint(&m2) != f);
    m2 = m;
    m2.moe.capacity_factor = 1.25;
    CHECK(ap_model_fingerprint(&m2) != f);
    CHECK(ap_model_fingerprint(&m) == f);

    /* the model object of a reference row (shared/reference/published-public.json: Narayanan
     * 2021 Table 1's GPT 1.7B, with the counts the source states and kv_heads null) reads as
     * the same model as without them: the stated counts are figures, not inputs */
    ap_model n, n2;
    const char *ref = "{\"name\": \"GPT 1.7B\", \"layers\": 24, \"hidden\": 2304, \"heads\": 24, "
                      "\"kv_heads\": null, \"ffn_hidden\": 9216, \"vocab\": 51200, \"seq_len\": "
                      "2048, \"params_b\": 1.7, \"largest_layer_params_m\": null}";
    const char *bare = "{\"name\": \"GPT 1.7B\", \"layers\": 24, \"hidden\": 2304, \"heads\": 24, "
                       "\"ffn_hidden\": 9216, \"vocab\": 51200, \"seq_len\": 2048}";
    CHECK_INT(ap_model_parse(ref, strlen(ref), "r.json", &n, &err), AP_OK);
    CHECK_INT(ap_model_parse(bare, strlen(bare), "r.json", &n2, &err), AP_OK);
    CHECK(ap_model_fingerprint(&n) == ap_model_fingerprint(&n2));
    CHECK_INT(n.kv_heads, 24);

    /* native defaults (docs/models.md) */
    const char *gpt = "{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100}";
    CHECK_INT(ap_model_parse(gpt, strlen(gpt), "d.json", &n, &err), AP_OK);
    CHECK_STR(n.name, "d");
    CHECK_INT(n.kv_heads, 4);
    CHECK_INT(n.head_dim, 16);
    CHECK_INT(n.ffn_hidden, 256);
    CHECK_INT(n.seq_len, 2048);
    CHECK_INT(n.learned_pos, 2048);
    CHECK(n.act == AP_ACT_GELU && n.norm == AP_NORM_LAYERNORM && n.pos == AP_POS_LEARNED);
    CHECK(n.bias && n.tied_embeddings && n.dropout);
    const char *sw = "{\"layers\":2,\"hidden\":4096,\"heads\":32,\"kv_heads\":8,\"vocab\":100,"
                     "\"activation\":\"swiglu\"}";
    CHECK_INT(ap_model_parse(sw, strlen(sw), "s.json", &n, &err), AP_OK);
    CHECK_INT(n.ffn_hidden, 11008); /* 8*4096/3 = 10922 -> next multiple of 256 (Llama 7B) */
    CHECK(n.norm == AP_NORM_RMSNORM && n.pos == AP_POS_ROTARY);
    CHECK(!n.bias && !n.tied_embeddings && !n.dropout);
    CHECK_INT(n.learned_pos, 0);
    const char *moe = "{\"layers\":4,\"hidden\":64,\"heads\":4,\"vocab\":100,\"moe\":{\"experts\":8,"
                      "\"top_k\":2,\"ffn_hidden\":32,\"shared_experts\":1,"
                      "\"first_dense_layers\":1}}";
    CHECK_INT(ap_model_parse(moe, strlen(moe), "m.json", &n, &err), AP_OK);
    CHECK(!ap_model_layer_is_moe(&n, 0));
    CHECK(ap_model_layer_is_moe(&n, 1) && ap_model_layer_is_moe(&n, 3));
    ap_layer_info li;
    ap_model_layer(&n, 1, &li);
    /* gelu expert with biases: 2*64*32 + 32 + 64; shared 1 x the same; router 64*8 */
    CHECK_INT(li.expert_params, 2 * 64 * 32 + 32 + 64);
    CHECK_INT(li.shared_params, 2 * 64 * 32 + 32 + 64);
    CHECK_INT(li.router_params, 64 * 8);
    CHECK_INT(li.total_params - li.active_params, 6 * li.expert_params);
}

static int one_line_msg(const char *s) { return s[0] != '\0' && strchr(s, '\n') == NULL; }

/* ---- today's families: committed config.json files (tests/data/hf/, sources in SOURCES.md) ---- */

typedef struct {
    const char *file;
    int64_t total;        /* exact parameter count */
    double card_b;        /* the publisher's figure, in billions (0 = none quoted) */
    double card_tol_b;    /* half the last digit of that figure */
    int card_what;        /* 0 total, 1 non-embedding, 2 total minus embedding lookup (gpt-oss
                           * counts the unembedding), 3 text part of a multimodal total */
} family_case;

static void test_families(void) {
    /* The exact totals are the transformers counting rules of each modeling file applied to the
     * committed config (several worked by hand in test_family_rules); the card figures are the
     * rounded totals the publishers print, checked within their last digit. */
    static const family_case cases[] = {
        /* Qwen/Qwen3-8B model card "8.2B, non-embedding 6.95B" */
        {"qwen3-8b.json", 8190735360LL, 6.95, 0.005, 1},
        /* Qwen/Qwen3-0.6B card "0.6B, non-embedding 0.44B" (tied) */
        {"qwen3-0.6b.json", 596049920LL, 0.44, 0.005, 1},
        /* Qwen/Qwen3-30B-A3B card "30.5B total, 3.3B activated, non-embedding 29.9B" */
        {"qwen3-30b-a3b.json", 30532122624LL, 30.5, 0.05, 0},
        /* microsoft/Phi-3.5-mini-instruct card "3.8B" */
        {"phi-3.5-mini-instruct.json", 3821079552LL, 3.8, 0.05, 0},
        /* microsoft/Phi-4-mini-instruct card "3.8B" (tied, 200064 vocabulary) */
        {"phi-4-mini-instruct.json", 3836021760LL, 3.8, 0.05, 0},
        /* microsoft/Phi-3.5-MoE-instruct card "42B total, 6.6B active" */
        {"phi-3.5-moe-instruct.json", 41873153344LL, 42, 0.5, 0},
        /* google/gemma-7b (Gemma report, arXiv:2403.08295 Table 2: non-embedding parameters
         * 7,751,248,896) */
        {"gemma-7b.json", 8537680896LL, 7.751248896, 1e-10, 1},
        /* google/gemma-2b (same table: non-embedding 1,981,884,416) */
        {"gemma-2b.json", 2506172416LL, 1.981884416, 1e-10, 1},
        /* google/gemma-3-1b (Gemma 3 report Table 1: 302M embedding + 698M non-embedding) */
        {"gemma-3-1b-pt.json", 999885952LL, 0.698, 0.0005, 1},
        /* google/gemma-3-4b text_config (Gemma 3 report Table 1: 3,209M non-embedding; the
         * 417M vision encoder is not counted) */
        {"gemma-3-4b-pt.json", 3880263168LL, 3.209, 0.0005, 1},
        /* allenai/OLMo-2-1124-7B: "7B" in its name and card */
        {"olmo-2-1124-7b.json", 7298617344LL, 7, 0.5, 0},
        /* meta-llama/Llama-4-Scout-17B-16E card "109B total, 17B active" incl. the vision
         * encoder; the text model is 107.8B */
        {"llama-4-scout-17b-16e.json", 107769861120LL, 109, 1.5, 3},
        /* meta-llama/Llama-4-Maverick-17B-128E card "400B total, 17B active" */
        {"llama-4-maverick-17b-128e.json", 400711848960LL, 400, 1.5, 3},
        /* openai gpt-oss model card (arXiv:2508.10925) Table 1: 20.91B total, 3.61B active */
        {"gpt-oss-20b.json", 20914757184LL, 20.91, 0.005, 0},
        /* same table: 116.83B total, 5.13B active */
        {"gpt-oss-120b.json", 116829156672LL, 116.83, 0.005, 0},
        /* deepseek-ai/DeepSeek-V2-Lite card "15.7B total, 2.4B activated" */
        {"deepseek-v2-lite.json", 15706484224LL, 15.7, 0.05, 0},
        /* deepseek-ai/deepseek-moe-16b-base (DeepSeekMoE paper, arXiv:2401.06066 Table 3:
         * 16.4B total, 2.8B activated) */
        {"deepseek-moe-16b-base.json", 16375728128LL, 16.4, 0.05, 0},
        /* CohereForAI/c4ai-command-r-v01 card "35 billion parameter" */
        {"c4ai-command-r-v01.json", 34980831232LL, 35, 0.5, 0},
        /* bigcode/starcoder2-7b: "7B" in its name and card */
        {"starcoder2-7b.json", 7173923840LL, 7, 0.5, 0},
        /* internlm/internlm2-7b: "7B" in its name and card */
        {"internlm2-7b.json", 7737708544LL, 7, 1, 0},
        /* THUDM/chatglm3-6b: "6B" in its name and card */
        {"chatglm3-6b.json", 6243584000LL, 6, 0.5, 0},
        /* THUDM/glm-4-9b: "9B" in its name and card */
        {"glm-4-9b.json", 9399951360LL, 9, 0.5, 0},
        /* stabilityai/stablelm-2-1_6b card "1.6B" */
        {"stablelm-2-1_6b.json", 1644515328LL, 1.6, 0.05, 0},
        /* baichuan-inc/Baichuan2-7B-Base and 13B-Base: "7B", "13B" in their names and cards */
        {"baichuan2-7b-base.json", 7505973248LL, 7, 0.55, 0},
        {"baichuan2-13b-base.json", 13896668160LL, 13, 1, 0},
        /* EleutherAI/gpt-j-6b: "6B" in its name and card */
        {"gpt-j-6b.json", 6050882784LL, 6, 0.5, 0},
        /* openbmb/MiniCPM-2B (MiniCPM paper, arXiv:2404.06395 Table: 2.4B non-embedding) */
        {"minicpm-2b-sft-bf16.json", 2724880896LL, 2.4, 0.05, 1},
        /* openbmb/MiniCPM-MoE-8x2B card "13.6B" (non-embedding), "4B activated" */
        {"minicpm-moe-8x2b.json", 13873291776LL, 13.6, 0.05, 1},
        /* llava-hf/llava-1.5-7b-hf text_config: Vicuna-7B with a 32064-row vocabulary; the
         * CLIP tower and projector are not counted */
        {"llava-1.5-7b-hf.json", 6738939904LL, 0, 0, 0},
        /* mosaicml/mpt-7b: 32 x (4h^2 + 2 x 4h x 16384 + 2 bias-free LayerNorms) + 50432 x 4096
         * tied + norm_f = 6,649,286,656 by hand (test_family_rules); MosaicML's "6.7B" is this
         * rounded up from 6.65 */
        {"mpt-7b.json", 6649286656LL, 0, 0, 0},
        /* databricks/dbrx-base card "132B total parameters of which 36B parameters are active" */
        {"dbrx-base.json", 131596523520LL, 132, 0.5, 0},
        /* Nemotron-4 15B (Parmar et al. 2024, arXiv:2402.16819 Sec. 2: "3.2 billion embedding
         * parameters and 12.5 billion non-embedding parameters") */
        {"nemotron-4-15b.json", 15628775424LL, 12.5, 0.05, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const family_case *fc = &cases[i];
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/hf/%s", fc->file);
        ap_model m;
        ap_err err = {{0}};
        ap_status st = ap_model_load(tl_path(rel), &m, &err);
        if (st != AP_OK) fprintf(stderr, "%s: %s\n", fc->file, err.msg);
        CHECK_INT(st, AP_OK);
        if (st != AP_OK) continue;
        int64_t total = ap_model_total_params(&m);
        if (total != fc->total) fprintf(stderr, "%s: total %lld\n", fc->file, (long long)total);
        CHECK_INT(total, fc->total);
        double v = fc->card_what == 1   ? (double)ap_model_nonembed_params(&m)
                   : fc->card_what == 2 ? (double)(total - ap_model_embedding_params(&m))
                                        : (double)total;
        if (fc->card_b > 0 && fc->card_what != 3 && fabs(v / 1e9 - fc->card_b) > fc->card_tol_b) {
            fprintf(stderr, "%s: %.4fB vs card %.4fB\n", fc->file, v / 1e9, fc->card_b);
            CHECK(0);
        }
        /* multimodal: the text model is below the card's total by the vision tower (< 1B) */
        if (fc->card_what == 3)
            CHECK(v / 1e9 < fc->card_b + fc->card_tol_b && v / 1e9 > fc->card_b - 1.5 - 1.0);
    }
}

/* Hand-worked counts of the new counting rules, independent of model.c. */
static void test_family_rules(void) {
    ap_model m;
    ap_err err = {{0}};
    ap_layer_info li;
    /* Qwen3-8B (modeling_qwen3.py): q 4096x4096, k,v 4096x1024, o 4096x4096, q_norm and k_norm
     * of head_dim 128, gate/up/down 3x4096x12288, 2 RMSNorms; untied 151936x4096 twice */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/qwen3-8b.json"), &m, &err), AP_OK);
    int64_t l = 2 * 4096LL * 4096 + 2 * 4096LL * 1024 + 2 * 128 + 3 * 4096LL * 12288 + 2 * 4096;
    CHECK_INT(ap_model_total_params(&m), 36 * l + 2 * 151936LL * 4096 + 4096);
    CHECK(m.qk_norm == AP_QKNORM_HEAD && m.window == 0);
    CHECK_NEAR(m.rope_theta, 1e6, 1e-12);
    /* OLMo-2 7B: q_norm 32x128 and k_norm 32x128 (full width), post-norms */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/olmo-2-1124-7b.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.attn_params, 4 * 4096LL * 4096 + 2 * 4096);
    CHECK(m.norm_order == AP_NORM_POST);
    /* gpt-oss-20b (modeling_gpt_oss.py): q,k,v,o with biases, 64 sinks; router 32x2880 + 32
     * bias; each expert gate_up 2880x5760 + 5760, down 2880x2880 + 2880; 2 RMSNorms */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/gpt-oss-20b.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.attn_params, 2880LL * (4096 + 512 + 512) + 4096LL * 2880 + (4096 + 1024) + 2880 +
                                  64);
    CHECK_INT(li.router_params, 32LL * 2880 + 32);
    CHECK_INT(li.expert_params, 2880LL * 5760 + 5760 + 2880LL * 2880 + 2880);
    CHECK_INT(li.total_params, li.attn_params + li.router_params + 32 * li.expert_params +
                                   2 * 2880);
    /* alternating sliding window of 128 from layer_types: 0 local, 1 global */
    CHECK_INT(m.window, 128);
    CHECK(ap_model_layer_is_local(&m, 0) && !ap_model_layer_is_local(&m, 1));
    CHECK_INT(ap_model_local_layers(&m), 12);
    CHECK_INT(li.attn_window, 128);
    /* active: 4 of 32 experts; minus the embedding lookup = the card's 3.61B */
    CHECK_NEAR((double)(ap_model_active_params(&m) - ap_model_embedding_params(&m)) / 1e9, 3.61,
               0.005 / 3.61);
    /* attention FLOPs: 12 global layers at s, 12 local at 128 (per token, forward) */
    double attn = 2.0 * 64 * (64 + 64) * (12.0 * 4096 + 12.0 * 128);
    double w_flops = ap_model_fwd_flops_per_token(&m, 4096) - ap_model_fwd_flops_per_token(&m, 1);
    CHECK_NEAR(w_flops, attn - 2.0 * 64 * 128 * (12.0 * 1 + 12.0 * 1), 1e-12);
    /* Phi-3.5-MoE: LayerNorm with bias (2h each), q,k,v,o biases, lm_head bias (V) */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/phi-3.5-moe-instruct.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.norm_params, 2 * 2 * 4096);
    CHECK_INT(li.attn_params, 2 * 4096LL * 4096 + 2 * 4096LL * 1024 + 4096 + 1024 + 1024 + 4096);
    CHECK_INT(ap_model_head_params(&m), 2 * 4096 + 32064LL * 4096 + 32064);
    /* GPT-J: one LayerNorm per layer (parallel), MLP biases, no attention biases, lm_head bias */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/gpt-j-6b.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.attn_params, 4 * 4096LL * 4096);
    CHECK_INT(li.mlp_params, 2 * 4096LL * 16384 + 16384 + 4096);
    CHECK_INT(li.norm_params, 2 * 4096);
    CHECK_NEAR(m.rotary_pct, 64.0 / 256.0, 1e-15);
    /* Command-R: one bias-free LayerNorm per layer (h), parallel attention and MLP */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/c4ai-command-r-v01.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.norm_params, 8192);
    CHECK(m.parallel_attn && m.tied_embeddings);
    /* ChatGLM3-6B: qkv 4096 -> (32 + 2*2)*128 with bias, dense, SwiGLU 13696, 2 RMSNorms */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/chatglm3-6b.json"), &m, &err), AP_OK);
    CHECK_INT(ap_model_total_params(&m),
              28 * (4096LL * 4608 + 4608 + 4096LL * 4096 + 3 * 4096LL * 13696 + 2 * 4096) +
                  2 * 65024LL * 4096 + 4096);
    /* Gemma 3 1B: sliding window 512 on 5 of every 6 layers; layer 5 global */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/gemma-3-1b-pt.json"), &m, &err), AP_OK);
    CHECK(ap_model_layer_is_local(&m, 4) && !ap_model_layer_is_local(&m, 5));
    CHECK_INT(ap_model_local_layers(&m), 26 - 4);
    CHECK(m.gate_act == AP_GATE_GELU && m.qk_norm == AP_QKNORM_HEAD && m.norms_per_layer == 4);
    CHECK_NEAR(m.attn_softcap, 0, 0);
    /* Llama 4 Scout (text_config): 3 chunked (8192) : 1 global NoPE; every layer MoE with one
     * shared expert; the outer tie_word_embeddings false applies */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/llama-4-scout-17b-16e.json"), &m, &err), AP_OK);
    CHECK(m.text_of_multimodal && m.window_chunked && m.nope_global && !m.tied_embeddings);
    CHECK(ap_model_layer_is_local(&m, 2) && !ap_model_layer_is_local(&m, 3));
    CHECK_INT(m.moe.shared_experts, 1);
    CHECK(m.router_act == AP_ROUTER_SIGMOID);
    CHECK_NEAR((double)ap_model_active_params(&m) / 1e9, 17, 0.5 / 17);
    /* Maverick: MoE on odd layers (interleave_moe_layer_step 2), dense layers 16384 wide */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/llama-4-maverick-17b-128e.json"), &m, &err),
              AP_OK);
    CHECK(!ap_model_layer_is_moe(&m, 0) && ap_model_layer_is_moe(&m, 1));
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.mlp_params, 3 * 5120LL * 16384);
    /* DeepSeek-V2-Lite: MLA without q compression, softmax router without correction bias */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/deepseek-v2-lite.json"), &m, &err), AP_OK);
    CHECK(!m.moe.router_bias && m.router_act == AP_ROUTER_SOFTMAX && m.mla.q_lora_rank == 0);
    CHECK_STR(m.rope_scaling, "yarn");
    CHECK_NEAR(m.rope_factor, 40, 0);
    /* Baichuan2-13B: no max_position_embeddings -> ALiBi */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/baichuan2-13b-base.json"), &m, &err), AP_OK);
    CHECK(m.pos == AP_POS_ALIBI);
    /* Nemotron-NAS is refused, naming the nearest supported form */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/llama-3.1-nemotron-51b-instruct.json"), &m,
                            &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "nearest supported form");
    CHECK_CONTAINS(err.msg, "'llama'");
    CHECK(one_line_msg(err.msg));
    /* a layer_types pattern that is not periodic is refused */
    const char *odd = "{\"model_type\":\"gpt_oss\",\"hidden_size\":64,\"num_hidden_layers\":4,"
                      "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
                      "\"intermediate_size\":64,\"num_local_experts\":4,\"vocab_size\":100,"
                      "\"layer_types\":[\"full_attention\",\"sliding_attention\","
                      "\"sliding_attention\",\"full_attention\"]}";
    CHECK_INT(ap_model_parse(odd, strlen(odd), "odd.json", &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "layer_types");
    /* an expert field of 0 with the top-k absent, null or 0 is a dense model */
    static const char *const dense[] = {
        "{\"model_type\":\"mixtral\",\"num_local_experts\":0,\"num_experts_per_tok\":0,",
        "{\"model_type\":\"phimoe\",\"num_local_experts\":0,",
        "{\"model_type\":\"minicpm\",\"num_experts\":0,\"num_experts_per_tok\":null,",
        "{\"model_type\":\"llama4_text\",\"num_local_experts\":0,\"num_experts_per_tok\":0,",
        "{\"model_type\":\"gpt_oss\",\"num_local_experts\":0,\"experts_per_token\":0,"};
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "%s\"vocab_size\":100,\"intermediate_size\":64,"
                 "\"hidden_size\":64,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
                 "\"head_dim\":16}", dense[i]);
        CHECK_INT(ap_model_parse(json, strlen(json), "dense.json", &m, &err), AP_OK);
        CHECK_INT(m.moe.experts, 0);
    }
    /* gpt-oss's two top-k fields agreeing (as in the published configs) */
    const char *agree = "{\"model_type\":\"gpt_oss\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                        "\"num_attention_heads\":4,\"head_dim\":16,\"intermediate_size\":64,"
                        "\"vocab_size\":100,\"num_local_experts\":8,\"num_experts_per_tok\":2,"
                        "\"experts_per_token\":2}";
    CHECK_INT(ap_model_parse(agree, strlen(agree), "agree.json", &m, &err), AP_OK);
    CHECK_INT(m.moe.top_k, 2);
    /* every rope type transformers defines, and the legacy su / mrope, is accepted and kept */
    static const char *const ropes[] = {"default", "linear", "dynamic", "yarn", "longrope",
                                        "llama3", "su", "mrope"};
    for (size_t i = 0; i < sizeof ropes / sizeof ropes[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"model_type\":\"llama\",\"vocab_size\":100,"
                 "\"intermediate_size\":64,\"hidden_size\":64,\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":4,\"rope_scaling\":{\"%s\":\"%s\","
                 "\"factor\":2.0}}", i % 2 ? "type" : "rope_type", ropes[i]);
        CHECK_INT(ap_model_parse(json, strlen(json), "rope.json", &m, &err), AP_OK);
        CHECK_STR(m.rope_scaling, ropes[i]);
    }
    /* a multimodal config whose text model is not supported names the text_config */
    const char *mm = "{\"model_type\":\"whatever_vl\",\"text_config\":{\"model_type\":\"bert\"}}";
    CHECK_INT(ap_model_parse(mm, strlen(mm), "mm.json", &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "text_config");
    CHECK_CONTAINS(err.msg, "'bert'");
}

/* ---- bad input ---------------------------------------------------------------------------------- */

static int one_line(const char *s) { return s[0] != '\0' && strchr(s, '\n') == NULL; }

/* Parse `json` (as file `bad.json` in a temp dir via the loader) and expect AP_ERR_INPUT with a
 * one-line message containing `needle1` and `needle2`. */
static void bad(const char *json, const char *needle1, const char *needle2) {
    char path[600];
    snprintf(path, sizeof path, "%s/bad.json", scratch);
    CHECK(tl_write(path, json) == 0);
    ap_model m;
    ap_model_init(&m);
    m.layers = 12345;
    ap_err err = {{0}};
    ap_status st = ap_model_load(path, &m, &err);
    CHECK_INT(st, AP_ERR_INPUT);
    CHECK(one_line(err.msg));
    CHECK_CONTAINS(err.msg, "bad.json");
    if (needle1) CHECK_CONTAINS(err.msg, needle1);
    if (needle2) CHECK_CONTAINS(err.msg, needle2);
    CHECK_INT(m.layers, 12345); /* *out untouched on failure */
}

#define LLAMA_HEAD "{\"model_type\":\"llama\",\"vocab_size\":32000,\"intermediate_size\":11008,"
/* A Mixtral-sized config of model_type `t` up to its expert fields */
#define MOE_HEAD(t)                                                                  \
    "{\"model_type\":\"" t "\",\"vocab_size\":32000,\"intermediate_size\":14336," \
    "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"

/* MPT, DBRX and Nemotron (issue 15's validation sources train MPT; DBRX and Nemotron-4 are the
 * other MosaicML and Megatron-native families): shapes read from their nested or Megatron-style
 * fields, counted by hand. */
static void test_mpt_dbrx_nemotron(void) {
    ap_model m;
    ap_err err = {{0}};
    ap_layer_info li;
    /* mpt-7b: Wqkv 4096 x 3 x 4096 and out_proj, up/down 4096 x 16384, two LayerNorms without
     * bias (no_bias), ALiBi (no position table), tied */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/mpt-7b.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.total_params, 4 * 4096LL * 4096 + 2 * 4096LL * 16384 + 2 * 4096);
    CHECK(m.pos == AP_POS_ALIBI && m.learned_pos == 0 && m.act == AP_ACT_GELU && !m.bias &&
          m.norm_no_bias && m.tied_embeddings && m.seq_len == 2048);
    /* dbrx-base: Wqkv 6144 x (6144 + 2 x 8 x 128), out_proj; router 6144 x 16; 16 GLU experts
     * (w1, v1, w2) of 10752; bias-free LayerNorms; untied 100352 x 6144 twice */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/dbrx-base.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.attn_params, 6144LL * (6144 + 2048) + 6144LL * 6144);
    CHECK_INT(li.router_params, 6144LL * 16);
    CHECK_INT(li.expert_params, 3 * 6144LL * 10752);
    CHECK_INT(ap_model_total_params(&m),
              40 * (li.attn_params + li.router_params + 16 * li.expert_params + 2 * 6144) +
                  2 * 100352LL * 6144 + 6144);
    CHECK(m.moe.top_k == 4 && m.act == AP_ACT_SWIGLU && m.gate_act == AP_GATE_SILU &&
          m.pos == AP_POS_ROTARY && !m.tied_embeddings);
    CHECK_NEAR(m.rope_theta, 500000, 1e-12);
    /* Nemotron-4 15B: q 6144^2, k,v 6144 x 1024, o; up/down 6144 x 24576 (squared ReLU, no
     * gate); two LayerNorm1P with bias; half the head rotated */
    CHECK_INT(ap_model_load(tl_path("tests/data/hf/nemotron-4-15b.json"), &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.total_params, 2 * 6144LL * 6144 + 2 * 6144LL * 1024 + 2 * 6144LL * 24576 +
                                   4 * 6144);
    CHECK(m.act == AP_ACT_RELU2 && m.norm == AP_NORM_LAYERNORM && m.norm_1p && !m.bias);
    CHECK_NEAR(m.rotary_pct, 0.5, 1e-12);
    CHECK_STR(ap_activation_name(m.act), "relu2");
    /* MPT variants: grouped-query attention with rope, a GLU of SiLU, ffn_hidden_size over
     * expansion_ratio; a learned table when neither ALiBi nor rope */
    const char *gqa =
        "{\"model_type\": \"mpt\", \"d_model\": 1024, \"n_heads\": 16, \"n_layers\": 2, "
        "\"vocab_size\": 1000, \"max_seq_len\": 4096, \"attn_config\": {\"attn_type\": "
        "\"grouped_query_attention\", \"kv_n_heads\": 4, \"alibi\": false, \"rope\": true, "
        "\"rope_theta\": 500000}, \"ffn_config\": {\"ffn_type\": \"mptglu\", \"ffn_hidden_size\": "
        "2816, \"ffn_act_fn\": {\"name\": \"silu\"}}}";
    CHECK_INT(ap_model_parse(gqa, strlen(gqa), "g.json", &m, &err), AP_OK);
    ap_model_layer(&m, 0, &li);
    CHECK_INT(li.total_params, 1024LL * (1024 + 2 * 256) + 1024LL * 1024 + 3 * 1024LL * 2816 +
                                   2 * 1024);
    CHECK(m.kv_heads == 4 && m.pos == AP_POS_ROTARY && m.gate_act == AP_GATE_SILU);
    const char *lrn = "{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2,"
                      " \"vocab_size\": 1000, \"max_seq_len\": 1024, \"expansion_ratio\": 2.5, "
                      "\"no_bias\": false, \"attn_config\": {\"alibi\": false}}";
    CHECK_INT(ap_model_parse(lrn, strlen(lrn), "l.json", &m, &err), AP_OK);
    CHECK(m.pos == AP_POS_LEARNED && m.learned_pos == 1024 && m.ffn_hidden == 1280 && m.bias &&
          !m.norm_no_bias);
    /* refusals, one line each naming the field */
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"ffn_config\": {\"ffn_type\": \"mb_dmoe\"}}", "ffn_type", "mb_dmoe");
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"attn_config\": {\"attn_type\": \"cross\"}}", "attn_type", "cross");
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"attn_config\": 3}", "attn_config", "must be an object");
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"expansion_ratio\": 1.001}", "expansion_ratio", "whole");
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"block_overrides\": {\"order\": []}}", "block_overrides", NULL);
    bad("{\"model_type\": \"mpt\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"learned_pos_emb\": false, \"attn_config\": {\"alibi\": false}}",
        "position", NULL);
    bad("{\"model_type\": \"dbrx\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"attn_config\": {\"kv_n_heads\": 3}}", "kv_n_heads", "divide");
    bad("{\"model_type\": \"dbrx\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"ffn_config\": {\"moe_num_experts\": 4, \"moe_top_k\": 5}}",
        "moe_top_k", NULL);
    bad("{\"model_type\": \"dbrx\", \"d_model\": 512, \"n_heads\": 8, \"n_layers\": 2, "
        "\"vocab_size\": 100, \"ffn_config\": {\"ffn_act_fn\": {\"name\": \"tanh\"}}}",
        "ffn_act_fn.name", "tanh");
    bad("{\"model_type\": \"nemotron\", \"hidden_size\": 512, \"intermediate_size\": 2048, "
        "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, "
        "\"hidden_act\": \"relu3\"}", "hidden_act", "relu3");
}

static void test_bad_input(void) {
    ap_model m;
    ap_err err = {{0}};
    /* 1. missing file */
    CHECK_INT(ap_model_load("/nonexistent/model.json", &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "/nonexistent/model.json");
    CHECK_CONTAINS(err.msg, "cannot open");
    /* 1b. unreadable: a path through a regular file (fails for root too), and a file without
     * read permission (only checkable when not root: root reads it anyway) */
    char through[700];
    snprintf(through, sizeof through, "%s/plain.json", scratch);
    CHECK(tl_write(through, "{}") == 0);
    snprintf(through, sizeof through, "%s/plain.json/config.json", scratch);
    CHECK_INT(ap_model_load(through, &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "plain.json/config.json");
    CHECK_CONTAINS(err.msg, "cannot open");
    if (geteuid() != 0) {
        char locked[700];
        snprintf(locked, sizeof locked, "%s/locked.json", scratch);
        CHECK(tl_write(locked, "{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100}") == 0);
        CHECK(chmod(locked, 0) == 0);
        CHECK_INT(ap_model_load(locked, &m, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, "locked.json");
        CHECK_CONTAINS(err.msg, "cannot open");
    }
    /* 2. directory without config.json */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", scratch);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", empty);
    CHECK(system(cmd) == 0);
    CHECK_INT(ap_model_load(empty, &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "empty: directory has no config.json");
    /* 3. invalid JSON: line and byte offset */
    bad("{\"model_type\": \"llama\",\n \"hidden_size\": 4096,,\n}", "line 2", "byte");
    /* 4. empty file */
    bad("", "invalid JSON", "byte 0");
    /* 5. not an object */
    bad("[1, 2, 3]", "JSON object", "array");
    /* 6. neither kind */
    bad("{\"hidden_size\": 4096}", "model_type", "layers");
    /* 7. unknown model_type names the supported ones */
    bad("{\"model_type\":\"bert\",\"hidden_size\":768}", "'bert'", "llama, mistral");
    bad("{\"model_type\":\"bert\"}", "deepseek_v3", "model_type");
    /* 8. wrong type */
    bad(LLAMA_HEAD "\"hidden_size\":\"4096\",\"num_hidden_layers\":32,\"num_attention_heads\":32}",
        "'hidden_size'", "must be an integer");
    /* 9. missing required field */
    bad("{\"model_type\":\"llama\",\"intermediate_size\":11008,\"hidden_size\":4096,"
        "\"num_hidden_layers\":32,\"num_attention_heads\":32}", "missing field", "'vocab_size'");
    /* 10. zero heads */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":0}",
        "'num_attention_heads' = 0", "out of range [1, 65536]");
    /* 11. negative layers */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":-3,\"num_attention_heads\":32}",
        "'num_hidden_layers' = -3", "out of range");
    /* 12. absurd: 10^15 layers */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":1e15,\"num_attention_heads\":32}",
        "'num_hidden_layers'", "[1, 10000]");
    /* 13. absurd: 2^40 heads */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":"
        "1099511627776}", "'num_attention_heads'", "out of range");
    /* 14. heads not dividing hidden without head_dim */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":30}",
        "'num_attention_heads' = 30 does not divide 'hidden_size'", "head_dim");
    /* 15. kv heads not dividing heads */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"num_key_value_heads\":5}", "'num_key_value_heads' = 5", "does not divide");
    /* 16. top_k above the experts */
    bad("{\"model_type\":\"mixtral\",\"vocab_size\":32000,\"intermediate_size\":14336,"
        "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"num_local_experts\":8,\"num_experts_per_tok\":9}", "'num_experts_per_tok' = 9",
        "[1, 8]");
    /* 16b. no experts but a top-k: not read as a dense model (num_local_experts 1 already
     * fails the [1, 1] range; 0 must not slip through as dense), in every family that routes */
    bad(MOE_HEAD("mixtral") "\"num_local_experts\":0,\"num_experts_per_tok\":2}",
        "'num_local_experts' = 0 but 'num_experts_per_tok' = 2", "dense");
    bad(MOE_HEAD("phimoe") "\"num_local_experts\":0,\"num_experts_per_tok\":2}",
        "'num_local_experts' = 0 but 'num_experts_per_tok' = 2", NULL);
    bad(MOE_HEAD("minicpm") "\"num_experts\":0,\"num_experts_per_tok\":2}",
        "'num_experts' = 0 but 'num_experts_per_tok' = 2", NULL);
    bad(MOE_HEAD("minicpm") "\"num_experts_per_tok\":2}",
        "'num_experts' is absent (0 experts) but 'num_experts_per_tok' = 2", NULL);
    bad(MOE_HEAD("llama4_text") "\"num_local_experts\":0,\"num_experts_per_tok\":1}",
        "'num_local_experts' = 0 but 'num_experts_per_tok' = 1", NULL);
    bad(MOE_HEAD("gpt_oss") "\"num_local_experts\":0,\"num_experts_per_tok\":4}",
        "'num_local_experts' = 0 but 'num_experts_per_tok' = 4", NULL);
    bad(MOE_HEAD("gpt_oss") "\"num_local_experts\":0,\"experts_per_token\":4}",
        "'num_local_experts' = 0 but 'experts_per_token' = 4", NULL);
    /* 16c. gpt-oss's two top-k fields disagreeing */
    bad(MOE_HEAD("gpt_oss") "\"num_local_experts\":32,\"num_experts_per_tok\":4,"
        "\"experts_per_token\":2}", "'experts_per_token' = 2 differs from "
        "'num_experts_per_tok' = 4", NULL);
    /* 17. vocabulary too large */
    bad("{\"model_type\":\"gpt2\",\"n_embd\":768,\"n_layer\":12,\"n_head\":12,\"vocab_size\":"
        "100000000}", "'vocab_size'", "10000000");
    /* 18. wrong type of a boolean */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"tie_word_embeddings\":\"yes\"}", "'tie_word_embeddings'", "true or false");
    /* 19. rope_scaling of the wrong shape */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"rope_scaling\":8}", "'rope_scaling'", "object");
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":-1}}", "'factor'", "rope_scaling");
    /* 19b. a rope type transformers does not define (rope_type wins over the legacy type) */
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"rope_scaling\":{\"rope_type\":\"bogus\"}}", "rope_scaling: field 'rope_type' = "
        "'bogus' is not supported", "llama3");
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"rope_scaling\":{\"type\":\"bogus\",\"factor\":2}}", "rope_scaling: field 'type' = "
        "'bogus'", "not supported");
    bad(LLAMA_HEAD "\"hidden_size\":4096,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
        "\"rope_scaling\":{\"type\":\"linear\",\"rope_type\":\"Linear\"}}", "'rope_type' = "
        "'Linear'", "not supported");
    /* 20. deepseek field of the wrong type */
    bad("{\"model_type\":\"deepseek_v3\",\"hidden_size\":7168,\"num_hidden_layers\":61,"
        "\"num_attention_heads\":128,\"intermediate_size\":18432,\"vocab_size\":129280,"
        "\"kv_lora_rank\":512,\"q_lora_rank\":\"1536\"}", "'q_lora_rank'", "integer");
    /* 21. native: unknown field (a typo) */
    bad("{\"layers\":2,\"hiden\":64,\"heads\":4,\"vocab\":100}", "unknown field 'hiden'", NULL);
    /* 21b. native: a stated parameter count is a number or null */
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"params_b\":\"1.7\"}",
        "'params_b'", "number");
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"params_b\":-1}",
        "'params_b'", NULL);
    /* 22. native: fractional size */
    bad("{\"layers\":2.5,\"hidden\":64,\"heads\":4,\"vocab\":100}", "'layers'",
        "must be an integer");
    /* 23. native: activation not known */
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"activation\":\"tanh\"}",
        "'activation' = 'tanh'", "swiglu");
    /* 24. native: moe top_k above experts, moe of the wrong type */
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"moe\":{\"experts\":4,"
        "\"top_k\":5}}", "'top_k' = 5", "moe");
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"moe\":[4]}", "'moe'", "object");
    /* 25. individually legal sizes whose product is absurd */
    bad("{\"layers\":10000,\"hidden\":1000000,\"heads\":1000,\"vocab\":100}", "parameters",
        "1e+15");
    /* 26. native: heads not dividing hidden */
    bad("{\"layers\":2,\"hidden\":64,\"heads\":3,\"vocab\":100}", "'heads' = 3", "'hidden'");
    /* 27. learned positions shorter than the sequence */
    bad("{\"layers\":2,\"hidden\":64,\"heads\":4,\"vocab\":100,\"seq_len\":4096,"
        "\"learned_positions\":1024}", "'learned_positions'", "seq_len");
    /* 28. OPT with an embedding projection is refused by name, not miscounted */
    bad("{\"model_type\":\"opt\",\"hidden_size\":1024,\"num_hidden_layers\":24,"
        "\"num_attention_heads\":16,\"ffn_dim\":4096,\"vocab_size\":50272,"
        "\"word_embed_proj_dim\":512}", "'word_embed_proj_dim'", "not supported");
    /* 28b. the file's own field names in cross-field errors: BLOOM aliases, falcon kv heads */
    bad("{\"model_type\":\"bloom\",\"n_embed\":1024,\"n_layer\":24,\"n_head\":7,"
        "\"vocab_size\":250880}", "'n_head' = 7 does not divide 'n_embed' = 1024", NULL);
    bad("{\"model_type\":\"falcon\",\"hidden_size\":8192,\"num_attention_heads\":128,"
        "\"num_hidden_layers\":60,\"num_kv_heads\":6,\"vocab_size\":65024,"
        "\"new_decoder_architecture\":true}", "'num_kv_heads' = 6", "'num_attention_heads'");
    /* 29. a NUL byte inside the text */
    const char nul[] = "{\"layers\":2,\0\"hidden\":64}";
    CHECK_INT(ap_model_parse(nul, sizeof nul - 1, "nul.json", &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "nul.json");
    CHECK_CONTAINS(err.msg, "invalid JSON");
    CHECK_CONTAINS(err.msg, "byte");
    /* 30. NaN-like and huge numbers never pass as sizes */
    bad("{\"layers\":2,\"hidden\":1e400,\"heads\":4,\"vocab\":100}", "'hidden'", NULL);
    /* 31. a directory path with a trailing slash still finds (or misses) config.json */
    char d[700];
    snprintf(d, sizeof d, "%s/", empty);
    CHECK_INT(ap_model_load(d, &m, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "no config.json");
}

/* Mutated example files: every result is AP_OK or AP_ERR_INPUT with a one-line message. A cheap,
 * deterministic cousin of tests/fuzz/fuzz_model.c that runs in every build. */
static void test_mutations(void) {
    static const char *files[] = {"llama-3.1-405b.json", "deepseek-v3.json", "gpt3-175b.json",
                                  "opt-1.3b.json"};
    uint32_t rng = 12345;
    int ok = 1;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "examples/models/%s", files[f]);
        char *orig = tl_read(tl_path(rel));
        CHECK(orig != NULL);
        if (!orig) continue;
        size_t n = strlen(orig);
        char *buf = malloc(n + 1);
        for (int it = 0; it < 3000 && buf; it++) {
            memcpy(buf, orig, n + 1);
            int edits = 1 + (int)(rng % 3);
            for (int e = 0; e < edits; e++) {
                rng = rng * 1664525u + 1013904223u;
                size_t pos = (rng >> 8) % n;
                static const char alphabet[] = "0123456789-.e\"{}[],: truefalsnl";
                buf[pos] = alphabet[(rng >> 3) % (sizeof alphabet - 1)];
            }
            ap_model m;
            ap_err err = {{0}};
            ap_status st = ap_model_parse(buf, n, "mut.json", &m, &err);
            if (st == AP_OK) {
                ok &= ap_model_total_params(&m) > 0 && ap_model_active_params(&m) > 0 &&
                      ap_model_active_params(&m) <= ap_model_total_params(&m) &&
                      ap_model_fwd_flops_per_token(&m, 0) > 0;
            } else {
                ok &= st == AP_ERR_INPUT && one_line(err.msg) &&
                      strncmp(err.msg, "mut.json", 8) == 0;
                if (!ok) fprintf(stderr, "bad result %d '%s'\n", (int)st, err.msg);
            }
            if (!ok) break;
        }
        free(buf);
        free(orig);
    }
    CHECK(ok);
}

/* ---- CLI ------------------------------------------------------------------------------------------ */

static void test_cli(void) {
    char *out = NULL, *err = NULL;
    char args[512];
    snprintf(args, sizeof args, "info '%s'", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    if (out) {
        CHECK_CONTAINS(out, "6738415616");
        CHECK_CONTAINS(out, "training");
        CHECK_CONTAINS(out, "3x forward");
        CHECK_CONTAINS(out, "bf16");
    }
    free(out);
    free(err);

    snprintf(args, sizeof args, "info '%s' --json --seq 2048",
             tl_path("examples/models/deepseek-v3.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    if (out) {
        CHECK_CONTAINS(out, "\"total\": 671026419200");
        CHECK_CONTAINS(out, "\"active\": 37552297472");
        CHECK_CONTAINS(out, "\"seq\": 2048");
        /* MLA KV cache: 61 layers x (512 + 64) values x 2 bytes */
        CHECK_CONTAINS(out, "\"kv_cache_per_token_bf16\": 70272");
    }
    free(out);
    free(err);

    /* Llama-2-7B: KV 32 layers x 2 x 4096 x 2 B = 524288; activations 34h + 5as at s 4096 */
    snprintf(args, sizeof args, "info '%s' --json", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    if (out) {
        CHECK_CONTAINS(out, "\"kv_cache_per_token_bf16\": 524288");
        char want[96];
        snprintf(want, sizeof want, "\"activations_per_token_per_layer\": %d",
                 34 * 4096 + 5 * 32 * 4096);
        CHECK_CONTAINS(out, want);
        snprintf(want, sizeof want, "\"weights_bf16\": %lld", 2 * 6738415616LL);
        CHECK_CONTAINS(out, want);
    }
    free(out);
    free(err);

    CHECK_INT(tl_run("info --help", &out, &err), 0);
    if (out) {
        CHECK_CONTAINS(out, "--seq");
        CHECK_CONTAINS(out, "--json");
    }
    free(out);
    free(err);

    /* bad input: one line "autoplan: ...", exit 2 */
    CHECK_INT(tl_run("info /nonexistent/config.json", &out, &err), 2);
    if (err) {
        CHECK(strncmp(err, "autoplan: ", 10) == 0);
        CHECK_CONTAINS(err, "/nonexistent/config.json");
        CHECK(strchr(err, '\n') == err + strlen(err) - 1);
    }
    free(out);
    free(err);
    snprintf(args, sizeof args, "info '%s' --seq 0", tl_path("examples/models/tiny-gpt.json"));
    CHECK_INT(tl_run(args, &out, &err), 2);
    if (err) CHECK_CONTAINS(err, "--seq");
    free(out);
    free(err);
    snprintf(args, sizeof args, "info '%s' --seq 4096", tl_path("examples/models/gpt2.json"));
    CHECK_INT(tl_run(args, &out, &err), 2);
    if (err) CHECK_CONTAINS(err, "learned positions");
    free(out);
    free(err);
    CHECK_INT(tl_run("info", &out, &err), 2);
    if (err) CHECK_CONTAINS(err, "MODEL");
    free(out);
    free(err);
    snprintf(args, sizeof args, "info '%s' --sq 5", tl_path("examples/models/tiny-gpt.json"));
    CHECK_INT(tl_run(args, &out, &err), 2);
    if (err) CHECK_CONTAINS(err, "--seq");
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    const char *t = tl_tmpdir();
    if (!t) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    snprintf(scratch, sizeof scratch, "%s", t);
    test_hf_examples();
    test_moe_details();
    test_paper_models();
    test_hf_inline();
    test_families();
    test_family_rules();
    test_mpt_dbrx_nemotron();
    test_flops_and_fingerprint();
    test_bad_input();
    test_mutations();
    test_cli();
    char rm[400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", scratch);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", scratch);
    return tl_finish();
}
