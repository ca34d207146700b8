// The offloaded optimizer's GPU share (tierzero.gpu_optimizer_share, device_share.h):
//   which pieces the device takes (device_pieces), against counts worked by hand;
//   on the CPU, the share's whole path (the pieces split off, their state copied to the device slots a
//     chunk at a time and back, finished and announced in order, released) with the device's kernel
//     replaced by cpu_adam::step_portable on the host queue: every master weight, moment and loss the
//     same bits as the run where the CPU steps everything, the state in host memory or on NVMe
//     (records in memory only are shared), fp32 or 8-bit moments, fp32 or bf16 gradients;
//   on CUDA (skips without a device), the same with cpu_adam::step_on_gpu;
//   and the engine's refusals.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/layout/layout.h"
#include "engine/zero/internal/device_share.h"
#include "offload_engine.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

using test_support::ScratchDir;

TEST(DevicePieces, KeepTheDevicesElementsNearestTheShare) {
  // Five equal pieces at 0.4: after each piece the target is 0.4, 0.8, 1.2, 1.6, 2.0 pieces; the
  // device takes a piece when that lands nearer: the 2nd (1 vs 0.8) and the 4th (2 vs 1.6).
  const std::vector<int64_t> equal(5, 100);
  EXPECT_EQ(device_pieces(equal, std::vector<bool>(5, true), 0.4),
            (std::vector<bool>{false, true, false, true, false}));
  // Pieces that may not be held are passed over; the next candidates catch up (targets 1.2, 1.6: the
  // 3rd and the 4th land at 1 and 2, nearer than 0 and 1).
  EXPECT_EQ(device_pieces(equal, {true, false, true, true, true}, 0.4),
            (std::vector<bool>{false, false, true, true, false}));
  // Uneven pieces at 0.3 (targets 3, 33, 36, 96): the 100 would overshoot 33 by more than 33, the 10
  // after it lands at 10 (26 short of 36, nearer than 36), the 200 would land at 210 (114 over 96,
  // farther than 86 short).
  EXPECT_EQ(device_pieces(std::vector<int64_t>{10, 100, 10, 200}, std::vector<bool>(4, true), 0.3),
            (std::vector<bool>{false, false, true, false}));
}

TEST(DeviceShareSlots, AreWhatThePlannerCounts) {
  // A 14B-like partition in sub-groups of 2e8 (chunks of 16 Mi), 8-bit moments, bf16 gradients: the
  // engine's allocation and engine/layout's figure the planner lists (two slots of 16 Mi elements:
  // 2 + 2 + 2 + 1 + 1 bytes and two 4-byte scales per 256, each part rounded to 256 bytes).
  const state_layout::HostShape shape{
      .partition = 14'770'000'000,
      .sub_group_size = 200'000'000,
      .layout = {.compact_master = true, .moments = state_layout::Moments::kInt8Blockwise},
      .optimizer_offloaded = true,
      .host_grad_bytes = 2,
      .gpu_optimizer_share = 0.25};
  const int64_t chunk = state_layout::gpu_share_chunk(shape.records());
  ASSERT_EQ(chunk, int64_t{1} << 24);
  const std::unique_ptr<offload::DeviceCopies> copies = offload::DeviceCopies::create(at::kCPU, /*timing=*/false);
  const DeviceShare share({.share = 0.25,
                           .copies = copies.get(),
                           .layout = shape.layout,
                           .grads = ElementType::kBF16,
                           .chunk = chunk,
                           .kernel = {}});
  const int64_t per_slot = (2 + 2 + 2 + 1 + 1) * chunk + 2 * 4 * (chunk / 256);
  EXPECT_EQ(share.device_bytes(), 2 * per_slot);
  EXPECT_EQ(static_cast<uint64_t>(share.device_bytes()), state_layout::gpu_share_device_bytes(shape));
  // A partition of one short sub-group: its slot is the sub-group rounded up to whole blocks.
  EXPECT_EQ(state_layout::gpu_share_chunk({.partition = 1000, .sub_group = 2560}), 1024);
}

// A compact-master stage 3 run of `steps` steps: its losses, and its master weights and moments
// (fp32 views, compared as bits).
struct Trained {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> master;
  at::Tensor exp_avg, exp_avg_sq;
  int64_t device_elements = 0;  // stepped on the device over the run
};

Trained train(OffloadEngineSpec spec, int steps) {
  OffloadEngine e(spec);
  Trained out;
  for (int step = 0; step < steps; ++step) {
    out.losses.push_back(e.train_step(step));
    e.engine->finish_step();
    out.device_elements += e.engine->optimizer().last_device_share().elements;
  }
  out.master = e.engine->master_params();
  out.exp_avg = e.state().exp_avg.clone();
  out.exp_avg_sq = e.state().exp_avg_sq.clone();
  return out;
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.contiguous().cpu(), y = b.contiguous().cpu();
  return x.nbytes() == y.nbytes() && std::memcmp(x.const_data_ptr(), y.const_data_ptr(), x.nbytes()) == 0;
}

// The share's run against the run without one, bit for bit; "" when equal.
std::string compare(const Trained& shared, const Trained& cpu) {
  if (shared.losses.size() != cpu.losses.size()) return "step counts differ";
  for (size_t i = 0; i < cpu.losses.size(); ++i)
    if (std::memcmp(&shared.losses[i], &cpu.losses[i], sizeof(double)) != 0)
      return "loss of step " + std::to_string(i) + ": " + std::to_string(shared.losses[i]) + " vs " +
             std::to_string(cpu.losses[i]);
  for (const auto& [name, weight] : cpu.master)
    if (!same_bits(shared.master.at(name), weight)) return "master weight " + name;
  if (!same_bits(shared.exp_avg, cpu.exp_avg)) return "exp_avg";
  if (!same_bits(shared.exp_avg_sq, cpu.exp_avg_sq)) return "exp_avg_sq";
  return "";
}

struct ShareCase {
  const char* name;
  at::ScalarType state;  // the moments
  at::ScalarType grads;  // the host gradient partition
  bool nvme;             // the state on NVMe, its first 3 records in memory (the others streamed)
};

class DeviceShareOnHost : public ::testing::TestWithParam<ShareCase> {};

OffloadEngineSpec share_spec(const ShareCase& c, const std::string& nvme_dir, double share) {
  // 2560 elements a sub-group (whole moment blocks): the stage 3 shard in 7 pieces.
  return {.stage = 3,
          .compute = at::kBFloat16,
          .state = c.state,
          .nvme_dir = c.nvme ? nvme_dir : "",
          .master = MasterLayout::kCompact,
          .sub_group = 2560,
          .records_in_memory = c.nvme ? 3 : 0,
          .grads = c.grads,
          .gpu_share = share,
          .share_on_host = share > 0};
}

TEST_P(DeviceShareOnHost, EqualsTheCpuStepBitForBit) {
  ScratchDir shared_dir, cpu_dir;
  const Trained shared = train(share_spec(GetParam(), shared_dir.path(), 0.4), 6);
  const Trained cpu = train(share_spec(GetParam(), cpu_dir.path(), 0.0), 6);
  EXPECT_GT(shared.device_elements, 0) << "the device stepped nothing";
  EXPECT_EQ(cpu.device_elements, 0);
  EXPECT_EQ(compare(shared, cpu), "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeviceShareOnHost,
                         ::testing::Values(ShareCase{"fp32_moments", at::kFloat, at::kFloat, false},
                                           ShareCase{"int8_moments_bf16_grads", at::kChar, at::kBFloat16, false},
                                           ShareCase{"bf16_moments", at::kBFloat16, at::kFloat, false},
                                           ShareCase{"int8_on_nvme", at::kChar, at::kBFloat16, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DeviceShareOnHost, StepsAboutItsShareOfTheElements) {
  ScratchDir dir;
  const ShareCase c{"fp32", at::kFloat, at::kFloat, false};
  OffloadEngine e(share_spec(c, dir.path(), 0.4));
  e.train_step(0);
  e.engine->finish_step();
  const int64_t partition = e.engine->optimizer().state().exp_avg.numel();
  const int64_t device = e.engine->optimizer().last_device_share().elements;
  // Whole pieces of 2560 (the last one shorter): within one piece of 0.4 of the partition.
  EXPECT_NEAR(static_cast<double>(device), 0.4 * static_cast<double>(partition), 2560.0);
}

TEST(DeviceShareRefusal, ACpuEngineWithoutAKernel) {
  ScratchDir dir;
  OffloadEngineSpec spec = share_spec({"fp32", at::kFloat, at::kFloat, false}, dir.path(), 0.4);
  spec.share_on_host = false;
  try {
    OffloadEngine e(spec);
    FAIL() << "a share on a CPU engine was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tierzero.gpu_optimizer_share needs a CUDA device"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceShareRefusal, AnFp32Master) {
  ScratchDir dir;
  OffloadEngineSpec spec = share_spec({"fp32", at::kFloat, at::kFloat, false}, dir.path(), 0.4);
  spec.master = MasterLayout::kFp32;
  try {
    OffloadEngine e(spec);
    FAIL() << "a share with an fp32 master was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs tierzero.master_weights \"compact\""), std::string::npos) << e.what();
  }
}

TEST(DeviceShareGpu, EqualsTheCpuStepBitForBit) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  for (const ShareCase& c : {ShareCase{"int8_moments_bf16_grads", at::kChar, at::kBFloat16, false},
                             ShareCase{"fp32_moments", at::kFloat, at::kFloat, false},
                             ShareCase{"int8_on_nvme", at::kChar, at::kBFloat16, true}}) {
    ScratchDir shared_dir, cpu_dir;
    OffloadEngineSpec shared_spec = share_spec(c, shared_dir.path(), 0.4);
    shared_spec.cuda = true;
    shared_spec.share_on_host = false;  // cpu_adam::step_on_gpu
    OffloadEngineSpec cpu_spec = share_spec(c, cpu_dir.path(), 0.0);
    cpu_spec.cuda = true;
    const Trained shared = train(shared_spec, 6);
    const Trained cpu = train(cpu_spec, 6);
    EXPECT_GT(shared.device_elements, 0) << c.name;
    EXPECT_EQ(compare(shared, cpu), "") << c.name;
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
