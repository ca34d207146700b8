// A kernel that keeps the GPU busy for a given time, so a test can show transfers overlapping it.
#include "tests/offload/spin_kernel.h"

namespace tierzero::offload::testing {
namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

cudaError_t launch_spin(cudaStream_t stream, double milliseconds) {
  int device = 0, khz = 0;
  cudaGetDevice(&device);
  cudaError_t err = cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
  if (err != cudaSuccess) return err;
  spin<<<1, 1, 0, stream>>>(static_cast<long long>(milliseconds * khz));
  return cudaGetLastError();
}

}  // namespace tierzero::offload::testing
