#include "fs/testing/fault_injection_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "fs/testing/durable_image.h"

namespace tierzero::fs::testing {
namespace {

// The bytes of the file open as `fd` (read with pread, whatever else moves its offset).
std::string read_all(int fd) {
  std::string data;
  char buffer[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n <= 0) break;
    data.append(buffer, static_cast<size_t>(n));
    at += n;
  }
  return data;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// The double's file: steps go through the owner; a sync snapshots the content (read through a
// descriptor of its own, so a rename of the file does not matter).
class FaultInjectionFile final : public WritableFile {
 public:
  FaultInjectionFile(FaultInjectionFs& owner, std::unique_ptr<WritableFile> base, uint64_t id)
      : owner_(owner), base_(std::move(base)), id_(id), reader_(::open(base_->path().c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~FaultInjectionFile() override {
    if (reader_ >= 0) ::close(reader_);
  }
  const std::string& path() const override { return base_->path(); }
  const nvme::FileRef& io_file() const override { return base_->io_file(); }
  Status append(std::span<const std::byte> bytes) override {
    TZ_RETURN_IF_ERROR(owner_.begin_step("append", path()));
    return base_->append(bytes);
  }
  Status truncate(uint64_t bytes) override {
    TZ_RETURN_IF_ERROR(owner_.begin_step("truncate", path()));
    return base_->truncate(bytes);
  }
  Status sync() override {
    TZ_RETURN_IF_ERROR(owner_.begin_step("sync", path()));
    TZ_RETURN_IF_ERROR(base_->sync());
    owner_.file_synced(id_, read_all(reader_));
    return {};
  }
  Status close() override {
    TZ_RETURN_IF_ERROR(owner_.check_power());
    return base_->close();
  }

 private:
  FaultInjectionFs& owner_;
  std::unique_ptr<WritableFile> base_;
  uint64_t id_;
  int reader_;
};

}  // namespace

FaultInjectionFs::FaultInjectionFs(FileSystem& base, const std::string& root)
    : base_(base), root_(root), image_(std::make_unique<DurableImage>(root)) {}

FaultInjectionFs::~FaultInjectionFs() = default;

std::vector<FsStep> FaultInjectionFs::steps() const {
  std::lock_guard lock(mu_);
  return steps_;
}

void FaultInjectionFs::fail_step(size_t k) {
  std::lock_guard lock(mu_);
  fail_at_ = k;
}

void FaultInjectionFs::crash_at(size_t k) {
  std::lock_guard lock(mu_);
  crash_at_ = k;
}

void FaultInjectionFs::fail_paths_containing(const std::string& fragment, Status error) {
  std::lock_guard lock(mu_);
  failing_fragment_ = fragment;
  failing_error_ = std::move(error);
}

bool FaultInjectionFs::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

size_t FaultInjectionFs::image_count() const {
  std::lock_guard lock(mu_);
  return image_->image_count();
}

Status FaultInjectionFs::restore_image(size_t i) {
  std::lock_guard lock(mu_);
  return image_->restore(i);
}

Status FaultInjectionFs::check_power() const {
  std::lock_guard lock(mu_);
  if (crashed_) return io_error(fmt::format("simulated power loss (before step {})", *crash_at_));
  return {};
}

Status FaultInjectionFs::begin_step(const std::string& op, const std::string& path) {
  std::lock_guard lock(mu_);
  const size_t k = steps_.size();
  if (crashed_) return io_error(fmt::format("simulated power loss (before step {})", *crash_at_));
  steps_.push_back({op, path});
  if (crash_at_ && k >= *crash_at_) {
    crashed_ = true;
    return io_error(fmt::format("simulated power loss at step {} ({} {})", k, op, path));
  }
  if (fail_at_ && k == *fail_at_) return io_error(fmt::format("injected fault at step {} ({} {})", k, op, path));
  if (!failing_fragment_.empty() && path.find(failing_fragment_) != std::string::npos)
    return Status(failing_error_.code(), fmt::format("{} ({} {})", failing_error_.message(), op, path));
  return {};
}

void FaultInjectionFs::file_synced(uint64_t id, std::string content) {
  std::lock_guard lock(mu_);
  image_->file_synced(id, std::move(content));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionFs::create(const std::string& path, const WriteOptions& options) {
  TZ_RETURN_IF_ERROR(begin_step("create", path));
  const bool existed = exists(path);
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_.create(path, options));
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = image_->created(path, existed);
  }
  return std::unique_ptr<WritableFile>(new FaultInjectionFile(*this, std::move(file), id));
}

Result<std::string> FaultInjectionFs::read_file(const std::string& path) {
  TZ_RETURN_IF_ERROR(check_power());
  return base_.read_file(path);
}

Status FaultInjectionFs::rename(const std::string& from, const std::string& to) {
  TZ_RETURN_IF_ERROR(begin_step("rename", from + " -> " + to));
  {
    std::lock_guard lock(mu_);
    image_->renaming(from, to);
  }
  return base_.rename(from, to);
}

Status FaultInjectionFs::sync_dir(const std::string& dir) {
  TZ_RETURN_IF_ERROR(begin_step("sync_dir", dir));
  TZ_RETURN_IF_ERROR(base_.sync_dir(dir));
  std::lock_guard lock(mu_);
  image_->dir_synced(dir);
  return {};
}

Result<bool> FaultInjectionFs::make_dir(const std::string& dir) {
  TZ_RETURN_IF_ERROR(begin_step("make_dir", dir));
  TZ_ASSIGN_OR_RETURN(const bool created, base_.make_dir(dir));
  if (created) {
    std::lock_guard lock(mu_);
    image_->made_dir(dir);
  }
  return created;
}

Status FaultInjectionFs::remove_file(const std::string& path) {
  TZ_RETURN_IF_ERROR(begin_step("remove_file", path));
  {
    std::lock_guard lock(mu_);
    image_->removing(path);
  }
  return base_.remove_file(path);
}

Status FaultInjectionFs::remove_tree(const std::string& path) {
  TZ_RETURN_IF_ERROR(begin_step("remove_tree", path));
  {
    std::lock_guard lock(mu_);
    image_->removing(path);
  }
  return base_.remove_tree(path);
}

Result<std::vector<std::string>> FaultInjectionFs::list_dir(const std::string& dir) {
  TZ_RETURN_IF_ERROR(check_power());
  return base_.list_dir(dir);
}

Result<FileInfo> FaultInjectionFs::stat(const std::string& path) {
  TZ_RETURN_IF_ERROR(check_power());
  return base_.stat(path);
}

Result<SpaceInfo> FaultInjectionFs::free_space(const std::string& path) {
  TZ_RETURN_IF_ERROR(check_power());
  return base_.free_space(path);
}

}  // namespace tierzero::fs::testing
