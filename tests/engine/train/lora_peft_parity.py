#!/usr/bin/env python3
"""tierzero.lora against PEFT + PyTorch (CPU, fp32, a tiny HF Llama built by transformers).

For each LoRA config of CASES:
  1. PEFT wraps the model (get_peft_model) and its adapters are made non-zero (lora_B too, seeded,
     so the first step already goes through B A) and saved as an adapter directory;
  2. PyTorch's AdamW trains the PEFT model STEPS steps (gradient clipping as DeepSpeed's) on the
     micro-batches tierzero reads (the token file in tierzero's MicroBatchIterator order: the helpers
     of deepspeed_migration.py), recording each step's loss;
  3. `tierzero train --model HF` with tierzero.lora (the same values, init_adapter = that directory)
     trains STEPS steps, --save SAVE (the PEFT adapter directory beside the checkpoint) and
     --export MERGED (the merged model);
  4. for the first case, tierzero again with the base and the adapters offloaded (stage 3,
     offload_param and offload_optimizer "cpu": the window pass), saving after STEPS / 2 steps and
     resuming from that checkpoint for the rest.
Pass criteria (issue 26): every step's loss of every tierzero run within LOSS_RTOL of PEFT's; SAVE loads with
peft.PeftModel.from_pretrained, and its merge_and_unload() logits equal those of MERGED loaded by
transformers (LOGITS_ATOL), and the trained adapters equal PEFT's: each tensor's distance from
PEFT's within ADAPTER_RTOL of how far PEFT's moved from the start (after one step the two agree to
fp32 rounding, ~1e-8; Adam at lr 1e-2 grows those roundings to ~1e-4 over 20 steps).
Exit 0 when every check passes, 1 when one fails, 77 (ctest's skip) without peft.

  lora_peft_parity.py --tierzero BUILD/tools/tierzero
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deepspeed_migration import SEQ, VOCAB, epoch_permutation, rank_sample, write_tokens  # noqa: E402

SAMPLES, SEED, STEPS, ACCUMULATION = 64, 1234, 20, 2
LR, BETAS, EPS, WD, CLIP = 1e-2, (0.9, 0.95), 1e-8, 0.01, 1.0
LOSS_RTOL, LOGITS_ATOL, ADAPTER_RTOL = 1e-4, 1e-5, 1e-2
CASES = {
    "list": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj", "down_proj"], "use_rslora": False},
    "all_linear_rslora": {"r": 8, "lora_alpha": 16, "target_modules": "all-linear", "use_rslora": True},
}


def make_base(path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(path)


def peft_model(base_dir, lora):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="float32")
    config = LoraConfig(r=lora["r"], lora_alpha=lora["lora_alpha"], lora_dropout=0.0,
                        target_modules=lora["target_modules"], use_rslora=lora["use_rslora"], bias="none",
                        task_type="CAUSAL_LM")
    return get_peft_model(base, config)


def make_init_adapter(base_dir, lora, out):
    """PEFT's adapters with lora_B drawn too (seeded), saved: the run's common starting point."""
    import torch

    model = peft_model(base_dir, lora)
    generator = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    model.save_pretrained(out)


def train_peft(base_dir, lora, init_dir, tokens):
    """STEPS steps of PyTorch AdamW on the PEFT model from init_dir: each step's loss, the adapters."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="float32")
    model = PeftModel.from_pretrained(base, init_dir, is_trainable=True)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    order = epoch_permutation(SAMPLES, SEED, 0)
    losses = []
    for step in range(STEPS):
        total = 0.0
        for m in range(ACCUMULATION):
            inputs, targets = rank_sample(tokens, order, 1, 0, step * ACCUMULATION + m)
            logits = model(input_ids=inputs).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            (loss / ACCUMULATION).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(total / ACCUMULATION)
    adapters = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    return losses, adapters


OFFLOADED = {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu"}}


def run_tierzero(args, work, name, base_dir, lora, init_dir, zero=None, steps=STEPS, extra=()):
    """tierzero train: its losses, the --save and --export directories."""
    config = {"train_batch_size": ACCUMULATION, "train_micro_batch_size_per_gpu": 1,
              "zero_optimization": zero or {"stage": 2}, "gradient_clipping": CLIP, "steps_per_print": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD}},
              "tierzero": {"data": {"path": os.path.join(work, "tokens.bin"), "seq_len": SEQ, "seed": SEED},
                           "lora": {**lora, "lora_dropout": 0.0, "bias": "none", "init_adapter": init_dir}}}
    config_path = os.path.join(work, name + ".json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    save, merged, metrics = (os.path.join(work, name + suffix) for suffix in (".save", ".merged", ".metrics.jsonl"))
    cmd = [args.tierzero, "train", "--model", base_dir, "--config", config_path, "--steps", str(steps),
           "--save", save, "--metrics", metrics, *extra]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TIERZERO_NO_PROGRESS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"tierzero train failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    with open(metrics) as f:
        losses = [r["loss"] for r in (json.loads(line) for line in f if line.strip()) if r.get("type") == "step"]
    return losses, save, merged


def check_outputs(base_dir, save, merged, reference_adapters, init_dir, tokens):
    """The adapter directory in PEFT, merged, against the exported model; its adapters against PEFT's."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="float32")
    loaded = PeftModel.from_pretrained(base, save)
    failures = []
    state = dict(loaded.named_parameters())
    initial = load_file(os.path.join(init_dir, "adapter_model.safetensors"))
    for name, value in reference_adapters.items():
        if name not in state:
            failures.append(f"adapter {name} missing from {save}")
            continue
        diff = (state[name] - value).abs().max().item()
        moved = (value - initial[name.replace(".default", "")]).abs().max().item()
        if diff > ADAPTER_RTOL * moved:
            failures.append(f"adapter {name}: max |tierzero - PEFT| {diff:.3g} > {ADAPTER_RTOL} x PEFT's change {moved:.3g}")
    ids = torch.tensor([tokens[:SEQ], tokens[SEQ:2 * SEQ]])
    with torch.no_grad():
        peft_logits = loaded.merge_and_unload()(input_ids=ids).logits
        export_logits = AutoModelForCausalLM.from_pretrained(merged, dtype="float32")(input_ids=ids).logits
    diff = (peft_logits - export_logits).abs().max().item()
    if diff > LOGITS_ATOL:
        failures.append(f"merged logits: max |PEFT merge_and_unload - tierzero --export| {diff:.3g} > {LOGITS_ATOL}")
    print(f"  merged logits max diff {diff:.3g}; adapters checked: {len(reference_adapters)}")
    return failures


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

    torch.set_num_threads(1)
    failures = []
    with tempfile.TemporaryDirectory(prefix="tierzero_lora_") as work:
        base_dir = os.path.join(work, "hf")
        make_base(base_dir)
        tokens = write_tokens(os.path.join(work, "tokens.bin"), SAMPLES * SEQ + 1, 7)
        for name, lora in CASES.items():
            init_dir = os.path.join(work, name + ".init")
            make_init_adapter(base_dir, lora, init_dir)
            ref_losses, ref_adapters = train_peft(base_dir, lora, init_dir, tokens)
            losses, save, merged = run_tierzero(args, work, name, base_dir, lora, init_dir,
                                                extra=("--export", os.path.join(work, name + ".merged")))
            if name == "list":  # offloaded, saved halfway and resumed
                first, halfway, _ = run_tierzero(args, work, "offloaded", base_dir, lora, init_dir, OFFLOADED, STEPS // 2)
                rest, _, _ = run_tierzero(args, work, "resumed", base_dir, lora, init_dir, OFFLOADED, STEPS,
                                          ("--resume", halfway))
                print(f"offloaded + resumed: {len(first)} + {len(rest)} steps")
                if len(first + rest) != STEPS:
                    failures.append(f"offloaded + resumed: {len(first + rest)} steps, expected {STEPS}")
                for step, (ref, got) in enumerate(zip(ref_losses, first + rest), start=1):
                    if abs(got - ref) > LOSS_RTOL * abs(ref):
                        failures.append(f"offloaded + resumed: step {step} loss {got:.8f} vs PEFT {ref:.8f}")
            print(f"{name}: PEFT losses {ref_losses[0]:.6f} .. {ref_losses[-1]:.6f}")
            print(f"{name}: tierzero    {losses[0]:.6f} .. {losses[-1]:.6f}" if losses else f"{name}: no losses")
            if len(losses) != STEPS:
                failures.append(f"{name}: tierzero reported {len(losses)} steps, expected {STEPS}")
            for step, (ref, got) in enumerate(zip(ref_losses, losses), start=1):
                if abs(got - ref) > LOSS_RTOL * abs(ref):
                    failures.append(f"{name}: step {step} loss {got:.8f} vs PEFT {ref:.8f} (relative {LOSS_RTOL})")
            failures += [f"{name}: {f}" for f in check_outputs(base_dir, save, merged, ref_adapters, init_dir, tokens)]
    for failure in failures:
        print("FAIL " + failure)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
