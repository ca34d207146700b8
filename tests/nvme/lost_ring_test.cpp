// A lane whose kernel queue becomes unusable while I/O is in flight reports an error naming the
// call that failed, instead of aborting the process (issue 15: no aborts in library code).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "nvme/io_engine.h"
#include "test_env.h"
#include "tests/support/status_matchers.h"

namespace tierzero::nvme {
namespace {

// The descriptor of this process's io_uring ring, or -1 (exactly one engine lane is open).
int find_ring_fd() {
  int found = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target == "anon_inode:[io_uring]") found = std::stoi(entry.path().filename().string());
  }
  return found;
}

TEST(LostRing, AFailedWaitIsAnErrorNamingTheCall) {
  testing::TestDir dir;
  const std::string fifo = dir.file("never_written");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int writer = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // a writer that never writes
  ASSERT_GE(writer, 0);
  IoConfig config;
  config.backend = Backend::kIoUring;
  config.use_direct = false;
  config.register_buffers = false;
  auto engine = IoEngine::create(config);
  if (!engine.ok()) GTEST_SKIP() << "no io_uring here: " << engine.status().to_string();
  auto file = (*engine)->open(fifo, OpenOptions{OpenMode::kRead, 0, /*direct=*/false});
  ASSERT_OK(file);
  std::vector<char> buffer(4096), second(4096);
  IoTicket stuck = (*engine)->submit({*file, Op::kRead, 0, buffer.data(), buffer.size()});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the lane now waits on the ring
  const int ring = find_ring_fd();
  ASSERT_GE(ring, 0);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  ASSERT_EQ(::dup2(null_fd, ring), ring);  // entering the "ring" now fails
  ::close(null_fd);
  IoTicket refused = (*engine)->submit({*file, Op::kRead, 0, second.data(), second.size()});  // wakes the lane

  const Status stuck_status = stuck.wait();
  EXPECT_ERROR(stuck_status, ErrorCode::kIo, "io_uring_wait_cqe");
  EXPECT_ERROR(stuck_status, ErrorCode::kIo, "recreate the engine");
  EXPECT_ERROR(refused.wait(), ErrorCode::kIo, "");
  ::close(writer);
}

}  // namespace
}  // namespace tierzero::nvme
