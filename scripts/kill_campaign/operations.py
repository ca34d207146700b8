"""The operations killed, each with what a clean run leaves and what a killed one may leave.

Every operation is prepared in a fresh trial directory, run (and killed) there, then checked:
  lost              state that existed before the command (or was reported durable by it) no longer
                    verifies or loads: `latest` gone or behind a reported save, `checkpoint verify`
                    failing, `train --resume` failing, an input checkpoint changed
  accepted_partial  an output that looks complete (a published directory, `latest`, a model file a
                    loader follows) but is not byte for byte what a clean run wrote
  unrecovered       re-running the same command (what a job scheduler does) failed, or did not end
                    with exactly the clean run's files (no leftovers, same bytes)
  in_commit         the kill fell inside a commit: a staging name (*.partial, *.staging) was left,
                    or a tag was published that `latest` does not name yet
"""
import os
import re
from dataclasses import dataclass, field

from . import process, trees

TAG = re.compile(r"global_step(\d+)")
SAVED_LINE = re.compile(r"^\s*saved .*/global_step(\d+)(?: \(.*\))?\s*$", re.M)  # (note): a save that overlapped
DONE_LINE = re.compile(r"^done: ", re.M)
MODEL_FILES = ("model.safetensors", "model.safetensors.index.json")
POINTER_FILES = ("latest", "latest.xxh3")
VERIFIED_LINE = re.compile(r"^OK .*/global_step(\d+): ", re.M)


@dataclass
class Verdict:
    lost: list = field(default_factory=list)
    accepted_partial: list = field(default_factory=list)
    unrecovered: list = field(default_factory=list)
    in_commit: bool = False


def _staging_left(directory):
    try:
        return any(name.endswith(process.STAGING_SUFFIXES) for name in os.listdir(directory))
    except FileNotFoundError:
        return False


def _published_tags(directory):
    """{step: path} of every global_stepN directory in `directory`."""
    tags = {}
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return tags
    for name in names:
        match = TAG.fullmatch(name)
        if match and os.path.isdir(os.path.join(directory, name)):
            tags[int(match.group(1))] = os.path.join(directory, name)
    return tags


def _check_published_tags(directory, reference_tags, verdict):
    """Every published tag must be the clean run's tag of that step, byte for byte."""
    for step, path in sorted(_published_tags(directory).items()):
        if step not in reference_tags:
            verdict.accepted_partial.append(f"global_step{step} was published but the clean run has no such step")
            continue
        diff = trees.difference(trees.snapshot(path), reference_tags[step])
        if diff:
            verdict.accepted_partial.append(f"global_step{step}: {diff}")


def _files_beside_tags(snapshot):
    """The files of a checkpoint directory outside its tags and pointers: the 16-bit model."""
    return {name: digest for name, digest in snapshot.items()
            if "/" not in name and not name.startswith("latest") and not name.endswith(".partial")}


def _rerun(argv, trial, expected_root, expected, verdict):
    """Runs argv again to completion; records in `verdict` when it fails or `expected_root` then
    differs from the `expected` snapshot."""
    again = process.run(argv, trial, os.path.join(trial, "rerun.log"))
    if again.returncode != 0:
        verdict.unrecovered.append(f"re-running the command failed: {again.output.strip()[-300:]}")
        return
    diff = trees.difference(trees.snapshot(expected_root), expected)
    if diff:
        verdict.unrecovered.append(f"after re-running, {expected_root}: {diff}")


def _pointer_present(directory):
    """True when DIR has `latest` or latest.xxh3: what makes a checkpoint directory look complete."""
    return any(os.path.exists(os.path.join(directory, name)) for name in POINTER_FILES)


def _pointer_lags(directory, step):
    """True when DIR/latest does not (yet) hold the tag latest.xxh3 made readers follow."""
    return trees.read_text(os.path.join(directory, "latest")) != f"global_step{step}"


def _latest_step(binary, directory, problems):
    """The step of the checkpoint tierzero reads from DIR (`latest`, checked against latest.xxh3),
    when it is a published tag and `checkpoint verify` passes; else appends to `problems`."""
    ok, output = trees.verify(binary, directory)
    match = VERIFIED_LINE.search(output)
    if not ok or not match:
        problems.append("checkpoint verify: " + output.strip()[-300:])
        return None
    return int(match.group(1))


class TrainWithSaves:
    """`tierzero train --resume CK --save CK` from a 2-step checkpoint: periodic saves (and the save
    at the end), optionally gathering the 16-bit model beside `latest` on every save."""

    def __init__(self, name, ws, config, base, steps, save_every=0, keep_last=0, gathers_16bit=False,
                 commit_fraction=None):
        self.name, self.ws, self.config, self.base = name, ws, config, base
        self.steps, self.save_every, self.keep_last, self.gathers_16bit = steps, save_every, keep_last, gathers_16bit
        # Share of trials aimed at a staging name's lifetime (None: the campaign's --commit-fraction).
        # With an offloaded optimizer a periodic save's GLOBAL_STEP.partial lives while the save streams
        # out beside the next step: 1.0 kills every trial during a save in flight (or its commit).
        self.commit_fraction = commit_fraction
        self.base_step = 2
        self.output_dir = "ck"
        self.starts_torch = True
        self.reference_tags = {}    # step -> snapshot of the clean run's global_stepN
        self.reference_models = {}  # step -> snapshot of {model.safetensors, config.json} at that step
        self.reference_final = {}   # snapshot of CK after an uninterrupted run (older tags rotated away)

    def prepare(self, trial):
        trees.copy_tree(self.base, os.path.join(trial, "ck"))

    def _save_args(self, keep_last):
        args = ["--steps", str(self.steps)]
        if self.save_every:
            args += ["--save-every", str(self.save_every)]
        if keep_last:
            args += ["--keep-last", str(keep_last)]
        return args

    def argv(self, trial):
        ck = os.path.join(trial, "ck")
        return self.ws.train_argv(self.config, "--resume", ck, "--save", ck, *self._save_args(self.keep_last))

    def reference_argv(self, trial):
        ck = os.path.join(trial, "ck")  # every checkpoint kept: one reference per step
        return self.ws.train_argv(self.config, "--resume", ck, "--save", ck, *self._save_args(0))

    def watch_dirs(self, trial):
        return [os.path.join(trial, "ck")]

    def learn(self, reference):
        ck = os.path.join(reference, "ck")
        self.reference_tags = {step: trees.snapshot(path) for step, path in _published_tags(ck).items()}
        kept = sorted(self.reference_tags)[-self.keep_last:] if self.keep_last else list(self.reference_tags)
        rotated = {f"global_step{step}" for step in self.reference_tags if step not in kept}
        self.reference_final = {name: digest for name, digest in trees.snapshot(ck).items()
                                if name.split("/")[0] not in rotated}
        if not self.gathers_16bit:
            return
        for step in self.reference_tags:
            out = os.path.join(reference, f"model_step{step}")
            code, output = trees.tierzero(self.ws.tierzero, "convert", ck, out, "--tag", f"global_step{step}",
                                          "--dtype", "fp32", "--no-progress")
            if code != 0:
                raise RuntimeError(f"reference conversion of global_step{step} failed:\n{output}")
            self.reference_models[step] = trees.snapshot(out)
        if _files_beside_tags(trees.snapshot(ck)) != self.reference_models[self.steps]:
            raise RuntimeError("the clean run's 16-bit model is not the conversion of its last checkpoint")

    def _durable_step(self, output):
        """The newest step the killed run reported saved (the base step when none)."""
        steps = [int(s) for s in SAVED_LINE.findall(output)] + [self.base_step]
        if DONE_LINE.search(output):
            steps.append(self.steps)
        return max(steps)

    def _check_16bit_model(self, ck, latest_step, verdict):
        """The model beside `latest` is a clean save's: of latest's step or the save before it."""
        found = _files_beside_tags(trees.snapshot(ck))
        if not any(name in found for name in MODEL_FILES):
            verdict.lost.append("the 16-bit model beside latest is gone")
            return
        candidates = [latest_step, max(self.base_step, latest_step - self.save_every)]
        if not any(found == self.reference_models.get(step) for step in candidates):
            diff = trees.difference(found, self.reference_models.get(latest_step, {}))
            verdict.accepted_partial.append(f"16-bit model beside latest (global_step{latest_step}): {diff}")

    def check(self, trial, finished):
        ck = os.path.join(trial, "ck")
        verdict = Verdict()
        _check_published_tags(ck, self.reference_tags, verdict)
        latest = _latest_step(self.ws.tierzero, ck, verdict.lost)
        published = _published_tags(ck)
        verdict.in_commit = _staging_left(ck) or (latest is not None and
                                                  (max(published) > latest or _pointer_lags(ck, latest)))
        if latest is None:
            return verdict
        durable = self._durable_step(finished.output)
        if latest < durable:
            verdict.lost.append(f"latest is global_step{latest} but global_step{durable} was reported saved")
        if self.gathers_16bit:
            self._check_16bit_model(ck, latest, verdict)
        # The load: the same command again resumes from `latest` and must end where the clean run did.
        _rerun(self.argv(trial), trial, ck, self.reference_final, verdict)
        return verdict


class WritesNewDirectory:
    """A command that publishes one new directory OUT (convert, --export, reshard) from an input it
    must not change. OUT may be absent after a kill; present, it must be the clean run's."""

    def __init__(self, name, ws, source, make_argv, pointer=False, starts_torch=False):
        self.name, self.ws, self.source, self.make_argv, self.pointer = name, ws, source, make_argv, pointer
        self.output_dir = "out"
        self.starts_torch = starts_torch
        self.commit_fraction = None  # the campaign's
        self.source_snapshot = trees.snapshot(source)
        self.reference = {}
        self.reference_tags = {}

    def prepare(self, trial):
        pass

    def argv(self, trial):
        return self.make_argv(os.path.join(trial, "out"))

    reference_argv = argv

    def watch_dirs(self, trial):
        return [trial, os.path.join(trial, "out")]

    def learn(self, reference):
        out = os.path.join(reference, "out")
        self.reference = trees.snapshot(out)
        self.reference_tags = {step: trees.snapshot(path) for step, path in _published_tags(out).items()}

    def check(self, trial, finished):
        out = os.path.join(trial, "out")
        verdict = Verdict()
        if trees.snapshot(self.source) != self.source_snapshot:
            verdict.lost.append(f"the input {self.source} changed")
        if self.pointer:  # a checkpoint: OUT/TAG published, then OUT/latest.xxh3, then OUT/latest
            _check_published_tags(out, self.reference_tags, verdict)
            complete = _pointer_present(out)
            step = _latest_step(self.ws.tierzero, out, verdict.accepted_partial) if complete else None
            verdict.in_commit = (_staging_left(out) or (bool(_published_tags(out)) and not complete) or
                                 (step is not None and _pointer_lags(out, step)))
        else:  # a model directory: OUT appears in one rename, complete
            complete = os.path.exists(out)
            if complete:
                diff = trees.difference(trees.snapshot(out), self.reference)
                if diff:
                    verdict.accepted_partial.append(f"{out}: {diff}")
            verdict.in_commit = _staging_left(trial)
        if not complete:  # the same command again must finish the job and leave no staging behind
            _rerun(self.argv(trial), trial, out, self.reference, verdict)
            if _staging_left(trial):
                verdict.unrecovered.append("a staging directory is left beside " + out)
        return verdict


def all_operations(ws):
    """The campaign's operations, in the order they run."""
    tz = ws.tierzero
    return [
        TrainWithSaves("train --save-every 2 --keep-last 2", ws, ws.tiny_config, ws.base, steps=10, save_every=2,
                       keep_last=2),
        TrainWithSaves("train --save (at the end)", ws, ws.tiny_config, ws.base, steps=4),
        TrainWithSaves("train --save-every 1, saves in flight (host)", ws, ws.overlap_config, ws.base_overlap,
                       steps=6, save_every=1, keep_last=2, commit_fraction=1.0),
        TrainWithSaves("train --save-every 1, saves in flight (nvme)", ws, ws.overlap_nvme_config,
                       ws.base_overlap_nvme, steps=6, save_every=1, keep_last=2, commit_fraction=1.0),
        # Write-behind (tierzero.checkpoint.write_behind "auto", the default) with steps shorter than a save's
        # write: its reads end with the step after it, the write drains over the next ones (the saved lines
        # say "written during steps k+1 to j"), committed at the end of the step it ended in.
        TrainWithSaves("train --save-every 3, write-behind saves in flight over several steps (host)", ws,
                       ws.overlap_fast_config, ws.base_overlap_fast, steps=12, save_every=3, keep_last=2,
                       commit_fraction=1.0),
        TrainWithSaves("train, save_16bit_model", ws, ws.zero3_config, ws.base_zero3, steps=8, save_every=2,
                       keep_last=2, gathers_16bit=True),
        WritesNewDirectory("train --export", ws, ws.base,
                           lambda out: ws.train_argv(ws.tiny_config, "--resume", ws.base, "--steps", "4", "--export",
                                                     out), starts_torch=True),
        WritesNewDirectory("convert engine", ws, ws.base,
                           lambda out: [tz, "convert", ws.base, out, "--dtype", "fp32", "--max-shard-size", "1MB",
                                        "--no-progress"]),
        WritesNewDirectory("convert deepspeed", ws, ws.deepspeed,
                           lambda out: [tz, "convert", ws.deepspeed, out, "--dtype", "fp32", "--max-shard-size",
                                        "12KB", "--no-progress"]),
        WritesNewDirectory("checkpoint reshard", ws, ws.base,
                           lambda out: [tz, "checkpoint", "reshard", ws.base, out, "--world-size", "2"], pointer=True),
    ]
