#!/usr/bin/env python3
"""`tierzero data prepare|show --model DIR`, the model-directory flag train and estimate take, and
row errors that name their line once.

  data_model_flag_test.py --tierzero BUILD/tools/tierzero

The tokenizer is tests/text's `tokenizers` fixture (make_tokenizer_fixture.py, qwen2); exit 77 when
the `tokenizers` package is missing.
1. `data prepare --model DIR` writes the token file `--tokenizer DIR` (the older name, kept) writes,
   byte for byte; `data show --model DIR` prints the rows.
2. `data show` of a file whose third line is not a row names "IN: line 3" once, not "line 1: line 1".
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import REPO, fail, run, tierzero_from_args  # noqa: E402


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        fixture = os.path.join(tmp, "fixture")
        made = subprocess.run([sys.executable, os.path.join(REPO, "tests", "text", "make_tokenizer_fixture.py"),
                               "--out", fixture, "--lines", "200"], capture_output=True, text=True, timeout=600)
        if made.returncode == 77:
            print(f"SKIP: {made.stdout}{made.stderr}")
            sys.exit(77)
        if made.returncode != 0:
            fail("make_tokenizer_fixture.py failed", made)
        model = os.path.join(fixture, "qwen2")
        rows = os.path.join(tmp, "rows.jsonl")
        with open(rows, "w") as f:
            f.write('{"text": "A document to learn from, every token of it."}\n')
            f.write('{"prompt": "Q: What does ZeRO-3 partition?\\nA:", "completion": " Parameters."}\n')

        outputs = {}
        for flag in ("--model", "--tokenizer"):
            out = os.path.join(tmp, flag.strip("-") + ".tok")
            r = run(tz, "data", "prepare", "--no-progress", flag, model, rows, out)
            if r.returncode != 0 or not os.path.exists(out):
                fail(f"data prepare {flag} DIR failed", r)
            with open(out, "rb") as f:
                outputs[flag] = f.read()
        if outputs["--model"] != outputs["--tokenizer"]:
            fail("data prepare --model and --tokenizer wrote different token files")
        r = run(tz, "data", "show", "--model", model, rows)
        if r.returncode != 0 or "[[" not in r.stdout:
            fail("data show --model DIR did not show the rows with the trained text marked", r)

        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"text": "fine"}\n\n{"txt": "no such key"}\n')
        r = run(tz, "data", "show", "--model", model, bad, "--rows", "5")
        message = r.stderr
        if r.returncode == 0 or f"{bad}: line 3: " not in message:
            fail("data show of a bad third row does not name 'IN: line 3'", r)
        if message.count("line ") != 1:
            fail(f"the line is named more than once: {message!r}", r)
    print("OK: data prepare / show take --model DIR (and --tokenizer DIR, the same file); a bad row names its line once")


if __name__ == "__main__":
    main()
