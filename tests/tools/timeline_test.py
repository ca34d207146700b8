#!/usr/bin/env python3
"""benchmarks/timeline.py over `train --profile`'s traces: a CPU run with the optimizer offloaded
(on the GPU where there is one) holds tierzero's spans on the engine's own threads (the optimizer's pieces on tz-optimizer, the
norms of the gradients that landed straight in the partition on tz-grad-landing: one micro-batch a step) beside the training thread's ops; a hand-made GPU trace gives
the busy time (over the window and over the run's median step from a metrics file), copy rate and idle
gaps worked out by hand, and a thread Kineto named twice takes the
name the engine gave it; a file that is no trace is refused.

    timeline_test.py --tierzero PATH
"""
import json
import os
import sys
import tempfile

from cli_check import REPO, fail, run, tierzero_from_args

TIMELINE = os.path.join(REPO, "benchmarks", "timeline.py")


def check_cpu_run(tz, tmp):
    config = os.path.join(tmp, "ds_config.json")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
                   "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                         "offload_param": {"device": "cpu"}},
                   "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
                   "tierzero": {"data": {"path": os.path.join(REPO, "configs", "data", "tiny_corpus.u16"),
                                         "seq_len": 32, "seed": 7}}}, f)
    trace = os.path.join(tmp, "trace.json")
    train = run(tz, "train", "--config", config, "--steps", "3", "--profile", trace)
    if train.returncode != 0:
        fail("train --profile failed", train)
    figures = os.path.join(tmp, "timeline.json")
    t = run(sys.executable, TIMELINE, trace, "--json", figures)
    if t.returncode != 0 or "# Result: OK" not in t.stdout:
        fail("timeline.py on the CPU trace", t)
    r = json.load(open(figures))
    spans = {(s["thread"].split(" (")[-1].rstrip(")"), s["span"]): s for s in r["spans"]}
    # Kineto names a thread "thread N (COMM)": COMM is the name the engine gave it.
    for thread, span in (("tz-optimizer", "tierzero::adam"), ("tz-optimizer", "tierzero::optimizer_step"),
                         ("tz-grad-landing", "tierzero::grad_norms")):
        if (thread, span) not in spans or spans[(thread, span)]["total_s"] <= 0:
            fail(f"no {span} on {thread} in the trace's spans {sorted(spans)}", t)
    step = spans[("tz-optimizer", "tierzero::optimizer_step")]["total_s"]
    adam = spans[("tz-optimizer", "tierzero::adam")]["total_s"]
    if not adam <= step + 1e-6:
        fail(f"the Adam pieces ({adam} s) outlast the optimizer step that holds them ({step} s)", t)
    # The trainer takes the GPU where there is one; its done line says "peak gpu -" where there is none.
    if "peak gpu - " in train.stdout:
        if r["gpu_busy_fraction"] is not None or r["idle_gaps"]:
            fail("a CPU run reports GPU busy time or idle gaps", t)
    elif not (r["gpu_busy_fraction"] is not None and 0 < r["gpu_busy_fraction"] <= 1
              and all(g["idle_ms"] > 0 for g in r["idle_gaps"])):
        fail(f"a GPU run's busy fraction {r['gpu_busy_fraction']} or idle gaps {r['idle_gaps']}", t)
    if not all(0 <= x["busy_fraction"] <= 1 for x in r["tracks"]) or r["window_s"] <= 0:
        fail(f"tracks {r['tracks']} over a window of {r['window_s']} s", t)


def check_gpu_trace(tmp):
    """Kernels on two streams, one copy, a memset and the host's wait, in ms from 0: the window is
    0-100 ms, kernels [0,10] + [5,20] + [50,60], memset [70,75]: busy 35 ms; idle gaps [20,50],
    [60,70], [75,100]: 65 ms, the longest while the training thread waited for the optimizer
    (tierzero::wait_optimizer [22,48]: 26 ms of it); 2e9 bytes host to device in 20 ms: 100 GB/s."""
    ms = 1000.0

    def x(cat, name, pid, tid, start, end, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": 1e9 + start * ms,
                "dur": (end - start) * ms, "args": args}

    events = [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "thread 1 (tierzero)"}},
        # Named twice, as Kineto does for a thread the engine renamed: the program's name wins.
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "thread 2 (tz-optimizer)"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 2, "args": {"name": "thread 2 (tierzero)"}},
        x("user_annotation", "tierzero::adam", 7, 2, 30, 40),
        x("kernel", "gemm", 0, 7, 0, 10), x("kernel", "gemm", 0, 7, 5, 20), x("kernel", "flash", 0, 8, 50, 60),
        x("gpu_memset", "Memset", 0, 7, 70, 75),
        x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, 9, 20, 40, bytes=2_000_000_000),
        x("gpu_user_annotation", "tierzero::adam", 0, 7, 0, 100),  # a projection, not GPU work
        x("user_annotation", "tierzero::wait_optimizer", 7, 1, 22, 48), x("cpu_op", "aten::mm", 7, 1, 90, 100),
    ]
    path = os.path.join(tmp, "gpu_trace.json")
    json.dump({"traceEvents": events}, open(path, "w"))
    # The run's metrics: step 1 (start-up's, left out) and three steps whose median is 50 ms.
    metrics = os.path.join(tmp, "train.jsonl")
    with open(metrics, "w") as f:
        f.write(json.dumps({"type": "run", "stage": 3}) + "\n")
        for step, seconds in ((1, 9.0), (2, 0.06), (3, 0.04), (4, 0.05)):
            f.write(json.dumps({"type": "step", "step": step, "step_time_s": seconds}) + "\n")
    figures = os.path.join(tmp, "gpu_timeline.json")
    t = run(sys.executable, TIMELINE, path, "--metrics", metrics, "--json", figures)
    if t.returncode != 0:
        fail("timeline.py on the hand-made GPU trace", t)
    r = json.load(open(figures))
    expect = {"window_s": 0.100, "gpu_busy_s": 0.035, "gpu_busy_fraction": 0.35, "idle_gaps_total_s": 0.065,
              "median_step_s": 0.05, "gpu_busy_of_median_step": 0.7}
    for key, value in expect.items():
        if abs(r[key] - value) > 1e-9:
            fail(f"{key} {r[key]}, worked out by hand {value}", t)
    gaps = [(round(g["start_ms"], 6), round(g["idle_ms"], 6)) for g in r["idle_gaps"]]
    if gaps != [(20.0, 30.0), (75.0, 25.0), (60.0, 10.0)]:
        fail(f"idle gaps {gaps}, expected [20,50], [75,100], [60,70] longest first", t)
    if not r["idle_gaps"][0]["during"].startswith("tierzero::wait_optimizer") or "26.0 ms" not in r["idle_gaps"][0]["during"]:
        fail(f"the longest gap's spans: {r['idle_gaps'][0]['during']}", t)
    adam = [x["thread"] for x in r["spans"] if x["span"] == "tierzero::adam"]
    if adam != ["thread 2 (tz-optimizer)"]:
        fail(f"tierzero::adam on {adam}: a thread named twice takes the name the program gave it", t)
    h2d = [c for c in r["copies"] if c["direction"] == "H2D"]
    if len(h2d) != 1 or abs(h2d[0]["GBps"] - 100.0) > 1e-6 or h2d[0]["bytes"] != 2_000_000_000:
        fail(f"copies {r['copies']}: 2e9 bytes in 20 ms is 100 GB/s", t)


def check_refused(tmp):
    path = os.path.join(tmp, "not_a_trace.json")
    open(path, "w").write("{\"rows\": []}")
    t = run(sys.executable, TIMELINE, path)
    if t.returncode == 0 or path not in t.stderr:
        fail("a JSON file without traceEvents was not refused naming it", t)
    metrics = os.path.join(tmp, "one_step.jsonl")
    open(metrics, "w").write(json.dumps({"type": "step", "step": 1, "step_time_s": 2.0}) + "\n")
    t = run(sys.executable, TIMELINE, os.path.join(tmp, "gpu_trace.json"), "--metrics", metrics)
    if t.returncode == 0 or metrics not in t.stderr or "2+ steps" not in t.stderr:
        fail("a metrics file without a step after the first was not refused naming it and the fix", t)


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-timeline-") as tmp:
        check_cpu_run(tz, tmp)
        check_gpu_trace(tmp)
        check_refused(tmp)
    print("OK: benchmarks/timeline.py")


if __name__ == "__main__":
    main()
