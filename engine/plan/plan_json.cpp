// Plan <-> JSON, field for field.
#include "engine/plan/plan.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;

template <typename E>
Result<E> enum_named(const std::string& name, const char* (*name_of)(E), int count, const std::string& field) {
  for (int i = 0; i < count; ++i)
    if (name == name_of(static_cast<E>(i))) return static_cast<E>(i);
  return invalid_argument("plan JSON: " + field + " \"" + name + "\" is not a known value");
}

// Reads `key` of `j` into `out`; kInvalidArgument names `where`.`key` when missing or mistyped.
template <typename T>
Status field(const json& j, const char* key, T& out, const std::string& where) {
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    return invalid_argument("plan JSON: " + where + "." + key + " is missing or has the wrong type");
  }
  return {};
}

}  // namespace

json plan_to_json(const Plan& p) {
  json items = json::array(), checks = json::array(), terms = json::array();
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
  json state = json::array();
  for (const StateBytes& r : p.state_bytes)
    state.push_back({{"what", r.what}, {"gpu", r.gpu}, {"pinned", r.pinned}, {"pageable", r.pageable}, {"nvme", r.nvme}});
  for (const TimeTerm& t : p.time_terms)
    terms.push_back({{"what", t.what}, {"seconds", t.seconds}, {"detail", t.detail}});
  return {{"parameters", p.parameters},
          {"stage", p.stage},
          {"world_size", p.world_size},
          {"precision", p.precision},
          {"optimizer_device", p.optimizer_device},
          {"param_device", p.param_device},
          {"optimizer_state", p.optimizer_state},
          {"master_weights", p.master_weights},
          {"offload_grad_dtype", p.offload_grad_dtype},
          {"optimizer_records", p.optimizer_records},
          {"optimizer_records_in_memory", p.optimizer_records_in_memory},
          {"state_bytes", state},
          {"micro_batch", p.micro_batch},
          {"seq_len", p.seq_len},
          {"gradient_accumulation_steps", p.gradient_accumulation_steps},
          {"tokens_per_step", p.tokens_per_step},
          {"window_group", p.window_group},
          {"items", items},
          {"checks", checks},
          {"gpu_allocated_peak_bytes", p.gpu_allocated_peak_bytes},
          {"gpu_allocated_base_bytes", p.gpu_allocated_base_bytes},
          {"time_terms", terms},
          {"step_seconds", p.step_seconds},
          {"serial_step_seconds", p.serial_step_seconds},
          {"bottleneck", p.bottleneck},
          {"problems", p.problems},
          {"notes", p.notes},
          {"feasible", p.feasible()}};
}

Result<Plan> plan_from_json(const json& j) {
  Plan p;
  const std::string top = "plan";
  TZ_RETURN_IF_ERROR(field(j, "parameters", p.parameters, top));
  TZ_RETURN_IF_ERROR(field(j, "stage", p.stage, top));
  TZ_RETURN_IF_ERROR(field(j, "world_size", p.world_size, top));
  TZ_RETURN_IF_ERROR(field(j, "precision", p.precision, top));
  TZ_RETURN_IF_ERROR(field(j, "optimizer_device", p.optimizer_device, top));
  TZ_RETURN_IF_ERROR(field(j, "param_device", p.param_device, top));
  TZ_RETURN_IF_ERROR(field(j, "optimizer_state", p.optimizer_state, top));
  TZ_RETURN_IF_ERROR(field(j, "master_weights", p.master_weights, top));
  TZ_RETURN_IF_ERROR(field(j, "offload_grad_dtype", p.offload_grad_dtype, top));
  TZ_RETURN_IF_ERROR(field(j, "optimizer_records", p.optimizer_records, top));
  TZ_RETURN_IF_ERROR(field(j, "optimizer_records_in_memory", p.optimizer_records_in_memory, top));
  TZ_RETURN_IF_ERROR(field(j, "micro_batch", p.micro_batch, top));
  TZ_RETURN_IF_ERROR(field(j, "seq_len", p.seq_len, top));
  TZ_RETURN_IF_ERROR(field(j, "gradient_accumulation_steps", p.gradient_accumulation_steps, top));
  TZ_RETURN_IF_ERROR(field(j, "tokens_per_step", p.tokens_per_step, top));
  TZ_RETURN_IF_ERROR(field(j, "window_group", p.window_group, top));
  TZ_RETURN_IF_ERROR(field(j, "gpu_allocated_peak_bytes", p.gpu_allocated_peak_bytes, top));
  TZ_RETURN_IF_ERROR(field(j, "gpu_allocated_base_bytes", p.gpu_allocated_base_bytes, top));
  TZ_RETURN_IF_ERROR(field(j, "step_seconds", p.step_seconds, top));
  TZ_RETURN_IF_ERROR(field(j, "serial_step_seconds", p.serial_step_seconds, top));
  TZ_RETURN_IF_ERROR(field(j, "bottleneck", p.bottleneck, top));
  TZ_RETURN_IF_ERROR(field(j, "problems", p.problems, top));
  TZ_RETURN_IF_ERROR(field(j, "notes", p.notes, top));
  if (!j.contains("items") || !j["items"].is_array() || !j.contains("checks") || !j["checks"].is_array() ||
      !j.contains("time_terms") || !j["time_terms"].is_array())
    return invalid_argument("plan JSON: items, checks and time_terms must be arrays");
  for (size_t n = 0; n < j["items"].size(); ++n) {
    const json& i = j["items"][n];
    const std::string where = "items[" + std::to_string(n) + "]";
    MemoryItem item;
    std::string tier, phase;
    TZ_RETURN_IF_ERROR(field(i, "tier", tier, where));
    TZ_RETURN_IF_ERROR(field(i, "phase", phase, where));
    TZ_ASSIGN_OR_RETURN(item.tier, enum_named<Tier>(tier, tier_name, 4, where + ".tier"));
    TZ_ASSIGN_OR_RETURN(item.phase, enum_named<Phase>(phase, phase_name, 4, where + ".phase"));
    TZ_RETURN_IF_ERROR(field(i, "what", item.what, where));
    TZ_RETURN_IF_ERROR(field(i, "bytes", item.bytes, where));
    TZ_RETURN_IF_ERROR(field(i, "formula", item.formula, where));
    p.items.push_back(item);
  }
  if (!j.contains("state_bytes") || !j["state_bytes"].is_array())
    return invalid_argument("plan JSON: state_bytes must be an array");
  for (size_t n = 0; n < j["state_bytes"].size(); ++n) {
    const json& r = j["state_bytes"][n];
    const std::string where = "state_bytes[" + std::to_string(n) + "]";
    StateBytes row;
    TZ_RETURN_IF_ERROR(field(r, "what", row.what, where));
    TZ_RETURN_IF_ERROR(field(r, "gpu", row.gpu, where));
    TZ_RETURN_IF_ERROR(field(r, "pinned", row.pinned, where));
    TZ_RETURN_IF_ERROR(field(r, "pageable", row.pageable, where));
    TZ_RETURN_IF_ERROR(field(r, "nvme", row.nvme, where));
    p.state_bytes.push_back(row);
  }
  for (size_t n = 0; n < j["checks"].size(); ++n) {
    const json& c = j["checks"][n];
    const std::string where = "checks[" + std::to_string(n) + "]";
    TierCheck check;
    TZ_RETURN_IF_ERROR(field(c, "name", check.name, where));
    TZ_RETURN_IF_ERROR(field(c, "peak_bytes", check.peak_bytes, where));
    TZ_RETURN_IF_ERROR(field(c, "budget_bytes", check.budget_bytes, where));
    TZ_RETURN_IF_ERROR(field(c, "budget_source", check.budget_source, where));
    p.checks.push_back(check);
  }
  for (size_t n = 0; n < j["time_terms"].size(); ++n) {
    const json& t = j["time_terms"][n];
    const std::string where = "time_terms[" + std::to_string(n) + "]";
    TimeTerm term;
    TZ_RETURN_IF_ERROR(field(t, "what", term.what, where));
    TZ_RETURN_IF_ERROR(field(t, "seconds", term.seconds, where));
    TZ_RETURN_IF_ERROR(field(t, "detail", term.detail, where));
    p.time_terms.push_back(term);
  }
  return p;
}

}  // namespace tierzero::engine
