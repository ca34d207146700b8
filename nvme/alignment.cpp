// Direct-I/O alignment from the file system, never a constant.
#include "nvme/internal/alignment.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>

namespace tierzero::nvme {

namespace {

constexpr uint32_t kFallbackAlign = 4096;

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Logical block size of the block device holding the file, from sysfs (a partition's queue/
// lives in its parent disk's directory). 0 when unknown.
uint32_t sysfs_logical_block_size(dev_t dev) {
  const std::string base = "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  for (const char* rel : {"/queue/logical_block_size", "/../queue/logical_block_size"}) {
    std::ifstream in(base + rel);
    uint64_t v = 0;
    if (in >> v && is_power_of_two(v)) return static_cast<uint32_t>(v);
  }
  return 0;
}

}  // namespace

DioAlignment probe_dio_alignment(int fd) {
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) &&
      is_power_of_two(stx.stx_dio_offset_align) && is_power_of_two(stx.stx_dio_mem_align)) {
    return {stx.stx_dio_mem_align, stx.stx_dio_offset_align};
  }
#endif
  struct stat st {};
  if (fstat(fd, &st) != 0) return {kFallbackAlign, kFallbackAlign};
  int logical = 0;
  if (S_ISBLK(st.st_mode) && ioctl(fd, BLKSSZGET, &logical) == 0 && is_power_of_two(logical)) {
    return {static_cast<uint32_t>(logical), static_cast<uint32_t>(logical)};
  }
  if (uint32_t lbs = sysfs_logical_block_size(st.st_dev); lbs != 0) return {lbs, lbs};
  if (is_power_of_two(st.st_blksize)) {
    return {static_cast<uint32_t>(st.st_blksize), static_cast<uint32_t>(st.st_blksize)};
  }
  return {kFallbackAlign, kFallbackAlign};
}

}  // namespace tierzero::nvme
