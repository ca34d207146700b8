#include "engine/comm/internal/rendezvous.h"

#include <cstdio>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace tierzero::engine::comm_internal {
namespace {

constexpr std::chrono::milliseconds kPollInterval{50};
constexpr std::chrono::seconds kSayWaitingAfter{10};

std::string rank_key(int rank) { return "tierzero/rendezvous/rank" + std::to_string(rank); }

// "rank 1" or "ranks 1, 2, 5" (the first 16, then how many more).
std::string name_ranks(const std::vector<int>& ranks) {
  constexpr size_t kListed = 16;
  std::string names = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kListed; ++i) names += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kListed) names += fmt::format(" and {} more", ranks.size() - kListed);
  return names;
}

// The ranks whose key is not in `store` yet.
std::vector<int> missing_ranks(c10d::Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (!store.check({rank_key(r)})) missing.push_back(r);
  return missing;
}

double seconds(std::chrono::milliseconds t) { return std::chrono::duration<double>(t).count(); }

}  // namespace

std::string first_line(const char* text) {
  const std::string_view all = text;
  return std::string(all.substr(0, all.find('\n')));
}

std::string LaunchEnv::describe() const {
  return fmt::format("MASTER_ADDR={} MASTER_PORT={} WORLD_SIZE={} RANK={}", master_addr, master_port, world_size, rank);
}

std::string what_to_check(const LaunchEnv& env, const std::string& missing, std::chrono::milliseconds timeout) {
  return fmt::format(
      "check that {} was launched with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (torchrun "
      "--nnodes / --nproc_per_node give WORLD_SIZE = nodes x processes) and did not fail before joining (see its "
      "log), and that {}:{} is reachable from its host (firewall, interface); waited {:g} s: set "
      "TIERZERO_RENDEZVOUS_TIMEOUT=SECONDS to wait longer",
      missing, env.master_addr, env.master_port, seconds(timeout));
}

Status wait_for_all_ranks(c10d::Store& store, const LaunchEnv& env, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  bool said_waiting = false;
  try {
    std::vector<std::string> keys;
    for (int r = 0; r < env.world_size; ++r) keys.push_back(rank_key(r));
    store.set(rank_key(env.rank), std::vector<uint8_t>{1});
    while (!store.check(keys)) {  // one request a poll; the missing ranks are looked up only to say so
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= timeout) {
        const std::string missing = name_ranks(missing_ranks(store, env.world_size));
        return io_error(fmt::format("rank {}: {} of WORLD_SIZE={} never arrived at the rendezvous ({}); {}", env.rank,
                                    missing, env.world_size, env.describe(), what_to_check(env, missing, timeout)));
      }
      if (!said_waiting && waited >= kSayWaitingAfter) {
        std::fprintf(stderr,
                     "rank %d: waiting for %s at %s:%d (%s; gives up after %g s, TIERZERO_RENDEZVOUS_TIMEOUT)\n",
                     env.rank, name_ranks(missing_ranks(store, env.world_size)).c_str(), env.master_addr.c_str(),
                     env.master_port, env.describe().c_str(), seconds(timeout));
        said_waiting = true;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
    return Status();
  } catch (const std::exception& e) {
    return io_error(
        fmt::format("rank {}: the rendezvous store at {}:{} failed ({}): {}; rank 0 hosts it: check that "
                    "it is still running (see its log)",
                    env.rank, env.master_addr, env.master_port, env.describe(), first_line(e.what())));
  }
}

}  // namespace tierzero::engine::comm_internal
