#!/usr/bin/env python3
"""Plumbing of benchmarks/quality_run.sh (the compact optimizer state's quality run), one subcommand per job:

  tokenizer --out DIR [--vocab llama-spm|qwen2|llama-bpe] [--sdist F.tar.gz] [--scratch DIR]
        a real tokenizer.json + tokenizer_config.json from llama.cpp's vocab GGUF
        (vendor/llama.cpp/models/ggml-vocab-VOCAB.gguf in llama-cpp-python's sdist on PyPI; without
        --sdist, `pip download --no-deps --no-binary :all: llama-cpp-python` fetches it), converted by
        transformers' GGUF loader (needs the `gguf` package: on PYTHONPATH, else `pip install --target`
        into a scratch directory). Checks the converted tokenizer's ids against llama.cpp's own
        reference ids for that vocab (ggml-vocab-VOCAB.gguf.inp / .out, the cases llama.cpp's
        test-tokenizer-0 holds the GGUF tokenizer to) and refuses any mismatch. DIR/SOURCE.json
        records the sdist, its sha256, the member, the GGUF's sha256, the versions and the check.
  rows --out F.jsonl [--max-bytes N]
        real text: the .py sources of this Python's standard library, then of its site-packages (sorted
        paths, deduplicated by content, UTF-8 only, files over 1 MB skipped), one {"text": ...} row per
        file until N bytes (default 32 MB); F.manifest.json records the roots, files and sha256.
  check-ids --tokenizer DIR --rows F.jsonl --tokens F.tok [--rows-limit N]
        the first N rows through Hugging Face `tokenizers` (tokenizer.json, special tokens as its
        post-processor adds them, then EOS) against the start of `tierzero data prepare`'s token file
  weights-diff --start DIR --end PATH [--ref PATH] --json F
        bf16 weights of a fine-tune's end vs its start: the fraction of elements whose bf16 value
        changed (overall and per tensor kind), and with --ref the fraction equal to the reference
        run's end (PATH: an HF dir of safetensors, or a DeepSpeed save_16bit_model dir/.bin)
  summary --dir OUT --runs "NAME=LABEL ..." --ref NAME [--skip 100 --window 50 --tolerance 0.02]
          [--judged "NAME ..."] [--ft "NAME=LABEL ..." --ft-ref NAME]
        the fixed-width table: per WINDOW-step window after step SKIP, each run's mean loss (from
        OUT/NAME.metrics.jsonl) and its relative difference from the reference's; a judged run passes a
        window when |diff| <= tolerance; then the fine-tune table (OUT/ft_NAME.metrics.jsonl and
        OUT/ft_NAME.diff.json); OUT/quality_summary.json. Exit 0 whether or not the runs pass (the
        verdict is in the table); 1 only when inputs are missing.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import sysconfig
import tarfile

VOCABS = ("llama-spm", "qwen2", "llama-bpe")
SEPARATOR = "\n__ggml_vocab_test__\n"


# ---- tokenizer -------------------------------------------------------------------------------

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # noqa: BLE001 - installed with --target: no metadata on the path
        import gguf
        path = os.path.dirname(os.path.dirname(gguf.__file__))
        found = glob.glob(os.path.join(path, "gguf-*.dist-info"))
        return os.path.basename(found[0])[5:-10] if found else "?"


def ensure_gguf(scratch):
    try:
        import gguf  # noqa: F401
        return
    except ImportError:
        pass
    target = os.path.join(scratch, "gguf_pkgs")
    if not os.path.isdir(os.path.join(target, "gguf")):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, "gguf"],
                       check=True)
    sys.path.insert(0, target)
    import gguf  # noqa: F401


def cmd_tokenizer(a):
    os.makedirs(a.out, exist_ok=True)
    scratch = a.scratch  # the sdist (77 MB) and the extracted GGUF stay out of DIR, which travels to the GPU box
    os.makedirs(scratch, exist_ok=True)
    sdist = a.sdist
    if not sdist:
        found = sorted(glob.glob(os.path.join(scratch, "llama_cpp_python-*.tar.gz")))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                            "-d", scratch, "llama-cpp-python"], check=True)
            found = sorted(glob.glob(os.path.join(scratch, "llama_cpp_python-*.tar.gz")))
        sdist = found[-1]
    ensure_gguf(scratch)
    import gguf
    import transformers
    from transformers import AutoTokenizer

    base = f"ggml-vocab-{a.vocab}.gguf"
    extracted = {}
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            name = os.path.basename(member.name)
            if "/vendor/llama.cpp/models/" in member.name and name in (base, base + ".inp", base + ".out"):
                data = tar.extractfile(member).read()
                path = os.path.join(scratch, name)
                with open(path, "wb") as f:
                    f.write(data)
                extracted[name] = (member.name, path)
    if base not in extracted:
        sys.exit(f"tokenizer: {sdist} holds no vendor/llama.cpp/models/{base}")
    tok = AutoTokenizer.from_pretrained(scratch, gguf_file=base)
    tok.save_pretrained(a.out)
    for extra in glob.glob(os.path.join(a.out, "chat_template.jinja")):
        os.remove(extra)
    patched = None
    if a.vocab == "llama-spm":
        # transformers' GGUF converter writes a non-legacy Metaspace pre-tokenizer (prepend_scheme "first":
        # no extra "▁" before a text that starts with a space), unlike Llama 2's own tokenizer.json and
        # SentencePiece (add_dummy_prefix on the whole text): " Hello" gave [15043], not [29871, 15043].
        # Written back as Llama 2's tokenizer.json has it: normalizer Prepend("▁") + Replace(" ", "▁").
        path = os.path.join(a.out, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        spec["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        spec["pre_tokenizer"] = None
        spec["model"]["unk_token"] = "<unk>"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, ensure_ascii=False, indent=2)
        patched = "normalizer Prepend('\u2581') + Replace(' ', '\u2581'), no pre_tokenizer, unk <unk> (Llama 2's form)"

    # llama.cpp's reference ids for this vocab (made by the original Hugging Face tokenizer).
    check = {"cases": 0, "equal": 0, "mismatches": []}
    if base + ".inp" in extracted and base + ".out" in extracted:
        with open(extracted[base + ".inp"][1], encoding="utf-8") as f:
            cases = f.read().split(SEPARATOR)[:-1]
        with open(extracted[base + ".out"][1], encoding="utf-8") as f:
            expected = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(cases)]]
        from tokenizers import Tokenizer
        fast = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
        for text, ids in zip(cases, expected):
            got = fast.encode(text, add_special_tokens=False).ids
            check["cases"] += 1
            if got == ids:
                check["equal"] += 1
            else:
                check["mismatches"].append({"text": text, "expected": ids, "got": got})
    source = {"sdist": os.path.basename(sdist), "sdist_sha256": sha256(sdist), "member": extracted[base][0],
              "gguf_sha256": sha256(extracted[base][1]), "vocab_size": len(tok),
              "eos_token": tok.eos_token, "bos_token": tok.bos_token,
              "transformers": transformers.__version__, "gguf": gguf_version(), "patched": patched,
              "check_vs_llama_cpp_reference_ids": {k: v for k, v in check.items() if k != "mismatches"}}
    with open(os.path.join(a.out, "SOURCE.json"), "w") as f:
        json.dump(source, f, indent=2)
    print(f"# tokenizer: {extracted[base][0]} ({source['sdist']}, sha256 {source['sdist_sha256'][:16]}...) -> "
          f"{a.out}: vocab {source['vocab_size']}, eos {tok.eos_token!r}; ids equal llama.cpp's reference on "
          f"{check['equal']}/{check['cases']} cases")
    for m in check["mismatches"][:5]:
        print(f"#   MISMATCH {m['text']!r}: expected {m['expected']} got {m['got']}")
    if check["cases"] == 0 or check["mismatches"]:
        sys.exit("tokenizer: the converted tokenizer does not reproduce llama.cpp's reference ids")


# ---- rows ------------------------------------------------------------------------------------

def source_roots():
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"]]
    for key in ("purelib", "platlib"):
        if paths.get(key) and paths[key] not in roots:
            roots.append(paths[key])
    return roots


def cmd_rows(a):
    roots = source_roots()
    seen, written, files, out_bytes = set(), 0, [], 0
    h = hashlib.sha256()
    with open(a.out, "w", encoding="utf-8") as out:
        for root_index, root in enumerate(roots):
            candidates = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                # The stdlib's root also holds site-packages / dist-packages: those come after, as roots.
                if root_index == 0:
                    dirnames[:] = [d for d in dirnames if d not in ("site-packages", "dist-packages")]
                candidates += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".py")]
            for path in candidates:
                try:
                    if os.path.getsize(path) > (1 << 20) or os.path.getsize(path) < 64:
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                    text = data.decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                digest = hashlib.sha256(data).digest()
                if digest in seen:
                    continue
                seen.add(digest)
                line = json.dumps({"text": text}, ensure_ascii=False) + "\n"
                out.write(line)
                h.update(line.encode("utf-8"))
                written += 1
                out_bytes += len(data)
                files.append(os.path.relpath(path, root))
                if out_bytes >= a.max_bytes:
                    break
            if out_bytes >= a.max_bytes:
                break
    manifest = {"roots": roots, "rows": written, "text_bytes": out_bytes, "sha256": h.hexdigest(),
                "python": sys.version.split()[0], "first": files[:3], "last": files[-3:]}
    with open(a.out + ".manifest.json", "w") as f:
        json.dump(manifest, f, indent=2)
    print(f"# rows: {written} deduplicated .py files, {out_bytes / 1e6:.1f} MB of text from {', '.join(roots)} "
          f"-> {a.out} (sha256 {manifest['sha256'][:16]}...)")


# ---- check-ids -------------------------------------------------------------------------------

def read_token_file(path):
    import numpy as np

    with open(path, "rb") as f:
        header = f.read(32)
    if header[:8] != b"TZTOKENS":
        sys.exit(f"{path}: not a TZTOKENS file")
    _, width, count, _ = struct.unpack("<IIQQ", header[8:])
    return np.memmap(path, dtype=np.uint16 if width == 2 else np.uint32, mode="r", offset=32, shape=(count,))


def cmd_check_ids(a):
    from tokenizers import Tokenizer

    fast = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    with open(os.path.join(a.tokenizer, "tokenizer_config.json")) as f:
        eos = json.load(f).get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    eos_id = fast.token_to_id(eos)
    expected = []
    with open(a.rows, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= a.rows_limit:
                break
            expected += fast.encode(json.loads(line)["text"]).ids + [eos_id]
    tokens = read_token_file(a.tokens)
    got = [int(x) for x in tokens[:len(expected)]]
    first = next((i for i, (x, y) in enumerate(zip(expected, got)) if x != y), None)
    equal = first is None and len(got) == len(expected)
    print(f"# check-ids: the first {a.rows_limit} rows, {len(expected)} ids: tierzero data prepare "
          f"{'EQUALS' if equal else 'DIFFERS FROM'} Hugging Face tokenizers (+ EOS {eos!r} = {eos_id}); "
          f"{len(tokens)} tokens in {a.tokens}")
    if not equal:
        at = first if first is not None else min(len(got), len(expected))
        print(f"#   first difference at id {at}: expected {expected[at:at + 8]} got {got[at:at + 8]}")
    with open(a.tokens + ".check.json", "w") as f:
        json.dump({"rows": a.rows_limit, "ids": len(expected), "equal": equal, "first_difference": first,
                   "tokens": len(tokens)}, f, indent=2)
    sys.exit(0 if equal else 1)


# ---- weights-diff ----------------------------------------------------------------------------

def load_weights(path):
    """{name: bf16 tensor} from an HF dir of safetensors, a DeepSpeed save_16bit_model dir, or a file."""
    import torch

    files = [path] if os.path.isfile(path) else (sorted(glob.glob(os.path.join(path, "*.safetensors"))) or
                                                  sorted(glob.glob(os.path.join(path, "*.bin"))))
    if not files:
        sys.exit(f"weights-diff: no safetensors or .bin under {path}")
    weights = {}
    for f in files:
        if f.endswith(".safetensors"):
            from safetensors.torch import load_file
            weights.update(load_file(f))
        else:
            weights.update(torch.load(f, map_location="cpu", weights_only=True))
    return {k.removeprefix("module."): v.to(torch.bfloat16) for k, v in weights.items()}


def kind(name):
    for k in ("embed_tokens", "lm_head", "norm", "self_attn", "mlp"):
        if k in name:
            return "norm" if "norm" in name else k
    return "other"


def cmd_weights_diff(a):
    import torch

    start, end = load_weights(a.start), load_weights(a.end)
    ref = load_weights(a.ref) if a.ref else None
    if set(start) != set(end):
        sys.exit(f"weights-diff: tensors differ: {sorted(set(start) ^ set(end))[:5]}")
    totals = {"elements": 0, "changed": 0, "equal_ref": 0}
    max_ulps = 0
    kinds = {}
    abs_delta = 0.0
    for name in sorted(start):
        s, e = start[name], end[name]
        changed = int((s.view(torch.int16) != e.view(torch.int16)).sum())
        n = s.numel()
        abs_delta += float((e.float() - s.float()).abs().sum())
        k = kinds.setdefault(kind(name), {"elements": 0, "changed": 0})
        k["elements"] += n
        k["changed"] += changed
        totals["elements"] += n
        totals["changed"] += changed
        if ref is not None:
            totals["equal_ref"] += int((e.view(torch.int16) == ref[name].view(torch.int16)).sum())
            # bf16 ulps apart (same-sign values: their bit patterns differ by that many steps)
            apart = (e.view(torch.int16).int() - ref[name].view(torch.int16).int()).abs()
            max_ulps = max(max_ulps, int(apart.max()) if apart.numel() else 0)
    result = {"start": a.start, "end": a.end, "ref": a.ref, "elements": totals["elements"],
              "changed_fraction": totals["changed"] / totals["elements"],
              "mean_abs_delta": abs_delta / totals["elements"],
              "by_kind": {k: v["changed"] / v["elements"] for k, v in sorted(kinds.items())}}
    if ref is not None:
        result["equal_to_ref_fraction"] = totals["equal_ref"] / totals["elements"]
        result["max_ulps_from_ref"] = max_ulps
    with open(a.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"# weights-diff {a.end}: {100 * result['changed_fraction']:.3f}% of {totals['elements']} bf16 weights "
          f"changed" + (f", {100 * result['equal_to_ref_fraction']:.3f}% equal to {a.ref}" if ref is not None else ""))


# ---- summary ---------------------------------------------------------------------------------

def read_metrics(path):
    """{step: loss} of a metrics JSONL (tierzero's --metrics, train_deepspeed.py's --metrics)."""
    losses = {}
    if not os.path.exists(path):
        return losses
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a run that died mid-line
            if record.get("type") == "step" and record.get("loss") is not None:
                losses[int(record["step"])] = float(record["loss"])
    return losses


def pairs(text):
    out = []
    for item in text.split():
        name, _, label = item.partition("=")
        out.append((name, label.replace("_", " ") if label else name))
    return out


STATE_LINE = re.compile(r"((compact|fp32) master.*moments[^;]*)|(deepspeed precision: .*)|"
                        r"(state layout: master \w+, m \+ v \w+)")


def run_status(out_dir, name):
    """(ok / FAIL rc=N / TIMEOUT / missing, [tierzero's warnings about precision keys], the state the engine
    says it keeps: tierzero's optimizer description line, DeepSpeed's `deepspeed precision:` line)."""
    measure = os.path.join(out_dir, name + ".measure.json")
    status = "missing"
    if os.path.exists(measure):
        with open(measure) as f:
            m = json.load(f)
        status = "ok" if m["rc"] == 0 else ("TIMEOUT" if m.get("timed_out") else f"FAIL rc={m['rc']}")
    log = os.path.join(out_dir, name + ".log")
    ignored, state = [], None
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            for line in f:
                if line.startswith("warning:") and any(k in line for k in (
                        "master_weights", "optimizer_state_dtype", "offload_grad_dtype", "bf16_optimizer_states")):
                    ignored.append(line.strip())
                m = STATE_LINE.search(line)
                if m and state is None:
                    state = m[0].strip()
    return status, ignored, state


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}


def describe_data(out_dir, plan):
    rows = load_json(os.path.join(out_dir, "rows.jsonl.manifest.json"))
    prepared = load_json(os.path.join(out_dir, "tokens.prepare.json"))
    check = load_json(os.path.join(out_dir, "tokens.tok.check.json"))
    source = load_json(os.path.join(plan.get("tokenizer_dir", ""), "SOURCE.json"))
    ref = source.get("check_vs_llama_cpp_reference_ids", {})
    tokens = check.get("tokens") or prepared.get("tokens")
    return (f"text: {rows.get('rows', '?')} .py files, {rows.get('text_bytes', 0) / 1e6:.1f} MB (Python "
            f"{rows.get('python', '?')} stdlib + site-packages, sha256 {rows.get('sha256', '?')[:12]}); {tokens} tokens "
            f"(tierzero data prepare; ids {'equal' if check.get('equal') else 'NOT equal'} to HF tokenizers on the "
            f"first {check.get('rows', '?')} rows)\n# tokenizer: {source.get('member', '?').split('/')[-1]} from "
            f"{source.get('sdist', '?')} (sha256 {source.get('sdist_sha256', '?')[:12]}), transformers "
            f"{source.get('transformers', '?')} GGUF loader, gguf {source.get('gguf', '?')}"
            f"{', patched to Llama 2 form' if source.get('patched') else ''}; llama.cpp reference ids "
            f"{ref.get('equal', '?')}/{ref.get('cases', '?')}")


def expected_state(out_dir, name):
    """(master, moments) the run's ds_config asks for: tierzero's section, or DeepSpeed's bf16 keys for lean."""
    ds = load_json(os.path.join(out_dir, name + ".ds_config.json"))
    if name.endswith("lean"):
        b = ds.get("bf16", {})
        return ("bf16" if b.get("bf16_master_weights_and_grads") else "fp32",
                "bf16" if b.get("bf16_optimizer_states") else "fp32")
    t = ds.get("tierzero", {})
    return t.get("master_weights", "fp32"), t.get("optimizer_state_dtype", "fp32")


def parse_state(state):
    """(master, moments) from an engine's state line: tierzero's optimizer description ("compact master (...),
    8-bit moments"), its plan line ("state layout: master compact, m + v int8"), DeepSpeed's read-back."""
    m = re.search(r"state layout: master (\w+), m \+ v (\w+)", state) or \
        re.search(r"deepspeed precision: master (\w+), moments (\w+)", state)
    if m:
        return m[1], m[2]
    master = "compact" if state.startswith("compact master") else "fp32" if state.startswith("fp32 master") else None
    moments = "int8" if "8-bit moments" in state else "bf16" if re.search(r"(BFloat16|bf16) moments", state) else \
        "fp32" if re.search(r"(Float|fp32) moments", state) else None
    return master, moments


def state_check(out_dir, name, state):
    """'ok' when the engine's own state line shows what the config asks for, 'MISMATCH' when it shows
    something else, 'unverified' when the log has no state line."""
    if not state:
        return "unverified"
    return "ok" if parse_state(state) == expected_state(out_dir, name) else "MISMATCH"


def wall(out_dir, name):
    path = os.path.join(out_dir, name + ".measure.json")
    if not os.path.exists(path):
        return "- s"
    with open(path) as f:
        return f"{json.load(f)['wall_s']:.0f} s"


def cmd_summary(a):
    runs, ref = pairs(a.runs), a.ref
    judged = set(a.judged.split()) if a.judged else set()
    curves = {name: read_metrics(os.path.join(a.dir, name + ".metrics.jsonl")) for name, _ in runs}
    if not curves.get(ref):
        print(f"# quality summary: the reference run {ref} has no loss curve ({a.dir}/{ref}.metrics.jsonl)")
    last = max((max(c) for c in curves.values() if c), default=0)
    windows = [(b, min(b + a.window - 1, last)) for b in range(a.skip + 1, last + 1, a.window)]
    with open(os.path.join(a.dir, "plan.json")) as f:
        plan = json.load(f)
    print(f"# quality run: {plan['model']} ({plan['parameters']} parameters, vocab {plan['vocab']}), "
          f"{plan['steps']} steps of {plan['tokens_per_step']} tokens, the same random init and tokens for every run")
    print(f"# {describe_data(a.dir, plan)}")
    print(f"# {plan['machine']}")
    print(f"# mean loss per {a.window}-step window after step {a.skip}; diff = (run - {ref}) / {ref}; "
          f"a judged run passes a window when |diff| <= {100 * a.tolerance:.1f}%")
    statuses = {name: run_status(a.dir, name) for name, _ in runs}
    checks = {name: state_check(a.dir, name, statuses[name][2]) for name, _ in runs}
    for name, label in runs:
        status, ignored, state = statuses[name]
        print(f"#   {name:<14} {label}  [{status}{', IGNORED KEYS' if ignored else ''}"
              f"{', judged' if name in judged else ''}; {wall(a.dir, name)}]")
        master, moments = expected_state(a.dir, name)
        print(f"#   {'':<14} the engine says: {state or '- (no state line in its log)'}; asked for {master} master, "
              f"{moments} moments: {checks[name]}")
        for w in ignored:
            print(f"#   {'':<14} {w}")
    cols = [name for name, _ in runs]
    header = f"# {'window':<11}" + "".join(f" {n[:14]:>14}" for n in cols) + \
             "".join(f" {('d_' + n)[:14]:>14}" for n in cols if n != ref) + "  correct"
    print(header)
    rows, failures = [], 0
    for begin, end in windows:
        means = {}
        for name in cols:
            values = [curves[name][s] for s in range(begin, end + 1) if s in curves[name]]
            means[name] = sum(values) / len(values) if values and len(values) == end - begin + 1 else None
        diffs = {n: (means[n] - means[ref]) / means[ref] if means[n] is not None and means.get(ref) else None
                 for n in cols if n != ref}
        bad = [n for n in judged if n != ref and (diffs.get(n) is None or abs(diffs[n]) > a.tolerance)]
        failures += bool(bad)
        cell = lambda v: f"{v:14.4f}" if v is not None else f"{'-':>14}"  # noqa: E731
        pct = lambda v: f"{100 * v:+13.2f}%" if v is not None else f"{'-':>14}"  # noqa: E731
        print(f"  {f'{begin}-{end}':<11}" + "".join(f" {cell(means[n])}" for n in cols) +
              "".join(f" {pct(diffs[n])}" for n in cols if n != ref) +
              f"  {'ok' if not bad else 'FAIL ' + ','.join(sorted(bad))}")
        rows.append({"window": [begin, end], "mean_loss": means, "rel_diff_vs_ref": diffs, "failed": sorted(bad)})
    must_run = judged | {ref}
    unusable = sorted(n for n in must_run if statuses.get(n, ("missing", [], None))[0] != "ok" or statuses[n][1]
                      or checks.get(n) == "MISMATCH")
    passed = bool(windows) and failures == 0 and not unusable
    print(f"# {len(windows)} windows; {failures} with a judged run beyond {100 * a.tolerance:.1f}% of {ref}; "
          f"judged: {' '.join(sorted(judged)) or '-'}"
          + (f"; failed, keys ignored or state not as asked: {' '.join(unusable)}" if unusable else "")
          + f" -> {'PASS' if passed else 'FAIL'}")

    ft_rows = []
    if a.ft:
        ft = pairs(a.ft)
        print(f"# fine-tune: {plan['ft_steps']} steps at constant lr {plan['ft_lr']} from {plan['ft_start']}; "
              f"changed: bf16 weights whose value differs from the start; equal_ref: bf16 weights equal to "
              f"ft_{a.ft_ref}'s end; loss: mean of the last {min(10, plan['ft_steps'])} steps")
        print(f"# {'run':<22} {'label':<34} {'loss':>8} {'changed%':>9} {'emb%':>7} {'attn%':>7} {'mlp%':>7} "
              f"{'norm%':>7} {'head%':>7} {'equal_ref%':>10}  status  correct")
        for name, label in ft:
            curve = read_metrics(os.path.join(a.dir, f"ft_{name}.metrics.jsonl"))
            tail = [curve[s] for s in sorted(curve)[-min(10, plan["ft_steps"]):]]
            loss = sum(tail) / len(tail) if tail else None
            diff_path = os.path.join(a.dir, f"ft_{name}.diff.json")
            d = json.load(open(diff_path)) if os.path.exists(diff_path) else {}
            status, ignored, state = run_status(a.dir, f"ft_{name}")
            check = state_check(a.dir, f"ft_{name}", state)
            k = d.get("by_kind", {})
            # compact master + fp32 moments: the master is exact, so the weights must equal the fp32 run's
            correct = "-"
            if name == "compact_fp32m":
                eq = d.get("equal_to_ref_fraction")
                # The compact master's bf16 half rounds ties away from zero, an fp32 master's export to nearest
                # even: a master exactly halfway (~2^-16 of them) exports 1 ulp apart, nothing else may differ.
                ulps = d.get("max_ulps_from_ref")
                correct = "ok (= fp32)" if eq == 1.0 else (
                    f"ok ({100 * (1 - eq):.4f}% 1 ulp apart: ties)" if eq is not None and ulps == 1 and 1 - eq < 1e-4
                    else f"DIFFERS (max {ulps} ulps apart)" if eq is not None else "missing")
            if check != "ok":
                correct += f", state {check}"
            p = lambda v: f"{100 * v:.3f}" if v is not None else "-"  # noqa: E731
            print(f"  {name:<22} {label[:34]:<34} {loss if loss is not None else float('nan'):8.4f} "
                  f"{p(d.get('changed_fraction')):>9} {p(k.get('embed_tokens')):>7} {p(k.get('self_attn')):>7} "
                  f"{p(k.get('mlp')):>7} {p(k.get('norm')):>7} {p(k.get('lm_head')):>7} "
                  f"{p(d.get('equal_to_ref_fraction')):>10}  {status}{' IGNORED KEYS' if ignored else ''}  {correct}")
            ft_rows.append({"run": name, "label": label, "loss": loss, "status": status, "ignored": ignored,
                            "correct": correct, **d})
        changed = {r["run"]: r.get("changed_fraction") for r in ft_rows}
        if changed.get(a.ft_ref) and "lean" in changed and changed["lean"] is not None:
            ratio = changed[a.ft_ref] / changed["lean"] if changed["lean"] else float("inf")
            print(f"# bf16 weights changed by the fine-tune: {a.ft_ref} {100 * changed[a.ft_ref]:.3f}%, DeepSpeed lean "
                  f"(bf16 master) {100 * changed['lean']:.3f}%: {ratio:.1f}x fewer kept updates with the bf16 master")
        print("# a bf16-only master drops every Adam update smaller than half a bf16 ulp (up to |w| * 2^-8): at lr 1e-6 "
              "most weights never change; an exact master (fp32 or compact) accumulates them")
    summary = {"plan": plan, "reference": ref, "tolerance": a.tolerance, "window": a.window, "skip": a.skip,
               "runs": {n: {"label": l, "status": statuses[n][0], "ignored": statuses[n][1], "state": statuses[n][2],
                            "state_check": checks[n]} for n, l in runs},
               "windows": rows, "pass": passed, "fine_tune": ft_rows}
    path = os.path.join(a.dir, "quality_summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    print(f"# JSON: {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("tokenizer")
    s.add_argument("--out", required=True)
    s.add_argument("--vocab", choices=VOCABS, default="llama-spm")
    s.add_argument("--sdist")
    s.add_argument("--scratch", default="/tmp/tierzero_quality_tokenizer", help="downloads and extracted files")
    s.set_defaults(run=cmd_tokenizer)
    s = sub.add_parser("rows")
    s.add_argument("--out", required=True)
    s.add_argument("--max-bytes", type=int, default=32 << 20)
    s.set_defaults(run=cmd_rows)
    s = sub.add_parser("check-ids")
    s.add_argument("--tokenizer", required=True)
    s.add_argument("--rows", required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--rows-limit", type=int, default=200)
    s.set_defaults(run=cmd_check_ids)
    s = sub.add_parser("weights-diff")
    s.add_argument("--start", required=True)
    s.add_argument("--end", required=True)
    s.add_argument("--ref")
    s.add_argument("--json", required=True)
    s.set_defaults(run=cmd_weights_diff)
    s = sub.add_parser("summary")
    s.add_argument("--dir", required=True)
    s.add_argument("--runs", required=True)
    s.add_argument("--ref", required=True)
    s.add_argument("--judged", default="")
    s.add_argument("--skip", type=int, default=100)
    s.add_argument("--window", type=int, default=50)
    s.add_argument("--tolerance", type=float, default=0.02)
    s.add_argument("--ft", default="")
    s.add_argument("--ft-ref", default="")
    s.set_defaults(run=cmd_summary)
    a = p.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
