// The offloaded optimizers' one sub-group loop (offloaded_step.h).
#include "engine/zero/internal/offloaded_step.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>

namespace tierzero::engine {

void OffloadedStep::wait_copies() {
  for (PartitionWrite& write : pending_) write.done->wait_host();
  pending_.clear();
}

void OffloadedStep::run(StateStore& store, int64_t step, const at::Tensor& grad, double grad_multiplier, double lr,
                        const at::Tensor& compute_partition, StepProgress* progress, GradsFinal* grads_final) {
  GradLender* lender = grads_final != nullptr ? grads_final->lender() : nullptr;
  const at::Tensor host_grad =
      lender != nullptr || (grad.is_cpu() && grad.is_contiguous()) ? grad : grad.cpu().contiguous();
  const SixteenBitOutput out16 = sixteen_bit_output(compute_partition, setup_.params16, numel_, who_, setup_.sink);
  if (setup_.compact.compact_master && out16.in_place &&
      out16.out.const_data_ptr() != setup_.compact.hi.const_data_ptr())
    throw Error(internal_error(std::string(who_) + ": the compact master's bf16 half is not the compute partition"));
  const cpu_adam::AdamHyperParams hp = cpu_adam_hyper_params(setup_.config, lr);
  const std::vector<StepPiece> pieces = store.pieces(grads_final != nullptr);
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
      const cpu_adam::Elements whole = tensor_elements(host_grad, piece.begin, piece.count);
      grads = {whole.data, whole.count, whole.type};
    }
    std::shared_ptr<CopyDone> reader = [&] {
      RECORD_USER_SCOPE("tierzero::adam");
      return step_piece(piece, state, step, hp, grads, out16, grad_multiplier, compute_partition);
    }();
    if (lender != nullptr) lender->consumed(piece.begin, piece.count);
    if (progress != nullptr && piece.publish)
      progress->publish(piece.begin + piece.count,
                        std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
    publish_at_end = publish_at_end || !piece.publish;
    RECORD_USER_SCOPE("tierzero::state_release");  // an NVMe record: its write queued
    store.release(i, piece, std::move(reader));
  }
  save_.reset();  // read whole: every piece waited for it
  if (progress != nullptr && publish_at_end) progress->publish(numel_, pending_);
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

std::shared_ptr<CopyDone> OffloadedStep::step_piece(const StepPiece& piece, const StateSpans& state, int64_t step,
                                                    const cpu_adam::AdamHyperParams& hp,
                                                    const cpu_adam::ConstElements& grads, const SixteenBitOutput& out16,
                                                    double grad_multiplier, const at::Tensor& compute_partition) {
  const bool compact = setup_.compact.compact_master;
  const int64_t begin = piece.begin;
  const int64_t count = piece.count;
  const auto n = static_cast<size_t>(count);
  const at::Tensor window = out16.sink != nullptr ? out16.sink->lend(begin, count) : at::Tensor();
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
  if (compact) {  // the bf16 half updated in place: the compute partition, or the weights bound for the device
    buffers.params_16bit = tensor_elements(setup_.compact.hi, begin, count);
    buffers.master_residual = {state.residual, n};
  } else {
    buffers.params = {state.master, n};
    if (out16.sixteen_bit)
      buffers.params16 =
          window.defined() ? tensor_elements(window, 0, count) : tensor_elements(out16.out, begin, count);
  }
  throw_if_error(setup_.adam->step(hp, step, static_cast<float>(grad_multiplier), buffers));
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
