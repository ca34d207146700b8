#!/usr/bin/env python3
"""Writes the Hugging Face `tokenizers` reference fixture for tests/text (no download, seconds).

  make_tokenizer_fixture.py --out DIR [--lines N]

Each family is trained by `tokenizers` itself on corpus.lines(seed=1, ...) and then set up the way
the real model's tokenizer.json is (the JSON is edited, then loaded back with Tokenizer.from_str):
  qwen2/    byte-level BPE, NFC, Split(Qwen2's regex, Isolated) + ByteLevel(use_regex=false),
            merges as "a b" strings, post_processor ByteLevel, added specials <|endoftext|>
            <|im_start|> <|im_end|> after the vocab and a normalized non-special "Ω";
            tokenizer_config: no BOS, eos <|endoftext|>.
  llama3/   byte-level BPE with ignore_merges, no normalizer, Split(Llama 3's regex) + ByteLevel,
            post_processor Sequence[ByteLevel, TemplateProcessing("<|begin_of_text|> $A")],
            256 specials after the vocab; merges as [a, b] pairs; bos/eos from tokenizer_config.
  llama2/   SentencePiece-style BPE: <unk> <s> </s> then <0x00>..<0xFF> then the pieces; normalizer
            Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer, byte_fallback, fuse_unk,
            decoder Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)],
            TemplateProcessing("<s> $A"), "a b" merges; a limited alphabet, so rare characters
            fall back to bytes.
  mistral/  the same vocabulary as transformers converts Mistral's: no normalizer, pre_tokenizer
            Metaspace(prepend_scheme "first", split false), Llama 2's decoder, [a, b] merges.
  metaspace_split/  the same with Metaspace(prepend_scheme "always", split true) and the decoder
            Sequence[Metaspace, ByteFallback, Fuse] (the other Metaspace settings).
DIR/corpus.jsonl           the test corpus: corpus.lines(seed=2, N), one JSON string per line.
DIR/<family>/reference.jsonl  per corpus line {"ids": encode(line).ids, "plain": encode(line,
                           add_special_tokens=False).ids, "decoded": decode(plain ids), "all":
                           decode(plain ids, skip_special_tokens=False), "normalized": the
                           normalizer's output (the line itself without one)}.
DIR/STAMP                  written last: a hash of the scripts, N and the tokenizers version; a DIR
                           whose STAMP matches is left as is (parallel test processes build it once).
Exit status 77 (and a message) when `tokenizers` is not installed: the tests skip.
"""
import argparse
import hashlib
import importlib.metadata
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import corpus  # noqa: E402
import fixture_dir  # noqa: E402

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
TRAIN_LINES = 6000
LLAMA2_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
    {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def byte_level_family(lines, regex, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    return json.loads(tok.to_str())


def qwen2(lines, vocab_size=3000):
    spec = byte_level_family(lines, QWEN2_REGEX, vocab_size)
    spec["normalizer"] = {"type": "NFC"}
    spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                              "use_regex": False}
    spec["model"].update(dropout=None, unk_token=None, fuse_unk=False, byte_fallback=False, ignore_merges=False)
    spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]  # Qwen2's "a b" form
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    config = {"bos_token": None, "eos_token": "<|endoftext|>", "add_bos_token": False,
              "tokenizer_class": "Qwen2Tokenizer"}
    spec, config = finish(spec, specials, config)
    # A user-added token (normalized: true, as transformers' add_tokens makes them): matched in
    # the NFC text, so the corpus's Ohm sign U+2126 finds it too.
    spec["added_tokens"].append({"id": spec["added_tokens"][-1]["id"] + 1, "content": "\u03a9", "single_word": False,
                                 "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    return spec, config


def llama3(lines):
    spec = byte_level_family(lines, LLAMA3_REGEX, 3500)
    spec["model"].update(ignore_merges=True)
    spec["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in spec["model"]["merges"]]
    base = len(spec["model"]["vocab"])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(256 - len(specials))]
    spec["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [base], "tokens": ["<|begin_of_text|>"]}}}]}
    config = {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>", "__type": "AddedToken"},
              "tokenizer_class": "PreTrainedTokenizerFast"}
    return finish(spec, specials, config)


def sentencepiece_vocab(lines):
    """Pieces trained on ▁-joined words, laid out as Llama 2's: <unk> <s> </s>, 256 bytes, pieces."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=2500, show_progress=False, limit_alphabet=220,
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(lines, trainer)
    trained = json.loads(tok.to_str())["model"]
    pieces = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in pieces:
        vocab.setdefault(piece, len(vocab))
    return vocab, trained["merges"]


def sentencepiece_spec(vocab, merges, normalizer, pre_tokenizer, decoder):
    special = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges}}


def llama2(vocab, merges):
    normalizer = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    decoder = LLAMA2_DECODER
    config = {"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "tokenizer_class": "LlamaTokenizer"}
    merges = [" ".join(m) for m in merges]  # Llama 2's "a b" form; mistral/ keeps [a, b] pairs
    return sentencepiece_spec(vocab, merges, normalizer, None, decoder), config


def mistral(vocab, merges):
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    config = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "tokenizer_class": "LlamaTokenizer"}
    return sentencepiece_spec(vocab, merges, None, metaspace, LLAMA2_DECODER), config


def metaspace_split(vocab, merges):
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    decoder = {"type": "Sequence", "decoders": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    config = {"bos_token": "<s>", "eos_token": "</s>"}
    return sentencepiece_spec(vocab, merges, None, metaspace, decoder), config


def finish(spec, specials, config):
    """Appends `specials` as special added tokens after the vocab; returns (spec, config)."""
    base = len(spec["model"]["vocab"])
    spec["added_tokens"] = [{"id": base + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, c in enumerate(specials)]
    return spec, config


def write_family(out, name, spec, config, test_lines):
    from tokenizers import Tokenizer
    directory = os.path.join(out, name)
    os.makedirs(directory)
    text = json.dumps(spec, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_str(text)  # the reference is what `tokenizers` does with this very file
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    with_special = tok.encode_batch(test_lines)
    plain = tok.encode_batch(test_lines, add_special_tokens=False)
    decoded = tok.decode_batch([e.ids for e in plain])
    decoded_all = tok.decode_batch([e.ids for e in plain], skip_special_tokens=False)
    with open(os.path.join(directory, "reference.jsonl"), "w", encoding="utf-8") as f:
        for line, a, b, d, d_all in zip(test_lines, with_special, plain, decoded, decoded_all):
            normalized = tok.normalizer.normalize_str(line) if tok.normalizer else line
            f.write(json.dumps({"ids": a.ids, "plain": b.ids, "decoded": d, "all": d_all, "normalized": normalized},
                               ensure_ascii=False) + "\n")


def stamp(version, count):
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for name in ("make_tokenizer_fixture.py", "corpus.py"):
        with open(os.path.join(here, name), "rb") as f:
            h.update(f.read())
    return f"{h.hexdigest()} lines={count} tokenizers={version}\n"


def write_fixture(out, lines):
    train = corpus.lines(1, TRAIN_LINES)
    test_lines = corpus.lines(2, lines)
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for line in test_lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    write_family(out, "qwen2", *qwen2(train), test_lines)
    write_family(out, "llama3", *llama3(train), test_lines)
    vocab, merges = sentencepiece_vocab(train)
    write_family(out, "llama2", *llama2(vocab, merges), test_lines)
    write_family(out, "mistral", *mistral(vocab, merges), test_lines)
    write_family(out, "metaspace_split", *metaspace_split(vocab, merges), test_lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--lines", type=int, default=12000)
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    try:
        version = importlib.metadata.version("tokenizers")
    except importlib.metadata.PackageNotFoundError:
        print("SKIP: the tokenizers package is not installed (pip install tokenizers)")
        return 77
    fixture_dir.build_once(out, stamp(version, args.lines), lambda out: write_fixture(out, args.lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
