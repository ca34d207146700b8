// The io_uring registered-file table, kept in step with file lifetimes.
#include "nvme/internal/ring_files.h"

namespace tierzero::nvme {

bool RingFiles::init(io_uring* ring) {
  if (io_uring_register_files_sparse(ring, kSlots) < 0) return false;
  std::lock_guard lock(mu_);
  ring_ = ring;
  for (int s = kSlots - 1; s >= 0; --s) free_slots_.push_back(s);
  return true;
}

int RingFiles::slot_for(PosixFile& file, int fd) {
  std::lock_guard lock(mu_);
  if (ring_ == nullptr) return -1;
  if (auto it = slot_of_fd_.find(fd); it != slot_of_fd_.end()) return it->second;
  if (free_slots_.empty()) return -1;
  const int slot = free_slots_.back();
  if (io_uring_register_files_update(ring_, static_cast<unsigned>(slot), &fd, 1) != 1) return -1;
  free_slots_.pop_back();
  slot_of_fd_[fd] = slot;
  file.on_close([weak = weak_from_this(), fd] {
    if (auto table = weak.lock()) table->forget(fd);
  });
  return slot;
}

void RingFiles::forget(int fd) {
  std::lock_guard lock(mu_);
  auto it = slot_of_fd_.find(fd);
  if (it == slot_of_fd_.end()) return;
  if (ring_ != nullptr) {
    int none = -1;
    (void)io_uring_register_files_update(ring_, static_cast<unsigned>(it->second), &none, 1);
  }
  free_slots_.push_back(it->second);
  slot_of_fd_.erase(it);
}

void RingFiles::detach() {
  std::lock_guard lock(mu_);
  ring_ = nullptr;
}

}  // namespace tierzero::nvme
