// The "pre_tokenizer" of a tokenizer.json, splitting normalized text into the words BPE encodes:
//   Split(pattern, behavior "Isolated", invert false)   matches and the text between them
//   ByteLevel(add_prefix_space, use_regex)              GPT-2's regex when use_regex; must be last;
//                                                       words then reach BPE as raw bytes
//   Metaspace(replacement, prepend_scheme, split)       ' ' -> replacement, prefix, optional split
//   Sequence of those, or null. Anything else is refused by name.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "text/internal/regex.h"

namespace tierzero::text::internal {

// A piece of text being split; `at_start` when it begins at offset 0 of the input text (what
// Metaspace's prepend_scheme "first" asks).
struct Piece {
  std::string_view text;
  bool at_start;
};

// Per-thread working memory of PreTokenizer::split.
struct PreTokenizerScratch {
  std::vector<Piece> pieces, next;
  std::deque<std::string> rewritten;  // pieces that a step rewrote (stable addresses)
};

class PreTokenizer {
 public:
  static Result<PreTokenizer> parse(const nlohmann::json& spec, const std::string& path);

  // True when a ByteLevel step ends the sequence: words are raw bytes standing for ByteLevel
  // characters.
  bool byte_level() const { return byte_level_; }

  // Splits `text` (valid UTF-8; `at_start` as for Piece) and leaves the words, in order and
  // non-empty, in scratch.pieces; they stay valid until the next call with this scratch.
  Status split(std::string_view text, bool at_start, PreTokenizerScratch& scratch) const;

 private:
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> regex;  // Split; ByteLevel with use_regex
    bool add_prefix_space = false;       // ByteLevel
    std::string replacement;             // Metaspace
    Prepend prepend = Prepend::kAlways;  // Metaspace
    bool split = true;                   // Metaspace
  };
  static Status add(const nlohmann::json& spec, const std::string& path, PreTokenizer& out);
  Status run(const Step& step, PreTokenizerScratch& scratch) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace tierzero::text::internal
