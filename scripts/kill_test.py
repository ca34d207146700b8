#!/usr/bin/env python3
"""Real SIGKILLs of tierzero's writing operations, and what each kill left.

For each operation (training with periodic saves, periodic saves in flight beside the next step with
the optimizer offloaded (state in host memory and on NVMe; every trial killed while a save's staging
directory lives; write-behind saves that drain over several steps), the save at the end of a run,
save_16bit_model beside `latest`, --export, convert of an engine and of a DeepSpeed checkpoint,
checkpoint reshard)
on the tiny configs/ model, CPU: run it cleanly twice (its outputs are the reference, its mean
duration the kill range), then start it again and again in fresh directories and SIGKILL it at a
random instant, uniform over that duration, or (--commit-fraction of the trials) a random delay
after a staging directory appears. After every trial: the previous checkpoint must still verify and
`train --resume` from it (lost = 0), and every output that looks complete must be byte for byte
the clean run's (partial accepted = 0). See kill_campaign/operations.py for each check.

  scripts/kill_test.py --tierzero build/tools/tierzero               200 kills per operation
  scripts/kill_test.py --tierzero build/tools/tierzero --quick       a few per operation (CI: 2-3 min on two cores)
  scripts/kill_test.py --tierzero build/tools/tierzero --only "in flight"   the saves in flight only
Exit status 0 when nothing was lost or wrongly accepted and every operation got its kills.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kill_campaign import campaign, operations, workspace  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK_KILLS = {"train": 2, "other": 8}  # --quick: kills per operation that starts LibTorch, per other


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tierzero", default=os.path.join(REPO, "build", "tools", "tierzero"),
                        help="the tierzero binary (tierzero-torch beside it); default build/tools/tierzero")
    parser.add_argument("--kills", type=int, default=200, help="SIGKILLs per operation (default 200)")
    parser.add_argument("--quick", action="store_true", help="a few kills per operation: the CI form")
    parser.add_argument("--commit-fraction", type=float, default=0.3,
                        help="share of trials aimed at the commit window (default 0.3)")
    parser.add_argument("--seconds-per-operation", type=float, default=900,
                        help="stop an operation's trials after this long, kills or not (default 900)")
    parser.add_argument("--only", default="",
                        help="run only operations whose name contains one of these '|'-separated texts")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock; printed)")
    parser.add_argument("--scratch", default=None, help="parent of the scratch directory (default: $TMPDIR)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory and failing trials")
    parser.add_argument("--json", default=None, help="also write the results here as JSON")
    return parser.parse_args()


def kills_for(op, args):
    if not args.quick:
        return args.kills
    return QUICK_KILLS["train" if op.starts_torch else "other"]


def failed(tally):
    return tally.lost or tally.accepted_partial or tally.unrecovered or tally.kills < tally.wanted


def print_table(tallies):
    print(f"{'operation':36} {'trials':>6} {'kills':>6} {'aimed':>6} {'in-commit':>9} {'lost':>5} "
          f"{'partial-ok':>10} {'unrecovered':>11} {'clean s':>8} {'window ms':>9} {'wall s':>7}  result")
    for t in tallies:
        print(f"{t.name:36} {t.trials:6d} {t.kills:6d} {t.aimed_at_commit:6d} {t.kills_in_commit:9d} {t.lost:5d} "
              f"{t.accepted_partial:10d} {t.unrecovered:11d} {t.clean_seconds:8.3f} {t.commit_window * 1e3:9.1f} "
              f"{t.seconds:7.1f}  {'FAIL' if failed(t) else 'OK'}")
    for t in tallies:
        print(f"# {t.name}: checks shown to fail on the clean output with a flipped byte in {t.self_check}")
    for t in tallies:
        for example in t.examples:
            print(f"# {t.name}: {example}")
        if t.kills < t.wanted:
            print(f"# {t.name}: only {t.kills} of {t.wanted} kills landed within the time limit")


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    tierzero = os.path.abspath(args.tierzero)
    if not os.access(tierzero, os.X_OK):
        sys.exit(f"kill_test: {tierzero} is not an executable tierzero binary; build it or pass --tierzero")
    root = tempfile.mkdtemp(prefix="tierzero-kill-", dir=args.scratch)
    started = time.monotonic()
    print(f"# tierzero kill test: SIGKILL at random instants, {args.commit_fraction:.0%} aimed at the commit window")
    print(f"# binary {tierzero}, scratch {root}, seed {seed}, {'quick' if args.quick else f'{args.kills} kills'}"
          f" per operation, {os.cpu_count()} CPUs")
    sys.stdout.flush()
    ws = workspace.make_workspace(tierzero, REPO, os.path.join(root, "inputs"))
    tallies = []
    for index, op in enumerate(operations.all_operations(ws)):
        if not any(text in op.name for text in args.only.split("|")):
            continue
        wanted = kills_for(op, args)
        tally = campaign.run_operation(op, os.path.join(root, f"op{index}"), wanted, args.commit_fraction, rng,
                                       time.monotonic() + args.seconds_per_operation, args.keep)
        tallies.append(tally)
        print(f"# done: {op.name}: {tally.kills} kills of {tally.trials} trials ({tally.kills_in_commit} inside a "
              f"commit), lost {tally.lost}, partial accepted {tally.accepted_partial}, unrecovered "
              f"{tally.unrecovered}, {tally.seconds:.0f} s", file=sys.stderr)
    seconds = time.monotonic() - started
    print_table(tallies)
    failures = [t for t in tallies if failed(t)]
    total_kills = sum(t.kills for t in tallies)
    print(f"# {len(tallies)} operations, {total_kills} kills, "
          f"{sum(t.kills_in_commit for t in tallies)} inside a commit, "
          f"{sum(t.lost for t in tallies)} lost, {sum(t.accepted_partial for t in tallies)} partial accepted, "
          f"{sum(t.unrecovered for t in tallies)} unrecovered in {seconds:.0f} s: {'FAIL' if failures else 'OK'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "binary": tierzero, "seconds": seconds,
                       "operations": [vars(t) for t in tallies]}, f, indent=1)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
