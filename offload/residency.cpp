// Residency: fetch, writeback, release and prefetch, tier allocation and eviction.
#include <algorithm>

#include "common/common.h"
#include "offload/internal/tier_manager_impl.h"

namespace tierzero::offload {
namespace {

int idx(Tier tier) { return static_cast<int>(tier); }

// Source preference when filling a copy: pinned (one hop to anywhere), then GPU, then NVMe.
constexpr Tier kSourceOrder[] = {Tier::kPinned, Tier::kGpu, Tier::kNvme};

const char* budget_knob(Tier tier) {
  switch (tier) {
    case Tier::kGpu: return "gpu_bytes";
    case Tier::kPinned: return "pinned_bytes";
    case Tier::kNvme: return "nvme_bytes";
  }
  return "?";
}

}  // namespace

void TierManagerImpl::enqueue(std::unique_lock<std::mutex>&, const std::string& id, std::function<void()> body) {
  std::shared_future<void> previous;
  auto done = std::make_shared<std::promise<void>>();
  if (Shard* shard = find(id)) {
    previous = shard->last_op;
    shard->last_op = done->get_future().share();
  }
  tasks_->push([previous = std::move(previous), done, body = std::move(body)] {
    if (previous.valid()) previous.wait();
    body();
    done->set_value();
  });
}

// ---- storage -------------------------------------------------------------------------------

bool TierManagerImpl::try_allocate(Tier tier, Copy& copy, uint64_t bytes) {
  switch (tier) {
    case Tier::kGpu:
    case Tier::kPinned: {
      std::optional<ArenaPool>& pool = tier == Tier::kGpu ? gpu_pool_ : pinned_pool_;
      if (!pool) return false;
      std::optional<Block> block = pool->allocate(bytes);
      if (!block) return false;
      copy.block = *block;
      return true;
    }
    case Tier::kNvme: {
      if (!store_) return false;
      Result<NvmeExtent> extent = store_->allocate(bytes);
      if (!extent.ok()) return false;
      copy.extent = std::move(extent).value();
      return true;
    }
  }
  return false;
}

void TierManagerImpl::free_copy(Shard& shard, Tier tier) {
  Copy& copy = shard.copies[idx(tier)];
  if (copy.present) {
    if (tier == Tier::kNvme) {
      store_->free(copy.extent);
    } else {
      (tier == Tier::kGpu ? gpu_pool_ : pinned_pool_)->free(copy.block);
    }
  }
  const bool queued = copy.prefetch_queued;
  copy = Copy();
  copy.prefetch_queued = queued;
}

Shard* TierManagerImpl::pick_victim(Tier tier, const Shard& self, bool prefetching) {
  const uint64_t self_next = prefetching ? trace_.next_use(self.spec.id) : 0;
  Shard* best = nullptr;
  uint64_t best_next = 0, best_last = 0;
  for (auto& [id, owned] : shards_) {
    Shard& s = *owned;
    const Copy& c = s.copies[idx(tier)];
    const Copy& home = s.copies[idx(s.spec.home)];
    if (&s == &self || s.spec.home == tier || !c.present || !c.valid || c.loading || c.busy > 0) continue;
    if (s.held && s.held_tier == tier) continue;
    if (!home.valid || home.loading) continue;  // never drop the last whole copy
    const uint64_t next = trace_.next_use(id);
    if (prefetching && next <= self_next) continue;
    if (!best || next > best_next || (next == best_next && c.last_use < best_last)) {
      best = &s;
      best_next = next;
      best_last = c.last_use;
    }
  }
  return best;
}

Status TierManagerImpl::no_room(Tier tier, uint64_t bytes) const {
  uint64_t held = 0, home = 0, moving = 0;
  for (const auto& [id, s] : shards_) {
    const Copy& c = s->copies[idx(tier)];
    if (!c.present) continue;
    if (s->spec.home == tier) {
      home += s->spec.bytes;
    } else if (s->held && s->held_tier == tier) {
      held += s->spec.bytes;
    } else if (c.loading || c.busy > 0) {
      moving += s->spec.bytes;
    }
  }
  const uint64_t budget = tier == Tier::kGpu      ? budgets_.gpu_bytes
                          : tier == Tier::kPinned ? budgets_.pinned_bytes - staging_bytes_
                                                  : (store_ ? store_->capacity() : 0);
  return out_of_space(std::string(tier_name(tier)) + " tier full: " + format_bytes(bytes) + " needed; budget " +
                      format_bytes(budget) + " holds " + format_bytes(home) + " of home copies, " + format_bytes(held) +
                      " of fetched (held) copies and " + format_bytes(moving) +
                      " in transfer, and no cached copy can be evicted; release shards or raise " + budget_knob(tier));
}

Status TierManagerImpl::allocate_copy(std::unique_lock<std::mutex>& lock, Shard& shard, Tier tier, bool prefetching) {
  Copy& copy = shard.copies[idx(tier)];
  if (tier == Tier::kNvme && store_) TZ_RETURN_IF_ERROR(store_->check_disk_room(shard.spec.bytes));
  for (;;) {
    if (try_allocate(tier, copy, shard.spec.bytes)) {
      copy.present = true;
      return {};
    }
    if (Shard* victim = pick_victim(tier, shard, prefetching)) {
      free_copy(*victim, tier);
      continue;
    }
    const bool transfers_running = std::any_of(shards_.begin(), shards_.end(), [&](const auto& entry) {
      const Copy& c = entry.second->copies[idx(tier)];
      return c.loading || c.busy > 0;
    });
    if (prefetching || !transfers_running) return no_room(tier, shard.spec.bytes);
    room_cv_.wait(lock);
  }
}

Location TierManagerImpl::location(Shard& shard, Tier tier) {
  Copy& copy = shard.copies[idx(tier)];
  return Location{tier, copy.block.data, &copy.extent, false};
}

std::optional<Tier> TierManagerImpl::source_tier(const Shard& shard, Tier dst) const {
  for (Tier t : kSourceOrder) {
    const Copy& c = shard.copies[idx(t)];
    if (t != dst && c.valid && !c.loading) return t;
  }
  return std::nullopt;
}

// ---- transfers -----------------------------------------------------------------------------

Status TierManagerImpl::load(std::unique_lock<std::mutex>& lock, Shard& shard, Tier tier, bool prefetching) {
  Copy& dst = shard.copies[idx(tier)];
  if (!dst.present) TZ_RETURN_IF_ERROR(allocate_copy(lock, shard, tier, prefetching));
  std::optional<Tier> from;
  if (shard.has_data) {
    from = source_tier(shard, tier);
    if (!from) return internal_error("shard " + shard.spec.id + " has no whole copy to load from");
  }
  const Location src = from ? location(shard, *from) : Location{tier, nullptr, nullptr, true};
  const Location to = location(shard, tier);
  if (from) ++shard.copies[idx(*from)].busy;
  dst.loading = true;
  lock.unlock();
  Status status = transfers_->copy(src, to, shard.spec.bytes);
  lock.lock();
  if (from) --shard.copies[idx(*from)].busy;
  dst.loading = false;
  if (status.ok()) {
    dst.valid = true;
    dst.last_use = ++use_clock_;
  } else if (tier != shard.spec.home) {
    free_copy(shard, tier);
  }
  room_cv_.notify_all();
  return status;
}

Status TierManagerImpl::copy_home(std::unique_lock<std::mutex>& lock, Shard& shard, Tier from) {
  const Tier home_tier = shard.spec.home;
  Copy& home = shard.copies[idx(home_tier)];
  Copy& src = shard.copies[idx(from)];
  const Location src_at = location(shard, from);
  const Location home_at = location(shard, home_tier);
  home.valid = false;
  home.loading = true;
  ++src.busy;
  lock.unlock();
  Status status = transfers_->copy(src_at, home_at, shard.spec.bytes, /*after_caller_writes=*/true);
  lock.lock();
  --src.busy;
  home.loading = false;
  if (status.ok()) {
    home.valid = true;
    shard.has_data = true;
  }
  room_cv_.notify_all();
  if (!status.ok()) {
    return status.with_context("writing shard " + shard.spec.id + " back to its home tier " + tier_name(home_tier) +
                               "; its data is still whole in tier " + tier_name(from));
  }
  return status;
}

// ---- operations ----------------------------------------------------------------------------

Result<ShardView> TierManagerImpl::do_fetch(const std::string& id, Tier tier, Access access) {
  std::unique_lock lock(mu_);
  Shard* shard = find(id);
  if (!shard) return not_found("fetch: shard " + id + " is not registered");
  const bool tier_configured = tier == Tier::kGpu      ? gpu_pool_.has_value()
                               : tier == Tier::kPinned ? pinned_pool_.has_value()
                                                       : store_ != nullptr;
  if (!tier_configured) {
    return invalid_argument(std::string("fetch: tier ") + tier_name(tier) + " has no budget; set " + budget_knob(tier));
  }
  if (shard->held && shard->held_tier != tier) {
    return invalid_argument("fetch: shard " + id + " is held in tier " + tier_name(shard->held_tier) +
                            "; release it before fetching it to " + tier_name(tier));
  }
  if (shard->held && (shard->write_hold || access == Access::kWrite)) {
    return invalid_argument("fetch: shard " + id + " is held" + (shard->write_hold ? " for writing" : "") +
                            "; a write hold is exclusive: release it first");
  }
  Copy& copy = shard->copies[idx(tier)];
  if (!copy.valid) {
    Status s = load(lock, *shard, tier, false);
    if (!s.ok()) return s.with_context("fetching shard " + id + " to " + tier_name(tier));
  }
  if (access == Access::kWrite) {
    for (int t = 0; t < kTierCount; ++t) {
      if (t != idx(tier) && t != idx(shard->spec.home)) free_copy(*shard, static_cast<Tier>(t));
    }
    shard->write_hold = true;
    shard->written_back = false;
  }
  shard->held = true;
  shard->held_tier = tier;
  ++shard->holds;
  copy.last_use = ++use_clock_;
  return ShardView{tier == Tier::kNvme ? nullptr : copy.block.data, shard->spec.bytes, tier, shard->version};
}

Status TierManagerImpl::do_writeback(const std::string& id) {
  std::unique_lock lock(mu_);
  Shard* shard = find(id);
  if (!shard) return not_found("writeback: shard " + id + " is not registered");
  const Tier home = shard->spec.home;
  if (shard->write_hold) {
    if (shard->held_tier != home) TZ_RETURN_IF_ERROR(copy_home(lock, *shard, shard->held_tier));
    ++shard->version;
    shard->written_back = true;
    return {};
  }
  if (shard->copies[idx(home)].valid) return {};
  std::optional<Tier> from = source_tier(*shard, home);
  if (!from) return internal_error("writeback: shard " + id + " has no whole copy in any tier");
  return copy_home(lock, *shard, *from);
}

Status TierManagerImpl::do_release(const std::string& id) {
  std::unique_lock lock(mu_);
  Shard* shard = find(id);
  if (!shard) return not_found("release: shard " + id + " is not registered");
  if (!shard->held)
    return invalid_argument("release: shard " + id + " is not held; pair each release() with a fetch()");
  Status status;
  if (shard->write_hold && !shard->written_back) {
    lock.unlock();
    status = do_writeback(id);  // the shard cannot go away meanwhile: its operations are chained
    lock.lock();
  }
  if (--shard->holds == 0) {
    shard->held = false;
    shard->write_hold = false;
    shard->written_back = false;
  }
  room_cv_.notify_all();
  return status.with_context("releasing shard " + id);
}

Status TierManagerImpl::do_prefetch(const std::string& id, Tier tier) {
  std::unique_lock lock(mu_);
  Shard* shard = find(id);
  if (!shard) return {};
  Copy& copy = shard->copies[idx(tier)];
  copy.prefetch_queued = false;
  const bool tier_configured = tier == Tier::kGpu      ? gpu_pool_.has_value()
                               : tier == Tier::kPinned ? pinned_pool_.has_value()
                                                       : store_ != nullptr;
  if (!tier_configured || shard->held || copy.valid) return {};
  if (!copy.present && !allocate_copy(lock, *shard, tier, true).ok()) return {};  // no room: skip
  Status s = load(lock, *shard, tier, true);
  return s.with_context("prefetching shard " + id + " to " + tier_name(tier));
}

Status TierManagerImpl::do_evict(const std::string& id, Tier tier) {
  std::lock_guard lock(mu_);
  Shard* shard = find(id);
  if (!shard) return not_found("evict: shard " + id + " is not registered");
  if (tier == shard->spec.home) {
    return invalid_argument(std::string("evict: ") + tier_name(tier) + " is the home tier of shard " + id +
                            "; its home copy stays until unregister_shard");
  }
  if (shard->held && shard->held_tier == tier) {
    return invalid_argument("evict: shard " + id + " is held in " + tier_name(tier) + "; release it first");
  }
  const Copy& copy = shard->copies[idx(tier)];
  if (copy.valid && !shard->copies[idx(shard->spec.home)].valid) {
    return invalid_argument("evict: the " + std::string(tier_name(tier)) + " copy is the last whole copy of shard " +
                            id + " (its writeback failed); call writeback(" + id + ") first");
  }
  free_copy(*shard, tier);
  room_cv_.notify_all();
  return {};
}

void TierManagerImpl::prefetch_ahead(std::unique_lock<std::mutex>& lock) {
  if (budgets_.prefetch_bytes == 0) return;
  auto bytes_of = [this](const std::string& id) {
    const Shard* s = find(id);
    return s ? s->spec.bytes : 0;
  };
  for (const AccessTrace::Entry* entry : trace_.upcoming(budgets_.prefetch_bytes, bytes_of)) {
    Shard* shard = find(entry->id);
    if (!shard) continue;
    Copy& copy = shard->copies[idx(entry->tier)];
    if (copy.valid || copy.loading || copy.prefetch_queued || shard->held) continue;
    copy.prefetch_queued = true;
    const std::string id = entry->id;
    const Tier tier = entry->tier;
    enqueue(lock, id, [this, id, tier] { (void)do_prefetch(id, tier); });  // a failed prefetch is retried by its fetch
  }
}

// ---- public entry points -------------------------------------------------------------------

std::future<Result<ShardView>> TierManagerImpl::fetch(const std::string& id, Tier tier, Access access) {
  auto result = std::make_shared<std::promise<Result<ShardView>>>();
  std::future<Result<ShardView>> future = result->get_future();
  std::unique_lock lock(mu_);
  trace_.on_fetch(id, tier);
  enqueue(lock, id, [this, id, tier, access, result] { result->set_value(do_fetch(id, tier, access)); });
  if (trace_.replaying()) prefetch_ahead(lock);
  return future;
}

std::future<Status> TierManagerImpl::writeback(const std::string& id) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> future = result->get_future();
  std::unique_lock lock(mu_);
  enqueue(lock, id, [this, id, result] { result->set_value(do_writeback(id)); });
  return future;
}

std::future<Status> TierManagerImpl::release(const std::string& id) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> future = result->get_future();
  std::unique_lock lock(mu_);
  enqueue(lock, id, [this, id, result] { result->set_value(do_release(id)); });
  return future;
}

std::future<Status> TierManagerImpl::evict(const std::string& id, Tier tier) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> future = result->get_future();
  std::unique_lock lock(mu_);
  enqueue(lock, id, [this, id, tier, result] { result->set_value(do_evict(id, tier)); });
  return future;
}

std::future<Status> TierManagerImpl::prefetch(const std::vector<std::string>& ids, Tier tier) {
  struct Pending {
    std::mutex mu;
    Status first;
    size_t left;
    std::promise<Status> result;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = ids.size();
  std::future<Status> future = pending->result.get_future();
  if (ids.empty()) {
    pending->result.set_value(Status());
    return future;
  }
  std::unique_lock lock(mu_);
  for (const std::string& id : ids) {
    if (Shard* shard = find(id)) shard->copies[idx(tier)].prefetch_queued = true;
    enqueue(lock, id, [this, id, tier, pending] {
      Status s = do_prefetch(id, tier);
      std::lock_guard inner(pending->mu);
      if (pending->first.ok() && !s.ok()) pending->first = s;
      if (--pending->left == 0) pending->result.set_value(pending->first);
    });
  }
  return future;
}

}  // namespace tierzero::offload
