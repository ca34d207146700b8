// `tierzero bench adam` without CUDA in the build: no GPU line.
#include "tools/bench_adam_gpu.h"

namespace tierzero::tools {

Result<GpuAdamRates> measure_gpu_adam(const cpu_adam::AdamBuffers&, const cpu_adam::AdamHyperParams&, int) {
  return unsupported("this tierzero was built without CUDA: reconfigure with -DTIERZERO_WITH_CUDA=ON");
}

}  // namespace tierzero::tools
