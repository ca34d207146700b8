// Host tensors as cpu_adam sees them: spans of fp32 / bf16 / fp16 elements. Shared by the CPU and
// NVMe optimizers and the gradient landing pipeline.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "common/common.h"
#include "cpu_adam/adam.h"

namespace tierzero::engine {

// The element type of a float tensor cpu_adam steps (fp32, bf16, fp16); throws tierzero::Error
// (internal) naming `what` and the dtype for any other.
ElementType float_element_type(at::ScalarType type, const char* what);

// Elements [begin, begin + count) of contiguous host tensor `t`.
cpu_adam::Elements tensor_elements(const at::Tensor& t, int64_t begin, int64_t count);

// Sum of squares of gradient partition `grad` (any float dtype and device), in double; inf when an
// element is not finite.
double host_grad_sq_norm(const cpu_adam::CpuAdam& adam, const at::Tensor& grad);

}  // namespace tierzero::engine
