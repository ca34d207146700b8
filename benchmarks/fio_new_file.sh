#!/usr/bin/env bash
# What writing a new file costs against overwriting one, measured by fio alone on one file system:
# the work `tierzero convert` does (a new, preallocated output file, fsynced) against the work
# `tierzero bench io` and fio's defaults measure (overwriting a file laid out before timing).
#
#   benchmarks/fio_new_file.sh [DIR] [SIZE_MiB]     DIR on the disk to measure (default /tmp), 2897 MiB
#
# 1 MiB writes, io_uring, iodepth 32, O_DIRECT, one job, two rounds. GB/s is fio's own figure;
# wall_GB/s is bytes over fio's whole run (start-up and end_fsync included).
set -euo pipefail
dir="${1:-/tmp}/tierzero-fio-new-file"
mib="${2:-2897}"
command -v fio > /dev/null || { echo "fio_new_file: fio not found (apt-get install fio)"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
file="$dir/f"
row() {  # row LABEL FIO-ARGS...: one fio run, one table row
  local label=$1 t0 t1 bw; shift
  t0=$(date +%s.%N)
  bw=$(fio --name=w --rw=write --bs=1M --iodepth=32 --direct=1 --ioengine=io_uring --size="${mib}M" --numjobs=1 \
       --filename="$file" "$@" --output-format=terse --terse-version=3 | awk -F';' '{ printf "%.2f", $48 * 1024 / 1e9 }')
  t1=$(date +%s.%N)
  awk -v l="$label" -v b="$bw" -v t0="$t0" -v t1="$t1" -v m="$mib" -v r="$round" \
    'BEGIN { printf "%5d  %-34s %7s %10.2f %8s\n", r, l, b, m * 1048576 / 1e9 / (t1 - t0), (b > 0 ? "OK" : "FAIL") }'
}
echo "# fio new file vs overwrite: $(fio --version), ${mib} MiB in $dir ($(stat -f -c %T "$dir")), $(nproc) cores"
printf '%5s  %-34s %7s %10s %8s\n' "# run" "write" "GB/s" "wall_GB/s" "ok"
for round in 1 2; do
  rm -f "$file"; row "new file, preallocated" --fallocate=native
  rm -f "$file"; row "new file, preallocated, end_fsync" --fallocate=native --end_fsync=1
  rm -f "$file"; row "new file, not preallocated" --fallocate=none
  row "overwrite" --fallocate=native
  row "overwrite, end_fsync" --fallocate=native --end_fsync=1
done
echo "# ok: fio reported a rate. convert's target compares against the overwrite rows (bench io's work)."
