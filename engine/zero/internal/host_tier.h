// The offloaded step's pinned host memory, all of it from offload/'s exact-size pool
// (offload::PinnedHostPool): the engine lists every buffer first (fp32 master, m, v, the gradient
// partition, the gradient staging slots, the 16-bit weights bound for the device, the offloaded
// parameter shard); the total is checked against tierzero.pinned_memory_limit and allocated at
// once, before the first buffer is used. Buffers are LibTorch CPU tensors over the pool's memory
// (from_blob): they must not outlive the HostTier.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tierzero::offload {
class PinnedHostPool;
}

namespace tierzero::engine {

// One buffer of the plan: a flat tensor of `numel` elements of `dtype`, named for errors and logs.
struct PinnedBuffer {
  std::string what;
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
};

class HostTier {
 public:
  // Allocates every buffer of `plan` (names unique; numel 0 allowed) zero-filled, pinned for
  // `device` when it is a CUDA device (huge pages + cudaHostRegister), plain host memory otherwise. `limit_bytes`
  // (tierzero.pinned_memory_limit; 0 = none) caps the total. Throws tierzero::Error naming
  // tierzero.pinned_memory_limit, rank `rank`, the bytes asked (buffer by buffer) and the limit, or
  // the pool's error (MemAvailable, cudaHostRegister).
  static std::unique_ptr<HostTier> create(const std::vector<PinnedBuffer>& plan, uint64_t limit_bytes,
                                          at::Device device, int rank);
  ~HostTier();

  // Bytes create() takes for `plan` (each buffer's footprint in the pool, the total rounded up to a
  // page): what is checked against the limit.
  static uint64_t capacity(const std::vector<PinnedBuffer>& plan);

  // The buffer planned as `what`. Throws tierzero::Error (internal) when none was.
  at::Tensor buffer(const std::string& what) const;
  // Bytes of pinned memory held (the pool's capacity); 0 without a GPU, where nothing is pinned.
  int64_t pinned_bytes() const;
  // Bytes held, pinned or not.
  int64_t bytes() const;
  // The pool's description, for the start-up banner.
  std::string description() const;

 private:
  HostTier() = default;
  std::unique_ptr<offload::PinnedHostPool> pool_;
  std::map<std::string, at::Tensor> buffers_;
};

}  // namespace tierzero::engine
