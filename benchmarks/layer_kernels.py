#!/usr/bin/env python3
"""Where a decoder layer's GPU time goes in the window pass (issue 36: the backward at >= 450 TFLOPS):
one layer of a model config, run as tierzero's window pass runs a unit — the forward of every
micro-batch without autograd, then per micro-batch the recomputed forward, its backward and the fp32
sum of the weight gradients (engine/zero/window_pass.cpp) — in PyTorch eager with the ops of
engine/model/llama_layer.cpp and layer_ops.cpp (the same ATen kernels LibTorch runs), against
variants that change one thing each, in the same process on the same inputs.

    benchmarks/layer_kernels.py --model-config benchmarks/models/qwen2.5_14b.json [--seq 2048]
        [--micro-batches 8] [--repeat 5] [--top 15] [--json FILE]

Variants (the first is the reference: tierzero's path before the fused RMSNorm and the window's
groups; the last is tierzero now on a GPU where tierzero.window_group "auto" takes all the
micro-batches):
  composite_g1     transformers' composite RMSNorm in fp32 (seven kernels each way), RoPE by cat, SDPA,
                   SiLU x up; the micro-batches one at a time, weight gradients summed in fp32
  fused_g1         the same with at::rms_norm (LibTorch's fused CUDA RMSNorm, one kernel each way)
  composite_group  the micro-batches as one batch [M, seq] (tierzero.window_group M): one forward, one
                   recomputation + backward, each weight gradient summed inside its matrix product
  fused_group      both
Columns: forward_ms / backward_ms (the unit's whole forward over the micro-batches, its whole
recompute + backward + sums), TFLOPS (matmul FLOPs of forward, recomputed forward and backward,
attention included, over both), vs (the layer's time against the reference's) and correct (the
output and the summed weight gradients against the reference's: max |diff| / max |ref|, within 2e-2
for bf16). A kernel table follows: the reference's kernels by summed time (torch.profiler), grouped
as matmul, attention, norm/elementwise.
Needs torch with CUDA.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def layer_params(c, device):
    """One layer's weights as llama_layer_params lists them, drawn N(0, 0.02), bf16."""
    h, inter, hd = c["hidden_size"], c["intermediate_size"], c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    bias = c["model_type"] == "qwen2"
    shapes = [("ln1", (h,)), ("q", (q, h)), ("q.b", (q,)) if bias else None, ("k", (kv, h)), ("k.b", (kv,)) if bias else None,
              ("v", (kv, h)), ("v.b", (kv,)) if bias else None, ("o", (h, q)), ("ln2", (h,)), ("gate", (inter, h)),
              ("up", (inter, h)), ("down", (h, inter))]
    g = torch.Generator(device=device).manual_seed(0)
    params = {}
    for name, shape in filter(None, shapes):
        t = torch.randn(shape, generator=g, device=device, dtype=torch.float32) * 0.02
        if name.startswith("ln"):
            t = t + 1.0
        params[name] = t.to(torch.bfloat16)
    return params, hd


def composite_rms_norm(x, w, eps):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def fused_rms_norm(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rotated * sin


def rope_tables(c, seq, hd, device):
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    freqs = torch.arange(seq, device=device, dtype=torch.float32).unsqueeze(-1) * inv
    emb = torch.cat((freqs, freqs), -1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def layer(c, x, p, hd, cos, sin, norm):
    """engine/model/llama_layer.cpp's llama_layer, op for op."""
    b, s = x.shape[0], x.shape[1]
    eps = c["rms_norm_eps"]
    h = norm(x, p["ln1"], eps)
    q = F.linear(h, p["q"], p.get("q.b")).view(b, s, -1, hd)
    k = F.linear(h, p["k"], p.get("k.b")).view(b, s, -1, hd)
    v = F.linear(h, p["v"], p.get("v.b")).view(b, s, -1, hd).transpose(1, 2)
    q = rope(q.transpose(1, 2), cos, sin)
    k = rope(k.transpose(1, 2), cos, sin)
    gqa = c["num_key_value_heads"] != c["num_attention_heads"]
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=hd ** -0.5, enable_gqa=gqa)
    a = a.transpose(1, 2).reshape(b, s, -1)
    x1 = x + F.linear(a, p["o"])
    h = norm(x1, p["ln2"], eps)
    return x1 + F.linear(F.silu(F.linear(h, p["gate"])) * F.linear(h, p["up"]), p["down"])


def run_unit(c, inputs, out_grads, p, hd, cos, sin, norm, one_batch):
    """The window pass's work on one unit: forwards, then recompute + backward + fp32 sums.
    Returns (outputs, summed weight grads in fp32) and the two phases' CUDA events."""
    names = list(p)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    ev[0].record()
    with torch.no_grad():
        outs = [layer(c, torch.cat(inputs), p, hd, cos, sin, norm)] if one_batch else \
               [layer(c, x, p, hd, cos, sin, norm) for x in inputs]
    ev[1].record()
    sums = [None] * len(names)
    batches = [(torch.cat(inputs), torch.cat(out_grads))] if one_batch else list(zip(inputs, out_grads))
    for x, gy in batches:
        leaves = [p[n].detach().requires_grad_(True) for n in names]
        xin = x.detach().requires_grad_(True)
        y = layer(c, xin, dict(zip(names, leaves)), hd, cos, sin, norm)
        grads = torch.autograd.grad([y], leaves + [xin], [gy])
        for j, g in enumerate(grads[:-1]):
            sums[j] = g.float() if sums[j] is None else sums[j].add_(g)
    ev[2].record()
    return torch.cat(outs), sums, ev


def matmul_flops(c, hd, seq, tokens):
    """Forward matmul FLOPs of one layer over `tokens` tokens (attention's two products included, causal)."""
    h, inter = c["hidden_size"], c["intermediate_size"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    linear = 2 * tokens * (h * q + 2 * h * kv + q * h + 3 * h * inter)
    attention = 2 * 2 * tokens * seq * q / 2
    return linear + attention


def rel_diff(a, b):
    return (a.float() - b.float()).abs().max().item() / max(b.float().abs().max().item(), 1e-30)


def kernel_table(c, inputs, out_grads, p, hd, cos, sin, top):
    """The reference's kernels on one unit, by summed CUDA time."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run_unit(c, inputs, out_grads, p, hd, cos, sin, composite_rms_norm, False)
        torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            t = totals.setdefault(e.name, [0.0, 0])
            t[0] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            t[1] += 1
    def group(name):
        n = name.lower()
        if any(k in n for k in ("gemm", "cutlass", "nvjet", "sm90_xmma", "cublas")):
            return "matmul"
        if any(k in n for k in ("flash", "fmha", "attention")):
            return "attention"
        if "memcpy" in n or "memset" in n:
            return "copy"
        return "norm/elementwise"
    groups = {}
    for name, (us, n) in totals.items():
        groups[group(name)] = groups.get(group(name), 0.0) + us
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    return groups, [{"kernel": k[:90], "group": group(k), "ms": v[0] / 1e3, "count": v[1]} for k, v in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-config", required=True)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("layer_kernels: needs a CUDA GPU (torch.cuda.is_available() is False); run it on the GPU box")
    c = json.load(open(a.model_config))
    dev = torch.device("cuda")
    p, hd = layer_params(c, dev)
    cos, sin = rope_tables(c, a.seq, hd, dev)
    g = torch.Generator(device=dev).manual_seed(1)
    shape = (1, a.seq, c["hidden_size"])
    inputs = [torch.randn(shape, generator=g, device=dev).to(torch.bfloat16) for _ in range(a.micro_batches)]
    out_grads = [(torch.randn(shape, generator=g, device=dev) * 1e-3).to(torch.bfloat16) for _ in range(a.micro_batches)]
    tokens = a.seq * a.micro_batches
    flops = 4 * matmul_flops(c, hd, a.seq, tokens)  # forward, recomputed forward, backward (2x)
    variants = [("composite_g1", composite_rms_norm, False), ("fused_g1", fused_rms_norm, False),
                ("composite_group", composite_rms_norm, True), ("fused_group", fused_rms_norm, True)]
    print(f"# tierzero layer_kernels — {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"# one layer of {a.model_config} (hidden {c['hidden_size']}, intermediate {c['intermediate_size']}, "
          f"heads {c['num_attention_heads']}/{c['num_key_value_heads']}), {a.micro_batches} micro-batches of "
          f"[1 x {a.seq}], bf16; median of {a.repeat} after one warm-up")
    results, ref = [], None
    for name, norm, one in variants:
        times = []
        for r in range(a.repeat + 1):
            out, sums, ev = run_unit(c, inputs, out_grads, p, hd, cos, sin, norm, one)
            torch.cuda.synchronize()
            if r:
                times.append((ev[0].elapsed_time(ev[1]), ev[1].elapsed_time(ev[2])))
        fwd = statistics.median(t[0] for t in times)
        bwd = statistics.median(t[1] for t in times)
        if ref is None:
            ref = (out, sums)
        diff = max([rel_diff(out, ref[0])] + [rel_diff(s, rs) for s, rs in zip(sums, ref[1])])
        results.append({"variant": name, "forward_ms": fwd, "backward_ms": bwd,
                        "tflops": flops / ((fwd + bwd) / 1e3) / 1e12, "max_rel_diff": diff, "correct": diff <= 2e-2})
    base = results[0]["forward_ms"] + results[0]["backward_ms"]
    print(f"{'variant':<22}{'forward_ms':>11}{'backward_ms':>12}{'TFLOPS':>8}{'vs':>7}{'max_rel_diff':>14}{'correct':>9}")
    for r in results:
        r["vs"] = (r["forward_ms"] + r["backward_ms"]) / base
        print(f"{r['variant']:<22}{r['forward_ms']:>11.2f}{r['backward_ms']:>12.2f}{r['tflops']:>8.1f}{r['vs']:>7.3f}"
              f"{r['max_rel_diff']:>14.2e}{'yes' if r['correct'] else 'NO':>9}")
    groups, kernels = kernel_table(c, inputs, out_grads, p, hd, cos, sin, a.top)
    total = sum(groups.values())
    print(f"# the reference's (composite_g1) kernels on one unit (forward + recompute + backward + sums): {total / 1e3:.2f} ms of CUDA time")
    print(f"{'group':<22}{'ms':>9}{'share':>8}")
    for k, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"{k:<22}{v / 1e3:>9.2f}{100 * v / total:>7.1f}%")
    print(f"{'kernel':<92}{'group':<18}{'count':>6}{'ms':>9}")
    for k in kernels:
        print(f"{k['kernel']:<92}{k['group']:<18}{k['count']:>6}{k['ms']:>9.2f}")
    failed = [r["variant"] for r in results if not r["correct"]]
    print(f"# {len(results)} variants; " + ("every variant within 2e-2 of the reference's" if not failed else "FAILED: " + ", ".join(failed)))
    if a.json:
        json.dump({"results": results, "kernel_groups_ms": {k: v / 1e3 for k, v in groups.items()}, "kernels": kernels,
                   "device": torch.cuda.get_device_name(), "model_config": a.model_config}, open(a.json, "w"), indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
