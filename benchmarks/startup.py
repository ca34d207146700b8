#!/usr/bin/env python3
"""Start-up of `tierzero train`: from process start to the first step line, where the time went, and
how fast the weights came in against `tierzero bench io`'s read rate on the same path (issue 36).

    benchmarks/startup.py --bin NAME=PATH [--bin NAME=PATH ...] (--model DIR | --model-config JSON)
        --config DS_CONFIG [--repeat N] [--warm] [--header-only] [--json FILE] [-- EXTRA TRAIN FLAGS...]

Each binary trains one step (`--steps 1`) on the same model and config, --repeat times (median
reported), after evicting --model's files from the page cache (benchmarks/page_cache.py, fadvise;
--warm keeps them). The first --bin is the reference: a row's `correct` says whether its step-1
loss and gradient norm are the reference's, bit for bit as printed (the start-up must not change
the weights). --header-only stops each run at its start-up line (a machine where step 1 takes minutes:
no first_line_s, no loss to compare; zero_startup_bits_test checks the state instead). Columns ("-" for a binary that prints no start-up line): first_line_s (process start to the first step line, the issue's figure),
startup_s (to the run header: everything before step 1), engine_s (building the engine), weights_s
(of which inside the weights' reads or draws), busy (the cores busy meanwhile: the process's CPU
seconds over weights_s; about 1 says the draws or reads ran on one core), rest_s (buffers, splitting, first writes), of which
pinned_s (the pinned buffers: allocated, faulted in, registered with CUDA), params_s (the 16-bit
parameters cast from the reads, first NVMe parameter writes) and optim_s (the optimizer's state: the
master split, first record writes; "-" for a binary before this breakdown), file_GBps
(the safetensors bytes a read pass takes over weights_s; the engine may read them more than once),
vs_io (file_GBps / bench io's sequential O_DIRECT read GB/s on the model's directory, with --model),
fp32_GBps (the fp32 bytes the reads or draws gave, over weights_s, every pass counted) and per_core
(fp32_GBps over this machine's allowed cores).
Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STARTUP = re.compile(r"start-up ([\d.-]+) s since the process started: model, config and data ([\d.]+) s, "
                     r"engine ([\d.]+) s \(weights (read|drawn) ([\d.]+) s, ([\d.]+) GB as fp32[,;] (.*)\)")
# The engine's time besides the weights: phase by phase, or (a binary before them) in one figure.
PHASES = re.compile(r"[\d.]+ GB/s on ([\d.]+) cores busy; besides them: pinned buffers ([\d.-]+) s, set-up ([\d.-]+) s, "
                    r"16-bit parameters ([\d.-]+) s, optimizer state ([\d.-]+) s")
REST = re.compile(r"buffers, splitting and first writes ([\d.-]+) s")
STEP = re.compile(r"^step\s+1/\d+\s+loss (\S+)\s.*grad-norm (\S+)")
PARAMS = re.compile(r"(\d+) parameters")


def safetensors_bytes(model_dir):
    return sum(os.path.getsize(os.path.join(model_dir, n)) for n in os.listdir(model_dir) if n.endswith(".safetensors"))


def bench_io_read(binary, path):
    """Sequential O_DIRECT read GB/s of `tierzero bench io` in `path` (1 GiB, its defaults)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, "bench", "io", "--nvme", path, "--json", out.name], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = json.load(open(out.name))
    rates = [r["GB/s"] for r in results.get("rows", []) if r.get("op") == "read"]
    if not rates:
        sys.exit(f"startup: bench io's JSON has no read row: {results}")
    return max(rates)


def run_once(binary, args, extra):
    source = ["--model", args.model] if args.model else ["--model-config", args.model_config]
    if args.model and not args.warm:
        subprocess.run([sys.executable, os.path.join(HERE, "page_cache.py"), "evict", "--method", "fadvise", args.model],
                       check=True, stdout=subprocess.DEVNULL)
    cmd = [binary, "train", *source, "--config", args.config, "--steps", "1", *extra]
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    row, log = {"first_line_s": None}, []
    for line in proc.stdout:
        log.append(line)
        if (m := STARTUP.search(line)):
            row.update(startup_s=float(m[1]), before_engine_s=float(m[2]), engine_s=float(m[3]), weights=m[4],
                       weights_s=float(m[5]), weights_fp32_gb=float(m[6]))
            if (p := PHASES.search(m[7])):
                row.update(cores_busy=float(p[1]), pinned_s=float(p[2]), setup_s=float(p[3]), params_s=float(p[4]),
                           optimizer_s=float(p[5]))
                row["rest_s"] = sum(float(p[i]) for i in range(2, 6))
            elif (r := REST.search(m[7])):
                row["rest_s"] = float(r[1])
            if args.header_only:
                proc.kill()
        elif (m := PARAMS.search(line)) and "params" not in row:
            row["params"] = int(m[1])
        elif (m := STEP.match(line)) and row["first_line_s"] is None:
            row.update(first_line_s=time.monotonic() - start, loss=m[1], grad_norm=m[2])
    if args.header_only and "startup_s" in row:
        proc.wait()
        return dict(row, loss="-", grad_norm="-")
    if proc.wait() != 0 or row["first_line_s"] is None:
        sys.exit(f"startup: {' '.join(cmd)} failed (exit {proc.returncode}):\n{''.join(log[-20:])}")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", action="append", required=True, help="NAME=PATH of a tierzero binary")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model")
    source.add_argument("--model-config")
    parser.add_argument("--config", required=True)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warm", action="store_true", help="leave the model's files in the page cache")
    parser.add_argument("--header-only", action="store_true", help="stop each run at its start-up line")
    parser.add_argument("--json")
    args, extra = parser.parse_known_args()
    extra = [e for e in extra if e != "--"]
    binaries = [b.split("=", 1) for b in args.bin]
    file_bytes = safetensors_bytes(args.model) if args.model else 0
    io_gbps = bench_io_read(binaries[-1][1], args.model) if args.model else None
    what = args.model or args.model_config
    print(f"# start-up: tierzero train --steps 1, {what} ({'HF directory, ' + ('warm' if args.warm else 'cold') + ' page cache' if args.model else 'random init'}), "
          f"{args.config}; median of {args.repeat}" + (f"; bench io read {io_gbps:.2f} GB/s on {args.model}" if io_gbps else ""))
    cores = len(os.sched_getaffinity(0))
    header = (f"{'binary':<10}{'first_line_s':>13}{'startup_s':>10}{'engine_s':>9}{'weights_s':>10}{'busy':>6}{'rest_s':>8}"
              f"{'pinned_s':>9}{'params_s':>9}{'optim_s':>8}{'file_GBps':>10}{'vs_io':>7}{'fp32_GBps':>10}{'per_core':>9}  {'step-1 loss / grad-norm':<26}"
              f"{'correct':>8}")
    print(header)
    rows, reference = [], None
    for name, binary in binaries:
        runs = [run_once(binary, args, extra) for _ in range(args.repeat)]
        row = dict(runs[0])
        for key in ("startup_s", "before_engine_s", "engine_s", "weights_s", "cores_busy", "rest_s",
                    "pinned_s", "setup_s", "params_s", "optimizer_s"):
            row[key] = statistics.median(r[key] for r in runs) if key in row else None  # a binary before the line
        firsts = [r["first_line_s"] for r in runs if r["first_line_s"] is not None]
        row["first_line_s"] = statistics.median(firsts) if firsts else None
        fp32_bytes = row["params"] * 4
        one_pass_gb = file_bytes / 1e9
        row["file_gbps"] = (row["weights_fp32_gb"] * 1e9 / fp32_bytes * one_pass_gb / row["weights_s"]
                            if file_bytes and row["weights_s"] else None)
        row["vs_io"] = row["file_gbps"] / io_gbps if row["file_gbps"] and io_gbps else None
        row["fp32_gbps"] = row["weights_fp32_gb"] / row["weights_s"] if row.get("weights_s") else None
        if reference is None:
            reference = (row["loss"], row["grad_norm"])
        row["correct"] = None if args.header_only else all((r["loss"], r["grad_norm"]) == reference for r in runs)
        row.update(binary=name, path=binary, runs=runs)
        rows.append(row)
        gbps = f"{row['file_gbps']:.2f}" if row["file_gbps"] else "-"
        ratio = f"{row['vs_io']:.2f}" if row["vs_io"] else "-"
        phases = "".join(f"{'-' if row[k] is None else f'{row[k]:.1f}':>{w}}"
                         for k, w in (("startup_s", 10), ("engine_s", 9), ("weights_s", 10), ("cores_busy", 6), ("rest_s", 8),
                                      ("pinned_s", 9), ("params_s", 9), ("optimizer_s", 8)))
        fp32 = (f"{row['fp32_gbps']:>10.2f}{row['fp32_gbps'] / cores:>9.3f}" if row["fp32_gbps"] else f"{'-':>10}{'-':>9}")
        first = "-" if row["first_line_s"] is None else f"{row['first_line_s']:.1f}"
        print(f"{name:<10}{first:>13}{phases}{gbps:>10}{ratio:>7}{fp32}  "
              f"{row['loss'] + ' / ' + row['grad_norm']:<26}{'-' if row['correct'] is None else 'yes' if row['correct'] else 'NO':>8}")
    print(f"# {len(rows)} binaries, {cores} cores, {file_bytes / 1e9:.2f} GB of safetensors; correct: step-1 loss and grad-norm "
          f"equal to {binaries[0][0]}'s" + ("" if all(r["correct"] is not False for r in rows) else "; SOME DIFFER"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": what, "config": args.config, "warm": args.warm, "file_bytes": file_bytes,
                       "bench_io_read_gbps": io_gbps, "rows": rows}, f, indent=1)
    return 0 if all(r["correct"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
