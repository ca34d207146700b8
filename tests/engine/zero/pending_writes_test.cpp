// The next forward waits only for what it reads: after the optimizer's per-sub-group copies into the
// compute partition, a unit's fetch (stages 0-2) or gather (stage 3) orders the compute stream after
// exactly the copies overlapping its parameters, each once; compute_partition() after all the rest.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/partitioner.h"
#include "scenario.h"

namespace tierzero::engine::testing {
namespace {

// A copy that counts how often the compute stream was ordered after it.
class CountingDone final : public CopyDone {
 public:
  explicit CountingDone(int& ordered) : ordered_(ordered) {}
  void wait_host() override {}
  void order_current_stream() override { ++ordered_; }
  double seconds() override { return 0.0; }

 private:
  int& ordered_;
};

TEST(PendingWrites, OrdersOverlappingWritesOnce) {
  std::vector<int> ordered(3, 0);
  PendingWrites pending;
  pending.add({{0, 10, std::make_shared<CountingDone>(ordered[0])},
               {10, 10, std::make_shared<CountingDone>(ordered[1])},
               {20, 5, std::make_shared<CountingDone>(ordered[2])}});
  pending.order_range(10, 12);
  EXPECT_EQ(ordered, (std::vector<int>{0, 1, 0}));
  pending.order_range(5, 15);  // the second is no longer pending
  EXPECT_EQ(ordered, (std::vector<int>{1, 1, 0}));
  pending.order_range(25, 30);  // touches nothing
  EXPECT_EQ(pending.size(), 1u);
  pending.order_all();
  EXPECT_EQ(ordered, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(pending.size(), 0u);
}

// For each stage: sub-groups of 1000 elements over the partition; fetching unit 0 (the embedding,
// first in the partition) orders only the sub-groups holding it.
TEST(PendingWrites, FirstUnitWaitsOnlyForItsSubGroups) {
  const ModelConfig config = test_model_config(/*tied=*/false);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  const std::map<std::string, at::Tensor> params = init_parameters(config, 1, at::kFloat, at::kCPU);
  const int64_t embed_numel = config.vocab_size * config.hidden_size;
  for (int stage : {0, 1, 2, 3}) {
    std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
    PartitionOptions options;
    options.stage = stage;
    options.persistence_threshold = 0;
    std::unique_ptr<ParamSource> source = map_param_source(params);
    std::unique_ptr<Partitioner> partitioner = make_partitioner(*model, *source, options, *comm);
    constexpr int64_t kSubGroup = 1000;
    const int64_t numel = partitioner->partition_numel();
    std::vector<int> ordered((numel + kSubGroup - 1) / kSubGroup, 0);
    std::vector<PartitionWrite> writes;
    for (int64_t begin = 0, i = 0; begin < numel; begin += kSubGroup, ++i)
      writes.push_back({begin, std::min(kSubGroup, numel - begin), std::make_shared<CountingDone>(ordered[i])});
    partitioner->defer_reads(std::move(writes));

    partitioner->fetch(0);
    const int64_t embed_groups = (embed_numel + kSubGroup - 1) / kSubGroup;
    for (size_t i = 0; i < ordered.size(); ++i)
      EXPECT_EQ(ordered[i], static_cast<int64_t>(i) < embed_groups ? 1 : 0) << "stage " << stage << " group " << i;
    partitioner->release(0);
    partitioner->fetch(0);  // already ordered: nothing again
    partitioner->release(0);
    partitioner->compute_partition();
    for (size_t i = 0; i < ordered.size(); ++i) EXPECT_EQ(ordered[i], 1) << "stage " << stage << " group " << i;
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
