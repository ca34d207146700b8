// `tierzero bench pcie`: host <-> GPU copy bandwidth of the copy path training runs on (offload/'s
// DeviceCopies: side streams ordered by events) against plain cudaMemcpy of the same chunk size in
// the same run: pinned and pageable, H2D, D2H and duplex, over chunk sizes.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/common.h"
#include "offload/torch/offload_torch.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

using offload::CopyDirection;
using offload::CopyMethod;
using offload::HostMemoryKind;

struct BenchPcieFlags {
  std::string size = "1GiB";
  std::string chunks = "1MiB,4MiB,8MiB,16MiB,64MiB";
  int repeat = 3;
  int device = 0;
  std::string json;
};

const char* direction_name(CopyDirection d) {
  return d == CopyDirection::kH2D ? "h2d" : d == CopyDirection::kD2H ? "d2h" : "duplex";
}

std::vector<uint64_t> parse_chunks(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const uint64_t chunk = value_or_throw(parse_bytes(item));
    if (chunk == 0) throw Error(invalid_argument("--chunks: a chunk size must be at least one byte"));
    out.push_back(chunk);
  }
  if (out.empty()) throw Error(invalid_argument("--chunks: give at least one size, e.g. 8MiB"));
  return out;
}

void run(const BenchPcieFlags& flags) {
  BenchReport report("tierzero bench pcie");
  const uint64_t size = value_or_throw(parse_bytes(flags.size));
  const std::vector<uint64_t> chunks = parse_chunks(flags.chunks);
  if (size == 0 || flags.repeat < 1) throw Error(invalid_argument("--size and --repeat must be positive"));
  const std::vector<BenchColumn> columns = {
      {"dir", 6},      {"host", 8},       {"chunk", 9},   {"tierzero_GB/s", 13, 2}, {"cudaMemcpy_GB/s", 15, 2},
      {"ratio", 6, 3}, {"vs_peak", 7, 3}, {"verified", 8}};
  Result<std::unique_ptr<offload::CopyProbe>> probe = offload::CopyProbe::create(size, flags.device);
  if (!probe.ok()) {
    report.param("skipped", "no GPU to measure: " + probe.status().message());
    report.begin(columns);
    report.summary("skipped", "bench pcie needs a CUDA GPU; nothing was measured");
    report.end(true);
    if (!flags.json.empty()) throw_if_error(report.write_json(flags.json));
    return;
  }
  report.param("device", (*probe)->device_description());
  report.param("size",
               format_bytes(size) + " per pass, " + std::to_string(flags.repeat) + " timed passes after one warm-up");
  report.param("tierzero",
               "DeviceCopies::to_device / to_host, the copies training makes, one per chunk on its H2D/D2H side "
               "stream after an event of the current stream, the pass done at its last chunk's event; pageable "
               "memory handed to the same calls");
  report.param("cudaMemcpy", "cudaMemcpyAsync + cudaStreamSynchronize per chunk (duplex: one thread per direction)");
  report.param("GB/s",
               "1e9 bytes / s; duplex counts both directions; vs_peak = tierzero / best cudaMemcpy of that "
               "direction and host memory over all chunk sizes");
  report.begin(columns);

  struct Row {
    CopyDirection direction;
    HostMemoryKind host;
    uint64_t chunk;
    double tierzero, peer;
    bool verified;
  };
  std::vector<Row> rows;
  std::map<std::pair<int, int>, double> peak;  // (direction, host) -> best cudaMemcpy GB/s
  bool all_verified = true;
  for (HostMemoryKind host : {HostMemoryKind::kPinned, HostMemoryKind::kPageable}) {
    for (CopyDirection direction : {CopyDirection::kH2D, CopyDirection::kD2H, CopyDirection::kDuplex}) {
      for (uint64_t chunk : chunks) {
        auto gbps = [](const offload::CopyMeasurement& m) { return m.bytes / m.seconds / 1e9; };
        offload::CopyMeasurement ours =
            value_or_throw((*probe)->measure(direction, host, CopyMethod::kTierzero, chunk, flags.repeat));
        offload::CopyMeasurement peer =
            value_or_throw((*probe)->measure(direction, host, CopyMethod::kCudaMemcpy, chunk, flags.repeat));
        Row r{direction, host, chunk, gbps(ours), gbps(peer), ours.verified && peer.verified};
        all_verified = all_verified && r.verified;
        double& best = peak[{static_cast<int>(direction), static_cast<int>(host)}];
        best = std::max(best, r.peer);
        rows.push_back(r);
      }
      for (const Row& r : rows) {
        if (r.direction != direction || r.host != host) continue;
        const double best = peak[{static_cast<int>(direction), static_cast<int>(host)}];
        report.row({direction_name(r.direction), r.host == HostMemoryKind::kPinned ? "pinned" : "pageable",
                    format_bytes(r.chunk), r.tierzero, r.peer, r.tierzero / r.peer, r.tierzero / best,
                    r.verified ? "OK" : "FAIL"});
      }
    }
  }

  // Targets: pinned one-way >= 0.95x the cudaMemcpy peak at chunks >= 8 MiB; duplex beats one way.
  double worst_large = 1e9, duplex_gain = 0;
  for (const Row& r : rows) {
    if (r.host != HostMemoryKind::kPinned) continue;
    const double best = peak[{static_cast<int>(r.direction), static_cast<int>(r.host)}];
    if (r.direction != CopyDirection::kDuplex && r.chunk >= (8u << 20))
      worst_large = std::min(worst_large, r.tierzero / best);
    if (r.direction == CopyDirection::kDuplex) {
      double one_way = 0;
      for (const Row& o : rows) {
        if (o.host == r.host && o.chunk == r.chunk && o.direction != CopyDirection::kDuplex)
          one_way = std::max(one_way, o.tierzero);
      }
      duplex_gain = std::max(duplex_gain, r.tierzero / one_way);
    }
  }
  auto ratio_text = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", v);
    return std::string(text);
  };
  if (worst_large < 1e9) {
    report.summary("pinned h2d/d2h at >= 8 MiB chunks",
                   "worst " + ratio_text(worst_large) +
                       "x the cudaMemcpy peak (target 0.95): " + (worst_large >= 0.95 ? "met" : "NOT met"));
  }
  report.summary("pinned duplex", "best " + ratio_text(duplex_gain) + "x the faster single direction (target > 1): " +
                                      (duplex_gain > 1 ? "met" : "NOT met"));
  report.end(all_verified);
  if (!flags.json.empty()) throw_if_error(report.write_json(flags.json));
  if (!all_verified) throw ExitCode{1};
}

}  // namespace

void add_bench_pcie_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchPcieFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "pcie",
      "Host <-> GPU copies: training's copy path vs cudaMemcpy, pinned/pageable, H2D/D2H/duplex, per chunk size");
  cmd->add_option("--size", flags->size, "Bytes per pass and direction (default 1GiB)");
  cmd->add_option("--chunks", flags->chunks, "Comma-separated chunk sizes (default 1MiB,4MiB,8MiB,16MiB,64MiB)");
  cmd->add_option("--repeat", flags->repeat, "Timed passes per point (default 3)")->check(whole_number_in(1, 1000));
  cmd->add_option("--device", flags->device, "CUDA device (default 0)")->check(whole_number_in(0, 1023));
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace tierzero::tools
