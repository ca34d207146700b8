"""Shared by the tests/tools scripts: the repository root, the --tierzero argument, running a
command, failing with its output, and an estimate of an NVMe-optimizer run from a bench JSON file."""
import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tierzero_from_args(doc):
    """The --tierzero PATH argument of a test script documented by `doc`."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--tierzero", required=True)
    return p.parse_args().tierzero


def run(*args, timeout=600):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def estimate_nvme_run(tz, tmp, bench_json):
    """`tierzero estimate` of the tiny Llama, ZeRO-3 with the optimizer on NVMe under `tmp` (where its
    ds_config is written), with the machine figures of `bench_json`."""
    config = os.path.join(tmp, "ds_config.json")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                   "zero_optimization": {"stage": 3, "sub_group_size": 1e6,
                                         "offload_optimizer": {"device": "nvme", "nvme_path": tmp}},
                   "tierzero": {"data": {"seq_len": 16}}}, f)
    model = os.path.join(REPO, "benchmarks", "models", "llama_tiny.json")
    return run(tz, "estimate", "--model-config", model, "--config", config, "--bench-json", bench_json)


def fail(message, result=None):
    """Exits with FAIL: `message`, and the command's output when there is one."""
    detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result is not None else ""
    sys.exit(f"FAIL: {message}{detail}")
