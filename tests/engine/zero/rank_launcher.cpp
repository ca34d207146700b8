#include "rank_launcher.h"

#include <string>
#include <vector>

#include "engine/comm/comm.h"
#include "tests/support/spawned_ranks.h"

namespace tierzero::engine::testing {

std::string run_ranks(const Scenario& scenario, double loss_rtol, double param_atol, int timeout_seconds) {
  test_support::ScratchDir dir("tierzero_zero");
  std::vector<std::string> argv{TIERZERO_ZERO_WORKER};
  for (std::string& arg : scenario.to_args()) argv.push_back(std::move(arg));
  test_support::SpawnedRanks ranks(
      {.argv = std::move(argv),
       .world = scenario.world_size,
       .env =
           [&](int rank, int attempt) {
             using test_support::env_var;
             return std::vector<std::string>{
                 env_var("RANK", std::to_string(rank)), env_var("WORLD_SIZE", std::to_string(scenario.world_size)),
                 // a fresh FileStore for each launch
                 env_var("TIERZERO_TEST_STORE", dir.file("store" + std::to_string(attempt))),
                 env_var("TIERZERO_TEST_LOSS_RTOL", std::to_string(loss_rtol)),
                 env_var("TIERZERO_TEST_PARAM_ATOL", std::to_string(param_atol)), env_var("OMP_NUM_THREADS", "1")};
           },
       .log = [&](int rank) { return dir.file("rank" + std::to_string(rank) + ".log"); },
       .retry_when = std::string(kGroupNotFormed)});
  return ranks.wait(timeout_seconds);
}

}  // namespace tierzero::engine::testing
