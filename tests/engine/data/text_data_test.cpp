// Training data from JSONL text: prompt/completion rows tokenized with the model's tokenizer
// train only on the completion. Loss-bearing tokens are counted against the ids Hugging Face
// `tokenizers` gave for the same texts (tests/text's fixture), and a token file written by
// `tierzero data prepare` (TZTOKENS v2, loss mask) gives the same samples as the JSONL itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/data/token_data.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"
#include "tests/text/tokenizer_fixture.h"
#include "text/text.h"

namespace tierzero::engine {
namespace {

using text::testing::read_jsonl;

constexpr int64_t kSeqLen = 48;

class TextData : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  // Writes 150 prompt/completion rows from the fixture corpus; fills the stream the tokenizers
  // reference gives for them (prompt ids with BOS, completion ids, </s>) and its loss mask.
  std::string write_chat(const std::string& root, std::vector<uint32_t>& stream, std::vector<uint8_t>& mask) {
    const auto corpus = read_jsonl(root + "/corpus.jsonl");
    const auto reference = read_jsonl(root + "/llama2/reference.jsonl");
    std::ofstream out(file("chat.jsonl"));
    for (size_t i = 0; i < 300; i += 2) {
      out << nlohmann::json{{"prompt", corpus[i]}, {"completion", corpus[i + 1]}}.dump() << "\n";
      const auto prompt = reference[i].at("ids").get<std::vector<uint32_t>>();
      const auto completion = reference[i + 1].at("plain").get<std::vector<uint32_t>>();
      stream.insert(stream.end(), prompt.begin(), prompt.end());
      mask.insert(mask.end(), prompt.size(), 0);
      stream.insert(stream.end(), completion.begin(), completion.end());
      mask.insert(mask.end(), completion.size(), 1);
      if (completion.empty() || completion.back() != 2) {
        stream.push_back(2);
        mask.push_back(1);
      }
    }
    return file("chat.jsonl");
  }

  test_support::ScratchDir dir_{"tz_text_data"};
};

TEST_F(TextData, PromptCompletionBatchesCarryLossOnlyOnTheCompletion) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  std::vector<uint32_t> stream;
  std::vector<uint8_t> mask;
  const std::string path = write_chat(root, stream, mask);
  auto source = open_samples(path, kSeqLen, std::nullopt, root + "/llama2");
  ASSERT_OK(source);
  ASSERT_EQ((*source)->size(), static_cast<int64_t>((stream.size() - 1) / kSeqLen));

  auto batches = MicroBatchIterator::create(*source, ShardSpec{.seed = 7, .micro_batch_size = 4});
  ASSERT_OK(batches);
  int64_t total_targets = 0, total_prompt = 0;
  for (int64_t b = 0; b < batches->micro_batches_per_epoch(); ++b) {
    const MicroBatch batch = value_or_throw(batches->next());
    int64_t expected = 0, counted = 0;
    for (int64_t row = 0; row < batch.batch_size; ++row) {
      const size_t first = static_cast<size_t>(batch.sample_indices[static_cast<size_t>(row)] * kSeqLen);
      for (int64_t t = 0; t < kSeqLen; ++t) {
        const size_t at = static_cast<size_t>(row * kSeqLen + t);
        const size_t next = first + static_cast<size_t>(t) + 1;
        ASSERT_EQ(batch.input_ids[at], stream[next - 1]);
        ASSERT_EQ(batch.targets[at], mask[next] ? int64_t{stream[next]} : kIgnoreIndex) << "position " << next;
        expected += mask[next];
        counted += batch.targets[at] != kIgnoreIndex;
      }
    }
    EXPECT_EQ(counted, expected) << "batch " << b;
    total_targets += counted;
    total_prompt += batch.batch_size * kSeqLen - counted;
  }
  // The prompts are about half the text: a real share of the positions must be masked.
  EXPECT_GT(total_prompt, total_targets / 4);
  EXPECT_GT(total_targets, 0);
}

TEST_F(TextData, PreparedTokenFileGivesTheSameSamples) {
  REQUIRE_TOKENIZER_FIXTURE(root);
  std::vector<uint32_t> stream;
  std::vector<uint8_t> mask;
  const std::string path = write_chat(root, stream, mask);
  const auto tokenizer = value_or_throw(text::Tokenizer::load(root + "/llama2"));
  const text::TokenStream prepared = value_or_throw(text::tokenize_jsonl_file(path, *tokenizer));
  ASSERT_OK(text::write_token_stream(file("chat.tok"), prepared));

  auto from_file = open_samples(file("chat.tok"), kSeqLen);
  auto from_jsonl = open_samples(path, kSeqLen, std::nullopt, root + "/llama2");
  ASSERT_OK(from_file);
  ASSERT_OK(from_jsonl);
  ASSERT_EQ((*from_file)->size(), (*from_jsonl)->size());
  std::vector<int64_t> in_a(kSeqLen), tg_a(kSeqLen), in_b(kSeqLen), tg_b(kSeqLen);
  for (int64_t i = 0; i < (*from_file)->size(); ++i) {
    ASSERT_OK((*from_file)->read(i, in_a.data(), tg_a.data()));
    ASSERT_OK((*from_jsonl)->read(i, in_b.data(), tg_b.data()));
    ASSERT_EQ(in_a, in_b) << "sample " << i;
    ASSERT_EQ(tg_a, tg_b) << "sample " << i;
  }

  std::filesystem::resize_file(file("chat.tok"), std::filesystem::file_size(file("chat.tok")) - 1);
  const Status cut = open_samples(file("chat.tok"), kSeqLen).status();
  EXPECT_EQ(cut.code(), ErrorCode::kCorrupt);
  EXPECT_NE(cut.message().find("and a loss mask"), std::string::npos) << cut.message();
}

TEST_F(TextData, TextRowsWithoutATokenizerSayWhatToPass) {
  std::ofstream(file("t.jsonl")) << "{\"text\": \"hello\"}\n";
  const Status s = open_samples(file("t.jsonl"), 4).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pass --model DIR"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tierzero data prepare"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tierzero::engine
