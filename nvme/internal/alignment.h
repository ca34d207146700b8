// Direct-I/O alignment: what the file system asks of buffers and offsets, and rounding helpers.
#pragma once

#include <cstdint>
#include <string>

namespace tierzero::nvme {

struct DioAlignment {
  uint32_t mem = 1;     // buffer address alignment
  uint32_t offset = 1;  // file offset and length alignment
};

// Returns the direct-I/O alignment of the open file `fd`: statx STATX_DIOALIGN where the kernel
// and file system report it, else the block device's logical block size (BLKSSZGET for a device
// node, /sys/dev/block/M:m/queue/logical_block_size for a file on one), else st_blksize.
// Never fails: 4096 when nothing can be learned.
DioAlignment probe_dio_alignment(int fd);

inline uint64_t align_down(uint64_t v, uint64_t a) { return v / a * a; }
inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
inline bool is_aligned(uint64_t v, uint64_t a) { return v % a == 0; }
inline bool is_aligned(const void* p, uint64_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace tierzero::nvme
