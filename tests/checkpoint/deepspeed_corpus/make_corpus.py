#!/usr/bin/env python3
"""Writes a corpus of small checkpoints with DeepSpeed itself, for tierzero's import tests.

Each case trains a tiny Llama (transformers, hidden 16, 2 layers, ~8K parameters) for two steps
under one DeepSpeed ZeRO configuration, then writes into OUT/<case>/:
  latest, <tag>/*.pt            DeepSpeed's save_checkpoint (zero_to_fp32.py copies removed)
  pytorch_model.bin             DeepSpeed's save_16bit_model, when it writes one
  zero_to_fp32.safetensors      DeepSpeed's get_fp32_state_dict_from_zero_checkpoint, each tensor
                                once: a tied alias is left out and listed in the metadata
                                "aliases" (JSON [[alias, source], ...]), "order" lists every name
  universal/                    (cases marked universal) ds_to_universal.py's output
  config.json, case.json        the model's config; how the case was written
and one line per case on stdout. OUT/MANIFEST lists the cases.

  python make_corpus.py --out DIR --device cpu|cuda [--only SUBSTRING]
  torchrun --nproc_per_node 2 make_corpus.py --out DIR --device cuda      (world size 2)

On CPU, DeepSpeed runs with accelerator "cpu" and the gloo backend; the optimizer is torch's
AdamW passed as a client optimizer (zero_force_ds_cpu_optimizer off), so no DeepSpeed op has to be
compiled on either device.
"""
import argparse
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time

# (name, stage, dtype, tied, offload, frozen, gather16, universal): a covering set of the options,
# every pair of (stage, dtype, tied, offload, frozen) values appearing in some case.
CASES = [
    ("s1_fp16_tied", 1, "fp16", True, False, False, None, False),
    ("s1_bf16_untied_offload_frozen", 1, "bf16", False, True, True, None, False),
    ("s1_fp32_tied_frozen", 1, "fp32", True, False, True, None, False),
    ("s2_fp16_untied_frozen", 2, "fp16", False, False, True, None, False),
    ("s2_bf16_tied_offload", 2, "bf16", True, True, False, None, True),
    ("s2_fp32_untied_offload", 2, "fp32", False, True, False, None, False),
    ("s3_fp16_tied_offload_gather", 3, "fp16", True, True, False, True, False),
    ("s3_bf16_tied_frozen_gather", 3, "bf16", True, False, True, True, True),
    ("s3_bf16_untied_nogather", 3, "bf16", False, False, False, False, False),
    ("s3_fp32_untied_frozen_offload_gather", 3, "fp32", False, True, True, True, False),
    ("s3_fp16_untied_frozen_nogather", 3, "fp16", False, False, True, False, False),
    ("s3_fp32_tied_nogather", 3, "fp32", True, False, False, False, False),
]

VOCAB = 96
FROZEN = ("model.layers.0.mlp.up_proj.weight", "model.layers.1.input_layernorm.weight")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="corpus folder (created)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--only", default="", help="only cases whose name contains this")
    return p.parse_args()


def setup(device):
    if device == "cpu":
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:  # one process, no torchrun: any free port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    import deepspeed
    import torch

    deepspeed.init_distributed(dist_backend="gloo" if device == "cpu" else "nccl")
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))


def make_model(tied, frozen):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=40, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         tie_word_embeddings=tied)
    model = LlamaForCausalLM(config)
    # A persistent integer buffer: zero_to_fp32 keeps its dtype (int64).
    model.model.register_buffer("position_ids", torch.arange(64, dtype=torch.int64), persistent=True)
    if frozen:
        params = dict(model.named_parameters())
        for name in FROZEN:
            params[name].requires_grad_(False)
    return model


def ds_config(stage, dtype, offload, gather16):
    zero = {"stage": stage}
    if offload:
        zero["offload_optimizer"] = {"device": "cpu"}
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = bool(gather16)
        zero["stage3_param_persistence_threshold"] = 0  # partition every parameter, even small ones
    config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "zero_optimization": zero,
              "zero_force_ds_cpu_optimizer": False, "zero_allow_untested_optimizer": True,
              "gradient_clipping": 1.0, "steps_per_print": 1000}
    if dtype == "fp16":
        config["fp16"] = {"enabled": True, "initial_scale_power": 8, "loss_scale_window": 2}
    elif dtype == "bf16":
        config["bf16"] = {"enabled": True}
    return config


def write_reference(case_dir):
    """zero_to_fp32's state dict as safetensors: each tensor object once, aliases in metadata."""
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    from safetensors.torch import save_file

    with contextlib.redirect_stdout(io.StringIO()):
        state = get_fp32_state_dict_from_zero_checkpoint(case_dir)
    tensors, aliases, first = {}, [], {}
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in first:
            aliases.append([name, first[key]])
            continue
        first[key] = name
        tensors[name] = t.detach().contiguous().clone()
    save_file(tensors, os.path.join(case_dir, "zero_to_fp32.safetensors"),
              metadata={"aliases": json.dumps(aliases), "order": json.dumps(list(state.keys()))})
    return len(tensors), len(aliases)


def write_universal(case_dir, tag):
    out = os.path.join(case_dir, "universal")
    cmd = [sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
           os.path.join(case_dir, tag), "--output_folder", os.path.join(out, tag), "--num_extract_workers", "1",
           "--num_merge_workers", "1", "--inject_missing_state"]
    result = subprocess.run(cmd, capture_output=True, text=True)  # also writes out/latest_universal
    if result.returncode != 0:
        return f"ds_to_universal failed: {result.stderr.strip().splitlines()[-1:]}"
    return "universal"


def run_case(args, case, world):
    import deepspeed
    import torch

    name, stage, dtype, tied, offload, frozen, gather16, universal = case
    case_dir = os.path.join(args.out, f"w{world}_{name}")
    rank = torch.distributed.get_rank()
    start = time.time()
    model = make_model(tied, frozen)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer,
                                           config=ds_config(stage, dtype, offload, gather16))
    generator = torch.Generator().manual_seed(99)
    for _ in range(2):
        tokens = torch.randint(0, VOCAB, (2, 16), generator=generator).to(engine.device)
        loss = engine(input_ids=tokens, labels=tokens).loss
        engine.backward(loss)
        engine.step()
    engine.save_checkpoint(case_dir, tag="global_step2")
    wrote16 = engine.save_16bit_model(case_dir)
    torch.distributed.barrier()
    if rank != 0:
        return
    for script in ("zero_to_fp32.py", "zero_to_torch.py"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(case_dir, script))
    if not wrote16:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(case_dir, "pytorch_model.bin"))
    model.config.to_json_file(os.path.join(case_dir, "config.json"))
    count, aliases = write_reference(case_dir)
    extra = write_universal(case_dir, "global_step2") if universal else ""
    record = {"case": name, "world_size": world, "zero_stage": stage, "dtype": dtype, "tied": tied,
              "offload_optimizer": "cpu" if offload else "none", "frozen": list(FROZEN) if frozen else [],
              "gather_16bit_weights_on_model_save": gather16, "save_16bit_model": bool(wrote16),
              "universal": extra == "universal", "device": args.device, "deepspeed": deepspeed.__version__,
              "torch": torch.__version__, "loss": float(loss)}
    with open(os.path.join(case_dir, "case.json"), "w") as f:
        json.dump(record, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(case_dir) for f in fs)
    print(f"wrote {case_dir}: stage {stage} {dtype} tied={tied} offload={offload} frozen={frozen} "
          f"gather16={gather16} 16bit={'yes' if wrote16 else 'no'} ref={count} tensors+{aliases} aliases "
          f"{extra} {size // 1024} KiB {time.time() - start:.1f}s", flush=True)
    return record


def write_manifest(out):
    """OUT/MANIFEST: one line per case of every MANIFEST.w*.json in OUT."""
    columns = ("world_size", "zero_stage", "dtype", "tied", "offload_optimizer", "gather_16bit_weights_on_model_save",
               "save_16bit_model", "universal", "device", "deepspeed", "torch")
    lines = ["# Written by tests/checkpoint/deepspeed_corpus/make_corpus.py (DeepSpeed itself); case.json in each",
             "# folder has the details. frozen = " + ", ".join(FROZEN) + " (requires_grad=False).",
             "case\tfrozen\t" + "\t".join(columns)]
    for name in sorted(n for n in os.listdir(out) if n.startswith("MANIFEST.w") and n.endswith(".json")):
        with open(os.path.join(out, name)) as f:
            for r in json.load(f):
                lines.append(f"w{r['world_size']}_{r['case']}\t{bool(r['frozen'])}\t" +
                             "\t".join(str(r[c]) for c in columns))
    with open(os.path.join(out, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    setup(args.device)
    import torch

    world = torch.distributed.get_world_size()
    records = []
    for case in CASES:
        if args.only in case[0]:
            try:
                record = run_case(args, case, world)
            except Exception as e:  # record what cannot run on this device, go on with the rest
                if torch.distributed.get_rank() == 0:
                    print(f"FAILED w{world}_{case[0]}: {type(e).__name__}: {e}", flush=True)
                continue
            if record:
                records.append(record)
    if torch.distributed.get_rank() == 0:
        with open(os.path.join(args.out, f"MANIFEST.w{world}.json"), "w") as f:
            json.dump(records, f, indent=1)
        write_manifest(args.out)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
