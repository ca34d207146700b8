#include "checkpoint/float_convert.h"

namespace tierzero::checkpoint {

void floats_to_bf16(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_bf16(in[i]);
}

void floats_to_fp16(std::span<const float> in, std::span<uint16_t> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = float_to_fp16(in[i]);
}

void bf16_to_floats(std::span<const uint16_t> in, std::span<float> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = bf16_to_float(in[i]);
}

void fp16_to_floats(std::span<const uint16_t> in, std::span<float> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = fp16_to_float(in[i]);
}

}  // namespace tierzero::checkpoint
