// allocate_aligned: page alignment for small buffers, 2 MiB alignment and transparent huge pages
// for large ones (what keeps a 1 MiB request one block-layer segment).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "nvme/io_engine.h"

namespace tierzero::nvme {
namespace {

bool aligned_to(const void* p, uint64_t align) { return reinterpret_cast<uintptr_t>(p) % align == 0; }

// The THP mode the kernel reports ("always", "madvise", "never"), or "" without THP support.
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

// Kilobytes of anonymous huge pages in the mapping that holds `p`, as /proc/self/smaps reports.
uint64_t anon_huge_kb_around(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(':') > line.find(' ')) {
      inside = addr >= begin && addr < end;
      continue;
    }
    uint64_t kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1) return kb;
  }
  return 0;
}

TEST(AllocateAlignedTest, SmallBuffersArePageAlignedAndWritable) {
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4097}, uint64_t{1} << 20, kHugeBufferAlign - 1}) {
    AlignedBuffer buffer = allocate_aligned(bytes);
    ASSERT_NE(buffer, nullptr);
    EXPECT_TRUE(aligned_to(buffer.get(), 4096)) << bytes << " bytes";
    std::memset(buffer.get(), 0xA5, bytes);
    EXPECT_EQ(buffer[bytes - 1], std::byte{0xA5});
  }
}

TEST(AllocateAlignedTest, LargeBuffersAreHugePageAligned) {
  for (uint64_t bytes : {kHugeBufferAlign, kHugeBufferAlign + 1, uint64_t{32} << 20}) {
    AlignedBuffer buffer = allocate_aligned(bytes);
    ASSERT_NE(buffer, nullptr);
    EXPECT_TRUE(aligned_to(buffer.get(), kHugeBufferAlign)) << bytes << " bytes";
    std::memset(buffer.get(), 0x5A, bytes);
    EXPECT_EQ(buffer[bytes - 1], std::byte{0x5A});
  }
}

TEST(AllocateAlignedTest, LargeBuffersLieOnTransparentHugePages) {
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages are off (mode '" << mode << "')";
  const uint64_t bytes = uint64_t{8} << 20;
  AlignedBuffer buffer = allocate_aligned(bytes);
  std::memset(buffer.get(), 1, bytes);  // fault the pages in
  EXPECT_GE(anon_huge_kb_around(buffer.get()), kHugeBufferAlign / 1024)
      << "an 8 MiB buffer has no 2 MiB page under it (THP mode '" << mode << "')";
}

}  // namespace
}  // namespace tierzero::nvme
