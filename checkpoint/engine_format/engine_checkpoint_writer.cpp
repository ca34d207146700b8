// Saving an engine checkpoint: the commit protocol of checkpoint/storage/commit_transaction.cpp
// with TAG as NAME, then DIR/latest moved to TAG. A crash (or failed call) at any step leaves
// DIR/latest naming the previous complete checkpoint, whose files are never touched.
//
//   begin_checkpoint (rank 0)
//     1. refuse if DIR/latest names TAG (the published checkpoint is immutable)
//     2. CommitTransaction::begin: mkdir DIR (durably); rm -r DIR/TAG.partial; mkdir it
//   write_checkpoint_rank (every rank, after a barrier)
//     3. write DIR/TAG.partial/rank_R.bin section by section through nvme/ (StreamWriter, O_DIRECT
//        where the file system allows it); fdatasync
//     4. write DIR/TAG.partial/rank_R.json (sizes, XXH3s, layout hash); fsync
//   commit_checkpoint (rank 0, after a barrier)
//     5. read every rank record; each must match this save's layout (no stale files)
//     6. write DIR/TAG.partial/manifest.json, then checksums.txt (over the manifest and the rank
//        records); fsync each
//     7. CommitTransaction::publish: fsync DIR/TAG.partial; rm -r DIR/TAG if present (unpublished:
//        a save that crashed before step 8, or an old tag being re-saved); rename to DIR/TAG;
//        fsync DIR — DIR/TAG is durable and complete
//     8. publish_latest: DIR/latest.xxh3 (the tag under a checksum, internal/latest_pointer.h), then
//        DIR/latest (the tag, DeepSpeed's plain text), each by publish_pointer: FILE.partial written,
//        fsynced, renamed over FILE, DIR fsynced
// Readers only follow DIR/latest (or an explicit tag), and a tag directory exists only complete.
#include <fmt/format.h>

#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/engine_format/internal/latest_pointer.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/engine_format/internal/rank_file_writer.h"
#include "checkpoint/engine_format/internal/reader_paths.h"
#include "checkpoint/engine_format/internal/state_codec.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

Status check_tag(const std::string& tag) {
  if (tag.empty() || tag == "." || tag == ".." || tag == kLatestFile || tag == kLatestChecksumFile ||
      tag.find_first_of("/ \t\r\n") != std::string::npos || tag.ends_with(".partial")) {
    return invalid_argument(
        fmt::format("checkpoint tag '{}' must be a plain directory name (e.g. global_step100), "
                    "not 'latest' or 'latest.xxh3', without blanks and not ending in '.partial'",
                    tag));
  }
  return {};
}

std::span<const std::byte> text_bytes(const std::string& text) { return std::as_bytes(std::span(text)); }

// One section of a group in a rank file: the piece of part `part` of state `state` that starts at
// partition element `first`, `bytes` long, held in RankData's group_states / group_state_fills
// [g][slot] from byte `begin` of the part.
struct GroupSection {
  uint32_t state;
  uint32_t part;
  size_t slot;
  uint64_t first;
  uint64_t begin;
  uint64_t bytes;
  bool compress;  // zstd when the options' level is > 0
};

// Group g's sections in file order: piece by piece (one piece without piece_elements), in each
// piece the states in order, each state's parts in order.
std::vector<GroupSection> group_sections(const CheckpointManifest& m, uint32_t g, uint64_t piece_elements) {
  const uint64_t partition = partition_numel(m.groups[g], m.zero_stage, m.world_size, m.alignment);
  const uint64_t piece = piece_elements == 0 ? std::max<uint64_t>(partition, 1) : piece_elements;
  std::vector<GroupSection> sections;
  for (uint64_t first = 0; first == 0 || first < partition; first += piece) {
    const uint64_t n = std::min(piece, partition - first);
    size_t slot = 0;
    for (uint32_t s = 0; s < m.groups[g].states.size(); ++s) {
      const std::vector<StatePart> parts = state_parts(m.groups[g].states[s]);
      for (uint32_t p = 0; p < parts.size(); ++p) {
        const uint64_t item = element_size(parts[p].dtype);
        const uint64_t begin = (parts[p].per_block ? first / kStateBlock : first) * item;
        sections.push_back(
            {s, p, slot++, first, begin, part_numel(parts[p], n) * item, part_pays_compression(parts[p])});
      }
    }
  }
  return sections;
}

std::string section_name(const CheckpointManifest& m, uint32_t g, const GroupSection& section) {
  SectionRecord record;
  record.group = g;
  record.state = section.state;
  record.part = section.part;
  return section_label(m, record);
}

// Checks `data` against the sections `rank` must write and their byte sizes.
Status check_rank_data(const CheckpointManifest& m, uint32_t rank, const RankData& data) {
  const bool stores = rank_stores_groups(m.zero_stage, rank);
  for (uint32_t g = 0; g < m.groups.size() && data.piece_elements % kStateBlock != 0; ++g) {
    for (const StateSpec& s : m.groups[g].states) {
      if (s.codec == StateCodec::kBlockwise8) {
        return invalid_argument(fmt::format("rank {}: piece_elements {} must be a multiple of {} (the 8-bit moment "
                                            "blocks of group {} state '{}')",
                                            rank, data.piece_elements, kStateBlock, g, s.name));
      }
    }
  }
  const bool streamed = !data.group_state_fills.empty();
  if (streamed && !data.group_states.empty())
    return invalid_argument(fmt::format("rank {}: give group_states or group_state_fills, not both", rank));
  const size_t given_groups = streamed ? data.group_state_fills.size() : data.group_states.size();
  if (given_groups != (stores ? m.groups.size() : 0)) {
    return invalid_argument(fmt::format("rank {}: {} {}group partitions given, the layout has {}", rank, given_groups,
                                        streamed ? "streamed " : "", stores ? m.groups.size() : 0));
  }
  for (uint32_t g = 0; g < given_groups; ++g) {
    size_t slots = 0;
    for (const StateSpec& s : m.groups[g].states) slots += state_parts(s).size();
    const size_t given = streamed ? data.group_state_fills[g].size() : data.group_states[g].size();
    if (given != slots) {
      return invalid_argument(fmt::format(
          "rank {} group {}: {} sections given, the layout has {} (one per state, two per encoded state)", rank, g,
          given, slots));
    }
    const std::vector<GroupSection> wholes = group_sections(m, g, 0);  // one section per slot
    for (size_t k = 0; k < slots && !streamed; ++k) {
      const GroupSection& whole = wholes[k];
      if (data.group_states[g][k].size() != whole.bytes) {
        return invalid_argument(fmt::format("rank {} {}: {} bytes given, its partition at world size {} is {} bytes",
                                            rank, section_name(m, g, whole), data.group_states[g][k].size(),
                                            m.world_size, whole.bytes));
      }
    }
  }
  if (data.replicated.size() != (rank == 0 ? m.replicated.size() : 0)) {
    return invalid_argument(fmt::format("rank {}: {} replicated tensors given, expected {} (rank 0 stores them all)",
                                        rank, data.replicated.size(), rank == 0 ? m.replicated.size() : 0));
  }
  for (size_t i = 0; i < data.replicated.size(); ++i) {
    if (data.replicated[i].size() != replicated_bytes(m.replicated[i])) {
      return invalid_argument(fmt::format("replicated tensor '{}': {} bytes given, expected {}",
                                          m.replicated[i].spec.name, data.replicated[i].size(),
                                          replicated_bytes(m.replicated[i])));
    }
  }
  return {};
}

Result<RankFileRecord> read_rank_record(fs::FileSystem& fs, const std::string& path, const CheckpointManifest& m,
                                        uint32_t rank) {
  auto text = fs.read_file(path);
  if (!text.ok()) {
    return not_found(
        fmt::format("rank {} has not written its checkpoint file ({} is missing); every rank must call "
                    "write_checkpoint_rank before rank 0 commits",
                    rank, path));
  }
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(fmt::format("{}: rank record is not valid JSON", path));
  TZ_ASSIGN_OR_RETURN(RankFileRecord record, parse_rank_record(j, path));
  if (record.rank != rank || record.layout_hash != layout_hash(m)) {
    return corrupt(
        fmt::format("{}: rank record belongs to another save (different rank or layout); re-run the save", path));
  }
  return record;
}

}  // namespace

Status begin_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                        const CheckpointOptions& options) {
  TZ_RETURN_IF_ERROR(check_tag(tag));
  TZ_RETURN_IF_ERROR(validate_manifest(manifest));
  auto latest = locate_checkpoint(dir, "");
  if (latest.ok() && latest->tag == tag) {
    return invalid_argument(
        fmt::format("checkpoint {}/{} already exists and is the latest; checkpoints are "
                    "immutable: choose a new tag (e.g. global_step{})",
                    dir, tag, manifest.step));
  }
  return CommitTransaction(fs::default_file_system(), dir, tag).begin();
}

Status write_checkpoint_rank(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                             uint32_t rank, const RankData& data, const CheckpointOptions& options) {
  if (rank >= manifest.world_size) {
    return invalid_argument(fmt::format("rank {} is outside world size {}", rank, manifest.world_size));
  }
  TZ_RETURN_IF_ERROR(check_rank_data(manifest, rank, data));
  CommitTransaction txn(fs::default_file_system(), dir, tag);
  TZ_ASSIGN_OR_RETURN(auto engine, nvme::IoEngine::create(nvme::IoConfig{}));
  const bool streamed = !data.group_state_fills.empty();
  const size_t groups = streamed ? data.group_state_fills.size() : data.group_states.size();
  uint64_t raw_bytes = 0;
  for (uint32_t g = 0; g < groups; ++g)
    for (const GroupSection& section : group_sections(manifest, g, data.piece_elements)) raw_bytes += section.bytes;
  for (const auto& bytes : data.replicated) raw_bytes += bytes.size();
  TZ_ASSIGN_OR_RETURN(auto writer,
                      RankFileWriter::create(txn.file_system(), *engine, txn.staging_dir() + "/" + rank_file_name(rank),
                                             raw_bytes, options));
  for (uint32_t g = 0; g < groups; ++g) {
    for (const GroupSection& section : group_sections(manifest, g, data.piece_elements)) {
      SectionRecord record;
      record.group = g;
      record.state = section.state;
      record.part = section.part;
      record.first = section.first;
      TZ_RETURN_IF_ERROR(
          streamed ? writer->add_section(record, section.bytes, data.group_state_fills[g][section.slot], section.compress)
                   : writer->add_section(record, data.group_states[g][section.slot].subspan(section.begin, section.bytes),
                                         section.compress));
    }
  }
  for (uint32_t i = 0; i < data.replicated.size(); ++i) {
    SectionRecord section;
    section.replicated = true;
    section.index = i;
    TZ_RETURN_IF_ERROR(writer->add_section(section, data.replicated[i]));
  }
  RankFileRecord record;
  record.rank = rank;
  record.file = rank_file_name(rank);
  record.rank_state = data.rank_state;
  record.layout_hash = layout_hash(manifest);
  TZ_RETURN_IF_ERROR(writer->finish(record));
  return txn.write_file(rank_record_name(rank), text_bytes(rank_record_to_json(record).dump()));
}

Status commit_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                         const CheckpointOptions& options) {
  TZ_RETURN_IF_ERROR(check_tag(tag));
  fs::FileSystem& fs = fs::default_file_system();
  CommitTransaction txn(fs, dir, tag);
  const std::string& staging = txn.staging_dir();
  StoredManifest stored{manifest, {}};
  for (uint32_t r = 0; r < manifest.world_size; ++r) {
    TZ_ASSIGN_OR_RETURN(RankFileRecord record, read_rank_record(fs, staging + "/" + rank_record_name(r), manifest, r));
    const Result<fs::FileInfo> info = fs.stat(staging + "/" + record.file);
    if (!info.ok() || info->size != record.bytes) {
      return corrupt(fmt::format("{}/{}: rank {} file is missing or not the {} bytes its record says", staging,
                                 record.file, r, record.bytes));
    }
    stored.files.push_back(std::move(record));
  }
  const std::string text = stored_manifest_text(stored);
  TZ_RETURN_IF_ERROR(parse_stored_manifest(text, staging + "/" + kManifestFile).status());
  TZ_RETURN_IF_ERROR(txn.write_file(kManifestFile, text_bytes(text)));
  TZ_ASSIGN_OR_RETURN(const std::string checksums, make_checksum_file(staging, manifest.world_size));
  TZ_RETURN_IF_ERROR(txn.write_file(kChecksumFile, text_bytes(checksums)));
  TZ_RETURN_IF_ERROR(txn.publish(/*replace_tree=*/true));
  return publish_latest(fs, txn.dir(), tag);
}

Status save_checkpoint(const std::string& dir, const std::string& tag, const CheckpointManifest& manifest,
                       std::span<const RankData> ranks, const CheckpointOptions& options) {
  if (ranks.size() != manifest.world_size) {
    return invalid_argument(
        fmt::format("save_checkpoint: {} ranks of data for world size {}", ranks.size(), manifest.world_size));
  }
  TZ_RETURN_IF_ERROR(begin_checkpoint(dir, tag, manifest, options));
  for (uint32_t r = 0; r < ranks.size(); ++r) {
    TZ_RETURN_IF_ERROR(write_checkpoint_rank(dir, tag, manifest, r, ranks[r], options));
  }
  return commit_checkpoint(dir, tag, manifest, options);
}

}  // namespace tierzero::checkpoint
