#include "engine/train/internal/evaluation.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>


namespace tierzero::engine::trainer {
namespace {

// Samples of `n` that rank `rank` of `world` evaluates: rank, rank + world, ...
int64_t share_of(int64_t n, int rank, int world) { return rank < n ? (n - rank + world - 1) / world : 0; }

// Rows [first, first + count) of a rank's share as [count, seq_len] tensors; with count 0, one row
// of sample 0 whose targets are all -100 (it keeps the ranks' collectives in step and adds nothing).
Result<std::pair<at::Tensor, at::Tensor>> read_rows(const SampleSource& samples, int64_t first, int64_t count,
                                                    int rank, int world) {
  const int64_t seq_len = samples.seq_len();
  const int64_t rows = count > 0 ? count : 1;
  at::Tensor ids = at::empty({rows, seq_len}, at::kLong);
  at::Tensor targets = at::empty({rows, seq_len}, at::kLong);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t sample = count > 0 ? (first + row) * world + rank : 0;
    TZ_RETURN_IF_ERROR(samples.read(sample, ids[row].data_ptr<int64_t>(), targets[row].data_ptr<int64_t>()));
  }
  if (count == 0) targets.fill_(kIgnoreIndex);
  return std::make_pair(ids, targets);
}

}  // namespace

Result<Evaluator> Evaluator::create(std::shared_ptr<const SampleSource> samples, std::string path,
                                    int64_t micro_batch, int rank, int world_size, int64_t vocab) {
  const int64_t n = samples->size(), seq_len = samples->seq_len();
  Evaluator evaluator(std::move(samples), std::move(path), micro_batch, rank, world_size);
  std::vector<int64_t> ids(static_cast<size_t>(seq_len)), targets(ids.size());
  for (int64_t sample = 0; sample < n; ++sample) {
    TZ_RETURN_IF_ERROR(evaluator.samples_->read(sample, ids.data(), targets.data()));
    for (int64_t t = 0; t < seq_len; ++t) {
      const int64_t id = ids[static_cast<size_t>(t)], target = targets[static_cast<size_t>(t)];
      const bool id_ok = id >= 0 && id < vocab;
      if (!id_ok || (target != kIgnoreIndex && (target < 0 || target >= vocab)))
        return invalid_argument(fmt::format(
            "eval data {}: sample {} holds token id {}, outside the model's vocabulary (vocab_size {}): the data was "
            "tokenized for another model; tokenize it with this model's tokenizer",
            evaluator.path_, sample, id_ok ? target : id, vocab));
      evaluator.target_tokens_ += target != kIgnoreIndex;
    }
  }
  if (evaluator.target_tokens_ == 0)
    return invalid_argument(fmt::format("eval data {}: none of its {} samples has a target token that carries loss "
                                        "(every label is -100), so there is nothing to evaluate",
                                        evaluator.path_, n));
  return evaluator;
}

Result<EvalResult> Evaluator::run(ZeroEngine& engine, int64_t step) const {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = samples_->size();
  const int64_t mine = share_of(n, rank_, world_size_);
  const int64_t passes = (share_of(n, 0, world_size_) + micro_batch_ - 1) / micro_batch_;  // rank 0's is largest
  const at::TensorOptions on_device = at::TensorOptions().dtype(at::kDouble).device(engine.comm().device());
  at::Tensor loss_sum = at::zeros({}, on_device);
  int64_t tokens = 0;
  for (int64_t pass = 0; pass < passes; ++pass) {
    const int64_t first = pass * micro_batch_;
    const int64_t count = std::max<int64_t>(0, std::min(micro_batch_, mine - first));
    TZ_ASSIGN_OR_RETURN(auto batch, read_rows(*samples_, first, count, rank_, world_size_));
    loss_sum = loss_sum + queue_eval_loss_sum(engine, batch.first, batch.second);
    tokens += batch.second.ne(kIgnoreIndex).sum().item<int64_t>();
  }
  at::Tensor sums = at::stack({loss_sum, at::full({}, static_cast<double>(tokens), on_device)});
  if (world_size_ > 1) engine.comm().all_reduce_sum(sums).wait();
  const at::Tensor host = sums.cpu();
  EvalResult result;
  result.step = step;
  result.tokens = static_cast<int64_t>(host[1].item<double>());
  result.loss = host[0].item<double>() / host[1].item<double>();
  result.perplexity = std::exp(result.loss);
  result.samples = n;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string format_eval_line(const EvalResult& r, int64_t last_step) {
  return fmt::format("eval: step {:5}/{}  loss {:.4f}  perplexity {:.4g}  tokens {}  samples {}  {:.2f}s", r.step,
                     last_step, r.loss, r.perplexity, r.tokens, r.samples, r.seconds);
}

}  // namespace tierzero::engine::trainer
