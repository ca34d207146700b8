#!/usr/bin/env python3
"""Where a command's disk time goes: idle, reading, writing, or both at once.

Runs a command (e.g. `tierzero bench io --nvme DIR --pipeline ...` or the 14B host64 step) and
samples the block device's in-flight request counts (/sys/block/DEV/inflight: reads, writes) every
--interval-ms until it exits. Each sample is idle (nothing in flight), reading, writing, or both;
the table gives each state's share of the samples and the mean requests in flight, so a pipeline
slower than its disk bound shows whether the disk idled (gaps between transfers) or mixed the two
directions (which costs throughput on virtio disks: bench io's mixed row). The counts are the whole
device's: on a shared machine other processes' I/O is in them.

  python3 benchmarks/disk_inflight.py --path /mnt/nvme --json out.json -- tierzero bench io ...
"""
import argparse
import json
import os
import subprocess
import sys
import time

STATES = ("idle", "reading", "writing", "both")


def device_of(path):
    """The /sys/block name of the disk holding `path` (a partition's parent disk)."""
    dev = os.stat(path).st_dev
    link = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if os.path.exists(os.path.join(link, "partition")):
        link = os.path.dirname(link)
    name = os.path.basename(link)
    if not os.path.exists(f"/sys/block/{name}/inflight"):
        sys.exit(f"disk_inflight.py: {path} is on {name}, which has no /sys/block/{name}/inflight; "
                 "give --device a block device name (lsblk lists them)")
    return name


def state_of(reads, writes):
    if reads and writes:
        return "both"
    return "reading" if reads else "writing" if writes else "idle"


def sample(device, interval, child):
    """Samples until `child` exits: per state, the sample count and the sum of requests in flight."""
    counts = {s: 0 for s in STATES}
    depth = {s: 0 for s in STATES}
    fd = os.open(f"/sys/block/{device}/inflight", os.O_RDONLY)
    try:
        while child.poll() is None:
            reads, writes = (int(x) for x in os.pread(fd, 64, 0).split())
            state = state_of(reads, writes)
            counts[state] += 1
            depth[state] += reads + writes
            time.sleep(interval)
    finally:
        os.close(fd)
    return counts, depth


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", help="a path on the disk to watch (its block device is found)")
    parser.add_argument("--device", help="the block device's name under /sys/block (instead of --path)")
    parser.add_argument("--interval-ms", type=float, default=0.5, help="sampling interval (default 0.5)")
    parser.add_argument("--json", help="also write the shares as JSON here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if bool(args.path) == bool(args.device):
        parser.error("give one of --path (a path on the disk) or --device (its /sys/block name)")
    if args.interval_ms <= 0:
        parser.error("--interval-ms must be > 0")
    device = args.device or device_of(args.path)
    if not os.path.exists(f"/sys/block/{device}/inflight"):
        parser.error(f"/sys/block/{device}/inflight does not exist; lsblk lists the block devices")

    start = time.monotonic()
    child = subprocess.Popen(command)
    counts, depth = sample(device, args.interval_ms / 1000, child)
    seconds = time.monotonic() - start
    total = max(1, sum(counts.values()))
    rows = [{"state": s, "share": counts[s] / total, "seconds": seconds * counts[s] / total,
             "mean_in_flight": depth[s] / counts[s] if counts[s] else 0.0} for s in STATES]
    ok = child.returncode == 0

    print(f"# disk_inflight.py — /sys/block/{device}/inflight every {args.interval_ms} ms")
    print(f"# command: {' '.join(command)}")
    print(f"# samples: {total} over {seconds:.2f} s (the whole device's requests, any process)")
    print(f"{'state':>8} {'share':>7} {'seconds':>9} {'in_flight':>9} {'command_ok':>10}")
    for row in rows:
        print(f"{row['state']:>8} {row['share'] * 100:6.1f}% {row['seconds']:9.3f} {row['mean_in_flight']:9.1f} "
              f"{'yes' if ok else 'no':>10}")
    busy = 1 - rows[0]["share"]
    mixed = rows[3]["share"] / busy if busy > 0 else 0.0
    print(f"# busy {busy * 100:.1f}% of the run; both directions in flight {mixed * 100:.1f}% of the busy time")
    print(f"# Result: {'OK' if ok else 'FAILED (exit ' + str(child.returncode) + ')'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "command": command, "interval_ms": args.interval_ms, "seconds": seconds,
                       "samples": total, "rows": rows, "command_ok": ok}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
