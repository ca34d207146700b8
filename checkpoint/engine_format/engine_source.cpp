// ConsolidationSource over a tierzero engine checkpoint: replicated tensors, then each group's
// parameters read from states[0] (the fp32 master), streamed rank by rank.
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/latest_pointer.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/engine_format/internal/reader_paths.h"
#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

// Widens `count` elements of `dtype` at `in` to floats.
Status widen_to_fp32(ElementType dtype, const std::byte* in, std::span<float> out, const std::string& name) {
  const size_t n = out.size();
  auto load = [&]<typename T>(T*) {
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, in + i * sizeof(T), sizeof(T));
      out[i] = static_cast<float>(v);
    }
  };
  switch (dtype) {
    case ElementType::kF32: std::memcpy(out.data(), in, n * 4); return {};
    case ElementType::kBF16: bf16_to_floats(in, out); return {};
    case ElementType::kF16: fp16_to_floats(in, out); return {};
    case ElementType::kF64: load(static_cast<double*>(nullptr)); return {};
    case ElementType::kI64: load(static_cast<int64_t*>(nullptr)); return {};
    case ElementType::kI32: load(static_cast<int32_t*>(nullptr)); return {};
    case ElementType::kI16: load(static_cast<int16_t*>(nullptr)); return {};
    case ElementType::kI8: load(static_cast<int8_t*>(nullptr)); return {};
    case ElementType::kU8:
    case ElementType::kBool: load(static_cast<uint8_t*>(nullptr)); return {};
    default:
      return unsupported(fmt::format("tensor '{}': dtype {} cannot be consolidated to fp32", name, dtype_name(dtype)));
  }
}

class EngineSource final : public ConsolidationSource {
 public:
  EngineSource(std::unique_ptr<CheckpointReader> reader, std::string config_json)
      : reader_(std::move(reader)), config_json_(std::move(config_json)) {
    const CheckpointManifest& m = reader_->manifest();
    for (size_t i = 0; i < m.replicated.size(); ++i) {
      tensors_.push_back(m.replicated[i].spec);
      where_.push_back({true, i, 0, 0, false});
    }
    for (size_t g = 0; g < m.groups.size(); ++g) {
      uint64_t offset = 0;
      for (size_t p = 0; p < m.groups[g].params.size(); ++p) {
        tensors_.push_back(m.groups[g].params[p]);
        where_.push_back({false, 0, g, offset, p + 1 == m.groups[g].params.size()});
        offset += static_cast<uint64_t>(m.groups[g].params[p].numel());
      }
    }
  }

  const std::vector<TensorSpec>& tensors() const override { return tensors_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override {
    return reader_->manifest().aliases;
  }
  std::string model_config_json() const override { return config_json_; }

  // Replicated integer and bool tensors are copied unchanged; group states are always floats.
  ElementType dtype(size_t index) const override {
    if (index >= where_.size() || !where_[index].replicated) return ElementType::kF32;
    const ElementType stored = reader_->manifest().replicated[where_[index].index].dtype;
    return is_integer_type(stored) ? stored : ElementType::kF32;
  }

  Status read_raw(size_t index, std::span<std::byte> out) override {
    if (dtype(index) == ElementType::kF32) {
      return invalid_argument(
          fmt::format("{}: tensor {} is not an integer tensor; read it with read_fp32", reader_->path(), index));
    }
    return reader_->read_replicated(where_[index].index, 0, out)
        .with_context(fmt::format("tensor '{}'", tensors_[index].name));
  }

  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    const Location& at = where_[index];
    const CheckpointManifest& m = reader_->manifest();
    const std::string& name = tensors_[index].name;
    const ElementType dtype = at.replicated ? m.replicated[at.index].dtype : m.groups[at.group].states[0].dtype;
    const uint64_t item = element_bits(dtype) / 8;
    // This tensor's stored elements from `element` on, as many as fill `bytes`.
    const auto read_stored = [&](uint64_t element, std::span<std::byte> bytes) {
      return at.replicated ? reader_->read_replicated(at.index, element * item, bytes)
                           : reader_->read_flat_range(at.group, 0, at.offset + element, bytes);
    };
    if (dtype == ElementType::kF32) {
      TZ_RETURN_IF_ERROR(
          read_stored(first, std::as_writable_bytes(out)).with_context(fmt::format("tensor '{}'", name)));
    } else {
      constexpr size_t kChunk = 1 << 20;
      std::vector<std::byte> raw(kChunk * item);
      for (size_t done = 0; done < out.size(); done += kChunk) {
        const size_t n = std::min(kChunk, out.size() - done);
        TZ_RETURN_IF_ERROR(
            read_stored(first + done, std::span(raw.data(), n * item)).with_context(fmt::format("tensor '{}'", name)));
        TZ_RETURN_IF_ERROR(widen_to_fp32(dtype, raw.data(), out.subspan(done, n), name));
      }
    }
    const bool tensor_done = first + out.size() == static_cast<uint64_t>(tensors_[index].numel());
    return tensor_done && !at.replicated && at.last_in_group ? reader_->finish_reads() : Status();
  }

 private:
  struct Location {
    bool replicated;
    size_t index;  // replicated tensor index
    size_t group;
    uint64_t offset;     // logical offset in the group's flat
    bool last_in_group;  // after it, the group's sections are read to their ends and verified
  };
  std::unique_ptr<CheckpointReader> reader_;
  std::string config_json_;
  std::vector<TensorSpec> tensors_;
  std::vector<Location> where_;
};

}  // namespace

bool is_engine_checkpoint(const std::string& dir, const std::string& tag) {
  auto where = locate_checkpoint(dir, tag);
  if (!where.ok()) {  // a damaged tierzero pointer: the engine reader names the problem
    return where.status().code() == ErrorCode::kCorrupt && std::filesystem::exists(dir + "/" + kLatestChecksumFile);
  }
  return std::filesystem::exists(where->path + "/manifest.json");
}

Result<std::unique_ptr<ConsolidationSource>> open_engine_checkpoint_source(const std::string& dir,
                                                                           const std::string& tag) {
  TZ_ASSIGN_OR_RETURN(auto reader, CheckpointReader::open(dir, tag));
  std::string config = reader->manifest().model_config_json;
  if (config.empty() && std::filesystem::exists(dir + "/config.json")) {
    TZ_ASSIGN_OR_RETURN(config, read_text_file(dir + "/config.json"));
  }
  return std::unique_ptr<ConsolidationSource>(new EngineSource(std::move(reader), std::move(config)));
}

}  // namespace tierzero::checkpoint
