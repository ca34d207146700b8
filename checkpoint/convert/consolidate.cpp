// consolidate_to_safetensors: source tensors (read ahead on a thread) -> encoded in place, on every
// core, into SafetensorsWriter's buffers (nvme, several in flight) -> OUT.partial -> renamed to OUT
// (the commit protocol of checkpoint/storage/commit_transaction.cpp, with OUT's parent as DIR).
#include "checkpoint/convert/consolidate.h"

#include <chrono>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/convert/internal/tensor_encoder.h"
#include "checkpoint/convert/internal/tensor_prefetcher.h"
#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint/storage/storage.h"
#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

// Removes the staging directory of a failed conversion unless released.
class PartialDirGuard {
 public:
  explicit PartialDirGuard(CommitTransaction& txn) : txn_(&txn) {}
  ~PartialDirGuard() {
    if (txn_ != nullptr) (void)txn_->abort();  // best effort: the error is already reported
  }
  void release() { txn_ = nullptr; }

 private:
  CommitTransaction* txn_;
};

Status check_output_dir(fs::FileSystem& file_system, const std::string& out_dir) {
  const Result<fs::FileInfo> info = file_system.stat(out_dir);
  if (!info.ok()) return info.status().code() == ErrorCode::kNotFound ? Status() : info.status();
  if (info->is_dir) {
    TZ_ASSIGN_OR_RETURN(const std::vector<std::string> names, file_system.list_dir(out_dir));
    if (names.empty()) return {};
  }
  return invalid_argument(
      fmt::format("output {} exists and is not an empty directory; choose a new directory or "
                  "remove it",
                  out_dir));
}

std::span<const std::byte> text_bytes(const std::string& text) { return std::as_bytes(std::span(text)); }

// Writes the tokenizer files and generation_config.json (collect_companion_files) into the
// staging directory and records in `report` where they came from.
Status write_companion_files(CommitTransaction& txn, const std::vector<std::string>& dirs,
                             const std::string& model_config, ConvertReport& report) {
  TZ_ASSIGN_OR_RETURN(const std::vector<CompanionFile> files, collect_companion_files(dirs, model_config));
  for (const CompanionFile& file : files) {
    TZ_RETURN_IF_ERROR(txn.write_file(file.name, text_bytes(file.text)));
    if (file.name == "generation_config.json") {
      report.generation_config_from = file.from_dir.empty() ? "config.json" : file.from_dir;
    } else {
      report.tokenizer_files.push_back(file.name);
      report.tokenizer_dir = file.from_dir;
    }
  }
  return Status();
}

}  // namespace

Result<std::string> with_torch_dtype(const std::string& config_json, ElementType dtype) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corrupt("the model's config.json is not a JSON object; fix or remove it from the checkpoint");
  }
  j[j.contains("dtype") ? "dtype" : "torch_dtype"] = torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

Result<ElementType> parse_output_dtype(const std::string& text) {
  const std::optional<ElementType> type = parse_element_type(text);
  if (type == ElementType::kBF16 || type == ElementType::kF16 || type == ElementType::kF32) return *type;
  return invalid_argument(fmt::format("--dtype '{}' is not one of bf16, fp16, fp32", text));
}

Result<ConvertReport> consolidate_to_safetensors(ConsolidationSource& source, const std::string& out_dir,
                                                 const ConvertOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.dtype != ElementType::kF32 && options.dtype != ElementType::kF16 && options.dtype != ElementType::kBF16) {
    return invalid_argument("convert writes F32, F16 or BF16");
  }
  fs::FileSystem& file_system = fs::default_file_system();
  const std::string target = fs::strip_trailing_slashes(out_dir);
  TZ_RETURN_IF_ERROR(check_output_dir(file_system, target));

  const std::vector<TensorSpec>& specs = source.tensors();
  const std::string model_config = options.config_json.empty() ? source.model_config_json() : options.config_json;
  if (!model_config.empty()) TZ_RETURN_IF_ERROR(check_config_matches(model_config, specs));
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ElementType stored = source.dtype(i);
    tensors.push_back({specs[i].name, stored == ElementType::kF32 ? options.dtype : stored, specs[i].shape});
  }
  TZ_ASSIGN_OR_RETURN(ShardPlan plan, plan_shards(tensors, options.max_shard_bytes));
  TZ_ASSIGN_OR_RETURN(auto engine, nvme::IoEngine::create(options.io));

  CommitTransaction txn(file_system, fs::parent_dir(target), target.substr(target.rfind('/') + 1));
  TZ_RETURN_IF_ERROR(txn.begin());
  PartialDirGuard guard(txn);
  const std::string& staging = txn.staging_dir();

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
    TZ_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::create(*engine, path, shard_tensors, metadata, writer_options));
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
    TZ_RETURN_IF_ERROR(txn.write_file("model.safetensors.index.json", text_bytes(index)));
  }
  if (!model_config.empty()) {
    TZ_ASSIGN_OR_RETURN(const std::string config, with_torch_dtype(model_config, options.dtype));
    TZ_RETURN_IF_ERROR(txn.write_file("config.json", text_bytes(config)));
    report.wrote_config = true;
  }
  TZ_RETURN_IF_ERROR(write_companion_files(txn, options.companion_dirs, model_config, report));
  TZ_RETURN_IF_ERROR(txn.publish(/*replace_tree=*/false));  // an existing target is empty, checked above
  guard.release();
  if (progress) progress->finish();
  const auto end = std::chrono::steady_clock::now();
  report.seconds = std::chrono::duration<double>(end - start).count();
  report.finish_seconds = std::chrono::duration<double>(end - finishing).count();
  return report;
}

}  // namespace tierzero::checkpoint
