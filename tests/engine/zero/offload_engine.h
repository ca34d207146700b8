// A one-rank ZeRO engine (on the CPU, or one GPU) with the optimizer offloaded (host state or NVMe), for the tests
// of the offloaded optimizers' state: the scenarios' tiny Llama from seed-42 weights, gradient
// clipping 0.5, AdamW with weight decay 0.01, sub-groups of 3000 elements (the stage 3 shard of
// 17568 elements in 6), reduce buckets of 1000 elements; on NVMe, 3 buffers.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "engine/comm/comm.h"
#include "engine/model/functional_model.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::testing {

struct OffloadEngineSpec {
  int stage = 2;
  at::ScalarType compute = at::kFloat;
  at::ScalarType state = at::kFloat;  // ZeroEngineOptions::optimizer_state_dtype
  std::string nvme_dir;               // the swap files' directory; empty: state in host memory
  bool cuda = false;                  // compute on CUDA device 0 (the optimizer stays offloaded)
  MasterLayout master = MasterLayout::kFp32;  // ZeroEngineOptions::master_layout
  bool round_away = false;                    // ZeroEngineOptions::params16_rounding kNearestAway
  int64_t sub_group = 3000;                   // ZeroEngineOptions::sub_group_size
  int64_t records_in_memory = 0;              // ZeroEngineOptions::optimizer_records_in_memory
  uint64_t pinned_limit = 0;                  // ZeroEngineOptions::pinned_memory_limit_bytes
  at::ScalarType grads = at::kFloat;          // ZeroEngineOptions::offload_grad_dtype
  int64_t width = 1;                          // the tiny Llama's hidden, intermediate and head sizes times this
  double gpu_share = 0.0;                     // ZeroEngineOptions::gpu_optimizer_share
  // The share's kernel: cpu_adam::step_portable with the CPU's multiply-add rounding (a CPU engine's
  // share, on the host queue); false: step_on_gpu on the CUDA device.
  bool share_on_host = false;
};

struct OffloadEngine {
  std::unique_ptr<Comm> comm;
  std::unique_ptr<FunctionalModel> model;
  std::unique_ptr<ZeroEngine> engine;

  explicit OffloadEngine(const OffloadEngineSpec& spec);
  // One optimizer step (learning rate 2e-2) on batch `step`: two samples of 8 tokens drawn from a
  // generator seeded by `step`. Returns the loss.
  double train_step(int step);
  AdamPartitionState& state() { return engine->optimizer().state(); }
};

// A stage 3 bf16 engine with a compact master, or its fp32-master twin (16-bit weights rounded ties
// away, as the compact master's bf16 half is, so the two runs are the same bit for bit), its state
// on NVMe in `nvme_dir` (empty: host memory), in sub-groups of `sub_group`, after `steps` steps.
OffloadEngine trained_master_twin(bool compact, const std::string& nvme_dir, int64_t sub_group, int steps);

// The bytes of the file at `path` (a failed test when it cannot be read).
std::string file_bytes(const std::string& path);

}  // namespace tierzero::engine::testing
