// The trainer's random initialisation as a parameter source: init_parameters' values without the
// whole model in memory (functional_model.h: random_init_params), each parameter drawn on every core.
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

int64_t numel_of(const ParamSpec& spec) {
  int64_t numel = 1;
  for (int64_t d : spec.shape) numel *= d;
  return numel;
}

// Whether init_value draws `spec` with one normal_ that fill_normal can split (>= 16 elements).
bool draws_in_chunks(const ParamSpec& spec) { return init_value_draws(spec) && numel_of(spec) >= 16; }

class RandomInitSource final : public ParamSource {
 public:
  RandomInitSource(const ModelConfig& config, uint64_t seed)
      : config_(config), frontier_generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
    const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
    for (const ParamSpec& spec : all_params(*model)) {
      index_.emplace(spec.name, entries_.size());
      entries_.push_back(Entry{.spec = spec, .start = {}, .chunks = {}});
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
    at::Generator start;  // the generator before the parameter's draws, once the frontier passed it
    NormalChunks chunks;  // for a parameter drawn in chunks: their engines
  };

  // Parameter k's value. The parameters are drawn from one generator in all_params order; the
  // frontier moves past a parameter by skipping its draws (drawing only a parameter too small to
  // split), as far forward as a read needs, recording where each parameter's draws start. A
  // parameter is then drawn from its record, in chunks on every core.
  at::Tensor draw(size_t k) {
    for (; frontier_ <= k; ++frontier_) advance_past(frontier_);
    const Entry& entry = entries_[k];
    if (!draws_in_chunks(entry.spec)) {
      at::Generator generator = entry.start.clone();
      return init_value(entry.spec, config_, generator);
    }
    at::Tensor value = at::empty(entry.spec.shape, at::kFloat);
    fill_normal(entry.chunks, config_.initializer_range,
                {value.data_ptr<float>(), static_cast<size_t>(value.numel())});
    if (entry.spec.name == "model.embed_tokens.weight" && config_.pad_token_id && *config_.pad_token_id >= 0 &&
        *config_.pad_token_id < config_.vocab_size)
      value[*config_.pad_token_id].zero_();
    return value;
  }

  // Records parameter k's start and moves the frontier's generator past its draws (k == frontier_).
  void advance_past(size_t k) {
    Entry& entry = entries_[k];
    entry.start = frontier_generator_.clone();
    if (!init_value_draws(entry.spec)) return;
    auto* frontier = frontier_generator_.get<at::CPUGeneratorImpl>();
    if (!draws_in_chunks(entry.spec)) {
      (void)init_value(entry.spec, config_, frontier_generator_);
      return;
    }
    entry.chunks = normal_chunks(frontier->engine(), numel_of(entry.spec));
    frontier->set_engine(entry.chunks.end);  // its cached normal samples stay: normal_ in chunks uses none
  }

  ModelConfig config_;
  std::vector<Entry> entries_;  // all_params order
  std::map<std::string, size_t> index_;
  at::Generator frontier_generator_;  // at the start of parameter frontier_'s draws
  size_t frontier_ = 0;
  std::string cached_name_;
  at::Tensor cached_;  // the last parameter read, whole, fp32
};

}  // namespace

std::unique_ptr<ParamSource> random_init_params(const ModelConfig& config, uint64_t seed) {
  return std::make_unique<RandomInitSource>(config, seed);
}

}  // namespace tierzero::engine
