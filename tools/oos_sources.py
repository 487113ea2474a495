#!/usr/bin/env python3
"""Published end-to-end training runs kept OUT of every fit: the "outofsample" rows of
tests/data/validation.json (tools/make_validation.py imports this file).

Every row is one measured run with its exact configuration as the source states it; where the
source leaves a setting unstated the row says which value it assumes (`assumed` in the citation).
Facts only: the numbers below were read off the cited tables and figures.

Sources:
  llm-foundry-fsdp       mosaicml/llm-foundry scripts/train/benchmarking/README.md @8c8dd48:
                         MPT 125M-70B under PyTorch FSDP on A100-40GB/80GB and H100, 8-512 GPUs,
                         sequences 512-65536 (all 216 rows)
  flashattn-gpt-a100     Dao-AILab/flash-attention training/README.md, "Training speed" figures
                         (assets/gpt3_training_efficiency.jpg, gpt2_training_efficiency.jpg):
                         GPT-2/GPT-3 125M-2.7B on one 8 x A100-80GB node, FlashAttention, configs
                         training/configs/experiment/{owt,pile}/*.yaml
  torchtitan-h100        pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md and
                         benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md: Llama 3.1 8B-405B,
                         FSDP / +CP / +TP / +PP, 8-512 H100; docs/performance.md @3faaa1a: 405B
                         under FSDP 16 x TP 8 on 128 of the same H100s
  torchtitan-a100        pytorch/torchtitan docs/performance.md @157a12c: Llama 3 8B/70B and
                         Llama 2 13B/70B under FSDP2 on 64 A100-80GB, per activation
                         checkpointing mode (8 rows)
  torchtitan-h200        pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md:
                         Llama 3.1 8B, FSDP + compile + Float8 on 32 and 64 H200 (2 rows)
  megatron-h100-weak     NVIDIA/Megatron-LM README.md "Weak Scaling Results" (images/
                         model_table.png): GPT 1.7B-462B on 48-6144 H100, Megatron-Core r0.8
  megatron-h100-strong   the same README, "Strong Scaling Results": the 177B GPT of the weak
                         table at a global batch of 1152 on 96 and on 4608 H100 (MFU 47% and
                         42%, the two counts and figures the text states)
  bigscience-bloom       bigscience-workshop/bigscience train/tr11-176B-ml: README.md (the
                         BLOOM-176B run), chronicles-prequel.md (topology benchmarks incl. an
                         out-of-memory record), tr11-176B-ml.slurm (configuration)
  mtnlg-530b-deepspeed   Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing
                         NLG 530B" (arXiv 2201.11990) Sec. 2.4: the 530B model under DeepSpeed's
                         pipeline engine + Megatron tensor slicing on 280, 350 and 420 DGX A100
                         (Selene), global batch 1920
  nvidia-dgxc-h100       NVIDIA/dgxc-benchmarking llama3.1/README_{8b,70b,405b}.md "Expected
                         Performance": Llama 3.1 8B, 70B and 405B (with its smaller proxy
                         configurations) under NeMo 24.09 / 24.12 (Megatron-Core) on 8-2304
                         DGX H100 GPUs, BF16 and FP8, the last training step's time; and the
                         same repository's Nemotron-4 15B and 340B and NeMo Megatron GPT-3 175B
                         recipes (v24.11.1)
  nvidia-dgxc-grok1      the same repository's grok1/README_314b.md (v24.11.1): Grok-1 314B, a
                         mixture of 8 experts, and its 2-32-layer proxies under NeMo on 8-2048
                         DGX H100, BF16 and FP8
  nemo-longseq-b200      the same page @a2c4cc8 (2025-05-08): Llama 3 8B in FP8 on DGX-B200
                         under NeMo 25.04, sequences 8K-1M, CP 1-16, 2-256 GPUs (8 rows)
  nemo-perf-h100         NVIDIA/NeMo docs/source/performance/performance_summary.md @8e3d65d
                         (NeMo 24.07, DGX-H100, FP8): GPT-3 5B and 20B, Llama 2 13B, Nemotron
                         8B-340B pre-training, 16-128 GPUs, tokens/s per GPU (the table's other
                         six rows are the H100 cross-check the GEMM efficiency is fitted on)
  megatron-bridge-h100   NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md
                         @4ab94df (containers 25.11 to 26.06), DGX-H100 pre-training: Llama 3
                         8B/70B, Llama 3.1 405B, GPT-OSS 120B, Qwen3 30B-A3B and 235B-A22B
                         (MoE), FP8 current scaling and BF16, 8-1024 GPUs, tokens/s per GPU
                         (23 rows)
  mlperf-gpt3-h100       mlcommons/training_results_v3.1 NVIDIA/results/eos*_ngc23.09_nemo/gpt3
                         (MLPerf Training v3.1, NVIDIA's closed-division GPT-3 175B submissions on
                         Eos, DGX H100): each run's logged train_step_timing and batch, the
                         configuration of NVIDIA/benchmarks/gpt3/implementations/pytorch (NeMo
                         23.09, FP8, TP 4 PP 8 VP 12, 512-10752 GPUs; 7 rows) and Azure's run of
                         the same implementation on 10752 H100 of ND H100 v5 (1 row)
  mlperf30-gpt3-h100     mlcommons/training_results_v3.0 NVIDIA/results/dgxh100_n*_nemo/gpt3 and
                         NVIDIA_CoreWeave/results/coreweave_hgxh100_n*_ngc23.04_pytorch/gpt3
                         (MLPerf Training v3.0, GPT-3 175B on DGX H100 and on CoreWeave's HGX
                         H100, NeMo 1.17 on PyTorch 23.04, FP8, TP 4 PP 8 VP 12, 512-3584
                         GPUs; 5 rows)
  mlperf40-gpt3-h100     mlcommons/training_results_v4.0 NVIDIA/results/eos*_ngc24.04_nemo/gpt3
                         (MLPerf Training v4.0, the same benchmark a software generation later:
                         NeMo 24.04, FP8 weights, SHARP, per-layer CUDA graphs at scale): the
                         step time from each run's logged training blocks, TP 4 PP 8 VP 4 MBS 2
                         on 512 GPUs and TP 4 PP 6 VP 8 MBS 1 on 10752 and 11616 (3 rows)
  mlperf41-gpt3-h100     mlcommons/training_results_v4.1 NVIDIA/results/eos_n{32,64}_ngc24.09_nemo
                         and Oracle/results/{1536,3072}xBM.GPU.H100.8 (MLPerf Training v4.1,
                         GPT-3 175B: NeMo 24.09 on 256 and 512 DGX H100 GPUs, and Oracle's OCI
                         H100 on 1536 and 3072 over RoCE; FP8 weights, TP 4 PP 8, micro-batch 2,
                         VP 6 and 4; each run's logged median step; 4 rows)
  mlperf41-gpt3-b200     the same release's NVIDIA/results/b200_n8_preview_nemo (preview): the
                         benchmark on 64 B200 (8 x DGX B200), TP 4 PP 8 VP 6, micro-batch 2;
                         the three runs' median step (1 row)
  mlperf50-llama405b-h100
                         mlcommons/training_results_v5.0 NVIDIA/results/eos-dfw_n*_ngc25.01_nemo/
                         llama31_405b (MLPerf Training v5.0, Llama 3.1 405B pre-training with
                         the Mixtral tokenizer, NeMo 25.01, FP8, TP 8 PP 8 CP 2 VP 8, sequence
                         8192, 512-8192 DGX H100 GPUs; each run's logged median step; 5 rows)
  internlm-a100          InternLM/InternLM doc/en/train_performance.md @20fe5ac, "FLOPS
                         Testing": InternLM-7B under its own trainer (FlashAttention 1.0.5,
                         ZeRO-1 "Hybrid Zero") on 8-1024 A100-SXM4-80GB with 4 x 100 Gb RoCE
                         per node, with and without activation checkpointing (22 rows)
  megatron-core-moe-h100 NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md @0b4c4cf and
                         @022bcb5: Mixtral 8x7B bf16 training at 438 TFLOP/s per GPU (MCore v0.8)
                         and 468 (v0.9) on the README's reference mapping of it, 64 H100 (8 x 400
                         Gb/s InfiniBand per node), TP 1 EP 8 PP 4 VP 8, dropless all-to-all
                         (2 rows)
  nemo-megatron-a100     NVIDIA/NeMo-Framework-Launcher README.md 7.1.2 @b20f85d and @d4317dd:
                         GPT-3 5B on 1-20 and 175B on 16-128 DGX A100 80GB nodes, tokens/s, with
                         the launcher's conf/training/gpt3 yamls of those commits (10 rows)
  flagperf-nvidia        FlagOpen/FlagPerf training/nvidia/*/README.md @1b5a030: BAAI's benchmark
                         suite's NVIDIA reference runs with their launch scripts (training/
                         benchmarks/*): Llama 3 8B under Megatron-Core v0.6 on one 8 x A800 node
                         (seven parallel layouts and an out-of-memory record) and on 8-16 H100
                         (BF16 and FP8), Llama 3 70B on 64 H100, Llama 2 7B under
                         Megatron-DeepSpeed on 8 A800 / A100, Hugging Face Llama 2 7B and
                         ChatGLM3 6B under DeepSpeed ZeRO-3 on 8 A800 / H800 / H100, Mixtral 8x7B
                         under Megatron-Core on 32 H100, Llama 2 70B and Aquila2 7B under
                         FlagScale on 32 H800 and 8 A800; tokens/s per GPU and nvidia-smi memory
                         (27 step rows, 27 readings, 1 out-of-memory record)
  megatron-bridge-blackwell
                         NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @0a25f91
                         (containers 25.11 and 26.02): the Blackwell pre-training rows autoplan
                         can express that are not the B200 cross-check: Llama 3 8B and Llama 3.1
                         405B at FP8 current scaling on DGX-GB200 (NVL72), and the MXFP8 rows of
                         Llama 3 8B (B200, GB200), 3.1 405B (B200) and 3 70B (GB200) (7 rows)
"""

import json
import os

FOUNDRY_ROWS = [
    # (gpu, size, seq, gpus, mbs, grad_accum, tokens/s/GPU, precision, FSDP mixed precision, sharding, activation checkpointing)
    ('h100_80gb', '70b', 2048, 512, 8, 1, 1007, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '70b', 2048, 256, 8, 1, 1035, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '70b', 2048, 128, 8, 1, 1058, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 512, 8, 1, 2115, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 256, 8, 1, 2148, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 128, 8, 1, 2199, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 2048, 512, 16, 1, 4952, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 2048, 256, 16, 1, 4989, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 2048, 128, 16, 1, 5080, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 2048, 512, 6, 1, 9670, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '7b', 2048, 256, 6, 1, 10119, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '7b', 2048, 128, 6, 1, 10475, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 2048, 512, 8, 1, 21664, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '3b', 2048, 256, 8, 1, 22772, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '3b', 2048, 128, 8, 1, 23422, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '1b', 2048, 512, 12, 1, 39837, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '1b', 2048, 256, 12, 1, 42555, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '1b', 2048, 128, 12, 1, 44123, 'amp_bf16', 'DEFAULT', 'z2', False),
    ('h100_80gb', '70b', 2048, 64, 8, 4, 1039, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '70b', 2048, 32, 2, 16, 882, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 8192, 8, 1, 21, 1384, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 4096, 8, 1, 21, 1802, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 32, 14, 3, 2308, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 16, 10, 3, 2263, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 2048, 8, 3, 21, 2002, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '30b', 1024, 8, 6, 21, 2084, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 32768, 8, 1, 3, 1976, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 16384, 8, 3, 3, 2985, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 4096, 8, 10, 3, 4717, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '13b', 2048, 64, 2, 1, 4800, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '13b', 2048, 32, 2, 1, 4811, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '13b', 2048, 16, 2, 1, 4767, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '13b', 2048, 8, 2, 1, 4792, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '13b', 1024, 8, 40, 3, 5502, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 65536, 8, 1, 2, 1956, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 32768, 8, 2, 2, 3318, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 8192, 8, 8, 2, 6935, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 4096, 8, 16, 2, 8611, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '7b', 2048, 8, 6, 1, 10643, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '7b', 1024, 8, 64, 2, 10203, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '3b', 65536, 8, 1, 2, 3262, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '3b', 32768, 8, 3, 6, 5873, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '3b', 16384, 8, 1, 6, 11152, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 8192, 8, 3, 6, 16578, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 4096, 8, 5, 6, 20964, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 2048, 64, 6, 3, 22525, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 2048, 32, 6, 3, 23021, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 2048, 16, 10, 3, 24142, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 1024, 8, 20, 6, 27046, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 512, 8, 40, 6, 27965, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 65536, 8, 1, 2, 5506, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('h100_80gb', '1b', 32768, 8, 1, 4, 12025, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 16384, 8, 2, 4, 19649, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 8192, 8, 3, 4, 29157, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 4096, 8, 7, 4, 38535, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 2048, 64, 20, 1, 44402, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 2048, 32, 20, 1, 45130, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 2048, 16, 20, 1, 46037, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 2048, 8, 14, 1, 45455, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 1024, 8, 18, 4, 48910, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 512, 8, 56, 4, 52275, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 32768, 8, 1, 2, 16291, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 16384, 8, 3, 2, 27815, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 8192, 8, 6, 2, 41825, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 4096, 8, 12, 2, 55459, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 2048, 32, 24, 1, 67971, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 2048, 16, 24, 1, 68551, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 2048, 8, 24, 2, 63147, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 1024, 8, 48, 2, 78581, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '760m', 512, 8, 96, 2, 83749, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 32768, 8, 3, 6, 5856, 'amp_fp8', 'DEFAULT', 'z3', True),
    ('h100_80gb', '3b', 8192, 8, 3, 6, 19146, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 2048, 8, 10, 6, 30586, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('h100_80gb', '3b', 512, 8, 40, 6, 36527, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 32768, 8, 1, 4, 12580, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 8192, 8, 2, 4, 32010, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('h100_80gb', '1b', 512, 8, 56, 4, 70315, 'amp_fp8', 'DEFAULT', 'z3', False),
    ('a100_80gb', '70b', 2048, 64, 8, 4, 410, 'bf16', 'PURE', 'z3', True),
    ('a100_80gb', '70b', 2048, 32, 2, 16, 373, 'bf16', 'PURE', 'z3', True),
    ('a100_80gb', '30b', 8192, 8, 1, 21, 574, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '30b', 4096, 8, 1, 21, 814, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '30b', 2048, 8, 3, 21, 916, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '30b', 1024, 8, 6, 21, 946, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '30b', 512, 8, 12, 21, 967, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '13b', 32768, 8, 1, 3, 1016, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '13b', 16384, 8, 3, 3, 1431, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '13b', 8192, 8, 5, 3, 1795, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '13b', 4096, 8, 10, 3, 2060, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '13b', 2048, 8, 2, 3, 2262, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '13b', 1024, 8, 40, 3, 2330, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 65536, 8, 1, 2, 1013, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 32768, 8, 2, 2, 1672, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 16384, 8, 4, 2, 2453, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 8192, 8, 8, 2, 3206, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 4096, 8, 16, 2, 3684, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '7b', 2048, 8, 6, 2, 4641, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '7b', 1024, 8, 64, 2, 4357, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '3b', 65536, 8, 1, 2, 1767, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '3b', 32768, 8, 3, 6, 3029, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '3b', 16384, 8, 1, 6, 5529, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '3b', 8192, 8, 3, 6, 7695, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '3b', 4096, 8, 5, 6, 9457, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '3b', 2048, 8, 10, 2, 10811, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '3b', 1024, 8, 20, 6, 11580, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '3b', 512, 8, 40, 6, 12127, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 65536, 8, 1, 2, 3044, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '1b', 32768, 8, 1, 4, 6275, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 16384, 8, 2, 4, 9956, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 8192, 8, 3, 4, 13814, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 4096, 8, 7, 4, 17807, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 2048, 8, 14, 4, 20513, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 1024, 8, 18, 4, 22112, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '1b', 512, 8, 56, 4, 23148, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 65536, 8, 1, 2, 4143, 'amp_bf16', 'DEFAULT', 'z3', True),
    ('a100_80gb', '760m', 32768, 8, 1, 2, 8802, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 16384, 8, 3, 2, 14274, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 8192, 8, 6, 2, 20933, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 4096, 8, 12, 2, 27351, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 2048, 8, 24, 2, 32434, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 1024, 8, 48, 2, 29765, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '760m', 512, 8, 96, 2, 29446, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 65536, 8, 1, 2, 7524, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 32768, 8, 2, 2, 13652, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 16384, 8, 4, 2, 23559, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 8192, 8, 8, 2, 36569, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 4096, 8, 16, 2, 49555, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 2048, 8, 32, 2, 58782, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 1024, 8, 64, 2, 64813, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '350m', 512, 8, 128, 2, 69330, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 65536, 8, 1, 2, 20368, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 32768, 8, 2, 2, 36407, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 16384, 8, 4, 2, 60040, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 8192, 8, 8, 2, 90392, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 4096, 8, 16, 2, 118396, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 2048, 8, 40, 2, 142830, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 2048, 8, 32, 2, 141737, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 1024, 8, 64, 2, 156468, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_80gb', '125m', 512, 8, 128, 2, 165681, 'amp_bf16', 'DEFAULT', 'z3', False),
    ('a100_40gb', '70b', 2048, 128, 4, 1, 376, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '70b', 2048, 64, 2, 1, 276, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '30b', 2048, 128, 6, 1, 865, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '30b', 2048, 32, 4, 1, 857, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 8192, 8, 1, 16, 1407, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 4096, 8, 2, 16, 1603, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 2048, 128, 16, 1, 1972, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 2048, 64, 16, 1, 1976, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 2048, 32, 14, 1, 1998, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 2048, 16, 10, 1, 1993, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 2048, 8, 4, 16, 1668, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 1024, 8, 8, 16, 1727, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '13b', 512, 8, 16, 16, 1763, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 16384, 8, 1, 4, 2249, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 8192, 8, 3, 4, 2887, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 4096, 8, 6, 4, 3366, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 2048, 128, 18, 1, 3623, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 2048, 64, 18, 1, 3665, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 2048, 32, 18, 1, 3725, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 2048, 16, 16, 1, 3645, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 2048, 8, 12, 4, 3679, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 1024, 8, 24, 4, 3854, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '7b', 512, 8, 48, 4, 3895, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '3b', 32768, 8, 1, 4, 2955, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '3b', 16384, 8, 2, 8, 4465, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '3b', 8192, 8, 1, 8, 7149, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 4096, 8, 2, 8, 8777, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 2048, 128, 6, 1, 9538, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 2048, 64, 6, 1, 9736, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 2048, 32, 6, 1, 9914, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 2048, 16, 5, 1, 9750, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 2048, 8, 5, 8, 10065, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 1024, 8, 10, 8, 10731, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '3b', 512, 8, 20, 8, 11324, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 32768, 8, 1, 4, 5095, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '1b', 16384, 8, 1, 8, 9715, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 8192, 8, 2, 8, 13474, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 4096, 8, 4, 8, 16856, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 2048, 128, 10, 1, 18647, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 2048, 64, 10, 1, 19001, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 2048, 32, 10, 1, 15555, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 2048, 16, 8, 1, 19085, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 2048, 8, 8, 8, 19271, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 1024, 8, 16, 8, 20959, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '1b', 512, 8, 32, 8, 21782, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 32768, 8, 1, 4, 7183, 'bf16', 'PURE', 'z3', True),
    ('a100_40gb', '760m', 16384, 8, 1, 4, 13914, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 8192, 8, 3, 4, 20106, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 4096, 8, 6, 4, 25863, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 2048, 128, 12, 1, 28940, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 2048, 64, 12, 1, 29344, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 2048, 32, 12, 1, 29648, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 2048, 16, 12, 1, 29607, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 2048, 8, 12, 4, 30173, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 1024, 8, 24, 4, 33422, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '760m', 512, 8, 48, 4, 34938, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 32768, 8, 1, 4, 13416, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 16384, 8, 2, 4, 22896, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 8192, 8, 4, 4, 34933, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 4096, 8, 8, 4, 46833, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 2048, 128, 18, 1, 51934, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 2048, 64, 18, 1, 52689, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 2048, 32, 18, 1, 53811, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 2048, 16, 18, 1, 55413, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 2048, 8, 16, 4, 55995, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 1024, 8, 32, 4, 62523, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '350m', 512, 8, 64, 4, 66284, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 32768, 8, 1, 4, 32651, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 16384, 8, 2, 3, 55484, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 8192, 8, 5, 3, 86858, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 4096, 8, 13, 3, 115162, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 2048, 128, 26, 1, 123936, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 2048, 64, 26, 1, 125234, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 2048, 32, 26, 1, 127122, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 2048, 16, 26, 1, 130535, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 2048, 8, 26, 3, 136334, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 1024, 8, 52, 3, 148289, 'bf16', 'PURE', 'z3', False),
    ('a100_40gb', '125m', 512, 8, 104, 3, 156735, 'bf16', 'PURE', 'z3', False),
]


# MPT shapes (scripts/train/yamls/pretrain/mpt-*.yaml): d_model, n_layers, n_heads; expansion 4,
# vocab 50368, no biases, low-precision LayerNorm; the benchmark models learn absolute positions
# (NumParams grows with the sequence length by seq x d_model)
MPT = {"125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12),
       "1b": (2048, 24, 16), "3b": (2560, 32, 20), "7b": (4096, 32, 32),
       "13b": (5120, 40, 40), "30b": (7168, 48, 56), "70b": (8192, 80, 64)}
FOUNDRY = "mosaicml/llm-foundry scripts/train/benchmarking/README.md @8c8dd48"
FOUNDRY_GPU = {"a100_80gb": ("a100-sxm4-80g", "200Gb/s"), "a100_40gb": ("a100-sxm4-40g", "200Gb/s"),
               "h100_80gb": ("h100-sxm", "400Gb/s")}


def foundry_rows():
    out = []
    for (gpu, size, seq, gpus, mbs, ga, tok, prec, mp, shard, ac) in FOUNDRY_ROWS:
        h, L, a = MPT[size]
        g, net = FOUNDRY_GPU[gpu]
        gbs = mbs * ga * gpus
        # llm-foundry's FSDP mixed precision of the time (composer get_mixed_precision):
        # DEFAULT gathers fp32 parameters and reduces in bf16, PURE gathers and reduces bf16;
        # attention: attn_impl "flash" = flash-attn 1.x on the A100 tables (torch 1.13 era, the
        # README's TODO), flash-attn 2 on the H100 tables (llm-foundry's H100 and FP8 support
        # came with torch 2 and flash-attn 2; assumed, the README does not say). Note: the
        # benchmark script of the commits that wrote these tables defaulted to attn_impl
        # "triton" (scripts/train/benchmarking/submit_benchmarks.py, --attn_impl default
        # 'triton' up to 7f0fdae, 2024-03; sweep.sh passes none; the A100-80GB and H100 tables
        # came with b2a43a1, 2023-10, the large-scale H100 one with 5e85bd6, 2024-01):
        # llm-foundry's own Triton kernel on triton-pre-mlir. No published sweep covers that
        # kernel (the FA2 and FA3 papers' "Triton" is OpenAI's tutorial kernel; on H100 the
        # FA3 paper's uses Hopper instructions the old one lacks), so the rows keep the
        # flash-attn stand-ins; their H100 long-sequence rows run 12-16% faster than measured
        # and their A100 ones 10-21% slower
        # Composer's FSDP of these commits is PyTorch's FlatParameter FSDP (composer/trainer/
        # dist_strategy.py prepare_fsdp_module: torch.distributed.fsdp.FullyShardedDataParallel)
        plan = {"trainer": "fsdp", "fsdp_version": 1, "tp": 1, "pp": 1, "dp": gpus, "cp": 1,
                "vp": 1, "mbs": mbs,
                "gbs": gbs, "seq": seq, "recompute": "full" if ac else "none", "sp": False,
                "zero": 3 if shard == "z3" else 2, "dtype": "fp8" if prec == "amp_fp8" else "bf16",
                "overlap": True, "flash_attn": True,
                "attn_impl": "fa2" if gpu == "h100_80gb" else "fa1",
                "grad_reduce": "bf16", "gather": "fp32" if mp == "DEFAULT" else "bf16",
                # the loss: ComposerMPTCausalLM's default loss_fn "fused_crossentropy",
                # flash-attn's CrossEntropyLoss (llmfoundry/models/mpt/modeling_mpt.py)
                "loss": "fused"}
        out.append({"source": "llm-foundry-fsdp",
                    "cite": "%s: mpt-%s %s seq %d, %d GPUs, %s %s, %d tokens/s/GPU" % (
                        FOUNDRY, size, gpu, seq, gpus, prec, mp, tok),
                    "model_name": "mpt-" + size,
                    "model": {"name": "mpt-" + size, "layers": L, "hidden": h, "heads": a,
                              "vocab": 50368, "seq_len": seq, "activation": "gelu",
                              "norm": "layernorm", "bias": False, "tied_embeddings": True,
                              "position": "learned", "dropout": False},
                    "plan": plan, "gpu": g, "gpus": gpus, "gpus_per_node": 8, "network_bw": net,
                    "metric": "step_s", "measured": gbs * seq / (tok * gpus),
                    "how": "GBS x sequence / (reported tokens/s/GPU x GPUs)"})
    return out


# ---- flash-attention repository: GPT training speed on 8 x A100-80GB ---------------------------
# TFLOP/s per A100 (model FLOPs: Megatron-LM's formula x 3/4, Narayanan 2021 Sec. 5.1), bars of
# the "FlashAttention" series; per-GPU batch sizes are the configs' choice for >= 80 GB.
FA_REPO = "Dao-AILab/flash-attention training/README.md 'Training speed' (%s), config %s"
FA_GPT = [
    # (figure, config, layers, hidden, heads, seq, per-GPU batch, global batch, dtype, TFLOP/s)
    ("gpt3_training_efficiency.jpg", "pile/gpt3s-flash.yaml", 12, 768, 12, 2048, 32, 256, "bf16", 149),
    ("gpt3_training_efficiency.jpg", "pile/gpt3m-flash.yaml", 24, 1024, 16, 2048, 32, 256, "bf16", 167),
    ("gpt3_training_efficiency.jpg", "pile/gpt3l-flash.yaml", 24, 1536, 16, 2048, 16, 256, "bf16", 163),
    ("gpt3_training_efficiency.jpg", "pile/gpt3xl-flash.yaml", 24, 2048, 16, 2048, 8, 512, "bf16", 189),
    ("gpt3_training_efficiency.jpg", "pile/gpt3-2.7B-flash-hdim128.yaml", 32, 2560, 20, 2048, 4, 512, "bf16", 189),
    ("gpt2_training_efficiency.jpg", "owt/gpt2m-flash.yaml", 24, 1024, 16, 1024, 64, 512, "fp16", 159),
    ("gpt2_training_efficiency.jpg", "owt/gpt2l-flash.yaml", 36, 1280, 20, 1024, 32, 512, "fp16", 170),
    ("gpt2_training_efficiency.jpg", "owt/gpt2xl-flash.yaml", 48, 1600, 25, 1024, 16, 512, "fp16", 164),
]


def megatron_model_flops(B, s, L, h, V):
    """Model FLOPs of one step (Narayanan 2021 Eq. 3 without the recompute pass)."""
    return 72.0 * B * s * L * h * h * (1 + s / (6.0 * h) + V / (12.0 * L * h))


def flashattn_rows():
    out = []
    V = 50264  # GPT-2 vocabulary 50257 padded to a multiple of 8 (pad_vocab_size_multiple)
    for (fig, cfg, L, h, a, s, b, gbs, dt, tf) in FA_GPT:
        step = megatron_model_flops(gbs, s, L, h, V) / (tf * 1e12 * 8)
        name = "gpt-%dl-%dh" % (L, h)
        out.append({"source": "flashattn-gpt-a100",
                    "cite": FA_REPO % (fig, cfg) + ": %g TFLOP/s/GPU" % tf,
                    "model_name": name,
                    "model": {"name": name, "layers": L, "hidden": h, "heads": a, "vocab": V,
                              "seq_len": s, "activation": "gelu", "norm": "layernorm",
                              "bias": True, "tied_embeddings": True, "position": "learned",
                              "dropout": True},
                    # PyTorch Lightning DDP (ZeRO-1 via ZeroRedundancyOptimizer for the larger
                    # configs), fp32 parameters under autocast: fp32 gradients all-reduced;
                    # FlashAttention 1 (Nov 2022), no activation checkpointing; the loss is
                    # apex's fused cross-entropy with inplace_backward (configs/experiment/
                    # {owt,pile}/base.yaml, train.loss_fn)
                    "plan": {"trainer": "fsdp", "tp": 1, "pp": 1, "dp": 8, "cp": 1, "vp": 1,
                             "mbs": b, "gbs": gbs, "seq": s, "recompute": "none", "sp": False,
                             "zero": 0, "dtype": dt, "overlap": True, "flash_attn": True,
                             "attn_impl": "fa1", "grad_reduce": "fp32",
                             "loss": "fused_inplace"},
                    "gpu": "a100-sxm4-80g", "gpus": 8, "gpus_per_node": 8,
                    "network_bw": "200Gb/s", "metric": "step_s", "measured": step,
                    "how": "Megatron model FLOPs (Narayanan 2021 Eq. 3 x 3/4) / (TFLOP/s x 8)"})
    return out


# ---- torchtitan on H100 --------------------------------------------------------------------------
TT_DEC = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"
TT_ATP = "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"
# docs/performance.md @3faaa1a (2024-08-23), "Llama 3.1 performance numbers": 405B on 128 H100
# of the same kind ("HBM2e based lower TDP SXM H100 (95GB)", its footnote 1), FSDP 16 x TP 8,
# local batch 2 of 8192 tokens, full checkpointing (train_configs/llama3_405b.toml @3faaa1a);
# "Optimizations: None" read as no torch.compile, no Float8 and no async TP; the Float8 rows
# compiled (torchtitan's float8 path needs it) and the last adds async TP, as the table says
TT_405 = "pytorch/torchtitan docs/performance.md @3faaa1a 'Llama 3.1 performance numbers'"
# (cite, model, gpus, dp(FSDP), cp, tp, pp, vp, local batch, micro-batch, seq, recompute, dtype,
#  async TP, TPS/GPU, memory GiB or None)
TT = [
    (TT_DEC + " Table 1: FSDP", "llama-3-8b", 8, 8, 1, 1, 1, 1, 2, 2, 8192, "selective", "bf16", False, 5762, 82.4),
    (TT_DEC + " Table 1: FSDP + torch.compile", "llama-3-8b", 8, 8, 1, 1, 1, 1, 2, 2, 8192, "selective", "bf16", False, 6667, 77.0),
    (TT_DEC + " Table 1: FSDP + torch.compile + Float8", "llama-3-8b", 8, 8, 1, 1, 1, 1, 2, 2, 8192, "selective", "fp8", False, 8532, 76.8),
    (TT_DEC + " Table 2: FSDP 8, CP 1 (compile, Float8)", "llama-3-8b", 8, 8, 1, 1, 1, 1, 1, 1, 32768, "full", "fp8", False, 3890, 83.9),
    (TT_DEC + " Table 2: FSDP 4, CP 2 (compile, Float8)", "llama-3-8b", 8, 4, 2, 1, 1, 1, 1, 1, 65536, "full", "fp8", False, 2540, 84.2),
    (TT_DEC + " Table 2: FSDP 2, CP 4 (compile, Float8)", "llama-3-8b", 8, 2, 4, 1, 1, 1, 1, 1, 131072, "full", "fp8", False, 1071, 84.0),
    (TT_DEC + " Table 2: FSDP 1, CP 8 (compile, Float8)", "llama-3-8b", 8, 1, 8, 1, 1, 1, 1, 1, 262144, "full", "fp8", False, 548, 84.5),
    (TT_DEC + " Table 3: FSDP, 128 GPUs", "llama-3-8b", 128, 128, 1, 1, 1, 1, 2, 2, 8192, "selective", "bf16", False, 5605, 67.0),
    (TT_DEC + " Table 3: FSDP + torch.compile, 128 GPUs", "llama-3-8b", 128, 128, 1, 1, 1, 1, 2, 2, 8192, "selective", "bf16", False, 6514, 62.0),
    (TT_DEC + " Table 3: FSDP + torch.compile + Float8, 128 GPUs", "llama-3-8b", 128, 128, 1, 1, 1, 1, 2, 2, 8192, "selective", "fp8", False, 8380, 61.8),
    (TT_DEC + " Table 4: 2D (compile, Float8)", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "fp8", False, 829, 71.9),
    (TT_DEC + " Table 4: 2D + AsyncTP (compile, Float8)", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "fp8", True, 876, 67.6),
    # Tables 5 and 6: the micro-batch count is not stated; torchtitan of the time split the local
    # batch into --experimental.pipeline_parallel_microbatches, default the pipeline degree
    # (config_manager.py and parallelisms/pipelining_utils.py @ba24697, 2024-12): 8 micro-batches,
    # of 4 sequences in Table 5 (local batch 32) and of 1 in Table 6 (local batch 8); assumed
    (TT_DEC + " Table 5: 1F1B (compile, Float8, AsyncTP; assumed 8 micro-batches, the default)", "llama-3.1-405b", 512, 8, 1, 8, 8, 1, 32, 4, 8192, "full", "fp8", True, 100, 82.5),
    (TT_DEC + " Table 5: Interleaved 1F1B (compile, Float8, AsyncTP; assumed 2 stages per rank and 8 micro-batches, the default)", "llama-3.1-405b", 512, 8, 1, 8, 8, 2, 32, 4, 8192, "full", "fp8", True, 128, 72.7),
    (TT_DEC + " Table 6: FSDP 8, CP 1 (4D)", "llama-3.1-405b", 512, 8, 1, 8, 8, 1, 8, 1, 32768, "full", "fp8", True, 76, 75.3),
    (TT_DEC + " Table 6: FSDP 4, CP 2 (4D)", "llama-3.1-405b", 512, 4, 2, 8, 8, 1, 8, 1, 65536, "full", "fp8", True, 47, 75.9),
    (TT_DEC + " Table 6: FSDP 2, CP 4 (4D)", "llama-3.1-405b", 512, 2, 4, 8, 8, 1, 8, 1, 131072, "full", "fp8", True, 31, 77.1),
    (TT_DEC + " Table 6: FSDP 1, CP 8 (4D)", "llama-3.1-405b", 512, 1, 8, 8, 8, 1, 8, 1, 262144, "full", "fp8", True, 16, 84.9),
    (TT_ATP + ": 70B bf16 vanilla TP", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "bf16", False, 597.3, None),
    (TT_ATP + ": 70B bf16 async TP", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "bf16", True, 652.4, None),
    (TT_ATP + ": 70B float8 tensorwise vanilla TP", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "fp8", False, 809.8, None),
    (TT_ATP + ": 70B float8 tensorwise async TP", "llama-3-70b", 256, 32, 1, 8, 1, 1, 16, 16, 8192, "full", "fp8", True, 942.4, None),
    (TT_ATP + ": 8B bf16 vanilla TP", "llama-3-8b", 64, 8, 1, 8, 1, 1, 12, 12, 8192, "selective", "bf16", False, 4378, None),
    (TT_ATP + ": 8B bf16 async TP", "llama-3-8b", 64, 8, 1, 8, 1, 1, 12, 12, 8192, "selective", "bf16", True, 4809.4, None),
    (TT_ATP + ": 8B float8 tensorwise vanilla TP", "llama-3-8b", 64, 8, 1, 8, 1, 1, 12, 12, 8192, "selective", "fp8", False, 5078.1, None),
    (TT_ATP + ": 8B float8 tensorwise async TP", "llama-3-8b", 64, 8, 1, 8, 1, 1, 12, 12, 8192, "selective", "fp8", True, 5570.1, None),
    (TT_405 + ": 405B, no optimizations (assumed: no compile)", "llama-3.1-405b", 128, 16, 1, 8, 1, 1, 2, 2, 8192, "full", "bf16", False, 109, None),
    (TT_405 + ": 405B, Float8 (compile)", "llama-3.1-405b", 128, 16, 1, 8, 1, 1, 2, 2, 8192, "full", "fp8", False, 177, None),
    (TT_405 + ": 405B, Float8 + Async TP (compile)", "llama-3.1-405b", 128, 16, 1, 8, 1, 1, 2, 2, 8192, "full", "fp8", True, 185, None),
]


# Runs without torch.compile: Tables 1 and 3 add it in their next row. Every other row compiled
# (its table's title, or async TP, which needs it); autoplan prices torchtitan compiled, as its
# emitted config runs it, so these two rows say "compile": false (the norms, rotary embedding
# and SwiGLU then run as eager composites, costmodel/layer_cost.c)
TT_EAGER = {TT_DEC + " Table 1: FSDP", TT_DEC + " Table 3: FSDP, 128 GPUs",
            TT_405 + ": 405B, no optimizations (assumed: no compile)"}


def torchtitan_rows(hf):
    out = []
    for (cite, model, gpus, dp, cp, tp, pp, vp, lbs, mbs, seq, rc, dt, atp, tps, mem) in TT:
        gbs = dp * lbs
        plan = {"trainer": "torchtitan", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                "mbs": mbs, "gbs": gbs, "seq": seq, "recompute": rc, "sp": tp > 1, "zero": 3,
                "dtype": dt, "overlap": True, "overlap_tp": atp, "flash_attn": True}
        if cite in TT_EAGER:
            plan["compile"] = False
        if vp > 1:
            # 126 layers over 16 model chunks: the near-uniform split torchtitan's splitter
            # makes, one layer fewer on the chunks holding the embedding and the head
            plan["stage_layers"] = [7] + [8] * 14 + [7]
        base = {"source": "torchtitan-h100", "model_name": model, "model": hf(model),
                # Grand Teton: 8 H100 (96 GB HBM2e, 500 W) per host, 400 Gb/s RDMA per GPU
                # (docs/performance.md): the catalog's h100-96g-500w, not the 700 W H100 SXM
                "plan": plan, "gpu": "h100-96g-500w", "gpus": gpus, "gpus_per_node": 8,
                "network_bw": "400Gb/s"}
        r = dict(base)
        r.update({"cite": cite + ": %g TPS/GPU" % tps, "metric": "step_s",
                  "measured": gbs * seq / (tps * gpus),
                  "how": "local batch x FSDP degree x sequence / (TPS/GPU x GPUs)"})
        out.append(r)
        # the tables' "Memory(GiB)" column is torchtitan's logged "memory:", the caching
        # allocator's reserved high-water mark (torchtitan/components/metrics.py @820504e:
        # torch.cuda.memory_stats "reserved_bytes.all.peak" / 2^30), the largest over the GPUs
        # (the file's footnote 1): nvidia-smi's reading less what lies outside the allocator
        if mem is not None:
            m = dict(base)
            m.update({"cite": cite + ": memory %g GiB" % mem, "metric": "max_reserved_bytes",
                      "measured": mem * 2.0 ** 30,
                      "how": "torchtitan's logged max reserved memory, GiB"})
            out.append(m)
    # the same page: "We do see OOM for 1D parallelism (FSDP2), so we only tested 2D
    # parallelism" for 405B on its 128 GPUs, read as the table's local batch 2 and full
    # checkpointing over FSDP 128 (bf16, no compile: its first row's settings)
    plan = {"trainer": "torchtitan", "tp": 1, "pp": 1, "dp": 128, "cp": 1, "vp": 1, "mbs": 2,
            "gbs": 256, "seq": 8192, "recompute": "full", "sp": False, "zero": 3,
            "dtype": "bf16", "overlap": True, "flash_attn": True, "compile": False}
    out.append({"source": "torchtitan-h100", "model_name": "llama-3.1-405b",
                "model": hf("llama-3.1-405b"), "plan": plan, "gpu": "h100-96g-500w",
                "gpus": 128, "gpus_per_node": 8, "network_bw": "400Gb/s",
                "cite": TT_405 + ": OOM for 1D parallelism (FSDP2) on 128 GPUs",
                "metric": "oom", "measured": 1, "how": "recorded out of memory"})
    return out


# ---- torchtitan on H200 (Trainy on WhiteFiber) ---------------------------------------------------
# pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @cbccb38 (2025-06):
# Llama 3.1 8B on 4 and 8 hosts of 8 H200 (NVLink; 400 Gb/s RDMA per GPU), TPS/GPU at the
# 100th iteration. The command: torchtitan e7c0cae with train_configs/llama3_8b.toml @e7c0cae
# (sequence 8192, FSDP over every rank, selective per-op checkpointing) and --training.
# local_batch_size=2 --training.compile, Float8 linears with FSDP float8 all-gather (priced with
# 16-bit gathers, as this file's other torchtitan Float8 rows)
TT_H200 = "pytorch/torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md @cbccb38"
# (hosts, TPS/GPU, Memory(GiB): torchtitan's logged max reserved at the 100th iteration)
TT_H200_ROWS = [(4, 10938, 47.96), (8, 10753, 46.97)]


def torchtitan_h200_rows(hf):
    out = []
    for (hosts, tps, mem) in TT_H200_ROWS:
        gpus = 8 * hosts
        # --training.compile compiles the loss too since 2025-04 (torchtitan/components/loss.py
        # @e7c0cae build_cross_entropy_loss: torch.compile(cross_entropy_loss), added by #1033
        # "result in reduction of memory"): one fused kernel over the 16-bit logits, no fp32
        # copy, as the "fused" loss (plan.h AP_LOSS_FUSED_BYTES)
        plan = {"trainer": "torchtitan", "tp": 1, "pp": 1, "dp": gpus, "cp": 1, "vp": 1,
                "mbs": 2, "gbs": 2 * gpus, "seq": 8192, "recompute": "selective", "sp": False,
                "zero": 3, "dtype": "fp8", "overlap": True, "flash_attn": True, "loss": "fused"}
        out.append({"source": "torchtitan-h200",
                    "cite": "%s: NUM_NODES %d, %d TPS/GPU" % (TT_H200, hosts, tps),
                    "model_name": "llama-3-8b", "model": hf("llama-3-8b"), "plan": plan,
                    "gpu": "h200-sxm", "gpus": gpus, "gpus_per_node": 8, "network_bw": "400Gb/s",
                    "metric": "step_s", "measured": 2 * 8192 / tps,
                    "how": "local batch x sequence / (TPS/GPU)"})
        out.append(dict(out[-1], cite="%s: NUM_NODES %d, memory %g GiB" % (TT_H200, hosts, mem),
                        metric="max_reserved_bytes", measured=mem * 2.0 ** 30,
                        how="torchtitan's logged max reserved memory, GiB"))
    return out


# ---- torchtitan on A100 (its first published figures) ----------------------------------------------
# docs/performance.md @157a12c (2024-04-24): Llama 3 8B/70B and Llama 2 13B/70B under FSDP2 alone
# on 64 A100-80GB, WPS (tokens/s per GPU) per activation-checkpointing mode; the configurations
# are that commit's train_configs/*.toml: sequence 8192 (Llama 3) and 4096 (Llama 2), the local
# batch of the table (one micro-batch: no gradient accumulation in torchtitan of the time),
# compile = false, SDPA attention (FlashAttention-2 kernels on A100), FSDP2 MixedPrecisionPolicy
# bf16 parameters and fp32 reduction (torchtitan/parallelisms/parallelize_llama.py). "selective
# layer" is selective_ac_option's default "2" (config_manager.py): every second block fully
# checkpointed, half the layers recomputed; "selective op" is the op policy (save every compute
# op's output except every second mm). The network is not stated: 200 Gb/s per GPU assumed (a
# DGX A100-class node, 8 x 200 Gb/s HDR).
TT_A100 = "pytorch/torchtitan docs/performance.md @157a12c (train_configs/*.toml @157a12c)"
# Llama 2 13B as torchtitan builds it (torchtitan/models/llama/__init__.py @157a12c: dim 5120,
# 40 layers, 40 heads; ModelArgs' multiple_of 256 gives the FFN 13824; the Llama 2 tokenizer's
# 32000 tokens; untied output layer)
LLAMA2_13B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 5120,
              "intermediate_size": 13824, "num_attention_heads": 40, "num_key_value_heads": 40,
              "num_hidden_layers": 40, "vocab_size": 32000, "max_position_embeddings": 4096,
              "hidden_act": "silu", "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
# The models whose train_configs/*.toml @157a12c set norm_type = "fused_rmsnorm" (torchtitan/
# models/norms.py TritonFusedRMSNorm: one kernel keeping its input, x, weight and rstd), the rest
# of the block eager; llama2_70b.toml and llama3_70b.toml set "rmsnorm", the eager composite
TT_A100_FUSED_NORM = {"llama-3-8b", "llama-2-13b"}
TT_A100_ROWS = [
    # (table, model, local batch, sequence, AC mode as the table names it, WPS)
    ("Llama 3", "llama-3-8b", 1, 8192, "selective layer", 2904),
    ("Llama 3", "llama-3-8b", 1, 8192, "selective op", 2973),
    ("Llama 3", "llama-3-70b", 1, 8192, "full", 331),
    ("Llama 2", "llama-2-13b", 2, 4096, "no", 2162),
    ("Llama 2", "llama-2-13b", 2, 4096, "selective layer", 1914),
    ("Llama 2", "llama-2-13b", 2, 4096, "selective op", 1904),
    ("Llama 2", "llama-2-70b", 1, 4096, "selective op", 355),
    ("Llama 2", "llama-2-70b", 2, 4096, "full", 353),
]


def torchtitan_a100_rows(hf):
    out = []
    for (table, model, lbs, seq, ac, wps) in TT_A100_ROWS:
        m = LLAMA2_13B if model == "llama-2-13b" else hf(model)
        gpus = 64
        plan = {"trainer": "torchtitan", "tp": 1, "pp": 1, "dp": gpus, "cp": 1, "vp": 1,
                "mbs": lbs, "gbs": gpus * lbs, "seq": seq,
                "recompute": {"no": "none", "full": "full", "selective op": "selective",
                              "selective layer": "full"}[ac],
                "sp": False, "zero": 3, "dtype": "bf16", "overlap": True, "flash_attn": True,
                "compile": False}
        if model in TT_A100_FUSED_NORM:
            plan["fused_norm"] = True
        if ac == "selective layer":
            plan["recompute_layers"] = m["num_hidden_layers"] // 2
        out.append({"source": "torchtitan-a100",
                    "cite": "%s: %s performance numbers, %s, batch %d, AC %s: %d WPS" % (
                        TT_A100, table, model, lbs, ac, wps),
                    "model_name": model, "model": m, "plan": plan, "gpu": "a100-sxm4-80g",
                    "gpus": gpus, "gpus_per_node": 8, "network_bw": "200Gb/s",
                    "metric": "step_s", "measured": lbs * seq / wps,
                    "how": "local batch x sequence / WPS (tokens/s per GPU)"})
    # The table's first version (docs/performance.md @395a526, 2024-04-18) also records Llama 2
    # 70B at local batch 2 running out of memory under both selective modes (its footnote 1:
    # "the 70B training with local batch size 2 will cause OOM error when selective activation
    # checkpointing is used"); train_configs/llama_70b.toml @395a526: norm_type "rmsnorm",
    # compile = false, sequence 4096
    m = hf("llama-2-70b")
    for ac in ("selective layer", "selective op"):
        plan = {"trainer": "torchtitan", "tp": 1, "pp": 1, "dp": 64, "cp": 1, "vp": 1,
                "mbs": 2, "gbs": 128, "seq": 4096,
                "recompute": "full" if ac == "selective layer" else "selective",
                "sp": False, "zero": 3, "dtype": "bf16", "overlap": True, "flash_attn": True,
                "compile": False}
        if ac == "selective layer":
            plan["recompute_layers"] = m["num_hidden_layers"] // 2
        out.append({"source": "torchtitan-a100",
                    "cite": "pytorch/torchtitan docs/performance.md @395a526: 70B, batch 2, "
                            "AC %s: OOM" % ac,
                    "model_name": "llama-2-70b", "model": m, "plan": plan,
                    "gpu": "a100-sxm4-80g", "gpus": 64, "gpus_per_node": 8,
                    "network_bw": "200Gb/s", "metric": "oom", "measured": 1,
                    "how": "recorded out of memory"})
    return out


# ---- Megatron-LM weak scaling on H100 ------------------------------------------------------------
MLM = "NVIDIA/Megatron-LM README.md 'Weak Scaling Results' (images/model_table.png), Megatron-Core r0.8"
MLM_ROWS = [
    # (size, heads, hidden, layers, tp, pp, dp, gpus, batch, TFLOP/s/GPU)
    ("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7),
    ("119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8),
    ("314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9),
]


# The pipelined runs' schedule. The README says pipeline-parallel communication was overlapped
# "(enabled by default)": Megatron-Core r0.8 overlaps it only under the interleaved schedule
# (megatron/training/arguments.py @core_r0.8.0: without --num-layers-per-virtual-pipeline-stage
# it sets overlap_p2p_comm to False and warns). The strong-scaling text agrees: 42% MFU for the
# 177B model at 4608 GPUs is 12 micro-batches on 6 stages, where one-forward-one-backward idles
# 5/17 of the step, so it cannot exceed 0.71 x the 47% of the 96-GPU run (576 micro-batches);
# only interleaving shrinks that bubble. The depth is not stated: one layer per virtual stage
# (--num-layers-per-virtual-pipeline-stage 1), the one value every row's layers per stage
# allow (23 on the 119B rows and 7 on the 462B rows are prime; 42, 16 and 12 on the others).
# Assumed, not stated. Every row's micro-batches per step (8 to 64) divide by its pp, as the
# interleaved schedule requires.
def megatron_plan(tp, pp, dp, L, B, s):
    return {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1,
            "vp": L // pp if pp > 1 else 1, "mbs": B // dp if pp == 1 else 1, "gbs": B,
            "seq": s, "recompute": "none", "sp": tp > 1, "zero": 1, "dtype": "bf16",
            "overlap": True, "flash_attn": True}


def megatron_model(size, L, h, a, V, s):
    return {"name": "gpt-" + size.lower(), "layers": L, "hidden": h, "heads": a, "vocab": V,
            "seq_len": s, "activation": "gelu", "norm": "layernorm", "bias": True,
            "tied_embeddings": False, "position": "learned", "dropout": True}


MLM_HOW = "Megatron model FLOPs (72 B s L h^2 (1 + s/6h + V/12Lh)) / (TFLOP/s x GPUs)"


def megatron_rows():
    out = []
    V, s = 131072, 4096
    for (size, a, h, L, tp, pp, dp, gpus, B, tf) in MLM_ROWS:
        step = megatron_model_flops(B, s, L, h, V) / (tf * 1e12 * gpus)
        out.append({"source": "megatron-h100-weak",
                    "cite": MLM + ": GPT %s, %g TFLOP/s/GPU (micro-batch = the rank's whole "
                            "batch without PP, 1 with PP; with PP interleaved, one layer per "
                            "virtual stage; no recomputation: assumed, not stated)" % (size, tf),
                    "model_name": "gpt-" + size.lower(),
                    "model": megatron_model(size, L, h, a, V, s),
                    "plan": megatron_plan(tp, pp, dp, L, B, s),
                    "gpu": "h100-sxm", "gpus": gpus, "gpus_per_node": 8,
                    "network_bw": "400Gb/s", "metric": "step_s", "measured": step,
                    "how": MLM_HOW})
    # Strong scaling: "the standard GPT-3 model (slightly more than 175 billion parameters due to
    # larger vocabulary size) from 96 H100 GPUs to 4,608 GPUs, using the same batch size of 1,152
    # sequences throughout ... a reduction in MFU from 47% to 42%". The 177B row of the weak table
    # (tp 8, pp 6); 96 and 4608 GPUs are its tp x pp times 2 and 96. MFU against the 989.4
    # TFLOP/s the table's MFU column uses (432.8 TFLOP/s = 44%, 474.4 = 48%); the stated MFU is
    # rounded to a percent (+-1% of the step)
    size, a, h, L, tp, pp = "177B", 96, 12288, 96, 8, 6
    for (gpus, mfu) in ((96, 0.47), (4608, 0.42)):
        dp, B = gpus // (tp * pp), 1152
        step = megatron_model_flops(B, s, L, h, V) / (mfu * 989.4e12 * gpus)
        out.append({"source": "megatron-h100-strong",
                    "cite": "NVIDIA/Megatron-LM README.md 'Strong Scaling Results', Megatron-Core "
                            "r0.8: GPT 177B on %d H100, global batch 1152, MFU %d%% (tp 8 pp 6 "
                            "as the weak table's 177B row; micro-batch 1, interleaved one layer "
                            "per virtual stage, no recomputation: assumed, not stated)"
                            % (gpus, round(mfu * 100)),
                    "model_name": "gpt-177b", "model": megatron_model(size, L, h, a, V, s),
                    "plan": megatron_plan(tp, pp, dp, L, B, s),
                    "gpu": "h100-sxm", "gpus": gpus, "gpus_per_node": 8,
                    "network_bw": "400Gb/s", "metric": "step_s", "measured": step,
                    "how": "Megatron model FLOPs (72 B s L h^2 (1 + s/6h + V/12Lh)) / (MFU x "
                           "989.4 TFLOP/s x GPUs)"})
    return out


# ---- BLOOM (BigScience, Megatron-DeepSpeed on Jean Zay) ------------------------------------------
BLOOM = "bigscience-workshop/bigscience train/tr11-176B-ml/"
# Jean Zay A100 nodes: 8 x A100-80GB on NVLink, 4 x 100 Gb/s Omni-Path per node (README):
# 50 Gb/s per GPU. (An earlier NCCL test on 4 of these nodes reached only 40.5 Gb/s all-reduce
# bus bandwidth, experiments/bandwidth/README.md; the 176B run's fabric was not re-measured.)
BLOOM_NET = "50Gb/s"
# NCCL: README.md "PyTorch-1.11 w/ CUDA-11.5", chosen "for its NCCL version which supports BF16
# comms" (bf16 collectives arrived in NCCL 2.10, the version PyTorch 1.11 bundles): before
# 2.22, so every communicator connects its ring and tree when it is made
BLOOM_NCCL = "2.10"


def bloom_model(name, L, h, a, alibi):
    # dropout: the 176B run kept Megatron-LM's defaults, attention and hidden dropout 0.1
    # (train/tr11-176B-ml/README.md: "The default Megatron-LM dropout settings are inherited";
    # tr11-176B-ml.slurm passes no dropout flag; bigscience-workshop/Megatron-DeepSpeed
    # megatron/arguments.py: --attention-dropout and --hidden-dropout default to 0.1); the
    # chronicles' experiments ran the same scripts (assumed to keep the defaults too)
    return {"name": name, "layers": L, "hidden": h, "heads": a, "vocab": 250880, "seq_len": 2048,
            "activation": "gelu", "norm": "layernorm", "bias": True, "tied_embeddings": True,
            "position": "alibi" if alibi else "learned", "dropout": True}


def bloom_row(cite, name, m, plan, metric, measured, how):
    base = {"trainer": "deepspeed", "cp": 1, "vp": 1, "seq": 2048, "recompute": "full",
            "sp": False, "dtype": "bf16", "overlap": False, "flash_attn": False}
    base.update(plan)
    return {"source": "bigscience-bloom", "cite": BLOOM + cite, "model_name": name, "model": m,
            "plan": base, "gpu": "a100-sxm4-80g", "gpus": 384, "gpus_per_node": 8,
            "network_bw": BLOOM_NET, "nccl": BLOOM_NCCL, "metric": metric, "measured": measured,
            "how": how}


def bloom_rows():
    out = []
    # the BLOOM-176B run: 48 nodes, TP 4, PP 12, DP 8, micro-batch 2, global 2048, bf16 with
    # BF16_Optimizer (ZeRO stage 0), full recomputation, ALiBi, embedding LayerNorm,
    # --pp-partition-method 'type:transformer|embedding': the two embeddings count as layers,
    # 72 slots over 12 stages, so the first and last stages hold 5 transformer layers
    m = bloom_model("bloom-176b", 70, 14336, 112, True)
    m["embed_norm"] = True
    out.append(bloom_row("README.md 'Important checkpoints': iteration 85376, elapsed time per "
                         "iteration 104.70 s (tr11-176B-ml.slurm configuration)", "bloom-176b", m,
                         {"tp": 4, "pp": 12, "dp": 8, "mbs": 2, "gbs": 2048, "zero": 0,
                          "stage_layers": [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]},
                         "step_s", 104.70, "reported elapsed time per iteration"))
    # the same run during its batch-size ramp-up (README.md 'Global batch size rampup'): the
    # logged iteration 3707 at GBS 16 and micro-batch 2, one micro-batch per pipeline (15.23 s);
    # and the start the run took instead, GBS 192 at micro-batch 1, "@ 73 TFLOPs" (the log's
    # TFLOPs are Megatron's Eq. 3 with the recompute pass, 96 B s L h^2 (1 + s/6h + V/16Lh) per
    # step over time x GPUs, which turns the 15.23 s row into its logged 8.04; 73 gives 20.1 s)
    sl = [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]
    out.append(bloom_row("README.md 'Global batch size rampup': iteration 3707, global batch size "
                         "16, elapsed time per iteration 15.23 s (MBS 2)", "bloom-176b", m,
                         {"tp": 4, "pp": 12, "dp": 8, "mbs": 2, "gbs": 16, "zero": 0,
                          "stage_layers": sl},
                         "step_s", 15.23, "logged elapsed time per iteration"))
    eq3 = 96.0 * 192 * 2048 * 70 * 14336.0 ** 2 * (1 + 2048 / (6.0 * 14336) +
                                                    250880 / (16.0 * 70 * 14336))
    out.append(bloom_row("README.md 'Global batch size rampup' update: GBS 192, MBS 1 @ 73 TFLOPs, "
                         "%.2f s per iteration by Megatron's Eq. 3" % (eq3 / (73e12 * 384)),
                         "bloom-176b", m,
                         {"tp": 4, "pp": 12, "dp": 8, "mbs": 1, "gbs": 192, "zero": 0,
                          "stage_layers": sl},
                         "step_s", eq3 / (73e12 * 384), "stated TFLOPs (Eq. 3) converted"))
    # chronicles-prequel.md 'GBS Variations' (02-25): NLAYERS 72, NHIDDEN 14336, NHEADS 64, ZeRO-1,
    # seq 2048, full recomputation (--checkpoint-activations); bf16 and learned positions assumed
    GBSV = [(8, 8, 6, 4, 1568, 113.01), (8, 8, 6, 4, 2048, 114.11), (8, 8, 6, 6, 2016, 123.57),
            (4, 8, 12, 4, 1568, 92.75), (4, 8, 12, 4, 2048, 117.07), (4, 8, 12, 2, 1568, 99.93),
            (4, 8, 12, 2, 2048, 128.82), (6, 8, 8, 4, 2016, 113.16), (12, 8, 4, 2, 2016, 125.52),
            (12, 8, 4, 4, 2016, 114.81), (24, 8, 2, 1, 2016, 145.45), (24, 8, 2, 2, 2016, 136.13),
            (8, 4, 12, 4, 2048, 111.89)]
    # the same page's further 02-25 tables ('Tweaking TP'): TP 4 and TP 2 at GBS 2048 (the two
    # differing readings of DP 8 TP 4 PP 12 MBS 2 are left out: what changed between them is
    # not stated)
    TPV = [(16, 4, 6, 4, 2048, 117.11), (16, 4, 6, 2, 2048, 111.71), (16, 2, 12, 2, 2048, 112.50)]
    # 02-21, before the nodes' PCIe/NUMA fix of 02-25 (which the page says made every run 1-5%
    # faster): the two 48-node topologies over micro-batch sizes, GBS 2048
    PRE = [(4, 8, 12, 1, 2048, 143.31), (4, 8, 12, 2, 2048, 134.02), (4, 8, 12, 4, 2048, 123.69),
           (4, 8, 12, 8, 2048, 129.26), (8, 8, 6, 1, 2048, 139.82), (8, 8, 6, 2, 2048, 131.02),
           (8, 8, 6, 4, 2048, 121.48)]
    m = bloom_model("bloom-181b", 72, 14336, 64, False)
    for (table, rows) in [("'GBS Variations'", GBSV), ("'Tweaking TP' (02-25)", TPV),
                          ("NHIDDEN=14336 / NLAYERS=72 tables (02-21, before the PCIe/NUMA fix)",
                           PRE)]:
        for (dp, tp, pp, mbs, gbs, sec) in rows:
            out.append(bloom_row("chronicles-prequel.md %s: DP %d TP %d PP %d MBS %d GBS %d, "
                                 "%.2f s/it (bf16 assumed)" % (table, dp, tp, pp, mbs, gbs, sec),
                                 "bloom-181b", m,
                                 {"tp": tp, "pp": pp, "dp": dp, "mbs": mbs, "gbs": gbs, "zero": 1},
                                 "step_s", sec, "reported seconds per iteration"))
    # 'Max possible TFLOPs check' (02-21): 6 and 10 layers of the same width on one node, TP 8,
    # no pipeline, no data parallelism. The table's GBS column says 2048 but its heading says
    # GBS=512, and the TFLOPs column agrees with 512 (Megatron's formula: 96 B s L h^2 (1 + s/6h
    # + V/16Lh) / (t x GPUs) gives 157.0 at 512 and 119.19 s); two runs of the 6-layer model
    m6 = bloom_model("bloom-181b-6l", 6, 14336, 64, False)
    m10 = bloom_model("bloom-181b-10l", 10, 14336, 64, False)
    for (mm, name, mbs, sec) in [(m6, "bloom-181b-6l", 2, 130.43), (m6, "bloom-181b-6l", 2, 119.19),
                                 (m10, "bloom-181b-10l", 1, 205.52)]:
        r = bloom_row("chronicles-prequel.md 'Max possible TFLOPs check' (02-21): %d layers, TP "
                      "8 PP 1 MBS %d GBS 512 (the heading's), %.2f s/it (bf16 assumed)"
                      % (mm["layers"], mbs, sec), name, mm,
                      {"tp": 8, "pp": 1, "dp": 1, "mbs": mbs, "gbs": 512, "zero": 1},
                      "step_s", sec, "reported seconds per iteration")
        r["gpus"] = 8
        out.append(r)
    # device memory: the tables' Mem column, the most any GPU used as nvidia-smi shows it (the
    # page: 'Mem = max memory used by the first (last) nodes with the word embedding matrix';
    # its GB read as nvidia-smi's GiB), for every configuration above that records one
    MEM = [(8, 8, 6, 4, 1568, 56), (8, 8, 6, 4, 2048, 55), (8, 8, 6, 6, 2016, 66),
           (4, 8, 12, 4, 2048, 49), (6, 8, 8, 4, 2016, 52), (12, 8, 4, 2, 2016, 53),
           (12, 8, 4, 4, 2016, 59), (24, 8, 2, 1, 2016, 65), (24, 8, 2, 2, 2016, 76),
           (8, 4, 12, 4, 2048, 60), (16, 4, 6, 4, 2048, 75), (16, 4, 6, 2, 2048, 57),
           (16, 2, 12, 2, 2048, 63), (4, 8, 12, 1, 2048, 29), (4, 8, 12, 2, 2048, 37),
           (4, 8, 12, 4, 2048, 49), (4, 8, 12, 8, 2048, 69), (8, 8, 6, 1, 2048, 38),
           (8, 8, 6, 2, 2048, 44), (8, 8, 6, 4, 2048, 56)]
    for (dp, tp, pp, mbs, gbs, gib) in MEM:
        out.append(bloom_row("chronicles-prequel.md tables (02-21, 02-25): DP %d TP %d PP %d MBS "
                             "%d GBS %d, Mem %d GB (nvidia-smi, the fullest GPU)"
                             % (dp, tp, pp, mbs, gbs, gib), "bloom-181b", m,
                             {"tp": tp, "pp": pp, "dp": dp, "mbs": mbs, "gbs": gbs, "zero": 1},
                             "device_bytes", gib * 2.0 ** 30, "nvidia-smi peak, GiB"))
    r = bloom_row("chronicles-prequel.md 'Max possible TFLOPs check' (02-21): 6 layers, TP 8 PP 1 "
                  "MBS 2, Mem 54 GB (nvidia-smi)", "bloom-181b-6l", m6,
                  {"tp": 8, "pp": 1, "dp": 1, "mbs": 2, "gbs": 512, "zero": 1},
                  "device_bytes", 54 * 2.0 ** 30, "nvidia-smi peak, GiB")
    r["gpus"] = 8
    out.append(r)
    # 'Tweaking TP' (02-25), its further rows: TP 2 over 24 stages (3 layers each) and TP 4 over
    # 24 (its Mem column blank), and TP 2 PP 6 DP 32, recorded out of memory
    for (dp, tp, pp, mbs, sec, gib) in [(8, 2, 24, 1, 119.53, 44), (8, 2, 24, 2, 122.75, 53),
                                        (4, 4, 24, 1, 130.60, None)]:
        plan = {"tp": tp, "pp": pp, "dp": dp, "mbs": mbs, "gbs": 2048, "zero": 1}
        what = ("chronicles-prequel.md 'Tweaking TP' (02-25): DP %d TP %d PP %d MBS %d "
                "GBS 2048, " % (dp, tp, pp, mbs))
        out.append(bloom_row(what + "%.2f s/it (bf16 assumed)" % sec, "bloom-181b", m, plan,
                             "step_s", sec, "reported seconds per iteration"))
        if gib:
            out.append(bloom_row(what + "Mem %d GB (nvidia-smi, the fullest GPU)" % gib,
                                 "bloom-181b", m, plan, "device_bytes", gib * 2.0 ** 30,
                                 "nvidia-smi peak, GiB"))
    for mbs in (2, 1):
        out.append(bloom_row("chronicles-prequel.md 'Tweaking TP' (02-25): DP 32 TP 2 PP 6 MBS %d "
                             "GBS 2048: OOM" % mbs, "bloom-181b", m,
                             {"tp": 2, "pp": 6, "dp": 32, "mbs": mbs, "gbs": 2048, "zero": 1},
                             "oom", 1, "recorded out of memory"))
    out += bloom_rebalance_rows()
    # the same table records DP 48 TP 8 PP 1 MBS 1 as out of memory
    out.append(bloom_row("chronicles-prequel.md 'GBS Variations': DP 48 TP 8 PP 1 MBS 1 GBS 2016: "
                         "OOM", "bloom-181b", m,
                         {"tp": 8, "pp": 1, "dp": 48, "mbs": 1, "gbs": 2016, "zero": 1},
                         "oom", 1, "recorded out of memory"))
    return out


# 'Rebalancing layers' (02-28): "from now on the testing is happening with BF16 optimizer that was
# just written to accumulate gradients in fp32 ... The additional memory usage is 4bytes x params
# and it's not sharded" (DeepSpeed's BF16_Optimizer: ZeRO stage 0 in autoplan's terms, which
# prices that buffer), and --pp-partition-method 'type:transformer|embedding' (each embedding
# takes a layer slot; the layer counts make layers + 2 a multiple of PP). Per model (hidden,
# layers): (DP, TP, PP, MBS, NHEADS, Mem GB or None for OOM, s/it); GBS 2048 on 48 nodes
BLOOM_REBALANCE = [
    ("195B", 12288, 106, [(8, 4, 12, 2, 64, 67, 116.54), (8, 4, 12, 2, 96, 65, 118.79),
                          (8, 4, 12, 2, 128, 67, 121.42), (8, 4, 12, 4, 96, 79, 120.34)]),
    ("184B", 12288, 100, [(16, 4, 6, 2, 64, None, None), (16, 4, 6, 1, 64, None, None),
                          (8, 8, 6, 2, 64, 61, 139.72), (8, 8, 6, 4, 64, 72, 120.96)]),
    ("178B", 13312, 82, [(4, 8, 12, 4, 64, 52, 111.79), (8, 4, 12, 2, 64, 63, 104.45),
                         (8, 4, 12, 2, 104, 62, 123.71), (8, 4, 12, 2, 128, 60, 108.78),
                         (8, 4, 12, 4, 64, 74, 104.82)]),
    ("203B", 13312, 94, [(8, 4, 12, 2, 128, 67, 124.10)]),
    ("176B", 14336, 70, [(4, 8, 12, 2, 64, 40, 121.63), (8, 4, 12, 2, 64, 59, 102.03),
                         (8, 4, 12, 2, 112, 59, 104.50), (8, 4, 12, 2, 128, 60, 105.89),
                         (8, 4, 12, 4, 64, 73, 102.27)]),
    ("206B", 14336, 82, [(8, 4, 12, 2, 128, None, None)]),
]


def bloom_rebalance_rows():
    """The 02-28 tables: the stage split gives the first and last stages one transformer layer
    fewer (their embedding's slot); learned positions and bf16 as the earlier tables (assumed)."""
    out = []
    for (size, h, L, runs) in BLOOM_REBALANCE:
        for (dp, tp, pp, mbs, a, gib, sec) in runs:
            per = (L + 2) // pp
            layers = [per - 1] + [per] * (pp - 2) + [per - 1]
            name = "bloom-%s-h%d-a%d" % (size.lower(), h, a)
            m = bloom_model(name, L, h, a, False)
            plan = {"tp": tp, "pp": pp, "dp": dp, "mbs": mbs, "gbs": 2048, "zero": 0,
                    "stage_layers": layers}
            what = ("chronicles-prequel.md 'Rebalancing layers' (02-28, BF16 optimizer): %s, "
                    "NHIDDEN %d, NLAYERS %d, NHEADS %d, DP %d TP %d PP %d MBS %d GBS 2048, "
                    % (size, h, L, a, dp, tp, pp, mbs))
            if gib is None:
                out.append(bloom_row(what + "OOM", name, m, plan, "oom", 1,
                                     "recorded out of memory"))
                continue
            out.append(bloom_row(what + "%.2f s/it" % sec, name, m, plan, "step_s", sec,
                                 "reported seconds per iteration"))
            out.append(bloom_row(what + "Mem %d GB (nvidia-smi, the fullest GPU)" % gib, name, m,
                                 plan, "device_bytes", gib * 2.0 ** 30, "nvidia-smi peak, GiB"))
    return out


# ---- MT-NLG 530B (Megatron-DeepSpeed on Selene) -------------------------------------------------
MTNLG = ("Smith et al. 2022, 'Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B', "
         "arXiv 2201.11990, Sec. 2.4 (system performance): %d DGX A100, global batch 1920, "
         "%.1f s per iteration (%d TFLOP/s/GPU)")


def mtnlg_rows():
    """The 530B model of the in-sample Korthikanti 2022 rows (105 layers, hidden 20480, 128 heads,
    sequence 2048; the GPT-2 vocabulary padded to 51200 as Megatron pads it), here as DeepSpeed
    ran it: 8-way tensor slicing inside a node, 35-way pipeline across nodes (Sec. 2.3), data
    parallel over the rest, the pipeline engine's non-interleaved 1F1B schedule. Selene nodes:
    8 x A100-80GB on NVSwitch, HDR InfiniBand, one 200 Gb/s HCA per GPU (Sec. 2.4; Microsoft
    Research blog 'Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B', 2021-10-11).
    The iteration times and TFLOP/s are also reproduced in cli99/llm-analysis
    examples/megatron-turing-nlg/README.md. The paper's TFLOP/s agree with these iteration times
    under Megatron's Eq. 3 (recompute pass counted): 125.7, 120.4, 113.5.
    Assumed (the paper does not state them): micro-batch 1, full activation checkpointing,
    ZeRO stage 1 (the only data-parallel sharding DeepSpeed's pipeline engine combines with
    pipelining), bf16, non-overlapped gradient reduction."""
    out = []
    m = {"name": "mt-nlg-530b", "layers": 105, "hidden": 20480, "heads": 128, "vocab": 51200,
         "seq_len": 2048, "activation": "gelu", "norm": "layernorm", "bias": True,
         "tied_embeddings": True}
    for (nodes, sec, tf) in [(280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113)]:
        gpus = nodes * 8
        out.append({"source": "mtnlg-530b-deepspeed", "cite": MTNLG % (nodes, sec, tf),
                    "model_name": "mt-nlg-530b", "model": m,
                    "plan": {"trainer": "deepspeed", "tp": 8, "pp": 35, "dp": gpus // 280,
                             "cp": 1, "vp": 1, "mbs": 1, "gbs": 1920, "seq": 2048,
                             "recompute": "full", "sp": False, "zero": 1, "dtype": "bf16",
                             "overlap": False, "flash_attn": False},
                    "gpu": "a100-sxm4-80g", "gpus": gpus, "gpus_per_node": 8,
                    "network_bw": "200Gb/s", "metric": "step_s", "measured": sec,
                    "how": "reported time per iteration"})
    return out


# ---- NVIDIA DGX Cloud benchmarking recipes (NeMo on DGX H100) -------------------------------------
DGXC = ("NVIDIA/dgxc-benchmarking llama3.1/README_%s.md @%s 'Expected Performance' (settings: "
        "llama3.1/configure.sh @143b90d)")
DGXC_COMMIT = {"8b": "e6afea3", "70b": "143b90d", "405b": "8f5cbb3"}
DGXC_ROWS = [
    # (size, NeMo container, gpus, layers, tp, pp, cp, vp, gbs, step s BF16, step s FP8); the
    # tables' "Training step time (seconds per step)", micro-batch 1 throughout. 405B below 576
    # GPUs: the recipe's proxy configurations (7, 21 and 42 of its 126 layers)
    ("8b", "24.09", 8, 32, 1, 1, 2, 1, 128, 12.91, 9.67),
    ("8b", "24.09", 16, 32, 1, 1, 2, 1, 256, 13.00, 9.73),
    ("8b", "24.09", 32, 32, 1, 1, 2, 1, 512, 13.05, 9.75),
    ("8b", "24.09", 64, 32, 1, 1, 2, 1, 1024, 13.08, 9.80),
    ("8b", "24.09", 128, 32, 1, 1, 2, 1, 2048, 13.10, 9.82),
    ("70b", "24.09", 64, 80, 4, 4, 2, 5, 128, 14.72, 11.01),
    ("70b", "24.09", 128, 80, 4, 4, 2, 5, 256, 14.73, 10.93),
    ("70b", "24.09", 256, 80, 4, 4, 2, 5, 512, 14.8, 11.16),
    ("70b", "24.09", 512, 80, 4, 4, 2, 5, 1024, 14.89, 11.18),
    ("70b", "24.09", 1024, 80, 4, 4, 2, 5, 2048, 14.92, 11.28),
    ("70b", "24.09", 2048, 80, 4, 4, 2, 5, 4096, 14.98, 11.39),
    ("405b", "24.12", 32, 7, 8, 1, 2, 1, 126, 9.00, 5.75),
    ("405b", "24.12", 96, 21, 8, 3, 2, 7, 126, 8.87, 5.63),
    ("405b", "24.12", 192, 42, 8, 3, 2, 7, 252, 17.30, 10.8),
    ("405b", "24.12", 576, 126, 8, 9, 2, 7, 252, 17.50, 11.00),
    ("405b", "24.12", 1152, 126, 8, 9, 2, 7, 504, 17.60, 11.10),
    ("405b", "24.12", 2304, 126, 8, 9, 2, 7, 1008, 17.70, 11.20),
]
DGXC_MODEL = {"8b": "llama-3-8b", "70b": "llama-3-70b", "405b": "llama-3.1-405b"}


def dgx_row(source, cite, name, model, plan, gpus, step,
                 how="reported training step time (the last of the run)", gpu="h100-sxm",
                 network_bw="400Gb/s"):
    """One run on DGX H100 (H100 SXM nodes of 8 with 400 Gb/s per GPU; another DGX by `gpu` and
    `network_bw`) and its step time; `how` says how the source gives it (by default the DGX
    Cloud READMEs' last training step)."""
    return {"source": source, "cite": cite, "model_name": name, "model": model, "plan": plan,
            "gpu": gpu, "gpus": gpus, "gpus_per_node": 8, "network_bw": network_bw,
            "metric": "step_s", "measured": step, "how": how}


def dgxc_rows(hf):
    """Llama 3.1 8B and 70B have Llama 3's shapes (examples/models/llama-3-*.json; the rope
    scaling changes no FLOP or byte). The 405B recipe trains on synthetic data with "the
    GPT2BPETokenizer as a proxy": GPT-2's 50257 tokens, padded by Megatron to a multiple of
    128 x tp = 1024, so 51200 (padding assumed). The READMEs state tp, pp, cp, vp, the micro-batch
    and the batch; configure.sh sets cuDNN fused attention (NVTE_FUSED_ATTN=1) and, in FP8 runs,
    FP8 weights (fp8_params). The rest is NeMo's recipe default and labelled assumed: no
    activation recomputation, the distributed optimizer (ZeRO-1), sequence parallelism with tp,
    overlapped gradient reduction and parameter gathering."""
    out = []
    for (size, nemo, gpus, L, tp, pp, cp, vp, gbs, bf16, fp8) in DGXC_ROWS:
        m = dict(hf(DGXC_MODEL[size]))
        name = "llama-3.1-" + size
        if size == "405b":
            m["vocab_size"] = 51200
            m["num_hidden_layers"] = L
            if L != 126:
                name += "-%dl" % L
        dp = gpus // (tp * pp * cp)
        for dt, step in (("bf16", bf16), ("fp8", fp8)):
            # configure.sh: NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0 (cuDNN fused attention) and
            # "+model.fp8_params=$FP8_ENABLED" (FP8 weights, no 16-bit copy, in FP8 runs)
            plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                    "mbs": 1, "gbs": gbs, "seq": 8192, "recompute": "none", "sp": tp > 1,
                    "zero": 1, "dtype": dt, "overlap": True, "flash_attn": True,
                    "attn_impl": "cudnn"}
            if dt == "fp8":
                plan["fp8_params"] = True
            cite = ((DGXC % (size, DGXC_COMMIT[size])) +
                    ": NeMo %s, %s, %d x H100, %d layers, TP %d PP %d CP %d VP %d MBS 1 GBS %d, "
                    "%.2f s per step (no recomputation, distributed optimizer, overlapped DP "
                    "communication: NeMo defaults, assumed)"
                    % (nemo, dt.upper(), gpus, L, tp, pp, cp, vp, gbs, step))
            out.append(dgx_row("nvidia-dgxc-h100", cite, name, m, plan, gpus, step))
    return out


# Nemotron-4 in the same recipes (README_15b.md and README_340b.md @35a9aec, v24.11.1, tables
# "Nemotron4 15b / 340b 24.11"): (size, gpus, BF16 s, FP8 s); 15B at TP 4, MBS 4, GBS 4 x GPUs;
# 340B at TP 8, PP 8, VP 12, MBS 1, GBS = 2 x nodes
NEMOTRON = ("NVIDIA/dgxc-benchmarking nemotron/README_%s.md @35a9aec (v24.11.1) 'Expected "
            "Performance', configuration nemotron/configure.sh and nemotron4-%s-synth.yaml "
            "@35a9aec")
NEMOTRON_ROWS = [
    ("15b", 16, 2.83, 2.08), ("15b", 32, 2.86, 2.07), ("15b", 64, 2.86, 2.09),
    ("15b", 128, 2.89, 2.08), ("15b", 256, 2.88, 2.10), ("15b", 512, 2.92, 2.12),
    ("15b", 1024, 2.92, 2.12), ("15b", 2048, 2.96, 2.18),
    ("340b", 128, 4.61, 3.16), ("340b", 256, 4.67, 3.21), ("340b", 512, 4.70, 3.26),
    ("340b", 1024, 4.73, 3.34), ("340b", 2048, 4.84, 3.49),
]
# (layers, hidden, ffn, heads, tp, pp, vp, mbs, recompute, attention kernel)
NEMOTRON_CFG = {"15b": (32, 6144, 24576, 48, 4, 1, 1, 4, "none", "cudnn"),
                "340b": (96, 18432, 73728, 96, 8, 8, 12, 1, "selective", "fa2")}


def nemotron_rows():
    """Nemotron-4 15B and 340B as the recipe's yaml builds them: 8 query groups, squared-ReLU
    MLP (priced as the non-gated ReLU MLP; the square is one more elementwise op),
    LayerNorm1p (a LayerNorm), RoPE on half the head, no biases, untied embeddings, the
    256,000-token tokenizer, sequences of 4096. The plan: the distributed optimizer (NeMo's
    distributed_fused_adam), sequence parallelism with TP communication overlap
    (model.ub_tp_comm_overlap=True), overlapped gradient reduction and parameter gathering,
    bf16 gradient reduction (grad_sync_dtype; Megatron-Core then keeps the gradient buffer in
    bf16), no recomputation for 15B and selective for 340B (the yaml), cuDNN fused attention
    for 15B and flash-attn for 340B (configure.sh NVTE_FUSED_ATTN), FP8 weights in FP8 runs
    (+model.fp8_params=$FP8_ENABLED); the 340B yaml also sets the optimizer's dtype to bf16
    (optim.dtype: DistributedFusedAdam keeps its parameter copy and Adam's moments in bf16)."""
    out = []
    for (size, gpus, bf16, fp8) in NEMOTRON_ROWS:
        L, h, f, a, tp, pp, vp, mbs, rc, attn = NEMOTRON_CFG[size]
        m = {"name": "nemotron-4-" + size, "layers": L, "hidden": h, "heads": a, "kv_heads": 8,
             "ffn_hidden": f, "vocab": 256000, "seq_len": 4096, "activation": "relu",
             "norm": "layernorm", "position": "rotary", "bias": False,
             "tied_embeddings": False, "dropout": False}
        dp = gpus // (tp * pp)
        gbs = 4 * gpus if size == "15b" else gpus // 4
        for dt, step in (("bf16", bf16), ("fp8", fp8)):
            plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": vp,
                    "mbs": mbs, "gbs": gbs, "seq": 4096, "recompute": rc, "sp": True,
                    "zero": 1, "dtype": dt, "overlap": True, "overlap_tp": True,
                    "flash_attn": True, "attn_impl": attn, "grad_reduce": "bf16"}
            if size == "340b":
                plan["optim_dtype"] = "bf16"
            if dt == "fp8":
                plan["fp8_params"] = True
            cite = ((NEMOTRON % (size, size)) +
                    ": %s, %d x H100, TP %d PP %d VP %d MBS %d GBS %d, %.2f s per step"
                    % (dt.upper(), gpus, tp, pp, vp, mbs, gbs, step))
            out.append(dgx_row("nvidia-dgxc-h100", cite, "nemotron-4-" + size, m, plan, gpus,
                                step))
    return out


DGXC_GPT3 = ("NVIDIA/dgxc-benchmarking nemo_megatron/README_175b.md @35a9aec (v24.11.1) 'Expected "
             "Performance', configuration nemo_megatron/gpt3_175b_hydra.yaml and launch.sh "
             "@35a9aec")
# GPUs: (BF16, FP8) training step time, seconds (NeMo Megatron 24.11, TP 4 PP 8 VP 12, MBS 1)
DGXC_GPT3_ROWS = [(128, 8.91, 5.92), (256, 8.95, 5.96), (512, 9.09, 6.44), (1024, 9.01, 6.72),
                  (2048, 9.02, 6.24)]


def dgxc_gpt3_rows():
    """GPT-3 175B in the same repository's NeMo Megatron recipe (v24.11.1): the yaml's model
    (96 layers, hidden 12288, 96 heads, 4h MLP, GPT-2's BPE vocabulary padded to a multiple of
    128 x TP, learned positions, tied embeddings, biases, hidden and attention dropout 0.1,
    sequence 2048) and plan: TP 4 PP 8 VP 12, micro-batch 1, global batch 2 x GPUs (the
    README's columns), sequence parallelism with TP communication overlap
    (ub_tp_comm_overlap), overlapped P2P, Apex's distributed_fused_adam with overlapped
    gradient and parameter synchronisation in bf16 (grad_sync_dtype), no recomputation,
    flash-attn (launch.sh NVTE_FUSED_ATTN=0); FP8 rows with FP8 weights (fp8_params) and the
    hybrid delayed recipe, BF16 rows with the optimizer's 2-byte parameter remainders (NeMo's
    store_param_remainders for an fp32 optimizer over bf16 weights, nemo_long_rows)."""
    out = []
    m = dict(mlperf_gpt3_model(4))
    m["dropout"] = True
    for (gpus, bf16, fp8) in DGXC_GPT3_ROWS:
        dp, gbs = gpus // 32, 2 * gpus
        for dt, step in (("bf16", bf16), ("fp8", fp8)):
            plan = {"trainer": "megatron", "tp": 4, "pp": 8, "dp": dp, "cp": 1, "vp": 12,
                    "mbs": 1, "gbs": gbs, "seq": 2048, "recompute": "none", "sp": True,
                    "zero": 1, "dtype": dt, "overlap": True, "overlap_tp": True,
                    "flash_attn": True, "attn_impl": "fa2", "grad_reduce": "bf16"}
            if dt == "fp8":
                plan["fp8_params"] = True
            else:
                plan["param_remainders"] = True
            cite = (DGXC_GPT3 + ": %s, %d x H100, TP 4 PP 8 VP 12 MBS 1 GBS %d, %.2f s per "
                    "step" % (dt.upper(), gpus, gbs, step))
            out.append(dgx_row("nvidia-dgxc-h100", cite, "gpt3-175b", m, plan, gpus, step))
    return out


# ---- Grok-1 (MoE) in the same recipes ---------------------------------------------------------------
GROK = ("NVIDIA/dgxc-benchmarking grok1/README_314b.md @35a9aec (v24.11.1) 'Expected Performance', "
        "configuration grok1/configure.sh and grok1/grok1_314b.yaml @35a9aec")
GROK_ROWS = [
    # (gpus, seq, layers, tp, pp, cp, ep, vp, gbs, step s BF16, step s FP8): the README's
    # configuration table and "Training step time (seconds per step)" rows, micro-batch 1; below
    # 512 GPUs the recipe's proxy configurations (2-32 of the 64 layers)
    (8, 4096, 2, 4, 1, 1, 2, 1, 1024, 24.03, 19.89),
    (16, 4096, 4, 4, 1, 1, 4, 1, 1024, 21.52, 17.08),
    (32, 4096, 4, 4, 1, 1, 8, 1, 1024, 10.64, 8.3),
    (64, 8192, 8, 4, 1, 2, 8, 1, 1024, 20.64, 16.21),
    (128, 8192, 16, 4, 2, 2, 8, 8, 1024, 20.64, 16.48),
    (256, 8192, 32, 4, 4, 2, 8, 8, 1024, 20.7, 16.55),
    (512, 8192, 64, 4, 8, 2, 8, 8, 1024, 20.83, 16.69),
    (1024, 8192, 64, 4, 8, 2, 8, 8, 2048, 21.0, 16.89),
    (2048, 8192, 64, 4, 8, 2, 8, 8, 4096, 21.09, 17.04),
]


def grok_rows():
    """Grok-1 as grok1_314b.yaml builds it in NeMo (Megatron-Core): 64 layers, hidden 6144, 48
    heads with 8 query groups, 8 experts of ffn 32768 with top-2 routing and gated GELU
    ("fast-geglu"), RMSNorm, RoPE, untied embeddings, the Llama-3 tokenizer (128256 tokens);
    written as a Mixtral-form configuration with those sizes (the expert capacity of 1.0 with
    padding gives every expert its average load). The plan as the recipe runs it: the
    distributed optimizer, sequence parallelism, TP communication overlap
    (model.ub_tp_comm_overlap=true in configure.sh), overlapped gradient reduction and
    parameter gathering, gradients reduced in bf16 (grad_sync_dtype), flash-attn kernels
    (NVTE_FUSED_ATTN=0), no activation recomputation, FP8 weights in FP8 runs
    (model.fp8_params=$FP8_ENABLED), and the experts split over the tensor-parallel ranks: the
    recipe sets no expert_tensor_parallel_size, which Megatron-Core then takes equal to
    tensor_model_parallel_size (TransformerConfig, core r0.10, NeMo 24.11)."""
    out = []
    for (gpus, seq, L, tp, pp, cp, ep, vp, gbs, bf16, fp8) in GROK_ROWS:
        m = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"],
             "hidden_size": 6144, "intermediate_size": 32768, "num_hidden_layers": L,
             "num_attention_heads": 48, "num_key_value_heads": 8, "num_local_experts": 8,
             "num_experts_per_tok": 2, "hidden_act": "gelu", "vocab_size": 128256,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
             "tie_word_embeddings": False, "sliding_window": None}
        dp = gpus // (tp * pp * cp)
        for dt, step in (("bf16", bf16), ("fp8", fp8)):
            plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep,
                    "etp": tp, "vp": vp, "mbs": 1, "gbs": gbs, "seq": seq, "recompute": "none",
                    "sp": True, "zero": 1, "dtype": dt, "overlap": True, "overlap_tp": True,
                    "flash_attn": True, "attn_impl": "fa2", "grad_reduce": "bf16"}
            if dt == "fp8":
                plan["fp8_params"] = True
            cite = (GROK + ": %s, %d x H100, %d layers, seq %d, TP %d PP %d CP %d EP %d VP %d "
                    "MBS 1 GBS %d, %.2f s per step"
                    % (dt.upper(), gpus, L, seq, tp, pp, cp, ep, vp, gbs, step))
            name = "grok-1-%dl" % L if L != 64 else "grok-1"
            out.append(dgx_row("nvidia-dgxc-grok1", cite, name, m, plan, gpus, step))
    return out


# ---- NeMo long-sequence study (Llama 2 7B, FP8, DGX-H100, context parallelism) ------------------
NEMO_LONG = ("NVIDIA/NeMo docs/source/performance/performance_long_sequence.md @5b47a94 "
             "(2024-10-18) 'LLAMA2-7B (FP8)', container NeMo 24.03.01, DGX-H100: %dK tokens, "
             "%d GPUs, TP %d PP %d DP %d CP %d, %s TFLOPS/GPU (with CP)")
# (sequence in K tokens, GPUs, tp, pp, dp, cp, reported TFLOPS per GPU with CP)
NEMO_LONG_ROWS = [(4, 4, 1, 1, 4, 1, 768), (8, 8, 1, 2, 4, 1, 730), (16, 16, 2, 1, 8, 1, 660),
                  (32, 32, 2, 1, 8, 2, 610), (64, 64, 4, 1, 8, 2, 574), (128, 128, 4, 1, 8, 4, 555),
                  (256, 256, 4, 1, 8, 8, 549), (512, 512, 8, 1, 4, 16, 549),
                  (1024, 1024, 8, 1, 4, 32, 536)]


def llama_flops_per_token(m, s):
    """Model FLOPs per token of a Llama-form model (SwiGLU, GQA) as NeMo and Megatron-LM count
    them for their TFLOP/s: L h^2 (12 + 12 g/a + 18 k f/h + 12 s/h + 6 V/(L h)), k the experts
    each token is routed to (1 for dense models), attention over all s x s pairs, no causal
    halving. NeMo: nemo/utils/flops_formulas.py llama2 as first committed, f0bf77b; the same
    team's performance summary of that period counts the same way (NeMo 24.07
    docs/source/performance/performance_summary.md @8e3d65d, LLAMA2-7B on 8 H100 at 4096 tokens,
    780 TFLOP/s per GPU at 16,934 tokens/s per GPU is 46.06 GFLOP per token, this formula 46.09;
    halving the attention term would give 42.9). Megatron-LM: megatron/training/training.py
    num_floating_point_operations of the MCore v0.8-v0.10 era, 12 b s L h^2 ((1 + g/a + s/h) +
    (f/h) k 3/2 + V/(2 L h)), the same expression."""
    L, h = m["num_hidden_layers"], m["hidden_size"]
    a, g = m["num_attention_heads"], m["num_key_value_heads"]
    f, V = m["intermediate_size"], m["vocab_size"]
    k = m.get("num_experts_per_tok", 1)
    return L * h * h * (12 + 12.0 * g / a + 18.0 * k * f / h + 12.0 * s / h + 6.0 * V / (L * h))


def nemo_long_rows(hf):
    """The table gives the degrees and model TFLOP/s per GPU of each with-CP run; the step time is
    the batch's model FLOPs (llama_flops_per_token) over that rate and the GPUs. Assumed and
    labelled: 4M-token batches (the same page's B200 table lists them: batch 512 at 8K down to 4
    at 1M), one sequence per micro-batch, no activation recomputation, the distributed optimizer
    with overlapped data-parallel communication, sequence parallelism with tp (NeMo's defaults),
    Transformer Engine's cuDNN fused attention (its Hopper default), FP8 GEMMs with 16-bit
    weights. The optimizer is stated, not assumed: NeMo-Framework-Launcher's llama2_7b.yaml
    (launcher_scripts/conf/training/llama, @064e676) sets distributed_fused_adam, for which NeMo
    (megatron_base_model.py setup_optimization, @9d86acd, 2024-03) keeps fp32 Adam states over
    bf16 weights with store_param_remainders (a 2-byte master remainder) and fp32 gradients
    (Apex's grad_sync_dtype defaults to the optimizer dtype): "param_remainders". The ratio of
    predicted to measured time does not depend on the assumed batch except
    through the 8K row's pipeline bubble and the data-parallel traffic per step."""
    out = []
    for (k, gpus, tp, pp, dp, cp, tf) in NEMO_LONG_ROWS:
        s = k * 1024
        m = dict(hf("llama-2-7b"))
        m["max_position_embeddings"] = s
        gbs = 4 * 1024 * 1024 // s
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": 1,
                "mbs": 1, "gbs": gbs, "seq": s, "recompute": "none", "sp": tp > 1,
                "zero": 1, "dtype": "fp8", "overlap": True, "flash_attn": True,
                "attn_impl": "cudnn", "param_remainders": True}
        step = gbs * s * llama_flops_per_token(m, s) / (tf * 1e12 * gpus)
        cite = (NEMO_LONG % (k, gpus, tp, pp, dp, cp, tf) +
                "; step = %d sequences x %d tokens x NeMo's model FLOPs per token / (TFLOPS x "
                "GPUs) (batch of 4M tokens, micro-batch 1, no recomputation, distributed "
                "optimizer overlap: assumed)" % (gbs, s))
        out.append(dgx_row("nemo-longseq-h100", cite, "llama-2-7b", m, plan, gpus, step,
                                "reported model TFLOP/s per GPU converted with NeMo's FLOPs "
                                "formula"))
    return out


NEMO_LONG_B200 = ("NVIDIA/NeMo docs/source/performance/performance_long_sequence.md @a2c4cc8 "
                  "(2025-05-08) 'LLAMA3-8B (FP8) - B200', container NeMo 25.04.rc2, DGX-B200: "
                  "%dK tokens, '%d' GPUs, batch %d, TP %d PP %d DP %d CP %d, %s TFLOPS/GPU "
                  "(with CP)")
# (sequence in K tokens, the table's GPU count, batch, tp, pp, dp, cp, reported TFLOPS per GPU
# with CP)
NEMO_LONG_B200_ROWS = [(8, 8, 512, 1, 1, 2, 1, 1671), (16, 16, 256, 1, 1, 4, 1, 1717),
                       (32, 32, 128, 1, 1, 4, 2, 1624), (64, 64, 64, 1, 1, 4, 4, 1600),
                       (128, 128, 32, 2, 1, 4, 4, 1588), (256, 256, 16, 4, 1, 4, 4, 1590),
                       (512, 512, 8, 4, 1, 4, 8, 1619), (1024, 1024, 4, 4, 1, 4, 16, 1608)]


def nemo_long_b200_rows(hf):
    """The same page a release later: Llama 3 8B in FP8 on DGX-B200 under NeMo 25.04, sequences
    8K to 1M with context parallelism, the batch of each row as the table states it (4M
    tokens). Its "# of GPUs" column repeats the sequence length in K, as the H100 table's does,
    and is four times TP x PP x DP x CP on every row (8K: TP 1 PP 1 DP 2 CP 1 under "8"); the
    rows take the degrees, GPUs = TP PP DP CP: only that reading divides the batch among the
    data-parallel ranks at 512K and 1M (8 and 4 sequences), and read the other way each GPU
    would do the same work per micro-batch with the step scaled alike. Assumed and
    labelled, as for the H100 rows: one sequence per micro-batch, no recomputation, NeMo 2.0's
    Megatron-Core distributed optimizer with overlapped data-parallel communication and fp32
    master weights, sequence parallelism with TP, Transformer Engine's cuDNN attention, FP8 with
    the trainer's default (delayed) scaling; the step is the batch's model FLOPs
    (llama_flops_per_token) over the reported rate and the GPUs."""
    out = []
    for (k, listed, gbs, tp, pp, dp, cp, tf) in NEMO_LONG_B200_ROWS:
        s = k * 1024
        m = dict(hf("llama-3-8b"))
        m["max_position_embeddings"] = s
        gpus = tp * pp * dp * cp
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": 1,
                "mbs": 1, "gbs": gbs, "seq": s, "recompute": "none", "sp": tp > 1,
                "zero": 1, "dtype": "fp8", "overlap": True, "flash_attn": True,
                "attn_impl": "cudnn"}
        step = gbs * s * llama_flops_per_token(m, s) / (tf * 1e12 * gpus)
        cite = (NEMO_LONG_B200 % (k, listed, gbs, tp, pp, dp, cp, tf) +
                "; %d GPUs = TP PP DP CP (the GPU column reads four times that); step = %d "
                "sequences x %d tokens x NeMo's model FLOPs per token / (TFLOPS x GPUs) "
                "(micro-batch 1, no recomputation, distributed optimizer overlap: assumed)"
                % (gpus, gbs, s))
        out.append(dgx_row("nemo-longseq-b200", cite, "llama-3-8b", m, plan, gpus, step,
                           "reported model TFLOP/s per GPU converted with NeMo's FLOPs formula",
                           gpu="b200", network_bw="400Gb/s"))
    return out


TOKENS_HOW = "reported tokens/s per GPU converted to a step"


# ---- NeMo 24.07 performance summary (DGX-H100, FP8) -------------------------------------------
NEMO_PERF = ("NVIDIA/NeMo docs/source/performance/performance_summary.md @8e3d65d (NeMo 24.07, "
             "DGX-H100, FP8 pre-training): %s, %d GPUs, GBS %d MBS %d, sequence %d, TP %d PP %d "
             "CP %d VP %d, %d tokens/s per GPU")
# (model, gpus, gbs, mbs, seq, tp, pp, cp, vp, tokens/s per GPU): the table's rows as printed,
# less the six that are tools/make_validation.py's H100 cross-check (GPT3-175B on 128 and 512,
# LLAMA2-7B, LLAMA2-70B, LLAMA3-8B, LLAMA3-70B), on which the H100 GEMM efficiency is fitted:
# those are not out of sample
NEMO_PERF_ROWS = [
    ("GPT3-5B", 64, 2048, 4, 2048, 1, 1, 1, 1, 23406),
    ("GPT3-20B", 64, 256, 2, 2048, 2, 1, 1, 1, 5851),
    ("LLAMA2-13B", 16, 128, 1, 4096, 1, 4, 1, 10, 8715),
    ("Nemotron-8B", 64, 256, 4, 4096, 2, 1, 1, 1, 12507),
    ("Nemotron-22B", 64, 256, 2, 4096, 2, 4, 1, 10, 4312),
    ("Nemotron-340B", 128, 32, 1, 4096, 8, 8, 1, 12, 326),
]
# GPT-3 shapes of NeMo-Framework-Launcher launcher_scripts/conf/training/gpt3/{5b,20b,175b}*.yaml
# (layers, hidden, heads; ffn 4h); Nemotron-3 8B/22B of conf/training/nemotron/nemotron_{8b,22b}.yaml
# (MHA, squared-ReLU, ffn 4h); Nemotron-4 340B as in nemotron_rows
NEMO_GPT3 = {"GPT3-5B": (24, 4096, 32), "GPT3-20B": (44, 6144, 48), "GPT3-175B": (96, 12288, 96)}
NEMO_NEMOTRON = {"Nemotron-8B": (32, 4096, 32, 32, 16384), "Nemotron-22B": (40, 6144, 48, 48, 24576),
                 "Nemotron-340B": (96, 18432, 96, 8, 73728)}


def nemo_perf_model(name, tp, hf):
    """The row's model. GPT-3 as the launcher's gpt3 yamls build it: learned positions, LayerNorm
    and biases, GELU, tied embeddings, hidden and attention dropout 0.1, GPT-2's 50,257 tokens
    padded to a multiple of 128 x tp (make_vocab_size_divisible_by). Llama 2 13B has Llama 2's
    published shapes (40 layers, hidden 5120, 40 heads, ffn 13824)."""
    if name in NEMO_GPT3:
        L, h, a = NEMO_GPT3[name]
        pad = 128 * tp
        return {"name": name.lower(), "layers": L, "hidden": h, "heads": a,
                "vocab": (50257 + pad - 1) // pad * pad, "seq_len": 2048, "activation": "gelu",
                "norm": "layernorm", "bias": True, "tied_embeddings": True,
                "position": "learned", "dropout": True}
    if name in NEMO_NEMOTRON:
        L, h, a, g, f = NEMO_NEMOTRON[name]
        return {"name": name.lower(), "layers": L, "hidden": h, "heads": a, "kv_heads": g,
                "ffn_hidden": f, "vocab": 256000, "seq_len": 4096, "activation": "relu",
                "norm": "layernorm", "position": "rotary", "bias": False,
                "tied_embeddings": False, "dropout": False}
    m = dict(hf("llama-2-7b"))  # LLAMA2-13B
    m.update(hidden_size=5120, intermediate_size=13824, num_attention_heads=40,
             num_key_value_heads=40, num_hidden_layers=40)
    return m


def nemo_perf_rows(hf):
    """The step is the batch's tokens over the reported tokens/s per GPU and the GPUs. The table
    gives the degrees, batch and micro-batch; the rest is the launcher's configuration of that
    period (NeMo-Framework-Launcher conf/training gpt3/*_fp8_performance.yaml,
    nemotron/nemotron_22b.yaml): FP8 (hybrid) GEMMs with 16-bit weights, Apex
    distributed_fused_adam with overlapped gradient reduction and parameter gathering
    (ZeRO-1) keeping bf16 weights with store_param_remainders (NeMo megatron_base_model.py,
    as for nemo-longseq-h100), sequence parallelism with tp and Transformer Engine's TP
    communication overlap (ub_tp_comm_overlap), GPT-3's selective recomputation
    (activations_checkpoint_granularity: selective) and bf16 gradient reduction
    (grad_sync_dtype: bf16), no recomputation and fp32 gradient reduction for the others
    (nemotron_22b.yaml and llama/llama2_13b.yaml set no grad_sync_dtype, and Apex's default is
    the optimizer's fp32), except Nemotron-340B, whose yaml runs Megatron-Core's distributed
    optimizer with bf16 gradients and bf16 optimizer states; cuDNN fused attention
    (Transformer Engine's Hopper default, assumed)."""
    out = []
    for (name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tps) in NEMO_PERF_ROWS:
        m = nemo_perf_model(name, tp, hf)
        gpt3 = name in NEMO_GPT3
        dp = gpus // (tp * pp * cp)
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                "mbs": mbs, "gbs": gbs, "seq": seq, "recompute": "selective" if gpt3 else "none",
                "sp": tp > 1, "zero": 1, "dtype": "fp8", "overlap": True, "overlap_tp": tp > 1,
                "flash_attn": True, "attn_impl": "cudnn"}
        if name == "Nemotron-340B":
            # nemotron_340b.yaml: Megatron-Core's distributed optimizer with bf16 gradient
            # reduction and bf16 optimizer states (optim: mcore_distributed_optim,
            # grad_sync_dtype bf16, dtype bf16)
            plan["grad_reduce"] = "bf16"
            plan["optim_dtype"] = "bf16"
        else:
            plan["param_remainders"] = True
        if gpt3:
            plan["grad_reduce"] = "bf16"
        step = gbs * seq / (tps * gpus)
        cite = (NEMO_PERF % (name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tps) +
                "; step = GBS x sequence / (tokens/s per GPU x GPUs) = %.3f s (the launcher's "
                "configuration of the period otherwise: tools/oos_sources.py nemo_perf_rows)"
                % step)
        out.append(dgx_row("nemo-perf-h100", cite, name.lower(), m, plan, gpus, step,
                                TOKENS_HOW))
    return out


# ---- Megatron-Bridge performance summaries (NeMo 25.11-26.06, DGX-H100) ---------------------------
MBRIDGE = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @4ab94df, NeMo %s "
           "container, DGX-H100 pre-training: %s, %d GPUs, %s, GBS %d MBS %d, sequence %d, "
           "FSDP %d TP %d PP %d CP %d VP %d EP %d, %d tokens/s per GPU")
# (container, model, gpus, precision, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, tokens/s per GPU):
# every DGX-H100 pre-training row of the 25.11 to 26.06 tables but Nemotron 3 Nano (a hybrid
# Mamba model autoplan does not express) and three rows that cannot be taken as they stand:
# 25.11's GPT-OSS 120B (PP 4 with 64 GPUs, GBS 512 and MBS 4 makes 8 accumulation steps, the
# row says GA 2, the B200 row's pipeline-free figure), and Qwen3 30B-A3B in 25.11 (5275 tokens/s,
# where 25.09 measured the same layout at 10494) and in 26.02 (5113, where 26.02.01 measured
# the same configuration at 9058): container regressions the next release undid, not the
# hardware's. "FP8" is the H100 recipes' FP8 current scaling.
MBRIDGE_ROWS = [
    ("25.11", "LLAMA3_8B", 8, "fp8", 128, 1, 8192, 8, 1, 1, 1, 1, 1, 14451),
    ("25.11", "LLAMA3_70B", 64, "fp8", 128, 1, 8192, 0, 4, 8, 1, 5, 1, 1602),
    ("25.11", "LLAMA3.1_405B", 1024, "fp8", 512, 1, 8192, 0, 8, 8, 2, 8, 1, 292),
    ("25.11", "Qwen3_235B_a22B", 256, "fp8", 2048, 1, 4096, 0, 2, 8, 1, 4, 32, 1575),
    ("26.02", "LLAMA3_70B", 64, "fp8", 256, 1, 8192, 0, 4, 8, 1, 5, 1, 1621),
    ("26.02", "LLAMA3.1_405B", 1024, "fp8", 1536, 1, 8192, 0, 8, 8, 2, 8, 1, 311),
    ("26.02", "GPT_OSS_120B", 64, "bf16", 1280, 1, 4096, 0, 1, 4, 1, 1, 8, 5993),
    ("26.02", "Qwen3_235B_a22B", 256, "fp8", 8192, 1, 4096, 0, 2, 8, 1, 4, 32, 1633),
    ("26.02.01", "LLAMA3_70B", 64, "fp8", 256, 1, 8192, 0, 4, 8, 1, 5, 1, 1639),
    ("26.02.01", "GPT_OSS_120B", 64, "bf16", 1280, 1, 4096, 0, 1, 4, 1, 1, 8, 5984),
    ("26.02.01", "Qwen3_30B_a3B", 16, "fp8", 1024, 1, 4096, 0, 1, 2, 1, 12, 8, 9058),
    ("26.02.01", "Qwen3_235B_a22B", 256, "fp8", 8192, 1, 4096, 0, 2, 8, 1, 4, 32, 1611),
    ("26.04", "LLAMA3_70B", 64, "fp8", 256, 1, 8192, 0, 4, 8, 1, 5, 1, 1633),
    ("26.04", "GPT_OSS_120B", 64, "bf16", 1280, 1, 4096, 0, 1, 4, 1, 1, 8, 5810),
    ("26.04", "Qwen3_30B_a3B", 16, "fp8", 1024, 1, 4096, 0, 1, 1, 1, 1, 16, 8901),
    ("26.04", "Qwen3_235B_a22B", 256, "fp8", 8192, 1, 4096, 0, 2, 8, 1, 4, 32, 1686),
    ("26.04.01", "LLAMA3_70B", 64, "fp8", 256, 1, 8192, 0, 4, 8, 1, 5, 1, 1664),
    ("26.04.01", "LLAMA3.1_405B", 1024, "fp8", 1536, 1, 8192, 0, 8, 8, 2, 8, 1, 328),
    ("26.04.01", "GPT_OSS_120B", 64, "bf16", 1280, 1, 4096, 0, 1, 4, 1, 1, 8, 5824),
    ("26.04.01", "Qwen3_30B_a3B", 16, "fp8", 1024, 1, 4096, 0, 1, 1, 1, 1, 16, 8960),
    ("26.04.01", "Qwen3_235B_a22B", 256, "fp8", 8192, 1, 4096, 0, 2, 8, 1, 4, 32, 1712),
    ("26.06", "LLAMA3.1_405B", 1024, "fp8", 1536, 1, 8192, 0, 8, 8, 2, 8, 1, 326),
    ("26.06", "Qwen3_30B_a3B", 16, "fp8", 1024, 1, 4096, 0, 1, 1, 1, 1, 16, 8826),
]


def mbridge_model(name, hf):
    """Hugging Face configurations: Llama 3 / 3.1 from examples/models, GPT-OSS 120B and Qwen3
    30B-A3B from tests/data/hf, Qwen3 235B-A22B as Qwen/Qwen3-235B-A22B's config.json states it
    (94 layers, hidden 4096, 64 query and 4 key-value heads of 128, 128 experts of 1536 with 8
    per token, 151,936 tokens; Qwen3 30B-A3B's file with those values)."""
    here = os.path.dirname(os.path.abspath(__file__))
    tdata = os.path.join(here, "..", "tests", "data", "hf")
    if name == "LLAMA3_8B":
        return dict(hf("llama-3-8b"))
    if name == "LLAMA3_70B":
        return dict(hf("llama-3-70b"))
    if name == "LLAMA3.1_405B":
        return dict(hf("llama-3.1-405b"))
    if name == "GPT_OSS_120B":
        return json.load(open(os.path.join(tdata, "gpt-oss-120b.json")))
    m = json.load(open(os.path.join(tdata, "qwen3-30b-a3b.json")))
    if name == "Qwen3_235B_a22B":
        m.update(hidden_size=4096, num_hidden_layers=94, num_attention_heads=64,
                 num_key_value_heads=4, moe_intermediate_size=1536, intermediate_size=12288,
                 num_experts=128, num_experts_per_tok=8)
    return m


def mbridge_rows(hf):
    """The step is the batch's tokens over the reported tokens/s per GPU and the GPUs. The table
    gives degrees, batch, micro-batch and precision; the rest follows the repository's H100
    performance recipes (src/megatron/bridge/perf_recipes/{llama,gpt_oss,qwen}/h100/*.py and
    _common.py @4ab94df, the containers' own recipes assumed alike): Megatron-Core's distributed
    optimizer (ZeRO-1; Megatron-FSDP, ZeRO-3, where the FSDP column is set) with overlapped
    reduction and gathering, bf16 gradient reduction (_perf_precision: grad_reduce_in_fp32
    False), FP8 current scaling with FP8 weights (bf16_with_fp8_current_scaling_mixed:
    fp8_param_gather), sequence parallelism with tp and Transformer Engine's TP overlap, cuDNN
    fused attention (TP overlap but for Qwen3 235B, whose recipe turns it off), no
    recomputation (the Llama 70B/405B and Qwen3 recipes; GPT-OSS's
    recomputes its norms and the expert activation, cheap and not expressed; Llama 3 8B's FSDP
    recipe is taken without recomputation). Stage splits: Llama 3 70B's
    pipeline_model_parallel_layout "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL" (llama/h100/llama3.py), and
    for Llama 3.1 405B (126 layers) and Qwen3 235B (94) over pp x vp chunks the split that counts
    the embedding and the loss as a layer each (account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split), the only even one (assumed). MoE runs force-balance
    their routing (moe_router_force_load_balancing), as autoplan prices every expert."""
    out = []
    for (ver, name, gpus, dt, gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep, tps) in MBRIDGE_ROWS:
        m = mbridge_model(name, hf)
        dp = gpus // (tp * pp * cp)
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                "mbs": mbs, "gbs": gbs, "seq": seq, "recompute": "none", "sp": tp > 1,
                "zero": 3 if fsdp > 1 else 1, "dtype": dt, "overlap": True,
                "overlap_tp": tp > 1, "flash_attn": True, "attn_impl": "cudnn",
                "grad_reduce": "bf16"}
        if dt == "fp8":
            plan["fp8_recipe"] = "tensorwise"  # the recipes' FP8 current scaling
        if ep > 1:
            plan["ep"] = ep
        if dt == "fp8":
            plan["fp8_params"] = True
        if name == "LLAMA3_70B":
            plan["stage_layers"] = [2] + [2] * 34 + [3] + [2] * 3 + [1]
        elif name == "LLAMA3.1_405B":
            plan["stage_layers"] = [1] + [2] * 62 + [1]
        elif name == "Qwen3_235B_a22B":
            plan["stage_layers"] = [2] + [3] * 30 + [2]
            # qwen/h100/qwen3_moe.py: CommOverlapConfig(tp_comm_overlap=False, ...)
            plan["overlap_tp"] = False
        step = gbs * seq / (tps * gpus)
        cite = (MBRIDGE % (ver, name, gpus, dt.upper(), gbs, mbs, seq, fsdp, tp, pp, cp, vp, ep,
                           tps) +
                "; step = GBS x sequence / (tokens/s per GPU x GPUs) = %.3f s (the H100 "
                "recipes' settings otherwise: tools/oos_sources.py mbridge_rows)" % step)
        out.append(dgx_row("megatron-bridge-h100", cite, name.lower(), m, plan, gpus,
                                step, TOKENS_HOW))
    return out


# ---- Megatron-Bridge performance summaries on Blackwell (NeMo 25.11, 26.02) -------------------
MBRIDGE_BW = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @0a25f91, NeMo %s "
              "container, %s pre-training: %s, %d GPUs, %s, GBS %d MBS %d, sequence %d, TP %d PP %d "
              "VP %d EP %d, %d tokens/s per GPU")
# (container, system, model, gpus, precision, gbs, mbs, seq, tp, pp, vp, ep, tokens/s per GPU):
# the archive's DGX-GB200 and DGX-B200 rows but the B200 cross-check's (tools/make_validation.py,
# the dense FP8-CS B200 rows the Blackwell GEMM efficiency is fitted on) and those autoplan does
# not express: NVFP4, Llama 3.1 405B's MXFP8 row of 26.02 (PP 16 x VP 8 = 128 chunks for 126
# layers, the embedding and the loss: chunks without a layer), Llama 3 70B under Megatron-FSDP (its GB200 recipes offload
# 20-40 layers' activations to the Grace CPU: perf_recipes/llama/gb200/llama3.py
# cpu_offloading_num_layers), DeepSeek-V3 and Qwen3 235B (pipeline layouts the table does not
# state), and GPT-OSS 120B (its recipes recompute the norms and the expert activation, which
# autoplan does not express; at the micro-batch of 4 of four of its five Blackwell rows the
# activations that recompute frees decide whether the run fits: priced without it, the B200's
# 25.11 row is predicted above the GPU's memory). "FP8" in 26.02 is FP8 current scaling, as the
# 25.11 rows name it.
MBRIDGE_BW_ROWS = [
    ("25.11", "DGX-GB200", "LLAMA3_8B", 8, "fp8", 128, 2, 8192, 1, 1, 1, 1, 31508),
    ("25.11", "DGX-GB200", "LLAMA3.1_405B", 256, "fp8", 1536, 1, 8192, 4, 16, 4, 1, 813),
    ("26.02", "DGX-GB200", "LLAMA3.1_405B", 256, "fp8", 1536, 1, 8192, 4, 16, 4, 1, 793),
    # MXFP8 (the 25.11 tables' parenthesised "FP8-MX" figures, the 26.02 table's "MXFP8" rows):
    # the B200 rows are the cross-check's runs at the other recipe, in no fit
    ("25.11", "DGX-GB200", "LLAMA3_8B", 8, "mxfp8", 128, 2, 8192, 1, 1, 1, 1, 29789),
    ("25.11", "DGX-B200", "LLAMA3_8B", 8, "mxfp8", 128, 2, 8192, 1, 1, 1, 1, 29521),
    ("25.11", "DGX-B200", "LLAMA3.1_405B", 128, "mxfp8", 64, 1, 8192, 4, 8, 8, 1, 624),
    ("26.02", "DGX-GB200", "LLAMA3_70B", 64, "mxfp8", 256, 1, 8192, 2, 4, 5, 1, 3613),
]


def mbridge_blackwell_rows(hf):
    """As mbridge_rows (the H100 rows of the same pages), with the GB200 recipes' settings:
    Llama 3.1 405B's 126 layers over pp x vp = 64 chunks split counting the embedding and the
    loss as a layer each (the H100 rows' 8 x 8 has the same 64 chunks). DGX-GB200: the NVL72
    rack, 64 of its 72 GPUs used per rack (assumed: 256 GPUs are four racks of 64), one 400 Gb/s
    NIC per GPU. The step is the batch's tokens over the reported tokens/s per GPU and the
    GPUs."""
    out = []
    for (ver, system, name, gpus, prec, gbs, mbs, seq, tp, pp, vp, ep, tps) in MBRIDGE_BW_ROWS:
        m = mbridge_model(name, hf)
        # the B200 405B runs the cross-check's layout, context parallelism 2 (the table's CP)
        cp = 2 if system == "DGX-B200" and name == "LLAMA3.1_405B" else 1
        dp = gpus // (tp * pp * cp)
        dt = "bf16" if prec == "bf16" else "fp8"
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                "mbs": mbs, "gbs": gbs, "seq": seq, "recompute": "none", "sp": tp > 1,
                "zero": 1, "dtype": dt, "overlap": True, "overlap_tp": tp > 1,
                "flash_attn": True, "attn_impl": "cudnn", "grad_reduce": "bf16"}
        if dt == "fp8":
            plan["fp8_recipe"] = "mxfp8" if prec == "mxfp8" else "tensorwise"
            plan["fp8_params"] = True
        if ep > 1:
            plan["ep"] = ep
        if name == "LLAMA3.1_405B":
            plan["stage_layers"] = [1] + [2] * 62 + [1]
        gb = system == "DGX-GB200"
        step = gbs * seq / (tps * gpus)
        cite = (MBRIDGE_BW % (ver, system, name, gpus, prec.upper(), gbs, mbs, seq, tp, pp, vp,
                              ep, tps) +
                "; step = GBS x sequence / (tokens/s per GPU x GPUs) = %.3f s (settings: "
                "tools/oos_sources.py mbridge_blackwell_rows)" % step)
        row = dgx_row("megatron-bridge-blackwell", cite, name.lower(), m, plan, gpus, step,
                      TOKENS_HOW, gpu="gb200" if gb else "b200", network_bw="400Gb/s")
        row["gpus_per_node"] = 64 if gb else 8
        out.append(row)
    return out


# ---- InternLM: its 7B model under its own trainer on A100 ------------------------------------
INTERNLM = ("InternLM/InternLM doc/en/train_performance.md @20fe5ac, FLOPS Testing (tp 1, zero1 8, "
            "pack_sample_into_one True, bf16, A100-SXM4-80GB, 4 x 100Gb RoCE per node): activation "
            "checkpointing %s, %d GPUs, sequence 2048, micro_bsz %d, micro_num %d, %d tokens/s per "
            "GPU; step = micro_bsz x micro_num x GPUs x 2048 / (tokens/s per GPU x GPUs) = %.3f s")
INTERNLM_ROWS = [
    # (activation checkpointing, GPUs, micro_bsz, micro_num, tokens/s per GPU)
    (True, 8, 8, 1, 3314), (True, 16, 8, 1, 3268), (True, 32, 8, 1, 3323), (True, 64, 8, 1, 3217),
    (True, 128, 8, 1, 3260), (True, 256, 8, 1, 3215), (True, 512, 8, 1, 3199),
    (True, 1024, 8, 1, 3163), (True, 512, 4, 1, 2963), (True, 1024, 2, 1, 2341),
    (True, 1024, 4, 1, 2796),
    (False, 8, 2, 4, 4103), (False, 16, 2, 4, 3939), (False, 32, 2, 4, 3919),
    (False, 64, 2, 4, 3944), (False, 128, 2, 4, 3928), (False, 256, 2, 4, 3920),
    (False, 512, 2, 4, 3900), (False, 1024, 2, 4, 3625), (False, 512, 2, 2, 3084),
    (False, 1024, 2, 1, 2346), (False, 1024, 2, 2, 2817),
]


def internlm_rows():
    """InternLM-7B as configs/7B_sft.py builds it: 32 layers, hidden 4096, 32 heads, MLP_RATIO 8/3
    rounded up to a multiple of 256 (internlm/model/linear.py FeedForward: 11008), vocabulary
    103168, RMSNorm, rotary positions, untied embeddings (biases on the attention projections
    only: left out, < 0.01% of the parameters). The trainer of the time (doc/en/install.md:
    PyTorch 1.13.1, Flash-Attention v1.0.5 with its fused dense, rotary, layer-norm and
    cross-entropy kernels, Apex 23.05): attention is FlashAttention 1, the loss flash-attn's
    CrossEntropyLoss; the MLP's SiLU and product run as two eager kernels (FeedForward.forward),
    not expressed. Its ZeRO-1 as internlm/solver/optimizer/hybrid_zero_optim.py runs it at that
    commit: zero1 = 8 shards the optimizer states within each node ("zero_group": 8); the
    gradients are all-reduced over every data-parallel rank (reduce_tensor with no destination,
    ParallelMode.DATA) in bf16, from hooks during the last micro-batch's backward, in buckets of
    reduce_bucket_size = 512 x 1024 x 1024 gradient elements (it compares the bucket with their
    numel; "dp_bucket"), not Megatron-LM's; after the step each rank broadcasts its updated
    shard within the node, not overlapped ("TODO: support broadcast overlap",
    broadcast_params(overlap=False); "overlap_param": false). The same page's throughput table
    is left out: its runs set pack_sample_into_one False, attention within each packed sample,
    whose lengths it does not give."""
    model = {"name": "internlm-7b", "layers": 32, "hidden": 4096, "heads": 32, "vocab": 103168,
             "seq_len": 2048, "ffn_hidden": 11008, "activation": "swiglu", "norm": "rmsnorm",
             "position": "rotary", "tied_embeddings": False, "bias": False, "dropout": False}
    out = []
    for (ckpt, gpus, mbs, micro, tgs) in INTERNLM_ROWS:
        gbs = mbs * micro * gpus
        step = gbs * 2048 / (tgs * gpus)
        plan = {"trainer": "megatron", "tp": 1, "pp": 1, "dp": gpus, "cp": 1, "vp": 1,
                "mbs": mbs, "gbs": gbs, "seq": 2048, "recompute": "full" if ckpt else "none",
                "sp": False, "zero": 1, "dtype": "bf16", "overlap": True, "flash_attn": True,
                "attn_impl": "fa1", "grad_reduce": "bf16", "loss": "fused",
                "dp_bucket": 512 * 1024 * 1024, "zero_group": 8, "overlap_param": False}
        out.append({"source": "internlm-a100",
                    "cite": INTERNLM % ("on" if ckpt else "off", gpus, mbs, micro, tgs, step),
                    "model_name": "internlm-7b", "model": model, "plan": plan,
                    "gpu": "a100-sxm4-80g", "gpus": gpus, "gpus_per_node": 8,
                    "network_bw": "50Gb/s", "metric": "step_s", "measured": step,
                    "how": TOKENS_HOW})
    return out


# ---- MLPerf Training: GPT-3 175B, the benchmark's model and the submissions' common plan -----
def mlperf_gpt3_model(tp):
    """GPT-3 175B as the benchmark defines it (mlperf_rows), its vocabulary padded to a multiple
    of 128 x tp."""
    pad = 128 * tp
    return {"name": "gpt3-175b", "layers": 96, "hidden": 12288, "heads": 96,
            "vocab": (50257 + pad - 1) // pad * pad, "seq_len": 2048, "activation": "gelu",
            "norm": "layernorm", "bias": True, "tied_embeddings": True, "position": "learned",
            "dropout": False}


def mlperf_gpt3_plan(tp, pp, vp, dp, mbs, gbs, dtype_extra=None, tail=None):
    """The submissions' plan (mlperf_rows): FP8, sequence parallelism, TP overlap, the
    distributed optimizer with overlapped bf16 reductions, no recomputation, cuDNN attention;
    dtype_extra follows the dtype, tail ends the plan (the rows' keys in the order they have
    always had)."""
    plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": vp,
            "mbs": mbs, "gbs": gbs, "seq": 2048, "recompute": "none", "sp": True, "zero": 1,
            "dtype": "fp8"}
    plan.update(dtype_extra or {})
    plan.update({"overlap": True, "overlap_tp": True, "flash_attn": True, "attn_impl": "cudnn",
                 "grad_reduce": "bf16"})
    plan.update(tail or {})
    return plan


def mlperf_gpt3_row(source, cite, nodes, gbs, ga, pp, vp, medians, how, dtype_extra=None,
                    tail=None, gpu="h100-sxm"):
    """One GPT-3 run of an MLPerf submission (TP 4, 8 GPUs a node, 400 Gb/s per GPU): its plan
    from the nodes, batch, accumulation, pp and vp (mlperf_gpt3_plan), its step the middle of
    the runs' medians."""
    tp = 4
    gpus = nodes * 8
    dp = gpus // (tp * pp)
    mbs = gbs // (dp * ga)
    assert mbs * dp * ga == gbs and 96 % (pp * vp) == 0
    plan = mlperf_gpt3_plan(tp, pp, vp, dp, mbs, gbs, dtype_extra, tail)
    row = dgx_row(source, cite, "gpt3-175b", mlperf_gpt3_model(tp), plan, gpus,
                       sorted(medians)[1], how)
    row["gpu"] = gpu
    return row


# ---- MLPerf Training v3.1: NVIDIA's GPT-3 175B on Eos (DGX H100) ---------------------------------
MLPERF = ("mlcommons/training_results_v3.1 @d06288b NVIDIA/results/%s/gpt3/result_{0,1,2}.txt "
          "(MLPerf Training v3.1, closed division): %d x DGX H100, logged global_batch_size %d and "
          "gradient_accumulation_steps %d, train_step_timing median of each run %s s (%d steps "
          "each); configuration NVIDIA/benchmarks/gpt3/implementations/pytorch/%s")
# (results directory, nodes, gbs, gradient accumulation, the three runs' median
# train_step_timing, steps logged per run, config file): read off the logs' MLLOG lines. The
# 64-node run logs the 96-node config's batch (MINIBS 128 x dp 16 = 2048; its config's
# DGXNNODES defaults to 96 and is overridden).
MLPERF_ROWS = [
    ("eos_n64_ngc23.09_nemo", 64, 2048, 128, (11.045, 11.055, 11.054), 288,
     "config_DGXH100_96x8x128x4x8_mbs1.sh"),
    ("eos_n96_ngc23.09_nemo", 96, 3072, 128, (11.072, 11.078, 11.075), 200,
     "config_DGXH100_96x8x128x4x8_mbs1.sh"),
    ("eos-dfw_n512_ngc23.09_nemo", 512, 2048, 16, (1.608, 1.608, 1.610), 288,
     "config_DGXH100_512x8x16x4x8_mbs1.sh"),
    ("eos-dfw_n768_ngc23.09_nemo", 768, 3072, 16, (1.616, 1.615, 1.615), 200,
     "config_DGXH100_768x8x16x4x8_mbs1.sh"),
    ("eos-dfw_n1024_ngc23.09_nemo", 1024, 4096, 16, (1.619, 1.619, 1.619), 156,
     "config_DGXH100_1024x8x16x4x8_mbs1.sh"),
    ("eos-dfw_n1280_ngc23.09_nemo", 1280, 2560, 8, (0.926, 0.925, 0.926), 230,
     "config_DGXH100_1280x8x8x4x8_mbs1.sh"),
    ("eos-dfw_n1344_ngc23.09_nemo", 1344, 2688, 8, (0.930, 0.930, 0.930), 220,
     "config_DGXH100_1344x8x8x4x8_mbs1.sh"),
]


# Azure's submission to the same round (Azure+NVIDIA, 1344 ND H100 v5 VMs: eight H100 SXM on
# NVLink and eight 400 Gb/s Quantum-2 InfiniBand CX7 each, systems/ND_H100_v5_n1344_pytorch.json)
# ran NVIDIA's implementation with the same configuration file (it differs in WALLTIME_MINUTES
# only): its three runs' median train_step_timing, 286 steps logged each
MLPERF_AZURE = ("mlcommons/training_results_v3.1 @d06288b Azure+NVIDIA/results/"
                "ND_H100_v5_n1344_pytorch/gpt3/result_{0,1,2}.txt (MLPerf Training v3.1, closed "
                "division): 1344 x ND H100 v5 (8 H100 SXM, 8 x 400 Gb/s InfiniBand), logged "
                "global_batch_size 2688 and gradient_accumulation_steps 8, train_step_timing "
                "median of each run %s s (286 steps each); configuration Azure+NVIDIA/benchmarks/"
                "gpt3/implementations/pytorch/config_DGXH100_1344x8x8x4x8_mbs1.sh")
MLPERF_AZURE_MEDIANS = (0.9432, 0.9430, 0.9440)


def mlperf_rows():
    """GPT-3 175B as the benchmark defines it and conf/custom.yaml builds it: 96 layers, hidden
    12288, 96 heads, ffn 4h, sequence 2048, no dropout (hidden_dropout and attention_dropout
    0.0), LayerNorm (layernorm1p), NeMo's GPT defaults otherwise (learned positions, biases,
    GELU, tied embeddings); its C4 SentencePiece vocabulary taken as GPT-2's 50,257 padded to a
    multiple of 128 x tp (assumed). The plan: TP 4 PP 8 (the config's TENSOR/PIPELINE_MODEL_
    PARALLEL), micro-batch 1, interleaved 12 virtual stages (custom.yaml's INTERLEAVED_PIPELINE
    default), sequence parallelism, TP communication overlap (TP_COMM_OVERLAP=True), no
    activation checkpointing (ACT_CKPT_* null), FP8 hybrid GEMMs with 16-bit weights
    (config_fp8.sh), Apex distributed_fused_adam with overlapped gradient reduction and
    parameter gathering in bf16 (conf/optim/distributed_fused_adam.yaml: grad_sync_dtype bf16)
    keeping bf16 weights with store_param_remainders (as nemo_perf_rows); cuDNN fused attention
    (Transformer Engine's Hopper default, assumed). The step is the middle of the three runs'
    medians."""
    how = "logged train_step_timing, median over the run"
    rem = {"param_remainders": True}
    out = []
    for (d, nodes, gbs, ga, medians, steps, cfg) in MLPERF_ROWS:
        assert gbs == ga * nodes * 8 // 32  # micro-batch 1
        cite = MLPERF % (d, nodes, gbs, ga, "/".join("%.3f" % x for x in medians), steps, cfg)
        out.append(mlperf_gpt3_row("mlperf-gpt3-h100", cite, nodes, gbs, ga, 8, 12, medians, how,
                                   tail=rem))
    cite = MLPERF_AZURE % "/".join("%.4f" % x for x in MLPERF_AZURE_MEDIANS)
    out.append(mlperf_gpt3_row("mlperf-gpt3-h100", cite, 1344, 2688, 8, 8, 12,
                               MLPERF_AZURE_MEDIANS, how, tail=rem))
    return out


# ---- MLPerf Training v3.0: GPT-3 175B on DGX H100 (NVIDIA) and HGX H100 (CoreWeave) -------------
MLPERF30 = ("mlcommons/training_results_v3.0 @63e326c %s/results/%s/gpt3/result_{0,1,2}.txt "
            "(MLPerf Training v3.0, closed division): %d x %s, logged global_batch_size %d and "
            "gradient_accumulation_steps %d, train_step_timing median of each run %s s (%s steps "
            "logged); configuration %s/benchmarks/gpt3/implementations/pytorch/%s")
# (submitter, results directory, nodes, system, gbs, gradient accumulation, the three runs'
# median train_step_timing, steps logged per run, config file): read off the logs' MLLOG lines.
MLPERF30_ROWS = [
    ("NVIDIA", "dgxh100_n64_nemo", 64, "DGX H100", 2048, 128, (12.0827, 12.0713, 12.0741),
     "288/288/288", "config_DGXH100_64x8x128x4x8_mbs1.sh"),
    ("NVIDIA", "dgxh100_n96_nemo", 96, "DGX H100", 3072, 128, (12.1282, 12.1274, 12.1236),
     "192/200/200", "config_DGXH100_96x8x128x4x8_mbs1.sh"),
    ("NVIDIA_CoreWeave", "coreweave_hgxh100_n96_ngc23.04_pytorch", 96, "HGX H100", 3072, 128,
     (12.3223, 12.2857, 12.3049), "200/200/200", "config_DGXH100_96x8x128x4x8_mbs1.sh"),
    ("NVIDIA_CoreWeave", "coreweave_hgxh100_n192_ngc23.04_pytorch", 192, "HGX H100", 3072, 64,
     (6.3264, 6.3573, 6.3397), "200/216/200", "config_DGXH100_192x8x64x4x8_mbs1.sh"),
    ("NVIDIA_CoreWeave", "coreweave_hgxh100_n448_ngc23.04_pytorch", 448, "HGX H100", 2688, 24,
     (2.5943, 2.6005, 2.6021), "220/220/220", "config_DGXH100_448x8x24x4x8_mbs1.sh"),
]


def mlperf30_rows():
    """The v3.1 rows' model and plan (mlperf_rows) under the v3.0 implementation, which sets
    the same (config_common.sh: TP 4, PP 8, INTERLEAVED_PIPELINE 12, micro-batch 1, no
    activation checkpointing, the distributed optimizer; config_fp8.sh: FP8 hybrid;
    config_tp_h100.sh: TP_COMM_OVERLAP True; conf/megatron_gpt_config.yaml: sequence
    parallelism, overlap_p2p_comm, distributed_fused_adam with overlapped grad and param sync in
    100 MB buckets and grad_sync_dtype bf16, no store_param_remainders, layernorm1p, learned
    positions, biases, tied embeddings, no dropout) on NeMo 1.17 (PyTorch 23.04). CoreWeave's
    HGX H100 nodes have the DGX H100's eight NVSwitch-connected H100 SXM and 400 Gb/s
    InfiniBand per GPU (assumed, as DGX H100's; the submission states HGX H100). cuDNN fused
    attention assumed as in v3.1."""
    out = []
    for (sub, d, nodes, system, gbs, ga, medians, steps, cfg) in MLPERF30_ROWS:
        assert gbs == ga * nodes * 8 // 32  # micro-batch 1
        cite = MLPERF30 % (sub, d, nodes, system, gbs, ga,
                           "/".join("%.4f" % x for x in medians), steps, sub, cfg)
        out.append(mlperf_gpt3_row("mlperf30-gpt3-h100", cite, nodes, gbs, ga, 8, 12, medians,
                                   "logged train_step_timing, median over the run"))
    return out


# ---- MLPerf Training v4.0: NVIDIA's GPT-3 175B on Eos, NeMo 24.04 ------------------------------
MLPERF40 = ("mlcommons/training_results_v4.0 @6fe9543 NVIDIA/results/%s/gpt3/result_{0,1,2}.txt "
            "(MLPerf Training v4.0, closed division): %d x DGX H100, logged global_batch_size %d "
            "and gradient_accumulation_steps %d, step time (block_stop - block_start) x "
            "global_batch_size x 2048 / epoch_count over each run's training blocks (evaluation "
            "excluded), median of each run %s s (%s blocks of %d steps); configuration "
            "NVIDIA/benchmarks/gpt3/implementations/nemo/%s")
# (results directory, nodes, gbs, gradient accumulation, pp, vp, mbs, the three runs' median
# step, each run's training blocks, steps per block, config file): read off the logs' MLLOG
# lines. The 64-node run logs a batch of 2304 (the config's MINIBS 128 overridden to 144 =
# 2 x 72).
MLPERF40_ROWS = [
    ("eos_n64_ngc24.04_nemo", 64, 2304, 72, 8, 4, 2, (10.903, 10.983, 10.982), "24/23/23", 11,
     "config_DGXH100_64x8x128x4x8_mbs2.sh"),
    ("eos-dfw_n1344_ngc24.04_nemo", 1344, 2688, 6, 6, 8, 1, (0.9207, 0.9206, 0.9210), "22/22/22", 10,
     "config_DGXH100_1344x8x6x4x6_mbs1_cg.sh"),
    ("eos-dfw_n1452_ngc24.04_nemo", 1452, 2904, 6, 6, 8, 1, (0.9224, 0.9214, 0.9214), "23/23/23", 9,
     "config_DGXH100_1452x8x6x4x6_mbs1_cg.sh"),
]


def mlperf40_rows():
    """The v3.1 rows' model (mlperf_rows) under the v4.0 implementation: config_common.sh sets
    FP8_PARAMS=True (FP8 weights gathered in FP8, so no bf16 parameter remainders) and
    NCCL SHARP for the data-parallel reductions (not modelled: autoplan prices the ring), the
    optimizer (conf/optim/distributed_fused_adam.yaml) reduces gradients in bf16 with
    overlapped gradient and parameter synchronisation in 200 MB buckets (BUCKET_CAP_MB; the
    bucket size is left to autoplan's Megatron default, as in the v3.1 rows), custom.yaml
    overlaps the interleaved schedule's point-to-point sends and keeps no activation
    checkpointing; the 1344- and 1452-node configs capture each layer in a CUDA graph
    (LAYER_CUDA_GRAPH=1; not modelled). cuDNN fused attention assumed as in v3.1."""
    out = []
    for (d, nodes, gbs, ga, pp, vp, mbs, medians, blocks, per_block, cfg) in MLPERF40_ROWS:
        assert mbs * (nodes * 8 // (4 * pp)) * ga == gbs and ga % pp == 0
        cite = MLPERF40 % (d, nodes, gbs, ga, "/".join("%g" % x for x in medians), blocks,
                           per_block, cfg)
        out.append(mlperf_gpt3_row("mlperf40-gpt3-h100", cite, nodes, gbs, ga, pp, vp, medians,
                                   "training-block time per step, median over the run",
                                   dtype_extra={"fp8_params": True}))
    return out


# ---- MLPerf Training v4.1: GPT-3 175B on DGX H100 (NVIDIA, NeMo 24.09) and OCI H100 (Oracle) ----
MLPERF41 = ("mlcommons/training_results_v4.1 @b87b9e3 %s/results/%s/gpt3/result_{0,1,2}.txt "
            "(MLPerf Training v4.1, closed division): %d x %s, logged global_batch_size %d and "
            "gradient_accumulation_steps %d, train_step_timing median of each run %s s (%s steps "
            "logged); configuration %s/benchmarks/gpt3/%s")
# (submitter, results directory, nodes, system, gbs, gradient accumulation, vp, the three runs'
# median train_step_timing, steps logged per run, config file): read off the logs' MLLOG lines
# and the configs' TENSOR/PIPELINE_MODEL_PARALLEL (4, 8), MICRO_BATCH_SIZE (2) and
# INTERLEAVED_PIPELINE. Oracle's BM.GPU.H100.8 nodes: eight H100 SXM on NVSwitch and 16 RoCE
# HCAs of 200 Gb/s (config_common.sh NCCL_IB_HCA lists 16 mlx5 devices; NCCL_IB_GID_INDEX 3,
# RoCE v2): 400 Gb/s per GPU, as a DGX H100's.
MLPERF41_ROWS = [
    ("NVIDIA", "eos_n32_ngc24.09_nemo", 32, "DGX H100", 2048, 128, 6,
     (18.3716, 18.3743, 18.4212), "300/288/288",
     "implementations/eos_n32_ngc24.09_nemo/config_DGXH100_32x8x256x4x8_mbs2.sh"),
    ("NVIDIA", "eos_n64_ngc24.09_nemo", 64, "DGX H100", 2048, 64, 6,
     (9.4931, 9.5542, 9.4963), "288/300/288",
     "implementations/eos_n64_ngc24.09_nemo/config_DGXH100_64x8x128x4x8_mbs2.sh"),
    ("Oracle", "1536xBM.GPU.H100.8", 192, "OCI BM.GPU.H100.8", 3072, 32, 4,
     (5.1546, 5.1704, 5.1723), "208/208/200",
     "DGXH100_128x8x64x4x8_mbs2/config_DGXH100_192x8x64x4x8_mbs2.sh"),
    ("Oracle", "3072xBM.GPU.H100.8", 384, "OCI BM.GPU.H100.8", 3072, 16, 4,
     (3.0497, 3.0407, 3.1025), "200/208/208",
     "DGXH100_384x8x32x4x8_mbs2/config_DGXH100_384x8x32x4x8_mbs2.sh"),
]


def mlperf41_rows():
    """The v4.0 rows' model and plan (mlperf40_rows) a software generation later (NeMo 24.09;
    Oracle ran the same implementation): config_common.sh sets FP8_PARAMS=True, the distributed
    optimizer and 200 MB buckets (the bucket size left to autoplan's Megatron default, as in the
    v3.1 and v4.0 rows), config_fp8.sh FP8 hybrid with amax reductions, the node configs TP
    communication overlap, micro-batch 2 and the interleaving above; no per-layer CUDA graphs
    (no _cg config) and no activation checkpointing. NVIDIA's Eos runs reduce over SHARP
    (NCCL_SHARP_GROUP_SIZE_THRESH; not modelled: autoplan prices the ring), Oracle's over RoCE
    without it. cuDNN fused attention assumed as in v3.1."""
    out = []
    for (sub, d, nodes, system, gbs, ga, vp, medians, steps, cfg) in MLPERF41_ROWS:
        assert gbs == 2 * ga * nodes * 8 // 32  # micro-batch 2
        cite = MLPERF41 % (sub, d, nodes, system, gbs, ga,
                           "/".join("%.4f" % x for x in medians), steps, sub, cfg)
        out.append(mlperf_gpt3_row("mlperf41-gpt3-h100", cite, nodes, gbs, ga, 8, vp, medians,
                                   "logged train_step_timing, median over the run",
                                   dtype_extra={"fp8_params": True}))
    return out


# MLPerf v4.1's one Blackwell GPT-3 run (NVIDIA's preview submission, "Nyx": 8 x DGX B200,
# B200-SXM-180GB, NVIDIA/systems/b200_n8_preview_nemo.json): the three runs' median
# train_step_timing, their steps logged, and the config's MINIBS 1024, VP 6, micro-batch 2
MLPERF41_B200 = ("mlcommons/training_results_v4.1 @b87b9e3 NVIDIA/results/b200_n8_preview_nemo/gpt3/"
                 "result_{0,1,2}.txt (MLPerf Training v4.1, closed division, preview): 8 x DGX "
                 "B200, logged global_batch_size 2048 and gradient_accumulation_steps 512, "
                 "train_step_timing median of each run %s s (288 steps each); configuration "
                 "NVIDIA/benchmarks/gpt3/implementations/b200_n8_preview_nemo/"
                 "config_DGXB200_8x8x1024x4x8_mbs2_cg.sh")
MLPERF41_B200_MEDIANS = (36.0459, 36.2336, 36.2686)


def mlperf41_b200_rows():
    """The v4.1 H100 rows' model and plan (mlperf41_rows: FP8 weights, TP 4 PP 8, micro-batch 2,
    VP 6) on 64 B200 with the DGX B200's 400 Gb/s per GPU (the catalog's reference node, 8
    ConnectX-7 of 400 Gb/s); its config also captures each layer in a CUDA graph
    (LAYER_CUDA_GRAPH=1; not modelled) and selects cuDNN fused attention (NVTE_FUSED_ATTN=1)."""
    cite = MLPERF41_B200 % "/".join("%.4f" % x for x in MLPERF41_B200_MEDIANS)
    return [mlperf_gpt3_row("mlperf41-gpt3-b200", cite, 8, 2048, 512, 8, 6, MLPERF41_B200_MEDIANS,
                            "logged train_step_timing, median over the run",
                            dtype_extra={"fp8_params": True}, gpu="b200")]


# ---- MLPerf Training v5.0: Llama 3.1 405B pre-training on Eos (DGX H100), NeMo 25.01 ------------
MLPERF50 = ("mlcommons/training_results_v5.0 @%s NVIDIA/results/eos-dfw_n%d_ngc25.01_nemo/"
            "llama31_405b/result_{0,1,2}.txt (MLPerf Training v5.0, closed division): %d x DGX "
            "H100, logged global_batch_size %d and gradient_accumulation_steps %d, train_step_time "
            "median of each run %s s (%s steps logged); configuration NVIDIA/benchmarks/"
            "llama31_405b/implementations/eos-dfw_n%d_ngc25.01_nemo/config_DGXH100_%dx8x%dxtp8pp8"
            "cp2.sh")
MLPERF50_COMMIT = "0fdc28f"
# (nodes, gbs, gradient accumulation, the three runs' median train_step_time, steps logged per
# run): read off the logs' MLLOG lines (tracked_stats train_step_time)
MLPERF50_ROWS = [
    (64, 1152, 288, (55.0855, 55.1408, 55.1272), "276/276/276"),
    (256, 1152, 72, (14.1993, 14.2198, 14.2158), "276/322/276"),
    (304, 1216, 64, (12.6958, 12.7059, 12.8569), "308/308/308"),
    (320, 1120, 56, (11.1803, 11.1678, 11.1578), "294/294/294"),
    (1024, 1536, 24, (5.1778, 5.1675, 5.1695), "245/245/245"),
]


def mlperf50_rows(hf):
    """Llama 3.1 405B as the benchmark defines it (the implementation's README: the paper's
    model with the Mixtral 8x22B tokenizer, 32,768 tokens, in place of its 128K vocabulary;
    sequence 8192, the logs' max_sequence_length), examples/models/llama-3.1-405b.json
    otherwise. The plan, from the node configs and config_common.sh: TP 8 PP 8 CP 2,
    interleaved 8 virtual stages, micro-batch 1, sequence parallelism with TP overlap, no
    activation checkpointing (ACT_CKPT_* null), FP8 hybrid with the delayed recipe (custom.yaml
    fp8_recipe default) and FP8 weights gathered in FP8 (FP8_PARAMS), Megatron-Core's
    distributed optimizer with overlapped reduction and gathering and bf16 gradient reduction
    (pretrain.py grad_reduce_in_fp32=False), the embedding and the loss counted as a layer each
    in the pipeline split (ASYM_PP_EMBED, ASYM_PP_LOSS: 126 + 2 over 64 chunks, one layer on
    the first and the last chunk, two on the others), expandable segments. The runs reduce over
    SHARP (not modelled: autoplan prices the ring). cuDNN fused attention (Transformer
    Engine's Hopper default, assumed)."""
    out = []
    tp, pp, cp, vp = 8, 8, 2, 8
    m = dict(hf("llama-3.1-405b"))
    m["vocab_size"] = 32768
    for (nodes, gbs, ga, medians, steps) in MLPERF50_ROWS:
        gpus = nodes * 8
        dp = gpus // (tp * pp * cp)
        assert dp * ga == gbs
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": cp, "vp": vp,
                "mbs": 1, "gbs": gbs, "seq": 8192, "recompute": "none", "sp": True, "zero": 1,
                "dtype": "fp8", "fp8_params": True, "fp8_recipe": "delayed", "overlap": True,
                "overlap_tp": True, "flash_attn": True, "attn_impl": "cudnn",
                "grad_reduce": "bf16", "stage_layers": [1] + [2] * 62 + [1]}
        step = sorted(medians)[1]
        cite = MLPERF50 % (MLPERF50_COMMIT, nodes, nodes, gbs, ga,
                           "/".join("%.4f" % x for x in medians), steps, nodes, nodes, gbs // dp)
        out.append(dgx_row("mlperf50-llama405b-h100", cite, "llama-3.1-405b", m, plan, gpus,
                                step, "logged train_step_time, median over the run"))
    return out


# ---- Megatron-Core MoE's own figures ---------------------------------------------------------
MCORE_MOE = "NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md"
MCORE_MOE_ROWS = [
    # (commit of the README, MCore version, TFLOP/s per GPU, container the README names)
    ("0b4c4cf", "v0.8", 438.0, "PyTorch 24.04, Transformer Engine 1.9"),
    ("022bcb5", "v0.9", 468.0, "PyTorch 24.09, Transformer Engine 1.11"),
]


def mcore_moe_rows(hf):
    """The README's opening states Mixtral 8x7B bf16 training at 438 TFLOP/s per GPU "as of
    MCore v0.8" (at 0b4c4cf) and at 468 with MCore v0.9 (at 022bcb5); both versions of the page
    give the one Mixtral 8x7B "reference parallel mapping of MCore v0.8": dropless, all-to-all
    dispatcher, BF16, 64 GPUs, sequence 4096, TP 1, EP 8, PP 4, VP 8, MBS 1, GBS 256,
    vocabulary 32K, on 8 x H100 80GB nodes with 8 x 400 Gbit/s InfiniBand, in the container
    each names. Assumed: each figure is of that mapping (v0.9's with the mapping unchanged),
    Megatron's FLOPs formula of those versions (llama_flops_per_token; the vocabulary 32000
    needs no padding at tp 1), and the page's example script's other settings (the distributed
    optimizer, overlapped gradient reduction and parameter gathering, grouped GEMM; v0.9's also
    fuses the permutations, which autoplan does not tell apart); Megatron-LM's default
    attention backend."""
    m = hf("mixtral-8x7b")
    gpus, seq, gbs = 64, 4096, 256
    flops = gbs * seq * llama_flops_per_token(m, seq)
    out = []
    for (commit, ver, tflops, container) in MCORE_MOE_ROWS:
        step = flops / (tflops * 1e12 * gpus)
        plan = {"trainer": "megatron", "tp": 1, "pp": 4, "dp": 16, "cp": 1, "ep": 8, "vp": 8,
                "mbs": 1, "gbs": gbs, "seq": seq, "recompute": "none", "sp": False, "zero": 1,
                "dtype": "bf16", "overlap": True, "flash_attn": True}
        cite = ("%s @%s: Mixtral 8x7B bf16 training at %.0f TFLOP/s per GPU (MCore %s, %s) on "
                "its reference mapping: 64 H100, sequence 4096, TP 1 EP 8 PP 4 VP 8, MBS 1, "
                "GBS 256, dropless all-to-all; step = Megatron's model FLOPs (%.4g per step) / "
                "(%.0f TFLOP/s x 64) = %.3f s" % (MCORE_MOE, commit, tflops, ver, container,
                                                  flops, tflops, step))
        out.append(dgx_row("megatron-core-moe-h100", cite, "mixtral-8x7b", m, plan, gpus,
                                step, "reported model TFLOP/s per GPU converted with Megatron's "
                                "FLOPs formula"))
    return out


# ---- NeMo Megatron on DGX A100 (2022) --------------------------------------------------------------
# NVIDIA/NeMo-Framework-Launcher (then NeMo Megatron's launcher, "BigNLP-Scripts") README.md
# section 7.1.2 "Training Performance Results": GPT-3 5B on 1-20 DGX A100 80GB nodes (table
# re-measured at b20f85d, 2022-06-03) and GPT-3 175B on 16, 32 and 128 nodes (added at d4317dd,
# 2022-07-14), tokens per second. DGX SuperPOD: 8 A100 80GB per node, 8 x 200 Gb/s HDR
# InfiniBand (200 Gb/s per GPU). The configuration is the launcher's conf/training/gpt3/*.yaml
# at those commits, with the node count the only change.
NEMO_A100 = "NVIDIA/NeMo-Framework-Launcher README.md @%s, 7.1.2 'Training Performance Results'"
# (commit, model, nodes, tokens/s)
NEMO_A100_ROWS = [("b20f85d", "GPT3-5B", n, t) for n, t in
                  ((1, 39543), (2, 79128), (5, 195047), (9, 344523), (10, 383500),
                   (18, 670254), (20, 731791))] + \
                 [("d4317dd", "GPT3-175B", n, t) for n, t in
                  ((16, 20642), (32, 38025), (128, 141306))]
# Left out: the table NeMo Megatron 22.08 put in their place (3579cdb, 2022-09-07; 5B at TP 1 and
# GBS 2048 on 1-32 nodes, 40345 to 1159288 tokens/s; 175B at TP 8 PP 8 and GBS 2048 on 8-128
# nodes, 7500 to 109684). Its runs use Apex's DistributedFusedAdam in its first release, whose
# gradient layout (16-bit gradients kept whole, fp32 shards) autoplan's memory model does not
# express: priced with Megatron's whole fp32 buffer the 5B runs on 1 and 2 nodes come out above
# 80 GB. And its 175B figures, 40% MFU at 8 nodes, contradict the July table's 55.6% at 16 for
# the same layout, per-GPU work and system, with no stated cause. What autoplan predicts for
# them, with ZeRO 1 and the gradient reduction overlapped (assumed): 5B 1.4-12% fast, 175B
# 25.5-27.4% fast at every node count.


def nemo_a100_rows(hf):
    """The step is the global batch's tokens over the reported tokens/s. The launcher's GPT-3
    configurations of the period: 5b.yaml @b20f85d, TP 2 PP 1, micro-batch 2, global batch 1440,
    no recomputation (activations_checkpoint_num_layers 0), no sequence parallelism; 175b.yaml
    @d4317dd, TP 8 PP 8, micro-batch 2, global batch 1536, sequence parallelism with selective
    recomputation (the 2022-07-13 configuration; the one before it, TP 8 PP 16 with every layer
    recomputed, would put the GPUs at 74% of peak for the 55.6% MFU measured at 16 nodes, far
    above the 52% of Narayanan 2021's recomputing A100 runs). Both: bf16 with megatron_amp_O2,
    Apex fused_adam without a distributed optimizer (ZeRO 0), fp32 main gradients all-reduced in
    fp32 (NeMo nemo/core/optim/optimizer_with_main_params.py), Megatron's fused softmax
    attention (no FlashAttention in NeMo of 2022), hidden and attention dropout 0.1, sequence
    2048, GPT-2's vocabulary (nemo_perf_model). The gradient all-reduce overlaps the backward
    only without pipelining (NeMo 22.05's "Asynchronous gradient all-reduce for GPT-3 ... with
    pipeline parallel size equal to 1"; megatron_gpt_model.py reduces after the pipeline
    otherwise). The backward's TP all-reduces run beside their GEMMs as the trainer prices them
    (Apex ColumnParallelLinear's asynchronous all-reduce, apex/transformer/tensor_parallel/
    layers.py since 365fdc1, with sequence parallelism since 3ff1a10, 2022-06-23)."""
    out = []
    for (commit, name, nodes, tps) in NEMO_A100_ROWS:
        big = name == "GPT3-175B"
        tp, pp, gbs = (8, 8, 1536) if big else (2, 1, 1440)
        gpus = 8 * nodes
        dp = gpus // (tp * pp)
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": 1,
                "mbs": 2, "gbs": gbs, "seq": 2048, "recompute": "selective" if big else "none",
                "sp": big, "zero": 0, "dtype": "bf16", "overlap": not big, "overlap_tp": False,
                "flash_attn": False, "grad_reduce": "fp32"}
        step = gbs * 2048 / tps
        cite = ((NEMO_A100 % commit) + ": %s on %d DGX A100 80GB nodes, %d tokens/s; TP %d PP %d, "
                "MBS 2, GBS %d (conf/training/gpt3/%s.yaml @%s); step = GBS x 2048 / tokens/s = "
                "%.3f s" % (name, nodes, tps, tp, pp, gbs, "175b" if big else "5b", commit, step))
        out.append(dgx_row("nemo-megatron-a100", cite, name.lower(),
                                nemo_perf_model(name, tp, hf), plan, gpus, step,
                                "reported tokens/s converted to a step", gpu="a100-sxm4-80g",
                                network_bw="200Gb/s"))
    return out


# ---- FlagPerf (BAAI): Megatron-Core and Megatron-DeepSpeed reference runs -----------------------
FLAGPERF = "FlagOpen/FlagPerf training/nvidia/%s/README.md @1b5a030"
# (README, GPU, network per GPU, model, pp, dp, tp, dtype, tokens/s per GPU, nvidia-smi GiB; the
# table's own label where it differs)
FLAGPERF_ROWS = [
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 2, 4, 1, "bf16", 3698.7, 76),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 4, 2, 1, "bf16", 3306.5, 59),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 1, 8, 1, "bf16", None, None),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 2, 2, 2, "bf16", 3409.2, 51),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 2, 1, 4, "bf16", 3006.1, 35),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 8, 1, 1, "bf16", 2690.3, 55),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 1, 1, 8, "bf16", 2451.2, 30),
    ("llama3_8B-megatron", "a800-sxm4-80g", "200Gb/s", "8b", 4, 1, 2, "bf16", 3042.7, 45),
    ("llama3_8B-megatron", "h100-sxm", "400Gb/s", "8b", 1, 4, 2, "bf16", 8103, 71),
    ("llama3_8B-megatron", "h100-sxm", "400Gb/s", "8b", 1, 4, 2, "fp8", 10486, 74),
    ("llama3_8B-megatron", "h100-sxm", "400Gb/s", "8b", 1, 8, 2, "bf16", 7914, 62),
    ("llama3_8B-megatron", "h100-sxm", "400Gb/s", "8b", 1, 8, 2, "fp8", 10280, 64),
    ("llama3_70B-megatron", "h100-sxm", "400Gb/s", "70b", 4, 2, 8, "bf16", 851, 55),
]
FLAGPERF_SHAPE = {"8b": (32, 4096, 14336, 32), "70b": (80, 8192, 28672, 64)}


def flagperf_base(name, model, plan, gpu, gpus, network_bw):
    """What every FlagPerf row of one run shares (8 GPUs a node)."""
    return {"source": "flagperf-nvidia", "model_name": name, "model": model, "plan": plan,
            "gpu": gpu, "gpus": gpus, "gpus_per_node": 8, "network_bw": network_bw}


def flagperf_pair(base, where, step_cite, step, mem):
    """A FlagPerf run's two rows: its step (the reported tokens/s per GPU inverted, as step_cite
    says) and the table's "mem" column, nvidia-smi's peak in whole GiB through FlagPerf's
    monitor (base/vendors/nvidia/nvidia_monitor.py)."""
    return [dict(base, cite=where + step_cite, metric="step_s", measured=step, how=TOKENS_HOW),
            dict(base, cite=where + ", mem %d/80 (nvidia-smi peak, GiB)" % mem,
                 metric="device_bytes", measured=float(mem) * 2**30, how="nvidia-smi peak, GiB")]


def flagperf_mcore_model(size):
    """Llama 3 as training/benchmarks/llama3_{8B,70B}/megatron/pretrain_llama3.sh passes it to
    pretrain_gpt.py of Megatron-LM core_v0.6.0: the layers, widths, 8 query groups, SwiGLU and
    RMSNorm it states, and Megatron's defaults for what it leaves out: learned absolute
    positions (no --position-embedding-type rope), the output layer tied to the embedding (no
    --untie-embeddings-and-output-weights), biases on the linear layers (no
    --disable-bias-linear), hidden and attention dropout 0.1; Llama 3's 128,256-token
    vocabulary (Llama3Tokenizer, the suite's arguments.patch)."""
    L, h, f, a = FLAGPERF_SHAPE[size]
    return {"name": "llama3-%s-megatron-defaults" % size, "layers": L, "hidden": h, "heads": a,
            "kv_heads": 8, "ffn_hidden": f, "vocab": 128256, "seq_len": 8192,
            "activation": "swiglu", "norm": "rmsnorm", "position": "learned",
            "tied_embeddings": True, "bias": True, "dropout": True}


def flagperf_rows(hf):
    """Megatron-Core runs (pretrain_llama3.sh): sequence 8192, global batch 512 (4M tokens),
    micro-batch 1, --sequence-parallel (only with TP), --bf16, Transformer Engine layers,
    --use-distributed-optimizer (ZeRO 1), --use-flash-attn; no recomputation (the script passes
    no --recompute flag, though the README lists "recompute-activations"), no
    --overlap-grad-reduce (off by default in core_v0.6.0: the gradient reduce-scatter and the
    parameter all-gather are not overlapped), no TP communication overlap. FP8 rows add
    training_adapter_H100_fp8.sh: --fp8-format hybrid with delayed scaling (amax history 1024).
    The run script converts the logged "elapsed time per iteration" into tokens/s per GPU as
    512 x 8192 / step / GPUs, which is inverted here. The A800 table is labelled "A100单机8卡"
    (config_A100x1x8.py); the README's environment for it is a DGX A800 (NVIDIA_A800-SXM4-80GB,
    InfiniBand 200Gb/s), which is what these rows use. The H100 runs' network: the llama3_70B
    README's environment (InfiniBand 400Gb/s; the 8B README gives none). Memory: the table's
    "mem" column, nvidia-smi's peak through FlagPerf's monitor (base/vendors/nvidia/
    nvidia_monitor.py), whole GiB. Left out: the 55-node row (its global batch 1760 is not the
    script's 512 its tokens/s formula assumes) and the masked other vendor's row."""
    out = []
    for (readme, gpu, net, size, pp, dp, tp, dt, tps, mem) in FLAGPERF_ROWS:
        gpus = pp * dp * tp
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": 1,
                "mbs": 1, "gbs": 512, "seq": 8192, "recompute": "none", "sp": tp > 1,
                "zero": 1, "dtype": dt, "overlap": False, "overlap_tp": False,
                "flash_attn": True}
        base = flagperf_base("llama-3-" + size, flagperf_mcore_model(size), plan, gpu, gpus, net)
        where = (FLAGPERF % readme) + ": %s x%d, %s, PP%dDP%dTP%d" % (gpu, gpus, dt, pp, dp, tp)
        if tps is None:
            out.append(dict(base, cite=where + ", OOM", metric="oom", measured=1,
                            how="recorded out of memory"))
            continue
        step = 512 * 8192 / (tps * gpus)
        out += flagperf_pair(base, where, ", %g tokens/s per GPU; step = 512 x 8192 / (tokens/s "
                                          "x GPUs) = %.3f s" % (tps, step), step, mem)
    return (out + flagperf_mds_rows() + flagperf_ds_rows() + flagperf_moe_rows(hf) +
            flagperf_flagscale_rows(hf) + flagperf_aquila_rows())


def flagperf_mds_rows():
    """Llama 2 7B under Megatron-DeepSpeed (training/benchmarks/llama2_7b/megatron-deepspeed/
    megatron-deepspeed_main.sh and the nvidia config): sequence 4096, micro-batch 1, 32 (A800)
    or 128 (A100) accumulation steps on 8 GPUs, ZeRO stage 1 in bf16 with bf16 gradient
    accumulation (ds_config.json), --use-flash-attn-v2, SwiGLU, rotary positions, untied
    embeddings, dropout 0. The script's command string carries a commented-out
    "#--recompute-activations \" line inside its quotes; `eval $cmd` then reads everything from
    that "#" on as a comment, so the run drops --normalization rmsnorm, --disable-bias-linear,
    --num-key-value-heads and the DeepSpeed arguments after it (activation checkpointing,
    --zero-stage): LayerNorm with biases, linear biases, no recomputation; the ds_config still
    sets ZeRO 1. Environment: DGX A800 (InfiniBand 200Gb/s); the A100 row's environment line
    says "DGX A100(40G)" while its memory column reads 63/80, so an 80 GB A100 (the run does
    not fit in 40 GB). MFU in the README is 6 x 7e9 x tokens/s over 312 TFLOP/s."""
    model = {"name": "llama2-7b-megatron-deepspeed", "layers": 32, "hidden": 4096,
             "heads": 32, "ffn_hidden": 11008, "vocab": 32000, "seq_len": 4096,
             "activation": "swiglu", "norm": "layernorm", "position": "rotary",
             "tied_embeddings": False, "bias": True, "dropout": False}
    out = []
    for (gpu, gas, tps, mem) in (("a800-sxm4-80g", 32, 4047, 63), ("a100-sxm4-80g", 128, 3974, 63)):
        gbs = 8 * gas
        step = gbs * 4096 / (tps * 8)
        plan = {"trainer": "deepspeed", "tp": 1, "pp": 1, "dp": 8, "cp": 1, "vp": 1, "mbs": 1,
                "gbs": gbs, "seq": 4096, "recompute": "none", "sp": False, "zero": 1,
                "dtype": "bf16", "overlap": False, "flash_attn": True, "attn_impl": "fa2"}
        where = (FLAGPERF % "llama2_7b-megatron-deepspeed") + ": %s x8, DP8, GAS %d" % (gpu, gas)
        base = flagperf_base("llama-2-7b", model, plan, gpu, 8, "200Gb/s")
        out += flagperf_pair(base, where, ", %d tokens/s per GPU; step = %d x 4096 / (tokens/s "
                                          "x 8) = %.3f s" % (tps, gbs, step), step, mem)
    return out


# (README, model, GPU, GPUs, sequence, micro-batch, accumulation, attention, tokens/s per GPU,
# nvidia-smi GiB, what the table's fix_hp column says)
FLAGPERF_DS_ROWS = [
    ("llama2_7b-deepspeed", "llama2-7b", "a800-sxm4-80g", 8, 4096, 1, 1, "fa2", 3564, 57, "/"),
    ("llama2_7b-deepspeed", "llama2-7b", "a800-sxm4-80g", 8, 2048, 3, 1, "fa2", 3917, 70,
     "MPE=2048 LBS=3"),
    ("llama2_7b-deepspeed", "llama2-7b", "a800-sxm4-80g", 8, 2048, 3, 64, "fa2", 4062, 70,
     "MPE=2048 LBS=3 GAS=64"),
    ("llama2_7b-deepspeed", "llama2-7b", "h800-sxm", 8, 4096, 1, 1, "fa2", 7151, 59, "/"),
    ("chatglm3_6b-deepspeed", "chatglm3-6b", "h100-sxm", 8, 4096, 1, 1, "fa2", 8429.22, 61,
     "mpe=4096"),
]
# FlagPerf's copy of Llama 2 7B's config.json (training/benchmarks/llama2_7b/deepspeed/
# llama2_7b_hf/config.json: max_position_embeddings raised to 4096, the rest as Meta's)
FLAGPERF_LLAMA2 = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
                   "hidden_size": 4096, "intermediate_size": 11008,
                   "max_position_embeddings": 4096, "model_type": "llama",
                   "num_attention_heads": 32, "num_hidden_layers": 32,
                   "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "rope_scaling": None,
                   "tie_word_embeddings": False, "vocab_size": 32000}


def flagperf_ds_rows():
    """Hugging Face models under DeepSpeed 0.11 (training/benchmarks/{llama2_7b,chatglm3_6b}/
    deepspeed: run_pretraining.py, ds_config.json and the nvidia config files):
    the models as transformers builds them (eager elementwise kernels), bf16, no gradient
    checkpointing (neither script enables it; ds_config's activation_checkpointing applies
    only to models calling deepspeed.checkpointing), ZeRO 3 with overlap_comm,
    reduce_bucket_size 1e7 ("dp_bucket") and one micro-batch per step unless the table's fix_hp
    says otherwise; Llama 2 through transformers 4.34's FlashAttention-2 path
    (config._flash_attn_2_enabled), ChatGLM3 through its modeling code's
    torch.nn.functional.scaled_dot_product_attention (causal, PyTorch's FlashAttention-2
    kernel). The throughput is DeepSpeed's RunningAvgSamplesPerSec x sequence / GPUs, inverted
    here into a step of accumulation x micro-batch x sequence tokens per GPU. MFU in the README
    is 6 x (7e9 or 6e9) x tokens/s over the dense peak.
    Left out: Baichuan2 13B under ZeRO 1 on 2 x 8 H800 (2068 and 2710 tokens/s per GPU at 8
    and 64 accumulation steps), on two settings the sources leave open and that each move the
    prediction by a third or more. Its network: the README's "InfiniBand, 200Gb/s" read per
    GPU (net.sh names eight HCAs) prices the 27.8 GB gradient all-reduce at 0.2 s exposed and
    the steps at 3.7 and 28.2 s (-53%, -42%); read per node, 6.0 and 30.5 s (-24%, -37%). Its
    attention: the model's own code (trust_remote_code) calls xformers' memory-efficient
    kernel with the ALiBi bias when xformers is installed and otherwise an eager matmul-softmax
    chain, and the image's packages are not listed."""
    here = os.path.dirname(os.path.abspath(__file__))
    tdata = os.path.join(here, "..", "tests", "data", "hf")
    models = {"llama2-7b": FLAGPERF_LLAMA2,
              "chatglm3-6b": json.load(open(os.path.join(tdata, "chatglm3-6b.json")))}
    out = []
    for (readme, name, gpu, gpus, seq, mbs, gas, attn, tps, mem, fix) in FLAGPERF_DS_ROWS:
        plan = {"trainer": "deepspeed", "tp": 1, "pp": 1, "dp": gpus, "cp": 1, "vp": 1,
                "mbs": mbs, "gbs": mbs * gas * gpus, "seq": seq, "recompute": "none",
                "sp": False, "zero": 3, "dtype": "bf16", "overlap": True, "flash_attn": True,
                "attn_impl": attn, "dp_bucket": 1e7}
        step = gas * mbs * seq / tps
        where = (FLAGPERF % readme) + ": %s x%d, fix_hp %s" % (gpu, gpus, fix)
        base = flagperf_base(name, models[name], plan, gpu, gpus, "200Gb/s")
        out += flagperf_pair(base, where, ", %g tokens/s per GPU; step = %d x %d x %d / "
                                          "tokens/s = %.4f s" % (tps, gas, mbs, seq, step),
                             step, mem)
    return out


def flagperf_moe_rows(hf):
    """Mixtral 8x7B under Megatron-Core core_v0.6.0 on 4 x 8 H100 (training/nvidia/
    mixtral_8x7B-megatron, training/benchmarks/mixtral_8x7B/megatron/megatron_main.sh): the
    README's PP2 DP2 EP1 TP8 at micro-batch 3, global batch 1200 of sequence 4096, bf16,
    --sequence-parallel, --recompute-activations (selective), Transformer Engine with
    --use-flash-attn, grouped GEMM, the distributed optimizer without --overlap-grad-reduce,
    Mistral's 32,000-token vocabulary, rotary positions, untied output layer, no linear biases,
    and Megatron's default dropout 0.1 (the script sets none). The script's
    --expert-model-parallel-size 8 cannot run at data-parallel size 2 (Megatron-Core requires EP
    to divide it), so the row takes the table's EP 1: every rank holds all eight experts, split
    by TP (Megatron-Core splits experts over the TP group; --expert-tensor-parallel-size, later
    its own setting, defaults to the TP size). InfiniBand 400Gb/s (the README's environment).
    The run script turns the logged iteration time into 1200 x 4096 / step / GPUs tokens/s per
    GPU; MFU in the README is 6 x 12.7e9 x tokens/s over 989 TFLOP/s."""
    m = dict(hf("mixtral-8x7b"))
    m["attention_dropout"] = 0.1
    tps, mem, gpus = 2844.0, 75, 32
    step = 1200 * 4096 / (tps * gpus)
    plan = {"trainer": "megatron", "tp": 8, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "etp": 8,
            "vp": 1, "mbs": 3, "gbs": 1200, "seq": 4096, "recompute": "selective", "sp": True,
            "zero": 1, "dtype": "bf16", "overlap": False, "overlap_tp": False, "flash_attn": True}
    where = (FLAGPERF % "mixtral_8x7B-megatron") + ": h100-sxm x32, bf16, PP2DP2EP1TP8, LBS 3"
    base = flagperf_base("mixtral-8x7b", m, plan, "h100-sxm", gpus, "400Gb/s")
    return flagperf_pair(base, where, ", %g tokens/s per GPU; step = 1200 x 4096 / (tokens/s x "
                                      "GPUs) = %.3f s" % (tps, step), step, mem)


def flagperf_flagscale_rows(hf):
    """Llama 2 70B under FlagScale (BAAI's Megatron-LM fork at 26cd664, pretrain_llama.py) on
    4 x 8 H800 (training/nvidia/llama2_70B-megatron, training/benchmarks/llama2_70B/megatron/
    megatron_main.sh): sequence 4096, micro-batch 1, --sequence-parallel, the distributed
    optimizer without overlapped reduction, --use-flash-attn, no linear biases, GQA with 8
    groups, SwiGLU, RMSNorm, rotary positions, untied output layer, dropout 0, no
    recomputation (config: recompute False), bf16 ("amp"); 44 accumulation steps by default
    (global batch 44 at DP 1), 1024 in the table's GAS row. The README's "InfiniBand, 200Gb/s"
    is taken per GPU (the nodes' eight HCAs); per node it would add the pipeline sends between
    the nodes, about 2% of these steps. The run script turns the logged iteration time into
    global batch x 4096 / step / GPUs tokens/s per GPU. Left out: the table's fp32 row (TF32
    GEMMs under its own 495 TFLOP/s peak)."""
    m = hf("llama-2-70b")
    out = []
    for (tp, pp, gas, tps, mem) in ((8, 4, 44, 641.93, 62), (4, 8, 44, 791.37, 74),
                                    (4, 8, 1024, 908.29, 74)):
        gpus, gbs = 32, gas
        step = gbs * 4096 / (tps * gpus)
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": 1, "cp": 1, "vp": 1, "mbs": 1,
                "gbs": gbs, "seq": 4096, "recompute": "none", "sp": True, "zero": 1,
                "dtype": "bf16", "overlap": False, "overlap_tp": False, "flash_attn": True}
        where = ((FLAGPERF % "llama2_70B-megatron") +
                 ": h800-sxm x32, amp, TP%dPP%dDP1, GAS %d" % (tp, pp, gas))
        base = flagperf_base("llama-2-70b", m, plan, "h800-sxm", gpus, "200Gb/s")
        out += flagperf_pair(base, where, ", %g tokens/s per GPU; step = %d x 4096 / (tokens/s "
                                          "x 32) = %.3f s" % (tps, gbs, step), step, mem)
    return out


def flagperf_aquila_rows():
    """Aquila2 7B under FlagScale (@ed55532, pretrain_aquila.py) on one 8 x A800 node
    (training/nvidia/aquila2_7b-flagscale, training/benchmarks/aquila2_7b/flagscale/
    flagscale_main.sh): 32 layers, hidden 4096, 32 heads, SwiGLU at --multiple-of 256 (11008),
    RMSNorm, rotary positions, untied output layer, no linear biases, dropout 0, vocabulary
    100,008; sequence 2048, bf16, the distributed optimizer without overlapped reduction,
    --use-flash-attn, no sequence parallelism (not passed), no recomputation; 9 accumulation
    steps of the table's LBS per data-parallel rank (run_pretraining.py: global batch = LBS x 8
    x 9 / (TP x PP)). tokens/s per GPU = global batch x 2048 / step / 8."""
    model = {"name": "aquila2-7b", "layers": 32, "hidden": 4096, "heads": 32,
             "ffn_hidden": 11008, "vocab": 100008, "seq_len": 2048, "activation": "swiglu",
             "norm": "rmsnorm", "position": "rotary", "tied_embeddings": False, "bias": False,
             "dropout": False}
    out = []
    for (tp, pp, dp, lbs, tps, mem) in ((1, 1, 8, 1, 3936.8, 74), (8, 1, 1, 8, 2866.3, 55),
                                        (1, 8, 1, 4, 2093.5, 57), (2, 2, 2, 4, 3468.3, 52)):
        gbs = lbs * 8 * 9 // (tp * pp)
        step = gbs * 2048 / (tps * 8)
        plan = {"trainer": "megatron", "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": 1,
                "mbs": lbs, "gbs": gbs, "seq": 2048, "recompute": "none", "sp": False,
                "zero": 1, "dtype": "bf16", "overlap": False, "overlap_tp": False,
                "flash_attn": True}
        where = ((FLAGPERF % "aquila2_7b-flagscale") +
                 ": a800-sxm4-80g x8, TP%dPP%dDP%d, LBS %d" % (tp, pp, dp, lbs))
        base = flagperf_base("aquila2-7b", model, plan, "a800-sxm4-80g", 8, "200Gb/s")
        out += flagperf_pair(base, where, ", %g tokens/s per GPU; step = %d x 2048 / (tokens/s "
                                          "x 8) = %.3f s" % (tps, gbs, step), step, mem)
    return out


def all_rows(hf):
    return (foundry_rows() + flashattn_rows() + torchtitan_rows(hf) + torchtitan_a100_rows(hf) +
            torchtitan_h200_rows(hf) + megatron_rows() + bloom_rows() + mtnlg_rows() +
            dgxc_rows(hf) + nemotron_rows() + dgxc_gpt3_rows() + grok_rows() +
            nemo_long_rows(hf) + nemo_long_b200_rows(hf) + nemo_perf_rows(hf) +
            mbridge_rows(hf) + internlm_rows() +
            mlperf_rows() + mlperf40_rows() + mlperf30_rows() + mlperf41_rows() +
            mlperf41_b200_rows() + mlperf50_rows(hf) + mcore_moe_rows(hf) +
            nemo_a100_rows(hf) + flagperf_rows(hf) + mbridge_blackwell_rows(hf))
