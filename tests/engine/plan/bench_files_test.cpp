// Machine figures from tierzero bench JSON files: the fixtures bench io/adam/tiers wrote on the CI
// box (tests/report/data), and a bench pcie file in its format.
#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_EQ(m.adam_gbps.source.rfind("bench adam", 0), 0u);
  EXPECT_GT(m.adam_gbps.value, 1.0);  // GB/s, not the rows' Gparam/s
  ASSERT_OK(apply_bench_file(data + "bench_tiers.json", m));  // the training path wins over io
  EXPECT_EQ(m.nvme_read_gbps.source.rfind("bench tiers", 0), 0u);
  EXPECT_NEAR(m.nvme_read_gbps.value, 1.3339, 1e-3);  // "nvme -> pinned (tz)"
  ASSERT_OK(apply_bench_file(data + "bench_io_sweep.json", m));
  EXPECT_EQ(m.nvme_read_gbps.source.rfind("bench tiers", 0), 0u);
  EXPECT_EQ(m.h2d_gbps.source.rfind("default", 0), 0u);  // nothing measured it
}

// bench io's read and write rows are the disk's figures; its --mixed row (the CI box's file) and
// --pipeline's pipe/ rows (the H100 box's file, 2026-12-06) are not rates the planner prices.
TEST(PlanBenchFiles, IoReadAndWriteRowsBesideMixedAndPipelineRows) {
  struct Case {
    std::string file;
    double read, write;  // GB/s of the file's read and write rows
  };
  for (const Case& c : {Case{"bench_io_mixed.json", 2.5518, 3.6355}, Case{"bench_io_pipeline.json", 2.3902, 4.5136}}) {
    SCOPED_TRACE(c.file);
    Machine m = default_machine();
    ASSERT_OK(apply_bench_file(source_dir() + "/tests/report/data/" + c.file, m));
    EXPECT_NEAR(m.nvme_read_gbps.value, c.read, 1e-3);
    EXPECT_NEAR(m.nvme_write_gbps.value, c.write, 1e-3);
    EXPECT_EQ(m.nvme_write_gbps.source, "bench io " + source_dir() + "/tests/report/data/" + c.file);
  }
}

// The optimizer's records on NVMe (1.35B, fp32 state of 12 B a parameter, sub-groups of 1e8, four
// buffers keeping four of them): a step reads and writes 12 B x (n - 4e8), at the read row's 2 GB/s
// and the write row's 4 GB/s one after the other, however fast the mixed row (10 GB/s) or however
// slow the pipeline's rows (1 and 0.5 GB/s) ran.
TEST(PlanBenchFiles, NvmeStepIsTheReadsAtTheReadRowPlusTheWritesAtTheWriteRow) {
  const std::string path = write_temp("io_rows.json", R"J({"title": "tierzero bench io", "rows": [
      {"op": "write", "GB/s": 4.0}, {"op": "read", "GB/s": 2.0}, {"op": "mixed", "GB/s": 10.0},
      {"op": "pipe/first", "GB/s": 0.5}, {"op": "pipe/spread", "GB/s": 1.0}]})J");
  Machine m = testing::round_machine();
  m.nvme_read_gbps = {};
  m.nvme_write_gbps = {};
  ASSERT_OK(apply_bench_file(path, m));
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
      "sub_group_size": 1e8, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp", "buffer_count": 4}}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, m);
  ASSERT_OK(p);
  const double moved = 12.0 * (static_cast<double>(testing::kLlama135bParams) - 4e8);
  const auto nvme =
      std::find_if(p->time_terms.begin(), p->time_terms.end(), [](const TimeTerm& t) { return t.what == "nvme"; });
  ASSERT_NE(nvme, p->time_terms.end());
  EXPECT_DOUBLE_EQ(nvme->seconds, moved / 2e9 + moved / 4e9);
  EXPECT_NE(nvme->detail.find("/ 2.00 GB/s + write"), std::string::npos) << nvme->detail;
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
  EXPECT_ERROR(apply_bench_file(bad_row, m), ErrorCode::kInvalidArgument, "GB/s");
  EXPECT_ERROR(gpu_tflops_for("Voodoo 2"), ErrorCode::kNotFound, "Voodoo 2");
}

}  // namespace
}  // namespace tierzero::engine
