// Request → pieces, honouring O_DIRECT alignment without padding the caller's bytes.
#include "nvme/internal/request_plan.h"

#include <unistd.h>

#include <algorithm>

#include "nvme/internal/alignment.h"
#include "nvme/internal/posix_file.h"

namespace tierzero::nvme {

namespace {

struct PlanContext {
  detail::TicketState& request;
  std::byte* buffer;
  uint64_t block_size;
  int direct_fd;
  int buffered_fd;
  uint32_t align;
  uint32_t mem_align;
};

// A piece for file range [begin, end) whose user bytes are [user_begin, user_end) ⊆ [begin, end).
void add_piece(PlanContext& c, int fd, bool direct, uint64_t begin, uint64_t end, uint64_t user_begin,
               uint64_t user_end) {
  Piece p;
  p.owner = &c.request;
  p.op = c.request.op;
  p.fd = fd;
  p.direct = direct;
  p.align = direct ? c.align : 1;
  p.mem_align = direct ? c.mem_align : 1;
  p.offset = begin;
  p.length = end - begin;
  p.user_data = c.buffer + (user_begin - c.request.offset);
  p.user_skip = user_begin - begin;
  p.user_bytes = user_end - user_begin;
  const bool covers_exactly = user_begin == begin && user_end == end;
  p.bounced = direct && !(covers_exactly && is_aligned(p.user_data, c.mem_align));
  p.need = p.bounced && p.op == Op::kRead ? user_end - begin : p.length;
  p.io_buf = p.bounced ? nullptr : p.user_data;
  c.request.pieces.push_back(std::move(p));
}

// Aligned pieces over [begin, end) (both multiples of the block boundaries' alignment), clipped
// to the user's range for their user bytes.
void add_direct_pieces(PlanContext& c, uint64_t begin, uint64_t end) {
  const uint64_t user_begin = c.request.offset, user_end = c.request.offset + c.request.length;
  for (uint64_t s = begin; s < end; s += c.block_size) {
    const uint64_t e = std::min(s + c.block_size, end);
    add_piece(c, c.direct_fd, true, s, e, std::max(s, user_begin), std::min(e, user_end));
  }
}

}  // namespace

Status plan_pieces(detail::TicketState& request, std::byte* buffer, uint64_t block_size) {
  File& file = *request.file;
  auto* posix = dynamic_cast<PosixFile*>(&file);
  request.posix_file = posix;
  PlanContext c{request,         buffer, block_size, file.fd(), posix ? posix->buffered_fd() : -1, file.offset_align(),
                file.mem_align()};
  const uint64_t begin = request.offset, end = request.offset + request.length;
  request.pieces.clear();
  if (request.length == 0) return {};

  if (!file.direct()) {
    request.pieces.reserve((request.length + block_size - 1) / block_size);
    for (uint64_t s = begin; s < end; s += block_size) {
      const uint64_t e = std::min(s + block_size, end);
      add_piece(c, c.direct_fd, false, s, e, s, e);
    }
    return {};
  }

  c.block_size = std::max<uint64_t>(block_size, c.align);
  const uint64_t aligned_begin = align_down(begin, c.align), aligned_end = align_up(end, c.align);
  request.pieces.reserve((aligned_end - aligned_begin + c.block_size - 1) / c.block_size + 2);
  if (request.op == Op::kRead) {
    add_direct_pieces(c, aligned_begin, aligned_end);
    return {};
  }

  // Partial pages go through the page cache, whole pages direct: a direct write and a buffered
  // write to one page would race (the buffered one reads the page back before the direct one lands).
  const uint64_t page = std::max<uint64_t>(c.align, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  const uint64_t head_end = std::min(align_up(begin, page), end);
  const uint64_t body_end = std::max(align_down(end, page), head_end);
  if ((head_end != begin || body_end != end) && c.buffered_fd < 0) {
    return invalid_argument("unaligned write of " + std::to_string(request.length) + " bytes at offset " +
                            std::to_string(begin) + " to " + file.path() +
                            ": the O_DIRECT file was not opened by IoEngine::open; open it there");
  }
  if (head_end != begin) add_piece(c, c.buffered_fd, false, begin, head_end, begin, head_end);
  add_direct_pieces(c, head_end, body_end);
  if (body_end != end) add_piece(c, c.buffered_fd, false, body_end, end, body_end, end);
  return {};
}

}  // namespace tierzero::nvme
