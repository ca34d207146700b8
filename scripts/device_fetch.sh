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
# fio and the libraries it links that an Ubuntu image lacks, for `bench io --vs-fio` there.
fio_debs=(
  fio libgfapi0 libgfrpc0 libgfxdr0 libglusterfs0 librados2 librbd1 libibverbs1 librdmacm1
  libnbd0 libnuma1 libpmem1 libpmemblk1 libboost-iostreams1.74.0 libboost-thread1.74.0 libndctl6
  libdaxctl1 libnl-3-200 libnl-route-3-200 libicu72 libjson-c5 libtirpc3 liburcu8
)
mkdir -p .debs
cd .debs
for p in "${build_debs[@]}" "${fio_debs[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -q "$p" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
done
du -sh .
