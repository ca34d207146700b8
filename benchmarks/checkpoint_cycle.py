#!/usr/bin/env python3
"""A compact checkpoint's whole cycle on one disk (issue 35): its bytes per parameter, how soon it is
durable against `tierzero bench io`'s write rate on the same path, resume bit for bit, and convert of
it equal to the export of the same state. Sized for a disk that holds one checkpoint and one 16-bit
model at a time (the GPU box: a 7.6B's int8 checkpoint is 46 GB of ~62 GiB free).

    benchmarks/checkpoint_cycle.py --tierzero BIN [--model-config M.json] --config C.json --data F \\
        --work DIR [--steps 4] [--save-at 2] [--phases saved,convert,resumed,unbroken,io] [--json FILE]

Every `tierzero train` runs with --full-determinism: without it, two runs on a GPU differ in the last
bits of the attention backward's gradients (flash attention's dq sums with atomics), so neither the
saved nor the resumed run could equal the unbroken one.

Phases (each `tierzero train` logs to WORK/NAME.log and writes WORK/NAME.jsonl; state stays in WORK,
so phases may run in separate calls, e.g. `--phases saved,convert` then `--phases resumed,unbroken,io`):
  saved     train --steps K --save WORK/ckpt --export WORK/export: the final save's bytes and durable
            seconds (its metrics save line); the export is hashed (sha256 of each tensor's bytes) and removed
  convert   tierzero convert WORK/ckpt WORK/converted, hashed the same way and removed
  resumed   train --resume WORK/ckpt --steps N: the losses of steps K+1..N
  unbroken  train --steps N: the losses of steps 1..N, without a checkpoint
  io        tierzero bench io --nvme WORK --new-file --end-fsync: the write rate of a new file made durable
The table's `correct` column: saved's losses = unbroken's 1..K and resumed's = unbroken's K+1..N, as
the metrics files hold them (JSON doubles, exact); convert's tensors = export's; durable within 1.2 x
bytes / write rate. Standard library only.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from check_rows import CheckRows  # noqa: E402
from compare_safetensors import tensor_entries  # noqa: E402

PHASES = ("saved", "convert", "resumed", "unbroken", "io")


def progress(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(cmd, log_path):
    """Runs cmd with its output in log_path; exits naming the log when it fails."""
    progress(" ".join(cmd))
    with open(log_path, "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                              env=dict(os.environ, TIERZERO_NO_PROGRESS="1")).returncode
    if code != 0:
        with open(log_path) as log:
            tail = log.readlines()[-15:]
        sys.exit(f"checkpoint_cycle: {' '.join(cmd)} failed (exit {code}); {log_path}:\n{''.join(tail)}")


def train(args, name, *flags):
    jsonl = os.path.join(args.work, name + ".jsonl")
    model = ["--model-config", args.model_config] if args.model_config else []
    run([args.tierzero, "train", *model, "--config", args.config, "--data", args.data, "--metrics", jsonl,
         "--full-determinism", *flags],
        os.path.join(args.work, name + ".log"))


def metrics(args, name):
    """(losses by step, save lines) of WORK/NAME.jsonl."""
    losses, saves = {}, []
    with open(os.path.join(args.work, name + ".jsonl")) as f:
        for line in map(json.loads, f):
            if line.get("type") == "step":
                losses[line["step"]] = line["loss"]
            elif line.get("type") == "save":
                saves.append(line)
    return losses, saves


def tensor_hashes(model_dir):
    """{tensor name: (dtype, shape, sha256 of its bytes)} of the directory's safetensors files."""
    hashes = {}
    for name, dtype, shape, path, offset, left in tensor_entries(model_dir):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            f.seek(offset)
            while left:
                piece = f.read(min(left, 64 << 20))
                digest.update(piece)
                left -= len(piece)
        hashes[name] = (dtype, tuple(shape), digest.hexdigest())
    return hashes


def hash_and_remove(args, directory, name):
    progress(f"hashing {directory}")
    hashes = tensor_hashes(directory)
    with open(os.path.join(args.work, name + ".hashes.json"), "w") as f:
        json.dump({k: list(v) for k, v in hashes.items()}, f)
    shutil.rmtree(directory)


def bench_io_write(args):
    out = os.path.join(args.work, "io.json")
    run([args.tierzero, "bench", "io", "--nvme", args.work, "--size", args.io_size, "--new-file", "--end-fsync",
         "--json", out], os.path.join(args.work, "io.log"))
    with open(out) as f:
        rows = json.load(f).get("rows", [])
    rates = [r["GB/s"] for r in rows if r.get("op") == "write"]
    if not rates:
        sys.exit(f"checkpoint_cycle: {out} has no write row")
    with open(os.path.join(args.work, "io_write_gbps.json"), "w") as f:
        json.dump(max(rates), f)


def report(args):
    def load(name):
        path = os.path.join(args.work, name)
        return json.load(open(path)) if os.path.exists(path) else None

    have = lambda name: os.path.exists(os.path.join(args.work, name + ".jsonl"))
    saved_losses, saves = metrics(args, "saved") if have("saved") else ({}, [])
    resumed_losses = metrics(args, "resumed")[0] if have("resumed") else {}
    unbroken = metrics(args, "unbroken")[0] if have("unbroken") else {}
    export, converted, write_gbps = load("export.hashes.json"), load("converted.hashes.json"), load("io_write_gbps.json")
    params = None
    if os.path.exists(os.path.join(args.work, "saved.log")):
        for line in open(os.path.join(args.work, "saved.log")):
            if " parameters (" in line:
                params = int(line.split(" parameters (")[0].split()[-1])
                break
    save = saves[-1] if saves else None
    checks = CheckRows()
    row = checks.add
    if save:
        row("checkpoint bytes / parameter", f"{save['bytes'] / params:.3f}" if params else "-",
            f"{save['bytes']} B / {params} params", None)
        bound = 1.2 * save["bytes"] / (write_gbps * 1e9) if write_gbps else None
        row("durable after (s)", f"{save['durable_s']:.2f}",
            f"1.2 x bytes / bench io {write_gbps:.2f} GB/s = {bound:.2f}" if bound else "no bench io",
            save["durable_s"] <= bound if bound else None)
    if unbroken and saved_losses:
        same = all(saved_losses[s] == unbroken.get(s) for s in saved_losses)
        row("saved run's losses", f"steps 1-{max(saved_losses)}", "unbroken run's, bit for bit", same)
    if unbroken and resumed_losses:
        same = all(resumed_losses[s] == unbroken.get(s) for s in resumed_losses)
        row("resumed run's losses", f"steps {min(resumed_losses)}-{max(resumed_losses)}", "unbroken run's, bit for bit",
            same)
    if export and converted:
        row("convert of the checkpoint", f"{len(converted)} tensors", f"export of the same state, {len(export)} tensors",
            converted == export)

    checks.print(f"checkpoint cycle: {args.model_config or 'the built-in tiny model'}, {args.config}, {args.steps} "
                 f"steps, saved at step {args.save_at}, in {args.work}", 14, 52)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": args.steps, "save_at": args.save_at, "save": save, "bench_io_write_gbps": write_gbps,
                       "rows": checks.rows}, f, indent=1)
    return 1 if checks.failed() else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--model-config", help="the model's config.json (default: the built-in tiny model)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work", required=True, help="a directory on the disk under test (created)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--save-at", type=int, default=2)
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--io-size", default="4GiB")
    parser.add_argument("--json")
    args = parser.parse_args()
    phases = args.phases.split(",")
    unknown = [p for p in phases if p not in PHASES]
    if unknown or not 0 < args.save_at < args.steps:
        sys.exit(f"checkpoint_cycle: phases are {', '.join(PHASES)} (got {', '.join(unknown)}); "
                 f"--save-at must lie in 1..--steps - 1")
    os.makedirs(args.work, exist_ok=True)
    ckpt = os.path.join(args.work, "ckpt")
    if "saved" in phases:
        shutil.rmtree(ckpt, ignore_errors=True)
        export = os.path.join(args.work, "export")
        shutil.rmtree(export, ignore_errors=True)
        train(args, "saved", "--steps", str(args.save_at), "--save", ckpt, "--export", export)
        hash_and_remove(args, export, "export")
    if "convert" in phases:
        converted = os.path.join(args.work, "converted")
        shutil.rmtree(converted, ignore_errors=True)
        run([args.tierzero, "convert", ckpt, converted], os.path.join(args.work, "convert.log"))
        hash_and_remove(args, converted, "converted")
    if "resumed" in phases:
        train(args, "resumed", "--steps", str(args.steps), "--resume", ckpt)
    if "unbroken" in phases:
        train(args, "unbroken", "--steps", str(args.steps))
    if "io" in phases:
        bench_io_write(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
