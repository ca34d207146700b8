// Every ds_config shipped in configs/ parses cleanly: no error and no warning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/config/ds_config.h"

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
      Result<DsConfig> r = load_ds_config(entry.path().string(), ResolveHints{.world_size = world, .total_steps = 1000});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_TRUE(r->warnings.empty()) << entry.path() << ": " << r->warnings.front();
    }
    ++parsed;
  }
  EXPECT_GE(parsed, 5) << "expected the five ds_configs in " << configs_dir();
}

TEST(ShippedConfigs, EachSaysWhatItsNamePromises) {
  auto load = [](const char* name, int world = 1) {
    return load_ds_config((configs_dir() / name).string(), ResolveHints{.world_size = world}).value();
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
}

}  // namespace
}  // namespace tierzero::engine
