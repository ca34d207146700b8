#!/usr/bin/env python3
"""Fills a ds_config's "auto" values as the Hugging Face Trainer does (transformers'
HfTrainerDeepSpeedConfig.trainer_config_process and trainer_config_finalize), the reference for
tierzero's "auto" resolution (hf_auto_test.cpp):

    hf_trainer_fill.py IN.json OUT.json --world 1 --micro-batch 4 --grad-accum 2 --lr 3e-4 ...

Each flag is the `tierzero train` flag standing for the TrainingArguments field it sets. Exits 77
when transformers, deepspeed or accelerate is missing.
"""
import argparse
import json
import sys
import types

try:
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("config_in")
p.add_argument("config_out")
p.add_argument("--world", type=int, default=1)
p.add_argument("--micro-batch", type=int, required=True)
p.add_argument("--grad-accum", type=int, required=True)
p.add_argument("--lr", type=float, required=True)
p.add_argument("--warmup-steps", type=int, required=True)
p.add_argument("--steps", type=int, required=True)
p.add_argument("--max-grad-norm", type=float, required=True)
p.add_argument("--adam-beta1", type=float, required=True)
p.add_argument("--adam-beta2", type=float, required=True)
p.add_argument("--adam-epsilon", type=float, required=True)
p.add_argument("--weight-decay", type=float, required=True)
p.add_argument("--bf16", action="store_true")
p.add_argument("--fp16", action="store_true")
p.add_argument("--hidden-size", type=int, required=True)
a = p.parse_args()

try:
    with open(a.config_in) as f:
        hf = HfTrainerDeepSpeedConfig(json.load(f))
except Exception as e:  # accelerate or deepspeed missing: transformers checks them here
    print(f"skip: {e}")
    sys.exit(77)
args = types.SimpleNamespace(
    world_size=a.world, per_device_train_batch_size=a.micro_batch, gradient_accumulation_steps=a.grad_accum,
    max_grad_norm=a.max_grad_norm, learning_rate=a.lr, adam_beta1=a.adam_beta1, adam_beta2=a.adam_beta2,
    adam_epsilon=a.adam_epsilon, weight_decay=a.weight_decay, save_on_each_node=False, fp16=a.fp16,
    fp16_full_eval=False, bf16=a.bf16, bf16_full_eval=False, get_warmup_steps=lambda total: a.warmup_steps)
hf.trainer_config_process(args)
model = types.SimpleNamespace(config=types.SimpleNamespace(hidden_size=a.hidden_size))
hf.trainer_config_finalize(args, model, a.steps)
with open(a.config_out, "w") as f:
    json.dump(hf.config, f)
