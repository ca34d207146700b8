// Buffers the caller registered for fixed-buffer I/O, and the rings that mirror them.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <vector>

#include "common/common.h"

namespace tierzero::nvme {

class BufferRegistry {
 public:
  // Slots each ring reserves; a registration takes one per GiB (the kernel's per-buffer limit).
  static constexpr uint32_t kSlots = 64;
  static constexpr uint64_t kMaxSlotBytes = uint64_t{1} << 30;

  // A ring mirroring the table. set_slot(slot, base, bytes) installs a buffer (bytes 0 clears it)
  // and returns the kernel's refusal, if any. Called with the registry locked.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual Status set_slot(uint32_t slot, void* base, uint64_t bytes) = 0;
  };

  void add_listener(Listener* listener);
  void remove_listener(Listener* listener);

  // Registers [base, base + bytes) with every listener. When a ring refuses (e.g. RLIMIT_MEMLOCK),
  // the range stays unregistered (I/O on it still works, without fixed buffers) and one notice
  // goes to stderr; kResourceExhausted only when the table is full. Ok for an already
  // registered base.
  Status add(void* base, uint64_t bytes);
  // Unregisters the range starting at `base`; ok (nothing to do) when it is not registered,
  // as after a refused registration. No request using the range may be in flight.
  Status remove(void* base);
  // The slot holding all of [p, p + bytes), or -1.
  int find(const void* p, uint64_t bytes) const;

 private:
  struct Entry {
    std::byte* base = nullptr;  // null: free slot
    uint64_t bytes = 0;
    std::byte* owner = nullptr;  // base passed to add(); a range over 1 GiB spans several slots
  };
  void clear_slot(uint32_t slot);

  mutable std::shared_mutex mu_;
  std::vector<Entry> slots_ = std::vector<Entry>(kSlots);
  std::vector<Listener*> listeners_;
};

}  // namespace tierzero::nvme
