#include "engine/zero/internal/param_loading.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <chrono>
#include <ctime>

namespace tierzero::engine {
namespace {

constexpr int64_t kPieceNumel = 16 << 20;

// CPU seconds every thread of the process has run.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

Status TimedParamSource::read(const std::string& name, int64_t first, std::span<float> out) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  Status status = source_.read(name, first, out);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cpu_seconds_ += process_cpu_seconds() - cpu_start;
  bytes_ += out.size_bytes();
  if (bar_) bar_->advance(out.size_bytes());
  return status;
}

void TimedParamSource::show_progress(const std::string& label, uint64_t total_bytes) {
  bar_ = std::make_unique<ProgressBar>(label, total_bytes);
}

int64_t partition_param_numel(const FunctionalModel& model, const Partitioner& partitioner, int rank) {
  int64_t numel = 0;
  for (const ParamSpec& spec : all_params(model))
    for (const PartitionRun& run : partitioner.locate(spec.name, 0, c10::multiply_integers(spec.shape)))
      if (run.rank == rank) numel += run.numel;
  return numel;
}

void load_param_range(ParamSource& source, const std::string& name, int64_t first, const at::Tensor& dst,
                      at::Tensor* piece) {
  const int64_t count = dst.numel();
  if (dst.is_cpu() && dst.scalar_type() == at::kFloat && dst.is_contiguous()) {
    throw_if_error(source.read(name, first, {dst.data_ptr<float>(), static_cast<size_t>(count)}));
    return;
  }
  at::Tensor own;
  if (piece == nullptr) piece = &own;
  const int64_t need = std::min(count, kPieceNumel);
  if (!piece->defined() || piece->numel() < need) *piece = at::empty({need}, at::kFloat);
  for (int64_t done = 0; done < count; done += kPieceNumel) {
    const int64_t n = std::min(kPieceNumel, count - done);
    throw_if_error(source.read(name, first + done, {piece->data_ptr<float>(), static_cast<size_t>(n)}));
    dst.narrow(0, done, n).copy_(piece->narrow(0, 0, n));
  }
}

void load_partition_range(ParamSource& source, const FunctionalModel& model, const Partitioner& partitioner, int rank,
                          int64_t begin, const at::Tensor& dst) {
  const int64_t end = begin + dst.numel();
  at::Tensor piece;  // one for every parameter's runs
  for (const ParamSpec& spec : all_params(model))
    for (const PartitionRun& run : partitioner.locate(spec.name, 0, c10::multiply_integers(spec.shape))) {
      const int64_t lo = std::max(begin, run.partition_offset);
      const int64_t hi = std::min(end, run.partition_offset + run.numel);
      if (run.rank != rank || lo >= hi) continue;
      load_param_range(source, spec.name, run.param_offset + (lo - run.partition_offset),
                       dst.narrow(0, lo - begin, hi - lo), &piece);
    }
}

}  // namespace tierzero::engine
