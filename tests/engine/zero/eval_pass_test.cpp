// The forward-only evaluation pass (zero_engine.h, "Evaluation") on one CPU rank: its loss sum is the summed
// cross-entropy of the plain reference forward (forward_full, plain autograd-free ATen) on the same
// weights, at stage 0 and at stage 3 (parameters gathered unit by unit, offloaded or not); at
// stage 3 nothing stays gathered after it, and the training step after it gathers as the step
// without it does (the trace is followed from its start again, so the step's prefetches and reuse
// are unchanged) and gives the same loss, bit for bit.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

#include "engine/zero/zero_engine.h"
#include "engine/zero/internal/sharded_partitioner.h"
#include "tests/engine/zero/scenario.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

constexpr int64_t kBatch = 3, kSeqLen = 8;

at::Tensor tokens(uint64_t seed, int64_t vocab) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {kBatch, kSeqLen}, generator, at::kLong);
}

struct TwoSteps {
  double loss_after_eval = 0.0;  // the training step's loss after an evaluation (or none)
  int64_t live_after_eval = -1;  // stage 3: gathered elements left after the evaluation
  int64_t step_gathers = 0;      // stage 3: all-gathers of the step after the evaluation
};

int64_t all_gathers(ZeroEngine& engine) {
  auto* sharded = dynamic_cast<ShardedPartitioner*>(&engine.partitioner());
  return sharded != nullptr ? sharded->stats().all_gathers : 0;
}

// Two training steps on `options`, with an evaluation of `eval_ids` between them when `evaluate`.
TwoSteps train(const ZeroEngineOptions& options, bool evaluate, double* eval_sum = nullptr) {
  const ModelConfig config = test_model_config(/*tied=*/true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
  ZeroEngine engine(*model, init_parameters(config, 42, at::kFloat, at::kCPU), options, *comm);
  TwoSteps run;
  const at::Tensor ids = tokens(1, config.vocab_size), targets = tokens(2, config.vocab_size);
  engine.forward_backward(ids, targets, 1.0);
  engine.step(1e-2, 1.0);
  if (evaluate) {
    at::Tensor eval_targets = tokens(4, config.vocab_size);
    eval_targets.index_put_({0, at::indexing::Slice(0, 3)}, -100);  // some positions carry no loss
    const double sum = queue_eval_loss_sum(engine, tokens(3, config.vocab_size), eval_targets).item<double>();
    if (eval_sum != nullptr) *eval_sum = sum;
    if (auto* sharded = dynamic_cast<ShardedPartitioner*>(&engine.partitioner()))
      run.live_after_eval = sharded->stats().live_numel;
  }
  const int64_t before = all_gathers(engine);
  run.loss_after_eval = engine.forward_backward(ids, targets, 1.0);
  engine.step(1e-2, 1.0);
  run.step_gathers = all_gathers(engine) - before;
  return run;
}

// The reference: the weights after the first step (the same step replayed on a stage 0 engine,
// then read back as master_params), through forward_full and cross_entropy with a sum.
double reference_sum() {
  const ModelConfig config = test_model_config(/*tied=*/true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
  ZeroEngine engine(*model, init_parameters(config, 42, at::kFloat, at::kCPU), ZeroEngineOptions{}, *comm);
  engine.forward_backward(tokens(1, config.vocab_size), tokens(2, config.vocab_size), 1.0);
  engine.step(1e-2, 1.0);
  at::Tensor targets = tokens(4, config.vocab_size);
  targets.index_put_({0, at::indexing::Slice(0, 3)}, -100);
  const at::Tensor logits = forward_full(*model, tokens(3, config.vocab_size), engine.master_params());
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape(-1), {}, at::Reduction::Sum,
                                -100)
      .item<double>();
}

ZeroEngineOptions stage3(bool offload_params) {
  ZeroEngineOptions options;
  options.partition.stage = 3;
  options.partition.persistence_threshold = 0;  // every parameter gathered for its use
  options.partition.offload_params = offload_params;
  options.offload_optimizer = offload_params;  // offloaded parameters need the CPU optimizer
  return options;
}

TEST(EvalPass, SumsTheReferenceCrossEntropyAtEveryStage) {
  const double want = reference_sum();
  for (const auto& [name, options] : std::map<std::string, ZeroEngineOptions>{
           {"stage 0", ZeroEngineOptions{}}, {"stage 3", stage3(false)}, {"stage 3 offloaded", stage3(true)}}) {
    double got = 0.0;
    train(options, /*evaluate=*/true, &got);
    EXPECT_NEAR(got, want, 1e-5 * want) << name;
  }
}

TEST(EvalPass, LeavesNothingGatheredAndTheNextStepAsWithoutIt) {
  for (bool offload : {false, true}) {
    const TwoSteps with = train(stage3(offload), /*evaluate=*/true);
    const TwoSteps without = train(stage3(offload), /*evaluate=*/false);
    EXPECT_EQ(with.live_after_eval, 0) << "offload " << offload;
    EXPECT_EQ(with.loss_after_eval, without.loss_after_eval) << "offload " << offload << ": bit for bit";
    // Following the trace from its start, the step keeps and prefetches as the step without an
    // evaluation before it (off the trace it would keep nothing and gather more).
    EXPECT_EQ(with.step_gathers, without.step_gathers) << "offload " << offload;
    EXPECT_GT(without.step_gathers, 0);
  }
}

// A LoRA model with dropout evaluates without it (transformers' model.eval()): two evaluations of
// the same weights agree, and equal the same model built without dropout.
double lora_eval_sum(double dropout) {
  const ModelConfig config = test_model_config(/*tied=*/false);
  LoraSpec spec;
  spec.r = 4;
  spec.lora_alpha = 8.0;
  spec.target_pattern = "all-linear";
  spec.dropout = dropout;
  std::unique_ptr<ParamSource> base = random_init_params(config, 11);
  std::unique_ptr<LoraModel> model =
      value_or_throw(LoraModel::create(make_causal_lm(config), spec, *base, at::kFloat, at::kCPU, FrozenHome::kDevice));
  std::map<std::string, at::Tensor> adapters;
  at::Generator generator = at::detail::createCPUGenerator(5);
  for (const ParamSpec& p : all_params(*model)) adapters[p.name] = at::randn(p.shape, generator) * 0.2;  // B not zero
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
  ZeroEngine engine(*model, adapters, ZeroEngineOptions{}, *comm);
  const at::Tensor ids = tokens(3, config.vocab_size), targets = tokens(4, config.vocab_size);
  const double first = queue_eval_loss_sum(engine, ids, targets).item<double>();
  EXPECT_EQ(queue_eval_loss_sum(engine, ids, targets).item<double>(), first) << "dropout " << dropout;
  return first;
}

TEST(EvalPass, LoraDropoutIsOff) { EXPECT_EQ(lora_eval_sum(0.5), lora_eval_sum(0.0)); }

}  // namespace
}  // namespace tierzero::engine::testing
