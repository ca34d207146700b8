// The periodic save's copy into write-behind buffers, timed through the save's write path
// (bench_save_copy.h).
#include "tools/bench_save_copy.h"

#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>  // the checksum's own code path (checkpoint/storage/internal/xxh3.h)
#endif

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

checkpoint::CheckpointManifest manifest_of(const SaveCopyState& state) {
  checkpoint::CheckpointManifest manifest;
  manifest.zero_stage = 0;
  manifest.world_size = 1;
  checkpoint::FlatGroup group;
  group.params = {{"bench.state", {static_cast<int64_t>(state.numel())}}};
  group.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}, {"exp_avg_sq", ElementType::kF32}};
  manifest.groups.push_back(std::move(group));
  return manifest;
}

// When the copy into the staging buffers began (the first fill) and ended (the last one returned).
struct CopyTimes {
  std::optional<Clock::time_point> first;
  Clock::time_point last;
};

// The state's sections streamed piece by piece, each fill a parallel copy, timed into `times`.
checkpoint::RankData streamed(const SaveCopyState& state, CopyTimes& times) {
  checkpoint::RankData data;
  std::vector<checkpoint::SectionFill> fills;
  for (int s = 0; s < 3; ++s)
    fills.push_back([bytes = state.state(s), &times, offset = size_t{0}](std::span<std::byte> out) mutable -> Status {
      if (offset + out.size() > bytes.size()) return internal_error("bench save: a state read past its end");
      if (!times.first) times.first = Clock::now();
      checkpoint::copy_in_parallel(out, bytes.subspan(offset, out.size()));
      offset += out.size();
      times.last = Clock::now();
      return Status();
    });
  data.group_state_fills.push_back(std::move(fills));
  // Eight records, as a compact optimizer's sub-groups are saved (a whole number of 256-element blocks).
  data.piece_elements = std::max<uint64_t>(256, (state.numel() / 8 + 255) / 256 * 256);
  return data;
}

}  // namespace

SaveCopyState::SaveCopyState(uint64_t bytes) {
  numel_ = std::max<uint64_t>(256, bytes / 3 / sizeof(float) / 256 * 256);
  values_.resize(3 * numel_);
  for (uint64_t i = 0; i < values_.size(); ++i) {  // distinct bit patterns, none repeating a neighbour's
    const auto bits = static_cast<uint32_t>(i * 2654435761ull + (i >> 32));
    std::memcpy(&values_[i], &bits, sizeof bits);
  }
}

std::span<const std::byte> SaveCopyState::state(int s) const {
  return std::as_bytes(std::span(values_))
      .subspan(static_cast<size_t>(s) * numel_ * sizeof(float), numel_ * sizeof(float));
}

Result<SaveCopyResult> run_save_copy(const SaveCopyState& state, const checkpoint::WriteBuffers& buffers,
                                     const std::string& dir, const std::string& tag, int threads) {
  const checkpoint::CheckpointManifest manifest = manifest_of(state);
  checkpoint::CheckpointOptions options;
  options.write_buffers = &buffers;
  TZ_RETURN_IF_ERROR(checkpoint::begin_checkpoint(dir, tag, manifest, options));
  CopyTimes copied;
  const checkpoint::RankData data = streamed(state, copied);
  SaveCopyResult result;
  const Clock::time_point start = Clock::now();
  Status written;
  tbb::task_arena arena(threads);
  arena.execute([&] { written = checkpoint::write_checkpoint_rank(dir, tag, manifest, 0, data, options); });
  TZ_RETURN_IF_ERROR(written);
  const Clock::time_point synced = Clock::now();
  TZ_RETURN_IF_ERROR(checkpoint::commit_checkpoint(dir, tag, manifest, options));
  result.copy_seconds = seconds_between(*copied.first, copied.last);
  result.write_seconds = seconds_between(start, synced);
  result.commit_seconds = seconds_between(synced, Clock::now());

  TZ_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                      checkpoint::CheckpointReader::open(dir, tag));
  std::vector<std::byte> back(state.state(0).size());
  result.equal = true;
  for (int s = 0; s < 3 && result.equal; ++s) {
    TZ_RETURN_IF_ERROR(reader->read_stored_partition(0, static_cast<size_t>(s), 0, 0, back));
    result.equal = std::memcmp(back.data(), state.state(s).data(), back.size()) == 0;
  }
  return result;
}

ByteCosts measure_byte_costs(std::span<const std::byte> bytes) {
  constexpr size_t kPiece = checkpoint::WriteBuffers::kBufferBytes;
  std::vector<std::byte> staging(kPiece);
  std::memset(staging.data(), 0, staging.size());  // faulted in before the clock starts
  const auto pass = [&](const auto& on_piece) {
    const Clock::time_point start = Clock::now();
    for (size_t done = 0; done < bytes.size(); done += kPiece)
      on_piece(bytes.subspan(done, std::min(kPiece, bytes.size() - done)));
    return static_cast<double>(bytes.size()) / 1e9 / std::max(seconds_between(start, Clock::now()), 1e-9);
  };
  uint64_t sink = 0;  // the digests, kept so no pass is optimised away
  ByteCosts costs;
  costs.memcpy_gbps =
      pass([&](std::span<const std::byte> piece) { std::memcpy(staging.data(), piece.data(), piece.size()); });
  costs.xxh3_gbps = pass([&](std::span<const std::byte> piece) { sink ^= XXH3_64bits(piece.data(), piece.size()); });
  XXH3_state_t* section = XXH3_createState();
  XXH3_state_t* file = XXH3_createState();
  XXH3_64bits_reset(section);
  XXH3_64bits_reset(file);
  costs.copy_and_two_hashes_gbps = pass([&](std::span<const std::byte> piece) {
    std::memcpy(staging.data(), piece.data(), piece.size());
    XXH3_64bits_update(section, staging.data(), piece.size());
    XXH3_64bits_update(file, staging.data(), piece.size());
  });
  sink ^= XXH3_64bits_digest(section) ^ XXH3_64bits_digest(file);
  XXH3_freeState(section);
  XXH3_freeState(file);
  const volatile uint64_t kept = sink;
  (void)kept;
  return costs;
}

}  // namespace tierzero::tools
