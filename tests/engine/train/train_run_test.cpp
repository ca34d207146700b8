// train() end to end on the CPU (one process, the built-in tiny Llama): the printed figures, the
// refusals (token ids outside the vocabulary too), --resume, --save / --export and checkpoint
// compression.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/data/token_data.h"
#include "engine/model/functional_model.h"
#include "report/report.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

const std::regex kStepLine(
    R"(^step +(\d+)/(\d+)  loss ([\d.]+)  lr ([\d.e+-]+)  grad-norm ([\d.]+) +(\d+) tok/s  ([\d.]+) TFLOPS  )"
    R"(gpu-peak (-|[\d.]+ \w+)  gpu-reserved (-|[\d.]+ \w+)  pinned ([\d.]+ \w+)  pageable ([\d.]+ \w+)  )"
    R"(nvme ([\d.]+ \w+)  ([\d.]+)s  epoch ([\d.]+)(  \[time forward [\d.]+s backward [\d.]+s grad-d2h [\d.]+s cpu-optimizer [\d.]+s )"
    R"(param-h2d [\d.]+s comm [\d.]+s gpu-idle [\d.]+s\])?(  \[nvme-io read [\d.]+ \w+ written [\d.]+ \w+\])?$)");

std::vector<std::smatch> step_lines(const std::vector<std::string>& lines) {
  std::vector<std::smatch> matches;
  for (const std::string& line : lines) {
    std::smatch m;
    if (line.rfind("step ", 0) == 0) {
      EXPECT_TRUE(std::regex_match(line, m, kStepLine)) << "unparsed step line: " << line;
      matches.push_back(m);
    }
  }
  return matches;
}

TEST(Train, StepLinesCarryTheFiguresEveryStepsPerPrint) {
  ScratchDir dir;
  TrainRun run = run_train(
      train_args(write_config(dir, small_config({{"steps_per_print", 2}, {"wall_clock_breakdown", true}})), 5));
  ASSERT_OK(run.summary);
  std::vector<std::smatch> lines = step_lines(run.lines);
  ASSERT_EQ(lines.size(), 4u) << "steps 1 (first), 2, 4 (every 2nd) and 5 (last)";
  const int expected_steps[] = {1, 2, 4, 5};
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::smatch& m = lines[i];
    EXPECT_EQ(std::stoi(m[1]), expected_steps[i]);
    EXPECT_EQ(std::stoi(m[2]), 5);
    EXPECT_GT(std::stod(m[3]), 0.0);
    EXPECT_GT(std::stod(m[6]), 0.0) << "tok/s";
    if (at::hasCUDA()) {  // the trainer picks the GPU where there is one
      EXPECT_NE(m[8], "-") << "GPU peak";
      EXPECT_NE(m[9], "-") << "GPU reserved peak";
    } else {
      EXPECT_EQ(m[8], "-") << "no GPU: no GPU peak";
      EXPECT_EQ(m[9], "-");
      EXPECT_EQ(m[10], "0 B") << "nothing pinned without a GPU";
    }
    EXPECT_NE(m[11], "0 B") << "pageable: the resident set";
    EXPECT_EQ(m[12], "0 B") << "no NVMe tier";
    EXPECT_LT(std::stod(m[14]), 0.1) << "epoch: 5 steps of the corpus's 323 micro-batches";
    EXPECT_TRUE(m[15].matched) << "wall_clock_breakdown: the time breakdown";
  }
  EXPECT_EQ(run.summary->losses.size(), 5u);
  if (at::hasCUDA()) {
    EXPECT_GT(run.summary->gpu_peak_bytes, 0);
  } else {
    EXPECT_EQ(run.summary->gpu_peak_bytes, -1);
  }
  EXPECT_GT(run.summary->pageable_bytes, 0);
  const std::string& done = run.lines.back();
  EXPECT_EQ(done.rfind("done: 5 steps (0 skipped)", 0), 0u) << done;
  if (!at::hasCUDA()) {
    EXPECT_NE(done.find("| peak gpu - (reserved -) | pinned 0 B | pageable "), std::string::npos) << done;
  }
  EXPECT_NE(done.find("| nvme 0 B"), std::string::npos) << done;
}

TEST(Train, RefusesWhatItCannotHonourNamingTheKey) {
  ScratchDir dir;
  struct Case {
    nlohmann::json overrides;
    ErrorCode code;
    const char* says;
  } cases[] = {
      {{{"zero_optimization", {{"stage", 5}}}}, ErrorCode::kInvalidArgument, "zero_optimization.stage"},
      {{{"zero_optimization", {{"stage", 3}, {"offload_param", {{"device", "nvme"}, {"nvme_path", "/tmp"}}}}}},
       ErrorCode::kUnsupported,
       "zero_optimization.offload_param.device"},
      {{{"tierzero", {{"checkpoint", {{"save_every", 2}}}}}}, ErrorCode::kInvalidArgument, "--save"},
      {{{"tierzero", {{"data", {{"path", nullptr}}}}}}, ErrorCode::kInvalidArgument, "tierzero.data.path"},
  };
  for (Case& c : cases) {
    TrainRun run = run_train(train_args(write_config(dir, small_config(c.overrides)), 1));
    EXPECT_ERROR(run.summary, c.code, c.says);
  }
}

// Token ids beyond the model's vocabulary (data tokenized for another model) are refused before a
// step, naming the file, the sample and the id, not left to index past the embedding.
TEST(Train, TokenIdsOutsideTheVocabularyAreNamed) {
  ScratchDir dir;
  std::vector<uint32_t> tokens(4096, 5);
  tokens[1000] = 1'000'000;
  const std::string data = dir / "foreign.tok";
  ASSERT_OK(write_token_file(data, tokens, TokenDtype::kUint32));
  TrainArgs args = train_args(write_config(dir, small_config()), 200);
  args.data_path = data;
  TrainRun run = run_train(args);
  EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument, data + ": sample ");
  EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument, "token id 1000000, outside the model's vocabulary");
  EXPECT_ERROR(run.summary, ErrorCode::kInvalidArgument, "tierzero data prepare");
}

TEST(Train, IneffectiveKeysAreWarnedByName) {
  ScratchDir dir;
  TrainRun run = run_train(
      train_args(write_config(dir, small_config({{"zero_optimization", {{"contiguous_gradients", false}}}})), 1));
  ASSERT_OK(run.summary);
  ASSERT_FALSE(run.lines.empty());
  EXPECT_EQ(run.lines[0].rfind("warning: zero_optimization.contiguous_gradients=false has no effect", 0), 0u)
      << run.lines[0];
}

TEST(Train, ResumeContinuesBitForBit) {
  ScratchDir dir;
  const std::string config = write_config(dir, small_config({{"zero_optimization", {{"stage", 1}}}}));
  TrainRun whole = run_train(train_args(config, 4));
  ASSERT_OK(whole.summary);
  TrainArgs first_args = train_args(config, 2);
  first_args.save_dir = dir / "ckpt";
  TrainRun first = run_train(first_args);
  ASSERT_OK(first.summary);
  TrainArgs rest_args = train_args(config, 4);
  rest_args.resume_dir = dir / "ckpt";
  TrainRun rest = run_train(rest_args);
  ASSERT_OK(rest.summary);
  ASSERT_EQ(rest.summary->losses.size(), 2u);
  EXPECT_EQ(first.summary->losses[0], whole.summary->losses[0]);
  EXPECT_EQ(first.summary->losses[1], whole.summary->losses[1]);
  EXPECT_EQ(rest.summary->losses[0], whole.summary->losses[2]) << "bit for bit";
  EXPECT_EQ(rest.summary->losses[1], whole.summary->losses[3]) << "bit for bit";
}

// --full-determinism: LibTorch's deterministic algorithms enforced for the run (an op without one
// would fail it), the header says so, and two runs give the same losses bit for bit — on the GPU where
// there is one (the attention backward is where runs differ without it), on the CPU equal to a run
// without the flag too.
TEST(Train, FullDeterminismGivesTheSameBitsTwice) {
  ScratchDir dir;
  const std::string config = write_config(dir, small_config({{"zero_optimization", {{"stage", 3}}}}));
  TrainArgs args = train_args(config, 3);
  args.full_determinism = true;
  TrainRun first = run_train(args);
  ASSERT_OK(first.summary);
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(at::globalContext().deterministicAlgorithmsWarnOnly());
  EXPECT_TRUE(std::any_of(first.lines.begin(), first.lines.end(), [](const std::string& line) {
    return line.find("full determinism: ") != std::string::npos && line.find("CUBLAS_WORKSPACE_CONFIG=:") != std::string::npos;
  }));
  TrainRun second = run_train(args);
  ASSERT_OK(second.summary);
  EXPECT_EQ(second.summary->losses, first.summary->losses) << "bit for bit";
  if (!at::hasCUDA()) {
    at::globalContext().setDeterministicAlgorithms(false, false);  // the setting is the process's
    TrainRun plain = run_train(train_args(config, 3));
    ASSERT_OK(plain.summary);
    EXPECT_EQ(plain.summary->losses, first.summary->losses) << "the CPU path is deterministic without the flag";
  }
}

// --profile: a Chrome trace of the chosen step, with the ATen ops the step ran (a GPU adds its
// kernels and copies); the same losses as without it; a step outside the run, or --profile-step
// without --profile, refused before training.
TEST(Train, ProfileWritesAChromeTraceOfOneStep) {
  ScratchDir dir;
  const std::string config = write_config(dir, small_config({{"zero_optimization", {{"stage", 2}}}}));
  TrainArgs args = train_args(config, 3);
  args.profile_path = dir / "trace.json";
  args.profile_step = 2;
  TrainRun traced = run_train(args);
  ASSERT_OK(traced.summary);
  std::ifstream in(args.profile_path);
  ASSERT_TRUE(in.good()) << args.profile_path;
  const nlohmann::json trace = nlohmann::json::parse(in);
  ASSERT_TRUE(trace.contains("traceEvents"));
  int64_t matmuls = 0;
  for (const nlohmann::json& event : trace["traceEvents"])
    matmuls += event.value("name", "").find("mm") != std::string::npos && event.value("ph", "") == "X";
  EXPECT_GT(matmuls, 0) << "no matmul in the step's trace";
  TrainRun plain = run_train(train_args(config, 3));
  ASSERT_OK(plain.summary);
  EXPECT_EQ(traced.summary->losses, plain.summary->losses);

  args.profile_step = 4;
  EXPECT_ERROR(run_train(args).summary, ErrorCode::kInvalidArgument, "--profile-step 4");
  TrainArgs no_path = train_args(config, 3);
  no_path.profile_step = 2;
  EXPECT_ERROR(run_train(no_path).summary, ErrorCode::kInvalidArgument, "--profile FILE");
}

// offload_optimizer.device "nvme": the losses of the same run with the state in host memory, bit for
// bit, the swap file's bytes on the done line and the last finished optimizer step's NVMe traffic on
// each step line.
// Trains 3 steps of small_config(cpu) and of small_config(nvme) in `dir`, checks that both finish
// with the same losses bit for bit and that the NVMe run's done line shows its swap bytes, and
// returns the NVMe run's step lines (each parsed).
std::vector<std::string> nvme_run_like_cpu(const ScratchDir& dir, const nlohmann::json& cpu, const nlohmann::json& nvme) {
  TrainRun on_cpu = run_train(train_args(write_config(dir, small_config(cpu), "cpu.json"), 3));
  TrainArgs nvme_args = train_args(write_config(dir, small_config(nvme), "nvme.json"), 3);
  nvme_args.metrics_path = dir / "nvme.jsonl";
  TrainRun on_nvme = run_train(nvme_args);
  EXPECT_OK(on_cpu.summary);
  EXPECT_OK(on_nvme.summary);
  if (!on_cpu.summary.ok() || !on_nvme.summary.ok()) return {};
  EXPECT_EQ(on_nvme.summary->losses, on_cpu.summary->losses) << "bit for bit";
  EXPECT_EQ(on_nvme.lines.back().find("| nvme 0 B"), std::string::npos) << on_nvme.lines.back();
  std::vector<std::string> steps;
  for (const std::smatch& match : step_lines(on_nvme.lines)) steps.push_back(match.str(0));
  // The metrics file holds each step's traffic in bytes, the step line the same figure formatted.
  const report::RunMetrics metrics = value_or_throw(report::read_metrics_file(nvme_args.metrics_path));
  EXPECT_EQ(metrics.steps.size(), steps.size());
  for (size_t i = 0; i < std::min(metrics.steps.size(), steps.size()); ++i) {
    const report::StepMetrics& m = metrics.steps[i];
    if (!m.nvme_read_bytes || !m.nvme_written_bytes) {
      ADD_FAILURE() << "step " << m.step << " has no NVMe bytes in " << nvme_args.metrics_path;
      continue;
    }
    EXPECT_NE(steps[i].find("[nvme-io read " + format_bytes(*m.nvme_read_bytes) + " written " +
                            format_bytes(*m.nvme_written_bytes) + "]"),
              std::string::npos)
        << steps[i];
  }
  return steps;
}

TEST(Train, OptimizerOnNvmeTrainsLikeOptimizerOnCpu) {
  ScratchDir dir;
  const nlohmann::json cpu = {
      {"zero_optimization", {{"stage", 3}, {"sub_group_size", 500}, {"offload_optimizer", {{"device", "cpu"}}}}}};
  nlohmann::json nvme = cpu;
  nvme["zero_optimization"]["offload_optimizer"] = {
      {"device", "nvme"}, {"nvme_path", dir / "nvme"}, {"pipeline_read", true}, {"pipeline_write", true}};
  std::filesystem::create_directories(dir / "nvme");  // train refuses a missing nvme_path
  const std::vector<std::string> steps = nvme_run_like_cpu(dir, cpu, nvme);
  ASSERT_EQ(steps.size(), 3u);
  // Step 1's optimizer step runs on into step 2: step 1's line has no finished step's traffic (the
  // swap file's first write is not a step's).
  EXPECT_NE(steps[0].find("[nvme-io read 0 B written 0 B]"), std::string::npos) << steps[0];
  // Later steps move the records the 4 buffers do not keep (sub-groups of 500 elements).
  EXPECT_NE(steps[2].find("[nvme-io read "), std::string::npos) << steps[2];
  EXPECT_EQ(steps[2].find("[nvme-io read 0 B"), std::string::npos) << steps[2];
}

// offload_param.device "nvme" (ZeRO-Infinity, the optimizer on the CPU): the losses of the same run
// with the parameter shard in host memory, bit for bit; the done line carries the swap file's bytes
// and each step line the parameters' NVMe traffic since the optimizer step before (gathers read, new
// weights written): none on the first line (the shard's first write is not a step's, and step 1's
// optimizer step runs on into step 2), both on the later ones.
TEST(Train, ParametersOnNvmeTrainLikeParametersOnCpu) {
  ScratchDir dir;
  const nlohmann::json cpu = {{"zero_optimization",
                               {{"stage", 3},
                                {"sub_group_size", 500},
                                {"offload_optimizer", {{"device", "cpu"}}},
                                {"offload_param", {{"device", "cpu"}}}}}};
  nlohmann::json nvme = cpu;
  nvme["zero_optimization"]["offload_param"] = {{"device", "nvme"},   {"nvme_path", dir / "params"},
                                                {"buffer_count", 16}, {"buffer_size", 4096},
                                                {"max_in_cpu", 0}};
  std::filesystem::create_directories(dir / "params");
  const std::vector<std::string> steps = nvme_run_like_cpu(dir, cpu, nvme);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_NE(steps[0].find("[nvme-io read 0 B written 0 B]"), std::string::npos) << steps[0];
  for (size_t i = 1; i < steps.size(); ++i) {
    EXPECT_NE(steps[i].find("  [nvme-io read "), std::string::npos) << steps[i];
    EXPECT_EQ(steps[i].find("[nvme-io read 0 B"), std::string::npos) << steps[i];
    EXPECT_EQ(steps[i].find("written 0 B]"), std::string::npos) << steps[i];
  }
}

TEST(Train, SaveAndExportAreLoadable) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config()), 2);
  args.save_dir = dir / "ckpt";
  args.export_dir = dir / "hf";
  TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  Result<checkpoint::VerifyReport> verified = checkpoint::verify_checkpoint(dir / "ckpt");
  EXPECT_OK(verified);
  Result<ModelConfig> config = load_model_config(dir / "hf");
  ASSERT_OK(config);
  EXPECT_EQ(config->hidden_size, tiny_llama_config().hidden_size);
  Result<std::map<std::string, at::Tensor>> weights = load_hf_weights(dir / "hf", at::kFloat, at::kCPU);
  ASSERT_OK(weights);
  EXPECT_EQ(weights->size(), all_params(*make_causal_lm(*config)).size());
  EXPECT_NE(run.lines.back().find("| saved to " + (dir / "ckpt") + " | exported to " + (dir / "hf")), std::string::npos)
      << run.lines.back();
}

// Every "compression" value in a rank record (rank_00000.json).
void compressions(const nlohmann::json& json, std::vector<std::string>* out) {
  if (json.is_object()) {
    for (auto it = json.begin(); it != json.end(); ++it) {
      if (it.key() == "compression" && it->is_string()) out->push_back(*it);
      compressions(*it, out);
    }
  } else if (json.is_array()) {
    for (const nlohmann::json& item : json) compressions(item, out);
  }
}

std::vector<std::string> saved_compressions(const std::string& checkpoint_dir, int64_t step) {
  std::ifstream record(checkpoint_dir + "/global_step" + std::to_string(step) + "/rank_00000.json");
  EXPECT_TRUE(record) << "no rank record in " << checkpoint_dir;
  std::vector<std::string> found;
  if (record) compressions(nlohmann::json::parse(record), &found);
  return found;
}

TEST(Train, CheckpointCompressionIsHonoured) {
  ScratchDir dir;
  for (const char* compression : {"none", "zstd"}) {
    const std::string name = std::string("ckpt_") + compression;
    nlohmann::json overrides = {{"tierzero", {{"checkpoint", {{"compression", compression}, {"level", 5}}}}}};
    TrainArgs args = train_args(write_config(dir, small_config(overrides), name + ".json"), 1);
    args.save_dir = dir / name;
    TrainRun run = run_train(args);
    ASSERT_OK(run.summary);
    std::vector<std::string> found = saved_compressions(dir / name, 1);
    ASSERT_FALSE(found.empty()) << "no section records";
    for (const std::string& c : found) EXPECT_EQ(c, compression);
    EXPECT_OK(checkpoint::verify_checkpoint(dir / name));
  }
}

TEST(Train, MetricsFileHoldsEveryStep) {
  ScratchDir dir;
  TrainArgs args = train_args(write_config(dir, small_config({{"steps_per_print", 10}})), 3);
  args.metrics_path = dir / "run.jsonl";
  TrainRun run = run_train(args);
  ASSERT_OK(run.summary);
  Result<report::RunMetrics> metrics = report::read_metrics_file(args.metrics_path);
  ASSERT_OK(metrics);
  EXPECT_EQ(metrics->run.model, "builtin");
  EXPECT_EQ(metrics->run.dtype, "fp32");
  EXPECT_EQ(metrics->run.offload, "none");
  EXPECT_EQ(metrics->run.tokens_per_step, 2 * 32);
  EXPECT_EQ(metrics->run.parameters, num_parameters(tiny_llama_config()));
  ASSERT_EQ(metrics->steps.size(), 3u) << "every step, whatever steps_per_print";
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(metrics->steps[i].step, static_cast<int64_t>(i + 1));
    EXPECT_EQ(metrics->steps[i].loss, run.summary->losses[i]) << "exact";
    EXPECT_GT(metrics->steps[i].tokens_per_s, 0.0);
    EXPECT_GT(metrics->steps[i].pageable_bytes, 0);
    EXPECT_EQ(metrics->steps[i].nvme_bytes, 0);
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
