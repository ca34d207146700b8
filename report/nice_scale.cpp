#include "report/internal/nice_scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tierzero::report::internal {

namespace {

// The nice number (1, 2, 5 x 10^k) nearest above `x`.
double nice_step(double x) {
  const double exponent = std::floor(std::log10(x));
  const double fraction = x / std::pow(10.0, exponent);
  const double nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * std::pow(10.0, exponent);
}

std::string printf_string(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// `v` with `decimals` decimals, "-0" written "0".
std::string fixed(double v, int decimals) {
  std::string s = printf_string(("%." + std::to_string(decimals) + "f").c_str(), v);
  if (s.find_first_not_of("-0.") == std::string::npos) return "0";
  return s;
}

int decimals_for(double step) {
  if (step <= 0 || step >= 1) return 0;
  return std::min(12, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
}

}  // namespace

Ticks linear_ticks(double min, double max, int target, bool include_zero, double min_relative_span) {
  const double span = min_relative_span * std::max(std::fabs(min), std::fabs(max));
  if (max - min < span) {
    const double middle = min + (max - min) / 2;
    min = middle - span / 2;
    max = middle + span / 2;
  }
  if (include_zero) {
    min = std::min(min, 0.0);
    max = std::max(max, 0.0);
  }
  if (min == max) {
    const double pad = min == 0 ? 1 : std::fabs(min) * 0.1;
    min -= include_zero && min == 0 ? 0 : pad;
    max += include_zero && max == 0 && min < 0 ? 0 : pad;
  }
  Ticks t;
  t.step = nice_step((max - min) / std::max(1, target - 1));
  t.lo = std::floor(min / t.step + 1e-9) * t.step;
  t.hi = std::ceil(max / t.step - 1e-9) * t.step;
  const int count = static_cast<int>(std::lround((t.hi - t.lo) / t.step));
  for (int i = 0; i <= count; ++i) t.values.push_back(t.lo + i * t.step);
  return t;
}

Ticks log2_ticks(double min, double max) {
  const int first = static_cast<int>(std::floor(std::log2(min) + 1e-9));
  int last = static_cast<int>(std::ceil(std::log2(max) - 1e-9));
  if (last == first) ++last;
  const int stride = last - first > 12 ? 2 : 1;
  Ticks t;
  t.step = 0;
  for (int e = first; e <= last; e += stride) t.values.push_back(std::ldexp(1.0, e));
  if (std::log2(t.values.back()) < last) t.values.push_back(std::ldexp(1.0, last));
  t.lo = t.values.front();
  t.hi = t.values.back();
  return t;
}

std::string format_tick(double value, double step) {
  const double a = std::fabs(value);
  if (step == 0) return printf_string("%.6g", value);
  if (a >= 1e9 && step >= 1e8) return fixed(value / 1e9, decimals_for(step / 1e9)) + "G";
  if (a >= 1e6 && step >= 1e5) return fixed(value / 1e6, decimals_for(step / 1e6)) + "M";
  if (a >= 1e4 && step >= 1e3) return fixed(value / 1e3, decimals_for(step / 1e3)) + "k";
  if (a != 0 && a < 1e-3 && step < 1e-3) return printf_string("%.1e", value);
  return fixed(value, decimals_for(step));
}

std::string format_bytes_tick(double bytes) {
  static const char* const kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return printf_string(bytes == std::floor(bytes) ? "%.0f" : "%.1f", bytes) + kUnits[unit];
}

}  // namespace tierzero::report::internal
