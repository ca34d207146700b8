// The configurations `tierzero bench io` measures: one, a sweep, or a tuning grid, and the
// `aio` block the tuning picks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nvme/io_engine.h"

namespace tierzero::tools {

// Each optional field is fixed when set (the user gave the flag) and swept when not.
struct PointChoices {
  std::optional<nvme::Backend> backend;
  std::optional<uint64_t> block_size;
  std::optional<uint32_t> queue_depth;
  std::optional<uint32_t> threads;
};

// The engine configuration of one point, with the defaults for what `choices` leaves open:
// auto backend, 1 MiB blocks, depth 32, one ring.
nvme::IoConfig single_point(const PointChoices& choices);

// backend {io_uring, libaio, sync} × block {256K, 1M, 4M} × depth {1, 8, 32} × threads {1, 2},
// each dimension the user fixed taken as given.
std::vector<nvme::IoConfig> sweep_points(const PointChoices& choices);

// block {256K, 1M, 4M} × depth {8, 16, 32} × threads {1, 2} on one backend (auto unless given).
std::vector<nvme::IoConfig> tune_points(const PointChoices& choices);

// `best` with single_submit on, and with overlap_events off: the last two tuning points.
std::vector<nvme::IoConfig> submit_mode_points(const nvme::IoConfig& best);

// The score tuning maximises: the harmonic mean of read and write GB/s (a configuration must
// be good at both, since one aio block serves both directions).
double tune_score(double read_gbps, double write_gbps);

// {"aio": {"block_size", "queue_depth", "intra_op_parallelism", "single_submit", "overlap_events"}}:
// DeepSpeed's aio keys, as the engine's config parser reads them.
nlohmann::json aio_block(const nvme::IoConfig& config);

// "256K", "1M", "4M", or bytes.
std::string short_size(uint64_t bytes);

}  // namespace tierzero::tools
