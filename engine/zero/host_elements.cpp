#include "engine/zero/internal/host_elements.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"
#include "engine/zero/internal/nvme_params.h"

namespace tierzero::engine {

ElementType float_element_type(at::ScalarType type, const char* what) {
  const std::optional<ElementType> element = to_element_type(type);
  if (!element || (*element != ElementType::kF32 && *element != ElementType::kBF16 && *element != ElementType::kF16))
    throw Error(internal_error(std::string(what) + ": unsupported dtype " + c10::toString(type)));
  return *element;
}

cpu_adam::Elements tensor_elements(const at::Tensor& t, int64_t begin, int64_t count) {
  return {static_cast<std::byte*>(t.data_ptr()) + begin * t.element_size(), static_cast<size_t>(count),
          float_element_type(t.scalar_type(), "cpu optimizer")};
}

cpu_adam::Elements moment_elements(const at::Tensor& t, int64_t begin, int64_t count) {
  if (t.scalar_type() == at::kChar || t.scalar_type() == at::kByte)
    return {static_cast<std::byte*>(t.data_ptr()) + begin, static_cast<size_t>(count),
            t.scalar_type() == at::kChar ? ElementType::kI8 : ElementType::kU8};
  return tensor_elements(t, begin, count);
}

std::span<float> moment_scales(const at::Tensor& scales, int64_t begin, int64_t count) {
  if (!scales.defined() || scales.numel() == 0) return {};
  if (begin % static_cast<int64_t>(cpu_adam::kMomentBlock) != 0)
    throw Error(internal_error("8-bit moments: range at " + std::to_string(begin) + " does not start on a block"));
  return {scales.data_ptr<float>() + begin / static_cast<int64_t>(cpu_adam::kMomentBlock),
          cpu_adam::moment_block_count(static_cast<size_t>(count))};
}

namespace {

constexpr int64_t kSplitGrain = int64_t{1} << 20;

}  // namespace

void split_master_parallel(std::span<const float> master, std::span<uint16_t> hi, std::span<int16_t> residual) {
  if (hi.size() != master.size() || residual.size() != master.size())
    throw_if_error(cpu_adam::split_master(master, hi, residual));  // refused whole: its error names the sizes
  at::parallel_for(0, static_cast<int64_t>(master.size()), kSplitGrain, [&](int64_t begin, int64_t end) {
    const auto from = static_cast<size_t>(begin), n = static_cast<size_t>(end - begin);
    throw_if_error(cpu_adam::split_master(master.subspan(from, n), hi.subspan(from, n), residual.subspan(from, n)));
  });
}

void split_master_range(std::span<const float> master, const at::Tensor& hi, const at::Tensor& residual,
                        int64_t begin) {
  split_master_parallel(master, {static_cast<uint16_t*>(hi.data_ptr()) + begin, master.size()},
                        {static_cast<int16_t*>(residual.data_ptr()) + begin, master.size()});
}

void join_master_range(const at::Tensor& hi, const at::Tensor& residual, int64_t begin, std::span<float> master) {
  throw_if_error(cpu_adam::join_master({static_cast<const uint16_t*>(hi.const_data_ptr()) + begin, master.size()},
                                       {static_cast<const int16_t*>(residual.const_data_ptr()) + begin, master.size()},
                                       master));
}

void encode_moment_range(std::span<const float> values, const at::Tensor& codes, const at::Tensor& scales,
                         int64_t begin) {
  const auto n = static_cast<int64_t>(values.size());
  throw_if_error(
      cpu_adam::encode_moment_blocks(values, moment_elements(codes, begin, n), moment_scales(scales, begin, n)));
}

void decode_moment_range(const at::Tensor& codes, const at::Tensor& scales, int64_t begin, std::span<float> values) {
  const auto n = static_cast<int64_t>(values.size());
  const cpu_adam::Elements c = moment_elements(codes, begin, n);
  throw_if_error(cpu_adam::decode_moment_blocks({c.data, c.count, c.type}, moment_scales(scales, begin, n), values));
}

void read_state(const StateHome& home, int64_t begin, std::span<std::byte> out) {
  const std::span<float> values(reinterpret_cast<float*>(out.data()), out.size() / sizeof(float));
  if (!home.converted)
    std::memcpy(out.data(),
                static_cast<const std::byte*>(home.part.const_data_ptr()) + begin * home.part.element_size(),
                out.size());
  else if (home.s == 0)
    join_master_range(home.hi, home.part, begin, values);
  else
    decode_moment_range(home.part, home.scales, begin, values);
}

void write_state(const StateHome& home, int64_t begin, std::span<const std::byte> in) {
  const std::span<const float> values(reinterpret_cast<const float*>(in.data()), in.size() / sizeof(float));
  if (!home.converted)
    std::memcpy(static_cast<std::byte*>(home.part.data_ptr()) + begin * home.part.element_size(), in.data(), in.size());
  else if (home.s == 0)
    split_master_range(values, home.hi, home.part, begin);
  else
    encode_moment_range(values, home.part, home.scales, begin);
}

void copy_rounded(const at::Tensor& dst, const at::Tensor& src, bool away) {
  if (!away || dst.scalar_type() != at::kBFloat16) {
    dst.copy_(src);
    return;
  }
  const at::Tensor host = src.contiguous();
  at::Tensor hi = at::empty({host.numel()}, at::TensorOptions().dtype(at::kBFloat16));
  at::Tensor residual = at::empty({host.numel()}, at::TensorOptions().dtype(at::kShort));
  split_master_range({host.const_data_ptr<float>(), static_cast<size_t>(host.numel())}, hi, residual, 0);
  dst.copy_(hi);
}

at::ScalarType checkpoint_moment_dtype(at::ScalarType state_dtype) {
  return state_dtype == at::kChar ? at::kFloat : state_dtype;
}

cpu_adam::AdamHyperParams cpu_adam_hyper_params(const AdamConfig& config, double lr) {
  return {.lr = lr,
          .beta1 = config.beta1,
          .beta2 = config.beta2,
          .eps = config.eps,
          .weight_decay = config.weight_decay,
          .mode = config.decoupled_weight_decay ? cpu_adam::AdamMode::kAdamW : cpu_adam::AdamMode::kAdam,
          .bias_correction = config.bias_correction};
}

SixteenBitOutput sixteen_bit_output(const at::Tensor& compute_partition, const at::Tensor& staging, int64_t numel,
                                    const char* who, NvmeParams* sink) {
  SixteenBitOutput output;
  if (!compute_partition.defined()) {
    if (sink == nullptr) throw Error(internal_error(std::string(who) + ": no compute partition and no sink"));
    output.sixteen_bit = sink->dtype() == at::kBFloat16 || sink->dtype() == at::kHalf;
    output.sink = sink;
    return output;
  }
  const at::ScalarType dtype = compute_partition.scalar_type();
  output.sixteen_bit = dtype == at::kBFloat16 || dtype == at::kHalf;
  output.in_place = output.sixteen_bit && compute_partition.is_cpu() && compute_partition.is_contiguous();
  if (output.sixteen_bit && !output.in_place &&
      (!staging.defined() || staging.scalar_type() != dtype || staging.numel() != numel))
    throw Error(internal_error(std::string(who) + ": no 16-bit staging buffer for a device compute partition"));
  if (output.sixteen_bit) output.out = output.in_place ? compute_partition : staging;
  return output;
}

}  // namespace tierzero::engine
