// Parameter sources (functional_model.h): tensors in memory, and a Hugging Face safetensors
// directory read range by range on every core (offload::RangeReader: O_DIRECT where allowed, else pread).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/safetensors/safetensors.h"
#include "engine/model/functional_model.h"
#include "nvme/io_engine.h"
#include "offload/offload.h"

namespace tierzero::engine {
namespace {

// Source bytes a thread reads and converts at a time: bounds the buffer each thread holds.
constexpr uint64_t kPieceBytes = 2ull << 20;
class MapParamSource final : public ParamSource {
 public:
  explicit MapParamSource(const std::map<std::string, at::Tensor>& params) : params_(params) {}

  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = params_.find(name);
    if (it == params_.end()) return std::nullopt;
    return it->second.sizes().vec();
  }

  Status read(const std::string& name, int64_t first, std::span<float> out) override {
    auto it = params_.find(name);
    if (it == params_.end()) return not_found("parameter " + name + " is not in the tensors given");
    const at::Tensor flat = it->second.reshape(-1);
    const auto count = static_cast<int64_t>(out.size());
    if (first < 0 || first + count > flat.numel())
      return invalid_argument(
          fmt::format("parameter {}: elements [{}, {}) are past its {}", name, first, first + count, flat.numel()));
    at::from_blob(out.data(), {count}, at::kFloat).copy_(flat.narrow(0, first, count));
    return {};
  }

 private:
  const std::map<std::string, at::Tensor>& params_;
};

class SafetensorsParamSource final : public ParamSource {
 public:
  // Opens `path` and indexes its tensors (header only).
  Status add_file(const std::string& path) {
    TZ_ASSIGN_OR_RETURN(std::unique_ptr<offload::RangeReader> file, offload::RangeReader::open(path));
    const offload::RangeReader& in = *files_.emplace_back(std::move(file));
    TZ_ASSIGN_OR_RETURN(const uint64_t file_bytes, in.size());
    uint64_t header_bytes = 0;
    if (file_bytes < 8)
      return corrupt(fmt::format("{}: {} bytes is too short for a safetensors file", path, file_bytes));
    TZ_RETURN_IF_ERROR(in.read_exact(&header_bytes, 8, 0));  // little endian, as the host
    if (header_bytes > checkpoint::kMaxSafetensorsHeaderBytes || header_bytes > file_bytes - 8)
      return corrupt(
          fmt::format("{}: header length {} does not fit the file of {} bytes", path, header_bytes, file_bytes));
    std::string json(header_bytes, '\0');
    TZ_RETURN_IF_ERROR(in.read_exact(json.data(), header_bytes, 8));
    TZ_ASSIGN_OR_RETURN(checkpoint::SafetensorsHeader header,
                        checkpoint::parse_safetensors_header(json, file_bytes - 8 - header_bytes, path));
    for (checkpoint::SafetensorsTensorInfo& t : header.tensors) {
      const std::optional<at::ScalarType> dtype = to_scalar_type(t.dtype);
      if (!dtype || !at::isFloatingType(*dtype))
        return unsupported(fmt::format("{}: tensor {} has dtype {}, which tierzero does not load as a model weight",
                                       path, t.name, checkpoint::dtype_name(t.dtype)));
      tensors_[t.name] = Tensor{.file = files_.size() - 1,
                                .dtype = *dtype,
                                .shape = std::move(t.shape),
                                .offset = 8 + header_bytes + t.begin};
    }
    return {};
  }

  bool has(const std::string& name) const { return tensors_.count(name) > 0; }

  std::optional<std::vector<int64_t>> shape(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return std::nullopt;
    return it->second.shape;
  }

  Status read(const std::string& name, int64_t first, std::span<float> out) override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return not_found("parameter " + name + " is in no safetensors file of the checkpoint");
    const Tensor& t = it->second;
    const std::string& path = files_[t.file]->path();
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const auto count = static_cast<int64_t>(out.size());
    if (first < 0 || first + count > numel)
      return invalid_argument(
          fmt::format("{}: tensor {}: elements [{}, {}) are past its {}", path, name, first, first + count, numel));
    const uint64_t element = c10::elementSize(t.dtype);
    const uint64_t offset = t.offset + static_cast<uint64_t>(first) * element;
    // Pieces on every core: several reads in flight keep the disk busy, and each converts its own.
    const int64_t piece = static_cast<int64_t>(kPieceBytes / element);
    std::mutex failed_mutex;
    Status failed;
    at::parallel_for(0, (count + piece - 1) / piece, 1, [&](int64_t begin, int64_t end) {
      const nvme::AlignedBuffer buffer =
          nvme::allocate_aligned(offload::RangeReader::buffer_bytes(kPieceBytes));  // this thread's
      for (int64_t k = begin; k < end; ++k) {
        const int64_t done = k * piece, n = std::min(piece, count - done);
        Result<std::byte*> bytes = files_[t.file]->read(offset + done * element, n * element, buffer.get());
        if (bytes.ok()) {
          at::from_blob(out.data() + done, {n}, at::kFloat).copy_(at::from_blob(*bytes, {n}, t.dtype));
          continue;
        }
        const std::lock_guard<std::mutex> lock(failed_mutex);
        if (failed.ok()) failed = bytes.status().with_context("tensor " + name);
      }
    });
    return failed;
  }

 private:
  struct Tensor {
    size_t file = 0;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // of the first element in the file
  };
  std::vector<std::unique_ptr<offload::RangeReader>> files_;
  std::map<std::string, Tensor> tensors_;
};

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The shard files model.safetensors.index.json at `index_path` lists, and the names it promises.
Status read_index(const std::string& index_path, std::set<std::string>& files, std::set<std::string>& names) {
  std::ifstream in(index_path);
  if (!in) return io_error(fmt::format("{}: cannot open", index_path));
  const nlohmann::json index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return corrupt(fmt::format("{}: expected a JSON object with a \"weight_map\" object {{name: file}}", index_path));
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
      return corrupt(fmt::format("{}: weight_map[\"{}\"] must be a file name in the same directory", index_path, name));
    files.insert(file.get<std::string>());
    names.insert(name);
  }
  return {};
}

}  // namespace

std::unique_ptr<ParamSource> map_param_source(const std::map<std::string, at::Tensor>& params) {
  return std::make_unique<MapParamSource>(params);
}

Result<std::unique_ptr<ParamSource>> open_safetensors_params(const std::string& model_dir) {
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  const std::string single_path = model_dir + "/model.safetensors";
  auto source = std::make_unique<SafetensorsParamSource>();
  if (file_exists(index_path)) {
    std::set<std::string> files, names;
    TZ_RETURN_IF_ERROR(read_index(index_path, files, names));
    for (const std::string& file : files)
      TZ_RETURN_IF_ERROR(source->add_file(model_dir + "/" + file).with_context("shard listed in " + index_path));
    for (const std::string& name : names)
      if (!source->has(name))
        return corrupt(
            fmt::format("{}: tensor {} is listed in weight_map but absent from its shard", index_path, name));
    return std::unique_ptr<ParamSource>(std::move(source));
  }
  if (file_exists(single_path)) {
    TZ_RETURN_IF_ERROR(source->add_file(single_path));
    return std::unique_ptr<ParamSource>(std::move(source));
  }
  return not_found(
      fmt::format("{}: neither model.safetensors nor model.safetensors.index.json exists; pass a "
                  "Hugging Face model directory saved with safe_serialization=True",
                  model_dir));
}

Status check_params(const FunctionalModel& model, const ParamSource& source) {
  std::vector<std::string> problems;
  for (const ParamSpec& spec : all_params(model)) {
    const std::optional<std::vector<int64_t>> shape = source.shape(spec.name);
    if (!shape) {
      problems.push_back(fmt::format("{} missing", spec.name));
    } else if (*shape != spec.shape) {
      problems.push_back(fmt::format("{} has shape [{}], the config says [{}]", spec.name, fmt::join(*shape, ","),
                                     fmt::join(spec.shape, ",")));
    }
  }
  if (problems.empty()) return {};
  constexpr size_t kShown = 8;
  const size_t shown = std::min(problems.size(), kShown);
  return invalid_argument(fmt::format(
      "parameters do not match the model config ({} problems: {}{}); check that config.json belongs to these weights",
      problems.size(), fmt::join(problems.begin(), problems.begin() + shown, "; "),
      problems.size() > shown ? "; ..." : ""));
}

}  // namespace tierzero::engine
