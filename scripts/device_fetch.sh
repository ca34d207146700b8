#!/usr/bin/env bash
# Here (a Debian 12 machine with network): downloads into .debs/ the Debian packages that the GPU
# machine lacks (it has CUDA, PyTorch, CMake and ninja but no network), for scripts/device.sh to
# unpack there, and the Python wheels DeepSpeed needs there (.debs/wheels). Carry `.debs` with the
# device run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
build_debs=(
  liburing2 liburing-dev libaio1 libaio-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libtbb-dev
  libhwy1 libhwy-dev libzstd1 libzstd-dev libxxhash0 libxxhash-dev nlohmann-json3-dev libcli11-dev
  libfmt9 libfmt-dev googletest libgtest-dev libgmock-dev pkgconf pkgconf-bin libpkgconf3 libgloo-dev
  libpcre2-8-0 libpcre2-dev libutf8proc2 libutf8proc-dev
)
# fio and every package whose libraries it links here (from ldd), less the C/C++ runtime the GPU
# machine has newer, for `bench io --vs-fio` there.
# dpkg knows a library by the path its package installed (/lib or /usr/lib on a usrmerged system).
owner_of() {
  local path=$1 real
  real=$(readlink -f "$path")
  for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}"; do
    dpkg -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return
  done
}
mapfile -t fio_debs < <(
  { echo fio; for lib in $(ldd /usr/bin/fio | awk '/=>/ {print $3}'); do owner_of "$lib"; done; } |
  sort -u | grep -vxE 'libc6|libstdc\+\+6|libgcc-s1|zlib1g|libzstd1|liblzma5|libbz2-1.0|libssl3|libcrypt1|libudev1|libselinux1|libpcre2-8-0')

download() {  # download DIR PACKAGE...: fetch each package not yet in DIR
  local dir=$1; shift
  mkdir -p "$dir"
  for p in "$@"; do
    ls "$dir/${p}"_*.deb >/dev/null 2>&1 ||
      (cd "$dir" && apt-get download -q "$p" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  done
}
# DeepSpeed (the same-run peer of `bench adam`, benchmarks/adam_vs_deepspeed.*) and what it imports
# that the GPU machine's torch venv (Python 3.12) lacks, as wheels; DeepSpeed itself is an sdist,
# built here into a pure-Python wheel (its ops stay JIT-compiled there).
fetch_deepspeed_wheels() {
  local dir=.debs/wheels deps=(einops hjson msgpack ninja psutil py-cpuinfo pydantic tqdm packaging)
  ls "$dir"/deepspeed-*.whl >/dev/null 2>&1 && return
  mkdir -p "$dir"
  pip download -q "${deps[@]}" -d "$dir" --python-version 3.12 --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any
  local venv
  venv=$(mktemp -d)
  python3 -m venv --system-site-packages "$venv" && "$venv/bin/pip" install -q wheel setuptools
  "$venv/bin/pip" wheel -q --no-deps --no-build-isolation deepspeed==0.19.8 -w "$dir"
  rm -rf "$venv"
}
download .debs "${build_debs[@]}"
download .debs/fio "${fio_debs[@]}"
fetch_deepspeed_wheels
du -sh .debs
