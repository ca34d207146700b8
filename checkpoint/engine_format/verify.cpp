// verify_checkpoint: the metadata checksums (checksums.txt), whole-file sizes and checksums, then every
// section decoded.
#include <vector>

#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/engine_format/internal/reader_paths.h"
#include "checkpoint/engine_format/internal/section_cursor.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

// Hashes the whole file as stored and compares with the manifest.
Status check_whole_file(const RankFileHandle& file, const RankFileRecord& record) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<std::byte> buffer(8 << 20);
  Status status;
  for (uint64_t offset = 0; offset < record.bytes && status.ok();) {
    const uint64_t n = std::min<uint64_t>(buffer.size(), record.bytes - offset);
    status = file.read_at(offset, std::span(buffer.data(), n), state);
    offset += n;
  }
  const uint64_t got = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  TZ_RETURN_IF_ERROR(status);
  if (got != record.xxh3) {
    return corrupt(
        fmt::format("{}: rank {} checksum mismatch (XXH3 {:016x}, manifest {:016x}); the file is damaged "
                    "— restore it or load an earlier tag",
                    file.path(), record.rank, got, record.xxh3));
  }
  return {};
}

}  // namespace

Result<VerifyReport> verify_checkpoint(const std::string& dir, const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(CheckpointLocation where, locate_checkpoint(dir, tag));
  TZ_ASSIGN_OR_RETURN(StoredManifest stored, load_checked_manifest(where.path));
  VerifyReport report;
  report.path = where.path;
  for (const RankFileRecord& record : stored.files) {
    const std::string path = where.path + "/" + record.file;
    TZ_ASSIGN_OR_RETURN(auto file, RankFileHandle::open(path, record.rank, stored.manifest.world_size, record.bytes));
    TZ_RETURN_IF_ERROR(check_whole_file(*file, record));
    for (const SectionRecord& section : record.sections) {
      SectionCursor cursor(file, section,
                           fmt::format("{}: rank {} section at offset {}", path, record.rank, section.offset));
      TZ_RETURN_IF_ERROR(cursor.finish());
    }
    ++report.files_checked;
    report.bytes_checked += record.bytes;
  }
  return report;
}

}  // namespace tierzero::checkpoint
