// Range checks for numeric command-line options that say what is wrong in plain words:
// "--steps: must be a whole number from 1 to 1000000000, got 0" where CLI11's own Range prints the
// largest double in 309 digits.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace tierzero::tools {

// Accepts a whole number in [min, max] (no fraction, no exponent).
inline CLI::Validator whole_number_in(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (error == std::errc() && stop == end && value >= min && value <= max) return {};
        return fmt::format("must be a whole number from {} to {}, got {}", min, max, text);
      },
      fmt::format("[{}, {}]", min, max));
}

// Accepts a finite number in [min, max] (max_open: [min, max)).
inline CLI::Validator number_in(double min, double max, bool max_open = false) {
  return CLI::Validator(
      [min, max, max_open](std::string& text) -> std::string {
        char* stop = nullptr;
        const double value = std::strtod(text.c_str(), &stop);
        const bool whole_text = !text.empty() && stop == text.c_str() + text.size();
        if (whole_text && std::isfinite(value) && value >= min && (max_open ? value < max : value <= max)) return {};
        return fmt::format("must be a number from {} to {}{}, got {}", min, max, max_open ? " (exclusive)" : "",
                           text);
      },
      fmt::format("[{}, {}{}", min, max, max_open ? ")" : "]"));
}

}  // namespace tierzero::tools
