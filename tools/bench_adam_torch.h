// The peer of `tierzero bench adam`: PyTorch's fused CPU AdamW (at::_fused_adamw_, what
// torch.optim.AdamW(fused=True) runs) doing the same work on the same data, its cast passes
// included: 16-bit grads -> fp32, the step on fp32 state, fp32 params -> 16-bit copy; with 16-bit
// params (which _fused_adamw_ on CPU does not take with fp32 state) also params -> fp32 and back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/common.h"
#include "cpu_adam/adam.h"

namespace tierzero::tools {

// The peer's buffers (fp32 state); grads32 is scratch for the cast when grads are 16-bit.
struct TorchPeerBuffers {
  float* params = nullptr;  // fp32 params, or fp32 scratch when params_16bit is set
  cpu_adam::ConstElements grads;
  float* grads32 = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  cpu_adam::Elements params16;      // empty: no 16-bit copy
  cpu_adam::Elements params_16bit;  // bf16 | fp16 params updated by the step, or empty for fp32 params
};

class TorchAdamPeer {
 public:
  virtual ~TorchAdamPeer() = default;
  // Sets the intra-op thread count torch uses for the following steps.
  virtual void set_threads(int threads) = 0;
  // One AdamW step numbered `step_number` with grads multiplied by 1 (no loss scale), all passes.
  virtual void step(const cpu_adam::AdamHyperParams& hp, int64_t step_number) = 0;
};

// Returns a peer over `buffers` (all of grads.count elements), or kUnsupported when this build has
// no LibTorch.
Result<std::unique_ptr<TorchAdamPeer>> make_torch_adam_peer(const TorchPeerBuffers& buffers);

// "PyTorch 2.11.0, fused AdamW (at::_fused_adamw_), CPU capability AVX512", or why there is none.
std::string torch_peer_description();

}  // namespace tierzero::tools
