#!/usr/bin/env python3
"""`tierzero bench io --tune --update-config FILE`: the tuned aio block lands in the ds_config (its
other keys and their order kept, the block equal to the one the run printed and wrote to --json), and
the result is a config train's loader accepts (`tierzero estimate` parses it as train does). Refused
before any I/O: --update-config without --tune, a missing file, a file that is not a JSON object.

    bench_io_tune_config_test.py --tierzero PATH
"""
import json
import os
import tempfile

from cli_check import REPO, fail, run, tierzero_from_args


def main():
    tz = tierzero_from_args(__doc__)
    with tempfile.TemporaryDirectory(prefix="tierzero-tune-") as tmp:
        config_path = os.path.join(tmp, "ds_config.json")
        original = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 2,
            "aio": {"block_size": 4096, "queue_depth": 1, "intra_op_parallelism": 1, "single_submit": True,
                    "overlap_events": False},
            "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": tmp}},
            "tierzero": {"data": {"seq_len": 16}},
        }
        with open(config_path, "w") as f:
            json.dump(original, f)

        refused = [
            (["--update-config", config_path], "needs --tune"),
            (["--tune", "--update-config", os.path.join(tmp, "missing.json")], "missing.json"),
        ]
        not_json = os.path.join(tmp, "list.json")
        with open(not_json, "w") as f:
            f.write("[1, 2]")
        refused.append((["--tune", "--update-config", not_json], "not a JSON object"))
        for args, needle in refused:
            r = run(tz, "bench", "io", "--path", tmp, "--size", "8MiB", *args)
            if r.returncode == 0 or needle not in r.stderr:
                fail(f"bench io {' '.join(args)}: expected a refusal naming '{needle}'", r)
            if any(name.startswith("tierzero-bench-io") for name in os.listdir(tmp)):
                fail(f"bench io {' '.join(args)}: wrote a test file before refusing")

        report = os.path.join(tmp, "tune.json")
        r = run(tz, "bench", "io", "--path", tmp, "--size", "8MiB", "--tune", "--update-config", config_path,
                "--json", report)
        if r.returncode != 0 or "aio block written into" not in r.stdout:
            fail("bench io --tune --update-config did not succeed", r)
        with open(config_path) as f:
            text = f.read()
        updated = json.loads(text)
        with open(report) as f:
            tuned = json.load(f)["aio"]
        if updated["aio"] != tuned:
            fail(f"the config's aio block {updated['aio']} is not the tuned one {tuned}")
        if updated["aio"] == original["aio"]:
            fail("the aio block was not replaced")
        if list(updated) != list(original):
            fail(f"key order changed: {list(updated)} (was {list(original)})")
        for key in original:
            if key != "aio" and updated[key] != original[key]:
                fail(f"key {key} changed: {updated[key]} (was {original[key]})")
        if os.path.exists(config_path + ".tierzero-tmp"):
            fail("the temporary file was left behind")

        model = os.path.join(REPO, "benchmarks", "models", "llama_tiny.json")
        r = run(tz, "estimate", "--model-config", model, "--config", config_path, "--nvme", tmp)
        if r.returncode != 0:
            fail("the updated config does not load (tierzero estimate)", r)
    print("OK: bench io --tune --update-config")


if __name__ == "__main__":
    main()
