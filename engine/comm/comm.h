// The data-parallel process group: c10d's NCCL backend on CUDA devices, Gloo on the CPU.
//
// Launch: torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) with a
// c10d::TCPStore on MASTER_ADDR:MASTER_PORT, or a single process with none of them set. Tests may
// pass their own store (a FileStore in a temp dir). Without a backend (single()) every collective is
// a no-op.
// Rendezvous (from_env): every rank waits for all WORLD_SIZE ranks to check in at the store for at
// most TIERZERO_RENDEZVOUS_TIMEOUT seconds (default 300; rendezvous_timeout()), saying on stderr
// after 10 s whom it waits for; then it fails naming the missing ranks, the four variables' values
// and what to check — instead of hanging.
// Collectives are asynchronous: each returns a CommOp to wait on; buffers must stay alive until
// then. Every rank must issue the same collectives in the same order.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/common.h"

namespace tierzero::engine {

// The words Comm::create's error holds when the backend cannot form the group: the test helpers that
// launch ranks look for them before launching again.
inline constexpr std::string_view kGroupNotFormed = "cannot form the process group";

// A pending collective; an empty one (no backend) is already done.
class CommOp {
 public:
  CommOp() = default;
  explicit CommOp(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
  // Blocks until the collective has finished (on CUDA: until the current stream is ordered after
  // it). Throws tierzero::Error when the collective failed.
  void wait();

 private:
  c10::intrusive_ptr<c10d::Work> work_;
};

// How long from_env waits for every rank: TIERZERO_RENDEZVOUS_TIMEOUT seconds (a positive number,
// fractions allowed), else 300 s. kInvalidArgument names the variable when it is not such a number.
Result<std::chrono::milliseconds> rendezvous_timeout();

class Comm {
 public:
  // Joins the group torchrun's environment describes, for tensors on `device` (NCCL for CUDA,
  // Gloo otherwise); a single-rank Comm when WORLD_SIZE is unset or 1. kInvalidArgument names the
  // variable that is missing or malformed; kUnsupported when NCCL is asked for but not built;
  // kIo when the ranks do not all arrive within rendezvous_timeout() (the message names the
  // missing ranks, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and what to check).
  static Result<std::unique_ptr<Comm>> from_env(at::Device device);
  // Joins a group of `world_size` ranks that meet in `store`; builds the backend even for one rank
  // (tests exercise Gloo / NCCL that way). kIo when the backend cannot form the group: "cannot form
  // the process group", the backend's first line (no LibTorch stack) and what to check.
  static Result<std::unique_ptr<Comm>> create(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                                              at::Device device);
  // A group of one: collectives do nothing.
  static std::unique_ptr<Comm> single(at::Device device);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  at::Device device() const { return device_; }
  // "gloo", "nccl" or "none" (single()).
  std::string backend_name() const;

  // tensor = sum over ranks of tensor.
  CommOp all_reduce_sum(at::Tensor& tensor);
  // On rank `root`, tensor = sum over ranks; elsewhere tensor's content becomes undefined.
  CommOp reduce_sum(at::Tensor& tensor, int root);
  // output (n elements) = sum over ranks of input[rank * n, (rank + 1) * n).
  CommOp reduce_scatter_sum(at::Tensor& output, at::Tensor& input);
  // output[r * n, (r + 1) * n) = rank r's input (n elements). input must not alias output.
  CommOp all_gather(at::Tensor& output, at::Tensor& input);
  // tensor = rank root's tensor.
  CommOp broadcast(at::Tensor& tensor, int root);
  // Returns when every rank has called it.
  void barrier();

 private:
  Comm(c10::intrusive_ptr<c10d::Backend> backend, int rank, int world_size, at::Device device)
      : backend_(std::move(backend)), rank_(rank), world_size_(world_size), device_(device) {}
  c10::intrusive_ptr<c10d::Backend> backend_;  // null for single()
  int rank_ = 0;
  int world_size_ = 1;
  at::Device device_;
};

}  // namespace tierzero::engine
