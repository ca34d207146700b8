// suggest_layout: every stage 3 layout (offload devices x state layout), its host budget spent on
// weights first and optimizer records second, planned, each offloaded one also with the gradient ring
// where the config allows it; the fastest that fits (plan.h).
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "common/common.h"
#include "engine/plan/internal/model_params.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kNvmeSubGroup = 100'000'000;  // sub_group_size on NVMe: records of 1e8 (advice.cpp's)
constexpr double kTie = 0.01;                     // steps within 1% of the fastest count as equal
constexpr int64_t kFewestBuffers = 2;             // swap buffers: one stepped, the next read ahead

struct Devices {
  OffloadDevice optimizer, params;
};

// Least offloaded first; the parameters offloaded only beside an offloaded optimizer (ZeRO-Infinity's
// pairing; DeepSpeed's own configs never offload the weights of a GPU optimizer).
constexpr Devices kDevices[] = {
    {OffloadDevice::kNone, OffloadDevice::kNone}, {OffloadDevice::kCpu, OffloadDevice::kNone},
    {OffloadDevice::kCpu, OffloadDevice::kCpu},   {OffloadDevice::kNvme, OffloadDevice::kNone},
    {OffloadDevice::kNvme, OffloadDevice::kCpu},  {OffloadDevice::kCpu, OffloadDevice::kNvme},
    {OffloadDevice::kNvme, OffloadDevice::kNvme},
};

struct StateLayout {
  MasterWeights master;
  OptimizerStateDtype moments;
  OffloadGradDtype grads;
};

// Least lossy first, as advice.cpp's layout_candidates: the exact compact master, then bf16 moments,
// bf16 host gradients, int8 moments; last the same with an fp32 master, for the weights on NVMe
// (which the engine refuses with the compact master).
constexpr StateLayout kLayouts[] = {
    {MasterWeights::kFp32, OptimizerStateDtype::kFp32, OffloadGradDtype::kFp32},
    {MasterWeights::kCompact, OptimizerStateDtype::kFp32, OffloadGradDtype::kFp32},
    {MasterWeights::kCompact, OptimizerStateDtype::kBf16, OffloadGradDtype::kFp32},
    {MasterWeights::kCompact, OptimizerStateDtype::kBf16, OffloadGradDtype::kBf16},
    {MasterWeights::kCompact, OptimizerStateDtype::kInt8, OffloadGradDtype::kBf16},
    {MasterWeights::kFp32, OptimizerStateDtype::kBf16, OffloadGradDtype::kBf16},
    {MasterWeights::kFp32, OptimizerStateDtype::kInt8, OffloadGradDtype::kBf16},
};

bool offloaded(const DsConfig& c) { return c.zero.offload_optimizer.device != OffloadDevice::kNone; }

// "host 70.10 GiB > 64.00 GiB, nvme ..." for the checks over; "" when every budget holds.
std::string over_text(const Plan& plan) {
  std::string text;
  for (const TierCheck& c : plan.checks)
    if (c.over())
      text += (text.empty() ? "" : ", ") + c.name + " " + format_bytes(c.peak_bytes) + " > " + format_bytes(c.budget_bytes);
  return text;
}

// The largest peak / budget of `plan`'s checks: how far over the least-over layout is.
double worst_ratio(const Plan& plan) {
  double worst = 0;
  for (const TierCheck& c : plan.checks)
    if (c.budget_bytes > 0) worst = std::max(worst, double(c.peak_bytes) / double(c.budget_bytes));
  return worst;
}

std::string layout_text(const DsConfig& c, const Plan& p) {
  std::string text = std::string("optimizer ") + offload_device_name(c.zero.offload_optimizer.device) + ", parameters " +
                     offload_device_name(c.zero.offload_param.device);
  if (!offloaded(c)) return text + "; fp32 master, m, v on the GPU";
  text += std::string("; ") + master_weights_name(c.tierzero.master_weights) + " master, " +
          optimizer_state_dtype_name(c.tierzero.optimizer_state_dtype) + " m, v, " +
          (c.tierzero.offload_grad_dtype == OffloadGradDtype::kBf16 ? "bf16" : "fp32") + " host gradients";
  if (p.optimizer_records > 0)
    text += "; " + std::to_string(p.optimizer_records_in_memory) + " of " + std::to_string(p.optimizer_records) +
            " records in memory, buffer_count " + std::to_string(c.zero.offload_optimizer.buffer_count);
  if (c.zero.offload_param.device == OffloadDevice::kNvme)
    text += "; " + plan::count_text(double(std::min<uint64_t>(c.zero.offload_param.max_in_cpu, uint64_t(p.parameters)))) +
            " weights in memory (max_in_cpu)";
  if (c.tierzero.grad_ring_records > 0)
    text += "; gradient ring of " + std::to_string(c.tierzero.grad_ring_records) + " records";
  return text;
}

std::string seconds_text(double seconds) { return fmt::format("{:.1f} s", seconds); }

// `base` with the devices and the state layout set (the NVMe paths filled from `nvme_paths` where
// the base has none); the host budget not yet spent (suggest_layout does that).
DsConfig candidate(const DsConfig& base, const Devices& d, const StateLayout& l, const std::vector<std::string>& nvme_paths) {
  DsConfig c = base;
  ZeroConfig& z = c.zero;
  z.stage = 3;
  z.offload_optimizer.device = d.optimizer;
  z.offload_param.device = d.params;
  if (d.params == OffloadDevice::kCpu) z.offload_param.pin_memory = true;
  if (d.optimizer == OffloadDevice::kNvme) {
    z.sub_group_size = std::min<uint64_t>(z.sub_group_size, kNvmeSubGroup);
    if (z.offload_optimizer.nvme_paths.empty()) z.offload_optimizer.nvme_paths = nvme_paths;
  }
  if (d.params == OffloadDevice::kNvme && z.offload_param.nvme_paths.empty())
    z.offload_param.nvme_paths = z.offload_optimizer.nvme_paths.empty() ? nvme_paths : z.offload_optimizer.nvme_paths;
  TierzeroConfig& t = c.tierzero;
  t.master_weights = l.master;
  t.optimizer_state_dtype = l.moments;
  t.offload_grad_dtype = l.grads;
  t.optimizer_records_in_memory = d.optimizer == OffloadDevice::kNvme ? kOptimizerRecordsAuto : 0;
  t.grad_ring_records = 0;  // the whole gradient partition; suggest_layout tries the ring beside it
  return c;
}

// The gradient ring beside a layout (tierzero.grad_ring_records): the fewest slots the backward
// needs (model_params.h), where that is fewer records than the partition has, with the optimizer
// offloaded and the weights not on NVMe; 0 where no ring is tried (a LoRA run's gradients are the
// adapters', a few MiB).
int64_t ring_slots(const ModelDims& model, const DsConfig& c) {
  if (!offloaded(c) || c.zero.offload_param.device == OffloadDevice::kNvme || c.tierzero.lora) return 0;
  const auto record = static_cast<int64_t>(c.zero.sub_group_size);
  const int64_t slots = plan::grad_ring_slots(model, record);
  return slots < (parameter_count(model) + record - 1) / record ? slots : 0;
}

// Spends the host budget of `machine` on `c`: tierzero.pinned_memory_limit what the host leaves
// beside the pageable peak; with the weights on NVMe, offload_param.max_in_cpu as many of them as
// that leaves beside the other pinned buffers (a weight held saves 3 bytes moved a step, 2 B read
// twice and written once; a record byte 2, read and written), the optimizer's records the rest.
// Without a host budget the config's own limit stays ("auto" records by it; none without one).
Result<DsConfig> spend_host(DsConfig c, const ModelDims& model, const Machine& machine, const PlanOptions& options) {
  if (machine.host_memory_bytes == 0) {
    if (c.tierzero.pinned_memory_limit == 0) c.tierzero.optimizer_records_in_memory = 0;
    return c;
  }
  c.tierzero.pinned_memory_limit = 0;
  const int64_t records = c.tierzero.optimizer_records_in_memory;
  c.tierzero.optimizer_records_in_memory = 0;
  const bool params_nvme = c.zero.offload_param.device == OffloadDevice::kNvme;
  if (params_nvme) c.zero.offload_param.max_in_cpu = 0;
  TZ_ASSIGN_OR_RETURN(const Plan bare, plan::plan_figures(model, c, machine, options));
  const uint64_t per_rank = machine.host_memory_bytes / static_cast<uint64_t>(std::max(bare.world_size, 1));
  const uint64_t pageable = plan::check_named(bare, "pageable").peak_bytes;
  const uint64_t left = per_rank > pageable ? (per_rank - pageable) / kMiB * kMiB : 0;
  c.tierzero.pinned_memory_limit = std::max<uint64_t>(left, kMiB);
  c.tierzero.optimizer_records_in_memory = records;
  if (params_nvme) {
    const uint64_t pinned = plan::check_named(bare, "pinned").peak_bytes;
    const uint64_t element = c.precision() == Precision::kFp32 ? 4 : 2;
    c.zero.offload_param.max_in_cpu = left > pinned ? (left - pinned) / element : 0;
  }
  return c;
}

}  // namespace

Result<Suggestion> suggest_layout(const ModelDims& model, const DsConfig& base, const Machine& machine,
                                  const PlanOptions& options, const std::vector<std::string>& nvme_paths) {
  Suggestion out;
  const bool have_nvme = !nvme_paths.empty() || !base.zero.offload_optimizer.nvme_paths.empty();
  if (!have_nvme)
    out.notes.push_back("no NVMe directory (--nvme DIR or the config's nvme_path): layouts on NVMe not tried");
  std::vector<DsConfig> configs;
  std::vector<Plan> plans;
  const auto add = [&](DsConfig c, Plan p) {
    out.tried.push_back({layout_text(c, p), p.step_seconds, over_text(p)});
    configs.push_back(std::move(c));
    plans.push_back(std::move(p));
  };
  // The gradient ring where the config refuses it: the first refusal for a reason besides clipping;
  // where clipping is the only one, the fastest ring layout that would fit with gradient_clipping 0.
  std::string ring_refused;
  std::optional<std::pair<std::string, double>> ring_without_clipping;
  for (const StateLayout& layout : kLayouts) {
    const bool first_layout = &layout == &kLayouts[0];
    for (const Devices& devices : kDevices) {
      const bool on_nvme = devices.optimizer == OffloadDevice::kNvme || devices.params == OffloadDevice::kNvme;
      if (on_nvme && !have_nvme) continue;
      if (devices.optimizer == OffloadDevice::kNone && !first_layout) continue;  // the GPU's state is fp32
      // On NVMe also with the fewest swap buffers that still read ahead: each holds a record and a
      // gradient staging slot, room the records in memory or the weights may use better.
      std::vector<int64_t> buffer_counts = {base.zero.offload_optimizer.buffer_count};
      if (devices.optimizer == OffloadDevice::kNvme && buffer_counts[0] > kFewestBuffers)
        buffer_counts.push_back(kFewestBuffers);
      for (const int64_t buffers : buffer_counts) {
        DsConfig c = candidate(base, devices, layout, nvme_paths);
        c.zero.offload_optimizer.buffer_count = buffers;
        TZ_ASSIGN_OR_RETURN(c, spend_host(std::move(c), model, machine, options));
        if (!check_engine_settings(engine_settings(c)).ok()) continue;  // a layout the engine refuses
        TZ_ASSIGN_OR_RETURN(Plan p, plan::plan_figures(model, c, machine, options));
        add(c, std::move(p));
        // Beside it, the host gradients in a ring of record slots: the room the partition leaves goes
        // to the optimizer's records ("auto" by the same limit).
        DsConfig ring = std::move(c);
        ring.tierzero.grad_ring_records = ring_slots(model, ring);
        if (ring.tierzero.grad_ring_records == 0) continue;
        DsConfig unclipped = ring;
        unclipped.gradient_clipping = 0.0;
        if (const Status refused = check_engine_settings(engine_settings(unclipped)); !refused.ok()) {
          if (ring_refused.empty()) ring_refused = refused.message();  // a reason besides clipping
          continue;
        }
        bool in_backward = false;
        TZ_ASSIGN_OR_RETURN(Plan q, plan::plan_figures(model, unclipped, machine, options, &in_backward));
        if (!in_backward) {  // the engine would refuse the ring's first step
          if (ring_refused.empty())
            ring_refused =
                "tierzero.grad_ring_records needs the optimizer stepping inside the backward, and the "
                "window of micro-batches it steps in does not fit the GPU beside the planned peak";
          continue;
        }
        if (ring.gradient_clipping == 0.0) {
          add(std::move(ring), std::move(q));
        } else if (over_text(q).empty() && (!ring_without_clipping || q.step_seconds < ring_without_clipping->second)) {
          ring_without_clipping = std::make_pair(layout_text(unclipped, q), q.step_seconds);
        }
      }
    }
  }
  if (configs.empty()) return invalid_argument("suggest: no layout the engine accepts for this config");
  // The fastest that fits, the first tried (least lossy, least offloaded, the config's swap buffers)
  // among those within kTie of it; when none fits, the least over.
  double fastest = -1;
  for (size_t i = 0; i < plans.size(); ++i)
    if (out.tried[i].over.empty() && (fastest < 0 || plans[i].step_seconds < fastest)) fastest = plans[i].step_seconds;
  size_t chosen = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const bool better = fastest >= 0 ? out.tried[i].over.empty() && plans[i].step_seconds <= fastest * (1 + kTie)
                                     : worst_ratio(plans[i]) < worst_ratio(plans[chosen]);
    if (better) {
      chosen = i;
      if (fastest >= 0) break;
    }
  }
  out.chosen = chosen;
  out.config = configs[chosen];
  TZ_ASSIGN_OR_RETURN(out.plan, plan_training(model, out.config, machine, options));
  // Why the ring was chosen, or not tried (where the chosen layout offloads the optimizer: the ring
  // holds its host gradients).
  if (out.config.tierzero.grad_ring_records > 0) {
    double without = -1;  // the fastest that fits with the whole gradient partition
    for (size_t i = 0; i < plans.size(); ++i)
      if (configs[i].tierzero.grad_ring_records == 0 && out.tried[i].over.empty() &&
          (without < 0 || plans[i].step_seconds < without))
        without = plans[i].step_seconds;
    out.notes.push_back("the gradient ring (tierzero.grad_ring_records " +
                        std::to_string(out.config.tierzero.grad_ring_records) +
                        ", the fewest slots the backward needs): the host gradients land in record slots the "
                        "optimizer frees inside the backward, not the whole partition, which leaves the host room "
                        "(for the optimizer's records, or a less lossy state): " +
                        seconds_text(out.plan.step_seconds) + " a step" +
                        (without < 0 ? " (no layout with the whole partition fits)"
                                     : " against " + seconds_text(without) + " with the whole partition"));
  } else if (offloaded(out.config) && ring_without_clipping) {
    out.notes.push_back("the gradient ring would need gradient_clipping 0 (this config: " +
                        fmt::format("{:g}", out.config.gradient_clipping) + "); with it, " +
                        ring_without_clipping->first + " would predict " + seconds_text(ring_without_clipping->second) +
                        " a step (chosen: " + seconds_text(out.plan.step_seconds) + ")");
  } else if (offloaded(out.config) && !ring_refused.empty()) {
    out.notes.push_back("the gradient ring not tried: " + ring_refused);
  }
  return out;
}

}  // namespace tierzero::engine
