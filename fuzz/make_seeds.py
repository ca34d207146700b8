#!/usr/bin/env python3
"""Collects seed corpora for the fuzz harnesses from the project's test fixtures.

  fuzz/make_seeds.py OUT [--engine-tool PATH] [--deepspeed-fixtures DIR] [--max-bytes N] [--per-harness N]

Writes OUT/<harness>/<name> for every harness in fuzz/CMakeLists.txt:
  ds_config          configs/*.json
  model_config       Hugging Face config.json files (the DeepSpeed fixtures' and three written here)
  deepspeed, torch_file, zip, pickle
                     DeepSpeed fixtures made by tests/checkpoint/make_deepspeed_fixture.py (needs
                     torch; TIERZERO_PYTHON or the python running this), or --deepspeed-fixtures DIR
                     already made; deepspeed seeds pack a tag folder as fuzz_deepspeed.cpp reads it
  engine_manifest, engine_section
                     an engine checkpoint written by tests/checkpoint/make_engine_checkpoint (raw
                     and zstd) when --engine-tool is given
  safetensors_header, safetensors_file, token_file, jsonl
                     small valid files written here
Seeds over --max-bytes (default 32768) are left out and only the --per-harness (default 8)
smallest of each harness are kept, so what is committed (fuzz/seeds/) stays small; a long run
can start from a fuller set (--per-harness 1000).
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Seeds:
    def __init__(self, out, max_bytes):
        self.out, self.max_bytes, self.count = out, max_bytes, 0

    def add(self, harness, name, data):
        if isinstance(data, str):
            data = data.encode()
        if len(data) > self.max_bytes:
            return
        os.makedirs(os.path.join(self.out, harness), exist_ok=True)
        with open(os.path.join(self.out, harness, name), "wb") as f:
            f.write(data)
        self.count += 1


def hf_configs():
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
             "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
             "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
             "tie_word_embeddings": False, "torch_dtype": "float32"}
    qwen = dict(llama, architectures=["Qwen2ForCausalLM"], model_type="qwen2", tie_word_embeddings=True,
                torch_dtype="bfloat16")
    mistral = dict(llama, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=64,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    return {"llama.json": llama, "qwen2.json": qwen, "mistral.json": mistral}


def safetensors_file(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def pack_tag_folder(folder):
    """The deepspeed harness's input: [u8 name length][name][u32 size][bytes] per file."""
    out = b""
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        name = os.path.basename(path).encode()
        data = open(path, "rb").read()
        out += bytes([len(name)]) + name + struct.pack("<I", len(data)) + data
    return out


def deepspeed_seeds(seeds, fixtures):
    for fixture in sorted(glob.glob(os.path.join(fixtures, "*", "latest"))):
        root = os.path.dirname(fixture)
        name = os.path.basename(root)
        tag = open(fixture).read().strip()
        seeds.add("deepspeed", name, pack_tag_folder(os.path.join(root, tag)))
        for pt in sorted(glob.glob(os.path.join(root, tag, "*.pt"))):
            if re.search(r"zero_pp_rank_[1-9]", pt):
                continue  # rank 0's files stand for the others: the seeds stay varied
            stem = name + "_" + os.path.basename(pt)
            data = open(pt, "rb").read()
            seeds.add("torch_file", stem, data)
            seeds.add("zip", stem, data)
            with zipfile.ZipFile(pt) as z:
                for entry in z.namelist():
                    if entry.endswith("/data.pkl"):
                        seeds.add("pickle", stem + ".pkl", z.read(entry))


def engine_seeds(seeds, tool):
    for label, flags in (("raw", ["--world", "2", "--stage", "3"]), ("zstd", ["--world", "1", "--stage", "2", "--zstd", "3"])):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([tool, tmp, "--layers", "1", "--hidden", "8", "--intermediate", "16", "--vocab", "16",
                            "--states", "2"] + flags, check=True, stderr=subprocess.DEVNULL)
            tag_dir = os.path.join(tmp, open(os.path.join(tmp, "latest")).read().strip())
            manifest = open(os.path.join(tag_dir, "manifest.json"), "rb").read()
            seeds.add("engine_manifest", label + "_manifest.json", manifest)
            for record in sorted(glob.glob(os.path.join(tag_dir, "rank_*.json"))):
                seeds.add("engine_manifest", label + "_" + os.path.basename(record), open(record, "rb").read())
            files = json.loads(manifest)["files"]
            for f in files:
                blob = open(os.path.join(tag_dir, f["file"]), "rb").read()
                for i, s in enumerate(f["sections"]):
                    stored = blob[s["offset"]:s["offset"] + s["stored_bytes"]]
                    flags_byte = 1 if s["compression"] == "zstd" else 0
                    head = bytes([flags_byte]) + struct.pack("<H", s["raw_bytes"] & 0xFFFF)
                    head += struct.pack("<Q", int(s["xxh3"], 16))
                    seeds.add("engine_section", "%s_rank%d_section%d" % (label, f["rank"], i), head + stored)


def small_file_seeds(seeds):
    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.json"))):
        seeds.add("ds_config", os.path.basename(path), open(path, "rb").read())
    for name, config in hf_configs().items():
        seeds.add("model_config", name, json.dumps(config, indent=2))
    f32 = struct.pack("<6f", *range(6))
    seeds.add("safetensors_file", "two.safetensors",
              safetensors_file({"a": ("F32", [2, 3], f32), "b": ("BF16", [2], b"\x80\x3f\x00\x40")},
                               {"format": "pt"}))
    seeds.add("safetensors_file", "empty_tensor.safetensors", safetensors_file({"e": ("I64", [0, 4], b"")}))
    for name in os.listdir(os.path.join(seeds.out, "safetensors_file")):
        data = open(os.path.join(seeds.out, "safetensors_file", name), "rb").read()
        n = struct.unpack("<Q", data[:8])[0]
        seeds.add("safetensors_header", name, struct.pack("<Q", len(data) - 8 - n) + data[8:8 + n])
    tokens = list(range(40))
    header = b"TZTOKENS" + struct.pack("<IIQQ", 1, 2, len(tokens), 0)
    seeds.add("token_file", "tztokens_u16", bytes([0x31]) + header + struct.pack("<%dH" % len(tokens), *tokens))
    header = b"TZTOKENS" + struct.pack("<IIQQ", 1, 4, len(tokens), 0)
    seeds.add("token_file", "tztokens_u32", bytes([0x72]) + header + struct.pack("<%dI" % len(tokens), *tokens))
    seeds.add("token_file", "headerless_u16", bytes([0x41]) + struct.pack("<%dH" % len(tokens), *tokens))
    lines = [{"input_ids": [1, 2, 3, 4, 5]},
             {"input_ids": [7, 8, 9], "labels": [-100, 8, 9]},
             {"input_ids": [4, 5, 6, 7], "loss_mask": [0, 1, 1, 0]}]
    seeds.add("jsonl", "three_rows.jsonl", bytes([7]) + "\n".join(json.dumps(l) for l in lines).encode() + b"\n\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--engine-tool", help="tests/checkpoint/make_engine_checkpoint from a build")
    p.add_argument("--deepspeed-fixtures", help="a folder made by make_deepspeed_fixture.py")
    p.add_argument("--max-bytes", type=int, default=32768)
    p.add_argument("--per-harness", type=int, default=8)
    args = p.parse_args()
    seeds = Seeds(args.out, args.max_bytes)
    small_file_seeds(seeds)
    if args.engine_tool:
        engine_seeds(seeds, args.engine_tool)
    fixtures = args.deepspeed_fixtures
    made = None
    if not fixtures:
        made = fixtures = tempfile.mkdtemp()
        python = os.environ.get("TIERZERO_PYTHON", sys.executable)
        maker = os.path.join(ROOT, "tests", "checkpoint", "make_deepspeed_fixture.py")
        if subprocess.run([python, maker, fixtures], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
            print("make_seeds: no DeepSpeed fixtures (torch missing for %s?); pickle/zip/torch_file/deepspeed "
                  "seeds skipped" % python, file=sys.stderr)
            fixtures = None
    if fixtures:
        deepspeed_seeds(seeds, fixtures)
    if made:
        shutil.rmtree(made)
    kept = 0
    for harness in sorted(os.listdir(args.out)):
        folder = os.path.join(args.out, harness)
        files = sorted(os.listdir(folder), key=lambda f: (os.path.getsize(os.path.join(folder, f)), f))
        for extra in files[args.per_harness:]:
            os.remove(os.path.join(folder, extra))
        kept += min(len(files), args.per_harness)
    print("make_seeds: %d seeds in %s" % (kept, args.out))


if __name__ == "__main__":
    main()
