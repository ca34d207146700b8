// The engine's API outside the data path: config, opening files, invalid requests, lifetime.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "nvme/io_engine.h"
#include "test_env.h"
#include "tests/support/status_matchers.h"

namespace tierzero::nvme {
namespace {

using testing::random_bytes;
using testing::TestDir;

std::unique_ptr<IoEngine> sync_engine() {
  IoConfig config;
  config.backend = Backend::kSync;
  return IoEngine::create(config).value();
}

TEST(IoConfigTest, BackendNamesRoundTrip) {
  for (Backend b : {Backend::kAuto, Backend::kIoUring, Backend::kLibaio, Backend::kSync}) {
    EXPECT_EQ(parse_backend(backend_name(b)).value(), b);
  }
  Result<Backend> bad = parse_backend("posix");
  EXPECT_ERROR(bad, ErrorCode::kInvalidArgument, "\"posix\"");
  EXPECT_ERROR(bad, ErrorCode::kInvalidArgument, "auto, io_uring, libaio, sync");
}

TEST(IoConfigTest, ValidateNamesTheKey) {
  EXPECT_OK(validate(IoConfig{}));
  IoConfig c;
  c.block_size = 1000;
  EXPECT_ERROR(validate(c), ErrorCode::kInvalidArgument, "aio.block_size = 1000");
  c = {};
  c.queue_depth = 0;
  EXPECT_ERROR(validate(c), ErrorCode::kInvalidArgument, "aio.queue_depth = 0");
  c = {};
  c.intra_op_parallelism = 0;
  EXPECT_ERROR(validate(c), ErrorCode::kInvalidArgument, "aio.intra_op_parallelism = 0");
  EXPECT_EQ(IoEngine::create(c).status().code(), ErrorCode::kInvalidArgument);
}

TEST(IoEngineTest, AutoPicksAWorkingBackend) {
  auto engine = IoEngine::create(IoConfig{}).value();
  EXPECT_NE(engine->backend(), Backend::kAuto);
}

TEST(IoEngineTest, NonexistentPathIsNotFound) {
  TestDir dir;
  auto engine = sync_engine();
  Result<FileRef> f = engine->open(dir.file("missing"), OpenOptions{OpenMode::kRead});
  EXPECT_ERROR(f, ErrorCode::kNotFound, "cannot open " + dir.file("missing"));
  EXPECT_ERROR(f, ErrorCode::kNotFound, std::strerror(ENOENT));
  EXPECT_ERROR(f, ErrorCode::kNotFound, "check the path");
}

// Paths that fail even for root: a file where a directory is expected, and sysfs.
TEST(IoEngineTest, UnwritablePlacesNameThePathAndTheFix) {
  TestDir dir;
  ASSERT_TRUE(testing::write_plain_file(dir.file("plain"), {1, 2, 3}));
  auto engine = sync_engine();
  Result<FileRef> f = engine->open(dir.file("plain") + "/x", OpenOptions{OpenMode::kWrite});
  EXPECT_ERROR(f, ErrorCode::kIo, "cannot create " + dir.file("plain") + "/x");
  EXPECT_ERROR(f, ErrorCode::kIo, std::strerror(ENOTDIR));
  EXPECT_ERROR(f, ErrorCode::kIo, "choose a writable path");

  f = engine->open("/sys/tierzero-nvme-test", OpenOptions{OpenMode::kWrite});
  EXPECT_ERROR(f, ErrorCode::kIo, "cannot create /sys/tierzero-nvme-test");
  EXPECT_ERROR(f, ErrorCode::kIo, "choose a writable path");
}

// An immutable directory (chattr +i) refuses new files even to root, like a read-only one.
TEST(IoEngineTest, ImmutableDirectoryRefusesCreate) {
  TestDir dir;
  const std::string sub = dir.file("locked");
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  int dfd = ::open(sub.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dfd, 0);
  int flags = 0;
  if (ioctl(dfd, FS_IOC_GETFLAGS, &flags) != 0 ||
      (flags |= FS_IMMUTABLE_FL, ioctl(dfd, FS_IOC_SETFLAGS, &flags)) != 0) {
    ::close(dfd);
    GTEST_SKIP() << "cannot set the immutable flag here: " << std::strerror(errno);
  }
  auto engine = sync_engine();
  Result<FileRef> f = engine->open(sub + "/x", OpenOptions{OpenMode::kWrite});
  flags &= ~FS_IMMUTABLE_FL;
  ioctl(dfd, FS_IOC_SETFLAGS, &flags);
  ::close(dfd);
  EXPECT_ERROR(f, ErrorCode::kIo, "cannot create " + sub + "/x");
  EXPECT_ERROR(f, ErrorCode::kIo, "choose a writable path");
}

TEST(IoEngineTest, InvalidRequestsCompleteWithInvalidArgument) {
  TestDir dir;
  auto engine = sync_engine();
  FileRef f = engine->open(dir.file("f"), OpenOptions{OpenMode::kReadWrite}).value();
  EXPECT_EQ(engine->submit(IoRequest{nullptr, Op::kRead, 0, nullptr, 10}).wait().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(engine->submit(IoRequest{f, Op::kRead, 0, nullptr, 0}).wait().code(), ErrorCode::kInvalidArgument);
  uint8_t byte = 0;
  IoTicket empty = engine->submit(IoRequest{f, Op::kRead, 5, &byte, 0});
  EXPECT_OK(empty.wait());
  EXPECT_TRUE(empty.ready());
  EXPECT_EQ(IoTicket().wait().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(IoTicket().ready());
}

TEST(IoEngineTest, OnCompleteRunsOnceWithTheStatus) {
  TestDir dir;
  auto engine = IoEngine::create(IoConfig{}).value();
  FileRef f = engine->open(dir.file("cb"), OpenOptions{OpenMode::kReadWrite}).value();
  auto data = random_bytes(300000, 22);
  std::atomic<int> calls{0};
  std::atomic<bool> all_ok{true};
  auto count = [&](const Status& s) {
    ++calls;
    if (!s.ok()) all_ok = false;
  };
  IoTicket w = engine->submit(IoRequest{f, Op::kWrite, 0, data.data(), data.size(), false, count});
  ASSERT_OK(w.wait());
  std::vector<uint8_t> back(data.size());
  IoTicket r = engine->submit(IoRequest{f, Op::kRead, 0, back.data(), back.size(), false, count});
  ASSERT_OK(r.wait());
  IoTicket bad = engine->submit(IoRequest{f, Op::kRead, 0, nullptr, 10, false, [&](const Status& s) {
                                            EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
                                            ++calls;
                                          }});
  EXPECT_ERROR(bad.wait(), ErrorCode::kInvalidArgument, "");
  engine.reset();  // drains: every callback has run
  EXPECT_EQ(calls.load(), 3);
  EXPECT_TRUE(all_ok.load());
  EXPECT_EQ(back, data);
}

TEST(IoEngineTest, PreallocationKeepsTheSize) {
  TestDir dir;
  auto engine = sync_engine();
  FileRef f = engine->open(dir.file("pre"), OpenOptions{OpenMode::kWrite, 8 << 20}).value();
  EXPECT_EQ(f->size().value(), 0u);
  struct stat st {};
  ASSERT_EQ(fstat(f->fd(), &st), 0);
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{8} << 20);
  ASSERT_OK(f->truncate(4096));
  EXPECT_EQ(f->size().value(), 4096u);
}

TEST(IoEngineTest, DirectAlignmentComesFromTheFileSystem) {
  TestDir dir;
  auto engine = sync_engine();
  FileRef f = engine->open(dir.file("a"), OpenOptions{OpenMode::kWrite}).value();
  if (!f->direct()) GTEST_SKIP() << dir.path() << " refuses O_DIRECT";
  for (uint32_t a : {f->mem_align(), f->offset_align()}) {
    EXPECT_GE(a, 1u);
    EXPECT_EQ(a & (a - 1), 0u) << a;
  }
  EXPECT_GE(f->offset_align(), 512u);
}

// tmpfs before Linux 6.6 refuses O_DIRECT: the file opens buffered (alignment 1) and I/O still
// round-trips. Newer tmpfs accepts O_DIRECT; then the round trip runs direct.
TEST(IoEngineTest, TmpfsRoundTripsDirectOrBuffered) {
  struct statfs sfs {};
  if (statfs("/dev/shm", &sfs) != 0 || sfs.f_type != 0x01021994 /* TMPFS_MAGIC */) {
    GTEST_SKIP() << "/dev/shm is not tmpfs here";
  }
  auto engine = sync_engine();
  const std::string path = "/dev/shm/tierzero-nvme-test-" + std::to_string(getpid());
  FileRef f = engine->open(path, OpenOptions{OpenMode::kReadWrite}).value();
  if (!f->direct()) {
    EXPECT_EQ(f->offset_align(), 1u);
  }
  auto data = random_bytes(12345, 20);
  ASSERT_OK(write_sync(*engine, f, 7, data.data(), data.size(), true));
  std::vector<uint8_t> back(data.size());
  ASSERT_OK(read_sync(*engine, f, 7, back.data(), back.size()));
  EXPECT_EQ(back, data);
  std::filesystem::remove(path);
}

// Destroying the engine drains what is queued: every ticket still completes, with its data.
TEST(IoEngineTest, DestructionDrainsInFlightRequests) {
  TestDir dir;
  auto data = random_bytes(4 << 20, 21);
  std::vector<IoTicket> tickets;
  {
    auto engine = IoEngine::create(IoConfig{}).value();
    FileRef f = engine->open(dir.file("drain"), OpenOptions{OpenMode::kWrite}).value();
    for (uint64_t off = 0; off < data.size(); off += 1 << 20) {
      tickets.push_back(engine->submit(IoRequest{f, Op::kWrite, off, data.data() + off, 1 << 20}));
    }
  }
  for (IoTicket& t : tickets) EXPECT_OK(t.wait());
  EXPECT_EQ(testing::read_plain_file(dir.file("drain")), data);
}

}  // namespace
}  // namespace tierzero::nvme
