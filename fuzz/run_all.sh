#!/usr/bin/env bash
# Runs every libFuzzer harness of build-fuzz/ for SECONDS_EACH seconds, one after the other, on
# its seed corpus (fuzz/seeds/NAME) plus a working corpus that grows as coverage does.
#   fuzz/run_all.sh SECONDS_EACH [BUILD_DIR] [WORK_DIR]
# BUILD_DIR defaults to build-fuzz (cmake --preset fuzz && cmake --build --preset fuzz), WORK_DIR
# to $TMPDIR/tierzero-fuzz. Each harness runs with -max_total_time=SECONDS_EACH and 1 job, so
# 12 harnesses at 40 s take 8 minutes on one core. A line per harness gives executions, exec/s,
# coverage (cov: edges, ft: features), corpus size and crashes; crash inputs are kept as
# WORK_DIR/NAME/crash-* and the script exits 1 when any harness crashed.
# FUZZ_ONLY="pickle zip" runs only those; FUZZ_SEEDS=DIR takes seeds from DIR/NAME instead of
# fuzz/seeds/NAME (a fuller set from fuzz/make_seeds.py).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: fuzz/run_all.sh SECONDS_EACH [BUILD_DIR] [WORK_DIR]}
build=$(realpath "${2:-build-fuzz}")
work=${3:-${TMPDIR:-/tmp}/tierzero-fuzz}
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

seed_root=$(realpath "${FUZZ_SEEDS:-fuzz/seeds}")
harnesses=${FUZZ_ONLY:-$(ls "$build"/fuzz/fuzz_* 2>/dev/null | xargs -n1 basename | sed 's/^fuzz_//')}
[[ -n "$harnesses" ]] || { echo "run_all: no harnesses in $build/fuzz (build them: cmake --preset fuzz && cmake --build --preset fuzz)"; exit 2; }

printf '# tierzero fuzz run: %s s each, build %s, %s\n' "$seconds" "$build" "$(date -u +%FT%TZ)"
printf '%-20s %12s %10s %8s %8s %8s %8s\n' harness executions exec/s cov ft corpus crashes
failed=0
for name in $harnesses; do
  mkdir -p "$work/$name/corpus"
  seeds=()
  [[ -d $seed_root/$name ]] && seeds=("$seed_root/$name")
  log="$work/$name/log.txt"
  (cd "$work/$name" && "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
     -max_len=65536 -print_final_stats=1 corpus "${seeds[@]}") > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'exec/s: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
  corpus=$(ls "$work/$name/corpus" | wc -l)
  crashes=$(ls "$work/$name" | grep -c '^\(crash\|leak\|timeout\|oom\)-')
  printf '%-20s %12s %10s %8s %8s %8s %8s\n' "$name" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes"
  if ((rc != 0 || crashes > 0)); then
    failed=1
    echo "  FAILED (exit $rc): see $log and $work/$name/"
  fi
done
((failed)) && echo "# FAIL: a harness crashed" || echo "# OK: no crashes"
exit $failed
