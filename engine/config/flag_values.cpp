#include "engine/config/internal/flag_values.h"

#include <fmt/format.h>

namespace tierzero::engine::detail {
namespace {

// The resolution every type shares; `read` reads a present, non-"auto" value into *out.
template <typename T, typename Read>
Status resolve(JsonFields& f, const std::string& key, const std::optional<T>& flag, std::string_view flag_name,
               T* out, Read read) {
  if (f.is_auto(key)) {
    if (!flag) return auto_needs_flag(f, key, flag_name);
    *out = *flag;
    return {};
  }
  if (!f.has(key)) {
    if (flag) *out = *flag;
    return {};
  }
  TZ_RETURN_IF_ERROR(read(out));
  if (flag && *out != *flag) {
    return invalid_argument(fmt::format(
        "{} is {} in the ds_config but {} gives {}: set it \"auto\" to take the flag's value, or drop the flag",
        f.path_of(key), *out, flag_name, *flag));
  }
  return {};
}

template <typename T>
Status check_flag_range(const std::optional<T>& flag, std::string_view flag_name, T min, T max) {
  if (!flag || (*flag >= min && *flag <= max)) return {};
  return invalid_argument(fmt::format("{} must be between {} and {}, got {}", flag_name, min, max, *flag));
}

}  // namespace

Status auto_needs_flag(const JsonFields& f, const std::string& key, std::string_view flag_name) {
  return invalid_argument(fmt::format(
      "{} is \"auto\": pass {} to tierzero train (the flag the Hugging Face Trainer fills it from), or give a value",
      f.path_of(key), flag_name));
}

Status resolve_int(JsonFields& f, const std::string& key, const std::optional<int64_t>& flag,
                   std::string_view flag_name, int64_t* out, int64_t min, int64_t max) {
  TZ_RETURN_IF_ERROR(check_flag_range(flag, flag_name, min, max));
  return resolve(f, key, flag, flag_name, out, [&](int64_t* value) { return f.read_int(key, value, min, max); });
}

Status resolve_double(JsonFields& f, const std::string& key, const std::optional<double>& flag,
                      std::string_view flag_name, double* out, double min, double max) {
  TZ_RETURN_IF_ERROR(check_flag_range(flag, flag_name, min, max));
  return resolve(f, key, flag, flag_name, out, [&](double* value) { return f.read_double(key, value, min, max); });
}

Status resolve_bool(JsonFields& f, const std::string& key, const std::optional<bool>& flag, std::string_view flag_name,
                    bool* out) {
  return resolve(f, key, flag, flag_name, out, [&](bool* value) { return f.read_bool(key, value); });
}

}  // namespace tierzero::engine::detail
