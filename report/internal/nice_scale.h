// Axis ranges and ticks from the data: "nice" numbers (1, 2, 5 x 10^k) on linear axes, powers
// of two on log2 axes.
#pragma once

#include <string>
#include <vector>

namespace tierzero::report::internal {

struct Ticks {
  double lo = 0;  // axis range, lo <= every value < = hi
  double hi = 1;
  std::vector<double> values;  // tick positions, lo and hi included
  double step = 1;             // spacing of linear ticks (log2: 0)
};

// About `target` ticks on 1/2/5 x 10^k steps with lo <= min and hi >= max. A range narrower than
// `min_relative_span` x max(|min|, |max|) widens to that span around its middle, as does an empty
// range (min == max, by 10 % of the value when no span is asked); `include_zero` pulls lo (or hi,
// for negative data) to 0. Requires finite min <= max and min_relative_span >= 0.
Ticks linear_ticks(double min, double max, int target = 6, bool include_zero = false, double min_relative_span = 0);

// Powers of two from 2^floor(log2 min) to 2^ceil(log2 max); every other one when there are more
// than 12. Requires 0 < min <= max.
Ticks log2_ticks(double min, double max);

// A tick's label: as many decimals as `step` needs ("0.25", "1.5", "20"); large values with a
// k/M/G suffix ("1.5M"). step 0: the shortest exact form.
std::string format_tick(double value, double step);

// Bytes as a power-of-two size: "4K", "1M", "1.5G", "512".
std::string format_bytes_tick(double bytes);

}  // namespace tierzero::report::internal
