// tierzero offload/: the one offload stack `tierzero train` runs on. The engine decides before the
// first step which state lives in pinned host memory and which on NVMe (engine/plan's placement,
// tierzero.pinned_memory_limit, optimizer_records_in_memory); offload/ holds and moves it. Nothing
// is cached or evicted behind the caller's back: every buffer has one place for the whole run, and
// every copy is one the step schedules. The pieces, lowest first:
// - PinnedHostPool: exact-size blocks carved from a pinned arena (huge pages faulted in on every core,
//   then registered with CUDA, when a GPU is present; else host memory), all allocated at creation:
//   the budget is checked first.
// - HostTier (offload/torch/offload_torch.h): the step's pinned buffers, listed as PinnedBufferSpecs
//   typed by role, checked against tierzero.pinned_memory_limit and allocated from one pool.
// - RecordStaging: state homed on NVMe in fixed-size records, one preallocated swap file per
//   nvme_path per rank, each record striped over the paths in 4096-aligned shares (O_DIRECT), moved
//   through pinned staging buffers over nvme/'s IoEngine (io_uring, else libaio) with several
//   requests in flight on each.
// - RecordCache: the residency layer over a RecordStaging: records kept in a pinned block (the first,
//   or spread among the streamed) and records on NVMe behind one acquire/release interface, with
//   write-back, read-ahead, write-behind, aligned range reads, the alternating sweep, traffic and
//   disk-wait counters and reader fences (the optimizer's sub-groups; a LoRA run's frozen base on
//   NVMe).
// - RecordRing: the record cache's FIFO sibling: pieces of records read into buffers taken in turn,
//   each held for a tag, and write windows taken in turn (the ZeRO-3 parameters on NVMe).
// - StagingSlots: pinned buffers of one size lent and given back across threads (the offloaded
//   gradients' staging slots); RecordSlots lends them to records, one each (the gradient ring).
// - RangeReader: a file read by range on any thread, O_DIRECT in whole blocks where allowed (the
//   start-up read of a Hugging Face checkpoint's safetensors).
// - DeviceCopies (offload_torch.h), the stack's one CUDA copy path: side-stream copies ordered after
//   the compute stream by events (never a device-wide sync) and queues on streams of their own (the
//   optimizer's GPU share). PendingWrites orders the compute stream after a copy just before a
//   reader; CopyProbe is `tierzero bench pcie`'s timing of DeviceCopies against plain cudaMemcpy.
// tierzero_offload is torch-free; tierzero_offload_torch adds the pieces over LibTorch tensors.
//
// Every size (each pinned buffer, the records kept in memory, the swap files' bytes) is computed once,
// by engine/layout, which `train` and `tierzero estimate` both call. docs/design.md ("State on NVMe")
// draws one optimizer sub-group's bytes through these pieces, from NVMe to the GPU and back.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::offload {

// What backs "pinned" memory and the copies.
enum class DeviceChoice : uint8_t {
  kAuto,  // a CUDA GPU when one is present at run time (cudaGetDeviceCount > 0), else host memory
  kHost,  // host memory, even where a GPU exists (tests)
};

// "NVIDIA H200 (device 0, 139.81 GiB, PCI 25), CUDA runtime 13.0" for CUDA device `cuda_device`;
// kUnsupported naming why where there is none; kInvalidArgument for a device past the GPUs found.
Result<std::string> describe_gpu(int cuda_device);

// Ok for cudaSuccess, else kInternal "`what`: <CUDA error name> (<its text>)" for CUDA runtime error
// `error` (a cudaError_t; defined in builds with CUDA only, for the stack's CUDA-speaking files).
Status cuda_status(int error, const std::string& what);

// ---- Pinned host memory -------------------------------------------------------------------------
// The exact-size pool (arena_pool.h) over a pinned arena that HostTier and the tools allocate from.
struct PinnedPoolOptions {
  uint64_t capacity_bytes = 0;  // the whole budget, one arena allocated by create()
  DeviceChoice device = DeviceChoice::kAuto;
  int cuda_device = 0;
  bool lock_host_memory = false;  // a host-backed arena only: mlock it (RLIMIT_MEMLOCK applies)
};

class PinnedHostPool {
 public:
  // Checks the capacity against MemAvailable (and RLIMIT_MEMLOCK when locking host memory), then
  // allocates the arena. kOutOfSpace / kResourceExhausted with the bytes asked and available.
  static Result<std::unique_ptr<PinnedHostPool>> create(const PinnedPoolOptions& options);
  ~PinnedHostPool();
  PinnedHostPool(const PinnedHostPool&) = delete;
  PinnedHostPool& operator=(const PinnedHostPool&) = delete;

  // Bytes a block of `bytes` takes from the pool, alignment rounding included (what budgets sum).
  static uint64_t footprint(uint64_t bytes);

  // `bytes` (> 0) of pinned memory, aligned 4096 from 80 KiB up (at least 16), contents unspecified;
  // thread-safe. kOutOfSpace naming the bytes asked, used and the capacity when the arena has no room.
  Result<void*> allocate(uint64_t bytes);

  // True when the arena is page-locked for a CUDA device (cudaHostRegister): copies are DMA.
  bool gpu_pinned() const;
  uint64_t capacity() const;
  // Bytes taken by live blocks, rounding included.
  uint64_t used() const;
  // "12.00 GiB pinned (huge pages registered with CUDA) on NVIDIA H200" or "... host memory (no GPU: ...)".
  std::string description() const;

 private:
  struct Impl;
  explicit PinnedHostPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- The pinned buffer list --------------------------------------------------------------------
// What the offloaded step keeps in pinned memory, buffer by buffer, typed by role: listed by
// engine/layout, allocated by HostTier (offload_torch.h) and looked up there by role and index.
enum class PinnedRole : uint8_t {
  kOptimizerSwapBuffer,  // optimizer on NVMe: one sub-group record each (offload_optimizer.buffer_count)
  kOptimizerRecords,     // the optimizer's records kept in memory (with device "cpu" all), back to back
  kGradients,            // the host gradient partition
  kGradStaging,          // a gradient staging slot (offload_optimizer.buffer_count of them)
  kWeights16,            // 16-bit weights bound for the device (a compact master's high half)
  kParamReadBuffer,      // parameters on NVMe: a read buffer (offload_param.buffer_count of them)
  kParamWindow,          // parameters on NVMe: a write window (two)
  kParamRecords,         // parameters on NVMe: the records kept in memory (offload_param.max_in_cpu)
  kParamShard,           // parameters offloaded to pinned host memory: the shard
  kFrozenWeight,         // a LoRA run's frozen base weight, pinned (one per parameter)
  kFrozenStaging,        // a LoRA run's frozen base on NVMe: a staging half (two)
};
// "gradient staging", "optimizer swap buffer", ...: the role in errors and listings.
const char* pinned_role_name(PinnedRole role);

// One buffer of the list: `bytes` (0 allowed: the buffer is empty) for `role`'s `index`-th buffer.
struct PinnedBufferSpec {
  PinnedRole role = PinnedRole::kGradients;
  int index = 0;
  uint64_t bytes = 0;
};

// Bytes a pool holding `buffers` takes (each buffer's PinnedHostPool::footprint, the total rounded
// up to a page): what HostTier allocates and checks against tierzero.pinned_memory_limit.
uint64_t pinned_capacity(const std::vector<PinnedBufferSpec>& buffers);

// ---- Record staging over swap files --------------------------------------------------------------
// State homed on NVMe in fixed-size records: one file per nvme_path per rank,
// <path>/tierzero-<role>-r<rank>.swap (the SwapRoles below), preallocated at creation and removed
// with the staging. Record k's bytes [p*P, (p+1)*P) are in path p's file at offset k*P, P being the
// largest record split evenly over the paths and rounded up to 4096 bytes: every record keeps a
// stable place, every device carries an equal share of every transfer, offsets stay O_DIRECT-aligned.
// Pinned staging buffers move the records: buffer b holds one record's image at a time (or a run of
// consecutive records'), with the read and the write in flight on it. The caller (the record cache
// and ring below) decides which record goes through which buffer and when; the staging owns the I/O:
// its IoEngine (the "aio" block's backend), the buffers' registration, the files, the tickets.

// What a swap holds, for its file names and its errors.
struct SwapRole {
  const char* file_stem;    // "optimizer": tierzero-optimizer-r<rank>.swap
  const char* key;          // the ds_config key of its directories
  const char* record_name;  // "optimizer sub-group": what record k is called in errors
  const char* contents;     // "optimizer state": what the files hold, in errors
};
inline constexpr SwapRole kOptimizerSwap{"optimizer", "zero_optimization.offload_optimizer.nvme_path",
                                         "optimizer sub-group", "optimizer state"};
inline constexpr SwapRole kParameterSwap{"params", "zero_optimization.offload_param.nvme_path", "parameter record",
                                         "parameter shard"};
inline constexpr SwapRole kFrozenSwap{"frozen", "zero_optimization.offload_param.nvme_path", "frozen base record",
                                      "frozen base weights"};

// Where a staging's records go, through an IoEngine made from `io`.
struct RecordStagingOptions {
  std::vector<std::string> paths;  // the files' directories, created when missing
  nvme::IoConfig io;
  int rank = 0;
  int64_t records = 0;  // 0: no files; the buffers are then only memory
  uint64_t record_bytes = 0;
  SwapRole role = kOptimizerSwap;
};

class RecordStaging {
 public:
  // Makes the IoEngine, registers `buffers` (pinned memory the caller keeps valid) with it, and, when
  // options.records > 0, opens and preallocates the files; the errors of each. Without buffers and
  // records it makes nothing (no IoEngine: options.io is not looked at). The files fail before
  // anything is written: kInvalidArgument for no path; kOutOfSpace naming the path, the bytes needed
  // and free, and the fix; else the open or preallocation error naming the file. `names`: errors
  // name file record k as record names[k] where given (else k).
  static Result<std::unique_ptr<RecordStaging>> create(const std::vector<std::span<std::byte>>& buffers,
                                                       const RecordStagingOptions& options,
                                                       std::vector<int64_t> names = {});
  // Waits for the transfers in flight (errors dropped), unregisters the buffers, removes the files.
  ~RecordStaging();
  RecordStaging(const RecordStaging&) = delete;
  RecordStaging& operator=(const RecordStaging&) = delete;

  static constexpr uint64_t kRecordAlignment = 4096;
  // `bytes` rounded down and up to kRecordAlignment (O_DIRECT offsets and lengths).
  static constexpr uint64_t align_down(uint64_t bytes) { return bytes / kRecordAlignment * kRecordAlignment; }
  static constexpr uint64_t align_up(uint64_t bytes) { return align_down(bytes + kRecordAlignment - 1); }
  // Bytes create() preallocates for `records` records of `record_bytes` over `paths` paths (each
  // path's share of a record rounded up to kRecordAlignment), summed over the paths.
  static uint64_t preallocated_bytes(size_t paths, int64_t records, uint64_t record_bytes);

  // Whether there are swap files (options.records > 0).
  bool has_files() const { return !parts_.empty(); }
  // Buffer `b` of those given to create(), b < their count.
  std::span<std::byte> buffer(size_t b) const { return buffers_[b]; }

  // Queues the read of record `record`'s bytes [begin, end) (past record_bytes, the next records')
  // into the same bytes of buffer `b`, whose previous read was waited for; `begin` 4096-aligned.
  void read(size_t b, int64_t record, uint64_t begin, uint64_t end);
  // The same, into buffer `b` from its first byte (a piece of a record in a smaller buffer).
  void read_at(size_t b, int64_t record, uint64_t begin, uint64_t end);
  // Queues the write of record `record`'s bytes [begin, end) from buffer `b`'s first byte on, whose
  // previous write was waited for (wait_write); `begin` 4096-aligned.
  void write(size_t b, int64_t record, uint64_t begin, uint64_t end);
  // Whether buffer `b`'s read has arrived (never blocks; true when none is queued).
  bool arrived(size_t b) const;
  // Waits for buffer `b`'s read (none, or no files: ok). The error names the file, the offset, the
  // record and the fix; the buffer's bytes are then not the record's.
  Status wait_read(size_t b);
  // The same for its write; a full disk is kOutOfSpace with the bytes needed and free.
  Status wait_write(size_t b);

  // Bytes the files take on disk (preallocated), summed over the paths; without files 0.
  uint64_t file_bytes() const;
  // "<n> file(s): path, ...", for banners and errors; without files "no file".
  std::string describe() const;
  // The files' paths, one per directory, in the order of options.paths.
  std::vector<std::string> files() const;

 private:
  // One record's transfer in flight: its tickets (one per path it touches), waited for together.
  struct Transfer {
    nvme::Op op = nvme::Op::kRead;
    int64_t record = -1;
    uint64_t begin = 0;  // bytes [begin, end) of the record
    uint64_t end = 0;
    std::vector<nvme::IoTicket> tickets;
    std::vector<size_t> parts;  // the path of each ticket
  };
  struct Part {
    nvme::FileRef file;
    std::string path;
  };
  RecordStaging() = default;
  // Opens and preallocates the files (create's last step).
  Status create_files(const RecordStagingOptions& options);
  // Queues `op` of bytes [begin, end) of the run of records from `record` on, into or from `data`:
  // one transfer per record it touches, its bytes split over the paths.
  std::vector<Transfer> submit(nvme::Op op, int64_t record, std::byte* data, uint64_t begin, uint64_t end);
  // Waits for every transfer of `transfers` and forgets them; the first error, named by failure().
  Status wait(std::vector<Transfer>& transfers);
  Status failure(const Transfer& transfer, size_t part, const Status& status) const;

  std::vector<std::span<std::byte>> buffers_;
  uint64_t record_bytes_ = 0;
  int64_t records_ = 0;
  uint64_t part_bytes_ = 0;  // P: a record's share of each file
  SwapRole role_ = kOptimizerSwap;
  std::vector<int64_t> names_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::vector<Part> parts_;                   // one per path (none without files)
  std::vector<std::vector<Transfer>> reads_;  // per buffer: the transfers in flight
  std::vector<std::vector<Transfer>> writes_;
};

// ---- Range reads ---------------------------------------------------------------------------------
// A file read by byte range on any thread, without staging or an IoEngine (start-up weight loading:
// each thread reads and converts its own piece): with O_DIRECT in whole kRecordAlignment blocks
// where the file system allows it, so the disk's read rate is not the page cache's, else with pread.
class RangeReader {
 public:
  // Opens `path` read-only, and again with O_DIRECT where allowed; the error names the path.
  static Result<std::unique_ptr<RangeReader>> open(const std::string& path);
  ~RangeReader();
  RangeReader(const RangeReader&) = delete;
  RangeReader& operator=(const RangeReader&) = delete;

  const std::string& path() const { return path_; }
  // The file's bytes (fstat); the error names the path.
  Result<uint64_t> size() const;
  // Bytes [offset, offset + bytes) into `out` with pread; kCorrupt when the file ends first.
  Status read_exact(void* out, uint64_t bytes, uint64_t offset) const;
  // Bytes of a buffer that read() of up to `bytes` needs: an alignment block of room on each side.
  static constexpr uint64_t buffer_bytes(uint64_t bytes) { return bytes + 2 * RecordStaging::kRecordAlignment; }
  // Bytes [offset, offset + bytes) read into `buffer` (nvme::allocate_aligned(buffer_bytes(bytes))),
  // in whole blocks where the file is open with O_DIRECT; where they start in it. kCorrupt when the
  // file ends first; errors name the path, the offset and the bytes.
  Result<std::byte*> read(uint64_t offset, uint64_t bytes, std::byte* buffer) const;

 private:
  RangeReader(std::string path, int fd, int direct_fd) : path_(std::move(path)), fd_(fd), direct_fd_(direct_fd) {}
  std::string path_;
  int fd_;
  int direct_fd_;  // the same file opened O_DIRECT, or -1 where refused (tmpfs)
};

// ---- Record cache --------------------------------------------------------------------------------
// The residency layer over a RecordStaging: records [0, records), `memory_records` of them homed in
// a pinned block (never read or written), the others on NVMe, held in the staging buffers. A record
// is acquired for reading or overwriting (no read), or a byte range of one for reading, and released
// clean, dirty (kept in its buffer, written when the buffer is taken or at flush) or written (queued
// at once: write-behind). Nothing dirty is ever dropped. A reader fence attached at release (a copy
// to the device still reading the buffer) is waited for before the buffer takes other bytes.
//
// Placement is direct-mapped: the i-th streamed record always goes through buffer i mod
// buffer_count, so a read waits for the write that last left its buffer, any buffer count is
// correct, and each read-ahead's buffer is fixed. It makes the alternating sweep pay: a pass that
// leaves its last buffer_count records dirty leaves them in distinct buffers, and the next pass, run
// the other way (pass(kAlternate)), starts on them: each pass moves buffer_count records fewer each
// way (the optimizer's sub-group pipeline, engine/zero/record_adam.cpp).
//
// The records in memory are the first memory_records, or, with spread_memory, spread evenly over the
// records with the last one streamed: a pass in record order then meets a streamed record every
// records / streamed, so the disk, read ahead and written behind, keeps working through the records
// in memory (the optimizer stepping inside the backward, in the gradients' order, last to first).
// The block holds them packed in record order, each at the sum of the bytes of those before it: a
// short last record (a partition's last sub-group) takes its own bytes, not the largest record's.
//
// Records of widely different sizes (a LoRA run's frozen base, one record per unit) take consecutive
// file records of file_record_bytes each, so the files hold each rounded up to file records only.

// Something that may still read a buffer (a copy from it to the device): the record cache waits on it
// before the buffer takes other bytes. offload_torch.h's CopyDone is one.
class ReaderFence {
 public:
  virtual ~ReaderFence() = default;
  // Blocks the calling thread until the reader is done with the buffer.
  virtual void wait_host() = 0;
};

struct RecordCacheOptions {
  RecordStagingOptions files;          // paths, io, rank and role (the cache sets the rest)
  std::vector<uint64_t> record_bytes;  // bytes of each record; records = its size
  int64_t memory_records = 0;          // records [0, memory_records) live in the pinned block, packed
  bool read_ahead = false;             // prefetch_ahead() reads past the record asked (pipeline_read)
  bool write_behind = false;           // release(kWrite) returns with the write queued (pipeline_write)
  uint64_t file_record_bytes = 0;      // 0: a record is one file record; else consecutive ones of this
                                       // many bytes (a multiple of 4096)
  bool spread_memory = false;          // the records in memory spread over [0, records) instead
};

class RecordCache {
 public:
  // Over `buffers` (the largest record each; one at least when a record is on NVMe) and `memory` (the
  // records kept in memory, packed in record order: each at the sum of the bytes of those before it,
  // so a short record takes only its own bytes), pinned memory the caller keeps valid.
  // RecordStaging::create's errors; kInternal for buffers or a block too small, or file_record_bytes
  // not a multiple of 4096.
  static Result<std::unique_ptr<RecordCache>> create(const std::vector<std::span<std::byte>>& buffers,
                                                     std::span<std::byte> memory, RecordCacheOptions options);
  RecordCache(const RecordCache&) = delete;
  RecordCache& operator=(const RecordCache&) = delete;
  // Waits for the buffers' readers, then for the transfers in flight.
  ~RecordCache();

  enum class Access : uint8_t { kRead, kOverwrite };
  enum class Release : uint8_t {
    kClean,  // the bytes are the file's (read, not changed)
    kDirty,  // changed; kept in the buffer, written when the buffer is taken or by flush()
    kWrite,  // changed; written now (waited for unless write_behind)
  };
  // The order of a pass over the file records.
  enum class Sweep : uint8_t {
    kFrontToBack,
    kBackToFront,
    kAlternate,  // back to front when the buffers hold the last records (not the first file record)
  };

  int64_t records() const { return static_cast<int64_t>(bytes_.size()); }
  // Whether record `record` lives in the pinned block (never read or written).
  bool in_memory(int64_t record) const { return memory_offset_[static_cast<size_t>(record)] >= 0; }
  // Byte offset of record `record` (in memory) in the pinned block.
  uint64_t memory_offset(int64_t record) const {
    return static_cast<uint64_t>(memory_offset_[static_cast<size_t>(record)]);
  }
  size_t buffer_count() const { return slots_.size(); }
  uint64_t record_bytes(int64_t record) const { return bytes_[static_cast<size_t>(record)]; }

  // Record `record`'s bytes until release(), for reading (read unless its buffer holds them) or for
  // overwriting (contents unspecified). A read's error names the file, the offset and the record.
  Result<std::span<std::byte>> acquire(int64_t record, Access access);
  // Bytes [begin, end) of record `record`, for reading; its buffer then holds that range only (read
  // from begin rounded down to RecordStaging::kRecordAlignment), unless it held them already.
  Result<std::span<const std::byte>> acquire_range(int64_t record, uint64_t begin, uint64_t end);
  // Gives back an acquired record; `reader` (may be null) still reads its buffer.
  Status release(int64_t record, Release how, std::shared_ptr<ReaderFence> reader = nullptr);
  // Queues the read of the whole record (or of bytes [begin, end)) unless its buffer holds it; a
  // record in memory needs none. The buffer's last record is written first when dirty.
  Status prefetch(int64_t record);
  Status prefetch_range(int64_t record, uint64_t begin, uint64_t end);
  // prefetch() of `pass`'s records [position, position + depth]: depth max(1, buffer_count - 2) with
  // read_ahead and two buffers or more (a buffer whose write was queued two records before), else 0.
  // With `again` (the next pass runs the same records in the same order: the sweep inside the
  // backward, step after step), the positions past the pass's end are the next pass's first ones,
  // read into buffers that no record of this pass from `position` on goes through and that nothing
  // holds acquired (others are left to the next pass): the disk reads them while this pass's last
  // records are stepped, instead of idling then and reading them at the next pass's start.
  Status prefetch_ahead(std::span<const int64_t> pass, size_t position, bool again = false);
  // How the caller releases the record at `position` of `pass` once changed: kDirty for the last
  // buffer_count records of a pass the next one starts on (kept: the next pass, run the other way,
  // takes them from the buffers); kWrite (written behind) for the others, and for every record with
  // `again`, whose next pass starts at the other end: a record kept there would only be written when
  // the next pass takes its buffer, the disk idle meanwhile and the pass's first read waiting on it.
  Release changed(std::span<const int64_t> pass, size_t position, bool again) const;
  // The streamed records in the order of `sweep`.
  std::vector<int64_t> pass(Sweep sweep) const;

  // Writes every dirty record and waits for every write; the buffers keep their records.
  Status flush();
  // Waits for every write queued; on an error, that buffer holds nothing.
  Status wait_writes();
  // Forgets what the buffers hold, dirty or not (the records are being replaced).
  void discard();

  // Bytes of whole records read and written since creation (range reads are not counted).
  uint64_t read_bytes() const { return read_bytes_; }
  uint64_t written_bytes() const { return written_bytes_; }
  // Seconds callers were blocked on the disk since creation: a read not yet arrived, a buffer whose
  // read or write was still in flight.
  double wait_seconds() const { return wait_seconds_; }
  // The staging's files (RecordStaging).
  bool has_files() const { return staging_->has_files(); }
  uint64_t file_bytes() const { return staging_->file_bytes(); }
  std::string describe() const { return staging_->describe(); }

 private:
  // What buffer b holds: bytes [begin, end) of record `record` (-1: nothing), the whole record when
  // `whole`; `dirty`: newer than its file; `acquired`: between acquire and release.
  struct Slot {
    int64_t record = -1;
    uint64_t begin = 0;
    uint64_t end = 0;
    bool whole = false;
    bool dirty = false;
    bool acquired = false;
    std::shared_ptr<ReaderFence> reader = nullptr;
  };
  RecordCache() = default;
  size_t buffer_of(int64_t record) const;
  Status claim(size_t b, int64_t record);
  // Whether a record of `pass` at `position` or later goes through buffer b.
  bool needed(std::span<const int64_t> pass, size_t position, size_t b) const;
  // prefetch() (whole: the whole record, counted in read_bytes) and prefetch_range()'s read.
  Status fetch(int64_t record, uint64_t begin, uint64_t end, bool whole);
  Status write(size_t b);
  Status wait_read(size_t b);
  // `wait`'s status, its time added to wait_seconds_.
  template <typename Wait>
  Status timed(Wait wait) {
    const auto start = std::chrono::steady_clock::now();
    Status status = wait();
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return status;
  }

  std::vector<uint64_t> bytes_;
  std::vector<int64_t> first_file_;      // each record's first file record (a record in memory: none)
  std::vector<int64_t> memory_offset_;   // each record's byte offset in the pinned block (-1: streamed)
  std::vector<int64_t> streamed_index_;  // each record's place among the streamed ones (-1: in memory)
  std::vector<int64_t> streamed_;        // the streamed records, in order
  uint64_t stride_ = 0;                  // the largest record
  bool read_ahead_ = false;
  bool write_behind_ = false;
  std::span<std::byte> memory_;
  std::vector<Slot> slots_;
  std::unique_ptr<RecordStaging> staging_;
  uint64_t read_bytes_ = 0;
  uint64_t written_bytes_ = 0;
  double wait_seconds_ = 0;
};

// ---- Record ring ----------------------------------------------------------------------------------
// The record cache's FIFO sibling, for records read in pieces (the ZeRO-3 parameters on NVMe,
// engine/zero/nvme_params.h): a piece is read from its start rounded down to 4096 into the next read
// buffer in turn, held for the caller's tag until release(), and read into again only after the
// reader fence given there. Writes go through the windows in turn.
struct RingPiece {
  size_t buffer = 0;  // the read buffer holding it
  uint64_t skip = 0;  // bytes in the buffer before the piece's first byte
};

class RecordRing {
 public:
  // Bytes of a read buffer for pieces of up to `piece_bytes`: room for the alignment on both sides.
  static uint64_t read_buffer_bytes(uint64_t piece_bytes) {
    return RecordStaging::align_up(piece_bytes) + 2 * RecordStaging::kRecordAlignment;
  }
  // Over the swap files of `options` (the last record `last_record_bytes` long: reads stop there),
  // with `reads` and `windows` (pinned memory the caller keeps valid, one at least each).
  static Result<std::unique_ptr<RecordRing>> create(const std::vector<std::span<std::byte>>& reads,
                                                    const std::vector<std::span<std::byte>>& windows,
                                                    const RecordStagingOptions& options, uint64_t last_record_bytes);
  // Waits for the readers and the writes still in flight.
  ~RecordRing();

  size_t read_buffers() const { return reads_.size(); }
  // The tags still holding the next `count` read buffers, each once, smallest first.
  std::vector<uint64_t> holders_of_next(size_t count) const;
  // Queues the read of bytes [begin, end) of record `record` into the next read buffer, held for
  // `tag` (not 0), after that buffer's reader. kInternal when a tag still holds it.
  Result<RingPiece> read(int64_t record, uint64_t begin, uint64_t end, uint64_t tag);
  // Whether buffer `b`'s read has arrived (never blocks); waiting for it (RecordStaging::wait_read).
  bool arrived(size_t b) const { return staging_->arrived(b); }
  Status wait_read(size_t b) { return staging_->wait_read(b); }
  const std::byte* bytes(size_t b) const { return staging_->buffer(b).data(); }
  // Frees buffer `b` from its tag; `reader` (may be null) still reads it.
  void release(size_t b, std::shared_ptr<ReaderFence> reader);

  // Lends the next window (its last write waited for: that error) for record `record`'s bytes
  // [begin, end), `begin` 4096-aligned (else kInternal): its index in `windows`, for the caller to fill.
  Result<size_t> lend(int64_t record, uint64_t begin, uint64_t end);
  // Queues the write of the window lent for exactly these bytes (else kInternal) and moves to the
  // next window. The write's wait_host() waits for it, throwing tierzero::Error with its error.
  Result<std::shared_ptr<ReaderFence>> write(int64_t record, uint64_t begin, uint64_t end);
  // Waits for every window's write; the first error.
  Status wait_writes();

  // Bytes read (aligned ranges) and written since the last call; thread-safe.
  std::pair<uint64_t, uint64_t> take_traffic() { return {read_bytes_.exchange(0), written_bytes_.exchange(0)}; }
  uint64_t file_bytes() const { return staging_->file_bytes(); }

 private:
  struct Read {
    uint64_t tag = 0;  // the tag holding it, or 0
    std::shared_ptr<ReaderFence> reader;
  };
  class WriteFence;
  struct Window {
    int64_t record = -1;  // the range lent (record -1: none) and its last write
    uint64_t begin = 0;
    uint64_t end = 0;
    std::shared_ptr<WriteFence> write;
  };
  RecordRing() = default;

  std::unique_ptr<RecordStaging> staging_;  // the read buffers, then the windows
  uint64_t record_bytes_ = 0;
  uint64_t last_record_bytes_ = 0;
  int64_t last_record_ = 0;
  std::vector<Read> reads_;
  size_t next_read_ = 0;
  std::vector<Window> windows_;
  size_t next_window_ = 0;
  std::atomic<uint64_t> read_bytes_{0};
  std::atomic<uint64_t> written_bytes_{0};
};

// ---- Staging slots ------------------------------------------------------------------------------
// Pinned buffers of one size lent one at a time and given back, on any thread: the offloaded
// gradients' staging slots (engine/zero/host_grad_pipeline.h: the backward thread fills one per
// bucket piece, the worker gives it back once added). take() blocks while every slot is lent; the
// slot given back last is lent first.
// RecordSlots lends such slots to records, one each at most: the gradient ring's record-sized slots,
// held by a record from its first landing until the optimizer has read it. A free slot is all zero:
// each is zeroed before it is lent again (free(), abandon()), so the first landing adds into zeros.
class StagingSlots {
 public:
  // Over `slots` (pinned memory the caller keeps valid, all of one size).
  explicit StagingSlots(std::vector<std::span<std::byte>> slots);
  // A free slot's index, blocking while every slot is lent. Thread-safe.
  size_t take();
  // Gives back slot `slot`, lent by take(). Thread-safe.
  void give(size_t slot);
  std::span<std::byte> bytes(size_t slot) const { return slots_[slot]; }
  // Bytes of a slot; 0 without slots.
  uint64_t slot_bytes() const { return slots_.empty() ? 0 : slots_.front().size(); }

 private:
  std::vector<std::span<std::byte>> slots_;
  std::mutex mutex_;
  std::condition_variable given_;
  std::vector<size_t> free_;  // the slot given back last at the back
};

class RecordSlots {
 public:
  // Over `slots` (pinned memory the caller keeps valid, all of one size, all zero) for records
  // 0 .. records - 1, none holding a slot.
  RecordSlots(std::vector<std::span<std::byte>> slots, int64_t records);
  // The slot record `record` holds, after lending it a free one when it holds none (blocking while
  // every slot is lent). Thread-safe.
  std::span<std::byte> hold(int64_t record);
  // The slot record `record` holds; empty when it holds none. Thread-safe.
  std::span<std::byte> slot_of(int64_t record) const;
  // Every record holding a slot, with that slot, smallest record first. Thread-safe.
  std::vector<std::pair<int64_t, std::span<std::byte>>> held() const;
  // Takes record `record`'s slot from it (the record then holds none) and returns the slot's index,
  // still lent: free() zeroes it and makes it free. std::nullopt when the record held none. Thread-safe.
  std::optional<size_t> release(int64_t record);
  // Zeroes slot `slot`, from release(), and makes it free. Thread-safe.
  void free(size_t slot);
  // Zeroes every held slot and makes it free (the records then hold none). Thread-safe.
  void abandon();

 private:
  StagingSlots slots_;
  mutable std::mutex mutex_;
  std::vector<int64_t> slot_;  // by record: the slot it holds, or -1
};

}  // namespace tierzero::offload
