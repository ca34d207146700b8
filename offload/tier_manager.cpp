// The tier manager's set-up, registry and manifests. Residency (fetch, writeback, release,
// prefetch, eviction) is in residency.cpp.
#include "common/common.h"
#include "offload/internal/tier_manager_impl.h"

namespace tierzero::offload {

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::kGpu: return "gpu";
    case Tier::kPinned: return "pinned";
    case Tier::kNvme: return "nvme";
  }
  return "?";
}

Result<std::unique_ptr<TierManager>> TierManager::create(const TierBudgets& budgets, nvme::IoEngine* io) {
  return TierManagerImpl::create(budgets, io);
}

Result<std::unique_ptr<TierManager>> TierManagerImpl::create(const TierBudgets& budgets, nvme::IoEngine* io) {
  std::unique_ptr<TierManagerImpl> manager(new TierManagerImpl(budgets));
  Status s = manager->init(io);
  if (!s.ok()) return s.with_context("tier manager start-up");
  return std::unique_ptr<TierManager>(std::move(manager));
}

Status TierManagerImpl::init(nvme::IoEngine* io) {
  const TierBudgets& b = budgets_;
  TZ_ASSIGN_OR_RETURN(host_facts_, read_host_facts());
  TZ_ASSIGN_OR_RETURN(device_, make_device_memory(b.device, b.cuda_device, scoped_host_copy_latency()));
  const bool has_nvme = b.nvme_bytes > 0;
  staging_bytes_ = has_nvme ? uint64_t{b.transfer_threads} * b.pipeline_depth * b.chunk_bytes : 0;
  TZ_RETURN_IF_ERROR(check_budgets(b, staging_bytes_, host_facts_, *device_));

  if (has_nvme) {
    if (io == nullptr) {
      TZ_ASSIGN_OR_RETURN(own_io_, nvme::IoEngine::create(b.io));
      io = own_io_.get();
    }
    io_ = io;
    TZ_ASSIGN_OR_RETURN(store_, NvmeStore::create(b, *io_));
  }
  DeviceMemory* device = device_.get();
  if (b.gpu_bytes > 0) {
    Result<ArenaPool> pool = ArenaPool::create(
        b.gpu_bytes, b.gpu_bytes, [device](uint64_t n) { return device->allocate_device(n); },
        [device](void* p, uint64_t n) { device->free_device(p, n); });
    if (!pool.ok()) return pool.status().with_context("GPU tier (gpu_bytes " + format_bytes(b.gpu_bytes) + ")");
    gpu_pool_.emplace(std::move(pool).value());
  }
  if (b.pinned_bytes > 0) {
    const bool lock = b.lock_host_memory;
    Result<ArenaPool> pool = ArenaPool::create(
        b.pinned_bytes, b.pinned_arena_bytes, [device, lock](uint64_t n) { return device->allocate_pinned(n, lock); },
        [device](void* p, uint64_t n) { device->free_pinned(p, n); });
    if (!pool.ok())
      return pool.status().with_context("pinned tier (pinned_bytes " + format_bytes(b.pinned_bytes) + ")");
    pinned_pool_.emplace(std::move(pool).value());
    if (io_) {
      for (const ArenaPool::Arena& arena : pinned_pool_->arenas()) {
        TZ_RETURN_IF_ERROR(
            io_->register_buffer(arena.data, arena.bytes).with_context("registering a pinned arena for I/O"));
      }
    }
  }
  std::vector<StagingSet> staging;
  for (uint32_t t = 0; has_nvme && t < b.transfer_threads; ++t) {
    StagingSet set;
    for (uint32_t d = 0; d < b.pipeline_depth; ++d) {
      std::optional<Block> block = pinned_pool_->allocate(b.chunk_bytes, 4096);  // O_DIRECT zero-copy
      if (!block)
        return internal_error(
            "staging buffers do not fit the pinned arenas; make pinned_arena_bytes a multiple of chunk_bytes");
      staging_blocks_.push_back(*block);
      set.buffers.push_back(static_cast<std::byte*>(block->data));
      TZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> event, device_->create_event());
      set.events.push_back(std::move(event));
    }
    staging.push_back(std::move(set));
  }
  transfers_ = std::make_unique<Transfers>(*device_, store_.get(), b.chunk_bytes, std::move(staging));
  tasks_ = std::make_unique<TaskQueue>(b.transfer_threads);
  return {};
}

TierManagerImpl::~TierManagerImpl() {
  tasks_.reset();
  std::lock_guard lock(mu_);
  for (auto& [id, shard] : shards_) {
    for (int t = 0; t < kTierCount; ++t) free_copy(*shard, static_cast<Tier>(t));
  }
  for (const Block& block : staging_blocks_) pinned_pool_->free(block);
  if (io_ && pinned_pool_) {
    for (const ArenaPool::Arena& arena : pinned_pool_->arenas()) (void)io_->unregister_buffer(arena.data);
  }
}

std::string TierManagerImpl::budget_statement() const {
  std::string s = "gpu: budget " + format_bytes(budgets_.gpu_bytes) + " on " + device_->description();
  if (Result<uint64_t> free = device_->free_bytes(); free.ok()) s += ", " + format_bytes(*free) + " free";
  s += "\npinned: budget " + format_bytes(budgets_.pinned_bytes) + " in " +
       std::to_string(pinned_pool_ ? pinned_pool_->arenas().size() : 0) + " arena(s) of " +
       (device_->is_gpu()           ? "huge-page host memory registered with CUDA"
        : budgets_.lock_host_memory ? "mlock'ed host memory"
                                    : "host memory") +
       ", " + format_bytes(staging_bytes_) + " of it staging; MemAvailable " + format_bytes(host_facts_.mem_available) +
       ", RLIMIT_MEMLOCK " + describe_memlock(host_facts_);
  s += "\n" + (store_ ? store_->describe() : std::string("nvme: budget 0 B (no NVMe tier)"));
  return s;
}

Shard* TierManagerImpl::find(const std::string& id) {
  auto it = shards_.find(id);
  return it == shards_.end() ? nullptr : it->second.get();
}

const Shard* TierManagerImpl::find(const std::string& id) const {
  auto it = shards_.find(id);
  return it == shards_.end() ? nullptr : it->second.get();
}

Status TierManagerImpl::register_shard(const ShardSpec& spec) {
  if (spec.bytes == 0) return invalid_argument("shard " + spec.id + " has 0 bytes");
  std::unique_lock lock(mu_);
  if (find(spec.id)) return invalid_argument("shard " + spec.id + " is already registered");
  auto owned = std::make_unique<Shard>();
  Shard& shard = *owned;
  shard.spec = spec;
  Status s = allocate_copy(lock, shard, spec.home, false);
  if (!s.ok())
    return s.with_context("registering shard " + spec.id + " (" + format_bytes(spec.bytes) + ", home " +
                          tier_name(spec.home) + ")");
  shard.copies[static_cast<int>(spec.home)].valid = true;
  if (spec.home != Tier::kNvme) {
    // Zero the home copy now so every later source is real bytes; NVMe stays implicit zeros.
    Location home = location(shard, spec.home);
    lock.unlock();
    s = transfers_->copy(Location{spec.home, nullptr, nullptr, true}, home, spec.bytes);
    lock.lock();
    if (!s.ok()) {
      free_copy(shard, spec.home);
      return s.with_context("zeroing shard " + spec.id);
    }
    shard.has_data = true;
  }
  if (find(spec.id)) {  // registered by another thread while this one was unlocked
    free_copy(shard, spec.home);
    return invalid_argument("shard " + spec.id + " is already registered");
  }
  std::promise<void> done;
  done.set_value();
  shard.last_op = done.get_future().share();
  shards_.emplace(spec.id, std::move(owned));
  return {};
}

Status TierManagerImpl::unregister_shard(const std::string& id) {
  std::promise<Status> result;
  std::future<Status> future = result.get_future();
  {
    std::unique_lock lock(mu_);
    if (!find(id)) return not_found("shard " + id + " is not registered");
    enqueue(lock, id, [this, id, &result] {
      std::lock_guard inner(mu_);
      Shard* shard = find(id);
      if (!shard) {
        result.set_value(not_found("shard " + id + " is not registered"));
      } else if (shard->held) {
        result.set_value(invalid_argument("shard " + id + " is held in tier " + tier_name(shard->held_tier) +
                                          "; release it before unregistering"));
      } else {
        for (int t = 0; t < kTierCount; ++t) free_copy(*shard, static_cast<Tier>(t));
        shards_.erase(id);
        room_cv_.notify_all();
        result.set_value(Status());
      }
    });
  }
  return future.get();
}

void TierManagerImpl::begin_trace() {
  std::lock_guard lock(mu_);
  trace_.begin();
}

void TierManagerImpl::end_trace() {
  std::lock_guard lock(mu_);
  trace_.end();
}

Result<ShardInfo> TierManagerImpl::info(const std::string& id) const {
  std::lock_guard lock(mu_);
  const Shard* shard = find(id);
  if (!shard) return not_found("shard " + id + " is not registered");
  ShardInfo out;
  out.spec = shard->spec;
  out.version = shard->version;
  for (int t = 0; t < kTierCount; ++t) out.valid[t] = shard->copies[t].valid && !shard->copies[t].loading;
  out.has_current_tier = shard->held;
  out.current_tier = shard->held_tier;
  out.holds = shard->holds;
  out.write_hold = shard->write_hold;
  return out;
}

TierUsage TierManagerImpl::usage(Tier tier) const {
  std::lock_guard lock(mu_);
  TierUsage u;
  switch (tier) {
    case Tier::kGpu:
      u.budget_bytes = budgets_.gpu_bytes;
      u.used_bytes = gpu_pool_ ? gpu_pool_->used() : 0;
      break;
    case Tier::kPinned:
      u.budget_bytes = budgets_.pinned_bytes;
      u.reserved_bytes = staging_bytes_;
      u.used_bytes = pinned_pool_ ? pinned_pool_->used() - staging_bytes_ : 0;
      break;
    case Tier::kNvme:
      u.budget_bytes = store_ ? store_->capacity() : 0;
      u.used_bytes = store_ ? store_->used() : 0;
      break;
  }
  return u;
}

std::vector<NvmeShardRecord> TierManagerImpl::nvme_manifest() const {
  std::lock_guard lock(mu_);
  std::vector<NvmeShardRecord> out;
  for (const auto& [id, shard] : shards_) {
    const Copy& copy = shard->copies[static_cast<int>(Tier::kNvme)];
    if (!copy.valid || copy.loading || !shard->has_data) continue;
    out.push_back({shard->spec, shard->version, store_->stripe_bytes(), store_->parts(copy.extent)});
  }
  return out;
}

Status TierManagerImpl::attach_nvme(const std::vector<NvmeShardRecord>& records) {
  std::lock_guard lock(mu_);
  if (!store_) return invalid_argument("attach_nvme: this manager has no NVMe tier (nvme_bytes is 0)");
  for (const NvmeShardRecord& record : records) {
    const std::string& id = record.spec.id;
    if (record.spec.home != Tier::kNvme) return invalid_argument("attach_nvme: shard " + id + " is not NVMe-homed");
    if (find(id)) return invalid_argument("attach_nvme: shard " + id + " is already registered");
    TZ_ASSIGN_OR_RETURN(NvmeExtent extent, store_->claim(record));
    auto shard = std::make_unique<Shard>();
    shard->spec = record.spec;
    shard->version = record.version;
    shard->has_data = true;
    Copy& copy = shard->copies[static_cast<int>(Tier::kNvme)];
    copy.present = copy.valid = true;
    copy.extent = std::move(extent);
    std::promise<void> done;
    done.set_value();
    shard->last_op = done.get_future().share();
    shards_.emplace(id, std::move(shard));
  }
  return {};
}

}  // namespace tierzero::offload
