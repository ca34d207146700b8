// train() runs the planner (engine/plan) before it allocates anything: a budget the plan cannot meet
// is refused with the planner's message (the tier, the bytes, the key), before the model's weights
// exist; a plan that fits trains exactly as before; a missing nvme_path directory is refused by name.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <ATen/Context.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

int64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

std::string source_path(const std::string& relative) {
  const char* root = std::getenv("TIERZERO_SOURCE_DIR");
  return std::string(root ? root : ".") + "/" + relative;
}

const nlohmann::json kOffloadCpu = {{"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}}}}}};

// A 1.35B model whose optimizer (16 B/param pinned with its fp32 gradients: ~22 GB) cannot fit a 1 GB
// pinned budget: refused before its 5.4 GB of fp32 weights are made, in well under the time that
// would take, and without the process's peak resident set growing by anything of that size.
TEST(TrainPlanCheck, PinnedBudgetTooSmallIsRefusedBeforeAnythingIsAllocated) {
  ScratchDir dir;
  nlohmann::json overrides = kOffloadCpu;
  overrides["tierzero"]["pinned_memory_limit"] = "1GB";
  TrainArgs args = train_args(write_config(dir, small_config(overrides)), 1);
  args.model_config_path = source_path("benchmarks/models/llama_1.35b.json");
  const int64_t rss_before = peak_rss_bytes();
  const auto start = std::chrono::steady_clock::now();
  TrainRun run = run_train(args);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_ERROR(run.summary, ErrorCode::kOutOfSpace, "does not fit its budgets");
  const Status& status = run.summary.status();
  EXPECT_NE(status.message().find("pinned needs "), std::string::npos) << status.to_string();
  EXPECT_NE(status.message().find("> tierzero.pinned_memory_limit 953.67 MiB"), std::string::npos)
      << status.to_string();
  EXPECT_NE(status.message().find("optimizer state (fp32 master, m, v)"), std::string::npos) << status.to_string();
  EXPECT_LT(seconds, 10.0);
  EXPECT_LT(peak_rss_bytes() - rss_before, int64_t{1} << 30) << "the 1.35B model's weights were allocated";
}

TEST(TrainPlanCheck, APlanThatFitsTrainsAsWithoutTheBudget) {
  ScratchDir dir;
  nlohmann::json limited = kOffloadCpu;
  limited["tierzero"]["pinned_memory_limit"] = "1GB";  // the tiny model needs a few MB
  TrainRun with_limit = run_train(train_args(write_config(dir, small_config(limited), "limited.json"), 3));
  TrainRun without = run_train(train_args(write_config(dir, small_config(kOffloadCpu), "free.json"), 3));
  ASSERT_OK(with_limit.summary);
  ASSERT_OK(without.summary);
  EXPECT_EQ(with_limit.summary->losses, without.summary->losses) << "bit for bit";
}

// The engine ignores tierzero.gpu_memory_limit on the CPU, so the plan does too; on a GPU a 1 MB
// budget is refused by the planner, naming the key.
TEST(TrainPlanCheck, GpuBudgetIsCheckedOnlyWhereThereIsAGpu) {
  ScratchDir dir;
  TrainRun run =
      run_train(train_args(write_config(dir, small_config({{"tierzero", {{"gpu_memory_limit", "1MB"}}}})), 1));
  if (at::hasCUDA()) {
    EXPECT_ERROR(run.summary, ErrorCode::kOutOfSpace, "> tierzero.gpu_memory_limit");
  } else {
    EXPECT_OK(run.summary);
  }
}

TEST(TrainPlanCheck, MissingNvmePathDirectoryIsRefusedByName) {
  ScratchDir dir;
  const std::string missing = dir / "not-made";
  std::filesystem::create_directories(dir / "made");
  const nlohmann::json overrides = {
      {"zero_optimization",
       {{"stage", 2}, {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", {dir / "made", missing}}}}}}};
  TrainRun run = run_train(train_args(write_config(dir, small_config(overrides)), 1));
  EXPECT_ERROR(run.summary, ErrorCode::kNotFound,
               "zero_optimization.offload_optimizer.nvme_path " + missing + " does not exist");
  EXPECT_FALSE(std::filesystem::exists(missing)) << "train made the directory it refused";
}

// A 60B-parameter shape whose optimizer state (12 B/param, ~0.7 TB) is larger than the free space of
// the two nvme_path directories (one file system, counted once): the planner's NVMe check refuses it.
TEST(TrainPlanCheck, NvmeStateLargerThanTheDiskIsRefused) {
  ScratchDir dir;
  const nlohmann::json big_model = {{"model_type", "llama"},    {"vocab_size", 32000},
                                    {"hidden_size", 8192},      {"intermediate_size", 28672},
                                    {"num_hidden_layers", 64},  {"num_attention_heads", 64},
                                    {"num_key_value_heads", 8}, {"max_position_embeddings", 4096},
                                    {"rms_norm_eps", 1e-5},     {"tie_word_embeddings", false}};
  std::ofstream(dir / "config.json") << big_model.dump();
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  struct statvfs vfs {};
  ASSERT_EQ(statvfs(dir.path().c_str(), &vfs), 0);
  const double free_bytes = static_cast<double>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes > 6e11) GTEST_SKIP() << "this disk could hold the 0.7 TB of state";
  const nlohmann::json overrides = {
      {"zero_optimization",
       {{"stage", 3}, {"offload_optimizer", {{"device", "nvme"}, {"nvme_path", {dir / "a", dir / "b"}}}}}}};
  TrainArgs args = train_args(write_config(dir, small_config(overrides)), 1);
  args.model_config_path = dir / "config.json";
  TrainRun run = run_train(args);
  ASSERT_ERROR(run.summary, ErrorCode::kOutOfSpace, "nvme needs ");
  const std::string message = run.summary.status().message();
  EXPECT_NE(message.find("> free space on the NVMe paths "), std::string::npos) << message;
  EXPECT_NE(message.find("tierzero.optimizer_state_dtype \"bf16\""), std::string::npos) << message;
}

}  // namespace
}  // namespace tierzero::engine::testing
