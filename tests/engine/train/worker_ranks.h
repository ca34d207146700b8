// A multi-rank trainer test's ranks: kWorld train_worker processes (train_worker.cpp) under
// torchrun's environment on the loopback interface, CUDA hidden (Gloo on the CPU), each rank's
// output in DIR/NAME.rankR.log, through tests/support's SpawnedRanks: a launch whose group could not
// form (a rank's log holds Comm::create's kGroupNotFormed: a loopback connect once failed so on the
// CI box) is launched again on a fresh port. Header-only: TIERZERO_TRAIN_WORKER is the test
// target's.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/comm.h"
#include "tests/support/spawned_ranks.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {

inline constexpr int kWorld = 2;

// kWorld train_worker ranks with `args` (SpawnedRanks: done(), wait(seconds), kill_all()).
class Ranks : public test_support::SpawnedRanks {
 public:
  Ranks(const ScratchDir& dir, const std::string& name, std::vector<std::string> args)
      : SpawnedRanks(launch(dir, name, std::move(args))) {}

 private:
  static test_support::RankLaunch launch(const ScratchDir& dir, const std::string& name,
                                         std::vector<std::string> args) {
    args.insert(args.begin(), TIERZERO_TRAIN_WORKER);
    return {.argv = std::move(args),
            .world = kWorld,
            .env =
                [ports = std::make_shared<std::map<int, int>>()](int rank, int attempt) {
                  auto [port, fresh] = ports->try_emplace(attempt, 0);  // a fresh port for each launch
                  if (fresh) port->second = free_port();
                  // CUDA hidden: the ranks run on the CPU over Gloo, also on a machine with one GPU.
                  using test_support::env_var;
                  return std::vector<std::string>{
                      env_var("RANK", std::to_string(rank)), env_var("LOCAL_RANK", std::to_string(rank)),
                      env_var("CUDA_VISIBLE_DEVICES", ""),   env_var("WORLD_SIZE", std::to_string(kWorld)),
                      env_var("MASTER_ADDR", "127.0.0.1"),   env_var("MASTER_PORT", std::to_string(port->second)),
                      env_var("OMP_NUM_THREADS", "1"),       env_var("TORCH_FR_BUFFER_SIZE", "0")};
                },
            .log = [path = dir / name](int rank) { return path + ".rank" + std::to_string(rank) + ".log"; },
            .retry_when = std::string(kGroupNotFormed)};
  }
};

}  // namespace tierzero::engine::testing
