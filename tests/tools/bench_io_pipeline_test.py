#!/usr/bin/env python3
"""`tierzero bench io --pipeline`: two more rows per point, the NVMe optimizer's record pipeline inside
the backward with the records in memory first and spread, each verified (every record read back held
the stamp the pass before wrote) and moving what the shape says: 16 streamed records of --size / 16
read and written in each pass; a summary line each against the disk bound, its figures consistent;
the same bytes with --pipeline-buffers 2 (the buffer count the header names); --record-ms and
--pipeline-buffers without --pipeline refused.

    bench_io_pipeline_test.py --tierzero PATH
"""
import json
import os
import re
import tempfile

from cli_check import fail, run, tierzero_from_args


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-pipeline-") as tmp:
        for flag, value in (("--record-ms", "1"), ("--pipeline-buffers", "2")):
            r = run(tz, "bench", "io", "--path", tmp, "--size", "16MiB", flag, value)
            if r.returncode == 0 or "--pipeline" not in r.stderr:
                fail(f"{flag} without --pipeline was not refused naming --pipeline", r)
        for buffers in (4, 2):
            check_pipeline(tz, tmp, buffers)
    print("OK: bench io --pipeline")


def check_pipeline(tz, tmp, buffers):
    """One run of --pipeline with `buffers` record buffers: its rows and summary lines."""
    report = os.path.join(tmp, "io.json")
    r = run(tz, "bench", "io", "--path", tmp, "--size", "16MiB", "--queue-depth", "4", "--pipeline",
            "--record-ms", "1", "--pipeline-buffers", str(buffers), "--json", report)
    if r.returncode != 0:
        fail("bench io --pipeline failed", r)
    if f"{buffers} buffers" not in r.stdout:
        fail(f"the header does not name the {buffers} buffers", r)
    rows = json.load(open(report))["rows"]
    ops = [row["op"] for row in rows]
    if ops != ["write", "read", "pipe/first", "pipe/spread"]:
        fail(f"rows {ops}, expected write, read, pipe/first, pipe/spread", r)
    for row in rows[2:]:
        if not row["GB/s"] > 0 or row["verified"] != "yes":
            fail(f"pipeline row {row}", r)
    record = (16 << 20) // 16
    for row, name in zip(rows[2:], ("first", "spread")):
        line = re.search(rf"# pipeline, records in memory {name}: ([\d.]+) s a pass \((\d+) bytes read, (\d+) "
                         rf"written; ([\d.]+) s blocked on the disk\), ([\d.]+)x its disk bound ([\d.]+) s", r.stdout)
        if not line:
            fail(f"no summary line for records in memory {name}", r)
        seconds, blocked, ratio, bound = float(line[1]), float(line[4]), float(line[5]), float(line[6])
        if not 0 <= blocked <= seconds:
            fail(f"{name}: {blocked} s blocked on the disk in a pass of {seconds} s", r)
        read, written = int(line[2]), int(line[3])
        # Every streamed record (16 of 1 MiB) read and written once a pass, the kept ones included.
        if read != 16 * record or written != 16 * record:
            fail(f"{name}: {read} bytes read and {written} written a pass, expected {16 * record} each", r)
        if abs(seconds / bound - ratio) > 0.01 * ratio + 0.01:
            fail(f"{name}: {seconds} s / {bound} s is not {ratio}x", r)
        if abs(row["GB/s"] * 1e9 * seconds - (read + written)) > 0.01 * (read + written):
            fail(f"{name}: {row['GB/s']} GB/s over {seconds} s a pass is not {read + written} bytes", r)


if __name__ == "__main__":
    main()
