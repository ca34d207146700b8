// What this machine has, for commands that plan for it by default (estimate) and the doctor: host
// memory from /proc/meminfo and the GPUs the CUDA runtime sees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierzero::tools {

// /proc/meminfo's MemAvailable and MemTotal in bytes; 0 where a field cannot be read.
struct HostMemory {
  uint64_t available = 0;
  uint64_t total = 0;
};
HostMemory host_memory();

struct LocalGpu {
  std::string name;  // "NVIDIA H200"
  uint64_t total_bytes = 0;
};

// The GPUs the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies). None in a build without CUDA or
// without a usable GPU; then `why_none` says which ("cudaErrorNoDevice: no CUDA-capable device ...",
// "tierzero was built without CUDA").
struct LocalGpus {
  std::vector<LocalGpu> gpus;
  std::string why_none;
};
LocalGpus local_gpus();

}  // namespace tierzero::tools
