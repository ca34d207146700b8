#include "checkpoint/deepspeed/deepspeed_source.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "checkpoint/deepspeed/internal/deepspeed_files.h"
#include "checkpoint/deepspeed/internal/deepspeed_layout.h"

namespace tierzero::checkpoint {
namespace {

class DeepSpeedSource final : public ConsolidationSource {
 public:
  DeepSpeedSource(DeepSpeedFiles files, DeepSpeedLayout layout, std::string config_json)
      : files_(std::move(files)), layout_(std::move(layout)), config_json_(std::move(config_json)) {}

  const std::vector<TensorSpec>& tensors() const override { return layout_.specs; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return layout_.aliases; }
  std::string model_config_json() const override { return config_json_; }

  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    const std::string& name = layout_.specs[index].name;
    const uint64_t end = first + out.size();
    for (const DeepSpeedPiece& p : layout_.pieces[index]) {
      const uint64_t lo = std::max(first, p.dst_first), hi = std::min(end, p.dst_first + p.count);
      if (lo >= hi) continue;
      const Status s = files_.at(p.file).read_fp32(layout_.sources[p.source], p.src_first + (lo - p.dst_first),
                                                   out.subspan(lo - first, hi - lo));
      if (!s.ok()) {
        return s.with_context("reading tensor '" + name + "'" +
                              (p.rank >= 0 ? " from rank " + std::to_string(p.rank) : std::string()));
      }
    }
    return {};
  }

  // Integer buffers stay integers, as zero_to_fp32 keeps them (it widens only floating buffers).
  ElementType dtype(size_t index) const override {
    const DeepSpeedPiece* piece = whole_piece(index);
    if (piece == nullptr) return ElementType::kF32;
    const ElementType stored = layout_.sources[piece->source].dtype;
    return is_integer_type(stored) ? stored : ElementType::kF32;
  }

  Status read_raw(size_t index, std::span<std::byte> out) override {
    const DeepSpeedPiece* piece = whole_piece(index);
    if (piece == nullptr || dtype(index) == ElementType::kF32) {
      return invalid_argument("tensor " + std::to_string(index) +
                              " of the DeepSpeed checkpoint is not an integer "
                              "tensor; read it with read_fp32");
    }
    return files_.at(piece->file)
        .read_bytes(layout_.sources[piece->source], out)
        .with_context("reading tensor '" + layout_.specs[index].name + "'");
  }

 private:
  // The tensor's only piece when it is one whole stored tensor (a buffer), else nullptr.
  const DeepSpeedPiece* whole_piece(size_t index) const {
    if (index >= layout_.pieces.size() || layout_.pieces[index].size() != 1) return nullptr;
    const DeepSpeedPiece& p = layout_.pieces[index][0];
    const TorchTensor& t = layout_.sources[p.source];
    return p.src_first == 0 && p.count == t.numel ? &p : nullptr;
  }

  DeepSpeedFiles files_;
  DeepSpeedLayout layout_;
  std::string config_json_;
};

}  // namespace

bool is_deepspeed_checkpoint(const std::string& dir) {
  const Result<std::string> tag = read_latest_tag(dir);
  if (!tag.ok()) return false;
  const std::string tag_dir = dir + "/" + *tag;
  return find_files_with_suffix(tag_dir, "_model_states.pt").ok() &&
         find_files_with_suffix(tag_dir, "_optim_states.pt").ok();
}

Result<std::unique_ptr<ConsolidationSource>> open_deepspeed_checkpoint(const std::string& dir, const std::string& tag) {
  std::string chosen = tag;
  if (chosen.empty()) {
    TZ_ASSIGN_OR_RETURN(chosen, read_latest_tag(dir));
  }
  const std::string tag_dir = dir + "/" + chosen;
  std::error_code ec;
  if (!std::filesystem::is_directory(tag_dir, ec)) {
    return not_found("DeepSpeed checkpoint folder " + tag_dir + " does not exist (check the tag / DIR/latest)");
  }
  TZ_ASSIGN_OR_RETURN(DeepSpeedFiles files, open_deepspeed_files(tag_dir));
  TZ_ASSIGN_OR_RETURN(DeepSpeedLayout layout, plan_deepspeed_layout(files));
  std::string config = read_model_config(dir, tag_dir);
  return std::unique_ptr<ConsolidationSource>(
      std::make_unique<DeepSpeedSource>(std::move(files), std::move(layout), std::move(config)));
}

}  // namespace tierzero::checkpoint
