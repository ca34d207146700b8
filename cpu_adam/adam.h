// Adam and AdamW on the CPU for offloaded optimizer state: one fused, memory-bound pass per step.
//
// The step reads the fp32 master params (or 16-bit params with no master), the gradients (fp32 | bf16 | fp16) and the
// moments m, v (fp32, or bf16 for memory-starved runs), multiplies the gradient by one scalar (clip coefficient divided
// by the loss scale), applies Adam (L2 added to the gradient) or AdamW (decoupled decay), and writes the new params, m,
// v and, in the same pass, a 16-bit copy of the params (bf16 | fp16, rounded to nearest even) into a caller buffer. A
// separate pre-pass returns the gradient's squared L2 norm and whether every element is finite.
//
// Semantics are torch.optim.Adam / AdamW (and the fused CPU kernel at::_fused_adam(w)_) operation
// for operation: m = lerp(m, g, 1-beta1); v = beta2*v + (1-beta2)*g*g;
// p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), with bc_i = 1 - beta_i^step. The step number
// and every hyper-parameter are passed per call, so a run resumed at any step, or one whose lr or
// betas change between steps, gives exactly what an uninterrupted run gives.
//
// Kernels are written once with Google Highway and dispatched at run time to the best SIMD target
// of the machine (AVX2, AVX-512, NEON, SVE, ...); work is split into tiles run by a oneTBB arena.
// No LibTorch, no CUDA: buffers are raw spans with an element type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/common.h"

namespace tierzero::cpu_adam {

// Buffers hold kF32, kBF16 or kF16 elements (common/internal/element_type.h); the kernels take no other type.

// `count` elements of `type` at `data` (read only).
struct ConstElements {
  const void* data = nullptr;
  size_t count = 0;
  ElementType type = ElementType::kF32;
};

// `count` elements of `type` at `data` (read and written). Empty (count 0) means "absent".
struct Elements {
  void* data = nullptr;
  size_t count = 0;
  ElementType type = ElementType::kF32;
};

// Views of typed buffers; 16-bit types are held as their raw bits (uint16_t).
inline ConstElements const_elements(std::span<const float> s) { return {s.data(), s.size(), ElementType::kF32}; }
inline ConstElements const_elements(std::span<const uint16_t> bits, ElementType type) {
  return {bits.data(), bits.size(), type};
}
inline Elements elements(std::span<float> s) { return {s.data(), s.size(), ElementType::kF32}; }
inline Elements elements(std::span<uint16_t> bits, ElementType type) { return {bits.data(), bits.size(), type}; }

enum class AdamMode : uint8_t {
  kAdam,   // torch.optim.Adam: weight_decay * p is added to the gradient (L2)
  kAdamW,  // torch.optim.AdamW: p is multiplied by (1 - lr * weight_decay) before the update
};

// Hyper-parameters of one step; an lr schedule changes them every call.
struct AdamHyperParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  AdamMode mode = AdamMode::kAdamW;
  bool bias_correction = true;  // off: bc1 = bc2 = 1 (DeepSpeed's bias_correction=False)
};

// The buffers one step updates, all of the same element count. The params are either fp32 masters
// (`params`) or 16-bit params with no master (`params_16bit`, DeepSpeedCPUAdam on bf16 params):
// exactly one of the two holds elements.
struct AdamBuffers {
  std::span<float> params;  // fp32 master params, updated in place; empty when params_16bit is set
  ConstElements grads;      // fp32 | bf16 | fp16, as produced by backward (still loss-scaled)
  Elements exp_avg;         // m: fp32 | bf16
  Elements exp_avg_sq;      // v: same type as exp_avg
  Elements params16;        // bf16 | fp16 copy of the updated fp32 params, or empty for none
  // bf16 | fp16 params updated in place instead of fp32 `params`: each is widened to fp32, updated
  // with the fp32 operations of the master path, and rounded back to nearest even (inf/NaN kept).
  // params16 must then be empty (the params are the 16-bit copy).
  Elements params_16bit = {};
};

// Result of the gradient pre-pass.
struct GradStats {
  double sq_norm = 0.0;  // sum of g*g in double (never overflows for finite fp32 input)
  bool finite = true;    // false when any element is inf or NaN (then sq_norm is inf or NaN)
};

// What step_with_clipping() did.
struct ClippedStepOutcome {
  bool skipped = false;    // the gradient held inf/NaN: nothing was written
  double grad_norm = 0.0;  // L2 norm of the unscaled gradient (grads / loss_scale)
  double clip_coef = 1.0;  // min(1, max_norm / (grad_norm + 1e-6)), as torch clip_grad_norm_
};

struct CpuAdamOptions {
  int threads = 0;               // worker threads; 0 = every core this process may run on
  bool pin_threads = false;      // pin arena thread i to the i-th allowed core while it works
  size_t tile_elements = 16384;  // elements per task (rounded up to a multiple of 64)
  // Non-temporal stores for the fp32 buffers a step writes (no read-for-ownership; the data leaves
  // the cache). Measured +1-2 % on a 16-core Intel Xeon, -17 % on an AMD EPYC VM: try it with
  // `tierzero bench adam --streaming-stores`. Tiles whose written buffers are not 64-byte aligned
  // use ordinary stores. Results are the same bits either way.
  bool streaming_stores = false;
};

// Runs the kernels on a private oneTBB arena of `threads` threads. Thread-safe: concurrent calls
// share the arena.
class CpuAdam {
 public:
  explicit CpuAdam(CpuAdamOptions options = {});
  ~CpuAdam();
  CpuAdam(const CpuAdam&) = delete;
  CpuAdam& operator=(const CpuAdam&) = delete;

  // The arena's thread count.
  int threads() const;

  // Returns the squared L2 norm of `grads` (fp32 | bf16 | fp16; another type counts as no elements)
  // and whether all are finite, in one pass at memory speed. The sum is deterministic: the same for
  // any thread count.
  GradStats grad_stats(ConstElements grads) const;

  // Gradient accumulation for offloaded gradients: dst[i] += float(src[i]) * scale for every i
  // (src fp32 | bf16 | fp16; the product rounded to float, then the sum, on every target), and
  // returns the squared L2 norm of the new dst and whether it is finite, as grad_stats(dst) would
  // (the same tiles and summation order, so deterministic for any thread count). kInvalidArgument,
  // writing nothing, when the counts differ or a buffer with elements has a null pointer.
  Result<GradStats> accumulate_scaled(std::span<float> dst, ConstElements src, float scale) const;

  // Applies one Adam/AdamW step numbered `step_number` (1 for the first step, as torch's state["step"]
  // after its increment) to `buffers`, with the gradient multiplied by `grad_multiplier`
  // (clip_coef / loss_scale). Gradients must be finite (check with grad_stats() first). Returns
  // kInvalidArgument, writing nothing, when counts differ, types are not allowed (m and v differ,
  // params16 or params_16bit fp32), both or neither of params and params_16bit hold elements (unless
  // all buffers are empty), params16 is set with params_16bit, step_number < 1, or a
  // hyper-parameter is out of range.
  Status step(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& buffers) const;

  // The memory traffic of step() on `buffers` without Adam's arithmetic, for benchmarks: the ceiling
  // step() can reach on this machine. Every buffer step() reads is loaded and every buffer it
  // writes is stored, through the same conversions, SIMD target, tiles and threads, with p, m and v
  // each replaced by itself plus the gradient (so their values change). kInvalidArgument, writing
  // nothing, for buffers step() refuses.
  Status memory_pass(const AdamBuffers& buffers) const;

  // The whole step for one flat buffer: grad_stats(), then, if the gradient is finite, step() with
  // grad_multiplier = clip_coef / loss_scale, where clip_coef comes from the unscaled norm and
  // `max_grad_norm` (<= 0: no clipping). A non-finite gradient skips the step and writes nothing.
  Result<ClippedStepOutcome> step_with_clipping(const AdamHyperParams& hp, int64_t step_number, double loss_scale,
                                                double max_grad_norm, const AdamBuffers& buffers) const;

 private:
  struct Arena;
  std::unique_ptr<Arena> arena_;
  size_t tile_elements_;
  bool streaming_stores_;
};

// Name of the SIMD target the kernels dispatch to now ("AVX3", "AVX2", "SSE4", "NEON", ...).
std::string simd_target_name();

}  // namespace tierzero::cpu_adam
