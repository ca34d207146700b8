#!/usr/bin/env python3
"""Compares two Hugging Face safetensors model directories tensor by tensor, bit for bit.

usage: scripts/compare_safetensors.py DIR_A DIR_B

Each directory holds model.safetensors or shards listed by model.safetensors.index.json. Reads the
files with the standard library only (the format: an 8-byte little-endian header size, a JSON
header of {name: {dtype, shape, data_offsets}}, then the data), so it checks tierzero's writer
against nothing of tierzero's. Prints one line per difference and a summary; exit 0 when both hold
the same names, dtypes, shapes and bytes, 1 otherwise.
"""
import json
import os
import struct
import sys


def shard_files(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return ["model.safetensors"]


def tensor_entries(directory):
    """(name, dtype, shape, file path, byte offset in the file, byte count) of every tensor in
    `directory`, file by file in header order."""
    for name in shard_files(directory):
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            (header_size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_size))
        for key, entry in header.items():
            if key == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            yield key, entry["dtype"], entry["shape"], path, 8 + header_size + begin, end - begin


def tensors(directory):
    """name -> (dtype, shape, bytes) of every tensor in `directory`."""
    found = {}
    for key, dtype, shape, path, offset, length in tensor_entries(directory):
        with open(path, "rb") as f:
            f.seek(offset)
            found[key] = (dtype, shape, f.read(length))
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    problems = [f"only in {sys.argv[1]}: {n}" for n in sorted(a.keys() - b.keys())]
    problems += [f"only in {sys.argv[2]}: {n}" for n in sorted(b.keys() - a.keys())]
    for name in sorted(a.keys() & b.keys()):
        if a[name][:2] != b[name][:2]:
            problems.append(f"{name}: {a[name][:2]} vs {b[name][:2]}")
        elif a[name][2] != b[name][2]:
            problems.append(f"{name}: bytes differ")
    for line in problems:
        print(line)
    total = sum(len(t[2]) for t in a.values())
    print(f"compared {len(a)} tensors, {total} bytes: {'SAME' if not problems else f'{len(problems)} differences'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
