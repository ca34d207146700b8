#include "engine/zero/internal/sharded_partitioner.h"

#include <ATen/ATen.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstddef>

#include "engine/zero/internal/param_loading.h"

namespace tierzero::engine {
namespace {

// Parameter `param`, flat and without its padding, out of `by_rank` ([W, row]: row r holds rank r's
// pieces, `param`'s from `column` on). Rank r's piece is elements [r * shard_numel, ...) of the
// padded parameter.
at::Tensor unpadded_whole(const at::Tensor& by_rank, const ShardSlot& param, int64_t column) {
  return by_rank.narrow(1, column, param.shard_numel).reshape(-1).narrow(0, 0, param.numel);
}

}  // namespace

ShardedPartitioner::ShardedPartitioner(const FunctionalModel& model, ParamSource& params,
                                       const PartitionOptions& options, Comm& comm, OffloadedHost host)
    : options_(options),
      comm_(comm),
      layout_(make_sharded_layout(all_params(model), comm.world_size())),
      unit_params_(unit_param_indices(model)),
      host_(host),
      grad_shard_(make_grad_partition(host.grads, layout_.shard_numel, options, comm)),
      reducer_(layout_, options.reduce_bucket_numel, options.grad_dtype, comm, grad_shard_, host.grads),
      slots_(layout_.slots.size()),
      uses_(layout_.slots.size()),
      position_of_unit_(model.num_units(), kNone) {
  at::TensorOptions compute = at::TensorOptions().dtype(options.compute_dtype).device(comm.device());
  if (options.offload_params && host.copies == nullptr)
    throw Error(internal_error("offloaded parameters without device copies"));
  if (host.nvme_params != nullptr) {
    if (!options.offload_params) throw Error(internal_error("parameters on NVMe without offload_params"));
    nvme_ = host.nvme_params;
    nvme_->write_all([&](int64_t begin, const at::Tensor& window) {
      window.zero_();  // the padding
      load_partition_range(params, model, *this, comm.rank(), begin, window);
    });
  } else if (options.offload_params && options.pin_offloaded_params && host.tier != nullptr) {
    shard_params_ = host.tier->buffer(PinnedRole::kParamShard, options.compute_dtype);  // zero-filled
  } else {
    shard_params_ =
        at::zeros({layout_.shard_numel}, compute.device(options.offload_params ? at::Device(at::kCPU) : comm.device()));
  }
  if (host.shard_from_master && (nvme_ != nullptr || !shard_params_.is_cpu()))
    throw Error(internal_error("a parameter shard written by the master's split must be in host memory"));
  if (nvme_ == nullptr && !host.shard_from_master)
    load_partition_range(params, model, *this, comm.rank(), 0, shard_params_);
  for (const ShardSlot& slot : layout_.slots) {
    bool persistent = slot.numel <= options.persistence_threshold;
    persistent_.push_back(persistent);
    at::Tensor whole;
    if (persistent) {
      whole = at::empty({slot.numel}, compute);
      load_param_range(params, slot.name, 0, whole);
    }
    persistent_params_.push_back(persistent ? whole.view(slot.shape) : at::Tensor());
  }
}

ShardedPartitioner::Stats ShardedPartitioner::stats() const {
  return Stats{.live_numel = live_numel_,
               .peak_live_numel = peak_live_numel_,
               .all_gathers = all_gathers_,
               .reduce_scatters = reducer_.reduce_scatters()};
}

// ---- Gathering and freeing ---------------------------------------------------------------------

std::vector<size_t> ShardedPartitioner::missing_slots(size_t unit) const {
  std::vector<size_t> missing;
  for (size_t slot : unit_params_[unit])
    if (!persistent_[slot] && slots_[slot].residency == Residency::kSharded &&
        std::find(missing.begin(), missing.end(), slot) == missing.end())
      missing.push_back(slot);
  return missing;
}

int64_t ShardedPartitioner::numel_of(const std::vector<size_t>& slots) const {
  int64_t numel = 0;
  for (size_t slot : slots) numel += layout_.slots[slot].numel;
  return numel;
}

at::Tensor ShardedPartitioner::empty_row(const std::vector<size_t>& slots) const {
  int64_t numel = 0;
  for (size_t slot : slots) numel += layout_.slots[slot].shard_numel;
  return at::empty({numel}, at::TensorOptions().dtype(options_.compute_dtype).device(comm_.device()));
}

bool ShardedPartitioner::uses(size_t unit, size_t slot) const {
  return std::find(unit_params_[unit].begin(), unit_params_[unit].end(), slot) != unit_params_[unit].end();
}

void ShardedPartitioner::order_reads(const std::vector<size_t>& slots) {
  await_written(shard_end(slots));
  for (size_t slot : slots) {
    const ShardSlot& param = layout_.slots[slot];
    pending_writes_.order_range(param.shard_offset, param.shard_offset + param.shard_numel);
  }
}

ShardedPartitioner::GatherInput ShardedPartitioner::gather_input(const std::vector<size_t>& slots) {
  order_reads(slots);
  const std::vector<std::pair<int64_t, int64_t>> ranges = shard_ranges(layout_, slots);
  GatherInput input;
  if (nvme_ != nullptr) {
    input.mine = empty_row(slots);
    input.copied = read_now(ranges, input.mine);
    return input;
  }
  if (!options_.offload_params) {
    std::vector<at::Tensor> pieces;
    for (const auto& [begin, end] : ranges) pieces.push_back(shard_params_.narrow(0, begin, end - begin));
    input.mine = pieces.empty() ? empty_row(slots) : at::cat(pieces);  // one kernel
    return input;
  }
  // Offloaded (pinned or pageable): on the side stream, one copy per run of the shard; in stream
  // order, the last copy's completion is all of theirs.
  input.mine = empty_row(slots);  // shard_params_ holds the compute dtype
  int64_t filled = 0;
  for (const auto& [begin, end] : ranges) {
    input.copied = host_.copies->to_device(input.mine.narrow(0, filled, end - begin),
                                           shard_params_.narrow(0, begin, end - begin).const_data_ptr());
    filled += end - begin;
  }
  return input;
}

void ShardedPartitioner::start_gather(const std::vector<size_t>& slots) {
  Gather gather;
  gather.id = next_gather_id_++;
  std::vector<ParamReadPiece> pieces;
  if (nvme_ != nullptr) pieces = nvme_->cut(shard_ranges(layout_, slots));
  if (!pieces.empty() && pieces.size() <= static_cast<size_t>(nvme_->buffer_count())) {  // read now, land later
    order_reads(slots);
    for (uint64_t holder : nvme_->holders_of_next(pieces)) land(holder);
    gather.mine = empty_row(slots);
    gather.read = nvme_->start_read(std::move(pieces), gather.id);
  } else {
    GatherInput input = gather_input(slots);
    gather.mine = input.mine;
    gather.input = std::move(input.copied);
    issue_all_gather(gather);
  }
  gather.slots = slots;
  for (size_t slot : slots) {
    slots_[slot].residency = Residency::kGathering;
    slots_[slot].gather = gather.id;
    ++slots_[slot].gathers;
    live_numel_ += layout_.slots[slot].numel;
  }
  peak_live_numel_ = std::max(peak_live_numel_, live_numel_);
  ++all_gathers_;
  gathers_.push_back(std::move(gather));
}

void ShardedPartitioner::issue_all_gather(Gather& gather) {
  if (layout_.world_size == 1) {
    gather.gathered = gather.mine;  // the rank's pieces are the whole parameters
    return;
  }
  gather.gathered = at::empty({gather.mine.numel() * layout_.world_size}, gather.mine.options());
  const auto all_gather = [&] { gather.op = comm_.all_gather(gather.gathered, gather.mine); };
  if (gather.input) {
    host_.copies->after_device_copies(all_gather);  // after the copies, not after the current stream's work
  } else {
    all_gather();
  }
}

// ---- NVMe reads ---------------------------------------------------------------------------------

std::shared_ptr<CopyDone> ShardedPartitioner::read_now(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                                       const at::Tensor& dst) {
  std::vector<ParamReadPiece> pieces = nvme_->cut(ranges);
  const auto batch = static_cast<size_t>(nvme_->buffer_count());
  std::shared_ptr<CopyDone> last;
  for (size_t first = 0; first < pieces.size(); first += batch) {
    std::vector<ParamReadPiece> some(
        pieces.begin() + static_cast<std::ptrdiff_t>(first),
        pieces.begin() + static_cast<std::ptrdiff_t>(std::min(pieces.size(), first + batch)));
    for (uint64_t holder : nvme_->holders_of_next(some)) land(holder);
    ParamRead read = nvme_->start_read(std::move(some), next_gather_id_++);
    last = nvme_->land(read, dst, *host_.copies);
  }
  return last;
}

void ShardedPartitioner::land(uint64_t tag) {
  for (Gather& gather : gathers_)
    if (gather.id == tag) land(gather);
}

void ShardedPartitioner::land(Gather& gather) {
  if (!gather.read) return;
  ParamRead read = std::move(*gather.read);
  gather.read.reset();
  gather.input = nvme_->land(read, gather.mine, *host_.copies);
  issue_all_gather(gather);
}

void ShardedPartitioner::land_arrived() {
  if (nvme_ == nullptr || layout_.world_size != 1) return;  // more ranks: only where every rank lands
  for (Gather& gather : gathers_) {
    if (!gather.read) continue;
    if (!nvme_->arrived(*gather.read)) return;  // oldest first
    land(gather);
  }
}

void ShardedPartitioner::unpack(uint64_t gather_id) {
  auto it = std::find_if(gathers_.begin(), gathers_.end(), [&](const Gather& g) { return g.id == gather_id; });
  land(*it);
  it->op.wait();
  if (it->input) it->input->order_current_stream();  // one rank: no collective ordered it
  at::Tensor by_rank = it->gathered.view({layout_.world_size, -1});
  int64_t column = 0;
  for (size_t slot : it->slots) {
    const ShardSlot& param = layout_.slots[slot];
    slots_[slot].whole = unpadded_whole(by_rank, param, column).view(param.shape);
    slots_[slot].residency = Residency::kWhole;
    column += param.shard_numel;
  }
  gathers_.erase(it);
}

void ShardedPartitioner::free_slot(size_t slot) {
  slots_[slot].whole = at::Tensor();
  slots_[slot].residency = Residency::kSharded;
  live_numel_ -= layout_.slots[slot].numel;
}

bool ShardedPartitioner::free_kept(int64_t numel, size_t unit, size_t horizon) {
  while (live_numel_ + numel > options_.max_live_numel) {
    size_t victim = kNone, victim_next = 0;
    for (size_t slot = 0; slot < slots_.size(); ++slot) {
      const SlotState& state = slots_[slot];
      if (state.residency != Residency::kWhole || state.users > 0 || uses(unit, slot)) continue;
      size_t next = next_use(slot);  // kNone (no known use) sorts last: freed first
      if (horizon != kNone && next != kNone && next <= horizon) continue;
      if (victim == kNone || next > victim_next) {
        victim = slot;
        victim_next = next;
      }
    }
    if (victim == kNone) return false;
    free_slot(victim);
  }
  return true;
}

void ShardedPartitioner::drop_prefetches(int64_t numel, size_t unit) {
  for (size_t i = gathers_.size(); i-- > 0 && live_numel_ + numel > options_.max_live_numel;) {
    std::vector<size_t> slots = gathers_[i].slots;
    unpack(gathers_[i].id);  // waits; the fetched unit's own parameters stay
    for (size_t slot : slots)
      if (!uses(unit, slot)) free_slot(slot);
  }
}

// ---- The trace ----------------------------------------------------------------------------------

size_t ShardedPartitioner::advance_trace(size_t unit) {
  if (recording_) {
    trace_.push_back(unit);
    return kNone;
  }
  if (following_ && cursor_ < trace_.size() && trace_[cursor_] == unit) return cursor_++;
  following_ = false;
  return kNone;
}

void ShardedPartitioner::index_trace() {
  numel_before_.assign(trace_.size() + 1, 0);
  for (size_t p = 0; p < trace_.size(); ++p) {
    int64_t unit_numel = 0;
    for (size_t slot : unit_params_[trace_[p]]) {
      unit_numel += layout_.slots[slot].numel;
      if (uses_[slot].empty() || uses_[slot].back() != p) uses_[slot].push_back(p);
    }
    numel_before_[p + 1] = numel_before_[p] + unit_numel;
  }
  prefetched_numel_.assign(trace_.size(), 0);
}

size_t ShardedPartitioner::next_use(size_t slot) const {
  if (!following_) return kNone;
  auto it = std::lower_bound(uses_[slot].begin(), uses_[slot].end(), cursor_);
  return it == uses_[slot].end() ? kNone : *it;
}

bool ShardedPartitioner::keep_after(size_t slot, size_t position) const {
  if (slots_[slot].prefetched_use > position + 1) return true;
  auto next = std::upper_bound(uses_[slot].begin(), uses_[slot].end(), position);
  if (next == uses_[slot].end()) return false;
  return numel_before_[*next] - numel_before_[position + 1] < options_.max_reuse_distance;
}

void ShardedPartitioner::prefetch_after(size_t position) {
  prefetch_cursor_ = std::max(prefetch_cursor_, position + 1);
  int64_t ahead = 0;
  for (size_t p = position + 1; p < prefetch_cursor_; ++p) ahead += prefetched_numel_[p];
  while (prefetch_cursor_ < trace_.size() && ahead < options_.prefetch_numel) {
    const size_t target = prefetch_cursor_;
    const size_t unit = trace_[target];
    std::vector<size_t> missing = missing_slots(unit);
    int64_t numel = numel_of(missing);
    if (numel > 0 && !free_kept(numel, unit, target)) break;  // resumes at a later fetch
    for (size_t slot : unit_params_[unit])
      if (!persistent_[slot]) slots_[slot].prefetched_use = target + 1;
    if (!missing.empty()) start_gather(missing);
    prefetched_numel_[target] = numel;
    ahead += numel;
    ++prefetch_cursor_;
  }
}

// ---- ParamGateway -------------------------------------------------------------------------------

std::vector<at::Tensor> ShardedPartitioner::fetch(size_t unit) {
  land_arrived();
  const size_t position = advance_trace(unit);
  std::vector<size_t> missing = missing_slots(unit);
  if (!missing.empty()) {
    int64_t numel = numel_of(missing);
    if (!free_kept(numel, unit, kNone)) drop_prefetches(numel, unit);
    start_gather(missing);
  }
  for (size_t slot : unit_params_[unit])
    if (!persistent_[slot]) ++slots_[slot].users;  // from here on, no prefetch may free them
  if (position != kNone) prefetch_after(position);

  refresh_persistent(unit);
  std::vector<at::Tensor> params;
  for (size_t slot : unit_params_[unit]) {
    if (persistent_[slot]) {
      params.push_back(persistent_params_[slot]);
      continue;
    }
    SlotState& state = slots_[slot];
    if (state.residency == Residency::kGathering) unpack(state.gather);
    params.push_back(state.whole);
  }
  position_of_unit_[unit] = position;
  return params;
}

void ShardedPartitioner::release(size_t unit) {
  const size_t position = position_of_unit_[unit];
  position_of_unit_[unit] = kNone;
  for (size_t slot : unit_params_[unit]) {
    if (persistent_[slot]) continue;
    SlotState& state = slots_[slot];
    if (--state.users > 0 || state.residency != Residency::kWhole) continue;
    if (position == kNone || !following_ || !keep_after(slot, position)) free_slot(slot);
  }
}

void ShardedPartitioner::reduce_grads(size_t unit, std::vector<at::Tensor> grads) {
  // Last parameter first: the order autograd produces a unit's gradients in.
  const std::vector<size_t>& slots = unit_params_[unit];
  for (size_t i = slots.size(); i-- > 0;) reducer_.add(slots[i], i < grads.size() ? grads[i] : at::Tensor());
}

// ---- Step boundary and whole-model views --------------------------------------------------------

void ShardedPartitioner::finish_reduction() {
  reducer_.finish();
  if (host_.grads != nullptr) host_.grads->drain();
}

at::Tensor ShardedPartitioner::compute_partition() {
  pending_writes_.order_all();
  for (Gather& gather : gathers_) {  // prefetched from the shard, not yet used
    if (nvme_ != nullptr) land(gather);
    if (gather.input) gather.input->wait_host();
  }
  if (nvme_ != nullptr) return at::Tensor();       // the optimizer writes through nvme_
  if (shard_params_.device() != comm_.device()) {  // offloaded: the gathers' copies read it
    const c10::Stream stream = c10::impl::getDeviceGuardImpl(comm_.device().type())->getStream(comm_.device());
    stream.synchronize();
  }
  return shard_params_;
}

void ShardedPartitioner::drop_whole_params() {
  for (Gather& gather : gathers_) {
    land(gather);  // NVMe: its buffers are free again
    gather.op.wait();
    for (size_t slot : gather.slots) free_slot(slot);
  }
  gathers_.clear();
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    SlotState& state = slots_[slot];
    if (state.users > 0)
      throw Error(internal_error("rank " + std::to_string(comm_.rank()) + ": parameter " + layout_.slots[slot].name +
                                 " is still fetched at the end of a pass: a unit was not released"));
    if (state.residency == Residency::kWhole) free_slot(slot);
    state.prefetched_use = 0;
  }
  cursor_ = 0;
  prefetch_cursor_ = 0;
  std::fill(prefetched_numel_.begin(), prefetched_numel_.end(), 0);
}

void ShardedPartitioner::end_forward_pass() {
  drop_whole_params();
  if (recording_) trace_.clear();  // no step has ended yet: the pass is not the step the trace records
  following_ = !recording_;
}

void ShardedPartitioner::publish_compute_partition() {
  drop_whole_params();
  if (recording_ && !trace_.empty()) {
    recording_ = false;
    index_trace();
  }
  following_ = !recording_;
  std::vector<size_t> slots;
  for (size_t s = 0; s < layout_.slots.size(); ++s)
    if (persistent_[s]) slots.push_back(s);
  if (progress_ == nullptr) {
    regather_persistent(slots);
  } else {  // the same on every rank (follow_step is), so the ranks' gathers match
    stale_persistent_ = persistent_;
  }
}

void ShardedPartitioner::refresh_persistent(size_t unit) {
  std::vector<size_t> slots;
  for (size_t slot : unit_params_[unit])
    if (slot < stale_persistent_.size() && stale_persistent_[slot] &&
        std::find(slots.begin(), slots.end(), slot) == slots.end())
      slots.push_back(slot);
  regather_persistent(slots);
  for (size_t slot : slots) stale_persistent_[slot] = false;
}

int64_t ShardedPartitioner::shard_end(const std::vector<size_t>& slots) const {
  int64_t end = 0;
  for (size_t slot : slots) end = std::max(end, layout_.slots[slot].shard_offset + layout_.slots[slot].shard_numel);
  return end;
}

void ShardedPartitioner::regather_persistent(const std::vector<size_t>& slots) {
  if (slots.empty()) return;
  GatherInput input = gather_input(slots);
  if (input.copied) input.copied->order_current_stream();
  at::Tensor by_rank = gather_from_ranks(comm_, input.mine).view({layout_.world_size, -1});
  int64_t column = 0;
  for (size_t slot : slots) {
    const ShardSlot& param = layout_.slots[slot];
    persistent_params_[slot].view(-1).copy_(unpadded_whole(by_rank, param, column));
    column += param.shard_numel;
  }
}

std::map<std::string, at::Tensor> ShardedPartitioner::assemble(const at::Tensor& partition) {
  at::Tensor by_rank = gather_fp32_to_host(partition, comm_).view({layout_.world_size, layout_.shard_numel});
  std::map<std::string, at::Tensor> full;
  for (const ShardSlot& slot : layout_.slots)
    full[slot.name] = unpadded_whole(by_rank, slot, slot.shard_offset).view(slot.shape).clone();
  return full;
}

std::vector<PartitionRun> ShardedPartitioner::locate(const std::string& name, int64_t first, int64_t count) const {
  return engine::locate(slot_named(layout_.slots, name), first, count);
}

}  // namespace tierzero::engine
