// Checkpoints of an optimizer whose state is on NVMe stream it: a save reads the swap files one
// sub-group's part at a time into the rank file's sections, a resume writes them back the same way
// (PartitionOptimizer::state_reader / load_state). The files are the same, byte for byte, as the
// save of the same state held in host memory — fp32 and bf16 moments, stages 1 and 3, raw and zstd,
// sub-groups that do not divide the partition — and the resumed run continues bit for bit, on the
// CPU and (skipped without CUDA) with the compute on one GPU. The 16-bit export reads the master the
// same way, range by range.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/model/functional_model.h"
#include "offload_engine.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

class NvmeCheckpointStream : public ::testing::TestWithParam<std::tuple<int, at::ScalarType, int>> {};

TEST_P(NvmeCheckpointStream, SaveIsTheHostStateSaveByteForByteAndResumeContinues) {
  const auto [stage, state, level] = GetParam();
  test_support::ScratchDir dir("nvme-ckpt-stream");
  std::filesystem::create_directories(dir.file("swap"));
  const OffloadEngineSpec host_spec{.stage = stage, .compute = at::kBFloat16, .state = state};
  OffloadEngineSpec nvme_spec = host_spec;
  nvme_spec.nvme_dir = dir.file("swap");
  OffloadEngine host(host_spec), on_nvme(nvme_spec);
  for (int step = 0; step < 3; ++step) ASSERT_EQ(on_nvme.train_step(step), host.train_step(step));
  ASSERT_OK(save_engine_checkpoint(dir.file("host"), *host.engine, CheckpointExtras{.iteration = 3}, level));
  ASSERT_OK(save_engine_checkpoint(dir.file("nvme"), *on_nvme.engine, CheckpointExtras{.iteration = 3}, level));
  for (const char* name : {"rank_00000.bin", "manifest.json"})
    EXPECT_EQ(file_bytes(dir.file("nvme") + "/global_step3/" + name),
              file_bytes(dir.file("host") + "/global_step3/" + name))
        << name;

  // The save did not disturb the swap: both keep training alike; and a resume onto NVMe continues.
  OffloadEngineSpec resumed_spec = nvme_spec;
  resumed_spec.nvme_dir = dir.file("swap2");  // one swap file per directory and rank
  std::filesystem::create_directories(resumed_spec.nvme_dir);
  OffloadEngine resumed(resumed_spec);
  ASSERT_OK(load_engine_checkpoint(dir.file("nvme"), *resumed.engine).status());
  for (int step = 3; step < 6; ++step) {
    const double want = host.train_step(step);
    EXPECT_EQ(on_nvme.train_step(step), want) << "step " << step;
    EXPECT_EQ(resumed.train_step(step), want) << "resumed, step " << step;
  }
}

// On a GPU: the compute weights come back from the swap files to the device (sync_compute_params
// streams the master in pieces) and the resumed run continues bit for bit.
TEST(NvmeCheckpointStreamGpu, ResumeOntoNvmeContinuesOnTheGpu) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  test_support::ScratchDir dir("nvme-ckpt-stream");
  for (const char* swap : {"swap", "swap2"}) std::filesystem::create_directories(dir.file(swap));
  const OffloadEngineSpec spec{
      .stage = 3, .compute = at::kBFloat16, .state = at::kBFloat16, .nvme_dir = dir.file("swap"), .cuda = true};
  OffloadEngine trained(spec);
  for (int step = 0; step < 3; ++step) trained.train_step(step);
  ASSERT_OK(save_engine_checkpoint(dir.file("ckpt"), *trained.engine, CheckpointExtras{.iteration = 3}));
  OffloadEngineSpec resumed_spec = spec;
  resumed_spec.nvme_dir = dir.file("swap2");
  OffloadEngine resumed(resumed_spec);
  ASSERT_OK(load_engine_checkpoint(dir.file("ckpt"), *resumed.engine).status());
  for (int step = 3; step < 6; ++step) EXPECT_EQ(resumed.train_step(step), trained.train_step(step)) << "step " << step;
}

INSTANTIATE_TEST_SUITE_P(Layouts, NvmeCheckpointStream,
                         ::testing::Combine(::testing::Values(1, 3), ::testing::Values(at::kFloat, at::kBFloat16),
                                            ::testing::Values(0, 3)),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == at::kFloat ? "_fp32state" : "_bf16state") +
                                  (std::get<2>(info.param) ? "_zstd" : "_raw");
                         });

// The 16-bit export reads the master from the swap files range by range (read_master: one
// sub-group's master part at a time, ranges of 64 bytes here), never the whole state: the files
// are the export of the same state held in host memory, byte for byte.
TEST(NvmeExport, IsTheHostStateExportByteForByte) {
  test_support::ScratchDir dir("nvme-export");
  std::filesystem::create_directories(dir.file("swap"));
  const OffloadEngineSpec host_spec{.stage = 3, .compute = at::kBFloat16, .state = at::kBFloat16};
  OffloadEngineSpec nvme_spec = host_spec;
  nvme_spec.nvme_dir = dir.file("swap");
  OffloadEngine host(host_spec), on_nvme(nvme_spec);
  for (int step = 0; step < 3; ++step) ASSERT_EQ(on_nvme.train_step(step), host.train_step(step));
  const std::string config = to_hf_json(host.model->config());
  const Export16bitOptions options{.max_shard_bytes = 16 << 10, .read_piece_bytes = 64};
  ASSERT_OK(export_16bit_model(*host.engine, config, dir.file("host"), options));
  ASSERT_OK(export_16bit_model(*on_nvme.engine, config, dir.file("nvme"), options));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file("host"))) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(file_bytes(dir.file("nvme") + "/" + name), file_bytes(entry.path())) << name;
    ++files;
  }
  EXPECT_GE(files, 3u);  // config.json, the index and its shards
  // Exporting did not disturb the swap: both keep training alike.
  EXPECT_EQ(on_nvme.train_step(3), host.train_step(3));
}

}  // namespace
}  // namespace tierzero::engine::testing
