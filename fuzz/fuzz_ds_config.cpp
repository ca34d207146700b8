// libFuzzer harness: DeepSpeed's ds_config JSON (engine/config/). An accepted config, written back
// with to_json(), must parse again (the round trip ds_config.h promises).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/config/ds_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::engine;
  ResolveHints hints;
  hints.world_size = 2;
  auto config = parse_ds_config_text(std::string_view(reinterpret_cast<const char*>(data), size), hints);
  if (!config.ok()) return 0;
  auto again = parse_ds_config(to_json(*config), hints);
  if (!again.ok() || to_json(*again) != to_json(*config)) __builtin_trap();
  return 0;
}
