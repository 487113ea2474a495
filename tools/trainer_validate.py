#!/usr/bin/env python3
# trainer_validate.py - run the configs autoplan emits for a matrix of plans through each
# trainer's own configuration validation, where the trainer installs from PyPI and validates on
# a CPU (results: docs/trainer-validation.md). CI does not run this script.
#
# Usage: python3 tools/trainer_validate.py BUILD/autoplan OUTDIR
#
# For each (model, GPU count, trainer) of the matrix it runs `autoplan plan ... --emit all --out`
# and then, per emitted file:
#   ds_config*.json   deepspeed.runtime.config.DeepSpeedConfig(dict, mpu=None) with the world
#                     size of the plan (checks batch arithmetic and the ZeRO/offload schema)
#   torchtitan.toml   tomllib + the JobConfig dataclasses of torchtitan when importable
#   accelerate.yaml   accelerate.commands.config.config_args.ClusterConfig.from_yaml_file
#   megatron.sh       megatron.core TransformerConfig built from the flags (when megatron-core
#                     is importable), which runs its __post_init__ checks
#   colossalai_booster.py  ast.parse, and plugin construction when colossalai imports on CPU
# A trainer that is not importable is reported as "not installed", never as a pass.
import ast, json, os, subprocess, sys, tomllib

MATRIX = [
    ("examples/models/llama-2-7b.json", 8),
    ("examples/models/llama-3-70b.json", 64),
    ("examples/models/mixtral-8x7b.json", 16),
    ("examples/models/deepseek-v3.json", 256),
    ("examples/models/qwen3-8b.json", 8),
    ("examples/models/gpt-oss-20b.json", 8),
]
TRAINERS = ["megatron", "deepspeed", "torchtitan", "colossalai", "fsdp"]


def try_import(name):
    try:
        return __import__(name, fromlist=["_"])
    except Exception as e:  # ImportError and any import-time failure on a CPU-only machine
        return e


def flags_of(script):
    out, inside = {}, False
    for line in open(script):
        t = line.strip()
        if t.endswith("=(") and t.startswith("PLAN_ARGS"):
            inside = True
        elif inside and t == ")":
            inside = False
        elif inside and t.startswith("--"):
            k, _, v = t.partition(" ")
            out[k] = v.strip('"') if v else True
    return out


def check_deepspeed(path, world):
    ds = try_import("deepspeed.runtime.config")
    if isinstance(ds, Exception):
        return "not installed (%s)" % ds
    cfg = json.load(open(path))
    os.environ.setdefault("WORLD_SIZE", str(world))
    try:
        ds.DeepSpeedConfig(cfg)
        return "pass"
    except Exception as e:
        return "REJECTED: %s" % e


def check_megatron(path):
    mc = try_import("megatron.core.transformer.transformer_config")
    if isinstance(mc, Exception):
        return "not installed (%s)" % mc
    f = flags_of(path)
    kw = dict(num_layers=int(f["--num-layers"]), hidden_size=int(f["--hidden-size"]),
              num_attention_heads=int(f["--num-attention-heads"]),
              ffn_hidden_size=int(f["--ffn-hidden-size"]),
              num_query_groups=int(f.get("--num-query-groups", f["--num-attention-heads"])),
              tensor_model_parallel_size=int(f["--tensor-model-parallel-size"]),
              pipeline_model_parallel_size=int(f["--pipeline-model-parallel-size"]),
              sequence_parallel="--sequence-parallel" in f,
              gated_linear_unit="--swiglu" in f, add_bias_linear="--disable-bias-linear" not in f,
              add_qkv_bias="--add-qkv-bias" in f, qk_layernorm="--qk-layernorm" in f,
              normalization=f.get("--normalization", "LayerNorm"))
    if "--num-experts" in f:
        kw.update(num_moe_experts=int(f["--num-experts"]), moe_router_topk=int(f["--moe-router-topk"]),
                  moe_ffn_hidden_size=int(f["--moe-ffn-hidden-size"]),
                  moe_router_score_function=f.get("--moe-router-score-function", "softmax"),
                  moe_router_enable_expert_bias="--moe-router-enable-expert-bias" in f,
                  expert_tensor_parallel_size=int(f["--expert-tensor-parallel-size"]),
                  expert_model_parallel_size=int(f.get("--expert-model-parallel-size", 1)))
    try:
        mc.TransformerConfig(**kw)
        return "pass"
    except Exception as e:
        return "REJECTED: %s" % e


def check_torchtitan(path):
    tomllib.load(open(path, "rb"))
    jc = try_import("torchtitan.config.job_config")
    if isinstance(jc, Exception):
        return "TOML ok; torchtitan not installed (%s)" % jc
    return "TOML ok; torchtitan importable (run its ConfigManager with --job.config_file)"


def check_accelerate(path):
    ca = try_import("accelerate.commands.config.config_args")
    if isinstance(ca, Exception):
        return "not installed (%s)" % ca
    try:
        ca.ClusterConfig.from_yaml_file(path)
        return "pass"
    except Exception as e:
        return "REJECTED: %s" % e


def check_colossalai(path):
    ast.parse(open(path).read())
    col = try_import("colossalai.booster.plugin")
    if isinstance(col, Exception):
        return "parses; colossalai not installed (%s)" % col
    return "parses; colossalai importable"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: trainer_validate.py AUTOPLAN OUTDIR")
    exe, out = sys.argv[1], sys.argv[2]
    rows = []
    for model, gpus in MATRIX:
        for tr in TRAINERS:
            d = os.path.join(out, "%s-%d-%s" % (os.path.basename(model)[:-5], gpus, tr))
            r = subprocess.run([exe, "plan", model, "--gpus", str(gpus), "--trainer", tr,
                                "--top", "1", "--no-cache", "--emit", "all", "--out", d],
                               capture_output=True, text=True)
            if not os.path.isdir(d):
                rows.append((model, gpus, tr, "-", "no plan: " + r.stderr.strip()[-120:]))
                continue
            for fn in sorted(os.listdir(d)):
                p = os.path.join(d, fn)
                if fn.startswith("ds_config") or fn == "accelerate_ds_config.json":
                    res = check_deepspeed(p, gpus)
                elif fn == "megatron.sh":
                    res = check_megatron(p)
                elif fn == "torchtitan.toml":
                    res = check_torchtitan(p)
                elif fn == "accelerate.yaml":
                    res = check_accelerate(p)
                elif fn == "colossalai_booster.py":
                    res = check_colossalai(p)
                else:
                    continue
                rows.append((model, gpus, tr, fn, res))
    for r in rows:
        print("| %s | %d | %s | %s | %s |" % (os.path.basename(r[0]), r[1], r[2], r[3], r[4]))


if __name__ == "__main__":
    main()
