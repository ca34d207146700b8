// Parsing and validation of a safetensors header; see the layout in safetensors.h.
#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors/safetensors.h"

namespace tierzero::checkpoint {
namespace {

using nlohmann::json;

// Parses `text`, rejecting duplicate keys in any object (nlohmann keeps the last silently).
Result<json> parse_json_unique_keys(std::string_view text, const std::string& file) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys_per_object.emplace_back();
    if (event == json::parse_event_t::object_end) keys_per_object.pop_back();
    if (event == json::parse_event_t::key && !keys_per_object.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json parsed;
  try {
    parsed = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    return corrupt(
        fmt::format("{}: safetensors header is not valid JSON ({}); the file is damaged "
                    "or not a safetensors file",
                    file, e.what()));
  }
  if (!duplicate.empty()) {
    return corrupt(fmt::format("{}: safetensors header names '{}' twice; names must be unique", file, duplicate));
  }
  return parsed;
}

Status tensor_error(const std::string& file, const std::string& name, const std::string& problem) {
  return corrupt(fmt::format("{}: tensor '{}': {}", file, name, problem));
}

Result<SafetensorsTensorInfo> parse_tensor(const std::string& name, const json& entry, uint64_t data_bytes,
                                           const std::string& file) {
  if (!entry.is_object()) return tensor_error(file, name, "entry is not a JSON object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return tensor_error(file, name, fmt::format("unknown field '{}'", key));
    }
  }
  SafetensorsTensorInfo info;
  info.name = name;
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return tensor_error(file, name, "missing or non-string 'dtype'");
  }
  auto dtype = parse_dtype(dtype_it->get<std::string>());
  if (!dtype) return tensor_error(file, name, fmt::format("unknown dtype '{}'", dtype_it->get<std::string>()));
  info.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) return tensor_error(file, name, "missing or non-array 'shape'");
  uint64_t numel = 1;
  for (const json& dim : *shape_it) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      return tensor_error(file, name,
                          fmt::format("shape {} has a dimension that is not a non-negative integer", shape_it->dump()));
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / d) {
      return tensor_error(file, name, fmt::format("shape {} overflows 64 bits", shape_it->dump()));
    }
    numel *= d;
    info.shape.push_back(static_cast<int64_t>(d));
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return tensor_error(file, name, "'data_offsets' must be two non-negative integers [begin, end]");
  }
  info.begin = (*offsets_it)[0].get<uint64_t>();
  info.end = (*offsets_it)[1].get<uint64_t>();
  if (info.end < info.begin) {
    return tensor_error(file, name, fmt::format("data_offsets [{}, {}] end before they begin", info.begin, info.end));
  }
  if (info.end > data_bytes) {
    return tensor_error(file, name,
                        fmt::format("data_offsets [{}, {}] run past the end of the data section ({} bytes); "
                                    "the file is truncated or its header is wrong",
                                    info.begin, info.end, data_bytes));
  }
  auto bytes = element_bytes(info.dtype, numel);
  if (!bytes || *bytes != info.end - info.begin) {
    return tensor_error(file, name,
                        fmt::format("{} elements of {} need {} bytes but data_offsets [{}, {}] hold {}", numel,
                                    dtype_name(info.dtype), bytes ? fmt::format("{}", *bytes) : "a non-whole number of",
                                    info.begin, info.end, info.end - info.begin));
  }
  return info;
}

Result<std::map<std::string, std::string>> parse_metadata(const json& entry, const std::string& file) {
  if (!entry.is_object()) return corrupt(fmt::format("{}: '__metadata__' is not a JSON object", file));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : entry.items()) {
    if (!value.is_string()) {
      return corrupt(
          fmt::format("{}: '__metadata__' entry '{}' is not a string (metadata maps strings to strings)", file, key));
    }
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// The ranges, sorted by begin, must tile [0, data_bytes) exactly.
Status check_tiling(const std::vector<SafetensorsTensorInfo>& sorted, uint64_t data_bytes, const std::string& file) {
  uint64_t expected = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& t : sorted) {
    if (t.begin < expected) {
      return tensor_error(file, t.name,
                          fmt::format("data_offsets [{}, {}] overlap tensor '{}' ending at {}", t.begin, t.end,
                                      previous->name, expected));
    }
    if (t.begin > expected) {
      return tensor_error(file, t.name,
                          fmt::format("data_offsets [{}, {}] leave a gap of {} unclaimed bytes before them "
                                      "(tensor data must be contiguous)",
                                      t.begin, t.end, t.begin - expected));
    }
    expected = t.end;
    previous = &t;
  }
  if (expected != data_bytes) {
    return corrupt(
        fmt::format("{}: the data section holds {} bytes but its tensors cover only {}; "
                    "{} trailing bytes belong to no tensor",
                    file, data_bytes, expected, data_bytes - expected));
  }
  return {};
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(std::string_view text, uint64_t data_bytes,
                                                   const std::string& file) {
  TZ_ASSIGN_OR_RETURN(json parsed, parse_json_unique_keys(text, file));
  if (!parsed.is_object()) return corrupt(fmt::format("{}: safetensors header is not a JSON object", file));
  SafetensorsHeader header;
  for (const auto& [name, entry] : parsed.items()) {
    if (name == "__metadata__") {
      TZ_ASSIGN_OR_RETURN(header.metadata, parse_metadata(entry, file));
      continue;
    }
    TZ_ASSIGN_OR_RETURN(SafetensorsTensorInfo info, parse_tensor(name, entry, data_bytes, file));
    header.tensors.push_back(std::move(info));
  }
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  TZ_RETURN_IF_ERROR(check_tiling(header.tensors, data_bytes, file));
  return header;
}

}  // namespace tierzero::checkpoint
