// ModelConfig: the decoder-only Llama / Qwen2 / Qwen3 / Mistral / Phi-3 / Gemma 2 / Gemma 3 text
// hyper-parameters, read from a Hugging Face config.json. No LibTorch here, so configs can be parsed and checked anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::engine {

// RoPE frequency scaling, as transformers' ROPE_INIT_FUNCTIONS computes it.
// Read from "rope_scaling" (transformers < 5) or "rope_parameters" (transformers >= 5).
struct RopeScaling {
  std::string type = "default";   // "default" | "linear" | "dynamic" | "llama3" | "longrope" (Phi-3)
  double factor = 1.0;            // linear, dynamic, llama3, longrope
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3, longrope: the pre-training context (defaults to max_position_embeddings). Dynamic NTK
  // grows the base above max_position_embeddings, as transformers does.
  int64_t original_max_position_embeddings = 0;
  // longrope: per-frequency divisors [rotary_dim / 2]; short_factor for sequences up to
  // original_max_position_embeddings, long_factor beyond. attention_factor scales cos and sin
  // (transformers' default: sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) when factor > 1).
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  std::optional<double> attention_factor;

  friend bool operator==(const RopeScaling&, const RopeScaling&) = default;
};

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";  // architectures[0]
  // "llama" | "qwen2" | "qwen3" | "mistral" | "phi3" | "gemma2" | "gemma3_text"
  std::string model_type = "llama";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // GQA when < num_attention_heads; defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Phi-3: the leading fraction of head_dim that RoPE rotates (the rest passes through).
  double partial_rotary_factor = 1.0;
  // Gemma 3: the RoPE base of the sliding-window layers (plain RoPE; rope_theta and rope_scaling
  // apply to the full-attention layers). nullopt: every layer uses rope_theta and rope_scaling.
  std::optional<double> rope_local_base_freq;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  // Biases, derived from the HF keys: "attention_bias" (Llama, Qwen3, Gemma) puts a bias on q,k,v
  // AND o_proj; Qwen2 always has q,k,v biases and none on o_proj; Mistral and Phi-3 have none.
  // Llama "mlp_bias" puts one on gate/up/down_proj.
  bool qkv_bias = false;
  bool o_proj_bias = false;
  bool mlp_bias = false;
  // Qwen3, Gemma 3: RMSNorm over head_dim on queries and keys before RoPE (self_attn.q_norm, k_norm).
  bool qk_norm = false;
  // Gemma 2 / 3: attention scores scaled by query_pre_attn_scalar^-0.5 instead of head_dim^-0.5.
  std::optional<double> query_pre_attn_scalar;
  // Gemma 2: tanh soft-capping of the attention scores, cap * tanh(scores / cap).
  std::optional<double> attn_logit_softcapping;
  // Gemma 2 / 3: the same soft-capping of the output logits.
  std::optional<double> final_logit_softcapping;
  // Mistral's "sliding_window" (Qwen2's when "use_sliding_window" is true): a token attends to the
  // last `sliding_window` positions including itself. nullopt = full causal attention.
  std::optional<int64_t> sliding_window;
  // Per layer: true when it attends through the sliding window. Qwen2 / Qwen3: from "layer_types"
  // ("sliding_attention"), else layers >= max_window_layers; Mistral, Phi-3: every layer; Gemma:
  // "layer_types", else every layer but each sliding_window_pattern-th (Gemma 2: pattern 2). Empty
  // or all false when sliding_window is nullopt.
  std::vector<bool> sliding_window_layers;
  // "silu" (SwiGLU; every family but Gemma) or "gelu_pytorch_tanh" (GeGLU; Gemma's hidden_activation)
  std::string hidden_act = "silu";
  std::string torch_dtype = "float32";  // "torch_dtype" or "dtype": "float32" | "bfloat16" | "float16"
  double initializer_range = 0.02;
  std::optional<int64_t> pad_token_id;  // its embedding row is zeroed by random init, as HF does

  // The family's layout, from model_type.
  bool is_gemma() const { return model_type == "gemma2" || model_type == "gemma3_text"; }
  // Phi-3: one fused qkv_proj and one fused gate_up_proj per layer.
  bool fused_projections() const { return model_type == "phi3"; }
  // The number of leading head_dim channels RoPE rotates (head_dim unless partial_rotary_factor < 1).
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  }

  // True when decoder layer `layer` (0-based) attends through the sliding window.
  bool layer_uses_sliding_window(int64_t layer) const {
    return sliding_window.has_value() && layer < static_cast<int64_t>(sliding_window_layers.size()) &&
           sliding_window_layers[layer];
  }

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Parses a HF config.json (the file, or a directory holding it). Errors name the file and key:
// a missing required key, a wrong type, an unsupported architecture / hidden_act / rope type,
// or inconsistent sizes (hidden_size not divisible by heads, heads not divisible by kv heads).
Result<ModelConfig> load_model_config(const std::string& path);

// The text of the config.json at `path` (the file, or a directory holding it), unparsed: what an
// export copies so that keys tierzero does not model (bos/eos token ids, ...) survive.
// kNotFound names the file.
Result<std::string> read_model_config_text(const std::string& path);

// Same, from the JSON text; `origin` names the source in error messages.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& origin);

// The Hugging Face config.json text of `config` (transformers 4 keys, which transformers 5 reads
// too): parse_model_config(to_hf_json(c)) == c for every config the parser returns. Llama's one
// "attention_bias" key is written from qkv_bias (o_proj_bias follows it on reading).
std::string to_hf_json(const ModelConfig& config);

// Checks the invariants load_model_config checks, for a config built in code.
Status validate_model_config(const ModelConfig& config);

// The built-in model of a plain `tierzero train`: byte-level vocab 256, hidden 128, 4 layers,
// 4 heads, 2 kv heads (GQA), intermediate 384, untied, fp32, 853,120 parameters.
ModelConfig tiny_llama_config();

// Number of parameters (a tied embedding counted once).
int64_t num_parameters(const ModelConfig& config);

// Training FLOPs per token at sequence length `seq_len`, as PaLM (appendix B) and nanoGPT count
// them: 6 * N_matmul + 12 * layers * heads * head_dim * seq_len, where N_matmul counts every weight
// used in a matmul (all but the input embedding lookup and norms; the LM head counted even when
// tied). Forward + backward; activation recomputation not included. Without `weight_grads` (a
// LoRA run: the frozen base takes no weight gradients) 4 * N_matmul: the forward's 2 and the
// backward's input gradients' 2; the adapters' own FLOPs (rank << width) are not counted.
double training_flops_per_token(const ModelConfig& config, int64_t seq_len, bool weight_grads = true);

}  // namespace tierzero::engine
