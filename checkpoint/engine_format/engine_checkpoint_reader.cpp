// Loading an engine checkpoint: manifest, partitions at any world size (resharding), replicated
// tensors. Source sections are streamed through SectionCursors, so reading in order never holds
// more than a cursor's input buffer per source rank.
#include <algorithm>
#include <functional>
#include <future>
#include <map>

#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/engine_format/internal/reader_paths.h"
#include "checkpoint/engine_format/internal/section_cursor.h"

namespace tierzero::checkpoint {
namespace {

// Below this many bytes a range is read on the calling thread; above, one thread per source rank.
constexpr uint64_t kParallelReadBytes = 8 << 20;

// One piece of a range read: raw section bytes at `offset` into `out`.
struct PieceRead {
  uint64_t offset;
  std::span<std::byte> out;
};

// Performs each cursor's pieces in order; different cursors (rank files) concurrently when the
// range is large, so a stage-3 tensor's W pieces are read with W requests in flight.
Status run_reads(const std::map<SectionCursor*, std::vector<PieceRead>>& reads, uint64_t total_bytes) {
  auto run_one = [](SectionCursor* cursor, const std::vector<PieceRead>& pieces) {
    for (const PieceRead& p : pieces) TZ_RETURN_IF_ERROR(cursor->read(p.offset, p.out));
    return Status();
  };
  if (reads.size() < 2 || total_bytes < kParallelReadBytes) {
    for (const auto& [cursor, pieces] : reads) TZ_RETURN_IF_ERROR(run_one(cursor, pieces));
    return {};
  }
  std::vector<std::future<Status>> running;
  for (const auto& [cursor, pieces] : reads) {
    running.push_back(std::async(std::launch::async, run_one, cursor, std::cref(pieces)));
  }
  Status first;
  for (auto& f : running) {
    Status s = f.get();
    if (first.ok()) first = s;
  }
  return first;
}

// Where logical flat elements of a group live in the saved checkpoint.
struct SourceSegment {
  uint64_t logical_begin;
  uint64_t length;
  uint32_t rank;
  uint64_t partition_begin;
};

class EngineCheckpointReader final : public CheckpointReader {
 public:
  EngineCheckpointReader(std::string path, std::string tag, StoredManifest stored)
      : path_(std::move(path)), tag_(std::move(tag)), stored_(std::move(stored)), files_(stored_.files.size()) {
    const CheckpointManifest& m = stored_.manifest;
    for (const FlatGroup& g : m.groups) {
      std::vector<SourceSegment> segments;
      for (uint32_t r = 0; r < m.world_size; ++r) {
        if (!rank_stores_groups(m.zero_stage, r)) continue;
        for (const PartitionSegment& s : partition_segments(g, m.zero_stage, m.world_size, m.alignment, r)) {
          segments.push_back({s.logical_begin, s.length, r, s.partition_begin});
        }
      }
      std::sort(segments.begin(), segments.end(),
                [](const auto& a, const auto& b) { return a.logical_begin < b.logical_begin; });
      sources_.push_back(std::move(segments));
    }
  }

  const CheckpointManifest& manifest() const override { return stored_.manifest; }
  const std::string& tag() const override { return tag_; }
  const std::string& path() const override { return path_; }

  const nlohmann::json& rank_state(uint32_t rank) const override {
    static const nlohmann::json kNull;
    return rank < stored_.files.size() ? stored_.files[rank].rank_state : kNull;
  }

  Status read_flat_range(size_t group, size_t state, uint64_t begin, std::span<std::byte> out) override {
    TZ_RETURN_IF_ERROR(check_group_state(group, state));
    const uint64_t item = element_bits(manifest().groups[group].states[state].dtype) / 8;
    const uint64_t count = out.size() / item;
    if (out.size() % item != 0 || begin + count > manifest().groups[group].numel() || begin + count < begin) {
      return invalid_argument(fmt::format("{}: range [{}, +{} bytes) is not inside group {} ({} elements of {} bytes)",
                                          path_, begin, out.size(), group, manifest().groups[group].numel(), item));
    }
    const std::vector<SourceSegment>& segments = sources_[group];
    auto it = std::upper_bound(segments.begin(), segments.end(), begin,
                               [](uint64_t v, const SourceSegment& s) { return v < s.logical_begin; });
    if (it != segments.begin()) --it;
    uint64_t position = begin;
    const uint64_t end = begin + count;
    std::map<SectionCursor*, std::vector<PieceRead>> reads;  // per source section, in order
    for (; it != segments.end() && position < end; ++it) {
      const uint64_t seg_end = it->logical_begin + it->length;
      if (seg_end <= position) continue;
      const uint64_t piece_end = std::min(end, seg_end);
      TZ_ASSIGN_OR_RETURN(SectionCursor * cursor, group_cursor(it->rank, group, state));
      const uint64_t source_offset = (it->partition_begin + (position - it->logical_begin)) * item;
      reads[cursor].push_back({source_offset, out.subspan((position - begin) * item, (piece_end - position) * item)});
      position = piece_end;
    }
    if (position != end)
      return internal_error(fmt::format("{}: group {} is not covered by its partitions", path_, group));
    return run_reads(reads, out.size());
  }

  Status read_partition(size_t group, size_t state, uint32_t world_size, uint32_t rank,
                        std::span<std::byte> out) override {
    TZ_RETURN_IF_ERROR(check_group_state(group, state));
    const CheckpointManifest& m = manifest();
    if (world_size == 0 || rank >= world_size) {
      return invalid_argument(fmt::format("rank {} is outside world size {}", rank, world_size));
    }
    const FlatGroup& g = m.groups[group];
    const uint64_t item = element_bits(g.states[state].dtype) / 8;
    const uint64_t want = partition_numel(g, m.zero_stage, world_size, m.alignment) * item;
    if (out.size() != want) {
      return invalid_argument(fmt::format("{}: rank {} of {} needs a {}-byte buffer for group {} state '{}', got {}",
                                          path_, rank, world_size, want, group, g.states[state].name, out.size()));
    }
    std::fill(out.begin(), out.end(), std::byte{0});
    for (const PartitionSegment& s : partition_segments(g, m.zero_stage, world_size, m.alignment, rank)) {
      TZ_RETURN_IF_ERROR(
          read_flat_range(group, state, s.logical_begin, out.subspan(s.partition_begin * item, s.length * item)));
    }
    return finish_reads();
  }

  Status read_replicated(size_t index, uint64_t begin, std::span<std::byte> out) override {
    const CheckpointManifest& m = manifest();
    const uint64_t total = index < m.replicated.size() ? replicated_bytes(m.replicated[index]) : 0;
    if (index >= m.replicated.size() || begin > total || out.size() > total - begin) {
      return invalid_argument(fmt::format("{}: no bytes [{}, +{}) in replicated tensor {} ({} bytes)", path_, begin,
                                          out.size(), index, total));
    }
    const auto& sections = stored_.files[0].sections;
    auto it = std::find_if(sections.begin(), sections.end(),
                           [&](const SectionRecord& s) { return s.replicated && s.index == index; });
    TZ_ASSIGN_OR_RETURN(SectionCursor * cursor, cursor_for(0, static_cast<size_t>(it - sections.begin()),
                                                           fmt::format("tensor '{}'", m.replicated[index].spec.name)));
    TZ_RETURN_IF_ERROR(cursor->read(begin, out));
    return begin + out.size() == total ? finish_reads() : Status();
  }

  Status finish_reads() override {
    Status first;
    for (auto& [key, cursor] : cursors_) {
      Status s = cursor->finish();
      if (first.ok()) first = s;
    }
    cursors_.clear();
    return first;
  }

 private:
  Status check_group_state(size_t group, size_t state) const {
    if (group >= manifest().groups.size() || state >= manifest().groups[group].states.size()) {
      return invalid_argument(fmt::format("{}: no group {} state {}", path_, group, state));
    }
    return {};
  }

  Result<SectionCursor*> group_cursor(uint32_t rank, size_t group, size_t state) {
    const auto& sections = stored_.files[rank].sections;
    auto it = std::find_if(sections.begin(), sections.end(), [&](const SectionRecord& s) {
      return !s.replicated && s.group == group && s.state == state;
    });
    return cursor_for(rank, static_cast<size_t>(it - sections.begin()),
                      fmt::format("group {} state '{}'", group, manifest().groups[group].states[state].name));
  }

  Result<SectionCursor*> cursor_for(uint32_t rank, size_t section, const std::string& what) {
    auto key = std::make_pair(rank, section);
    auto it = cursors_.find(key);
    if (it != cursors_.end()) return it->second.get();
    if (!files_[rank]) {
      TZ_ASSIGN_OR_RETURN(files_[rank], RankFileHandle::open(path_ + "/" + stored_.files[rank].file, rank,
                                                             manifest().world_size, stored_.files[rank].bytes));
    }
    auto cursor =
        std::make_unique<SectionCursor>(files_[rank], stored_.files[rank].sections[section],
                                        fmt::format("{}/{}: rank {} {}", path_, stored_.files[rank].file, rank, what));
    return cursors_.emplace(key, std::move(cursor)).first->second.get();
  }

  std::string path_;
  std::string tag_;
  StoredManifest stored_;
  std::vector<std::shared_ptr<RankFileHandle>> files_;
  std::vector<std::vector<SourceSegment>> sources_;
  std::map<std::pair<uint32_t, size_t>, std::unique_ptr<SectionCursor>> cursors_;
};

}  // namespace

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::open(const std::string& dir, const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(CheckpointLocation where, locate_checkpoint(dir, tag));
  TZ_ASSIGN_OR_RETURN(StoredManifest stored, load_checked_manifest(where.path));
  return std::unique_ptr<CheckpointReader>(new EngineCheckpointReader(where.path, where.tag, std::move(stored)));
}

}  // namespace tierzero::checkpoint
