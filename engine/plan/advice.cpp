// What to change when a budget is not met: each candidate key re-planned, its figure reported.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "common/common.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {
namespace {

// A change to try: the key as the user writes it and what it does to a copy of the inputs.
struct Fix {
  std::string key;
  std::function<void(DsConfig&)> apply;
};

// The inputs of the plan advised on, re-planned with one change at a time.
struct Replan {
  const ModelDims& model;
  const DsConfig& config;
  const Machine& machine;
  const PlanOptions& options;
  // plan_figures of a copy of `config` that `change` has changed.
  Result<Plan> with(const std::function<void(DsConfig&)>& change) const {
    DsConfig changed = config;
    change(changed);
    return plan_figures(model, changed, machine, options);
  }
};

// "CHECK X, fits" (or ", still over"): a check of a re-planned config.
std::string check_after(const TierCheck& after) {
  return after.name + " " + format_bytes(after.peak_bytes) + (after.over() ? ", still over" : ", fits");
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

Fix bf16_state_fix() {
  return {"tierzero.optimizer_state_dtype \"bf16\"",
          [](DsConfig& c) { c.tierzero.optimizer_state_dtype = OptimizerStateDtype::kBf16; }};
}

Fix smaller_reduce_bucket_fix() {
  return {"zero_optimization.reduce_bucket_size 5e7", [](DsConfig& c) { c.zero.reduce_bucket_size = 50'000'000; }};
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
      fixes.push_back({"zero_optimization.stage 2 with offload_optimizer.device \"cpu\"", [](DsConfig& c) {
                         c.zero.stage = 2;
                         c.zero.offload_optimizer.device = OffloadDevice::kCpu;
                       }});
    } else {
      fixes.push_back({"zero_optimization.offload_optimizer.device \"cpu\"",
                       [](DsConfig& c) { c.zero.offload_optimizer.device = OffloadDevice::kCpu; }});
    }
  }
  if (z.stage < 3) {
    fixes.push_back(
        {"zero_optimization.stage 3 with offload_optimizer and offload_param.device \"cpu\"", [](DsConfig& c) {
           c.zero.stage = 3;
           if (c.zero.offload_optimizer.device == OffloadDevice::kNone)
             c.zero.offload_optimizer.device = OffloadDevice::kCpu;
           c.zero.offload_param.device = OffloadDevice::kCpu;
         }});
  } else if (z.offload_param.device == OffloadDevice::kNone) {
    fixes.push_back({"zero_optimization.offload_param.device \"cpu\"",
                     [](DsConfig& c) { c.zero.offload_param.device = OffloadDevice::kCpu; }});
  }
  if (z.reduce_bucket_size > 50'000'000) fixes.push_back(smaller_reduce_bucket_fix());
  if (z.stage == 3 && (z.max_live_parameters > 100'000'000 || z.max_reuse_distance > 100'000'000))
    fixes.push_back(
        {"zero_optimization.stage3_max_live_parameters 1e8 and stage3_max_reuse_distance 1e8", [](DsConfig& c) {
           c.zero.max_live_parameters = std::min<uint64_t>(c.zero.max_live_parameters, 100'000'000);
           c.zero.max_reuse_distance = std::min<uint64_t>(c.zero.max_reuse_distance, 100'000'000);
         }});
  return fixes;
}

std::vector<Fix> host_fixes(const DsConfig& config, bool pinned_only, bool state_keys) {
  const ZeroConfig& z = config.zero;
  std::vector<Fix> fixes;
  if (z.offload_optimizer.device == OffloadDevice::kCpu)
    fixes.push_back(
        {"zero_optimization.offload_optimizer.device \"nvme\" (with nvme_path) and sub_group_size 1e8 "
         "(its swap buffers hold buffer_count sub-groups)",
         [](DsConfig& c) {
           c.zero.offload_optimizer.device = OffloadDevice::kNvme;
           c.zero.sub_group_size = std::min<uint64_t>(c.zero.sub_group_size, 100'000'000);
         }});
  if (z.stage == 3 && z.offload_param.device == OffloadDevice::kCpu) {
    fixes.push_back({"zero_optimization.offload_param.device \"nvme\" (with nvme_path)",
                     [](DsConfig& c) { c.zero.offload_param.device = OffloadDevice::kNvme; }});
    if (pinned_only && z.offload_param.pin_memory)
      fixes.push_back({"zero_optimization.offload_param.pin_memory false",
                       [](DsConfig& c) { c.zero.offload_param.pin_memory = false; }});
  }
  if (state_keys && z.offload_optimizer.device != OffloadDevice::kNone &&
      config.tierzero.optimizer_state_dtype == OptimizerStateDtype::kFp32)
    fixes.push_back(bf16_state_fix());
  if (z.offload_optimizer.device != OffloadDevice::kNone && z.reduce_bucket_size > 50'000'000)
    fixes.push_back(smaller_reduce_bucket_fix());
  return fixes;
}

// "  - set KEY: CHECK X, fits" for a fix that lowers `check` by at least 1%.
std::string tried(const Replan& replan, const std::string& check, uint64_t before, const Fix& fix) {
  Result<Plan> p = replan.with(fix.apply);
  if (!p.ok()) return "";
  const TierCheck& after = check_named(*p, check);
  if (after.peak_bytes >= before - before / 100) return "";
  return "\n  - set " + fix.key + ": " + check_after(after);
}

// The largest micro-batch below the current one that fits `check`, as a fix line; "" if none helps.
std::string smaller_micro_batch(const Replan& replan, const std::string& check) {
  for (int64_t m = replan.config.batch.train_micro_batch_size_per_gpu - 1; m >= 1; --m) {
    Result<Plan> p = replan.with([m](DsConfig& c) { set_micro_batch(c, m); });
    if (!p.ok()) return "";
    const TierCheck& after = check_named(*p, check);
    if (!after.over() || m == 1)
      return "\n  - lower train_micro_batch_size_per_gpu to " + std::to_string(m) + " (gradient_accumulation_steps " +
             std::to_string(p->gradient_accumulation_steps) + " keeps the batch): " + check_after(after);
  }
  return "";
}

// The compact state layouts, least lossy first, each with the keys of the one before: the exact ones
// (records in memory, the compact master), then bf16 moments, bf16 host gradients, int8 moments.
// On NVMe each keeps optimizer_records_in_memory "auto", with a pinned_memory_limit of what the host
// budget leaves beside the pageable bytes when the config sets none.
std::vector<Fix> layout_candidates(const DsConfig& config, const Machine& machine, const Plan& plan) {
  const TierzeroConfig& t = config.tierzero;
  std::vector<Fix> out;
  if (config.zero.offload_optimizer.device == OffloadDevice::kNone) return out;
  std::vector<std::string> keys;
  std::vector<std::function<void(DsConfig&)>> steps;
  auto add = [&](Fix fix) {
    keys.push_back(std::move(fix.key));
    steps.push_back(std::move(fix.apply));
    std::string text;
    for (const std::string& k : keys) text += (text.empty() ? "" : " + ") + k;
    out.push_back({text, [steps](DsConfig& c) {
                     for (const auto& apply : steps) apply(c);
                   }});
  };
  if (config.zero.offload_optimizer.device == OffloadDevice::kNvme && t.optimizer_records_in_memory == 0) {
    uint64_t limit = t.pinned_memory_limit;
    std::string key = "tierzero.optimizer_records_in_memory \"auto\"";
    if (limit == 0 && machine.host_memory_bytes > 0) {  // "auto" needs a limit: what the host leaves
      const TierCheck& pageable = check_named(plan, "pageable");
      const uint64_t per_rank = machine.host_memory_bytes / static_cast<uint64_t>(std::max(plan.world_size, 1));
      limit = per_rank > pageable.peak_bytes ? (per_rank - pageable.peak_bytes) / 1'000'000'000 * 1'000'000'000 : 0;
      key = "tierzero.pinned_memory_limit \"" + std::to_string(limit / 1'000'000'000) + "GB\" + " + key;
    }
    if (limit > 0)
      add({key, [limit](DsConfig& c) {
             c.tierzero.pinned_memory_limit = limit;
             c.tierzero.optimizer_records_in_memory = kOptimizerRecordsAuto;
           }});
  }
  if (t.master_weights == MasterWeights::kFp32 && config.precision() == Precision::kBf16)
    add({"tierzero.master_weights \"compact\"",
         [](DsConfig& c) { c.tierzero.master_weights = MasterWeights::kCompact; }});
  if (t.optimizer_state_dtype == OptimizerStateDtype::kFp32) add(bf16_state_fix());
  if (t.offload_grad_dtype == OffloadGradDtype::kFp32)
    add({"tierzero.offload_grad_dtype \"bf16\"",
         [](DsConfig& c) { c.tierzero.offload_grad_dtype = OffloadGradDtype::kBf16; }});
  if (t.optimizer_state_dtype != OptimizerStateDtype::kInt8) {
    std::erase(keys, bf16_state_fix().key);  // int8 replaces it (applied after)
    add({"tierzero.optimizer_state_dtype \"int8\"",
         [](DsConfig& c) { c.tierzero.optimizer_state_dtype = OptimizerStateDtype::kInt8; }});
  }
  return out;
}

// The one combined state layout to set: the first candidate under which every host and NVMe budget
// holds (the layout does not change the GPU's), as "  - set K1 + K2 + ... (one layout, together):
// CHECK X, ..., fits every host and NVMe budget (state B/param ...)"; without one, the most compact,
// "still over". "" when the config's layout is already the most compact.
std::string layout_suggestion(const Replan& replan, const Plan& plan, const std::string& check, bool* fits) {
  *fits = false;
  const std::vector<Fix> candidates = layout_candidates(replan.config, replan.machine, plan);
  for (size_t i = 0; i < candidates.size(); ++i) {
    Result<Plan> p = replan.with(candidates[i].apply);
    if (!p.ok()) continue;
    const bool all = std::none_of(p->checks.begin(), p->checks.end(),
                                  [](const TierCheck& c) { return c.over() && c.name.rfind("gpu", 0) != 0; });
    if (!all && i + 1 < candidates.size()) continue;
    *fits = all;
    const StateBytes& total = p->state_bytes.back();
    std::string line = "\n  - set " + candidates[i].key + " (one layout, together): " + check + " " +
                       format_bytes(check_named(*p, check).peak_bytes);
    for (const TierCheck& c : p->checks)
      if (c.name != check && (c.name == "host" || c.name == "nvme" || c.name == "pinned") && c.budget_bytes > 0)
        line += ", " + c.name + " " + format_bytes(c.peak_bytes);
    return line + (all ? ", fits every host and NVMe budget" : ", still over") +
           fmt::format(" (state {:.2f} B/param on the GPU, {:.2f} pinned, {:.2f} pageable, {:.2f} NVMe)", total.gpu,
                       total.pinned, total.pageable, total.nvme);
  }
  return "";
}

}  // namespace

std::vector<std::string> budget_problems(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                         const PlanOptions& options, const Plan& plan) {
  const Replan replan{model, config, machine, options};
  std::vector<std::string> problems;
  bool layout_said = false;  // the combined layout goes with the first host or NVMe check over
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
      line += smaller_micro_batch(replan, check.name);
      fixes = gpu_fixes(config);
    }
    // The state layout: one combined setting of its keys (the least lossy that fits every budget)
    // rather than one key at a time; the single bf16 key only when no layout fits.
    bool layout_fits = false;
    const bool layout_check = check.name == "pinned" || check.name == "host" || check.name == "nvme";
    if (layout_check && !layout_said) {
      line += layout_suggestion(replan, plan, check.name, &layout_fits);
      layout_said = true;
    }
    if (check.name == "pinned" || check.name == "host") {
      fixes = host_fixes(config, check.name == "pinned", !layout_fits);
    } else if (check.name == "nvme" && config.tierzero.optimizer_state_dtype != OptimizerStateDtype::kBf16 &&
               !layout_fits) {
      fixes.push_back(bf16_state_fix());
    }
    for (const Fix& fix : fixes) line += tried(replan, check.name, check.peak_bytes, fix);
    if (check.name == "nvme")
      line += "\n  - add NVMe devices: more --nvme paths (a nvme_path list stripes across them)";
    if (line.size() == bare) line += " no single key brings it under; use more GPUs (--gpus) or a smaller model";
    if (layout_check)
      line +=
          "\n  - let tierzero estimate --suggest choose the whole layout (offload devices, state dtypes, records in "
          "memory) for --gpu-memory, --host-memory and the NVMe space; --write-config FILE writes it";
    problems.push_back(line);
  }
  return problems;
}

}  // namespace tierzero::engine::plan
