#include "safetensors_fixture.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace tierzero::engine::testing {
namespace {

const char* safetensors_dtype(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16: return "BF16";
    case at::kHalf: return "F16";
    default: return "F32";
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", safetensors_dtype(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors)
    out.write(static_cast<const char*>(t.const_data_ptr()), static_cast<std::streamsize>(t.nbytes()));
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace tierzero::engine::testing
