#include "engine/zero/internal/sharded_grad_reducer.h"

#include <ATen/ATen.h>

#include "engine/zero/internal/partitioner.h"

namespace tierzero::engine {

ShardedGradReducer::ShardedGradReducer(const ShardedLayout& layout, int64_t bucket_numel, at::ScalarType grad_dtype,
                                       Comm& comm, at::Tensor grad_shard, OffloadedGrads* landing)
    : layout_(layout),
      bucket_numel_(std::max<int64_t>(bucket_numel, 1)),
      grad_dtype_(grad_dtype),
      comm_(comm),
      grad_shard_(std::move(grad_shard)),
      landing_(landing) {}

void ShardedGradReducer::add(size_t slot, const at::Tensor& grad) {
  const ShardSlot& param = layout_.slots[slot];
  auto it = entry_of_slot_.find(slot);
  if (it == entry_of_slot_.end()) {
    if (open_numel_ > 0 && open_numel_ + param.numel > bucket_numel_) launch();
    const int world = layout_.world_size;
    Entry entry{slot, at::Tensor()};
    if (world == 1 && grad.defined() && grad.scalar_type() == grad_dtype_ && grad.is_contiguous() &&
        grad.device() == comm_.device()) {
      entry.padded = grad.view({1, param.shard_numel});  // one rank pads nothing: the gradient is its row
    } else {
      entry.padded = at::zeros({world, param.shard_numel}, at::TensorOptions().dtype(grad_dtype_).device(comm_.device()));
      if (grad.defined()) entry.padded.view(-1).narrow(0, 0, param.numel).copy_(grad.reshape(-1));
    }
    entry_of_slot_[slot] = open_.size();
    open_.push_back(std::move(entry));
    open_numel_ += param.numel;
  } else if (grad.defined()) {
    open_[it->second].padded.view(-1).narrow(0, 0, param.numel).add_(grad.reshape(-1));
  }
}

void ShardedGradReducer::launch() {
  if (open_.empty()) return;
  Launched launched;
  std::vector<at::Tensor> columns;
  for (Entry& entry : open_) {
    launched.slots.push_back(entry.slot);
    columns.push_back(std::move(entry.padded));
  }
  open_.clear();
  entry_of_slot_.clear();
  open_numel_ = 0;
  // [W, row]: row r is rank r's shard of every parameter, in column order.
  launched.input = columns.size() == 1 ? columns[0].view(-1) : at::cat(columns, 1).view(-1);
  columns.clear();
  if (layout_.world_size == 1) {
    launched.output = launched.input;  // the sum over one rank is its own row
  } else {
    launched.output = at::empty({launched.input.numel() / layout_.world_size}, launched.input.options());
    launched.op = comm_.reduce_scatter_sum(launched.output, launched.input);
  }
  launched.lands = landing_ == nullptr || landing_->lands_now();
  ++reduce_scatters_;
  launched_.push_back(std::move(launched));
  while (launched_.size() > max_buckets_in_flight(layout_.world_size)) {
    complete(launched_.front());
    launched_.pop_front();
  }
}

void ShardedGradReducer::complete(Launched& launched) {
  launched.op.wait();
  std::vector<LandingRun> runs;  // each slot's shard: its column of the output, its place in the shard
  int64_t column = 0;
  for (size_t slot : launched.slots) {
    const ShardSlot& param = layout_.slots[slot];
    runs.push_back({param.shard_offset, column, param.shard_numel});
    column += param.shard_numel;
  }
  if (landing_ != nullptr) {
    landing_->take(launched.output, std::move(runs), launched.lands);
    return;
  }
  at::Tensor summed = launched.output.to(grad_shard_.device());
  for (const LandingRun& run : runs)
    grad_shard_.narrow(0, run.partition_offset, run.numel)
        .add_(summed.narrow(0, run.source_offset, run.numel), 1.0 / layout_.world_size);
}

void ShardedGradReducer::finish() {
  launch();
  for (Launched& launched : launched_) complete(launched);
  launched_.clear();
}

}  // namespace tierzero::engine
