// Private: a ds_config key resolved against the `tierzero train` flag that stands for the Hugging
// Face Trainer argument filling it (ds_config.h, "auto").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/common.h"
#include "engine/config/internal/json_fields.h"

namespace tierzero::engine::detail {

// The value of `key` in `f`, given `flag` (the value of the flag named `flag_name`; unset when not
// given):
//   "auto": the flag's value; without the flag, an error naming it;
//   absent: the flag's value when given, else *out is left as it is;
//   a value: read as JsonFields::read_int / read_double do; with the flag too, they must agree
//       (else an error naming both: set the key "auto" to take the flag, or drop the flag).
// A flag's value outside [min, max] is an error naming the flag.
Status resolve_int(JsonFields& f, const std::string& key, const std::optional<int64_t>& flag,
                   std::string_view flag_name, int64_t* out, int64_t min, int64_t max = INT64_MAX);
Status resolve_double(JsonFields& f, const std::string& key, const std::optional<double>& flag,
                      std::string_view flag_name, double* out, double min, double max);
// The same for a true/false key.
Status resolve_bool(JsonFields& f, const std::string& key, const std::optional<bool>& flag, std::string_view flag_name,
                    bool* out);

// The error for "auto" in `key` with its flag not given: "PATH is "auto": pass FLAG ...".
Status auto_needs_flag(const JsonFields& f, const std::string& key, std::string_view flag_name);

}  // namespace tierzero::engine::detail
