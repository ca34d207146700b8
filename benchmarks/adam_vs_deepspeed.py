#!/usr/bin/env python3
"""tierzero's CPU Adam (`tierzero bench adam`) against DeepSpeedCPUAdam.step, in one run.

Same job for both, on the same thread count and param count: AdamW (lr 1e-3, betas (0.9, 0.999),
eps 1e-8, weight_decay 0.01, bias correction) on
  fp32       fp32 params, grads, m, v                        (28 bytes/param moved)
  bf16       bf16 params updated in place, bf16 grads, fp32 m, v (22 bytes/param; DeepSpeed's
             bf16-params mode, fp32_optimizer_states=True)
DeepSpeed is timed per step (one warm-up step, then --steps), tierzero by its own bench with the
same --steps (one warm-up round). Gparam/s = params / median step time; each figure is the median
over --repeats alternating runs (DeepSpeed, tierzero, DeepSpeed, ...).

Correctness: both start from the same params and gradients (the bench's deterministic fill,
reproduced here), take the same number of steps, and tierzero's final params (--save-params) are
compared with DeepSpeed's. The kernels differ in rounding (DeepSpeed: m = b1*m + (1-b1)*g and
p += p*(-lr*wd); tierzero: torch's lerp and p *= 1 - lr*wd), so they agree within a tolerance,
not bit for bit: 1e-5 for fp32, one bf16 ulp at |p| < 2 (2^-7) for bf16 params.

Usage: benchmarks/adam_vs_deepspeed.py --tierzero build/tools/tierzero --threads 16 --params 134217728
Needs: deepspeed (its cpu_adam op JIT-compiles with ninja, a C++ compiler and Python.h), torch, numpy.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    # name: (param dtype, grad dtype, bytes moved per param)
    "fp32": ("fp32", "fp32", 28),
    "bf16": ("bf16", "bf16", 22),
}
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01
TOLERANCE = {"fp32": 1e-5, "bf16": 2.0**-7}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tierzero", default="build/tools/tierzero", help="the tierzero CLI (built with LibTorch or not)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--params", type=int, default=1 << 26)
    p.add_argument("--steps", type=int, default=7, help="timed steps per run (after one warm-up step)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each implementation per config, alternating")
    p.add_argument("--configs", default="fp32,bf16", help="comma-separated: fp32, bf16")
    p.add_argument("--bench-args", default="", help="extra `tierzero bench adam` flags, e.g. '--pin'")
    p.add_argument("--json", help="also write the results as JSON here")
    return p.parse_args()


ARGS = parse_args()
# DeepSpeed's kernel parallelises with OpenMP: its thread count must be set before the import.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
# Its CPU accelerator builds the same cpu_adam op on a GPU machine as on a CPU-only one.
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def fill_uniform(count, seed, dtype):
    """tools/bench_adam_memory.cpp fill_uniform(seed, lo=-1, hi=1): same values, same rounding."""
    out = torch.empty(count, dtype=torch.float32)
    chunk = 1 << 22
    with np.errstate(over="ignore"):
        for begin in range(0, count, chunk):
            i = np.arange(begin, min(count, begin + chunk), dtype=np.uint64)
            bits = splitmix64(np.uint64(seed) * np.uint64(0x100000001B3) + i) >> np.uint64(40)
            unit = bits.astype(np.float32) * np.float32(2.0**-24)
            out[begin:begin + len(i)] = torch.from_numpy(np.float32(-1.0) + np.float32(2.0) * unit)
    return out.to(dtype)  # round to nearest even for bf16


def load_deepspeed():
    try:
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        from deepspeed.ops.op_builder import CPUAdamBuilder
        CPUAdamBuilder().load()
    except Exception as e:  # noqa: BLE001 -- any failure means: no peer, and say exactly why
        sys.exit(f"# error: DeepSpeed's cpu_adam could not be imported or JIT-built: {type(e).__name__}: {e}\n"
                 "# It needs `pip install deepspeed`, ninja, a C++ compiler and Python.h (python3-dev); "
                 "the build log is under ~/.cache/torch_extensions/*/cpu_adam.")
    return deepspeed.__version__, DeepSpeedCPUAdam


def run_deepspeed(adam_class, config, count, steps):
    """Returns (seconds of each timed step, params after 1 + steps steps)."""
    dtype = torch.bfloat16 if CONFIGS[config][0] == "bf16" else torch.float32
    params = torch.nn.Parameter(fill_uniform(count, 1, dtype))
    params.grad = fill_uniform(count, 2, dtype)
    opt = adam_class([params], lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, adamw_mode=True,
                     bias_correction=True, fp32_optimizer_states=True)
    times = []
    for step in range(1 + steps):
        start = time.perf_counter()
        opt.step()
        if step > 0:
            times.append(time.perf_counter() - start)
    return times, params.detach()


def run_tierzero(config, count, steps, workdir):
    """Returns (the bench's JSON, params after its 1 + steps steps)."""
    param_dtype, grad_dtype, _ = CONFIGS[config]
    json_path = os.path.join(workdir, f"tierzero_{config}.json")
    params_path = os.path.join(workdir, f"tierzero_{config}.bin")
    cmd = [ARGS.tierzero, "bench", "adam", "--params", str(count), "--threads", str(ARGS.threads), "--no-sweep",
           "--steps", str(steps), "--param-dtype", param_dtype, "--grad-dtype", grad_dtype, "--state-dtype", "fp32",
           "--json", json_path, "--save-params", params_path] + ARGS.bench_args.split()
    if param_dtype == "fp32":
        cmd += ["--params16-dtype", "none"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"# error: {' '.join(cmd)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    with open(json_path) as f:
        report = json.load(f)
    raw = np.fromfile(params_path, dtype=np.uint16 if param_dtype == "bf16" else np.float32)
    params = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16) if param_dtype == "bf16" else torch.from_numpy(raw)
    return report, params


def main():
    ds_version, adam_class = load_deepspeed()
    torch.set_num_threads(ARGS.threads)
    count, steps = ARGS.params, ARGS.steps
    configs = [c.strip() for c in ARGS.configs.split(",")]
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"# error: --configs {c}: unknown, use fp32 and/or bf16")
    print("# benchmarks/adam_vs_deepspeed.py: tierzero bench adam vs DeepSpeedCPUAdam.step, one run")
    print(f"# host: {platform.node()}, {os.cpu_count()} CPUs visible; deepspeed {ds_version}, torch {torch.__version__}")
    print(f"# params {count}, threads {ARGS.threads} (OMP_NUM_THREADS for DeepSpeed, --threads for tierzero), "
          f"{steps} timed steps after 1 warm-up, {ARGS.repeats} alternating runs per implementation")
    print(f"# AdamW lr {LR}, betas {BETAS}, eps {EPS}, weight_decay {WEIGHT_DECAY}, bias correction; m, v fp32")
    print("# Gparam/s: params / median step time, median over runs; ratio = tierzero / DeepSpeed")
    print("# max_abs_dp: max |p_tierzero - p_deepspeed| after the same steps from the same params and grads; "
          "equal%: elements bit-identical")
    header = f"{'config':>7} {'B/param':>7} {'tz_Gp/s':>8} {'ds_Gp/s':>8} {'ratio':>6} {'max_abs_dp':>10} " \
             f"{'tol':>8} {'equal%':>7} {'ok':>4}"
    print(header)
    rows, all_ok = [], True
    with tempfile.TemporaryDirectory() as workdir:
        for config in configs:
            ds_rates, tz_rates, max_dp, equal = [], [], None, None
            for r in range(ARGS.repeats):
                ds_times, ds_params = run_deepspeed(adam_class, config, count, steps)
                ds_rates.append(count / statistics.median(ds_times) / 1e9)
                report, tz_params = run_tierzero(config, count, steps, workdir)
                tz_rates.append(report["rows"][-1]["Gparam/s"])
                if r == 0:
                    diff = (tz_params.float() - ds_params.float()).abs()
                    max_dp = diff.max().item()
                    equal = 100.0 * (diff == 0).double().mean().item()
                del ds_params, tz_params
            tz, ds = statistics.median(tz_rates), statistics.median(ds_rates)
            ok = max_dp <= TOLERANCE[config]
            all_ok &= ok
            rows.append({"config": config, "bytes_per_param": CONFIGS[config][2], "tierzero_gparams": tz,
                         "deepspeed_gparams": ds, "ratio": tz / ds, "tierzero_runs": tz_rates,
                         "deepspeed_runs": ds_rates, "max_abs_dp": max_dp, "tolerance": TOLERANCE[config],
                         "equal_percent": equal, "ok": ok})
            print(f"{config:>7} {CONFIGS[config][2]:>7} {tz:>8.3f} {ds:>8.3f} {tz / ds:>6.2f} {max_dp:>10.2e} "
                  f"{TOLERANCE[config]:>8.1e} {equal:>7.2f} {'OK' if ok else 'FAIL':>4}", flush=True)
    for row in rows:
        print(f"# {row['config']}: tierzero runs {', '.join(f'{x:.3f}' for x in row['tierzero_runs'])}; "
              f"DeepSpeed runs {', '.join(f'{x:.3f}' for x in row['deepspeed_runs'])} Gparam/s")
    print(f"# Result: {'OK' if all_ok else 'FAIL'}")
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump({"title": "adam_vs_deepspeed", "deepspeed": ds_version, "torch": torch.__version__,
                       "params": count, "threads": ARGS.threads, "steps": steps, "repeats": ARGS.repeats,
                       "rows": rows, "ok": all_ok}, f, indent=2)
    return 0 if all_ok else 3


if __name__ == "__main__":
    sys.exit(main())
