// The fixed-buffer table shared by an engine's io_uring rings.
#include "nvme/internal/buffer_registry.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

namespace tierzero::nvme {

void BufferRegistry::add_listener(Listener* listener) {
  std::unique_lock lock(mu_);
  listeners_.push_back(listener);
}

void BufferRegistry::remove_listener(Listener* listener) {
  std::unique_lock lock(mu_);
  std::erase(listeners_, listener);
}

void BufferRegistry::clear_slot(uint32_t slot) {
  for (Listener* l : listeners_) (void)l->set_slot(slot, nullptr, 0);
  slots_[slot] = Entry{};
}

Status BufferRegistry::add(void* base, uint64_t bytes) {
  auto* owner = static_cast<std::byte*>(base);
  std::unique_lock lock(mu_);
  if (std::any_of(slots_.begin(), slots_.end(), [&](const Entry& e) { return e.owner == owner; })) return {};
  const uint64_t chunks = (bytes + kMaxSlotBytes - 1) / kMaxSlotBytes;
  std::vector<uint32_t> free_slots;
  for (uint32_t s = 0; s < kSlots && free_slots.size() < chunks; ++s) {
    if (slots_[s].base == nullptr) free_slots.push_back(s);
  }
  if (free_slots.size() < chunks) {
    return resource_exhausted("cannot register a " + std::to_string(bytes) + "-byte buffer: the " +
                              std::to_string(kSlots) + " fixed-buffer slots are taken; unregister buffers first");
  }
  for (uint64_t i = 0; i < chunks; ++i) {
    const uint32_t slot = free_slots[i];
    std::byte* chunk = owner + i * kMaxSlotBytes;
    const uint64_t chunk_bytes = std::min(kMaxSlotBytes, bytes - i * kMaxSlotBytes);
    slots_[slot] = Entry{chunk, chunk_bytes, owner};
    for (Listener* l : listeners_) {
      if (Status s = l->set_slot(slot, chunk, chunk_bytes); !s.ok()) {
        for (uint64_t j = 0; j <= i; ++j) clear_slot(free_slots[j]);
        static std::once_flag told;
        std::call_once(told, [&] {
          std::fprintf(stderr, "tierzero: nvme: fixed buffers unavailable (%s); using ordinary I/O\n",
                       s.message().c_str());
        });
        return {};
      }
    }
  }
  return {};
}

Status BufferRegistry::remove(void* base) {
  auto* owner = static_cast<std::byte*>(base);
  std::unique_lock lock(mu_);
  for (uint32_t s = 0; s < kSlots; ++s) {
    if (slots_[s].owner == owner) clear_slot(s);
  }
  return {};
}

int BufferRegistry::find(const void* p, uint64_t bytes) const {
  const auto* b = static_cast<const std::byte*>(p);
  std::shared_lock lock(mu_);
  for (uint32_t s = 0; s < kSlots; ++s) {
    const Entry& e = slots_[s];
    if (e.base != nullptr && b >= e.base && b + bytes <= e.base + e.bytes) return static_cast<int>(s);
  }
  return -1;
}

}  // namespace tierzero::nvme
