#!/bin/sh
# profile_gpu.sh - the whole GPU measurement batch of docs/profiler.md in one go, on a machine
# with an NVIDIA GPU, the CUDA toolkit (autoplan built with it) and, for attention and the
# training step, PyTorch >= 2.3:
#   1. `autoplan profile bench`: cuBLASLt GEMMs (generic grid + Llama-3-8B's layers at tp 1..8),
#      cuDNN attention, memory-bound kernels, Adam, copies, launch, device memory, NCCL when
#      there are >= 2 GPUs, host Adam and bandwidth; stored as profile NAME;
#   2. `autoplan profile attach` on profiler/scripts/attn_bench.py: FlashAttention-2, cuDNN and
#      memory-efficient SDPA kernels as PyTorch runs them, added to NAME;
#   3. `autoplan profile export NAME`: the profile file (commit it as data with its provenance);
#   4. `autoplan profile check` on profiler/scripts/llama_step.py (Llama-3.2-1B, random weights,
#      one GPU), with the profile and with the published tables only; then a compute-bound
#      step, Llama-3-8B cut to 8 layers at 8192 tokens (profiler/scripts/llama-3-8b-8layers.json,
#      skipped with QUICK=1), both ways, each split into GEMMs, attention and the rest;
#   5. tools/profile_tables.py: the tables of docs/profiler.md from all of the above.
# Usage: tools/profile_gpu.sh [NAME [OUTDIR]]   (run from the repository root)
# Environment: AUTOPLAN (default ./build/autoplan), PYTHON (default python3), QUICK=1 for a smoke
# run of a few minutes.
# SPDX-License-Identifier: GPL-3.0-or-later
set -eu
AP=${AUTOPLAN:-./build/autoplan}
PY=${PYTHON:-python3}
host=$(hostname | tr -c 'A-Za-z0-9.\n-' '-' | cut -c1-15)
NAME=${1:-gpu-$host-$(date -u +%Y%m%d-%H%M%S)}
OUT=${2:-profile-$NAME}
quick=""
[ "${QUICK:-0}" = 1 ] && quick="--quick"
mkdir -p "$OUT"
[ -x "$AP" ] || { echo "profile_gpu.sh: $AP not found: build autoplan first" >&2; exit 2; }

echo "== 1. micro-benchmarks -> profile $NAME"
$AP profile bench --name "$NAME" --model examples/models/llama-3-8b.json --tp 1,2,4,8 --mbs 1 \
    --seq 8192 $quick | tee "$OUT/bench.txt"

if $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "== 2. attention kernels as PyTorch runs them (attach)"
    $AP profile attach --name "$NAME" --skip 1 -- $PY profiler/scripts/attn_bench.py $quick \
        | tee "$OUT/attn.txt"
else
    echo "== 2. skipped: no PyTorch with CUDA; attention rows come from cuDNN (bench) only" \
        | tee "$OUT/attn.txt"
fi

echo "== 3. the profile file"
$AP profile export "$NAME" --output "$OUT/$NAME.json"

if $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "== 4. a ~1B Llama training step: predicted vs measured"
    plan="examples/models/llama-3.2-1b.json --trainer fsdp --zero 3 --gpus 1 --mbs 1 --gbs 1 --seq 2048"
    step="$PY profiler/scripts/llama_step.py --mbs 1 --seq 2048"
    # shellcheck disable=SC2086
    $AP profile check $plan --profile "$NAME" -- $step | tee "$OUT/check.txt"
    # shellcheck disable=SC2086
    $AP profile check $plan --profile none --no-store -- $step | tee "$OUT/check-published.txt"
    if [ -z "$quick" ]; then
        proxy=profiler/scripts/llama-3-8b-8layers.json
        plan="$proxy --trainer fsdp --zero 3 --gpus 1 --mbs 1 --gbs 1 --seq 8192"
        step="$PY profiler/scripts/llama_step.py --config $proxy --mbs 1 --seq 8192"
        for p in "$NAME" none; do
            # shellcheck disable=SC2086
            $AP profile check $plan --profile "$p" --no-store -- $step | tee "$OUT/check-8l-$p.txt"
        done
    fi
else
    echo "== 4. skipped: no PyTorch with CUDA" | tee "$OUT/check.txt" > "$OUT/check-published.txt"
fi

echo "== 5. tables"
proxy_args=""
[ -f "$OUT/check-8l-$NAME.txt" ] && proxy_args="--check-proxy $OUT/check-8l-$NAME.txt"
[ -f "$OUT/check-8l-none.txt" ] && proxy_args="$proxy_args --check-proxy-published $OUT/check-8l-none.txt"
# shellcheck disable=SC2086
$PY tools/profile_tables.py --autoplan "$AP" --profile "$OUT/$NAME.json" \
    --check "$OUT/check.txt" --check-published "$OUT/check-published.txt" $proxy_args \
    > "$OUT/tables.md"
echo "wrote $OUT/$NAME.json and $OUT/tables.md (paste the tables into docs/profiler.md)"
