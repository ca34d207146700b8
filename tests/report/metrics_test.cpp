// The metrics JSONL file: what MetricsWriter writes, read_metrics_file reads back; bad lines are
// refused with the file and line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "report/report.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::report {
namespace {

class MetricsFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  std::string write_text(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  static RunInfo run_info() {
    RunInfo r;
    r.model = "builtin";
    r.config = "configs/zero2.json";
    r.data = "tiny.tokens";
    r.world_size = 2;
    r.dtype = "bf16";
    r.stage = 2;
    r.offload = "optimizer cpu";
    r.parameters = 1234567;
    r.tokens_per_step = 4096;
    return r;
  }

  static StepMetrics step(int64_t n) {
    StepMetrics s;
    s.step = n;
    s.loss = 10.0 / static_cast<double>(n);
    s.lr = 1e-4 * static_cast<double>(n);
    s.grad_norm = 0.5;
    s.tokens_per_s = 1000.5;
    s.tflops = 0.125;
    s.step_time_s = 4.0;
    s.gpu_peak_bytes = int64_t{3} << 30;
    s.gpu_reserved_bytes = int64_t{4} << 30;
    s.pinned_bytes = 123456789;
    s.pageable_bytes = 0;
    s.nvme_bytes = int64_t{1} << 40;
    return s;
  }

  test_support::ScratchDir dir_{"tierzero-metrics-test"};
};

const std::string kRunLine = R"json({"type":"run","format":1,"model":"m"})json";
const std::string kStepLine =
    R"json({"type":"step","step":1,"loss":2.5,"lr":0.001,"grad_norm":1,"tokens_per_s":10,"tflops":0.1,"step_time_s":1,)json"
    R"json("gpu_peak_bytes":1,"gpu_reserved_bytes":2,"pinned_bytes":3,"pageable_bytes":4,"nvme_bytes":5})json";

TEST_F(MetricsFileTest, WhatIsWrittenReadsBack) {
  StepMetrics with_extras = step(2);
  with_extras.breakdown = StepBreakdown{0.5, 1.0, 0.25, 2.0, 0.125, 0.0625, 0.03125};
  with_extras.h2d_gbps = 40.5;
  with_extras.nvme_write_gbps = 2.25;
  with_extras.nvme_read_bytes = int64_t{30} << 30;
  with_extras.nvme_written_bytes = 12345;
  with_extras.nvme_wait_s = 1.75;
  with_extras.gpu_optimizer_elements = int64_t{3} << 32;
  with_extras.gpu_optimizer_s = 0.625;
  with_extras.gpu_optimizer_wait_s = 0.125;
  StepMetrics skipped = step(3);
  skipped.loss = NAN;
  skipped.grad_norm = INFINITY;
  {
    MetricsWriter writer = value_or_throw(MetricsWriter::open(path("run.jsonl"), run_info()));
    ASSERT_OK(writer.write_step(step(1)));
    ASSERT_OK(writer.write_step(with_extras));
    ASSERT_OK(writer.write_step(skipped));
    ASSERT_OK(writer.close());
  }
  const RunMetrics read = value_or_throw(read_metrics_file(path("run.jsonl")));
  EXPECT_EQ(read.run.name, "run");  // from the file name
  EXPECT_EQ(read.run.model, "builtin");
  EXPECT_EQ(read.run.config, "configs/zero2.json");
  EXPECT_EQ(read.run.world_size, 2);
  EXPECT_EQ(read.run.stage, 2);
  EXPECT_EQ(read.run.offload, "optimizer cpu");
  EXPECT_EQ(read.run.parameters, 1234567);
  EXPECT_EQ(read.run.tokens_per_step, 4096);
  ASSERT_EQ(read.steps.size(), 3u);
  EXPECT_EQ(read.steps[0].step, 1);
  EXPECT_DOUBLE_EQ(read.steps[0].loss, 10.0);
  EXPECT_DOUBLE_EQ(read.steps[0].lr, 1e-4);
  EXPECT_EQ(read.steps[0].nvme_bytes, int64_t{1} << 40);
  EXPECT_EQ(read.steps[0].pinned_bytes, 123456789);
  EXPECT_FALSE(read.steps[0].breakdown.has_value());
  EXPECT_FALSE(read.steps[0].h2d_gbps.has_value());
  ASSERT_TRUE(read.steps[1].breakdown.has_value());
  EXPECT_DOUBLE_EQ(read.steps[1].breakdown->cpu_optimizer_s, 2.0);
  EXPECT_DOUBLE_EQ(read.steps[1].breakdown->gpu_idle_s, 0.03125);
  EXPECT_DOUBLE_EQ(*read.steps[1].h2d_gbps, 40.5);
  EXPECT_DOUBLE_EQ(*read.steps[1].nvme_write_gbps, 2.25);
  EXPECT_FALSE(read.steps[1].d2h_gbps.has_value());
  EXPECT_EQ(*read.steps[1].nvme_read_bytes, int64_t{30} << 30);
  EXPECT_EQ(*read.steps[1].nvme_written_bytes, 12345);
  EXPECT_DOUBLE_EQ(*read.steps[1].nvme_wait_s, 1.75);
  EXPECT_FALSE(read.steps[0].nvme_read_bytes.has_value()) << "absent: a run without state on NVMe";
  EXPECT_FALSE(read.steps[0].nvme_wait_s.has_value());
  EXPECT_EQ(*read.steps[1].gpu_optimizer_elements, int64_t{3} << 32);
  EXPECT_DOUBLE_EQ(*read.steps[1].gpu_optimizer_s, 0.625);
  EXPECT_DOUBLE_EQ(*read.steps[1].gpu_optimizer_wait_s, 0.125);
  EXPECT_FALSE(read.steps[0].gpu_optimizer_elements.has_value()) << "absent: no GPU share";
  EXPECT_FALSE(read.steps[0].gpu_optimizer_s.has_value());
  EXPECT_FALSE(read.steps[0].gpu_optimizer_wait_s.has_value());
  EXPECT_TRUE(std::isnan(read.steps[2].loss));
  EXPECT_TRUE(std::isnan(read.steps[2].grad_norm));  // not finite: written as null
}

TEST_F(MetricsFileTest, EvalLinesAndEpochsReadBackBesideTheSteps) {
  StepMetrics first = step(1), second = step(2);
  first.epoch = 0.5;
  second.epoch = 1.0;
  EvalMetrics eval{.step = 2, .loss = 2.25, .perplexity = std::exp(2.25), .tokens = 640, .samples = 20,
                   .epoch = 1.0, .eval_time_s = 0.5};
  {
    MetricsWriter writer = value_or_throw(MetricsWriter::open(path("eval.jsonl"), run_info()));
    ASSERT_OK(writer.write_step(first));
    ASSERT_OK(writer.write_step(second));
    ASSERT_OK(writer.write_eval(eval));
    ASSERT_OK(writer.close());
  }
  std::ifstream in(path("eval.jsonl"));
  std::string line;
  for (int i = 0; i < 4; ++i) std::getline(in, line);
  EXPECT_NE(line.find(R"("type":"eval")"), std::string::npos) << line;
  const RunMetrics read = value_or_throw(read_metrics_file(path("eval.jsonl")));
  ASSERT_EQ(read.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(*read.steps[0].epoch, 0.5);
  ASSERT_EQ(read.evals.size(), 1u);
  EXPECT_EQ(read.evals[0].step, 2);
  EXPECT_DOUBLE_EQ(read.evals[0].loss, 2.25);
  EXPECT_DOUBLE_EQ(read.evals[0].perplexity, std::exp(2.25));
  EXPECT_EQ(read.evals[0].tokens, 640);
  EXPECT_EQ(read.evals[0].samples, 20);
  EXPECT_DOUBLE_EQ(*read.evals[0].epoch, 1.0);
  EXPECT_FALSE(value_or_throw(read_metrics_file(write_text("old.jsonl", kRunLine + "\n" + kStepLine + "\n")))
                   .steps[0]
                   .epoch.has_value())
      << "a file without epochs still reads";
  const std::string eval_line = R"json({"type":"eval","step":1,"loss":2,"perplexity":7.39,"tokens":10,"samples":1})json";
  EXPECT_ERROR(read_metrics_file(write_text("back.jsonl", kRunLine + "\n" + kStepLine + "\n" +
                                                            R"json({"type":"eval","step":3,"loss":2,"perplexity":7.39,"tokens":10,"samples":1})json" +
                                                            "\n" + eval_line + "\n")),
               ErrorCode::kCorrupt, "back.jsonl:4: the evaluation after step 1 follows one after step 3");
  std::string no_tokens = eval_line;
  no_tokens.replace(no_tokens.find(R"("tokens":10,)"), 12, "");
  EXPECT_ERROR(read_metrics_file(write_text("bad.jsonl", kRunLine + "\n" + no_tokens + "\n")), ErrorCode::kCorrupt,
               "bad.jsonl:2: field 'tokens' is missing");
}

TEST_F(MetricsFileTest, EveryLineIsOneJsonObjectFlushedAsWritten) {
  MetricsWriter writer = value_or_throw(MetricsWriter::open(path("live.jsonl"), run_info()));
  ASSERT_OK(writer.write_step(step(1)));
  // Not closed yet: a reader (or a crash) sees the line already.
  std::ifstream in(path("live.jsonl"));
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(first.rfind("{\"", 0), 0u);
  EXPECT_NE(first.find("\"type\":\"run\""), std::string::npos);
  EXPECT_NE(second.find("\"type\":\"step\""), std::string::npos);
  EXPECT_EQ(value_or_throw(read_metrics_file(path("live.jsonl"))).steps.size(), 1u);
}

TEST_F(MetricsFileTest, GivenNameIsKeptAndUnknownFieldsAreIgnored) {
  const std::string file =
      write_text("x.jsonl", R"json({"type":"run","format":1,"name":"baseline","future_field":[1,2]})json"
                            "\n" +
                                kStepLine.substr(0, kStepLine.size() - 1) + R"json(,"new_metric":7})json" + "\n");
  const RunMetrics read = value_or_throw(read_metrics_file(file));
  EXPECT_EQ(read.run.name, "baseline");
  EXPECT_EQ(read.steps.size(), 1u);
}

TEST_F(MetricsFileTest, MalformedLineNamesFileAndLine) {
  const std::string file = write_text("bad.jsonl", kRunLine + "\n" + kStepLine + "\n{\"type\":\"step\",\"step\":\n");
  EXPECT_ERROR(read_metrics_file(file), ErrorCode::kCorrupt, file + ":3: not a JSON object");
  EXPECT_ERROR(read_metrics_file(file), ErrorCode::kCorrupt, "partial last line");
}

TEST_F(MetricsFileTest, SaveLinesReadBackAndMustGoForward) {
  const SaveMetrics periodic{.step = 2,
                             .bytes = 123456789,
                             .durable_s = 1.5,
                             .background = true,
                             .committed_after_step = 3,
                             .write_s = 1.25,
                             .held_s = 0.125};
  SaveMetrics last;
  last.step = 4;
  last.bytes = 987654321;
  last.durable_s = 2.5;
  last.committed_after_step = 4;
  {
    MetricsWriter writer = value_or_throw(MetricsWriter::open(path("save.jsonl"), run_info()));
    for (int64_t s = 1; s <= 4; ++s) {
      ASSERT_OK(writer.write_step(step(s)));
      if (s == 3) {
        ASSERT_OK(writer.write_save(periodic));  // committed after the step it ran beside
      }
    }
    ASSERT_OK(writer.write_save(last));
    ASSERT_OK(writer.close());
  }
  const RunMetrics read = value_or_throw(read_metrics_file(path("save.jsonl")));
  EXPECT_EQ(read.steps.size(), 4u);
  ASSERT_EQ(read.saves.size(), 2u);
  EXPECT_EQ(read.saves[0].step, 2);
  EXPECT_EQ(read.saves[0].bytes, 123456789);
  EXPECT_DOUBLE_EQ(read.saves[0].durable_s, 1.5);
  EXPECT_TRUE(read.saves[0].background);
  EXPECT_DOUBLE_EQ(*read.saves[0].write_s, 1.25);
  EXPECT_DOUBLE_EQ(*read.saves[0].held_s, 0.125);
  EXPECT_EQ(read.saves[0].committed_after_step, 3);
  EXPECT_EQ(read.saves[1].committed_after_step, 4);
  EXPECT_EQ(read.saves[1].bytes, 987654321);
  EXPECT_FALSE(read.saves[1].background);
  EXPECT_FALSE(read.saves[1].write_s.has_value()) << "a synchronous save has no separate write time";

  const std::string save4 = R"json({"type":"save","step":4,"bytes":10,"durable_s":1,"background":false})json";
  const std::string save2 = R"json({"type":"save","step":2,"bytes":10,"durable_s":1,"background":true})json";
  const RunMetrics older = value_or_throw(read_metrics_file(write_text("older.jsonl", kRunLine + "\n" + save4 + "\n")));
  ASSERT_EQ(older.saves.size(), 1u);
  EXPECT_EQ(older.saves[0].committed_after_step, 0) << "a file from before the field reads as 0";
  EXPECT_ERROR(read_metrics_file(write_text("back.jsonl", kRunLine + "\n" + save4 + "\n" + save2 + "\n")),
               ErrorCode::kCorrupt, "back.jsonl:3: the save of step 2 follows the save of step 4");
  std::string no_bytes = save4;
  no_bytes.replace(no_bytes.find(R"("bytes":10,)"), 11, "");
  EXPECT_ERROR(read_metrics_file(write_text("nobytes.jsonl", kRunLine + "\n" + no_bytes + "\n")),
               ErrorCode::kCorrupt, "nobytes.jsonl:2: field 'bytes' is missing");
  std::string text_flag = save4;
  text_flag.replace(text_flag.find("false"), 5, "\"no\"");
  EXPECT_ERROR(read_metrics_file(write_text("flag.jsonl", kRunLine + "\n" + text_flag + "\n")),
               ErrorCode::kCorrupt, "flag.jsonl:2: field 'background' is string; expected true or false");
  std::string text_step = save4;
  text_step.insert(text_step.size() - 1, R"json(,"committed_after_step":"5")json");
  EXPECT_ERROR(read_metrics_file(write_text("commit.jsonl", kRunLine + "\n" + text_step + "\n")), ErrorCode::kCorrupt,
               "commit.jsonl:2: field 'committed_after_step'");
}

TEST_F(MetricsFileTest, MissingAndMistypedFieldsAreNamed) {
  std::string no_loss = kStepLine;
  no_loss.replace(no_loss.find("\"loss\":2.5,"), 11, "");
  std::string text_loss = kStepLine;
  text_loss.replace(text_loss.find("2.5"), 3, "\"low\"");
  std::string bad_breakdown = kStepLine.substr(0, kStepLine.size() - 1) + R"json(,"breakdown":{"forward_s":1}})json";
  EXPECT_ERROR(read_metrics_file(write_text("a.jsonl", kRunLine + "\n" + no_loss + "\n")), ErrorCode::kCorrupt,
               "a.jsonl:2: field 'loss' is missing");
  EXPECT_ERROR(read_metrics_file(write_text("b.jsonl", kRunLine + "\n\n" + text_loss + "\n")), ErrorCode::kCorrupt,
               "b.jsonl:3: field 'loss' is string; expected a number or null");
  EXPECT_ERROR(read_metrics_file(write_text("c.jsonl", kRunLine + "\n" + bad_breakdown + "\n")), ErrorCode::kCorrupt,
               "c.jsonl:2: in 'breakdown': field 'backward_s' is missing");
}

TEST_F(MetricsFileTest, RunLineFirstAndFormatKnown) {
  EXPECT_ERROR(read_metrics_file(write_text("a.jsonl", kStepLine + "\n")), ErrorCode::kCorrupt,
               "a.jsonl:1: the first line must be the run line");
  EXPECT_ERROR(read_metrics_file(write_text("b.jsonl", R"json({"type":"run","format":9})json"
                                                       "\n")),
               ErrorCode::kUnsupported, "b.jsonl:1: metrics format 9 is newer");
  EXPECT_ERROR(read_metrics_file(write_text("c.jsonl", "")), ErrorCode::kCorrupt, "c.jsonl: empty");
  EXPECT_ERROR(read_metrics_file(write_text("d.jsonl", kRunLine + "\n" + kRunLine + "\n")), ErrorCode::kCorrupt,
               "d.jsonl:2: 'type' is \"run\"; every line after the run line is a \"step\", \"eval\" or \"save\" line");
}

TEST_F(MetricsFileTest, StepsMustIncrease) {
  EXPECT_ERROR(read_metrics_file(write_text("twice.jsonl", kRunLine + "\n" + kStepLine + "\n" + kStepLine + "\n")),
               ErrorCode::kCorrupt, "twice.jsonl:3: step 1 follows step 1");
}

TEST_F(MetricsFileTest, MissingFileAndUnwritablePath) {
  EXPECT_ERROR(read_metrics_file(path("none.jsonl")), ErrorCode::kNotFound, path("none.jsonl"));
  EXPECT_ERROR(MetricsWriter::open(path("no/such/dir/m.jsonl"), run_info()), ErrorCode::kNotFound,
               "no/such/dir/m.jsonl");
}

TEST_F(MetricsFileTest, WritingAfterCloseFails) {
  MetricsWriter writer = value_or_throw(MetricsWriter::open(path("closed.jsonl"), run_info()));
  ASSERT_OK(writer.close());
  EXPECT_ERROR(writer.write_step(step(1)), ErrorCode::kIo, "closed.jsonl is closed; cannot write step 1");
}

}  // namespace
}  // namespace tierzero::report
