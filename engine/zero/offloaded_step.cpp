// The record optimizer's one sub-group loop (offloaded_step.h).
#include "engine/zero/internal/offloaded_step.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>

#include "engine/zero/internal/device_share.h"
#include "engine/zero/internal/host_grad_pipeline.h"
#include "engine/zero/internal/nvme_params.h"

namespace tierzero::engine {

void OffloadedStep::wait_copies() {
  for (PartitionWrite& write : pending_) write.done->wait_host();
  pending_.clear();
}

namespace {

// The announcements of a step's pieces in the step's order: a piece finished is announced once every
// piece before it is (a GPU share's piece finishes after later ones), with the copies queued for it.
class InOrderAnnouncer {
 public:
  InOrderAnnouncer(const std::vector<StepPiece>& pieces, StepProgress* progress)
      : pieces_(pieces), progress_(progress), finished_(pieces.size(), false), writes_(pieces.size()) {}
  // Piece i finished, its device copies `writes` queued.
  void finished(size_t i, std::vector<PartitionWrite> writes) {
    finished_[i] = true;
    writes_[i] = std::move(writes);
    for (; next_ < pieces_.size() && finished_[next_]; ++next_) {
      const StepPiece& piece = pieces_[next_];
      if (progress_ != nullptr && piece.publish)
        progress_->publish(piece.begin + piece.count, std::move(writes_[next_]));
    }
  }

 private:
  const std::vector<StepPiece>& pieces_;
  StepProgress* progress_;
  std::vector<bool> finished_;
  std::vector<std::vector<PartitionWrite>> writes_;
  size_t next_ = 0;  // the first piece not announced
};

// A piece queued on the GPU share, finished once its download landed.
struct DevicePiece {
  size_t i = 0;
  StateSpans state;
  DevicePieceDone done;
};

}  // namespace

void OffloadedStep::run(StateStore& store, int64_t step, const at::Tensor& grad, double grad_multiplier, double lr,
                        const at::Tensor& compute_partition, StepProgress* progress, GradsFinal* grads_final) {
  HostGradPipeline* lender = grads_final != nullptr ? grads_final->lender() : nullptr;
  if (lender == nullptr && !(grad.is_cpu() && grad.is_contiguous()))
    throw Error(internal_error("record optimizer: the gradient partition is not contiguous in host memory"));
  const SixteenBitOutput out16 =
      sixteen_bit_output(compute_partition, setup_.params16, setup_.numel, "record optimizer", setup_.sink);
  if (setup_.compact.compact_master && out16.in_place &&
      out16.out.const_data_ptr() != setup_.compact.hi.const_data_ptr())
    throw Error(internal_error("record optimizer: the compact master's bf16 half is not the compute partition"));
  const cpu_adam::AdamHyperParams hp = cpu_adam_hyper_params(setup_.config, lr);
  const std::vector<StepPiece> pieces = store.pieces(grads_final != nullptr);
  // The GPU share steps outside the backward only (inside it the device runs the backward).
  std::vector<bool> on_device(pieces.size(), false);
  if (setup_.device_share != nullptr && grads_final == nullptr) {
    std::vector<int64_t> counts;
    std::vector<bool> holdable;
    for (size_t i = 0; i < pieces.size(); ++i) {
      counts.push_back(pieces[i].count);
      holdable.push_back(pieces[i].holdable);
    }
    on_device = device_pieces(counts, holdable, setup_.device_share->share());
  }
  device_stats_ = {};
  std::chrono::steady_clock::time_point first_queued;  // the first device piece's
  InOrderAnnouncer announcer(pieces, progress);
  std::deque<DevicePiece> in_flight;  // in the order queued
  // Finishes the device's pieces whose downloads landed, front first (all of them, waiting, with `wait`).
  const auto finish_device_pieces = [&](bool wait) {
    while (!in_flight.empty() && (wait || in_flight.front().done.ran())) {
      DevicePiece& d = in_flight.front();
      d.done.wait();
      device_stats_.seconds = seconds_since(first_queued);
      const StepPiece& piece = pieces[d.i];
      const size_t queued = pending_.size();
      // A sink's window is lent and sent in pairs: lent now (a compact master's weights are copied into it).
      const at::Tensor window = out16.sink != nullptr ? out16.sink->lend(piece.begin, piece.count) : at::Tensor();
      (void)send_weights(piece, d.state, out16, window, compute_partition);  // compact: no copy reads the master
      announcer.finished(d.i, std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
      store.release(d.i, piece, nullptr);
      in_flight.pop_front();
    }
  };
  bool publish_at_end = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const StepPiece& piece = pieces[i];
    if (save_ != nullptr) {
      RECORD_USER_SCOPE("tierzero::wait_save");
      wait_for_save(piece.begin + piece.count);  // pieces run front to back, or back to front: a prefix
    }
    const StateSpans state = [&] {
      RECORD_USER_SCOPE("tierzero::state_acquire");  // an NVMe record: its read
      return store.acquire(i, piece);
    }();
    if (grads_final != nullptr) {
      RECORD_USER_SCOPE("tierzero::wait_grads");
      grads_final->wait_from(piece.begin);
    }
    const size_t queued = pending_.size();
    at::Tensor zeros;  // a ring piece nothing landed on
    cpu_adam::ConstElements grads;
    if (lender != nullptr) {
      grads = lender->lend(piece.begin, piece.count);
      if (grads.data == nullptr) {
        zeros = at::zeros({piece.count * static_cast<int64_t>(element_size(grads.type))}, at::kByte);
        grads.data = zeros.const_data_ptr();
      }
    } else {
      const cpu_adam::Elements whole = tensor_elements(grad, piece.begin, piece.count);
      grads = {whole.data, whole.count, whole.type};
    }
    // The device's pieces are compact masters, which write no sink window while stepped.
    const at::Tensor window =
        out16.sink != nullptr && !on_device[i] ? out16.sink->lend(piece.begin, piece.count) : at::Tensor();
    const cpu_adam::AdamBuffers buffers = piece_buffers(piece, state, grads, out16, window);
    publish_at_end = publish_at_end || !piece.publish;
    if (on_device[i]) {
      RECORD_USER_SCOPE("tierzero::adam_device_queued");
      if (in_flight.empty() && device_stats_.elements == 0) first_queued = std::chrono::steady_clock::now();
      in_flight.push_back(
          {.i = i,
           .state = state,
           .done = setup_.device_share->submit(hp, step, static_cast<float>(grad_multiplier), buffers)});
      device_stats_.elements += piece.count;
    } else {
      std::shared_ptr<CopyDone> reader = [&] {
        RECORD_USER_SCOPE("tierzero::adam");
        throw_if_error(setup_.adam->step(hp, step, static_cast<float>(grad_multiplier), buffers));
        return send_weights(piece, state, out16, window, compute_partition);
      }();
      if (lender != nullptr) lender->consumed(piece.begin, piece.count);
      announcer.finished(i, std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
      RECORD_USER_SCOPE("tierzero::state_release");  // an NVMe record: its write queued
      store.release(i, piece, std::move(reader));
    }
    finish_device_pieces(false);
  }
  if (!in_flight.empty()) {
    RECORD_USER_SCOPE("tierzero::wait_device_share");
    const auto waiting = std::chrono::steady_clock::now();
    finish_device_pieces(true);
    device_stats_.wait_s = seconds_since(waiting);
  }
  save_.reset();  // read whole: every piece waited for it
  if (progress != nullptr && publish_at_end) progress->publish(setup_.numel, pending_);
  {
    RECORD_USER_SCOPE("tierzero::state_finish");  // the step's NVMe writes waited for
    store.finish();
  }
  last_copy_seconds_ = 0.0;
  if (setup_.time_copies) {
    RECORD_USER_SCOPE("tierzero::wait_copies");
    for (PartitionWrite& write : pending_) {
      write.done->wait_host();
      last_copy_seconds_ += write.done->seconds();
    }
  }
}

cpu_adam::AdamBuffers OffloadedStep::piece_buffers(const StepPiece& piece, const StateSpans& state,
                                                   const cpu_adam::ConstElements& grads, const SixteenBitOutput& out16,
                                                   const at::Tensor& window) const {
  const int64_t begin = piece.begin;
  const int64_t count = piece.count;
  cpu_adam::AdamBuffers buffers{.params = {},
                                .grads = {grads.data, grads.count, grads.type},
                                .exp_avg = state.exp_avg,
                                .exp_avg_sq = state.exp_avg_sq,
                                .params16 = {},
                                .params_16bit = {},
                                .master_residual = {},
                                .params16_rounding = setup_.params16_rounding,
                                .exp_avg_scales = state.exp_avg_scales,
                                .exp_avg_sq_scales = state.exp_avg_sq_scales};
  if (setup_.compact.compact_master) {  // the bf16 half updated in place: the compute partition, or the weights bound
                                        // for the device
    buffers.params_16bit = tensor_elements(setup_.compact.hi, begin, count);
    buffers.master_residual = {state.residual, static_cast<size_t>(count)};
  } else {
    buffers.params = {state.master, static_cast<size_t>(count)};
    if (out16.sixteen_bit)
      buffers.params16 =
          window.defined() ? tensor_elements(window, 0, count) : tensor_elements(out16.out, begin, count);
  }
  return buffers;
}

std::shared_ptr<CopyDone> OffloadedStep::send_weights(const StepPiece& piece, const StateSpans& state,
                                                      const SixteenBitOutput& out16, const at::Tensor& window,
                                                      const at::Tensor& compute_partition) {
  const bool compact = setup_.compact.compact_master;
  const int64_t begin = piece.begin;
  const int64_t count = piece.count;
  const void* hi = compact ? static_cast<const std::byte*>(setup_.compact.hi.const_data_ptr()) + begin * 2 : nullptr;
  if (out16.sink != nullptr) {  // fp32 compute weights: the master's new values
    if (compact) {
      std::memcpy(window.data_ptr(), hi, window.nbytes());
    } else if (!out16.sixteen_bit) {
      std::memcpy(window.data_ptr(), state.master, window.nbytes());
    }
    pending_.push_back(out16.sink->send(begin, count));
    return nullptr;
  }
  if (out16.in_place) return nullptr;
  const bool from_master = !compact && !out16.sixteen_bit;
  const void* src = compact        ? hi
                    : !from_master ? static_cast<const std::byte*>(setup_.params16.const_data_ptr()) +
                                         begin * setup_.params16.element_size()
                                   : static_cast<const void*>(state.master);
  at::Tensor dst = compute_partition.narrow(0, begin, count);
  if (dst.is_cpu()) {
    std::memcpy(dst.data_ptr(), src, dst.nbytes());
    return nullptr;
  }
  std::shared_ptr<CopyDone> done = setup_.copies->to_device(dst, src);
  pending_.push_back({begin, count, done});
  return from_master ? done : nullptr;
}

}  // namespace tierzero::engine
