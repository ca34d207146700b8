// libFuzzer harness: a Hugging Face config.json (engine/model/model_config.cpp, the torch-free
// part of tierzero_model). An accepted config must survive to_hf_json() and parsing again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/model/internal/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::engine;
  auto config = parse_model_config(std::string(reinterpret_cast<const char*>(data), size), "config.json");
  if (!config.ok()) return 0;
  (void)num_parameters(*config);
  (void)training_flops_per_token(*config, 128);
  const std::string text = to_hf_json(*config);
  auto again = parse_model_config(text, "round trip");
  if (!again.ok() || to_hf_json(*again) != text) __builtin_trap();
  return 0;
}
