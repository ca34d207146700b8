#!/usr/bin/env python3
"""tierzero data prepare vs Hugging Face tokenizers' encode_batch: tokens/s on the same rows.

  benchmarks/tokenize_vs_hf.py --tierzero BUILD/tools/tierzero [--fixture DIR] [--rows N]
                               [--family NAME ...] [--repeat R] [--threads T]

For each tokenizer family of the test fixture (tests/text/make_tokenizer_fixture.py builds it in
DIR when DIR has none: byte-level BPE as Qwen2 / Llama 3 set it up, SentencePiece-style BPE as
Llama 2 / Mistral), N rows of the multilingual test corpus (tests/text/corpus.py, seed 3) are
written as {"text": ...} JSONL, then, alternating, R times each:
  tierzero  `tierzero data prepare --tokenizer DIR/FAMILY rows.jsonl out.tok --json` (every core);
            its tokens/s times the parallel phase: reading the JSON rows, tokenizing, EOS, joining;
  tokenizers  Tokenizer.from_file(...).encode_batch(texts) on all threads (RAYON default), the
            texts already in Python memory (no JSON parsing timed: the peer's best case).
Token counts are the same rows' ids plus one EOS per row on both sides. The correctness column
compares tierzero's token file with tokenizers' ids + EOS, every token. Medians of R runs.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "text")
sys.path.insert(0, TESTS)
import corpus  # noqa: E402


def ensure_fixture(directory):
    if not os.path.exists(os.path.join(directory, "STAMP")):
        subprocess.run([sys.executable, os.path.join(TESTS, "make_tokenizer_fixture.py"), "--out", directory],
                       check=True)


def read_token_file(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, count, _flags = struct.unpack_from("<8sIIQQ", data)
    assert magic == b"TZTOKENS", path
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return list(struct.unpack_from(fmt, data, 32))


def run_tierzero(binary, tokenizer_dir, rows_path, out_path, threads):
    stats = out_path + ".json"
    command = [binary, "data", "prepare", "--tokenizer", tokenizer_dir, rows_path, out_path, "--json", stats,
               "--no-progress"]
    if threads:
        command += ["--threads", str(threads)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(stats) as f:
        return json.load(f)


def run_hf(tok, texts, eos):
    start = time.perf_counter()
    encodings = tok.encode_batch(texts)
    seconds = time.perf_counter() - start
    stream = []
    for e in encodings:
        stream.extend(e.ids)
        if not e.ids or e.ids[-1] != eos:
            stream.append(eos)
    return seconds, stream


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tierzero", required=True, help="the tierzero program")
    parser.add_argument("--fixture", default=os.path.join(tempfile.gettempdir(), "tierzero-tokenizer-fixture"))
    parser.add_argument("--rows", type=int, default=100000)
    parser.add_argument("--family", action="append", help="default: qwen2 llama3 llama2 mistral")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="tierzero threads (default every core)")
    args = parser.parse_args()
    import tokenizers
    from tokenizers import Tokenizer

    ensure_fixture(args.fixture)
    families = args.family or ["qwen2", "llama3", "llama2", "mistral"]
    texts = corpus.lines(3, args.rows)
    work = tempfile.mkdtemp(prefix="tierzero-tokenize-bench-")
    rows_path = os.path.join(work, "rows.jsonl")
    with open(rows_path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    size = os.path.getsize(rows_path)
    version = subprocess.run([args.tierzero, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# tokenize_vs_hf: {version} `data prepare` vs tokenizers {tokenizers.__version__} encode_batch")
    print(f"# rows {args.rows} ({size / 1e6:.1f} MB JSONL, corpus.py seed 3), {os.cpu_count()} cores, "
          f"tierzero threads {args.threads or 'all'}, RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'default')}"
          f", median of {args.repeat} alternating runs")
    print(f"# {'family':<10} {'tokens':>10} {'tierzero tok/s':>15} {'tokenizers tok/s':>17} {'ratio':>7}  ids")
    ratios, all_equal = [], True
    for family in families:
        directory = os.path.join(args.fixture, family)
        tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        with open(os.path.join(directory, "tokenizer_config.json")) as f:
            eos_entry = json.load(f)["eos_token"]
        eos = tok.token_to_id(eos_entry["content"] if isinstance(eos_entry, dict) else eos_entry)
        ours, theirs, stream = [], [], None
        out_path = os.path.join(work, family + ".tok")
        for _ in range(args.repeat):
            stats = run_tierzero(args.tierzero, directory, rows_path, out_path, args.threads)
            ours.append(stats["tokens_per_second"])
            seconds, stream = run_hf(tok, texts, eos)
            theirs.append(len(stream) / seconds)
        equal = read_token_file(out_path) == stream
        all_equal = all_equal and equal
        ratio = statistics.median(ours) / statistics.median(theirs)
        ratios.append(ratio)
        print(f"  {family:<10} {len(stream):>10} {statistics.median(ours):>15.0f} {statistics.median(theirs):>17.0f} "
              f"{ratio:>7.2f}  {'equal' if equal else 'DIFFER'}")
    print(f"# ratio min {min(ratios):.2f} max {max(ratios):.2f}; ids {'equal on every family' if all_equal else 'DIFFER'}"
          f"; {'OK' if all_equal and min(ratios) >= 1.0 else 'FAIL'}")
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
