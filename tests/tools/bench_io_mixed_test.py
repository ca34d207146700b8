#!/usr/bin/env python3
"""`tierzero bench io --mixed`: a third row per point, reads and writes in turn, verified (its writes
are the pattern the verify pass checks); `tierzero estimate --bench-json` takes its GB/s for the NVMe
time of an optimizer on NVMe.

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
            fail("estimate with the mixed figure failed", r)
        if f"mixed {mixed['GB/s']:.2f} GB/s" not in r.stdout or "GB/s mixed" not in r.stdout:
            fail("estimate does not use the mixed figure", r)
    print("OK: bench io --mixed")


if __name__ == "__main__":
    main()
