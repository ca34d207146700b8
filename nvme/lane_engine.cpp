// LaneEngine: turns requests into pieces and deals them round-robin over the lanes.
#include "nvme/internal/lane_engine.h"

#include "nvme/internal/posix_file.h"
#include "nvme/internal/request_plan.h"

namespace tierzero::nvme {

LaneEngine::LaneEngine(const IoConfig& config, Backend backend) : config_(config), backend_(backend) {}

LaneEngine::~LaneEngine() { lanes_.clear(); }

Result<FileRef> LaneEngine::open(const std::string& path, const OpenOptions& options) {
  return open_posix_file(path, options, config_.use_direct);
}

namespace {

Status check_request(const IoRequest& r) {
  if (!r.file) return invalid_argument("I/O request without a file: open one with IoEngine::open");
  if (r.buffer == nullptr) {
    return invalid_argument("I/O request on " + r.file->path() + " at offset " + std::to_string(r.offset) +
                            " has a null buffer");
  }
  if (r.offset + r.length < r.offset) {
    return invalid_argument("I/O request on " + r.file->path() + ": offset " + std::to_string(r.offset) + " + length " +
                            std::to_string(r.length) + " overflows");
  }
  return {};
}

}  // namespace

std::shared_ptr<detail::TicketState> LaneEngine::prepare(IoRequest& request) {
  auto state = std::make_shared<detail::TicketState>();
  state->file = request.file;
  state->op = request.op;
  state->offset = request.offset;
  state->length = request.length;
  state->sync_after = request.sync_after;
  state->on_complete = std::move(request.on_complete);
  state->submitted = std::chrono::steady_clock::now();
  Status s = check_request(request);
  if (s.ok()) s = plan_pieces(*state, static_cast<std::byte*>(request.buffer), config_.block_size);
  if (!s.ok() || state->pieces.empty()) {
    state->pieces.clear();
    state->complete_now(s.ok() && request.sync_after && request.op == Op::kWrite ? request.file->sync() : s);
    return state;
  }
  state->pieces_left.store(state->pieces.size(), std::memory_order_relaxed);
  state->self = state;
  return state;
}

IoTicket LaneEngine::submit(IoRequest request) {
  std::vector<IoRequest> one;
  one.push_back(std::move(request));
  return submit_batch(std::move(one)).front();
}

std::vector<IoTicket> LaneEngine::submit_batch(std::vector<IoRequest> requests) {
  std::vector<IoTicket> tickets;
  tickets.reserve(requests.size());
  std::vector<std::vector<Piece*>> per_lane(lanes_.size());
  for (IoRequest& request : requests) {
    std::shared_ptr<detail::TicketState> state = prepare(request);
    const uint32_t first = next_lane_.fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < state->pieces.size(); ++i) {
      per_lane[(first + i) % lanes_.size()].push_back(&state->pieces[i]);
    }
    tickets.emplace_back(std::move(state));
  }
  for (size_t l = 0; l < lanes_.size(); ++l) {
    if (!per_lane[l].empty()) lanes_[l]->post(per_lane[l]);
  }
  return tickets;
}

Status LaneEngine::register_buffer(void* buffer, uint64_t bytes) {
  if (backend_ != Backend::kIoUring || !config_.register_buffers) return {};
  if (buffer == nullptr || bytes == 0) return invalid_argument("register_buffer: null buffer or zero bytes");
  return buffers_.add(buffer, bytes);
}

Status LaneEngine::unregister_buffer(void* buffer) {
  if (backend_ != Backend::kIoUring || !config_.register_buffers) return {};
  return buffers_.remove(buffer);
}

}  // namespace tierzero::nvme
