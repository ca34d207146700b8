// The record cache (offload/offload.h) against a reference model: a plain vector of each record's
// bytes, changed alongside the cache. Records round-trip through real swap files; alternating
// sweeps move the closed-form (file records - buffers) records each way; a dirty record evicted is
// written first; read errors name the record; prefetches are in flight while the caller runs on;
// a buffer is not reused before its reader is done; records of different sizes in consecutive file
// records take only their own rounded-up bytes of the files and round-trip like any other; records
// in memory spread over the records leave the streamed ones evenly between them; passes run again
// in the same order read the next pass's first records ahead, each record once a pass, and leave
// none of the pass's records kept dirty; the records in memory are packed at their own offsets, and
// with every record in memory nothing is staged (no IoEngine, no file).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "nvme/io_engine.h"
#include "nvme/testing/fault_injection.h"
#include "offload/offload.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using test_support::ScratchDir;
using Access = RecordCache::Access;
using Release = RecordCache::Release;
using Sweep = RecordCache::Sweep;

constexpr SwapRole kTestSwap{"test", "test.nvme_path", "test record", "test state"};

std::byte pattern(int64_t record, uint64_t i, int version) {
  return static_cast<std::byte>((record * 131 + i * 7 + i / 251 + version * 29) & 0xff);
}

// A cache over `buffer_count` buffers and a pinned block of `memory_records`, records of `sizes`
// bytes (in file records of `file_record_bytes` over `paths` paths), with the reference contents
// the test keeps alongside.
struct Fixture {
  Fixture(std::vector<uint64_t> sizes, int64_t memory_records, int buffer_count, bool pipelined = false,
          uint64_t file_record_bytes = 0, int paths = 1, bool spread = false) {
    uint64_t largest = 0;
    for (uint64_t bytes : sizes) largest = std::max(largest, bytes);
    for (int b = 0; b < buffer_count; ++b) {
      memory.push_back(nvme::allocate_aligned(largest));
      buffers.push_back({memory.back().get(), largest});
    }
    block.resize(static_cast<size_t>(memory_records) * largest);
    for (uint64_t bytes : sizes) reference.emplace_back(bytes);
    std::vector<std::string> dirs;
    for (int p = 0; p < paths; ++p) dirs.push_back(paths == 1 ? dir.path() : dir.path() + "/path" + std::to_string(p));
    RecordCacheOptions options{.files = {.paths = dirs, .io = {}, .rank = 0, .role = kTestSwap},
                               .record_bytes = std::move(sizes),
                               .memory_records = memory_records,
                               .read_ahead = pipelined,
                               .write_behind = pipelined,
                               .file_record_bytes = file_record_bytes,
                               .spread_memory = spread};
    cache = value_or_throw(RecordCache::create(buffers, block, std::move(options)));
  }

  // Overwrites record r with version `version` of its pattern (cache and reference), released `how`.
  void overwrite(int64_t r, int version, Release how) {
    std::span<std::byte> bytes = value_or_throw(cache->acquire(r, Access::kOverwrite));
    for (uint64_t i = 0; i < bytes.size(); ++i) bytes[i] = reference[r][i] = pattern(r, i, version);
    throw_if_error(cache->release(r, how));
  }

  // Whether record r, read through the cache, equals the reference; released clean.
  bool matches(int64_t r) {
    std::span<std::byte> bytes = value_or_throw(cache->acquire(r, Access::kRead));
    const bool same =
        bytes.size() == reference[r].size() && std::memcmp(bytes.data(), reference[r].data(), bytes.size()) == 0;
    throw_if_error(cache->release(r, Release::kClean));
    return same;
  }

  ScratchDir dir;
  std::vector<nvme::AlignedBuffer> memory;
  std::vector<std::span<std::byte>> buffers;
  std::vector<std::byte> block;
  std::vector<std::vector<std::byte>> reference;
  std::unique_ptr<RecordCache> cache;
};

TEST(RecordCache, RecordsRoundTripThroughTheFilesAndTheBlock) {
  Fixture f({10000, 10000, 10000, 10000, 10000, 7000}, 2, 2);
  EXPECT_TRUE(f.cache->has_files());
  EXPECT_EQ(f.cache->file_bytes(), 4 * 12288u);  // records 2..5 only, each 4096-aligned
  for (int64_t r = 0; r < 6; ++r) f.overwrite(r, 1, Release::kWrite);
  EXPECT_EQ(f.cache->written_bytes(), 3 * 10000u + 7000u);  // the block's records are never written
  for (int64_t r = 5; r >= 0; --r) EXPECT_TRUE(f.matches(r)) << r;
  // A range lands at its place, read from the aligned start, and is not a whole record's traffic.
  const uint64_t read = f.cache->read_bytes();
  for (int64_t r : {4, 5, 1}) {
    std::span<const std::byte> range = value_or_throw(f.cache->acquire_range(r, 5000, 6900));
    ASSERT_EQ(range.size(), 1900u);
    for (uint64_t i = 0; i < range.size(); ++i) ASSERT_EQ(range[i], f.reference[r][5000 + i]) << r << " byte " << i;
    ASSERT_OK(f.cache->release(r, Release::kClean));
  }
  EXPECT_EQ(f.cache->read_bytes(), read);
  EXPECT_TRUE(f.matches(4));  // its buffer held a range only: read again whole
  EXPECT_EQ(f.cache->read_bytes(), read + 10000);
}

// Passes of kAlternate releasing their last `buffers` records dirty and the others written: after
// the first, each moves (file records - buffers) records each way, and the contents stay the
// reference's through every pass.
TEST(RecordCache, AlternatingSweepsMoveOnlyTheRecordsTheBuffersDoNotHold) {
  for (bool pipelined : {false, true}) {
    for (int buffers : {1, 2, 3, 6, 8}) {
      const int64_t records = 7, in_memory = 1, on_files = records - in_memory;
      const uint64_t bytes = 8192;
      Fixture f(std::vector<uint64_t>(records, bytes), in_memory, buffers, pipelined);
      const int64_t kept = std::min<int64_t>(buffers, on_files);
      for (int pass = 0; pass < 5; ++pass) {
        const uint64_t read = f.cache->read_bytes(), written = f.cache->written_bytes();
        const std::vector<int64_t> order = f.cache->pass(pass == 0 ? Sweep::kFrontToBack : Sweep::kAlternate);
        ASSERT_EQ(order.size(), static_cast<size_t>(on_files));
        if (pass > 0 && kept < on_files) {  // holding every record, passes run front to back
          EXPECT_EQ(order.front() == records - 1, pass % 2 == 1) << "passes alternate";
        }
        for (size_t p = 0; p < order.size(); ++p) {
          const int64_t r = order[p];
          if (pass == 0) {  // the first contents: nothing to read
            f.overwrite(r, 0, p + kept >= order.size() ? Release::kDirty : Release::kWrite);
            continue;
          }
          ASSERT_OK(f.cache->prefetch_ahead(order, p));
          std::span<std::byte> got = value_or_throw(f.cache->acquire(r, Access::kRead));
          ASSERT_EQ(std::memcmp(got.data(), f.reference[r].data(), bytes), 0) << "record " << r << " pass " << pass;
          for (uint64_t i = 0; i < bytes; ++i) got[i] = f.reference[r][i] = pattern(r, i, pass);
          ASSERT_OK(f.cache->release(r, p + kept >= order.size() ? Release::kDirty : Release::kWrite));
        }
        ASSERT_OK(f.cache->wait_writes());
        const uint64_t moved = static_cast<uint64_t>(on_files - kept) * bytes;
        EXPECT_EQ(f.cache->written_bytes() - written, moved) << buffers << " buffers, pass " << pass;
        EXPECT_EQ(f.cache->read_bytes() - read, pass == 0 ? 0 : moved) << buffers << " buffers, pass " << pass;
      }
      ASSERT_OK(f.cache->flush());
      EXPECT_EQ(f.cache->written_bytes() % bytes, 0u);
      f.cache->discard();  // the files alone now: every record read back from them
      for (int64_t r = 0; r < records; ++r) EXPECT_TRUE(f.matches(r)) << r << " with " << buffers << " buffers";
    }
  }
}

TEST(RecordCache, EvictingADirtyRecordWritesItFirst) {
  Fixture f({4096, 4096, 4096}, 0, 1);
  f.overwrite(0, 1, Release::kDirty);
  EXPECT_EQ(f.cache->written_bytes(), 0u);
  f.overwrite(1, 1, Release::kDirty);  // takes record 0's buffer
  EXPECT_EQ(f.cache->written_bytes(), 4096u);
  ASSERT_OK(f.cache->prefetch(0));  // takes record 1's
  EXPECT_EQ(f.cache->written_bytes(), 2 * 4096u);
  EXPECT_TRUE(f.matches(0));
  EXPECT_TRUE(f.matches(1));
  EXPECT_EQ(f.cache->read_bytes(), 2 * 4096u);
  // A buffer still acquired is never taken.
  ASSERT_OK(f.cache->acquire(2, Access::kOverwrite));
  EXPECT_ERROR(f.cache->prefetch(0), ErrorCode::kInternal, "record 2's buffer is taken for record 0");
}

TEST(RecordCache, ReadErrorNamesTheRecordAndTheBufferHoldsNothing) {
  Fixture f({4096, 4096, 4096}, 1, 2);
  f.overwrite(1, 1, Release::kWrite);
  f.overwrite(2, 1, Release::kWrite);
  f.cache->discard();
  std::atomic<bool> broken = true;
  {
    nvme::testing::ScopedFaultInjector faults([&broken](const nvme::testing::PieceCompletion& piece, int64_t result) {
      return broken && piece.op == nvme::Op::kRead ? -EIO : result;
    });
    Result<std::span<std::byte>> got = f.cache->acquire(2, Access::kRead);
    EXPECT_ERROR(got, ErrorCode::kIo, "reading test record 2");
    EXPECT_ERROR(got, ErrorCode::kIo, "offset 4096 of " + f.dir.path() + "/tierzero-test-r0.swap");
    broken = false;
    EXPECT_TRUE(f.matches(2));  // read again, not taken from the failed buffer
  }
}

// Records of widely different sizes in consecutive file records (a LoRA base's units): the files
// hold each rounded up to whole file records, striped over two paths; every record, and ranges
// across file-record boundaries, round-trip in the order the units are asked for, through two
// buffers, as the reference holds them.
TEST(RecordCache, RecordsSpanConsecutiveFileRecords) {
  for (bool pipelined : {false, true}) {
    const std::vector<uint64_t> sizes = {20000, 4096, 9000, 12288, 30000};
    Fixture f(sizes, 0, 2, pipelined, /*file_record_bytes=*/8192, /*paths=*/2);
    EXPECT_EQ(f.cache->file_bytes(), (3 + 1 + 2 + 2 + 4) * 8192u) << "not every record of the largest's size";
    for (int64_t r = 0; r < 5; ++r) f.overwrite(r, 1, Release::kWrite);
    ASSERT_OK(f.cache->wait_writes());
    EXPECT_EQ(f.cache->written_bytes(), 20000u + 4096 + 9000 + 12288 + 30000);
    f.cache->discard();  // the files alone now
    for (int64_t r : {0, 1, 2, 3, 4, 3, 2, 1, 0, 4, 2}) {
      ASSERT_OK(f.cache->prefetch(r == 4 ? 0 : r + 1));  // the next one read ahead into the other buffer
      EXPECT_TRUE(f.matches(r)) << "record " << r;
    }
    using Range = std::tuple<int64_t, uint64_t, uint64_t>;
    for (auto [r, begin, end] : {Range{0, 8000, 17000}, Range{4, 100, 29999}, Range{2, 8192, 9000}}) {
      std::span<const std::byte> range = value_or_throw(f.cache->acquire_range(r, begin, end));
      ASSERT_EQ(range.size(), end - begin);
      EXPECT_EQ(std::memcmp(range.data(), f.reference[r].data() + begin, range.size()), 0) << r << " from " << begin;
      ASSERT_OK(f.cache->release(r, Release::kClean));
    }
  }
  RecordCacheOptions misaligned;
  misaligned.record_bytes = {4096};
  misaligned.file_record_bytes = 1000;
  EXPECT_ERROR(RecordCache::create({}, {}, misaligned), ErrorCode::kInternal,
               "file records of 1000 bytes are not 4096-aligned");
}

// 4 of 10 records in memory, spread: records 0, 2, 5 and 7 (worked by hand from the rule: record r
// is streamed where floor(r x 6 / 10) steps up), in the block in that order; the streamed six take
// the files' six records and the buffers in turn, round-trip, and a read error names the record.
TEST(RecordCache, SpreadRecordsInMemoryLeaveTheStreamedOnesBetweenThem) {
  std::vector<uint64_t> sizes(10, 8192);
  sizes.back() = 5000;
  Fixture f(sizes, 4, 2, /*pipelined=*/true, 0, 1, /*spread=*/true);
  const std::vector<int64_t> in_memory = {0, 2, 5, 7}, streamed = {1, 3, 4, 6, 8, 9};
  for (int64_t r = 0; r < 10; ++r)
    EXPECT_EQ(f.cache->in_memory(r), std::find(in_memory.begin(), in_memory.end(), r) != in_memory.end()) << r;
  EXPECT_EQ(f.cache->pass(Sweep::kFrontToBack), streamed);
  EXPECT_EQ(f.cache->pass(Sweep::kBackToFront), std::vector<int64_t>(streamed.rbegin(), streamed.rend()));
  EXPECT_EQ(f.cache->file_bytes(), 6 * 8192u);
  for (int64_t r = 9; r >= 0; --r) f.overwrite(r, 1, Release::kWrite);  // the optimizer's order inside the backward
  ASSERT_OK(f.cache->wait_writes());
  EXPECT_EQ(f.cache->written_bytes(), 5 * 8192u + 5000);
  for (size_t slot = 0; slot < in_memory.size(); ++slot)  // the block holds them back to back
    EXPECT_EQ(std::memcmp(f.block.data() + slot * 8192, f.reference[in_memory[slot]].data(), 8192), 0) << slot;
  f.cache->discard();
  const std::vector<int64_t> pass = f.cache->pass(Sweep::kBackToFront);
  for (size_t p = 0; p < pass.size(); ++p) {
    ASSERT_OK(f.cache->prefetch_ahead(pass, p));
    EXPECT_TRUE(f.matches(pass[p])) << pass[p];
  }
  EXPECT_EQ(f.cache->read_bytes(), 5 * 8192u + 5000);
  for (int64_t r : in_memory) EXPECT_TRUE(f.matches(r)) << r;
  EXPECT_EQ(f.cache->read_bytes(), 5 * 8192u + 5000) << "records in memory are never read";
  f.cache->discard();
  nvme::testing::ScopedFaultInjector faults([](const nvme::testing::PieceCompletion& piece, int64_t result) {
    return piece.op == nvme::Op::kRead ? -EIO : result;
  });
  Result<std::span<std::byte>> got = f.cache->acquire(8, Access::kRead);
  EXPECT_ERROR(got, ErrorCode::kIo, "reading test record 8");  // the files' fifth record
  EXPECT_ERROR(got, ErrorCode::kIo, "offset 32768 of " + f.dir.path() + "/tierzero-test-r0.swap");
}

// The block packs the records in memory at their own offsets: every record in memory, the last one
// short (a partition's last sub-group), takes 2 x 10000 + 3000 bytes, not 3 x 10000; records of
// different sizes sit at the sum of those before them; a block one byte short is refused, naming
// both sizes; none of it touches a file.
TEST(RecordCache, RecordsInMemoryArePackedAtTheirOwnOffsets) {
  using Case = std::tuple<std::vector<uint64_t>, int64_t, std::vector<uint64_t>>;  // sizes, kept, offsets
  for (const auto& [sizes, kept, offsets] :
       {Case{{10000, 10000, 3000}, 3, {0, 10000, 20000}}, Case{{5000, 3000, 8000, 4096}, 3, {0, 5000, 8000}},
        Case{{4096, 4096, 100}, 2, {0, 4096}}}) {
    uint64_t total = 0;
    for (int64_t r = 0; r < kept; ++r) total += sizes[static_cast<size_t>(r)];
    ScratchDir dir;
    const RecordCacheOptions options{.files = {.paths = {dir.path()}, .io = {}, .rank = 0, .role = kTestSwap},
                                     .record_bytes = sizes,
                                     .memory_records = kept};
    std::vector<std::byte> short_block(total - 1);
    EXPECT_ERROR(RecordCache::create({}, short_block, options), ErrorCode::kInternal,
                 "is " + std::to_string(total - 1) + " bytes, not " + std::to_string(total));
    const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<nvme::AlignedBuffer> memory;
    std::vector<std::span<std::byte>> buffers;
    if (static_cast<size_t>(kept) < sizes.size()) {
      memory.push_back(nvme::allocate_aligned(largest));
      buffers.push_back({memory.back().get(), largest});
    }
    std::vector<std::byte> block(total);
    std::unique_ptr<RecordCache> cache = value_or_throw(RecordCache::create(buffers, block, options));
    EXPECT_EQ(cache->has_files(), static_cast<size_t>(kept) < sizes.size());
    for (int64_t r = 0; r < kept; ++r) {
      ASSERT_TRUE(cache->in_memory(r));
      EXPECT_EQ(cache->memory_offset(r), offsets[static_cast<size_t>(r)]) << r;
      std::span<std::byte> bytes = value_or_throw(cache->acquire(r, Access::kOverwrite));
      EXPECT_EQ(bytes.data(), block.data() + offsets[static_cast<size_t>(r)]) << r;
      ASSERT_EQ(bytes.size(), sizes[static_cast<size_t>(r)]);
      for (uint64_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(r, i, 1);
      ASSERT_OK(cache->release(r, Release::kWrite));
    }
    for (int64_t r = 0; r < kept; ++r)  // no record overwrote another
      for (uint64_t i = 0; i < sizes[static_cast<size_t>(r)]; ++i)
        ASSERT_EQ(block[offsets[static_cast<size_t>(r)] + i], pattern(r, i, 1)) << r << " byte " << i;
    EXPECT_EQ(cache->written_bytes(), 0u);
  }
}

// Every record in memory and no buffer: nothing to stage, so no IoEngine is made (an "aio" config it
// would refuse is never looked at) and no file is created; one record streamed needs both.
TEST(RecordCache, EveryRecordInMemoryMakesNoIoEngineAndNoFile) {
  ScratchDir dir;
  RecordCacheOptions options{.files = {.paths = {dir.path()}, .io = {.queue_depth = 0}, .rank = 0, .role = kTestSwap},
                             .record_bytes = {8192, 100},
                             .memory_records = 2};
  std::vector<std::byte> block(8292);
  std::unique_ptr<RecordCache> cache = value_or_throw(RecordCache::create({}, block, options));
  EXPECT_FALSE(cache->has_files());
  EXPECT_EQ(cache->buffer_count(), 0u);
  EXPECT_EQ(cache->file_bytes(), 0u);
  EXPECT_EQ(cache->describe(), "no file");
  ASSERT_OK(cache->flush());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  options.memory_records = 1;
  nvme::AlignedBuffer memory = nvme::allocate_aligned(8192);
  EXPECT_ERROR(RecordCache::create({{memory.get(), 8192}}, block, options), ErrorCode::kInvalidArgument, "queue_depth");
}

// wait_seconds counts the time a caller is blocked on the disk: a read held back 100 ms in the
// engine is waited for by acquire(); a record already read costs no wait.
TEST(RecordCache, WaitSecondsCountTheTimeBlockedOnTheDisk) {
  Fixture f({4096, 4096}, 0, 2, true);
  f.overwrite(0, 1, Release::kWrite);
  f.overwrite(1, 1, Release::kWrite);
  ASSERT_OK(f.cache->wait_writes());
  f.cache->discard();
  const double before = f.cache->wait_seconds();
  {
    nvme::testing::ScopedFaultInjector slow([](const nvme::testing::PieceCompletion& piece, int64_t result) {
      if (piece.op == nvme::Op::kRead) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return result;
    });
    EXPECT_TRUE(f.matches(0));
  }
  const double waited = f.cache->wait_seconds() - before;
  EXPECT_GE(waited, 0.09);
  EXPECT_LT(waited, 5.0);
  EXPECT_TRUE(f.matches(0));  // held: nothing to wait for
  EXPECT_LT(f.cache->wait_seconds() - before - waited, 0.05);
}

// A fence counting its waits.
class CountingFence final : public ReaderFence {
 public:
  void wait_host() override { ++waits; }
  int waits = 0;
};

TEST(RecordCache, ABufferWaitsForItsReaderBeforeReuse) {
  Fixture f({4096, 4096}, 0, 1);
  auto fence = std::make_shared<CountingFence>();
  ASSERT_OK(f.cache->acquire(0, Access::kOverwrite));
  ASSERT_OK(f.cache->release(0, Release::kWrite, fence));
  EXPECT_EQ(fence->waits, 0);
  ASSERT_OK(f.cache->prefetch(1));
  EXPECT_EQ(fence->waits, 1);
  ASSERT_OK(f.cache->prefetch(1));  // held already: nothing waited again
  EXPECT_EQ(fence->waits, 1);
}

// The read a prefetch queues runs while the caller goes on: it is held back in the engine until
// the test lets it go, after prefetch() returned; acquire() then waits for it.
TEST(RecordCache, PrefetchedReadsAreInFlightWhileTheCallerRuns) {
  Fixture f({4096, 4096, 4096, 4096}, 0, 4, true);
  for (int64_t r = 0; r < 4; ++r) f.overwrite(r, 1, Release::kWrite);
  ASSERT_OK(f.cache->wait_writes());
  f.cache->discard();
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  std::atomic<int> completed = 0;
  nvme::testing::ScopedFaultInjector faults([&](const nvme::testing::PieceCompletion& piece, int64_t result) {
    if (piece.op != nvme::Op::kRead) return result;
    std::unique_lock<std::mutex> lock(mutex);
    opened.wait_for(lock, std::chrono::seconds(10), [&] { return open; });
    ++completed;
    return result;
  });
  const std::vector<int64_t> order = f.cache->pass(Sweep::kFrontToBack);
  ASSERT_OK(f.cache->prefetch_ahead(order, 0));  // positions 0..2: read-ahead max(1, 4 - 2) deep
  EXPECT_EQ(f.cache->read_bytes(), 3 * 4096u);
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(completed.load(), 0);  // prefetch returned with the reads held in the engine
    open = true;
  }
  opened.notify_all();
  for (int64_t r = 0; r < 4; ++r) EXPECT_TRUE(f.matches(r)) << r;
  EXPECT_EQ(f.cache->read_bytes(), 4 * 4096u);  // the prefetched three were not read again
  EXPECT_GE(completed.load(), 4);
}

// Passes back to front, run again (the optimizer inside the backward, step after step): each pass
// changes every record; before a pass's last record is acquired, the next pass's first record is
// read (its buffer is not the last record's), each pass reads each record once (the next pass finds
// the one read ahead held), every record is written behind (none kept dirty: changed()), and the
// files hold the reference bytes after the passes.
TEST(RecordCache, PassesRunAgainReadTheNextPassAhead) {
  constexpr uint64_t kBytes = 8192;
  constexpr int64_t kRecords = 6;
  constexpr int kPasses = 3;
  Fixture f(std::vector<uint64_t>(kRecords, kBytes), 0, 2, /*pipelined=*/true);
  for (int64_t r = 0; r < kRecords; ++r) f.overwrite(r, 0, Release::kWrite);
  ASSERT_OK(f.cache->wait_writes());
  f.cache->discard();
  const std::vector<int64_t> pass = f.cache->pass(Sweep::kBackToFront);
  for (int version = 1; version <= kPasses; ++version) {
    const bool again = version < kPasses;
    for (size_t p = 0; p < pass.size(); ++p) {
      ASSERT_OK(f.cache->prefetch_ahead(pass, p, again));
      if (p + 1 == pass.size()) {  // read: this pass's records and, run again, the next pass's first
        EXPECT_EQ(f.cache->read_bytes(), ((version - 1) * kRecords + kRecords + (again ? 1 : 0)) * kBytes) << version;
      }
      const Release how = f.cache->changed(pass, p, again);
      EXPECT_EQ(how, !again && p + 2 >= pass.size() ? Release::kDirty : Release::kWrite) << p;
      std::span<std::byte> bytes = value_or_throw(f.cache->acquire(pass[p], Access::kRead));
      ASSERT_EQ(std::memcmp(bytes.data(), f.reference[pass[p]].data(), kBytes), 0) << version << " " << pass[p];
      for (uint64_t i = 0; i < kBytes; ++i) bytes[i] = f.reference[pass[p]][i] = pattern(pass[p], i, version);
      ASSERT_OK(f.cache->release(pass[p], how));
    }
  }
  EXPECT_EQ(f.cache->read_bytes(), kPasses * kRecords * kBytes) << "each record read once a pass";
  ASSERT_OK(f.cache->flush());
  EXPECT_EQ(f.cache->written_bytes(), (kPasses + 1) * kRecords * kBytes);
  f.cache->discard();
  for (int64_t r = 0; r < kRecords; ++r) EXPECT_TRUE(f.matches(r)) << r;
}

// The next pass's first records are read ahead only into buffers the rest of the pass does not
// need and nothing holds acquired: five records over two buffers put the next pass's first (record
// 4) in the buffer of this pass's last (record 0), so nothing is read ahead; a record still
// acquired (a GPU share stepping it) keeps its buffer, with no error.
TEST(RecordCache, ReadAheadIntoTheNextPassLeavesBuffersStillNeeded) {
  constexpr uint64_t kBytes = 4096;
  Fixture odd(std::vector<uint64_t>(5, kBytes), 0, 2, /*pipelined=*/true);
  for (int64_t r = 0; r < 5; ++r) odd.overwrite(r, 1, Release::kWrite);
  ASSERT_OK(odd.cache->wait_writes());
  odd.cache->discard();
  const std::vector<int64_t> pass = odd.cache->pass(Sweep::kBackToFront);
  for (size_t p = 0; p < pass.size(); ++p) {
    ASSERT_OK(odd.cache->prefetch_ahead(pass, p, true));
    EXPECT_TRUE(odd.matches(pass[p])) << pass[p];
  }
  EXPECT_EQ(odd.cache->read_bytes(), 5 * kBytes) << "record 4 shares record 0's buffer: not read ahead";

  Fixture even(std::vector<uint64_t>(4, kBytes), 0, 2, /*pipelined=*/true);
  for (int64_t r = 0; r < 4; ++r) even.overwrite(r, 1, Release::kWrite);
  ASSERT_OK(even.cache->wait_writes());
  even.cache->discard();
  const std::vector<int64_t> order = even.cache->pass(Sweep::kBackToFront);  // 3 2 1 0
  for (size_t p = 0; p + 2 < order.size(); ++p) {
    ASSERT_OK(even.cache->prefetch_ahead(order, p, true));
    EXPECT_TRUE(even.matches(order[p])) << order[p];
  }
  ASSERT_OK(even.cache->prefetch_ahead(order, 2, true));
  ASSERT_OK(even.cache->acquire(1, Access::kRead));       // held while record 0 is stepped
  ASSERT_OK(even.cache->prefetch_ahead(order, 3, true));  // record 3 would take record 1's buffer
  EXPECT_EQ(even.cache->read_bytes(), 4 * kBytes);
  ASSERT_OK(even.cache->release(1, Release::kClean));
  EXPECT_TRUE(even.matches(0));
  ASSERT_OK(even.cache->prefetch_ahead(order, 4, true));  // after the pass: the next pass's first two
  EXPECT_EQ(even.cache->read_bytes(), 6 * kBytes);
  EXPECT_TRUE(even.matches(3));
  EXPECT_TRUE(even.matches(2));
  EXPECT_EQ(even.cache->read_bytes(), 6 * kBytes) << "read ahead: held";
}

}  // namespace
}  // namespace tierzero::offload
