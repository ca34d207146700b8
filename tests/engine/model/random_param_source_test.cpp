// random_init_params against init_parameters: the same bits for every parameter, read in pieces and
// out of order (the engine reads its shard's ranges, then the master's by sub-group), for a Llama with
// a pad token and embeddings of several chunks and a Qwen2 with q/k/v biases; its errors; and the
// chunked normal_ it draws with against one LibTorch normal_ over the whole tensor.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/model/internal/init_value.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

ModelConfig config_of(const std::string& model_type) {
  ModelConfig c = tiny_llama_config();
  c.model_type = model_type;
  c.num_hidden_layers = 2;
  c.sliding_window_layers.assign(2, false);
  c.qkv_bias = model_type == "qwen2";
  if (model_type == "llama") {
    c.pad_token_id = 3;
    c.vocab_size = 2 * kNormalChunk / c.hidden_size + 500;  // embeddings and head of 2 chunks + a part
  }
  return c;
}

TEST(RandomInitParams, EqualsInitParametersBitForBitReadInPieces) {
  for (const std::string type : {"llama", "qwen2"}) {
    const ModelConfig config = config_of(type);
    const std::map<std::string, at::Tensor> whole = init_parameters(config, 1234, at::kFloat, at::kCPU);
    std::unique_ptr<ParamSource> source = random_init_params(config, 1234);
    std::vector<std::string> names;
    for (const auto& [name, value] : whole) names.push_back(name);
    std::shuffle(names.begin(), names.end(), std::mt19937(7));  // not the drawing order
    for (int round = 0; round < 2; ++round) {
      for (const std::string& name : names) {
        const at::Tensor expected = whole.at(name).reshape(-1);
        ASSERT_EQ(source->shape(name), whole.at(name).sizes().vec()) << name;
        at::Tensor got = at::empty_like(expected);
        const int64_t n = expected.numel(), piece = std::max<int64_t>(1, n / 3 + 1);
        for (int64_t first = n; first > 0;) {  // back to front, pieces of a third
          const int64_t begin = std::max<int64_t>(0, first - piece);
          ASSERT_OK(source->read(name, begin, {got.data_ptr<float>() + begin, static_cast<size_t>(first - begin)}));
          first = begin;
        }
        EXPECT_TRUE(at::equal(got, expected)) << type << " " << name << " round " << round;
      }
    }
  }
}

TEST(RandomInitParams, PadRowIsZeroAndSeedsDiffer) {
  const ModelConfig config = config_of("llama");
  std::unique_ptr<ParamSource> a = random_init_params(config, 1);
  std::unique_ptr<ParamSource> b = random_init_params(config, 2);
  const int64_t hidden = config.hidden_size;
  std::vector<float> row_a(hidden), row_b(hidden);
  ASSERT_OK(a->read("model.embed_tokens.weight", 3 * hidden, row_a));
  EXPECT_TRUE(std::all_of(row_a.begin(), row_a.end(), [](float v) { return v == 0.0f; }));
  ASSERT_OK(a->read("model.embed_tokens.weight", 0, row_a));
  ASSERT_OK(b->read("model.embed_tokens.weight", 0, row_b));
  EXPECT_NE(row_a, row_b);
}

TEST(RandomInitParams, ErrorsNameTheParameter) {
  std::unique_ptr<ParamSource> source = random_init_params(config_of("llama"), 1);
  std::vector<float> out(4);
  EXPECT_EQ(source->shape("no.such.weight"), std::nullopt);
  EXPECT_ERROR(source->read("no.such.weight", 0, out), ErrorCode::kNotFound, "no.such.weight");
  const int64_t numel = (*source->shape("model.norm.weight"))[0];
  EXPECT_ERROR(source->read("model.norm.weight", numel - 2, out), ErrorCode::kInvalidArgument, "model.norm.weight");
}

TEST(ParallelNormal, SkipDrawsEqualsDrawing) {
  for (const uint64_t lead : {0, 1, 623, 700}) {
    for (const uint64_t n : {0, 1, 622, 623, 624, 625, 1247, 1248, 5000}) {
      at::mt19937 drawn(99), skipped(99);
      for (uint64_t i = 0; i < lead; ++i) (void)drawn(), (void)skipped();
      for (uint64_t i = 0; i < n; ++i) (void)drawn();
      skip_draws(skipped, n);
      for (int i = 0; i < 700; ++i) ASSERT_EQ(drawn(), skipped()) << "lead " << lead << " n " << n << " output " << i;
    }
  }
}

TEST(ParallelNormal, ChunksEqualOneNormalOverTheWholeTensor) {
  for (const int64_t numel : {int64_t{16}, int64_t{17}, int64_t{1000}, kNormalChunk, kNormalChunk + 5,
                              2 * kNormalChunk + 16, 3 * kNormalChunk - 1}) {
    at::Generator whole_generator = at::make_generator<at::CPUGeneratorImpl>(5);
    (void)at::empty({123}, at::kFloat).normal_(0.0, 1.0, whole_generator);  // a start inside the engine's block
    const at::mt19937 start = whole_generator.get<at::CPUGeneratorImpl>()->engine();
    const at::Tensor expected = at::empty({numel}, at::kFloat).normal_(0.0, 0.02, whole_generator);
    const NormalChunks chunks = normal_chunks(start, numel);
    at::Tensor got = at::empty({numel}, at::kFloat);
    fill_normal(chunks, 0.02, numel, 0, {got.data_ptr<float>(), static_cast<size_t>(numel)});
    EXPECT_TRUE(at::equal(got, expected)) << numel;
    at::mt19937 after = whole_generator.get<at::CPUGeneratorImpl>()->engine(), end = chunks.end;
    EXPECT_EQ(after(), end()) << "the engine after " << numel << " elements";
  }
}

// Every range of the draw, read alone, on one thread and on several (a slice each, starting inside
// chunks): ragged starts and ends, the last 16 values a ragged tensor redraws, ranges across chunks.
TEST(ParallelNormal, RangesEqualTheWholeDrawsValues) {
  const int threads_before = at::get_num_threads();
  for (const int threads : {1, 4}) {
    at::set_num_threads(threads);
    for (const int64_t numel : {int64_t{17}, int64_t{1000}, kNormalChunk + 5, 3 * kNormalChunk + 37}) {
      at::Generator whole_generator = at::make_generator<at::CPUGeneratorImpl>(11);
      (void)at::empty({77}, at::kFloat).normal_(0.0, 1.0, whole_generator);
      const NormalChunks chunks = normal_chunks(whole_generator.get<at::CPUGeneratorImpl>()->engine(), numel);
      const at::Tensor expected = at::empty({numel}, at::kFloat).normal_(0.0, 0.02, whole_generator);
      std::vector<std::pair<int64_t, int64_t>> ranges = {
          {0, numel}, {5, numel - 3}, {numel - 17, numel}, {numel - 40, numel - 16}, {3, 9}, {0, 16}, {1, 2}};
      if (numel >= kNormalChunk + 9) ranges.emplace_back(kNormalChunk - 7, kNormalChunk + 9);  // across chunks
      std::mt19937_64 pick(numel);
      for (int i = 0; i < 12; ++i) {
        const auto a = static_cast<int64_t>(pick() % static_cast<uint64_t>(numel));
        ranges.emplace_back(a, a + 1 + static_cast<int64_t>(pick() % static_cast<uint64_t>(numel - a)));
      }
      for (const auto& [first, end] : ranges) {
        if (first < 0 || end <= first) continue;  // {numel - 40, ...} of a short tensor
        at::Tensor got = at::full({end - first}, 7.0f, at::kFloat);
        fill_normal(chunks, 0.02, numel, first, {got.data_ptr<float>(), static_cast<size_t>(end - first)});
        EXPECT_TRUE(at::equal(got, expected.slice(0, first, end)))
            << "elements [" << first << ", " << end << ") of " << numel << " on " << threads << " threads";
      }
    }
  }
  at::set_num_threads(threads_before);
}

}  // namespace
}  // namespace tierzero::engine
