// RunNorms: the accumulated gradient's squared norm from the runs as they were written, also when
// later runs cut earlier ones at other boundaries (a bucket straddling two micro-batches).
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "engine/zero/internal/run_norms.h"

namespace tierzero::engine {
namespace {

// Writes fresh values into partition[offset, offset + numel) and records the run, as the landing
// worker does.
void write_run(std::vector<float>& partition, RunNorms& norms, int64_t offset, int64_t numel, std::mt19937& rng) {
  std::normal_distribution<float> value(0.0f, 1.0f);
  double sq = 0.0;
  for (int64_t i = offset; i < offset + numel; ++i) {
    partition[i] = value(rng);
    sq += static_cast<double>(partition[i]) * partition[i];
  }
  norms.record(offset, numel, sq);
}

double direct_sq(const std::vector<float>& partition, int64_t end) {
  double sq = 0.0;
  for (int64_t i = 0; i < end; ++i) sq += static_cast<double>(partition[i]) * partition[i];
  return sq;
}

TEST(RunNorms, SameBoundariesReplaceExactly) {
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 1});
  std::mt19937 rng(7);
  std::vector<float> partition(1000);
  RunNorms norms;
  for (int micro = 0; micro < 3; ++micro)
    for (int64_t offset = 0; offset < 1000; offset += 250) write_run(partition, norms, offset, 250, rng);
  const cpu_adam::GradStats stats = norms.total(cpu_adam::const_elements(partition), adam);
  EXPECT_TRUE(stats.finite);
  EXPECT_NEAR(stats.sq_norm, direct_sq(partition, 1000), 1e-9 * stats.sq_norm);
}

// The H200 case: one micro-batch lands a parameter in two pieces, the next in one piece starting
// elsewhere; every element's last write counts once.
TEST(RunNorms, RunsCutAtOtherBoundariesCountEachElementOnce) {
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 1});
  std::mt19937 rng(11);
  std::vector<float> partition(4096);
  RunNorms norms;
  write_run(partition, norms, 0, 1000, rng);
  write_run(partition, norms, 1000, 3096, rng);
  write_run(partition, norms, 500, 1200, rng);  // cuts both runs
  write_run(partition, norms, 3000, 10, rng);   // inside one run
  write_run(partition, norms, 2990, 30, rng);   // covers the last one and cuts around it
  write_run(partition, norms, 0, 100, rng);     // at the start of a cut run
  const cpu_adam::GradStats stats = norms.total(cpu_adam::const_elements(partition), adam);
  EXPECT_TRUE(stats.finite);
  EXPECT_NEAR(stats.sq_norm, direct_sq(partition, 4096), 1e-9 * stats.sq_norm);
}

TEST(RunNorms, NonFiniteValuesInACutPartAreReported) {
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 1});
  std::mt19937 rng(3);
  std::vector<float> partition(100);
  RunNorms norms;
  write_run(partition, norms, 0, 100, rng);
  partition[5] = std::numeric_limits<float>::infinity();  // already landed: its run's sum is stale
  write_run(partition, norms, 50, 10, rng);               // cuts the run: [0, 50) is summed again
  EXPECT_FALSE(norms.total(cpu_adam::const_elements(partition), adam).finite);
  norms.clear();
  EXPECT_EQ(norms.total(cpu_adam::const_elements(partition), adam).sq_norm, 0.0);
}

}  // namespace
}  // namespace tierzero::engine
