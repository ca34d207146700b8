// OffloadedGrads in host mode (offloaded_grads.h), on the CPU: a window that is the step's only one
// (the window pass, or one micro-batch a step) lands its buckets final, straight into the partition,
// and gives the partition and the squared norm the add path gives bit for bit (0 + x * s == x * s);
// a range that lands twice in that window is added to, and what it never landed is zeroed (the
// partition is not zeroed before it); micro-batches add onto a zeroed partition. References are
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

// The host adds a landing onto the partition: its value plus the bucket rounded to the partition's
// dtype (on the device, before it leaves) times kScale, in fp32, then rounded.
at::Tensor added(const at::Tensor& partition_values, const at::Tensor& bucket_values, at::ScalarType dtype) {
  return (partition_values.to(at::kFloat) + bucket_values.to(dtype).to(at::kFloat) * kScale).to(dtype);
}

TEST_P(OffloadedGradsHost, ARangeLandingTwiceInTheOnlyWindowIsAddedToAndTheRestIsZeroed) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor x = bucket_values(2), y = bucket_values(3);
  Landing tied(dtype);
  tied.pipeline->partition().fill_(7.0);  // the last step's gradient: a final window does not zero first
  tied.grads->begin_micro_batch(/*last=*/true);
  tied.take(x, {kRuns[0]});       // partition [0, 600)
  tied.take(y, {{500, 0, 300}});  // [500, 600) again: added; [600, 800) first: overwritten
  tied.grads->drain();            // [800, 1000) never landed: zeroed

  const at::Tensor first = (x.narrow(0, 400, 600) * kScale).to(dtype);
  const at::Tensor expected =
      at::cat({first.narrow(0, 0, 500), added(first.narrow(0, 500, 100), y.narrow(0, 0, 100), dtype),
               (y.narrow(0, 100, 200) * kScale).to(dtype), at::zeros({200}, dtype)});
  EXPECT_TRUE(at::equal(tied.pipeline->partition(), expected));
}

TEST_P(OffloadedGradsHost, AWindowAfterTheOnlyOneAddsOntoWhatItLandedAndZeroesTheRest) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor x = bucket_values(4), y = bucket_values(5);
  Landing landing(dtype);
  landing.pipeline->partition().fill_(7.0);
  landing.grads->begin_micro_batch(/*last=*/true);
  landing.take(x, {kRuns[0]});                      // final: [0, 600)
  landing.grads->begin_micro_batch(/*last=*/true);  // step() after more micro-batches than configured
  EXPECT_FALSE(landing.grads->lands_final());
  landing.take(y, kRuns);  // added everywhere, onto [0, 600)'s x and [600, 1000)'s zeros
  landing.grads->drain();

  const at::Tensor first = (x.narrow(0, 400, 600) * kScale).to(dtype);
  const at::Tensor expected =
      at::cat({added(first, y.narrow(0, 400, 600), dtype), added(at::zeros({400}, dtype), y.narrow(0, 0, 400), dtype)});
  EXPECT_TRUE(at::equal(landing.pipeline->partition(), expected));
}

TEST_P(OffloadedGradsHost, ResetStartsAnotherOnlyWindowOverwritingTheLast) {
  Landing landing(GetParam());
  landing.grads->begin_micro_batch(/*last=*/true);
  landing.take(bucket_values(6), kRuns);
  landing.grads->drain();
  landing.grads->reset();
  const at::Tensor x = bucket_values(7);
  landing.grads->begin_micro_batch(/*last=*/true);
  EXPECT_TRUE(landing.grads->lands_final());
  landing.take(x, kRuns);
  landing.grads->drain();
  EXPECT_TRUE(at::equal(landing.pipeline->partition(), placed(x).to(GetParam())));
}

TEST_P(OffloadedGradsHost, MicroBatchesAfterAResetAddOntoAZeroedPartition) {
  const at::ScalarType dtype = GetParam();
  const at::Tensor x = bucket_values(8), y = bucket_values(9);
  Landing landing(dtype);
  landing.pipeline->partition().fill_(7.0);
  landing.grads->begin_micro_batch(/*last=*/false);
  landing.take(x, kRuns);
  landing.grads->begin_micro_batch(/*last=*/true);
  landing.take(y, kRuns);
  landing.grads->drain();
  const at::Tensor expected =
      added(added(at::zeros({kNumel}, dtype), placed(x) / kScale, dtype), placed(y) / kScale, dtype);
  EXPECT_TRUE(at::equal(landing.pipeline->partition(), expected));
}

INSTANTIATE_TEST_SUITE_P(PartitionDtypes, OffloadedGradsHost, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return info.param == at::kFloat ? std::string("fp32") : std::string("bf16");
                         });

}  // namespace
}  // namespace tierzero::engine
