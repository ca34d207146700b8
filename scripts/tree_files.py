"""The files of a source tree that the tree checks look at, with or without git.

In a git checkout: what git lists (tracked, plus untracked files it does not ignore). In a copy of
the tree without .git (the GPU box gets the working tree, not the repository): every file under the
tree except hidden folders (.git, .debs, .device, ...) and build folders (build*/), the same folders
.gitignore keeps out of git.
"""

import pathlib
import subprocess


def _walk(repo, roots):
    files = []
    for root in roots:
        base = repo / root
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            rel = path.relative_to(repo)
            if any(part.startswith(".") or part.startswith("build") or part == "__pycache__" for part in rel.parts[:-1]):
                continue
            if path.is_file():
                files.append(pathlib.PurePosixPath(rel.as_posix()))
    return files


def list_tree_files(repo, roots=(".",)):
    """Returns the repo-relative paths (sorted, existing on disk) under `roots` of `repo`.

    Uses `git ls-files` where `repo` is a git checkout, else walks the folders (see the module note).
    Raises OSError / subprocess.CalledProcessError when git is there but fails.
    """
    repo = pathlib.Path(repo)
    if (repo / ".git").exists():
        out = subprocess.run(["git", "-C", str(repo), "ls-files", "--cached", "--others", "--exclude-standard", "--",
                              *roots], check=True, capture_output=True, text=True).stdout
        paths = {pathlib.PurePosixPath(line) for line in out.splitlines() if line}
    else:
        paths = set(_walk(repo, roots))
    return sorted(p for p in paths if (repo / p).is_file())
