// A busy kernel for the overlap tests (compiled by nvcc).
#pragma once

#include <cuda_runtime.h>

namespace tierzero::offload::testing {

// Queues one thread that spins for about `milliseconds` of GPU clock on `stream`.
cudaError_t launch_spin(cudaStream_t stream, double milliseconds);

}  // namespace tierzero::offload::testing
