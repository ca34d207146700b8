// Private: DIR/latest, and DIR/latest.xxh3 that puts it under a checksum.
//
// `latest` stays DeepSpeed's plain tag text (DeepSpeed, scripts and people read it). Beside it,
// latest.xxh3 records the same tag under an XXH3-64, with the tag `latest` held before:
//
//   tierzero-latest 1
//   tag global_step200
//   previous global_step100        absent when there was no `latest` before
//   self 0123456789abcdef          XXH3-64 of every byte above this line
// Every line ends with '\n'; a reader accepts only the exact text this writer produces.
//
// A save writes latest.xxh3 first, then `latest`, each by the commit protocol's pointer step
// (storage.h publish_pointer), so a crash between the two leaves latest.xxh3 new and `latest` at
// the tag latest.xxh3 calls `previous`. Readers take latest.xxh3's tag whenever `latest` holds
// that tag or `previous`; any other `latest` is refused, so a flipped bit in either file never
// sends a reader to another checkpoint that happens to exist.
#pragma once

#include <string>

#include "common/common.h"
#include "fs/file_system.h"

namespace tierzero::checkpoint {

inline constexpr const char* kLatestChecksumFile = "latest.xxh3";

struct LatestRecord {
  std::string tag;
  std::string previous;  // empty: there was no `latest`
  bool operator==(const LatestRecord&) const = default;
};

// The whole text of latest.xxh3 for `record`, self line included.
std::string latest_record_text(const LatestRecord& record);

// Parses latest.xxh3 `text` (named `path` in errors). kCorrupt unless the text is exactly what
// latest_record_text writes for the record it holds.
Result<LatestRecord> parse_latest_record(const std::string& text, const std::string& path);

// Points DIR/latest at `tag`, durably: a move a crash stopped is finished first (complete_latest),
// then DIR/latest.xxh3 (previous = the tag DIR/latest holds now), then DIR/latest. Errors name the
// file.
Status publish_latest(fs::FileSystem& fs, const std::string& dir, const std::string& tag);

// The tag DIR's pointer names: latest.xxh3's tag when `latest` agrees with it (holds its tag, or
// its previous tag: a save stopped between the two files); DIR/latest's text when there is no
// latest.xxh3 (checkpoints written before it, or by hand). kNotFound when neither file exists;
// kCorrupt, naming the file and the way out (--tag), when latest.xxh3 is damaged, `latest` names
// another tag, or the text is not a tag name.
Result<std::string> read_latest_tag(const std::string& dir);

}  // namespace tierzero::checkpoint
