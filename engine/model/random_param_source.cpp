// The trainer's random initialisation as a parameter source: init_parameters' values without the
// whole model in memory (functional_model.h: random_init_params).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/model/internal/init_value.h"

namespace tierzero::engine {
namespace {

class RandomInitSource final : public ParamSource {
 public:
  RandomInitSource(const ModelConfig& config, uint64_t seed)
      : config_(config), generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
    const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
    for (const ParamSpec& spec : all_params(*model)) {
      index_.emplace(spec.name, entries_.size());
      entries_.push_back(Entry{.spec = spec, .state = {}});
    }
  }

  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return entries_[it->second].spec.shape;
  }

  Status read(const std::string& name, int64_t first, std::span<float> out) override {
    auto it = index_.find(name);
    if (it == index_.end()) return not_found("parameter " + name + " is not one of the model's");
    if (cached_name_ != name) {
      cached_ = at::Tensor();  // one parameter held at a time
      cached_ = draw(it->second).reshape(-1);
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
    at::Tensor state;  // the generator's state before the parameter's draws, once known; undefined for constants
  };

  // Parameter k's value. The parameters are drawn from one generator in all_params order, so k's
  // start state is known once every parameter before it was drawn: the frontier moves forward only
  // as far as a read needs (a read in order draws each parameter once), and a parameter behind it
  // is drawn again from its recorded state.
  at::Tensor draw(size_t k) {
    for (; frontier_ < k; ++frontier_) advance_past(frontier_);
    if (k == frontier_) {
      ++frontier_;
      return advance_past(k);
    }
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
    if (entries_[k].state.defined()) generator.set_state(entries_[k].state);
    return init_value(entries_[k].spec, config_, generator);
  }

  // Records parameter k's start state and draws it with the frontier's generator (k == frontier_).
  at::Tensor advance_past(size_t k) {
    if (init_value_draws(entries_[k].spec)) entries_[k].state = generator_.get_state();
    return init_value(entries_[k].spec, config_, generator_);
  }

  ModelConfig config_;
  std::vector<Entry> entries_;  // all_params order
  std::map<std::string, size_t> index_;
  at::Generator generator_;  // at the start of parameter frontier_'s draws
  size_t frontier_ = 0;
  std::string cached_name_;
  at::Tensor cached_;  // the last parameter read, whole, fp32
};

}  // namespace

std::unique_ptr<ParamSource> random_init_params(const ModelConfig& config, uint64_t seed) {
  return std::make_unique<RandomInitSource>(config, seed);
}

}  // namespace tierzero::engine
