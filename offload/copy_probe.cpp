#include "offload/internal/device_memory.h"

namespace tierzero::offload {

Result<std::unique_ptr<CopyProbe>> CopyProbe::create(uint64_t bytes, int cuda_device) {
#ifdef TIERZERO_HAVE_CUDA
  TZ_ASSIGN_OR_RETURN(int count, cuda_device_count());
  if (count == 0) return unsupported("no CUDA GPU found (cudaGetDeviceCount returned 0)");
  return make_cuda_copy_probe(bytes, cuda_device);
#else
  return unsupported("this tierzero was built without CUDA (no nvcc at configure time)");
#endif
}

}  // namespace tierzero::offload
