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

// Calls `f(key, field)` for each of the plan's scalar fields (`P`: Plan or const Plan).
template <typename P, typename F>
void each_scalar(P& p, F&& f) {
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

// Reads the rows of array `key` of `j` into `out`, each by `read(row, where, value)` (where:
// "key[n]"); kInvalidArgument when `key` is not an array.
template <typename Row, typename Read>
Status rows(const json& j, const char* key, std::vector<Row>& out, Read&& read) {
  if (!j.contains(key) || !j[key].is_array())
    return invalid_argument(std::string("plan JSON: ") + key + " must be an array");
  for (size_t n = 0; n < j[key].size(); ++n) {
    Row row;
    TZ_RETURN_IF_ERROR(read(j[key][n], std::string(key) + "[" + std::to_string(n) + "]", row));
    out.push_back(std::move(row));
  }
  return {};
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

Result<Plan> plan_from_json(const json& j) {
  Plan p;
  Status status;
  each_scalar(p, [&](const char* key, auto& value) {
    if (status.ok()) status = field(j, key, value, "plan");
  });
  TZ_RETURN_IF_ERROR(status);
  TZ_RETURN_IF_ERROR(rows(j, "items", p.items, [](const json& i, const std::string& where, MemoryItem& item) {
    std::string tier, phase;
    TZ_RETURN_IF_ERROR(field(i, "tier", tier, where));
    TZ_RETURN_IF_ERROR(field(i, "phase", phase, where));
    TZ_ASSIGN_OR_RETURN(item.tier, enum_named<Tier>(tier, tier_name, 4, where + ".tier"));
    TZ_ASSIGN_OR_RETURN(item.phase, enum_named<Phase>(phase, phase_name, 4, where + ".phase"));
    TZ_RETURN_IF_ERROR(field(i, "what", item.what, where));
    TZ_RETURN_IF_ERROR(field(i, "bytes", item.bytes, where));
    return field(i, "formula", item.formula, where);
  }));
  TZ_RETURN_IF_ERROR(
      rows(j, "state_bytes", p.state_bytes, [](const json& r, const std::string& where, StateBytes& row) {
        TZ_RETURN_IF_ERROR(field(r, "what", row.what, where));
        TZ_RETURN_IF_ERROR(field(r, "gpu", row.gpu, where));
        TZ_RETURN_IF_ERROR(field(r, "pinned", row.pinned, where));
        TZ_RETURN_IF_ERROR(field(r, "pageable", row.pageable, where));
        return field(r, "nvme", row.nvme, where);
      }));
  TZ_RETURN_IF_ERROR(rows(j, "checks", p.checks, [](const json& c, const std::string& where, TierCheck& check) {
    TZ_RETURN_IF_ERROR(field(c, "name", check.name, where));
    TZ_RETURN_IF_ERROR(field(c, "peak_bytes", check.peak_bytes, where));
    TZ_RETURN_IF_ERROR(field(c, "budget_bytes", check.budget_bytes, where));
    return field(c, "budget_source", check.budget_source, where);
  }));
  TZ_RETURN_IF_ERROR(rows(j, "time_terms", p.time_terms, [](const json& t, const std::string& where, TimeTerm& term) {
    TZ_RETURN_IF_ERROR(field(t, "what", term.what, where));
    TZ_RETURN_IF_ERROR(field(t, "seconds", term.seconds, where));
    return field(t, "detail", term.detail, where);
  }));
  return p;
}

}  // namespace tierzero::engine
