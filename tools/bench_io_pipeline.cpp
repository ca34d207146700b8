// The record pipeline pass of `tierzero bench io` (bench_io_pipeline.h): the same calls, in the same
// order, as engine/zero/record_adam.cpp's step inside the backward.
#include "tools/bench_io_pipeline.h"

#include <cstring>
#include <thread>
#include <vector>

#include "offload/offload.h"

namespace tierzero::tools {
namespace {

constexpr offload::SwapRole kPipelineSwap{"bench-pipeline", "bench io --nvme", "record", "benchmark records"};

// The stamp of record r after pass `pass` (its first and last 8 bytes).
uint64_t stamp(int64_t r, int pass) { return static_cast<uint64_t>(r) * 1000003 + static_cast<uint64_t>(pass); }

void put_stamp(std::span<std::byte> bytes, uint64_t value) {
  std::memcpy(bytes.data(), &value, sizeof value);
  std::memcpy(bytes.data() + bytes.size() - sizeof value, &value, sizeof value);
}

bool has_stamp(std::span<const std::byte> bytes, uint64_t value) {
  uint64_t first = 0, last = 0;
  std::memcpy(&first, bytes.data(), sizeof first);
  std::memcpy(&last, bytes.data() + bytes.size() - sizeof last, sizeof last);
  return first == value && last == value;
}

}  // namespace

Result<PipelineResult> run_pipeline(const std::string& dir, const nvme::IoConfig& io, const PipelineShape& shape) {
  std::vector<nvme::AlignedBuffer> memory;
  std::vector<std::span<std::byte>> buffers;
  for (int b = 0; b < shape.buffers; ++b) {
    memory.push_back(nvme::allocate_aligned(shape.record_bytes));
    buffers.push_back({memory.back().get(), shape.record_bytes});
  }
  const uint64_t block_bytes = static_cast<uint64_t>(shape.memory_records) * shape.record_bytes;
  memory.push_back(nvme::allocate_aligned(std::max<uint64_t>(block_bytes, 1)));
  const std::span<std::byte> block(memory.back().get(), block_bytes);
  TZ_ASSIGN_OR_RETURN(
      std::unique_ptr<offload::RecordCache> cache,
      offload::RecordCache::create(
          buffers, block,
          {.files = {.paths = {dir}, .io = io, .rank = 0, .role = kPipelineSwap},
           .record_bytes = std::vector<uint64_t>(static_cast<size_t>(shape.records), shape.record_bytes),
           .memory_records = shape.memory_records,
           .read_ahead = true,
           .write_behind = true,
           .file_record_bytes = 0,
           .spread_memory = shape.spread}));
  using Access = offload::RecordCache::Access;
  using Release = offload::RecordCache::Release;
  for (int64_t r = 0; r < shape.records; ++r) {  // the first write, untimed
    TZ_ASSIGN_OR_RETURN(std::span<std::byte> bytes, cache->acquire(r, Access::kOverwrite));
    put_stamp(bytes, stamp(r, 0));
    TZ_RETURN_IF_ERROR(cache->release(r, Release::kWrite));
  }
  TZ_RETURN_IF_ERROR(cache->wait_writes());
  cache->discard();  // written: every timed pass reads every streamed record, as a step does
  PipelineResult result{.verified = true};
  const uint64_t read = cache->read_bytes(), written = cache->written_bytes();
  const double waited = cache->wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (int pass = 1; pass <= shape.passes; ++pass) {
    const std::vector<int64_t> streamed = cache->pass(offload::RecordCache::Sweep::kBackToFront);
    TZ_RETURN_IF_ERROR(cache->prefetch_ahead(streamed, 0));
    size_t position = 0;                     // in `streamed`
    const bool again = pass < shape.passes;  // as inside the backward, step after step
    for (int64_t r = shape.records - 1; r >= 0; --r) {
      const bool on_nvme = !cache->in_memory(r);
      if (on_nvme) TZ_RETURN_IF_ERROR(cache->prefetch_ahead(streamed, position, again));
      TZ_ASSIGN_OR_RETURN(std::span<std::byte> bytes, cache->acquire(r, Access::kRead));
      result.verified = result.verified && has_stamp(bytes, stamp(r, pass - 1));
      std::this_thread::sleep_for(shape.per_record);
      put_stamp(bytes, stamp(r, pass));
      TZ_RETURN_IF_ERROR(cache->release(r, on_nvme ? cache->changed(streamed, position, again) : Release::kWrite));
      if (on_nvme) ++position;
    }
  }
  TZ_RETURN_IF_ERROR(cache->flush());  // the last pass's kept records too: every pass's bytes written
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.read_bytes = cache->read_bytes() - read;
  result.written_bytes = cache->written_bytes() - written;
  result.wait_seconds = cache->wait_seconds() - waited;
  return result;
}

}  // namespace tierzero::tools
