#!/usr/bin/env python3
"""`tierzero train --eval-data / --eval-fraction`: the eval loss against transformers' on the same tokens.

A tiny random Qwen2 model with a real tokenizer and chat template (chat_train_vs_hf.py's model:
make_chat_fixture.py's qwen2.5 case from the llama-cpp-python sdist) is trained for 2 steps (fp32,
lr 1e-3, so the weights move) on text rows, evaluating after every step, and exported. The
reference is transformers alone, on the exported model: the eval rows tokenized as
text/internal/dataset.h says (a text row: its ids + EOS, every token a target; a prompt/completion
row: the prompt's ids without loss, then the completion's + EOS with loss; a chat row:
apply_chat_template, loss on the assistant turns, make_chat_fixture's text_mask), one stream packed
into seq_len + 1 windows (engine/data/token_data.h), all samples in one batch: transformers' loss
is then the mean over every target token of the set, which is what tierzero's eval loss is.

  1. --eval-data for text rows, prompt/completion rows and chat rows: the eval record after the
     last step (--metrics) equals transformers' loss on the export to 1e-5 relative, and the
     record's token count is the reference's.
  2. --eval-fraction 0.25: the held-out samples are those the documented rule picks (the first
     ceil(0.25 N) of the splitmix64 Fisher-Yates permutation for epoch 2^64 - 1, reimplemented
     here), evaluated as in 1.
  3. Refused before training, naming the flag: --epochs 0, --eval-fraction 0 and 1, --eval-every
     without eval data.

  eval_vs_hf.py --tierzero BUILD/tools/tierzero --chat-engine 0|1 --sdist llama_cpp_python-X.tar.gz
Exit 0 when all matches, 1 when not, 77 (ctest's skip) when the Jinja engine is compiled out or
make_chat_fixture.py cannot run (no transformers / tokenizers / gguf, no sdist).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "text"))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
TOLERANCE = 1e-5
SEQ_LEN = 16
SEED = 1234  # tierzero.data.seed's default
CORPUS = os.path.join(HERE, "..", "..", "..", "configs", "data", "tiny_corpus.txt")
PROMPT_ROWS = [
    {"prompt": "Question: what is the capital of France?\nAnswer:", "completion": " Paris, on the Seine."},
    {"prompt": "Translate to German: good morning", "completion": " Guten Morgen"},
    {"prompt": "2 + 2 =", "completion": " 4, as every schoolchild knows."},
    {"prompt": "Name a prime number above ten.", "completion": " Eleven; thirteen would do as well."},
]


def text_rows():
    with open(CORPUS, encoding="utf-8") as f:
        lines = [line.strip() for line in f if len(line.strip()) > 40]
    return [{"text": line} for line in lines]


def stream(tokenizer, rows):
    """dataset.h's token stream of `rows` and its loss mask (1 = the token is a target)."""
    import chat_train_vs_hf
    if "messages" in rows[0]:
        _, ids, mask = chat_train_vs_hf.reference_stream(tokenizer, rows)
        return ids, mask
    eos = tokenizer.eos_token_id
    ids, mask = [], []
    for row in rows:
        if "text" in row:
            row_ids, row_mask = list(tokenizer(row["text"])["input_ids"]), None
        else:
            prompt = list(tokenizer(row["prompt"])["input_ids"])
            completion = list(tokenizer(row["completion"], add_special_tokens=False)["input_ids"])
            row_ids, row_mask = prompt + completion, [0] * len(prompt) + [1] * len(completion)
        if not row_ids or row_ids[-1] != eos:
            row_ids.append(eos)
            if row_mask is not None:
                row_mask.append(1)
        ids += row_ids
        mask += row_mask if row_mask is not None else [1] * len(row_ids)
    return ids, mask


def samples(ids, mask):
    """token_data.h's packing: sample i is tokens [i T, i T + T + 1), targets -100 where masked."""
    out = []
    for first in range(0, (len(ids) - 1) // SEQ_LEN * SEQ_LEN, SEQ_LEN):
        inputs = ids[first:first + SEQ_LEN]
        targets = [t if m else -100 for t, m in zip(ids[first + 1:first + SEQ_LEN + 1],
                                                     mask[first + 1:first + SEQ_LEN + 1])]
        out.append((inputs, targets))
    return out


def hf_eval_loss(model_dir, chosen):
    """transformers' loss on all of `chosen` as one batch, and its target-token count."""
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    inputs = torch.tensor([s[0] for s in chosen])
    targets = torch.tensor([s[1] for s in chosen])
    with torch.no_grad():
        loss = model(input_ids=inputs, labels=inputs, shift_labels=targets).loss.item()
    return loss, int((targets != -100).sum())


def held_out_indices(n, fraction, seed):
    """token_data.h's held-out split: the first ceil(f n) of epoch_permutation(n, seed, 2^64 - 1)."""
    mask64 = (1 << 64) - 1
    golden = 0x9E3779B97F4A7C15
    state = seed  # seed ^ (golden * (epoch + 1)): epoch + 1 wraps to 0 for epoch 2^64 - 1

    def next64():
        nonlocal state
        state = (state + golden) & mask64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask64
        return z ^ (z >> 31)

    order = list(range(n))
    for i in range(n, 1, -1):
        threshold = (2 ** 64 - i) % i
        while True:
            r = next64()
            if r >= threshold:
                break
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return sorted(order[:math.ceil(fraction * n)])


def run(command, expect_ok=True):
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if expect_ok and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return path


def train(tierzero, model_dir, work, name, flags):
    """2 steps of `tierzero train` with `flags`, exported; the export and the last eval record."""
    config, metrics, export = (os.path.join(work, name + s) for s in (".ds.json", ".metrics.jsonl", ".export"))
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 0},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.0}},
                   "tierzero": {"data": {"seq_len": SEQ_LEN}}}, f)
    run([tierzero, "train", "--model", model_dir, "--config", config, "--steps", "2", "--eval-every", "1",
         "--metrics", metrics, "--export", export] + flags)
    with open(metrics) as f:
        evals = [row for row in map(json.loads, f) if row.get("type") == "eval"]
    if [e["step"] for e in evals] != [1, 2]:
        raise RuntimeError(f"{name}: eval records after steps {[e['step'] for e in evals]}, expected [1, 2]")
    return export, evals


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
    import chat_train_vs_hf
    ok = True
    with tempfile.TemporaryDirectory() as work:
        model_dir = os.path.join(work, "model")
        tokenizer = chat_train_vs_hf.write_model(model_dir, args.sdist)
        rows = text_rows()
        train_rows, eval_text_rows = rows[:-6], rows[-6:]
        train_data = write_jsonl(os.path.join(work, "train.jsonl"), train_rows)
        # The chat rows transformers renders (tierzero refuses the others, as chat_rows_test checks).
        chat_rows = chat_train_vs_hf.reference_stream(tokenizer, make_chat_fixture.ROWS)[0]
        eval_sets = {"text rows": eval_text_rows, "prompt/completion rows": PROMPT_ROWS, "chat rows": chat_rows}
        for name, eval_rows in eval_sets.items():
            path = write_jsonl(os.path.join(work, name.split()[0].replace("/", "_") + ".eval.jsonl"), eval_rows)
            export, evals = train(args.tierzero, model_dir, work, name.split()[0].replace("/", "_"),
                                  ["--data", train_data, "--eval-data", path])
            expected, tokens = hf_eval_loss(export, samples(*stream(tokenizer, eval_rows)))
            got = evals[-1]["loss"]
            ok &= check(f"--eval-data {name}", abs(got - expected) <= TOLERANCE * expected and
                        evals[-1]["tokens"] == tokens and abs(evals[-1]["perplexity"] - math.exp(got)) <= 1e-9 * got,
                        f"eval loss {got!r} vs transformers {expected!r} over {tokens} target tokens "
                        f"(tierzero: {evals[-1]['tokens']}); after step 1: {evals[0]['loss']!r}")

        all_samples = samples(*stream(tokenizer, train_rows))
        held = held_out_indices(len(all_samples), 0.25, SEED)
        export, evals = train(args.tierzero, model_dir, work, "fraction", ["--data", train_data, "--eval-fraction", "0.25"])
        expected, tokens = hf_eval_loss(export, [all_samples[i] for i in held])
        got = evals[-1]["loss"]
        ok &= check("--eval-fraction 0.25", abs(got - expected) <= TOLERANCE * expected and evals[-1]["tokens"] == tokens
                    and evals[-1]["samples"] == len(held),
                    f"eval loss {got!r} vs transformers {expected!r} on held-out samples {held} of {len(all_samples)}")

        refused = {("--epochs", "0"): "--epochs", ("--eval-fraction", "0"): "--eval-fraction",
                   ("--eval-fraction", "1"): "--eval-fraction", ("--eval-every", "5"): "--eval-every 5"}
        for (flag, value), says in refused.items():
            done = run([args.tierzero, "train", "--model", model_dir, "--data", train_data, "--steps", "1", flag, value],
                       expect_ok=False)
            output = done.stdout + done.stderr
            ok &= check(f"{flag} {value} refused",
                        done.returncode != 0 and says in output and "tierzero train:" not in done.stdout,
                        f"exit {done.returncode}: {output.strip().splitlines()[-1] if output.strip() else ''}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
