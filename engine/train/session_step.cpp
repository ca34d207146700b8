#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/train/internal/epochs.h"
#include "engine/train/internal/session.h"

namespace tierzero::engine::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A token id outside [0, vocab) would index past the embedding (a target may also be the ignore
// index): kInvalidArgument naming the data file, the sample, the id and the fix.
Status check_token_ids(const MicroBatch& batch, int64_t vocab, const std::string& data_path) {
  for (size_t i = 0; i < batch.input_ids.size(); ++i) {
    const int64_t id = batch.input_ids[i], target = batch.targets[i];
    const bool id_ok = id >= 0 && id < vocab;
    if (id_ok && (target == kIgnoreIndex || (target >= 0 && target < vocab))) continue;
    const size_t row = i / static_cast<size_t>(batch.seq_len);
    return invalid_argument(fmt::format(
        "{}: sample {} holds token id {}, outside the model's vocabulary (vocab_size {}): the data was tokenized for "
        "another model; tokenize it with this model's tokenizer (tierzero data prepare --model MODEL_DIR)",
        data_path, row < batch.sample_indices.size() ? batch.sample_indices[row] : 0, id_ok ? target : id, vocab));
  }
  return Status();
}

// One micro-batch as tensors [B, T].
std::pair<at::Tensor, at::Tensor> to_tensors(MicroBatch& batch) {
  at::Tensor ids = at::from_blob(batch.input_ids.data(), {batch.batch_size, batch.seq_len}, at::kLong);
  at::Tensor targets = at::from_blob(batch.targets.data(), {batch.batch_size, batch.seq_len}, at::kLong);
  return {ids.clone(), targets.clone()};
}

// The seed of a random forward's draws (LoRA dropout) in step `step` on rank `rank`: a function of
// the run's --seed, the step and the rank only, so a resumed run draws what an unbroken one would and
// ranks draw independently (splitmix64's finaliser over the three).
uint64_t step_seed(uint64_t seed, int64_t step, int rank) {
  uint64_t z = seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(rank) << 48);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Seeds `device`'s default generator, which a random forward draws from, with `seed`.
void seed_device_generator(at::Device device, uint64_t seed) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(seed);
}

}  // namespace

Result<StepRecord> TrainingSession::run_step(int64_t step) {
  reset_step_peaks(device_);
  if (network_->forward_is_random()) seed_device_generator(device_, step_seed(args_.init_seed, step, comm_->rank()));
  const auto step_start = Clock::now();
  const int64_t accumulation = config_.config.batch.gradient_accumulation_steps;
  const double loss_scale = scaler_->scale();
  StepRecord record;
  record.step = step + 1;
  record.steps = last_step_;
  record.lr = schedule_->lr();

  // The losses stay on the device until the step is done (summed in double, as the host would):
  // reading one per micro-batch would make the host wait for each backward before queuing the next.
  std::vector<TokenBatch> window;
  for (int64_t micro = 0; micro < accumulation; ++micro) {
    TZ_ASSIGN_OR_RETURN(MicroBatch batch, data_.batches->next());
    TZ_RETURN_IF_ERROR(check_token_ids(batch, model_.config.vocab_size, data_.path));
    if (args_.on_micro_batch) args_.on_micro_batch(batch.sample_indices);
    auto [ids, targets] = to_tensors(batch);
    window.push_back({std::move(ids), std::move(targets)});
  }
  record.epoch = epochs_done(*data_.batches);
  at::Tensor loss_sum;
  engine_->plan_step(record.lr, loss_scale);  // lets the optimizer start inside the window's backward
  for (const at::Tensor& loss : engine_->queue_window(window, loss_scale / static_cast<double>(accumulation)))
    loss_sum = loss_sum.defined() ? loss_sum + loss.to(at::kDouble) : loss.to(at::kDouble);
  const StepOutcome outcome = engine_->step(record.lr, loss_scale);
  TZ_RETURN_IF_ERROR(scaler_->update(outcome.overflow));
  if (!outcome.overflow) schedule_->step();

  record.loss = engine_->mean_over_ranks(loss_sum.item<double>() / static_cast<double>(accumulation));
  record.seconds = seconds_since(step_start);
  record.grad_norm = outcome.grad_norm;
  record.overflow = outcome.overflow;
  record.tokens_per_s = static_cast<double>(tokens_per_step_) / record.seconds;
  record.tflops = flops_per_step_ / record.seconds / 1e12;
  record.memory = measure_memory(device_, *engine_, lora_ != nullptr ? lora_->frozen_pinned_bytes() : 0,
                                 lora_ != nullptr ? lora_->frozen_nvme_bytes() : 0);
  if (config_.config.wall_clock_breakdown) record.times = engine_->last_step_times();
  if (record.memory.nvme_bytes > 0) {
    record.nvme_io = engine_->nvme_traffic();
    if (lora_ != nullptr) record.nvme_io->step_read_bytes += lora_->take_frozen_read_bytes();  // the base on NVMe
  }
  return record;
}

}  // namespace tierzero::engine::trainer
