#!/usr/bin/env python3
"""Evicts files from the page cache so that the next reader starts cold, and says how it did it.

    page_cache.py evict [--method auto|fadvise] PATH...   every regular file under the PATHs out of the page cache
    page_cache.py resident PATH...   how much of them is in the page cache now

evict: first `sync; echo 3 > /proc/sys/vm/drop_caches` (the whole cache; needs root and a writable
/proc/sys, which containers often refuse; skipped with --method fadvise, e.g. on a machine shared
with others), else per file fdatasync + posix_fadvise(POSIX_FADV_DONTNEED)
(drops the file's clean pages; dirty ones are written first so that they can go too). Then it measures
what is still resident with mincore() and prints one line:

    # page cache: drop_caches|fadvise, 16.21 GB in 9 files, 0.00 GB (0.0 %) resident after

The method is also the only word on stdout's last line with `--print-method` (for a table's header).
A hypervisor's own cache below a virtual disk is out of reach of both methods.
Standard library only (ctypes for mmap/mincore).
"""
import argparse
import ctypes
import ctypes.util
import mmap
import os
import sys

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
_MAP_FAILED = ctypes.c_void_p(-1).value


def files_under(paths):
    """Every regular file under `paths` (files or folders), sorted."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
        elif os.path.isdir(path):
            for root, _, names in os.walk(path):
                found.extend(os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n)))
        else:
            sys.exit(f"page_cache: {path}: no such file or folder")
    return sorted(found)


def resident_bytes(path):
    """Bytes of `path` in the page cache (mincore over a read-only mapping of the whole file)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(address, size, vector) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return min(size, sum(v & 1 for v in vector) * page)
        finally:
            _libc.munmap(address, size)
    finally:
        os.close(fd)


def drop_all_caches():
    """`sync; echo 3 > /proc/sys/vm/drop_caches`; False where the kernel or the container refuses."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def fadvise_dontneed(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["evict", "resident"])
    p.add_argument("paths", nargs="+")
    p.add_argument("--method", choices=["auto", "fadvise"], default="auto",
                   help="auto: drop_caches where permitted, else fadvise (default); fadvise: only these files")
    p.add_argument("--print-method", action="store_true", help="print the method alone on the last line")
    a = p.parse_args()
    files = files_under(a.paths)
    method = "-"
    if a.action == "evict":
        method = "drop_caches" if a.method == "auto" and drop_all_caches() else "fadvise"
        if method == "fadvise":
            for path in files:
                fadvise_dontneed(path)
    total = sum(os.path.getsize(f) for f in files)
    resident = sum(resident_bytes(f) for f in files)
    share = 100.0 * resident / total if total else 0.0
    when = "after" if a.action == "evict" else "now"
    print(f"# page cache: {method}, {total / 1e9:.2f} GB in {len(files)} files, "
          f"{resident / 1e9:.2f} GB ({share:.1f} %) resident {when}", file=sys.stderr)
    if a.print_method:
        print(method)


if __name__ == "__main__":
    main()
