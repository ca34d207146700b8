// Normalizers, as tokenizers' normalizers/{unicode,prepend,replace}.rs apply them to each piece of
// text between added tokens.
#include <utf8proc.h>

#include <cstdlib>

#include "text/internal/normalizer.h"
#include "text/internal/utf8.h"

namespace tierzero::text::internal {
namespace {

constexpr const char* kSupported = "supported: NFC, Prepend, Replace, Sequence";

// True when NFC leaves `text` as it is because every code point is one that NFC never changes
// and never composes with a neighbour: below U+0300 (ASCII, Latin-1, Latin Extended-A/B), CJK
// unified ideographs, and the emoji planes. Anything else goes through utf8proc.
bool nfc_identity(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const char32_t cp = next_code_point(text, i);
    const bool stable = cp < 0x300 || (cp >= 0x4E00 && cp < 0xA000) || (cp >= 0x1F300 && cp < 0x1FB00);
    if (!stable) return false;
  }
  return true;
}

void nfc(std::string_view text, std::string& out) {
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {  // only on invalid UTF-8 or out of memory; the text was validated, so keep it
    out.assign(text);
    return;
  }
  out.assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
  std::free(mapped);
}

void replace_all(std::string_view text, std::string_view pattern, std::string_view content, std::string& out) {
  out.clear();
  size_t from = 0;
  for (size_t at = text.find(pattern); at != std::string_view::npos; at = text.find(pattern, from)) {
    out.append(text.substr(from, at - from));
    out.append(content);
    from = at + pattern.size();
  }
  out.append(text.substr(from));
}

}  // namespace

Status Normalizer::add(const nlohmann::json& spec, const std::string& path, std::vector<Step>& steps) {
  const std::string type = spec.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& inner : spec.at("normalizers")) TZ_RETURN_IF_ERROR(add(inner, path, steps));
  } else if (type == "NFC") {
    steps.push_back({Kind::kNfc, "", ""});
  } else if (type == "Prepend") {
    steps.push_back({Kind::kPrepend, "", spec.at("prepend").get<std::string>()});
  } else if (type == "Replace") {
    const nlohmann::json& pattern = spec.at("pattern");
    if (!pattern.contains("String")) {
      return unsupported(path + ": normalizer Replace with pattern " + pattern.dump() +
                         " is not supported (only {\"String\": ...} patterns)");
    }
    const auto from = pattern.at("String").get<std::string>();
    if (from.empty()) return corrupt(path + ": normalizer Replace has an empty pattern");
    steps.push_back({Kind::kReplace, from, spec.at("content").get<std::string>()});
  } else {
    return unsupported(path + ": normalizer type \"" + type + "\" is not supported (" + kSupported + ")");
  }
  return {};
}

Result<Normalizer> Normalizer::parse(const nlohmann::json& spec, const std::string& path) {
  Normalizer normalizer;
  if (!spec.is_null()) TZ_RETURN_IF_ERROR(add(spec, path, normalizer.steps_));
  return normalizer;
}

std::string_view Normalizer::apply(std::string_view text, std::string& storage) const {
  std::string scratch;
  std::string_view current = text;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
        if (nfc_identity(current)) continue;
        nfc(current, scratch);
        break;
      case Kind::kPrepend:
        if (current.empty()) continue;
        scratch.assign(step.content);
        scratch.append(current);
        break;
      case Kind::kReplace:
        if (current.find(step.pattern) == std::string_view::npos) continue;
        replace_all(current, step.pattern, step.content, scratch);
        break;
    }
    storage.swap(scratch);
    current = storage;
  }
  return current;
}

}  // namespace tierzero::text::internal
