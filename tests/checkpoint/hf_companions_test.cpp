// The files written beside converted and exported weights (consolidate.h "Files beside the
// weights"): one tokenizer from one directory, generation_config.json copied or derived, and a
// config.json checked against the tensors. transformers itself loads the results in
// loadable_outputs.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::ScratchDir;

std::map<std::string, CompanionFile> by_name(const std::vector<CompanionFile>& files) {
  std::map<std::string, CompanionFile> named;
  for (const CompanionFile& f : files) named[f.name] = f;
  return named;
}

TEST(HfCompanionsTest, TheTokenizerComesWholeFromTheFirstDirectoryHoldingOne) {
  ScratchDir dir;
  const std::string none = dir.path() + "/none", first = dir.path() + "/first", second = dir.path() + "/second";
  for (const std::string& d : {none, first, second}) std::filesystem::create_directories(d);
  testing::write_text(none + "/config.json", "{}");
  testing::write_text(first + "/tokenizer.json", "{\"first\": 1}");
  testing::write_text(first + "/chat_template.jinja", "{{ messages }}");
  testing::write_text(second + "/tokenizer.json", "{\"second\": 2}");
  testing::write_text(second + "/tokenizer_config.json", "{}");
  testing::write_text(second + "/generation_config.json", "{\"eos_token_id\": 7}");

  ASSERT_OK_AND_ASSIGN(const std::vector<CompanionFile> files,
                       collect_companion_files({"", none, first, second}, R"({"eos_token_id": 2})"));
  const std::map<std::string, CompanionFile> named = by_name(files);
  ASSERT_EQ(named.size(), 3u);  // first's two tokenizer files (second's are not mixed in), second's generation config
  EXPECT_EQ(named.at("tokenizer.json").text, "{\"first\": 1}");
  EXPECT_EQ(named.at("tokenizer.json").from_dir, first);
  EXPECT_EQ(named.at("chat_template.jinja").text, "{{ messages }}");
  EXPECT_EQ(named.at("generation_config.json").text, "{\"eos_token_id\": 7}");
  EXPECT_EQ(named.at("generation_config.json").from_dir, second);
  EXPECT_EQ(tokenizer_files_in(second), (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json"}));
  EXPECT_TRUE(tokenizer_files_in("").empty());
}

TEST(HfCompanionsTest, AGenerationConfigIsDerivedFromTheModelsTokenIds) {
  ASSERT_OK_AND_ASSIGN(const std::vector<CompanionFile> files,
                       collect_companion_files({}, R"({"model_type": "llama", "bos_token_id": 1, "eos_token_id": [2, 5],
                                                      "pad_token_id": null, "transformers_version": "5.24.0"})"));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].name, "generation_config.json");
  EXPECT_EQ(files[0].from_dir, "");
  EXPECT_EQ(nlohmann::json::parse(files[0].text),
            nlohmann::json::parse(R"({"_from_model_config": true, "bos_token_id": 1, "eos_token_id": [2, 5],
                                      "transformers_version": "5.24.0"})"));
  ASSERT_OK_AND_ASSIGN(const std::vector<CompanionFile> without_config, collect_companion_files({}, ""));
  EXPECT_TRUE(without_config.empty());
  EXPECT_ERROR(generation_config_from("[1, 2]"), ErrorCode::kCorrupt, "not a JSON object");
}

TEST(HfCompanionsTest, AConfigOfAnotherModelIsRefusedNamingBothShapes) {
  const std::vector<TensorSpec> tensors = {{"model.norm.weight", {16}}, {"model.embed_tokens.weight", {96, 16}}};
  EXPECT_OK(check_config_matches(R"({"vocab_size": 96, "hidden_size": 16})", tensors));
  EXPECT_ERROR(check_config_matches(R"({"vocab_size": 128, "hidden_size": 16})", tensors), ErrorCode::kInvalidArgument,
               "vocab_size 128, hidden_size 16 but the checkpoint's model.embed_tokens.weight is [96, 16]");
  EXPECT_OK(check_config_matches(R"({"vocab_size": 128})", tensors));  // nothing to compare
  EXPECT_OK(check_config_matches(R"({"vocab_size": 128, "hidden_size": 16})", {{"lm_head.weight", {96, 16}}}));
  EXPECT_ERROR(check_config_matches("not json", tensors), ErrorCode::kCorrupt, "not a JSON object");
}

}  // namespace
}  // namespace tierzero::checkpoint
