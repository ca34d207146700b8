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
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine {

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
  kPinnedHost,    // in pinned host memory, copied for each use (kPageableHost on a machine without CUDA)
  kPageableHost,  // in pageable host memory, copied for each use
};

class LoraModel : public FunctionalModel {
 public:
  // Adapts `base` as `spec` says. Every base parameter is read from `base_weights` (fp32 pieces),
  // cast to `dtype` and kept in `home` (kDevice: on `device`). Errors name the target or the tensor.
  static Result<std::unique_ptr<LoraModel>> create(std::unique_ptr<FunctionalModel> base, const LoraSpec& spec,
                                                   ParamSource& base_weights, at::ScalarType dtype, at::Device device,
                                                   FrozenHome home);
  ~LoraModel() override;

  size_t num_units() const override { return base_->num_units(); }
  // The adapters of unit u: for each target in it, lora_A [r, in] then lora_B [out, r].
  const std::vector<ParamSpec>& unit_params(size_t u) const override { return units_.at(u); }
  // The base unit on its frozen weights (copied to the input's device first when offloaded),
  // with `projector` for every projection and scaling · B (A x) added to the targeted ones.
  // `params` are the unit's adapters in unit_params(u) order.
  at::Tensor forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                               const Projector& projector) const override;
  const ModelConfig& config() const override { return base_->config(); }

  const FunctionalModel& base() const { return *base_; }
  const LoraSpec& spec() const { return spec_; }
  const std::vector<LoraTarget>& targets() const { return targets_; }
  // Bytes the frozen base weights take in their home.
  int64_t frozen_bytes() const;
  FrozenHome frozen_home() const;

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
// CAUSAL_LM, r, lora_alpha, use_rslora, lora_dropout 0, bias "none", target_modules as the spec
// gives them, base_model_name_or_path `base_model`) and adapter_model.safetensors (fp32 tensors
// named "base_model.model.<module>.lora_A.weight"). Errors name the file.
Status save_peft_adapter(const std::string& dir, const LoraModel& model,
                         const std::map<std::string, at::Tensor>& adapters, const std::string& base_model);

// W + scaling · B A for the targeted weights of `model` (fp32 on the CPU): `base` holds W
// (all_params(model.base()) names; fp32), `adapters` the adapters. Returns the rows [first_row,
// first_row + rows) of the merged weight `name` when it is a target, else nullopt.
std::optional<at::Tensor> merged_rows(const LoraModel& model, const std::map<std::string, at::Tensor>& adapters,
                                      const std::string& name, const at::Tensor& base_rows, int64_t first_row);

}  // namespace tierzero::engine
