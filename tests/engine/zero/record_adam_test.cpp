// The record optimizer (nvme_offload_adam.h) without an NVMe path: every sub-group's record in the
// pinned block, no swap file, no buffer. Against the host-memory optimizer (cpu_offload_adam.cpp),
// which it is to replace, bit for bit over several steps: the 16-bit weights after each step, then
// the master and the moments, for the fp32 master with fp32 and bf16 moments and the compact master
// with 8-bit moments, sub-groups splitting the partition with a short last one, and a record longer
// than a publish slice (stepped a slice at a time); the run header's placement texts are the same.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cpu_adam/adam.h"
#include "engine/layout/layout.h"
#include "engine/zero/internal/nvme_offload_adam.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {
namespace {

// A partition of `numel` elements in sub-groups of `group`.
struct Shape {
  int64_t numel = 0;
  int64_t group = 0;
};

struct Layout {
  bool compact = false;
  at::ScalarType state = at::kFloat;
  std::string name() const {
    return std::string(compact ? "compact" : "fp32") + " master, " + c10::toString(state) + " moments";
  }
};

// What both optimizers are given alike: `weights` is the bf16 compute partition in host memory the
// kernel writes in place (a compact master's high half).
OffloadedAdamSetup common(const cpu_adam::CpuAdam& adam, DeviceCopies& copies, const Shape& shape, const Layout& layout,
                          const at::Tensor& weights) {
  OffloadedAdamSetup setup;
  setup.config.weight_decay = 0.01;
  setup.adam = &adam;
  setup.copies = &copies;
  setup.sub_group_numel = shape.group;
  setup.compact = {.compact_master = layout.compact, .moments_8bit = layout.state == at::kChar, .hi = {}};
  if (layout.compact) setup.compact.hi = weights;
  return setup;
}

// The host-memory optimizer (its tensors unpinned: no GPU here) from the fp32 `master`.
std::unique_ptr<PartitionOptimizer> host_adam(const cpu_adam::CpuAdam& adam, DeviceCopies& copies, const Shape& shape,
                                              const Layout& layout, const at::Tensor& master,
                                              const at::Tensor& weights) {
  CpuOffloadAdamSetup setup{.common = common(adam, copies, shape, layout, weights)};
  const bool int8 = layout.state == at::kChar;
  const auto blocks = static_cast<int64_t>(cpu_adam::moment_block_count(static_cast<size_t>(shape.numel)));
  setup.exp_avg = at::zeros({shape.numel}, layout.state);
  setup.exp_avg_sq = at::zeros({shape.numel}, int8 ? at::kByte : layout.state);
  if (int8) {
    setup.exp_avg_scales = at::zeros({blocks});
    setup.exp_avg_sq_scales = at::zeros({blocks});
  }
  if (layout.compact) {
    setup.residual = at::zeros({shape.numel}, at::kShort);
    setup.load_master = [master](int64_t begin, const at::Tensor& out) {
      out.copy_(master.narrow(0, begin, out.numel()));
    };
  } else {
    setup.master = master.clone();
  }
  return make_cpu_offload_adam(std::move(setup));
}

// The record optimizer without a path (every record in its block) from the fp32 `master`.
std::unique_ptr<NvmeOffloadAdam> record_adam(const cpu_adam::CpuAdam& adam, DeviceCopies& copies, const Shape& shape,
                                             const Layout& layout, const at::Tensor& master,
                                             const at::Tensor& weights) {
  const state_layout::Records records{.partition = shape.numel, .sub_group = shape.group};
  NvmeOffloadAdamSetup setup{
      .common = common(adam, copies, shape, layout, weights),
      .state_dtype = layout.state,
      .memory_records = at::zeros({records.total_bytes(record_layout(layout.state, layout.compact))}, at::kByte),
      .numel = shape.numel,
      .load_master = [master](int64_t begin, const at::Tensor& out) {
        out.copy_(master.narrow(0, begin, out.numel()));
      }};
  return make_nvme_offload_adam(std::move(setup));
}

// `steps` steps of both optimizers on the same gradients: the weights equal after each, then the
// master and the moments.
void expect_equal_runs(const Shape& shape, const Layout& layout, int steps) {
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 2});
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(at::kCPU, false);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor master = at::randn({shape.numel}, gen);
  const at::Tensor host_weights = master.to(at::kBFloat16), record_weights = host_weights.clone();
  std::unique_ptr<PartitionOptimizer> host = host_adam(adam, *copies, shape, layout, master, host_weights);
  std::unique_ptr<NvmeOffloadAdam> records = record_adam(adam, *copies, shape, layout, master, record_weights);
  EXPECT_EQ(records->traffic().resident_bytes, 0u) << "no swap file";
  EXPECT_EQ(records->placement(), host->placement());  // the run header's words stay
  EXPECT_EQ(records->state_placement(), host->state_placement());
  for (int step = 1; step <= steps; ++step) {
    const at::Tensor grad = at::randn({shape.numel}, gen);
    host->step(grad, 0.5, 1e-2, host_weights, nullptr, nullptr);
    records->step(grad, 0.5, 1e-2, record_weights, nullptr, nullptr);
    ASSERT_TRUE(at::equal(record_weights, host_weights)) << layout.name() << ", step " << step;
  }
  EXPECT_EQ(records->step_count(), steps);
  EXPECT_EQ(records->traffic().step_read_bytes + records->traffic().step_written_bytes, 0u);
  AdamPartitionState& want = host->state();
  AdamPartitionState& got = records->state();
  EXPECT_TRUE(at::equal(got.master, want.master)) << layout.name();
  EXPECT_TRUE(at::equal(got.exp_avg, want.exp_avg)) << layout.name();
  EXPECT_TRUE(at::equal(got.exp_avg_sq, want.exp_avg_sq)) << layout.name();
}

// Three records, the last one 904 elements.
TEST(RecordAdamInMemory, EqualsTheHostMemoryOptimizerBitForBit) {
  for (const Layout& layout : {Layout{false, at::kFloat}, Layout{false, at::kBFloat16}, Layout{true, at::kChar}})
    expect_equal_runs({.numel = 5000, .group = 2048}, layout, 4);
}

// A record longer than a publish slice (2^25 elements): stepped a slice at a time, at its offsets in
// the record's parts, the 8-bit moments' scales included.
TEST(RecordAdamInMemory, ARecordSteppedInSlicesEqualsTheHostMemoryOptimizer) {
  constexpr int64_t kSlice = int64_t{1} << 25;
  expect_equal_runs({.numel = kSlice + 5000, .group = kSlice + 2048}, Layout{true, at::kChar}, 2);
}

}  // namespace
}  // namespace tierzero::engine
