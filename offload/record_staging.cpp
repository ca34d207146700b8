#include "offload/offload.h"

#include <algorithm>
#include <utility>

namespace tierzero::offload {

Result<std::unique_ptr<RecordStaging>> RecordStaging::create(const std::vector<std::span<std::byte>>& buffers,
                                                             const RecordStagingOptions& options) {
  std::unique_ptr<RecordStaging> staging(new RecordStaging());
  staging->reads_.resize(buffers.size());  // sized first: the destructor walks them
  staging->writes_.resize(buffers.size());
  TZ_ASSIGN_OR_RETURN(staging->io_, nvme::IoEngine::create(options.io));
  for (const std::span<std::byte>& buffer : buffers) {
    TZ_RETURN_IF_ERROR(staging->io_->register_buffer(buffer.data(), buffer.size()));
    staging->buffers_.push_back(buffer);  // registered: the destructor unregisters it
  }
  if (options.records > 0) {
    TZ_ASSIGN_OR_RETURN(staging->swap_, SwapFiles::create(*staging->io_, options.paths, options.rank, options.records,
                                                          options.record_bytes, options.role, options.first_named));
  }
  return staging;
}

RecordStaging::~RecordStaging() {
  for (size_t b = 0; b < buffers_.size(); ++b) {
    (void)wait_read(b);
    (void)wait_write(b);
    (void)io_->unregister_buffer(buffers_[b].data());
  }
}

void RecordStaging::read(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = swap_->submit_at(nvme::Op::kRead, record, buffers_[b].data() + begin, begin, end);
}

void RecordStaging::read_at(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = swap_->submit_at(nvme::Op::kRead, record, buffers_[b].data(), begin, end);
}

void RecordStaging::write_at(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  writes_[b] = swap_->submit_at(nvme::Op::kWrite, record, buffers_[b].data(), begin, end);
}

bool RecordStaging::arrived(size_t b) const {
  return std::all_of(reads_[b].tickets.begin(), reads_[b].tickets.end(),
                     [](const nvme::IoTicket& ticket) { return ticket.ready(); });
}

Status RecordStaging::wait_read(size_t b) { return swap_ ? swap_->wait(reads_[b]) : Status(); }

Status RecordStaging::wait_write(size_t b) { return swap_ ? swap_->wait(writes_[b]) : Status(); }

}  // namespace tierzero::offload
