#!/usr/bin/env python3
"""`tierzero train --data chat.jsonl` end to end: chat rows against transformers' apply_chat_template.

A tiny random Qwen2 model (save_pretrained) in a directory with a real tokenizer and a real chat
template (make_chat_fixture.py's qwen2.5 case: llama.cpp's qwen2 vocab, Qwen2.5-Instruct's
template, both from the llama-cpp-python sdist) is trained on make_chat_fixture.py's rows (chat
rows with tool calls, and TRL's conversational prompt-completion rows) as a JSONL file; the rows
transformers raises on (content parts and a missing "content" where this template joins it to a
string) are left out. The reference is transformers alone: each row's ids from
apply_chat_template(tokenize=True) and its mask (make_chat_fixture's reference_row: each assistant
turn as rendered, tool calls included; a prompt-completion row's completion, as TRL's SFTTrainer),
the rows one stream packed into seq_len + 1 windows (engine/data/token_data.h) with label -100
where the target token carries no loss.

  1. `tierzero train --model DIR --data chat.jsonl --steps 3` (fp32, micro-batch 1, lr 0, seq_len
     chosen so the stream is 3 samples): the run succeeds and its 3 step losses (--metrics) are
     transformers' losses on the 3 samples, to 1e-5 relative. lr 0 keeps the weights those of DIR;
     the sampler visits the samples in a seeded permutation, so losses are compared sorted.
  2. `tierzero data prepare --tokenizer DIR chat.jsonl chat.tokens`: its TZTOKENS tokens and loss
     mask are the reference ids and mask, and `train --data chat.tokens` gives the same 3 losses as
     the JSONL run, bit for bit (the mask prepare writes is the one train uses).

  chat_train_vs_hf.py --tierzero BUILD/tools/tierzero --chat-engine 0|1 --sdist llama_cpp_python-X.tar.gz
Exit 0 when all matches, 1 when not, 77 (ctest's skip) when the Jinja engine is compiled out
(--chat-engine 0) or make_chat_fixture.py cannot run (no transformers / tokenizers / gguf, no sdist).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "text"))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
STEPS = 3
LOSS_TOLERANCE = 1e-5
CASE = "qwen2.5"
MODEL = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=True)


def write_model(directory, sdist):
    """make_chat_fixture's qwen2.5 model directory plus a tiny random Qwen2 (config.json + safetensors)."""
    import make_chat_fixture
    import make_hf_fixture
    import torch
    import transformers
    template_file, vocab, specials = make_chat_fixture.CASES[CASE]
    template = make_chat_fixture.read_templates(sdist, {template_file})[template_file]
    make_chat_fixture.write_model_dir(directory, make_chat_fixture.real_tokenizer(sdist, vocab), vocab, specials,
                                      template)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), **MODEL)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    make_hf_fixture.randomize(model, seed=1)
    model.save_pretrained(directory)
    return tokenizer


def reference_stream(tokenizer, rows):
    """The rows transformers renders, and their ids and masks as one stream in row order (no EOS:
    the template ends each turn itself)."""
    import make_chat_fixture
    kept, ids, mask = [], [], []
    for row in rows:
        try:
            ref = make_chat_fixture.reference_row(tokenizer, row, generation=False)
        except Exception:  # transformers raises on it (tierzero refuses it: tests/text/chat_rows_test.cpp)
            continue
        kept.append(row)
        ids += ref["ids"]
        mask += ref["mask"]
    return kept, ids, mask


def reference_losses(model_dir, ids, mask, seq_len):
    """transformers' loss on each seq_len window: inputs ids[s:s+T], targets ids[s+1:s+T+1], -100
    where the target carries no loss."""
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    losses = []
    with torch.no_grad():
        for first in range(0, STEPS * seq_len, seq_len):
            inputs = torch.tensor([ids[first:first + seq_len]])
            targets = [t if m else -100 for t, m in zip(ids[first + 1:first + seq_len + 1],
                                                         mask[first + 1:first + seq_len + 1])]
            if all(t == -100 for t in targets):
                raise RuntimeError(f"sample at {first} has no assistant token: pick another seq_len")
            losses.append(model(input_ids=inputs, labels=inputs, shift_labels=torch.tensor([targets])).loss.item())
    return losses


def run(command):
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def train_losses(tierzero, model_dir, data, work, seq_len, name):
    """`tierzero train` for STEPS steps on `data`; its step losses from --metrics."""
    config, metrics = os.path.join(work, name + ".ds.json"), os.path.join(work, name + ".metrics.jsonl")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 0},
                   "optimizer": {"type": "AdamW", "params": {"lr": 0.0, "weight_decay": 0.0}},
                   "tierzero": {"data": {"seq_len": seq_len}}}, f)
    run([tierzero, "train", "--model", model_dir, "--config", config, "--data", data, "--steps", str(STEPS),
         "--metrics", metrics])
    with open(metrics) as f:
        return [row["loss"] for row in map(json.loads, f) if row.get("type") == "step"]


def read_token_file(path):
    """A TZTOKENS file (text/internal/dataset.h): its tokens and loss mask ([] without one)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, count, flags = struct.unpack_from("<8sIIQQ", data)
    if magic != b"TZTOKENS" or width not in (2, 4):
        raise RuntimeError(f"{path}: not a TZTOKENS file ({magic!r}, {width} bytes per token)")
    tokens = list(struct.unpack_from(f"<{count}{'H' if width == 2 else 'I'}", data, 32))
    if version < 2 or not flags & 1:
        return tokens, []
    bits = data[32 + count * width:]
    return tokens, [(bits[i // 8] >> (i % 8)) & 1 for i in range(count)]


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--chat-engine", required=True, choices=("0", "1"))
    parser.add_argument("--sdist", required=True)
    args = parser.parse_args()
    if args.chat_engine == "0":
        print("SKIP: this build has no chat-template engine (cmake/FindLlamaCppJinja.cmake found no usable sdist)")
        return 77
    import make_chat_fixture
    missing = make_chat_fixture.missing_packages()
    if missing or not os.path.exists(args.sdist):
        print(f"SKIP: {' '.join(missing) or args.sdist} missing (scripts/setup.sh installs it)")
        return 77
    with tempfile.TemporaryDirectory() as work:
        model_dir, chat = os.path.join(work, "model"), os.path.join(work, "chat.jsonl")
        tokenizer = write_model(model_dir, args.sdist)
        rows, ids, mask = reference_stream(tokenizer, make_chat_fixture.ALL_ROWS)
        with open(chat, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        seq_len = (len(ids) - 1) // STEPS
        expected = reference_losses(model_dir, ids, mask, seq_len)
        losses = train_losses(args.tierzero, model_dir, chat, work, seq_len, "jsonl")
        errors = [abs(a - b) / b for a, b in zip(sorted(losses), sorted(expected))]
        ok = check("train --data chat.jsonl", len(losses) == STEPS and max(errors) <= LOSS_TOLERANCE,
                   f"losses {losses} vs transformers {expected} (seq_len {seq_len}, {sum(mask)} of {len(ids)} "
                   f"tokens carry loss; max rel {max(errors):.1e})")

        prepared = os.path.join(work, "chat.tokens")
        run([args.tierzero, "data", "prepare", "--no-progress", "--tokenizer", model_dir, chat, prepared])
        tokens, prepared_mask = read_token_file(prepared)
        ok &= check("data prepare", tokens == ids and prepared_mask == mask,
                    f"{len(tokens)} tokens, {sum(prepared_mask)} with loss vs transformers' {len(ids)}, {sum(mask)}")
        prepared_losses = train_losses(args.tierzero, model_dir, prepared, work, seq_len, "prepared")
        ok &= check("train --data chat.tokens", prepared_losses == losses,
                    f"losses {prepared_losses} vs the JSONL run's {losses}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
