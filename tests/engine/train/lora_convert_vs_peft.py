#!/usr/bin/env python3
"""`tierzero convert` of a LoRA run's checkpoint against the run's own --export, transformers and PEFT (CPU, fp32).

A tiny HF Llama (transformers, save_pretrained) is trained with tierzero.lora for STEPS steps (lr
1e-2, so lora_B moves away from zero), saving a checkpoint (--save) and exporting the merged model
(--export: W + scaling · B A, engine/train/lora_export.cpp). Then:
  1. `convert SAVE MERGED --model BASE --dtype fp32`: every tensor equals the export's within
     WEIGHT_ATOL (the same fp32 sums in another order), none is missing or extra, and MERGED loads in
     transformers with logits within LOGITS_ATOL of the export's;
  2. `convert SAVE ADAPTER --adapter --model BASE`: a PEFT adapter directory whose tensors are, bit
     for bit, those of the adapter directory train wrote beside the checkpoint; peft's
     PeftModel.from_pretrained(BASE, ADAPTER) gives the export's logits within LOGITS_ATOL;
  3. `convert SAVE OUT` without --model is refused, naming --model and --adapter, and writes nothing
     (before: it exited 0 with the adapters only, which transformers loads as a random model).
Exit 0 when every check passes, 1 when one fails, 77 (ctest's skip) without peft.

  lora_convert_vs_peft.py --tierzero BUILD/tools/tierzero
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deepspeed_migration import SEQ, write_tokens  # noqa: E402
from lora_peft_parity import make_base  # noqa: E402

STEPS, SAMPLES = 4, 32
WEIGHT_ATOL, LOGITS_ATOL = 1e-6, 1e-6
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"], "lora_dropout": 0.0,
        "bias": "none"}


def run(command, expect_ok=True):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TIERZERO_NO_PROGRESS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if expect_ok and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def train(tierzero, work, base):
    config = {"train_batch_size": 1, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0}},
              "tierzero": {"data": {"path": os.path.join(work, "tokens.bin"), "seq_len": SEQ}, "lora": LORA}}
    path = os.path.join(work, "lora.json")
    with open(path, "w") as f:
        json.dump(config, f)
    save, export = os.path.join(work, "save"), os.path.join(work, "export")
    run([tierzero, "train", "--model", base, "--config", path, "--steps", str(STEPS), "--save", save,
         "--export", export])
    return save, export


def load_dir(path):
    """Every tensor of a Hugging Face safetensors directory (sharded or not)."""
    from safetensors.torch import load_file
    tensors = {}
    for name in sorted(os.listdir(path)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(path, name)))
    return tensors


def logits(model, tokens):
    import torch
    with torch.no_grad():
        return model(input_ids=torch.tensor([tokens[:SEQ], tokens[SEQ:2 * SEQ]])).logits


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tierzero", required=True)
    args = parser.parse_args()
    try:
        import peft  # noqa: F401
    except ImportError:
        print("peft is not importable: skipped (scripts/setup.sh installs it)")
        return 77
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tierzero_lora_convert_") as work:
        base = os.path.join(work, "base")
        make_base(base)
        tokens = write_tokens(os.path.join(work, "tokens.bin"), SAMPLES * SEQ + 1, 7)
        save, export = train(args.tierzero, work, base)
        exported = load_dir(export)
        export_logits = logits(AutoModelForCausalLM.from_pretrained(export, dtype="float32"), tokens)

        merged = os.path.join(work, "merged")
        run([args.tierzero, "convert", save, merged, "--model", base, "--dtype", "fp32", "--no-progress"])
        converted = load_dir(merged)
        diffs = {name: (converted[name] - exported[name]).abs().max().item()
                 for name in exported if name in converted}
        worst = max(diffs, key=diffs.get) if diffs else None
        ok = check("merged tensors", set(converted) == set(exported) and diffs[worst] <= WEIGHT_ATOL,
                   f"{len(converted)} tensors vs the export's {len(exported)}, {len(diffs)} in common; max "
                   f"|convert - export| {diffs[worst] if diffs else float('nan'):.3g} ({worst})")
        moved = max((exported[n] - t).abs().max().item() for n, t in load_dir(base).items() if n in exported)
        ok &= check("training moved the merged weights", moved > 1e-4, f"max |export - base| {moved:.3g}")
        merged_logits = logits(AutoModelForCausalLM.from_pretrained(merged, dtype="float32"), tokens)
        diff = (merged_logits - export_logits).abs().max().item()
        ok &= check("merged logits", diff <= LOGITS_ATOL, f"max |transformers(merged) - transformers(export)| {diff:.3g}")

        adapter = os.path.join(work, "adapter")
        run([args.tierzero, "convert", save, adapter, "--adapter", "--model", base, "--no-progress"])
        written, beside = load_dir(adapter), load_dir(save)
        ok &= check("adapter tensors", written.keys() == beside.keys() and
                    all(torch.equal(written[n], beside[n]) for n in written),
                    f"{len(written)} tensors, bit for bit those train wrote beside the checkpoint")
        peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype="float32"), adapter)
        diff = (logits(peft_model, tokens) - export_logits).abs().max().item()
        ok &= check("PEFT adapter logits", diff <= LOGITS_ATOL,
                    f"max |PeftModel(base, adapter) - transformers(export)| {diff:.3g}")

        refused_out = os.path.join(work, "baseless")
        done = run([args.tierzero, "convert", save, refused_out, "--no-progress"], expect_ok=False)
        message = done.stdout + done.stderr
        ok &= check("convert without the base refuses",
                    done.returncode != 0 and "--model DIR" in message and "--adapter" in message and
                    not os.path.exists(refused_out), f"exit {done.returncode}: {message.strip()[:300]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
