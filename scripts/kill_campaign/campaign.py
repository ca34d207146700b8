"""One operation's campaign: clean reference runs, then trials until enough real SIGKILLs."""
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field

from . import process


@dataclass
class Tally:
    """What one operation's trials found."""
    name: str
    wanted: int = 0  # kills asked for
    clean_seconds: float = 0.0
    commit_window: float = 0.0
    trials: int = 0
    kills: int = 0
    kills_in_commit: int = 0
    aimed_at_commit: int = 0
    lost: int = 0
    accepted_partial: int = 0
    unrecovered: int = 0
    seconds: float = 0.0
    self_check: str = ""  # the output file the checks were shown to notice a flipped byte in
    examples: list = field(default_factory=list)  # the first few problems, with the trial's kill


def _reference(op, root, runs):
    """Runs op cleanly `runs` times; the first run's outputs become op's reference. Returns that
    run's directory and result, the mean duration and the first run's staging-name lifetimes."""
    durations = []
    for i in range(runs):
        trial = os.path.join(root, f"clean{i}")
        os.makedirs(trial)
        op.prepare(trial)
        done, watch = process.run_watching(op.reference_argv(trial), trial, os.path.join(trial, "run.log"),
                                           op.watch_dirs(trial))
        if done.returncode != 0:
            raise RuntimeError(f"{op.name}: the clean run failed ({done.returncode}):\n{done.output[-2000:]}")
        if i == 0:
            op.learn(trial)
            first, first_done, lifetimes = trial, done, watch.lifetimes
        durations.append(done.seconds)
    return first, first_done, statistics.mean(durations), lifetimes


def _self_check(op, clean, clean_done, root):
    """The checks can fail: a copy of the clean run's outputs with one byte flipped in the largest
    output file must be flagged (lost or partial accepted). Raises otherwise."""
    damaged = os.path.join(root, "damaged")
    shutil.copytree(clean, damaged)
    files = [os.path.join(parent, name) for parent, _, names in os.walk(os.path.join(damaged, op.output_dir))
             for name in names]
    target = max(files, key=lambda path: (os.path.getsize(path), os.path.getmtime(path)))
    with open(target, "r+b") as f:
        f.seek(os.path.getsize(target) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x10]))
    verdict = op.check(damaged, clean_done)
    if not (verdict.lost or verdict.accepted_partial or verdict.unrecovered):
        raise RuntimeError(f"{op.name}: the checks did not notice a flipped byte in {target}")
    shutil.rmtree(damaged)
    return os.path.relpath(target, damaged)


def run_operation(op, root, kills_wanted, commit_fraction, rng, deadline, keep_failures):
    """Trials of `op` under `root` until `kills_wanted` SIGKILLs landed or `deadline` (monotonic)
    passed. A trial is aimed at the commit window with probability `commit_fraction`, else killed
    at a time uniform over the clean duration."""
    started = time.monotonic()
    tally = Tally(op.name, wanted=kills_wanted)
    clean, clean_done, tally.clean_seconds, lifetimes = _reference(op, os.path.join(root, "reference"), 2)
    tally.commit_window = max(lifetimes, default=0.0)
    tally.self_check = _self_check(op, clean, clean_done, root)
    while tally.kills < kills_wanted and time.monotonic() < deadline:
        trial = os.path.join(root, f"trial{tally.trials}")
        os.makedirs(trial)
        op.prepare(trial)
        log = os.path.join(trial, "run.log")
        aimed = bool(lifetimes) and rng.random() < (commit_fraction if op.commit_fraction is None else op.commit_fraction)
        if aimed:  # a delay within the k-th staging name's lifetime in the clean run
            k = rng.randint(1, len(lifetimes))
            done, _ = process.run_watching(op.argv(trial), trial, log, op.watch_dirs(trial), k, rng,
                                           lifetimes[k - 1])
            how = f"at staging appearance {k} + up to {lifetimes[k - 1] * 1e3:.1f} ms"
        else:
            delay = rng.uniform(0.0, tally.clean_seconds)
            done = process.run_killed_at(op.argv(trial), trial, log, delay)
            how = f"at {delay * 1e3:.1f} ms"
        if not done.killed and done.returncode != 0:
            raise RuntimeError(f"{op.name}: trial {tally.trials} failed on its own ({done.returncode}):\n"
                               f"{done.output[-2000:]}")
        verdict = op.check(trial, done)
        tally.trials += 1
        tally.kills += done.killed
        tally.aimed_at_commit += done.killed and aimed
        tally.kills_in_commit += done.killed and verdict.in_commit
        tally.lost += bool(verdict.lost)
        tally.accepted_partial += bool(verdict.accepted_partial)
        tally.unrecovered += bool(verdict.unrecovered)
        problems = verdict.lost + verdict.accepted_partial + verdict.unrecovered
        if problems and len(tally.examples) < 5:
            tally.examples.append(f"trial {tally.trials - 1} (killed {how}): " + " | ".join(problems))
        if not (problems and keep_failures):
            shutil.rmtree(trial)
    tally.seconds = time.monotonic() - started
    return tally
