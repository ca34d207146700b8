// What a tokenizer.json may not hold is refused by name, with the file and the fix; bad input to
// encode/decode is an error naming where.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support/status_matchers.h"
#include "text/text.h"

namespace tierzero::text {
namespace {

// A small byte-level BPE tokenizer.json with one component replaced.
nlohmann::json byte_level_spec() {
  nlohmann::json vocab = nlohmann::json::object();
  for (const char* t : {"a", "b", "ab", "Ġ"}) vocab[t] = vocab.size();
  return {{"added_tokens",
           nlohmann::json::array({{{"id", 4}, {"content", "<|eos|>"}, {"special", true}, {"normalized", false}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array({"a b"})}}}};
}

Status load_status(const nlohmann::json& spec, const std::string& config = "") {
  return Tokenizer::from_json(spec.dump(), config, "dir/tokenizer.json").status();
}

void expect_refused(const nlohmann::json& spec, ErrorCode code, const std::string& message) {
  const Status s = load_status(spec);
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(message), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dir/tokenizer.json"), std::string::npos) << s.message();
}

TEST(TokenizerErrors, TheSmallSpecLoadsAndEncodes) {
  auto tok = Tokenizer::from_json(byte_level_spec().dump(), "", "dir/tokenizer.json");
  ASSERT_OK(tok);
  EXPECT_EQ(*(*tok)->encode("ab<|eos|>a"), (std::vector<uint32_t>{2, 4, 0}));
  EXPECT_EQ(*(*tok)->decode(std::vector<uint32_t>{2, 4, 0}, false), "ab<|eos|>a");
  EXPECT_EQ(*(*tok)->decode(std::vector<uint32_t>{2, 4, 0}), "aba");
}

TEST(TokenizerErrors, UnsupportedComponentsAreRefusedByName) {
  auto spec = byte_level_spec();
  spec["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_refused(
      spec, ErrorCode::kUnsupported,
      "pre_tokenizer type \"Whitespace\" is not supported (supported: Split, ByteLevel, Metaspace, Sequence)");
  spec = byte_level_spec();
  spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  expect_refused(spec, ErrorCode::kUnsupported, "normalizer type \"Lowercase\" is not supported");
  spec = byte_level_spec();
  spec["decoder"] = {{"type", "WordPiece"}};
  expect_refused(spec, ErrorCode::kUnsupported, "decoder type \"WordPiece\" is not supported");
  spec = byte_level_spec();
  spec["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_refused(spec, ErrorCode::kUnsupported, "post_processor type \"RobertaProcessing\" is not supported");
  spec = byte_level_spec();
  spec["model"]["type"] = "Unigram";
  expect_refused(spec, ErrorCode::kUnsupported, "model type \"Unigram\" is not supported (supported: BPE)");
  spec = byte_level_spec();
  spec["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}};
  expect_refused(spec, ErrorCode::kUnsupported, "Split with behavior \"Removed\" is not supported");
  spec = byte_level_spec();
  spec["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Metaspace"}, {"replacement", "_"}}}}};
  expect_refused(spec, ErrorCode::kUnsupported, "after ByteLevel is not supported");
  spec = byte_level_spec();
  spec["added_tokens"][0]["lstrip"] = true;
  expect_refused(spec, ErrorCode::kUnsupported, "added token \"<|eos|>\" sets lstrip");
  spec = byte_level_spec();
  spec["truncation"] = {{"max_length", 8}};
  expect_refused(spec, ErrorCode::kUnsupported, "truncation is set");
  spec = byte_level_spec();
  spec["model"]["dropout"] = 0.1;
  expect_refused(spec, ErrorCode::kUnsupported, "model.dropout 0.1 is not supported");
  spec = byte_level_spec();
  spec["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_refused(spec, ErrorCode::kUnsupported, "PCRE2 cannot compile the pattern at offset");
}

TEST(TokenizerErrors, DamagedFilesAreCorrupt) {
  auto spec = byte_level_spec();
  spec["model"]["merges"] = {"a c"};
  expect_refused(spec, ErrorCode::kCorrupt, "model.merges[0] (\"a\", \"c\") names a token that is not in model.vocab");
  spec = byte_level_spec();
  spec["model"]["merges"] = {"a b c"};
  expect_refused(spec, ErrorCode::kCorrupt, "model.merges[0] is \"a b c\"");
  spec = byte_level_spec();
  spec["model"].erase("vocab");
  expect_refused(spec, ErrorCode::kCorrupt, "a key is missing or has the wrong type");
  EXPECT_EQ(Tokenizer::from_json("{not json", "", "x.json").status().code(), ErrorCode::kCorrupt);
  const Status eos = load_status(byte_level_spec(), R"({"eos_token": "</s>"})");
  EXPECT_EQ(eos.code(), ErrorCode::kCorrupt);
  EXPECT_NE(eos.message().find("eos_token \"</s>\" is not a token of tokenizer.json"), std::string::npos)
      << eos.message();
}

TEST(TokenizerErrors, MissingDirectoryIsNotFound) {
  const auto missing = std::filesystem::temp_directory_path() / "tierzero-no-such-model";
  const Status s = Tokenizer::load(missing.string()).status();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("tokenizer.json does not exist"), std::string::npos) << s.message();
}

TEST(TokenizerErrors, InvalidUtf8AndUnknownIdsNameWhere) {
  auto tok = Tokenizer::from_json(byte_level_spec().dump(), R"({"eos_token": {"content": "<|eos|>"}})", "t.json");
  ASSERT_OK(tok);
  EXPECT_EQ((*tok)->eos_id(), 4u);
  const Status bad = (*tok)->encode("ab\xC3(", true).status();
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("not valid UTF-8 at byte 2"), std::string::npos) << bad.message();
  const Status id = (*tok)->decode(std::vector<uint32_t>{0, 99}).status();
  EXPECT_EQ(id.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(id.message().find("token id 99 is not in the vocabulary"), std::string::npos) << id.message();
}

}  // namespace
}  // namespace tierzero::text
