"""A reference fixture directory built once per stamp, for the fixture scripts the C++ tests run
(tests/support/python.h: python_fixture_dir runs `script --out DIR`).

    sys.path.insert(0, <path to tests/support>)
    import fixture_dir
    fixture_dir.build_once(out, stamp_text, lambda out: write_everything(out))
"""

import fcntl
import os
import shutil


def build_once(out, stamp, build):
    """Makes the directory `out` with build(out) unless out/STAMP already holds `stamp`.

    Concurrent callers (test binaries run in parallel) wait on the lock file out + ".lock"; the
    first builds, the others find the stamp. `out` is emptied before build(out) runs, and STAMP is
    written after it returns, so a build that failed is redone on the next call.
    """
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp_path = os.path.join(out, "STAMP")
        if os.path.exists(stamp_path):
            with open(stamp_path) as f:
                if f.read() == stamp:
                    return
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        build(out)
        with open(stamp_path, "w") as f:
            f.write(stamp)
