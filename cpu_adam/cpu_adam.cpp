// CpuAdam: argument checks, per-step scalars, and tiling over a oneTBB arena.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "cpu_adam/adam.h"
#include "cpu_adam/internal/kernels.h"
#include "cpu_adam/internal/step_setup.h"
#include "cpu_adam/internal/thread_pinning.h"

namespace tierzero::cpu_adam {

struct CpuAdam::Arena {
  explicit Arena(const CpuAdamOptions& options) {
    std::vector<int> cpus = detail::allowed_cpus();
    const int threads = options.threads > 0 ? options.threads : static_cast<int>(cpus.size());
    arena.initialize(threads);
    if (options.pin_threads) pinner.emplace(arena, std::move(cpus));
  }
  tbb::task_arena arena;
  std::optional<detail::ThreadPinner> pinner;
};

namespace {

// Tiles a thread takes at a time: 4 x 16 Ki elements is ~0.1 ms of work, far above a task's cost.
constexpr size_t kTilesPerTask = 4;

// Runs body(tile index, begin, end) over [0, count) in tiles of `tile` elements, handed to the
// arena's threads kTilesPerTask at a time as each becomes free. Not a static split, which waits for
// whichever thread lost its core for a while (to a training step's compute, copy and gradient
// threads, or to a VM's host): the 14B step's optimizer ran 2.8 s split statically, 2.2 s handed
// out, on the same H100 box (cpu_adam/README.md, "Threads").
template <class Body>
void for_each_tile(tbb::task_arena& arena, size_t count, size_t tile, const Body& body) {
  const size_t tiles = (count + tile - 1) / tile;
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, tiles, kTilesPerTask),
        [&](const tbb::blocked_range<size_t>& r) {
          for (size_t t = r.begin(); t != r.end(); ++t) body(t, t * tile, std::min(count, (t + 1) * tile));
        },
        tbb::simple_partitioner());
  });
}

std::string count_mismatch(const char* what, size_t got, size_t want) {
  return std::string(what) + " has " + std::to_string(got) + " elements but params has " + std::to_string(want);
}

// The element count of a step: that of whichever params buffer is set.
size_t param_count(const AdamBuffers& b) { return b.params_16bit.count != 0 ? b.params_16bit.count : b.params.size(); }

Status check_compact_master(const AdamBuffers& b) {
  if (b.master_residual.empty()) return {};
  if (!b.params.empty()) {
    return invalid_argument(
        "master_residual is set with fp32 params: the compact master is params_16bit (bf16) plus "
        "master_residual, with params empty");
  }
  if (b.params_16bit.type != ElementType::kBF16) {
    return invalid_argument(std::string("master_residual needs bf16 params_16bit, got ") +
                            element_type_name(b.params_16bit.type));
  }
  if (b.params_16bit.count != b.master_residual.size()) {
    return invalid_argument("master_residual has " + std::to_string(b.master_residual.size()) +
                            " elements but params_16bit has " + std::to_string(b.params_16bit.count));
  }
  if (b.master_residual.data() == nullptr) return invalid_argument("master_residual has a null data pointer");
  return {};
}

Status check_params(const AdamBuffers& b) {
  TZ_RETURN_IF_ERROR(check_compact_master(b));
  if (b.params_16bit.count == 0) return {};
  if (!b.params.empty()) {
    return invalid_argument("params (fp32) and params_16bit are both set: pass the params in exactly one of them");
  }
  if (b.params_16bit.type == ElementType::kF32) {
    return invalid_argument("params_16bit must be bf16 or fp16; pass fp32 params in AdamBuffers::params");
  }
  if (b.params16.count != 0) {
    return invalid_argument("params16 must be empty with params_16bit: the 16-bit params are updated in place");
  }
  return {};
}

bool eight_bit(ElementType type) { return type == ElementType::kI8 || type == ElementType::kU8; }

// 8-bit moments: kI8 m with kU8 v, and a scale per block of each; scales only with them.
Status check_moments(const AdamBuffers& b, size_t n) {
  const bool m8 = eight_bit(b.exp_avg.type), v8 = eight_bit(b.exp_avg_sq.type);
  if (!m8 && !v8) {
    if (!b.exp_avg_scales.empty() || !b.exp_avg_sq_scales.empty()) {
      return invalid_argument("exp_avg_scales / exp_avg_sq_scales are set but the moments are not 8-bit");
    }
    return {};
  }
  if (b.exp_avg.type != ElementType::kI8 || b.exp_avg_sq.type != ElementType::kU8) {
    return invalid_argument(std::string("8-bit moments are exp_avg i8 with exp_avg_sq u8, got ") +
                            element_type_name(b.exp_avg.type) + " and " + element_type_name(b.exp_avg_sq.type));
  }
  const size_t blocks = moment_block_count(n);
  if (b.exp_avg_scales.size() != blocks || b.exp_avg_sq_scales.size() != blocks) {
    return invalid_argument("8-bit moments of " + std::to_string(n) + " elements need " + std::to_string(blocks) +
                            " scales each (one per " + std::to_string(kMomentBlock) + "), got " +
                            std::to_string(b.exp_avg_scales.size()) + " and " +
                            std::to_string(b.exp_avg_sq_scales.size()));
  }
  if (blocks > 0 && (b.exp_avg_scales.data() == nullptr || b.exp_avg_sq_scales.data() == nullptr)) {
    return invalid_argument("an 8-bit moment scale buffer has a null data pointer");
  }
  return {};
}

// The kernels read and write fp32, bf16 and fp16 only (and 8-bit moments, checked apart).
Status check_kernel_type(const char* buffer, ElementType type) {
  if (type == ElementType::kF32 || type == ElementType::kBF16 || type == ElementType::kF16) return {};
  return invalid_argument(std::string(buffer) + " holds " + element_type_name(type) +
                          " elements: the Adam kernels take fp32, bf16 or fp16");
}

}  // namespace

namespace detail {

Status check_buffers(const AdamBuffers& b) {
  TZ_RETURN_IF_ERROR(check_kernel_type("grads", b.grads.type));
  if (!eight_bit(b.exp_avg.type)) TZ_RETURN_IF_ERROR(check_kernel_type("exp_avg", b.exp_avg.type));
  if (!eight_bit(b.exp_avg_sq.type)) TZ_RETURN_IF_ERROR(check_kernel_type("exp_avg_sq", b.exp_avg_sq.type));
  TZ_RETURN_IF_ERROR(check_kernel_type("params16", b.params16.type));
  TZ_RETURN_IF_ERROR(check_kernel_type("params_16bit", b.params_16bit.type));
  TZ_RETURN_IF_ERROR(check_params(b));
  const size_t n = param_count(b);
  if (b.grads.count != n) return invalid_argument(count_mismatch("grads", b.grads.count, n));
  if (b.exp_avg.count != n) return invalid_argument(count_mismatch("exp_avg", b.exp_avg.count, n));
  if (b.exp_avg_sq.count != n) return invalid_argument(count_mismatch("exp_avg_sq", b.exp_avg_sq.count, n));
  if (b.params16.count != 0 && b.params16.count != n) {
    return invalid_argument(count_mismatch("params16", b.params16.count, n));
  }
  const bool null_params = b.params_16bit.count != 0 ? b.params_16bit.data == nullptr : b.params.data() == nullptr;
  if (n > 0 && (null_params || b.grads.data == nullptr || b.exp_avg.data == nullptr || b.exp_avg_sq.data == nullptr ||
                (b.params16.count != 0 && b.params16.data == nullptr))) {
    return invalid_argument("an Adam buffer with elements has a null data pointer");
  }
  TZ_RETURN_IF_ERROR(check_moments(b, n));
  if (!eight_bit(b.exp_avg.type) && (b.exp_avg.type == ElementType::kF16 || b.exp_avg.type != b.exp_avg_sq.type)) {
    return invalid_argument(std::string("exp_avg and exp_avg_sq must both be fp32 or both bf16 (or i8 and u8), got ") +
                            element_type_name(b.exp_avg.type) + " and " + element_type_name(b.exp_avg_sq.type));
  }
  if (b.params16.count != 0 && b.params16.type == ElementType::kF32) {
    return invalid_argument("params16 must be bf16 or fp16 (the fp32 params are updated in place)");
  }
  if (b.params16.count != 0 && b.params16.type == ElementType::kF16 &&
      b.params16_rounding == Bf16Rounding::kNearestAway) {
    return invalid_argument("params16_rounding kNearestAway is for a bf16 params16; fp16 rounds to nearest even");
  }
  return {};
}

Status check_hyper_params(const AdamHyperParams& hp, int64_t step) {
  if (!(hp.lr >= 0.0) || !std::isfinite(hp.lr)) return invalid_argument("lr must be finite and >= 0");
  if (!(hp.beta1 >= 0.0 && hp.beta1 < 1.0)) return invalid_argument("beta1 must be in [0, 1)");
  if (!(hp.beta2 >= 0.0 && hp.beta2 < 1.0)) return invalid_argument("beta2 must be in [0, 1)");
  if (!(hp.eps >= 0.0) || !std::isfinite(hp.eps)) return invalid_argument("eps must be finite and >= 0");
  if (!(hp.weight_decay >= 0.0) || !std::isfinite(hp.weight_decay)) {
    return invalid_argument("weight_decay must be finite and >= 0");
  }
  if (step < 1) return invalid_argument("step is " + std::to_string(step) + ": steps are numbered from 1");
  return {};
}

// The scalars of at::_fused_adam(w)_: bias corrections in double, then rounded to float.
StepScalars step_scalars(const AdamHyperParams& hp, int64_t step, float grad_multiplier) {
  const double steps = static_cast<double>(step);
  const double bias_correction1 = hp.bias_correction ? 1.0 - std::pow(hp.beta1, steps) : 1.0;
  const double bias_correction2 = hp.bias_correction ? 1.0 - std::pow(hp.beta2, steps) : 1.0;
  const float lerp_weight = static_cast<float>(1.0 - hp.beta1);
  const bool lerp_base_is_grad = !(std::abs(lerp_weight) < 0.5f);
  const bool adamw = hp.mode == AdamMode::kAdamW;
  return StepScalars{
      .grad_multiplier = grad_multiplier,
      .l2_decay = adamw ? 0.0f : static_cast<float>(hp.weight_decay),
      .param_decay = adamw ? static_cast<float>(1.0 - hp.lr * hp.weight_decay) : 1.0f,
      .lerp_coeff = lerp_base_is_grad ? lerp_weight - 1.0f : lerp_weight,
      .lerp_base_is_grad = lerp_base_is_grad,
      .beta2 = static_cast<float>(hp.beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - hp.beta2),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
      .eps = static_cast<float>(hp.eps),
      .neg_step_size = static_cast<float>(-(hp.lr / bias_correction1)),
  };
}

Status check_step(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& b) {
  TZ_RETURN_IF_ERROR(check_buffers(b));
  TZ_RETURN_IF_ERROR(check_hyper_params(hp, step_number));
  if (!std::isfinite(grad_multiplier)) return invalid_argument("grad_multiplier must be finite");
  return {};
}

}  // namespace detail

namespace {

template <class T>
T* offset(T* base, ElementType type, size_t index) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return static_cast<T*>(static_cast<Byte*>(base) + index * element_size(type));
}

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// Runs kernel(types, tile) on every tile of the step over `b` (checked buffers) over `arena`'s
// threads (for_each_tile); with `streaming_stores`, a tile whose written buffers are all 64-byte
// aligned streams its fp32 stores.
template <class Kernel>
void for_each_step_tile(tbb::task_arena& arena, size_t tile_elements, bool streaming_stores, const AdamBuffers& b,
                        const Kernel& kernel) {
  const Elements params = b.params_16bit.count != 0 ? b.params_16bit : elements(b.params);
  const bool compact = !b.master_residual.empty();
  const bool eight = b.exp_avg.type == ElementType::kI8;
  const detail::TileTypes types{params.type,     b.grads.type, eight ? ElementType::kI8 : b.exp_avg.type,
                                b.params16.type, compact,      b.params16_rounding == Bf16Rounding::kNearestAway};
  const bool write16 = b.params16.count != 0;
  // 8-bit moments: a tile is whole blocks (only the last one partial), never split between threads.
  const size_t tile = eight ? (tile_elements + kMomentBlock - 1) / kMomentBlock * kMomentBlock : tile_elements;
  for_each_tile(arena, params.count, tile, [&](size_t, size_t begin, size_t end) {
    detail::TileBuffers tile{
        .params = offset(params.data, params.type, begin),
        .grads = offset(b.grads.data, b.grads.type, begin),
        .exp_avg = offset(b.exp_avg.data, b.exp_avg.type, begin),
        .exp_avg_sq = offset(b.exp_avg_sq.data, b.exp_avg_sq.type, begin),
        .params16 = write16 ? offset(b.params16.data, b.params16.type, begin) : nullptr,
        .count = end - begin,
        .stream = false,
        .residual = compact ? b.master_residual.data() + begin : nullptr,
        .exp_avg_scales = eight ? b.exp_avg_scales.data() + begin / kMomentBlock : nullptr,
        .exp_avg_sq_scales = eight ? b.exp_avg_sq_scales.data() + begin / kMomentBlock : nullptr,
    };
    tile.stream = streaming_stores && !eight && aligned64(tile.params) && aligned64(tile.exp_avg) &&
                  aligned64(tile.exp_avg_sq) && (!write16 || aligned64(tile.params16));
    kernel(types, tile);
  });
}

// One double per cache line, so threads writing neighbouring tiles' sums do not share lines.
struct alignas(64) PaddedSum {
  double value = 0.0;
};

// Runs tile_sum(begin, end) -> double over [0, count) as for_each_tile does, and adds the tiles'
// sums in tile order (the same total for any thread count): the squared norm and whether it is finite.
template <class TileSum>
GradStats sum_tiles(tbb::task_arena& arena, size_t count, size_t tile, const TileSum& tile_sum) {
  std::vector<PaddedSum> partial((count + tile - 1) / tile);
  for_each_tile(arena, count, tile,
                [&](size_t t, size_t begin, size_t end) { partial[t].value = tile_sum(begin, end); });
  GradStats stats;
  for (const PaddedSum& s : partial) stats.sq_norm += s.value;
  stats.finite = std::isfinite(stats.sq_norm);
  return stats;
}

// accumulate_scaled's checks of dst (of `dst_count` elements at `dst_data`) against src.
Status check_accumulate(const void* dst_data, size_t dst_count, const ConstElements& src) {
  if (src.count != dst_count) {
    return invalid_argument("accumulate_scaled: src has " + std::to_string(src.count) + " elements but dst has " +
                            std::to_string(dst_count));
  }
  if (dst_count != 0 && (dst_data == nullptr || src.data == nullptr)) {
    return invalid_argument("accumulate_scaled: a buffer with elements has a null data pointer");
  }
  return {};
}

}  // namespace

CpuAdam::CpuAdam(CpuAdamOptions options)
    : arena_(std::make_unique<Arena>(options)),
      tile_elements_((std::max<size_t>(options.tile_elements, 1) + 63) / 64 * 64),
      streaming_stores_(options.streaming_stores) {}

CpuAdam::~CpuAdam() = default;

int CpuAdam::threads() const { return arena_->arena.max_concurrency(); }

GradStats CpuAdam::grad_stats(ConstElements grads) const {
  return sum_tiles(arena_->arena, grads.count, tile_elements_, [&](size_t begin, size_t end) {
    return detail::grad_sq_norm_tile(offset(grads.data, grads.type, begin), grads.type, end - begin);
  });
}

Result<GradStats> CpuAdam::accumulate_scaled(std::span<float> dst, ConstElements src, float scale) const {
  TZ_RETURN_IF_ERROR(check_accumulate(dst.data(), dst.size(), src));
  return sum_tiles(arena_->arena, dst.size(), tile_elements_, [&](size_t begin, size_t end) {
    return detail::accumulate_scaled_tile(dst.data() + begin, offset(src.data, src.type, begin), src.type, end - begin,
                                          scale);
  });
}

Result<GradStats> CpuAdam::accumulate_scaled(std::span<uint16_t> dst, ConstElements src, float scale) const {
  TZ_RETURN_IF_ERROR(check_accumulate(dst.data(), dst.size(), src));
  return sum_tiles(arena_->arena, dst.size(), tile_elements_, [&](size_t begin, size_t end) {
    return detail::accumulate_scaled_bf16_tile(dst.data() + begin, offset(src.data, src.type, begin), src.type,
                                               end - begin, scale);
  });
}

Status CpuAdam::step(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                     const AdamBuffers& b) const {
  TZ_RETURN_IF_ERROR(detail::check_step(hp, step_number, grad_multiplier, b));
  const detail::StepScalars scalars = detail::step_scalars(hp, step_number, grad_multiplier);
  const auto update = [&](const detail::TileTypes& types, const detail::TileBuffers& tile) {
    detail::adam_update_tile(scalars, types, tile);
  };
  for_each_step_tile(arena_->arena, tile_elements_, streaming_stores_, b, update);
  return {};
}

Status CpuAdam::memory_pass(const AdamBuffers& b) const {
  TZ_RETURN_IF_ERROR(detail::check_buffers(b));
  for_each_step_tile(arena_->arena, tile_elements_, streaming_stores_, b, detail::memory_pass_tile);
  return {};
}

Result<ClippedStepOutcome> CpuAdam::step_with_clipping(const AdamHyperParams& hp, int64_t step_number,
                                                       double loss_scale, double max_grad_norm,
                                                       const AdamBuffers& b) const {
  TZ_RETURN_IF_ERROR(detail::check_buffers(b));
  TZ_RETURN_IF_ERROR(detail::check_hyper_params(hp, step_number));
  if (!(loss_scale > 0.0) || !std::isfinite(loss_scale)) return invalid_argument("loss_scale must be finite and > 0");
  const GradStats stats = grad_stats(b.grads);
  ClippedStepOutcome outcome;
  outcome.grad_norm = std::sqrt(stats.sq_norm) / loss_scale;
  if (!stats.finite) {
    outcome.skipped = true;
    return outcome;
  }
  if (max_grad_norm > 0.0) outcome.clip_coef = std::min(1.0, max_grad_norm / (outcome.grad_norm + 1e-6));
  TZ_RETURN_IF_ERROR(step(hp, step_number, static_cast<float>(outcome.clip_coef / loss_scale), b));
  return outcome;
}

namespace {

// The checks of split_master and join_master (`what`): three buffers of one size, with data if any.
Status check_master_spans(const char* what, std::span<const float> master, std::span<const uint16_t> hi,
                          std::span<const int16_t> residual) {
  if (hi.size() != master.size() || residual.size() != master.size()) {
    return invalid_argument(std::string(what) + ": master has " + std::to_string(master.size()) + " elements, hi " +
                            std::to_string(hi.size()) + ", residual " + std::to_string(residual.size()));
  }
  if (!master.empty() && (master.data() == nullptr || hi.data() == nullptr || residual.data() == nullptr)) {
    return invalid_argument(std::string(what) + ": a buffer with elements has a null data pointer");
  }
  return {};
}

}  // namespace

Status split_master(std::span<const float> master, std::span<uint16_t> hi, std::span<int16_t> residual) {
  TZ_RETURN_IF_ERROR(check_master_spans("split_master", master, hi, residual));
  detail::split_master_n(master.data(), hi.data(), residual.data(), master.size());
  return {};
}

Status join_master(std::span<const uint16_t> hi, std::span<const int16_t> residual, std::span<float> master) {
  TZ_RETURN_IF_ERROR(check_master_spans("join_master", master, hi, residual));
  detail::join_master_n(hi.data(), residual.data(), master.data(), master.size());
  return {};
}

namespace {

Status check_moment_blocks(const char* what, ElementType type, const void* codes, size_t count, const void* values,
                           size_t value_count, const float* scales, size_t scale_count) {
  if (!eight_bit(type)) {
    return invalid_argument(std::string(what) + ": codes hold " + element_type_name(type) + ", not i8 (m) or u8 (v)");
  }
  if (count != value_count || scale_count != moment_block_count(count)) {
    return invalid_argument(std::string(what) + ": " + std::to_string(value_count) + " values, " +
                            std::to_string(count) + " codes and " + std::to_string(scale_count) +
                            " scales (need equal counts and one scale per " + std::to_string(kMomentBlock) + ")");
  }
  if (count > 0 && (codes == nullptr || values == nullptr || scales == nullptr)) {
    return invalid_argument(std::string(what) + ": a buffer with elements has a null data pointer");
  }
  return {};
}

}  // namespace

Status encode_moment_blocks(std::span<const float> values, Elements codes, std::span<float> scales) {
  TZ_RETURN_IF_ERROR(check_moment_blocks("encode_moment_blocks", codes.type, codes.data, codes.count, values.data(),
                                         values.size(), scales.data(), scales.size()));
  detail::encode_moment_blocks_n(values.data(), values.size(), codes.data, codes.type == ElementType::kI8,
                                 scales.data());
  return {};
}

Status decode_moment_blocks(ConstElements codes, std::span<const float> scales, std::span<float> values) {
  TZ_RETURN_IF_ERROR(check_moment_blocks("decode_moment_blocks", codes.type, codes.data, codes.count, values.data(),
                                         values.size(), scales.data(), scales.size()));
  detail::decode_moment_blocks_n(codes.data, codes.type == ElementType::kI8, scales.data(), values.data(),
                                 values.size());
  return {};
}

std::string simd_target_name() { return detail::dispatched_target_name(); }

}  // namespace tierzero::cpu_adam
