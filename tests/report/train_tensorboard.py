#!/usr/bin/env python3
"""`tierzero train --tensorboard DIR` read back by TensorBoard's own EventAccumulator.

  train_tensorboard.py --tierzero BUILD/tools/tierzero

Trains the built-in tiny model 3 steps with --metrics and --tensorboard, evaluating 5% held out
after step 2 and at the end, then checks that every step and eval line of the metrics file is in
the event file: each metric under its tag (train/loss, train/lr, train/grad_norm,
train/tokens_per_s, train/epoch, memory/*_GiB, time/* when the step has a breakdown; eval/loss and
eval/perplexity) at the step's number, equal to the JSON value as float32.
Exit 0 when every check passes, 1 when one fails, 77 (ctest's skip) without tensorboard.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"tensorboard is not installed ({e}); pip install tensorboard")
    sys.exit(77)

GIB = float(1 << 30)
TAGS = {"loss": ("train/loss", 1), "lr": ("train/lr", 1), "grad_norm": ("train/grad_norm", 1),
        "tokens_per_s": ("train/tokens_per_s", 1), "tflops": ("train/tflops", 1),
        "step_time_s": ("train/step_time_s", 1), "gpu_peak_bytes": ("memory/gpu_peak_GiB", GIB),
        "gpu_reserved_bytes": ("memory/gpu_reserved_GiB", GIB), "pinned_bytes": ("memory/pinned_GiB", GIB),
        "pageable_bytes": ("memory/pageable_GiB", GIB), "nvme_bytes": ("memory/nvme_GiB", GIB),
        "epoch": ("train/epoch", 1)}
EVAL_TAGS = {"loss": ("eval/loss", 1), "perplexity": ("eval/perplexity", 1)}


def float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tierzero", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierzero-tensorboard-") as work:
        metrics, logdir = os.path.join(work, "run.jsonl"), os.path.join(work, "tb", "run1")
        subprocess.run([args.tierzero, "train", "--steps", "3", "--eval-fraction", "0.05", "--eval-every", "2",
                        "--metrics", metrics, "--tensorboard", logdir],
                       check=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
        with open(metrics) as f:
            lines = list(map(json.loads, f))
        steps = [line for line in lines if line["type"] == "step"]
        evals = [line for line in lines if line["type"] == "eval"]
        accumulator = EventAccumulator(logdir, size_guidance={"scalars": 0})
        accumulator.Reload()
        read = {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}
    failures = []
    expected_tags = set()
    for step in steps + evals:
        tags = TAGS if step["type"] == "step" else EVAL_TAGS
        fields = [(key, step[key]) for key in tags]
        fields += [(f"breakdown.{k}", v) for k, v in step.get("breakdown", {}).items()]
        for key, value in fields:
            if key.startswith("breakdown."):
                tag, scale = "time/" + key.split(".", 1)[1], 1
            else:
                tag, scale = tags[key]
            if value is None:
                continue
            expected_tags.add(tag)
            got = read.get(tag, {}).get(step["step"])
            if got != float32(value / scale):
                failures.append(f"step {step['step']} {tag}: event file {got}, metrics file {value / scale}")
    if len(steps) != 3:
        failures.append(f"{len(steps)} step lines in the metrics file, 3 expected")
    if [e["step"] for e in evals] != [2, 3]:
        failures.append(f"eval lines after steps {[e['step'] for e in evals]}, [2, 3] expected")
    if set(read) != expected_tags:
        failures.append(f"tags {sorted(read)}, expected {sorted(expected_tags)}")
    for failure in failures:
        print("FAIL: " + failure)
    print(f"{len(steps)} steps, {len(evals)} evaluations, {len(read)} tags: " + ("every value read back" if not failures else "mismatches"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
