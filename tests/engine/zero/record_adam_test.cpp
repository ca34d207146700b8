// The record optimizer (record_adam.h) without an NVMe path (device "cpu"): every sub-group's
// record in the pinned block, no swap file, no buffer. Against the same optimizer streaming every
// record through two buffers from a swap file, bit for bit over several steps: the 16-bit weights
// after each step, then the master and the moments, for the fp32 master with fp32 and bf16 moments
// and the compact master with 8-bit moments, sub-groups splitting the partition with a short last
// one, and a record longer than a publish slice (stepped a slice at a time in memory, whole when
// streamed); the run header's words for the state in host memory.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cpu_adam/adam.h"
#include "engine/layout/layout.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/record_adam.h"
#include "tests/support/scratch_dir.h"

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

// The optimizer from the fp32 `master`, writing the bf16 compute partition `weights` in host memory
// in place (a compact master's high half): without `dir`, every record in memory; with it, every
// record streamed through two buffers from a swap file there.
std::unique_ptr<PartitionOptimizer> record_adam(const cpu_adam::CpuAdam& adam, DeviceCopies& copies, const Shape& shape,
                                                const Layout& layout, const at::Tensor& master,
                                                const at::Tensor& weights, const std::string& dir = "") {
  const state_layout::Records records{.partition = shape.numel, .sub_group = shape.group};
  const state_layout::Layout bytes = record_layout(layout.state, layout.compact);
  RecordAdamSetup setup;
  setup.config.weight_decay = 0.01;
  setup.adam = &adam;
  setup.copies = &copies;
  setup.sub_group_numel = shape.group;
  setup.compact = {.compact_master = layout.compact, .moments_8bit = layout.state == at::kChar, .hi = {}};
  if (layout.compact) setup.compact.hi = weights;
  setup.state_dtype = layout.state;
  if (dir.empty()) {
    setup.memory_records = at::zeros({records.bytes(bytes, 0, records.count())}, at::kByte);
  } else {
    setup.nvme = {.paths = {dir}, .buffer_count = 2};
    for (int b = 0; b < 2; ++b) setup.buffers.push_back(at::zeros({bytes.record_bytes(records.group())}, at::kByte));
  }
  setup.numel = shape.numel;
  setup.load_master = [master](int64_t begin, const at::Tensor& out) {
    out.copy_(master.narrow(0, begin, out.numel()));
  };
  return make_record_adam(std::move(setup));
}

// `steps` steps of both on the same gradients: the weights equal after each, then the master and the
// moments.
void expect_equal_runs(const Shape& shape, const Layout& layout, int steps) {
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 2});
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(at::kCPU, false);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor master = at::randn({shape.numel}, gen);
  const at::Tensor streamed_weights = master.to(at::kBFloat16), memory_weights = streamed_weights.clone();
  test_support::ScratchDir dir;
  std::unique_ptr<PartitionOptimizer> streamed =
      record_adam(adam, *copies, shape, layout, master, streamed_weights, dir.path());
  std::unique_ptr<PartitionOptimizer> in_memory = record_adam(adam, *copies, shape, layout, master, memory_weights);
  EXPECT_GT(streamed->traffic().resident_bytes, 0u);
  EXPECT_EQ(in_memory->traffic().resident_bytes, 0u) << "no swap file";
  EXPECT_EQ(in_memory->placement().rfind("cpu (", 0), 0u) << in_memory->placement();
  EXPECT_EQ(in_memory->state_placement().rfind("host memory: " + std::string(layout.compact ? "compact" : "fp32"), 0),
            0u)
      << in_memory->state_placement();
  for (int step = 1; step <= steps; ++step) {
    const at::Tensor grad = at::randn({shape.numel}, gen);
    streamed->step(grad, 0.5, 1e-2, streamed_weights, nullptr, nullptr);
    in_memory->step(grad, 0.5, 1e-2, memory_weights, nullptr, nullptr);
    ASSERT_TRUE(at::equal(memory_weights, streamed_weights)) << layout.name() << ", step " << step;
  }
  EXPECT_EQ(in_memory->step_count(), steps);
  EXPECT_EQ(in_memory->traffic().step_read_bytes + in_memory->traffic().step_written_bytes, 0u);
  AdamPartitionState& want = streamed->state();
  AdamPartitionState& got = in_memory->state();
  EXPECT_TRUE(at::equal(got.master, want.master)) << layout.name();
  EXPECT_TRUE(at::equal(got.exp_avg, want.exp_avg)) << layout.name();
  EXPECT_TRUE(at::equal(got.exp_avg_sq, want.exp_avg_sq)) << layout.name();
}

// Three records, the last one 904 elements.
TEST(RecordAdamInMemory, EqualsTheStreamedRecordsBitForBit) {
  for (const Layout& layout : {Layout{false, at::kFloat}, Layout{false, at::kBFloat16}, Layout{true, at::kChar}})
    expect_equal_runs({.numel = 5000, .group = 2048}, layout, 4);
}

// A record longer than a publish slice (2^25 elements): stepped a slice at a time, at its offsets in
// the record's parts, the 8-bit moments' scales included.
TEST(RecordAdamInMemory, ARecordSteppedInSlicesEqualsTheStreamedRecord) {
  constexpr int64_t kSlice = int64_t{1} << 25;
  expect_equal_runs({.numel = kSlice + 5000, .group = kSlice + 2048}, Layout{true, at::kChar}, 2);
}

}  // namespace
}  // namespace tierzero::engine
