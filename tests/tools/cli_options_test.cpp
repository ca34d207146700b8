// The CLI's shared conventions: range errors in plain words (not CLI11's 309-digit double), and
// `doctor --json FILE` writing a file as every other --json does.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/scratch_dir.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

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
