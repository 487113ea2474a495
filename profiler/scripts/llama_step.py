#!/usr/bin/env python3
# llama_step.py - single-GPU training steps of a Llama-architecture model with random weights,
# for `autoplan profile check` (prediction against measurement).
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The model is read from a Hugging Face config.json (the file autoplan reads: by default
# examples/models/llama-3.2-1b.json, ~1.2B parameters) and built here in plain PyTorch, no
# `transformers` needed: token embedding, L blocks of RMSNorm -> attention with rotary embeddings
# and grouped KV heads (F.scaled_dot_product_attention, causal) -> RMSNorm -> SwiGLU MLP, a final
# RMSNorm and the LM head (tied when the config says so). Parameters are fp32, compute in bf16
# autocast, the optimizer torch.optim.AdamW(fused=True): fp32 weights, gradients and two moments,
# as FSDP/ZeRO keep them on one GPU.
#
# NVTX ranges autoplan reads: "step" around each iteration (the step time), "forward",
# "backward" and "optimizer" inside it (per-operator comparison); at the end an NVTX mark
# "autoplan.max_memory_reserved=<bytes>" with torch.cuda.max_memory_reserved().
#
#   autoplan profile check examples/models/llama-3.2-1b.json --trainer fsdp --zero 3 --gpus 1 \
#       --mbs 1 --gbs 1 --seq 2048 -- python3 profiler/scripts/llama_step.py --mbs 1 --seq 2048

import argparse
import json
import math
import sys

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    sys.exit(f"llama_step.py: needs PyTorch with CUDA ({e})")


class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019: x / rms(x) * w."""

    def __init__(self, h, eps):
        super().__init__()
        self.w = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.w


def rope_tables(s, d, theta, device):
    """Su et al. 2021 rotary embedding: cos/sin of position x frequency, half the head dim."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=device).float() / d))
    ang = torch.outer(torch.arange(s, device=device).float(), inv)
    return ang.cos(), ang.sin()


def rotate(x, cos, sin):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or h // self.nh
        eps = c.get("rms_norm_eps", 1e-5)
        self.n1, self.n2 = RMSNorm(h, eps), RMSNorm(h, eps)
        self.qkv = nn.Linear(h, (self.nh + 2 * self.nkv) * self.hd, bias=False)
        self.o = nn.Linear(self.nh * self.hd, h, bias=False)
        f = c["intermediate_size"]
        self.up = nn.Linear(h, 2 * f, bias=False)  # gate and up, fused
        self.down = nn.Linear(f, h, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).split(
            [self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], dim=-1)
        q = rotate(q.view(b, s, self.nh, self.hd), cos, sin).transpose(1, 2)
        k = rotate(k.view(b, s, self.nkv, self.hd), cos, sin).transpose(1, 2)
        v = v.view(b, s, self.nkv, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.nkv != self.nh)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        g, u = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.emb = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c.get("rms_norm_eps", 1e-5))
        self.head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings", False):
            self.head.weight = self.emb.weight
        self.c = c

    def forward(self, tokens):
        x = self.emb(tokens)
        hd = self.c.get("head_dim") or self.c["hidden_size"] // self.c["num_attention_heads"]
        cos, sin = rope_tables(tokens.shape[1], hd, self.c.get("rope_theta", 10000.0), tokens.device)
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description="single-GPU Llama training steps for autoplan")
    ap.add_argument("--config", default="examples/models/llama-3.2-1b.json",
                    help="Hugging Face config.json of a Llama-architecture model")
    ap.add_argument("--mbs", type=int, default=1, help="micro-batch (sequences)")
    ap.add_argument("--seq", type=int, default=2048, help="sequence length (tokens)")
    ap.add_argument("--steps", type=int, default=12, help="steps (the first is warm-up)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("llama_step.py: no CUDA device")
    c = json.load(open(a.config))
    torch.manual_seed(0)
    model = Llama(c).cuda()
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    v = c["vocab_size"]
    for i in range(a.steps):
        tokens = torch.randint(0, v, (a.mbs, a.seq + 1), device="cuda")
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("forward")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, v), tokens[:, 1:].reshape(-1))
        # as torchtitan's train step does (del pred): the 16-bit logits are not kept through
        # the backward (4 GB at 16k tokens of a 128k vocabulary)
        del logits
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()  # the step ends when its kernels end
        torch.cuda.nvtx.range_pop()
        if not math.isfinite(loss.item()):
            sys.exit("llama_step.py: the loss is not finite")
    torch.cuda.nvtx.mark(f"autoplan.max_memory_reserved={torch.cuda.max_memory_reserved()}")
    print(f"llama_step.py: {n / 1e9:.2f}B parameters, {a.steps} steps of {a.mbs} x {a.seq} "
          f"tokens, max reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB, "
          f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
