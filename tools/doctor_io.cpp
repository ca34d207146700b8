// doctor: the I/O backends and the NVMe paths.
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/common.h"
#include "nvme/io_engine.h"
#include "tools/doctor_checks.h"

namespace tierzero::tools {

namespace {

constexpr uint64_t kProbeBytes = 1 << 20;
constexpr uint64_t kLowFreeBytes = 20ull << 30;
constexpr long kTmpfsMagic = 0x01021994;

nvme::IoConfig with_backend(nvme::Backend backend) {
  nvme::IoConfig c;
  c.backend = backend;
  return c;
}

std::string kernel_release() {
  utsname u{};
  return uname(&u) == 0 ? u.release : "unknown";
}

// Writes and reads back kProbeBytes in `dir` through `engine`; describes the file's I/O mode.
Result<std::string> probe_direct_io(nvme::IoEngine& engine, const std::string& dir, bool& direct) {
  const std::string path = dir + "/.tierzero-doctor-" + std::to_string(getpid()) + ".tmp";
  struct Unlink {
    std::string path;
    ~Unlink() { ::unlink(path.c_str()); }
  } cleanup{path};
  TZ_ASSIGN_OR_RETURN(nvme::FileRef file, engine.open(path, {nvme::OpenMode::kReadWrite, kProbeBytes, true}));
  nvme::AlignedBuffer out = nvme::allocate_aligned(kProbeBytes), in = nvme::allocate_aligned(kProbeBytes);
  for (uint64_t i = 0; i < kProbeBytes; ++i) out[i] = static_cast<std::byte>(i * 131 + 7);
  TZ_RETURN_IF_ERROR(nvme::write_sync(engine, file, 0, out.get(), kProbeBytes, true));
  TZ_RETURN_IF_ERROR(nvme::read_sync(engine, file, 0, in.get(), kProbeBytes));
  if (std::memcmp(out.get(), in.get(), kProbeBytes) != 0) {
    return corrupt("1 MiB written to " + path + " read back different");
  }
  direct = file->direct();
  if (!direct) return std::string("buffered (O_DIRECT refused)");
  return "O_DIRECT, alignment memory " + std::to_string(file->mem_align()) + " B, offset " +
         std::to_string(file->offset_align()) + " B";
}

DoctorLine check_path(nvme::IoEngine& engine, const std::string& dir) {
  DoctorLine line{"nvme", dir, "", Verdict::kOk, ""};
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    line.value = "not a directory";
    line.verdict = Verdict::kFail;
    line.fix = "create it (mkdir -p " + dir + ") or pass an existing directory on the NVMe drive with --nvme";
    return line;
  }
  struct statvfs vfs {};
  struct statfs fs {};
  const bool have_vfs = statvfs(dir.c_str(), &vfs) == 0;
  const bool tmpfs = statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic;
  const uint64_t free_bytes = have_vfs ? static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize : 0;
  bool direct = false;
  Result<std::string> io = probe_direct_io(engine, dir, direct);
  if (!io.ok()) {
    line.value = "1 MiB write/read failed: " + io.status().message();
    line.verdict = Verdict::kFail;
    line.fix = "choose a writable directory on a local disk (offload_*.nvme_path, --nvme)";
    return line;
  }
  line.value = *io + "; " + format_bytes(free_bytes) + " free" + (tmpfs ? "; tmpfs (memory, not a disk)" : "");
  if (tmpfs || !direct) {
    line.verdict = Verdict::kWarn;
    line.fix = "swap files here go through the page cache" + std::string(tmpfs ? " and use RAM" : "") +
               ": point nvme_path at a directory on a local NVMe file system (ext4, xfs)";
  } else if (free_bytes < kLowFreeBytes) {
    line.verdict = Verdict::kWarn;
    line.fix = "under " + format_bytes(kLowFreeBytes) +
               " free: optimizer state on NVMe needs about 12 bytes per parameter; free space or choose another path";
  }
  return line;
}

}  // namespace

std::vector<DoctorLine> check_io_backends() {
  std::vector<DoctorLine> lines;
  Result<std::unique_ptr<nvme::IoEngine>> uring = nvme::IoEngine::create(with_backend(nvme::Backend::kIoUring));
  if (uring.ok()) {
    lines.push_back({"io", "io_uring", "a ring works (kernel " + kernel_release() + ")", Verdict::kOk, ""});
  } else {
    lines.push_back({"io", "io_uring", uring.status().message(), Verdict::kWarn,
                     "kernel >= 5.6 with io_uring allowed (containers: a seccomp profile that permits io_uring_setup); "
                     "tierzero falls back to libaio"});
  }
  Result<std::unique_ptr<nvme::IoEngine>> aio = nvme::IoEngine::create(with_backend(nvme::Backend::kLibaio));
  if (aio.ok()) {
    lines.push_back({"io", "libaio", "io_setup works", Verdict::kOk, ""});
  } else {
    lines.push_back(
        {"io", "libaio", aio.status().message(), Verdict::kWarn, "raise /proc/sys/fs/aio-max-nr, or rely on io_uring"});
  }
  Result<std::unique_ptr<nvme::IoEngine>> chosen = nvme::IoEngine::create(with_backend(nvme::Backend::kAuto));
  if (!chosen.ok()) {
    lines.push_back({"io", "backend (auto)", chosen.status().message(), Verdict::kFail, "report this as a bug"});
  } else {
    const nvme::Backend b = (*chosen)->backend();
    lines.push_back(
        {"io", "backend (auto)", nvme::backend_name(b), b == nvme::Backend::kSync ? Verdict::kWarn : Verdict::kOk,
         b == nvme::Backend::kSync ? "the pread/pwrite thread pool is slower: enable io_uring or libaio" : ""});
  }
  return lines;
}

std::vector<DoctorLine> check_nvme_paths(const std::vector<std::string>& paths) {
  std::vector<DoctorLine> lines;
  Result<std::unique_ptr<nvme::IoEngine>> engine = nvme::IoEngine::create({});
  for (const std::string& dir : paths) {
    if (!engine.ok()) {
      lines.push_back({"nvme", dir, engine.status().message(), Verdict::kFail, "see the io lines above"});
      continue;
    }
    lines.push_back(check_path(**engine, dir));
  }
  return lines;
}

}  // namespace tierzero::tools
