#!/usr/bin/env python3
"""`tierzero bench io --mixed`: a third row per point, reads and writes in turn, verified (its writes
are the pattern the verify pass checks); `tierzero estimate --bench-json` takes its GB/s for the NVMe
time of an optimizer on NVMe.

    bench_io_mixed_test.py --tierzero PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(message, result=None):
    detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result is not None else ""
    sys.exit(f"FAIL: {message}{detail}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tierzero", required=True)
    tz = p.parse_args().tierzero
    with tempfile.TemporaryDirectory(prefix="tierzero-mixed-") as tmp:
        report = os.path.join(tmp, "io.json")
        r = subprocess.run([tz, "bench", "io", "--path", tmp, "--size", "16MiB", "--queue-depth", "4", "--mixed",
                            "--json", report], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("bench io --mixed failed", r)
        rows = json.load(open(report))["rows"]
        ops = [row["op"] for row in rows]
        if ops != ["write", "read", "mixed"]:
            fail(f"rows {ops}, expected write, read, mixed", r)
        mixed = rows[2]
        if not mixed["GB/s"] > 0 or mixed["verified"] != "yes":
            fail(f"mixed row {mixed}", r)

        config = os.path.join(tmp, "ds_config.json")
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                   "zero_optimization": {"stage": 3, "sub_group_size": 1e6,
                                         "offload_optimizer": {"device": "nvme", "nvme_path": tmp}},
                   "tierzero": {"data": {"seq_len": 16}}}, open(config, "w"))
        model = os.path.join(REPO, "benchmarks", "models", "llama_tiny.json")
        r = subprocess.run([tz, "estimate", "--model-config", model, "--config", config, "--bench-json", report],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail("estimate with the mixed figure failed", r)
        if f"mixed {mixed['GB/s']:.2f} GB/s" not in r.stdout or "GB/s mixed" not in r.stdout:
            fail("estimate does not use the mixed figure", r)
    print("OK: bench io --mixed")


if __name__ == "__main__":
    main()
