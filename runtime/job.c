/*
 * job.c - what the runtime can run and the job it is given (runtime.h): ap_rt_check refuses,
 * with one line, any model feature or plan option the executor does not implement, before a rank
 * starts; the job (model, plan, steps, seed, optimizer, what to record) travels to the ranks as
 * JSON (the model and plan in plan.json's format, output/planio.c); ap_rt_cluster is the CPU
 * cluster the runtime's plans are priced on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autoplan/planio.h"
#include "rt_int.h"

static const char *const cat_names[AP_RT_NCAT] = {"params",      "grads",       "optimizer",
                                                  "activations", "temporaries", "comm"};

const char *ap_rt_category_name(int cat) {
    if (cat == AP_RT_NCAT) return "host"; /* the host pool, in event logs */
    return cat >= 0 && cat < AP_RT_NCAT ? cat_names[cat] : "?";
}

void ap_rt_job_init(ap_rt_job *j) {
    memset(j, 0, sizeof *j);
    ap_model_init(&j->model);
    ap_plan_init(&j->plan);
    j->plan.trainer = AP_TRAINER_RUNTIME;
    j->plan.dtype = AP_DTYPE_FP32;
    j->plan.flash_attn = 0;
    j->steps = 5;
    j->seed = 1234;
    snprintf(j->backend, sizeof j->backend, "cpu");
    /* Llama 2 (Touvron et al. 2023, Sec. 2.2): AdamW beta1 0.9, beta2 0.95, eps 1e-5, weight
       decay 0.1; the learning rate of GPT-3's smallest models (6e-4, Brown et al. 2020 Table
       2.1) rounded up, as a run here is a few steps. An eps well above fp32's rounding of the
       gradients keeps Adam from turning summation-order noise of near-zero gradients into
       full-size steps, so differently sharded runs stay within 1e-4 of each other. */
    j->optim.lr = 1e-3;
    j->optim.beta1 = 0.9;
    j->optim.beta2 = 0.95;
    j->optim.eps = 1e-5;
    j->optim.weight_decay = 0.1;
}

void ap_rt_cluster(int ranks, const ap_rt_host_figures *h, ap_cluster *out) {
    const ap_gpu *g = ap_gpu_find("cpu");
    ap_cluster_from_gpu(g, ranks, out);
    /* every rank on one host: the domain is the host */
    ap_cluster_set_gpus_per_node(out, ranks);
    out->nvlink_domain = out->gpus_per_node;
    if (h && h->measured) {
        if (h->gemm_flops_per_s > 0) out->gpu.peak_flops[AP_DTYPE_FP32] = h->gemm_flops_per_s;
        if (h->mem_bytes_per_s > 0) {
            out->gpu.hbm_bytes_per_s = h->mem_bytes_per_s;
            out->pcie_bytes_per_s = h->mem_bytes_per_s; /* offload copies are memcpy */
        }
        if (h->p2p_bytes_per_s > 0) out->link_bytes_per_s = h->p2p_bytes_per_s;
    }
}

/* ---- what the runtime runs ------------------------------------------------------------------- */

#define REFUSE(...) return ap_err_set(err, AP_ERR_INPUT, __VA_ARGS__)

static ap_status check_model(const ap_model *m, ap_err *err) {
    if (m->moe.experts > 0) REFUSE("runtime: MoE layers are not implemented (dense models only)");
    if (m->mla.kv_lora_rank > 0) REFUSE("runtime: multi-head latent attention is not implemented");
    if (m->parallel_attn) REFUSE("runtime: parallel attention blocks are not implemented");
    if (m->embed_norm) REFUSE("runtime: a norm after the embedding is not implemented");
    if (m->norms_per_layer != 2)
        REFUSE("runtime: %d norms per layer; the runtime has the pre-norm block's 2",
               m->norms_per_layer);
    if (!m->final_norm) REFUSE("runtime: models without a final norm are not implemented");
    if (m->pos == AP_POS_ALIBI) REFUSE("runtime: ALiBi positions are not implemented");
    if (m->act == AP_ACT_RELU || m->act == AP_ACT_RELU2)
        REFUSE("runtime: ReLU and squared-ReLU MLPs are not implemented (gelu, swiglu)");
    if (m->pos == AP_POS_ROTARY && m->head_dim % 2 != 0)
        REFUSE("runtime: rotary positions need an even head_dim, got %lld",
               (long long)m->head_dim);
    if (m->heads % m->kv_heads != 0)
        REFUSE("runtime: heads (%lld) are not a multiple of kv_heads (%lld)", (long long)m->heads,
               (long long)m->kv_heads);
    return AP_OK;
}

ap_status ap_rt_check(const ap_model *m, const ap_plan *p, ap_err *err) {
    ap_status st = check_model(m, err);
    if (st != AP_OK) return st;
    if (p->trainer != AP_TRAINER_RUNTIME)
        REFUSE("runtime: the plan's trainer is %s; runtime plans use the runtime trainer",
               ap_trainer_name(p->trainer));
    if (p->dtype != AP_DTYPE_FP32)
        REFUSE("runtime: computes in fp32, not %s", ap_dtype_name(p->dtype));
    if (p->cp > 1) REFUSE("runtime: context parallelism (cp %d) is not implemented yet", p->cp);
    if (p->ep > 1 || p->etp > 1)
        REFUSE("runtime: expert parallelism (ep %d) is not implemented yet", p->ep);
    if (p->offload_params > 0)
        REFUSE("runtime: parameter offload is not implemented (optimizer offload is)");
    if (p->overlap_grad || p->overlap_param || p->overlap_tp)
        REFUSE("runtime: communication is not overlapped with compute (drop --overlap)");
    if (p->flash_attn) REFUSE("runtime: attention materialises its scores (no flash attention)");
    if (p->hetero.placement != AP_GEMINI_OFF || p->hetero.ds_optimizer != AP_OFFLOAD_DEV_NONE ||
        p->hetero.ds_params != AP_OFFLOAD_DEV_NONE)
        REFUSE("runtime: Gemini placements and DeepSpeed offload devices are other trainers'; the "
               "runtime keeps the plan's optimizer offload fraction in host memory");
    int t = p->tp;
    if (t < 1 || p->pp < 1 || p->dp < 1) REFUSE("runtime: degrees must be >= 1");
    if (m->heads % t || m->kv_heads % t)
        REFUSE("runtime: tp %d must divide the heads (%lld) and the kv heads (%lld); kv heads "
               "are not replicated", t, (long long)m->heads, (long long)m->kv_heads);
    if (m->ffn_hidden % t)
        REFUSE("runtime: tp %d does not divide the FFN width %lld", t, (long long)m->ffn_hidden);
    if (m->vocab % t)
        REFUSE("runtime: tp %d does not divide the vocabulary %lld (no padding)", t,
               (long long)m->vocab);
    int64_t n = p->seq * p->mbs;
    if (p->seq < 1 || p->mbs < 1) REFUSE("runtime: sequence and micro-batch must be >= 1");
    if (n > (1 << 22) || p->seq > 65536)
        REFUSE("runtime: %lld tokens per micro-batch (sequence %lld) is too large for the "
               "runtime's materialised attention", (long long)n, (long long)p->seq);
    if (p->sp && t > 1 && n % t != 0)
        REFUSE("runtime: sequence parallelism needs tp %d to divide the %lld tokens of a "
               "micro-batch", t, (long long)n);
    if (m->pos == AP_POS_LEARNED && p->seq > m->learned_pos)
        REFUSE("runtime: sequence %lld is longer than the %lld learned positions",
               (long long)p->seq, (long long)m->learned_pos);
    if (p->grad_accum < 1 || p->gbs != p->grad_accum * p->mbs * p->dp)
        REFUSE("runtime: gbs %lld is not mbs x dp x micro-batches", (long long)p->gbs);
    /* the trainer table's rules (uneven stages, interleaving, ZeRO, offload, recompute) */
    ap_cluster c;
    ap_rt_cluster(t * p->pp * p->dp * (p->cp > 0 ? p->cp : 1), NULL, &c);
    ap_err e = {{0}};
    if (ap_plan_check(p, m, &c, 1, &e) != AP_OK) REFUSE("%s", e.msg);
    for (int ch = 0; ch < p->pp * p->vp; ch++)
        if (ap_plan_chunk_layers(p, m->layers, ch) < 0) REFUSE("runtime: a negative chunk");
    return AP_OK;
}

/* ---- the job as JSON ---------------------------------------------------------------------------- */

ap_json *ap_rt_job_to_json(const ap_rt_job *j) {
    ap_cluster c;
    ap_rt_cluster(j->plan.tp * j->plan.pp * j->plan.dp, NULL, &c);
    ap_json *root = ap_json_new_object();
    ap_json *plan = ap_planfile_to_json(&j->model, &c, &j->plan, NULL);
    ap_json *opt = ap_json_new_object();
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
    int ok = root && plan && opt && ap_json_add(root, "plan", plan) == AP_OK;
    if (!ok) ap_json_free(plan);
    ok = ok && ap_json_add_number(opt, "lr", j->optim.lr) == AP_OK &&
         ap_json_add_number(opt, "beta1", j->optim.beta1) == AP_OK &&
         ap_json_add_number(opt, "beta2", j->optim.beta2) == AP_OK &&
         ap_json_add_number(opt, "eps", j->optim.eps) == AP_OK &&
         ap_json_add_number(opt, "weight_decay", j->optim.weight_decay) == AP_OK;
    if (ok) ok = ap_json_add(root, "optim", opt) == AP_OK;
    else ap_json_free(opt);
    ok = ok && ap_json_add_number(root, "steps", j->steps) == AP_OK &&
         ap_json_add_string(root, "backend", j->backend) == AP_OK &&
         ap_json_add_string(root, "seed", seed) == AP_OK &&
         ap_json_add_bool(root, "bench", j->bench) == AP_OK &&
         ap_json_add_bool(root, "trace", j->trace) == AP_OK &&
         ap_json_add_bool(root, "record_events", j->record_events) == AP_OK &&
         ap_json_add_string(root, "save_path", j->save_path) == AP_OK &&
         ap_json_add_number(root, "fail_rank", j->fail_rank) == AP_OK &&
         ap_json_add_number(root, "fail_alloc", (double)j->fail_alloc) == AP_OK;
    if (!ok) {
        ap_json_free(root);
        return NULL;
    }
    return root;
}

static ap_status get_real(const ap_json *o, const char *k, double lo, double hi, double *out,
                          const char *where, ap_err *err) {
    return ap_json_get_real(o, k, lo, hi, out, NULL, where, err);
}

ap_status ap_rt_job_from_json(const ap_json *root, const char *where, ap_rt_job *j, ap_err *err) {
    ap_rt_job_init(j);
    if (!ap_json_is_object(root))
        return ap_err_set(err, AP_ERR_INPUT, "%s: a job is a JSON object", where);
    ap_cluster c;
    ap_status st = ap_planfile_from_json(ap_json_get(root, "plan"), where, &j->model, &c,
                                         &j->plan, NULL, err);
    if (st != AP_OK) return st;
    int64_t v;
    if ((st = ap_json_get_int(root, "steps", 1, 1000000, &v, NULL, where, err)) != AP_OK)
        return st;
    j->steps = (int)v;
    if ((st = ap_json_get_str(root, "backend", j->backend, sizeof j->backend, NULL, where, err)) !=
        AP_OK)
        return st;
    if (strcmp(j->backend, "cpu") && strcmp(j->backend, "cuda"))
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'backend' must be cpu or cuda", where);
    char seed[32];
    if ((st = ap_json_get_str(root, "seed", seed, sizeof seed, NULL, where, err)) != AP_OK)
        return st;
    char *end;
    j->seed = strtoull(seed, &end, 10);
    if (*end || !*seed)
        return ap_err_set(err, AP_ERR_INPUT, "%s: field 'seed' must be a decimal integer", where);
    const ap_json *o = ap_json_get(root, "optim");
    if ((st = get_real(o, "lr", 0, 10, &j->optim.lr, where, err)) != AP_OK ||
        (st = get_real(o, "beta1", 0, 1, &j->optim.beta1, where, err)) != AP_OK ||
        (st = get_real(o, "beta2", 0, 1, &j->optim.beta2, where, err)) != AP_OK ||
        (st = get_real(o, "eps", 0, 1, &j->optim.eps, where, err)) != AP_OK ||
        (st = get_real(o, "weight_decay", 0, 10, &j->optim.weight_decay, where, err)) != AP_OK)
        return st;
    if ((st = ap_json_get_bool(root, "bench", &j->bench, NULL, where, err)) != AP_OK ||
        (st = ap_json_get_bool(root, "trace", &j->trace, NULL, where, err)) != AP_OK ||
        (st = ap_json_get_bool(root, "record_events", &j->record_events, NULL, where, err)) !=
            AP_OK ||
        (st = ap_json_get_str(root, "save_path", j->save_path, sizeof j->save_path, NULL, where,
                              err)) != AP_OK)
        return st;
    if ((st = ap_json_get_int(root, "fail_rank", 0, 1 << 20, &v, NULL, where, err)) != AP_OK)
        return st;
    j->fail_rank = (int)v;
    if ((st = ap_json_get_int(root, "fail_alloc", 0, (int64_t)1 << 40, &j->fail_alloc, NULL, where,
                              err)) != AP_OK)
        return st;
    return ap_rt_check(&j->model, &j->plan, err);
}
