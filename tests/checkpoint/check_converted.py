"""Checks `tierzero convert` output with the Python safetensors package and transformers.

usage: check_converted.py [--safetensors-only] SPEC.json OUT:DTYPE [OUT:DTYPE ...]   (DTYPE: bf16 | fp16 | fp32)
SPEC: {"tensors": {name: {"seed": s, "shape": [...]}}, "tied": {alias: source}}. Tensor values are
((j * 7919 + seed) % 65536 - 32768) / 3000 in fp32, converted with torch's .to(DTYPE); the files
must match bit for bit. When transformers is importable and OUT has config.json, the model must
load with from_pretrained and hold the same tensors (tied weights included), unless
--safetensors-only is given (a multi-GB benchmark model).
Exits 77 (skip) when torch or safetensors cannot be imported.
"""
import json
import os
import sys

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

try:
    import transformers
except ImportError:
    transformers = None

args = sys.argv[1:]
safetensors_only = "--safetensors-only" in args
args = [a for a in args if a != "--safetensors-only"]
spec = json.load(open(args[0]))


def check(out, dtype_name):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    bits = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}[dtype]
    index_path = os.path.join(out, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index = json.load(open(index_path))
        files = sorted(set(index["weight_map"].values()))
    else:
        index = None
        files = ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(out, f)))
    assert set(tensors) == set(spec["tensors"]), (sorted(tensors), sorted(spec["tensors"]))
    if index is not None:
        total = sum(t.numel() * t.element_size() for t in tensors.values())
        assert index["metadata"]["total_size"] == total, (index["metadata"], total)

    for name, t in spec["tensors"].items():
        n = 1
        for d in t["shape"]:
            n *= d
        j = torch.arange(n, dtype=torch.int64)
        ref = ((((j * 7919 + t["seed"]) % 65536) - 32768).to(torch.float32) / 3000.0).reshape(t["shape"]).to(dtype)
        got = tensors[name]
        assert got.dtype == dtype, (name, got.dtype)
        assert list(got.shape) == t["shape"], (name, got.shape)
        assert torch.equal(got.view(bits), ref.view(bits)), name
    print(f"safetensors: {len(tensors)} tensors in {len(files)} files match torch's .to({dtype_name})")

    if not safetensors_only and transformers is not None and os.path.exists(os.path.join(out, "config.json")):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(out, dtype=dtype)
        state = model.state_dict()
        loaded = 0
        for name, got in tensors.items():
            if name in state:
                assert torch.equal(state[name].view(bits), got.view(bits)), name
                loaded += 1
        for alias, source in spec["tied"].items():
            assert torch.equal(state[alias].view(bits), tensors[source].view(bits)), alias
        print(f"transformers {transformers.__version__}: {type(model).__name__} loaded {loaded} tensors, tied ok")


for arg in args[1:]:
    out, dtype_name = arg.rsplit(":", 1)
    check(out, dtype_name)
