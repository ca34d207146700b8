// tierzero nvme/: asynchronous file I/O for moving tensors between memory and NVMe.
//
// One interface, three backends: io_uring (liburing; the default), libaio, and a thread pool of
// pread/pwrite ("sync"). A request is (file, offset, buffer, length, read|write). The engine
// splits it into `block_size` pieces, keeps up to `queue_depth` pieces in flight per ring, and
// spreads one request over `intra_op_parallelism` rings/threads. Every request has its own
// IoTicket; there is no all-or-nothing wait().
//
// Files open with O_DIRECT by default. Alignment comes from the file system (statx
// stx_dio_mem_align / stx_dio_offset_align, else the device's logical block size), never a
// constant. Buffers, offsets or lengths that are not aligned go through an aligned bounce buffer;
// the caller's bytes are never padded. Where O_DIRECT is refused (tmpfs), the file is opened
// buffered and one notice line says so.
//
// Every completion is classified in one place: -errno becomes a Status naming the file, offset,
// length and errno text; a short transfer is resubmitted for the remainder; a read that meets
// end-of-file is an error (kCorrupt, "file is shorter than ..."), never zero-filled.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/common.h"

namespace tierzero::nvme {

enum class Backend : uint8_t { kAuto, kIoUring, kLibaio, kSync };

// Returns "auto", "io_uring", "libaio" or "sync".
const char* backend_name(Backend backend);
// Parses the names above; kInvalidArgument lists the accepted names otherwise.
Result<Backend> parse_backend(std::string_view name);

// The engine's knobs. Field names follow DeepSpeed's "aio" config block.
struct IoConfig {
  Backend backend = Backend::kAuto;
  uint64_t block_size = 1 << 20;      // bytes per piece; a multiple of the file's offset alignment
  uint32_t queue_depth = 8;           // pieces in flight per ring / thread
  uint32_t intra_op_parallelism = 1;  // rings (or threads) that share one request
  bool single_submit = false;         // submit pieces one system call each (for comparison)
  bool overlap_events = true;         // refill the queue as completions arrive, not in waves
  bool use_direct = true;             // O_DIRECT where the file system allows it
  bool register_buffers = true;       // io_uring fixed buffers / files where the kernel allows
};

// Checks a config: nonzero sizes, block_size a power of two >= 512, sane bounds. The message
// names the offending "aio" key and its allowed range.
Status validate(const IoConfig& config);

enum class OpenMode : uint8_t {
  kRead,       // existing file, read only
  kWrite,      // create or truncate, write only
  kReadWrite,  // create if missing, keep contents
};

struct OpenOptions {
  OpenMode mode = OpenMode::kRead;
  uint64_t preallocate_bytes = 0;  // fallocate this many bytes up front (write modes)
  bool direct = true;              // ask for O_DIRECT (ANDed with IoConfig::use_direct)
};

// An open file. Shared between requests; closed when the last reference goes.
class File {
 public:
  virtual ~File() = default;
  virtual const std::string& path() const = 0;
  virtual int fd() const = 0;
  // True when the file is open with O_DIRECT.
  virtual bool direct() const = 0;
  // Required alignment of buffer addresses and of offsets/lengths for direct I/O (1 if buffered).
  virtual uint32_t mem_align() const = 0;
  virtual uint32_t offset_align() const = 0;
  // Current size in bytes (fstat).
  virtual Result<uint64_t> size() const = 0;
  // fdatasync; the error names the file.
  virtual Status sync() = 0;
  // Sets the file's size (ftruncate); used to trim preallocated files to their final length.
  virtual Status truncate(uint64_t bytes) = 0;
};
using FileRef = std::shared_ptr<File>;

enum class Op : uint8_t { kRead, kWrite };

struct IoRequest {
  FileRef file;
  Op op = Op::kRead;
  uint64_t offset = 0;
  void* buffer = nullptr;
  uint64_t length = 0;
  bool sync_after = false;  // fdatasync the file once every byte of this request is written
  // Optional: called once, on an engine thread, right after the ticket becomes ready, with its
  // status (e.g. to wake a loop that waits for whichever request finishes first). Keep it short
  // and non-blocking; it must not submit to or destroy the engine.
  std::function<void(const Status&)> on_complete = nullptr;
};

namespace detail {
struct TicketState;
}

// The completion of one request. Copyable handle; all copies see the same completion.
class IoTicket {
 public:
  IoTicket() = default;
  explicit IoTicket(std::shared_ptr<detail::TicketState> state) : state_(std::move(state)) {}
  // Blocks until the request is complete; returns its status (the same on every call).
  Status wait() const;
  // True once the request is complete (never blocks).
  bool ready() const;
  // Bytes transferred so far.
  uint64_t bytes_done() const;
  // Time from submit to completion once ready(); zero before.
  std::chrono::nanoseconds elapsed() const;
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::TicketState> state_;
};

class IoEngine {
 public:
  // Builds the engine for `config`. kAuto picks io_uring when the kernel allows it, else libaio,
  // else sync, and says which on stderr once. An explicit backend that is not available is an
  // error naming it and the reason (e.g. "io_uring_queue_init: Operation not permitted").
  static Result<std::unique_ptr<IoEngine>> create(const IoConfig& config);
  virtual ~IoEngine() = default;

  virtual Backend backend() const = 0;
  virtual const IoConfig& config() const = 0;

  // Opens `path` per `options`. O_DIRECT falls back to buffered I/O with a one-line notice
  // where the file system refuses it. Errors name the path and what to do (e.g. a read-only
  // directory: "cannot create /x/y: Permission denied (errno 13); choose a writable path").
  virtual Result<FileRef> open(const std::string& path, const OpenOptions& options) = 0;

  // Queues one request and returns its ticket at once. The buffer must stay valid until the
  // ticket is ready. Invalid requests (null file, length 0 with a null buffer) complete with
  // kInvalidArgument.
  virtual IoTicket submit(IoRequest request) = 0;
  // Queues several requests, submitting their first pieces in one system call where the backend
  // can. Returns one ticket per request, in order.
  virtual std::vector<IoTicket> submit_batch(std::vector<IoRequest> requests) = 0;

  // Registers [buffer, buffer + bytes) for zero-copy fixed-buffer I/O where the backend supports
  // it; requests inside a registered range then use it automatically. Returns ok (doing nothing)
  // where the backend has no such feature.
  virtual Status register_buffer(void* buffer, uint64_t bytes) = 0;
  virtual Status unregister_buffer(void* buffer) = 0;
};

// Convenience: submits one request and waits for it.
Status read_sync(IoEngine& engine, const FileRef& file, uint64_t offset, void* buffer, uint64_t length);
Status write_sync(IoEngine& engine, const FileRef& file, uint64_t offset, const void* buffer, uint64_t length,
                  bool sync_after = false);

// Memory aligned for O_DIRECT on any file system we meet (4096 bytes), freed with std::free.
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBuffer = std::unique_ptr<std::byte[], AlignedFree>;
// Allocations of at least this many bytes are huge-page aligned and backed (see allocate_aligned).
inline constexpr uint64_t kHugeBufferAlign = uint64_t{2} << 20;
// Allocates `bytes` aligned to 4096 (size rounded up to 4096); from kHugeBufferAlign bytes up, aligned
// to and rounded up to 2 MiB and advised onto transparent huge pages (MADV_HUGEPAGE), so that a
// request's pages are physically contiguous: the block layer then sends a 1 MiB request as one
// segment instead of 256, and never splits it at the device's max_segments (a registered buffer on
// 4 KiB pages is split in two at 254 segments, for instance). Where THP is off the memory is on
// 4 KiB pages and works the same, only with more segments. Throws std::bad_alloc on failure.
AlignedBuffer allocate_aligned(uint64_t bytes);

}  // namespace tierzero::nvme
