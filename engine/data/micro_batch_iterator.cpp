// The seeded per-epoch permutation and one rank's micro-batch stream (rules in token_data.h).
#include <utility>

#include "engine/data/token_data.h"

namespace tierzero::engine {
namespace {

// splitmix64 (Steele, Lea, Flood 2014; the generator Java's SplittableRandom uses).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound): draws below 2^64 mod bound are rejected, the rest reduced mod bound.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n > 0 ? n : 0));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  SplitMix64 rng(seed ^ (0x9E3779B97F4A7C15ULL * (epoch + 1)));
  for (size_t i = order.size(); i > 1; --i) {
    const auto j = static_cast<size_t>(rng.below(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

MicroBatchIterator::MicroBatchIterator(std::shared_ptr<const SampleSource> source, const ShardSpec& spec)
    : source_(std::move(source)), spec_(spec), samples_per_rank_(source_->size() / spec.world_size) {}

Result<MicroBatchIterator> MicroBatchIterator::create(std::shared_ptr<const SampleSource> source,
                                                      const ShardSpec& spec) {
  if (!source) return invalid_argument("MicroBatchIterator needs a sample source");
  if (spec.world_size < 1 || spec.rank < 0 || spec.rank >= spec.world_size) {
    return invalid_argument("rank " + std::to_string(spec.rank) + " is outside world size " +
                            std::to_string(spec.world_size));
  }
  if (spec.micro_batch_size < 1) {
    return invalid_argument("train_micro_batch_size_per_gpu must be >= 1, got " +
                            std::to_string(spec.micro_batch_size));
  }
  const int64_t per_rank = source->size() / spec.world_size;
  if (per_rank < spec.micro_batch_size) {
    return invalid_argument("the data holds " + std::to_string(source->size()) + " samples, " +
                            std::to_string(per_rank) + " per rank for " + std::to_string(spec.world_size) +
                            " ranks, fewer than one micro-batch of " + std::to_string(spec.micro_batch_size) +
                            ": use more data, a shorter seq_len or a smaller train_micro_batch_size_per_gpu");
  }
  return MicroBatchIterator(std::move(source), spec);
}

int64_t MicroBatchIterator::sample_at(int64_t p) {
  if (permutation_epoch_ != position_.epoch) {
    permutation_ = epoch_permutation(source_->size(), spec_.seed, static_cast<uint64_t>(position_.epoch));
    permutation_epoch_ = position_.epoch;
  }
  return permutation_[static_cast<size_t>(p * spec_.world_size + spec_.rank)];
}

Result<MicroBatch> MicroBatchIterator::next() {
  if (position_.index + spec_.micro_batch_size > samples_per_rank_) {
    ++position_.epoch;
    position_.index = 0;
  }
  const int64_t seq_len = source_->seq_len();
  MicroBatch batch;
  batch.batch_size = spec_.micro_batch_size;
  batch.seq_len = seq_len;
  batch.input_ids.resize(static_cast<size_t>(batch.batch_size * seq_len));
  batch.targets.resize(batch.input_ids.size());
  for (int64_t row = 0; row < batch.batch_size; ++row) {
    const int64_t sample = sample_at(position_.index + row);
    const auto offset = static_cast<size_t>(row * seq_len);
    TZ_RETURN_IF_ERROR(source_->read(sample, batch.input_ids.data() + offset, batch.targets.data() + offset));
    batch.sample_indices.push_back(sample);
  }
  position_.index += batch.batch_size;
  return batch;
}

nlohmann::json MicroBatchIterator::state() const {
  return {{"epoch", position_.epoch},
          {"index", position_.index},
          {"seed", spec_.seed},
          {"rank", spec_.rank},
          {"world_size", spec_.world_size},
          {"micro_batch_size", spec_.micro_batch_size},
          {"num_samples", source_->size()}};
}

Status MicroBatchIterator::load_state(const nlohmann::json& state) {
  for (const char* key : {"epoch", "index", "seed", "rank", "world_size", "micro_batch_size", "num_samples"}) {
    if (!state.is_object() || !state.contains(key) || !state.at(key).is_number_integer()) {
      return invalid_argument(std::string("data position: '") + key + "' is missing or not an integer in " +
                              state.dump());
    }
  }
  auto must_match = [&](const char* key, int64_t here) -> Status {
    const auto saved = state.at(key).get<int64_t>();
    if (saved == here) return {};
    return invalid_argument(std::string("data position: '") + key + "' was " + std::to_string(saved) +
                            " when saved but is " + std::to_string(here) +
                            " now; resume with the same data, seed, world size and micro-batch size");
  };
  if (state.at("seed").get<uint64_t>() != spec_.seed) {
    return invalid_argument("data position: 'seed' was " + state.at("seed").dump() + " when saved but is " +
                            std::to_string(spec_.seed) + " now; resume with the same tierzero.data.seed");
  }
  TZ_RETURN_IF_ERROR(must_match("world_size", spec_.world_size));
  TZ_RETURN_IF_ERROR(must_match("micro_batch_size", spec_.micro_batch_size));
  TZ_RETURN_IF_ERROR(must_match("num_samples", source_->size()));
  const auto epoch = state.at("epoch").get<int64_t>();
  const auto index = state.at("index").get<int64_t>();
  if (epoch < 0 || index < 0 || index > samples_per_rank_) {
    return invalid_argument("data position: epoch " + std::to_string(epoch) + " index " + std::to_string(index) +
                            " is outside this data (" + std::to_string(samples_per_rank_) + " samples per rank)");
  }
  position_ = DataPosition{epoch, index};
  return {};
}

}  // namespace tierzero::engine
