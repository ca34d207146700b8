#!/usr/bin/env python3
"""DeepSpeed's side of benchmarks/train_vs_deepspeed.sh: trains a Hugging Face model directory with
deepspeed.initialize on the SAME ds_config file, token file and sample order as `tierzero train`.

    train_deepspeed.py --model DIR --ds-config F --tokens FILE --steps N --json OUT
    train_deepspeed.py ... [--save-checkpoint DIR] [--save-16bit DIR] [--metrics FILE.jsonl] [--name NAME]
    train_deepspeed.py --build-ops [--ds-config F ...]   (JIT-build the ops those configs use first,
                                                          outside any run's timeout; all without one)

- Model: AutoModelForCausalLM.from_pretrained(DIR) in bf16 (fp32 when bf16 is off) into host memory,
  then deepspeed.initialize partitions it (ZeRO-3 converts a module built outside zero.Init). Not
  HfDeepSpeedConfig: it needs `accelerate`, which the GPU box may lack. Host memory holds the whole
  16-bit model while loading, as tierzero holds the whole fp32 model while loading.
  gradient_checkpointing_enable(): each decoder layer recomputed in backward, as tierzero does.
- Data: the TZTOKENS file read as tierzero reads it (engine/data/token_data.h): sample i is tokens
  [i*S, i*S+S+1), inputs the first S, targets the last S; epoch order the same splitmix64
  Fisher-Yates permutation seeded by tierzero.data.seed; micro-batches of
  train_micro_batch_size_per_gpu consecutive samples. Loss: mean cross-entropy over the S targets
  (computed here from the logits, as tierzero does, not by HF's shifted labels).
- A step: gradient_accumulation_steps x (forward, engine.backward), engine.step(); timed with a device
  sync at both ends. Peak GPU: torch.cuda.max_memory_allocated, reset at each step's start.
- One process; no launcher needed (RANK / WORLD_SIZE / MASTER_* default to a single rank).
  On a machine without CUDA it runs on DeepSpeed's CPU accelerator over Gloo (the tiny dry run).
- After the last step, --save-checkpoint DIR: engine.save_checkpoint(DIR) (DIR/latest, DIR/global_stepN/,
  DIR/zero_to_fp32.py); --save-16bit DIR: engine.save_16bit_model(DIR) (DIR/pytorch_model.bin; at ZeRO-3
  the ds_config needs zero_optimization.stage3_gather_16bit_weights_on_model_save true). Each save's
  wall time goes into the JSON as save_checkpoint_s / save_16bit_s.
- Precision: what DeepSpeed actually keeps, read back from the engine after initialize and after
  the first step: the master weights' dtype (ZeRO's master_weights_and_grads_dtype: fp32, or bf16
  with bf16.bf16_master_weights_and_grads) and the Adam moments' dtype (exp_avg of the first state
  the optimizer holds), printed as `deepspeed precision: master bf16, moments bf16` and stored as
  "precision" in the JSON.
- --metrics FILE.jsonl: tierzero's metrics format (report/METRICS.md: a "run" line, then one "step"
  line per step with step, loss, lr, step_time_s, tokens_per_s, gpu_peak_bytes), so `tierzero report`
  and benchmarks/quality_util.py summary read both engines' runs alike.
Prints one line per step and writes {"steps": [{step, loss, step_time_s, gpu_peak_bytes}...], "precision"}
to OUT.
"""
import argparse
import json
import os
import struct
import sys
import time

MASK64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        threshold = ((1 << 64) - bound) % bound
        while True:
            r = self.next()
            if r >= threshold:
                return r % bound


def epoch_permutation(n, seed, epoch):
    """engine/data/micro_batch_iterator.cpp epoch_permutation."""
    order = list(range(n))
    rng = SplitMix64(seed ^ ((0x9E3779B97F4A7C15 * (epoch + 1)) & MASK64))
    for i in range(n, 1, -1):
        j = rng.below(i)
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def open_tokens(path):
    import numpy as np

    with open(path, "rb") as f:
        header = f.read(32)
    if header[:8] != b"TZTOKENS":
        sys.exit(f"{path}: not a TZTOKENS file (write it with train_bench_util.py tokens)")
    _, width, count, flags = struct.unpack("<IIQQ", header[8:])
    if flags & 1:
        sys.exit(f"{path}: carries a loss mask (prompt/completion rows); this script trains on every token")
    return np.memmap(path, dtype=np.uint16 if width == 2 else np.uint32, mode="r", offset=32, shape=(count,))


def micro_batches(tokens, seq_len, micro, seed):
    """Yields (inputs, targets) int64 arrays [micro, seq_len] in tierzero's order (one rank)."""
    import numpy as np

    n = (len(tokens) - 1) // seq_len
    if n < micro:
        sys.exit(f"the token file holds {n} samples of {seq_len}, fewer than one micro-batch of {micro}")
    epoch = 0
    while True:
        order = epoch_permutation(n, seed, epoch)
        for begin in range(0, n - micro + 1, micro):
            rows = [np.asarray(tokens[i * seq_len: i * seq_len + seq_len + 1], dtype=np.int64)
                    for i in order[begin:begin + micro]]
            batch = np.stack(rows)
            yield batch[:, :-1], batch[:, 1:]
        epoch += 1


def ops_needed(config_paths):
    """The DeepSpeed op builders the ds_configs at `config_paths` use (all three when none given):
    FusedAdam where the optimizer stays on the GPU, cpu_adam where it is offloaded, async_io where
    anything goes to NVMe."""
    if not config_paths:
        return ["FusedAdamBuilder", "CPUAdamBuilder", "AsyncIOBuilder"]
    needed = []
    for path in config_paths:
        with open(path) as f:
            zero = json.load(f).get("zero_optimization", {})
        devices = {key: zero.get(key, {}).get("device", "none") for key in ("offload_optimizer", "offload_param")}
        wants = ["CPUAdamBuilder" if devices["offload_optimizer"] in ("cpu", "nvme") else "FusedAdamBuilder"]
        if "nvme" in devices.values():
            wants.append("AsyncIOBuilder")
        needed += [name for name in wants if name not in needed]
    return needed


def build_ops(config_paths):
    """JIT-builds the ops the runs use (ops_needed) once, so that a run's timeout never kills a build
    midway (torch would then wait forever on its lock)."""
    from deepspeed.accelerator import get_accelerator

    failed = []
    for name in ops_needed(config_paths):
        builder = get_accelerator().create_op_builder(name)
        if builder is None:
            continue
        try:  # one op failing (FusedAdam on an arch string DeepSpeed cannot parse) must not skip the next
            builder.load()
            print(f"# DeepSpeed op {name}: built", flush=True)
        except Exception as error:  # noqa: BLE001 - report any build failure and go on
            print(f"# DeepSpeed op {name}: NOT built: {error}", flush=True)
            failed.append(name)
    if failed:
        sys.exit(f"DeepSpeed ops not built: {', '.join(failed)} (a run needing one JIT-builds it itself)")


def save(engine, checkpoint_dir, sixteen_bit_dir):
    """The saves asked for, each timed: {save_checkpoint_s, save_16bit_s} for those that ran."""
    times = {}
    if checkpoint_dir:
        start = time.perf_counter()
        engine.save_checkpoint(checkpoint_dir)
        times["save_checkpoint_s"] = time.perf_counter() - start
        print(f"deepspeed save_checkpoint -> {checkpoint_dir}  {times['save_checkpoint_s']:.1f}s", flush=True)
    if sixteen_bit_dir:
        start = time.perf_counter()
        if not engine.save_16bit_model(sixteen_bit_dir):
            sys.exit("save_16bit_model wrote nothing: at ZeRO-3 set "
                     "zero_optimization.stage3_gather_16bit_weights_on_model_save true in the ds_config")
        times["save_16bit_s"] = time.perf_counter() - start
        print(f"deepspeed save_16bit_model -> {sixteen_bit_dir}  {times['save_16bit_s']:.1f}s", flush=True)
    return times


def dtype_name(dtype):
    return str(dtype).replace("torch.", "").replace("bfloat16", "bf16").replace("float32", "fp32") \
        .replace("float16", "fp16")


def precision(engine):
    """{"master": dtype, "moments": dtype} as the engine holds them (None where not found)."""
    optimizer = engine.optimizer
    master = getattr(optimizer, "master_weights_and_grads_dtype", None)
    moments = None
    inner = getattr(optimizer, "optimizer", optimizer)
    for state in getattr(inner, "state", {}).values():
        if isinstance(state, dict) and "exp_avg" in state:
            moments = state["exp_avg"].dtype
            break
    return {"master": dtype_name(master) if master is not None else None,
            "moments": dtype_name(moments) if moments is not None else None,
            "optimizer": type(inner).__name__}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-ops", action="store_true", help="build DeepSpeed's Adam ops and exit")
    p.add_argument("--model")
    p.add_argument("--ds-config", nargs="+", help="the ds_config (with --build-ops: any number)")
    p.add_argument("--tokens")
    p.add_argument("--steps", type=int)
    p.add_argument("--json")
    p.add_argument("--save-checkpoint", metavar="DIR", help="engine.save_checkpoint(DIR) after the last step")
    p.add_argument("--save-16bit", metavar="DIR", help="engine.save_16bit_model(DIR) after the last step")
    p.add_argument("--metrics", metavar="FILE", help="tierzero's metrics JSONL (report/METRICS.md) of the run")
    p.add_argument("--name", help="the run's name in --metrics (default: the file name)")
    a = p.parse_args()
    if a.build_ops:
        build_ops(a.ds_config or [])
        return
    if a.ds_config is not None:
        if len(a.ds_config) != 1:
            p.error("--ds-config takes one file for a run")
        a.ds_config = a.ds_config[0]
    missing = [k for k in ("model", "ds_config", "tokens", "steps", "json") if getattr(a, k) is None]
    if missing:
        p.error("missing " + ", ".join("--" + k.replace("_", "-") for k in missing))

    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1"),
                       ("MASTER_PORT", "29517")):
        os.environ.setdefault(key, value)
    import torch
    import torch.nn.functional as F
    import deepspeed
    from transformers import AutoModelForCausalLM

    with open(a.ds_config) as f:
        config = json.load(f)
    cuda = torch.cuda.is_available()
    deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    bf16 = config.get("bf16", {}).get("enabled", False)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16 if bf16 else torch.float32)
    model.config.use_cache = False
    model.gradient_checkpointing_enable()
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)

    data = config.get("tierzero", {}).get("data", {})
    seq_len, seed = data.get("seq_len", 256), data.get("seed", 1234)
    micro, accumulation = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    batches = micro_batches(open_tokens(a.tokens), seq_len, micro, seed)
    device = engine.device
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    steps = []
    tokens_per_step = micro * accumulation * seq_len
    metrics = open(a.metrics, "w") if a.metrics else None
    if metrics:
        zero = config.get("zero_optimization", {})
        offload = ", ".join(f"{k.split('_')[1]} {zero[k]['device']}" for k in ("offload_optimizer", "offload_param")
                            if zero.get(k, {}).get("device", "none") != "none") or "none"
        run = {"type": "run", "format": 1, "name": a.name or os.path.basename(a.metrics).removesuffix(".jsonl"),
               "model": a.model, "config": a.ds_config, "data": a.tokens, "world_size": 1,
               "dtype": "bf16" if bf16 else ("fp16" if config.get("fp16", {}).get("enabled") else "fp32"),
               "stage": zero.get("stage", 0), "offload": offload,
               "parameters": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters()),
               "tokens_per_step": tokens_per_step, "engine": f"deepspeed {deepspeed.__version__}"}
        metrics.write(json.dumps(run) + "\n")
        metrics.flush()
    held = None
    for step in range(1, a.steps + 1):
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        start = time.perf_counter()
        loss_sum = 0.0
        for _ in range(accumulation):
            inputs, targets = next(batches)
            inputs = torch.from_numpy(inputs).to(device)
            targets = torch.from_numpy(targets).to(device)
            logits = engine(input_ids=inputs).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))
            engine.backward(loss)
            engine.step()  # DeepSpeed steps the optimizer at the accumulation boundary only
            loss_sum += loss.item()
        sync()
        seconds = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() if cuda else None
        record = {"step": step, "loss": loss_sum / accumulation, "step_time_s": seconds, "gpu_peak_bytes": peak}
        steps.append(record)
        if held is None:
            held = precision(engine)
            print(f"deepspeed precision: master {held['master']}, moments {held['moments']} ({held['optimizer']})",
                  flush=True)
        if metrics:
            lr = engine.get_lr()[0] if engine.get_lr() else None
            metrics.write(json.dumps({"type": "step", "step": step, "loss": record["loss"], "lr": lr,
                                      "grad_norm": engine.get_global_grad_norm() if step else None,
                                      "tokens_per_s": tokens_per_step / seconds, "step_time_s": seconds,
                                      "gpu_peak_bytes": peak or 0, "gpu_reserved_bytes": 0, "pinned_bytes": 0,
                                      "pageable_bytes": 0, "nvme_bytes": 0}, default=float) + "\n")
            metrics.flush()
        print(f"deepspeed step {step}/{a.steps}  loss {record['loss']:.4f}  {seconds:.3f}s  "
              f"peak gpu {'-' if peak is None else f'{peak / (1 << 30):.2f} GiB'}", flush=True)
    if metrics:
        metrics.close()
    result = {"deepspeed": deepspeed.__version__, "torch": torch.__version__, "precision": held, "steps": steps}
    result.update(save(engine, a.save_checkpoint, a.save_16bit))
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
