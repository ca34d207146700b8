// Private: DIR/TAG/checksums.txt, the checksum over an engine checkpoint's metadata. The rank
// files' bytes are under the XXH3s in manifest.json; this file puts manifest.json and every
// rank_NNNNN.json under a checksum too, and itself under one, so no byte of a checkpoint is read
// unchecked (format_version 2; version-1 checkpoints have no such file and are read as before).
//
//   tierzero-checksums 1
//   manifest.json 4711 0123456789abcdef        name, size in bytes, XXH3-64 (16 hex digits)
//   rank_00000.json 815 fedcba9876543210       one line per rank, in rank order
//   self 89abcdef01234567                      XXH3-64 of every byte above this line
// Every line ends with '\n'. A reader accepts only the exact text this writer produces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/engine_format/internal/manifest_io.h"

namespace tierzero::checkpoint {

inline constexpr const char* kChecksumFile = "checksums.txt";

// The text of TAG_DIR/checksums.txt for a checkpoint of `world_size` ranks: re-reads
// TAG_DIR/manifest.json and TAG_DIR/rank_R.json for R < world_size from disk (what a reader will
// see) and hashes them. The caller writes it durably beside them. Errors name the unreadable file.
Result<std::string> make_checksum_file(const std::string& tag_dir, uint32_t world_size);

// Reads TAG_DIR/manifest.json, checks it against TAG_DIR/checksums.txt, parses and validates it,
// then checks every rank record the checksum file must list. A version-1 manifest needs no
// checksum file; from version 2 on a missing one is kCorrupt. Errors: kNotFound when
// manifest.json is missing, kCorrupt naming the file, its size or checksum and what to do.
Result<StoredManifest> load_checked_manifest(const std::string& tag_dir);

// One file line: a file of the tag folder, its size and XXH3-64.
struct ChecksumEntry {
  std::string name;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
  bool operator==(const ChecksumEntry&) const = default;
};

// The whole text of a checksum file listing `entries` in order, self line included.
std::string checksum_file_text(const std::vector<ChecksumEntry>& entries);

// Parses checksum file `text` (named `path` in errors). kCorrupt unless the text is exactly what
// checksum_file_text writes for the entries it lists (so its self line matches).
Result<std::vector<ChecksumEntry>> parse_checksum_file(const std::string& text, const std::string& path);

}  // namespace tierzero::checkpoint
