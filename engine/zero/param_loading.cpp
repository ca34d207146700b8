#include "engine/zero/internal/param_loading.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace tierzero::engine {
namespace {

constexpr int64_t kPieceNumel = 16 << 20;

}  // namespace

void load_param_range(ParamSource& source, const std::string& name, int64_t first, const at::Tensor& dst) {
  const int64_t count = dst.numel();
  if (dst.is_cpu() && dst.scalar_type() == at::kFloat && dst.is_contiguous()) {
    throw_if_error(source.read(name, first, {dst.data_ptr<float>(), static_cast<size_t>(count)}));
    return;
  }
  at::Tensor piece = at::empty({std::min(count, kPieceNumel)}, at::kFloat);
  for (int64_t done = 0; done < count; done += kPieceNumel) {
    const int64_t n = std::min(kPieceNumel, count - done);
    throw_if_error(source.read(name, first + done, {piece.data_ptr<float>(), static_cast<size_t>(n)}));
    dst.narrow(0, done, n).copy_(piece.narrow(0, 0, n));
  }
}

void load_partition(ParamSource& source, const FunctionalModel& model, const Partitioner& partitioner, int rank,
                    const at::Tensor& dst) {
  load_partition_range(source, model, partitioner, rank, 0, dst);
}

void load_partition_range(ParamSource& source, const FunctionalModel& model, const Partitioner& partitioner, int rank,
                          int64_t begin, const at::Tensor& dst) {
  const int64_t end = begin + dst.numel();
  for (const ParamSpec& spec : all_params(model))
    for (const PartitionRun& run : partitioner.locate(spec.name, 0, shape_numel(spec.shape))) {
      const int64_t lo = std::max(begin, run.partition_offset);
      const int64_t hi = std::min(end, run.partition_offset + run.numel);
      if (run.rank != rank || lo >= hi) continue;
      load_param_range(source, spec.name, run.param_offset + (lo - run.partition_offset),
                       dst.narrow(0, lo - begin, hi - lo));
    }
}

}  // namespace tierzero::engine
