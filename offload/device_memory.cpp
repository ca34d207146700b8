#include "offload/internal/device_memory.h"

#include <sched.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace tierzero::offload {

void touch_in_parallel(void* data, uint64_t bytes) {
  constexpr uint64_t kSliceAlign = 2 << 20;  // a huge page: each faulted whole by one thread
  constexpr uint64_t kMinSlice = 256 << 20;  // below this a thread's start costs more than it saves
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int cores = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  const uint64_t threads = std::clamp<uint64_t>(bytes / kMinSlice, 1, static_cast<uint64_t>(std::max(cores, 1)));
  const uint64_t slice = (bytes / threads + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  auto zero = [data, bytes, slice](uint64_t i) {
    const uint64_t begin = std::min(bytes, i * slice), end = std::min(bytes, begin + slice);
    std::memset(static_cast<std::byte*>(data) + begin, 0, end - begin);
  };
  std::vector<std::thread> workers;
  for (uint64_t i = 1; i < threads; ++i) workers.emplace_back(zero, i);
  zero(0);
  for (std::thread& worker : workers) worker.join();
}

Result<std::unique_ptr<DeviceMemory>> make_device_memory(DeviceChoice choice, int cuda_device) {
  if (choice == DeviceChoice::kHost) return make_host_device_memory("host memory requested");
#ifdef TIERZERO_HAVE_CUDA
  Result<int> count = cuda_device_count();
  if (!count.ok()) return make_host_device_memory(count.status().message());
  if (*count == 0) return make_host_device_memory("cudaGetDeviceCount found no GPU");
  if (cuda_device < 0 || cuda_device >= *count) {
    return invalid_argument("cuda_device " + std::to_string(cuda_device) + " does not exist: " +
                            std::to_string(*count) + " GPU(s) found; choose 0.." + std::to_string(*count - 1));
  }
  return make_cuda_device_memory(cuda_device);
#else
  return make_host_device_memory("built without CUDA");
#endif
}

Result<std::string> describe_gpu(int cuda_device) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceMemory> memory, make_device_memory(DeviceChoice::kAuto, cuda_device));
  if (!memory->is_gpu()) return unsupported("no CUDA GPU: " + memory->description());
  return memory->description();
}

}  // namespace tierzero::offload
