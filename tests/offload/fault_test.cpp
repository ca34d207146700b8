// Disk failures: an I/O error or a full disk during writeback surfaces as an error and the data
// stays whole in the tier it was written from; a full disk is a kOutOfSpace "NVMe disk full"
// error with the numbers and the fix; a disk too small for the budget is refused at start.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>

#include "nvme/testing/fault_injection.h"
#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

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
    ASSERT_OK(m);
    tm_ = std::move(m).value();
  }

  // Fills the held tier with other shards' copies, so an evictable copy of "x" would go.
  void pressure(Tier tier) {
    for (int i = 0; i < 8; ++i) {
      const std::string id = "filler" + std::to_string(i);
      if (!tm_->info(id).ok()) {
        ASSERT_OK(tm_->register_shard({id, kBytes, ElementType::kU8, Tier::kNvme}));
      }
      Result<ShardView> v = tm_->fetch(id, tier).get();
      if (v.ok()) {
        ASSERT_OK(tm_->release(id).get());
      }
    }
  }

  test_support::ScratchDir dir_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<TierManager> tm_;
};

TEST_P(DiskFaults, FailedWritebackKeepsTheDataWholeUntilRepaired) {
  const Tier at = GetParam();
  for (int err : {EIO, ENOSPC}) {
    const std::string id = "x" + std::to_string(err);
    ASSERT_OK(tm_->register_shard({id, kBytes, ElementType::kU8, Tier::kNvme}));
    Result<ShardView> v = tm_->fetch(id, at, Access::kWrite).get();
    ASSERT_OK(v);
    const std::vector<uint8_t> data = pattern(err, kBytes);
    write_view(*v, 0, data.data(), kBytes);

    {
      nvme::testing::ScopedFaultInjector failing_writes(
          [err](const nvme::testing::PieceCompletion& c, int64_t result) -> int64_t {
            return c.op == nvme::Op::kWrite ? -err : result;
          });
      const ErrorCode code = err == ENOSPC ? ErrorCode::kOutOfSpace : ErrorCode::kIo;
      Status s = tm_->writeback(id).get();
      EXPECT_ERROR(s, code, std::string("still whole in tier ") + tier_name(at));
      EXPECT_ERROR(s, code, "errno " + std::to_string(err));
      if (err == ENOSPC) {  // a full disk is told apart from other I/O errors, with the numbers and the fix
        EXPECT_ERROR(s, code, "NVMe disk full: writing 292.97 KiB to the swap file(s) " + dir_.path() + "/");
        EXPECT_ERROR(s, code, "but " + dir_.path() + " has ");
        EXPECT_ERROR(s, code, "free space on that disk, or set a smaller nvme_bytes or another nvme_path");
      }
      EXPECT_EQ(tm_->info(id)->version, 0u);
      // release retries the writeback, which fails again
      EXPECT_ERROR(tm_->release(id).get(), code, "still whole in tier ");
      Result<ShardInfo> info = tm_->info(id);
      EXPECT_FALSE(info->valid[static_cast<int>(Tier::kNvme)]);
      EXPECT_TRUE(info->valid[static_cast<int>(at)]);

      pressure(at);  // the only whole copy is never evicted
      EXPECT_TRUE(tm_->info(id)->valid[static_cast<int>(at)]);
      EXPECT_EQ(tm_->evict(id, at).get().code(), ErrorCode::kInvalidArgument);
    }
    ASSERT_OK(tm_->writeback(id).get());  // repairs the home copy
    EXPECT_TRUE(tm_->info(id)->valid[static_cast<int>(Tier::kNvme)]);
    pressure(at);
    pressure(Tier::kPinned);
    EXPECT_EQ(testing::pinned_contents(*tm_, id), data);
  }
}

INSTANTIATE_TEST_SUITE_P(HeldIn, DiskFaults, ::testing::Values(Tier::kPinned, Tier::kGpu),
                         [](const auto& info) { return std::string(tier_name(info.param)); });

TEST(FullDisk, NvmeBudgetExhaustedIsRefusedBeforeAnyDataMoves) {
  test_support::ScratchDir dir;
  auto tm = TierManager::create(testing::small_budgets(dir.path(), 0, 2 << 20, 1 << 20));
  ASSERT_OK(tm);
  ASSERT_OK((*tm)->register_shard({"a", 600 << 10, ElementType::kU8, Tier::kNvme}));
  Status s = (*tm)->register_shard({"b", 600 << 10, ElementType::kU8, Tier::kNvme});
  EXPECT_EQ(s.code(), ErrorCode::kOutOfSpace);
  EXPECT_NE(s.message().find("raise nvme_bytes"), std::string::npos) << s.message();
}

// An IoEngine that passes everything to `inner` but changes how swap files open: `open_errno`
// fails the open as fallocate on a filling disk does; `skip_preallocation` opens without
// fallocate, as on a file system that refuses it.
class OpenFaults final : public nvme::IoEngine {
 public:
  explicit OpenFaults(nvme::IoEngine& inner) : inner_(inner) {}
  int open_errno = 0;
  bool skip_preallocation = false;

  nvme::Backend backend() const override { return inner_.backend(); }
  const nvme::IoConfig& config() const override { return inner_.config(); }
  Result<nvme::FileRef> open(const std::string& path, const nvme::OpenOptions& options) override {
    if (open_errno != 0) {
      return errno_status(open_errno,
                          "cannot preallocate " + std::to_string(options.preallocate_bytes) + " bytes for " + path);
    }
    nvme::OpenOptions changed = options;
    if (skip_preallocation) changed.preallocate_bytes = 0;
    return inner_.open(path, changed);
  }
  nvme::IoTicket submit(nvme::IoRequest request) override { return inner_.submit(std::move(request)); }
  std::vector<nvme::IoTicket> submit_batch(std::vector<nvme::IoRequest> requests) override {
    return inner_.submit_batch(std::move(requests));
  }
  Status register_buffer(void* buffer, uint64_t bytes) override { return inner_.register_buffer(buffer, bytes); }
  Status unregister_buffer(void* buffer) override { return inner_.unregister_buffer(buffer); }

 private:
  nvme::IoEngine& inner_;
};

TEST(FullDisk, DiskFillingDuringPreallocationIsReportedAtStart) {
  test_support::ScratchDir dir;
  auto io = testing::make_io();
  ASSERT_TRUE(io);
  OpenFaults faults(*io);
  faults.open_errno = ENOSPC;
  auto tm = TierManager::create(testing::small_budgets(dir.path(), 0, 2 << 20, 4 << 20), &faults);
  EXPECT_ERROR(tm, ErrorCode::kOutOfSpace,
               "NVMe disk full: preallocating the swap file " + dir.path() +
                   "/tierzero-swap-r0-s0.bin needs 4.00 MiB but " + dir.path() + " has ");
  EXPECT_ERROR(tm, ErrorCode::kOutOfSpace, "free space on that disk, or set a smaller nvme_bytes or another nvme_path");
}

// Fills the file system holding `dir` with a junk file; returns its path.
std::string fill_disk(const std::string& dir) {
  const std::string path = dir + "/junk";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0);
  std::vector<char> block(4096, 'j');
  while (::write(fd, block.data(), block.size()) > 0) {
  }
  ::close(fd);
  return path;
}

// A real full disk (a 2 MiB tmpfs; swap file not preallocated, as where fallocate is refused):
// registration is refused while the disk has no room for the shard, and a writeback that meets
// ENOSPC keeps the data whole until space is freed. Needs root for the mount.
TEST(FullDisk, RealFullFileSystemIsReportedBeforeDataIsLost) {
  test_support::ScratchDir dir;
  if (mount("tierzero-test", dir.path().c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (errno " << errno << "); needs root";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{dir.path()};
  auto io = testing::make_io();
  ASSERT_TRUE(io);
  OpenFaults faults(*io);
  faults.skip_preallocation = true;
  auto created = TierManager::create(testing::small_budgets(dir.path(), 0, (768 << 10) + (1 << 20), 1 << 20), &faults);
  ASSERT_OK(created);
  TierManager& tm = **created;
  constexpr uint64_t kShard = 256 << 10;
  ASSERT_OK(tm.register_shard({"c", kShard, ElementType::kU8, Tier::kNvme}));
  const std::string junk = fill_disk(dir.path());

  Status refused = tm.register_shard({"b", kShard, ElementType::kU8, Tier::kNvme});
  EXPECT_EQ(refused.code(), ErrorCode::kOutOfSpace) << refused.to_string();
  EXPECT_NE(refused.message().find("NVMe disk full: a shard of 256.00 KiB"), std::string::npos) << refused.message();

  Result<ShardView> v = tm.fetch("c", Tier::kPinned, Access::kWrite).get();
  ASSERT_OK(v);
  const std::vector<uint8_t> data = pattern(3, kShard);
  write_view(*v, 0, data.data(), kShard);
  Status full = tm.writeback("c").get();
  EXPECT_EQ(full.code(), ErrorCode::kOutOfSpace) << full.to_string();
  EXPECT_NE(full.message().find("NVMe disk full: writing 256.00 KiB"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("still whole in tier pinned"), std::string::npos) << full.message();
  EXPECT_EQ(read_view(*v), data);

  ASSERT_EQ(::unlink(junk.c_str()), 0);
  Status repaired = tm.writeback("c").get();
  ASSERT_OK(repaired);
  ASSERT_OK(tm.release("c").get());
  ASSERT_OK(tm.evict("c", Tier::kPinned).get());
  Result<ShardView> back = tm.fetch("c", Tier::kPinned).get();
  ASSERT_OK(back);
  EXPECT_EQ(read_view(*back), data);
  ASSERT_OK(tm.release("c").get());
}

// A real small file system: a 1 MiB tmpfs cannot take a 4 MiB NVMe budget. Needs root.
TEST(FullDisk, SmallFileSystemIsRefusedAtStart) {
  test_support::ScratchDir dir;
  if (mount("tierzero-test", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (errno " << errno << "); needs root";
  }
  auto tm = TierManager::create(testing::small_budgets(dir.path(), 0, 2 << 20, 4 << 20));
  umount(dir.path().c_str());
  EXPECT_ERROR(tm, ErrorCode::kOutOfSpace, "has 1.00 MiB free (statvfs)");
}

}  // namespace
}  // namespace tierzero::offload
