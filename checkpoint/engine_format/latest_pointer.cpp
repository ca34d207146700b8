// DIR/latest.xxh3 then DIR/latest written; the two read together (internal/latest_pointer.h).
#include "checkpoint/engine_format/internal/latest_pointer.h"

#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

constexpr const char* kHeaderLine = "tierzero-latest 1\n";
// How to pick a checkpoint when `latest` cannot: the commands that read one take --tag; train
// --resume follows DIR/latest, so there the tag goes into that file.
constexpr const char* kChooseCheckpoint =
    "pass --tag TAG to choose a checkpoint (convert, checkpoint), or for train --resume write TAG into DIR/latest";

std::string body_text(const LatestRecord& record) {
  std::string text = kHeaderLine;
  text += "tag " + record.tag + "\n";
  if (!record.previous.empty()) text += "previous " + record.previous + "\n";
  return text;
}

// `text` without leading and trailing blanks and line ends (DeepSpeed writes the tag bare; people
// add a newline).
std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

bool is_tag_name(const std::string& name) {
  return !name.empty() && name.find_first_of("/\n\r\t ") == std::string::npos;
}

// The value of line `key VALUE` starting at `pos` of `text` (advancing `pos`), or nullopt.
std::optional<std::string> field(const std::string& text, size_t& pos, std::string_view key) {
  const size_t end = text.find('\n', pos);
  if (end == std::string::npos) return std::nullopt;
  const std::string_view line(text.data() + pos, end - pos);
  if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ' ') return std::nullopt;
  pos = end + 1;
  return std::string(line.substr(key.size() + 1));
}

// complete_latest on `fs` (declared in engine_checkpoint.h with the default file system).
Status complete_latest_on(fs::FileSystem& fs, const std::string& dir) {
  Result<std::string> record_text = read_text_file(dir + "/" + kLatestChecksumFile);
  if (!record_text.ok()) return record_text.status().code() == ErrorCode::kNotFound ? Status() : record_text.status();
  TZ_ASSIGN_OR_RETURN(const std::string tag, read_latest_tag(dir));
  Result<std::string> latest = read_text_file(dir + "/" + kLatestFile);
  if (latest.ok() && trimmed(*latest) == tag) return Status();
  return publish_pointer(fs, dir, kLatestFile, tag);
}

}  // namespace

std::string latest_record_text(const LatestRecord& record) {
  const std::string body = body_text(record);
  return body + fmt::format("self {:016x}\n", XXH3_64bits(body.data(), body.size()));
}

Result<LatestRecord> parse_latest_record(const std::string& text, const std::string& path) {
  const auto damaged = [&] {
    return corrupt(fmt::format("{} is damaged (it does not check out); {}, or remove {} to follow latest's text", path,
                               kChooseCheckpoint, path));
  };
  if (!text.starts_with(kHeaderLine)) return damaged();
  size_t pos = std::string_view(kHeaderLine).size();
  LatestRecord record;
  std::optional<std::string> tag = field(text, pos, "tag");
  if (!tag) return damaged();
  record.tag = *tag;
  if (std::optional<std::string> previous = field(text, pos, "previous")) record.previous = *previous;
  if (!is_tag_name(record.tag) || latest_record_text(record) != text) return damaged();
  return record;
}

Status publish_latest(fs::FileSystem& fs, const std::string& dir, const std::string& tag) {
  // A move a crash stopped is finished first, so `previous` is the tag readers were following
  // (found by real kills: a run resumed from such a directory recorded the older tag). A damaged
  // pair is not repaired: this save replaces both files.
  const Status completed = complete_latest_on(fs, dir);
  if (!completed.ok() && completed.code() != ErrorCode::kCorrupt) return completed;
  const std::string latest_path = dir + "/" + kLatestFile;
  LatestRecord record{.tag = tag, .previous = ""};
  if (fs.stat(latest_path).ok()) {
    TZ_ASSIGN_OR_RETURN(const std::string text, fs.read_file(latest_path));
    if (is_tag_name(trimmed(text))) record.previous = trimmed(text);
  }
  TZ_RETURN_IF_ERROR(publish_pointer(fs, dir, kLatestChecksumFile, latest_record_text(record)));
  return publish_pointer(fs, dir, kLatestFile, tag);
}

Result<std::string> read_latest_tag(const std::string& dir) {
  const std::string latest_path = dir + "/" + kLatestFile;
  const std::string record_path = dir + "/" + kLatestChecksumFile;
  Result<std::string> latest = read_text_file(latest_path);
  Result<std::string> record_text = read_text_file(record_path);
  if (!record_text.ok() && record_text.status().code() != ErrorCode::kNotFound) return record_text.status();
  if (!latest.ok() && latest.status().code() != ErrorCode::kNotFound) return latest.status();
  const std::string named = latest.ok() ? trimmed(*latest) : "";
  if (!record_text.ok()) {
    if (!latest.ok()) {
      return not_found(
          fmt::format("{} does not exist: {} holds no committed checkpoint ({})", latest_path, dir, kChooseCheckpoint));
    }
    if (!is_tag_name(named)) {
      return corrupt(fmt::format("{} holds '{}', not a tag name; {}", latest_path, named, kChooseCheckpoint));
    }
    return named;
  }
  TZ_ASSIGN_OR_RETURN(const LatestRecord record, parse_latest_record(*record_text, record_path));
  if (named == record.tag || named == record.previous) return record.tag;
  return corrupt(fmt::format(
      "{} holds '{}' but {} (written with it) says the latest checkpoint is '{}'{}: latest is damaged or was "
      "edited; {}, or remove {} to follow latest's text",
      latest_path, named, record_path, record.tag,
      record.previous.empty() ? "" : fmt::format(" (before it '{}')", record.previous), kChooseCheckpoint,
      record_path));
}

Status complete_latest(const std::string& dir) { return complete_latest_on(fs::default_file_system(), dir); }

}  // namespace tierzero::checkpoint
