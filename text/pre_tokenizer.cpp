// Pre-tokenizers, as tokenizers' pre_tokenizers/{split,byte_level,metaspace,sequence}.rs split a
// PreTokenizedString: each step splits every current piece, and empty pieces are dropped.
#include "text/internal/pre_tokenizer.h"

namespace tierzero::text::internal {
namespace {

constexpr const char* kSupported = "supported: Split, ByteLevel, Metaspace, Sequence";
// ByteLevel's own regex when use_regex is true (GPT-2's).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool flag(const nlohmann::json& spec, const char* key, bool fallback) {
  const auto it = spec.find(key);
  return it == spec.end() || it->is_null() ? fallback : it->get<bool>();
}

}  // namespace

Status PreTokenizer::add(const nlohmann::json& spec, const std::string& path, PreTokenizer& out) {
  const std::string type = spec.at("type").get<std::string>();
  if (out.byte_level_) {
    return unsupported(path + ": pre_tokenizer type \"" + type +
                       "\" after ByteLevel is not supported (ByteLevel must be the last step)");
  }
  Step step{};
  if (type == "Sequence") {
    for (const auto& inner : spec.at("pretokenizers")) TZ_RETURN_IF_ERROR(add(inner, path, out));
    return {};
  } else if (type == "Split") {
    const std::string behavior = spec.at("behavior").get<std::string>();
    if (behavior != "Isolated" || flag(spec, "invert", false)) {
      return unsupported(path + ": pre_tokenizer Split with behavior \"" + behavior + "\"" +
                         (flag(spec, "invert", false) ? " and invert" : "") +
                         " is not supported (only Isolated, not inverted: Llama 3 / Qwen2)");
    }
    const nlohmann::json& pattern = spec.at("pattern");
    const bool literal = pattern.contains("String");
    const auto text = pattern.at(literal ? "String" : "Regex").get<std::string>();
    TZ_ASSIGN_OR_RETURN(step.regex, Regex::compile(text, literal, path + ": pre_tokenizer Split pattern"));
    step.kind = Kind::kSplit;
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    step.add_prefix_space = flag(spec, "add_prefix_space", true);
    if (flag(spec, "use_regex", true)) {
      TZ_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern, false, path + ": ByteLevel regex"));
    }
    out.byte_level_ = true;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.replacement = spec.at("replacement").get<std::string>();
    step.split = flag(spec, "split", true);
    if (spec.contains("prepend_scheme")) {
      const auto scheme = spec.at("prepend_scheme").get<std::string>();
      if (scheme == "always")
        step.prepend = Prepend::kAlways;
      else if (scheme == "first")
        step.prepend = Prepend::kFirst;
      else if (scheme == "never")
        step.prepend = Prepend::kNever;
      else
        return unsupported(path + ": Metaspace prepend_scheme \"" + scheme + "\" is not one of always, first, never");
    } else {
      step.prepend = flag(spec, "add_prefix_space", true) ? Prepend::kAlways : Prepend::kNever;
    }
  } else {
    return unsupported(path + ": pre_tokenizer type \"" + type + "\" is not supported (" + kSupported + ")");
  }
  out.steps_.push_back(std::move(step));
  return {};
}

Result<PreTokenizer> PreTokenizer::parse(const nlohmann::json& spec, const std::string& path) {
  PreTokenizer pre;
  if (!spec.is_null()) TZ_RETURN_IF_ERROR(add(spec, path, pre));
  return pre;
}

Status PreTokenizer::run(const Step& step, PreTokenizerScratch& scratch) const {
  scratch.next.clear();
  const auto emit = [&](std::string_view text, bool at_start) {
    if (!text.empty()) scratch.next.push_back({text, at_start});
  };
  for (Piece piece : scratch.pieces) {
    if (step.kind == Kind::kMetaspace) {
      std::string& s = scratch.rewritten.emplace_back(step.replacement);
      for (char c : piece.text) {
        if (c == ' ')
          s += step.replacement;
        else
          s += c;
      }
      // The prefix is kept when the text (spaces replaced) does not already begin with it.
      const bool prepend = !std::string_view(s).substr(step.replacement.size()).starts_with(step.replacement) &&
                           (step.prepend == Prepend::kAlways || (step.prepend == Prepend::kFirst && piece.at_start));
      piece.text = std::string_view(s).substr(prepend ? 0 : step.replacement.size());
      if (!step.split) {
        emit(piece.text, piece.at_start);
        continue;
      }
      // MergedWithNext: every replacement character begins a new piece.
      size_t begin = 0;
      const std::string_view t = piece.text;
      for (size_t at = t.find(step.replacement, 1); at != std::string_view::npos;
           at = t.find(step.replacement, at + 1)) {
        emit(piece.text.substr(begin, at - begin), piece.at_start && begin == 0);
        begin = at;
      }
      emit(piece.text.substr(begin), piece.at_start && begin == 0);
      continue;
    }
    if (step.kind == Kind::kByteLevel && step.add_prefix_space && !piece.text.starts_with(' ')) {
      std::string& s = scratch.rewritten.emplace_back(" ");
      s.append(piece.text);
      piece.text = s;
    }
    if (!step.regex) {
      emit(piece.text, piece.at_start);
      continue;
    }
    size_t last = 0;  // Isolated: each match is a piece, and so is the text between matches
    TZ_RETURN_IF_ERROR(step.regex->for_each_match(piece.text, [&](size_t begin, size_t end) {
      emit(piece.text.substr(last, begin - last), piece.at_start && last == 0);
      emit(piece.text.substr(begin, end - begin), piece.at_start && begin == 0);
      last = end;
    }));
    emit(piece.text.substr(last), piece.at_start && last == 0);
  }
  scratch.pieces.swap(scratch.next);
  return {};
}

Status PreTokenizer::split(std::string_view text, bool at_start, PreTokenizerScratch& scratch) const {
  scratch.rewritten.clear();
  scratch.pieces.clear();
  if (!text.empty()) scratch.pieces.push_back({text, at_start});
  for (const Step& step : steps_) TZ_RETURN_IF_ERROR(run(step, scratch));
  return {};
}

}  // namespace tierzero::text::internal
