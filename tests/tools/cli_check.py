"""Shared by the tests/tools scripts: the repository root, the --tierzero argument, running a
command, and failing with its output."""
import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tierzero_from_args(doc):
    """The --tierzero PATH argument of a test script documented by `doc`."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--tierzero", required=True)
    return p.parse_args().tierzero


def run(*args, timeout=600):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def fail(message, result=None):
    """Exits with FAIL: `message`, and the command's output when there is one."""
    detail = f"\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}" if result is not None else ""
    sys.exit(f"FAIL: {message}{detail}")
