// libFuzzer harness: a DeepSpeed ZeRO checkpoint folder (checkpoint/deepspeed/): the rank files'
// pickles and the layout planned from them, then reads of every tensor.
// Input: records [u8 name length][name][u32 little-endian size][bytes], one per file of the tag
// folder (e.g. mp_rank_00_model_states.pt); names holding '/' or starting with '.' are skipped.
// fuzz/make_seeds.py packs DeepSpeed fixtures this way.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "fuzz/fuzz_support.h"

namespace {

// Writes the records of `data` into DIR/tag and DIR/latest; returns DIR.
std::string unpack(const uint8_t* data, size_t size) {
  const std::string dir = tierzero::fuzz::scratch_dir() + "/ds";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/tag");
  tierzero::fuzz::write_input_file("ds/latest", reinterpret_cast<const uint8_t*>("tag"), 3);
  for (size_t pos = 0; pos < size;) {
    const size_t name_len = data[pos++];
    if (size - pos < name_len + 4) break;
    const std::string name(reinterpret_cast<const char*>(data + pos), name_len);
    pos += name_len;
    uint32_t len = 0;
    std::memcpy(&len, data + pos, 4);
    pos += 4;
    len = static_cast<uint32_t>(std::min<size_t>(len, size - pos));
    if (!name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
        name.find('\0') == std::string::npos) {
      tierzero::fuzz::write_input_file("ds/tag/" + name, data + pos, len);
    }
    pos += len;
  }
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::checkpoint;
  const std::string dir = unpack(data, size);
  if (!is_deepspeed_checkpoint(dir)) return 0;
  auto source = open_deepspeed_checkpoint(dir, "");
  if (!source.ok()) return 0;
  std::vector<float> values(64);
  const auto& tensors = (*source)->tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t numel = static_cast<uint64_t>(tensors[i].numel());
    const uint64_t n = std::min<uint64_t>(numel, values.size());
    if ((*source)->dtype(i) != tierzero::ElementType::kF32) continue;
    (void)(*source)->read_fp32_range(i, 0, std::span(values).first(n));
    (void)(*source)->read_fp32_range(i, numel - n, std::span(values).first(n));
  }
  return 0;
}
