// Private: the ZeRO engine's options from a ds_config — every key the engine takes, and the
// refusals of what the engine cannot do (engine_options.cpp).
#pragma once

#include <string>
#include <vector>

#include "common/common.h"
#include "engine/config/ds_config.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {

// The engine options `config` asks for. kUnsupported naming the key and the fix for what the engine
// cannot honour (NVMe offload, partial optimizer offload); check_engine_settings' kInvalidArgument
// (ds_config.h) for settings it refuses, before an engine is built.
Result<ZeroEngineOptions> engine_options(const DsConfig& config);

// The zstd level checkpoints are saved with: 0 (sections raw) unless tierzero.checkpoint.compression
// is "zstd", then tierzero.checkpoint.level.
int checkpoint_compression_level(const DsConfig& config);

// The compute dtype a precision trains in: bf16, fp16 or fp32.
at::ScalarType compute_dtype_of(Precision precision);
// "fp16", "bf16" or "fp32".
const char* precision_name(Precision precision);

}  // namespace tierzero::engine::trainer
