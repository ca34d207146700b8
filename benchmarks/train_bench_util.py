#!/usr/bin/env python3
"""Plumbing of benchmarks/train_vs_deepspeed.sh, one subcommand per job:

  model    --shape benchmarks/models/X.json --out DIR    random-init Llama or Qwen2 (the shape's model_type),
           [--vocab V --max-pos P --seed S]               save_pretrained in bf16; --vocab / --max-pos override
                                                          the shape's vocab_size / max_position_embeddings
  shape    NAME                                           the shape file of --shape NAME: benchmarks/models/
                                                          llama_NAME.json, else NAME with '-' -> '_' (qwen2.5-7b
                                                          -> qwen2.5_7b.json), else NAME as a path
  count    --model DIR                                    its parameters (from the safetensors headers)
  tokens   --out FILE --tokens N --vocab V --seed S      random ids as a TZTOKENS file (uint16 when
                                                          V <= 65536, else uint32; engine/data/token_data.h)
  config   --base F --out F [--micro M --accum A --seq S --bf16 0|1] [--set KEY.PATH=JSON ...]
           [--unset KEY.PATH ...]                         the ds_config both engines read, overrides applied
                                                          (--set: any key by its dotted path, a JSON value;
                                                          --unset: remove a key, e.g. scheduler)
  measure  --json F --log F --timeout S -- CMD...       runs CMD, output to the log; records its exit
                                                          status and peak RSS (getrusage of the child:
                                                          the same figure /usr/bin/time -v reports)
  tierzero-steps --log F --json F                        the step lines of a `tierzero train` log as JSON
  table    --dir D --shape F --warmup W                  the fixed-width table of every run in D, and D/summary.json

Only the standard library except `model` (torch, transformers).
"""
import argparse
import json
import os
import re
import resource
import signal
import statistics
import struct
import subprocess
import sys
import time

# ---- model -----------------------------------------------------------------------------------


ARCHITECTURES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM")}


def cmd_model(a):
    import torch
    import transformers

    with open(a.shape) as f:
        shape = json.load(f)
    model_type = shape.get("model_type", "llama")
    if model_type not in ARCHITECTURES:
        sys.exit(f"model: {a.shape}: model_type {model_type!r} is not one of {sorted(ARCHITECTURES)}")
    config_class, model_class = (getattr(transformers, name) for name in ARCHITECTURES[model_type])
    shape = {k: v for k, v in shape.items() if k not in ("architectures", "model_type", "torch_dtype")}
    if a.vocab:
        shape["vocab_size"] = a.vocab
    if a.max_pos:
        shape["max_position_embeddings"] = a.max_pos
    config = config_class(**shape)
    torch.manual_seed(a.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = model_class(config).to(torch.bfloat16)
    model.save_pretrained(a.out, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    print(f"# model: {a.shape} -> {a.out}: {model_class.__name__}, {n} parameters, vocab {config.vocab_size}, "
          f"bf16, seed {a.seed}")


def shape_file(name, models_dir="benchmarks/models"):
    """The shape file `--shape NAME` names (see the module docstring), or None."""
    for candidate in (os.path.join(models_dir, f"llama_{name}.json"),
                      os.path.join(models_dir, name.replace("-", "_") + ".json"), name):
        if os.path.isfile(candidate):
            return candidate
    return None


def cmd_shape(a):
    path = shape_file(a.name)
    if path is None:
        sys.exit(f"no model shape {a.name!r}: none of benchmarks/models/llama_{a.name}.json, "
                 f"benchmarks/models/{a.name.replace('-', '_')}.json, {a.name}")
    print(path)


def cmd_count(a):
    """Parameters in a model directory's safetensors files (their headers: 8-byte length, JSON)."""
    import glob
    import math

    total = 0
    for path in glob.glob(os.path.join(a.model, "*.safetensors")):
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
    print(total)


# ---- tokens ----------------------------------------------------------------------------------


def cmd_tokens(a):
    import random

    width = 2 if a.vocab <= 65536 else 4
    rng = random.Random(a.seed)
    with open(a.out, "wb") as out:
        out.write(b"TZTOKENS" + struct.pack("<IIQQ", 1, width, a.tokens, 0))
        chunk = 1 << 20
        for begin in range(0, a.tokens, chunk):
            n = min(chunk, a.tokens - begin)
            ids = [rng.randrange(a.vocab) for _ in range(n)]
            out.write(struct.pack(f"<{n}{'H' if width == 2 else 'I'}", *ids))
    print(f"# tokens: {a.tokens} random ids < {a.vocab}, seed {a.seed} -> {a.out}")


# ---- config ----------------------------------------------------------------------------------


def cmd_config(a):
    with open(a.base) as f:
        config = json.load(f)
    if a.micro:
        config["train_micro_batch_size_per_gpu"] = a.micro
    if a.accum:
        config["gradient_accumulation_steps"] = a.accum
    if a.seq:
        config.setdefault("tierzero", {}).setdefault("data", {})["seq_len"] = a.seq
    if a.bf16 is not None:
        config["bf16"] = {"enabled": bool(a.bf16)}
    for assignment in a.set or []:
        path, sep, value = assignment.partition("=")
        if not sep or not path:
            sys.exit(f"config --set {assignment!r}: expected KEY.PATH=JSON, e.g. zero_optimization.stage=3")
        *parents, leaf = path.split(".")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        try:
            node[leaf] = json.loads(value)
        except json.JSONDecodeError as e:
            sys.exit(f"config --set {assignment!r}: the value is not JSON ({e}); quote strings as '\"text\"'")
    # --unset after --set: removing a section wins over a --set inside it
    for path in a.unset or []:
        *parents, leaf = path.split(".")
        node = config
        for key in parents:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(leaf, None)
    with open(a.out, "w") as f:
        json.dump(config, f, indent=2)


# ---- measure ---------------------------------------------------------------------------------


def cmd_measure(a):
    start = time.monotonic()
    with open(a.log, "w") as log:
        child = subprocess.Popen(a.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = child.wait(timeout=a.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            rc = child.wait()
            timed_out = True
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = {"cmd": a.command, "rc": rc, "timed_out": timed_out, "wall_s": time.monotonic() - start,
              "peak_rss_bytes": usage.ru_maxrss * 1024}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
    sys.exit(0 if rc == 0 else 1)


# ---- tierzero's step lines -------------------------------------------------------------------

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
STEP = re.compile(r"^step\s+(\d+)/(\d+)\s+loss (\S+)\s+lr \S+\s+grad-norm \S+\s+(\S+) tok/s\s+\S+ TFLOPS\s+"
                  r"gpu-peak (-|[\d.]+ \w+)\s+gpu-reserved (-|[\d.]+ \w+)\s+pinned ([\d.]+ \w+)\s+"
                  r"pageable ([\d.]+ \w+)\s+nvme ([\d.]+ \w+)\s+([\d.]+)s")
# wall_clock_breakdown's part of a step line (engine/train/step_report.cpp) and the header's choice of
# where offloaded gradients accumulate (engine/train/session_report.cpp).
TIMES = re.compile(r"\[time forward (\S+)s backward (\S+)s grad-d2h (\S+)s cpu-optimizer (\S+)s param-h2d (\S+)s "
                   r"comm (\S+)s gpu-idle (\S+)s\]")
TIME_KEYS = ["forward_s", "backward_s", "grad_d2h_s", "cpu_optimizer_s", "param_h2d_s", "comm_s", "gpu_idle_s"]
NVME_IO = re.compile(r"\[nvme-io read ([\d.]+ \w+) written ([\d.]+ \w+)\]")
ACCUMULATOR = re.compile(r"^\s*offloaded gradients accumulate on the (.*)$")


def parse_bytes(text):
    if text == "-":
        return None
    number, unit = text.split()
    return int(float(number) * UNITS[unit])


def tierzero_steps(log_path):
    """The step lines of a tierzero train log, and the header's gradient accumulator choice (or None)."""
    steps, accumulator = [], None
    with open(log_path, errors="replace") as f:
        for line in f:
            a = ACCUMULATOR.match(line)
            if a:
                accumulator = a[1]
            m = STEP.match(line)
            if m:
                step = {"step": int(m[1]), "loss": float(m[3]), "step_time_s": float(m[10]),
                        "gpu_peak_bytes": parse_bytes(m[5]), "gpu_reserved_bytes": parse_bytes(m[6]),
                        "pinned_bytes": parse_bytes(m[7]), "pageable_bytes": parse_bytes(m[8])}
                t = TIMES.search(line)
                if t:
                    step["times"] = dict(zip(TIME_KEYS, map(float, t.groups())))
                n = NVME_IO.search(line)
                if n:
                    step["nvme_read_bytes"], step["nvme_written_bytes"] = parse_bytes(n[1]), parse_bytes(n[2])
                steps.append(step)
    return steps, accumulator


def cmd_tierzero_steps(a):
    steps, accumulator = tierzero_steps(a.log)
    with open(a.json, "w") as f:
        json.dump({"steps": steps, "grad_accumulator": accumulator}, f, indent=2)


# ---- table -----------------------------------------------------------------------------------


def flops_per_token(shape, seq_len):
    """engine/model/model_config.cpp training_flops_per_token: 6 x matmul params + attention."""
    h, i, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    heads = shape["num_attention_heads"]
    kv_heads = shape.get("num_key_value_heads", heads)
    head_dim = shape.get("head_dim", h // heads)
    q, kv = heads * head_dim, kv_heads * head_dim
    layer = h * (q + 2 * kv) + q * h + 3 * h * i
    return 6.0 * (layers * layer + shape["vocab_size"] * h) + 12.0 * layers * heads * head_dim * seq_len


def gib(n):
    return "-" if n is None else f"{n / (1 << 30):.2f}"


def summarise(run_dir, name, tokens_per_step, flops_token, warmup):
    """One row from RUN_DIR/NAME.steps.json and NAME.measure.json; None fields when the run failed."""
    row = {"run": name, "ok": False}
    measure_path = os.path.join(run_dir, name + ".measure.json")
    steps_path = os.path.join(run_dir, name + ".steps.json")
    if os.path.exists(measure_path):
        with open(measure_path) as f:
            m = json.load(f)
        row.update(rc=m["rc"], timed_out=m["timed_out"], peak_rss_bytes=m["peak_rss_bytes"])
    steps = []
    if os.path.exists(steps_path):
        with open(steps_path) as f:
            recorded = json.load(f)
        steps = recorded["steps"]
        row["grad_accumulator"] = recorded.get("grad_accumulator")
    timed_steps = steps[warmup:] or steps
    timed = [s["step_time_s"] for s in timed_steps]
    with_times = [s for s in timed_steps if "times" in s]
    if with_times:
        row["times"] = {k: statistics.median(s["times"][k] for s in with_times) for k in TIME_KEYS}
    if not timed:
        return row
    median = statistics.median(timed)
    peaks = [s["gpu_peak_bytes"] for s in steps if s.get("gpu_peak_bytes") is not None]
    row.update(ok=row.get("rc") == 0, steps=len(steps), timed_steps=len(timed), step_time_s=median,
               tokens_per_s=tokens_per_step / median, tflops=tokens_per_step * flops_token / median / 1e12,
               gpu_peak_bytes=max(peaks) if peaks else None, final_loss=steps[-1]["loss"])
    return row


# tierzero's start-up warnings about precision keys it does not honour (engine/config: "unknown key
# 'PATH' (ignored)", or a "warned unless" key): such a run kept another state than its config asks for.
PRECISION_KEYS = ("bf16.bf16_master_weights_and_grads", "bf16.bf16_optimizer_states", "tierzero.master_weights",
                  "tierzero.optimizer_state_dtype", "tierzero.offload_grad_dtype")


def config_warnings(log_path):
    """The `warning:` lines of a tierzero train log (its config's warnings among them)."""
    if not os.path.exists(log_path):
        return []
    with open(log_path, errors="replace") as f:
        return [line.strip() for line in f if line.startswith("warning:")]


def engine_state(log_path):
    """(master, moments) from the first state line of a tierzero train log (the offloaded optimizer's
    description, "compact master (...), 8-bit moments", or "state layout: master compact, m + v int8"), or None."""
    if not os.path.exists(log_path):
        return None
    with open(log_path, errors="replace") as f:
        for line in f:
            m = re.search(r"state layout: master (\w+), m \+ v (\w+)", line)
            if m:
                return m[1], m[2]
            m = re.search(r"\b(compact|fp32) master\b.*?(8-bit|BFloat16|bf16|Float|fp32) moments", line)
            if m:
                return m[1], {"8-bit": "int8", "BFloat16": "bf16", "Float": "fp32"}.get(m[2], m[2])
    return None


def tierzero_state(ds, warnings, log_path):
    """The master and moments a tierzero run keeps: its log's own state line when it has one (`=` when that is
    what the config asks, `!` when not), else its ds_config's (`?`); IGNORED when a precision key was warned
    about (then the run did not keep what the config says)."""
    t = ds.get("tierzero", {})
    asked = (t.get("master_weights", "fp32"), t.get("optimizer_state_dtype", "fp32"))
    ignored = [k for k in PRECISION_KEYS if any(f"'{k}'" in w or f" {k} " in w for w in warnings)]
    said = engine_state(log_path)
    state = f"{said[0]}/{said[1]} {'=' if said == asked else '!'}" if said else f"{asked[0]}/{asked[1]} ?"
    return state + (" IGNORED" if ignored else ""), ignored


def print_breakdown(rows):
    """Where tierzero's step went (runs with wall_clock_breakdown), with GPU busy % and the step over the
    slowest resource: GPU (forward + backward, waits included), PCIe (gradient D2H + weight H2D; parameter
    fetches not counted), CPU optimizer. Each row's correctness column: the run finished (ok)."""
    timed = [r for r in rows if r.get("times") and r.get("step_time_s")]
    if not timed:
        return
    print("# breakdown (tierzero, wall_clock_breakdown): medians in seconds; busy = 1 - gpu-idle / step; "
          "vs_max = step / max(fwd + bwd, d2h + h2d, cpu-opt)")
    print(f"# {'config':<24} {'fwd':>6} {'bwd':>6} {'d2h':>6} {'cpu-opt':>7} {'h2d':>6} {'comm':>6} {'idle':>6} "
          f"{'busy%':>6} {'vs_max':>6}  status  grads")
    for row in timed:
        t, step = row["times"], row["step_time_s"]
        slowest = max(t["forward_s"] + t["backward_s"], t["grad_d2h_s"] + t["param_h2d_s"], t["cpu_optimizer_s"])
        row["gpu_busy"] = 1.0 - t["gpu_idle_s"] / step
        row["step_over_slowest"] = step / slowest if slowest > 0 else None
        over = f"{row['step_over_slowest']:.2f}" if row["step_over_slowest"] else "-"
        print(f"  {row['config']:<24} {t['forward_s']:6.3f} {t['backward_s']:6.3f} {t['grad_d2h_s']:6.3f} "
              f"{t['cpu_optimizer_s']:7.3f} {t['param_h2d_s']:6.3f} {t['comm_s']:6.3f} {t['gpu_idle_s']:6.3f} "
              f"{100 * row['gpu_busy']:6.1f} {over:>6}  {'ok' if row['ok'] else 'FAIL':<6}  "
              f"{row.get('grad_accumulator') or '-'}")


def cmd_table(a):
    with open(a.shape) as f:
        shape = json.load(f)
    with open(os.path.join(a.dir, "plan.json")) as f:
        plan = json.load(f)
    rows = []
    for config in plan["configs"]:
        with open(os.path.join(a.dir, config + ".ds_config.json")) as f:
            ds = json.load(f)
        seq = ds["tierzero"]["data"]["seq_len"]
        tokens_per_step = ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * seq
        for engine in plan["engines"]:
            row = summarise(a.dir, f"{config}.{engine}", tokens_per_step, flops_per_token(shape, seq), a.warmup)
            row.update(config=config, engine=engine)
            if engine == "tierzero":
                log_path = os.path.join(a.dir, f"{config}.{engine}.log")
                row["warnings"] = config_warnings(log_path)
                row["state"], row["ignored_keys"] = tierzero_state(ds, row["warnings"], log_path)
            else:
                steps_path = os.path.join(a.dir, f"{config}.{engine}.steps.json")
                held = None
                if os.path.exists(steps_path):
                    with open(steps_path) as f:
                        held = json.load(f).get("precision")
                row["state"] = f"{held['master']}/{held['moments']}" if held else "-"
            rows.append(row)
    print(f"# train_vs_deepspeed: {plan['shape']} ({plan['parameters']} parameters), {plan['steps']} steps, "
          f"median of steps after {a.warmup} warm-up, tokens/step from each ds_config")
    print(f"# {plan['machine']}")
    print("# step_s: median step wall time; TFLOPS: model FLOPs (6N + attention, tierzero's formula) / step_s;")
    print("# peak_gpu: tierzero's step-line peak (allocator peak since the step began, max over steps) / "
          "torch.cuda.max_memory_allocated reset per step for DeepSpeed;")
    print("# peak_rss: the process's peak resident set (getrusage of the child, as /usr/bin/time -v); "
          "ratio: tierzero tok/s / DeepSpeed tok/s")
    print("# state: master/moments kept (DeepSpeed: read back from its engine; tierzero: its log's state line, "
          "'=' as the config asks, '!' not; '?' the config's, no state line; IGNORED: a precision key warned ignored)")
    header = f"# {'config':<24} {'engine':<9} {'step_s':>8} {'tok/s':>9} {'TFLOPS':>7} {'peak_gpu_GiB':>12} " \
             f"{'peak_rss_GiB':>12} {'loss':>8} {'ratio':>6} {'state':<22} status"
    print(header)
    for row in rows:
        other = next((r for r in rows if r["config"] == row["config"] and r["engine"] == "deepspeed"), None)
        ratio = "-"
        if row["engine"] == "tierzero" and row.get("tokens_per_s") and other and other.get("tokens_per_s"):
            ratio = f"{row['tokens_per_s'] / other['tokens_per_s']:.2f}"
            row["ratio_vs_deepspeed"] = row["tokens_per_s"] / other["tokens_per_s"]
        status = "ok" if row["ok"] else ("TIMEOUT" if row.get("timed_out") else f"FAIL rc={row.get('rc', '-')}")
        fmt = lambda key, spec: format(row[key], spec) if row.get(key) is not None \
            else format("-", ">" + spec.split(".")[0])  # noqa: E731
        print(f"  {row['config']:<24} {row['engine']:<9} {fmt('step_time_s', '8.3f')} {fmt('tokens_per_s', '9.0f')} "
              f"{fmt('tflops', '7.1f')} {gib(row.get('gpu_peak_bytes')):>12} {gib(row.get('peak_rss_bytes')):>12} "
              f"{fmt('final_loss', '8.4f')} {ratio:>6} {row.get('state', '-'):<22} {status}")
    ignored = [r for r in rows if r.get("ignored_keys")]
    for row in ignored:
        print(f"# {row['config']}.tierzero ignored precision keys of its config: "
              + "; ".join(w for w in row["warnings"] if any(k in w for k in row["ignored_keys"])))
    print(f"# {len(rows)} runs, {sum(1 for r in rows if r['ok'])} ok, {len(ignored)} with precision keys ignored")
    print_breakdown(rows)
    with open(os.path.join(a.dir, "summary.json"), "w") as f:
        json.dump({"plan": plan, "warmup": a.warmup, "rows": rows}, f, indent=2)
    print(f"# JSON: {os.path.join(a.dir, 'summary.json')}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("model")
    s.add_argument("--shape", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=1234)
    s.add_argument("--vocab", type=int, help="override the shape's vocab_size")
    s.add_argument("--max-pos", type=int, help="override the shape's max_position_embeddings")
    s.set_defaults(run=cmd_model)
    s = sub.add_parser("shape")
    s.add_argument("name")
    s.set_defaults(run=cmd_shape)
    s = sub.add_parser("count")
    s.add_argument("--model", required=True)
    s.set_defaults(run=cmd_count)
    s = sub.add_parser("tokens")
    s.add_argument("--out", required=True)
    s.add_argument("--tokens", type=int, required=True)
    s.add_argument("--vocab", type=int, required=True)
    s.add_argument("--seed", type=int, default=1234)
    s.set_defaults(run=cmd_tokens)
    s = sub.add_parser("config")
    s.add_argument("--base", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--micro", type=int)
    s.add_argument("--accum", type=int)
    s.add_argument("--seq", type=int)
    s.add_argument("--bf16", type=int)
    s.add_argument("--set", action="append", metavar="KEY.PATH=JSON")
    s.add_argument("--unset", action="append", metavar="KEY.PATH")
    s.set_defaults(run=cmd_config)
    s = sub.add_parser("measure")
    s.add_argument("--json", required=True)
    s.add_argument("--log", required=True)
    s.add_argument("--timeout", type=float, required=True)
    s.add_argument("command", nargs=argparse.REMAINDER)
    s.set_defaults(run=cmd_measure)
    s = sub.add_parser("tierzero-steps")
    s.add_argument("--log", required=True)
    s.add_argument("--json", required=True)
    s.set_defaults(run=cmd_tierzero_steps)
    s = sub.add_parser("table")
    s.add_argument("--dir", required=True)
    s.add_argument("--shape", required=True)
    s.add_argument("--warmup", type=int, default=2)
    s.set_defaults(run=cmd_table)
    a = p.parse_args()
    if a.cmd == "measure":
        a.command = a.command[1:] if a.command[:1] == ["--"] else a.command
        if not a.command:
            p.error("measure needs a command after --")
    a.run(a)


if __name__ == "__main__":
    main()
