// RangeReader: byte ranges of a file at any offset and length, the same bytes whether the file is
// read with O_DIRECT in whole blocks (a real disk: the build tree) or with pread (/dev/shm, a tmpfs,
// refuses O_DIRECT), and a file that ends too soon is kCorrupt naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nvme/io_engine.h"
#include "offload/offload.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using test_support::ScratchDir;

constexpr uint64_t kFileBytes = 3 * 4096 + 123;  // the last block partly past the end

std::byte pattern(uint64_t i) { return static_cast<std::byte>((i * 7 + i / 253) & 0xff); }

std::string write_file(const ScratchDir& dir) {
  const std::string path = dir.file("weights.bin");
  std::ofstream out(path, std::ios::binary);
  for (uint64_t i = 0; i < kFileBytes; ++i) out.put(static_cast<char>(pattern(i)));
  return path;
}

class RangeReaderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RangeReaderTest, RangesAreTheFileBytes) {
  const std::string root = GetParam().empty() ? test_support::working_dir_root() : GetParam();
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << root << " does not exist here";
  const ScratchDir dir("range-reader", root);
  const std::string path = write_file(dir);
  Result<std::unique_ptr<RangeReader>> opened = RangeReader::open(path);
  ASSERT_OK(opened);
  const RangeReader& reader = **opened;
  EXPECT_EQ(reader.path(), path);
  ASSERT_OK(reader.size());
  EXPECT_EQ(*reader.size(), kFileBytes);
  constexpr uint64_t kMost = 2 * 4096;
  const nvme::AlignedBuffer buffer = nvme::allocate_aligned(RangeReader::buffer_bytes(kMost));
  const std::pair<uint64_t, uint64_t> ranges[] = {{0, 1},       {1, 4095},    {4095, 2},   {4096, 4096},
                                                  {5000, 7000}, {8190, 4000}, {12200, 11}, {kFileBytes - 7, 7}};
  for (const auto& [offset, bytes] : ranges) {
    Result<std::byte*> got = reader.read(offset, bytes, buffer.get());
    ASSERT_OK(got);
    for (uint64_t i = 0; i < bytes; ++i) ASSERT_EQ((*got)[i], pattern(offset + i)) << offset << " + " << i;
    std::vector<std::byte> exact(bytes);
    ASSERT_OK(reader.read_exact(exact.data(), bytes, offset));
    for (uint64_t i = 0; i < bytes; ++i) ASSERT_EQ(exact[i], pattern(offset + i)) << offset << " + " << i;
  }
  const Result<std::byte*> past_end = reader.read(kFileBytes - 10, 20, buffer.get());
  EXPECT_ERROR(past_end, ErrorCode::kCorrupt, path + ": ends before offset ");
  EXPECT_ERROR(past_end, ErrorCode::kCorrupt, "(10 bytes short)");
  std::vector<std::byte> past(20);
  EXPECT_ERROR(reader.read_exact(past.data(), 20, kFileBytes - 10), ErrorCode::kCorrupt,
               path + ": ends before offset " + std::to_string(kFileBytes) + " (10 bytes short)");
}

INSTANTIATE_TEST_SUITE_P(BuildTreeAndTmpfs, RangeReaderTest, ::testing::Values(std::string(), "/dev/shm"));

TEST(RangeReader, MissingFileIsNamed) {
  const ScratchDir dir;
  EXPECT_ERROR(RangeReader::open(dir.file("absent.bin")), ErrorCode::kNotFound,
               dir.file("absent.bin") + ": cannot open");
}

}  // namespace
}  // namespace tierzero::offload
