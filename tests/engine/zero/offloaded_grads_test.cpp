// OffloadedGrads in host mode (offloaded_grads.h), on the CPU: a window that is the step's only one
// (the window pass, or one micro-batch a step) lands its buckets final, straight into the partition,
// and gives the partition and the squared norm the add path gives bit for bit (0 + x * s == x * s);
// a range that lands twice in that window is added to; two micro-batches add. References are
// LibTorch's own fp32 arithmetic and round-to-nearest-even casts.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_grad_pipeline.h"
#include "engine/zero/internal/offloaded_grads.h"

namespace tierzero::engine {
namespace {

constexpr int64_t kNumel = 1000;
constexpr float kScale = 0.5f;  // 1 / two ranks: exact, as the engine's power-of-two world sizes

// A pipeline over a host partition of `dtype` with two 256-byte staging slots (buckets land through
// them in 64-element pieces), and the OffloadedGrads (host mode) over it.
struct Landing {
  explicit Landing(at::ScalarType dtype) {
    GradLanding landing;
    landing.partition = at::zeros({kNumel}, at::TensorOptions().dtype(dtype));
    pipeline = std::make_unique<HostGradPipeline>(std::move(landing), staging, *copies, adam, kScale, true);
    grads = std::make_unique<OffloadedGrads>(*pipeline, at::Tensor());
  }
  // Takes `bucket` for `runs` as a bucket launched now (host mode: it lands).
  void take(const at::Tensor& bucket, std::vector<LandingRun> runs) {
    grads->take(bucket, std::move(runs), grads->lands_now());
  }
  double sq_norm() {
    grads->drain();
    return pipeline->grad_stats().sq_norm;
  }

  std::unique_ptr<offload::DeviceCopies> copies = offload::DeviceCopies::create(at::kCPU, false);
  cpu_adam::CpuAdam adam{cpu_adam::CpuAdamOptions{.threads = 2}};
  std::vector<at::Tensor> staging{at::empty({256}, at::kByte), at::empty({256}, at::kByte)};  // outlives the pipeline
  std::unique_ptr<HostGradPipeline> pipeline;
  std::unique_ptr<OffloadedGrads> grads;
};

// A bucket of kNumel fp32 values with many that fall between two bf16 values; partition
// [0, 600) takes bucket [400, 1000), partition [600, 1000) takes bucket [0, 400).
at::Tensor bucket_values(int seed) {
  at::manual_seed(seed);
  return at::randn({kNumel}, at::kFloat) * 3.0;
}
const std::vector<LandingRun> kRuns{{0, 400, 600}, {600, 0, 400}};

// The bucket's values where kRuns put them in the partition, times kScale (exact).
at::Tensor placed(const at::Tensor& bucket) {
  return at::cat({bucket.narrow(0, 400, 600), bucket.narrow(0, 0, 400)}) * kScale;
}

double sq_norm_of(const at::Tensor& partition) { return partition.to(at::kDouble).square().sum().item<double>(); }

class OffloadedGradsHost : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(OffloadedGradsHost, TheOnlyWindowLandsFinalWithTheAddPathsBits) {
  const at::Tensor x = bucket_values(1);
  Landing only(GetParam());
  only.grads->begin_micro_batch(/*last=*/true);
  EXPECT_TRUE(only.grads->lands_final());
  only.take(x, kRuns);
  const double only_norm = only.sq_norm();

  Landing added(GetParam());  // two micro-batches: a zero gradient, then x, both added
  added.grads->begin_micro_batch(/*last=*/false);
  EXPECT_FALSE(added.grads->lands_final());
  added.take(at::zeros_like(x), kRuns);
  added.grads->begin_micro_batch(/*last=*/true);
  EXPECT_FALSE(added.grads->lands_final()) << "a window after another micro-batch adds";
  added.take(x, kRuns);
  const double added_norm = added.sq_norm();

  const at::Tensor expected = placed(x).to(GetParam());  // rounded once, to nearest even
  EXPECT_TRUE(at::equal(only.pipeline->partition(), expected));
  EXPECT_TRUE(at::equal(added.pipeline->partition(), expected));
  EXPECT_EQ(only_norm, added_norm) << "the norms are recorded for the same pieces, in the same order";
  EXPECT_NEAR(only_norm, sq_norm_of(expected), 1e-9 * sq_norm_of(expected));
}

TEST_P(OffloadedGradsHost, ARangeLandingTwiceInTheOnlyWindowIsAddedTo) {
  const at::Tensor x = bucket_values(2), y = bucket_values(3);
  Landing tied(GetParam());
  tied.grads->begin_micro_batch(/*last=*/true);
  tied.take(x, kRuns);
  tied.take(y, {{600, 0, 400}});  // partition [600, 1000) again: added, not overwritten
  tied.grads->drain();

  // The second landing is added on the host: the partition's value plus y rounded to the
  // partition's dtype (on the device, before it leaves) times kScale, in fp32, then rounded.
  const at::Tensor first = placed(x).to(GetParam());
  const at::Tensor second_y = y.narrow(0, 0, 400).to(GetParam()).to(at::kFloat) * kScale;
  const at::Tensor tail = (first.narrow(0, 600, 400).to(at::kFloat) + second_y).to(GetParam());
  const at::Tensor expected = at::cat({first.narrow(0, 0, 600), tail});
  EXPECT_TRUE(at::equal(tied.pipeline->partition(), expected));
}

TEST_P(OffloadedGradsHost, ResetStartsAnotherOnlyWindowOverwritingTheLast) {
  Landing landing(GetParam());
  landing.grads->begin_micro_batch(/*last=*/true);
  landing.take(bucket_values(4), kRuns);
  landing.grads->drain();
  landing.grads->reset();
  const at::Tensor x = bucket_values(5);
  landing.grads->begin_micro_batch(/*last=*/true);
  EXPECT_TRUE(landing.grads->lands_final());
  landing.take(x, kRuns);
  landing.grads->drain();
  EXPECT_TRUE(at::equal(landing.pipeline->partition(), placed(x).to(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(PartitionDtypes, OffloadedGradsHost, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return info.param == at::kFloat ? std::string("fp32") : std::string("bf16");
                         });

}  // namespace
}  // namespace tierzero::engine
