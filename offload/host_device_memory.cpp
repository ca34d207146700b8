// Host memory behind DeviceMemory, for machines without a GPU: pinned arenas are mapped (and
// mlock'ed on request) host memory.
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "common/common.h"
#include "offload/internal/device_memory.h"

namespace tierzero::offload {
namespace {

class HostDeviceMemory final : public DeviceMemory {
 public:
  explicit HostDeviceMemory(std::string reason) : reason_(std::move(reason)) {}

  bool is_gpu() const override { return false; }
  std::string description() const override { return "host memory (no GPU: " + reason_ + ")"; }
  Result<void*> allocate_pinned(uint64_t bytes, bool lock) override {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return resource_exhausted("cannot map " + format_bytes(bytes) +
                                " of host memory for the pinned tier: " + std::strerror(errno) + "; lower the budget");
    // On transparent huge pages where the kernel has them, as the CUDA path's arenas: an NVMe request
    // into the tier (the optimizer's swap buffers) is then a few contiguous segments, not one per 4 KiB.
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    touch_in_parallel(p, bytes);  // before mlock, which would fault the pages in on this thread
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

 private:
  std::string reason_;
};

}  // namespace

std::unique_ptr<DeviceMemory> make_host_device_memory(std::string reason) {
  return std::make_unique<HostDeviceMemory>(std::move(reason));
}

}  // namespace tierzero::offload
