#include "train_fixture.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace tierzero::engine::testing {

nlohmann::json small_config(const nlohmann::json& overrides) {
  nlohmann::json config = {
      {"train_micro_batch_size_per_gpu", 2},
      {"gradient_accumulation_steps", 1},
      {"steps_per_print", 1},
      {"gradient_clipping", 1.0},
      {"zero_optimization", {{"stage", 0}}},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}, {"weight_decay", 0.01}}}}},
      {"tierzero", {{"data", {{"path", "configs/data/tiny_corpus.u16"}, {"seq_len", 32}, {"seed", 7}}}}},
  };
  config.merge_patch(overrides);
  return config;
}

std::string write_config(const ScratchDir& dir, const nlohmann::json& config, const std::string& name) {
  const std::string path = dir / name;
  std::ofstream(path) << config.dump(2);
  return path;
}

TrainArgs train_args(const std::string& config_path, int64_t steps) {
  TrainArgs args;
  args.config_path = config_path;
  args.steps = steps;
  return args;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

ScopedEnv::ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) old_ = old;
  setenv(name_.c_str(), value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (old_)
    setenv(name_.c_str(), old_->c_str(), 1);
  else
    unsetenv(name_.c_str());
}

TrainRun run_train(const TrainArgs& args) {
  std::FILE* out = std::tmpfile();
  TrainRun run{.summary = train(args, out), .lines = {}};
  std::rewind(out);
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, out) != nullptr) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    run.lines.push_back(line);
  }
  std::fclose(out);
  return run;
}

}  // namespace tierzero::engine::testing
