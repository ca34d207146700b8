// The decoder-only causal LM (Llama / Qwen2 / Qwen3 / Mistral / Phi-3 / Gemma 2-3) written
// functionally, for the ZeRO engine.
//
// The model is a chain of units: unit 0 = token embedding, units 1..L = decoder layers,
// unit L+1 = final norm + LM head. Each unit is a pure function of (input, its parameters): no
// module state, so the engine can gather a unit's parameters, run it without a graph, drop them,
// and later recompute it with grad enabled (activation checkpointing per layer for free).
// Every op is device-agnostic (CPU or CUDA tensors; all of a unit's tensors on one device).
// LoRA (LoraModel, the last section) wraps any such model: its parameters are the adapters alone.
#pragma once

#include <ATen/core/ATen_fwd.h>
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/internal/model_config.h"
#include "nvme/io_engine.h"

namespace tierzero::engine {

// One named parameter, HF naming (e.g. "model.layers.0.self_attn.q_proj.weight").
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// One linear projection inside a unit (an nn.Linear of the HF model): y = x·weightᵀ + bias.
// A model computes every projection of its units through the Projector it is given, so that a
// wrapper (LoRA) can add to chosen projections without knowing the model family.
class Projector {
 public:
  virtual ~Projector() = default;
  // Projects `x` through the weight at position `weight_index` of the unit's parameter list (the
  // unit_params(u) order) and its bias (nullopt when the projection has none). The default is
  // at::linear.
  virtual at::Tensor project(size_t weight_index, const at::Tensor& x, const at::Tensor& weight,
                             const std::optional<at::Tensor>& bias) const;
};

// One decoder layer's keys and values of the positions run so far (generation's KV cache): each
// [B, num_key_value_heads, positions, head_dim], keys after RoPE; undefined before the first call.
struct LayerKvCache {
  at::Tensor keys;
  at::Tensor values;
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
};

class FunctionalModel {
 public:
  virtual ~FunctionalModel() = default;

  // Number of units: num_hidden_layers + 2.
  virtual size_t num_units() const = 0;

  // Parameters of unit u, in the order forward_unit expects them. A tied LM head lists
  // "model.embed_tokens.weight" in the last unit too (the same parameter in two units; the engine
  // sums its gradients). Layer order: the family's, in forward order (internal/layer_ops.h), e.g.
  // Llama's input_layernorm, q/k/v/o_proj (weight then bias where present),
  // post_attention_layernorm, gate/up/down_proj.
  virtual const std::vector<ParamSpec>& unit_params(size_t u) const = 0;

  // Runs unit u. Unit 0: token ids [B,T] int64 -> hidden [B,T,H] in the embedding's dtype (as
  // nn.Embedding with padding_idx = pad_token_id: that row gets no gradient);
  // layers: hidden [B,T,H] -> hidden [B,T,H] (positions 0..T-1, causal); last: hidden -> logits
  // [B,T,V] in fp32 (in double when the params are double, for gradient checks). Params must be in
  // unit_params(u) order with those shapes, one floating dtype per unit, on the input's device.
  // Throws tierzero::Error (kInvalidArgument) on a wrong count or shape.
  // Same as forward_unit_with(u, input, params, Projector{}).
  virtual at::Tensor forward_unit(size_t u, const at::Tensor& input, at::TensorList params) const;

  // forward_unit with every linear projection of the unit computed by `projector` (the LM head
  // included; embeddings and norms are not projections).
  virtual at::Tensor forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                                       const Projector& projector) const = 0;

  // forward_unit_with for decoding with a KV cache: `input` holds the positions after the
  // cache.length() ones `cache` holds (unit 0 and the last unit do not use the cache). A decoder layer
  // rotates its queries and keys for those positions, attends to the cached keys and values and
  // its own (causal, the layer's sliding window), and appends its keys and values to `cache`. With
  // an empty cache a layer computes what forward_unit_with computes. Throws tierzero::Error
  // (kUnsupported) for a model with no incremental forward (the default).
  virtual at::Tensor forward_unit_cached(size_t u, const at::Tensor& input, at::TensorList params,
                                         const Projector& projector, LayerKvCache& cache) const;

  // The config the model was built from.
  virtual const ModelConfig& config() const = 0;

  // True when forward_unit draws from the input device's default random generator (LoRA dropout):
  // a recomputation then gives the forward's values only from the generator state the forward
  // started from (engine/zero/internal/rng_replay.h).
  virtual bool forward_is_random() const { return false; }
};

// Builds the functional model for `config` (validated; throws tierzero::Error when invalid).
std::unique_ptr<FunctionalModel> make_causal_lm(const ModelConfig& config);

// Every distinct parameter of `model`, each once, in first-use order (unit 0 first).
std::vector<ParamSpec> all_params(const FunctionalModel& model);

// Checks that `params` holds every parameter of `model` with its shape; extra entries (e.g. an old
// checkpoint's rotary_emb.inv_freq) are allowed. The error lists the missing / mis-shaped names.
Status check_params(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params);

// Runs every unit in order on `tokens` [B,T] int64 and returns logits [B,T,V] (fp32). The plain
// single-process reference; records an autograd graph when grad mode is on. Throws
// tierzero::Error when a parameter is missing.
at::Tensor forward_full(const FunctionalModel& model, const at::Tensor& tokens,
                        const std::map<std::string, at::Tensor>& params);

// HF's causal LM loss: logits [B,T,V] predict labels shifted left by one (labels [B,T] int64,
// -100 = ignored); cross-entropy in fp32, mean over the unignored targets (NaN when all are ignored,
// as in transformers).
at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels);

// Random parameters as HF's _init_weights makes them: linear weights and embeddings
// ~ normal(0, initializer_range), biases 0, norm weights 1 (Gemma's 0), the pad_token_id embedding
// row 0.
// Values depend only on (config, seed), not on dtype or device: drawn in fp32 on the CPU from one
// generator seeded with `seed`, in all_params order, then cast and moved.
std::map<std::string, at::Tensor> init_parameters(const ModelConfig& config, uint64_t seed, at::ScalarType dtype,
                                                  at::Device device);

// Loads every tensor of a HF checkpoint directory: model.safetensors, or the shards listed in
// model.safetensors.index.json; each converted to `dtype` and placed on `device`. Errors name the
// file and tensor (missing file, bad header, unsupported dtype, out-of-range offsets). Use
// check_params to match the result against a model.
Result<std::map<std::string, at::Tensor>> load_hf_weights(const std::string& dir, at::ScalarType dtype,
                                                          at::Device device);

// The torch dtype of `type`; nullopt for the types no tensor here holds (U16..U64, F4, F6, F8_E8M0,
// the fnuz F8 variants, C64). The engine's one mapping between the two vocabularies.
std::optional<at::ScalarType> to_scalar_type(ElementType type);
// The element type of torch dtype `type`; nullopt for dtypes with none to_scalar_type() gives.
std::optional<ElementType> to_element_type(at::ScalarType type);

// ---- Parameter sources: the initial weights, read piece by piece --------------------------------

// Where a model's initial parameters come from, read in element ranges so that a rank holds only
// what it keeps (its partition) and never the whole model in fp32. Not thread-safe.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // The shape of parameter `name`, or nullopt when the source has no such tensor.
  virtual std::optional<std::vector<int64_t>> shape(const std::string& name) const = 0;
  // Writes elements [first, first + out.size()) of parameter `name` (row-major), converted to fp32,
  // into `out`. Errors name the tensor and, for a file, the file and byte offset.
  virtual Status read(const std::string& name, int64_t first, std::span<float> out) = 0;
};

// A source over tensors in memory (any float dtype, any device), which must outlive it.
std::unique_ptr<ParamSource> map_param_source(const std::map<std::string, at::Tensor>& params);

// A source over a Hugging Face checkpoint directory (model.safetensors, or the shards listed in
// model.safetensors.index.json): only the headers are read here; read() preads just the requested
// byte range (bf16 / fp16 / fp32 / fp64 tensors), in 2 MiB pieces on LibTorch's intra-op threads
// (several reads in flight, each thread converting its piece in a buffer of its own), with O_DIRECT
// where the file system allows it (whole 4 KiB blocks around the range: the disk's rate, not the
// page cache's), else with pread. Errors name the directory, file and tensor.
Result<std::unique_ptr<ParamSource>> open_safetensors_params(const std::string& model_dir);

// init_parameters(config, seed, kFloat, kCPU)'s values, bit for bit, without the whole model in
// memory: from creation on, a thread of the source's own moves the generator past the parameters in
// init_parameters' order, skipping each parameter's draws rather than drawing them (a serial ~0.25
// ns an element, so it runs while the engine allocates its buffers) and keeping the engine state at
// the start of each 1 Mi-element chunk of it (2.5 KB a chunk); a parameter is drawn whenever it is
// read (once the thread has passed it), its chunks on LibTorch's intra-op threads, with normal_'s
// bits (internal/init_value.h). It holds no drawn values: a read draws straight into its output.
std::unique_ptr<ParamSource> random_init_params(const ModelConfig& config, uint64_t seed);

// check_params for a source: every parameter of `model` present with its shape.
Status check_params(const FunctionalModel& model, const ParamSource& source);

// ---- LoRA: adapters over a frozen base ---------------------------------------------------------
// LoRA (Hu et al. 2021, as PEFT implements it) over any FunctionalModel: chosen linear projections
// W x + b of the frozen base become W x + b + scaling · B (A x), A [r, in] and B [out, r] the
// trainable adapters, scaling = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora).
//
// LoraModel is itself a FunctionalModel whose parameters are the adapters only: unit_params(u)
// lists "<module>.lora_A.weight" and "<module>.lora_B.weight" for each targeted projection of unit
// u, so the ZeRO engine partitions, reduces, steps and checkpoints the adapters (and keeps Adam
// state for them alone) exactly as it does a model's parameters. The frozen base weights live in
// the LoraModel (FrozenWeights: on the compute device, or offloaded to pinned or pageable host
// memory and copied to the device for each use); forward_unit_with(u) runs the base unit on them
// through a Projector that adds the adapters, and the engine's backward recomputes it with grad
// on the adapters alone, so the base gets no gradients and no optimizer state.
//
// Targets are matched by module path as PEFT matches them (lora_targets). The files a LoRA run
// reads and writes are PEFT's: an adapter directory (adapter_config.json +
// adapter_model.safetensors, tensors named "base_model.model.<module>.lora_A.weight") that
// peft.PeftModel.from_pretrained loads, and merged weights W + scaling · B A for export.
// What to adapt and how strongly: PEFT LoraConfig's r, lora_alpha, use_rslora and target_modules.
struct LoraSpec {
  int64_t r = 8;
  double lora_alpha = 8.0;
  bool use_rslora = false;
  // Module names: a module path matches when it equals one or ends with "." + one (PEFT's list form).
  std::vector<std::string> target_modules;
  // Used instead when not empty: "all-linear" (every linear projection but the LM head) or a
  // regular expression the whole module path must match (PEFT's string form).
  std::string target_pattern;
  // PEFT's lora_dropout: the probability, in [0, 1), that an element of a target's input to the
  // adapter is zeroed (the rest scaled by 1 / (1 - p)); the base projection sees the whole input.
  double dropout = 0.0;

  // lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
  double scaling() const;
};

// One adapted projection.
struct LoraTarget {
  std::string module;   // "model.layers.0.self_attn.q_proj"
  size_t unit = 0;      // the base unit holding it
  size_t weight_index;  // its weight's position in the base's unit_params(unit)
  int64_t in_features = 0;
  int64_t out_features = 0;
  std::string a_name() const { return module + ".lora_A.weight"; }
  std::string b_name() const { return module + ".lora_B.weight"; }
};

// The projections of `base` that `spec` targets, in unit and weight order: among every 2-D ".weight"
// of the decoder layers (units 1..L; the embedding and the LM head are not adapted), those
// lora_targets_module (engine/config) matches. kInvalidArgument when
// r < 1, lora_alpha <= 0, the pattern is not a valid regular expression, or the targets match no
// linear module (the error lists the model's module names, as PEFT's does).
Result<std::vector<LoraTarget>> lora_targets(const FunctionalModel& base, const LoraSpec& spec);

class FrozenWeights;

// Where the frozen base weights are kept between uses.
enum class FrozenHome : uint8_t {
  kDevice,        // on the compute device
  kPinnedHost,    // in a pinned pool of its own (plain host memory without CUDA), copied for each use
  kPageableHost,  // in pageable host memory, copied for each use
  kNvme,          // in swap files on NVMe, read into pinned staging and copied for each use
};

// The frozen base's home and, for kNvme, its swap files: one per directory of `nvme_paths` for rank
// `rank`, read and written over `io` (the ds_config's "aio" block).
struct FrozenPlacement {
  FrozenPlacement(FrozenHome h = FrozenHome::kDevice) : home(h) {}  // NOLINT: implicit by design
  FrozenHome home;
  std::vector<std::string> nvme_paths;
  nvme::IoConfig io;
  int rank = 0;
  uint64_t pinned_limit_bytes = 0;  // tierzero.pinned_memory_limit (0 = none), which the base's pool must fit
};

class LoraModel : public FunctionalModel {
 public:
  // Adapts `base` as `spec` says. Every base parameter is read from `base_weights` (fp32 pieces),
  // cast to `dtype` and kept as `placement` says (kDevice: on `device`; kNvme: in swap files).
  // Errors name the target, the tensor, or the swap file and the fix.
  static Result<std::unique_ptr<LoraModel>> create(std::unique_ptr<FunctionalModel> base, const LoraSpec& spec,
                                                   ParamSource& base_weights, at::ScalarType dtype, at::Device device,
                                                   const FrozenPlacement& placement);
  ~LoraModel() override;

  size_t num_units() const override { return base_->num_units(); }
  // The adapters of unit u: for each target in it, lora_A [r, in] then lora_B [out, r].
  const std::vector<ParamSpec>& unit_params(size_t u) const override { return units_.at(u); }
  // The base unit on its frozen weights (copied to the input's device first when offloaded),
  // with `projector` for every projection and scaling · B (A x) added to the targeted ones.
  // `params` are the unit's adapters in unit_params(u) order.
  at::Tensor forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                               const Projector& projector) const override;
  // The same through the base's forward_unit_cached.
  at::Tensor forward_unit_cached(size_t u, const at::Tensor& input, at::TensorList params,
                                 const Projector& projector, LayerKvCache& cache) const override;
  const ModelConfig& config() const override { return base_->config(); }
  // True when spec().dropout > 0: every forward (the training forward: this model has no eval mode)
  // drops the adapters' inputs with fresh draws from the input device's default generator.
  bool forward_is_random() const override { return spec_.dropout > 0.0; }

  const FunctionalModel& base() const { return *base_; }
  const LoraSpec& spec() const { return spec_; }
  const std::vector<LoraTarget>& targets() const { return targets_; }
  // Bytes the frozen base weights take in their home.
  int64_t frozen_bytes() const;
  FrozenHome frozen_home() const;
  // Pinned host bytes the base holds (its home when kPinnedHost; on NVMe its staging buffers where
  // a GPU pins them), and bytes its swap files take on NVMe (kNvme; else 0).
  int64_t frozen_pinned_bytes() const;
  int64_t frozen_nvme_bytes() const;
  // Bytes of the base's pool (pinned or, without a GPU, plain host memory; its share of
  // tierzero.pinned_memory_limit): the weights when kPinnedHost, the staging halves when kNvme; else 0.
  int64_t frozen_pool_bytes() const;
  // Bytes the base read from NVMe since the last call (0 unless kNvme).
  uint64_t take_frozen_read_bytes() const;
  // Where the base is, for the run header: "in pinned host memory", "on NVMe (1 file(s): ...)".
  std::string frozen_where() const;

 private:
  LoraModel(std::unique_ptr<FunctionalModel> base, LoraSpec spec, std::vector<LoraTarget> targets,
            std::unique_ptr<FrozenWeights> frozen);

  std::unique_ptr<FunctionalModel> base_;
  LoraSpec spec_;
  std::vector<LoraTarget> targets_;
  std::vector<std::vector<ParamSpec>> units_;
  std::unique_ptr<FrozenWeights> frozen_;
};

// ---- Adapter values and files -------------------------------------------------------------------

// PEFT's initial adapters for `model`'s targets: lora_A ~ kaiming_uniform_(a = sqrt(5)), i.e.
// uniform(-1/sqrt(in), 1/sqrt(in)), lora_B zeros; fp32 on the CPU, drawn from one generator seeded
// with `seed` in target order (reproducible from the seed; not PEFT's bits, which depend on torch's
// global generator).
std::map<std::string, at::Tensor> init_lora_adapters(const LoraModel& model, uint64_t seed);

// The adapters of the PEFT adapter directory `dir` (adapter_config.json + adapter_model.safetensors)
// under `model`'s names, fp32 on the CPU. kInvalidArgument when the directory's r, lora_alpha or
// use_rslora differ from model.spec(), or its tensors are not exactly model's targets with their
// shapes (the error names the tensor); file errors name the file.
Result<std::map<std::string, at::Tensor>> load_peft_adapter(const std::string& dir, const LoraModel& model);

// Writes `adapters` (model's names; any float dtype) as a PEFT adapter directory into `dir`
// (created if needed; the two files replaced): adapter_config.json (peft_type LORA, task_type
// CAUSAL_LM, r, lora_alpha, use_rslora, lora_dropout as the spec gives it, bias "none", target_modules as the spec
// gives them, base_model_name_or_path `base_model`) and adapter_model.safetensors (fp32 tensors
// named "base_model.model.<module>.lora_A.weight"). Errors name the file.
Status save_peft_adapter(const std::string& dir, const LoraModel& model,
                         const std::map<std::string, at::Tensor>& adapters, const std::string& base_model);

// W + scaling · B A for the targeted weights of `model` (fp32 on the CPU): `base` holds W
// (all_params(model.base()) names; fp32), `adapters` the adapters. Returns the rows [first_row,
// first_row + rows) of the merged weight `name` when it is a target, else nullopt.
std::optional<at::Tensor> merged_rows(const LoraModel& model, const std::map<std::string, at::Tensor>& adapters,
                                      const std::string& name, const at::Tensor& base_rows, int64_t first_row);

// ---- Evaluation mode ----
// Inside a NoDropoutScope the forwards of this thread draw no dropout (LoRA's lora_dropout, the only
// dropout the models have), as transformers' model.eval() makes the forward deterministic. Training forwards run outside any scope.

class NoDropoutScope {
 public:
  NoDropoutScope();
  ~NoDropoutScope();
  NoDropoutScope(const NoDropoutScope&) = delete;
  NoDropoutScope& operator=(const NoDropoutScope&) = delete;

 private:
  bool previous_;
};

// False inside a NoDropoutScope on the calling thread.
bool dropout_enabled();

}  // namespace tierzero::engine
