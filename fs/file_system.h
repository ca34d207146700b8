// tierzero fs/: the file-system boundary. Every call that creates, syncs, renames or removes a
// file of a checkpoint, a conversion or an export goes through a FileSystem, so a test can put a
// double in its place (fs/testing/fault_injection_fs.h drops what was not synced and fails any
// single call) — RocksDB's FileSystem / FaultInjectionTestFS, in small.
//
// Durability, as POSIX promises it and as the test double models it:
//   - bytes written to a file (append, or nvme requests on io_file()) are durable after sync();
//   - a new, renamed or removed directory entry is durable after sync_dir() of the directory
//     that holds it — a file's sync() does not make its own name durable.
//
// Errors are Status values that name the path, the errno text and what to do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::fs {

// A file open for writing, created (or truncated) by FileSystem::create. Closed, without a sync,
// when destroyed.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual const std::string& path() const = 0;
  // The file as nvme/ sees it, for IoEngine::submit (O_DIRECT where the file system allows it)
  // when it was created with WriteOptions::engine; null otherwise. Bytes written through it are
  // durable only after sync().
  virtual const nvme::FileRef& io_file() const = 0;
  // Writes all of `bytes` at offset size-so-far (the end of what append wrote); short writes are
  // retried, ENOSPC is kOutOfSpace naming the file and offset.
  virtual Status append(std::span<const std::byte> bytes) = 0;
  // Sets the file's size (ftruncate), e.g. to trim a preallocated file to the bytes written.
  virtual Status truncate(uint64_t bytes) = 0;
  // fdatasync: every byte written so far, by append or through io_file(), is durable on ok.
  virtual Status sync() = 0;
  // Closes the file; later calls fail. The error names the file.
  virtual Status close() = 0;
};

struct WriteOptions {
  // Open through this engine (IoEngine::open, O_DIRECT where allowed) so that io_file() can carry
  // its requests; null: a plain buffered file written with append().
  nvme::IoEngine* engine = nullptr;
  uint64_t preallocate_bytes = 0;  // reserved up front (fallocate, size kept) with an engine
};

struct FileInfo {
  bool is_dir = false;
  uint64_t size = 0;  // bytes, for regular files
};

struct SpaceInfo {
  uint64_t available_bytes = 0;  // free to an unprivileged writer (statvfs f_bavail)
  uint64_t total_bytes = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Creates `path`, truncating an existing file. Errors name the path and suggest a writable one.
  virtual Result<std::unique_ptr<WritableFile>> create(const std::string& path, const WriteOptions& options) = 0;
  // The whole content of file `path`; kNotFound when missing.
  virtual Result<std::string> read_file(const std::string& path) = 0;
  // rename(2): atomically replaces `to` (a file, or an empty directory when `from` is one).
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  // Opens directory `dir` and fsyncs it: the entries created, renamed or removed in it are durable.
  virtual Status sync_dir(const std::string& dir) = 0;
  // mkdir(2). Returns true when it created `dir`, false when a directory already was there.
  virtual Result<bool> make_dir(const std::string& dir) = 0;
  // Removes file (or empty directory) `path`; kNotFound when missing.
  virtual Status remove_file(const std::string& path) = 0;
  // Removes `path` and everything under it (nftw, never following links); missing is fine.
  virtual Status remove_tree(const std::string& path) = 0;
  // The names in directory `dir` ("." and ".." left out), in no particular order.
  virtual Result<std::vector<std::string>> list_dir(const std::string& dir) = 0;
  // What `path` is (lstat); kNotFound when missing.
  virtual Result<FileInfo> stat(const std::string& path) = 0;
  // Free and total space of the file system holding `path` (statvfs).
  virtual Result<SpaceInfo> free_space(const std::string& path) = 0;
};

// The process's file system: the real (POSIX) one, unless a test installed a double
// (fs/testing/fault_injection_fs.h). Thread-safe.
FileSystem& default_file_system();

// The directory part of `path` ("." for a bare name, "/" for a file in the root); trailing
// slashes of `path` are ignored. Pure string work, no system call.
std::string parent_dir(const std::string& path);
// `path` with trailing slashes removed ("/" stays "/").
std::string strip_trailing_slashes(const std::string& path);

}  // namespace tierzero::fs
