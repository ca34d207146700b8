// Saves that overlap training (BackgroundSave): a save started at step 3 while the engine goes on
// to step 6 writes the checkpoint a synchronous save at step 3 writes, byte for byte, and a resume
// from it is the unbroken run bit for bit (losses and weights) — the state in host memory and on
// NVMe, compact master + int8 moments and fp32. The model is the tiny Llama 8 times wider (1.1M
// parameters) and the saves are zstd level 9, so the writer is far slower than a forward and
// backward: an optimizer that did not hold its update of what the save has not read yet would
// change the saved bytes (checked to fail so with the hold removed).
// A save whose write fails (the file size limit standing in for a full disk) returns the error
// from finish(), the steps meanwhile are unharmed, and DIR/latest still names the previous one.
// With write-behind buffers (checkpoint::WriteBuffers of 64 KiB each, less than, as much as and
// more than the rank file) the files are the synchronous save's too, the save read whole while it
// may still be writing (written() false is allowed, then true once the disk is done), and a write
// that fails after every read (the rank file's fdatasync, as a full disk reports delayed
// allocation) is returned by finish(), the previous checkpoint kept. Against a disk held shut (the
// I/O engine's completions gated): write-behind lets the next step end before any byte is written,
// hold makes it wait; ENOSPC while the buffers drain is returned by finish(). The copies into the
// buffers run on every core (copy_in_parallel; records of 2^20 elements span several slices), and
// a disk failing mid-copy stops the save, frees the step and leaves the previous checkpoint loading
// the state it saved.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/storage/storage.h"
#include "engine/zero/zero_engine.h"
#include "fs/testing/default_override.h"
#include "fs/testing/fault_injection_fs.h"
#include "nvme/testing/fault_injection.h"
#include "offload_engine.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

using test_support::ScratchDir;

constexpr int64_t kSubGroup = 65536;  // a multiple of 256: the stage 3 shard in 17 records
constexpr int kSavedAt = 3;           // steps before the save
constexpr int kStepsAfter = 3;        // steps while (and after) it streams out
constexpr int kLevel = 9;             // zstd: a slow writer

struct Case {
  const char* name;
  at::ScalarType state;
  MasterLayout master;
  bool nvme;
  int64_t sub_group = kSubGroup;
};
// The last: records of 2^20 elements, so each copy into a staging buffer spans several of
// copy_in_parallel's slices and runs on every core (the others' record parts are under one slice).
constexpr Case kCases[] = {{"compact_int8 host", at::kChar, MasterLayout::kCompact, false},
                           {"compact_int8 nvme", at::kChar, MasterLayout::kCompact, true},
                           {"fp32 host", at::kFloat, MasterLayout::kFp32, false},
                           {"fp32 nvme", at::kFloat, MasterLayout::kFp32, true},
                           {"compact_int8 host, parallel copies", at::kChar, MasterLayout::kCompact, false, 1 << 20}};

OffloadEngineSpec spec_of(const Case& c, const std::string& nvme_dir) {
  return {.stage = 3,
          .compute = at::kBFloat16,
          .state = c.state,
          .nvme_dir = c.nvme ? nvme_dir : "",
          .master = c.master,
          .sub_group = c.sub_group,
          .width = 8};
}

// The extras of a save at `iteration` (the rest empty).
CheckpointExtras at_step(int64_t iteration) {
  CheckpointExtras extras;
  extras.iteration = iteration;
  return extras;
}

// Every file of checkpoint DIR/TAG by name, with its bytes.
std::map<std::string, std::string> checkpoint_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/global_step" + std::to_string(kSavedAt)))
    files[entry.path().filename().string()] = file_bytes(entry.path().string());
  return files;
}

TEST(BackgroundSave, IsTheSynchronousSaveAndResumesTheUnbrokenRun) {
  for (const Case& c : kCases) {
    ScratchDir nvme_a, nvme_b, nvme_c, sync_dir, async_dir;
    OffloadEngine synced(spec_of(c, nvme_a.path()));
    for (int step = 0; step < kSavedAt; ++step) synced.train_step(step);
    ASSERT_OK(save_engine_checkpoint(sync_dir.path(), *synced.engine, at_step(kSavedAt), kLevel));

    OffloadEngine unbroken(spec_of(c, nvme_b.path()));
    for (int step = 0; step < kSavedAt; ++step) unbroken.train_step(step);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(async_dir.path(), *unbroken.engine, at_step(kSavedAt), kLevel));
    std::vector<double> losses;
    for (int step = kSavedAt; step < kSavedAt + kStepsAfter; ++step) losses.push_back(unbroken.train_step(step));
    ASSERT_OK(save->finish());
    std::printf("%s: the steps waited %.3f s for the save\n", c.name, save->held_seconds());

    const std::map<std::string, std::string> expected = checkpoint_files(sync_dir.path());
    const std::map<std::string, std::string> got = checkpoint_files(async_dir.path());
    ASSERT_EQ(got.size(), expected.size()) << c.name;
    for (const auto& [name, bytes] : expected) EXPECT_TRUE(got.at(name) == bytes) << c.name << ": " << name;

    OffloadEngine resumed(spec_of(c, nvme_c.path()));
    ASSERT_OK_AND_ASSIGN(CheckpointExtras extras, load_engine_checkpoint(async_dir.path(), *resumed.engine));
    EXPECT_EQ(extras.iteration, kSavedAt);
    for (int step = kSavedAt; step < kSavedAt + kStepsAfter; ++step)
      EXPECT_EQ(resumed.train_step(step), losses[static_cast<size_t>(step - kSavedAt)]) << c.name << " step " << step;
    const std::map<std::string, at::Tensor> want = unbroken.engine->master_params();
    for (const auto& [name, weights] : resumed.engine->master_params())
      EXPECT_TRUE(at::equal(weights, want.at(name))) << c.name << ": " << name;
  }
}

constexpr uint64_t kSmallBuffer = 64 << 10;  // write-behind buffers small enough to count against the state

TEST(BackgroundSave, WriteBehindSmallerEqualOrLargerThanTheStateIsTheSynchronousSave) {
  for (const Case& c : {kCases[0], kCases[1]}) {  // compact int8: in host memory, on NVMe
    ScratchDir nvme_a, nvme_b, sync_dir;
    OffloadEngine synced(spec_of(c, nvme_a.path()));
    for (int step = 0; step < kSavedAt; ++step) synced.train_step(step);
    ASSERT_OK(save_engine_checkpoint(sync_dir.path(), *synced.engine, at_step(kSavedAt)));
    const std::map<std::string, std::string> expected = checkpoint_files(sync_dir.path());
    const uint64_t rank_file = expected.at("rank_00000.bin").size();
    ASSERT_GT(rank_file, 8 * kSmallBuffer) << "the smaller write-behind must be smaller than the state";

    OffloadEngine unbroken(spec_of(c, nvme_b.path()));
    for (int step = 0; step < kSavedAt; ++step) unbroken.train_step(step);
    int step = kSavedAt;
    for (const uint64_t write_behind : {rank_file / 4, rank_file, 2 * rank_file}) {
      ScratchDir async_dir;
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> buffers,
                           checkpoint::WriteBuffers::create(write_behind, kSmallBuffer));
      // The engine has moved on since the synchronous save: only its first save is compared by bytes.
      const bool compared = write_behind == rank_file / 4;
      ASSERT_OK_AND_ASSIGN(
          std::unique_ptr<BackgroundSave> save,
          BackgroundSave::start(async_dir.path(), *unbroken.engine, at_step(kSavedAt), 0, buffers.get()));
      int steps_beside = 0;
      for (; steps_beside < kStepsAfter && (steps_beside == 0 || !save->written()); ++steps_beside)
        unbroken.train_step(step++);
      ASSERT_OK(save->finish());
      std::printf("%s, write-behind %llu of %llu B: written beside %d steps, the optimizer waited %.3f s\n", c.name,
                  static_cast<unsigned long long>(buffers->bytes()), static_cast<unsigned long long>(rank_file),
                  steps_beside, save->held_seconds());
      if (compared) {
        const std::map<std::string, std::string> got = checkpoint_files(async_dir.path());
        ASSERT_EQ(got.size(), expected.size()) << c.name;
        for (const auto& [name, bytes] : expected) EXPECT_TRUE(got.at(name) == bytes) << c.name << ": " << name;
      }
      EXPECT_OK(checkpoint::verify_checkpoint(async_dir.path(), "global_step" + std::to_string(kSavedAt)));
    }
  }
}

TEST(BackgroundSave, AWriteBehindSaveWhoseSyncFailsIsReturnedByFinishAndKeepsThePreviousCheckpoint) {
  ScratchDir dir;
  OffloadEngine e(spec_of(kCases[0], ""));
  e.train_step(0);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *e.engine, at_step(1)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> buffers,
                       checkpoint::WriteBuffers::create(64ull << 20, kSmallBuffer));  // the whole state, and more
  // The step index of the rank file's fdatasync, from the same save into a directory like DIR.
  size_t sync_step = 0;
  {
    ScratchDir probe;
    ASSERT_OK(save_engine_checkpoint(probe.path(), *e.engine, at_step(1)));
    fs::testing::FaultInjectionFs recording(fs::default_file_system(), probe.path());
    const fs::testing::ScopedDefaultFileSystem scoped(recording);
    ASSERT_OK(save_engine_checkpoint(probe.path(), *e.engine, at_step(2), 0, buffers.get()));
    const std::vector<fs::testing::FsStep> steps = recording.steps();
    const auto sync = std::find_if(steps.begin(), steps.end(), [](const fs::testing::FsStep& s) {
      return s.op == "sync" && s.path.ends_with("/rank_00000.bin");
    });
    ASSERT_NE(sync, steps.end());
    sync_step = static_cast<size_t>(sync - steps.begin());
  }
  e.train_step(1);
  fs::testing::FaultInjectionFs faulty(fs::default_file_system(), dir.path());
  faulty.fail_step(sync_step);
  Status finished;
  {
    const fs::testing::ScopedDefaultFileSystem scoped(faulty);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(2), 0, buffers.get()));
    e.train_step(2);  // the step runs beside the failing save, and is not held by it
    finished = save->finish();
  }
  EXPECT_ERROR(finished, ErrorCode::kIo, "rank_00000.bin");
  e.train_step(3);  // training goes on
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                       checkpoint::CheckpointReader::open(dir.path()));
  EXPECT_EQ(reader->tag(), "global_step1");
}

// A disk that completes no write of a rank file until opened: every such completion waits for it
// (on the I/O engine's thread), so the writes stay in flight; `full` fails them with ENOSPC instead.
class GatedDisk {
 public:
  GatedDisk()
      : faults_([this](const nvme::testing::PieceCompletion& piece, int64_t result) -> int64_t {
          if (piece.op != nvme::Op::kWrite || !piece.path.ends_with("/rank_00000.bin")) return result;
          if (full) return -ENOSPC;
          while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return result;
        }) {}
  std::atomic<bool> open = false;
  std::atomic<bool> full = false;

 private:
  nvme::testing::ScopedFaultInjector faults_;
};

// The point of write-behind: with buffers for the whole rank file the step after the save runs to
// its end while not one byte of the save has reached the disk, and the save is not written() until
// it has; held (write_behind 0: 4 buffers, less than the state) the same step waits for the disk.
TEST(BackgroundSave, WriteBehindReleasesTheOptimizerBeforeTheDiskHoldDoesNot) {
  ScratchDir dir;
  OffloadEngine e(spec_of(kCases[0], ""));
  e.train_step(0);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *e.engine, at_step(1)));
  const uint64_t rank_file = std::filesystem::file_size(dir.path() + "/global_step1/rank_00000.bin");
  ASSERT_GT(rank_file, 4 * kSmallBuffer);
  int step = 2;  // saved at 2 and 3, each beside the step after it
  e.train_step(1);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> behind,
                         checkpoint::WriteBuffers::create(rank_file, kSmallBuffer));
    GatedDisk disk;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(step), 0, behind.get()));
    e.train_step(step++);  // would never end if its optimizer waited for the disk
    EXPECT_FALSE(save->written()) << "the disk has completed no write yet";
    disk.open = true;
    ASSERT_OK(save->finish());
    EXPECT_TRUE(save->written());
    EXPECT_LT(save->held_seconds(), 0.25);
  }
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> held,
                         checkpoint::WriteBuffers::create(0, kSmallBuffer));
    GatedDisk disk;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(step), 0, held.get()));
    std::thread opener([&disk] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      disk.open = true;
    });
    e.train_step(step++);
    opener.join();
    ASSERT_OK(save->finish());
    EXPECT_GE(save->held_seconds(), 0.3) << "held at the disk's rate: the step waited for the gate";
  }
  EXPECT_OK(checkpoint::verify_checkpoint(dir.path(), "global_step" + std::to_string(step - 1)));
}

// A disk that fills while a write-behind save drains (every read done, the optimizer released): the
// error is returned by finish() naming the file, and DIR/latest still names the previous checkpoint.
TEST(BackgroundSave, ADiskFullWhileWriteBehindDrainsIsReturnedByFinish) {
  ScratchDir dir;
  OffloadEngine e(spec_of(kCases[0], ""));
  e.train_step(0);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *e.engine, at_step(1)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> buffers,
                       checkpoint::WriteBuffers::create(64ull << 20, kSmallBuffer));  // the whole state, and more
  Status finished;
  {
    GatedDisk disk;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(2), 0, buffers.get()));
    e.train_step(1);  // every read is done by its end; the writes are still held
    disk.full = true;
    disk.open = true;
    finished = save->finish();
  }
  EXPECT_ERROR(finished, ErrorCode::kOutOfSpace, "rank_00000.bin");
  e.train_step(2);  // training goes on
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                       checkpoint::CheckpointReader::open(dir.path()));
  EXPECT_EQ(reader->tag(), "global_step1");
}

// A disk whose rank-file writes fail with EIO from the `ok_writes`-th on (the earlier ones complete).
class FailingDisk {
 public:
  explicit FailingDisk(int ok_writes)
      : faults_([this, ok_writes](const nvme::testing::PieceCompletion& piece, int64_t result) -> int64_t {
          if (piece.op != nvme::Op::kWrite || !piece.path.ends_with("/rank_00000.bin")) return result;
          return writes_.fetch_add(1) < ok_writes ? result : -EIO;
        }) {}

 private:
  std::atomic<int> writes_ = 0;
  nvme::testing::ScopedFaultInjector faults_;
};

// The disk fails while the copy is mid-way (write-behind of 4 small buffers, far less than the
// state: the copy waits for the disk): the copy stops, the step beside it runs to its end (not held
// for the rest), finish() returns the error, and the previous checkpoint loads, its state the one
// it saved.
TEST(BackgroundSave, ADiskFailingMidCopyStopsTheSaveAndThePreviousCheckpointLoads) {
  const Case& c = kCases[4];  // copies on every core
  ScratchDir dir;
  OffloadEngine e(spec_of(c, ""));
  e.train_step(0);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *e.engine, at_step(1)));
  std::map<std::string, at::Tensor> saved;
  for (const auto& [name, weights] : e.engine->master_params()) saved[name] = weights.clone();
  e.train_step(1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::WriteBuffers> held,
                       checkpoint::WriteBuffers::create(0, kSmallBuffer));
  Status finished;
  {
    FailingDisk disk(8);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(2), 0, held.get()));
    e.train_step(2);  // would never end if the failed save kept holding its optimizer
    finished = save->finish();
  }
  EXPECT_ERROR(finished, ErrorCode::kIo, "rank_00000.bin");
  e.train_step(3);  // training goes on

  OffloadEngine resumed(spec_of(c, ""));
  ASSERT_OK_AND_ASSIGN(CheckpointExtras extras, load_engine_checkpoint(dir.path(), *resumed.engine));
  EXPECT_EQ(extras.iteration, 1);
  for (const auto& [name, weights] : resumed.engine->master_params())
    EXPECT_TRUE(at::equal(weights, saved.at(name))) << name;
}

// RLIMIT_FSIZE for this process while alive (writes past it fail with EFBIG, SIGXFSZ ignored).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

// The state in host memory (an NVMe one's swap files would meet the limit too).
TEST(BackgroundSave, AFailedWriteIsReturnedByFinishAndKeepsThePreviousCheckpoint) {
  ScratchDir dir;
  OffloadEngine e(spec_of({"compact_int8", at::kChar, MasterLayout::kCompact, false}, ""));
  e.train_step(0);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *e.engine, at_step(1)));
  e.train_step(1);
  Status finished;
  {
    const FileSizeLimit limit(4096);  // the rank file is larger
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<BackgroundSave> save,
                         BackgroundSave::start(dir.path(), *e.engine, at_step(2)));
    e.train_step(2);  // the step runs beside the failing save, and is not held by it
    finished = save->finish();
  }
  EXPECT_ERROR(finished, ErrorCode::kIo, dir.path() + "/global_step2");  // EFBIG: past the size limit
  e.train_step(3);                                                       // training goes on
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                       checkpoint::CheckpointReader::open(dir.path()));
  EXPECT_EQ(reader->tag(), "global_step1");
}

}  // namespace
}  // namespace tierzero::engine::testing
