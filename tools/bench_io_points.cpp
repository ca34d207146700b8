// The benchmark grids and the tuning choice.
#include "tools/bench_io_points.h"

namespace tierzero::tools {

namespace {

template <typename T>
std::vector<T> either(const std::optional<T>& fixed, std::vector<T> swept) {
  return fixed ? std::vector<T>{*fixed} : swept;
}

std::vector<nvme::IoConfig> grid(const std::vector<nvme::Backend>& backends, const std::vector<uint64_t>& blocks,
                                 const std::vector<uint32_t>& depths, const std::vector<uint32_t>& threads) {
  std::vector<nvme::IoConfig> out;
  for (nvme::Backend b : backends) {
    for (uint64_t bs : blocks) {
      for (uint32_t qd : depths) {
        for (uint32_t t : threads) {
          nvme::IoConfig c;
          c.backend = b;
          c.block_size = bs;
          c.queue_depth = qd;
          c.intra_op_parallelism = t;
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

}  // namespace

nvme::IoConfig single_point(const PointChoices& ch) {
  return grid({ch.backend.value_or(nvme::Backend::kAuto)}, {ch.block_size.value_or(1 << 20)},
              {ch.queue_depth.value_or(32)}, {ch.threads.value_or(1)})
      .front();
}

std::vector<nvme::IoConfig> sweep_points(const PointChoices& ch) {
  return grid(either(ch.backend, {nvme::Backend::kIoUring, nvme::Backend::kLibaio, nvme::Backend::kSync}),
              either<uint64_t>(ch.block_size, {256 << 10, 1 << 20, 4 << 20}),
              either<uint32_t>(ch.queue_depth, {1, 8, 32}), either<uint32_t>(ch.threads, {1, 2}));
}

std::vector<nvme::IoConfig> tune_points(const PointChoices& ch) {
  return grid({ch.backend.value_or(nvme::Backend::kAuto)},
              either<uint64_t>(ch.block_size, {256 << 10, 1 << 20, 4 << 20}),
              either<uint32_t>(ch.queue_depth, {8, 16, 32}), either<uint32_t>(ch.threads, {1, 2}));
}

std::vector<nvme::IoConfig> submit_mode_points(const nvme::IoConfig& best) {
  nvme::IoConfig single = best, waves = best;
  single.single_submit = true;
  waves.overlap_events = false;
  return {single, waves};
}

double tune_score(double read_gbps, double write_gbps) {
  if (read_gbps <= 0 || write_gbps <= 0) return 0;
  return 2.0 / (1.0 / read_gbps + 1.0 / write_gbps);
}

nlohmann::json aio_block(const nvme::IoConfig& c) {
  return {{"aio",
           {{"block_size", c.block_size},
            {"queue_depth", c.queue_depth},
            {"intra_op_parallelism", c.intra_op_parallelism},
            {"single_submit", c.single_submit},
            {"overlap_events", c.overlap_events}}}};
}

std::string short_size(uint64_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace tierzero::tools
