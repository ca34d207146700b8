#!/usr/bin/env python3
"""The command line as a DeepSpeed / Hugging Face user types it, refused before any work with the flag
meant; numeric flags refused with a readable range; estimate planning for this machine by default.

  cli_flags_test.py --tierzero BUILD/tools/tierzero

1. Unknown flags, in every subcommand: the hyphenated spelling of an underscored flag, tierzero's flag
   for a DeepSpeed launcher / HF Trainer one (--deepspeed -> --config, --max_steps -> --steps ...),
   else the nearest flag; never CLI11's bare "not expected". The flags are taken from each command's
   own --help, so the expectation is independent of the code that suggests.
2. The model directory is --model in train, data prepare / show, estimate and convert.
3. --rows 0, --seed -1, --threads -3, --gpus 0 ...: "must be a whole number from A to B, got X";
   train --resume of a directory whose `latest` is bad offers a fix train has (it has no --tag).
4. A flag that only acts with another flag or mode, given without it, is refused naming both
   (train --keep-last without --save, convert --world-size without --to deepspeed ...).
5. estimate without --host-memory / --gpu-memory plans for this machine: its host budget is
   /proc/meminfo's MemAvailable (read here), it says so, and a run that needs more is refused (the
   README's 14B command on a machine with less RAM than it needs).
"""
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_check import REPO, fail, run, tierzero_from_args  # noqa: E402

failures = []


def check(ok, message, result=None):
    if not ok:
        detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result is not None else ""
        failures.append(f"{message}{detail}")


def flags_of(tz, *command):
    """The long flags `tierzero COMMAND --help` lists."""
    r = run(tz, *command, "--help", timeout=60)
    if r.returncode != 0:
        fail(f"tierzero {' '.join(command)} --help failed", r)
    return set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", r.stdout))


def refused(tz, args, wanted, what):
    """Runs tierzero ARGS, which must exit non-zero at once with `wanted` (a regex) on stderr and
    without CLI11's bare message."""
    r = run(tz, *args, timeout=60)
    check(r.returncode != 0, f"{what}: exit 0 for {args}", r)
    check(re.search(wanted, r.stderr) is not None, f"{what}: {wanted!r} not in the output of {args}", r)
    check("not expected" not in r.stderr, f"{what}: CLI11's bare 'not expected' for {args}", r)
    return r


def unknown_flags(tz, tmp):
    train = flags_of(tz, "train")
    for must in ("config", "steps", "lr", "micro-batch", "grad-accum", "save", "export", "model", "warmup-steps"):
        check(must in train, f"train --help lacks --{must}")
    epochs = "epochs" if "epochs" in train else "steps"
    hf = {  # the DeepSpeed launcher's and the HF Trainer's spelling -> tierzero's
        "--deepspeed": "--config",
        "--max_steps": "--steps",
        "--learning_rate": "--lr",
        "--num_train_epochs": "--" + epochs,
        "--per_device_train_batch_size": "--micro-batch",
        "--gradient_accumulation_steps": "--grad-accum",
        "--model_name_or_path": "--model",
        "--warmup_steps": "--warmup-steps",
        "--max_grad_norm": "--max-grad-norm",
        "--save_total_limit": "--keep-last",
        "--resume_from_checkpoint": "--resume",
        "--max_seq_length": "--seq-len",
    }
    for given, meant in hf.items():
        refused(tz, ["train", given, "7"], rf"tierzero train: unknown flag {given}: did you mean {re.escape(meant)}\?",
                f"train {given}")
    refused(tz, ["train", "--output_dir", "out"], r"unknown flag --output_dir: did you mean --save or --export\?",
            "train --output_dir")
    refused(tz, ["train", "--max_steps=7"], r"unknown flag --max_steps: did you mean --steps\?", "train --max_steps=7")
    refused(tz, ["train", "--stpes", "7"], r"unknown flag --stpes: did you mean --steps\?", "a typo")
    r = refused(tz, ["train", "--deepspeed", "ds.json", "--learning_rate", "1e-4"], r"--deepspeed: did you mean --config",
                "two unknown flags")
    check("--learning_rate: did you mean --lr" in r.stderr, "both unknown flags are named", r)
    check("ds.json" not in r.stderr, "the value of an unknown flag is not reported as another argument", r)
    refused(tz, ["train", "--bogus-thing"], r"unknown flag --bogus-thing: no flag of this command is near "
            r"\(`tierzero train --help` lists them\)", "no near flag")

    # Every subcommand gets it, each with its own flags (a required flag missing too: the unknown
    # flag is the one named, as it is what to fix).
    config = os.path.join(REPO, "configs", "tiny.json")
    for command, args, given, meant in [
        ("data prepare", ["data", "prepare", "in.jsonl", "out.tok"], "--tokenizer_name", "--model"),
        ("data show", ["data", "show", "in.jsonl"], "--row", "--rows"),
        ("estimate", ["estimate", "--config", config], "--model_name_or_path", "--model"),
        ("estimate", ["estimate", "--config", config], "--host_memory", "--host-memory"),
        ("convert", ["convert", "src", "out"], "--dtyp", "--dtype"),
        ("checkpoint verify", ["checkpoint", "verify", "dir"], "--tga", "--tag"),
        ("checkpoint reshard", ["checkpoint", "reshard", "a", "b", "--world-size", "2"], "--compression_level",
         "--compression-level"),
        ("report", ["report", "run.jsonl"], "--titel", "--title"),
        ("doctor", ["doctor"], "--jsno", "--json"),
        ("bench io", ["bench", "io"], "--queue_depth", "--queue-depth"),
        ("bench adam", ["bench", "adam"], "--param_dtype", "--param-dtype"),
    ]:
        refused(tz, args + [given, "x"], rf"tierzero {command}: unknown flag {given}: did you mean {re.escape(meant)}\?",
                f"{command} {given}")


def model_flag(tz):
    for command in (["train"], ["data", "prepare"], ["data", "show"], ["estimate"], ["convert"]):
        check("model" in flags_of(tz, *command), f"tierzero {' '.join(command)} has no --model")


def ranges(tz, tmp):
    rows = os.path.join(tmp, "rows.jsonl")
    with open(rows, "w") as f:
        f.write('{"text": "a"}\n')
    for args, flag, bound in [
        (["data", "show", "--model", tmp, rows, "--rows", "0"], "--rows", "from 1 to 1000000, got 0"),
        (["data", "prepare", "--model", tmp, rows, os.path.join(tmp, "o.tok"), "--threads", "-3"], "--threads",
         "from 1 to 4096, got -3"),
        (["train", "--seed", "-1"], "--seed", "from 0 to 4294967295, got -1"),
        (["train", "--steps", "0"], "--steps", "from 1 to 1000000000, got 0"),
        (["estimate", "--model", "m", "--config", "c", "--gpus", "0"], "--gpus", "from 1 to 65536, got 0"),
        (["estimate", "--model", "m", "--config", "c", "--seq-len", "-5"], "--seq-len", "from 1 to 16777216, got -5"),
        (["estimate", "--model", "m", "--config", "c", "--gpu-efficiency", "2"], "--gpu-efficiency",
         "from 0.001 to 1, got 2"),
        (["convert", "a", "b", "--aio-queue-depth", "0"], "--aio-queue-depth", "from 1 to 4096, got 0"),
        (["convert", "a", "b", "--world-size", "0"], "--world-size", "from 1 to 1000000, got 0"),
        (["checkpoint", "reshard", "a", "b", "--world-size", "2", "--compression-level", "23"], "--compression-level",
         "from 0 to 22, got 23"),
        (["bench", "io", "--threads", "-1"], "--threads", "from 1 to 256, got -1"),
        (["bench", "io", "--queue-depth", "0"], "--queue-depth", "from 1 to 4096, got 0"),
        (["bench", "io", "--repeat", "0"], "--repeat", "from 1 to 1000, got 0"),
        (["bench", "pcie", "--repeat", "0"], "--repeat", "from 1 to 1000, got 0"),
        (["bench", "pcie", "--device", "-1"], "--device", "from 0 to 1023, got -1"),
        (["bench", "adam", "--threads", "-3"], "--threads", "from 1 to 4096, got -3"),
        (["bench", "adam", "--steps", "0"], "--steps", "from 1 to 1000000, got 0"),
        (["bench", "tiers", "--buffers", "0"], "--buffers", "from 1 to 1024, got 0"),
    ]:
        r = refused(tz, args, re.escape(f"{flag}: must be ") + r"(a whole number|a number) " + re.escape(bound),
                    f"{' '.join(args[:2])} {flag}")
        check(re.search(r"\d{30}", r.stderr) is None, f"{flag}: a 300-digit bound", r)


def flag_pairs(tz, tmp):
    """Each flag that acts only with another flag (or --to mode), given without it: refused before any
    work (SRC does not exist, so a run that got further would say so instead), naming both."""
    for args, wanted in [
        (["train", "--save-every", "2"], r"--save-every requires --save"),
        (["train", "--keep-last", "2"], r"--keep-last requires --save"),
        (["train", "--on-save-error", "stop"], r"--on-save-error requires --save"),
        (["bench", "adam", "--moments", "int8", "--streaming-stores"],
         r"--streaming-stores with --moments int8: .* drop --streaming-stores"),
        (["estimate", "--model", "m", "--config", "c", "--gpu", "H100", "--gpu-tflops", "500"],
         r"--gpu(-tflops)? excludes --gpu(-tflops)?"),
        (["convert", "a", "b", "--world-size", "2"],
         r"--to safetensors \(the default\) does not read --world-size \(--to deepspeed only\)"),
        (["convert", "a", "b", "--ds-config", "ds.json"],
         r"--to safetensors \(the default\) does not read --ds-config \(--to deepspeed only\)"),
    ] + [(["convert", "a", "b", "--to", "deepspeed", flag] + value, rf"--to deepspeed does not read {flag} "
          r"\(safetensors output only\)") for flag, value in [
        ("--dtype", ["fp32"]), ("--max-shard-size", ["1MB"]), ("--prefix", ["model."]), ("--aio-backend", ["sync"]),
        ("--aio-block-size", ["1MiB"]), ("--aio-queue-depth", ["4"]), ("--model", [tmp]), ("--adapter", []),
        ("--model-config", ["config.json"])]]:
        refused(tz, args, wanted, " ".join(args))
    # --tag picks a checkpoint under DIR/latest's directory; a PyTorch DCP folder (.metadata + *.distcp)
    # is one checkpoint without tags.
    dcp = os.path.join(tmp, "dcp")
    os.makedirs(dcp)
    for name in (".metadata", "__0_0.distcp"):
        open(os.path.join(dcp, name), "wb").close()
    refused(tz, ["convert", dcp, os.path.join(tmp, "out"), "--tag", "step5"],
            r"--tag step5: SRC .*dcp is a PyTorch DCP checkpoint, one step with no tags: leave --tag out",
            "convert --tag of a DCP checkpoint")
    # Where the mode is the one the flag acts in, the run goes on to the missing SRC (--no-progress is
    # no bar requested: fine where there is none).
    for args in (["convert", "a", "b", "--to", "deepspeed", "--world-size", "2", "--ds-config", "ds.json",
                  "--no-progress"], ["convert", "a", "b", "--dtype", "fp32", "--no-progress"]):
        r = refused(tz, args, r"\ba\b.*(not one|is not a tierzero checkpoint)", " ".join(args))
        check("does not read" not in r.stderr, f"{args}: a flag its mode reads is refused", r)


def resume_hint(tz, tmp):
    """train --resume of a directory whose `latest` names no tag: the fix offered is one train has
    (train has no --tag)."""
    run_dir = os.path.join(tmp, "run")
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "latest"), "w") as f:
        f.write("no tag\n")
    r = run(tz, "train", "--resume", run_dir, "--steps", "1", timeout=300)
    check(r.returncode != 0 and "holds 'no tag', not a tag name" in r.stderr, "train --resume of a bad latest fails", r)
    check("for train --resume write TAG into DIR/latest" in r.stderr, "the fix is one train --resume has", r)


def meminfo_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    fail("no MemAvailable in /proc/meminfo")


def estimate_defaults(tz, tmp):
    """The README's 14B command (its model shape and config), planned with no budget flags."""
    nvme = os.path.join(tmp, "nvme")
    os.makedirs(nvme)
    plan_json = os.path.join(tmp, "plan.json")
    args = ["estimate", "--model", os.path.join(REPO, "benchmarks", "models", "qwen2.5_14b.json"),
            "--config", os.path.join(REPO, "benchmarks", "configs", "zero3_14b_compact_24gb.json"),
            "--nvme", nvme, "--json", plan_json]
    available = meminfo_available()
    r = run(tz, *args, timeout=120)
    check(re.search(r"# host memory: [\d.]+ GiB available of [\d.]+ GiB \(this machine; --host-memory to plan for "
                    r"another\)", r.stdout) is not None, "estimate says the host budget is this machine's", r)
    check(re.search(r"# gpu memory: (not checked: no GPU found here|[\d.]+ GiB \(this machine's)", r.stdout)
          is not None, "estimate says which GPU memory it checks against", r)
    if not os.path.exists(plan_json):
        fail("estimate wrote no --json plan", r)
    with open(plan_json) as f:
        plan = json.load(f)
    host = [c for c in plan["checks"] if c["name"] == "host"]
    check(len(host) == 1, f"one host check in the plan: {plan['checks']}", r)
    budget, need = host[0]["budget_bytes"], host[0]["peak_bytes"]
    check(host[0]["budget_source"] == "this machine's MemAvailable", f"the host budget's source: {host[0]}", r)
    check(abs(budget - available) <= 0.05 * available,
          f"the host budget {budget} is this machine's MemAvailable {available} (within 5 %)", r)
    if need > available * 1.05:
        check(r.returncode == 1 and "# Result: FAIL" in r.stdout,
              f"a run needing {need} B of host memory on a machine with {available} B available is refused", r)
    # With a budget given, that budget is the one planned against.
    r = run(tz, *args, "--host-memory", "4TB", "--gpu-memory", "141GB", timeout=120)
    check("# host memory: 3.64 TiB (--host-memory)" in r.stdout, "--host-memory is named as the budget's source", r)
    check(r.returncode == 0 and "# Result: OK" in r.stdout, "the 14B plan fits a 4 TB host and a 141 GB GPU", r)


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        unknown_flags(tz, tmp)
        model_flag(tz)
        ranges(tz, tmp)
        flag_pairs(tz, tmp)
        resume_hint(tz, tmp)
        estimate_defaults(tz, tmp)
    if failures:
        sys.exit("FAIL:\n" + "\n\n".join(failures))
    print("OK: unknown flags answered with the flag meant in every command; --model everywhere; readable ranges; "
          "flags that need another refused without it; estimate plans for this machine")


if __name__ == "__main__":
    main()
