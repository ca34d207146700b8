#include "engine/zero/sharded_partitioner.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace tierzero::engine {
namespace {

// Units whose gradients are being reduce-scattered at once; bounds the memory backward holds.
constexpr size_t kMaxReductionsInFlight = 2;

}  // namespace

ShardedPartitioner::ShardedPartitioner(const FunctionalModel& model,
                                       const std::map<std::string, at::Tensor>& params,
                                       const PartitionOptions& options, Comm& comm)
    : options_(options), comm_(comm) {
  const ParamNamesAndShapes table = param_names_and_shapes(model);
  layout_ = make_sharded_layout(table.names, table.shapes, comm.world_size());
  unit_params_ = unit_param_indices(model);
  at::TensorOptions compute = at::TensorOptions().dtype(options.compute_dtype).device(comm.device());
  shard_params_ = partition_of(params, comm.device()).to(options.compute_dtype);
  for (const ShardSlot& slot : layout_.slots) {
    bool persistent = slot.numel <= options.persistence_threshold;
    persistent_.push_back(persistent);
    persistent_params_.push_back(persistent ? params.at(slot.name).to(compute).view(slot.shape).clone()
                                            : at::Tensor());
  }
  grad_shard_ = at::zeros({layout_.shard_numel},
                          at::TensorOptions().dtype(options.grad_dtype).device(options.grad_device));
  ready_.resize(model.num_units());
  in_use_.resize(model.num_units());
}

std::vector<int64_t> ShardedPartitioner::columns(const std::vector<size_t>& slots, int64_t* total) const {
  std::vector<int64_t> cols;
  *total = 0;
  for (size_t slot : slots) {
    cols.push_back(*total);
    *total += layout_.slots[slot].shard_numel;
  }
  return cols;
}

std::vector<size_t> ShardedPartitioner::gathered_slots(size_t unit) const {
  std::vector<size_t> slots;
  for (size_t slot : unit_params_[unit])
    if (!persistent_[slot]) slots.push_back(slot);
  return slots;
}

ShardedPartitioner::Gather ShardedPartitioner::start_gather(size_t unit) {
  std::vector<size_t> slots = gathered_slots(unit);
  Gather gather;
  if (slots.empty()) return gather;
  std::vector<at::Tensor> pieces;
  for (size_t slot : slots)
    pieces.push_back(shard_params_.narrow(0, layout_.slots[slot].shard_offset, layout_.slots[slot].shard_numel));
  at::Tensor mine = at::cat(pieces);
  gather.numel = mine.numel() * layout_.world_size;
  gather.gathered = at::empty({gather.numel}, mine.options());
  gather.op = comm_.all_gather(gather.gathered, mine);
  live_gathered_numel_ += gather.numel;
  return gather;
}

void ShardedPartitioner::prefetch_after(size_t position) {
  prefetch_cursor_ = std::max(prefetch_cursor_, position + 1);
  int64_t ahead = 0;
  for (size_t p = position + 1; p < prefetch_cursor_; ++p)
    for (size_t slot : gathered_slots(trace_[p])) ahead += layout_.slots[slot].numel;
  while (prefetch_cursor_ < trace_.size() && ahead < options_.prefetch_numel) {
    size_t unit = trace_[prefetch_cursor_++];
    ready_[unit].push_back(start_gather(unit));
    for (size_t slot : gathered_slots(unit)) ahead += layout_.slots[slot].numel;
  }
}

std::vector<at::Tensor> ShardedPartitioner::fetch(size_t unit) {
  if (recording_) {
    trace_.push_back(unit);
  } else if (trace_cursor_ < trace_.size() && trace_[trace_cursor_] == unit) {
    prefetch_after(trace_cursor_++);
  } else {
    trace_cursor_ = trace_.size();  // off the recorded order: no prefetching until the next step
  }
  Gather gather;
  if (!ready_[unit].empty()) {
    gather = std::move(ready_[unit].front());
    ready_[unit].pop_front();
  } else {
    gather = start_gather(unit);
  }
  gather.op.wait();

  std::vector<size_t> slots = gathered_slots(unit);
  int64_t row = 0;
  std::vector<int64_t> cols = columns(slots, &row);
  at::Tensor by_rank = gather.gathered.defined() ? gather.gathered.view({layout_.world_size, row}) : at::Tensor();
  std::vector<at::Tensor> params;
  size_t next_gathered = 0;
  for (size_t slot_index : unit_params_[unit]) {
    const ShardSlot& slot = layout_.slots[slot_index];
    if (persistent_[slot_index]) {
      params.push_back(persistent_params_[slot_index]);
      continue;
    }
    at::Tensor columns_of_slot = by_rank.narrow(1, cols[next_gathered++], slot.shard_numel);
    params.push_back(columns_of_slot.reshape(-1).narrow(0, 0, slot.numel).view(slot.shape));
  }
  in_use_[unit] = params;
  live_gathered_numel_ -= gather.numel;
  return params;
}

void ShardedPartitioner::release(size_t unit) { in_use_[unit].clear(); }

void ShardedPartitioner::reduce_grads(size_t unit, std::vector<at::Tensor> grads) {
  const std::vector<size_t>& slots = unit_params_[unit];
  int64_t row = 0;
  std::vector<int64_t> cols = columns(slots, &row);
  const int world = layout_.world_size;
  Reduction reduction;
  reduction.unit = unit;
  reduction.input = at::zeros({world, row}, shard_params_.options().dtype(options_.grad_dtype));
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i >= grads.size() || !grads[i].defined()) continue;
    const ShardSlot& slot = layout_.slots[slots[i]];
    at::Tensor padded = at::constant_pad_nd(grads[i].reshape(-1), {0, world * slot.shard_numel - slot.numel});
    reduction.input.narrow(1, cols[i], slot.shard_numel).copy_(padded.view({world, slot.shard_numel}));
  }
  reduction.input = reduction.input.view({-1});
  reduction.output = at::empty({row}, reduction.input.options());
  reduction.op = comm_.reduce_scatter_sum(reduction.output, reduction.input);
  reductions_.push_back(std::move(reduction));
  while (reductions_.size() > kMaxReductionsInFlight) {
    complete(reductions_.front());
    reductions_.pop_front();
  }
}

void ShardedPartitioner::complete(Reduction& reduction) {
  reduction.op.wait();
  const std::vector<size_t>& slots = unit_params_[reduction.unit];
  int64_t row = 0;
  std::vector<int64_t> cols = columns(slots, &row);
  at::Tensor summed = reduction.output.to(options_.grad_device);
  for (size_t i = 0; i < slots.size(); ++i) {
    const ShardSlot& slot = layout_.slots[slots[i]];
    grad_shard_.narrow(0, slot.shard_offset, slot.shard_numel)
        .add_(summed.narrow(0, cols[i], slot.shard_numel), 1.0 / layout_.world_size);
  }
}

void ShardedPartitioner::finish_reduction() {
  for (Reduction& reduction : reductions_) complete(reduction);
  reductions_.clear();
}

void ShardedPartitioner::publish_compute_partition() {
  // Gathers issued ahead hold the old values; no prefetch crosses a step, but be exact anyway.
  for (std::deque<Gather>& queue : ready_) {
    for (Gather& gather : queue) {
      gather.op.wait();
      live_gathered_numel_ -= gather.numel;
    }
    queue.clear();
  }
  recording_ = false;
  trace_cursor_ = 0;
  prefetch_cursor_ = 0;

  std::vector<size_t> slots;
  for (size_t s = 0; s < layout_.slots.size(); ++s)
    if (persistent_[s]) slots.push_back(s);
  if (slots.empty()) return;
  int64_t row = 0;
  std::vector<int64_t> cols = columns(slots, &row);
  std::vector<at::Tensor> pieces;
  for (size_t slot : slots)
    pieces.push_back(shard_params_.narrow(0, layout_.slots[slot].shard_offset, layout_.slots[slot].shard_numel));
  at::Tensor mine = at::cat(pieces);
  at::Tensor gathered = at::empty({layout_.world_size * row}, mine.options());
  comm_.all_gather(gathered, mine).wait();
  at::Tensor by_rank = gathered.view({layout_.world_size, row});
  for (size_t i = 0; i < slots.size(); ++i) {
    const ShardSlot& slot = layout_.slots[slots[i]];
    at::Tensor whole = by_rank.narrow(1, cols[i], slot.shard_numel).reshape(-1).narrow(0, 0, slot.numel);
    persistent_params_[slots[i]].view(-1).copy_(whole);
  }
}

at::Tensor ShardedPartitioner::partition_of(const std::map<std::string, at::Tensor>& full,
                                            at::Device device) const {
  at::Tensor shard = at::zeros({layout_.shard_numel}, at::kFloat);
  const int rank = comm_.rank();
  for (const ShardSlot& slot : layout_.slots) {
    int64_t valid = layout_.valid_numel(slot, rank);
    if (valid == 0) continue;
    at::Tensor flat = full.at(slot.name).reshape(-1);
    shard.narrow(0, slot.shard_offset, valid).copy_(flat.narrow(0, rank * slot.shard_numel, valid));
  }
  return shard.to(device);
}

std::map<std::string, at::Tensor> ShardedPartitioner::assemble(const at::Tensor& partition) {
  at::Tensor mine = partition.to(comm_.device(), at::kFloat).contiguous();
  at::Tensor gathered = at::empty({layout_.world_size * layout_.shard_numel}, mine.options());
  comm_.all_gather(gathered, mine).wait();
  at::Tensor by_rank = gathered.cpu().view({layout_.world_size, layout_.shard_numel});
  std::map<std::string, at::Tensor> full;
  for (const ShardSlot& slot : layout_.slots)
    full[slot.name] = by_rank.narrow(1, slot.shard_offset, slot.shard_numel)
                          .reshape(-1)
                          .narrow(0, 0, slot.numel)
                          .view(slot.shape)
                          .clone();
  return full;
}

}  // namespace tierzero::engine
