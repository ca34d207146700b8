// The record ring (offload/offload.h) against a reference model: each record's bytes in a plain
// vector, and the FIFO placement (piece n of the run in buffer n mod buffers, the tag that holds each
// buffer) kept alongside. Records written through the windows read back piece by piece from real
// swap files; the bytes read are the pieces' 4096-aligned ranges, clipped at the record's end; a
// buffer still held is never taken and one is not reused before its reader is done; write and
// read errors name the record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "nvme/io_engine.h"
#include "nvme/testing/fault_injection.h"
#include "offload/offload.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using test_support::ScratchDir;

constexpr SwapRole kTestSwap{"test", "test.nvme_path", "test record", "test state"};

// A fence counting its waits.
class CountingFence final : public ReaderFence {
 public:
  void wait_host() override { ++waits; }
  int waits = 0;
};

// A ring of `reads` buffers for pieces of up to `piece_bytes`, two windows, and `records` records of
// `record_bytes` (the last `last_bytes`), with the reference contents.
struct Fixture {
  Fixture(int reads, uint64_t piece_bytes, int64_t records, uint64_t record_bytes, uint64_t last_bytes) {
    for (int b = 0; b < reads + 2; ++b) {
      const uint64_t bytes = b < reads ? RecordRing::read_buffer_bytes(piece_bytes) : record_bytes;
      memory.push_back(nvme::allocate_aligned(bytes));
      (b < reads ? read_spans : window_spans).push_back({memory.back().get(), bytes});
    }
    for (int64_t r = 0; r < records; ++r) reference.emplace_back(r + 1 < records ? record_bytes : last_bytes);
    ring = value_or_throw(RecordRing::create(read_spans, window_spans,
                                             {.paths = {dir.path()},
                                              .io = {},
                                              .rank = 0,
                                              .records = records,
                                              .record_bytes = record_bytes,
                                              .role = kTestSwap},
                                             last_bytes));
  }

  // Writes bytes [begin, end) of record r (version `version`) through the next window.
  std::shared_ptr<ReaderFence> write(int64_t r, uint64_t begin, uint64_t end, int version) {
    const size_t w = value_or_throw(ring->lend(r, begin, end));
    for (uint64_t i = begin; i < end; ++i)
      window_spans[w][i - begin] = reference[r][i] = static_cast<std::byte>((r * 131 + i * 7 + version * 29) & 0xff);
    return value_or_throw(ring->write(r, begin, end));
  }

  ScratchDir dir;
  std::vector<nvme::AlignedBuffer> memory;
  std::vector<std::span<std::byte>> read_spans, window_spans;
  std::vector<std::vector<std::byte>> reference;
  std::unique_ptr<RecordRing> ring;
};

// Random pieces read under random tags, landed oldest first when the next buffers are held (as the
// NVMe parameters do): every piece's bytes are the reference's, placement is FIFO, holders_of_next
// names exactly the model's holders, and the traffic is the aligned ranges' bytes.
TEST(RecordRing, PiecesReadInTurnEqualTheReferenceAndMoveTheirAlignedBytes) {
  for (int reads : {1, 2, 5}) {
    const uint64_t record_bytes = 3 * 4096 + 1000, last_bytes = 5000, piece_bytes = 6000;
    Fixture f(reads, piece_bytes, 4, record_bytes, last_bytes);
    uint64_t expected_written = 0;
    for (int64_t r = 0; r < 4; ++r)
      for (uint64_t begin = 0; begin < f.reference[r].size(); begin += 8192) {
        const uint64_t end = std::min<uint64_t>(begin + 8192, f.reference[r].size());
        f.write(r, begin, end, 1);
        expected_written += end - begin;
      }
    ASSERT_OK(f.ring->wait_writes());
    EXPECT_EQ(f.ring->take_traffic(), std::make_pair(uint64_t{0}, expected_written));

    std::mt19937 rng(7 + reads);
    std::vector<uint64_t> holder(static_cast<size_t>(reads), 0);  // the model
    size_t next = 0;
    struct Held {
      uint64_t tag;
      int64_t record;
      uint64_t begin, end;
      RingPiece piece;
    };
    std::deque<Held> unlanded;
    uint64_t expected_read = 0;
    for (uint64_t tag = 1; tag <= 60; ++tag) {
      const auto r = static_cast<int64_t>(rng() % 4);
      const uint64_t size = f.reference[r].size();
      const uint64_t begin = rng() % size;
      const uint64_t end = std::min<uint64_t>(size, begin + 1 + rng() % piece_bytes);
      std::vector<uint64_t> expected_holders;
      if (holder[next] != 0) expected_holders.push_back(holder[next]);
      ASSERT_EQ(f.ring->holders_of_next(1), expected_holders) << "tag " << tag;
      if (holder[next] != 0) {
        EXPECT_ERROR(f.ring->read(r, begin, end, tag), ErrorCode::kInternal, "still holds an unlanded read");
      }
      while (!unlanded.empty() && unlanded.front().tag <= (expected_holders.empty() ? 0 : expected_holders.back())) {
        const Held& held = unlanded.front();
        ASSERT_OK(f.ring->wait_read(held.piece.buffer));
        EXPECT_TRUE(f.ring->arrived(held.piece.buffer));
        EXPECT_EQ(std::memcmp(f.ring->bytes(held.piece.buffer) + held.piece.skip,
                              f.reference[held.record].data() + held.begin, held.end - held.begin),
                  0)
            << "tag " << held.tag;
        f.ring->release(held.piece.buffer, nullptr);
        holder[held.piece.buffer] = 0;
        unlanded.pop_front();
      }
      const RingPiece piece = value_or_throw(f.ring->read(r, begin, end, tag));
      EXPECT_EQ(piece.buffer, next);
      EXPECT_EQ(piece.skip, begin % 4096);
      const uint64_t aligned_end = std::min<uint64_t>((end + 4095) / 4096 * 4096, size);
      expected_read += aligned_end - begin / 4096 * 4096;
      holder[next] = tag;
      next = (next + 1) % holder.size();
      unlanded.push_back({tag, r, begin, end, piece});
    }
    EXPECT_EQ(f.ring->take_traffic(), std::make_pair(expected_read, uint64_t{0})) << reads << " buffers";
  }
}

TEST(RecordRing, ABufferWaitsForItsReaderBeforeReuse) {
  Fixture f(2, 4096, 1, 8192, 8192);
  f.write(0, 0, 8192, 1)->wait_host();
  auto fence = std::make_shared<CountingFence>();
  const RingPiece first = value_or_throw(f.ring->read(0, 0, 4096, 1));
  ASSERT_OK(f.ring->wait_read(first.buffer));
  f.ring->release(first.buffer, fence);
  ASSERT_OK(f.ring->read(0, 4096, 8192, 2));  // the other buffer
  EXPECT_EQ(fence->waits, 0);
  EXPECT_EQ(f.ring->holders_of_next(2), std::vector<uint64_t>{2});
  ASSERT_OK(f.ring->read(0, 0, 100, 3));  // the first one again
  EXPECT_EQ(fence->waits, 1);
}

TEST(RecordRing, WindowsTakeTurnsAndCheckTheirRanges) {
  Fixture f(1, 4096, 2, 8192, 8192);
  EXPECT_ERROR(f.ring->lend(0, 100, 4196), ErrorCode::kInternal, "not 4096-aligned");
  EXPECT_EQ(value_or_throw(f.ring->lend(0, 0, 4096)), 0u);
  EXPECT_ERROR(f.ring->write(0, 0, 8192), ErrorCode::kInternal, "not lent");
  ASSERT_OK(f.ring->write(0, 0, 4096));
  EXPECT_EQ(value_or_throw(f.ring->lend(1, 4096, 8192)), 1u);
  ASSERT_OK(f.ring->write(1, 4096, 8192));
  EXPECT_EQ(value_or_throw(f.ring->lend(1, 0, 4096)), 0u);
}

TEST(RecordRing, WriteAndReadErrorsNameTheRecord) {
  Fixture f(1, 4096, 2, 4096, 4096);
  {
    nvme::testing::ScopedFaultInjector faults([](const nvme::testing::PieceCompletion& piece, int64_t result) {
      return piece.op == nvme::Op::kWrite ? -EIO : result;
    });
    std::shared_ptr<ReaderFence> write = f.write(1, 0, 4096, 1);
    EXPECT_ERROR(f.ring->wait_writes(), ErrorCode::kIo, "test record 1");
    try {
      write->wait_host();  // the same error, kept
      ADD_FAILURE() << "no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.status().code(), ErrorCode::kIo);
    }
  }
  nvme::testing::ScopedFaultInjector faults([](const nvme::testing::PieceCompletion& piece, int64_t result) {
    return piece.op == nvme::Op::kRead ? -EIO : result;
  });
  const RingPiece piece = value_or_throw(f.ring->read(1, 0, 4096, 1));
  EXPECT_ERROR(f.ring->wait_read(piece.buffer), ErrorCode::kIo, "reading test record 1");
}

}  // namespace
}  // namespace tierzero::offload
