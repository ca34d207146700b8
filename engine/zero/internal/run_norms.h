// The squared L2 norm of an accumulated gradient partition, kept as it is written: every write of
// a run of elements [offset, offset + numel) records the sum of squares of the run's new values.
// A later write replaces what it covers. Runs need not repeat the same boundaries from one
// micro-batch to the next (a bucket that straddles two micro-batches lands its parameters at other
// slot-piece boundaries): the parts of an earlier run that a later one does not cover keep their
// values, and their sum of squares is taken again from the partition when the norm is asked for.
#pragma once

#include <cstdint>
#include <map>
#include <span>

#include "cpu_adam/adam.h"

namespace tierzero::engine {

class RunNorms {
 public:
  // Records that elements [offset, offset + numel) now hold values whose sum of squares is `sq`.
  void record(int64_t offset, int64_t numel, double sq);

  // The sum of squares over every recorded element, in partition order: recorded sums, and for
  // the parts of runs a later run cut, `adam.grad_stats` over those elements of `partition` (the
  // whole partition, fp32 or bf16).
  // finite is false when any sum is inf or NaN.
  cpu_adam::GradStats total(cpu_adam::ConstElements partition, const cpu_adam::CpuAdam& adam) const;

  // Sums the parts of cut runs that lie in [begin, end) from `range` (those elements as they are
  // now), so total() no longer reads them: the gradient ring lets a record's slot go once Adam has
  // read it (its runs are cut at record boundaries, so none straddles one).
  void settle(int64_t begin, int64_t end, cpu_adam::ConstElements range, const cpu_adam::CpuAdam& adam);

  // Forgets every run (a new step).
  void clear() { runs_.clear(); }

 private:
  struct Run {
    int64_t numel = 0;
    double sq = 0.0;
    bool resum = false;  // cut by a later run: sum again from the partition
  };
  std::map<int64_t, Run> runs_;  // offset -> run; runs never overlap
};

}  // namespace tierzero::engine
