// A DeepSpeed ZeRO checkpoint as an engine CheckpointReader: the layout zero_to_fp32 uses for the
// fp32 master (deepspeed_layout.h) read with each flat group swapped for its exp_avg / exp_avg_sq,
// and DeepSpeed's training scalars translated into the engine checkpoint's manifest fields.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/deepspeed/internal/deepspeed_files.h"
#include "checkpoint/deepspeed/internal/deepspeed_layout.h"

namespace tierzero::checkpoint {
namespace {

constexpr const char* kStates[] = {"fp32", "exp_avg", "exp_avg_sq"};

// Plain pickled data (None, bool, int, float, str, list, tuple, str-keyed dict) as JSON.
Result<nlohmann::json> to_json(const PyValue& v, const std::string& what, int depth = 0) {
  if (depth > 32) return corrupt(what + " nests deeper than 32 levels");
  switch (v.kind) {
    case PyKind::kNone: return nlohmann::json();
    case PyKind::kBool: return nlohmann::json(v.boolean);
    case PyKind::kInt: return nlohmann::json(v.integer);
    case PyKind::kFloat: return nlohmann::json(v.real);
    case PyKind::kString: return nlohmann::json(v.text);
    case PyKind::kList:
    case PyKind::kTuple: {
      nlohmann::json out = nlohmann::json::array();
      for (const PyValue* item : v.items) {
        TZ_ASSIGN_OR_RETURN(nlohmann::json j, to_json(*item, what, depth + 1));
        out.push_back(std::move(j));
      }
      return out;
    }
    case PyKind::kDict: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, item] : v.entries) {
        if (k->kind != PyKind::kString)
          return unsupported(what + " has key " + k->describe() + "; only names are carried");
        TZ_ASSIGN_OR_RETURN(out[k->text], to_json(*item, what + "['" + k->text + "']", depth + 1));
      }
      return out;
    }
    default: return unsupported(what + " holds " + v.describe() + ", which an engine checkpoint cannot carry");
  }
}

// The value of int key `key` in dict `d` (torch's optimizer state is keyed by parameter index).
const PyValue* int_key(const PyValue& d, int64_t key) {
  if (d.kind != PyKind::kDict) return nullptr;
  for (const auto& [k, v] : d.entries) {
    if (k->kind == PyKind::kInt && k->integer == key) return v;
  }
  return nullptr;
}

class DeepSpeedResumeReader final : public CheckpointReader {
 public:
  DeepSpeedResumeReader(DeepSpeedFiles files, DeepSpeedLayout layout, std::string path, std::string tag)
      : files_(std::move(files)), layout_(std::move(layout)), path_(std::move(path)), tag_(std::move(tag)) {}

  Status init(std::span<const TensorSpec> order, const std::string& dir);

  const CheckpointManifest& manifest() const override { return manifest_; }
  const std::string& tag() const override { return tag_; }
  const std::string& path() const override { return path_; }
  const nlohmann::json& rank_state(uint32_t) const override { return rank_state_; }

  Status read_partition(size_t group, size_t state, uint32_t world_size, uint32_t rank,
                        std::span<std::byte> out) override {
    TZ_RETURN_IF_ERROR(check_state(group, state));
    const FlatGroup& g = manifest_.groups[0];
    const uint64_t n = partition_numel(g, manifest_.zero_stage, world_size, manifest_.alignment);
    if (out.size() != n * sizeof(float)) {
      return invalid_argument(path_ + ": partition of rank " + std::to_string(rank) + " at world size " +
                              std::to_string(world_size) + " is " + std::to_string(n) + " fp32 elements, not " +
                              std::to_string(out.size()) + " bytes");
    }
    const std::span<float> all(reinterpret_cast<float*>(out.data()), n);
    std::fill(all.begin(), all.end(), 0.0f);
    for (const PartitionSegment& s :
         partition_segments(g, manifest_.zero_stage, world_size, manifest_.alignment, rank)) {
      TZ_RETURN_IF_ERROR(read_logical(state, s.logical_begin, all.subspan(s.partition_begin, s.length)));
    }
    return {};
  }

  Status read_flat_range(size_t group, size_t state, uint64_t begin, std::span<std::byte> out) override {
    TZ_RETURN_IF_ERROR(check_state(group, state));
    const uint64_t count = out.size() / sizeof(float);
    if (out.size() % sizeof(float) != 0 || begin > param_start_.back() || count > param_start_.back() - begin) {
      return invalid_argument(path_ + ": flat range [" + std::to_string(begin) + ", +" + std::to_string(count) +
                              ") leaves the " + std::to_string(param_start_.back()) + " trainable elements");
    }
    return read_logical(state, begin, {reinterpret_cast<float*>(out.data()), count});
  }

  Status finish_reads() override { return {}; }

  Status read_replicated(size_t index, uint64_t, std::span<std::byte>) override {
    return invalid_argument(path_ + ": replicated tensor " + std::to_string(index) +
                            " does not exist; a DeepSpeed resume reader holds only the trainable group");
  }

 private:
  const PyValue& optim_state(int rank) const { return *files_.optim[rank].root().get("optimizer_state_dict"); }
  Status check_state(size_t group, size_t state) const {
    if (group != 0 || state >= 3) {
      return invalid_argument(path_ + ": no group " + std::to_string(group) + " state " + std::to_string(state));
    }
    return {};
  }
  Status order_params(std::span<const TensorSpec> order);
  Status add_moments();
  Status read_scalars(const std::string& dir);
  Status read_logical(size_t state, uint64_t begin, std::span<float> out) const;

  DeepSpeedFiles files_;
  DeepSpeedLayout layout_;
  std::string path_, tag_;
  CheckpointManifest manifest_;
  nlohmann::json rank_state_;
  std::vector<size_t> spec_of_;         // group parameter i -> layout_.specs index
  std::vector<uint64_t> param_start_;   // logical offset of group parameter i; back() = total
  std::vector<uint32_t> moment_of_[2];  // layout_.sources index -> its exp_avg / exp_avg_sq source
  std::vector<double> flat_steps_;      // step of each flat's base optimizer state
};

Status DeepSpeedResumeReader::init(std::span<const TensorSpec> order, const std::string& dir) {
  manifest_.zero_stage = layout_.zero_stage;
  manifest_.world_size = static_cast<uint32_t>(layout_.world_size);
  manifest_.alignment = partitioning::kDeepSpeedAlignment;
  TZ_RETURN_IF_ERROR(order_params(order));
  TZ_RETURN_IF_ERROR(add_moments());
  TZ_RETURN_IF_ERROR(read_scalars(dir));
  return validate_manifest(manifest_).with_context(path_);
}

Status DeepSpeedResumeReader::order_params(std::span<const TensorSpec> order) {
  std::unordered_map<std::string, size_t> trainable;
  for (size_t i = layout_.first_trainable; i < layout_.specs.size(); ++i) trainable.emplace(layout_.specs[i].name, i);
  FlatGroup group;
  if (order.empty()) {
    for (size_t i = layout_.first_trainable; i < layout_.specs.size(); ++i) spec_of_.push_back(i);
  } else {
    for (const TensorSpec& want : order) {
      const auto it = trainable.find(want.name);
      if (it == trainable.end()) {
        return invalid_argument(path_ + " has no trainable parameter '" + want.name +
                                "' (missing, frozen or a buffer "
                                "there); resume with the model the DeepSpeed run trained, every parameter trainable");
      }
      if (layout_.specs[it->second].shape != want.shape) {
        return invalid_argument(path_ + ": parameter '" + want.name + "' has another shape there than in this model");
      }
      spec_of_.push_back(it->second);
      trainable.erase(it);
    }
    if (!trainable.empty()) {
      return invalid_argument(path_ + " trains parameter '" + trainable.begin()->first +
                              "', which this model does not have; resume with the model the DeepSpeed run trained");
    }
  }
  param_start_.push_back(0);
  for (size_t i : spec_of_) {
    group.params.push_back(layout_.specs[i]);
    param_start_.push_back(param_start_.back() + static_cast<uint64_t>(layout_.numels[i]));
  }
  for (const char* s : kStates) group.states.push_back({s, ElementType::kF32});
  manifest_.groups.push_back(std::move(group));
  return {};
}

// Every flat's exp_avg / exp_avg_sq: entry `group` of the base optimizer's state (stage 3:
// optimizer_state_dict, stage 1/2: base_optimizer_state), as large as the flat itself.
Status DeepSpeedResumeReader::add_moments() {
  for (auto& m : moment_of_) m.assign(layout_.sources.size(), 0);
  const char* base_key = layout_.zero_stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
  for (const DeepSpeedFlat& flat : layout_.flats) {
    const TorchFile& f = files_.optim[flat.rank];
    const PyValue* base = optim_state(flat.rank).get(base_key);
    const PyValue* states = base != nullptr ? base->get("state") : nullptr;
    if (states == nullptr || states->kind != PyKind::kDict) {
      return corrupt(f.path() + ": optimizer_state_dict['" + base_key + "'] is " +
                     (base != nullptr ? base->describe() : std::string("missing")) +
                     ", expected a torch optimizer state_dict with 'state' (an elastic checkpoint is not supported)");
    }
    const PyValue* entry = int_key(*states, flat.group);
    const std::string where = std::string(base_key) + "['state'][" + std::to_string(flat.group) + "]";
    if (entry == nullptr || entry->kind != PyKind::kDict) {
      return corrupt(f.path() + ": no " + where + ": the optimizer holds no state for group " +
                     std::to_string(flat.group) + " (did the run take an optimizer step?)");
    }
    const uint64_t master_numel = layout_.sources[flat.source].numel;  // sources grows below
    for (int m = 0; m < 2; ++m) {
      const PyValue* v = entry->get(kStates[m + 1]);
      if (v == nullptr) return corrupt(f.path() + ": " + where + " has no '" + kStates[m + 1] + "'");
      TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*v, where + "['" + kStates[m + 1] + "']"));
      if (t.numel != master_numel) {
        return corrupt(f.path() + ": " + where + "['" + kStates[m + 1] + "'] has " + std::to_string(t.numel) +
                       " elements but its fp32 group has " + std::to_string(master_numel));
      }
      layout_.sources.push_back(std::move(t));
      moment_of_[m][flat.source] = static_cast<uint32_t>(layout_.sources.size() - 1);
    }
    const PyValue* step = entry->get("step");
    if (step == nullptr) return corrupt(f.path() + ": " + where + " has no 'step'");
    float value = 0;
    if (step->kind == PyKind::kInt) {
      value = static_cast<float>(step->integer);
    } else {
      TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*step, where + "['step']"));
      if (t.numel != 1)
        return corrupt(f.path() + ": " + where + "['step'] has " + std::to_string(t.numel) + " elements");
      TZ_RETURN_IF_ERROR(f.read_fp32(t, 0, {&value, 1}));
    }
    if (!(value >= 0) || value != std::floor(value)) {
      return corrupt(f.path() + ": " + where + "['step'] is " + std::to_string(value) + ", not a step count");
    }
    if (!flat_steps_.empty() && value != flat_steps_.front()) {
      return corrupt(f.path() + ": " + where + "['step'] is " + std::to_string(value) + " but " +
                     files_.optim[layout_.flats.front().rank].path() + " says " + std::to_string(flat_steps_.front()) +
                     "; the files come from different steps");
    }
    flat_steps_.push_back(value);
  }
  manifest_.step = flat_steps_.empty() ? 0 : static_cast<int64_t>(flat_steps_.front());
  return {};
}

Status DeepSpeedResumeReader::read_scalars(const std::string& dir) {
  const TorchFile& f = files_.optim[0];
  const PyValue* scaler = optim_state(0).get("loss_scaler");
  if (scaler != nullptr && scaler->kind == PyKind::kObject) {
    auto number = [&](const char* name, double fallback) -> Result<double> {
      const PyValue* v = scaler->attribute(name);
      if (v == nullptr) return fallback;
      if (v->kind == PyKind::kInt) return static_cast<double>(v->integer);
      if (v->kind == PyKind::kFloat) return v->real;
      return corrupt(f.path() + ": loss_scaler." + name + " is " + v->describe() + ", expected a number");
    };
    const PyValue* dynamic = scaler->attribute("dynamic");
    const bool is_dynamic = dynamic != nullptr && dynamic->kind == PyKind::kBool && dynamic->boolean;
    TZ_ASSIGN_OR_RETURN(double cur_scale, number("cur_scale", 1.0));
    TZ_ASSIGN_OR_RETURN(double cur_iter, number("cur_iter", 0));
    TZ_ASSIGN_OR_RETURN(double last_overflow, number("last_overflow_iter", -1));
    TZ_ASSIGN_OR_RETURN(double hysteresis, number("cur_hysteresis", 1));
    manifest_.loss_scaler = {{"cur_scale", cur_scale},
                             {"cur_iter", static_cast<int64_t>(cur_iter)},
                             {"last_overflow_iter", static_cast<int64_t>(last_overflow)},
                             {"cur_hysteresis", static_cast<int64_t>(hysteresis)},
                             {"dynamic", is_dynamic}};
  } else if (scaler != nullptr && scaler->kind != PyKind::kNone) {
    return corrupt(f.path() + ": loss_scaler is " + scaler->describe() + ", expected a DeepSpeed loss scaler object");
  }
  const TorchFile& m = files_.model[0];
  if (const PyValue* lr = m.root().get("lr_scheduler"); lr != nullptr) {
    TZ_ASSIGN_OR_RETURN(manifest_.lr_scheduler, to_json(*lr, m.path() + ": lr_scheduler"));
  }
  const PyValue* steps = m.root().get("global_steps");
  if (steps == nullptr || steps->kind != PyKind::kInt || steps->integer < 0) {
    return corrupt(m.path() + ": global_steps is " + (steps ? steps->describe() : std::string("missing")) +
                   ", expected a step count");
  }
  rank_state_ = {{"iteration", steps->integer}};
  manifest_.model_config_json = read_model_config(dir, path_);
  return {};
}

Status DeepSpeedResumeReader::read_logical(size_t state, uint64_t begin, std::span<float> out) const {
  size_t i =
      static_cast<size_t>(std::upper_bound(param_start_.begin(), param_start_.end(), begin) - param_start_.begin()) - 1;
  uint64_t pos = begin;
  for (size_t done = 0; done < out.size(); ++i) {
    const size_t spec = spec_of_[i];
    const uint64_t first = pos - param_start_[i];
    const uint64_t take = std::min<uint64_t>(out.size() - done, param_start_[i + 1] - pos);
    for (const DeepSpeedPiece& p : layout_.pieces[spec]) {
      const uint64_t lo = std::max(first, p.dst_first), hi = std::min(first + take, p.dst_first + p.count);
      if (lo >= hi) continue;
      const uint32_t source = state == 0 ? p.source : moment_of_[state - 1][p.source];
      const Status s = files_.at(p.file).read_fp32(layout_.sources[source], p.src_first + (lo - p.dst_first),
                                                   out.subspan(done + (lo - first), hi - lo));
      if (!s.ok()) {
        return s.with_context("reading " + std::string(kStates[state]) + " of '" + layout_.specs[spec].name +
                              "' from rank " + std::to_string(p.rank));
      }
    }
    done += take;
    pos += take;
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<CheckpointReader>> open_deepspeed_resume_reader(const std::string& dir, const std::string& tag,
                                                                       std::span<const TensorSpec> order) {
  std::string chosen = tag;
  if (chosen.empty()) {
    TZ_ASSIGN_OR_RETURN(chosen, read_latest_tag(dir));
  }
  const std::string tag_dir = dir + "/" + chosen;
  TZ_ASSIGN_OR_RETURN(DeepSpeedFiles files, open_deepspeed_files(tag_dir));
  TZ_ASSIGN_OR_RETURN(DeepSpeedLayout layout, plan_deepspeed_layout(files));
  auto reader = std::make_unique<DeepSpeedResumeReader>(std::move(files), std::move(layout), tag_dir, chosen);
  TZ_RETURN_IF_ERROR(reader->init(order, dir));
  return std::unique_ptr<CheckpointReader>(std::move(reader));
}

}  // namespace tierzero::checkpoint
