#!/usr/bin/env python3
"""What a periodic save costs the run when it streams out beside the next step (docs/design.md,
"Saves that overlap training"), on the CPU: the same training run twice, with `--save-every E` and
without periodic saves, every step printed. Reports the steps that ran beside a save against the
median step of the run without saves, the optimizer's wait the `saved` lines print, and what a
synchronous save of the same state costs (the final save: from the last step's line to `done:`).

  benchmarks/save_overlap.py --tierzero build/tools/tierzero --config C.json --model-config M.json \\
      --steps 9 --save-every 2
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STEP = re.compile(r"^step\s+(\d+)/\d+ .*\s([\d.]+)s\s+epoch")
SAVED = re.compile(r"^\s*saved .*/global_step(\d+) \(written during step (\d+); its optimizer waited ([\d.]+) s")


def run(argv):
    """Runs argv; returns [(seconds since start, line)] of its output."""
    start = time.monotonic()
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1")
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = [(time.monotonic() - start, line.rstrip("\n")) for line in process.stdout]
    if process.wait() != 0:
        sys.exit("failed: " + " ".join(argv) + "\n" + "\n".join(line for _, line in lines[-20:]))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--model-config", required=True)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--save-every", type=int, default=2)
    args = parser.parse_args()
    with open(args.config) as f:
        config = json.load(f)
    config["steps_per_print"] = 1
    scratch = tempfile.mkdtemp(prefix="tierzero-save-overlap-")
    config_path = os.path.join(scratch, "config.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    base = [args.tierzero, "train", "--config", config_path, "--model-config", args.model_config, "--steps",
            str(args.steps)]
    try:
        plain = run(base + ["--save", os.path.join(scratch, "plain")])
        saving = run(base + ["--save", os.path.join(scratch, "saving"), "--save-every", str(args.save_every)])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    def steps(lines):
        return {int(m.group(1)): float(m.group(2)) for m in (STEP.match(line) for _, line in lines) if m}

    def final_save_seconds(lines):
        last = max(t for t, line in lines if STEP.match(line))
        return next(t for t, line in lines if line.startswith("done:")) - last

    plain_steps, saving_steps = steps(plain), steps(saving)
    saves = [(int(m.group(1)), int(m.group(2)), float(m.group(3)))
             for m in (SAVED.match(line) for _, line in saving) if m]
    beside = {during for _, during, _ in saves}
    median = statistics.median(s for step, s in plain_steps.items() if step > 1)
    print(f"steps {args.steps}, --save-every {args.save_every}; median step without saves {median:.3f} s")
    print("step  without  with-saves")
    for step in sorted(plain_steps):
        mark = "  (beside a save)" if step in beside else ""
        print(f"{step:4d}  {plain_steps[step]:7.3f}  {saving_steps.get(step, float('nan')):10.3f}{mark}")
    extra = [saving_steps[step] - median for step in sorted(beside) if step in saving_steps]
    for saved, during, waited in saves:
        print(f"save of step {saved}: written during step {during} ({saving_steps.get(during, float('nan')):.3f} s); "
              f"the optimizer waited {waited:.3f} s")
    if extra:
        print(f"steps beside a save: mean {statistics.mean(extra):+.3f} s vs the median step without saves")
    print(f"a synchronous save of the same state (the final one): {final_save_seconds(saving):.3f} s "
          f"(without periodic saves: {final_save_seconds(plain):.3f} s)")


if __name__ == "__main__":
    main()
