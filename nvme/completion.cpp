// The one function that classifies a piece's completion.
#include "nvme/internal/completion.h"

#include <cerrno>

#include "nvme/internal/alignment.h"

namespace tierzero::nvme {

namespace {

constexpr uint32_t kMaxAttemptsWithoutProgress = 8;

const char* op_name(Op op) { return op == Op::kRead ? "read" : "write"; }

std::string transfer_text(const Piece& p) {
  return std::string(op_name(p.op)) + " of " + std::to_string(p.next_length()) + " bytes at offset " +
         std::to_string(p.next_offset()) + " of " + p.owner->file->path();
}

// A read came back short: kCorrupt when the file really ends before the needed bytes.
Status check_end_of_file(const Piece& p) {
  Result<uint64_t> size = p.owner->file->size();
  if (!size.ok()) return size.status();
  const uint64_t needed_end = p.offset + p.need;
  if (*size >= needed_end) return {};
  const detail::TicketState& r = *p.owner;
  return corrupt(r.file->path() + " is shorter than asked: reading " + std::to_string(r.length) + " bytes at offset " +
                 std::to_string(r.offset) + " needs the file to reach byte " + std::to_string(needed_end) +
                 ", but it ends at " + std::to_string(*size) + " (end-of-file); check the file was written completely");
}

}  // namespace

PieceVerdict classify_completion(Piece& p, int64_t result) {
  if (result < 0) {
    const int err = static_cast<int>(-result);
    if ((err == EINTR || err == EAGAIN) && ++p.attempts_without_progress < kMaxAttemptsWithoutProgress) {
      return {PieceStep::kResubmit, {}};
    }
    return {PieceStep::kFailed, errno_status(err, transfer_text(p) + " failed")};
  }
  const auto count = static_cast<uint64_t>(result);
  if (count > p.next_length()) {
    return {PieceStep::kFailed,
            internal_error(transfer_text(p) + " reported " + std::to_string(count) + " bytes, more than asked")};
  }
  const uint64_t reached = p.resume + count;
  if (reached >= p.need) {
    p.done = reached;
    return {PieceStep::kComplete, {}};
  }
  if (p.op == Op::kRead) {
    if (Status eof = check_end_of_file(p); !eof.ok()) return {PieceStep::kFailed, eof};
  }
  if (reached > p.done) {
    p.done = reached;
    p.attempts_without_progress = 0;
  } else if (++p.attempts_without_progress >= kMaxAttemptsWithoutProgress) {
    return {PieceStep::kFailed,
            io_error(transfer_text(p) + " made no progress in " + std::to_string(kMaxAttemptsWithoutProgress) +
                     " attempts (last returned " + std::to_string(count) + " bytes); check the device")};
  }
  p.resume = p.direct ? align_down(p.done, std::max(p.align, p.mem_align)) : p.done;
  return {PieceStep::kResubmit, {}};
}

}  // namespace tierzero::nvme
