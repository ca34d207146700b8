// Private: one parameter's initial value as init_parameters draws it (model_weights.cpp), shared
// with the streamed random-init source (random_param_source.cpp) so both give the same bits.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "engine/model/functional_model.h"

namespace tierzero::engine {

// How parameter `spec` of a model of `config` starts: norm weights 1 (Gemma's (1 + w) norms 0), biases 0, anything else
// normal(0, initializer_range) drawn from `generator` (advancing it), the pad_token_id embedding row 0.
// fp32 on the CPU.
at::Tensor init_value(const ParamSpec& spec, const ModelConfig& config, at::Generator& generator);

// Whether init_value draws `spec` from the generator (false for norms and biases, which are constant).
bool init_value_draws(const ParamSpec& spec);

}  // namespace tierzero::engine
