#!/usr/bin/env python3
"""DeepSpeed -> tierzero and back, checked against DeepSpeed itself on the CPU (gloo).

resume (DeepSpeed in): for each ZeRO stage and DeepSpeed world size W_ds in --worlds,
  1. DeepSpeed trains a tiny HF Llama K steps on random batches and saves a ZeRO checkpoint;
  2. a fresh DeepSpeed engine load_checkpoint()s it and trains 5 more steps on tierzero's
     micro-batches (the token file read in the order tierzero's MicroBatchIterator reads it:
     engine/data/token_data.h), recording the losses and the fp32 master after the first;
  3. `tierzero train --resume CKPT` continues from the same checkpoint for 5 steps, at each world
     size W_tz in --worlds (the global batch is 2 micro-batches of 1 sample whatever the world
     size: DeepSpeed's gradient_accumulation_steps is 2 / W), saving every step; its losses come
     from --metrics, its master after one step from `tierzero convert --dtype fp32`.
way back (--to-deepspeed): each tierzero run's checkpoint after step K+1 is written by `tierzero
  convert --to deepspeed --world-size W_ds` and DeepSpeed load_checkpoint()s it and trains 4 steps:
  its losses must match tierzero's steps K+2..K+5, its master after one step tierzero's after K+2.
Pass criteria (issue 14): losses to 1e-3 relative, the fp32 master after one step to 1e-6 absolute.
Training is fp32 by default (--dtype bf16: bf16 compute, fp32 master, gradients accumulated in bf16 as
DeepSpeed does, both sides); the optimizer is torch's
AdamW passed to deepspeed.initialize, so no DeepSpeed op is compiled.

  deepspeed_migration.py --tierzero BUILD/tools/tierzero [--stages 1 2 3] [--worlds 1 2] [--to-deepspeed]
                         [--dtype fp32|bf16|fp16] [--device cpu|cuda]
--device cuda (the GPU box): DeepSpeed on its CUDA accelerator over NCCL, one GPU per rank, and tierzero
on the GPU as `train` picks it; cpu (default): DeepSpeed's CPU accelerator over gloo, and tierzero sees no
GPU (CUDA_VISIBLE_DEVICES empty).
Exit 0 when every check passes, 1 when one fails, 77 (ctest's skip) without deepspeed, or for fp16 on
a CPU where DeepSpeed's CPU accelerator refuses fp16 (no oneDNN fp16: AVX512-FP16 / AMX-FP16).
"""
import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile

VOCAB, SEQ, SAMPLES, SEED, PRE_STEPS, STEPS = 128, 16, 96, 1234, 3, 5
LR, BETAS, EPS, WD = 1e-2, (0.9, 0.95), 1e-8, 0.01
SCHEDULER = {"type": "WarmupLR",
             "params": {"warmup_min_lr": 0.0, "warmup_max_lr": LR, "warmup_num_steps": 10, "warmup_type": "linear"}}
LOSS_RTOL, MASTER_ATOL = 1e-3, 1e-6
MASK64 = (1 << 64) - 1


# ---- tierzero's data order (engine/data/micro_batch_iterator.cpp) --------------------------------

def epoch_permutation(n, seed, epoch):
    """splitmix64-driven Fisher-Yates, as epoch_permutation() in engine/data."""
    state = (seed ^ ((0x9E3779B97F4A7C15 * (epoch + 1)) & MASK64)) & MASK64

    def next64():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    order = list(range(n))
    for i in range(n, 1, -1):
        threshold = ((1 << 64) - i) % i
        while True:
            r = next64()
            if r >= threshold:
                break
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def rank_sample(tokens, order, world, rank, position):
    """Rank `rank`'s `position`-th sample (micro-batch size 1, epoch 0): inputs and targets."""
    import torch

    i = order[position * world + rank]
    chunk = tokens[i * SEQ: i * SEQ + SEQ + 1]
    return torch.tensor([chunk[:-1]]), torch.tensor([chunk[1:]])


def write_tokens(path, count, seed):
    import random

    rng = random.Random(seed)
    tokens = [rng.randrange(VOCAB) for _ in range(count)]
    with open(path, "wb") as f:
        f.write(b"TZTOKENS" + struct.pack("<IIQQ", 1, 2, count, 0) + struct.pack(f"<{count}H", *tokens))
    return tokens


def read_tokens(path):
    with open(path, "rb") as f:
        data = f.read()
    count = struct.unpack_from("<Q", data, 16)[0]
    return list(struct.unpack_from(f"<{count}H", data, 32))


# ---- the DeepSpeed side (one process per rank) ----------------------------------------------------

DTYPE = os.environ.get("TZ_DS_MIGRATION_DTYPE", "fp32")  # the driver passes --dtype to its ranks this way
DEVICE = os.environ.get("TZ_DS_MIGRATION_DEVICE", "cpu")  # and --device
# and --ds-unscale-by-backward-scale (see unscale_by_backward_scale)
UNSCALE_BY_BACKWARD_SCALE = os.environ.get("TZ_DS_MIGRATION_UNSCALE_BY_BACKWARD_SCALE") == "1"
# and --ds-grad-accum-fp32: DeepSpeed's data_types.grad_accum_dtype "fp32", as tierzero accumulates fp16 runs
DS_GRAD_ACCUM_FP32 = os.environ.get("TZ_DS_MIGRATION_DS_GRAD_ACCUM_FP32") == "1"


def precision():
    if DTYPE == "fp16":  # a dynamic loss scale that moves within the run: its state must carry over
        return {"fp16": {"enabled": True, "initial_scale_power": 12, "loss_scale_window": 2, "hysteresis": 2}}
    return {"bf16": {"enabled": True}} if DTYPE == "bf16" else {}


def ds_config(stage, world):
    zero = {"stage": stage}
    if stage == 3:
        zero["stage3_param_persistence_threshold"] = 0
    extra = {"data_types": {"grad_accum_dtype": "fp32"}} if DS_GRAD_ACCUM_FP32 else {}
    return {**extra, **precision(), "train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2 // world,
            "zero_optimization": zero, "zero_force_ds_cpu_optimizer": False, "zero_allow_untested_optimizer": True,
            "gradient_clipping": 1.0, "steps_per_print": 1000, "scheduler": SCHEDULER}


def make_model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    return LlamaForCausalLM(config)


def ds_engine(stage, world, save_hf_to=None):
    """A fresh model (saved as a HF dir first when asked: stage 3 partitions it) under DeepSpeed."""
    import deepspeed
    import torch

    model = make_model()
    if save_hf_to:
        model.save_pretrained(save_hf_to, safe_serialization=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(stage, world))
    if DTYPE == "fp16" and UNSCALE_BY_BACKWARD_SCALE:
        unscale_by_backward_scale(engine)
    return model, engine


def unscale_by_backward_scale(engine):
    """Makes DeepSpeed's ZeRO fp16 optimizer divide the gradients by the loss scale their backward used.

    DeepSpeed 0.19.8's step() (zero/stage_1_and_2.py and zero/stage3.py alike) calls
    _update_scale(overflow) BEFORE unscale_and_clip_grads(), which divides by self.loss_scale: on a step
    where the dynamic scale grows (every loss_scale_window clean steps) the gradients, scaled by S in
    backward, are divided by 2S, so the step applies half the gradient (exactly half when clipping is
    off or the halved norm stays under gradient_clipping, nearly the clipped gradient otherwise).
    tierzero divides by S. Deferring the scale update to after the optimizer step (the overflow
    decision and the scaler's state after the step are unchanged) makes DeepSpeed divide by S too: the
    what-if that shows this ordering is the whole fp16 difference (--ds-unscale-by-backward-scale).
    """
    optimizer = engine.optimizer
    update_scale, pending = optimizer._update_scale, []
    optimizer._update_scale = lambda has_overflow=False: pending.append(has_overflow)
    step = engine.step

    def step_then_update_scale(*args, **kwargs):
        result = step(*args, **kwargs)
        for overflow in pending:
            update_scale(overflow)
        pending.clear()
        return result

    engine.step = step_then_update_scale


def ds_step(engine, batches):
    """One optimizer step over `batches` (one per accumulation micro-step); this rank's mean loss."""
    import torch

    total = 0.0
    for inputs, targets in batches:
        inputs, targets = inputs.to(engine.device), targets.to(engine.device)
        logits = engine(input_ids=inputs).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))
        engine.backward(loss)
        engine.step()
        total += float(loss)
    return total / len(batches)


def mean_over_ranks(value):
    import torch

    t = torch.tensor([value], dtype=torch.float64, device="cuda" if DEVICE == "cuda" else "cpu")
    torch.distributed.all_reduce(t)
    return float(t) / torch.distributed.get_world_size()


def full_master(model):
    from deepspeed.utils import safe_get_full_fp32_param

    return {n: safe_get_full_fp32_param(p).detach().cpu().clone().contiguous() for n, p in model.named_parameters()}


def continue_deepspeed(args, stage, world, rank, ckpt, steps, first_position):
    """load_checkpoint(ckpt) into a fresh engine, `steps` steps on tierzero's order; losses (+ master)."""
    import torch

    model, engine = ds_engine(stage, world)
    engine.load_checkpoint(ckpt)
    tokens = read_tokens(args.tokens)
    order = epoch_permutation(SAMPLES, SEED, 0)
    gas = 2 // world
    losses, master = [], None
    for k in range(steps):
        batches = [rank_sample(tokens, order, world, rank, (first_position + k) * gas + m) for m in range(gas)]
        losses.append(mean_over_ranks(ds_step(engine, batches)))
        if k == 0:
            master = full_master(model)
    return losses, master


def ds_main(args):
    os.environ.setdefault("DS_ACCELERATOR", DEVICE)
    import deepspeed
    import torch

    if DEVICE == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    deepspeed.init_distributed(dist_backend="nccl" if DEVICE == "cuda" else "gloo")
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    stage = args.stage
    out = {}
    if args.phase == "pretrain":
        model, engine = ds_engine(stage, world, args.hf_dir if rank == 0 else None)
        generator = torch.Generator().manual_seed(99 + rank)
        for _ in range(PRE_STEPS):
            batches = []
            for _ in range(2 // world):
                t = torch.randint(0, VOCAB, (1, SEQ + 1), generator=generator)
                batches.append((t[:, :-1], t[:, 1:]))
            ds_step(engine, batches)
        engine.save_checkpoint(args.ckpt, tag=f"global_step{PRE_STEPS}")
        torch.distributed.barrier()
        del engine
    losses, master = continue_deepspeed(args, stage, world, rank, args.ckpt, args.steps, args.first_position)
    if rank == 0:
        from safetensors.torch import save_file

        save_file(master, args.out + ".master.safetensors")
        with open(args.out + ".json", "w") as f:
            json.dump({"losses": losses}, f)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    # Done, results written: leave without the interpreter's teardown, where DeepSpeed's CPU comm
    # threads have aborted a finished rank ("terminate called without an active exception").
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---- the driver ------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(commands, log):
    """Starts one process per rank (torchrun's environment), waits, fails with the log's tail."""
    port, world = free_port(), len(commands)
    procs = []
    with open(log, "w") as out:
        for rank, cmd in enumerate(commands):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), DS_ACCELERATOR=DEVICE, OMP_NUM_THREADS="1")
            if DEVICE == "cpu":
                env["CUDA_VISIBLE_DEVICES"] = ""
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=900) for p in procs]
    if any(codes):
        with open(log) as f:
            tail = f.read()[-4000:]
        raise RuntimeError(f"{commands[0][:3]} exited {codes}; {log}:\n{tail}")


def run_deepspeed(args, work, stage, world, phase, ckpt, out, steps, first_position):
    cmd = [sys.executable, os.path.abspath(__file__), "--ds-rank", "--phase", phase, "--stage", str(stage),
           "--ckpt", ckpt, "--hf-dir", os.path.join(work, "hf"), "--tokens", os.path.join(work, "tokens.bin"),
           "--out", out, "--steps", str(steps), "--first-position", str(first_position)]
    run_ranks([cmd] * world, out + ".log")
    with open(out + ".json") as f:
        return json.load(f)["losses"], load_safetensors(out + ".master.safetensors")


def tierzero_config(work, stage):
    config = {**precision(), "train_batch_size": 2, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage},
              "gradient_clipping": 1.0, "steps_per_print": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD}},
              "scheduler": SCHEDULER,
              "tierzero": {"data": {"path": os.path.join(work, "tokens.bin"), "seq_len": SEQ, "seed": SEED}}}
    if DTYPE == "bf16":  # DeepSpeed accumulates bf16 runs' gradients in bf16 (its data_types.grad_accum_dtype)
        config["tierzero"]["grad_accum_dtype"] = "bf16"
    path = os.path.join(work, f"tierzero_s{stage}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def run_tierzero(args, work, stage, world, resume, name, steps):
    """tierzero train --resume RESUME for `steps` steps, saving every step: losses and the save dir."""
    save, metrics = os.path.join(work, name + ".save"), os.path.join(work, name + ".metrics.jsonl")
    cmd = [args.tierzero, "train", "--model", os.path.join(work, "hf"), "--config", tierzero_config(work, stage),
           "--resume", resume, "--steps", str(PRE_STEPS + steps), "--save", save, "--save-every", "1",
           "--metrics", metrics]
    run_ranks([cmd] * world, os.path.join(work, name + ".log"))
    with open(metrics) as f:
        records = [json.loads(line) for line in f if line.strip()]
    losses = [r["loss"] for r in records if r.get("type") == "step"]
    return losses, save


def tierzero_master(args, save, tag, out):
    subprocess.run([args.tierzero, "convert", save, out, "--tag", tag, "--dtype", "fp32", "--no-progress"],
                   check=True, capture_output=True)
    master = {}
    for name in sorted(os.listdir(out)):
        if name.endswith(".safetensors"):
            master.update(load_safetensors(os.path.join(out, name)))
    return master


def load_safetensors(path):
    from safetensors.torch import load_file

    return load_file(path)


def compare(label, names, ref_losses, losses, ref_master, master, results):
    """Checks `losses` (and `master`) against the reference side's; prints and records the figures."""
    n = min(len(ref_losses), len(losses))
    loss_rel = max(abs(a - b) / abs(a) for a, b in zip(ref_losses[:n], losses[:n])) if n else float("inf")
    ok = n == len(ref_losses) and loss_rel <= LOSS_RTOL
    master_abs = None
    if ref_master is not None:
        missing = sorted(set(ref_master) ^ set(master))
        master_abs = max(float((ref_master[k] - master[k]).abs().max()) for k in ref_master if k in master)
        ok = ok and not missing and master_abs <= MASTER_ATOL
        if missing:
            print(f"  {label}: tensors on one side only: {missing[:4]}")
    line = (f"{'ok  ' if ok else 'FAIL'} {label}: {n} losses, max rel diff {loss_rel:.2e}"
            + (f", master after 1 step max abs diff {master_abs:.2e}" if master_abs is not None else ""))
    print(line, flush=True)
    print(f"     {names[0]:9} {['%.6f' % x for x in ref_losses]}\n     {names[1]:9} {['%.6f' % x for x in losses]}",
          flush=True)
    results.append({"case": label, "ok": ok, "losses": n, "loss_max_rel": loss_rel, "master_max_abs": master_abs,
                    names[0] + "_losses": ref_losses, names[1] + "_losses": losses})
    return ok


def cpu_fp16_supported():
    """Whether DeepSpeed's CPU accelerator runs fp16 here (its is_fp16_supported(): oneDNN's fp16)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    except (AttributeError, RuntimeError):
        return False


def driver(args):
    try:
        import deepspeed  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    if DTYPE == "fp16" and DEVICE == "cpu" and not cpu_fp16_supported():
        print("skipped: DeepSpeed's CPU accelerator refuses fp16 on this CPU (torch.ops.mkldnn."
              "_is_mkldnn_fp16_supported() is False: oneDNN needs AVX512-FP16 or AMX-FP16); run it on such a CPU "
              "or with --device cuda")
        return 77
    work = args.work or tempfile.mkdtemp(prefix="tz_ds_migration_")
    os.makedirs(work, exist_ok=True)
    write_tokens(os.path.join(work, "tokens.bin"), SAMPLES * SEQ + 1, 7)
    results, all_ok = [], True
    for stage in args.stages:
        for w_ds in args.worlds:
            case = f"s{stage}_w{w_ds}"
            ckpt = os.path.join(work, case + ".ds")
            ds_losses, ds_master = run_deepspeed(args, work, stage, w_ds, "pretrain", ckpt,
                                                 os.path.join(work, case + ".ds_continue"), STEPS, 0)
            for w_tz in args.worlds:
                name = f"{case}_tz{w_tz}"
                losses, save = run_tierzero(args, work, stage, w_tz, ckpt, name, STEPS)
                master = tierzero_master(args, save, f"global_step{PRE_STEPS + 1}", os.path.join(work, name + ".m1"))
                all_ok &= compare(f"resume stage {stage} {DTYPE} {DEVICE}: DeepSpeed world {w_ds} -> tierzero world {w_tz}",
                                  ("deepspeed", "tierzero"), ds_losses, losses, ds_master, master, results)
                if args.to_deepspeed:
                    # tierzero's checkpoint after step K+1, written for DeepSpeed at world w_ds (the
                    # world whose batches line up), continued there for the remaining steps.
                    back = os.path.join(work, name + ".back")
                    subprocess.run([args.tierzero, "convert", save, back, "--tag", f"global_step{PRE_STEPS + 1}",
                                    "--to", "deepspeed", "--world-size", str(w_ds),
                                    "--ds-config", tierzero_config(work, stage)], check=True, capture_output=True)
                    back_losses, back_master = run_deepspeed(args, work, stage, w_ds, "continue", back,
                                                             os.path.join(work, name + ".back_continue"), STEPS - 1, 1)
                    master2 = tierzero_master(args, save, f"global_step{PRE_STEPS + 2}", os.path.join(work, name + ".m2"))
                    all_ok &= compare(f"way back stage {stage} {DTYPE} {DEVICE}: tierzero world {w_tz} -> DeepSpeed world {w_ds}",
                                      ("tierzero", "deepspeed"), losses[1:], back_losses, master2, back_master, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(("PASS" if all_ok else "FAIL") + f" ({len(results)} checks; work dir {work})")
    return 0 if all_ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tierzero", help="the tierzero binary")
    p.add_argument("--stages", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--to-deepspeed", action="store_true", help="also check convert --to deepspeed")
    p.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32", help="training precision (default fp32)")
    p.add_argument("--ds-unscale-by-backward-scale", action="store_true",
                   help="fp16: DeepSpeed divides the gradients by the loss scale of their backward, as tierzero "
                        "does (it divides by the scale after this step's update; see unscale_by_backward_scale)")
    p.add_argument("--ds-grad-accum-fp32", action="store_true",
                   help="DeepSpeed accumulates gradients in fp32 (data_types.grad_accum_dtype), as tierzero does "
                        "for fp16 runs (DeepSpeed 0.19.8 honours it at stages 2 and 3, not 1)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where both sides train (default cpu)")
    p.add_argument("--work", help="work folder (default: a new temporary one)")
    p.add_argument("--json", help="write the figures here")
    # One DeepSpeed rank (run by the driver).
    p.add_argument("--ds-rank", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--phase", choices=["pretrain", "continue"], help=argparse.SUPPRESS)
    p.add_argument("--stage", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ckpt", help=argparse.SUPPRESS)
    p.add_argument("--hf-dir", help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first-position", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.ds_rank:
        ds_main(args)
        return 0
    if not args.tierzero:
        p.error("--tierzero is required")
    global DTYPE, DEVICE
    DTYPE = os.environ["TZ_DS_MIGRATION_DTYPE"] = args.dtype
    DEVICE = os.environ["TZ_DS_MIGRATION_DEVICE"] = args.device
    os.environ["TZ_DS_MIGRATION_UNSCALE_BY_BACKWARD_SCALE"] = "1" if args.ds_unscale_by_backward_scale else "0"
    os.environ["TZ_DS_MIGRATION_DS_GRAD_ACCUM_FP32"] = "1" if args.ds_grad_accum_fp32 else "0"
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
