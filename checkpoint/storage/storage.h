// tierzero checkpoint/storage: durable writing, shared by checkpoint save, convert and export.
//   StreamWriter       a file written front to back through nvme::IoEngine (O_DIRECT where the
//                      file system allows it), fdatasynced at finish
//   WriteBuffers       staging buffers a StreamWriter borrows, allocated once for a run's saves: as
//                      many as its write-behind budget, so the fill runs that far ahead of the disk
//   copy_in_parallel   the write path's copy of state into staging buffers, on the arena's threads
//   CommitTransaction  the one commit protocol: a directory staged as DIR/NAME.partial, then
//                      published as DIR/NAME complete or not at all (commit_transaction.cpp
//                      tells it step by step)
//   publish_pointer    DIR/latest moved to a new tag the same way
//   move_files_into    a published directory's files moved into a shared directory (export)
// Every file-system call goes through an fs::FileSystem, so tests can simulate a crash at each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/storage/internal/xxh3.h"
#include "common/common.h"
#include "fs/file_system.h"
#include "nvme/io_engine.h"

namespace tierzero::checkpoint {

class StreamDigest;  // internal/stream_digest.h

// Copies `src` into the front of `dst` (at least as long) in slices of kCopySlice bytes on the threads of the
// calling thread's TBB arena (the global one, or a task_arena the caller runs in: its thread count
// is the copy's); below two slices, on the calling thread.
inline constexpr size_t kCopySlice = 1 << 20;
void copy_in_parallel(std::span<std::byte> dst, std::span<const std::byte> src);

// Aligned staging buffers kept across saves (a run's periodic saves borrow the same ones, one save at
// a time): allocated and pre-faulted once, so no save pays their page faults.
class WriteBuffers {
 public:
  static constexpr uint64_t kBufferBytes = 16ull << 20;
  static constexpr uint32_t kMinBuffers = 4;  // what a StreamWriter holds of its own
  // ceil(write_behind_bytes / buffer_bytes) buffers of `buffer_bytes` (a nonzero multiple of 4096),
  // at least kMinBuffers: a stream borrowing them runs up to that many bytes ahead of its disk
  // writes (write_behind_bytes 0: the 4 buffers of a plain StreamWriter, the fill at the disk's
  // rate). Every page is touched here. kResourceExhausted names the bytes asked for when the host
  // cannot allocate them; kInvalidArgument a bad buffer size.
  static Result<std::unique_ptr<WriteBuffers>> create(uint64_t write_behind_bytes,
                                                      uint64_t buffer_bytes = kBufferBytes);
  uint32_t count() const { return static_cast<uint32_t>(buffers_.size()); }
  uint64_t buffer_bytes() const { return buffer_bytes_; }
  // Host bytes held: count() x buffer_bytes().
  uint64_t bytes() const { return count() * buffer_bytes_; }
  std::byte* buffer(size_t i) const { return buffers_[i].get(); }

 private:
  uint64_t buffer_bytes_ = 0;
  std::vector<nvme::AlignedBuffer> buffers_;
};

// Bytes are staged in aligned buffers of `buffer_bytes` used in turn; a full buffer is submitted at
// once (the I/O engine bounds the pieces in flight, the rest queue behind them) and the next one
// fills while the earlier ones are written: the fill waits only for the write of the buffer it
// reuses, so it runs up to count - 1 buffers ahead of the disk.
class StreamWriter {
 public:
  struct Options {
    uint64_t buffer_bytes = 16ull << 20;  // a nonzero multiple of 4096
    uint32_t buffer_count = 4;            // >= 2
    // Borrowed instead (their count and size replace the two above); they
    // must outlive the writer, and no other writer may use them meanwhile. nullptr: the writer's own.
    const WriteBuffers* borrowed = nullptr;
    // The XXH3 of the file and of ranges marked with begin_range()/end_range(), taken from each
    // staging buffer on a thread of the writer's own after the buffer is submitted (a buffer is
    // reused once written and hashed): the fill never hashes.
    bool hashed = false;
  };
  // Creates (truncates) `path` on `fs` for writing through `engine`; `preallocate_bytes` (0: none)
  // are reserved up front and become the file's size until finish() trims it to the bytes
  // appended. Errors name the path; bad options are kInvalidArgument.
  static Result<std::unique_ptr<StreamWriter>> create(fs::FileSystem& fs, nvme::IoEngine& engine,
                                                      const std::string& path, uint64_t preallocate_bytes,
                                                      const Options& options);
  // Waits for writes still in flight (their buffers are owned here); does not sync.
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Copies `bytes` to the end of the file.
  Status append(std::span<const std::byte> bytes);
  // The free, writable tail of the staging buffer (never empty): fill a prefix of it, then
  // commit() that many bytes. Lets callers produce bytes in place (conversion, compression)
  // instead of through a copy. The span is valid until the next call on the writer.
  Result<std::span<std::byte>> reserve();
  // Appends the first `bytes` bytes of the span reserve() returned.
  Status commit(uint64_t bytes);
  // Writes what is staged, waits for every write, trims, fdatasyncs and closes; the bytes are
  // durable on ok (the file's name is not: that is the directory's sync, see CommitTransaction).
  Status finish();
  // Bytes appended so far (the file's size once finished).
  uint64_t size() const { return flushed_ + filled_; }
  const std::string& path() const { return file_->path(); }
  // Options::hashed only. A range of the file starts at size() (ranges one after another, never
  // overlapping); returns its id for end_range() and range_digest().
  size_t begin_range();
  // Range `id` ends at size().
  void end_range(size_t id);
  // After finish() returned ok: the XXH3 of the whole file / of range `id`'s bytes.
  uint64_t file_digest() const;
  uint64_t range_digest(size_t id) const;

 private:
  StreamWriter(nvme::IoEngine& engine, std::unique_ptr<fs::WritableFile> file, const Options& options);
  // Submits the staging buffer (and hands it to the digest) and moves to the next one, waiting for
  // that one's previous write (and its digest).
  Status flush_current();
  nvme::IoEngine& engine_;
  std::unique_ptr<fs::WritableFile> file_;
  Options options_;
  std::vector<nvme::AlignedBuffer> owned_;  // empty when borrowed
  std::vector<std::byte*> buffers_;
  std::vector<nvme::IoTicket> in_flight_;
  size_t current_ = 0;
  uint64_t filled_ = 0;                   // bytes staged in buffers_[current_]
  uint64_t flushed_ = 0;                  // file offset of buffers_[current_]'s first byte
  uint64_t preallocated_ = 0;             // the size the file was given at create()
  std::unique_ptr<StreamDigest> digest_;  // Options::hashed
  std::vector<uint64_t> digest_ends_;     // per buffer: the file offset its last bytes handed over end at
};

// Publishing DIR/NAME: files are written into DIR/NAME.partial, which becomes DIR/NAME in one
// rename once everything in it is durable. Holds names only, so every rank of a save can build
// the same transaction; the calls below are the protocol's steps, in order.
class CommitTransaction {
 public:
  // Names DIR/NAME.partial (staging) and DIR/NAME (target); makes no call yet.
  CommitTransaction(fs::FileSystem& fs, std::string dir, std::string name);

  const std::string& dir() const { return dir_; }
  const std::string& staging_dir() const { return staging_; }
  fs::FileSystem& file_system() const { return fs_; }

  // Creates DIR when missing (then fsyncs its parent: DIR itself is durable), removes a
  // DIR/NAME.partial a crashed attempt left, and creates it empty. Errors name the directory.
  Status begin();
  // Writes `bytes` to staging_dir()/FILE, fsyncs and closes it; errors name the file.
  Status write_file(const std::string& file, std::span<const std::byte> bytes);
  // Fsyncs the staging directory, renames it to DIR/NAME and fsyncs DIR: DIR/NAME is durable and
  // complete on ok. An existing DIR/NAME is replaced: removed first when `replace_tree` (the
  // caller knows it is unpublished), else it must be an empty directory (rename replaces it).
  Status publish(bool replace_tree);
  // Removes the staging directory of a failed attempt (everything in it).
  Status abort();

 private:
  fs::FileSystem& fs_;
  std::string dir_;
  std::string staging_;
  std::string target_;
};

// Points DIR/POINTER (e.g. `latest`) at `text` the same way: DIR/POINTER.partial written and
// fsynced, renamed over DIR/POINTER, DIR fsynced. Durable on ok; a crash leaves the old or the
// new text, never a mix.
Status publish_pointer(fs::FileSystem& fs, const std::string& dir, const std::string& pointer, std::string_view text);

// Moves every file of `from` (a published, durable directory) into `dir`, replacing files of the
// same name: all files not named in `last` first, DIR fsynced, then those in `last` (the file a
// reader follows into the set, e.g. an index), DIR fsynced; then `from` is removed. A crash never
// leaves a new file of `last` beside missing new files.
Status move_files_into(fs::FileSystem& fs, const std::string& from, const std::string& dir,
                       std::span<const std::string> last);

}  // namespace tierzero::checkpoint
