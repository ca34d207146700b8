#!/usr/bin/env python3
"""A training run with state on NVMe against its disk bound and its estimate (issue 35's 64 GB host):
the median step over the bytes each step moved at `tierzero bench io`'s rates, the host RSS, GPU and
NVMe peaks against their limits, and `tierzero estimate`'s step and tier peaks against the measured
(the pageable tier's over the steps, as the step lines measure it; start-up's buffers are in the
host peak held against the RSS).

    benchmarks/disk_bound.py --metrics TRAIN.jsonl --io BENCH_IO.json --estimate ESTIMATE.json \\
        [--measure MEASURE.json] [--skip 1] [--rss-limit 64GiB] [--nvme-limit 55GiB] [--gpu-limit 24GB] [--json FILE]

TRAIN.jsonl: `tierzero train --metrics` (each step's nvme_read_bytes / nvme_written_bytes, peaks);
BENCH_IO.json: `tierzero bench io --mixed --json` on the NVMe path, same machine and lease;
ESTIMATE.json: `tierzero estimate --json` of the same model and config (with --bench-json of that
bench io, so both use the same rates); MEASURE.json: benchmarks/train_bench_util.py measure's
(peak_rss_bytes: getrusage of the child). The disk bound of a step: read bytes / read GB/s +
written bytes / write GB/s (serial); its overlap model: (read + written) / the mixed pass's GB/s (the
engine reads ahead and writes behind at once); with bench io --pipeline's rows, the step against the
record pipeline's own rate as well, and each step's nvme_wait_s (the optimizer blocked on the disk).
Steps before --skip + 1 are left out (start-up).
Standard library only.
"""
import argparse
import json
import re
import statistics
import sys

from check_rows import CheckRows

UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
         "TIB": 2**40}


def parse_bytes(text):
    m = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", text)
    if not m or m[2].upper() not in UNITS:
        sys.exit(f"disk_bound: '{text}' is not a byte size (e.g. 64GiB, 24GB)")
    return float(m[1]) * UNITS[m[2].upper()]


def rates(io_path):
    rows = json.load(open(io_path)).get("rows", [])
    best = {op: max((r["GB/s"] for r in rows if r.get("op") == op), default=None)
            for op in ("read", "write", "mixed", "pipe/spread")}
    if best["read"] is None or best["write"] is None:
        sys.exit(f"disk_bound: {io_path} lacks a read or write row (run bench io --mixed --json)")
    return best


def steps_peak(items, tier):
    """The estimate's peak of `tier` over the steps: its resident items plus its largest phase,
    start-up's left out (as engine/plan's peak_bytes adds them, without the start-up phase): the step
    lines' peaks this is held against are taken at the steps."""
    resident = sum(i["bytes"] for i in items if i["tier"] == tier and i["phase"] == "resident")
    phases = {}
    for i in items:
        if i["tier"] == tier and i["phase"] not in ("resident", "start-up"):
            phases[i["phase"]] = phases.get(i["phase"], 0) + i["bytes"]
    return resident + max(phases.values(), default=0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--io", required=True)
    parser.add_argument("--estimate", required=True)
    parser.add_argument("--measure")
    parser.add_argument("--skip", type=int, default=1)
    parser.add_argument("--rss-limit", default="64GiB")
    parser.add_argument("--nvme-limit", default="55GiB")
    parser.add_argument("--gpu-limit", default="24GB")
    parser.add_argument("--json")
    args = parser.parse_args()

    steps = [json.loads(line) for line in open(args.metrics)]
    steps = [s for s in steps if s.get("type") == "step"]
    timed = [s for s in steps if s["step"] > args.skip]
    if not timed:
        sys.exit(f"disk_bound: {args.metrics} has no step after step {args.skip}")
    if any("nvme_read_bytes" not in s for s in timed):
        sys.exit(f"disk_bound: {args.metrics}'s steps carry no nvme_read_bytes (a run without state on NVMe, "
                 "or a tierzero before they were written)")
    io = rates(args.io)
    estimate = json.load(open(args.estimate))
    rss = json.load(open(args.measure))["peak_rss_bytes"] if args.measure else None

    step_s = statistics.median(s["step_time_s"] for s in timed)
    serial = statistics.median(s["nvme_read_bytes"] / (io["read"] * 1e9) + s["nvme_written_bytes"] / (io["write"] * 1e9)
                               for s in timed)
    overlap = (statistics.median((s["nvme_read_bytes"] + s["nvme_written_bytes"]) / (io["mixed"] * 1e9) for s in timed)
               if io["mixed"] else None)
    read_gb = statistics.median(s["nvme_read_bytes"] for s in timed) / 1e9
    written_gb = statistics.median(s["nvme_written_bytes"] for s in timed) / 1e9
    peak = {k: max(s[k] for s in steps) for k in ("gpu_peak_bytes", "pinned_bytes", "pageable_bytes", "nvme_bytes")}
    planned = {c["name"]: c["peak_bytes"] for c in estimate.get("checks", [])}
    # The step lines' pageable figure (resident minus pinned at each step) never sees start-up's buffers.
    if "pageable" in planned and "items" in estimate:
        planned["pageable"] = steps_peak(estimate["items"], "pageable")
    checks = CheckRows()
    row = checks.add

    row("median step (s)", f"{step_s:.2f}", f"disk bound {serial:.2f} s serial: {read_gb:.1f} GB read at {io['read']:.2f}"
        f" + {written_gb:.1f} GB written at {io['write']:.2f} GB/s; x 1.15 = {1.15 * serial:.2f}", step_s <= 1.15 * serial)
    if overlap is not None:
        row("median step / overlap model", f"{step_s / overlap:.2f}x",
            f"(read + written) / mixed {io['mixed']:.2f} GB/s = {overlap:.2f} s", None)
    if io["pipe/spread"]:
        pipeline = statistics.median((s["nvme_read_bytes"] + s["nvme_written_bytes"]) / (io["pipe/spread"] * 1e9)
                                     for s in timed)
        row("median step / record pipeline", f"{step_s / pipeline:.2f}x",
            f"(read + written) / bench io --pipeline's spread rate {io['pipe/spread']:.2f} GB/s = {pipeline:.2f} s "
            "(the optimizer's records through RecordCache on this disk, without the GPU)", None)
    if all("nvme_wait_s" in s for s in timed):
        wait = statistics.median(s["nvme_wait_s"] for s in timed)
        row("optimizer blocked on the disk (s)", f"{wait:.2f}",
            f"median nvme_wait_s of the median step's {step_s:.2f} s (the rest the disk did not pace)", None)
    est = estimate["step_seconds"]
    row("estimate's step (s)", f"{est:.2f}", f"measured {step_s:.2f} s, within 15 %", abs(est / step_s - 1) <= 0.15)
    for tier, measured_key in (("gpu allocated", "gpu_peak_bytes"), ("pinned", "pinned_bytes"),
                               ("pageable", "pageable_bytes"), ("nvme", "nvme_bytes")):
        if tier in planned and peak[measured_key]:
            ratio = planned[tier] / peak[measured_key]
            name = "pageable at the steps" if tier == "pageable" else f"{tier} peak"
            row(f"estimate's {name}", f"{planned[tier] / 2**30:.2f} GiB",
                f"measured {peak[measured_key] / 2**30:.2f} GiB ({ratio:.2f}x), within 15 %", abs(ratio - 1) <= 0.15)
    if rss is not None:
        limit = parse_bytes(args.rss_limit)
        row("host RSS peak", f"{rss / 2**30:.2f} GiB", f"<= {args.rss_limit} (getrusage of the child)", rss <= limit)
        if "host" in planned:
            ratio = planned["host"] / rss
            row("estimate's host peak", f"{planned['host'] / 2**30:.2f} GiB",
                f"RSS {rss / 2**30:.2f} GiB ({ratio:.2f}x), within 15 %", abs(ratio - 1) <= 0.15)
    row("GPU peak (allocator)", f"{peak['gpu_peak_bytes'] / 2**30:.2f} GiB", f"<= {args.gpu_limit}",
        peak["gpu_peak_bytes"] <= parse_bytes(args.gpu_limit))
    row("NVMe used", f"{peak['nvme_bytes'] / 2**30:.2f} GiB", f"<= {args.nvme_limit}",
        peak["nvme_bytes"] <= parse_bytes(args.nvme_limit))

    checks.print(f"disk bound: {args.metrics}, {len(timed)} steps after step {args.skip}; bench io {args.io}; "
                 f"estimate {args.estimate}", 12, 90)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"step_s": step_s, "disk_bound_s": serial, "overlap_bound_s": overlap, "rates": io,
                       "peaks": peak, "peak_rss_bytes": rss, "rows": checks.rows}, f, indent=1)
    return 1 if checks.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
