// Saves that fail (engine/train/session_save.cpp): a disk that fills during a periodic save (the
// fault-injecting file system failing the rank file's creation with kOutOfSpace) loses no step —
// the losses are the undisturbed run's, bit for bit — and no earlier checkpoint; the failed save's
// partial output is removed, the next save succeeds. --on-save-error stop ends the run instead; a
// failed final save is an error naming the checkpoint kept; leftover *.partial of an earlier run are
// removed at start and named on stderr. The same for a save in flight beside the next step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/train/internal/checkpoint_rotation.h"
#include "fs/testing/default_override.h"
#include "fs/testing/fault_injection_fs.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

constexpr int64_t kSteps = 6;  // saves at steps 2 and 4, and the final one at 6

// The names under `dir` ending in ".partial".
std::vector<std::string> partials_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().ends_with(".partial")) names.push_back(entry.path().filename().string());
  return names;
}

class SaveFailure : public ::testing::Test {
 protected:
  SaveFailure() {
    args_ = train_args(write_config(dir_, small_config()), kSteps);
    args_.save_dir = dir_ / "ckpt";
    args_.save_every = 2;
  }
  // Runs args_ with every file-system step on a path holding `fragment` failing as a full disk
  // does; stderr captured into stderr_.
  TrainRun run_with_full_disk_at(const std::string& fragment) {
    fs::testing::FaultInjectionFs faulty(fs::default_file_system(), dir_.path());
    faulty.fail_paths_containing(fragment, out_of_space("No space left on device (errno 28)"));
    fs::testing::ScopedDefaultFileSystem scoped(faulty);
    ::testing::internal::CaptureStderr();
    TrainRun run = run_train(args_);
    stderr_ = ::testing::internal::GetCapturedStderr();
    return run;
  }
  ScratchDir dir_;
  TrainArgs args_;
  std::string stderr_;
};

TEST_F(SaveFailure, DiskFullDuringAPeriodicSaveLosesNoStepAndNoCheckpoint) {
  TrainArgs undisturbed = args_;
  undisturbed.save_dir = dir_ / "undisturbed";
  const TrainRun reference = run_train(undisturbed);
  ASSERT_OK(reference.summary);

  const TrainRun run = run_with_full_disk_at("global_step4.partial/rank");
  ASSERT_OK(run.summary);
  EXPECT_EQ(run.summary->steps, kSteps);
  EXPECT_EQ(run.summary->losses, reference.summary->losses) << "every step ran, bit for bit as without the fault";
  for (const std::string& part : std::vector<std::string>{
           "warning: the save of step 4 into " + args_.save_dir + " failed", "No space left on device",
           "training continues: " + args_.save_dir + "/global_step2", "is kept as it was",
           "its partial output was removed", "the final save at step 6 follows", "--on-save-error stop"})
    EXPECT_NE(stderr_.find(part), std::string::npos) << "'" << part << "' missing from stderr:\n" << stderr_;
  EXPECT_EQ(trainer::saved_iterations(args_.save_dir), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(trainer::latest_tag(args_.save_dir), "global_step6");
  EXPECT_OK(checkpoint::verify_checkpoint(args_.save_dir, "global_step2"));
  EXPECT_OK(checkpoint::verify_checkpoint(args_.save_dir, "global_step6"));
  EXPECT_TRUE(partials_in(args_.save_dir).empty());
}

TEST_F(SaveFailure, StopPolicyEndsTheRunKeepingTheLastGoodCheckpoint) {
  args_.on_save_error = SaveErrorPolicy::kStop;
  const TrainRun run = run_with_full_disk_at("global_step4.partial/rank");
  EXPECT_ERROR(run.summary, ErrorCode::kOutOfSpace, "the periodic save of step 4 into " + args_.save_dir + " failed: ");
  EXPECT_ERROR(run.summary, ErrorCode::kOutOfSpace,
               "Kept: " + args_.save_dir + "/global_step2 (the one " + args_.save_dir + "/latest names)");
  EXPECT_EQ(trainer::latest_tag(args_.save_dir), "global_step2");
  EXPECT_OK(checkpoint::verify_checkpoint(args_.save_dir));
  EXPECT_TRUE(partials_in(args_.save_dir).empty());
}

TEST_F(SaveFailure, FailedFinalSaveIsAnErrorNamingTheCheckpointKept) {
  const TrainRun run = run_with_full_disk_at("global_step6.partial/rank");
  EXPECT_ERROR(run.summary, ErrorCode::kOutOfSpace, "the final save of step 6 into " + args_.save_dir + " failed: ");
  EXPECT_ERROR(run.summary, ErrorCode::kOutOfSpace, "Kept: " + args_.save_dir + "/global_step4");
  EXPECT_EQ(trainer::latest_tag(args_.save_dir), "global_step4");
  EXPECT_OK(checkpoint::verify_checkpoint(args_.save_dir));
  EXPECT_TRUE(partials_in(args_.save_dir).empty());
}

// With the optimizer offloaded (compact master, 8-bit moments) the periodic saves stream out beside
// the next step and are committed after it (the "saved" line says so). The one whose rank file
// fails is reported then, as a synchronous one is, and the run goes on bit for bit; with
// --on-save-error stop it ends after that step, keeping the last good checkpoint.
TEST_F(SaveFailure, DiskFullDuringASaveInFlightIsReportedAfterTheStepItRanBeside) {
  args_.config_path = write_config(
      dir_, small_config({{"bf16", {{"enabled", true}}},
                          {"zero_optimization",
                           {{"stage", 2}, {"sub_group_size", 4096}, {"offload_optimizer", {{"device", "cpu"}}}}},
                          {"tierzero", {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}}}}),
      "offloaded.json");
  TrainArgs undisturbed = args_;
  undisturbed.save_dir = dir_ / "undisturbed";
  const TrainRun reference = run_train(undisturbed);
  ASSERT_OK(reference.summary);
  const std::string overlapped = "  saved " + undisturbed.save_dir + "/global_step2 (written during step";
  EXPECT_TRUE(std::any_of(reference.lines.begin(), reference.lines.end(),
                          [&](const std::string& line) { return line.rfind(overlapped, 0) == 0; }))
      << "no line starting '" << overlapped << "'";

  const TrainRun run = run_with_full_disk_at("global_step4.partial/rank");
  ASSERT_OK(run.summary);
  EXPECT_EQ(run.summary->losses, reference.summary->losses) << "every step ran, bit for bit as without the fault";
  for (const std::string& part :
       std::vector<std::string>{"warning: the save of step 4 into " + args_.save_dir + " failed",
                                "No space left on device", "is kept as it was", "the final save at step 6 follows"})
    EXPECT_NE(stderr_.find(part), std::string::npos) << "'" << part << "' missing from stderr:\n" << stderr_;
  EXPECT_EQ(trainer::saved_iterations(args_.save_dir), (std::vector<int64_t>{2, 6}));
  EXPECT_OK(checkpoint::verify_checkpoint(args_.save_dir, "global_step2"));
  EXPECT_TRUE(partials_in(args_.save_dir).empty());

  args_.on_save_error = SaveErrorPolicy::kStop;
  args_.save_dir = dir_ / "stopped";
  const TrainRun stopped = run_with_full_disk_at("global_step4.partial/rank");
  EXPECT_ERROR(stopped.summary, ErrorCode::kOutOfSpace, "the periodic save of step 4 into " + args_.save_dir);
  EXPECT_EQ(trainer::latest_tag(args_.save_dir), "global_step2");
  EXPECT_TRUE(partials_in(args_.save_dir).empty());
}

// What a save killed midway leaves (a staged tag, a pointer file being replaced) is removed when the
// next run starts, before it trains, and each removal is named.
TEST_F(SaveFailure, NextStartRemovesLeftoverPartialsAndNamesThem) {
  std::filesystem::create_directories(args_.save_dir + "/global_step4.partial");
  std::ofstream(args_.save_dir + "/global_step4.partial/rank_00000.bin") << std::string(4096, 'x');
  std::ofstream(args_.save_dir + "/latest.partial") << "global_step4";
  std::ofstream(args_.save_dir + "/notes.txt") << "kept";
  args_.save_every = 0;
  args_.steps = 1;
  ::testing::internal::CaptureStderr();
  const TrainRun run = run_train(args_);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_OK(run.summary);
  for (const std::string& name : std::vector<std::string>{"global_step4.partial", "latest.partial"})
    EXPECT_NE(err.find("removed " + args_.save_dir + "/" + name +
                       ": what an earlier save that failed or was killed "
                       "left (never a committed checkpoint)"),
              std::string::npos)
        << name << " not named on stderr:\n"
        << err;
  EXPECT_TRUE(partials_in(args_.save_dir).empty());
  EXPECT_TRUE(std::filesystem::exists(args_.save_dir + "/notes.txt"));
  EXPECT_EQ(trainer::latest_tag(args_.save_dir), "global_step1");
}

}  // namespace
}  // namespace tierzero::engine::testing
