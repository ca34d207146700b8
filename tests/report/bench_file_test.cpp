// Bench JSON files: the three kinds read, anything else refused with the file and the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "report/report.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::report {
namespace {

class BenchFileTest : public ::testing::Test {
 protected:
  std::string write_text(const std::string& name, const std::string& text) const {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }

  test_support::ScratchDir dir_{"tierzero-bench-file-test"};
};

TEST_F(BenchFileTest, ReadsEachKind) {
  const BenchFile io = value_or_throw(read_bench_file(write_text("io.json", R"json({"title":"tierzero bench io",
    "cpu":"Test CPU x 2","params":{"size":"16 MiB"},"rows":[
    {"op":"write","backend":"io_uring","block":"256K","depth":8,"threads":1,"GB/s":1.5},
    {"op":"read","backend":"libaio/ss","block":"4096","depth":1,"threads":2,"GB/s":null,"fio_GB/s":2.0}]})json")));
  EXPECT_EQ(io.kind, BenchKind::kIo);
  EXPECT_EQ(io.cpu, "Test CPU x 2");
  ASSERT_EQ(io.io.size(), 2u);
  EXPECT_EQ(io.io[0].block_bytes, 256u << 10);
  EXPECT_EQ(io.io[1].block_bytes, 4096u);
  EXPECT_TRUE(std::isnan(io.io[1].gbps));
  EXPECT_EQ(io.io[1].fio_gbps, 2.0);
  EXPECT_FALSE(io.io[0].fio_gbps.has_value());
  ASSERT_EQ(io.params.size(), 1u);
  EXPECT_EQ(io.params[0].second, "16 MiB");

  const BenchFile adam = value_or_throw(read_bench_file(write_text("adam.json", R"json({"title":"tierzero bench adam",
    "rows":[{"threads":2,"Gparam/s":0.5,"GB/s":8.0,"torch_Gp/s":null,"copy_GB/s":10.0}]})json")));
  ASSERT_EQ(adam.adam.size(), 1u);
  EXPECT_FALSE(adam.adam[0].torch_gparams.has_value());
  EXPECT_EQ(adam.adam[0].copy_gbps, 10.0);

  const BenchFile tiers =
      value_or_throw(read_bench_file(write_text("tiers.json", R"json({"title":"tierzero bench tiers",
    "rows":[{"what":"nvme read (raw)","GB/s":2.0,"peer_GB/s":2.0}]})json")));
  ASSERT_EQ(tiers.tiers.size(), 1u);
  EXPECT_EQ(tiers.tiers[0].what, "nvme read (raw)");
}

TEST_F(BenchFileTest, UnknownKindIsRefusedByName) {
  const std::string path = write_text("pcie.json", R"json({"title":"tierzero bench pcie","rows":[]})json");
  EXPECT_ERROR(read_bench_file(path), ErrorCode::kUnsupported,
               path + ": a bench JSON of an unknown kind, \"tierzero bench pcie\"");
  EXPECT_ERROR(read_bench_file(write_text("x.json", R"json({"rows":[]})json")), ErrorCode::kCorrupt, "no \"title\"");
}

TEST_F(BenchFileTest, NotJsonNamesLineAndColumn) {
  const std::string path = write_text("broken.json", "{\n  \"title\": \"tierzero bench io\",\n  \"rows\": [,]\n}\n");
  EXPECT_ERROR(read_bench_file(path), ErrorCode::kCorrupt, path + ": not JSON at line 3, column");
}

TEST_F(BenchFileTest, BadRowsAreNamedWithTheirIndex) {
  EXPECT_ERROR(read_bench_file(write_text("a.json", R"json({"title":"tierzero bench tiers","rows":[
    {"what":"x","GB/s":1,"peer_GB/s":1},{"what":"y","peer_GB/s":1}]})json")),
               ErrorCode::kCorrupt, "a.json (tierzero bench tiers): rows[1]: column 'GB/s' is missing");
  EXPECT_ERROR(read_bench_file(write_text("b.json", R"json({"title":"tierzero bench adam","rows":[
    {"threads":"four","Gparam/s":1,"GB/s":1}]})json")),
               ErrorCode::kCorrupt, "rows[0]: column 'threads' is string; expected an integer");
  EXPECT_ERROR(read_bench_file(write_text("c.json", R"json({"title":"tierzero bench io","rows":[
    {"op":"read","backend":"sync","block":"1Q","depth":1,"threads":1,"GB/s":1}]})json")),
               ErrorCode::kCorrupt, "rows[0]: block '1Q' is not a size");
  EXPECT_ERROR(read_bench_file(write_text("d.json", R"json({"title":"tierzero bench io"})json")), ErrorCode::kCorrupt,
               "no \"rows\" array");
}

TEST_F(BenchFileTest, MissingFile) {
  EXPECT_ERROR(read_bench_file(dir_.file("none.json")), ErrorCode::kNotFound, dir_.file("none.json"));
}

}  // namespace
}  // namespace tierzero::report
