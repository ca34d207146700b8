// What to change when a budget is not met: each candidate key re-planned, its figure reported.
#include <algorithm>
#include <functional>

#include "common/common.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {
namespace {

// A change to try: the key as the user writes it and what it does to a copy of the inputs.
struct Fix {
  std::string key;
  std::function<void(DsConfig&, PlanOptions&)> apply;
};

const TierCheck& check_named(const Plan& plan, const std::string& name) {
  return *std::find_if(plan.checks.begin(), plan.checks.end(), [&](const TierCheck& c) { return c.name == name; });
}

// The largest items of the tiers `check` covers, as "what SIZE" (at most three).
std::string largest_items(const Plan& plan, const std::string& check) {
  std::vector<const MemoryItem*> items;
  for (const MemoryItem& item : plan.items) {
    const bool gpu = item.tier == Tier::kGpu, host = item.tier == Tier::kPinned || item.tier == Tier::kPageable;
    if ((check.rfind("gpu", 0) == 0 && gpu) || (check == "pinned" && item.tier == Tier::kPinned) ||
        (check == "host" && host) || (check == "nvme" && item.tier == Tier::kNvme))
      items.push_back(&item);
  }
  std::sort(items.begin(), items.end(), [](const MemoryItem* a, const MemoryItem* b) { return a->bytes > b->bytes; });
  std::string text;
  for (size_t i = 0; i < std::min<size_t>(3, items.size()); ++i)
    text += (i ? ", " : "") + items[i]->what + " " + format_bytes(items[i]->bytes) + " (" +
            phase_name(items[i]->phase) + ")";
  return text;
}

bool bf16_state(const DsConfig& config) { return config.tierzero.optimizer_state_dtype == OptimizerStateDtype::kBf16; }

Fix bf16_state_fix() {
  return {"tierzero.optimizer_state_dtype \"bf16\"",
          [](DsConfig& c, PlanOptions&) { c.tierzero.optimizer_state_dtype = OptimizerStateDtype::kBf16; }};
}

void set_micro_batch(DsConfig& c, int64_t micro) {
  BatchConfig& b = c.batch;
  const int64_t samples = b.train_micro_batch_size_per_gpu * b.gradient_accumulation_steps;
  b.train_micro_batch_size_per_gpu = micro;
  b.gradient_accumulation_steps = (samples + micro - 1) / micro;
  b.train_batch_size = micro * b.gradient_accumulation_steps * b.world_size;
}

std::vector<Fix> gpu_fixes(const DsConfig& config) {
  const ZeroConfig& z = config.zero;
  std::vector<Fix> fixes;
  if (z.offload_optimizer.device == OffloadDevice::kNone) {
    if (z.stage == 0) {
      fixes.push_back(
          {"zero_optimization.stage 2 with offload_optimizer.device \"cpu\"", [](DsConfig& c, PlanOptions&) {
             c.zero.stage = 2;
             c.zero.offload_optimizer.device = OffloadDevice::kCpu;
           }});
    } else {
      fixes.push_back({"zero_optimization.offload_optimizer.device \"cpu\"",
                       [](DsConfig& c, PlanOptions&) { c.zero.offload_optimizer.device = OffloadDevice::kCpu; }});
    }
  }
  if (z.stage < 3) {
    fixes.push_back({"zero_optimization.stage 3 with offload_optimizer and offload_param.device \"cpu\"",
                     [](DsConfig& c, PlanOptions&) {
                       c.zero.stage = 3;
                       if (c.zero.offload_optimizer.device == OffloadDevice::kNone)
                         c.zero.offload_optimizer.device = OffloadDevice::kCpu;
                       c.zero.offload_param.device = OffloadDevice::kCpu;
                     }});
  } else if (z.offload_param.device == OffloadDevice::kNone) {
    fixes.push_back({"zero_optimization.offload_param.device \"cpu\"",
                     [](DsConfig& c, PlanOptions&) { c.zero.offload_param.device = OffloadDevice::kCpu; }});
  }
  if (z.reduce_bucket_size > 50'000'000)
    fixes.push_back({"zero_optimization.reduce_bucket_size 5e7",
                     [](DsConfig& c, PlanOptions&) { c.zero.reduce_bucket_size = 50'000'000; }});
  if (z.stage == 3 && (z.max_live_parameters > 100'000'000 || z.max_reuse_distance > 100'000'000))
    fixes.push_back({"zero_optimization.stage3_max_live_parameters 1e8 and stage3_max_reuse_distance 1e8",
                     [](DsConfig& c, PlanOptions&) {
                       c.zero.max_live_parameters = std::min<uint64_t>(c.zero.max_live_parameters, 100'000'000);
                       c.zero.max_reuse_distance = std::min<uint64_t>(c.zero.max_reuse_distance, 100'000'000);
                     }});
  return fixes;
}

std::vector<Fix> host_fixes(const DsConfig& config, bool pinned_only) {
  const ZeroConfig& z = config.zero;
  std::vector<Fix> fixes;
  if (z.offload_optimizer.device == OffloadDevice::kCpu)
    fixes.push_back(
        {"zero_optimization.offload_optimizer.device \"nvme\" (with nvme_path) and sub_group_size 1e8 "
         "(its swap buffers hold buffer_count sub-groups)",
         [](DsConfig& c, PlanOptions&) {
           c.zero.offload_optimizer.device = OffloadDevice::kNvme;
           c.zero.sub_group_size = std::min<uint64_t>(c.zero.sub_group_size, 100'000'000);
         }});
  if (z.stage == 3 && z.offload_param.device == OffloadDevice::kCpu) {
    fixes.push_back({"zero_optimization.offload_param.device \"nvme\" (with nvme_path)",
                     [](DsConfig& c, PlanOptions&) { c.zero.offload_param.device = OffloadDevice::kNvme; }});
    if (pinned_only && z.offload_param.pin_memory)
      fixes.push_back({"zero_optimization.offload_param.pin_memory false",
                       [](DsConfig& c, PlanOptions&) { c.zero.offload_param.pin_memory = false; }});
  }
  if (z.offload_optimizer.device != OffloadDevice::kNone && !bf16_state(config)) fixes.push_back(bf16_state_fix());
  if (z.offload_optimizer.device != OffloadDevice::kNone && z.reduce_bucket_size > 50'000'000)
    fixes.push_back({"zero_optimization.reduce_bucket_size 5e7",
                     [](DsConfig& c, PlanOptions&) { c.zero.reduce_bucket_size = 50'000'000; }});
  return fixes;
}

// "  - KEY: NAME X, fits" for a fix that lowers `check` by at least 1%.
std::string tried(const ModelDims& model, const DsConfig& config, const Machine& machine, const PlanOptions& options,
                  const std::string& check, uint64_t before, const Fix& fix) {
  DsConfig changed = config;
  PlanOptions changed_options = options;
  fix.apply(changed, changed_options);
  Result<Plan> p = plan_figures(model, changed, machine, changed_options);
  if (!p.ok()) return "";
  const TierCheck& after = check_named(*p, check);
  if (after.peak_bytes >= before - before / 100) return "";
  return "\n  - set " + fix.key + ": " + check + " " + format_bytes(after.peak_bytes) +
         (after.over() ? ", still over" : ", fits");
}

// The largest micro-batch below the current one that fits `check`, as a fix line; "" if none helps.
std::string smaller_micro_batch(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                const PlanOptions& options, const std::string& check) {
  const int64_t micro = config.batch.train_micro_batch_size_per_gpu;
  for (int64_t m = micro - 1; m >= 1; --m) {
    DsConfig changed = config;
    set_micro_batch(changed, m);
    Result<Plan> p = plan_figures(model, changed, machine, options);
    if (!p.ok()) return "";
    const TierCheck& after = check_named(*p, check);
    if (!after.over() || m == 1)
      return "\n  - lower train_micro_batch_size_per_gpu to " + std::to_string(m) + " (gradient_accumulation_steps " +
             std::to_string(changed.batch.gradient_accumulation_steps) + " keeps the batch): " + check + " " +
             format_bytes(after.peak_bytes) + (after.over() ? ", still over" : ", fits");
  }
  return "";
}

}  // namespace

std::vector<std::string> budget_problems(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                         const PlanOptions& options, const Plan& plan) {
  std::vector<std::string> problems;
  for (const TierCheck& check : plan.checks) {
    if (!check.over()) continue;
    std::string line =
        check.name + " needs " + format_bytes(check.peak_bytes) + " > " + check.budget_source + " " +
        format_bytes(check.budget_bytes) +
        (check.name == "host" || check.name == "nvme" ? " (" + std::to_string(plan.world_size) + " rank(s))"
                                                      : " (per rank)") +
        "; largest: " + largest_items(plan, check.name) + ". Change:";
    const size_t bare = line.size();
    std::vector<Fix> fixes;
    if (check.name.rfind("gpu", 0) == 0) {
      line += smaller_micro_batch(model, config, machine, options, check.name);
      fixes = gpu_fixes(config);
    } else if (check.name == "pinned" || check.name == "host") {
      fixes = host_fixes(config, check.name == "pinned");
    } else if (check.name == "nvme" && !bf16_state(config)) {
      fixes.push_back(bf16_state_fix());
    }
    for (const Fix& fix : fixes) line += tried(model, config, machine, options, check.name, check.peak_bytes, fix);
    if (check.name == "nvme")
      line += "\n  - add NVMe devices: more --nvme paths (a nvme_path list stripes across them)";
    if (line.size() == bare) line += " no single key brings it under; use more GPUs (--gpus) or a smaller model";
    problems.push_back(line);
  }
  return problems;
}

}  // namespace tierzero::engine::plan
