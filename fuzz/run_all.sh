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
# FUZZ_PARALLEL=1 runs the harnesses at the same time instead of one after the other (a many-core
# machine); FUZZ_JOBS="pickle=2 torch_file=2" gives a harness that many libFuzzer workers on one
# shared corpus (-jobs=N -workers=N, each for SECONDS_EACH); its executions and exec/s are summed
# over the workers, cov and ft are the best worker's.
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

jobs_of() {  # the FUZZ_JOBS count for harness $1 (default 1)
  local entry
  for entry in ${FUZZ_JOBS:-}; do [[ ${entry%%=*} == "$1" ]] && { echo "${entry#*=}"; return; }; done
  echo 1
}

# Runs harness $1 in $work/$1 (logs there), returns its exit status.
run_one() {
  local name=$1 jobs
  jobs=$(jobs_of "$name")
  mkdir -p "$work/$name/corpus"
  rm -f "$work/$name"/log.txt "$work/$name"/fuzz-*.log
  local seeds=()
  [[ -d $seed_root/$name ]] && seeds=("$seed_root/$name")
  local flags=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1)
  ((jobs > 1)) && flags+=(-jobs="$jobs" -workers="$jobs")
  (cd "$work/$name" && "$build/fuzz/fuzz_$name" "${flags[@]}" corpus "${seeds[@]}") > "$work/$name/log.txt" 2>&1
}

# Prints harness $1's line of the table from its logs (one per worker), and whether it failed ($2: exit status).
report_one() {
  local name=$1 rc=$2 logs=("$work/$1"/log.txt)
  compgen -G "$work/$name/fuzz-*.log" >/dev/null && logs=("$work/$name"/fuzz-*.log)
  local execs=0 rate=0 cov=0 ft=0 log n
  for log in "${logs[@]}"; do
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1); execs=$((execs + ${n:-0}))
    n=$(grep -o 'exec/s: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$'); rate=$((rate + ${n:-0}))
    n=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$'); ((${n:-0} > cov)) && cov=$n
    n=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$'); ((${n:-0} > ft)) && ft=$n
  done
  local corpus crashes
  corpus=$(ls "$work/$name/corpus" | wc -l)
  crashes=$(ls "$work/$name" | grep -c '^\(crash\|leak\|timeout\|oom\)-')
  printf '%-20s %4s %12s %10s %8s %8s %8s %8s\n' "$name" "$(jobs_of "$name")" "$execs" "$rate" "$cov" "$ft" "$corpus" "$crashes"
  if ((rc != 0 || crashes > 0)); then
    echo "  FAILED (exit $rc): see $work/$name/log.txt (and fuzz-*.log) and the crash inputs there"
    return 1
  fi
}

printf '# tierzero fuzz run: %s s each, build %s, %s%s\n' "$seconds" "$build" "$(date -u +%FT%TZ)" \
  "${FUZZ_PARALLEL:+, all at once}"
printf '%-20s %4s %12s %10s %8s %8s %8s %8s\n' harness jobs executions exec/s cov ft corpus crashes
failed=0
declare -A status
if [[ -n ${FUZZ_PARALLEL:-} ]]; then
  declare -A pids
  for name in $harnesses; do run_one "$name" & pids[$name]=$!; done
  for name in $harnesses; do wait "${pids[$name]}"; status[$name]=$?; done
else
  for name in $harnesses; do run_one "$name"; status[$name]=$?; done
fi
for name in $harnesses; do report_one "$name" "${status[$name]}" || failed=1; done
((failed)) && echo "# FAIL: a harness crashed" || echo "# OK: no crashes"
exit $failed
