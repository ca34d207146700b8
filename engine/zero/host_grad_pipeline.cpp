#include "engine/zero/internal/host_grad_pipeline.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>

#include "common/common.h"
#include "engine/zero/internal/host_elements.h"

namespace tierzero::engine {
HostGradPipeline::HostGradPipeline(GradLanding landing, const std::vector<at::Tensor>& staging, DeviceCopies& copies,
                                   const cpu_adam::CpuAdam& adam, float scale, bool overlap)
    : partition_(std::move(landing.partition)),
      numel_(partition_.defined() ? partition_.numel() : landing.numel),
      dtype_(partition_.defined()   ? partition_.scalar_type()
             : landing.ring.empty() ? at::kFloat
                                    : landing.ring.front().scalar_type()),
      record_numel_(landing.record_numel),
      slots_(bytes_of(staging)),
      copies_(copies),
      adam_(adam),
      scale_(scale),
      overlap_(overlap) {
  bool landing_ok = partition_.defined() ? partition_.is_cpu() && partition_.is_contiguous()
                                         : !landing.ring.empty() && record_numel_ > 0 && numel_ >= 0;
  for (const at::Tensor& slot : landing.ring)
    landing_ok = landing_ok && slot.scalar_type() == dtype_ && slot.numel() == record_numel_ && slot.is_contiguous();
  if (!landing_ok || (dtype_ != at::kFloat && dtype_ != at::kBFloat16) || slots_.slot_bytes() < 8)
    throw Error(internal_error(
        "HostGradPipeline needs a contiguous fp32 or bf16 host partition (or ring slots of a record each) and a "
        "staging slot of 8+ bytes"));
  element_type_ = float_element_type(dtype_, "offloaded gradients");
  if (!partition_.defined()) {
    const int64_t records = (numel_ + record_numel_ - 1) / record_numel_;
    ring_ = std::make_unique<offload::RecordSlots>(bytes_of(landing.ring), records);
    consumed_.assign(static_cast<size_t>(records), 0);
  }
  if (overlap_)
    worker_ = std::thread([this] {
      name_this_thread("tz-grad-landing");
      work();
    });
}

HostGradPipeline::~HostGradPipeline() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::vector<std::pair<int64_t, std::vector<LandingRun>>> HostGradPipeline::cut_into_pieces(
    int64_t numel, const std::vector<LandingRun>& runs) const {
  const int64_t piece = piece_numel();
  std::vector<std::pair<int64_t, std::vector<LandingRun>>> pieces;
  for (int64_t first = 0; first < numel; first += piece) {
    const int64_t end = std::min(numel, first + piece);
    std::vector<LandingRun> part;
    for (const LandingRun& run : runs) {
      const int64_t lo = std::max(first, run.source_offset), hi = std::min(end, run.source_offset + run.numel);
      if (lo < hi) part.push_back({run.partition_offset + (lo - run.source_offset), lo - first, hi - lo});
    }
    if (!part.empty()) pieces.emplace_back(first, std::move(part));
  }
  return pieces;
}

std::vector<LandingRun> HostGradPipeline::cut_at_records(std::vector<LandingRun> runs) const {
  if (ring_ == nullptr) return runs;
  std::vector<LandingRun> cut;
  for (const LandingRun& run : runs) {
    for (int64_t done = 0; done < run.numel;) {
      const int64_t offset = run.partition_offset + done;
      const int64_t numel = std::min(run.numel - done, (offset / record_numel_ + 1) * record_numel_ - offset);
      cut.push_back({offset, run.source_offset + done, numel});
      done += numel;
    }
  }
  return cut;
}

void HostGradPipeline::hold_records(const std::vector<LandingRun>& runs) {
  if (ring_ == nullptr) return;
  for (const LandingRun& run : runs) {
    const int64_t record = run.partition_offset / record_numel_;
    if (!ring_->slot_of(record).empty()) continue;  // only this thread lends slots
    const auto start = std::chrono::steady_clock::now();
    {
      RECORD_USER_SCOPE("tierzero::wait_ring_slot");
      ring_->hold(record);
    }
    blocked_seconds_ += seconds_since(start);
    std::lock_guard lock(mutex_);
    if (error_) {  // the optimizer failed (abandon_ring): no slot will be freed again
      if (const std::optional<size_t> slot = ring_->release(record)) ring_->free(*slot);
      std::rethrow_exception(error_);
    }
  }
}

std::byte* HostGradPipeline::landing_at(int64_t offset) {
  const auto element = static_cast<int64_t>(c10::elementSize(dtype_));
  if (ring_ == nullptr) return static_cast<std::byte*>(partition_.data_ptr()) + offset * element;
  const int64_t record = offset / record_numel_;
  const std::span<std::byte> slot = ring_->slot_of(record);
  if (slot.empty())
    throw Error(internal_error("the gradient ring: record " + std::to_string(record) + " holds no slot"));
  return slot.data() + (offset - record * record_numel_) * element;
}

void HostGradPipeline::land(const at::Tensor& source, std::vector<LandingRun> runs) {
  if (!source.is_contiguous())
    throw Error(internal_error("offloaded gradients: a reduced bucket that is not contiguous"));
  runs = cut_at_records(std::move(runs));
  for (auto& [first, part] : cut_into_pieces(source.numel(), runs))
    land_piece(source.narrow(0, first, std::min(piece_numel(), source.numel() - first)), std::move(part));
}

void HostGradPipeline::land_final(const at::Tensor& source, std::vector<LandingRun> runs) {
  if (!source.is_contiguous() || source.scalar_type() != at::kFloat)
    throw Error(internal_error("offloaded gradients: a final bucket that is not contiguous fp32"));
  // Scaled in fp32, then rounded once (to nearest even) to a bf16 partition's dtype on the device,
  // so half the bytes cross PCIe.
  at::Tensor scaled = scale_ == 1.0f ? source : source * scale_;
  if (dtype_ != at::kFloat) scaled = scaled.to(dtype_);
  runs = cut_at_records(std::move(runs));
  hold_records(runs);
  Job job;
  job.kind = JobKind::kRecordNorms;
  {
    std::unique_lock lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    changed_.wait(lock, [&] { return !zeroing_ || error_; });  // the copies overwrite the partition
    if (error_) std::rethrow_exception(error_);
  }
  for (const LandingRun& run : runs)
    job.copies.push_back(
        copies_.to_host(landing_at(run.partition_offset), scaled.narrow(0, run.source_offset, run.numel)));
  for (auto& [first, part] : cut_into_pieces(source.numel(), runs))
    for (const LandingRun& run : part) job.runs.push_back(run);
  submit(std::move(job));
}

void HostGradPipeline::land_piece(const at::Tensor& bucket_piece, std::vector<LandingRun> runs) {
  // A bf16 partition takes a wider piece rounded (to nearest even) on the device: half the bytes
  // cross PCIe, and the host adds bf16 into bf16.
  const bool narrow = dtype_ == at::kBFloat16 && bucket_piece.scalar_type() == at::kFloat;
  const at::Tensor source = narrow ? bucket_piece.to(at::kBFloat16) : bucket_piece;
  Job job;
  job.type = float_element_type(source.scalar_type(), "offloaded gradients");
  job.runs = std::move(runs);
  hold_records(job.runs);
  const auto start = std::chrono::steady_clock::now();
  job.slot = [&] {
    RECORD_USER_SCOPE("tierzero::wait_grad_slot");
    return slots_.take();  // the worker gives every slot back, its job failed or not
  }();
  blocked_seconds_ += seconds_since(start);
  {
    std::lock_guard lock(mutex_);
    if (error_) {
      slots_.give(job.slot);
      std::rethrow_exception(error_);
    }
  }
  job.copies.push_back(copies_.to_host(slots_.bytes(job.slot).data(), source));
  submit(std::move(job));
}

void HostGradPipeline::submit(Job job) {
  if (overlap_) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(job));
    }
    changed_.notify_all();
    return;
  }
  run(job);
  std::lock_guard lock(mutex_);
  release(job);
}

void HostGradPipeline::release(const Job& job) {
  if (job.kind == JobKind::kAdd) slots_.give(job.slot);
  if (job.kind == JobKind::kZeroPartition) zeroing_ = false;
}

void HostGradPipeline::run(Job& job) {
  RECORD_USER_SCOPE(job.kind == JobKind::kAdd             ? "tierzero::grad_add"
                    : job.kind == JobKind::kRecordNorms   ? "tierzero::grad_norms"
                    : job.kind == JobKind::kZeroPartition ? "tierzero::grad_zero"
                    : job.kind == JobKind::kNotify        ? "tierzero::grad_notify"
                                                          : "tierzero::grad_free_ring_slot");
  switch (job.kind) {
    case JobKind::kAdd: accumulate(job); break;
    case JobKind::kRecordNorms: record_norms(job); break;
    case JobKind::kZeroPartition: partition_.zero_(); break;
    case JobKind::kNotify: job.landed(); break;
    case JobKind::kFreeRingSlot: ring_->free(job.slot); break;
  }
}

void HostGradPipeline::accumulate(Job& job) {
  job.copies.front()->wait_host();
  copy_seconds_ += job.copies.front()->seconds();
  const std::byte* base = slots_.bytes(job.slot).data();
  const size_t element = element_size(job.type);
  for (const LandingRun& run : job.runs) {
    const cpu_adam::ConstElements src{base + run.source_offset * element, static_cast<size_t>(run.numel), job.type};
    void* dst = landing_at(run.partition_offset);
    const cpu_adam::GradStats stats =
        dtype_ == at::kFloat ? value_or_throw(adam_.accumulate_scaled(
                                   std::span<float>(static_cast<float*>(dst), run.numel), src, scale_))
                             : value_or_throw(adam_.accumulate_scaled(
                                   std::span<uint16_t>(static_cast<uint16_t*>(dst), run.numel), src, scale_));
    std::lock_guard lock(norms_mutex_);
    run_norms_.record(run.partition_offset, run.numel, stats.sq_norm);
  }
}

void HostGradPipeline::record_norms(Job& job) {
  for (const std::unique_ptr<CopyDone>& copy : job.copies) {
    copy->wait_host();
    copy_seconds_ += copy->seconds();
  }
  for (const LandingRun& run : job.runs) {
    const cpu_adam::ConstElements landed{landing_at(run.partition_offset), static_cast<size_t>(run.numel),
                                         element_type_};
    const double sq = adam_.grad_stats(landed).sq_norm;
    std::lock_guard lock(norms_mutex_);
    run_norms_.record(run.partition_offset, run.numel, sq);
  }
}

void HostGradPipeline::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_
    Job job = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    std::exception_ptr error;
    try {
      const TracedFrom::Scope traced(job.traced);
      run(job);
    } catch (...) {
      error = std::current_exception();
    }
    job.copies.clear();
    lock.lock();
    if (error && !error_) error_ = error;
    release(job);
    --busy_;
    changed_.notify_all();
  }
}

void HostGradPipeline::notify_landed(std::function<void()> landed) {
  Job notify;
  notify.kind = JobKind::kNotify;
  notify.landed = std::move(landed);
  submit(std::move(notify));
}

void HostGradPipeline::drain() {
  RECORD_USER_SCOPE("tierzero::wait_grad_landing");
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return (queue_.empty() && busy_ == 0) || error_; });
  if (error_) std::rethrow_exception(error_);
}

cpu_adam::GradStats HostGradPipeline::grad_stats() {
  if (ring_ == nullptr) {
    std::lock_guard lock(norms_mutex_);
    return run_norms_.total({partition_.const_data_ptr(), static_cast<size_t>(numel_), element_type_}, adam_);
  }
  // The records not yet read; a slot is freed only once settled.
  for (const auto& [record, slot] : ring_->held()) settle_norms(record, slot);
  std::lock_guard lock(norms_mutex_);
  return run_norms_.total({nullptr, 0, element_type_}, adam_);
}

void HostGradPipeline::settle_norms(int64_t record, std::span<const std::byte> slot) {
  const int64_t begin = record * record_numel_, count = std::min(record_numel_, numel_ - begin);
  const cpu_adam::ConstElements elements{slot.data(), static_cast<size_t>(count), element_type_};
  std::lock_guard lock(norms_mutex_);
  run_norms_.settle(begin, begin + count, elements, adam_);
}

cpu_adam::ConstElements HostGradPipeline::lend(int64_t begin, int64_t count) {
  const int64_t record = begin / record_numel_;
  if (ring_ == nullptr || count <= 0 || (begin + count - 1) / record_numel_ != record)
    throw Error(internal_error("the gradient ring lends one record's elements at a time"));
  if (ring_->slot_of(record).empty()) return {nullptr, static_cast<size_t>(count), element_type_};
  return {landing_at(begin), static_cast<size_t>(count), element_type_};
}

void HostGradPipeline::consumed(int64_t begin, int64_t count) {
  const int64_t record = begin / record_numel_;
  {
    std::lock_guard lock(mutex_);
    int64_t& read = consumed_[static_cast<size_t>(record)];
    read += count;
    if (read < std::min(record_numel_, numel_ - record * record_numel_)) return;
    read = 0;
  }
  const std::span<std::byte> slot = ring_->slot_of(record);
  if (slot.empty()) return;  // nothing landed on it
  settle_norms(record, slot);
  if (const std::optional<size_t> released = ring_->release(record)) {  // the worker zeroes and frees it
    Job free;
    free.kind = JobKind::kFreeRingSlot;
    free.slot = *released;
    submit(std::move(free));
  }
}

void HostGradPipeline::abandon_ring(std::exception_ptr error) {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = std::move(error);
  ring_->abandon();
  changed_.notify_all();
}

void HostGradPipeline::reset() {
  {
    std::lock_guard lock(norms_mutex_);
    run_norms_.clear();
  }
  copy_seconds_ = 0.0;
  blocked_seconds_ = 0.0;
  if (ring_ != nullptr) {  // every record read frees its slot; those of a failed step are freed here
    std::lock_guard lock(mutex_);
    ring_->abandon();
    std::fill(consumed_.begin(), consumed_.end(), 0);
  }
}

void HostGradPipeline::zero_partition() {
  if (ring_ != nullptr) return;
  {
    std::lock_guard lock(mutex_);
    zeroing_ = true;
  }
  Job zero;
  zero.kind = JobKind::kZeroPartition;
  submit(std::move(zero));
}

}  // namespace tierzero::engine
