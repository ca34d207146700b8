#include "common/internal/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tierzero {

Result<uint64_t> parse_bytes(std::string_view text) {
  std::string s(text);
  auto bad = [&](const char* why) {
    return invalid_argument("cannot read '" + s + "' as a byte count (" + why +
                            "); write e.g. 4096, 1e8, 512MiB or 5GB");
  };
  if (s.empty()) return bad("empty");
  char* end = nullptr;
  double number = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return bad("no number");
  std::string suffix(end);
  for (auto& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (suffix.empty() || suffix == "b")
    scale = 1;
  else if (suffix == "k" || suffix == "kb")
    scale = 1e3;
  else if (suffix == "m" || suffix == "mb")
    scale = 1e6;
  else if (suffix == "g" || suffix == "gb")
    scale = 1e9;
  else if (suffix == "t" || suffix == "tb")
    scale = 1e12;
  else if (suffix == "kib")
    scale = 1024.0;
  else if (suffix == "mib")
    scale = 1024.0 * 1024;
  else if (suffix == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return bad("unknown suffix");
  double bytes = number * scale;
  if (!std::isfinite(bytes) || bytes < 0) return bad("negative or not finite");
  if (bytes >= 9.2e18) return bad("too large");
  if (bytes != std::floor(bytes)) return bad("not a whole number of bytes");
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[unit]);
  return buf;
}

std::string format_rate(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB/s", bytes_per_second / 1e9);
  return buf;
}

}  // namespace tierzero
