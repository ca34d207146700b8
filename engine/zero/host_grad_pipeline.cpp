#include "engine/zero/internal/host_grad_pipeline.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>

#include "common/common.h"
#include "engine/zero/internal/host_elements.h"

namespace tierzero::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<std::span<std::byte>> bytes_of(const std::vector<at::Tensor>& tensors) {
  std::vector<std::span<std::byte>> spans;
  for (const at::Tensor& tensor : tensors)
    spans.emplace_back(static_cast<std::byte*>(tensor.data_ptr()), tensor.nbytes());
  return spans;
}

}  // namespace

HostGradPipeline::HostGradPipeline(at::Tensor partition, const std::vector<at::Tensor>& staging, DeviceCopies& copies,
                                   const cpu_adam::CpuAdam& adam, float scale, bool overlap)
    : partition_(std::move(partition)),
      slots_(bytes_of(staging)),
      copies_(copies),
      adam_(adam),
      scale_(scale),
      overlap_(overlap) {
  const bool dtype_ok = partition_.scalar_type() == at::kFloat || partition_.scalar_type() == at::kBFloat16;
  if (!dtype_ok || !partition_.is_cpu() || !partition_.is_contiguous() || slots_.slot_bytes() < 8)
    throw Error(internal_error(
        "HostGradPipeline needs a contiguous fp32 or bf16 host partition and a staging slot of 8+ bytes"));
  if (overlap_) worker_ = std::thread([this] { work(); });
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

void HostGradPipeline::land(const at::Tensor& source, std::vector<LandingRun> runs) {
  if (!source.is_contiguous())
    throw Error(internal_error("offloaded gradients: a reduced bucket that is not contiguous"));
  for (auto& [first, part] : cut_into_pieces(source.numel(), runs))
    land_piece(source.narrow(0, first, std::min(piece_numel(), source.numel() - first)), std::move(part));
}

void HostGradPipeline::land_final(const at::Tensor& source, std::vector<LandingRun> runs) {
  if (!source.is_contiguous() || source.scalar_type() != at::kFloat)
    throw Error(internal_error("offloaded gradients: a final bucket that is not contiguous fp32"));
  // Scaled in fp32, then rounded once (to nearest even) to a bf16 partition's dtype on the device,
  // so half the bytes cross PCIe.
  at::Tensor scaled = scale_ == 1.0f ? source : source * scale_;
  if (partition_.scalar_type() != at::kFloat) scaled = scaled.to(partition_.scalar_type());
  Job job;
  job.kind = JobKind::kRecordNorms;
  {
    std::unique_lock lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    changed_.wait(lock, [&] { return !zeroing_ || error_; });  // the copies overwrite the partition
    if (error_) std::rethrow_exception(error_);
  }
  auto* partition = static_cast<std::byte*>(partition_.data_ptr());
  const int64_t element = partition_.element_size();
  for (const LandingRun& run : runs)
    job.copies.push_back(copies_.to_host(partition + run.partition_offset * element,
                                         scaled.narrow(0, run.source_offset, run.numel)));
  for (auto& [first, part] : cut_into_pieces(source.numel(), runs))
    for (const LandingRun& run : part) job.runs.push_back(run);
  submit(std::move(job));
}

void HostGradPipeline::land_piece(const at::Tensor& bucket_piece, std::vector<LandingRun> runs) {
  // A bf16 partition takes a wider piece rounded (to nearest even) on the device: half the bytes
  // cross PCIe, and the host adds bf16 into bf16.
  const bool narrow = partition_.scalar_type() == at::kBFloat16 && bucket_piece.scalar_type() == at::kFloat;
  const at::Tensor source = narrow ? bucket_piece.to(at::kBFloat16) : bucket_piece;
  Job job;
  job.type = float_element_type(source.scalar_type(), "offloaded gradients");
  job.runs = std::move(runs);
  const auto start = std::chrono::steady_clock::now();
  job.slot = slots_.take();  // the worker gives every slot back, its job failed or not
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
  switch (job.kind) {
    case JobKind::kAdd: accumulate(job); break;
    case JobKind::kRecordNorms: record_norms(job); break;
    case JobKind::kZeroPartition: partition_.zero_(); break;
    case JobKind::kNotify: job.landed(); break;
  }
}

void HostGradPipeline::accumulate(Job& job) {
  job.copies.front()->wait_host();
  copy_seconds_ += job.copies.front()->seconds();
  const std::byte* base = slots_.bytes(job.slot).data();
  const size_t element = element_size(job.type);
  for (const LandingRun& run : job.runs) {
    const cpu_adam::ConstElements src{base + run.source_offset * element, static_cast<size_t>(run.numel), job.type};
    const cpu_adam::GradStats stats =
        partition_.scalar_type() == at::kFloat
            ? value_or_throw(adam_.accumulate_scaled(
                  std::span<float>(partition_.data_ptr<float>() + run.partition_offset, run.numel), src, scale_))
            : value_or_throw(adam_.accumulate_scaled(
                  std::span<uint16_t>(static_cast<uint16_t*>(partition_.data_ptr()) + run.partition_offset, run.numel),
                  src, scale_));
    run_norms_.record(run.partition_offset, run.numel, stats.sq_norm);
  }
}

void HostGradPipeline::record_norms(Job& job) {
  for (const std::unique_ptr<CopyDone>& copy : job.copies) {
    copy->wait_host();
    copy_seconds_ += copy->seconds();
  }
  const cpu_adam::ConstElements partition = partition_elements();
  const size_t element = element_size(partition.type);
  for (const LandingRun& run : job.runs) {
    const cpu_adam::ConstElements landed{static_cast<const std::byte*>(partition.data) + run.partition_offset * element,
                                         static_cast<size_t>(run.numel), partition.type};
    run_norms_.record(run.partition_offset, run.numel, adam_.grad_stats(landed).sq_norm);
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
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return (queue_.empty() && busy_ == 0) || error_; });
  if (error_) std::rethrow_exception(error_);
}

cpu_adam::GradStats HostGradPipeline::grad_stats() const {
  return run_norms_.total(partition_elements(), adam_);
}

cpu_adam::ConstElements HostGradPipeline::partition_elements() const {
  return {partition_.const_data_ptr(), static_cast<size_t>(partition_.numel()),
          partition_.scalar_type() == at::kFloat ? ElementType::kF32 : ElementType::kBF16};
}

void HostGradPipeline::reset() {
  run_norms_.clear();
  copy_seconds_ = 0.0;
  blocked_seconds_ = 0.0;
  {
    std::lock_guard lock(mutex_);
    zeroing_ = true;
  }
  Job zero;
  zero.kind = JobKind::kZeroPartition;
  submit(std::move(zero));
}

}  // namespace tierzero::engine
