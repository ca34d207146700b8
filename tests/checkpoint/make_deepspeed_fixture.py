#!/usr/bin/env python3
"""Builds DeepSpeed ZeRO-1/2/3 checkpoints with torch.save, laid out as we believe DeepSpeed's engine
writes them (deepspeed/runtime/engine.py, zero/stage3.py, zero/stage_1_and_2.py), without running
DeepSpeed. These encode our beliefs: the truth is the corpus DeepSpeed itself wrote
(tests/data/deepspeed, deepspeed_corpus/make_corpus.py; deepspeed_corpus_test.cpp). They are kept
for what the corpus cannot give: one corrupt file per error class (deepspeed_corrupt_test.cpp),
world sizes 3 and 8 and odd parameter sizes (padding), and the --bench size. Each fixture also gets truth.json + truth.bin: the consolidated fp32 tensors it was built
from, in zero_to_fp32's order (buffers, frozen, trainable), so a reader can be checked without
DeepSpeed installed.

  make_deepspeed_fixture.py OUT                 the small fixture set used by the tests (bad_* ones
                                                must be refused: see corrupt_specs)
  make_deepspeed_fixture.py OUT --only NAME     one of them
  make_deepspeed_fixture.py OUT --bench GB      one ZeRO-3, world size 4 fixture of about GB of fp32

truth.json: {"tensors": [{"name", "shape", "offset"}], "aliases": [[alias, source]]}; offsets are
in elements of truth.bin (little-endian float32).
"""
import argparse
import collections
import enum
import json
import math
import os
import sys
import types

import torch


def deepspeed_classes():
    """ZeroStageEnum and DynamicLossScaler: DeepSpeed's own when installed, else stand-ins that
    pickle under the same module paths (so the GLOBAL opcodes are identical)."""
    try:
        from deepspeed.runtime.zero.config import ZeroStageEnum
        from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
        return ZeroStageEnum, DynamicLossScaler
    except ImportError:
        pass

    class ZeroStageEnum(int, enum.Enum):
        disabled = 0
        optimizer_states = 1
        gradients = 2
        weights = 3
        max_stage = 3

    class DynamicLossScaler:
        pass

    for module_name, cls in (("deepspeed.runtime.zero.config", ZeroStageEnum),
                             ("deepspeed.runtime.fp16.loss_scaler", DynamicLossScaler)):
        parts = module_name.split(".")
        for i in range(1, len(parts) + 1):
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        module = sys.modules[module_name]
        cls.__module__ = module_name
        cls.__qualname__ = cls.__name__  # pickle finds a class by module + qualname
        setattr(module, cls.__name__, cls)
    return ZeroStageEnum, DynamicLossScaler


ZeroStageEnum, DynamicLossScaler = deepspeed_classes()
DS_VERSION = "0.19.8"


class Spec:
    """One fixture: a model description plus how it was trained."""

    def __init__(self, name, stage, world, half, groups, frozen=(), buffers=(), shared=None,
                 alignment_paddings=True, seed=0, corruption=None):
        self.name, self.stage, self.world, self.half = name, stage, world, half
        self.groups = groups  # list of sub-groups, each a list of (param name, shape)
        self.frozen = list(frozen)  # (name, shape)
        self.buffers = list(buffers)  # (name, shape, dtype)
        self.shared = shared or {}  # alias -> source
        self.alignment_paddings = alignment_paddings
        self.seed = seed
        self.corruption = corruption  # None, "shapes" (param_shapes off by one) or "global" (a non-tensor)


def loss_scaler(half):
    scaler = DynamicLossScaler.__new__(DynamicLossScaler)
    scaler.__dict__.update(cur_scale=65536.0 if half == torch.float16 else 1.0, cur_iter=7, last_overflow_iter=-1,
                           scale_factor=2.0, scale_window=1000, min_scale=1, delayed_shift=2, cur_hysteresis=2,
                           consecutive_hysteresis=False, raise_error_at_min_scale=True, dtype=half)
    return scaler


def make_values(spec):
    """fp32 masters for trainable params, 16-bit values for frozen ones, buffers."""
    g = torch.Generator().manual_seed(spec.seed)
    masters = collections.OrderedDict()
    for group in spec.groups:
        for name, shape in group:
            masters[name] = torch.randn(shape, generator=g) * 0.02
    frozen = collections.OrderedDict((n, (torch.randn(s, generator=g)).to(spec.half)) for n, s in spec.frozen)
    buffers = collections.OrderedDict()
    for name, shape, dtype in spec.buffers:
        if dtype.is_floating_point:
            buffers[name] = torch.randn(shape, generator=g).to(dtype)
        else:
            buffers[name] = torch.arange(math.prod(shape), dtype=dtype).reshape(shape)
    return masters, frozen, buffers


def partition3(flat, world):
    """Stage 3: pad to a multiple of world, rank r keeps [r*p, (r+1)*p)."""
    n = flat.numel()
    p = math.ceil(n / world)
    padded = torch.zeros(p * world, dtype=flat.dtype)
    padded[:n] = flat
    return [padded[r * p:(r + 1) * p].clone() for r in range(world)]


def module_state(spec, masters, frozen, buffers):
    """The `module` state dict: buffers interleaved with parameters (stage 3: empty placeholders)."""
    module = collections.OrderedDict()
    buffer_items = list(buffers.items())
    params = list(masters.items()) + [(n, v.float()) for n, v in frozen.items()]
    for i, (name, value) in enumerate(params):
        if spec.stage == 3:
            module[name] = torch.empty(0, dtype=spec.half)
        else:
            module[name] = value.to(spec.half)
        if i < len(buffer_items):
            module[buffer_items[i][0]] = buffer_items[i][1]
    for name, value in buffer_items[len(params):]:
        module[name] = value
    return module


def stage12_groups(spec, masters, world):
    """Stage 1/2: each group flattened (with per-parameter alignment paddings), aligned to 2*world,
    split evenly; the last rank's padding is dropped when saved (_get_groups_without_padding)."""
    partitions = [[] for _ in range(world)]
    alignment_paddings = []
    partition_counts = []
    for gi, group in enumerate(spec.groups):
        pieces, pads = [], []
        for pi, (name, _) in enumerate(group):
            pieces.append(masters[name].flatten())
            pad = (gi + pi) % 3 if spec.alignment_paddings else 0
            pads.append(pad)
            pieces.append(torch.full((pad,), 7.0))  # padding content is never read
        flat = torch.cat(pieces)
        align = 2 * world
        aligned = math.ceil(flat.numel() / align) * align
        group_padding = aligned - flat.numel()
        flat = torch.cat([flat, torch.zeros(group_padding)])
        size = aligned // world
        for r in range(world):
            part = flat[r * size:(r + 1) * size]
            if r == world - 1:
                part = part[:size - group_padding]
            partitions[r].append(part.clone())
        alignment_paddings.append(pads)
        partition_counts.append(world)
    return partitions, alignment_paddings, partition_counts


def write_fixture(spec, root):
    masters, frozen, buffers = make_values(spec)
    world = spec.world
    tag = "global_step3"
    tag_dir = os.path.join(root, tag)
    os.makedirs(tag_dir, exist_ok=True)
    with open(os.path.join(root, "latest"), "w") as f:
        f.write(tag)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "tie_word_embeddings": bool(spec.shared)}, f)

    ds_config = {"train_batch_size": 8, "zero_optimization": {"stage": spec.stage},
                 "bf16" if spec.half == torch.bfloat16 else "fp16": {"enabled": True}}
    param_shapes = [collections.OrderedDict((n, torch.Size(s)) for n, s in group) for group in spec.groups]
    if spec.corruption == "shapes":
        name, shape = next(iter(param_shapes[0].items()))
        param_shapes[0][name] = torch.Size([shape[0] + 1] + list(shape[1:]))
    frozen_shapes = collections.OrderedDict((n, torch.Size(s)) for n, s in spec.frozen) if spec.frozen else None
    module = module_state(spec, masters, frozen, buffers)

    def model_states(rank):
        if spec.stage == 3:
            fragments = collections.OrderedDict(
                (n, partition3(v.flatten(), world)[rank]) for n, v in frozen.items())
        else:
            fragments = collections.OrderedDict((n, v.clone()) for n, v in frozen.items())
        return dict(module=module, buffer_names=list(buffers.keys()), optimizer=None, param_shapes=param_shapes,
                    frozen_param_shapes=frozen_shapes, shared_params=dict(spec.shared),
                    frozen_param_fragments=fragments if spec.frozen else None,
                    lr_scheduler={"last_epoch": 3, "base_lrs": [1e-4]}, data_sampler=None, random_ltd=None,
                    sparse_tensor_module_names=set(), skipped_steps=0, global_steps=3, global_samples=24,
                    dp_world_size=world, mp_world_size=1, ds_config=ds_config, ds_version=DS_VERSION)

    prefix = "bf16_" if spec.half == torch.bfloat16 else ""
    if spec.stage == 3:
        for r in range(world):
            torch.save(model_states(r), os.path.join(tag_dir, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))
        for r in range(world):
            groups = []
            for group in spec.groups:
                groups.append(torch.cat([partition3(masters[n].flatten(), world)[r] for n, _ in group]))
            base = {"state": {i: {"step": torch.tensor(3.0), "exp_avg": torch.zeros_like(t),
                                  "exp_avg_sq": torch.zeros_like(t)} for i, t in enumerate(groups)},
                    "param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                                      "params": [i]} for i in range(len(groups))]}
            osd = {"zero_stage": ZeroStageEnum.weights, "loss_scaler": loss_scaler(spec.half),
                   "dynamic_loss_scale": spec.half == torch.float16, "overflow": False, "partition_count": world,
                   "optimizer_state_dict": base, "fp32_flat_groups": groups}
            if spec.corruption == "global" and r == 0:
                # Pickles as GLOBAL 'posix system' where a tensor belongs: never called, must be refused.
                osd["fp32_flat_groups"] = groups[:-1] + [os.system]
            torch.save({"optimizer_state_dict": osd, "ds_config": ds_config, "ds_version": DS_VERSION},
                       os.path.join(tag_dir, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
    else:
        torch.save(model_states(0), os.path.join(tag_dir, "mp_rank_00_model_states.pt"))
        partitions, alignment_paddings, partition_counts = stage12_groups(spec, masters, world)
        for r in range(world):
            osd = {"loss_scaler": loss_scaler(spec.half), "dynamic_loss_scale": spec.half == torch.float16,
                   "overflow": False, "clip_grad": 1.0,
                   "base_optimizer_state": {"state": {}, "param_groups": [{"lr": 1e-4, "params": [0]}]},
                   "single_partition_of_fp32_groups": partitions[r],
                   "zero_stage": ZeroStageEnum.gradients if spec.stage == 2 else ZeroStageEnum.optimizer_states,
                   "group_paddings": [0] * len(spec.groups), "partition_count": partition_counts,
                   "ds_version": DS_VERSION, "param_slice_mappings": [collections.OrderedDict()] * len(spec.groups)}
            if spec.alignment_paddings:
                osd["param_alignment_paddings"] = alignment_paddings
            torch.save({"optimizer_state_dict": osd, "ds_config": ds_config, "ds_version": DS_VERSION},
                       os.path.join(tag_dir, f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))

    # The consolidated truth, in zero_to_fp32's order; aliases of absent sources are dropped.
    ordered = list(buffers.items()) + list(frozen.items()) + list(masters.items())
    entries, blobs, offset = [], [], 0
    for name, value in ordered:
        flat = value.float().flatten()
        entries.append({"name": name, "shape": list(value.shape), "offset": offset})
        blobs.append(flat.numpy().astype("<f4").tobytes())
        offset += flat.numel()
    names = {n for n, _ in ordered}
    aliases = [[a, s] for a, s in spec.shared.items() if s in names]
    with open(os.path.join(root, "truth.bin"), "wb") as f:
        for b in blobs:
            f.write(b)
    with open(os.path.join(root, "truth.json"), "w") as f:
        json.dump({"tensors": entries, "aliases": aliases, "stage": spec.stage, "world": world}, f)


def small_specs():
    bf16, fp16 = torch.bfloat16, torch.float16
    buffers = [("model.rotary.inv_freq", (4,), torch.float32), ("model.norm.running", (3,), bf16),
               ("model.position_ids", (1, 6), torch.int64)]
    layers = lambda k: [(f"model.layers.{k}.attn.q.weight", (7, 5)), (f"model.layers.{k}.attn.q.bias", (7,)),
                        (f"model.layers.{k}.mlp.up.weight", (3, 3, 3)), (f"model.layers.{k}.norm.weight", (1,))]
    embed = [("model.embed_tokens.weight", (11, 5))]
    shared = {"lm_head.weight": "model.embed_tokens.weight", "model.frozen_alias": "model.vision.proj",
              "model.dropped_alias": "model.not_saved"}
    frozen = [("model.vision.proj", (5, 3)), ("model.vision.bias", (13,))]
    return [
        Spec("s3_w1_bf16", 3, 1, bf16, [embed + layers(0), layers(1)], frozen, buffers, shared, seed=1),
        Spec("s3_w2_fp16", 3, 2, fp16, [embed, layers(0), layers(1)], frozen, buffers, shared, seed=2),
        Spec("s3_w3_bf16", 3, 3, bf16, [embed + layers(0), layers(1) + [("lm_out.weight", (2, 17))]],
             frozen + [("model.empty", (0, 4))], buffers, shared, seed=3),
        Spec("s3_w8_fp16", 3, 8, fp16, [embed, layers(0), layers(1), layers(2)], frozen, buffers, shared, seed=4),
        Spec("s2_w1_fp16", 2, 1, fp16, [embed + layers(0), layers(1)], frozen, buffers, shared, seed=5),
        Spec("s2_w2_bf16", 2, 2, bf16, [embed + layers(0), layers(1)], frozen, buffers, shared, seed=6),
        Spec("s2_w3_fp16_nopad", 2, 3, fp16, [embed, layers(0) + layers(1)], frozen, buffers, shared,
             alignment_paddings=False, seed=7),
        Spec("s1_w8_bf16", 1, 8, bf16, [embed + layers(0), layers(1), layers(2)], [], buffers, {}, seed=8),
        Spec("s2_w8_bf16", 2, 8, bf16, [embed + layers(0) + layers(1)], frozen, [], shared, seed=9),
    ]


def corrupt_specs():
    """Fixtures that must be refused: built by torch.save, wrong in meaning rather than in bytes."""
    bf16 = torch.bfloat16
    groups = [[("a.weight", (7, 5)), ("a.bias", (7,))], [("b.weight", (3, 3, 3))]]
    return [Spec("bad_shapes_s3_w2", 3, 2, bf16, groups, seed=10, corruption="shapes"),
            Spec("bad_shapes_s2_w2", 2, 2, bf16, groups, seed=12, corruption="shapes"),
            Spec("bad_global_s3_w2", 3, 2, bf16, groups, seed=11, corruption="global")]


def bench_spec(gigabytes):
    """ZeRO-3, world size 4, bf16: a Llama-like stack sized to about `gigabytes` of fp32 weights."""
    hidden, inter = 2048, 5504
    per_layer = 4 * hidden * hidden + 3 * hidden * inter + 2 * hidden
    layers = max(1, round(gigabytes * 1e9 / 4 / per_layer))
    groups = []
    for k in range(layers):
        p = f"model.layers.{k}."
        groups.append([(p + "self_attn.q_proj.weight", (hidden, hidden)), (p + "self_attn.k_proj.weight", (hidden, hidden)),
                       (p + "self_attn.v_proj.weight", (hidden, hidden)), (p + "self_attn.o_proj.weight", (hidden, hidden)),
                       (p + "mlp.gate_proj.weight", (inter, hidden)), (p + "mlp.up_proj.weight", (inter, hidden)),
                       (p + "mlp.down_proj.weight", (hidden, inter)), (p + "input_layernorm.weight", (hidden + 3,)),
                       (p + "post_attention_layernorm.weight", (hidden - 3,))])
    return Spec("bench", 3, 4, torch.bfloat16, groups, [], [("model.rotary.inv_freq", (64,), torch.float32)], {},
                seed=42)


def write_bench_fixture(spec, root):
    """Like write_fixture for stage 3, but builds each rank's groups in place (no per-parameter
    copies) and skips the truth file, so memory stays near the fp32 total."""
    world = spec.world
    tag_dir = os.path.join(root, "global_step1")
    os.makedirs(tag_dir, exist_ok=True)
    with open(os.path.join(root, "latest"), "w") as f:
        f.write("global_step1")
    g = torch.Generator().manual_seed(spec.seed)
    param_shapes = [collections.OrderedDict((n, torch.Size(s)) for n, s in group) for group in spec.groups]
    sizes = [sum(math.ceil(math.prod(s) / world) for _, s in group) for group in spec.groups]
    ranks = [[torch.empty(n) for n in sizes] for _ in range(world)]
    for gi, group in enumerate(spec.groups):
        at = 0
        for _, shape in group:
            n = math.prod(shape)
            p = math.ceil(n / world)
            value = torch.randn(n, generator=g)
            for r in range(world):
                piece = value[r * p:min(n, (r + 1) * p)]
                ranks[r][gi][at:at + piece.numel()] = piece
                ranks[r][gi][at + piece.numel():at + p] = 0
            at += p
    buffers = collections.OrderedDict((n, torch.randn(s, generator=g)) for n, s, _ in spec.buffers)
    for r in range(world):
        torch.save(dict(module=buffers, buffer_names=list(buffers), optimizer=None, param_shapes=param_shapes,
                        frozen_param_shapes=None, shared_params={}, frozen_param_fragments=None, ds_version=DS_VERSION),
                   os.path.join(tag_dir, f"zero_pp_rank_{r}_mp_rank_00_model_states.pt"))
    for r in range(world):
        osd = {"zero_stage": ZeroStageEnum.weights, "loss_scaler": loss_scaler(spec.half), "dynamic_loss_scale": False,
               "overflow": False, "partition_count": world, "optimizer_state_dict": {"state": {}, "param_groups": []},
               "fp32_flat_groups": ranks[r]}
        torch.save({"optimizer_state_dict": osd, "ds_version": DS_VERSION},
                   os.path.join(tag_dir, f"bf16_zero_pp_rank_{r}_mp_rank_00_optim_states.pt"))
        ranks[r] = None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--only", help="build only this fixture")
    parser.add_argument("--bench", type=float, metavar="GB", help="build the benchmark fixture of about GB fp32")
    args = parser.parse_args()
    if args.bench:
        write_bench_fixture(bench_spec(args.bench), args.out)
        return
    names = []
    for spec in small_specs() + corrupt_specs():
        if args.only and spec.name != args.only:
            continue
        write_fixture(spec, os.path.join(args.out, spec.name))
        names.append(spec.name)
    with open(os.path.join(args.out, "fixtures.json"), "w") as f:
        json.dump(names, f)


if __name__ == "__main__":
    main()
