#!/usr/bin/env python3
"""Prints, as JSON, the optimizer and lr schedule the Hugging Face Trainer trains with when its
DeepSpeed config has neither an optimizer nor a scheduler section (LLaMA-Factory's
ds_z3_offload_config.json, the transformers docs' ZeRO-3 example): transformers'
deepspeed_optim_sched() on such a config, then Trainer.create_scheduler(max_steps), as
Trainer._prepare_for_training calls them. The reference for tierzero's defaults without an
optimizer section (hf_auto_test.cpp):

    hf_trainer_defaults.py OUT.json --lr 3e-4 --run 20:5 --run 8 [--adam-beta1 X ...]

OUT.json: {"optimizer": class name, "lr", "betas", "eps", "weight_decay", "runs": [{"steps",
"warmup", "lrs": the lr of each optimizer step 0 .. steps + 1}]}, a run per --run STEPS[:WARMUP].
A value left out keeps the TrainingArguments default. Exits 77 when transformers, accelerate or
torch is missing.
"""
import argparse
import json
import sys
import tempfile

try:
    import torch
    from transformers import Trainer, TrainingArguments
    from transformers.integrations.deepspeed import deepspeed_optim_sched
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("out")
p.add_argument("--lr", type=float, required=True)
p.add_argument("--run", action="append", required=True, metavar="STEPS[:WARMUP]",
               help="max_steps and warmup_steps (left out: the default) of one run; repeatable")
p.add_argument("--adam-beta1", type=float)
p.add_argument("--adam-beta2", type=float)
p.add_argument("--adam-epsilon", type=float)
a = p.parse_args()


class NoSections:
    """transformers' HfTrainerDeepSpeedConfig of a config without optimizer and scheduler sections."""
    config = {"zero_optimization": {"stage": 3}}

    def is_offload(self):
        return False


def run(out_dir, steps, warmup):
    """What _prepare_for_training builds: the optimizer, its settings, and the lr of each step."""
    given = {"learning_rate": a.lr, "max_steps": steps, "warmup_steps": warmup, "adam_beta1": a.adam_beta1,
             "adam_beta2": a.adam_beta2, "adam_epsilon": a.adam_epsilon}
    args = TrainingArguments(output_dir=out_dir, report_to=[], use_cpu=True,
                             **{k: v for k, v in given.items() if v is not None})
    model = torch.nn.Linear(4, 4)
    trainer = Trainer(model=model, args=args)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer, scheduler = deepspeed_optim_sched(trainer, NoSections(), args, steps, params)
    assert scheduler is None, "with the Trainer's own optimizer, the scheduler comes from create_scheduler"
    group = optimizer.param_groups[0]
    built = {"optimizer": type(optimizer).__name__, "lr": group["lr"], "betas": list(group["betas"]),
             "eps": group["eps"], "weight_decay": group["weight_decay"]}
    scheduler = trainer.create_scheduler(num_training_steps=steps, optimizer=optimizer)
    lrs = []
    for _ in range(steps + 2):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return built, lrs


result = {"runs": []}
with tempfile.TemporaryDirectory() as out_dir:
    for spec in a.run:
        steps, _, warmup = spec.partition(":")
        try:
            built, lrs = run(out_dir, int(steps), int(warmup) if warmup else None)
        except ImportError as e:  # accelerate missing: the Trainer needs it
            print(f"skip: {e}")
            sys.exit(77)
        result.update(built)
        result["runs"].append({"steps": int(steps), "warmup": int(warmup) if warmup else None, "lrs": lrs})
with open(a.out, "w") as f:
    json.dump(result, f)
