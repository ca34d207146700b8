// The GPU tier as host memory: for machines without a GPU, so the state machine runs everywhere.
// Copies run when queued, or (with a copy latency) later on a thread per lane, like CUDA streams.
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>

#include "common/common.h"
#include "offload/internal/device_memory.h"
#include "offload/internal/host_copy_lane.h"

namespace tierzero::offload {
namespace {

// A timestamp and, where copies are asynchronous, the ticket of the last copy queued on the lane.
class HostEvent final : public DeviceEvent {
 public:
  // `lanes` is null when copies complete as they are queued.
  explicit HostEvent(std::unique_ptr<HostCopyLane>* lanes) : lanes_(lanes) {}

  Status record(Lane lane) override {
    at_ = std::chrono::steady_clock::now();
    if (lanes_) {
      lane_ = lanes_[static_cast<int>(lane)].get();
      ticket_ = lane_->last_ticket();
    }
    return {};
  }
  Status wait() override {
    if (lane_) lane_->wait(ticket_);
    return {};
  }
  Result<double> elapsed_ms_since(const DeviceEvent& earlier) const override {
    const auto& e = static_cast<const HostEvent&>(earlier);
    return std::chrono::duration<double, std::milli>(at_ - e.at_).count();
  }

 private:
  std::unique_ptr<HostCopyLane>* lanes_;
  HostCopyLane* lane_ = nullptr;
  uint64_t ticket_ = 0;
  std::chrono::steady_clock::time_point at_ = std::chrono::steady_clock::now();
};

Result<void*> map_anonymous(uint64_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return resource_exhausted(std::string("cannot map ") + format_bytes(bytes) + " of host memory for the " + what +
                              ": " + std::strerror(errno) + "; lower the budget");
  }
  return p;
}

class HostDeviceMemory final : public DeviceMemory {
 public:
  HostDeviceMemory(std::string reason, std::chrono::microseconds copy_latency) : reason_(std::move(reason)) {
    if (copy_latency.count() > 0) {
      for (auto& lane : lanes_) lane = std::make_unique<HostCopyLane>(copy_latency);
    }
  }

  bool is_gpu() const override { return false; }
  std::string description() const override { return "host memory (no GPU: " + reason_ + ")"; }
  Result<uint64_t> free_bytes() const override { return host_memory_available(); }

  Result<void*> allocate_device(uint64_t bytes) override { return map_anonymous(bytes, "emulated GPU tier"); }
  void free_device(void* ptr, uint64_t bytes) override { munmap(ptr, bytes); }

  Result<void*> allocate_pinned(uint64_t bytes, bool lock) override {
    TZ_ASSIGN_OR_RETURN(void* p, map_anonymous(bytes, "pinned tier"));
    // On transparent huge pages where the kernel has them, as the CUDA path's arenas: an NVMe request
    // into the tier (the optimizer's swap buffers) is then a few contiguous segments, not one per 4 KiB.
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    if (lock && mlock(p, bytes) != 0) {
      const int err = errno;
      munmap(p, bytes);
      rlimit limit{};
      getrlimit(RLIMIT_MEMLOCK, &limit);
      const std::string rl = limit.rlim_cur == RLIM_INFINITY ? "unlimited" : format_bytes(limit.rlim_cur);
      return resource_exhausted("mlock of a " + format_bytes(bytes) + " pinned arena failed: " + std::strerror(err) +
                                " (RLIMIT_MEMLOCK " + rl +
                                "); raise it (ulimit -l / limits.conf memlock), run with CAP_IPC_LOCK, "
                                "lower pinned_bytes, or set lock_host_memory=false");
    }
    return p;
  }
  void free_pinned(void* ptr, uint64_t bytes) override {
    munlock(ptr, bytes);
    munmap(ptr, bytes);
  }

  Status copy_async(Lane lane, void* dst, const void* src, uint64_t bytes) override {
    run_on(lane, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
    return {};
  }
  Status fill_async(Lane lane, void* dst, uint8_t value, uint64_t bytes) override {
    run_on(lane, [dst, value, bytes] { std::memset(dst, value, bytes); });
    return {};
  }
  Status order_after_default_stream(Lane) override { return {}; }
  Result<std::unique_ptr<DeviceEvent>> create_event() override {
    return std::unique_ptr<DeviceEvent>(std::make_unique<HostEvent>(lanes_[0] ? lanes_ : nullptr));
  }

 private:
  void run_on(Lane lane, std::function<void()> work) {
    if (HostCopyLane* l = lanes_[static_cast<int>(lane)].get()) {
      l->push(std::move(work));
    } else {
      work();
    }
  }

  std::string reason_;
  std::unique_ptr<HostCopyLane> lanes_[2];  // empty: copies run when queued
};

}  // namespace

std::unique_ptr<DeviceMemory> make_host_device_memory(std::string reason, std::chrono::microseconds copy_latency) {
  return std::make_unique<HostDeviceMemory>(std::move(reason), copy_latency);
}

}  // namespace tierzero::offload
