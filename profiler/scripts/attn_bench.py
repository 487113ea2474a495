#!/usr/bin/env python3
# attn_bench.py - attention forward and backward through PyTorch's scaled_dot_product_attention
# backends (FlashAttention-2, cuDNN, memory-efficient), for `autoplan profile attach`.
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Each call runs inside an NVTX range named as a kernel-profile row (docs/profiles.md):
#     "attn_fwd impl=fa2,b=1,s=4096,h=32,kvh=8,d=128,causal=1,window=0 bf16"
# and autoplan turns every such range into a row: the median over occurrences of the device
# time of the kernels launched inside, naming the kernel that took most of it (profiler/attrib.c).
# Run it as:
#     autoplan profile attach --name NAME --skip 1 -- python3 profiler/scripts/attn_bench.py
# so the kernels measured are the ones trainers run. Nothing is printed but a summary line per
# backend; a backend that refuses a shape (head dim, GQA, dtype) is skipped with a note.
#
# Backends (torch.nn.attention.SDPBackend, PyTorch >= 2.3): FLASH_ATTENTION is
# FlashAttention-2 (Dao 2023) -> impl "fa2"; CUDNN_ATTENTION is cuDNN's fused attention ->
# "cudnn"; EFFICIENT_ATTENTION is the xFormers memory-efficient kernel -> "sdpa_efficient".

import argparse
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError as e:  # pragma: no cover - depends on the machine
    sys.exit(f"attn_bench.py: needs PyTorch >= 2.3 with CUDA ({e})")

BACKENDS = [
    (SDPBackend.FLASH_ATTENTION, "fa2"),
    (SDPBackend.CUDNN_ATTENTION, "cudnn"),
    (SDPBackend.EFFICIENT_ATTENTION, "sdpa_efficient"),
]


def shapes(quick):
    """(b, s, h, kvh, d, causal): 16k tokens per call, the head layouts of Llama-class models."""
    seqs = [1024, 4096] if quick else [1024, 2048, 4096, 8192, 16384]
    heads = [(32, 8, 128)] if quick else [(32, 32, 128), (32, 8, 128), (16, 16, 64), (64, 8, 128)]
    for s in seqs:
        for h, kvh, d in heads:
            for causal in (1, 0):
                yield max(1, 16384 // s), s, h, kvh, d, causal


def row_name(op, impl, b, s, h, kvh, d, causal, dtype):
    return f"{op} impl={impl},b={b},s={s},h={h},kvh={kvh},d={d},causal={causal},window=0 {dtype}"


def run_one(backend, impl, shape, reps, dtype):
    b, s, h, kvh, d, causal = shape
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    q = torch.randn(b, h, s, d, device="cuda", dtype=dt, requires_grad=True)
    k = torch.randn(b, kvh, s, d, device="cuda", dtype=dt, requires_grad=True)
    v = torch.randn(b, kvh, s, d, device="cuda", dtype=dt, requires_grad=True)
    gqa = kvh != h
    fwd = row_name("attn_fwd", impl, b, s, h, kvh, d, causal, dtype)
    bwd = row_name("attn_bwd", impl, b, s, h, kvh, d, causal, dtype)
    with sdpa_kernel([backend]):
        # warm-up outside any row range (library loading, autotuning); then --skip 1 drops the
        # first timed occurrence as well
        out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=gqa)
        out.backward(torch.ones_like(out))
        torch.cuda.synchronize()
        for _ in range(reps + 1):
            q.grad = k.grad = v.grad = None
            torch.cuda.nvtx.range_push(fwd)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=gqa)
            torch.cuda.nvtx.range_pop()
            grad = torch.ones_like(out)
            torch.cuda.nvtx.range_push(bwd)
            out.backward(grad)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="a few shapes only")
    ap.add_argument("--reps", type=int, default=20, help="timed calls per shape (>= 20)")
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--impl", default="fa2,cudnn,sdpa_efficient", help="backends to run")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("attn_bench.py: no CUDA device")
    reps = max(20, a.reps)
    wanted = set(a.impl.split(","))
    for backend, impl in BACKENDS:
        if impl not in wanted:
            continue
        done = skipped = 0
        for shape in shapes(a.quick):
            try:
                run_one(backend, impl, shape, reps, a.dtype)
                done += 1
            except RuntimeError as e:  # the backend does not take this shape
                skipped += 1
                print(f"attn_bench.py: {impl} skips {shape}: {str(e).splitlines()[0][:160]}",
                      file=sys.stderr)
            torch.cuda.empty_cache()
        print(f"attn_bench.py: {impl}: {done} shapes measured, {skipped} skipped")


if __name__ == "__main__":
    main()
