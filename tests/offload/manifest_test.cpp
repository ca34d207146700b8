// Checkpoint capture: the NVMe manifest lists id -> (file, offset, bytes, version), and a new
// manager over the same swap files re-attaches it with contents and versions intact.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::pattern;
using testing::read_view;
using testing::write_view;

TierBudgets budgets(const test_support::ScratchDir& a, const test_support::ScratchDir& b) {
  TierBudgets t = testing::small_budgets(a.path(), 1 << 20, 2 << 20, 8 << 20);
  t.nvme_paths = {a.path(), b.path()};
  t.keep_nvme_files = true;
  return t;
}

// Swap files are sized up front (writes into them are then not file-extending ones).
TEST(Manifest, SwapFilesHaveTheirWholeSizeFromTheStart) {
  test_support::ScratchDir a, b;
  auto tm = TierManager::create(budgets(a, b));
  ASSERT_OK(tm);
  const uint64_t per_file = 4 << 20;  // nvme_bytes 8 MiB over two paths
  EXPECT_EQ(std::filesystem::file_size(a.path() + "/tierzero-swap-r0-s0.bin"), per_file);
  EXPECT_EQ(std::filesystem::file_size(b.path() + "/tierzero-swap-r0-s1.bin"), per_file);
}

TEST(Manifest, CapturesAndReattachesStripedShards) {
  test_support::ScratchDir a, b;
  std::vector<NvmeShardRecord> manifest;
  const uint64_t sizes[] = {5000, 100000, 333333};
  {
    auto tm = TierManager::create(budgets(a, b));
    ASSERT_OK(tm);
    for (int i = 0; i < 3; ++i) {
      const std::string id = "opt/" + std::to_string(i);
      ASSERT_OK((*tm)->register_shard({id, sizes[i], ElementType::kF32, Tier::kNvme}));
      for (int version = 1; version <= i + 1; ++version) {
        Result<ShardView> v = (*tm)->fetch(id, Tier::kGpu, Access::kWrite).get();
        ASSERT_OK(v);
        const std::vector<uint8_t> data = pattern(i * 10 + version, sizes[i]);
        write_view(*v, 0, data.data(), data.size());
        ASSERT_OK((*tm)->release(id).get());
      }
    }
    ASSERT_OK((*tm)->register_shard({"never-written", 4096, ElementType::kF32, Tier::kNvme}));
    manifest = (*tm)->nvme_manifest();
  }
  ASSERT_EQ(manifest.size(), 3u);  // never-written shards are zeros and not listed
  for (const NvmeShardRecord& r : manifest) {
    const int i = r.spec.id.back() - '0';
    EXPECT_EQ(r.version, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(r.spec.dtype, ElementType::kF32);
    EXPECT_EQ(r.parts.size(), r.spec.bytes > r.stripe_bytes ? 2u : 1u);
    EXPECT_NE(r.parts[0].file.find("tierzero-swap-r0-s0.bin"), std::string::npos);
    EXPECT_TRUE(std::filesystem::exists(r.parts[0].file));
  }

  auto tm = TierManager::create(budgets(a, b));
  ASSERT_OK(tm);
  ASSERT_OK((*tm)->attach_nvme(manifest));
  for (const NvmeShardRecord& r : manifest) {
    const int i = r.spec.id.back() - '0';
    EXPECT_EQ((*tm)->info(r.spec.id)->version, r.version);
    Result<ShardView> v = (*tm)->fetch(r.spec.id, Tier::kPinned).get();
    ASSERT_OK(v);
    EXPECT_TRUE(read_view(*v) == pattern(i * 10 + i + 1, sizes[i])) << r.spec.id;
    ASSERT_OK((*tm)->release(r.spec.id).get());
  }
  // The extents are taken: new shards land elsewhere and a second attach is refused.
  ASSERT_OK((*tm)->register_shard({"new", 200000, ElementType::kU8, Tier::kNvme}));
  EXPECT_EQ((*tm)->attach_nvme(manifest).code(), ErrorCode::kInvalidArgument);
}

TEST(Manifest, RecordsThatDoNotMatchTheSwapFilesAreRefused) {
  test_support::ScratchDir a, b;
  auto tm = TierManager::create(budgets(a, b));
  ASSERT_OK(tm);
  NvmeShardRecord r{{"w", 100000, ElementType::kF32, Tier::kNvme}, 1, 16 << 10, {}};
  EXPECT_EQ((*tm)->attach_nvme({r}).code(), ErrorCode::kInvalidArgument);  // no parts
  r.parts = {{a.path() + "/tierzero-swap-r0-s0.bin", 0, 4 * 16384}, {"/elsewhere/file.bin", 0, 3 * 16384}};
  Status s = (*tm)->attach_nvme({r});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("/elsewhere/file.bin"), std::string::npos) << s.message();
  EXPECT_EQ((*tm)->info("w").status().code(), ErrorCode::kNotFound);
  r.stripe_bytes = 4096;
  EXPECT_NE((*tm)->attach_nvme({r}).message().find("stripe"), std::string::npos);
}

TEST(Manifest, SwapFilesAreRemovedOnExitUnlessKept) {
  test_support::ScratchDir a;
  std::string file = a.path() + "/tierzero-swap-r0-s0.bin";
  {
    auto tm = TierManager::create(testing::small_budgets(a.path(), 0, 2 << 20, 1 << 20));
    ASSERT_OK(tm);
    EXPECT_TRUE(std::filesystem::exists(file));
  }
  EXPECT_FALSE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace tierzero::offload
