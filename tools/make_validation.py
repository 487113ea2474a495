#!/usr/bin/env python3
"""Build tests/data/validation.json from shared/reference/published-public.json.

Run once when the reference data changes:
    python3 tools/make_validation.py ../shared/reference/published-public.json > tests/data/validation.json

Each row: source id + citation, the model (native autoplan fields), the exact plan of the run,
the GPU and network, and one measured metric:
  step_s            iteration time in seconds (Narayanan 2021 Table 1: derived from the reported
                    TFLOP/s with the paper's Eq. 3, which counts the recompute forward pass;
                    Korthikanti 2022 Table 5: reported iteration time; the 530B data-parallel run
                    reported only as MFU: time = model FLOPs / (MFU x 312 TFLOP/s x GPUs))
  layer_s           forward + backward time of one transformer layer (Korthikanti Table 4)
  activations_bytes activation memory of the first stage (Korthikanti Figure 1, third-party
                    transcription: scored within 3%); the readings are Table 2's per-layer
                    formula x layers x in-flight micro-batches, so they are compared with the
                    transformer layers' activations (no embedding mask, head input or logits)
  states_bytes      parameter + gradient + optimizer memory (Figure 1); the transcribed values
                    equal 18 bytes x the transformer-layer parameters of one stage (22B: 48 x
                    12h^2 / 8 x 18 B = 45.56 GiB), so they are compared with a stage that holds
                    only transformer layers (a middle stage; stage 0 when pp <= 2)
Rows whose kind is 'measured_capacity' or 'analytical' are not here: the ZeRO and DeepSpeed
formula rows are unit tests of the memory model (tests/test_costmodel.c).
"""
import json, sys

GIB = 1024 ** 3
src = json.load(open(sys.argv[1]))
rows = []

def model_of(m):
    return {"name": m["name"], "layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"],
            "vocab": m["vocab"], "seq_len": m["seq_len"], "activation": "gelu", "norm": "layernorm",
            "bias": True, "tied_embeddings": True}

def recompute_of(p):
    r = (p.get("recompute") or "none").split()[0]
    return {"full": "full", "selective": "selective"}.get(r, "none")

def plan_of(r):
    p = r["plan"]
    prec = (p.get("precision") or "fp16").split()[0]
    return {"tp": p["tp"], "pp": p["pp"], "dp": p["dp"], "cp": 1, "vp": p.get("vp") or 1,
            "mbs": p["micro_batch"], "gbs": p["global_batch"], "recompute": recompute_of(p),
            "sp": bool(p.get("seq_parallel")), "zero": p.get("zero_stage") or 0,
            "dtype": "bf16" if prec.startswith("bf16") else "fp16",
            "overlap": p.get("ddp_impl") == "torch",
            # Megatron-LM of 2021-22 sent pipeline activations blocking (its
            # --overlap-p2p-communication came later)
            "p2p_overlap": False,
            # Megatron-LM in 2021-22 computed attention with its fused (masked) softmax kernel;
            # FlashAttention (Dao et al., May 2022) came later: the s x s scores are materialised
            "flash_attn": False}

def source_id(r):
    s = r["source"]
    if s.startswith("Narayanan"): return "narayanan2021-table1"
    if "Figure 1" in s: return "korthikanti2022-fig1"
    if "Table 4" in s: return "korthikanti2022-table4"
    if r["hardware"]["gpus"] == 2240: return "korthikanti2022-530b-dp"
    return "korthikanti2022-table5"

for r in src:
    if r["kind"] not in ("measured", "measured_per_layer", "measured_from_figure"):
        continue
    sid = source_id(r)
    base = {"source": sid, "cite": r["source"], "model": model_of(r["model"]), "plan": plan_of(r),
            "gpu": "a100-sxm4-80g", "gpus": r["hardware"]["gpus"], "gpus_per_node": 8,
            "network_bw": "200Gb/s"}
    if sid == "narayanan2021-table1":
        # the SC21 runs predate Megatron-LM's asynchronous TP all-reduce in the backward
        # (NVIDIA/Megatron-LM 3f65246, 2021-09-02, on by default since; the paper's scripts
        # were committed 2021-08-10, de7dc40): their backward TP all-reduces ran exposed
        base["plan"] = dict(base["plan"], tp_bwd_overlap=False)
    me = r["measured"]
    out = []
    if sid == "narayanan2021-table1":
        out.append(("step_s", r["derived"]["flops_per_iter_eq3"] / (me["tflops_per_gpu"] * 1e12 * r["hardware"]["gpus"]),
                    "time from the reported %g TFLOP/s/GPU and the paper's Eq. 3 FLOPs" % me["tflops_per_gpu"]))
    elif sid in ("korthikanti2022-table5", "korthikanti2022-530b-dp"):
        if me.get("iter_time_s"):
            out.append(("step_s", me["iter_time_s"], "reported iteration time"))
        elif me.get("mfu"):
            m = r["model"]; B = r["plan"]["global_batch"]; s = m["seq_len"]; l = m["layers"]; h = m["hidden"]; V = m["vocab"]
            flops = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
            out.append(("step_s", flops / (me["mfu"] * 312e12 * r["hardware"]["gpus"]),
                        "time from the reported MFU %g (model FLOPs 72Bslh^2(1+s/6h+V/12lh))" % me["mfu"]))
    elif sid == "korthikanti2022-table4":
        out.append(("layer_fwd_s", me["layer_forward_ms"] / 1000.0, "reported forward time of one layer"))
        out.append(("layer_bwd_s", me["layer_backward_ms"] / 1000.0, "reported backward time of one layer"))
    elif sid == "korthikanti2022-fig1":
        out.append(("activations_bytes", me["memory_activations_gib"] * GIB, "activations per GPU, first stage"))
        out.append(("states_bytes", me["memory_params_grads_optimizer_gib"] * GIB, "parameters+gradients+optimizer per GPU"))
    for metric, value, how in out:
        row = dict(base)
        row["metric"] = metric
        row["measured"] = value
        row["how"] = how
        rows.append(row)

# Largest-model rows (ZeRO Table 2, Colossal-AI's single-GPU chart): they state neither batch,
# sequence nor host memory, so they are shown beside autoplan's model-state bound, not scored.
GPUS = {"V100-32GB (DGX-2)": "v100-sxm2-32g", "V100 32GB": "v100-sxm2-32g",
        "RTX 2060 6GB": "rtx-2060", "RTX 3090 24GB": "rtx-3090"}
shown = []
for r in src:
    if r["kind"] != "measured_capacity":
        continue
    g = GPUS.get(r["hardware"]["gpu"])
    if not g:
        continue  # a GPU outside the catalog (RTX 2080 Ti, RTX 3080)
    p = r["plan"]
    z = p.get("zero_stage")
    fw = p.get("framework") or "Megatron + ZeRO (DeepSpeed)"
    if isinstance(z, int):
        mode, zero = "states", z
    elif "Offload" in str(z) and "NVMe" not in fw:
        mode, zero = "optimizer-offload", 1
    else:
        mode, zero = "unbounded", 3   # Gemini / NVMe: bounded by host memory, not stated
    shown.append({"source": "zero2020-table2" if r["source"].startswith("Rajbhandari") else "colossalai-single-gpu",
                  "cite": r["source"], "gpu": g, "gpus": r["hardware"]["gpus"], "tp": p["tp"] or 1,
                  "dp": p["dp"] or 1, "zero": zero, "mode": mode, "framework": fw,
                  "measured_params": r["measured"]["max_trainable_params_b"] * 1e9,
                  "note": r["note"]})

# Cross-check (shown with its error, not scored): NVIDIA's published H100 pretraining runs, FP8,
# NeMo 24.09 performance summary (docs.nvidia.com/nemo-framework/user-guide/24.09/performance/
# performance_summary.html, DGX-H100: 8 x H100 SXM, NVLink 4, 8 x 400 Gb/s per node). Megatron
# core with Transformer Engine, distributed optimizer, sequence parallelism and TP/DP overlap as
# in NeMo's performance recipes. step_s = GBS x sequence / (tokens/s/GPU x GPUs). Only the
# H100 GEMM efficiency is fitted on them (`autoplan validate --fit`).
import os
here = os.path.dirname(os.path.abspath(__file__))
def hf(name):
    return json.load(open(os.path.join(here, "..", "examples", "models", name + ".json")))
sys.path.insert(0, here)
import oos_sources
NEMO = "NVIDIA NeMo 24.09 performance summary, pre-training at FP8, DGX-H100"
cross = []
for (name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tok) in [
        ("llama-2-7b", 8, 128, 1, 4096, 1, 1, 1, 1, 16934),
        ("llama-2-70b", 64, 128, 1, 4096, 4, 4, 1, 20, 1728),
        ("llama-3-8b", 8, 128, 1, 8192, 1, 1, 2, 1, 12273),
        ("llama-3-70b", 64, 128, 1, 8192, 4, 4, 2, 5, 1524),
        ("gpt3-175b", 128, 256, 1, 2048, 4, 8, 1, 6, 716),
        ("gpt3-175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 825)]:
    m = hf(name)
    dp = gpus // (tp * pp * cp)
    cross.append({"source": "nemo2409-h100-fp8", "cite": NEMO + ": %s, %d GPUs, %d tokens/s/GPU" % (name, gpus, tok),
                  "model_name": name,
                  "model": m, "plan": {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp, "mbs": mbs,
                                       "seq": seq,
                                       "gbs": gbs, "recompute": "none", "sp": tp > 1, "zero": 1,
                                       "dtype": "fp8", "overlap": True, "flash_attn": True},
                  "gpu": "h100-sxm", "gpus": gpus, "gpus_per_node": 8, "network_bw": "400Gb/s",
                  "metric": "step_s", "measured": gbs * seq / (tok * gpus),
                  "how": "GBS x sequence / (reported tokens/s/GPU x GPUs)"})

# Cross-check on Blackwell (shown with its error, not scored): NVIDIA's published DGX-B200
# pretraining runs of the dense Llama models at FP8 current scaling, Megatron-Bridge's
# performance summaries (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md
# @0a25f91, "25.11 NeMo Container" and "25.09 NeMo Container", System: DGX-B200). The 25.11
# table names the precision FP8-CS (its parenthesised figures FP8-MX); the 25.09 table has no
# precision column and gives its parenthesised figures for the same 32 x 32 (MX) granularity,
# so its plain figures are read as FP8-CS too. The settings are those of the same repository's
# H100 rows (tools/oos_sources.py mbridge_rows: distributed optimizer, bf16 gradient reduction,
# FP8 weights, TP overlap, cuDNN attention, no recomputation, 405B's split counting the
# embedding and the loss as a layer each); DGX-B200 nodes of 8 with 8 x 400 Gb/s. Only the
# Blackwell GEMM efficiency is fitted on them (`autoplan validate --fit`, costmodel/calib.c).
MBRIDGE_B200 = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @0a25f91, "
                "NeMo %s container, DGX-B200 pre-training: %s, %d GPUs, FP8-CS, GBS %d MBS %d, "
                "sequence %d, TP %d PP %d CP %d VP %d, %d tokens/s per GPU")
for (ver, name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tok) in [
        ("25.11", "LLAMA3_8B", 8, 128, 2, 8192, 1, 1, 1, 1, 30624),
        ("25.11", "LLAMA3.1_405B", 128, 64, 1, 8192, 4, 8, 2, 8, 661),
        ("25.09", "LLAMA3_8B", 8, 128, 2, 8192, 1, 1, 1, 1, 29994),
        ("25.09", "LLAMA3.1_405B", 128, 64, 1, 8192, 4, 8, 2, 8, 664)]:
    m = oos_sources.mbridge_model(name, hf)
    dp = gpus // (tp * pp * cp)
    plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp, "mbs": mbs,
            "gbs": gbs, "seq": seq, "recompute": "none", "sp": tp > 1, "zero": 1, "dtype": "fp8",
            "overlap": True, "overlap_tp": tp > 1, "flash_attn": True, "attn_impl": "cudnn",
            "grad_reduce": "bf16", "fp8_recipe": "tensorwise", "fp8_params": True}
    if name == "LLAMA3.1_405B":
        plan["stage_layers"] = [1] + [2] * 62 + [1]
    cross.append({"source": "mbridge-b200-fp8",
                  "cite": MBRIDGE_B200 % (ver, name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tok),
                  "model_name": name.lower(), "model": m, "plan": plan, "gpu": "b200",
                  "gpus": gpus, "gpus_per_node": 8, "network_bw": "400Gb/s", "metric": "step_s",
                  "measured": gbs * seq / (tok * gpus),
                  "how": "GBS x sequence / (reported tokens/s per GPU x GPUs)"})

# Out of sample (shown with its error, never used in any fit): the published runs of
# tools/oos_sources.py (other trainers, models and GPUs than the scored rows), and
#  - NVIDIA NeMo AutoModel performance summary (DGX-H100, BF16): Llama-3-70B, FSDP2 over 64
#    GPUs, cp 2, sequence 8192, 18.90 s per step (activation checkpointing: the only way it fits).
oos = oos_sources.all_rows(hf)
oos.append({"source": "nemo-automodel-h100", "cite": "NVIDIA NeMo AutoModel performance summary, DGX-H100, BF16: Llama3 70B, 64 GPUs, FSDP 32, CP 2, 18.90 s per global step",
            "model_name": "llama-3-70b", "model": hf("llama-3-70b"),
            # "Kernel Optimizations: TE + fsdp2_prefetch": Transformer Engine attention, i.e.
            # cuDNN fused attention on H100
            "plan": {"trainer": "torchtitan", "tp": 1, "pp": 1, "dp": 32, "cp": 2, "vp": 1, "mbs": 1,
                     "gbs": 128, "seq": 8192, "recompute": "full", "sp": False, "zero": 3,
                     "dtype": "bf16", "overlap": True, "flash_attn": True, "attn_impl": "cudnn",
                     # TE's DotProductAttention runs the cp ring itself (AutoModel's
                     # attach_te_context_parallel), not PyTorch's context_parallel
                     "te_attention": True},
            "gpu": "h100-sxm", "gpus": 64, "gpus_per_node": 8, "network_bw": "400Gb/s",
            "metric": "step_s", "measured": 18.90, "how": "reported time per global step"})

json.dump({"version": 1, "generated_from": "shared/reference/published-public.json",
           "rows": rows, "shown": shown, "crosscheck": cross, "outofsample": oos}, sys.stdout,
          indent=1)
print()
