// Private: the merged model of a LoRA run (W + scaling · B A for the targeted weights, every other
// weight as the base has it) as a checkpoint::ConsolidationSource, so `--export` writes it through
// the one safetensors writer as a Hugging Face directory in the model's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "checkpoint/convert/consolidate.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine::trainer {

// Reads the base weights from `base` (the run's initial weights, read again range by range) and
// the adapters from `adapters` (the trained fp32 values, model's names); both, and `model`, must
// outlive the source. model_config_json() is `config_json`.
std::unique_ptr<checkpoint::ConsolidationSource> merged_lora_source(const LoraModel& model, ParamSource& base,
                                                                    const std::map<std::string, at::Tensor>& adapters,
                                                                    std::string config_json);

}  // namespace tierzero::engine::trainer
