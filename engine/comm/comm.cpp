#include "engine/comm/comm.h"

#include "engine/comm/internal/rendezvous.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef TIERZERO_ENGINE_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace tierzero::engine {
namespace {

constexpr std::chrono::minutes kCollectiveTimeout{10};
constexpr std::chrono::seconds kDefaultRendezvousTimeout{300};

Result<int> env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 65535)
    return invalid_argument(std::string("environment variable ") + name + "='" + text +
                            "' is not a non-negative integer; set it as torchrun does");
  return static_cast<int>(value);
}

}  // namespace

Result<std::chrono::milliseconds> rendezvous_timeout() {
  const char* text = std::getenv("TIERZERO_RENDEZVOUS_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::chrono::milliseconds(kDefaultRendezvousTimeout);
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (*end != '\0' || !(value > 0) || value > 1e7)
    return invalid_argument(std::string("TIERZERO_RENDEZVOUS_TIMEOUT='") + text +
                            "' is not a number of seconds above 0 (and at most 1e7); e.g. 600");
  return std::chrono::milliseconds(static_cast<int64_t>(value * 1000.0 + 0.5));
}

void CommOp::wait() {
  if (!work_) return;
  try {
    work_->wait();
  } catch (const std::exception& e) {
    throw Error(
        internal_error(std::string("collective failed: ") + e.what() + " (another rank may have died; see its log)"));
  }
  work_.reset();
}

Result<std::unique_ptr<Comm>> Comm::from_env(at::Device device) {
  TZ_ASSIGN_OR_RETURN(int world_size, env_int("WORLD_SIZE", 1));
  if (world_size <= 1) return single(device);
  TZ_ASSIGN_OR_RETURN(int rank, env_int("RANK", -1));
  if (rank < 0 || rank >= world_size)
    return invalid_argument("RANK is unset or not below WORLD_SIZE=" + std::to_string(world_size) +
                            "; launch with torchrun or set RANK for every process");
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0')
    return invalid_argument("MASTER_ADDR is unset (rank " + std::to_string(rank) +
                            "); set it to rank 0's host, e.g. 127.0.0.1");
  TZ_ASSIGN_OR_RETURN(int port, env_int("MASTER_PORT", -1));
  if (port <= 0) return invalid_argument("MASTER_PORT is unset (rank " + std::to_string(rank) + ")");
  const comm_internal::LaunchEnv env{.master_addr = addr, .master_port = port, .world_size = world_size, .rank = rank};
  TZ_ASSIGN_OR_RETURN(const std::chrono::milliseconds timeout, rendezvous_timeout());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A client starts c10d's store only once rank 0's accepts connections, so that no c10d retry
  // loop runs past the deadline.
  if (rank != 0) TZ_RETURN_IF_ERROR(comm_internal::wait_for_store_server(env, deadline, timeout));
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = rank == 0;
  options.numWorkers = world_size;
  options.waitWorkers = false;  // wait_for_all_ranks waits, bounded, and names who is missing
  // A client's connection attempts to rank 0's store (open by now): what is left of the timeout.
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  options.timeout = std::max(left, std::chrono::milliseconds(1));
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    if (rank == 0)
      return io_error("rank 0: cannot open the rendezvous store on port " + std::to_string(port) + " (" +
                      env.describe() + "): " + comm_internal::first_line(e.what()) +
                      "; another job may hold MASTER_PORT: pick a free one for every rank");
    return io_error("rank " + std::to_string(rank) + ": rank 0 never opened the rendezvous store at " + addr + ":" +
                    std::to_string(port) + " (" + env.describe() + "): " + comm_internal::first_line(e.what()) + "; " +
                    comm_internal::what_to_check(env, "rank 0", timeout));
  }
  TZ_RETURN_IF_ERROR(comm_internal::wait_for_all_ranks(*store, env, deadline, timeout));
  store->setTimeout(kCollectiveTimeout);
  return create(std::move(store), rank, world_size, device);
}

Result<std::unique_ptr<Comm>> Comm::create(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                                           at::Device device) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return invalid_argument("rank " + std::to_string(rank) + " of world size " + std::to_string(world_size) +
                            " is out of range");
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    if (device.is_cuda()) {
#ifdef TIERZERO_ENGINE_CUDA
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = kCollectiveTimeout;
      backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
#else
      return unsupported("rank " + std::to_string(rank) +
                         ": this build has no NCCL; rebuild with CUDA or train on the CPU");
#endif
    } else {
      auto options = c10d::ProcessGroupGloo::Options::create_default(kCollectiveTimeout);
      backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
    }
  } catch (const std::exception& e) {
    const char* check =
        device.is_cuda()
            ? "NCCL_DEBUG=INFO prints what NCCL tried; NCCL_SOCKET_IFNAME names the interface it uses"
            : "a peer may have exited or failed as the group formed (see its output), or the ranks cannot reach "
              "each other on the interface Gloo took from this host's name: set GLOO_SOCKET_IFNAME to one every "
              "rank reaches (lo when all run on this machine)";
    return io_error("rank " + std::to_string(rank) + " of " + std::to_string(world_size) + ": " +
                    std::string(kGroupNotFormed) + ": " + comm_internal::first_line(e.what()) + "; " + check);
  }
  return std::unique_ptr<Comm>(new Comm(std::move(backend), rank, world_size, device));
}

std::unique_ptr<Comm> Comm::single(at::Device device) { return std::unique_ptr<Comm>(new Comm(nullptr, 0, 1, device)); }

std::string Comm::backend_name() const { return backend_ ? backend_->getBackendName() : "none"; }

CommOp Comm::all_reduce_sum(at::Tensor& tensor) {
  if (!backend_) return {};
  std::vector<at::Tensor> tensors{tensor};
  return CommOp(backend_->allreduce(tensors));
}

CommOp Comm::reduce_sum(at::Tensor& tensor, int root) {
  if (!backend_) return {};
  std::vector<at::Tensor> tensors{tensor};
  c10d::ReduceOptions options;
  options.rootRank = root;
  return CommOp(backend_->reduce(tensors, options));
}

CommOp Comm::reduce_scatter_sum(at::Tensor& output, at::Tensor& input) {
  if (!backend_) {
    output.copy_(input);
    return {};
  }
  return CommOp(backend_->_reduce_scatter_base(output, input));
}

CommOp Comm::all_gather(at::Tensor& output, at::Tensor& input) {
  if (!backend_) {
    output.copy_(input);
    return {};
  }
  return CommOp(backend_->_allgather_base(output, input));
}

CommOp Comm::broadcast(at::Tensor& tensor, int root) {
  if (!backend_) return {};
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return CommOp(backend_->broadcast(tensors, options));
}

void Comm::barrier() {
  if (backend_) CommOp(backend_->barrier()).wait();
}

}  // namespace tierzero::engine
