// `tierzero doctor`: the checks, one function per area, each returning table lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tierzero::tools {

enum class Verdict : uint8_t { kOk, kWarn, kFail };

// One line of the doctor's table: what was checked, what was found, and the fix when not OK.
struct DoctorLine {
  std::string area;   // "io", "nvme", "cpu", "memory", "gpu", "build"
  std::string check;  // "io_uring", "/tmp", "GPU 0", ...
  std::string value;  // what this machine offers / what tierzero will use
  Verdict verdict = Verdict::kOk;
  std::string fix;  // what to do; empty when OK
};

struct DoctorOptions {
  std::vector<std::string> nvme_paths;      // directories that would hold swap files and checkpoints
  uint64_t pin_probe_bytes = 256ull << 20;  // pinned memory to try to allocate
};

// io_uring and libaio through nvme/'s factory, and the backend `auto` picks.
std::vector<DoctorLine> check_io_backends();
// Per path: exists and writable, O_DIRECT and its alignment (a real 1 MiB write and read
// through nvme/), file system, free space.
std::vector<DoctorLine> check_nvme_paths(const std::vector<std::string>& paths);
// cpu_adam's Highway target and thread count.
std::vector<DoctorLine> check_cpu();
// RAM, RLIMIT_MEMLOCK, and pinning `pin_probe_bytes` through offload/'s PinnedHostPool (huge pages
// registered with CUDA with a GPU, mlock without).
std::vector<DoctorLine> check_memory(uint64_t pin_probe_bytes);
// GPUs through the CUDA runtime (when built with CUDA): name, memory, PCIe link from sysfs.
std::vector<DoctorLine> check_gpus();
// CUDA, NCCL and LibTorch versions known when tierzero was built.
std::vector<DoctorLine> check_build();

// "OK", "WARN" or "FAIL".
const char* verdict_name(Verdict v);
// Prints the fixed-width table with '#' header and footer ("# Result: OK (n WARN)").
void print_doctor_table(const std::vector<DoctorLine>& lines, std::FILE* out);
// {"tierzero": version, "host": ..., "checks": [{area, check, value, status, fix}], "result"}.
std::string doctor_json(const std::vector<DoctorLine>& lines);
// The worst verdict of `lines`.
Verdict worst_verdict(const std::vector<DoctorLine>& lines);

// Every check, in the table's order.
std::vector<DoctorLine> run_doctor_checks(const DoctorOptions& options);
// Runs every check and prints the table (or JSON); returns the exit code: 1 when a line FAILs.
int run_doctor(const DoctorOptions& options, bool json, std::FILE* out);

}  // namespace tierzero::tools
