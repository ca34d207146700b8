// Byte sizes as people write them ("5GB", "1MiB", "1e8", "4096") and as tierzero prints them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/internal/status.h"

namespace tierzero {

// Parses a byte count: plain integers, scientific notation ("5e8"), and the suffixes
// K/M/G/T (powers of 1000, with or without "B") and KiB/MiB/GiB/TiB (powers of 1024), case
// insensitive. Returns kInvalidArgument naming `text` for anything else, negative or fractional
// byte counts, or values beyond 2^63.
Result<uint64_t> parse_bytes(std::string_view text);

// Formats `bytes` with a binary suffix and 2 decimals ("1.50 GiB"); below 1 KiB as "N B".
std::string format_bytes(uint64_t bytes);

// Formats a rate in decimal units ("2.13 GB/s"), as benchmarks report them (1 GB = 1e9 bytes).
std::string format_rate(double bytes_per_second);

}  // namespace tierzero
