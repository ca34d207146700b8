// The timed loop of `tierzero bench io`, and the data pattern it verifies.
#include "tools/bench_io_pass.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>

#include "common/common.h"

namespace tierzero::tools {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Block b's content: one fixed pseudo-random stream, with (b, page) stamped at the start of every
// 4 KiB page, so a block or page read from the wrong offset, or a buffer that was never written,
// is caught. Buffers are filled once; each request only re-stamps.
constexpr uint64_t kStampEvery = 4096;

void fill_stream(std::byte* p, uint64_t bytes) {
  uint64_t word = splitmix64(42);
  for (uint64_t off = 0; off + 8 <= bytes; off += 8) {
    word = splitmix64(word);
    std::memcpy(p + off, &word, 8);
  }
  for (uint64_t off = bytes / 8 * 8; off < bytes; ++off) p[off] = std::byte{0x5A};
}

void stamp(std::byte* p, uint64_t bytes, uint64_t block) {
  for (uint64_t off = 0; off + 16 <= bytes; off += kStampEvery) {
    const uint64_t page = off / kStampEvery;
    std::memcpy(p + off, &block, 8);
    std::memcpy(p + off + 8, &page, 8);
  }
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

double percentile_us(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

namespace {

nvme::AlignedBuffer allocate_buffers(uint64_t bytes, BufferPages pages) {
  if (pages == BufferPages::kHuge) return nvme::allocate_aligned(bytes);
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) throw std::bad_alloc();
  return nvme::AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace

BenchBuffers::BenchBuffers(nvme::IoEngine& engine, uint32_t slots, uint64_t block_size, BufferPages pages)
    : engine_(engine),
      slots_(slots),
      block_size_(block_size),
      memory_(allocate_buffers(uint64_t{slots} * block_size, pages)) {
  std::memset(memory_.get(), 0, slots * block_size);
  (void)engine_.register_buffer(memory_.get(), slots * block_size);  // fixed buffers are an optimisation
}

BenchBuffers::~BenchBuffers() { (void)engine_.unregister_buffer(memory_.get()); }

namespace {

// Slots whose request has completed, in completion order: the pass refills whichever finishes
// first, as fio does, so one slow request never idles the rest of the queue.
class CompletedSlots {
 public:
  void push(uint32_t slot) {
    {
      std::lock_guard lock(mu_);
      slots_.push_back(slot);
    }
    cv_.notify_one();
  }
  uint32_t pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !slots_.empty(); });
    const uint32_t slot = slots_.front();
    slots_.pop_front();
    return slot;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint32_t> slots_;
};

}  // namespace

Result<PassResult> run_pass(nvme::IoEngine& engine, const nvme::FileRef& file, BenchBuffers& buffers, uint64_t size,
                            PassData data, const std::string& label, bool end_fsync) {
  const uint64_t bs = buffers.block_size();
  const bool mixed = data == PassData::kMixed;
  if (mixed) size = size / (2 * bs) * (2 * bs);
  if (mixed && size == 0) return invalid_argument("a mixed pass needs at least two blocks of " + std::to_string(bs) + " bytes");
  const uint64_t blocks = (size + bs - 1) / bs;
  const uint32_t slots = buffers.slots();
  // Request i: its operation and the file block it moves.
  auto op_of = [&](uint64_t i) {
    if (mixed) return i % 2 == 0 ? nvme::Op::kRead : nvme::Op::kWrite;
    return data == PassData::kWritePattern ? nvme::Op::kWrite : nvme::Op::kRead;
  };
  auto block_of = [&](uint64_t i) { return mixed ? (i % 2 == 0 ? i / 2 : blocks / 2 + i / 2) : i; };
  if (mixed || data == PassData::kWritePattern) {
    for (uint32_t s = 0; s < slots; ++s) fill_stream(buffers.slot(s), bs);
  }
  nvme::AlignedBuffer expected = nvme::allocate_aligned(bs);
  std::vector<nvme::IoTicket> in_flight(slots);
  std::vector<uint64_t> block_in_slot(slots);
  std::vector<char> stream_in_slot(slots, 1);  // kMixed: the slot holds the write stream (no read since)
  CompletedSlots completed;
  std::vector<double> latencies_us;
  latencies_us.reserve(blocks);
  ProgressBar bar(label, size);
  Status first_error;

  // Completes the request in `slot`: its status, latency, and for kVerify its data.
  auto finish = [&](uint32_t slot) {
    const uint64_t block = block_in_slot[slot];
    Status s = in_flight[slot].wait();
    latencies_us.push_back(std::chrono::duration<double, std::micro>(in_flight[slot].elapsed()).count());
    in_flight[slot] = {};
    const uint64_t len = std::min(bs, size - block * bs);
    if (s.ok() && data == PassData::kVerify) {
      fill_stream(expected.get(), len);
      stamp(expected.get(), len, block);
      if (std::memcmp(expected.get(), buffers.slot(slot), len) != 0) {
        s = corrupt("data read back from " + file->path() + " at offset " + std::to_string(block * bs) +
                    " differs from what was written");
      }
    }
    if (!s.ok() && first_error.ok()) first_error = s;
    bar.advance(len);
  };
  auto submit = [&](uint32_t slot, uint64_t request) {
    const uint64_t block = block_of(request);
    const nvme::Op op = op_of(request);
    const uint64_t len = std::min(bs, size - block * bs);
    block_in_slot[slot] = block;
    if (op == nvme::Op::kWrite) {
      if (!stream_in_slot[slot]) fill_stream(buffers.slot(slot), len);  // a read landed in it
      stream_in_slot[slot] = 1;
      stamp(buffers.slot(slot), len, block);
    } else {
      stream_in_slot[slot] = 0;
    }
    in_flight[slot] = engine.submit(nvme::IoRequest{file, op, block * bs, buffers.slot(slot), len, false,
                                                    [&completed, slot](const Status&) { completed.push(slot); }});
  };

  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t submitted = 0, finished = 0;
  for (; submitted < std::min<uint64_t>(blocks, slots); ++submitted)
    submit(static_cast<uint32_t>(submitted), submitted);
  while (finished < submitted) {
    const uint32_t slot = completed.pop();
    finish(slot);
    ++finished;
    if (submitted < blocks && first_error.ok()) submit(slot, submitted++);
  }
  if (end_fsync && data == PassData::kWritePattern && first_error.ok()) first_error = file->sync();
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = cpu_seconds();
  bar.finish();
  if (!first_error.ok()) return first_error;

  PassResult r;
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  r.bytes = size;
  r.cpu_percent = r.seconds > 0 ? 100.0 * (cpu1 - cpu0) / r.seconds : 0;
  r.p50_us = percentile_us(latencies_us, 0.50);
  r.p99_us = percentile_us(latencies_us, 0.99);
  return r;
}

}  // namespace tierzero::tools
