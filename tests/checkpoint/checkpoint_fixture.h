// A small sharded engine checkpoint built from known full tensors, shared by the engine
// checkpoint and consolidation tests.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint::testing {

// The value every test expects at element j of a tensor seeded `seed` (exact in fp32 and torch):
// ((j * 7919 + seed) % 65536 - 32768) / 3000.
float fixture_value(uint64_t seed, uint64_t j);

// A tiny Llama (vocab 32, hidden 8, 1 layer, GQA 2/1 heads, tied embeddings) laid out as one
// flat group with states fp32 / exp_avg / exp_avg_sq, one replicated buffer, and the alias
// lm_head.weight -> model.embed_tokens.weight.
CheckpointManifest tiny_llama_manifest(int zero_stage, uint32_t world_size);
// The config.json of that model.
std::string tiny_llama_config();

// Every rank's data for `manifest`: state s of parameter p holds fixture_value(seed(p, s), j);
// replicated tensor i holds fixture_value(1000 + i, j) as F32.
class FixtureData {
 public:
  explicit FixtureData(const CheckpointManifest& manifest);
  // Rank views, valid while this object lives.
  std::vector<RankData> ranks() const;
  // The full logical flat of group g state s.
  const std::vector<float>& logical(size_t group, size_t state) const { return logical_[group][state]; }
  // Rank r's partition of group g state s at world size w (padding zero), built independently.
  std::vector<float> partition(size_t group, size_t state, uint32_t w, uint32_t r) const;
  static uint64_t seed(size_t param, size_t state) { return 17 * param + 5 * state + 1; }

 private:
  CheckpointManifest manifest_;
  std::vector<std::vector<std::vector<float>>> logical_;
  std::vector<std::vector<std::vector<std::vector<float>>>> partitions_;  // [rank][group][state]
  std::vector<std::vector<float>> replicated_;
};

// The compact twin of `raw` (tiny_llama_manifest's layout): each group's states[0] kCompactMaster,
// "exp_avg" kBlockwise8 with I8 codes, "exp_avg_sq" kBlockwise8 with U8 codes, all decoding to F32.
CheckpointManifest compact_manifest(const CheckpointManifest& raw);

// Every rank's data for compact_manifest(raw): FixtureData's values made optimizer-like (master / 64,
// exp_avg * 1e-3, exp_avg_sq = v * v * 1e-6, so >= 0), encoded per rank partition with cpu_adam's
// split_master and encode_moment_blocks (blocks from partition element 0), as an engine saves them.
class CompactFixtureData {
 public:
  explicit CompactFixtureData(const CheckpointManifest& raw);
  const CheckpointManifest& manifest() const { return manifest_; }
  // Rank views, valid while this object lives.
  std::vector<RankData> ranks() const;
  // Rank r's fp32 partition of group g state s at world size w (padding zero): what was encoded.
  std::vector<float> values(size_t group, size_t state, uint32_t w, uint32_t r) const;
  // The parts written for rank r (at the manifest's world size) of group g state s.
  const std::vector<std::vector<std::byte>>& parts(uint32_t r, size_t group, size_t state) const {
    return parts_[r][group][state];
  }

 private:
  CheckpointManifest manifest_;
  FixtureData raw_;
  std::vector<std::vector<std::vector<std::vector<std::vector<std::byte>>>>> parts_;  // [rank][group][state][part]
  std::vector<std::vector<float>> replicated_;
};

}  // namespace tierzero::checkpoint::testing
