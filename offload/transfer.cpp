#include "offload/internal/transfer.h"

#include <algorithm>
#include <cstring>

namespace tierzero::offload {
namespace {

std::string pair_name(const Location& src, const Location& dst) {
  return std::string(src.zeros ? "zeros" : tier_name(src.tier)) + " -> " + tier_name(dst.tier);
}

}  // namespace

Transfers::Transfers(DeviceMemory& device, NvmeStore* store, uint64_t chunk_bytes, std::vector<StagingSet> staging)
    : device_(device), store_(store), chunk_(chunk_bytes), staging_(std::move(staging)) {
  for (StagingSet& s : staging_) available_.push_back(&s);
}

StagingSet* Transfers::acquire() {
  std::unique_lock lock(mu_);
  available_cv_.wait(lock, [&] { return !available_.empty(); });
  StagingSet* set = available_.back();
  available_.pop_back();
  return set;
}

void Transfers::give_back(StagingSet* set) {
  {
    std::lock_guard lock(mu_);
    available_.push_back(set);
  }
  available_cv_.notify_one();
}

Status Transfers::copy(const Location& src, const Location& dst, uint64_t bytes, bool after_caller_writes) {
  if (after_caller_writes && !src.zeros && src.tier == Tier::kGpu) {
    TZ_RETURN_IF_ERROR(device_.order_after_default_stream(Lane::kD2H)
                           .with_context("ordering the copy out of the GPU after the caller's default-stream work"));
  }
  Status s;
  if (src.zeros) {
    s = dst.tier == Tier::kNvme ? zeros_to_nvme(*dst.extent, bytes) : fill(dst, bytes);
  } else if (src.tier == Tier::kPinned && dst.tier == Tier::kGpu) {
    s = device_copy(Lane::kH2D, dst.data, src.data, bytes);
  } else if (src.tier == Tier::kGpu && dst.tier == Tier::kPinned) {
    s = device_copy(Lane::kD2H, dst.data, src.data, bytes);
  } else if (src.tier == Tier::kNvme && dst.tier == Tier::kPinned) {
    s = wait_all(store_->submit(*src.extent, nvme::Op::kRead, 0, dst.data, bytes));
  } else if (src.tier == Tier::kPinned && dst.tier == Tier::kNvme) {
    s = wait_all(store_->submit(*dst.extent, nvme::Op::kWrite, 0, src.data, bytes));
  } else if (src.tier == Tier::kNvme && dst.tier == Tier::kGpu) {
    s = nvme_to_device(*src.extent, static_cast<std::byte*>(dst.data), bytes);
  } else if (src.tier == Tier::kGpu && dst.tier == Tier::kNvme) {
    s = device_to_nvme(static_cast<const std::byte*>(src.data), *dst.extent, bytes);
  } else {
    return internal_error("no transfer from a tier to itself (" + pair_name(src, dst) + ")");
  }
  if (dst.tier == Tier::kNvme) s = store_->full_disk(s, *dst.extent, bytes);
  return s.with_context("copying " + std::to_string(bytes) + " bytes " + pair_name(src, dst));
}

Status Transfers::drain(Lane lane) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> done, device_.create_event());
  TZ_RETURN_IF_ERROR(done->record(lane));
  return done->wait();
}

// The chunks queued before a failed one are drained too: the caller frees `dst` on error.
Status Transfers::device_copy(Lane lane, void* dst, const void* src, uint64_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  auto* s = static_cast<const std::byte*>(src);
  Status status;
  for (uint64_t off = 0; off < bytes && status.ok(); off += chunk_) {
    status = device_.copy_async(lane, d + off, s + off, std::min(chunk_, bytes - off));
  }
  Status drained = drain(lane);
  return status.ok() ? drained : status;
}

Status Transfers::fill(const Location& dst, uint64_t bytes) {
  if (dst.tier == Tier::kPinned) {
    std::memset(dst.data, 0, bytes);
    return {};
  }
  Status status = device_.fill_async(Lane::kH2D, dst.data, 0, bytes);
  Status drained = drain(Lane::kH2D);
  return status.ok() ? drained : status;
}

// Reads run up to `depth` chunks ahead of the H2D copies; a buffer is read into again only after
// the event recorded behind its last H2D copy has passed.
Status Transfers::nvme_to_device(const NvmeExtent& src, std::byte* dst, uint64_t bytes) {
  StagingSet* set = acquire();
  const uint64_t depth = set->buffers.size();
  const uint64_t chunks = (bytes + chunk_ - 1) / chunk_;
  std::vector<std::vector<nvme::IoTicket>> reads(depth);
  Status status;
  uint64_t next_read = 0;
  for (uint64_t k = 0; k < chunks && status.ok(); ++k) {
    for (; next_read < chunks && next_read < k + depth; ++next_read) {
      const uint64_t slot = next_read % depth;
      status = set->events[slot]->wait();
      if (!status.ok()) break;
      const uint64_t off = next_read * chunk_;
      reads[slot] = store_->submit(src, nvme::Op::kRead, off, set->buffers[slot], std::min(chunk_, bytes - off));
    }
    if (!status.ok()) break;
    const uint64_t slot = k % depth;
    status = wait_all(reads[slot]);
    reads[slot].clear();
    if (!status.ok()) break;
    const uint64_t off = k * chunk_;
    status = device_.copy_async(Lane::kH2D, dst + off, set->buffers[slot], std::min(chunk_, bytes - off));
    if (status.ok()) status = set->events[slot]->record(Lane::kH2D);
  }
  for (uint64_t slot = 0; slot < depth; ++slot) {
    (void)wait_all(reads[slot]);  // the first error is already in `status`
  }
  Status drained = drain(Lane::kH2D);  // covers a copy whose event failed to record
  if (status.ok()) status = drained;
  give_back(set);
  return status;
}

// D2H copies fill the buffers in turn; each buffer's NVMe write is in flight while the next
// buffers are filled, and a buffer is reused only after its write completed.
Status Transfers::device_to_nvme(const std::byte* src, const NvmeExtent& dst, uint64_t bytes) {
  StagingSet* set = acquire();
  const uint64_t depth = set->buffers.size();
  const uint64_t chunks = (bytes + chunk_ - 1) / chunk_;
  std::vector<std::vector<nvme::IoTicket>> writes(depth);
  Status status;
  for (uint64_t k = 0; k < chunks && status.ok(); ++k) {
    const uint64_t slot = k % depth;
    status = wait_all(writes[slot]);
    writes[slot].clear();
    if (!status.ok()) break;
    const uint64_t off = k * chunk_;
    const uint64_t len = std::min(chunk_, bytes - off);
    status = device_.copy_async(Lane::kD2H, set->buffers[slot], src + off, len);
    if (status.ok()) status = set->events[slot]->record(Lane::kD2H);
    if (status.ok()) status = set->events[slot]->wait();
    if (status.ok()) writes[slot] = store_->submit(dst, nvme::Op::kWrite, off, set->buffers[slot], len);
  }
  Status drained = drain(Lane::kD2H);  // covers a copy whose event failed to record
  if (status.ok()) status = drained;
  for (uint64_t slot = 0; slot < depth; ++slot) {
    Status s = wait_all(writes[slot]);
    if (status.ok()) status = s;
  }
  give_back(set);
  return status;
}

Status Transfers::zeros_to_nvme(const NvmeExtent& dst, uint64_t bytes) {
  StagingSet* set = acquire();
  std::memset(set->buffers[0], 0, chunk_);
  std::vector<nvme::IoTicket> writes;
  for (uint64_t off = 0; off < bytes; off += chunk_) {
    std::vector<nvme::IoTicket> t =
        store_->submit(dst, nvme::Op::kWrite, off, set->buffers[0], std::min(chunk_, bytes - off));
    writes.insert(writes.end(), t.begin(), t.end());
  }
  Status status = wait_all(writes);
  give_back(set);
  return status;
}

}  // namespace tierzero::offload
