#!/usr/bin/env python3
"""`tierzero bench io --mixed`: a third row per point, reads and writes in turn, verified (its writes
are the pattern the verify pass checks); `tierzero estimate --bench-json` of that file prices an
optimizer on NVMe at the read and write rows, one direction at a time, not at the mixed row (the
engine's disk traffic is runs of one direction: engine/plan/time_terms.cpp).

    bench_io_mixed_test.py --tierzero PATH
"""
import json
import os
import tempfile

from cli_check import estimate_nvme_run, fail, run, tierzero_from_args


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-mixed-") as tmp:
        report = os.path.join(tmp, "io.json")
        r = run(tz, "bench", "io", "--path", tmp, "--size", "16MiB", "--queue-depth", "4", "--mixed", "--json", report)
        if r.returncode != 0:
            fail("bench io --mixed failed", r)
        rows = json.load(open(report))["rows"]
        ops = [row["op"] for row in rows]
        if ops != ["write", "read", "mixed"]:
            fail(f"rows {ops}, expected write, read, mixed", r)
        mixed = rows[2]
        if not mixed["GB/s"] > 0 or mixed["verified"] != "yes":
            fail(f"mixed row {mixed}", r)

        r = estimate_nvme_run(tz, tmp, report)
        if r.returncode != 0:
            fail("estimate with a bench io --mixed file failed", r)
        nvme = [line for line in r.stdout.splitlines() if line.startswith("nvme ") and "GB/s" in line]
        write, read = rows[0]["GB/s"], rows[1]["GB/s"]
        if len(nvme) != 1 or f"/ {read:.2f} GB/s + write" not in nvme[0] or f"/ {write:.2f} GB/s" not in nvme[0]:
            fail(f"estimate's nvme term is not the reads at {read:.2f} plus the writes at {write:.2f} GB/s", r)
        if "mixed" in nvme[0]:
            fail("estimate's nvme term names the mixed row", r)
    print("OK: bench io --mixed")


if __name__ == "__main__":
    main()
