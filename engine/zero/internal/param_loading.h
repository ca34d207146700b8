// Filling the engine's buffers from a ParamSource (functional_model.h) piece by piece: a rank
// reads only the elements it keeps, through fp32 pieces of bounded size, so building an engine never
// holds a whole parameter set in host memory (only the 16-bit compute copy stages 0-2 keep whole on
// the device, and stage 3's persistent parameters).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"
#include "engine/zero/internal/partitioner.h"

namespace tierzero::engine {

// A source passing reads to `source` (which must outlive it), counting their wall seconds, the
// process's CPU seconds meanwhile (every thread's) and the fp32 bytes they gave: the engine's
// start-up breakdown (ZeroEngine::startup); and, from show_progress() until this source goes, those
// bytes on a progress bar.
class TimedParamSource final : public ParamSource {
 public:
  explicit TimedParamSource(ParamSource& source) : source_(source) {}
  std::optional<std::vector<int64_t>> shape(const std::string& name) const override { return source_.shape(name); }
  Status read(const std::string& name, int64_t first, std::span<float> out) override;
  double seconds() const { return seconds_; }
  double cpu_seconds() const { return cpu_seconds_; }
  uint64_t bytes() const { return bytes_; }
  // From here on, the reads' fp32 bytes advance a bar "`label`" of `total_bytes` on stderr
  // (ProgressBar: quiet with TIERZERO_NO_PROGRESS), whose last line is drawn when this source goes.
  void show_progress(const std::string& label, uint64_t total_bytes);

 private:
  ParamSource& source_;
  double seconds_ = 0.0;
  double cpu_seconds_ = 0.0;
  uint64_t bytes_ = 0;
  std::unique_ptr<ProgressBar> bar_;
};

// The elements of every parameter of `model` that partition `rank` holds (what load_partition_range
// reads into it; its padding excluded).
int64_t partition_param_numel(const FunctionalModel& model, const Partitioner& partitioner, int rank);

// Writes elements [first, first + dst.numel()) of parameter `name` into `dst` (flat, contiguous,
// any float dtype, any device), cast from fp32 as Tensor::copy_ casts. An fp32 host `dst` is read
// into directly; otherwise through a host buffer of at most 16 Mi elements (a safetensors source
// reads such a piece as 8 to 32 pieces of its own on as many threads), kept in `piece` (made or
// grown there) for the caller's next calls: a fresh 64 MiB buffer a call is 16 Ki page faults. Throws tierzero::Error
// with the source's error.
void load_param_range(ParamSource& source, const std::string& name, int64_t first, const at::Tensor& dst,
                      at::Tensor* piece = nullptr);

// Fills `dst` (flat, any float dtype and device; its padding is left as it is, zero for a fresh
// buffer) with elements [begin, begin + dst.numel()) of partition `rank` (the whole partition for
// begin 0 and partitioner.partition_numel() elements): those of every parameter of `model`, where
// partitioner.locate() puts them. Throws tierzero::Error naming the parameter.
void load_partition_range(ParamSource& source, const FunctionalModel& model, const Partitioner& partitioner, int rank,
                          int64_t begin, const at::Tensor& dst);

}  // namespace tierzero::engine
