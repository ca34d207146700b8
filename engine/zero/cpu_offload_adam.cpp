// Adam offloaded to the CPU: state in the engine's pinned host tier, the store of the offloaded step
// (offloaded_step.h) that cpu_adam's fused SIMD kernel steps one sub-group at a time (in slices of
// at most kPublishSlice elements, each announced to the reader following behind as it finishes).
// Compact layouts (CompactState): a compact master is stepped in place in its bf16 half (the 16-bit
// weights) and int16 residual; 8-bit moments with their block scales (slices start on blocks). A
// compact checkpoint reads and fills the tensors as they are, cut at the sub-group bounds
// (stored_records.h); what read_master, state() or a load from another layout reads or writes is
// converted a piece of kConvertPiece elements at a time (state() materialises fp32 copies of the
// converted states: 4 bytes an element each, unpinned).
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/offloaded_step.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/stored_records.h"

namespace tierzero::engine {
namespace {

class CpuOffloadAdam final : public PartitionOptimizer, public HoldsForSave, private StateStore, private StoredRecords {
 public:
  explicit CpuOffloadAdam(CpuOffloadAdamSetup setup)
      : setup_(std::move(setup)),
        numel_(setup_.common.compact.compact_master ? setup_.residual.numel() : setup_.master.numel()),
        step_(setup_.common, "cpu optimizer", numel_) {
    const CompactState& compact = setup_.common.compact;
    if (compact.compact_master &&
        (setup_.master.defined() || setup_.residual.scalar_type() != at::kShort || !compact.hi.defined() ||
         compact.hi.scalar_type() != at::kBFloat16 || compact.hi.numel() != numel_ || !compact.hi.is_contiguous()))
      throw Error(internal_error("cpu optimizer: a compact master needs an int16 residual and bf16 weights of " +
                                 std::to_string(numel_) + " elements and no fp32 master"));
    if (compact.moments_8bit &&
        (setup_.exp_avg.scalar_type() != at::kChar || setup_.exp_avg_sq.scalar_type() != at::kByte ||
         setup_.exp_avg_scales.numel() != static_cast<int64_t>(cpu_adam::moment_block_count(numel_)) ||
         setup_.exp_avg_sq_scales.numel() != setup_.exp_avg_scales.numel()))
      throw Error(internal_error("cpu optimizer: 8-bit moments need int8 / uint8 codes and a scale per block"));
    if (!converted()) {
      state_.master = setup_.master;
      state_.exp_avg = setup_.exp_avg;
      state_.exp_avg_sq = setup_.exp_avg_sq;
    }
    if (compact.compact_master && setup_.load_master) {  // the initial master, split a piece at a time
      const int64_t piece = std::min<int64_t>(numel_, kConvertPiece);
      at::Tensor master = at::empty({piece}, at::kFloat);
      for (int64_t begin = 0; begin < numel_; begin += piece) {
        const int64_t count = std::min(piece, numel_ - begin);
        at::Tensor part = master.narrow(0, 0, count);
        part.zero_();  // padding
        setup_.load_master(begin, part);
        split_master_range({part.const_data_ptr<float>(), static_cast<size_t>(count)}, compact.hi, setup_.residual,
                           begin);
      }
    }
  }

  double grad_sq_norm(const at::Tensor& grad) override { return host_grad_sq_norm(*setup_.common.adam, grad); }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress, GradsFinal* grads_final) override {
    step_.wait_copies();  // the last step's: params16 is rewritten
    write_back_materialised();
    step_.run(*this, state_.step + 1, grad, grad_multiplier, lr, compute_partition, progress, grads_final);
    ++state_.step;
  }

  AdamPartitionState& state() override {
    if (!converted() || materialised_) return state_;
    // fp32 copies of the converted states (compact master joined, 8-bit moments decoded), written back
    // by the next step, save, read or load.
    state_.master = setup_.master.defined() ? setup_.master : at::empty({numel_}, at::kFloat);
    state_.exp_avg = setup_.common.compact.moments_8bit ? at::empty({numel_}, at::kFloat) : setup_.exp_avg;
    state_.exp_avg_sq = setup_.common.compact.moments_8bit ? at::empty({numel_}, at::kFloat) : setup_.exp_avg_sq;
    for (int s = 0; s < 3; ++s) {
      if (!converts(s)) continue;
      at::Tensor& t = s == 0 ? state_.master : s == 1 ? state_.exp_avg : state_.exp_avg_sq;
      read_state(home(s), 0, bytes_of(t));
    }
    materialised_ = true;
    return state_;
  }

  int64_t step_count() override { return state_.step; }

  Status read_master(int64_t begin, std::span<float> out) override {
    write_back_materialised();
    const auto count = static_cast<int64_t>(out.size());
    if (begin < 0 || begin + count > numel_)
      return internal_error("master weights [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                            ") read past the partition's " + std::to_string(numel_));
    try {
      read_state(home(0), begin, std::as_writable_bytes(out));
      return Status();
    } catch (const Error& e) {
      return e.status();
    }
  }

  Status load_state(const StateFill& fill, int64_t step) override {
    try {
      materialised_ = false;  // a state() copy is replaced too
      if (converted()) state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
      std::vector<float> scratch;
      for (int64_t begin = 0; begin < numel_; begin += kConvertPiece) {
        const int64_t count = std::min(kConvertPiece, numel_ - begin);
        for (int s = 0; s < 3; ++s) {
          if (!converts(s)) {
            const at::Tensor& t = s == 0 ? setup_.master : s == 1 ? setup_.exp_avg : setup_.exp_avg_sq;
            TZ_RETURN_IF_ERROR(fill(s, begin,
                                    {static_cast<std::byte*>(t.data_ptr()) + begin * t.element_size(),
                                     static_cast<size_t>(count * t.element_size())}));
            continue;
          }
          scratch.resize(static_cast<size_t>(count));
          TZ_RETURN_IF_ERROR(fill(s, begin, std::as_writable_bytes(std::span<float>(scratch))));
          write_state(home(s), begin, std::as_bytes(std::span<const float>(scratch)));
        }
      }
      state_.step = step;
      return Status();
    } catch (const Error& e) {
      return e.status();
    }
  }

  StoredLayout stored_layout() const override {
    return {.record = record_layout(setup_.exp_avg.scalar_type(), setup_.common.compact.compact_master),
            .record_numel = std::min(setup_.common.sub_group_numel, numel_)};
  }

  void hold_for_save(std::shared_ptr<SaveProgress> save) override { step_.hold_for_save(std::move(save)); }

  std::vector<StateReader> stored_readers() override {
    write_back_materialised();
    return engine::stored_readers(*this, stored_layout(), numel_);
  }

  Status load_stored(const StoredFill& fill, int64_t step) override {
    materialised_ = false;  // a state() copy is replaced too
    if (converted()) state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
    TZ_RETURN_IF_ERROR(load_stored_records(*this, stored_layout(), numel_, fill));
    state_.step = step;
    return Status();
  }

  int64_t pinned_bytes() const override {
    if (!setup_.exp_avg.is_pinned()) return 0;
    int64_t bytes = setup_.exp_avg.nbytes() + setup_.exp_avg_sq.nbytes();
    for (const at::Tensor* t :
         {&setup_.master, &setup_.residual, &setup_.exp_avg_scales, &setup_.exp_avg_sq_scales, &setup_.common.params16})
      if (t->defined()) bytes += t->nbytes();
    return bytes;
  }

  std::string state_placement() const override {
    int64_t bytes = setup_.exp_avg.nbytes() + setup_.exp_avg_sq.nbytes();
    for (const at::Tensor* t : {&setup_.master, &setup_.residual, &setup_.exp_avg_scales, &setup_.exp_avg_sq_scales})
      if (t->defined()) bytes += t->nbytes();
    char per_param[32];
    std::snprintf(per_param, sizeof(per_param), "%.2f", numel_ > 0 ? static_cast<double>(bytes) / numel_ : 0.0);
    return std::string("host memory: ") +
           (setup_.common.compact.compact_master ? "compact master (bf16 weights + int16 residual)" : "fp32 master") +
           ", " +
           (setup_.common.compact.moments_8bit
                ? std::string("8-bit moments")
                : std::string(c10::toString(setup_.exp_avg.scalar_type())) + " moments") +
           "; " + per_param + " bytes/param, " + format_bytes(static_cast<uint64_t>(bytes)) +
           (setup_.common.compact.compact_master ? " (+ the 16-bit weights it shares)" : "");
  }

  double last_copy_seconds() const override { return step_.last_copy_seconds(); }
  DeviceShareStats last_device_share() const override { return step_.last_device_share(); }

  std::vector<PartitionWrite> device_writes() const override { return step_.copies(); }

  std::string placement() const override {
    return "cpu (" + cpu_adam::simd_target_name() + ", " + std::to_string(setup_.common.adam->threads()) + " threads)";
  }

 private:
  // The step's pieces: slices of each sub-group, front to back; inside the backward, last to first
  // (the order the gradients become final in).
  std::vector<StepPiece> pieces(bool inside_backward) override {
    std::vector<StepPiece> slices;
    const int64_t slice = std::min(setup_.common.sub_group_numel, kPublishSlice);
    for (int64_t group = 0; group < numel_; group += setup_.common.sub_group_numel) {
      const int64_t group_end = std::min(numel_, group + setup_.common.sub_group_numel);
      for (int64_t begin = group; begin < group_end; begin += slice)
        slices.push_back({.begin = begin, .count = std::min(slice, group_end - begin), .publish = true});
    }
    if (inside_backward) std::reverse(slices.begin(), slices.end());
    return slices;
  }

  StateSpans acquire(size_t, const StepPiece& piece) override {
    const int64_t begin = piece.begin, count = piece.count;
    return {.master = setup_.master.defined() ? setup_.master.data_ptr<float>() + begin : nullptr,
            .residual = setup_.residual.defined() ? static_cast<int16_t*>(setup_.residual.data_ptr()) + begin : nullptr,
            .exp_avg = moment_elements(setup_.exp_avg, begin, count),
            .exp_avg_sq = moment_elements(setup_.exp_avg_sq, begin, count),
            .exp_avg_scales = moment_scales(setup_.exp_avg_scales, begin, count),
            .exp_avg_sq_scales = moment_scales(setup_.exp_avg_sq_scales, begin, count)};
  }
  void release(size_t, const StepPiece&, std::shared_ptr<CopyDone>) override {}
  void finish() override {}
  bool holdable(size_t) const override { return true; }  // every piece's state has its home in the tier

  // The stored records: the tensors themselves, cut at the sub-group bounds.
  Status acquire(int64_t, bool) override { return Status(); }
  Status release(int64_t, bool) override { return Status(); }
  std::span<std::byte> part(int64_t k, const StoredPart& part) override {
    const at::Tensor& t = part.where == RecordPart::kEnd ? setup_.common.compact.hi
                          : part.where == RecordPart::kMaster
                              ? (setup_.common.compact.compact_master ? setup_.residual : setup_.master)
                          : part.where == RecordPart::kExpAvg       ? setup_.exp_avg
                          : part.where == RecordPart::kExpAvgSq     ? setup_.exp_avg_sq
                          : part.where == RecordPart::kExpAvgScales ? setup_.exp_avg_scales
                                                                    : setup_.exp_avg_sq_scales;
    const StoredLayout layout = stored_layout();
    const int64_t begin = k * layout.record_numel;
    return {static_cast<std::byte*>(t.data_ptr()) + stored_part_bytes(layout, part, begin),
            stored_part_bytes(layout, part, std::min(layout.record_numel, numel_ - begin))};
  }

  // Whether a state is held in another form than its checkpoint's: the compact master (0), 8-bit
  // moments (1, 2).
  bool converts(int s) const {
    return s == 0 ? setup_.common.compact.compact_master : setup_.common.compact.moments_8bit;
  }
  bool converted() const { return setup_.common.compact.compact_master || setup_.common.compact.moments_8bit; }

  // Where state s lives.
  StateHome home(int s) const {
    const CompactState& compact = setup_.common.compact;
    return {.s = s,
            .converted = converts(s),
            .part = s == 0   ? (compact.compact_master ? setup_.residual : setup_.master)
                    : s == 1 ? setup_.exp_avg
                             : setup_.exp_avg_sq,
            .scales = s == 1 ? setup_.exp_avg_scales : setup_.exp_avg_sq_scales,
            .hi = compact.hi};
  }

  // After state(): the (possibly changed) fp32 copies go back into the compact buffers and are freed.
  void write_back_materialised() {
    if (!materialised_) return;
    for (int s = 0; s < 3; ++s) {
      if (!converts(s)) continue;
      const at::Tensor& t = s == 0 ? state_.master : s == 1 ? state_.exp_avg : state_.exp_avg_sq;
      write_state(home(s), 0, bytes_of(t));
    }
    state_.master = state_.exp_avg = state_.exp_avg_sq = at::Tensor();
    materialised_ = false;
  }

  // Elements converted at a time (a multiple of cpu_adam::kMomentBlock).
  static constexpr int64_t kConvertPiece = int64_t{1} << 22;

  CpuOffloadAdamSetup setup_;
  int64_t numel_ = 0;
  OffloadedStep step_;
  AdamPartitionState state_;  // step always; the tensors while materialised_ (or always, unconverted)
  bool materialised_ = false;
};

}  // namespace

std::unique_ptr<PartitionOptimizer> make_cpu_offload_adam(CpuOffloadAdamSetup setup) {
  return std::make_unique<CpuOffloadAdam>(std::move(setup));
}

}  // namespace tierzero::engine
