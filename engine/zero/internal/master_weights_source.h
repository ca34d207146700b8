// The ZeRO engine's fp32 master weights as a checkpoint::ConsolidationSource, so the 16-bit export
// streams them through the consolidation writer (checkpoint/convert/consolidate.h) without the model ever
// being assembled on any rank: memory is the writer's read-ahead plus one range in flight, not the
// model (a 14B model is 56 GB in fp32).
//
// Rank 0 holds the source's writer; the writer reads one range of one parameter at a time. Each
// range is copied from the partitions that hold it (Partitioner::locate): runs in rank 0's own
// partition directly, runs in another rank's partition by a broadcast from that rank. Meanwhile
// every other rank is inside serve(), answering rank 0's requests in the order rank 0 makes them:
//   rank 0 broadcasts a request {kRange, parameter index, first, count} or {kDone};
//   then, for each run of the range held by a rank r != 0, r broadcasts the run.
// Rank 0 ends the exchange with finish() once its writer has returned, whatever the outcome, so no
// rank is left waiting when the write fails. When the partitions are not split (stage 0, one rank)
// rank 0 holds every weight and nothing is exchanged.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine {

class MasterWeightsSource final : public checkpoint::ConsolidationSource {
 public:
  // The master weights of `engine` (which must outlive this), as tensors in all_params order: a
  // tied embedding is one tensor, without alias (transformers' layout). `config_json`: the model's
  // config.json text, handed to the writer.
  MasterWeightsSource(ZeroEngine& engine, std::string config_json);

  const std::vector<checkpoint::TensorSpec>& tensors() const override { return specs_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return aliases_; }
  std::string model_config_json() const override { return config_json_; }

  // Ranks other than 0: answers rank 0's reads until its finish(). Returns the first error (a
  // failed collective: the group is then unusable).
  Status serve();
  // Rank 0, after its last read: releases the ranks in serve(). Call it exactly once, also when the
  // writer failed.
  Status finish();

 private:
  // Rank 0, on the writer's reader thread: requests the range, then gathers its runs into `out`.
  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override;
  // Broadcast by rank 0, received by the others: {kind, index, first, count}.
  std::vector<int64_t> exchange_request(std::vector<int64_t> request);
  // Brings elements [first, first + count) of tensors()[index] into `destination` on rank 0
  // (undefined elsewhere), each rank taking its part in the runs' broadcasts.
  void move_range(size_t index, int64_t first, int64_t count, const at::Tensor& destination);

  // Whether ranges are exchanged: the partitions are split over ranks.
  bool exchanges() const { return engine_.partitioner().partitioned(); }

  ZeroEngine& engine_;
  std::vector<checkpoint::TensorSpec> specs_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // none: a tied embedding is one parameter
  std::string config_json_;
};

}  // namespace tierzero::engine
