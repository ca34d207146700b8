// Encoded states (StateCodec): their parts, and the conversions between the parts and fp32 values,
// which are cpu_adam's (the optimizer's own rule, so the checkpoint decodes as the engine does).
#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/state_codec.h"
#include "cpu_adam/adam.h"

namespace tierzero::checkpoint {

static_assert(kStateBlock == cpu_adam::kMomentBlock, "checkpoint blocks are the optimizer's 8-bit moment blocks");

std::vector<StatePart> state_parts(const StateSpec& state) {
  switch (state.codec) {
    case StateCodec::kRaw: return {{"", state.dtype}};
    case StateCodec::kCompactMaster: return {{"hi", ElementType::kBF16}, {"residual", ElementType::kI16}};
    case StateCodec::kBlockwise8: return {{"codes", state.codes}, {"scales", ElementType::kF32, /*per_block=*/true}};
  }
  return {};
}

uint64_t part_numel(const StatePart& part, uint64_t partition_numel) {
  return part.per_block ? (partition_numel + kStateBlock - 1) / kStateBlock : partition_numel;
}

Result<std::vector<std::vector<std::byte>>> encode_partition(const StateSpec& state, std::span<const float> values) {
  std::vector<std::vector<std::byte>> parts;
  for (const StatePart& p : state_parts(state)) {
    parts.emplace_back(part_numel(p, values.size()) * element_size(p.dtype));
  }
  switch (state.codec) {
    case StateCodec::kRaw:
      return invalid_argument(fmt::format("state '{}' is stored raw; there is nothing to encode", state.name));
    case StateCodec::kCompactMaster:
      TZ_RETURN_IF_ERROR(cpu_adam::split_master(
          values, {reinterpret_cast<uint16_t*>(parts[0].data()), values.size()},
          {reinterpret_cast<int16_t*>(parts[1].data()), values.size()}));
      break;
    case StateCodec::kBlockwise8:
      TZ_RETURN_IF_ERROR(cpu_adam::encode_moment_blocks(
          values, {parts[0].data(), values.size(), state.codes},
          {reinterpret_cast<float*>(parts[1].data()), parts[1].size() / sizeof(float)}));
      break;
  }
  return parts;
}

bool part_pays_compression(const StatePart& part) { return part.name != "residual" && part.name != "scales"; }

Status decode_compact_master(std::span<const uint16_t> hi, std::span<const int16_t> residual, std::span<float> out) {
  return cpu_adam::join_master(hi, residual, out);
}

Status decode_blockwise8(ElementType codes_type, std::span<const std::byte> codes, std::span<const float> scales,
                         std::span<float> out) {
  return cpu_adam::decode_moment_blocks({codes.data(), codes.size(), codes_type}, scales, out);
}

}  // namespace tierzero::checkpoint
