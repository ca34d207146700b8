#include "tools/bench_adam_torch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/headeronly/version.h>

namespace tierzero::tools {
namespace {

at::ScalarType scalar_type_of(ElementType type) {
  switch (type) {
    case ElementType::kF32: return at::kFloat;
    case ElementType::kBF16: return at::kBFloat16;
    case ElementType::kF16: return at::kHalf;
  }
  return at::kFloat;
}

at::Tensor wrap(const void* data, size_t count, ElementType type) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(count)},
                       at::TensorOptions().dtype(scalar_type_of(type)));
}

class FusedAdamWPeer : public TorchAdamPeer {
 public:
  explicit FusedAdamWPeer(const TorchPeerBuffers& b)
      : params_(wrap(b.params, b.grads.count, ElementType::kF32)),
        grads_(wrap(b.grads.data, b.grads.count, b.grads.type)),
        grads32_(b.grads.type == ElementType::kF32 ? grads_ : wrap(b.grads32, b.grads.count, ElementType::kF32)),
        exp_avg_(wrap(b.exp_avg, b.grads.count, ElementType::kF32)),
        exp_avg_sq_(wrap(b.exp_avg_sq, b.grads.count, ElementType::kF32)),
        step_(at::zeros({1})),
        cast_grads_(b.grads.type != ElementType::kF32) {
    if (b.params16.count != 0) params16_ = wrap(b.params16.data, b.params16.count, b.params16.type);
    if (b.params_16bit.count != 0) {
      params_16bit_ = wrap(b.params_16bit.data, b.params_16bit.count, b.params_16bit.type);
    }
  }

  void set_threads(int threads) override { at::set_num_threads(threads); }

  void step(const cpu_adam::AdamHyperParams& hp, int64_t step_number) override {
    if (params_16bit_.defined()) params_.copy_(params_16bit_);
    if (cast_grads_) grads32_.copy_(grads_);
    step_.fill_(static_cast<double>(step_number));
    at::_fused_adamw_({params_}, {grads32_}, {exp_avg_}, {exp_avg_sq_}, {}, {step_}, hp.lr, hp.beta1, hp.beta2,
                      hp.weight_decay, hp.eps, false, false, std::nullopt, std::nullopt);
    if (params16_.defined()) params16_.copy_(params_);
    if (params_16bit_.defined()) params_16bit_.copy_(params_);
  }

 private:
  at::Tensor params_, grads_, grads32_, exp_avg_, exp_avg_sq_, step_, params16_, params_16bit_;
  bool cast_grads_;
};

}  // namespace

Result<std::unique_ptr<TorchAdamPeer>> make_torch_adam_peer(const TorchPeerBuffers& buffers) {
  return std::unique_ptr<TorchAdamPeer>(std::make_unique<FusedAdamWPeer>(buffers));
}

std::string torch_peer_description() {
  return std::string("PyTorch ") + TORCH_VERSION + " at::_fused_adamw_ (CPU capability " + at::get_cpu_capability() +
         "), cast passes with Tensor::copy_";
}

}  // namespace tierzero::tools
