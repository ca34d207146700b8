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
     resuming from that checkpoint for the rest, and with the base on NVMe (offload_param "nvme":
     swap files, the adapters in host memory);
  5. for the dropout case (lora_dropout 0.1), PEFT draws its masks as tierzero does: the default
     generator seeded with tierzero's step seed (step_seed below) before each step, the forwards in
     the same order (micro-batch by micro-batch, q k v o gate up down). tierzero recomputes each
     layer in the backward, replaying the forward's masks; were it to draw new ones, the gradients
     and so the losses from step 2 on would leave PEFT's. Offloaded (the window pass: the forwards
     unit-major, other masks than PEFT's), a run saved halfway and resumed equals the unbroken
     run's losses exactly (the masks are a function of --seed, the step and the rank).
Pass criteria (issue 26): every step's loss of every tierzero run but the dropout case's offloaded
ones within LOSS_RTOL of PEFT's (PEFT without dropout must differ by 10x that); SAVE loads with
peft.PeftModel.from_pretrained, and its merge_and_unload() logits equal those of MERGED loaded by
transformers (LOGITS_ATOL), and the trained adapters equal PEFT's: each tensor's distance from
PEFT's within ADAPTER_RTOL of how far PEFT's moved from the start (after one step the two agree to
fp32 rounding, ~1e-8; Adam at lr 1e-2 grows those roundings to ~1e-4 over 20 steps); with dropout
the resumed offloaded run's losses equal the unbroken one's and the adapter directory says 0.1.
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
    "dropout": {"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "use_rslora": False, "lora_dropout": 0.1},
}
TIERZERO_SEED = 1234  # `tierzero train --seed`'s default


def step_seed(seed, step, rank):
    """The seed tierzero gives the default generator before step `step` (0-based) of a run with a random
    forward (engine/train/session_step.cpp: splitmix64's finaliser)."""
    mask = (1 << 64) - 1
    z = seed ^ ((step * 0x9E3779B97F4A7C15) & mask) ^ ((rank << 48) & mask)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


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
    config = LoraConfig(r=lora["r"], lora_alpha=lora["lora_alpha"], lora_dropout=lora.get("lora_dropout", 0.0),
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


def train_peft(base_dir, lora, init_dir, tokens, dropout=None):
    """STEPS steps of PyTorch AdamW on the PEFT model from init_dir: each step's loss, the adapters.
    `dropout`: replaces the adapter directory's lora_dropout."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="float32")
    model = PeftModel.from_pretrained(base, init_dir, is_trainable=True)
    model.train()  # from_pretrained leaves it in eval mode, where dropout draws nothing
    if dropout is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = dropout
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    order = epoch_permutation(SAMPLES, SEED, 0)
    losses = []
    for step in range(STEPS):
        torch.manual_seed(step_seed(TIERZERO_SEED, step, 0))
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


def base_on_nvme(nvme_dir):
    """OFFLOADED with the frozen base in swap files under nvme_dir (the adapters stay in host memory)."""
    return {**OFFLOADED, "offload_param": {"device": "nvme", "nvme_path": nvme_dir}}


def run_tierzero(args, work, name, base_dir, lora, init_dir, zero=None, steps=STEPS, extra=()):
    """tierzero train: its losses, the --save and --export directories."""
    config = {"train_batch_size": ACCUMULATION, "train_micro_batch_size_per_gpu": 1,
              "zero_optimization": zero or {"stage": 2}, "gradient_clipping": CLIP, "steps_per_print": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD}},
              "tierzero": {"data": {"path": os.path.join(work, "tokens.bin"), "seq_len": SEQ, "seed": SEED},
                           "lora": {"lora_dropout": 0.0, **lora, "bias": "none", "init_adapter": init_dir}}}
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


def resume_draws_the_same_masks(args, work, base_dir, lora, init_dir):
    """Offloaded with dropout: STEPS steps unbroken, and STEPS / 2 saved then resumed; the losses equal."""
    unbroken, _, _ = run_tierzero(args, work, "dropout_unbroken", base_dir, lora, init_dir, OFFLOADED)
    first, halfway, _ = run_tierzero(args, work, "dropout_half", base_dir, lora, init_dir, OFFLOADED, STEPS // 2)
    rest, _, _ = run_tierzero(args, work, "dropout_resumed", base_dir, lora, init_dir, OFFLOADED, STEPS,
                              ("--resume", halfway))
    print(f"dropout offloaded: unbroken {unbroken[-1]:.8f}, resumed {(first + rest)[-1]:.8f} after {STEPS} steps")
    if unbroken != first + rest:
        return [f"dropout offloaded: resumed losses {first + rest} differ from the unbroken run's {unbroken}"]
    return []


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
                nvme_dir = os.path.join(work, "nvme")
                os.makedirs(nvme_dir)
                on_nvme, _, _ = run_tierzero(args, work, "base_on_nvme", base_dir, lora, init_dir, base_on_nvme(nvme_dir))
                print(f"base on NVMe: {len(on_nvme)} steps, last loss {on_nvme[-1]:.8f}; left in {nvme_dir}: {os.listdir(nvme_dir)}")
                if len(on_nvme) != STEPS or os.listdir(nvme_dir):
                    failures.append(f"base on NVMe: {len(on_nvme)} steps, files left {os.listdir(nvme_dir)}")
                with open(os.path.join(work, "base_on_nvme.metrics.jsonl")) as f:
                    on_disk = [r["nvme_bytes"] for r in map(json.loads, f) if r.get("type") == "step"]
                if not on_disk or min(on_disk) <= 0:  # the base's swap file, reported as the run's NVMe bytes
                    failures.append(f"base on NVMe: the step lines' nvme_bytes {on_disk} do not count the swap file")
                for step, (ref, got) in enumerate(zip(ref_losses, on_nvme), start=1):
                    if abs(got - ref) > LOSS_RTOL * abs(ref):
                        failures.append(f"base on NVMe: step {step} loss {got:.8f} vs PEFT {ref:.8f}")
            if name == "dropout":  # offloaded: resumed halfway = unbroken, exactly; the adapter config says 0.1
                failures += resume_draws_the_same_masks(args, work, base_dir, lora, init_dir)
                undropped, _ = train_peft(base_dir, lora, init_dir, tokens, dropout=0.0)
                moved = max(abs(a - b) / abs(b) for a, b in zip(ref_losses, undropped))
                print(f"dropout: PEFT's losses without dropout differ by up to {moved:.3g} relative")
                if moved < 10 * LOSS_RTOL:
                    failures.append("dropout: PEFT's losses with lora_dropout 0.1 are those without it: nothing was dropped")
                with open(os.path.join(save, "adapter_config.json")) as f:
                    written = json.load(f).get("lora_dropout")
                if written != lora["lora_dropout"]:
                    failures.append(f"dropout: {save}/adapter_config.json lora_dropout {written}, expected {lora['lora_dropout']}")
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
