// The peers `tierzero bench tiers` is measured against, in the same run: raw NVMe bandwidth of
// the nvme/ engine on the same files, and cudaMemcpy PCIe bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::tools {

struct Bandwidth {
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

// Reads (or, with `write`, writes a pattern over) the first `bytes_per_file` of every file in
// `paths` with `chunk`-byte requests, `in_flight` per file, all files at once.
Result<Bandwidth> raw_nvme_bandwidth(nvme::IoEngine& io, const std::vector<std::string>& paths, uint64_t bytes_per_file,
                                     uint64_t chunk, uint32_t in_flight, bool write);

// cudaMemcpy bandwidth of pinned memory, H2D (or D2H), `bytes` in 64 MiB chunks; kUnsupported
// without a GPU.
Result<Bandwidth> pcie_bandwidth(uint64_t bytes, bool h2d, int cuda_device);

}  // namespace tierzero::tools
