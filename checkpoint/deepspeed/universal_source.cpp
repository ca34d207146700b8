// DeepSpeed universal checkpoints (the output of DeepSpeed's ds_to_universal.py) as a
// ConsolidationSource. Layout, as DeepSpeed 0.19 writes it:
//   DIR/latest_universal        the step folder's name, TAG
//   DIR/TAG/zero/NAME/fp32.pt   {'param': the whole fp32 tensor NAME, 'cat_dim': int, ...}, or
//                               (stage 3 conversions) that tensor alone, flattened;
//                               exp_avg.pt, exp_avg_sq.pt (and step.pt) beside it hold Adam's state
//   DIR/TAG/*_model_states.pt   copied from the source checkpoint: buffer_names, frozen_param_shapes,
//                               param_shapes (the model's order and shapes), shared_params (ties)
// Stage 1/2 conversions list frozen parameters and buffers (as fp32) under zero/ too; stage 3 ones
// list trainable parameters only. Tensors come out in zero_to_fp32's order — buffers, frozen,
// trainable as the model states file names them — then any other folder, natural-sorted.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/deepspeed/internal/deepspeed_files.h"
#include "checkpoint/torch_format/torch_file.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

// One zero/NAME/fp32.pt: where its tensor lies (the entry index is stable across re-opens).
struct UniversalTensor {
  std::string path;
  TorchTensor tensor;
};

class UniversalSource final : public ConsolidationSource {
 public:
  UniversalSource(std::vector<TensorSpec> specs, std::vector<UniversalTensor> files,
                  std::vector<std::pair<std::string, std::string>> aliases, std::string config_json)
      : specs_(std::move(specs)),
        files_(std::move(files)),
        aliases_(std::move(aliases)),
        config_json_(std::move(config_json)) {}

  const std::vector<TensorSpec>& tensors() const override { return specs_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return aliases_; }
  std::string model_config_json() const override { return config_json_; }

  ElementType dtype(size_t index) const override {
    const ElementType stored = files_[index].tensor.dtype;
    return is_integer_type(stored) ? stored : ElementType::kF32;
  }

  Status read_raw(size_t index, std::span<std::byte> out) override {
    if (index >= files_.size() || !is_integer_type(files_[index].tensor.dtype)) {
      return invalid_argument("tensor " + std::to_string(index) +
                              " of the universal checkpoint is not an integer tensor");
    }
    TZ_ASSIGN_OR_RETURN(const TorchFile* f, file(index));
    return f->read_bytes(files_[index].tensor, out).with_context("reading tensor '" + specs_[index].name + "'");
  }

 private:
  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    TZ_ASSIGN_OR_RETURN(const TorchFile* f, file(index));
    return f->read_fp32(files_[index].tensor, first, out).with_context("reading tensor '" + specs_[index].name + "'");
  }

  // The open fp32.pt of tensor `index`: one file open at a time, whatever the model's size.
  Result<const TorchFile*> file(size_t index) {
    if (!open_ || open_index_ != index) {
      open_.reset();
      TZ_ASSIGN_OR_RETURN(TorchFile f, TorchFile::open(files_[index].path));
      open_.emplace(std::move(f));
      open_index_ = index;
    }
    return &*open_;
  }

  std::vector<TensorSpec> specs_;
  std::vector<UniversalTensor> files_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  std::string config_json_;
  std::optional<TorchFile> open_;
  size_t open_index_ = 0;
};

std::string read_text_if_present(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The step folder: DIR/TAG for DIR/latest_universal naming TAG (or `tag`), or DIR itself when it
// holds zero/.
Result<std::string> step_folder(const std::string& dir, const std::string& tag) {
  std::error_code ec;
  if (tag.empty() && fs::is_directory(dir + "/zero", ec)) return dir;
  std::string chosen = tag;
  if (chosen.empty()) {
    TZ_ASSIGN_OR_RETURN(chosen, read_latest_tag(dir, "latest_universal"));
  }
  const std::string step = dir + "/" + chosen;
  if (!fs::is_directory(step + "/zero", ec)) {
    return not_found("universal checkpoint folder " + step +
                     "/zero does not exist (check the tag / DIR/latest_universal)");
  }
  return step;
}

// The names a model states file lists, in zero_to_fp32's order, with the shapes it gives them;
// and its shared_params. Absent or unreadable parts leave the lists empty: the folder names rule.
struct ModelOrder {
  std::vector<std::pair<std::string, std::optional<std::vector<int64_t>>>> names;  // buffers: no shape
  std::vector<std::pair<std::string, std::string>> shared;
};

Result<ModelOrder> model_order(const std::string& step) {
  ModelOrder order;
  auto paths = find_files_with_suffix(step, "_model_states.pt");
  if (!paths.ok()) return order;
  TZ_ASSIGN_OR_RETURN(TorchFile f, TorchFile::open(paths->front()));
  const PyValue& root = f.root();
  if (const PyValue* buffers = root.get("buffer_names"); buffers != nullptr && buffers->kind == PyKind::kList) {
    for (const PyValue* n : buffers->items) {
      if (n->kind == PyKind::kString) order.names.emplace_back(n->text, std::nullopt);
    }
  }
  const auto add_shapes = [&](const PyValue& dict, const std::string& what) -> Status {
    if (dict.kind != PyKind::kDict) return {};
    for (const auto& [k, v] : dict.entries) {
      if (k->kind != PyKind::kString) continue;
      TZ_ASSIGN_OR_RETURN(auto shape, torch_shape(*v, f.path() + ": " + what + "['" + k->text + "']"));
      order.names.emplace_back(k->text, std::move(shape));
    }
    return {};
  };
  if (const PyValue* frozen = root.get("frozen_param_shapes"))
    TZ_RETURN_IF_ERROR(add_shapes(*frozen, "frozen_param_shapes"));
  if (const PyValue* groups = root.get("param_shapes"); groups != nullptr && groups->kind == PyKind::kList) {
    for (size_t g = 0; g < groups->items.size(); ++g) {
      TZ_RETURN_IF_ERROR(add_shapes(*groups->items[g], "param_shapes[" + std::to_string(g) + "]"));
    }
  }
  if (const PyValue* shared = root.get("shared_params"); shared != nullptr && shared->kind == PyKind::kDict) {
    for (const auto& [k, v] : shared->entries) {
      if (k->kind == PyKind::kString && v->kind == PyKind::kString) order.shared.emplace_back(k->text, v->text);
    }
  }
  return order;
}

// Reads zero/NAME/fp32.pt's tensor: the 'param' entry of a dict (stage 1/2 conversions), or the
// file's root itself (stage 3 conversions save the bare tensor).
Result<UniversalTensor> param_tensor(const std::string& path) {
  TZ_ASSIGN_OR_RETURN(TorchFile f, TorchFile::open(path));
  const PyValue* param = f.root().kind == PyKind::kDict ? f.root().get("param") : &f.root();
  if (param == nullptr) {
    return corrupt(path + ": a dict without a 'param' entry: not a DeepSpeed universal checkpoint fp32.pt file");
  }
  TZ_ASSIGN_OR_RETURN(TorchTensor t, f.tensor(*param, "param"));
  return UniversalTensor{path, std::move(t)};
}

}  // namespace

bool is_deepspeed_universal_checkpoint(const std::string& dir) { return step_folder(dir, "").ok(); }

Result<std::unique_ptr<ConsolidationSource>> open_deepspeed_universal_checkpoint(const std::string& dir,
                                                                                 const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(std::string step, step_folder(dir, tag));
  const std::string zero = step + "/zero";
  std::vector<std::string> folders;
  std::error_code ec;
  for (fs::directory_iterator it(zero, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) folders.push_back(it->path().filename().string());
  }
  if (ec) return io_error("cannot list " + zero + ": " + ec.message());
  std::sort(folders.begin(), folders.end(),
            [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  if (folders.empty()) return not_found(zero + " holds no parameter folders (zero/NAME/fp32.pt)");

  TZ_ASSIGN_OR_RETURN(ModelOrder order, model_order(step));
  std::vector<std::string> names;
  std::unordered_map<std::string, std::vector<int64_t>> expected_shape;
  const std::unordered_set<std::string> present(folders.begin(), folders.end());
  std::unordered_set<std::string> placed;
  for (const auto& [name, shape] : order.names) {
    if (present.contains(name) && placed.insert(name).second) {
      names.push_back(name);
      if (shape) expected_shape[name] = *shape;
    }
  }
  for (const std::string& name : folders) {
    if (placed.insert(name).second) names.push_back(name);
  }

  std::vector<TensorSpec> specs;
  std::vector<UniversalTensor> files;
  for (const std::string& name : names) {
    TZ_ASSIGN_OR_RETURN(UniversalTensor t, param_tensor(zero + "/" + name + "/fp32.pt"));
    std::vector<int64_t> shape = t.tensor.shape;
    if (const auto it = expected_shape.find(name); it != expected_shape.end()) {
      // Stage 3 conversions save the parameter flat; the model states file has its shape.
      TZ_ASSIGN_OR_RETURN(int64_t numel, shape_numel(it->second, t.path));
      if (static_cast<uint64_t>(numel) != t.tensor.numel || (shape != it->second && shape.size() != 1)) {
        return corrupt(t.path + ": 'param' holds " + std::to_string(t.tensor.numel) + " elements in " +
                       std::to_string(shape.size()) + " dimensions but the model states file gives '" + name + "' " +
                       std::to_string(numel) + " elements (a universal checkpoint made from another model?)");
      }
      shape = it->second;
    }
    specs.push_back({name, std::move(shape)});
    files.push_back(std::move(t));
  }
  std::vector<std::pair<std::string, std::string>> aliases;
  for (const auto& [alias, target] : order.shared) {
    if (present.contains(target) && !present.contains(alias)) aliases.emplace_back(alias, target);
  }
  std::string config;
  for (const std::string& at : {dir, step, fs::path(dir).parent_path().string()}) {
    if (config.empty()) config = read_text_if_present(at + "/config.json");
  }
  return std::unique_ptr<ConsolidationSource>(
      std::make_unique<UniversalSource>(std::move(specs), std::move(files), std::move(aliases), std::move(config)));
}

}  // namespace tierzero::checkpoint
