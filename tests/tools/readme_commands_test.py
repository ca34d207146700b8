#!/usr/bin/env python3
"""Every shell command README.md and docs/configs.md give runs as written, or is listed here as
skipped with the reason.

  readme_commands_test.py --tierzero BUILD/tools/tierzero

The commands are read from the documents: each line of a fenced code block, and each inline code
span, that starts a command (`build/tools/tierzero ...`, `torchrun ...`, `bash ...`, `mkdir ...`).
A command the table below does not know fails the test, as does an entry the documents no longer
hold, so a new command in the README is run or skipped with a reason, never left untested.

The commands run in document order with bash in a scratch directory that holds `build/` (the build
tree under test), `configs/` and `benchmarks/` (links to the repository's), with HOME there. The
documents' placeholders stay as written and are filled as they describe them: `~/models/Qwen2.5-0.5B`
("a Hugging Face model directory") is a tiny random Qwen2 saved by transformers with the `tokenizers`
fixture's Qwen2 tokenizer trained to 512 tokens (tests/text/make_tokenizer_fixture.py), and
`train.jsonl` ("a JSONL file of your own data") the README's own example rows. Each must exit 0.
Exit 77 when transformers or tokenizers (for the model) or torchrun is missing, after running the
commands that need none of them.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import REPO, fail, tierzero_from_args  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "tests", "text"))
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import corpus  # noqa: E402
import make_tokenizer_fixture  # noqa: E402

DOCUMENTS = ["README.md", "docs/configs.md"]
COMMAND_STARTS = ("build/tools/tierzero ", "build/tools/tierzero\n", "torchrun ", "bash ", "mkdir ")

MODEL = "~/models/Qwen2.5-0.5B"
NEEDS_MODEL = "model"  # the tiny stand-in for MODEL
TOKENIZER_VOCAB = 512  # the byte alphabet and 256 merges
CHATML_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                   "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
NEEDS_TORCHRUN = "torchrun"

# command as the documents write it -> ("run", what it needs, the command to run) or ("skip", reason).
COMMANDS = {
    "bash scripts/setup.sh && build/tools/tierzero train":
        ("run", None, "build/tools/tierzero train"),  # setup.sh installs and builds: the tree under test is built
    "bash scripts/setup.sh --test":
        ("skip", "installs packages and runs the whole suite this test is part of"),
    f"build/tools/tierzero data prepare --model {MODEL} train.jsonl train.tok":
        ("run", NEEDS_MODEL, None),
    f"build/tools/tierzero train --model {MODEL} --data train.tok --config configs/zero3_offload_cpu.json "
    "--steps 200 --metrics run.jsonl --export out/":
        ("run", NEEDS_MODEL, None),
    "build/tools/tierzero report run.jsonl -o report.html":
        ("run", NEEDS_MODEL, None),
    f"build/tools/tierzero train --model {MODEL} --data train.tok --config configs/lora.json --steps 200 "
    "--save lora_run/ --export merged/":
        ("run", NEEDS_MODEL, None),
    "build/tools/tierzero generate --model merged/ --prompt \"The capital of France is\" --max-new-tokens 64":
        ("run", NEEDS_MODEL, None),
    f"build/tools/tierzero generate --model {MODEL} --adapter lora_run/ "
    "--messages '[{\"role\": \"user\", \"content\": \"Hi!\"}]'":
        ("run", NEEDS_MODEL, None),
    "mkdir -p /tmp/tierzero-nvme && build/tools/tierzero train --model-config benchmarks/models/qwen2.5_14b.json "
    "--config benchmarks/configs/zero3_14b_compact_24gb.json --data configs/data/tiny_corpus.u16 --steps 10":
        ("skip", "the 14B run: a 24 GB GPU and 125 GiB of RAM (benchmarks/RESULTS.md has its figures)"),
    "torchrun --no-python --nproc_per_node 2 build/tools/tierzero train --config configs/zero3.json "
    "--data configs/data/tiny_corpus.u16 --steps 20":
        ("run", NEEDS_TORCHRUN, None),
    "build/tools/tierzero estimate --model benchmarks/models/qwen2.5_7b.json --config configs/zero3_compact_nvme.json "
    "--gpu-memory 24GB --host-memory 128GB":
        ("run", None, None),
}
# docs/configs.md's table of what `estimate --suggest` picks (scripts/configs_table.sh writes it): each
# row's command runs; where nothing fits, estimate exits 1 by design.
SUGGEST_ROW = ("build/tools/tierzero estimate --model benchmarks/models/qwen2.5_{model}.json --config "
               "benchmarks/configs/zero3_14b_compact_64gb.json --suggest --gpu-memory 24GB --host-memory {host}GiB "
               "--nvme-space 1TB --nvme-read 2.0 --nvme-write 3.0")
SUGGEST_NOTHING_FITS = {(32, "14b"), (32, "32b"), (64, "32b")}
for _host in (32, 64, 128, 256):
    for _model in ("7b", "14b", "32b"):
        COMMANDS[SUGGEST_ROW.format(model=_model, host=_host)] = (
            ("skip", "nothing fits that host: estimate exits 1, as the table says")
            if (_host, _model) in SUGGEST_NOTHING_FITS else ("run", None, None))


def document_commands(path):
    """The commands in the Markdown file `path`, in order, whitespace collapsed."""
    with open(os.path.join(REPO, path)) as f:
        text = f.read()
    found = []
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    for block in fenced.finditer(text):
        for line in block.group(1).replace("\\\n", " ").splitlines():
            if line.startswith(COMMAND_STARTS) or line.strip() == "build/tools/tierzero":
                found.append((block.start(), " ".join(line.split())))
    for span in re.finditer(r"`([^`]+)`", fenced.sub(lambda m: " " * len(m.group(0)), text)):
        if span.group(1).startswith(COMMAND_STARTS):
            found.append((span.start(), " ".join(span.group(1).split())))
    return [command for _, command in sorted(found)]


def readme_rows():
    """The example JSONL rows of the README's "Fine-tune your model" block."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    rows = [json.loads(line) for line in re.findall(r'^(\{"(?:text|prompt)".*\})$', text, re.M)]
    if len(rows) < 2:
        fail(f"the README's example rows were not found: {rows}")
    return rows


def make_model(home):
    """The tiny Qwen2 stand-in for ~/models/Qwen2.5-0.5B (one layer, hidden 16, two heads sharing one
    KV head); a reason when it cannot be made. Its tokenizer is the `tokenizers` fixture's Qwen2 one
    trained to TOKENIZER_VOCAB tokens. On a CPU without native bf16 the matmuls are a micro-batch's
    time (LibTorch's bf16 GEMM runs at a few GFLOP/s there), the LM head's in proportion to the
    vocabulary: the README's 200-step runs are 3,200 micro-batches each."""
    try:
        import tokenizers  # noqa: F401
        import torch
        import transformers
    except ImportError as err:
        return f"transformers / tokenizers / torch missing ({err})"
    tokenizer, tokenizer_config = make_tokenizer_fixture.qwen2(corpus.lines(1, 2000), vocab_size=TOKENIZER_VOCAB)
    vocab = max([*tokenizer["model"]["vocab"].values(), *(t["id"] for t in tokenizer["added_tokens"])]) + 1
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                                      tie_word_embeddings=True, torch_dtype="bfloat16")
    model_dir = os.path.expanduser(MODEL.replace("~", home))
    transformers.Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(model_dir)
    with open(os.path.join(model_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    # Qwen2.5-0.5B ships a ChatML template (the README's `generate --messages` renders through it).
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(tokenizer_config, chat_template=CHATML_TEMPLATE), f, ensure_ascii=False)
    return None


def main():
    tz = tierzero_from_args(__doc__)
    build = os.path.dirname(os.path.dirname(os.path.abspath(tz)))
    commands = [c for doc in DOCUMENTS for c in document_commands(doc)]
    unknown = [c for c in commands if c not in COMMANDS]
    stale = [c for c in COMMANDS if c not in commands]
    if unknown or stale:
        fail("the documents' commands and this test's table differ:\n"
             + "".join(f"  not in the table (run or skip it here): {c}\n" for c in unknown)
             + "".join(f"  no longer in the documents (remove it here): {c}\n" for c in stale))

    failures, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in (("build", build), ("configs", os.path.join(REPO, "configs")),
                             ("benchmarks", os.path.join(REPO, "benchmarks"))):
            os.symlink(target, os.path.join(tmp, name))
        with open(os.path.join(tmp, "train.jsonl"), "w") as f:
            for _ in range(40):
                f.writelines(json.dumps(row) + "\n" for row in readme_rows())
        env = dict(os.environ, HOME=tmp, TIERZERO_NO_PROGRESS="1",
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        missing = {NEEDS_MODEL: make_model(tmp)}
        missing[NEEDS_TORCHRUN] = None if subprocess.run(["bash", "-c", "command -v torchrun"], env=env,
                                                         capture_output=True).returncode == 0 else "torchrun missing"
        for command in commands:
            entry = COMMANDS[command]
            if entry[0] == "skip":
                print(f"SKIP {command}\n     ({entry[1]})")
                continue
            _, needs, instead = entry
            if needs and missing[needs]:
                skipped.append(f"{command} ({missing[needs]})")
                continue
            start = time.monotonic()
            r = subprocess.run(["bash", "-c", instead or command], cwd=tmp, env=env, capture_output=True, text=True,
                               timeout=900)
            print(f"{'OK  ' if r.returncode == 0 else 'FAIL'} {command}  ({time.monotonic() - start:.1f} s)")
            if r.returncode != 0:
                failures.append(f"{command}: exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n"
                                f"{r.stderr[-3000:]}")
    if failures:
        sys.exit("FAIL: documented commands that do not run as written:\n\n" + "\n\n".join(failures))
    if skipped:
        print("SKIP (missing here): " + "; ".join(skipped))
        sys.exit(77)
    print(f"OK: {sum(1 for c in commands if COMMANDS[c][0] == 'run')} documented commands ran as written")


if __name__ == "__main__":
    main()
