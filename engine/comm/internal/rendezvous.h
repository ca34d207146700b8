// Private: the rendezvous Comm::from_env runs before it builds the process group (rendezvous.cpp).
// Every rank checks in under its own key in the store, then waits until every rank has; the wait is
// bounded, and its failure names the ranks that never came.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

#include "common/common.h"

namespace tierzero::engine::comm_internal {

// Where the ranks meet, for messages: the launch variables and their values.
struct LaunchEnv {
  std::string master_addr;
  int master_port = 0;
  int world_size = 1;
  int rank = 0;
  // "MASTER_ADDR=... MASTER_PORT=... WORLD_SIZE=... RANK=..."
  std::string describe() const;
};

// The first line of a c10d exception's text (the rest is a stack trace).
std::string first_line(const char* text);

// What a rank whose peers did not arrive should check, naming `missing` (e.g. "rank 1", "ranks 1, 3").
std::string what_to_check(const LaunchEnv& env, const std::string& missing, std::chrono::milliseconds timeout);

// Waits until rank 0's store at env.master_addr:env.master_port accepts a TCP connection, trying
// every 50 ms until `deadline`: c10d's TCPStore client, left to wait for a rank 0 that never comes,
// retries for its timeout, then again, and prints LibTorch's stack. After 10 s it says once on
// stderr whom it waits for. kIo at the deadline: rank 0 never opened the store at ADDR:PORT,
// env.describe(), the last connection error and what_to_check(env, "rank 0", timeout).
Status wait_for_store_server(const LaunchEnv& env, std::chrono::steady_clock::time_point deadline,
                             std::chrono::milliseconds timeout);

// Checks this rank in at `store` and waits until all env.world_size ranks have, polling. After 10 s
// it says once on stderr whom it waits for. kIo at `deadline`: the missing ranks, env.describe()
// and what_to_check(env, ..., timeout); also kIo when the store fails (its error, and that rank 0
// may have exited).
Status wait_for_all_ranks(c10d::Store& store, const LaunchEnv& env, std::chrono::steady_clock::time_point deadline,
                          std::chrono::milliseconds timeout);

}  // namespace tierzero::engine::comm_internal
