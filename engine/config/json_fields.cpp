#include "engine/config/internal/json_fields.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "common/common.h"

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

JsonFields::JsonFields(const nlohmann::json* object, std::string path) : object_(object), path_(std::move(path)) {}

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
  return JsonFields(v, path_of(key));
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

Status JsonFields::read_bool(const std::string& key, bool* out) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || is_auto_value(*v)) return {};
  if (!v->is_boolean()) return invalid_argument(path_of(key) + " must be true or false, got " + v->dump());
  *out = v->get<bool>();
  return {};
}

Status JsonFields::read_int(const std::string& key, int64_t* out, int64_t min, int64_t max) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || is_auto_value(*v)) return {};
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
  if (v == nullptr || is_auto_value(*v)) return {};
  Status s = read_int(key, &value, 0);
  if (!s.ok()) return invalid_argument(path_of(key) + " must be a whole number >= 0, got " + v->dump());
  if (positive && value == 0) return invalid_argument(path_of(key) + " must be > 0, got " + v->dump());
  *out = static_cast<uint64_t>(value);
  return {};
}

Status JsonFields::read_bytes(const std::string& key, uint64_t* out) {
  const nlohmann::json* v = find(key);
  if (v == nullptr || is_auto_value(*v)) return {};
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
  if (v == nullptr || is_auto_value(*v)) return {};
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
  if (v == nullptr || is_auto_value(*v)) return {};
  if (!v->is_string()) return invalid_argument(path_of(key) + " must be a string, got " + v->dump());
  *out = v->get<std::string>();
  return {};
}

void JsonFields::warn_unused(std::vector<std::string>* warnings) const {
  if (object_ == nullptr || !object_->is_object()) return;
  for (auto it = object_->begin(); it != object_->end(); ++it) {
    if (!used_.contains(it.key())) warnings->push_back("unknown key '" + path_of(it.key()) + "' (ignored)");
  }
}

}  // namespace tierzero::engine::detail
