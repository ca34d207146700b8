#!/usr/bin/env python3
"""Checks the component layout of the tree: one public header per component, private headers kept private.

Usage: scripts/check_layout.py [--repo DIR] [--list]

The rules (README.md, "Layout"):
  * A component is a folder that directly holds C++ or CUDA sources, outside tests/, fuzz/, tools/ and
    benchmarks/. Its internal/ and testing/ sub-folders belong to it (nvme/internal/piece.h is nvme's).
  * A component has exactly one public header: one header directly in its folder. A Highway per-target
    header beside it, named after it with -inl (common/common-inl.h beside common/common.h), is part of it:
    Highway's convention for SIMD code that other components compile once per target.
  * A component's internal/ headers are included only by the component itself, by the tests of that
    component (tests/X/ for component X or any component below X: tests/checkpoint/ tests every part of
    checkpoint/), and by fuzz/ (each harness drives the private reader it fuzzes).
  * A component's testing/ headers (test-only hooks and doubles) are included only by the component
    itself (it implements them), by tests/ and by fuzz/; never by library or tool code elsewhere.

The files are those git lists in DIR (tracked, plus untracked ones it does not ignore, so a header is
checked before its first commit); in a copy without .git, every file outside hidden and build folders. Prints every component with its public header and every breach, and
exits 1 when there is a breach, 0 otherwise. --list also prints the public headers when all is well.
"""

import argparse
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tree_files import list_tree_files  # noqa: E402

SOURCE_SUFFIXES = {".h", ".hpp", ".cuh", ".cpp", ".cc", ".c", ".cu"}
HEADER_SUFFIXES = {".h", ".hpp", ".cuh"}
NOT_COMPONENTS = {"tests", "fuzz", "tools", "benchmarks"}  # test code, the CLI program, benchmark drivers
PRIVATE_FOLDERS = ("internal", "testing")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def list_sources(repo):
    """The repo-relative C++/CUDA sources of `repo` (scripts/tree_files.py: git's list, or the folders without git)."""
    try:
        paths = list_tree_files(repo, (".",))
    except (OSError, subprocess.CalledProcessError) as err:
        sys.exit(f"check_layout: cannot list the files of {repo} with git ({err})")
    return [p for p in paths if p.suffix in SOURCE_SUFFIXES]


def owner_of(folder):
    """The component a folder belongs to: the folder itself, or the one above its internal/ or testing/."""
    parts = folder.parts
    for i, part in enumerate(parts):
        if part in PRIVATE_FOLDERS:
            return pathlib.PurePosixPath(*parts[:i])
    return folder


def private_kind(path):
    """'internal' or 'testing' when `path` lies in such a folder, else None."""
    return next((part for part in path.parts if part in PRIVATE_FOLDERS), None)


def is_component_folder(folder):
    return len(folder.parts) > 0 and folder.parts[0] not in NOT_COMPONENTS


def public_headers(sources):
    """Maps each component folder to its public headers (a Highway -inl.h beside its twin left out)."""
    components = {}
    for path in sources:
        folder = owner_of(path.parent)
        if is_component_folder(folder):
            components.setdefault(folder, [])
    for path in sources:
        if path.suffix in HEADER_SUFFIXES and path.parent in components:
            components[path.parent].append(path)
    for folder, headers in components.items():
        names = {h.name for h in headers}
        components[folder] = [h for h in headers if not (h.stem.endswith("-inl") and h.stem[:-4] + h.suffix in names)]
    return components


def is_within(folder, root):
    return folder == root or root in folder.parents


def include_allowed(includer, kind, owner):
    """Whether the file `includer` may include a `kind` ('internal' or 'testing') header of component `owner`."""
    top = includer.parts[0]
    if owner_of(includer.parent) == owner:
        return True
    if top == "fuzz":
        return True
    if top == "tests":
        if kind == "testing":
            return True
        tested = pathlib.PurePosixPath(*includer.parent.parts[1:])
        return len(tested.parts) > 0 and is_within(owner, tested)
    return False


def include_breaches(repo, sources):
    """Lists 'file:line: includes X (why)' for each include of a private header the rules forbid."""
    breaches = []
    for path in sources:
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            match = INCLUDE.match(line)
            if not match:
                continue
            included = pathlib.PurePosixPath(match.group(1))
            kind = private_kind(included.parent)
            if kind is None:
                continue
            owner = owner_of(included.parent)
            if include_allowed(path, kind, owner):
                continue
            if kind == "internal":
                why = f"a private header of {owner}/: use {owner}'s public header, or move what you need into it"
            else:
                why = f"a test-only header of {owner}/: only {owner}/ itself, tests/ and fuzz/ may include it"
            breaches.append(f"{path}:{number}: includes {included} ({why})")
    return breaches


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path,
                        help="the checkout to check (default: the one holding this script)")
    parser.add_argument("--list", action="store_true", help="print every component's public header")
    args = parser.parse_args()

    sources = list_sources(args.repo)
    components = public_headers(sources)
    header_breaches = []
    for folder, headers in sorted(components.items()):
        if len(headers) != 1:
            found = ", ".join(str(h) for h in headers) or "none"
            header_breaches.append(f"{folder}/: {len(headers)} public headers ({found}); keep one and move the "
                                   f"others into {folder}/internal/ (private) or {folder}/testing/ (test-only)")
    breaches = header_breaches + include_breaches(args.repo, sources)

    print(f"# check_layout: {len(components)} components, {len(sources)} sources in {args.repo}")
    if args.list or breaches:
        print(f"{'component':<30} public header")
        for folder, headers in sorted(components.items()):
            print(f"{str(folder) + '/':<30} {', '.join(str(h) for h in headers) or '-'}")
    for breach in breaches:
        print(f"FAIL {breach}")
    print(f"# {'FAIL' if breaches else 'OK'}: {len(header_breaches)} components without exactly one public header, "
          f"{len(breaches) - len(header_breaches)} includes of another component's private header")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
