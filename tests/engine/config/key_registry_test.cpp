// The key registry (ds_config_keys()) is complete and is the table in configs/README.md; warned keys
// warn by name, accepted values stay quiet.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

std::set<std::string> registry_paths() {
  std::set<std::string> paths;
  for (const ConfigKey& key : ds_config_keys()) paths.insert(std::string(key.path));
  return paths;
}

// Every leaf path of `json` (arrays are leaves).
void leaf_paths(const nlohmann::json& json, const std::string& prefix, std::set<std::string>* out) {
  if (!json.is_object()) {
    out->insert(prefix);
    return;
  }
  for (auto it = json.begin(); it != json.end(); ++it)
    leaf_paths(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
}

DsConfig parse(const nlohmann::json& json) {
  Result<DsConfig> c = parse_ds_config(json, ResolveHints{.total_steps = 100});
  EXPECT_OK(c);
  return c.ok() ? *c : DsConfig{};
}

TEST(KeyRegistry, EveryKeyTheResolvedConfigWritesIsRegistered) {
  const std::set<std::string> registered = registry_paths();
  EXPECT_EQ(registered.size(), ds_config_keys().size()) << "a key is registered twice";
  for (const char* scheduler : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}) {
    nlohmann::json config = {{"train_batch_size", 1}, {"scheduler", {{"type", scheduler}}}};
    std::set<std::string> written;
    leaf_paths(to_json(parse(config)), "", &written);
    for (const std::string& path : written)
      EXPECT_TRUE(registered.contains(path)) << path << " is written by to_json() but missing from ds_config_keys()";
  }
}

TEST(KeyRegistry, ConfigsReadmeTableIsTheRegistry) {
  const char* root = std::getenv("TIERZERO_SOURCE_DIR");
  std::ifstream readme(std::filesystem::path(root ? root : ".") / "configs" / "README.md");
  ASSERT_TRUE(readme) << "configs/README.md not found (TIERZERO_SOURCE_DIR)";
  std::set<std::string> listed;
  std::string line;
  while (std::getline(readme, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    const std::string path = line.substr(3, end - 3);
    listed.insert(path);
    for (const ConfigKey& key : ds_config_keys()) {
      if (key.path != path) continue;
      EXPECT_NE(line.find(std::string("| ") + key_handling_name(key.handling)), std::string::npos)
          << path << ": README says otherwise than the registry (" << key_handling_name(key.handling) << ")";
    }
  }
  EXPECT_EQ(listed, registry_paths()) << "configs/README.md's key table and ds_config_keys() differ";
}

// A value other than `accepted` of the same JSON type.
nlohmann::json other_value(const ConfigKey& key) {
  const nlohmann::json accepted = nlohmann::json::parse(key.accepted);
  if (accepted.is_boolean()) return !accepted.get<bool>();
  if (accepted.is_number()) return accepted.get<double>() == 0 ? 1.0 : accepted.get<double>() * 2;
  if (accepted.is_string()) return "sync";  // aio.backend
  return nlohmann::json(2);                 // null: activation_checkpointing.number_checkpoints, sections
}

TEST(KeyRegistry, WarnedKeysWarnByNameUnlessAccepted) {
  for (const ConfigKey& key : ds_config_keys()) {
    if (key.handling != KeyHandling::kWarned) continue;
    const std::string path(key.path);
    nlohmann::json config = {{"train_batch_size", 1}};
    if (path.starts_with("optimizer.")) config["optimizer"]["type"] = "AdamW";
    config[nlohmann::json::json_pointer("/" + std::regex_replace(path, std::regex("\\."), "/"))] = other_value(key);
    DsConfig c = parse(config);
    ASSERT_EQ(c.warnings.size(), 1u) << path;
    EXPECT_EQ(c.warnings[0].rfind(path + "=", 0), 0u) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find(std::string(key.note)), std::string::npos) << c.warnings[0];

    config[nlohmann::json::json_pointer("/" + std::regex_replace(path, std::regex("\\."), "/"))] =
        nlohmann::json::parse(key.accepted);
    EXPECT_TRUE(parse(config).warnings.empty()) << path << " set to its accepted value warns";
  }
}

}  // namespace
}  // namespace tierzero::engine
