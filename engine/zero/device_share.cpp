// The offloaded optimizer's GPU share (device_share.h).
#include "engine/zero/internal/device_share.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

namespace tierzero::engine {

std::vector<bool> device_pieces(std::span<const int64_t> counts, const std::vector<bool>& holdable, double share) {
  std::vector<bool> on_device(counts.size(), false);
  double seen = 0.0, device = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto count = static_cast<double>(counts[i]);
    seen += count;
    // The piece goes to the device when the device's elements then miss the target by less.
    if (holdable[i] && std::abs(device + count - share * seen) < std::abs(device - share * seen)) {
      on_device[i] = true;
      device += count;
    }
  }
  return on_device;
}

bool DevicePieceDone::ran() {
  for (const std::unique_ptr<offload::QueueMark>& mark : marks_)
    if (!mark->ran()) return false;
  return true;
}

void DevicePieceDone::wait() {
  for (const std::unique_ptr<offload::QueueMark>& mark : marks_) mark->wait_host();
}

DeviceShare::DeviceShare(DeviceShareSetup setup) : setup_(std::move(setup)) {
  if (!(setup_.share > 0.0 && setup_.share < 1.0))
    throw Error(invalid_argument("tierzero.gpu_optimizer_share=" + std::to_string(setup_.share) +
                                 " must be in [0, 1) (0: the CPU steps every sub-group)"));
  if (!setup_.layout.compact_master)
    throw Error(
        invalid_argument("tierzero.gpu_optimizer_share needs tierzero.master_weights \"compact\" (the "
                         "device's step is the compact master's)"));
  if (setup_.chunk <= 0 || setup_.chunk % state_layout::kMomentBlock != 0)
    throw Error(internal_error("gpu optimizer share: a chunk of " + std::to_string(setup_.chunk) +
                               " elements is not whole moment blocks"));
  slot_ = state_layout::gpu_share_slot(setup_.layout, static_cast<int>(element_size(setup_.grads)), setup_.chunk);
  for (int q = 0; q < state_layout::kGpuShareQueues; ++q) {
    try {
      slots_.push_back(at::empty({slot_.bytes}, at::TensorOptions().dtype(at::kByte).device(setup_.copies->device())));
    } catch (const c10::Error& e) {
      throw Error(out_of_space(
          "tierzero.gpu_optimizer_share: its " + std::to_string(state_layout::kGpuShareQueues) + " device slots of " +
          format_bytes(static_cast<uint64_t>(slot_.bytes)) + " do not fit on " + setup_.copies->device().str() +
          " (raise tierzero.gpu_memory_limit or set tierzero.gpu_optimizer_share 0): " + e.what_without_backtrace()));
    }
    queues_.push_back(setup_.copies->queue());
  }
}

int64_t DeviceShare::device_bytes() const { return static_cast<int64_t>(slots_.size()) * slot_.bytes; }

DevicePieceDone DeviceShare::submit(const cpu_adam::AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                                    const cpu_adam::AdamBuffers& host) {
  using state_layout::RecordPart;
  const size_t count = host.params_16bit.count;
  const size_t grad_bytes = element_size(host.grads.type);
  const size_t moment_bytes = element_size(host.exp_avg.type);
  const bool blocks = !host.exp_avg_scales.empty();
  if (host.master_residual.size() != count || host.grads.count != count || grad_bytes != element_size(setup_.grads) ||
      static_cast<int64_t>(moment_bytes) != setup_.layout.moment_element_bytes())
    throw Error(internal_error("gpu optimizer share: a piece's buffers do not match the device slots' layout"));
  const auto at = [](const void* base, size_t offset) { return static_cast<const std::byte*>(base) + offset; };
  const auto at_mut = [](void* base, size_t offset) { return static_cast<std::byte*>(base) + offset; };
  std::vector<bool> used(queues_.size(), false);
  for (size_t begin = 0; begin < count; begin += static_cast<size_t>(setup_.chunk)) {
    const size_t n = std::min(count - begin, static_cast<size_t>(setup_.chunk));
    const size_t first_block = begin / cpu_adam::kMomentBlock;
    const size_t block_count = blocks ? cpu_adam::moment_block_count(n) : 0;
    const size_t q = next_++ % queues_.size();
    used[q] = true;
    offload::DeviceQueue& queue = *queues_[q];
    std::byte* slot = static_cast<std::byte*>(slots_[q].data_ptr());
    std::byte* const part[] = {slot + slot_.parts[static_cast<int>(RecordPart::kMaster)],
                               slot + slot_.parts[static_cast<int>(RecordPart::kExpAvg)],
                               slot + slot_.parts[static_cast<int>(RecordPart::kExpAvgSq)],
                               slot + slot_.parts[static_cast<int>(RecordPart::kExpAvgScales)],
                               slot + slot_.parts[static_cast<int>(RecordPart::kExpAvgSqScales)]};
    // The host side of each state the step reads and writes: (device, host, bytes).
    struct Span {
      std::byte* device;
      std::byte* host;
      size_t bytes;
    };
    const std::vector<Span> state = {
        {slot + slot_.weights, at_mut(host.params_16bit.data, 2 * begin), 2 * n},
        {part[0], at_mut(host.master_residual.data(), 2 * begin), 2 * n},
        {part[1], at_mut(host.exp_avg.data, moment_bytes * begin), moment_bytes * n},
        {part[2], at_mut(host.exp_avg_sq.data, moment_bytes * begin), moment_bytes * n},
        {part[3], blocks ? at_mut(host.exp_avg_scales.data(), 4 * first_block) : nullptr, 4 * block_count},
        {part[4], blocks ? at_mut(host.exp_avg_sq_scales.data(), 4 * first_block) : nullptr, 4 * block_count}};
    queue.to_device(slot + slot_.grads, at(host.grads.data, grad_bytes * begin), grad_bytes * n);
    for (const Span& s : state)
      if (s.bytes > 0) queue.to_device(s.device, s.host, s.bytes);
    const cpu_adam::AdamBuffers device{.params = {},
                                       .grads = {slot + slot_.grads, n, host.grads.type},
                                       .exp_avg = {part[1], n, host.exp_avg.type},
                                       .exp_avg_sq = {part[2], n, host.exp_avg_sq.type},
                                       .params16 = {},
                                       .params_16bit = {slot + slot_.weights, n, host.params_16bit.type},
                                       .master_residual = {reinterpret_cast<int16_t*>(part[0]), n},
                                       .params16_rounding = host.params16_rounding,
                                       .exp_avg_scales = {reinterpret_cast<float*>(part[3]), block_count},
                                       .exp_avg_sq_scales = {reinterpret_cast<float*>(part[4]), block_count}};
    // By value: a CPU "device" runs it later, on its queue's thread.
    throw_if_error(queue.launch([kernel = setup_.kernel, hp, step_number, grad_multiplier, device](void* stream) {
      return kernel(hp, step_number, grad_multiplier, device, stream);
    }));
    for (const Span& s : state)
      if (s.bytes > 0) queue.to_host(s.host, s.device, s.bytes);
  }
  std::vector<std::unique_ptr<offload::QueueMark>> marks;
  for (size_t q = 0; q < queues_.size(); ++q)
    if (used[q]) marks.push_back(queues_[q]->mark());
  return DevicePieceDone(std::move(marks));
}

}  // namespace tierzero::engine
