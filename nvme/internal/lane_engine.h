// The IoEngine implementation: requests planned into pieces and spread over lanes.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "nvme/internal/buffer_registry.h"
#include "nvme/internal/piece.h"
#include "nvme/internal/piece_queue.h"
#include "nvme/io_engine.h"

namespace tierzero::nvme {

class LaneEngine final : public IoEngine {
 public:
  LaneEngine(const IoConfig& config, Backend backend);
  // Drains every queued and in-flight piece, then stops the lanes.
  ~LaneEngine() override;

  // Adds one lane; the factory adds config.intra_op_parallelism of them before first use.
  void add_lane(std::unique_ptr<Lane> lane) { lanes_.push_back(std::move(lane)); }
  BufferRegistry& buffers() { return buffers_; }

  Backend backend() const override { return backend_; }
  const IoConfig& config() const override { return config_; }
  Result<FileRef> open(const std::string& path, const OpenOptions& options) override;
  IoTicket submit(IoRequest request) override;
  std::vector<IoTicket> submit_batch(std::vector<IoRequest> requests) override;
  Status register_buffer(void* buffer, uint64_t bytes) override;
  Status unregister_buffer(void* buffer) override;

 private:
  // Plans one request; returns its state with pieces ready to post, or completes it at once
  // (invalid, empty) and returns it with no pieces.
  std::shared_ptr<detail::TicketState> prepare(IoRequest& request);

  IoConfig config_;
  Backend backend_;
  BufferRegistry buffers_;
  std::atomic<uint32_t> next_lane_{0};
  std::vector<std::unique_ptr<Lane>> lanes_;  // last: destroyed (drained) first
};

}  // namespace tierzero::nvme
