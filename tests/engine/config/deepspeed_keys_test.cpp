// Every key DeepSpeed 0.19.8's own config accepts (deepspeed_keys.txt, which deepspeed_keys.py
// generates from DeepSpeed and checks where deepspeed is importable) is accepted by tierzero, and
// is either one it acts on or one it warns about by name, in one warning with the reason for each.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "engine/config/ds_config.h"
#include "tests/support/python.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

std::filesystem::path config_tests_dir() {
  const char* source = std::getenv("TIERZERO_SOURCE_DIR");
  return std::filesystem::path(source ? source : ".") / "tests" / "engine" / "config";
}

struct DeepSpeedKey {
  std::string path;      // "zero_optimization.offload_param.device"
  nlohmann::json value;  // DeepSpeed's default; {} for a section
};

std::vector<DeepSpeedKey> deepspeed_keys() {
  std::ifstream in(config_tests_dir() / "deepspeed_keys.txt");
  EXPECT_TRUE(in) << "tests/engine/config/deepspeed_keys.txt not found (TIERZERO_SOURCE_DIR)";
  std::vector<DeepSpeedKey> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    const size_t tab = line.find('\t');
    keys.push_back({line.substr(0, tab), nlohmann::json::parse(line.substr(tab + 1))});
  }
  return keys;
}

nlohmann::json::json_pointer pointer(const std::string& path) {
  return nlohmann::json::json_pointer("/" + std::regex_replace(path, std::regex("\\."), "/"));
}

// The registry entry that covers `path`: its own, a registered section above it (warned whole), or
// nullptr. `read_by_key` is set when the registry lists keys below it instead (a section tierzero
// reads key by key, such as optimizer.params).
const ConfigKey* covering_entry(const std::string& path, bool* read_by_key) {
  *read_by_key = false;
  const ConfigKey* covering = nullptr;
  for (const ConfigKey& key : ds_config_keys()) {
    const std::string registered(key.path);
    if (registered == path || path.starts_with(registered + ".")) covering = &key;
    if (registered.starts_with(path + ".")) *read_by_key = true;
  }
  return covering;
}

TEST(DeepSpeedKeys, EveryKeyDeepSpeedAcceptsIsAcceptedAndHonouredOrWarnedByName) {
  const std::vector<DeepSpeedKey> keys = deepspeed_keys();
  ASSERT_GT(keys.size(), 300u);
  // A config DeepSpeed and tierzero both take, each key then set to DeepSpeed's default in it.
  const nlohmann::json base = {{"train_batch_size", 1},
                               {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}},
                               {"scheduler", {{"type", "WarmupLR"}}}};
  for (const DeepSpeedKey& key : keys) {
    SCOPED_TRACE(key.path + " = " + key.value.dump());
    const bool section = key.value.is_object();
    bool read_by_key = false;
    const ConfigKey* entry = covering_entry(key.path, &read_by_key);
    EXPECT_TRUE(entry != nullptr || (section || read_by_key)) << "not in ds_config_keys() (nor a section above it)";

    nlohmann::json config = base;
    const bool empty = key.value.is_null() || (section && key.value.empty());
    if (!(empty && config.contains(pointer(key.path)))) config[pointer(key.path)] = key.value;
    Result<DsConfig> parsed = parse_ds_config(config, ResolveHints{.total_steps = 10});
    ASSERT_OK(parsed);
    if (entry == nullptr || entry->handling != KeyHandling::kWarned || key.value.is_null()) continue;
    if (key.value == nlohmann::json::parse(entry->accepted)) continue;
    ASSERT_EQ(parsed->warnings.size(), 1u);
    EXPECT_NE(parsed->warnings[0].find(std::string(entry->path) + "="), std::string::npos) << parsed->warnings[0];
    EXPECT_NE(parsed->warnings[0].find(std::string(entry->note)), std::string::npos) << parsed->warnings[0];
  }
}

// The two the issue met: names DeepSpeed prints as its configuration, which it ignores as keys.
TEST(DeepSpeedKeys, ConfigObjectAttributesAreAcceptedWithOneWarningNamingEach) {
  DsConfig c = parse_ds_config_text(R"({"train_batch_size": 1, "comms_config": {"enabled": false},
      "monitor_config": {"enabled": false}, "zero_optimization": {"stage": 2, "round_robin_gradients": true}})",
                                    ResolveHints{})
                   .value();
  ASSERT_EQ(c.warnings.size(), 1u);
  const std::string& warning = c.warnings[0];
  EXPECT_EQ(warning.rfind("3 ds_config keys have no effect in tierzero (ignored): ", 0), 0u) << warning;
  for (const char* part : {"comms_config={\"enabled\":false}, monitor_config={\"enabled\":false} (not a key DeepSpeed "
                           "reads: the name of an attribute of its config object",
                           "zero_optimization.round_robin_gradients=true (gradients are partitioned in order)"}) {
    EXPECT_NE(warning.find(part), std::string::npos) << part << " in " << warning;
  }
}

// deepspeed_keys.txt is what this DeepSpeed accepts (skipped without deepspeed, or with another
// version than the list's).
TEST(DeepSpeedKeys, TheListIsWhatDeepSpeedAccepts) {
  test_support::ScratchDir dir;
  const test_support::PythonRun run = test_support::run_python(
      (config_tests_dir() / "deepspeed_keys.py").string(),
      {"--check", (config_tests_dir() / "deepspeed_keys.txt").string()}, dir.file("check.log"));
  if (run.exit_code == test_support::kPythonSkip || run.exit_code == test_support::kPythonMissing)
    GTEST_SKIP() << run.output;
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

}  // namespace
}  // namespace tierzero::engine
