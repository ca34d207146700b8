// `bench io --tune --update-config FILE`: the tuned `aio` block written into a ds_config, which
// `train` then reads (engine/config's aio block -> the NVMe optimizer's nvme::IoConfig).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/common.h"

namespace tierzero::tools {

// Checks that `path` is a readable ds_config JSON object, before a sweep spends minutes: kNotFound
// or kInvalidArgument naming --update-config, the file and the fix.
Status check_config_to_update(const std::string& path);

// Sets the top-level "aio" key of the ds_config at `path` to `aio` (an object), keeping every other
// key and their order, through a temporary file renamed over it (a crash leaves the old file or the
// new one, never a torn one). Errors name the file and the fix.
Status write_aio_block(const std::string& path, const nlohmann::json& aio);

}  // namespace tierzero::tools
