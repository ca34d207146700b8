// A bounded walk over an unpickled value: visits at most a fixed number of values, to a fixed
// depth, so a cyclic or huge pickle cannot make a harness hang.
#pragma once

#include <functional>

#include "checkpoint/torch_format/internal/pickle_value.h"

namespace tierzero::fuzz {

// Calls `visit` on `root` and the values below it (items, dict keys and values, an object's
// callable, arguments and state), depth first, at most 4096 values and 32 levels deep.
void walk_values(const checkpoint::PyValue& root, const std::function<void(const checkpoint::PyValue&)>& visit);

}  // namespace tierzero::fuzz
