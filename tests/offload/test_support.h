// Helpers shared by the offload tests: budgets sized for CI, an IoEngine, and byte access to a
// held view in any tier (device memory through cudaMemcpy). Scratch directories: tests/support.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "offload/tier_manager.h"

namespace tierzero::offload::testing {

// Small budgets: `gpu` / `pinned` / `nvme` bytes, 64 KiB chunks, triple buffering, 4 threads.
TierBudgets small_budgets(const std::string& nvme_dir, uint64_t gpu, uint64_t pinned, uint64_t nvme);

// An IoEngine with the default config (auto backend); fails the test when it cannot be made.
std::unique_ptr<nvme::IoEngine> make_io();

// Copies between host memory and a held view (GPU views may be device memory).
void write_view(const ShardView& view, uint64_t offset, const void* src, uint64_t bytes);
std::vector<uint8_t> read_view(const ShardView& view);
// The bytes of shard `id`, fetched into the pinned tier and released again; the test fails (and
// the result is empty) when the fetch or the release fails.
std::vector<uint8_t> pinned_contents(TierManager& tm, const std::string& id);

// "" when `actual` equals `expected`; else where they first differ and how many bytes differ:
// "first difference at byte 812 of 4096: expected 0x3a, actual 0x00 (3284 bytes differ)".
std::string first_difference(const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual);

// Deterministic bytes for (seed, length).
std::vector<uint8_t> pattern(uint64_t seed, uint64_t bytes);

}  // namespace tierzero::offload::testing
