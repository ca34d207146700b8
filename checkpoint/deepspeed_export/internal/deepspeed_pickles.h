// Private: the Python objects of DeepSpeed's checkpoint files, written as its pickles write them
// (GLOBAL + REDUCE / NEWOBJ + BUILD), through a PickleWriter.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/deepspeed_export/deepspeed_export.h"
#include "checkpoint/torch_writer/torch_writer.h"

namespace tierzero::checkpoint::ds_pickle {

// collections.OrderedDict(): the call; its items follow as mark(), key, value, ..., end_dict().
void begin_ordered_dict(PickleWriter& p);
// torch.Size(shape).
void torch_size(PickleWriter& p, const std::vector<int64_t>& shape);
// deepspeed.runtime.zero.config.ZeroStageEnum(stage).
void zero_stage(PickleWriter& p, int stage);
// deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler (state["dynamic"]) or LossScaler, its
// attributes from the engine's loss scaler state and the options' knobs.
void loss_scaler(PickleWriter& p, const nlohmann::json& state, const DeepSpeedExportOptions& options);
// deepspeed.utils.tensor_fragment.fragment_address(numel=, start=).
void fragment_address(PickleWriter& p, uint64_t numel, uint64_t start);
// torch.optim Adam/AdamW's param_groups: a list of one group over parameter 0.
void param_groups(PickleWriter& p, const DeepSpeedExportOptions& options);
// A state_dict's _metadata attribute, BUILD on the OrderedDict below: '' and every module path that
// holds a parameter, each {'version': 1}.
void state_dict_metadata(PickleWriter& p, const std::vector<std::string>& names);

}  // namespace tierzero::checkpoint::ds_pickle
