/*
 * test_costmodel.c - the analytical cost model against published tables and hand derivations:
 * ZeRO Table 1, Megatron's 18 and 6 + 12/d bytes per parameter, DeepSpeed's estimator,
 * Korthikanti Table 2 exactly, architecture variants derived by hand, BF16_Optimizer's
 * per-micro-batch accumulation and the TP overlap's collective/GEMM pairs by hand, and
 * properties (more recompute never adds memory, more GPUs never add model-state memory, time
 * parts sum to the step, sequence parallelism and overlap never hurt).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "autoplan/estimate.h"
#include "autoplan/kernels.h"
#include "testlib.h"

static ap_model load(const char *rel) {
    ap_model m;
    ap_err err;
    if (ap_model_load(tl_path(rel), &m, &err) != AP_OK) {
        fprintf(stderr, "cannot load %s: %s\n", rel, err.msg);
        ap_model_init(&m);
    }
    return m;
}

static void test_zero_table1(void) {
    /* Rajbhandari et al. 2020 (ZeRO), Table 1: 7.5B parameters, Nd = 64, K = 12, per-device
     * model-state memory in GB: baseline 120, Pos 31.4, Pos+g 16.6, Pos+g+p 1.88. Colossal-AI
     * stores states with exactly this accounting (2 + 2 + K bytes/param). */
    const double want[4] = {120.0, 31.4, 16.6, 1.88};
    for (int z = 0; z <= 3; z++) {
        ap_plan p;
        ap_plan_init(&p);
        p.trainer = AP_TRAINER_COLOSSALAI;
        p.zero = z;
        double w, g, o;
        ap_mem_model_states(&p, 7.5e9, 64, &w, &g, &o);
        CHECK_NEAR((w + g + o) / 1e9, want[z], 0.005); /* the table rounds to 3 digits */
    }
    /* and the other Nd columns of the 7.5B row: Nd = 1024, ZeRO-3: 16 * 7.5e9 / 1024 = 0.117 */
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_COLOSSALAI;
    p.zero = 3;
    double w, g, o;
    ap_mem_model_states(&p, 7.5e9, 1024, &w, &g, &o);
    CHECK_NEAR((w + g + o) / 1e9, 0.1172, 0.001);
}

static void test_zero_table2_maxima(void) {
    /* Rajbhandari et al. 2020, Sec. 10 / Table 2: theoretical largest models on 32 GB V100s with
     * Nd = 64: baseline 2B and P_os 7.6B per model-parallel GPU, times the MP degree (1, 2, 4,
     * 8, 16): 4B / 15.2B, 8B / 30.4B, 16B / 60.8B, 32B / 121.6B */
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_COLOSSALAI;
    for (int mp = 1; mp <= 16; mp *= 2)
        for (int z = 0; z <= 1; z++) {
            p.zero = z;
            double w, g, o;
            ap_mem_model_states(&p, 1.0, 64, &w, &g, &o);
            double pmax = 32e9 * mp / (w + g + o) / 1e9;
            CHECK_NEAR(pmax, (z ? 7.6 : 2.0) * mp, 0.006); /* the paper rounds 7.64 to 7.6 */
        }
}

static void test_megatron_bytes(void) {
    /* Megatron-LM: bf16 weight 2 + fp32 main grad 4 + fp32 master 4 + Adam 8 = 18 bytes/param;
     * distributed optimizer: 6 + 12/d (Megatron-LM docs, distrib_optimizer.md) */
    ap_plan p;
    ap_plan_init(&p);
    double w, g, o;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w + g + o, 18e9, 1e-12);
    p.zero = 1;
    for (int d = 1; d <= 64; d *= 4) {
        ap_mem_model_states(&p, 1e9, d, &w, &g, &o);
        CHECK_NEAR(w + g + o, 6e9 + 12e9 / d, 1e-12);
    }
    /* Megatron-FSDP (optim_grads_params): all 18 bytes sharded, 2 + 4 + 12 over d */
    p.zero = 3;
    for (int d = 1; d <= 64; d *= 4) {
        ap_mem_model_states(&p, 1e9, d, &w, &g, &o);
        CHECK_NEAR(w, 2e9 / d, 1e-12);
        CHECK_NEAR(g, 4e9 / d, 1e-12);
        CHECK_NEAR(o, 12e9 / d, 1e-12);
    }
}

static void test_deepspeed_estimator(void) {
    /* DeepSpeed's estimator code (runtime/zero/stage_1_and_2.py, stage3.py; docs memory.rst
     * example for t5-3b, 2851M params, largest layer 32M, 1 node x 8 GPUs):
     *   ZeRO-2: 2P + 18P/N;  ZeRO-3: 4 x largest layer + 18P/N = 6.1 GiB per GPU */
    const double P = 2851e6, N = 8, largest = 32e6;
    ap_plan p;
    ap_plan_init(&p);
    p.trainer = AP_TRAINER_DEEPSPEED;
    p.zero = 2;
    double w, g, o;
    ap_mem_model_states(&p, P, (int)N, &w, &g, &o);
    CHECK_NEAR(w + g + o, 2 * P + 18 * P / N, 1e-12);
    p.zero = 3;
    ap_mem_model_states(&p, P, (int)N, &w, &g, &o);
    CHECK_NEAR(w + g + o, 18 * P / N, 1e-12);
    /* the ZeRO-3 gather buffers: current + prefetched layer, 2 bytes each = 4 x largest */
    const ap_trainer_caps *t = ap_trainer_get(AP_TRAINER_DEEPSPEED);
    double gathered = 2.0 * t->gathered_weight_bytes * largest;
    CHECK_NEAR((w + g + o + gathered) / 1073741824.0, 6.1, 0.01); /* "6.1GB" as printed */
}

static void test_korthikanti_table2(void) {
    /* Korthikanti et al. 2022, Table 2, per layer, GPT-3 175B shapes, s = 2048, b = 1, t = 8 */
    ap_model m = load("examples/models/gpt3-175b.json");
    const double s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h;
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, 1, 0, AP_RECOMPUTE_NONE),
               sbh * (34 + 5 * a * s / h), 1e-15);
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, t, 0, AP_RECOMPUTE_NONE),
               sbh * (10 + 24 / t + 5 * a * s / (h * t)), 1e-15);
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, t, 1, AP_RECOMPUTE_NONE),
               sbh / t * (34 + 5 * a * s / h), 1e-15);
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, t, 0, AP_RECOMPUTE_SELECTIVE),
               sbh * (10 + 24 / t), 1e-15);
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, t, 1, AP_RECOMPUTE_SELECTIVE),
               34 * sbh / t, 1e-15);
    CHECK_NEAR(ap_mem_korthikanti_layer_bytes(s, b, h, a, t, 0, AP_RECOMPUTE_FULL), 2 * sbh, 1e-15);
    /* the term-by-term derivation reproduces the table exactly in GPT mode (no flash) */
    int tps[] = {1, 2, 8};
    for (int i = 0; i < 3; i++)
        for (int sp = 0; sp <= (tps[i] > 1); sp++)
            for (int rc = 0; rc < 3; rc++) {
                ap_plan p;
                ap_plan_init(&p);
                p.tp = tps[i];
                p.sp = sp;
                p.mbs = 1;
                p.seq = 2048;
                p.flash_attn = 0;
                double got = ap_mem_layer_activation_bytes(&m, &p, 0, (ap_recompute)rc);
                double want = ap_mem_korthikanti_layer_bytes(s, b, h, a, tps[i], sp, (ap_recompute)rc);
                if (rc == AP_RECOMPUTE_FULL && tps[i] > 1 && !sp) want = 2 * sbh; /* Table 2 row */
                CHECK_NEAR(got, want, 1e-12);
            }
}

static void test_variants_by_hand(void) {
    /* Llama-3-8B: h 4096, a 32, kv 8, d 128, f 14336, SwiGLU, RMSNorm, no dropout, flash.
     * s = 4096, b = 1, t = 1, bytes (2 per element):
     *   norm1 input 2sbh             33,554,432
     *   QKV input 2sbh               33,554,432
     *   Q 2s*a*d                     33,554,432
     *   K, V 2 * 2s*kv*d             16,777,216
     *   attention output 2s*a*d      33,554,432
     *   log-sum-exp fp32 4s*a           524,288
     *   norm2 input 2sbh             33,554,432
     *   MLP input 2sbh               33,554,432
     *   SwiGLU in (2f) + fc2 in (f)  6sf = 352,321,536
     *   total                       570,949,632 */
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_plan p;
    ap_plan_init(&p);
    p.mbs = 1;
    p.seq = 4096;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0, 1e-12);
    /* selective drops only the log-sum-exp; full keeps the layer input */
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_SELECTIVE),
               570949632.0 - 524288.0, 1e-12);
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_FULL), 33554432.0, 1e-12);
    /* tp = 2 with sp: everything halves (kv 8 % 2 == 0) */
    p.tp = 2;
    p.sp = 1;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0 / 2, 1e-12);
    /* tp = 16 > kv heads 8: each rank keeps one replicated KV head: K, V = 4 * s * d */
    p.tp = 16;
    p.sp = 1;
    double want16 = (33554432.0 * 4 /* norms+inputs, /t below */) / 16 +
                    (33554432.0 * 2 + 524288.0 + 352321536.0) / 16 + 4.0 * 4096 * 128;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), want16, 1e-12);
    /* context parallelism cp = 2: the local sequence halves every term */
    p.tp = 1;
    p.sp = 0;
    p.cp = 2;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0 / 2, 1e-12);

    /* Mixtral-8x7B MoE layer: h 4096, a 32, kv 8, d 128, 8 experts top-2 of f 14336, dropless.
     * s = 4096, b = 1, t = 1. Attention part as Llama (without the MLP terms):
     *   2+2 (norm1, qkv in) + Q + KV + out + LSE + norm2 in = 33,554,432*5 + 16,777,216 + 524,288
     *   router input 2sbh 33,554,432; router logits+probs fp32 8*s*E = 262,144; weights 4*s*k = 32,768
     *   routed copies s*k = 8192, each 2h + 6f + 2h = 8192+86016+8192 = 102,400 bytes:
     *   838,860,800 */
    ap_model x = load("examples/models/mixtral-8x7b.json");
    ap_plan q;
    ap_plan_init(&q);
    q.mbs = 1;
    q.seq = 4096;
    double moe = 33554432.0 * 5 + 16777216.0 + 524288.0 + 33554432.0 + 262144.0 + 32768.0 +
                 838860800.0;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&x, &q, 0, AP_RECOMPUTE_NONE), moe, 1e-12);

    /* Eager composites (Hugging Face LlamaRMSNorm and act_fn(gate) * up), the same Llama 3 8B
     * layer: each of the two RMSNorms keeps its fp32 upcast (4 bytes per element) and its
     * 16-bit normalised tensor (2) instead of its 16-bit input (2), +4sbh = 67,108,864 each;
     * the product keeps silu's output, +2sf = 2*4096*14336 = 117,440,512 */
    p.cp = 1;
    p.elementwise = AP_ELEMENTWISE_EAGER;
    const double eager = 2 * 67108864.0 + 117440512.0;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0 + eager,
               1e-12);
    /* a fused RMSNorm kernel in an otherwise eager block: only the product's extra */
    p.elementwise = AP_ELEMENTWISE_EAGER_FUSED_NORM;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0 + 117440512.0,
               1e-12);
    /* the trainer's code: Hugging Face models under DeepSpeed are eager, Megatron-LM fused;
     * full recomputation keeps the layer input alone either way */
    p.elementwise = AP_ELEMENTWISE_TRAINER;
    p.trainer = AP_TRAINER_DEEPSPEED;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0 + eager,
               1e-12);
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_FULL), 33554432.0, 1e-12);
    /* Mixtral's routed experts: every copy keeps its silu output too, +2f = 28,672 bytes a
     * copy over 8192 copies = 234,881,024, beside the norms' 2 x 67,108,864 */
    q.trainer = AP_TRAINER_FSDP;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&x, &q, 0, AP_RECOMPUTE_NONE),
               moe + 2 * 67108864.0 + 234881024.0, 1e-12);
}

static ap_cluster cluster(const char *gpu, int n) {
    ap_cluster c;
    ap_cluster_from_gpu(ap_gpu_find(gpu), n, &c);
    return c;
}

static ap_plan mkplan(int tp, int pp, int dp, int64_t mbs, int64_t gbs, int zero, ap_recompute rc,
                      int sp, int vp) {
    ap_plan p;
    ap_plan_init(&p);
    p.tp = tp; p.pp = pp; p.dp = dp; p.vp = vp;
    p.mbs = mbs; p.gbs = gbs; p.grad_accum = gbs / (mbs * dp);
    p.zero = zero; p.recompute = rc; p.sp = sp;
    p.seq = 4096;
    p.overlap_grad = 1;
    p.overlap_param = zero == 1; /* Megatron gathers parameters only with its distributed opt. */
    return p;
}

static void test_properties(void) {
    const char *models[] = {"examples/models/llama-3-70b.json", "examples/models/gpt3-175b.json",
                            "examples/models/mixtral-8x7b.json"};
    ap_err err;
    static ap_estimate e0, e1;
    for (int mi = 0; mi < 3; mi++) {
        ap_model m = load(models[mi]);
        ap_cluster c = cluster("a100-sxm4-80g", 64);
        int pps[] = {1, 2, 4};
        for (int ip = 0; ip < 3; ip++)
            for (int tp = 2; tp <= 8; tp *= 2) {
                int dp = 64 / (tp * pps[ip]);
                /* more recompute never increases memory (every stage, every level) */
                double prev_alloc[AP_MAX_STAGES];
                for (int rc = 0; rc < 3; rc++) {
                    ap_plan p = mkplan(tp, pps[ip], dp, 1, 512, 1, (ap_recompute)rc, 1, 1);
                    p.seq = m.seq_len;
                    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e0, &err) == AP_OK);
                    for (int s = 0; s < e0.nstages; s++) {
                        if (rc > 0) CHECK(e0.stages[s].allocated_bytes <= prev_alloc[s] + 1);
                        prev_alloc[s] = e0.stages[s].allocated_bytes;
                    }
                    /* time parts sum to the step within 1% */
                    const ap_time *t = &e0.time;
                    double sum = t->compute_s + t->recompute_s + t->tp_comm_s + t->cp_comm_s +
                                 t->ep_comm_s + t->pp_comm_s + t->dp_comm_s + t->bubble_s +
                                 t->offload_s + t->optimizer_s + t->overhead_s;
                    CHECK_NEAR(sum, t->step_s, 0.01);
                    /* sp and overlap are dominant choices: never slower, never more memory */
                    ap_plan q = p;
                    q.sp = 0;
                    q.overlap_grad = q.overlap_param = 0;
                    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &e1, &err) == AP_OK);
                    CHECK(e1.time.step_s >= e0.time.step_s - 1e-9);
                    CHECK(e1.device_peak_bytes >= e0.device_peak_bytes - 1);
                }
            }
        /* more GPUs at a fixed per-GPU batch never increase per-GPU model-state memory */
        double prev = 1e300;
        for (int n = 8; n <= 512; n *= 2) {
            ap_cluster cn = cluster("a100-sxm4-80g", n);
            for (int z = 0; z <= 1; z++) {
                ap_plan p = mkplan(8, 1, n / 8, 1, n / 8, z, AP_RECOMPUTE_FULL, 1, 1);
                p.seq = m.seq_len;
                CHECK(ap_estimate_plan(&m, &cn, &p, NULL, &e0, &err) == AP_OK);
                const ap_stage_mem *s = &e0.stages[0];
                double states = s->params_bytes + s->grads_bytes + s->optimizer_bytes;
                if (z == 1) {
                    CHECK(states <= prev + 1);
                    prev = states;
                }
            }
        }
    }
}

static void test_pipeline_memory(void) {
    /* 1F1B: stage i holds min(p - i, m) micro-batches; interleaved multiplies the first stage
     * by 1 + (p-1)/(p v) (Korthikanti 2022 Sec. 4.2.3) */
    ap_model m = load("examples/models/gpt3-175b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_err err;
    static ap_estimate e;
    ap_plan p = mkplan(8, 8, 1, 1, 64, 0, AP_RECOMPUTE_SELECTIVE, 1, 1);
    p.seq = 2048;
    p.flash_attn = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    for (int i = 0; i < 8; i++) CHECK_INT(e.stages[i].inflight, 8 - i);
    double per_layer = ap_mem_korthikanti_layer_bytes(2048, 1, 12288, 96, 8, 1, AP_RECOMPUTE_SELECTIVE);
    CHECK_NEAR(e.stages[0].layer_activations_bytes, 8 * 12 * per_layer, 1e-9);
    p.vp = 3;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    CHECK_NEAR(e.stages[0].layer_activations_bytes, 8 * 12 * per_layer * (1 + 7.0 / 24.0), 1e-9);
    /* the last stage adds the loss of one micro-batch: Megatron's in-place vocab-parallel
     * cross entropy, bf16 logits + their fp32 copy = 6 bytes per logit element s*b*V/t */
    p.vp = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    double logits = 6.0 * 2048.0 * 51200.0 / 8.0;
    CHECK_NEAR(e.stages[7].activations_bytes - e.stages[7].layer_activations_bytes,
               logits + 2.0 * 2.0 * 2048.0 * 12288.0 / 8.0, 1e-9);
    /* torch-based trainers: F.cross_entropy(logits.float()) holds 12 bytes per logit */
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.zero = 2;
    p.overlap_grad = p.overlap_param = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    CHECK_NEAR(e.stages[7].activations_bytes - e.stages[7].layer_activations_bytes,
               12.0 * 2048.0 * 51200.0 / 8.0 + 2.0 * 2.0 * 2048.0 * 12288.0 / 8.0, 1e-9);
    /* a fused cross-entropy (flash-attn / apex xentropy) keeps the 16-bit logits and writes a
     * 16-bit gradient: 4 bytes per logit; in place 2; and it reads and writes less, so the
     * step is no slower */
    double step12 = e.time.step_s;
    p.loss_bytes_per_logit = AP_LOSS_FUSED_BYTES;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    CHECK_NEAR(e.stages[7].activations_bytes - e.stages[7].layer_activations_bytes,
               4.0 * 2048.0 * 51200.0 / 8.0 + 2.0 * 2.0 * 2048.0 * 12288.0 / 8.0, 1e-9);
    CHECK(e.time.step_s <= step12);
    p.loss_bytes_per_logit = AP_LOSS_FUSED_INPLACE_BYTES;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    CHECK_NEAR(e.stages[7].activations_bytes - e.stages[7].layer_activations_bytes,
               2.0 * 2048.0 * 51200.0 / 8.0 + 2.0 * 2.0 * 2048.0 * 12288.0 / 8.0, 1e-9);
}

/* The NCCL communicators of a rank and their buffers, worked by hand: CUDA context 500 MiB and
 * two 32 MiB cuBLAS workspaces, then 128 MiB a communicator (NCCL 2.22 and later), or the
 * measured 544 MB for two ranks and 688 MB above (before 2.22). DeepSpeed's pipeline engine
 * sends over the default group and adds its grid's slice, pipe, model and tied groups. */
static void test_nccl_overhead(void) {
    const double MiB = 1024.0 * 1024.0, base = 564 * MiB;
    int sizes[AP_MAX_COMMS];
    ap_plan p = mkplan(8, 4, 4, 1, 64, 1, AP_RECOMPUTE_NONE, 1, 1);
    CHECK_INT(ap_mem_nccl_comms(&p, sizes), 3); /* tp 8, pp 4, dp 4 */
    CHECK_INT(sizes[0] * 100 + sizes[1] * 10 + sizes[2], 844);
    CHECK_NEAR(ap_mem_device_overhead_bytes(&p, 0), base + 3 * 128 * MiB, 1e-9);
    CHECK_NEAR(ap_mem_device_overhead_bytes(&p, 1), base + 3 * 688e6, 1e-9);
    p.pp = 2; /* a pipeline group of two ranks */
    CHECK_NEAR(ap_mem_device_overhead_bytes(&p, 1), base + 2 * 688e6 + 544e6, 1e-9);
    /* BLOOM's TP 4 PP 12 DP 8 under DeepSpeed: tp, the default group of 384 ranks, dp, the
     * slice group, pipe 12, model 48 and the tied pair */
    ap_plan d = mkplan(4, 12, 8, 2, 2048, 0, AP_RECOMPUTE_FULL, 0, 1);
    d.trainer = AP_TRAINER_DEEPSPEED;
    CHECK_INT(ap_mem_nccl_comms(&d, sizes), 7);
    CHECK_INT(sizes[1], 384);
    CHECK_INT(sizes[5], 48);
    CHECK_NEAR(ap_mem_device_overhead_bytes(&d, 0), base + 7 * 128 * MiB, 1e-9);
    CHECK_NEAR(ap_mem_device_overhead_bytes(&d, 1), base + 6 * 688e6 + 544e6, 1e-9);
    d.pp = 1; /* no pipeline engine: its model's groups only */
    CHECK_INT(ap_mem_nccl_comms(&d, sizes), 2);
    d.tp = d.dp = 1;
    CHECK_NEAR(ap_mem_device_overhead_bytes(&d, 1), base, 1e-9);
    d.trainer = AP_TRAINER_RUNTIME;
    CHECK_NEAR(ap_mem_device_overhead_bytes(&d, 1), 0, 0);
    /* versions: before 2.22 connect when made */
    const struct {
        const char *s;
        int eager;
    } ok[] = {{"2.10", 1}, {"2.21.5", 1}, {"1.9", 1}, {"2.22", 0}, {"2.22.3", 0}, {"3.0", 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int eager = -1;
        ap_err err;
        CHECK(ap_nccl_version_parse(ok[i].s, "v", &eager, &err) == AP_OK);
        CHECK_INT(eager, ok[i].eager);
    }
    const char *bad[] = {"", "2", "2.", "v2.18", "2.18.x", "2.18.3.1", " 2.18", "2.-1", "2.18 ",
                         "100.1", "2.1000", NULL};
    for (int i = 0; bad[i]; i++) {
        int eager = -1;
        ap_err err;
        CHECK(ap_nccl_version_parse(bad[i], "--nccl-version", &eager, &err) == AP_ERR_INPUT);
        CHECK(strstr(err.msg, "--nccl-version") && strstr(err.msg, "not an NCCL version"));
        CHECK_INT(eager, -1);
    }
}

/* nvidia-smi's reading: the allocated bytes over 1 - 0.15 (GMLake's fragmentation of the
 * caching allocator) plus the overhead outside it, never below the device bytes a run must
 * hold, the reserved bytes under expandable_segments, and at most the GPU's memory in an
 * estimate; fits still reads the device bytes. */
static void test_smi_reading(void) {
    const double G = 1024.0 * 1024 * 1024;
    ap_stage_mem sm;
    memset(&sm, 0, sizeof sm);
    sm.allocated_bytes = 51 * G;
    sm.reserved_bytes = 52 * G;
    sm.device_bytes = 53 * G;
    CHECK_NEAR(ap_mem_smi_bytes(&sm, 1 * G, 0), 60 * G + 1 * G, 1e-12); /* 51 / 0.85 = 60 */
    CHECK_NEAR(ap_mem_smi_bytes(&sm, 1 * G, 1), 53 * G, 1e-12);
    sm.reserved_bytes = 70 * G; /* a reserved model above the fraction's */
    sm.device_bytes = 71 * G;
    CHECK_NEAR(ap_mem_smi_bytes(&sm, 1 * G, 0), 71 * G, 1e-12);
    sm.device_bytes = 75 * G; /* never below the device bytes */
    CHECK_NEAR(ap_mem_smi_bytes(&sm, 1 * G, 0), 75 * G, 1e-12);

    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_err err;
    static ap_estimate e;
    ap_plan p = mkplan(1, 1, 8, 1, 8, 0, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    const ap_stage_mem *w = &e.stages[e.worst_stage];
    double over = w->device_bytes - w->reserved_bytes;
    CHECK_NEAR(over, ap_mem_device_overhead_bytes(&e.plan, 0), 1e-9);
    double want = fmin(fmax(w->allocated_bytes / 0.85, w->reserved_bytes) + over,
                       c.gpu.mem_bytes);
    CHECK_NEAR(e.smi_peak_bytes, want, 1e-12);
    CHECK(e.smi_peak_bytes >= e.device_peak_bytes || e.smi_peak_bytes == c.gpu.mem_bytes);
    CHECK_INT(e.fits, e.device_peak_bytes + e.headroom_bytes <= e.capacity_bytes);
    /* a plan over the GPU's memory reads the GPU's memory */
    p.mbs = 16;
    p.gbs = 128;
    p.grad_accum = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
    CHECK_INT(e.fits, 0);
    CHECK(e.device_peak_bytes > c.gpu.mem_bytes);
    CHECK_NEAR(e.smi_peak_bytes, c.gpu.mem_bytes, 0);
}

/* torchtitan's selective recompute is per-op checkpointing (parallelize_llama.py: the outputs of
 * mm, SDPA and reduce_scatter kept, except every second mm of a block). Llama-3-8B (h 4096, 32
 * heads of 128, 8 KV heads, f 14336), 2 x 8192 tokens, by hand: the block input 2h, wq 2 x 4096,
 * wv 2 x 1024, w1 2 x 14336, w2 2 x 4096, the SDPA output 2 x 4096 and its fp32 log-sum-exp
 * 4 x 32: 63616 bytes per token; with tp 8 + sp: input 2h/8, wq 2 x 512, wv 2 x 128 (one KV
 * head), w1 2 x 1792, w2 2h (before its reduce-scatter), SDPA 2 x 512 + 4 x 4, the two
 * reduce-scatter outputs 2 x 2h/8: 17168 bytes per token. It recomputes wk, wo and w3 instead of
 * the attention, so it costs time over no recompute, and Megatron's selective keeps more. */
static void test_op_sac(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 8);
    ap_err err;
    static ap_estimate e0, e1;
    ap_plan p = mkplan(1, 1, 8, 2, 16, 3, AP_RECOMPUTE_SELECTIVE, 0, 1);
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.seq = 8192;
    CHECK(ap_mem_op_sac(&m, &p, 0));
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_SELECTIVE),
               63616.0 * 16384.0, 1e-12);
    ap_plan q = mkplan(8, 1, 1, 2, 2, 3, AP_RECOMPUTE_SELECTIVE, 1, 1);
    q.trainer = AP_TRAINER_TORCHTITAN;
    q.seq = 8192;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &q, 0, AP_RECOMPUTE_SELECTIVE),
               17168.0 * 16384.0, 1e-12);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e1, &err) == AP_OK);
    p.recompute = AP_RECOMPUTE_NONE;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e0, &err) == AP_OK);
    CHECK(e1.time.step_s > e0.time.step_s);
    CHECK(e1.stages[0].layer_activations_bytes < e0.stages[0].layer_activations_bytes);
    p.recompute = AP_RECOMPUTE_SELECTIVE;
    p.trainer = AP_TRAINER_MEGATRON;
    p.zero = 1;
    CHECK(!ap_mem_op_sac(&m, &p, 0));
    CHECK(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_SELECTIVE) > 63616.0 * 16384.0);
}

/* DeepSpeed, bf16, ZeRO 0 (BF16_Optimizer): tp 1 pp 2 dp 4, micro-batch 1, 64 sequences of
 * seq tokens, full recomputation */
static ap_plan ds_bf16_pp2(int64_t seq) {
    ap_plan p = mkplan(1, 2, 4, 1, 64, 0, AP_RECOMPUTE_FULL, 0, 1);
    p.trainer = AP_TRAINER_DEEPSPEED;
    p.overlap_param = 0;
    p.seq = seq;
    p.dtype = AP_DTYPE_BF16;
    return p;
}

/* DeepSpeed bf16 without ZeRO runs BF16_Optimizer, which after every micro-batch's backward
 * casts each bf16 gradient to fp32 and adds it into its fp32 buffer (update_hp_grads): 18 bytes
 * of HBM traffic per parameter of the rank (read 2, write 4; read 4 + 4, write 4), at the
 * calibrated memory-bound bandwidth. ZeRO-1 and fp16 at stage 0 keep the gradients in
 * param.grad, where autograd adds each micro-batch's after the first (read 2 + 2, write 2):
 * 6 bytes x 15/16 with 16 micro-batches per step, nothing with one. ZeRO-2 copies them into
 * its contiguous bucket every backward instead (read 2, write 2). */
static void test_grad_accumulation_passes(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate z0, z1, f16, z1one;
    ap_plan p = ds_bf16_pp2(2048);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &z0, &err) == AP_OK);
    p.zero = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &z1, &err) == AP_OK);
    p.zero = 0;
    p.dtype = AP_DTYPE_FP16;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &f16, &err) == AP_OK);
    CHECK(p.grad_accum == 16);
    p.dtype = AP_DTYPE_BF16;
    p.zero = 1;
    p.gbs = 4; /* one micro-batch per step: nothing to add */
    p.grad_accum = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &z1one, &err) == AP_OK);
    const double hbm = c.gpu.hbm_bytes_per_s * cal.mem_bound_eff;
    for (int r = 0; r < 2; r++) {
        double params = z0.stages[r].params_bytes / 2.0; /* bf16 weights, unsharded */
        CHECK(params > 3e9);
        double acc = 6.0 * params * 15.0 / 16.0 / hbm;
        CHECK_NEAR(z0.time.stage_bwd_s[r] - z1.time.stage_bwd_s[r], 18.0 * params / hbm - acc,
                   1e-9);
        CHECK_NEAR(z1.time.stage_bwd_s[r] - z1one.time.stage_bwd_s[r], acc, 1e-9);
        CHECK_NEAR(z0.time.stage_fwd_s[r], z1.time.stage_fwd_s[r], 1e-12);
        CHECK_NEAR(f16.time.stage_bwd_s[r], z1.time.stage_bwd_s[r], 1e-12);
    }
    CHECK(z0.time.step_s > z1.time.step_s);
    /* ZeRO-2 copies every backward's gradients into its contiguous bucket: read 2, write 2 */
    static ap_estimate y1, y2;
    ap_plan q = mkplan(1, 1, 8, 1, 8, 1, AP_RECOMPUTE_FULL, 0, 1);
    q.trainer = AP_TRAINER_DEEPSPEED;
    q.seq = 2048;
    q.dtype = AP_DTYPE_BF16;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &y1, &err) == AP_OK);
    q.zero = 2;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &y2, &err) == AP_OK);
    double params = y1.stages[0].params_bytes / 2.0;
    CHECK_NEAR(y2.time.stage_bwd_s[0] - y1.time.stage_bwd_s[0], 4.0 * params / hbm, 1e-9);
}

/* BF16_Optimizer adds each bf16 gradient into its fp32 buffer through an fp32 copy of that
 * gradient (update_hp_grads), after the micro-batch's backward has freed its activations: the
 * first rank's largest parameter is Llama-2-7B's embedding, 32000 x 4096, so 4 x 32000 x 4096 =
 * 524,288,000 bytes are live beside the other in-flight micro-batch's (pp 2: two in flight on
 * the first rank), more than the backward's working set at 256 tokens. ZeRO-1 keeps the
 * gradients in param.grad and adds them there: no copy. */
static void test_bf16_optimizer_upcast(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_err err;
    static ap_estimate z0, z1;
    ap_plan p = ds_bf16_pp2(256);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &z0, &err) == AP_OK);
    p.zero = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &z1, &err) == AP_OK);
    const ap_stage_mem *a = &z0.stages[0], *b = &z1.stages[0];
    CHECK_INT(a->inflight, 2);
    CHECK_NEAR(a->layer_activations_bytes, b->layer_activations_bytes, 0);
    double one = a->layer_activations_bytes / 2.0; /* the first rank keeps its layers' only */
    CHECK_NEAR(a->activations_bytes, one + 4.0 * 32000 * 4096, 1e-3);
    /* ZeRO-1: the two micro-batches and the backward's working set, below the copy */
    double ws = b->activations_bytes - 2.0 * one;
    CHECK(ws > 0 && ws < 4.0 * 32000 * 4096 - one);
    CHECK(b->activations_bytes < a->activations_bytes);
}

/* Tied embeddings on the first and last pipeline stage: their fp32 main gradients (V/t x h,
 * Megatron) are all-reduced between the two once per step, priced as the estimate prices a
 * two-rank all-reduce across nodes (GPT-3 175B, tp 8 pp 8 over 128 nodes: 51200 x 12288 / 8
 * x 4 = 314.6 MB), in the pipeline's communication; nothing without a pipeline or untied. */
static void test_tied_embedding_reduction(void) {
    ap_model m = load("examples/models/gpt3-175b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 1024);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate tied, untied;
    ap_plan p = mkplan(8, 8, 16, 1, 1536, 0, AP_RECOMPUTE_FULL, 0, 1);
    p.seq = 2048;
    CHECK(m.tied_embeddings);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &tied, &err) == AP_OK);
    ap_model u = m;
    u.tied_embeddings = 0;
    CHECK(ap_estimate_plan(&u, &c, &p, NULL, &untied, &err) == AP_OK);
    double bytes = 51200.0 * 12288.0 / 8.0 * 4.0;
    double want = ap_estimate_coll_s(&c, &cal, ap_kernels_published(&c.gpu), AP_COLL_ALLREDUCE_OP,
                                     bytes, 2, 1);
    CHECK(want > bytes / 30e9);
    CHECK_NEAR(tied.time.pp_comm_s - untied.time.pp_comm_s, want, 1e-9);
    p = mkplan(8, 1, 128, 1, 1536, 1, AP_RECOMPUTE_FULL, 0, 1);
    p.seq = 2048;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &tied, &err) == AP_OK);
    CHECK_NEAR(tied.time.pp_comm_s, 0, 0);
}

/* torchtitan's context parallelism is PyTorch's ring attention, whose merges and gradient
 * accumulation are eager fp32 ops: Llama-3-8B on 8 H100s, cp 2 at 64K tokens, one ring step
 * after the first on each of 32 layers, q = 32768 x 32 x 128 query/output elements and
 * kv = 2 x 32768 x 8 x 128 key/value elements per layer: forward 38 q + 4 kv + 6 q bytes,
 * backward 10 q + 22 kv + 6 (q + kv), at the calibrated memory-bound bandwidth; nothing when
 * the attention and its ring run in Transformer Engine (a validation row's te_attention). */
static void test_cp_eager_merge(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 8);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate torch_ring, te_ring;
    ap_plan p = mkplan(1, 1, 4, 1, 4, 3, AP_RECOMPUTE_NONE, 0, 1);
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.cp = 2;
    p.seq = 65536;
    p.attn_impl = AP_ATTN_FA2;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &torch_ring, &err) == AP_OK);
    p.te_attention = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &te_ring, &err) == AP_OK);
    const double hbm = c.gpu.hbm_bytes_per_s * cal.mem_bound_eff;
    double q = 32768.0 * 32 * 128, kv = 2.0 * 32768 * 8 * 128;
    CHECK_NEAR(torch_ring.time.stage_fwd_s[0] - te_ring.time.stage_fwd_s[0],
               32.0 * (38.0 * q + 4.0 * kv + 6.0 * q) / hbm, 1e-9);
    CHECK_NEAR(torch_ring.time.stage_bwd_s[0] - te_ring.time.stage_bwd_s[0],
               32.0 * (10.0 * q + 22.0 * kv + 6.0 * (q + kv)) / hbm, 1e-9);
}

/* Context parallelism by all-to-all (plan.h cp_a2a, Megatron-LM --cp-comm-type a2a): Llama-3-8B
 * (32 query heads, 8 key/value heads of 128) on one H100 node, cp 4 x dp 2, 32K tokens, two
 * micro-batches. Each layer's forward all-to-alls the rank's Q and output (8192 tokens x 32 x
 * 128 x 2 bytes each) and K and V (8192 x 8 x 128 x 2) over the 4 cp ranks of the node, the
 * backward as much again: 32 layers x 2 micro-batches x 2 directions x those four, priced as
 * the estimate prices one NCCL all-to-all, none hidden. The attention kernel then covers the
 * whole sequence for 8 of the 32 heads: a quarter of the cp = 1 kernel's time (up to wave
 * quantisation), the same model FLOPs as the ring. The plan checker refuses it without cp,
 * on a trainer without it and where a tp rank's heads do not divide by cp. DeepSpeed runs
 * its context parallelism (Ulysses) this way whatever the plan says, alone. */
/* MXFP8 block scaling (plan.h AP_FP8_MXFP8): Blackwell only; its casts move the delayed
 * recipe's 3 bytes per GEMM input element plus one E8M0 scale byte per 32 elements of each of
 * the two layouts, 1/16 byte more, and take no amax pass (tensorwise current scaling's 2
 * bytes more). Worked by hand for Llama 3 8B on one B200 (no data parallelism: no amax
 * reduction under delayed scaling either), 4 micro-batches of 4096 tokens, no recomputation:
 * the FP8 GEMMs' inputs per layer are T x (K of qkv 4096 + proj 4096 + fc1 4096 + fc2 14336)
 * = 4096 x 26624 elements, the backward's casts twice the forward's, so the compute differs by
 * 4 x 3 x 32 layers x 4096 x 26624 x (1/16) bytes over the HBM at mem_bound_eff. */
static void test_mxfp8(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("b200", 1);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate del, mx, tw;
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    ap_plan p = mkplan(1, 1, 1, 1, 4, 1, AP_RECOMPUTE_NONE, 0, 1);
    p.dtype = AP_DTYPE_FP8;
    p.fp8_recipe = AP_FP8_DELAYED;
    CHECK_INT(ap_estimate_plan(&m, &c, &p, &o, &del, &err), AP_OK);
    p.fp8_recipe = AP_FP8_MXFP8;
    CHECK_INT(ap_plan_check(&p, &m, &c, 0, &err), AP_OK);
    CHECK_INT(ap_estimate_plan(&m, &c, &p, &o, &mx, &err), AP_OK);
    p.fp8_recipe = AP_FP8_TENSORWISE;
    CHECK_INT(ap_estimate_plan(&m, &c, &p, &o, &tw, &err), AP_OK);
    double hbm = c.gpu.hbm_bytes_per_s * cal.mem_bound_eff;
    double elems = 4.0 * 3.0 * 32.0 * 4096.0 * 26624.0;
    CHECK_NEAR(mx.time.compute_s - del.time.compute_s, elems / 16.0 / hbm, 1e-9);
    CHECK_NEAR(tw.time.compute_s - del.time.compute_s, elems * 2.0 / hbm, 1e-9);
    /* not below Blackwell, and not under a trainer without it */
    ap_cluster h = cluster("h100-sxm", 1);
    p.fp8_recipe = AP_FP8_MXFP8;
    CHECK_INT(ap_plan_check(&p, &m, &h, 0, &err), AP_ERR_INFEASIBLE);
    CHECK(strstr(err.msg, "mxfp8 needs Blackwell") != NULL && strstr(err.msg, "h100-sxm") != NULL);
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.zero = 3;
    CHECK_INT(ap_plan_check(&p, &m, &c, 0, &err), AP_ERR_INFEASIBLE);
    CHECK_STR(ap_fp8_recipe_name(AP_FP8_MXFP8), "mxfp8");
}

static void test_cp_a2a(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 8);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate ring, a2a, whole;
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    o.compute_parts = 1;
    ap_plan p = mkplan(1, 1, 2, 1, 4, 1, AP_RECOMPUTE_NONE, 0, 1);
    p.cp = 4;
    p.seq = 32768;
    CHECK_INT(ap_estimate_plan(&m, &c, &p, &o, &ring, &err), AP_OK);
    p.cp_a2a = 1;
    CHECK_INT(ap_plan_check(&p, &m, &c, 0, &err), AP_OK);
    CHECK_INT(ap_estimate_plan(&m, &c, &p, &o, &a2a, &err), AP_OK);
    const struct ap_kernels *k = ap_kernels_published(&c.gpu);
    double q = 8192.0 * 32 * 128 * 2, kv = 8192.0 * 8 * 128 * 2, one = 0;
    double bytes[4] = {q, kv, kv, q};
    for (int i = 0; i < 4; i++)
        one += ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLTOALL_OP, bytes[i], 4, 4);
    CHECK_NEAR(a2a.time.cp_comm_s, 32.0 * 2 * 2 * one, 1e-9);
    CHECK(a2a.time.cp_comm_s > ring.time.cp_comm_s); /* the ring hides behind its blocks */
    CHECK_NEAR(a2a.tp.model_flops_per_step, ring.tp.model_flops_per_step, 1e-3);
    ap_plan w = mkplan(1, 1, 8, 1, 16, 1, AP_RECOMPUTE_NONE, 0, 1);
    w.seq = 32768;
    CHECK_INT(ap_estimate_plan(&m, &c, &w, &o, &whole, &err), AP_OK);
    CHECK_NEAR(a2a.time.part_fwd_s[AP_PART_ATTN] / (whole.time.part_fwd_s[AP_PART_ATTN] / 4.0),
               1.0, 0.02);
    CHECK_NEAR(a2a.time.part_bwd_s[AP_PART_ATTN] / (whole.time.part_bwd_s[AP_PART_ATTN] / 4.0),
               1.0, 0.02);
    /* refusals: cp 1, DeepSpeed, tp 4 x cp 4 (2 key/value heads per tp rank) */
    ap_plan r = p;
    r.cp = 1;
    r.dp = 8;
    CHECK_INT(ap_plan_check(&r, &m, &c, 0, &err), AP_ERR_INFEASIBLE);
    CHECK(strstr(err.msg, "cp > 1") != NULL);
    r = p;
    r.trainer = AP_TRAINER_TORCHTITAN; /* its context parallelism is the ring */
    r.zero = 3;
    CHECK_INT(ap_plan_check(&r, &m, &c, 0, &err), AP_ERR_INFEASIBLE);
    r = p;
    r.tp = 4;
    r.dp = 1;
    r.sp = 1;
    r.gbs = 2;
    r.grad_accum = 2;
    ap_cluster c16 = cluster("h100-sxm", 16);
    CHECK_INT(ap_plan_check(&r, &m, &c16, 0, &err), AP_ERR_INFEASIBLE);
    CHECK(strstr(err.msg, "not divisible by cp 4") != NULL);
    r.tp = 2; /* 16 query and 4 key/value heads per tp rank */
    CHECK_INT(ap_plan_check(&r, &m, &c, 0, &err), AP_OK);
    /* DeepSpeed-Ulysses: all-to-all whatever cp_a2a says, with tp and pp 1 only; the same
       all-to-alls as Megatron-LM's */
    r = p;
    r.trainer = AP_TRAINER_DEEPSPEED;
    r.cp_a2a = 0;
    CHECK_INT(ap_plan_check(&r, &m, &c, 0, &err), AP_OK);
    CHECK(ap_plan_cp_a2a(&r));
    static ap_estimate ds;
    CHECK_INT(ap_estimate_plan(&m, &c, &r, &o, &ds, &err), AP_OK);
    CHECK_NEAR(ds.time.cp_comm_s, a2a.time.cp_comm_s, 1e-12);
    r.tp = 2;
    r.dp = 1;
    CHECK_INT(ap_plan_check(&r, &m, &c, 0, &err), AP_ERR_INFEASIBLE);
    CHECK(strstr(err.msg, "without tensor, pipeline or expert") != NULL);
}

/* torchtitan's per-op checkpointing keeps reduce-scatter outputs, not all-gather ones, so its
 * recompute runs each layer's two sequence-parallel all-gathers again: Llama-3-8B, tp 8 sp on
 * one H100 node, 12 x 8192 tokens per micro-batch. Doubling the NVLink bandwidth takes from
 * the recompute exactly what it takes from those all-gathers (half an all-reduce of the
 * layer's activations each, ap_estimate_coll_s), 32 layers x 1 micro-batch; the recomputed
 * matmuls and kernels do not depend on the link. */
static void test_sac_regathers(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 8), c2 = c;
    c2.link_bytes_per_s *= 2.0;
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate slow, fast;
    ap_plan p = mkplan(8, 1, 1, 12, 12, 3, AP_RECOMPUTE_SELECTIVE, 1, 1);
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.seq = 8192;
    p.overlap_tp = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &slow, &err) == AP_OK);
    CHECK(ap_estimate_plan(&m, &c2, &p, NULL, &fast, &err) == AP_OK);
    const struct ap_kernels *k = ap_kernels_published(&c.gpu);
    double bytes = 12.0 * 8192 * 4096 * 2;
    double ar = ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLREDUCE_OP, bytes, 8, 8);
    double ar2 = ap_estimate_coll_s(&c2, &cal, k, AP_COLL_ALLREDUCE_OP, bytes, 8, 8);
    CHECK(ar > ar2);
    CHECK_NEAR(slow.time.recompute_s - fast.time.recompute_s, 32.0 * (ar - ar2), 1e-9);
}

/* DeepSpeed ZeRO's contiguous-gradient bucket, worked by hand from the emitted config's
 * reduce_bucket_size of 5e8 bf16 elements: 1e9 bytes from start-up under ZeRO-3; under
 * ZeRO-1/2 without a pipeline 1e9 per backward, 2e9 with overlap_comm (a second buffer); none
 * at the peak under the pipeline engine, nor for Megatron-LM (its buckets are views of its
 * gradient buffer). The fixed buffers add to what the allocator reserves, not to the
 * activations. */
static void test_zero_grad_bucket(void) {
    ap_model m = load("examples/models/opt-1.3b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_err err;
    static ap_estimate e[7];
    ap_plan p = mkplan(1, 1, 8, 4, 64, 2, AP_RECOMPUTE_NONE, 0, 1);
    p.seq = 2048;
    p.trainer = AP_TRAINER_DEEPSPEED;
    p.overlap_param = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e[0], &err) == AP_OK); /* z2, overlap_comm */
    p.overlap_grad = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e[1], &err) == AP_OK); /* z2, no overlap */
    p.zero = 3;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e[2], &err) == AP_OK);
    p.trainer = AP_TRAINER_MEGATRON;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e[6], &err) == AP_OK); /* Megatron-FSDP */
    p.zero = 1;
    p.overlap_grad = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e[3], &err) == AP_OK);
    ap_plan q = mkplan(1, 2, 4, 4, 64, 1, AP_RECOMPUTE_NONE, 0, 1);
    q.seq = 2048;
    q.trainer = AP_TRAINER_DEEPSPEED;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &e[4], &err) == AP_OK); /* z1 under a pipeline */
    q.trainer = AP_TRAINER_MEGATRON;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &e[5], &err) == AP_OK);
    CHECK_NEAR(e[0].stages[0].other_bytes - e[1].stages[0].other_bytes, 1e9, 1e-12);
    CHECK_NEAR(e[1].stages[0].other_bytes, 1e9, 1e-12);
    /* ZeRO-3: the bucket beside the gathered layers Megatron-FSDP holds as well */
    CHECK_NEAR(e[2].stages[0].other_bytes - e[6].stages[0].other_bytes, 1e9, 1e-12);
    CHECK(e[6].stages[0].other_bytes > 0);
    CHECK_NEAR(e[3].stages[0].other_bytes, 0, 0);
    for (int r = 0; r < 2; r++)
        CHECK_NEAR(e[4].stages[r].other_bytes, e[5].stages[r].other_bytes, 0);
    CHECK_NEAR(e[0].stages[0].activations_bytes, e[1].stages[0].activations_bytes, 0);
}

/* FP8 weights without a 16-bit copy (plan.h fp8_params; Megatron-LM --fp8-param-gather, NeMo
 * fp8_params): 1 byte per parameter where bf16 keeps 2, no FP8 cast beside them, the rest of
 * the states as before (fp32 main grads 4, master + Adam 12 over the distributed optimizer's
 * ranks); an FP8 run without it keeps the 16-bit weights and one FP8 copy (1 byte). */
static void test_fp8_params(void) {
    ap_plan p;
    ap_plan_init(&p);
    p.zero = 1;
    p.dtype = AP_DTYPE_FP8;
    double w, g, o;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w, 2e9, 1e-12);
    p.fp8_params = 1;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w, 1e9, 1e-12);
    CHECK_NEAR(g, 4e9, 1e-12);
    CHECK_NEAR(o, 12e9 / 8, 1e-12);
    p.dtype = AP_DTYPE_BF16; /* only FP8 weights are stored in FP8 */
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w, 2e9, 1e-12);
    /* a whole estimate: the weights fall by one byte per parameter held and the "other" bytes
     * by one per transformer-layer parameter (the FP8 copy gone: the embedding, the final norm
     * and the bf16 output layer have none), activations and time unchanged but the parameter
     * all-gather */
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 8);
    ap_err err;
    static ap_estimate a, b;
    ap_plan q = mkplan(1, 1, 4, 1, 128, 1, AP_RECOMPUTE_NONE, 0, 1);
    q.cp = 2;
    q.seq = 8192;
    q.dtype = AP_DTYPE_FP8;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &a, &err) == AP_OK);
    q.fp8_params = 1;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &b, &err) == AP_OK);
    double n = a.stages[0].params_bytes / 2.0;
    CHECK(n > 7e9);
    CHECK_NEAR(b.stages[0].params_bytes, n, 1e-12);
    double n_layers = n - 2.0 * 128256 * 4096 - 4096; /* untied embedding and head, final norm */
    CHECK_NEAR(a.stages[0].other_bytes - b.stages[0].other_bytes, n_layers, 1e-9);
    CHECK_NEAR(a.stages[0].activations_bytes, b.stages[0].activations_bytes, 1e-15);
    CHECK_NEAR(a.stages[0].grads_bytes, b.stages[0].grads_bytes, 1e-15);
    CHECK(b.stages[0].device_bytes < a.stages[0].device_bytes - (n + n_layers) * 0.99);
    CHECK_NEAR(a.time.compute_s, b.time.compute_s, 1e-12);
}

/* Transformer Engine's fp8 GEMMs keep the FP8 cast of their inputs. Llama-3-8B, s 4096, b 1,
 * t 1 (test_variants_by_hand's 570,949,632 bytes in bf16): the QKV and MLP inputs fall to one
 * byte (2 x 16,777,216), the fc2 input to one (s*f = 58,720,256), and the attention output
 * is kept twice (16-bit by the fused kernel, FP8 for the output projection: +16,777,216):
 * 570,949,632 - 75,497,472 = 495,452,160. Full recompute keeps the 16-bit layer input; a
 * trainer without Transformer Engine (torchtitan's torchao float8) keeps the 16-bit inputs. */
static void test_fp8_saved_inputs(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_plan p;
    ap_plan_init(&p);
    p.mbs = 1;
    p.seq = 4096;
    p.dtype = AP_DTYPE_FP8;
    p.trainer = AP_TRAINER_MEGATRON;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 495452160.0, 1e-12);
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_FULL), 33554432.0, 1e-12);
    p.trainer = AP_TRAINER_TORCHTITAN;
    CHECK_NEAR(ap_mem_layer_activation_bytes(&m, &p, 0, AP_RECOMPUTE_NONE), 570949632.0, 1e-12);
}

/* An MoE layer's token permutations (layer_cost.c): Mixtral-8x7B (h 4096, 8 experts, top 2),
 * 4096 tokens, tp 1, ep 1: the rank routes 4096 tokens into 8192 copies, its 8 local experts
 * process all 8192. In units of h bytes (rows of h 16-bit elements are 2h bytes): permute
 * reads 4096 rows and writes 8192, unpermute the reverse: 2 x 2 x (4096 + 8192) = 49,152; the
 * sort by local expert and its reverse each read and write the 8192 rows: 2 x 2 x 2 x 8192 =
 * 65,536; 114,688 x 4096 = 469,762,048 bytes. At ep 8 (one local expert) no sort: 49,152 h.
 * With tp 2 and sp each rank routes its 2048 tokens (4096 copies) and at etp 1 its experts
 * take those: 2 x 2 x (2048 + 4096) + 8 x 4096 = 57,344 h. */
static void test_moe_permute_bytes(void) {
    ap_model m = load("examples/models/mixtral-8x7b.json");
    ap_plan p;
    ap_plan_init(&p);
    CHECK_NEAR(ap_cost_moe_permute_bytes(&m, &p, 4096), 469762048.0, 1e-12);
    p.ep = 8;
    CHECK_NEAR(ap_cost_moe_permute_bytes(&m, &p, 4096), 49152.0 * 4096, 1e-12);
    p.ep = 1;
    p.tp = 2;
    p.sp = 1;
    CHECK_NEAR(ap_cost_moe_permute_bytes(&m, &p, 4096), 57344.0 * 4096, 1e-12);
}

/* gpt-oss's clamped gated activation under Megatron-Core: the clamps of both halves and their
 * concatenation run as separate kernels before the fused quick-GeGLU, 16f bytes per routed
 * copy forward, twice that backward. gpt-oss-20b (24 layers, 32 experts, top 4, f 2880) on one
 * H100, 4096 tokens, no parallelism: 16,384 copies per layer, so 24 x 3 x 16 x 2880 x 16,384 =
 * 54,358,179,840 bytes more than the same model with SiLU gating, at 3.35 TB/s x 0.5 (the
 * calibration's memory-bound fraction, set here): 32.4526 ms. */
static void test_oai_gate_clamps(void) {
    ap_model m = load("examples/models/gpt-oss-20b.json");
    ap_model silu = m;
    silu.gate_act = AP_GATE_SILU;
    ap_cluster c = cluster("h100-sxm", 1);
    ap_plan p = mkplan(1, 1, 1, 1, 1, 0, AP_RECOMPUTE_NONE, 0, 1);
    p.overlap_param = 0;
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    cal.mem_bound_eff = 0.5;
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    o.calib = &cal;
    static ap_estimate a, b;
    ap_err err;
    CHECK(ap_estimate_plan(&m, &c, &p, &o, &a, &err) == AP_OK);
    CHECK(ap_estimate_plan(&silu, &c, &p, &o, &b, &err) == AP_OK);
    double want = 24.0 * 3 * 16 * 2880 * 16384 / (c.gpu.hbm_bytes_per_s * 0.5);
    CHECK_NEAR(c.gpu.hbm_bytes_per_s, 3.35e12, 1e-9);
    CHECK_NEAR(a.time.compute_s - b.time.compute_s, want, 1e-9);
    /* torchtitan (compiled) fuses the clamps: no difference */
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.zero = 3;
    CHECK(ap_estimate_plan(&m, &c, &p, &o, &a, &err) == AP_OK);
    CHECK(ap_estimate_plan(&silu, &c, &p, &o, &b, &err) == AP_OK);
    CHECK_NEAR(a.time.compute_s, b.time.compute_s, 1e-12);
}

/* The state dtypes a run may choose (validation rows' "grad_reduce", "optim_dtype",
 * "param_remainders"):
 * Megatron-Core keeps its gradient buffer in the reduction's dtype (fp32 unless
 * --grad-reduce-in-bf16), Apex DistributedFusedAdam its parameter copy and Adam's moments in
 * its dtype. Megatron ZeRO-1 on 8 ranks, 1e9 parameters: 2 + 4 + 12/8 bytes per parameter by
 * default; bf16 gradients 2 + 2 + 12/8; bf16 optimizer states 2 + 2 + 6/8. PyTorch FSDP keeps
 * no master copy (its fp32 parameters are the master): the optimizer dtype leaves it alone. */
static void test_state_dtypes(void) {
    ap_plan p;
    ap_plan_init(&p);
    p.zero = 1;
    double w, g, o;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w + g + o, 7.5e9, 1e-12);
    p.grad_reduce_bytes = 2;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(g, 2e9, 1e-12);
    CHECK_NEAR(o, 1.5e9, 1e-12);
    p.optim_state_bytes = 2;
    ap_mem_model_states(&p, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w + g + o, 4.75e9, 1e-12);
    CHECK_NEAR(ap_plan_master_bytes(&p), 2, 0);
    CHECK_NEAR(ap_plan_optim_bytes(&p), 4, 0);
    /* Apex's store_param_remainders (NeMo over bf16 weights): a 2-byte master remainder beside
     * fp32 moments, 2 + 4 + (2 + 8)/8 bytes per parameter */
    ap_plan r;
    ap_plan_init(&r);
    r.zero = 1;
    r.master_state_bytes = 2;
    ap_mem_model_states(&r, 1e9, 8, &w, &g, &o);
    CHECK_NEAR(w + g + o, 7.25e9, 1e-12);
    CHECK_NEAR(ap_plan_optim_bytes(&r), 8, 0);
    ap_plan f;
    ap_plan_init(&f);
    f.trainer = AP_TRAINER_FSDP;
    f.zero = 3;
    f.optim_state_bytes = 2;
    f.grad_reduce_bytes = 2;
    CHECK_NEAR(ap_plan_optim_bytes(&f), ap_trainer_get(AP_TRAINER_FSDP)->optim_bytes, 0);
    CHECK_NEAR(ap_plan_grad_bytes(&f), ap_trainer_get(AP_TRAINER_FSDP)->grad_bytes, 0);
}

/* Megatron-LM's backward runs the column-parallel layers' TP collectives beside their GEMMs
 * (LinearWithGradAccumulationAndAsyncCommunication). Without sequence parallelism the backward
 * moves what the forward does and exposes less of it; with it the backward also re-gathers the
 * two layers' inputs (1.5 times the forward's traffic) and exposes at least the two all-gathers
 * of the gradients entering the output projection and fc2 (half of the forward's). A run whose
 * Megatron-LM predates the asynchronous collectives (validation rows' "tp_bwd_overlap": false,
 * the 2021 runs) exposes the backward as the forward; so does DeepSpeed. */
static void test_tp_bwd_async(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_err err;
    static ap_estimate a, b, s0, s1, ds;
    ap_plan p = mkplan(8, 4, 2, 1, 128, 1, AP_RECOMPUTE_SELECTIVE, 0, 1);
    p.overlap_tp = 0;
    p.no_tp_bwd_overlap = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &a, &err) == AP_OK);
    CHECK_NEAR(a.time.tp_comm_s, a.time.tp_comm_total_s, 1e-12);
    p.no_tp_bwd_overlap = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &b, &err) == AP_OK);
    CHECK_NEAR(b.time.tp_comm_total_s, a.time.tp_comm_total_s, 1e-12);
    CHECK(b.time.tp_comm_s < a.time.tp_comm_s);
    CHECK(b.time.tp_comm_s >= 0.5 * a.time.tp_comm_s - 1e-12); /* the forward stays exposed */
    CHECK(b.time.step_s < a.time.step_s);
    p.sp = 1;
    p.no_tp_bwd_overlap = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &s0, &err) == AP_OK);
    p.no_tp_bwd_overlap = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &s1, &err) == AP_OK);
    CHECK(s1.time.tp_comm_total_s > s0.time.tp_comm_total_s);
    CHECK(s1.time.tp_comm_total_s < 1.25 * s0.time.tp_comm_total_s + 1e-12);
    CHECK(s1.time.tp_comm_s < s0.time.tp_comm_s);
    CHECK(s1.time.tp_comm_s >= 0.75 * s0.time.tp_comm_s - 1e-12);
    ap_plan q = mkplan(8, 4, 2, 1, 128, 1, AP_RECOMPUTE_FULL, 0, 1);
    q.trainer = AP_TRAINER_DEEPSPEED;
    q.overlap_grad = q.overlap_param = 0;
    CHECK(ap_estimate_plan(&m, &c, &q, NULL, &ds, &err) == AP_OK);
    CHECK_NEAR(ds.time.tp_comm_s, ds.time.tp_comm_total_s, 1e-12);
}

/* Gradient buckets as the trainers size them. Megatron-Core grows its bucket with the
 * data-parallel ranks, max(40M, 1M x dp x cp) parameters (training.py get_model): Llama-2-7B at
 * tp 1, ZeRO-1, on 8 A100s fills params / 40M buckets and on 512 params / 512M, 12.8 times fewer;
 * a run that set its own size (validation rows' "dp_bucket": InternLM's 512 x 2^20 elements)
 * fills params / 2^29 whatever dp is.
 * ZeRO within groups (validation rows' "zero_group", InternLM's zero1 = 8): on 64 GPUs, groups
 * of 8 keep 8 times the optimizer states of ZeRO-1 over all 64 (12 bytes per parameter / 8
 * against / 64), all-reduce the gradients over all 64 ranks as ZeRO-0 does (the same buckets
 * and bytes: the same time), and gather the parameters inside the node, faster than over 64. */
static void test_dp_buckets(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_err err;
    static ap_estimate a, b, g, z0, z1;
    ap_cluster c8 = cluster("a100-sxm4-80g", 8), c512 = cluster("a100-sxm4-80g", 512);
    ap_plan p = mkplan(1, 1, 8, 1, 64, 1, AP_RECOMPUTE_NONE, 0, 1);
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    CHECK(ap_estimate_plan(&m, &c8, &p, &o, &a, &err) == AP_OK);
    ap_plan q = mkplan(1, 1, 512, 1, 512, 1, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c512, &q, &o, &b, &err) == AP_OK);
    CHECK(a.time.dp_bucket_fill > 100); /* 6.7e9 / 40e6 */
    CHECK_NEAR(a.time.dp_bucket_fill / b.time.dp_bucket_fill, 512e6 / 40e6, 1e-9);
    CHECK_NEAR(b.time.dp_buckets, ceil(b.time.dp_bucket_fill), 0);
    p.dp_bucket_params = 536870912;
    CHECK(ap_estimate_plan(&m, &c8, &p, &o, &g, &err) == AP_OK);
    CHECK_NEAR(a.time.dp_bucket_fill / g.time.dp_bucket_fill, 536870912 / 40e6, 1e-9);

    ap_cluster c64 = cluster("a100-sxm4-80g", 64);
    ap_plan h = mkplan(1, 1, 64, 1, 64, 1, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c64, &h, &o, &z1, &err) == AP_OK);
    h.zero_group = 8;
    CHECK(ap_estimate_plan(&m, &c64, &h, &o, &g, &err) == AP_OK);
    ap_plan r = mkplan(1, 1, 64, 1, 64, 0, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c64, &r, &o, &z0, &err) == AP_OK);
    CHECK_NEAR(g.stages[0].optimizer_bytes / z1.stages[0].optimizer_bytes, 8.0, 1e-9);
    CHECK(z0.time.dp_red_s > 0);
    CHECK_NEAR(g.time.dp_red_s, z0.time.dp_red_s, 1e-12);
    CHECK(g.time.dp_red_s > z1.time.dp_red_s); /* an all-reduce moves twice a reduce-scatter */
    CHECK(g.time.dp_ag_s > 0 && g.time.dp_ag_s < z1.time.dp_ag_s);
}

/* ZeRO-3 within groups (HSDP, --zero-group): Llama-2-7B under FSDP on 64 A100 (8 nodes),
 * groups of 8. Without overlap the step's data-parallel traffic is, per FSDP unit (32 blocks +
 * the root), the bf16 gather of its parameters in forward and again in backward over the 8
 * ranks of a node, the bf16 reduce-scatter there, and the all-reduce of each rank's eighth over
 * the 8 nodes, priced as ap_estimate_coll_s prices each call; the states are 8 times full
 * sharding's (16 bytes per parameter / 8 against / 64), and on a slow network the groups cost
 * less than gathering over all 64 ranks across it. */
static void test_hsdp(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    const ap_kernels *k = ap_kernels_published(&c.gpu);
    ap_err err;
    static ap_estimate full, hs;
    ap_plan p = mkplan(1, 1, 64, 1, 64, 3, AP_RECOMPUTE_NONE, 0, 1);
    p.trainer = AP_TRAINER_FSDP;
    p.overlap_grad = p.overlap_param = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &full, &err) == AP_OK);
    p.zero_group = 8;
    ap_status st = ap_estimate_plan(&m, &c, &p, NULL, &hs, &err);
    if (st != AP_OK) fprintf(stderr, "hsdp: %s\n", err.msg);
    CHECK(st == AP_OK);
    double params = (double)ap_model_total_params(&m), units = (double)m.layers + 1.0;
    double per = params / units;
    double ag = ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLGATHER_OP, 2.0 * per, 8, 8);
    double rs = ap_estimate_coll_s(&c, &cal, k, AP_COLL_REDUCESCATTER_OP, 2.0 * per, 8, 8);
    double ar = ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLREDUCE_OP, 2.0 * per / 8.0, 8, 1);
    CHECK_NEAR(hs.time.dp_comm_s, units * (2.0 * ag + rs + ar), 1e-9);
    /* over a slow network (25 Gb/s per GPU) the groups cross it with 2/8 of a full gather's
       bytes per NIC instead of 3/8 and win; over DGX A100's 8 x 200 Gb/s the ring of 64 ranks
       gathers at the node's whole NIC bandwidth, and the two come within a third */
    CHECK(hs.time.dp_comm_s < 1.5 * full.time.dp_comm_s);
    CHECK(full.time.dp_comm_s < 1.5 * hs.time.dp_comm_s);
    ap_cluster slow = c;
    slow.net_bytes_per_s = 25e9 / 8;
    static ap_estimate full_slow, hs_slow;
    CHECK(ap_estimate_plan(&m, &slow, &p, NULL, &hs_slow, &err) == AP_OK);
    ap_plan q = p;
    q.zero_group = 0;
    CHECK(ap_estimate_plan(&m, &slow, &q, NULL, &full_slow, &err) == AP_OK);
    CHECK(hs_slow.time.dp_comm_s < 0.8 * full_slow.time.dp_comm_s);
    CHECK_NEAR(hs.stages[0].optimizer_bytes / full.stages[0].optimizer_bytes, 8.0, 1e-9);
    CHECK_NEAR(hs.stages[0].params_bytes / full.stages[0].params_bytes, 8.0, 1e-9);
    /* the same compute, and the label says the group */
    CHECK_NEAR(hs.time.compute_s, full.time.compute_s, 1e-12);
    char lbl[160];
    CHECK(strstr(ap_plan_label(&hs.plan, lbl, sizeof lbl), " z3g8") != NULL);
    /* refused: a group that does not divide the ranks, one rank, a stage the trainer does not
       group (FSDP: ZeRO 2 and 3) and a trainer without groups */
    int bad[][3] = {{3, 3, AP_TRAINER_FSDP}, {1, 3, AP_TRAINER_FSDP}, {8, 0, AP_TRAINER_FSDP},
                    {8, 3, AP_TRAINER_COLOSSALAI}, {8, 1, AP_TRAINER_DEEPSPEED}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ap_plan q = p;
        q.zero_group = bad[i][0];
        q.zero = bad[i][1];
        q.trainer = (ap_trainer_id)bad[i][2];
        CHECK(ap_plan_check(&q, &m, &c, 1, &err) != AP_OK);
        CHECK(strstr(err.msg, "zero_group") != NULL || strstr(err.msg, "within groups") != NULL);
    }
}

/* The experts' work under tensor parallelism (Megatron-Core, sequence parallelism on): each
 * rank routes its own sequence shard, the all-to-all spreads the copies over the ep ranks and
 * the etp group gathers its ranks' copies for experts split etp ways, so every rank computes
 * tokens x top_k / tp expert rows of the full width whatever etp is. Mixtral-8x7B, 64 H100,
 * tp 4, ep 8: etp 1, 2 and 4 cost the same compute, and a step's compute per GPU is tp 1's (4
 * times the micro-batches at a quarter each) up to GEMM efficiency at the smaller shapes (with
 * etp 1 it once counted the whole tp group's tokens on every rank: 2.4 times as much). The
 * experts' activations: etp times the token copies (inputs and outputs gathered) at 1/etp of
 * the width, so they grow with etp by the gathered hidden-size copies only. */
static void test_moe_expert_shards(void) {
    ap_model m = load("examples/models/mixtral-8x7b.json");
    ap_cluster c = cluster("h100-sxm", 64);
    ap_err err;
    static ap_estimate e1, e[3];
    ap_plan p = mkplan(1, 1, 64, 1, 512, 1, AP_RECOMPUTE_NONE, 0, 1);
    p.ep = 8;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e1, &err) == AP_OK);
    for (int i = 0; i < 3; i++) {
        ap_plan q = mkplan(4, 1, 16, 1, 512, 1, AP_RECOMPUTE_NONE, 1, 1);
        q.ep = 8;
        q.etp = 1 << i;
        ap_status st = ap_estimate_plan(&m, &c, &q, NULL, &e[i], &err);
        if (st != AP_OK) fprintf(stderr, "etp %d: %s\n", q.etp, err.msg);
        CHECK(st == AP_OK);
    }
    for (int i = 1; i < 3; i++) {
        CHECK_NEAR(e[i].time.compute_s, e[0].time.compute_s, 1e-12);
        CHECK(e[i].stages[0].activations_bytes > e[i - 1].stages[0].activations_bytes);
    }
    /* the label says the expert split (the estimate flag reproduces it) */
    char lbl[160];
    CHECK(strstr(ap_plan_label(&e[2].plan, lbl, sizeof lbl), " ep8 etp4 ") != NULL);
    CHECK(strstr(ap_plan_label(&e[0].plan, lbl, sizeof lbl), "etp") == NULL);
    double r = e[0].time.compute_s / e1.time.compute_s;
    CHECK(r > 0.95 && r < 1.15);
    if (!(r > 0.95 && r < 1.15)) fprintf(stderr, "tp 4 / tp 1 compute: %.3f\n", r);
}

/* CPU offload (ZeRO-Offload): host memory used equals the offloaded states; the time grows with
 * the fraction and falls with host DRAM and PCIe bandwidth; none without offload. */
static void test_offload(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 8);
    ap_err err;
    static ap_estimate e0, e1, e2;
    ap_plan p = mkplan(1, 1, 8, 1, 64, 1, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e0, &err) == AP_OK);
    CHECK(e0.time.offload_s == 0);
    CHECK(e0.stages[0].host_bytes == 0);
    p.offload_optimizer = 0.5;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e1, &err) == AP_OK);
    p.offload_optimizer = 1.0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e2, &err) == AP_OK);
    CHECK(e1.time.offload_s > 0);
    CHECK(e2.time.offload_s > e1.time.offload_s);
    /* the optimizer states leave the GPU and land on the host, byte for byte */
    CHECK_NEAR(e2.stages[0].host_bytes, e0.stages[0].optimizer_bytes, 1e-12);
    CHECK_NEAR(e2.stages[0].optimizer_bytes, 0, 1e-12);
    CHECK_NEAR(e1.stages[0].host_bytes, 0.5 * e0.stages[0].optimizer_bytes, 1e-12);
    CHECK_NEAR(e2.host_bytes_per_node, 8 * e2.stages[0].host_bytes, 1e-12);
    /* slower host memory and PCIe: slower offload */
    ap_cluster slow = c;
    slow.host_mem_bytes_per_s *= 0.5;
    slow.pcie_bytes_per_s *= 0.5;
    static ap_estimate e3;
    CHECK(ap_estimate_plan(&m, &slow, &p, NULL, &e3, &err) == AP_OK);
    CHECK(e3.time.offload_s > e2.time.offload_s);
    /* too little host memory: the plan does not fit */
    slow.cpu_mem_bytes = 0.5 * e2.host_bytes_per_node;
    CHECK(ap_estimate_plan(&m, &slow, &p, NULL, &e3, &err) == AP_OK);
    CHECK(!e3.host_fits);
    CHECK(!e3.fits);
}

/* TP-communication overlap: without it everything is exposed; with it the exposed part never
 * exceeds the total and never falls below one chunk (total / tp) of it; it needs sp. */
static void test_tp_overlap(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_cluster c = cluster("h100-sxm", 64);
    ap_err err;
    static ap_estimate a, b;
    ap_plan p = mkplan(8, 4, 2, 1, 128, 1, AP_RECOMPUTE_SELECTIVE, 1, 1);
    p.overlap_tp = 0;
    p.no_tp_bwd_overlap = 1; /* nor the backward's asynchronous collectives (below) */
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &a, &err) == AP_OK);
    CHECK(a.time.tp_comm_s > 0);
    CHECK_NEAR(a.time.tp_comm_total_s, a.time.tp_comm_s, 1e-12);
    p.overlap_tp = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &b, &err) == AP_OK);
    CHECK_NEAR(b.time.tp_comm_total_s, a.time.tp_comm_total_s, 1e-12);
    CHECK(b.time.tp_comm_s < a.time.tp_comm_s);
    CHECK(b.time.tp_comm_s >= a.time.tp_comm_total_s / 8 - 1e-12);
    CHECK(b.time.step_s < a.time.step_s);
    p.sp = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &b, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "sequence parallelism");
}

/* Megatron's TP overlap is Transformer Engine's userbuffers, which need CUDA multicast over
 * NVSwitch (TE initialize_ub; the UB_SKIPMC=1 IPC fallback is not modelled): refused on A100
 * and H100 PCIe, taken on H100/H200/B200 SXM; torchtitan's async TP is not bound to it. */
static void test_tp_overlap_multicast(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_err err;
    static ap_estimate e;
    const struct { const char *gpu; int ok; } g[] = {
        {"a100-sxm4-80g", 0}, {"a100-sxm4-40g", 0}, {"h100-pcie", 0}, {"v100-sxm2-32g", 0},
        {"h100-sxm", 1},      {"h200", 1},          {"b200", 1},      {"h100-96g-500w", 1}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        ap_cluster c = cluster(g[i].gpu, 64);
        CHECK_INT(c.gpu.multicast, g[i].ok);
        ap_plan p = mkplan(8, 4, 2, 1, 128, 1, AP_RECOMPUTE_SELECTIVE, 1, 1);
        if (!strcmp(g[i].gpu, "v100-sxm2-32g")) p.dtype = AP_DTYPE_FP16;
        p.overlap_tp = 1;
        ap_status st = ap_plan_check(&p, &m, &c, 1, &err);
        CHECK_INT(st, g[i].ok ? AP_OK : AP_ERR_INFEASIBLE);
        if (!g[i].ok) {
            CHECK_CONTAINS(err.msg, "multicast");
            CHECK_CONTAINS(err.msg, g[i].gpu);
            if (c.gpu.link == AP_LINK_NVLINK) /* tp 8 inside the node: refused for the overlap */
                CHECK_INT(ap_estimate_plan(&m, &c, &p, NULL, &e, &err), AP_ERR_INFEASIBLE);
        }
        p.overlap_tp = 0; /* without the overlap every GPU runs it */
        st = ap_plan_check(&p, &m, &c, 1, &err);
        CHECK_INT(st, AP_OK);
        CHECK_INT(ap_trainer_overlap_tp(ap_trainer_get(AP_TRAINER_MEGATRON), &c.gpu), g[i].ok);
        CHECK_INT(ap_trainer_overlap_tp(ap_trainer_get(AP_TRAINER_TORCHTITAN), &c.gpu), 1);
        CHECK_INT(ap_trainer_overlap_tp(ap_trainer_get(AP_TRAINER_DEEPSPEED), &c.gpu), 0);
    }
}

/* Hugging Face models under FSDP run RMSNorm, rotary embedding and SwiGLU as eager composites
 * (layer_cost.c eager_extra_bytes): Llama-2-7B on one A100, 4096 tokens per micro-batch, 32
 * layers. Worked by hand: each of a layer's two RMSNorms moves 32 bytes per element more than a
 * fused norm, 32 x 2 x 4096 h = 1,073,741,824 bytes per layer forward at h 4096; the rotary
 * embedding 24 bytes per element of q and k, 24 x 4096 x (32 + 32) x 128 = 805,306,368; SwiGLU
 * 4 bytes per element of f = 11008: 180,355,072. Over 32 layers at the A100's 2.039 TB/s
 * times the calibrated memory-bound efficiency; backward moves twice the forward's bytes, the
 * rotary embedding's once. A
 * LayerNorm model takes the norms' share away, learned positions the rotary share, and the
 * fused kernels of Megatron (and of torchtitan, compiled) all three. */
static void test_eager_elementwise(void) {
    ap_model a = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 1);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    const double hbm = c.gpu.hbm_bytes_per_s * cal.mem_bound_eff, L = 32;
    ap_err err;
    static ap_estimate ea, eb, ec;
    ap_plan p = mkplan(1, 1, 1, 1, 1, 0, AP_RECOMPUTE_NONE, 0, 1);
    p.trainer = AP_TRAINER_FSDP;
    p.overlap_param = 0;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &ea, &err), AP_OK);
    ap_model b = a;
    b.norm = AP_NORM_LAYERNORM;
    CHECK_INT(ap_estimate_plan(&b, &c, &p, NULL, &eb, &err), AP_OK);
    const double norms = 1073741824.0, rope = 805306368.0, swiglu = 180355072.0;
    CHECK_NEAR(ea.time.stage_fwd_s[0] - eb.time.stage_fwd_s[0], L * norms / hbm, 1e-9);
    CHECK_NEAR(ea.time.stage_bwd_s[0] - eb.time.stage_bwd_s[0], 2 * L * norms / hbm, 1e-9);
    ap_model d = b;
    d.pos = AP_POS_LEARNED;
    static ap_estimate ed;
    CHECK_INT(ap_estimate_plan(&d, &c, &p, NULL, &ed, &err), AP_OK);
    CHECK_NEAR(eb.time.stage_fwd_s[0] - ed.time.stage_fwd_s[0], L * rope / hbm, 1e-9);
    /* the rotary embedding's backward moves what its forward does, not twice */
    CHECK_NEAR(eb.time.stage_bwd_s[0] - ed.time.stage_bwd_s[0], L * rope / hbm, 1e-9);
    /* Colossal-AI runs the same Hugging Face code (its fused norm is off without apex), and
       Megatron-DeepSpeed's Llama path the same composites */
    const ap_trainer_id same[] = {AP_TRAINER_COLOSSALAI, AP_TRAINER_DEEPSPEED};
    for (int i = 0; i < 2; i++) {
        p.trainer = same[i];
        static ap_estimate ca, cb;
        CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &ca, &err), AP_OK);
        CHECK_INT(ap_estimate_plan(&b, &c, &p, NULL, &cb, &err), AP_OK);
        CHECK_NEAR(ca.time.stage_fwd_s[0] - cb.time.stage_fwd_s[0], L * norms / hbm, 1e-9);
    }
    /* Megatron's fused kernels: none of the three */
    p.trainer = AP_TRAINER_MEGATRON;
    static ap_estimate ma, mb;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &ma, &err), AP_OK);
    CHECK_INT(ap_estimate_plan(&b, &c, &p, NULL, &mb, &err), AP_OK);
    CHECK_NEAR(ma.time.stage_fwd_s[0], mb.time.stage_fwd_s[0], 1e-12);
    /* torchtitan's are priced fused (torch.compile, which its emitted config enables): with
       LayerNorm and learned positions only SwiGLU's share sets the two apart */
    p.trainer = AP_TRAINER_TORCHTITAN;
    CHECK_INT(ap_estimate_plan(&d, &c, &p, NULL, &ec, &err), AP_OK);
    CHECK_NEAR(ed.time.stage_fwd_s[0] - ec.time.stage_fwd_s[0], L * swiglu / hbm, 1e-9);
    /* a plan may say how its block ran (validation rows' "compile"): torchtitan eager carries
       all three shares, FSDP compiled none */
    static ap_estimate te, tf, fe;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &tf, &err), AP_OK);
    p.elementwise = AP_ELEMENTWISE_EAGER;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &te, &err), AP_OK);
    CHECK_NEAR(te.time.stage_fwd_s[0] - tf.time.stage_fwd_s[0],
               L * (norms + rope + swiglu) / hbm, 1e-9);
    p.trainer = AP_TRAINER_FSDP;
    p.elementwise = AP_ELEMENTWISE_FUSED;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &fe, &err), AP_OK);
    CHECK_NEAR(ea.time.stage_fwd_s[0] - fe.time.stage_fwd_s[0],
               L * (norms + rope + swiglu) / hbm, 1e-9);
}

/* TP overlap pairs each collective with the GEMM that consumes or produces it (layer_cost.c
 * layer_comm): a collective of c seconds in n = tp chunks against a GEMM of g hides
 * (n - 1) min(c, g) / n. Llama-3-8B at tp 8 on 8 x 12 x 8192 tokens: the attention's
 * projections are shorter than their collectives, the MLP's longer, so the hidden time per layer
 * forward is 7/8 (g_qkv + g_proj + 2 c), c a quarter of the layer's TP time; GEMM times by
 * hand from the published kernel table (kernels.h) and the default calibration. Pooled over the
 * layer's GEMMs (the earlier rule) it would be 7/8 of all four collectives. */
static double hand_gemm_s(const ap_gpu *g, const ap_calib *cal, double M, double N, double K) {
    double eff = cal->gemm_eff_max * ap_kernels_gemm_eff(ap_kernels_published(g), AP_DTYPE_BF16,
                                                         M, N, K, cal->gemm_half_flops);
    return 2.0 * M * N * K / (g->peak_flops[AP_DTYPE_BF16] * eff);
}

static void test_tp_overlap_pairs(void) {
    ap_model m = load("examples/models/llama-3-8b.json");
    ap_cluster c = cluster("h100-sxm", 64);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate off, on;
    ap_plan p = mkplan(8, 1, 8, 12, 96, 3, AP_RECOMPUTE_SELECTIVE, 1, 1);
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.seq = 8192;
    p.overlap_param = 1;
    p.overlap_tp = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &off, &err) == AP_OK);
    p.overlap_tp = 1;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &on, &err) == AP_OK);
    const double L = 32, n = 8, T = 12.0 * 8192, h = 4096, d = 128;
    /* 32 query heads and 8 kv heads over tp 8: 4 query heads and 1 kv head per rank */
    double g_qkv = hand_gemm_s(&c.gpu, &cal, T, 4 * d + 2 * d, h);
    double g_proj = hand_gemm_s(&c.gpu, &cal, T, h, 4 * d);
    double g_up = hand_gemm_s(&c.gpu, &cal, T, 2.0 * 14336 / 8, h);
    double g_down = hand_gemm_s(&c.gpu, &cal, T, h, 14336.0 / 8);
    /* the report counts each layer's forward TP time twice (forward and backward); the loss's
     * small all-reduce is never hidden */
    double cq = on.time.tp_comm_total_s / (2.0 * L) / 4.0;
    CHECK(g_qkv < cq && g_proj < cq && g_up > cq && g_down > cq);
    /* the exposed part also carries what the hidden part slows the GEMMs beside it (18.9%:
     * estimate_int.h overlap_cost_s), so the step saves hidden / 1.189 of it */
    double hidden = (on.time.tp_comm_total_s - on.time.tp_comm_s) / (2.0 * L) * 1.189;
    CHECK_NEAR(hidden, (n - 1.0) / n * (g_qkv + g_proj + 2.0 * cq), 1e-3);
    CHECK(hidden < 0.9 * (n - 1.0) / n * 4.0 * cq);
    CHECK_NEAR(off.time.tp_comm_total_s, on.time.tp_comm_total_s, 1e-12);
    CHECK_NEAR(off.time.tp_comm_s, off.time.tp_comm_total_s, 1e-12);
}

/* The data-parallel reduction's hidden part slows the backward beside it (estimate_int.h
 * overlap_cost_s, Lee et al. 2025: compute beside communication runs 18.9% slower): Megatron-LM,
 * ZeRO-1 (distributed optimizer), pp 1, one micro-batch window: the reduce-scatter hides behind
 * the backward (its last bucket exposed), the parameter all-gather behind the next forward (its
 * first bucket exposed), and the exposed DP time is what stays exposed plus 0.189 / 1.189 of
 * what hid, worked by hand from the estimate's own per-part figures. Without overlap nothing
 * hides and nothing slows. */
static void test_overlap_contention(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_err err;
    static ap_estimate on, off;
    ap_plan p = mkplan(1, 1, 64, 1, 512, 1, AP_RECOMPUTE_NONE, 0, 1);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &on, &err) == AP_OK);
    const ap_time *t = &on.time;
    CHECK(t->dp_red_s > 0 && t->dp_buckets > 1);
    double red_exp = fmax(t->dp_red_s - t->stage_bwd_s[0], t->dp_red_one_s);
    double ag_exp = fmax(t->dp_ag_s - t->stage_fwd_s[0], t->dp_ag_one_s);
    double hidden = (t->dp_red_s - red_exp) + (t->dp_ag_s - ag_exp);
    CHECK(hidden > 0);
    CHECK_NEAR(t->dp_comm_s, red_exp + ag_exp + hidden * 0.189 / 1.189, 1e-9);
    CHECK(t->dp_comm_s < t->dp_comm_total_s); /* hiding still pays */
    p.overlap_grad = p.overlap_param = 0;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &off, &err) == AP_OK);
    CHECK_NEAR(off.time.dp_comm_s, off.time.dp_red_s + off.time.dp_ag_s, 1e-9);
    CHECK_NEAR(off.time.dp_comm_s, t->dp_comm_total_s, 1e-9);
}

/* ZeRO-3 / FSDP FULL_SHARD with overlap: the forward's all-gathers hide behind the forward only
 * (a unit needs its parameters before it runs), the backward's all-gathers and reduce-scatters
 * behind the backward and its recomputation; the first gather and the last reduce-scatter stay
 * exposed. Llama-2-7B, 64 A100s, full recompute, one micro-batch: over a network where the
 * gathers of one pass take longer than the forward but all the traffic less than the whole
 * step's compute, the forward's excess is exposed (pooling the two phases hid it), by hand from
 * the estimate's own collective prices and compute times. */
static void test_zero3_phases(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_calib cal;
    ap_err err;
    static ap_estimate e;
    ap_plan p = mkplan(1, 1, 64, 1, 64, 3, AP_RECOMPUTE_FULL, 0, 1);
    p.trainer = AP_TRAINER_FSDP;
    p.overlap_grad = p.overlap_param = 1;
    double params = (double)ap_model_total_params(&m), units = (double)m.layers + 1.0;
    double per = params / units;
    int found = 0;
    for (double gbps = 400; gbps >= 10 && !found; gbps *= 0.9) {
        ap_cluster c = cluster("a100-sxm4-80g", 64);
        c.net_bytes_per_s = gbps * 1e9 / 8.0;
        ap_calib_default(&c.gpu, &cal);
        const ap_kernels *k = ap_kernels_published(&c.gpu);
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
        double ag = ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLGATHER_OP, 2.0 * per, 64, 8);
        double rs = ap_estimate_coll_s(&c, &cal, k, AP_COLL_REDUCESCATTER_OP, 2.0 * per, 64, 8);
        double fwd = e.time.stage_fwd_s[0], rec = e.time.recompute_s;
        double bwd = e.time.compute_s - fwd;
        double AG = units * ag, comm = 2.0 * AG + units * rs;
        if (!(AG > 1.05 * fwd && comm < fwd + bwd + rec)) continue;
        found = 1;
        double z3 = (AG - fwd) + ag + fmax(0.0, AG + units * rs - bwd - rec) + rs;
        CHECK_NEAR(e.time.dp_comm_s, z3 + (comm - z3) * 0.189 / 1.189, 1e-9);
        CHECK(e.time.dp_comm_s > ag + rs + 0.05 * fwd);
    }
    CHECK(found);
}

/* FP8 under Transformer Engine's delayed scaling (Megatron-LM's default recipe) all-reduces each
 * model chunk's amaxes over the tp x dp x cp ranks at the end of its forward and in its
 * backward, blocking (estimate.c fp8_amax_time): GPT-3 175B as MLPerf runs it on 512 H100s (tp 4
 * pp 8 vp 12, one layer a chunk, 128 micro-batches) pays both calls (48 and 32 bytes of amaxes
 * over 64 ranks, 8 of them per node) in each of its 128 x 12 + 7 chunk passes, by hand from the
 * estimate's own collective price; per-tensor current scaling, BF16 and torchtitan's float8
 * (torchao, no delayed amax group) pay none. */
static void test_fp8_amax(void) {
    ap_model m = load("examples/models/gpt3-175b.json");
    ap_cluster c = cluster("h100-sxm", 512);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate de, te, be;
    ap_plan p = mkplan(4, 8, 16, 1, 2048, 1, AP_RECOMPUTE_NONE, 1, 12);
    p.seq = 2048;
    p.dtype = AP_DTYPE_FP8;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &de, &err) == AP_OK);
    p.fp8_recipe = AP_FP8_TENSORWISE;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &te, &err) == AP_OK);
    const struct ap_kernels *k = ap_kernels_published(&c.gpu);
    double call = ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLREDUCE_OP, 48.0, 64, 8) +
                  ap_estimate_coll_s(&c, &cal, k, AP_COLL_ALLREDUCE_OP, 32.0, 64, 8);
    CHECK(call > 0);
    CHECK_NEAR(de.time.dp_comm_s - te.time.dp_comm_s, call * (128.0 * 12 + 7), 1e-9);
    /* AUTO is Megatron-LM's delayed recipe, and says so */
    p.fp8_recipe = AP_FP8_DELAYED;
    static ap_estimate dx;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &dx, &err) == AP_OK);
    CHECK_NEAR(dx.time.step_s, de.time.step_s, 1e-12);
    p.fp8_recipe = AP_FP8_AUTO;
    p.dtype = AP_DTYPE_BF16;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &be, &err) == AP_OK);
    p.dtype = AP_DTYPE_FP8;
    p.trainer = AP_TRAINER_TORCHTITAN;
    p.zero = 3; /* torchtitan shards the data-parallel side under tp */
    p.overlap_param = 1;
    static ap_estimate tt;
    ap_status st = ap_estimate_plan(&m, &c, &p, NULL, &tt, &err);
    if (st != AP_OK) fprintf(stderr, "%s\n", err.msg);
    CHECK(st == AP_OK);
    if (st == AP_OK) {
        p.fp8_recipe = AP_FP8_TENSORWISE;
        static ap_estimate tw;
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &tw, &err) == AP_OK);
        /* torchao's float8 is tensorwise, its amax compiled into the producing kernel: naming
         * the recipe changes nothing */
        CHECK_NEAR(tt.time.step_s, tw.time.step_s, 1e-12);
        CHECK_NEAR(tt.time.dp_comm_s, tw.time.dp_comm_s, 1e-12);
        /* and it has no delayed scaling to ask for (pytorch/ao #1753) */
        p.fp8_recipe = AP_FP8_DELAYED;
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &tw, &err) == AP_ERR_INFEASIBLE);
        CHECK(strstr(err.msg, "delayed") != NULL);
    }
    /* BF16 pays no amax reduction: its DP traffic before overlap is the tensorwise FP8
     * plan's (the same reduction dtype and buckets) */
    CHECK_NEAR(be.time.dp_comm_total_s, te.time.dp_comm_total_s, 1e-12);
    /* a recipe is an FP8 plan's */
    p.trainer = AP_TRAINER_MEGATRON;
    p.zero = 1;
    p.dtype = AP_DTYPE_BF16;
    p.fp8_recipe = AP_FP8_TENSORWISE;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &tt, &err) == AP_ERR_INPUT);
    CHECK(strstr(err.msg, "fp8_recipe tensorwise needs dtype fp8") != NULL);
}

/* Current (tensorwise) scaling takes each fp8 GEMM input's amax by a pass of its own before the
 * cast (Transformer Engine's Float8CurrentScalingQuantizer: nvte_compute_amax, then
 * nvte_quantize), one more 2-byte read of every element; delayed scaling takes it inside the
 * cast. By hand for Llama-2-7B on one H100 (no collectives), one micro-batch of 4096 tokens:
 * its layer's four fp8 GEMMs read inputs of K = 4096 (q/k/v), 4096 (o), 4096 (gate/up) and
 * 11008 (down) features per token, the backward's two GEMMs per forward one quantise as many,
 * so 32 layers x 3 x 2 bytes x 4096 x 23296 / (HBM x mem_bound_eff) more compute. */
static void test_fp8_current_scaling(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("h100-sxm", 1);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate de, te;
    ap_plan p = mkplan(1, 1, 1, 1, 1, 0, AP_RECOMPUTE_NONE, 0, 1);
    p.dtype = AP_DTYPE_FP8;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &de, &err) == AP_OK);
    p.fp8_recipe = AP_FP8_TENSORWISE;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &te, &err) == AP_OK);
    double hbm = c.gpu.hbm_bytes_per_s * cal.mem_bound_eff;
    double want = 32.0 * 3.0 * 2.0 * 4096.0 * (4096.0 + 4096.0 + 4096.0 + 11008.0) / hbm;
    CHECK_NEAR(te.time.compute_s - de.time.compute_s, want, 1e-12);
    CHECK_NEAR(te.time.step_s - de.time.step_s, want, 1e-12);
    /* PyTorch FSDP through Accelerate runs either recipe, eagerly: the same pass */
    p.trainer = AP_TRAINER_FSDP;
    p.zero = 0;
    p.overlap_param = 0;
    static ap_estimate fd, ft;
    p.fp8_recipe = AP_FP8_AUTO;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &fd, &err) == AP_OK);
    p.fp8_recipe = AP_FP8_TENSORWISE;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &ft, &err) == AP_OK);
    CHECK_NEAR(ft.time.compute_s - fd.time.compute_s, want, 1e-12);
}

/* FSDP2's copies into and out of its collectives (estimate.c fsdp2_copy), by hand for Llama-2-7B
 * under FSDP (ZeRO 3, one micro-batch) on 8 H100: the forward's and the backward's all-gathers
 * each copy the whole model out of the collective's buffer (read and write 2 bytes a
 * parameter), and the backward copies the 16-bit gradients into the reduce-scatter's bf16
 * input (2 + 2): 12 bytes a parameter of memory-bound compute that a FlatParameter FSDP run
 * ("fsdp_version": 1) does not do. The collectives stay hidden either way, so the step moves
 * by as much; with two micro-batches by twice as much. */
static void test_fsdp2_copies(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("h100-sxm", 8);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate e1, e2;
    for (int64_t mb = 1; mb <= 2; mb++) {
        ap_plan p = mkplan(1, 1, 8, 1, 8 * mb, 3, AP_RECOMPUTE_NONE, 0, 1);
        p.trainer = AP_TRAINER_FSDP;
        p.overlap_param = 1;
        p.fsdp1 = 1;
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e1, &err) == AP_OK);
        p.fsdp1 = 0;
        CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e2, &err) == AP_OK);
        double want = (double)mb * 12.0 * (double)ap_model_total_params(&m) /
                      (c.gpu.hbm_bytes_per_s * cal.mem_bound_eff);
        CHECK_NEAR(e2.time.compute_s - e1.time.compute_s, want, 1e-9);
        CHECK_NEAR(e2.time.step_s - e1.time.step_s, want, 1e-9);
    }
}

static void test_refusals(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_err err;
    static ap_estimate e;
    ap_plan p = mkplan(8, 2, 4, 1, 64, 3, AP_RECOMPUTE_NONE, 1, 1);
    p.trainer = AP_TRAINER_DEEPSPEED;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "pipeline");
    p = mkplan(16, 1, 4, 1, 64, 1, AP_RECOMPUTE_NONE, 1, 1);
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "NVLink");
    p = mkplan(8, 1, 8, 1, 64, 1, AP_RECOMPUTE_NONE, 1, 1);
    p.dtype = AP_DTYPE_FP8;
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "fp8");
    p = mkplan(8, 1, 8, 1, 64, 0, AP_RECOMPUTE_NONE, 1, 1);
    p.offload_optimizer = 0.5; /* Megatron: needs the distributed optimizer */
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "distributed optimizer");
    /* more pipeline chunks than a plan's per-chunk arrays hold (AP_MAX_CHUNKS): pp 64 x vp 16
       of a 1,024-layer stack on 1,024 GPUs is refused, not estimated past the arrays' ends */
    m.layers = 1024;
    c = cluster("a100-sxm4-80g", 1024);
    p = mkplan(1, 64, 16, 1, 1024, 1, AP_RECOMPUTE_FULL, 0, 16);
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "1024 pipeline chunks exceed the supported 512");
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_ERR_INFEASIBLE);
    p.vp = 8; /* 512 chunks: within */
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_OK);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e, &err) == AP_OK);
}

/* Megatron-FSDP: llama-3-70b tp 8 dp 8 on 64 A100s. Each rank holds 1/64 of the model's 18
 * bytes/param plus two gathered layers (the current and the prefetched FSDP unit); its traffic
 * is in the stage times, per micro-batch; it refuses pipeline parallelism and experts (outside
 * its documented compatibility as autoplan models it), and cannot offload. */
static void test_megatron_fsdp(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_err err;
    static ap_estimate e1, e3;
    ap_plan p = mkplan(8, 1, 8, 1, 64, 1, AP_RECOMPUTE_FULL, 1, 1);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e1, &err) == AP_OK);
    p.zero = 3;
    p.overlap_param = 1;
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_OK);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &e3, &err) == AP_OK);
    const ap_stage_mem *s1 = &e1.stages[0], *s3 = &e3.stages[0];
    double n = s1->params_bytes / 2.0; /* the rank's parameters (bf16 weights unsharded at z1) */
    CHECK_NEAR(s3->params_bytes, 2.0 * n / 8, 1e-12);
    CHECK_NEAR(s3->grads_bytes, 4.0 * n / 8, 1e-12);
    CHECK_NEAR(s3->optimizer_bytes, s1->optimizer_bytes, 1e-12); /* 12/d at both */
    CHECK(s3->other_bytes > s1->other_bytes); /* the gathered layers */
    CHECK(e3.time.dp_comm_total_s > e1.time.dp_comm_total_s); /* gathers in fwd and bwd */
    p.pp = 2;
    p.dp = 4;
    p.grad_accum = 64 / 4;
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "ZeRO stage 3");
    ap_model moe = load("examples/models/mixtral-8x7b.json");
    p = mkplan(8, 1, 8, 1, 64, 3, AP_RECOMPUTE_FULL, 1, 1);
    CHECK(ap_plan_check(&p, &moe, &c, 0, &err) == AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "Megatron-FSDP is modelled for dense models only");
    p = mkplan(8, 1, 8, 1, 64, 3, AP_RECOMPUTE_FULL, 1, 1);
    p.offload_optimizer = 1;
    CHECK(ap_plan_check(&p, &m, &c, 0, &err) == AP_ERR_INFEASIBLE);
}

/* ap_estimate_copy: every field the estimate sets, the per-stage arrays up to nstages, and
 * nothing past them (dst keeps its own bytes there) */
static void test_estimate_copy(void) {
    ap_model m = load("examples/models/llama-3-70b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    ap_plan p = mkplan(4, 4, 4, 1, 512, 1, AP_RECOMPUTE_SELECTIVE, 1, 1);
    p.seq = m.seq_len;
    static ap_estimate src, dst;
    ap_err err;
    memset(&src, 0x5a, sizeof src);
    CHECK(ap_estimate_plan(&m, &c, &p, NULL, &src, &err) == AP_OK);
    memset(&dst, 0xab, sizeof dst);
    ap_estimate_copy(&dst, &src);
    int n = src.nstages;
    CHECK_INT(n, 4);
    CHECK(memcmp(&dst.plan, &src.plan, sizeof src.plan) == 0);
    CHECK(memcmp(&dst.time, &src.time, offsetof(ap_time, stage_fwd_s)) == 0);
    CHECK(memcmp(dst.time.stage_fwd_s, src.time.stage_fwd_s, n * sizeof(double)) == 0);
    CHECK(memcmp(dst.time.stage_bwd_s, src.time.stage_bwd_s, n * sizeof(double)) == 0);
    CHECK(memcmp(&dst.tp, &src.tp, sizeof src.tp) == 0);
    CHECK(memcmp(dst.stages, src.stages, n * sizeof src.stages[0]) == 0);
    CHECK(memcmp(&dst.worst_stage, &src.worst_stage,
                 sizeof src - offsetof(ap_estimate, worst_stage)) == 0);
    CHECK(dst.time.step_s == src.time.step_s && dst.fits == src.fits &&
          dst.device_peak_bytes == src.device_peak_bytes);
    const unsigned char *past = (const unsigned char *)&dst.stages[n];
    CHECK(past[0] == 0xab && past[sizeof dst.stages[0] - 1] == 0xab);
    CHECK(((const unsigned char *)&dst.time.stage_fwd_s[n])[0] == 0xab);
}

/* Two estimates agree in every part a plan uses. */
static int same_estimate(const ap_estimate *a, const ap_estimate *b) {
    int n = a->nstages;
    return n == b->nstages && memcmp(&a->plan, &b->plan, sizeof a->plan) == 0 &&
           memcmp(&a->time, &b->time, offsetof(ap_time, stage_fwd_s)) == 0 &&
           memcmp(a->time.stage_fwd_s, b->time.stage_fwd_s, n * sizeof(double)) == 0 &&
           memcmp(a->time.stage_bwd_s, b->time.stage_bwd_s, n * sizeof(double)) == 0 &&
           memcmp(a->stages, b->stages, n * sizeof a->stages[0]) == 0 &&
           memcmp(&a->worst_stage, &b->worst_stage,
                  sizeof *a - offsetof(ap_estimate, worst_stage)) == 0;
}

/* A uniform layout's ranks are counted in closed form (estimate.c chunks_closed_form), an
 * explicit one chunk by chunk: the same split given both ways estimates alike in every part, for
 * layer counts with and without a remainder, pipeline and interleaving degrees, and full
 * recomputation of all layers or of a count per chunk that is below, at and above the chunk
 * sizes, under every trainer with pipelines. */
static void test_closed_form_layers(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 48);
    static ap_estimate a, b;
    ap_err err;
    int bad = 0, n = 0, n_rem = 0, n_vp = 0, n_partial = 0;
    const int pps[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 48}, vps[] = {1, 2, 3, 4};
    const ap_trainer_id trs[] = {AP_TRAINER_MEGATRON, AP_TRAINER_DEEPSPEED, AP_TRAINER_TORCHTITAN,
                                 AP_TRAINER_COLOSSALAI};
    for (int it = 0; it < 4; it++)
        for (int L = 4; L <= 64; L++)
            for (int ip = 0; ip < 10; ip++)
                for (int iv = 0; iv < 4; iv++)
                    for (int rl = -1; rl <= 4; rl++) {
                        int pp = pps[ip], vp = vps[iv], nc = pp * vp;
                        if (nc > L || (vp > 1 && pp == 1)) continue;
                        m.layers = L;
                        ap_plan u = mkplan(1, pp, 48 / pp, 1, 4 * 48, 1,
                                           rl < 0 ? AP_RECOMPUTE_NONE : AP_RECOMPUTE_FULL, 0, vp);
                        u.seq = 512;
                        u.trainer = trs[it];
                        if (rl > 0) u.recompute_layers = rl;
                        ap_plan x = u;
                        x.nchunks = nc;
                        for (int k = 0; k < nc; k++)
                            x.stage_layers[k] = ap_plan_chunk_layers(&u, L, k);
                        if (ap_estimate_plan(&m, &c, &u, NULL, &a, &err) != AP_OK ||
                            ap_estimate_plan(&m, &c, &x, NULL, &b, &err) != AP_OK)
                            continue; /* a trainer's rule on one layout or the other */
                        b.plan = a.plan;
                        bad += !same_estimate(&a, &b);
                        n++;
                        n_rem += L % nc != 0;
                        n_vp += vp > 1;
                        n_partial += rl > 0;
                    }
    CHECK_INT(bad, 0);
    /* compared: remainders, interleaving and partial recomputation among them (no trainer
     * interleaves chunks of unequal sizes: ap_plan_check) */
    CHECK(n > 4000 && n_rem > 2000 && n_vp > 500 && n_partial > 2000);
}

/* Default estimate options without a memo (plain) and with a fresh one (memo); 0 when the memo
 * cannot be made (a failed check). */
static int memo_opts(ap_estimate_opts *plain, ap_estimate_opts *memo) {
    ap_estimate_opts_init(plain);
    ap_estimate_opts_init(memo);
    memo->cache = ap_estimate_cache_new();
    CHECK(memo->cache != NULL);
    return memo->cache != NULL;
}

/* Whether plan p estimates the same through a memo (opts memo) as without one (plain): the
 * same status, and with AP_OK the same estimate; *ran counts the plain estimates that ran. */
static int memo_agrees(const ap_model *m, const ap_cluster *c, const ap_plan *p,
                       const ap_estimate_opts *memo, const ap_estimate_opts *plain, int *ran) {
    static ap_estimate a, b;
    ap_err err;
    ap_status s1 = ap_estimate_plan(m, c, p, memo, &a, &err);
    ap_status s0 = ap_estimate_plan(m, c, p, plain, &b, &err);
    if (ran) *ran += s0 == AP_OK;
    return s1 == s0 && (s0 != AP_OK || same_estimate(&a, &b));
}

/* The layer-price memo changes no answer: shapes met once, again in another order, more of them
 * than the table first holds (it grows), and beyond its largest size (it overwrites), each
 * estimate equal to one made without the memo; a shape that cannot run is refused through the
 * memo as without it. */
static void test_price_memo(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 64);
    static ap_estimate a, b;
    ap_err err;
    ap_estimate_opts plain, memo;
    if (!memo_opts(&plain, &memo)) return;
    /* 4 tp x 2 sp x 40 micro-batch sizes = 320 shapes, visited forward then backward */
    int bad = 0, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 320; i++) {
            int j = pass ? 319 - i : i;
            int tp = 1 << (j % 4), sp = (j / 4) % 2 && tp > 1;
            int64_t mbs = 1 + j / 8;
            ap_plan p = mkplan(tp, 1, 64 / tp, mbs, mbs * (64 / tp) * 2, 1, AP_RECOMPUTE_FULL, sp, 1);
            bad += !memo_agrees(&m, &c, &p, &memo, &plain, &n);
        }
    CHECK_INT(bad, 0);
    CHECK(n == 640);
    /* FlashAttention-3 has no A100 figures: refused with the memo, the first time and after */
    ap_plan p = mkplan(1, 1, 64, 1, 64, 1, AP_RECOMPUTE_FULL, 0, 1);
    p.attn_impl = AP_ATTN_FA3;
    for (int k = 0; k < 2; k++) {
        CHECK(ap_estimate_plan(&m, &c, &p, &memo, &a, &err) == AP_ERR_INFEASIBLE);
        CHECK(ap_estimate_plan(&m, &c, &p, &plain, &b, &err) == AP_ERR_INFEASIBLE);
    }
    /* 5000 shapes (one per micro-batch size) outgrow the largest table (4096 slots, half used); the oldest are
     * overwritten, and a sample of every kind still agrees */
    bad = 0;
    for (int64_t mbs = 1; mbs <= 5000; mbs++) {
        ap_plan q = mkplan(1, 1, 64, mbs, mbs * 64, 1, AP_RECOMPUTE_FULL, 0, 1);
        q.seq = 16;
        ap_status s1 = ap_estimate_plan(&m, &c, &q, &memo, &a, &err);
        if (mbs % 97 == 0 || mbs < 4) {
            ap_status s0 = ap_estimate_plan(&m, &c, &q, &plain, &b, &err);
            if (s1 != s0 || (s0 == AP_OK && !same_estimate(&a, &b))) bad++;
        }
    }
    for (int64_t mbs = 1; mbs <= 5000; mbs += 499) {
        ap_plan q = mkplan(1, 1, 64, mbs, mbs * 64, 1, AP_RECOMPUTE_FULL, 0, 1);
        q.seq = 16;
        bad += !memo_agrees(&m, &c, &q, &memo, &plain, NULL);
    }
    CHECK_INT(bad, 0);
    ap_estimate_cache_free(memo.cache);
}

/* The collective memo (estimate.c COLL_SLOTS, direct-mapped) changes no answer: data-parallel
 * collectives over 1-512 ranks at 5 network bandwidths, ZeRO 1 and 3, are more call shapes than
 * its slots, so shapes collide and are worked out again; visited forward then backward, every
 * estimate through the memo equals one made without it. */
static void test_coll_memo(void) {
    ap_model m = load("examples/models/llama-2-7b.json");
    ap_estimate_opts plain, memo;
    if (!memo_opts(&plain, &memo)) return;
    int bad = 0, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < 512 * 5 * 2; i += 7) {
            int j = pass ? 512 * 5 * 2 - 1 - i : i;
            int dp = 1 + j % 512, bwi = (j / 512) % 5, zero = j / 2560 ? 3 : 1;
            ap_cluster c = cluster("a100-sxm4-80g", dp);
            c.net_bytes_per_s *= 0.25 + 0.5 * bwi;
            ap_plan p = mkplan(1, 1, dp, 1, dp, zero, AP_RECOMPUTE_FULL, 0, 1);
            bad += !memo_agrees(&m, &c, &p, &memo, &plain, &n);
        }
    CHECK_INT(bad, 0);
    CHECK(n > 600);
    ap_estimate_cache_free(memo.cache);
}

/* The first rank's compute by kind of kernel (estimate.h part_*_s, what profile check sets
 * beside a trace): on one GPU with no recomputation the parts add up to the forward and the
 * backward, the backward runs twice the forward's GEMMs, and the output layer's GEMM is in the
 * GEMM part: two vocabularies differ there by the two head GEMMs priced by hand. */
static void test_compute_parts(void) {
    ap_model a = load("examples/models/llama-2-7b.json");
    ap_cluster c = cluster("a100-sxm4-80g", 1);
    ap_calib cal;
    ap_calib_default(&c.gpu, &cal);
    ap_err err;
    static ap_estimate ea, eb;
    ap_plan p = mkplan(1, 1, 1, 1, 1, 0, AP_RECOMPUTE_NONE, 0, 1);
    p.trainer = AP_TRAINER_FSDP;
    p.overlap_param = 0;
    ap_estimate_opts o;
    ap_estimate_opts_init(&o);
    CHECK_INT(ap_estimate_plan(&a, &c, &p, NULL, &ea, &err), AP_OK);
    CHECK_NEAR(ea.time.part_fwd_s[AP_PART_GEMM], 0, 0); /* not asked for */
    o.compute_parts = 1;
    CHECK_INT(ap_estimate_plan(&a, &c, &p, &o, &ea, &err), AP_OK);
    const ap_time *t = &ea.time;
    CHECK(t->part_fwd_s[AP_PART_GEMM] > 0 && t->part_fwd_s[AP_PART_ATTN] > 0 &&
          t->part_fwd_s[AP_PART_OTHER] > 0);
    CHECK_NEAR(t->part_fwd_s[0] + t->part_fwd_s[1] + t->part_fwd_s[2], t->stage_fwd_s[0], 1e-12);
    CHECK_NEAR(t->part_bwd_s[0] + t->part_bwd_s[1] + t->part_bwd_s[2], t->stage_bwd_s[0], 1e-12);
    CHECK_NEAR(t->part_bwd_s[AP_PART_GEMM], 2 * t->part_fwd_s[AP_PART_GEMM], 1e-12);
    /* the attention backward: the flash kernels' backward at its own table rate, slower than
       the forward per FLOP (2.5x the FLOPs) */
    CHECK(t->part_bwd_s[AP_PART_ATTN] > 2.5 * t->part_fwd_s[AP_PART_ATTN]);
    ap_model b = a;
    b.vocab = 2 * a.vocab;
    CHECK_INT(ap_estimate_plan(&b, &c, &p, &o, &eb, &err), AP_OK);
    double T = 4096, h = (double)a.hidden;
    double head = hand_gemm_s(&c.gpu, &cal, T, (double)b.vocab, h) -
                  hand_gemm_s(&c.gpu, &cal, T, (double)a.vocab, h);
    CHECK_NEAR(eb.time.part_fwd_s[AP_PART_GEMM] - t->part_fwd_s[AP_PART_GEMM], head, 1e-9);
    CHECK_NEAR(eb.time.part_fwd_s[AP_PART_ATTN], t->part_fwd_s[AP_PART_ATTN], 1e-15);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_zero_table1();
    test_zero_table2_maxima();
    test_megatron_bytes();
    test_smi_reading();
    test_nccl_overhead();
    test_fp8_params();
    test_fp8_saved_inputs();
    test_moe_permute_bytes();
    test_oai_gate_clamps();
    test_moe_expert_shards();
    test_state_dtypes();
    test_megatron_fsdp();
    test_deepspeed_estimator();
    test_korthikanti_table2();
    test_variants_by_hand();
    test_properties();
    test_pipeline_memory();
    test_offload();
    test_grad_accumulation_passes();
    test_bf16_optimizer_upcast();
    test_tied_embedding_reduction();
    test_cp_eager_merge();
    test_sac_regathers();
    test_zero_grad_bucket();
    test_op_sac();
    test_tp_overlap();
    test_tp_overlap_multicast();
    test_eager_elementwise();
    test_compute_parts();
    test_tp_overlap_pairs();
    test_overlap_contention();
    test_zero3_phases();
    test_fp8_amax();
    test_fp8_current_scaling();
    test_fsdp2_copies();
    test_refusals();
    test_estimate_copy();
    test_price_memo();
    test_coll_memo();
    test_closed_form_layers();
    test_dp_buckets();
    test_hsdp();
    test_tp_bwd_async();
    test_cp_a2a();
    test_mxfp8();
    return tl_finish();
}
