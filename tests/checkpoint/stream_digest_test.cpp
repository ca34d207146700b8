// The save's write path off the fill's thread: a hashed StreamWriter's digests (taken from the
// staging buffers as they drain) are XXH3 of the bytes, computed in one call over the same bytes,
// for the file and for ranges that cross buffers and the digest's 1 MiB chunks, empty ranges too,
// with buffers reused many times over (borrowed 64 KiB ones) and with the default 16 MiB ones; the
// file holds the bytes. copy_in_parallel copies exactly the source, on 1, 2 and 4 threads, at sizes
// around its slice, and touches nothing past it.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cstring>
#include <random>
#include <vector>

#include "checkpoint/storage/internal/xxh3.h"
#include "checkpoint/storage/storage.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::ScratchDir;

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::vector<std::byte> bytes(n);
  std::mt19937_64 rng(seed);
  for (auto& b : bytes) b = static_cast<std::byte>(rng());
  return bytes;
}

uint64_t xxh3(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Writes `bytes` in appends of uneven sizes with ranges at `bounds` (consecutive, the last to the
// end), and checks every digest and the file.
void write_and_check(const StreamWriter::Options& options, const std::vector<std::byte>& bytes,
                     const std::vector<size_t>& bounds) {
  ScratchDir dir;
  const std::string path = dir.file("hashed.bin");
  ASSERT_OK_AND_ASSIGN(auto engine, nvme::IoEngine::create(nvme::IoConfig{}));
  ASSERT_OK_AND_ASSIGN(auto writer,
                       StreamWriter::create(fs::default_file_system(), *engine, path, bytes.size(), options));
  std::vector<size_t> ranges;
  size_t at = 0, step = 1;
  for (size_t r = 0; r < bounds.size(); ++r) {
    const size_t end = r + 1 < bounds.size() ? bounds[r + 1] : bytes.size();
    ranges.push_back(writer->begin_range());
    while (at < end) {  // 1, 7, 49, ... bytes, then the range's rest
      const size_t n = std::min(end - at, step);
      ASSERT_OK(writer->append(std::span(bytes).subspan(at, n)));
      at += n;
      step = step * 7 % 3000017;
    }
    writer->end_range(ranges.back());
  }
  ASSERT_OK(writer->finish());
  EXPECT_EQ(writer->file_digest(), xxh3(bytes));
  for (size_t r = 0; r < bounds.size(); ++r) {
    const size_t end = r + 1 < bounds.size() ? bounds[r + 1] : bytes.size();
    EXPECT_EQ(writer->range_digest(ranges[r]), xxh3(std::span(bytes).subspan(bounds[r], end - bounds[r])))
        << "range " << r << " [" << bounds[r] << ", " << end << ")";
  }
  ASSERT_OK_AND_ASSIGN(std::string written, fs::default_file_system().read_file(path));
  ASSERT_EQ(written.size(), bytes.size());
  EXPECT_EQ(std::memcmp(written.data(), bytes.data(), bytes.size()), 0);
}

TEST(StreamDigest, BorrowedSmallBuffersReusedManyTimes) {
  ASSERT_OK_AND_ASSIGN(auto buffers, WriteBuffers::create(0, 64 << 10));  // 4 of 64 KiB
  const std::vector<std::byte> bytes = random_bytes((3u << 20) + 4093, 1);
  write_and_check({.borrowed = buffers.get(), .hashed = true}, bytes, {0, 10, 10, 65536, 65537, 1500000, 3u << 20});
}

TEST(StreamDigest, OwnBuffersLargerThanTheDigestsChunk) {
  const std::vector<std::byte> bytes = random_bytes((37u << 20) + 5, 2);
  write_and_check({.hashed = true}, bytes, {0, 3, (1u << 20) + 1, (17u << 20) - 1, 17u << 20, 37u << 20});
}

TEST(StreamDigest, OneRangeAndAnEmptyFile) {
  write_and_check({.hashed = true}, random_bytes(12345, 3), {0});
  write_and_check({.hashed = true}, {}, {0});
}

TEST(CopyInParallel, CopiesExactlyTheSourceOnAnyThreadCount) {
  for (const int threads : {1, 2, 4}) {
    tbb::task_arena arena(threads);
    for (const size_t n : {size_t{0}, size_t{1}, kCopySlice - 1, kCopySlice, kCopySlice + 1, 5 * kCopySlice + 7}) {
      const std::vector<std::byte> src = random_bytes(n, n + static_cast<uint64_t>(threads));
      std::vector<std::byte> dst(n + 64, std::byte{0xA5});
      arena.execute([&] { copy_in_parallel(dst, src); });
      EXPECT_EQ(std::memcmp(dst.data(), src.data(), n), 0) << n << " bytes on " << threads << " threads";
      for (size_t i = n; i < dst.size(); ++i)
        ASSERT_EQ(dst[i], std::byte{0xA5}) << "byte " << i << " past the copy of " << n << " was written";
    }
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
