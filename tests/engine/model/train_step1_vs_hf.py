#!/usr/bin/env python3
"""`tierzero train` against transformers on the same tokens, for every model of make_hf_fixture.py.

For each tiny random model (Llama 3.1 / 3.2, Qwen2, Qwen3, Mistral, Phi-3 with and without LongRoPE
and partial rotary, Gemma 2, Gemma 3 text; save_pretrained directories): one sample of SEQ + 1
random token ids as a JSONL-of-ids file, then `tierzero train --model DIR --steps 1 --metrics F`
(fp32, micro-batch 1, ZeRO stage 3 with parameters and optimizer offloaded to the CPU). Its step-1
loss and gradient norm (--metrics) must equal transformers' loss on the same tokens and the L2 norm
of its parameter gradients (a tied embedding counted once), to 1e-5 relative (loss) and 1e-4
(gradient norm): the whole trainer path (data, units, ZeRO partitioning, reduction), not just the
model functions hf_parity_test.cpp checks. For the Qwen3, Phi-3 and Gemma models, the model
exported after that step (--export) must load in transformers with no missing or unexpected
weights and give tierzero's step-2 loss on the same tokens (1e-5 relative).

  train_step1_vs_hf.py --tierzero BUILD/tools/tierzero --fixture-dir DIR
Exit 0 when every family matches, 1 when one does not, 77 (ctest's skip) without transformers.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ = 16
LOSS_TOLERANCE, GRAD_NORM_TOLERANCE = 1e-5, 1e-4
EXPORT_CHECKED = ("qwen3", "phi3", "gemma")  # the families whose export this checks in transformers


def tierzero_losses(tierzero, model_dir, work, steps, export_dir=None):
    """Runs `tierzero train` for `steps` steps on work/ids.jsonl; returns [(loss, grad_norm)] per step."""
    data, config, metrics = (os.path.join(work, n) for n in ("ids.jsonl", "ds.json", "metrics.jsonl"))
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"},
                                         "offload_optimizer": {"device": "cpu"}},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "tierzero": {"data": {"seq_len": SEQ}}}, f)
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1", CUDA_VISIBLE_DEVICES="")
    command = [tierzero, "train", "--model", model_dir, "--config", config, "--data", data, "--steps", str(steps),
               "--metrics", metrics] + (["--export", export_dir] if export_dir else [])
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"tierzero train failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    with open(metrics) as f:
        return [(row["loss"], row["grad_norm"]) for row in map(json.loads, f) if row.get("type") == "step"]


def exported_loss(export_dir, ids):
    """transformers' loss on `ids` with the exported model; raises when weights are missing or extra."""
    import torch
    import transformers
    import make_hf_fixture
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        export_dir, dtype=torch.float32, attn_implementation=make_hf_fixture.attention_of(export_dir),
        output_loading_info=True)
    problems = {key: value for key, value in info.items() if value}
    if problems:
        raise RuntimeError(f"{export_dir}: transformers reports {problems}")
    with torch.no_grad():
        return step1_loss(model, ids).item()


def step1_loss(model, ids):
    """tierzero's sample: inputs ids[:SEQ], targets ids[1:]; shift_labels gives transformers' loss on
    those targets at the same SEQ positions (LongRoPE picks its factors by the sequence length)."""
    import torch
    inputs, targets = torch.tensor([ids[:-1]]), torch.tensor([ids[1:]])
    return model(input_ids=inputs, labels=inputs, shift_labels=targets).loss


def transformers_step1(model_dir, ids):
    import torch
    import transformers
    import make_hf_fixture
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation=make_hf_fixture.attention_of(model_dir)).train()
    loss = step1_loss(model, ids)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return loss.item(), torch.sqrt(sum((g.double() ** 2).sum() for g in grads)).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--fixture-dir", required=True)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: transformers is not installed")
        return 77
    fixture = subprocess.run([sys.executable, os.path.join(HERE, "make_hf_fixture.py"), "--out", args.fixture_dir])
    if fixture.returncode != 0:
        return fixture.returncode
    sys.path.insert(0, HERE)
    import make_hf_fixture
    import torch
    failures = 0
    for name in make_hf_fixture.MODELS:
        model_dir = os.path.join(args.fixture_dir, name)
        with open(os.path.join(model_dir, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        ids = torch.randint(0, vocab, (SEQ + 1,), generator=torch.Generator().manual_seed(len(name))).tolist()
        with tempfile.TemporaryDirectory() as work:
            with open(os.path.join(work, "ids.jsonl"), "w") as f:
                f.write(json.dumps({"input_ids": ids}) + "\n")
            export_checked = name.startswith(EXPORT_CHECKED)
            export_dir = os.path.join(work, "export")
            (loss, grad_norm), = tierzero_losses(args.tierzero, model_dir, work, 1,
                                                  export_dir if export_checked else None)
            hf_loss, hf_grad_norm = transformers_step1(model_dir, ids)
            loss_error, norm_error = abs(loss - hf_loss) / hf_loss, abs(grad_norm - hf_grad_norm) / hf_grad_norm
            ok = loss_error <= LOSS_TOLERANCE and norm_error <= GRAD_NORM_TOLERANCE
            report = (f"{name}: loss {loss:.8f} vs transformers {hf_loss:.8f} (rel {loss_error:.1e}), "
                      f"grad norm {grad_norm:.6f} vs {hf_grad_norm:.6f} (rel {norm_error:.1e})")
            if export_checked:
                step2 = tierzero_losses(args.tierzero, model_dir, work, 2)[1][0]
                exported = exported_loss(export_dir, ids)
                export_error = abs(exported - step2) / step2
                ok = ok and export_error <= LOSS_TOLERANCE
                report += f"; exported model's loss {exported:.8f} vs step 2's {step2:.8f} (rel {export_error:.1e})"
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {report}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
