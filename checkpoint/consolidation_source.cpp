#include "checkpoint/consolidation_source.h"

#include <string>

namespace tierzero::checkpoint {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

DType ConsolidationSource::dtype(size_t) const { return DType::kF32; }

Status ConsolidationSource::read_raw(size_t index, std::span<std::byte>) {
  return unsupported("tensor " + std::to_string(index) + ": this checkpoint source has no integer tensors to copy");
}

}  // namespace tierzero::checkpoint
