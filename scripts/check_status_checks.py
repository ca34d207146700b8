#!/usr/bin/env python3
"""Fails on bare ok() checks in the tests: EXPECT_TRUE(x.ok()), ASSERT_FALSE(f().ok()) and the like.

Usage: scripts/check_status_checks.py [--repo DIR]

A bare check prints "Value of: x.ok() Actual: false" and nothing of the error. tests/support/
status_matchers.h has the checks that print it: EXPECT_OK / ASSERT_OK (a Status or Result<T> that
must be ok), ASSERT_OK_AND_ASSIGN, and EXPECT_ERROR / ASSERT_ERROR (the expected code and a fragment
of the message). Looks at every C++ file git lists under tests/ and fuzz/ (tracked, plus untracked
ones it does not ignore); prints each bare check as file:line and exits 1 when there is one.
"""

import argparse
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from tree_files import list_tree_files  # noqa: E402

SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu"}
ROOTS = ("tests", "fuzz")
# A gtest boolean check and its argument, with up to three levels of nested parentheses.
NESTED = r"(?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*"
BOOLEAN_CHECK = re.compile(r"\b(?:EXPECT|ASSERT)_(?:TRUE|FALSE)\s*\((" + NESTED + r")\)")
ENDS_IN_OK = re.compile(r"\.ok\(\)\s*$")


def list_files(repo):
    """The repo-relative C++ files under tests/ and fuzz/ (scripts/tree_files.py: git's list, or the folders without git)."""
    try:
        paths = list_tree_files(repo, ROOTS)
    except (OSError, subprocess.CalledProcessError) as err:
        sys.exit(f"check_status_checks: cannot list the files of {repo} with git ({err})")
    return [p for p in paths if p.suffix in SUFFIXES]


def bare_checks(text):
    """(line, check) for each EXPECT/ASSERT_TRUE/FALSE whose argument ends in .ok()."""
    found = []
    for match in BOOLEAN_CHECK.finditer(text):
        if ENDS_IN_OK.search(match.group(1)):
            found.append((text.count("\n", 0, match.start()) + 1, " ".join(match.group(0).split())))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path,
                        help="the checkout to check (default: the one holding this script)")
    args = parser.parse_args()
    files = list_files(args.repo)
    count = 0
    for path in files:
        for line, check in bare_checks((args.repo / path).read_text(encoding="utf-8", errors="replace")):
            print(f"FAIL {path}:{line}: {check} (use EXPECT_OK / ASSERT_OK, or EXPECT_ERROR with the code and a "
                  f"fragment of the message: tests/support/status_matchers.h)")
            count += 1
    print(f"# check_status_checks: {len(files)} test files, {count} bare ok() checks")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
