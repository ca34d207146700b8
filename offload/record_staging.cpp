#include "offload/offload.h"

#include <algorithm>
#include <utility>

namespace tierzero::offload {

Result<std::unique_ptr<RecordStaging>> RecordStaging::create(const std::vector<std::span<std::byte>>& buffers,
                                                             const RecordStagingOptions& options) {
  std::unique_ptr<RecordStaging> staging(new RecordStaging());
  staging->record_bytes_ = options.record_bytes;
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

std::vector<SwapTransfer> RecordStaging::submit(nvme::Op op, int64_t record, std::byte* data, uint64_t begin,
                                                uint64_t end) {
  std::vector<SwapTransfer> transfers;
  for (uint64_t at = begin; at < end;) {  // a byte of the run: record `record` + at / record_bytes_
    const uint64_t offset = at % record_bytes_, bytes = std::min(end - at, record_bytes_ - offset);
    transfers.push_back(swap_->submit_at(op, record + static_cast<int64_t>(at / record_bytes_), data + (at - begin),
                                         offset, offset + bytes));
    at += bytes;
  }
  return transfers;
}

void RecordStaging::read(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = submit(nvme::Op::kRead, record, buffers_[b].data() + begin, begin, end);
}

void RecordStaging::read_at(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = submit(nvme::Op::kRead, record, buffers_[b].data(), begin, end);
}

void RecordStaging::write(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  writes_[b] = submit(nvme::Op::kWrite, record, buffers_[b].data(), begin, end);
}

bool RecordStaging::arrived(size_t b) const {
  return std::all_of(reads_[b].begin(), reads_[b].end(), [](const SwapTransfer& transfer) {
    return std::all_of(transfer.tickets.begin(), transfer.tickets.end(),
                       [](const nvme::IoTicket& ticket) { return ticket.ready(); });
  });
}

Status RecordStaging::wait(std::vector<SwapTransfer>& transfers) {
  Status first;
  for (SwapTransfer& transfer : transfers) {
    Status status = swap_->wait(transfer);
    if (first.ok()) first = std::move(status);
  }
  transfers.clear();
  return first;
}

Status RecordStaging::wait_read(size_t b) { return swap_ ? wait(reads_[b]) : Status(); }

Status RecordStaging::wait_write(size_t b) { return swap_ ? wait(writes_[b]) : Status(); }

}  // namespace tierzero::offload
