#include "checkpoint/deepspeed/internal/deepspeed_layout.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

bool holds_rank(const TorchFile& f, int rank) {
  return base_name(f.path()).find("zero_pp_rank_" + std::to_string(rank) + "_") != std::string::npos;
}

// An int, or a one-int call such as deepspeed.runtime.zero.config.ZeroStageEnum(3).
Result<int64_t> as_int(const PyValue& v, const std::string& what) {
  if (v.kind == PyKind::kInt) return v.integer;
  if (v.kind == PyKind::kObject && v.args != nullptr && v.args->items.size() == 1 &&
      v.args->items[0]->kind == PyKind::kInt) {
    return v.args->items[0]->integer;
  }
  return corrupt(what + " is " + v.describe() + ", expected an int");
}

class Planner {
 public:
  explicit Planner(const DeepSpeedFiles& files) : files_(files) {}

  Status read_header();
  Status add_buffers();
  Status add_frozen();
  Status add_frozen_from_module();
  Status add_trainable_stage3();
  Status add_trainable_stage12();
  Status add_aliases();
  int zero_stage() const { return out_.zero_stage; }
  void mark_trainable_start() { out_.first_trainable = out_.specs.size(); }
  DeepSpeedLayout take() { return std::move(out_); }

 private:
  const PyValue& model_root(size_t i) const { return files_.model[i].root(); }
  const PyValue& optim_state(int rank) const { return *files_.optim[rank].root().get("optimizer_state_dict"); }
  uint32_t optim_file(int rank) const { return static_cast<uint32_t>(files_.model.size() + rank); }
  Result<const PyValue*> require(const TorchFile& f, const PyValue& dict, std::string_view key, PyKind kind) const;
  Result<std::vector<TorchTensor>> rank_groups(int rank, std::string_view key) const;
  Status add_spec(const std::string& name, std::vector<int64_t> shape, const std::string& where);
  uint32_t add_source(const TorchTensor& t);
  void add_piece(uint32_t file, uint32_t source, int rank, uint64_t src, uint64_t dst, uint64_t count);
  Result<std::vector<std::pair<std::string, std::vector<int64_t>>>> shapes_of(const TorchFile& f, const PyValue& dict,
                                                                              const std::string& what) const;

  const DeepSpeedFiles& files_;
  DeepSpeedLayout out_;
  std::unordered_set<std::string> names_;
};

Result<const PyValue*> Planner::require(const TorchFile& f, const PyValue& dict, std::string_view key,
                                        PyKind kind) const {
  const PyValue* v = dict.get(key);
  if (v == nullptr) {
    return corrupt(f.path() + ": no '" + std::string(key) +
                   "' entry: not a DeepSpeed ZeRO checkpoint file, or damaged");
  }
  if (v->kind != kind) {
    return corrupt(f.path() + ": '" + std::string(key) + "' is " + v->describe() + ", not the expected container");
  }
  return v;
}

Result<std::vector<std::pair<std::string, std::vector<int64_t>>>> Planner::shapes_of(const TorchFile& f,
                                                                                     const PyValue& dict,
                                                                                     const std::string& what) const {
  if (dict.kind != PyKind::kDict) return corrupt(f.path() + ": " + what + " is " + dict.describe() + ", not a dict");
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const auto& [k, v] : dict.entries) {
    if (k->kind != PyKind::kString) return corrupt(f.path() + ": " + what + " has key " + k->describe());
    TZ_ASSIGN_OR_RETURN(auto shape, torch_shape(*v, f.path() + ": " + what + "['" + k->text + "']"));
    shapes.emplace_back(k->text, std::move(shape));
  }
  return shapes;
}

Status Planner::add_spec(const std::string& name, std::vector<int64_t> shape, const std::string& where) {
  if (!names_.insert(name).second) {
    return corrupt(where + ": tensor name '" + name +
                   "' appears twice (buffers, frozen and trainable "
                   "parameters must have distinct names)");
  }
  TZ_ASSIGN_OR_RETURN(int64_t numel, shape_numel(shape, where + ": '" + name + "'"));
  out_.specs.push_back({name, std::move(shape)});
  out_.numels.push_back(numel);
  out_.pieces.emplace_back();
  return {};
}

uint32_t Planner::add_source(const TorchTensor& t) {
  out_.sources.push_back(t);
  return static_cast<uint32_t>(out_.sources.size() - 1);
}

void Planner::add_piece(uint32_t file, uint32_t source, int rank, uint64_t src, uint64_t dst, uint64_t count) {
  if (count > 0) out_.pieces.back().push_back({file, source, rank, src, dst, count});
}

Result<std::vector<TorchTensor>> Planner::rank_groups(int rank, std::string_view key) const {
  const TorchFile& f = files_.optim[rank];
  TZ_ASSIGN_OR_RETURN(const PyValue* list, require(f, optim_state(rank), key, PyKind::kList));
  std::vector<TorchTensor> groups;
  for (size_t g = 0; g < list->items.size(); ++g) {
    TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*list->items[g], std::string(key) + "[" + std::to_string(g) + "]"));
    groups.push_back(std::move(t));
  }
  return groups;
}

Status Planner::read_header() {
  const TorchFile& f0 = files_.optim[0];
  for (const TorchFile& f : files_.optim) {
    const PyValue* osd = f.root().get("optimizer_state_dict");
    if (osd == nullptr || osd->kind != PyKind::kDict) {
      return corrupt(f.path() + ": no 'optimizer_state_dict' dict: not a DeepSpeed ZeRO optimizer states file");
    }
  }
  const PyValue* stage = optim_state(0).get("zero_stage");
  if (stage == nullptr) return corrupt(f0.path() + ": no 'zero_stage' in optimizer_state_dict: not a ZeRO checkpoint");
  TZ_ASSIGN_OR_RETURN(int64_t zero_stage, as_int(*stage, f0.path() + ": zero_stage"));
  if (zero_stage < 1 || zero_stage > 3) {
    return corrupt(f0.path() + ": unknown zero_stage " + std::to_string(zero_stage) + " (expected 1, 2 or 3)");
  }
  out_.zero_stage = static_cast<int>(zero_stage);

  // partition_count: an int, or (stage 1/2) one per param group of which the largest is the world.
  int64_t world = -1;
  for (size_t r = 0; r < files_.optim.size(); ++r) {
    const TorchFile& f = files_.optim[r];
    const PyValue* count = optim_state(static_cast<int>(r)).get("partition_count");
    if (count == nullptr) return corrupt(f.path() + ": no 'partition_count' in optimizer_state_dict");
    int64_t w = 0;
    if (count->kind == PyKind::kList || count->kind == PyKind::kTuple) {
      for (const PyValue* c : count->items) {
        TZ_ASSIGN_OR_RETURN(int64_t one, as_int(*c, f.path() + ": partition_count item"));
        w = std::max(w, one);
      }
    } else {
      TZ_ASSIGN_OR_RETURN(w, as_int(*count, f.path() + ": partition_count"));
    }
    if (w < 1 || w > (1 << 24))
      return corrupt(f.path() + ": partition_count " + std::to_string(w) + " is not a world size");
    if (r == 0) world = w;
    if (w != world) {
      return corrupt("world size mismatch: " + f.path() + " says partition_count " + std::to_string(w) + " but " +
                     f0.path() + " says " + std::to_string(world) + "; the files come from different runs");
    }
  }
  out_.world_size = static_cast<int>(world);
  const std::string dir = f0.path().substr(0, f0.path().find_last_of('/'));
  const auto check_ranks = [&](const std::vector<TorchFile>& list, const char* kind) -> Status {
    for (int r = 0; r < world; ++r) {
      const bool present = std::any_of(list.begin(), list.end(), [&](const TorchFile& f) { return holds_rank(f, r); });
      if (!present) {
        return corrupt("missing rank file: " + dir + " has no " + kind + " file for rank " + std::to_string(r) +
                       " of " + std::to_string(world) + " (expected *zero_pp_rank_" + std::to_string(r) +
                       "_mp_rank_00_" + kind + ".pt); copy the complete checkpoint");
      }
    }
    if (list.size() != static_cast<size_t>(world)) {
      return corrupt("world size mismatch: partition_count says " + std::to_string(world) + " ranks but " + dir +
                     " holds " + std::to_string(list.size()) + " *_" + kind +
                     ".pt files; remove stale files from another run");
    }
    for (int r = 0; r < world; ++r) {
      if (!holds_rank(list[r], r)) {
        return corrupt("rank file order: " + list[r].path() + " sorts as rank " + std::to_string(r) +
                       " but is not named zero_pp_rank_" + std::to_string(r) + "_...");
      }
    }
    return {};
  };
  TZ_RETURN_IF_ERROR(check_ranks(files_.optim, "optim_states"));
  if (out_.zero_stage == 3) TZ_RETURN_IF_ERROR(check_ranks(files_.model, "model_states"));
  const PyValue& m0 = model_root(0);
  if (m0.get("buffer_names") == nullptr) {
    return corrupt(files_.model[0].path() + " is not a model state checkpoint (no 'buffer_names')");
  }
  return {};
}

Status Planner::add_buffers() {
  const TorchFile& f = files_.model[0];
  TZ_ASSIGN_OR_RETURN(const PyValue* names, require(f, model_root(0), "buffer_names", PyKind::kList));
  TZ_ASSIGN_OR_RETURN(const PyValue* module, require(f, model_root(0), "module", PyKind::kDict));
  std::unordered_set<std::string> buffers;
  for (const PyValue* n : names->items) {
    if (n->kind != PyKind::kString) return corrupt(f.path() + ": buffer_names holds " + n->describe());
    buffers.insert(n->text);
  }
  for (const auto& [k, v] : module->entries) {
    if (k->kind != PyKind::kString || !buffers.contains(k->text)) continue;
    TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*v, "module['" + k->text + "']"));
    TZ_RETURN_IF_ERROR(add_spec(k->text, t.shape, f.path()));
    add_piece(0, add_source(t), -1, 0, 0, t.numel);
  }
  return {};
}

// Stage 1/2 files of DeepSpeed 0.19 record no frozen_param_shapes at stage 1 (zero_to_fp32 then
// drops the frozen parameters); their `module` still holds every parameter whole, so a tensor there
// that is neither a buffer, a trainable parameter nor a tie is a frozen parameter, taken as stored.
Status Planner::add_frozen_from_module() {
  const TorchFile& f = files_.model[0];
  TZ_ASSIGN_OR_RETURN(const PyValue* module, require(f, model_root(0), "module", PyKind::kDict));
  std::unordered_set<std::string_view> known;
  if (const PyValue* groups = model_root(0).get("param_shapes"); groups != nullptr && groups->kind == PyKind::kList) {
    for (const PyValue* g : groups->items) {
      for (const auto& [k, v] : g->entries) {
        if (k->kind == PyKind::kString) known.insert(k->text);
      }
    }
  }
  if (const PyValue* shared = model_root(0).get("shared_params"); shared != nullptr && shared->kind == PyKind::kDict) {
    for (const auto& [k, v] : shared->entries) {
      if (k->kind == PyKind::kString) known.insert(k->text);
    }
  }
  for (const auto& [k, v] : module->entries) {
    if (k->kind != PyKind::kString || known.contains(k->text) || names_.contains(k->text)) continue;
    TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*v, "module['" + k->text + "']"));
    TZ_RETURN_IF_ERROR(add_spec(k->text, t.shape, f.path()));
    add_piece(0, add_source(t), -1, 0, 0, t.numel);
  }
  return {};
}

Status Planner::add_frozen() {
  const TorchFile& f0 = files_.model[0];
  const PyValue* shapes_value = model_root(0).get("frozen_param_shapes");
  if (shapes_value == nullptr || shapes_value->kind == PyKind::kNone) {
    return out_.zero_stage == 3 ? Status{} : add_frozen_from_module();
  }
  TZ_ASSIGN_OR_RETURN(auto shapes, shapes_of(f0, *shapes_value, "frozen_param_shapes"));
  if (shapes.empty()) return {};
  const size_t ranks = out_.zero_stage == 3 ? static_cast<size_t>(out_.world_size) : 1;
  std::vector<std::unordered_map<std::string_view, const PyValue*>> fragments(ranks);  // per rank: name -> tensor
  for (size_t r = 0; r < ranks; ++r) {
    const TorchFile& f = files_.model[r];
    TZ_ASSIGN_OR_RETURN(const PyValue* frags, require(f, f.root(), "frozen_param_fragments", PyKind::kDict));
    for (const auto& [k, v] : frags->entries) {
      if (k->kind == PyKind::kString) fragments[r].emplace(k->text, v);
    }
  }
  for (auto& [name, shape] : shapes) {
    TZ_RETURN_IF_ERROR(add_spec(name, shape, f0.path()));
    const auto numel = static_cast<uint64_t>(out_.numels.back());
    uint64_t filled = 0;
    for (size_t r = 0; r < ranks && filled < numel; ++r) {
      const TorchFile& f = files_.model[r];
      const auto frag = fragments[r].find(name);
      if (frag == fragments[r].end()) {
        return corrupt(f.path() + ": frozen parameter '" + name + "' has no frozen_param_fragments entry");
      }
      TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*frag->second, "frozen_param_fragments['" + name + "']"));
      if (ranks == 1 && t.numel != numel) {
        return corrupt(f.path() + ": frozen parameter '" + name + "' has " + std::to_string(t.numel) +
                       " elements but frozen_param_shapes says " + std::to_string(numel));
      }
      const uint64_t take = std::min(t.numel, numel - filled);
      add_piece(static_cast<uint32_t>(r), add_source(t), ranks == 1 ? -1 : static_cast<int>(r), 0, filled, take);
      filled += take;
    }
    if (filled < numel) {
      return corrupt(f0.path() + ": frozen parameter '" + name + "' needs " + std::to_string(numel) +
                     " elements but the ranks' fragments hold only " + std::to_string(filled) +
                     " (shapes inconsistent with partition sizes)");
    }
  }
  return {};
}

Status Planner::add_trainable_stage3() {
  const TorchFile& m0 = files_.model[0];
  const int world = out_.world_size;
  TZ_ASSIGN_OR_RETURN(const PyValue* groups_value, require(m0, model_root(0), "param_shapes", PyKind::kList));
  std::vector<std::pair<std::string, std::vector<int64_t>>> params;
  for (size_t g = 0; g < groups_value->items.size(); ++g) {
    TZ_ASSIGN_OR_RETURN(auto shapes, shapes_of(m0, *groups_value->items[g], "param_shapes[" + std::to_string(g) + "]"));
    for (auto& s : shapes) params.push_back(std::move(s));
  }
  // Every rank's flat space: its groups concatenated; rank 0 fixes the group sizes.
  std::vector<std::vector<uint32_t>> sources(world);
  std::vector<uint64_t> group_start{0};
  for (int r = 0; r < world; ++r) {
    TZ_ASSIGN_OR_RETURN(auto groups, rank_groups(r, "fp32_flat_groups"));
    if (r > 0 && groups.size() != sources[0].size()) {
      return corrupt(files_.optim[r].path() + ": " + std::to_string(groups.size()) +
                     " fp32_flat_groups but rank 0 has " + std::to_string(sources[0].size()));
    }
    for (size_t g = 0; g < groups.size(); ++g) {
      if (r == 0) {
        group_start.push_back(group_start.back() + groups[g].numel);
      } else if (groups[g].numel != group_start[g + 1] - group_start[g]) {
        return corrupt(files_.optim[r].path() + ": rank " + std::to_string(r) + " fp32_flat_groups[" +
                       std::to_string(g) + "] has " + std::to_string(groups[g].numel) + " elements but rank 0's has " +
                       std::to_string(group_start[g + 1] - group_start[g]) +
                       " (shapes inconsistent with partition sizes)");
      }
      sources[r].push_back(add_source(groups[g]));
      out_.flats.push_back({r, static_cast<uint32_t>(g), sources[r].back()});
    }
  }
  // Each parameter takes ceil(n / W) of every rank's flat space, in param_shapes order.
  const uint64_t per_rank_total = group_start.back();
  uint64_t needed = 0;
  for (const auto& [name, shape] : params) {
    TZ_ASSIGN_OR_RETURN(int64_t n, shape_numel(shape, m0.path() + ": param_shapes['" + name + "']"));
    needed += partitioning::stage3_piece_numel(static_cast<uint64_t>(n), static_cast<uint32_t>(world));
    if (needed > per_rank_total) break;
  }
  if (needed != per_rank_total) {
    return corrupt(m0.path() + ": param_shapes need " + (needed > per_rank_total ? "at least " : "") +
                   std::to_string(needed) + " elements per rank at world size " + std::to_string(world) +
                   " but each rank's fp32_flat_groups hold " + std::to_string(per_rank_total) +
                   " (shapes inconsistent with partition sizes: wrong world size or damaged param_shapes)");
  }
  uint64_t offset = 0;
  for (auto& [name, shape] : params) {
    TZ_RETURN_IF_ERROR(add_spec(name, shape, m0.path()));
    const auto n = static_cast<uint64_t>(out_.numels.back());
    const uint64_t part = partitioning::stage3_piece_numel(n, static_cast<uint32_t>(world));
    for (int r = 0; r < world && static_cast<uint64_t>(r) * part < n; ++r) {
      // Rank r's slice [offset, offset + count) of its flat space, cut at group boundaries.
      const partitioning::Range held = partitioning::rank_range(n, part, static_cast<uint32_t>(r));
      uint64_t pos = offset, dst = held.begin, left = held.size();
      size_t g =
          static_cast<size_t>(std::upper_bound(group_start.begin(), group_start.end(), pos) - group_start.begin()) - 1;
      while (left > 0) {
        const uint64_t take = std::min(left, group_start[g + 1] - pos);
        add_piece(optim_file(r), sources[r][g], r, pos - group_start[g], dst, take);
        pos += take;
        dst += take;
        left -= take;
        ++g;
      }
    }
    offset += part;
  }
  return {};
}

Status Planner::add_trainable_stage12() {
  const TorchFile& m0 = files_.model[0];
  const int world = out_.world_size;
  TZ_ASSIGN_OR_RETURN(const PyValue* groups_value, require(m0, model_root(0), "param_shapes", PyKind::kList));
  const size_t group_count = groups_value->items.size();
  // sources[g][r]: rank r's partition of group g; start[g][r]: its offset in the group.
  std::vector<std::vector<uint32_t>> sources(group_count);
  std::vector<std::vector<uint64_t>> start(group_count, std::vector<uint64_t>{0});
  for (int r = 0; r < world; ++r) {
    TZ_ASSIGN_OR_RETURN(auto groups, rank_groups(r, "single_partition_of_fp32_groups"));
    if (groups.size() != group_count) {
      return corrupt(files_.optim[r].path() + ": " + std::to_string(groups.size()) +
                     " single_partition_of_fp32_groups but param_shapes has " + std::to_string(group_count) +
                     " groups");
    }
    for (size_t g = 0; g < group_count; ++g) {
      sources[g].push_back(add_source(groups[g]));
      out_.flats.push_back({r, static_cast<uint32_t>(g), sources[g].back()});
      start[g].push_back(start[g].back() + groups[g].numel);
    }
  }
  const PyValue* paddings = optim_state(0).get("param_alignment_paddings");
  if (paddings != nullptr && paddings->kind == PyKind::kNone) paddings = nullptr;
  if (paddings != nullptr && (paddings->kind != PyKind::kList || paddings->items.size() != group_count)) {
    return corrupt(files_.optim[0].path() + ": param_alignment_paddings is " + paddings->describe() +
                   ", expected a list of " + std::to_string(group_count) + " lists");
  }
  const auto align_up = [world](uint64_t x) {
    return partitioning::padded_flat_numel(x, static_cast<uint32_t>(world), partitioning::kDeepSpeedAlignment);
  };
  for (size_t g = 0; g < group_count; ++g) {
    const std::string what = "param_shapes[" + std::to_string(g) + "]";
    TZ_ASSIGN_OR_RETURN(auto shapes, shapes_of(m0, *groups_value->items[g], what));
    const PyValue* group_pads = paddings != nullptr ? paddings->items[g] : nullptr;
    if (group_pads != nullptr && (group_pads->kind != PyKind::kList || group_pads->items.size() != shapes.size())) {
      return corrupt(files_.optim[0].path() + ": param_alignment_paddings[" + std::to_string(g) + "] is " +
                     group_pads->describe() + ", expected " + std::to_string(shapes.size()) + " paddings");
    }
    const uint64_t avail = start[g].back();
    uint64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const std::string& name = shapes[i].first;
      TZ_RETURN_IF_ERROR(add_spec(name, shapes[i].second, m0.path()));
      const auto n = static_cast<uint64_t>(out_.numels.back());
      if (offset > avail || n > avail - offset) {
        return corrupt(m0.path() + ": " + what + " parameter '" + name + "' needs elements [" + std::to_string(offset) +
                       ", +" + std::to_string(n) + ") but the " + std::to_string(world) +
                       " ranks' partitions of group " + std::to_string(g) + " hold " + std::to_string(avail) +
                       " (shapes inconsistent with partition sizes)");
      }
      // Group elements [offset, offset + n) cross rank partitions in order.
      uint64_t pos = offset, dst = 0;
      size_t r = static_cast<size_t>(std::upper_bound(start[g].begin(), start[g].end(), pos) - start[g].begin()) - 1;
      while (dst < n) {
        const uint64_t take = std::min(n - dst, start[g][r + 1] - pos);
        add_piece(optim_file(static_cast<int>(r)), sources[g][r], static_cast<int>(r), pos - start[g][r], dst, take);
        pos += take;
        dst += take;
        ++r;
      }
      offset += n;
      if (group_pads != nullptr) {
        TZ_ASSIGN_OR_RETURN(int64_t pad,
                            as_int(*group_pads->items[i], files_.optim[0].path() + ": param_alignment_paddings item"));
        if (pad < 0 || static_cast<uint64_t>(pad) > avail)
          return corrupt(files_.optim[0].path() + ": bad param_alignment_paddings " + std::to_string(pad));
        offset += static_cast<uint64_t>(pad);
      }
    }
    if (align_up(offset) != align_up(avail)) {
      return corrupt(m0.path() + ": " + what + " consumes " + std::to_string(offset) +
                     " elements but the ranks' partitions "
                     "of group " +
                     std::to_string(g) + " hold " + std::to_string(avail) + " (aligned to " +
                     std::to_string(partitioning::kDeepSpeedAlignment * world) +
                     ": shapes inconsistent with partition sizes)");
    }
  }
  return {};
}

Status Planner::add_aliases() {
  const TorchFile& f = files_.model[0];
  const PyValue* shared = model_root(0).get("shared_params");
  if (shared == nullptr || shared->kind == PyKind::kNone) return {};
  if (shared->kind != PyKind::kDict)
    return corrupt(f.path() + ": shared_params is " + shared->describe() + ", not a dict");
  std::unordered_map<std::string, size_t> alias_at;
  for (const auto& [k, v] : shared->entries) {
    if (k->kind != PyKind::kString || v->kind != PyKind::kString) {
      return corrupt(f.path() + ": shared_params maps " + k->describe() + " to " + v->describe() + ", expected names");
    }
    std::string target = v->text;
    if (const auto it = alias_at.find(target); it != alias_at.end()) target = out_.aliases[it->second].second;
    if (!names_.contains(target)) continue;  // zero_to_fp32 drops aliases of absent tensors
    if (names_.contains(k->text)) {
      return corrupt(f.path() + ": shared_params alias '" + k->text + "' is also a stored tensor name");
    }
    if (const auto it = alias_at.find(k->text); it != alias_at.end()) {
      out_.aliases[it->second].second = target;
    } else {
      alias_at[k->text] = out_.aliases.size();
      out_.aliases.emplace_back(k->text, target);
    }
  }
  return {};
}

}  // namespace

Result<DeepSpeedLayout> plan_deepspeed_layout(const DeepSpeedFiles& files) {
  if (files.model.empty() || files.optim.empty()) {
    return internal_error("plan_deepspeed_layout needs at least one model and one optimizer states file");
  }
  Planner planner(files);
  TZ_RETURN_IF_ERROR(planner.read_header());
  TZ_RETURN_IF_ERROR(planner.add_buffers());
  TZ_RETURN_IF_ERROR(planner.add_frozen());
  planner.mark_trainable_start();
  TZ_RETURN_IF_ERROR(planner.zero_stage() == 3 ? planner.add_trainable_stage3() : planner.add_trainable_stage12());
  TZ_RETURN_IF_ERROR(planner.add_aliases());
  return planner.take();
}

}  // namespace tierzero::checkpoint
