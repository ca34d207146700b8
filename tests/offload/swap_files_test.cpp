// The record staging and its swap files (offload/offload.h): records
// round-trip byte for byte through pinned staging buffers, striped over two paths exactly as the
// header documents (record bytes [p*P, (p+1)*P) in path p's file at offset k*P, P the record split
// evenly and rounded up to 4096), read back in part from an aligned start, and the files go with the
// staging. A swap larger than the disk is refused before anything is written.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "nvme/io_engine.h"
#include "offload/offload.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using test_support::ScratchDir;

constexpr uint64_t kRecordBytes = 10000;  // over two paths: P = 5000 rounded up to 8192
constexpr uint64_t kPart = 8192;
constexpr int64_t kRecords = 3;

std::byte pattern(int64_t record, uint64_t i) {
  return static_cast<std::byte>((record * 131 + i * 7 + i / 251) & 0xff);
}

// `bytes` bytes of `path` from `offset`, read with the standard library.
std::vector<std::byte> file_bytes(const std::string& path, uint64_t offset, uint64_t bytes) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::vector<std::byte> out(bytes);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(bytes));
  EXPECT_EQ(static_cast<uint64_t>(in.gcount()), bytes) << path << " at " << offset;
  return out;
}

TEST(RecordStaging, RecordsRoundTripStripedAsDocumented) {
  ScratchDir a, b;
  std::vector<nvme::AlignedBuffer> memory;
  std::vector<std::span<std::byte>> buffers;
  for (int i = 0; i < 2; ++i) {
    memory.push_back(nvme::allocate_aligned(kRecordBytes));
    buffers.push_back({memory.back().get(), kRecordBytes});
  }
  RecordStagingOptions options;
  options.paths = {a.path(), b.path()};
  options.records = kRecords;
  options.record_bytes = kRecordBytes;
  Result<std::unique_ptr<RecordStaging>> made = RecordStaging::create(buffers, options);
  ASSERT_OK(made);
  std::unique_ptr<RecordStaging> staging = std::move(made).value();
  EXPECT_TRUE(staging->has_files());
  EXPECT_EQ(staging->file_bytes(), 2 * kRecords * kPart);
  const std::string file = "/tierzero-optimizer-r0.swap";
  EXPECT_EQ(staging->files(), (std::vector<std::string>{a.path() + file, b.path() + file}));

  for (int64_t k = 0; k < kRecords; ++k) {  // record k through buffer k % 2
    const size_t buffer = static_cast<size_t>(k % 2);
    ASSERT_OK(staging->wait_write(buffer));
    for (uint64_t i = 0; i < kRecordBytes; ++i) buffers[buffer][i] = pattern(k, i);
    staging->write(buffer, k, 0, kRecordBytes);
  }
  ASSERT_OK(staging->wait_write(0));
  ASSERT_OK(staging->wait_write(1));

  for (int64_t k = 0; k < kRecords; ++k) {
    const std::vector<std::byte> first = file_bytes(a.path() + file, k * kPart, kPart);
    const std::vector<std::byte> second = file_bytes(b.path() + file, k * kPart, kRecordBytes - kPart);
    for (uint64_t i = 0; i < kPart; ++i) ASSERT_EQ(first[i], pattern(k, i)) << "record " << k << " byte " << i;
    for (uint64_t i = kPart; i < kRecordBytes; ++i)
      ASSERT_EQ(second[i - kPart], pattern(k, i)) << "record " << k << " byte " << i;
  }

  for (int64_t k = kRecords - 1; k >= 0; --k) {  // whole records back, into the other buffer
    const size_t buffer = static_cast<size_t>((k + 1) % 2);
    std::memset(buffers[buffer].data(), 0, kRecordBytes);
    staging->read(buffer, k, 0, kRecordBytes);
    ASSERT_OK(staging->wait_read(buffer));
    for (uint64_t i = 0; i < kRecordBytes; ++i) ASSERT_EQ(buffers[buffer][i], pattern(k, i)) << k << " byte " << i;
  }

  std::memset(buffers[0].data(), 0, kRecordBytes);  // a part from an aligned start lands at its place
  staging->read(0, 1, RecordStaging::kRecordAlignment, kRecordBytes);
  ASSERT_OK(staging->wait_read(0));
  for (uint64_t i = 0; i < kRecordBytes; ++i)
    ASSERT_EQ(buffers[0][i], i < RecordStaging::kRecordAlignment ? std::byte{0} : pattern(1, i)) << "byte " << i;

  staging.reset();
  EXPECT_FALSE(std::filesystem::exists(a.path() + file));
  EXPECT_FALSE(std::filesystem::exists(b.path() + file));
}

TEST(RecordStaging, WithoutRecordsThereAreNoFiles) {
  ScratchDir a;
  nvme::AlignedBuffer memory = nvme::allocate_aligned(4096);
  RecordStagingOptions options;
  options.paths = {a.path()};
  options.record_bytes = 4096;  // records = 0
  Result<std::unique_ptr<RecordStaging>> staging = RecordStaging::create({{memory.get(), 4096}}, options);
  ASSERT_OK(staging);
  EXPECT_FALSE((*staging)->has_files());
  EXPECT_EQ((*staging)->file_bytes(), 0u);
  EXPECT_TRUE((*staging)->files().empty());
  EXPECT_OK((*staging)->wait_read(0));
  EXPECT_TRUE(std::filesystem::is_empty(a.path()));
}

// A swap larger than the disk is refused before anything is written, with the bytes needed and free.
TEST(RecordStaging, SwapLargerThanTheDiskIsRefusedUpFront) {
  ScratchDir nvme;
  RecordStagingOptions options;
  options.paths = {nvme.path()};
  options.rank = 3;
  options.records = int64_t{1} << 30;
  options.record_bytes = uint64_t{1} << 30;  // 2^60 bytes
  Result<std::unique_ptr<RecordStaging>> swap = RecordStaging::create({}, options);
  EXPECT_ERROR(swap, ErrorCode::kOutOfSpace,
               "NVMe disk full: rank 3's optimizer state needs 1024.00 PiB (1152921504606846976 bytes) in " +
                   nvme.path() + "/tierzero-optimizer-r3.swap");
  EXPECT_ERROR(swap, ErrorCode::kOutOfSpace, "bytes) free");
  EXPECT_FALSE(std::filesystem::exists(nvme.path() + "/tierzero-optimizer-r3.swap"));
}

TEST(RecordStaging, NoPathIsRefusedNamingTheKey) {
  RecordStagingOptions options;
  options.records = 1;
  options.record_bytes = 4096;
  EXPECT_ERROR(RecordStaging::create({}, options), ErrorCode::kInvalidArgument,
               "zero_optimization.offload_optimizer.nvme_path is empty");
}

}  // namespace
}  // namespace tierzero::offload
