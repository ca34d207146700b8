// Choosing the next token from the logits, as transformers' generate() does (generate.h,
// SamplingOptions). Private to engine/generate (and its tests).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "engine/generate/generate.h"

namespace tierzero::engine {

// Checks the options' ranges; kInvalidArgument naming the option (--temperature, --top-k, --top-p).
Status check_sampling(const SamplingOptions& options);

// The scores sampling draws from: logits [vocab] (fp32) / temperature, then TopKLogitsWarper (every
// score below the k-th largest set to -inf) when top_k is set, then TopPLogitsWarper (sorted
// ascending, the tokens whose cumulative softmax is <= 1 - top_p set to -inf, the most likely kept)
// when top_p < 1. For temperature > 0.
at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& options);

// The next token: argmax(logits) (the first of equal maxima) when temperature is 0, else one draw
// of torch.multinomial(softmax(warp_logits(logits)), 1) on the CPU with `generator`.
int64_t choose_token(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator);

}  // namespace tierzero::engine
