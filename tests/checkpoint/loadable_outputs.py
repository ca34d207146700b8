#!/usr/bin/env python3
"""`tierzero train --export` and `tierzero convert` write directories transformers loads as they are.

  loadable_outputs.py --tierzero BUILD/tools/tierzero --deepspeed-data tests/data/deepspeed

export: a tiny untied Llama saved by transformers (config.json, safetensors, generation_config.json)
  beside a tokenizer saved by transformers (tokenizer.json, tokenizer_config.json, chat_template.jinja)
  is trained 2 steps by `tierzero train --model M --export OUT`. AutoTokenizer.from_pretrained(OUT)
  gives M's tokenizer's ids and chat-template text, AutoModelForCausalLM.from_pretrained(OUT) loads
  with no missing or unexpected weight, and OUT/generation_config.json is M's. An export of a model
  from --model-config says it has no tokenizer; its generation_config.json has config.json's token ids.
convert: a DeepSpeed checkpoint of tests/data/deepspeed copied without the config.json that sits
  beside it. `tierzero convert` alone says "no config.json: pass --model-config" and "no tokenizer
  files"; with --model-config CONFIG and --model TOKENIZER_DIR (a tokenizer, no config), OUT loads with
  AutoModelForCausalLM (weights equal to DeepSpeed's zero_to_fp32 output) and AutoTokenizer, and its
  derived generation_config.json has the token ids GenerationConfig.from_model_config gives.
Exit 0 when every check passes, 1 when one fails, 77 (ctest's skip) without transformers.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers
    from safetensors.torch import load_file
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
except ImportError as e:
    print(f"transformers, tokenizers, safetensors or torch is not installed ({e})")
    sys.exit(77)

VOCAB, SEQ = 96, 16
DEEPSPEED_CASE = "w1_s2_fp32_untied_offload"
TEXT = "w5 w17 w3 w88 unknownword w40"
CHAT = [{"role": "user", "content": "w1 w2"}, {"role": "assistant", "content": "w3"}]
failures = []


def check(condition, what):
    print(("ok: " if condition else "FAIL: ") + what)
    if not condition:
        failures.append(what)


def save_tokenizer(out):
    """A word-level tokenizer of VOCAB ids (<unk> <s> </s> w3..) with a chat template, saved by transformers."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                                unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    fast.save_pretrained(out)


def save_model(out):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(out)


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout, flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL: exit {proc.returncode}")
    return proc.stdout


def load_model(out, buffers=()):
    """The model from `out`; every weight present and fitting, nothing unexpected beyond `buffers`."""
    model, info = AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    problems = [key for kind in ("missing_keys", "mismatched_keys") for key in info[kind]]
    problems += [key for key in info["unexpected_keys"] if key not in buffers]
    check(not problems, f"AutoModelForCausalLM loads {out} with every weight (loading info {info})")
    return model


def check_tokenizer(out, reference_dir):
    tokenizer, reference = AutoTokenizer.from_pretrained(out), AutoTokenizer.from_pretrained(reference_dir)
    ids = tokenizer(TEXT)["input_ids"]
    check(ids == reference(TEXT)["input_ids"] and len(ids) == 6, f"AutoTokenizer loads {out}: ids {ids}")
    check(tokenizer.apply_chat_template(CHAT, tokenize=False) == reference.apply_chat_template(CHAT, tokenize=False),
          f"{out}'s chat template renders as the original's")


def check_export(args, work):
    model_dir = os.path.join(work, "model")
    save_model(model_dir)
    save_tokenizer(model_dir)
    tokens = [(i * 7 + 3) % VOCAB for i in range(SEQ * 8)]
    data = os.path.join(work, "tokens.bin")
    with open(data, "wb") as f:
        f.write(b"TZTOKENS" + struct.pack("<IIQQ", 1, 2, len(tokens), 0) + struct.pack(f"<{len(tokens)}H", *tokens))
    config = os.path.join(work, "ds_config.json")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 0}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "tierzero": {"data": {"path": data, "seq_len": SEQ}}}, f)
    out = os.path.join(work, "export")
    run([args.tierzero, "train", "--model", model_dir, "--config", config, "--steps", "2", "--export", out])
    load_model(out)
    check_tokenizer(out, model_dir)
    with open(os.path.join(out, "generation_config.json")) as f, \
            open(os.path.join(model_dir, "generation_config.json")) as g:
        check(json.load(f) == json.load(g), "the export's generation_config.json is the model directory's")

    random_init = os.path.join(work, "export_random_init")
    output = run([args.tierzero, "train", "--model-config", os.path.join(model_dir, "config.json"), "--config", config,
                  "--steps", "1", "--export", random_init])
    check("has no tokenizer files" in output and not os.path.exists(os.path.join(random_init, "tokenizer.json")),
          "an export without --model says it has no tokenizer")
    generation = GenerationConfig.from_pretrained(random_init)
    check((generation.bos_token_id, generation.eos_token_id) == (1, 2),
          "and its generation_config.json is derived from config.json's token ids")


def check_convert(args, work):
    source = os.path.join(args.deepspeed_data, DEEPSPEED_CASE)
    checkpoint = os.path.join(work, "ds_checkpoint")  # DeepSpeed's files without the config.json beside them
    os.makedirs(checkpoint)
    shutil.copy(os.path.join(source, "latest"), checkpoint)
    with open(os.path.join(source, "latest")) as f:
        tag = f.read().strip()
    shutil.copytree(os.path.join(source, tag), os.path.join(checkpoint, tag))

    bare = os.path.join(work, "bare")
    output = run([args.tierzero, "convert", checkpoint, bare, "--dtype", "fp32", "--no-progress"])
    check("no config.json: pass --model-config" in output, "convert without a config says so and names the flag")
    check("no tokenizer files: pass --model DIR" in output, "convert without a tokenizer says so and names the flag")
    check(not os.path.exists(os.path.join(bare, "config.json")), "and writes no config.json")

    with open(os.path.join(source, "config.json")) as f:
        other_model = {**json.load(f), "vocab_size": VOCAB + 32}
    other_config = os.path.join(work, "other_config.json")
    with open(other_config, "w") as f:
        json.dump(other_model, f)
    proc = subprocess.run([args.tierzero, "convert", checkpoint, os.path.join(work, "other"), "--no-progress",
                           "--model-config", other_config], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(proc.stdout)
    check(proc.returncode != 0 and "vocab_size 128" in proc.stdout and not os.path.exists(os.path.join(work, "other")),
          "another model's --model-config is refused, naming the mismatch, and nothing is written")

    tokenizer_dir = os.path.join(work, "tokenizer")
    save_tokenizer(tokenizer_dir)
    out = os.path.join(work, "converted")
    output = run([args.tierzero, "convert", checkpoint, out, "--dtype", "fp32", "--no-progress",
                  "--model-config", os.path.join(source, "config.json"), "--model", tokenizer_dir])
    check("warning" not in output, "convert with --model-config and --model warns of nothing")
    reference = load_file(os.path.join(source, "zero_to_fp32.safetensors"))
    # The fixture model registers a position_ids buffer, which DeepSpeed saves and zero_to_fp32 keeps;
    # LlamaForCausalLM has no such buffer and reports it as unexpected.
    buffers = [name for name in reference if "position_ids" in name]
    state = load_model(out, buffers).state_dict()
    check(set(state) <= set(reference) and all(torch.equal(state[name], reference[name]) for name in state),
          "the converted weights are zero_to_fp32's")
    check_tokenizer(out, tokenizer_dir)
    expected = GenerationConfig.from_model_config(transformers.AutoConfig.from_pretrained(out))
    loaded = GenerationConfig.from_pretrained(out)
    check((loaded.bos_token_id, loaded.eos_token_id, loaded.pad_token_id) ==
          (expected.bos_token_id, expected.eos_token_id, expected.pad_token_id) == (1, 2, None),
          f"the derived generation_config.json has the model's token ids ({loaded.bos_token_id}, "
          f"{loaded.eos_token_id})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--deepspeed-data", required=True)
    parser.add_argument("--only", choices=["export", "convert"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierzero-loadable-") as work:
        if args.only != "convert":
            check_export(args, work)
        if args.only != "export":
            check_convert(args, work)
    print(f"{len(failures)} failure(s)" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
