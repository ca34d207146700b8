#!/usr/bin/env python3
"""`tierzero bench tiers`: records streamed through training's offload stack (swap files, pinned
staging, side-stream copies; without a GPU NVMe <-> pinned) give the documented rows, every record
verified, the swap files removed afterwards; `tierzero estimate --bench-json` takes the streams'
GB/s as the NVMe figures; a record size O_DIRECT cannot use is refused naming the flag.

    bench_tiers_test.py --tierzero PATH
"""
import glob
import json
import os
import tempfile

from cli_check import estimate_nvme_run, fail, run, tierzero_from_args


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-tiers-") as tmp:
        nvme = [os.path.join(tmp, "a"), os.path.join(tmp, "b")]
        for path in nvme:
            os.mkdir(path)
        report = os.path.join(tmp, "tiers.json")
        r = run(tz, "bench", "tiers", "--nvme", nvme[0], "--nvme", nvme[1], "--size", "24MiB", "--record", "4MiB",
                "--buffers", "3", "--gpu-budget", "8MiB", "--json", report)
        if r.returncode != 0:
            fail("bench tiers failed", r)
        j = json.load(open(report))
        if j["title"] != "tierzero bench tiers" or not j["ok"]:
            fail(f"title {j['title']!r}, ok {j['ok']}", r)
        rows = {row["what"]: row for row in j["rows"]}
        gpu = "nvme -> gpu (tierzero)" in rows
        streams = ["nvme -> gpu (tierzero)", "gpu -> nvme (tierzero)"] if gpu else \
            ["nvme -> pinned (tz)", "pinned -> nvme (tz)"]
        for what in ["nvme read (raw)", "nvme write (raw)"] + streams:
            if what not in rows:
                fail(f"no row {what!r} in {sorted(rows)}", r)
            if not rows[what]["GB/s"] > 0:
                fail(f"row {rows[what]}", r)
        for what in streams:
            if rows[what]["verified"] != "OK" or rows[what]["bytes"] != "24.00 MiB":
                fail(f"stream row {rows[what]}", r)
        if "striped over 2 path(s)" not in j["params"]["set"]:
            fail(f"set {j['params']['set']!r}", r)
        left = glob.glob(os.path.join(tmp, "*", "tierzero-*"))
        if left:
            fail(f"swap files left behind: {left}", r)

        r = estimate_nvme_run(tz, tmp, report)
        if r.returncode != 0:
            fail("estimate with the tiers file failed", r)
        if "bench tiers " + report not in r.stdout:
            fail("estimate does not name the tiers file as the NVMe figures' source", r)

        r = run(tz, "bench", "tiers", "--nvme", nvme[0], "--size", "1MiB", "--record", "1000")
        if r.returncode == 0 or "--record 1000 must be a nonzero multiple of 4096" not in r.stderr:
            fail("a record size O_DIRECT cannot use was not refused naming --record", r)
    print("OK: bench tiers")


if __name__ == "__main__":
    main()
