#include "offload/internal/device_memory.h"

#include <fstream>
#include <sstream>

namespace tierzero::offload {

Result<std::unique_ptr<DeviceMemory>> make_device_memory(DeviceChoice choice, int cuda_device,
                                                         std::chrono::microseconds host_copy_latency) {
  if (choice == DeviceChoice::kHost) return make_host_device_memory("host memory requested", host_copy_latency);
#ifdef TIERZERO_HAVE_CUDA
  Result<int> count = cuda_device_count();
  if (!count.ok()) return make_host_device_memory(count.status().message(), host_copy_latency);
  if (*count == 0) return make_host_device_memory("cudaGetDeviceCount found no GPU", host_copy_latency);
  if (cuda_device < 0 || cuda_device >= *count) {
    return invalid_argument("cuda_device " + std::to_string(cuda_device) + " does not exist: " +
                            std::to_string(*count) + " GPU(s) found; choose 0.." + std::to_string(*count - 1));
  }
  return make_cuda_device_memory(cuda_device);
#else
  return make_host_device_memory("built without CUDA", host_copy_latency);
#endif
}

Result<uint64_t> host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return unsupported("MemAvailable not found in /proc/meminfo");
}

}  // namespace tierzero::offload
