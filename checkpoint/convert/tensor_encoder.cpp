#include "checkpoint/convert/internal/tensor_encoder.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

constexpr uint64_t kGrainBytes = 256 << 10;  // input bytes per parallel task

// Encodes `n` elements from `in` to `out`: a byte copy (in_item == out_item == 1) or fp32 -> 16 bits.
// `out` may be unaligned (an odd-sized integer tensor can precede), hence the byte stores.
using Kernel = void (*)(const std::byte* in, std::byte* out, uint64_t n);

void copy_bytes(const std::byte* in, std::byte* out, uint64_t n) { std::memcpy(out, in, n); }

template <void (*Round)(std::span<const float>, void*)>
void round_floats(const std::byte* in, std::byte* out, uint64_t n) {
  Round(std::span(reinterpret_cast<const float*>(in), n), out);  // the prefetcher's buffers are aligned
}

}  // namespace

Status write_tensor(SafetensorsWriter& writer, const PrefetchedPiece& piece, ElementType stored,
                    ElementType out_dtype) {
  Kernel kernel = copy_bytes;
  uint64_t in_item = 1, out_item = 1;
  if (stored == ElementType::kF32 && out_dtype == ElementType::kBF16) {
    kernel = round_floats<floats_to_bf16>;
    in_item = 4, out_item = 2;
  } else if (stored == ElementType::kF32 && out_dtype == ElementType::kF16) {
    kernel = round_floats<floats_to_fp16>;
    in_item = 4, out_item = 2;
  } else if (stored != out_dtype) {
    return invalid_argument(
        fmt::format("a {} tensor cannot be written as {}", dtype_name(stored), dtype_name(out_dtype)));
  }
  const uint64_t total = piece.bytes / in_item;
  const std::byte* in = piece.data;
  for (uint64_t done = 0; done < total;) {
    TZ_ASSIGN_OR_RETURN(std::span<std::byte> out, writer.reserve((total - done) * out_item));
    const uint64_t n = std::min(total - done, out.size() / out_item);
    if (n == 0) {  // less room than one element before the buffer's end: stage that element
      std::byte element[2];
      kernel(in + done * in_item, element, 1);
      TZ_RETURN_IF_ERROR(writer.append(std::span(element, out_item)));
      done += 1;
      continue;
    }
    const std::byte* from = in + done * in_item;
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, std::max<uint64_t>(1, kGrainBytes / in_item)),
                      [&](const tbb::blocked_range<uint64_t>& r) {
                        kernel(from + r.begin() * in_item, out.data() + r.begin() * out_item, r.size());
                      });
    TZ_RETURN_IF_ERROR(writer.commit(n * out_item));
    done += n;
  }
  return {};
}

}  // namespace tierzero::checkpoint
