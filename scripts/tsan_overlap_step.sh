#!/usr/bin/env bash
# ThreadSanitizer over the engine's overlapped offloaded step (engine/zero/host_grad_pipeline.cpp:
# the worker thread that adds landed gradient buckets into the host partitions while the backward
# thread lands the next ones; zero_engine.cpp + step_progress.cpp + sharded_partitioner.cpp: the CPU
# Adam thread writing the partition while the next forward's gathers follow it), with LibTorch from
# the torch wheel, which is not instrumented.
#
#   scripts/tsan_overlap_step.sh BUILD [GTEST_FILTER]
#
# BUILD is a Release build of this tree with zero_offload_overlap_test built. The script compiles
# the sources below again with -fsanitize=thread -O1 -g (flags otherwise from BUILD's
# compile_commands.json), links them ahead of BUILD's static libraries into
# BUILD/tsan-overlap/zero_offload_overlap_test (the linker then takes these objects instead of the
# archive's copies), and runs the single-process cases with scripts/tsan_libtorch.supp.
# What TSan sees: every memory access in SOURCES, and every pthread/mutex/condition-variable call
# anywhere (interceptors). Accesses inside the rest of tierzero (the cpu_adam kernels, the engine's
# other files) and inside LibTorch are not instrumented: a race between two such accesses is not
# reported. The 2-rank cases run in separate worker processes and are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "$1")
filter=${2:-'*OneRank*:OffloadOverlapSubGroups.*:OffloadStagingSlots.*:DeviceAccumulatorPaths.*:OffloadTimes.*'}
sources=(engine/zero/host_grad_pipeline.cpp engine/zero/offloaded_grads.cpp offload/torch/device_copies.cpp engine/zero/run_norms.cpp
         engine/zero/record_adam.cpp engine/zero/offloaded_step.cpp engine/zero/step_progress.cpp engine/zero/zero_engine.cpp
         engine/zero/sharded_partitioner.cpp offload/torch/pending_writes.cpp tests/engine/zero/offload_overlap_test.cpp)
out=$build/tsan-overlap
mkdir -p "$out"

objects=()
for source in "${sources[@]}"; do
  object=$out/$(basename "$source" .cpp).o
  # The compile command of `source` in BUILD, optimization and precompiled header swapped for TSan's.
  command=$(python3 - "$build/compile_commands.json" "$PWD/$source" "$object" <<'PY'
import json, shlex, sys
entries, source, object_path = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
entry = next(e for e in entries if e["file"] == source)
args, out, skip = shlex.split(entry["command"]), [], 0
for i, a in enumerate(args):
    if skip:
        skip -= 1
        continue
    if a in ("-o", "-MF", "-MT", "-include"):
        skip = 1
        continue
    if a in ("-c", "-MD", "-Winvalid-pch", "ccache") or a.startswith("-O") or a == source:
        continue
    out.append(a)
print(shlex.join(out + ["-O1", "-g", "-fsanitize=thread", "-c", source, "-o", object_path]))
PY
)
  echo "tsan: compiling $source"
  (cd "$build" && eval "$command")
  objects+=("$object")
done

# BUILD's link line for the test, with the TSan objects in front of the libraries.
link=$(ninja -C "$build" -t commands zero_offload_overlap_test | grep -- "-o tests/engine/zero/zero_offload_overlap_test " | tail -1)
link=${link#: && }
link=${link%% && cd *}
link=${link/tests\/engine\/zero\/CMakeFiles\/zero_offload_overlap_test.dir\/offload_overlap_test.cpp.o/${objects[*]}}
link=${link/-o tests\/engine\/zero\/zero_offload_overlap_test/-fsanitize=thread -o $out\/zero_offload_overlap_test}
echo "tsan: linking $out/zero_offload_overlap_test"
(cd "$build" && eval "$link")

echo "tsan: running $filter"
# detect_deadlocks=0: TSan's lock-order detector holds at most 64 locks per thread, and the
# uninstrumented autograd engine's unlocks are invisible to it, so it overflows (a CHECK failure).
TSAN_OPTIONS="suppressions=$PWD/scripts/tsan_libtorch.supp detect_deadlocks=0 halt_on_error=0 report_signal_unsafe=0 ${TSAN_OPTIONS:-}" \
  TIERZERO_SOURCE_DIR=$PWD "$out/zero_offload_overlap_test" --gtest_filter="$filter"
