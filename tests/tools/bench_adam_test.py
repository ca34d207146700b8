#!/usr/bin/env python3
"""`tierzero bench adam`'s correctness column against PyTorch's fused AdamW, layout by layout: an fp32
master within a few ulp; the compact master (bf16 weights + int16 residual) with fp32 moments equal
to it bit for bit (the exact master: max |dp| 0) and its self-check exact; bf16 and 8-bit moments
within their stated tolerances. A compact run whose residual was lost at start-up differs by half a
bf16 ulp (~2e-3) and fails here. The compact + 8-bit run's gpu line is "none (why)" without a CUDA
device, else its bytes equal step_portable's ("(exact)").

    bench_adam_test.py --tierzero PATH
"""
import json
import os
import tempfile

from cli_check import fail, run, tierzero_from_args

# (flags, the largest max |p_tierzero - p_torch| allowed after 2 steps at lr 1e-3, self_check)
CASES = [
    ([], 1e-6, "n/a"),
    (["--master", "compact", "--moments", "fp32"], 0.0, "exact"),
    (["--master", "compact", "--moments", "bf16"], 0.02 * 1e-3 * 2, "exact"),
    (["--master", "compact", "--moments", "int8"], 2 * 1e-3 * 2, "exact"),
]


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-bench-adam-") as tmp:
        report = os.path.join(tmp, "adam.json")
        for flags, limit, self_check in CASES:
            r = run(tz, "bench", "adam", "--threads", "1", "--no-sweep", "--steps", "2", "--params", "200000",
                    *flags, "--json", report)
            if r.returncode != 0:
                fail(f"bench adam {' '.join(flags)} failed", r)
            row = json.load(open(report))["rows"][0]
            dp = float(row["max_abs_dp"])
            if dp > limit or row["ok"] != "OK":
                fail(f"bench adam {' '.join(flags)}: max |dp| {dp} against torch (allowed {limit}), ok {row['ok']}", r)
            if row["self_check"] != self_check:
                fail(f"bench adam {' '.join(flags)}: self_check {row['self_check']}, expected {self_check}", r)
            gpu = json.load(open(report))["summary"].get("gpu")
            if "int8" in flags and not (gpu.startswith("none (") or gpu.endswith("(exact)")):
                fail(f"bench adam {' '.join(flags)}: gpu line '{gpu}': neither none nor exact", r)
            if "int8" not in flags and gpu is not None:
                fail(f"bench adam {' '.join(flags)}: a gpu line '{gpu}' for a layout step_on_gpu does not take", r)
    print("OK: bench adam's correctness column")


if __name__ == "__main__":
    main()
