// merged_lora_source (internal/lora_export.h).
#include "engine/train/internal/lora_export.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace tierzero::engine::trainer {
namespace {

class MergedLoraSource final : public checkpoint::ConsolidationSource {
 public:
  MergedLoraSource(const LoraModel& model, ParamSource& base, const std::map<std::string, at::Tensor>& adapters,
                   std::string config_json)
      : model_(model), base_(base), adapters_(adapters), config_json_(std::move(config_json)) {
    for (const ParamSpec& spec : all_params(model.base())) tensors_.push_back({spec.name, spec.shape});
  }

  const std::vector<checkpoint::TensorSpec>& tensors() const override { return tensors_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return aliases_; }
  std::string model_config_json() const override { return config_json_; }

 private:
  // Reads the whole rows that elements [first, first + out.size()) lie in, merges them when the
  // tensor is a target, and copies the range out.
  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    const checkpoint::TensorSpec& spec = tensors_[index];
    const auto begin = static_cast<int64_t>(first);
    const auto count = static_cast<int64_t>(out.size());
    const int64_t row = spec.shape.size() == 2 ? spec.shape[1] : spec.numel();
    const int64_t first_row = begin / row;
    const int64_t rows = (begin + count + row - 1) / row - first_row;
    at::Tensor base_rows = at::empty({rows, row}, at::kFloat);
    TZ_RETURN_IF_ERROR(base_.read(spec.name, first_row * row,
                                  std::span<float>(base_rows.data_ptr<float>(), static_cast<size_t>(rows * row))));
    const std::optional<at::Tensor> merged = merged_rows(model_, adapters_, spec.name, base_rows, first_row);
    const at::Tensor values = (merged ? *merged : base_rows).reshape({-1}).narrow(0, begin - first_row * row, count);
    at::from_blob(out.data(), {count}, at::kFloat).copy_(values);
    return {};
  }

  const LoraModel& model_;
  ParamSource& base_;
  const std::map<std::string, at::Tensor>& adapters_;
  std::string config_json_;
  std::vector<checkpoint::TensorSpec> tensors_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

}  // namespace

std::unique_ptr<checkpoint::ConsolidationSource> merged_lora_source(const LoraModel& model, ParamSource& base,
                                                                    const std::map<std::string, at::Tensor>& adapters,
                                                                    std::string config_json) {
  return std::make_unique<MergedLoraSource>(model, base, adapters, std::move(config_json));
}

}  // namespace tierzero::engine::trainer
