// checksums.txt: written after the manifest, checked before any metadata is believed.
#include "checkpoint/engine_format/internal/checksum_file.h"

#include <sstream>

#include <fmt/format.h>

#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

constexpr const char* kHeaderLine = "tierzero-checksums 1\n";

uint64_t xxh3_of(const std::string& text) { return XXH3_64bits(text.data(), text.size()); }

std::string body_text(const std::vector<ChecksumEntry>& entries) {
  std::string text = kHeaderLine;
  for (const ChecksumEntry& e : entries) text += fmt::format("{} {} {:016x}\n", e.name, e.bytes, e.xxh3);
  return text;
}

// The names a checkpoint of `world_size` ranks must list, in order.
std::vector<std::string> expected_names(uint32_t world_size) {
  std::vector<std::string> names{kManifestFile};
  for (uint32_t r = 0; r < world_size; ++r) names.push_back(rank_record_name(r));
  return names;
}

Status check_file(const std::string& tag_dir, const ChecksumEntry& e, const std::string& checksum_path,
                  std::string* content) {
  const std::string path = tag_dir + "/" + e.name;
  auto text = read_text_file(path);
  if (!text.ok()) {
    return corrupt(
        fmt::format("{} is missing but {} lists it; the checkpoint is damaged — restore the file or load "
                    "an earlier tag",
                    path, checksum_path));
  }
  const uint64_t got = xxh3_of(*text);
  if (text->size() != e.bytes || got != e.xxh3) {
    return corrupt(
        fmt::format("{}: checksum mismatch ({} bytes, XXH3 {:016x}; {} says {} bytes, {:016x}): the file "
                    "is damaged — restore it or load an earlier tag",
                    path, text->size(), got, checksum_path, e.bytes, e.xxh3));
  }
  if (content != nullptr) *content = std::move(*text);
  return {};
}

// The format_version a manifest text claims, or 0 when it cannot be read.
int claimed_version(const std::string& manifest_text) {
  auto j = nlohmann::json::parse(manifest_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("format_version") || !j["format_version"].is_number_integer()) return 0;
  return j["format_version"].get<int>();
}

}  // namespace

std::string checksum_file_text(const std::vector<ChecksumEntry>& entries) {
  const std::string body = body_text(entries);
  return body + fmt::format("self {:016x}\n", xxh3_of(body));
}

Result<std::vector<ChecksumEntry>> parse_checksum_file(const std::string& text, const std::string& path) {
  std::vector<ChecksumEntry> entries;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header, checked by the comparison below
  while (std::getline(in, line) && !line.starts_with("self ")) {
    std::istringstream fields(line);
    ChecksumEntry e;
    std::string hex;
    if (!(fields >> e.name >> e.bytes >> hex) || hex.size() != 16 ||
        hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return corrupt(
          fmt::format("{}: line {} is not 'NAME BYTES XXH3'; the file is damaged — restore it or load "
                      "an earlier tag",
                      path, entries.size() + 2));
    }
    e.xxh3 = std::stoull(hex, nullptr, 16);
    entries.push_back(std::move(e));
  }
  if (checksum_file_text(entries) != text) {
    return corrupt(
        fmt::format("{}: the checksum file does not check out (damaged header, line or self checksum); "
                    "restore it or load an earlier tag",
                    path));
  }
  return entries;
}

Result<std::string> make_checksum_file(const std::string& tag_dir, uint32_t world_size) {
  std::vector<ChecksumEntry> entries;
  for (const std::string& name : expected_names(world_size)) {
    TZ_ASSIGN_OR_RETURN(std::string text, read_text_file(tag_dir + "/" + name));
    entries.push_back({name, text.size(), xxh3_of(text)});
  }
  return checksum_file_text(entries);
}

Result<StoredManifest> load_checked_manifest(const std::string& tag_dir) {
  const std::string manifest_path = tag_dir + "/" + kManifestFile;
  const std::string checksum_path = tag_dir + "/" + kChecksumFile;
  auto manifest_text = read_text_file(manifest_path);
  if (!manifest_text.ok()) {
    return not_found(fmt::format("{} is missing: {} is not a complete tierzero checkpoint", manifest_path, tag_dir));
  }
  auto checksum_text = read_text_file(checksum_path);
  if (!checksum_text.ok()) {
    if (claimed_version(*manifest_text) == 1) return parse_stored_manifest(*manifest_text, manifest_path);
    return corrupt(
        fmt::format("{} is missing: the checksum over {}'s metadata is gone, so the checkpoint cannot be "
                    "trusted — restore the file or load an earlier tag",
                    checksum_path, tag_dir));
  }
  TZ_ASSIGN_OR_RETURN(auto entries, parse_checksum_file(*checksum_text, checksum_path));
  if (entries.empty() || entries[0].name != kManifestFile) {
    return corrupt(fmt::format("{}: does not list {} first; the file is damaged — restore it or load an earlier tag",
                               checksum_path, kManifestFile));
  }
  std::string checked_text;
  TZ_RETURN_IF_ERROR(check_file(tag_dir, entries[0], checksum_path, &checked_text));
  TZ_ASSIGN_OR_RETURN(StoredManifest stored, parse_stored_manifest(checked_text, manifest_path));
  const std::vector<std::string> names = expected_names(stored.manifest.world_size);
  if (entries.size() != names.size()) {
    return corrupt(fmt::format("{}: lists {} files, a checkpoint of {} ranks has {}; the file is damaged",
                               checksum_path, entries.size(), stored.manifest.world_size, names.size()));
  }
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].name != names[i]) {
      return corrupt(fmt::format("{}: line {} names '{}', expected '{}'; the file is damaged", checksum_path, i + 2,
                                 entries[i].name, names[i]));
    }
    TZ_RETURN_IF_ERROR(check_file(tag_dir, entries[i], checksum_path, nullptr));
  }
  return stored;
}

}  // namespace tierzero::checkpoint
