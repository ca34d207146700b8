#include "checkpoint_fixture.h"

#include "cpu_adam/adam.h"

namespace tierzero::checkpoint::testing {

float fixture_value(uint64_t seed, uint64_t j) {
  return static_cast<float>(static_cast<int64_t>((j * 7919 + seed) % 65536) - 32768) / 3000.0f;
}

CheckpointManifest tiny_llama_manifest(int zero_stage, uint32_t world_size) {
  CheckpointManifest m;
  m.zero_stage = zero_stage;
  m.world_size = world_size;
  m.step = 1234;
  FlatGroup g;
  const std::string layer = "model.layers.0.";
  g.params = {{"model.embed_tokens.weight", {32, 8}},
              {layer + "input_layernorm.weight", {8}},
              {layer + "self_attn.q_proj.weight", {8, 8}},
              {layer + "self_attn.k_proj.weight", {4, 8}},
              {layer + "self_attn.v_proj.weight", {4, 8}},
              {layer + "self_attn.o_proj.weight", {8, 8}},
              {layer + "post_attention_layernorm.weight", {8}},
              {layer + "mlp.gate_proj.weight", {16, 8}},
              {layer + "mlp.up_proj.weight", {16, 8}},
              {layer + "mlp.down_proj.weight", {8, 16}},
              {"model.norm.weight", {7 + 1}}};
  g.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}, {"exp_avg_sq", ElementType::kF32}};
  m.groups.push_back(g);
  // A second group with odd sizes, so padding and uneven splits are exercised.
  FlatGroup odd;
  odd.params = {{"extra.a", {3, 5}}, {"extra.b", {7}}, {"extra.c", {}}};
  odd.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}};
  m.groups.push_back(odd);
  m.replicated = {{{"model.layers.0.self_attn.rotary_emb.inv_freq", {2}}, ElementType::kF32}};
  m.aliases = {{"lm_head.weight", "model.embed_tokens.weight"}};
  m.loss_scaler = {{"cur_scale", 65536.0}, {"cur_iter", 1234}};
  m.lr_scheduler = {{"last_batch_iteration", 1233}};
  m.data_position = {{"epoch", 1}, {"sample", 4096}};
  m.model_config_json = tiny_llama_config();
  return m;
}

std::string tiny_llama_config() {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32, "hidden_size": 8,
"intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
"head_dim": 4, "max_position_embeddings": 64, "rms_norm_eps": 1e-06, "tie_word_embeddings": true,
"torch_dtype": "bfloat16"}
)";
}

FixtureData::FixtureData(const CheckpointManifest& manifest) : manifest_(manifest) {
  size_t param_index = 0;
  for (const FlatGroup& g : manifest.groups) {
    std::vector<std::vector<float>> states(g.states.size());
    for (size_t s = 0; s < g.states.size(); ++s) {
      size_t p = param_index;
      for (const TensorSpec& t : g.params) {
        for (int64_t j = 0; j < t.numel(); ++j) states[s].push_back(fixture_value(seed(p, s), j));
        ++p;
      }
    }
    param_index += g.params.size();
    logical_.push_back(std::move(states));
  }
  for (uint32_t r = 0; r < manifest.world_size; ++r) {
    std::vector<std::vector<std::vector<float>>> per_group;
    if (rank_stores_groups(manifest.zero_stage, r)) {
      for (size_t g = 0; g < manifest.groups.size(); ++g) {
        std::vector<std::vector<float>> per_state;
        for (size_t s = 0; s < manifest.groups[g].states.size(); ++s) {
          per_state.push_back(partition(g, s, manifest.world_size, r));
        }
        per_group.push_back(std::move(per_state));
      }
    }
    partitions_.push_back(std::move(per_group));
  }
  for (size_t i = 0; i < manifest.replicated.size(); ++i) {
    std::vector<float> v;
    for (int64_t j = 0; j < manifest.replicated[i].spec.numel(); ++j) v.push_back(fixture_value(1000 + i, j));
    replicated_.push_back(std::move(v));
  }
}

// Written from the layout rules in engine_checkpoint.h, not from partition_segments().
std::vector<float> FixtureData::partition(size_t group, size_t state, uint32_t w, uint32_t r) const {
  const FlatGroup& g = manifest_.groups[group];
  const std::vector<float>& flat = logical_[group][state];
  std::vector<float> out;
  if (manifest_.zero_stage == 0) return flat;
  if (manifest_.zero_stage == 3) {
    size_t offset = 0;
    for (const TensorSpec& t : g.params) {
      const auto n = static_cast<size_t>(t.numel());
      const size_t piece = (n + w - 1) / w;
      for (size_t k = 0; k < piece; ++k) {
        const size_t j = r * piece + k;
        out.push_back(j < n ? flat[offset + j] : 0.0f);
      }
      offset += n;
    }
    return out;
  }
  const size_t unit = size_t{manifest_.alignment} * w;
  const size_t padded = (flat.size() + unit - 1) / unit * unit;
  const size_t per_rank = padded / w;
  for (size_t k = 0; k < per_rank; ++k) {
    const size_t j = r * per_rank + k;
    out.push_back(j < flat.size() ? flat[j] : 0.0f);
  }
  return out;
}

std::vector<RankData> FixtureData::ranks() const {
  std::vector<RankData> ranks(manifest_.world_size);
  for (uint32_t r = 0; r < manifest_.world_size; ++r) {
    for (const auto& per_state : partitions_[r]) {
      std::vector<std::span<const std::byte>> states;
      for (const auto& v : per_state) states.push_back(std::as_bytes(std::span(v)));
      ranks[r].group_states.push_back(std::move(states));
    }
    if (r == 0) {
      for (const auto& v : replicated_) ranks[r].replicated.push_back(std::as_bytes(std::span(v)));
    }
    ranks[r].rank_state = {{"rng_seed", 42 + r}};
  }
  return ranks;
}

CheckpointManifest compact_manifest(const CheckpointManifest& raw) {
  CheckpointManifest m = raw;
  for (FlatGroup& g : m.groups) {
    for (size_t s = 0; s < g.states.size(); ++s) {
      StateSpec& state = g.states[s];
      if (s == 0) state.codec = StateCodec::kCompactMaster;
      if (state.name == "exp_avg" || state.name == "exp_avg_sq") {
        state.codec = StateCodec::kBlockwise8;
        state.codes = state.name == "exp_avg" ? ElementType::kI8 : ElementType::kU8;
      }
    }
  }
  return m;
}

CompactFixtureData::CompactFixtureData(const CheckpointManifest& raw) : manifest_(compact_manifest(raw)), raw_(raw) {
  const CheckpointManifest& m = manifest_;
  parts_.resize(m.world_size);
  for (uint32_t r = 0; r < m.world_size && rank_stores_groups(m.zero_stage, r); ++r) {
    for (size_t g = 0; g < m.groups.size(); ++g) {
      auto& per_state = parts_[r].emplace_back();
      for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
        const StateSpec& state = m.groups[g].states[s];
        const std::vector<float> v = values(g, s, m.world_size, r);
        auto& parts = per_state.emplace_back();
        if (state.codec == StateCodec::kCompactMaster) {
          std::vector<uint16_t> hi(v.size());
          std::vector<int16_t> residual(v.size());
          throw_if_error(cpu_adam::split_master(v, hi, residual));
          parts.emplace_back(std::as_bytes(std::span(hi)).begin(), std::as_bytes(std::span(hi)).end());
          parts.emplace_back(std::as_bytes(std::span(residual)).begin(), std::as_bytes(std::span(residual)).end());
        } else if (state.codec == StateCodec::kBlockwise8) {
          std::vector<std::byte> codes(v.size());
          std::vector<float> scales(cpu_adam::moment_block_count(v.size()));
          throw_if_error(cpu_adam::encode_moment_blocks(v, {codes.data(), codes.size(), state.codes}, scales));
          parts.push_back(codes);
          parts.emplace_back(std::as_bytes(std::span(scales)).begin(), std::as_bytes(std::span(scales)).end());
        } else {
          parts.emplace_back(std::as_bytes(std::span(v)).begin(), std::as_bytes(std::span(v)).end());
        }
      }
    }
  }
  for (size_t i = 0; i < m.replicated.size(); ++i) {
    std::vector<float> v;
    for (int64_t j = 0; j < m.replicated[i].spec.numel(); ++j) v.push_back(fixture_value(1000 + i, j));
    replicated_.push_back(std::move(v));
  }
}

std::vector<float> CompactFixtureData::values(size_t group, size_t state, uint32_t w, uint32_t r) const {
  std::vector<float> v = raw_.partition(group, state, w, r);
  const std::string& name = manifest_.groups[group].states[state].name;
  for (float& x : v) {
    if (state == 0) x = x / 64.0f;
    else if (name == "exp_avg") x = x * 1e-3f;
    else if (name == "exp_avg_sq") x = x * x * 1e-6f;
  }
  return v;
}

std::vector<RankData> CompactFixtureData::ranks() const {
  std::vector<RankData> ranks(manifest_.world_size);
  for (uint32_t r = 0; r < manifest_.world_size; ++r) {
    for (const auto& per_state : parts_[r]) {
      std::vector<std::span<const std::byte>> sections;
      for (const auto& parts : per_state)
        for (const auto& part : parts) sections.push_back(part);
      ranks[r].group_states.push_back(std::move(sections));
    }
    if (r == 0) {
      for (const auto& v : replicated_) ranks[r].replicated.push_back(std::as_bytes(std::span(v)));
    }
    ranks[r].rank_state = {{"rng_seed", 42 + r}};
  }
  return ranks;
}

}  // namespace tierzero::checkpoint::testing
