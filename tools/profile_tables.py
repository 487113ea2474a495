#!/usr/bin/env python3
# profile_tables.py - the result tables of docs/profiler.md from a measured profile
# (tools/profile_gpu.sh runs it last):
#   1. GEMM: measured efficiency (achieved / datasheet dense peak) by dtype and size class,
#      beside the published ceiling the cost model uses without a profile;
#   2. attention: measured TFLOP/s and fraction of the 16-bit peak by kernel, sequence, head dim,
#      causality, forward and backward;
#   3. the cost model with and without the profile on the public H100 rows of
#      tests/data/validation.json (step time predicted vs the published measurement);
#   4. the single-GPU Llama step: predicted vs measured, from `autoplan profile check` output.
# Markdown on stdout. Published figures are read from `autoplan profile show GPU` when this
# autoplan has it; a '-' means the figure was not available.
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile


def run(ap, args):
    p = subprocess.run([ap] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def peaks(ap, gpu):
    """Dense peaks in TFLOP/s per dtype from `autoplan gpus` (bf16 and fp8 columns)."""
    rc, out, _ = run(ap, ["gpus"])
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == gpu:
            nums = [x.strip("()") for x in f[2:5]]
            bf16 = float(nums[1])
            fp8 = float(nums[2]) if nums[2] != "-" else 0.0
            return {"bf16": bf16, "fp16": bf16, "tf32": bf16 / 2, "fp8": fp8, "fp32": bf16 / 16}
    return {}


def published(ap, gpu):
    """GEMM ceilings and attention efficiencies from `autoplan profile show GPU --profile none`
    (without --profile none it shows the newest measured profile of the GPU overlaid, and the
    first H200 run's table compared the measurement with itself)."""
    rc, out, _ = run(ap, ["profile", "show", gpu, "--profile", "none"])
    gemm, attn = {}, {}
    if rc != 0:
        return gemm, attn
    for line in out.splitlines():
        m = re.match(r"\s+(bf16|fp16|fp8|tf32|fp32)\s+([0-9.]+) of ([0-9.]+) TFLOP/s", line)
        if m:
            gemm[m.group(1)] = float(m.group(2))
        m = re.match(r"\s+(\w+)\s+(causal|full)\s+(\d+)\s+(fwd|bwd)((?:\s+[0-9.]+){6})", line)
        if m:
            vals = [float(x) for x in m.group(5).split()]
            attn[(m.group(1), m.group(2) == "causal", int(m.group(3)), m.group(4))] = vals
    return gemm, attn


def shape(row):
    return dict(kv.split("=") for kv in row["shape"].split(","))


def table_gemm(prof, pk, pub):
    print("### GEMM efficiency: measured (cuBLASLt) vs published\n")
    print("Efficiency = achieved FLOP/s / datasheet dense peak; median over the shapes of each "
          "size class (F = 2mnk).\n")
    print("| dtype | F class | shapes | measured median | measured max | published ceiling |")
    print("|---|---|---|---|---|---|")
    classes = [(0, 1e9), (1e9, 1e10), (1e10, 1e11), (1e11, 1e12), (1e12, 1e30)]
    for dt in ("bf16", "fp16", "fp8", "tf32"):
        rows = [r for r in prof["rows"] if r["op"] == "gemm" and r["dtype"] == dt]
        if not rows or not pk.get(dt):
            continue
        for lo, hi in classes:
            effs = []
            for r in rows:
                s = shape(r)
                f = 2.0 * float(s["m"]) * float(s["n"]) * float(s["k"])
                if lo <= f < hi:
                    effs.append(f / r["time_s"] / (pk[dt] * 1e12))
            if effs:
                p = f"{pub[dt]:.3f}" if dt in pub else "-"
                print(f"| {dt} | {lo:.0e}..{hi:.0e} | {len(effs)} | {statistics.median(effs):.3f} "
                      f"| {max(effs):.3f} | {p} |")
    print()


def rate(r):
    """FLOP/s of a row: as stored, else from the FlashAttention-2 convention (docs/profiles.md:
    forward 4 b h d P, P = s^2, or s^2 / 2 when causal; backward 2.5 x forward)."""
    if r.get("flops_per_s"):
        return r["flops_per_s"]
    s = shape(r)
    sq = float(s["s"]) ** 2 * (0.5 if s["causal"] == "1" else 1.0)
    f = 4.0 * float(s["b"]) * float(s["h"]) * float(s["d"]) * sq
    return (2.5 * f if r["op"] == "attn_bwd" else f) / r["time_s"]


def table_attn(prof, pk, pub):
    print("### Attention: measured vs published (fraction of the 16-bit dense peak)\n")
    print("| kernel | causal | s | h/kvh | d | fwd TFLOP/s | fwd eff | bwd TFLOP/s | bwd eff | "
          "published fwd/bwd | kernel name |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    seq_index = {512: 0, 1024: 1, 2048: 2, 4096: 3, 8192: 4, 16384: 5}
    fwd = {r["shape"]: r for r in prof["rows"] if r["op"] == "attn_fwd"}
    bwd = {r["shape"]: r for r in prof["rows"] if r["op"] == "attn_bwd"}
    peak = pk.get("bf16", 0) * 1e12
    for key in sorted(fwd, key=lambda k: (shape(fwd[k])["impl"], int(shape(fwd[k])["s"]))):
        f, s = fwd[key], shape(fwd[key])
        b = bwd.get(key)
        causal = s["causal"] == "1"
        pubv = pub.get((s["impl"], causal, int(s["d"]), "fwd"))
        pubb = pub.get((s["impl"], causal, int(s["d"]), "bwd"))
        i = seq_index.get(int(s["s"]))
        pv = f"{pubv[i]:.2f}/{pubb[i]:.2f}" if pubv and pubb and i is not None else "-"
        kern = f.get("source", "").split("kernel ")[-1][:40] if "kernel " in f.get("source", "") else "-"
        line = (f"| {s['impl']} | {s['causal']} | {s['s']} | {s['h']}/{s['kvh']} | {s['d']} | "
                f"{rate(f) / 1e12:.0f} | {rate(f) / peak:.2f} | ")
        if b:
            line += f"{rate(b) / 1e12:.0f} | {rate(b) / peak:.2f} | "
        else:
            line += "- | - | "
        print(line + f"{pv} | {kern} |")
    print()


def model_file(row, tmp):
    path = os.path.join(tmp, row["source"] + ".json")
    with open(path, "w") as f:
        json.dump(row["model"], f)
    return path


def flags(row):
    p = row["plan"]
    out = ["--gpu", row["gpu"], "--gpus", str(row["gpus"]), "--gpus-per-node",
           str(row.get("gpus_per_node", 8)), "--network-bw", row.get("network_bw", "400Gb/s"),
           "--tp", str(p["tp"]), "--pp", str(p["pp"]), "--cp", str(p.get("cp", 1)),
           "--mbs", str(p["mbs"]), "--gbs", str(p["gbs"]), "--zero", str(p.get("zero", 0)),
           "--recompute", p.get("recompute", "none"), "--dtype", p.get("dtype", "bf16")]
    if p.get("seq"):
        out += ["--seq", str(p["seq"])]
    if p.get("vp", 1) > 1:
        out += ["--vp", str(p["vp"])]
    if p.get("sp"):
        out += ["--sp"]
    if p.get("overlap"):
        out += ["--overlap"]
    if not p.get("flash_attn", True):
        out += ["--no-flash-attn"]
    if p.get("trainer"):
        out += ["--trainer", p["trainer"]]
    return out


def table_validation(ap, name, vfile):
    print("### The cost model with and without the profile: public H100 step times\n")
    print("| source | model | plan | measured s | published tables s (err) | with profile s (err) |")
    print("|---|---|---|---|---|---|")
    d = json.load(open(vfile))
    rows = [r for k in ("rows", "crosscheck", "outofsample") for r in d.get(k, [])
            if r.get("gpu", "").startswith("h100") and r.get("metric") == "step_s"]
    errs = {"none": [], name: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows:
            mf = model_file(r, tmp)
            got = {}
            for prof in ("none", name):
                rc, out, err = run(ap, ["estimate", mf, "--json", "--profile", prof] + flags(r))
                got[prof] = json.loads(out)["time"]["step_s"] if rc == 0 else None
            cells = []
            for prof in ("none", name):
                v = got[prof]
                if v is None:
                    cells.append("-")
                    continue
                e = (v - r["measured"]) / r["measured"]
                errs[prof].append(abs(e))
                cells.append(f"{v:.3f} ({100 * e:+.1f}%)")
            p = r["plan"]
            print(f"| {r['source']} | {r.get('model_name', r['model'].get('name', '?'))} | "
                  f"tp{p['tp']} pp{p['pp']} dp{p.get('dp', '?')} {p.get('dtype', '')} | "
                  f"{r['measured']:.3f} | {cells[0]} | {cells[1]} |")
    for prof in ("none", name):
        if errs[prof]:
            print(f"\nMAPE {'published' if prof == 'none' else 'with profile'}: "
                  f"{100 * statistics.mean(errs[prof]):.1f}% over {len(errs[prof])} rows", end="")
    print("\n")


def table_check(path, label):
    rows = []
    try:
        for line in open(path):
            m = re.match(r"\s+(reserved peak.*?|driver allocations peak|step time|kernels|"
                         r"outside kernels \(host, idle\)|(?:forward|backward|optimizer) "
                         r"\(kernels\)|(?:forward|backward) (?:GEMMs|attention|other kernels))"
                         r"\s{2,}(\S+ \S+)\s+(\S+ \S+|-)\s+(\S+)", line)
            if m:
                rows.append(m.groups())
    except OSError:
        pass
    print(f"| {label} | predicted | measured | error |")
    print("|---|---|---|---|")
    for g in rows:
        print(f"| {g[0].strip()} | {g[1]} | {g[2]} | {g[3]} |")
    if not rows:
        print("| (not run) | | | |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--autoplan", default="./build/autoplan")
    ap.add_argument("--profile", required=True, help="profile file (autoplan profile export)")
    ap.add_argument("--check", help="output of `autoplan profile check` with the profile")
    ap.add_argument("--check-published", help="the same with --profile none")
    ap.add_argument("--check-proxy", help="profile check of the 8-layer Llama-3-8B proxy with "
                    "the profile")
    ap.add_argument("--check-proxy-published", help="the same with --profile none")
    ap.add_argument("--validation", default="tests/data/validation.json")
    a = ap.parse_args()
    prof = json.load(open(a.profile))
    gpu, name = prof["gpu"], prof["name"]
    dev = prof.get("device", {})
    print(f"## Measured on {dev.get('device_name', gpu)} ({gpu}), host {dev.get('host', '?')}, "
          f"driver {dev.get('driver_version', '?')}, CUDA {dev.get('cuda_version', '?')}, "
          f"cuBLAS {dev.get('cublas_version', '?')}, clocks {dev.get('sm_clock_mhz', 0):.0f}/"
          f"{dev.get('mem_clock_mhz', 0):.0f} MHz, profile `{name}` ({len(prof['rows'])} rows)\n")
    pk = peaks(a.autoplan, gpu)
    gpub, apub = published(a.autoplan, gpu)
    table_gemm(prof, pk, gpub)
    table_attn(prof, pk, apub)
    if gpu.startswith("h100"):
        table_validation(a.autoplan, name, a.validation)
    print("### Llama-3.2-1B (random weights), one GPU, mbs 1, seq 2048: predicted vs measured\n")
    if a.check:
        table_check(a.check, f"with profile `{name}`")
    if a.check_published:
        table_check(a.check_published, "published tables only")
    if a.check_proxy or a.check_proxy_published:
        print("### Llama-3-8B cut to 8 layers (random weights), one GPU, 1 x 8192 tokens: "
              "predicted vs measured\n")
    if a.check_proxy:
        table_check(a.check_proxy, f"with profile `{name}`")
    if a.check_proxy_published:
        table_check(a.check_proxy_published, "published tables only")


if __name__ == "__main__":
    sys.exit(main())
