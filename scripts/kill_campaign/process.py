"""Running one command to completion, or SIGKILLing it at a chosen instant.

A kill is aimed one of two ways: at a time drawn uniformly over the command's clean duration, or
at the commit window: a watcher polls the directories the command stages into and kills a random
delay after the k-th staging name (NAME.partial, NAME.staging, or a rotated-away NAME.removing)
appears.
"""
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field

STAGING_SUFFIXES = (".partial", ".staging")               # a commit in progress
WATCHED_SUFFIXES = STAGING_SUFFIXES + (".removing",)    # ... or an old checkpoint being rotated away


@dataclass
class Finished:
    """What one command left: exit status (-9 when killed), its output, seconds it ran."""
    returncode: int
    output: str
    seconds: float

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def _spawn(argv, cwd, log_path):
    log = open(log_path, "wb")
    process = subprocess.Popen(argv, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    return process, log


def _reap(process, log, log_path, started) -> Finished:
    process.wait()
    seconds = time.monotonic() - started
    log.close()
    with open(log_path, "rb") as f:
        output = f.read().decode("utf-8", "replace")
    return Finished(process.returncode, output, seconds)


def _kill(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it exited (and was reaped by no one yet: the group is gone); wait() reports its status


def run(argv, cwd, log_path, timeout=600) -> Finished:
    """Runs argv to completion (killed after `timeout` seconds: then returncode is -9)."""
    started = time.monotonic()
    process, log = _spawn(argv, cwd, log_path)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
    return _reap(process, log, log_path, started)


def run_killed_at(argv, cwd, log_path, delay) -> Finished:
    """Runs argv and SIGKILLs its process group `delay` seconds after the start (unless it ended)."""
    started = time.monotonic()
    process, log = _spawn(argv, cwd, log_path)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        _kill(process)
    return _reap(process, log, log_path, started)


def _staging_names(dirs):
    names = set()
    for d in dirs:
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        names.update(os.path.join(d, e) for e in entries if e.endswith(WATCHED_SUFFIXES))
    return names


@dataclass
class StagingWatch:
    """Staging names seen while a command ran: lifetimes[i] is how long the i-th one to appear
    stayed (seconds; until the command ended for one still present)."""
    lifetimes: list = field(default_factory=list)

    @property
    def appearances(self):
        return len(self.lifetimes)


def run_watching(argv, cwd, log_path, dirs, kill_at_appearance=0, rng=None, window=0.0, timeout=600):
    """Runs argv while polling `dirs` for staging names. With kill_at_appearance = k > 0, SIGKILLs
    the process group a delay drawn uniformly from [0, window] seconds after the k-th appearance of
    a staging name. Returns (Finished, StagingWatch)."""
    started = time.monotonic()
    process, log = _spawn(argv, cwd, log_path)
    watch = StagingWatch()
    present = {}  # name -> (when it appeared, its index in watch.lifetimes)
    kill_deadline = None
    while process.poll() is None:
        now = time.monotonic()
        if now - started > timeout or (kill_deadline is not None and now >= kill_deadline):
            _kill(process)
            break
        names = _staging_names(dirs)
        for name in names - present.keys():
            present[name] = (now, len(watch.lifetimes))
            watch.lifetimes.append(0.0)
            if kill_deadline is None and watch.appearances == kill_at_appearance:
                kill_deadline = now + rng.uniform(0.0, window)
        for name in present.keys() - names:
            appeared, index = present.pop(name)
            watch.lifetimes[index] = now - appeared
        if kill_deadline is not None and kill_deadline <= now:
            _kill(process)
            break
        time.sleep(0.0002)
    ended = time.monotonic()
    for appeared, index in present.values():
        watch.lifetimes[index] = ended - appeared
    return _reap(process, log, log_path, started), watch
