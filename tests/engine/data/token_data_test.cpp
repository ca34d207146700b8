// Token files, JSONL, the seeded permutation, rank sharding and exact resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "engine/data/token_data.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

std::vector<uint32_t> iota_tokens(size_t n) {
  std::vector<uint32_t> t(n);
  std::iota(t.begin(), t.end(), 0u);
  return t;
}

void write_raw(const std::string& path, const std::vector<uint16_t>& tokens) {
  std::ofstream out(path, std::ios::binary);
  for (uint16_t t : tokens) {
    const char bytes[2] = {static_cast<char>(t & 0xff), static_cast<char>(t >> 8)};
    out.write(bytes, 2);
  }
}

TEST(TokenFile, PacksSeqLenPlusOneWindows) {
  test_support::ScratchDir dir{"tz_token_data"};
  const std::string path = dir.file("t.tok");
  ASSERT_OK(write_token_file(path, iota_tokens(21), TokenDtype::kUint16));
  auto source = open_token_file(path, 4).value();
  EXPECT_EQ(source->size(), 5);  // (21 - 1) / 4
  std::vector<int64_t> in(4), tgt(4);
  ASSERT_OK(source->read(2, in.data(), tgt.data()));
  EXPECT_EQ(in, (std::vector<int64_t>{8, 9, 10, 11}));
  EXPECT_EQ(tgt, (std::vector<int64_t>{9, 10, 11, 12}));
  EXPECT_ERROR(source->read(5, in.data(), tgt.data()), ErrorCode::kInvalidArgument, "sample 5 is outside [0, 5)");
}

TEST(TokenFile, Uint32HeaderAndHeaderlessExtensions) {
  test_support::ScratchDir dir{"tz_token_data"};
  std::vector<uint32_t> big = {70000, 1, 2, 3, 4};
  ASSERT_OK(write_token_file(dir.file("big.bin"), big, TokenDtype::kUint32));
  auto source = open_samples(dir.file("big.bin"), 4).value();
  std::vector<int64_t> in(4), tgt(4);
  ASSERT_OK(source->read(0, in.data(), tgt.data()));
  EXPECT_EQ(in[0], 70000);
  EXPECT_ERROR(write_token_file(dir.file("x"), big, TokenDtype::kUint16), ErrorCode::kInvalidArgument,
               "token 70000 at position 0 does not fit uint16");

  write_raw(dir.file("raw.u16"), {5, 6, 7, 8, 9});
  auto raw = open_token_file(dir.file("raw.u16"), 2).value();
  EXPECT_EQ(raw->size(), 2);
  ASSERT_OK(raw->read(1, in.data(), tgt.data()));
  EXPECT_EQ(in[0], 7);
  EXPECT_EQ(tgt[1], 9);
}

TEST(TokenFile, ErrorsNameThePath) {
  test_support::ScratchDir dir{"tz_token_data"};
  write_raw(dir.file("raw.bin"), {1, 2, 3});
  const auto raw = open_token_file(dir.file("raw.bin"), 2);
  EXPECT_ERROR(raw, ErrorCode::kInvalidArgument, "raw.bin");
  EXPECT_ERROR(raw, ErrorCode::kInvalidArgument, "tierzero.data.dtype");
  EXPECT_OK(open_token_file(dir.file("raw.bin"), 2, TokenDtype::kUint16));

  // 3 tokens < seq_len + 1
  EXPECT_ERROR(open_token_file(dir.file("raw.bin"), 5, TokenDtype::kUint16), ErrorCode::kInvalidArgument, "seq_len");

  ASSERT_OK(write_token_file(dir.file("h.tok"), iota_tokens(10), TokenDtype::kUint16));
  EXPECT_ERROR(open_token_file(dir.file("h.tok"), 2, TokenDtype::kUint32), ErrorCode::kInvalidArgument, "header");
  std::filesystem::resize_file(dir.file("h.tok"), 32 + 2 * 10 - 1);
  EXPECT_ERROR(open_token_file(dir.file("h.tok"), 2), ErrorCode::kCorrupt, "h.tok");

  EXPECT_ERROR(open_token_file(dir.file("missing.u16"), 2), ErrorCode::kNotFound, "missing.u16");
}

TEST(Jsonl, LabelsMaskAndPadding) {
  test_support::ScratchDir dir{"tz_token_data"};
  const std::string path = dir.file("d.jsonl");
  {
    std::ofstream out(path);
    out << R"({"input_ids": [1, 2, 3, 4]})"
        << "\n\n";
    out << R"({"input_ids": [5, 6, 7], "labels": [-100, -100, 7]})"
        << "\n";
    out << R"({"input_ids": [8, 9, 10], "loss_mask": [1, 0, 1]})"
        << "\n";
  }
  auto source = open_jsonl(path, 4).value();
  ASSERT_EQ(source->size(), 3);
  std::vector<int64_t> in(4), tgt(4);
  ASSERT_OK(source->read(0, in.data(), tgt.data()));
  EXPECT_EQ(in, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(tgt, (std::vector<int64_t>{2, 3, 4, kIgnoreIndex}));
  ASSERT_OK(source->read(1, in.data(), tgt.data()));
  EXPECT_EQ(in, (std::vector<int64_t>{5, 6, 7, 0}));
  EXPECT_EQ(tgt, (std::vector<int64_t>{kIgnoreIndex, 7, kIgnoreIndex, kIgnoreIndex}));
  ASSERT_OK(source->read(2, in.data(), tgt.data()));
  EXPECT_EQ(tgt, (std::vector<int64_t>{kIgnoreIndex, 10, kIgnoreIndex, kIgnoreIndex}));
}

TEST(Jsonl, ErrorsNameFileAndLine) {
  test_support::ScratchDir dir{"tz_token_data"};
  struct Case {
    const char* line;
    const char* says;
  };
  const Case cases[] = {{R"({"input_ids": [1, 2, 3, 4, 5, 6]})", "seq_len"},
                        {R"({"input_ids": [1, 2], "labels": [1]})", "labels"},
                        {R"({"input_ids": [1, 2], "loss_mask": [1, 2]})", "loss_mask"},
                        {R"({"input_ids": [1, -2]})", "input_ids"},
                        {R"({"tokens": [1, 2]})", "input_ids"},
                        {R"({"input_ids": [1, 2)", "JSON"}};
  for (const Case& c : cases) {
    const std::string path = dir.file("bad.jsonl");
    {
      std::ofstream out(path);
      out << R"({"input_ids": [1, 2]})"
          << "\n"
          << c.line << "\n";
    }
    const auto r = open_jsonl(path, 4);
    EXPECT_ERROR(r, ErrorCode::kInvalidArgument, "bad.jsonl line 2") << c.line;
    EXPECT_ERROR(r, ErrorCode::kInvalidArgument, c.says) << c.line;
  }
}

// Test double: sample i holds input i at every position.
class CountingSource final : public SampleSource {
 public:
  explicit CountingSource(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  int64_t seq_len() const override { return 2; }
  Status read(int64_t index, int64_t* input_ids, int64_t* targets) const override {
    input_ids[0] = input_ids[1] = index;
    targets[0] = targets[1] = index + 1;
    return {};
  }

 private:
  int64_t n_;
};

TEST(Permutation, IsSeededAndPinned) {
  const std::vector<int64_t> a = epoch_permutation(1000, 42, 0);
  EXPECT_EQ(a, epoch_permutation(1000, 42, 0));
  EXPECT_NE(a, epoch_permutation(1000, 42, 1));
  EXPECT_NE(a, epoch_permutation(1000, 43, 0));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  // Pinned from a Python transcription of the header's algorithm (splitmix64, rejection, Fisher-Yates).
  EXPECT_EQ(epoch_permutation(10, 1234, 0), (std::vector<int64_t>{4, 6, 5, 2, 7, 0, 1, 8, 9, 3}));
  EXPECT_EQ(epoch_permutation(10, 1234, 3), (std::vector<int64_t>{5, 1, 4, 9, 8, 0, 2, 6, 7, 3}));
}

std::vector<int64_t> drain(MicroBatchIterator& it, int batches) {
  std::vector<int64_t> samples;
  for (int i = 0; i < batches; ++i) {
    MicroBatch b = it.next().value();
    samples.insert(samples.end(), b.sample_indices.begin(), b.sample_indices.end());
  }
  return samples;
}

TEST(MicroBatches, RanksAreDisjointAndCoverTheEpoch) {
  auto source = std::make_shared<CountingSource>(103);
  const int world = 4;
  std::set<int64_t> seen;
  for (int rank = 0; rank < world; ++rank) {
    auto it = MicroBatchIterator::create(source,
                                         ShardSpec{.seed = 7, .rank = rank, .world_size = world, .micro_batch_size = 5})
                  .value();
    EXPECT_EQ(it.samples_per_epoch(), 25);
    EXPECT_EQ(it.micro_batches_per_epoch(), 5);
    for (int64_t s : drain(it, 5)) EXPECT_TRUE(seen.insert(s).second) << "sample " << s << " seen twice";
    EXPECT_EQ(it.position().epoch, 0);
  }
  // All of the epoch's used positions: the permutation's first (103 / 4) * 4 = 100 entries.
  const std::vector<int64_t> perm = epoch_permutation(103, 7, 0);
  EXPECT_EQ(seen, std::set<int64_t>(perm.begin(), perm.begin() + 100));
}

TEST(MicroBatches, BatchesCarryTheSourceRows) {
  auto source = std::make_shared<CountingSource>(10);
  auto it = MicroBatchIterator::create(source, ShardSpec{.seed = 1, .micro_batch_size = 3}).value();
  MicroBatch b = it.next().value();
  ASSERT_EQ(b.input_ids.size(), 6u);
  for (int row = 0; row < 3; ++row) {
    EXPECT_EQ(b.input_ids[static_cast<size_t>(2 * row)], b.sample_indices[static_cast<size_t>(row)]);
    EXPECT_EQ(b.targets[static_cast<size_t>(2 * row + 1)], b.sample_indices[static_cast<size_t>(row)] + 1);
  }
  // 10 samples, micro-batch 3: 3 batches per epoch, then the next epoch's order.
  drain(it, 2);
  EXPECT_EQ(it.position().epoch, 0);
  MicroBatch next_epoch = it.next().value();
  EXPECT_EQ(it.position().epoch, 1);
  const std::vector<int64_t> perm1 = epoch_permutation(10, 1, 1);
  EXPECT_EQ(next_epoch.sample_indices, (std::vector<int64_t>(perm1.begin(), perm1.begin() + 3)));
}

TEST(MicroBatches, ResumeMidEpochEqualsUninterrupted) {
  auto source = std::make_shared<CountingSource>(57);
  const ShardSpec spec{.seed = 99, .rank = 1, .world_size = 2, .micro_batch_size = 4};
  auto straight = MicroBatchIterator::create(source, spec).value();
  const std::vector<int64_t> expected = drain(straight, 20);  // crosses several epochs

  auto first = MicroBatchIterator::create(source, spec).value();
  std::vector<int64_t> got = drain(first, 9);
  const std::string saved = first.state().dump();
  auto resumed = MicroBatchIterator::create(source, spec).value();
  ASSERT_OK(resumed.load_state(nlohmann::json::parse(saved)));
  const std::vector<int64_t> rest = drain(resumed, 11);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, expected);
}

TEST(MicroBatches, RefusesAResumeOnOtherDataOrLayout) {
  auto source = std::make_shared<CountingSource>(40);
  auto it = MicroBatchIterator::create(source, ShardSpec{.seed = 5, .world_size = 2, .micro_batch_size = 2}).value();
  nlohmann::json state = it.state();
  state["world_size"] = 4;
  EXPECT_ERROR(it.load_state(state), ErrorCode::kInvalidArgument, "world_size");
  state = it.state();
  state["seed"] = 6;
  EXPECT_ERROR(it.load_state(state), ErrorCode::kInvalidArgument, "seed");
  state = it.state();
  state.erase("index");
  EXPECT_ERROR(it.load_state(state), ErrorCode::kInvalidArgument, "index");

  EXPECT_ERROR(MicroBatchIterator::create(std::make_shared<CountingSource>(5),
                                          ShardSpec{.world_size = 4, .micro_batch_size = 2}),
               ErrorCode::kInvalidArgument, "train_micro_batch_size_per_gpu");
  EXPECT_ERROR(MicroBatchIterator::create(source, ShardSpec{.rank = 2, .world_size = 2}), ErrorCode::kInvalidArgument,
               "rank 2 is outside world size 2");
}

TEST(HeldOut, SplitsTheSamplesTheDocumentedDrawPicks) {
  auto source = std::make_shared<CountingSource>(10);
  const HeldOutSplit split = split_held_out(source, 0.3, 1234, "ten.tok").value();
  ASSERT_EQ(split.held_out->size(), 3);  // ceil(0.3 x 10)
  ASSERT_EQ(split.train->size(), 7);
  // The first 3 of epoch_permutation(10, 1234, 2^64 - 1), ascending; pinned from eval_vs_hf.py's
  // Python transcription of the rule.
  std::vector<int64_t> held, train;
  int64_t ids[2], targets[2];
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_OK(split.held_out->read(i, ids, targets));
    held.push_back(ids[0]);
  }
  for (int64_t i = 0; i < 7; ++i) {
    ASSERT_OK(split.train->read(i, ids, targets));
    train.push_back(ids[0]);
  }
  EXPECT_EQ(held, (std::vector<int64_t>{0, 1, 8}));
  EXPECT_EQ(train, (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 9}));
  EXPECT_ERROR(split.train->read(7, ids, targets), ErrorCode::kInvalidArgument, "outside the 7 samples");
  const std::vector<int64_t> order = epoch_permutation(10, 1234, kHeldOutDraw);
  std::vector<int64_t> first(order.begin(), order.begin() + 3);
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, held);

  EXPECT_ERROR(split_held_out(source, 0.0, 1, "ten.tok"), ErrorCode::kInvalidArgument, "--eval-fraction 0 is outside (0, 1)");
  EXPECT_ERROR(split_held_out(source, 1.0, 1, "ten.tok"), ErrorCode::kInvalidArgument, "outside (0, 1)");
  EXPECT_ERROR(split_held_out(source, 0.95, 1, "ten.tok"), ErrorCode::kInvalidArgument,
               "--eval-fraction 0.95 of ten.tok's 10 samples would leave none for training");
  EXPECT_ERROR(split_held_out(std::make_shared<CountingSource>(1), 0.5, 1, "one.tok"), ErrorCode::kInvalidArgument,
               "one.tok's 1 samples");
}

}  // namespace
}  // namespace tierzero::engine
