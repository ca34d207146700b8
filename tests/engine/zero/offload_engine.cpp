#include "offload_engine.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "scenario.h"

namespace tierzero::engine::testing {

namespace {

ModelConfig model_config(const OffloadEngineSpec& spec) {
  ModelConfig config = test_model_config(true);
  config.hidden_size *= spec.width;
  config.intermediate_size *= spec.width;
  config.head_dim *= spec.width;
  return config;
}

}  // namespace

OffloadEngine::OffloadEngine(const OffloadEngineSpec& spec)
    : comm(Comm::single(spec.cuda ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU))),
      model(make_causal_lm(model_config(spec))) {
  ZeroEngineOptions options;
  options.partition.stage = spec.stage;
  options.partition.compute_dtype = spec.compute;
  options.partition.grad_dtype = at::kFloat;
  options.partition.reduce_bucket_numel = 1000;
  options.offload_optimizer = true;
  options.optimizer_state_dtype = spec.state;
  options.sub_group_size = spec.sub_group;
  options.master_layout = spec.master;
  if (spec.round_away) options.params16_rounding = cpu_adam::Bf16Rounding::kNearestAway;
  options.optimizer_records_in_memory = spec.records_in_memory;
  options.pinned_memory_limit_bytes = spec.pinned_limit;
  options.offload_grad_dtype = spec.grads;
  options.gpu_optimizer_share = spec.gpu_share;
  if (spec.share_on_host)
    options.gpu_share_kernel = [](const cpu_adam::AdamHyperParams& hp, int64_t step, float grad_multiplier,
                                  const cpu_adam::AdamBuffers& buffers, void*) {
      return cpu_adam::step_portable(hp, step, grad_multiplier, buffers, cpu_adam::simd_target_mul_add());
    };
  options.gradient_clipping = 0.5;
  options.adam.weight_decay = 0.01;
  if (!spec.nvme_dir.empty())
    options.nvme_optimizer = {
        .paths = {spec.nvme_dir}, .buffer_count = 3, .pipeline_read = true, .pipeline_write = true, .io = {}};
  engine = std::make_unique<ZeroEngine>(*model, init_parameters(model_config(spec), 42, at::kFloat, at::kCPU),
                                        options, *comm);
}

double OffloadEngine::train_step(int step) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(500 + step);
  const at::Tensor tokens = at::randint(64, {2, 9}, gen, at::TensorOptions().dtype(at::kLong));
  const double loss = engine->forward_backward(tokens.narrow(1, 0, 8), tokens.narrow(1, 1, 8), 1.0);
  EXPECT_FALSE(engine->step(2e-2, 1.0).overflow);
  return loss;
}

OffloadEngine trained_master_twin(bool compact, const std::string& nvme_dir, int64_t sub_group, int steps) {
  OffloadEngine e({.stage = 3,
                   .compute = at::kBFloat16,
                   .nvme_dir = nvme_dir,
                   .master = compact ? MasterLayout::kCompact : MasterLayout::kFp32,
                   .round_away = !compact,
                   .sub_group = sub_group});
  for (int step = 0; step < steps; ++step) e.train_step(step);
  return e;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace tierzero::engine::testing
