#include "common/internal/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <numeric>

namespace tierzero {

size_t edit_distance(std::string_view a, std::string_view b) {
  auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  // One row of the dynamic-programming table: row[j] = distance(a[0, i), b[0, j)).
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same(a[i - 1], b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> nearest_name(std::string_view given, const std::vector<std::string>& known) {
  std::optional<std::string> best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& name : known) {
    const size_t limit = std::clamp<size_t>(std::max(given.size(), name.size()) / 3, 2, 4);
    const size_t distance = edit_distance(given, name);
    if (distance <= limit && distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace tierzero
