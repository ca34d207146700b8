// verify_checkpoint: whole-file sizes and checksums, then every section decoded.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "checkpoint/engine_checkpoint.h"
#include "checkpoint/manifest_io.h"
#include "checkpoint/section_cursor.h"

namespace tierzero::checkpoint {
namespace {

Status check_whole_file(const std::string& path, const RankFileRecord& record, uint32_t world_size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return not_found(fmt::format("missing rank file {} (rank {} of world size {}): the checkpoint is incomplete; "
                                 "restore the file or load an earlier tag",
                                 path, record.rank, world_size));
  }
  if (static_cast<uint64_t>(st.st_size) != record.bytes) {
    return corrupt(fmt::format("{}: rank {} file is {} bytes but the manifest records {}; it is truncated or was "
                               "replaced — restore it or load an earlier tag",
                               path, record.rank, st.st_size, record.bytes));
  }
  TZ_ASSIGN_OR_RETURN(auto file, RankFileHandle::open(path, record.rank, world_size));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::vector<std::byte> buffer(8 << 20);
  Status status;
  for (uint64_t offset = 0; offset < record.bytes && status.ok();) {
    const uint64_t n = std::min<uint64_t>(buffer.size(), record.bytes - offset);
    status = file->read_at(offset, std::span(buffer.data(), n));
    XXH3_64bits_update(state, buffer.data(), n);
    offset += n;
  }
  const uint64_t got = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  TZ_RETURN_IF_ERROR(status);
  if (got != record.xxh3) {
    return corrupt(fmt::format("{}: rank {} checksum mismatch (XXH3 {:016x}, manifest {:016x}); the file is damaged "
                               "— restore it or load an earlier tag",
                               path, record.rank, got, record.xxh3));
  }
  return {};
}

}  // namespace

Result<VerifyReport> verify_checkpoint(const std::string& dir, const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(auto reader, CheckpointReader::open(dir, tag));
  VerifyReport report;
  report.path = reader->path();
  auto text = read_text_file(reader->path() + "/" + kManifestFile);
  TZ_RETURN_IF_ERROR(text.status());
  TZ_ASSIGN_OR_RETURN(StoredManifest stored, parse_stored_manifest(*text, reader->path() + "/" + kManifestFile));
  for (const RankFileRecord& record : stored.files) {
    const std::string path = reader->path() + "/" + record.file;
    TZ_RETURN_IF_ERROR(check_whole_file(path, record, stored.manifest.world_size));
    TZ_ASSIGN_OR_RETURN(auto file, RankFileHandle::open(path, record.rank, stored.manifest.world_size));
    for (const SectionRecord& section : record.sections) {
      SectionCursor cursor(file, section, fmt::format("{}: rank {} section at offset {}", path, record.rank,
                                                      section.offset));
      TZ_RETURN_IF_ERROR(cursor.finish());
    }
    ++report.files_checked;
    report.bytes_checked += record.bytes;
  }
  return report;
}

}  // namespace tierzero::checkpoint
