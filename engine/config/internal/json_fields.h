// Private: typed, path-aware reading of one JSON object of a ds_config.
//
// A JsonFields wraps one object ("zero_optimization.offload_param") and reads its keys with
// DeepSpeed's leniency: numbers may be JSON numbers or strings ("5e8") and null counts as absent.
// "auto" is an error for the read_* calls but read_string (where it may be a value, as in
// aio.backend): a caller that resolves it asks is_auto() first. Every
// key read or asked about is marked used; check_unused() refuses the keys never touched, as
// DeepSpeed's config models refuse extra keys. Errors are kInvalidArgument and name the full JSON
// path of the key.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::engine::detail {

// The key paths tierzero.ignore_unknown_keys names ("wandb", "zero_optimization.my_key"): keys of
// other tools that check_unused() leaves alone (with a warning) instead of refusing. Shared by
// every JsonFields of one parse.
using IgnoredKeys = std::set<std::string, std::less<>>;

class JsonFields {
 public:
  // `object` must outlive this; null or absent objects read as empty. `path` is "" for the root.
  // `ignored` (may be null: none) must outlive this and its children.
  JsonFields(const nlohmann::json* object, std::string path, const IgnoredKeys* ignored = nullptr);

  // Returns a reader for the object under `key` (empty when absent or null); kInvalidArgument
  // when the value is neither an object nor null.
  Result<JsonFields> child(const std::string& key);

  // True when the key is present with a non-null value (including "auto").
  bool has(const std::string& key);
  // True when the value is the string "auto" (any case).
  bool is_auto(const std::string& key);
  // The full path of `key` ("zero_optimization.stage").
  std::string path_of(const std::string& key) const;
  // The raw value of a present key (marks it used); null when absent.
  const nlohmann::json& raw(const std::string& key);

  // Each leaves *out untouched when the key is absent or null; otherwise converts or returns an
  // error naming the key, the value and the accepted form ("auto" too, but for read_string: see
  // auto_error()).
  Status read_bool(const std::string& key, bool* out);
  // A whole number in [min, max] (JSON number or numeric string).
  Status read_int(const std::string& key, int64_t* out, int64_t min, int64_t max = INT64_MAX);
  Status read_int(const std::string& key, int* out, int min, int max = INT32_MAX);
  // A whole non-negative number (element counts); `positive` rejects 0.
  Status read_count(const std::string& key, uint64_t* out, bool positive);
  // A byte size: a number or a string tierzero::parse_bytes accepts ("24GB", "1MiB").
  Status read_bytes(const std::string& key, uint64_t* out);
  // A finite number in [min, max].
  Status read_double(const std::string& key, double* out, double min, double max);
  Status read_string(const std::string& key, std::string* out);

  // The error for "auto" in `key`, which tierzero does not resolve: give a value.
  Status auto_error(const std::string& key) const;

  // Refuses every key not read or asked about: kInvalidArgument naming each (JSON path) with the
  // nearest key this object knows ("did you mean offload_optimizer?") or the keys it reads, and
  // tierzero.ignore_unknown_keys. Exceptions: a key the registry lists as a DeepSpeed key tierzero
  // does not read (warn_ineffective_keys() warns about it), and a key `ignored` names (a warning
  // here, "ignored as tierzero.ignore_unknown_keys asks").
  Status check_unused(std::vector<std::string>* warnings) const;

 private:
  const nlohmann::json* find(const std::string& key);
  Result<double> number(const std::string& key, const nlohmann::json& value) const;
  const nlohmann::json* object_;
  std::string path_;
  const IgnoredKeys* ignored_;
  std::set<std::string> used_;
};

}  // namespace tierzero::engine::detail
