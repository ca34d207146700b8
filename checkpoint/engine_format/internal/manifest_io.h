// Private: the on-disk records of an engine checkpoint and their JSON forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kLatestFile = "latest";
inline constexpr const char* kManifestFormat = "tierzero-checkpoint";
// Version 2 adds checksums.txt (checksum_file.h) over the metadata; version 1 is still read.
// Version 3 adds encoded states (StateSpec::codec, two sections each) and parts stored in pieces
// (SectionRecord::first): a manifest with either is written as version 3, so a reader from before refuses it by its version instead of misreading
// it; a manifest without is still written as version 2, which those readers read.
inline constexpr int kManifestVersion = 3;
inline constexpr int kEncodedStatesVersion = 3;
inline constexpr int kOldestManifestVersion = 1;

// "rank_00003.bin" / "rank_00003.json".
std::string rank_file_name(uint32_t rank);
std::string rank_record_name(uint32_t rank);

// One stored section of a rank file: a group state partition or a replicated tensor.
struct SectionRecord {
  bool replicated = false;  // false: group state (group, state); true: replicated tensor `index`
  uint32_t group = 0;
  uint32_t state = 0;
  uint32_t part = 0;   // of the state's encoding (state_parts()); 0 for a kRaw state
  uint64_t first = 0;  // the partition element this piece of the part starts at (RankData::piece_elements)
  uint32_t index = 0;
  uint64_t offset = 0;        // in the rank file
  uint64_t stored_bytes = 0;  // on disk (compressed size when compressed)
  uint64_t raw_bytes = 0;     // after decompression
  bool compressed = false;    // one zstd frame
  uint64_t xxh3 = 0;          // XXH3-64 of the raw bytes
};

struct RankFileRecord {
  uint32_t rank = 0;
  std::string file;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the whole file as stored
  std::vector<SectionRecord> sections;
  nlohmann::json rank_state;
  uint64_t layout_hash = 0;  // layout_hash(manifest) of the save that wrote it
};

// A manifest as read from disk: the layout and training state plus one record per rank.
struct StoredManifest {
  CheckpointManifest manifest;
  std::vector<RankFileRecord> files;  // index = rank
};

// Bytes of part `part` of one rank's partition of a group state at the manifest's own world size.
uint64_t group_part_bytes(const CheckpointManifest& manifest, size_t group, size_t state, size_t part);
// How errors name a section: "group 0 state 'exp_avg'", "group 0 state 'exp_avg' part 'scales'",
// "tensor 'NAME'". `section` must refer to the manifest (check_sections passed).
std::string section_label(const CheckpointManifest& manifest, const SectionRecord& section);
// The format_version `manifest` is written as: kEncodedStatesVersion with an encoded state, else 2.
int manifest_version(const CheckpointManifest& manifest);
// The same for a stored manifest, whose rank files may also hold parts in pieces (version 3 too).
int stored_version(const StoredManifest& stored);
// Bytes of a replicated tensor.
uint64_t replicated_bytes(const ReplicatedTensor& tensor);

// XXH3-64 of the manifest's canonical JSON; ties rank records to the save that wrote them.
uint64_t layout_hash(const CheckpointManifest& manifest);

nlohmann::json manifest_to_json(const CheckpointManifest& manifest);
nlohmann::json rank_record_to_json(const RankFileRecord& record);
std::string stored_manifest_text(const StoredManifest& stored);

// Parse and validate; errors are kCorrupt naming `path` and the field.
Result<RankFileRecord> parse_rank_record(const nlohmann::json& j, const std::string& path);
Result<StoredManifest> parse_stored_manifest(const std::string& text, const std::string& path);

// Reads a whole small file (manifest, record, latest) into a string; errors name the path.
Result<std::string> read_text_file(const std::string& path);

}  // namespace tierzero::checkpoint
