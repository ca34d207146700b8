// `train --tensorboard`'s event files: the CRC against the published CRC-32C check value, and a
// file written by TensorBoardWriter read back by TensorBoard's own EventAccumulator
// (read_tensorboard.py; skipped where the tensorboard package is missing): every tag of every step
// with its value, as float32.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "report/internal/tensorboard_event.h"
#include "report/report.h"
#include "tests/support/python.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::report {
namespace {

TEST(TensorBoardEventTest, Crc32cMatchesTheCheckValue) {
  EXPECT_EQ(internal::crc32c("123456789"), 0xE3069283u);  // RFC 3720 / the CRC catalogue's check value
  EXPECT_EQ(internal::crc32c(""), 0u);
  const uint32_t crc = internal::crc32c("abc");
  EXPECT_EQ(internal::masked_crc32c("abc"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(TensorBoardEventTest, RecordFramesTheDataWithItsLength) {
  const std::string record = internal::tfrecord("event");
  ASSERT_EQ(record.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(record[0], 5);
  EXPECT_EQ(record.substr(12, 5), "event");
}

StepMetrics step_with_everything(int64_t number) {
  StepMetrics s;
  s.step = number;
  s.loss = 4.0 - 0.25 * static_cast<double>(number);
  s.lr = 1e-4 * static_cast<double>(number);
  s.grad_norm = 1.5 / static_cast<double>(number);
  s.tokens_per_s = 12345.5 + static_cast<double>(number);
  s.tflops = 0.75;
  s.step_time_s = 0.2;
  s.gpu_peak_bytes = (int64_t{3} << 30) + number;
  s.gpu_reserved_bytes = int64_t{4} << 30;
  s.pinned_bytes = int64_t{1} << 29;
  s.pageable_bytes = int64_t{7} << 20;
  s.nvme_bytes = int64_t{9} << 30;
  s.h2d_gbps = 21.5;
  s.breakdown = StepBreakdown{0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07 * static_cast<double>(number)};
  return s;
}

TEST(TensorBoardWriterTest, TensorBoardReadsBackEveryTagAndValue) {
  test_support::ScratchDir scratch("tensorboard_test");
  const std::string dir = scratch.path() + "/tb/run";  // created by open, parents too
  std::vector<StepMetrics> steps = {step_with_everything(1), step_with_everything(2), step_with_everything(3)};
  steps[1].loss = NAN;  // a skipped fp16 step: no loss point
  steps[2].breakdown.reset();
  {
    Result<TensorBoardWriter> writer = TensorBoardWriter::open(dir);
    ASSERT_OK(writer);
    for (const StepMetrics& s : steps) ASSERT_OK(writer->write_step(s));
    EXPECT_NE(writer->path().find("/events.out.tfevents."), std::string::npos);
  }
  const test_support::PythonRun run =
      test_support::run_python(TIERZERO_READ_TENSORBOARD, {dir}, scratch.path() + "/read.log");
  if (run.exit_code == test_support::kPythonSkip) GTEST_SKIP() << run.output;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json read = nlohmann::json::parse(run.output.substr(run.output.find('{')));

  std::map<std::string, std::vector<std::pair<int64_t, float>>> expected;
  for (const StepMetrics& s : steps) {
    for (const auto& [tag, value] : tensorboard_scalars(s)) expected[tag].emplace_back(s.step, static_cast<float>(value));
  }
  ASSERT_EQ(expected.size(), 19u);  // 6 train, 5 memory, the 1 measured bandwidth, 7 time
  ASSERT_EQ(read.size(), expected.size()) << read.dump();
  for (const auto& [tag, points] : expected) {
    ASSERT_TRUE(read.contains(tag)) << tag;
    ASSERT_EQ(read[tag].size(), points.size()) << tag;
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(read[tag][i][0].get<int64_t>(), points[i].first) << tag;
      EXPECT_EQ(read[tag][i][1].get<float>(), points[i].second) << tag << " step " << points[i].first;
    }
  }
  EXPECT_EQ(read["train/loss"].size(), 2u);      // the NaN left out
  EXPECT_EQ(read["time/gpu_idle_s"].size(), 2u);  // step 3 had no breakdown
  EXPECT_FLOAT_EQ(read["memory/nvme_GiB"][0][1].get<float>(), 9.0f);
}

TEST(TensorBoardWriterTest, EvaluationsAndEpochsAreScalarsAtTheirSteps) {
  test_support::ScratchDir scratch("tensorboard_test_eval");
  const std::string dir = scratch.path() + "/tb";
  StepMetrics step = step_with_everything(4);
  step.epoch = 1.25;
  const EvalMetrics eval{.step = 4, .loss = 2.5, .perplexity = 12.18, .tokens = 64, .samples = 2};
  {
    Result<TensorBoardWriter> writer = TensorBoardWriter::open(dir);
    ASSERT_OK(writer);
    ASSERT_OK(writer->write_step(step));
    ASSERT_OK(writer->write_eval(eval));
  }
  const test_support::PythonRun run =
      test_support::run_python(TIERZERO_READ_TENSORBOARD, {dir}, scratch.path() + "/read.log");
  if (run.exit_code == test_support::kPythonSkip) GTEST_SKIP() << run.output;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json read = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  for (const auto& [tag, value] : {std::pair<const char*, float>{"train/epoch", 1.25f}, {"eval/loss", 2.5f},
                                   {"eval/perplexity", 12.18f}}) {
    ASSERT_TRUE(read.contains(tag)) << tag << " in " << read.dump();
    ASSERT_EQ(read[tag].size(), 1u) << tag;
    EXPECT_EQ(read[tag][0][0].get<int64_t>(), 4) << tag;
    EXPECT_EQ(read[tag][0][1].get<float>(), value) << tag;
  }
}

TEST(TensorBoardWriterTest, AnUncreatableDirectoryIsRefusedNamingIt) {
  test_support::ScratchDir scratch("tensorboard_test_bad");
  const std::string file = scratch.path() + "/file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  const Result<TensorBoardWriter> writer = TensorBoardWriter::open(file + "/tb");
  EXPECT_ERROR(writer, ErrorCode::kIo, file + "/tb");
  EXPECT_ERROR(writer, ErrorCode::kIo, "choose a writable --tensorboard directory");
}

}  // namespace
}  // namespace tierzero::report
