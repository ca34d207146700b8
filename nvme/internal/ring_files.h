// Registered (fixed) files of one io_uring ring: descriptors installed in the ring's file table
// on first use, removed when their File closes.
#pragma once

#include <liburing.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nvme/internal/posix_file.h"

namespace tierzero::nvme {

class RingFiles : public std::enable_shared_from_this<RingFiles> {
 public:
  static constexpr unsigned kSlots = 64;

  // Reserves the ring's sparse file table; false when the kernel cannot (before 5.19), and
  // then slot_for() always answers -1.
  bool init(io_uring* ring);
  // The table slot of `fd` of `file`, registering it when there is room; -1 to use the plain
  // descriptor. Called by the ring's thread while a request holds the file open.
  int slot_for(PosixFile& file, int fd);
  // Stops touching the ring (its driver is going away).
  void detach();

 private:
  void forget(int fd);

  std::mutex mu_;
  io_uring* ring_ = nullptr;
  std::unordered_map<int, int> slot_of_fd_;
  std::vector<int> free_slots_;
};

}  // namespace tierzero::nvme
