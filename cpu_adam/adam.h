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
//
// Compact state (the optional layouts below): an exact fp32 master held in 4 bytes as the bf16
// params plus a 16-bit residual (AdamBuffers::master_residual), 8-bit blockwise moments
// (ElementType kI8 m, kU8 v, an fp32 scale per kMomentBlock elements), and gradients accumulated
// into a bf16 buffer (accumulate_scaled's bf16 overload).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/common.h"

namespace tierzero::cpu_adam {

// Buffers hold kF32, kBF16 or kF16 elements (common/internal/element_type.h); the kernels take no other type, except
// the 8-bit moments (kI8 m, kU8 v: see kMomentBlock).

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
// 8-bit moment codes: m as kI8, v as kU8 (see kMomentBlock).
inline Elements elements(std::span<int8_t> codes) { return {codes.data(), codes.size(), ElementType::kI8}; }
inline Elements elements(std::span<uint8_t> codes) { return {codes.data(), codes.size(), ElementType::kU8}; }
inline ConstElements const_elements(std::span<const int8_t> codes) {
  return {codes.data(), codes.size(), ElementType::kI8};
}
inline ConstElements const_elements(std::span<const uint8_t> codes) {
  return {codes.data(), codes.size(), ElementType::kU8};
}

// Rounding of the bf16 params16 copy the fp32-master path writes (AdamBuffers::params16_rounding).
//   kNearestEven: round to nearest, ties to even (torch's .to(bfloat16)); the default.
//   kNearestAway: round to nearest, ties away from zero, computed on the sign-magnitude bits
//     (hi_mag = ((bits & 0x7fffffff) + 0x8000) >> 16, sign kept; NaN -> quiet NaN with its sign): the bf16
//     the compact master stores (see AdamBuffers::master_residual), so an fp32-master run and a compact-master
//     run can be compared bit for bit. Refused with an fp16 params16 (fp16 rounds to nearest even only).
enum class Bf16Rounding : uint8_t { kNearestEven, kNearestAway };

// 8-bit blockwise moments ("8-bit Optimizers via Block-wise Quantization", Dettmers et al., with a
// dynamic-exponent code of our own instead of their dynamic tree): m is kI8 and v is kU8, both stored
// in blocks of kMomentBlock elements with one fp32 scale per block (AdamBuffers::exp_avg_scales,
// exp_avg_sq_scales; ceil(count / kMomentBlock) of them). Element i of block b is decode(code_i) * scale[b];
// scale[b] is the block's largest magnitude, so each code is relative to the block's absmax:
//   m (kI8, the byte is sign-magnitude, not two's complement): bit 7 sign, then an E4M3 magnitude
//     (4 exponent bits, 3 mantissa bits, subnormals): e = bits 6..3, f = bits 2..0;
//     e > 0: 2^(e-15) * (1 + f/8), e == 0: f * 2^-17. Largest used magnitude 1.0 (e = 15, f = 0); 0x00 = 0.
//   v (kU8): an E5M3 magnitude (5 exponent bits, 3 mantissa bits): e > 0: 2^(e-31) * (1 + f/8),
//     e == 0: f * 2^-33. Largest used code 0xF8 = 1.0; 0x00 = 0. A positive v never encodes to 0 (it takes
//     the smallest code, 2^-33 of the absmax, at least): a v flushed to zero would turn m / (sqrt(v) + eps) into
//     m / eps. Negative values (v never is) encode as 0.
// Encoding multiplies by 1/absmax (rounded to float; divides where that would overflow) and rounds to the nearest code:
// the relative error of an element of magnitude >= 2^-14 (m) or >= 2^-30 (v) of its block's absmax is at most 2^-4
// (half a step of 3 mantissa bits; plus fp32 roundings); below that the absolute error is at most 2^-18 (m) or 2^-33
// (v) of the absmax. Rounding: to nearest (ties away from zero for the normal codes, to even for the subnormal ones).
// Where a block mixes magnitudes beyond the code's range, its smallest m encode as 0 and those params stop moving
// (tests/cpu_adam/moments8_test.cpp measures what that costs). The block's largest element is exact (code 1.0 times the
// absmax). A block of zeros has scale 0 and codes 0. Non-finite values have no code (the block's results are
// unspecified). Buffers always START on a block boundary: element 0 of a span is element 0 of block 0 (only the last
// block of a span may be partial), so a caller stepping part of a partition passes ranges whose offsets are multiples
// of kMomentBlock.
inline constexpr size_t kMomentBlock = 256;  // elements per block, one fp32 scale each

// The number of scales of `count` 8-bit moments: ceil(count / kMomentBlock).
inline constexpr size_t moment_block_count(size_t count) { return (count + kMomentBlock - 1) / kMomentBlock; }

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
  Elements exp_avg;         // m: fp32 | bf16 | kI8 (8-bit codes, with exp_avg_sq kU8)
  Elements exp_avg_sq;      // v: the type of exp_avg, or kU8 with a kI8 exp_avg
  Elements params16;        // bf16 | fp16 copy of the updated fp32 params, or empty for none
  // bf16 | fp16 params updated in place instead of fp32 `params`: each is widened to fp32, updated
  // with the fp32 operations of the master path, and rounded back to nearest even (inf/NaN kept).
  // params16 must then be empty (the params are the 16-bit copy).
  Elements params_16bit = {};
  // Exact compact master: when non-empty, params_16bit must be bf16 with the same count, `params` and
  // params16 empty. The fp32 master of element i is rebuilt BIT FOR BIT from hi = params_16bit[i] (bf16
  // bits) and r = master_residual[i]: mag = ((hi & 0x7fff) << 16) + r, sign = hi's sign; it is updated with
  // exactly the fp32 operations of the `params` (fp32 master) path, and split back:
  //   mag = bits & 0x7fffffff; hi_mag = (mag + 0x8000) >> 16 (bf16 to nearest, ties AWAY from zero);
  //   r = mag - (hi_mag << 16), always within [-32768, 32767]; hi = hi_mag | sign.
  // Why ties away and not ties to even: with nearest-even, an even bf16 value takes both ties around it,
  // so it has 65,537 fp32 preimages, one more than 16 bits can name, and no 16-bit residual can be exact;
  // with ties away every bf16 value has exactly 65,536 ([hi_mag << 16 - 0x8000, hi_mag << 16 + 0x7fff]).
  // Finite values, +-0, subnormals, values that round to bf16 inf (magnitude >= 0x7f7f8000: hi is inf and
  // the residual keeps the value exact) and +-inf round-trip bit for bit. A NaN master is stored as a
  // quiet bf16 NaN with its sign and residual 0, and rebuilds as a quiet NaN: the payload is not kept.
  // params_16bit then holds the compute weights (bf16 ties away, the same bits as params16 with
  // Bf16Rounding::kNearestAway on the fp32-master path). split_master / join_master convert.
  std::span<int16_t> master_residual = {};
  // Rounding of a bf16 params16 on the fp32-master path (kNearestAway is refused with an fp16
  // params16). 16-bit params updated in place without a master always round to nearest even.
  Bf16Rounding params16_rounding = Bf16Rounding::kNearestEven;
  // 8-bit moments (exp_avg kI8 and exp_avg_sq kU8): one fp32 scale per kMomentBlock elements,
  // moment_block_count(count) each; empty otherwise. A step decodes each block, applies Adam in fp32
  // exactly as for fp32 moments, and re-encodes each block with scale = its new absmax.
  std::span<float> exp_avg_scales = {};
  std::span<float> exp_avg_sq_scales = {};
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

  // The same into bf16 gradients (raw bits): dst[i] = bf16_round_nearest_even(float(dst[i]) + float(src[i]) *
  // scale) (the product rounded to float, then the sum, then the bf16 rounding; NaN stays a quiet NaN,
  // overflow gives inf), returning the squared L2 norm of the new (rounded) dst and whether it is finite,
  // deterministic for any thread count. The same refusals.
  Result<GradStats> accumulate_scaled(std::span<uint16_t> dst_bf16, ConstElements src, float scale) const;

  // Applies one Adam/AdamW step numbered `step_number` (1 for the first step, as torch's state["step"]
  // after its increment) to `buffers`, with the gradient multiplied by `grad_multiplier`
  // (clip_coef / loss_scale). Gradients must be finite (check with grad_stats() first). Returns
  // kInvalidArgument, writing nothing, when counts differ, types are not allowed (m and v differ,
  // other than kI8 m with kU8 v; params16 or params_16bit fp32), both or neither of params and params_16bit
  // hold elements (unless all buffers are empty), params16 is set with params_16bit, master_residual is
  // set without bf16 params_16bit of its count, 8-bit moments lack their scales (or scales are set
  // without them), kNearestAway is asked of an fp16 params16, step_number < 1, or a hyper-parameter is
  // out of range. With 8-bit moments, tiles are rounded up to a multiple of kMomentBlock (a block is
  // never split between threads) and streaming_stores is not used; results are the same bits for any
  // thread count.
  Status step(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& buffers) const;

  // The memory traffic of step() on `buffers` without Adam's arithmetic, for benchmarks: the ceiling
  // step() can reach on this machine. Every buffer step() reads is loaded and every buffer it
  // writes is stored, through the same conversions, SIMD target, tiles and threads, with p, m and v
  // each replaced by itself plus the gradient (so their values change). Compact masters are rebuilt
  // and split, 8-bit moments decoded and encoded with their new absmax, as step() does. kInvalidArgument, writing
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

// Compact master conversions for checkpoints and state I/O (the rule of AdamBuffers::master_residual),
// SIMD, single-threaded (call them per chunk from your own threads). split_master: fp32 master -> (hi,
// the bf16 bits rounded to nearest with ties away from zero, residual). join_master: (hi, residual) ->
// the fp32 master, bit for bit what split_master was given (NaN: a quiet NaN with the sign). A (hi,
// residual) pair split_master never produces (hi = +-0 with r < 0, or a NaN hi with r != 0) rebuilds
// to an unspecified value. kInvalidArgument, writing nothing, when the sizes differ.
Status split_master(std::span<const float> master, std::span<uint16_t> hi, std::span<int16_t> residual);
Status join_master(std::span<const uint16_t> hi, std::span<const int16_t> residual, std::span<float> master);

// 8-bit moment conversions for checkpoints (the code and block rule of kMomentBlock), SIMD,
// single-threaded. encode_moment_blocks: `values` -> codes (kI8 for m, kU8 for v) and one scale per
// block (the block's absmax; scales.size() == moment_block_count(values.size())). decode_moment_blocks:
// codes and scales -> values (decode(code) * scale). kInvalidArgument, writing nothing, when the sizes
// differ, a pointer with elements is null, or `codes` is neither kI8 nor kU8.
Status encode_moment_blocks(std::span<const float> values, Elements codes, std::span<float> scales);
Status decode_moment_blocks(ConstElements codes, std::span<const float> scales, std::span<float> values);

// The rounding of Highway's MulAdd (a * b + c) a SIMD target has: kFused, one rounding (the targets with
// FMA: AVX2, AVX-512, NEON on Arm64, SVE; and CUDA's __fmaf_rn), or kSeparate, a rounded product then a
// rounded sum (SSE4, SSSE3, scalar). It is the only way CpuAdam::step's bytes depend on the target.
enum class MulAddRounding : uint8_t { kFused, kSeparate };

// The MulAdd rounding of the SIMD target CpuAdam::step dispatches to now.
MulAddRounding simd_target_mul_add();

// The exact twin of CpuAdam::step for the compact master (master_residual set, no params16; grads fp32,
// bf16 or fp16; moments fp32, bf16, or 8-bit: kI8 m with kU8 v): one element at a time on the calling
// thread, from the arithmetic the GPU kernel compiles too (cpu_adam/internal/step_arithmetic.h). With
// `mul_add` == simd_target_mul_add() it writes exactly the bytes CpuAdam::step writes, for every input
// whose new params, m and v are finite (adam.h gives non-finite 8-bit moments no code, and x86's and
// CUDA's generated NaNs differ in sign). kInvalidArgument, writing nothing, for whatever CpuAdam::step
// refuses and for fp32 or 16-bit params without a residual.
Status step_portable(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& buffers,
                     MulAddRounding mul_add = MulAddRounding::kFused);

// The number of CUDA devices step_on_gpu can use: 0 when built without CUDA (TIERZERO_WITH_CUDA=OFF or
// no nvcc), or without a driver or a device.
int cuda_device_count();

// step_portable with kFused, computed on the current CUDA device: every buffer of `device_buffers` is
// device memory (its counts, types and spans as CpuAdam::step takes them; the host never reads
// through them). The step is enqueued on `cuda_stream` (a cudaStream_t; nullptr: the legacy default
// stream) and not waited for. The bytes equal step_portable's with kFused, hence CpuAdam::step's on an
// FMA target. kInvalidArgument as step_portable; kUnsupported when built without CUDA; kInternal naming
// the CUDA error when the launch fails.
Status step_on_gpu(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                   const AdamBuffers& device_buffers, void* cuda_stream);

// Name of the SIMD target the kernels dispatch to now ("AVX3", "AVX2", "SSE4", "NEON", ...).
std::string simd_target_name();

}  // namespace tierzero::cpu_adam
