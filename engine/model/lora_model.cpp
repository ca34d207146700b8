// LoraModel (functional_model.h, LoRA): PEFT's target matching, the adapters as the model's parameters, and the
// projector that adds them to the frozen base's projections.
#include "engine/model/functional_model.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <regex>
#include <set>

#include "engine/config/ds_config.h"
#include "engine/model/internal/frozen_weights.h"

namespace tierzero::engine {
namespace {

constexpr std::string_view kWeightSuffix = ".weight";

// The module path of a linear weight parameter of a decoder layer, or "" when `spec` is none.
std::string linear_module(const FunctionalModel& base, size_t unit, const ParamSpec& spec) {
  if (unit == 0 || unit + 1 >= base.num_units() || spec.shape.size() != 2 || !spec.name.ends_with(kWeightSuffix))
    return "";
  return spec.name.substr(0, spec.name.size() - kWeightSuffix.size());
}

// Unit u's adapters (`params`, its unit_params order) by their weight's position in the base unit.
std::map<size_t, LoraProjector::Adapter> unit_adapters(const std::vector<LoraTarget>& targets, size_t u,
                                                       at::TensorList params) {
  std::map<size_t, LoraProjector::Adapter> adapters;
  size_t next = 0;
  for (const LoraTarget& t : targets) {
    if (t.unit != u) continue;
    adapters[t.weight_index] = LoraProjector::Adapter{params[next], params[next + 1]};
    next += 2;
  }
  return adapters;
}

}  // namespace

double LoraSpec::scaling() const {
  return use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r)) : lora_alpha / static_cast<double>(r);
}

Result<std::vector<LoraTarget>> lora_targets(const FunctionalModel& base, const LoraSpec& spec) {
  if (spec.r < 1) return invalid_argument(fmt::format("LoRA rank r must be >= 1, got {}", spec.r));
  if (!(spec.lora_alpha > 0.0)) return invalid_argument(fmt::format("lora_alpha must be > 0, got {}", spec.lora_alpha));
  if (!(spec.dropout >= 0.0 && spec.dropout < 1.0))
    return invalid_argument(fmt::format("lora_dropout must be in [0, 1), got {}", spec.dropout));
  if (!spec.target_pattern.empty() && spec.target_pattern != "all-linear") {
    try {
      std::regex check(spec.target_pattern);
    } catch (const std::regex_error& e) {
      return invalid_argument(
          fmt::format("LoRA target_modules \"{}\" is not a valid regular expression: {}", spec.target_pattern, e.what()));
    }
  }
  std::vector<LoraTarget> targets;
  std::set<std::string> short_names;
  for (size_t u = 0; u < base.num_units(); ++u) {
    const std::vector<ParamSpec>& params = base.unit_params(u);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string module = linear_module(base, u, params[i]);
      if (module.empty()) continue;
      short_names.insert(module.substr(module.rfind('.') + 1));
      if (!lora_targets_module(spec.target_modules, spec.target_pattern, module)) continue;
      targets.push_back(LoraTarget{.module = module,
                                   .unit = u,
                                   .weight_index = i,
                                   .in_features = params[i].shape[1],
                                   .out_features = params[i].shape[0]});
    }
  }
  if (targets.empty()) {
    const std::string given = spec.target_pattern.empty() ? fmt::format("[{}]", fmt::join(spec.target_modules, ", "))
                                                          : "\"" + spec.target_pattern + "\"";
    return invalid_argument(fmt::format(
        "LoRA target_modules {} match no linear module of the model; its linear modules are {} (in every layer, "
        "e.g. model.layers.0.self_attn.q_proj), or use \"all-linear\"; the embedding and the LM head are not adapted",
        given, fmt::join(short_names, ", ")));
  }
  return targets;
}

namespace {
thread_local bool dropout_on = true;  // false inside a NoDropoutScope
}  // namespace

NoDropoutScope::NoDropoutScope() : previous_(dropout_on) { dropout_on = false; }
NoDropoutScope::~NoDropoutScope() { dropout_on = previous_; }
bool dropout_enabled() { return dropout_on; }

at::Tensor LoraProjector::project(size_t weight_index, const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& bias) const {
  at::Tensor result = inner_.project(weight_index, x, weight, bias);
  auto it = adapters_.find(weight_index);
  if (it == adapters_.end()) return result;
  // PEFT's Linear.forward: result + lora_B(lora_A(dropout(x))) * scaling.
  const at::Tensor dropped = dropout_ > 0.0 && dropout_enabled() ? at::dropout(x, dropout_, /*train=*/true) : x;
  return result + at::linear(at::linear(dropped, it->second.a), it->second.b) * scaling_;
}

Result<std::unique_ptr<LoraModel>> LoraModel::create(std::unique_ptr<FunctionalModel> base, const LoraSpec& spec,
                                                     ParamSource& base_weights, at::ScalarType dtype,
                                                     at::Device device, const FrozenPlacement& placement) {
  TZ_ASSIGN_OR_RETURN(std::vector<LoraTarget> targets, lora_targets(*base, spec));
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<FrozenWeights> frozen,
                      FrozenWeights::load(*base, base_weights, dtype, device, placement));
  return std::unique_ptr<LoraModel>(new LoraModel(std::move(base), spec, std::move(targets), std::move(frozen)));
}

LoraModel::LoraModel(std::unique_ptr<FunctionalModel> base, LoraSpec spec, std::vector<LoraTarget> targets,
                     std::unique_ptr<FrozenWeights> frozen)
    : base_(std::move(base)),
      spec_(std::move(spec)),
      targets_(std::move(targets)),
      units_(base_->num_units()),
      frozen_(std::move(frozen)) {
  for (const LoraTarget& t : targets_) {
    units_[t.unit].push_back({t.a_name(), {spec_.r, t.in_features}});
    units_[t.unit].push_back({t.b_name(), {t.out_features, spec_.r}});
  }
}

LoraModel::~LoraModel() = default;

int64_t LoraModel::frozen_bytes() const { return frozen_->bytes(); }
FrozenHome LoraModel::frozen_home() const { return frozen_->home(); }
std::string LoraModel::frozen_where() const { return frozen_->where(); }
int64_t LoraModel::frozen_pinned_bytes() const { return frozen_->pinned_bytes(); }
int64_t LoraModel::frozen_nvme_bytes() const { return frozen_->nvme_bytes(); }
int64_t LoraModel::frozen_pool_bytes() const { return frozen_->pool_bytes(); }
uint64_t LoraModel::take_frozen_read_bytes() const { return frozen_->take_nvme_read_bytes(); }

at::Tensor LoraModel::forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                                        const Projector& projector) const {
  const std::vector<ParamSpec>& specs = unit_params(u);
  if (params.size() != specs.size())
    throw Error(invalid_argument(
        fmt::format("LoraModel::forward_unit: unit {} takes {} adapter tensors, got {}", u, specs.size(), params.size())));
  const std::vector<at::Tensor> weights = frozen_->unit(u, input.device());
  return base_->forward_unit_with(u, input, weights,
                                  LoraProjector(projector, unit_adapters(targets_, u, params), spec_.scaling(), spec_.dropout));
}

at::Tensor LoraModel::forward_unit_cached(size_t u, const at::Tensor& input, at::TensorList params,
                                          const Projector& projector, LayerKvCache& cache) const {
  if (params.size() != unit_params(u).size())
    throw Error(invalid_argument(fmt::format("LoraModel::forward_unit_cached: unit {} takes {} adapter tensors, got {}",
                                             u, unit_params(u).size(), params.size())));
  const std::vector<at::Tensor> weights = frozen_->unit(u, input.device());
  return base_->forward_unit_cached(
      u, input, weights, LoraProjector(projector, unit_adapters(targets_, u, params), spec_.scaling(), spec_.dropout),
      cache);
}

}  // namespace tierzero::engine
