// The engine's state right after start-up, against references the engine does not compute: a
// stage 3 engine with a compact master and 8-bit moments (the 14B's optimizer state), its optimizer
// in host memory or on NVMe, its parameters offloaded to pinned memory or not, built from random
// init or from a bf16 safetensors directory, on 3 intra-op threads, holds
//   the master weights: the reference's fp32 values bit for bit (random init: LibTorch's normal_
//     over each whole tensor, init_parameters; a checkpoint: its bf16 values, written by hand);
//   the 16-bit weights every unit gathers: those values rounded to bf16 ties away from zero (the
//     compact master's high half), computed here on the bits;
//   the moments: zero.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <tuple>

#include "engine/zero/zero_engine.h"
#include "safetensors_fixture.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"

namespace tierzero::engine::testing {
namespace {

constexpr uint64_t kSeed = 1234;
constexpr int64_t kSubGroup = 2560;  // a multiple of cpu_adam::kMomentBlock; the shard spans several

// The scenarios' model, wider: tensors of up to 32 Ki elements, the shard about 90 Ki (35 sub-groups).
ModelConfig wide_config() {
  ModelConfig config = test_model_config(/*tied=*/false);
  config.hidden_size *= 4;
  config.intermediate_size *= 4;
  config.head_dim *= 4;
  return config;
}

// `values` (fp32) rounded to bf16 to nearest with ties away from zero, on the bits: for a finite
// value, adding half a bf16 ulp to its magnitude and truncating rounds half up in magnitude.
at::Tensor bf16_ties_away(const at::Tensor& values) {
  const at::Tensor flat = values.contiguous().reshape(-1);
  at::Tensor out = at::empty({flat.numel()}, at::kBFloat16);
  const float* in = flat.const_data_ptr<float>();
  auto* bits = static_cast<uint16_t*>(out.data_ptr());
  for (int64_t i = 0; i < flat.numel(); ++i) {
    uint32_t u = 0;
    std::memcpy(&u, in + i, 4);
    bits[i] = static_cast<uint16_t>((u + 0x8000u) >> 16);
  }
  return out.view(values.sizes());
}

enum class From { kRandomInit, kCheckpoint };

struct Case {
  From from;
  bool nvme;            // the optimizer's records on NVMe (one kept in pinned memory), else in host memory
  bool offload_params;  // the parameter shard in the pinned tier, else the engine's own host tensor
};

class StartupBits : public ::testing::TestWithParam<std::tuple<From, bool, bool>> {
 protected:
  void SetUp() override {
    threads_ = at::get_num_threads();
    at::set_num_threads(3);
  }
  void TearDown() override { at::set_num_threads(threads_); }

 private:
  int threads_ = 1;
};

TEST_P(StartupBits, StateEqualsTheReference) {
  const Case c{std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam())};
  const ModelConfig config = wide_config();
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  test_support::ScratchDir dir("startup-bits", test_support::working_dir_root());

  std::map<std::string, at::Tensor> reference;  // fp32
  std::unique_ptr<ParamSource> source;
  if (c.from == From::kRandomInit) {
    reference = init_parameters(config, kSeed, at::kFloat, at::kCPU);
    source = random_init_params(config, kSeed);
  } else {
    const std::map<std::string, at::Tensor> bf16 = init_parameters(config, kSeed, at::kBFloat16, at::kCPU);
    write_safetensors(dir.file("model.safetensors"), bf16);
    for (const auto& [name, t] : bf16) reference[name] = t.to(at::kFloat);
    source = value_or_throw(open_safetensors_params(dir.path()));
  }

  ZeroEngineOptions options;
  options.partition.stage = 3;
  options.partition.compute_dtype = at::kBFloat16;
  options.partition.grad_dtype = at::kFloat;
  options.partition.persistence_threshold = 300;  // the norms stay gathered, from the shard
  options.partition.offload_params = c.offload_params;
  options.offload_optimizer = true;
  options.master_layout = MasterLayout::kCompact;
  options.optimizer_state_dtype = at::kChar;
  options.offload_grad_dtype = at::kBFloat16;
  options.sub_group_size = kSubGroup;
  if (c.nvme) {
    options.nvme_optimizer = {
        .paths = {dir.path()}, .buffer_count = 2, .pipeline_read = true, .pipeline_write = true, .io = {}};
    options.optimizer_records_in_memory = 1;
  }
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  ZeroEngine engine(*model, *source, options, *comm);

  const std::map<std::string, at::Tensor> master = engine.master_params();
  ASSERT_EQ(master.size(), reference.size());
  for (const auto& [name, want] : reference) {
    ASSERT_TRUE(master.count(name)) << name;
    EXPECT_TRUE(at::equal(master.at(name).reshape(want.sizes()), want)) << "master " << name;
  }
  for (size_t unit = 0; unit < model->num_units(); ++unit) {
    const std::vector<at::Tensor> got = engine.partitioner().fetch(unit);
    const std::vector<ParamSpec>& specs = model->unit_params(unit);
    ASSERT_EQ(got.size(), specs.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const at::Tensor& want = reference.at(specs[i].name);
      EXPECT_TRUE(at::equal(got[i].reshape(want.sizes()), bf16_ties_away(want))) << "16-bit " << specs[i].name;
    }
    engine.partitioner().release(unit);
  }
  AdamPartitionState& state = engine.optimizer().state();
  EXPECT_EQ(at::count_nonzero(state.exp_avg).item<int64_t>(), 0);
  EXPECT_EQ(at::count_nonzero(state.exp_avg_sq).item<int64_t>(), 0);
  EXPECT_EQ(state.exp_avg.numel(), engine.partitioner().partition_numel());
}

INSTANTIATE_TEST_SUITE_P(Sources, StartupBits,
                         ::testing::Combine(::testing::Values(From::kRandomInit, From::kCheckpoint), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == From::kRandomInit ? "RandomInit"
                                                                                           : "Checkpoint") +
                                  (std::get<1>(info.param) ? "_Nvme" : "_Host") +
                                  (std::get<2>(info.param) ? "_OffloadedParams" : "_HostShard");
                         });

}  // namespace
}  // namespace tierzero::engine::testing
