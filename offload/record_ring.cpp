// The record ring (offload.h): pieces of records read into buffers taken in turn, held for a tag,
// and records' ranges written from windows taken in turn.
#include <algorithm>
#include <mutex>
#include <utility>

#include "offload/offload.h"

namespace tierzero::offload {

// A window's write in flight, waited for once: its status is kept for every later wait.
class RecordRing::WriteFence final : public ReaderFence {
 public:
  WriteFence(RecordStaging& staging, size_t buffer) : staging_(staging), buffer_(buffer) {}
  ~WriteFence() override { (void)finish(); }
  void wait_host() override { throw_if_error(finish()); }
  Status finish() {
    std::call_once(once_, [this] { status_ = staging_.wait_write(buffer_); });
    return status_;
  }

 private:
  RecordStaging& staging_;
  size_t buffer_;
  std::once_flag once_;
  Status status_;
};

Result<std::unique_ptr<RecordRing>> RecordRing::create(const std::vector<std::span<std::byte>>& reads,
                                                       const std::vector<std::span<std::byte>>& windows,
                                                       const RecordStagingOptions& options,
                                                       uint64_t last_record_bytes) {
  std::unique_ptr<RecordRing> ring(new RecordRing());
  std::vector<std::span<std::byte>> buffers = reads;
  buffers.insert(buffers.end(), windows.begin(), windows.end());
  TZ_ASSIGN_OR_RETURN(ring->staging_, RecordStaging::create(buffers, options));
  ring->reads_.resize(reads.size());
  ring->windows_.resize(windows.size());
  ring->record_bytes_ = options.record_bytes;
  ring->last_record_bytes_ = last_record_bytes;
  ring->last_record_ = options.records - 1;
  return ring;
}

RecordRing::~RecordRing() {
  for (Window& window : windows_) window.write = nullptr;  // waits; errors were reported
  for (Read& read : reads_)
    if (read.reader) read.reader->wait_host();
}

std::vector<uint64_t> RecordRing::holders_of_next(size_t count) const {
  std::vector<uint64_t> holders;
  for (size_t i = 0; i < std::min(count, reads_.size()); ++i) {
    const uint64_t tag = reads_[(next_read_ + i) % reads_.size()].tag;
    if (tag != 0 && std::find(holders.begin(), holders.end(), tag) == holders.end()) holders.push_back(tag);
  }
  std::sort(holders.begin(), holders.end());
  return holders;
}

Result<RingPiece> RecordRing::read(int64_t record, uint64_t begin, uint64_t end, uint64_t tag) {
  const size_t b = next_read_;
  Read& buffer = reads_[b];
  if (buffer.tag != 0)
    return internal_error("record ring: buffer " + std::to_string(b) + " still holds an unlanded read");
  if (buffer.reader) buffer.reader->wait_host();
  buffer.reader = nullptr;
  buffer.tag = tag;
  // Whole aligned blocks for O_DIRECT, but not past the record (the files end after the last one).
  const uint64_t aligned = RecordStaging::align_down(begin);
  const uint64_t read_end =
      std::min(RecordStaging::align_up(end), record == last_record_ ? last_record_bytes_ : record_bytes_);
  staging_->read_at(b, record, aligned, read_end);
  read_bytes_ += read_end - aligned;
  next_read_ = (b + 1) % reads_.size();
  return RingPiece{.buffer = b, .skip = begin - aligned};
}

void RecordRing::release(size_t b, std::shared_ptr<ReaderFence> reader) {
  reads_[b].tag = 0;
  reads_[b].reader = std::move(reader);
}

Result<size_t> RecordRing::lend(int64_t record, uint64_t begin, uint64_t end) {
  if (begin != RecordStaging::align_down(begin))
    return internal_error("record ring: a window " + std::to_string(begin) + " bytes into its record is not " +
                          "4096-aligned");
  Window& window = windows_[next_window_];
  if (window.write) TZ_RETURN_IF_ERROR(window.write->finish());
  window = {.record = record, .begin = begin, .end = end, .write = nullptr};
  return next_window_;
}

Result<std::shared_ptr<ReaderFence>> RecordRing::write(int64_t record, uint64_t begin, uint64_t end) {
  Window& window = windows_[next_window_];
  if (window.record != record || window.begin != begin || window.end != end)
    return internal_error("record ring: a write of a range that was not lent");
  const size_t staged = reads_.size() + next_window_;
  staging_->write(staged, record, begin, end);
  window.write = std::make_shared<WriteFence>(*staging_, staged);
  window.record = -1;
  written_bytes_ += end - begin;
  next_window_ = (next_window_ + 1) % windows_.size();
  return std::shared_ptr<ReaderFence>(window.write);
}

Status RecordRing::wait_writes() {
  Status first;
  for (Window& window : windows_)
    if (window.write && first.ok()) first = window.write->finish();
  return first;
}

}  // namespace tierzero::offload
