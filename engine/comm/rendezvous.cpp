#include "engine/comm/internal/rendezvous.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace tierzero::engine::comm_internal {
namespace {

constexpr std::chrono::milliseconds kPollInterval{50};
constexpr std::chrono::seconds kSayWaitingAfter{10};
constexpr std::chrono::milliseconds kConnectAttempt{200};

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

// Connects to `address` within `limit`; "" when it accepted, else what failed ("Connection refused").
std::string try_connect(const addrinfo& address, std::chrono::milliseconds limit) {
  const int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, address.ai_protocol);
  if (fd < 0) return std::strerror(errno);
  int error = ::connect(fd, address.ai_addr, address.ai_addrlen) == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    pollfd waiting{.fd = fd, .events = POLLOUT, .revents = 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(limit.count()));
    socklen_t size = sizeof error;
    if (ready <= 0) {
      error = ready == 0 ? ETIMEDOUT : errno;
    } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
      error = errno;
    }
  }
  ::close(fd);
  return error == 0 ? std::string() : std::string(std::strerror(error));
}

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

Status wait_for_store_server(const LaunchEnv& env, std::chrono::steady_clock::time_point deadline,
                             std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  const std::string port = std::to_string(env.master_port);
  std::string last_error = "no attempt";
  bool said_waiting = false;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = ::getaddrinfo(env.master_addr.c_str(), port.c_str(), &hints, &found);
    if (resolved != 0) last_error = fmt::format("MASTER_ADDR does not resolve: {}", ::gai_strerror(resolved));
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const std::string error = try_connect(*a, std::clamp(left, std::chrono::milliseconds(1), kConnectAttempt));
      if (error.empty()) {
        ::freeaddrinfo(found);
        return Status();
      }
      last_error = error;
    }
    if (found != nullptr) ::freeaddrinfo(found);
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      return io_error(
          fmt::format("rank {}: rank 0 never opened the rendezvous store at {}:{} ({}): nothing accepted a "
                      "connection there ({}); {}",
                      env.rank, env.master_addr, env.master_port, env.describe(), last_error,
                      what_to_check(env, "rank 0", timeout)));
    if (!said_waiting && now - start >= kSayWaitingAfter) {
      std::fprintf(stderr,
                   "rank %d: waiting for rank 0's rendezvous store at %s:%d (%s; gives up after %g s, "
                   "TIERZERO_RENDEZVOUS_TIMEOUT)\n",
                   env.rank, env.master_addr.c_str(), env.master_port, env.describe().c_str(), seconds(timeout));
      said_waiting = true;
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(kPollInterval, deadline - now));
  }
}

Status wait_for_all_ranks(c10d::Store& store, const LaunchEnv& env, std::chrono::steady_clock::time_point deadline,
                          std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  bool said_waiting = false;
  try {
    std::vector<std::string> keys;
    for (int r = 0; r < env.world_size; ++r) keys.push_back(rank_key(r));
    store.set(rank_key(env.rank), std::vector<uint8_t>{1});
    while (!store.check(keys)) {  // one request a poll; the missing ranks are looked up only to say so
      const auto now = std::chrono::steady_clock::now();
      const auto waited = now - start;
      if (now >= deadline) {
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
