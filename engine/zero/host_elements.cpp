#include "engine/zero/internal/host_elements.h"

#include <ATen/ATen.h>

#include <limits>
#include <string>

#include "common/common.h"
#include "engine/model/functional_model.h"

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

double host_grad_sq_norm(const cpu_adam::CpuAdam& adam, const at::Tensor& grad) {
  const at::Tensor host = grad.is_cpu() && grad.is_contiguous() ? grad : grad.cpu().contiguous();
  const cpu_adam::Elements all = tensor_elements(host, 0, host.numel());
  const cpu_adam::GradStats stats = adam.grad_stats({all.data, all.count, all.type});
  return stats.finite ? stats.sq_norm : std::numeric_limits<double>::infinity();
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
                                    const char* who, ComputeWeightsSink* sink) {
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
