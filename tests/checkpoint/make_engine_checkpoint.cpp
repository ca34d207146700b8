// Writes a synthetic Llama-shaped tierzero checkpoint for benchmarks (`tierzero convert` and
// `tierzero checkpoint verify` on multi-GB inputs). One rank's partitions are in memory at a time.
// Element j of parameter p, state s, holds ((j * 7919 + seed) % 65536 - 32768) / 3000 with
// seed = p + 1 + 1000 * s (exact in fp32); DIR/spec.json lists each parameter's seed and shape in
// the format tests/checkpoint/check_converted.py reads, so a converted model can be checked.
//
//   make_engine_checkpoint DIR [--layers 12] [--hidden 2048] [--intermediate 5632] [--vocab 32000]
//                              [--world 4] [--stage 3] [--states 3] [--zstd 0] [--compact 0]
//                              [--pieces 0]
//   --compact 1: the states encoded as the compact optimizer holds them (master hi + residual,
//   8-bit moments; encode_partition), --pieces N: RankData::piece_elements N (record by record).
//   make_engine_checkpoint --check DIR OUT    checks `tierzero convert DIR OUT`'s safetensors (F32,
//                                             BF16 or F16) against DIR/spec.json; exit 0 when equal
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/safetensors/safetensors.h"
#include "tests/common/float16_reference.h"

using namespace tierzero;
using namespace tierzero::checkpoint;

namespace {

struct Shape {
  int layers = 12;
  int64_t hidden = 2048;
  int64_t intermediate = 5632;
  int64_t vocab = 32000;
};

CheckpointManifest llama_manifest(const Shape& s, int stage, uint32_t world, int states) {
  CheckpointManifest m;
  m.zero_stage = stage;
  m.world_size = world;
  m.step = 1000;
  FlatGroup g;
  g.params.push_back({"model.embed_tokens.weight", {s.vocab, s.hidden}});
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    g.params.push_back({p + "input_layernorm.weight", {s.hidden}});
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      g.params.push_back({p + "self_attn." + proj + ".weight", {s.hidden, s.hidden}});
    }
    g.params.push_back({p + "post_attention_layernorm.weight", {s.hidden}});
    g.params.push_back({p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}});
    g.params.push_back({p + "mlp.up_proj.weight", {s.intermediate, s.hidden}});
    g.params.push_back({p + "mlp.down_proj.weight", {s.hidden, s.intermediate}});
  }
  g.params.push_back({"model.norm.weight", {s.hidden}});
  g.params.push_back({"lm_head.weight", {s.vocab, s.hidden}});
  const char* names[] = {"fp32", "exp_avg", "exp_avg_sq"};
  for (int i = 0; i < states; ++i) g.states.push_back({names[i], ElementType::kF32});
  m.groups.push_back(g);
  m.model_config_json = fmt::format(
      R"({{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": {}, "hidden_size": {}, )"
      R"("intermediate_size": {}, "num_hidden_layers": {}, "num_attention_heads": 16, "num_key_value_heads": 16, )"
      R"("tie_word_embeddings": false, "torch_dtype": "bfloat16"}})",
      s.vocab, s.hidden, s.intermediate, s.layers);
  return m;
}

float value(uint64_t seed, uint64_t j) {
  return static_cast<float>(static_cast<int64_t>((j * 7919 + seed) % 65536) - 32768) / 3000.0f;
}

// Rank `rank`'s partition of state `state`: every segment's elements from their parameters.
std::vector<float> partition(const CheckpointManifest& m, uint32_t rank, int state) {
  const FlatGroup& g = m.groups[0];
  std::vector<float> out(partition_numel(g, m.zero_stage, m.world_size, m.alignment), 0.0f);
  std::vector<uint64_t> starts{0};  // logical offset of each parameter
  for (const TensorSpec& p : g.params) starts.push_back(starts.back() + static_cast<uint64_t>(p.numel()));
  for (const PartitionSegment& s : partition_segments(g, m.zero_stage, m.world_size, m.alignment, rank)) {
    size_t p = 0;
    for (uint64_t k = 0; k < s.length; ++k) {
      const uint64_t logical = s.logical_begin + k;
      while (starts[p + 1] <= logical) ++p;
      out[s.partition_begin + k] = value(p + 1 + 1000 * static_cast<uint64_t>(state), logical - starts[p]);
    }
  }
  return out;
}

void write_spec(const CheckpointManifest& m, const std::string& path) {
  nlohmann::json tensors = nlohmann::json::object();
  for (size_t p = 0; p < m.groups[0].params.size(); ++p) {
    tensors[m.groups[0].params[p].name] = {{"seed", p + 1}, {"shape", m.groups[0].params[p].shape}};
  }
  std::ofstream(path) << nlohmann::json{{"tensors", tensors}, {"tied", nlohmann::json::object()}}.dump();
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// Every tensor of spec.json, found in OUT's files, equals the generator's values in its dtype.
int check_conversion(const std::string& dir, const std::string& out) {
  const nlohmann::json spec = read_json(dir + "/spec.json");
  std::vector<std::string> files{"model.safetensors"};
  if (std::ifstream(out + "/model.safetensors.index.json")) {
    files.clear();
    const nlohmann::json index = read_json(out + "/model.safetensors.index.json");
    for (const auto& [name, entry] : index["weight_map"].items()) {
      const auto file = entry.get<std::string>();  // g++ 13 finds json == string ambiguous in std::find
      if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
    }
  }
  std::vector<std::unique_ptr<SafetensorsFile>> opened;
  for (const std::string& f : files) opened.push_back(value_or_throw(SafetensorsFile::open(out + "/" + f)));
  size_t checked = 0;
  for (const auto& [name, t] : spec["tensors"].items()) {
    const SafetensorsTensorInfo* info = nullptr;
    const SafetensorsFile* in = nullptr;
    for (const auto& f : opened) {
      if ((info = f->find(name)) != nullptr) {
        in = f.get();
        break;
      }
    }
    if (info == nullptr || info->shape != t["shape"].get<std::vector<int64_t>>()) {
      std::fprintf(stderr, "check: %s is missing from %s or has another shape\n", name.c_str(), out.c_str());
      return 1;
    }
    const auto bytes = in->data(*info);
    const uint64_t seed = t["seed"];
    const uint64_t item = element_bits(info->dtype) / 8;
    for (uint64_t j = 0; j < bytes.size() / item; ++j) {
      const float want = value(seed, j);
      bool same = false;
      if (info->dtype == ElementType::kF32) {
        same = std::memcmp(bytes.data() + 4 * j, &want, 4) == 0;
      } else {
        uint16_t got;
        std::memcpy(&got, bytes.data() + 2 * j, 2);
        same = got == (info->dtype == ElementType::kBF16 ? reference::float_to_bf16_bits(want)
                                                         : reference::float_to_f16_bits(want));
      }
      if (!same) {
        std::fprintf(stderr, "check: %s[%llu] differs from the generator's value %g\n", name.c_str(),
                     static_cast<unsigned long long>(j), want);
        return 1;
      }
    }
    ++checked;
  }
  std::printf("check: %zu tensors in %s equal the generator's values\n", checked, out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--check") return check_conversion(argv[2], argv[3]);
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s DIR [--layers N] [--hidden N] [--intermediate N] [--vocab N] [--world W] "
                 "[--stage S] [--states 1-3] [--zstd LEVEL] [--compact 0|1] [--pieces N]\n       %s --check DIR OUT\n",
                 argv[0], argv[0]);
    return 2;
  }
  Shape shape;
  uint32_t world = 4;
  int stage = 3, states = 3, level = 0;
  bool compact = false;
  uint64_t pieces = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--layers")
      shape.layers = static_cast<int>(v);
    else if (flag == "--hidden")
      shape.hidden = v;
    else if (flag == "--intermediate")
      shape.intermediate = v;
    else if (flag == "--vocab")
      shape.vocab = v;
    else if (flag == "--world")
      world = static_cast<uint32_t>(v);
    else if (flag == "--stage")
      stage = static_cast<int>(v);
    else if (flag == "--states")
      states = static_cast<int>(v);
    else if (flag == "--zstd")
      level = static_cast<int>(v);
    else if (flag == "--compact")
      compact = v != 0;
    else if (flag == "--pieces")
      pieces = static_cast<uint64_t>(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::string dir = argv[1];
  CheckpointManifest m = llama_manifest(shape, stage, world, states);
  for (size_t s = 0; s < m.groups[0].states.size() && compact; ++s) {
    StateSpec& state = m.groups[0].states[s];
    state.codec = s == 0 ? StateCodec::kCompactMaster : StateCodec::kBlockwise8;
    state.codes = s == 1 ? ElementType::kI8 : ElementType::kU8;
  }
  CheckpointOptions options;
  options.compression_level = level;
  const std::string tag = "global_step1000";
  throw_if_error(begin_checkpoint(dir, tag, m, options));
  const uint64_t per_rank = partition_numel(m.groups[0], stage, world, m.alignment);
  std::fprintf(stderr, "%llu parameters, %llu per rank x %d states x %u ranks\n",
               static_cast<unsigned long long>(m.groups[0].numel()), static_cast<unsigned long long>(per_rank), states,
               world);
  for (uint32_t r = 0; r < world; ++r) {
    std::vector<std::vector<float>> buffers;
    std::vector<std::vector<std::byte>> parts;  // --compact
    buffers.reserve(states);
    parts.reserve(2 * states);
    RankData data;
    data.piece_elements = pieces;
    data.group_states.emplace_back();
    for (int s = 0; s < states; ++s) {
      buffers.push_back(partition(m, r, s));
      if (!compact) {
        data.group_states[0].push_back(std::as_bytes(std::span(buffers.back())));
        continue;
      }
      for (auto& part : value_or_throw(encode_partition(m.groups[0].states[s], buffers.back()))) {
        data.group_states[0].push_back(parts.emplace_back(std::move(part)));
      }
      buffers.back() = {};
    }
    throw_if_error(write_checkpoint_rank(dir, tag, m, r, data, options));
    std::fprintf(stderr, "rank %u written\n", r);
  }
  throw_if_error(commit_checkpoint(dir, tag, m, options));
  write_spec(m, dir + "/spec.json");
  return 0;
}
