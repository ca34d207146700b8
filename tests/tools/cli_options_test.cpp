// The CLI's shared conventions: range errors in plain words (not CLI11's 309-digit double),
// `doctor --json FILE` writing a file as every other --json does, and unknown flags answered with
// the flag meant.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/scratch_dir.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"
#include "tools/flag_suggestions.h"

namespace tierzero::tools {
namespace {

// The message CLI11 gives for `args` (empty when they parse).
std::string parse_error(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return {};
}

TEST(CliChecks, RangeErrorsSayTheRangeInPlainWords) {
  CLI::App app;
  int64_t steps = 0;
  double lr = 0, beta = 0;
  app.add_option("--steps", steps)->check(whole_number_in(1, 1'000'000'000));
  app.add_option("--lr", lr)->check(number_in(0.0, 1e6));
  app.add_option("--beta", beta)->check(number_in(0.0, 1.0, true));
  EXPECT_EQ(parse_error(app, {"--steps", "0"}), "--steps: must be a whole number from 1 to 1000000000, got 0");
  EXPECT_EQ(parse_error(app, {"--steps", "99999999999999999999"}),
            "--steps: must be a whole number from 1 to 1000000000, got 99999999999999999999");
  EXPECT_EQ(parse_error(app, {"--steps", "2.5"}), "--steps: must be a whole number from 1 to 1000000000, got 2.5");
  EXPECT_EQ(parse_error(app, {"--lr", "-1"}), "--lr: must be a number from 0 to 1000000, got -1");
  EXPECT_EQ(parse_error(app, {"--lr", "nan"}), "--lr: must be a number from 0 to 1000000, got nan");
  EXPECT_EQ(parse_error(app, {"--beta", "1"}), "--beta: must be a number from 0 to 1 (exclusive), got 1");
  EXPECT_EQ(parse_error(app, {"--steps", "7", "--lr", "3e-4", "--beta", "0.95"}), "");
  EXPECT_EQ(steps, 7);
  EXPECT_EQ(lr, 3e-4);
  for (const char* flag : {"--steps", "--lr"})
    EXPECT_EQ(parse_error(app, {flag, "1e400"}).find("179769"), std::string::npos) << "no 309-digit bound";
}

// A command with some of train's flags.
void add_flags(CLI::App& app, bool epochs) {
  for (const char* name : {"--steps", "--lr", "--micro-batch", "--save", "--export", "--warmup-steps", "--config"})
    app.add_option(name);
  if (epochs) app.add_option("--epochs");
}

TEST(FlagSuggestions, OtherToolsNamesHyphensAndTypos) {
  CLI::App app;
  add_flags(app, false);
  EXPECT_EQ(suggest_flag(app, "--max_steps"),
            "did you mean --steps? (--max_steps is the Hugging Face Trainer's optimizer step count)");
  EXPECT_EQ(suggest_flag(app, "--deepspeed"),
            "did you mean --config? (--deepspeed is the DeepSpeed launcher's ds_config JSON)");
  EXPECT_EQ(suggest_flag(app, "--learning_rate=3e-4"),
            "did you mean --lr? (--learning_rate is the Hugging Face Trainer's learning rate)");
  EXPECT_NE(suggest_flag(app, "--output_dir").find("did you mean --save or --export?"), std::string::npos);
  EXPECT_EQ(suggest_flag(app, "--warmup_steps"),
            "did you mean --warmup-steps? (tierzero's flags are lower case, words joined by hyphens)");
  EXPECT_EQ(suggest_flag(app, "--Steps"),
            "did you mean --steps? (tierzero's flags are lower case, words joined by hyphens)");
  EXPECT_EQ(suggest_flag(app, "--stpes"), "did you mean --steps?");
  EXPECT_EQ(suggest_flag(app, "--bogus-thing"), "");
  EXPECT_NE(suggest_flag(app, "--local_rank=0").find("no flag takes it (--local_rank is the rank the DeepSpeed "),
            std::string::npos);
  // A foreign flag whose tierzero flags this command lacks falls back to the nearest flag, or none.
  EXPECT_EQ(suggest_flag(app, "--model_name_or_path"), "");
  EXPECT_NE(suggest_flag(app, "--num_train_epochs").find("did you mean --steps?"), std::string::npos);
  CLI::App with_epochs;
  add_flags(with_epochs, true);
  EXPECT_NE(suggest_flag(with_epochs, "--num_train_epochs").find("did you mean --epochs?"), std::string::npos);
}

TEST(FlagSuggestions, UnknownFlagsOfTheSubcommandGiven) {
  CLI::App app;
  app.require_subcommand(1);
  add_flags(*app.add_subcommand("train"), false);
  EXPECT_EQ(parse_error(app, {"train", "--steps", "3"}), "");
  EXPECT_EQ(unknown_flags_message(app), "");
  CLI::App again;
  again.require_subcommand(1);
  add_flags(*again.add_subcommand("train"), false);
  EXPECT_NE(parse_error(again, {"train", "--deepspeed", "ds.json", "--max_steps=5", "--bogus"}), "");
  EXPECT_EQ(unknown_flags_message(again),
            "tierzero train: unknown flag --deepspeed: did you mean --config? (--deepspeed is the DeepSpeed launcher's "
            "ds_config JSON)\n"
            "tierzero train: unknown flag --max_steps: did you mean --steps? (--max_steps is the Hugging Face "
            "Trainer's optimizer step count)\n"
            "tierzero train: unknown flag --bogus: no flag of this command is near (`tierzero train --help` lists "
            "them)\n");
}

TEST(CliChecks, DoctorJsonTakesAFile) {
  test_support::ScratchDir dir;
  CLI::App app;
  add_doctor_command(app);
  const std::string json = dir.file("doctor.json");
  EXPECT_EQ(parse_error(app, {"doctor", "--pin-probe", "16MiB", "--nvme", dir.path(), "--json", json}), "");
  nlohmann::json checks;
  std::ifstream(json) >> checks;
  ASSERT_TRUE(checks.contains("checks")) << checks.dump();
  EXPECT_FALSE(checks["checks"].empty());
  EXPECT_NE(checks.dump().find(dir.path()), std::string::npos) << "the --nvme directory is checked";
}

}  // namespace
}  // namespace tierzero::tools
