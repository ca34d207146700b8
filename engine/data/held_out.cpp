// split_held_out(): the samples a run trains on and those it holds out for evaluation (rule in
// token_data.h).
#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "engine/data/token_data.h"

namespace tierzero::engine {
namespace {

// Samples `indices` of a source, renumbered 0..indices.size()-1.
class SubsetSource final : public SampleSource {
 public:
  SubsetSource(std::shared_ptr<const SampleSource> source, std::vector<int64_t> indices)
      : source_(std::move(source)), indices_(std::move(indices)) {}
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  int64_t seq_len() const override { return source_->seq_len(); }
  Status read(int64_t index, int64_t* input_ids, int64_t* targets) const override {
    if (index < 0 || index >= size())
      return invalid_argument(fmt::format("sample {} is outside the {} samples of this split", index, size()));
    return source_->read(indices_[static_cast<size_t>(index)], input_ids, targets);
  }

 private:
  std::shared_ptr<const SampleSource> source_;
  std::vector<int64_t> indices_;
};

}  // namespace

Result<HeldOutSplit> split_held_out(std::shared_ptr<const SampleSource> source, double fraction, uint64_t seed,
                                    const std::string& what) {
  if (!(fraction > 0.0 && fraction < 1.0))
    return invalid_argument(fmt::format("--eval-fraction {} is outside (0, 1): give the share of {}'s samples to "
                                        "hold out for evaluation, e.g. 0.05",
                                        fraction, what));
  const int64_t n = source->size();
  const auto held = static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n)));
  if (n < 2 || held >= n)
    return invalid_argument(fmt::format("--eval-fraction {} of {}'s {} samples would leave none for training: use a "
                                        "smaller fraction, more data or a shorter seq_len, or pass --eval-data FILE",
                                        fraction, what, n));
  const std::vector<int64_t> order = epoch_permutation(n, seed, kHeldOutDraw);
  std::vector<int64_t> held_out(order.begin(), order.begin() + held);
  std::vector<int64_t> train(order.begin() + held, order.end());
  std::sort(held_out.begin(), held_out.end());
  std::sort(train.begin(), train.end());
  return HeldOutSplit{.train = std::make_shared<SubsetSource>(source, std::move(train)),
                      .held_out = std::make_shared<SubsetSource>(source, std::move(held_out))};
}

}  // namespace tierzero::engine
