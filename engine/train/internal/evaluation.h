// Private: held-out evaluation during `tierzero train` (--eval-data FILE or --eval-fraction F,
// --eval-every N). The eval set is a SampleSource of its own: a second data file read with the same
// readers and loss masks as --data (token files, JSONL of ids, JSONL text / prompt-completion / chat
// rows with the model's tokenizer), or the samples split_held_out() took from the training file.
//
// What an evaluation computes: loss = (sum over every eval sample and every position whose target is
// not -100 of the cross-entropy of the model's fp32 logits) / (the number of those positions), the
// mean over the set's target tokens — not a mean of per-batch means — and perplexity = exp(loss).
// It is transformers' loss over the same tokens taken as one batch.
//
// How: rank r of W evaluates samples r, r + W, r + 2W, ... in ascending order, in batches of the
// training micro-batch size, through queue_eval_loss_sum (engine/zero/zero_engine.h, "Evaluation": the training
// forward's unit-by-unit path, no gradients, training state unchanged); then the loss sums and target
// counts of all ranks are all-reduced (in double), so the figure does not depend on the world size.
// Every rank runs the same number of batches (stage 3 gathers in each): a rank whose share is
// exhausted runs a batch whose targets are all -100, which adds nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/common.h"
#include "engine/data/token_data.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {

struct EvalResult {
  int64_t step = 0;      // the optimizer step after which it ran
  double loss = 0.0;     // mean cross-entropy over the target tokens
  double perplexity = 0.0;
  int64_t tokens = 0;    // target tokens (label != -100) of the whole set
  int64_t samples = 0;   // samples of the whole set
  double epoch = 0.0;    // epochs of the training data done at `step` (epochs.h)
  double seconds = 0.0;
};

class Evaluator {
 public:
  // The eval set `samples` (from `path`, or "PATH (held out)"), evaluated by `rank` of `world_size`
  // in batches of `micro_batch`. kInvalidArgument naming `path` when the set holds no target token
  // (the readers refuse a file without a sample), or a token id outside [0, vocab) (read once, here,
  // before any training).
  static Result<Evaluator> create(std::shared_ptr<const SampleSource> samples, std::string path, int64_t micro_batch,
                                  int rank, int world_size, int64_t vocab);

  // Evaluates the engine's current weights. A collective: every rank calls it.
  Result<EvalResult> run(ZeroEngine& engine, int64_t step) const;

  const std::string& path() const { return path_; }
  int64_t samples() const { return samples_->size(); }
  int64_t target_tokens() const { return target_tokens_; }

 private:
  Evaluator(std::shared_ptr<const SampleSource> samples, std::string path, int64_t micro_batch, int rank,
            int world_size)
      : samples_(std::move(samples)), path_(std::move(path)), micro_batch_(micro_batch), rank_(rank),
        world_size_(world_size) {}
  std::shared_ptr<const SampleSource> samples_;
  std::string path_;
  int64_t micro_batch_ = 1;
  int rank_ = 0;
  int world_size_ = 1;
  int64_t target_tokens_ = 0;
};

// The eval line: "eval: step    12/100  loss 2.3456  perplexity 10.45  tokens 12345  samples 40  0.52s".
std::string format_eval_line(const EvalResult& result, int64_t last_step);

}  // namespace tierzero::engine::trainer
