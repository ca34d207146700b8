#!/usr/bin/env bash
# On the GPU machine (no network): unpacks the .debs that scripts/device_fetch.sh downloaded into
# .device/prefix (and installs DeepSpeed's wheels from .debs/wheels), then configures and builds
# tierzero in build-gpu/ against them, the machine's CUDA toolkit and the LibTorch inside its torch
# wheel. Then runs "$@" with the environment set
# (PATH and LD_LIBRARY_PATH include the prefix; fio runs through a wrapper with its own libraries).
#   scripts/device.sh ctest --test-dir build-gpu -L gpu
# TIERZERO_DEVICE_TARGETS="a b" builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$PWD/.device/prefix"
fio_prefix="$PWD/.device/fio"
if [[ ! -f "$prefix/.unpacked" ]]; then
  mkdir -p "$prefix" "$fio_prefix"
  for deb in .debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  # fio's libraries are older Debian builds of system libraries: only fio itself sees them. A run
  # that needs no fio (tests, training) may leave .debs/fio behind to carry less.
  if compgen -G ".debs/fio/*.deb" >/dev/null; then
    for deb in .debs/fio/*.deb; do dpkg -x "$deb" "$fio_prefix"; done
    fio_libs="$fio_prefix/usr/lib/x86_64-linux-gnu:$fio_prefix/lib/x86_64-linux-gnu:$fio_prefix/usr/lib/x86_64-linux-gnu/ceph"
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$fio_libs" "$fio_prefix/usr/bin/fio" > "$prefix/usr/bin/fio"
    chmod +x "$prefix/usr/bin/fio"
  fi
  touch "$prefix/.unpacked"
fi
# DeepSpeed, the peer of benchmarks/adam_vs_deepspeed.*, into the machine's python (fresh each lease).
if compgen -G ".debs/wheels/deepspeed-*.whl" >/dev/null && ! python3 -c 'import deepspeed' 2>/dev/null; then
  python3 -m pip install -q --no-index --find-links .debs/wheels deepspeed > .device/pip.log 2>&1 || tail -5 .device/pip.log
fi
export TIERZERO_DEPS_PREFIX="$prefix"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$prefix/usr/bin:$PATH"
export PKG_CONFIG="$prefix/usr/bin/pkgconf"
# DeepSpeed's async_io op (its NVMe swappers) JIT-builds against the unpacked libaio.
export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG" -DTIERZERO_WITH_CUDA=ON -DTIERZERO_WITH_TORCH=ON > build-gpu.log 2>&1 \
  || { tail -40 build-gpu.log; exit 1; }
# -k 0: one build shows every file that fails, not the first.
cmake --build build-gpu --parallel "$(nproc)" ${TIERZERO_DEVICE_TARGETS:+--target $TIERZERO_DEVICE_TARGETS} -- -k 0 \
  > build-gpu-ninja.log 2>&1 || { grep -E '(error|Error)[: ]' build-gpu-ninja.log | sort -u | head -30; exit 1; }
echo "device.sh: built build-gpu ($(nproc) cores)"
"$@"
