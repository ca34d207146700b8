// Held-out evaluation and epochs through train() on the CPU (the built-in tiny Llama):
//   - a run that evaluates every other step trains exactly the losses of the same run without
//     evaluation, at every ZeRO stage and offload setting (the forward-only pass leaves the training
//     state alone), and every setting evaluates the same loss;
//   - --eval-fraction holds samples out of training;
//   - --epochs gives ceil(E x M / A) steps, each epoch a fresh permutation of every sample, and a run
//     resumed from a checkpoint saved mid-epoch-2 reads exactly the samples, and trains exactly the
//     losses, of the unbroken run;
//   - values that cannot run are refused before the first step, naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "engine/data/token_data.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"
#include "worker_ranks.h"

namespace tierzero::engine::testing {
namespace {

constexpr int64_t kSeqLen = 32;

// A token file of `samples` samples of kSeqLen (samples * kSeqLen + 1 tokens below the tiny
// model's 256), drawn from a seeded generator so the data has something to learn.
std::string write_tokens(const ScratchDir& dir, const std::string& name, int64_t samples, uint32_t seed) {
  std::vector<uint32_t> tokens(static_cast<size_t>(samples * kSeqLen + 1));
  uint32_t state = seed;
  for (size_t i = 0; i < tokens.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    tokens[i] = i % 4 == 3 ? 32 : 97 + (state >> 24) % 26;  // "words" of three letters
  }
  const std::string path = dir / name;
  EXPECT_OK(write_token_file(path, tokens, TokenDtype::kUint16));
  return path;
}

TrainArgs args_for(const ScratchDir& dir, const nlohmann::json& overrides, const std::string& name, int64_t steps,
                   const std::string& data) {
  TrainArgs args = train_args(
      write_config(dir, small_config(overrides.is_null() ? nlohmann::json::object() : overrides), name), steps);
  args.data_path = data;
  return args;
}

struct Setting {
  std::string name;
  nlohmann::json overrides;
};

// Every setting takes 2 micro-batches a step (at stage 3 the window then runs unit by unit).
std::vector<Setting> settings(const ScratchDir& dir) {
  std::filesystem::create_directories(dir / "params");
  std::vector<Setting> all = {
      {"stage 0", {{"zero_optimization", {{"stage", 0}}}}},
      {"stage 2, optimizer on the CPU", {{"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}}}}}}},
      {"stage 3", {{"zero_optimization", {{"stage", 3}, {"stage3_prefetch_bucket_size", 40000}}}}},
      {"stage 3, parameters and optimizer on the CPU",
       {{"zero_optimization",
         {{"stage", 3}, {"sub_group_size", 5000}, {"offload_optimizer", {{"device", "cpu"}}},
          {"offload_param", {{"device", "cpu"}}}}}}},
      {"stage 3, parameters on NVMe",
       {{"zero_optimization",
         {{"stage", 3},
          {"offload_optimizer", {{"device", "cpu"}}},
          {"offload_param",
           {{"device", "nvme"}, {"nvme_path", dir / "params"}, {"buffer_count", 16}, {"buffer_size", 4096},
            {"max_in_cpu", 0}}}}}}},
      {"LoRA with dropout", {{"tierzero", {{"lora", {{"r", 4}, {"lora_alpha", 8}, {"lora_dropout", 0.1},
                                                      {"target_modules", {"q_proj", "v_proj"}}}}}}}},
  };
  for (Setting& s : all) s.overrides["gradient_accumulation_steps"] = 2;
  return all;
}

TEST(EvalTraining, EvaluatingChangesNoTrainingLossAtAnyStageAndEverySettingEvaluatesAlike) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 24, 1);
  const std::string eval = write_tokens(dir, "eval.tok", 5, 2);  // an odd count: the last batch is short
  constexpr int64_t kSteps = 4;
  std::vector<double> first_evals;
  for (const Setting& s : settings(dir)) {
    SCOPED_TRACE(s.name);
    TrainRun plain = run_train(args_for(dir, s.overrides, "plain.json", kSteps, data));
    TrainArgs with_eval = args_for(dir, s.overrides, "eval.json", kSteps, data);
    with_eval.eval_data_path = eval;
    with_eval.eval_every = 1;
    TrainRun evaluated = run_train(with_eval);
    ASSERT_OK(plain.summary);
    ASSERT_OK(evaluated.summary);
    EXPECT_EQ(evaluated.summary->losses, plain.summary->losses) << "bit for bit";
    ASSERT_EQ(evaluated.summary->evals.size(), static_cast<size_t>(kSteps));
    for (int64_t i = 0; i < kSteps; ++i) {
      const EvalPoint& e = evaluated.summary->evals[static_cast<size_t>(i)];
      EXPECT_EQ(e.step, i + 1);
      EXPECT_EQ(e.tokens, 5 * kSeqLen);
      EXPECT_TRUE(std::isfinite(e.loss) && e.loss > 0.0) << e.loss;
      EXPECT_DOUBLE_EQ(e.perplexity, std::exp(e.loss));
    }
    first_evals.push_back(evaluated.summary->evals.front().loss);
    const auto eval_lines = std::count_if(evaluated.lines.begin(), evaluated.lines.end(),
                                          [](const std::string& l) { return l.rfind("eval: step ", 0) == 0; });
    EXPECT_EQ(eval_lines, kSteps);
    EXPECT_NE(evaluated.lines.back().find("| eval loss "), std::string::npos) << evaluated.lines.back();
  }
  // After one step from the same weights every setting has (nearly) the same weights: LoRA aside,
  // whose adapters start at zero and whose first step moves only them.
  for (size_t i = 1; i + 1 < first_evals.size(); ++i) EXPECT_NEAR(first_evals[i], first_evals[0], 1e-4 * first_evals[0]);
}

// Two ranks evaluate their shares and all-reduce the sums. With lr 0 the weights stay the initial
// ones, so the evaluations of one process and of two ranks see the same model; at stage 3 every eval
// batch gathers, and with 5 samples in micro-batches of 2 rank 1's second batch is the padding one.
TEST(EvalTraining, TwoRanksEvaluateWhatOneProcessDoes) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 24, 8);
  const std::string eval = write_tokens(dir, "eval.tok", 5, 9);
  const std::string config = write_config(
      dir, small_config({{"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.0}, {"weight_decay", 0.0}}}}},
                         {"zero_optimization", {{"stage", 3}}},
                         {"tierzero", {{"data", {{"path", data}}}}}}));
  TrainArgs one = train_args(config, 2);
  one.eval_data_path = eval;
  one.eval_every = 1;
  TrainRun single = run_train(one);
  ASSERT_OK(single.summary);
  ASSERT_EQ(single.summary->evals.size(), 2u);
  Ranks two(dir, "two", {"--config", config, "--steps", "2", "--eval-data", eval, "--eval-every", "1", "--evals",
                         dir / "two.evals"});
  ASSERT_EQ(two.wait(240), "");
  std::ifstream in(dir / "two.evals");
  std::vector<double> evals;
  for (double loss; in >> loss;) evals.push_back(loss);
  ASSERT_EQ(evals.size(), 2u);
  for (size_t i = 0; i < evals.size(); ++i) {
    const double want = single.summary->evals[i].loss;
    EXPECT_NEAR(evals[i], want, 1e-6 * want) << "after step " << i + 1;
  }
}

TEST(EvalTraining, HeldOutFractionLeavesTrainingAndIsEvaluatedAtTheEnd) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 20, 3);
  TrainArgs args = args_for(dir, {}, "c.json", 3, data);
  args.eval_fraction = 0.2;  // ceil(0.2 x 20) = 4 samples
  std::set<int64_t> seen;
  args.on_micro_batch = [&](const std::vector<int64_t>& samples) { seen.insert(samples.begin(), samples.end()); };
  TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  ASSERT_EQ(run.summary->evals.size(), 1u) << "no --eval-every: at the end only";
  EXPECT_EQ(run.summary->evals[0].step, 3);
  EXPECT_EQ(run.summary->evals[0].tokens, 4 * kSeqLen);
  EXPECT_LT(*seen.rbegin(), 16) << "training reads only the 16 samples left";
  bool header = false;
  for (const std::string& line : run.lines) header |= line.find("eval " + data + " (held out): 4 samples") != std::string::npos;
  EXPECT_TRUE(header);
}

TEST(EpochTraining, EpochsGiveTheStepsAndEveryEpochIsAFreshPermutationOfEverySample) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 20, 4);  // 10 micro-batches of 2 an epoch
  TrainArgs args = args_for(dir, {{"gradient_accumulation_steps", 3}}, "c.json", 0, data);
  args.epochs = 2.5;  // ceil(2.5 x 10 / 3) = 9 steps, 27 micro-batches
  std::vector<int64_t> samples;
  args.on_micro_batch = [&](const std::vector<int64_t>& s) { samples.insert(samples.end(), s.begin(), s.end()); };
  TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  EXPECT_EQ(run.summary->steps, 9);
  ASSERT_EQ(samples.size(), 54u);
  const std::vector<int64_t> epoch1(samples.begin(), samples.begin() + 20), epoch2(samples.begin() + 20, samples.begin() + 40);
  std::vector<int64_t> sorted1 = epoch1, sorted2 = epoch2, all(20);
  std::sort(sorted1.begin(), sorted1.end());
  std::sort(sorted2.begin(), sorted2.end());
  for (int64_t i = 0; i < 20; ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_EQ(sorted1, all);
  EXPECT_EQ(sorted2, all);
  EXPECT_NE(epoch1, epoch2) << "each epoch its own order";
  EXPECT_EQ(epoch1, epoch_permutation(20, 7, 0)) << "tierzero.data.seed 7, epoch 0";
  EXPECT_DOUBLE_EQ(run.summary->epochs, 2.7);
  EXPECT_NE(run.lines.back().find("| epoch 2.70: training samples seen 2 or 3 times"), std::string::npos)
      << run.lines.back();
  bool step_line = false;
  for (const std::string& line : run.lines) step_line |= line.rfind("step     4/9 ", 0) == 0 && line.find("  epoch 1.20") != std::string::npos;
  EXPECT_TRUE(step_line) << "step 4 ends after 12 micro-batches: 1.2 epochs";
}

TEST(EpochTraining, ResumedMidEpochTwoReadsTheSamplesAndTrainsTheLossesOfTheUnbrokenRun) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 20, 5);
  const nlohmann::json overrides = {{"gradient_accumulation_steps", 3}, {"zero_optimization", {{"stage", 2}}}};
  std::vector<int64_t> unbroken_samples, resumed_samples;
  TrainArgs whole = args_for(dir, overrides, "c.json", 0, data);
  whole.epochs = 2.5;
  whole.save_dir = dir / "ckpt";
  whole.save_every = 4;
  whole.keep_last = 0;
  whole.on_micro_batch = [&](const std::vector<int64_t>& s) {
    unbroken_samples.insert(unbroken_samples.end(), s.begin(), s.end());
  };
  TrainRun unbroken = run_train(whole);
  ASSERT_OK(unbroken.summary);
  ASSERT_EQ(unbroken.summary->steps, 9);
  // As if the run had died after step 4's save (12 micro-batches: epoch 2, 2 of its micro-batches done).
  std::ofstream(dir / "ckpt/latest") << "global_step4";
  std::filesystem::remove(dir / "ckpt/latest.xxh3");  // its record of the later saves
  TrainArgs resume = args_for(dir, overrides, "c.json", 0, data);
  resume.epochs = 2.5;
  resume.resume_dir = dir / "ckpt";
  resume.on_micro_batch = [&](const std::vector<int64_t>& s) {
    resumed_samples.insert(resumed_samples.end(), s.begin(), s.end());
  };
  TrainRun resumed = run_train(resume);
  ASSERT_OK(resumed.summary);
  const std::vector<int64_t> tail(unbroken_samples.begin() + 4 * 3 * 2, unbroken_samples.end());
  EXPECT_EQ(resumed_samples, tail) << "the same samples in the same order";
  const std::vector<double> losses(unbroken.summary->losses.begin() + 4, unbroken.summary->losses.end());
  EXPECT_EQ(resumed.summary->losses, losses) << "bit for bit";
}

TEST(EvalTraining, ValuesThatCannotRunAreRefusedBeforeTheFirstStep) {
  ScratchDir dir;
  const std::string data = write_tokens(dir, "train.tok", 20, 6);
  const std::string too_short = write_tokens(dir, "short.tok", 0, 7);  // one token: no sample
  const std::string empty = dir / "empty.jsonl";
  std::ofstream(empty) << "\n";
  const std::string unlabelled = dir / "unlabelled.jsonl";
  std::ofstream(unlabelled) << R"({"input_ids": [1, 2, 3, 4], "labels": [-100, -100, -100, -100]})" << "\n";
  struct Case {
    const char* what;
    std::function<void(TrainArgs&)> set;
    std::string says;
  } cases[] = {
      {"fraction above 1", [](TrainArgs& a) { a.eval_fraction = 1.5; }, "--eval-fraction 1.5 is outside (0, 1)"},
      {"fraction leaving nothing", [](TrainArgs& a) { a.eval_fraction = 0.99; }, "would leave none for training"},
      {"both eval sets", [&](TrainArgs& a) { a.eval_fraction = 0.1; a.eval_data_path = data; }, "pass one of them"},
      {"eval every without eval data", [](TrainArgs& a) { a.eval_every = 2; }, "--eval-every 2 has nothing to evaluate"},
      {"eval token file too short", [&](TrainArgs& a) { a.eval_data_path = too_short; }, "fewer than seq_len + 1 = 33"},
      {"eval file without a row", [&](TrainArgs& a) { a.eval_data_path = empty; }, empty + " holds no samples"},
      {"eval file without a target", [&](TrainArgs& a) { a.eval_data_path = unlabelled; }, "has a target token"},
      {"negative epochs", [](TrainArgs& a) { a.epochs = -1; }, "--epochs -1 is not a positive number"},
      {"epochs and steps disagree", [](TrainArgs& a) { a.epochs = 2; a.steps = 7; }, "--epochs 2 and --steps 7 disagree"},
  };
  for (Case& c : cases) {
    TrainArgs args = args_for(dir, {}, "c.json", 0, data);
    c.set(args);
    int batches = 0;
    args.on_micro_batch = [&](const std::vector<int64_t>&) { ++batches; };
    TrainRun run = run_train(args);
    EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument, c.says) << c.what;
    EXPECT_EQ(batches, 0) << c.what << ": refused before training";
  }
  TrainArgs agreeing = args_for(dir, {}, "c.json", 20, data);
  agreeing.epochs = 2;  // 2 x 10 micro-batches, 1 a step
  EXPECT_OK(run_train(agreeing).summary);
}

}  // namespace
}  // namespace tierzero::engine::testing
