#include "checkpoint/convert/consolidate.h"

#include <string>

namespace tierzero::checkpoint {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status ConsolidationSource::read_fp32_range(size_t index, uint64_t first, std::span<float> out) {
  const std::vector<TensorSpec>& specs = tensors();
  if (index >= specs.size()) {
    return invalid_argument("tensor index " + std::to_string(index) + " is past the checkpoint's " +
                            std::to_string(specs.size()) + " tensors");
  }
  const auto numel = static_cast<uint64_t>(specs[index].numel());
  if (first > numel || out.size() > numel - first) {
    return invalid_argument("tensor '" + specs[index].name + "' has " + std::to_string(numel) + " elements; [" +
                            std::to_string(first) + ", +" + std::to_string(out.size()) + ") are not all in it");
  }
  return fill_fp32(index, first, out);
}

Status ConsolidationSource::read_fp32(size_t index, std::span<float> out) {
  const std::vector<TensorSpec>& specs = tensors();
  if (index < specs.size() && static_cast<int64_t>(out.size()) != specs[index].numel()) {
    return invalid_argument("read_fp32: tensor '" + specs[index].name + "' has " +
                            std::to_string(specs[index].numel()) + " elements, the buffer " +
                            std::to_string(out.size()));
  }
  return read_fp32_range(index, 0, out);
}

ElementType ConsolidationSource::dtype(size_t) const { return ElementType::kF32; }

Status ConsolidationSource::read_raw(size_t index, std::span<std::byte>) {
  return unsupported("tensor " + std::to_string(index) + ": this checkpoint source has no integer tensors to copy");
}

}  // namespace tierzero::checkpoint
