// tierzero's common vocabulary, the one header other components include: Status / Result and the
// Error exception (internal/status.h), byte units and their parsing (internal/units.h), the element
// types every layer shares (internal/element_type.h), ZeRO partition arithmetic
// (internal/partition.h), bulk fp32 <-> 16-bit conversion (internal/float_convert.h), the progress
// bar (internal/progress.h), benchmark tables / JSON (internal/bench_report.h) and the nearest
// known name for "did you mean ...?" errors (internal/nearest_name.h).
// SIMD code inside a Highway per-target translation unit includes common/common-inl.h for the
// per-vector conversions, following Highway's own -inl.h convention.
#pragma once

#include "common/internal/bench_report.h"
#include "common/internal/element_type.h"
#include "common/internal/float_convert.h"
#include "common/internal/nearest_name.h"
#include "common/internal/partition.h"
#include "common/internal/progress.h"
#include "common/internal/status.h"
#include "common/internal/units.h"
