// The tier manager's state: the registry of shards and the copies each has in each tier.
//
// Locking: one mutex guards the registry, the pools and the trace. Transfers run unlocked; while
// one runs, its destination copy is `loading` and its source copy `busy`, so eviction leaves both
// alone. Operations on one shard are chained (each waits for the one queued before it), so a
// shard's own state changes only in its running operation, or by eviction of its unheld copies.
#pragma once

#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "offload/internal/access_trace.h"
#include "offload/internal/arena_pool.h"
#include "offload/internal/budget_check.h"
#include "offload/internal/device_memory.h"
#include "offload/internal/nvme_store.h"
#include "offload/internal/task_queue.h"
#include "offload/internal/transfer.h"
#include "offload/tier_manager.h"

namespace tierzero::offload {

// A shard's storage in one tier.
struct Copy {
  bool present = false;          // storage allocated
  bool valid = false;            // holds the shard's current contents
  bool loading = false;          // a transfer into it is running
  bool prefetch_queued = false;  // a prefetch of it is queued
  uint32_t busy = 0;             // transfers reading from it
  uint64_t last_use = 0;         // use clock, for LRU eviction without a trace
  Block block;                   // GPU and pinned copies
  NvmeExtent extent;             // NVMe copies
};

struct Shard {
  ShardSpec spec;
  uint64_t version = 0;
  bool has_data = false;  // false: never written, the contents are zeros
  Copy copies[kTierCount];
  bool held = false;
  Tier held_tier = Tier::kPinned;
  uint32_t holds = 0;
  bool write_hold = false;
  bool written_back = false;         // a writeback completed since the write hold began
  std::shared_future<void> last_op;  // completes when the shard's latest queued operation has
};

class TierManagerImpl final : public TierManager {
 public:
  static Result<std::unique_ptr<TierManager>> create(const TierBudgets& budgets, nvme::IoEngine* io);
  ~TierManagerImpl() override;

  std::string budget_statement() const override;
  bool gpu_is_device() const override { return device_->is_gpu(); }
  Status register_shard(const ShardSpec& spec) override;
  Status unregister_shard(const std::string& id) override;
  std::future<Result<ShardView>> fetch(const std::string& id, Tier tier, Access access) override;
  std::future<Status> writeback(const std::string& id) override;
  std::future<Status> release(const std::string& id) override;
  std::future<Status> prefetch(const std::vector<std::string>& ids, Tier tier) override;
  std::future<Status> evict(const std::string& id, Tier tier) override;
  void begin_trace() override;
  void end_trace() override;
  Result<ShardInfo> info(const std::string& id) const override;
  TierUsage usage(Tier tier) const override;
  std::vector<NvmeShardRecord> nvme_manifest() const override;
  Status attach_nvme(const std::vector<NvmeShardRecord>& records) override;

 private:
  explicit TierManagerImpl(const TierBudgets& budgets) : budgets_(budgets) {}
  Status init(nvme::IoEngine* io);

  // Queues `body` behind the shard's latest operation (or runs it as not-found when `id` is not
  // registered at queue time).
  void enqueue(std::unique_lock<std::mutex>& lock, const std::string& id, std::function<void()> body);
  Shard* find(const std::string& id);
  const Shard* find(const std::string& id) const;

  // Tier storage. allocate_copy evicts unheld cached copies (farthest next use first, else
  // least recently used) and, for demand fetches, waits while transfers in the tier may free
  // room. A prefetch evicts only copies used later than `self`, and never waits. An NVMe copy is
  // refused at once, with the disk-full error, when its disk has no room (check_disk_room).
  bool try_allocate(Tier tier, Copy& copy, uint64_t bytes);
  void free_copy(Shard& shard, Tier tier);
  Status allocate_copy(std::unique_lock<std::mutex>& lock, Shard& shard, Tier tier, bool prefetching);
  Shard* pick_victim(Tier tier, const Shard& self, bool prefetching);
  Status no_room(Tier tier, uint64_t bytes) const;
  Location location(Shard& shard, Tier tier);
  // The copy to read from when filling `dst`: zeros, or the fastest valid copy.
  std::optional<Tier> source_tier(const Shard& shard, Tier dst) const;

  // Fills the shard's copy in `tier` from its best source; unlocks while copying.
  Status load(std::unique_lock<std::mutex>& lock, Shard& shard, Tier tier, bool prefetching);
  // Copies the copy in `from` to the home tier; the home copy is invalid until that succeeds.
  Status copy_home(std::unique_lock<std::mutex>& lock, Shard& shard, Tier from);

  Result<ShardView> do_fetch(const std::string& id, Tier tier, Access access);
  Status do_writeback(const std::string& id);
  Status do_release(const std::string& id);
  Status do_prefetch(const std::string& id, Tier tier);
  Status do_evict(const std::string& id, Tier tier);
  // Queues prefetches for the next `prefetch_bytes` of the trace.
  void prefetch_ahead(std::unique_lock<std::mutex>& lock);

  TierBudgets budgets_;
  HostFacts host_facts_;
  std::unique_ptr<DeviceMemory> device_;
  std::unique_ptr<nvme::IoEngine> own_io_;
  nvme::IoEngine* io_ = nullptr;
  std::unique_ptr<NvmeStore> store_;
  std::optional<ArenaPool> gpu_pool_;
  std::optional<ArenaPool> pinned_pool_;
  std::vector<Block> staging_blocks_;
  uint64_t staging_bytes_ = 0;
  std::unique_ptr<Transfers> transfers_;

  mutable std::mutex mu_;
  std::condition_variable room_cv_;  // a transfer finished or a hold ended
  std::map<std::string, std::unique_ptr<Shard>> shards_;
  AccessTrace trace_;
  uint64_t use_clock_ = 0;

  std::unique_ptr<TaskQueue> tasks_;  // last: its workers stop before anything above is freed
};

}  // namespace tierzero::offload
