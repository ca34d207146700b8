#include "offload/internal/device_memory.h"

namespace tierzero::offload {

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
