// verify_checkpoint: the metadata checksums (checksums.txt), whole-file sizes and checksums, then every
// section decoded (a whole-file mismatch names the damaged section), and the scales of 8-bit
// moments checked (finite, not negative: what an encoder writes).
#include <cmath>
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

// A kBlockwise8 state's scales section: each scale is a block's absmax, finite and >= 0.
Status check_scales(SectionCursor& cursor, const SectionRecord& section, const std::string& what) {
  std::vector<float> scales(std::min<uint64_t>(section.raw_bytes, 4 << 20) / sizeof(float));
  for (uint64_t done = 0; done < section.raw_bytes;) {
    const uint64_t n = std::min<uint64_t>(scales.size(), (section.raw_bytes - done) / sizeof(float));
    TZ_RETURN_IF_ERROR(cursor.read(done, std::as_writable_bytes(std::span(scales).first(n))));
    for (uint64_t i = 0; i < n; ++i) {
      if (!(scales[i] >= 0.0f) || std::isinf(scales[i])) {
        return corrupt(fmt::format("{}: scale {} is {}, not a block's absmax (finite, >= 0); the section is damaged "
                                   "— restore the file or load an earlier tag",
                                   what, done / sizeof(float) + i, scales[i]));
      }
    }
    done += n * sizeof(float);
  }
  return {};
}

// Reads every section of a rank file to its end (checksums), checking 8-bit moment scales.
Status check_sections(const std::shared_ptr<RankFileHandle>& file, const CheckpointManifest& m,
                      const RankFileRecord& record) {
  for (const SectionRecord& section : record.sections) {
    const std::string what = fmt::format("{}: rank {} {} (section at offset {})", file->path(), record.rank,
                                         section_label(m, section), section.offset);
    SectionCursor cursor(file, section, what);
    const bool scales = !section.replicated && state_parts(m.groups[section.group].states[section.state])[section.part]
                                                       .name == "scales";
    if (scales) TZ_RETURN_IF_ERROR(check_scales(cursor, section, what));
    TZ_RETURN_IF_ERROR(cursor.finish());
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
    const Status whole = check_whole_file(*file, record);
    const Status sections = check_sections(file, stored.manifest, record);
    if (whole.code() == ErrorCode::kCorrupt && !sections.ok()) return corrupt(whole.message() + "; the damage: " + sections.message());
    TZ_RETURN_IF_ERROR(whole);
    TZ_RETURN_IF_ERROR(sections);
    ++report.files_checked;
    report.bytes_checked += record.bytes;
  }
  return report;
}

}  // namespace tierzero::checkpoint
