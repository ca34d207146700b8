#!/usr/bin/env python3
"""`tierzero generate` against transformers' and PEFT's generate(), token for token.

For each tiny random model of tests/engine/model/make_hf_fixture.py (Llama 2/3/3.1/3.2 with llama3
rope, Qwen2, Qwen3 with a sliding window, Mistral's sliding window, Phi-3 with LongRoPE past its
original context and partial rotary, Gemma 2's soft-capping, Gemma 3's local/global layers), in a
copy of its directory with a small SentencePiece-style tokenizer (96 pieces, the model's vocabulary)
and a chat template, in fp32 on --device (default cpu):
  - greedy, a text prompt, 32 new tokens past every end-of-sequence token (--ignore-eos): the ids
    must equal transformers' generate(do_sample=False) from the same prompt ids (which must equal
    the tokenizer's own encoding);
  - greedy with a PEFT LoRA adapter (random non-zero A and B; all linear layers; rsLoRA on some)
    and chat messages (the template with add_generation_prompt=True): equal to PEFT's
    PeftModel.generate on apply_chat_template's ids (--chat-engine 0, a build without llama.cpp's
    chat-template engine: on the text prompt, and --messages must be refused naming how to get it);
  - on three models, sampling (temperature, top-k, top-p, a seed): equal to transformers'
    generate(do_sample=True) after torch.manual_seed(seed) on the CPU (same warpers, same draws);
    the same seed twice gives the same ids; top-k 1 gives the greedy ids;
  - on one model, stopping: generation_config.json's eos_token_id list (a token the greedy run
    emits) ends the generation there, as transformers' does with the same ids; and the directory
    `tierzero train --export` writes after a step on it generates as transformers does from it.
Then inputs refused before any work, each with its message: a missing directory, a directory with no
tokenizer, --messages without a chat template, an adapter of another shape, a directory that is not
an adapter, a prompt plus --max-new-tokens beyond max_position_embeddings, malformed messages, --top-p
with greedy decoding.

  generate_vs_hf.py --tierzero BUILD/tools/tierzero --fixture-dir DIR [--device cpu|cuda] [--chat-engine 0|1]
Exit 0 when all match, 1 when one does not, 77 (ctest's skip) without transformers or peft.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_TESTS = os.path.join(HERE, "..", "model")
TEXT_TESTS = os.path.join(HERE, "..", "..", "text")
NEW_TOKENS = 32
PROMPT = "hello there, the rain is on the tree"
MESSAGES = [{"role": "user", "content": "sea?"}, {"role": "assistant", "content": "wet."},
            {"role": "user", "content": "rain?"}]
# Short (the prompt and 32 new tokens fit the fixture's 64 positions): "u sea? a wet. u rain? a".
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'][0] }} {{ m['content'] }} {% endfor %}"
                 "{% if add_generation_prompt %}a{% endif %}")
SAMPLED = ("llama31_llama3", "qwen3_tied_bias_sliding", "gemma2_softcap_sliding")
SAMPLING = dict(temperature=0.9, top_k=12, top_p=0.8)
LLAMA_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PHI3_LINEAR = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]


def tokenizer_spec(vocab_size):
    """A Llama 2-style SentencePiece BPE of exactly vocab_size pieces, without byte fallback."""
    sys.path.insert(0, TEXT_TESTS)
    import make_tokenizer_fixture as tf
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for piece in ["▁"] + list(letters) + list(".,!?'"):
        vocab[piece] = len(vocab)
    merges = []
    pairs = [("▁", c) for c in letters] + [(a, b) for a in "etaoinshrl" for b in "etaoinshrl"]
    for a, b in pairs:
        if len(vocab) == vocab_size:
            break
        vocab[a + b] = len(vocab)
        merges.append(f"{a} {b}")
    normalizer = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    spec = tf.sentencepiece_spec(vocab, merges, normalizer, None, tf.LLAMA2_DECODER)
    spec["model"]["byte_fallback"] = False
    return spec


def model_copy(fixture_model, work, name, vocab_size, chat_template=True):
    """work/name: the fixture model's files (linked) + tokenizer files (+ the chat template); returns
    (the directory, the tokenizer). The reference encodes with this tokenizer object: AutoTokenizer
    would build Qwen2's own tokenizer class from the vocabulary, not the tokenizer.json pipeline."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast
    path = os.path.join(work, name)
    os.makedirs(path)
    for f in os.listdir(fixture_model):
        if f != "generation_config.json":
            os.symlink(os.path.join(fixture_model, f), os.path.join(path, f))
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(tokenizer_spec(vocab_size))),
                                  bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(path)
    return path, tok


def tierzero_generate(tierzero, model_dir, *flags, device="cpu", check=True):
    """Runs `tierzero generate --json`; returns (its JSON, the run) or the run alone when check=False."""
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    command = [tierzero, "generate", "--model", model_dir, "--device", device, "--dtype", "fp32", "--json", *flags]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if not check:
        return run
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def hf_model(model_dir, adapter_dir=None):
    import torch
    import transformers
    import make_hf_fixture
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation=make_hf_fixture.attention_of(model_dir)).eval()
    if adapter_dir:
        import peft
        model = peft.PeftModel.from_pretrained(model, adapter_dir).eval()
    return model


def hf_generate(model, prompt_ids, eos=None, seed=None, **sampling):
    """transformers' generate from prompt_ids: greedy, or sampled after torch.manual_seed(seed)."""
    import torch
    import transformers
    # No warper or stop token beyond those asked for (the model's generation_config would add its own).
    settings = dict(top_k=None, top_p=None, temperature=None)
    settings.update(sampling)
    config = transformers.GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=bool(sampling), eos_token_id=eos,
                                           pad_token_id=0, **settings)
    model.generation_config = config
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids),
                             dtype=torch.long), generation_config=config)
    return out[0, len(prompt_ids):].tolist()


def write_adapter(model_dir, out, family_linear, seed, rslora):
    """A PEFT LoRA adapter over model_dir with random non-zero A and B, saved with save_pretrained."""
    import peft
    import torch
    base = hf_model(model_dir)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=family_linear, lora_dropout=0.0, use_rslora=rslora,
                             task_type="CAUSAL_LM")
    model = peft.get_peft_model(base, config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(out)


class Checks:
    def __init__(self):
        self.failures = 0

    def expect(self, ok, report):
        self.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {report}", flush=True)


def compare(checks, label, ours, theirs, prompt_ours=None, prompt_theirs=None):
    if prompt_ours is not None and prompt_ours != prompt_theirs:
        checks.expect(False, f"{label}: prompt ids {prompt_ours} vs the tokenizer's {prompt_theirs}")
        return
    first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)
    same = ours == theirs
    checks.expect(same, f"{label}: {len(ours)} tokens" + ("" if same else
                  f" differ from the reference's {len(theirs)} at {first}: {ours} vs {theirs}"))


def check_model(checks, args, name, work):
    fixture_model = os.path.join(args.fixture_dir, name)
    with open(os.path.join(fixture_model, "config.json")) as f:
        vocab_size = json.load(f)["vocab_size"]
    model_dir, tok = model_copy(fixture_model, work, name, vocab_size)
    prompt_ids = tok(PROMPT)["input_ids"]
    base = hf_model(model_dir)

    ours = tierzero_generate(args.tierzero, model_dir, "--prompt", PROMPT, "--max-new-tokens", str(NEW_TOKENS),
                             "--ignore-eos", device=args.device)
    greedy = hf_generate(base, prompt_ids)
    compare(checks, f"{name} greedy", ours["ids"], greedy, ours["prompt_ids"], prompt_ids)

    adapter_dir = os.path.join(work, name + "_adapter")
    linear = PHI3_LINEAR if name.startswith("phi3") else LLAMA_LINEAR
    write_adapter(model_dir, adapter_dir, linear, seed=len(name), rslora=len(name) % 2 == 1)
    if args.chat_engine:
        chat_ids = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True,
                                           return_dict=True)["input_ids"]
        messages_file = os.path.join(work, name + "_messages.json")
        with open(messages_file, "w") as f:
            json.dump(MESSAGES, f)
        ours = tierzero_generate(args.tierzero, model_dir, "--adapter", adapter_dir, "--messages", messages_file,
                                 "--max-new-tokens", str(NEW_TOKENS), "--ignore-eos", device=args.device)
        theirs = hf_generate(hf_model(model_dir, adapter_dir), chat_ids)
        compare(checks, f"{name} + LoRA, chat", ours["ids"], theirs, ours["prompt_ids"], chat_ids)
    else:  # a build without the chat-template engine still checks the adapter, on the plain prompt
        ours = tierzero_generate(args.tierzero, model_dir, "--adapter", adapter_dir, "--prompt", PROMPT,
                                 "--max-new-tokens", str(NEW_TOKENS), "--ignore-eos", device=args.device)
        theirs = hf_generate(hf_model(model_dir, adapter_dir), prompt_ids)
        compare(checks, f"{name} + LoRA", ours["ids"], theirs, ours["prompt_ids"], prompt_ids)

    if name in SAMPLED:
        flags = ["--prompt", PROMPT, "--max-new-tokens", str(NEW_TOKENS), "--ignore-eos", "--seed", "7",
                 "--temperature", str(SAMPLING["temperature"]), "--top-k", str(SAMPLING["top_k"]),
                 "--top-p", str(SAMPLING["top_p"])]
        ours = tierzero_generate(args.tierzero, model_dir, *flags, device=args.device)
        again = tierzero_generate(args.tierzero, model_dir, *flags, device=args.device)
        checks.expect(ours["ids"] == again["ids"], f"{name} sampled: the same seed gives the same ids")
        if args.device == "cpu":
            compare(checks, f"{name} sampled (seed 7)", ours["ids"], hf_generate(base, prompt_ids, seed=7, **SAMPLING))
        top1 = tierzero_generate(args.tierzero, model_dir, "--prompt", PROMPT, "--max-new-tokens", str(NEW_TOKENS),
                                 "--ignore-eos", "--temperature", "1.5", "--top-k", "1", "--seed", "3",
                                 device=args.device)
        compare(checks, f"{name} sampled with top-k 1 = greedy", top1["ids"], greedy)
    return model_dir, greedy, prompt_ids, base


def check_stop(checks, args, model_dir, greedy, prompt_ids, base):
    """generation_config.json's eos_token_id list stops the generation at the first of them."""
    # The first token after the third that the greedy run has not emitted before, and an unused id.
    at = next(i for i in range(3, NEW_TOKENS) if greedy[i] not in greedy[:i] + [2])
    stop = [greedy[at], next(t for t in range(3, 96) if t not in greedy)]
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": stop}, f)
    ours = tierzero_generate(args.tierzero, model_dir, "--prompt", PROMPT, "--max-new-tokens", str(NEW_TOKENS),
                             device=args.device)
    theirs = hf_generate(base, prompt_ids, eos=stop + [2])  # 2: the tokenizer's eos_token </s>
    compare(checks, f"stop at eos_token_id {stop}", ours["ids"], theirs)
    checks.expect(ours["stop_reason"] == "eos" and ours["ids"] == greedy[:at + 1],
                  f"stopped by eos after {len(ours['ids'])} tokens ({ours['stop_reason']}), expected {at + 1}")
    os.remove(os.path.join(model_dir, "generation_config.json"))


def check_export(checks, args, work, model_dir):
    """A directory `tierzero train --export` wrote (one step on model_dir, fp32) generates as transformers
    generates from it."""
    data, config, export = (os.path.join(work, n) for n in ("ids.jsonl", "ds.json", "export"))
    with open(data, "w") as f:
        f.write(json.dumps({"input_ids": list(range(3, 20))}) + "\n")
    with open(config, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "zero_optimization": {"stage": 0}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}},
                   "tierzero": {"data": {"seq_len": 16}}}, f)
    env = dict(os.environ, TIERZERO_NO_PROGRESS="1", CUDA_VISIBLE_DEVICES="")
    train = subprocess.run([args.tierzero, "train", "--model", model_dir, "--config", config, "--data", data,
                            "--steps", "1", "--export", export], capture_output=True, text=True, env=env)
    if train.returncode != 0:
        checks.expect(False, f"tierzero train --export failed ({train.returncode}): {train.stderr}")
        return
    ours = tierzero_generate(args.tierzero, export, "--prompt", PROMPT, "--max-new-tokens", str(NEW_TOKENS),
                             "--ignore-eos", device=args.device)
    compare(checks, "an export of train --export, greedy", ours["ids"], hf_generate(hf_model(export), ours["prompt_ids"]))


def check_refusals(checks, args, work, model_dir):
    """Bad inputs refused before any work, naming the problem."""
    fixture = args.fixture_dir
    no_template, _ = model_copy(os.path.join(fixture, "llama_untied"), work, "no_template", 96, chat_template=False)
    other_adapter = os.path.join(work, "qwen3_gqa_head_dim_adapter")  # q_proj [96, 64], not llama_untied's [64, 64]
    cases = [
        ("missing directory", [os.path.join(work, "nowhere"), "--prompt", "hi"], "no such directory"),
        ("no tokenizer", [os.path.join(fixture, "llama_untied"), "--prompt", "hi"], "tokenizer.json"),
        ("no chat template", [no_template, "--messages", json.dumps(MESSAGES)],
         "chat template" if args.chat_engine else "TIERZERO_LLAMA_CPP_SDIST"),
        ("adapter of another shape", [model_dir, "--adapter", other_adapter, "--prompt", "hi", "--max-new-tokens", "8"],
         "does not fit the model"),
        ("not an adapter", [model_dir, "--adapter", work, "--prompt", "hi", "--max-new-tokens", "8"],
         "adapter_config.json"),
        ("beyond max_position_embeddings", [model_dir, "--prompt", "hi", "--max-new-tokens", "1000"],
         "max_position_embeddings"),
        ("sampling flags without --temperature", [model_dir, "--prompt", "hi", "--top-p", "0.9"], "--temperature"),
        ("bad messages", [model_dir, "--messages", "[{\"content\": \"hi\"}]", "--max-new-tokens", "8"], "role"),
    ]
    for label, (model, *flags), expected in cases:
        run = tierzero_generate(args.tierzero, model, *flags, device="cpu", check=False)
        ok = run.returncode != 0 and expected in run.stderr
        checks.expect(ok, f"refused: {label} (exit {run.returncode}): {run.stderr.strip().splitlines()[-1:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tierzero", required=True)
    parser.add_argument("--fixture-dir", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--chat-engine", type=int, default=1, choices=[0, 1],
                        help="1 when the build has llama.cpp's chat-template engine; 0 checks that --messages "
                             "is refused naming how to get it, and the adapters on the plain prompt")
    args = parser.parse_args()
    args.fixture_dir = os.path.abspath(args.fixture_dir)  # the model copies link to its files
    try:
        import peft  # noqa: F401
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed")
        return 77
    fixture = subprocess.run([sys.executable, os.path.join(MODEL_TESTS, "make_hf_fixture.py"), "--out",
                              args.fixture_dir])
    if fixture.returncode != 0:
        return fixture.returncode
    sys.path.insert(0, MODEL_TESTS)
    import make_hf_fixture
    checks = Checks()
    with tempfile.TemporaryDirectory() as work:
        for name in make_hf_fixture.MODELS:
            result = check_model(checks, args, name, work)
            if name == "llama_untied":
                stop_case = result
        check_stop(checks, args, *stop_case)
        check_export(checks, args, work, stop_case[0])
        check_refusals(checks, args, work, stop_case[0])
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
