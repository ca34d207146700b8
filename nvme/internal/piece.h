// A request's state (detail::TicketState) and its pieces: the unit a backend transfers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "nvme/io_engine.h"

namespace tierzero::nvme {

class PosixFile;

// One contiguous transfer of at most block_size bytes. A backend moves
// [next_offset(), next_offset() + next_length()) between the file and next_buf(); completions
// advance `done` and `resume` until `need` bytes have arrived.
struct Piece {
  detail::TicketState* owner = nullptr;
  Op op = Op::kRead;
  int fd = -1;                  // descriptor the kernel transfers through
  bool direct = false;          // fd is O_DIRECT: a resubmission restarts at an aligned offset
  uint32_t align = 1;           // offset alignment of fd
  uint32_t mem_align = 1;       // buffer alignment of fd
  uint64_t offset = 0;          // file offset of the whole transfer
  std::byte* io_buf = nullptr;  // memory the kernel reads or writes (user memory or `bounce`)
  uint64_t length = 0;          // bytes of the whole transfer
  uint64_t need = 0;            // bytes from `offset` that must arrive (< length only for a bounced read tail)
  uint64_t done = 0;            // bytes from `offset` known transferred
  uint64_t resume = 0;          // where the next submission starts, relative to `offset`
  uint32_t attempts_without_progress = 0;

  // Bounce buffer: used when the user's memory is not aligned for O_DIRECT, or a read covers
  // bytes outside the user's range. user_data is the caller's memory for this piece.
  bool bounced = false;
  std::byte* user_data = nullptr;
  uint64_t user_skip = 0;   // offset of the user's bytes inside the transfer
  uint64_t user_bytes = 0;  // the user's bytes this piece carries
  AlignedBuffer bounce;

  uint64_t next_offset() const { return offset + resume; }
  std::byte* next_buf() const { return io_buf + resume; }
  uint64_t next_length() const { return length - resume; }
};

namespace detail {

// Everything about one submitted request. Kept alive by `self` until its last piece settles,
// so a caller may drop its IoTicket at once.
struct TicketState {
  FileRef file;                     // released just before completion
  PosixFile* posix_file = nullptr;  // `file` when this engine opened it (registered-file I/O), else null
  Op op = Op::kRead;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool sync_after = false;
  std::function<void(const Status&)> on_complete;
  std::chrono::steady_clock::time_point submitted;
  std::vector<Piece> pieces;  // never resized after planning: backends hold pointers into it

  std::atomic<size_t> pieces_left{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> complete{false};
  std::atomic<uint64_t> bytes_done{0};

  std::mutex mu;
  std::condition_variable cv;
  Status status;  // guarded by mu; final once complete
  std::chrono::nanoseconds elapsed{0};
  std::shared_ptr<TicketState> self;

  // Records that one piece is settled with `piece_status`; the last one syncs the file when
  // asked, completes the request and releases `self`. The first error wins.
  void piece_settled(const Piece& piece, const Status& piece_status);
  // Completes a request that has no pieces (an invalid or empty one) with `final_status`.
  void complete_now(const Status& final_status);
};

}  // namespace detail

// Prepares a piece for its first submission: allocates its bounce buffer and, for a write,
// copies the user's bytes in. Returns kResourceExhausted when the bounce cannot be allocated.
Status stage_piece(Piece& piece);

// Returns the raw `result` of a completion of `piece`'s current transfer, or what the test fault
// injector in place (testing/fault_injection.h) makes of it.
int64_t apply_injected_fault(const Piece& piece, int64_t result);

// Settles a completion of `piece` with raw kernel result `result` (bytes or -errno): applies the
// test fault injector, classifies it, copies bounced read data out, and tells the ticket. Returns
// true when the piece must be submitted again for its remainder.
bool settle_completion(Piece& piece, int64_t result);

// Settles a piece that will not be submitted because its request already failed or the backend
// cannot take it; `why` is recorded only if the request has no error yet.
void abandon_piece(Piece& piece, const Status& why);

}  // namespace tierzero::nvme
