"""File trees as {relative path: SHA-256}, and the tierzero commands that check a checkpoint."""
import hashlib
import os
import shutil
import subprocess


def snapshot(root):
    """Every regular file under `root` (relative path -> SHA-256 of its bytes); {} when absent."""
    result = {}
    for parent, _, files in os.walk(root):
        for name in files:
            path = os.path.join(parent, name)
            with open(path, "rb") as f:
                result[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return result


def difference(found, expected):
    """'' when two snapshots are equal, else a short description of the first differences."""
    missing = sorted(expected.keys() - found.keys())
    extra = sorted(found.keys() - expected.keys())
    changed = sorted(k for k in found.keys() & expected.keys() if found[k] != expected[k])
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing[:3]))
    if extra:
        parts.append("unexpected " + ", ".join(extra[:3]))
    if changed:
        parts.append("bytes differ in " + ", ".join(changed[:3]))
    return "; ".join(parts)


def copy_tree(source, destination):
    shutil.copytree(source, destination, symlinks=False)


def read_text(path):
    """The file's first line without its newline, or None when the file is absent."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.readline().rstrip("\n")
    except FileNotFoundError:
        return None


def tierzero(binary, *args, cwd=None):
    """Runs `tierzero ARGS...`; returns (exit status, output)."""
    done = subprocess.run([binary, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, timeout=600)
    return done.returncode, done.stdout.decode("utf-8", "replace")


def verify(binary, checkpoint_dir, tag=None):
    """`tierzero checkpoint verify DIR [--tag TAG]`: (ok, output)."""
    args = ["checkpoint", "verify", checkpoint_dir] + (["--tag", tag] if tag else [])
    code, output = tierzero(binary, *args)
    return code == 0, output
