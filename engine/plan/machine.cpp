// The machine the planner assumes when nothing was measured, and GPU compute by name.
#include <algorithm>
#include <cctype>
#include <iterator>

#include "engine/plan/plan.h"

namespace tierzero::engine {
namespace {

constexpr const char* kDefaultSource = "default: the reference GPU box (H200, PCIe Gen5 x16, 16 cores, virtio disk)";

// Dense 16-bit tensor-core TFLOPS. H200: measured there (bf16 matmul); H100 SXM: the same chip and
// clocks, taken as the same; the others: the vendor's dense figure (no sparsity).
struct GpuFigure {
  const char* name;
  double tflops;
};
constexpr GpuFigure kGpus[] = {
    {"H200", 790}, {"H100 PCIe", 756}, {"H100", 790},    {"GH200", 790}, {"A100", 312}, {"L40S", 362},
    {"L40", 181},  {"RTX 4090", 165},  {"RTX 3090", 71}, {"A10", 125},   {"L4", 121},   {"V100", 125},
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

Machine default_machine() {
  Machine m;
  m.gpu_name = "NVIDIA H200";
  m.gpu_tflops = {790.0, "default: H200 bf16 dense matmul, measured"};
  m.h2d_gbps = {45.0, kDefaultSource};
  m.d2h_gbps = {50.0, kDefaultSource};
  m.nvme_read_gbps = {2.0, kDefaultSource};
  m.nvme_write_gbps = {3.0, kDefaultSource};
  // bench adam --master compact --moments int8 --threads 16 on the H100 box (the slower of its lent
  // hosts, 2026-12-06): 7.57 Gparam/s x 14.06 B.
  m.adam_gbps = {106.0, "default: the H100 box's bench adam (16 cores)"};
  return m;
}

Result<double> gpu_tflops_for(std::string_view gpu_name) {
  const std::string wanted = lower(gpu_name);
  std::string known;
  for (const GpuFigure& gpu : kGpus) {
    if (wanted.find(lower(gpu.name)) != std::string::npos) return gpu.tflops;
    known += (known.empty() ? "" : ", ") + std::string(gpu.name);
  }
  return not_found("no TFLOPS figure for GPU \"" + std::string(gpu_name) + "\" (known: " + known +
                   "); pass --gpu-tflops N");
}

const char* tier_name(Tier tier) {
  constexpr const char* kNames[] = {"gpu", "pinned", "pageable", "nvme"};  // in Tier's order
  return static_cast<size_t>(tier) < std::size(kNames) ? kNames[static_cast<size_t>(tier)] : "?";
}

const char* phase_name(Phase phase) {
  constexpr const char* kNames[] = {"resident", "backward", "step", "start-up"};  // in Phase's order
  return static_cast<size_t>(phase) < std::size(kNames) ? kNames[static_cast<size_t>(phase)] : "?";
}

}  // namespace tierzero::engine
