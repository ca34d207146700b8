// What the trainer tests share: a scratch directory, a small ds_config written into it (the
// built-in tiny Llama on the bundled corpus, seq_len 32, micro-batch 2) and train() run with its
// output captured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "engine/train/trainer.h"
#include "tests/support/scratch_dir.h"

namespace tierzero::engine::testing {

// A fresh directory tierzero_train-XXXXXX under $TMPDIR (or /tmp), removed with everything in it
// at destruction (tests/support); `dir / "name"` is a path in it.
struct ScratchDir : test_support::ScratchDir {
  ScratchDir() : test_support::ScratchDir("tierzero_train") {}
  std::string operator/(const std::string& name) const { return file(name); }
};

// A small, fast ds_config: stage 0, fp32, AdamW, constant lr, every step printed; `overrides` are
// merged in (JSON merge-patch).
nlohmann::json small_config(const nlohmann::json& overrides = nlohmann::json::object());

// Writes `config` to DIR/NAME and returns the path.
std::string write_config(const ScratchDir& dir, const nlohmann::json& config, const std::string& name = "ds.json");

// TrainArgs for `steps` steps of the config at `config_path`; other fields at their defaults.
TrainArgs train_args(const std::string& config_path, int64_t steps);

// A TCP port of the loopback interface free at the moment of asking (a TCPStore binds it next).
int free_port();

// Sets environment variable NAME to VALUE for a scope; the old value (or its absence) comes back.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// train() with rank 0's output captured.
struct TrainRun {
  Result<TrainSummary> summary;
  std::vector<std::string> lines;  // what train() printed, line by line
};
TrainRun run_train(const TrainArgs& args);

}  // namespace tierzero::engine::testing
