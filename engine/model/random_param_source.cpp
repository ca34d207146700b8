// The trainer's random initialisation as a parameter source: init_parameters' values without the
// whole model in memory (functional_model.h: random_init_params), each read drawn on every core,
// the generator's serial skip past each parameter run ahead on a thread of its own.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
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
    frontier_thread_ = std::thread([this] { advance_all(); });
  }
  ~RandomInitSource() override {
    stop_ = true;
    frontier_thread_.join();
  }
  RandomInitSource(const RandomInitSource&) = delete;
  RandomInitSource& operator=(const RandomInitSource&) = delete;

  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return entries_[it->second].spec.shape;
  }

  // Elements [first, first + out.size()) of parameter `name`. The parameters are drawn from one
  // generator in all_params order; the frontier thread moves past each parameter by skipping its
  // draws (drawing only a parameter too small to split), recording where its draws start, from
  // construction on. A read waits for the parameter's record, then draws its range from it straight
  // into `out`, in slices on every core.
  Status read(const std::string& name, int64_t first, std::span<float> out) override {
    auto it = index_.find(name);
    if (it == index_.end()) return not_found("parameter " + name + " is not one of the model's");
    const Entry& entry = entries_[it->second];
    const int64_t numel = numel_of(entry.spec), count = static_cast<int64_t>(out.size());
    if (first < 0 || first + count > numel)
      return invalid_argument(
          fmt::format("parameter {}: elements [{}, {}) are past its {}", name, first, first + count, numel));
    TZ_RETURN_IF_ERROR(wait_for_start(it->second));
    if (!draws_in_chunks(entry.spec)) {  // a constant or a handful of values: drawn whole
      at::Generator generator = entry.start.clone();
      const at::Tensor value = init_value(entry.spec, config_, generator).reshape(-1);
      std::memcpy(out.data(), value.const_data_ptr<float>() + first, out.size_bytes());
      return {};
    }
    fill_normal(entry.chunks, config_.initializer_range, numel, first, out);
    zero_pad_row(entry.spec, first, out);
    return {};
  }

 private:
  struct Entry {
    ParamSpec spec;
    at::Generator start;  // the generator before the parameter's draws, once the frontier passed it
    NormalChunks chunks;  // for a parameter drawn in chunks: their engines
  };

  // init_value's zero pad_token_id row of the embeddings, where it falls in [first, first + out.size()).
  void zero_pad_row(const ParamSpec& spec, int64_t first, std::span<float> out) const {
    const std::optional<int64_t>& pad = config_.pad_token_id;
    if (spec.name != "model.embed_tokens.weight" || !pad || *pad < 0 || *pad >= config_.vocab_size) return;
    const int64_t row = spec.shape.back(), end = first + static_cast<int64_t>(out.size());
    const int64_t lo = std::max(first, *pad * row), hi = std::min(end, (*pad + 1) * row);
    if (lo < hi) std::fill(out.begin() + (lo - first), out.begin() + (hi - first), 0.0f);
  }

  // The frontier thread: every parameter's start recorded in order, each published as it is (or the
  // error that stopped it), until the destructor asks it to stop.
  void advance_all() {
    Status status;
    size_t k = 0;
    for (; k < entries_.size() && !stop_; ++k) {
      try {
        advance_past(k);
      } catch (const Error& e) {
        status = e.status();
      } catch (const std::exception& e) {
        status = internal_error(std::string("random init: skipping the generator past parameters: ") + e.what());
      }
      const std::lock_guard<std::mutex> lock(frontier_mutex_);
      if (!status.ok()) {
        frontier_error_ = status;
        break;
      }
      frontier_ = k + 1;
      frontier_moved_.notify_all();
    }
    const std::lock_guard<std::mutex> lock(frontier_mutex_);
    frontier_done_ = true;
    frontier_moved_.notify_all();
  }

  // Waits until the frontier thread has recorded parameter k's start; its error if it stopped first.
  Status wait_for_start(size_t k) {
    std::unique_lock<std::mutex> lock(frontier_mutex_);
    frontier_moved_.wait(lock, [&] { return frontier_ > k || frontier_done_; });
    if (frontier_ > k) return {};
    return frontier_error_.ok() ? internal_error("random init: the generator stopped before its parameters")
                                : frontier_error_;
  }

  // Records parameter k's start and moves the frontier's generator past its draws (k == frontier_;
  // the frontier thread's).
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
  std::vector<Entry> entries_;  // all_params order; entry k's start and chunks written before frontier_ > k
  std::map<std::string, size_t> index_;
  at::Generator frontier_generator_;  // the frontier thread's: at the start of parameter frontier_'s draws
  std::mutex frontier_mutex_;
  std::condition_variable frontier_moved_;
  size_t frontier_ = 0;         // the parameters whose start is recorded (under frontier_mutex_)
  bool frontier_done_ = false;  // the thread has ended (under frontier_mutex_)
  Status frontier_error_;       // why it ended early (under frontier_mutex_)
  std::atomic<bool> stop_ = false;
  std::thread frontier_thread_;  // last: started once every member above is built
};

}  // namespace

std::unique_ptr<ParamSource> random_init_params(const ModelConfig& config, uint64_t seed) {
  return std::make_unique<RandomInitSource>(config, seed);
}

}  // namespace tierzero::engine
