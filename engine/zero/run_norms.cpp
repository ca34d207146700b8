#include "engine/zero/internal/run_norms.h"

#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

namespace tierzero::engine {
namespace {

// The sum of squares of `elements` by `adam`'s kernel; infinity when an element is not finite.
double sq_norm_of(const cpu_adam::CpuAdam& adam, cpu_adam::ConstElements elements) {
  const cpu_adam::GradStats stats = adam.grad_stats(elements);
  return stats.finite ? stats.sq_norm : std::numeric_limits<double>::infinity();
}

}  // namespace

void RunNorms::record(int64_t offset, int64_t numel, double sq) {
  const int64_t end = offset + numel;
  auto it = runs_.lower_bound(offset);
  if (it != runs_.begin()) {
    auto before = std::prev(it);
    if (before->first + before->second.numel > offset) it = before;
  }
  std::vector<std::pair<int64_t, int64_t>> uncovered;  // parts of cut runs: (offset, numel)
  while (it != runs_.end() && it->first < end) {
    const int64_t run_begin = it->first, run_end = it->first + it->second.numel;
    if (run_begin < offset) uncovered.emplace_back(run_begin, offset - run_begin);
    if (run_end > end) uncovered.emplace_back(end, run_end - end);
    it = runs_.erase(it);
  }
  for (const auto& [first, count] : uncovered) runs_[first] = Run{.numel = count, .resum = true};
  runs_[offset] = Run{.numel = numel, .sq = sq};
}

void RunNorms::settle(int64_t begin, int64_t end, cpu_adam::ConstElements range, const cpu_adam::CpuAdam& adam) {
  const size_t element = element_size(range.type);
  for (auto it = runs_.lower_bound(begin); it != runs_.end() && it->first + it->second.numel <= end; ++it) {
    if (!it->second.resum) continue;
    it->second.sq = sq_norm_of(adam, {static_cast<const std::byte*>(range.data) + (it->first - begin) * element,
                                      static_cast<size_t>(it->second.numel), range.type});
    it->second.resum = false;
  }
}

cpu_adam::GradStats RunNorms::total(cpu_adam::ConstElements partition, const cpu_adam::CpuAdam& adam) const {
  const size_t element = element_size(partition.type);
  cpu_adam::GradStats stats;
  for (const auto& [offset, run] : runs_) {
    stats.sq_norm += run.resum ? sq_norm_of(adam, {static_cast<const std::byte*>(partition.data) + offset * element,
                                                   static_cast<size_t>(run.numel), partition.type})
                               : run.sq;
  }
  stats.finite = std::isfinite(stats.sq_norm);
  return stats;
}

}  // namespace tierzero::engine
