// Private: writes one prefetched piece of a tensor into a SafetensorsWriter in its output dtype,
// encoding straight into the writer's staging buffers (no intermediate copy), spread over cores
// with oneTBB.
#pragma once

#include "checkpoint/convert/internal/tensor_prefetcher.h"
#include "checkpoint/dtype.h"
#include "checkpoint/safetensors/safetensors.h"

namespace tierzero::checkpoint {

// Appends `piece` (the next bytes of the tensor the writer is at) to `writer` as `out_dtype`.
// `stored` is what the tensor holds: F32 (fp32 values; `out_dtype` F32, BF16 or F16, rounded to
// nearest even) or an integer dtype (its bytes; `out_dtype` must be the same). Other combinations
// are kInvalidArgument.
Status write_tensor(SafetensorsWriter& writer, const PrefetchedPiece& piece, ElementType stored, ElementType out_dtype);

}  // namespace tierzero::checkpoint
