// Round trips of random data through every backend, O_DIRECT and buffered, fixed buffers on/off.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::nvme {
namespace {

using testing::random_bytes;
using testing::read_plain_file;

class RoundTripTest : public testing::EngineTest {};

TEST_P(RoundTripTest, AlignedWholeFileThroughRegisteredBuffer) {
  const uint64_t bytes = 1 << 20;
  auto data = random_bytes(bytes, 1);
  AlignedBuffer buf = allocate_aligned(bytes);
  std::memcpy(buf.get(), data.data(), bytes);
  ASSERT_OK(engine_->register_buffer(buf.get(), bytes));
  FileRef f = open("aligned", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  Status w = write_sync(*engine_, f, 0, buf.get(), bytes, true);
  ASSERT_OK(w);
  std::memset(buf.get(), 0, bytes);
  Status r = read_sync(*engine_, f, 0, buf.get(), bytes);
  ASSERT_OK(r);
  EXPECT_EQ(0, std::memcmp(buf.get(), data.data(), bytes));
  EXPECT_EQ(read_plain_file(f->path()), data);
  EXPECT_OK(engine_->unregister_buffer(buf.get()));
}

// Sizes and offsets that are and are not multiples of the alignment, on unaligned memory; the
// bytes around each range, in the file and in memory, must stay untouched.
TEST_P(RoundTripTest, UnalignedOffsetsLengthsAndBuffers) {
  const uint64_t file_bytes = 300000;
  auto expected = random_bytes(file_bytes, 2);
  FileRef f = open("unaligned", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  ASSERT_OK(write_sync(*engine_, f, 0, expected.data(), file_bytes));
  struct Case {
    uint64_t offset, length, mem_skew;
  };
  for (Case c : {Case{1, 1, 1}, Case{511, 2, 3}, Case{4095, 4098, 0}, Case{4096, 8192, 7}, Case{100, 70000, 0},
                 Case{131072, 65536, 1}, Case{0, 299999, 5}, Case{299000, 1000, 0}, Case{8192, 4096 * 40, 0}}) {
    SCOPED_TRACE("offset " + std::to_string(c.offset) + " length " + std::to_string(c.length));
    auto patch = random_bytes(c.length, c.offset * 31 + c.length);
    AlignedBuffer mem = allocate_aligned(c.length + 8);
    std::memcpy(mem.get() + c.mem_skew, patch.data(), c.length);
    Status w = write_sync(*engine_, f, c.offset, mem.get() + c.mem_skew, c.length);
    ASSERT_OK(w);
    std::memcpy(expected.data() + c.offset, patch.data(), c.length);
    ASSERT_EQ(read_plain_file(f->path()), expected);
    std::vector<uint8_t> back(c.length + 2, 0xEE);
    Status r = read_sync(*engine_, f, c.offset, back.data() + 1, c.length);
    ASSERT_OK(r);
    EXPECT_EQ(0, std::memcmp(back.data() + 1, patch.data(), c.length));
    EXPECT_EQ(back.front(), 0xEE);
    EXPECT_EQ(back.back(), 0xEE);
  }
}

// Thousands of requests of random sizes at random places, all in flight at once, each with its
// own ticket; then read back the same way.
TEST_P(RoundTripTest, ThousandsOfConcurrentRequests) {
  const int requests = 2000;
  const uint64_t slot = 6144;  // each request owns one slot; lengths vary inside it
  auto data = random_bytes(requests * slot, 3);
  FileRef f = open("many", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  ASSERT_OK(f->truncate(data.size()));  // writes inside the size run concurrently on ext4
  std::mt19937 rng(4);
  std::vector<IoRequest> writes;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (int i = 0; i < requests; ++i) {
    const uint64_t start = i * slot + (i % 3 == 0 ? 0 : rng() % 2048);
    const uint64_t length = 1 + rng() % (slot - (start - i * slot));
    ranges.emplace_back(start, length);
    writes.push_back(IoRequest{f, Op::kWrite, start, data.data() + start, length, false});
  }
  for (IoTicket& t : engine_->submit_batch(writes)) ASSERT_OK(t.wait());
  // One flush of the partial pages written through the page cache, rather than one per direct read.
  ASSERT_OK(f->sync());
  std::vector<uint8_t> back(data.size(), 0);
  std::vector<IoTicket> tickets;
  for (auto [start, length] : ranges) {
    tickets.push_back(engine_->submit(IoRequest{f, Op::kRead, start, back.data() + start, length, false}));
  }
  for (size_t i = 0; i < tickets.size(); ++i) {
    ASSERT_OK(tickets[i].wait());
    EXPECT_TRUE(tickets[i].ready());
    EXPECT_EQ(tickets[i].bytes_done(), ranges[i].second);
    auto [start, length] = ranges[i];
    ASSERT_EQ(0, std::memcmp(back.data() + start, data.data() + start, length)) << "request " << i;
  }
}

// A request larger than queue_depth × block_size, spread over several rings/threads.
TEST_P(RoundTripTest, LargeRequestOverSeveralRings) {
  IoConfig config = base_config();
  config.intra_op_parallelism = 3;
  config.queue_depth = 4;
  make_engine(config);
  const uint64_t bytes = 3 * 4 * config.block_size * 3 + 12345;
  auto data = random_bytes(bytes, 5);
  FileRef f = open("large", OpenMode::kReadWrite);
  ASSERT_TRUE(f);
  const uint64_t offset = 8192;
  Status w = write_sync(*engine_, f, offset, data.data(), bytes);
  ASSERT_OK(w);
  std::vector<uint8_t> back(bytes);
  IoTicket t = engine_->submit(IoRequest{f, Op::kRead, offset, back.data(), bytes, false});
  ASSERT_OK(t.wait());
  EXPECT_EQ(t.bytes_done(), bytes);
  EXPECT_GT(t.elapsed().count(), 0);
  EXPECT_EQ(back, data);
}

TEST_P(RoundTripTest, SingleSubmitAndWaves) {
  IoConfig config = base_config();
  config.single_submit = true;
  config.overlap_events = false;
  make_engine(config);
  auto data = random_bytes(777777, 6);
  FileRef f = make_file("waves", data);
  ASSERT_TRUE(f);
  std::vector<uint8_t> back(data.size());
  ASSERT_OK(read_sync(*engine_, f, 0, back.data(), back.size()));
  EXPECT_EQ(back, data);
}

// Closing a file and opening another that gets the same descriptor number must reach the new
// file (registered-file slots are dropped at close), and data never crosses between them.
TEST_P(RoundTripTest, ReusedDescriptorNumbersReachTheNewFile) {
  auto first = random_bytes(200000, 7), second = random_bytes(200000, 8);
  int first_fd = -1;
  {
    FileRef a = open("first", OpenMode::kWrite);
    ASSERT_TRUE(a);
    first_fd = a->fd();
    ASSERT_OK(write_sync(*engine_, a, 0, first.data(), first.size()));
  }
  FileRef b = open("second", OpenMode::kReadWrite);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->fd(), first_fd);
  ASSERT_OK(write_sync(*engine_, b, 0, second.data(), second.size()));
  std::vector<uint8_t> back(second.size());
  ASSERT_OK(read_sync(*engine_, b, 0, back.data(), back.size()));
  EXPECT_EQ(back, second);
  EXPECT_EQ(read_plain_file(dir_.file("first")), first);
  EXPECT_EQ(read_plain_file(dir_.file("second")), second);
}

INSTANTIATE_TEST_SUITE_P(Backends, RoundTripTest, ::testing::ValuesIn(testing::all_engine_params()),
                         testing::engine_param_name);

}  // namespace
}  // namespace tierzero::nvme
