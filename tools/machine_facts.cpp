#include "tools/machine_facts.h"

#include <fstream>
#include <sstream>

#ifdef TIERZERO_DOCTOR_CUDA
#include <cuda_runtime.h>
#endif

namespace tierzero::tools {
namespace {

// A field of /proc/meminfo in bytes; 0 when absent.
uint64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace

HostMemory host_memory() { return {.available = meminfo("MemAvailable"), .total = meminfo("MemTotal")}; }

LocalGpus local_gpus() {
  LocalGpus out;
#ifdef TIERZERO_DOCTOR_CUDA
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    out.why_none = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return out;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess) out.gpus.push_back({p.name, p.totalGlobalMem});
  }
  if (out.gpus.empty()) out.why_none = "the CUDA runtime sees no GPU";
#else
  out.why_none = "tierzero was built without CUDA";
#endif
  return out;
}

}  // namespace tierzero::tools
