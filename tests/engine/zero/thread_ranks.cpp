#include "thread_ranks.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tierzero::engine::testing {
namespace {

constexpr int kFormAttempts = 3;

// Forms one group over a fresh store on `world` threads at once, every rank's Comm into `comms`;
// returns each failing rank's error, a line each (and leaves `comms` empty), or "" when all formed.
std::string form_group(int world, std::vector<std::unique_ptr<Comm>>& comms) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  comms.clear();
  comms.resize(static_cast<size_t>(world));
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      Result<std::unique_ptr<Comm>> comm = Comm::create(store, r, world, at::Device(at::kCPU));
      if (comm.ok())
        comms[static_cast<size_t>(r)] = std::move(comm).value();
      else
        errors[static_cast<size_t>(r)] = comm.status().to_string();
    });
  }
  for (std::thread& rank : ranks) rank.join();
  std::string failed;
  for (const std::string& error : errors)
    if (!error.empty()) failed += error + "\n";
  if (!failed.empty()) comms.clear();
  return failed;
}

}  // namespace

void run_thread_ranks(int world, const std::function<void(Comm&)>& body) {
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1);
  std::vector<std::unique_ptr<Comm>> comms;
  std::string failed;
  for (int attempt = 1; attempt <= kFormAttempts; ++attempt) {
    failed = form_group(world, comms);
    if (failed.empty()) break;
    std::fprintf(stderr, "run_thread_ranks: forming the %d-rank group failed (attempt %d of %d):\n%s", world, attempt,
                 kFormAttempts, failed.c_str());
  }
  if (!failed.empty())
    throw std::runtime_error("the " + std::to_string(world) + "-rank group never formed:\n" + failed);

  std::vector<std::exception_ptr> failures(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        body(*comms[static_cast<size_t>(r)]);
      } catch (...) {
        failures[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace tierzero::engine::testing
