// The plan as JSON, field for field.
#include "engine/plan/plan.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;

// Calls `f(key, field)` for each of the plan's scalar fields.
template <typename F>
void each_scalar(const Plan& p, F&& f) {
  f("parameters", p.parameters);
  f("stage", p.stage);
  f("world_size", p.world_size);
  f("precision", p.precision);
  f("optimizer_device", p.optimizer_device);
  f("param_device", p.param_device);
  f("optimizer_state", p.optimizer_state);
  f("master_weights", p.master_weights);
  f("offload_grad_dtype", p.offload_grad_dtype);
  f("optimizer_records", p.optimizer_records);
  f("optimizer_records_in_memory", p.optimizer_records_in_memory);
  f("micro_batch", p.micro_batch);
  f("seq_len", p.seq_len);
  f("gradient_accumulation_steps", p.gradient_accumulation_steps);
  f("tokens_per_step", p.tokens_per_step);
  f("window_group", p.window_group);
  f("kept_layers", p.kept_layers);
  f("gpu_allocated_peak_bytes", p.gpu_allocated_peak_bytes);
  f("gpu_allocated_base_bytes", p.gpu_allocated_base_bytes);
  f("step_seconds", p.step_seconds);
  f("serial_step_seconds", p.serial_step_seconds);
  f("bottleneck", p.bottleneck);
  f("problems", p.problems);
  f("notes", p.notes);
}

}  // namespace

json plan_to_json(const Plan& p) {
  json out = json::object(), items = json::array(), checks = json::array(), terms = json::array(),
       state = json::array();
  each_scalar(p, [&](const char* key, const auto& value) { out[key] = value; });
  for (const MemoryItem& i : p.items)
    items.push_back({{"tier", tier_name(i.tier)},
                     {"what", i.what},
                     {"phase", phase_name(i.phase)},
                     {"bytes", i.bytes},
                     {"formula", i.formula}});
  for (const TierCheck& c : p.checks)
    checks.push_back({{"name", c.name},
                      {"peak_bytes", c.peak_bytes},
                      {"budget_bytes", c.budget_bytes},
                      {"budget_source", c.budget_source},
                      {"over", c.over()}});
  for (const StateBytes& r : p.state_bytes)
    state.push_back(
        {{"what", r.what}, {"gpu", r.gpu}, {"pinned", r.pinned}, {"pageable", r.pageable}, {"nvme", r.nvme}});
  for (const TimeTerm& t : p.time_terms)
    terms.push_back({{"what", t.what}, {"seconds", t.seconds}, {"detail", t.detail}});
  out["items"] = items;
  out["checks"] = checks;
  out["state_bytes"] = state;
  out["time_terms"] = terms;
  out["feasible"] = p.feasible();
  return out;
}

}  // namespace tierzero::engine
