// Building the engine from a Hugging Face checkpoint read piece by piece (open_safetensors_params)
// gives the engine the map of whole tensors gives, bit for bit: the partitions right after
// construction and the losses and weights of training, stages 0-3, optimizer on the device or the
// CPU, 1 and 2 ranks (Gloo). The source itself: ranges of bf16 / fp16 / fp32 tensors, a sharded
// checkpoint with an index, a tensor of many pieces read on several threads, and its errors.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "engine/zero/zero_engine.h"
#include "rank_launcher.h"
#include "safetensors_fixture.h"
#include "scenario.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

// The test model's random weights in `dtype`, written to `dir` as two shards and an index.
void write_checkpoint(const std::string& dir, bool tied, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> params = init_parameters(test_model_config(tied), 42, dtype, at::kCPU);
  std::map<std::string, at::Tensor> first, second;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& [name, t] : params) {
    const bool in_first = name.find("layers.1.") == std::string::npos;
    (in_first ? first : second)[name] = t;
    weight_map[name] = in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir + "/model-00001-of-00002.safetensors", first);
  write_safetensors(dir + "/model-00002-of-00002.safetensors", second);
  std::ofstream(dir + "/model.safetensors.index.json") << nlohmann::json{{"weight_map", weight_map}}.dump();
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    write_checkpoint(dir_, /*tied=*/true, at::kBFloat16);
  }
  void TearDown() override { remove_tree(dir_); }
  std::string dir_;
};

TEST_F(Checkpoint, SourceReadsRangesAsLoadHfWeightsConverts) {
  const std::map<std::string, at::Tensor> whole = value_or_throw(load_hf_weights(dir_, at::kFloat, at::kCPU));
  std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(dir_));
  for (const auto& [name, t] : whole) {
    ASSERT_EQ(source->shape(name), t.sizes().vec()) << name;
    const at::Tensor flat = t.reshape(-1);
    const int64_t first = flat.numel() / 3, count = flat.numel() - first - 1;
    at::Tensor got = at::full({count}, -1.0f);
    ASSERT_OK(source->read(name, first, {got.data_ptr<float>(), static_cast<size_t>(count)})) << name;
    EXPECT_TRUE(at::equal(got, flat.narrow(0, first, count))) << name;
  }
  EXPECT_FALSE(source->shape("lm_head.weight").has_value());  // tied: not in the checkpoint
}

TEST(ParamSource, Fp16AndFp32FilesAndASingleFile) {
  for (at::ScalarType dtype : {at::kHalf, at::kFloat}) {
    const std::string dir = make_temp_dir();
    std::map<std::string, at::Tensor> tensors = {{"a", at::randn({3, 5}).to(dtype)}, {"b", at::randn({7}).to(dtype)}};
    write_safetensors(dir + "/model.safetensors", tensors);
    std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(dir));
    at::Tensor got = at::empty({4});
    ASSERT_OK(source->read("a", 9, {got.data_ptr<float>(), 4}));
    EXPECT_TRUE(at::equal(got, tensors["a"].reshape(-1).narrow(0, 9, 4).to(at::kFloat))) << c10::toString(dtype);
    remove_tree(dir);
  }
}

// A range of many 2 MiB pieces, read and converted on 4 threads, from an offset inside a piece.
TEST(ParamSource, ManyPiecesOnThreads) {
  const int threads = at::get_num_threads();
  at::set_num_threads(4);
  for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    const std::string dir = make_temp_dir();
    const std::map<std::string, at::Tensor> tensors = {{"w", at::randn({3'000'001}).to(dtype)}};
    write_safetensors(dir + "/model.safetensors", tensors);
    std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(dir));
    const int64_t first = 12'345, count = 3'000'001 - first - 7;
    at::Tensor got = at::full({count}, -1.0f);
    ASSERT_OK(source->read("w", first, {got.data_ptr<float>(), static_cast<size_t>(count)}));
    EXPECT_TRUE(at::equal(got, tensors.at("w").narrow(0, first, count).to(at::kFloat))) << c10::toString(dtype);
    remove_tree(dir);
  }
  at::set_num_threads(threads);
}

TEST_F(Checkpoint, SourceErrorsNameTheTensorAndTheFix) {
  std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(dir_));
  at::Tensor out = at::empty({8});
  Status past = source->read("model.norm.weight", 30, {out.data_ptr<float>(), 8});
  EXPECT_EQ(past.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(past.message().find("model.norm.weight"), std::string::npos) << past.to_string();
  EXPECT_EQ(source->read("nope", 0, {out.data_ptr<float>(), 1}).code(), ErrorCode::kNotFound);

  // A config that does not match the weights: every problem named.
  std::unique_ptr<FunctionalModel> untied = make_causal_lm(test_model_config(/*tied=*/false));
  Status mismatch = check_params(*untied, *source);
  EXPECT_NE(mismatch.message().find("lm_head.weight missing"), std::string::npos) << mismatch.to_string();

  const std::string empty = make_temp_dir();
  Result<std::unique_ptr<ParamSource>> none = open_safetensors_params(empty);
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.status().message().find("model.safetensors"), std::string::npos);
  remove_tree(empty);
}

// Right after construction: master partition and compute parameters equal, for every stage.
TEST_F(Checkpoint, EnginePartitionsEqualTheMapBuiltEngine) {
  std::unique_ptr<FunctionalModel> model = make_causal_lm(test_model_config(true));
  const std::map<std::string, at::Tensor> whole = value_or_throw(load_hf_weights(dir_, at::kFloat, at::kCPU));
  for (int stage : {0, 1, 2, 3}) {
    for (bool offload : {false, true}) {
      ZeroEngineOptions options;
      options.partition.stage = stage;
      options.partition.compute_dtype = at::kBFloat16;
      options.partition.persistence_threshold = 64;
      options.offload_optimizer = offload;
      std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
      std::unique_ptr<ParamSource> source = value_or_throw(open_safetensors_params(dir_));
      ZeroEngine streamed(*model, *source, options, *comm);
      ZeroEngine mapped(*model, whole, options, *comm);
      const std::string what = "stage " + std::to_string(stage) + (offload ? " offload" : "");
      EXPECT_TRUE(at::equal(streamed.optimizer().state().master, mapped.optimizer().state().master)) << what;
      EXPECT_TRUE(at::equal(streamed.partitioner().compute_partition(), mapped.partitioner().compute_partition()))
          << what;
      for (size_t unit = 0; unit < model->num_units(); ++unit) {
        std::vector<at::Tensor> a = streamed.partitioner().fetch(unit), b = mapped.partitioner().fetch(unit);
        for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << what << " unit " << unit;
        streamed.partitioner().release(unit);
        mapped.partitioner().release(unit);
      }
    }
  }
}

Scenario streamed_scenario(int stage, bool offload, const std::string& dir) {
  Scenario s;
  s.stage = stage;
  s.offload = offload;
  s.dtype = "bf16";
  s.steps = 4;
  s.accumulation = 2;
  s.weights_dir = dir;
  s.streamed = true;
  return s;
}

TEST_F(Checkpoint, OneRankTrainsAsTheMapBuiltEngine) {
  for (int stage : {1, 2, 3}) {
    Scenario s = streamed_scenario(stage, /*offload=*/stage != 2, dir_);
    std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
    const TrainTrace streamed = train_with_engine(s, *comm);
    s.streamed = false;
    EXPECT_EQ(compare_exactly(streamed, train_with_engine(s, *comm)), "") << s.name();
  }
}

TEST_F(Checkpoint, TwoRanksTrainAsTheMapBuiltEngine) {
  for (int stage : {1, 2, 3}) {
    Scenario s = streamed_scenario(stage, /*offload=*/stage != 1, dir_);
    s.world_size = 2;
    s.compare_streamed = true;
    EXPECT_EQ(run_ranks(s, 0.0, 0.0), "") << s.name();
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
