// Periodic saves on 2 ranks (Gloo, separate processes): a run SIGKILLed after a periodic save and
// resumed from DIR/latest reproduces the uninterrupted run's losses bit for bit, and only the last
// keep_last checkpoints remain. And what scripts/kill_test.py's real kills found: a run restarted
// after its last save (or after a kill between latest.xxh3 and latest) succeeds and leaves the
// directory as the uninterrupted run did; a rotation killed midway leaks no global_stepN.removing.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/train/internal/checkpoint_rotation.h"
#include "nvme/testing/fault_injection.h"
#include "report/report.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"
#include "worker_ranks.h"

namespace tierzero::engine::testing {
namespace {

std::vector<double> read_losses(const std::string& path) {
  std::vector<double> losses;
  std::ifstream in(path);
  for (double loss; in >> loss;) losses.push_back(loss);
  return losses;
}

std::string latest(const std::string& dir) {
  std::ifstream in(dir + "/latest");
  std::string tag;
  std::getline(in, tag);
  return tag;
}

TEST(PeriodicSave, KilledRunResumedFromLatestMatchesTheUninterruptedRun) {
  ScratchDir dir;
  const int64_t steps = 12;
  const std::string config = write_config(
      dir, small_config({{"zero_optimization", {{"stage", 2}}}, {"tierzero", {{"checkpoint", {{"keep_last", 2}}}}}}));
  const std::string ckpt = dir / "ckpt";
  const std::string steps_arg = std::to_string(steps);

  Ranks whole(dir, "whole", {"--config", config, "--steps", steps_arg, "--losses", dir / "whole.losses"});
  ASSERT_EQ(whole.wait(240), "");
  const std::vector<double> expected = read_losses(dir / "whole.losses");
  ASSERT_EQ(expected.size(), static_cast<size_t>(steps));

  {
    Ranks killed(dir, "killed", {"--config", config, "--steps", steps_arg, "--save", ckpt, "--save-every", "2"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (latest(ckpt).empty() && !killed.done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_FALSE(killed.done()) << "the run ended before a periodic save was seen; nothing was killed";
    killed.kill_all();
  }
  const std::string tag = latest(ckpt);
  ASSERT_EQ(tag.rfind("global_step", 0), 0u) << "no checkpoint published before the kill";
  const int64_t saved_at = std::stoll(tag.substr(std::string("global_step").size()));
  ASSERT_LT(saved_at, steps) << "killed after the run's end";

  Ranks resumed(dir, "resumed",
                {"--config", config, "--steps", steps_arg, "--save", ckpt, "--save-every", "2", "--resume", ckpt,
                 "--losses", dir / "resumed.losses"});
  ASSERT_EQ(resumed.wait(240), "");
  const std::vector<double> losses = read_losses(dir / "resumed.losses");
  ASSERT_EQ(losses.size(), static_cast<size_t>(steps - saved_at));
  for (size_t i = 0; i < losses.size(); ++i)
    EXPECT_EQ(losses[i], expected[static_cast<size_t>(saved_at) + i]) << "step " << saved_at + 1 + i << ", bit for bit";

  EXPECT_EQ(latest(ckpt), "global_step" + steps_arg);
  std::vector<int64_t> kept = trainer::saved_iterations(ckpt);
  EXPECT_EQ(kept, (std::vector<int64_t>{steps - 2, steps})) << "keep_last 2";
}

// Every file under `root` (relative path -> bytes).
std::map<std::string, std::string> files_under(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    files[std::filesystem::relative(entry.path(), root).string()] = bytes.str();
  }
  return files;
}

// The restart a job scheduler does: the same command again, after the run had saved its last
// checkpoint (killed before it exited). It used to fail: "global_step4 already exists and is the
// latest".
TEST(Restart, SameCommandAfterTheLastSaveSucceedsAndChangesNothing) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 4);
  args.save_dir = dir / "ckpt";
  args.save_every = 2;
  ASSERT_OK(run_train(args).summary);
  const auto saved = files_under(args.save_dir);
  args.resume_dir = args.save_dir;
  const TrainRun again = run_train(args);
  ASSERT_OK(again.summary);
  EXPECT_EQ(again.summary->steps, 0);
  EXPECT_EQ(files_under(args.save_dir), saved);
}

// Killed between the two pointer files of the last save: latest.xxh3 names global_step4, `latest`
// still global_step2. The restarted run reads global_step4 and finishes moving `latest`.
TEST(Restart, SameCommandFinishesAPointerMoveAKillStopped) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 4);
  args.save_dir = dir / "ckpt";
  args.save_every = 2;
  ASSERT_OK(run_train(args).summary);
  const auto saved = files_under(args.save_dir);
  ASSERT_EQ(saved.at("latest"), "global_step4");
  std::ofstream(args.save_dir + "/latest", std::ios::trunc) << "global_step2";
  args.resume_dir = args.save_dir;
  ASSERT_OK(run_train(args).summary);
  EXPECT_EQ(files_under(args.save_dir), saved);
}

uint64_t bytes_under(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) bytes += entry.file_size();
  return bytes;
}

// Every save says what it wrote and when it was durable: the periodic ones, streamed beside the next
// step, and the final synchronous one; the metrics file's save lines hold the same figures, their
// bytes those of the files on disk.
TEST(SaveReport, EachSaveLineHoldsItsBytesAndTimes) {
  ScratchDir dir;
  TrainArgs args = train_args(
      write_config(dir,
                   small_config({{"bf16", {{"enabled", true}}},
                                 {"zero_optimization",
                                  {{"stage", 2}, {"sub_group_size", 4096}, {"offload_optimizer", {{"device", "cpu"}}}}},
                                 {"tierzero", {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}}}})),
      6);
  args.save_dir = dir / "ckpt";
  args.save_every = 2;
  args.metrics_path = dir / "metrics.jsonl";
  const TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  const report::RunMetrics metrics = value_or_throw(report::read_metrics_file(args.metrics_path));
  ASSERT_EQ(metrics.saves.size(), 3u);
  for (size_t i = 0; i < metrics.saves.size(); ++i) {
    const report::SaveMetrics& save = metrics.saves[i];
    const std::string tag = "global_step" + std::to_string(2 * (i + 1));
    EXPECT_EQ(save.step, static_cast<int64_t>(2 * (i + 1)));
    EXPECT_EQ(static_cast<uint64_t>(save.bytes), bytes_under(args.save_dir + "/" + tag)) << tag;
    EXPECT_GT(save.durable_s, 0.0) << tag;
    const bool last = i + 1 == metrics.saves.size();
    EXPECT_EQ(save.background, !last) << tag << ": the periodic saves stream beside the next step, the final one not";
    EXPECT_EQ(save.write_s.has_value(), !last) << tag;
    EXPECT_EQ(save.held_s.has_value(), !last) << tag;
    if (save.write_s) {
      EXPECT_LE(*save.write_s, save.durable_s) << tag << ": the files are written before the commit";
    }
    // Committed at the end of its own step when synchronous; else of a later one, no later than the
    // next save's step (one save at a time), the last step the printed line says it was written during.
    std::string during;
    if (last) {
      EXPECT_EQ(save.committed_after_step, save.step) << tag;
    } else {
      EXPECT_GT(save.committed_after_step, save.step) << tag;
      EXPECT_LE(save.committed_after_step, metrics.saves[i + 1].step) << tag;
      during = save.committed_after_step == save.step + 1
                   ? " (written during step " + std::to_string(save.committed_after_step) + ";"
                   : " (written during steps " + std::to_string(save.step + 1) + " to " +
                         std::to_string(save.committed_after_step) + ";";
    }
    const std::string printed = "  saved " + args.save_dir + "/" + tag + during;
    EXPECT_TRUE(std::any_of(run.lines.begin(), run.lines.end(),
                            [&](const std::string& line) {
                              return line.rfind(printed, 0) == 0 &&
                                     line.find(format_bytes(save.bytes) + ", durable ") != std::string::npos;
                            }))
        << "no line '" << printed << "...: " << format_bytes(save.bytes) << ", durable ...'";
  }
}

// tierzero.checkpoint.write_behind: the header says what it allocated and why; every periodic save,
// with write-behind 0 (read at the disk's rate) or "auto", leaves the losses of a run without
// periodic saves bit for bit, is committed at the end of a step after its own (its line names the
// steps it was written during) and verifies; a bad value is refused before any step, naming the key.
TEST(WriteBehind, PeriodicSavesChangeNoLossAndSayWhenTheyWereWritten) {
  ScratchDir dir;
  const auto offloaded = [&](const nlohmann::json& write_behind, const std::string& name) {
    nlohmann::json tierzero = {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}};
    if (!write_behind.is_null()) tierzero["checkpoint"] = {{"write_behind", write_behind}};
    return train_args(
        write_config(
            dir,
            small_config({{"bf16", {{"enabled", true}}},
                          {"zero_optimization",
                           {{"stage", 2}, {"sub_group_size", 4096}, {"offload_optimizer", {{"device", "cpu"}}}}},
                          {"tierzero", tierzero}}),
            name + ".json"),
        7);
  };
  TrainArgs plain = offloaded(nullptr, "plain");
  plain.save_dir = dir / "plain";
  const TrainRun reference = run_train(plain);
  ASSERT_OK(reference.summary);
  for (const auto& choice : std::vector<std::pair<nlohmann::json, std::string>>{
           {0, "64.00 MiB per rank (tierzero.checkpoint.write_behind)"}, {"auto", "per rank (auto: "}}) {
    const nlohmann::json& value = choice.first;
    const std::string& why = choice.second;
    TrainArgs args = offloaded(value, "periodic");
    args.save_dir = dir / ("periodic_" + value.dump());
    args.save_every = 2;
    const TrainRun run = run_train(args);
    ASSERT_OK(run.summary) << value;
    EXPECT_EQ(run.summary->losses, reference.summary->losses) << value << ": bit for bit as without periodic saves";
    EXPECT_TRUE(std::any_of(run.lines.begin(), run.lines.end(),
                            [&](const std::string& line) {
                              return line.find("periodic saves: write-behind ") != std::string::npos &&
                                     line.find(why) != std::string::npos;
                            }))
        << value << ": no header line with '" << why << "'";
    for (const int64_t saved : {2, 4, 6}) {
      const std::string path = args.save_dir + "/global_step" + std::to_string(saved);
      EXPECT_OK(checkpoint::verify_checkpoint(args.save_dir, "global_step" + std::to_string(saved))) << path;
      const std::string during = "  saved " + path + " (written during step";
      EXPECT_TRUE(std::any_of(run.lines.begin(), run.lines.end(),
                              [&](const std::string& line) {
                                const std::string steps = line.substr(std::min(line.size(), during.size()));
                                return line.rfind(during, 0) == 0 &&
                                       (steps.rfind(" " + std::to_string(saved + 1) + ";", 0) == 0 ||
                                        steps.rfind("s " + std::to_string(saved + 1) + " to ", 0) == 0);
                              }))
          << "no line '" << during << " " << saved + 1 << "...'";
    }
  }

  TrainArgs bad = offloaded("lots", "bad");
  bad.save_dir = dir / "bad";
  bad.save_every = 2;
  const TrainRun refused = run_train(bad);
  EXPECT_ERROR(refused.summary, ErrorCode::kInvalidArgument, "tierzero.checkpoint.write_behind must be a byte size");
  EXPECT_TRUE(std::none_of(refused.lines.begin(), refused.lines.end(), [](const std::string& line) {
    return line.rfind("step ", 0) == 0;
  })) << "refused before the first step";
}

// A save whose disk is slower than the steps (its rank file's write completions held back until the
// metrics file shows step 8, so however fast the steps run) spans several steps: the run goes on,
// commits it at the end of a later step (or at the end of the run, waiting for it) and says so;
// the losses are a run's without periodic saves.
TEST(WriteBehind, ASaveSlowerThanTheStepsIsCommittedStepsLater) {
  ScratchDir dir;
  TrainArgs args = train_args(
      write_config(dir,
                   small_config({{"bf16", {{"enabled", true}}},
                                 {"zero_optimization",
                                  {{"stage", 2}, {"sub_group_size", 4096}, {"offload_optimizer", {{"device", "cpu"}}}}},
                                 {"tierzero", {{"master_weights", "compact"}, {"optimizer_state_dtype", "int8"}}}})),
      12);
  args.save_dir = dir / "plain";
  const TrainRun reference = run_train(args);
  ASSERT_OK(reference.summary);

  args.save_dir = dir / "slow";
  args.save_every = 6;
  args.metrics_path = dir / "slow.jsonl";
  std::atomic<bool> open = false;
  nvme::testing::ScopedFaultInjector slow_disk([&open](const nvme::testing::PieceCompletion& piece, int64_t result) {
    if (piece.op == nvme::Op::kWrite && piece.path.find("global_step6.partial/") != std::string::npos)
      while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return result;
  });
  std::atomic<bool> finished = false;
  std::thread opener([&open, &finished, metrics_path = args.metrics_path] {
    // Step 8's metrics line is written once step 8 has ended (keys sorted: "step":8,). A run that
    // ends first (an error) opens the disk too.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!finished && std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(metrics_path);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("\"step\":8,") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    open = true;
  });
  const TrainRun run = run_train(args);
  finished = true;
  opener.join();
  ASSERT_OK(run.summary);
  EXPECT_EQ(run.summary->losses, reference.summary->losses) << "bit for bit as without periodic saves";
  // The metrics' save line says the step it was committed after: the last one the printed line names.
  const report::RunMetrics metrics = value_or_throw(report::read_metrics_file(args.metrics_path));
  ASSERT_EQ(metrics.saves.size(), 2u);
  const int64_t committed = metrics.saves[0].committed_after_step;
  EXPECT_EQ(metrics.saves[0].step, 6);
  EXPECT_GE(committed, 8) << "held until step 8 had ended";
  EXPECT_LE(committed, 12);
  EXPECT_EQ(metrics.saves[1].committed_after_step, 12) << "the final save, committed after the last step";
  const std::string later =
      "  saved " + args.save_dir + "/global_step6 (written during steps 7 to " + std::to_string(committed) + ";";
  EXPECT_TRUE(std::any_of(run.lines.begin(), run.lines.end(),
                          [&](const std::string& line) { return line.rfind(later, 0) == 0; }))
      << "no line starting '" << later << "'";
  EXPECT_OK(checkpoint::verify_checkpoint(args.save_dir, "global_step6"));
}

// A rotation killed while removing global_step0 left global_step0.removing; the next rotation
// retires global_step2 (renamed away, its files kept until removed), then removes both (and nothing
// that is not a rotated-away checkpoint).
TEST(CheckpointRotation, RemovesWhatAKilledRotationLeft) {
  ScratchDir dir;
  for (const std::string name :
       {"global_step0.removing", "global_step2", "global_step4", "global_step6", "notes.removing"}) {
    std::filesystem::create_directories(dir / name);
    std::ofstream(dir / (name + "/data")) << name;
  }
  std::ofstream(dir / "latest") << "global_step6";
  ASSERT_OK(trainer::retire_old_checkpoints(dir.path(), 2));
  EXPECT_EQ(trainer::saved_iterations(dir.path()), (std::vector<int64_t>{4, 6})) << "retired: no longer checkpoints";
  EXPECT_TRUE(std::filesystem::exists(dir / "global_step2.removing/data"));
  ASSERT_OK(trainer::remove_retired_checkpoints(dir.path()));
  EXPECT_FALSE(std::filesystem::exists(dir / "global_step0.removing"));
  EXPECT_FALSE(std::filesystem::exists(dir / "global_step2.removing"));
  EXPECT_TRUE(std::filesystem::exists(dir / "notes.removing/data"));
}

}  // namespace
}  // namespace tierzero::engine::testing
