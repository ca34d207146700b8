#!/usr/bin/env python3
"""Runs DeepSpeed's own zero_to_fp32 (get_fp32_state_dict_from_zero_checkpoint) on checkpoint
folders and writes what it returns as ref.json + ref.bin next to each, in truth.json's format
(make_deepspeed_fixture.py): tensors in the returned order, a repeated tensor object recorded as an
alias of its first name, every tensor widened to little-endian float32 (exact for 16-bit floats
and the small integers the fixtures use).

  deepspeed_reference.py DIR...     exit 3 when deepspeed cannot be imported
"""
import contextlib
import io
import json
import os
import sys

try:
    import torch
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
except ImportError as e:
    print(f"deepspeed_reference: {e}", file=sys.stderr)
    sys.exit(3)


def dump(checkpoint_dir):
    with contextlib.redirect_stdout(io.StringIO()):
        state = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir)
    tensors, aliases, first_name, offset = [], [], {}, 0
    with open(os.path.join(checkpoint_dir, "ref.bin"), "wb") as f:
        for name, t in state.items():
            if id(t) in first_name:
                aliases.append([name, first_name[id(t)]])
                continue
            first_name[id(t)] = name
            flat = t.detach().to(torch.float32).contiguous().flatten()
            tensors.append({"name": name, "shape": list(t.shape), "offset": offset})
            f.write(flat.numpy().astype("<f4").tobytes())
            offset += flat.numel()
    with open(os.path.join(checkpoint_dir, "ref.json"), "w") as f:
        json.dump({"tensors": tensors, "aliases": aliases}, f)


for d in sys.argv[1:]:
    dump(d)
