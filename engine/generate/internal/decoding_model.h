// A causal LM loaded for decoding: its weights (and a LoRA adapter's) on one device in one dtype, and
// the KV cache of the positions run so far. Private to engine/generate.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine {

// The LoRA settings of the PEFT adapter directory `dir` (adapter_config.json): r, lora_alpha,
// use_rslora, target_modules (a list, or a string: "all-linear" or a regular expression); dropout 0
// (inference). kNotFound when the file is missing; kInvalidArgument naming the key for what tierzero
// does not apply (a peft_type other than LORA, bias other than "none", and any of PEFT's variants
// set: modules_to_save, fan_in_fan_out, use_dora, rank_pattern / alpha_pattern, layers_to_transform,
// exclude_modules, target_parameters, ...) or a key of the wrong type.
Result<LoraSpec> read_adapter_spec(const std::string& dir);

class DecodingModel {
 public:
  // The model of `model_dir` (config.json + safetensors) in `dtype` on `device`; with `adapter_dir`
  // (non-empty) its LoRA adapter applied beside the base as PEFT runs it (W x + scaling · B (A x)).
  // Errors name the directory, file or tensor: a missing or mis-shaped weight, an adapter whose tensors
  // are not the targets' of its adapter_config.json with the model's shapes.
  static Result<std::unique_ptr<DecodingModel>> load(const std::string& model_dir, const std::string& adapter_dir,
                                                     at::ScalarType dtype, at::Device device);

  // The logits [vocab] (fp32, on the device) after `sequence`, the whole sequence so far: its
  // positions after those in the KV cache are run (their keys and values cached). Under LongRoPE,
  // the first time the sequence grows past original_max_position_embeddings the cache is dropped
  // and every position is run again with the long factors, as transformers' Phi-3 does in generate().
  at::Tensor next_logits(const std::vector<int64_t>& sequence);

  // Positions run so far.
  int64_t length() const { return caches_.empty() ? 0 : caches_.front().length(); }
  const ModelConfig& config() const { return model_->config(); }

 private:
  DecodingModel(std::unique_ptr<FunctionalModel> model, std::vector<std::vector<at::Tensor>> unit_params,
                at::Device device);

  std::unique_ptr<FunctionalModel> model_;
  std::vector<std::vector<at::Tensor>> unit_params_;  // per unit, in unit_params(u) order
  std::vector<LayerKvCache> caches_;                  // per decoder layer
  at::Device device_;
};

}  // namespace tierzero::engine
