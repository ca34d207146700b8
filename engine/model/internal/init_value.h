// Private: one parameter's initial value as init_parameters draws it (model_weights.cpp), shared
// with the streamed random-init source (random_param_source.cpp) so both give the same bits.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <ATen/core/Tensor.h>

#include <span>
#include <vector>

#include "engine/model/functional_model.h"

namespace tierzero::engine {

// How parameter `spec` of a model of `config` starts: norm weights 1 (Gemma's (1 + w) norms 0), biases 0, anything else
// normal(0, initializer_range) drawn from `generator` (advancing it), the pad_token_id embedding row 0.
// fp32 on the CPU.
at::Tensor init_value(const ParamSpec& spec, const ModelConfig& config, at::Generator& generator);

// Whether init_value draws `spec` from the generator (false for norms and biases, which are constant).
bool init_value_draws(const ParamSpec& spec);

// ---- One normal_ drawn in parallel, bit for bit ------------------------------------------------
// LibTorch's CPU normal_ on n >= 16 contiguous floats takes one 32-bit output of the generator's
// mt19937 per element (uniforms, then Box-Muller over aligned blocks of 16), and 16 more for the
// last 16 values when n % 16 != 0. So normal_ on elements [a, b) of the tensor, a a multiple of 16,
// from the engine advanced by a outputs, gives the whole draw's values there (b = n, or any multiple
// of 16 with b <= n - 16 when n % 16 != 0): the chunks below are drawn on every core that way.

// Elements of one chunk (a multiple of 16); the last chunk of a tensor also takes the remainder.
inline constexpr int64_t kNormalChunk = int64_t{1} << 20;

// The engine outputs normal_ takes for `numel` (>= 16) contiguous floats.
uint64_t normal_draws(int64_t numel);

// Advances `engine` as `outputs` calls of it would, twisting its state instead of tempering each
// output (a few tenths of a nanosecond an output).
void skip_draws(at::mt19937& engine, uint64_t outputs);

// The engines at the start of each chunk of a normal_ over `numel` (>= 16) elements starting from
// `start`, and the engine after the whole draw.
struct NormalChunks {
  std::vector<at::mt19937> starts;
  at::mt19937 end;
};
NormalChunks normal_chunks(const at::mt19937& start, int64_t numel);

// LibTorch's AVX2 normal_ kernel's Box-Muller in place on `blocks` blocks of 16 uniforms at `data`
// (normal_avx2.cpp; a CPU with AVX2 and FMA only), giving normal(0, std) values.
void box_muller_avx2(float* data, int64_t blocks, float std);

// Writes elements [first, first + out.size()) of one normal_(0, std) over `numel` elements from
// chunks' start engine into `out`, as that draw gives them: the range split into a slice per intra-op
// thread of LibTorch, each drawn chunk by chunk straight into `out`.
void fill_normal(const NormalChunks& chunks, double std, int64_t numel, int64_t first, std::span<float> out);

}  // namespace tierzero::engine
