// A piece's life around the backends: staging its bounce buffer, settling its completions.
#include "nvme/internal/piece.h"

#include <cstring>
#include <new>

#include "nvme/internal/completion.h"

namespace tierzero::nvme {

Status stage_piece(Piece& piece) {
  if (!piece.bounced || piece.bounce) return {};
  try {
    piece.bounce = allocate_aligned(piece.length);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate a " + std::to_string(piece.length) + "-byte bounce buffer for " +
                              piece.owner->file->path() + "; use aligned buffers or a smaller aio.block_size");
  }
  piece.io_buf = piece.bounce.get();
  if (piece.op == Op::kWrite) std::memcpy(piece.io_buf + piece.user_skip, piece.user_data, piece.user_bytes);
  return {};
}

bool settle_completion(Piece& piece, int64_t result) {
  PieceVerdict verdict = classify_completion(piece, apply_injected_fault(piece, result));
  switch (verdict.step) {
    case PieceStep::kResubmit: return true;
    case PieceStep::kComplete:
      if (piece.bounced && piece.op == Op::kRead) {
        std::memcpy(piece.user_data, piece.io_buf + piece.user_skip, piece.user_bytes);
      }
      piece.bounce.reset();
      piece.owner->piece_settled(piece, {});
      return false;
    case PieceStep::kFailed:
      piece.bounce.reset();
      piece.owner->piece_settled(piece, verdict.error);
      return false;
  }
  return false;
}

void abandon_piece(Piece& piece, const Status& why) {
  piece.bounce.reset();
  piece.owner->piece_settled(piece, why);
}

}  // namespace tierzero::nvme
