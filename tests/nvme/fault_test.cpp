// Bad input and faults on every backend: each gives its precise error or is retried correctly.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "engine_fixture.h"
#include "nvme/testing/fault_injection.h"
#include "tests/support/status_matchers.h"

namespace tierzero::nvme {
namespace {

using testing::PieceCompletion;
using testing::random_bytes;
using testing::ScopedFaultInjector;

class FaultTest : public testing::EngineTest {};

TEST_P(FaultTest, ReadPastEndOfFileIsReportedNotZeroFilled) {
  auto data = random_bytes(10000, 10);
  FileRef f = make_file("short", data);
  ASSERT_TRUE(f);
  std::vector<uint8_t> back(100, 0xAB);
  Status s = read_sync(*engine_, f, 20000, back.data(), back.size());
  EXPECT_ERROR(s, ErrorCode::kCorrupt, f->path());
  EXPECT_ERROR(s, ErrorCode::kCorrupt, "shorter than asked");
  EXPECT_ERROR(s, ErrorCode::kCorrupt, "at offset 20000");
  EXPECT_ERROR(s, ErrorCode::kCorrupt, "ends at 10000");
}

TEST_P(FaultTest, FileShorterThanAskedIsReported) {
  auto data = random_bytes(10000, 11);
  FileRef f = make_file("shorter", data);
  ASSERT_TRUE(f);
  std::vector<uint8_t> back(200000);
  IoTicket t = engine_->submit(IoRequest{f, Op::kRead, 0, back.data(), back.size(), false});
  Status s = t.wait();
  EXPECT_ERROR(s, ErrorCode::kCorrupt, "reading 200000 bytes at offset 0");
  EXPECT_ERROR(s, ErrorCode::kCorrupt, "ends at 10000");
  EXPECT_LT(t.bytes_done(), back.size());
  // The part that exists is still read exactly.
  ASSERT_OK(read_sync(*engine_, f, 0, back.data(), data.size()));
  EXPECT_EQ(0, std::memcmp(back.data(), data.data(), data.size()));
}

TEST_P(FaultTest, InjectedEioNamesFileOffsetAndErrno) {
  auto data = random_bytes(256 << 10, 12);
  FileRef f = make_file("eio", data);
  ASSERT_TRUE(f);
  std::vector<uint8_t> back(data.size());
  {
    ScopedFaultInjector faults([](const PieceCompletion& c, int64_t r) { return c.offset == 131072 ? -EIO : r; });
    Status s = read_sync(*engine_, f, 0, back.data(), back.size());
    EXPECT_ERROR(s, ErrorCode::kIo, "read of 65536 bytes at offset 131072 of " + f->path());
    EXPECT_ERROR(s, ErrorCode::kIo, std::strerror(EIO));
    EXPECT_ERROR(s, ErrorCode::kIo, "errno 5");

    FileRef w = open("eio-write", OpenMode::kWrite);
    ASSERT_TRUE(w);
    s = write_sync(*engine_, w, 0, data.data(), data.size());
    EXPECT_ERROR(s, ErrorCode::kIo, "write of 65536 bytes at offset 131072 of " + w->path());
  }
  ASSERT_OK(read_sync(*engine_, f, 0, back.data(), back.size()));
  EXPECT_EQ(back, data);
}

// Short and zero counts (up to three in a row at any one offset) are resubmitted for the
// remainder; the data that lands, on disk and in memory, is exact.
TEST_P(FaultTest, ShortAndZeroCountsAreResubmitted) {
  for (bool zero : {false, true}) {
    SCOPED_TRACE(zero ? "zero counts" : "short counts");
    std::mutex mu;
    std::map<uint64_t, int> faults_at;
    int injected = 0;
    ScopedFaultInjector faults([&](const PieceCompletion& c, int64_t r) -> int64_t {
      std::lock_guard lock(mu);
      if (r <= 1 || faults_at[c.offset]++ >= 3) return r;
      ++injected;
      return zero ? 0 : r / 2 + 1;
    });
    auto data = random_bytes(500001, zero ? 13 : 14);
    FileRef f = open(zero ? "zero" : "halves", OpenMode::kReadWrite);
    ASSERT_TRUE(f);
    Status w = write_sync(*engine_, f, 3, data.data(), data.size());
    ASSERT_OK(w);
    {
      std::lock_guard lock(mu);
      faults_at.clear();
    }
    std::vector<uint8_t> back(data.size());
    Status r = read_sync(*engine_, f, 3, back.data(), back.size());
    ASSERT_OK(r);
    EXPECT_EQ(back, data);
    EXPECT_GT(injected, 10);
    auto on_disk = testing::read_plain_file(f->path());
    ASSERT_EQ(on_disk.size(), data.size() + 3);
    EXPECT_EQ(0, std::memcmp(on_disk.data() + 3, data.data(), data.size()));
  }
}

TEST_P(FaultTest, CountsThatNeverProgressFail) {
  auto data = random_bytes(100000, 15);
  FileRef f = make_file("stuck", data);
  ASSERT_TRUE(f);
  ScopedFaultInjector faults([](const PieceCompletion&, int64_t) -> int64_t { return 0; });
  std::vector<uint8_t> back(data.size());
  Status s = read_sync(*engine_, f, 0, back.data(), back.size());
  EXPECT_ERROR(s, ErrorCode::kIo, "made no progress");
  EXPECT_ERROR(s, ErrorCode::kIo, f->path());
  FileRef w = open("stuck-write", OpenMode::kWrite);
  ASSERT_TRUE(w);
  s = write_sync(*engine_, w, 0, data.data(), data.size());
  EXPECT_ERROR(s, ErrorCode::kIo, "write of");
  EXPECT_ERROR(s, ErrorCode::kIo, "made no progress");
}

TEST_P(FaultTest, OverlongCountIsAnInternalError) {
  auto data = random_bytes(70000, 16);
  FileRef f = make_file("overlong", data);
  ASSERT_TRUE(f);
  ScopedFaultInjector faults([](const PieceCompletion& c, int64_t) { return static_cast<int64_t>(c.length + 1); });
  std::vector<uint8_t> back(data.size());
  Status s = read_sync(*engine_, f, 0, back.data(), back.size());
  EXPECT_ERROR(s, ErrorCode::kInternal, "more than asked");
}

TEST_P(FaultTest, WriteToReadOnlyFileNamesIt) {
  auto data = random_bytes(8192, 17);
  FileRef f = make_file("readonly", data);
  ASSERT_TRUE(f);
  Status s = write_sync(*engine_, f, 0, data.data(), data.size());
  EXPECT_ERROR(s, ErrorCode::kIo, "write of 8192 bytes at offset 0 of " + f->path());
  EXPECT_ERROR(s, ErrorCode::kIo, std::strerror(EBADF));
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultTest, ::testing::ValuesIn(testing::all_engine_params()),
                         testing::engine_param_name);

}  // namespace
}  // namespace tierzero::nvme
