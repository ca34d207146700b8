#!/usr/bin/env python3
"""One step's timeline from `tierzero train --profile FILE` (a Chrome trace of LibTorch's profiler):
where the step's time went on each track, how busy the GPU was, what the host was doing while the
GPU sat idle (issue 36's "measure first").

    benchmarks/timeline.py TRACE.json [--gap-ms 1] [--gaps 8] [--metrics TRAIN.jsonl] [--json FILE]

The window is the traced step: from its first recorded event to the end of its last (the training
thread's ops, tierzero's own threads, and on a GPU every kernel and copy). Tracks: each CPU thread
(its ops and tierzero's named spans, "tierzero::..."), each GPU stream (kernels and memsets), and
the copies by direction. busy_s is the union of a track's intervals (nested events count once).
GPU busy: the union of every kernel and memset on the device, over the window (issue 36 wants
>= 75 %). Idle gaps: the stretches longer than --gap-ms with no kernel running, each with the
tierzero spans that overlap it most (what the GPU waited for). Spans: every tierzero span by thread,
its count and total seconds. Copies: bytes each direction over the union of its copies.
The traced step joins its own optimizer before the trace ends (so the trace holds it whole), where
an untraced step lets it run on into the next forward: with --metrics (train's --metrics file of
the same run) the GPU busy time is also given over the run's median step (steps after the first),
the step's share of GPU work in steady state.
Standard library only.
"""
import argparse
import collections
import json
import statistics
import sys

GPU_CATS = {"kernel", "gpu_memset"}
COPY_CAT = "gpu_memcpy"


def union(intervals):
    """Merged, sorted (start, end) list of `intervals`."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(intervals):
    return sum(e - s for s, e in intervals)


def overlap(a_start, a_end, intervals):
    return sum(max(0.0, min(a_end, e) - max(a_start, s)) for s, e in intervals)


def copy_direction(name):
    for key, label in (("HtoD", "H2D"), ("DtoH", "D2H"), ("DtoD", "D2D"), ("HtoH", "H2H")):
        if key in name:
            return label
    return "other"


def load(path):
    try:
        trace = json.load(open(path))
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"timeline: {path} is not a readable Chrome trace ({e}); pass the file `train --profile` wrote")
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        sys.exit(f"timeline: {path} has no traceEvents list; pass the file `train --profile` wrote")
    # A thread may be named twice (Kineto records its name before and after the engine renamed it):
    # the name whose command part is the rarest across threads is the one the program gave it.
    given = collections.defaultdict(set)
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            given[(e.get("pid"), e.get("tid"))].add(e.get("args", {}).get("name", ""))
    comm = collections.Counter(name.rsplit("(", 1)[-1] for options in given.values() for name in options)
    names = {key: min(sorted(options), key=lambda name: comm[name.rsplit("(", 1)[-1]])
             for key, options in given.items()}
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") not in (None, "Trace")
             and e.get("cat") != "gpu_user_annotation"]
    if not spans:
        sys.exit(f"timeline: {path} holds no timed events; was the step traced (the profile: line of train)?")
    return spans, names


def analyse(spans, names, gap_us, gap_count):
    start = min(e["ts"] for e in spans)
    end = max(e["ts"] + e["dur"] for e in spans)
    window = end - start
    tracks = collections.defaultdict(list)  # (kind, label) -> intervals
    kernels = []
    copies = collections.defaultdict(lambda: {"intervals": [], "bytes": 0, "count": 0})
    tz_spans = collections.defaultdict(lambda: {"count": 0, "us": 0.0, "intervals": []})
    for e in spans:
        interval = (e["ts"], e["ts"] + e["dur"])
        cat = e.get("cat")
        key = (e.get("pid"), e.get("tid"))
        if cat in GPU_CATS:
            kernels.append(interval)
            tracks[("gpu", names.get(key) or f"device {key[0]} stream {key[1]}")].append(interval)
        elif cat == COPY_CAT:
            c = copies[copy_direction(e.get("name", ""))]
            c["intervals"].append(interval)
            c["bytes"] += int(e.get("args", {}).get("bytes", 0))
            c["count"] += 1
        else:
            thread = names.get(key) or f"thread {key[1]}"
            tracks[("cpu", thread)].append(interval)
            if e.get("name", "").startswith("tierzero::"):
                s = tz_spans[(thread, e["name"])]
                s["count"] += 1
                s["us"] += e["dur"]
                s["intervals"].append(interval)
    busy = union(kernels)
    gaps = []
    cursor = start
    for s, e in (busy + [(end, end)]) if kernels else []:  # no kernel: a CPU run, no GPU to be idle
        if s - cursor > gap_us:
            gaps.append((cursor, s))
        cursor = max(cursor, e)
    gaps.sort(key=lambda g: g[0] - g[1])
    gap_rows = []
    for g_start, g_end in gaps[:gap_count]:
        cover = sorted(((overlap(g_start, g_end, union(s["intervals"])), name, thread)
                        for (thread, name), s in tz_spans.items()), reverse=True)
        during = [f"{name} ({thread}) {us / 1e3:.1f} ms" for us, name, thread in cover[:2] if us > 0]
        gap_rows.append({"start_ms": (g_start - start) / 1e3, "idle_ms": (g_end - g_start) / 1e3,
                         "during": "; ".join(during) or "-"})
    return {
        "window_s": window / 1e6,
        "gpu_busy_s": length(busy) / 1e6,
        "gpu_busy_fraction": length(busy) / window if kernels else None,
        "idle_gaps_total_s": sum(e - s for s, e in gaps) / 1e6,
        "idle_gaps": gap_rows,
        "tracks": [{"kind": kind, "track": label, "events": len(iv), "busy_s": length(union(iv)) / 1e6,
                    "busy_fraction": length(union(iv)) / window}
                   for (kind, label), iv in sorted(tracks.items())],
        "copies": [{"direction": d, "count": c["count"], "bytes": c["bytes"],
                    "busy_s": length(union(c["intervals"])) / 1e6,
                    "GBps": c["bytes"] / length(union(c["intervals"])) / 1e3 if c["intervals"] else 0.0}
                   for d, c in sorted(copies.items())],
        "spans": [{"thread": thread, "span": name, "count": s["count"], "total_s": s["us"] / 1e6,
                   "union_s": length(union(s["intervals"])) / 1e6}
                  for (thread, name), s in sorted(tz_spans.items())],
    }


def median_step_s(path):
    """The median step_time_s of the steps after the first in train's --metrics file `path`."""
    with open(path) as f:
        steps = [r["step_time_s"] for r in map(json.loads, f) if r.get("type") == "step" and r.get("step", 0) > 1]
    if not steps:
        sys.exit(f"timeline: {path} holds no step after the first; pass train's --metrics file of a run of 2+ steps")
    return statistics.median(steps)


def report(path, r, gap_ms):
    print(f"# tierzero timeline — {path}")
    print(f"# window: {r['window_s']:.4f} s, the traced step's first event to the end of its last")
    busy = "-" if r["gpu_busy_fraction"] is None else f"{100 * r['gpu_busy_fraction']:.1f} %"
    print(f"# GPU busy (any kernel or memset running): {r['gpu_busy_s']:.4f} s = {busy} of the window; "
          f"idle gaps over {gap_ms:g} ms: {r['idle_gaps_total_s']:.4f} s")
    if r.get("median_step_s") is not None and r["gpu_busy_fraction"] is not None:
        print(f"# GPU busy over the run's median step (--metrics, steps after the first): {r['gpu_busy_s']:.4f} s / "
              f"{r['median_step_s']:.4f} s = {100 * r['gpu_busy_of_median_step']:.1f} % (the window also holds "
              f"the step's own optimizer, joined for the trace)")
    ok_all = True
    print(f"{'kind':<5}{'track':<44}{'events':>8}{'busy_s':>10}{'busy_%':>8}{'ok':>5}")
    for t in r["tracks"]:
        ok = 0 <= t["busy_fraction"] <= 1 + 1e-9
        ok_all = ok_all and ok
        print(f"{t['kind']:<5}{t['track'][:43]:<44}{t['events']:>8}{t['busy_s']:>10.4f}"
              f"{100 * t['busy_fraction']:>8.1f}{'yes' if ok else 'NO':>5}")
    if r["copies"]:
        print(f"# copies by direction: bytes over the union of their intervals")
        print(f"{'direction':<10}{'count':>8}{'bytes':>16}{'busy_s':>10}{'GB/s':>9}{'ok':>5}")
        for c in r["copies"]:
            ok = c["busy_s"] <= r["window_s"] + 1e-9
            ok_all = ok_all and ok
            print(f"{c['direction']:<10}{c['count']:>8}{c['bytes']:>16}{c['busy_s']:>10.4f}{c['GBps']:>9.2f}"
                  f"{'yes' if ok else 'NO':>5}")
    if r["spans"]:
        print(f"# tierzero spans by thread: count, summed and union seconds")
        print(f"{'thread':<30}{'span':<34}{'count':>7}{'total_s':>10}{'union_s':>10}{'ok':>5}")
        for s in r["spans"]:
            # Kineto's timestamps are microseconds since boot with three decimals: each interval's
            # end, ts + dur, is rounded by ~1 ns, so a union may exceed the summed durations by that
            # much per event; double counting would exceed it by whole events.
            slack = s["count"] * 1e-7
            ok = s["union_s"] <= s["total_s"] + slack and s["union_s"] <= r["window_s"] + slack
            ok_all = ok_all and ok
            print(f"{s['thread'][:29]:<30}{s['span'][:33]:<34}{s['count']:>7}{s['total_s']:>10.4f}"
                  f"{s['union_s']:>10.4f}{'yes' if ok else 'NO':>5}")
    if r["idle_gaps"]:
        print(f"# the longest GPU idle gaps and the tierzero spans overlapping them most")
        print(f"{'start_ms':>10}{'idle_ms':>10}  during")
        for g in r["idle_gaps"]:
            print(f"{g['start_ms']:>10.1f}{g['idle_ms']:>10.1f}  {g['during']}")
    print(f"# Result: {'OK' if ok_all else 'FAILED (a track busy longer than the window)'}")
    return ok_all


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--gap-ms", type=float, default=1.0, help="GPU idle stretches longer than this (default 1)")
    parser.add_argument("--gaps", type=int, default=8, help="how many of the longest gaps to list (default 8)")
    parser.add_argument("--metrics", help="train's --metrics file of the traced run: GPU busy over its median step")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if args.gap_ms < 0 or args.gaps < 0:
        sys.exit("timeline: --gap-ms and --gaps must be >= 0")
    spans, names = load(args.trace)
    r = analyse(spans, names, args.gap_ms * 1e3, args.gaps)
    if args.metrics:
        r["median_step_s"] = median_step_s(args.metrics)
        r["gpu_busy_of_median_step"] = r["gpu_busy_s"] / r["median_step_s"] if r["gpu_busy_fraction"] is not None else None
    ok = report(args.trace, r, args.gap_ms)
    if args.json:
        json.dump(r, open(args.json, "w"), indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
