#include "engine/train/internal/epochs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tierzero::engine::trainer {

int64_t steps_for_epochs(double epochs, int64_t micro_batches_per_epoch, int64_t accumulation) {
  // The tolerance keeps 0.3 x 10 micro-batches (2.9999999999999996 in double) at 3.
  const double micro_batches = epochs * static_cast<double>(micro_batches_per_epoch);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(micro_batches / static_cast<double>(accumulation) - 1e-9)));
}

double epochs_done(const MicroBatchIterator& data) {
  const int64_t per_epoch = data.micro_batches_per_epoch();
  const int64_t consumed = data.position().index / data.micro_batch_size();
  return static_cast<double>(data.position().epoch) + static_cast<double>(consumed) / static_cast<double>(per_epoch);
}

std::string times_seen(double epochs) {
  const auto whole = static_cast<int64_t>(std::floor(epochs + 1e-9));
  if (std::abs(epochs - static_cast<double>(whole)) < 1e-9)
    return fmt::format("each training sample seen {} time{}", whole, whole == 1 ? "" : "s");
  return fmt::format("training samples seen {} or {} times", whole, whole + 1);
}

}  // namespace tierzero::engine::trainer
