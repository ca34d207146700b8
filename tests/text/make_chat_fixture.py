#!/usr/bin/env python3
"""Writes the chat-template reference fixture for tests/text (transformers' apply_chat_template).

  make_chat_fixture.py --out DIR [--sdist llama_cpp_python-X.tar.gz]
        (default: $TIERZERO_LLAMA_CPP_SDIST, which the C++ test sets to CMake's sdist)

Real tokenizers and real chat templates, both from llama-cpp-python's sdist on PyPI (the one
scripts/setup.sh caches, read here and never copied into the repository):
  - tokenizer.json + tokenizer_config.json from llama.cpp's vocab GGUFs (qwen2, llama-bpe,
    llama-spm), converted by benchmarks/quality_util.py's `tokenizer` (transformers' GGUF loader,
    checked against llama.cpp's reference ids); built once per sdist into
    ~/.cache/tierzero/tokenizers/ (minutes), then reused;
  - the chat templates vendor/llama.cpp/models/templates/*.jinja.
DIR/<case>/  a model directory: tokenizer.json, tokenizer_config.json (the model's bos/eos),
             chat_template.jinja; cases:
    qwen2.5   Qwen-Qwen2.5-7B-Instruct.jinja on the qwen2 vocab
    qwen3     Qwen-Qwen3-0.6B.jinja on the qwen2 vocab
    llama3.1  meta-llama-Llama-3.1-8B-Instruct.jinja on the llama-bpe vocab
    llama3.2  meta-llama-Llama-3.2-3B-Instruct.jinja on the llama-bpe vocab
    phi3.5    microsoft-Phi-3.5-mini-instruct.jinja on the llama-spm vocab plus Phi-3's added tokens
              (<|endoftext|> = 32000 ... <|end|> = 32007, <|user|> = 32010, as Phi-3's tokenizer.json)
    phi3.5-generation  the same template with {% generation %} around each assistant content and
              its <|end|>, so transformers computes the assistant mask itself
    lfm2.5    LFM2.5-8B-A1B.jinja (a real template with {% generation %} blocks: each assistant turn,
              tool calls and the newline after <|im_end|> included) on the qwen2 vocab
DIR/rows.jsonl             the rows, one a line: ROWS ({"messages": [...], "tools"?: [...]}) then
    PROMPT_COMPLETION_ROWS (TRL's conversational {"prompt": [...], "completion": [...]})
DIR/<case>/reference.jsonl per row, reference_row(): {"row": its line in rows.jsonl (0-based),
    "text": the rendered conversation (apply_chat_template(tokenize=False)), "ids":
    apply_chat_template(tokenize=True, return_dict=True)["input_ids"], "mask": the loss mask
    (below), "hf_mask": return_assistant_tokens_mask's (templates with {% generation %})}; or
    {"row", "error": the exception transformers raises on the row} (list content parts or a missing
    "content" where the template concatenates it).
The mask (text/internal/chat_rows.h's rule, computed here with transformers' renders and the
tokenizer's offsets):
  - messages rows, a template with {% generation %}: return_assistant_tokens_mask itself;
  - messages rows otherwise: each assistant turn from where render(messages[:i],
    add_generation_prompt=True) and the conversation part, through the first occurrence there of the
    first special token of render(messages[:i + 1])'s turn; a token overlapping it is 1;
  - prompt-completion rows: TRL 1.16's SFTTrainer (tokenize_fn): 0 for the ids shared with
    apply_chat_template(prompt, add_generation_prompt=True), 1 after.
DIR/STAMP written last. Exit status 77 when transformers, jinja2 or gguf is missing, or the sdist.
"""
import argparse
import hashlib
import importlib.util
import json
import os
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import fixture_dir  # noqa: E402

TEMPLATES = "/vendor/llama.cpp/models/templates/"
PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
              "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
# case: (template file, vocab, tokenizer_config special tokens as the model has them)
CASES = {
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "qwen2",
                {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "qwen2",
              {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "llama-bpe",
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "llama-bpe",
                 {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "phi3.5": ("microsoft-Phi-3.5-mini-instruct.jinja", "llama-spm",
               {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"}),
    "phi3.5-generation": ("microsoft-Phi-3.5-mini-instruct.jinja", "llama-spm",
                          {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"}),
    "lfm2.5": ("LFM2.5-8B-A1B.jinja", "qwen2",
               {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),
}
GENERATION_CASES = {"phi3.5-generation", "lfm2.5"}
PHI_ASSISTANT = "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}"
PHI_ASSISTANT_GENERATION = ("{{'<|assistant|>\n'}}{% generation %}{{message['content'] + '<|end|>'}}"
                            "{% endgeneration %}{{'\n'}}")
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                   "required": ["city"]}}}
WEATHER_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
ROWS = [
    {"messages": [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "2 + 2 = 4."}]},
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "Seven."},
                  {"role": "user", "content": "Another one, please."},
                  {"role": "assistant", "content": "Eleven, and 13 after it."}]},
    {"messages": [{"role": "user", "content": "Übersetze: café crème, naïve — 日本語は？"},
                  {"role": "assistant", "content": "  Café crème, naïf; 日本語です。 🙂\n\nDone.  "}]},
    {"messages": [{"role": "user", "content": "Write code."},
                  {"role": "assistant", "content": "```python\ndef f(x):\n    return x * 2\n```"},
                  {"role": "user", "content": "Thanks!"},
                  {"role": "assistant", "content": "You're welcome."}]},
    {"messages": [{"role": "user", "content": "Why is the sky blue?"},
                  {"role": "assistant", "content": "<think>\nRayleigh scattering.\n</think>\n\nShort waves scatter more."}]},
    {"messages": [{"role": "user", "content": "Why is the sea salty?"},
                  {"role": "assistant", "reasoning_content": "Rivers carry minerals.",
                   "content": "Rivers bring salts; evaporation leaves them."}]},
    # Qwen3 drops an earlier turn's reasoning once a later user turn follows, so that turn renders
    # differently alone than in the conversation (its end is found by its end-of-turn token).
    {"messages": [{"role": "user", "content": "Why is the sky blue?"},
                  {"role": "assistant", "reasoning_content": "Short waves scatter.", "content": "Rayleigh scattering."},
                  {"role": "user", "content": "And sunsets?"},
                  {"role": "assistant", "reasoning_content": "Long path.", "content": "Red light gets through."}]},
    {"tools": [WEATHER_TOOL],
     "messages": [{"role": "system", "content": "Use tools when useful."},
                  {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "I will look it up."}]},
    # A tool call with no content (Qwen3's and Phi-3.5's templates raise on it, as transformers does).
    {"tools": [WEATHER_TOOL],
     "messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "tool_calls": [WEATHER_CALL]},
                  {"role": "tool", "content": "18 C, sunny"},
                  {"role": "assistant", "content": "It is 18 C and sunny in Paris."}]},
    # A tool call with empty content.
    {"tools": [WEATHER_TOOL],
     "messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
                  {"role": "tool", "content": "18 C, sunny"},
                  {"role": "assistant", "content": "Sunny, 18 C."}]},
    # Content parts: a template that joins "content" to a string raises (TypeError), one that reads
    # the parts renders them, one that filters it (| trim) renders Python's repr of the list.
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Name a colour."}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "Blue."}]}]},
    # No "content": raises (UndefinedError) where the template concatenates it.
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant"}]},
]
PROMPT_COMPLETION_ROWS = [
    {"prompt": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 3 + 4?"}],
     "completion": [{"role": "assistant", "content": "7."}]},
    {"tools": [WEATHER_TOOL],
     "prompt": [{"role": "user", "content": "Weather in Paris?"}],
     "completion": [{"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
                    {"role": "tool", "content": "18 C, sunny"},
                    {"role": "assistant", "content": "Sunny, 18 C."}]},
]
ALL_ROWS = ROWS + PROMPT_COMPLETION_ROWS


def missing_packages():
    return [p for p in ("transformers", "jinja2", "gguf", "tokenizers") if importlib.util.find_spec(p) is None]


def cache_root():
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "tierzero", "tokenizers")


def real_tokenizer(sdist, vocab):
    """quality_util's converted tokenizer for `vocab`, built once per sdist into the cache."""
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    import quality_util
    out = os.path.join(cache_root(), os.path.basename(sdist).removesuffix(".tar.gz"), vocab)
    scratch = out + ".scratch"

    def build(directory):
        try:
            quality_util.cmd_tokenizer(argparse.Namespace(out=directory, vocab=vocab, sdist=sdist, scratch=scratch))
        except SystemExit:
            if vocab != "llama-bpe":
                raise
            restore_ignore_merges(directory, scratch, quality_util.SEPARATOR)

    fixture_dir.build_once(out, f"{os.path.getsize(sdist)} {os.path.basename(sdist)}\n", build)
    return out


def restore_ignore_merges(directory, scratch, separator):
    """Llama 3's tokenizer.json sets the BPE model's ignore_merges (a word in the vocabulary is one
    token), which transformers' GGUF converter leaves out, so "Cửa Việt" splits differently;
    restored here, then checked against llama.cpp's reference ids like quality_util's own check."""
    from tokenizers import Tokenizer
    path = os.path.join(directory, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    spec["model"]["ignore_merges"] = True
    with open(path, "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=1)
    base = os.path.join(scratch, "ggml-vocab-llama-bpe.gguf")
    with open(base + ".inp", encoding="utf-8") as f:
        cases = f.read().split(separator)[:-1]
    with open(base + ".out", encoding="utf-8") as f:
        expected = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(cases)]]
    tok = Tokenizer.from_file(path)
    bad = [text for text, ids in zip(cases, expected) if tok.encode(text, add_special_tokens=False).ids != ids]
    if bad or not cases:
        sys.exit(f"make_chat_fixture: llama-bpe with ignore_merges still differs from llama.cpp's ids on {bad!r}")


def read_templates(sdist, names):
    found = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            if TEMPLATES in member.name and os.path.basename(member.name) in names:
                found[os.path.basename(member.name)] = tar.extractfile(member).read().decode("utf-8")
    missing = set(names) - set(found)
    if missing:
        sys.exit(f"make_chat_fixture: {sdist} has no {TEMPLATES}{sorted(missing)}")
    return found


def write_model_dir(directory, tokenizer_dir, vocab, specials, template):
    from tokenizers import AddedToken, Tokenizer
    os.makedirs(directory)
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    if vocab == "llama-spm":
        tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in PHI3_ADDED])
        assert tok.token_to_id("<|end|>") == 32007 and tok.token_to_id("<|user|>") == 32010
    tok.save(os.path.join(directory, "tokenizer.json"))
    config = {k: v for k, v in specials.items()}
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    with open(os.path.join(directory, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(template)


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def turn_mask(tok, messages, kwargs, text, ids):
    """chat_rows.h's mask for a template without {% generation %}: each assistant turn as rendered."""
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    assert enc["input_ids"] == ids, "encoding the rendered text differs from apply_chat_template's ids"
    specials = {i for i, t in tok.added_tokens_decoder.items() if t.special}
    mask = [0] * len(ids)
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = tok.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True, **kwargs)
        through = tok.apply_chat_template(messages[:i + 1], tokenize=False, **kwargs)
        first, last = common_prefix(text, prompt), common_prefix(text, through)
        turn_ids = tok(through[common_prefix(through, prompt):], add_special_tokens=False)["input_ids"]
        end_of_turn = [t for t in turn_ids if t in specials]
        if end_of_turn:
            marker = tok.decode(end_of_turn[:1], skip_special_tokens=False)
            at = text.find(marker, first)
            if at >= 0:
                last = at + len(marker)
        assert last > first, f"assistant message {i} not found in {text!r}"
        for t, (s, e) in enumerate(enc["offset_mapping"]):
            if s < last and e > first:
                mask[t] = 1
    return mask


def reference_row(tok, row, generation):
    """transformers' text and ids of `row` and its mask (module docstring); raises what transformers
    raises on it."""
    kwargs = {"tools": row["tools"]} if "tools" in row else {}
    if "messages" in row:
        messages = row["messages"]
        text = tok.apply_chat_template(messages, tokenize=False, **kwargs)
        enc = tok.apply_chat_template(messages, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=generation, **kwargs)
        ids = list(enc["input_ids"])
        ref = {"text": text, "ids": ids}
        if generation:
            ref["hf_mask"] = ref["mask"] = list(enc["assistant_masks"])
        else:
            ref["mask"] = turn_mask(tok, messages, kwargs, text, ids)
        return ref
    # TRL 1.16 SFTTrainer tokenize_fn, conversational prompt-completion, completion_only_loss.
    conversation = row["prompt"] + row["completion"]
    text = tok.apply_chat_template(conversation, tokenize=False, **kwargs)
    ids = list(tok.apply_chat_template(conversation, tokenize=True, return_dict=True, **kwargs)["input_ids"])
    prompt_ids = list(tok.apply_chat_template(row["prompt"], tokenize=True, return_dict=True,
                                              add_generation_prompt=True, **kwargs)["input_ids"])
    shared = common_prefix(prompt_ids, ids)
    return {"text": text, "ids": ids, "mask": [0] * shared + [1] * (len(ids) - shared)}


def write_case(out, name, sdist, template_text):
    from transformers import AutoTokenizer
    template_file, vocab, specials = CASES[name]
    if name == "phi3.5-generation":
        assert PHI_ASSISTANT in template_text
        template_text = template_text.replace(PHI_ASSISTANT, PHI_ASSISTANT_GENERATION)
    directory = os.path.join(out, name)
    write_model_dir(directory, real_tokenizer(sdist, vocab), vocab, specials, template_text)
    tok = AutoTokenizer.from_pretrained(directory)
    with open(os.path.join(directory, "reference.jsonl"), "w", encoding="utf-8") as f:
        for index, row in enumerate(ALL_ROWS):
            try:
                ref = {"row": index, **reference_row(tok, row, name in GENERATION_CASES)}
            except Exception as e:  # what transformers raises: the row must be refused
                ref = {"row": index, "error": f"{type(e).__name__}: {e}"}
            f.write(json.dumps(ref, ensure_ascii=False) + "\n")


def stamp(sdist):
    import transformers
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    return f"{h.hexdigest()} {os.path.basename(sdist)} {os.path.getsize(sdist)} transformers={transformers.__version__}\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--sdist", default=os.environ.get("TIERZERO_LLAMA_CPP_SDIST", ""))
    a = parser.parse_args()
    missing = missing_packages()
    if missing:
        print(f"make_chat_fixture: {' '.join(missing)} not installed (scripts/setup.sh installs them)")
        sys.exit(77)
    if not os.path.exists(a.sdist):
        print(f"make_chat_fixture: {a.sdist} not found (scripts/setup.sh downloads llama-cpp-python's sdist)")
        sys.exit(77)

    def build(out):
        templates = read_templates(a.sdist, {c[0] for c in CASES.values()})
        with open(os.path.join(out, "rows.jsonl"), "w", encoding="utf-8") as f:
            for row in ALL_ROWS:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        for name, (template_file, _, _) in CASES.items():
            write_case(out, name, a.sdist, templates[template_file])

    fixture_dir.build_once(a.out, stamp(a.sdist), build)


if __name__ == "__main__":
    main()
