// Adam with the optimizer state on NVMe: the sub-group pipeline of nvme_offload_adam.h over the
// swap files, through the pinned staging of offload/'s RecordStaging (offload/offload.h).
#include "engine/zero/internal/nvme_offload_adam.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/param_loading.h"
#include "offload/offload.h"

namespace tierzero::engine {
namespace {

at::ScalarType record_part_dtype(int s, at::ScalarType state_dtype, bool compact_master) {
  switch (s) {
    case 0: return compact_master ? at::kShort : at::kFloat;
    case 1: return state_dtype;
    case 2: return state_dtype == at::kChar ? at::kByte : state_dtype;
    default: return at::kFloat;
  }
}

// Byte offset of part s (0..4; 5: the record's end) in a record of `count` elements.
int64_t record_part_offset(int s, int64_t count, at::ScalarType state_dtype, bool compact_master) {
  int64_t offset = 0;
  for (int i = 0; i < s; ++i) {
    const int64_t n = i < 3                        ? count
                      : state_dtype == at::kChar ? static_cast<int64_t>(cpu_adam::moment_block_count(count))
                                                  : 0;
    offset += n * static_cast<int64_t>(c10::elementSize(record_part_dtype(i, state_dtype, compact_master)));
  }
  return offset;
}

// A pinned buffer (bytes; staging buffer `staging` of the RecordStaging, which keeps the transfers in
// flight on it) and what it holds: sub-group `holds`'s record (fp32 master, then exp_avg and
// exp_avg_sq in the state dtype, `count` elements each, back to back), whether that record is newer
// than the swap file's (`dirty`: kept for the next pass, not written), and the copy to the device
// that still reads it (fp32 compute weights sent from the buffer itself).
struct Slot {
  at::Tensor buffer;
  size_t staging = 0;
  int64_t holds = -1;
  bool dirty = false;
  std::shared_ptr<CopyDone> copy;
};

class NvmeAdam final : public NvmeOffloadAdam {
 public:
  explicit NvmeAdam(NvmeOffloadAdamSetup setup) : setup_(std::move(setup)) {
    const NvmeOptimizerOptions& nvme = setup_.nvme;
    if (setup_.sub_group_numel < 1)
      throw Error(invalid_argument("zero_optimization.sub_group_size=" + std::to_string(setup_.sub_group_numel) +
                                   " must be at least 1"));
    if (nvme.buffer_count < 1 || setup_.buffers.size() != static_cast<size_t>(nvme.buffer_count))
      throw Error(invalid_argument("zero_optimization.offload_optimizer.buffer_count=" +
                                   std::to_string(nvme.buffer_count) + " must be at least 1"));
    numel_ = setup_.partitioner->partition_numel();
    slot_numel_ = std::max<int64_t>(1, std::min(setup_.sub_group_numel, numel_));
    groups_ = (numel_ + slot_numel_ - 1) / slot_numel_;
    if (setup_.state_dtype != at::kFloat && setup_.state_dtype != at::kBFloat16 && setup_.state_dtype != at::kChar)
      throw Error(internal_error("nvme optimizer: moments must be fp32, bf16 or 8-bit"));
    if (setup_.compact.moments_8bit != (setup_.state_dtype == at::kChar))
      throw Error(internal_error("nvme optimizer: 8-bit moments and the state dtype disagree"));
    if (setup_.compact.moments_8bit && slot_numel_ < numel_ &&
        slot_numel_ % static_cast<int64_t>(cpu_adam::kMomentBlock) != 0)
      throw Error(invalid_argument("zero_optimization.sub_group_size=" + std::to_string(setup_.sub_group_numel) +
                                   " must be a multiple of " + std::to_string(cpu_adam::kMomentBlock) +
                                   " with tierzero.optimizer_state_dtype \"int8\" (8-bit moments are scaled in "
                                   "blocks of that many elements); round it to a multiple"));
    if (setup_.compact.compact_master &&
        (!setup_.compact.hi.defined() || setup_.compact.hi.scalar_type() != at::kBFloat16 ||
         setup_.compact.hi.numel() != numel_))
      throw Error(internal_error("nvme optimizer: a compact master needs the partition's bf16 weights in host memory"));
    in_memory_ = std::clamp<int64_t>(setup_.records_in_memory, 0, groups_);
    if (in_memory_ > 0 && (!setup_.memory_records.defined() ||
                           setup_.memory_records.nbytes() < static_cast<size_t>(in_memory_) * record_bytes(slot_numel_)))
      throw Error(internal_error("nvme optimizer: the pinned block of records kept in memory is too small"));
    for (const at::Tensor& buffer : setup_.buffers)
      if (buffer.scalar_type() != at::kByte || static_cast<uint64_t>(buffer.numel()) != record_bytes(slot_numel_))
        throw Error(internal_error("nvme optimizer: a pinned buffer is not one record of " +
                                   std::to_string(slot_numel_) + " elements (" +
                                   std::to_string(record_bytes(slot_numel_)) + " bytes)"));
    std::vector<std::span<std::byte>> staging_buffers;
    for (const at::Tensor& buffer : setup_.buffers) {
      slots_.push_back({.buffer = buffer, .staging = slots_.size(), .holds = -1, .dirty = false, .copy = nullptr});
      staging_buffers.push_back({static_cast<std::byte*>(buffer.data_ptr()), buffer.nbytes()});
    }
    staging_ =
        value_or_throw(offload::RecordStaging::create(staging_buffers, {.paths = nvme.paths,
                                                                        .io = nvme.io,
                                                                        .rank = setup_.rank,
                                                                        .records = groups_ - in_memory_,
                                                                        .record_bytes = record_bytes(slot_numel_),
                                                                        .role = kOptimizerSwap,
                                                                        .first_named = in_memory_}));
    write_initial_state();
    traffic_ = {};  // a step's traffic, not the set-up's
  }

  double grad_sq_norm(const at::Tensor& grad) override { return host_grad_sq_norm(*setup_.adam, grad); }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress, GradsFinal* grads_final) override {
    run(grad, grad_multiplier, lr, compute_partition, progress, grads_final);
  }

  // step(), and with `progress` each sub-group published once its weights are written or queued.
  // The pass starts at the end of the partition whose records the buffers still hold (the last pass's
  // final buffer_count sub-groups), so those are neither written after the last pass nor read for
  // this one; its own final buffer_count sub-groups stay in the buffers the same way. Front to back,
  // each sub-group is published as it finishes; back to front, the partition is published at the
  // end (the readers following behind need it front first). With `grads_final` (inside the backward)
  // the pass runs back to front, streamed records first, then the records kept in memory, each
  // sub-group once its gradients are final.
  void run(const at::Tensor& grad, double grad_multiplier, double lr, const at::Tensor& compute_partition,
           StepProgress* progress, GradsFinal* grads_final) {
    for (PartitionWrite& write : pending_) write.done->wait_host();  // last step's: params16 is rewritten
    pending_.clear();
    for (Slot& slot : slots_) slot.copy = nullptr;
    traffic_.step_written_bytes = 0;
    write_back_materialised();
    const at::Tensor host_grad = grad.is_cpu() && grad.is_contiguous() ? grad : grad.cpu().contiguous();
    const SixteenBitOutput out16 =
        sixteen_bit_output(compute_partition, setup_.params16, numel_, "nvme optimizer", setup_.sink);
    if (setup_.compact.compact_master && out16.in_place &&
        out16.out.const_data_ptr() != setup_.compact.hi.const_data_ptr())
      throw Error(internal_error("nvme optimizer: the compact master's bf16 half is not the compute partition"));
    const cpu_adam::AdamHyperParams hp = cpu_adam_hyper_params(setup_.config, lr);
    // Inside the backward the pass always runs back to front: records the last pass left unwritten
    // in the buffers at the front would be visited last, after their buffers were taken.
    if (grads_final != nullptr && !resident_at_back()) write_resident();
    backward_ = grads_final != nullptr || resident_at_back();
    const int64_t streamed = groups_ - in_memory_;
    if (streamed > 0) read_ahead(0);
    if (grads_final == nullptr) {
      // The records kept in memory first, front to back: the partition's first elements, published
      // as they finish.
      for (int64_t k = 0; k < in_memory_; ++k)
        step_memory_group(k, hp, host_grad, out16, grad_multiplier, compute_partition, progress);
    }
    const auto kept = static_cast<int64_t>(slots_.size());
    for (int64_t position = 0; position < streamed; ++position) {
      read_ahead(position);
      const int64_t k = group_at(position);
      Slot& slot = slot_of(k);
      wait_read(slot);
      if (grads_final != nullptr) grads_final->wait_from(k * slot_numel_);
      const size_t queued = pending_.size();
      step_group(k, slot.buffer, &slot, hp, host_grad, out16, grad_multiplier, compute_partition);
      if (progress != nullptr && !backward_)
        progress->publish(k * slot_numel_ + count_of(k),
                          std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
      if (position >= streamed - kept) {
        slot.dirty = true;  // the next pass starts here
      } else {
        write_behind(k);
      }
    }
    if (grads_final != nullptr) {
      // Inside the backward, the records kept in memory (the partition's first elements) come last.
      for (int64_t k = in_memory_; k-- > 0;) {
        grads_final->wait_from(k * slot_numel_);
        step_memory_group(k, hp, host_grad, out16, grad_multiplier, compute_partition, nullptr);
      }
    }
    if (progress != nullptr && backward_) progress->publish(numel_, pending_);
    finish_writes();
    ++state_.step;
    last_copy_seconds_ = 0.0;
    if (setup_.time_copies) {
      for (PartitionWrite& write : pending_) {
        write.done->wait_host();
        last_copy_seconds_ += write.done->seconds();
      }
    }
    traffic_.step_read_bytes = read_since_step_;
    read_since_step_ = 0;
  }

  // step_group for sub-group k, whose record is kept in memory; with `progress`, publishes the
  // partition up to its end with the copies it queued.
  void step_memory_group(int64_t k, const cpu_adam::AdamHyperParams& hp, const at::Tensor& host_grad,
                         const SixteenBitOutput& out16, double grad_multiplier, const at::Tensor& compute_partition,
                         StepProgress* progress) {
    const size_t queued = pending_.size();
    step_group(k, memory_record(k), nullptr, hp, host_grad, out16, grad_multiplier, compute_partition);
    if (progress != nullptr)
      progress->publish(k * slot_numel_ + count_of(k),
                        std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
  }

  // Adam on sub-group k, whose record is `record` (a pinned buffer: the slot `slot`, or the block
  // kept in memory), then its compute weights on their way.
  void step_group(int64_t k, const at::Tensor& record, Slot* slot, const cpu_adam::AdamHyperParams& hp,
                  const at::Tensor& host_grad, const SixteenBitOutput& out16, double grad_multiplier,
                  const at::Tensor& compute_partition) {
    const bool compact = setup_.compact.compact_master;
    const int64_t begin = k * slot_numel_;
    const int64_t count = count_of(k);
    const cpu_adam::Elements grads = tensor_elements(host_grad, begin, count);
    const at::Tensor window = out16.sink != nullptr ? out16.sink->lend(begin, count) : at::Tensor();
    const at::Tensor master = record_part(record, 0, count);
    cpu_adam::AdamBuffers buffers{.params = {},
                                  .grads = {grads.data, grads.count, grads.type},
                                  .exp_avg = moment_elements(record_part(record, 1, count), 0, count),
                                  .exp_avg_sq = moment_elements(record_part(record, 2, count), 0, count),
                                  .params16 = {},
                                  .params_16bit = {},
                                  .master_residual = {},
                                  .params16_rounding = setup_.params16_rounding,
                                  .exp_avg_scales = moment_scales(record_part(record, 3, count), 0, count),
                                  .exp_avg_sq_scales = moment_scales(record_part(record, 4, count), 0, count)};
    if (compact) {
      buffers.params_16bit = tensor_elements(setup_.compact.hi, begin, count);
      buffers.master_residual = {static_cast<int16_t*>(master.data_ptr()), static_cast<size_t>(count)};
    } else {
      buffers.params = {master.data_ptr<float>(), static_cast<size_t>(count)};
      if (out16.sixteen_bit)
        buffers.params16 =
            window.defined() ? tensor_elements(window, 0, count) : tensor_elements(out16.out, begin, count);
    }
    throw_if_error(setup_.adam->step(hp, state_.step + 1, static_cast<float>(grad_multiplier), buffers));
    if (out16.sink != nullptr) {  // fp32 compute weights: the master's new values, from the record
      if (compact) {
        std::memcpy(window.data_ptr(), static_cast<const std::byte*>(setup_.compact.hi.const_data_ptr()) + begin * 2,
                    window.nbytes());
      } else if (!out16.sixteen_bit) {
        std::memcpy(window.data_ptr(), master.const_data_ptr(), window.nbytes());
      }
      pending_.push_back(out16.sink->send(begin, count));
    } else if (!out16.in_place) {
      send_compute_weights(record, slot, out16.sixteen_bit, begin, count, compute_partition);
    }
  }

  AdamPartitionState& state() override {
    if (materialised_) return state_;
    write_resident();
    backward_ = false;
    at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int s = 0; s < 3; ++s) *states[s] = at::empty({numel_}, at::TensorOptions().dtype(checkpoint_dtype(s)));
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = k < in_memory_ ? memory_record(k) : read_record(k);
      for (int s = 0; s < 3; ++s) {
        at::Tensor out = states[s]->narrow(0, k * slot_numel_, count_of(k));
        throw_if_error(convert_out(record, k, s, 0, count_of(k),
                                   {static_cast<std::byte*>(out.data_ptr()), static_cast<size_t>(out.nbytes())}));
      }
    }
    materialised_ = true;
    return state_;
  }

  int64_t step_count() override { return state_.step; }

  StateReader state_reader(int s) override {
    write_back_materialised();  // a state() copy changed in place is what is saved
    write_resident();           // the records the buffers kept, before the reads take the buffers
    if (converts(s)) {  // a sub-group's record at a time, converted to fp32
      return chunked_state_reader(numel_, sizeof(float), slot_numel_,
                                  [this, s](int64_t begin, int64_t count, std::span<std::byte> out) -> Status {
                                    try {
                                      const int64_t k = begin / slot_numel_;
                                      const at::Tensor record = k < in_memory_ ? memory_record(k) : read_record(k);
                                      return convert_out(record, k, s, 0, count, out);
                                    } catch (const Error& e) {
                                      return e.status();
                                    }
                                  });
    }
    return [this, s, k = int64_t{0}, offset = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
      try {
        for (size_t filled = 0; filled < out.size();) {
          if (k >= groups_) return internal_error("nvme optimizer: state " + std::to_string(s) + " read past its end");
          const int64_t count = count_of(k);
          if (offset == 0 && k >= in_memory_) {  // sub-group k's part: read (or read ahead before), then k+1's queued
            if (staging_->reading(slot_of(k).staging) != k - in_memory_) read_part(k, s);
            TZ_RETURN_IF_ERROR(staging_->wait_read(slot_of(k).staging));
            if (k + 1 < groups_ && slots_.size() >= 2) read_part(k + 1, s);
          }
          const at::Tensor part = record_part(k < in_memory_ ? memory_record(k) : slot_of(k).buffer, s, count);
          const uint64_t n = std::min<uint64_t>(part.nbytes() - offset, out.size() - filled);
          std::memcpy(out.data() + filled, static_cast<const std::byte*>(part.const_data_ptr()) + offset, n);
          filled += n;
          offset += n;
          if (offset == static_cast<uint64_t>(part.nbytes())) {
            ++k;
            offset = 0;
          }
        }
        return Status();
      } catch (const Error& e) {
        return e.status();
      }
    };
  }

  Status read_master(int64_t begin, std::span<float> out) override {
    try {
      write_back_materialised();  // a state() copy changed in place is what is read
      write_resident();           // the records the buffers kept, before a read takes a buffer
      for (size_t done = 0; done < out.size();) {
        const int64_t e = begin + static_cast<int64_t>(done);
        const int64_t k = e / slot_numel_;
        if (e < 0 || k >= groups_)
          return internal_error("nvme optimizer: master weight " + std::to_string(e) + " read past the partition");
        if (k >= in_memory_ && master_cached_ != k) {  // sub-group k's master part, from its start (O_DIRECT)
          read_part(k, 0);
          TZ_RETURN_IF_ERROR(staging_->wait_read(slot_of(k).staging));
          master_cached_ = k;
        }
        const int64_t offset = e - k * slot_numel_;
        const auto n =
            static_cast<size_t>(std::min<int64_t>(count_of(k) - offset, static_cast<int64_t>(out.size() - done)));
        TZ_RETURN_IF_ERROR(convert_out(k < in_memory_ ? memory_record(k) : slot_of(k).buffer, k, 0, offset,
                                       static_cast<int64_t>(n), std::as_writable_bytes(out.subspan(done, n))));
        done += n;
      }
      return Status();
    } catch (const Error& e) {
      return e.status();
    }
  }

  Status load_state(const StateFill& fill, int64_t step) override {
    try {
      state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();  // a state() copy is replaced too
      materialised_ = false;
      for (Slot& slot : slots_) slot.dirty = false;  // replaced too
      Status status;
      std::vector<std::byte> scratch;
      for (int64_t k = 0; k < groups_ && status.ok(); ++k) {
        const at::Tensor record = k < in_memory_ ? memory_record(k) : claimed(k);
        const int64_t count = count_of(k);
        for (int s = 0; s < 3 && status.ok(); ++s) {
          scratch.resize(static_cast<size_t>(count) * c10::elementSize(checkpoint_dtype(s)));
          status = fill(s, k * slot_numel_, scratch);
          if (status.ok()) convert_in(record, k, s, 0, count, scratch);
        }
        if (status.ok() && k >= in_memory_) write_behind(k);
      }
      finish_writes();
      traffic_ = {};  // a step's traffic, not the load's
      if (status.ok()) {
        state_.step = step;
      } else {  // a record filled in part is in a buffer, not in its file
        for (Slot& slot : slots_) slot.holds = -1;
      }
      return status;
    } catch (const Error& e) {
      return e.status();
    }
  }

  int64_t pinned_bytes() const override {
    int64_t bytes = setup_.params16.defined() && setup_.params16.is_pinned() ? setup_.params16.nbytes() : 0;
    if (in_memory_ > 0 && setup_.memory_records.is_pinned()) bytes += setup_.memory_records.nbytes();
    for (const Slot& slot : slots_)
      if (slot.buffer.is_pinned()) bytes += slot.buffer.nbytes();
    return bytes;
  }

  double last_copy_seconds() const override { return last_copy_seconds_; }

  std::vector<PartitionWrite> device_writes() const override { return pending_; }

  std::string placement() const override {
    return "nvme (" +
           (staging_->has_files() ? staging_->describe() : std::string("no file: every record in pinned memory")) +
           "; cpu " + cpu_adam::simd_target_name() + ", " + std::to_string(setup_.adam->threads()) + " threads)";
  }

  std::string state_placement() const override {
    const uint64_t in_memory = in_memory_bytes();
    uint64_t total = 0;
    for (int64_t k = 0; k < groups_; ++k) total += record_bytes(count_of(k));
    char per_param[32];
    std::snprintf(per_param, sizeof(per_param), "%.2f",
                  numel_ > 0 ? static_cast<double>(total) / static_cast<double>(numel_) : 0.0);
    return std::to_string(in_memory_) + " of " + std::to_string(groups_) + " sub-group records in pinned memory (" +
           format_bytes(in_memory) + "), " + std::to_string(groups_ - in_memory_) + " on NVMe (" +
           format_bytes(total - in_memory) + "); " +
           (setup_.compact.compact_master ? "compact master (int16 residual; its bf16 half the 16-bit weights)"
                                          : "fp32 master") +
           ", " +
           (setup_.compact.moments_8bit ? std::string("8-bit moments")
                                        : std::string(c10::toString(setup_.state_dtype)) + " moments") +
           ": " + per_param + " bytes/param";
  }

  NvmeTraffic traffic() const override {
    NvmeTraffic traffic = traffic_;
    traffic.resident_bytes = staging_->file_bytes();
    return traffic;
  }

 private:
  // Part s of a record: 0 the fp32 master (compact: the int16 residual), 1 exp_avg, 2 exp_avg_sq (the
  // state dtype; 8-bit: int8 and uint8 codes), 3 and 4 their fp32 block scales (8-bit only, else empty).
  at::ScalarType part_dtype(int s) const {
    return record_part_dtype(s, setup_.state_dtype, setup_.compact.compact_master);
  }
  // The dtype state s is checkpointed (and materialised) in.
  at::ScalarType checkpoint_dtype(int s) const {
    return s == 0 ? at::kFloat : checkpoint_moment_dtype(setup_.state_dtype);
  }
  bool converts(int s) const { return s == 0 ? setup_.compact.compact_master : setup_.compact.moments_8bit; }
  uint64_t record_bytes(int64_t count) const {
    return static_cast<uint64_t>(nvme_record_bytes(count, setup_.state_dtype, setup_.compact.compact_master));
  }
  // Byte offset of part s in a record of `count` elements.
  int64_t part_offset(int s, int64_t count) const {
    return record_part_offset(s, count, setup_.state_dtype, setup_.compact.compact_master);
  }
  // Part s of the record of `count` elements held in `buffer`, as a typed view of it.
  at::Tensor record_part(const at::Tensor& buffer, int s, int64_t count) const {
    const int64_t bytes = part_offset(s + 1, count) - part_offset(s, count);
    return buffer.narrow(0, part_offset(s, count), bytes).view(part_dtype(s));
  }
  // Sub-group k's record in the pinned block (k < in_memory_).
  at::Tensor memory_record(int64_t k) const {
    const auto stride = static_cast<int64_t>(record_bytes(slot_numel_));
    return setup_.memory_records.narrow(0, k * stride, stride);
  }
  uint64_t in_memory_bytes() const {
    uint64_t bytes = 0;
    for (int64_t k = 0; k < in_memory_; ++k) bytes += record_bytes(count_of(k));
    return bytes;
  }
  int64_t count_of(int64_t k) const { return std::min(slot_numel_, numel_ - k * slot_numel_); }
  // The buffer of streamed sub-group k (k >= in_memory_).
  Slot& slot_of(int64_t k) {
    return slots_[static_cast<size_t>((k - in_memory_) % static_cast<int64_t>(slots_.size()))];
  }

  // Elements [offset, offset + n) of sub-group k's state s, from its record `record`, into `out` in
  // the checkpoint dtype (a compact master joined with its bf16 half, 8-bit moments decoded — then
  // offset must be 0).
  Status convert_out(const at::Tensor& record, int64_t k, int s, int64_t offset, int64_t n, std::span<std::byte> out) {
    try {
      const int64_t count = count_of(k);
      const at::Tensor part = record_part(record, s, count);
      if (!converts(s)) {
        std::memcpy(out.data(), static_cast<const std::byte*>(part.const_data_ptr()) + offset * part.element_size(),
                    static_cast<size_t>(n * part.element_size()));
      } else if (s == 0) {
        throw_if_error(cpu_adam::join_master(
            {static_cast<const uint16_t*>(setup_.compact.hi.const_data_ptr()) + k * slot_numel_ + offset,
             static_cast<size_t>(n)},
            {part.const_data_ptr<int16_t>() + offset, static_cast<size_t>(n)},
            {reinterpret_cast<float*>(out.data()), static_cast<size_t>(n)}));
      } else {
        if (offset != 0) return internal_error("nvme optimizer: 8-bit moments read from inside a block");
        decode_moment_range(part, record_part(record, s + 2, count), 0,
                            {reinterpret_cast<float*>(out.data()), static_cast<size_t>(n)});
      }
      return Status();
    } catch (const Error& e) {
      return e.status();
    }
  }

  // The inverse: `in` (checkpoint dtype) into elements [offset, offset + n) of sub-group k's state s.
  void convert_in(const at::Tensor& record, int64_t k, int s, int64_t offset, int64_t n,
                  std::span<const std::byte> in) {
    const int64_t count = count_of(k);
    const at::Tensor part = record_part(record, s, count);
    const std::span<const float> values(reinterpret_cast<const float*>(in.data()), static_cast<size_t>(n));
    if (!converts(s)) {
      std::memcpy(static_cast<std::byte*>(part.data_ptr()) + offset * part.element_size(), in.data(),
                  static_cast<size_t>(n * part.element_size()));
    } else if (s == 0) {
      throw_if_error(cpu_adam::split_master(
          values,
          {static_cast<uint16_t*>(setup_.compact.hi.data_ptr()) + k * slot_numel_ + offset, static_cast<size_t>(n)},
          {part.data_ptr<int16_t>() + offset, static_cast<size_t>(n)}));
    } else {
      if (offset != 0) throw Error(internal_error("nvme optimizer: 8-bit moments written from inside a block"));
      encode_moment_range(values, part, record_part(record, s + 2, count), 0);
    }
  }

  // Sub-group k's whole record read into its buffer (k >= in_memory_), unless the buffer holds it.
  at::Tensor read_record(int64_t k) {
    Slot& slot = slot_of(k);
    if (slot.holds != k) {
      claim(slot, k);
      staging_->read(slot.staging, k - in_memory_, 0, record_bytes(count_of(k)));
      read_since_step_ += record_bytes(count_of(k));
    }
    wait_read(slot);
    return slot.buffer;
  }

  // Sub-group k's buffer, claimed for a record about to be filled (k >= in_memory_).
  at::Tensor claimed(int64_t k) {
    Slot& slot = slot_of(k);
    claim(slot, k);
    return slot.buffer;
  }

  // The sub-group the pass visits at `position` (0 first), in the pass's direction.
  // Positions run over the streamed records only (in_memory_ .. groups_ - 1).
  int64_t group_at(int64_t position) const { return backward_ ? groups_ - 1 - position : in_memory_ + position; }

  // Whether the buffers hold the records of the partition's last sub-groups rather than its first
  // (then the next pass runs back to front). With one sub-group, or none held, front to back.
  bool resident_at_back() const {
    int64_t lowest = groups_;
    for (const Slot& slot : slots_)
      if (slot.holds >= 0) lowest = std::min(lowest, slot.holds);
    return lowest < groups_ && lowest > in_memory_;
  }

  // Waits for `slot`'s read; on failure the slot holds nothing (its bytes are not the record).
  void wait_read(Slot& slot) {
    Status status = staging_->wait_read(slot.staging);
    if (!status.ok()) {
      slot.holds = -1;
      throw Error(std::move(status));
    }
  }

  // Writes the records the buffers kept newer than the swap files, and waits for them; the buffers
  // still hold them (a pass may start on them).
  void write_resident() {
    for (Slot& slot : slots_)
      if (slot.dirty) write_behind(slot.holds);
    finish_writes();
  }

  // Makes `slot` free for sub-group k: the transfers that used it done, no copy reading it.
  void claim(Slot& slot, int64_t k) {
    master_cached_ = -1;  // whatever buffer it was in may be taken
    if (slot.dirty && slot.holds != k)
      throw Error(internal_error("nvme optimizer: sub-group " + std::to_string(slot.holds) +
                                 "'s record would be dropped unwritten"));
    throw_if_error(staging_->wait_read(slot.staging));  // only a checkpoint read left unfinished has one here
    throw_if_error(staging_->wait_write(slot.staging));
    if (slot.copy) slot.copy->wait_host();
    slot.copy = nullptr;
    slot.holds = k;
  }

  // Queues the read of the sub-group the pass visits at `position`, and with pipeline_read those
  // after it that have a buffer whose last write was queued before its step (up to buffer_count - 2
  // ahead, at least 1); a buffer already holding its sub-group's record is not read again.
  void read_ahead(int64_t position) {
    const auto buffers = static_cast<int64_t>(slots_.size());
    const int64_t ahead = setup_.nvme.pipeline_read && buffers >= 2 ? std::max<int64_t>(1, buffers - 2) : 0;
    for (int64_t p = position; p < groups_ - in_memory_ && p <= position + ahead; ++p) {
      const int64_t j = group_at(p);
      Slot& slot = slot_of(j);
      if (slot.holds == j) continue;
      claim(slot, j);
      staging_->read(slot.staging, j - in_memory_, 0, record_bytes(count_of(j)));
      read_since_step_ += record_bytes(count_of(j));
    }
  }

  // Queues the read of state s's part of sub-group k's record into its slot, from the part's start
  // rounded down to 4096 bytes (O_DIRECT); the slot then holds no whole record (a step reads again).
  void read_part(int64_t k, int s) {
    Slot& slot = slot_of(k);
    claim(slot, k);
    slot.holds = -1;
    const int64_t count = count_of(k);
    const auto begin = static_cast<uint64_t>(part_offset(s, count));
    const uint64_t end = begin + static_cast<uint64_t>(count) * c10::elementSize(part_dtype(s));
    const uint64_t aligned = begin / SwapFiles::kRecordAlignment * SwapFiles::kRecordAlignment;
    staging_->read(slot.staging, k - in_memory_, aligned, end);
  }

  // Queues the write of sub-group k's record; waits for it unless pipeline_write.
  void write_behind(int64_t k) {
    Slot& slot = slot_of(k);
    slot.dirty = false;
    staging_->write(slot.staging, k - in_memory_, record_bytes(count_of(k)));
    traffic_.step_written_bytes += record_bytes(count_of(k));
    if (!setup_.nvme.pipeline_write) throw_if_error(staging_->wait_write(slot.staging));
  }

  // Waits for every write queued; the buffers keep their records (a read of the same sub-group
  // into the same buffer is skipped).
  void finish_writes() {
    if (!staging_->has_files()) return;
    Status first;
    for (Slot& slot : slots_) {
      Status status = staging_->wait_write(slot.staging);
      if (!status.ok()) slot.holds = -1;
      if (first.ok()) first = status;
    }
    throw_if_error(first);
  }

  // The updated compute weights of elements [begin, begin + count), as the CPU-offloaded optimizer
  // sends them: the 16-bit staging copy or the fp32 master (then from the slot, which the copy holds).
  void send_compute_weights(const at::Tensor& record, Slot* slot, bool sixteen_bit, int64_t begin, int64_t count,
                            const at::Tensor& compute) {
    const void* src = setup_.compact.compact_master
                          ? static_cast<const std::byte*>(setup_.compact.hi.const_data_ptr()) + begin * 2
                      : sixteen_bit ? static_cast<const std::byte*>(setup_.params16.const_data_ptr()) +
                                          begin * setup_.params16.element_size()
                                    : record.const_data_ptr();
    at::Tensor dst = compute.narrow(0, begin, count);
    if (dst.is_cpu()) {
      std::memcpy(dst.data_ptr(), src, dst.nbytes());
      return;
    }
    std::shared_ptr<CopyDone> done = setup_.copies->to_device(dst, src);
    if (!sixteen_bit && slot != nullptr) slot->copy = done;
    pending_.push_back({begin, count, std::move(done)});
  }

  // The first write: master weights from the source, zero moments.
  void write_initial_state() {
    std::vector<PartitionRun> runs;  // this rank's, in partition order, with their parameter's index
    std::vector<const std::string*> names;
    const std::vector<ParamSpec> params = all_params(*setup_.model);
    for (const ParamSpec& spec : params)
      for (const PartitionRun& run : setup_.partitioner->locate(spec.name, 0, shape_numel(spec.shape)))
        if (run.rank == setup_.partition_rank) {
          runs.push_back(run);
          names.push_back(&spec.name);
        }
    at::Tensor scratch = setup_.compact.compact_master ? at::empty({slot_numel_}, at::kFloat) : at::Tensor();
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = k < in_memory_ ? memory_record(k) : claimed(k);
      record.zero_();
      const int64_t begin = k * slot_numel_;
      const int64_t end = begin + count_of(k);
      const at::Tensor master =
          setup_.compact.compact_master ? scratch.narrow(0, 0, end - begin).zero_() : record_part(record, 0, end - begin);
      for (size_t r = 0; r < runs.size(); ++r) {
        const int64_t lo = std::max(begin, runs[r].partition_offset);
        const int64_t hi = std::min(end, runs[r].partition_offset + runs[r].numel);
        if (lo >= hi) continue;
        load_param_range(*setup_.source, *names[r], runs[r].param_offset + (lo - runs[r].partition_offset),
                         master.narrow(0, lo - begin, hi - lo));
      }
      if (setup_.compact.compact_master)
        convert_in(record, k, 0, 0, end - begin, {static_cast<const std::byte*>(master.const_data_ptr()),
                                                  static_cast<size_t>(master.nbytes())});
      if (k >= in_memory_) write_behind(k);
    }
    finish_writes();
  }

  // After state(): the (possibly changed) whole tensors go back to NVMe and are freed.
  void write_back_materialised() {
    if (!materialised_) return;
    const at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int64_t k = 0; k < groups_; ++k) {
      const at::Tensor record = k < in_memory_ ? memory_record(k) : claimed(k);
      const int64_t count = count_of(k);
      for (int s = 0; s < 3; ++s) {
        const at::Tensor in = states[s]->narrow(0, k * slot_numel_, count);
        convert_in(record, k, s, 0, count,
                   {static_cast<const std::byte*>(in.const_data_ptr()), static_cast<size_t>(in.nbytes())});
      }
      if (k >= in_memory_) write_behind(k);
    }
    finish_writes();
    state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
    materialised_ = false;
  }

  NvmeOffloadAdamSetup setup_;
  int64_t numel_ = 0;       // this rank's partition
  int64_t slot_numel_ = 0;  // elements of a full sub-group
  int64_t groups_ = 0;
  int64_t in_memory_ = 0;   // records [0, in_memory_) live in setup_.memory_records
  std::unique_ptr<offload::RecordStaging> staging_;  // the I/O of the slots' buffers (setup_.buffers outlive it)
  std::vector<Slot> slots_;
  AdamPartitionState state_;  // step always; the tensors only while materialised_
  bool materialised_ = false;
  int64_t master_cached_ = -1;  // the sub-group whose master part read_master() last read into its slot
  bool backward_ = false;                // this pass visits the sub-groups last to first
  std::vector<PartitionWrite> pending_;  // the last step's copies to the device
  double last_copy_seconds_ = 0.0;
  NvmeTraffic traffic_;
  uint64_t read_since_step_ = 0;
};

}  // namespace

int64_t nvme_record_bytes(int64_t numel, at::ScalarType state_dtype, bool compact_master) {
  return record_part_offset(5, numel, state_dtype, compact_master);
}

std::unique_ptr<NvmeOffloadAdam> make_nvme_offload_adam(NvmeOffloadAdamSetup setup) {
  return std::make_unique<NvmeAdam>(std::move(setup));
}

}  // namespace tierzero::engine
