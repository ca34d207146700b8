// Adam with the optimizer state on NVMe: the sub-group pipeline of nvme_offload_adam.h over the
// swap files of swap_files.h.
#include "engine/zero/internal/nvme_offload_adam.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/swap_files.h"
#include "engine/zero/internal/param_loading.h"

namespace tierzero::engine {
namespace {

// A pinned buffer (bytes) and what it holds: sub-group `holds`'s record (fp32 master, then exp_avg
// and exp_avg_sq in the state dtype, `count` elements each, back to back), whether that record is
// newer than the swap file's (`dirty`: kept for the next pass, not written), the transfers in flight
// on it, and the copy to the device that still reads it (fp32 compute weights sent from the buffer
// itself).
struct Slot {
  at::Tensor buffer;
  int64_t holds = -1;
  bool dirty = false;
  SwapTransfer read;
  SwapTransfer write;
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
    if (setup_.state_dtype != at::kFloat && setup_.state_dtype != at::kBFloat16)
      throw Error(internal_error("nvme optimizer: moments must be fp32 or bf16"));
    for (const at::Tensor& buffer : setup_.buffers)
      if (buffer.scalar_type() != at::kByte || static_cast<uint64_t>(buffer.numel()) != record_bytes(slot_numel_))
        throw Error(internal_error("nvme optimizer: a pinned buffer is not one record of " +
                                   std::to_string(slot_numel_) + " elements (" +
                                   std::to_string(record_bytes(slot_numel_)) + " bytes)"));
    io_ = value_or_throw(nvme::IoEngine::create(nvme.io));
    for (const at::Tensor& buffer : setup_.buffers) {
      throw_if_error(io_->register_buffer(buffer.data_ptr(), buffer.nbytes()));
      slots_.push_back({.buffer = buffer, .holds = -1, .dirty = false, .read = {}, .write = {}, .copy = nullptr});
    }
    swap_ = value_or_throw(SwapFiles::create(*io_, nvme.paths, setup_.rank, groups_, record_bytes(slot_numel_)));
    write_initial_state();
    traffic_ = {};  // a step's traffic, not the set-up's
  }

  ~NvmeAdam() override {
    for (Slot& slot : slots_) {  // nothing may still read or write the buffers; errors were reported
      (void)swap_->wait(slot.read);
      (void)swap_->wait(slot.write);
      (void)io_->unregister_buffer(slot.buffer.data_ptr());
    }
  }

  double grad_sq_norm(const at::Tensor& grad) override { return host_grad_sq_norm(*setup_.adam, grad); }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress) override {
    run(grad, grad_multiplier, lr, compute_partition, progress);
  }

  // step(), and with `progress` each sub-group published once its weights are written or queued.
  // The pass starts at the end of the partition whose records the buffers still hold (the last pass's
  // final buffer_count sub-groups), so those are neither written after the last pass nor read for
  // this one; its own final buffer_count sub-groups stay in the buffers the same way. Front to back,
  // each sub-group is published as it finishes; back to front, the partition is published at the
  // end (the readers following behind need it front first).
  void run(const at::Tensor& grad, double grad_multiplier, double lr, const at::Tensor& compute_partition,
           StepProgress* progress) {
    for (PartitionWrite& write : pending_) write.done->wait_host();  // last step's: params16 is rewritten
    pending_.clear();
    for (Slot& slot : slots_) slot.copy = nullptr;
    traffic_.step_written_bytes = 0;
    write_back_materialised();
    const at::Tensor host_grad = grad.is_cpu() && grad.is_contiguous() ? grad : grad.cpu().contiguous();
    const SixteenBitOutput out16 =
        sixteen_bit_output(compute_partition, setup_.params16, numel_, "nvme optimizer", setup_.sink);
    const cpu_adam::AdamHyperParams hp = cpu_adam_hyper_params(setup_.config, lr);
    backward_ = resident_at_back();
    const auto kept = static_cast<int64_t>(slots_.size());
    for (int64_t position = 0; position < groups_; ++position) {
      read_ahead(position);
      const int64_t k = group_at(position);
      Slot& slot = slot_of(k);
      wait_read(slot);
      const int64_t begin = k * slot_numel_;
      const int64_t count = count_of(k);
      const cpu_adam::Elements grads = tensor_elements(host_grad, begin, count);
      const at::Tensor window = out16.sink != nullptr ? out16.sink->lend(begin, count) : at::Tensor();
      cpu_adam::Elements params16{};
      if (out16.sixteen_bit)
        params16 = window.defined() ? tensor_elements(window, 0, count) : tensor_elements(out16.out, begin, count);
      const cpu_adam::AdamBuffers buffers{
          .params = {static_cast<float*>(slot.buffer.data_ptr()), static_cast<size_t>(count)},
          .grads = {grads.data, grads.count, grads.type},
          .exp_avg = tensor_elements(record_part(slot, 1, count), 0, count),
          .exp_avg_sq = tensor_elements(record_part(slot, 2, count), 0, count),
          .params16 = params16};
      throw_if_error(setup_.adam->step(hp, state_.step + 1, static_cast<float>(grad_multiplier), buffers));
      const size_t queued = pending_.size();
      if (out16.sink != nullptr) {  // fp32 compute weights: the master's new values, from the slot
        if (!out16.sixteen_bit) std::memcpy(window.data_ptr(), slot.buffer.const_data_ptr(), window.nbytes());
        pending_.push_back(out16.sink->send(begin, count));
      } else if (!out16.in_place) {
        send_compute_weights(slot, out16.sixteen_bit, begin, count, compute_partition);
      }
      if (progress != nullptr && !backward_)
        progress->publish(begin + count, std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
      if (position >= groups_ - kept) {
        slot.dirty = true;  // the next pass starts here
      } else {
        write_behind(k);
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

  AdamPartitionState& state() override {
    if (materialised_) return state_;
    write_resident();
    backward_ = false;
    at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int s = 0; s < 3; ++s) *states[s] = at::empty({numel_}, at::TensorOptions().dtype(part_dtype(s)));
    for (int64_t k = 0; k < groups_; ++k) {
      read_ahead(k);
      Slot& slot = slot_of(k);
      wait_read(slot);
      const int64_t count = count_of(k);
      for (int s = 0; s < 3; ++s) states[s]->narrow(0, k * slot_numel_, count).copy_(record_part(slot, s, count));
    }
    materialised_ = true;
    return state_;
  }

  int64_t step_count() override { return state_.step; }

  StateReader state_reader(int s) override {
    write_back_materialised();  // a state() copy changed in place is what is saved
    write_resident();           // the records the buffers kept, before the reads take the buffers
    return [this, s, k = int64_t{0}, offset = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
      try {
        for (size_t filled = 0; filled < out.size();) {
          if (k >= groups_) return internal_error("nvme optimizer: state " + std::to_string(s) + " read past its end");
          const int64_t count = count_of(k);
          if (offset == 0) {  // sub-group k's part: read (or read ahead before), then k+1's queued
            if (slot_of(k).read.sub_group != k) read_part(k, s);
            TZ_RETURN_IF_ERROR(swap_->wait(slot_of(k).read));
            if (k + 1 < groups_ && slots_.size() >= 2) read_part(k + 1, s);
          }
          const at::Tensor part = record_part(slot_of(k), s, count);
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
        if (e < 0 || k >= groups_) return internal_error("nvme optimizer: master weight " + std::to_string(e) + " read past the partition");
        if (master_cached_ != k) {  // sub-group k's master part, from its start (O_DIRECT)
          read_part(k, 0);
          TZ_RETURN_IF_ERROR(swap_->wait(slot_of(k).read));
          master_cached_ = k;
        }
        const at::Tensor master = record_part(slot_of(k), 0, count_of(k));
        const int64_t offset = e - k * slot_numel_;
        const auto n = static_cast<size_t>(std::min<int64_t>(count_of(k) - offset, static_cast<int64_t>(out.size() - done)));
        std::memcpy(out.data() + done, master.const_data_ptr<float>() + offset, n * sizeof(float));
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
      for (int64_t k = 0; k < groups_ && status.ok(); ++k) {
        Slot& slot = slot_of(k);
        claim(slot, k);
        for (int s = 0; s < 3 && status.ok(); ++s) {
          at::Tensor part = record_part(slot, s, count_of(k));
          status =
              fill(s, k * slot_numel_, {static_cast<std::byte*>(part.data_ptr()), static_cast<size_t>(part.nbytes())});
        }
        if (status.ok()) write_behind(k);
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
    for (const Slot& slot : slots_)
      if (slot.buffer.is_pinned()) bytes += slot.buffer.nbytes();
    return bytes;
  }

  double last_copy_seconds() const override { return last_copy_seconds_; }

  std::vector<PartitionWrite> device_writes() const override { return pending_; }

  std::string placement() const override {
    return "nvme (" + swap_->describe() + "; cpu " + cpu_adam::simd_target_name() + ", " +
           std::to_string(setup_.adam->threads()) + " threads)";
  }

  NvmeTraffic traffic() const override {
    NvmeTraffic traffic = traffic_;
    traffic.resident_bytes = swap_->file_bytes();
    return traffic;
  }

 private:
  // Part s of a record: 0 the fp32 master, 1 exp_avg, 2 exp_avg_sq (the state dtype).
  at::ScalarType part_dtype(int s) const { return s == 0 ? at::kFloat : setup_.state_dtype; }
  uint64_t record_bytes(int64_t count) const {
    return static_cast<uint64_t>(nvme_record_bytes(count, setup_.state_dtype));
  }
  // Byte offset of part s in a record of `count` elements.
  int64_t part_offset(int s, int64_t count) const {
    return s == 0 ? 0 : count * static_cast<int64_t>(sizeof(float) + (s - 1) * c10::elementSize(setup_.state_dtype));
  }
  // Part s of the record of `count` elements `slot` holds, as a typed view of its buffer.
  at::Tensor record_part(const Slot& slot, int s, int64_t count) const {
    const int64_t bytes = count * static_cast<int64_t>(c10::elementSize(part_dtype(s)));
    return slot.buffer.narrow(0, part_offset(s, count), bytes).view(part_dtype(s));
  }
  int64_t count_of(int64_t k) const { return std::min(slot_numel_, numel_ - k * slot_numel_); }
  Slot& slot_of(int64_t k) { return slots_[static_cast<size_t>(k % static_cast<int64_t>(slots_.size()))]; }

  // The sub-group the pass visits at `position` (0 first), in the pass's direction.
  int64_t group_at(int64_t position) const { return backward_ ? groups_ - 1 - position : position; }

  // Whether the buffers hold the records of the partition's last sub-groups rather than its first
  // (then the next pass runs back to front). With one sub-group, or none held, front to back.
  bool resident_at_back() const {
    int64_t lowest = groups_;
    for (const Slot& slot : slots_)
      if (slot.holds >= 0) lowest = std::min(lowest, slot.holds);
    return lowest < groups_ && lowest > 0;
  }

  // Waits for `slot`'s read; on failure the slot holds nothing (its bytes are not the record).
  void wait_read(Slot& slot) {
    Status status = swap_->wait(slot.read);
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
    throw_if_error(swap_->wait(slot.read));  // only a checkpoint read left unfinished has one here
    throw_if_error(swap_->wait(slot.write));
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
    for (int64_t p = position; p < groups_ && p <= position + ahead; ++p) {
      const int64_t j = group_at(p);
      Slot& slot = slot_of(j);
      if (slot.holds == j) continue;
      claim(slot, j);
      slot.read = swap_->submit(nvme::Op::kRead, j, slot.buffer.data_ptr(), record_bytes(count_of(j)));
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
    slot.read = swap_->submit(nvme::Op::kRead, k, slot.buffer.data_ptr(), aligned, end);
  }

  // Queues the write of sub-group k's record; waits for it unless pipeline_write.
  void write_behind(int64_t k) {
    Slot& slot = slot_of(k);
    slot.dirty = false;
    slot.write = swap_->submit(nvme::Op::kWrite, k, slot.buffer.data_ptr(), record_bytes(count_of(k)));
    traffic_.step_written_bytes += record_bytes(count_of(k));
    if (!setup_.nvme.pipeline_write) throw_if_error(swap_->wait(slot.write));
  }

  // Waits for every write queued; the buffers keep their records (a read of the same sub-group
  // into the same buffer is skipped).
  void finish_writes() {
    Status first;
    for (Slot& slot : slots_) {
      Status status = swap_->wait(slot.write);
      if (!status.ok()) slot.holds = -1;
      if (first.ok()) first = status;
    }
    throw_if_error(first);
  }

  // The updated compute weights of elements [begin, begin + count), as the CPU-offloaded optimizer
  // sends them: the 16-bit staging copy or the fp32 master (then from the slot, which the copy holds).
  void send_compute_weights(Slot& slot, bool sixteen_bit, int64_t begin, int64_t count, const at::Tensor& compute) {
    const void* src = sixteen_bit ? static_cast<const std::byte*>(setup_.params16.const_data_ptr()) +
                                        begin * setup_.params16.element_size()
                                  : slot.buffer.const_data_ptr();
    at::Tensor dst = compute.narrow(0, begin, count);
    if (dst.is_cpu()) {
      std::memcpy(dst.data_ptr(), src, dst.nbytes());
      return;
    }
    std::shared_ptr<CopyDone> done = setup_.copies->to_device(dst, src);
    if (!sixteen_bit) slot.copy = done;
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
    for (int64_t k = 0; k < groups_; ++k) {
      Slot& slot = slot_of(k);
      claim(slot, k);
      slot.buffer.zero_();
      const int64_t begin = k * slot_numel_;
      const int64_t end = begin + count_of(k);
      for (size_t r = 0; r < runs.size(); ++r) {
        const int64_t lo = std::max(begin, runs[r].partition_offset);
        const int64_t hi = std::min(end, runs[r].partition_offset + runs[r].numel);
        if (lo >= hi) continue;
        load_param_range(*setup_.source, *names[r], runs[r].param_offset + (lo - runs[r].partition_offset),
                         record_part(slot, 0, end - begin).narrow(0, lo - begin, hi - lo));
      }
      write_behind(k);
    }
    finish_writes();
  }

  // After state(): the (possibly changed) whole tensors go back to NVMe and are freed.
  void write_back_materialised() {
    if (!materialised_) return;
    const at::Tensor* states[] = {&state_.master, &state_.exp_avg, &state_.exp_avg_sq};
    for (int64_t k = 0; k < groups_; ++k) {
      Slot& slot = slot_of(k);
      claim(slot, k);
      const int64_t count = count_of(k);
      for (int s = 0; s < 3; ++s) record_part(slot, s, count).copy_(states[s]->narrow(0, k * slot_numel_, count));
      write_behind(k);
    }
    finish_writes();
    state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
    materialised_ = false;
  }

  NvmeOffloadAdamSetup setup_;
  int64_t numel_ = 0;       // this rank's partition
  int64_t slot_numel_ = 0;  // elements of a full sub-group
  int64_t groups_ = 0;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<SwapFiles> swap_;
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

int64_t nvme_record_bytes(int64_t numel, at::ScalarType state_dtype) {
  return numel * static_cast<int64_t>(sizeof(float) + 2 * c10::elementSize(state_dtype));
}

std::unique_ptr<NvmeOffloadAdam> make_nvme_offload_adam(NvmeOffloadAdamSetup setup) {
  return std::make_unique<NvmeAdam>(std::move(setup));
}

}  // namespace tierzero::engine
