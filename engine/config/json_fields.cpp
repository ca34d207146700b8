#include "engine/config/internal/json_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/common.h"
#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

const nlohmann::json& null_json() {
  static const nlohmann::json kNull;
  return kNull;
}

bool is_auto_value(const nlohmann::json& v) {
  if (!v.is_string()) return false;
  std::string s = v.get<std::string>();
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "auto";
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json* object, std::string path, const IgnoredKeys* ignored)
    : object_(object), path_(std::move(path)), ignored_(ignored) {}

std::string JsonFields::path_of(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

const nlohmann::json* JsonFields::find(const std::string& key) {
  used_.insert(key);
  if (object_ == nullptr || !object_->is_object()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& JsonFields::raw(const std::string& key) {
  const nlohmann::json* v = find(key);
  return v ? *v : null_json();
}

bool JsonFields::has(const std::string& key) { return find(key) != nullptr; }

bool JsonFields::is_auto(const std::string& key) {
  const nlohmann::json* v = find(key);
  return v != nullptr && is_auto_value(*v);
}

Result<JsonFields> JsonFields::child(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (v != nullptr && !v->is_object()) {
    return invalid_argument(path_of(key) + " must be a JSON object ({...}), got " + v->dump());
  }
  return JsonFields(v, path_of(key), ignored_);
}

Result<double> JsonFields::number(const std::string& key, const nlohmann::json& v) const {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return d;
  }
  return invalid_argument(path_of(key) + " must be a number (e.g. 5e8 or \"5e8\"), got " + v.dump());
}

Status JsonFields::auto_error(const std::string& key) const {
  return invalid_argument(path_of(key) +
                          " is \"auto\", which tierzero resolves only where the Hugging Face Trainer fills it "
                          "(configs/README.md, \"auto\"): give a value");
}

Status JsonFields::read_bool(const std::string& key, bool* out) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (is_auto_value(*v)) return auto_error(key);
  if (!v->is_boolean()) return invalid_argument(path_of(key) + " must be true or false, got " + v->dump());
  *out = v->get<bool>();
  return {};
}

Status JsonFields::read_int(const std::string& key, int64_t* out, int64_t min, int64_t max) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (is_auto_value(*v)) return auto_error(key);
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < min || i > max) {
      return invalid_argument(path_of(key) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                              "], got " + v->dump());
    }
    *out = i;
    return {};
  }
  TZ_ASSIGN_OR_RETURN(double d, number(key, *v));
  if (!std::isfinite(d) || d != std::floor(d)) {
    return invalid_argument(path_of(key) + " must be a whole number, got " + v->dump());
  }
  // 2^63 and above would overflow the conversion (INT64_MAX rounds up to 2^63 as a double).
  if (d < static_cast<double>(min) || d > static_cast<double>(max) || d >= 0x1p63) {
    return invalid_argument(path_of(key) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) +
                            "], got " + v->dump());
  }
  *out = static_cast<int64_t>(d);
  return {};
}

Status JsonFields::read_int(const std::string& key, int* out, int min, int max) {
  int64_t wide = *out;
  TZ_RETURN_IF_ERROR(read_int(key, &wide, min, max));
  *out = static_cast<int>(wide);
  return {};
}

Status JsonFields::read_count(const std::string& key, uint64_t* out, bool positive) {
  int64_t value = static_cast<int64_t>(*out);
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (is_auto_value(*v)) return auto_error(key);
  Status s = read_int(key, &value, 0);
  if (!s.ok()) return invalid_argument(path_of(key) + " must be a whole number >= 0, got " + v->dump());
  if (positive && value == 0) return invalid_argument(path_of(key) + " must be > 0, got " + v->dump());
  *out = static_cast<uint64_t>(value);
  return {};
}

Status JsonFields::read_bytes(const std::string& key, uint64_t* out) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (is_auto_value(*v)) return auto_error(key);
  if (v->is_string()) {
    Result<uint64_t> bytes = parse_bytes(v->get<std::string>());
    if (!bytes.ok()) return bytes.status().with_context(path_of(key));
    *out = *bytes;
    return {};
  }
  return read_count(key, out, false);
}

Status JsonFields::read_double(const std::string& key, double* out, double min, double max) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (is_auto_value(*v)) return auto_error(key);
  TZ_ASSIGN_OR_RETURN(double d, number(key, *v));
  if (!std::isfinite(d) || d < min || d > max) {
    return invalid_argument(
        fmt::format("{} must be a finite number in [{}, {}], got {}", path_of(key), min, max, v->dump()));
  }
  *out = d;
  return {};
}

Status JsonFields::read_string(const std::string& key, std::string* out) {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return {};
  if (!v->is_string()) return invalid_argument(path_of(key) + " must be a string, got " + v->dump());
  *out = v->get<std::string>();
  return {};
}

Status JsonFields::check_unused(std::vector<std::string>* warnings) const {
  if (object_ == nullptr || !object_->is_object()) return {};
  std::string refused;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    const std::string path = path_of(it.key());
    if (used_.contains(it.key()) || is_warned_key(path)) continue;
    if (ignored_ != nullptr && ignored_->contains(path)) {
      warnings->push_back("'" + path + "' is not a key tierzero knows: ignored as tierzero.ignore_unknown_keys asks");
      continue;
    }
    // Near names: the keys read here and the DeepSpeed keys registered here; a registered key that
    // is not read here (a scheduler's key under another scheduler) has no near name but itself.
    std::vector<std::string> near;
    for (const std::string& name : used_)
      if (name != it.key()) near.push_back(name);
    for (std::string& name : registered_children(path_))
      if (name != it.key() && is_warned_key(path_of(name))) near.push_back(std::move(name));
    if (!refused.empty()) refused += "; ";
    refused += "unknown key '" + path + "'";
    if (std::optional<std::string> meant = nearest_name(it.key(), near)) {
      refused += ": did you mean " + *meant + "?";
    } else {
      refused += fmt::format(" ({} takes {})", path_.empty() ? "the top level" : path_, fmt::join(used_, ", "));
    }
  }
  if (refused.empty()) return {};
  return invalid_argument(refused +
                          " (tierzero refuses keys it does not know, as DeepSpeed's config models do; a key of "
                          "another tool may be listed in tierzero.ignore_unknown_keys)");
}

}  // namespace tierzero::engine::detail
