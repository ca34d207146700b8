#!/usr/bin/env python3
"""Tests scripts/check_layout.py on small git trees built here: one that keeps every rule passes, and each
kind of breach (two public headers, no public header, another component's internal/ header, a testing/
header in library code, a test of one component reaching into another's internal/) fails naming the file.

Usage: scripts/check_layout_test.py   (exits 0 when every case behaves, 1 otherwise)
"""

import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parent / "check_layout.py"

# A tree that keeps the rules, in the shapes the real one has: a component with private and test-only
# headers, a Highway -inl.h twin, parts below a folder that has its own header, tests and fuzz harnesses
# that reach into what they test.
GOOD_TREE = {
    "common/common.h": "",
    "common/common-inl.h": "",
    "common/internal/status.h": "",
    "common/status.cpp": '#include "common/internal/status.h"\n',
    "nvme/io_engine.h": '#include "common/common.h"\n',
    "nvme/internal/piece.h": '#include "nvme/testing/faults.h"\n',
    "nvme/testing/faults.h": '#include "nvme/internal/piece.h"\n',
    "nvme/piece.cpp": '#include "nvme/internal/piece.h"\n#include "nvme/testing/faults.h"\n',
    "store/dtype.h": "",
    "store/zip/zip.h": '#include "store/dtype.h"\n',
    "store/zip/internal/reader.h": "",
    "store/zip/zip.cpp": '#include "store/zip/internal/reader.h"\n',
    "tests/store/zip_test.cpp": '#include "store/zip/internal/reader.h"\n#include "nvme/testing/faults.h"\n',
    "tests/nvme/piece_test.cpp": '#include "nvme/internal/piece.h"\n',
    "fuzz/fuzz_zip.cpp": '#include "store/zip/internal/reader.h"\n',
    "tools/main.cpp": '#include "store/zip/zip.h"\n#include "nvme/io_engine.h"\n',
    "tools/commands.h": "",
    "tools/commands2.h": "",
}

# Each breach: the files it adds to the good tree, and what the checker's FAIL line must contain.
BREACHES = {
    "two public headers": ({"nvme/faults.h": ""}, "FAIL nvme/: 2 public headers"),
    "no public header": ({"store/zip/internal/reader2.h": "", "store/zip/zip.h": None}, "FAIL store/zip/: 0 public"),
    "another component's internal header": ({"store/zip/zip2.cpp": '#include "nvme/internal/piece.h"\n'},
                                            "FAIL store/zip/zip2.cpp:1: includes nvme/internal/piece.h"),
    "a part's internal header from a sibling part": (
        {"store/tar/tar.h": "", "store/tar/tar.cpp": '\n#include "store/zip/internal/reader.h"\n'},
        "FAIL store/tar/tar.cpp:2: includes store/zip/internal/reader.h"),
    "a testing header in library code": ({"common/units.cpp": '#include "nvme/testing/faults.h"\n'},
                                         "FAIL common/units.cpp:1: includes nvme/testing/faults.h"),
    "a testing header in a tool": ({"tools/fault.cpp": '#  include "nvme/testing/faults.h"\n'},
                                   "FAIL tools/fault.cpp:1: includes nvme/testing/faults.h"),
    "a test reaching into another component": ({"tests/store/nvme_test.cpp": '#include "nvme/internal/piece.h"\n'},
                                               "FAIL tests/store/nvme_test.cpp:1: includes nvme/internal/piece.h"),
}


def run_checker(files):
    """Writes `files` (path -> text; None leaves a path out) as a fresh git tree; returns (exit code, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        for path, text in files.items():
            if text is None:
                continue
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        result = subprocess.run([sys.executable, str(CHECKER), "--repo", str(root)], capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr


def main():
    failures = []
    code, out = run_checker(GOOD_TREE)
    if code != 0 or "FAIL" in out:
        failures.append(f"the good tree should pass, got exit {code}:\n{out}")
    for name, (added, expected) in BREACHES.items():
        code, out = run_checker({**GOOD_TREE, **added})
        fails = [line for line in out.splitlines() if line.startswith("FAIL")]
        if code != 1 or len(fails) != 1 or expected not in fails[0]:
            failures.append(f"{name}: expected exit 1 and one line with '{expected}', got exit {code}:\n{out}")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"# check_layout_test: {1 + len(BREACHES) - len(failures)}/{1 + len(BREACHES)} cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
