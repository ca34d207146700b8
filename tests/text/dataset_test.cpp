// JSONL rows to a token stream, checked against the ids Hugging Face `tokenizers` gave for the
// same texts (the fixture's reference), and the token file written from it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"
#include "tests/text/tokenizer_fixture.h"
#include "text/text.h"

namespace tierzero::text {
namespace {

using testing::read_jsonl;

struct Fixture {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<std::string> lines;
  std::vector<nlohmann::json> reference;
};

Fixture load(const std::string& root, const std::string& family) {
  Fixture f;
  f.tokenizer = value_or_throw(Tokenizer::load(root + "/" + family));
  for (const auto& line : read_jsonl(root + "/corpus.jsonl")) f.lines.push_back(line.get<std::string>());
  f.reference = read_jsonl(root + "/" + family + "/reference.jsonl");
  return f;
}

std::vector<uint32_t> ids(const nlohmann::json& ref, const char* key) {
  return ref.at(key).get<std::vector<uint32_t>>();
}

TEST(Dataset, TextRowsAreTheTokenizersIdsPlusEosInFileOrder) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  for (const char* family : {"llama3", "qwen2"}) {
    const Fixture f = load(root, family);
    std::string jsonl;
    std::vector<uint32_t> expected;
    for (size_t i = 0; i < f.lines.size(); ++i) {
      jsonl += nlohmann::json{{"text", f.lines[i]}}.dump() + "\n";
      if (i % 100 == 0) jsonl += "\n";  // blank lines are skipped
      const auto row = ids(f.reference[i], "ids");
      expected.insert(expected.end(), row.begin(), row.end());
      if (row.empty() || row.back() != *f.tokenizer->eos_id()) expected.push_back(*f.tokenizer->eos_id());
    }
    ASSERT_GT(jsonl.size(), size_t{4} << 18) << "the file must span several parallel chunks";
    auto stream = tokenize_jsonl(jsonl, *f.tokenizer, "rows.jsonl");
    ASSERT_OK(stream);
    EXPECT_EQ(stream->rows, f.lines.size());
    EXPECT_TRUE(stream->tokens == expected) << family;
    EXPECT_TRUE(stream->loss_mask.empty()) << "text rows train on every token";
    EXPECT_EQ(stream->target_tokens, expected.size());
  }
}

TEST(Dataset, PromptTokensCarryNoLoss) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  const Fixture f = load(root, "llama2");  // a BOS: the prompt starts with it
  std::string jsonl;
  std::vector<uint32_t> expected;
  std::vector<uint8_t> mask;
  for (size_t i = 0; i + 1 < 400; i += 2) {
    jsonl += nlohmann::json{{"prompt", f.lines[i]}, {"completion", f.lines[i + 1]}}.dump() + "\n";
    const auto prompt = ids(f.reference[i], "ids"), completion = ids(f.reference[i + 1], "plain");
    expected.insert(expected.end(), prompt.begin(), prompt.end());
    mask.insert(mask.end(), prompt.size(), 0);
    expected.insert(expected.end(), completion.begin(), completion.end());
    const bool ends_with_eos = !completion.empty() && completion.back() == 2;  // the text held "</s>"
    if (!ends_with_eos) expected.push_back(2);
    mask.insert(mask.end(), completion.size() + (ends_with_eos ? 0 : 1), 1);
  }
  jsonl += nlohmann::json{{"text", "all of this trains"}}.dump() + "\n";
  const auto text = value_or_throw(f.tokenizer->encode("all of this trains"));
  expected.insert(expected.end(), text.begin(), text.end());
  expected.push_back(2);
  mask.insert(mask.end(), text.size() + 1, 1);

  auto stream = tokenize_jsonl(jsonl, *f.tokenizer, "chat.jsonl");
  ASSERT_OK(stream);
  EXPECT_EQ(stream->rows, 201u);
  EXPECT_TRUE(stream->tokens == expected);
  EXPECT_TRUE(stream->loss_mask == mask);
  EXPECT_EQ(stream->target_tokens, static_cast<uint64_t>(std::count(mask.begin(), mask.end(), 1)));
}

TEST(Dataset, BadRowsNameTheLine) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  const auto tok = value_or_throw(Tokenizer::load(root + "/llama3"));
  const auto error = [&](const std::string& jsonl) { return tokenize_jsonl(jsonl, *tok, "d.jsonl").status(); };
  Status s = error("{\"text\": \"a\"}\n\n{\"text\": \"b\"\n");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("d.jsonl: line 3: not valid JSON"), std::string::npos) << s.message();
  s = error("{\"prompt\": \"a\"}\n");
  EXPECT_NE(s.message().find("line 1: expected \"text\" (causal LM), \"prompt\" + \"completion\""), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("or \"messages\" (a chat"), std::string::npos) << s.message();
  s = error("{\"text\": 3}\n");
  EXPECT_NE(s.message().find("\"text\" must be a string, got number"), std::string::npos) << s.message();
  s = error("{\"text\": \"a\", \"prompt\": \"b\", \"completion\": \"c\"}\n");
  EXPECT_NE(s.message().find("not both"), std::string::npos) << s.message();
  s = error("\n \n");
  EXPECT_NE(s.message().find("holds no rows"), std::string::npos) << s.message();
  auto plain = Tokenizer::from_json(
      [&] {
        std::stringstream t;
        t << std::ifstream(root + "/llama3/tokenizer.json").rdbuf();
        return t.str();
      }(),
      "", "llama3");
  ASSERT_OK(plain);
  s = tokenize_jsonl("{\"text\": \"a\"}\n", **plain, "d.jsonl").status();
  EXPECT_NE(s.message().find("no eos_token"), std::string::npos) << s.message();
}

// The header fields and payload of a written token file.
struct TokenFile {
  uint32_t version, width;
  uint64_t count, flags;
  std::string payload;
};

TokenFile read_token_file(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  const std::string bytes = text.str();
  TokenFile f{};
  EXPECT_EQ(bytes.substr(0, 8), "TZTOKENS");
  std::memcpy(&f.version, bytes.data() + 8, 4);
  std::memcpy(&f.width, bytes.data() + 12, 4);
  std::memcpy(&f.count, bytes.data() + 16, 8);
  std::memcpy(&f.flags, bytes.data() + 24, 8);
  f.payload = bytes.substr(32);
  return f;
}

TEST(Dataset, TokenFileIsVersion1WithoutMaskAnd2WithIt) {
  test_support::ScratchDir dir("tierzero-text");
  TokenStream plain{.tokens = {1, 2, 65535}, .loss_mask = {}, .rows = 1, .target_tokens = 3};
  ASSERT_OK(write_token_stream(dir.file("a.tok"), plain));
  TokenFile a = read_token_file(dir.file("a.tok"));
  EXPECT_EQ(a.version, 1u);
  EXPECT_EQ(a.width, 2u);
  EXPECT_EQ(a.count, 3u);
  EXPECT_EQ(a.flags, 0u);
  EXPECT_EQ(a.payload, std::string("\x01\x00\x02\x00\xff\xff", 6));

  TokenStream masked{.tokens = {7, 70000, 9, 9, 9, 9, 9, 9, 9},
                     .loss_mask = {0, 0, 1, 1, 0, 1, 1, 1, 1},
                     .rows = 1,
                     .target_tokens = 6};
  ASSERT_OK(write_token_stream(dir.file("b.tok"), masked));
  TokenFile b = read_token_file(dir.file("b.tok"));
  EXPECT_EQ(b.version, 2u);
  EXPECT_EQ(b.width, 4u);
  EXPECT_EQ(b.count, 9u);
  EXPECT_EQ(b.flags, 1u);
  ASSERT_EQ(b.payload.size(), 9 * 4 + 2u);
  EXPECT_EQ(static_cast<uint8_t>(b.payload[36]), 0b11101100);
  EXPECT_EQ(static_cast<uint8_t>(b.payload[37]), 0b1);
  const Status bad = write_token_stream(dir.file("missing/c.tok"), plain);
  EXPECT_EQ(bad.code(), ErrorCode::kIo);
}

}  // namespace
}  // namespace tierzero::text
