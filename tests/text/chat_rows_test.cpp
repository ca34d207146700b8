// Chat rows rendered with real chat templates (llama.cpp's Jinja engine) and tokenized with real
// tokenizers, checked against transformers' apply_chat_template on the same rows: the text, the
// ids, the mask (each assistant turn as rendered, tool calls included; TRL's completion mask for
// conversational prompt-completion rows), transformers' own return_assistant_tokens_mask where the
// template has {% generation %} blocks, and a refusal where transformers raises (content parts or a
// missing "content" that the template joins to a string).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"
#include "tests/text/chat_fixture.h"
#include "tests/text/tokenizer_fixture.h"
#include "text/text.h"

namespace tierzero::text {
namespace {

using testing::read_jsonl;

const char* const kCases[] = {"qwen2.5", "qwen3", "llama3.1", "llama3.2", "phi3.5", "phi3.5-generation", "lfm2.5"};

// The fixture's conversations, one line each, and parsed with their keys in order.
struct Rows {
  std::vector<std::string> lines;
  std::vector<nlohmann::ordered_json> rows;
};

Rows read_rows(const std::string& path) {
  Rows r;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    r.rows.push_back(nlohmann::ordered_json::parse(line));
    r.lines.push_back(std::move(line));
  }
  return r;
}

struct Case {
  std::shared_ptr<const Tokenizer> tokenizer;
  ChatRowFormat format;
  std::vector<nlohmann::json> reference;
};

Case load_case(const std::string& root, const std::string& name) {
  Case c;
  c.tokenizer = value_or_throw(Tokenizer::load(root + "/" + name));
  c.format = ChatRowFormat::load(root + "/" + name);
  c.reference = read_jsonl(root + "/" + name + "/reference.jsonl");
  return c;
}

#define REQUIRE_ENGINE() \
  if (!ChatTemplate::engine_available()) GTEST_SKIP() << chat_rows_unavailable("")

// The conversation a row renders: its messages, or its prompt then its completion.
nlohmann::ordered_json conversation(const nlohmann::ordered_json& row) {
  if (row.contains("messages")) return row.at("messages");
  nlohmann::ordered_json all = row.at("prompt");
  for (const auto& m : row.at("completion")) all.push_back(m);
  return all;
}

TEST(ChatRows, TextIdsAndMaskEqualTransformers) {
  REQUIRE_ENGINE();
  REQUIRE_CHAT_FIXTURE(root);
  const Rows all = read_rows(root + "/rows.jsonl");
  for (const std::string name : kCases) {
    const Case c = load_case(root, name);
    ASSERT_NE(c.format.chat_template, nullptr) << name << ": " << c.format.unavailable;
    ASSERT_EQ(c.reference.size(), all.rows.size());
    for (const nlohmann::json& ref : c.reference) {
      const nlohmann::ordered_json& row = all.rows.at(ref.at("row").get<size_t>());
      SCOPED_TRACE(name + " row " + ref.at("row").dump());
      std::vector<uint32_t> ids;
      std::vector<uint8_t> mask;
      if (ref.contains("error")) {
        EXPECT_ERROR(tokenize_chat_row(row, c.format, *c.tokenizer, ids, mask), ErrorCode::kInvalidArgument,
                     "fails on these messages")
            << "transformers raises " << ref.at("error");
        continue;
      }
      const nlohmann::ordered_json tools = row.contains("tools") ? row.at("tools") : nlohmann::ordered_json();
      ASSERT_OK_AND_ASSIGN(const RenderedChat rendered, c.format.chat_template->render(conversation(row), tools));
      EXPECT_EQ(rendered.text, ref.at("text").get<std::string>());
      ASSERT_OK(tokenize_chat_row(row, c.format, *c.tokenizer, ids, mask));
      EXPECT_EQ(ids, ref.at("ids").get<std::vector<uint32_t>>());
      EXPECT_EQ(mask, ref.at("mask").get<std::vector<uint8_t>>());
      if (ref.contains("hf_mask") && row.contains("messages")) {
        EXPECT_EQ(mask, ref.at("hf_mask").get<std::vector<uint8_t>>()) << "transformers' assistant mask";
      }
      EXPECT_GT(std::count(mask.begin(), mask.end(), uint8_t{1}), 0);
      EXPECT_LT(std::count(mask.begin(), mask.end(), uint8_t{1}), static_cast<std::ptrdiff_t>(mask.size()));
    }
  }
}

TEST(ChatRows, JsonlChatRowsAreTheReferenceIdsWithTheMaskAndNoEos) {
  REQUIRE_ENGINE();
  REQUIRE_CHAT_FIXTURE(root);
  const Rows all = read_rows(root + "/rows.jsonl");
  for (const std::string name : {"qwen3", "llama3.1", "phi3.5", "lfm2.5"}) {
    const Case c = load_case(root, name);
    std::string jsonl;
    std::vector<uint32_t> expected_ids;
    std::vector<uint8_t> expected_mask;
    uint64_t rows = 0;
    for (const nlohmann::json& ref : c.reference) {
      if (ref.contains("error")) continue;
      jsonl += all.lines.at(ref.at("row").get<size_t>()) + "\n";
      const auto ids = ref.at("ids").get<std::vector<uint32_t>>();
      const auto mask = ref.at("mask").get<std::vector<uint8_t>>();
      expected_ids.insert(expected_ids.end(), ids.begin(), ids.end());
      expected_mask.insert(expected_mask.end(), mask.begin(), mask.end());
      ++rows;
    }
    ASSERT_OK_AND_ASSIGN(const TokenStream stream,
                         tokenize_jsonl(jsonl, *c.tokenizer, "chat.jsonl", nullptr, &c.format));
    EXPECT_EQ(stream.rows, rows) << name;
    EXPECT_EQ(stream.tokens, expected_ids) << name;
    EXPECT_EQ(stream.loss_mask, expected_mask) << name;
    EXPECT_EQ(stream.target_tokens,
              static_cast<uint64_t>(std::count(expected_mask.begin(), expected_mask.end(), uint8_t{1})));
  }
}

// A row transformers raises on is refused naming its line and what jinja2 would raise.
TEST(ChatRows, RowsTransformersRaisesOnAreRefusedNamingTheLine) {
  REQUIRE_ENGINE();
  REQUIRE_CHAT_FIXTURE(root);
  const Rows all = read_rows(root + "/rows.jsonl");
  const Case c = load_case(root, "qwen2.5");
  std::map<std::string, std::string> raised;  // jinja2's exception -> the row's line
  for (const nlohmann::json& ref : c.reference) {
    if (ref.contains("error")) raised[ref.at("error").get<std::string>()] = all.lines.at(ref.at("row").get<size_t>());
  }
  ASSERT_EQ(raised.size(), 2u) << "content parts (TypeError) and a missing content (UndefinedError)";
  for (const auto& [error, line] : raised) {
    SCOPED_TRACE(error);
    const std::string jsonl = all.lines.at(0) + "\n" + line + "\n";
    const std::string python_error = error.substr(0, error.find(':'));
    EXPECT_ERROR(tokenize_jsonl(jsonl, *c.tokenizer, "chat.jsonl", nullptr, &c.format).status(),
                 ErrorCode::kInvalidArgument, "line 2");
    EXPECT_ERROR(tokenize_jsonl(jsonl, *c.tokenizer, "chat.jsonl", nullptr, &c.format).status(),
                 ErrorCode::kInvalidArgument, "jinja2 raises " + python_error);
  }
}

TEST(ChatRows, ChatRowsWithoutATemplateAreRefusedNamingTheFix) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  const auto tokenizer = value_or_throw(Tokenizer::load(root + "/qwen2"));
  const std::string row =
      R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})";
  EXPECT_ERROR(tokenize_jsonl(row, *tokenizer, "chat.jsonl").status(), ErrorCode::kInvalidArgument,
               ChatTemplate::engine_available() ? "no model directory was given" : "scripts/setup.sh");
  const ChatRowFormat format = ChatRowFormat::load(root + "/qwen2");
  EXPECT_EQ(format.chat_template, nullptr) << "the fixture's qwen2 directory has no chat_template";
  EXPECT_ERROR(tokenize_jsonl(row, *tokenizer, "chat.jsonl", nullptr, &format).status(), ErrorCode::kInvalidArgument,
               ChatTemplate::engine_available() ? root + "/qwen2 has none" : "scripts/setup.sh");
}

TEST(ChatRows, BadRowsAndTemplatesAreRefusedWithTheReason) {
  REQUIRE_ENGINE();
  REQUIRE_TOKENIZER_FIXTURE(root);
  const auto tokenizer = value_or_throw(Tokenizer::load(root + "/qwen2"));
  ChatRowFormat format;
  ASSERT_OK_AND_ASSIGN(
      format.chat_template,
      ChatTemplate::compile("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}"
                            "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
                            nlohmann::json::object(), "test template"));
  const auto error = [&](const std::string& jsonl) {
    return tokenize_jsonl(jsonl, *tokenizer, "d.jsonl", nullptr, &format).status();
  };
  EXPECT_ERROR(error(R"({"messages": []})"), ErrorCode::kInvalidArgument, "non-empty array");
  EXPECT_ERROR(error(R"({"messages": [{"content": "x"}]})"), ErrorCode::kInvalidArgument, "string \"role\"");
  EXPECT_ERROR(error(R"({"prompt": [{"role": "user", "content": "x"}], "completion": "y"})"),
               ErrorCode::kInvalidArgument, "both \"prompt\" and \"completion\" as message lists");
  EXPECT_ERROR(error(R"({"prompt": [{"role": "user", "content": "x"}], "completion": []})"),
               ErrorCode::kInvalidArgument, "\"completion\" must be a non-empty array");
  EXPECT_ERROR(error(R"({"messages": [{"role": "assistant", "content": "a"}], "prompt": [{"role": "user"}]})"),
               ErrorCode::kInvalidArgument, "not several");
  EXPECT_ERROR(error(R"({"messages": [{"role": "user", "content": "x"}]})"), ErrorCode::kInvalidArgument,
               "would train nothing");
  EXPECT_ERROR(error("\n"
                     R"({"messages": [{"role": "assistant", "content": "a"}], "text": "b"})"),
               ErrorCode::kInvalidArgument, "line 2");
  EXPECT_ERROR(error(R"({"messages": [{"role": "tool", "content": "x"}, {"role": "assistant", "content": "a"}]})"),
               ErrorCode::kInvalidArgument, "no tools here");
  EXPECT_ERROR(ChatTemplate::compile("{% for m in messages %}", nlohmann::json::object(), "broken.jinja").status(),
               ErrorCode::kInvalidArgument, "broken.jinja is not valid Jinja");

  // A template of the last resort, as the model writes it: the assistant text and its end token.
  ASSERT_OK_AND_ASSIGN(const TokenStream stream, tokenize_jsonl(R"({"messages": [{"role": "user", "content": "hi"}, )"
                                                                R"({"role": "assistant", "content": "hello there"}]})",
                                                                *tokenizer, "d.jsonl", nullptr, &format));
  std::vector<uint32_t> trained;
  for (size_t i = 0; i < stream.tokens.size(); ++i)
    if (stream.loss_mask[i] != 0) trained.push_back(stream.tokens[i]);
  EXPECT_EQ(value_or_throw(tokenizer->decode(trained, /*skip_special_tokens=*/false)), "hello there<|im_end|>");
}

TEST(ChatRows, TemplateComesFromChatTemplateJinjaBeforeTokenizerConfig) {
  REQUIRE_ENGINE();
  test_support::ScratchDir dir("chat_template");
  std::ofstream(dir.file("tokenizer_config.json"))
      << R"({"eos_token": "</s>", "chat_template": [{"name": "tool_use", "template": "T"},)"
      << R"( {"name": "default", "template": "{{ eos_token }}{{ messages[0].content }}"}]})";
  const auto messages = nlohmann::ordered_json::parse(R"([{"role": "assistant", "content": "x"}])");
  ASSERT_OK_AND_ASSIGN(auto from_config, ChatTemplate::load(dir.path()));
  ASSERT_NE(from_config, nullptr);
  ASSERT_OK_AND_ASSIGN(const RenderedChat a, from_config->render(messages, nullptr));
  EXPECT_EQ(a.text, "</s>x");
  EXPECT_FALSE(from_config->has_generation_blocks());
  // The block's tags keep their whitespace control: "-%}" eats the newline and the space after it.
  std::ofstream(dir.file("chat_template.jinja"))
      << "A[{%- generation -%}\n {{ messages[0].content }}{% endgeneration %}]";
  ASSERT_OK_AND_ASSIGN(auto from_file, ChatTemplate::load(dir.path()));
  ASSERT_OK_AND_ASSIGN(const RenderedChat b, from_file->render(messages, nullptr));
  EXPECT_EQ(b.text, "A[x]");
  EXPECT_TRUE(from_file->has_generation_blocks());
  EXPECT_EQ(b.generation_spans, (std::vector<std::pair<size_t, size_t>>{{2, 3}}));
  std::ofstream(dir.file("tokenizer_config.json")) << R"({"chat_template": 3})";
  std::filesystem::remove(dir.file("chat_template.jinja"));
  EXPECT_ERROR(ChatTemplate::load(dir.path()).status(), ErrorCode::kCorrupt, "must be a string or a list");
  const ChatRowFormat format = ChatRowFormat::load(dir.path());
  EXPECT_EQ(format.chat_template, nullptr) << "a template that does not load stops chat rows only";
  EXPECT_NE(format.unavailable.find("must be a string or a list"), std::string::npos) << format.unavailable;
}

}  // namespace
}  // namespace tierzero::text
