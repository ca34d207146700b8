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

// The sections `rank` must write, with their expected byte sizes; checks `data` against them.
Status check_rank_data(const CheckpointManifest& m, uint32_t rank, const RankData& data) {
  const bool stores = rank_stores_groups(m.zero_stage, rank);
  if (!data.group_state_fills.empty()) {
    if (!data.group_states.empty())
      return invalid_argument(fmt::format("rank {}: give group_states or group_state_fills, not both", rank));
    if (data.group_state_fills.size() != (stores ? m.groups.size() : 0))
      return invalid_argument(fmt::format("rank {}: {} streamed group partitions given, the layout has {}", rank,
                                          data.group_state_fills.size(), stores ? m.groups.size() : 0));
    for (size_t g = 0; g < data.group_state_fills.size(); ++g)
      if (data.group_state_fills[g].size() != m.groups[g].states.size())
        return invalid_argument(fmt::format("rank {} group {}: {} streamed states given, the layout has {}", rank, g,
                                            data.group_state_fills[g].size(), m.groups[g].states.size()));
  } else if (data.group_states.size() != (stores ? m.groups.size() : 0)) {
    return invalid_argument(fmt::format("rank {}: {} group partitions given, the layout has {}", rank,
                                        data.group_states.size(), stores ? m.groups.size() : 0));
  }
  for (size_t g = 0; g < data.group_states.size(); ++g) {
    if (data.group_states[g].size() != m.groups[g].states.size()) {
      return invalid_argument(fmt::format("rank {} group {}: {} states given, the layout has {}", rank, g,
                                          data.group_states[g].size(), m.groups[g].states.size()));
    }
    for (size_t s = 0; s < data.group_states[g].size(); ++s) {
      const uint64_t want = group_state_bytes(m, g, s);
      if (data.group_states[g][s].size() != want) {
        return invalid_argument(
            fmt::format("rank {} group {} state '{}': {} bytes given, its partition at world size "
                        "{} is {} bytes",
                        rank, g, m.groups[g].states[s].name, data.group_states[g][s].size(), m.world_size, want));
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
  uint64_t raw_bytes = 0;
  for (const auto& states : data.group_states) {
    for (const auto& bytes : states) raw_bytes += bytes.size();
  }
  for (size_t g = 0; g < data.group_state_fills.size(); ++g)
    for (size_t s = 0; s < data.group_state_fills[g].size(); ++s) raw_bytes += group_state_bytes(manifest, g, s);
  for (const auto& bytes : data.replicated) raw_bytes += bytes.size();
  TZ_ASSIGN_OR_RETURN(auto writer,
                      RankFileWriter::create(txn.file_system(), *engine, txn.staging_dir() + "/" + rank_file_name(rank),
                                             raw_bytes, options));
  for (uint32_t g = 0; g < data.group_states.size(); ++g) {
    for (uint32_t s = 0; s < data.group_states[g].size(); ++s) {
      SectionRecord section;
      section.group = g;
      section.state = s;
      TZ_RETURN_IF_ERROR(writer->add_section(section, data.group_states[g][s]));
    }
  }
  for (uint32_t g = 0; g < data.group_state_fills.size(); ++g) {
    for (uint32_t s = 0; s < data.group_state_fills[g].size(); ++s) {
      SectionRecord section;
      section.group = g;
      section.state = s;
      TZ_RETURN_IF_ERROR(writer->add_section(section, group_state_bytes(manifest, g, s), data.group_state_fills[g][s]));
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
