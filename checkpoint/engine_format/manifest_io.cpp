// JSON forms of the engine checkpoint manifest and rank records, and manifest validation.
#include "checkpoint/engine_format/internal/manifest_io.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>

#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

using nlohmann::json;

// A JSON field that is missing or of the wrong type; caught at the parse boundary.
struct FieldError {
  std::string message;
};
// A state encoding this reader does not know (kUnsupported, not kCorrupt).
struct UnsupportedCodec {
  std::string message;
};

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw FieldError{fmt::format("{}: missing field '{}'", where, key)};
  return j.at(key);
}

// `v` as integer type T: nlohmann converts a float to an integer type with a plain cast (undefined
// for 3e91: fuzzing) and an integer to a narrower one modulo 2^n (world_size 2^32 + 1 would read 1).
template <typename T>
T integer_value(const json& v, const char* key, const std::string& where) {
  bool fits = false;
  if (v.is_number_unsigned()) {
    fits = v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    fits = x < 0 ? std::is_signed_v<T> && x >= static_cast<int64_t>(std::numeric_limits<T>::min())
                 : static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!fits) throw FieldError{fmt::format("{}: field '{}' is not an integer in range ({})", where, key, v.dump())};
  return v.is_number_unsigned() ? static_cast<T>(v.get<uint64_t>()) : static_cast<T>(v.get<int64_t>());
}

template <typename T>
T typed(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return integer_value<T>(v, key, where);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!v.is_array()) throw FieldError{fmt::format("{}: field '{}' is not an array ({})", where, key, v.dump())};
    std::vector<int64_t> values;
    for (const json& e : v) values.push_back(integer_value<int64_t>(e, key, where));
    return values;
  } else {
    try {
      return v.get<T>();
    } catch (const json::exception& e) {
      throw FieldError{fmt::format("{}: field '{}' has the wrong type ({})", where, key, v.dump())};
    }
  }
}

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

uint64_t parse_hex64(const json& j, const char* key, const std::string& where) {
  const auto text = typed<std::string>(j, key, where);
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos) {
    throw FieldError{fmt::format("{}: field '{}' is not a 16-digit hex checksum ('{}')", where, key, text)};
  }
  return std::stoull(text, nullptr, 16);
}

json tensor_to_json(const TensorSpec& t) { return {{"name", t.name}, {"shape", t.shape}}; }

TensorSpec tensor_from_json(const json& j, const std::string& where) {
  return {typed<std::string>(j, "name", where), typed<std::vector<int64_t>>(j, "shape", where)};
}

ElementType dtype_from_json(const json& j, const char* key, const std::string& where) {
  const auto name = typed<std::string>(j, key, where);
  auto dtype = parse_dtype(name);
  if (!dtype) throw FieldError{fmt::format("{}: unknown dtype '{}'", where, name)};
  return *dtype;
}

// A state's "codec" field (absent: kRaw). A codec this reader does not know is refused by name.
StateSpec state_from_json(const json& j, const std::string& where) {
  StateSpec state{typed<std::string>(j, "name", where), dtype_from_json(j, "dtype", where)};
  if (!j.contains("codec")) return state;
  const auto codec = typed<std::string>(j, "codec", where);
  if (codec == "compact_master") {
    state.codec = StateCodec::kCompactMaster;
  } else if (codec == "blockwise8") {
    state.codec = StateCodec::kBlockwise8;
    state.codes = dtype_from_json(j, "codes", where);
    const auto block = typed<uint64_t>(j, "block", where);
    if (block != kStateBlock) {
      throw UnsupportedCodec{fmt::format("{}: state '{}' has blockwise8 blocks of {} elements; this tierzero reads {}",
                                         where, state.name, block, kStateBlock)};
    }
  } else {
    throw UnsupportedCodec{fmt::format(
        "{}: state '{}' is stored with codec '{}', which this tierzero does not read; use a newer tierzero", where,
        state.name, codec)};
  }
  return state;
}

json state_to_json(const StateSpec& s) {
  json j = {{"name", s.name}, {"dtype", dtype_name(s.dtype)}};
  if (s.codec == StateCodec::kCompactMaster) j["codec"] = "compact_master";
  if (s.codec == StateCodec::kBlockwise8) {
    j["codec"] = "blockwise8";
    j["codes"] = dtype_name(s.codes);
    j["block"] = kStateBlock;
  }
  return j;
}

CheckpointManifest manifest_from_json(const json& j, const std::string& where) {
  CheckpointManifest m;
  m.zero_stage = typed<int>(j, "zero_stage", where);
  m.world_size = typed<uint32_t>(j, "world_size", where);
  m.alignment = typed<uint32_t>(j, "alignment", where);
  m.step = typed<int64_t>(j, "step", where);
  for (const json& g : field(j, "groups", where)) {
    FlatGroup group;
    for (const json& p : field(g, "params", where)) group.params.push_back(tensor_from_json(p, where));
    for (const json& s : field(g, "states", where)) group.states.push_back(state_from_json(s, where));
    m.groups.push_back(std::move(group));
  }
  for (const json& r : field(j, "replicated", where)) {
    m.replicated.push_back({tensor_from_json(r, where), dtype_from_json(r, "dtype", where)});
  }
  for (const json& a : field(j, "aliases", where)) {
    m.aliases.emplace_back(typed<std::string>(a, "alias", where), typed<std::string>(a, "source", where));
  }
  m.loss_scaler = field(j, "loss_scaler", where);
  m.lr_scheduler = field(j, "lr_scheduler", where);
  m.data_position = field(j, "data_position", where);
  m.model_config_json = typed<std::string>(j, "model_config_json", where);
  return m;
}

RankFileRecord rank_record_from_json(const json& j, const std::string& where) {
  RankFileRecord r;
  r.rank = typed<uint32_t>(j, "rank", where);
  r.file = typed<std::string>(j, "file", where);
  r.bytes = typed<uint64_t>(j, "bytes", where);
  r.xxh3 = parse_hex64(j, "xxh3", where);
  r.layout_hash = parse_hex64(j, "layout_hash", where);
  r.rank_state = field(j, "rank_state", where);
  for (const json& s : field(j, "sections", where)) {
    SectionRecord sec;
    sec.replicated = typed<bool>(s, "replicated", where);
    sec.group = typed<uint32_t>(s, "group", where);
    sec.state = typed<uint32_t>(s, "state", where);
    sec.part = s.contains("part") ? typed<uint32_t>(s, "part", where) : 0;     // version 1, 2: one part
    sec.first = s.contains("first") ? typed<uint64_t>(s, "first", where) : 0;  // version 1, 2: one piece
    sec.index = typed<uint32_t>(s, "index", where);
    sec.offset = typed<uint64_t>(s, "offset", where);
    sec.stored_bytes = typed<uint64_t>(s, "stored_bytes", where);
    sec.raw_bytes = typed<uint64_t>(s, "raw_bytes", where);
    sec.compressed = typed<std::string>(s, "compression", where) == "zstd";
    sec.xxh3 = parse_hex64(s, "xxh3", where);
    r.sections.push_back(sec);
  }
  return r;
}

Status check_tensor(const TensorSpec& t, std::set<std::string>& names, const std::string& what) {
  if (t.name.empty()) return invalid_argument(fmt::format("manifest: a {} has an empty name", what));
  if (!names.insert(t.name).second) {
    return invalid_argument(fmt::format("manifest: tensor '{}' appears twice; names must be unique", t.name));
  }
  __int128 numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return invalid_argument(fmt::format("manifest: {} '{}' has a negative dimension", what, t.name));
    numel *= d;
    if (numel > (__int128{1} << 62)) {
      return invalid_argument(fmt::format("manifest: {} '{}' has a shape too large to address", what, t.name));
    }
  }
  return {};
}

bool storable_state_dtype(ElementType d) {
  return d == ElementType::kF32 || d == ElementType::kBF16 || d == ElementType::kF16;
}

Status check_state(const StateSpec& s, size_t group) {
  if (!storable_state_dtype(s.dtype)) {
    return invalid_argument(
        fmt::format("manifest: group {} state '{}' has dtype {}; use F32, BF16 or F16", group, s.name, dtype_name(s.dtype)));
  }
  if (s.codec != StateCodec::kRaw && s.dtype != ElementType::kF32) {
    return invalid_argument(fmt::format("manifest: group {} state '{}' is encoded, so its dtype (what it decodes to) "
                                        "must be F32, not {}",
                                        group, s.name, dtype_name(s.dtype)));
  }
  if (s.codec == StateCodec::kBlockwise8 && s.codes != ElementType::kI8 && s.codes != ElementType::kU8) {
    return invalid_argument(fmt::format("manifest: group {} state '{}' has blockwise8 codes {}; use I8 (exp_avg) or "
                                        "U8 (exp_avg_sq)",
                                        group, s.name, dtype_name(s.codes)));
  }
  return {};
}

// Partition elements a piece of `part` holds, starting at element `first` of a `partition`-element
// partition, from its `raw_bytes` (a scales piece holds whole blocks but the partition's last).
uint64_t piece_numel(const StatePart& part, uint64_t first, uint64_t raw_bytes, uint64_t partition) {
  const uint64_t items = raw_bytes / element_size(part.dtype);
  return part.per_block ? std::min(items * kStateBlock, partition - std::min(partition, first)) : items;
}

// A rank file's sections: back to back from offset 0 to the file's end; each group state part of
// the rank covered by its pieces in order (first = where the previous ended, block-aligned for
// 8-bit moments) up to the partition's end; each replicated tensor (rank 0) once, whole.
Status check_sections(const CheckpointManifest& m, const RankFileRecord& r, const std::string& where) {
  const bool stores = rank_stores_groups(m.zero_stage, r.rank);
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint64_t> covered;  // (group, state, part) -> elements
  std::set<uint32_t> replicated;
  uint64_t end = 0;
  for (const SectionRecord& s : r.sections) {
    if (s.offset != end || s.stored_bytes > r.bytes - std::min(r.bytes, s.offset) ||
        (!s.compressed && s.stored_bytes != s.raw_bytes)) {
      return corrupt(fmt::format("{}: rank {} section at offset {} ({} bytes) is out of place in a {}-byte file", where,
                                 r.rank, s.offset, s.stored_bytes, r.bytes));
    }
    end = s.offset + s.stored_bytes;
    const bool valid_ref = s.replicated ? s.index < m.replicated.size() && r.rank == 0
                                        : stores && s.group < m.groups.size() &&
                                              s.state < m.groups[s.group].states.size() &&
                                              s.part < state_parts(m.groups[s.group].states[s.state]).size();
    if (!valid_ref)
      return corrupt(fmt::format("{}: rank {} has a section for a tensor not in the layout", where, r.rank));
    if (s.replicated) {
      if (s.raw_bytes != replicated_bytes(m.replicated[s.index]) || !replicated.insert(s.index).second) {
        return corrupt(fmt::format("{}: rank {} section of tensor '{}' holds {} bytes, the layout needs {} once", where,
                                   r.rank, m.replicated[s.index].spec.name, s.raw_bytes,
                                   replicated_bytes(m.replicated[s.index])));
      }
      continue;
    }
    const FlatGroup& g = m.groups[s.group];
    const StateSpec& state = g.states[s.state];
    const StatePart part = state_parts(state)[s.part];
    const uint64_t partition = partition_numel(g, m.zero_stage, m.world_size, m.alignment);
    auto [at, fresh] = covered.try_emplace({s.group, s.state, s.part}, 0);
    const uint64_t n = piece_numel(part, s.first, s.raw_bytes, partition);
    const bool aligned = state.codec != StateCodec::kBlockwise8 || s.first % kStateBlock == 0;
    if (s.first != at->second || (!fresh && n == 0) || !aligned || n > partition - s.first ||
        s.raw_bytes != part_numel(part, n) * element_size(part.dtype)) {
      return corrupt(fmt::format("{}: rank {} {} has a section of {} bytes at element {} where element {} was due; "
                                 "the layout needs {} elements (wrong world size or stage?)",
                                 where, r.rank, section_label(m, s), s.raw_bytes, s.first, at->second, partition));
    }
    at->second += n;
  }
  if (end != r.bytes) {
    return corrupt(fmt::format("{}: rank {} sections cover {} of its {} bytes", where, r.rank, end, r.bytes));
  }
  for (uint32_t g = 0; g < m.groups.size() && stores; ++g) {
    const uint64_t partition = partition_numel(m.groups[g], m.zero_stage, m.world_size, m.alignment);
    for (uint32_t s = 0; s < m.groups[g].states.size(); ++s) {
      for (uint32_t p = 0; p < state_parts(m.groups[g].states[s]).size(); ++p) {
        auto it = covered.find({g, s, p});
        if (it == covered.end() || it->second != partition) {
          return corrupt(fmt::format("{}: rank {} sections hold {} elements of group {} state '{}' part {}, the layout "
                                     "needs {}",
                                     where, r.rank, it == covered.end() ? 0 : it->second, g,
                                     m.groups[g].states[s].name, p, partition));
        }
      }
    }
  }
  if (replicated.size() != (r.rank == 0 ? m.replicated.size() : 0)) {
    return corrupt(fmt::format("{}: rank {} record lists {} replicated tensors, the layout needs {}", where, r.rank,
                               replicated.size(), r.rank == 0 ? m.replicated.size() : 0));
  }
  return {};
}

}  // namespace

uint64_t group_part_bytes(const CheckpointManifest& m, size_t group, size_t state, size_t part) {
  const FlatGroup& g = m.groups[group];
  const StatePart p = state_parts(g.states[state])[part];
  return part_numel(p, partition_numel(g, m.zero_stage, m.world_size, m.alignment)) * element_bits(p.dtype) / 8;
}

std::string section_label(const CheckpointManifest& m, const SectionRecord& s) {
  if (s.replicated) return fmt::format("tensor '{}'", m.replicated[s.index].spec.name);
  const StateSpec& state = m.groups[s.group].states[s.state];
  const std::string_view part = state_parts(state)[s.part].name;
  if (part.empty()) return fmt::format("group {} state '{}'", s.group, state.name);
  return fmt::format("group {} state '{}' part '{}'", s.group, state.name, part);
}

int stored_version(const StoredManifest& stored) {
  for (const RankFileRecord& r : stored.files)
    for (const SectionRecord& s : r.sections)
      if (s.first != 0) return kEncodedStatesVersion;
  return manifest_version(stored.manifest);
}

int manifest_version(const CheckpointManifest& m) {
  for (const FlatGroup& g : m.groups)
    for (const StateSpec& s : g.states)
      if (s.codec != StateCodec::kRaw) return kEncodedStatesVersion;
  return 2;
}

uint64_t replicated_bytes(const ReplicatedTensor& t) {
  return static_cast<uint64_t>(t.spec.numel()) * element_bits(t.dtype) / 8;
}

std::string rank_file_name(uint32_t rank) { return fmt::format("rank_{:05d}.bin", rank); }
std::string rank_record_name(uint32_t rank) { return fmt::format("rank_{:05d}.json", rank); }

Status validate_manifest(const CheckpointManifest& m) {
  if (m.zero_stage < 0 || m.zero_stage > 3) {
    return invalid_argument(fmt::format("manifest: zero_stage {} is not 0, 1, 2 or 3", m.zero_stage));
  }
  if (m.world_size == 0) return invalid_argument("manifest: world_size must be at least 1");
  if (m.alignment == 0) return invalid_argument("manifest: alignment must be at least 1 element");
  std::set<std::string> names;
  for (size_t g = 0; g < m.groups.size(); ++g) {
    if (m.groups[g].states.empty()) {
      return invalid_argument(fmt::format("manifest: group {} has no states (states[0] must be the fp32 master)", g));
    }
    for (const StateSpec& s : m.groups[g].states) TZ_RETURN_IF_ERROR(check_state(s, g));
    for (const TensorSpec& p : m.groups[g].params) TZ_RETURN_IF_ERROR(check_tensor(p, names, "parameter"));
  }
  for (const ReplicatedTensor& r : m.replicated) TZ_RETURN_IF_ERROR(check_tensor(r.spec, names, "replicated tensor"));
  for (const auto& [alias, source] : m.aliases) {
    if (names.count(alias) != 0 || names.count(source) == 0) {
      return invalid_argument(
          fmt::format("manifest: alias '{}' -> '{}' must name an unsaved alias of a saved tensor", alias, source));
    }
  }
  return {};
}

uint64_t layout_hash(const CheckpointManifest& manifest) {
  const std::string text = manifest_to_json(manifest).dump();
  return XXH3_64bits(text.data(), text.size());
}

json manifest_to_json(const CheckpointManifest& m) {
  json groups = json::array();
  for (const FlatGroup& g : m.groups) {
    json params = json::array();
    for (const TensorSpec& p : g.params) params.push_back(tensor_to_json(p));
    json states = json::array();
    for (const StateSpec& s : g.states) states.push_back(state_to_json(s));
    groups.push_back({{"params", params}, {"states", states}});
  }
  json replicated = json::array();
  for (const ReplicatedTensor& r : m.replicated) {
    json t = tensor_to_json(r.spec);
    t["dtype"] = dtype_name(r.dtype);
    replicated.push_back(t);
  }
  json aliases = json::array();
  for (const auto& [alias, source] : m.aliases) aliases.push_back({{"alias", alias}, {"source", source}});
  return {{"zero_stage", m.zero_stage},
          {"world_size", m.world_size},
          {"alignment", m.alignment},
          {"step", m.step},
          {"groups", groups},
          {"replicated", replicated},
          {"aliases", aliases},
          {"loss_scaler", m.loss_scaler},
          {"lr_scheduler", m.lr_scheduler},
          {"data_position", m.data_position},
          {"model_config_json", m.model_config_json}};
}

json rank_record_to_json(const RankFileRecord& r) {
  json sections = json::array();
  for (const SectionRecord& s : r.sections) {
    sections.push_back({{"replicated", s.replicated},
                        {"group", s.group},
                        {"state", s.state},
                        {"part", s.part},
                        {"first", s.first},
                        {"index", s.index},
                        {"offset", s.offset},
                        {"stored_bytes", s.stored_bytes},
                        {"raw_bytes", s.raw_bytes},
                        {"compression", s.compressed ? "zstd" : "none"},
                        {"xxh3", hex64(s.xxh3)}});
  }
  return {{"rank", r.rank},
          {"file", r.file},
          {"bytes", r.bytes},
          {"xxh3", hex64(r.xxh3)},
          {"layout_hash", hex64(r.layout_hash)},
          {"rank_state", r.rank_state},
          {"sections", sections}};
}

std::string stored_manifest_text(const StoredManifest& stored) {
  json j = manifest_to_json(stored.manifest);
  j["format"] = kManifestFormat;
  j["format_version"] = stored_version(stored);
  json files = json::array();
  for (const RankFileRecord& r : stored.files) files.push_back(rank_record_to_json(r));
  j["files"] = files;
  return j.dump(1) + "\n";
}

Result<RankFileRecord> parse_rank_record(const json& j, const std::string& path) {
  try {
    return rank_record_from_json(j, path);
  } catch (const FieldError& e) {
    return corrupt(e.message);
  }
}

Result<StoredManifest> parse_stored_manifest(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return corrupt(fmt::format("{}: manifest is not valid JSON ({}); the checkpoint is damaged", path, e.what()));
  }
  StoredManifest stored;
  try {
    if (typed<std::string>(j, "format", path) != kManifestFormat) {
      return corrupt(fmt::format("{}: not a tierzero checkpoint manifest (format '{}')", path, j["format"].dump()));
    }
    const int version = typed<int>(j, "format_version", path);
    if (version < kOldestManifestVersion || version > kManifestVersion) {
      return unsupported(fmt::format("{}: manifest format_version {} is not {}..{}; use a matching tierzero", path,
                                     j["format_version"].dump(), kOldestManifestVersion, kManifestVersion));
    }
    stored.manifest = manifest_from_json(j, path);
    for (const json& f : field(j, "files", path)) stored.files.push_back(rank_record_from_json(f, path));
    if (version < kEncodedStatesVersion && stored_version(stored) == kEncodedStatesVersion) {
      return corrupt(fmt::format("{}: format_version {} cannot hold encoded states or sections in pieces (version {} "
                                 "added them); the manifest is damaged",
                                 path, version, kEncodedStatesVersion));
    }
  } catch (const FieldError& e) {
    return corrupt(e.message);
  } catch (const UnsupportedCodec& e) {
    return unsupported(e.message);
  }
  Status valid = validate_manifest(stored.manifest);
  if (!valid.ok()) return corrupt(fmt::format("{}: {}", path, valid.message()));
  const CheckpointManifest& m = stored.manifest;
  if (stored.files.size() != m.world_size) {
    return corrupt(fmt::format("{}: manifest lists {} rank files but world size {}; the manifest is inconsistent", path,
                               stored.files.size(), m.world_size));
  }
  for (uint32_t r = 0; r < stored.files.size(); ++r) {
    if (stored.files[r].rank != r || stored.files[r].file != rank_file_name(r)) {
      return corrupt(fmt::format("{}: file entry {} is for rank {} ('{}'), expected {}", path, r, stored.files[r].rank,
                                 stored.files[r].file, rank_file_name(r)));
    }
    TZ_RETURN_IF_ERROR(check_sections(m, stored.files[r], path));
  }
  return stored;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot read {}: it does not exist or is not readable", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("error reading {}", path));
  return text.str();
}

}  // namespace tierzero::checkpoint
