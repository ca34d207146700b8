// Machine figures from tierzero bench JSON files: the fixtures bench io/adam/tiers wrote on the CI
// box (tests/report/data), and a bench pcie file in its format.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("TIERZERO_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(PlanBenchFiles, IoAdamTiersFixtures) {
  Machine m = default_machine();
  const std::string data = source_dir() + "/tests/report/data/";
  ASSERT_OK(apply_bench_file(data + "bench_io_sweep.json", m));
  EXPECT_EQ(m.nvme_read_gbps.source.rfind("bench io", 0), 0u) << m.nvme_read_gbps.source;
  EXPECT_GT(m.nvme_read_gbps.value, 0.5);
  ASSERT_OK(apply_bench_file(data + "bench_adam.json", m));
  EXPECT_EQ(m.adam_gparams.source.rfind("bench adam", 0), 0u);
  EXPECT_GT(m.adam_gparams.value, 0.1);
  ASSERT_OK(apply_bench_file(data + "bench_tiers.json", m));  // the training path wins over io
  EXPECT_EQ(m.nvme_read_gbps.source.rfind("bench tiers", 0), 0u);
  EXPECT_NEAR(m.nvme_read_gbps.value, 1.3339, 1e-3);  // "nvme -> pinned (tz)"
  ASSERT_OK(apply_bench_file(data + "bench_io_sweep.json", m));
  EXPECT_EQ(m.nvme_read_gbps.source.rfind("bench tiers", 0), 0u);
  EXPECT_EQ(m.h2d_gbps.source.rfind("default", 0), 0u);  // nothing measured it
}

// bench io's disk rows, each its own figure: --mixed's (the CI box's file) and --pipeline's
// "pipe/spread" row — the engine's placement; "pipe/first" is none of the engine's — (the H100
// box's file, 2026-12-06); read and write stay theirs. Neither has a default: only a measurement.
TEST(PlanBenchFiles, IoMixedAndPipelineRows) {
  struct Case {
    std::string file;
    double mixed, pipeline, read, write;  // GB/s; 0: no such row
  };
  for (const Case& c : {Case{"bench_io_mixed.json", 2.8588, 0.0, 2.5518, 3.6355},
                        Case{"bench_io_pipeline.json", 3.2946, 2.8669, 2.3902, 4.5136}}) {
    SCOPED_TRACE(c.file);
    Machine m = default_machine();
    ASSERT_EQ(m.nvme_mixed_gbps.value + m.nvme_pipeline_gbps.value, 0.0);
    ASSERT_OK(apply_bench_file(source_dir() + "/tests/report/data/" + c.file, m));
    EXPECT_NEAR(m.nvme_mixed_gbps.value, c.mixed, 1e-3);
    EXPECT_EQ(m.nvme_mixed_gbps.source.rfind("bench io --mixed", 0), 0u) << m.nvme_mixed_gbps.source;
    EXPECT_NEAR(m.nvme_pipeline_gbps.value, c.pipeline, 1e-3);
    if (c.pipeline > 0)
      EXPECT_EQ(m.nvme_pipeline_gbps.source.rfind("bench io --pipeline", 0), 0u) << m.nvme_pipeline_gbps.source;
    EXPECT_NEAR(m.nvme_read_gbps.value, c.read, 1e-3);
    EXPECT_NEAR(m.nvme_write_gbps.value, c.write, 1e-3);
  }
}

TEST(PlanBenchFiles, PcieBestPinnedAndDevice) {
  const std::string path = write_temp("pcie.json", R"J({"title": "tierzero bench pcie",
      "params": {"device": "NVIDIA H200 (sm_90)"}, "rows": [
      {"dir": "h2d", "host": "pinned", "chunk": "1.00 MiB", "tierzero_GB/s": 30.0},
      {"dir": "h2d", "host": "pinned", "chunk": "64.00 MiB", "tierzero_GB/s": 52.5},
      {"dir": "d2h", "host": "pinned", "chunk": "64.00 MiB", "tierzero_GB/s": 48.0},
      {"dir": "h2d", "host": "pageable", "chunk": "64.00 MiB", "tierzero_GB/s": 90.0},
      {"dir": "duplex", "host": "pinned", "chunk": "64.00 MiB", "tierzero_GB/s": 97.0}]})J");
  Machine m = default_machine();
  ASSERT_OK(apply_bench_file(path, m));
  EXPECT_DOUBLE_EQ(m.h2d_gbps.value, 52.5);
  EXPECT_DOUBLE_EQ(m.d2h_gbps.value, 48.0);
  EXPECT_EQ(m.gpu_name, "NVIDIA H200 (sm_90)");
  EXPECT_DOUBLE_EQ(*gpu_tflops_for(m.gpu_name), 790.0);
}

TEST(PlanBenchFiles, SkippedPcieChangesNothing) {
  const std::string path = write_temp("pcie_skipped.json", R"({"title": "tierzero bench pcie",
      "params": {"skipped": "no GPU"}, "rows": []})");
  Machine m = default_machine();
  ASSERT_OK(apply_bench_file(path, m));
  EXPECT_EQ(m.h2d_gbps.source, default_machine().h2d_gbps.source);
}

TEST(PlanBenchFiles, ErrorsNameTheFile) {
  Machine m = default_machine();
  EXPECT_ERROR(apply_bench_file("/nonexistent/bench.json", m), ErrorCode::kNotFound, "/nonexistent/bench.json");
  const std::string other = write_temp("other.json", R"({"title": "tierzero bench convert", "rows": []})");
  EXPECT_ERROR(apply_bench_file(other, m), ErrorCode::kInvalidArgument, "bench convert");
  const std::string bad_row =
      write_temp("bad_row.json", R"({"title": "tierzero bench adam", "rows": [{"threads": 2}]})");
  EXPECT_ERROR(apply_bench_file(bad_row, m), ErrorCode::kInvalidArgument, "Gparam/s");
  EXPECT_ERROR(gpu_tflops_for("Voodoo 2"), ErrorCode::kNotFound, "Voodoo 2");
}

}  // namespace
}  // namespace tierzero::engine
