// Host tensors as cpu_adam sees them: spans of fp32 / bf16 / fp16 elements. Shared by the CPU and
// NVMe optimizers and the gradient landing pipeline.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <span>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {

class NvmeParams;  // nvme_params.h

// The element type of a float tensor cpu_adam steps (fp32, bf16, fp16); throws tierzero::Error
// (internal) naming `what` and the dtype for any other.
ElementType float_element_type(at::ScalarType type, const char* what);

// Elements [begin, begin + count) of contiguous host tensor `t`.
cpu_adam::Elements tensor_elements(const at::Tensor& t, int64_t begin, int64_t count);

// Elements [begin, begin + count) of a moment buffer: fp32 / bf16 as tensor_elements, or the 8-bit
// codes (kChar: kI8 m, kByte: kU8 v).
cpu_adam::Elements moment_elements(const at::Tensor& t, int64_t begin, int64_t count);

// Scales [begin / kMomentBlock, + moment_block_count(count)) of an 8-bit moment's fp32 scales
// (`begin` a multiple of cpu_adam::kMomentBlock); empty when `scales` is undefined.
std::span<float> moment_scales(const at::Tensor& scales, int64_t begin, int64_t count);

// cpu_adam::split_master on LibTorch's intra-op threads, a slice of at least 1 Mi elements each
// (element by element: one call's bits), for the start-up and loads, which run beside no step.
// Throws tierzero::Error on a size mismatch.
void split_master_parallel(std::span<const float> master, std::span<uint16_t> hi, std::span<int16_t> residual);

// Compact master conversions over host tensors (split_master_parallel / cpu_adam::join_master):
// elements [begin, begin + n) of `hi` (bf16) and `residual` (int16) from / into `master` (n fp32).
// Throw tierzero::Error on a size mismatch.
void split_master_range(std::span<const float> master, const at::Tensor& hi, const at::Tensor& residual, int64_t begin);
void join_master_range(const at::Tensor& hi, const at::Tensor& residual, int64_t begin, std::span<float> master);
// 8-bit moments: `values` (fp32) encoded into / decoded from elements [begin, begin + n) of `codes`
// (kChar / kByte) and their scales (`begin` a multiple of cpu_adam::kMomentBlock).
void encode_moment_range(std::span<const float> values, const at::Tensor& codes, const at::Tensor& scales,
                         int64_t begin);
void decode_moment_range(const at::Tensor& codes, const at::Tensor& scales, int64_t begin, std::span<float> values);

// Where optimizer state `s` (0 the master, 1 exp_avg, 2 exp_avg_sq) of a run of elements lives:
// `part`, the fp32 master or a compact master's int16 residual, the moment or its 8-bit codes;
// `scales`, 8-bit moments' block scales; `hi`, a compact master's bf16 half (indexed as `part`).
// `converted`: held in another form than its checkpoint's (a compact master, 8-bit moments).
struct StateHome {
  int s = 0;
  bool converted = false;
  at::Tensor part, scales, hi;
};
// Elements [begin, begin + n) of `home`'s state in its checkpoint dtype into `out` (n elements of
// it) / from `in`: copied, joined / split (compact master) or decoded / encoded (8-bit moments,
// `begin` on a block). Throw tierzero::Error.
void read_state(const StateHome& home, int64_t begin, std::span<std::byte> out);
void write_state(const StateHome& home, int64_t begin, std::span<const std::byte> in);

// `src` (fp32, host) into `dst` (any float dtype and device, same numel): bf16 rounded to nearest
// with ties away from zero when `away` (the compact master's high half), else as Tensor::copy_ casts.
void copy_rounded(const at::Tensor& dst, const at::Tensor& src, bool away);

// cpu_adam's hyper-parameters for the optimizer `config` at learning rate `lr`.
cpu_adam::AdamHyperParams cpu_adam_hyper_params(const AdamConfig& config, double lr);

// Where an offloaded optimizer writes the new 16-bit weights of `compute_partition` (`numel`
// elements).
struct SixteenBitOutput {
  bool sixteen_bit = false;            // the compute partition is bf16 / fp16 (else nothing is written)
  bool in_place = false;               // the kernel writes compute_partition itself (host memory)
  at::Tensor out;                      // what the kernel writes: compute_partition, or the staging buffer
  NvmeParams* sink = nullptr;          // the partition is on NVMe: each range goes through a lent window
};
// Through `sink` when compute_partition is undefined (parameters on NVMe); in place when the
// partition is 16-bit, contiguous and in host memory (ZeRO-3 offloaded parameters, a CPU run); else
// into `staging`, copied to the device after each sub-group. Throws tierzero::Error (internal,
// naming `who`) when a device partition needs a staging buffer of its dtype and `numel` and
// `staging` is not one, or an undefined partition has no sink.
SixteenBitOutput sixteen_bit_output(const at::Tensor& compute_partition, const at::Tensor& staging, int64_t numel,
                                    const char* who, NvmeParams* sink);

}  // namespace tierzero::engine
