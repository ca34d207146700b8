// A LoRA run's checkpoint converted (checkpoint/convert/consolidate.h, "LoRA checkpoints"): merged
// over its base model directory, or written as a PEFT adapter directory.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tbb/parallel_for.h>
#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint/storage/storage.h"
#include "common/common.h"
#include "fs/file_system.h"

namespace tierzero::checkpoint {
namespace {

constexpr std::string_view kLoraA = ".lora_A.weight";
constexpr std::string_view kLoraB = ".lora_B.weight";
// PEFT's prefix of a saved adapter's tensor names (PeftModel -> LoraModel -> the base model).
constexpr std::string_view kPeftPrefix = "base_model.model.";

Result<nlohmann::json> read_json(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return not_found(path + " cannot be read: " + what);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return corrupt(path + " is not a JSON object");
  return json;
}

// One adapted weight: its lora_A [r, in] and lora_B [out, r], fp32.
struct Adapter {
  std::vector<float> a, b;
  int64_t r = 0, in = 0, out = 0;
};

// The base model directory's tensors, read from its safetensors files (mapped).
class BaseWeights {
 public:
  static Result<BaseWeights> open(const std::string& dir) {
    BaseWeights base;
    std::vector<std::string> files;
    const std::string index_path = dir + "/model.safetensors.index.json";
    if (std::ifstream(index_path).good()) {
      TZ_ASSIGN_OR_RETURN(const nlohmann::json index, read_json(index_path, "the shard index"));
      const auto map = index.find("weight_map");
      if (map == index.end() || !map->is_object()) return corrupt(index_path + " has no \"weight_map\" object");
      for (const auto& [name, file] : map->items()) {
        if (!file.is_string()) return corrupt(index_path + ": weight_map[" + name + "] is not a file name");
        if (std::find(files.begin(), files.end(), file.get<std::string>()) == files.end())
          files.push_back(file.get<std::string>());
      }
    } else {
      files.push_back("model.safetensors");
    }
    for (const std::string& file : files) {
      TZ_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> opened, SafetensorsFile::open(dir + "/" + file));
      for (const SafetensorsTensorInfo& info : opened->header().tensors) {
        if (info.dtype != ElementType::kF32 && info.dtype != ElementType::kBF16 && info.dtype != ElementType::kF16) {
          return invalid_argument(fmt::format("{}: tensor {} is {}; the base of a LoRA merge holds F32, BF16 or F16",
                                              opened->path(), info.name, dtype_name(info.dtype)));
        }
        base.specs.push_back({info.name, info.shape});
        base.where.push_back({base.files.size(), &info});
      }
      base.files.push_back(std::move(opened));
    }
    return base;
  }

  // Elements [first, first + out.size()) of tensor `index`, widened to fp32.
  void read(size_t index, uint64_t first, std::span<float> out) const {
    const auto& [file, info] = where[index];
    const std::byte* bytes = files[file]->data(*info).data();
    switch (info->dtype) {
      case ElementType::kF32: std::memcpy(out.data(), bytes + first * 4, out.size() * 4); break;
      case ElementType::kBF16: bf16_to_floats(bytes + first * 2, out); break;
      default: fp16_to_floats(bytes + first * 2, out); break;
    }
  }

  std::vector<TensorSpec> specs;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<std::pair<size_t, const SafetensorsTensorInfo*>> where;
};

class MergedLoraSource final : public ConsolidationSource {
 public:
  MergedLoraSource(ConsolidationSource& adapters, BaseWeights base, std::map<std::string, Adapter> targets,
                   double scaling)
      : adapters_(adapters), base_(std::move(base)), targets_(std::move(targets)), scaling_(scaling) {}

  const std::vector<TensorSpec>& tensors() const override { return base_.specs; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return aliases_; }
  std::string model_config_json() const override { return adapters_.model_config_json(); }

 private:
  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    base_.read(index, first, out);
    const auto target = targets_.find(base_.specs[index].name);
    if (target == targets_.end()) return {};
    const Adapter& ad = target->second;
    const auto in = static_cast<uint64_t>(ad.in);
    // W[i, j] + scaling * sum_k B[i, k] A[k, j], row by row of the range.
    tbb::parallel_for(first / in, (first + out.size() + in - 1) / in, [&](uint64_t row) {
      const uint64_t begin = std::max(first, row * in), end = std::min(first + out.size(), (row + 1) * in);
      for (uint64_t e = begin; e < end; ++e) {
        const uint64_t col = e - row * in;
        float sum = 0.0F;
        for (int64_t k = 0; k < ad.r; ++k)
          sum += ad.b[row * static_cast<uint64_t>(ad.r) + static_cast<uint64_t>(k)] *
                 ad.a[static_cast<uint64_t>(k) * in + col];
        out[e - first] += sum * static_cast<float>(scaling_);
      }
    });
    return {};
  }

  ConsolidationSource& adapters_;
  BaseWeights base_;
  std::map<std::string, Adapter> targets_;  // by the base weight's name
  double scaling_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

Result<std::vector<float>> read_whole(ConsolidationSource& source, size_t index) {
  std::vector<float> values(static_cast<size_t>(source.tensors()[index].numel()));
  TZ_RETURN_IF_ERROR(source.read_fp32(index, values));
  return values;
}

}  // namespace

bool is_lora_checkpoint(const ConsolidationSource& source) {
  const std::vector<TensorSpec>& tensors = source.tensors();
  return !tensors.empty() && std::all_of(tensors.begin(), tensors.end(), [](const TensorSpec& t) {
    return t.name.ends_with(kLoraA) || t.name.ends_with(kLoraB);
  });
}

Result<std::unique_ptr<ConsolidationSource>> open_merged_lora_source(ConsolidationSource& adapters,
                                                                     const std::string& adapter_config_path,
                                                                     const std::string& model_dir) {
  TZ_ASSIGN_OR_RETURN(const nlohmann::json config, read_json(adapter_config_path,
                                                             "it gives the adapters' r and lora_alpha (train writes it "
                                                             "beside each checkpoint of a LoRA run)"));
  const int64_t r = config.value("r", int64_t{0});
  const double alpha = config.value("lora_alpha", 0.0);
  if (r < 1 || alpha <= 0.0) return corrupt(adapter_config_path + ": \"r\" must be >= 1 and \"lora_alpha\" > 0");
  const double scaling = config.value("use_rslora", false) ? alpha / std::sqrt(static_cast<double>(r)) : alpha / r;
  TZ_ASSIGN_OR_RETURN(BaseWeights base, BaseWeights::open(model_dir));

  std::map<std::string, Adapter> targets;
  const std::vector<TensorSpec>& tensors = adapters.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& spec = tensors[i];
    const bool is_a = spec.name.ends_with(kLoraA);
    const std::string module = spec.name.substr(0, spec.name.size() - (is_a ? kLoraA : kLoraB).size());
    if (spec.shape.size() != 2) return invalid_argument(spec.name + " is not a matrix");
    Adapter& ad = targets[module + ".weight"];
    TZ_ASSIGN_OR_RETURN(std::vector<float> values, read_whole(adapters, i));
    if (is_a) {
      ad.a = std::move(values);
      ad.r = spec.shape[0];
      ad.in = spec.shape[1];
    } else {
      ad.b = std::move(values);
      ad.out = spec.shape[0];
    }
  }
  for (const auto& [weight, ad] : targets) {
    const std::string& name = weight;  // a lambda may not capture a structured binding (C++20, clang)
    const auto base_spec =
        std::find_if(base.specs.begin(), base.specs.end(), [&](const TensorSpec& t) { return t.name == name; });
    if (ad.a.empty() || ad.b.empty())
      return invalid_argument("the checkpoint has only one of lora_A and lora_B for " + weight);
    if (base_spec == base.specs.end())
      return invalid_argument(
          fmt::format("{} has no {}, which the checkpoint's adapters target: pass --model, the "
                      "base model directory the run was trained from",
                      model_dir, weight));
    if (ad.r != r)
      return invalid_argument(fmt::format("{}: r {} differs from the checkpoint's lora_A of {} (r {})",
                                          adapter_config_path, r, weight, ad.r));
    if (base_spec->shape != std::vector<int64_t>{ad.out, ad.in} || ad.b.size() != static_cast<size_t>(ad.out * r)) {
      return invalid_argument(
          fmt::format("{} in {} is [{}], but its adapters make [{}, {}]: pass --model, the base "
                      "model directory the run was trained from",
                      weight, model_dir, fmt::join(base_spec->shape, ", "), ad.out, ad.in));
    }
  }
  return std::unique_ptr<ConsolidationSource>(
      std::make_unique<MergedLoraSource>(adapters, std::move(base), std::move(targets), scaling));
}

Result<size_t> write_peft_adapter(ConsolidationSource& adapters, const std::string& adapter_config_path,
                                  const std::string& base_model, const std::string& out_dir) {
  TZ_ASSIGN_OR_RETURN(nlohmann::json config, read_json(adapter_config_path,
                                                       "the PEFT adapter_config.json train writes beside each "
                                                       "checkpoint of a LoRA run"));
  if (!base_model.empty()) config["base_model_name_or_path"] = base_model;
  std::vector<TensorToWrite> declared;
  std::string data;
  for (size_t i = 0; i < adapters.tensors().size(); ++i) {
    const TensorSpec& spec = adapters.tensors()[i];
    declared.push_back({std::string(kPeftPrefix) + spec.name, ElementType::kF32, spec.shape});
    TZ_ASSIGN_OR_RETURN(const std::vector<float> values, read_whole(adapters, i));
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  TZ_ASSIGN_OR_RETURN(const std::string header, build_safetensors_header(declared, {{"format", "pt"}}));
  std::string file(8, '\0');
  const uint64_t header_size = header.size();
  std::memcpy(file.data(), &header_size, sizeof header_size);  // little-endian hosts only, as the reader
  file += header;
  file += data;

  fs::FileSystem& file_system = fs::default_file_system();
  const std::string target = fs::strip_trailing_slashes(out_dir);
  if (const Result<fs::FileInfo> info = file_system.stat(target); info.ok()) {
    Result<std::vector<std::string>> names =
        info->is_dir ? file_system.list_dir(target) : Result<std::vector<std::string>>(std::vector<std::string>{""});
    if (!names.ok() || !names->empty())
      return invalid_argument("output " + target + " exists and is not an empty directory; choose a new directory");
  }
  CommitTransaction txn(file_system, fs::parent_dir(target), target.substr(target.rfind('/') + 1));
  TZ_RETURN_IF_ERROR(txn.begin());
  const std::string config_text = config.dump(2) + "\n";
  Status written = txn.write_file("adapter_config.json", std::as_bytes(std::span(config_text)));
  if (written.ok()) written = txn.write_file("adapter_model.safetensors", std::as_bytes(std::span(file)));
  if (written.ok()) written = txn.publish(/*replace_tree=*/false);
  if (!written.ok()) {
    (void)txn.abort();  // best effort: the error is what matters
    return written;
  }
  return adapters.tensors().size();
}

}  // namespace tierzero::checkpoint
