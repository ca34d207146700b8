#!/usr/bin/env python3
"""Prints the reference values pinned in lr_schedule_test.cpp and loss_scaler_test.cpp, computed
by DeepSpeed's own classes (values in the tests come from deepspeed 0.19.8, CPU-only torch):

    pip install deepspeed && python3 tests/engine/config/deepspeed_reference.py
"""
import torch
import deepspeed.comm as dist
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
from deepspeed.runtime.lr_schedules import WarmupCosineLR, WarmupDecayLR, WarmupLR


def one_param_optimizer(lr=1e-3):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def lrs(schedule, iterations):
    out = []
    for it in iterations:
        schedule.last_batch_iteration = it
        out.append((it, schedule.get_lr()[0]))
    return out


print("WarmupLR", lrs(WarmupLR(one_param_optimizer(), warmup_min_lr=1e-5, warmup_max_lr=3e-4, warmup_num_steps=10,
                               warmup_type="log"), [-1, 0, 1, 5, 9, 10, 50]))
print("WarmupDecayLR", lrs(WarmupDecayLR(one_param_optimizer(), total_num_steps=100, warmup_min_lr=0.0,
                                         warmup_max_lr=1e-3, warmup_num_steps=10, warmup_type="linear"),
                           [-1, 0, 3, 10, 55, 100, 120]))
print("WarmupCosineLR", lrs(WarmupCosineLR(one_param_optimizer(2e-4), total_num_steps=60, warmup_min_ratio=0.1,
                                           warmup_num_steps=10, cos_min_ratio=0.05, warmup_type="log"),
                            [-1, 0, 4, 10, 30, 60, 200]))

dist.get_rank = lambda *args, **kwargs: 0  # update_scale() logs on rank 0; no process group here
for consecutive in (False, True):
    scaler = DynamicLossScaler(init_scale=2.0**6, scale_window=3, min_scale=1.0, delayed_shift=2,
                               consecutive_hysteresis=consecutive)
    steps = []
    for step in "OgggggggOOgOOggggOOOOOOOO":  # O: overflow, g: good step
        try:
            scaler.update_scale(step == "O")
        except Exception:  # "Current loss scale already at minimum"
            steps.append("ERR")
            break
        steps.append("{%g, %d}" % (scaler.cur_scale, scaler.cur_hysteresis))
    print("consecutive_hysteresis" if consecutive else "hysteresis", ", ".join(steps))
