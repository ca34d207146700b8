// Private to engine/model: the frozen base of a LoRA run homed on NVMe (offload_param "nvme"). Unit
// u's weights, in the compute dtype, are record u of offload/'s RecordCache (offload/offload.h): in
// swap files over the offload_param.nvme_path directories (one file per directory per rank, removed
// with the run), each unit in consecutive file records of up to 32 MiB
// (state_layout::kFrozenMaxRecordBytes), written once at load and read back for each use through
// two pinned staging halves, each the size of the largest unit: the unit asked for, and the one
// expected next (the direction the requests last moved, turning at either end), read ahead while
// the current unit computes. The unit in use is copied to the device through DeviceCopies::upload
// and stays there, so the window's runs of one unit (every micro-batch through it) read and copy it
// once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/layout/layout.h"
#include "engine/model/functional_model.h"
#include "offload/offload.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine {

class FrozenDisk {
 public:
  // Fills `out` (a tensor of the parameter's shape and the compute dtype, in pinned staging) with
  // parameter `spec`'s values.
  using ReadParam = std::function<Status(const ParamSpec& spec, at::Tensor& out)>;

  // Writes every unit of `units` (each unit's parameters in the model's order; a parameter of two
  // units is stored in both) in `dtype` through `read` into swap files per `placement` (its
  // nvme_paths, io and rank), in records of `max_record_bytes` (rounded up to 4096; the largest
  // unit when smaller; the layout is engine/layout's frozen_disk_layout), staged through two halves
  // of a pool of their own, pinned for `device` when it is a CUDA device and checked against
  // placement.pinned_limit_bytes, and copied to `device`. Errors: the pool's (over the limit),
  // RecordStaging::create's (a path that is not a writable directory, a disk without room for the files:
  // kOutOfSpace with the bytes needed and free), the writes', and `read`'s.
  static Result<std::unique_ptr<FrozenDisk>> create(const std::vector<std::vector<ParamSpec>>& units,
                                                    at::ScalarType dtype, const FrozenPlacement& placement,
                                                    const ReadParam& read,
                                                    uint64_t max_record_bytes = state_layout::kFrozenMaxRecordBytes,
                                                    at::Device device = at::kCPU);
  ~FrozenDisk();
  FrozenDisk(const FrozenDisk&) = delete;
  FrozenDisk& operator=(const FrozenDisk&) = delete;

  // Unit u's parameters on `device` (the one given to create(); its own copies: the staging is
  // reused), ready for work queued on the device's current stream. Throws tierzero::Error when the
  // read fails (the error names the file, the offset and the record), or for another device.
  // Thread-safe.
  std::vector<at::Tensor> unit(size_t u, at::Device device);

  // Bytes of the units' weights (each unit's own, a shared parameter in each).
  int64_t bytes() const { return bytes_; }
  // Bytes the swap files take on disk (the units' bytes, each rounded up to whole records), and
  // "<n> file(s): path, ...".
  uint64_t file_bytes() const { return cache_->file_bytes(); }
  // Bytes read from the files since the last call. Thread-safe.
  uint64_t take_read_bytes();
  // The two staging halves' pool (engine/layout's frozen_staging_buffers), pinned for a CUDA
  // `device` given to create().
  const offload::HostTier& staging_pool() const { return *pool_; }
  std::string describe() const { return cache_->describe(); }

 private:
  // The unit last handed out, on the device, and its copy.
  struct OnDevice {
    size_t unit = 0;
    std::vector<at::Tensor> weights;
    std::shared_ptr<offload::CopyDone> done;
  };
  explicit FrozenDisk(at::Device device) : device_(device) {}

  std::vector<std::vector<ParamSpec>> units_;
  std::vector<std::vector<uint64_t>> offsets_;  // each parameter's byte offset in its unit's record
  at::ScalarType dtype_ = at::kBFloat16;
  int64_t bytes_ = 0;
  at::Device device_;
  std::unique_ptr<offload::HostTier> pool_;  // the staging halves' memory; outlives cache_
  std::unique_ptr<offload::DeviceCopies> copies_;
  std::unique_ptr<offload::RecordCache> cache_;  // record u: unit u
  std::mutex mu_;
  int64_t last_ = -1;        // the unit last read and copied
  uint64_t read_taken_ = 0;  // cache_->read_bytes() at the last take_read_bytes()
  std::optional<OnDevice> on_device_;
};

}  // namespace tierzero::engine
