// doctor: the CPU Adam's SIMD target and threads.
#include <sched.h>

#include <thread>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

std::vector<DoctorLine> check_cpu() {
  std::vector<DoctorLine> lines;
  const std::string target = cpu_adam::simd_target_name();
  const bool vector = target.find("AVX") != std::string::npos || target.find("NEON") != std::string::npos ||
                      target.find("SVE") != std::string::npos;
  lines.push_back({"cpu", "model", describe_cpu(), Verdict::kOk, ""});
  lines.push_back({"cpu", "SIMD target", target + " (Highway runtime dispatch)", vector ? Verdict::kOk : Verdict::kWarn,
                   vector ? "" : "no AVX2/AVX-512/NEON found: the CPU Adam step runs several times slower"});
  const cpu_adam::CpuAdam adam;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int affinity = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
  lines.push_back({"cpu", "optimizer threads",
                   std::to_string(adam.threads()) + " (every core this process may run on: " +
                       std::to_string(affinity) + " of " + std::to_string(std::thread::hardware_concurrency()) + ")",
                   Verdict::kOk, ""});
  return lines;
}

}  // namespace tierzero::tools
