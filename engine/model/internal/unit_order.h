// Private to engine/model: which unit a LoRA run's frozen base is asked for next. Requests come in
// runs and in order: ascending in the forward, descending in the backward, turning at either end of
// the model (the head is followed by the unit before it, unit 0 by unit 1). FrozenPrefetch copies
// that unit ahead to the GPU; FrozenDisk reads it ahead from NVMe.
#pragma once

#include <cstddef>

namespace tierzero::engine {

// The unit after `u` of `num_units` when the requests last moved up (`ascending`) or down; `u`
// itself only for a one-unit model.
inline size_t next_unit(size_t u, bool ascending, size_t num_units) {
  if (ascending) return u + 1 < num_units ? u + 1 : (u > 0 ? u - 1 : u);
  return u > 0 ? u - 1 : (u + 1 < num_units ? u + 1 : u);
}

}  // namespace tierzero::engine
