// The range reader (offload.h): byte ranges of a file on any thread, O_DIRECT where allowed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "offload/offload.h"

namespace tierzero::offload {
namespace {

std::string range_text(const char* what, uint64_t bytes, uint64_t offset) {
  return std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset);
}

}  // namespace

Result<std::unique_ptr<RangeReader>> RangeReader::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, path + ": cannot open");
  const int direct_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  return std::unique_ptr<RangeReader>(new RangeReader(path, fd, direct_fd));
}

RangeReader::~RangeReader() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  ::close(fd_);
}

Result<uint64_t> RangeReader::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return errno_status(errno, path_ + ": fstat");
  return static_cast<uint64_t>(st.st_size);
}

Status RangeReader::read_exact(void* out, uint64_t bytes, uint64_t offset) const {
  auto* dst = static_cast<std::byte*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, dst, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, path_ + ": " + range_text("pread", bytes, offset));
    if (got == 0)
      return corrupt(path_ + ": ends before offset " + std::to_string(offset) + " (" + std::to_string(bytes) +
                     " bytes short)");
    dst += got;
    bytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return {};
}

Result<std::byte*> RangeReader::read(uint64_t offset, uint64_t bytes, std::byte* buffer) const {
  if (direct_fd_ < 0) {
    TZ_RETURN_IF_ERROR(read_exact(buffer, bytes, offset));
    return buffer;
  }
  const uint64_t begin = RecordStaging::align_down(offset);
  const uint64_t end = RecordStaging::align_up(offset + bytes);
  uint64_t done = 0;
  while (begin + done < end) {  // the last block may pass the file's end: the read stops there
    const ssize_t got = ::pread(direct_fd_, buffer + done, end - begin - done, static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return errno_status(errno, path_ + ": " + range_text("O_DIRECT pread", end - begin - done, begin + done));
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  if (begin + done < offset + bytes)
    return corrupt(path_ + ": ends before offset " + std::to_string(offset + bytes) + " (" +
                   std::to_string(offset + bytes - begin - done) + " bytes short)");
  return buffer + (offset - begin);
}

}  // namespace tierzero::offload
