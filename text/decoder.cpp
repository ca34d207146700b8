// Decoders, as tokenizers' decoders/*.rs decode_chain() a list of tokens, then join what is left.
#include <cctype>
#include <cstdio>

#include "text/internal/byte_level.h"
#include "text/internal/decoder.h"
#include "text/internal/utf8.h"

namespace tierzero::text::internal {
namespace {

constexpr const char* kSupported = "supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence";

void replace_all(std::string& s, const std::string& pattern, const std::string& content) {
  std::string out;
  size_t from = 0;
  for (size_t at = s.find(pattern); at != std::string::npos; at = s.find(pattern, from)) {
    out.append(s, from, at - from);
    out.append(content);
    from = at + pattern.size();
  }
  if (from == 0) return;
  out.append(s, from);
  s.swap(out);
}

// ByteLevel: every token's characters back to bytes (a token with other characters stays as it
// is), then the bytes as UTF-8 with invalid sequences replaced. One token results.
std::vector<std::string> byte_level(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const auto& token : tokens) {
    const auto raw = byte_level_to_bytes(token);
    bytes += raw ? *raw : token;
  }
  std::string text;
  append_lossy_utf8(text, bytes);
  return {text};
}

// ByteFallback: runs of <0xNN> tokens become their bytes when those are valid UTF-8, else one
// U+FFFD per byte.
std::vector<std::string> byte_fallback(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string run;
  size_t run_tokens = 0;
  const auto flush = [&] {
    if (run_tokens == 0) return;
    if (find_invalid_utf8(run) == std::string::npos) {
      out.push_back(run);
    } else {
      for (size_t i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
    run_tokens = 0;
  };
  for (const auto& token : tokens) {
    unsigned value = 0;
    const bool is_byte = token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
                         std::isxdigit(static_cast<unsigned char>(token[3])) &&
                         std::isxdigit(static_cast<unsigned char>(token[4])) &&
                         std::sscanf(token.c_str() + 3, "%2x", &value) == 1;
    if (is_byte) {
      run += static_cast<char>(value);
      ++run_tokens;
      continue;
    }
    flush();
    out.push_back(token);
  }
  flush();
  return out;
}

// Strip: up to `start` leading and `stop` trailing copies of the character, from each token.
void strip(std::string& token, const std::string& c, size_t start, size_t stop) {
  size_t front = 0, back = token.size();
  for (size_t i = 0; i < start && token.compare(front, c.size(), c) == 0 && front + c.size() <= back; ++i)
    front += c.size();
  for (size_t i = 0; i < stop && back >= front + c.size() && token.compare(back - c.size(), c.size(), c) == 0; ++i)
    back -= c.size();
  token = token.substr(front, back - front);
}

}  // namespace

Status Decoder::add(const nlohmann::json& spec, const std::string& path, Decoder& out) {
  const std::string type = spec.at("type").get<std::string>();
  Step step{};
  if (type == "Sequence") {
    for (const auto& inner : spec.at("decoders")) TZ_RETURN_IF_ERROR(add(inner, path, out));
    return {};
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "Replace") {
    const nlohmann::json& pattern = spec.at("pattern");
    if (!pattern.contains("String") || pattern.at("String").get<std::string>().empty()) {
      return unsupported(path + ": decoder Replace with pattern " + pattern.dump() +
                         " is not supported (only non-empty {\"String\": ...} patterns)");
    }
    step.kind = Kind::kReplace;
    step.pattern = pattern.at("String").get<std::string>();
    step.content = spec.at("content").get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.pattern = spec.at("content").get<std::string>();
    step.start = spec.at("start").get<size_t>();
    step.stop = spec.at("stop").get<size_t>();
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.pattern = spec.at("replacement").get<std::string>();
    if (spec.contains("prepend_scheme")) {
      step.prepend = spec.at("prepend_scheme").get<std::string>() != "never";
    } else {
      step.prepend = !spec.contains("add_prefix_space") || spec.at("add_prefix_space").get<bool>();
    }
  } else {
    return unsupported(path + ": decoder type \"" + type + "\" is not supported (" + kSupported + ")");
  }
  out.steps_.push_back(std::move(step));
  return {};
}

Result<Decoder> Decoder::parse(const nlohmann::json& spec, const std::string& path) {
  Decoder decoder;
  if (!spec.is_null()) {
    TZ_RETURN_IF_ERROR(add(spec, path, decoder));
    decoder.none_ = false;
  }
  return decoder;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel: tokens = byte_level(tokens); break;
      case Kind::kReplace:
        for (auto& token : tokens) replace_all(token, step.pattern, step.content);
        break;
      case Kind::kByteFallback: tokens = byte_fallback(tokens); break;
      case Kind::kFuse: {
        std::string fused;
        for (const auto& token : tokens) fused += token;
        tokens = {fused};
        break;
      }
      case Kind::kStrip:
        for (auto& token : tokens) strip(token, step.pattern, step.start, step.stop);
        break;
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // The first token loses every replacement character when a prefix was prepended.
          replace_all(tokens[i], step.pattern, i == 0 && step.prepend ? "" : " ");
        }
        break;
    }
  }
  std::string text;
  for (const auto& token : tokens) text += token;
  return text;
}

}  // namespace tierzero::text::internal
