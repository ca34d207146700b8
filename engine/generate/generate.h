// Text generation from a causal LM (`tierzero generate`): a Hugging Face model directory or a
// `train --export` directory, optionally with a PEFT LoRA adapter, continuing a prompt (text, or chat
// messages rendered through the model's own chat template) token by token with a KV cache, greedy or
// sampled as transformers' generate() decodes, until an end-of-sequence token or a token budget.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::engine {

// How the next token is chosen from the logits, as transformers' generate() does: temperature 0 is
// greedy (argmax, do_sample=False); otherwise the logits are divided by the temperature, filtered by
// top-k then top-p (TopKLogitsWarper, TopPLogitsWarper), and one token is drawn from their softmax
// with torch.multinomial on a CPU generator seeded with `seed`, so that torch.manual_seed(seed)
// before transformers' generate(do_sample=True) on the CPU draws the same tokens from the same logits.
struct SamplingOptions {
  double temperature = 0.0;      // >= 0; 0 = greedy
  std::optional<int64_t> top_k;  // >= 1: keep the k most likely tokens (ties kept); nullopt: no top-k
  double top_p = 1.0;            // (0, 1]: keep the smallest most-likely set whose probability reaches top_p
  uint64_t seed = 0;
};

struct GenerateArgs {
  std::string model_dir;    // config.json + safetensors + tokenizer.json (+ chat template for messages)
  std::string adapter_dir;  // a PEFT LoRA adapter directory over model_dir; empty: none
  // Exactly one of: prompt text (encoded with the tokenizer's special tokens, e.g. BOS), or chat
  // messages (a JSON array of {"role", "content"} objects, or an object with "messages" and
  // optionally "tools") rendered with add_generation_prompt = true and encoded without special tokens,
  // as transformers' apply_chat_template(..., add_generation_prompt=True) does.
  std::optional<std::string> prompt;
  std::optional<nlohmann::ordered_json> messages;
  int64_t max_new_tokens = 256;
  SamplingOptions sampling;
  bool ignore_eos = false;  // decode max_new_tokens tokens whatever they are
  std::string device;       // "cuda", "cpu", or "" (CUDA when this machine has a GPU, else the CPU)
  std::string dtype;        // "fp32", "bf16", "fp16", or "" (the model's torch_dtype)
};

struct Generation {
  std::vector<uint32_t> prompt_ids;
  std::vector<uint32_t> ids;  // the generated tokens, the stop token included when one ended it
  std::string text;           // ids decoded, special tokens skipped
  std::string stop_reason;    // "eos" or "max_new_tokens"
  std::string device;         // "cpu", "cuda:0"
  std::string dtype;          // "fp32", "bf16", "fp16"
};

// Loads the model, adapter and tokenizer, builds the prompt and decodes. Every input is checked
// before decoding starts: a missing directory, config.json, tokenizer.json or weight; an adapter that
// is not a LoRA adapter PEFT wrote or whose tensors do not fit the model; --messages without a chat
// template; a prompt that encodes to nothing or to ids outside the model's vocabulary; a prompt plus
// max_new_tokens beyond max_position_embeddings; CUDA asked for on a machine without it. Errors
// name the file, key or option and the fix. `on_text` receives the decoded text as it grows (each
// call the next piece; a piece is held back while it ends in an incomplete character).
Result<Generation> generate(const GenerateArgs& args, const std::function<void(std::string_view)>& on_text);

}  // namespace tierzero::engine
