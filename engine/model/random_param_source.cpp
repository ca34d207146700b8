// The trainer's random initialisation as a parameter source: init_parameters' values without the
// whole model in memory (functional_model.h: random_init_params).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cstring>
#include <map>

#include "engine/model/functional_model.h"
#include "engine/model/internal/init_value.h"

namespace tierzero::engine {
namespace {

class RandomInitSource final : public ParamSource {
 public:
  RandomInitSource(const ModelConfig& config, uint64_t seed) : config_(config) {
    const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const ParamSpec& spec : all_params(*model)) {
      Entry entry{.spec = spec, .state = {}};
      if (init_value_draws(spec)) entry.state = generator.get_state();
      init_value(spec, config, generator);  // advances the generator past this parameter's draws
      entries_.emplace(spec.name, std::move(entry));
    }
  }

  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    return it->second.spec.shape;
  }

  Status read(const std::string& name, int64_t first, std::span<float> out) override {
    auto it = entries_.find(name);
    if (it == entries_.end()) return not_found("parameter " + name + " is not one of the model's");
    if (cached_name_ != name) {
      cached_ = at::Tensor();  // one parameter held at a time
      at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
      if (it->second.state.defined()) generator.set_state(it->second.state);
      cached_ = init_value(it->second.spec, config_, generator).reshape(-1);
      cached_name_ = name;
    }
    const auto count = static_cast<int64_t>(out.size());
    if (first < 0 || first + count > cached_.numel())
      return invalid_argument(
          fmt::format("parameter {}: elements [{}, {}) are past its {}", name, first, first + count, cached_.numel()));
    std::memcpy(out.data(), cached_.const_data_ptr<float>() + first, out.size_bytes());
    return {};
  }

 private:
  struct Entry {
    ParamSpec spec;
    at::Tensor state;  // the generator's state before the parameter's draws; undefined for constants
  };
  ModelConfig config_;
  std::map<std::string, Entry> entries_;
  std::string cached_name_;
  at::Tensor cached_;  // the last parameter read, whole, fp32
};

}  // namespace

std::unique_ptr<ParamSource> random_init_params(const ModelConfig& config, uint64_t seed) {
  return std::make_unique<RandomInitSource>(config, seed);
}

}  // namespace tierzero::engine
