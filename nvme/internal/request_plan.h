// Splitting a request into pieces that respect the file's direct-I/O alignment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nvme/internal/piece.h"

namespace tierzero::nvme {

// Fills `request.pieces` for a transfer of `request.length` bytes at `request.offset` to or from
// `buffer`, in pieces of at most `block_size` bytes (at least the offset alignment).
//
// Buffered files: plain pieces on the user's memory.
// O_DIRECT files, reads: the range widened to alignment boundaries; a piece whose user memory is
// unaligned, or that covers bytes outside the user's range, reads into a bounce buffer and
// copies only the user's bytes out.
// O_DIRECT files, writes: whole pages write directly (or from a bounce copy when the memory is
// unaligned); a head or tail that does not fill a whole page is written exactly through the
// file's buffered descriptor, so no byte outside the user's range is ever written, and no page
// is written both ways at once (the kernel keeps the two coherent only when they do not overlap
// in time).
// Returns kInvalidArgument for an O_DIRECT file this engine did not open (no buffered twin) when
// a write is unaligned.
Status plan_pieces(detail::TicketState& request, std::byte* buffer, uint64_t block_size);

}  // namespace tierzero::nvme
