// Private: decoding the parts of encoded states (StateCodec) into fp32 values, by cpu_adam's own
// conversions (join_master, decode_moment_blocks), for the reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint {

// Whether a section of `part` is zstd-compressed when CheckpointOptions::compression_level > 0:
// not the residual nor the scales, which zstd does not shrink (docs/formats.md has the ratios).
bool part_pays_compression(const StatePart& part);
// kCompactMaster: out[i] = join(hi[i], residual[i]), bit for bit the fp32 master. Sizes must agree.
Status decode_compact_master(std::span<const uint16_t> hi, std::span<const int16_t> residual, std::span<float> out);
// kBlockwise8: `codes` (kI8 or kU8 bytes) hold partition elements [b * kStateBlock, +codes.size())
// for some block b, and `scales` the scales of blocks b, b + 1, ... (ceil(codes.size() / kStateBlock)
// of them); out[i] = decode(codes[i]) * the scale of its block. out.size() must be codes.size().
Status decode_blockwise8(ElementType codes_type, std::span<const std::byte> codes, std::span<const float> scales,
                         std::span<float> out);

}  // namespace tierzero::checkpoint
