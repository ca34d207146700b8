// Every ds_config shipped in configs/ parses cleanly: no error and no warning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/config/ds_config.h"
#include "engine/data/token_data.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

std::filesystem::path configs_dir() {
  const char* root = std::getenv("TIERZERO_SOURCE_DIR");
  return std::filesystem::path(root ? root : ".") / "configs";
}

TEST(ShippedConfigs, EveryFileParsesWithoutWarnings) {
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".json") continue;
    for (int world : {1, 2, 4, 8}) {
      Result<DsConfig> r =
          load_ds_config(entry.path().string(), ResolveHints{.world_size = world, .total_steps = 1000});
      ASSERT_OK(r);
      EXPECT_TRUE(r->warnings.empty()) << entry.path() << ": " << r->warnings.front();
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 5) << "expected the five ds_configs in " << configs_dir();
}

TEST(ShippedConfigs, EachSaysWhatItsNamePromises) {
  auto load = [](const char* name, int world = 1) {
    return load_ds_config((configs_dir() / name).string(), ResolveHints{.world_size = world, .total_steps = 200})
        .value();
  };
  EXPECT_EQ(load("tiny.json").zero.stage, 0);
  EXPECT_EQ(load("zero2.json").zero.stage, 2);
  DsConfig z3 = load("zero3.json", 4);
  EXPECT_EQ(z3.zero.stage, 3);
  EXPECT_EQ(z3.batch.world_size, 4);
  DsConfig z2o = load("zero2_offload_cpu.json");
  EXPECT_EQ(z2o.zero.stage, 2);
  EXPECT_EQ(z2o.zero.offload_optimizer.device, OffloadDevice::kCpu);
  DsConfig z3o = load("zero3_offload_cpu.json");
  EXPECT_EQ(z3o.zero.stage, 3);
  EXPECT_EQ(z3o.zero.offload_optimizer.device, OffloadDevice::kCpu);
  DsConfig compact = load("zero3_compact_nvme.json");
  EXPECT_EQ(compact.zero.offload_optimizer.device, OffloadDevice::kNvme);
  EXPECT_EQ(compact.tierzero.master_weights, MasterWeights::kCompact);
  EXPECT_EQ(compact.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8);
  EXPECT_EQ(compact.tierzero.offload_grad_dtype, OffloadGradDtype::kBf16);
  EXPECT_EQ(compact.tierzero.optimizer_records_in_memory, kOptimizerRecordsAuto);
}

TEST(ShippedConfigs, TinyCorpusIsTheTextByteForByte) {
  const std::filesystem::path data = configs_dir() / "data";
  std::ifstream text_file(data / "tiny_corpus.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(text_file)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 10'000u);
  const int64_t seq_len = 128;
  auto source = open_token_file((data / "tiny_corpus.u16").string(), seq_len).value();
  ASSERT_EQ(source->size(), static_cast<int64_t>((text.size() - 1) / seq_len));
  std::vector<int64_t> in(seq_len), targets(seq_len);
  for (int64_t i = 0; i < source->size(); ++i) {
    ASSERT_OK(source->read(i, in.data(), targets.data()));
    for (int64_t t = 0; t < seq_len; ++t) {
      ASSERT_EQ(in[t], static_cast<unsigned char>(text[static_cast<size_t>(i * seq_len + t)])) << i << ":" << t;
    }
  }
}

TEST(ShippedConfigs, TinyConfigFeedsTheTinyCorpus) {
  for (int world : {1, 2}) {
    DsConfig c = load_ds_config((configs_dir() / "tiny.json").string(), ResolveHints{.world_size = world}).value();
    EXPECT_EQ(c.tierzero.data_path, "configs/data/tiny_corpus.u16");
    std::set<int64_t> seen;
    for (int rank = 0; rank < world; ++rank) {
      Result<MicroBatchIterator> it = open_training_data(c, rank, configs_dir().parent_path().string());
      ASSERT_OK(it);
      EXPECT_GE(it->micro_batches_per_epoch(), 20 / world);
      MicroBatch batch = it->next().value();
      EXPECT_EQ(batch.batch_size, 8);
      EXPECT_EQ(batch.seq_len, 128);
      for (int64_t s : batch.sample_indices) EXPECT_TRUE(seen.insert(s).second);
    }
  }
}

TEST(ShippedConfigs, TrainingDataNeedsAPath) {
  DsConfig c = load_ds_config((configs_dir() / "zero2.json").string(), ResolveHints{}).value();
  EXPECT_ERROR(open_training_data(c, 0), ErrorCode::kInvalidArgument, "tierzero.data.path");
}

}  // namespace
}  // namespace tierzero::engine
