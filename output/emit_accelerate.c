/*
 * emit_accelerate.c - accelerate.yaml for `accelerate launch --config_file accelerate.yaml`
 * (Hugging Face Accelerate 1.15, keys from shared/reference/trainers/accelerate_keys.txt).
 *
 * Two paths, chosen by ap_emit_trainer: plans made for fsdp or torchtitan take the FSDP path
 * (fsdp_config, FSDP2: ZeRO-2 = reshard_after_forward false, ZeRO-3 = true; CPU offload moves
 * parameters and optimizer states together), every other plan the DeepSpeed path, which
 * references accelerate_ds_config.json (the HF/AutoTP DeepSpeed flavour, written alongside).
 * When deepspeed_config_file is set, Accelerate refuses the YAML also setting zero stage,
 * accumulation, clipping, offload or mixed precision, so the YAML carries none of them.
 *
 * Not done here: the training script (micro-batch size and, on the FSDP path, the accumulation
 * go to the script's DataLoader / Accelerator(gradient_accumulation_steps=...), see header).
 */
#include <stdio.h>
#include <string.h>

#include "emit_int.h"

int emit_accelerate_local(const emit_ctx *x, ap_plan *q, int fix, sb *why) {
    int ok = 1;
    if (x->tid == AP_TRAINER_DEEPSPEED) {
        char w[200];
        if (!ds_hf_expressible(q, w, sizeof w)) {
            emit_why(why, "accelerate (DeepSpeed path): %s", w);
            ok = 0;
            if (fix) {
                q->dp *= q->pp * q->cp;
                q->pp = q->cp = q->vp = 1;
                q->ep = q->etp = 1;
                q->sp = 0;
                q->nchunks = 0;
                if (q->tp > 1 && q->zero > 2) q->zero = 2;
                if (q->zero < 3) q->offload_params = 0;
                if (q->offload_optimizer > 0 && q->offload_optimizer < 1 && q->zero < 3)
                    q->offload_optimizer = 1;
            }
        }
        /* LOCAL RULE (same as the deepspeed target): DeepSpeed-MoE cannot keep leading
           layers dense. */
        if (x->m->moe.experts > 0 && x->m->moe.first_dense_layers > 0) {
            emit_why(why, "accelerate (DeepSpeed path): DeepSpeed MoE cannot keep the first "
                     "layers dense");
            ok = 0;
        }
    }
    /* the FSDP path's CPUOffload moving parameters and optimizer states together is the
       trainer-table rule offload_together (the fsdp entry) */
    return ok;
}

/* mixed_precision, and for fp8 the backend of the plan's recipe: launch.py copies fp8_config's
 * keys into ACCELERATE_FP8_* variables as written (utils/launch.py setup_fp8_env) and the
 * Accelerator reads the backend as FP8BackendType, whose values are upper case ("TE", "AO"):
 * Transformer Engine's delayed scaling (format HYBRID: E4M3 forward, E5M2 gradients, as
 * Megatron-LM's --fp8-format hybrid), or torchao's Float8Linear, tensorwise dynamic scaling */
static void precision(sb *b, const ap_plan *p) {
    if (p->dtype != AP_DTYPE_FP8) {
        sb_printf(b, "mixed_precision: %s\n", p->dtype == AP_DTYPE_FP16 ? "fp16" : "bf16");
        return;
    }
    sb_printf(b, "mixed_precision: fp8\nfp8_config:\n");
    if (ap_plan_fp8_recipe(p) == AP_FP8_TENSORWISE)
        sb_printf(b, "  fp8_backend: AO\n");
    else
        sb_printf(b, "  fp8_backend: TE\n  fp8_format: HYBRID\n");
}

ap_status emit_accelerate_render(const emit_ctx *x, ap_emit_out *out, ap_err *err) {
    const ap_plan *p = x->p;
    const ap_cluster *c = x->c;
    int per_node = ap_cluster_gpus_per_host(c);
    int nodes = (c->gpus + per_node - 1) / per_node;
    int ds = x->tid == AP_TRAINER_DEEPSPEED;
    ap_status st;

    if (ds) {
        sb cfg = {0};
        if (ds_render_config(x, 1, &cfg) != AP_OK) {
            sb_free(&cfg);
            return ap_err_set(err, AP_ERR_NOMEM, "accelerate_ds_config.json: out of memory");
        }
        st = emit_take(out, "accelerate_ds_config.json", &cfg, err);
        if (st != AP_OK) return st;
    }
    sb b = {0};
    emit_header(&b, x, "# ", ds ? "Accelerate (1.15) config, DeepSpeed path, for this autoplan plan."
                                : "Accelerate (1.15) config, FSDP path, for this autoplan plan.");
    sb_printf(&b, "# Run: accelerate launch --config_file accelerate.yaml train.py%s\n",
              nodes > 1 ? "   (on every node, with --machine_rank <i>)" : "");
    if (ds) {
        sb_printf(&b, "# DeepSpeed settings (ZeRO, batch, accumulation, clipping, precision, "
                      "offload) live in\n# accelerate_ds_config.json; the script's per-device "
                      "batch must be %lld and its\n# accumulation %lld.\n",
                  (long long)p->mbs, (long long)p->grad_accum);
    } else {
        sb_printf(&b, "# In the script: per-device batch %lld, "
                      "Accelerator(gradient_accumulation_steps=%lld).\n",
                  (long long)p->mbs, (long long)p->grad_accum);
    }
    if (p->recompute == AP_RECOMPUTE_FULL && (ds || p->zero == 0))
        sb_printf(&b, "# Recompute: call model.gradient_checkpointing_enable() in the script.\n");
    sb_printf(&b, "compute_environment: LOCAL_MACHINE\n");
    sb_printf(&b, "distributed_type: %s\n",
              ds ? "DEEPSPEED" : p->zero == 0 ? "MULTI_GPU" : "FSDP");
    if (ds) {
        sb_printf(&b, "deepspeed_config:\n");
        sb_printf(&b, "  deepspeed_config_file: accelerate_ds_config.json\n");
        sb_printf(&b, "  zero3_init_flag: %s\n", p->zero == 3 ? "true" : "false");
        if (nodes > 1) sb_printf(&b, "  deepspeed_multinode_launcher: standard\n");
    } else if (p->zero == 0) {
        /* no sharding: plain DDP */
        precision(&b, p);
    } else {
        precision(&b, p);
        sb_printf(&b, "fsdp_config:\n");
        sb_printf(&b, "  fsdp_version: 2\n");
        sb_printf(&b, "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n");
        sb_printf(&b, "  fsdp_reshard_after_forward: %s\n", p->zero == 3 ? "true" : "false");
        sb_printf(&b, "  fsdp_offload_params: %s\n", p->offload_params > 0 ? "true" : "false");
        sb_printf(&b, "  fsdp_activation_checkpointing: %s\n",
                  p->recompute == AP_RECOMPUTE_FULL ? "true" : "false");
        sb_printf(&b, "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
        sb_printf(&b, "  fsdp_cpu_ram_efficient_loading: true\n");
        sb_printf(&b, "  fsdp_sync_module_states: true\n");
        sb_printf(&b, "parallelism_config:\n");
        /* hybrid sharding: FSDP2 over a (replicate, shard) mesh */
        int shard = ap_plan_zero_shard(p); /* FSDP has no cp: of the dp ranks */
        if (shard < p->dp)
            sb_printf(&b, "  parallelism_config_dp_replicate_size: %d\n", p->dp / shard);
        sb_printf(&b, "  parallelism_config_dp_shard_size: %d\n", shard);
    }
    sb_printf(&b, "machine_rank: 0\n");
    if (nodes > 1) {
        sb_printf(&b, "# replace with the address of node 0 (machine_rank 0)\n");
        sb_printf(&b, "main_process_ip: NODE0_ADDRESS\n");
        sb_printf(&b, "main_process_port: 29500\n");
    }
    sb_printf(&b, "num_machines: %d\n", nodes);
    sb_printf(&b, "num_processes: %d\n", c->gpus);
    sb_printf(&b, "rdzv_backend: static\n");
    sb_printf(&b, "same_network: true\n");
    sb_printf(&b, "use_cpu: false\n");
    return emit_take(out, "accelerate.yaml", &b, err);
}
