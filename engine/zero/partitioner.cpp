#include "engine/zero/internal/partitioner.h"

#include <ATen/ATen.h>

#include <unordered_map>

#include "engine/zero/internal/flat_partitioner.h"
#include "engine/zero/internal/sharded_partitioner.h"

namespace tierzero::engine {

std::vector<std::vector<size_t>> unit_param_indices(const FunctionalModel& model) {
  std::unordered_map<std::string, size_t> index_of;
  std::vector<ParamSpec> params = all_params(model);
  for (size_t i = 0; i < params.size(); ++i) index_of[params[i].name] = i;
  std::vector<std::vector<size_t>> units(model.num_units());
  for (size_t u = 0; u < units.size(); ++u)
    for (const ParamSpec& spec : model.unit_params(u)) units[u].push_back(index_of.at(spec.name));
  return units;
}

at::Tensor Partitioner::gather_fp32_to_host(const at::Tensor& partition, Comm& comm) const {
  at::Tensor mine = partition.to(comm.device(), at::kFloat).contiguous();
  return (partitioned() ? gather_from_ranks(comm, mine) : mine).cpu();
}

at::Tensor gather_from_ranks(Comm& comm, at::Tensor mine) {
  if (comm.world_size() == 1) return mine;
  at::Tensor gathered = at::empty({comm.world_size() * mine.numel()}, mine.options());
  comm.all_gather(gathered, mine).wait();
  return gathered;
}

at::Tensor make_grad_partition(OffloadedGrads* landing, int64_t numel, const PartitionOptions& options, Comm& comm) {
  if (landing != nullptr) return landing->partition();
  return at::zeros({numel}, at::TensorOptions().dtype(options.grad_dtype).device(comm.device()));
}

void zero_grad_partition(OffloadedGrads* landing, at::Tensor& grads) {
  if (landing != nullptr) {
    landing->reset();
  } else {
    grads.zero_();
  }
}

std::unique_ptr<Partitioner> make_partitioner(const FunctionalModel& model, ParamSource& params,
                                              const PartitionOptions& options, Comm& comm, OffloadedHost host) {
  if (options.stage == 3) return std::make_unique<ShardedPartitioner>(model, params, options, comm, host);
  return std::make_unique<FlatPartitioner>(model, params, options, comm, host.grads);
}

}  // namespace tierzero::engine
