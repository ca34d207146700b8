// A Hugging Face Trainer ds_config ("auto" everywhere the HF Trainer fills a value) trains with the
// `tierzero train` flags that stand for the HF Trainer's arguments, and is refused before the first
// step, naming the flag, without them; the schedule follows --steps; a sequence length above the
// model's max_position_embeddings is refused naming both numbers; --keep-last 0 keeps every
// checkpoint whatever the config says.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/train/internal/checkpoint_rotation.h"
#include "tests/engine/train/train_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

// The HF Trainer form of small_config(): the same run with "auto" where the HF Trainer fills values.
nlohmann::json hf_trainer_config() {
  nlohmann::json config = small_config({
      {"train_batch_size", "auto"},
      {"train_micro_batch_size_per_gpu", "auto"},
      {"gradient_accumulation_steps", "auto"},
      {"gradient_clipping", "auto"},
      {"bf16", {{"enabled", "auto"}}},
      {"fp16", {{"enabled", "auto"}}},
      {"optimizer", {{"params", {{"lr", "auto"}, {"weight_decay", "auto"}}}}},
      {"scheduler",
       {{"type", "WarmupDecayLR"},
        {"params",
         {{"warmup_min_lr", "auto"}, {"warmup_max_lr", "auto"}, {"warmup_num_steps", "auto"}, {"total_num_steps", "auto"}}}}},
  });
  return config;
}

TrainerFlags hf_flags() {
  return TrainerFlags{.micro_batch_size = 2,
                      .gradient_accumulation_steps = 1,
                      .lr = 3e-3,
                      .warmup_steps = 2,
                      .max_grad_norm = 1.0,
                      .weight_decay = 0.01,
                      .bf16 = true};
}

// The printed lr of each step line ("step 3 ... lr 1.5e-03 ..."), in order.
std::vector<double> printed_lrs(const std::vector<std::string>& lines) {
  std::vector<double> lrs;
  for (const std::string& line : lines) {
    const size_t at = line.find(" lr ");
    if (line.rfind("step ", 0) == 0 && at != std::string::npos) lrs.push_back(std::stod(line.substr(at + 4)));
  }
  return lrs;
}

TEST(HfTrainerConfig, TrainsWithTheFlagsAndTheScheduleEndsWithTheRun) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, hf_trainer_config()), 6);
  args.trainer_flags = hf_flags();
  TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  EXPECT_EQ(run.summary->steps, 6);
  EXPECT_LT(run.summary->last_loss, run.summary->first_loss);
  // WarmupDecayLR with total_num_steps from --steps 6 and 2 warm-up steps: the --lr peak, then a
  // linear decay reaching 0 at scheduler iteration 6. As in DeepSpeed, step k runs at iteration k - 2
  // (the first at -1, lr 0), so step 6 runs at (6 - 4) / (6 - 2) of the peak; a schedule of the
  // config's own length would still be at the peak.
  const std::vector<double> lrs = printed_lrs(run.lines);
  ASSERT_EQ(lrs.size(), 6u) << "one step line per step (steps_per_print 1)";
  const auto peak = std::max_element(lrs.begin(), lrs.end());
  EXPECT_NEAR(*peak, 3e-3, 1e-6);
  EXPECT_TRUE(std::is_sorted(lrs.rbegin(), std::make_reverse_iterator(peak))) << "decays after the peak";
  EXPECT_NEAR(lrs.back(), 3e-3 * 2 / 4, 1e-6);
  bool bf16 = false;
  for (const std::string& line : run.lines) bf16 = bf16 || line.find("bf16") != std::string::npos;
  EXPECT_TRUE(bf16) << "the run header names the bf16 the flag chose";
}

TEST(HfTrainerConfig, WithoutAFlagItIsRefusedBeforeTheFirstStep) {
  ScratchDir dir;
  const std::string config = write_config(dir, hf_trainer_config());
  TrainArgs args = train_args(config, 6);
  args.trainer_flags = hf_flags();
  args.trainer_flags.lr.reset();
  TrainRun run = run_train(args);
  EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument, "optimizer.params.lr is \"auto\": pass --lr");
  for (const std::string& line : run.lines) EXPECT_EQ(line.rfind("step ", 0), std::string::npos) << line;

  args = train_args(config, 6);
  args.trainer_flags = hf_flags();
  args.trainer_flags.bf16 = false;
  EXPECT_ERROR(run_train(args).summary, ErrorCode::kInvalidArgument, "pass --bf16 or --fp16");

  args = train_args(config, 0);  // no --steps
  args.trainer_flags = hf_flags();
  EXPECT_ERROR(run_train(args).summary, ErrorCode::kInvalidArgument, "pass --steps N");
}

TEST(HfTrainerConfig, AMisspeltKeyStopsTheRunNamingTheKeyMeant) {
  ScratchDir dir;
  nlohmann::json config = small_config({{"zero_optimization", {{"stage", 2}, {"offload_optimzer", {{"device", "cpu"}}}}}});
  TrainRun run = run_train(train_args(write_config(dir, config), 2));
  EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument,
               "unknown key 'zero_optimization.offload_optimzer': did you mean offload_optimizer?");
}

TEST(HfTrainerConfig, SeqLenAboveMaxPositionEmbeddingsIsRefused) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 2);
  args.trainer_flags.seq_len = 4096;  // the built-in tiny Llama has 1024 positions
  EXPECT_ERROR(run_train(args).summary, ErrorCode::kInvalidArgument,
               "sequence length 4096 (--seq-len) is above the model's max_position_embeddings 1024");
}

TEST(TrainFlags, KeepLastZeroKeepsEveryCheckpoint) {
  ScratchDir dir;
  const std::string config =
      write_config(dir, small_config({{"tierzero", {{"checkpoint", {{"save_every", 1}, {"keep_last", 1}}}}}}));
  TrainArgs args = train_args(config, 3);
  args.save_dir = dir / "kept_all";
  args.keep_last = 0;  // --keep-last 0
  ASSERT_OK(run_train(args).summary);
  EXPECT_EQ(trainer::saved_iterations(args.save_dir), (std::vector<int64_t>{1, 2, 3}));

  args.save_dir = dir / "config_keep_last";
  args.keep_last = -1;  // no --keep-last: tierzero.checkpoint.keep_last 1
  ASSERT_OK(run_train(args).summary);
  EXPECT_EQ(trainer::saved_iterations(args.save_dir), (std::vector<int64_t>{3}));
}

}  // namespace
}  // namespace tierzero::engine::testing
