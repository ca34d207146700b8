// Private to engine/model: the frozen base weights a LoraModel runs on (functional_model.h, LoRA), one copy of
// each parameter in its home, handed out per unit on the device that asks.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"
#include "engine/model/internal/frozen_disk.h"
#include "engine/model/internal/frozen_prefetch.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine {

class FrozenWeights {
 public:
  // Reads every parameter of `model` from `source` in bounded fp32 pieces, casts it to `dtype` and
  // stores it as `placement` says (kDevice: on `device`; kPinnedHost: in a pool of its own, pinned for
  // `device`, checked against placement.pinned_limit_bytes; kNvme: frozen_disk.h's swap files). A
  // parameter two units share (a tied embedding) is kept once in memory, in each unit's record on
  // NVMe. Errors name the tensor, or the swap file and the fix.
  static Result<std::unique_ptr<FrozenWeights>> load(const FunctionalModel& model, ParamSource& source,
                                                     at::ScalarType dtype, at::Device device,
                                                     const FrozenPlacement& placement);
  ~FrozenWeights();

  // Unit u's parameters in model.unit_params(u) order, on `device`: the stored tensors themselves
  // when they are already there; for the CUDA device given to load(), host-resident weights copied
  // ahead through DeviceCopies (frozen_prefetch.h) and NVMe-resident ones read through frozen_disk.h.
  // Throws tierzero::Error when a read fails, or (an internal error) for a device load() was not given.
  std::vector<at::Tensor> unit(size_t u, at::Device device) const;
  // Bytes stored.
  int64_t bytes() const { return bytes_; }
  FrozenHome home() const { return home_; }
  // "on the device", "in pinned host memory", "on NVMe (1 file(s): path)".
  std::string where() const;
  // Pinned host bytes held (the weights when kPinnedHost, the NVMe staging where pinned), and the
  // swap files' bytes on NVMe.
  int64_t pinned_bytes() const;
  int64_t nvme_bytes() const;
  // Bytes of the base's pool, pinned or not: the weights (kPinnedHost) or the NVMe staging halves
  // (kNvme) as engine/layout lists them; else 0.
  int64_t pool_bytes() const;
  // Bytes read from NVMe since the last call.
  uint64_t take_nvme_read_bytes() const;

 private:
  FrozenWeights(FrozenHome home) : home_(home) {}
  // The base's pool: the weights' (kPinnedHost) or the NVMe staging halves' (kNvme); else null.
  const offload::HostTier* pool() const;
  FrozenHome home_;
  std::unique_ptr<offload::HostTier> pool_;  // kPinnedHost: the weights' memory; outlives by_name_
  std::map<std::string, at::Tensor> by_name_;
  std::vector<std::vector<const at::Tensor*>> units_;
  int64_t bytes_ = 0;
  std::unique_ptr<FrozenPrefetch> prefetch_;  // host homes on a CUDA device
  std::unique_ptr<FrozenDisk> disk_;          // kNvme
};

// The adapters LoraModel adds to the base's projections: for the projection whose weight sits at
// weight_index in the unit, scaling · B (A x) on top of `inner`'s result.
class LoraProjector : public Projector {
 public:
  struct Adapter {
    at::Tensor a;  // [r, in]
    at::Tensor b;  // [out, r]
  };
  // `dropout`: PEFT's lora_dropout, applied (training mode) to x before each adapter.
  LoraProjector(const Projector& inner, std::map<size_t, Adapter> adapters, double scaling, double dropout)
      : inner_(inner), adapters_(std::move(adapters)), scaling_(scaling), dropout_(dropout) {}
  at::Tensor project(size_t weight_index, const at::Tensor& x, const at::Tensor& weight,
                     const std::optional<at::Tensor>& bias) const override;

 private:
  const Projector& inner_;
  std::map<size_t, Adapter> adapters_;
  double scaling_;
  double dropout_;
};

}  // namespace tierzero::engine
