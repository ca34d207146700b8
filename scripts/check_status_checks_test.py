#!/usr/bin/env python3
"""Tests scripts/check_status_checks.py on a small git tree built here: the matchers and checks of
plain booleans pass; each form of bare ok() check fails, named by file and line.

Usage: scripts/check_status_checks_test.py   (exits 0 when every case behaves, 1 otherwise)
"""

import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parent / "check_status_checks.py"

GOOD = """TEST(A, B) {
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


def run_checker(files):
    """Writes `files` (path -> text) as a fresh git tree; returns (exit code, output)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        result = subprocess.run([sys.executable, str(CHECKER), "--repo", str(root)], capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr


def main():
    failures = []
    code, out = run_checker({"tests/a/good_test.cpp": GOOD, "engine/x.cpp": BAD})
    if code != 0 or "FAIL" in out:
        failures.append(f"matchers, plain booleans and files outside tests/ should pass, got exit {code}:\n{out}")
    code, out = run_checker({"tests/a/good_test.cpp": GOOD, "fuzz/bad.cpp": BAD})
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    expected = [f"FAIL fuzz/bad.cpp:{n}:" for n in BAD_LINES]
    if code != 1 or [f.split(" ", 2)[0] + " " + f.split(" ", 2)[1] for f in fails] != expected:
        failures.append(f"expected exit 1 and {expected}, got exit {code}:\n{out}")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"# check_status_checks_test: {2 - len(failures)}/2 cases behave")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
