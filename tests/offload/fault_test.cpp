// Disk failures: an I/O error or a full disk during writeback surfaces as an error and the data
// stays whole in the tier it was written from; a disk too small for the budget is refused at start.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>

#include "tests/offload/test_support.h"

namespace tierzero::offload {
namespace {

using testing::pattern;
using testing::read_view;
using testing::write_view;

constexpr uint64_t kBytes = 300000;

class DiskFaults : public ::testing::TestWithParam<Tier> {
 protected:
  void SetUp() override {
    io_ = testing::make_io();
    ASSERT_TRUE(io_);
    // The pinned tier (beyond staging) holds four shards: room for pressure, not for more.
    TierBudgets b = testing::small_budgets(dir_.path(), 2 << 20, (768 << 10) + 4 * 303104, 8 << 20);
    auto m = TierManager::create(b, io_.get());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    tm_ = std::move(m).value();
  }

  // Fills the held tier with other shards' copies, so an evictable copy of "x" would go.
  void pressure(Tier tier) {
    for (int i = 0; i < 8; ++i) {
      const std::string id = "filler" + std::to_string(i);
      if (!tm_->info(id).ok()) ASSERT_TRUE(tm_->register_shard({id, kBytes, DType::kU8, Tier::kNvme}).ok());
      Result<ShardView> v = tm_->fetch(id, tier).get();
      if (v.ok()) ASSERT_TRUE(tm_->release(id).get().ok());
    }
  }

  void inject(int err) {
    io_->set_fault_injector([err](const nvme::PieceCompletion& c, int64_t result) -> int64_t {
      return c.op == nvme::Op::kWrite ? -err : result;
    });
  }

  std::vector<uint8_t> contents(const std::string& id) {
    Result<ShardView> v = tm_->fetch(id, Tier::kPinned).get();
    EXPECT_TRUE(v.ok()) << v.status().to_string();
    std::vector<uint8_t> out = v.ok() ? read_view(*v) : std::vector<uint8_t>();
    EXPECT_TRUE(tm_->release(id).get().ok());
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<TierManager> tm_;
};

TEST_P(DiskFaults, FailedWritebackKeepsTheDataWholeUntilRepaired) {
  const Tier at = GetParam();
  for (int err : {EIO, ENOSPC}) {
    const std::string id = "x" + std::to_string(err);
    ASSERT_TRUE(tm_->register_shard({id, kBytes, DType::kU8, Tier::kNvme}).ok());
    Result<ShardView> v = tm_->fetch(id, at, Access::kWrite).get();
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    const std::vector<uint8_t> data = pattern(err, kBytes);
    write_view(*v, 0, data.data(), kBytes);

    inject(err);
    Status s = tm_->writeback(id).get();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(std::string("still whole in tier ") + tier_name(at)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("errno " + std::to_string(err)), std::string::npos) << s.message();
    EXPECT_EQ(tm_->info(id)->version, 0u);
    EXPECT_FALSE(tm_->release(id).get().ok());  // release retries the writeback, which fails again
    Result<ShardInfo> info = tm_->info(id);
    EXPECT_FALSE(info->valid[static_cast<int>(Tier::kNvme)]);
    EXPECT_TRUE(info->valid[static_cast<int>(at)]);

    pressure(at);  // the only whole copy is never evicted
    EXPECT_TRUE(tm_->info(id)->valid[static_cast<int>(at)]);
    EXPECT_EQ(tm_->evict(id, at).get().code(), ErrorCode::kInvalidArgument);

    io_->set_fault_injector({});
    ASSERT_TRUE(tm_->writeback(id).get().ok());  // repairs the home copy
    EXPECT_TRUE(tm_->info(id)->valid[static_cast<int>(Tier::kNvme)]);
    pressure(at);
    pressure(Tier::kPinned);
    EXPECT_EQ(contents(id), data);
  }
}

INSTANTIATE_TEST_SUITE_P(HeldIn, DiskFaults, ::testing::Values(Tier::kPinned, Tier::kGpu),
                         [](const auto& info) { return std::string(tier_name(info.param)); });

TEST(FullDisk, NvmeBudgetExhaustedIsRefusedBeforeAnyDataMoves) {
  testing::TempDir dir;
  auto tm = TierManager::create(testing::small_budgets(dir.path(), 0, 2 << 20, 1 << 20));
  ASSERT_TRUE(tm.ok()) << tm.status().to_string();
  ASSERT_TRUE((*tm)->register_shard({"a", 600 << 10, DType::kU8, Tier::kNvme}).ok());
  Status s = (*tm)->register_shard({"b", 600 << 10, DType::kU8, Tier::kNvme});
  EXPECT_EQ(s.code(), ErrorCode::kOutOfSpace);
  EXPECT_NE(s.message().find("raise nvme_bytes"), std::string::npos) << s.message();
}

// A real small file system: a 1 MiB tmpfs cannot take a 4 MiB NVMe budget. Needs root.
TEST(FullDisk, SmallFileSystemIsRefusedAtStart) {
  testing::TempDir dir;
  if (mount("tierzero-test", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (errno " << errno << "); needs root";
  }
  auto tm = TierManager::create(testing::small_budgets(dir.path(), 0, 2 << 20, 4 << 20));
  umount(dir.path().c_str());
  ASSERT_FALSE(tm.ok());
  EXPECT_EQ(tm.status().code(), ErrorCode::kOutOfSpace);
  EXPECT_NE(tm.status().message().find("has 1.00 MiB free (statvfs)"), std::string::npos) << tm.status().message();
}

}  // namespace
}  // namespace tierzero::offload
