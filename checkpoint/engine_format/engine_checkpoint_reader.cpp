// Loading an engine checkpoint: manifest, partitions at any world size (resharding), replicated
// tensors. Source sections are streamed through SectionCursors, so reading in order never holds
// more than a cursor's input buffer per source rank (and, for an 8-bit moment read decoded, the
// scales of the source ranks it touches: 1/64 of the moment's fp32 bytes).
#include <algorithm>
#include <functional>
#include <future>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/engine_format/internal/reader_paths.h"
#include "checkpoint/engine_format/internal/section_cursor.h"
#include "checkpoint/engine_format/internal/state_codec.h"

namespace tierzero::checkpoint {
namespace {

// Below this many bytes a range is read on the calling thread; above, one thread per source rank.
constexpr uint64_t kParallelReadBytes = 8 << 20;
// Elements of an encoded state decoded at a time.
constexpr uint64_t kDecodeChunk = 1 << 16;

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
    for (uint32_t r = 0; r < stored_.files.size(); ++r) {
      const std::vector<SectionRecord>& sections = stored_.files[r].sections;
      for (size_t i = 0; i < sections.size(); ++i) {
        const SectionRecord& s = sections[i];
        if (s.replicated) continue;
        const StatePart part = state_parts(m.groups[s.group].states[s.state])[s.part];
        const uint64_t begin = part.per_block ? s.first / kStateBlock * element_size(part.dtype)
                                              : s.first * element_size(part.dtype);
        pieces_[{r, s.group, s.state, s.part}].push_back({begin, begin + s.raw_bytes, i});
      }
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
    const bool raw = manifest().groups[group].states[state].codec == StateCodec::kRaw;
    std::map<SectionCursor*, std::vector<PieceRead>> reads;  // raw: per source section, in order
    TZ_RETURN_IF_ERROR(for_each_source(group, begin, count, [&](const SourceSegment& seg, uint64_t first, uint64_t n,
                                                                  uint64_t out_index) -> Status {
      if (!raw) return read_decoded(group, state, seg.rank, first, as_floats(out, out_index, n));
      return add_part_reads(reads, seg.rank, group, state, 0, first * item, out.subspan(out_index * item, n * item));
    }));
    return run_reads(reads, out.size());
  }

  Status read_stored(size_t group, size_t state, size_t part, uint32_t rank, uint64_t offset,
                     std::span<std::byte> out) override {
    TZ_RETURN_IF_ERROR(check_group_state(group, state));
    const CheckpointManifest& m = manifest();
    const StateSpec& spec = m.groups[group].states[state];
    if (part >= state_parts(spec).size() || rank >= m.world_size || !rank_stores_groups(m.zero_stage, rank)) {
      return invalid_argument(fmt::format("{}: rank {} of world size {} stores no part {} of group {} state '{}'",
                                          path_, rank, m.world_size, part, group, spec.name));
    }
    const uint64_t size = group_part_bytes(m, group, state, part);
    if (offset > size || out.size() > size - offset) {
      return invalid_argument(fmt::format("{}: bytes [{}, +{}) are not inside part {} of rank {}'s group {} state '{}' "
                                          "({} bytes)",
                                          path_, offset, out.size(), part, rank, group, spec.name, size));
    }
    return read_part(rank, group, state, part, offset, out);
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
    std::fill(out.begin(), out.end(), std::byte{0});  // padding; an encoded state's padding decodes to 0 too
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
    TZ_ASSIGN_OR_RETURN(SectionCursor * cursor, cursor_for(0, static_cast<size_t>(it - sections.begin())));
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
    scales_.clear();
    return first;
  }

 private:
  static std::span<float> as_floats(std::span<std::byte> out, uint64_t index, uint64_t n) {
    return {reinterpret_cast<float*>(out.data()) + index, n};
  }

  // Calls visit(segment, first, n, out_index) for each run of logical elements [begin, begin +
  // count) in increasing order: n elements at partition element `first` of segment.rank's partition,
  // bound for element out_index of the range.
  template <typename Visit>
  Status for_each_source(size_t group, uint64_t begin, uint64_t count, Visit&& visit) {
    const std::vector<SourceSegment>& segments = sources_[group];
    auto it = std::upper_bound(segments.begin(), segments.end(), begin,
                               [](uint64_t v, const SourceSegment& s) { return v < s.logical_begin; });
    if (it != segments.begin()) --it;
    uint64_t position = begin;
    const uint64_t end = begin + count;
    for (; it != segments.end() && position < end; ++it) {
      const uint64_t seg_end = it->logical_begin + it->length;
      if (seg_end <= position) continue;
      const uint64_t piece_end = std::min(end, seg_end);
      TZ_RETURN_IF_ERROR(
          visit(*it, it->partition_begin + (position - it->logical_begin), piece_end - position, position - begin));
      position = piece_end;
    }
    if (position != end)
      return internal_error(fmt::format("{}: group {} is not covered by its partitions", path_, group));
    return {};
  }

  // Decodes partition elements [first, first + out.size()) of encoded state `state` of `rank` into
  // `out`, kDecodeChunk elements at a time.
  Status read_decoded(size_t group, size_t state, uint32_t rank, uint64_t first, std::span<float> out) {
    const StateSpec& spec = manifest().groups[group].states[state];
    for (uint64_t done = 0; done < out.size(); done += kDecodeChunk) {
      const std::span<float> chunk = out.subspan(done, std::min<uint64_t>(kDecodeChunk, out.size() - done));
      const uint64_t at = first + done;
      if (spec.codec == StateCodec::kCompactMaster) {
        hi_.resize(chunk.size());
        residual_.resize(chunk.size());
        TZ_RETURN_IF_ERROR(read_part(rank, group, state, 0, at * 2, std::as_writable_bytes(std::span(hi_))));
        TZ_RETURN_IF_ERROR(read_part(rank, group, state, 1, at * 2, std::as_writable_bytes(std::span(residual_))));
        TZ_RETURN_IF_ERROR(decode_compact_master(hi_, residual_, chunk));
        continue;
      }
      // kBlockwise8: decode from the start of the chunk's first block (codes before `at` as 0).
      const uint64_t lead = at % kStateBlock;
      codes_.assign(lead + chunk.size(), std::byte{0});
      TZ_RETURN_IF_ERROR(read_part(rank, group, state, 0, at, std::span(codes_).subspan(lead)));
      TZ_ASSIGN_OR_RETURN(const std::vector<float>* scales, rank_scales(rank, group, state));
      const uint64_t block = at / kStateBlock;
      const uint64_t blocks = (codes_.size() + kStateBlock - 1) / kStateBlock;
      if (block + blocks > scales->size()) {
        return internal_error(fmt::format("{}: rank {} group {} state '{}' has {} scales, too few for element {}",
                                          path_, rank, group, spec.name, scales->size(), at + chunk.size()));
      }
      values_.resize(codes_.size());
      TZ_RETURN_IF_ERROR(
          decode_blockwise8(spec.codes, codes_, std::span(*scales).subspan(block, blocks), values_));
      std::copy(values_.begin() + static_cast<ptrdiff_t>(lead), values_.end(), chunk.begin());
    }
    return {};
  }

  // Rank `rank`'s scales of kBlockwise8 state `state`, read whole (checksum checked) on first use
  // and kept until finish_reads().
  Result<const std::vector<float>*> rank_scales(uint32_t rank, size_t group, size_t state) {
    const auto key = std::make_tuple(rank, group, state);
    auto it = scales_.find(key);
    if (it != scales_.end()) return &it->second;
    std::vector<float> scales(group_part_bytes(manifest(), group, state, 1) / sizeof(float));
    TZ_RETURN_IF_ERROR(read_stored(group, state, 1, rank, 0, std::as_writable_bytes(std::span(scales))));
    for (const Piece& piece : pieces_[{rank, group, state, 1}]) {  // the scales' checksums now
      TZ_ASSIGN_OR_RETURN(SectionCursor * cursor, cursor_for(rank, piece.section));
      TZ_RETURN_IF_ERROR(cursor->finish());
    }
    return &scales_.emplace(key, std::move(scales)).first->second;
  }

  Status check_group_state(size_t group, size_t state) const {
    if (group >= manifest().groups.size() || state >= manifest().groups[group].states.size()) {
      return invalid_argument(fmt::format("{}: no group {} state {}", path_, group, state));
    }
    return {};
  }

  // Appends to `reads` the piece reads that fill `out` with bytes [offset, offset + out.size()) of
  // part `part` of rank `rank`'s partition of a group state, across the sections holding its pieces.
  Status add_part_reads(std::map<SectionCursor*, std::vector<PieceRead>>& reads, uint32_t rank, size_t group,
                        size_t state, size_t part, uint64_t offset, std::span<std::byte> out) {
    static const std::vector<Piece> kNone;
    const auto found = pieces_.find({rank, group, state, part});
    const std::vector<Piece>& pieces = found == pieces_.end() ? kNone : found->second;
    auto it = std::upper_bound(pieces.begin(), pieces.end(), offset,
                               [](uint64_t v, const Piece& p) { return v < p.end; });
    for (uint64_t done = 0; done < out.size(); ++it) {
      if (it == pieces.end() || it->begin > offset + done) {
        return corrupt(fmt::format("{}: rank {} holds no byte {} of group {} state {} part {}; the manifest is "
                                   "damaged",
                                   path_, rank, offset + done, group, state, part));
      }
      const uint64_t n = std::min<uint64_t>(out.size() - done, it->end - (offset + done));
      TZ_ASSIGN_OR_RETURN(SectionCursor * cursor, cursor_for(rank, it->section));
      reads[cursor].push_back({offset + done - it->begin, out.subspan(done, n)});
      done += n;
    }
    return {};
  }

  // Reads bytes [offset, offset + out.size()) of a part (add_part_reads) on the calling thread.
  Status read_part(uint32_t rank, size_t group, size_t state, size_t part, uint64_t offset, std::span<std::byte> out) {
    std::map<SectionCursor*, std::vector<PieceRead>> reads;
    TZ_RETURN_IF_ERROR(add_part_reads(reads, rank, group, state, part, offset, out));
    return run_reads(reads, 0);
  }

  Result<SectionCursor*> cursor_for(uint32_t rank, size_t section) {
    auto key = std::make_pair(rank, section);
    auto it = cursors_.find(key);
    if (it != cursors_.end()) return it->second.get();
    const SectionRecord& record = stored_.files[rank].sections[section];
    const std::string what = section_label(manifest(), record) +
                             (record.first != 0 ? fmt::format(" from element {}", record.first) : "");
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
  // Where each part of each rank's group state partitions lies: its pieces in order, as byte
  // ranges of the part, each one section of the rank file. Key (rank, group, state, part).
  struct Piece {
    uint64_t begin;
    uint64_t end;
    size_t section;
  };
  std::map<std::tuple<uint32_t, size_t, size_t, size_t>, std::vector<Piece>> pieces_;
  std::map<std::pair<uint32_t, size_t>, std::unique_ptr<SectionCursor>> cursors_;
  std::map<std::tuple<uint32_t, size_t, size_t>, std::vector<float>> scales_;  // (rank, group, state)
  // Decoding scratch (read_decoded).
  std::vector<uint16_t> hi_;
  std::vector<int16_t> residual_;
  std::vector<std::byte> codes_;
  std::vector<float> values_;
};

}  // namespace

Status CheckpointReader::read_stored(size_t group, size_t state, size_t part, uint32_t rank, uint64_t offset,
                                     std::span<std::byte> out) {
  const CheckpointManifest& m = manifest();
  if (group >= m.groups.size() || state >= m.groups[group].states.size() || part != 0 ||
      m.groups[group].states[state].codec != StateCodec::kRaw) {
    return invalid_argument(fmt::format("{}: no stored part {} of group {} state {}", path(), part, group, state));
  }
  const FlatGroup& g = m.groups[group];
  const uint64_t item = element_size(g.states[state].dtype);
  const uint64_t size = partition_numel(g, m.zero_stage, m.world_size, m.alignment) * item;
  if (offset % item != 0 || out.size() % item != 0 || offset > size || out.size() > size - offset) {
    return invalid_argument(fmt::format("{}: bytes [{}, +{}) are not whole elements of rank {}'s group {} state {}",
                                        path(), offset, out.size(), rank, group, state));
  }
  std::fill(out.begin(), out.end(), std::byte{0});  // padding
  const uint64_t begin = offset / item, end = begin + out.size() / item;
  for (const PartitionSegment& s : partition_segments(g, m.zero_stage, m.world_size, m.alignment, rank)) {
    const uint64_t lo = std::max(begin, s.partition_begin), hi = std::min(end, s.partition_begin + s.length);
    if (lo >= hi) continue;
    TZ_RETURN_IF_ERROR(read_flat_range(group, state, s.logical_begin + (lo - s.partition_begin),
                                       out.subspan((lo - begin) * item, (hi - lo) * item)));
  }
  return {};
}

Status CheckpointReader::read_stored_partition(size_t group, size_t state, size_t part, uint32_t rank,
                                               std::span<std::byte> out) {
  const CheckpointManifest& m = manifest();
  if (group >= m.groups.size() || state >= m.groups[group].states.size() ||
      part >= state_parts(m.groups[group].states[state]).size()) {
    return invalid_argument(fmt::format("{}: no stored part {} of group {} state {}", path(), part, group, state));
  }
  const StatePart p = state_parts(m.groups[group].states[state])[part];
  const uint64_t want =
      part_numel(p, partition_numel(m.groups[group], m.zero_stage, m.world_size, m.alignment)) * element_size(p.dtype);
  if (out.size() != want) {
    return invalid_argument(fmt::format("{}: part {} of rank {}'s group {} state '{}' is {} bytes, got a {}-byte buffer",
                                        path(), part, rank, group, m.groups[group].states[state].name, want,
                                        out.size()));
  }
  TZ_RETURN_IF_ERROR(read_stored(group, state, part, rank, 0, out));
  return finish_reads();
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::open(const std::string& dir, const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(CheckpointLocation where, locate_checkpoint(dir, tag));
  TZ_ASSIGN_OR_RETURN(StoredManifest stored, load_checked_manifest(where.path));
  return std::unique_ptr<CheckpointReader>(new EngineCheckpointReader(where.path, where.tag, std::move(stored)));
}

}  // namespace tierzero::checkpoint
