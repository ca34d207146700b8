// A ds_config without an optimizer section (LLaMA-Factory's ds_z3_offload_config.json, the
// transformers docs' ZeRO-3 example): `tierzero train` refuses it without --lr, naming --lr and the
// optimizer section, and with --lr trains with what the Hugging Face Trainer builds for it (AdamW
// with TrainingArguments' defaults and the linear schedule), step for step as transformers'
// deepspeed_optim_sched() + create_scheduler() give them (hf_trainer_defaults.py runs them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/config/ds_config.h"
#include "tests/support/python.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

// The ZeRO-3 offload config LLaMA-Factory ships (examples/deepspeed/ds_z3_offload_config.json, as of
// hiyouga/LLaMA-Factory 1d6e8b2): no optimizer, no scheduler; comms_config and monitor_config, which
// DeepSpeed ignores, as tierzero does with a warning.
constexpr const char* kNoOptimizer = R"({
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "zero_allow_untested_optimizer": true,
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "cpu", "pin_memory": true}, "overlap_comm": false, "contiguous_gradients": true,
    "sub_group_size": 1e9, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true},
  "comms_config": {"verbose": false},
  "monitor_config": {"enabled": true, "tag": "DeepSpeedMonitor", "csv_monitor": {"enabled": false}}
})";

// `tierzero train --micro-batch 2 --grad-accum 1 --max-grad-norm 1 --bf16 [--lr X] --steps N`.
ResolveHints train_hints(std::optional<double> lr, int64_t steps, std::optional<int64_t> warmup = std::nullopt) {
  return ResolveHints{.model = {.hidden_size = 64},
                      .total_steps = steps,
                      .flags = {.micro_batch_size = 2,
                                .gradient_accumulation_steps = 1,
                                .lr = lr,
                                .warmup_steps = warmup,
                                .max_grad_norm = 1.0,
                                .bf16 = true},
                      .training = true};
}

TEST(TrainerDefaults, NoOptimizerSectionAndNoLrIsRefusedNamingBothFixes) {
  Result<DsConfig> r = parse_ds_config_text(kNoOptimizer, train_hints(std::nullopt, 100));
  ASSERT_ERROR(r, ErrorCode::kInvalidArgument, "has no optimizer section, so nothing sets the learning rate");
  EXPECT_NE(r.status().message().find("pass --lr X"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("or add an optimizer section, e.g. \"optimizer\""), std::string::npos)
      << r.status().message();
  // estimate and convert read the config for what it places where: the lr is no concern of theirs.
  ResolveHints planning = train_hints(std::nullopt, 0);
  planning.training = false;
  EXPECT_OK(parse_ds_config_text(kNoOptimizer, planning));
}

TEST(TrainerDefaults, WeightDecayAndAMissingLengthAreRefused) {
  ResolveHints hints = train_hints(3e-4, 100);
  hints.flags.weight_decay = 0.1;
  EXPECT_ERROR(parse_ds_config_text(kNoOptimizer, hints), ErrorCode::kInvalidArgument,
               "--weight-decay 0.1 without an optimizer section");
  EXPECT_ERROR(parse_ds_config_text(kNoOptimizer, train_hints(3e-4, 0)), ErrorCode::kInvalidArgument,
               "pass --steps N to tierzero train");
  hints.flags.weight_decay = 0.0;  // the HF Trainer's default, the same either way
  EXPECT_OK(parse_ds_config_text(kNoOptimizer, hints));
}

// The header line says which optimizer and schedule run and why; to_json() leaves both sections out
// (they are not DeepSpeed's), and reading it back with the same flags gives the same run.
TEST(TrainerDefaults, TheRunHeaderNamesThemAndTheResolvedConfigRoundTrips) {
  const ResolveHints hints = train_hints(3e-4, 40, 5);
  DsConfig c = parse_ds_config_text(kNoOptimizer, hints).value();
  EXPECT_TRUE(c.optimizer_from_flags);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].rfind("3 ds_config keys have no effect in tierzero (ignored): ", 0), 0u) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("comms_config={\"verbose\":false}, monitor_config={"), std::string::npos)
      << c.warnings[0];
  EXPECT_EQ(optimizer_summary(c),
            "optimizer AdamW lr 0.0003, betas (0.9, 0.999), eps 1e-08, weight decay 0 (the Hugging Face Trainer's "
            "AdamW with --lr, as the ds_config has no optimizer section); lr schedule linear: warm-up from 0 over 5 "
            "steps (--warmup-steps), then linear decay to 0 at step 40 (--steps): the Hugging Face Trainer's default "
            "(get_linear_schedule_with_warmup), as the ds_config has no scheduler section");
  const nlohmann::json resolved = to_json(c);
  EXPECT_FALSE(resolved.contains("optimizer"));
  EXPECT_FALSE(resolved.contains("scheduler"));
  DsConfig again = parse_ds_config(resolved, hints).value();
  EXPECT_EQ(to_json(again), resolved);
  ASSERT_TRUE(again.scheduler.has_value());
  EXPECT_EQ(again.scheduler->type, LrScheduleType::kLinear);
  EXPECT_EQ(again.scheduler->warmup_num_steps, 5);

  // With the sections given, the header names them as the config's.
  DsConfig given =
      parse_ds_config_text(R"({"train_batch_size": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})",
                           ResolveHints{.training = true})
          .value();
  EXPECT_FALSE(given.optimizer_from_flags);
  EXPECT_EQ(optimizer_summary(given),
            "optimizer AdamW lr 0.0001, betas (0.9, 0.999), eps 1e-08, weight decay 0; lr schedule constant (the "
            "ds_config has no scheduler section)");
}

std::string script_path(const char* name) {
  const char* source = std::getenv("TIERZERO_SOURCE_DIR");
  return (std::filesystem::path(source ? source : ".") / "tests" / "engine" / "config" / name).string();
}

// Runs of (steps, --warmup-steps or none): warm-up shorter than, longer than and absent from the run.
struct ScheduleRun {
  int64_t steps;
  std::optional<int64_t> warmup;
};
constexpr double kLr = 3e-4;
const ScheduleRun kRuns[] = {{20, 5}, {8, std::nullopt}, {4, 6}, {12, 1}};

TEST(TrainerDefaults, WithLrTheOptimizerAndScheduleAreTheHfTrainersStepForStep) {
  test_support::ScratchDir dir;
  std::vector<std::string> args = {dir.file("hf.json"), "--lr", "3e-4"};
  for (const ScheduleRun& run : kRuns)
    args.push_back("--run=" + std::to_string(run.steps) + (run.warmup ? ":" + std::to_string(*run.warmup) : ""));
  const test_support::PythonRun python =
      test_support::run_python(script_path("hf_trainer_defaults.py"), args, dir.file("hf.log"));
  if (python.exit_code == test_support::kPythonSkip || python.exit_code == test_support::kPythonMissing)
    GTEST_SKIP() << python.output;
  ASSERT_EQ(python.exit_code, 0) << python.output;
  nlohmann::json hf;
  std::ifstream(dir.file("hf.json")) >> hf;

  ASSERT_EQ(hf["runs"].size(), std::size(kRuns));
  for (size_t i = 0; i < std::size(kRuns); ++i) {
    const ScheduleRun& run = kRuns[i];
    SCOPED_TRACE("--steps " + std::to_string(run.steps) + " --warmup-steps " +
                 (run.warmup ? std::to_string(*run.warmup) : "(none)"));
    DsConfig c = parse_ds_config_text(kNoOptimizer, train_hints(kLr, run.steps, run.warmup)).value();
    const OptimizerConfig& o = c.optimizer;
    EXPECT_EQ(hf["optimizer"], "AdamW");
    EXPECT_TRUE(o.type == OptimizerType::kAdamW && o.decoupled_weight_decay() && o.bias_correction);
    EXPECT_EQ(o.lr, hf["lr"].get<double>());
    EXPECT_EQ(o.beta1, hf["betas"][0].get<double>());
    EXPECT_EQ(o.beta2, hf["betas"][1].get<double>());
    EXPECT_EQ(o.eps, hf["eps"].get<double>());
    EXPECT_EQ(o.weight_decay, hf["weight_decay"].get<double>());

    ASSERT_TRUE(c.scheduler.has_value());
    LrSchedule schedule = LrSchedule::create(*c.scheduler).value();
    const nlohmann::json& lrs = hf["runs"][i]["lrs"];
    ASSERT_EQ(lrs.size(), static_cast<size_t>(run.steps + 2));
    for (size_t step = 0; step < lrs.size(); ++step) {
      EXPECT_NEAR(schedule.lr(), lrs[step].get<double>(), 1e-12 * kLr) << "step " << step;
      schedule.step();
    }
  }
}

}  // namespace
}  // namespace tierzero::engine
