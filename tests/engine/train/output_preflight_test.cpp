// train()'s check of its outputs before step 1 (engine/train/internal/output_preflight.h): a --save,
// --export, --metrics or --tensorboard that cannot be written is refused before anything is trained
// (nothing printed, no step run) with the path, the problem and the fix; the free-space check counts
// the destinations that share a file system together. Read-only and tiny mounts are real tmpfs
// mounts where this process may mount (skipped elsewhere); the fault-injecting file system stands in
// for a read-only directory everywhere.
#include <gtest/gtest.h>

#include <sys/mount.h>

#include <filesystem>
#include <fstream>

#include "engine/train/internal/checkpoint_rotation.h"
#include "engine/train/internal/output_preflight.h"
#include "fs/testing/default_override.h"
#include "fs/testing/fault_injection_fs.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

using trainer::OutputDestination;
using trainer::OutputKind;

// A run of 30 steps that must not start; each test points one output somewhere unwritable.
TrainArgs thirty_steps(const ScratchDir& dir) { return train_args(write_config(dir, small_config()), 30); }

// The run failed before its header (so before step 1) with `code` and a message holding each of `parts`.
void expect_refused_before_training(const TrainRun& run, ErrorCode code, const std::vector<std::string>& parts) {
  ASSERT_ERROR(run.summary, code, "") << "trained although an output cannot be written";
  for (const std::string& part : parts)
    EXPECT_NE(run.summary.status().message().find(part), std::string::npos)
        << "'" << part << "' missing from: " << run.summary.status().message();
  EXPECT_TRUE(run.lines.empty()) << "printed before refusing (the header or a step): " << run.lines.front();
}

class UnderARegularFile : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(file_) << "not a directory"; }
  ScratchDir dir_;
  const std::string file_ = dir_ / "notes.txt";
};

TEST_F(UnderARegularFile, SaveIsRefusedBeforeTheFirstStep) {
  TrainArgs args = thirty_steps(dir_);
  args.save_dir = file_ + "/ckpt";
  expect_refused_before_training(run_train(args), ErrorCode::kInvalidArgument,
                                 {"--save " + args.save_dir, file_ + " is a file, not a directory"});
}

TEST_F(UnderARegularFile, ExportIsRefusedBeforeTheFirstStep) {
  TrainArgs args = thirty_steps(dir_);
  args.export_dir = file_ + "/hf";
  expect_refused_before_training(run_train(args), ErrorCode::kInvalidArgument,
                                 {"--export " + args.export_dir, file_ + " is a file, not a directory"});
}

TEST_F(UnderARegularFile, MetricsIsRefusedBeforeTheFirstStep) {
  TrainArgs args = thirty_steps(dir_);
  args.metrics_path = file_ + "/run.jsonl";
  expect_refused_before_training(run_train(args), ErrorCode::kInvalidArgument,
                                 {"--metrics " + args.metrics_path, file_ + " is a file, not a directory"});
}

TEST_F(UnderARegularFile, TensorBoardIsRefusedBeforeTheFirstStep) {
  TrainArgs args = thirty_steps(dir_);
  args.tensorboard_dir = file_ + "/tb";
  expect_refused_before_training(run_train(args), ErrorCode::kInvalidArgument,
                                 {"--tensorboard " + args.tensorboard_dir, file_ + " is a file, not a directory"});
}

TEST(OutputPreflight, MetricsPathThatIsADirectoryIsRefused) {
  ScratchDir dir;
  TrainArgs args = thirty_steps(dir);
  args.metrics_path = dir.path();
  expect_refused_before_training(run_train(args), ErrorCode::kInvalidArgument, {"is a directory; pass a file path"});
}

TEST(OutputPreflight, MissingDirectoriesAreCreatedAndNoProbeIsLeft) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 1);
  args.save_dir = dir / "a/b/ckpt";
  args.metrics_path = dir / "c/d/run.jsonl";
  args.export_dir = dir / "e/f/hf";
  ASSERT_OK(run_train(args).summary);
  EXPECT_TRUE(std::filesystem::exists(args.save_dir + "/latest"));
  EXPECT_TRUE(std::filesystem::exists(args.metrics_path));
  EXPECT_TRUE(std::filesystem::exists(args.export_dir + "/config.json"));
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tierzero_write_probe"), std::string::npos) << entry.path();
}

// A run killed between writing its probe and removing it (the kill campaign found one) leaves the
// probe; the next run of that rank probes under the same name and removes it.
TEST(OutputPreflight, AProbeAKilledRunLeftIsGoneAfterTheNextRun) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 1);
  args.save_dir = dir / "ckpt";
  std::filesystem::create_directories(args.save_dir);
  std::ofstream(args.save_dir + "/.tierzero_write_probe.rank0") << "left by a killed run\n";
  ASSERT_OK(run_train(args).summary);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tierzero_write_probe"), std::string::npos) << entry.path();
}

// A directory the file system refuses files in (what a read-only mount does), on any machine: the
// probe's create fails.
TEST(OutputPreflight, UnwritableSaveDirectoryIsRefusedNamingIt) {
  ScratchDir dir;
  TrainArgs args = thirty_steps(dir);
  args.save_dir = dir / "ckpt";
  fs::testing::FaultInjectionFs faulty(fs::default_file_system(), dir.path());
  faulty.fail_paths_containing(args.save_dir + "/", io_error("Read-only file system (errno 30)"));
  fs::testing::ScopedDefaultFileSystem scoped(faulty);
  expect_refused_before_training(
      run_train(args), ErrorCode::kIo,
      {"--save " + args.save_dir, "cannot write in " + args.save_dir, "Read-only file system", "read-only mount"});
}

// Free space is checked against the planned bytes, summed over the destinations of one file system.
TEST(OutputPreflight, TooLittleFreeSpaceNamesBytesNeededAndFree) {
  ScratchDir dir;
  const uint64_t free_bytes = fs::default_file_system().free_space(dir.path())->available_bytes;
  const uint64_t half = free_bytes / 2 + free_bytes / 8;  // each fits alone, both do not (other writers aside)
  const std::vector<OutputDestination> outputs = {
      {.path = dir / "ckpt", .what = "--save", .planned_bytes = half, .planned_what = "one checkpoint"},
      {.path = dir / "hf",
       .what = "--export",
       .kind = OutputKind::kStagedBeside,
       .planned_bytes = half,
       .planned_what = "the model"}};
  EXPECT_OK(trainer::check_output_destinations({outputs[0]}, "t", fs::default_file_system()));
  const Status both = trainer::check_output_destinations(outputs, "t", fs::default_file_system());
  EXPECT_EQ(both.code(), ErrorCode::kOutOfSpace) << both.to_string();
  for (const std::string& part :
       std::vector<std::string>{"--save " + dir / "ckpt" + " and --export " + dir / "hf",
                                format_bytes(2 * half) + " needed", " free on the file system holding",
                                "one checkpoint", "the model", "choose a destination on a larger file system"})
    EXPECT_NE(both.message().find(part), std::string::npos) << "'" << part << "' missing from: " << both.message();
}

TEST(OutputPreflight, SwapDirectoriesMustExistAndAreNotCreated) {
  ScratchDir dir;
  const Status status = trainer::check_output_destinations({{.path = dir / "nvme",
                                                             .what = "nvme_path",
                                                             .kind = OutputKind::kSwapDirectory,
                                                             .planned_bytes = 0,
                                                             .planned_what = "swap files"}},
                                                           "t", fs::default_file_system());
  EXPECT_EQ(status.code(), ErrorCode::kNotFound) << status.to_string();
  EXPECT_NE(status.message().find("mkdir -p " + dir / "nvme"), std::string::npos) << status.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "nvme"));
}

// Real mounts: a read-only tmpfs, and a 1 MiB one the tiny model's checkpoint does not fit in.
class OnAMount : public ::testing::Test {
 protected:
  // Mounts a tmpfs at DIR/NAME with `flags` and `options`; skips the test where mounting is not allowed.
  std::string mount_tmpfs(const std::string& name, unsigned long flags, const std::string& options) {
    const std::string path = dir_ / name;
    std::filesystem::create_directories(path);
    if (::mount("tmpfs", path.c_str(), "tmpfs", flags, options.c_str()) != 0) return "";
    mounted_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& path : mounted_) ::umount2(path.c_str(), MNT_DETACH);
  }
  ScratchDir dir_;
  std::vector<std::string> mounted_;
};

TEST_F(OnAMount, ReadOnlyMountIsRefusedForEveryOutputBeforeTheFirstStep) {
  const std::string ro = mount_tmpfs("ro", MS_RDONLY, "size=1m");
  if (ro.empty()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  TrainArgs save = thirty_steps(dir_);
  save.save_dir = ro;  // exists: the probe file is refused
  expect_refused_before_training(run_train(save), ErrorCode::kIo, {"--save " + ro, "cannot write in " + ro});
  TrainArgs nested = thirty_steps(dir_);
  nested.save_dir = ro + "/run1/ckpt";  // missing: its directory cannot be created
  expect_refused_before_training(run_train(nested), ErrorCode::kIo,
                                 {"--save " + nested.save_dir, "cannot create directory " + ro + "/run1"});
  TrainArgs exported = thirty_steps(dir_);
  exported.export_dir = ro + "/hf";
  expect_refused_before_training(run_train(exported), ErrorCode::kIo, {"--export " + exported.export_dir});
  TrainArgs metrics = thirty_steps(dir_);
  metrics.metrics_path = ro + "/run.jsonl";
  expect_refused_before_training(run_train(metrics), ErrorCode::kIo, {"--metrics " + metrics.metrics_path});
}

TEST_F(OnAMount, SaveOnATooSmallFileSystemIsRefusedWithBytesNeededAndFree) {
  const std::string small = mount_tmpfs("small", 0, "size=1m");
  if (small.empty()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  TrainArgs args = thirty_steps(dir_);
  args.save_dir = small + "/ckpt";
  expect_refused_before_training(
      run_train(args), ErrorCode::kOutOfSpace,
      {"--save " + args.save_dir, "needed", "free on the file system holding", "fp32 master + 2 fp32 Adam moments"});
}

// Periodic saves hold two checkpoints while the next is written (the newest durable one stays): a
// file system with room for one (the tiny model's ~10 MiB in 16 MiB) takes a save at the end, and
// refuses --save-every with --keep-last 1 before step 1, naming the count and the fixes.
TEST_F(OnAMount, PeriodicSavesNeedRoomForTheCheckpointsTheyHoldAtOnce) {
  const std::string small = mount_tmpfs("one", 0, "size=16m");
  if (small.empty()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN)";
  TrainArgs periodic = thirty_steps(dir_);
  periodic.save_dir = small + "/periodic";
  periodic.save_every = 10;
  periodic.keep_last = 1;
  expect_refused_before_training(run_train(periodic), ErrorCode::kOutOfSpace,
                                 {"--save " + periodic.save_dir, "2 checkpoints at once (--save-every 10, --keep-last 1",
                                  "save at the end only", "fp32 master + 2 fp32 Adam moments"});
  TrainArgs at_end = train_args(write_config(dir_, small_config(), "end.json"), 2);
  at_end.save_dir = small + "/at_end";
  EXPECT_OK(run_train(at_end).summary);
}

TEST(CheckpointsAddedAtOnce, AreTheNewestKeptPlusTheOneBeingWritten) {
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 1, 1), 1);  // a save at the end only
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 4, 1), 2);  // the newest stays while the next is written
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 4, 3), 4);  // 3 kept + 1 being written
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 2, 3), 2);  // fewer saves than kept
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 5, 0), 5);  // no rotation: every save stays
  EXPECT_EQ(trainer::checkpoints_added_at_once(2, 4, 1), 1);  // a resumed directory's old ones go first
  EXPECT_EQ(trainer::checkpoints_added_at_once(1, 3, 2), 2);  // 1 old + 1 new kept, then 1 more written
  EXPECT_EQ(trainer::checkpoints_added_at_once(0, 0, 1), 0);
}

// The checkpoint bytes train plans before step 1 are docs/formats.md's per parameter (the state as
// it lives: compact + int8 6 + 8/256, compact + bf16 8, fp32 12), plus 1 MiB of metadata; a plan of
// the old fp32-only size would refuse a compact 7.6B save on a 64 GB disk.
TEST(PlannedCheckpointBytes, AreTheStateAsItLivesPerParameter) {
  struct Case {
    const char* master;
    const char* moments;
    double bytes_per_param;
  };
  constexpr int64_t kParameters = 7'615'616'512;  // Qwen2.5-7B, a multiple of 256
  for (const Case& c : {Case{"compact", "int8", 6.0 + 8.0 / 256}, Case{"compact", "bf16", 8.0},
                        Case{"fp32", "bf16", 8.0}, Case{"fp32", "fp32", 12.0}}) {
    Plan plan;
    plan.parameters = kParameters;
    plan.master_weights = c.master;
    plan.optimizer_state = c.moments;
    std::string what;
    const uint64_t bytes = trainer::planned_checkpoint_bytes(plan, what);
    EXPECT_EQ(static_cast<double>(bytes - (1u << 20)), c.bytes_per_param * kParameters) << c.master << " " << c.moments;
    EXPECT_NE(what.find(c.master == std::string("compact") ? "compact master" : "fp32 master"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
