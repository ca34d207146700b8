// Classifying one completion of a piece: the single place kernel results are judged.
#pragma once

#include <cstdint>

#include "nvme/internal/piece.h"

namespace tierzero::nvme {

enum class PieceStep : uint8_t {
  kComplete,  // every needed byte has arrived
  kResubmit,  // short, zero or interrupted: submit the remainder (from next_offset())
  kFailed,    // an error; `error` says what, where and why
};

struct PieceVerdict {
  PieceStep step;
  Status error;
};

// Judges `result` (bytes transferred, or -errno) for `piece`'s current transfer and advances the
// piece. -errno: an error naming the operation, length, offset, path and errno text (EINTR and
// EAGAIN are retried). A count beyond the transfer: internal error. A short or zero count: the
// remainder is resubmitted (from an aligned offset on O_DIRECT); for a read, a file that ends
// before the needed bytes is kCorrupt ("... is shorter than asked ..."), never zero-filled. Eight
// attempts in a row without progress are an error.
PieceVerdict classify_completion(Piece& piece, int64_t result);

}  // namespace tierzero::nvme
