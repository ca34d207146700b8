#!/usr/bin/env python3
"""Compares two sets of model weights tensor by tensor, bit for bit, whatever file format holds them.

    compare_weights.py REFERENCE CANDIDATE [--json OUT]

Each side is a folder or a file: Hugging Face safetensors (model.safetensors, or the shards listed by
model.safetensors.index.json, or every *.safetensors in the folder) or a torch.save'd state dict
(pytorch_model.bin, as DeepSpeed's save_16bit_model writes it; read with weights_only=True and mmap).
Both sides must hold the same names, and each tensor the same dtype, shape and bytes; a floating-point
tensor that differs is reported with its largest absolute difference. One tensor in memory at a time
per side (safetensors and the .bin are memory-mapped).

Prints one line: `OK: N tensors, X GB, equal bit for bit (DTYPES)` or `FAIL: ...` with the first
differences on the lines above it; exit 0 on OK, 1 on FAIL.
"""
import argparse
import glob
import json
import os
import sys


def open_weights(path):
    """name -> a function that loads that tensor, for a safetensors or torch.save'd source."""
    import torch
    from safetensors import safe_open

    if os.path.isdir(path):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted({os.path.join(path, n) for n in json.load(f)["weight_map"].values()})
        else:
            files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
        if not files:
            bins = sorted(glob.glob(os.path.join(path, "*.bin")))
            if len(bins) != 1:
                sys.exit(f"compare_weights: {path}: no *.safetensors and not exactly one *.bin ({len(bins)} found)")
            files = bins
    elif os.path.isfile(path):
        files = [path]
    else:
        sys.exit(f"compare_weights: {path}: no such file or folder")
    loaders = {}
    for file in files:
        if file.endswith(".safetensors"):
            handle = safe_open(file, "pt")
            loaders.update({name: (lambda h=handle, n=name: h.get_tensor(n)) for name in handle.keys()})
        else:
            state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
            loaders.update({name: (lambda t=tensor: t) for name, tensor in state.items()})
    return loaders


def same_bits(a, b):
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.element_size() == 0 or a.numel() == 0:
        return True
    as_bytes = lambda t: t.contiguous().view(-1).view(torch.uint8)  # noqa: E731
    return torch.equal(as_bytes(a), as_bytes(b))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("candidate")
    p.add_argument("--json", help="write {ok, tensors, bytes, dtypes, problems} here")
    a = p.parse_args()
    ref, cand = open_weights(a.reference), open_weights(a.candidate)
    problems = [f"only in {a.reference}: {n}" for n in sorted(ref.keys() - cand.keys())]
    problems += [f"only in {a.candidate}: {n}" for n in sorted(cand.keys() - ref.keys())]
    total_bytes, dtypes = 0, set()
    for name in sorted(ref.keys() & cand.keys()):
        want, got = ref[name](), cand[name]()
        total_bytes += want.numel() * want.element_size()
        dtypes.add(str(want.dtype).replace("torch.", ""))
        if same_bits(want, got):
            continue
        if want.dtype != got.dtype or want.shape != got.shape:
            problems.append(f"{name}: {want.dtype} {tuple(want.shape)} vs {got.dtype} {tuple(got.shape)}")
        elif want.is_floating_point():
            diff = (want.double() - got.double()).abs()
            problems.append(f"{name}: {int((diff != 0).sum())} of {want.numel()} elements differ, "
                            f"max abs diff {float(diff.max()):.3e}")
        else:
            problems.append(f"{name}: {int((want != got).sum())} of {want.numel()} elements differ")
    for line in problems[:10]:
        print("  " + line)
    ok = not problems and len(ref) > 0
    summary = (f"{len(ref)} tensors, {total_bytes / 1e9:.3f} GB, " + ", ".join(sorted(dtypes)))
    print(f"OK: {summary}, equal bit for bit" if ok else f"FAIL: {len(problems)} problems; reference {summary}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ok": ok, "tensors": len(ref), "bytes": total_bytes, "dtypes": sorted(dtypes),
                       "problems": problems}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
