// Compact engine checkpoints (encoded states, format_version 3): the state saved in the optimizer's
// own layout — the master as bf16 hi + int16 residual, the moments as 8-bit codes + block scales —
// reads back as stored bit for bit, decodes to the fp32 master bit for bit and to the moments an
// independent scalar decoder gives, converts / exports / reshards like the equivalent fp32
// checkpoint, and is refused or reported by name when it cannot be read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/deepspeed_export/deepspeed_export.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint/reshard/reshard.h"
#include "checkpoint_fixture.h"
#include "cpu_adam/adam.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::CompactFixtureData;
using testing::ScratchDir;

// cpu_adam/adam.h's 8-bit codes decoded by their definition, in double: m (I8) sign-magnitude
// E4M3 with subnormals, v (U8) E5M3; times the block's scale, rounded once to float.
float reference_decode(ElementType codes, uint8_t code, float scale) {
  double magnitude = 0;
  if (codes == ElementType::kI8) {
    const int e = (code >> 3) & 0xF, f = code & 7;
    magnitude = e > 0 ? std::ldexp(1.0 + f / 8.0, e - 15) : std::ldexp(f, -17);
    if (code & 0x80) magnitude = -magnitude;
  } else {
    const int e = code >> 3, f = code & 7;
    magnitude = e > 0 ? std::ldexp(1.0 + f / 8.0, e - 31) : std::ldexp(f, -33);
  }
  return static_cast<float>(magnitude * scale);
}

// A partition's 8-bit moment decoded from its stored parts (codes, scales) by reference_decode.
std::vector<float> reference_partition(ElementType codes, const std::vector<std::byte>& code_bytes,
                                       const std::vector<std::byte>& scale_bytes) {
  std::vector<float> scales(scale_bytes.size() / sizeof(float));
  std::memcpy(scales.data(), scale_bytes.data(), scale_bytes.size());
  EXPECT_EQ(scales.size(), (code_bytes.size() + kStateBlock - 1) / kStateBlock);
  std::vector<float> out;
  for (size_t i = 0; i < code_bytes.size(); ++i) {
    out.push_back(reference_decode(codes, static_cast<uint8_t>(code_bytes[i]), scales[i / kStateBlock]));
  }
  return out;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// Logical flat element j of a group held at partition element `at` of rank `rank`, by the layout
// rules of engine_checkpoint.h (stage 0: rank 0 whole; 1-2: even split; 3: per-parameter pieces).
struct Place {
  uint32_t rank;
  uint64_t at;
};
std::vector<Place> logical_places(const CheckpointManifest& m, size_t group) {
  const FlatGroup& g = m.groups[group];
  const uint32_t w = m.world_size;
  std::vector<Place> places;
  if (m.zero_stage == 3) {
    uint64_t base = 0;
    for (const TensorSpec& t : g.params) {
      const auto n = static_cast<uint64_t>(t.numel());
      const uint64_t piece = (n + w - 1) / w;
      for (uint64_t j = 0; j < n; ++j) places.push_back({static_cast<uint32_t>(j / piece), base + j % piece});
      base += piece;
    }
    return places;
  }
  const uint64_t total = g.numel();
  const uint64_t unit = uint64_t{m.alignment} * w;
  const uint64_t per_rank = m.zero_stage == 0 ? total : (total + unit - 1) / unit * unit / w;
  for (uint64_t j = 0; j < total; ++j) places.push_back({static_cast<uint32_t>(j / per_rank), j % per_rank});
  return places;
}

std::vector<float> read_decoded(CheckpointReader& reader, size_t g, size_t s, uint32_t w, uint32_t r) {
  const CheckpointManifest& m = reader.manifest();
  std::vector<float> out(partition_numel(m.groups[g], m.zero_stage, w, m.alignment));
  EXPECT_OK(reader.read_partition(g, s, w, r, std::as_writable_bytes(std::span(out))));
  return out;
}

struct Layout {
  int stage;
  uint32_t world;
  int level;
  uint64_t piece_elements = 0;  // RankData::piece_elements
};

class CompactCheckpoint : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    data_ = std::make_unique<CompactFixtureData>(testing::tiny_llama_manifest(GetParam().stage, GetParam().world));
    CheckpointOptions options;
    options.compression_level = GetParam().level;
    std::vector<RankData> ranks = data_->ranks();
    for (RankData& rank : ranks) rank.piece_elements = GetParam().piece_elements;
    ASSERT_OK(save_checkpoint(dir_.file("ckpt"), "step7", manifest(), ranks, options));
  }
  const CheckpointManifest& manifest() const { return data_->manifest(); }

  ScratchDir dir_;
  std::unique_ptr<CompactFixtureData> data_;
};

TEST_P(CompactCheckpoint, ReadsBackAsStoredAndDecodesExactly) {
  ASSERT_OK(verify_checkpoint(dir_.file("ckpt")));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::open(dir_.file("ckpt")));
  const CheckpointManifest& m = reader->manifest();
  EXPECT_EQ(m.groups[0].states[0].codec, StateCodec::kCompactMaster);
  EXPECT_EQ(m.groups[0].states[2].codes, ElementType::kU8);
  for (uint32_t r = 0; r < m.world_size && rank_stores_groups(m.zero_stage, r); ++r) {
    for (size_t g = 0; g < m.groups.size(); ++g) {
      for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
        const StateSpec& state = m.groups[g].states[s];
        const auto& parts = data_->parts(r, g, s);
        ASSERT_EQ(state_parts(state).size(), parts.size());
        for (size_t p = 0; p < parts.size(); ++p) {
          std::vector<std::byte> stored(parts[p].size());
          ASSERT_OK(reader->read_stored_partition(g, s, p, r, stored));
          EXPECT_EQ(stored, parts[p]) << "rank " << r << " group " << g << " state " << s << " part " << p;
          std::vector<std::byte> streamed(parts[p].size());  // in odd pieces, as a resume into records reads
          for (uint64_t at = 0; at < streamed.size(); at += 61) {
            ASSERT_OK(reader->read_stored(g, s, p, r, at, std::span(streamed).subspan(at, std::min<uint64_t>(61, streamed.size() - at))));
          }
          ASSERT_OK(reader->finish_reads());
          EXPECT_EQ(streamed, parts[p]) << "rank " << r << " group " << g << " state " << s << " part " << p;
        }
        const std::vector<float> decoded = read_decoded(*reader, g, s, m.world_size, r);
        if (state.codec == StateCodec::kCompactMaster) {
          EXPECT_EQ(bits(decoded), bits(data_->values(g, s, m.world_size, r))) << "rank " << r << " group " << g;
        } else {
          EXPECT_EQ(bits(decoded), bits(reference_partition(state.codes, parts[0], parts[1])))
              << "rank " << r << " group " << g << " state " << state.name;
        }
      }
    }
  }
}

// read_flat_range decodes any logical range, streamed in odd-sized pieces across block and rank
// boundaries, to the element the layout rules place there.
TEST_P(CompactCheckpoint, FlatRangesDecodeTheLogicalElements) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::open(dir_.file("ckpt")));
  const CheckpointManifest& m = reader->manifest();
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const std::vector<Place> places = logical_places(m, g);
    for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
      const StateSpec& state = m.groups[g].states[s];
      std::vector<std::vector<float>> expected(m.world_size);
      for (uint32_t r = 0; r < m.world_size && rank_stores_groups(m.zero_stage, r); ++r) {
        expected[r] = state.codec == StateCodec::kCompactMaster
                          ? data_->values(g, s, m.world_size, r)
                          : reference_partition(state.codes, data_->parts(r, g, s)[0], data_->parts(r, g, s)[1]);
      }
      std::vector<float> flat(places.size());
      for (uint64_t begin = 0; begin < flat.size(); begin += 37) {
        const uint64_t n = std::min<uint64_t>(37, flat.size() - begin);
        ASSERT_OK(reader->read_flat_range(g, s, begin,
                                          std::as_writable_bytes(std::span(flat).subspan(begin, n))));
      }
      ASSERT_OK(reader->finish_reads());
      for (uint64_t j = 0; j < flat.size(); ++j) {
        ASSERT_EQ(std::bit_cast<uint32_t>(flat[j]), std::bit_cast<uint32_t>(expected[places[j].rank][places[j].at]))
            << "group " << g << " state " << state.name << " element " << j;
      }
    }
  }
}

// The checkpoint holding the same fp32 values with raw states: the master as it was split, the
// moments as the compact checkpoint decodes them.
CheckpointManifest save_fp32_twin(const std::string& dir, const CompactFixtureData& data, CheckpointReader& compact) {
  CheckpointManifest raw = data.manifest();
  for (FlatGroup& g : raw.groups)
    for (StateSpec& s : g.states) s = {s.name, ElementType::kF32};
  std::vector<std::vector<std::vector<std::vector<float>>>> values(raw.world_size);
  std::vector<RankData> ranks = data.ranks();
  for (uint32_t r = 0; r < raw.world_size; ++r) {
    ranks[r].group_states.clear();
    if (!rank_stores_groups(raw.zero_stage, r)) continue;
    for (size_t g = 0; g < raw.groups.size(); ++g) {
      auto& group = values[r].emplace_back();
      auto& sections = ranks[r].group_states.emplace_back();
      for (size_t s = 0; s < raw.groups[g].states.size(); ++s) {
        group.push_back(s == 0 ? data.values(g, s, raw.world_size, r) : read_decoded(compact, g, s, raw.world_size, r));
        sections.push_back(std::as_bytes(std::span(group.back())));
      }
    }
  }
  EXPECT_OK(save_checkpoint(dir, "step7", raw, ranks));
  return raw;
}

TEST_P(CompactCheckpoint, ConvertsAndExportsAsTheEquivalentFp32Checkpoint) {
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::open(dir_.file("ckpt")));
  save_fp32_twin(dir_.file("fp32"), *data_, *reader);
  ConvertOptions options;
  options.progress = false;
  options.dtype = ElementType::kF32;
  for (const char* source : {"ckpt", "fp32"}) {
    ASSERT_OK_AND_ASSIGN(auto opened, open_engine_checkpoint_source(dir_.file(source)));
    ASSERT_OK(consolidate_to_safetensors(*opened, dir_.file(std::string("hf_") + source), options));
  }
  EXPECT_EQ(testing::read_file(dir_.file("hf_ckpt/model.safetensors")),
            testing::read_file(dir_.file("hf_fp32/model.safetensors")));
}

INSTANTIATE_TEST_SUITE_P(Layouts, CompactCheckpoint,
                         ::testing::Values(Layout{0, 2, 0}, Layout{1, 1, 0}, Layout{2, 2, 1}, Layout{2, 3, 0},
                                           Layout{3, 3, 3}, Layout{0, 1, 0, 256}, Layout{2, 2, 1, 256},
                                           Layout{3, 3, 0, 512}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_world" +
                                  std::to_string(info.param.world) + "_zstd" + std::to_string(info.param.level) +
                                  "_pieces" + std::to_string(info.param.piece_elements);
                         });

// With piece_elements, a rank file is written record by record: the fills are called piece-major
// (every section's piece 0, then piece 1, ...), and the file is the one the same bytes given whole
// make, byte for byte.
TEST(CompactCheckpointPieces, StreamedRecordByRecord) {
  ScratchDir dir;
  const CompactFixtureData data(testing::tiny_llama_manifest(1, 1));
  std::vector<RankData> whole = data.ranks();
  whole[0].piece_elements = 256;
  RankData streamed = whole[0];
  streamed.group_states.clear();
  std::vector<std::pair<size_t, size_t>> calls;  // (group, slot) per fill call
  std::vector<std::vector<uint64_t>> done(whole[0].group_states.size());
  for (size_t g = 0; g < whole[0].group_states.size(); ++g) {
    done[g].assign(whole[0].group_states[g].size(), 0);
    auto& fills = streamed.group_state_fills.emplace_back();
    for (size_t k = 0; k < whole[0].group_states[g].size(); ++k) {
      const std::span<const std::byte> bytes = whole[0].group_states[g][k];
      fills.push_back([&calls, &done, bytes, g, k](std::span<std::byte> out) {
        if (calls.empty() || calls.back() != std::pair{g, k}) calls.emplace_back(g, k);
        std::memcpy(out.data(), bytes.data() + done[g][k], out.size());
        done[g][k] += out.size();
        return Status();
      });
    }
  }
  ASSERT_OK(save_checkpoint(dir.file("whole"), "step7", data.manifest(), whole));
  ASSERT_OK(save_checkpoint(dir.file("streamed"), "step7", data.manifest(), std::span(&streamed, 1)));
  EXPECT_EQ(testing::read_file(dir.file("streamed/step7/rank_00000.bin")),
            testing::read_file(dir.file("whole/step7/rank_00000.bin")));
  // Group 0 (856 elements at stage 1, world 1: 4 pieces, 256 each but the last) x 6 sections, then
  // group 1 (24: one piece) x 4 sections (fp32 and exp_avg), each piece of every section in turn.
  std::vector<std::pair<size_t, size_t>> expected;
  for (int piece = 0; piece < 4; ++piece)
    for (size_t k = 0; k < 6; ++k) expected.emplace_back(0, k);
  for (size_t k = 0; k < 4; ++k) expected.emplace_back(1, k);
  EXPECT_EQ(calls, expected);
  ASSERT_OK(verify_checkpoint(dir.file("streamed")));
  const nlohmann::json m = nlohmann::json::parse(testing::read_text(dir.file("streamed/step7/manifest.json")));
  EXPECT_EQ(m["files"][0]["sections"][6]["first"], 256);
}

TEST(CompactCheckpointPieces, AMisplacedPieceIsRefused) {
  ScratchDir dir;
  const CompactFixtureData data(testing::tiny_llama_manifest(1, 1));
  std::vector<RankData> ranks = data.ranks();
  ranks[0].piece_elements = 100;
  EXPECT_ERROR(save_checkpoint(dir.file("ckpt"), "step7", data.manifest(), ranks), ErrorCode::kInvalidArgument,
               "piece_elements 100 must be a multiple of 256");
  ranks[0].piece_elements = 256;
  ASSERT_OK(save_checkpoint(dir.file("ckpt"), "step7", data.manifest(), ranks));
  nlohmann::json m = nlohmann::json::parse(testing::read_text(dir.file("ckpt/step7/manifest.json")));
  m["files"][0]["sections"][6]["first"] = 512;  // group 0 state 'fp32' part 'hi', second piece
  testing::write_text(dir.file("ckpt/step7/manifest.json"), m.dump(1) + "\n");
  ASSERT_OK_AND_ASSIGN(const std::string checksums, make_checksum_file(dir.file("ckpt/step7"), 1));
  testing::write_text(dir.file("ckpt/step7/checksums.txt"), checksums);
  EXPECT_ERROR(CheckpointReader::open(dir.file("ckpt")), ErrorCode::kCorrupt,
               "group 0 state 'fp32' part 'hi' has a section of 512 bytes at element 512 where element 256 was due");
}

// The DeepSpeed export (one group of fp32 / exp_avg / exp_avg_sq, no buffers) of a compact
// checkpoint is, file for file, the export of its fp32 twin.
TEST(CompactCheckpointExport, DeepSpeedFilesAreTheFp32TwinsFiles) {
  ScratchDir dir;
  CheckpointManifest raw = testing::tiny_llama_manifest(2, 2);
  raw.groups.resize(1);
  raw.replicated.clear();
  raw.aliases.clear();
  raw.loss_scaler = {{"cur_scale", 1.0}, {"cur_iter", 7}, {"last_overflow_iter", -1}, {"cur_hysteresis", 1},
                     {"dynamic", false}};
  const CompactFixtureData data(raw);
  ASSERT_OK(save_checkpoint(dir.file("ckpt"), "step7", data.manifest(), data.ranks()));
  ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::open(dir.file("ckpt")));
  save_fp32_twin(dir.file("fp32"), data, *reader);
  DeepSpeedExportOptions options;
  options.world_size = 3;
  for (const char* source : {"ckpt", "fp32"}) {
    ASSERT_OK(export_deepspeed_checkpoint(dir.file(source), "", dir.file(std::string("ds_") + source), options));
  }
  size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.file("ds_fp32"))) {
    if (!entry.is_regular_file()) continue;
    const std::string relative = std::filesystem::relative(entry.path(), dir.file("ds_fp32")).string();
    EXPECT_EQ(testing::read_file(dir.file("ds_ckpt/" + relative)), testing::read_file(entry.path().string()))
        << relative;
    ++files;
  }
  EXPECT_GT(files, 3u);
}

// Resharding keeps the encoding: the master splits exactly at the new partitioning; the moments are
// cpu_adam's encoding of the values the source decodes to there (new codes, close to the old values).
TEST(CompactCheckpointReshard, DecodesAtTheNewWorldSize) {
  for (const auto& [from, to] : {std::pair{2u, 1u}, std::pair{1u, 3u}}) {
    ScratchDir dir;
    const CompactFixtureData data(testing::tiny_llama_manifest(2, from));
    ASSERT_OK(save_checkpoint(dir.file("src"), "step7", data.manifest(), data.ranks()));
    ReshardOptions options;
    options.world_size = to;
    ASSERT_OK(reshard_engine_checkpoint(dir.file("src"), dir.file("out"), options));
    ASSERT_OK(verify_checkpoint(dir.file("out")));
    ASSERT_OK_AND_ASSIGN(auto source, CheckpointReader::open(dir.file("src")));
    ASSERT_OK_AND_ASSIGN(auto out, CheckpointReader::open(dir.file("out")));
    const CheckpointManifest& m = out->manifest();
    ASSERT_EQ(m.world_size, to);
    for (uint32_t r = 0; r < to; ++r) {
      for (size_t g = 0; g < m.groups.size(); ++g) {
        for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
          const StateSpec& state = m.groups[g].states[s];
          const std::vector<float> got = read_decoded(*out, g, s, to, r);
          const std::vector<float> source_values = read_decoded(*source, g, s, to, r);
          if (state.codec == StateCodec::kCompactMaster) {
            EXPECT_EQ(bits(got), bits(data.values(g, s, to, r))) << from << "->" << to << " rank " << r;
            continue;
          }
          std::vector<std::byte> codes(source_values.size());
          std::vector<float> scales(cpu_adam::moment_block_count(source_values.size()));
          ASSERT_OK(cpu_adam::encode_moment_blocks(source_values, {codes.data(), codes.size(), state.codes}, scales));
          std::vector<std::byte> stored(codes.size());
          ASSERT_OK(out->read_stored_partition(g, s, 0, r, stored));
          EXPECT_EQ(stored, codes) << from << "->" << to << " rank " << r << " state " << state.name;
          std::vector<std::byte> scale_bytes(scales.size() * sizeof(float));
          std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
          EXPECT_EQ(bits(got), bits(reference_partition(state.codes, codes, scale_bytes)));
          // Within the code's rounding of the source's values: 2^-4 relative, or 2^-17 of the block's absmax.
          for (size_t i = 0; i < got.size(); ++i) {
            const double tolerance =
                std::max(std::abs(source_values[i]) / 16.0, scales[i / kStateBlock] * std::ldexp(1.0, -17)) * 1.001;
            ASSERT_LE(std::abs(got[i] - source_values[i]), tolerance) << state.name << " element " << i;
          }
        }
      }
    }
  }
}

class CompactCheckpointDamage : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = std::make_unique<CompactFixtureData>(testing::tiny_llama_manifest(2, 2));
    ASSERT_OK(save_checkpoint(dir_.file("ckpt"), "step7", data_->manifest(), data_->ranks()));
  }
  nlohmann::json manifest_json() const {
    return nlohmann::json::parse(testing::read_text(dir_.file("ckpt/step7/manifest.json")));
  }
  // Rewrites manifest.json and its checksums.txt entry, as a writer of `m` would.
  void write_manifest(const nlohmann::json& m) {
    testing::write_text(dir_.file("ckpt/step7/manifest.json"), m.dump(1) + "\n");
    ASSERT_OK_AND_ASSIGN(const std::string checksums, make_checksum_file(dir_.file("ckpt/step7"), 2));
    testing::write_text(dir_.file("ckpt/step7/checksums.txt"), checksums);
  }

  ScratchDir dir_;
  std::unique_ptr<CompactFixtureData> data_;
};

TEST_F(CompactCheckpointDamage, VerifyNamesTheRankAndSectionOfADamagedScale) {
  const nlohmann::json m = manifest_json();
  EXPECT_EQ(m["format_version"], 3);
  uint64_t offset = 0;
  for (const auto& section : m["files"][1]["sections"]) {
    if (section["state"] == 2 && section["part"] == 1) offset = section["offset"].get<uint64_t>();
  }
  ASSERT_GT(offset, 0u);
  auto bytes = testing::read_file(dir_.file("ckpt/step7/rank_00001.bin"));
  bytes[offset + 5] ^= 0x10;
  testing::write_file(dir_.file("ckpt/step7/rank_00001.bin"), bytes);
  const Status s = verify_checkpoint(dir_.file("ckpt")).status();
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  for (const char* part : {"rank_00001.bin", "rank 1 group 0 state 'exp_avg_sq' part 'scales'", "checksum mismatch"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  }
}

// A scale no encoder writes (negative, NaN, inf) under a valid checksum: verify reports it.
TEST(CompactCheckpointScales, VerifyRefusesAScaleNoEncoderWrites) {
  ScratchDir dir;
  const CompactFixtureData data(testing::tiny_llama_manifest(1, 1));
  std::vector<RankData> ranks = data.ranks();
  std::vector<std::byte> scales = data.parts(0, 0, 1)[1];
  const float bad = -1.0f;
  std::memcpy(scales.data() + 2 * sizeof(float), &bad, sizeof(float));
  ranks[0].group_states[0][3] = scales;  // fp32 hi, residual, exp_avg codes, scales
  ASSERT_OK(save_checkpoint(dir.file("ckpt"), "step7", data.manifest(), ranks));
  EXPECT_ERROR(verify_checkpoint(dir.file("ckpt")), ErrorCode::kCorrupt,
               "rank 0 group 0 state 'exp_avg' part 'scales' (section at offset");
  EXPECT_ERROR(verify_checkpoint(dir.file("ckpt")), ErrorCode::kCorrupt, "scale 2 is -1");
}

TEST_F(CompactCheckpointDamage, AnUnknownCodecIsRefusedByName) {
  nlohmann::json m = manifest_json();
  m["groups"][0]["states"][1]["codec"] = "blockwise4";
  write_manifest(m);
  EXPECT_ERROR(CheckpointReader::open(dir_.file("ckpt")), ErrorCode::kUnsupported, "codec 'blockwise4'");
  EXPECT_ERROR(verify_checkpoint(dir_.file("ckpt")), ErrorCode::kUnsupported, "state 'exp_avg'");
}

TEST_F(CompactCheckpointDamage, AnotherBlockSizeIsRefusedByName) {
  nlohmann::json m = manifest_json();
  m["groups"][0]["states"][2]["block"] = 128;
  write_manifest(m);
  EXPECT_ERROR(CheckpointReader::open(dir_.file("ckpt")), ErrorCode::kUnsupported, "blocks of 128 elements");
}

// A reader of versions 1..2 refuses version 3 by its number (what kManifestVersion's check does with
// any newer version); and a version-2 manifest cannot claim encoded states.
TEST_F(CompactCheckpointDamage, VersionsAreChecked) {
  nlohmann::json m = manifest_json();
  m["format_version"] = 4;
  write_manifest(m);
  EXPECT_ERROR(CheckpointReader::open(dir_.file("ckpt")), ErrorCode::kUnsupported, "format_version 4 is not 1..3");
  m["format_version"] = 2;
  write_manifest(m);
  EXPECT_ERROR(CheckpointReader::open(dir_.file("ckpt")), ErrorCode::kCorrupt, "cannot hold encoded states");
}

// A raw checkpoint is still written as version 2, readable by the tierzero before encoded states.
TEST(CompactCheckpointVersion, ARawCheckpointStaysVersionTwo) {
  ScratchDir dir;
  const CheckpointManifest m = testing::tiny_llama_manifest(1, 1);
  const testing::FixtureData data(m);
  ASSERT_OK(save_checkpoint(dir.file("ckpt"), "step7", m, data.ranks()));
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(dir.file("ckpt/step7/manifest.json")))["format_version"], 2);
}

// Bytes on disk per parameter of a compact master + 8-bit moments state at one rank, the bf16 weights
// included (the master's hi part is them: nothing else stores them): 2 + 2 + 1 + 1 + 8/256.
TEST(CompactCheckpointSize, SixBytesPerParameter) {
  ScratchDir dir;
  CheckpointManifest raw;
  raw.zero_stage = 2;
  FlatGroup g;
  g.params = {{"model.embed_tokens.weight", {1024, 257}}, {"model.norm.weight", {257}}};
  g.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}, {"exp_avg_sq", ElementType::kF32}};
  raw.groups.push_back(g);
  raw.model_config_json = "{}";
  const CompactFixtureData data(raw);
  for (int level : {0, 3}) {
    CheckpointOptions options;
    options.compression_level = level;
    const std::string tag = "level" + std::to_string(level);
    ASSERT_OK(save_checkpoint(dir.file("ckpt"), tag, data.manifest(), data.ranks(), options));
    const double per_param = static_cast<double>(std::filesystem::file_size(dir.file("ckpt/" + tag + "/rank_00000.bin"))) /
                             static_cast<double>(g.numel());
    std::printf("compact master + int8 moments, zstd level %d: %.4f bytes per parameter on disk\n", level, per_param);
    EXPECT_LE(per_param, 6.1);
    if (level == 0) EXPECT_NEAR(per_param, 6.0 + 8.0 / 256, 0.01);
    // A partition of several decode chunks reads back: the master bit for bit, the moments as coded.
    ASSERT_OK_AND_ASSIGN(auto reader, CheckpointReader::open(dir.file("ckpt"), tag));
    EXPECT_EQ(bits(read_decoded(*reader, 0, 0, 1, 0)), bits(data.values(0, 0, 1, 0)));
    for (size_t s : {1, 2}) {
      const auto& parts = data.parts(0, 0, s);
      EXPECT_EQ(bits(read_decoded(*reader, 0, s, 1, 0)),
                bits(reference_partition(data.manifest().groups[0].states[s].codes, parts[0], parts[1])));
    }
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
