#!/usr/bin/env bash
# Here (a Debian 12 machine with network): downloads into .debs/ the Debian packages that the GPU
# machine lacks (it has CUDA, PyTorch, CMake and ninja but no network), for scripts/device.sh to
# unpack there. Carry `.debs` with the device run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
build_debs=(
  liburing2 liburing-dev libaio1 libaio-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libtbb-dev
  libhwy1 libhwy-dev libzstd1 libzstd-dev libxxhash0 libxxhash-dev nlohmann-json3-dev libcli11-dev
  libfmt9 libfmt-dev googletest libgtest-dev libgmock-dev pkgconf pkgconf-bin libpkgconf3 libgloo-dev
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
download .debs "${build_debs[@]}"
download .debs/fio "${fio_debs[@]}"
du -sh .debs
