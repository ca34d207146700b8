// consolidate_to_safetensors: source tensors (read ahead on a thread) -> encoded in place, on every
// core, into SafetensorsWriter's buffers (nvme, several in flight) -> OUT.partial -> renamed to OUT.
#include "checkpoint/convert/consolidate.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/storage/durable_fs.h"
#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint/convert/internal/tensor_encoder.h"
#include "checkpoint/convert/internal/tensor_prefetcher.h"
#include "common/progress.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

// Removes the partial output directory unless released. Through DurableFs (nftw), not
// std::filesystem::remove_all: the export runs this in LibTorch-linked programs, where the dynamic
// linker binds libtorch.so's broken copy of remove_all, which crashes.
class PartialDirGuard {
 public:
  explicit PartialDirGuard(std::string path) : path_(std::move(path)) {}
  ~PartialDirGuard() {
    if (!path_.empty()) (void)DurableFs().remove_all(path_);  // best effort: the error is already reported
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

Status check_output_dir(const std::string& out_dir) {
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) return {};
  if (!fs::is_directory(out_dir, ec) || !fs::is_empty(out_dir, ec)) {
    return invalid_argument(fmt::format("output {} exists and is not an empty directory; choose a new directory or "
                                        "remove it",
                                        out_dir));
  }
  return {};
}

Status write_small_file(const DurableFs& durable, const std::string& path, const std::string& text) {
  return durable.write_file(path, std::as_bytes(std::span(text)));
}

}  // namespace

Result<std::string> with_torch_dtype(const std::string& config_json, DType dtype) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corrupt("the model's config.json is not a JSON object; fix or remove it from the checkpoint");
  }
  const char* name = dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : "float32";
  j[j.contains("dtype") ? "dtype" : "torch_dtype"] = name;
  return j.dump(2) + "\n";
}

Result<DType> parse_output_dtype(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "bf16") return DType::kBF16;
  if (t == "fp16" || t == "f16") return DType::kF16;
  if (t == "fp32" || t == "f32") return DType::kF32;
  return invalid_argument(fmt::format("--dtype '{}' is not one of bf16, fp16, fp32", text));
}

Result<ConvertReport> consolidate_to_safetensors(ConsolidationSource& source, const std::string& out_dir,
                                                 const ConvertOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.dtype != DType::kF32 && options.dtype != DType::kF16 && options.dtype != DType::kBF16) {
    return invalid_argument("convert writes F32, F16 or BF16");
  }
  const std::string out = fs::path(out_dir).lexically_normal().string();
  const std::string target = out.ends_with('/') && out.size() > 1 ? out.substr(0, out.size() - 1) : out;
  TZ_RETURN_IF_ERROR(check_output_dir(target));

  const std::vector<TensorSpec>& specs = source.tensors();
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const DType stored = source.dtype(i);
    tensors.push_back({specs[i].name, stored == DType::kF32 ? options.dtype : stored, specs[i].shape});
  }
  TZ_ASSIGN_OR_RETURN(ShardPlan plan, plan_shards(tensors, options.max_shard_bytes));
  TZ_ASSIGN_OR_RETURN(auto engine, nvme::IoEngine::create(options.io));

  const std::string staging = target + ".partial";
  const DurableFs durable;
  TZ_RETURN_IF_ERROR(durable.remove_all(staging));
  TZ_RETURN_IF_ERROR(durable.make_dir(staging));
  PartialDirGuard guard(staging);

  ConvertReport report;
  report.tensors = specs.size();
  report.files = plan.file_names.size();
  report.tensor_bytes = plan.total_bytes;
  std::unique_ptr<ProgressBar> progress;
  if (options.progress) progress = std::make_unique<ProgressBar>("convert", plan.total_bytes);

  TensorPrefetcher prefetcher(source, options.read_ahead_bytes, options.read_piece_bytes);
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  SafetensorsWriter::Options writer_options{options.write_buffer_bytes, options.write_buffers};
  auto finishing = start;
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    std::vector<TensorToWrite> shard_tensors;
    for (size_t i : plan.shards[s]) shard_tensors.push_back(tensors[i]);
    const std::string path = staging + "/" + plan.file_names[s];
    TZ_ASSIGN_OR_RETURN(auto writer,
                        SafetensorsWriter::create(*engine, path, shard_tensors, metadata, writer_options));
    for (size_t i : plan.shards[s]) {
      for (bool last = false; !last;) {
        TZ_ASSIGN_OR_RETURN(PrefetchedPiece piece, prefetcher.next());
        if (piece.index != i) {
          return internal_error(fmt::format("convert read tensor {} where tensor {} was due", piece.index, i));
        }
        TZ_RETURN_IF_ERROR(write_tensor(*writer, piece, source.dtype(i), tensors[i].dtype)
                               .with_context(fmt::format("writing tensor '{}' to {}", specs[i].name, path)));
        prefetcher.recycle();
        last = piece.last;
      }
      if (progress) progress->advance(tensors[i].bytes().value());
    }
    if (s + 1 == plan.shards.size()) finishing = std::chrono::steady_clock::now();
    TZ_RETURN_IF_ERROR(writer->finish());
    report.file_bytes += writer->file_bytes();
  }
  const std::string index = build_safetensors_index(tensors, plan);
  if (!index.empty()) {
    TZ_RETURN_IF_ERROR(write_small_file(durable, staging + "/model.safetensors.index.json", index));
  }
  if (!source.model_config_json().empty()) {
    TZ_ASSIGN_OR_RETURN(const std::string config, with_torch_dtype(source.model_config_json(), options.dtype));
    TZ_RETURN_IF_ERROR(write_small_file(durable, staging + "/config.json", config));
  }
  TZ_RETURN_IF_ERROR(durable.sync_dir(staging));
  std::error_code ec;
  if (fs::exists(target, ec)) fs::remove(target, ec);  // an empty directory, checked above
  TZ_RETURN_IF_ERROR(durable.rename(staging, target));
  guard.release();
  const std::string parent = fs::path(target).parent_path().string();
  TZ_RETURN_IF_ERROR(durable.sync_dir(parent.empty() ? "." : parent));
  if (progress) progress->finish();
  const auto end = std::chrono::steady_clock::now();
  report.seconds = std::chrono::duration<double>(end - start).count();
  report.finish_seconds = std::chrono::duration<double>(end - finishing).count();
  return report;
}

}  // namespace tierzero::checkpoint
