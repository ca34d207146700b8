#include "engine/zero/internal/flat_partitioner.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "engine/zero/internal/param_loading.h"

namespace tierzero::engine {

FlatPartitioner::FlatPartitioner(const FunctionalModel& model, ParamSource& params, const PartitionOptions& options,
                                 Comm& comm, OffloadedGrads* landing)
    : options_(options), comm_(comm), landing_(landing) {
  layout_ = make_flat_group_layout(all_params(model), options.stage, comm.world_size());
  unit_params_ = unit_param_indices(model);
  flat_params_ =
      at::zeros({layout_.padded_numel}, at::TensorOptions().dtype(options.compute_dtype).device(comm.device()));
  for (const FlatSlot& slot : layout_.slots) {
    at::Tensor flat = flat_params_.narrow(0, slot.offset, slot.numel);
    load_param_range(params, slot.name, 0, flat);
    param_views_.push_back(flat.view(slot.shape));
  }
  grad_partition_ = make_grad_partition(landing, layout_.partition_numel, options, comm);
  make_buckets();
}

void FlatPartitioner::make_buckets() {
  bucket_of_slot_.assign(layout_.slots.size(), 0);
  for (size_t i = layout_.slots.size(); i-- > 0;) {
    const FlatSlot& slot = layout_.slots[i];
    bool fits =
        !buckets_.empty() && buckets_.back().end - slot.offset <= std::max<int64_t>(options_.reduce_bucket_numel, 1);
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().end = slot.offset + slot.numel;
    }
    buckets_.back().begin = slot.offset;
    bucket_of_slot_[i] = buckets_.size() - 1;
  }
  for (const std::vector<size_t>& slots : unit_params_)
    for (size_t slot : slots) ++buckets_[bucket_of_slot_[slot]].expected_arrivals;
}

std::vector<at::Tensor> FlatPartitioner::fetch(size_t unit) {
  const int64_t begin = own_begin();
  std::vector<at::Tensor> params;
  for (size_t slot : unit_params_[unit]) {
    const FlatSlot& param = layout_.slots[slot];
    pending_writes_.order_range(param.offset - begin, param.offset + param.numel - begin);
    params.push_back(param_views_[slot]);
  }
  return params;
}

void FlatPartitioner::reduce_grads(size_t unit, std::vector<at::Tensor> grads) {
  const std::vector<size_t>& slots = unit_params_[unit];
  for (size_t i = 0; i < slots.size(); ++i) {
    const FlatSlot& slot = layout_.slots[slots[i]];
    size_t b = bucket_of_slot_[slots[i]];
    Bucket& bucket = buckets_[b];
    if (bucket.in_flight) {  // still reducing the previous micro-batch's sum
      complete(b);
      in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), b));
    }
    if (!bucket.sum.defined())
      bucket.sum = at::zeros({bucket.end - bucket.begin}, flat_params_.options().dtype(options_.grad_dtype));
    if (i < grads.size() && grads[i].defined())
      bucket.sum.narrow(0, slot.offset - bucket.begin, slot.numel).add_(grads[i].reshape(-1));
    if (++bucket.arrivals == bucket.expected_arrivals) launch(b);
  }
}

void FlatPartitioner::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  if (options_.stage < 2) {
    bucket.ops.push_back(comm_.all_reduce_sum(bucket.sum));
  } else {
    for (int r = 0; r < layout_.partition_count; ++r) {
      int64_t lo = std::max(bucket.begin, layout_.partition_begin(r));
      int64_t hi = std::min(bucket.end, layout_.partition_begin(r) + layout_.partition_numel);
      if (lo >= hi) continue;
      at::Tensor piece = bucket.sum.narrow(0, lo - bucket.begin, hi - lo);
      bucket.ops.push_back(comm_.reduce_sum(piece, r));
    }
  }
  bucket.in_flight = true;
  bucket.lands = landing_ == nullptr || landing_->lands_now();
  in_flight_.push_back(b);
  while (in_flight_.size() > max_buckets_in_flight(comm_.world_size())) {
    complete(in_flight_.front());
    in_flight_.pop_front();
  }
}

void FlatPartitioner::complete(size_t b) {
  Bucket& bucket = buckets_[b];
  for (CommOp& op : bucket.ops) op.wait();
  bucket.ops.clear();
  const int64_t begin = own_begin();
  int64_t lo = std::max(bucket.begin, begin);
  int64_t hi = std::min(bucket.end, begin + layout_.partition_numel);
  if (lo < hi && landing_ != nullptr) {
    landing_->take(bucket.sum.narrow(0, lo - bucket.begin, hi - lo), {{lo - begin, 0, hi - lo}}, bucket.lands);
  } else if (lo < hi) {
    grad_partition_.narrow(0, lo - begin, hi - lo)
        .add_(bucket.sum.narrow(0, lo - bucket.begin, hi - lo), 1.0 / comm_.world_size());
  }
  bucket.sum = at::Tensor();
  bucket.arrivals = 0;
  bucket.in_flight = false;
}

void FlatPartitioner::finish_reduction() {
  for (size_t b : in_flight_) complete(b);
  in_flight_.clear();
  if (landing_ != nullptr) landing_->drain();
  for (const Bucket& bucket : buckets_)
    if (bucket.arrivals != 0)
      throw Error(internal_error("rank " + std::to_string(comm_.rank()) + ": gradient bucket [" +
                                 std::to_string(bucket.begin) + ", " + std::to_string(bucket.end) + ") got " +
                                 std::to_string(bucket.arrivals) + " of " + std::to_string(bucket.expected_arrivals) +
                                 " gradients: a unit's backward did not run"));
}

at::Tensor FlatPartitioner::compute_partition() {
  pending_writes_.order_all();
  return flat_params_.narrow(0, own_begin(), layout_.partition_numel);
}

void FlatPartitioner::publish_compute_partition() {
  if (layout_.partition_count == 1) return;
  at::Tensor mine = compute_partition().clone();
  comm_.all_gather(flat_params_, mine).wait();
}

std::map<std::string, at::Tensor> FlatPartitioner::assemble(const at::Tensor& partition) {
  const at::Tensor flat = gather_fp32_to_host(partition, comm_);
  std::map<std::string, at::Tensor> full;
  for (const FlatSlot& slot : layout_.slots)
    full[slot.name] = flat.narrow(0, slot.offset, slot.numel).view(slot.shape).clone();
  return full;
}

std::vector<PartitionRun> FlatPartitioner::locate(const std::string& name, int64_t first, int64_t count) const {
  return engine::locate(layout_, slot_named(layout_.slots, name), first, count);
}

}  // namespace tierzero::engine
