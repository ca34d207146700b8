// PartitionOptimizer's defaults: the checkpoint streams over state(), whole tensors the optimizer holds
// (in host memory, or on the device through one host copy of a state at a time), and read_master.
#include <ATen/ATen.h>

#include <string>

#include "checkpoint/storage/storage.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {
namespace {

at::Tensor& state_tensor(AdamPartitionState& state, int s) {
  return s == 0 ? state.master : s == 1 ? state.exp_avg : state.exp_avg_sq;
}

}  // namespace

StateReader PartitionOptimizer::state_reader(int s) {
  // The host copy of a device state is made at the first read, so a save holds one at a time.
  return [this, s, host = at::Tensor(), offset = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
    if (!host.defined()) host = state_tensor(state(), s).cpu().contiguous();
    if (offset + out.size() > static_cast<uint64_t>(host.nbytes()))
      return internal_error("optimizer state " + std::to_string(s) + " read past its end (" +
                            std::to_string(host.nbytes()) + " bytes)");
    checkpoint::copy_in_parallel(out, {static_cast<const std::byte*>(host.const_data_ptr()) + offset, out.size()});
    offset += out.size();
    if (offset == static_cast<uint64_t>(host.nbytes())) host = at::Tensor();  // read whole: let it go
    return Status();
  };
}

Status PartitionOptimizer::read_master(int64_t begin, std::span<float> out) {
  const at::Tensor& master = state().master;
  const auto count = static_cast<int64_t>(out.size());
  if (begin < 0 || begin + count > master.numel())
    return internal_error("master weights [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                          ") read past the partition's " + std::to_string(master.numel()));
  at::from_blob(out.data(), {count}, at::kFloat).copy_(master.narrow(0, begin, count));
  return Status();
}

std::vector<StateReader> PartitionOptimizer::stored_readers() { return {}; }

Status PartitionOptimizer::load_stored(const StoredFill&, int64_t) {
  return internal_error("this optimizer holds no encoded state to load as stored (stored_layout())");
}

Status PartitionOptimizer::load_state(const StateFill& fill, int64_t step) {
  AdamPartitionState& st = state();
  for (int s = 0; s < 3; ++s) {
    at::Tensor& target = state_tensor(st, s);
    at::Tensor host = target.is_cpu() && target.is_contiguous()
                          ? target
                          : at::empty_like(target, at::TensorOptions().device(at::kCPU));
    TZ_RETURN_IF_ERROR(fill(s, 0, bytes_of(host)));
    if (!host.is_same(target)) target.copy_(host);
  }
  st.step = step;
  return Status();
}

}  // namespace tierzero::engine
