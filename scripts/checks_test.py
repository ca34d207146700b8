#!/usr/bin/env python3
"""Tests the tree checks on small git trees built here.

scripts/check_layout.py: a tree that keeps every rule passes, and each kind of breach (two public
headers, no public header, another component's internal/ header, a testing/ header in library code, a
test of one component reaching into another's internal/) fails naming the file.
scripts/check_status_checks.py: the status matchers and checks of plain booleans pass, and each form
of bare ok() check in tests/ or fuzz/ fails, named by file and line.

Usage: scripts/checks_test.py   (exits 0 when every case behaves, 1 otherwise)
"""

import pathlib
import subprocess
import sys
import tempfile

SCRIPTS = pathlib.Path(__file__).resolve().parent

# check_layout.py: a tree that keeps the rules, in the shapes the real one has: a component with private and test-only
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

# check_status_checks.py: test code that passes, and code with each bare check (in BAD_LINES).
STATUS_GOOD = """TEST(A, B) {
  EXPECT_OK(open(p));
  ASSERT_ERROR(parse("x"), ErrorCode::kCorrupt, "byte 4");
  EXPECT_TRUE(limit.lowered());
  EXPECT_TRUE(ok_count > 0);
}
"""

# Each bare check and the line it stands on in BAD.
BAD = """TEST(A, B) {
  EXPECT_TRUE(status.ok());
  ASSERT_FALSE(open(dir, g(x)).ok()) << dir;
  EXPECT_FALSE(
      reader->read(5, in.data()).ok());
  ASSERT_TRUE(run.summary.ok()) << run.summary.status().to_string();
}
"""
BAD_LINES = [2, 3, 4, 6]


def run_checker(checker, files):
    """Writes `files` (path -> text; None leaves a path out) as a fresh git tree and runs scripts/`checker`
    on it; returns (exit code, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        for path, text in files.items():
            if text is None:
                continue
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        result = subprocess.run([sys.executable, str(SCRIPTS / checker), "--repo", str(root)], capture_output=True,
                                text=True)
        return result.returncode, result.stdout + result.stderr


def fail_lines(out):
    return [line for line in out.splitlines() if line.startswith("FAIL")]


def layout_failures():
    failures = []
    code, out = run_checker("check_layout.py", GOOD_TREE)
    if code != 0 or "FAIL" in out:
        failures.append(f"check_layout: the good tree should pass, got exit {code}:\n{out}")
    for name, (added, expected) in BREACHES.items():
        code, out = run_checker("check_layout.py", {**GOOD_TREE, **added})
        fails = fail_lines(out)
        if code != 1 or len(fails) != 1 or expected not in fails[0]:
            failures.append(f"check_layout, {name}: expected exit 1 and one line with '{expected}', got exit "
                            f"{code}:\n{out}")
    return failures


def status_failures():
    failures = []
    code, out = run_checker("check_status_checks.py", {"tests/a/good_test.cpp": STATUS_GOOD, "engine/x.cpp": BAD})
    if code != 0 or "FAIL" in out:
        failures.append(f"check_status_checks: matchers, plain booleans and files outside tests/ should pass, got "
                        f"exit {code}:\n{out}")
    code, out = run_checker("check_status_checks.py", {"tests/a/good_test.cpp": STATUS_GOOD, "fuzz/bad.cpp": BAD})
    named = [" ".join(line.split(" ", 2)[:2]) for line in fail_lines(out)]
    expected = [f"FAIL fuzz/bad.cpp:{n}:" for n in BAD_LINES]
    if code != 1 or named != expected:
        failures.append(f"check_status_checks: expected exit 1 and {expected}, got exit {code}:\n{out}")
    return failures


def main():
    cases = 1 + len(BREACHES) + 2
    failures = layout_failures() + status_failures()
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"# checks_test: {cases - len(failures)}/{cases} cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
