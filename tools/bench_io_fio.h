// Running fio with the same parameters as a `tierzero bench io` pass, and reading its JSON.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::tools {

struct FioJob {
  std::string fio;     // the fio executable
  std::string file;    // the file tierzero measured, already `size` bytes long
  bool write = false;  // rw=write, else rw=read
  uint64_t size = 0;   // bytes moved in all, split evenly over the jobs (offset_increment)
  uint64_t block_size = 0;
  uint32_t iodepth = 0;
  uint32_t numjobs = 1;
  bool end_fsync = false;  // writes: fsync at the end, inside the timing (end_fsync=1)
  bool new_file = false;   // writes: the caller removed the file; fio creates it with fallocate
};

struct FioResult {
  double gbps = 0;    // bw_bytes / 1e9
  double p50_us = 0;  // total latency (submit to completion) percentiles
  double p99_us = 0;
  double cpu_percent = 0;  // usr_cpu + sys_cpu
  std::string command;     // the command line, for the report
};

// The fio executable on PATH (or /usr/bin/fio); empty when there is none.
std::string find_fio();

// Runs `fio --ioengine=io_uring --direct=1` for `job` with JSON output and parses it. Errors
// carry fio's stderr and the command line.
Result<FioResult> run_fio(const FioJob& job);

}  // namespace tierzero::tools
