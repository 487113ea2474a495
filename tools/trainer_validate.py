#!/usr/bin/env python3
# trainer_validate.py - run the configs autoplan emits for a matrix of plans through each
# trainer's own validation code, on a CPU (results: docs/trainer-validation.md). CI does not run
# this script: the trainers need PyTorch and several GB of packages.
#
# Usage:
#   python3 tools/trainer_validate.py AUTOPLAN OUTDIR [--python PY] [--megatron-python PY]
#       [--megatron-lm DIR] [--colossalai-python PY] [--jobs N] [--only SUBSTRING] [--log FILE]
#
# --python runs DeepSpeed, Accelerate and torchtitan; --megatron-python (default --python) runs
# Megatron-LM from the checkout --megatron-lm (core 0.19 needs Python >= 3.12);
# --colossalai-python runs Colossal-AI (0.5.x pins torch <= 2.5.1, so it has its own venv).
#
# Structure: the driver plans each case of MATRIX with `autoplan plan ... --emit TARGETS --out
# DIR` and hands every emitted file to a worker, a fresh process of this script (`--worker KIND
# FILE PLAN_JSON ...`) in the trainer's interpreter, which prints one RESULT line. Workers start
# a fake process group (torch.testing._internal.distributed.fake_pg: rank 0 of the plan's world
# size, collectives are no-ops) so that the trainers' own mesh and group construction runs:
#
#   megatron.sh      Megatron-LM: the script's PLAN_ARGS/DATA_ARGS/TRAIN_ARGS (expanded by bash)
#                    through megatron.training.arguments.parse_args + validate_args and
#                    core_transformer_config_from_args (TransformerConfig.__post_init__); then the
#                    same architecture flags with every parallel degree 1 build the GPTModel on
#                    the meta device (gpt_builders.gpt_builder, local spec) and its parameter count
#                    is compared with the model's (plus Megatron's vocabulary padding).
#   ds_config.json   deepspeed.runtime.config.DeepSpeedConfig with an mpu whose data-parallel size
#                    is the plan's dp (Megatron-DeepSpeed builds its topology that way).
#   ds_config_hf.json, accelerate_ds_config.json
#                    DeepSpeedConfig without an mpu over all ranks (HF Trainer / Accelerate).
#   accelerate.yaml  accelerate launch's own path: launch_command_parser, _validate_launch_command,
#                    prepare_deepspeed_cmd_env / prepare_multi_gpu_env, then in that environment
#                    the plugin the Accelerator would build (DeepSpeedPlugin, or
#                    FullyShardedDataParallelPlugin and ParallelismConfig, checked against the
#                    launch's process count by ParallelismConfig._validate_accelerator).
#   torchtitan.toml  torchtitan's ConfigManager.parse_args (rejects unknown keys), ParallelDims and
#                    its device mesh, the model flavour built on the meta device (parameter count
#                    compared), the Trainer's batch rule (global batch a multiple of local batch x
#                    the "batch" mesh size, train.py), then the model's own parallelize_fn or,
#                    with pp, pipelining_fn (TP, async TP, activation checkpointing, compile,
#                    FSDP, CP, EP and the pipeline schedule are applied to the meta model).
#   colossalai_booster.py  the snippet executed: the plugin's constructor and Booster(plugin).
#   *.sh             bash -n.
#
# What stands in for the GPU, stated so the results are read right: DeepSpeed asks its
# accelerator whether fp16/bf16 run (answered for the plan's GPU: bf16 from compute capability
# 8.0). Megatron-LM asks the device
# for its compute capability (answered with the plan's GPU: A100 8.0, H100 9.0, ...) and for
# Transformer Engine (answered as TE 2.9 being installed, which every core 0.19 GPU image has;
# its fused RoPE is a placeholder); buffers Megatron places on the current CUDA device go to the
# meta device. torchtitan's device type is set to "cpu" for the mesh. Nothing runs a step: what
# needs kernels (TE layers, NCCL, CUDA graphs, DeepSpeed's engine) is not exercised, and
# Megatron-DeepSpeed's flags (deepspeed_launch.sh) are only syntax-checked: it does not install
# from PyPI. A trainer that is not importable is reported as "not run", never as a pass.
import argparse, ast, json, os, re, subprocess, sys, tempfile, threading, traceback
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- the plan matrix ------------------------------------------------------------------------
# (case, model file, GPUs, trainer, extra `autoplan plan` flags, torchtitan (name, flavour))
# Default plans (the search's best) plus pinned plans for the features each trainer expresses:
# interleaved pipelines, uneven splits, ZeRO-3, CPU offload, context, expert and sequence
# parallelism, async TP, fp16, the new model families.
E = "examples/models/"
H = "tests/data/hf/"
MATRIX = [
    # Megatron-LM
    ("meg-llama2-7b", E + "llama-2-7b.json", 8, "megatron", "", None),
    ("meg-llama3-70b", E + "llama-3-70b.json", 64, "megatron", "", None),
    ("meg-llama3-70b-pp4-vp5", E + "llama-3-70b.json", 64, "megatron",
     "--tp 8 --pp 4 --vp 5 --sp --overlap", None),
    ("meg-llama3-70b-128", E + "llama-3-70b.json", 128, "megatron", "", None),  # uneven split
    ("meg-llama3-8b-cp2", E + "llama-3-8b.json", 8, "megatron", "--tp 2 --cp 2 --seq 16384", None),
    ("meg-llama3-8b-offload", E + "llama-3-8b.json", 8, "megatron",
     "--zero 1 --offload-optimizer 0.5", None),
    ("meg-llama3.1-405b", E + "llama-3.1-405b.json", 256, "megatron", "", None),
    ("meg-mixtral-ep", E + "mixtral-8x7b.json", 16, "megatron", "--ep 4 --tp 2 --sp", None),
    ("meg-dsv3", E + "deepseek-v3.json", 256, "megatron", "", None),
    ("meg-qwen3-8b", E + "qwen3-8b.json", 8, "megatron", "", None),
    ("meg-qwen3-30b-a3b", H + "qwen3-30b-a3b.json", 16, "megatron", "--ep 8", None),
    ("meg-dsv2-lite", H + "deepseek-v2-lite.json", 8, "megatron", "", None),
    ("meg-deepseek-moe-16b", H + "deepseek-moe-16b-base.json", 8, "megatron", "", None),
    ("meg-starcoder2-7b", H + "starcoder2-7b.json", 8, "megatron", "", None),
    ("meg-chatglm3-6b", H + "chatglm3-6b.json", 8, "megatron", "", None),
    ("meg-minicpm-moe", H + "minicpm-moe-8x2b.json", 8, "megatron", "", None),
    ("meg-stablelm2", H + "stablelm-2-1_6b.json", 8, "megatron", "", None),
    ("meg-gpt-oss-20b", E + "gpt-oss-20b.json", 8, "megatron", "", None),
    ("meg-gemma3-1b", H + "gemma-3-1b-pt.json", 8, "megatron", "", None),
    ("meg-llama2-7b-v100-fp16", E + "llama-2-7b.json", 16, "megatron",
     "--gpu v100-sxm2-32g --dtype fp16", None),
    # DeepSpeed (Megatron-DeepSpeed and HF flavours; Accelerate's DeepSpeed path)
    ("ds-llama2-7b", E + "llama-2-7b.json", 8, "deepspeed", "", None),
    ("ds-llama3-8b-z3-offload", E + "llama-3-8b.json", 8, "deepspeed",
     "--zero 3 --offload-optimizer 1 --offload-params 1", None),
    ("ds-llama3-8b-z2-offload", E + "llama-3-8b.json", 8, "deepspeed",
     "--zero 2 --offload-optimizer 1", None),
    ("ds-llama3-70b", E + "llama-3-70b.json", 64, "deepspeed", "", None),
    ("ds-llama2-7b-tp2-pp2-fp16", E + "llama-2-7b.json", 8, "deepspeed",
     "--tp 2 --pp 2 --dtype fp16", None),
    ("ds-mixtral-ep", E + "mixtral-8x7b.json", 16, "deepspeed", "--ep 4", None),
    ("ds-qwen3-8b", E + "qwen3-8b.json", 8, "deepspeed", "", None),
    # torchtitan
    ("tt-llama3-8b", E + "llama-3-8b.json", 8, "torchtitan", "", ("llama3", "8B")),
    ("tt-llama3-8b-asynctp", E + "llama-3-8b.json", 8, "torchtitan", "--tp 2 --sp --overlap",
     ("llama3", "8B")),
    ("tt-llama3-8b-cp2-z3-offload", E + "llama-3-8b.json", 8, "torchtitan",
     "--cp 2 --zero 3 --offload-optimizer 1 --offload-params 1 --seq 16384", ("llama3", "8B")),
    ("tt-llama3-70b", E + "llama-3-70b.json", 64, "torchtitan", "", ("llama3", "70B")),
    ("tt-llama3-70b-pp4-vp2", E + "llama-3-70b.json", 64, "torchtitan", "--tp 8 --pp 4 --vp 2",
     ("llama3", "70B")),
    ("tt-llama3-70b-pp4-full", E + "llama-3-70b.json", 32, "torchtitan",
     "--tp 4 --pp 4 --recompute full", ("llama3", "70B")),
    ("tt-llama3-8b-fp8", E + "llama-3-8b.json", 8, "torchtitan", "--gpu h100-sxm --dtype fp8",
     ("llama3", "8B")),
    ("tt-qwen3-8b", E + "qwen3-8b.json", 8, "torchtitan", "", ("qwen3", "8B")),
    ("tt-qwen3-30b-a3b-ep", H + "qwen3-30b-a3b.json", 16, "torchtitan", "--ep 8",
     ("qwen3", "30B-A3B")),
    ("tt-dsv3", E + "deepseek-v3.json", 256, "torchtitan", "", ("deepseek_v3", "671B")),
    ("tt-gpt-oss-20b", E + "gpt-oss-20b.json", 8, "torchtitan", "", ("gpt_oss", "20b")),
    ("tt-gpt-oss-20b-cp", E + "gpt-oss-20b.json", 8, "torchtitan", "--cp 2 --seq 16384",
     ("gpt_oss", "20b")),  # autoplan must refuse: no CP for gpt-oss
    ("tt-llama4-scout", H + "llama-4-scout-17b-16e.json", 16, "torchtitan", "",
     ("llama4", "17bx16e_irope")),  # chunked attention + NoPE layers: the irope flavour
    # Colossal-AI
    ("col-llama2-7b", E + "llama-2-7b.json", 8, "colossalai", "", None),
    ("col-llama3-8b-gemini-offload", E + "llama-3-8b.json", 8, "colossalai",
     "--zero 3 --offload-optimizer 1 --offload-params 0.5", None),
    ("col-llama3-8b-lowlevel-z2", E + "llama-3-8b.json", 8, "colossalai", "--zero 2 --tp 1 --pp 1",
     None),
    ("col-llama3-70b-tp-pp", E + "llama-3-70b.json", 64, "colossalai",
     "--tp 8 --pp 4 --recompute full", None),
    ("col-llama2-7b-pp-vp", E + "llama-2-7b.json", 8, "colossalai", "--tp 2 --pp 2 --vp 2", None),
    ("col-mixtral-ep", E + "mixtral-8x7b.json", 32, "colossalai", "--ep 4", None),
    ("col-llama3-70b-pp4-vp2", E + "llama-3-70b.json", 64, "colossalai",
     "--tp 8 --pp 4 --vp 2 --recompute full", None),
    ("col-qwen3-8b", E + "qwen3-8b.json", 8, "colossalai", "", None),
    # FSDP through Accelerate
    ("fsdp-llama2-7b", E + "llama-2-7b.json", 8, "fsdp", "", None),
    ("fsdp-llama3-8b-z3-offload", E + "llama-3-8b.json", 8, "fsdp",
     "--zero 3 --offload-optimizer 1 --offload-params 1", None),
    ("fsdp-llama3-8b-z2", E + "llama-3-8b.json", 8, "fsdp", "--zero 2", None),
    ("fsdp-llama3-70b", E + "llama-3-70b.json", 64, "fsdp", "", None),
    ("fsdp-qwen3-8b", E + "qwen3-8b.json", 16, "fsdp", "", None),
]
# the targets each trainer's plan is emitted for
TARGETS = {"megatron": "megatron", "deepspeed": "deepspeed,accelerate", "torchtitan": "torchtitan",
           "colossalai": "colossalai", "fsdp": "accelerate"}

# compute capability of the catalog's GPUs (NVIDIA CUDA GPUs list), for Megatron's device checks
CAPABILITY = [("v100", (7, 0)), ("t4", (7, 5)), ("a100", (8, 0)), ("a10", (8, 6)),
              ("l40", (8, 9)), ("h100", (9, 0)), ("h200", (9, 0)), ("gh200", (9, 0)),
              ("b200", (10, 0)), ("gb200", (10, 0))]


def capability(gpu):
    best = (8, 0)
    for prefix, cap in CAPABILITY:
        if gpu.startswith(prefix):
            best = cap
    return best


# ---- workers (run in the trainer's interpreter) ------------------------------------------------

def result(kind, text):
    print("RESULT %s %s" % (kind, " ".join(str(text).split())[:400]), flush=True)


def fake_world(world):
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)


def script_args(path):
    """The PLAN_ARGS, DATA_ARGS and TRAIN_ARGS of a launch script, expanded by bash."""
    prog = ('TRAIN_ITERS=10; set -e; eval "$(sed -n "/^PLAN_ARGS=(/,/^)/p;/^DATA_ARGS=(/,/^)/p;'
            '/^TRAIN_ARGS=(/,/^)/p" "$1")"; printf "%s\\0" "${PLAN_ARGS[@]}" "${DATA_ARGS[@]}" '
            '"${TRAIN_ARGS[@]}"')
    out = subprocess.run(["bash", "-c", prog, "x", path], capture_output=True, text=True,
                         check=True).stdout
    return out.split("\0")[:-1]


def megatron_stubs(cap):
    """Answer Megatron's questions to the device and to Transformer Engine (see the header)."""
    import torch
    from packaging.version import Version
    torch.cuda.get_device_capability = lambda *a, **k: cap
    te = Version("2.9.0")

    def te_min(v, check_equality=True):
        return te >= Version(v) if check_equality else te > Version(v)
    import megatron.core.utils as mcu
    mcu.is_te_min_version = te_min
    import megatron.core.transformer.transformer_config as tc
    tc.is_te_min_version = te_min
    import megatron.core.models.common.embeddings.rope_utils as ru
    if ru.fused_apply_rotary_pos_emb is None:
        ru.fused_apply_rotary_pos_emb = lambda *a, **k: None
    import megatron.training.arguments as ma
    ma.is_te_min_version = te_min
    ma.get_device_arch_version = lambda: cap[0]


def worker_megatron(path, plan, expect_params):
    cap = capability(plan["cluster"]["gpu"])
    world = plan["cluster"]["gpus"]
    argv = script_args(path)
    env = open(path).read()
    if "export CUDA_DEVICE_MAX_CONNECTIONS=1" in env:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    os.environ.update(WORLD_SIZE=str(world), RANK="0", LOCAL_RANK="0")
    try:
        megatron_stubs(cap)
        from megatron.training.arguments import parse_args, validate_args
        from megatron.training.argument_utils import core_transformer_config_from_args
    except Exception as e:
        return result("NOT-RUN", "megatron not importable: %s" % e)
    sys.argv = ["pretrain_gpt.py"] + argv
    try:
        args = parse_args()
        validate_args(args)
        core_transformer_config_from_args(args)
    except BaseException as e:
        return result("REJECTED", "%s: %s" % (type(e).__name__, e))
    # the model those flags describe, on one rank, counted
    single = {"--sequence-parallel", "--tp-comm-overlap", "--overlap-grad-reduce",
              "--overlap-param-gather", "--use-distributed-optimizer", "--optimizer-cpu-offload",
              "--use-precision-aware-optimizer", "--overlap-cpu-optimizer-d2h-h2d"}
    valued = {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
              "--context-parallel-size", "--expert-model-parallel-size",
              "--expert-tensor-parallel-size", "--num-layers-per-virtual-pipeline-stage",
              "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
              "--pipeline-model-parallel-layout", "--optimizer-offload-fraction"}
    a, i = [], 0
    while i < len(argv):
        if argv[i] in single:
            i += 1
        elif argv[i] in valued:
            i += 2
        else:
            a.append(argv[i])
            i += 1
    os.environ["WORLD_SIZE"] = "1"
    sys.argv = (["pretrain_gpt.py"] + a +
                ["--use-cpu-initialization", "--transformer-impl", "local", "--no-rope-fusion",
                 "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
                 "--no-bias-swiglu-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm"])
    note = ""
    try:
        import torch
        import torch.distributed as dist
        args = parse_args()
        validate_args(args)
        if dist.is_initialized():
            dist.destroy_process_group()
        store = dist.FileStore(tempfile.mkstemp()[1], 1)  # a real one-rank group (gloo)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        from megatron.core import parallel_state as ps
        ps.initialize_model_parallel(1, 1)
        from megatron.training.global_vars import set_args
        set_args(args)
        from megatron.core.tokenizers.utils.build_tokenizer import build_tokenizer
        build_tokenizer(args)
        sys.path.insert(0, os.environ.get("MEGATRON_LM", ""))
        from gpt_builders import gpt_builder
        torch.cuda.current_device = lambda: "meta"
        torch.cuda.Stream = lambda *a, **k: None
        with torch.device("meta"):
            model = gpt_builder(args, True, True)
        n = sum(p.numel() for p in model.parameters())
        pad = (args.padded_vocab_size - plan["model"]["vocab"]) * plan["model"]["hidden"] * (
            1 if plan["model"]["tied_embeddings"] else 2)
        if expect_params and n - pad != expect_params:
            return result("REJECTED", "Megatron builds %d parameters (%d of vocabulary padding), "
                          "the model has %d" % (n, pad, expect_params))
        note = "; Megatron builds %d parameters%s = the model's" % (
            n, " (%d vocabulary padding)" % pad if pad else "")
    except BaseException as e:
        note = "; parameter count not built (%s: %s)" % (type(e).__name__, str(e)[:160])
    result("PASS", "parse_args, validate_args, TransformerConfig" + note)


def worker_deepspeed(path, plan, flavour):
    world = plan["cluster"]["gpus"]
    try:
        fake_world(world)
        import deepspeed.comm as dcomm
        dcomm.init_distributed(dist_backend="fake", auto_mpi_discovery=False)
        # the precision checks ask the accelerator, a CPU here: answer for the plan's GPU
        # (fp16 everywhere, bf16 from compute capability 8.0)
        from deepspeed.accelerator import get_accelerator
        acc, cap = get_accelerator(), capability(plan["cluster"]["gpu"])
        acc.is_fp16_supported = lambda: True
        acc.is_bf16_supported = lambda: cap >= (8, 0)
        from deepspeed.runtime.config import DeepSpeedConfig
    except Exception as e:
        return result("NOT-RUN", "deepspeed not importable: %s" % e)
    dp = plan["plan"]["dp"]

    class MPU:  # Megatron-DeepSpeed's mpu: DeepSpeed's data-parallel world is dp
        def get_data_parallel_world_size(self):
            return dp

        def get_data_parallel_rank(self):
            return 0

        def get_model_parallel_world_size(self):
            return world // dp

        def get_model_parallel_rank(self):
            return 0
    try:
        c = DeepSpeedConfig(json.load(open(path)), mpu=MPU() if flavour == "mds" else None)
    except BaseException as e:
        return result("REJECTED", "%s: %s" % (type(e).__name__, e))
    result("PASS", "DeepSpeedConfig: world %d, batch %d = %d x %d x %d, ZeRO %d" % (
        c.world_size, c.train_batch_size, c.train_micro_batch_size_per_gpu,
        c.gradient_accumulation_steps, c.world_size, c.zero_optimization_stage))


def worker_accelerate(path, plan):
    world = plan["cluster"]["gpus"]
    try:
        from accelerate.commands.launch import launch_command_parser, _validate_launch_command
        from accelerate.utils.launch import prepare_multi_gpu_env, prepare_deepspeed_cmd_env
        from accelerate.utils import patch_environment
    except Exception as e:
        return result("NOT-RUN", "accelerate not importable: %s" % e)
    try:
        args = launch_command_parser().parse_args(["--config_file", path, "train.py"])
        args, defaults, mp = _validate_launch_command(args)
        os.chdir(os.path.dirname(os.path.abspath(path)))
        if args.use_deepspeed:
            # as launch_command() does before deepspeed_launcher()
            f = list(defaults.deepspeed_config.keys()) if defaults else []
            if mp:
                f.append("mixed_precision")
            args.deepspeed_fields_from_accelerate_config = ",".join(f)
            _, env = prepare_deepspeed_cmd_env(args)
        else:
            env = prepare_multi_gpu_env(args)
        with patch_environment(**env):
            from accelerate.utils import FullyShardedDataParallelPlugin, DeepSpeedPlugin
            from accelerate.parallelism_config import ParallelismConfig
            from accelerate.utils import DistributedType
            what = ""
            if args.use_deepspeed:
                p = DeepSpeedPlugin()
                what = "DeepSpeedPlugin ZeRO %s" % p.zero_stage
            elif args.use_fsdp:
                p = FullyShardedDataParallelPlugin()
                what = "FSDP%s plugin, reshard_after_forward %s" % (p.fsdp_version,
                                                                   p.reshard_after_forward)
                if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG", "false") == "true":
                    pc = ParallelismConfig()

                    class Launched:  # what the Accelerator of this launch reports
                        multi_device = world > 1
                        num_processes = args.num_processes * 1
                        is_fsdp2 = p.fsdp_version == 2
                        distributed_type = DistributedType.FSDP
                    pc._validate_accelerator(Launched())
                    what += ", ParallelismConfig %d ranks" % pc.total_size
            else:
                what = "DDP (%s processes)" % args.num_processes
        if args.num_processes != world:
            return result("REJECTED", "num_processes %s, the plan has %d GPUs" %
                          (args.num_processes, world))
    except BaseException as e:
        return result("REJECTED", "%s: %s" % (type(e).__name__, e))
    result("PASS", "accelerate launch validation; " + what)


def worker_torchtitan(path, plan, name, flavour, expect_params):
    world = plan["cluster"]["gpus"]
    try:
        import torch
        fake_world(world)
        import torchtitan.distributed.parallel_dims as pdm
        pdm.device_type = "cpu"
        from torchtitan.config.manager import ConfigManager
        from torchtitan.distributed import ParallelDims
        from torchtitan.protocols import train_spec as ts
    except Exception as e:
        return result("NOT-RUN", "torchtitan not importable: %s" % e)
    # the job file's header names the model family to run (ap_torchtitan_family)
    with open(path) as f:
        named = re.search(r"--model\.name (\S+)", f.read())
    if not named or named.group(1) != name:
        return result("MISMATCH", "the file names model family %s, the case runs %s" % (
            named.group(1) if named else "none", name))
    try:
        cfg = ConfigManager().parse_args(["--job.config_file", path, "--model.name", name,
                                          "--model.flavor", flavour])
        p = cfg.parallelism
        pd = ParallelDims(dp_shard=p.data_parallel_shard_degree,
                          dp_replicate=p.data_parallel_replicate_degree,
                          cp=p.context_parallel_degree, tp=p.tensor_parallel_degree,
                          pp=p.pipeline_parallel_degree, ep=p.expert_parallel_degree,
                          etp=p.expert_tensor_parallel_degree, world_size=world)
        spec = ts.get_train_spec(cfg.model.name)
        ma = spec.model_args[cfg.model.flavor]
        ma.update_from_config(cfg)
        with torch.device("meta"):
            model = spec.model_cls(ma)
        n = sum(x.numel() for x in model.parameters())
        # the router's expert bias: torchtitan keeps one as a buffer in every MoE flavour
        # (updated by the load-balancing rule, not by gradients); the Hugging Face checkpoint
        # has it as a parameter only where the model routes with it (DeepSeek-V3
        # e_score_correction_bias), so it is counted when that makes the model's count
        nb = sum(b.numel() for k, b in model.named_buffers() if "expert_bias" in k)
        if not (expect_params and n == expect_params):
            n += nb
        else:
            nb = 0
        # torchtitan train.py: the global batch is a multiple of the local batch times the
        # size of the "batch" mesh
        batch = pd.get_mesh("batch").size() if pd.dp_enabled else 1
        g, l = cfg.training.global_batch_size, cfg.training.local_batch_size
        if g % (l * batch) != 0:
            return result("REJECTED", "global batch %d is not a multiple of local batch %d x "
                          "batch mesh %d" % (g, l, batch))
        loss = spec.build_loss_fn(cfg, parallel_dims=pd)
        if pd.pp_enabled:
            spec.pipelining_fn(model, pd, cfg, torch.device("cpu"), ma, spec.parallelize_fn, loss)
        else:
            spec.parallelize_fn(model, pd, cfg)
    except BaseException as e:
        return result("REJECTED", "%s: %s" % (type(e).__name__, e))
    same = "" if not expect_params else (
        ", = the model's" if n == expect_params else ", the model has %d" % expect_params)
    result("PASS" if not expect_params or n == expect_params else "MISMATCH",
           "ConfigManager, ParallelDims %s, batch rule, %s; flavour %s %s: %d parameters%s%s" % (
               "x".join(str(x) for x in (pd.dp_replicate, pd.dp_shard, pd.cp, pd.tp, pd.pp,
                                          pd.ep)),
               "pipelining_fn" if pd.pp_enabled else "parallelize_fn", name, flavour, n,
               " (%d of them expert-bias buffers)" % nb if nb else "", same))


def worker_colossalai(path, plan):
    world = plan["cluster"]["gpus"]
    os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE=str(world))
    try:
        fake_world(world)
        import colossalai  # noqa: F401
    except Exception as e:
        return result("NOT-RUN", "colossalai not importable: %s" % e)
    g = {}
    try:
        exec(compile(open(path).read(), path, "exec"), g)
    except BaseException as e:
        return result("REJECTED", "%s: %s" % (type(e).__name__, e))
    result("PASS", "%s(...) and Booster constructed" % type(g["plugin"]).__name__)


def worker_main(argv):
    kind, path, plan_path = argv[0], argv[1], argv[2]
    plan = json.load(open(plan_path))
    try:
        if kind == "megatron":
            worker_megatron(path, plan, int(argv[3]))
        elif kind in ("ds-mds", "ds-hf"):
            worker_deepspeed(path, plan, kind[3:])
        elif kind == "accelerate":
            worker_accelerate(path, plan)
        elif kind == "torchtitan":
            worker_torchtitan(path, plan, argv[3], argv[4], int(argv[5]))
        elif kind == "colossalai":
            worker_colossalai(path, plan)
    except BaseException as e:
        result("ERROR", "%s: %s | %s" % (type(e).__name__, e,
                                         traceback.format_exc().splitlines()[-3:]))


# ---- driver -----------------------------------------------------------------------------------

def model_params(exe, model):
    out = subprocess.run([exe, "info", model], capture_output=True, text=True).stdout
    m = re.search(r"^\s*total\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


def run_worker(py, args, env=None, timeout=900):
    e = dict(os.environ)
    e.update(env or {})
    try:
        r = subprocess.run([py, os.path.abspath(__file__), "--worker"] + args,
                           capture_output=True, text=True, env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "ERROR", "timed out"
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("RESULT "):
            k, _, text = line[7:].partition(" ")
            return k, text
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    return "ERROR", "exit %d: %s" % (r.returncode, tail[:300])


def check_file(opt, case, d, fn, plan_json, params):
    name, model, gpus, trainer, flags, tt = case
    p = os.path.join(d, fn)
    if fn.endswith(".sh"):
        r = subprocess.run(["bash", "-n", p], capture_output=True, text=True)
        if r.returncode != 0:
            return "REJECTED", "bash -n: " + r.stderr.strip()[:200]
        if fn != "megatron.sh":
            return "PASS", "bash -n (Megatron-DeepSpeed flags not run: not on PyPI)"
    meg_env = {"PYTHONPATH": opt.megatron_lm, "MEGATRON_LM": opt.megatron_lm}
    if fn == "megatron.sh":
        return run_worker(opt.megatron_python, ["megatron", p, plan_json, str(params)], meg_env)
    if fn == "ds_config.json":
        return run_worker(opt.python, ["ds-mds", p, plan_json])
    if fn in ("ds_config_hf.json", "accelerate_ds_config.json"):
        return run_worker(opt.python, ["ds-hf", p, plan_json])
    if fn == "accelerate.yaml":
        return run_worker(opt.python, ["accelerate", p, plan_json])
    if fn == "torchtitan.toml":
        if not tt:
            return "NOT-RUN", "no torchtitan flavour for this model"
        return run_worker(opt.python, ["torchtitan", p, plan_json, tt[0], tt[1], str(params)])
    if fn == "colossalai_booster.py":
        ast.parse(open(p).read())
        return run_worker(opt.colossalai_python, ["colossalai", p, plan_json])
    return None


def run_case(opt, case):
    name, model, gpus, trainer, flags, tt = case
    d = os.path.join(opt.out, name)
    cmd = [opt.autoplan, "plan", model, "--gpus", str(gpus), "--trainer", trainer, "--top", "1",
           "--no-cache", "--emit", TARGETS[trainer], "--out", d] + flags.split()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=opt.src)
    plan_json = os.path.join(d, "plan.json")
    label = ""
    m = re.search(r"^\s*1\s+(.*?)\s{2,}", r.stdout, re.M)
    if os.path.exists(plan_json):
        with open(plan_json) as f:
            pj = json.load(f)
        label = pj["estimate"]["label"] if "label" in pj.get("estimate", {}) else ""
    if not label and m:
        label = m.group(1)
    if not os.path.exists(plan_json):
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
        return [(case, label, "-", "NO-PLAN", why[:200])]
    rows = []
    notes = [l for l in r.stderr.splitlines() if "not written" in l or "refus" in l]
    params = model_params(opt.autoplan, os.path.join(opt.src, model))
    for fn in sorted(os.listdir(d)):
        res = check_file(opt, case, d, fn, plan_json, params)
        if res:
            rows.append((case, label, fn, res[0], res[1]))
    for n in notes:
        rows.append((case, label, "-", "NOT-WRITTEN", n.strip()[:200]))
    if not rows:
        rows.append((case, label, "-", "NOT-WRITTEN", (r.stderr.strip() or r.stdout.strip())[-200:]))
    return rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker_main(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("autoplan")
    ap.add_argument("out")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--megatron-python")
    ap.add_argument("--megatron-lm", default="")
    ap.add_argument("--colossalai-python")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--log", default="", help="append each case's rows to this file as it ends")
    ap.add_argument("--src", default=os.path.dirname(HERE),
                    help="the source tree whose examples/ and tests/data/ the matrix names")
    opt = ap.parse_args()
    opt.autoplan = os.path.abspath(opt.autoplan)
    opt.out = os.path.abspath(opt.out)
    opt.src = os.path.abspath(opt.src)
    opt.megatron_python = opt.megatron_python or opt.python
    opt.colossalai_python = opt.colossalai_python or opt.python
    opt.megatron_lm = os.path.abspath(opt.megatron_lm) if opt.megatron_lm else ""
    cases = [c for c in MATRIX if opt.only in c[0]]
    # one trainer after another, round robin, so that a run cut short has every trainer
    by_trainer = {}
    for c in cases:
        by_trainer.setdefault(c[3], []).append(c)
    order = []
    while any(by_trainer.values()):
        for t in list(by_trainer):
            if by_trainer[t]:
                order.append(by_trainer[t].pop(0))
    lock = threading.Lock()

    def run_logged(c):
        rows = run_case(opt, c)
        if opt.log:  # each case's rows as soon as it is done
            with lock, open(opt.log, "a") as f:
                f.write("".join(row_text(r) + "\n" for r in rows))
        return c, rows

    with ThreadPoolExecutor(max_workers=opt.jobs) as pool:
        done = dict(pool.map(run_logged, order))
    print("| case | GPUs | trainer | plan | file | result | detail |")
    print("|---|--:|---|---|---|---|---|")
    bad = 0
    for c in cases:
        for row in done[c]:
            bad += row[3] in ("REJECTED", "MISMATCH", "ERROR")
            print(row_text(row))
    sys.exit(1 if bad else 0)


def row_text(row):
    case, label, fn, k, text = row
    return "| %s | %d | %s | %s | %s | %s | %s |" % (
        case[0], case[2], case[3], label, fn, k.lower(),
        " ".join(text.replace("|", "/").split()))


if __name__ == "__main__":
    main()
